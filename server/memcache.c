/* The memory-profile cache of rungd (see memcache.h): a small table of (arch, GPU MiB) entries, each
 * with the PROFILE fitted from its last fill, generations that tell a fill which invalidations and
 * resets it predates, and the fills in flight. Owns the fit of each fill (memplan_profile) and its
 * three /metrics families; the database read is sql/memcache_fill.sql. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "log.h"
#include "memcache.h"
#include "memplan.h"
#include "metrics.h"
#include "sql.h"
#include "util.h"

struct mc_entry {
	char arch[MEMCACHE_ARCH_MAX];
	int gpu_mib;
	json_t *profile;   /* what the last fill fitted, NULL when it has nothing to predict with */
	bool filled;       /* a fill landed since the entry was made or reset */
	bool fetching;     /* a fill is in flight */
	bool fetched_once; /* a fill was started since the entry was made or reset */
	unsigned gen;      /* bumped by each invalidation and reset */
	unsigned data_gen; /* gen when the data held was read */
	unsigned reset_gen;/* gen of the last reset: fills started before it are dropped */
	int64_t read_at;   /* when the fill of the data held started */
	int64_t fetch_at;  /* when the last fill started */
	int64_t used_at;   /* last lookup, for eviction */
};

struct memcache_fill {
	struct memcache *c;             /* NULL once the cache is freed */
	struct memcache_fill *prev, *next;
	char arch[MEMCACHE_ARCH_MAX];
	int gpu_mib;
	unsigned gen;                   /* the entry's gen when the fill started */
	int64_t started;
};

struct memcache {
	memcache_fetch_fn fetch;
	void *arg;
	struct mc_entry e[MEMCACHE_MAX];
	int n;
	struct memcache_fill *fills;    /* in flight */
	struct metrics_family *states;  /* rung_memory_profile_cache: pending, none, ready, stale */
	struct metrics_family *results; /* rung_memory_profile_fills_total: ok, failed, dropped */
	struct metrics_family *fleet;   /* rung_memory_fleet_max_gpu_mib: fleet_mib */
	int fleet_mib;                  /* the fleet's largest usable GPU memory, 0: none read yet */
	int64_t fleet_at;               /* when the fill that read it started */
};

enum { FILL_OK, FILL_FAILED, FILL_DROPPED };

static const char *const st_pending[] = { "state", "pending", NULL };
static const char *const st_none[] = { "state", "none", NULL };
static const char *const st_ready[] = { "state", "ready", NULL };
static const char *const st_stale[] = { "state", "stale", NULL };
static const char *const *const STATE_LABELS[] = { st_pending, st_none, st_ready, st_stale };
static const char *const res_ok[] = { "result", "ok", NULL };
static const char *const res_failed[] = { "result", "failed", NULL };
static const char *const res_dropped[] = { "result", "dropped", NULL };
static const char *const *const RESULT_LABELS[] = { res_ok, res_failed, res_dropped };

void memcache_counts(const struct memcache *c, int *pending, int *none, int *ready)
{
	int p = 0, n = 0, r = 0;

	for (int i = 0; c && i < c->n; i++) {
		if (!c->e[i].filled)
			p++;
		else if (c->e[i].profile)
			r++;
		else
			n++;
	}
	if (pending)
		*pending = p;
	if (none)
		*none = n;
	if (ready)
		*ready = r;
}

/* Filled entries whose data predates an invalidation (a refill is due or in flight). */
static int stale_count(const struct memcache *c)
{
	int s = 0;

	for (int i = 0; c && i < c->n; i++)
		s += c->e[i].filled && c->e[i].data_gen != c->e[i].gen;
	return s;
}

static void push_states(struct memcache *c)
{
	int p, n, r;

	memcache_counts(c, &p, &n, &r);
	metrics_set(c->states, 0, p);
	metrics_set(c->states, 1, n);
	metrics_set(c->states, 2, r);
	metrics_set(c->states, 3, stale_count(c));
}

struct memcache *memcache_new(memcache_fetch_fn fetch, void *arg, struct metrics *metrics)
{
	struct memcache *c = xcalloc(1, sizeof *c);

