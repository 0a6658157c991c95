/* Unit tests of recovery/ladder.c: every rung config-in → config-out on the Flux image and Wan 2.2
 * video fixtures, skipped rungs, bucket never the last, frames on the grids with the floor,
 * batch x accumulation kept, lr/optimizer never touched, and the scale-up settings. */
#include "tap.h"
#include "policy_fixtures.h"
#include "../../recovery/ladder.h"

static json_t *changes;

static const char *step(const char *cls, int video, json_t *cfg)
{
	const struct ladder_rung *r;

	json_decref(changes);
	changes = json_array();
	r = ladder_step(cls, video, cfg, changes);
	return r ? r->name : NULL;
}

static void image_ladder_walk(void)
{
	json_t *cfg = fx_load("flux_image.json"), *orig = json_deep_copy(cfg);

	/* guide 6 image rung 1 / 3 Fix A */
	TAP_STR_EQ(step("oom_train_early", 0, cfg), "gradient_checkpointing", "guide 6.1 image: checkpointing first");
	TAP_OK(jpath_bool(cfg, P0 ".train.gradient_checkpointing", 0), "guide 3A: gradient_checkpointing true");
	TAP_INT_EQ(json_array_size(changes), 1, "guide 6: one change per retry");
	/* guide 6 rung 2 / 3 Fix B, legacy accumulation folded in */
	TAP_STR_EQ(step("oom_train_early", 0, cfg), "batch_size", "guide 6.2: batch rung next (checkpointing skipped)");
	TAP_INT_EQ(jpath_int(cfg, P0 ".train.batch_size", 0), 1, "guide 3B: batch_size 4 -> 1");
	TAP_INT_EQ(jpath_int(cfg, P0 ".train.gradient_accumulation", 0), 4, "guide 3B: accumulation 1 -> 4 (4x1 = 1x4)");
	TAP_OK(!jpath_get(cfg, P0 ".train.gradient_accumulation_steps"), "guide 3B: legacy gradient_accumulation_steps folded, never both");
	TAP_OK(fx_change(changes, P0 ".train.gradient_accumulation_steps") != NULL, "guide 3B: removal of the legacy key recorded");
	/* guide 6 rung 3 / 3 Fix C */
	TAP_STR_EQ(step("oom_train_early", 0, cfg), "drop_bucket", "guide 6.3: drop the largest bucket");
	TAP_OK(fx_eq(jpath_get(cfg, P0 ".datasets[0].resolution"), "[512, 768]"), "guide 3C: 1024 removed first");
	TAP_STR_EQ(step("oom_train_early", 0, cfg), "drop_bucket", "guide 3C: one bucket per attempt");
	TAP_INT_EQ(json_array_size(jpath_get(cfg, P0 ".datasets[0].resolution")), 1, "guide 3C: 768 removed next");
	/* guide 6 rung 4 / 3 Fix D: bucket never the last, so sampling is next */
	TAP_STR_EQ(step("oom_train_early", 0, cfg), "cheaper_sampling", "guide 3C: never the last bucket; 6.4 cheaper sampling");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.width", 0), 512, "guide 3D: width 1024 -> 512 (not above the 512 bucket)");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.height", 0), 512, "guide 3D: height 1024 -> 512");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.sample_steps", 0), 10, "guide 3D: sample_steps 20 -> 10");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.sample_every", 0), 500, "guide 3D: sample less often 250 -> 500");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.samples[0].width", 0), 512, "guide 3D: samples[] override 1024x768 -> 512 wide");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.samples[0].height", 0), 384, "guide 3D: samples[] override keeps aspect (768 -> 384)");
	TAP_STR_EQ(step("oom_train_early", 0, cfg), "disable_sampling", "guide 6.4: then sampling off");
	TAP_OK(jpath_bool(cfg, P0 ".train.disable_sampling", 0), "guide 3D: train.disable_sampling true");
	TAP_STR_EQ(step("oom_train_early", 0, cfg), "low_vram", "guide 6.5: low_vram");
	TAP_STR_EQ(step("oom_train_early", 0, cfg), "quantize", "guide 3F: quantization (quantize already on: quantize_te)");
	TAP_OK(jpath_bool(cfg, P0 ".model.quantize_te", 0), "guide 3F: quantize_te true");
	TAP_STR_EQ(step("oom_train_early", 0, cfg), "layer_offloading", "guide 3F: offloading");
	TAP_OK(step("oom_train_early", 0, cfg) == NULL, "guide 6: ladder exhausted returns NULL");
	TAP_INT_EQ(json_array_size(changes), 0, "guide 6: exhausted ladder changes nothing");
	TAP_OK(json_equal(jpath_get(cfg, P0 ".train.lr"), jpath_get(orig, P0 ".train.lr")) &&
	       json_equal(jpath_get(cfg, P0 ".train.optimizer"), jpath_get(orig, P0 ".train.optimizer")),
	       "guide 3B: lr and optimizer never touched");
	json_decref(cfg);
	json_decref(orig);
}

