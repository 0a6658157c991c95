/* Handlers of the fleet and support views: escalations (list, get, ack, resolve), GPUs (list,
 * release), workers (list, drain, resume) and /healthz. */
#ifndef RUNG_API_FLEET_H
#define RUNG_API_FLEET_H

struct hreq;

/* GET /v1/pools (support, admin): {"pools": [POOL]}, every worker pool in use with its jobs, workers,
 * GPUs, borrowers and largest GPU (sql/pool_list.sql). */
void api_fleet_pools(struct hreq *h);
/* Each handler answers h exactly once. */
void api_fleet_escalations(struct hreq *h);
void api_fleet_escalation_get(struct hreq *h);
void api_fleet_escalation_ack(struct hreq *h);
void api_fleet_escalation_resolve(struct hreq *h);
void api_fleet_gpus(struct hreq *h);
void api_fleet_gpu_release(struct hreq *h);
void api_fleet_workers(struct hreq *h);
/* GET /v1/owners: per owner (a token's name) its queued and running jobs and its limit, the busiest
 * first (sql/owner_list.sql). */
void api_fleet_owners(struct hreq *h);
/* POST /v1/workers/{id}/drain {"note"?, "requeue"?}: no new lease on its GPUs, running attempts go on
 * (with "requeue": true they are stopped at their next heartbeat and their jobs queued again
 * unchanged, the reply's "requeued" counting them: sql/functions/44_preempt.sql), kept across its
 * restarts; /resume undoes it and wakes the waiters. Both 200 WORKER (repeats change nothing), 400
 * note or requeue (not a boolean, or on a resume), 404 (sql/functions/31_drain.sql). */
void api_fleet_worker_drain(struct hreq *h);
void api_fleet_worker_resume(struct hreq *h);
/* GET /healthz (open, polled by load balancers): 200 {"ok": true, "database": "up", "version": rungd's
 * (rung_version), "schema": the highest migration applied, a number (sql/healthz.sql: one short read
 * of schema_migrations; 0 before any)}, or 503 {"ok": false, "database": "down", "version",
 * "schema": null} while the database does not answer. */
void api_fleet_healthz(struct hreq *h);

#endif
