/* Unit tests for recovery/resume (the checkpoint hold), case by case: a table of CTX and DECISION
 * variations, each with the worker the job should be held for (or none), then the attach helper and
 * the sentence jobtext_placement makes of a placement's "held". */
#include <stdlib.h>
#include <string.h>

#include "jobtext.h"
#include "jpath.h"
#include "resume.h"
#include "tap.h"

/* A resolved CTX: job "lora_a" whose attempt 2 on worker 7 (GPU-7a, online) just ended; attempt 1
 * ran on worker 7 too. Neither saved anything; the cases add what they need. */
static json_t *base_ctx(void)
{
	return json_loads("{\"job\": {\"id\": 1, \"current_config\": {\"config\": {\"name\": \"lora_a\"}},"
			  "         \"constraints\": {\"exclude_gpus\": [], \"exclude_workers\": []}},"
			  " \"attempts\": [{\"number\": 1, \"worker_id\": 7, \"gpu_uuid\": \"GPU-7a\","
			  "               \"config\": {\"config\": {\"name\": \"lora_a\"}}, \"facts\": {}}],"
			  " \"attempt\": {\"number\": 2, \"worker_id\": 7, \"gpu_uuid\": \"GPU-7a\", \"worker_state\": \"online\","
			  "               \"config\": {\"config\": {\"name\": \"lora_a\"}}, \"facts\": {}}}",
			  0, NULL);
}

/* A decision that queues the job again after an OOM in training, config unchanged in name. */
static json_t *base_decision(void)
{
	return json_loads("{\"class\": \"oom_train_early\", \"job_state\": \"queued\","
			  " \"next_config\": {\"config\": {\"name\": \"lora_a\", \"process\": []}},"
			  " \"constraints\": {\"exclude_gpus\": [], \"exclude_workers\": [], \"min_gpu_memory_mib\": null}}",
			  0, NULL);
}

struct hold_case {
	const char *name;
	const char *ctx_path;      /* set in the CTX (NULL: nothing) ... */
	const char *ctx_value;     /* ... to this JSON */
	const char *ctx_path2;     /* a second change (NULL: none) */
	const char *ctx_value2;
	const char *dec_path;      /* set in the DECISION (NULL: nothing) */
	const char *dec_value;
	int hold_s;
	long long want_worker;     /* -1: no hold */
	long long want_attempt;
};

static const struct hold_case cases[] = {
	{ "the attempt that ended saved: held for its worker", "attempt.facts.saved_path", "\"/w/a_20.safetensors\"",
	  NULL, NULL, NULL, NULL, 120, 7, 2 },
	{ "an earlier attempt on the same worker saved: held for it, naming that attempt", "attempts[0].facts.saved_path",
	  "\"/w/a_10.safetensors\"", NULL, NULL, NULL, NULL, 120, 7, 1 },
	{ "nothing saved: no checkpoint, no hold", NULL, NULL, NULL, NULL, NULL, NULL, 120, -1, 0 },
	{ "--resume-hold-s 0: no hold", "attempt.facts.saved_path", "\"/w/a.safetensors\"", NULL, NULL, NULL, NULL, 0,
	  -1, 0 },
	{ "the job ends (succeeded): no hold", "attempt.facts.saved_path", "\"/w/a.safetensors\"", NULL, NULL,
	  "job_state", "\"succeeded\"", 120, -1, 0 },
	{ "the job fails (escalated): no hold", "attempt.facts.saved_path", "\"/w/a.safetensors\"", NULL, NULL,
	  "job_state", "\"failed\"", 120, -1, 0 },
	{ "an env fault moves the job to a clean worker on purpose: no hold", "attempt.facts.saved_path",
	  "\"/w/a.safetensors\"", NULL, NULL, "class", "\"env_fault\"", 120, -1, 0 },
	{ "a host OOM moves it off the host: no hold", "attempt.facts.saved_path", "\"/w/a.safetensors\"", NULL, NULL,
	  "class", "\"host_oom\"", 120, -1, 0 },
	{ "a scale-up's new name starts afresh: no hold", "attempt.facts.saved_path", "\"/w/a.safetensors\"", NULL, NULL,
	  "next_config.config.name", "\"lora_a_s1\"", 120, -1, 0 },
	{ "no next_config: the job's current config's name decides (same: held)", "attempt.facts.saved_path",
	  "\"/w/a.safetensors\"", NULL, NULL, "next_config", "null", 120, 7, 2 },
	{ "the saver ran under another name (a scale-up try): not the checkpoint the next run resumes",
	  "attempt.facts.saved_path", "\"/w/a_s1.safetensors\"", "attempt.config.config.name", "\"lora_a_s1\"", NULL,
	  NULL, 120, -1, 0 },
	{ "the newest saver under the name is an earlier attempt, past a scale-up try that saved its own",
	  "attempt", "{\"number\": 2, \"worker_id\": 7, \"gpu_uuid\": \"GPU-7a\", \"worker_state\": \"online\","
	  " \"config\": {\"config\": {\"name\": \"lora_a_s1\"}}, \"facts\": {\"saved_path\": \"/w/a_s1.safetensors\"}}",
	  "attempts[0].facts.saved_path", "\"/w/a_10.safetensors\"", NULL, NULL, 120, 7, 1 },
	{ "the checkpoint is on another worker's host (attempt 1 ran on worker 9): no hold", "attempts[0].facts.saved_path",
	  "\"/w/a.safetensors\"", "attempts[0].worker_id", "9", NULL, NULL, 120, -1, 0 },
	{ "the worker is draining: no hold", "attempt.facts.saved_path", "\"/w/a.safetensors\"", "attempt.worker_state",
	  "\"draining\"", NULL, NULL, 120, -1, 0 },
	{ "the worker's state is unknown (an older CTX): no hold", "attempt.facts.saved_path", "\"/w/a.safetensors\"",
	  "attempt.worker_state", "null", NULL, NULL, 120, -1, 0 },
	{ "the decision excludes the worker: no hold", "attempt.facts.saved_path", "\"/w/a.safetensors\"", NULL, NULL,
	  "constraints.exclude_workers", "[7]", 120, -1, 0 },
	{ "the job's constraints exclude it (as text): no hold", "attempt.facts.saved_path", "\"/w/a.safetensors\"",
	  "job.constraints.exclude_workers", "[\"7\"]", NULL, NULL, 120, -1, 0 },
	{ "the decision excludes the GPU: no hold", "attempt.facts.saved_path", "\"/w/a.safetensors\"", NULL, NULL,
	  "constraints.exclude_gpus", "[\"GPU-7a\"]", 120, -1, 0 },
	{ "a preemption or a requeue on request (class preempted): no hold, the stop freed that GPU",
	  "attempt.facts.saved_path", "\"/w/a.safetensors\"", NULL, NULL, "class", "\"preempted\"", 120, -1, 0 },
	{ "an OOM while sampling: held", "attempt.facts.saved_path", "\"/w/a.safetensors\"", NULL, NULL, "class",
	  "\"oom_sample\"", 120, 7, 2 },
	{ "the ladder's end sends it to a bigger GPU (floor above this GPU's 24564 MiB): no hold",
	  "attempt.facts.saved_path", "\"/w/a.safetensors\"", "attempt.gpu_memory_mib", "24564",
	  "constraints.min_gpu_memory_mib", "24565", 120, -1, 0 },
	{ "a floor this GPU meets (from an earlier bigger-GPU move): held", "attempt.facts.saved_path",
	  "\"/w/a.safetensors\"", "attempt.gpu_memory_mib", "49152", "constraints.min_gpu_memory_mib", "24565", 120, 7,
	  2 },
};

