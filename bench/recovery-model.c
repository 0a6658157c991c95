/* bin/bench/recovery-model (`make bench-recovery`): the memory model's benchmark (issue 12). A
 * deterministic, in-process fleet: jobs drawn with a fixed seed run on simulated GPUs of 16-80 GiB
 * under a memory law and a phase/time model; each attempt's FACTS go through the real policy_decide
 * with CTXs shaped like rungd's. Three ways (blind ladder, memory model, oracle) over two memory
 * laws; prints the table and writes bench/results/recovery.md. It is the policy, not the HTTP path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpath.h"
#include "ladder.h"
#include "memmodel.h"
#include "policy.h"
#include "util.h"

#define P0 "config.process[0]"
#define NJOBS 160
#define MAX_ATTEMPTS 20
#define SEED 12u
#define DRIVER_MIB 12
#define NSIZES 4

static const int GPU_MIB[NSIZES] = { 16376, 24564, 49140, 81559 };
#define GPUS_PER_SIZE 4

/* Per arch, as sim/rung-sim-trainer.c documents them: transformer, text encoder, VAE (MiB), activations
 * per 1024x1024 item per latent frame, sampling activations per 1024x1024 per latent frame. */
struct arch {
	const char *name;
	double t, e, v, act, samp;
	int video;
};

static const struct arch ARCHS[] = {
	{ "flux", 23000, 9500, 160, 2400, 2800, 0 },
	{ "sdxl", 5000, 1600, 160, 1200, 1500, 0 },
	{ "qwen_image", 39000, 15800, 250, 3000, 3500, 0 },
	{ "wan22_14b", 27000, 10800, 500, 1600, 1200, 1 },
	{ "wan22_5b", 9600, 10800, 1400, 900, 700, 1 },
};

/* What one config needs per phase (MiB) under a law. */
struct need {
	double load, baseline, train, sample, save;
};

struct cfgv { /* the settings the laws read, straight from the config */
	const struct arch *a;
	double r1, b, f, sw, sh, sf, ss;
	int ck, sampling, q, lv, off;
};

static unsigned rng_state;

static unsigned rnd(void)
{
	rng_state = rng_state * 1103515245u + 12345u;
	return (rng_state >> 8) & 0xffffff;
}

static int pick(int n)
{
	return (int)(rnd() % (unsigned)n);
}

static const struct arch *arch_of(const json_t *cfg)
{
	const char *n = jpath_str(cfg, P0 ".model.arch", "sdxl");
	size_t i;

	for (i = 0; i < ARRAY_LEN(ARCHS); i++)
		if (!strcmp(ARCHS[i].name, n))
			return &ARCHS[i];
	return &ARCHS[1];
}

static struct cfgv read_cfg(const json_t *c)
{
	struct cfgv v;
	const json_t *d = jpath_get(c, P0 ".datasets[0]");

	v.a = arch_of(c);
	v.r1 = (double)ladder_largest_bucket(c);
	v.b = (double)jpath_int(d, "batch_size", jpath_int(c, P0 ".train.batch_size", 1));
	if (jpath_int(c, P0 ".train.batch_size", 1) > v.b)
		v.b = (double)jpath_int(c, P0 ".train.batch_size", 1);
	v.f = (double)jpath_int(d, "num_frames", 1);
	v.sw = (double)jpath_int(c, P0 ".sample.width", 512);
	v.sh = (double)jpath_int(c, P0 ".sample.height", 512);
	v.sf = (double)jpath_int(c, P0 ".sample.num_frames", 1);
	v.ss = (double)jpath_int(c, P0 ".sample.sample_steps", 20);
	v.ck = jpath_bool(c, P0 ".train.gradient_checkpointing", 1);
	v.sampling = !jpath_bool(c, P0 ".train.disable_sampling", 0);
	v.q = jpath_bool(c, P0 ".model.quantize", 0);
	v.lv = jpath_bool(c, P0 ".model.low_vram", 0);
	v.off = jpath_bool(c, P0 ".model.layer_offloading", 0);
	return v;
}

static double lf(double f)
{
	return f <= 1 ? 1.0 : floor((f - 1) / 4) + 1;
}

/* Law "sim": the formula of sim/rung-sim-trainer.c (linear in pixels, weights shrink with
 * quantize/low_vram/offloading, no checkpointing x4, sampling x(0.8 + 0.01 steps)). */
