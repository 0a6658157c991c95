/* Integration: faults around a running system: a worker killed with SIGKILL mid-attempt (lease
 * expires, attempt lost, job re-run elsewhere and succeeds), PostgreSQL stopped and restarted
 * (fast and immediate) under a running rungd, and rungd killed and restarted mid-attempt. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "util.h"

struct step_arg {
	struct harness *h;
	const char *id;
	int min_step;
};

static bool attempt_has_steps(void *arg)
{
	struct step_arg *s = arg;
	const char *p[] = { s->id };
	return h_sql_int(s->h, "SELECT coalesce(max(step), 0) FROM attempts WHERE job_id = $1 AND state = 'running'",
		1, p) >= s->min_step;
}

static bool attempt_lost(void *arg)
{
	struct step_arg *s = arg;
	const char *p[] = { s->id };
	return h_sql_int(s->h, "SELECT count(*) FROM attempts WHERE job_id = $1 AND state = 'lost'", 1, p) >= 1;
}

static bool no_double_running(struct harness *h)
{
	return h_sql_int(h, "SELECT count(*) FROM (SELECT job_id FROM attempts WHERE state = 'running' "
		"GROUP BY job_id HAVING count(*) > 1) x", 0, NULL) == 0;
}

static void test_worker_sigkill(struct harness *h, struct h_worker **fast)
{
	const char *slow_env[] = { "RUNG_SIM_STEP_MS=100", NULL };
	struct h_worker_opts so = { .env = slow_env };
	struct h_worker *w1 = h_worker_start(h, "victim", &so);
	json_t *cfg = h_config("killed_job", 60);
	json_t *job = h_submit(h, cfg, NULL);
	char *id = h_id(job, "id");
	if (!h_ok(h, w1 && id, "slow worker started and job submitted"))
		goto out;
	struct step_arg sa = { h, id, 2 };
	h_ok(h, wait_until(attempt_has_steps, &sa, 30000), "the attempt is training (heartbeats report steps)");
	h_ok(h, h_worker_stop(h, w1, SIGKILL) == 0, "worker killed with SIGKILL");
	h_ok(h, wait_until(attempt_lost, &sa, 15000), "its lease expires and the attempt becomes lost");
	json_t *q = h_wait_job(h, id, "queued", 5000);
	h_ok(h, q != NULL, "the job is re-queued");
	json_decref(q);
	/* A second worker (its own GPU; the killed worker's trainer may linger on the first) re-runs it. */
	*fast = h_worker_start(h, "rescuer", NULL);
	json_t *done = h_wait_job(h, id, "succeeded", 60000);
	h_ok(h, done != NULL, "the job is re-run by another worker and succeeds");
	h_ok(h, done && h_int(done, "lost_count") == 1 && h_int(done, "attempts") == 2,
		"lost counted apart: lost_count 1, attempts 2");
	h_ok(h, done && json_equal(json_object_get(done, "current_config"), cfg),
		"a lost attempt does not walk the ladder (config unchanged)");
	json_decref(done);
	json_t *as = h_wait_attempts(h, id, 2, "ended", 5000);
	h_ok(h, as && !strcmp(h_str(json_array_get(as, 0), "state"), "lost") &&
		!strcmp(h_str(json_array_get(as, 1), "outcome"), "succeeded") &&
		!strcmp(h_str(json_array_get(as, 1), "gpu_uuid"), "GPU-sim-rescuer-0"),
		"attempts: lost on the victim, succeeded on the rescuer");
	json_decref(as);
	h_ok(h, no_double_running(h), "never two running attempts of one job");
out:
	free(id);
	json_decref(job);
	json_decref(cfg);
}

struct health_arg {
	struct harness *h;
	long want;
};

static bool health_is(void *arg)
{
	struct health_arg *a = arg;
	long st = 0;
	json_t *j = h_get(a->h, "/healthz", &st);
	bool ok = st == a->want && (a->want != 503 || !strcmp(h_str(j, "database"), "down"));
	json_decref(j);
	return ok;
}

