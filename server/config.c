/* rungd's options as one table (config.h) for the shared loader (common/options.h), and the
 * conversion of its validated text into struct config. The `migrate` subcommand is taken off
 * argv here. Owns the strings in struct config; nothing else. */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "priority.h"
#include "util.h"
#include "version.h"

/* Indexes into opts[]; the order is the --help order. */
enum config_opt {
	O_LISTEN, O_DATABASE_URL, O_CONFIG, O_NO_MIGRATE, O_FORCE_FUNCTIONS, O_LEASE_SECONDS, O_HEARTBEAT_MS,
	O_REAP_INTERVAL_MS, O_PREEMPT_AFTER_S, O_PREEMPT_PRIORITY, O_RESUME_HOLD_S, O_POLL_FALLBACK_MS, O_FAIR_SHARE, O_QUOTA_INTERVAL_MS, O_QUARANTINE_MIN_S, O_DB_POOL,
	O_METRICS_HISTORY_MS, O_RETAIN_DAYS, O_PRUNE_INTERVAL_MS, O_SUBMIT_RATE, O_ESCALATION_WEBHOOK, O_JOB_WEBHOOK,
	O_WEBHOOK_POLL_MS, O_WEBHOOK_BACKOFF_MS, O_WEBHOOK_BACKOFF_MAX_MS, O_WEBHOOK_TIMEOUT_MS, O_COUNT
};

/* A string, an integer in [lo, hi] and a boolean option: index, flag name, then the rest. */
#define S(n, name, arg, def, help) [n] = { name, OPTIONS_STR, arg, def, help, NULL, 0, 0, 0, NULL }
#define I(n, name, def, lo, hi, help) [n] = { name, OPTIONS_INT, "N", def, help, NULL, lo, hi, 0, NULL }
#define B(n, name, help) [n] = { name, OPTIONS_BOOL, NULL, "false", help, NULL, 0, 0, 0, NULL }

static const struct options_desc opts[O_COUNT] = {
	S(O_LISTEN, "listen", "HOST:PORT", "127.0.0.1:8080", "address to serve HTTP on"),
	S(O_DATABASE_URL, "database-url", "URL", "postgresql://postgres@127.0.0.1:5432/rung", "PostgreSQL URL"),
	[O_CONFIG] = { "config", OPTIONS_STR, "FILE", NULL, "read `key = value` lines (keys: the long flags)", NULL,
		       0, 0, OPTIONS_CONFIG, NULL },
	B(O_NO_MIGRATE, "no-migrate", "do not apply migrations or function files at start-up"),
	B(O_FORCE_FUNCTIONS, "force-functions",
	  "install this release's function files even when a newer release migrated the database (a deliberate "
	  "rollback; otherwise they are left as the newer release installed them)"),
	I(O_LEASE_SECONDS, "lease-seconds", "30", 1, 86400, "attempt lease length"),
	I(O_HEARTBEAT_MS, "heartbeat-ms", "5000", 10, 3600000, "heartbeat interval told to workers"),
	I(O_REAP_INTERVAL_MS, "reap-interval-ms", "1000", 10, 3600000, "how often expired leases are reaped"),
	I(O_PREEMPT_AFTER_S, "preempt-after-s", "-1", -1, 604800,
	  "stop a job a worker borrowed from another pool once it ran N s, when a job of the worker's own pool "
	  "waits for its GPU (and with --preempt-priority, a job an urgent one waits for); it is queued again "
	  "unchanged (-1: never; enable once every replica runs this release)"),
	[O_PREEMPT_PRIORITY] = { "preempt-priority", OPTIONS_INT, "N", NULL,
				 "a queued job of priority N or lower (urgent) may stop a running job of its pool of a higher "
				 "number once it ran --preempt-after-s, which must be set; only support and admin tokens may give "
				 "such a priority; below 100, the default priority (unset: priorities stop nothing)",
				 NULL, PRIORITY_MIN, PRIORITY_DEFAULT - 1, 0, "unset" },
	I(O_RESUME_HOLD_S, "resume-hold-s", "120", 0, 86400,
	  "a job queued again after an out-of-memory error waits up to N s for a GPU of the worker whose host has its "
	  "checkpoint, so that it resumes there instead of starting over (0: never; set 0 when training_folder is on "
	  "storage every host mounts)"),
	I(O_POLL_FALLBACK_MS, "poll-fallback-ms", "2000", 10, 3600000,
	  "how often parked long-polls retry without a wake-up"),
	B(O_FAIR_SHARE, "fair-share",
	  "share the GPUs among owners: within a priority, the next job is of the owner that runs the fewest"),
	I(O_QUOTA_INTERVAL_MS, "quota-interval-ms", "30000", 100, 3600000,
	  "how often the GPU hours of owners with a quota are read (an owner over its quota starts no job until a "
	  "read finds it under)"),
	I(O_QUARANTINE_MIN_S, "quarantine-min-s", "600", 0, 604800,
	  "a quarantined GPU gets leases again after a passing health check only this long after quarantine"),
	I(O_DB_POOL, "db-pool", "4", 1, 256, "database connections"),
	I(O_METRICS_HISTORY_MS, "metrics-history-ms", "30000", 0, 3600000,
	  "how long /metrics answers from one reading of the history's counts (0: every scrape)"),
	I(O_RETAIN_DAYS, "retain-days", "0", 0, 36500,
	  "delete jobs that ended more than N days ago, with their attempts and events (0: keep everything)"),
	I(O_PRUNE_INTERVAL_MS, "prune-interval-ms", "60000", 10, 86400000, "how often retention looks for such jobs"),
	I(O_SUBMIT_RATE, "submit-rate", "200", 1, 1000000,
	  "job submits per second per token (burst twice that; over it: 429)"),
	S(O_ESCALATION_WEBHOOK, "escalation-webhook", "URL", NULL,
	  "POST each new escalation here as JSON (none by default)"),
	S(O_JOB_WEBHOOK, "job-webhook", "URL", NULL,
	  "POST each job that ends (succeeded, failed, cancelled) here as JSON (none by default; set it on every replica)"),
	I(O_WEBHOOK_POLL_MS, "webhook-poll-ms", "1000", 10, 3600000, "how often undelivered webhooks are looked for"),
	I(O_WEBHOOK_BACKOFF_MS, "webhook-backoff-ms", "1000", 1, 3600000,
	  "first retry delay of a failed delivery, doubled per attempt"),
	I(O_WEBHOOK_BACKOFF_MAX_MS, "webhook-backoff-max-ms", "300000", 1, 86400000, "retry delay ceiling"),
	I(O_WEBHOOK_TIMEOUT_MS, "webhook-timeout-ms", "10000", 100, 600000, "time limit of one delivery"),
};

