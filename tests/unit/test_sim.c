/* Tests for the simulated GPU tools: runs bin/sim/nvidia-smi and bin/sim/rung-sim-trainer as child
 * processes (from the repository root; RUNG_SIM_BIN_DIR overrides bin/sim) and checks their output,
 * exit status and the memory model's monotonicity along the rollback ladders. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jpath.h"
#include "scan.h"
#include "tap.h"
#include "util.h"

static char tmpdir[256];
static const char *bindir = "bin/sim";

struct sim_result {
	int exit_code;   /* -1 when killed by a signal */
	int signal;
	char *out;       /* stdout and stderr together, heap */
};

/* The file's text, "" when it cannot be read. */
static char *read_text(const char *path)
{
	char *t = util_read_file(path, NULL);

	return t ? t : xstrdup("");
}

/* Starts TOOL with ARGS (NULL-terminated) and ENV ("K=V" entries added to ours), output to OUTPATH. */
static pid_t sim_spawn(const char *tool, const char *const *args, const char *const *env, const char *outpath)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	int fd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		_exit(126);
	dup2(fd, 1);
	dup2(fd, 2);
	for (size_t i = 0; env && env[i]; i++)
		putenv((char *)env[i]);
	char path[512];
	const char *argv[16] = { 0 };
	snprintf(path, sizeof(path), "%s/%s", bindir, tool);
	argv[0] = path;
	for (size_t i = 0; args[i] && i < 14; i++)
		argv[i + 1] = args[i];
	execv(path, (char *const *)argv);
	_exit(127);
}

static struct sim_result sim_wait_result(pid_t pid, const char *outpath)
{
	struct sim_result r = { -1, 0, NULL };
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st))
		r.exit_code = WEXITSTATUS(st);
	else if (WIFSIGNALED(st))
		r.signal = WTERMSIG(st);
	r.out = read_text(outpath);
	return r;
}

static struct sim_result run_tool(const char *tool, const char *const *args, const char *const *env)
{
	char outpath[512];
	snprintf(outpath, sizeof(outpath), "%s/out.txt", tmpdir);
	return sim_wait_result(sim_spawn(tool, args, env, outpath), outpath);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		abort();
	fputs(text, f);
	fclose(f);
}

/* Writes CONFIG to a file in tmpdir; returns a static path (one per slot). */
static const char *config_file(json_t *config, int slot)
{
	static char paths[4][512];
	snprintf(paths[slot], sizeof(paths[slot]), "%s/config%d.json", tmpdir, slot);
	if (json_dump_file(config, paths[slot], 0) != 0)
		abort();
	return paths[slot];
}

static json_t *estimate(json_t *config)
{
	const char *args[] = { "--estimate", config_file(config, 0), NULL };
	struct sim_result r = run_tool("rung-sim-trainer", args, NULL);
	json_t *j = json_loads(r.out, 0, NULL);
	free(r.out);
	return j;
}

static long est(json_t *e, const char *key)
{
	return (long)json_integer_value(json_object_get(e, key));
}

static json_t *flux_config(void)
{
	return json_pack("{s:s,s:{s:s,s:[{s:s,s:{s:i,s:i,s:b,s:i,s:f},s:{s:i},s:[{s:s,s:[i,i,i]}],"
		"s:{s:i,s:i,s:i,s:i,s:[s,s]},s:{s:s,s:s,s:b,s:b}}]},s:{s:s}}",
		"job", "extension", "config", "name", "my_lora", "process", "type", "diffusion_trainer",
		"train", "batch_size", 4, "gradient_accumulation", 1, "gradient_checkpointing", 0, "steps", 20, "lr", 1e-4,
		"save", "save_every", 10,
		"datasets", "folder_path", "/data/x", "resolution", 512, 768, 1024,
		"sample", "sample_every", 10, "width", 1024, "height", 1024, "sample_steps", 30, "prompts", "a", "b",
		"model", "name_or_path", "black-forest-labs/FLUX.1-dev", "arch", "flux", "quantize", 1, "low_vram", 0,
		"meta", "name", "[name]");
}

