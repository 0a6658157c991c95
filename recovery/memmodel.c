/* The memory model of issue 12: reads a config's memory-relevant settings (FEATURES), turns ended
 * attempts into OBSERVATIONS, fits one PROFILE per (arch, GPU memory class) by least squares over a
 * few derived terms (over the arch's observations on every class: a config needs what it needs), and predicts a candidate config's peak with its evidence. Owns the formula and
 * the evidence rules; knows nothing of ladders, decisions or storage. Pure code; no I/O. */
#include "memmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "jpath.h"
#include "util.h"

#define P0 "config.process[0]"
#define MM_MIN_MARGIN_MIB 256   /* never predict closer to the limit than this */
#define MM_RESERVE_MIB 64       /* driver and allocator slack: usable = total - this */
#define MM_MAX_LIST 40          /* fits/ooms kept in a profile for the evidence rules */
#define MM_MIN_EXACT 3          /* exact data points a profile needs before it predicts */
#define MM_MAX_UNKNOWNS 14      /* 8 load terms + train, its attention term, without checkpointing, sample, its
				 * attention term, its denoising steps */
#define MM_MPX (1024.0 * 1024.0)

/* ---- features ---- */

static long long max_ll(long long a, long long b)
{
	return a > b ? a : b;
}

static long long res_of(const json_t *res, long long *count)
{
	size_t i;
	json_t *x;
	long long m = 0;

	*count = 0;
	if (json_is_integer(res)) {
		*count = 1;
		return json_integer_value(res);
	}
	json_array_foreach(res, i, x) {
		if (!json_is_integer(x))
			continue;
		(*count)++;
		m = max_ll(m, json_integer_value(x));
	}
	return m;
}

json_t *memmodel_features(const json_t *config, const char *kind)
{
	const json_t *p = jpath_get(config, P0);
	const json_t *ds = json_object_get(p, "datasets"), *d, *sample = json_object_get(p, "sample"), *items, *it;
	long long res_max = 0, res_n = 1, n, r, batch = jpath_int(p, "train.batch_size", 1), frames = 1;
	long long sw = jpath_int(sample, "width", 512), sh = jpath_int(sample, "height", 512);
	long long ss = jpath_int(sample, "sample_steps", 20), sf = jpath_int(sample, "num_frames", 1);
	long long spx = 0, ssteps = 0, sframes = 0;
	bool sampling = !jpath_bool(p, "train.disable_sampling", 0) && json_is_object(sample);
	bool image = kind && !strcmp(kind, "image");
	size_t i, nitems;

	json_array_foreach(ds, i, d) {
		r = res_of(json_object_get(d, "resolution"), &n);
		if (r > res_max) {
			res_max = r;
			res_n = n;
		}
		batch = max_ll(batch, jpath_int(d, "batch_size", 1));
		frames = max_ll(frames, jpath_int(d, "num_frames", 1));
	}
	if (res_max <= 0) {
		res_max = 512;
		res_n = 1;
	}
	items = json_object_get(sample, "samples");
	nitems = json_is_array(items) ? json_array_size(items) : 0;
	for (i = 0; sampling && i < (nitems ? nitems : 1); i++) {
		it = nitems ? json_array_get(items, i) : NULL;
		long long px = jpath_int(it, "width", sw) * jpath_int(it, "height", sh);
		long long st = jpath_int(it, "sample_steps", ss), f = jpath_int(it, "num_frames", sf);
		if (px > spx || (px == spx && st > ssteps)) {
			spx = px;
			ssteps = st;
		}
		sframes = max_ll(sframes, f);
	}
	if (image)
		frames = sframes = sampling ? 1 : 0;
	if (!sampling)
		sframes = 0;
	return json_pack("{s:I, s:I, s:I, s:b, s:I, s:I, s:I, s:I, s:b, s:b, s:b, s:b}", "res_max", (json_int_t)res_max,
			 "res_n", (json_int_t)res_n, "batch", (json_int_t)max_ll(batch, 1), "grad_ckpt",
			 jpath_bool(p, "train.gradient_checkpointing", 1), "frames", (json_int_t)max_ll(image ? 1 : frames, 1),
			 "sample_px", (json_int_t)spx, "sample_steps", (json_int_t)ssteps, "sample_frames",
			 (json_int_t)sframes, "sampling", sampling, "low_vram", jpath_bool(p, "model.low_vram", 0),
			 "quantize", jpath_bool(p, "model.quantize", 0), "offload",
			 jpath_bool(p, "model.layer_offloading", 0));
}

