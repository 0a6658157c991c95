/* rung-worker's HTTP to rungd: one blocking libcurl easy handle per slot thread, JSON in and out,
 * capped answers, and an abort flag so a parked long-poll ends at once on shutdown. Knows no
 * routes; the worker module builds paths and bodies. */
#ifndef RUNG_WORKER_CLIENT_H
#define RUNG_WORKER_CLIENT_H

#include <jansson.h>
#include <stdatomic.h>

struct client;

/* The bearer token every client sends (Authorization: Bearer TOKEN; copied; NULL or "" sends
 * none). Process-wide: call once before the first client_new, from main. */
void client_set_token(const char *token);

/* A client for BASE_URL (copied, e.g. "http://127.0.0.1:8080"). Never NULL. One thread at a time. */
struct client *client_new(const char *base_url);
/* NULL is a no-op. */
void client_free(struct client *c);

/* POSTs BODY (borrowed; NULL sends {}) to BASE_URL+PATH with `User-Agent: rung-worker/VERSION`
 * (rung_version). Returns the HTTP status with *answer
 * set to the parsed JSON answer (a new reference, NULL when empty or not JSON), or -1 on a
 * transport failure, a timeout after TIMEOUT_MS, or when ABORT (may be NULL) became non-zero,
 * with *err (heap) saying why. The first 401 token_expired (after start, or after a call that
 * passed) is logged as one error line naming the fix; the caller handles the status as any 401. */
int client_post(struct client *c, const char *path, const json_t *body, long timeout_ms,
		const atomic_int *abort, json_t **answer, char **err);

#endif
