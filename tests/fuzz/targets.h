/* The bodies of rung's fuzz targets, shared by the libFuzzer mains (tests/fuzz/fuzz_*.c, built by
 * scripts/fuzz.sh with clang) and the corpus replay unit test (tests/unit/test_fuzz_replay.c, gcc).
 * Each fuzz_*_one takes one input of any bytes, drives the pure modules on it and aborts (with the
 * invariant on stderr) when something the contracts promise does not hold. */
#ifndef RUNG_FUZZ_TARGETS_H
#define RUNG_FUZZ_TARGETS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/atconfig.h"
#include "../../common/jpath.h"
#include "../../recovery/scan.h"
#include "../../server/api_jobs.h"
#include "../../recovery/classify.h"
#include "../../server/http.h"
#include "../../recovery/ladder.h"
#include "../../recovery/policy.h"
#include "../../recovery/report.h"

#define FZ_P0 "config.process[0]"
#define FZ_MAX_WALK 200   /* rungs or settings one walk may take before it counts as endless */
#define FZ_MAX_CHAIN 14   /* attempts one simulated job may run */

/* Set by the replay test: every walk and every simulated job for each input; the fuzzer runs a few
 * picked by a hash of the input (a superset, so whatever the fuzzer finds replays). */
static int fz_thorough;

#define FZ_CHECK(cond, what) do { if (!(cond)) fz_fail(__FILE__, __LINE__, #cond, (what)); } while (0)

static void fz_fail(const char *file, int line, const char *cond, const char *what) __attribute__((noreturn));
static void fz_fail(const char *file, int line, const char *cond, const char *what)
{
	fprintf(stderr, "fuzz invariant broken (%s) at %s:%d: %s\n", what, file, line, cond);
	fflush(stderr);
	abort();
}

/* Parses a JSON literal of this file; aborts on a typo. */
static json_t *fz_json(const char *text)
{
	json_error_t e;
	json_t *j = json_loads(text, 0, &e);

	if (!j) {
		fprintf(stderr, "fuzz: bad built-in JSON: %s\n", e.text);
		abort();
	}
	return j;
}

static bool fz_same(const json_t *a, const json_t *b)
{
	return (!a && !b) || (a && b && json_equal(a, b));
}

/* ---- fuzz_scan: trainer output in chunks → scan_facts ---- */

/* The first byte picks how the rest is cut into feeds (whole, bytes, small or large random chunks)
 * and whether a scan_finish happens in the middle; the rest is the trainer's output. */
static __attribute__((unused)) int fuzz_scan_one(const uint8_t *data, size_t size)
{
	struct scan *s = scan_new();
	uint32_t rng = 0x9e3779b9u;
	unsigned mode = size ? data[0] : 0;
	const char *p = size ? (const char *)data + 1 : "";
	size_t left = size ? size - 1 : 0, mid = left / 2, fed = 0, n, i;
	bool finished_mid = false;
	json_t *f, *tail, *x, *sigs;
	const char *k;
	char *dump;

	for (i = 0; i < size && i < 8; i++)
		rng = rng * 1103515245u + data[i] + 12345u;
	while (left) {
		rng = rng * 1103515245u + 12345u;
		switch (mode & 3) {
		case 0: n = left; break;
		case 1: n = 1; break;
		case 2: n = 1 + (rng >> 16) % 16; break;
		default: n = 1 + (rng >> 8) % 4096; break;
		}
		if (n > left)
			n = left;
		scan_feed(s, p, n);
		p += n;
		left -= n;
		fed += n;
		if ((mode & 4) && !finished_mid && fed >= mid) {
			scan_finish(s);
			finished_mid = true;
		}
		FZ_CHECK(scan_phase_name(scan_phase(s)) != NULL, "scan: phase name");
		FZ_CHECK(scan_step(s) >= -1 && scan_total_steps(s) >= -1, "scan: step while running");
		FZ_CHECK(scan_signature(s, "cuda_oom") >= 0, "scan: signature count");
	}
	scan_finish(s);

	f = scan_facts(s);
	FZ_CHECK(json_is_object(f), "scan: facts is an object");
	FZ_CHECK(json_is_string(json_object_get(f, "phase")), "scan: phase");
	FZ_CHECK(!strcmp(json_string_value(json_object_get(f, "phase")), scan_phase_name(scan_phase(s))),
		 "scan: facts phase is the live phase");
	FZ_CHECK(json_is_string(json_object_get(f, "oom_phase")) || json_is_null(json_object_get(f, "oom_phase")),
		 "scan: oom_phase");
	FZ_CHECK(json_is_integer(json_object_get(f, "steps_done")), "scan: steps_done");
	FZ_CHECK(json_object_get(f, "first_step") && json_object_get(f, "last_step") &&
		 json_object_get(f, "total_steps"), "scan: step fields present");
	FZ_CHECK(jpath_int(f, "last_step", -1) == scan_step(s), "scan: last_step is the live step");
	FZ_CHECK(json_is_string(json_object_get(f, "error")) || json_is_null(json_object_get(f, "error")),
		 "scan: error present (valid UTF-8)");
	FZ_CHECK(json_string_length(json_object_get(f, "error")) <= SCAN_TAIL_BYTES, "scan: error capped");
	FZ_CHECK(json_is_object(json_object_get(f, "oom")) || json_is_null(json_object_get(f, "oom")), "scan: oom");
	FZ_CHECK(json_array_size(jpath_get(f, "oom.processes")) <= 64, "scan: oom processes capped");
	sigs = json_object_get(f, "signatures");
	FZ_CHECK(json_is_object(sigs), "scan: signatures");
	json_object_foreach(sigs, k, x) {
		FZ_CHECK(json_is_integer(x) && json_integer_value(x) > 0, "scan: signature counts positive");
		FZ_CHECK(scan_signature(s, k) == json_integer_value(x), "scan: signature count matches");
	}
	tail = json_object_get(f, "log_tail");
	FZ_CHECK(json_is_array(tail), "scan: log_tail");
	FZ_CHECK(json_array_size(tail) <= SCAN_TAIL_LINES, "scan: log_tail line cap");
	json_array_foreach(tail, i, x) {
		FZ_CHECK(json_is_string(x), "scan: tail lines are strings");
		FZ_CHECK(json_string_length(x) <= SCAN_TAIL_BYTES, "scan: tail line byte cap");
		FZ_CHECK(strlen(json_string_value(x)) == json_string_length(x), "scan: no NUL in tail lines");
	}
	dump = json_dumps(f, JSON_COMPACT);
	FZ_CHECK(dump != NULL, "scan: facts serialise");
	free(dump);
	json_decref(f);
	scan_free(s);
	return 0;
}

