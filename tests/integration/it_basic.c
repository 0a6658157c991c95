/* Integration: the whole path with the real rung-worker, the simulated nvidia-smi and the simulated
 * trainer: a job that succeeds, one whose trainer fails for a non-OOM reason (never re-run
 * unchanged), and a cancel while the trainer runs. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "jpath.h"
#include "util.h"

/* Simulated trainer knobs (sim/README.md). */
#define SIM_SLOW_STEPS "RUNG_SIM_STEP_MS=200"

static bool has_event_to(const json_t *events, const char *state)
{
	size_t i;
	json_t *e;
	json_array_foreach(events, i, e)
		if (!strcmp(h_str(e, "to_state"), state))
			return true;
	return false;
}

static void test_success(struct harness *h)
{
	struct h_worker *w = h_worker_start(h, "w1", NULL);
	json_t *cfg = h_config("ok_job", 20);
	json_t *job = h_submit(h, cfg, NULL);
	char *id = h_id(job, "id");
	if (!h_ok(h, w && id, "worker started and job submitted"))
		goto out;
	json_t *done = h_wait_job(h, id, "succeeded", 60000);
	h_ok(h, done != NULL, "a plain job runs on the simulated GPU and succeeds");
	h_ok(h, done && h_int(done, "attempts") == 1, "one attempt");
	h_ok(h, done && json_equal(json_object_get(done, "current_config"), cfg), "config unchanged");
	{
		const char *path = json_string_value(jpath_get(done, "result.output.path"));
		char *show = xasprintf("show %s", id), *out;
		int rc = -1;
		h_ok(h, path && strstr(path, w->work_dir) == path && strstr(path, "/ok_job.safetensors") && access(path, R_OK) == 0,
		     "result.output.path names the LoRA the trainer saved, a file in the worker's job folder (%s)",
		     path ? path : "none");
		h_ok(h, h_int(json_object_get(json_object_get(done, "result"), "output"), "attempt") == 1,
		     "result.output.attempt: the attempt that saved it");
		out = h_rungctl(h, show, &rc);
		h_ok(h, rc == 0 && out && path && strstr(out, "output ") && strstr(out, path), "rungctl show prints the output line");
		char *page = xasprintf("/ui/jobs/%s", id), *want = xasprintf("<dt>output</dt><dd>%s (saved by attempt 1", path ? path : "?");
		long st = h_browse(h, h->admin_token, "GET", page, NULL, NULL);
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, want), "the job page says where the output is");
		free(want);
		free(page);
		free(out);
		free(show);
	}
	json_decref(done);
	json_t *as = h_wait_attempts(h, id, 1, "ended", 5000);
	json_t *a = json_array_get(as, 0);
	h_ok(h, json_array_size(as) == 1 && !strcmp(h_str(a, "outcome"), "succeeded"),
		"attempts: one ended attempt, outcome succeeded");
	h_ok(h, !strcmp(h_str(a, "gpu_uuid"), "GPU-sim-w1-0"), "ran on the worker's simulated GPU (%s)",
		h_str(a, "gpu_uuid"));
	json_t *facts = json_object_get(a, "facts");
	h_ok(h, h_int(facts, "exit_code") == 0 && h_int(facts, "steps_done") == 20,
		"facts: exit 0, 20 steps done");
	h_ok(h, json_array_size(json_object_get(facts, "log_tail")) > 0, "facts carry the trainer's log tail");
	h_ok(h, json_is_object(json_object_get(facts, "gpu_before")), "facts carry the GPU state before the attempt");
	json_decref(as);
	long st = 0;
	json_t *ev = h_getf(h, &st, "/v1/jobs/%s/events", id);
	json_t *events = json_object_get(ev, "events");
	h_ok(h, has_event_to(events, "queued") && has_event_to(events, "running") && has_event_to(events, "succeeded"),
		"events show queued → running → succeeded");
	if (h->failed)
		h_diag_json("events", ev);
	json_decref(ev);
out:
	if (w)
		h_worker_stop(h, w, SIGTERM);
	free(id);
	json_decref(job);
	json_decref(cfg);
}