static void set(json_t *root, const char *path, const char *value)
{
	if (!path)
		return;
	if (jpath_set(root, path, json_loads(value, JSON_DECODE_ANY, NULL)) != 0) {
		printf("not ok - fixture path %s\n", path);
		tap_failed++;
	}
}

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct hold_case *c = &cases[i];
		json_t *ctx = base_ctx(), *d = base_decision(), *hold;

		set(ctx, c->ctx_path, c->ctx_value);
		set(ctx, c->ctx_path2, c->ctx_value2);
		set(d, c->dec_path, c->dec_value);
		hold = resume_hold(ctx, d, c->hold_s);
		if (c->want_worker < 0) {
			TAP_OK(hold == NULL, c->name);
		} else {
			TAP_OK(hold && jpath_int(hold, "worker_id", -1) == c->want_worker &&
				       jpath_int(hold, "attempt", -1) == c->want_attempt &&
				       jpath_int(hold, "seconds", -1) == c->hold_s && json_is_string(jpath_get(hold, "path")),
			       c->name);
		}
		json_decref(hold);
		json_decref(ctx);
		json_decref(d);
	}
}

static void test_attach(void)
{
	json_t *d = base_decision(), *server = json_loads("{\"class\": \"preempted\", \"constraints\": null}", 0, NULL);
	json_t *hold = json_pack("{s:i, s:i}", "worker_id", 7, "seconds", 120);

	resume_hold_attach(d, hold);
	TAP_OK(jpath_int(d, "constraints.hold.worker_id", -1) == 7 && json_is_array(jpath_get(d, "constraints.exclude_gpus")),
	       "attach: the hold joins the decision's constraints, which keep their lists");
	resume_hold_attach(server, hold);
	TAP_OK(jpath_int(server, "constraints.hold.seconds", -1) == 120,
	       "attach: a server decision's null constraints become an object with the hold");
	json_decref(d);
	d = base_decision();
	resume_hold_attach(d, NULL);
	TAP_OK(!jpath_get(d, "constraints.hold"), "attach: no hold leaves the decision as it was");
	json_decref(d);
	json_decref(server);
	json_decref(hold);
}

static void test_sentence(void)
{
	json_t *job = json_loads("{\"state\": \"queued\", \"placement\": {\"gpus\": 2, \"ahead\": 3,"
				 " \"held\": {\"worker_id\": 7, \"attempt\": 2, \"in_s\": 95}}}", 0, NULL);
	char *s = jobtext_placement(job);

	TAP_STR_EQ(s, "waiting for worker 7: its host has the checkpoint attempt 2 saved, so the job resumes there instead "
		      "of starting over; the other workers' GPUs may take it in 1m35s; 3 jobs ahead of it in the queue",
		   "the placement's sentence names the worker, the attempt, the time left and the place");
	free(s);
	json_decref(job);
}

int main(void)
{
	test_cases();
	test_attach();
	test_sentence();
	return TAP_DONE();
}
