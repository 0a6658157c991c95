/* bin/sim/rung-sim-trainer CONFIG: a stand-in for AI Toolkit's `python run.py CONFIG` on machines
 * without a GPU. Reads the config (JSON file object), the simulated GPU (sim/simgpu.h), prints AI
 * Toolkit's and PyTorch's real lines phase by phase, and runs out of memory where the memory model
 * below says the phase does not fit. `--estimate CONFIG` prints the model's needs as JSON.
 *
 * Memory model (MiB; deterministic; see sim/README.md). Per arch: T transformer bf16, E text
 * encoder, V vae, A activations per batch item at 1024x1024 per latent frame (checkpointing on),
 * S sampling activations at 1024x1024 per latent frame, tc frames per latent frame:
 *   flux 23000/9500/160 A2400 S2800; flux2 61000/45000/320 A4000 S4500; sdxl 5000/1600/160 A1200
 *   S1500; qwen_image 39000/15800/250 A3000 S3500; wan22_14b 27000/10800/500 A1600 S1200 tc4;
 *   wan22_5b 9600/10800/1400 A900 S700 tc4; ltx2 38000/23000/1000 A1200 S1000 tc8; other: sdxl.
 *   t = T x0.55 if quantize, x0.85 if low_vram, x(1 - 0.9 p) if layer_offloading (p = transformer %)
 *   e = E x0.55 if quantize_te (default: quantize), x0.5 if low_vram, x(1 - 0.9 p_te) if offloading;
 *       e_run = 0 during baseline/train/sample/save when cache_text_embeddings or unload_text_encoder
 *   C = 512 CUDA context + workspace; L = 200 + 0.02 T (LoRA weights, grads, optimizer state)
 *   load     = t + e + V + C
 *   train    = t + e_run + V + C + L + max over datasets of A x B x (R/1024)^2 x lf(F) x (11 if no ckpt)
 *              (B dataset batch_size or train.batch_size, R its largest bucket, lf(F) = (F-1)/tc + 1);
 *              that is a heavy batch (largest bucket); other batches use the second-largest bucket.
 *   sample   = t + e_run + V + C + L + max over samples of S x (W x H / 1024^2) x lf(F) x (0.8 + 0.01 steps)
 *   baseline = sample - L;  save = t + e_run + V + C + L + 256;  sampling off: sample = baseline = 0.
 * Available = GPU total (RUNG_SIM_GPU_MIB overrides) - 12 MiB driver - memory of other processes. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "simgpu.h"
#include "util.h"

#define SIM_CTX_MIB 512
/* activations without gradient checkpointing, against with it: 11.4 measured on a real CUDA run
 * (docs/GPU.md, a 48-block DiT at 1024 px, batch 4: 28195 against 2483 MiB); 4 before, a guess */
#define SIM_NOCKPT_FACTOR 11.0
#define SIM_MAX_SKIPS 3
#define SIM_AT_ROOT "/workspace/ai-toolkit"

enum sim_phase { PH_START, PH_LOAD, PH_BASELINE, PH_TRAIN, PH_SAMPLE, PH_SAVE, PH_DONE };

struct sim_arch {
	const char *name;
	double t, e, v, act, samp;
	int tc; /* frames per latent frame */
};

static const struct sim_arch sim_archs[] = {
	{ "flux", 23000, 9500, 160, 2400, 2800, 4 },
	{ "flux2", 61000, 45000, 320, 4000, 4500, 4 },
	{ "sdxl", 5000, 1600, 160, 1200, 1500, 4 },
	{ "qwen_image", 39000, 15800, 250, 3000, 3500, 4 },
	{ "wan22_14b", 27000, 10800, 500, 1600, 1200, 4 },
	{ "wan22_5b", 9600, 10800, 1400, 900, 700, 4 },
	{ "ltx2", 38000, 23000, 1000, 1200, 1000, 8 },
};

struct sim_need {
	long t, e, v;          /* resident weights at load */
	long load, baseline, train, train_typical, sample, save, peak;
	double spike_scale;    /* (largest bucket / 1024)^2: how much heavier a spike gets */
};

struct sim_run {
	json_t *file;
	json_t *proc;
	const char *name;
	long steps, save_every, sample_every, nprompts;
	double lr;
	int sampling, baseline;
	const char *folder;       /* first dataset folder */
	const char *arch;
	struct sim_need need;
	long total_mib, avail_mib;
	char uuid[96];
	struct simgpu_proc *foreign;
	size_t nforeign;
	long step_ms, load_ms, sample_ms;
	int register_gpu;
	char run_dir[4096];
	enum sim_phase phase;
};

static volatile sig_atomic_t sim_stop_flag;

static void sim_on_sigint(int sig)
{
	(void)sig;
	sim_stop_flag = 1;
}

/* ---- config access ---- */

static double sim_num(const json_t *o, const char *key, double def)
{
	const json_t *v = json_object_get(o, key);
	if (json_is_number(v))
		return json_number_value(v);
	if (json_is_boolean(v))
		return json_is_true(v);
	return def;
}

