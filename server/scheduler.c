/* The scheduler (scheduler.h): a timer that runs sql/start_due.sql (rung_start_deadline_due, the
 * start deadlines of migration 039, and rung_start_due, in one statement), logs each job it cancelled
 * or queued and wakes the waiters once the statement committed. Owns its two timer events. */
#include "scheduler.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "app.h"
#include "db.h"
#include "lease.h"
#include "log.h"
#include "sql.h"
#include "util.h"

struct scheduler {
	struct app *app;
	struct event *timer;  /* every SCHEDULER_TICK_MS */
	struct event *again;  /* one-shot: the next batch at once after a full one (and the first run) */
	bool busy;            /* a statement is in flight */
	bool orphaned;        /* freed while busy: the callback frees the struct */
};

static void on_run(PGresult *res, const char *err, void *arg)
{
	struct scheduler *s = arg;
	int n, cancelled = 0, queued = 0;

	s->busy = false;
	if (s->orphaned) {
		free(s);
		return;
	}
	if (!res) { /* no connection: the database is down or restarting; the next tick tries again */
		log_debug("start due skipped", "error=\"%s\"", err ? err : "?");
		return;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK) { /* the statement failed: say so, every tick it does */
		log_warn("start due failed", "error=\"%s\"", PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?");
		return;
	}
	n = PQntuples(res);
	for (int r = 0; r < n; r++) {
		if (!strcmp(PQgetvalue(res, r, 0), "cancelled")) {
			cancelled++;
			log_info("job cancelled at its start deadline", "job=%s start_by=%s", PQgetvalue(res, r, 1),
				 PQgetvalue(res, r, 2));
		} else {
			queued++;
			log_info("job queued at its start time", "job=%s run_after=%s", PQgetvalue(res, r, 1),
				 PQgetvalue(res, r, 2));
		}
	}
	if (n == 0)
		return;
	/* after the commit: parked workers on every replica claim them (a cancel too: a job that ran
	 * after the cancelled one may have been queued) */
	lease_announce(s->app->lease);
	if ((cancelled >= SCHEDULER_BATCH || queued >= SCHEDULER_BATCH) && !s->app->stopping)
		event_active(s->again, EV_TIMEOUT, 0);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct scheduler *s = arg;
	char limit[16];
	const char *params[1] = { limit };

	(void)fd;
	(void)what;
	if (s->busy || s->app->stopping)
		return;
	snprintf(limit, sizeof limit, "%d", SCHEDULER_BATCH);
	s->busy = true;
	db_exec(s->app->db, sql_start_due, 1, params, on_run, s);
}

struct scheduler *scheduler_new(struct app *app)
{
	struct scheduler *s = xcalloc(1, sizeof *s);
	struct timeval tv = { SCHEDULER_TICK_MS / 1000, (SCHEDULER_TICK_MS % 1000) * 1000 };

	s->app = app;
	s->timer = event_new(app->base, -1, EV_PERSIST, on_timer, s);
	s->again = event_new(app->base, -1, 0, on_timer, s);
	if (!s->timer || !s->again)
		abort();
	event_add(s->timer, &tv);
	event_active(s->again, EV_TIMEOUT, 0);
	return s;
}

void scheduler_stop(struct scheduler *s)
{
	if (!s)
		return;
	event_del(s->timer);
	event_del(s->again);
}

void scheduler_free(struct scheduler *s)
{
	if (!s)
		return;
	event_free(s->timer);
	event_free(s->again);
	if (s->busy)
		s->orphaned = true;
	else
		free(s);
}