static void run_one_job(struct harness *h, const char *label)
{
	json_t *cfg = h_config(label, 10);
	json_t *job = NULL;
	/* Right after recovery a submit may still meet a connection being re-established: retry on 503. */
	int64_t deadline = util_mono_ms() + 15000;
	while (!job && util_mono_ms() < deadline) {
		long st = 0;
		json_t *body = json_pack("{s:O}", "config", cfg);
		job = h_post(h, "/v1/jobs", body, &st);
		json_decref(body);
		if (st != 201) {
			json_decref(job);
			job = NULL;
			struct timespec ts = { 0, 100 * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	char *id = h_id(job, "id");
	json_t *done = id ? h_wait_job(h, id, "succeeded", 60000) : NULL;
	h_ok(h, done != NULL, "%s: a job submitted afterwards runs to success", label);
	json_decref(done);
	free(id);
	json_decref(job);
	json_decref(cfg);
}

static void test_pg_outage(struct harness *h)
{
	h_ok(h, h_pg_stop(h, "fast") == 0, "PostgreSQL stopped (fast)");
	struct health_arg down = { h, 503 }, up = { h, 200 };
	h_ok(h, wait_until(health_is, &down, 10000), "healthz answers 503 with database down during the outage");
	long st = 0;
	json_t *hz = h_get(h, "/healthz", &st);
	h_ok(h, st == 503 && *h_str(hz, "version") && json_is_null(json_object_get(hz, "schema")),
	     "and still says rungd's version, the schema's number null (got %ld)", st);
	json_decref(hz);
	json_t *cfg = h_config("during_outage", 10);
	json_t *body = json_pack("{s:O}", "config", cfg);
	json_t *r = h_post(h, "/v1/jobs", body, &st);
	h_ok(h, st == 503 && json_is_string(json_object_get(r, "error")),
		"a submit during the outage gets 503 with a JSON error (got %ld)", st);
	json_decref(r);
	json_decref(body);
	json_decref(cfg);
	h_ok(h, h_proc_alive(&h->server), "rungd keeps running while the database is down");
	h_ok(h, h_pg_start(h) == 0, "PostgreSQL started again");
	h_ok(h, wait_until(health_is, &up, 20000), "rungd recovers by itself (healthz 200)");
	run_one_job(h, "after_outage");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs WHERE target_config->'config'->>'name' = 'during_outage'", 0,
		NULL) == 0, "the submit answered 503 left no row");
}

static void test_pg_restart(struct harness *h, const char *mode)
{
	/* A job in flight across the restart still ends succeeded, exactly once. */
	json_t *cfg = h_config("across_restart", 40);
	json_t *job = h_submit(h, cfg, NULL);
	char *id = h_id(job, "id");
	json_t *run = id ? h_wait_job(h, id, "running", 30000) : NULL;
	h_ok(h, run != NULL, "restart %s: a job is running", mode);
	json_decref(run);
	h_ok(h, h_pg_restart(h, mode) == 0, "PostgreSQL restarted (%s)", mode);
	struct health_arg up = { h, 200 };
	h_ok(h, wait_until(health_is, &up, 20000), "restart %s: rungd recovers by itself", mode);
	h_ok(h, h_proc_alive(&h->server), "restart %s: rungd did not exit", mode);
	json_t *done = id ? h_wait_job(h, id, "succeeded", 60000) : NULL;
	h_ok(h, done != NULL, "restart %s: the in-flight job still succeeds", mode);
	json_decref(done);
	const char *p[] = { id ? id : "0" };
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1 AND outcome = 'succeeded'", 1, p) == 1,
		"restart %s: exactly one succeeded attempt", mode);
	char *label = xasprintf("after_restart_%s", mode);
	run_one_job(h, label);
	free(label);
	h_ok(h, no_double_running(h), "restart %s: never two running attempts of one job", mode);
	free(id);
	json_decref(job);
	json_decref(cfg);
}

/* rungd killed with SIGKILL while a job runs, then restarted on the same port: the worker keeps
 * the trainer going, reconnects, and the job ends succeeded exactly once. */
static void test_rungd_restart(struct harness *h)
{
	json_t *cfg = h_config("across_rungd", 30);
	json_t *job = h_submit(h, cfg, NULL);
	char *id = h_id(job, "id");
	json_t *run = id ? h_wait_job(h, id, "running", 30000) : NULL;
	h_ok(h, run != NULL, "rungd restart: a job is running");
	json_decref(run);
	h_ok(h, h_server_stop(h, SIGKILL) == 0, "rungd killed with SIGKILL");
	h_ok(h, h_server_restart(h) == 0, "rungd restarted on the same port");
	json_t *done = id ? h_wait_job(h, id, "succeeded", 60000) : NULL;
	h_ok(h, done != NULL, "rungd restart: the job ends succeeded");
	json_decref(done);
	const char *p[] = { id ? id : "0" };
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1 AND outcome = 'succeeded'", 1, p) == 1,
		"rungd restart: exactly one succeeded attempt");
	free(id);
	json_decref(job);
	json_decref(cfg);
}

int main(void)
{
	struct harness *h = h_new("it_faults");
	struct h_worker *fast = NULL;
	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	test_worker_sigkill(h, &fast);
	if (!fast)
		fast = h_worker_start(h, "rescuer", NULL);
	test_pg_outage(h);
	test_pg_restart(h, "fast");
	test_pg_restart(h, "immediate");
	test_rungd_restart(h);
	h_ok(h, fast && h_proc_alive(&fast->proc), "the worker survived every fault");
	return h_free(h);
}
