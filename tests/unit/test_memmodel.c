/* Unit tests of recovery/memmodel.c: features agree with what the ladder changes, observations from
 * FACTS, the per-arch fit (every GPU class) recovers a known law, OOM floors raise it, the evidence
 * rules (a heavier config ran, a lighter one OOMed) win over the fit, unmeasured memory paths are
 * bounded by measured ones, attention's quadratic term scales with the batch, no history predicts nothing;
 * the descent prunes what it did not need and starts a video at the most frames a run proved fit. */
#include <math.h>

#include "tap.h"
#include "policy_fixtures.h"
#include "../../recovery/ladder.h"
#include "../../recovery/memmodel.h"
#include "../../recovery/memplan.h"
#include "../../common/util.h"

/* A features object: the defaults of a plain 1024 px, batch 1, checkpointed, sampling-off config,
 * with the members of the JSON literal over them. */
static json_t *feat(const char *over)
{
	json_t *f = fx_json("{\"res_max\": 1024, \"res_n\": 1, \"batch\": 1, \"grad_ckpt\": true, \"frames\": 1,"
			    " \"sample_px\": 0, \"sample_steps\": 0, \"sample_frames\": 0, \"sampling\": false,"
			    " \"low_vram\": false, \"quantize\": false, \"offload\": false}");
	json_t *o = fx_json(over);

	json_object_update(f, o);
	json_decref(o);
	return f;
}

/* memmodel_predict of the features feat(over) under prof: a new reference. */
static json_t *predict(const json_t *prof, const char *over)
{
	json_t *f = feat(over), *p = memmodel_predict(prof, f);

	json_decref(f);
	return p;
}

/* The law the fit must recover: load 20000 MiB, 3000 MiB per training megapixel, 2000 per sample one. */
static long long law(const json_t *f, const char **phase)
{
	double r = jpath_int(f, "res_max", 0) / 1024.0, xt = r * r * jpath_int(f, "batch", 1);
	double train = 3000 * xt, sample = jpath_bool(f, "sampling", 0) ? 2000 * jpath_int(f, "sample_px", 0) / 1048576.0 : 0;

	*phase = sample > train ? "sample" : "train";
	return (long long)lround(20000 + (sample > train ? sample : train));
}

static json_t *obs_fit(json_t *f, int gpu)
{
	const char *phase;
	long long peak = law(f, &phase);
	json_t *o = json_pack("{s:s, s:i, s:o, s:s, s:s, s:I, s:n, s:i, s:i, s:n}", "arch", "flux", "gpu_mib", gpu,
			      "features", f, "outcome", "fit", "phase", phase, "peak_mib", (json_int_t)peak, "need_mib",
			      "job_id", 1, "attempt_id", 1, "at");
	return o;
}

