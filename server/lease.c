/* Long-poll leases: parked waiters live in memory only, and claim rounds serve them. A round is
 * one rung_claim_batch() statement (sql/functions/41_claim_batch.sql) for up to LEASE_ROUND_MAX
 * waiters; at most one round is in flight per process. A job's first attempt predicted not to fit
 * the leased GPU (issue 12: the cached profile, memcache.h, and policy_initial) is lowered with one
 * rung_start_lower() before its answer, or, when no rung fits and the fleet has a bigger GPU,
 * handed back to the queue for one with one rung_start_bigger() and its waiter waits on. Owns the
 * waiters, their timers, the round and those first-attempt changes, and the wake-ups between
 * replicas (lease_announce, lease_notified); pushes the number of waiters into the
 * rung_lease_waiters gauge it registers (metrics.h). A woken round tries the parked waiters of every
 * worker pool (migration 026; each waiter's pool is learned from its first round's row), so a job
 * of a small pool is not left for the fallback poll behind hundreds of another pool's parked GPUs. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>

#include <event2/event.h>

#include "app.h"
#include "db.h"
#include "http.h"
#include "jpath.h"
#include "lease.h"
#include "log.h"
#include "memcache.h"
#include "memplan.h"
#include "metrics.h"
#include "policy.h"
#include "pool.h"
#include "sql.h"
#include "util.h"

#define LEASE_ROUND_MAX 512 /* waiters per claim statement */
#define LEASE_ROUND_OLD 128 /* parked waiters retried per round (a wake round stays small and fast; a
			     * round in which every one of them got work is followed by another) */
#define LEASE_RETRIES   3   /* a round that loses a deadlock (40P01) runs again */
#define LEASE_POOLS_MAX 32  /* pools a woken round shares its parked waiters among (more: the rest share
			     * the last place) */

enum waiter_state {
	W_FRESH,    /* never claimed for: its worker and GPU are unchecked; in the next round */
	W_PARKED,   /* claimed for once, found nothing: waits for a wake or its deadline */
	W_CLAIMING, /* in the round in flight */
	W_LOWERING, /* got a first attempt that rung_start_lower is lowering, or rung_start_bigger is
		     * handing back; answered (or parked again) when it returns */
};

struct waiter {
	struct lease_mgr *m;
	struct hreq *h;
	enum waiter_state state;
	long long worker_id;
	char *gpu_uuid;
	json_t *gpu_before;      /* object or NULL */
	struct event *deadline;  /* NULL when wait_ms is 0 */
	bool expired;            /* the deadline passed while claiming */
	bool was_fresh;          /* in the round as a fresh waiter */
	char pool[POOL_NAME_MAX + 1]; /* its worker's pool, from its first round's row ("" before) */
	int pool_slot;           /* in a woken round as a parked waiter: its place in round_pool; else -1 */
	struct waiter *prev, *next; /* on fresh, parked or lowering while not claiming */
};

struct wlist {
	struct waiter *head, *tail;
};

struct lease_mgr {
	struct app *app;
	struct wlist fresh, parked, lowering;
	int count;
	struct metrics_family *waiters; /* rung_lease_waiters: count */
	bool stopping;
	bool woken;              /* parked waiters should be tried in the next round */
	struct event *poll;      /* --poll-fallback-ms */
	struct event *kick;      /* starts a round on the next loop pass */
	/* the round in flight */
	struct waiter *round[LEASE_ROUND_MAX];
	int round_n, round_old, round_retries;
	/* the parked waiters a woken round took, per pool (index: pool_slot), and how many got work */
	char round_pool[LEASE_POOLS_MAX][POOL_NAME_MAX + 1];
	int round_pools, round_pool_old[LEASE_POOLS_MAX], round_pool_granted[LEASE_POOLS_MAX];
	/* the first pool a waiter's row named, and whether another has been named since: until then a
	 * woken round takes the oldest parked waiters without walking the list (a fleet without pools) */
	char first_pool[POOL_NAME_MAX + 1];
	bool pools_many;
	char *round_json;
	bool round_busy;
	/* lease_announce: one NOTIFY statement in flight at most, one more when announced meanwhile */
	struct event *announce;  /* sends the NOTIFY on the next loop pass */
	bool announce_due, announce_busy;
	char self[48];           /* the NOTIFY payload that names this process: its own are not wake-ups */
	struct metrics_family *notifies; /* rung_lease_notifies_total{event}: NOTIFY_* */
};

/* rung_lease_notifies_total's samples */
enum { NOTIFY_SENT, NOTIFY_FAILED, NOTIFY_RECEIVED, NOTIFY_OWN };
static const char *const nt_sent[] = { "event", "sent", NULL };
static const char *const nt_failed[] = { "event", "failed", NULL };
static const char *const nt_received[] = { "event", "received", NULL };
static const char *const nt_own[] = { "event", "own", NULL };
static const char *const *const NOTIFY_LABELS[] = { nt_sent, nt_failed, nt_received, nt_own };