	c->fetch = fetch;
	c->arg = arg;
	c->states = metrics_register(metrics, "rung_memory_profile_cache", "gauge",
				     "Memory profiles cached for the first-attempt check, by state.", 4, STATE_LABELS);
	c->results = metrics_register(metrics, "rung_memory_profile_fills_total", "counter",
				      "Memory profile cache fills, by result.", 3, RESULT_LABELS);
	c->fleet = metrics_register(metrics, "rung_memory_fleet_max_gpu_mib", "gauge",
				    "The fleet's largest usable GPU memory (MiB) as the last profile cache fill read it.", 1, NULL);
	push_states(c);
	return c;
}

void memcache_free(struct memcache *c)
{
	if (!c)
		return;
	for (struct memcache_fill *f = c->fills; f; f = f->next)
		f->c = NULL;
	for (int i = 0; i < c->n; i++)
		json_decref(c->e[i].profile);
	free(c);
}

static struct mc_entry *find(struct memcache *c, const char *arch, int gpu_mib)
{
	for (int i = 0; i < c->n; i++)
		if (c->e[i].gpu_mib == gpu_mib && !strcmp(c->e[i].arch, arch))
			return &c->e[i];
	return NULL;
}

/* A new entry, in place of the least recently used one when the table is full. */
static struct mc_entry *add(struct memcache *c, const char *arch, int gpu_mib, int64_t now_ms)
{
	struct mc_entry *e;

	if (c->n < MEMCACHE_MAX) {
		e = &c->e[c->n++];
	} else {
		e = &c->e[0];
		for (int i = 1; i < c->n; i++)
			if (c->e[i].used_at < e->used_at)
				e = &c->e[i];
		json_decref(e->profile); /* a fill of the old key in flight finds no entry and is dropped */
	}
	memset(e, 0, sizeof *e);
	snprintf(e->arch, sizeof e->arch, "%s", arch);
	e->gpu_mib = gpu_mib;
	e->used_at = now_ms;
	return e;
}

/* Starts a fill of e when its data is missing, invalidated or past the TTL, unless one is in
 * flight or the last started less than MEMCACHE_GAP_MS ago. */
static void maybe_fetch(struct memcache *c, struct mc_entry *e, int64_t now_ms)
{
	struct memcache_fill *f;

	if (e->fetching || (e->filled && e->data_gen == e->gen && now_ms - e->read_at < MEMCACHE_TTL_MS))
		return;
	if (e->fetched_once && now_ms - e->fetch_at < MEMCACHE_GAP_MS)
		return;
	f = xcalloc(1, sizeof *f);
	f->c = c;
	snprintf(f->arch, sizeof f->arch, "%s", e->arch);
	f->gpu_mib = e->gpu_mib;
	f->gen = e->gen;
	f->started = now_ms;
	f->next = c->fills;
	if (c->fills)
		c->fills->prev = f;
	c->fills = f;
	e->fetching = true;
	e->fetched_once = true;
	e->fetch_at = now_ms;
	c->fetch(c->arg, f->arch, f->gpu_mib, f);
}

const json_t *memcache_profile(struct memcache *c, const char *arch, int gpu_mib, int64_t now_ms)
{
	struct mc_entry *e;

	if (!c || !arch || gpu_mib <= 0 || strlen(arch) >= MEMCACHE_ARCH_MAX)
		return NULL;
	e = find(c, arch, gpu_mib);
	if (!e) {
		e = add(c, arch, gpu_mib, now_ms);
		push_states(c);
	}
	e->used_at = now_ms;
	maybe_fetch(c, e, now_ms);
	/* maybe_fetch may have run a fetcher that answered at once against its contract; e stays valid */
	return e->filled ? e->profile : NULL;
}

void memcache_note_finish(struct memcache *c, const json_t *obs, int64_t now_ms)
{
	const char *arch = json_string_value(json_object_get(obs, "arch"));
	const char *outcome = json_string_value(json_object_get(obs, "outcome"));

	if (!c || !arch || !outcome || !strcmp(outcome, "other"))
		return;
	for (int i = 0; i < c->n; i++) {
		if (strcmp(c->e[i].arch, arch))
			continue;
		c->e[i].gen++;
		maybe_fetch(c, &c->e[i], now_ms);
	}
	push_states(c);
}

void memcache_tick(struct memcache *c, int64_t now_ms)
{
	for (int i = 0; c && i < c->n; i++)
		if (c->e[i].fetched_once && c->e[i].data_gen != c->e[i].gen)
			maybe_fetch(c, &c->e[i], now_ms);
}

