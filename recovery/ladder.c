/* The rollback ladders of guide section 6 and the scale-up order of guide section 7, as static
 * tables. A rung or setting is one function that rewrites an AI Toolkit config file and records
 * (path, old, new); the plans say which rungs a failure class tries first. Never touches lr,
 * optimizer or anything else that changes what is learned. */
#include "ladder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jpath.h"
#include "util.h"

#define P0 "config.process[0]"
#define CONSERVATIVE_BUCKET 768
#define CONSERVATIVE_FRAMES 33

bool ladder_set(json_t *file, json_t *changes, const char *path, json_t *nv)
{
	json_t *old = jpath_get(file, path);
	json_t *rec;

	if ((!old && !nv) || (old && nv && json_equal(old, nv))) {
		json_decref(nv);
		return false;
	}
	rec = json_pack("{s:s, s:O?, s:O?}", "path", path, "old", old, "new", nv);
	if (!rec)
		rec = json_pack("{s:s, s:n, s:n}", "path", path, "old", "new");
	if (rec)
		json_array_append_new(changes, rec);
	if (nv) {
		if (jpath_set(file, path, nv) < 0)
			return false;
	} else {
		jpath_del(file, path);
	}
	return true;
}

static bool set_int(json_t *file, json_t *changes, const char *path, long long v)
{
	return ladder_set(file, changes, path, json_integer(v));
}

static json_t *datasets(const json_t *file)
{
	return jpath_get(file, P0 ".datasets");
}

int ladder_frame_grid(const json_t *file)
{
	const char *arch = jpath_str(file, P0 ".model.arch", "");

	if (!strncasecmp(arch, "wan", 3))
		return 4;
	if (!strncasecmp(arch, "ltx", 3))
		return 8;
	return 1;
}

static long long snap_down(long long n, int grid)
{
	return grid <= 1 ? n : ((n - 1) / grid) * grid + 1;
}

long long ladder_frames_down(long long n, int grid)
{
	long long m;

	if (n <= LADDER_FRAMES_FLOOR)
		return n;
	m = snap_down((n - 1) / 2 + 1, grid);
	return m < LADDER_FRAMES_FLOOR ? LADDER_FRAMES_FLOOR : m;
}

/* One grid step up from cur toward target: the next value of target's own step-down sequence. */
static long long frames_up(long long cur, long long target, int grid)
{
	long long v = target, best = target;

	while (v > cur) {
		best = v;
		if (ladder_frames_down(v, grid) == v)
			break;
		v = ladder_frames_down(v, grid);
	}
	return best;
}

static long long res_max(const json_t *res)
{
	size_t i;
	json_t *x;
	long long m = 0;

	if (json_is_integer(res))
		return json_integer_value(res);
	json_array_foreach(res, i, x)
		if (json_is_integer(x) && json_integer_value(x) > m)
			m = json_integer_value(x);
	return m;
}

long long ladder_largest_bucket(const json_t *file)
{
	size_t i;
	json_t *d;
	long long m = 0, r;

	json_array_foreach(datasets(file), i, d) {
		r = res_max(json_object_get(d, "resolution"));
		if (r > m)
			m = r;
	}
	return m > 0 ? m : 512;
}

/* ---- the rungs (guide section 6; the fixes of section 3) ---- */

/* Fix A: gradient checkpointing on (AI Toolkit's default is on; only an explicit false counts). */
static bool rung_checkpointing(json_t *f, json_t *ch)
{
	if (jpath_bool(f, P0 ".train.gradient_checkpointing", 1))
		return false;
	return ladder_set(f, ch, P0 ".train.gradient_checkpointing", json_true());
}

/* The largest batch of a config: train.batch_size or a per-dataset override, whichever is larger;
 * the quantity the batch rung multiplies accumulation by, so scale-up divides by the same one. */
static long long max_batch(const json_t *f)
{
	long long eff = jpath_int(f, P0 ".train.batch_size", 1), b;
	size_t i;
	json_t *d;

	json_array_foreach(datasets(f), i, d) {
		b = jpath_int(d, "batch_size", 1);
		if (b > eff)
			eff = b;
	}
	return eff;
}

/* Fix B: batch size 1, gradient accumulation multiplied so batch x accumulation stays the same; the
 * legacy gradient_accumulation_steps is folded into gradient_accumulation, never both set. */
static bool rung_batch(json_t *f, json_t *ch)
{
	long long eff = max_batch(f), acc;
	long long ga = jpath_int(f, P0 ".train.gradient_accumulation", 1);
	long long gas = jpath_int(f, P0 ".train.gradient_accumulation_steps", 1);
	size_t i;
	json_t *d;
	char path[128];

	if (eff <= 1)
		return false;
	acc = (ga > gas ? ga : gas) * eff;
	if (jpath_int(f, P0 ".train.batch_size", 1) > 1)
		set_int(f, ch, P0 ".train.batch_size", 1);
	json_array_foreach(datasets(f), i, d) {
		if (jpath_int(d, "batch_size", 1) > 1) {
			snprintf(path, sizeof(path), P0 ".datasets[%zu].batch_size", i);
			set_int(f, ch, path, 1);
		}
	}
	set_int(f, ch, P0 ".train.gradient_accumulation", acc);
	ladder_set(f, ch, P0 ".train.gradient_accumulation_steps", NULL);
	return true;
}

