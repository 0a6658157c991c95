/* Unit tests of common/atconfig.c (validation with the path of the first problem, kind) and of
 * common/jpath.c (dotted paths: get, set, delete). */
#include "tap.h"
#include "policy_fixtures.h"
#include "../../common/atconfig.h"

static void expect_invalid(const json_t *base, const char *path, json_t *value, const char *field, const char *name)
{
	json_t *c = json_deep_copy(base);
	char *f = NULL, *m = NULL;
	int rc;

	if (value)
		jpath_set(c, path, value);
	else
		jpath_del(c, path);
	rc = atconfig_validate(c, &f, &m);
	TAP_INT_EQ(rc, -1, name);
	TAP_STR_EQ(f, field, name);
	TAP_OK(m && *m, "validation message present");
	free(f);
	free(m);
	json_decref(c);
}

int main(void)
{
	json_t *flux = fx_load("flux_image.json"), *wan = fx_load("wan22_video.json"), *c;
	char *f = (char *)"x", *m = (char *)"x";

	TAP_INT_EQ(atconfig_validate(flux, &f, &m), 0, "Flux example config is valid");
	TAP_OK(f == NULL && m == NULL, "valid: field and message NULL");
	TAP_INT_EQ(atconfig_validate(wan, &f, &m), 0, "Wan 2.2 example config is valid");
	TAP_STR_EQ(atconfig_kind(flux), "image", "kind: Flux is image");
	TAP_STR_EQ(atconfig_kind(wan), "video", "kind: Wan 81 frames is video");
	c = json_deep_copy(flux);
	jpath_set(c, P0 ".model.arch", json_string("wan22_14b:t2v"));
	TAP_STR_EQ(atconfig_kind(c), "video", "kind: wan arch is video even at 1 frame");
	jpath_set(c, P0 ".model.arch", json_string("flux"));
	jpath_set(c, P0 ".sample.samples[1].num_frames", json_integer(33));
	TAP_STR_EQ(atconfig_kind(c), "video", "kind: a sample asking for frames is video");
	json_decref(c);
	TAP_OK(atconfig_process(flux) == jpath_get(flux, P0), "atconfig_process borrows process[0]");
	TAP_OK(atconfig_process(NULL) == NULL, "atconfig_process(NULL)");

	expect_invalid(flux, P0 ".train.batch_size", json_integer(0), P0 ".train.batch_size", "batch_size 0 rejected");
	expect_invalid(flux, P0 ".train.batch_size", json_integer(65), P0 ".train.batch_size", "batch_size 65 rejected");
	expect_invalid(flux, P0 ".train.batch_size", json_string("4"), P0 ".train.batch_size", "batch_size string rejected");
	expect_invalid(flux, P0 ".train.gradient_accumulation", json_integer(0), P0 ".train.gradient_accumulation", "accumulation 0 rejected");
	expect_invalid(flux, P0 ".train.steps", json_integer(0), P0 ".train.steps", "steps 0 rejected");
	expect_invalid(flux, P0 ".datasets", fx_json("[]"), P0 ".datasets", "empty datasets rejected");
	expect_invalid(flux, P0 ".train", NULL, P0 ".train", "missing train rejected");
	expect_invalid(flux, P0 ".model", NULL, P0 ".model", "missing model rejected");
	expect_invalid(flux, "config.process", fx_json("[]"), "config.process", "empty process rejected");
	expect_invalid(flux, "config.name", NULL, "config.name", "missing config.name rejected");
	expect_invalid(flux, P0 ".datasets[0].resolution", fx_json("[512, 1001]"), P0 ".datasets[0].resolution[1]",
		       "bucket not a multiple of 8 rejected");
	expect_invalid(flux, P0 ".datasets[0].resolution", fx_json("[512, 8192]"), P0 ".datasets[0].resolution[1]",
		       "bucket above 4096 rejected");
	expect_invalid(flux, P0 ".datasets[0].resolution", fx_json("[]"), P0 ".datasets[0].resolution", "empty bucket list rejected");
	expect_invalid(flux, P0 ".datasets[0].resolution",
		       fx_json("[8,16,24,32,40,48,56,64,72,80,88,96,104,112,120,128,136]"), P0 ".datasets[0].resolution",
		       "more than 16 buckets rejected");
	expect_invalid(flux, P0 ".datasets[0].resolution", json_integer(-5), P0 ".datasets[0].resolution", "negative resolution rejected");
	expect_invalid(wan, P0 ".datasets[0].num_frames", json_integer(1001), P0 ".datasets[0].num_frames", "num_frames 1001 rejected");
	expect_invalid(flux, P0 ".sample.width", json_integer(0), P0 ".sample.width", "sample width 0 rejected");
	expect_invalid(flux, P0 ".sample.sample_steps", json_integer(-1), P0 ".sample.sample_steps", "sample_steps -1 rejected");
	expect_invalid(flux, P0 ".sample.samples[0].height", json_integer(0), P0 ".sample.samples[0].height",
		       "samples[] height 0 rejected");
	c = json_deep_copy(flux);
	jpath_set(c, P0 ".train.gradient_accumulation", json_integer(2));
	expect_invalid(c, P0 ".train.gradient_accumulation_steps", json_integer(2), P0 ".train.gradient_accumulation_steps",
		       "both accumulation keys above 1 rejected (AI Toolkit refuses it)");
	json_decref(c);
	c = json_string("x");
	TAP_INT_EQ(atconfig_validate(c, &f, &m), -1, "non-object rejected");
	free(f);
	free(m);
	json_decref(c);

	/* jpath */
	c = fx_json("{\"a\": {\"b\": [1, {\"c\": 2}]}}");
	TAP_INT_EQ(jpath_int(c, "a.b[1].c", 0), 2, "jpath get through an array index");
	TAP_OK(jpath_get(c, "a.b[2]") == NULL, "jpath index out of range");
	TAP_OK(jpath_get(c, "a..b") == NULL && jpath_get(c, "a.b[x]") == NULL, "jpath malformed paths");
	TAP_INT_EQ(jpath_set(c, "a.new.deep", json_integer(5)), 0, "jpath set creates objects");
	TAP_INT_EQ(jpath_int(c, "a.new.deep", 0), 5, "jpath set value");
	TAP_INT_EQ(jpath_set(c, "a.b[5]", json_integer(1)), -1, "jpath set never creates array elements");
	TAP_INT_EQ(jpath_set(c, "a.b[0]", json_integer(9)), 0, "jpath set an array element");
	TAP_INT_EQ(jpath_del(c, "a.b[1].c"), 0, "jpath delete");
	TAP_INT_EQ(jpath_del(c, "a.b[1].c"), -1, "jpath delete absent");
	json_decref(c);

	json_decref(flux);
	json_decref(wan);
	return TAP_DONE();
}
