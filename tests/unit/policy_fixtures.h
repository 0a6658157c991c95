/* Shared by the policy, classify, ladder and report unit tests: load the AI Toolkit config fixtures
 * of tests/data, build FACTS and CTX values, and look up changes in a DECISION. */
#ifndef RUNG_POLICY_FIXTURES_H
#define RUNG_POLICY_FIXTURES_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/jpath.h"
#include "../../recovery/policy.h"

#define P0 "config.process[0]"

/* tests/data/NAME parsed; aborts when missing (a broken fixture must fail loudly). */
static inline json_t *fx_load(const char *name)
{
	static const char *const dirs[] = { "tests/data", "../../tests/data", "../tests/data" };
	char path[512];
	json_t *j = NULL;
	json_error_t e;
	size_t i;
	const char *env = getenv("RUNG_TEST_DATA");

	if (env) {
		snprintf(path, sizeof(path), "%s/%s", env, name);
		j = json_load_file(path, 0, &e);
	}
	for (i = 0; !j && i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dirs[i], name);
		j = json_load_file(path, 0, &e);
	}
	if (!j) {
		fprintf(stderr, "fixture %s: %s\n", name, e.text);
		abort();
	}
	return j;
}

/* Parses a JSON literal; aborts on a typo in a test. */
static inline json_t *fx_json(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	if (!j) {
		fprintf(stderr, "bad JSON in test: %s: %s\n", e.text, text);
		abort();
	}
	return j;
}

/* True when v equals the JSON literal text. */
static inline int fx_eq(const json_t *v, const char *text)
{
	json_t *w = fx_json(text);
	int eq = v && json_equal(v, w);

	json_decref(w);
	return eq;
}

/* FACTS of a GPU OOM in phase at steps first..last (first < 0: no step seen). */
static inline json_t *fx_oom(const char *phase, long long first, long long last)
{
	json_t *f = fx_json("{\"exit_code\": 1, \"signal\": null, \"cancelled\": false, \"signatures\": {\"cuda_oom\": 1},"
			    " \"oom\": {\"tried_to_allocate_mib\": 1024, \"total_capacity_mib\": 24564, \"free_mib\": 100,"
			    " \"allocated_by_pytorch_mib\": 22000, \"processes\": []}, \"duration_ms\": 60000,"
			    " \"gpu_before\": {\"uuid\": \"GPU-1\", \"memory_total_mib\": 24564, \"memory_used_mib\": 0,"
			    " \"processes\": []}, \"log_tail\": [\"torch.OutOfMemoryError: CUDA out of memory.\"]}");

	json_object_set_new(f, "phase", json_string(phase));
	json_object_set_new(f, "oom_phase", json_string(phase));
	json_object_set_new(f, "first_step", first < 0 ? json_null() : json_integer(first));
	json_object_set_new(f, "last_step", first < 0 ? json_null() : json_integer(last));
	json_object_set_new(f, "steps_done", json_integer(first < 0 ? 0 : last - first + 1));
	return f;
}

static inline json_t *fx_success(long long steps)
{
	json_t *f = fx_json("{\"exit_code\": 0, \"signal\": null, \"cancelled\": false, \"phase\": \"done\","
			    " \"oom_phase\": null, \"signatures\": {}, \"oom\": null, \"duration_ms\": 600000,"
			    " \"log_tail\": [\"Saving at step 2000\"]}");

	json_object_set_new(f, "first_step", json_integer(1));
	json_object_set_new(f, "last_step", json_integer(steps));
	json_object_set_new(f, "steps_done", json_integer(steps));
	return f;
}

/* A CTX for the attempt number n that ran config (borrowed) with facts (stolen) on a 24 GiB GPU of
 * a fleet whose largest GPU is fleet_mib. */
static inline json_t *fx_ctx(const json_t *target, const json_t *config, json_t *facts, long long n, long long fleet_mib)
{
	json_t *ctx = fx_json("{\"job\": {\"id\": 7, \"recovery\": {\"scale_up\": true, \"max_attempts\": 10,"
			      " \"max_env_retries\": 3, \"max_lost\": 3, \"max_gpu_seconds\": null, \"validate_steps\": null,"
			      " \"early_steps\": 10, \"quarantine_after\": 2, \"env_fault_window_s\": 3600},"
			      " \"recovery_state\": {}}, \"attempts\": [],"
			      " \"gpu\": {\"uuid\": \"GPU-1\", \"state\": \"ok\", \"memory_total_mib\": 24564, \"env_faults_in_window\": 0},"
			      " \"config_succeeded_before\": false}");
	json_t *job = json_object_get(ctx, "job");
	const char *kind = jpath_int(target, P0 ".datasets[0].num_frames", 1) > 1 ? "video" : "image";

	json_object_set_new(job, "kind", json_string(kind));
	json_object_set_new(job, "target_config", json_deep_copy(target));
	json_object_set_new(job, "current_config", json_deep_copy(config));
	json_object_set_new(ctx, "attempt", json_pack("{s:I, s:I, s:I, s:s, s:I, s:O, s:s, s:o, s:I}", "id", (json_int_t)(100 + n),
						      "number", (json_int_t)n, "worker_id", (json_int_t)3, "gpu_uuid", "GPU-1",
						      "gpu_memory_mib", (json_int_t)24564, "config", config, "state", "ended",
						      "facts", facts, "duration_ms", (json_int_t)60000));
	json_object_set_new(ctx, "fleet", json_pack("{s:I}", "max_gpu_memory_mib", (json_int_t)fleet_mib));
	return ctx;
}

/* Appends an earlier attempt to ctx.attempts. */
static inline void fx_add_attempt(json_t *ctx, long long n, const json_t *config, const char *outcome, const char *cls,
				  const char *action, const char *gpu, long long worker)
{
	json_array_append_new(json_object_get(ctx, "attempts"),
			      json_pack("{s:I, s:I, s:I, s:s, s:I, s:O, s:s, s:s, s:s, s:s, s:n, s:{}, s:I}", "id",
					(json_int_t)(100 + n), "number", (json_int_t)n, "worker_id", (json_int_t)worker,
					"gpu_uuid", gpu, "gpu_memory_mib", (json_int_t)24564, "config", config, "state",
					"ended", "outcome", outcome, "class", cls, "action", action, "rung", "facts",
					"duration_ms", (json_int_t)60000));
}

static inline json_t *fx_decide(const json_t *ctx)
{
	char *err = NULL;
	json_t *d = policy_decide(ctx, &err);

	if (!d) {
		fprintf(stderr, "policy_decide: %s\n", err ? err : "?");
		free(err);
		abort();
	}
	return d;
}

/* The change of path in a decision's changes (borrowed), or NULL. */
static inline json_t *fx_change(const json_t *changes, const char *path)
{
	size_t i;
	json_t *c;

	json_array_foreach(changes, i, c)
		if (!strcmp(json_string_value(json_object_get(c, "path")), path))
			return c;
	return NULL;
}

static inline int fx_touches(const json_t *changes, const char *key)
{
	size_t i;
	json_t *c;

	json_array_foreach(changes, i, c)
		if (strstr(json_string_value(json_object_get(c, "path")), key))
			return 1;
	return 0;
}

#endif