struct release_arg {
	struct app *app;
	long long attempt_id;
	long long job_id;
	char *token;
};

static void wlist_unlink(struct wlist *l, struct waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		l->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		l->tail = w->prev;
	w->prev = w->next = NULL;
}

static void wlist_append(struct wlist *l, struct waiter *w)
{
	w->next = NULL;
	w->prev = l->tail;
	if (l->tail)
		l->tail->next = w;
	else
		l->head = w;
	l->tail = w;
}

static void waiter_unlink_free(struct waiter *w)
{
	struct lease_mgr *m = w->m;

	if (w->state == W_FRESH)
		wlist_unlink(&m->fresh, w);
	else if (w->state == W_PARKED)
		wlist_unlink(&m->parked, w);
	else if (w->state == W_LOWERING)
		wlist_unlink(&m->lowering, w);
	m->count--;
	metrics_set(m->waiters, 0, m->count);
	if (w->deadline)
		event_free(w->deadline);
	free(w->gpu_uuid);
	json_decref(w->gpu_before);
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

/* Answers 200 with a JSON text (borrowed) and frees the waiter. */
static void waiter_answer_text(struct waiter *w, const char *text)
{
	struct hreq *h = w->h;

	w->h = NULL;
	h->on_gone = NULL;
	waiter_unlink_free(w);
	hreq_reply_text(h, 200, text);
}

static void lease_schedule(struct lease_mgr *m)
{
	if (!m->round_busy && !m->stopping && (m->fresh.head || (m->woken && m->parked.head)))
		event_active(m->kick, EV_TIMEOUT, 0);
}

static void on_released(PGresult *res, const char *err, void *arg)
{
	struct release_arg *r = arg;

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK) {
		log_info("lease released", "job=%lld attempt=%lld reason=client_gone released=%s", r->job_id,
			 r->attempt_id, PQgetvalue(res, 0, 0));
		if (!strcmp(PQgetvalue(res, 0, 0), "t"))
			lease_announce(r->app->lease); /* the job is queued again */
	} else
		log_error("lease release failed", "job=%lld attempt=%lld error=\"%s\" (the reaper ends it at lease expiry)",
			  r->job_id, r->attempt_id, res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : err);
	free(r->token);
	free(r);
}

static void release_lease(struct app *app, long long attempt_id, long long job_id, const char *token)
{
	struct release_arg *r = xcalloc(1, sizeof *r);
	char id[32];
	const char *params[2];

	r->app = app;
	r->attempt_id = attempt_id;
	r->job_id = job_id;
	r->token = xstrdup(token ? token : "");
	snprintf(id, sizeof id, "%lld", r->attempt_id);
	params[0] = id;
	params[1] = r->token;
	db_exec(app->db, sql_release, 2, params, on_released, r);
}

/* One claim row of the round (columns: i, status, attempt id, job id, number, token, LEASE,
 * config, and for a first attempt at the target: arch, GPU MiB, kind, recovery, the pool's largest
 * GPU; then the waiter's pool, which on_round keeps with the waiter). */
struct claim_row {
	const char *status;
	long long attempt_id, job_id, number;
	const char *token;
	const char *lease;        /* LEASE text without config and heartbeat_ms */
	const char *config;       /* the config's JSON text */
	const char *arch;         /* NULL unless the job's first attempt at its target */
	int gpu_mib;              /* the leased GPU's memory (with arch) */
	const char *kind;         /* the job's kind (with arch) */
	const char *recovery;     /* the job's recovery options, JSON text (with arch) */
	int fleet_mib;            /* the largest usable GPU in the job's pool (with arch; -1: not read) */
};

/* A first attempt being lowered (rung_start_lower in flight) or handed back for a bigger GPU
 * (rung_start_bigger in flight): what its answer needs, copied out of the round's result. */
struct lowering {
	struct waiter *w;
	long long attempt_id, job_id, number;
	char *token, *lease;
	char *config;             /* as claimed: the answer when the change is refused */
	char *rungs;              /* for the log line (lowering) */
	int gpu_mib, min_mib, fleet_mib; /* for the log line (bigger) */
};

/* The reply body: LEASE with the config and heartbeat_ms added (LEASE is a JSON object text from
 * Postgres; the config comes beside it so that Postgres does not copy it into the LEASE). */
static char *lease_text(const struct claim_row *c, int heartbeat_ms)
{
	char hb[16];

	if (!c->config)
		return NULL;
	snprintf(hb, sizeof hb, "%d", heartbeat_ms);
	return util_json_append(c->lease, "\"config\": ", c->config, ", \"heartbeat_ms\": ", hb, NULL);
}

