/* Handlers of /v1/workers: register (upsert by name, GPUs by uuid) and lease (long-poll,
 * delegated to lease.c). */
#ifndef RUNG_API_WORKERS_H
#define RUNG_API_WORKERS_H

struct hreq;

/* Each handler answers h exactly once. */
void api_workers_register(struct hreq *h);
void api_workers_lease(struct hreq *h);

#endif
