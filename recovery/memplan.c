/* Where the memory model meets the ladders (issue 12): builds the profile of a CTX, walks the class
 * plan of recovery/ladder.c past the rungs predicted to fail, and says when a config fails for sure.
 * Owns no rule of its own about configs (the ladder does) nor about memory (memmodel does); policy.c
 * decides what to do with the answers. Pure code; no I/O. */
#include "memplan.h"

#include <stdio.h>
#include <string.h>

#include "jpath.h"
#include "ladder.h"
#include "memmodel.h"
#include "util.h"

#define MEMPLAN_MAX_RUNGS 24 /* more than any plan has; a guard, not a limit */
/* A fit alone makes a failure certain only when it rests on this many measured runs and the config
 * reaches no further than this past the largest size they measured (issue 12: a fit of three runs
 * at batch 1 once called batch 2 failing at 24007 MiB of 24552, and scale-up gave it up). */
#define MEMPLAN_SURE_MIN_MEASURED 6
#define MEMPLAN_SURE_MAX_REACH 1.5
#define MEMPLAN_SURE_MIN_ERROR_MIB 64 /* the estimate must clear usable memory by at least this */

static bool has_attempt(const json_t *obs, long long id)
{
	size_t i;
	json_t *o;

	json_array_foreach(obs, i, o)
		if (jpath_int(o, "attempt_id", -1) == id)
			return true;
	return false;
}

json_t *memplan_profile(const json_t *ctx, const char *cls)
{
	const json_t *mem = json_object_get(ctx, "memory"), *obs = json_object_get(mem, "observations");
	const json_t *attempt = json_object_get(ctx, "attempt"), *target = jpath_get(ctx, "job.target_config");
	const json_t *ran = json_object_get(attempt, "config");
	json_t *all, *prof, *f;
	char arch[64];
	int gpu;

	if (!json_is_object(mem))
		return NULL;
	if (json_is_object(json_object_get(mem, "profile")))
		return json_incref(json_object_get(mem, "profile"));
	if (!json_is_array(obs) || json_array_size(obs) == 0)
		return NULL;
	if (json_is_string(json_object_get(mem, "arch")))
		snprintf(arch, sizeof(arch), "%s", json_string_value(json_object_get(mem, "arch")));
	else
		memmodel_arch(target, arch, sizeof(arch));
	gpu = (int)jpath_int(mem, "gpu_mib", jpath_int(attempt, "gpu_memory_mib", jpath_int(ctx, "gpu.memory_total_mib", 0)));
	all = json_copy((json_t *)obs);
	if (cls && json_is_object(ran) && json_is_object(json_object_get(attempt, "facts")) &&
	    !has_attempt(obs, jpath_int(attempt, "id", -1))) {
		f = memmodel_features(ran, jpath_str(ctx, "job.kind", NULL));
		json_array_append_new(all, memmodel_observation(arch, (int)jpath_int(attempt, "gpu_memory_mib", gpu), f, cls,
								json_object_get(attempt, "facts"), jpath_int(ctx, "job.id", 0),
								jpath_int(attempt, "id", 0)));
		json_decref(f);
	}
	prof = memmodel_fit(all, arch, gpu);
	json_decref(all);
	return prof;
}

json_t *memplan_estimate(const json_t *profile, bool video, const json_t *config)
{
	json_t *f, *p;

	if (!profile)
		return NULL;
	f = memmodel_features(config, video ? "video" : "image");
	p = memmodel_predict(profile, f);
	json_decref(f);
	return p;
}

bool memplan_sure_fail(const json_t *pred)
{
	const json_t *peak = json_object_get(pred, "peak_mib");

	if (!strcmp(jpath_str(pred, "basis", ""), "lighter_oom"))
		return true;
	/* the fit's own error (its largest residual, at least twice its RMS), not the margin: the margin's
	 * floor keeps "fits" on the safe side; "fails" needs only what the data say */
	long long err = jpath_int(pred, "error_mib", -1), half = jpath_int(pred, "margin_mib", 0) / 2;

	if (err < 0 || err > half) /* never more cautious than half the margin */
		err = half;
	if (err < MEMPLAN_SURE_MIN_ERROR_MIB)
		err = MEMPLAN_SURE_MIN_ERROR_MIB;
	return json_is_false(json_object_get(pred, "fits")) && json_is_integer(peak) &&
	       json_integer_value(peak) - err > jpath_int(pred, "usable_mib", 0) &&
	       jpath_int(pred, "n_measured", 0) >= MEMPLAN_SURE_MIN_MEASURED &&
	       json_number_value(json_object_get(pred, "reach")) <= MEMPLAN_SURE_MAX_REACH;
}