/* Answers the waiter with its lease c, or releases the lease when the client has gone or the
 * answer cannot be made. lowered: the config is the one rung_start_lower recorded. */
static void deliver(struct waiter *w, const struct claim_row *c, bool lowered)
{
	struct app *app = w->m->app;
	char *text = c->lease ? lease_text(c, app->heartbeat_ms) : NULL;

	if (w->h->gone || !text) {
		/* hand-off failure: the lease could not be delivered, release it at once */
		release_lease(app, c->attempt_id, c->job_id, c->token);
		waiter_answer(w, w->h->gone ? 200 : 500, w->h->gone ? NULL :
			      json_pack("{s:s, s:s, s:n}", "error", "internal", "message", "claim failed", "field"));
	} else {
		log_info("lease granted", "job=%lld attempt=%lld number=%lld worker=%lld gpu=%s%s", c->job_id,
			 c->attempt_id, c->number, w->worker_id, w->gpu_uuid, lowered ? " started_lower=true" : "");
		waiter_answer_text(w, text);
	}
	free(text);
}

static void lowering_free(struct lowering *l)
{
	free(l->token);
	free(l->lease);
	free(l->config);
	free(l->rungs);
	free(l);
}

/* rung_start_lower returned: answers with the lowered config it recorded, or as claimed when it
 * changed nothing (the attempt no longer runs the target, or the statement failed and rolled
 * back); when its outcome is unknown (no connection) answers 503 and leaves the attempt to the
 * reaper, since the database may record either config. */
/* The start of on_lowered and on_bigger: the waiter leaves the lowering list; when the statement's
 * outcome is unknown (res NULL: no connection) `failed` is logged, the waiter gets 503 and the
 * attempt is left to the reaper. Returns false when it answered the waiter. */
static bool lowering_back(struct lowering *l, PGresult *res, const char *err, const char *failed)
{
	struct waiter *w = l->w;

	wlist_unlink(&w->m->lowering, w);
	w->state = W_CLAIMING;
	if (res)
		return true;
	log_error(failed, "job=%lld attempt=%lld error=\"%s\" (outcome unknown: the reaper ends the lease)", l->job_id,
		  l->attempt_id, err ? err : "?");
	waiter_answer(w, 503, json_pack("{s:s, s:s, s:n}", "error", "database_unavailable", "message",
					err ? err : "database unavailable", "field"));
	return false;
}

static void on_lowered(PGresult *res, const char *err, void *arg)
{
	struct lowering *l = arg;
	struct waiter *w = l->w;
	struct claim_row c = { .status = "ok", .attempt_id = l->attempt_id, .job_id = l->job_id, .number = l->number,
			       .token = l->token, .lease = l->lease, .config = l->config };
	bool lowered = false;

	if (!lowering_back(l, res, err, "start lower failed"))
		goto out;
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
		c.config = PQgetvalue(res, 0, 0);
		lowered = true;
		log_info("first attempt started lower", "job=%lld attempt=%lld gpu=%s rungs=%s", l->job_id, l->attempt_id,
			 w->gpu_uuid, l->rungs);
	} else {
		log_warn("first attempt not lowered", "job=%lld attempt=%lld error=\"%s\" (answered as claimed)", l->job_id,
			 l->attempt_id, PQresultStatus(res) == PGRES_TUPLES_OK ? "the attempt no longer runs the target" :
			 PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?");
	}
	deliver(w, &c, lowered);
out:
	lowering_free(l);
}

/* rung_start_bigger returned. It acted: the attempt is gone and the job queued for a bigger GPU,
 * so the waiter waits on as if its round had found nothing (parked, or 204 when its deadline passed
 * or it has none), and the re-queued job wakes the waiters here and on the other replicas (after
 * the commit: the function does not NOTIFY). It changed nothing (the attempt no longer runs the
 * target, or the statement failed and rolled back): answered as claimed. Outcome unknown (no
 * connection): 503, the attempt left to the reaper, as on_lowered does. */
static void on_bigger(PGresult *res, const char *err, void *arg)
{
	struct lowering *l = arg;
	struct waiter *w = l->w;
	struct lease_mgr *m = w->m;
	struct claim_row c = { .status = "ok", .attempt_id = l->attempt_id, .job_id = l->job_id, .number = l->number,
			       .token = l->token, .lease = l->lease, .config = l->config };

	if (!lowering_back(l, res, err, "start bigger failed"))
		goto out;
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 0), "t")) {
		log_warn("first attempt not re-queued for a bigger GPU", "job=%lld attempt=%lld error=\"%s\" (answered as claimed)",
			 l->job_id, l->attempt_id, PQresultStatus(res) == PGRES_TUPLES_OK ? "the attempt no longer runs the target" :
			 PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?");
		deliver(w, &c, false);
		goto out;
	}
	log_info("first attempt re-queued for a bigger GPU", "job=%lld attempt=%lld worker=%lld gpu=%s gpu_mib=%d "
		 "min_gpu_memory_mib=%d fleet_max_mib=%d", l->job_id, l->attempt_id, w->worker_id, w->gpu_uuid, l->gpu_mib,
		 l->min_mib, l->fleet_mib);
	if (w->h->gone || w->expired || !w->deadline || m->stopping) {
		waiter_answer(w, 204, NULL);
	} else {
		w->state = W_PARKED;
		wlist_append(&m->parked, w);
	}
	lease_announce(m);
out:
	lowering_free(l);
}

