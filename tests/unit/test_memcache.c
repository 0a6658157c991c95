/* Unit tests of server/memcache.c with a recording fetcher instead of the database: a lookup never
 * waits (NULL until a fill lands) and starts one fill, never two at once; no observations or a fit
 * with nothing to predict with is cached as "none"; a fitted profile is served; a finish of the arch
 * invalidates and refills (old data served meanwhile), rate-limited; the TTL refills; a reset drops
 * the entry and discards fills started before it; a failed fill keeps the old data; freeing the
 * cache orphans fills in flight; the fleet's largest GPU memory comes with the fills, the latest
 * started wins, and an old figure is not served. */
#include <stdlib.h>

#include <event2/buffer.h>

#include "tap.h"
#include "../../server/memcache.h"
#include "../../server/metrics.h"
#include "../../common/util.h"

#define GPU 24576

struct rec {
	struct memcache_fill *fill[16];
	char arch[16][MEMCACHE_ARCH_MAX];
	int mib[16];
	int n;
};

static void fetch(void *arg, const char *arch, int gpu_mib, struct memcache_fill *fill)
{
	struct rec *r = arg;

	if (r->n < 16) {
		r->fill[r->n] = fill;
		snprintf(r->arch[r->n], MEMCACHE_ARCH_MAX, "%s", arch);
		r->mib[r->n] = gpu_mib;
	}
	r->n++;
}

/* n measured flux runs that fit: load 19207 MiB + 2400 MiB per training megapixel (the sim's law). */
static json_t *observations(int n)
{
	static const int sizes[][2] = { { 1, 512 }, { 1, 1024 }, { 2, 768 }, { 2, 1024 } };
	json_t *a = json_array();

	for (int i = 0; i < n && i < 4; i++) {
		double p = (sizes[i][1] / 1024.0) * (sizes[i][1] / 1024.0) * sizes[i][0];
		json_array_append_new(a, json_pack("{s:s, s:i, s:{s:i, s:i, s:i, s:b, s:i, s:b}, s:s, s:s, s:i, s:i, s:i}",
						   "arch", "flux", "gpu_mib", GPU, "features", "res_max", sizes[i][1],
						   "res_n", 1, "batch", sizes[i][0], "grad_ckpt", 1, "frames", 1,
						   "quantize", 1, "outcome", "fit", "phase", "train", "peak_mib",
						   (int)(19207 + 2400 * p), "job_id", i + 1, "attempt_id", i + 1));
	}
	return a;
}

static json_t *obs_of(const char *arch, const char *outcome)
{
	return json_pack("{s:s, s:i, s:s}", "arch", arch, "gpu_mib", GPU, "outcome", outcome);
}

/* The sample `key` (name and labels, then a space) as /metrics renders it; -1 when missing. */
static long gauge(struct metrics *m, const char *key)
{
	struct evbuffer *b = evbuffer_new();
	char *text, *at;
	long v;

	metrics_write_families(m, b);
	evbuffer_add(b, "", 1);
	text = (char *)evbuffer_pullup(b, -1);
	at = text ? strstr(text, key) : NULL;
	v = at ? strtol(at + strlen(key), NULL, 10) : -1;
	evbuffer_free(b);
	return v;
}

static long stale_gauge(struct metrics *m)
{
	return gauge(m, "rung_memory_profile_cache{state=\"stale\"} ");
}