/* ---- fuzz_config: config text → validate, kind, ladders, policy, report ---- */

/* Effective batch as the ladder counts it: the largest batch_size (train or dataset) times the
 * accumulation that is set. */
static long long fz_eff_batch(const json_t *f)
{
	long long b = jpath_int(f, FZ_P0 ".train.batch_size", 1), ga, gas;
	size_t i;
	json_t *d;

	json_array_foreach(jpath_get(f, FZ_P0 ".datasets"), i, d)
		if (jpath_int(d, "batch_size", 1) > b)
			b = jpath_int(d, "batch_size", 1);
	ga = jpath_int(f, FZ_P0 ".train.gradient_accumulation", 1);
	gas = jpath_int(f, FZ_P0 ".train.gradient_accumulation_steps", 1);
	return b * (ga > gas ? ga : gas);
}

static void fz_check_frames(const json_t *f, const json_t *t, const char *path, const char *what)
{
	json_t *v = jpath_get(f, path);
	long long orig = jpath_int(t, path, 1);

	if (!v || json_is_null(v))
		return;
	FZ_CHECK(json_is_integer(v) && json_integer_value(v) >= 1, what);
	FZ_CHECK(json_integer_value(v) <= orig || orig < 1, what);
	FZ_CHECK(orig <= LADDER_FRAMES_FLOOR || json_integer_value(v) >= LADDER_FRAMES_FLOOR, what);
}

/* What every rewritten config must keep, whatever rung, setting or decision produced cur from the
 * target t (a config that passed atconfig_validate). */