void memmodel_arch(const json_t *config, char *buf, size_t cap)
{
	static const struct { const char *flag, *arch; } legacy[] = {
		{ "is_flux", "flux" }, { "is_xl", "sdxl" }, { "is_v3", "sd3" },
	};
	const json_t *model = jpath_get(config, P0 ".model");
	const char *a = jpath_str(model, "arch", NULL);
	char *colon;
	size_t i;

	if (!cap)
		return;
	for (i = 0; !a && i < ARRAY_LEN(legacy); i++)
		if (jpath_bool(model, legacy[i].flag, 0))
			a = legacy[i].arch;
	snprintf(buf, cap, "%s", a && *a ? a : "unknown");
	colon = strchr(buf, ':');
	if (colon)
		*colon = '\0';
}

int memmodel_gpu_class(int gpu_mib)
{
	return gpu_mib <= 0 ? 0 : (int)((gpu_mib + 512) / 1024) * 1024;
}

bool memmodel_same_class(int a_mib, int b_mib)
{
	return a_mib > 0 && b_mib > 0 && (long long)llabs((long long)a_mib - b_mib) * 100 <= (long long)a_mib * MEMMODEL_CLASS_PCT;
}

int memmodel_need_mib(const json_t *facts)
{
	const json_t *oom = json_object_get(facts, "oom");
	long long alloc = jpath_int(oom, "allocated_by_pytorch_mib", -1), tried = jpath_int(oom, "tried_to_allocate_mib", -1);
	long long total = jpath_int(oom, "total_capacity_mib", -1);

	if (alloc >= 0 && tried >= 0)
		return (int)(alloc + tried);
	return total > 0 ? (int)total : -1;
}

const char *memmodel_outcome(const char *cls)
{
	static const char *const ooms[] = { "oom_train_early", "oom_sample", "oom_load", "oom_train_intermittent" };
	size_t i;

	if (!cls)
		return "other";
	if (!strcmp(cls, "success"))
		return "fit";
	for (i = 0; i < ARRAY_LEN(ooms); i++)
		if (!strcmp(cls, ooms[i]))
			return "oom";
	return "other";
}

json_t *memmodel_observation(const char *arch, int gpu_mib, const json_t *features, const char *cls,
			     const json_t *facts, long long job_id, long long attempt_id)
{
	const char *outcome = memmodel_outcome(cls);
	const json_t *peak = json_object_get(facts, "peak");
	const char *phase = jpath_str(peak, "phase", NULL);
	int need = memmodel_need_mib(facts);

	if (!strcmp(outcome, "oom"))
		phase = jpath_str(facts, "oom_phase", phase);
	return json_pack("{s:s, s:i, s:O, s:s, s:s?, s:o, s:o, s:I, s:I, s:n}", "arch", arch ? arch : "unknown",
			 "gpu_mib", gpu_mib, "features", features ? (json_t *)features : json_null(), "outcome", outcome,
			 "phase", phase,
			 "peak_mib", json_is_integer(json_object_get(peak, "mib")) ? json_integer(jpath_int(peak, "mib", 0)) : json_null(),
			 "need_mib", need > 0 && !strcmp(outcome, "oom") ? json_integer(need) : json_null(), "job_id",
			 (json_int_t)job_id, "attempt_id", (json_int_t)attempt_id, "at");
}

/* ---- the derived terms ---- */

/* Frames per latent frame: Wan and most video VAEs compress time 4x, LTX 8x. */
static int frame_grid(const char *arch)
{
	return arch && !strncasecmp(arch, "ltx", 3) ? 8 : 4;
}

static double latent_frames(long long f, int grid)
{
	return f <= 1 ? 1.0 : (double)((f - 1) / grid + 1);
}

struct terms {
	int combo;     /* bit 0 low_vram, 1 quantize, 2 offload: which load term */
	bool ckpt;     /* gradient checkpointing on */
	bool sampling;
	double xt;     /* training: (largest bucket / 1024)^2 x batch x latent frames, "megapixels" */
	double xq;     /* its attention term: batch x (megapixels of one item x latent frames)^2 */
	double xs;     /* sampling: sample w x h / 1024^2 x latent frames */
	double ss;     /* sample steps */
};

static struct terms terms_of(const json_t *f, const char *arch)
{
	struct terms t;
	int g = frame_grid(arch);
	double r = (double)jpath_int(f, "res_max", 512) / 1024.0;

	t.combo = (jpath_bool(f, "low_vram", 0) ? 1 : 0) | (jpath_bool(f, "quantize", 0) ? 2 : 0) |
		  (jpath_bool(f, "offload", 0) ? 4 : 0);
	t.ckpt = jpath_bool(f, "grad_ckpt", 1);
	t.sampling = jpath_bool(f, "sampling", 0) && jpath_int(f, "sample_px", 0) > 0;
	t.xt = r * r * (double)jpath_int(f, "batch", 1) * latent_frames(jpath_int(f, "frames", 1), g);
	t.xq = t.xt * r * r * latent_frames(jpath_int(f, "frames", 1), g);
	t.xs = t.sampling ? (double)jpath_int(f, "sample_px", 0) / MM_MPX * latent_frames(jpath_int(f, "sample_frames", 1), g) : 0;
	t.ss = (double)jpath_int(f, "sample_steps", 0);
	return t;
}