static void video_ladder_walk(void)
{
	json_t *cfg = fx_load("wan22_video.json");

	/* guide 6 video rung 1 / 3 Fix E: 81 -> 41 -> 21 on 4n+1, then the floor */
	TAP_STR_EQ(step("oom_train_early", 1, cfg), "num_frames", "guide 6.1 video: frames first");
	TAP_INT_EQ(jpath_int(cfg, P0 ".datasets[0].num_frames", 0), 41, "guide 3E: dataset frames 81 -> 41 (4n+1)");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.num_frames", 0), 41, "guide 3E: sample frames 81 -> 41");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.samples[0].num_frames", 0), 41, "guide 3E: samples[] frames 81 -> 41");
	step("oom_train_early", 1, cfg);
	TAP_INT_EQ(jpath_int(cfg, P0 ".datasets[0].num_frames", 0), 21, "guide 3E: 41 -> 21");
	step("oom_train_early", 1, cfg);
	TAP_INT_EQ(jpath_int(cfg, P0 ".datasets[0].num_frames", 0), LADDER_FRAMES_FLOOR, "guide 3E: 21 -> floor 17, never below");
	TAP_STR_EQ(step("oom_train_early", 1, cfg), "batch_size", "guide 6.2 video: batch after frames");
	TAP_INT_EQ(jpath_int(cfg, P0 ".train.batch_size", 0) * jpath_int(cfg, P0 ".train.gradient_accumulation", 0), 4,
		   "guide 3B: batch x accumulation stays 2x2 = 1x4");
	TAP_STR_EQ(step("oom_train_early", 1, cfg), "drop_bucket", "guide 6.3 video: bucket");
	json_decref(cfg);
}

static void frames_grids(void)
{
	/* guide 3E; DOMAIN: Wan rounds to 4n+1, LTX to 8n+1 */
	TAP_INT_EQ(ladder_frames_down(81, 4), 41, "guide 3E: Wan 81 -> 41");
	TAP_INT_EQ(ladder_frames_down(41, 4), 21, "guide 3E: Wan 41 -> 21");
	TAP_INT_EQ(ladder_frames_down(121, 8), 57, "guide 3E: LTX 121 -> 57 (8n+1)");
	TAP_INT_EQ(ladder_frames_down(57, 8), 25, "guide 3E: LTX 57 -> 25");
	TAP_INT_EQ(ladder_frames_down(25, 8), 17, "guide 3E: LTX 25 -> floor 17");
	TAP_INT_EQ(ladder_frames_down(17, 8), 17, "guide 3E: never below the floor");
	TAP_INT_EQ(ladder_frames_down(100, 1), 50, "guide 3E: other models any count");
	TAP_INT_EQ((ladder_frames_down(97, 4) - 1) % 4, 0, "guide 3E: Wan result stays on 4n+1");
	json_t *cfg = fx_load("wan22_video.json");
	jpath_set(cfg, P0 ".model.arch", json_string("ltx2:19b"));
	jpath_set(cfg, P0 ".datasets[0].num_frames", json_integer(121));
	TAP_INT_EQ(ladder_frame_grid(cfg), 8, "guide 3E: ltx2 arch uses the 8n+1 grid");
	step("oom_train_early", 1, cfg);
	TAP_INT_EQ(jpath_int(cfg, P0 ".datasets[0].num_frames", 0), 57, "guide 3E: LTX dataset 121 -> 57 via the rung");
	json_decref(cfg);
}

