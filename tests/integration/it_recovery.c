/* Integration: OOM recovery end to end with the simulated trainer's memory model (sim/README.md;
 * sizes checked with `rung-sim-trainer --estimate`): an OOM in each phase recovers through the
 * expected rung, a video job walks frames first, an environment fault on a dirty GPU is re-run on a
 * clean one and the dirty GPU quarantined, and a host OOM never walks the VRAM ladder. The cases
 * run on one database, so each sees what the cases before it taught the memory model (a model that
 * skipped a step that fits would fail scale_up's batch 2); only the README walk-throughs start from
 * a reset profile, because the README tells the story of a card with no history. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "memmodel.h"
#include "util.h"
#include "yamljson.h"

/* Flux, quantized, batch 1, checkpointing on, buckets 512/768/1024, 1024² samples (--estimate):
 * load 18547, train 21607, sample 22007 MiB: fits a 24 GiB GPU. */
#define GPU_24G 24576
#define GPU_18G 18000 /* load 18547 does not fit; with low_vram everything does */
#define GPU_28G 28672 /* Wan 14B at 512, 81 frames trains at 30942; at 41 frames 26942 */

static json_t *train_of(const json_t *config)
{
	return json_object_get(json_array_get(json_object_get(json_object_get(config, "config"), "process"), 0),
		"train");
}

/* Runs one job (recovery {"scale_up": scale_up}) on a fresh worker with one GPU of `mib` MiB and
 * waits for `final`; returns the attempts (new reference) or NULL. The worker is stopped
 * afterwards, and a job that did not reach `final` is cancelled so later cases start clean. */
static json_t *run_case(struct harness *h, const char *wname, int mib, const char *const *env, const json_t *cfg,
	bool scale_up, const char *final, json_t **job_out)
{
	char *gpus = h_sim_gpus(wname, 1, mib);
	struct h_worker_opts o = { .gpus_json = gpus, .env = env };
	struct h_worker *w = h_worker_start(h, wname, &o);
	json_t *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", scale_up);
	json_t *job = h_submit(h, cfg, extra);
	json_decref(extra);
	char *id = h_id(job, "id");
	json_t *as = NULL, *done = NULL;
	if (!w || !id)
		goto out;
	done = h_wait_job(h, id, final, 90000);
	if (done)
		as = h_wait_attempts(h, id, (int)h_int(done, "attempts"), NULL, 5000);
	if (!done || !as) {
		long st = 0;
		json_t *all = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
		h_diag_json("attempts", all);
		json_decref(all);
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id));
	}
out:
	if (w)
		h_worker_stop(h, w, SIGTERM);
	if (job_out)
		*job_out = done;
	else
		json_decref(done);
	free(id);
	free(gpus);
	json_decref(job);
	return as;
}

static void test_train_early_batch(struct harness *h)
{
	json_t *cfg = h_config("oom_batch", 20);
	h_config_set(cfg, "config.process[0].train.batch_size", json_integer(4));
	json_t *job = NULL;
	json_t *as = run_case(h, "rb", GPU_24G, NULL, cfg, false, "succeeded", &job);
	json_t *a0 = json_array_get(as, 0), *a1 = json_array_get(as, 1);
	h_ok(h, job && json_array_size(as) == 2, "batch 4 OOMs early in training, then succeeds on attempt 2");
	h_ok(h, !strcmp(h_str(a0, "class"), "oom_train_early"), "attempt 1 classified oom_train_early (%s)",
		h_str(a0, "class"));
	h_ok(h, h_changed(a0, "train.batch_size"), "the rung taken lowers the batch size");
	json_t *t1 = train_of(json_object_get(a1, "config"));
	h_ok(h, h_int(t1, "batch_size") == 1 && h_int(t1, "gradient_accumulation") == 4,
		"attempt 2 runs batch 1 with gradient_accumulation 4 (effective batch kept)");
	h_ok(h, job && json_equal(json_object_get(job, "target_config"), cfg), "target_config stays what was asked");
	if (h->failed)
		h_diag_json("attempts", as);
	json_decref(as);
	json_decref(job);
	json_decref(cfg);
}