static json_t *wan_config(void)
{
	return json_pack("{s:s,s:{s:s,s:[{s:s,s:{s:i,s:b,s:i},s:[{s:s,s:[i,i],s:i}],"
		"s:{s:i,s:i,s:i,s:i,s:i,s:[{s:s}]},s:{s:s,s:b,s:b}}]},s:{s:s}}",
		"job", "extension", "config", "name", "wan_lora", "process", "type", "diffusion_trainer",
		"train", "batch_size", 2, "gradient_checkpointing", 1, "steps", 20,
		"datasets", "folder_path", "/data/clips", "resolution", 512, 768, "num_frames", 81,
		"sample", "sample_every", 10, "width", 832, "height", 480, "num_frames", 81, "sample_steps", 30,
		"samples", "prompt", "a cat",
		"model", "arch", "wan22_14b", "quantize", 0, "low_vram", 0,
		"meta", "name", "[name]");
}

static json_t *proc0(json_t *c)
{
	return json_array_get(json_object_get(json_object_get(c, "config"), "process"), 0);
}

static json_t *sect(json_t *c, const char *name)
{
	return json_object_get(proc0(c), name);
}

/* Applies one change to a copy of BASE and checks that KEY's need drops strictly. */
static void check_rung(json_t *base, const char *what, const char *key,
	void (*change)(json_t *c), const char *key2)
{
	json_t *c = json_deep_copy(base);
	json_t *before = estimate(base);
	change(c);
	json_t *after = estimate(c);
	char name[256];
	snprintf(name, sizeof(name), "%s lowers %s (%ld -> %ld)", what, key, est(before, key), est(after, key));
	TAP_OK(before && after && est(after, key) < est(before, key), name);
	if (key2) {
		snprintf(name, sizeof(name), "%s lowers %s", what, key2);
		TAP_OK(before && after && est(after, key2) < est(before, key2), name);
	}
	json_decref(before);
	json_decref(after);
	json_decref(c);
}

static void ch_ckpt(json_t *c) { json_object_set_new(sect(c, "train"), "gradient_checkpointing", json_true()); }
static void ch_batch(json_t *c)
{
	json_object_set_new(sect(c, "train"), "batch_size", json_integer(1));
	json_object_set_new(sect(c, "train"), "gradient_accumulation", json_integer(4));
}
static void ch_bucket(json_t *c)
{
	json_t *res = json_object_get(json_array_get(sect(c, "datasets"), 0), "resolution");
	json_array_remove(res, json_array_size(res) - 1);
}
static void ch_sample_size(json_t *c)
{
	json_object_set_new(sect(c, "sample"), "width", json_integer(512));
	json_object_set_new(sect(c, "sample"), "height", json_integer(512));
}
static void ch_sample_steps(json_t *c) { json_object_set_new(sect(c, "sample"), "sample_steps", json_integer(15)); }
static void ch_sample_off(json_t *c) { json_object_set_new(sect(c, "train"), "disable_sampling", json_true()); }
static void ch_low_vram(json_t *c) { json_object_set_new(sect(c, "model"), "low_vram", json_true()); }
static void ch_quantize(json_t *c) { json_object_set_new(sect(c, "model"), "quantize", json_true()); }
static void ch_offload(json_t *c)
{
	json_object_set_new(sect(c, "model"), "layer_offloading", json_true());
	json_object_set_new(sect(c, "model"), "layer_offloading_transformer_percent", json_real(0.5));
}
static void ch_frames(json_t *c)
{
	json_object_set_new(json_array_get(sect(c, "datasets"), 0), "num_frames", json_integer(41));
}
static void ch_sample_frames(json_t *c) { json_object_set_new(sect(c, "sample"), "num_frames", json_integer(41)); }
static void ch_item_frames(json_t *c)
{
	json_object_set_new(json_array_get(json_object_get(sect(c, "sample"), "samples"), 0), "num_frames",
		json_integer(21));
}