static void features(void)
{
	json_t *cfg = fx_load("flux_image.json"), *f, *ch = json_array(), *v = fx_load("wan22_video.json");
	char arch[32];

	f = memmodel_features(cfg, "image");
	TAP_INT_EQ(jpath_int(f, "res_max", 0), 1024, "features: largest bucket");
	TAP_INT_EQ(jpath_int(f, "res_n", 0), 3, "features: buckets of that dataset");
	TAP_INT_EQ(jpath_int(f, "batch", 0), 4, "features: batch");
	TAP_OK(!jpath_bool(f, "grad_ckpt", 1), "features: checkpointing off as written");
	TAP_INT_EQ(jpath_int(f, "sample_px", 0), 1024 * 1024, "features: largest sample (1024x1024 over 1024x768)");
	TAP_INT_EQ(jpath_int(f, "sample_steps", 0), 20, "features: sample steps");
	TAP_OK(jpath_bool(f, "sampling", 0) && jpath_bool(f, "quantize", 0) && !jpath_bool(f, "low_vram", 1),
	       "features: sampling on, quantize on, low_vram off");
	json_decref(f);
	/* Each rung the ladder applies shows in the features. */
	ladder_step("oom_train_early", false, cfg, ch);
	ladder_step("oom_train_early", false, cfg, ch);
	ladder_step("oom_train_early", false, cfg, ch);
	f = memmodel_features(cfg, "image");
	TAP_OK(jpath_bool(f, "grad_ckpt", 0), "features follow the ladder: checkpointing on");
	TAP_INT_EQ(jpath_int(f, "batch", 0), 1, "features follow the ladder: batch 1");
	TAP_INT_EQ(jpath_int(f, "res_max", 0), 768, "features follow the ladder: 1024 bucket dropped");
	json_decref(f);
	ladder_step("oom_train_early", false, cfg, ch); /* the 768 bucket */
	ladder_step("oom_train_early", false, cfg, ch);
	f = memmodel_features(cfg, "image");
	TAP_INT_EQ(jpath_int(f, "sample_px", 0), 512 * 512, "features follow the ladder: cheaper sampling 512x512");
	TAP_INT_EQ(jpath_int(f, "sample_steps", 0), 10, "features follow the ladder: sample steps 10");
	json_decref(f);
	ladder_step("oom_train_early", false, cfg, ch);
	f = memmodel_features(cfg, "image");
	TAP_OK(!jpath_bool(f, "sampling", 1) && jpath_int(f, "sample_px", -1) == 0, "features follow the ladder: sampling off, no sample pixels");
	json_decref(f);
	f = memmodel_features(v, "video");
	TAP_OK(jpath_int(f, "frames", 0) > 1, "features: video frames");
	memmodel_arch(v, arch, sizeof(arch));
	TAP_STR_EQ(arch, "wan22_14b", "arch: model.arch");
	json_decref(f);
	jpath_set(v, P0 ".model.arch", json_string("flux:dev"));
	memmodel_arch(v, arch, sizeof(arch));
	TAP_STR_EQ(arch, "flux", "arch: the :tag suffix dropped");
	f = memmodel_features(json_null(), NULL);
	TAP_INT_EQ(jpath_int(f, "res_max", 0), 512, "features: defaults on a config without process");
	TAP_INT_EQ(jpath_int(f, "batch", 0), 1, "features: batch defaults to 1");
	json_decref(f);
	json_decref(ch);
	json_decref(cfg);
	json_decref(v);
}

static void helpers(void)
{
	json_t *facts = fx_oom("train", 2, 3), *o, *f = feat("{}");

	TAP_INT_EQ(memmodel_gpu_class(24564), 24576, "GPU class: 24564 MiB is the 24 GiB class");
	TAP_INT_EQ(memmodel_gpu_class(81559), 81920, "GPU class: 81559 MiB is the 80 GiB class");
	TAP_OK(memmodel_same_class(24564, 24576) && !memmodel_same_class(24564, 49152), "same class within 10 %");
	TAP_INT_EQ(memmodel_need_mib(facts), 23024, "need: allocated by PyTorch + tried to allocate");
	json_object_del(json_object_get(facts, "oom"), "allocated_by_pytorch_mib");
	TAP_INT_EQ(memmodel_need_mib(facts), 24564, "need: total capacity when the split is missing");
	TAP_STR_EQ(memmodel_outcome("oom_sample"), "oom", "outcome: an OOM class");
	TAP_STR_EQ(memmodel_outcome("success"), "fit", "outcome: success");
	TAP_STR_EQ(memmodel_outcome("env_fault"), "other", "outcome: env faults teach nothing");
	json_object_set_new(facts, "peak", fx_json("{\"mib\": 22000, \"phase\": \"train\", \"step\": 3}"));
	o = memmodel_observation("flux", 24564, f, "oom_train_early", facts, 7, 101);
	TAP_STR_EQ(jpath_str(o, "outcome", NULL), "oom", "observation: outcome");
	TAP_STR_EQ(jpath_str(o, "phase", NULL), "train", "observation: the OOM's phase");
	TAP_INT_EQ(jpath_int(o, "need_mib", 0), 24564, "observation: need");
	TAP_INT_EQ(jpath_int(o, "peak_mib", 0), 22000, "observation: peak");
	json_decref(o);
	json_decref(f);
	json_decref(facts);
}

static json_t *history(int gpu)
{
	json_t *obs = json_array();
	static const char *const configs[] = {
		"{\"res_max\": 512}", "{\"res_max\": 768}", "{\"res_max\": 1024}", "{\"res_max\": 512, \"batch\": 2}",
		"{\"res_max\": 768, \"batch\": 2}", "{\"sampling\": true, \"sample_px\": 4194304}",
	};
	size_t i;

	for (i = 0; i < ARRAY_LEN(configs); i++)
		json_array_append_new(obs, obs_fit(feat(configs[i]), gpu));
	return obs;
}

