/* Handlers of the fleet and support views: escalations (list, get, ack, resolve), GPUs (list,
 * release), workers (list) and /healthz. */
#ifndef RUNG_API_FLEET_H
#define RUNG_API_FLEET_H

struct hreq;

/* Each handler answers h exactly once. */
void api_fleet_escalations(struct hreq *h);
void api_fleet_escalation_get(struct hreq *h);
void api_fleet_escalation_ack(struct hreq *h);
void api_fleet_escalation_resolve(struct hreq *h);
void api_fleet_gpus(struct hreq *h);
void api_fleet_gpu_release(struct hreq *h);
void api_fleet_workers(struct hreq *h);
void api_fleet_healthz(struct hreq *h);

#endif
