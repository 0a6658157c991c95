/* Preemption timer of rungd: runs rung_preempt_pass() (sql/functions/44_preempt.sql: borrowed work, and
 * with --preempt-priority the jobs an urgent one waits for) when no earlier run is in flight and logs
 * each attempt it marked, counting them by why (rung_preempt_stops_total); the marked attempts' next
 * heartbeats tell their workers to stop (api_attempts.c). Owns only its timer. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>

#include "app.h"
#include "db.h"
#include "log.h"
#include "metrics.h"
#include "preempt.h"
#include "sql.h"
#include "util.h"

#define PREEMPT_BATCH "32"

/* rung_preempt_stops_total{why}: the attempts this replica's passes marked, by the rung_preempt_pass
 * item's "why" (borrowed work given back to its worker's own pool; a job stopped for an urgent one). */
static const char *const why_borrowed[] = { "why", "borrowed", NULL };
static const char *const why_priority[] = { "why", "priority", NULL };
static const char *const *const why_labels[] = { why_borrowed, why_priority };

struct preempt {
	struct app *app;
	struct event *timer;
	char after_s[16];
	char urgent[16]; /* --preempt-priority as text; "" when unset (a NULL parameter) */
	struct metrics_family *stops; /* rung_preempt_stops_total, in app->metrics */
	bool busy;     /* a statement is in flight */
	bool orphaned; /* freed while busy: the callback frees the struct */
};

static void on_done(PGresult *res, const char *err, void *arg)
{
	struct preempt *p = arg;
	json_t *list = NULL, *item;
	size_t i;

	p->busy = false;
	if (p->orphaned) {
		free(p);
		return;
	}
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		log_debug("preempt skipped", "error=\"%s\"", res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : err);
		return;
	}
	list = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
	json_array_foreach(list, i, item) {
		const char *why = json_string_value(json_object_get(item, "why"));
		metrics_add(p->stops, why && !strcmp(why, "priority") ? 1 : 0, 1);
		log_info("preempting", "job=%lld attempt=%lld worker=%lld gpu=%s pool=%s for_job=%lld why=%s",
			 (long long)json_integer_value(json_object_get(item, "job_id")),
			 (long long)json_integer_value(json_object_get(item, "attempt_id")),
			 (long long)json_integer_value(json_object_get(item, "worker_id")),
			 json_string_value(json_object_get(item, "gpu_uuid")) ?: "-",
			 json_string_value(json_object_get(item, "pool")) ?: "-",
			 (long long)json_integer_value(json_object_get(item, "for_job")),
			 why ? why : "-");
	}
	json_decref(list);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct preempt *p = arg;
	const char *params[4] = { p->after_s, PREEMPT_BATCH, p->app->fair_share ? "true" : "false",
				  *p->urgent ? p->urgent : NULL };

	(void)fd;
	(void)what;
	if (p->app->stopping || p->busy)
		return;
	p->busy = true;
	db_exec(p->app->db, sql_preempt, 4, params, on_done, p);
}

struct preempt *preempt_new(struct app *app)
{
	struct preempt *p;
	int ms = app->reap_interval_ms > 0 ? app->reap_interval_ms : 1000;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (app->preempt_after_s < 0)
		return NULL;
	p = xcalloc(1, sizeof *p);
	p->app = app;
	snprintf(p->after_s, sizeof p->after_s, "%d", app->preempt_after_s);
	if (app->has_preempt_priority)
		snprintf(p->urgent, sizeof p->urgent, "%d", app->preempt_priority);
	p->stops = metrics_register(app->metrics, "rung_preempt_stops_total", "counter",
		"Running attempts this rungd's preemption passes marked to stop, by why: borrowed (given back to its "
		"worker's own pool), priority (for an urgent job, --preempt-priority).", 2, why_labels);
	p->timer = event_new(app->base, -1, EV_PERSIST, on_tick, p);
	event_add(p->timer, &tv);
	return p;
}

void preempt_stop(struct preempt *p)
{
	if (p)
		event_del(p->timer);
}

void preempt_free(struct preempt *p)
{
	if (!p)
		return;
	event_free(p->timer);
	if (p->busy)
		p->orphaned = true;
	else
		free(p);
}