/* Unknowns: load[0..7] per memory-saving combination, then the slopes. The "2" terms are attention's
 * share: quadratic in the tokens of one item (pixels x latent frames), linear in the batch; a law
 * without it (sim/rung-sim-trainer.c) fits them to zero and they are dropped. */
enum { U_LOAD = 0, U_TRAIN = 8, U_TRAIN2 = 9, U_NOCKPT = 10, U_SAMPLE = 11, U_SAMPLE2 = 12, U_SSTEPS = 13 };

static const char *const COMBO_NAMES[8] = {
	"plain", "low_vram", "quantize", "low_vram+quantize", "offload", "low_vram+offload", "quantize+offload",
	"low_vram+quantize+offload",
};

/* The design row of one phase of one config: train, sample or load (load/save: the load term only). */
static void row_of(const struct terms *t, const char *phase, double *x)
{
	memset(x, 0, sizeof(double) * MM_MAX_UNKNOWNS);
	x[U_LOAD + t->combo] = 1;
	if (!phase || !strcmp(phase, "train")) {
		if (t->ckpt) {
			x[U_TRAIN] = t->xt;
			x[U_TRAIN2] = t->xq;
		} else {
			x[U_NOCKPT] = t->xt;
		}
	} else if (!strcmp(phase, "sample") || !strcmp(phase, "baseline_sample")) {
		x[U_SAMPLE] = t->xs;
		x[U_SAMPLE2] = t->xs * t->xs;
		x[U_SSTEPS] = t->xs * t->ss; /* a sampler that keeps per-step state (our simulator's) */
	}
}

struct row {
	double x[MM_MAX_UNKNOWNS];
	double y;
};

struct fitstate {
	struct row *rows;
	size_t n, cap;
	double coef[MM_MAX_UNKNOWNS];
	bool known[MM_MAX_UNKNOWNS];
};

static void add_row(struct fitstate *s, const double *x, double y)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 32;
		s->rows = realloc(s->rows, s->cap * sizeof(*s->rows));
		if (!s->rows)
			abort();
	}
	memcpy(s->rows[s->n].x, x, sizeof(double) * MM_MAX_UNKNOWNS);
	s->rows[s->n].y = y;
	s->n++;
}

/* Least squares over the columns that have data (use[j]), by Gaussian elimination on the normal
 * equations with a tiny ridge; unused columns get 0. False when the system is singular. */
static bool solve(struct fitstate *s, const bool *use)
{
	double a[MM_MAX_UNKNOWNS][MM_MAX_UNKNOWNS + 1];
	int idx[MM_MAX_UNKNOWNS], m = 0, i, j, k, piv;
	size_t r;

	for (j = 0; j < MM_MAX_UNKNOWNS; j++)
		if (use[j])
			idx[m++] = j;
	memset(a, 0, sizeof(a));
	for (r = 0; r < s->n; r++)
		for (i = 0; i < m; i++) {
			for (j = 0; j < m; j++)
				a[i][j] += s->rows[r].x[idx[i]] * s->rows[r].x[idx[j]];
			a[i][m] += s->rows[r].x[idx[i]] * s->rows[r].y;
		}
	for (i = 0; i < m; i++)
		a[i][i] += 1e-9 * (a[i][i] + 1.0);
	for (i = 0; i < m; i++) {
		piv = i;
		for (k = i + 1; k < m; k++)
			if (fabs(a[k][i]) > fabs(a[piv][i]))
				piv = k;
		if (fabs(a[piv][i]) < 1e-12)
			return false;
		for (j = 0; j <= m; j++) {
			double tmp = a[i][j];
			a[i][j] = a[piv][j];
			a[piv][j] = tmp;
		}
		for (k = 0; k < m; k++) {
			double f;
			if (k == i)
				continue;
			f = a[k][i] / a[i][i];
			for (j = i; j <= m; j++)
				a[k][j] -= f * a[i][j];
		}
	}
	memset(s->coef, 0, sizeof(s->coef));
	for (i = 0; i < m; i++)
		s->coef[idx[i]] = a[i][m] / a[i][i];
	return true;
}

static double dot(const double *x, const double *c)
{
	double v = 0;
	int j;

	for (j = 0; j < MM_MAX_UNKNOWNS; j++)
		v += x[j] * c[j];
	return v;
}

/* Fits with the columns that have data; drops the curvature term when the data cannot carry it
 * (fewer than 4 distinct training sizes) or when it comes out negative. */
/* A memory saver never adds memory: a combination's load is at least that of every measured
 * combination with more savers (and never below zero). A term resting on few rows can come out
 * lower (the slopes absorb it); it is raised to that bound. Supersets first (most savers first). */
