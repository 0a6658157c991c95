/* Long-poll leases: a list of waiters, each either claiming (one claim statement in flight) or
 * parked (waiting for a wake, the fallback poll or its deadline). Owns the waiters and their
 * timers; the claim itself is the rung_claim() SQL function (migrations/001_init.sql). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "app.h"
#include "db.h"
#include "http.h"
#include "lease.h"
#include "log.h"
#include "sql.h"
#include "util.h"

enum waiter_state {
	W_CLAIMING, /* a claim statement is in flight */
	W_PARKED,   /* waiting for a wake or the deadline */
};

struct waiter {
	struct lease_mgr *m;
	struct hreq *h;
	enum waiter_state state;
	long long worker_id;
	char *gpu_uuid;
	char *gpu_before;        /* JSON text or NULL */
	struct event *deadline;  /* NULL when wait_ms is 0 */
	bool expired;            /* the deadline passed while claiming */
	bool rewake;             /* woken while claiming: claim again if nothing was found */
	struct waiter *prev, *next;
};

struct lease_mgr {
	struct app *app;
	struct waiter *head;
	int count;
	bool stopping;
	struct event *poll;      /* --poll-fallback-ms */
};

struct release_arg {
	long long attempt_id;
	long long job_id;
	char *token;
};

static void waiter_claim(struct waiter *w);

static void waiter_unlink_free(struct waiter *w)
{
	struct lease_mgr *m = w->m;

	if (w->prev)
		w->prev->next = w->next;
	else
		m->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	m->count--;
	if (w->deadline)
		event_free(w->deadline);
	free(w->gpu_uuid);
	free(w->gpu_before);
	free(w);
}

/* Answers the waiter's request (json stolen; NULL = 204) and frees the waiter. */
static void waiter_answer(struct waiter *w, int code, json_t *body)
{
	struct hreq *h = w->h;

	w->h = NULL;
	h->on_gone = NULL;
	waiter_unlink_free(w);
	hreq_reply(h, code, body);
}

static void on_released(PGresult *res, const char *err, void *arg)
{
	struct release_arg *r = arg;

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK)
		log_info("lease released", "job=%lld attempt=%lld reason=client_gone released=%s", r->job_id,
			 r->attempt_id, PQgetvalue(res, 0, 0));
	else
		log_error("lease release failed", "job=%lld attempt=%lld error=\"%s\" (the reaper ends it at lease expiry)",
			  r->job_id, r->attempt_id, res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : err);
	free(r->token);
	free(r);
}

static void release_lease(struct app *app, json_t *lease)
{
	struct release_arg *r = xcalloc(1, sizeof *r);
	char id[32];
	const char *params[2];

	r->attempt_id = json_integer_value(json_object_get(lease, "attempt_id"));
	r->job_id = json_integer_value(json_object_get(lease, "job_id"));
	r->token = xstrdup(json_string_value(json_object_get(lease, "token")) ?: "");
	snprintf(id, sizeof id, "%lld", r->attempt_id);
	params[0] = id;
	params[1] = r->token;
	db_exec(app->db, sql_release, 2, params, on_released, r);
}

