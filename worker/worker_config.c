/* rung-worker's options as one table (worker_config.h) for the shared loader, and their
 * conversion into struct worker_opts. The variables of the first options keep their historic
 * names (RUNG_URL, RUNG_WORKER_NAME); the others are derived from the flag. */
#include "worker_config.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"
#include "util.h"
#include "version.h"

/* Indexes into opts[]; the order is the --help order. */
enum wc_opt {
	W_SERVER, W_TOKEN, W_NAME, W_POOL, W_BORROW, W_NVIDIA_SMI, W_TRAINER_CMD, W_TRAINER_DIR, W_WORK_DIR, W_GPUS,
	W_GPU_MEMORY_MIB, W_LEASE_WAIT_MS,
	W_CANCEL_GRACE_MS, W_DRAIN_TIMEOUT_MS, W_HEALTH_CMD, W_HEALTH_INTERVAL_MS, W_HEALTH_TIMEOUT_MS,
	W_HEALTH_MAX_USED_MIB, W_MEMORY_SAMPLE_MS, W_STALL_TIMEOUT_S, W_LOG_INTERVAL_MS, W_CONFIG, W_COUNT
};

#define DAY_MS 86400000L

/* A string option (with its variable, NULL: derived) and an integer option in [lo, hi]. */
#define S(n, name, arg, def, env, help) [n] = { name, OPTIONS_STR, arg, def, help, env, 0, 0, 0, NULL }
#define I(n, name, def, lo, hi, help) [n] = { name, OPTIONS_INT, "N", def, help, NULL, lo, hi, 0, NULL }

static const struct options_desc opts[W_COUNT] = {
	S(W_SERVER, "server", "URL", "http://127.0.0.1:8080", "RUNG_URL", "rungd base URL"),
	S(W_TOKEN, "token", "TOKEN", NULL, NULL,
	  "bearer token of role worker (the variable is unset after reading)"),
	[W_NAME] = { "name", OPTIONS_STR, "NAME", NULL, "worker name (re-registering with it keeps the id)",
		     "RUNG_WORKER_NAME", 0, 0, 0, "the hostname" },
	S(W_POOL, "pool", "NAME", POOL_DEFAULT, NULL,
	  "worker pool: it runs only jobs submitted to this pool (" POOL_NAME_RULE ")"),
	[W_BORROW] = { "borrow", OPTIONS_STR, "POOLS", NULL,
		       "other pools whose jobs it also takes, in this order, when its own pool has none for it "
		       "(comma-separated, at most 8; a borrowed job runs to its end)",
		       NULL, 0, 0, 0, "none" },
	S(W_NVIDIA_SMI, "nvidia-smi", "PATH", "nvidia-smi", NULL, "nvidia-smi to run"),
	S(W_TRAINER_CMD, "trainer-cmd", "TEMPLATE", "python run.py {config}", NULL,
	  "trainer command, split on spaces; {config} {attempt} {job} {gpu_index} {gpu_uuid}"),
	S(W_TRAINER_DIR, "trainer-dir", "DIR", ".", NULL, "trainer working directory"),
	S(W_WORK_DIR, "work-dir", "DIR", "var/worker", NULL, "attempt configs, logs and the spool"),
	[W_GPUS] = { "gpus", OPTIONS_STR, "0,2", NULL, "use only these GPU indexes", NULL, 0, 0, 0, "all" },
	I(W_GPU_MEMORY_MIB, "gpu-memory-mib", "0", 0, 1L << 30,
	  "the memory each GPU is taken to have when less than nvidia-smi's memory.total (a GPU shared with other work, "
	  "a trainer held under a cap): what rung records, learns and places by; the trainer gets it as "
	  "RUNG_GPU_MEMORY_MIB (0: memory.total)"),
	I(W_LEASE_WAIT_MS, "lease-wait-ms", "25000", 0, DAY_MS, "long-poll wait for a lease"),
	I(W_CANCEL_GRACE_MS, "cancel-grace-ms", "10000", 0, DAY_MS, "SIGINT to SIGKILL grace"),
	I(W_DRAIN_TIMEOUT_MS, "drain-timeout-ms", "30000", 0, DAY_MS,
	  "on SIGTERM, time running attempts get to end"),
	[W_HEALTH_CMD] = { "health-cmd", OPTIONS_STR, "TEMPLATE", NULL,
			   "GPU health check: {gpu_index} {gpu_uuid}; CUDA_VISIBLE_DEVICES set; exit 0 = pass",
			   NULL, 0, 0, 0,
			   "built-in: no compute process, memory.used under the limit" },
	I(W_HEALTH_INTERVAL_MS, "health-interval-ms", "60000", 0, DAY_MS, "between checks of a GPU that is not ok"),
	I(W_HEALTH_TIMEOUT_MS, "health-timeout-ms", "60000", 0, DAY_MS, "health command time limit"),
	I(W_HEALTH_MAX_USED_MIB, "health-max-used-mib", "1024", 0, 1L << 30, "built-in check's memory.used limit"),
	I(W_MEMORY_SAMPLE_MS, "memory-sample-ms", "1000", 50, DAY_MS,
	  "between memory.used readings of a running attempt (its peak, in the finish's facts)"),
	I(W_STALL_TIMEOUT_S, "stall-timeout-s", "1800", 0, 7 * 86400,
	  "a trainer silent this long is hung: killed and reported as stalled (0: never)"),
	I(W_LOG_INTERVAL_MS, "log-interval-ms", "10000", 0, DAY_MS,
	  "between sends of what a running trainer printed to rungd (rungctl logs, the job page; 0: never)"),
	/* Its own variable: rungd reads RUNG_CONFIG, and one environment file often serves both units. */
	[W_CONFIG] = { "config", OPTIONS_STR, "FILE", NULL, "read `key = value` lines (keys: the long flags)",
		       "RUNG_WORKER_CONFIG", 0, 0, OPTIONS_CONFIG, NULL },
};

