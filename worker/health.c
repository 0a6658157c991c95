/* GPU health checks (see health.h): the built-in nvidia-smi judgement and the operator's command
 * run through runner (process group, capped log), with a deadline and a stop flag. Keeps no state
 * between calls. */
#include "health.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner.h"
#include "scan.h"
#include "util.h"

#define HEALTH_LOG_CAP (64 * 1024)
#define HEALTH_TAIL 512

bool health_judge(const json_t *gpu_state, long long max_used_mib, char **detail)
{
	const json_t *procs = json_object_get(gpu_state, "processes");
	const json_t *used = json_object_get(gpu_state, "memory_used_mib");
	size_t n = json_array_size(procs);

	if (!json_is_object(gpu_state)) {
		*detail = xstrdup("nvidia-smi gave no reading of this GPU");
		return false;
	}
	if (n) {
		const json_t *p0 = json_array_get(procs, 0);
		*detail = xasprintf("%zu compute process(es) on the GPU (pid %" JSON_INTEGER_FORMAT " uses %"
				    JSON_INTEGER_FORMAT " MiB%s); memory.used %" JSON_INTEGER_FORMAT " MiB",
				    n, json_integer_value(json_object_get(p0, "pid")),
				    json_integer_value(json_object_get(p0, "used_mib")), n > 1 ? ", ..." : "",
				    json_integer_value(used));
		return false;
	}
	if (!json_is_integer(used)) {
		*detail = xstrdup("memory.used is not reported ([N/A])");
		return false;
	}
	if (json_integer_value(used) >= max_used_mib) {
		*detail = xasprintf("memory.used %" JSON_INTEGER_FORMAT " MiB with no compute process (limit %lld MiB)",
				    json_integer_value(used), max_used_mib);
		return false;
	}
	*detail = xasprintf("no compute process; memory.used %" JSON_INTEGER_FORMAT " MiB (limit %lld MiB)",
			    json_integer_value(used), max_used_mib);
	return true;
}

/* The last non-empty line of the file's last HEALTH_TAIL bytes (heap), or NULL. */
static char *last_line(const char *path)
{
	char buf[HEALTH_TAIL + 1], *end, *start;
	int fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	off_t size;
	ssize_t n;

	if (fd < 0)
		return NULL;
	size = lseek(fd, 0, SEEK_END);
	n = pread(fd, buf, HEALTH_TAIL, size > HEALTH_TAIL ? size - HEALTH_TAIL : 0);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0' || buf[i] == '\r')
			buf[i] = '\n';
	end = buf + strlen(buf);
	while (end > buf && (end[-1] == '\n' || end[-1] == ' '))
		*--end = '\0';
	if (end == buf)
		return NULL;
	start = strrchr(buf, '\n');
	return xstrdup(start ? start + 1 : buf);
}

bool health_run(char *const *argv, const char *cuda_visible, long timeout_ms, const char *log_path,
		const atomic_int *stop, char **detail)
{
	struct runner_spec spec = { 0 };
	struct scan *sc = scan_new();
	struct runner *r;
	int64_t deadline;
	bool timed_out = false, stopped = false, passed = false;
	char *tail = NULL;

	spec.argv = argv;
	spec.cuda_visible = cuda_visible;
	spec.log_path = log_path;
	spec.log_cap = HEALTH_LOG_CAP;
	r = runner_start(&spec, sc);
	deadline = util_mono_ms() + (timeout_ms > 0 ? timeout_ms : HEALTH_TIMEOUT_MS_DEFAULT);
	while (runner_poll(r, 100) == RUNNER_RUNNING) {
		if (stop && atomic_load(stop)) {
			stopped = true;
			break;
		}
		if (util_mono_ms() >= deadline) {
			timed_out = true;
			break;
		}
	}
	if (timed_out || stopped) {
		runner_kill(r, SIGKILL);
		while (runner_poll(r, 100) == RUNNER_RUNNING)
			;
	}
	tail = last_line(log_path);
	if (runner_error(r))
		*detail = xasprintf("health command did not start: %s", runner_error(r));
	else if (timed_out)
		*detail = xasprintf("health command timed out after %ld ms%s%s", timeout_ms, tail ? ": " : "",
				    tail ? tail : "");
	else if (stopped)
		*detail = xstrdup("health command stopped: the worker is shutting down");
	else if (runner_signal(r))
		*detail = xasprintf("health command killed by signal %d%s%s", runner_signal(r), tail ? ": " : "",
				    tail ? tail : "");
	else
		*detail = xasprintf("health command exited %d%s%s", runner_exit_code(r), tail ? ": " : "",
				    tail ? tail : "");
	for (char *p = *detail; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?'; /* plain ASCII: valid UTF-8 after the cut below, safe in any log */
	passed = !runner_error(r) && !timed_out && !stopped && !runner_signal(r) && runner_exit_code(r) == 0;
	if (strlen(*detail) > HEALTH_DETAIL_MAX)
		(*detail)[HEALTH_DETAIL_MAX] = '\0';
	free(tail);
	runner_free(r);
	scan_free(sc);
	return passed;
}