static int sim_bool(const json_t *o, const char *key, int def)
{
	return sim_num(o, key, def) != 0;
}

static const struct sim_arch *sim_arch_of(const char *arch)
{
	char base[64];
	snprintf(base, sizeof(base), "%s", arch ? arch : "");
	char *colon = strchr(base, ':');
	if (colon)
		*colon = '\0';
	for (size_t i = 0; i < ARRAY_LEN(sim_archs); i++)
		if (!strcmp(sim_archs[i].name, base))
			return &sim_archs[i];
	return &sim_archs[2];
}

/* model.arch, or what AI Toolkit's older configs (its own examples among them) say with flags instead:
 * is_flux, is_xl, is_v3. A borrowed string; "sdxl" when nothing says. */
static const char *sim_model_arch(const json_t *model)
{
	static const struct { const char *flag, *arch; } legacy[] = {
		{ "is_flux", "flux" }, { "is_xl", "sdxl" }, { "is_v3", "sdxl" },
	};
	const char *arch = json_string_value(json_object_get(model, "arch"));

	if (arch)
		return arch;
	for (size_t i = 0; i < ARRAY_LEN(legacy); i++)
		if (json_is_true(json_object_get(model, legacy[i].flag)))
			return legacy[i].arch;
	return "sdxl";
}

static double sim_lf(long frames, int tc)
{
	return frames <= 1 ? 1.0 : (double)((frames - 1) / tc + 1);
}

/* Largest and second-largest bucket of a dataset's resolution (a number or a list); default 512. */
static void sim_buckets(const json_t *ds, long *largest, long *second)
{
	const json_t *r = json_object_get(ds, "resolution");
	long a = 0, b = 0;
	if (json_is_number(r)) {
		a = (long)json_number_value(r);
	} else if (json_is_array(r)) {
		size_t i;
		const json_t *v;
		json_array_foreach(r, i, v) {
			long x = (long)json_number_value(v);
			if (x > a) {
				b = a;
				a = x;
			} else if (x > b && x < a) {
				b = x;
			}
		}
	}
	if (a <= 0)
		a = 512;
	*largest = a;
	*second = b > 0 ? b : a;
}

/* The memory model (see the top of this file). PROC is config.process[0]. */
static void sim_estimate(const json_t *proc, struct sim_need *n)
{
	const json_t *train = json_object_get(proc, "train");
	const json_t *model = json_object_get(proc, "model");
	const json_t *sample = json_object_get(proc, "sample");
	const json_t *datasets = json_object_get(proc, "datasets");
	const struct sim_arch *a = sim_arch_of(sim_model_arch(model));
	int quantize = sim_bool(model, "quantize", 0);
	int low_vram = sim_bool(model, "low_vram", 0);
	int offload = sim_bool(model, "layer_offloading", 0);
	double t = a->t, e = a->e;

	memset(n, 0, sizeof(*n));
	if (quantize)
		t *= 0.55;
	if (low_vram)
		t *= 0.85;
	if (offload) {
		double p = sim_num(model, "layer_offloading_transformer_percent", 1.0);
		t *= 1.0 - 0.9 * (p < 0 ? 0 : p > 1 ? 1 : p);
	}
	if (sim_bool(model, "quantize_te", quantize))
		e *= 0.55;
	if (low_vram)
		e *= 0.5;
	if (offload) {
		double p = sim_num(model, "layer_offloading_text_encoder_percent", 1.0);
		e *= 1.0 - 0.9 * (p < 0 ? 0 : p > 1 ? 1 : p);
	}
	n->t = lround(t);
	n->e = lround(e);
	n->v = lround(a->v);
	long e_run = sim_bool(train, "cache_text_embeddings", 0) || sim_bool(train, "unload_text_encoder", 0) ?
		0 : n->e;
	long lora = lround(200 + 0.02 * a->t);
	long base = n->t + e_run + n->v + SIM_CTX_MIB;

	n->load = n->t + n->e + n->v + SIM_CTX_MIB;

	double ckf = sim_bool(train, "gradient_checkpointing", 1) ? 1.0 : SIM_NOCKPT_FACTOR;
	long tb = (long)sim_num(train, "batch_size", 1);
	double heavy = 0, typical = 0;
	long rmax = 512;
	size_t i;
	const json_t *ds;
	json_array_foreach(datasets, i, ds) {
		long b = (long)sim_num(ds, "batch_size", (double)tb), r1, r2;
		long f = (long)sim_num(ds, "num_frames", 1);
		sim_buckets(ds, &r1, &r2);
		if (b < 1)
			b = 1;
		double unit = a->act * b * sim_lf(f, a->tc) * ckf;
		double h = unit * (r1 / 1024.0) * (r1 / 1024.0), ty = unit * (r2 / 1024.0) * (r2 / 1024.0);
		if (h > heavy)
			heavy = h;
		if (ty > typical)
			typical = ty;
		if (r1 > rmax || i == 0)
			rmax = i == 0 ? r1 : (r1 > rmax ? r1 : rmax);
	}
	if (json_array_size(datasets) == 0)
		heavy = typical = a->act * tb * 0.25 * ckf;
	n->train = base + lora + lround(heavy);
	n->train_typical = base + lora + lround(typical);
	n->spike_scale = (rmax / 1024.0) * (rmax / 1024.0);

	int sampling = !sim_bool(train, "disable_sampling", 0);
	double sact = 0;
	long sw = (long)sim_num(sample, "width", 512), sh = (long)sim_num(sample, "height", 512);
	long sf = (long)sim_num(sample, "num_frames", 1), ss = (long)sim_num(sample, "sample_steps", 20);
	const json_t *items = json_object_get(sample, "samples");
	size_t nitems = json_is_array(items) ? json_array_size(items) : 0;
	for (size_t k = 0; k < (nitems ? nitems : 1); k++) {
		const json_t *it = nitems ? json_array_get(items, k) : NULL;
		long w = (long)sim_num(it, "width", (double)sw), h = (long)sim_num(it, "height", (double)sh);
		long f = (long)sim_num(it, "num_frames", (double)sf), st = (long)sim_num(it, "sample_steps", (double)ss);
		double v = a->samp * (w / 1024.0) * (h / 1024.0) * sim_lf(f, a->tc) * (0.8 + 0.01 * (double)st);
		if (v > sact)
			sact = v;
	}
	if (sampling) {
		n->sample = base + lora + lround(sact);
		if (!sim_bool(train, "skip_first_sample", 0))
			n->baseline = base + lround(sact);
	}
	n->save = base + lora + 256;
	n->peak = n->load;
	long all[] = { n->baseline, n->train, n->sample, n->save };
	for (size_t k = 0; k < ARRAY_LEN(all); k++)
		if (all[k] > n->peak)
			n->peak = all[k];
}