/* Fix C: drop the largest bucket of every dataset, one per attempt, never the last one. */
static bool rung_bucket(json_t *f, json_t *ch)
{
	size_t i, j;
	json_t *d, *res, *x, *nv;
	bool changed = false;
	char path[128];

	json_array_foreach(datasets(f), i, d) {
		long long m;
		res = json_object_get(d, "resolution");
		if (!json_is_array(res) || json_array_size(res) < 2)
			continue;
		m = res_max(res);
		nv = json_array();
		json_array_foreach(res, j, x)
			if (!(json_is_integer(x) && json_integer_value(x) == m))
				json_array_append(nv, x);
		if (json_array_size(nv) == 0) {
			json_decref(nv);
			continue;
		}
		snprintf(path, sizeof(path), P0 ".datasets[%zu].resolution", i);
		changed |= ladder_set(f, ch, path, nv);
	}
	return changed;
}

/* Fix E: fewer frames, datasets and samples, one grid step (4n+1 Wan, 8n+1 LTX), not below the floor. */
static bool frames_down_at(json_t *f, json_t *ch, const char *path, int grid)
{
	long long n = jpath_int(f, path, 1);

	if (n <= 1 || ladder_frames_down(n, grid) == n)
		return false;
	return set_int(f, ch, path, ladder_frames_down(n, grid));
}

static bool rung_frames(json_t *f, json_t *ch)
{
	int grid = ladder_frame_grid(f);
	size_t i;
	json_t *d;
	bool changed = false;
	char path[128];

	json_array_foreach(datasets(f), i, d) {
		snprintf(path, sizeof(path), P0 ".datasets[%zu].num_frames", i);
		changed |= frames_down_at(f, ch, path, grid);
	}
	changed |= frames_down_at(f, ch, P0 ".sample.num_frames", grid);
	json_array_foreach(jpath_get(f, P0 ".sample.samples"), i, d) {
		snprintf(path, sizeof(path), P0 ".sample.samples[%zu].num_frames", i);
		changed |= frames_down_at(f, ch, path, grid);
	}
	return changed;
}

static bool sampling_on(const json_t *f)
{
	return !jpath_bool(f, P0 ".train.disable_sampling", 0) && json_is_object(jpath_get(f, P0 ".sample"));
}

/* Width/height of one sample block (prefix is ".sample" or ".sample.samples[i]") down to cap on the
 * longest side, aspect ratio kept, multiples of 64. */
static bool sample_size_down(json_t *f, json_t *ch, const char *prefix, long long cap)
{
	char wp[160], hp[160];
	long long w, h, lng, nw, nh;
	bool changed = false;

	snprintf(wp, sizeof(wp), "%s.width", prefix);
	snprintf(hp, sizeof(hp), "%s.height", prefix);
	w = jpath_int(f, wp, 0);
	h = jpath_int(f, hp, 0);
	if (w <= 0 && h <= 0)
		return false;
	lng = w > h ? w : h;
	if (lng <= cap)
		return false;
	nw = w > 0 ? (w * cap / lng) / 64 * 64 : 0;
	nh = h > 0 ? (h * cap / lng) / 64 * 64 : 0;
	if (w > 0)
		changed |= set_int(f, ch, wp, nw < 64 ? 64 : nw);
	if (h > 0)
		changed |= set_int(f, ch, hp, nh < 64 ? 64 : nh);
	return changed;
}

static bool sample_steps_down(json_t *f, json_t *ch, const char *path)
{
	long long s = jpath_int(f, path, 0), n;

	if (s <= LADDER_SAMPLE_MIN_STEPS)
		return false;
	n = s / 2 < LADDER_SAMPLE_MIN_STEPS ? LADDER_SAMPLE_MIN_STEPS : s / 2;
	return set_int(f, ch, path, n);
}

/* Fix D, first half: cheaper previews: smaller size (not above the largest bucket), fewer sample steps,
 * fewer sample frames, sample less often; per-item overrides in sample.samples[] too. */
static bool rung_sample_cheaper(json_t *f, json_t *ch)
{
	long long cap = ladder_largest_bucket(f), every;
	int grid = ladder_frame_grid(f);
	size_t i;
	json_t *it;
	bool changed = false;
	char pre[128], path[160];

	if (!sampling_on(f))
		return false;
	if (cap > LADDER_SAMPLE_MIN_SIDE)
		cap = LADDER_SAMPLE_MIN_SIDE;
	cap = cap / 64 * 64 < 64 ? 64 : cap / 64 * 64;
	changed |= sample_size_down(f, ch, P0 ".sample", cap);
	changed |= sample_steps_down(f, ch, P0 ".sample.sample_steps");
	changed |= frames_down_at(f, ch, P0 ".sample.num_frames", grid);
	json_array_foreach(jpath_get(f, P0 ".sample.samples"), i, it) {
		snprintf(pre, sizeof(pre), P0 ".sample.samples[%zu]", i);
		changed |= sample_size_down(f, ch, pre, cap);
		snprintf(path, sizeof(path), "%s.sample_steps", pre);
		changed |= sample_steps_down(f, ch, path);
		snprintf(path, sizeof(path), "%s.num_frames", pre);
		changed |= frames_down_at(f, ch, path, grid);
	}
	/* Less often only together with a cheaper preview, so the rung ends. */
	every = jpath_int(f, P0 ".sample.sample_every", 0);
	if (changed && every > 0)
		set_int(f, ch, P0 ".sample.sample_every", every * 2);
	return changed;
}