static void fit_and_predict(void)
{
	json_t *obs = history(24564), *prof, *pred, *f;
	const char *phase;
	long long truth;

	/* Noise the model must ignore: another arch, another GPU class, an env fault. */
	json_array_append_new(obs, json_pack("{s:s, s:i, s:o, s:s, s:s, s:i}", "arch", "sdxl", "gpu_mib", 24564, "features",
					     feat("{}"), "outcome", "fit", "phase", "train", "peak_mib", 1000));
	/* Another GPU class counts: a config needs what it needs on any card. */
	json_array_append_new(obs, obs_fit(feat("{\"res_max\": 1280}"), 81920));
	json_array_append_new(obs, json_pack("{s:s, s:i, s:o, s:s, s:s, s:i}", "arch", "flux", "gpu_mib", 24564, "features",
					     feat("{}"), "outcome", "other", "phase", "load", "peak_mib", 1000));
	prof = memmodel_fit(obs, "flux", 24564);
	TAP_OK(jpath_bool(prof, "ok", 0), "fit: six measured attempts are enough");
	TAP_INT_EQ(jpath_int(prof, "n", 0), 7, "fit: other arch and env faults skipped, another GPU class counted");
	TAP_INT_EQ(jpath_int(prof, "n_here", 0), 6, "fit: n_here counts the observations of this GPU class");
	TAP_OK(fabs(json_number_value(jpath_get(prof, "coef.train_mib_per_mpx")) - 3000) < 30, "fit: 3000 MiB per training Mpx recovered");
	TAP_OK(fabs(json_number_value(jpath_get(prof, "coef.sample_mib_per_mpx")) - 2000) < 20, "fit: 2000 MiB per sample Mpx recovered");
	TAP_OK(llabs(jpath_int(prof, "coef.load_mib.plain", 0) - 20000) < 50, "fit: load 20000 MiB recovered");
	TAP_INT_EQ(jpath_int(prof, "margin_mib", 0), 256, "fit: exact data, minimum margin");
	f = feat("{\"res_max\": 1024, \"batch\": 1, \"sampling\": true, \"sample_px\": 1048576}");
	truth = law(f, &phase);
	pred = memmodel_predict(prof, f);
	TAP_OK(llabs(jpath_int(pred, "peak_mib", 0) - truth) < 100, "predict: within 100 MiB of the law");
	TAP_OK(json_is_true(json_object_get(pred, "fits")), "predict: 23 GiB on a 24 GiB GPU fits with margin");
	TAP_OK(strstr(jpath_str(pred, "evidence", ""), "est") != NULL, "predict: one line of evidence");
	json_decref(pred);
	json_decref(f);
	f = feat("{\"res_max\": 1024, \"batch\": 2}");
	pred = memmodel_predict(prof, f);
	TAP_OK(json_is_false(json_object_get(pred, "fits")), "predict: 26 GiB does not fit 24 GiB");
	TAP_STR_EQ(jpath_str(pred, "basis", NULL), "fit", "predict: from the fit");
	json_decref(pred);
	json_decref(f);
	f = feat("{\"res_max\": 1280, \"low_vram\": true}");
	pred = memmodel_predict(prof, f);
	TAP_OK(json_is_null(json_object_get(pred, "fits")), "predict: a memory path never seen is unknown");
	json_decref(pred);
	json_decref(f);
	json_decref(prof);
	json_decref(obs);
}