static struct need law_sim(const struct cfgv *v)
{
	struct need n;
	double t = v->a->t * (v->q ? 0.55 : 1) * (v->lv ? 0.85 : 1) * (v->off ? 0.1 : 1);
	double e = v->a->e * (v->q ? 0.55 : 1) * (v->lv ? 0.5 : 1) * (v->off ? 0.1 : 1);
	double base = t + e + v->a->v + 512, lora = 200 + 0.02 * v->a->t;
	double act = v->a->act * v->b * (v->r1 / 1024) * (v->r1 / 1024) * lf(v->f) * (v->ck ? 1 : 4);
	double sact = v->a->samp * (v->sw / 1024) * (v->sh / 1024) * lf(v->sf) * (0.8 + 0.01 * v->ss);

	n.load = t + e + v->a->v + 512;
	n.train = base + lora + act;
	n.sample = v->sampling ? base + lora + sact : 0;
	n.baseline = v->sampling ? base + sact : 0;
	n.save = base + lora + 256;
	return n;
}

/* Law "attention": a fixed load cost per model that quantization and offloading cut less (x0.7,
 * x0.6) and low_vram not at all; activations quadratic in the pixels of an item (attention without
 * flash kernels), x2.5 without checkpointing, x0.8 with low_vram; sampling quadratic too, steps free. */
static struct need law_attention(const struct cfgv *v)
{
	struct need n;
	double load = (v->a->t + v->a->e + v->a->v) * (v->q ? 0.7 : 1) * (v->off ? 0.6 : 1) + 900;
	double u = (v->r1 / 1024) * (v->r1 / 1024) * lf(v->f), us = (v->sw / 1024) * (v->sh / 1024) * lf(v->sf);
	double act = v->a->act * v->b * (u + 0.6 * u * u) * (v->ck ? 1 : 2.5) * (v->lv ? 0.8 : 1);

	n.load = load;
	n.train = load + 300 + act;
	n.sample = v->sampling ? load + 300 + v->a->samp * (us + 0.6 * us * us) : 0;
	n.baseline = v->sampling ? n.sample - 300 : 0;
	n.save = load + 500;
	return n;
}

static const struct law {
	const char *name, *what;
	struct need (*need)(const struct cfgv *);
} LAWS[] = {
	{ "sim", "sim/rung-sim-trainer.c's formula: linear in pixels x batch x latent frames", law_sim },
	{ "attention", "quadratic in pixels per item, fixed load cost per model", law_attention },
};

/* ---- time model (the same for every law and way) ---- */

static double xt_of(const struct cfgv *v)
{
	return (v->r1 / 1024) * (v->r1 / 1024) * v->b * lf(v->f);
}

static double load_s(const struct need *n)
{
	return 40 + 3 * n->load / 1024;
}

static double step_s(const struct cfgv *v)
{
	return (0.4 + 1.2 * xt_of(v)) * (v->ck ? 1.25 : 1) * (v->lv ? 1.15 : 1) * (v->off ? 1.6 : 1);
}

static double sample_s(const struct cfgv *v)
{
	return 2 * v->ss * 0.03 * (1 + (v->sw / 1024) * (v->sh / 1024) * lf(v->sf));
}

/* ---- one attempt ---- */

enum fault { F_NONE, F_ENV, F_NOT_OOM };

static json_t *oom_facts(const char *phase, double need, int gpu, long long steps_done, long long total, double secs, double peak,
			 const char *peak_phase)
{
	long long avail = gpu - DRIVER_MIB, freem = 20 + (long long)need % 40, inuse = avail - freem;
	long long unalloc = 100 + (long long)need % 150, alloc = inuse - 400 - unalloc, tried = (long long)need - inuse;

	return json_pack("{s:i, s:n, s:b, s:s, s:s, s:o, s:o, s:I, s:I, s:{s:i}, s:{s:I, s:i, s:I, s:I, s:[]},"
			 " s:s, s:{s:s, s:i, s:i, s:[]}, s:n, s:I, s:[s], s:{s:I, s:s, s:n}}",
			 "exit_code", 1, "signal", "cancelled", 0, "phase", phase, "oom_phase", phase, "first_step",
			 steps_done > 0 ? json_integer(1) : json_null(), "last_step",
			 steps_done > 0 ? json_integer(steps_done) : json_null(), "steps_done", (json_int_t)steps_done,
			 "total_steps", (json_int_t)total, "signatures", "cuda_oom", 1, "oom", "tried_to_allocate_mib",
			 (json_int_t)(tried < 2 ? 2 : tried), "total_capacity_mib", gpu, "free_mib", (json_int_t)freem,
			 "allocated_by_pytorch_mib", (json_int_t)alloc, "processes", "error", "CUDA out of memory",
			 "gpu_before", "uuid", "GPU", "memory_total_mib", gpu, "memory_used_mib", DRIVER_MIB, "processes",
			 "gpu_after", "duration_ms", (json_int_t)(secs * 1000), "log_tail", "torch.OutOfMemoryError",
			 "peak", "mib", (json_int_t)(peak + DRIVER_MIB), "phase", peak_phase, "step");
}

