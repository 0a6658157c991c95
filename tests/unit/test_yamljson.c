/* Unit tests for common/yamljson: AI Toolkit example shapes, PyYAML 1.1 scalar typing (with AI Toolkit's
 * exponent-float fix), anchors and merge keys, and malformed input. Expected values were produced by
 * PyYAML with AI Toolkit's loader. Run from the repository root (reads tests/data/). */
#include <stdlib.h>
#include <string.h>

#include "yamljson.h"
#include "tap.h"

static json_t *load(const char *path)
{
	char *err = NULL;
	json_t *v = yamljson_load_file(path, &err);
	if (!v)
		printf("# %s\n", err);
	free(err);
	return v;
}

static void expect_equal(const json_t *got, const char *want_json, const char *name)
{
	json_error_t je;
	json_t *want = json_loads(want_json, JSON_DECODE_ANY, &je);
	int ok = got && want && json_equal(got, want);
	if (!ok && got) {
		char *s = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
		printf("# got: %s\n", s ? s : "?");
		free(s);
	}
	TAP_OK(ok, name);
	json_decref(want);
}

static void test_flux_example(void)
{
	json_t *c = load("tests/data/aitk_flux_lora_24gb.yaml");
	TAP_OK(json_is_object(c), "flux example loads as an object");
	if (!c)
		return;
	json_t *p0 = json_array_get(json_object_get(json_object_get(c, "config"), "process"), 0);
	json_t *train = json_object_get(p0, "train");
	TAP_STR_EQ(json_string_value(json_object_get(c, "job")), "extension", "job is extension");
	TAP_OK(json_is_real(json_object_get(train, "lr")) && json_real_value(json_object_get(train, "lr")) == 1e-4,
		"lr: 1e-4 is the float 0.0001 (AI Toolkit's loader)");
	TAP_OK(json_is_integer(json_object_get(train, "batch_size")), "batch_size is an integer");
	TAP_OK(json_is_true(json_object_get(train, "gradient_checkpointing")), "true is a boolean");
	TAP_STR_EQ(json_string_value(json_object_get(p0, "device")), "cuda:0", "cuda:0 stays a string");
	TAP_STR_EQ(json_string_value(json_object_get(json_object_get(p0, "save"), "dtype")), "float16",
		"float16 stays a string");
	expect_equal(json_object_get(json_array_get(json_object_get(p0, "datasets"), 0), "resolution"),
		"[512, 768, 1024]", "flow sequence of buckets");
	TAP_STR_EQ(json_string_value(json_object_get(json_object_get(c, "meta"), "version")), "1.0",
		"quoted '1.0' stays a string");
	TAP_INT_EQ(json_array_size(json_object_get(json_object_get(p0, "sample"), "prompts")), 2,
		"commented-out prompt is skipped");
	TAP_STR_EQ(json_string_value(json_object_get(json_object_get(p0, "sample"), "neg")), "",
		"empty quoted string stays a string");
	TAP_OK(json_is_real(json_object_get(json_array_get(json_object_get(p0, "datasets"), 0),
		"caption_dropout_rate")), "0.05 is a float");
	json_decref(c);
}

static void test_wan_example(void)
{
	json_t *c = load("tests/data/aitk_wan22_14b_24gb.yaml");
	TAP_OK(json_is_object(c), "wan 2.2 example (comment lines before ---) loads");
	if (!c)
		return;
	json_t *p0 = json_array_get(json_object_get(json_object_get(c, "config"), "process"), 0);
	TAP_STR_EQ(json_string_value(json_object_get(json_object_get(p0, "model"), "arch")), "wan22_14b", "arch");
	TAP_INT_EQ(json_integer_value(json_object_get(json_object_get(p0, "sample"), "num_frames")), 41,
		"sample.num_frames");
	TAP_OK(json_real_value(json_object_get(json_object_get(json_object_get(p0, "train"), "optimizer_params"),
		"weight_decay")) == 1e-4, "nested weight_decay: 1e-4");
	TAP_OK(json_is_real(json_object_get(json_object_get(p0, "sample"), "guidance_scale")), "3.5 is a float");
	json_decref(c);
}

