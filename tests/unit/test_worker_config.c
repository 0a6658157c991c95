/* Unit tests of worker/worker_config.c, rung-worker's table: defaults, the historic variable
 * names (RUNG_URL, RUNG_WORKER_NAME, RUNG_TOKEN) and derived ones (RUNG_GPUS, RUNG_LEASE_WAIT_MS),
 * precedence flag > env > file > default, a config file and its errors, and --help. */
#include <stdlib.h>
#include <unistd.h>

#include "pool.h"
#include "tap.h"
#include "../../worker/worker_config.h"

static char tmpl[] = "/tmp/rung-test-worker-config.XXXXXX";

static void write_file(const char *text)
{
	FILE *f = fopen(tmpl, "w");
	fputs(text, f);
	fclose(f);
}

static enum options_result load(struct worker_config *c, char **err, const char *const *args)
{
	char *argv[16] = { (char *)"rung-worker" };
	int argc = 1;

	for (; args && args[argc - 1]; argc++)
		argv[argc] = (char *)args[argc - 1];
	free(*err);
	*err = NULL;
	worker_config_release(c);
	return worker_config_load(c, argc, argv, err);
}

static bool has(const char *s, const char *sub)
{
	return s && strstr(s, sub);
}

int main(void)
{
	static const char *const vars[] = { "RUNG_CONFIG", "RUNG_WORKER_CONFIG", "RUNG_URL", "RUNG_TOKEN", "RUNG_WORKER_NAME", "RUNG_GPUS",
		"RUNG_LEASE_WAIT_MS", "RUNG_TRAINER_CMD", "RUNG_WORK_DIR", "RUNG_HEALTH_CMD", "RUNG_DRAIN_TIMEOUT_MS", "RUNG_POOL", "RUNG_BORROW" };
	struct worker_config c = { 0 };
	char *err = NULL, host[256] = "worker";
	int fd = mkstemp(tmpl);

	close(fd);
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
	gethostname(host, sizeof host - 1);

	TAP_INT_EQ(load(&c, &err, NULL), OPTIONS_OK, "no arguments load");
	TAP_STR_EQ(c.opts.server, "http://127.0.0.1:8080", "default server");
	TAP_STR_EQ(c.opts.name, host, "default name is the hostname");
	TAP_STR_EQ(c.opts.trainer_cmd, "python run.py {config}", "default trainer-cmd");
	TAP_STR_EQ(c.opts.work_dir, "var/worker", "default work-dir");
	TAP_OK(c.opts.gpus == NULL && c.opts.health_cmd == NULL && c.token == NULL, "unset by default");
	TAP_INT_EQ(c.opts.lease_wait_ms, 25000, "default lease-wait-ms");
	TAP_INT_EQ(c.opts.drain_timeout_ms, 30000, "default drain-timeout-ms");
	TAP_INT_EQ(c.opts.health_max_used_mib, 1024, "default health-max-used-mib");
	TAP_STR_EQ(c.opts.pool, "default", "default pool: the pool of jobs that name none");
	TAP_OK(c.opts.borrow == NULL, "borrows from no pool by default");

	write_file("# worker\nserver = http://file:1\nname = file-name\ngpus = 0\nlease-wait-ms = 1000\n"
		   "token = file-token\nhealth-cmd = \"check {gpu_index}\"\ndrain-timeout-ms = 5\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), OPTIONS_OK, "file loads");
	TAP_STR_EQ(c.opts.server, "http://file:1", "file server");
	TAP_STR_EQ(c.opts.name, "file-name", "file name");
	TAP_STR_EQ(c.opts.gpus, "0", "file gpus");
	TAP_INT_EQ(c.opts.lease_wait_ms, 1000, "file lease-wait-ms");
	TAP_STR_EQ(c.token, "file-token", "file token");
	TAP_STR_EQ(c.opts.health_cmd, "check {gpu_index}", "file health-cmd unquoted");
	TAP_STR_EQ(c.config_file, tmpl, "config_file recorded");

	setenv("RUNG_URL", "http://env:2", 1);
	setenv("RUNG_WORKER_NAME", "env-name", 1);
	setenv("RUNG_GPUS", "1,2", 1);
	setenv("RUNG_LEASE_WAIT_MS", "2000", 1);
	setenv("RUNG_TOKEN", "env-token", 1);
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), OPTIONS_OK, "env + file load");
	TAP_STR_EQ(c.opts.server, "http://env:2", "RUNG_URL beats file");
	TAP_STR_EQ(c.opts.name, "env-name", "RUNG_WORKER_NAME beats file");
	TAP_STR_EQ(c.opts.gpus, "1,2", "RUNG_GPUS beats file");
	TAP_INT_EQ(c.opts.lease_wait_ms, 2000, "RUNG_LEASE_WAIT_MS beats file");
	TAP_STR_EQ(c.token, "env-token", "RUNG_TOKEN beats file");
	TAP_INT_EQ(c.opts.drain_timeout_ms, 5, "file still applies to other keys");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, "--server", "http://flag:3", "--gpus=3",
							 "--lease-wait-ms", "3000", "--token", "flag-token", NULL }),
		   OPTIONS_OK, "flags load");
	TAP_STR_EQ(c.opts.server, "http://flag:3", "--server beats RUNG_URL");
	TAP_STR_EQ(c.opts.gpus, "3", "--gpus beats RUNG_GPUS");
	TAP_INT_EQ(c.opts.lease_wait_ms, 3000, "--lease-wait-ms beats env");
	TAP_STR_EQ(c.token, "flag-token", "--token beats RUNG_TOKEN");
	TAP_STR_EQ(getenv("RUNG_TOKEN"), "env-token", "loading leaves the environment alone (main unsets it)");
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);

	setenv("RUNG_WORKER_CONFIG", tmpl, 1);
	TAP_INT_EQ(load(&c, &err, NULL), OPTIONS_OK, "RUNG_WORKER_CONFIG names the file");
	TAP_STR_EQ(c.opts.name, "file-name", "RUNG_WORKER_CONFIG file read");
	unsetenv("RUNG_WORKER_CONFIG");

	write_file("server = http://x\nlease-wait-ms = soon\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), OPTIONS_ERROR, "bad file value");
	TAP_OK(has(err, ":2:") && has(err, "lease-wait-ms"), "file error has FILE:2 and the key");
	write_file("listen = 0.0.0.0:1\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), OPTIONS_ERROR,
		   "a rungd key in the worker's file refused");
	TAP_OK(has(err, "unknown key \"listen\""), "unknown key named");
	setenv("RUNG_DRAIN_TIMEOUT_MS", "-1", 1);
	TAP_INT_EQ(load(&c, &err, NULL), OPTIONS_ERROR, "negative env refused");
	TAP_OK(has(err, "RUNG_DRAIN_TIMEOUT_MS"), "env error names the variable");
	unsetenv("RUNG_DRAIN_TIMEOUT_MS");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--trainer-cmd", "", NULL }), OPTIONS_ERROR,
		   "empty trainer-cmd refused");
	/* --pool: the flag, its variable and a file line, each checked against the one rule (common/pool.h) */
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--pool", "h200", NULL }), OPTIONS_OK, "--pool h200 loads");
	TAP_STR_EQ(c.opts.pool, "h200", "--pool sets the pool");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--pool", "H200", NULL }), OPTIONS_ERROR, "--pool H200 refused");
	TAP_OK(has(err, "--pool") && has(err, POOL_NAME_RULE) && has(err, "\"H200\""),
	       "a bad --pool: the error names the flag, the rule and the value");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--pool", "", NULL }), OPTIONS_ERROR, "an empty --pool refused");
	TAP_OK(has(err, "--pool") && has(err, POOL_NAME_RULE), "an empty --pool: the error names the flag and the rule");
	setenv("RUNG_POOL", "-a100", 1);
	TAP_INT_EQ(load(&c, &err, NULL), OPTIONS_ERROR, "RUNG_POOL starting with '-' refused");
	TAP_OK(has(err, "RUNG_POOL") && has(err, POOL_NAME_RULE), "a bad RUNG_POOL: the error names the variable");
	setenv("RUNG_POOL", "a100-80g", 1);
	TAP_INT_EQ(load(&c, &err, NULL), OPTIONS_OK, "RUNG_POOL loads");
	TAP_STR_EQ(c.opts.pool, "a100-80g", "RUNG_POOL sets the pool");
	unsetenv("RUNG_POOL");
	write_file("pool = spot.h100\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), OPTIONS_OK, "pool in the file loads");
	TAP_STR_EQ(c.opts.pool, "spot.h100", "the file's pool");
	write_file("pool = spot h100\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), OPTIONS_ERROR,
		   "a pool with a space in the file refused");
	TAP_OK(has(err, ":1") && has(err, POOL_NAME_RULE), "the file's bad pool: the error names FILE:LINE");
	/* --borrow (migration 028): the flag, its variable and a file line, each checked by pool_borrow_parse
	 * against the worker's own pool; a bad list names where it came from */
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--pool", "a-h200", "--borrow", "b, default", NULL }), OPTIONS_OK,
		   "--borrow b,default loads");
	TAP_STR_EQ(c.opts.borrow, "b,default", "--borrow: the pools in its order, spaces dropped");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--borrow", "", NULL }), OPTIONS_OK, "an empty --borrow loads");
	TAP_OK(c.opts.borrow == NULL, "an empty --borrow borrows from none");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--borrow", "b,B", NULL }), OPTIONS_ERROR, "--borrow b,B refused");
	TAP_OK(has(err, "--borrow") && has(err, POOL_NAME_RULE) && has(err, "\"b,B\""),
	       "a bad name in --borrow: the error names the flag, the rule and the value");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--pool", "a-h200", "--borrow", "default,a-h200", NULL }),
		   OPTIONS_ERROR, "--borrow naming the worker's own pool refused");
	TAP_OK(has(err, "--borrow") && has(err, "own pool (a-h200)"), "own pool in --borrow: the error names the flag and why");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--borrow", "b,c,b", NULL }), OPTIONS_ERROR,
		   "--borrow naming a pool twice refused");
	TAP_OK(has(err, "--borrow") && has(err, "pool b twice"), "a pool twice in --borrow: the error names the flag and the pool");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--borrow", "default", NULL }), OPTIONS_ERROR,
		   "--borrow default on a worker of the default pool refused");
	TAP_OK(has(err, "--borrow") && has(err, "own pool (default)"), "own default pool: the error names the flag");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--borrow", "p1,p2,p3,p4,p5,p6,p7,p8,p9", NULL }), OPTIONS_ERROR,
		   "--borrow naming 9 pools refused");
	TAP_OK(has(err, "--borrow") && has(err, "at most 8"), "9 pools: the error names the flag and the limit");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--borrow", "\xff\xfe,b", NULL }), OPTIONS_ERROR,
		   "--borrow with a name that is not UTF-8 refused, not dropped");
	TAP_OK(has(err, "--borrow") && has(err, POOL_NAME_RULE), "a name that is not UTF-8: the error names the flag and the rule");
	setenv("RUNG_BORROW", "x,y", 1);
	TAP_INT_EQ(load(&c, &err, NULL), OPTIONS_OK, "RUNG_BORROW loads");
	TAP_STR_EQ(c.opts.borrow, "x,y", "RUNG_BORROW sets the pools borrowed from");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--borrow", "z", NULL }), OPTIONS_OK, "--borrow beats RUNG_BORROW");
	TAP_STR_EQ(c.opts.borrow, "z", "--borrow beats RUNG_BORROW: its pools");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--pool", "x", NULL }), OPTIONS_ERROR,
		   "RUNG_BORROW naming the --pool refused");
	TAP_OK(has(err, "RUNG_BORROW") && has(err, "own pool (x)"), "a bad RUNG_BORROW: the error names the variable");
	unsetenv("RUNG_BORROW");
	write_file("pool = spot.h100\nborrow = default,spot.a100\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), OPTIONS_OK, "borrow in the file loads");
	TAP_STR_EQ(c.opts.borrow, "default,spot.a100", "the file's borrow");
	write_file("pool = spot.h100\nborrow = default,spot.h100\n");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--config", tmpl, NULL }), OPTIONS_ERROR,
		   "the file's borrow naming its pool refused");
	TAP_OK(has(err, ":2") && has(err, "own pool (spot.h100)"), "the file's bad borrow: the error names FILE:LINE");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--server", NULL }), OPTIONS_ERROR, "missing value refused");
	TAP_INT_EQ(load(&c, &err, (const char *const[]){ "--trainer-cmd", "", "--version", NULL }), OPTIONS_VERSION,
		   "--version, even with an empty trainer-cmd");

	{
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		worker_config_usage(f);
		fclose(f);
		TAP_OK(has(buf, "--server URL") && has(buf, "(RUNG_URL; default http://127.0.0.1:8080)") &&
		       has(buf, "(RUNG_WORKER_NAME; default the hostname)") && has(buf, "(RUNG_GPUS; default all)") &&
		       has(buf, "(RUNG_LEASE_WAIT_MS; default 25000)") && has(buf, "RUNG_TOKEN") &&
		       has(buf, "RUNG_HEALTH_CMD") && has(buf, "--config FILE"), "usage lists flags, env and defaults");
		TAP_OK(has(buf, "--pool NAME") && has(buf, "(RUNG_POOL; default default)"), "usage lists --pool");
		TAP_OK(has(buf, "--borrow POOLS") && has(buf, "(RUNG_BORROW; default none)"), "usage lists --borrow");
		free(buf);
	}
	worker_config_release(&c);
	free(err);
	unlink(tmpl);
	return TAP_DONE();
}