static void clamp_loads(struct fitstate *s)
{
	static const int ORDER[8] = { 7, 6, 5, 3, 4, 2, 1, 0 }; /* by number of savers, most first */
	int i, c, k;

	for (i = 0; i < 8; i++) {
		c = ORDER[i];
		if (!s->known[U_LOAD + c])
			continue;
		if (s->coef[U_LOAD + c] < 0)
			s->coef[U_LOAD + c] = 0;
		for (k = 0; k < 8; k++)
			if (k != c && (k & c) == c && s->known[U_LOAD + k] && s->coef[U_LOAD + k] > s->coef[U_LOAD + c])
				s->coef[U_LOAD + c] = s->coef[U_LOAD + k];
	}
}

static bool fit_rows(struct fitstate *s)
{
	/* each attention term with its linear term: told apart only by rows of different item sizes */
	static const int CURVE[][2] = { { U_TRAIN2, U_TRAIN }, { U_SAMPLE2, U_SAMPLE }, { U_SSTEPS, U_SAMPLE } };
	bool use[MM_MAX_UNKNOWNS] = { false };
	double seen[8];
	int nseen, j, k, c;
	size_t r;

	for (r = 0; r < s->n; r++)
		for (j = 0; j < MM_MAX_UNKNOWNS; j++)
			if (s->rows[r].x[j] != 0)
				use[j] = true;
	for (c = 0; c < (int)ARRAY_LEN(CURVE); c++) {
		for (r = 0, nseen = 0; r < s->n && nseen < 8; r++) {
			double lin = s->rows[r].x[CURVE[c][1]], item;
			if (lin == 0)
				continue;
			item = s->rows[r].x[CURVE[c][0]] / lin;
			for (k = 0; k < nseen && fabs(seen[k] - item) > 1e-6; k++)
				;
			if (k == nseen)
				seen[nseen++] = item;
		}
		if (nseen < 3)
			use[CURVE[c][0]] = false;
	}
	if (!solve(s, use))
		return false;
	for (c = 0; c < (int)ARRAY_LEN(CURVE); c++)
		if (use[CURVE[c][0]] && s->coef[CURVE[c][0]] < 0) {
			use[CURVE[c][0]] = false;
			if (!solve(s, use))
				return false;
		}
	memcpy(s->known, use, sizeof(use));
	clamp_loads(s);
	return true;
}

/* ---- the profile ---- */

static bool obs_usable(const json_t *o, const char *arch)
{
	const char *out = jpath_str(o, "outcome", "other");

	/* every GPU class: what a config needs does not depend on the card it ran on */
	return !strcmp(jpath_str(o, "arch", ""), arch) && json_is_object(json_object_get(o, "features")) &&
	       (!strcmp(out, "fit") || !strcmp(out, "oom"));
}

/* Ceilings (guide 7) in the ladder's setting names: the largest value seen to fit, reported where
 * an attempt with a larger value ran out of memory here. */
static const struct { const char *setting, *feature; } CEILINGS[] = {
	{ "bucket", "res_max" }, { "batch_size", "batch" }, { "num_frames", "frames" }, { "sample_size", "sample_px" },
};

static json_t *ceilings_of(const json_t *fits, const json_t *ooms)
{
	json_t *c = json_object(), *o;
	size_t i, k;

	for (k = 0; k < ARRAY_LEN(CEILINGS); k++) {
		long long best = -1, worst = -1, v;
		json_array_foreach(fits, i, o)
			best = max_ll(best, jpath_int(o, CEILINGS[k].feature, -1));
		json_array_foreach(ooms, i, o) {
			v = jpath_int(o, CEILINGS[k].feature, -1);
			if (worst < 0 || v > worst)
				worst = v;
		}
		if (best > 0 && worst > best)
			json_object_set_new(c, CEILINGS[k].setting, json_integer(best));
	}
	return c;
}