/* Runs config on a GPU of gpu MiB: FACTS (new) and *secs of GPU time. */
static json_t *run_attempt(const struct law *law, const json_t *cfg, int gpu, enum fault fault, double *secs)
{
	struct cfgv v = read_cfg(cfg);
	struct need n = law->need(&v);
	double avail = gpu - DRIVER_MIB, t = load_s(&n), peak = n.load, smp = sample_s(&v), st = step_s(&v);
	long long steps = jpath_int(cfg, P0 ".train.steps", 1000), every = jpath_int(cfg, P0 ".sample.sample_every", 250);
	const char *pk = "load";

	if (fault == F_ENV) {
		*secs = t / 2;
		return json_pack("{s:i, s:n, s:b, s:s, s:s, s:n, s:n, s:i, s:{s:i, s:i}, s:n, s:s,"
				 " s:{s:s, s:i, s:i, s:[{s:i, s:i}]}, s:I, s:[s]}",
				 "exit_code", 1, "signal", "cancelled", 0, "phase", "load", "oom_phase", "load", "first_step",
				 "last_step", "steps_done", 0, "signatures", "cuda_oom", 1, "zero_bytes_free", 1, "oom", "error",
				 "CUDA out of memory", "gpu_before", "uuid", "GPU", "memory_total_mib", gpu, "memory_used_mib",
				 9012, "processes", "pid", 4242, "used_mib", 9000, "duration_ms", (json_int_t)(*secs * 1000),
				 "log_tail", "0 bytes is free");
	}
	if (fault == F_NOT_OOM) {
		*secs = 20;
		return json_pack("{s:i, s:n, s:b, s:s, s:n, s:n, s:n, s:i, s:{s:i}, s:n, s:s, s:I, s:[s]}", "exit_code", 1,
				 "signal", "cancelled", 0, "phase", "load", "oom_phase", "first_step", "last_step",
				 "steps_done", 0, "signatures", "file_not_found", 1, "oom", "error",
				 "[Errno 2] No such file or directory: '/d'", "duration_ms", (json_int_t)20000, "log_tail",
				 "FileNotFoundError");
	}
	if (n.load > avail) {
		*secs = t / 2;
		return oom_facts("load", n.load, gpu, 0, steps, *secs, n.load * 0.8, "load");
	}
	if (v.sampling) {
		t += smp;
		if (n.baseline > avail) {
			*secs = t;
			return oom_facts("baseline_sample", n.baseline, gpu, 0, steps, t, peak, pk);
		}
		if (n.baseline > peak) {
			peak = n.baseline;
			pk = "baseline_sample";
		}
	}
	if (n.train > avail) {
		*secs = t + 2 * st;
		return oom_facts("train", n.train, gpu, 2, steps, *secs, peak, pk);
	}
	if (n.train > peak) {
		peak = n.train;
		pk = "train";
	}
	if (v.sampling && every > 0 && every < steps) {
		if (n.sample > avail) {
			*secs = t + every * st;
			return oom_facts("sample", n.sample, gpu, every, steps, *secs, peak, pk);
		}
		if (n.sample > peak) {
			peak = n.sample;
			pk = "sample";
		}
		t += (double)(steps / every) * smp;
	}
	t += steps * st;
	*secs = t;
	return json_pack("{s:i, s:n, s:b, s:s, s:n, s:i, s:I, s:I, s:I, s:{}, s:n, s:n, s:I, s:[s], s:{s:I, s:s, s:n}}",
			 "exit_code", 0, "signal", "cancelled", 0, "phase", "done", "oom_phase", "first_step", 1,
			 "last_step", (json_int_t)steps, "steps_done", (json_int_t)steps, "total_steps", (json_int_t)steps,
			 "signatures", "oom", "error", "duration_ms", (json_int_t)(t * 1000), "log_tail", "Saved",
			 "peak", "mib", (json_int_t)(peak + DRIVER_MIB), "phase", pk, "step");
}

/* ---- the scenario ---- */

struct job {
	json_t *target;
	int size;        /* index into GPU_MIB of the GPU it is first leased */
	enum fault fault; /* on its first attempt */
};

