/* Who may do what in rungd: bearer tokens (random, shown once, stored as SHA-256), the four roles,
 * the router's per-route role and ownership check with a short-lived cache of verified tokens and
 * a memo of their ownership answers, and the abuse limits that belong to a caller (submit rate,
 * parked long-polls, JSON depth). It owns no routes and no SQL of the handlers; api_tokens.c
 * manages the tokens themselves. */
#ifndef RUNG_AUTH_H
#define RUNG_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth_who.h"

struct app;
struct hreq;
struct auth;

#define AUTH_TOKEN_PREFIX "rung_"
#define AUTH_TOKEN_BYTES 32                 /* random bytes in a token */
#define AUTH_TOKEN_LEN (5 + 2 * AUTH_TOKEN_BYTES) /* "rung_" + 64 hex digits */
#define AUTH_HASH_HEX 64                    /* hex SHA-256 */
#define AUTH_CACHE_TTL_MS 5000              /* a verified token is trusted this long: revocation
					     * takes effect on every replica within it */
#define AUTH_EXPIRES_TEXT 32                /* bytes of an expiry instant's text, "2030-01-31T12:00:00Z" */
#define AUTH_JSON_MAX_DEPTH 64              /* deeper request bodies are answered 400 */
#define AUTH_SUBMIT_RATE_DEFAULT 200        /* submits per second per token (--submit-rate) */

/* enum auth_role (the roles, usable as bits in a route's allowed set) and struct auth_who (the
 * caller) are in auth_who.h. */
#define AUTH_OPEN (1u << 4)  /* route flag: no token needed (/healthz) */
#define AUTH_ANY (AUTH_SUBMITTER | AUTH_WORKER | AUTH_SUPPORT | AUTH_ADMIN)
#define AUTH_READERS (AUTH_SUBMITTER | AUTH_SUPPORT | AUTH_ADMIN) /* job views */
#define AUTH_STAFF (AUTH_SUPPORT | AUTH_ADMIN)
#define AUTH_WORKERS (AUTH_WORKER | AUTH_ADMIN)

/* What param[0] of a route names, for the ownership check (admin and support skip it). */
enum auth_scope {
	AUTH_SCOPE_NONE = 0,
	AUTH_SCOPE_JOB,     /* a job: a submitter must be its owner */
	AUTH_SCOPE_WORKER,  /* a worker: a worker token must be the one bound to it */
	AUTH_SCOPE_ATTEMPT, /* an attempt: leased to a worker bound to the worker token */
};

/* A worker's ownership or GPUs may have changed (it registered again): the ownership memo forgets
 * its answers about it and its attempts, so the next call naming one of them reads ownership
 * again. a may be NULL. */
void auth_worker_changed(struct auth *a, long long worker_id);

/* A token bucket: `rate` tokens a second up to `burst`; starts full. */
struct auth_bucket {
	double tokens;
	int64_t last_ms;
	bool primed;
};

/* SHA-256 of data into out. */
void auth_sha256(const void *data, size_t len, uint8_t out[32]);
/* Lower-case hex SHA-256 of the string s into out (NUL-terminated). */
void auth_hash_hex(const char *s, char out[AUTH_HASH_HEX + 1]);
/* A new token "rung_<64 hex>" from getrandom into out. Returns 0, or -1 when no randomness. */
int auth_token_new(char out[AUTH_TOKEN_LEN + 1]);
/* True when s has the shape of a token (prefix, length, hex). */
bool auth_token_wellformed(const char *s);
/* True when s is a valid token name. */
bool auth_name_valid(const char *s);
/* True when s may name a new token: valid, and not all digits (a token is revoked by its id or its
 * name, so a name that reads as an id would name two tokens). */
bool auth_name_new_ok(const char *s);
/* "submitter", "worker", "support", "admin" (static), or "none". */
const char *auth_role_name(enum auth_role r);
/* The role named s, or AUTH_NONE. */
enum auth_role auth_role_parse(const char *s);
/* Takes one token from b at now_ms; on refusal returns false and sets *retry_ms to the wait. */
bool auth_bucket_take(struct auth_bucket *b, double rate, double burst, int64_t now_ms, int64_t *retry_ms);
/* Takes n more tokens from b after a take that was allowed (a batch of n + 1 jobs), down below zero:
 * the debt is repaid at the bucket's rate before the next take is allowed. */
void auth_bucket_charge(struct auth_bucket *b, double n);
/* Maximum nesting depth of arrays/objects in the JSON text (strings skipped); stops counting
 * once past `cap` and returns cap + 1. Works on any bytes (malformed JSON is jansson's business). */
int auth_json_depth(const char *buf, size_t len, int cap);

/* The auth state of one rungd (token cache, buckets, parked counts); submit_rate per second per
 * token, burst twice that. Registers rung_auth_owner_checks_total in app->metrics (when there is
 * one: create it first) and counts every ownership check there. auth_free(NULL) is a no-op. */