/* ---- output helpers ---- */

static void sim_out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sim_out(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

static void sim_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sim_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

/* PyTorch's format_size: bytes, KiB, MiB or GiB with two decimals. */
static void sim_size(char *buf, size_t cap, double mib)
{
	double bytes = mib * 1048576.0;
	if (bytes <= 1024)
		snprintf(buf, cap, "%.0f bytes", bytes < 0 ? 0 : bytes);
	else if (bytes <= 1048576.0)
		snprintf(buf, cap, "%.2f KiB", bytes / 1024.0);
	else if (bytes <= 1073741824.0)
		snprintf(buf, cap, "%.2f MiB", mib);
	else
		snprintf(buf, cap, "%.2f GiB", mib / 1024.0);
}

static void sim_clock(char *buf, size_t cap, double s)
{
	long t = lround(s);
	if (t >= 3600)
		snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, cap, "%02ld:%02ld", t / 60, t % 60);
}

/* One tqdm redraw on stderr: `\rDESC:  12%|█▏        | 245/2000 [00:10<01:00,  4.50it/s, POSTFIX]`. */
static void sim_bar(const char *desc, long n, long total, long done, long ms_per_it, const char *postfix)
{
	static const char *const partial[] = { "", "▏", "▎", "▍", "▌", "▋", "▊", "▉" };
	char bar[64] = "", el[64], rem[64], rate[32];
	double frac = total > 0 ? (double)n / (double)total : 0;
	int cells = (int)(frac * 80.0);
	int full = cells / 8, i;

	if (frac > 1)
		frac = 1;
	for (i = 0; i < full && i < 10; i++)
		strcat(bar, "█");
	if (i < 10) {
		strcat(bar, partial[cells % 8]);
		for (i += cells % 8 ? 1 : 0; i < 10; i++)
			strcat(bar, " ");
	}
	double elapsed = (double)done * (double)ms_per_it / 1000.0;
	sim_clock(el, sizeof(el), elapsed);
	if (done > 0 && ms_per_it > 0) {
		double r = 1000.0 / (double)ms_per_it;
		sim_clock(rem, sizeof(rem), (double)(total - n) * (double)ms_per_it / 1000.0);
		if (r >= 1)
			snprintf(rate, sizeof(rate), "%5.2fit/s", r);
		else
			snprintf(rate, sizeof(rate), "%5.2fs/it", 1 / r);
	} else {
		snprintf(rem, sizeof(rem), "?");
		snprintf(rate, sizeof(rate), "?it/s");
	}
	/* An empty DESC draws tqdm's unnamed bar, as AI Toolkit's block quantizer does. */
	sim_err("\r%s%s%3d%%|%s| %ld/%ld [%s<%s, %s%s%s]", desc, *desc ? ": " : "", (int)(frac * 100), bar, n, total,
		el, rem, rate, postfix ? ", " : "", postfix ? postfix : "");
}

/* ---- GPU bookkeeping ---- */

