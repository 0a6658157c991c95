/* The scheduler (scheduler.h): a timer that runs rung_start_due, then rung_start_deadline_due (the
 * start deadlines, migration 039), logs each job it queued or cancelled and wakes the waiters once the
 * statement committed. Owns its two timer events. */
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
};

/* The rows of a due run: logged one by one (what), the waiters woken after the commit, and the next
 * batch at once after a full one. Returns how many rows it had. */
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
	if (n == 0)
		return 0;
	lease_announce(s->app->lease); /* after the commit: parked workers on every replica claim them */
	if (n >= SCHEDULER_BATCH && !s->app->stopping)
		event_active(s->again, EV_TIMEOUT, 0);
	return n;
}

static void on_deadlines(PGresult *res, const char *err, void *arg)
{
	struct scheduler *s = arg;

	s->busy = false;
	if (s->orphaned) {
		free(s);
		return;
	}
	/* a job cancelled wakes the waiters too: one that ran after it may have been queued */
	due_rows(s, res, err, "job cancelled at its start deadline", "start_by");
}

static void on_started(PGresult *res, const char *err, void *arg)
{
	struct scheduler *s = arg;
	char limit[16];
	const char *params[1] = { limit };

	if (s->orphaned) {
		s->busy = false;
		free(s);
		return;
	}
	due_rows(s, res, err, "job queued at its start time", "run_after");
	if (!res || s->app->stopping) {
		s->busy = false;
		return;
	}
	/* then the start deadlines (migration 039): still busy, so one run of the two at a time */
	snprintf(limit, sizeof limit, "%d", SCHEDULER_BATCH);
	db_exec(s->app->db, sql_start_deadline_due, 1, params, on_deadlines, s);
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
	db_exec(s->app->db, sql_start_due, 1, params, on_started, s);
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