static void floors_and_evidence(void)
{
	json_t *obs = history(24564), *prof, *pred, *f;

	/* An OOM at 1024 px batch 2 without checkpointing: the fit knows nothing of it but the floor. */
	json_array_append_new(obs, json_pack("{s:s, s:i, s:o, s:s, s:s, s:n, s:i}", "arch", "flux", "gpu_mib", 24564,
					     "features", feat("{\"batch\": 2, \"grad_ckpt\": false}"), "outcome", "oom",
					     "phase", "train", "peak_mib", "need_mib", 40000));
	json_array_append_new(obs, json_pack("{s:s, s:i, s:o, s:s, s:s, s:n, s:i}", "arch", "flux", "gpu_mib", 24564,
					     "features", feat("{\"batch\": 4}"), "outcome", "oom", "phase", "train",
					     "peak_mib", "need_mib", 30000));
	prof = memmodel_fit(obs, "flux", 24564);
	f = feat("{\"batch\": 2, \"grad_ckpt\": false}");
	pred = memmodel_predict(prof, f);
	TAP_OK(json_is_false(json_object_get(pred, "fits")), "evidence: the same config OOMed here");
	TAP_STR_EQ(jpath_str(pred, "basis", NULL), "lighter_oom", "evidence: basis names the OOM");
	json_decref(pred);
	json_decref(f);
	f = feat("{\"batch\": 2, \"grad_ckpt\": false, \"res_max\": 768}");
	pred = memmodel_predict(prof, f);
	TAP_OK(jpath_int(pred, "peak_mib", 0) > 20000 + 18000 * 0.5, "floor: the no-checkpointing slope is learned from the OOM");
	json_decref(pred);
	json_decref(f);
	TAP_OK(fx_eq(jpath_get(prof, "coef.floor_only"), "[\"nockpt_mib_per_mpx\"]"),
	       "floor: the profile says that slope rests on OOM floors alone");
	pred = predict(prof, "{\"res_max\": 512, \"grad_ckpt\": false}");
	TAP_OK(!json_is_true(json_object_get(pred, "fits")) && !strcmp(jpath_str(pred, "basis", ""), "none"),
	       "floor: a slope only seen to fail never says 'fits' (512 px without checkpointing: unknown)");
	json_decref(pred);
	/* A heavier config ran fine: the lighter one fits whatever the fit says. */
	f = feat("{\"res_max\": 768, \"batch\": 2, \"quantize\": true}");
	pred = memmodel_predict(prof, f);
	TAP_OK(json_is_true(json_object_get(pred, "fits")), "evidence: a heavier config (768 px batch 2, no quantize) ran here");
	TAP_STR_EQ(jpath_str(pred, "basis", NULL), "heavier_fit", "evidence: basis names the fit");
	json_decref(pred);
	json_decref(f);
	TAP_OK(json_object_size(json_object_get(prof, "ceilings")) > 0, "ceilings: a larger batch OOMed, batch 2 is a ceiling");
	TAP_INT_EQ(jpath_int(prof, "ceilings.batch_size", 0), 2, "ceilings: batch_size 2");
	json_decref(prof);
	json_decref(obs);
}

static void no_history(void)
{
	json_t *obs = json_array(), *prof, *pred, *f = feat("{}");

	prof = memmodel_fit(obs, "flux", 24564);
	TAP_OK(!jpath_bool(prof, "ok", 1) && jpath_int(prof, "n", -1) == 0, "no history: profile not ok, n 0");
	pred = memmodel_predict(prof, f);
	TAP_OK(json_is_null(json_object_get(pred, "fits")) && json_is_null(json_object_get(pred, "peak_mib")),
	       "no history: fits and peak unknown");
	json_decref(pred);
	json_decref(prof);
	prof = memmodel_fit(NULL, NULL, 0);
	TAP_OK(prof && !jpath_bool(prof, "ok", 1), "fit: NULL observations give an empty profile");
	json_decref(prof);
	json_decref(obs);
	json_decref(f);
}

static const char *res_json(int res)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), "{\"res_max\": %d}", res);
	return buf;
}

/* A law that is not the model's: activations quadratic in the training pixels (attention). */
static void curved_law(void)
{
	json_t *obs = json_array(), *prof, *pred, *f;
	static const int res[] = { 512, 640, 768, 896, 1024, 1152, 1280 };
	size_t i;
	double r;

	for (i = 0; i < ARRAY_LEN(res); i++) {
		r = res[i] / 1024.0;
		json_array_append_new(obs, json_pack("{s:s, s:i, s:o, s:s, s:s, s:i}", "arch", "flux", "gpu_mib", 49152,
						     "features", feat(res_json(res[i])), "outcome", "fit", "phase",
						     "train", "peak_mib", (int)lround(15000 + 4000 * r * r + 3000 * r * r * r * r)));
	}
	prof = memmodel_fit(obs, "flux", 49152);
	TAP_OK(json_is_number(jpath_get(prof, "coef.train_mib_per_mpx2")), "curved law: the curvature term is fitted");
	f = feat("{\"res_max\": 1408}");
	r = 1408 / 1024.0;
	pred = memmodel_predict(prof, f);
	TAP_OK(fabs(jpath_int(pred, "peak_mib", 0) - (15000 + 4000 * r * r + 3000 * r * r * r * r)) < 300,
	       "curved law: extrapolates within 300 MiB");
	json_decref(pred);
	json_decref(f);
	json_decref(prof);
	json_decref(obs);
}

