/* rungctl's token commands (admin): token create, list, revoke, limit, pools and expiry, over /v1/tokens with
 * the caller's RUNG_TOKEN. The new secret is printed once, on stdout, alone. */
#ifndef RUNG_CMD_TOKEN_H
#define RUNG_CMD_TOKEN_H

#include <jansson.h>

struct cli;

/* Each returns a cli_exit code. token create --role R [--name N] [--expires DURATION]: DURATION as
 * common/expiry.h reads it; a bad one is a usage error (exit 2) before anything is sent. token
 * list: a table with an EXPIRES column (cmd_token_expires_cell). */
int cmd_token_create(struct cli *c, int argc, char **argv);
int cmd_token_list(struct cli *c, int argc, char **argv);
int cmd_token_revoke(struct cli *c, int argc, char **argv);
/* rungctl token limit ID --max-running N|none: POST /v1/tokens/{id}/limits. */
int cmd_token_limit(struct cli *c, int argc, char **argv);
/* token pools ID NAME,NAME|any: POST /v1/tokens/{id}/pools (admin); the names checked (pool_name_ok)
 * before anything is sent. */
int cmd_token_pools(struct cli *c, int argc, char **argv);
/* token expiry ID DURATION|never: POST /v1/tokens/{id}/expiry (admin); DURATION as common/expiry.h
 * reads it, checked before anything is sent (exit 2). */
int cmd_token_expiry(struct cli *c, int argc, char **argv);

/* POST /v1/tokens's body for role, name (NULL: none) and expires (DURATION text; NULL: never, no
 * "expires_in_s"): a new object, or NULL with *err (heap, caller frees; "--expires 5x: must be
 * ...") when role is missing, expires is not a duration from 60 s to 3650d, or the text is not
 * UTF-8. Pure. */
json_t *cmd_token_create_body(const char *role, const char *name, const char *expires, char **err);
/* token list's EXPIRES cell of TOKEN (borrowed): "never" (expires_at null), "expired", or the
 * expires_at text. Heap. Pure. */
char *cmd_token_expires_cell(const json_t *token);

#endif