static void lookup_and_fill(void)
{
	struct rec r = { 0 };
	struct memcache *c = memcache_new(fetch, &r, NULL);
	json_t *none = json_array(), *obs = observations(4), *o;
	int p = -1, n = -1, k = -1;
	int64_t t = 1000000;

	TAP_OK(memcache_profile(c, "flux", GPU, t) == NULL && r.n == 1, "first lookup: nothing yet, one fill started");
	TAP_OK(!strcmp(r.arch[0], "flux") && r.mib[0] == GPU, "the fill asks for its arch and GPU");
	TAP_OK(memcache_profile(c, "flux", GPU, t + 1000) == NULL && r.n == 1, "never two fills of an entry at once");
	memcache_counts(c, &p, &n, &k);
	TAP_OK(p == 1 && n == 0 && k == 0, "the entry is pending");
	memcache_filled(r.fill[0], none, 0);
	TAP_OK(memcache_profile(c, "flux", GPU, t + 1001) == NULL && r.n == 1, "no observations: cached as none, no refill");
	memcache_counts(c, &p, &n, &k);
	TAP_OK(p == 0 && n == 1 && k == 0, "the entry is none");
	TAP_OK(memcache_profile(c, "sdxl", GPU, t + 1002) == NULL && r.n == 2 && !strcmp(r.arch[1], "sdxl"),
	       "another arch is another entry");
	TAP_OK(memcache_profile(c, "flux", 81559, t + 1002) == NULL && r.n == 3 && r.mib[2] == 81559,
	       "another GPU memory is another entry");

	o = obs_of("flux", "other");
	memcache_note_finish(c, o, t + 2000);
	json_decref(o);
	TAP_INT_EQ(r.n, 3, "a finish that teaches nothing (outcome other) invalidates nothing");
	o = obs_of("flux", "fit");
	memcache_note_finish(c, o, t + 2000);
	TAP_INT_EQ(r.n, 4, "a finish of the arch refills its entries at once");
	TAP_OK(!strcmp(r.arch[3], "flux") && r.mib[3] == GPU, "the flux entry with data is refilled");
	memcache_note_finish(c, o, t + 2001);
	TAP_INT_EQ(r.n, 4, "not again while that fill is in flight");
	memcache_filled(r.fill[3], obs, 0);
	{
		const json_t *prof = memcache_profile(c, "flux", GPU, t + 2002);
		TAP_OK(prof && json_is_true(json_object_get(prof, "ok")) && json_integer_value(json_object_get(prof, "n")) == 4,
		       "a fill with four measured runs: the fitted profile is served");
	}
	memcache_counts(c, NULL, NULL, &k);
	TAP_INT_EQ(k, 1, "one entry ready");
	memcache_note_finish(c, o, t + 2100);
	TAP_INT_EQ(r.n, 4, "a refill waits MEMCACHE_GAP_MS after the last one started");
	TAP_OK(memcache_profile(c, "flux", GPU, t + 2100) != NULL, "meanwhile the old profile is served");
	TAP_OK(memcache_profile(c, "flux", GPU, t + 2002 + MEMCACHE_GAP_MS) != NULL && r.n == 5,
	       "the next lookup after the gap refills the invalidated entry");
	memcache_filled(r.fill[4], NULL, 0);
	TAP_OK(memcache_profile(c, "flux", GPU, t + 2003 + MEMCACHE_GAP_MS) != NULL && r.n == 5,
	       "a failed fill keeps the old profile (retried after the gap)");
	TAP_OK(memcache_profile(c, "flux", GPU, t + 2004 + 2 * MEMCACHE_GAP_MS) != NULL && r.n == 6, "retried");
	memcache_filled(r.fill[5], obs, 0);
	TAP_OK(memcache_profile(c, "flux", GPU, t + 2005 + 2 * MEMCACHE_GAP_MS) != NULL && r.n == 6, "fresh again: no fill");
	TAP_OK(memcache_profile(c, "flux", GPU, t + 2004 + 2 * MEMCACHE_GAP_MS + MEMCACHE_TTL_MS) != NULL && r.n == 7,
	       "past the TTL (other replicas' finishes): refilled, the old profile served meanwhile");

	memcache_reset(c, "flux", 24576);
	TAP_OK(memcache_profile(c, "flux", GPU, t + 20000) == NULL, "a reset drops the profile at once");
	memcache_filled(r.fill[6], obs, 0);
	TAP_OK(memcache_profile(c, "flux", GPU, t + 20001) == NULL, "a fill started before the reset is discarded");
	TAP_INT_EQ(r.n, 8, "and the next lookup fills again");
	memcache_filled(r.fill[7], obs, 0);
	TAP_OK(memcache_profile(c, "flux", GPU, t + 20002) != NULL, "which is served");
	json_decref(o);

	memcache_free(c); /* fills 1 and 2 (sdxl, 81559) are still in flight: orphaned */
	memcache_filled(r.fill[1], none, 0);
	memcache_filled(r.fill[2], none, 0);
	TAP_OK(1, "fills that land after the cache is freed are only freed");
	json_decref(none);
	json_decref(obs);
}

static void nothing_to_predict(void)
{
	struct rec r = { 0 };
	struct memcache *c = memcache_new(fetch, &r, NULL);
	json_t *two = observations(2), *big;
	int k = -1, n = -1;

	memcache_profile(c, "flux", GPU, 1);
	memcache_filled(r.fill[0], two, 0);
	memcache_counts(c, NULL, &n, &k);
	TAP_OK(memcache_profile(c, "flux", GPU, 2) == NULL && n == 1 && k == 0,
	       "two measured runs and no OOM: nothing to predict with, cached as none");
	TAP_OK(memcache_profile(c, NULL, GPU, 3) == NULL && memcache_profile(c, "flux", 0, 3) == NULL, "bad keys: NULL");
	big = json_pack("s", "an arch name far longer than any arch key the cache keeps, past sixty-four characters");
	TAP_OK(memcache_profile(c, json_string_value(big), GPU, 4) == NULL && r.n == 1, "an over-long arch: NULL, no fill");
	json_decref(big);
	memcache_free(c);
	memcache_free(NULL);
	json_decref(two);
}

/* A finish inside the gap cannot refill at once; the reaper's tick does once the gap passed,
 * without a lookup, and the stale count says when the data is current again. */