/* Fix D, second half: train.disable_sampling (baseline, periodic and final samples off). */
static bool rung_sample_off(json_t *f, json_t *ch)
{
	if (jpath_bool(f, P0 ".train.disable_sampling", 0))
		return false;
	return ladder_set(f, ch, P0 ".train.disable_sampling", json_true());
}

/* Fix F: the model's low-memory path. */
static bool rung_low_vram(json_t *f, json_t *ch)
{
	return ladder_set(f, ch, P0 ".model.low_vram", json_true());
}

static bool rung_quantize(json_t *f, json_t *ch)
{
	bool a = ladder_set(f, ch, P0 ".model.quantize", json_true());
	bool b = ladder_set(f, ch, P0 ".model.quantize_te", json_true());

	return a || b;
}

static bool rung_offload(json_t *f, json_t *ch)
{
	return ladder_set(f, ch, P0 ".model.layer_offloading", json_true());
}

static const struct ladder_rung R_CHECKPOINTING = { "gradient_checkpointing", "guide 6 rung 1 (image), 3 Fix A", rung_checkpointing };
static const struct ladder_rung R_FRAMES = { "num_frames", "guide 6 rung 1 (video), 3 Fix E", rung_frames };
static const struct ladder_rung R_BATCH = { "batch_size", "guide 6 rung 2, 3 Fix B", rung_batch };
static const struct ladder_rung R_BUCKET = { "drop_bucket", "guide 6 rung 3, 3 Fix C", rung_bucket };
static const struct ladder_rung R_SAMPLE_CHEAPER = { "cheaper_sampling", "guide 6 rung 4, 3 Fix D", rung_sample_cheaper };
static const struct ladder_rung R_SAMPLE_OFF = { "disable_sampling", "guide 6 rung 4, 3 Fix D", rung_sample_off };
static const struct ladder_rung R_LOW_VRAM = { "low_vram", "guide 6 rung 5, 3 Fix F", rung_low_vram };
static const struct ladder_rung R_QUANTIZE = { "quantize", "guide 6 rung 5, 3 Fix F", rung_quantize };
static const struct ladder_rung R_OFFLOAD = { "layer_offloading", "guide 6 rung 5 (video), 3 Fix F", rung_offload };

/* Guide section 6, one change per retry, a rung that changes nothing is skipped. Checkpointing leads
 * both ladders (the guide's checklist: "na dúvida, deixe ativado"); it is a no-op when already on. */
static const struct ladder_rung *const LADDER_IMAGE[] = {
	&R_CHECKPOINTING, &R_BATCH, &R_BUCKET, &R_SAMPLE_CHEAPER, &R_SAMPLE_OFF, &R_LOW_VRAM, &R_QUANTIZE, &R_OFFLOAD, NULL,
};
static const struct ladder_rung *const LADDER_VIDEO[] = {
	&R_CHECKPOINTING, &R_FRAMES, &R_BATCH, &R_BUCKET, &R_SAMPLE_CHEAPER, &R_SAMPLE_OFF, &R_LOW_VRAM, &R_OFFLOAD, &R_QUANTIZE, NULL,
};

/* What each failure class tries first (guide sections 2 and 4), then (when then_ladder) the job's ladder. */
static const struct ladder_rung *const FIRST_SAMPLING[] = { &R_SAMPLE_CHEAPER, &R_SAMPLE_OFF, NULL };
static const struct ladder_rung *const FIRST_LOW_MEMORY[] = { &R_LOW_VRAM, &R_QUANTIZE, &R_OFFLOAD, NULL };
static const struct ladder_rung *const FIRST_BUCKET[] = { &R_BUCKET, NULL };
static const struct ladder_rung *const FIRST_FRAMES[] = { &R_FRAMES, NULL };
static const struct ladder_rung *const FIRST_NONE[] = { NULL };

static const struct plan {
	const char *cls;
	const char *kind;                        /* "image", "video" or NULL for both */
	const struct ladder_rung *const *first;
	bool then_ladder;
} PLANS[] = {
	/* 2B: config-caused, first steps: walk the ladder. */
	{ "oom_train_early", NULL, FIRST_NONE, true },
	/* 2C: the preview is too expensive: the sampling rung first, whatever the ladder position. */
	{ "oom_sample", NULL, FIRST_SAMPLING, true },
	/* 2A: the model does not load: low-memory path only; a smaller batch does not fix a load. */
	{ "oom_load", NULL, FIRST_LOW_MEMORY, false },
	/* 2D: at the limit: the largest bucket (image) or the heaviest clips (video) first. */
	{ "oom_train_intermittent", "image", FIRST_BUCKET, true },
	{ "oom_train_intermittent", "video", FIRST_FRAMES, true },
};

static const struct ladder_rung *try_rungs(const struct ladder_rung *const *rungs, json_t *file, json_t *changes)
{
	for (; *rungs; rungs++) {
		json_t *copy = json_deep_copy(file);
		json_t *ch = json_array();
		bool changed = (*rungs)->apply(copy, ch);
		json_decref(copy);
		json_decref(ch);
		if (changed) {
			(*rungs)->apply(file, changes);
			return *rungs;
		}
	}
	return NULL;
}

