/* Unit tests of the failure classes (recovery/classify.c through policy_classify and classify_run):
 * each rule with a positive case and a near miss, named after the guide section it implements. */
#include "tap.h"
#include "policy_fixtures.h"
#include "../../recovery/classify.h"

static const char *cls_of(const json_t *facts, const json_t *config, int succeeded_before, char *buf, size_t n)
{
	struct classify_in in = { facts, config, 10, succeeded_before, 0 };
	json_t *r = classify_run(&in);

	snprintf(buf, n, "%s/%s", json_string_value(json_object_get(r, "class")), json_string_value(json_object_get(r, "rule")));
	json_decref(r);
	return buf;
}

#define CLS(facts, cfg, sb) cls_of((facts), (cfg), (sb), buf, sizeof(buf))

static json_t *conservative_cfg(void)
{
	json_t *c = fx_load("flux_image.json");

	jpath_set(c, P0 ".train.batch_size", json_integer(1));
	jpath_set(c, P0 ".train.gradient_checkpointing", json_true());
	jpath_set(c, P0 ".datasets[0].resolution", fx_json("[512, 768]"));
	return c;
}

int main(void)
{
	char buf[128];
	json_t *cfg = fx_load("flux_image.json"), *cons = conservative_cfg(), *f, *r;

	/* success: exit 0, not cancelled */
	f = fx_success(2000);
	TAP_STR_EQ(CLS(f, cfg, 0), "success/exit_zero", "guide 7: exit 0 is success");
	jpath_set(f, "signatures", fx_json("{\"job_stopped\": 1}"));
	TAP_STR_EQ(CLS(f, cfg, 0), "not_oom/no_gpu_memory_signature", "near miss: exit 0 after `Job stopped` (Ctrl-C) is not a success");
	jpath_set(f, "cancelled", json_true());
	TAP_STR_EQ(CLS(f, cfg, 0), "cancelled/cancel_requested", "cancelled on request wins over everything");
	json_decref(f);

	/* a stalled trainer (the worker's --stall-timeout-s): killed by SIGKILL, yet neither the host's OOM
	 * killer nor the config: a hang, so env_fault */
	f = fx_json("{\"exit_code\": null, \"signal\": 9, \"phase\": \"train\", \"signatures\": {}, \"stalled_s\": 1801, "
		    "\"first_step\": 1, \"last_step\": 40}");
	TAP_STR_EQ(CLS(f, cfg, 0), "env_fault/trainer_stalled", "a hang: killed after 1801 s of silence is env_fault, not host_oom");
	r = policy_classify(f, cfg);
	TAP_OK(strstr(jpath_str(r, "evidence[0]", ""), "nothing for 1801 s") != NULL, "the evidence says how long it was silent");
	json_decref(r);
	jpath_set(f, "stalled_s", json_integer(0));
	TAP_STR_EQ(CLS(f, cfg, 0), "host_oom/host_oom_killer", "near miss: SIGKILL without stalled_s is the host's OOM killer");
	json_decref(f);
	f = fx_json("{\"exit_code\": 0, \"signal\": null, \"phase\": \"done\", \"signatures\": {}, \"stalled_s\": 1801, "
		    "\"first_step\": 1, \"last_step\": 2000}");
	TAP_STR_EQ(CLS(f, cfg, 0), "success/exit_zero", "near miss: stalled_s but it exited 0 by itself before the kill: success");
	json_decref(f);

	/* not_oom: guide 1 (only GPU-memory signatures walk the ladder) */
	f = fx_json("{\"exit_code\": 1, \"phase\": \"train\", \"oom_phase\": null, \"signatures\": {\"nan_loss\": 1, "
		    "\"error_running_job\": 1}, \"oom\": null, \"error\": \"loss is nan\", \"first_step\": 1, \"last_step\": 40}");
	TAP_STR_EQ(CLS(f, cfg, 0), "not_oom/no_gpu_memory_signature", "guide 1: NaN loss is not_oom");
	jpath_set(f, "signatures.cuda_oom", json_integer(1));
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_intermittent/oom_after_stable_training",
		   "near miss: with a CUDA OOM signature after 40 steps it is an OOM class");
	json_decref(f);
	f = fx_json("{\"exit_code\": 1, \"phase\": \"load\", \"signatures\": {\"file_not_found\": 1}, \"error\": \"No such file\"}");
	TAP_STR_EQ(CLS(f, cfg, 0), "not_oom/no_gpu_memory_signature", "guide 1: missing file is not_oom");
	json_decref(f);

	/* host_oom: guide 1 (Killed, SIGKILL, exit 137, MemoryError) */
	f = fx_json("{\"exit_code\": 137, \"signal\": null, \"phase\": \"load\", \"signatures\": {\"host_killed\": 1}}");
	TAP_STR_EQ(CLS(f, cfg, 0), "host_oom/host_oom_killer", "guide 1: exit 137 + Killed is host_oom");
	json_decref(f);
	f = fx_json("{\"exit_code\": null, \"signal\": 9, \"phase\": \"load\", \"signatures\": {}}");
	TAP_STR_EQ(CLS(f, cfg, 0), "host_oom/host_oom_killer", "guide 1: SIGKILL is host_oom");
	json_decref(f);
	f = fx_json("{\"exit_code\": 1, \"phase\": \"load\", \"signatures\": {\"memory_error\": 1}}");
	TAP_STR_EQ(CLS(f, cfg, 0), "host_oom/host_oom_killer", "guide 1: Python MemoryError is host_oom");
	jpath_set(f, "signatures.cuda_oom", json_integer(1));
	jpath_set(f, "oom_phase", json_string("load"));
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_load/oom_before_training", "near miss: a CUDA OOM signature makes it a GPU class");
	json_decref(f);

	/* env_fault: guide 5, three ways */
	f = fx_oom("train", 1, 3);
	jpath_set(f, "gpu_before.processes", fx_json("[{\"pid\": 999, \"used_mib\": 6000}]"));
	TAP_STR_EQ(CLS(f, cfg, 0), "env_fault/gpu_not_clean_at_start", "guide 5: a foreign process on the GPU at start");
	json_decref(f);
	f = fx_oom("train", 1, 3);
	jpath_set(f, "gpu_before.memory_used_mib", json_integer(2048));
	TAP_STR_EQ(CLS(f, cfg, 0), "env_fault/gpu_not_clean_at_start", "guide 5: 2 GiB used before the attempt");
	jpath_set(f, "gpu_before.memory_used_mib", json_integer(900));
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_early/oom_in_first_steps", "near miss: 900 MiB is under the 1 GiB threshold");
	json_decref(f);
	f = fx_oom("train", 1, 3);
	jpath_set(f, "oom.processes", fx_json("[{\"pid\": 1234, \"used_mib\": 5816}]"));
	TAP_STR_EQ(CLS(f, cfg, 0), "env_fault/foreign_processes_in_oom", "guide 5: the OOM message names another process");
	jpath_set(f, "oom.processes", fx_json("[{\"pid\": 1234, \"used_mib\": 23000}]"));
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_early/oom_in_first_steps",
		   "near miss: a process holding what PyTorch allocated is the trainer itself (container pid)");
	json_decref(f);
	f = fx_load("facts_zero_free_load.json");
	TAP_STR_EQ(CLS(f, cons, 0), "env_fault/zero_free_conservative_config",
		   "guide 5: 0 bytes free + CUBLAS_STATUS_ALLOC_FAILED with a conservative config at load");
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_load/oom_before_training", "near miss: same log with batch 4 is a config OOM (2A)");
	TAP_STR_EQ(CLS(f, NULL, 0), "oom_load/oom_before_training", "near miss: without the config the conservative test cannot hold");
	jpath_set(f, "first_step", json_integer(1));
	jpath_set(f, "last_step", json_integer(30));
	jpath_set(f, "oom_phase", json_string("train"));
	TAP_STR_EQ(CLS(f, cons, 0), "oom_train_intermittent/oom_after_stable_training",
		   "near miss: after 30 steps training had really started");
	json_decref(f);

	/* Real logs (tests/data/logs): only one process in an OOM message can be the trainer; a busy GPU
	 * is the worker's problem; an OOM of unknown phase walks the whole ladder, never 2A's plan. */
	f = fx_oom("train", 1, 3);
	jpath_set(f, "oom.processes", fx_json("[{\"pid\": 1, \"used_mib\": 74772}, {\"pid\": 2, \"used_mib\": 22487}]"));
	TAP_STR_EQ(CLS(f, cfg, 0), "env_fault/foreign_processes_in_oom",
		   "guide 5: a 73 GiB process beside the trainer's own 22 GiB is foreign, though above PyTorch's 22000 MiB");
	jpath_set(f, "oom.processes", fx_json("[{\"pid\": 2, \"used_mib\": 22487}]"));
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_early/oom_in_first_steps", "near miss: the trainer alone is not foreign");
	json_decref(f);
	f = fx_json("{\"exit_code\": 1, \"phase\": \"start\", \"oom_phase\": null, \"signatures\": {\"gpu_busy\": 1}}");
	TAP_STR_EQ(CLS(f, cfg, 0), "env_fault/gpu_busy_or_unavailable", "guide 5: a busy or unavailable GPU");
	jpath_set(f, "signatures", fx_json("{\"error_running_job\": 1}"));
	TAP_STR_EQ(CLS(f, cfg, 0), "not_oom/no_gpu_memory_signature", "near miss: another CUDA error is not_oom");
	json_decref(f);
	f = fx_oom("start", -1, -1);
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_early/oom_phase_unknown",
		   "guide 6: an OOM with no phase marker walks the whole ladder, no phase invented");
	jpath_set(f, "oom_phase", json_string("load"));
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_load/oom_before_training", "near miss: a load marker makes it 2A");
	json_decref(f);
	f = fx_json("{\"exit_code\": 1, \"phase\": \"train\", \"signatures\": {\"host_shm\": 1}}");
	TAP_STR_EQ(CLS(f, cfg, 0), "host_oom/host_oom_killer", "guide 1: the DataLoader out of shared memory is host memory");
	json_decref(f);
	/* env_fault, issue 16.1: an allocation failure at load that persists after a low-memory rung on the
	 * same GPU is evidence that memory is not the cause, whatever the config */
	f = fx_json("{\"exit_code\": 1, \"phase\": \"load\", \"oom_phase\": \"load\", \"first_step\": null, "
		    "\"last_step\": null, \"signatures\": {\"cublas_alloc_failed\": 1, \"error_running_job\": 1}, "
		    "\"oom\": {\"tried_to_allocate_mib\": null, \"total_capacity_mib\": null, \"free_mib\": null, "
		    "\"allocated_by_pytorch_mib\": null, \"processes\": []}, "
		    "\"error\": \"CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\"}");
	{
		struct classify_in in = { f, cfg, 10, false, 0 };
		json_t *ev;
		char *txt;

		r = classify_run(&in);
		TAP_STR_EQ(jpath_str(r, "rule", NULL), "oom_before_training",
			   "near miss: the first CUBLAS failure at load with a 1024 bucket may still be memory (2A)");
		txt = json_dumps(json_object_get(r, "evidence"), 0);
		TAP_OK(txt && !strstr(txt, "0 MiB of 0 MiB") && strstr(txt, "unknown"),
		       "issue 16.1: figures the log did not give read unknown, not 0 MiB of 0 MiB total");
		free(txt);
		json_decref(r);
		in.alloc_failed_before = 1;
		r = classify_run(&in);
		TAP_STR_EQ(jpath_str(r, "class", NULL), "env_fault", "issue 16.1: the allocation failure persists after a "
			   "low-memory rung on the same GPU: env_fault");
		TAP_STR_EQ(jpath_str(r, "rule", NULL), "alloc_failure_persists", "issue 16.1: rule alloc_failure_persists");
		ev = json_object_get(r, "evidence");
		txt = json_dumps(ev, 0);
		TAP_OK(txt && strstr(txt, "attempt 1"), "issue 16.1: the evidence names the earlier attempt");
		free(txt);
		json_decref(r);
		jpath_set(f, "first_step", json_integer(1));
		jpath_set(f, "last_step", json_integer(30));
		jpath_set(f, "oom_phase", json_string("train"));
		r = classify_run(&in);
		TAP_STR_EQ(jpath_str(r, "class", NULL), "oom_train_intermittent",
			   "near miss: a failure after 30 training steps is not an allocation failure at load");
		json_decref(r);
	}
	json_decref(f);

	/* oom_load: guide 2A */
	f = fx_oom("load", -1, -1);
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_load/oom_before_training", "guide 2A: OOM while loading");
	json_decref(f);
	/* oom_sample: guide 2C */
	f = fx_oom("baseline_sample", -1, -1);
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_sample/oom_while_sampling", "guide 2C: OOM in the baseline sample");
	json_decref(f);
	f = fx_oom("sample", 1, 250);
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_sample/oom_while_sampling", "guide 2C: OOM in a periodic sample");
	jpath_set(f, "oom_phase", json_string("train"));
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_intermittent/oom_after_stable_training",
		   "near miss: phase sample but the OOM was in training");
	json_decref(f);

	/* oom_train_early: guide 2B, counted from first_step */
	f = fx_load("facts_train_early_oom.json");
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_early/oom_in_first_steps", "guide 2B: 3 in a row at step 3");
	TAP_STR_EQ(CLS(f, cfg, 1), "oom_train_intermittent/oom_after_stable_training",
		   "guide 2D: the same OOM with a config that succeeded before is intermittent");
	json_decref(f);
	f = fx_oom("train", 501, 505);
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_early/oom_in_first_steps", "guide 2B: resumed at 500, OOM 5 steps later is early");
	jpath_set(f, "last_step", json_integer(510));
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_intermittent/oom_after_stable_training",
		   "near miss: 10 steps done in this attempt -> intermittent (2D)");
	json_decref(f);
	/* guide 2D for a trainer with no step counter: the log's timestamps (FACTS.train_s_before_oom) */
	f = fx_json("{\"exit_code\": 1, \"phase\": \"train\", \"oom_phase\": \"train\", \"signatures\": {\"cuda_oom\": 1}, "
		    "\"first_step\": null, \"last_step\": null, \"steps_done\": 0, \"train_s_before_oom\": 3260}");
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_intermittent/oom_after_stable_training",
		   "guide 2D: no step counter, but 54 minutes of training by the log's timestamps");
	jpath_set(f, "train_s_before_oom", json_integer(CLASSIFY_LONG_TRAIN_S - 1));
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_early/oom_in_first_steps", "near miss: under 10 minutes of training is early");
	jpath_set(f, "train_s_before_oom", json_null());
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_early/oom_in_first_steps", "near miss: no timestamps, no steps: early");
	/* a slow video model that counts steps: 8 steps in 20 minutes is still its first steps */
	jpath_set(f, "train_s_before_oom", json_integer(1200));
	jpath_set(f, "first_step", json_integer(1));
	jpath_set(f, "last_step", json_integer(8));
	jpath_set(f, "steps_done", json_integer(8));
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_early/oom_in_first_steps",
		   "near miss: a log that counts steps is read by its steps (8 slow steps in 20 minutes: early)");
	json_decref(f);
	f = fx_oom("train", 1, 4);
	jpath_set(f, "signatures", fx_json("{\"cuda_oom\": 1, \"skipped_batch_oom\": 5, \"oom_3_in_row\": 1}"));
	TAP_STR_EQ(CLS(f, cfg, 0), "oom_train_intermittent/oom_after_stable_training",
		   "guide 2D: AI Toolkit had already skipped batches before the 3-in-a-row");
	json_decref(f);

	/* policy_classify output shape */
	f = fx_load("facts_train_early_oom.json");
	r = policy_classify(f, cfg);
	TAP_STR_EQ(json_string_value(json_object_get(r, "class")), "oom_train_early", "policy_classify: class");
	TAP_STR_EQ(json_string_value(json_object_get(r, "phase")), "train", "policy_classify: phase");
	TAP_INT_EQ(json_integer_value(json_object_get(r, "step")), 3, "policy_classify: step");
	TAP_OK(json_array_size(json_object_get(r, "evidence")) > 0, "policy_classify: evidence");
	TAP_INT_EQ(jpath_int(r, "signatures.oom_3_in_row", 0), 1, "policy_classify: signatures");
	TAP_INT_EQ(jpath_int(r, "oom.tried_to_allocate_mib", 0), 1536, "policy_classify: oom numbers");
	json_decref(r);
	json_decref(f);
	r = policy_classify(NULL, NULL);
	TAP_STR_EQ(json_string_value(json_object_get(r, "class")), "not_oom", "policy_classify(NULL) does not crash");
	json_decref(r);

	json_decref(cfg);
	json_decref(cons);
	return TAP_DONE();
}