static void tick(void)
{
	struct rec r = { 0 };
	struct metrics *m = metrics_new();
	struct memcache *c = memcache_new(fetch, &r, m);
	json_t *obs = observations(4), *o = obs_of("flux", "fit");
	int64_t t = 5000000;

	memcache_profile(c, "flux", GPU, t);
	memcache_filled(r.fill[0], obs, 0);
	memcache_note_finish(c, o, t + 10);
	TAP_INT_EQ(r.n, 1, "tick: a finish inside the gap starts no fill");
	TAP_INT_EQ(stale_gauge(m), 1, "tick: the entry is stale");
	memcache_tick(c, t + 20);
	TAP_INT_EQ(r.n, 1, "tick: not before the gap has passed");
	memcache_tick(c, t + MEMCACHE_GAP_MS + 1);
	TAP_INT_EQ(r.n, 2, "tick: after the gap the tick refills, with no lookup");
	memcache_tick(c, t + MEMCACHE_GAP_MS + 2);
	TAP_INT_EQ(r.n, 2, "tick: one fill in flight, never two");
	memcache_filled(r.fill[1], obs, 0);
	TAP_INT_EQ(stale_gauge(m), 0, "tick: current again, nothing stale");
	memcache_tick(c, t + 10 * MEMCACHE_GAP_MS);
	TAP_INT_EQ(r.n, 2, "tick: a current entry is not refilled");
	memcache_free(c);
	metrics_free(m);
	json_decref(o);
	json_decref(obs);
}

/* The fleet's largest GPU memory rides on the fills (requeue_bigger at a lease): none before a
 * fill, the latest started fill's figure whatever its entry (a dropped one too), a failed or
 * unknown one changes nothing, and past MEMCACHE_FLEET_MAX_AGE_MS it is not served. */
static void fleet(void)
{
	struct rec r = { 0 };
	struct metrics *m = metrics_new();
	struct memcache *c = memcache_new(fetch, &r, m);
	json_t *obs = observations(4);
	int64_t t = 9000000;

	TAP_INT_EQ(memcache_fleet_mib(c, t), 0, "fleet: nothing before a fill");
	TAP_INT_EQ(gauge(m, "\nrung_memory_fleet_max_gpu_mib "), 0, "fleet: the gauge says 0");
	memcache_profile(c, "flux", GPU, t);
	memcache_profile(c, "sdxl", GPU, t + 5);
	memcache_filled(r.fill[1], obs, 81559);
	TAP_INT_EQ(memcache_fleet_mib(c, t + 6), 81559, "fleet: a fill brings the figure");
	TAP_INT_EQ(gauge(m, "\nrung_memory_fleet_max_gpu_mib "), 81559, "fleet: and the gauge");
	memcache_filled(r.fill[0], obs, 49152);
	TAP_INT_EQ(memcache_fleet_mib(c, t + 7), 81559, "fleet: a fill started earlier does not replace it");
	memcache_profile(c, "flux", 81559, t + 10);
	memcache_filled(r.fill[2], NULL, 40960);
	TAP_INT_EQ(memcache_fleet_mib(c, t + 11), 81559, "fleet: a failed fill changes nothing");
	memcache_profile(c, "flux", 81559, t + 10 + MEMCACHE_GAP_MS);
	memcache_filled(r.fill[3], obs, 0);
	TAP_INT_EQ(memcache_fleet_mib(c, t + 11 + MEMCACHE_GAP_MS), 81559, "fleet: an unknown figure changes nothing");
	memcache_reset(c, "flux", 81559);
	memcache_profile(c, "flux", 81559, t + 20 + MEMCACHE_GAP_MS);
	memcache_profile(c, "flux", 81559, t + 30 + MEMCACHE_GAP_MS); /* no second fill while one is in flight */
	TAP_INT_EQ(r.n, 5, "fleet: one more fill after the reset");
	memcache_filled(r.fill[4], obs, 24576);
	TAP_INT_EQ(memcache_fleet_mib(c, t + 40 + MEMCACHE_GAP_MS), 24576,
		   "fleet: the newest fill's figure wins, smaller too (a GPU left the fleet)");
	TAP_INT_EQ(memcache_fleet_mib(c, t + 20 + MEMCACHE_GAP_MS + MEMCACHE_FLEET_MAX_AGE_MS), 24576,
		   "fleet: served up to MEMCACHE_FLEET_MAX_AGE_MS after its fill started");
	TAP_INT_EQ(memcache_fleet_mib(c, t + 21 + MEMCACHE_GAP_MS + MEMCACHE_FLEET_MAX_AGE_MS), 0,
		   "fleet: not after");
	TAP_INT_EQ(memcache_fleet_mib(NULL, t), 0, "fleet: no cache, no figure");
	memcache_free(c);
	metrics_free(m);
	json_decref(obs);
}

int main(void)
{
	lookup_and_fill();
	fleet();
	tick();
	nothing_to_predict();
	return TAP_DONE();
}
