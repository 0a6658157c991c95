/* Integration: a GPU quarantined by an environment fault gets leases again only after a health
 * check on its worker passes. A dirty simulated GPU (a foreign process) with RUNG_SIM_CUBLAS=alloc
 * is quarantined (quarantine_after 1); while it stays dirty the worker's built-in check fails and
 * no job runs there; once the test removes the foreign process from the sim state file the next
 * check passes, the GPU becomes suspect and runs a job, and it is cleared to ok only after its env
 * fault left the window. Also: worker tokens report only for their own GPUs; support release. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

#define SICK "GPU-sick-0"
#define WINDOW_S 25 /* env_fault_window_s of the faulting job */
#define STR_(x) #x
#define STR(x) STR_(x)

static const char dirty_gpus[] = "{\"gpus\": [{\"uuid\": \"" SICK "\", \"name\": \"NVIDIA GeForce RTX 4090\", "
	"\"memory_total_mib\": 24576, \"processes\": [{\"pid\": 999999, \"used_mib\": 3000, \"name\": \"python\"}]}]}";
static const char clean_gpus[] = "{\"gpus\": [{\"uuid\": \"" SICK "\", \"name\": \"NVIDIA GeForce RTX 4090\", "
	"\"memory_total_mib\": 24576, \"processes\": []}]}";

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

/* gpu_health events of SICK with this result reported while the GPU was in from_state. */
static long long health_reports(struct harness *h, const char *from_state, bool passed)
{
	const char *p[] = { from_state, passed ? "true" : "false" };
	return h_sql_int(h, "SELECT count(*) FROM events WHERE kind = 'gpu_health' AND data->>'gpu_uuid' = '" SICK
		"' AND from_state = $1 AND (data->>'passed')::boolean = $2::boolean", 2, p);
}

struct count_arg {
	struct harness *h;
	const char *from_state;
	bool passed;
	long long at_least;
};

static bool reports_reach(void *arg)
{
	struct count_arg *c = arg;
	return health_reports(c->h, c->from_state, c->passed) >= c->at_least;
}