static void skipped_and_single_bucket(void)
{
	json_t *cfg = fx_load("flux_image.json");

	jpath_set(cfg, P0 ".datasets[0].resolution", json_integer(768));
	jpath_set(cfg, P0 ".train.gradient_checkpointing", json_true());
	jpath_set(cfg, P0 ".train.batch_size", json_integer(1));
	TAP_STR_EQ(step("oom_train_early", 0, cfg), "cheaper_sampling",
		   "guide 6: rungs that change nothing (checkpointing on, batch 1, one bucket) are skipped");
	TAP_INT_EQ(jpath_int(cfg, P0 ".datasets[0].resolution", 0), 768, "guide 3C: a single bucket is never dropped");
	json_decref(cfg);
}

static void per_dataset_batch(void)
{
	json_t *cfg = fx_load("flux_image.json");

	jpath_set(cfg, P0 ".train.gradient_checkpointing", json_true());
	jpath_set(cfg, P0 ".train.batch_size", json_integer(2));
	jpath_set(cfg, P0 ".datasets[0].batch_size", json_integer(2));
	jpath_set(cfg, P0 ".train.gradient_accumulation_steps", json_integer(3));
	TAP_STR_EQ(step("oom_train_early", 0, cfg), "batch_size", "guide 3B: batch rung");
	TAP_INT_EQ(jpath_int(cfg, P0 ".datasets[0].batch_size", 0), 1, "guide 3B: per-dataset batch_size override -> 1");
	TAP_INT_EQ(jpath_int(cfg, P0 ".train.gradient_accumulation", 0), 6, "guide 3B: legacy 3 folded in: 2x3 = 1x6");
	TAP_OK(!jpath_get(cfg, P0 ".train.gradient_accumulation_steps"), "guide 3B: never both accumulation keys");
	json_decref(cfg);
}

static void plans(void)
{
	json_t *cfg = fx_load("wan22_video.json");

	/* guide 2C: sampling rung first whatever the ladder position */
	TAP_STR_EQ(step("oom_sample", 1, cfg), "cheaper_sampling", "guide 2C: oom_sample -> sampling rung first");
	TAP_INT_EQ(jpath_int(cfg, P0 ".datasets[0].num_frames", 0), 81, "guide 2C: training frames untouched by the sampling rung");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.num_frames", 0), 41, "guide 3D: fewer sample frames for video");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.width", 0), 512, "guide 3D: 832x480 -> 512 wide");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.height", 0), 256, "guide 3D: aspect kept, multiple of 64 (295 -> 256)");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.samples[0].width", 0), 512, "guide 3D: samples[0] 1280x720 -> 512 wide");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.samples[0].height", 0), 256, "guide 3D: samples[0] height multiple of 64");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.sample_steps", 0), 12, "guide 3D: sample_steps 25 -> 12");
	TAP_INT_EQ(jpath_int(cfg, P0 ".sample.samples[0].num_frames", 0), 41, "guide 3D: per-item sample frames too");
	json_decref(cfg);

	cfg = fx_load("flux_image.json");
	jpath_set(cfg, P0 ".train.disable_sampling", json_true());
	TAP_STR_EQ(step("oom_sample", 0, cfg), "gradient_checkpointing",
		   "guide 2C: sampling already off -> the ladder goes on");
	json_decref(cfg);

	/* guide 2A: load -> low_vram, quantize, offloading; never batch */
	cfg = fx_load("flux_image.json");
	jpath_set(cfg, P0 ".model.quantize", json_false());
	TAP_STR_EQ(step("oom_load", 0, cfg), "low_vram", "guide 2A: oom_load -> low_vram first");
	TAP_STR_EQ(step("oom_load", 0, cfg), "quantize", "guide 2A: then quantization");
	TAP_OK(jpath_bool(cfg, P0 ".model.quantize", 0) && jpath_bool(cfg, P0 ".model.quantize_te", 0),
	       "guide 2A: quantize and quantize_te");
	TAP_STR_EQ(step("oom_load", 0, cfg), "layer_offloading", "guide 2A: then layer offloading");
	TAP_OK(step("oom_load", 0, cfg) == NULL, "guide 2A: a smaller batch does not fix a load: exhausted");
	TAP_INT_EQ(jpath_int(cfg, P0 ".train.batch_size", 0), 4, "guide 2A: batch untouched");
	json_decref(cfg);

	/* guide 2D: intermittent -> bucket (image) / frames (video) first */
	cfg = fx_load("flux_image.json");
	TAP_STR_EQ(step("oom_train_intermittent", 0, cfg), "drop_bucket", "guide 2D image: drop the largest bucket first");
	json_decref(cfg);
	cfg = fx_load("wan22_video.json");
	TAP_STR_EQ(step("oom_train_intermittent", 1, cfg), "num_frames", "guide 2D video: frames first");
	json_decref(cfg);
}