const struct ladder_rung *ladder_step(const char *cls, bool video, json_t *file, json_t *changes)
{
	const char *kind = video ? "video" : "image";
	const struct ladder_rung *r;
	size_t i;

	for (i = 0; i < ARRAY_LEN(PLANS); i++) {
		if (strcmp(PLANS[i].cls, cls) || (PLANS[i].kind && strcmp(PLANS[i].kind, kind)))
			continue;
		r = try_rungs(PLANS[i].first, file, changes);
		if (!r && PLANS[i].then_ladder)
			r = try_rungs(video ? LADDER_VIDEO : LADDER_IMAGE, file, changes);
		return r;
	}
	return NULL;
}

int ladder_position(const struct ladder_rung *r, bool video)
{
	const struct ladder_rung *const *l = video ? LADDER_VIDEO : LADDER_IMAGE;
	int i;

	for (i = 0; r && l[i]; i++)
		if (l[i] == r)
			return i;
	return -1;
}

bool ladder_cap_steps(json_t *file, long long cap, json_t *changes)
{
	long long s = jpath_int(file, P0 ".train.steps", 0);

	if (cap <= 0 || (s > 0 && s <= cap))
		return false;
	return set_int(file, changes, P0 ".train.steps", cap);
}

/* ---- scale-up (guide section 7): one heavier setting per attempt ---- */

/* Sets path in cur back to what target has there (deleting it when target lacks it). */
static bool restore(json_t *cur, const json_t *target, json_t *ch, const char *path)
{
	json_t *t = jpath_get(target, path);

	return ladder_set(cur, ch, path, t ? json_deep_copy(t) : NULL);
}

static bool up_steps(json_t *cur, const json_t *target, const json_t *ceil, json_t *ch)
{
	(void)ceil;
	if (jpath_int(cur, P0 ".train.steps", 0) >= jpath_int(target, P0 ".train.steps", 0))
		return false;
	return restore(cur, target, ch, P0 ".train.steps");
}

static bool res_has(const json_t *res, long long v)
{
	size_t i;
	json_t *x;

	if (json_is_integer(res))
		return json_integer_value(res) == v;
	json_array_foreach(res, i, x)
		if (json_is_integer(x) && json_integer_value(x) == v)
			return true;
	return false;
}

/* One larger bucket back per dataset: the smallest of the removed ones. */
static bool up_bucket(json_t *cur, const json_t *target, const json_t *ceil, json_t *ch)
{
	(void)ceil;
	size_t i, j;
	json_t *d, *tres, *cres, *x, *nv;
	bool changed = false;
	char path[128];

	json_array_foreach(datasets(cur), i, d) {
		long long add = -1;
		cres = json_object_get(d, "resolution");
		tres = json_object_get(json_array_get(datasets(target), i), "resolution");
		if (!json_is_array(tres) || !json_is_array(cres))
			continue;
		json_array_foreach(tres, j, x)
			if (json_is_integer(x) && !res_has(cres, json_integer_value(x)) &&
			    (add < 0 || json_integer_value(x) < add))
				add = json_integer_value(x);
		if (add < 0)
			continue;
		nv = json_array();
		json_array_foreach(tres, j, x)
			if (json_is_integer(x) && (res_has(cres, json_integer_value(x)) || json_integer_value(x) == add))
				json_array_append(nv, x);
		snprintf(path, sizeof(path), P0 ".datasets[%zu].resolution", i);
		changed |= ladder_set(cur, ch, path, nv);
	}
	return changed;
}

static bool up_sampling_on(json_t *cur, const json_t *target, const json_t *ceil, json_t *ch)
{
	(void)ceil;
	if (!jpath_bool(cur, P0 ".train.disable_sampling", 0) || jpath_bool(target, P0 ".train.disable_sampling", 0))
		return false;
	return restore(cur, target, ch, P0 ".train.disable_sampling");
}

/* Restores the listed keys of the sample block and of every samples[] item. */
static bool restore_sample_keys(json_t *cur, const json_t *target, json_t *ch, const char *const *keys)
{
	size_t i;
	json_t *it;
	bool changed = false;
	char path[160];
	const char *const *k;

	if (jpath_bool(cur, P0 ".train.disable_sampling", 0))
		return false;
	for (k = keys; *k; k++) {
		snprintf(path, sizeof(path), P0 ".sample.%s", *k);
		changed |= restore(cur, target, ch, path);
	}
	json_array_foreach(jpath_get(cur, P0 ".sample.samples"), i, it) {
		for (k = keys; *k; k++) {
			snprintf(path, sizeof(path), P0 ".sample.samples[%zu].%s", i, *k);
			changed |= restore(cur, target, ch, path);
		}
	}
	return changed;
}

static bool up_sample_size(json_t *cur, const json_t *target, const json_t *ceil, json_t *ch)
{
	(void)ceil;
	static const char *const keys[] = { "width", "height", NULL };

	return restore_sample_keys(cur, target, ch, keys);
}

static bool up_sample_rate(json_t *cur, const json_t *target, const json_t *ceil, json_t *ch)
{
	(void)ceil;
	static const char *const keys[] = { "sample_steps", "sample_every", NULL };

	return restore_sample_keys(cur, target, ch, keys);
}

/* One grid step up from cur toward target, below ceil (a frame count known to fail; <= 0: none):
 * where the next step would reach the ceiling, the midpoint on the grid instead (issue 16.2: 29 or
 * 33 between 21 and 41, never the known failure). */