/* Issue 12: when c is a job's first attempt at its target and the cached profile of its (arch, GPU)
 * predicts the config does not fit, policy_initial says "start_lower" (starts rung_start_lower;
 * on_lowered answers the waiter) or, when every rung is predicted to fail for sure and the fleet
 * has a bigger GPU, "requeue_bigger" (starts rung_start_bigger; on_bigger parks the waiter again or
 * answers it); either takes the waiter over and returns true. Returns false, changing nothing,
 * otherwise. No profile cached yet (the lookup starts a fill) or one that predicts nothing costs
 * no parse. The largest GPU memory a job may get is its pool's, from the claim row (the round reads
 * it once, for first attempts only: migration 026); without it (never, from this release's
 * statement) the fleet's from the same cache (memcache_fleet_mib), and without a recent figure
 * requeue_bigger is never answered. */
static bool start_lower(struct waiter *w, const struct claim_row *c)
{
	struct lease_mgr *m = w->m;
	struct app *app = m->app;
	const json_t *profile;
	json_t *cfg = NULL, *rec = NULL, *ctx = NULL, *init = NULL, *data = NULL, *target_est = NULL;
	char *perr = NULL, *next = NULL, *dtext = NULL, *rungs = NULL, *reason = NULL, id[32], min_s[16];
	const char *action;
	struct lowering *l;
	bool taken = false, bigger;
	int64_t now = util_mono_ms();
	int fleet;

	if (!c->arch || c->gpu_mib <= 0 || !c->config || !c->lease)
		return false;
	profile = memcache_profile(app->memcache, c->arch, c->gpu_mib, now);
	if (!profile)
		return false;
	fleet = c->fleet_mib >= 0 ? c->fleet_mib : memcache_fleet_mib(app->memcache, now);
	cfg = json_loads(c->config, 0, NULL);
	rec = c->recovery ? json_loads(c->recovery, 0, NULL) : NULL;
	if (!json_is_object(cfg))
		goto out;
	ctx = json_pack("{s:{s:s?, s:O, s:O?}, s:{s:i}, s:{s:s, s:i, s:O}}", "job", "kind", c->kind, "target_config", cfg,
			"recovery", rec, "gpu", "memory_total_mib", c->gpu_mib, "memory", "arch", c->arch, "gpu_mib",
			c->gpu_mib, "profile", profile);
	if (ctx && fleet > c->gpu_mib)
		json_object_set_new(ctx, "fleet", json_pack("{s:i}", "max_gpu_memory_mib", fleet));
	init = ctx ? policy_initial(ctx, &perr) : NULL;
	if (!init) {
		log_warn("first-attempt check failed", "job=%lld error=\"%s\"", c->job_id, perr ? perr : "?");
		goto out;
	}
	action = json_string_value(json_object_get(init, "action")) ?: "";
	bigger = !strcmp(action, "requeue_bigger") &&
		 json_integer_value(jpath_get(init, "constraints.min_gpu_memory_mib")) > c->gpu_mib;
	if (!bigger && (strcmp(action, "start_lower") || !json_is_object(json_object_get(init, "next_config"))))
		goto out;
	/* recovery_state.started_lower / started_bigger and the event's data, the story of the job: why
	 * the target does not fit (its estimate); lowered: the rungs applied and what the config that
	 * runs is predicted to need; bigger: the GPU it was refused on and the floor for the next one */
	target_est = memplan_estimate(profile, c->kind && !strcmp(c->kind, "video"), cfg);
	reason = xasprintf("%s; the target: %s", json_string_value(json_object_get(init, "reason")) ?: "",
			   json_string_value(json_object_get(target_est, "evidence")) ?: "?");
	if (bigger)
		data = json_pack("{s:I, s:i, s:s, s:I, s:i, s:I, s:s, s:O?, s:O?}", "attempt", (json_int_t)c->number, "gpu_mib",
				 c->gpu_mib, "gpu_uuid", w->gpu_uuid, "worker_id", (json_int_t)w->worker_id,
				 "fleet_max_gpu_mib", fleet, "min_gpu_memory_mib",
				 json_integer_value(jpath_get(init, "constraints.min_gpu_memory_mib")), "reason", reason,
				 "estimate", json_object_get(init, "estimate"), "target_estimate", target_est);
	else
		data = json_pack("{s:I, s:i, s:s, s:O, s:O, s:O?, s:O, s:O?}", "attempt", (json_int_t)c->number, "gpu_mib",
				 c->gpu_mib, "reason", reason, "rungs", json_object_get(init, "rungs"), "changes",
				 json_object_get(init, "changes"), "skipped", json_object_get(init, "skipped"), "estimate",
				 json_object_get(init, "estimate"), "target_estimate", target_est);
	next = bigger ? NULL : json_dumps(json_object_get(init, "next_config"), JSON_COMPACT);
	dtext = data ? json_dumps(data, JSON_COMPACT) : NULL;
	rungs = bigger ? NULL : json_dumps(json_object_get(init, "rungs"), JSON_COMPACT);
	if ((!bigger && !next) || !dtext)
		goto out;
	l = xcalloc(1, sizeof *l);
	l->w = w;
	l->attempt_id = c->attempt_id;
	l->job_id = c->job_id;
	l->number = c->number;
	l->token = xstrdup(c->token ? c->token : "");
	l->lease = xstrdup(c->lease);
	l->config = xstrdup(c->config);
	l->rungs = rungs ? rungs : xstrdup("[]");
	rungs = NULL;
	l->gpu_mib = c->gpu_mib;
	l->min_mib = (int)json_integer_value(jpath_get(init, "constraints.min_gpu_memory_mib"));
	l->fleet_mib = fleet;
	w->state = W_LOWERING;
	wlist_append(&m->lowering, w);
	snprintf(id, sizeof id, "%lld", c->attempt_id);
	if (bigger) {
		const char *params[5] = { id, l->token, min_s, reason, dtext };
		snprintf(min_s, sizeof min_s, "%d", l->min_mib);
		db_exec(app->db, sql_start_bigger, 5, params, on_bigger, l);
	} else {
		const char *params[5] = { id, l->token, next, reason, dtext };
		db_exec(app->db, sql_start_lower, 5, params, on_lowered, l);
	}
	taken = true;
out:
	free(perr);
	free(next);
	free(dtext);
	free(rungs);
	free(reason);
	json_decref(target_est);
	json_decref(data);
	json_decref(init);
	json_decref(ctx);
	json_decref(rec);
	json_decref(cfg);
	return taken;
}

