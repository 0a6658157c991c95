/* Parked long-polls of POST /v1/workers/{id}/lease: waiters live in memory and are served by
 * claim rounds, one rung_claim_batch() statement for many waiters, one round in flight at a time.
 * A new waiter is in the next round; parked ones are tried again when woken (a submit or re-queue
 * here, a NOTIFY from another replica, the poll-fallback timer), until a round finds less work
 * than it asked for. Answers 204 at the deadline or on shutdown; a lease claimed for a client
 * that has gone is released at once. */
#ifndef RUNG_LEASE_H
#define RUNG_LEASE_H

#include <jansson.h>

struct app;
struct hreq;
struct lease_mgr;

/* A manager with its poll-fallback timer armed on app->base; lease_free(NULL) is a no-op. */
struct lease_mgr *lease_new(struct app *app);
/* Frees the manager; every waiter must have been answered (lease_shutdown). */
void lease_free(struct lease_mgr *m);

/* Takes over h (answers it exactly once): claims for (worker_id, gpu_uuid) in the next round and,
 * when nothing is eligible, again on wakes until wait_ms has passed (wait_ms 0: one claim).
 * gpu_before is stolen (may be NULL). */
void lease_park(struct lease_mgr *m, struct hreq *h, long long worker_id, const char *gpu_uuid,
		json_t *gpu_before, int wait_ms);
/* New or re-queued work may be there: the next round tries the parked waiters (no-op when there
 * are none). */
void lease_wake(struct lease_mgr *m);
/* Work was queued by a statement that has committed: wakes this process's waiters (lease_wake)
 * and, with one NOTIFY rung_jobs in a transaction of its own (sql/jobs_notify.sql), every other
 * replica's. Not sent inside the transaction that queued the work: Postgres holds a cluster-wide
 * lock from a notifying transaction's pre-commit until its commit is flushed, so notifying
 * transactions commit one at a time, never in one WAL flush (docs/PERFORMANCE.md, round 9).
 * Coalesced: one NOTIFY in flight at most, one more after it when announced meanwhile. A NOTIFY
 * that fails is logged; the other replicas then find the work at their fallback poll. */
void lease_announce(struct lease_mgr *m);
/* A NOTIFY on rung_jobs arrived with `payload` (may be NULL): wakes the waiters, unless it is
 * this process's own lease_announce. */
void lease_notified(struct lease_mgr *m, const char *payload);
/* Answers every parked waiter 204 now, and those mid-claim when their claim returns. */
void lease_shutdown(struct lease_mgr *m);
/* Number of waiters (parked or claiming): for tests and logs. */
int lease_waiting(const struct lease_mgr *m);

#endif