static bool frames_up_at(json_t *cur, const json_t *target, json_t *ch, const char *path, int grid, long long ceil)
{
	long long c = jpath_int(cur, path, 1), t = jpath_int(target, path, 1), n;

	if (c >= t)
		return false;
	n = frames_up(c, t, grid);
	if (ceil > 0 && n >= ceil)
		n = snap_down(c + (ceil - c) / 2, grid);
	if (n <= c)
		return false;
	return set_int(cur, ch, path, n);
}

/* The frame ceiling of dataset i: the ceiling itself, or its i-th element for several datasets. */
static long long frames_ceiling(const json_t *ceil, size_t i)
{
	if (json_is_array(ceil))
		ceil = json_array_get(ceil, i);
	return json_is_integer(ceil) ? json_integer_value(ceil) : 0;
}

static bool up_frames(json_t *cur, const json_t *target, const json_t *ceil, json_t *ch)
{
	int grid = ladder_frame_grid(target);
	size_t i;
	json_t *d;
	bool changed = false;
	char path[128];

	json_array_foreach(datasets(cur), i, d) {
		snprintf(path, sizeof(path), P0 ".datasets[%zu].num_frames", i);
		changed |= frames_up_at(cur, target, ch, path, grid, frames_ceiling(ceil, i));
	}
	changed |= frames_up_at(cur, target, ch, P0 ".sample.num_frames", grid, frames_ceiling(ceil, 0));
	json_array_foreach(jpath_get(cur, P0 ".sample.samples"), i, d) {
		snprintf(path, sizeof(path), P0 ".sample.samples[%zu].num_frames", i);
		changed |= frames_up_at(cur, target, ch, path, grid, frames_ceiling(ceil, 0));
	}
	return changed;
}

/* Batch doubles toward the target while accumulation is divided so batch x accumulation stays the
 * target's; at the target the accumulation keys are restored exactly as the user wrote them. */
/* Guide 7 step 5: double the batch toward the target, dividing accumulation so batch x accumulation
 * stays what the target asked for; the last step restores the target's own batch keys exactly. */
static bool up_batch(json_t *cur, const json_t *target, const json_t *ceil, json_t *ch)
{
	(void)ceil;
	long long cb = max_batch(cur), tb = max_batch(target), nb, b;
	long long tga = jpath_int(target, P0 ".train.gradient_accumulation", 1);
	long long tgas = jpath_int(target, P0 ".train.gradient_accumulation_steps", 1);
	long long product = tb * (tga > tgas ? tga : tgas);
	bool changed = false;
	size_t i;
	json_t *d;
	char path[128];

	if (cb >= tb)
		return false;
	nb = cb * 2 < tb ? cb * 2 : tb;
	if (nb < tb && product % nb)
		nb = tb;
	if (nb == tb) {
		changed |= restore(cur, target, ch, P0 ".train.batch_size");
		json_array_foreach(datasets(cur), i, d) {
			snprintf(path, sizeof(path), P0 ".datasets[%zu].batch_size", i);
			changed |= restore(cur, target, ch, path);
		}
		changed |= restore(cur, target, ch, P0 ".train.gradient_accumulation");
		changed |= restore(cur, target, ch, P0 ".train.gradient_accumulation_steps");
		return changed;
	}
	b = jpath_int(target, P0 ".train.batch_size", 1);
	changed |= set_int(cur, ch, P0 ".train.batch_size", b < nb ? b : nb);
	json_array_foreach(datasets(cur), i, d) {
		snprintf(path, sizeof(path), P0 ".datasets[%zu].batch_size", i);
		if (!jpath_get(target, path))
			continue;
		b = jpath_int(target, path, 1);
		changed |= set_int(cur, ch, path, b < nb ? b : nb);
	}
	changed |= set_int(cur, ch, P0 ".train.gradient_accumulation", product / nb);
	changed |= ladder_set(cur, ch, P0 ".train.gradient_accumulation_steps", NULL);
	return changed;
}

/* ---- what a setting is worth in a config (results, ceilings) ---- */

/* One value per dataset: the value itself for one dataset, else an array (new reference). */
static json_t *per_dataset(const json_t *f, const char *key, long long dflt)
{
	json_t *out = json_array(), *d, *v;
	size_t i;

	json_array_foreach(datasets(f), i, d) {
		v = json_object_get(d, key);
		json_array_append_new(out, v ? json_deep_copy(v) : json_integer(dflt));
	}
	if (json_array_size(out) == 1) {
		v = json_incref(json_array_get(out, 0));
		json_decref(out);
		return v;
	}
	return out;
}

static json_t *v_steps(const json_t *f) { return json_integer(jpath_int(f, P0 ".train.steps", 0)); }
static json_t *v_bucket(const json_t *f) { return per_dataset(f, "resolution", 512); }
static json_t *v_sampling_on(const json_t *f) { return json_boolean(sampling_on(f)); }
static json_t *v_frames(const json_t *f) { return per_dataset(f, "num_frames", 1); }
static json_t *v_batch(const json_t *f) { return json_integer(max_batch(f)); }

static json_t *v_sample_size(const json_t *f)
{
	return json_pack("{s:I, s:I}", "width", (json_int_t)jpath_int(f, P0 ".sample.width", 0), "height",
			 (json_int_t)jpath_int(f, P0 ".sample.height", 0));
}

static json_t *v_sample_rate(const json_t *f)
{
	return json_pack("{s:I, s:I}", "sample_steps", (json_int_t)jpath_int(f, P0 ".sample.sample_steps", 0),
			 "sample_every", (json_int_t)jpath_int(f, P0 ".sample.sample_every", 0));
}

