/* nvidia-smi as rung-worker's view of its GPUs (see gpu.h): spawn with a capped, timed capture
 * of stdout, then a forgiving CSV parser (spaces after commas, [N/A], commas in names, blank
 * lines). No state is kept between calls. */
#include "gpu.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define GPU_OUT_CAP (1024 * 1024)
#define GPU_TIMEOUT_MS 10000
#define GPU_MAX_FIELDS 16

extern char **environ;

/* Runs SMI ARG1 ARG2 and returns its stdout (heap) when it exits 0; else NULL with *err. */
static char *gpu_run(const char *smi, const char *arg1, const char *arg2, char **err)
{
	char *argv[] = { (char *)smi, (char *)arg1, (char *)arg2, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	int fds[2] = { -1, -1 }, status = 0, rc;
	pid_t pid = -1;
	char *buf = xmalloc(GPU_OUT_CAP + 1), *result = NULL;
	size_t len = 0;
	int64_t deadline = util_mono_ms() + GPU_TIMEOUT_MS;
	bool timed_out = false;

	if (pipe2(fds, O_CLOEXEC) < 0) {
		*err = xasprintf("pipe: %s", strerror(errno));
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGTERM);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawnp(&pid, smi, &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(fds[1]);
	fds[1] = -1;
	if (rc) {
		pid = -1;
		*err = xasprintf("cannot run %s: %s", smi, strerror(rc));
		goto out;
	}
	for (;;) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };
		int64_t left = deadline - util_mono_ms();
		ssize_t r;
		if (left <= 0) {
			timed_out = true;
			break;
		}
		if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
			break;
		if (!p.revents)
			continue;
		r = read(fds[0], buf + len, len < GPU_OUT_CAP ? GPU_OUT_CAP - len : 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (len < GPU_OUT_CAP)
			len += (size_t)r;
	}
	buf[len] = '\0';
	if (timed_out)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (timed_out) {
		*err = xasprintf("%s timed out after %d ms", smi, GPU_TIMEOUT_MS);
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		*err = xasprintf("%s %s failed (%s %d)", smi, arg1, WIFEXITED(status) ? "exit" : "signal",
				 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	} else {
		result = buf;
		buf = NULL;
	}
out:
	if (fds[0] >= 0)
		close(fds[0]);
	free(buf);
	return result;
}

/* Splits LINE (modified in place) on commas into trimmed fields; returns the count. */
static size_t split_csv(char *line, char **f, size_t max)
{
	size_t n = 0;
	char *p = line;
	for (;;) {
		char *c = strchr(p, ','), *e;
		if (c)
			*c = '\0';
		while (isspace((unsigned char)*p))
			p++;
		e = p + strlen(p);
		while (e > p && isspace((unsigned char)e[-1]))
			*--e = '\0';
		if (n < max)
			f[n++] = p;
		if (!c)
			return n;
		p = c + 1;
	}
}

/* A number in MiB, or -1 for [N/A] and friends; false when it is neither. */
static bool parse_num(const char *s, long long *v)
{
	char *end;
	if (s[0] == '[' || !strcasecmp(s, "N/A")) {
		*v = -1;
		return true;
	}
	errno = 0;
	*v = strtoll(s, &end, 10);
	if (end == s || errno)
		return false;
	if (*end == '.')
		while (isdigit((unsigned char)*++end))
			;
	while (*end == ' ')
		end++;
	if (!strcmp(end, "MiB"))
		end += 3;
	return *end == '\0';
}

static void copy_field(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src);
}

/* Calls LINE_FN on each non-blank line of TEXT (a private copy); stops at the first failure. */
typedef int (*gpu_line_fn)(char **f, size_t n, void *arr, size_t i, char **err);

static int parse_lines(const char *text, size_t elem, void **out, size_t *nout, gpu_line_fn fn, char **err)
{
	char *copy = xstrdup(text), *save = NULL, *line;
	char *f[GPU_MAX_FIELDS];
	size_t n = 0, cap = 4;
	void *arr = xcalloc(cap, elem);
	int rc = -1;

	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *t = line;
		while (isspace((unsigned char)*t))
			t++;
		if (!*t || strstr(t, "No running") == t)
			continue;
		if (n == cap) {
			arr = xrealloc(arr, 2 * cap * elem);
			memset((char *)arr + cap * elem, 0, cap * elem);
			cap *= 2;
		}
		if (fn(f, split_csv(line, f, GPU_MAX_FIELDS), arr, n, err) < 0)
			goto out;
		n++;
	}
	*out = arr;
	*nout = n;
	arr = NULL;
	rc = 0;
out:
	free(arr);
	free(copy);
	return rc;
}

static int gpu_line(char **f, size_t n, void *arr, size_t i, char **err)
{
	struct gpu_info *g = (struct gpu_info *)arr + i;
	long long idx;
	char name[128] = "";

	if (n < 6 || !parse_num(f[0], &idx) || idx < 0 || !parse_num(f[n - 3], &g->total_mib) ||
	    !parse_num(f[n - 2], &g->used_mib) || !parse_num(f[n - 1], &g->free_mib) || !f[1][0]) {
		*err = xasprintf("unexpected nvidia-smi GPU line (%zu fields): want index,uuid,name,total,used,free", n);
		return -1;
	}
	g->index = (int)idx;
	copy_field(g->uuid, sizeof g->uuid, f[1]);
	for (size_t k = 2; k < n - 3; k++) {
		size_t l = strlen(name);
		snprintf(name + l, sizeof name - l, "%s%s", k > 2 ? ", " : "", f[k]);
	}
	copy_field(g->name, sizeof g->name, name);
	return 0;
}

