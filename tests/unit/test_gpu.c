/* Unit tests for worker/gpu: the nvidia-smi CSV parsers on real-looking output (spaces after
 * commas, [N/A], commas in names, no processes, garbage) and the spawn path with a failing and
 * a hanging-free fake nvidia-smi script. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../worker/gpu.h"
#include "tap.h"
#include "util.h"

int main(void)
{
	struct gpu_info *g = NULL;
	struct gpu_proc *p = NULL;
	size_t n = 9;
	char *err = NULL, dir[] = "/tmp/rung-test-gpu-XXXXXX", *smi;
	json_t *st;
	FILE *f;

	TAP_INT_EQ(gpu_parse_list("0, GPU-a1, NVIDIA H100 80GB HBM3, 81559, 0, 81080\n"
				  "1, GPU-b2, Tesla T4, Inc., 15360, [N/A], 15000\n\n", &g, &n, &err), 0, "list parsed");
	TAP_INT_EQ(n, 2, "two GPUs");
	TAP_OK(g[0].index == 0 && !strcmp(g[0].uuid, "GPU-a1") && g[0].total_mib == 81559 && g[0].free_mib == 81080,
	       "first GPU fields");
	TAP_OK(!strcmp(g[1].name, "Tesla T4, Inc.") && g[1].used_mib == -1, "comma in name, [N/A] used");
	free(g);
	TAP_INT_EQ(gpu_parse_list("", &g, &n, &err), 0, "empty list parses");
	TAP_INT_EQ(n, 0, "empty list: no GPUs");
	free(g);
	TAP_INT_EQ(gpu_parse_list("NVIDIA-SMI has failed because it couldn't communicate\n", &g, &n, &err), -1,
		   "garbage rejected");
	TAP_OK(err && strstr(err, "unexpected"), "garbage: error says why");
	free(err);
	err = NULL;

	TAP_INT_EQ(gpu_parse_procs("GPU-a1, 1234, 5816\nGPU-b2,77,[N/A]\n", &p, &n, &err), 0, "procs parsed");
	TAP_OK(n == 2 && p[0].pid == 1234 && p[0].used_mib == 5816 && !strcmp(p[1].uuid, "GPU-b2") && p[1].used_mib == -1,
	       "proc fields");
	free(p);
	TAP_INT_EQ(gpu_parse_procs("No running processes found\n", &p, &n, &err), 0, "no processes");
	TAP_INT_EQ(n, 0, "no processes: empty");
	free(p);

	if (!mkdtemp(dir))
		return 1;
	smi = xasprintf("%s/nvidia-smi", dir);
	f = fopen(smi, "w");
	fputs("#!/bin/sh\ncase \"$1\" in --query-gpu*) echo '0, GPU-a1, X, 1000, 300, 700';; *) echo 'GPU-a1, 9, 300';; esac\n", f);
	fclose(f);
	chmod(smi, 0755);
	st = gpu_state(smi, "GPU-a1");
	TAP_OK(st && json_integer_value(json_object_get(st, "memory_used_mib")) == 300 &&
	       json_integer_value(json_object_get(json_array_get(json_object_get(st, "processes"), 0), "pid")) == 9,
	       "gpu_state from a fake nvidia-smi");
	json_decref(st);
	TAP_OK(gpu_state(smi, "GPU-zz") == NULL, "gpu_state of a missing GPU is NULL");
	TAP_INT_EQ(gpu_used_mib(smi, "GPU-a1"), 300, "gpu_used_mib reads memory.used");
	TAP_INT_EQ(gpu_used_mib(smi, "GPU-zz"), -1, "gpu_used_mib of a missing GPU is -1");
	f = fopen(smi, "w");
	fputs("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n", f);
	fclose(f);
	TAP_INT_EQ(gpu_list(smi, &g, &n, &err), -1, "failing nvidia-smi: error");
	TAP_OK(err && strstr(err, "exit 9"), "failing nvidia-smi: exit status in the error");
	free(err);
	err = NULL;
	TAP_INT_EQ(gpu_list("/nonexistent/nvidia-smi", &g, &n, &err), -1, "missing nvidia-smi: error");
	free(err);
	TAP_INT_EQ(gpu_used_mib(smi, "GPU-a1"), -1, "gpu_used_mib when nvidia-smi fails is -1");
	{
		struct gpu_peak pk;
		json_t *j;
		gpu_peak_init(&pk);
		j = gpu_peak_json(&pk);
		TAP_OK(json_is_null(j), "peak: nothing read is null");
		json_decref(j);
		gpu_peak_note(&pk, -1, "train", 4);
		TAP_INT_EQ(pk.mib, -1, "peak: a failed reading (-1) is ignored");
		gpu_peak_note(&pk, 9000, "start", 7);
		gpu_peak_note(&pk, 21000, "start", 8); /* the training level read before the log says so */
		gpu_peak_note(&pk, 21000, "train", 12);
		gpu_peak_note(&pk, 15000, "sample", 25);
		j = gpu_peak_json(&pk);
		TAP_INT_EQ(json_integer_value(json_object_get(j, "mib")), 21000, "peak: the highest reading");
		TAP_STR_EQ(json_string_value(json_object_get(j, "phase")), "train",
			   "peak: an equal later reading relabels it (the log lagged the memory: train, not load)");
		TAP_INT_EQ(json_integer_value(json_object_get(j, "step")), 12, "peak: its step");
		json_decref(j);
		gpu_peak_init(&pk);
		gpu_peak_note(&pk, 9000, "start", 7);
		j = gpu_peak_json(&pk);
		TAP_STR_EQ(json_string_value(json_object_get(j, "phase")), "load", "peak: start counts as load");
		TAP_OK(json_is_null(json_object_get(j, "step")), "peak: no step while loading");
		json_decref(j);
		gpu_peak_note(&pk, 9500, "done", 100);
		TAP_STR_EQ(pk.phase, "save", "peak: done counts as save");
	}
	{
		char *rm = xasprintf("rm -rf %s", dir);
		if (system(rm)) {}
		free(rm);
	}
	free(smi);
	return TAP_DONE();
}