/* Unmeasured combinations of memory savers lie between measured ones: low_vram never ran, but the
 * plain path (fewer savers) bounds it above, as quantize bounds quantize+low_vram; with no path of
 * more savers there is no lower bound; a step without checkpointing needs at least the checkpointed one. */
static void bounds(void)
{
	json_t *obs = history(24564), *prof, *pred;
	static const int res[] = { 512, 768, 1024 };
	size_t i;

	for (i = 0; i < ARRAY_LEN(res); i++) { /* quantize: load 12000 */
		json_t *q = feat(res_json(res[i]));
		double r = res[i] / 1024.0;
		json_object_set_new(q, "quantize", json_true());
		json_array_append_new(obs, json_pack("{s:s, s:i, s:o, s:s, s:s, s:i}", "arch", "flux", "gpu_mib", 24564,
						     "features", q, "outcome", "fit", "phase", "train", "peak_mib",
						     (int)lround(12000 + 3000 * r * r)));
	}
	prof = memmodel_fit(obs, "flux", 24564);
	pred = predict(prof, "{\"res_max\": 1088, \"low_vram\": true}"); /* larger than any plain run: no heavier_fit */
	TAP_OK(json_is_true(json_object_get(pred, "fits")) && !strcmp(jpath_str(pred, "basis", ""), "bound"),
	       "bounds: low_vram never ran, but the plain path bounds it above: at most 23.4 GiB fits");
	TAP_OK(strstr(jpath_str(pred, "evidence", ""), "at most") != NULL, "bounds: the evidence says 'at most'");
	json_decref(pred);
	pred = predict(prof, "{\"res_max\": 1280, \"low_vram\": true}");
	TAP_OK(json_is_null(json_object_get(pred, "fits")), "bounds: above 24 GiB by the upper bound, no lower bound: unknown");
	json_decref(pred);
	pred = predict(prof, "{\"res_max\": 2048, \"low_vram\": true, \"quantize\": true}");
	TAP_OK(json_is_true(json_object_get(pred, "fits")) && strstr(jpath_str(pred, "evidence", ""), "quantize path"),
	       "bounds: quantize+low_vram is bounded above by the quantize path (12000 + 12000 MiB): fits");
	json_decref(pred);
	pred = predict(prof, "{\"res_max\": 1280, \"grad_ckpt\": false}");
	TAP_OK(json_is_false(json_object_get(pred, "fits")) && jpath_int(pred, "peak_mib", 0) >= 24600 &&
	       !strcmp(jpath_str(pred, "basis", ""), "bound"),
	       "bounds: no checkpointing never ran: at least the checkpointed 24687 MiB: does not fit");
	json_decref(pred);
	pred = predict(prof, "{\"res_max\": 512, \"grad_ckpt\": false}");
	TAP_OK(json_is_null(json_object_get(pred, "fits")), "bounds: no upper bound without checkpointing: unknown");
	json_decref(pred);
	json_decref(prof);
	json_decref(obs);
}

/* Attention: quadratic in the tokens of one item, linear in the batch; the batch must not be squared. */
static void attention_law(void)
{
	json_t *obs = json_array(), *prof, *pred, *f;
	static const int res[] = { 512, 768, 1024, 1280 }, batch[] = { 1, 2 };
	size_t i, k;
	double r, truth;
	char buf[80];

	for (i = 0; i < ARRAY_LEN(res); i++)
		for (k = 0; k < ARRAY_LEN(batch); k++) {
			r = res[i] / 1024.0;
			snprintf(buf, sizeof(buf), "{\"res_max\": %d, \"batch\": %d}", res[i], batch[k]);
			json_array_append_new(obs, json_pack("{s:s, s:i, s:o, s:s, s:s, s:i}", "arch", "flux", "gpu_mib", 81920,
							     "features", feat(buf), "outcome", "fit", "phase", "train", "peak_mib",
							     (int)lround(15000 + batch[k] * (4000 * r * r + 3000 * r * r * r * r))));
		}
	prof = memmodel_fit(obs, "flux", 81920);
	f = feat("{\"res_max\": 1536, \"batch\": 4}");
	r = 1.5;
	truth = 15000 + 4 * (4000 * r * r + 3000 * r * r * r * r);
	pred = memmodel_predict(prof, f);
	TAP_OK(fabs(jpath_int(pred, "peak_mib", 0) - truth) < 300, "attention: batch 4 at 1536 px predicted within 300 MiB");
	json_decref(pred);
	json_decref(f);
	json_decref(prof);
	json_decref(obs);
}