static void scale_up(void)
{
	json_t *target = fx_load("flux_image.json"), *cur = json_deep_copy(target), *ch = json_array(), *ceil;
	const struct ladder_setting *s;
	int i;

	jpath_set(target, P0 ".train.gradient_checkpointing", json_true());
	json_decref(cur);
	cur = json_deep_copy(target);
	for (i = 0; i < 8; i++) { /* walk the ladder all the way down */
		json_t *c2 = json_array();
		ladder_step("oom_train_early", 0, cur, c2);
		json_decref(c2);
	}
	ladder_cap_steps(cur, 200, ch);
	TAP_INT_EQ(jpath_int(cur, P0 ".train.steps", 0), 200, "validate_steps: steps capped");
	s = ladder_scale_up(0, cur, target, NULL, 0, ch);
	TAP_STR_EQ(s ? s->name : NULL, "steps", "guide 7.2: steps first");
	s = ladder_scale_up(0, cur, target, NULL, 0, ch);
	TAP_STR_EQ(s ? s->name : NULL, "bucket", "guide 7.3: then one larger bucket");
	TAP_OK(fx_eq(jpath_get(cur, P0 ".datasets[0].resolution"), "[512, 768]"), "guide 7.3: smallest removed first (768)");
	s = ladder_scale_up(0, cur, target, NULL, 0, ch);
	TAP_STR_EQ(s ? s->name : NULL, "bucket", "guide 7.3: one bucket per attempt");
	s = ladder_scale_up(0, cur, target, NULL, 0, ch);
	TAP_STR_EQ(s ? s->name : NULL, "sampling_on", "guide 7.4: sampling back on");
	TAP_INT_EQ(jpath_int(cur, P0 ".sample.width", 0), 512, "guide 7.4: still the cheap size when it comes back on");
	s = ladder_scale_up(0, cur, target, NULL, 0, ch);
	TAP_STR_EQ(s ? s->name : NULL, "sample_size", "guide 7.4: then size");
	s = ladder_scale_up(0, cur, target, NULL, 0, ch);
	TAP_STR_EQ(s ? s->name : NULL, "sample_rate", "guide 7.4: then steps and frequency");
	s = ladder_scale_up(0, cur, target, NULL, 0, ch);
	TAP_STR_EQ(s ? s->name : NULL, "batch_size", "guide 7.5: batch last");
	TAP_INT_EQ(jpath_int(cur, P0 ".train.batch_size", 0), 2, "guide 7.5: batch doubles 1 -> 2");
	TAP_INT_EQ(jpath_int(cur, P0 ".train.gradient_accumulation", 0), 2, "guide 7.5: accumulation divided 4 -> 2");
	s = ladder_scale_up(0, cur, target, NULL, 0, ch);
	TAP_INT_EQ(jpath_int(cur, P0 ".train.batch_size", 0), 4, "guide 7.5: batch 2 -> 4 (target)");
	TAP_OK(ladder_scale_up(0, cur, target, NULL, 0, ch) == NULL, "guide 7: every setting at target");
	TAP_OK(jpath_bool(cur, P0 ".model.low_vram", 0) && jpath_bool(cur, P0 ".train.gradient_checkpointing", 0),
	       "guide 7.1: memory settings (low_vram, checkpointing) stay");
	json_decref(cur);

	/* ceilings skip a setting */
	cur = json_deep_copy(target);
	jpath_set(cur, P0 ".datasets[0].resolution", fx_json("[512]"));
	jpath_set(cur, P0 ".train.batch_size", json_integer(1));
	ceil = fx_json("{\"bucket\": [512, 768]}");
	s = ladder_scale_up(0, cur, target, ceil, 0, ch);
	TAP_STR_EQ(s ? s->name : NULL, "batch_size", "guide 7: a setting at its ceiling is skipped");
	json_decref(ceil);
	json_decref(cur);
	json_decref(target);

	/* video: frames one grid step back toward the target */
	target = fx_load("wan22_video.json");
	cur = json_deep_copy(target);
	jpath_set(cur, P0 ".datasets[0].num_frames", json_integer(21));
	s = ladder_scale_up(1, cur, target, NULL, 0, ch);
	TAP_STR_EQ(s ? s->name : NULL, "num_frames", "guide 7.5 video: longer video");
	TAP_INT_EQ(jpath_int(cur, P0 ".datasets[0].num_frames", 0), 41, "guide 7.5: 21 -> 41 (one grid step)");
	json_decref(cur);

	/* issue 16.2: below a frame ceiling, the grid midpoint; at the grid's neighbour, nothing */
	cur = json_deep_copy(target);
	jpath_set(cur, P0 ".datasets[0].num_frames", json_integer(21));
	ceil = fx_json("{\"num_frames\": 41}");
	s = ladder_scale_up(1, cur, target, ceil, 0, ch);
	TAP_STR_EQ(s ? s->name : NULL, "num_frames", "issue 16.2: frames still step up below their ceiling");
	TAP_INT_EQ(jpath_int(cur, P0 ".datasets[0].num_frames", 0), 29, "issue 16.2: 21 -> 29 (midpoint on 4n+1), not 41");
	jpath_set(cur, P0 ".datasets[0].num_frames", json_integer(37));
	s = ladder_scale_up(1, cur, target, ceil, 0, ch);
	TAP_OK(jpath_int(cur, P0 ".datasets[0].num_frames", 0) == 37 && (!s || strcmp(s->name, "num_frames")),
	       "issue 16.2: 37 below a ceiling of 41 has no grid point left between");
	json_decref(ceil);
	json_decref(cur);
	json_decref(target);
	json_decref(ch);
}