static void test_nvidia_smi(void)
{
	char state[512], env_state[600];
	snprintf(state, sizeof(state), "%s/gpus.json", tmpdir);
	snprintf(env_state, sizeof(env_state), "RUNG_SIM_STATE=%s", state);
	write_file(state, "{\"gpus\": [{\"uuid\": \"GPU-5d1c\", \"name\": \"NVIDIA GeForce RTX 4090\", "
		"\"memory_total_mib\": 24564, \"processes\": [{\"pid\": 4242, \"used_mib\": 6000, \"name\": \"python\"}]},"
		"{\"uuid\": \"GPU-77aa\", \"name\": \"NVIDIA H100 80GB HBM3\", \"memory_total_mib\": 81559}]}");
	const char *env[] = { env_state, "RUNG_SIM_REGISTER=0", NULL };

	const char *a1[] = { "--query-gpu=index,uuid,name,memory.total,memory.used,memory.free",
		"--format=csv,noheader,nounits", NULL };
	struct sim_result r = run_tool("nvidia-smi", a1, env);
	TAP_STR_EQ(r.out, "0, GPU-5d1c, NVIDIA GeForce RTX 4090, 24564, 6012, 18552\n"
		"1, GPU-77aa, NVIDIA H100 80GB HBM3, 81559, 12, 81547\n", "nvidia-smi query-gpu csv noheader nounits");
	TAP_INT_EQ(r.exit_code, 0, "nvidia-smi query-gpu exits 0");
	free(r.out);

	const char *a2[] = { "--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits", NULL };
	r = run_tool("nvidia-smi", a2, env);
	TAP_STR_EQ(r.out, "GPU-5d1c, 4242, 6000\n", "nvidia-smi compute apps lists the dirty GPU's process");
	free(r.out);

	const char *a3[] = { "--query-gpu=memory.free,index", "--format=csv", "-i", "1", NULL };
	r = run_tool("nvidia-smi", a3, env);
	TAP_STR_EQ(r.out, "memory.free [MiB], index\n81547 MiB, 1\n", "nvidia-smi csv header and units, -i, any order");
	free(r.out);

	const char *a4[] = { "--query-compute-apps=pid,used_memory", "--format=csv", "-i", "1", NULL };
	r = run_tool("nvidia-smi", a4, env);
	TAP_STR_EQ(r.out, "pid, used_gpu_memory [MiB]\n", "nvidia-smi no processes: header only");
	free(r.out);

	const char *a5[] = { "--query-gpu=index,bogus", "--format=csv", NULL };
	r = run_tool("nvidia-smi", a5, env);
	TAP_OK(strstr(r.out, "Field \"bogus\" is not a valid field to query.") != NULL, "nvidia-smi unknown field wording");
	TAP_INT_EQ(r.exit_code, 2, "nvidia-smi unknown field exits 2");
	free(r.out);

	const char *a6[] = { "-L", NULL };
	r = run_tool("nvidia-smi", a6, env);
	TAP_STR_EQ(r.out, "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-5d1c)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-77aa)\n",
		"nvidia-smi -L");
	free(r.out);

	const char *a7[] = { NULL };
	r = run_tool("nvidia-smi", a7, env);
	TAP_OK(strstr(r.out, "6012MiB / 24564MiB") && strstr(r.out, "4242"), "nvidia-smi plain table");
	free(r.out);

	/* A trainer entry whose process is gone no longer holds memory. */
	write_file(state, "{\"gpus\": [{\"uuid\": \"GPU-5d1c\", \"memory_total_mib\": 24564, \"processes\": "
		"[{\"pid\": 999999999, \"used_mib\": 6000, \"trainer\": true}]}]}");
	const char *a8[] = { "--query-gpu=memory.used", "--format=csv,noheader,nounits", NULL };
	r = run_tool("nvidia-smi", a8, env);
	TAP_STR_EQ(r.out, "12\n", "nvidia-smi drops dead trainer entries");
	free(r.out);
}

