/* rung-worker's entry point: configuration (worker_config.c), logging, libcurl set-up, and
 * signals (a dedicated thread sigwaits for SIGTERM/SIGINT and asks the worker to drain; a second
 * signal stops attempts at once). Everything else is worker.c. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "log.h"
#include "util.h"
#include "version.h"
#include "worker.h"
#include "worker_config.h"

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
	struct worker_config cfg;
	struct worker *w = NULL;
	char *err = NULL;
	pthread_t sigthr;
	sigset_t set;
	int rc = 1;

	switch (worker_config_load(&cfg, argc, argv, &err)) {
	case OPTIONS_OK:
		break;
	case OPTIONS_HELP:
	case OPTIONS_VERSION:
		worker_config_release(&cfg);
		return 0;
	case OPTIONS_ERROR:
		fprintf(stderr, "rung-worker: %s\n", err);
		free(err);
		worker_config_release(&cfg);
		return 2;
	default:
		abort();
	}
	unsetenv("RUNG_TOKEN"); /* trainer children must not inherit the worker's credential */
	log_init("rung-worker", LOG_INFO);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread: only signal_thread takes them */
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		fprintf(stderr, "rung-worker: libcurl initialisation failed\n");
		goto out;
	}
	client_set_token(cfg.token);
	w = worker_new(&cfg.opts, &err);
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
	log_info("started", "version=%s server=%s name=%s pool=%s borrow=%s work_dir=%s config=%s", rung_version(),
		 cfg.opts.server, cfg.opts.name, cfg.opts.pool, cfg.opts.borrow ? cfg.opts.borrow : "none",
		 cfg.opts.work_dir, cfg.config_file ? cfg.config_file : "none");
	rc = worker_run(w) < 0 ? 1 : 0;
	log_info("stopped", "exit=%d", rc);
	/* The signal thread still holds w: leave it to process exit rather than free under it. */
	curl_global_cleanup();
	fflush(stderr);
	_exit(rc);
out:
	free(err);
	worker_free(w);
	worker_config_release(&cfg);
	curl_global_cleanup();
	return rc;
}