static void sim_register(struct sim_run *r, long used)
{
	if (r->register_gpu)
		(void)simgpu_set_trainer(r->uuid, (long)getpid(), used);
}

static void sim_exit(struct sim_run *r, int code) __attribute__((noreturn));
static void sim_exit(struct sim_run *r, int code)
{
	sim_register(r, 0);
	fflush(stdout);
	fflush(stderr);
	exit(code);
}

/* Picks the GPU (CUDA_VISIBLE_DEVICES: index or uuid, first entry) and what is left of it. */
static int sim_gpu(struct sim_run *r)
{
	struct simgpu_state st = { 0 };
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	char want[128] = "0";
	size_t idx = 0;
	int rc = -1;

	if (simgpu_load(&st) != 0)
		return -1;
	if (cvd) {
		snprintf(want, sizeof(want), "%s", cvd);
		want[strcspn(want, ",")] = '\0';
	}
	if (!*want) {
		idx = st.ngpus;
	} else if (!strncmp(want, "GPU-", 4)) {
		for (idx = 0; idx < st.ngpus && strcmp(st.gpus[idx].uuid, want); idx++)
			;
	} else {
		char *end = NULL;
		long v = strtol(want, &end, 10);
		idx = end && !*end && v >= 0 ? (size_t)v : st.ngpus;
	}
	if (idx >= st.ngpus)
		goto out;
	const struct simgpu_gpu *g = &st.gpus[idx];
	snprintf(r->uuid, sizeof(r->uuid), "%s", g->uuid);
	r->total_mib = g->total_mib;
	const char *ovr = getenv("RUNG_SIM_GPU_MIB");
	if (ovr && atol(ovr) > 0)
		r->total_mib = atol(ovr);
	r->foreign = xcalloc(g->nprocs ? g->nprocs : 1, sizeof(*r->foreign));
	long used = 0;
	for (size_t i = 0; i < g->nprocs; i++) {
		if (g->procs[i].pid == (long)getpid())
			continue;
		r->foreign[r->nforeign++] = g->procs[i];
		used += g->procs[i].used_mib;
	}
	r->avail_mib = r->total_mib - SIMGPU_BASELINE_MIB - used;
	/* rung-worker --gpu-memory-mib: the trainer holds itself under it, as one capped with PyTorch's
	 * set_per_process_memory_fraction does (the OOM message still names the whole card) */
	const char *held = getenv("RUNG_GPU_MEMORY_MIB");
	if (held && atol(held) > 0 && atol(held) - SIMGPU_BASELINE_MIB < r->avail_mib)
		r->avail_mib = atol(held) - SIMGPU_BASELINE_MIB;
	rc = 0;
out:
	simgpu_release(&st);
	return rc;
}

/* ---- failures ---- */

static const char *sim_frame(enum sim_phase ph)
{
	switch (ph) {
	case PH_START: return "  File \"" SIM_AT_ROOT "/toolkit/job.py\", line 28, in get_job\n    config = get_config(config_path, name)\n";
	case PH_LOAD: return "  File \"" SIM_AT_ROOT "/jobs/process/BaseSDTrainProcess.py\", line 1510, in run\n    self.sd.load_model()\n";
	case PH_BASELINE: return "  File \"" SIM_AT_ROOT "/jobs/process/BaseSDTrainProcess.py\", line 1994, in run\n    self.sample(self.step_num)\n";
	case PH_TRAIN: return "  File \"" SIM_AT_ROOT "/jobs/process/BaseSDTrainProcess.py\", line 2147, in run\n    loss_dict = self.hook_train_loop(batch_list)\n";
	case PH_SAMPLE: return "  File \"" SIM_AT_ROOT "/jobs/process/BaseSDTrainProcess.py\", line 2262, in run\n    self.sample(self.step_num)\n";
	case PH_SAVE: return "  File \"" SIM_AT_ROOT "/jobs/process/BaseSDTrainProcess.py\", line 2228, in run\n    self.save(self.step_num)\n";
	case PH_DONE: return "";
	default: abort();
	}
}

/* AI Toolkit's failure output for an exception TYPE: MSG raised in the current phase; exits 1. */
static void sim_fail(struct sim_run *r, const char *type, const char *msg) __attribute__((noreturn));
static void sim_fail(struct sim_run *r, const char *type, const char *msg)
{
	if (r->phase == PH_TRAIN || r->phase == PH_SAMPLE || r->phase == PH_BASELINE)
		sim_err("\n");
	sim_out("Error running job: %s", msg);
	sim_out("%s", "");
	sim_out("========================================");
	sim_out("Result:");
	sim_out(" - 0 completed jobs");
	sim_out(" - 1 failure");
	sim_out("========================================");
	sim_err("Traceback (most recent call last):\n"
		"  File \"" SIM_AT_ROOT "/run.py\", line 120, in <module>\n    main()\n"
		"  File \"" SIM_AT_ROOT "/run.py\", line 108, in main\n    raise e\n"
		"  File \"" SIM_AT_ROOT "/run.py\", line 95, in main\n    job.run()\n"
		"  File \"" SIM_AT_ROOT "/jobs/ExtensionJob.py\", line 22, in run\n    process.run()\n"
		"%s%s%s%s\n", sim_frame(r->phase), type, *msg ? ": " : "", msg);
	sim_exit(r, 1);
}

