/* Retention (retention.h): a timer that runs rung_prune in batches and counts what it deleted.
 * Owns its timer and its counter family. */
#include "retention.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>

#include "app.h"
#include "db.h"
#include "log.h"
#include "metrics.h"
#include "sql.h"
#include "util.h"

#define PRUNE_BATCH 500 /* jobs per statement: a short transaction, a few thousand rows deleted */

struct retention {
	struct app *app;
	struct event *timer;           /* every --prune-interval-ms */
	struct event *again;           /* one-shot: the next batch at once after a full one */
	struct metrics_family *pruned; /* rung_retention_pruned_jobs_total */
	bool busy;                     /* a prune statement is in flight */
	bool orphaned;                 /* freed while busy: the callback frees the struct */
};

static void on_pruned(PGresult *res, const char *err, void *arg)
{
	struct retention *r = arg;
	long n;

	r->busy = false;
	if (r->orphaned) {
		free(r);
		return;
	}
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		log_warn("prune failed", "error=\"%s\"", res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : err);
		return;
	}
	n = atol(PQgetvalue(res, 0, 0));
	if (n <= 0)
		return;
	metrics_add(r->pruned, 0, (double)n);
	log_info("jobs pruned", "jobs=%ld retain_days=%d", n, r->app->retain_days);
	if (n >= PRUNE_BATCH && !r->app->stopping)
		event_active(r->again, EV_TIMEOUT, 0);
}

static void prune_run(struct retention *r)
{
	char days[16], limit[16];
	const char *params[3] = { days, limit, metrics_lease_wait_bounds_sql };

	if (r->busy || r->app->stopping)
		return;
	snprintf(days, sizeof days, "%d", r->app->retain_days);
	snprintf(limit, sizeof limit, "%d", PRUNE_BATCH);
	r->busy = true;
	db_exec(r->app->db, sql_prune, 3, params, on_pruned, r);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	prune_run(arg);
}

struct retention *retention_new(struct app *app)
{
	struct retention *r;
	int ms = app->prune_interval_ms > 0 ? app->prune_interval_ms : 60000;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (app->retain_days <= 0)
		return NULL;
	r = xcalloc(1, sizeof *r);
	r->app = app;
	r->pruned = metrics_register(app->metrics, "rung_retention_pruned_jobs_total", "counter",
				     "Ended jobs deleted by retention (--retain-days), with their history.", 1, NULL);
	r->timer = event_new(app->base, -1, EV_PERSIST, on_timer, r);
	r->again = event_new(app->base, -1, 0, on_timer, r);
	if (!r->timer || !r->again)
		abort();
	event_add(r->timer, &tv);
	event_active(r->again, EV_TIMEOUT, 0); /* a first batch as soon as the loop runs, not an interval later */
	return r;
}

void retention_stop(struct retention *r)
{
	if (!r)
		return;
	event_del(r->timer);
	event_del(r->again);
}

void retention_free(struct retention *r)
{
	if (!r)
		return;
	event_free(r->timer);
	event_free(r->again);
	if (r->busy)
		r->orphaned = true;
	else
		free(r);
}