static void test_checkpointing_first(struct harness *h)
{
	json_t *cfg = h_config("oom_ckpt", 20);
	h_config_set(cfg, "config.process[0].train.gradient_checkpointing", json_false());
	json_t *job = NULL;
	json_t *as = run_case(h, "rc", GPU_24G, NULL, cfg, false, "succeeded", &job);
	json_t *a0 = json_array_get(as, 0), *a1 = json_array_get(as, 1);
	h_ok(h, job && json_array_size(as) == 2, "checkpointing off OOMs, then succeeds on attempt 2");
	h_ok(h, h_changed(a0, "train.gradient_checkpointing") && !h_changed(a0, "train.batch_size"),
		"the first rung turns gradient checkpointing on, and only that");
	h_ok(h, json_is_true(json_object_get(train_of(json_object_get(a1, "config")), "gradient_checkpointing")),
		"attempt 2 runs with checkpointing on");
	json_decref(as);
	json_decref(job);
	json_decref(cfg);
}

static void test_sample_oom(struct harness *h)
{
	json_t *cfg = h_config("oom_sample", 20);
	h_config_set(cfg, "config.process[0].sample.width", json_integer(2048));
	h_config_set(cfg, "config.process[0].sample.height", json_integer(2048));
	/* No baseline sample: the OOM comes in the sampling after training (phase sample). */
	h_config_set(cfg, "config.process[0].train.skip_first_sample", json_true());
	json_t *job = NULL;
	json_t *as = run_case(h, "rs", GPU_24G, NULL, cfg, false, "succeeded", &job);
	json_t *a0 = json_array_get(as, 0);
	size_t n = json_array_size(as);
	h_ok(h, job && n >= 2, "a 2048² preview OOMs while sampling, then the job succeeds (%zu attempts)", n);
	h_ok(h, !strcmp(h_str(a0, "class"), "oom_sample"), "attempt 1 classified oom_sample (%s)", h_str(a0, "class"));
	h_ok(h, !h_changed(a0, "train.batch_size") && !h_changed(a0, "train.gradient_checkpointing") &&
		(h_changed(a0, "sample.width") || h_changed(a0, "sample.height") || h_changed(a0, "sample.sample_steps") ||
		h_changed(a0, "train.disable_sampling") || h_changed(a0, "sample.sample_every")),
		"an OOM while sampling takes the sampling rung, not a smaller batch");
	if (h->failed)
		h_diag_json("attempts", as);
	json_decref(as);
	json_decref(job);
	json_decref(cfg);
}

static void test_load_oom(struct harness *h)
{
	json_t *cfg = h_config("oom_load", 20);
	json_t *job = NULL;
	json_t *as = run_case(h, "rl", GPU_18G, NULL, cfg, false, "succeeded", &job);
	json_t *a0 = json_array_get(as, 0);
	h_ok(h, job && json_array_size(as) >= 2, "Flux on an 18000 MiB GPU OOMs while loading, then succeeds");
	h_ok(h, !strcmp(h_str(a0, "class"), "oom_load"), "attempt 1 classified oom_load (%s)", h_str(a0, "class"));
	h_ok(h, !h_changed(a0, "train.batch_size"), "an OOM while loading is not answered with a smaller batch");
	h_ok(h, h_changed(a0, "model.low_vram") || h_changed(a0, "model.quantize") || h_changed(a0, "model.layer_offloading"),
		"it takes the model's low-memory path");
	if (h->failed)
		h_diag_json("attempts", as);
	json_decref(as);
	json_decref(job);
	json_decref(cfg);
}

