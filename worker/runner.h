/* The trainer child process of one attempt, spawned the git run-command way: argv and env built
 * before fork, exec failure reported through a close-on-exec pipe, its own process group, output
 * (stdout and stderr through one non-blocking pipe, so their order is kept) read with poll() into
 * the scanner and a capped log file. Owns the child and its group; not the attempt's HTTP side. */
#ifndef RUNG_WORKER_RUNNER_H
#define RUNG_WORKER_RUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "scan.h"

struct runner_spec {
	char *const *argv;        /* argv[0] is looked up in PATH when it holds no '/' */
	const char *cwd;          /* directory of the child; NULL: inherit */
	const char *cuda_visible; /* CUDA_VISIBLE_DEVICES for the child; NULL: environment as is */
	const char *const *env;   /* "KEY=VALUE" entries for the child, each replacing its KEY; NULL-terminated or NULL */
	const char *log_path;     /* trainer log, created/truncated; NULL: none */
	size_t log_cap;           /* bytes of output kept in the log; a marker line follows the cut */
};

enum runner_state {
	RUNNER_RUNNING, /* the main child has not exited */
	RUNNER_EXITED   /* reaped (or never started: exec failure); the group has been killed */
};

struct runner;

/* Starts the child; output goes to SCAN (borrowed, must outlive the runner). Never NULL: when
 * the command cannot be run the runner is born RUNNER_EXITED with exit code 127 and
 * runner_error() saying why. Free with runner_free. */
struct runner *runner_start(const struct runner_spec *spec, struct scan *scan);

/* Waits up to TIMEOUT_MS for output or the child's exit, feeding what arrives. When the main
 * child has exited, reads what is already buffered, SIGKILLs the process group (stragglers,
 * grandchildren), ignores further output and returns RUNNER_EXITED (also on every later call). */
enum runner_state runner_poll(struct runner *r, int timeout_ms);

/* Sends SIG to the child's process group; no-op once exited. */
void runner_kill(struct runner *r, int sig);

pid_t runner_pid(const struct runner *r);
/* Milliseconds since the child last wrote anything (or since it started): a trainer that prints
 * nothing for long is hung (the worker's --stall-timeout-s). */
int64_t runner_silent_ms(const struct runner *r);
/* After RUNNER_EXITED: the exit status (-1 when killed by a signal), the signal (0 when it
 * exited), and the exec/setup error message (NULL when it ran). Borrowed. */
int runner_exit_code(const struct runner *r);
int runner_signal(const struct runner *r);
const char *runner_error(const struct runner *r);

/* SIGKILLs the group if still running, reaps, closes everything. NULL is a no-op. */
void runner_free(struct runner *r);

#endif
