/* AI Toolkit config files as rung sees them: validation at submit (shape and sane ranges, with the
 * JSON path of the first problem), the job kind, and the process accessor. Pure code, no I/O; the
 * memory-related rewriting lives in recovery/ladder.c. */
#include "atconfig.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "jpath.h"
#include "util.h"

#define P0 "config.process[0]"
#define MAX_BATCH 64
#define MAX_ACCUM 1024
#define MAX_STEPS 10000000
#define MAX_RES 4096
#define MAX_BUCKETS 16
#define MAX_FRAMES 1000
#define MAX_SAMPLE_SIZE 8192
#define MAX_SAMPLE_STEPS 1000

struct vstate {
	char *field;   /* first problem's path, heap */
	char *message; /* first problem's sentence, heap */
};

static int fail(struct vstate *v, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct vstate *v, const char *field, const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	v->field = xstrdup(field);
	v->message = xstrdup(buf);
	return -1;
}

/* An optional integer member in [lo, hi]. */
static int check_int(struct vstate *v, const json_t *obj, const char *key, const char *at, long long lo,
		     long long hi)
{
	json_t *x = json_object_get(obj, key);
	char *path;
	int rc = 0;

	if (!x || json_is_null(x))
		return 0;
	path = xasprintf("%s.%s", at, key);
	if (!json_is_integer(x))
		rc = fail(v, path, "%s must be an integer", key);
	else if (json_integer_value(x) < lo || json_integer_value(x) > hi)
		rc = fail(v, path, "%s must be between %lld and %lld", key, lo, hi);
	free(path);
	return rc;
}

static int check_bool(struct vstate *v, const json_t *obj, const char *key, const char *at)
{
	json_t *x = json_object_get(obj, key);
	char *path;
	int rc = 0;

	if (!x || json_is_null(x) || json_is_boolean(x))
		return 0;
	path = xasprintf("%s.%s", at, key);
	rc = fail(v, path, "%s must be true or false", key);
	free(path);
	return rc;
}

static int check_resolution(struct vstate *v, const json_t *res, const char *at)
{
	char *path = xasprintf("%s.resolution", at);
	size_t i;
	json_t *x;
	int rc = 0;

	if (json_is_integer(res)) {
		if (json_integer_value(res) < 1 || json_integer_value(res) > MAX_RES)
			rc = fail(v, path, "resolution must be between 1 and %d", MAX_RES);
		goto out;
	}
	if (!json_is_array(res) || json_array_size(res) == 0) {
		rc = fail(v, path, "resolution must be a positive number or a non-empty list of buckets");
		goto out;
	}
	if (json_array_size(res) > MAX_BUCKETS) {
		rc = fail(v, path, "resolution may list at most %d buckets", MAX_BUCKETS);
		goto out;
	}
	json_array_foreach(res, i, x) {
		long long r = json_is_integer(x) ? json_integer_value(x) : -1;
		if (r < 8 || r > MAX_RES || r % 8) {
			char *ip = xasprintf("%s[%zu]", path, i);
			rc = fail(v, ip, "each resolution bucket must be a multiple of 8 between 8 and %d", MAX_RES);
			free(ip);
			goto out;
		}
	}
out:
	free(path);
	return rc;
}

/* The keys a sample block or a samples[] item may carry. */
static int check_sample_keys(struct vstate *v, const json_t *s, const char *at)
{
	if (check_int(v, s, "width", at, 1, MAX_SAMPLE_SIZE) || check_int(v, s, "height", at, 1, MAX_SAMPLE_SIZE) ||
	    check_int(v, s, "sample_steps", at, 1, MAX_SAMPLE_STEPS) || check_int(v, s, "num_frames", at, 1, MAX_FRAMES))
		return -1;
	return 0;
}

static int check_train(struct vstate *v, const json_t *train)
{
	const char *at = P0 ".train";
	long long ga, gas;

	if (!json_is_object(train))
		return fail(v, at, "train must be an object");
	if (check_int(v, train, "batch_size", at, 1, MAX_BATCH) ||
	    check_int(v, train, "gradient_accumulation", at, 1, MAX_ACCUM) ||
	    check_int(v, train, "gradient_accumulation_steps", at, 1, MAX_ACCUM) ||
	    check_int(v, train, "steps", at, 1, MAX_STEPS) || check_bool(v, train, "gradient_checkpointing", at) ||
	    check_bool(v, train, "disable_sampling", at))
		return -1;
	/* AI Toolkit refuses both accumulation keys above 1 at once. */
	ga = jpath_int(train, "gradient_accumulation", 1);
	gas = jpath_int(train, "gradient_accumulation_steps", 1);
	if (ga > 1 && gas > 1)
		return fail(v, P0 ".train.gradient_accumulation_steps",
			    "set gradient_accumulation or the legacy gradient_accumulation_steps, not both");
	return 0;
}