static void on_claim(PGresult *res, const char *err, void *arg)
{
	struct waiter *w = arg;
	struct app *app = w->m->app;
	json_t *doc = NULL, *lease;
	const char *status;

	if (!res) {
		waiter_answer(w, 503, json_pack("{s:s, s:s, s:n}", "error", "database_unavailable",
						"message", err ? err : "database unavailable", "field"));
		return;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		log_error("claim failed", "worker=%lld gpu=%s error=\"%s\"", w->worker_id, w->gpu_uuid,
			  PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
		waiter_answer(w, 500, json_pack("{s:s, s:s, s:n}", "error", "internal",
						"message", "claim failed", "field"));
		return;
	}
	doc = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
	status = json_string_value(json_object_get(doc, "status"));
	if (!status)
		status = "none";
	if (strcmp(status, "ok") == 0) {
		lease = json_incref(json_object_get(doc, "lease"));
		json_object_set_new(lease, "heartbeat_ms", json_integer(app->heartbeat_ms));
		if (w->h->gone) {
			release_lease(app, lease);
			json_decref(lease);
			waiter_answer(w, 200, NULL);
		} else {
			log_info("lease granted", "job=%lld attempt=%lld number=%lld worker=%lld gpu=%s",
				 (long long)json_integer_value(json_object_get(lease, "job_id")),
				 (long long)json_integer_value(json_object_get(lease, "attempt_id")),
				 (long long)json_integer_value(json_object_get(lease, "number")), w->worker_id,
				 w->gpu_uuid);
			waiter_answer(w, 200, lease);
		}
	} else if (strcmp(status, "no_worker") == 0) {
		waiter_answer(w, 404, json_pack("{s:s, s:s, s:n}", "error", "unknown_worker", "message",
						"no such worker: register first", "field"));
	} else if (strcmp(status, "no_gpu") == 0) {
		waiter_answer(w, 400, json_pack("{s:s, s:s, s:s}", "error", "unknown_gpu", "message",
						"this GPU is not registered to this worker", "field", "gpu_uuid"));
	} else if (w->h->gone || w->expired || !w->deadline || w->m->stopping) {
		waiter_answer(w, 204, NULL);
	} else if (w->rewake) {
		w->rewake = false;
		waiter_claim(w);
	} else {
		w->state = W_PARKED;
	}
	json_decref(doc);
}

static void waiter_claim(struct waiter *w)
{
	struct app *app = w->m->app;
	char worker[32], lease_s[32];
	const char *params[4];

	snprintf(worker, sizeof worker, "%lld", w->worker_id);
	snprintf(lease_s, sizeof lease_s, "%d", app->lease_seconds);
	params[0] = worker;
	params[1] = w->gpu_uuid;
	params[2] = lease_s;
	params[3] = w->gpu_before;
	w->state = W_CLAIMING;
	w->rewake = false;
	db_exec(app->db, sql_claim, 4, params, on_claim, w);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct waiter *w = arg;

	(void)fd;
	(void)what;
	if (w->state == W_PARKED)
		waiter_answer(w, 204, NULL);
	else
		w->expired = true;
}

static void on_gone(struct hreq *h, void *arg)
{
	struct waiter *w = arg;

	(void)h;
	if (w->state == W_PARKED)
		waiter_answer(w, 204, NULL); /* only frees: nobody is listening */
	/* W_CLAIMING: on_claim sees h->gone and releases what it claimed */
}

static void on_poll(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	lease_wake(arg);
}

struct lease_mgr *lease_new(struct app *app)
{
	struct lease_mgr *m = xcalloc(1, sizeof *m);
	struct timeval tv = { app->poll_fallback_ms / 1000, (app->poll_fallback_ms % 1000) * 1000 };

	m->app = app;
	m->poll = event_new(app->base, -1, EV_PERSIST, on_poll, m);
	if (app->poll_fallback_ms > 0)
		event_add(m->poll, &tv);
	return m;
}

void lease_free(struct lease_mgr *m)
{
	if (!m)
		return;
	while (m->head) {
		log_error("lease waiter still open at exit", "worker=%lld", m->head->worker_id);
		waiter_unlink_free(m->head);
	}
	event_free(m->poll);
	free(m);
}

void lease_park(struct lease_mgr *m, struct hreq *h, long long worker_id, const char *gpu_uuid,
		json_t *gpu_before, int wait_ms)
{
	struct waiter *w = xcalloc(1, sizeof *w);

	w->m = m;
	w->h = h;
	w->worker_id = worker_id;
	w->gpu_uuid = xstrdup(gpu_uuid);
	w->gpu_before = gpu_before ? json_dumps(gpu_before, JSON_COMPACT) : NULL;
	json_decref(gpu_before);
	if (wait_ms > 0) {
		struct timeval tv = { wait_ms / 1000, (wait_ms % 1000) * 1000 };
		w->deadline = evtimer_new(m->app->base, on_deadline, w);
		evtimer_add(w->deadline, &tv);
	}
	w->next = m->head;
	if (m->head)
		m->head->prev = w;
	m->head = w;
	m->count++;
	h->on_gone = on_gone;
	h->on_gone_arg = w;
	waiter_claim(w);
}

void lease_wake(struct lease_mgr *m)
{
	if (!m)
		return;
	for (struct waiter *w = m->head; w; w = w->next) {
		if (w->state == W_PARKED)
			waiter_claim(w);
		else
			w->rewake = true;
	}
}

void lease_shutdown(struct lease_mgr *m)
{
	struct waiter *w, *next;

	if (!m)
		return;
	m->stopping = true;
	event_del(m->poll);
	for (w = m->head; w; w = next) {
		next = w->next;
		if (w->state == W_PARKED)
			waiter_answer(w, 204, NULL);
	}
}

int lease_waiting(const struct lease_mgr *m)
{
	return m ? m->count : 0;
}