static int proc_line(char **f, size_t n, void *arr, size_t i, char **err)
{
	struct gpu_proc *p = (struct gpu_proc *)arr + i;
	if (n != 3 || !f[0][0] || !parse_num(f[1], &p->pid) || !parse_num(f[2], &p->used_mib)) {
		*err = xasprintf("unexpected nvidia-smi process line (%zu fields): want gpu_uuid,pid,used_memory", n);
		return -1;
	}
	copy_field(p->uuid, sizeof p->uuid, f[0]);
	return 0;
}

int gpu_parse_list(const char *text, struct gpu_info **out, size_t *n, char **err)
{
	return parse_lines(text, sizeof **out, (void **)out, n, gpu_line, err);
}

int gpu_parse_procs(const char *text, struct gpu_proc **out, size_t *n, char **err)
{
	return parse_lines(text, sizeof **out, (void **)out, n, proc_line, err);
}

int gpu_list(const char *smi, struct gpu_info **out, size_t *n, char **err)
{
	char *text = gpu_run(smi, "--query-gpu=index,uuid,name,memory.total,memory.used,memory.free",
			     "--format=csv,noheader,nounits", err);
	int rc = -1;
	if (text)
		rc = gpu_parse_list(text, out, n, err);
	free(text);
	return rc;
}

int gpu_procs(const char *smi, struct gpu_proc **out, size_t *n, char **err)
{
	char *text = gpu_run(smi, "--query-compute-apps=gpu_uuid,pid,used_memory",
			     "--format=csv,noheader,nounits", err);
	int rc = -1;
	if (text)
		rc = gpu_parse_procs(text, out, n, err);
	free(text);
	return rc;
}

static json_t *mib_json(long long v)
{
	return v < 0 ? json_null() : json_integer(v);
}

json_t *gpu_state(const char *smi, const char *uuid)
{
	struct gpu_info *gpus = NULL;
	struct gpu_proc *procs = NULL;
	size_t ng = 0, np = 0;
	char *err = NULL;
	json_t *state = NULL, *arr;

	if (gpu_list(smi, &gpus, &ng, &err) < 0 || gpu_procs(smi, &procs, &np, &err) < 0) {
		log_warn("nvidia-smi reading failed", "gpu=%s error=\"%s\"", uuid, err);
		goto out;
	}
	for (size_t i = 0; i < ng; i++) {
		if (strcmp(gpus[i].uuid, uuid))
			continue;
		arr = json_array();
		for (size_t k = 0; k < np; k++)
			if (!strcmp(procs[k].uuid, uuid))
				json_array_append_new(arr, json_pack("{s:I, s:o}", "pid", (json_int_t)procs[k].pid,
								     "used_mib", mib_json(procs[k].used_mib)));
		state = json_pack("{s:s, s:o, s:o, s:o}", "uuid", uuid, "memory_total_mib",
				  mib_json(gpus[i].total_mib), "memory_used_mib", mib_json(gpus[i].used_mib),
				  "processes", arr);
		goto out;
	}
	log_warn("GPU missing from nvidia-smi", "gpu=%s", uuid);
out:
	free(err);
	free(gpus);
	free(procs);
	return state;
}

long long gpu_used_mib(const char *smi, const char *uuid)
{
	struct gpu_info *gpus = NULL;
	size_t ng = 0;
	char *err = NULL;
	long long used = -1;

	if (gpu_list(smi, &gpus, &ng, &err) == 0)
		for (size_t i = 0; i < ng; i++)
			if (!strcmp(gpus[i].uuid, uuid))
				used = gpus[i].used_mib;
	free(err);
	free(gpus);
	return used;
}

void gpu_peak_init(struct gpu_peak *p)
{
	p->mib = -1;
	p->phase[0] = '\0';
	p->step = -1;
}

void gpu_peak_note(struct gpu_peak *p, long long used_mib, const char *phase, long long step)
{
	/* An equal reading relabels the peak: the phase comes from the trainer's log, which can lag the
	 * memory (a slow or loaded host reads the training level while the log still says loading), and
	 * a level that persists is labelled right by its later readings. */
	if (used_mib < 0 || used_mib < p->mib)
		return;
	if (!phase || !strcmp(phase, "start"))
		phase = "load";
	else if (!strcmp(phase, "done"))
		phase = "save";
	p->mib = used_mib;
	snprintf(p->phase, sizeof p->phase, "%s", phase);
	p->step = !strcmp(p->phase, "load") ? -1 : step;
}

json_t *gpu_peak_json(const struct gpu_peak *p)
{
	if (p->mib < 0)
		return json_null();
	return json_pack("{s:I, s:s, s:o}", "mib", (json_int_t)p->mib, "phase", p->phase, "step",
			 p->step >= 0 ? json_integer(p->step) : json_null());
}