static void test_estimates(void)
{
	json_t *flux = flux_config(), *wan = wan_config();
	/* AI Toolkit's own examples say `is_flux: true` instead of `arch: flux`: the same model. */
	json_t *legacy = json_deep_copy(flux);
	json_object_del(sect(legacy, "model"), "arch");
	json_object_set_new(sect(legacy, "model"), "is_flux", json_true());
	json_t *el = estimate(legacy), *ef = estimate(flux);
	TAP_OK(el && ef && json_equal(json_object_get(el, "load_mib"), json_object_get(ef, "load_mib")),
	       "flux: is_flux: true weighs what arch: flux weighs");
	json_decref(el);
	json_decref(ef);
	json_decref(legacy);
	check_rung(flux, "flux: gradient checkpointing on", "train_mib", ch_ckpt, NULL);
	check_rung(flux, "flux: batch 1 + accumulation", "train_mib", ch_batch, NULL);
	check_rung(flux, "flux: drop largest bucket", "train_mib", ch_bucket, "train_typical_mib");
	check_rung(flux, "flux: smaller samples", "sample_mib", ch_sample_size, "baseline_sample_mib");
	check_rung(flux, "flux: fewer sample steps", "sample_mib", ch_sample_steps, NULL);
	check_rung(flux, "flux: sampling off", "sample_mib", ch_sample_off, "baseline_sample_mib");
	check_rung(flux, "flux: low_vram", "load_mib", ch_low_vram, "train_mib");
	check_rung(flux, "flux: offloading", "load_mib", ch_offload, "sample_mib");
	json_object_set_new(sect(flux, "model"), "quantize", json_false());
	check_rung(flux, "flux: quantize", "load_mib", ch_quantize, "train_mib");

	check_rung(wan, "wan22: fewer frames", "train_mib", ch_frames, NULL);
	check_rung(wan, "wan22: fewer sample frames (item override)", "sample_mib", ch_item_frames, NULL);
	check_rung(wan, "wan22: batch 1", "train_mib", ch_batch, NULL);
	check_rung(wan, "wan22: drop largest bucket", "train_mib", ch_bucket, NULL);
	check_rung(wan, "wan22: sampling off", "sample_mib", ch_sample_off, NULL);
	check_rung(wan, "wan22: low_vram", "load_mib", ch_low_vram, NULL);
	check_rung(wan, "wan22: quantize", "load_mib", ch_quantize, NULL);
	check_rung(wan, "wan22: offloading", "load_mib", ch_offload, NULL);
	/* The per-item override wins: changing the top-level frames alone changes nothing. */
	json_t *c = json_deep_copy(wan);
	ch_sample_frames(c);
	ch_item_frames(wan);
	json_t *e1 = estimate(wan), *e2 = estimate(c);
	json_t *c2 = json_deep_copy(c);
	ch_item_frames(c2);
	json_t *e3 = estimate(c2);
	TAP_OK(est(e3, "sample_mib") < est(e2, "sample_mib") && est(e1, "sample_mib") == est(e3, "sample_mib"),
		"wan22: samples[] frames override the top-level value");
	json_decref(e1);
	json_decref(e2);
	json_decref(e3);
	json_decref(c);
	json_decref(c2);
	json_decref(flux);
	json_decref(wan);
}

/* Runs the trainer on CONFIG with a GPU of GPU_MIB plus extra env; fresh run dir per call. */
static struct sim_result train(json_t *config, long gpu_mib, const char *e1, const char *e2)
{
	static int n;
	char gpu[64], dir[512];
	snprintf(gpu, sizeof(gpu), "RUNG_SIM_GPU_MIB=%ld", gpu_mib);
	snprintf(dir, sizeof(dir), "RUNG_SIM_RUN_DIR=%s/run%d", tmpdir, n++);
	const char *env[] = { gpu, dir, "RUNG_SIM_STEP_MS=2", "RUNG_SIM_LOAD_MS=4", "RUNG_SIM_SAMPLE_MS=2",
		"RUNG_SIM_STATE=/nonexistent/gpus.json", e1 ? e1 : "RUNG_SIM_X1=", e2 ? e2 : "RUNG_SIM_X2=", NULL };
	const char *args[] = { config_file(config, 1), NULL };
	return run_tool("rung-sim-trainer", args, env);
}

