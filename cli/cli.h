/* What every rungctl command shares: the exit codes scripts rely on, the context built from global
 * options and the environment, calling the server with one error-reporting rule, and the command
 * table main() dispatches on. Commands live in cmd_jobs.c, cmd_fleet.c and cmd_classify.c. */
#ifndef RUNG_CLI_H
#define RUNG_CLI_H

#include <stdio.h>
#include <jansson.h>

#include "args.h"
#include "httpc.h"

enum cli_exit {
	CLI_OK = 0,             /* done; for watch: the job succeeded */
	CLI_REFUSED = 1,        /* the server said no (4xx/5xx other than 404), or the job failed */
	CLI_USAGE = 2,          /* bad command line or unreadable input file */
	CLI_UNREACHABLE = 3,    /* no answer from the server */
	CLI_NOTFOUND = 4,       /* 404: no such job, escalation, gpu */
};

#define CLI_DEFAULT_URL "http://127.0.0.1:8080"

struct cli {
	const char *url;        /* --url, RUNG_URL, or CLI_DEFAULT_URL (borrowed) */
	const char *token;      /* --token or RUNG_TOKEN, may be NULL (borrowed) */
	int json;               /* --json: print the server's JSON */
	int help;               /* --help */
	FILE *out, *err;        /* stdout/stderr; tests substitute files */
	struct httpc *http;     /* made on first call, freed by cli_release */
	int unreachable_said;   /* "cannot reach" printed since the last answer (watch retries quietly) */
	long last_status;       /* the HTTP status of the last call, 0 when nothing answered */
	int busy_said;          /* a 503 printed since the last other answer (the same wait, said once) */
	int quiet_unsupported;  /* cli_call prints nothing for 404, 405 and 413 (a route an older rungd
				 * lacks, a body it takes only in parts: the caller falls back) */
};

/* The options every command accepts, to put at the start of a command's option table. */
#define CLI_COMMON_OPTS(c) \
	{ .name = "url", .type = ARGS_STRING, .str = &(c)->url }, \
	{ .name = "token", .type = ARGS_STRING, .str = &(c)->token }, \
	{ .name = "json", .type = ARGS_FLAG, .flag = &(c)->json }, \
	{ .name = "help", .type = ARGS_FLAG, .flag = &(c)->help }

struct cli_cmd {
	const char *name;       /* "jobs", "gpu release", ... */
	const char *usage;      /* one line of synopsis after "rungctl " */
	const char *help;       /* what it does, printed by --help */
	int (*run)(struct cli *c, int argc, char **argv);   /* argv: the arguments after the name */
};

/* The command table (NULL-terminated name) and its lookup; argv[0..] are the words after the global
 * options. Returns the command and sets *words to how many argv words its name took, or NULL. */
extern const struct cli_cmd cli_cmds[];
const struct cli_cmd *cli_find(int argc, char **argv, int *words);
/* The command with exactly this name (borrowed); aborts on an unknown name (a bug). */
const struct cli_cmd *cli_cmd_named(const char *name);

/* Fills c from the environment (RUNG_URL, RUNG_TOKEN); out/err default to stdout/stderr. */
void cli_init(struct cli *c);
/* Frees what the context made (the HTTP client); c itself is the caller's. */
void cli_release(struct cli *c);

/* Parses a command's options (after CLI_COMMON_OPTS) and operands; on error prints the message and
 * the command's usage to c->err and returns CLI_USAGE; on --help prints the help and returns -1 so the
 * caller returns CLI_OK; else 0. Needs exactly n_min..n_max operands. */
int cli_args(struct cli *c, const struct cli_cmd *cmd, const struct args_opt *opts, size_t n_opts,
	int argc, char **argv, char **operands, size_t n_min, size_t n_max);

/* Calls the server. On a 2xx answer returns CLI_OK with *answer (new reference, may be NULL). On any
 * other answer prints "rungctl: STATUS ERROR: MESSAGE (field: F)" to c->err and returns CLI_NOTFOUND
 * for 404 and CLI_REFUSED otherwise; CLI_UNREACHABLE when nothing answered (said once until the next
 * answer, so a retry loop does not repeat it). answer may be NULL. */
int cli_call(struct cli *c, const char *method, const char *path, const json_t *body, const char *idem_key,
	json_t **answer);

/* Whether an HTTP status says "try again soon": 503 (rungd's database is down, or it is shutting
 * down), 502 or 504 (a reverse proxy in front of the replicas found none that answered). */
int cli_status_transient(long status);

/* Whether the last call may succeed if made again soon: nothing answered, or a status
 * cli_status_transient names. watch and logs --follow wait those out. */
int cli_transient(const struct cli *c, int rc);

/* The exit code for an HTTP status (2xx 0, 404 4, else 1). */
int cli_exit_for_status(long status);

/* Prints v as indented JSON followed by a newline to c->out. */
void cli_print_json(struct cli *c, const json_t *v);

/* The list under key in a list answer ({"jobs": [...]}); also accepts a bare array. Borrowed. */
json_t *cli_list(const json_t *answer, const char *key);

/* Prints the global help (commands, environment, exit codes) to f. */
void cli_usage(FILE *f);

/* The commands (cmd_*.c). */
int cmd_submit(struct cli *c, int argc, char **argv);
int cmd_jobs(struct cli *c, int argc, char **argv);
int cmd_show(struct cli *c, int argc, char **argv);
int cmd_attempts(struct cli *c, int argc, char **argv);
int cmd_events(struct cli *c, int argc, char **argv);
int cmd_cancel(struct cli *c, int argc, char **argv);
int cmd_retry(struct cli *c, int argc, char **argv);
int cmd_requeue(struct cli *c, int argc, char **argv);
int cmd_priority(struct cli *c, int argc, char **argv);
int cmd_pool(struct cli *c, int argc, char **argv);
int cmd_start(struct cli *c, int argc, char **argv);
int cmd_after(struct cli *c, int argc, char **argv);
int cmd_watch(struct cli *c, int argc, char **argv);
int cmd_wait(struct cli *c, int argc, char **argv);
int cmd_logs(struct cli *c, int argc, char **argv);
int cmd_escalations(struct cli *c, int argc, char **argv);
int cmd_report(struct cli *c, int argc, char **argv);
int cmd_ack(struct cli *c, int argc, char **argv);
int cmd_resolve(struct cli *c, int argc, char **argv);
int cmd_workers(struct cli *c, int argc, char **argv);
int cmd_drain(struct cli *c, int argc, char **argv);
int cmd_resume(struct cli *c, int argc, char **argv);
int cmd_gpus(struct cli *c, int argc, char **argv);
int cmd_owners(struct cli *c, int argc, char **argv);
int cmd_pools(struct cli *c, int argc, char **argv);
int cmd_usage(struct cli *c, int argc, char **argv);
int cmd_version(struct cli *c, int argc, char **argv);
int cmd_gpu_release(struct cli *c, int argc, char **argv);
int cmd_classify(struct cli *c, int argc, char **argv);

#endif
