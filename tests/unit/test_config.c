/* Unit tests of server/config.c: defaults, the `key = value` file (comments, quotes), the
 * precedence flag > env > file > default, and errors that name the flag, variable or FILE:LINE. */
#include <stdlib.h>
#include <unistd.h>

#include "tap.h"
#include "../../server/config.h"

static char tmpl[] = "/tmp/rung-test-config.XXXXXX";

/* Writes text to the temp file and returns its path (static). */
static const char *write_file(const char *text)
{
	FILE *f = fopen(tmpl, "w");
	fputs(text, f);
	fclose(f);
	return tmpl;
}

/* Loads with argv (NULL-terminated after argv[0]); returns the result, *err kept for checks. */
static enum config_result load(struct config *c, char **err, const char *const *args)
{
	char *argv[16] = { (char *)"rungd" };
	int argc = 1;

	for (; args && args[argc - 1]; argc++)
		argv[argc] = (char *)args[argc - 1];
	free(*err);
	*err = NULL;
	config_release(c);
	return config_load(c, argc, argv, err);
}

static bool has(const char *s, const char *sub)
{
	return s && strstr(s, sub);
}

int main(void)
{
	struct config c = { 0 };
	char *err = NULL;
	int fd = mkstemp(tmpl);

	close(fd);
	unsetenv("RUNG_CONFIG");
	unsetenv("RUNG_LEASE_SECONDS");
	unsetenv("RUNG_LISTEN");
	unsetenv("RUNG_ESCALATION_WEBHOOK");

	TAP_INT_EQ(load(&c, &err, NULL), CONFIG_OK, "no arguments load");
	TAP_STR_EQ(c.listen, "127.0.0.1:8080", "default listen");
	TAP_INT_EQ(c.lease_seconds, 30, "default lease-seconds");
	TAP_INT_EQ(c.webhook_backoff_ms, 1000, "default webhook-backoff-ms");
	TAP_INT_EQ(c.metrics_history_ms, 30000, "default metrics-history-ms");
	TAP_INT_EQ(c.retain_days, 0, "retention off by default (retain-days 0)");
	TAP_INT_EQ(c.prune_interval_ms, 60000, "default prune-interval-ms");
	TAP_OK(c.escalation_webhook == NULL, "no webhook by default");
	TAP_OK(!c.no_migrate && !c.migrate_only, "booleans default false");

	write_file("# rungd\n\nlease-seconds = 45\n  listen=\"0.0.0.0:9000\"  \nno-migrate = yes\n"
		   "escalation-webhook = http://hooks.example/rung\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), CONFIG_OK, "file loads");
	TAP_INT_EQ(c.lease_seconds, 45, "file sets lease-seconds");
	TAP_STR_EQ(c.listen, "0.0.0.0:9000", "file value unquoted and trimmed");
	TAP_OK(c.no_migrate, "file boolean yes");
	TAP_STR_EQ(c.escalation_webhook, "http://hooks.example/rung", "file sets the webhook");
	TAP_STR_EQ(c.config_file, tmpl, "config_file recorded");

	setenv("RUNG_LEASE_SECONDS", "50", 1);
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), CONFIG_OK, "env over file loads");
	TAP_INT_EQ(c.lease_seconds, 50, "env beats file");
	TAP_STR_EQ(c.listen, "0.0.0.0:9000", "file still applies to other keys");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, "--lease-seconds", "60", NULL }), CONFIG_OK,
		   "flag over env loads");
	TAP_INT_EQ(c.lease_seconds, 60, "flag beats env");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--lease-seconds=61", NULL }), CONFIG_OK, "--flag=value form");
	TAP_INT_EQ(c.lease_seconds, 61, "--flag=value applies");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--metrics-history-ms", "0", NULL }), CONFIG_OK,
		   "--metrics-history-ms 0 (every scrape) loads");
	TAP_INT_EQ(c.metrics_history_ms, 0, "and applies");
	unsetenv("RUNG_LEASE_SECONDS");
	unsetenv("RUNG_PREEMPT_AFTER_S");
	TAP_INT_EQ(load(&c, &err, NULL), CONFIG_OK, "no arguments load again");
	TAP_INT_EQ(c.preempt_after_s, -1, "no preemption by default (preempt-after-s -1)");
	TAP_OK(!c.force_functions, "function files are not forced over a newer release's by default");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--force-functions", NULL }), CONFIG_OK, "--force-functions loads");
	TAP_OK(c.force_functions, "and applies");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--preempt-after-s", "600", NULL }), CONFIG_OK,
		   "--preempt-after-s 600 loads");
	TAP_INT_EQ(c.preempt_after_s, 600, "and applies");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--preempt-after-s", "-2", NULL }), CONFIG_ERROR,
		   "--preempt-after-s -2 refused");
	TAP_OK(has(err, "preempt-after-s") && has(err, "-1 to 604800"), "its error names the flag and the range");
	TAP_INT_EQ(load(&c, &err, NULL), CONFIG_OK, "no arguments load again");
	TAP_OK(!c.has_preempt_priority, "no priority is urgent by default (preempt-priority unset)");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--preempt-after-s", "300", "--preempt-priority", "-5", NULL }),
		   CONFIG_OK, "--preempt-priority -5 with --preempt-after-s 300 loads");
	TAP_OK(c.has_preempt_priority && c.preempt_priority == -5, "and applies (-5)");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--preempt-priority", "0", NULL }), CONFIG_ERROR,
		   "--preempt-priority without --preempt-after-s refused");
	TAP_OK(has(err, "--preempt-priority (from --preempt-priority) needs --preempt-after-s"),
	       "its error names both flags");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--preempt-after-s", "0", "--preempt-priority", "100", NULL }),
		   CONFIG_ERROR, "--preempt-priority 100 refused: every job submitted without a priority would be urgent");
	TAP_OK(has(err, "preempt-priority") && has(err, "-1000000 to 99"), "its error names the flag and the range");
	TAP_INT_EQ(load(&c, &err, NULL), CONFIG_OK, "no arguments load again");
	TAP_INT_EQ(c.resume_hold_s, 120, "a job waits up to 120 s for its checkpoint's host by default (resume-hold-s)");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--resume-hold-s", "0", NULL }), CONFIG_OK,
		   "--resume-hold-s 0 (no hold) loads");
	TAP_INT_EQ(c.resume_hold_s, 0, "and applies");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--resume-hold-s", "-1", NULL }), CONFIG_ERROR,
		   "--resume-hold-s -1 refused");
	TAP_OK(has(err, "resume-hold-s") && has(err, "0 to 86400"), "its error names the flag and the range");

	setenv("RUNG_CONFIG", tmpl, 1);
	TAP_INT_EQ(load(&c, &err, NULL), CONFIG_OK, "RUNG_CONFIG names the file");
	TAP_INT_EQ(c.lease_seconds, 45, "RUNG_CONFIG file read");
	unsetenv("RUNG_CONFIG");

	setenv("RUNG_LEASE_SECONDS", "abc", 1);
	TAP_INT_EQ(load(&c, &err, NULL), CONFIG_ERROR, "bad env value refused");
	TAP_OK(has(err, "RUNG_LEASE_SECONDS") && has(err, "abc"), "env error names the variable and value");
	unsetenv("RUNG_LEASE_SECONDS");

	write_file("listen = 1.2.3.4:1\nlease-seconds = 0\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), CONFIG_ERROR, "out of range in file");
	TAP_OK(has(err, ":2:") && has(err, "lease-seconds") && has(err, "1 to 86400"), "range error has FILE:2");

	write_file("# comment\nlisten = x\nbogus-key = 1\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), CONFIG_ERROR, "unknown key refused");
	TAP_OK(has(err, ":3:") && has(err, "unknown key \"bogus-key\""), "unknown key error has FILE:3");

	write_file("listen 1.2.3.4:5\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), CONFIG_ERROR, "missing = refused");
	TAP_OK(has(err, ":1:") && has(err, "key = value"), "missing = error has FILE:1");

	write_file("no-migrate = maybe\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), CONFIG_ERROR, "bad boolean refused");
	TAP_OK(has(err, ":1:") && has(err, "true or false"), "bad boolean error has FILE:1");

	write_file("config = /etc/other\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), CONFIG_ERROR, "config in a file refused");

	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", "/nonexistent/rung.conf", NULL }), CONFIG_ERROR,
		   "missing file refused");
	TAP_OK(has(err, "/nonexistent/rung.conf"), "missing file error names it");

	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--no-such-flag", NULL }), CONFIG_ERROR, "unknown flag refused");
	TAP_OK(has(err, "--no-such-flag"), "unknown flag named");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--listen", NULL }), CONFIG_ERROR, "flag without value refused");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "stray", NULL }), CONFIG_ERROR, "positional argument refused");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "migrate", "--no-migrate", NULL }), CONFIG_OK, "migrate subcommand");
	TAP_OK(c.migrate_only && c.no_migrate, "migrate subcommand and bare boolean flag");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--version", NULL }), CONFIG_VERSION, "--version");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "migrate", "--lease-seconds", "0", "--version", NULL }),
		   CONFIG_VERSION, "--version after the migrate subcommand and a bad value");

	{
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		config_usage(f);
		fclose(f);
		TAP_OK(has(buf, "--escalation-webhook URL") && has(buf, "RUNG_ESCALATION_WEBHOOK") &&
		       has(buf, "--lease-seconds N") && has(buf, "RUNG_LEASE_SECONDS; default 30") &&
		       has(buf, "RUNG_CONFIG"), "usage lists flags, env vars and defaults");
		free(buf);
	}
	config_release(&c);
	free(err);
	unlink(tmpl);
	return TAP_DONE();
}