/* One waiter's outcome of the round: c is its row, NULL for "none". Returns true when it got a
 * lease. */
static bool waiter_result(struct waiter *w, const struct claim_row *c)
{
	struct lease_mgr *m = w->m;
	const char *status = c && c->status ? c->status : "none";

	if (strcmp(status, "ok") == 0) {
		if (w->h->gone || !start_lower(w, c))
			deliver(w, c, false);
		return true;
	}
	if (strcmp(status, "no_worker") == 0) {
		waiter_answer(w, 404, json_pack("{s:s, s:s, s:n}", "error", "unknown_worker", "message",
						"no such worker: register first", "field"));
	} else if (strcmp(status, "no_gpu") == 0) {
		waiter_answer(w, 400, json_pack("{s:s, s:s, s:s}", "error", "unknown_gpu", "message",
						"this GPU is not registered to this worker", "field", "gpu_uuid"));
	} else if (w->h->gone || w->expired || !w->deadline || m->stopping) {
		waiter_answer(w, 204, NULL);
	} else {
		w->state = W_PARKED;
		wlist_append(&m->parked, w); /* to the back: the next rounds try the others first */
	}
	return false;
}

/* The round's place for POOL's parked waiters (round_pool), added when add and there is room (the
 * last place takes the pools beyond LEASE_POOLS_MAX); -1 when not found and not added. */
static int pool_slot(struct lease_mgr *m, const char *pool, bool add)
{
	int i;

	for (i = 0; i < m->round_pools; i++)
		if (strcmp(m->round_pool[i], pool) == 0)
			return i;
	if (!add)
		return -1;
	if (m->round_pools == LEASE_POOLS_MAX)
		return LEASE_POOLS_MAX - 1;
	snprintf(m->round_pool[m->round_pools], sizeof m->round_pool[m->round_pools], "%s", pool);
	m->round_pool_old[m->round_pools] = m->round_pool_granted[m->round_pools] = 0;
	return m->round_pools++;
}

static void round_exec(struct lease_mgr *m);