json_t *memmodel_fit(const json_t *observations, const char *arch, int gpu_mib)
{
	struct fitstate s;
	json_t *fits = json_array(), *ooms = json_array(), *o, *coef, *prof, *lows;
	size_t i, exact = 0;
	int nfit = 0, noom = 0, here = 0, pass, j;
	double x[MM_MAX_UNKNOWNS], ss = 0, maxres = 0, margin = 0, error = -1, max_xt = 0, max_xs = 0;
	bool ok = false;

	memset(&s, 0, sizeof(s));
	arch = arch ? arch : "unknown";
	lows = json_array();
	json_array_foreach(observations, i, o) {
		const json_t *f = json_object_get(o, "features");
		const char *phase = jpath_str(o, "phase", NULL);
		struct terms t;
		if (!obs_usable(o, arch))
			continue;
		t = terms_of(f, arch);
		here += memmodel_same_class(gpu_mib, (int)jpath_int(o, "gpu_mib", 0));
		if (!strcmp(jpath_str(o, "outcome", ""), "fit")) {
			nfit++;
			if (json_array_size(fits) < MM_MAX_LIST) {
				json_t *c = json_deep_copy(f);
				json_object_set(c, "peak_mib", json_object_get(o, "peak_mib") ? json_object_get(o, "peak_mib") : json_null());
				json_object_set_new(c, "gpu_mib", json_integer(jpath_int(o, "gpu_mib", 0)));
				json_array_append_new(fits, c);
			}
			if (jpath_int(o, "peak_mib", 0) > 0 && phase) {
				row_of(&t, phase, x);
				add_row(&s, x, (double)jpath_int(o, "peak_mib", 0));
				exact++;
				/* the largest sizes a measured run trained and sampled: beyond them a fit extrapolates */
				if (t.xt > max_xt)
					max_xt = t.xt;
				if (t.sampling && t.xs > max_xs)
					max_xs = t.xs;
			}
		} else {
			noom++;
			if (json_array_size(ooms) < MM_MAX_LIST) {
				json_t *c = json_deep_copy(f);
				json_object_set_new(c, "gpu_mib", json_integer(jpath_int(o, "gpu_mib", 0)));
				json_object_set(c, "phase", phase ? json_object_get(o, "phase") : json_null());
				json_array_append_new(ooms, c);
			}
			/* The floor: the OOM's own figures, else the GPU's whole memory. */
			json_array_append_new(lows, json_pack("{s:o, s:s?, s:I}", "f", json_deep_copy(f), "phase", phase,
							      "need", (json_int_t)(jpath_int(o, "need_mib", 0) > 0 ?
										jpath_int(o, "need_mib", 0) : jpath_int(o, "gpu_mib", 0))));
		}
	}
	if (exact >= MM_MIN_EXACT && fit_rows(&s)) {
		double resid;
		size_t r;
		for (r = 0; r < s.n; r++) {
			resid = s.rows[r].y - dot(s.rows[r].x, s.coef);
			ss += resid * resid;
			if (fabs(resid) > maxres)
				maxres = fabs(resid);
		}
		/* Floors the fit undershoots become data points (up to 3 passes): an OOM at X means the
		 * phase needed more than X. */
		for (pass = 0; pass < 3; pass++) {
			bool added = false;
			json_array_foreach(lows, i, o) {
				struct terms t = terms_of(json_object_get(o, "f"), arch);
				double need = (double)jpath_int(o, "need", 0);
				if (jpath_bool(o, "used", 0))
					continue;
				row_of(&t, jpath_str(o, "phase", "train"), x);
				if (dot(x, s.coef) < need) {
					add_row(&s, x, need);
					json_object_set_new(o, "used", json_true());
					added = true;
				}
			}
			if (!added || !fit_rows(&s))
				break;
		}
		margin = 2.0 * sqrt(ss / (double)exact);
		if (margin < maxres)
			margin = maxres;
		error = margin;
		if (margin < maxres)
			margin = maxres;
		ok = true;
	}
	if (margin < MM_MIN_MARGIN_MIB)
		margin = MM_MIN_MARGIN_MIB;
	if (margin > gpu_mib / 8.0)
		margin = gpu_mib / 8.0;
	coef = json_object();
	if (ok) {
		/* A term no measured peak touched was fitted to OOM floors alone: it is a lower bound. */
		static const struct { int u; const char *name; } TERMS[] = {
			{ U_TRAIN, "train_mib_per_mpx" }, { U_TRAIN2, "train_mib_per_mpx2" }, { U_NOCKPT, "nockpt_mib_per_mpx" },
			{ U_SAMPLE, "sample_mib_per_mpx" }, { U_SAMPLE2, "sample_mib_per_mpx2" }, { U_SSTEPS, "sample_mib_per_mpx_step" },
		};
		bool measured[MM_MAX_UNKNOWNS] = { false };
		json_t *loads = json_object(), *floors = json_array();
		size_t r;
		for (r = 0; r < exact; r++)
			for (j = 0; j < MM_MAX_UNKNOWNS; j++)
				measured[j] |= s.rows[r].x[j] != 0;
		for (j = 0; j < 8; j++)
			if (s.known[U_LOAD + j] && !measured[U_LOAD + j]) {
				char *t = xasprintf("load_mib.%s", COMBO_NAMES[j]);
				json_array_append_new(floors, json_string(t));
				free(t);
			}
		for (j = 0; j < (int)ARRAY_LEN(TERMS); j++)
			if (s.known[TERMS[j].u] && !measured[TERMS[j].u])
				json_array_append_new(floors, json_string(TERMS[j].name));
		json_object_set_new(coef, "floor_only", floors);
		for (j = 0; j < 8; j++)
			if (s.known[U_LOAD + j])
				json_object_set_new(loads, COMBO_NAMES[j], json_integer(lround(s.coef[U_LOAD + j])));
		json_object_set_new(coef, "load_mib", loads);
		json_object_set_new(coef, "train_mib_per_mpx", s.known[U_TRAIN] ? json_real(s.coef[U_TRAIN]) : json_null());
		json_object_set_new(coef, "train_mib_per_mpx2", s.known[U_TRAIN2] ? json_real(s.coef[U_TRAIN2]) : json_null());
		json_object_set_new(coef, "nockpt_mib_per_mpx", s.known[U_NOCKPT] ? json_real(s.coef[U_NOCKPT]) : json_null());
		json_object_set_new(coef, "sample_mib_per_mpx", s.known[U_SAMPLE] ? json_real(s.coef[U_SAMPLE]) : json_null());
		json_object_set_new(coef, "sample_mib_per_mpx2", s.known[U_SAMPLE2] ? json_real(s.coef[U_SAMPLE2]) : json_null());
		json_object_set_new(coef, "sample_mib_per_mpx_step", s.known[U_SSTEPS] ? json_real(s.coef[U_SSTEPS]) : json_null());
	}
	prof = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:f, s:f, s:o, s:I, s:I, s:I, s:o, s:o, s:o, s:b}", "arch", arch,
			 "gpu_mib", gpu_mib, "n", nfit + noom, "n_here", here, "n_fit", nfit, "n_oom", noom, "n_exact", (json_int_t)s.n,
			 "n_measured", (json_int_t)exact, "max_train_mpx", max_xt, "max_sample_mpx", max_xs, "coef", coef,
			 "margin_mib", (json_int_t)lround(margin), "error_mib", (json_int_t)lround(error), "usable_mib", (json_int_t)(gpu_mib - MM_RESERVE_MIB),
			 "ceilings", ceilings_of(fits, ooms), "fits", fits, "ooms", ooms, "ok", ok);
	json_decref(lows);
	free(s.rows);
	return prof;
}