static void test_types(void)
{
	json_t *c = load("tests/data/yaml_types.yaml");
	TAP_OK(c != NULL, "types fixture loads");
	if (!c)
		return;
	expect_equal(json_object_get(c, "ints"), "[0, 7, -3, 12, 1000, 31, 5, 15, \"5\", \"6\", 90]",
		"ints: decimal, sign, underscores, hex, binary, octal, quoted, sexagesimal");
	expect_equal(json_object_get(c, "floats"),
		"[0.0001, 100000.0, 0.0025, 0.0001, 0.05, 3.5, \"-.5\", 1000.5, 2.0, 1000.0]",
		"floats: exponents without a dot, -.5 stays text as in PyYAML");
	expect_equal(json_object_get(c, "bools"),
		"[true, true, true, false, true, true, false, false, true, false, \"yes\", \"true\"]",
		"YAML 1.1 booleans, quoted ones stay strings");
	expect_equal(json_object_get(c, "nulls"), "[null, null, null, \"\", \"null\"]", "null, Null, ~");
	TAP_OK(json_is_null(json_object_get(c, "empty_value")), "an empty value is null");
	expect_equal(json_object_get(c, "strings"),
		"[\"float16\", \"bf16\", \"cuda:0\", \"08\", \"1.2.3\", \"1e-4\", \"2001-12-14\", \".5x\", \"0o17\"]",
		"strings that look almost like numbers");
	expect_equal(json_object_get(c, "tagged"), "[\"12\", 3.0, 7]", "explicit !!str, !!float, !!int");
	TAP_STR_EQ(json_string_value(json_object_get(c, "block")), "line one\nline two\n", "literal block");
	TAP_STR_EQ(json_string_value(json_object_get(c, "folded")), "folded text\n", "folded block");
	json_decref(c);
}

static void test_anchors(void)
{
	json_t *c = load("tests/data/yaml_anchors.yaml");
	TAP_OK(c != NULL, "anchors fixture loads");
	if (!c)
		return;
	expect_equal(json_object_get(c, "process"),
		"[{\"train\": {\"batch_size\": 1, \"lr\": 0.0001, \"steps\": 2000}, \"resolution\": [512, 768]},"
		" {\"train\": {\"steps\": 2000, \"dtype\": \"bf16\", \"batch_size\": 4, \"lr\": 0.0001,"
		" \"gradient_checkpointing\": true}}, {\"literal\": {\"<<\": \"kept\"}}]",
		"aliases, << merge (explicit keys win, earlier merges win), quoted << is a key");
	json_decref(c);
}

static void expect_error(const char *yaml, const char *want_sub, const char *name)
{
	char *err = NULL;
	json_t *v = yamljson_parse(yaml, strlen(yaml), &err);
	int ok = !v && err && strstr(err, want_sub);
	if (!ok)
		printf("# err: %s\n", err ? err : "(none)");
	TAP_OK(ok, name);
	json_decref(v);
	free(err);
}

static void test_errors(void)
{
	char *err = NULL;
	json_t *v = yamljson_load_file("tests/data/yaml_malformed.yaml", &err);
	TAP_OK(!v && err && strstr(err, "yaml_malformed.yaml: line ") && strstr(err, "flow sequence"),
		"malformed YAML: error names the file, a line and the problem");
	if (err)
		printf("# %s\n", err);
	free(err);
	expect_error("a: 1\n  b: 2\n", "line 2", "bad indentation reports line 2");
	expect_error("a: *nope\n", "unknown alias *nope", "unknown alias");
	expect_error("a: 1\n---\nb: 2\n", "more than one", "two documents are refused");
	expect_error("x: .inf\n", "cannot be represented in JSON", ".inf is refused");
	expect_error("? [1, 2]\n: v\n", "keys must be scalars", "a sequence as a key is refused");
	expect_error("a:\n  <<: 5\n", "merge key", "<< with a scalar is refused");
	expect_error("a: !env ${HOME}\n", "unsupported tag", "unknown tags are refused as SafeLoader does");
	expect_error("a: 99999999999999999999\n", "out of range", "huge integers are refused");
	expect_error("a: &a [*a]\n", "unknown alias", "a recursive alias is refused");
	/* a billion-laughs style alias bomb stays bounded */
	expect_error("a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
		"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
		"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
		"too many values", "alias expansion is capped");
	v = yamljson_load_file("tests/data/does-not-exist.yaml", &err);
	TAP_OK(!v && err && strstr(err, "No such file"), "missing file");
	free(err);
}

static void test_misc(void)
{
	char *err = NULL;
	json_t *v = yamljson_parse("# only a comment\n", 17, &err);
	TAP_OK(json_is_null(v), "a file of comments is a null document");
	json_decref(v);
	v = yamljson_parse("{a: 1, b: [x, 2.5]}", 19, &err);
	expect_equal(v, "{\"a\": 1, \"b\": [\"x\", 2.5]}", "flow mapping");
	json_decref(v);
	v = yamljson_parse("1: a\ntrue: b\n~: c\n", 18, &err);
	expect_equal(v, "{\"1\": \"a\", \"true\": \"b\", \"null\": \"c\"}", "non-string keys become JSON text");
	json_decref(v);
	v = yamljson_scalar("1e-4", &err);
	TAP_OK(json_is_real(v) && json_real_value(v) == 1e-4, "yamljson_scalar 1e-4");
	json_decref(v);
	v = yamljson_scalar("-0x10", &err);
	TAP_INT_EQ(json_integer_value(v), -16, "yamljson_scalar -0x10");
	json_decref(v);
}

int main(void)
{
	test_flux_example();
	test_wan_example();
	test_types();
	test_anchors();
	test_errors();
	test_misc();
	return TAP_DONE();
}