/* Replaces the sim state file atomically (nvidia-smi may be reading it). */
static int write_state(const char *path, const char *text)
{
	char *tmp = xasprintf("%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	int rc = -1;
	if (f && fputs(text, f) >= 0 && fclose(f) == 0) {
		f = NULL;
		rc = rename(tmp, path);
	}
	if (f)
		fclose(f);
	free(tmp);
	return rc;
}

static long long job_attempts_on(struct harness *h, const char *job_id, const char *gpu)
{
	const char *p[] = { job_id, gpu };
	return h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint AND gpu_uuid = $2", 2, p);
}

static void test_quarantine_lifted_by_health(struct harness *h)
{
	const char *cublas[] = { "RUNG_SIM_CUBLAS=alloc", NULL };
	const char *args[] = { "--health-interval-ms", "300", NULL };
	struct h_worker_opts o = { .gpus_json = dirty_gpus, .env = cublas, .args = args };
	json_t *extra = json_pack("{s:{s:b, s:i, s:i}}", "recovery", "scale_up", 0, "quarantine_after", 1,
		"env_fault_window_s", WINDOW_S);
	json_t *cfg1 = h_config("health_fault", 10), *cfg2 = h_config("health_after", 10);
	json_t *job1 = NULL, *job2 = NULL, *done = NULL;
	char *id1 = NULL, *id2 = NULL;
	struct gpu_arg quarantined = { h, SICK, "quarantined" };
	long st = 0;

	h_config_set(cfg1, "config.process[0].datasets[0].resolution", json_pack("[i]", 512));
	h_config_set(cfg2, "config.process[0].datasets[0].resolution", json_pack("[i]", 512));
	struct h_worker *w = h_worker_start(h, "sick", &o);
	if (!h_ok(h, w != NULL, "a worker on the dirty GPU starts"))
		goto out;
	job1 = h_submit(h, cfg1, extra);
	id1 = h_id(job1, "id");
	if (!h_ok(h, id1 && wait_until(gpu_in_state, &quarantined, 30000),
		"an env fault on the dirty GPU quarantines it (quarantine_after 1)"))
		goto out;

	/* The worker notices by itself (empty long-polls in a row), checks and reports: dirty, fails. */
	struct count_arg failing = { h, "quarantined", false, 3 };
	h_ok(h, wait_until(reports_reach, &failing, 30000),
		"the worker reports failing health checks on the quarantined, still dirty GPU (%lld)",
		health_reports(h, "quarantined", false));
	job2 = h_submit(h, cfg2, NULL);
	id2 = h_id(job2, "id");
	failing.at_least = health_reports(h, "quarantined", false) + 3;
	h_ok(h, id2 && wait_until(reports_reach, &failing, 30000), "more failing checks come in while it stays dirty");
	json_t *j2 = id2 ? h_job(h, id2) : NULL;
	h_ok(h, j2 && !strcmp(h_str(j2, "state"), "queued") && job_attempts_on(h, id2, SICK) == 0,
		"a quarantined GPU gets no leases: the new job stays queued (%s)", h_str(j2, "state"));
	json_decref(j2);
	h_ok(h, gpu_in_state(&quarantined), "failing checks keep the GPU quarantined");
	h_ok(h, health_reports(h, "quarantined", true) == 0, "no check passed while the GPU was dirty");
	const char *ev_p[] = { SICK };
	long long ev_id = h_sql_int(h, "SELECT max(id) FROM events WHERE kind = 'gpu_health' AND data->>'gpu_uuid' = $1",
		1, ev_p);
	char ev_s[32];
	snprintf(ev_s, sizeof ev_s, "%lld", ev_id);
	const char *ev_q[] = { ev_s };
	PGresult *r = h_sql(h, "SELECT data->>'detail', data->'gpu_state'->'processes'->0->>'pid' FROM events WHERE id = $1::bigint",
		1, ev_q);
	h_ok(h, r && PQntuples(r) == 1 && strstr(PQgetvalue(r, 0, 0), "compute process") &&
		!strcmp(PQgetvalue(r, 0, 1), "999999"),
		"the gpu_health event records the detail and the GPU state (%s)", r && PQntuples(r) ? PQgetvalue(r, 0, 0) : "");
	PQclear(r);

	/* Same worker without the CUBLAS fault; the GPU is still dirty: its start-up check fails. */
	h_worker_stop(h, w, SIGTERM);
	struct h_worker_opts o2 = { .gpus_json = dirty_gpus, .args = args };
	long long before = health_reports(h, "quarantined", false);
	w = h_worker_start(h, "sick", &o2);
	struct count_arg restarted = { h, "quarantined", false, before + 1 };
	h_ok(h, w && wait_until(reports_reach, &restarted, 20000), "the restarted worker checks at start and fails");
	h_ok(h, gpu_in_state(&quarantined), "still quarantined while the foreign process holds memory");

	/* Support cleans the GPU: the foreign process is gone. The next check passes. */
	h_ok(h, w && write_state(w->state_path, clean_gpus) == 0, "the foreign process leaves the simulated GPU");
	struct count_arg lifted = { h, "quarantined", true, 1 };
	h_ok(h, wait_until(reports_reach, &lifted, 20000), "the next health check passes");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM events WHERE kind = 'gpu_unquarantined' AND from_state = 'quarantined' "
		"AND to_state = 'suspect' AND reason = 'health check passed' AND data->>'gpu_uuid' = '" SICK "'", 0, NULL) == 1,
		"a gpu_unquarantined event moves it to suspect, reason \"health check passed\"");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM events WHERE kind = 'gpu_health' AND data->>'gpu_uuid' = '" SICK
		"' AND from_state = 'quarantined' AND to_state = 'ok'", 0, NULL) == 0, "a quarantine is never lifted straight to ok");
	done = id2 ? h_wait_job(h, id2, "succeeded", 60000) : NULL;
	h_ok(h, done && job_attempts_on(h, id2, SICK) == 1, "the GPU leases again: the queued job runs and succeeds on it");
	h_ok(h, id1 && job_attempts_on(h, id1, SICK) == 1, "the faulting job is not sent back to that GPU");

	/* Suspect: passing checks clear it to ok only once its env fault left the window. */
	struct gpu_arg ok = { h, SICK, "ok" };
	h_ok(h, wait_until(gpu_in_state, &ok, (WINDOW_S + 20) * 1000), "once the env fault leaves its window, a passing check clears the GPU to ok");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM events e, gpu_faults f WHERE e.kind = 'gpu_cleared' AND f.gpu_uuid = '" SICK
		"' AND e.at < f.at + make_interval(secs => " STR(WINDOW_S) ")", 0, NULL) == 0,
		"not before: no gpu_cleared while the fault was in its window");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM events WHERE kind = 'gpu_cleared' AND data->>'gpu_uuid' = '" SICK "'", 0,
		NULL) == 1, "a gpu_cleared event records it");

	/* Support release still works on its own. */
	char *support = h_token_create(h, "support", "health-support");
	const char *saved = h->auth_token;
	h->auth_token = support;
	json_t *rel = h_post(h, "/v1/gpus/" SICK "/release", NULL, &st);
	h_ok(h, st == 200 && !strcmp(h_str(rel, "state"), "ok"), "support can still release the GPU (%ld)", st);
	json_decref(rel);
	json_t *body = json_pack("{s:b, s:s}", "passed", 1, "detail", "checked by hand");
	json_t *ans = h_post(h, "/v1/gpus/" SICK "/health", body, &st);
	h_ok(h, st == 200 && !strcmp(h_str(ans, "state"), "ok") && json_is_null(json_object_get(ans, "next_check_ms")),
		"support may report health too; an ok GPU needs no next check (%ld)", st);
	json_decref(ans);
	json_decref(body);
	h->auth_token = saved;
	free(support);
	if (id1) {
		json_t *c = h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id1);
		json_decref(c);
	}
	h_worker_stop(h, w, SIGTERM);
