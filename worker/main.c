/* rung-worker's entry point: flags and environment, logging, libcurl set-up, and signals (a
 * dedicated thread sigwaits for SIGTERM/SIGINT and asks the worker to drain; a second signal
 * stops attempts at once). Everything else is worker.c. */
#include <curl/curl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "log.h"
#include "util.h"
#include "worker.h"

static void usage(FILE *f)
{
	fputs("usage: rung-worker [options]\n"
	      "  --server URL           rungd base URL (RUNG_URL, default http://127.0.0.1:8080)\n"
	      "  --token TOKEN          bearer token of role worker (RUNG_TOKEN; removed from the\n"
	      "                         environment so trainers do not inherit it)\n"
	      "  --name NAME            worker name (RUNG_WORKER_NAME, default the hostname)\n"
	      "  --nvidia-smi PATH      nvidia-smi to run (RUNG_NVIDIA_SMI, default nvidia-smi)\n"
	      "  --trainer-cmd TEMPLATE trainer command (RUNG_TRAINER_CMD, default \"python run.py {config}\");\n"
	      "                         split on spaces; {config} {attempt} {job} {gpu_index} {gpu_uuid}\n"
	      "  --trainer-dir DIR      trainer working directory (RUNG_TRAINER_DIR, default .)\n"
	      "  --work-dir DIR         attempt configs, logs and the spool (RUNG_WORK_DIR, default var/worker)\n"
	      "  --gpus 0,2             use only these GPU indexes (default all)\n"
	      "  --lease-wait-ms N      long-poll wait (default 25000)\n"
	      "  --cancel-grace-ms N    SIGINT to SIGKILL grace (default 10000)\n"
	      "  --drain-timeout-ms N   on SIGTERM, time running attempts get to end (default 30000)\n"
	      "  --health-cmd TEMPLATE  GPU health check (RUNG_HEALTH_CMD): split on spaces, {gpu_index}\n"
	      "                         {gpu_uuid}; run with CUDA_VISIBLE_DEVICES set, exit 0 = pass.\n"
	      "                         Default: built-in, nvidia-smi shows no compute process and\n"
	      "                         memory.used below --health-max-used-mib\n"
	      "  --health-interval-ms N between checks of a GPU that is not ok (default 60000)\n"
	      "  --health-timeout-ms N  health command time limit (default 60000)\n"
	      "  --health-max-used-mib N  built-in check's memory.used limit (default 1024)\n"
	      "  --help\n", f);
}

static const char *env_or(const char *name, const char *dflt)
{
	const char *v = getenv(name);
	return v && *v ? v : dflt;
}

static int parse_ms(const char *flag, const char *s, long *out)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (end == s || *end || v < 0) {
		fprintf(stderr, "rung-worker: %s wants a number of milliseconds, got '%s'\n", flag, s);
		return -1;
	}
	*out = v;
	return 0;
}

