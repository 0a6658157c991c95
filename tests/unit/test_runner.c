/* Unit tests for worker/runner: real child processes from small shell scripts: exit codes, a
 * signal death, exec failure (127), CUDA_VISIBLE_DEVICES, extra variables and cwd, the log cap, a child that
 * closes its output but keeps running, and a grandchild that keeps the pipe open. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../worker/runner.h"
#include "scan.h"
#include "tap.h"
#include "util.h"

static char tmpdir[] = "/tmp/rung-test-runner-XXXXXX";

/* Runs sh -c SCRIPT until exit or DEADLINE_MS; returns the runner (caller frees). */
static struct runner *run_sh(const char *script, struct scan *sc, const char *log, size_t cap, int deadline_ms)
{
	char *argv[] = { "sh", "-c", (char *)script, NULL };
	static const char *const env[] = { "RUNG_GPU_MEMORY_MIB=32768", NULL };
	struct runner_spec spec = { .argv = argv, .cwd = tmpdir, .cuda_visible = "3", .env = env, .log_path = log,
				    .log_cap = cap };
	struct runner *r = runner_start(&spec, sc);
	int64_t end = util_mono_ms() + deadline_ms;
	while (runner_poll(r, 50) == RUNNER_RUNNING && util_mono_ms() < end)
		;
	scan_finish(sc);
	return r;
}

/* The runner's log, "" when there is none. */
static char *read_log(const char *path, size_t *len)
{
	char *t = util_read_file(path, len);

	if (!t) {
		*len = 0;
		t = xstrdup("");
	}
	return t;
}

int main(void)
{
	struct scan *sc;
	struct runner *r;
	char *log, *text;
	size_t len;
	int64_t t0;

	if (!mkdtemp(tmpdir))
		return 1;
	log = xasprintf("%s/trainer.log", tmpdir);

	sc = scan_new();
	setenv("RUNG_GPU_MEMORY_MIB", "1", 1); /* the spec's value replaces the worker's own */
	r = run_sh("echo gpu=$CUDA_VISIBLE_DEVICES; echo mem=$RUNG_GPU_MEMORY_MIB; env | grep -c ^RUNG_GPU_MEMORY_MIB=; pwd; echo 'CUDA out of memory' >&2; exit 3", sc, log, 1 << 20, 10000);
	TAP_INT_EQ(runner_exit_code(r), 3, "exit code reported");
	TAP_INT_EQ(runner_signal(r), 0, "no signal on a normal exit");
	TAP_OK(runner_error(r) == NULL, "no setup error");
	TAP_INT_EQ(scan_signature(sc, "cuda_oom"), 1, "stderr reaches the scanner");
	text = read_log(log, &len);
	TAP_OK(strstr(text, "gpu=3\n") != NULL, "CUDA_VISIBLE_DEVICES set for the child");
	TAP_OK(strstr(text, "mem=32768\n1\n") != NULL, "the spec's variables replace the environment's, once");
	TAP_OK(strstr(text, tmpdir) != NULL, "child runs in the trainer dir");
	free(text);
	runner_free(r);
	scan_free(sc);

	sc = scan_new();
	r = run_sh("kill -KILL $$", sc, NULL, 0, 10000);
	TAP_INT_EQ(runner_signal(r), SIGKILL, "signal death reported as the signal");
	TAP_INT_EQ(runner_exit_code(r), -1, "no exit code on a signal death");
	runner_free(r);
	scan_free(sc);

	{
		char *argv[] = { "/nonexistent/trainer", NULL };
		char *argv2[] = { "no-such-command-rung", NULL };
		struct runner_spec spec = { .argv = argv };
		sc = scan_new();
		r = runner_start(&spec, sc);
		TAP_INT_EQ(runner_poll(r, 0), RUNNER_EXITED, "exec failure: exited at once");
		TAP_INT_EQ(runner_exit_code(r), 127, "exec failure: exit 127");
		TAP_OK(runner_error(r) && strstr(runner_error(r), "No such file"), "exec failure: errno through the pipe");
		runner_free(r);
		spec.argv = argv2;
		r = runner_start(&spec, sc);
		TAP_INT_EQ(runner_exit_code(r), 127, "command not in PATH: exit 127");
		TAP_OK(runner_error(r) && strstr(runner_error(r), "not found"), "command not in PATH: error says so");
		runner_free(r);
		scan_free(sc);
	}

	sc = scan_new();
	r = run_sh("head -c 3000000 /dev/zero | tr '\\0' x; echo; echo done", sc, log, 1000000, 20000);
	TAP_INT_EQ(runner_exit_code(r), 0, "big output: exit 0");
	text = read_log(log, &len);
	TAP_OK(len > 1000000 && len < 1000100 && strstr(text, "truncated"), "log capped with a marker");
	free(text);
	TAP_INT_EQ(scan_phase(sc), SCAN_START, "big output scanned without harm");
	runner_free(r);
	scan_free(sc);

	sc = scan_new();
	t0 = util_mono_ms();
	r = run_sh("exec >/dev/null 2>&1; sleep 0.3; exit 5", sc, NULL, 0, 10000);
	TAP_INT_EQ(runner_exit_code(r), 5, "closed stdout but kept running: waited for the exit");
	TAP_OK(util_mono_ms() - t0 >= 250, "closed stdout: did not end at EOF");
	runner_free(r);
	scan_free(sc);

	sc = scan_new();
	t0 = util_mono_ms();
	r = run_sh("(sleep 30; echo late) & echo main; exit 0", sc, NULL, 0, 10000);
	TAP_INT_EQ(runner_exit_code(r), 0, "grandchild holds the pipe: main child's exit ends it");
	TAP_OK(util_mono_ms() - t0 < 5000, "grandchild holds the pipe: no wait for it");
	runner_free(r);
	scan_free(sc);

	sc = scan_new();
	{
		char *argv[] = { "sh", "-c", "trap 'echo Job stopped; exit 0' INT; echo ready; while :; do sleep 0.05; done", NULL };
		struct runner_spec spec = { .argv = argv };
		int64_t end;
		r = runner_start(&spec, sc);
		end = util_mono_ms() + 5000;
		while (runner_poll(r, 20) == RUNNER_RUNNING && util_mono_ms() < end) {
			json_t *f = scan_facts(sc);
			int ready = json_array_size(json_object_get(f, "log_tail")) > 0;
			json_decref(f);
			if (ready)
				break;
		}
		runner_kill(r, SIGINT);
		end = util_mono_ms() + 5000;
		while (runner_poll(r, 50) == RUNNER_RUNNING && util_mono_ms() < end)
			;
		scan_finish(sc);
		TAP_INT_EQ(runner_exit_code(r), 0, "SIGINT to the group: trainer exits cleanly");
		TAP_INT_EQ(scan_signature(sc, "job_stopped"), 1, "SIGINT to the group: trainer saw it");
		runner_free(r);
	}
	scan_free(sc);
	runner_free(NULL);

	free(log);
	{
		char *cmd = xasprintf("rm -rf %s", tmpdir);
		if (system(cmd)) {}
		free(cmd);
	}
	return TAP_DONE();
}
