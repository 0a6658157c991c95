/* Unit tests for recovery/facts: FACTS as the worker sends them pass; each wrong type or range is
 * refused with the path of the offending key. */
#include <stdlib.h>

#include "facts.h"
#include "tap.h"

static const char *const good =
	"{\"exit_code\": 1, \"signal\": null, \"cancelled\": false, \"phase\": \"train\", \"oom_phase\": \"train\","
	" \"first_step\": 0, \"last_step\": 3, \"steps_done\": 3, \"total_steps\": 2000,"
	" \"signatures\": {\"cuda_oom\": 1, \"skipped_batch_oom\": 3},"
	" \"oom\": {\"tried_to_allocate_mib\": 1536.5, \"total_capacity_mib\": 24564, \"free_mib\": 0,"
	"          \"allocated_by_pytorch_mib\": null, \"processes\": [{\"pid\": 1234, \"used_mib\": 5816}]},"
	" \"error\": \"Error running job: CUDA out of memory\","
	" \"gpu_before\": {\"uuid\": \"GPU-1\", \"memory_total_mib\": 24564, \"memory_used_mib\": 12, \"processes\": []},"
	" \"gpu_after\": null, \"duration_ms\": 61234, \"train_ms\": 12000, \"train_steps\": 240, \"log_tail\": [\"a\", \"b\"], \"newer_worker_fact\": [1],"
	" \"peak\": {\"mib\": 23012, \"phase\": \"train\", \"step\": 3}}";

static void check_bad(const char *key_json, const char *want_field, const char *name)
{
	json_t *f = json_loads(good, 0, NULL), *patch = json_loads(key_json, 0, NULL);
	char *field = NULL, *message = NULL;
	int rc;

	json_object_update(f, patch);
	rc = facts_validate(f, &field, &message);
	TAP_INT_EQ(rc, -1, name);
	TAP_STR_EQ(field, want_field, name);
	TAP_OK(message && message[0], name);
	free(field);
	free(message);
	json_decref(patch);
	json_decref(f);
}

int main(void)
{
	json_t *f = json_loads(good, 0, NULL), *empty = json_object(), *arr = json_array();
	char *field = NULL, *message = NULL;

	TAP_INT_EQ(facts_validate(f, &field, &message), 0, "facts: a worker's report passes (unknown keys allowed)");
	TAP_OK(!field && !message, "facts: nothing to free when valid");
	TAP_INT_EQ(facts_validate(empty, &field, &message), 0, "facts: every key is optional");
	TAP_INT_EQ(facts_validate(arr, &field, &message), -1, "facts: not an object");
	TAP_STR_EQ(field, "facts", "facts: not an object names facts");
	free(field);
	free(message);

	check_bad("{\"exit_code\": \"abc\"}", "facts.exit_code", "facts: exit_code must be an integer");
	check_bad("{\"exit_code\": 1e308}", "facts.exit_code", "facts: exit_code 1e308 refused");
	check_bad("{\"signal\": -9}", "facts.signal", "facts: a negative signal refused");
	check_bad("{\"steps_done\": -5}", "facts.steps_done", "facts: negative steps_done refused");
	check_bad("{\"last_step\": []}", "facts.last_step", "facts: last_step must be a count");
	check_bad("{\"total_steps\": {}}", "facts.total_steps", "facts: total_steps must be a count");
	check_bad("{\"phase\": \"'; DROP TABLE jobs; --\"}", "facts.phase", "facts: phase must be a known phase");
	check_bad("{\"oom_phase\": 7}", "facts.oom_phase", "facts: oom_phase must be a string phase");
	check_bad("{\"signatures\": []}", "facts.signatures", "facts: signatures must be an object");
	check_bad("{\"signatures\": {\"cuda_oom\": \"x\"}}", "facts.signatures.cuda_oom", "facts: signature counts are integers");
	check_bad("{\"oom\": \"x\"}", "facts.oom", "facts: oom must be an object");
	check_bad("{\"oom\": {\"free_mib\": -1}}", "facts.oom.free_mib", "facts: oom numbers are non-negative");
	check_bad("{\"oom\": {\"processes\": [{\"pid\": \"x\"}]}}", "facts.oom.processes[0].pid", "facts: process pids are integers");
	check_bad("{\"gpu_before\": []}", "facts.gpu_before", "facts: gpu_before must be an object");
	check_bad("{\"gpu_after\": {\"memory_used_mib\": \"lots\"}}", "facts.gpu_after.memory_used_mib", "facts: GPU memory is a number");
	check_bad("{\"duration_ms\": -1}", "facts.duration_ms", "facts: negative duration refused");
	check_bad("{\"cancelled\": \"yes\"}", "facts.cancelled", "facts: cancelled is a boolean");
	check_bad("{\"error\": 5}", "facts.error", "facts: error is a string");
	check_bad("{\"log_tail\": [1]}", "facts.log_tail[0]", "facts: log lines are strings");
	check_bad("{\"train_s_before_oom\": -1}", "facts.train_s_before_oom",
		  "facts: train_s_before_oom is a count of seconds or null");
	check_bad("{\"train_s_before_oom\": \"1h\"}", "facts.train_s_before_oom", "facts: train_s_before_oom is not text");
	check_bad("{\"train_ms\": -5}", "facts.train_ms", "facts: train_ms is a count of milliseconds or null");
	check_bad("{\"train_ms\": 1.5}", "facts.train_ms", "facts: train_ms is a whole number");
	check_bad("{\"train_steps\": -1}", "facts.train_steps", "facts: train_steps is a count of steps or null");
	check_bad("{\"peak\": 5}", "facts.peak", "facts: peak must be an object");
	check_bad("{\"peak\": {\"phase\": \"train\"}}", "facts.peak.mib", "facts: peak.mib is required");
	check_bad("{\"peak\": {\"mib\": -3, \"phase\": \"train\"}}", "facts.peak.mib", "facts: peak.mib is non-negative");
	check_bad("{\"peak\": {\"mib\": 9000, \"phase\": \"done\"}}", "facts.peak.phase",
		  "facts: peak.phase is a phase the trainer runs in (not done)");
	check_bad("{\"peak\": {\"mib\": 9000, \"phase\": \"load\", \"step\": \"x\"}}", "facts.peak.step",
		  "facts: peak.step is a count or null");
	{
		json_t *p = json_loads("{\"peak\": {\"mib\": 9000, \"phase\": \"load\", \"step\": null}}", 0, NULL);
		json_t *g = json_loads(good, 0, NULL);
		json_object_update(g, p);
		TAP_INT_EQ(facts_validate(g, &field, &message), 0, "facts: a peak in load with no step passes");
		json_object_set_new(g, "peak", json_null());
		TAP_INT_EQ(facts_validate(g, &field, &message), 0, "facts: peak null passes (nothing was read)");
		json_decref(g);
		json_decref(p);
	}
	json_decref(arr);
	json_decref(empty);
	json_decref(f);
	return TAP_DONE();
}