#undef S
#undef I
#undef B

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

enum config_result config_load(struct config *c, int argc, char **argv, char **err)
{
	struct options o;
	enum config_result rc = CONFIG_ERROR;
	bool migrate = argc > 1 && strcmp(argv[1], "migrate") == 0;

	*err = NULL;
	memset(c, 0, sizeof *c);
	options_init(&o, opts, O_COUNT);
	/* With `migrate`, it stands in for argv[0]: the loader skips its first element. */
	switch (options_load(&o, migrate ? argc - 1 : argc, migrate ? argv + 1 : argv, err)) {
	case OPTIONS_OK:
		break;
	case OPTIONS_HELP:
		config_usage(stdout);
		rc = CONFIG_HELP;
		goto out;
	case OPTIONS_VERSION:
		printf("rungd %s\n", rung_version());
		rc = CONFIG_VERSION;
		goto out;
	case OPTIONS_ERROR:
		goto out;
	default:
		abort();
	}
	c->migrate_only = migrate;
	c->listen = dup_or_null(options_str(&o, O_LISTEN));
	c->database_url = dup_or_null(options_str(&o, O_DATABASE_URL));
	c->config_file = dup_or_null(options_str(&o, O_CONFIG));
	c->escalation_webhook = dup_or_null(options_str(&o, O_ESCALATION_WEBHOOK));
	c->job_webhook = dup_or_null(options_str(&o, O_JOB_WEBHOOK));
	c->no_migrate = options_bool(&o, O_NO_MIGRATE);
	c->force_functions = options_bool(&o, O_FORCE_FUNCTIONS);
	/* The table's ranges keep every value within int. */
	c->lease_seconds = (int)options_int(&o, O_LEASE_SECONDS);
	c->heartbeat_ms = (int)options_int(&o, O_HEARTBEAT_MS);
	c->reap_interval_ms = (int)options_int(&o, O_REAP_INTERVAL_MS);
	c->preempt_after_s = (int)options_int(&o, O_PREEMPT_AFTER_S);
	c->has_preempt_priority = options_str(&o, O_PREEMPT_PRIORITY) != NULL;
	c->preempt_priority = (int)options_int(&o, O_PREEMPT_PRIORITY);
	if (c->has_preempt_priority && c->preempt_after_s < 0) {
		*err = xasprintf("--preempt-priority (from %s) needs --preempt-after-s: the least time a job runs before "
				 "it may be stopped", options_source(&o, O_PREEMPT_PRIORITY));
		goto out;
	}
	c->resume_hold_s = (int)options_int(&o, O_RESUME_HOLD_S);
	c->poll_fallback_ms = (int)options_int(&o, O_POLL_FALLBACK_MS);
	c->fair_share = options_bool(&o, O_FAIR_SHARE);
	c->quota_interval_ms = (int)options_int(&o, O_QUOTA_INTERVAL_MS);
	c->quarantine_min_s = (int)options_int(&o, O_QUARANTINE_MIN_S);
	c->db_pool = (int)options_int(&o, O_DB_POOL);
	c->metrics_history_ms = (int)options_int(&o, O_METRICS_HISTORY_MS);
	c->retain_days = (int)options_int(&o, O_RETAIN_DAYS);
	c->prune_interval_ms = (int)options_int(&o, O_PRUNE_INTERVAL_MS);
	c->submit_rate = (int)options_int(&o, O_SUBMIT_RATE);
	c->webhook_poll_ms = (int)options_int(&o, O_WEBHOOK_POLL_MS);
	c->webhook_backoff_ms = (int)options_int(&o, O_WEBHOOK_BACKOFF_MS);
	c->webhook_backoff_max_ms = (int)options_int(&o, O_WEBHOOK_BACKOFF_MAX_MS);
	c->webhook_timeout_ms = (int)options_int(&o, O_WEBHOOK_TIMEOUT_MS);
	rc = CONFIG_OK;
out:
	options_release(&o);
	return rc;
}

void config_release(struct config *c)
{
	free(c->listen);
	free(c->database_url);
	free(c->config_file);
	free(c->escalation_webhook);
	free(c->job_webhook);
	memset(c, 0, sizeof *c);
}

void config_usage(FILE *f)
{
	fprintf(f, "usage: rungd [migrate] [options]\n"
		   "       rungd token create --role submitter|worker|support|admin [--name N] [--database-url URL]\n"
		   "       rungd token revoke NAME|ID [--database-url URL]\n"
		   "  migrate                       apply the schema migrations, then the function files (sql/functions), and exit\n"
		   "  token create / revoke         manage API tokens straight in the database (bootstrap an admin)\n");
	options_usage(f, opts, O_COUNT);
}