/* "Fails for sure" (memplan_sure_fail) clears the usable memory by the fit's own error, at least 64
 * MiB and at most half the margin, with 6+ measured runs within 1.5x of the largest size. */
static void sure_fail(void)
{
	json_t *p = fx_json("{\"peak_mib\": 24600, \"fits\": false, \"basis\": \"fit\", \"margin_mib\": 256,"
			    " \"usable_mib\": 24500, \"n_measured\": 10, \"reach\": 1.0, \"error_mib\": 20}");

	TAP_OK(memplan_sure_fail(p), "sure fail: 100 MiB over with an exact fit (error 20, floor 64)");
	json_object_set_new(p, "error_mib", json_integer(900));
	TAP_OK(memplan_sure_fail(p) == false, "sure fail: not with 100 MiB over half the margin (a noisy fit)");
	json_object_set_new(p, "peak_mib", json_integer(24550));
	json_object_set_new(p, "error_mib", json_integer(0));
	TAP_OK(!memplan_sure_fail(p), "sure fail: 50 MiB over is inside the 64 MiB floor");
	json_object_set_new(p, "peak_mib", json_integer(30000));
	json_object_set_new(p, "n_measured", json_integer(5));
	TAP_OK(!memplan_sure_fail(p), "sure fail: never on fewer than 6 measured runs");
	json_object_set_new(p, "n_measured", json_integer(6));
	json_object_set_new(p, "reach", json_real(1.6));
	TAP_OK(!memplan_sure_fail(p), "sure fail: never beyond 1.5x the largest measured size");
	json_decref(p);
}

/* An observation of flux that fit on an 80 GiB card, the features feat(over), peak MiB. */
static json_t *ran_fine(const char *over, int peak)
{
	return json_pack("{s:s, s:i, s:o, s:s, s:s, s:i}", "arch", "flux", "gpu_mib", 81920, "features", feat(over),
			 "outcome", "fit", "phase", "train", "peak_mib", peak);
}

/* The descent's smallest combination: a load OOM walks low_vram, then quantize; quantize alone is
 * measured to fit, so low_vram (kept for good once on) is taken back. */
static void descent_prunes(void)
{
	json_t *obs = json_array(), *prof, *cfg = fx_load("flux_image.json"), *plan;
	static const int res[] = { 512, 768, 1024 };
	char buf[96];
	size_t i;

	for (i = 0; i < ARRAY_LEN(res); i++) {
		double r2 = (res[i] / 1024.0) * (res[i] / 1024.0);
		snprintf(buf, sizeof buf, "{\"res_max\": %d}", res[i]);
		json_array_append_new(obs, ran_fine(buf, (int)lround(30000 + 3000 * r2)));
		snprintf(buf, sizeof buf, "{\"res_max\": %d, \"low_vram\": true}", res[i]);
		json_array_append_new(obs, ran_fine(buf, (int)lround(28000 + 3000 * r2)));
		snprintf(buf, sizeof buf, "{\"res_max\": %d, \"quantize\": true}", res[i]);
		json_array_append_new(obs, ran_fine(buf, (int)lround(15000 + 3000 * r2)));
	}
	prof = memmodel_fit(obs, "flux", 24564);
	jpath_set(cfg, P0 ".model.quantize", json_false());
	jpath_set(cfg, P0 ".model.low_vram", json_false());
	jpath_set(cfg, P0 ".train.gradient_checkpointing", json_true());
	jpath_set(cfg, P0 ".train.batch_size", json_integer(1));
	jpath_set(cfg, P0 ".train.disable_sampling", json_true());
	jpath_set(cfg, P0 ".datasets[0].resolution", json_pack("[i]", 512));
	plan = memplan_descend(prof, "oom_load", false, cfg, NULL);
	TAP_OK(plan && fx_eq(json_object_get(plan, "rungs"), "[\"quantize\"]") &&
	       fx_eq(json_object_get(plan, "pruned"), "[\"low_vram\"]"),
	       "descent: low_vram, not enough alone, is taken back once quantize is applied and fits alone");
	TAP_OK(plan && !jpath_bool(plan, "config." P0 ".model.low_vram", 1) && jpath_bool(plan, "config." P0 ".model.quantize", 0),
	       "descent: the plan's config has quantize on and low_vram off");
	TAP_OK(plan && json_is_true(jpath_get(plan, "estimate.fits")), "descent: and is predicted to fit");
	json_decref(plan);
	json_decref(prof);
	json_decref(cfg);
	json_decref(obs);
}

