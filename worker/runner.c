/* The trainer child process (see runner.h): fork/exec with a close-on-exec error pipe, its own
 * process group, one non-blocking output pipe polled into the scanner and a capped log file,
 * reaping with waitpid(WNOHANG). Only async-signal-safe calls run between fork and exec. */
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define RUNNER_CHUNK 65536
#define RUNNER_POLL_SLICE_MS 50
#define RUNNER_FINAL_DRAIN_MS 1000 /* what is left in the pipe after the trainer exited */

extern char **environ;

struct runner {
	enum runner_state state;
	pid_t pid;          /* main child, also the process group id; -1 when never started */
	int out_fd;         /* read end of the output pipe, -1 once closed */
	int log_fd;         /* trainer log, -1 when none */
	size_t log_len, log_cap;
	bool log_cut;       /* the truncation marker was written */
	struct scan *scan;  /* borrowed */
	int exit_code;      /* -1 when signalled */
	int sig;
	char *error;        /* exec/setup failure, heap */
	int64_t output_at;  /* monotonic ms of the last output read, or of the start */
};

/* The executable for NAME: NAME itself when it holds a '/', else the first PATH match (heap);
 * NULL when PATH has none. */
static char *runner_resolve(const char *name)
{
	const char *path = getenv("PATH");
	char *copy, *save = NULL, *dir, *found = NULL;

	if (strchr(name, '/'))
		return xstrdup(name);
	copy = xstrdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		char *cand = xasprintf("%s/%s", *dir ? dir : ".", name);
		struct stat st;
		if (!stat(cand, &st) && S_ISREG(st.st_mode) && !access(cand, X_OK)) {
			found = cand;
			break;
		}
		free(cand);
	}
	free(copy);
	return found;
}

/* True when the "KEY=VALUE" entry E sets a KEY that one of EXTRA ("KEY=VALUE", NULL-terminated
 * or NULL) sets too. */
static bool env_replaced(const char *e, const char *const *extra)
{
	size_t klen = strcspn(e, "=");

	for (size_t i = 0; extra && extra[i]; i++)
		if (strcspn(extra[i], "=") == klen && !strncmp(extra[i], e, klen))
			return true;
	return false;
}

/* A copy of the environment with CUDA_VISIBLE_DEVICES replaced when CUDA is not NULL and each of
 * EXTRA's entries replacing its key. */
static char **runner_env(const char *cuda, const char *const *extra)
{
	size_t n = 0, m = 0, k = 0;
	char **env;
	while (environ[n])
		n++;
	while (extra && extra[m])
		m++;
	env = xcalloc(n + m + 2, sizeof *env);
	for (size_t i = 0; i < n; i++)
		if ((!cuda || strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21)) && !env_replaced(environ[i], extra))
			env[k++] = xstrdup(environ[i]);
	if (cuda)
		env[k++] = xasprintf("CUDA_VISIBLE_DEVICES=%s", cuda);
	for (size_t i = 0; i < m; i++)
		env[k++] = xstrdup(extra[i]);
	env[k] = NULL;
	return env;
}

static void free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/* In the child: report errno through the error pipe and leave with 127. */
static void child_fail(int errfd)
{
	int e = errno;
	ssize_t w = write(errfd, &e, sizeof e);
	(void)w;
	_exit(127);
}

static void child_exec(const struct runner_spec *spec, const char *exe, char **env, int outfd,
		       int nullfd, int errfd)
{
	struct sigaction dfl;
	sigset_t none;

	setpgid(0, 0);
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigaction(SIGPIPE, &dfl, NULL);
	sigaction(SIGINT, &dfl, NULL);
	sigaction(SIGTERM, &dfl, NULL);
	sigaction(SIGCHLD, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(nullfd, 0) < 0 || dup2(outfd, 1) < 0 || dup2(outfd, 2) < 0)
		child_fail(errfd);
	if (spec->cwd && chdir(spec->cwd) < 0)
		child_fail(errfd);
	execve(exe, spec->argv, env);
	child_fail(errfd);
}

struct runner *runner_start(const struct runner_spec *spec, struct scan *scan)
{
	struct runner *r = xcalloc(1, sizeof *r);

	r->output_at = util_mono_ms();
	int outp[2] = { -1, -1 }, errp[2] = { -1, -1 }, nullfd = -1, child_errno = 0;
	char *exe = NULL, **env = NULL;
	ssize_t n;