struct auth *auth_new(struct app *app, int submit_rate);
void auth_free(struct auth *a);

/* The router's guard (routes.c): checks the bearer token (cache, else one async lookup), its
 * expiry (at every request, against the expiry the cache holds: exact, not only when the cache
 * reads the token again), the role against `roles` (AUTH_* bits or AUTH_OPEN), and ownership of
 * param[0] per `scope`; then calls handler(h) with h->who filled in. Refusals answer JSON and free
 * h: 401 unauthorized (no, malformed, unknown or revoked token), 401 token_expired (its message
 * says when), 403, 404. */
void auth_dispatch(struct hreq *h, unsigned roles, enum auth_scope scope, void (*handler)(struct hreq *h));

/* Why auth_dispatch_as refused the token itself. */
enum auth_refusal {
	AUTH_REFUSED_MISSING, /* no token, or not of a token's shape */
	AUTH_REFUSED_UNKNOWN, /* no such token, or revoked */
	AUTH_REFUSED_EXPIRED, /* its expiry has passed */
};
/* Answers h (exactly once) for a refused token; expired_at: when it expired (text, borrowed; NULL
 * unless why is AUTH_REFUSED_EXPIRED); arg: auth's copy of the text the caller gave
 * auth_dispatch_as (borrowed for the call; NULL when it gave none). */
typedef void (*auth_refused_fn)(struct hreq *h, enum auth_refusal why, const char *expired_at, const char *arg);
/* auth_dispatch for a browser (web.c): token is the one to check (a cookie, a login form's field;
 * NULL: the Authorization header's, as auth_dispatch), and a refusal of the token itself goes to
 * refused(h, why, expired_at, refused_arg), which answers h, instead of a 401 JSON (refused NULL:
 * exactly auth_dispatch). refused_arg (NULL or text, such as the page to come back to) is copied:
 * it may go when this returns, though the refusal may come later, after the token's lookup. Role
 * and ownership refusals are answered as auth_dispatch answers them. */
void auth_dispatch_as(struct hreq *h, const char *token, unsigned roles, enum auth_scope scope,
		      void (*handler)(struct hreq *h), auth_refused_fn refused, const char *refused_arg);

/* What this replica's token cache says of a token at a request (auth_cache_get). */
enum auth_cached {
	AUTH_CACHED_MISS,    /* not cached, or verified AUTH_CACHE_TTL_MS ago or more: look it up */
	AUTH_CACHED_LIVE,    /* verified within the TTL and not expired: trust it */
	AUTH_CACHED_EXPIRED, /* verified within the TTL, and the expiry it holds has passed: refuse it */
};
/* The cache's two steps, with the monotonic clock given (the guard passes util_mono_ms(); tests
 * drive it). auth_cache_put records token hash (hex SHA-256, copied) as verified at now_ms, with
 * its id, name and role and when it expires: expires_ms, a monotonic instant (INT64_MAX: never),
 * and expires_at, that instant as text for messages (NULL: none); a cached entry's submit bucket
 * is kept. auth_cache_get says what the cache holds of hash at now_ms: the expiry is compared at
 * every call, so a token that expires while cached is refused from that instant. */
void auth_cache_put(struct auth *a, const char *hash, long long token_id, const char *name, enum auth_role role,
		    int64_t expires_ms, const char *expires_at, int64_t now_ms);
enum auth_cached auth_cache_get(struct auth *a, const char *hash, int64_t now_ms);
/* Drops a token from this replica's cache at once (after a revoke through the API). */
void auth_forget(struct auth *a, long long token_id);
/* The per-token submit limit: true when the caller may submit now; else answers 429 with
 * Retry-After, frees h and returns false. */
bool auth_submit_allowed(struct hreq *h);
/* The same bucket without an answer, for callers that answer in their own form (a web page): true
 * when the caller may submit now, else false with *retry_ms until it may; h is untouched. */
bool auth_submit_take(struct hreq *h, int64_t *retry_ms);
/* After auth_submit_allowed: counts n more submits against the caller's rate (the other jobs of a
 * batch), as debt when the bucket holds fewer (auth_bucket_charge). */
void auth_submit_charge(struct hreq *h, double n);
/* Counts a parked long-poll of worker_id against its limit (GPUs + 1); on excess answers 429,
 * frees h and returns false. The count is released when h is answered (auth_hreq_release). */
bool auth_park_enter(struct hreq *h, long long worker_id);
/* The router's release hook (routes.c): when h is freed, releases what the request holds (its
 * parked slot). */
void auth_hreq_release(struct hreq *h);
/* The router's body check (routes.c), before a request body is parsed: a body nested deeper than
 * AUTH_JSON_MAX_DEPTH is answered 400 json_too_deep (h freed) and false returned; else true. */
bool auth_body_check(struct hreq *h, const char *buf, size_t len);
/* Parked long-polls currently counted for worker_id (tests, logs). */
int auth_parked(const struct auth *a, long long worker_id);

#endif
