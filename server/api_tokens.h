/* Token management: the admin API (POST/GET /v1/tokens, POST /v1/tokens/{id}/revoke|limits) and the
 * `rungd token create|revoke` command that works straight on the database (blocking libpq), so
 * the first admin token can be made before any exists. The secret is shown once and never stored. */
#ifndef RUNG_API_TOKENS_H
#define RUNG_API_TOKENS_H

#include <stdbool.h>

#include <jansson.h>

struct hreq;

/* Handlers; each answers h exactly once. POST /v1/tokens {"role", "name"?, "expires_in_s"?} ->
 * 201 TOKEN + "token" (the secret; TOKEN carries expires_at, null for never, and expired); 400
 * naming role, name or expires_in_s; 409 name_taken. */
void api_tokens_create(struct hreq *h);
void api_tokens_list(struct hreq *h);
void api_tokens_revoke(struct hreq *h);
/* POST /v1/tokens/{id}/limits {"max_running"?: N|null, "pool_max_running"?: {"POOL": N|null}|null, "gpu_hours"?,
 * "gpu_hours_days"?, "pool_gpu_hours"?}: how many of the token's jobs may run at once (0: none starts;
 * null: no limit; migrations/020), how many of its jobs of each pool named (merged into those set
 * before; migrations/034), its GPU-hour quota (035) and its quotas per pool (037, merged) -> 200
 * TOKEN; 400 naming the field (api_tokens_check_limits); 404. */
void api_tokens_limits(struct hreq *h);

#define API_TOKENS_MAX_RUNNING 1000000 /* a larger limit is no limit: say null */
#define API_TOKENS_MAX_GPU_HOURS 10000000 /* a quota of GPU hours (migration 035): a larger one is none */
#define API_TOKENS_QUOTA_DAYS_MIN 1       /* the window a quota counts, in days */
#define API_TOKENS_QUOTA_DAYS_MAX 90

/* The checks of POST /v1/tokens's body, for the web form too: body is {"role", "name"?,
 * "expires_in_s"?} (borrowed). Returns NULL with *role and *name (borrowed from body; *name NULL
 * when absent or null) and *expires_in_s (0 when absent or null: never; else an integer from
 * EXPIRY_MIN_S to EXPIRY_MAX_S, common/expiry.h) when it is one, else the failing field (static,
 * or a key borrowed from body) and *msg (heap, caller frees) saying why. Pure. */
const char *api_tokens_check_create(const json_t *body, const char **role, const char **name,
				    long long *expires_in_s, char **msg);
/* sql/token_create.sql's $4 for expires_in_s: NULL (never) when it is 0, else its digits written
 * into buf (returned). Pure. */
const char *api_tokens_expires_param(long long expires_in_s, char buf[32]);
/* Whether v (borrowed; NULL: absent) is a max_running a token may take: null (no limit) or an
 * integer from 0 to API_TOKENS_MAX_RUNNING. Pure. */
bool api_tokens_limit_ok(const json_t *v);
/* The checks of POST /v1/tokens/{id}/limits's body (migrations 034, 035, 037): {"max_running"?: N | null,
 * "pool_max_running"?: {"POOL": N | null, ...} (1 to API_TOKENS_POOLS_MAX pool names) | null,
 * "gpu_hours"?: H (a number, 0 to API_TOKENS_MAX_GPU_HOURS) | null, "gpu_hours_days"?: D (a whole
 * number, API_TOKENS_QUOTA_DAYS_MIN to _MAX), "pool_gpu_hours"?: {"POOL": H | null, ...} | null}, at least one of them, nothing else; each N as
 * api_tokens_limit_ok takes it. Returns NULL when it is one, else the failing field (static, or a key
 * borrowed from body) and *msg (heap, caller frees) saying why. Pure. */
const char *api_tokens_check_limits(const json_t *body, char **msg);
/* Logs a token's limits once they were set ("token limit set": max_running, pool_max_running,
 * gpu_hours as "500/7d" and pool_gpu_hours, each "none" when unset), naming who set them and through what (via: "api",
 * "web"). doc is the TOKEN the statement answered (borrowed). */
void api_tokens_log_limits(const char *token, const json_t *doc, const char *by, const char *via);

/* `rungd token ...`: argv[0] is "token"; create takes --role, --name and --expires DURATION
 * (common/expiry.h). Prints the new token alone on stdout (details on stderr). Reads --database-url or RUNG_DATABASE_URL. Returns the process exit code (0 ok,
 * 1 refused or database error, 2 usage). */
int api_tokens_cmd(int argc, char **argv);

#define API_TOKENS_POOLS_MAX 32 /* pools a token's list may name */

/* POST /v1/tokens/{id}/pools {"pools": [NAME, ...] | null} (admin): the worker pools the token may
 * use (migration 027: its owner's submits and moves, its worker's registration), null for any;
 * 200 TOKEN, 400 naming pools, 404. */
void api_tokens_pools(struct hreq *h);

/* POST /v1/tokens/{id}/expiry {"expires_in_s": N | null} (admin): the token expires N seconds from
 * now (EXPIRY_MIN_S to EXPIRY_MAX_S), or never (null); an expired token may be given time again, a
 * revoked one may not. 200 TOKEN; 400 naming expires_in_s; 404; 409 token_revoked. This replica
 * forgets the token's cached expiry at once; the others within their cache's TTL. */
void api_tokens_expiry(struct hreq *h);

#endif
