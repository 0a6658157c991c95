/* The scheduler (scheduler.h): a timer that runs rung_start_deadline_due (the start deadlines,
 * migration 039), then rung_start_due, logs each job it cancelled or queued and wakes the waiters once
 * each statement committed. Owns its two timer events. */
#include "scheduler.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

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
	bool more;            /* this run's deadline pass was a full batch: run again at once */
};

/* The rows of a due run: logged one by one (what), the waiters woken after the commit. Returns how
 * many rows it had (a full batch: the caller runs the pair again at once). */
static int due_rows(struct scheduler *s, PGresult *res, const char *err, const char *what, const char *col)
{
	int n;

	if (!res) { /* no connection: the database is down or restarting; the next tick tries again */
		log_debug("scheduler run skipped", "what=\"%s\" error=\"%s\"", what, err ? err : "?");
		return 0;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK) { /* the statement failed: say so, every tick it does */
		log_warn("scheduler run failed", "what=\"%s\" error=\"%s\"", what,
			 PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?");
		return 0;
	}
	n = PQntuples(res);
	for (int r = 0; r < n; r++)
		log_info(what, "job=%s %s=%s", PQgetvalue(res, r, 0), col, PQgetvalue(res, r, 1));
	if (n > 0) /* after the commit: parked workers on every replica claim them */
		lease_announce(s->app->lease);
	return n;
}

static void on_started(PGresult *res, const char *err, void *arg)
{
	struct scheduler *s = arg;

	s->busy = false;
	if (s->orphaned) {
		free(s);
		return;
	}
	if (due_rows(s, res, err, "job queued at its start time", "run_after") >= SCHEDULER_BATCH)
		s->more = true;
	if (s->more && !s->app->stopping) /* a full batch of either: the next pair at once */
		event_active(s->again, EV_TIMEOUT, 0);
	s->more = false;
}

static void on_deadlines(PGresult *res, const char *err, void *arg)
{
	struct scheduler *s = arg;
	char limit[16];
	const char *params[1] = { limit };

	if (s->orphaned) {
		s->busy = false;
		free(s);
		return;
	}
	/* a job cancelled wakes the waiters too: one that ran after it may have been queued */
	s->more = due_rows(s, res, err, "job cancelled at its start deadline", "start_by") >= SCHEDULER_BATCH;
	if (!res || s->app->stopping) {
		s->busy = false;
		return;
	}
	/* then the start times: still busy, so one pair at a time; a job whose deadline passed is
	 * never queued by it (rung_start_due), so none starts late */
	snprintf(limit, sizeof limit, "%d", SCHEDULER_BATCH);
	db_exec(s->app->db, sql_start_due, 1, params, on_started, s);
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
	/* the start deadlines first (migration 039), then the start times */
	db_exec(s->app->db, sql_start_deadline_due, 1, params, on_deadlines, s);
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