#undef S
#undef I

enum options_result worker_config_load(struct worker_config *c, int argc, char **argv, char **err)
{
	struct worker_opts *w = &c->opts;
	enum options_result rc;

	*err = NULL;
	memset(c, 0, sizeof *c);
	options_init(&c->store, opts, W_COUNT);
	rc = options_load(&c->store, argc, argv, err);
	if (rc == OPTIONS_HELP)
		worker_config_usage(stdout);
	if (rc == OPTIONS_VERSION)
		printf("rung-worker %s\n", rung_version());
	if (rc != OPTIONS_OK)
		return rc;
	if (!options_str(&c->store, W_TRAINER_CMD)) {
		*err = xasprintf("%s: trainer-cmd must not be empty", options_source(&c->store, W_TRAINER_CMD) ?
				 options_source(&c->store, W_TRAINER_CMD) : "--trainer-cmd");
		return OPTIONS_ERROR;
	}
	if (!pool_name_ok(options_str(&c->store, W_POOL))) {
		const char *src = options_source(&c->store, W_POOL);
		*err = xasprintf("%s: pool must be %s (got \"%s\")", src ? src : "--pool", POOL_NAME_RULE,
				 options_str(&c->store, W_POOL) ? options_str(&c->store, W_POOL) : "");
		return OPTIONS_ERROR;
	}
	if (options_str(&c->store, W_BORROW)) { /* checked here, so that a bad list names where it came from */
		const char *src = options_source(&c->store, W_BORROW);
		char *msg = NULL, *joined;
		json_t *list = pool_borrow_parse(options_str(&c->store, W_BORROW), options_str(&c->store, W_POOL), &msg);
		if (!list) {
			*err = xasprintf("%s: %s (got \"%s\")", src ? src : "--borrow", msg, options_str(&c->store, W_BORROW));
			free(msg);
			return OPTIONS_ERROR;
		}
		joined = pool_list_join(list, ",", "");
		snprintf(c->borrow, sizeof c->borrow, "%s", joined);
		free(joined);
		json_decref(list);
	}
	snprintf(c->host, sizeof c->host, "worker");
	if (gethostname(c->host, sizeof c->host - 1) != 0)
		snprintf(c->host, sizeof c->host, "worker");
	w->server = options_str(&c->store, W_SERVER);
	w->name = options_str(&c->store, W_NAME) ? options_str(&c->store, W_NAME) : c->host;
	w->pool = options_str(&c->store, W_POOL);
	w->borrow = c->borrow[0] ? c->borrow : NULL;
	w->smi = options_str(&c->store, W_NVIDIA_SMI);
	w->trainer_cmd = options_str(&c->store, W_TRAINER_CMD);
	w->trainer_dir = options_str(&c->store, W_TRAINER_DIR);
	w->work_dir = options_str(&c->store, W_WORK_DIR);
	w->gpus = options_str(&c->store, W_GPUS);
	w->lease_wait_ms = options_int(&c->store, W_LEASE_WAIT_MS);
	w->cancel_grace_ms = options_int(&c->store, W_CANCEL_GRACE_MS);
	w->drain_timeout_ms = options_int(&c->store, W_DRAIN_TIMEOUT_MS);
	w->health_cmd = options_str(&c->store, W_HEALTH_CMD);
	w->health_interval_ms = options_int(&c->store, W_HEALTH_INTERVAL_MS);
	w->health_timeout_ms = options_int(&c->store, W_HEALTH_TIMEOUT_MS);
	w->health_max_used_mib = options_int(&c->store, W_HEALTH_MAX_USED_MIB);
	w->memory_sample_ms = options_int(&c->store, W_MEMORY_SAMPLE_MS);
	w->gpu_memory_mib = options_int(&c->store, W_GPU_MEMORY_MIB);
	w->stall_timeout_s = options_int(&c->store, W_STALL_TIMEOUT_S);
	w->log_interval_ms = options_int(&c->store, W_LOG_INTERVAL_MS);
	c->token = options_str(&c->store, W_TOKEN);
	c->config_file = options_str(&c->store, W_CONFIG);
	return OPTIONS_OK;
}

void worker_config_release(struct worker_config *c)
{
	options_release(&c->store);
	memset(c, 0, sizeof *c);
}

void worker_config_usage(FILE *f)
{
	fputs("usage: rung-worker [options]\n", f);
	options_usage(f, opts, W_COUNT);
}