static json_t *v_checkpointing(const json_t *f)
{
	return json_boolean(jpath_bool(f, P0 ".train.gradient_checkpointing", 1));
}

static json_t *v_low_vram(const json_t *f) { return json_boolean(jpath_bool(f, P0 ".model.low_vram", 0)); }
static json_t *v_quantize(const json_t *f) { return json_boolean(jpath_bool(f, P0 ".model.quantize", 0)); }
static json_t *v_offload(const json_t *f) { return json_boolean(jpath_bool(f, P0 ".model.layer_offloading", 0)); }

static const struct ladder_setting S_STEPS = { "steps", "guide 7 step 2", up_steps, v_steps, false };
static const struct ladder_setting S_BUCKET = { "bucket", "guide 7 step 3, 3 Fix C", up_bucket, v_bucket, false };
static const struct ladder_setting S_SAMPLING_ON = { "sampling_on", "guide 7 step 4, 3 Fix D", up_sampling_on,
						     v_sampling_on, false };
static const struct ladder_setting S_SAMPLE_SIZE = { "sample_size", "guide 7 step 4", up_sample_size, v_sample_size, false };
static const struct ladder_setting S_SAMPLE_RATE = { "sample_rate", "guide 7 step 4", up_sample_rate, v_sample_rate, false };
static const struct ladder_setting S_FRAMES = { "num_frames", "guide 7 step 5 (longer video)", up_frames, v_frames, true };
static const struct ladder_setting S_BATCH = { "batch_size", "guide 7 step 5 (larger batch)", up_batch, v_batch, false };

/* Guide 7 step 1: the memory settings a rung applied stay after the success (no step back). */
static const struct ladder_setting K_CHECKPOINTING = { "gradient_checkpointing", "guide 7 step 1", NULL, v_checkpointing, false };
static const struct ladder_setting K_LOW_VRAM = { "low_vram", "guide 7 step 1", NULL, v_low_vram, false };
static const struct ladder_setting K_QUANTIZE = { "quantize", "guide 7 step 1", NULL, v_quantize, false };
static const struct ladder_setting K_OFFLOAD = { "layer_offloading", "guide 7 step 1", NULL, v_offload, false };
static const struct ladder_setting *const KEPT[] = { &K_CHECKPOINTING, &K_LOW_VRAM, &K_QUANTIZE, &K_OFFLOAD, NULL };

/* Guide section 7: memory settings stay (checkpointing, low_vram, quantization, offloading are not
 * here); steps, one larger bucket, richer sampling, only then batch or, for video, frames. */
static const struct ladder_setting *const SCALE_UP_IMAGE[] = {
	&S_STEPS, &S_BUCKET, &S_SAMPLING_ON, &S_SAMPLE_SIZE, &S_SAMPLE_RATE, &S_BATCH, NULL,
};
static const struct ladder_setting *const SCALE_UP_VIDEO[] = {
	&S_STEPS, &S_BUCKET, &S_SAMPLING_ON, &S_SAMPLE_SIZE, &S_SAMPLE_RATE, &S_FRAMES, &S_BATCH, NULL,
};

const struct ladder_setting *ladder_scale_up(bool video, json_t *cur, const json_t *target,
					     const json_t *ceilings, bool steps_only, json_t *changes)
{
	const struct ladder_setting *const *s;

	for (s = video ? SCALE_UP_VIDEO : SCALE_UP_IMAGE; *s; s++) {
		const json_t *ceil = json_object_get(ceilings, (*s)->name);
		if (steps_only && *s != &S_STEPS)
			continue;
		if (ceil && !(*s)->below_ceiling)
			continue;
		if ((*s)->step(cur, target, ceil, changes))
			return *s;
	}
	return NULL;
}

const struct ladder_setting *const *ladder_scale_up_order(bool video)
{
	return video ? SCALE_UP_VIDEO : SCALE_UP_IMAGE;
}

const struct ladder_setting *const *ladder_kept_settings(void)
{
	return KEPT;
}

const struct ladder_setting *ladder_setting_named(const char *name)
{
	const struct ladder_setting *const *s;

	for (s = SCALE_UP_VIDEO; name && *s; s++)
		if (!strcmp((*s)->name, name))
			return *s;
	return NULL;
}

bool ladder_conservative(const json_t *file, const char **why)
{
	const char *w = NULL;
	size_t i;
	json_t *d;

	if (jpath_int(file, P0 ".train.batch_size", 1) > 1)
		w = "batch_size above 1";
	else if (!jpath_bool(file, P0 ".train.gradient_checkpointing", 1))
		w = "gradient checkpointing off";
	else if (ladder_largest_bucket(file) > CONSERVATIVE_BUCKET)
		w = "a bucket above 768";
	else if (jpath_int(file, P0 ".sample.num_frames", 1) > CONSERVATIVE_FRAMES)
		w = "more than 33 sample frames";
	json_array_foreach(datasets(file), i, d) {
		if (w)
			break;
		if (jpath_int(d, "batch_size", 1) > 1)
			w = "a dataset batch_size above 1";
		else if (jpath_int(d, "num_frames", 1) > CONSERVATIVE_FRAMES)
			w = "more than 33 frames";
	}
	if (why)
		*why = w;
	return w == NULL;
}

/* ---- comparing runs by what they ask of GPU memory (issue 16.2) ---- */

