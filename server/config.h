/* rungd's configuration: one table of options, each settable by a long flag, an environment
 * variable (RUNG_ + the flag name upper-cased, dashes as underscores) and a `key = value` line in
 * an optional file (--config FILE / RUNG_CONFIG). Precedence: flag > env > file > default.
 * It parses and validates; it does not act on any option. */
#ifndef RUNG_CONFIG_H
#define RUNG_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

struct config {
	char *listen;               /* --listen HOST:PORT */
	char *database_url;         /* --database-url */
	char *config_file;          /* --config: the file read, or NULL */
	char *escalation_webhook;   /* --escalation-webhook URL, or NULL (no delivery) */
	char *job_webhook;          /* --job-webhook URL, or NULL: no outbox row when a job ends */
	bool no_migrate;            /* --no-migrate */
	bool force_functions;       /* --force-functions: install the function files over a newer release's */
	bool fair_share;            /* --fair-share */
	bool migrate_only;          /* the `migrate` subcommand */
	int lease_seconds;          /* --lease-seconds */
	int heartbeat_ms;           /* --heartbeat-ms */
	int reap_interval_ms;       /* --reap-interval-ms */
	int preempt_after_s;        /* --preempt-after-s (-1: never) */
	bool has_preempt_priority;  /* --preempt-priority was given (it needs preempt_after_s >= 0) */
	int preempt_priority;       /* --preempt-priority: priorities up to it are urgent */
	int resume_hold_s;          /* --resume-hold-s (0: no checkpoint hold) */
	int poll_fallback_ms;       /* --poll-fallback-ms */
	int quota_interval_ms;      /* --quota-interval-ms: how often GPU-hour quotas are read (migration 035) */
	int quarantine_min_s;       /* --quarantine-min-s: no health-check lift before this */
	int db_pool;                /* --db-pool */
	int metrics_history_ms;     /* --metrics-history-ms: reuse of /metrics' history counts */
	int retain_days;            /* --retain-days: ended jobs older than this are deleted (0: never) */
	int prune_interval_ms;      /* --prune-interval-ms */
	int submit_rate;            /* --submit-rate: submits per second per token (burst 2x) */
	int webhook_poll_ms;        /* --webhook-poll-ms: how often the outbox is scanned */
	int webhook_backoff_ms;     /* --webhook-backoff-ms: first retry delay, doubled each time */
	int webhook_backoff_max_ms; /* --webhook-backoff-max-ms: retry delay ceiling */
	int webhook_timeout_ms;     /* --webhook-timeout-ms: one POST's time limit */
};

enum config_result {
	CONFIG_OK,    /* *c is filled in */
	CONFIG_HELP,  /* --help: the usage was printed to stdout; exit 0 */
	CONFIG_VERSION, /* --version: "rungd VERSION" was printed to stdout; exit 0 */
	CONFIG_ERROR  /* *err holds the reason (heap, caller frees); exit 2 */
};

/* Fills *c from defaults, the config file, the environment (getenv) and argv, in rising
 * precedence. argv may start with the `migrate` subcommand. argv is not modified. On
 * CONFIG_ERROR *err is a heap message naming the flag, variable or FILE:LINE at fault; *c may
 * be partly filled: config_release it either way. */
enum config_result config_load(struct config *c, int argc, char **argv, char **err);
/* Frees the strings of *c and zeroes it; accepts a zeroed struct. */
void config_release(struct config *c);
/* Prints every option with its environment variable and default. */
void config_usage(FILE *f);

#endif
