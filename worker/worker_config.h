/* rung-worker's configuration: one table of options for the shared loader (common/options.h),
 * each a long flag, an environment variable and a `key = value` line of an optional file
 * (--config FILE / RUNG_CONFIG); precedence flag > env > file > default. It parses and
 * validates; main.c acts on the result. */
#ifndef RUNG_WORKER_CONFIG_H
#define RUNG_WORKER_CONFIG_H

#include <stdio.h>

#include "options.h"
#include "pool.h"
#include "worker.h"

struct worker_config {
	struct worker_opts opts;  /* its strings are borrowed from store (or host, borrow) */
	const char *token;        /* --token / RUNG_TOKEN, or NULL; borrowed from store */
	const char *config_file;  /* the file read, or NULL; borrowed from store */
	struct options store;     /* owns every string above */
	char host[256];           /* the default worker name */
	char borrow[POOL_BORROW_MAX * (POOL_NAME_MAX + 1)]; /* --borrow checked and normalised: "a,b" */
};

/* Fills *c from defaults, the config file, the environment (getenv) and argv, in rising
 * precedence. argv is not modified. It does not touch the environment: the caller removes
 * RUNG_TOKEN. Returns OPTIONS_OK; OPTIONS_HELP after printing the usage to stdout;
 * OPTIONS_VERSION after printing "rung-worker VERSION" to stdout; or
 * OPTIONS_ERROR with *err (heap, caller frees) naming the flag, variable or FILE:LINE. Call
 * worker_config_release in every case. */
enum options_result worker_config_load(struct worker_config *c, int argc, char **argv, char **err);
/* Frees what *c owns and zeroes it; accepts a zeroed struct. */
void worker_config_release(struct worker_config *c);
/* Prints every option with its environment variable and default. */
void worker_config_usage(FILE *f);

#endif