/* The failure class an OOM in phase would get (recovery/classify.c), dflt when phase is unknown. */
static const char *class_of_phase(const char *phase, const char *dflt)
{
	if (!phase)
		return dflt;
	if (!strcmp(phase, "sample") || !strcmp(phase, "baseline_sample"))
		return "oom_sample";
	if (!strcmp(phase, "load"))
		return "oom_load";
	if (!strcmp(phase, "train"))
		return "oom_train_early";
	return dflt;
}

/* The settings of the rungs scale-up keeps (ladder_kept_settings): once on they stay on, so a
 * descent that applied one it did not need gives it up for good. */
static const struct {
	const char *rung;
	const char *paths[3];
} KEPT_PATHS[] = {
	{ "gradient_checkpointing", { "config.process[0].train.gradient_checkpointing", NULL } },
	{ "low_vram", { "config.process[0].model.low_vram", NULL } },
	{ "quantize", { "config.process[0].model.quantize", "config.process[0].model.quantize_te", NULL } },
	{ "layer_offloading", { "config.process[0].model.layer_offloading", NULL } },
};

/* The smallest combination: each kept rung the descent applied (latest first) is taken back when
 * the config without it is still predicted to fit (fits true, never unknown). cur and *pred are
 * replaced; the rung leaves rungs and skipped and joins pruned. */
static void prune_kept(const json_t *profile, bool video, const json_t *ran, json_t **cur, json_t **pred, json_t *rungs,
		       json_t *skipped, json_t *pruned)
{
	size_t i, k, j, n = json_array_size(rungs);

	for (i = n > 0 ? n - 1 : 0; i-- > 0;) { /* not the last rung: the plan rests on it */
		const char *name = json_string_value(json_array_get(rungs, i));
		for (k = 0; k < ARRAY_LEN(KEPT_PATHS) && strcmp(KEPT_PATHS[k].rung, name); k++)
			;
		if (k == ARRAY_LEN(KEPT_PATHS))
			continue;
		json_t *cand = json_deep_copy(*cur), *ch = json_array(), *p;
		for (j = 0; KEPT_PATHS[k].paths[j]; j++) {
			const json_t *old = jpath_get(ran, KEPT_PATHS[k].paths[j]);
			ladder_set(cand, ch, KEPT_PATHS[k].paths[j], old ? json_deep_copy(old) : NULL);
		}
		p = json_array_size(ch) ? memplan_estimate(profile, video, cand) : NULL;
		if (p && json_is_true(json_object_get(p, "fits"))) {
			json_decref(*cur);
			*cur = cand;
			json_decref(*pred);
			*pred = p;
			json_array_append_new(pruned, json_string(name));
			for (j = json_array_size(skipped); j-- > 0;)
				if (!strcmp(json_string_value(json_array_get(skipped, j)), name))
					json_array_remove(skipped, j);
			json_array_remove(rungs, i);
		} else {
			json_decref(cand);
			json_decref(p);
		}
		json_decref(ch);
	}
}

/* The most frames of a config's datasets (1 for an image). */
static long long frames_of(const json_t *config)
{
	json_t *f = memmodel_features(config, "video");
	long long n = jpath_int(f, "frames", 1);

	json_decref(f);
	return n;
}

/* cur with each num_frames the descent lowered (DIFF: ladder_diff of ran and cur; datasets and
 * samples) set to n, never above what ran had there. A new reference. */
static json_t *with_frames(const json_t *cur, const json_t *diff, long long n)
{
	json_t *out = json_deep_copy(cur), *ch = json_array(), *c;
	size_t i;

	json_array_foreach(diff, i, c) {
		const char *path = jpath_str(c, "path", ""), *dot = strrchr(path, '.');
		long long old = jpath_int(c, "old", 0);
		if (dot && !strcmp(dot + 1, "num_frames") && json_is_integer(json_object_get(c, "old")))
			ladder_set(out, ch, path, json_integer(n < old ? n : old));
	}
	json_decref(ch);
	return out;
}