static void on_round(PGresult *res, const char *err, void *arg)
{
	struct lease_mgr *m = arg;
	struct claim_row *rows;
	int n = m->round_n, granted_old = 0, i, r;
	const char *st;

	st = res && PQresultStatus(res) == PGRES_FATAL_ERROR ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	if (st && (strcmp(st, "40P01") == 0 || strcmp(st, "40001") == 0) && m->round_retries < LEASE_RETRIES) {
		m->round_retries++;
		log_warn("claim round retried", "waiters=%d sqlstate=%s retry=%d", n, st, m->round_retries);
		round_exec(m);
		return;
	}
	m->round_busy = false;
	free(m->round_json);
	m->round_json = NULL;
	m->round_n = 0;
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
		if (res)
			log_error("claim failed", "waiters=%d sqlstate=%s error=\"%s\"", n, st ? st : "-",
				  PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?");
		for (i = 0; i < n; i++) {
			if (!res)
				waiter_answer(m->round[i], 503, json_pack("{s:s, s:s, s:n}", "error", "database_unavailable",
									  "message", err ? err : "database unavailable", "field"));
			else
				waiter_answer(m->round[i], 500, json_pack("{s:s, s:s, s:n}", "error", "internal",
									  "message", "claim failed", "field"));
		}
		goto out;
	}
	rows = xcalloc((size_t)n + 1, sizeof *rows);
	for (r = 0; r < PQntuples(res); r++) {
		i = PQgetisnull(res, r, 0) ? -1 : atoi(PQgetvalue(res, r, 0));
		if (i < 0 || i >= n || rows[i].status)
			continue;
		rows[i].status = PQgetvalue(res, r, 1);
		rows[i].attempt_id = atoll(PQgetvalue(res, r, 2));
		rows[i].job_id = atoll(PQgetvalue(res, r, 3));
		rows[i].number = atoll(PQgetvalue(res, r, 4));
		rows[i].token = PQgetisnull(res, r, 5) ? NULL : PQgetvalue(res, r, 5);
		rows[i].lease = PQgetisnull(res, r, 6) ? NULL : PQgetvalue(res, r, 6);
		rows[i].config = PQgetisnull(res, r, 7) ? NULL : PQgetvalue(res, r, 7);
		if (PQnfields(res) >= 12 && !PQgetisnull(res, r, 8) && !PQgetisnull(res, r, 9)) {
			rows[i].arch = PQgetvalue(res, r, 8);
			rows[i].gpu_mib = atoi(PQgetvalue(res, r, 9));
			rows[i].kind = PQgetisnull(res, r, 10) ? NULL : PQgetvalue(res, r, 10);
			rows[i].recovery = PQgetisnull(res, r, 11) ? NULL : PQgetvalue(res, r, 11);
			rows[i].fleet_mib = PQnfields(res) >= 13 && !PQgetisnull(res, r, 12) ? atoi(PQgetvalue(res, r, 12)) : -1;
		}
		if (PQnfields(res) >= 14 && !PQgetisnull(res, r, 13)) {
			snprintf(m->round[i]->pool, sizeof m->round[i]->pool, "%s", PQgetvalue(res, r, 13));
			if (!m->first_pool[0])
				snprintf(m->first_pool, sizeof m->first_pool, "%s", m->round[i]->pool);
			else if (strcmp(m->first_pool, m->round[i]->pool))
				m->pools_many = true;
		}
	}
	for (i = 0; i < n; i++) {
		bool was_fresh = m->round[i]->was_fresh;
		/* the place it was taken into (its row may have just named another pool; a pool beyond
		 * LEASE_POOLS_MAX shares the last place): granted counts where old did */
		int slot = m->round[i]->pool_slot;
		if (waiter_result(m->round[i], rows[i].status ? &rows[i] : NULL) && !was_fresh) {
			granted_old++;
			if (slot >= 0)
				m->round_pool_granted[slot]++;
		}
	}
	free(rows);
	/* Every parked waiter of some pool tried got work: there may be more for the ones of that pool
	 * not tried yet. Found less than it asked for in every pool: the queue is empty for them, wait
	 * for the next wake. */
	for (i = 0; i < m->round_pools; i++)
		if (m->round_pool_old[i] > 0 && m->round_pool_granted[i] == m->round_pool_old[i])
			m->woken = true;
	if (m->round_old > 0 && granted_old == m->round_old)
		m->woken = true;
out:
	lease_schedule(m);
}

static void round_exec(struct lease_mgr *m)
{
	char lease_s[32];
	const char *params[3] = { m->round_json, lease_s, m->app->fair_share ? "true" : "false" };

	snprintf(lease_s, sizeof lease_s, "%d", m->app->lease_seconds);
	db_exec(m->app->db, sql_claim_batch, 3, params, on_round, m);
}

