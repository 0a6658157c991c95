/* Token management: the admin API (POST/GET /v1/tokens, POST /v1/tokens/{id}/revoke|limits) and the
 * `rungd token create|revoke` command that works straight on the database (blocking libpq), so
 * the first admin token can be made before any exists. The secret is shown once and never stored. */
#ifndef RUNG_API_TOKENS_H
#define RUNG_API_TOKENS_H

struct hreq;

/* Handlers; each answers h exactly once. */
void api_tokens_create(struct hreq *h);
void api_tokens_list(struct hreq *h);
void api_tokens_revoke(struct hreq *h);
/* POST /v1/tokens/{id}/limits {"max_running": N|null}: how many of the token's jobs may run at once
 * (0: none starts; null: no limit; migrations/020) -> 200 TOKEN; 400 naming max_running; 404. */
void api_tokens_limits(struct hreq *h);

#define API_TOKENS_MAX_RUNNING 1000000 /* a larger limit is no limit: say null */

/* `rungd token ...`: argv[0] is "token". Prints the new token alone on stdout (details on
 * stderr). Reads --database-url or RUNG_DATABASE_URL. Returns the process exit code (0 ok,
 * 1 refused or database error, 2 usage). */
int api_tokens_cmd(int argc, char **argv);

#endif
