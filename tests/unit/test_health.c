/* Unit tests for GPU health checks: worker/health (the built-in nvidia-smi judgement; the
 * operator's command through real child processes: pass, fail, timeout with its process group
 * killed, exec failure, CUDA_VISIBLE_DEVICES) and server/api_health's report validation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../server/api_health.h"
#include "../../worker/health.h"
#include "tap.h"
#include "util.h"

static char tmpdir[] = "/tmp/rung-test-health-XXXXXX";

static json_t *gpu(int used, int nprocs)
{
	json_t *procs = json_array();
	for (int i = 0; i < nprocs; i++)
		json_array_append_new(procs, json_pack("{s:i, s:i}", "pid", 4242 + i, "used_mib", 3000));
	return json_pack("{s:s, s:i, s:i, s:o}", "uuid", "GPU-1", "memory_total_mib", 24576, "memory_used_mib", used,
			 "processes", procs);
}

static void test_judge(void)
{
	char *d = NULL;
	json_t *g = gpu(12, 0);
	TAP_OK(health_judge(g, 1024, &d) && strstr(d, "12 MiB"), "idle GPU (12 MiB, no process) passes");
	free(d);
	json_decref(g);
	g = gpu(3012, 1);
	TAP_OK(!health_judge(g, 1024, &d) && strstr(d, "1 compute process") && strstr(d, "4242"),
	       "a foreign compute process fails, and the detail names it");
	free(d);
	json_decref(g);
	g = gpu(2000, 0);
	TAP_OK(!health_judge(g, 1024, &d) && strstr(d, "2000 MiB"), "memory.used over the limit with no process fails");
	free(d);
	json_decref(g);
	g = gpu(1023, 0);
	TAP_OK(health_judge(g, 1024, &d), "memory.used just below the limit passes");
	free(d);
	json_decref(g);
	g = json_pack("{s:s, s:n, s:[]}", "uuid", "GPU-1", "memory_used_mib", "processes");
	TAP_OK(!health_judge(g, 1024, &d), "memory.used [N/A] fails");
	free(d);
	json_decref(g);
	TAP_OK(!health_judge(NULL, 1024, &d) && strstr(d, "no reading"), "no nvidia-smi reading fails");
	free(d);
}

static bool run_sh(const char *script, long timeout_ms, char **detail)
{
	char *path = xasprintf("%s/check.sh", tmpdir), *log = xasprintf("%s/health.log", tmpdir);
	FILE *f = fopen(path, "w");
	bool passed;
	fprintf(f, "#!/bin/sh\n%s\n", script);
	fclose(f);
	chmod(path, 0755);
	char *argv[] = { path, "7", NULL };
	passed = health_run(argv, "7", timeout_ms, log, NULL, detail);
	free(log);
	free(path);
	return passed;
}

static void test_run(void)
{
	char *d = NULL;
	int64_t t0;

	TAP_OK(run_sh("echo matmul ok; exit 0", 5000, &d) && strstr(d, "exited 0: matmul ok"), "exit 0 passes");
	free(d);
	TAP_OK(!run_sh("echo 'CUDA error: out of memory' >&2; exit 3", 5000, &d) && strstr(d, "exited 3") &&
	       strstr(d, "CUDA error"), "a non-zero exit fails; the detail keeps the last output line");
	free(d);
	TAP_OK(run_sh("[ \"$CUDA_VISIBLE_DEVICES\" = 7 ] && [ \"$1\" = 7 ]", 5000, &d),
	       "CUDA_VISIBLE_DEVICES is the GPU index");
	free(d);
	t0 = util_mono_ms();
	TAP_OK(!run_sh("sleep 30 & echo started; wait", 300, &d) && strstr(d, "timed out after 300 ms"),
	       "a hung check fails after the time limit");
	TAP_OK(util_mono_ms() - t0 < 5000, "the time limit kills the whole group (no wait for the grandchild)");
	free(d);
	TAP_OK(!run_sh("kill -9 $$", 5000, &d) && strstr(d, "signal 9"), "a check killed by a signal fails");
	free(d);
	char *argv[] = { "/nonexistent/health-check", NULL };
	TAP_OK(!health_run(argv, "0", 1000, NULL, NULL, &d) && strstr(d, "did not start"), "a missing command fails");
	free(d);
	bool failed = !run_sh("printf 'bad \\377\\001 bytes'; exit 1", 5000, &d);
	json_t *js = json_string(d);
	TAP_OK(failed && js != NULL, "the detail is plain ASCII (valid JSON string)");
	json_decref(js);
	free(d);
}

static void test_parse(void)
{
	struct api_health_report r;
	const char *field = NULL, *why = NULL;
	json_t *b = json_pack("{s:b, s:s, s:{s:s}}", "passed", 1, "detail", "ok", "gpu_state", "uuid", "GPU-1");
	TAP_OK(api_health_parse(b, &r, &field, &why) == 0 && r.passed && !strcmp(r.detail, "ok") && r.gpu_state,
	       "a full report parses");
	json_decref(b);
	b = json_pack("{s:b}", "passed", 0);
	TAP_OK(api_health_parse(b, &r, &field, &why) == 0 && !r.passed && !r.detail && !r.gpu_state,
	       "passed alone is enough");
	json_decref(b);
	b = json_pack("{s:s}", "detail", "x");
	TAP_OK(api_health_parse(b, &r, &field, &why) < 0 && !strcmp(field, "passed"), "passed is required");
	json_decref(b);
	b = json_pack("{s:i}", "passed", 1);
	TAP_OK(api_health_parse(b, &r, &field, &why) < 0 && !strcmp(field, "passed"), "passed must be a boolean");
	json_decref(b);
	char *big = xmalloc(API_HEALTH_DETAIL_MAX + 2);
	memset(big, 'x', API_HEALTH_DETAIL_MAX + 1);
	big[API_HEALTH_DETAIL_MAX + 1] = '\0';
	b = json_pack("{s:b, s:s}", "passed", 1, "detail", big);
	TAP_OK(api_health_parse(b, &r, &field, &why) < 0 && !strcmp(field, "detail"), "detail over 4096 bytes is refused");
	json_decref(b);
	free(big);
	b = json_pack("{s:b, s:i}", "passed", 1, "detail", 3);
	TAP_OK(api_health_parse(b, &r, &field, &why) < 0 && !strcmp(field, "detail"), "detail must be a string");
	json_decref(b);
	b = json_pack("{s:b, s:[]}", "passed", 1, "gpu_state");
	TAP_OK(api_health_parse(b, &r, &field, &why) < 0 && !strcmp(field, "gpu_state"), "gpu_state must be an object");
	json_decref(b);
	b = json_pack("{s:b, s:n, s:n}", "passed", 1, "detail", "gpu_state");
	TAP_OK(api_health_parse(b, &r, &field, &why) == 0 && !r.detail && !r.gpu_state, "nulls read as absent");
	json_decref(b);
}

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		printf("not ok - mkdtemp\n");
		return 1;
	}
	test_judge();
	test_run();
	test_parse();
	char *cmd = xasprintf("rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", tmpdir);
	free(cmd);
	return TAP_DONE();
}