static void *signal_thread(void *arg)
{
	struct worker *w = arg;
	sigset_t set;
	int sig, count = 0;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	for (;;) {
		if (sigwait(&set, &sig))
			continue;
		count++;
		log_info(count == 1 ? "signal received, draining" : "second signal, stopping attempts now",
			 "signal=%d", sig);
		worker_stop(w, count > 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 's' }, { "name", required_argument, NULL, 'n' },
		{ "nvidia-smi", required_argument, NULL, 'm' }, { "trainer-cmd", required_argument, NULL, 't' },
		{ "trainer-dir", required_argument, NULL, 'd' }, { "work-dir", required_argument, NULL, 'w' },
		{ "gpus", required_argument, NULL, 'g' }, { "lease-wait-ms", required_argument, NULL, 'L' },
		{ "cancel-grace-ms", required_argument, NULL, 'C' }, { "drain-timeout-ms", required_argument, NULL, 'D' },
		{ "token", required_argument, NULL, 'T' },
		{ "health-cmd", required_argument, NULL, 'H' }, { "health-interval-ms", required_argument, NULL, 'I' },
		{ "health-timeout-ms", required_argument, NULL, 'O' },
		{ "health-max-used-mib", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	char host[256] = "worker";
	struct worker_opts o = { 0 };
	struct worker *w = NULL;
	char *err = NULL;
	pthread_t sigthr;
	sigset_t set;
	int opt, rc = 1;
	char *token = NULL;

	gethostname(host, sizeof host - 1);
	o.server = env_or("RUNG_URL", "http://127.0.0.1:8080");
	o.name = env_or("RUNG_WORKER_NAME", host);
	o.smi = env_or("RUNG_NVIDIA_SMI", "nvidia-smi");
	o.trainer_cmd = env_or("RUNG_TRAINER_CMD", "python run.py {config}");
	o.trainer_dir = env_or("RUNG_TRAINER_DIR", ".");
	o.work_dir = env_or("RUNG_WORK_DIR", "var/worker");
	o.lease_wait_ms = 25000;
	o.cancel_grace_ms = 10000;
	o.drain_timeout_ms = 30000;
	o.health_cmd = env_or("RUNG_HEALTH_CMD", NULL);
	o.health_interval_ms = 60000;
	o.health_timeout_ms = 60000;
	o.health_max_used_mib = 1024;
	token = getenv("RUNG_TOKEN") ? xstrdup(getenv("RUNG_TOKEN")) : NULL;
	unsetenv("RUNG_TOKEN"); /* trainer children must not inherit the worker's credential */
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 's': o.server = optarg; break;
		case 'n': o.name = optarg; break;
		case 'm': o.smi = optarg; break;
		case 't': o.trainer_cmd = optarg; break;
		case 'd': o.trainer_dir = optarg; break;
		case 'w': o.work_dir = optarg; break;
		case 'g': o.gpus = optarg; break;
		case 'L': if (parse_ms("--lease-wait-ms", optarg, &o.lease_wait_ms)) return 2; break;
		case 'C': if (parse_ms("--cancel-grace-ms", optarg, &o.cancel_grace_ms)) return 2; break;
		case 'D': if (parse_ms("--drain-timeout-ms", optarg, &o.drain_timeout_ms)) return 2; break;
		case 'T': free(token); token = xstrdup(optarg); break;
		case 'H': o.health_cmd = optarg; break;
		case 'I': if (parse_ms("--health-interval-ms", optarg, &o.health_interval_ms)) return 2; break;
		case 'O': if (parse_ms("--health-timeout-ms", optarg, &o.health_timeout_ms)) return 2; break;
		case 'M': if (parse_ms("--health-max-used-mib", optarg, &o.health_max_used_mib)) return 2; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc || !*o.trainer_cmd) {
		usage(stderr);
		return 2;
	}
	log_init("rung-worker", LOG_INFO);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread: only signal_thread takes them */
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		fprintf(stderr, "rung-worker: libcurl initialisation failed\n");
		return 1;
	}
	client_set_token(token);
	w = worker_new(&o, &err);
	if (!w) {
		fprintf(stderr, "rung-worker: %s\n", err);
		log_error("cannot start", "error=\"%s\"", err);
		goto out;
	}
	if (pthread_create(&sigthr, NULL, signal_thread, w)) {
		fprintf(stderr, "rung-worker: cannot start the signal thread\n");
		goto out;
	}
	pthread_detach(sigthr);
	log_info("started", "server=%s name=%s work_dir=%s", o.server, o.name, o.work_dir);
	rc = worker_run(w) < 0 ? 1 : 0;
	log_info("stopped", "exit=%d", rc);
	/* The signal thread still holds w: leave it to process exit rather than free under it. */
	curl_global_cleanup();
	fflush(stderr);
	_exit(rc);
out:
	free(err);
	free(token);
	worker_free(w);
	curl_global_cleanup();
	return rc;
}
