/* rungctl's HTTP client: one libcurl easy handle per call to rungd's JSON API, the bearer token,
 * capped answer bodies. Owns transport only; what a status means is cli.c's business. */
#ifndef RUNG_HTTPC_H
#define RUNG_HTTPC_H

#include <jansson.h>

#define HTTPC_MAX_BODY (64u << 20)  /* answers larger than this are cut off and reported */

struct httpc;

/* A client for the server at base_url (e.g. http://127.0.0.1:8080; a trailing '/' is dropped) that
 * sends `Authorization: Bearer TOKEN` when token is non-NULL and non-empty, and `User-Agent:
 * rungctl/VERSION` (rung_version) always. Both are copied. */
struct httpc *httpc_new(const char *base_url, const char *token);
void httpc_free(struct httpc *h);

/* Sends METHOD base_url+path with body (borrowed; NULL sends none) as JSON, plus
 * `Idempotency-Key: KEY` when idem_key is set. On an answer (any status) returns 0, sets *status and
 * *answer to the parsed JSON body (new reference; NULL when empty; a non-JSON body becomes
 * {"error": "bad_answer", "message": TEXT}). When no answer arrives (refused, timeout, DNS) returns -1
 * with *err a heap string naming the URL and curl's reason; the caller frees it. */
int httpc_call(struct httpc *h, const char *method, const char *path, const json_t *body,
	const char *idem_key, long *status, json_t **answer, char **err);

/* URL-escapes one path segment (a job or escalation id as typed); heap string the caller frees. */
char *httpc_escape(const char *segment);

#endif
