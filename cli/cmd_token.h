/* rungctl's token commands (admin): token create, list, revoke and limit, over /v1/tokens with
 * the caller's RUNG_TOKEN. The new secret is printed once, on stdout, alone. */
#ifndef RUNG_CMD_TOKEN_H
#define RUNG_CMD_TOKEN_H

struct cli;

/* Each returns a cli_exit code. */
int cmd_token_create(struct cli *c, int argc, char **argv);
int cmd_token_list(struct cli *c, int argc, char **argv);
int cmd_token_revoke(struct cli *c, int argc, char **argv);
/* rungctl token limit ID --max-running N|none: POST /v1/tokens/{id}/limits. */
int cmd_token_limit(struct cli *c, int argc, char **argv);

#endif