static void test_video_frames_first(struct harness *h)
{
	json_t *cfg = h_config("oom_video", 10);
	h_config_set(cfg, "config.process[0].model.arch", json_string("wan22_14b"));
	h_config_set(cfg, "config.process[0].model.name_or_path", json_string("ai-toolkit/Wan2.2-T2V-A14B-Diffusers"));
	h_config_set(cfg, "config.process[0].datasets[0].num_frames", json_integer(81));
	h_config_set(cfg, "config.process[0].datasets[0].resolution", json_pack("[i]", 512));
	h_config_set(cfg, "config.process[0].train.disable_sampling", json_true());
	json_t *job = NULL;
	json_t *as = run_case(h, "rv", GPU_28G, NULL, cfg, false, "succeeded", &job);
	json_t *a0 = json_array_get(as, 0);
	h_ok(h, job && json_array_size(as) >= 2, "a Wan video job at 81 frames OOMs, then succeeds");
	h_ok(h, job && !strcmp(h_str(job, "kind"), "video"), "kind video");
	h_ok(h, h_changed(a0, "num_frames") && !h_changed(a0, "train.batch_size"), "the video ladder lowers frames first");
	if (h->failed)
		h_diag_json("attempts", as);
	json_decref(as);
	json_decref(job);
	json_decref(cfg);
}

/* A host OOM (the kernel's OOM killer: SIGKILL, "Killed") is not a GPU-memory failure: it never
 * walks the VRAM ladder; the job is re-run unchanged on another worker. */
static void test_host_oom(struct harness *h)
{
	const char *env[] = { "RUNG_SIM_FAIL=host_oom", NULL };
	struct h_worker_opts o = { .env = env };
	struct h_worker *w = h_worker_start(h, "rh", &o);
	json_t *cfg = h_config("host_oom", 20);
	json_t *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0);
	json_t *job = h_submit(h, cfg, extra);
	char *id = h_id(job, "id");
	json_t *as = id ? h_wait_attempts(h, id, 1, "ended", 60000) : NULL;
	json_t *a0 = json_array_get(as, 0);
	h_ok(h, !strcmp(h_str(a0, "class"), "host_oom"), "a SIGKILLed trainer that printed Killed is host_oom (%s)",
		h_str(a0, "class"));
	h_ok(h, as && json_is_null(json_object_get(a0, "rung")) && !json_array_size(json_object_get(a0, "changes")),
		"no rung taken, no config change");
	if (w)
		h_worker_stop(h, w, SIGTERM);
	struct h_worker *w2 = h_worker_start(h, "rh2", NULL);
	json_t *done = id ? h_wait_job(h, id, "succeeded", 60000) : NULL;
	h_ok(h, done != NULL, "the job is re-run on another worker and succeeds");
	h_ok(h, done && json_equal(json_object_get(done, "current_config"), cfg), "the VRAM ladder was not walked");
	if (!done && id) {
		long st = 0;
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id));
	}
	if (w2)
		h_worker_stop(h, w2, SIGTERM);
	json_decref(done);
	json_decref(as);
	free(id);
	json_decref(job);
	json_decref(extra);
	json_decref(cfg);
}

/* With scale_up on, after the first success the policy adds back one heavier setting at a time
 * towards the target; an OOM on the way records a ceiling and the job ends on the last config
 * that worked. Batch 4 does not fit 24 GiB (train 28807 MiB); batch 1 does. */