static void test_not_oom_failure(struct harness *h)
{
	const char *env[] = { "RUNG_SIM_FAIL=missing_file", NULL };
	struct h_worker_opts o = { .env = env };
	struct h_worker *w = h_worker_start(h, "w2", &o);
	json_t *cfg = h_config("missing_file_job", 20);
	json_t *job = h_submit(h, cfg, NULL);
	char *id = h_id(job, "id");
	if (!h_ok(h, w && id, "failing worker started and job submitted"))
		goto out;
	json_t *done = h_wait_job(h, id, "failed", 60000);
	h_ok(h, done != NULL, "a trainer failing with a missing file ends the job failed");
	json_t *as = h_wait_attempts(h, id, 1, "ended", 5000);
	json_t *a = json_array_get(as, json_array_size(as) - 1);
	const char *p[] = { id };
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1 AND state <> 'lost'", 1, p) == 1,
		"exactly one attempt ran: a non-OOM failure is never re-run unchanged");
	h_ok(h, done && h_int(done, "lost_count") == 0,
		"no attempt lost to the previous worker, which stopped while parked in a long poll");
	h_ok(h, !strcmp(h_str(a, "class"), "not_oom") && !strcmp(h_str(a, "outcome"), "failed"),
		"attempt classified not_oom, outcome failed (class %s)", h_str(a, "class"));
	json_t *sig = json_object_get(json_object_get(a, "facts"), "signatures");
	h_ok(h, h_int(sig, "file_not_found") >= 1, "facts name the file_not_found signature");
	char *res = done ? json_dumps(done, JSON_COMPACT) : NULL;
	h_ok(h, res && (strstr(res, "No such file") || strstr(res, "not found") || strstr(res, "not_oom") ||
		strstr(res, "missing")), "the job says why it failed");
	if (!res || h->failed)
		h_diag_json("job", done);
	free(res);
	json_decref(as);
	json_decref(done);
out:
	if (w)
		h_worker_stop(h, w, SIGTERM);
	free(id);
	json_decref(job);
	json_decref(cfg);
}

struct step_arg {
	struct harness *h;
	const char *id;
};

static bool attempt_has_steps(void *arg)
{
	struct step_arg *s = arg;
	const char *p[] = { s->id };
	return h_sql_int(s->h, "SELECT coalesce(max(step), 0) FROM attempts WHERE job_id = $1 AND state = 'running'",
		1, p) >= 2;
}

static void test_cancel_running(struct harness *h)
{
	const char *env[] = { SIM_SLOW_STEPS, NULL };
	struct h_worker_opts o = { .env = env };
	struct h_worker *w = h_worker_start(h, "w3", &o);
	json_t *cfg = h_config("slow_job", 1000);
	json_t *job = h_submit(h, cfg, NULL);
	char *id = h_id(job, "id");
	if (!h_ok(h, w && id, "slow worker started and job submitted"))
		goto out;
	json_t *run = h_wait_job(h, id, "running", 30000);
	h_ok(h, run != NULL, "slow job is running");
	json_decref(run);
	struct step_arg sa = { h, id };
	h_ok(h, wait_until(attempt_has_steps, &sa, 30000), "heartbeats report training steps");
	long st = 0;
	json_t *c = h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id);
	h_ok(h, st == 200 && json_is_true(json_object_get(c, "cancel_requested")), "cancel accepted (cancel_requested)");
	json_decref(c);
	json_t *done = h_wait_job(h, id, "cancelled", 20000);
	h_ok(h, done != NULL, "the worker stops the trainer at its next heartbeat: job cancelled");
	json_t *as = h_wait_attempts(h, id, 1, "ended", 5000);
	json_t *a = json_array_get(as, json_array_size(as) - 1);
	h_ok(h, !strcmp(h_str(a, "outcome"), "cancelled"), "attempt outcome cancelled");
	h_ok(h, h_int(done, "lost_count") == 0, "no attempt lost to a worker stopped while parked in a long poll");
	h_ok(h, h_int(json_object_get(a, "facts"), "steps_done") < 1000, "the trainer did not run to the end");
	json_decref(as);
	json_decref(done);
	h_ok(h, h_proc_alive(&w->proc), "the worker is still running after the cancel");
out:
	if (w)
		h_worker_stop(h, w, SIGTERM);
	free(id);
	json_decref(job);
	json_decref(cfg);
}

int main(void)
{
	struct harness *h = h_new("it_basic");
	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	test_success(h);
	test_not_oom_failure(h);
	test_cancel_running(h);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM (SELECT job_id FROM attempts WHERE state = 'running' "
		"GROUP BY job_id HAVING count(*) > 1) x", 0, NULL) == 0, "never two running attempts of one job");
	return h_free(h);
}