/* ---- prediction ---- */

/* How heavy a setting is: larger is heavier; the memory savers count as heavier when off. */
static const char *const HEAVIER_WHEN_LARGER[] = { "res_max", "batch", "frames", "sample_px", "sample_frames", "sample_steps" };
static const char *const HEAVIER_WHEN_OFF[] = { "grad_ckpt", "low_vram", "quantize", "offload" };

/* True when config a needs at least as much memory as b in every setting. */
static bool heavier_or_equal(const json_t *a, const json_t *b)
{
	size_t k;

	for (k = 0; k < ARRAY_LEN(HEAVIER_WHEN_LARGER); k++)
		if (jpath_int(a, HEAVIER_WHEN_LARGER[k], 0) < jpath_int(b, HEAVIER_WHEN_LARGER[k], 0))
			return false;
	for (k = 0; k < ARRAY_LEN(HEAVIER_WHEN_OFF); k++)
		if (jpath_bool(a, HEAVIER_WHEN_OFF[k], 0) && !jpath_bool(b, HEAVIER_WHEN_OFF[k], 0))
			return false;
	return true;
}

static json_t *prediction(json_int_t peak, int fits, const char *basis, const char *phase, json_int_t margin,
			  json_int_t usable, char *evidence)
{
	json_t *p = json_pack("{s:o, s:o, s:s, s:s, s:s?, s:I, s:I}", "peak_mib", peak >= 0 ? json_integer(peak) : json_null(),
			      "fits", fits < 0 ? json_null() : json_boolean(fits), "evidence", evidence, "basis", basis,
			      "phase", phase, "margin_mib", margin, "usable_mib", usable);

	free(evidence);
	return p;
}

/* What the fitted figures say of one config: exact when every term it needs was measured; else a
 * lower and (maybe) an upper bound. A memory saver never adds memory, so an unmeasured combination
 * of savers lies between the measured combinations that save more (lower bound: a superset of its
 * savers) and those that save less (upper bound: a subset); a step without checkpointing needs at
 * least what the checkpointed step needs, with no upper bound. */
struct bounds {
	bool exact, has_hi, sample_phase;
	double lo, hi, load_lo;
	const char *lo_from, *hi_from;
	char unknown[96];
};

static bool num_of(const json_t *o, const char *k, double *v)
{
	const json_t *x = json_object_get(o, k);

	if (!json_is_number(x))
		return false;
	*v = json_number_value(x);
	return true;
}

/* True when the profile's term name was fitted to OOM floors alone (coef.floor_only). */
static bool floor_only(const json_t *coef, const char *name)
{
	size_t i;
	json_t *x;

	json_array_foreach(json_object_get(coef, "floor_only"), i, x)
		if (json_is_string(x) && !strcmp(json_string_value(x), name))
			return true;
	return false;
}