static int check_datasets(struct vstate *v, const json_t *ds)
{
	size_t i;
	json_t *d;

	if (!json_is_array(ds) || json_array_size(ds) == 0)
		return fail(v, P0 ".datasets", "datasets must be a non-empty array");
	json_array_foreach(ds, i, d) {
		char *at = xasprintf(P0 ".datasets[%zu]", i);
		json_t *res = json_object_get(d, "resolution");
		int rc = 0;
		if (!json_is_object(d))
			rc = fail(v, at, "each dataset must be an object");
		else if (res && !json_is_null(res) && check_resolution(v, res, at))
			rc = -1;
		else if (check_int(v, d, "num_frames", at, 1, MAX_FRAMES) ||
			 check_int(v, d, "batch_size", at, 1, MAX_BATCH))
			rc = -1;
		free(at);
		if (rc)
			return rc;
	}
	return 0;
}

static int check_sample(struct vstate *v, const json_t *s)
{
	const char *at = P0 ".sample";
	json_t *items, *it;
	size_t i;

	if (!s || json_is_null(s))
		return 0;
	if (!json_is_object(s))
		return fail(v, at, "sample must be an object");
	if (check_sample_keys(v, s, at) || check_int(v, s, "sample_every", at, 1, MAX_STEPS))
		return -1;
	items = json_object_get(s, "samples");
	if (items && !json_is_array(items))
		return fail(v, P0 ".sample.samples", "samples must be an array");
	json_array_foreach(items, i, it) {
		char *ip = xasprintf(P0 ".sample.samples[%zu]", i);
		int rc = json_is_object(it) ? check_sample_keys(v, it, ip) : fail(v, ip, "each sample must be an object");
		free(ip);
		if (rc)
			return rc;
	}
	return 0;
}

static int check_model(struct vstate *v, const json_t *m)
{
	const char *at = P0 ".model";
	json_t *arch;

	if (!json_is_object(m))
		return fail(v, at, "model must be an object");
	arch = json_object_get(m, "arch");
	if (arch && !json_is_null(arch) && !json_is_string(arch))
		return fail(v, P0 ".model.arch", "arch must be a string");
	if (check_bool(v, m, "low_vram", at) || check_bool(v, m, "quantize", at) || check_bool(v, m, "quantize_te", at) ||
	    check_bool(v, m, "layer_offloading", at))
		return -1;
	return 0;
}

int atconfig_validate(const json_t *file, char **field, char **message)
{
	struct vstate v = { NULL, NULL };
	json_t *cfg, *procs, *p;
	const char *name;
	int rc = -1;

	if (!json_is_object(file)) {
		fail(&v, "", "the config must be a JSON object");
		goto out;
	}
	cfg = json_object_get(file, "config");
	if (!json_is_object(cfg)) {
		fail(&v, "config", "config must be an object");
		goto out;
	}
	name = jpath_str(cfg, "name", NULL);
	if (!name || !*name) {
		fail(&v, "config.name", "config.name must be a non-empty string");
		goto out;
	}
	procs = json_object_get(cfg, "process");
	if (!json_is_array(procs) || json_array_size(procs) == 0) {
		fail(&v, "config.process", "config.process must be a non-empty array");
		goto out;
	}
	p = json_array_get(procs, 0);
	if (!json_is_object(p)) {
		fail(&v, P0, "config.process[0] must be an object");
		goto out;
	}
	if (check_train(&v, json_object_get(p, "train")) || check_datasets(&v, json_object_get(p, "datasets")) ||
	    check_model(&v, json_object_get(p, "model")) || check_sample(&v, json_object_get(p, "sample")))
		goto out;
	rc = 0;
out:
	if (rc) {
		*field = v.field;
		*message = v.message;
	} else {
		*field = NULL;
		*message = NULL;
	}
	return rc;
}

static bool arch_is_video(const char *arch)
{
	static const char *const video_prefixes[] = { "wan", "ltx", "hunyuan_video" };
	size_t i;

	if (!arch)
		return false;
	for (i = 0; i < ARRAY_LEN(video_prefixes); i++)
		if (!strncasecmp(arch, video_prefixes[i], strlen(video_prefixes[i])))
			return true;
	return false;
}

const char *atconfig_kind(const json_t *file)
{
	json_t *p = atconfig_process(file), *d, *it;
	size_t i;

	if (!p)
		return "image";
	if (arch_is_video(jpath_str(p, "model.arch", NULL)))
		return "video";
	json_array_foreach(json_object_get(p, "datasets"), i, d)
		if (jpath_int(d, "num_frames", 1) > 1)
			return "video";
	if (jpath_int(p, "sample.num_frames", 1) > 1)
		return "video";
	json_array_foreach(jpath_get(p, "sample.samples"), i, it)
		if (jpath_int(it, "num_frames", 1) > 1)
			return "video";
	return "image";
}

json_t *atconfig_process(const json_t *file)
{
	json_t *p = jpath_get(file, P0);

	return json_is_object(p) ? p : NULL;
}
