/* rungd's per-process cache of fitted memory PROFILEs (recovery/memmodel.h) per (arch, GPU memory),
 * for the lease path's first-attempt check (issue 12, server/lease.c): a lookup never waits; an
 * entry missing, invalidated (a finish of its arch applied here, a profile reset) or older than
 * the TTL (other replicas' finishes) is refilled in the background from the database, at most one
 * fill per entry in flight and one started per MEMCACHE_GAP_MS, and the old data is served until
 * the new lands (a reset drops it). An entry with nothing to predict with is cached as "none".
 * Each fill also brings the fleet's largest usable GPU memory, for policy_initial's requeue_bigger. */
#ifndef RUNG_MEMCACHE_H
#define RUNG_MEMCACHE_H

#include <stdint.h>
#include <jansson.h>

#define MEMCACHE_TTL_MS 10000 /* data older than this is refilled (another replica's finishes) */
#define MEMCACHE_GAP_MS 250   /* at most one fill started per entry in this long */
#define MEMCACHE_MAX 64       /* entries; the least recently used one goes first */
#define MEMCACHE_ARCH_MAX 64  /* arch keys are shorter (memmodel_arch's buffer) */
#define MEMCACHE_FLEET_MAX_AGE_MS 60000 /* an older fleet figure is not used (a quiet spell) */

struct memcache;
struct memcache_fill;
struct metrics;
struct db;

/* Starts reading the OBSERVATIONs of (arch, gpu_mib) for fill (all borrowed for the call only);
 * the fetcher later hands them to memcache_filled exactly once, never from inside this call. */
typedef void (*memcache_fetch_fn)(void *arg, const char *arch, int gpu_mib, struct memcache_fill *fill);

/* A cache whose fills go through fetch(arg, ...). metrics may be NULL; when given, the cache
 * pushes rung_memory_profile_cache{state="pending"|"none"|"ready"|"stale"} (entries; stale: filled
 * but invalidated since, a refill due or in flight),
 * rung_memory_profile_fills_total{result="ok"|"failed"|"dropped"} and
 * rung_memory_fleet_max_gpu_mib (the fleet figure the last fill read, 0 before any) into it. */
struct memcache *memcache_new(memcache_fetch_fn fetch, void *arg, struct metrics *metrics);
/* A cache filled from db with sql/memcache_fill.sql (non-blocking db_exec). */
struct memcache *memcache_new_db(struct db *db, struct metrics *metrics);
/* Frees the cache (NULL: no-op). Fills still in flight are orphaned: memcache_filled then only
 * frees them, so free the cache after the database pool, whose teardown answers them. */
void memcache_free(struct memcache *c);

/* The cached PROFILE of (arch, GPU of gpu_mib MiB), borrowed until the next call on c, or NULL
 * when none is cached yet or the data has nothing to predict with (no fit that is "ok" and no OOM
 * evidence). Starts a fill when the entry is missing, invalidated or older than MEMCACHE_TTL_MS
 * (and none is in flight, and the last started MEMCACHE_GAP_MS or more ago); never waits for it.
 * now_ms: a monotonic clock (util_mono_ms). */
const json_t *memcache_profile(struct memcache *c, const char *arch, int gpu_mib, int64_t now_ms);

/* An ended attempt's OBSERVATION (memmodel_observation's object; NULL or outcome "other" is a
 * no-op) was applied by this process: every entry of its arch is invalidated (observations may
 * count across GPU classes) and refilled now unless a fill is in flight or started too recently. */
void memcache_note_finish(struct memcache *c, const json_t *obs, int64_t now_ms);

/* Starts the refills an invalidation could not start at once (a fill was in flight, or the last
 * started less than MEMCACHE_GAP_MS before): rungd calls it from the reaper's timer, so a burst of
 * finishes is learned within a tick even when no lease comes. now_ms: monotonic. */
void memcache_tick(struct memcache *c, int64_t now_ms);

/* The profile of (arch, gpu_class_mib) was reset: every entry of arch is dropped at once (leases
 * answer as without a profile until the next fill lands) and fills in flight are discarded. */
void memcache_reset(struct memcache *c, const char *arch, int gpu_class_mib);

/* Hands a fill its OBSERVATIONs (array, borrowed; NULL: the read failed, the entry keeps what it
 * had and is tried again after MEMCACHE_GAP_MS) and frees fill. The profile is fitted here
 * (memplan_profile), once per fill. fleet_mib: the fleet's largest usable GPU memory read with
 * them (the finish CTX's fleet.max_gpu_memory_mib), <= 0 when unknown; the cache keeps the one of
 * the latest fill started that had one, whatever entry it filled. */
void memcache_filled(struct memcache_fill *fill, const json_t *observations, int fleet_mib);

/* The fleet's largest usable GPU memory as the last fill read it, for policy_initial's
 * fleet.max_gpu_memory_mib at a lease; 0 when no fill brought one or the figure was read more than
 * MEMCACHE_FLEET_MAX_AGE_MS before now_ms (monotonic). A profile the lookup serves comes from a fill
 * too, so whenever there is a profile to predict with the figure is about as fresh as it. */
int memcache_fleet_mib(const struct memcache *c, int64_t now_ms);

/* Entries by state, for tests and logs: not filled yet, filled with nothing to predict with,
 * filled with a profile. Any pointer may be NULL. */
void memcache_counts(const struct memcache *c, int *pending, int *none, int *ready);

#endif