/* The load term of combination c: false when not fitted; *floor when only OOM floors back it. */
static bool load_of(const json_t *coef, int c, double *v, bool *floor)
{
	char name[64];

	snprintf(name, sizeof name, "load_mib.%s", COMBO_NAMES[c]);
	*floor = floor_only(coef, name);
	return num_of(json_object_get(coef, "load_mib"), COMBO_NAMES[c], v);
}

static bool bounds_of(const json_t *coef, const struct terms *t, struct bounds *b)
{
	double load_lo = -1, load_hi = -1, v, slope, curve = 0, train_lo, train_hi = -1, sample_lo = 0, sample_hi = 0;
	bool exact_load, exact_train = true, exact_sample = true, floor;
	int c;

	memset(b, 0, sizeof(*b));
	exact_load = load_of(coef, t->combo, &load_lo, &floor) && !floor;
	if (exact_load) {
		load_hi = load_lo;
		b->lo_from = b->hi_from = COMBO_NAMES[t->combo];
	} else {
		/* its own term from floors alone is a lower bound; a measured combination with fewer
		 * savers bounds it above, any with more savers below */
		if (!load_of(coef, t->combo, &load_lo, &floor))
			load_lo = -1;
		else
			b->lo_from = COMBO_NAMES[t->combo];
		for (c = 0; c < 8; c++) {
			if (c == t->combo || !load_of(coef, c, &v, &floor))
				continue;
			if ((c & t->combo) == t->combo && v > load_lo) { /* saves at least as much */
				load_lo = v;
				b->lo_from = COMBO_NAMES[c];
			}
			if (!floor && (c & t->combo) == c && (load_hi < 0 || v < load_hi)) { /* saves at most as much */
				load_hi = v;
				b->hi_from = COMBO_NAMES[c];
			}
		}
		snprintf(b->unknown, sizeof(b->unknown), "the %s memory path has not run yet", COMBO_NAMES[t->combo]);
	}
	if (!num_of(coef, "train_mib_per_mpx", &slope)) {
		snprintf(b->unknown, sizeof(b->unknown), "no training step measured yet");
		return false;
	}
	num_of(coef, "train_mib_per_mpx2", &curve);
	train_lo = t->xt * slope + t->xq * curve;
	if (floor_only(coef, "train_mib_per_mpx") || floor_only(coef, "train_mib_per_mpx2"))
		exact_train = false; /* checkpointed steps only seen to fail: at least this */
	if (t->ckpt) {
		train_hi = train_lo;
	} else if (num_of(coef, "nockpt_mib_per_mpx", &v) && !floor_only(coef, "nockpt_mib_per_mpx")) {
		train_lo = train_hi = t->xt * v;
	} else {
		/* never measured, or only seen to fail: at least the checkpointed step, at least the floors */
		if (num_of(coef, "nockpt_mib_per_mpx", &v) && t->xt * v > train_lo)
			train_lo = t->xt * v;
		exact_train = false;
		if (exact_load)
			snprintf(b->unknown, sizeof(b->unknown), "no step without gradient checkpointing measured yet");
		b->lo_from = "checkpointed";
	}
	if (t->sampling) {
		if (num_of(coef, "sample_mib_per_mpx", &v)) {
			double v2 = 0, v3 = 0;
			num_of(coef, "sample_mib_per_mpx2", &v2);
			num_of(coef, "sample_mib_per_mpx_step", &v3);
			sample_lo = sample_hi = t->xs * v + t->xs * t->xs * v2 + t->xs * t->ss * v3;
			if (floor_only(coef, "sample_mib_per_mpx")) {
				exact_sample = false;
				snprintf(b->unknown, sizeof(b->unknown), "samples only seen to run out of memory");
			}
		} else {
			exact_sample = false;
			snprintf(b->unknown, sizeof(b->unknown), "no sample measured yet");
		}
	}
	if (load_lo < 0)
		load_lo = 0;
	b->load_lo = load_lo;
	b->exact = exact_load && exact_train && exact_sample;
	b->sample_phase = sample_lo > train_lo;
	b->lo = load_lo + (sample_lo > train_lo ? sample_lo : train_lo);
	b->has_hi = load_hi >= 0 && exact_train && exact_sample;
	b->hi = b->has_hi ? load_hi + (sample_hi > train_hi ? sample_hi : train_hi) : 0;
	if (!b->exact && !b->lo_from)
		b->lo_from = "measured";
	if (!b->hi_from)
		b->hi_from = "measured";
	return b->exact || b->has_hi || load_lo > 0;
}