static void take(struct lease_mgr *m, struct wlist *l, struct waiter *w, json_t *arr)
{
	json_t *o;

	wlist_unlink(l, w);
	w->was_fresh = w->state == W_FRESH;
	w->pool_slot = -1;
	w->state = W_CLAIMING;
	o = json_pack("{s:i, s:I, s:s, s:O?, s:b}", "i", m->round_n, "worker", (json_int_t)w->worker_id, "gpu",
		      w->gpu_uuid, "before", w->gpu_before, "fresh", w->was_fresh);
	json_array_append_new(arr, o);
	m->round[m->round_n++] = w;
}

/* Takes up to LEASE_ROUND_OLD parked waiters into the round, oldest first, sharing the places among
 * their pools: each pool may fill its share (LEASE_ROUND_OLD / the pools parked, at least 8), then
 * what is left goes to whoever is next. A wake does not say which pool got work, so every pool's
 * oldest parked GPUs are tried; one pool's hundreds of parked GPUs no longer keep another's out of
 * the round until the fallback poll. O(parked) a woken round once two pools have been seen, else
 * O(taken). */
static void take_parked(struct lease_mgr *m, json_t *arr)
{
	struct waiter *w, *next;
	int share, slot;

	m->round_pools = 0;
	if (!m->pools_many) {
		/* every waiter in one pool: the oldest LEASE_ROUND_OLD, as before pools, in one place */
		while ((w = m->parked.head) && m->round_n < LEASE_ROUND_MAX && m->round_old < LEASE_ROUND_OLD) {
			slot = pool_slot(m, w->pool, true);
			m->round_pool_old[slot]++;
			take(m, &m->parked, w, arr);
			w->pool_slot = slot;
			m->round_old++;
		}
		return;
	}
	for (w = m->parked.head; w; w = w->next)
		pool_slot(m, w->pool, true);
	share = LEASE_ROUND_OLD / (m->round_pools ? m->round_pools : 1);
	if (share < 8)
		share = 8;
	for (w = m->parked.head; w && m->round_n < LEASE_ROUND_MAX && m->round_old < LEASE_ROUND_OLD; w = next) {
		next = w->next;
		slot = pool_slot(m, w->pool, false);
		if (slot < 0)
			slot = LEASE_POOLS_MAX - 1;
		if (m->round_pool_old[slot] >= share)
			continue;
		m->round_pool_old[slot]++;
		take(m, &m->parked, w, arr);
		w->pool_slot = slot;
		m->round_old++;
	}
	for (w = m->parked.head; w && m->round_n < LEASE_ROUND_MAX && m->round_old < LEASE_ROUND_OLD; w = next) {
		next = w->next; /* places no pool's share used: the next ones, whatever their pool */
		slot = pool_slot(m, w->pool, false);
		if (slot < 0)
			slot = LEASE_POOLS_MAX - 1;
		m->round_pool_old[slot]++;
		take(m, &m->parked, w, arr);
		w->pool_slot = slot;
		m->round_old++;
	}
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	struct lease_mgr *m = arg;
	json_t *arr;

	(void)fd;
	(void)what;
	if (m->round_busy || m->stopping)
		return;
	arr = json_array();
	m->round_n = m->round_old = m->round_retries = m->round_pools = 0;
	/* fresh waiters first: rung_claim_batch stops at the first parked one once the queue is empty */
	while (m->fresh.head && m->round_n < LEASE_ROUND_MAX)
		take(m, &m->fresh, m->fresh.head, arr);
	if (m->woken) {
		m->woken = false;
		take_parked(m, arr);
	}
	if (m->round_n == 0) {
		json_decref(arr);
		return;
	}
	m->round_json = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	m->round_busy = true;
	round_exec(m);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct waiter *w = arg;

	(void)fd;
	(void)what;
	if (w->state == W_FRESH || w->state == W_PARKED)
		waiter_answer(w, 204, NULL);
	else
		w->expired = true;
}

static void on_gone(struct hreq *h, void *arg)
{
	struct waiter *w = arg;

	(void)h;
	if (w->state == W_FRESH || w->state == W_PARKED)
		waiter_answer(w, 204, NULL); /* only frees: nobody is listening */
	/* W_CLAIMING, W_LOWERING: the round or on_lowered sees h->gone and releases what it claimed */
}

static void announce_schedule(struct lease_mgr *m)
{
	if (m->announce_due && !m->announce_busy && !event_pending(m->announce, EV_TIMEOUT, NULL))
		event_active(m->announce, EV_TIMEOUT, 0);
}

static void on_announced(PGresult *res, const char *err, void *arg)
{
	struct lease_mgr *m = arg;

	m->announce_busy = false;
	metrics_add(m->notifies, res && PQresultStatus(res) == PGRES_TUPLES_OK ? NOTIFY_SENT : NOTIFY_FAILED, 1);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
		/* the other replicas find the work at their next fallback poll; nothing to retry here */
		log_warn("wake-up not sent to other replicas", "error=\"%s\"",
			 err ? err : res ? PQresultErrorMessage(res) : "?");
		if (!res)
			return; /* the pool is down or closing: no statement from inside its callback */
	}
	announce_schedule(m);
}