static void test_scale_up(struct harness *h)
{
	json_t *cfg = h_config("scale_up", 20);
	h_config_set(cfg, "config.process[0].train.batch_size", json_integer(4));
	json_t *job = NULL;
	json_t *as = run_case(h, "ru", GPU_24G, NULL, cfg, true, "succeeded", &job);
	size_t n = json_array_size(as), i, scale_ups = 0;
	json_t *a, *last_ok = NULL;
	json_array_foreach(as, i, a) {
		if (!strcmp(h_str(a, "action"), "scale_up"))
			scale_ups++;
		if (!strcmp(h_str(a, "outcome"), "succeeded"))
			last_ok = a;
	}
	/* issue 12: with what earlier cases taught, the first attempt may start below the target instead of
	 * running out of memory (recovery_state.started_lower), one attempt fewer */
	bool lower = json_is_object(json_object_get(json_object_get(job, "recovery_state"), "started_lower"));
	h_ok(h, job && (n >= 3 || (lower && n >= 2 && !strcmp(h_str(json_array_get(as, 0), "outcome"), "succeeded"))),
		"batch 4 recovers (%s), then scales back up (%zu attempts)", lower ? "started lower" : "after an OOM", n);
	h_ok(h, scale_ups >= 1, "at least one scale_up decision (%zu)", scale_ups);
	json_t *rs = json_object_get(job, "recovery_state");
	h_ok(h, json_object_size(json_object_get(rs, "ceilings")) >= 1, "an OOM on the way up records a ceiling");
	json_t *result = json_object_get(job, "result");
	h_ok(h, last_ok && json_equal(json_object_get(result, "config"), json_object_get(last_ok, "config")),
		"the job's result config is the last config that succeeded");
	long long achieved = h_int(json_object_get(result, "achieved"), "batch_size");
	h_ok(h, achieved >= 1 && achieved < 4, "result.achieved stays below the recorded ceiling (batch %lld < 4)",
		achieved);
	/* issue 12: batch 2 trains at 24007 MiB of 24576, within any margin but fits: whatever earlier
	 * cases taught the memory model, it is run, not given up on a prediction */
	h_ok(h, achieved == 2, "batch 2 fits and is reached (achieved batch %lld)", achieved);
	h_ok(h, h_int(json_object_get(rs, "ceilings"), "batch_size") == 4,
		"the batch's ceiling is 4, the run that failed (%lld)", h_int(json_object_get(rs, "ceilings"), "batch_size"));
	if (h->failed) {
		h_diag_json("job recovery_state", rs);
		h_diag_json("job result", json_object_get(job, "result"));
		h_diag_json("current train", train_of(json_object_get(job, "current_config")));
		h_diag_json("last ok train", train_of(json_object_get(last_ok, "config")));
	}
	json_decref(as);
	json_decref(job);
	json_decref(cfg);
}

struct gpu_arg {
	struct harness *h;
	const char *uuid;
	const char *state;
};

static bool gpu_in_state(void *arg)
{
	struct gpu_arg *g = arg;
	const char *p[] = { g->uuid, g->state };
	return h_sql_int(g->h, "SELECT count(*) FROM gpus WHERE uuid = $1 AND state = $2", 2, p) == 1;
}

struct fault_arg {
	struct harness *h;
	const char *job_id;
};

/* The job has an ended attempt, or the dirty GPU is quarantined (so it will never get one there). */
static bool fault_settled(void *arg)
{
	struct fault_arg *f = arg;
	const char *p[] = { f->job_id };
	return h_sql_int(f->h, "SELECT count(*) FROM attempts WHERE job_id = $1 AND state = 'ended'", 1, p) > 0 ||
		h_sql_int(f->h, "SELECT count(*) FROM gpus WHERE uuid = 'GPU-dirty-0' AND state = 'quarantined'", 0,
		NULL) == 1;
}

/* A conservative config fails before training with a CUBLAS allocation error on a GPU that other
 * processes hold memory on: not the config's fault. Re-run unchanged on a clean GPU; after two such
 * faults (quarantine_after 2) the dirty GPU is quarantined and support gets an escalation. */