json_t *memmodel_predict(const json_t *profile, const json_t *features)
{
	const char *arch = jpath_str(profile, "arch", "unknown");
	const json_t *coef = json_object_get(profile, "coef"), *o;
	json_int_t margin = jpath_int(profile, "margin_mib", MM_MIN_MARGIN_MIB), usable = jpath_int(profile, "usable_mib", 0);
	int gpu = (int)jpath_int(profile, "gpu_mib", 0);
	struct terms t = terms_of(features, arch);
	struct bounds b;
	double peak, top;
	json_t *p;
	const char *phase;
	size_t i;

	/* Evidence first: a config at least as heavy ran fine here, or one no heavier ran out of memory
	 * on a GPU at least this big. */
	json_array_foreach(json_object_get(profile, "ooms"), i, o)
		if (heavier_or_equal(features, o) && jpath_int(o, "gpu_mib", 0) >= gpu)
			return prediction(-1, 0, "lighter_oom", jpath_str(o, "phase", NULL), margin, usable,
					  xasprintf("%s: a config no heavier than this ran out of memory on a %lld MiB GPU",
						    arch, jpath_int(o, "gpu_mib", 0)));
	json_array_foreach(json_object_get(profile, "fits"), i, o)
		if (heavier_or_equal(o, features) &&
		    (jpath_int(o, "peak_mib", 0) > 0 ? jpath_int(o, "peak_mib", 0) <= usable : jpath_int(o, "gpu_mib", 0) <= gpu))
			return prediction(jpath_int(o, "peak_mib", -1), 1, "heavier_fit", NULL, margin, usable,
					  xasprintf("%s: a config at least as heavy ran fine here (peak %lld MiB)", arch,
						    jpath_int(o, "peak_mib", 0)));
	if (!jpath_bool(profile, "ok", 0))
		return prediction(-1, -1, "none", NULL, margin, usable,
				  xasprintf("%s: not enough history (%lld attempt(s))", arch,
					    jpath_int(profile, "n", 0)));
	if (!bounds_of(coef, &t, &b))
		return prediction(-1, -1, "none", NULL, margin, usable, xasprintf("%s: %s", arch, b.unknown));
	phase = b.sample_phase ? "sample" : "train";
	if (b.exact) {
		peak = b.lo;
		p = prediction(lround(peak), (json_int_t)lround(peak) + margin <= usable, "fit", phase, margin, usable,
			       xasprintf("%s: est %.1f GiB = load %.1f + %s %.1f (train %.2f Mpx, sample %.2f Mpx); margin %.1f GiB "
					 "of %.1f usable; fit over %lld attempt(s)", arch, peak / 1024.0, b.load_lo / 1024.0, phase,
					 (peak - b.load_lo) / 1024.0, t.xt, t.xs, (double)margin / 1024.0, (double)usable / 1024.0,
					 jpath_int(profile, "n", 0)));
	} else if (b.has_hi && (json_int_t)lround(b.hi) + margin <= usable) {
		/* An unmeasured path, bounded above by a measured one that saves less: fits even so. */
		peak = b.hi;
		p = prediction(lround(peak), 1, "bound", phase, margin, usable,
			       xasprintf("%s: at most %.1f GiB (%s; bounded by the %s path) + margin %.1f GiB of %.1f usable; "
					 "fit over %lld attempt(s)", arch, peak / 1024.0, b.unknown, b.hi_from, (double)margin / 1024.0,
					 (double)usable / 1024.0, jpath_int(profile, "n", 0)));
	} else if ((json_int_t)lround(b.lo) + margin > usable) {
		/* Bounded below by a measured path that saves more (or by the checkpointed slope): fails. */
		peak = b.lo;
		p = prediction(lround(peak), 0, "bound", phase, margin, usable,
			       xasprintf("%s: at least %.1f GiB (%s; bounded by the %s path) + margin %.1f GiB of %.1f usable; "
					 "fit over %lld attempt(s)", arch, peak / 1024.0, b.unknown, b.lo_from, (double)margin / 1024.0,
					 (double)usable / 1024.0, jpath_int(profile, "n", 0)));
	} else {
		return prediction(-1, -1, "none", NULL, margin, usable,
				  xasprintf("%s: %s (between %.1f and %s GiB)", arch, b.unknown, b.lo / 1024.0,
					    b.has_hi ? "the fitted bound" : "unbounded"));
	}
	/* what a "fails for sure" rests on (memplan_sure_fail): the measured runs, and how far past the
	 * largest measured size of the deciding phase this estimate reaches (1.0: within them) */
	top = json_number_value(json_object_get(profile, b.sample_phase ? "max_sample_mpx" : "max_train_mpx"));
	json_object_set_new(p, "n_measured", json_integer(jpath_int(profile, "n_measured", 0)));
	json_object_set_new(p, "error_mib", json_integer(jpath_int(profile, "error_mib", -1)));
	json_object_set_new(p, "reach", json_real(top > 0 ? (b.sample_phase ? t.xs : t.xt) / top : 1e9));
	return p;
}
