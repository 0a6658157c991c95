/* Lease-expiry reaper of rungd: a persistent timer runs rung_reap() (sql/functions/70_reap.sql)
 * when no earlier run is in flight, logs each lost attempt and wakes parked long-polls when
 * something was re-queued. Owns only its timer. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <jansson.h>

#include "app.h"
#include "db.h"
#include "lease.h"
#include "log.h"
#include "memcache.h"
#include "reaper.h"
#include "sql.h"
#include "util.h"

#define REAP_BATCH "100"

struct reaper {
	struct app *app;
	struct event *timer;
	bool busy;     /* a reap statement is in flight */
	bool orphaned; /* freed while busy: the callback frees the struct */
};

static void on_reaped(PGresult *res, const char *err, void *arg)
{
	struct reaper *r = arg;
	json_t *list = NULL, *item;
	size_t i;
	bool requeued = false;

	r->busy = false;
	if (r->orphaned) {
		free(r);
		return;
	}
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		log_debug("reap skipped", "error=\"%s\"", res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : err);
		return;
	}
	list = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
	json_array_foreach(list, i, item) {
		const char *state = json_string_value(json_object_get(item, "job_state"));
		log_warn("attempt lost", "job=%lld attempt=%lld job_state=%s reason=lease_expired",
			 (long long)json_integer_value(json_object_get(item, "job_id")),
			 (long long)json_integer_value(json_object_get(item, "attempt_id")), state ? state : "?");
		/* queued again, or ended (failed; cancelled, when a cancel was asked for): an ending may queue the
		 * jobs that run after it (migration 036) */
		if (state && (strcmp(state, "queued") == 0 || strcmp(state, "failed") == 0 || strcmp(state, "cancelled") == 0))
			requeued = true;
	}
	json_decref(list);
	if (requeued)
		lease_announce(r->app->lease);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct reaper *r = arg;
	const char *params[1] = { REAP_BATCH };

	(void)fd;
	(void)what;
	if (r->app->stopping)
		return;
	memcache_tick(r->app->memcache, util_mono_ms()); /* refills an invalidation could not start */
	if (r->busy)
		return;
	r->busy = true;
	db_exec(r->app->db, sql_reap, 1, params, on_reaped, r);
}

struct reaper *reaper_new(struct app *app)
{
	struct reaper *r = xcalloc(1, sizeof *r);
	int ms = app->reap_interval_ms > 0 ? app->reap_interval_ms : 1000;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	r->app = app;
	r->timer = event_new(app->base, -1, EV_PERSIST, on_tick, r);
	event_add(r->timer, &tv);
	return r;
}

void reaper_stop(struct reaper *r)
{
	if (r)
		event_del(r->timer);
}

void reaper_free(struct reaper *r)
{
	if (!r)
		return;
	event_free(r->timer);
	if (r->busy)
		r->orphaned = true;
	else
		free(r);
}