/* What a config asks of GPU memory, setting by setting (guide 3); larger asks more. */
struct mem_ask {
	bool checkpointing, sampling;
	bool saves[6];              /* low_vram, quantize, quantize_te, layer_offloading, cache_te, unload_te */
	double offload_pct[2];      /* transformer, text encoder; only with layer_offloading */
	long long sample_area, sample_steps, sample_frames;
};

/* Paths that never change GPU memory, or that mem_ask (and the per-dataset checks) already weigh:
 * left out of the "everything else is the same" comparison. */
static const char *const NOT_COMPARED[] = {
	"config.name", P0 ".training_folder", P0 ".train.steps", P0 ".train.gradient_accumulation",
	P0 ".train.gradient_accumulation_steps", P0 ".train.batch_size", P0 ".train.gradient_checkpointing",
	P0 ".train.disable_sampling", P0 ".train.cache_text_embeddings", P0 ".train.unload_text_encoder",
	P0 ".model.low_vram", P0 ".model.quantize", P0 ".model.quantize_te", P0 ".model.layer_offloading",
	P0 ".model.layer_offloading_transformer_percent", P0 ".model.layer_offloading_text_encoder_percent",
	P0 ".sample.width", P0 ".sample.height", P0 ".sample.sample_steps", P0 ".sample.sample_every",
	P0 ".sample.num_frames", P0 ".sample.prompts", NULL,
};
static const char *const DATASET_KEYS[] = { "batch_size", "resolution", "num_frames", NULL };
static const char *const SAMPLE_ITEM_KEYS[] = { "width", "height", "sample_steps", "num_frames", "prompt", NULL };

static double num_at(const json_t *f, const char *path, double dflt)
{
	json_t *v = jpath_get(f, path);

	return json_is_number(v) ? json_number_value(v) : dflt;
}

static void mem_ask_of(const json_t *f, struct mem_ask *m)
{
	static const char *const saves[] = { P0 ".model.low_vram", P0 ".model.quantize", P0 ".model.quantize_te",
					     P0 ".model.layer_offloading", P0 ".train.cache_text_embeddings",
					     P0 ".train.unload_text_encoder" };
	long long w0 = jpath_int(f, P0 ".sample.width", 512), h0 = jpath_int(f, P0 ".sample.height", 512);
	long long st0 = jpath_int(f, P0 ".sample.sample_steps", 20), fr0 = jpath_int(f, P0 ".sample.num_frames", 1);
	json_t *items = jpath_get(f, P0 ".sample.samples"), *it;
	size_t i;

	memset(m, 0, sizeof(*m));
	m->checkpointing = jpath_bool(f, P0 ".train.gradient_checkpointing", 1);
	for (i = 0; i < ARRAY_LEN(saves); i++)
		m->saves[i] = jpath_bool(f, saves[i], i == 2 ? jpath_bool(f, P0 ".model.quantize", 0) : 0);
	m->offload_pct[0] = num_at(f, P0 ".model.layer_offloading_transformer_percent", 1);
	m->offload_pct[1] = num_at(f, P0 ".model.layer_offloading_text_encoder_percent", 1);
	m->sampling = sampling_on(f);
	m->sample_area = w0 * h0;
	m->sample_steps = st0;
	m->sample_frames = fr0;
	json_array_foreach(items, i, it) {
		long long w = jpath_int(it, "width", w0), h = jpath_int(it, "height", h0);
		if (w * h > m->sample_area)
			m->sample_area = w * h;
		if (jpath_int(it, "sample_steps", st0) > m->sample_steps)
			m->sample_steps = jpath_int(it, "sample_steps", st0);
		if (jpath_int(it, "num_frames", fr0) > m->sample_frames)
			m->sample_frames = jpath_int(it, "num_frames", fr0);
	}
}