static json_t *make_config(int id, const struct arch *a)
{
	static const int IMG_RES[][3] = { { 512, 0, 0 }, { 512, 768, 0 }, { 512, 768, 1024 }, { 768, 1024, 1280 }, { 1024, 1280, 1536 } };
	static const int VID_RES[][3] = { { 256, 0, 0 }, { 256, 512, 0 }, { 512, 768, 0 } };
	static const int BATCH[] = { 1, 1, 2, 4, 8 };
	static const int FRAMES[] = { 17, 33, 49, 81 };
	static const int SAMPLE[] = { 512, 768, 1024, 1280 };
	json_t *res = json_array(), *c;
	const int *r = a->video ? VID_RES[pick(3)] : IMG_RES[pick(5)];
	int k, frames = a->video ? FRAMES[pick(4)] : 1, ss = a->video ? SAMPLE[pick(2)] : SAMPLE[pick(4)];
	char name[32];

	for (k = 0; k < 3 && r[k]; k++)
		json_array_append_new(res, json_integer(r[k]));
	snprintf(name, sizeof(name), "job%d", id);
	c = json_pack("{s:s, s:{s:s, s:[{s:s, s:s, s:[{s:s, s:o, s:i}], s:{s:i, s:i, s:i, s:b, s:f, s:s, s:b},"
		      " s:{s:s, s:s, s:b, s:b}, s:{s:i, s:i, s:i, s:i, s:i, s:[s, s]}}]}}",
		      "job", "extension", "config", "name", name, "process", "type", "diffusion_trainer", "training_folder",
		      "output", "datasets", "folder_path", "/d", "resolution", res, "num_frames", frames, "train",
		      "batch_size", a->video ? BATCH[pick(3)] : BATCH[pick(5)], "steps", a->video ? 1500 : 2000,
		      "gradient_accumulation", 1, "gradient_checkpointing", pick(4) != 0, "lr", 1e-4, "optimizer",
		      "adamw8bit", "disable_sampling", 0, "model", "name_or_path", "x", "arch", a->name, "quantize",
		      pick(3) != 0, "low_vram", 0, "sample", "sample_every", 250, "width", ss, "height", ss,
		      "sample_steps", pick(2) ? 20 : 30, "num_frames", a->video ? frames : 1, "prompts", "a", "b");
	return c;
}

static struct job *make_jobs(void)
{
	struct job *jobs = calloc(NJOBS, sizeof(*jobs));
	int i;

	rng_state = SEED;
	for (i = 0; i < NJOBS; i++) {
		jobs[i].target = make_config(i, &ARCHS[pick((int)ARRAY_LEN(ARCHS))]);
		jobs[i].size = pick(NSIZES);
		jobs[i].fault = i % 23 == 5 ? F_ENV : i % 37 == 11 ? F_NOT_OOM : F_NONE;
		if (i % 29 == 7) { /* never fits: a single 2560 px bucket of 33-frame video, even on 80 GiB */
			jpath_set(jobs[i].target, P0 ".model.arch", json_string("wan22_14b"));
			jpath_set(jobs[i].target, P0 ".datasets[0].resolution", json_pack("[i]", 2560));
			jpath_set(jobs[i].target, P0 ".datasets[0].num_frames", json_integer(33));
			jpath_set(jobs[i].target, P0 ".sample.num_frames", json_integer(33));
		}
	}
	return jobs;
}

/* ---- the oracle: the config the blind way ends with, found without running anything ---- */

static const char *fail_class(const struct law *law, const json_t *cfg, int gpu)
{
	struct cfgv v = read_cfg(cfg);
	struct need n = law->need(&v);
	double avail = gpu - DRIVER_MIB;

	if (n.load > avail)
		return "oom_load";
	if (n.baseline > avail || n.sample > avail)
		return "oom_sample";
	if (n.train > avail)
		return "oom_train_early";
	return NULL;
}

/* The config that fits gpu after the class plans (NULL: none), then scaled up while steps fit. */
static json_t *oracle_config(const struct law *law, const json_t *target, int gpu, bool video)
{
	json_t *cur = json_deep_copy(target), *ch = json_array(), *ceil = json_object(), *next, *prev;
	const char *cls;
	const struct ladder_setting *s;
	bool stuck;

	while ((cls = fail_class(law, cur, gpu))) {
		if (!ladder_step(cls, video, cur, ch)) {
			json_decref(cur);
			cur = NULL;
			goto out;
		}
	}
	for (prev = NULL;; prev = next) {
		next = json_deep_copy(cur);
		s = ladder_scale_up(video, next, target, ceil, false, ch);
		stuck = s && prev && json_equal(prev, next); /* as the policy: a ceiling that does not move the step */
		json_decref(prev);
		if (!s || stuck) {
			json_decref(next);
			break;
		}
		if (fail_class(law, next, gpu)) { /* the value is the ceiling (frames then try the midpoint) */
			json_object_set_new(ceil, s->name, s->value(next));
			continue;
		}
		json_decref(cur);
		cur = next;
		next = NULL;
	}
out:
	json_decref(ch);
	json_decref(ceil);
	return cur;
}