/* PyTorch's out-of-memory message for a phase that needs NEED MiB; heap string. */
static char *sim_oom_text(const struct sim_run *r, long need, const char **type)
{
	char tried_s[32], total_s[32], free_s[32], inuse_s[32], alloc_s[32], unalloc_s[32], res_s[32];
	long avail = r->avail_mib;
	long freem = avail <= 0 ? 0 : (avail < 20 + need % 40 ? avail : 20 + need % 40);
	long inuse = avail - freem > 0 ? avail - freem : 0;
	long reserved = inuse > 400 ? inuse - 400 : 0;
	long unalloc = reserved < 100 + need % 150 ? reserved : 100 + need % 150;
	long alloc = reserved - unalloc;
	long tried = (need - inuse + 1) / 2 * 2;
	char *procs = xstrdup(""), *text;

	if (tried < 2)
		tried = 2;
	sim_size(tried_s, sizeof(tried_s), (double)tried);
	sim_size(total_s, sizeof(total_s), (double)r->total_mib);
	sim_size(free_s, sizeof(free_s), (double)freem);
	sim_size(inuse_s, sizeof(inuse_s), (double)inuse);
	sim_size(alloc_s, sizeof(alloc_s), (double)alloc);
	sim_size(unalloc_s, sizeof(unalloc_s), (double)unalloc);
	sim_size(res_s, sizeof(res_s), (double)reserved);
	if (getenv("RUNG_SIM_OLD_WORDING") && !strcmp(getenv("RUNG_SIM_OLD_WORDING"), "1")) {
		*type = "torch.cuda.OutOfMemoryError";
		text = xasprintf("CUDA out of memory. Tried to allocate %s (GPU 0; %s total capacity; %s already "
			"allocated; %s free; %s reserved in total by PyTorch) If reserved memory is >> allocated memory "
			"try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management "
			"and PYTORCH_CUDA_ALLOC_CONF", tried_s, total_s, alloc_s, free_s, res_s);
		free(procs);
		return text;
	}
	*type = "torch.OutOfMemoryError";
	for (size_t i = 0; i < r->nforeign; i++) {
		char used_s[32];
		sim_size(used_s, sizeof(used_s), (double)r->foreign[i].used_mib);
		char *next = xasprintf("%sProcess %ld has %s memory in use. ", procs, r->foreign[i].pid, used_s);
		free(procs);
		procs = next;
	}
	text = xasprintf("CUDA out of memory. Tried to allocate %s. GPU 0 has a total capacity of %s of which %s "
		"is free. %sIncluding non-PyTorch memory, this process has %s memory in use. Of the allocated memory "
		"%s is allocated by PyTorch, and %s is reserved by PyTorch but unallocated. If reserved but "
		"unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
		"fragmentation.  See documentation for Memory Management  "
		"(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
		tried_s, total_s, free_s, procs, inuse_s, alloc_s, unalloc_s);
	free(procs);
	return text;
}

/* Dies of OOM when NEED does not fit (load, sampling, saving: AI Toolkit does not survive it). */
static void sim_check(struct sim_run *r, long need)
{
	if (need <= r->avail_mib) {
		sim_register(r, need);
		return;
	}
	const char *type = NULL;
	char *text = sim_oom_text(r, need, &type);
	sim_fail(r, type, text);
}

static int sim_sleep(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (!sim_stop_flag && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	return sim_stop_flag ? -1 : 0;
}

/* Ctrl-C: what rung expects of AI Toolkit on KeyboardInterrupt (docs: `Job stopped`, exit 0). */
static void sim_stopped(struct sim_run *r) __attribute__((noreturn));
static void sim_stopped(struct sim_run *r)
{
	sim_err("\n");
	sim_out("Job stopped");
	sim_out("%s", "");
	sim_out("========================================");
	sim_out("Result:");
	sim_out(" - 0 completed jobs");
	sim_out("========================================");
	sim_exit(r, 0);
}

static void sim_wait(struct sim_run *r, long ms)
{
	if (sim_sleep(ms) != 0)
		sim_stopped(r);
}

static const char *sim_fault(void)
{
	const char *f = getenv("RUNG_SIM_FAIL");
	return f ? f : "";
}

/* ---- checkpoints (resume markers) ---- */

static long sim_latest_save(const struct sim_run *r, char *path, size_t cap)
{
	DIR *d = opendir(r->run_dir);
	struct dirent *de;
	long best = -1;
	size_t nl = strlen(r->name);

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		const char *n = de->d_name;
		size_t len = strlen(n);
		if (strncmp(n, r->name, nl) || len < 12 || strcmp(n + len - 12, ".safetensors"))
			continue;
		char full[8192];
		snprintf(full, sizeof(full), "%s/%s", r->run_dir, n);
		FILE *f = fopen(full, "r");
		long step = -1;
		if (f) {
			if (fscanf(f, "step=%ld", &step) != 1)
				step = -1;
			fclose(f);
		}
		if (step > best) {
			best = step;
			snprintf(path, cap, "%s", full);
		}
	}
	closedir(d);
	return best;
}