out:
	json_decref(done);
	json_decref(job1);
	json_decref(job2);
	json_decref(cfg1);
	json_decref(cfg2);
	json_decref(extra);
	free(id1);
	free(id2);
}

/* Who may report: a worker token only for GPUs of workers bound to it (others: 404), staff for
 * any; submitters 403; the body is checked. */
static void test_health_access(struct harness *h)
{
	char *other = h_token_create(h, "worker", "health-other");
	char *sub = h_token_create(h, "submitter", "health-sub");
	const char *saved = h->auth_token;
	json_t *pass = json_pack("{s:b, s:s}", "passed", 1, "detail", "fine");
	json_t *ans;
	long st = 0;

	h->auth_token = other;
	char *wid = h_fake_register(h, "health-other", "GPU-other-0", 24576);
	h_ok(h, wid != NULL, "another worker token registers its own worker");
	ans = h_post(h, "/v1/gpus/" SICK "/health", pass, &st);
	h_ok(h, st == 404, "a worker token cannot report health for another worker's GPU (%ld)", st);
	json_decref(ans);
	ans = h_post(h, "/v1/gpus/GPU-other-0/health", pass, &st);
	h_ok(h, st == 200 && !strcmp(h_str(ans, "uuid"), "GPU-other-0") && !strcmp(h_str(ans, "state"), "ok"),
		"it reports for its own GPU: {uuid, state, next_check_ms} (%ld)", st);
	json_decref(ans);
	ans = h_post(h, "/v1/gpus/GPU-nope/health", pass, &st);
	h_ok(h, st == 404, "an unknown GPU is 404 (%ld)", st);
	json_decref(ans);
	json_t *bad = json_pack("{s:s}", "passed", "yes");
	ans = h_post(h, "/v1/gpus/GPU-other-0/health", bad, &st);
	h_ok(h, st == 400 && !strcmp(h_str(ans, "field"), "passed"), "passed must be a boolean (400, field passed)");
	json_decref(ans);
	json_decref(bad);
	h->auth_token = sub;
	ans = h_post(h, "/v1/gpus/GPU-other-0/health", pass, &st);
	h_ok(h, st == 403, "a submitter may not report health (%ld)", st);
	json_decref(ans);
	h->auth_token = saved;
	json_decref(pass);
	free(wid);
	free(other);
	free(sub);
}

int main(void)
{
	struct harness *h = h_new("it_health");
	const char *extra[] = { "--quarantine-min-s", "1", NULL };
	if (!h_ok(h, h_server_start(h, extra) == 0, "rungd starts"))
		return h_free(h);
	test_quarantine_lifted_by_health(h);
	test_health_access(h);
	return h_free(h);
}