/* ---- running a job through the policy ---- */

enum way { W_BLIND, W_MODEL, W_ORACLE };
static const char *const WAY_NAMES[] = { "blind ladder", "memory model", "oracle" };

/* Why a failed attempt ran: a fault (env or not_oom), a job's first config on a GPU (a first attempt
 * or one re-queued for a bigger GPU), a config after an OOM (descent), a scale-up step. */
enum cause { C_FAULT, C_FIRST, C_DESCENT, C_SCALE_UP, C_N };

struct tally {
	int jobs, succeeded, attempts, settings_given_up, env_reruns, not_oom_failed, started_lower, started_bigger, predicted_exhausted;
	double failed_s, total_s, failed_by[C_N];
};

/* Settings of the final config below the target's (memory-relevant, as the model sees them). */
static int given_up(const json_t *target, const json_t *final, bool video)
{
	json_t *t = memmodel_features(target, video ? "video" : "image"), *f = memmodel_features(final, video ? "video" : "image");
	static const char *const larger[] = { "res_max", "batch", "frames", "sample_px", "sample_steps" };
	static const char *const off[] = { "low_vram", "quantize", "offload" };
	int n = 0;
	size_t i;

	for (i = 0; i < ARRAY_LEN(larger); i++)
		n += jpath_int(f, larger[i], 0) < jpath_int(t, larger[i], 0);
	for (i = 0; i < ARRAY_LEN(off); i++)
		n += jpath_bool(f, off[i], 0) && !jpath_bool(t, off[i], 0);
	n += jpath_bool(t, "sampling", 0) && !jpath_bool(f, "sampling", 0);
	n += !jpath_bool(t, "grad_ckpt", 1) && jpath_bool(f, "grad_ckpt", 1);
	json_decref(t);
	json_decref(f);
	return n;
}

static bool excluded(const json_t *arr, const char *uuid)
{
	size_t i;
	json_t *x;

	json_array_foreach(arr, i, x)
		if (!strcmp(json_string_value(x) ? json_string_value(x) : "", uuid))
			return true;
	return false;
}

/* The GPU of the next attempt: the smallest size at least the job's and min_mib, not excluded. */
static int lease(int size, long long min_mib, const json_t *exclude, char *uuid, size_t cap)
{
	int s, k;

	for (s = size; s < NSIZES; s++) {
		if (GPU_MIB[s] < min_mib)
			continue;
		for (k = 0; k < GPUS_PER_SIZE; k++) {
			snprintf(uuid, cap, "GPU-%d-%d", GPU_MIB[s] / 1024, k);
			if (!excluded(exclude, uuid))
				return s;
		}
	}
	return -1;
}

/* The memory section of a CTX: newest first, same arch and class, at most 200, plus this job's. */
static json_t *memory_of(const json_t *history, const char *arch, int gpu, long long job_id)
{
	json_t *obs = json_array(), *o;
	size_t i, mine = 0, others = 0;

	/* as rung_memory_ctx_observations: the job's own and the newest of the class, 48 in all */
	json_array_foreach(history, i, o)
		mine += jpath_int(o, "job_id", -1) == job_id;
	json_array_foreach(history, i, o) {
		if (jpath_int(o, "job_id", -1) != job_id) {
			if (others + mine >= MEMMODEL_CTX_OBSERVATIONS || strcmp(jpath_str(o, "arch", ""), arch))
				continue;
			others++;
		}
		json_array_append(obs, o);
	}
	return json_pack("{s:s, s:i, s:o}", "arch", arch, "gpu_mib", gpu, "observations", obs);
}