static void fz_check_rewrite(const json_t *t, const json_t *cur, const char *what)
{
	static const char *const kept[] = {
		FZ_P0 ".train.lr", FZ_P0 ".train.optimizer", FZ_P0 ".train.optimizer_params", FZ_P0 ".network",
	};
	size_t i, j;
	json_t *d, *td, *res;
	char path[160];

	FZ_CHECK(json_is_object(cur), what);
	for (i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		FZ_CHECK(fz_same(jpath_get(t, kept[i]), jpath_get(cur, kept[i])), what);
	FZ_CHECK(!(jpath_int(cur, FZ_P0 ".train.gradient_accumulation", 1) > 1 &&
		   jpath_int(cur, FZ_P0 ".train.gradient_accumulation_steps", 1) > 1), what);
	FZ_CHECK(json_array_size(jpath_get(cur, FZ_P0 ".datasets")) == json_array_size(jpath_get(t, FZ_P0 ".datasets")),
		 what);
	json_array_foreach(jpath_get(cur, FZ_P0 ".datasets"), i, d) {
		td = json_array_get(jpath_get(t, FZ_P0 ".datasets"), i);
		res = json_object_get(d, "resolution");
		if (json_is_array(res))
			FZ_CHECK(json_array_size(res) > 0, what);
		if (json_object_get(td, "resolution") && !json_is_null(json_object_get(td, "resolution")))
			FZ_CHECK(res && !json_is_null(res), what);
		snprintf(path, sizeof(path), FZ_P0 ".datasets[%zu].num_frames", i);
		fz_check_frames(cur, t, path, what);
		FZ_CHECK(jpath_int(d, "batch_size", 1) >= 1, what);
	}
	fz_check_frames(cur, t, FZ_P0 ".sample.num_frames", what);
	json_array_foreach(jpath_get(cur, FZ_P0 ".sample.samples"), j, d) {
		snprintf(path, sizeof(path), FZ_P0 ".sample.samples[%zu].num_frames", j);
		fz_check_frames(cur, t, path, what);
	}
	FZ_CHECK(jpath_int(cur, FZ_P0 ".train.batch_size", 1) >= 1, what);
	FZ_CHECK(fz_eff_batch(cur) == fz_eff_batch(t), what);
}

/* The changes array must describe exactly the rewrite from before to after: replaying each
 * {"path", "old", "new"} on a copy of before finds old there and ends at after. */
static void fz_check_changes(const json_t *before, const json_t *after, const json_t *changes, const char *what)
{
	json_t *r = json_deep_copy(before), *c, *nv, *old;
	size_t i;
	const char *path;

	FZ_CHECK(json_is_array(changes), what);
	json_array_foreach(changes, i, c) {
		path = json_string_value(json_object_get(c, "path"));
		FZ_CHECK(path != NULL, what);
		if (!strcmp(path, "config.name"))
			FZ_CHECK(json_is_string(json_object_get(c, "new")), what);
		old = json_object_get(c, "old");
		if (!old || json_is_null(old))
			FZ_CHECK(!jpath_get(r, path) || json_is_null(jpath_get(r, path)), what);
		else
			FZ_CHECK(fz_same(jpath_get(r, path), old), what);
		nv = json_object_get(c, "new");
		if (nv && !json_is_null(nv))
			FZ_CHECK(jpath_set(r, path, json_deep_copy(nv)) == 0, what);
		else if (json_is_null(jpath_get(after, path)))
			FZ_CHECK(jpath_set(r, path, json_null()) == 0, what);
		else
			jpath_del(r, path);
	}
	FZ_CHECK(json_equal(r, after), what);
	json_decref(r);
}

/* Walks the plan of class cls from the target down to exhaustion; returns the last config (new). */
static json_t *fz_walk_down(const json_t *t, const char *cls, bool video)
{
	json_t *cur = json_deep_copy(t), *before, *ch;
	const struct ladder_rung *r;
	int n;

	for (n = 0;; n++) {
		FZ_CHECK(n < FZ_MAX_WALK, "ladder_step never exhausts");
		before = json_deep_copy(cur);
		ch = json_array();
		r = ladder_step(cls, video, cur, ch);
		if (!r) {
			FZ_CHECK(json_equal(before, cur) && json_array_size(ch) == 0, "exhausted ladder_step touched the file");
			json_decref(before);
			json_decref(ch);
			break;
		}
		FZ_CHECK(r->name && r->guide, "ladder rung has a name");
		FZ_CHECK(json_array_size(ch) > 0, "ladder rung recorded its changes");
		FZ_CHECK(ladder_position(r, video) >= -1, "ladder_position");
		fz_check_changes(before, cur, ch, "ladder_step changes describe the rewrite");
		fz_check_rewrite(t, cur, r->name);
		json_decref(before);
		json_decref(ch);
	}
	return cur;
}

/* Scales cur back up toward t until no setting is left; then the ladder's own settings match t. */
static void fz_walk_up(const json_t *t, json_t *cur, bool video)
{
	json_t *before, *ch;
	const struct ladder_setting *s;
	size_t i;
	int n;
	char path[160];

	for (n = 0;; n++) {
		FZ_CHECK(n < FZ_MAX_WALK, "ladder_scale_up never ends");
		before = json_deep_copy(cur);
		ch = json_array();
		s = ladder_scale_up(video, cur, t, NULL, false, ch);
		if (!s) {
			FZ_CHECK(json_equal(before, cur), "finished ladder_scale_up touched the file");
			json_decref(before);
			json_decref(ch);
			break;
		}
		FZ_CHECK(s->name && s->guide, "setting has a name");
		FZ_CHECK(json_array_size(ch) > 0, "setting recorded its changes");
		fz_check_changes(before, cur, ch, "ladder_scale_up changes describe the rewrite");
		fz_check_rewrite(t, cur, s->name);
		json_decref(before);
		json_decref(ch);
	}
	FZ_CHECK(jpath_int(cur, FZ_P0 ".train.batch_size", 1) == jpath_int(t, FZ_P0 ".train.batch_size", 1),
		 "scale-up ends at the target batch");
	FZ_CHECK(jpath_int(cur, FZ_P0 ".train.steps", 0) >= jpath_int(t, FZ_P0 ".train.steps", 0),
		 "scale-up ends at the target steps");
	for (i = 0; i < json_array_size(jpath_get(t, FZ_P0 ".datasets")); i++) {
		snprintf(path, sizeof(path), FZ_P0 ".datasets[%zu].resolution", i);
		FZ_CHECK(fz_same(jpath_get(cur, path), jpath_get(t, path)), "scale-up ends at the target buckets");
		snprintf(path, sizeof(path), FZ_P0 ".datasets[%zu].num_frames", i);
		FZ_CHECK(!video || jpath_int(cur, path, 1) == jpath_int(t, path, 1), "scale-up ends at the target frames");
	}
}

static const char *const fz_classes[] = {
	"success", "not_oom", "host_oom", "env_fault", "oom_load", "oom_sample", "oom_train_early",
	"oom_train_intermittent", "cancelled",
};
static const char *const fz_actions[] = { "succeed", "fail", "retry", "retry_clean", "scale_up", "requeue_bigger" };
static const char *const fz_states[] = { "queued", "succeeded", "failed", "cancelled" };

static bool fz_in(const char *s, const char *const *set, size_t n)
{
	size_t i;

	for (i = 0; s && i < n; i++)
		if (!strcmp(s, set[i]))
			return true;
	return false;
}

#define FZ_IN(s, set) fz_in((s), (set), sizeof(set) / sizeof((set)[0]))

/* A DECISION as docs/DESIGN.md shapes it; its next_config (when any) is a proper rewrite of t (NULL:
 * hostile input, only the shape is checked). Then the escalation report of ctx and d. */
static void fz_check_decision(const json_t *ctx, const json_t *d, const json_t *t)
{
	const char *state = json_string_value(json_object_get(d, "job_state"));
	json_t *next = json_object_get(d, "next_config"), *rep;

	FZ_CHECK(json_is_object(d), "decision is an object");
	FZ_CHECK(FZ_IN(json_string_value(json_object_get(d, "class")), fz_classes), "decision has a class");
	FZ_CHECK(FZ_IN(json_string_value(json_object_get(d, "action")), fz_actions), "decision has an action");
	FZ_CHECK(FZ_IN(state, fz_states), "decision has a job_state");
	FZ_CHECK(json_is_string(json_object_get(d, "rule")), "decision has a rule");
	FZ_CHECK(json_is_array(json_object_get(d, "evidence")), "decision has evidence");
	FZ_CHECK(json_is_array(json_object_get(d, "changes")), "decision has changes");
	FZ_CHECK(json_is_string(json_object_get(d, "reason")), "decision has a reason");
	FZ_CHECK(json_is_object(json_object_get(d, "constraints")), "decision has constraints");
	FZ_CHECK(json_is_object(json_object_get(d, "recovery_state")), "decision has recovery_state");
	FZ_CHECK(json_is_string(json_object_get(d, "rung")) || json_is_null(json_object_get(d, "rung")) ||
		 !json_object_get(d, "rung"), "decision rung");
	if (state && !strcmp(state, "queued"))
		FZ_CHECK(json_is_object(next), "a queued job has a next_config");
	else
		FZ_CHECK(!next || json_is_null(next), "an ended job has no next_config");
	if (t && json_is_object(next))
		fz_check_rewrite(t, next, "decision next_config");
	/* The server builds a report for escalations; the replay test builds one for every decision. */
	if (!fz_thorough && json_is_null(json_object_get(d, "escalation")) && state && !strcmp(state, "queued"))
		return;
	rep = report_build(ctx, d);
	FZ_CHECK(json_is_object(rep), "report_build returns an object");
	FZ_CHECK(json_is_string(json_object_get(rep, "markdown")), "report has markdown");
	FZ_CHECK(json_is_object(json_object_get(rep, "json")), "report has json");
	json_decref(rep);
}

static const char *const fz_facts_fixed[] = {
	/* 0: OOM in the first training steps */
	"{\"exit_code\": 1, \"signal\": null, \"cancelled\": false, \"phase\": \"train\", \"oom_phase\": \"train\","
	" \"first_step\": 1, \"last_step\": 3, \"steps_done\": 2, \"total_steps\": 2000,"
	" \"signatures\": {\"cuda_oom\": 1, \"skipped_batch_oom\": 3, \"oom_3_in_row\": 1, \"error_running_job\": 1},"
	" \"oom\": {\"tried_to_allocate_mib\": 1536, \"total_capacity_mib\": 24564, \"free_mib\": 212,"
	" \"allocated_by_pytorch_mib\": 22118, \"processes\": []}, \"error\": \"OOM during training step 3 times in a row\","
	" \"gpu_before\": {\"uuid\": \"GPU-1\", \"memory_total_mib\": 24564, \"memory_used_mib\": 3, \"processes\": []},"
	" \"gpu_after\": null, \"duration_ms\": 60000, \"log_tail\": [\"torch.OutOfMemoryError: CUDA out of memory.\"]}",
	/* 1: OOM while sampling after training started */
	"{\"exit_code\": 1, \"signal\": null, \"cancelled\": false, \"phase\": \"sample\", \"oom_phase\": \"sample\","
	" \"first_step\": 1, \"last_step\": 250, \"steps_done\": 249, \"total_steps\": 2000,"
	" \"signatures\": {\"cuda_oom\": 1, \"error_running_job\": 1}, \"oom\": {\"tried_to_allocate_mib\": 2048,"
	" \"total_capacity_mib\": 24564, \"free_mib\": 100, \"allocated_by_pytorch_mib\": 22000, \"processes\": []},"
	" \"error\": \"CUDA out of memory\", \"gpu_before\": {\"uuid\": \"GPU-1\", \"memory_total_mib\": 24564,"
	" \"memory_used_mib\": 0, \"processes\": []}, \"duration_ms\": 90000, \"log_tail\": []}",
	/* 2: OOM while loading the model, clean GPU */
	"{\"exit_code\": 1, \"signal\": null, \"cancelled\": false, \"phase\": \"load\", \"oom_phase\": \"load\","
	" \"first_step\": null, \"last_step\": null, \"steps_done\": 0, \"total_steps\": null,"
	" \"signatures\": {\"cuda_oom\": 1, \"error_running_job\": 1}, \"oom\": {\"tried_to_allocate_mib\": 90,"
	" \"total_capacity_mib\": 24564, \"free_mib\": 40, \"allocated_by_pytorch_mib\": 23000, \"processes\": []},"
	" \"error\": \"CUDA out of memory\", \"gpu_before\": {\"uuid\": \"GPU-1\", \"memory_total_mib\": 24564,"
	" \"memory_used_mib\": 0, \"processes\": []}, \"duration_ms\": 30000, \"log_tail\": []}",
	/* 3: intermittent OOM deep into training */
	"{\"exit_code\": 1, \"signal\": null, \"cancelled\": false, \"phase\": \"train\", \"oom_phase\": \"train\","
	" \"first_step\": 1, \"last_step\": 700, \"steps_done\": 699, \"total_steps\": 2000,"
	" \"signatures\": {\"cuda_oom\": 1, \"skipped_batch_oom\": 3, \"oom_3_in_row\": 1},"
	" \"oom\": null, \"error\": \"OOM during training step 3 times in a row\", \"duration_ms\": 800000, \"log_tail\": []}",
	/* 4: success */
	"{\"exit_code\": 0, \"signal\": null, \"cancelled\": false, \"phase\": \"done\", \"oom_phase\": null,"
	" \"first_step\": 1, \"last_step\": 2000, \"steps_done\": 1999, \"total_steps\": 2000, \"signatures\": {},"
	" \"oom\": null, \"error\": null, \"duration_ms\": 600000, \"log_tail\": [\"Saving at step 2000\"]}",
	/* 5: zero bytes free at load on a dirty GPU (environment fault) */
	"{\"exit_code\": 1, \"signal\": null, \"cancelled\": false, \"phase\": \"load\", \"oom_phase\": \"load\","
	" \"first_step\": null, \"last_step\": null, \"steps_done\": 0, \"total_steps\": null,"
	" \"signatures\": {\"cuda_oom\": 1, \"zero_bytes_free\": 1, \"cublas_alloc_failed\": 1},"
	" \"oom\": {\"tried_to_allocate_mib\": 20, \"total_capacity_mib\": 24564, \"free_mib\": 0,"
	" \"allocated_by_pytorch_mib\": 100, \"processes\": [{\"pid\": 42, \"used_mib\": 20000}]},"
	" \"error\": \"CUBLAS_STATUS_ALLOC_FAILED\", \"gpu_before\": {\"uuid\": \"GPU-1\", \"memory_total_mib\": 24564,"
	" \"memory_used_mib\": 20000, \"processes\": [{\"pid\": 42, \"used_mib\": 20000}]}, \"duration_ms\": 5000,"
	" \"log_tail\": []}",
	/* 6: killed for host memory */
	"{\"exit_code\": null, \"signal\": 9, \"cancelled\": false, \"phase\": \"load\", \"oom_phase\": null,"
	" \"first_step\": null, \"last_step\": null, \"steps_done\": 0, \"total_steps\": null,"
	" \"signatures\": {\"host_killed\": 1}, \"oom\": null, \"error\": null, \"duration_ms\": 20000,"
	" \"log_tail\": [\"Killed\"]}",
};

/* Sequences of FACTS (indexes above) one simulated job meets, attempt after attempt. */
static const char *const fz_chains[] = {
	"0000000000000", "1111111111111", "2222222222222", "3333333333333",
	"0404140434040", "4040404040404", "5565504000000", "6600000000000",
};

/* A CTX (docs/DESIGN.md) for the first attempt of a job whose target is t, run on a 24 GiB GPU. */
static json_t *fz_ctx_new(const json_t *t, const json_t *rec, long long fleet_mib, long long validate_steps)
{
	json_t *ctx = fz_json("{\"job\": {\"id\": 7, \"recovery\": {\"scale_up\": true, \"max_attempts\": 10,"
			      " \"max_env_retries\": 3, \"max_lost\": 3, \"max_gpu_seconds\": null, \"validate_steps\": null,"
			      " \"early_steps\": 10, \"quarantine_after\": 2, \"env_fault_window_s\": 3600},"
			      " \"recovery_state\": {}}, \"attempts\": [],"
			      " \"gpu\": {\"uuid\": \"GPU-1\", \"state\": \"ok\", \"memory_total_mib\": 24564,"
			      " \"env_faults_in_window\": 0}, \"config_succeeded_before\": false}");
	json_t *job = json_object_get(ctx, "job");

	if (rec)
		json_object_set_new(job, "recovery", json_deep_copy(rec));
	if (validate_steps > 0)
		json_object_set_new(json_object_get(job, "recovery"), "validate_steps", json_integer(validate_steps));
	json_object_set_new(job, "kind", json_string(t ? atconfig_kind(t) : "image"));
	json_object_set_new(job, "target_config", t ? json_deep_copy(t) : json_object());
	json_object_set_new(job, "current_config", t ? json_deep_copy(t) : json_object());
	json_object_set_new(ctx, "attempt", json_pack("{s:i, s:i, s:i, s:s, s:i, s:O, s:s, s:n, s:i}", "id", 101,
						      "number", 1, "worker_id", 3, "gpu_uuid", "GPU-1", "gpu_memory_mib",
						      24564, "config", t ? t : json_object_get(job, "current_config"),
						      "state", "ended", "facts", "duration_ms", 60000));
	json_object_set_new(ctx, "fleet", json_pack("{s:I}", "max_gpu_memory_mib", (json_int_t)fleet_mib));
	return ctx;
}

/* Runs one simulated job on target t: each attempt ends with the next FACTS of chain, the policy
 * decides, and the next attempt runs the decision's next_config, until the job ends. */
static void fz_run_chain(const json_t *t, const json_t *rec, const char *chain, long long fleet_mib,
			 long long validate_steps)
{
	json_t *ctx = fz_ctx_new(t, rec, fleet_mib, validate_steps), *job = json_object_get(ctx, "job");
	json_t *attempt, *d, *done;
	const char *state;
	char *err = NULL;
	int n;

	for (n = 0; n < FZ_MAX_CHAIN && chain[n]; n++) {
		attempt = json_object_get(ctx, "attempt");
		json_object_set_new(attempt, "facts", fz_json(fz_facts_fixed[chain[n] - '0']));
		d = policy_decide(ctx, &err);
		if (!d)
			fprintf(stderr, "policy_decide: %s\n", err ? err : "(no error)");
		FZ_CHECK(d != NULL, "policy_decide answers a well-formed CTX");
		FZ_CHECK(err == NULL, "no error with a decision");
		fz_check_decision(ctx, d, t);
		state = json_string_value(json_object_get(d, "job_state"));
		if (strcmp(state, "queued")) {
			json_decref(d);
			break;
		}
		/* The server applies the decision: the attempt joins the history, the next one starts. */
		done = json_deep_copy(attempt);
		json_object_set_new(done, "outcome", json_string(chain[n] == '4' ? "succeeded" : "failed"));
		json_object_set(done, "class", json_object_get(d, "class"));
		json_object_set(done, "action", json_object_get(d, "action"));
		json_object_set(done, "rung", json_object_get(d, "rung"));
		json_array_append_new(json_object_get(ctx, "attempts"), done);
		json_object_set(job, "current_config", json_object_get(d, "next_config"));
		json_object_set(job, "recovery_state", json_object_get(d, "recovery_state"));
		json_object_set(attempt, "config", json_object_get(d, "next_config"));
		json_object_set_new(attempt, "number", json_integer(n + 2));
		json_object_set_new(attempt, "id", json_integer(102 + n));
		json_decref(d);
	}
	json_decref(ctx);
}

static __attribute__((unused)) int fuzz_config_one(const uint8_t *data, size_t size)
{
	static const char *const plan_classes[] = { "oom_train_early", "oom_sample", "oom_load", "oom_train_intermittent" };
	json_error_t e;
	json_t *t = json_loadb((const char *)data, size, 0, &e), *low, *before, *ch;
	char *field = NULL, *message = NULL;
	const char *kind;
	uint32_t h = 2166136261u;
	size_t i, w;
	int rc;

	if (!t)
		return 0;
	rc = atconfig_validate(t, &field, &message);
	FZ_CHECK(rc == 0 ? !field && !message : field && message, "atconfig_validate sets field and message on -1");
	free(field);
	free(message);
	kind = atconfig_kind(t);
	FZ_CHECK(kind && (!strcmp(kind, "image") || !strcmp(kind, "video")), "atconfig_kind");
	FZ_CHECK(!atconfig_process(t) || json_is_object(atconfig_process(t)), "atconfig_process");
	if (rc != 0) {
		json_decref(t);
		return 0;
	}
	for (i = 0; i < size; i++)
		h = (h ^ data[i]) * 16777619u;
	/* Walks down then up, for each failure class's plan on both ladders (the fuzzer: two of them). */
	for (w = 0; w < 8; w++) {
		if (!fz_thorough && w != h % 8 && w != (h >> 3) % 8)
			continue;
		low = fz_walk_down(t, plan_classes[w / 2], w % 2 == 1);
		before = json_deep_copy(low);
		ch = json_array();
		if (ladder_cap_steps(low, 10, ch))
			fz_check_changes(before, low, ch, "ladder_cap_steps changes describe the rewrite");
		FZ_CHECK(jpath_int(low, FZ_P0 ".train.steps", 0) >= 1 && jpath_int(low, FZ_P0 ".train.steps", 0) <= 10,
			 "ladder_cap_steps caps");
		fz_walk_up(t, low, w % 2 == 1);
		json_decref(before);
		json_decref(ch);
		json_decref(low);
	}
	/* Whole simulated jobs through policy_decide (the fuzzer: two of them). */
	for (w = 0; w < sizeof(fz_chains) / sizeof(fz_chains[0]); w++)
		if (fz_thorough || w == (h >> 6) % 8 || w == (h >> 9) % 8)
			fz_run_chain(t, NULL, fz_chains[w], w % 2 ? 81920 : 24564, w == 5 ? 20 : 0);
	json_decref(t);
	return 0;
}

/* ---- fuzz_facts: hostile FACTS → classify, policy, report ---- */

static const char fz_flux_config[] =
	"{\"job\": \"extension\", \"config\": {\"name\": \"fz_flux\", \"process\": [{\"type\": \"sd_trainer\","
	" \"network\": {\"type\": \"lora\", \"linear\": 16}, \"datasets\": [{\"folder_path\": \"/d\", \"resolution\": [512, 768, 1024]}],"
	" \"train\": {\"batch_size\": 4, \"steps\": 2000, \"gradient_checkpointing\": false, \"optimizer\": \"adamw8bit\","
	" \"lr\": 0.0001}, \"model\": {\"name_or_path\": \"black-forest-labs/FLUX.1-dev\", \"arch\": \"flux\", \"quantize\": true},"
	" \"sample\": {\"sample_every\": 250, \"width\": 1024, \"height\": 1024, \"sample_steps\": 20,"
	" \"samples\": [{\"prompt\": \"a bear\", \"width\": 1024, \"height\": 768}]}}]}}";
static const char fz_wan_config[] =
	"{\"job\": \"extension\", \"config\": {\"name\": \"fz_wan\", \"process\": [{\"type\": \"sd_trainer\","
	" \"datasets\": [{\"folder_path\": \"/c\", \"num_frames\": 81, \"resolution\": [512, 768]}],"
	" \"train\": {\"batch_size\": 2, \"gradient_accumulation\": 2, \"steps\": 2000, \"optimizer\": \"adamw8bit\","
	" \"lr\": 0.0001}, \"model\": {\"arch\": \"wan22_14b\", \"quantize\": true},"
	" \"sample\": {\"sample_every\": 250, \"width\": 832, \"height\": 480, \"num_frames\": 81, \"sample_steps\": 25}}]}}";

static __attribute__((unused)) int fuzz_facts_one(const uint8_t *data, size_t size)
{
	json_error_t e;
	json_t *facts = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	json_t *configs[3], *c, *ctx, *d, *prev, *fixed;
	struct classify_in in = { 0 };
	char *err = NULL;
	size_t i;

	if (!facts)
		return 0;
	configs[0] = NULL;
	configs[1] = fz_json(fz_flux_config);
	configs[2] = fz_json(fz_wan_config);
	for (i = 0; i < 3; i++) {
		c = policy_classify(facts, configs[i]);
		FZ_CHECK(json_is_object(c), "policy_classify returns an object");
		FZ_CHECK(FZ_IN(json_string_value(json_object_get(c, "class")), fz_classes), "policy_classify names a class");
		FZ_CHECK(json_is_string(json_object_get(c, "rule")), "policy_classify names a rule");
		json_decref(c);
		in.facts = facts;
		in.config = configs[i] ? configs[i] : facts;
		in.early_steps = i == 2 ? -1 : 10;
		in.succeeded_before = i == 1;
		c = classify_run(&in);
		FZ_CHECK(json_is_object(c) && json_is_string(json_object_get(c, "class")), "classify_run names a class");
		json_decref(c);
	}
	(void)classify_steps_in_attempt(facts);
	(void)classify_gpu_signature(facts);

	/* The hostile facts as the attempt that just ended and as an earlier attempt's. */
	for (i = 1; i < 3; i++) {
		ctx = fz_ctx_new(configs[i], NULL, 81920, 0);
		json_object_set(json_object_get(ctx, "attempt"), "facts", facts);
		prev = json_deep_copy(json_object_get(ctx, "attempt"));
		json_object_set_new(prev, "number", json_integer(0));
		json_object_set_new(prev, "class", json_string(i == 1 ? "env_fault" : "oom_train_early"));
		json_object_set_new(prev, "action", json_string(i == 1 ? "retry_clean" : "retry"));
		json_object_set_new(prev, "outcome", json_string("failed"));
		json_array_append_new(json_object_get(ctx, "attempts"), prev);
		d = policy_decide(ctx, &err);
		if (json_is_object(facts)) {
			FZ_CHECK(d != NULL, "policy_decide answers object facts");
			fz_check_decision(ctx, d, configs[i]);
		} else {
			FZ_CHECK(d == NULL && err != NULL, "policy_decide refuses non-object facts with an error");
			fixed = fz_json("{\"class\": \"not_oom\", \"rule\": \"r\", \"evidence\": [], \"action\": \"fail\","
					" \"rung\": null, \"changes\": [], \"next_config\": null, \"job_state\": \"failed\","
					" \"reason\": \"x\", \"constraints\": {}, \"recovery_state\": {},"
					" \"escalation\": {\"trigger\": \"budget_exhausted\", \"summary\": \"s\", \"recommendation\": \"r\"}}");
			fz_check_decision(ctx, fixed, NULL);
			json_decref(fixed);
		}
		free(err);
		err = NULL;
		json_decref(d);
		json_decref(ctx);
	}
	/* Facts shaped like a decision must not confuse the report either. */
	ctx = fz_ctx_new(configs[1], NULL, 24564, 0);
	c = report_build(ctx, facts);
	FZ_CHECK(json_is_object(c), "report_build with a hostile decision");
	json_decref(c);
	json_decref(ctx);
	json_decref(configs[1]);
	json_decref(configs[2]);
	json_decref(facts);
	return 0;
}

/* ---- fuzz_submit: a POST /v1/jobs body → api_jobs_check_submit (and http_parse_id on the bytes) ---- */

static const char *const fz_recovery_keys[] = {
	"scale_up", "max_attempts", "max_env_retries", "max_lost", "max_gpu_seconds", "validate_steps", "early_steps",
	"quarantine_after", "env_fault_window_s",
};

static __attribute__((unused)) int fuzz_submit_one(const uint8_t *data, size_t size)
{
	json_error_t e;
	json_t *body, *rec = NULL, *cfg;
	const char *name = NULL;
	char *field = NULL, *message = NULL, *text;
	int priority = -1, rc;
	long long id;
	uint32_t h = 2166136261u;
	size_t i;

	/* Path segments reach http_parse_id as C strings. */
	text = (char *)malloc(size + 1);
	FZ_CHECK(text != NULL, "malloc");
	memcpy(text, data, size);
	text[size] = '\0';
	id = http_parse_id(text);
	FZ_CHECK(id == -1 || id > 0, "http_parse_id: -1 or a positive id");
	if (id > 0)
		FZ_CHECK(text[0] >= '0' && text[0] <= '9', "http_parse_id accepts digits only");
	free(text);

	body = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	if (!json_is_object(body)) {
		json_decref(body);
		return 0;
	}
	rc = api_jobs_check_submit(body, &rec, &name, &priority, &field, &message);
	if (rc != 0) {
		FZ_CHECK(rc == -1 && field && message && !rec, "a refused submit names the field and says why");
		free(field);
		free(message);
		json_decref(body);
		return 0;
	}
	FZ_CHECK(!field && !message, "an accepted submit has no error");
	FZ_CHECK(json_is_object(rec), "an accepted submit has recovery");
	for (i = 0; i < sizeof(fz_recovery_keys) / sizeof(fz_recovery_keys[0]); i++)
		FZ_CHECK(json_object_get(rec, fz_recovery_keys[i]) != NULL, "recovery defaults filled");
	FZ_CHECK(!name || name == json_string_value(json_object_get(body, "name")), "name borrowed from the body");
	cfg = json_object_get(body, "config");
	FZ_CHECK(atconfig_validate(cfg, &field, &message) == 0, "an accepted submit has a valid config");
	/* The accepted recovery knobs drive one simulated job (two, or all, of the chains). */
	for (i = 0; i < size; i++)
		h = (h ^ data[i]) * 16777619u;
	for (i = 0; i < sizeof(fz_chains) / sizeof(fz_chains[0]); i++)
		if (fz_thorough || i == h % 8)
			fz_run_chain(cfg, rec, fz_chains[i], i % 2 ? 81920 : 24564, 0);
	json_decref(rec);
	json_decref(body);
	return 0;
}

#endif