static void test_env_fault(struct harness *h)
{
	const char *dirty_gpus = "{\"gpus\": [{\"uuid\": \"GPU-dirty-0\", \"name\": \"NVIDIA GeForce RTX 4090\", "
		"\"memory_total_mib\": 24576, \"processes\": [{\"pid\": 999999, \"used_mib\": 3000, \"name\": \"python\"}]}]}";
	const char *env[] = { "RUNG_SIM_CUBLAS=alloc", NULL };
	struct h_worker_opts o = { .gpus_json = dirty_gpus, .env = env };
	json_t *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0);
	char *ids[3] = { NULL, NULL, NULL };
	json_t *cfgs[3] = { NULL, NULL, NULL };
	int faults = 0;
	struct h_worker *dirty = h_worker_start(h, "dirty", &o);
	h_ok(h, dirty != NULL, "a worker on the dirty GPU starts");
	for (int k = 0; k < 3; k++) {
		char name[32];
		snprintf(name, sizeof(name), "env_fault_%d", k);
		cfgs[k] = h_config(name, 10);
		h_config_set(cfgs[k], "config.process[0].datasets[0].resolution", json_pack("[i]", 512));
		json_t *job = h_submit(h, cfgs[k], extra);
		ids[k] = h_id(job, "id");
		json_decref(job);
		struct fault_arg fa = { h, ids[k] };
		if (!ids[k] || !wait_until(fault_settled, &fa, 30000))
			h_diag("job %d: no attempt ended and the dirty GPU is not quarantined", k + 1);
		json_t *as = ids[k] ? h_wait_attempts(h, ids[k], 1, "ended", 100) : NULL;
		json_t *a0 = json_array_get(as, 0);
		if (as) {
			faults++;
			h_ok(h, !strcmp(h_str(a0, "class"), "env_fault"), "job %d: CUBLAS on a dirty GPU is env_fault (%s)",
				k + 1, h_str(a0, "class"));
			h_ok(h, !strcmp(h_str(a0, "action"), "retry_clean") && !json_array_size(json_object_get(a0, "changes")),
				"job %d: re-run on a clean GPU with the config unchanged", k + 1);
		}
		json_decref(as);
	}
	h_ok(h, faults == 2, "exactly two attempts ran on the dirty GPU before it was quarantined (%d)", faults);
	struct gpu_arg g = { h, "GPU-dirty-0", "quarantined" };
	h_ok(h, wait_until(gpu_in_state, &g, 5000), "two env faults quarantine the dirty GPU");
	long st = 0;
	json_t *esc = h_get(h, "/v1/escalations?state=open", &st);
	h_ok(h, st == 200 && json_array_size(json_object_get(esc, "escalations")) >= 1,
		"an escalation is open for support");
	/* What support reads: the report names the verdict, the attempts, the GPU evidence and the logs. */
	char *esc_id = h_id(json_array_get(json_object_get(esc, "escalations"), 0), "id");
	json_t *full = esc_id ? h_getf(h, &st, "/v1/escalations/%s", esc_id) : NULL;
	const char *md = h_str(full, "report_markdown");
	h_ok(h, st == 200 && md && md[0], "the escalation carries a Markdown report");
	h_ok(h, md && strstr(md, "gpu_quarantined") && strstr(md, "GPU-dirty-0"),
		"the report names the trigger and the quarantined GPU");
	h_ok(h, md && strstr(md, "env_fault") && strstr(md, "retry_clean"),
		"the report's attempt table shows each attempt's class and action");
	h_ok(h, md && strstr(md, "CUBLAS_STATUS_ALLOC_FAILED") && strstr(md, "```"),
		"the report quotes the failed attempt's last log lines");
	h_ok(h, md && strstr(md, "999999"), "the report keeps the GPU state snapshot (the foreign process)");
	h_ok(h, json_is_object(json_object_get(full, "report")) && h_str(full, "recommendation")
		&& h_str(full, "recommendation")[0], "the report comes as JSON too, with a recommended next step");
	json_decref(full);
	free(esc_id);
	json_decref(esc);
	if (dirty)
		h_worker_stop(h, dirty, SIGTERM);
	struct h_worker *clean = h_worker_start(h, "clean", NULL);
	for (int k = 0; k < 3; k++) {
		json_t *done = ids[k] ? h_wait_job(h, ids[k], "succeeded", 60000) : NULL;
		json_t *as = ids[k] ? h_wait_attempts(h, ids[k], 1, "ended", 5000) : NULL;
		json_t *last = json_array_get(as, json_array_size(as) - 1);
		h_ok(h, done && !strcmp(h_str(last, "gpu_uuid"), "GPU-sim-clean-0"), "job %d succeeds on the clean GPU",
			k + 1);
		h_ok(h, done && json_equal(json_object_get(done, "current_config"), cfgs[k]), "job %d config unchanged",
			k + 1);
		json_decref(as);
		json_decref(done);
		free(ids[k]);
		json_decref(cfgs[k]);
	}
	if (clean)
		h_worker_stop(h, clean, SIGTERM);
	json_decref(extra);
}