static int in_order(const char *text, const char *const *marks)
{
	const char *p = text;
	for (size_t i = 0; marks[i]; i++) {
		p = strstr(p, marks[i]);
		if (!p)
			return 0;
		p += strlen(marks[i]);
	}
	return 1;
}

static void test_runs(void)
{
	json_t *flux = flux_config();
	json_object_set_new(sect(flux, "train"), "gradient_checkpointing", json_true());
	json_t *e = estimate(flux);
	long load = est(e, "load_mib"), base = est(e, "baseline_sample_mib"), heavy = est(e, "train_mib");
	long typ = est(e, "train_typical_mib"), peak = est(e, "peak_mib");
	TAP_OK(load < base && base < typ && typ <= heavy, "flux estimate: load < baseline < train");

	struct sim_result r = train(flux, peak + 12, NULL, NULL);
	const char *phases[] = { "Running 1 job", "# Running job: my_lora", "Loading transformer", "Quantizing Transformer",
		"Loading text encoder", "Loading VAE", "Model Loaded", "Bucket sizes for /data/x", "Caching latents",
		"Generating baseline samples before training", "Generating Samples: 100%", "my_lora:", "/20 [",
		"lr: 1.0e-04 loss: ", "Saving at step 10", "Generating Samples", "my_lora: 100%|██████████| 20/20",
		"Generating Samples", "Result:", " - 1 completed job", NULL };
	TAP_OK(in_order(r.out, phases), "fitting run prints the phases in order");
	const char *real_load[] = { "Loading transformer", "Loading checkpoint shards: 100%", " - quantizing 40 transformer blocks",
		"\r100%|", " - quantizing extras", "Model Loaded", "create LoRA network. base dim (rank): 16, alpha: 16",
		"enable LoRA for U-Net", NULL };
	TAP_OK(in_order(r.out, real_load), "fitting run loads as real AI Toolkit logs show it (shards, unnamed quantizer bar, LoRA)");
	struct scan *sc = scan_new();
	scan_feed(sc, r.out, strlen(r.out));
	scan_finish(sc);
	json_t *sf = scan_facts(sc);
	TAP_INT_EQ(jpath_int(sf, "first_step", -1), 0, "the scanner takes no load bar for training: first step 0");
	TAP_INT_EQ(jpath_int(sf, "total_steps", -1), 20, "the scanner's total steps are the training bar's");
	json_decref(sf);
	scan_free(sc);
	TAP_INT_EQ(r.exit_code, 0, "fitting run exits 0");
	TAP_OK(!strstr(r.out, "OOM") && !strstr(r.out, "Error"), "fitting run has no errors");
	free(r.out);

	r = train(flux, load - 100 + 12, NULL, NULL);
	const char *oom_load[] = { "Loading transformer", "Error running job: CUDA out of memory. Tried to allocate",
		" - 0 completed jobs", " - 1 failure", "Traceback (most recent call last):",
		"torch.OutOfMemoryError: CUDA out of memory.", NULL };
	TAP_OK(in_order(r.out, oom_load) && !strstr(r.out, "Model Loaded"), "load OOM: the lines, before Model Loaded");
	TAP_OK(strstr(r.out, "GPU 0 has a total capacity of ") != NULL, "load OOM: capacity wording");
	TAP_INT_EQ(r.exit_code, 1, "load OOM exits 1");
	free(r.out);

	r = train(flux, base - 50 + 12, NULL, NULL);
	const char *oom_base[] = { "Model Loaded", "Generating baseline samples before training",
		"Error running job: CUDA out of memory.", " - 1 failure", NULL };
	TAP_OK(in_order(r.out, oom_base) && !strstr(r.out, "my_lora:"), "baseline sample OOM before training");
	TAP_INT_EQ(r.exit_code, 1, "baseline sample OOM exits 1");
	free(r.out);

	r = train(flux, typ - 50 + 12, NULL, NULL);
	const char *oom_train[] = { "Generating baseline samples", "# OOM during training step, skipping batch 1/3 #",
		"# OOM during training step, skipping batch 2/3 #", "# OOM during training step, skipping batch 3/3 #",
		"Error running job: OOM during training step 3 times in a row, aborting training", " - 1 failure",
		"RuntimeError: OOM during training step 3 times in a row, aborting training", NULL };
	TAP_OK(in_order(r.out, oom_train), "train OOM: three skips then abort");
	TAP_INT_EQ(r.exit_code, 1, "train OOM exits 1");
	free(r.out);

	/* Intermittent: the heavy batch (largest bucket) plus a spike does not fit, other batches do. */
	r = train(flux, heavy + 12 + 100, "RUNG_SIM_SPIKE_MIB=1000", NULL);
	TAP_OK(strstr(r.out, "skipping batch 1/3") && !strstr(r.out, "skipping batch 2/3"), "spike: a batch skipped");
	TAP_INT_EQ(r.exit_code, 0, "spike: the run still succeeds");
	free(r.out);
	r = train(flux, heavy + 12 + 100, "RUNG_SIM_SPIKE_MIB=1000", "RUNG_SIM_SPIKE_EVERY=1");
	TAP_OK(strstr(r.out, "3 times in a row, aborting training") != NULL, "spike every step: aborts");
	TAP_INT_EQ(r.exit_code, 1, "spike every step exits 1");
	free(r.out);
	json_t *nob = json_deep_copy(flux);
	ch_bucket(nob);
	r = train(nob, heavy + 12 + 100, "RUNG_SIM_SPIKE_MIB=1000", "RUNG_SIM_SPIKE_EVERY=1");
	TAP_OK(!strstr(r.out, "OOM") && r.exit_code == 0, "spike: dropping the largest bucket fixes it");
	free(r.out);
	json_decref(nob);

	/* Sampling OOM after training started: big previews, no baseline. */
	json_t *big = json_deep_copy(flux);
	json_object_set_new(sect(big, "train"), "skip_first_sample", json_true());
	json_object_set_new(sect(big, "sample"), "width", json_integer(2048));
	json_object_set_new(sect(big, "sample"), "height", json_integer(2048));
	json_t *eb = estimate(big);
	long smp = est(eb, "sample_mib");
	TAP_OK(smp > est(eb, "train_mib") && est(eb, "baseline_sample_mib") == 0, "big previews: sample > train");
	r = train(big, smp - 50 + 12, NULL, NULL);
	const char *oom_sample[] = { "Skipping first sample due to config setting", "my_lora:", "10/20",
		"Saving at step 10", "Generating Samples", "Error running job: CUDA out of memory.", NULL };
	TAP_OK(in_order(r.out, oom_sample), "sample OOM at the first periodic sample");
	TAP_INT_EQ(r.exit_code, 1, "sample OOM exits 1");
	free(r.out);
	json_decref(eb);
	json_decref(big);

	r = train(flux, peak + 12, "RUNG_SIM_CUBLAS=alloc", NULL);
	TAP_OK(strstr(r.out, "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")
		&& !strstr(r.out, "Model Loaded"), "CUBLAS alloc failure during load");
	TAP_INT_EQ(r.exit_code, 1, "CUBLAS failure exits 1");
	free(r.out);

	r = train(flux, load - 100 + 12, "RUNG_SIM_OLD_WORDING=1", NULL);
	TAP_OK(strstr(r.out, "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate ") &&
		strstr(r.out, " total capacity; ") && strstr(r.out, " reserved in total by PyTorch)"), "old PyTorch wording");
	free(r.out);

	r = train(flux, peak + 12, "RUNG_SIM_FAIL=host_oom", NULL);
	TAP_INT_EQ(r.signal, SIGKILL, "host_oom: killed by SIGKILL");
	free(r.out);
	r = train(flux, peak + 12, "RUNG_SIM_FAIL=missing_file", NULL);
	TAP_OK(strstr(r.out, "FileNotFoundError: [Errno 2] No such file or directory: '/data/x'") && r.exit_code == 1,
		"missing_file: FileNotFoundError, exit 1");
	free(r.out);
	json_decref(e);
	json_decref(flux);
}