static void sim_save(struct sim_run *r, long step, int final)
{
	char path[8192];
	enum sim_phase prev = r->phase;

	r->phase = PH_SAVE;
	if (!final)
		sim_out("\nSaving at step %ld", step);
	sim_check(r, r->need.save);
	if (final)
		snprintf(path, sizeof(path), "%s/%s.safetensors", r->run_dir, r->name);
	else
		snprintf(path, sizeof(path), "%s/%s_%09ld.safetensors", r->run_dir, r->name, step);
	char tmp[8300];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "step=%ld\n", step) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
		char *msg = xasprintf("[Errno 2] No such file or directory: '%s'", path);
		sim_fail(r, "FileNotFoundError", msg);
	}
	sim_out("Saved to %s", path);
	r->phase = prev;
}

/* ---- phases ---- */

static void sim_sample(struct sim_run *r, enum sim_phase ph, long need)
{
	r->phase = ph;
	sim_bar("Generating Samples", 0, r->nprompts, 0, r->sample_ms, NULL);
	sim_check(r, need);
	for (long i = 1; i <= r->nprompts; i++) {
		sim_wait(r, r->sample_ms);
		sim_bar("Generating Samples", i, r->nprompts, i, r->sample_ms, NULL);
	}
	sim_err("\n");
}

static void sim_load(struct sim_run *r)
{
	const char *fault = sim_fault();
	const json_t *model = json_object_get(r->proc, "model");
	long used = SIM_CTX_MIB;

	r->phase = PH_LOAD;
	sim_register(r, used);
	sim_out("Loading %s model", r->arch);
	sim_out("Loading transformer");
	/* The load as real AI Toolkit logs show it (tests/data/logs 003, 027): a shards bar, then an
	 * unnamed bar per quantized block list; neither is the training bar. */
	sim_bar("Loading checkpoint shards", 3, 3, 3, 50, NULL);
	sim_err("\n");
	sim_wait(r, r->load_ms / 4);
	if (!strcmp(fault, "host_oom")) {
		sim_err("Killed\n");
		signal(SIGKILL, SIG_DFL);
		kill(getpid(), SIGKILL);
	}
	const char *cublas = getenv("RUNG_SIM_CUBLAS");
	if (cublas && (!strcmp(cublas, "alloc") || !strcmp(cublas, "init")))
		sim_fail(r, "RuntimeError", !strcmp(cublas, "alloc") ?
			"CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`" :
			"CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`");
	used += r->need.t;
	sim_check(r, used);
	if (sim_bool(model, "quantize", 0)) {
		sim_out("Quantizing Transformer");
		sim_out(" - quantizing 40 transformer blocks");
		sim_bar("", 40, 40, 40, 5, NULL);
		sim_err("\n");
		sim_out(" - quantizing extras");
		sim_wait(r, r->load_ms / 4);
	}
	sim_out("Loading text encoder");
	if (sim_bool(model, "quantize_te", sim_bool(model, "quantize", 0)))
		sim_out("Quantizing Text Encoder");
	used += r->need.e;
	sim_check(r, used);
	sim_wait(r, r->load_ms / 4);
	sim_out("Loading VAE");
	used += r->need.v;
	sim_check(r, used);
	if (!strcmp(fault, "memory_error"))
		sim_fail(r, "MemoryError", "");
	sim_out("Making pipe");
	sim_out("Preparing Model");
	sim_out("Model Loaded");
	sim_out("create LoRA network. base dim (rank): 16, alpha: 16");
	sim_out("neuron dropout: p=None, rank dropout: p=None, module dropout: p=None");
	sim_out("create LoRA for Text Encoder: 0 modules.");
	sim_out("create LoRA for U-Net: 494 modules.");
	sim_out("enable LoRA for U-Net");
	sim_wait(r, r->load_ms / 4);
}

static void sim_datasets(struct sim_run *r)
{
	const json_t *datasets = json_object_get(r->proc, "datasets");
	size_t i;
	const json_t *ds;

	if (!strcmp(sim_fault(), "missing_file")) {
		char *msg = xasprintf("[Errno 2] No such file or directory: '%s'", r->folder);
		sim_fail(r, "FileNotFoundError", msg);
	}
	json_array_foreach(datasets, i, ds) {
		const char *folder = json_string_value(json_object_get(ds, "folder_path"));
		const json_t *res = json_object_get(ds, "resolution");
		long files = 24;
		folder = folder ? folder : "dataset";
		sim_out("Dataset: %s", folder);
		sim_out("  -  Preprocessing image dimensions");
		sim_out("  -  Found %ld images", files);
		sim_out("Bucket sizes for %s:", folder);
		size_t nb = json_is_array(res) ? json_array_size(res) : 1;
		for (size_t k = 0; k < nb; k++) {
			long px = json_is_array(res) ? (long)json_number_value(json_array_get(res, k)) :
				json_is_number(res) ? (long)json_number_value(res) : 512;
			sim_out("%ldx%ld: %ld files", px, px, files / (long)nb);
		}
		sim_out("%zu buckets made", nb);
		sim_out("Caching latents for %s", folder);
		sim_out(" - Saving latents to disk");
		sim_bar("Caching latents to disk", files, files, files, 5, NULL);
		sim_err("\n");
	}
}