/* Buckets of a dataset, largest first, into out (at most n); returns how many. */
static size_t buckets_desc(const json_t *res, long long *out, size_t n)
{
	size_t k = 0, i, j;
	json_t *x;

	if (json_is_integer(res) && n)
		out[k++] = json_integer_value(res);
	json_array_foreach(res, i, x)
		if (json_is_integer(x) && k < n)
			out[k++] = json_integer_value(x);
	for (i = 1; i < k; i++)
		for (j = i; j > 0 && out[j] > out[j - 1]; j--) {
			long long t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return k;
}

/* Dataset i of a asks no more than dataset i of b: batch, frames, and each bucket (largest first). */
static bool dataset_no_larger(const json_t *fa, const json_t *fb, size_t i)
{
	const json_t *a = json_array_get(datasets(fa), i), *b = json_array_get(datasets(fb), i);
	long long ba[16], bb[16];
	size_t na, nb, k;

	if (jpath_int(a, "batch_size", jpath_int(fa, P0 ".train.batch_size", 1)) >
	    jpath_int(b, "batch_size", jpath_int(fb, P0 ".train.batch_size", 1)))
		return false;
	if (jpath_int(a, "num_frames", 1) > jpath_int(b, "num_frames", 1))
		return false;
	na = buckets_desc(json_object_get(a, "resolution"), ba, ARRAY_LEN(ba));
	nb = buckets_desc(json_object_get(b, "resolution"), bb, ARRAY_LEN(bb));
	if (na > nb)
		return false;
	for (k = 0; k < na; k++)
		if (ba[k] > bb[k])
			return false;
	return true;
}

/* A copy of f without the paths compared setting by setting. */
static json_t *rest_of(const json_t *f)
{
	json_t *c = json_deep_copy(f), *x;
	const char *const *k;
	size_t i;

	for (k = NOT_COMPARED; *k; k++)
		jpath_del(c, *k);
	json_array_foreach(datasets(c), i, x)
		for (k = DATASET_KEYS; *k; k++)
			json_object_del(x, *k);
	json_array_foreach(jpath_get(c, P0 ".sample.samples"), i, x)
		for (k = SAMPLE_ITEM_KEYS; *k; k++)
			json_object_del(x, *k);
	return c;
}

bool ladder_no_larger(const json_t *a, const json_t *b)
{
	struct mem_ask ma, mb;
	json_t *ra, *rb;
	size_t i, n = json_array_size(datasets(a));
	bool same;

	if (!json_is_object(a) || !json_is_object(b) || n != json_array_size(datasets(b)))
		return false;
	mem_ask_of(a, &ma);
	mem_ask_of(b, &mb);
	if (!ma.checkpointing && mb.checkpointing)
		return false;
	for (i = 0; i < ARRAY_LEN(ma.saves); i++)
		if (mb.saves[i] && !ma.saves[i])
			return false;
	if (ma.saves[3] && mb.saves[3] && (ma.offload_pct[0] < mb.offload_pct[0] || ma.offload_pct[1] < mb.offload_pct[1]))
		return false;
	if (ma.sampling && (!mb.sampling || ma.sample_area > mb.sample_area || ma.sample_steps > mb.sample_steps ||
			    ma.sample_frames > mb.sample_frames))
		return false;
	for (i = 0; i < n; i++)
		if (!dataset_no_larger(a, b, i))
			return false;
	ra = rest_of(a);
	rb = rest_of(b);
	same = json_equal(ra, rb);
	json_decref(ra);
	json_decref(rb);
	return same;
}

json_t *ladder_summary(const json_t *file)
{
	json_t *s = json_object(), *res = json_array(), *frames = json_array(), *d;
	size_t i;

	json_array_foreach(datasets(file), i, d) {
		json_array_append(res, json_object_get(d, "resolution") ? json_object_get(d, "resolution") : json_null());
		json_array_append_new(frames, json_integer(jpath_int(d, "num_frames", 1)));
	}
	json_object_set_new(s, "steps", json_integer(jpath_int(file, P0 ".train.steps", 0)));
	json_object_set_new(s, "batch_size", json_integer(jpath_int(file, P0 ".train.batch_size", 1)));
	json_object_set_new(s, "gradient_accumulation",
			    json_integer(jpath_int(file, P0 ".train.gradient_accumulation", 1) *
					 jpath_int(file, P0 ".train.gradient_accumulation_steps", 1)));
	json_object_set_new(s, "resolution", res);
	json_object_set_new(s, "num_frames", frames);
	json_object_set_new(s, "sampling", json_boolean(sampling_on(file)));
	json_object_set_new(s, "sample_width", json_integer(jpath_int(file, P0 ".sample.width", 0)));
	json_object_set_new(s, "sample_height", json_integer(jpath_int(file, P0 ".sample.height", 0)));
	json_object_set_new(s, "sample_steps", json_integer(jpath_int(file, P0 ".sample.sample_steps", 0)));
	json_object_set_new(s, "sample_every", json_integer(jpath_int(file, P0 ".sample.sample_every", 0)));
	json_object_set_new(s, "gradient_checkpointing",
			    json_boolean(jpath_bool(file, P0 ".train.gradient_checkpointing", 1)));
	json_object_set_new(s, "low_vram", json_boolean(jpath_bool(file, P0 ".model.low_vram", 0)));
	json_object_set_new(s, "quantize", json_boolean(jpath_bool(file, P0 ".model.quantize", 0)));
	json_object_set_new(s, "layer_offloading", json_boolean(jpath_bool(file, P0 ".model.layer_offloading", 0)));
	return s;
}

static void diff_at(const json_t *a, const json_t *b, const char *path, json_t *changes)
{
	const char *k;
	json_t *v;
	size_t i;
	char *sub;

	if (a && b && json_equal(a, b))
		return;
	if (json_is_object(a) && json_is_object(b)) {
		json_object_foreach((json_t *)a, k, v) {
			sub = *path ? xasprintf("%s.%s", path, k) : xstrdup(k);
			diff_at(v, json_object_get(b, k), sub, changes);
			free(sub);
		}
		json_object_foreach((json_t *)b, k, v) {
			if (json_object_get(a, k))
				continue;
			sub = *path ? xasprintf("%s.%s", path, k) : xstrdup(k);
			diff_at(NULL, v, sub, changes);
			free(sub);
		}
		return;
	}
	if (json_is_array(a) && json_is_array(b) && json_array_size(a) == json_array_size(b) &&
	    json_is_object(json_array_get(a, 0))) {
		for (i = 0; i < json_array_size(a); i++) {
			sub = xasprintf("%s[%zu]", path, i);
			diff_at(json_array_get(a, i), json_array_get(b, i), sub, changes);
			free(sub);
		}
		return;
	}
	json_array_append_new(changes, json_pack("{s:s, s:O?, s:O?}", "path", path, "old", a, "new", b));
}

void ladder_diff(const json_t *old, const json_t *new, json_t *changes)
{
	diff_at(old, new, "", changes);
}