/* The video of the H200 run (docs/GPU.md) on a 22718 MiB card, frames N: the config of its first
 * attempt with datasets[0] and sample num_frames set to N. A new reference. */
static json_t *h200_video(long long n)
{
	json_error_t e;
	json_t *cfg = json_load_file("docs/gpu-results/h200-2026-12-04/attempts/3/config.json", 0, &e);

	if (cfg) {
		jpath_set(cfg, P0 ".datasets[0].num_frames", json_integer(n));
		jpath_set(cfg, P0 ".sample.num_frames", json_integer(n));
	}
	return cfg;
}

/* An observation of the H200 video at N frames on its 22718 MiB card: a fit peaking at PEAK, or
 * (PEAK 0) an OOM in training. */
static json_t *h200_obs(long long n, int peak)
{
	json_t *cfg = h200_video(n), *o;

	o = json_pack("{s:s, s:i, s:o, s:s, s:s, s:o}", "arch", "wan22_14b", "gpu_mib", 22718, "features",
		      memmodel_features(cfg, "video"), "outcome", peak ? "fit" : "oom", "phase", "train", "peak_mib",
		      peak ? json_integer(peak) : json_null());
	json_decref(cfg);
	return o;
}

/* The frames a new job of cfg starts at on the 22718 MiB card, under the fit of obs (-1: no plan). */
static long long start_frames(const json_t *obs, const json_t *cfg)
{
	json_t *prof = memmodel_fit(obs, "wan22_14b", 22718), *plan = memplan_initial(prof, true, cfg);
	long long n = jpath_int(plan, "config." P0 ".datasets[0].num_frames", -1);

	json_decref(plan);
	json_decref(prof);
	return n;
}

/* After the H200 run's search (81 OOM, 41 fit, 61 fit, 69 and 65 OOM), a new job at 81 frames on the
 * same card starts at 61, the most frames a run proved fit, not at the ladder's 41; with no run above
 * 41 it is the ladder's 41. */
static void descent_raises_frames(void)
{
	json_t *obs = json_array(), *prof, *cfg = h200_video(81), *plan;

	TAP_OK(cfg != NULL, "raise: the H200 run's video config reads");
	if (!cfg)
		return;
	json_array_append_new(obs, h200_obs(81, 0));
	json_array_append_new(obs, h200_obs(41, 16088));
	TAP_INT_EQ(start_frames(obs, cfg), 41, "raise: with no run above 41 frames, a new job starts at the ladder's 41");
	json_array_append_new(obs, h200_obs(61, 22100));
	json_array_append_new(obs, h200_obs(69, 0));
	json_array_append_new(obs, h200_obs(65, 0));
	prof = memmodel_fit(obs, "wan22_14b", 22718);
	plan = memplan_initial(prof, true, cfg);
	TAP_INT_EQ(jpath_int(plan, "config." P0 ".datasets[0].num_frames", 0), 61,
		   "raise: after the search, a new job starts at 61 frames, where a run fitted");
	TAP_INT_EQ(jpath_int(plan, "config." P0 ".sample.num_frames", 0), 61, "raise: its samples too");
	TAP_OK(plan && fx_eq(json_object_get(plan, "rungs"), "[\"num_frames\"]") && json_is_true(jpath_get(plan, "estimate.fits")),
	       "raise: one rung, the frames, predicted to fit");
	json_decref(plan);
	plan = memplan_descend(prof, "oom_train_early", true, cfg, NULL);
	TAP_INT_EQ(jpath_int(plan, "config." P0 ".datasets[0].num_frames", 0), 61,
		   "raise: the descent after an OOM at 81 lands on 61 too");
	json_decref(plan);
	json_decref(prof);
	/* a fit above 61 that ran on a card too small to count here (its peak over this one) is no proof */
	json_array_remove(obs, 2);
	json_array_append_new(obs, h200_obs(61, 23485));
	TAP_INT_EQ(start_frames(obs, cfg), 41, "raise: a fit whose peak is over this card's memory proves nothing here: 41");
	json_decref(cfg);
	json_decref(obs);
}

int main(void)
{
	features();
	helpers();
	fit_and_predict();
	floors_and_evidence();
	no_history();
	curved_law();
	bounds();
	attention_law();
	sure_fail();
	descent_prunes();
	descent_raises_frames();
	return TAP_DONE();
}