static void test_dirty_gpu(void)
{
	char state[512], env_state[600], dir[600];
	snprintf(state, sizeof(state), "%s/dirty.json", tmpdir);
	snprintf(env_state, sizeof(env_state), "RUNG_SIM_STATE=%s", state);
	snprintf(dir, sizeof(dir), "RUNG_SIM_RUN_DIR=%s/dirty", tmpdir);
	write_file(state, "{\"gpus\": [{\"uuid\": \"GPU-5d1c\", \"memory_total_mib\": 24564, \"processes\": "
		"[{\"pid\": 4242, \"used_mib\": 20000, \"name\": \"python\"}]}]}");
	json_t *flux = flux_config();
	const char *env[] = { env_state, dir, "CUDA_VISIBLE_DEVICES=0", "RUNG_SIM_LOAD_MS=4", NULL };
	const char *args[] = { config_file(flux, 1), NULL };
	struct sim_result r = run_tool("rung-sim-trainer", args, env);
	TAP_OK(strstr(r.out, "Process 4242 has 19.53 GiB memory in use.") != NULL, "dirty GPU: foreign process listed");
	TAP_INT_EQ(r.exit_code, 1, "dirty GPU: load fails");
	free(r.out);
	json_decref(flux);
}

static void test_sigint_and_resume(void)
{
	char outpath[512], dir[600];
	json_t *flux = flux_config();
	json_object_set_new(sect(flux, "train"), "gradient_checkpointing", json_true());
	json_object_set_new(sect(flux, "train"), "steps", json_integer(400));
	json_object_set_new(sect(flux, "save"), "save_every", json_integer(5));
	snprintf(outpath, sizeof(outpath), "%s/sigint.txt", tmpdir);
	snprintf(dir, sizeof(dir), "RUNG_SIM_RUN_DIR=%s/sigint", tmpdir);
	const char *env[] = { dir, "RUNG_SIM_GPU_MIB=80000", "RUNG_SIM_STEP_MS=20", "RUNG_SIM_LOAD_MS=4",
		"RUNG_SIM_SAMPLE_MS=2", "RUNG_SIM_STATE=/nonexistent/gpus.json", NULL };
	const char *args[] = { config_file(flux, 2), NULL };
	pid_t pid = sim_spawn("rung-sim-trainer", args, env, outpath);
	int64_t deadline = util_mono_ms() + 10000;
	int saw = 0;
	while (!saw && util_mono_ms() < deadline) {
		char *o = read_text(outpath);
		saw = strstr(o, "Saved to ") != NULL;
		free(o);
		if (!saw) {
			struct timespec ts = { 0, 10 * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	TAP_OK(saw, "sigint: the run reached its first save");
	kill(pid, SIGINT);
	struct sim_result r = sim_wait_result(pid, outpath);
	TAP_OK(strstr(r.out, "Job stopped") != NULL, "sigint: Job stopped");
	TAP_INT_EQ(r.exit_code, 0, "sigint: exits 0");
	free(r.out);

	json_object_set_new(sect(flux, "train"), "steps", json_integer(12));
	const char *args2[] = { config_file(flux, 2), NULL };
	pid = sim_spawn("rung-sim-trainer", args2, env, outpath);
	r = sim_wait_result(pid, outpath);
	TAP_OK(strstr(r.out, "#### IMPORTANT RESUMING FROM ") && strstr(r.out, "Found step ") &&
		!strstr(r.out, "Generating baseline samples"), "resume: from the last save, no baseline sample");
	TAP_INT_EQ(r.exit_code, 0, "resume: completes");
	free(r.out);
	json_decref(flux);
}

int main(void)
{
	const char *b = getenv("RUNG_SIM_BIN_DIR");
	if (b && *b)
		bindir = b;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rung-test-sim-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_nvidia_smi();
	test_estimates();
	test_runs();
	test_dirty_gpu();
	test_sigint_and_resume();
	char *cmd = xasprintf("rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	free(cmd);
	return TAP_DONE();
}