/* Video: the frames rung cuts to the next grid point down (81 -> 41), but a run of this config with
 * more frames than that, and no more than it ran, may already have fitted (a scale-up search found
 * it: 61 on the H200 run of docs/GPU.md). Start at the most such frames predicted to fit, which
 * saves the search; only frame counts a run proved are tried. cur and *pred are replaced. */
static void raise_frames(const json_t *profile, const json_t *ran, json_t **cur, json_t **pred)
{
	long long now = frames_of(*cur), top = frames_of(ran), best = now;
	json_t *diff, *base;
	const json_t *f;
	size_t i;

	if (now >= top)
		return;
	diff = json_array();
	ladder_diff(ran, *cur, diff);
	base = json_incref(*cur); /* the descent's config: each candidate raises its frames */
	json_array_foreach(json_object_get(profile, "fits"), i, f) {
		long long n = jpath_int(f, "frames", 0);
		if (n <= best || n > top)
			continue;
		json_t *cand = with_frames(base, diff, n), *p = memplan_estimate(profile, true, cand);
		if (p && json_is_true(json_object_get(p, "fits")) && frames_of(cand) == n) {
			best = n;
			json_decref(*cur);
			*cur = cand;
			json_decref(*pred);
			*pred = p;
		} else {
			json_decref(cand);
			json_decref(p);
		}
	}
	json_decref(base);
	json_decref(diff);
}

json_t *memplan_descend(const json_t *profile, const char *cls, bool video, const json_t *ran,
			const struct ladder_rung **lastp)
{
	json_t *cur = json_deep_copy(ran), *rungs = json_array(), *skipped = json_array(), *pruned = json_array(), *pred = NULL;
	json_t *ch, *out;
	const struct ladder_rung *r = NULL, *last = NULL;
	bool exhausted = false;
	int k;

	for (k = 0; k < MEMPLAN_MAX_RUNGS; k++) {
		/* After the first rung, the class the next OOM is predicted to have picks the plan, as
		 * the class of a real next OOM would. */
		if (pred)
			cls = class_of_phase(jpath_str(pred, "phase", NULL), cls);
		ch = json_array();
		r = ladder_step(cls, video, cur, ch);
		json_decref(ch);
		if (!r)
			break;
		last = r;
		json_array_append_new(rungs, json_string(r->name));
		json_decref(pred);
		pred = memplan_estimate(profile, video, cur);
		if (!pred || !json_is_false(json_object_get(pred, "fits")))
			break;
		json_array_append_new(skipped, json_string(r->name));
	}
	if (json_array_size(rungs) == 0) {
		json_decref(cur);
		json_decref(rungs);
		json_decref(skipped);
		json_decref(pruned);
		json_decref(pred);
		return NULL;
	}
	/* Every rung applied and still failing: the last one is not "skipped", it is the end. */
	if (!r && json_array_size(skipped) == json_array_size(rungs)) {
		json_array_remove(skipped, json_array_size(skipped) - 1);
		exhausted = memplan_sure_fail(pred);
	} else if (pred && json_is_true(json_object_get(pred, "fits"))) {
		prune_kept(profile, video, ran, &cur, &pred, rungs, skipped, pruned);
		if (video)
			raise_frames(profile, ran, &cur, &pred);
	}
	if (lastp)
		*lastp = last;
	ch = json_array();
	ladder_diff(ran, cur, ch);
	out = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:b, s:i, s:s}", "config", cur, "changes", ch, "rungs", rungs,
			"skipped", skipped, "pruned", pruned, "estimate", pred ? pred : json_null(), "exhausted", exhausted,
			"position", ladder_position(last, video), "guide", last->guide);
	return out;
}

json_t *memplan_initial(const json_t *profile, bool video, const json_t *config)
{
	json_t *pred = memplan_estimate(profile, video, config), *plan = NULL;

	/* Starting lower may turn on what scale-up keeps (checkpointing, the memory savers), for good;
	 * an OOM costs one attempt. So the estimate itself, not only estimate + margin, must be over. */
	if (!pred || !json_is_false(json_object_get(pred, "fits")) ||
	    (strcmp(jpath_str(pred, "basis", ""), "lighter_oom") &&
	     jpath_int(pred, "peak_mib", 0) <= jpath_int(pred, "usable_mib", 0)))
		goto out;
	plan = memplan_descend(profile, class_of_phase(jpath_str(pred, "phase", NULL), "oom_train_early"), video, config, NULL);
out:
	json_decref(pred);
	return plan;
}