/* Issue 16.2: runs compared by what they ask of GPU memory, without the name, folder, steps or prompts. */
static void no_larger(void)
{
	json_t *a = fx_load("flux_image.json"), *b = json_deep_copy(a);

	jpath_set(b, "config.name", json_string("renamed_s1"));
	jpath_set(b, P0 ".training_folder", json_string("/elsewhere"));
	jpath_set(b, P0 ".train.steps", json_integer(200));
	jpath_set(b, P0 ".sample.prompts", fx_json("[\"another prompt\"]"));
	TAP_OK(ladder_no_larger(a, b) && ladder_no_larger(b, a), "issue 16.2: name, folder, steps and prompts do not count");
	jpath_set(b, P0 ".datasets[0].resolution", fx_json("[512, 768]"));
	TAP_OK(ladder_no_larger(b, a) && !ladder_no_larger(a, b), "issue 16.2: fewer buckets ask less");
	jpath_set(b, P0 ".model.low_vram", json_true());
	TAP_OK(ladder_no_larger(b, a) && !ladder_no_larger(a, b), "issue 16.2: low_vram asks less");
	jpath_set(b, P0 ".train.batch_size", json_integer(8));
	TAP_OK(!ladder_no_larger(b, a) && !ladder_no_larger(a, b), "near miss: a larger batch and fewer buckets: no order");
	json_decref(b);
	b = json_deep_copy(a);
	jpath_set(b, P0 ".train.disable_sampling", json_true());
	TAP_OK(ladder_no_larger(b, a) && !ladder_no_larger(a, b), "issue 16.2: no sampling asks less than sampling");
	jpath_set(b, P0 ".train.lr", json_real(0.001));
	TAP_OK(!ladder_no_larger(b, a) && !ladder_no_larger(a, b), "near miss: a different lr is another run altogether");
	json_decref(b);
	json_decref(a);
}

static void conservative(void)
{
	json_t *cfg = fx_load("flux_image.json");
	const char *why = NULL;

	TAP_OK(!ladder_conservative(cfg, &why), "guide 5: batch 4 is not conservative");
	jpath_set(cfg, P0 ".train.batch_size", json_integer(1));
	jpath_set(cfg, P0 ".train.gradient_checkpointing", json_true());
	jpath_set(cfg, P0 ".datasets[0].resolution", fx_json("[512, 768]"));
	TAP_OK(ladder_conservative(cfg, &why), "guide 5: batch 1, checkpointing, <= 768 is conservative");
	jpath_set(cfg, P0 ".datasets[0].num_frames", json_integer(41));
	TAP_OK(!ladder_conservative(cfg, &why), "guide 5: 41 frames is not conservative");
	json_decref(cfg);
}

int main(void)
{
	image_ladder_walk();
	video_ladder_walk();
	frames_grids();
	skipped_and_single_bucket();
	per_dataset_batch();
	plans();
	scale_up();
	no_larger();
	conservative();
	json_decref(changes);
	return TAP_DONE();
}