static void sim_train(struct sim_run *r, long start)
{
	const char *fault = sim_fault();
	const char *sp = getenv("RUNG_SIM_SPIKE_MIB"), *se = getenv("RUNG_SIM_SPIKE_EVERY");
	long spike = sp ? atol(sp) : 0, every = se && atol(se) > 0 ? atol(se) : 7;
	int skips = 0;

	r->phase = PH_TRAIN;
	sim_bar(r->name, start, r->steps, 0, r->step_ms, NULL);
	for (long k = start + 1; k <= r->steps; k++) {
		int heavy = k % every == 0;
		long need = heavy ? r->need.train + lround((double)spike * r->need.spike_scale) : r->need.train_typical;

		r->phase = PH_TRAIN;
		sim_wait(r, r->step_ms);
		if (!strcmp(fault, "nccl") && k == start + 2)
			sim_fail(r, "torch.distributed.DistBackendError", "[Rank 0] Watchdog caught collective operation "
				"timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
				"ran for 600081 milliseconds before timing out.");
		if (!strcmp(fault, "segv") && k == start + 2) {
			sim_err("\nFatal Python error: Segmentation fault\n\nCurrent thread 0x00007f3a2b7fe740 (most recent call first):\n"
				"  File \"" SIM_AT_ROOT "/jobs/process/BaseSDTrainProcess.py\", line 2147 in run\n");
			struct rlimit nocore = { 0, 0 };
			setrlimit(RLIMIT_CORE, &nocore);
			signal(SIGSEGV, SIG_DFL);
			raise(SIGSEGV);
		}
		if (!strcmp(fault, "nan") && k >= start + 3) {
			sim_out("loss is nan");
			if (k == start + 4)
				sim_fail(r, "RuntimeError", "Function 'MseLossBackward0' returned nan values in its 0th output.");
			continue;
		}
		if (need > r->avail_mib) {
			if (++skips > SIM_MAX_SKIPS)
				sim_fail(r, "RuntimeError", "OOM during training step 3 times in a row, aborting training");
			sim_err("\n");
			sim_out("# OOM during training step, skipping batch %d/3 #", skips);
		} else {
			char post[96];
			skips = 0;
			sim_register(r, need);
			snprintf(post, sizeof(post), "lr: %.1e loss: %.3e", r->lr, 0.35 + 0.1 * sin((double)k));
			sim_bar(r->name, k, r->steps, k - start, r->step_ms, post);
		}
		if (k < r->steps && r->save_every > 0 && k % r->save_every == 0)
			sim_save(r, k, 0);
		if (k < r->steps && r->sampling && r->sample_every > 0 && k % r->sample_every == 0) {
			sim_err("\n");
			sim_sample(r, PH_SAMPLE, r->need.sample);
		}
	}
	sim_err("\n");
}

static int sim_usage(void)
{
	fprintf(stderr, "usage: rung-sim-trainer [--estimate] CONFIG.json\n");
	return 2;
}

static int sim_print_estimate(const json_t *proc)
{
	struct sim_need n;
	sim_estimate(proc, &n);
	json_t *o = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "load_mib", (json_int_t)n.load,
		"baseline_sample_mib", (json_int_t)n.baseline, "train_mib", (json_int_t)n.train,
		"train_typical_mib", (json_int_t)n.train_typical, "sample_mib", (json_int_t)n.sample,
		"save_mib", (json_int_t)n.save, "peak_mib", (json_int_t)n.peak);
	char *s = json_dumps(o, JSON_COMPACT);
	printf("%s\n", s);
	free(s);
	json_decref(o);
	return 0;
}