static void run_job(const struct law *law, enum way way, int id, const struct job *job, json_t *history,
		    json_t *succeeded_configs, struct tally *t)
{
	bool video = jpath_int(job->target, P0 ".datasets[0].num_frames", 1) > 1;
	json_t *cur, *rstate = json_object(), *attempts = json_array(), *exclude = json_array(), *dec = NULL, *final = NULL;
	long long min_mib = 0;
	int n, size = job->size;
	char uuid[64], arch[64], *err = NULL;
	long long next_attempt_id = (long long)id * 100;

	memmodel_arch(job->target, arch, sizeof(arch));
	t->jobs++;
	cur = json_deep_copy(job->target);
	if (way == W_ORACLE) {
		int s;
		json_decref(cur);
		cur = NULL;
		for (s = size; s < NSIZES && !cur; s++) {
			cur = oracle_config(law, job->target, GPU_MIB[s], video);
			if (cur)
				size = s;
		}
		if (!cur) /* the oracle knows it never fits: nothing runs */
			goto out;
	}
	for (n = 1; n <= MAX_ATTEMPTS; n++) {
		json_t *ctx, *facts, *mem = NULL;
		double secs;
		int s = lease(size, min_mib, exclude, uuid, sizeof(uuid));
		const char *cls, *state;
		if (s < 0)
			break;
		while (way == W_MODEL && n == 1 && s >= 0) {
			json_t *ictx = json_pack("{s:{s:s, s:O}, s:{s:i}, s:{s:i}, s:o}", "job", "kind", video ? "video" : "image",
						 "target_config", job->target, "gpu", "memory_total_mib", GPU_MIB[s], "fleet",
						 "max_gpu_memory_mib", GPU_MIB[NSIZES - 1], "memory", memory_of(history, arch, GPU_MIB[s], id));
			json_t *init = policy_initial(ictx, &err);
			if (getenv("BENCH_TRACE") && id >= NJOBS / 2)
			{
				char *rg = json_dumps(json_object_get(init, "rungs"), JSON_COMPACT);
				fprintf(stderr, "%s job %d initial gpu %d: %s %s: %.300s\n", law->name, id, GPU_MIB[s],
					jpath_str(init, "action", "?"), rg ? rg : "-", jpath_str(init, "reason", ""));
				free(rg);
			}
			if (init && !strcmp(jpath_str(init, "action", ""), "start_lower")) {
				json_decref(cur);
				cur = json_deep_copy(json_object_get(init, "next_config"));
				t->started_lower++;
			}
			if (init && !strcmp(jpath_str(init, "action", ""), "requeue_bigger")) {
				min_mib = jpath_int(init, "constraints.min_gpu_memory_mib", 0);
				s = lease(size, min_mib, exclude, uuid, sizeof(uuid));
				t->started_bigger++;
			} else {
				json_decref(init);
				init = NULL;
			}
			json_decref(ictx);
			free(err);
			err = NULL;
			if (!init)
				break;
			json_decref(init);
		}
		if (s < 0)
			break;
		facts = run_attempt(law, cur, GPU_MIB[s], n == 1 ? job->fault : F_NONE, &secs);
		if (way == W_MODEL)
			mem = memory_of(history, arch, GPU_MIB[s], id);
		ctx = json_pack("{s:{s:i, s:s, s:O, s:O, s:{s:b, s:i, s:i}, s:O}, s:O, s:{s:I, s:i, s:i, s:s, s:i, s:O, s:s, s:O, s:I},"
				" s:{s:s, s:s, s:i, s:i}, s:{s:i}, s:b}",
				"job", "id", id, "kind", video ? "video" : "image", "target_config", job->target,
				"current_config", cur, "recovery", "scale_up", way != W_ORACLE, "max_attempts", MAX_ATTEMPTS,
				"max_env_retries", 3, "recovery_state", rstate, "attempts", attempts, "attempt", "id",
				(json_int_t)(next_attempt_id + n), "number", n, "worker_id", s * GPUS_PER_SIZE, "gpu_uuid", uuid,
				"gpu_memory_mib", GPU_MIB[s], "config", cur, "state", "ended", "facts", facts, "duration_ms",
				(json_int_t)(secs * 1000), "gpu", "uuid", uuid, "state", "ok", "memory_total_mib", GPU_MIB[s],
				"env_faults_in_window", 0, "fleet", "max_gpu_memory_mib", GPU_MIB[NSIZES - 1],
				"config_succeeded_before", 0);
		{
			char *key = json_dumps(cur, JSON_SORT_KEYS | JSON_COMPACT);
			if (json_object_get(succeeded_configs, key))
				json_object_set_new(ctx, "config_succeeded_before", json_true());
			free(key);
		}
		if (mem)
			json_object_set_new(ctx, "memory", mem);
		json_decref(dec);
		dec = policy_decide(ctx, &err);
		if (!dec) {
			fprintf(stderr, "policy_decide: %s\n", err ? err : "?");
			exit(1);
		}
		cls = jpath_str(dec, "class", "?");
		state = jpath_str(dec, "job_state", "?");
		t->attempts++;
		t->total_s += secs;
		if (strcmp(cls, "success")) {
			const char *prev = n > 1 ? jpath_str(json_array_get(attempts, n - 2), "action", "") : "first";
			enum cause c = !strcmp(cls, "env_fault") || !strcmp(cls, "not_oom") ? C_FAULT :
				       !strcmp(prev, "scale_up") ? C_SCALE_UP : !strcmp(prev, "retry") ? C_DESCENT : C_FIRST;
			t->failed_s += secs;
			t->failed_by[c] += secs;
		} else {
			char *key = json_dumps(cur, JSON_SORT_KEYS | JSON_COMPACT);
			json_object_set_new(succeeded_configs, key, json_true());
			free(key);
		}
		if (getenv("BENCH_JOB") && atoi(getenv("BENCH_JOB")) == id)
			fprintf(stderr, "%s %s job %d n %d gpu %d cls %s secs %.0f reason %s\n   EST %s reach %.2f n_measured %lld\n",
				law->name, WAY_NAMES[way], id, n, GPU_MIB[s], cls, secs, jpath_str(dec, "reason", ""),
				jpath_str(dec, "estimate.evidence", "-"), json_number_value(jpath_get(dec, "estimate.reach")),
				jpath_int(dec, "estimate.n_measured", -1));
		if (getenv("BENCH_TRACE") && way == W_MODEL && id >= NJOBS / 2 && strcmp(cls, "success"))
			fprintf(stderr, "%s job %d n %d gpu %d cls %s prev_action %s secs %.0f reason %.200s\n", law->name, id, n,
				GPU_MIB[s], cls, n > 1 ? jpath_str(json_array_get(attempts, n - 2), "action", "?") : "first",
				secs, jpath_str(dec, "reason", ""));
		if (!strcmp(cls, "env_fault"))
			t->env_reruns++;
		if (!strcmp(cls, "not_oom"))
			t->not_oom_failed++;
		if (strstr(jpath_str(dec, "reason", ""), "predicted not to fit (") ||
		    strstr(jpath_str(dec, "reason", ""), "every rung of the ladder predicted"))
			t->predicted_exhausted++;
		{
			json_t *f = memmodel_features(cur, video ? "video" : "image");
			json_array_insert_new(history, 0, memmodel_observation(arch, GPU_MIB[s], f, cls, facts, id, next_attempt_id + n));
			json_decref(f);
		}
		json_array_append_new(attempts, json_pack("{s:I, s:i, s:i, s:s, s:i, s:O, s:s, s:s, s:s, s:s, s:O, s:O, s:I}",
							  "id", (json_int_t)(next_attempt_id + n), "number", n, "worker_id",
							  s * GPUS_PER_SIZE, "gpu_uuid", uuid, "gpu_memory_mib", GPU_MIB[s],
							  "config", cur, "state", "ended", "outcome",
							  strcmp(cls, "success") ? "failed" : "succeeded", "class", cls,
							  "action", jpath_str(dec, "action", "?"), "rung", json_object_get(dec, "rung"),
							  "facts", facts, "duration_ms", (json_int_t)(secs * 1000)));
		json_decref(ctx);
		json_decref(facts);
		if (strcmp(state, "queued")) {
			if (!strcmp(state, "succeeded")) {
				const json_t *rc = jpath_get(dec, "result.config");
				final = json_deep_copy(rc ? rc : cur);
			}
			break;
		}
		json_decref(cur);
		cur = json_deep_copy(json_object_get(dec, "next_config"));
		json_decref(rstate);
		rstate = json_deep_copy(json_object_get(dec, "recovery_state"));
		json_array_extend(exclude, jpath_get(dec, "constraints.exclude_gpus"));
		if (jpath_int(dec, "constraints.min_gpu_memory_mib", 0) > min_mib)
			min_mib = jpath_int(dec, "constraints.min_gpu_memory_mib", 0);
	}
out:
	if (final) {
		t->succeeded++;
		t->settings_given_up += given_up(job->target, final, video);
	}
	if (getenv("BENCH_JOBS") && id >= NJOBS / 2) {
		json_t *ff = final ? memmodel_features(final, video ? "video" : "image") : NULL;
		char *fs = ff ? json_dumps(ff, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		fprintf(stderr, "JOB %s %d %s given_up %d final %s\n", law->name, id, WAY_NAMES[way],
			final ? given_up(job->target, final, video) : -1, fs ? fs : "-");
		free(fs);
		json_decref(ff);
	}
	json_decref(final);
	json_decref(dec);
	json_decref(cur);
	json_decref(rstate);
	json_decref(attempts);
	json_decref(exclude);
}

int main(int argc, char **argv)
{
	const char *out_path = argc > 2 && !strcmp(argv[1], "--out") ? argv[2] : NULL;
	struct job *jobs = make_jobs();
	struct tally tl[ARRAY_LEN(LAWS)][3][2];
	FILE *md = out_path ? fopen(out_path, "w") : NULL;
	size_t l;
	int w, i, h, ok = 1;

	memset(tl, 0, sizeof(tl));
	for (l = 0; l < ARRAY_LEN(LAWS); l++)
		for (w = 0; w < 3; w++) {
			json_t *history = json_array(), *succ = json_object();
			for (i = 0; i < NJOBS; i++)
				run_job(&LAWS[l], (enum way)w, i, &jobs[i], history, succ, &tl[l][w][i >= NJOBS / 2]);
			json_decref(history);
			json_decref(succ);
		}
	if (out_path && !md) {
		perror(out_path);
		return 1;
	}
#define OUT(...) do { printf(__VA_ARGS__); if (md) fprintf(md, __VA_ARGS__); } while (0)
	OUT("# make bench-recovery: the memory model against the blind ladder and an oracle\n\n");
	OUT("%d jobs (seed %u; 5 archs, image and video), GPUs of 16, 24, 48 and 80 GiB; every 23rd job meets an env fault "
	    "and every 37th a not_oom failure on its first attempt; every 29th never fits any GPU. Halves: jobs 0-%d teach, jobs %d-%d are measured.\n\n",
	    NJOBS, SEED, NJOBS / 2 - 1, NJOBS / 2, NJOBS - 1);
	for (l = 0; l < ARRAY_LEN(LAWS); l++) {
		OUT("## Law \"%s\": %s\n\n", LAWS[l].name, LAWS[l].what);
		OUT("| half | way | jobs succeeded | attempts/job | GPU-s on failed attempts | settings given up | env re-runs | "
		    "not_oom ended | started lower | started bigger | ladder predicted spent |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
		for (h = 0; h < 2; h++)
			for (w = 0; w < 3; w++) {
				struct tally *t = &tl[l][w][h];
				OUT("| %s | %s | %d/%d | %.2f | %.0f | %d | %d | %d | %d | %d | %d |\n", h ? "2nd" : "1st", WAY_NAMES[w],
				    t->succeeded, t->jobs, t->jobs ? (double)t->attempts / t->jobs : 0, t->failed_s,
				    t->settings_given_up, t->env_reruns, t->not_oom_failed, t->started_lower, t->started_bigger,
				    t->predicted_exhausted);
			}
		{
			struct tally *b = &tl[l][W_BLIND][1], *m = &tl[l][W_MODEL][1], *o = &tl[l][W_ORACLE][1];
			double cut = b->failed_s > 0 ? 100.0 * (1 - m->failed_s / b->failed_s) : 0;
			double vs = o->failed_s > 0 ? m->failed_s / o->failed_s : 0;
			int t1 = cut >= 40, t2 = vs <= 1.5, t3 = m->settings_given_up <= b->settings_given_up;
			int t4 = m->succeeded >= o->succeeded, t5 = m->env_reruns == b->env_reruns && m->not_oom_failed == b->not_oom_failed;
			OUT("\nSecond half, model vs blind: %.0f %% fewer GPU-seconds on failed attempts (target >= 40 %%: %s); "
			    "%.2fx the oracle's (target <= 1.5x: %s); settings given up %d vs %d (target <=: %s); "
			    "jobs succeeded %d vs the oracle's %d (%s); env faults and not_oom as the blind ladder: %s.\n\n",
			    cut, t1 ? "met" : "MISSED", vs, t2 ? "met" : "MISSED", m->settings_given_up, b->settings_given_up,
			    t3 ? "met" : "MISSED", m->succeeded, o->succeeded, t4 ? "met" : "MISSED", t5 ? "yes" : "NO");
			ok &= t1 && t2 && t3 && t4 && t5;
		}
	}
	OUT("## Where the failed GPU-seconds go (second half)\n\n| law | way | faults (env, not_oom) | first config on a GPU | after an OOM | scale-up |\n"
	    "|---|---|---|---|---|---|\n");
	for (l = 0; l < ARRAY_LEN(LAWS); l++)
		for (w = 0; w < 3; w++) {
			struct tally *t = &tl[l][w][1];
			OUT("| %s | %s | %.0f | %.0f | %.0f | %.0f |\n", LAWS[l].name, WAY_NAMES[w], t->failed_by[C_FAULT],
			    t->failed_by[C_FIRST], t->failed_by[C_DESCENT], t->failed_by[C_SCALE_UP]);
		}
	OUT("\nTargets %s.\n", ok ? "all met" : "not all met (see MISSED above)");
	if (md)
		fclose(md);
	for (i = 0; i < NJOBS; i++)
		json_decref(jobs[i].target);
	free(jobs);
	return 0;
}
