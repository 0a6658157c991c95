/* Tests for sim/torch_trainer.py, the PyTorch stand-in for AI Toolkit (docs/GPU.md): its config
 * handling (RUNG_TORCH_PLAN=1, needs python3 only) and, on the CPU with its tiny network (needs
 * torch), the lines it prints, read back by `rungctl classify` (rung's own scanner and classifier):
 * a success, a resume, and out-of-memory in load, sampling and training under RUNG_GPU_FAKE's
 * counted cap. Prints `ok - ... # SKIP` lines where python3 or torch is missing (CI without torch).
 * Also reads back the logs of the H200 device runs (docs/gpu-results/h200-*): each must classify
 * as rungd stored it there, so the scanner keeps reading real-CUDA output right. */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jpath.h"
#include "tap.h"
#include "util.h"

static char tmpdir[256];
static char py_any[256];   /* a python3, for the plan checks */
static char py_torch[256]; /* a python3 that imports torch, for the runs */
static int run_no;
static const char *card_env; /* "RUNG_GPU_MEMORY_MIB=N" for the next runs (rung-worker --gpu-memory-mib), or NULL */

/* The file's text, "" when it cannot be read. */
static char *read_text(const char *path)
{
	char *t = util_read_file(path, NULL);

	return t ? t : xstrdup("");
}

/* Runs ARGV with ENV ("K=V" added to ours), stdin from IN (or /dev/null), stdout+stderr to OUT.
 * Returns the exit code, 128+signal when killed, -1 when it could not start. */