	r->state = RUNNER_EXITED;
	r->pid = -1;
	r->out_fd = r->log_fd = -1;
	r->scan = scan;
	r->exit_code = 127;
	r->log_cap = spec->log_cap;
	if (spec->log_path) {
		r->log_fd = open(spec->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (r->log_fd < 0)
			log_warn("cannot open trainer log", "path=%s error=\"%s\"", spec->log_path, strerror(errno));
	}
	exe = runner_resolve(spec->argv[0]);
	if (!exe) {
		r->error = xasprintf("cannot run '%s': not found in PATH", spec->argv[0]);
		goto out;
	}
	env = runner_env(spec->cuda_visible, spec->env);
	if (pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    (nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
		r->error = xasprintf("cannot start '%s': %s", spec->argv[0], strerror(errno));
		goto out;
	}
	r->pid = fork();
	if (r->pid < 0) {
		r->error = xasprintf("cannot start '%s': fork: %s", spec->argv[0], strerror(errno));
		goto out;
	}
	if (r->pid == 0)
		child_exec(spec, exe, env, outp[1], nullfd, errp[1]);
	setpgid(r->pid, r->pid); /* both sides, so kill(-pid) works at once */
	close(errp[1]);
	errp[1] = -1;
	do
		n = read(errp[0], &child_errno, sizeof child_errno);
	while (n < 0 && errno == EINTR);
	if (n == sizeof child_errno) {
		int st;
		while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR)
			;
		r->pid = -1;
		r->error = xasprintf("cannot run '%s'%s%s: %s", spec->argv[0], spec->cwd ? " in " : "",
				     spec->cwd ? spec->cwd : "", strerror(child_errno));
		goto out;
	}
	r->out_fd = outp[0];
	outp[0] = -1;
	fcntl(r->out_fd, F_SETFL, fcntl(r->out_fd, F_GETFL) | O_NONBLOCK);
	r->state = RUNNER_RUNNING;
	r->exit_code = 0;
out:
	if (r->error)
		log_warn("trainer did not start", "error=\"%s\"", r->error);
	for (int i = 0; i < 2; i++) {
		if (outp[i] >= 0)
			close(outp[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	if (nullfd >= 0)
		close(nullfd);
	free_env(env);
	free(exe);
	return r;
}

static void runner_log(struct runner *r, const char *buf, size_t n)
{
	static const char marker[] = "\n[rung-worker: trainer log truncated here]\n";
	size_t room = r->log_cap > r->log_len ? r->log_cap - r->log_len : 0;
	if (r->log_fd < 0 || r->log_cut)
		return;
	if (n > room) {
		n = room;
		r->log_cut = true;
	}
	if (n && write(r->log_fd, buf, n) < 0)
		log_warn("trainer log write failed", "error=\"%s\"", strerror(errno));
	r->log_len += n;
	if (r->log_cut && write(r->log_fd, marker, sizeof marker - 1) < 0)
		log_warn("trainer log write failed", "error=\"%s\"", strerror(errno));
}

/* Reads what is available now, but never past `until` (monotonic ms): a trainer that floods its
 * pipe faster than the scanner reads must not starve the heartbeats. Closes the pipe at EOF. */
static void runner_drain(struct runner *r, int64_t until)
{
	char buf[RUNNER_CHUNK];
	while (r->out_fd >= 0 && util_mono_ms() < until) {
		ssize_t n = read(r->out_fd, buf, sizeof buf);
		if (n > 0) {
			r->output_at = util_mono_ms();
			scan_feed(r->scan, buf, (size_t)n);
			runner_log(r, buf, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		close(r->out_fd);
		r->out_fd = -1;
	}
}

enum runner_state runner_poll(struct runner *r, int timeout_ms)
{
	int64_t deadline = util_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int status;

	while (r->state == RUNNER_RUNNING) {
		int64_t left = deadline - util_mono_ms();
		int slice = left < RUNNER_POLL_SLICE_MS ? (int)(left > 0 ? left : 0) : RUNNER_POLL_SLICE_MS;
		pid_t w;

		if (r->out_fd >= 0) {
			struct pollfd p = { .fd = r->out_fd, .events = POLLIN };
			if (poll(&p, 1, slice) > 0)
				runner_drain(r, deadline > util_mono_ms() ? deadline : util_mono_ms() + RUNNER_POLL_SLICE_MS);
		} else if (slice > 0) {
			poll(NULL, 0, slice);
		}
		w = waitpid(r->pid, &status, WNOHANG);
		if (w == r->pid) {
			/* The group goes first: a grandchild still writing must not keep the last read going. */
			kill(-r->pid, SIGKILL);
			runner_drain(r, util_mono_ms() + RUNNER_FINAL_DRAIN_MS);
			if (r->out_fd >= 0)
				close(r->out_fd);
			r->out_fd = -1;
			if (WIFSIGNALED(status)) {
				r->exit_code = -1;
				r->sig = WTERMSIG(status);
			} else {
				r->exit_code = WEXITSTATUS(status);
			}
			r->state = RUNNER_EXITED;
			break;
		}
		if (util_mono_ms() >= deadline)
			break;
	}
	return r->state;
}

void runner_kill(struct runner *r, int sig)
{
	if (r->state == RUNNER_RUNNING && r->pid > 0)
		kill(-r->pid, sig);
}

pid_t runner_pid(const struct runner *r) { return r->pid; }
int runner_exit_code(const struct runner *r) { return r->exit_code; }
int runner_signal(const struct runner *r) { return r->sig; }
const char *runner_error(const struct runner *r) { return r->error; }

void runner_free(struct runner *r)
{
	if (!r)
		return;
	if (r->state == RUNNER_RUNNING) {
		int st;
		kill(-r->pid, SIGKILL);
		while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	if (r->out_fd >= 0)
		close(r->out_fd);
	if (r->log_fd >= 0)
		close(r->log_fd);
	free(r->error);
	free(r);
}

int64_t runner_silent_ms(const struct runner *r)
{
	return util_mono_ms() - r->output_at;
}