/* The README's two walkthroughs, as `watch` prints them: examples/flux_lora.json on the simulated
 * 24 GiB card, and AI Toolkit's own Flux example on a 16 GiB one. Scale-up never runs a config a
 * no larger run already failed with (issue 16.2): batch 4 is a ceiling from attempt 1's failure. */
static void test_readme_walkthroughs(struct harness *h)
{
	static const struct {
		const char *file, *worker, *story, *ceiling;
		int mib;
		long long ceiling_attempt;
	} walks[] = {
		{ "examples/flux_lora.json", "rw24", "oom_train_early/retry/batch_size success/scale_up/batch_size "
		  "success/succeed/-", "batch_size", 24564, 1 },
		{ "tests/data/aitk_flux_lora_24gb.yaml", "rw16", "oom_load/retry/low_vram oom_sample/retry/cheaper_sampling "
		  "success/scale_up/sample_size oom_sample/scale_up/sample_rate success/succeed/-", "sample_size", 16376, 4 },
	};
	static const char *const fast[] = { "RUNG_SIM_STEP_MS=0", "RUNG_SIM_SAMPLE_MS=0", NULL }; /* 2000 steps */
	for (size_t k = 0; k < ARRAY_LEN(walks); k++) {
		char *path = xasprintf("%s/%s", h->root, walks[k].file), *err = NULL;
		json_t *cfg = yamljson_load_file(path, &err), *job = NULL;
		char arch[64];
		/* the README's story is that of a fleet with no memory history: forget what earlier cases taught */
		if (cfg) {
			memmodel_arch(cfg, arch, sizeof arch);
			h_forget_arch(h, arch);
		}
		json_t *as = cfg ? run_case(h, walks[k].worker, walks[k].mib, fast, cfg, true, "succeeded", &job) : NULL;
		char *got = h_story(as);
		const json_t *st = NULL, *x;
		size_t i;
		json_array_foreach(json_object_get(json_object_get(job, "result"), "settings"), i, x)
			if (!strcmp(h_str(x, "setting"), walks[k].ceiling))
				st = x;
		h_ok(h, job && !strcmp(got, walks[k].story), "README walkthrough %zu: %s (%s)", k + 1, walks[k].story, got);
		h_ok(h, st && !strcmp(h_str(st, "status"), "ceiling") && h_int(st, "attempt") == walks[k].ceiling_attempt,
			"README walkthrough %zu: %s given up at the ceiling attempt %lld ran out of memory with", k + 1,
			walks[k].ceiling, walks[k].ceiling_attempt);
		if (h->failed) {
			h_diag_json("result", json_object_get(job, "result"));
			if (err)
				h_diag("%s: %s", path, err);
		}
		free(got);
		free(err);
		free(path);
		json_decref(as);
		json_decref(job);
		json_decref(cfg);
	}
}

/* RUNG_IT_CASES=a,b runs only the cases whose name contains one of the words (for debugging). */
static bool want(const char *name)
{
	const char *only = getenv("RUNG_IT_CASES");
	if (!only || !*only)
		return true;
	char *list = xstrdup(only), *save = NULL;
	bool hit = false;
	for (char *t = strtok_r(list, ",", &save); t && !hit; t = strtok_r(NULL, ",", &save))
		hit = strstr(name, t) != NULL;
	free(list);
	return hit;
}

int main(void)
{
	static const struct {
		const char *name;
		void (*fn)(struct harness *h);
	} cases[] = {
		{ "train_early_batch", test_train_early_batch },
		{ "checkpointing_first", test_checkpointing_first },
		{ "sample_oom", test_sample_oom },
		{ "load_oom", test_load_oom },
		{ "video_frames_first", test_video_frames_first },
		{ "host_oom", test_host_oom },
		{ "scale_up", test_scale_up },
		{ "env_fault", test_env_fault },
		{ "readme_walkthroughs", test_readme_walkthroughs },
	};
	struct harness *h = h_new("it_recovery");
	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	for (size_t i = 0; i < ARRAY_LEN(cases); i++)
		if (want(cases[i].name))
			cases[i].fn(h);
	return h_free(h);
}