static int run_cmd(const char *const *argv, const char *const *env, const char *in, const char *out)
{
	pid_t pid = fork();
	int st = 0;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fi = open(in ? in : "/dev/null", O_RDONLY);
		if (fo < 0 || fi < 0)
			_exit(126);
		dup2(fi, 0);
		dup2(fo, 1);
		dup2(fo, 2);
		for (size_t i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int find_python(const char *code, char *out, size_t cap)
{
	const char *cands[] = { getenv("RUNG_PYTHON"), "python3", "/usr/bin/python3" };
	char log[512];

	snprintf(log, sizeof log, "%s/probe.log", tmpdir);
	for (size_t i = 0; i < ARRAY_LEN(cands); i++) {
		if (!cands[i] || !*cands[i])
			continue;
		const char *argv[] = { cands[i], "-c", code, NULL };
		if (run_cmd(argv, NULL, NULL, log) == 0) {
			snprintf(out, cap, "%s", cands[i]);
			return 1;
		}
	}
	return 0;
}

/* A tiny AI Toolkit image config: flux arch, the given batch, checkpointing, buckets, sample size
 * and steps; steps 6, save and sample every 3. Written to a new file; returns its path (heap). */
struct cfg {
	const char *name;
	int batch, ckpt, steps, sample_px, sample_steps, frames, sampling;
	const char *buckets; /* JSON array text */
};

static char *write_cfg(const struct cfg *c)
{
	char *path = xasprintf("%s/cfg%d.json", tmpdir, ++run_no);
	json_error_t e;
	json_t *buckets = json_loads(c->buckets ? c->buckets : "[512, 1024]", 0, &e);
	json_t *doc = json_pack(
		"{s:s, s:{s:s, s:[{s:s, s:s, s:{s:i}, s:[{s:s, s:o, s:i}], s:{s:i, s:i, s:i, s:b, s:f, s:b}, "
		"s:{s:s, s:b}, s:{s:i, s:i, s:i, s:i, s:i}}]}}",
		"job", "extension", "config", "name", c->name, "process", "type", "sd_trainer", "training_folder",
		"output", "save", "save_every", 3, "datasets", "folder_path", "/data/images", "resolution", buckets,
		"num_frames", c->frames ? c->frames : 1, "train", "batch_size", c->batch, "steps", c->steps ? c->steps : 6,
		"gradient_accumulation", 1, "gradient_checkpointing", c->ckpt, "lr", 1e-4, "disable_sampling",
		!c->sampling, "model", "arch", c->frames > 1 ? "wan22_14b" : "flux", "quantize", 0, "sample",
		"sample_every", 3, "width", c->sample_px ? c->sample_px : 256, "height", c->sample_px ? c->sample_px : 256,
		"sample_steps", c->sample_steps ? c->sample_steps : 2, "num_frames", c->frames ? c->frames : 1);

	if (!doc || json_dump_file(doc, path, JSON_INDENT(1)) != 0) {
		printf("# could not write %s\n", path);
		abort();
	}
	json_decref(doc);
	return path;
}

struct run {
	int rc;
	char *out;     /* what it printed, heap */
	char *log;     /* the file holding it, heap */
	json_t *stats; /* its RUNG_TORCH_STATS line, or NULL */
	json_t *cls;   /* rungctl classify's answer, or NULL */
};

static void run_free(struct run *r)
{
	free(r->out);
	free(r->log);
	json_decref(r->stats);
	json_decref(r->cls);
	memset(r, 0, sizeof *r);
}

/* Runs the trainer on CONFIG on the CPU (tiny net, counted memory), cap CAP_MIB (0: none); then
 * `rungctl classify` on its output with its exit code. */
static struct run trainer(const char *config, double cap_mib)
{
	static int n;
	struct run r = { 0 };
	char *stats = xasprintf("%s/stats%d.jsonl", tmpdir, ++n);
	char *env_stats = xasprintf("RUNG_TORCH_STATS=%s", stats);
	char *env_dir = xasprintf("RUNG_TORCH_RUN_DIR=%s/run", tmpdir);
	char *env_cap = xasprintf("RUNG_GPU_CAP_MIB=%.3f", cap_mib);
	const char *env[] = { "RUNG_TORCH_DEVICE=cpu", "RUNG_GPU_FAKE=1", "RUNG_TORCH_NET=tiny", "OMP_NUM_THREADS=1",
			      "RUNG_TORCH_IMAGES_PER_BUCKET=16", "RUNG_SIM_STATE=", env_stats, env_dir,
			      cap_mib > 0 ? env_cap : "RUNG_GPU_CAP_MIB=", card_env ? card_env : "RUNG_GPU_MEMORY_MIB=", NULL };
	const char *argv[] = { py_torch, "sim/torch_trainer.py", config, NULL };
	char code[16], *cls_out = xasprintf("%s/cls%d.json", tmpdir, n);
	json_error_t e;

	unlink(stats);
	r.log = xasprintf("%s/out%d.log", tmpdir, n);
	r.rc = run_cmd(argv, env, NULL, r.log);
	r.out = read_text(r.log);
	char *s = read_text(stats), *nl = strrchr(s, '\n');
	if (nl) {
		*nl = '\0';
		nl = strrchr(s, '\n');
		r.stats = json_loads(nl ? nl + 1 : s, 0, &e);
	}
	free(s);
	snprintf(code, sizeof code, "%d", r.rc > 255 ? 255 : r.rc);
	const char *cargv[] = { "bin/rungctl", "classify", "--config", config, "--exit-code", code, NULL };
	if (run_cmd(cargv, NULL, r.log, cls_out) == 0)
		r.cls = json_load_file(cls_out, 0, &e);
	if (!r.cls || !r.stats)
		printf("# trainer rc=%d, output:\n%s\n", r.rc, r.out);
	free(cls_out);
	free(stats);
	free(env_stats);
	free(env_dir);
	free(env_cap);
	return r;
}

static double peak(const struct run *r, const char *phase)
{
	const json_t *p = json_object_get(json_object_get(json_object_get(r->stats, "peaks"), phase), "allocated_mib");
	return json_is_number(p) ? json_number_value(p) : -1;
}

static const char *cls_of(const struct run *r)
{
	return jpath_str(r->cls, "class", "(none)");
}

static void test_plan(void)
{
	const char *cfg = "{\"config\": {\"name\": \"p\", \"process\": [{\"train\": {\"batch_size\": 4, "
			  "\"gradient_accumulation\": 2, \"gradient_checkpointing\": false, \"disable_sampling\": true}, "
			  "\"model\": {\"arch\": \"wan22_14b:t2v\", \"low_vram\": true}, "
			  "\"datasets\": [{\"resolution\": [512, 1024, 768], \"num_frames\": 81, \"batch_size\": 2}, "
			  "{\"resolution\": 512, \"num_frames\": 41}], \"sample\": {\"width\": 832, \"height\": 480, "
			  "\"sample_steps\": 25, \"samples\": [{\"width\": 1280, \"num_frames\": 81}, {}]}}]}}";
	const char *bad = "{\"config\": {\"name\": \"p\", \"process\": [{\"train\": {\"gradient_accumulation\": 2, "
			  "\"gradient_accumulation_steps\": 2}}]}}";
	char *path = xasprintf("%s/plan.json", tmpdir), *badp = xasprintf("%s/bad.json", tmpdir);
	char *outp = xasprintf("%s/plan.out", tmpdir);
	const char *env[] = { "RUNG_TORCH_PLAN=1", NULL };
	json_error_t e;
	FILE *f = fopen(path, "w");

	if (!*py_any) {
		printf("ok - plan: config handling # SKIP python3 not found\n");
		goto out;
	}
	fputs(cfg, f);
	fclose(f);
	f = fopen(badp, "w");
	fputs(bad, f);
	fclose(f);
	const char *argv[] = { py_any, "sim/torch_trainer.py", path, NULL };
	TAP_INT_EQ(run_cmd(argv, env, NULL, outp), 0, "plan: exits 0");
	char *txt = read_text(outp);
	json_t *pl = json_loads(txt, 0, &e);
	TAP_STR_EQ(jpath_str(pl, "arch", NULL), "wan22_14b", "plan: arch without its :tag");
	json_t *b0 = json_object_get(json_array_get(json_object_get(pl, "datasets"), 0), "buckets");
	TAP_INT_EQ(json_integer_value(json_array_get(b0, 0)), 1024, "plan: largest bucket first");
	TAP_INT_EQ(json_array_size(b0), 3, "plan: every bucket kept");
	TAP_INT_EQ(jpath_int(json_array_get(json_object_get(pl, "datasets"), 0), "batch", 0), 2,
		   "plan: datasets[].batch_size overrides train.batch_size");
	TAP_INT_EQ(jpath_int(json_array_get(json_object_get(pl, "datasets"), 1), "batch", 0), 4,
		   "plan: train.batch_size otherwise");
	TAP_INT_EQ(json_integer_value(json_array_get(json_object_get(pl, "latent_frames"), 0)), 21,
		   "plan: 81 frames are 21 latent frames (Wan: 4n+1)");
	TAP_INT_EQ(json_integer_value(json_array_get(json_object_get(pl, "latent_frames"), 1)), 11,
		   "plan: 41 frames are 11 latent frames");
	TAP_INT_EQ(jpath_int(pl, "grad_accum", 0), 2, "plan: gradient_accumulation");
	TAP_OK(json_is_false(json_object_get(pl, "gradient_checkpointing")), "plan: gradient_checkpointing off");
	TAP_OK(json_is_false(json_object_get(pl, "sampling")) && json_is_false(json_object_get(pl, "baseline")),
	       "plan: train.disable_sampling turns off every sample, the baseline too");
	json_t *s0 = json_array_get(json_object_get(pl, "samples"), 0), *s1 = json_array_get(json_object_get(pl, "samples"), 1);
	TAP_OK(jpath_int(s0, "width", 0) == 1280 && jpath_int(s0, "height", 0) == 480 && jpath_int(s0, "steps", 0) == 25,
	       "plan: samples[] items override sample.* key by key");
	TAP_OK(jpath_int(s1, "width", 0) == 832 && jpath_int(s1, "frames", 0) == 1, "plan: an empty item takes sample.*");
	TAP_OK(json_number_value(json_object_get(pl, "offload")) == 0.5, "plan: low_vram offloads half the blocks");
	json_decref(pl);
	free(txt);

	const char *bargv[] = { py_any, "sim/torch_trainer.py", badp, NULL };
	TAP_OK(run_cmd(bargv, env, NULL, outp) != 0, "plan: both accumulation keys above 1 fail");
	txt = read_text(outp);
	TAP_OK(strstr(txt, "mutually exclusive") != NULL, "plan: ... saying they are mutually exclusive");
	free(txt);
out:
	free(path);
	free(badp);
	free(outp);
}

/* Returns the first run (batch 1, checkpointing on) for test_oom's measurements; the caller frees it. */
static struct run test_success_and_resume(void)
{
	struct cfg c = { .name = "t_ok", .batch = 1, .ckpt = 1, .sampling = 1 };
	char *cfg = write_cfg(&c);
	struct run r = trainer(cfg, 0);
	static const char *const lines[] = { "Running 1 job", "# Running job: t_ok", "Loading transformer",
		"Loading text encoder", "Loading VAE", "Model Loaded", "Bucket sizes for /data/images:",
		"Generating baseline samples before training", "Generating Samples: 100%|", "t_ok: 100%|",
		"lr: 1.0e-04 loss: ", "Saving at step 3", "Result:", " - 1 completed job", NULL };

	TAP_INT_EQ(r.rc, 0, "success: exit 0");
	for (size_t i = 0; lines[i]; i++) {
		char name[160];
		snprintf(name, sizeof name, "success: prints \"%s\"", lines[i]);
		TAP_OK(strstr(r.out, lines[i]) != NULL, name);
	}
	TAP_STR_EQ(cls_of(&r), "success", "success: rungctl classify: success");
	TAP_STR_EQ(jpath_str(r.cls, "facts.phase", NULL), "done", "success: scanner phase done");
	TAP_INT_EQ(jpath_int(r.cls, "facts.last_step", -1), 6, "success: scanner read the bar to step 6");
	TAP_INT_EQ(jpath_int(r.cls, "facts.total_steps", -1), 6, "success: ... of 6");
	TAP_STR_EQ(jpath_str(r.stats, "outcome", NULL), "ok", "success: stats outcome ok");
	TAP_OK(peak(&r, "load") > 0 && peak(&r, "train") > peak(&r, "load") && peak(&r, "baseline_sample") > 0 &&
	       peak(&r, "save") > 0, "success: counted peaks for load < train, baseline sample, save");
	struct run first = r;
	free(cfg);

	c.steps = 8; /* same name: resumes from the newest step checkpoint, step 3 (the last step saves the final file) */
	cfg = write_cfg(&c);
	r = trainer(cfg, 0);
	TAP_INT_EQ(r.rc, 0, "resume: exit 0");
	TAP_OK(strstr(r.out, "#### IMPORTANT RESUMING FROM ") != NULL, "resume: prints AI Toolkit's resume line");
	TAP_INT_EQ(jpath_int(r.cls, "facts.signatures.resuming", 0), 1, "resume: scanner counts it");
	TAP_INT_EQ(jpath_int(r.cls, "facts.first_step", -1), 3, "resume: first bar reading at the checkpoint's step");
	TAP_OK(strstr(r.out, "Generating baseline samples") == NULL, "resume: no baseline sample");
	run_free(&r);
	free(cfg);
	return first;
}

/* B: the uncapped batch-1 checkpointed run of test_success_and_resume. Each capped run has a name of its
 * own: the same name would resume from the uncapped run's checkpoint. */
static void test_oom(struct run b)
{
	struct cfg heavy = { .name = "t_heavy", .batch = 4, .ckpt = 0, .sampling = 1 };
	struct cfg ck = { .name = "t_ck", .batch = 4, .ckpt = 1, .sampling = 1 };
	struct cfg b1 = { .name = "t_b1", .batch = 1, .ckpt = 1, .sampling = 1 };
	struct cfg big_sample = { .name = "t_bigsample", .batch = 1, .ckpt = 1, .sampling = 1, .sample_px = 2048 };
	char *ch = write_cfg(&heavy), *cc = write_cfg(&ck), *cs = write_cfg(&big_sample);
	struct run h = trainer(ch, 0), k = trainer(cc, 0), s = trainer(cs, 0), r;
	double th = peak(&h, "train"), tk = peak(&k, "train"), tb = peak(&b, "train");

	printf("# train peaks (MiB): batch 4 no ckpt %.1f, batch 4 ckpt %.1f, batch 1 ckpt %.1f; big sample %.1f\n",
	       th, tk, tb, peak(&s, "baseline_sample"));
	TAP_OK(tk > 0 && th > tk, "levers: gradient checkpointing lowers the training peak");
	TAP_OK(tb > 0 && tk > tb, "levers: batch 1 lowers it again");
	TAP_OK(peak(&s, "baseline_sample") > peak(&b, "baseline_sample"), "levers: a larger sample costs more");

	/* A cap between the heavy and the checkpointed step: training OOMs, 3 skips then the abort. */
	double cap = (th + tk) / 2;
	TAP_OK(peak(&h, "baseline_sample") < cap && peak(&h, "load") < cap, "train OOM: load and baseline fit the cap");
	heavy.name = "t_heavy_capped";
	ck.name = "t_ck_capped";
	free(ch);
	free(cc);
	ch = write_cfg(&heavy);
	cc = write_cfg(&ck);
	r = trainer(ch, cap);
	TAP_INT_EQ(r.rc, 1, "train OOM: exit 1");
	TAP_OK(strstr(r.out, "# OOM during training step, skipping batch 1/3 #") &&
	       strstr(r.out, "# OOM during training step, skipping batch 3/3 #"), "train OOM: AI Toolkit's skip lines");
	TAP_OK(strstr(r.out, "Error running job: OOM during training step 3 times in a row, aborting training") != NULL,
	       "train OOM: the abort after 3 in a row");
	TAP_STR_EQ(cls_of(&r), "oom_train_early", "train OOM: rungctl classify: oom_train_early");
	TAP_INT_EQ(jpath_int(r.cls, "facts.signatures.skipped_batch_oom", 0), 3, "train OOM: 3 skipped batches");
	TAP_OK(jpath_int(r.cls, "facts.signatures.oom_3_in_row", 0) >= 1, "train OOM: oom_3_in_row");
	TAP_STR_EQ(jpath_str(r.stats, "outcome", NULL), "oom", "train OOM: stats outcome oom");
	run_free(&r);
	r = trainer(cc, cap);
	TAP_INT_EQ(r.rc, 0, "train OOM: the checkpointed config fits the same cap (rung 1)");
	run_free(&r);
	/* the same limit as the worker's card size (--gpu-memory-mib), no cap of its own: the same OOM */
	{
		char *env = xasprintf("RUNG_GPU_MEMORY_MIB=%.3f", cap);
		heavy.name = "t_heavy_card";
		free(ch);
		ch = write_cfg(&heavy);
		card_env = env;
		r = trainer(ch, 0);
		card_env = NULL;
		TAP_STR_EQ(cls_of(&r), "oom_train_early", "card: RUNG_GPU_MEMORY_MIB holds the trainer as the cap did");
		const json_t *c = json_object_get(r.stats, "cap_mib");
		double got = json_is_number(c) ? json_number_value(c) : -1;
		TAP_OK(got > cap - 0.2 && got < cap + 0.2, "card: the run's cap is the card's size");
		run_free(&r);
		free(env);
	}

	/* Sampling: a cap above everything but the large baseline sample. */
	double rest = peak(&s, "train") > peak(&s, "load") ? peak(&s, "train") : peak(&s, "load");
	rest = peak(&s, "save") > rest ? peak(&s, "save") : rest;
	cap = (rest + peak(&s, "baseline_sample")) / 2;
	TAP_OK(peak(&s, "baseline_sample") > rest, "sample OOM: the large sample is the peak");
	struct cfg s2 = big_sample;
	s2.name = "t_bigsample2";
	char *cs2 = write_cfg(&s2);
	r = trainer(cs2, cap);
	TAP_INT_EQ(r.rc, 1, "sample OOM: exit 1");
	TAP_OK(strstr(r.out, "OutOfMemoryError: CUDA out of memory. Tried to allocate ") != NULL,
	       "sample OOM: the exception's own line in Python's traceback");
	TAP_OK(strstr(r.out, "Traceback (most recent call last):") != NULL, "sample OOM: a Python traceback");
	TAP_OK(strstr(r.out, "Error running job: CUDA out of memory.") != NULL, "sample OOM: AI Toolkit's error line");
	TAP_OK(strstr(r.out, " - 1 failure") != NULL, "sample OOM: the Result block");
	TAP_STR_EQ(cls_of(&r), "oom_sample", "sample OOM: rungctl classify: oom_sample");
	TAP_STR_EQ(jpath_str(r.cls, "facts.oom_phase", NULL), "baseline_sample", "sample OOM: in the baseline sample");
	long long total = jpath_int(r.cls, "facts.oom.total_capacity_mib", -1);
	TAP_OK(total >= (long long)cap - 1 && total <= (long long)cap + 1, "sample OOM: capacity in the message is the cap");
	run_free(&r);

	/* Load: a cap under the weights. */
	char *cb = write_cfg(&b1);
	r = trainer(cb, peak(&b, "load") / 2);
	TAP_INT_EQ(r.rc, 1, "load OOM: exit 1");
	TAP_STR_EQ(cls_of(&r), "oom_load", "load OOM: rungctl classify: oom_load");
	TAP_INT_EQ(jpath_int(r.cls, "facts.signatures.cuda_oom", 0) >= 1, 1, "load OOM: cuda_oom signature");
	run_free(&r);

	run_free(&h);
	run_free(&k);
	run_free(&b);
	run_free(&s);
	free(ch);
	free(cc);
	free(cb);
	free(cs);
	free(cs2);
}

/* The device run's saved attempts (real CUDA memory, an H200 capped by
 * set_per_process_memory_fraction): `rungctl classify` on each log and config gives the class and
 * the OOM phase rungd stored during the run (gpu-check.json). Needs no torch. */
static void test_device_logs(const char *dir)
{
	char *path = xasprintf("%s/gpu-check.json", dir);
	json_error_t e;
	json_t *res = json_load_file(path, 0, &e), *jobs = json_object_get(res, "jobs"), *job;
	const char *name;
	int seen = 0, ooms = 0;

	char *t0 = xasprintf("device run %s: a real-CUDA run whose verdict was ok", dir);
	TAP_OK(res != NULL && json_is_false(json_object_get(res, "fake")) && json_is_true(json_object_get(res, "ok")), t0);
	free(t0);
	json_object_foreach(jobs, name, job) {
		size_t i;
		json_t *a;
		json_array_foreach(json_object_get(job, "attempts"), i, a) {
			const char *id = jpath_str(a, "id", ""), *want = jpath_str(a, "class", "?");
			const char *outcome = jpath_str(a, "outcome", "");
			char *log = xasprintf("%s/attempts/%s/trainer.log", dir, id);
			char *cfg = xasprintf("%s/attempts/%s/config.json", dir, id);
			char *out = xasprintf("%s/device-%s.json", tmpdir, id);
			const char *code = strcmp(outcome, "succeeded") ? "1" : "0";
			const char *argv[] = { "bin/rungctl", "classify", "--config", cfg, "--exit-code", code, NULL };
			json_t *got = run_cmd(argv, NULL, log, out) == 0 ? json_load_file(out, 0, &e) : NULL;
			const json_t *phase = json_object_get(a, "oom_phase");
			char *what = xasprintf("device run: %s attempt %lld (id %s)", name,
					       (long long)json_integer_value(json_object_get(a, "number")), id);
			char *t1 = xasprintf("%s classifies as rungd stored it (%s)", what, want);
			char *t2 = xasprintf("%s: its OOM phase", what);

			TAP_STR_EQ(jpath_str(got, "class", "(none)"), want, t1);
			if (json_is_string(phase)) {
				TAP_STR_EQ(jpath_str(got, "facts.oom_phase", "(none)"), json_string_value(phase), t2);
				ooms++;
			}
			free(what);
			free(t1);
			free(t2);
			seen++;
			json_decref(got);
			free(log);
			free(cfg);
			free(out);
		}
	}
	char *t = xasprintf("device run: %d attempts read back, %d of them OOMs", seen, ooms);
	TAP_OK(seen >= 4 && ooms >= 2, t);
	free(t);
	json_decref(res);
	free(path);
}

int main(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmpdir, sizeof tmpdir, "%s/torch_trainer.XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		printf("not ok - mkdtemp\n");
		return 1;
	}
	find_python("import json", py_any, sizeof py_any);
	test_plan();
	if (access("bin/rungctl", X_OK) != 0) {
		printf("not ok - bin/rungctl is missing (make all)\n");
		return 1;
	}
	test_device_logs("docs/gpu-results/h200-2026-12-04");
	test_device_logs("docs/gpu-results/h200-2026-12-04-held");
	if (!find_python("import torch", py_torch, sizeof py_torch)) {
		printf("ok - torch trainer runs # SKIP no python3 imports torch (apt-get install python3-torch)\n");
		return TAP_DONE();
	}
	printf("# python with torch: %s\n", py_torch);
	test_oom(test_success_and_resume());
	char *rm = xasprintf("rm -rf '%s'", tmpdir);
	if (system(rm) != 0)
		printf("# could not remove %s\n", tmpdir);
	free(rm);
	return TAP_DONE();
}