static void on_announce(evutil_socket_t fd, short what, void *arg)
{
	struct lease_mgr *m = arg;
	const char *params[1] = { m->self };

	(void)fd;
	(void)what;
	if (!m->announce_due || m->announce_busy)
		return;
	m->announce_due = false;
	m->announce_busy = true;
	db_exec(m->app->db, sql_jobs_notify, 1, params, on_announced, m);
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
	m->waiters = metrics_register(app->metrics, "rung_lease_waiters", "gauge", "Parked lease long-polls.", 1, NULL);
	m->notifies = metrics_register(app->metrics, "rung_lease_notifies_total", "counter",
				       "Wake-ups between replicas (NOTIFY rung_jobs): sent, failed to send, received from "
				       "others, this process's own (ignored).", 4, NOTIFY_LABELS);
	m->poll = event_new(app->base, -1, EV_PERSIST, on_poll, m);
	m->kick = event_new(app->base, -1, 0, on_kick, m);
	m->announce = event_new(app->base, -1, 0, on_announce, m);
	if (!m->poll || !m->kick || !m->announce)
		abort();
	{
		/* random, not only the pid: replicas in containers are often all pid 1 */
		uint64_t r = 0;
		if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
			r = (uint64_t)util_mono_ms() ^ (uint64_t)(uintptr_t)m;
		snprintf(m->self, sizeof m->self, "rungd:%ld:%016llx", (long)getpid(), (unsigned long long)r);
	}
	if (app->poll_fallback_ms > 0)
		event_add(m->poll, &tv);
	return m;
}

void lease_free(struct lease_mgr *m)
{
	struct waiter *w;

	if (!m)
		return;
	while ((w = m->fresh.head ? m->fresh.head : m->parked.head ? m->parked.head : m->lowering.head)) {
		log_error("lease waiter still open at exit", "worker=%lld", w->worker_id);
		waiter_unlink_free(w);
	}
	for (int i = 0; i < m->round_n; i++) {
		log_error("lease waiter still open at exit", "worker=%lld", m->round[i]->worker_id);
		waiter_unlink_free(m->round[i]);
	}
	free(m->round_json);
	event_free(m->poll);
	event_free(m->kick);
	event_free(m->announce);
	free(m);
}

void lease_park(struct lease_mgr *m, struct hreq *h, long long worker_id, const char *gpu_uuid,
		json_t *gpu_before, int wait_ms)
{
	struct waiter *w = xcalloc(1, sizeof *w);

	w->m = m;
	w->h = h;
	w->state = W_FRESH;
	w->worker_id = worker_id;
	w->gpu_uuid = xstrdup(gpu_uuid);
	w->gpu_before = json_is_object(gpu_before) ? json_incref(gpu_before) : NULL;
	json_decref(gpu_before);
	if (wait_ms > 0) {
		struct timeval tv = { wait_ms / 1000, (wait_ms % 1000) * 1000 };
		w->deadline = evtimer_new(m->app->base, on_deadline, w);
		evtimer_add(w->deadline, &tv);
	}
	wlist_append(&m->fresh, w);
	m->count++;
	metrics_set(m->waiters, 0, m->count);
	h->on_gone = on_gone;
	h->on_gone_arg = w;
	if (m->stopping) {
		waiter_answer(w, 204, NULL);
		return;
	}
	lease_schedule(m);
}

void lease_wake(struct lease_mgr *m)
{
	if (!m || m->stopping)
		return;
	/* only waiters that may have missed the work: parked ones, and those in the round now */
	if (m->parked.head || m->round_busy)
		m->woken = true;
	lease_schedule(m);
}

void lease_announce(struct lease_mgr *m)
{
	if (!m)
		return;
	lease_wake(m); /* the other replicas are told even while this one stops */
	m->announce_due = true;
	announce_schedule(m);
}

void lease_notified(struct lease_mgr *m, const char *payload)
{
	if (payload && strcmp(payload, m->self) == 0) {
		metrics_add(m->notifies, NOTIFY_OWN, 1); /* its lease_announce woke its waiters then */
		return;
	}
	metrics_add(m->notifies, NOTIFY_RECEIVED, 1);
	lease_wake(m);
}

void lease_shutdown(struct lease_mgr *m)
{
	struct waiter *w;

	if (!m)
		return;
	m->stopping = true;
	event_del(m->poll);
	event_del(m->kick);
	while ((w = m->fresh.head ? m->fresh.head : m->parked.head))
		waiter_answer(w, 204, NULL);
	/* those in the round in flight, or being lowered, are answered when their statement returns */
}

int lease_waiting(const struct lease_mgr *m)
{
	return m ? m->count : 0;
}