static void sim_setup(struct sim_run *r)
{
	const json_t *train = json_object_get(r->proc, "train");
	const json_t *sample = json_object_get(r->proc, "sample");
	const json_t *save = json_object_get(r->proc, "save");
	const json_t *ds0 = json_array_get(json_object_get(r->proc, "datasets"), 0);
	const char *env;

	r->name = json_string_value(json_object_get(json_object_get(r->file, "config"), "name"));
	r->name = r->name ? r->name : "my_lora";
	r->arch = sim_model_arch(json_object_get(r->proc, "model"));
	r->steps = (long)sim_num(train, "steps", 1000);
	r->save_every = (long)sim_num(save, "save_every", sim_num(train, "save_every", 250));
	r->sample_every = (long)sim_num(sample, "sample_every", 100);
	r->lr = sim_num(train, "lr", 1e-4);
	r->sampling = !sim_bool(train, "disable_sampling", 0);
	r->baseline = r->sampling && !sim_bool(train, "skip_first_sample", 0);
	r->folder = json_string_value(json_object_get(ds0, "folder_path"));
	r->folder = r->folder ? r->folder : "dataset";
	const json_t *items = json_object_get(sample, "samples");
	const json_t *prompts = json_object_get(sample, "prompts");
	r->nprompts = json_array_size(items) ? (long)json_array_size(items) :
		json_array_size(prompts) ? (long)json_array_size(prompts) : 1;
	r->step_ms = (env = getenv("RUNG_SIM_STEP_MS")) ? atol(env) : 50;
	r->load_ms = (env = getenv("RUNG_SIM_LOAD_MS")) ? atol(env) : 200;
	r->sample_ms = (env = getenv("RUNG_SIM_SAMPLE_MS")) ? atol(env) : 100;
	r->register_gpu = !((env = getenv("RUNG_SIM_REGISTER")) && !strcmp(env, "0"));
	const char *dir = getenv("RUNG_SIM_RUN_DIR");
	if (!dir || !*dir)
		dir = json_string_value(json_object_get(r->proc, "training_folder"));
	snprintf(r->run_dir, sizeof(r->run_dir), "%s/%s", dir && *dir ? dir : "output", r->name);
	sim_estimate(r->proc, &r->need);
}

static void sim_mkdirs(const char *path)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(buf, 0755);
			*p = '/';
		}
	}
	mkdir(buf, 0755);
}

int main(int argc, char **argv)
{
	struct sim_run r = { 0 };
	json_error_t jerr;
	int estimate = argc == 3 && !strcmp(argv[1], "--estimate");
	const char *path = estimate ? argv[2] : argc == 2 ? argv[1] : NULL;
	int rc = 0;

	if (!path)
		return sim_usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	r.file = json_load_file(path, 0, &jerr);
	r.proc = json_array_get(json_object_get(json_object_get(r.file, "config"), "process"), 0);
	if (estimate) {
		if (!json_is_object(r.proc)) {
			fprintf(stderr, "rung-sim-trainer: %s: not an AI Toolkit config\n", path);
			rc = 1;
		} else {
			rc = sim_print_estimate(r.proc);
		}
		goto out;
	}

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = sim_on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);

	r.phase = PH_START;
	sim_out("Running 1 job");
	if (!r.file) {
		char *msg = access(path, F_OK) ? xasprintf("Could not find config file %s", path) :
			xasprintf("%s: %s (line %d)", path, jerr.text, jerr.line);
		sim_fail(&r, "ValueError", msg);
	}
	if (!json_is_object(r.proc) || !json_is_object(json_object_get(r.proc, "train")))
		sim_fail(&r, "ValueError", "config file must have a config.process[0] with train settings");
	const json_t *train = json_object_get(r.proc, "train");
	if (!strcmp(sim_fault(), "config_error") ||
		(sim_num(train, "gradient_accumulation", 1) > 1 && sim_num(train, "gradient_accumulation_steps", 1) > 1))
		sim_fail(&r, "ValueError", "gradient_accumulation and gradient_accumulation_steps are mutually exclusive");
	sim_setup(&r);
	if (sim_gpu(&r) != 0)
		sim_fail(&r, "RuntimeError", "No CUDA GPUs are available");

	sim_out("#############################################");
	sim_out("# Running job: %s", r.name);
	sim_out("#############################################");
	sim_out("%s", "");
	sim_out("%s", "");
	sim_out("Running  1 process");
	sim_load(&r);

	char latest[8192] = "";
	long start = sim_latest_save(&r, latest, sizeof(latest));
	if (start >= 0) {
		sim_out("#### IMPORTANT RESUMING FROM %s ####", latest);
		sim_out("Loading from %s", latest);
		sim_out("Found step %ld in metadata, starting from there", start);
	} else {
		start = 0;
		sim_mkdirs(r.run_dir);
	}
	sim_datasets(&r);

	if (!r.baseline) {
		sim_out("Skipping first sample due to config setting");
	} else if (start <= 1) {
		sim_out("Generating baseline samples before training");
		sim_sample(&r, PH_BASELINE, r.need.baseline);
	}
	sim_train(&r, start < r.steps ? start : r.steps);
	if (r.sampling)
		sim_sample(&r, PH_SAMPLE, r.need.sample);
	sim_out("%s", "");
	sim_save(&r, r.steps, 1);
	r.phase = PH_DONE;
	sim_out("%s", "");
	sim_out("========================================");
	sim_out("Result:");
	sim_out(" - 1 completed job");
	sim_out("========================================");
	sim_exit(&r, 0);
out:
	json_decref(r.file);
	return rc;
}
