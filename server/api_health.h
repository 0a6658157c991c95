/* The GPU health report route, POST /v1/gpus/{uuid}/health: a worker (for its own GPUs) or staff
 * reports a health check; the server records it and may lift a quarantine or clear a suspect GPU
 * (sql/functions/85_gpus.sql). Validation is separate and pure, for the unit tests. */
#ifndef RUNG_API_HEALTH_H
#define RUNG_API_HEALTH_H

#include <stdbool.h>
#include <jansson.h>

struct hreq;

#define API_HEALTH_DETAIL_MAX 4096 /* bytes of "detail" accepted */
#define API_HEALTH_UUID_MAX 128    /* longer path segments name no GPU (404) */

/* A validated report; its pointers borrow from the body it was parsed from. */
struct api_health_report {
	bool passed;
	const char *detail;        /* NULL when absent or null */
	const json_t *gpu_state;   /* GPUSTATE object, or NULL when absent or null */
};

/* Checks a report body {"passed": bool, "detail"?: string|null, "gpu_state"?: object|null}.
 * Returns 0 and fills *out, or -1 with *field (static: the offending key) and *why (static text). */
int api_health_parse(const json_t *body, struct api_health_report *out, const char **field, const char **why);

/* The handler: answers h exactly once with 200 {"uuid", "state", "next_check_ms"}, 400, or 404
 * when there is no such GPU or (worker role) it is not a GPU of a worker bound to the caller. */
void api_health_report(struct hreq *h);

#endif
