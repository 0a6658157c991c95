/* The GPU-hour quota pass (quota.h): a timer that runs rung_quota_pass, logs the owners it found
 * over or back under their quota and wakes the waiters for the latter once the statement committed.
 * Owns its two timer events. */
#include "quota.h"

#include <stdbool.h>
#include <stdlib.h>

#include <event2/event.h>
#include <jansson.h>

#include "app.h"
#include "db.h"
#include "lease.h"
#include "log.h"
#include "sql.h"
#include "util.h"

struct quota {
	struct app *app;
	struct event *timer; /* every interval */
	struct event *first; /* one-shot: the first pass at start-up */
	bool busy;           /* a statement is in flight */
	bool orphaned;       /* freed while busy: the callback frees the struct */
};

static void on_pass(PGresult *res, const char *err, void *arg)
{
	struct quota *q = arg;
	json_t *doc, *v;
	size_t i;

	q->busy = false;
	if (q->orphaned) {
		free(q);
		return;
	}
	if (!res) { /* no connection: the database is down or restarting; the next tick tries again */
		log_debug("quota pass skipped", "error=\"%s\"", err ? err : "?");
		return;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		log_warn("quota pass failed", "error=\"%s\"", PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?");
		return;
	}
	doc = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
	json_array_foreach(json_object_get(doc, "capped"), i, v)
		/* "team-a", or "team-a/h200" for a quota per pool (migration 037) */
		log_info("owner over its gpu-hour quota", "owner=%s", json_string_value(v) ?: "?");
	json_array_foreach(json_object_get(doc, "freed"), i, v)
		log_info("owner back under its gpu-hour quota", "owner=%s", json_string_value(v) ?: "?");
	if (json_array_size(json_object_get(doc, "freed")) > 0)
		lease_announce(q->app->lease); /* after the commit: its queued jobs may start on any replica's GPUs */
	json_decref(doc);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct quota *q = arg;

	(void)fd;
	(void)what;
	if (q->busy || q->app->stopping)
		return;
	q->busy = true;
	db_exec(q->app->db, sql_quota_pass, 0, NULL, on_pass, q);
}

struct quota *quota_new(struct app *app, int interval_ms)
{
	struct quota *q = xcalloc(1, sizeof *q);
	struct timeval tv = { interval_ms / 1000, (interval_ms % 1000) * 1000 };

	q->app = app;
	q->timer = event_new(app->base, -1, EV_PERSIST, on_timer, q);
	q->first = event_new(app->base, -1, 0, on_timer, q);
	if (!q->timer || !q->first)
		abort();
	event_add(q->timer, &tv);
	event_active(q->first, EV_TIMEOUT, 0);
	return q;
}

void quota_stop(struct quota *q)
{
	if (!q)
		return;
	event_del(q->timer);
	event_del(q->first);
}

void quota_free(struct quota *q)
{
	if (!q)
		return;
	event_free(q->timer);
	event_free(q->first);
	if (q->busy)
		q->orphaned = true;
	else
		free(q);
}
