/* Handlers of /v1/workers: register (upsert by name, GPUs by uuid) and lease (long-poll,
 * delegated to lease.c). */
#ifndef RUNG_API_WORKERS_H
#define RUNG_API_WORKERS_H

struct hreq;

/* Each handler answers h exactly once. */
/* POST /v1/workers {"name", "host"?, "gpus", "version"?}: 201 (new) or 200 {"id", "lease_seconds",
 * "heartbeat_ms"}; 400 naming name, host, version (1..RUNG_VERSION_MAX printable ASCII; absent or
 * null: none) or gpus[i].FIELD; 409 worker_name_taken. Logs the registration with the version, and a
 * second line when it is not this rungd's (none counts as another). */
void api_workers_register(struct hreq *h);
void api_workers_lease(struct hreq *h);

#endif