void memcache_reset(struct memcache *c, const char *arch, int gpu_class_mib)
{
	int dropped = 0;

	if (!c || !arch)
		return;
	for (int i = 0; i < c->n; i++) {
		struct mc_entry *e = &c->e[i];
		if (strcmp(e->arch, arch))
			continue;
		json_decref(e->profile);
		e->profile = NULL;
		e->filled = false;
		e->fetched_once = false; /* the next lookup refills at once */
		e->gen++;
		e->reset_gen = e->gen;
		dropped++;
	}
	if (dropped) {
		log_info("memory profile cache dropped", "arch=%s gpu_class_mib=%d entries=%d", arch, gpu_class_mib, dropped);
		push_states(c);
	}
}

/* The profile a fill's observations give, or NULL when it predicts nothing: neither a fit that is
 * "ok" nor an out-of-memory run to compare with (memmodel_predict answers "unknown" or "fits"
 * then, and the lease would parse the config for nothing). */
static json_t *fit(const char *arch, int gpu_mib, const json_t *obs)
{
	json_t *ctx = json_pack("{s:{s:s, s:i, s:O}}", "memory", "arch", arch, "gpu_mib", gpu_mib, "observations", obs);
	json_t *p = ctx ? memplan_profile(ctx, NULL) : NULL;

	json_decref(ctx);
	if (p && !json_is_true(json_object_get(p, "ok")) && json_array_size(json_object_get(p, "ooms")) == 0) {
		json_decref(p);
		p = NULL;
	}
	return p;
}

void memcache_filled(struct memcache_fill *f, const json_t *observations, int fleet_mib)
{
	struct memcache *c = f->c;
	struct mc_entry *e;
	int result = FILL_OK;

	if (!c)
		goto out;
	if (fleet_mib > 0 && json_is_array(observations) && (c->fleet_mib <= 0 || f->started >= c->fleet_at)) {
		/* the fleet is the same for every entry: a dropped fill's figure is as good */
		c->fleet_mib = fleet_mib;
		c->fleet_at = f->started;
		metrics_set(c->fleet, 0, fleet_mib);
	}
	if (f->prev)
		f->prev->next = f->next;
	else
		c->fills = f->next;
	if (f->next)
		f->next->prev = f->prev;
	e = find(c, f->arch, f->gpu_mib);
	if (!e || f->gen < e->reset_gen) { /* evicted, or read before a reset */
		if (e)
			e->fetching = false;
		result = FILL_DROPPED;
	} else if (!json_is_array(observations)) {
		e->fetching = false;
		result = FILL_FAILED;
	} else {
		e->fetching = false;
		json_decref(e->profile);
		e->profile = fit(f->arch, f->gpu_mib, observations);
		e->filled = true;
		e->data_gen = f->gen;
		e->read_at = f->started;
	}
	metrics_add(c->results, (size_t)result, 1);
	push_states(c);
out:
	free(f);
}

int memcache_fleet_mib(const struct memcache *c, int64_t now_ms)
{
	if (!c || c->fleet_mib <= 0 || now_ms - c->fleet_at > MEMCACHE_FLEET_MAX_AGE_MS)
		return 0;
	return c->fleet_mib;
}

/* ---- the database fetcher ---- */

static void on_fill(PGresult *res, const char *err, void *arg)
{
	struct memcache_fill *f = arg;
	json_t *obs = NULL;
	int fleet = 0;

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
		obs = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
		if (PQnfields(res) >= 2 && !PQgetisnull(res, 0, 1))
			fleet = atoi(PQgetvalue(res, 0, 1));
	}
	if (!json_is_array(obs))
		log_warn("memory profile cache fill failed", "arch=%s gpu_mib=%d error=\"%s\"", f->arch, f->gpu_mib,
			 res && PQresultStatus(res) == PGRES_FATAL_ERROR ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?" :
			 err ? err : "no observations array");
	memcache_filled(f, obs, fleet);
	json_decref(obs);
}

static void db_fetch(void *arg, const char *arch, int gpu_mib, struct memcache_fill *fill)
{
	char mib[16];
	const char *params[2] = { arch, mib };

	snprintf(mib, sizeof mib, "%d", gpu_mib);
	db_exec(arg, sql_memcache_fill, 2, params, on_fill, fill);
}

struct memcache *memcache_new_db(struct db *db, struct metrics *metrics)
{
	return memcache_new(db_fetch, db, metrics);
}
