/* Integration: what operators get from rungd. GET /metrics after jobs ran shows the database
 * counts (jobs, attempts by outcome/class, rungs, lease waits, escalations) and the HTTP
 * histograms; the escalation webhook reaches a receiver (a small evhttp server on its own thread),
 * is retried while the receiver refuses connections and then answers 503, and a pending outbox row
 * survives a SIGKILL of rungd and is delivered after the restart. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "harness.h"
#include "jpath.h"
#include "receiver.h"
#include "util.h"

#define GPU "GPU-ops-0"
/* ---- database conditions ---- */

struct sql_wait {
	struct harness *h;
	const char *sql;
	long long want; /* the first column must reach at least this */
};

static bool sql_reaches(void *arg)
{
	struct sql_wait *w = arg;
	return h_sql_int(w->h, w->sql, 0, NULL) >= w->want;
}

/* ---- a fake worker's run of one attempt ---- */

/* Leases the next job on GPU and finishes it with facts; returns the finish answer or NULL. */
static json_t *run_attempt(struct harness *h, const char *wid, const json_t *facts)
{
	long st = 0;
	json_t *lease = h_fake_lease(h, wid, GPU, 5000, &st), *done = NULL;
	char *aid = h_id(lease, "attempt_id");

	if (!h_ok(h, lease && aid, "lease granted (status %ld)", st))
		goto out;
	done = h_fake_finish(h, aid, h_str(lease, "token"), facts, &st);
	h_ok(h, st == 200, "finish accepted (status %ld)", st);
out:
	free(aid);
	json_decref(lease);
	return done;
}

/* The history's counts (jobs ended, attempts, rungs, lease waits) come from one reading kept for
 * --metrics-history-ms (10 minutes here); what is true now is read at every scrape. A job
 * submitted shows at once as queued; cancelled, it leaves the queue at once but is not counted as
 * cancelled until the reading is renewed: here by a restart, whose first scrape reads it. */
static void test_metrics_history(struct harness *h)
{
	json_t *cfg = h_config("ops_history", 10), *job = h_submit(h, cfg, NULL), *c = NULL;
	char *id = h_id(job, "id"), *t0 = h_scrape(h), *t1 = NULL, *t2 = NULL, *t3 = NULL;
	long st = 0;

	if (!h_ok(h, id && t0, "a job submitted, /metrics read"))
		goto out;
	h_ok(h, h_sample(t0, "rung_jobs{state=\"queued\"}") == 1 && h_sample(t0, "rung_queue_depth") == 1,
	     "the queued job shows at once (live counts)");
	h_ok(h, h_sample(t0, "rung_metrics_history_age_seconds") >= 0 && h_sample(t0, "rung_metrics_history_age_seconds") < 600,
	     "the history's counts say how old they are (%.3f s)", h_sample(t0, "rung_metrics_history_age_seconds"));
	{
		/* its floor raised above every GPU (as requeue_bigger does; the only GPU here has 24576 MiB):
		 * the job's placement counts none, /metrics counts it unplaceable, the page says why it waits */
		const char *p[1] = { id };
		char *cookie = xasprintf("Cookie: rung_token=%s", h->admin_token), *path = xasprintf("/ui/jobs/%s", id);
		const char *hdr[] = { cookie, NULL };
		char *jpath = xasprintf("/v1/jobs/%s", id), *t;
		json_t *j = h_get(h, jpath, &st);

		h_ok(h, j && h_int(json_object_get(j, "placement"), "gpus") == 1, "a queued job without a floor: one GPU can take it");
		json_decref(j);
		json_decref(h_request(h, "GET", path, NULL, 0, hdr, &st));
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "<dt>waiting</dt><dd class=\"reason\">waiting its turn: "
							    "no job ahead of it in the queue</dd>"),
		     "the web job page gives its place in the queue: first");
		PQclear(h_sql(h, "UPDATE jobs SET constraints = '{\"min_gpu_memory_mib\": 81920}' WHERE id = $1::bigint", 1, p));
		j = h_get(h, jpath, &st);
		h_ok(h, j && h_int(json_object_get(j, "placement"), "gpus") == 0 &&
			     h_int(json_object_get(j, "placement"), "fleet_max_gpu_mib") == 24576,
		     "with a floor of 80 GiB: none can, the largest has 24576 MiB");
		json_decref(j);
		t = h_scrape(h);
		h_ok(h, t && h_sample(t, "rung_queue_unplaceable") == 1, "/metrics: one queued job unplaceable");
		free(t);
		json_decref(h_request(h, "GET", path, NULL, 0, hdr, &st));
		h_ok(h, st == 200 && h->last_body &&
			     strstr(h->last_body, "waiting for a GPU: none of the usable GPUs on live workers meets its "
						  "constraints (at least 81920 MiB; the largest has 24576 MiB); no job ahead of it in the queue"),
		     "the web job page says why it waits, and its place in the queue");
		free(jpath);
		free(path);
		free(cookie);
	}
	c = h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id);
	h_ok(h, st == 200, "the job cancelled (status %ld)", st);
	t1 = h_scrape(h);
	h_ok(h, t1 && h_sample(t1, "rung_queue_depth") == 0 && h_sample(t1, "rung_jobs{state=\"queued\"}") == 0,
	     "it left the queue at once");
	h_ok(h, t1 && h_sample(t1, "rung_jobs{state=\"cancelled\"}") == h_sample(t0, "rung_jobs{state=\"cancelled\"}") &&
		     h_sample(t1, "rung_metrics_history_age_seconds") >= h_sample(t0, "rung_metrics_history_age_seconds"),
	     "the history's counts are the kept reading: no cancelled job yet (%.0f), as old as before or older",
	     t1 ? h_sample(t1, "rung_jobs{state=\"cancelled\"}") : -1);
	t2 = h_scrape(h);
	h_ok(h, t2 && h_sample(t2, "rung_attempts_total{outcome=\"succeeded\",class=\"success\"}") == 1 &&
		     h_sample(t2, "rung_database_up") == 1,
	     "a scrape from the kept reading still carries every history count");
	if (!h_ok(h, h_server_stop(h, SIGTERM) == 0 && h_server_restart(h) == 0, "rungd restarted"))
		goto out;
	t3 = h_scrape(h);
	h_ok(h, t3 && h_sample(t3, "rung_jobs{state=\"cancelled\"}") == h_sample(t0, "rung_jobs{state=\"cancelled\"}") + 1,
	     "a new process reads the history afresh: the cancelled job counted");
out:
	json_decref(c);
	json_decref(job);
	json_decref(cfg);
	free(id);
	free(t0);
	free(t1);
	free(t2);
	free(t3);
}

struct old_left_arg {
	struct harness *h;
	const char *name;
};

/* No job of that name is left. */
static bool old_gone(void *arg)
{
	struct old_left_arg *o = arg;

	return h_sql_int(o->h, "SELECT count(*) FROM jobs WHERE name = $1", 1, (const char *[]){ o->name }) == 0;
}

/* Retention (--retain-days 30 and --prune-interval-ms of an hour here): a restart prunes at once, and
 * a full batch (500) is followed by the next at once, so 501 jobs that ended 39 days ago all go,
 * with their attempts and events, long before the interval; one that ended now stays, and so do
 * the jobs before them (their ends are recent). Without the start-up run nothing would go for an
 * hour; without the chaining one job would stay. */
static void test_retention(struct harness *h)
{
	json_t *cfg = h_config("ops_retention", 10), *old = h_submit(h, cfg, NULL), *fresh = NULL;
	char *old_id = h_id(old, "id"), *fresh_id = NULL, *path = NULL, *t = NULL;
	struct old_left_arg o = { h, "ops_retention_old" };
	long st = 0;
	long long before;

	if (!h_ok(h, old_id != NULL, "a job submitted"))
		goto out;
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", old_id));
	{
		const char *p[1] = { old_id };
		/* it and 500 more ended 39 days ago, created 40 days ago; the jobs before them (ids grow with
		 * creation, which the search relies on) were created earlier still, each keeping its end */
		PQclear(h_sql(h, "UPDATE jobs SET created_at = now() - interval '41 days' WHERE id < $1::bigint", 1, p));
		PQclear(h_sql(h, "UPDATE jobs SET name = 'ops_retention_old', created_at = now() - interval '40 days', "
				 "finished_at = now() - interval '39 days' WHERE id = $1::bigint", 1, p));
		PQclear(h_sql(h, "INSERT INTO jobs (name, kind, state, target_config, recovery, created_at, finished_at) "
				 "SELECT 'ops_retention_old', 'image', 'cancelled', '{\"x\":1}', '{}', now() - interval '40 days', "
				 "now() - interval '39 days' FROM generate_series(1, 500)", 0, NULL));
	}
	fresh = h_submit(h, cfg, NULL);
	fresh_id = h_id(fresh, "id");
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", fresh_id ? fresh_id : "0"));
	before = h_sql_int(h, "SELECT count(*) FROM jobs WHERE name <> 'ops_retention_old'", 0, NULL);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs WHERE name = 'ops_retention_old'", 0, NULL) == 501,
	     "501 jobs ended 39 days ago, then one that ended now");
	if (!h_ok(h, h_server_stop(h, SIGTERM) == 0 && h_server_restart(h) == 0, "rungd restarted"))
		goto out;
	h_ok(h, wait_until(old_gone, &o, 20000 * h_slow()), "all 501 are deleted at once (the interval is an hour)");
	{
		const char *p[1] = { old_id };
		h_ok(h, h_sql_int(h, "SELECT (SELECT count(*) FROM attempts WHERE job_id = $1::bigint) + "
				  "(SELECT count(*) FROM event_log WHERE job_id = $1::bigint)", 1, p) == 0,
		     "with their attempts and events");
	}
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == before, "every other job stays");
	path = xasprintf("/v1/jobs/%s", fresh_id ? fresh_id : "0");
	json_decref(h_get(h, path, &st));
	h_ok(h, st == 200, "the job that ended now stays (status %ld)", st);
	t = h_scrape(h);
	h_ok(h, t && h_sample(t, "rung_retention_pruned_jobs_total") == 501, "/metrics counts the 501 pruned jobs");
out:
	json_decref(old);
	json_decref(fresh);
	json_decref(cfg);
	free(old_id);
	free(fresh_id);
	free(path);
	free(t);
}

static void test_metrics(struct harness *h, const char *wid, const json_t *oom)
{
	json_t *cfg = h_config("ops_metrics", 10), *r;
	json_t *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0), *job = h_submit(h, cfg, extra);
	json_t *ok_facts = h_facts_success(10);
	char *id = h_id(job, "id");
	const char *saved;
	long st = 0;
	char *text;

	if (!h_ok(h, id != NULL, "metrics job submitted"))
		goto out;
	json_decref(run_attempt(h, wid, oom));
	json_decref(run_attempt(h, wid, ok_facts));
	r = h_wait_job(h, id, "succeeded", 10000);
	if (!h_ok(h, r != NULL, "metrics job succeeded"))
		goto out;
	json_decref(r);

	saved = h->auth_token;
	h->auth_token = NULL;
	r = h_get(h, "/metrics", &st);
	json_decref(r);
	h_ok(h, st == 401, "/metrics without a token is refused (status %ld)", st);
	h->auth_token = h->submitter_token;
	r = h_get(h, "/metrics", &st);
	json_decref(r);
	h_ok(h, st == 403, "/metrics with a submitter token is refused (status %ld)", st);
	h->auth_token = saved;

	r = h_get(h, "/metrics", &st);
	json_decref(r);
	text = xstrdup(h->last_body ? h->last_body : "");
	h_ok(h, st == 200, "/metrics answers 200 to an admin (status %ld)", st);
	h_ok(h, strstr(text, "# TYPE rung_jobs gauge\n") != NULL, "TYPE line for rung_jobs");
	h_ok(h, h_sample(text, "rung_database_up") == 1, "database counts present");
	h_ok(h, h_sample(text, "rung_jobs{state=\"succeeded\"}") == 1, "one succeeded job");
	h_ok(h, h_sample(text, "rung_attempts_total{outcome=\"failed\",class=\"oom_train_early\"}") == 1,
	     "one failed attempt of class oom_train_early");
	h_ok(h, h_sample(text, "rung_attempts_total{outcome=\"succeeded\",class=\"success\"}") == 1,
	     "one succeeded attempt");
	{
		/* GPU seconds: what the attempts' rows say, by class and per owner (the OOM's owner) */
		long long oom_ms = h_sql_int(h, "SELECT round(1000 * sum(extract(epoch FROM ended_at - started_at))) "
					     "FROM attempts WHERE class = 'oom_train_early'", 0, NULL);
		long long ok_ms = h_sql_int(h, "SELECT round(1000 * sum(extract(epoch FROM ended_at - started_at))) "
					    "FROM attempts WHERE outcome = 'succeeded'", 0, NULL);
		json_t *owner = h_request(h, "GET", "/v1/jobs?limit=1", NULL, 0, NULL, &st);
		const char *who = h_str(json_array_get(json_object_get(owner, "jobs"), 0), "owner");
		char *series = xasprintf("rung_owner_gpu_seconds_total{owner=\"%s\",outcome=\"oom\"}", who ? who : "?");
		double by_class = h_sample(text, "rung_attempt_gpu_seconds_total{outcome=\"failed\",class=\"oom_train_early\"}");
		double by_owner = h_sample(text, series);
		double ok_s = h_sample(text, "rung_attempt_gpu_seconds_total{outcome=\"succeeded\",class=\"success\"}");
		h_ok(h, oom_ms > 0 && llround(by_class * 1000) == oom_ms && llround(by_owner * 1000) == oom_ms &&
			     ok_ms > 0 && llround(ok_s * 1000) == ok_ms,
		     "GPU seconds by outcome and class and per owner: the OOM's %.3f s (%s), the success's %.3f s", by_class,
		     series, ok_s);
		free(series);
		json_decref(owner);
	}
	h_ok(h, strstr(text, "rung_rungs_applied_total{rung=\"") != NULL, "a rung applied is counted by name");
	h_ok(h, h_sample(text, "rung_lease_wait_seconds_count") == 2, "two queued->leased waits");
	h_ok(h, h_sample(text, "rung_lease_wait_seconds_bucket{le=\"+Inf\"}") == 2, "+Inf bucket equals the count");
	h_ok(h, h_sample(text, "rung_queue_depth") == 0, "queue empty");
	h_ok(h, h_sample(text, "rung_gpus{state=\"ok\"}") == 1, "one GPU ok");
	h_ok(h, h_sample(text, "rung_http_request_duration_seconds_count{route=\"/v1/jobs/{}\",method=\"GET\",status=\"2xx\"}") >= 1,
	     "HTTP histogram keyed by the route pattern");
	h_ok(h, h_sample(text, "rung_http_request_duration_seconds_count{route=\"/metrics\",method=\"GET\",status=\"4xx\"}") == 2,
	     "refused /metrics requests counted as 4xx");
	h_ok(h, h_sample(text, "rung_db_connections{state=\"busy\"}") >= 0 && h_sample(text, "rung_lease_waiters") == 0,
	     "pool and parked long-poll gauges present");
	if (h->failed)
		h_diag("metrics:\n%s", text);
	free(text);
out:
	free(id);
	json_decref(ok_facts);
	json_decref(job);
	json_decref(extra);
	json_decref(cfg);
}

static void test_webhook(struct harness *h, const char *wid, const json_t *oom, struct receiver *rc)
{
	json_t *cfg = h_config("ops_escalate", 10);
	json_t *extra = json_pack("{s:{s:i}, s:{s:s}}", "recovery", "max_attempts", 1, "labels", "team", "vision");
	json_t *job = h_submit(h, cfg, extra), *done = NULL, *body = NULL, *r;
	char *id = h_id(job, "id"), *esc = NULL, *want;
	struct sql_wait retried = { h, "SELECT coalesce(max(attempts), 0) FROM webhook_outbox WHERE delivered_at IS NULL "
				       "AND last_status = 0", 2 };
	struct sql_wait delivered = { h, "SELECT count(*) FROM webhook_outbox WHERE delivered_at IS NOT NULL", 1 };
	struct recv_wait two = { rc, 2 };
	long st = 0;

	if (!h_ok(h, id != NULL, "escalating job submitted"))
		goto out;
	done = run_attempt(h, wid, oom);
	esc = h_id(done, "escalation_id");
	if (!h_ok(h, esc != NULL, "the finish opened an escalation"))
		goto out;
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM webhook_outbox", 0, NULL) == 1,
	     "the outbox row was written with the escalation");

	r = h_get(h, "/metrics", &st);
	json_decref(r);
	h_ok(h, h_sample(h->last_body, "rung_escalations{state=\"open\"}") == 1, "metrics: one open escalation");
	h_ok(h, h_sample(h->last_body, "rung_webhook_pending") == 1, "metrics: one webhook pending");

	/* the receiver is not listening: each try is refused and rescheduled */
	h_ok(h, wait_until(sql_reaches, &retried, 15000), "refused delivery retried with backoff");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM webhook_outbox WHERE delivered_at IS NULL AND next_attempt_at > created_at",
			  0, NULL) == 1, "next try scheduled later");

	/* rungd dies without a chance to clean up; the row must survive */
	h_ok(h, h_server_stop(h, SIGKILL) == 0, "rungd killed");
	if (!h_ok(h, recv_start(rc) == 0, "receiver listening on port %d", rc->port))
		goto out;
	h_ok(h, h_server_restart(h) == 0, "rungd restarted");
	/* the receiver answers 503 once: not delivered, retried, then 204 */
	h_ok(h, wait_until(recv_has, &two, 20000), "receiver got the POST again after a 503 (%d)", recv_count(rc));
	h_ok(h, wait_until(sql_reaches, &delivered, 5000), "outbox row marked delivered after the 2xx");
	h_ok(h, h_sql_int(h, "SELECT last_status FROM webhook_outbox", 0, NULL) == 204, "last status 204 recorded");

	pthread_mutex_lock(&rc->mu);
	body = rc->bodies[1] ? json_loads(rc->bodies[1], 0, NULL) : NULL;
	h_ok(h, rc->paths[1] && strcmp(rc->paths[1], "/hook") == 0, "POSTed to the configured path");
	pthread_mutex_unlock(&rc->mu);
	{
		char *got_esc = h_id(body, "escalation_id"), *got_job = h_id(body, "job_id");
		h_ok(h, got_esc && !strcmp(got_esc, esc), "payload escalation_id");
		h_ok(h, got_job && !strcmp(got_job, id), "payload job_id");
		h_ok(h, !strcmp(h_str(body, "trigger"), "budget_exhausted"), "payload trigger (%s)", h_str(body, "trigger"));
		h_ok(h, *h_str(body, "summary") && *h_str(body, "recommendation"), "payload summary and recommendation");
		h_ok(h, !strcmp(h_str(json_object_get(body, "labels"), "team"), "vision"), "payload: the job's labels");
		want = xasprintf("/v1/escalations/%s", esc);
		h_ok(h, !strcmp(h_str(body, "report"), want), "payload report link %s", h_str(body, "report"));
		free(want);
		want = xasprintf("/ui/escalations/%s", esc);
		h_ok(h, !strcmp(h_str(body, "ui"), want), "payload UI link %s", h_str(body, "ui"));
		free(want);
		free(got_esc);
		free(got_job);
	}
	if (h->failed)
		h_diag_json("webhook body", body);
out:
	json_decref(body);
	free(esc);
	free(id);
	json_decref(done);
	json_decref(job);
	json_decref(extra);
	json_decref(cfg);
}

/* ---- each config stored once (migrations/006_config_once.sql) ---- */

/* 1 when the job's row (sql: a count over jobs/attempts for $1 = job id) holds, else 0. */
static long long job_sql(struct harness *h, const char *id, const char *sql)
{
	const char *params[] = { id };

	return h_sql_int(h, sql, 1, params);
}

/* A job whose config is stepped down by the ladder and scaled back up: the rows store a config
 * only where it differs from the target, and the API shows the same documents as before. */
static void test_config_once(struct harness *h, const char *wid, const json_t *oom)
{
	json_t *cfg = h_config("ops_config_once", 10), *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 1);
	json_t *job = h_submit(h, cfg, extra), *ok = h_facts_success(10);
	json_t *r = NULL, *target, *lease = NULL, *done;
	char *id = h_id(job, "id"), *aid = NULL;
	long st = 0;
	int n;

	if (!h_ok(h, id != NULL, "config-once job submitted"))
		goto out;
	target = json_object_get(job, "target_config");
	h_ok(h, json_equal(json_object_get(job, "current_config"), target),
	     "submit reply: current_config is the target");
	h_ok(h, job_sql(h, id, "SELECT count(*) FROM jobs WHERE id = $1::bigint AND current_config IS NULL") == 1,
	     "the row stores no copy of the target as current_config");

	lease = h_fake_lease(h, wid, GPU, 5000, &st);
	aid = h_id(lease, "attempt_id");
	if (!h_ok(h, aid != NULL, "attempt 1 leased (status %ld)", st))
		goto out;
	h_ok(h, json_equal(json_object_get(lease, "config"), target), "the lease carries the full target config");
	h_ok(h, job_sql(h, aid, "SELECT count(*) FROM attempts WHERE id = $1::bigint AND config IS NULL") == 1,
	     "attempt 1 (the target) stores no config copy");
	done = h_fake_finish(h, aid, h_str(lease, "token"), oom, &st);
	json_decref(done);
	h_ok(h, st == 200, "attempt 1 finished with an OOM (status %ld)", st);

	r = h_job(h, id);
	h_ok(h, r && !json_equal(json_object_get(r, "current_config"), target) &&
		     json_is_object(json_object_get(r, "current_config")),
	     "after a rung the current config differs from the target");
	h_ok(h, job_sql(h, id, "SELECT count(*) FROM jobs WHERE id = $1::bigint AND current_config IS NOT NULL") == 1,
	     "the stepped-down config is stored");
	json_decref(r);
	r = NULL;

	/* success at the rung, then scale-up attempts until the job ends (bounded) */
	for (n = 0; n < 8; n++) {
		json_t *j = h_job(h, id);
		bool ended = j && strcmp(h_str(j, "state"), "queued") && strcmp(h_str(j, "state"), "running");

		json_decref(j);
		if (ended)
			break;
		json_decref(run_attempt(h, wid, ok));
	}
	r = h_wait_job(h, id, "succeeded", 10000);
	if (!h_ok(h, r != NULL, "config-once job succeeded after %d more attempts", n))
		goto out;
	h_ok(h, job_sql(h, id, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint AND number = 2 "
			       "AND config IS NOT NULL") == 1,
	     "attempt 2 (the stepped-down config) stores its config");
	h_ok(h, json_equal(json_object_get(r, "current_config"), target) ==
			(job_sql(h, id, "SELECT count(*) FROM jobs WHERE id = $1::bigint AND current_config IS NULL") == 1),
	     "current_config is stored as NULL exactly when it is the target again");
	h_ok(h, json_is_object(json_object_get(json_object_get(r, "result"), "config")),
	     "the result names the config that succeeded");
	if (job_sql(h, id, "SELECT count(*) FROM jobs WHERE id = $1::bigint AND NOT result ? 'config'") == 1)
		h_ok(h, json_equal(json_object_get(json_object_get(r, "result"), "config"), target),
		     "a result stored without a config shows the target");
	else
		h_diag("the last success ran a stepped-down config: the result stores it");
	json_decref(r);
	r = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
	{
		json_t *items = json_object_get(r, "attempts"), *a;
		size_t i;
		bool all = json_array_size(items) >= 2;

		json_array_foreach(items, i, a)
			all = all && json_is_object(json_object_get(a, "config"));
		h_ok(h, st == 200 && all, "every attempt in the API carries its config (status %ld)", st);
		a = json_array_get(items, 0);
		h_ok(h, json_equal(json_object_get(a, "config"), target), "attempt 1's config is the target");
	}
out:
	json_decref(r);
	json_decref(lease);
	json_decref(ok);
	json_decref(job);
	json_decref(extra);
	json_decref(cfg);
	free(aid);
	free(id);
}

/* ---- retry (POST /v1/jobs/{id}/retry, sql/functions/22_job_ops.sql) ---- */

/* Leases on GPU and checks the lease is job id's; finishes it with facts. The finish answer or NULL. */
static json_t *attempt_of(struct harness *h, const char *wid, const char *id, const json_t *facts)
{
	long st = 0;
	json_t *lease = h_fake_lease(h, wid, GPU, 5000, &st), *done = NULL;
	char *aid = h_id(lease, "attempt_id"), *jid = h_id(lease, "job_id");

	if (!h_ok(h, aid && jid && !strcmp(jid, id), "job %s leased (got %s, status %ld)", id, jid ? jid : "none", st))
		goto out;
	done = h_fake_finish(h, aid, h_str(lease, "token"), facts, &st);
	h_ok(h, st == 200, "finish accepted (status %ld)", st);
out:
	free(aid);
	free(jid);
	json_decref(lease);
	return done;
}

/* The job_state of a finish answer's decision ("" when absent). */
static const char *decided(const json_t *done)
{
	return h_str(json_object_get(done, "decision"), "job_state");
}

/* A job that spent its budget (max_attempts 2: two OOMs) fails and escalates; support retries it:
 * it is queued again where recovery stopped, its escalation resolved with the note, and the next
 * OOM is answered with the next rung, not with the spent budget (without budget_from the third
 * attempt would fail the job at once). Retrying a queued or succeeded job is a 409; bad fields a
 * 400 naming them; a worker may not retry (403), a submitter only its own jobs (404 otherwise).
 * A retry from the target starts the config and the constraints over. */
static void test_retry(struct harness *h, const char *wid, const json_t *oom)
{
	json_t *cfg = h_config("ops_retry", 10), *ok = h_facts_success(10);
	json_t *extra = json_pack("{s:{s:i, s:b}}", "recovery", "max_attempts", 2, "scale_up", 0);
	json_t *job = h_submit(h, cfg, extra), *done = NULL, *r = NULL, *before = NULL, *body = NULL;
	char *id = h_id(job, "id"), *esc = NULL, *big = NULL, *path = NULL;
	const char *saved = h->auth_token;
	long st = 0;

	if (!h_ok(h, id != NULL, "retry: job submitted (max_attempts 2)"))
		goto out;
	done = attempt_of(h, wid, id, oom);
	h_ok(h, !strcmp(decided(done), "queued"), "attempt 1's OOM: the next rung (%s)", decided(done));
	json_decref(done);
	done = attempt_of(h, wid, id, oom);
	esc = h_id(done, "escalation_id");
	if (!h_ok(h, !strcmp(decided(done), "failed") && esc, "attempt 2's OOM spends the budget: failed, escalated"))
		goto out;
	before = h_job(h, id);
	path = xasprintf("/v1/jobs/%s/retry", id);

	body = json_pack("{s:s}", "from", "bottom");
	r = h_post(h, path, body, &st);
	h_ok(h, st == 400 && !strcmp(h_str(r, "field"), "from"), "from \"bottom\": 400 naming from (%ld)", st);
	json_decref(r);
	json_decref(body);
	big = xmalloc(5000);
	memset(big, 'n', 4999);
	big[4999] = '\0';
	body = json_pack("{s:s}", "note", big);
	r = h_post(h, path, body, &st);
	h_ok(h, st == 400 && !strcmp(h_str(r, "field"), "note"), "a 4999-byte note: 400 naming note (%ld)", st);
	json_decref(r);
	json_decref(body);
	r = h_post(h, "/v1/jobs/987654321/retry", NULL, &st);
	h_ok(h, st == 404, "an unknown job: 404 (%ld)", st);
	json_decref(r);
	h->auth_token = h->worker_token;
	r = h_post(h, path, NULL, &st);
	h_ok(h, st == 403, "a worker token may not retry (%ld)", st);
	json_decref(r);
	h->auth_token = h->submitter_token;
	r = h_post(h, path, NULL, &st);
	h_ok(h, st == 404, "a submitter may not retry another's job (%ld)", st);
	json_decref(r);
	h->auth_token = saved;
	r = h_job(h, id);
	h_ok(h, !strcmp(h_str(r, "state"), "failed"), "after the refusals the job is still failed (%s)", h_str(r, "state"));
	json_decref(r);

	body = json_pack("{s:s, s:s}", "from", "current", "note", "GPU swapped");
	r = h_post(h, path, body, &st);
	json_decref(body);
	body = NULL;
	h_ok(h, st == 200 && !strcmp(h_str(r, "state"), "queued"), "retried: 200, queued (%ld %s)", st, h_str(r, "state"));
	h_ok(h, json_equal(json_object_get(r, "current_config"), json_object_get(before, "current_config")) &&
		     !json_equal(json_object_get(r, "current_config"), json_object_get(r, "target_config")),
	     "from current: the config recovery had reached stays");
	h_ok(h, h_int(json_object_get(r, "recovery_state"), "budget_from") == 2 &&
		     !strcmp(h_str(json_object_get(json_object_get(r, "recovery_state"), "retried"), "note"), "GPU swapped") &&
		     json_is_null(json_object_get(r, "result")) && json_is_null(json_object_get(r, "finished_at")),
	     "budget_from 2, the note kept, result and finished_at cleared");
	json_decref(r);
	{
		char *cookie = xasprintf("Cookie: rung_token=%s", h->admin_token), *page = xasprintf("/ui/jobs/%s", id);
		const char *hdr[] = { cookie, NULL };
		json_decref(h_request(h, "GET", page, NULL, 0, hdr, &st));
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "<dt>retried</dt><dd>retried by it-admin from the current "
									"config after it was failed; budgets count from attempt 3: GPU swapped"),
		     "the web page says who retried it, from what and why");
		free(cookie);
		free(page);
	}
	r = h_getf(h, &st, "/v1/escalations/%s", esc);
	h_ok(h, !strcmp(h_str(r, "state"), "resolved") && strstr(h_str(r, "note"), "GPU swapped"),
	     "its escalation is resolved with the note (%s: %s)", h_str(r, "state"), h_str(r, "note"));
	json_decref(r);
	{
		const char *p[1] = { id };
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM events WHERE job_id = $1::bigint AND kind = 'retried' "
				     "AND from_state = 'failed' AND to_state = 'queued'", 1, p) == 1,
		     "an event retried (failed -> queued)");
	}
	r = h_post(h, path, NULL, &st);
	h_ok(h, st == 409 && !strcmp(h_str(r, "error"), "invalid_transition"), "a queued job: 409 invalid_transition (%ld)",
	     st);
	json_decref(r);

	json_decref(done); /* attempt 2's */
	done = attempt_of(h, wid, id, oom);
	h_ok(h, !strcmp(decided(done), "queued") && *h_str(json_object_get(done, "decision"), "rung"),
	     "attempt 3's OOM: the next rung, the budget counts from the retry (%s, %s)", decided(done),
	     h_str(json_object_get(done, "decision"), "rung"));
	json_decref(done);
	done = attempt_of(h, wid, id, ok);
	h_ok(h, !strcmp(decided(done), "succeeded"), "attempt 4 succeeds (%s)", decided(done));
	r = h_post(h, path, NULL, &st);
	h_ok(h, st == 409 && strstr(h_str(r, "message"), "submit it again"), "a succeeded job: 409 (%ld: %s)", st,
	     h_str(r, "message"));
	json_decref(r);
	json_decref(done);
	done = NULL;

	/* from the target: a job failed at its first attempt starts over; its owner may retry it */
	json_decref(job);
	free(id);
	free(path);
	h->auth_token = h->submitter_token;
	json_object_set_new(json_object_get(extra, "recovery"), "max_attempts", json_integer(1));
	job = h_submit(h, cfg, extra);
	id = h_id(job, "id");
	path = xasprintf("/v1/jobs/%s/retry", id);
	h->auth_token = saved;
	if (!h_ok(h, id != NULL, "a submitter's job (max_attempts 1)"))
		goto out;
	done = attempt_of(h, wid, id, oom);
	h_ok(h, !strcmp(decided(done), "failed"), "its first OOM fails it (%s)", decided(done));
	{
		const char *p[1] = { id };
		PQclear(h_sql(h, "UPDATE jobs SET current_config = jsonb_set(target_config, '{config,process,0,train,batch_size}', "
				 "'7'), constraints = '{\"min_gpu_memory_mib\": 30000}' WHERE id = $1::bigint", 1, p));
	}
	h->auth_token = h->submitter_token;
	body = json_pack("{s:s}", "from", "target");
	r = h_post(h, path, body, &st);
	h->auth_token = saved;
	h_ok(h, st == 200 && !strcmp(h_str(r, "state"), "queued"), "its owner retries it from the target (%ld)", st);
	h_ok(h, json_equal(json_object_get(r, "current_config"), json_object_get(r, "target_config")) &&
		     json_object_size(json_object_get(r, "constraints")) == 0 &&
		     h_int(json_object_get(r, "recovery_state"), "budget_from") == 1,
	     "from the target: the submitted config, no constraints, budget_from 1");
	json_decref(r);
	r = h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id);
	h_ok(h, st == 200 && !strcmp(h_str(r, "state"), "cancelled"), "cancelled while queued");
	json_decref(r);
	r = h_post(h, path, NULL, &st);
	h_ok(h, st == 200 && !strcmp(h_str(r, "state"), "queued") &&
		     !strcmp(h_str(json_object_get(json_object_get(r, "recovery_state"), "retried"), "previous_state"), "cancelled"),
	     "a cancelled job can be retried (%ld)", st);
	json_decref(r);
	r = h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id);
	json_decref(r);
out:
	h->auth_token = saved;
	json_decref(body);
	json_decref(done);
	json_decref(before);
	json_decref(job);
	json_decref(extra);
	json_decref(ok);
	json_decref(cfg);
	free(big);
	free(esc);
	free(path);
	free(id);
}

/* ---- priority (POST /v1/jobs/{id}/priority, sql/functions/22_job_ops.sql) ---- */

/* Two jobs at the default priority: the newer one, raised to 10, is leased first; the event says
 * from what to what and who. A bad priority is a 400 naming it, an ended job a 409, a worker a 403. */
static void test_priority(struct harness *h, const char *wid)
{
	json_t *cfg = h_config("ops_priority", 10), *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0);
	json_t *a = h_submit(h, cfg, extra), *b = h_submit(h, cfg, extra), *r = NULL, *body = NULL, *ok = h_facts_success(10);
	char *ida = h_id(a, "id"), *idb = h_id(b, "id"), *path = NULL;
	const char *saved = h->auth_token;
	long st = 0;

	if (!h_ok(h, ida && idb, "priority: two jobs queued at 100"))
		goto out;
	path = xasprintf("/v1/jobs/%s/priority", idb);
	body = json_pack("{s:s}", "priority", "high");
	r = h_post(h, path, body, &st);
	h_ok(h, st == 400 && !strcmp(h_str(r, "field"), "priority"), "priority \"high\": 400 naming priority (%ld)", st);
	json_decref(r);
	json_decref(body);
	body = json_pack("{s:i}", "priority", 2000000);
	r = h_post(h, path, body, &st);
	h_ok(h, st == 400 && !strcmp(h_str(r, "field"), "priority"), "priority 2000000: 400 (%ld)", st);
	json_decref(r);
	json_decref(body);
	body = json_pack("{s:i}", "priority", 10);
	h->auth_token = h->worker_token;
	r = h_post(h, path, body, &st);
	h_ok(h, st == 403, "a worker may not reprioritize (%ld)", st);
	json_decref(r);
	h->auth_token = saved;
	r = h_post(h, path, body, &st);
	h_ok(h, st == 200 && h_int(r, "priority") == 10 && !strcmp(h_str(r, "state"), "queued"), "the newer job raised to 10 (%ld)",
	     st);
	json_decref(r);
	{
		const char *p[1] = { idb };
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM events WHERE job_id = $1::bigint AND kind = 'priority_changed' "
				     "AND data->>'from' = '100' AND data->>'to' = '10' AND data->>'by' = 'it-admin'", 1, p) == 1,
		     "an event priority_changed 100 -> 10 by it-admin");
	}
	{
		json_t *done = attempt_of(h, wid, idb, ok);
		h_ok(h, !strcmp(decided(done), "succeeded"), "the raised job is leased before the older one");
		json_decref(done);
		done = attempt_of(h, wid, ida, ok);
		json_decref(done);
	}
	r = h_post(h, path, body, &st);
	h_ok(h, st == 409 && !strcmp(h_str(r, "error"), "invalid_transition"), "an ended job: 409 (%ld)", st);
	json_decref(r);
out:
	h->auth_token = saved;
	free(path);
	free(ida);
	free(idb);
	json_decref(body);
	json_decref(a);
	json_decref(b);
	json_decref(ok);
	json_decref(extra);
	json_decref(cfg);
}

/* ---- owner limits (POST /v1/tokens/{id}/limits, migration 020) ---- */

struct sent_wait {
	struct harness *h;
	double before; /* rung_lease_notifies_total{event="sent"} before the change */
};

static bool notify_sent(void *arg)
{
	struct sent_wait *w = arg;
	char *m = h_scrape(w->h);
	double now = m ? h_sample(m, "rung_lease_notifies_total{event=\"sent\"}") : -1;

	free(m);
	return now > w->before;
}

/* The id of the submitter's token (heap), or NULL. */
static char *submitter_id(struct harness *h)
{
	PGresult *q = h_sql(h, "SELECT id FROM tokens WHERE name = 'it-submitter'", 0, NULL);
	char *id = q && PQntuples(q) == 1 ? xstrdup(PQgetvalue(q, 0, 0)) : NULL;

	PQclear(q);
	return id;
}

struct bad_body {
	const char *body, *field;
};

/* POSTs each of the n bodies to path: each must be a 400 naming its field ("WHAT: BODY is a 400 ..."). */
static void post_bad(struct harness *h, const char *what, const char *path, const struct bad_body *bad, size_t n)
{
	long st = 0;

	for (size_t i = 0; i < n; i++) {
		json_t *r = h_request(h, "POST", path, bad[i].body, strlen(bad[i].body), NULL, &st);
		h_ok(h, st == 400 && !strcmp(h_str(r, "field"), bad[i].field), "%s: %s is a 400 naming %s (%ld)", what,
		     bad[i].body, bad[i].field, st);
		json_decref(r);
	}
}

/* The submitter submits two jobs (*a, *b: the submit answers, new references); the first is leased on
 * wid's GPU and the second is not on w2's gpu2, a free GPU ("WHAT: ..." checks). Returns the first's
 * lease (new reference) or NULL. */
static json_t *first_runs_second_waits(struct harness *h, const char *what, json_t *cfg, json_t *extra, const char *wid,
				       const char *w2, const char *gpu2, json_t **a, json_t **b)
{
	const char *saved = h->auth_token;
	json_t *lease, *r;
	char *ida, *jid;
	long st = 0;

	h->auth_token = h->submitter_token;
	*a = h_submit(h, cfg, extra);
	*b = h_submit(h, cfg, extra);
	h->auth_token = saved;
	lease = h_fake_lease(h, wid, GPU, 5000, &st);
	ida = h_id(*a, "id");
	jid = h_id(lease, "job_id");
	h_ok(h, jid && ida && !strcmp(jid, ida), "%s: the first job leased (%s)", what, jid ? jid : "none");
	free(jid);
	free(ida);
	r = h_fake_lease(h, w2, gpu2, 300, &st);
	h_ok(h, st == 204, "%s: a free GPU gets nothing while the first runs (%ld)", what, st);
	json_decref(r);
	return lease;
}

/* The admin caps the submitter at one running job: its second job waits while the first runs, on a
 * free GPU, and says why; it runs once the first ended. Bad bodies are 400s naming max_running, an
 * unknown token a 404, a worker may not (403); lifted with null. */
static void test_owner_limit(struct harness *h, const char *wid)
{
	json_t *cfg = h_config("ops_limit", 10), *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0);
	json_t *a = NULL, *b = NULL, *r = NULL, *body = NULL, *lease = NULL, *done = NULL, *ok = h_facts_success(10);
	char *tid = NULL, *ida = NULL, *idb = NULL, *path = NULL, *w2 = h_fake_register(h, "ops-lim", "GPU-lim-2", 24576);
	const char *saved = h->auth_token;
	long st = 0;

	tid = submitter_id(h);
	if (!h_ok(h, tid && w2 && h_sql_int(h, "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')", 0, NULL) == 0,
		  "limits: the submitter's token, a second GPU, an empty queue"))
		goto out;
	path = xasprintf("/v1/tokens/%s/limits", tid);
	{
		static const char *const bad[] = { "{\"max_running\": -1}", "{\"max_running\": \"2\"}", "{}",
						   "{\"max_running\": 1.5}", "{\"max_running\": true}" };
		for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
			r = h_request(h, "POST", path, bad[i], strlen(bad[i]), NULL, &st);
			h_ok(h, st == 400 && !strcmp(h_str(r, "field"), "max_running"), "limits: %s is a 400 naming max_running (%ld)",
			     bad[i], st);
			json_decref(r);
		}
	}
	body = json_pack("{s:i}", "max_running", 1);
	r = h_post(h, "/v1/tokens/999999/limits", body, &st);
	h_ok(h, st == 404, "limits: an unknown token is a 404 (%ld)", st);
	json_decref(r);
	h->auth_token = h->worker_token;
	r = h_post(h, path, body, &st);
	h->auth_token = saved;
	h_ok(h, st == 403, "limits: a worker may not set one (%ld)", st);
	json_decref(r);
	r = h_post(h, path, body, &st);
	h_ok(h, st == 200 && h_int(r, "max_running") == 1 && !strcmp(h_str(r, "name"), "it-submitter"),
	     "limits: it-submitter may run 1 job at once (%ld)", st);
	json_decref(r);
	lease = first_runs_second_waits(h, "limits", cfg, extra, wid, w2, "GPU-lim-2", &a, &b);
	ida = h_id(a, "id");
	idb = h_id(b, "id");
	r = idb ? h_job(h, idb) : NULL;
	h_ok(h, jpath_int(r, "placement.owner_max_running", -1) == 1 && jpath_int(r, "placement.owner_running", -1) == 1,
	     "limits: the waiting job's placement: its owner runs 1 of 1");
	json_decref(r);
	{
		char *m = h_scrape(h);
		h_ok(h, m && h_sample(m, "rung_queue_owner_capped") == 1 && h_sample(m, "rung_queue_depth") == 1,
		     "limits: /metrics counts the one queued job that waits for its owner's limit");
		h_ok(h, m && h_sample(m, "rung_owner_jobs{owner=\"it-submitter\",state=\"queued\"}") == 1 &&
			     h_sample(m, "rung_owner_jobs{owner=\"it-submitter\",state=\"running\"}") == 1 &&
			     h_sample(m, "rung_owner_max_running{owner=\"it-submitter\"}") == 1,
		     "limits: /metrics per owner: it-submitter has 1 queued, 1 running, at most 1");
		free(m);
	}
	{
		/* who runs and waits: GET /v1/owners (staff), rungctl owners, the web GPUs page */
		json_t *o = h_get(h, "/v1/owners", &st), *e;
		size_t i;
		bool seen = false;
		int rc = -1;
		char *out;
		json_array_foreach(json_object_get(o, "owners"), i, e)
			seen |= !strcmp(h_str(e, "owner"), "it-submitter") && h_int(e, "running") == 1 && h_int(e, "queued") == 1 &&
				h_int(e, "max_running") == 1;
		h_ok(h, st == 200 && seen, "owners: GET /v1/owners says it-submitter runs 1, waits with 1, at most 1 (%ld)", st);
		json_decref(o);
		h->auth_token = h->submitter_token;
		json_decref(h_get(h, "/v1/owners", &st));
		h->auth_token = saved;
		h_ok(h, st == 403, "owners: a submitter may not read them (%ld)", st);
		out = h_rungctl(h, "owners", &rc);
		h_ok(h, rc == 0 && out && strstr(out, "OWNER") && strstr(out, "it-submitter"), "owners: rungctl owners lists it");
		free(out);
		st = h_browse(h, h->admin_token, "GET", "/ui/gpus", NULL, NULL);
		h_ok(h, st == 200 && h->last_body &&
			     strstr(h->last_body, "it-submitter</a></td><td>1</td><td>1</td><td>0</td><td class=\"limit\">1 <span"),
		     "owners: the GPUs page's owners table, it-submitter at its limit (%ld)", st);
	}
	{
		int rc = -1;
		char *args = xasprintf("show %s", idb ? idb : "0"), *out = h_rungctl(h, args, &rc);
		h_ok(h, rc == 0 && strstr(out, "waiting for its owner's limit: it-submitter runs 1 job, at most 1 at once"),
		     "limits: rungctl show says why it waits");
		if (h->failed)
			h_diag("rungctl show: %s", out);
		free(out);
		free(args);
	}
	{
		char *aid = h_id(lease, "attempt_id");
		done = aid ? h_fake_finish(h, aid, h_str(lease, "token"), ok, &st) : NULL;
		free(aid);
	}
	json_decref(done);
	done = NULL;
	r = h_fake_lease(h, w2, "GPU-lim-2", 5000, &st);
	{
		char *jid = h_id(r, "job_id"), *aid = h_id(r, "attempt_id"), *m = h_scrape(h);
		h_ok(h, m && h_sample(m, "rung_queue_owner_capped") == 0, "limits: then none waits for it in /metrics");
		h_ok(h, m && h_sample(m, "rung_owner_jobs{owner=\"it-submitter\",state=\"queued\"}") == 0 &&
			     h_sample(m, "rung_owner_jobs{owner=\"it-submitter\",state=\"running\"}") == 1,
		     "limits: /metrics per owner: then 0 queued, 1 running");
		free(m);
		h_ok(h, jid && idb && !strcmp(jid, idb), "limits: the first ended, the second runs (%s)", jid ? jid : "none");
		done = aid ? h_fake_finish(h, aid, h_str(r, "token"), ok, &st) : NULL;
		free(jid);
		free(aid);
	}
	json_decref(r);
	json_decref(body);
	body = json_pack("{s:n}", "max_running");
	{
		char *m = h_scrape(h);
		struct sent_wait sw = { h, m ? h_sample(m, "rung_lease_notifies_total{event=\"sent\"}") : -1 };
		free(m);
		r = h_post(h, path, body, &st);
		h_ok(h, st == 200 && json_is_null(json_object_get(r, "max_running")), "limits: lifted with null (%ld)", st);
		json_decref(r);
		h_ok(h, sw.before >= 0 && wait_until(notify_sent, &sw, 10000),
		     "limits: the change wakes every replica's parked GPUs (a NOTIFY sent)");
	}
out:
	h->auth_token = saved;
	free(path);
	free(tid);
	free(ida);
	free(idb);
	free(w2);
	json_decref(done);
	json_decref(lease);
	json_decref(body);
	json_decref(a);
	json_decref(b);
	json_decref(ok);
	json_decref(extra);
	json_decref(cfg);
}

/* A limit in one pool (migration 034): the admin caps the submitter at one running job of pool
 * default with rungctl token limit --pool; its second job waits on a free GPU and every surface says
 * so (placement, rungctl show, /metrics, GET /v1/owners, rungctl owners and token list, the GPUs
 * page); lifted with --max-running none, it runs. Bad bodies are 400s naming the field. */
static void test_pool_limit(struct harness *h, const char *wid)
{
	json_t *cfg = h_config("ops_pool_limit", 10), *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0);
	json_t *a = NULL, *b = NULL, *r = NULL, *lease = NULL, *second = NULL, *ok = h_facts_success(10);
	char *tid = NULL, *ida = NULL, *idb = NULL, *path = NULL, *args = NULL, *out = NULL;
	char *w2 = h_fake_register(h, "ops-plim", "GPU-plim-2", 24576);
	const char *saved = h->auth_token;
	long st = 0;
	int rc = -1;

	tid = submitter_id(h);
	if (!h_ok(h, tid && w2 && h_sql_int(h, "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')", 0, NULL) == 0,
		  "pool limit: the submitter's token, a second GPU, an empty queue"))
		goto out;
	path = xasprintf("/v1/tokens/%s/limits", tid);
	{
		static const struct bad_body bad[] = {
			{ "{\"pool_max_running\": {}}", "pool_max_running" },
			{ "{\"pool_max_running\": [1]}", "pool_max_running" },
			{ "{\"pool_max_running\": {\"H200\": 1}}", "pool_max_running" },
			{ "{\"pool_max_running\": {\"h200\": -1}}", "pool_max_running" },
			{ "{\"pool_max_running\": {\"h200\": \"1\"}}", "pool_max_running" },
			{ "{\"max_running\": 1, \"x\": 2}", "x" },
		};
		post_bad(h, "pool limit", path, bad, ARRAY_LEN(bad));
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM tokens WHERE pool_limits IS NOT NULL OR max_running IS NOT NULL", 0,
				  NULL) == 0,
		     "pool limit: and none of them stored anything");
	}
	args = xasprintf("token limit %s --pool default --max-running 1", tid);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "pool_max_running default:1"),
	     "pool limit: rungctl token limit --pool sets it-submitter's limit in default to 1");
	free(out);
	free(args);
	args = xasprintf("token limit %s --pool NOPE --max-running 1", tid);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 2, "pool limit: rungctl refuses a bad pool name before it sends anything (exit %d)", rc);
	free(out);
	free(args);
	args = NULL;
	lease = first_runs_second_waits(h, "pool limit", cfg, extra, wid, w2, "GPU-plim-2", &a, &b);
	ida = h_id(a, "id");
	idb = h_id(b, "id");
	r = idb ? h_job(h, idb) : NULL;
	h_ok(h, jpath_int(r, "placement.owner_pool_max_running", -1) == 1 && jpath_int(r, "placement.owner_pool_running", -1) == 1 &&
		     !json_object_get(json_object_get(r, "placement"), "owner_max_running"),
	     "pool limit: the waiting job's placement: its owner runs 1 of 1 in its pool, and has no limit over all");
	json_decref(r);
	args = xasprintf("show %s", idb ? idb : "0");
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "waiting for its owner's limit in pool default: it-submitter runs 1 job of it, "
					      "at most 1 at once"),
	     "pool limit: rungctl show says why it waits");
	if (h->failed)
		h_diag("rungctl show: %s", out ? out : "");
	free(out);
	{
		char *m = h_scrape(h);
		h_ok(h, m && h_sample(m, "rung_queue_owner_capped") == 1 &&
			     h_sample(m, "rung_owner_pool_max_running{owner=\"it-submitter\",pool=\"default\"}") == 1 &&
			     h_sample(m, "rung_owner_pool_running{owner=\"it-submitter\",pool=\"default\"}") == 1,
		     "pool limit: /metrics counts the waiting job as capped, and the owner's limit and running jobs in the pool");
		free(m);
	}
	{
		json_t *o = h_get(h, "/v1/owners", &st), *e, *l = NULL;
		size_t i;
		json_array_foreach(json_object_get(o, "owners"), i, e)
			if (!strcmp(h_str(e, "owner"), "it-submitter"))
				l = json_array_get(json_object_get(e, "pool_limits"), 0);
		h_ok(h, st == 200 && l && !strcmp(h_str(l, "pool"), "default") && h_int(l, "max_running") == 1 &&
			     h_int(l, "running") == 1 && h_int(l, "queued") == 1,
		     "pool limit: GET /v1/owners: in default, 1 running of at most 1, 1 queued (%ld)", st);
		json_decref(o);
	}
	out = h_rungctl(h, "owners", &rc);
	h_ok(h, rc == 0 && out && strstr(out, "POOL LIMITS") && strstr(out, "default 1/1"),
	     "pool limit: rungctl owners shows default 1/1");
	free(out);
	out = h_rungctl(h, "token list", &rc);
	h_ok(h, rc == 0 && out && strstr(out, "POOL LIMITS") && strstr(out, "default:1"),
	     "pool limit: rungctl token list shows default:1");
	free(out);
	st = h_browse(h, h->admin_token, "GET", "/ui/gpus", NULL, NULL);
	h_ok(h, st == 200 && h->last_body &&
		     strstr(h->last_body, "<td class=\"pool-limits\">default 1/1 <span class=\"state s-queued\">at its limit"),
	     "pool limit: the GPUs page's owners table marks it at its limit in default (%ld)", st);
	st = h_browse(h, h->admin_token, "GET", "/ui/tokens", NULL, NULL);
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "per pool: default:1"),
	     "pool limit: the tokens page shows it (%ld)", st);
	free(args);
	args = xasprintf("token limit %s --pool default --max-running none", tid);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "pool_max_running none"), "pool limit: lifted with --max-running none");
	free(out);
	second = h_fake_lease(h, w2, "GPU-plim-2", 5000, &st);
	{
		char *jid = h_id(second, "job_id");
		h_ok(h, jid && idb && !strcmp(jid, idb), "pool limit: lifted, the second job runs (%s)", jid ? jid : "none");
		free(jid);
	}
	{
		json_t *done;
		char *aid = h_id(lease, "attempt_id");
		done = aid ? h_fake_finish(h, aid, h_str(lease, "token"), ok, &st) : NULL;
		json_decref(done);
		free(aid);
		aid = h_id(second, "attempt_id");
		done = aid ? h_fake_finish(h, aid, h_str(second, "token"), ok, &st) : NULL;
		json_decref(done);
		free(aid);
	}
out:
	h->auth_token = saved;
	free(args);
	free(path);
	free(tid);
	free(ida);
	free(idb);
	free(w2);
	json_decref(lease);
	json_decref(second);
	json_decref(a);
	json_decref(b);
	json_decref(ok);
	json_decref(extra);
	json_decref(cfg);
}

/* A GPU-hour quota (migration 035): the admin gives the submitter 1 GPU hour a week with rungctl; a
 * finished attempt of 2 hours (its start moved back by SQL) puts it over once rungd's pass (every
 * 200 ms here) reads it; its next job waits on a free GPU and every surface says why; raised to 10
 * hours, the job starts at once (the API reads the quota and wakes the GPUs); lifted. Bad bodies are
 * 400s naming the field. */
static void test_quota(struct harness *h, const char *wid)
{
	json_t *cfg = h_config("ops_quota", 10), *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0);
	json_t *a = NULL, *b = NULL, *r = NULL, *lease = NULL, *second = NULL, *ok = h_facts_success(10);
	char *tid = NULL, *idb = NULL, *path = NULL, *args = NULL, *out = NULL;
	const char *saved = h->auth_token;
	struct sql_wait over = { h, "SELECT count(*) FROM quota_use u JOIN tokens t ON t.id = u.token_id "
				    "WHERE t.name = 'it-submitter' AND u.over", 1 };
	long st = 0;
	int rc = -1;

	tid = submitter_id(h);
	if (!h_ok(h, tid && h_sql_int(h, "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')", 0, NULL) == 0,
		  "quota: the submitter's token, an empty queue"))
		goto out;
	path = xasprintf("/v1/tokens/%s/limits", tid);
	{
		static const struct bad_body bad[] = {
			{ "{\"gpu_hours\": -1}", "gpu_hours" },
			{ "{\"gpu_hours\": \"5\"}", "gpu_hours" },
			{ "{\"gpu_hours\": 10000001}", "gpu_hours" },
			{ "{\"gpu_hours_days\": 0}", "gpu_hours_days" },
			{ "{\"gpu_hours_days\": 91}", "gpu_hours_days" },
			{ "{\"gpu_hours\": 5, \"gpu_hours_days\": 1.5}", "gpu_hours_days" },
		};
		post_bad(h, "quota", path, bad, ARRAY_LEN(bad));
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM tokens WHERE gpu_hours IS NOT NULL", 0, NULL) == 0,
		     "quota: and none of them stored anything");
	}
	args = xasprintf("token limit %s --gpu-hours 1", tid);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "gpu_hours 1 per 7 days"), "quota: rungctl token limit --gpu-hours 1 sets it");
	free(out);
	out = h_rungctl(h, "token list", &rc);
	h_ok(h, rc == 0 && out && strstr(out, "GPU HOURS") && strstr(out, "1 per 7 days"), "quota: rungctl token list shows it");
	free(out);
	/* one job that ran two hours */
	h->auth_token = h->submitter_token;
	a = h_submit(h, cfg, extra);
	h->auth_token = saved;
	lease = h_fake_lease(h, wid, GPU, 5000, &st);
	{
		char *aid = h_id(lease, "attempt_id");
		const char *p[1] = { aid };
		json_t *done;
		h_sql_int(h, "WITH u AS (UPDATE attempts SET started_at = now() - interval '2 hours' WHERE id = $1::bigint "
			     "RETURNING 1) SELECT count(*) FROM u", 1, p);
		done = aid ? h_fake_finish(h, aid, h_str(lease, "token"), ok, &st) : NULL;
		h_ok(h, done && st == 200, "quota: a job of two GPU hours ended (%ld)", st);
		json_decref(done);
		free(aid);
	}
	h_ok(h, wait_until(sql_reaches, &over, 10000), "quota: rungd's pass finds it-submitter over its quota");
	h->auth_token = h->submitter_token;
	b = h_submit(h, cfg, extra);
	h->auth_token = saved;
	idb = h_id(b, "id");
	r = h_fake_lease(h, wid, GPU, 300, &st);
	h_ok(h, st == 204, "quota: a free GPU gets nothing for it (%ld)", st);
	json_decref(r);
	r = idb ? h_job(h, idb) : NULL;
	h_ok(h, json_is_true(jpath_get(r, "placement.owner_quota.over")) &&
		     json_number_value(jpath_get(r, "placement.owner_quota.used_hours")) >= 2.0 &&
		     jpath_int(r, "placement.owner_quota.days", -1) == 7,
	     "quota: the waiting job's placement: over, 2 hours used in 7 days");
	json_decref(r);
	free(args);
	args = xasprintf("show %s", idb ? idb : "0");
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "waiting for its owner's GPU-hour quota: it-submitter used 2.0 of 1 GPU hours "
					      "in the last 7 days: over its quota"),
	     "quota: rungctl show says why it waits");
	if (h->failed)
		h_diag("rungctl show: %s", out ? out : "");
	free(out);
	{
		char *m = h_scrape(h);
		h_ok(h, m && h_sample(m, "rung_queue_owner_capped") == 1 &&
			     h_sample(m, "rung_owner_gpu_hours_quota{owner=\"it-submitter\"}") == 1 &&
			     h_sample(m, "rung_owner_gpu_hours_used{owner=\"it-submitter\"}") >= 2.0,
		     "quota: /metrics counts the job as capped, and the owner's quota and hours used");
		free(m);
	}
	out = h_rungctl(h, "owners", &rc);
	h_ok(h, rc == 0 && out && strstr(out, "GPU HOURS") && strstr(out, "2.0/1 in 7d (over)"),
	     "quota: rungctl owners shows 2.0/1 in 7d (over)");
	free(out);
	{
		/* the team itself sees its quota in its usage report */
		json_t *u, *q;
		h->auth_token = h->submitter_token;
		u = h_get(h, "/v1/usage", &st);
		h->auth_token = saved;
		q = json_array_get(json_object_get(u, "quotas"), 0);
		h_ok(h, st == 200 && json_array_size(json_object_get(u, "quotas")) == 1 && !strcmp(h_str(q, "owner"), "it-submitter") &&
			     json_is_true(json_object_get(q, "over")) && json_number_value(json_object_get(q, "gpu_hours")) == 1,
		     "quota: GET /v1/usage, as the submitter, has its quota, over (%ld)", st);
		json_decref(u);
	}
	out = h_rungctl(h, "usage", &rc);
	h_ok(h, rc == 0 && out && strstr(out, "quota: it-submitter used 2.0 of 1 GPU hours in the last 7 days: over its quota"),
	     "quota: rungctl usage says so");
	free(out);
	st = h_browse(h, h->admin_token, "GET", "/ui/gpus", NULL, NULL);
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "<td class=\"quota\">2.0/1 in 7d <span"),
	     "quota: the GPUs page's owners table marks it over its quota (%ld)", st);
	free(args);
	args = xasprintf("token limit %s --gpu-hours 10", tid);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "gpu_hours 10 per 7 days"), "quota: raised to 10 hours");
	free(out);
	second = h_fake_lease(h, wid, GPU, 5000, &st);
	{
		char *jid = h_id(second, "job_id"), *aid = h_id(second, "attempt_id");
		json_t *done;
		h_ok(h, jid && idb && !strcmp(jid, idb), "quota: raised, the job starts at once (%s)", jid ? jid : "none");
		done = aid ? h_fake_finish(h, aid, h_str(second, "token"), ok, &st) : NULL;
		json_decref(done);
		free(jid);
		free(aid);
	}
	{
		/* over again (1 hour), then its hours leave the window: rungd's pass frees it and wakes the GPUs */
		struct sql_wait under = { h, "SELECT count(*) FROM quota_use u JOIN tokens t ON t.id = u.token_id "
					     "WHERE t.name = 'it-submitter' AND NOT u.over", 1 };
		struct sent_wait sw = { h, -1 };
		char *m;
		free(args);
		args = xasprintf("token limit %s --gpu-hours 1", tid);
		out = h_rungctl(h, args, &rc);
		free(out);
		h_ok(h, rc == 0 && wait_until(sql_reaches, &over, 10000), "quota: 1 hour again: over it");
		m = h_scrape(h);
		sw.before = m ? h_sample(m, "rung_lease_notifies_total{event=\"sent\"}") : -1;
		free(m);
		h_sql_int(h, "WITH u AS (UPDATE attempts a SET started_at = a.started_at - interval '8 days', "
			     "ended_at = a.ended_at - interval '8 days' FROM jobs j WHERE j.id = a.job_id "
			     "AND j.owner = 'it-submitter' RETURNING 1) SELECT count(*) FROM u", 0, NULL);
		h_ok(h, wait_until(sql_reaches, &under, 10000), "quota: its hours left the window: rungd's pass frees it");
		h_ok(h, sw.before >= 0 && wait_until(notify_sent, &sw, 10000),
		     "quota: and wakes every replica's parked GPUs (a NOTIFY sent)");
	}
	free(args);
	args = xasprintf("token limit %s --gpu-hours none", tid);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "gpu_hours none") &&
		     h_sql_int(h, "SELECT count(*) FROM quota_use", 0, NULL) == 0,
	     "quota: lifted with --gpu-hours none, its reading gone");
	free(out);
out:
	h->auth_token = saved;
	free(args);
	free(path);
	free(tid);
	free(idb);
	json_decref(lease);
	json_decref(second);
	json_decref(a);
	json_decref(b);
	json_decref(ok);
	json_decref(extra);
	json_decref(cfg);
}

/* A GPU-hour quota per pool (migration 037): bad bodies are 400s naming pool_gpu_hours; the admin gives
 * the submitter 0 GPU hours in pool default with rungctl (a pause there: 0 used is not under 0); its
 * job waits on a free GPU of that pool and every surface says why, naming the pool; lifted, the job
 * starts at once (the API reads the quota and wakes the GPUs). */
static void test_pool_quota(struct harness *h, const char *wid)
{
	json_t *cfg = h_config("ops_pool_quota", 10), *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0);
	json_t *b = NULL, *r = NULL, *lease = NULL, *ok = h_facts_success(10);
	char *tid = NULL, *idb = NULL, *path = NULL, *args = NULL, *out = NULL;
	const char *saved = h->auth_token;
	long st = 0;
	int rc = -1;

	tid = submitter_id(h);
	if (!h_ok(h, tid && h_sql_int(h, "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')", 0, NULL) == 0,
		  "pool quota: the submitter's token, an empty queue"))
		goto out;
	path = xasprintf("/v1/tokens/%s/limits", tid);
	{
		static const struct bad_body bad[] = {
			{ "{\"pool_gpu_hours\": {}}", "pool_gpu_hours" },
			{ "{\"pool_gpu_hours\": [1]}", "pool_gpu_hours" },
			{ "{\"pool_gpu_hours\": {\"no such!\": 1}}", "pool_gpu_hours" },
			{ "{\"pool_gpu_hours\": {\"default\": -1}}", "pool_gpu_hours" },
			{ "{\"pool_gpu_hours\": {\"default\": \"5\"}}", "pool_gpu_hours" },
			{ "{\"pool_gpu_hours\": {\"default\": 10000001}}", "pool_gpu_hours" },
		};
		post_bad(h, "pool quota", path, bad, ARRAY_LEN(bad));
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM tokens WHERE pool_gpu_hours IS NOT NULL", 0, NULL) == 0,
		     "pool quota: and none of them stored anything");
	}
	args = xasprintf("token limit %s --pool default --gpu-hours 0", tid);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "gpu_hours default:0 per 7 days"),
	     "pool quota: rungctl token limit --pool default --gpu-hours 0 sets it (%s)", out ? out : "");
	free(out);
	h->auth_token = h->submitter_token;
	b = h_submit(h, cfg, extra);
	h->auth_token = saved;
	idb = h_id(b, "id");
	r = h_fake_lease(h, wid, GPU, 300, &st);
	h_ok(h, st == 204, "pool quota: a free GPU of that pool gets nothing for it (%ld)", st);
	json_decref(r);
	r = idb ? h_job(h, idb) : NULL;
	h_ok(h, json_is_true(jpath_get(r, "placement.owner_pool_quota.over")) &&
		     !strcmp(jpath_str(r, "placement.owner_pool_quota.pool", "?"), "default") &&
		     !json_is_object(jpath_get(r, "placement.owner_quota")),
	     "pool quota: the waiting job's placement: over in pool default, no quota over all");
	json_decref(r);
	free(args);
	args = xasprintf("show %s", idb ? idb : "0");
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "waiting for its owner's GPU-hour quota in pool default: it-submitter used 0.0 "
					      "of 0 GPU hours of pool default in the last 7 days: over its quota, none of its "
					      "jobs of that pool starts"),
	     "pool quota: rungctl show says why it waits, naming the pool");
	if (h->failed)
		h_diag("rungctl show: %s", out ? out : "");
	free(out);
	{
		char *m = h_scrape(h);
		h_ok(h, m && h_sample(m, "rung_queue_owner_capped") == 1 &&
			     h_sample(m, "rung_owner_pool_gpu_hours_quota{owner=\"it-submitter\",pool=\"default\"}") == 0 &&
			     h_sample(m, "rung_owner_pool_gpu_hours_used{owner=\"it-submitter\",pool=\"default\"}") == 0,
		     "pool quota: /metrics counts the job as capped, and the pool's quota and hours used");
		free(m);
	}
	out = h_rungctl(h, "owners", &rc);
	h_ok(h, rc == 0 && out && strstr(out, "POOL GPU HOURS") && strstr(out, "default 0.0/0 in 7d (over)"),
	     "pool quota: rungctl owners shows default 0.0/0 in 7d (over)");
	free(out);
	out = h_rungctl(h, "usage", &rc);
	h_ok(h, rc == 0 && out && strstr(out, "quota: it-submitter used 0.0 of 0 GPU hours of pool default in the last 7 days: "
					      "over its quota"),
	     "pool quota: rungctl usage says so, naming the pool");
	free(out);
	st = h_browse(h, h->admin_token, "GET", "/ui/gpus", NULL, NULL);
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "default 0.0/0 in 7d <span class=\"state s-queued\">over its "
										"quota there</span>"),
	     "pool quota: the GPUs page's owners table marks it over its quota there (%ld)", st);
	free(args);
	args = xasprintf("token limit %s --pool default --gpu-hours none", tid);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "gpu_hours none") && h_sql_int(h, "SELECT count(*) FROM quota_use", 0, NULL) == 0,
	     "pool quota: lifted with --gpu-hours none, its reading gone (%s)", out ? out : "");
	free(out);
	lease = h_fake_lease(h, wid, GPU, 5000, &st);
	{
		char *jid = h_id(lease, "job_id"), *aid = h_id(lease, "attempt_id");
		json_t *done;
		h_ok(h, jid && idb && !strcmp(jid, idb), "pool quota: lifted, the job starts at once (%s)", jid ? jid : "none");
		done = aid ? h_fake_finish(h, aid, h_str(lease, "token"), ok, &st) : NULL;
		json_decref(done);
		free(jid);
		free(aid);
	}
out:
	h->auth_token = saved;
	free(args);
	free(path);
	free(tid);
	free(idb);
	json_decref(lease);
	json_decref(b);
	json_decref(ok);
	json_decref(extra);
	json_decref(cfg);
}

/* ---- drain (POST /v1/workers/{id}/drain|resume, sql/functions/31_drain.sql) ---- */

/* The worker's entry in GET /v1/workers (new reference) or NULL. */
static json_t *worker_entry(struct harness *h, const char *wid)
{
	long st = 0;
	json_t *all = h_get(h, "/v1/workers", &st), *w, *found = NULL;
	size_t i;

	json_array_foreach(json_object_get(all, "workers"), i, w) {
		char *id = h_id(w, "id");
		if (id && !strcmp(id, wid))
			found = json_incref(w);
		free(id);
	}
	json_decref(all);
	return found;
}

/* Support drains the fake worker: its GPU gets no lease while a job waits, the drain (who, why)
 * shows in GET /v1/workers, outlives the worker registering again, and repeats change nothing;
 * resumed, the GPU leases the job. Only staff may; an unknown worker is a 404, a bad note a 400. */
static void test_drain(struct harness *h, const char *wid)
{
	json_t *cfg = h_config("ops_drain", 10), *job = NULL, *r = NULL, *w = NULL, *ok = h_facts_success(10);
	json_t *note = json_pack("{s:s}", "note", "PSU swap"), *bad = json_pack("{s:i}", "note", 7);
	json_t *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0);
	char *drain = xasprintf("/v1/workers/%s/drain", wid), *resume = xasprintf("/v1/workers/%s/resume", wid), *id = NULL;
	const char *saved = h->auth_token;
	char *support = h_token_create(h, "support", "ops-support");
	long st = 0;

	h->auth_token = support;
	r = h_post(h, drain, bad, &st);
	h_ok(h, st == 400 && !strcmp(h_str(r, "field"), "note"), "drain: a note that is not a string is a 400 naming note");
	json_decref(r);
	r = h_post(h, "/v1/workers/987654/drain", NULL, &st);
	h_ok(h, st == 404, "drain: an unknown worker is a 404 (%ld)", st);
	json_decref(r);
	h->auth_token = h->worker_token;
	r = h_post(h, drain, NULL, &st);
	h_ok(h, st == 403, "drain: a worker token may not (%ld)", st);
	json_decref(r);
	h->auth_token = h->submitter_token;
	r = h_post(h, drain, NULL, &st);
	h_ok(h, st == 403, "drain: nor a submitter (%ld)", st);
	json_decref(r);
	h->auth_token = support;
	r = h_post(h, drain, note, &st);
	h->auth_token = saved;
	h_ok(h, st == 200 && !strcmp(h_str(r, "state"), "draining") &&
		     !strcmp(h_str(json_object_get(r, "drain"), "note"), "PSU swap") &&
		     !strcmp(h_str(json_object_get(r, "drain"), "by"), "ops-support"),
	     "drained: 200, draining, the note and who (%ld)", st);
	json_decref(r);
	r = h_post(h, drain, NULL, &st);
	h_ok(h, st == 200 && !strcmp(h_str(json_object_get(r, "drain"), "note"), "PSU swap"),
	     "drain again: 200, the first drain's record stays");
	json_decref(r);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM events WHERE kind = 'worker_drained'", 0, NULL) == 1,
	     "one event worker_drained");

	job = h_submit(h, cfg, extra);
	id = h_id(job, "id");
	r = h_fake_lease(h, wid, GPU, 300, &st);
	h_ok(h, st == 204 && !r, "a drained worker's GPU gets no lease while a job waits (%ld)", st);
	json_decref(r);
	{
		char *again = h_fake_register(h, "ops-w1", GPU, 24576);
		h_ok(h, again && !strcmp(again, wid), "the worker registers again (a restart)");
		free(again);
	}
	w = worker_entry(h, wid);
	h_ok(h, w && !strcmp(h_str(w, "state"), "draining") && !strcmp(h_str(json_object_get(w, "drain"), "note"), "PSU swap"),
	     "GET /v1/workers: still draining after the restart, with the note");
	json_decref(w);
	r = h_fake_lease(h, wid, GPU, 300, &st);
	h_ok(h, st == 204 && !r, "and still no lease");
	json_decref(r);
	{
		char *t = h_scrape(h);
		h_ok(h, t && h_sample(t, "rung_workers{state=\"draining\"}") == 1 && h_sample(t, "rung_workers{state=\"online\"}") == 0,
		     "/metrics: one worker draining, none online");
		free(t);
	}

	r = h_post(h, resume, NULL, &st);
	h_ok(h, st == 200 && !strcmp(h_str(r, "state"), "online") && json_is_null(json_object_get(r, "drain")),
	     "resumed: 200, online, no drain record (%ld)", st);
	json_decref(r);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM events WHERE kind = 'worker_resumed'", 0, NULL) == 1,
	     "one event worker_resumed");
	if (id) {
		json_t *done = attempt_of(h, wid, id, ok);
		h_ok(h, !strcmp(decided(done), "succeeded"), "the resumed GPU leases the waiting job, which succeeds");
		json_decref(done);
	}
	h->auth_token = saved;
	free(support);
	free(id);
	free(drain);
	free(resume);
	json_decref(job);
	json_decref(cfg);
	json_decref(ok);
	json_decref(note);
	json_decref(bad);
	json_decref(extra);
}

/* ---- the web forms (server/web_act.c) ---- */

/* POSTs form to path as the browser would, with the admin's cookie (cookie false: none) and an
 * Origin (NULL: none). Returns the status; h->last_location holds a redirect's target. */
static long web_post(struct harness *h, const char *path, const char *form, bool cookie, const char *origin)
{
	char *c = xasprintf("Cookie: rung_token=%s", h->admin_token), *o = origin ? xasprintf("Origin: %s", origin) : NULL;
	const char *hdr[4];
	const char *saved = h->auth_token;
	int n = 0;
	long st = 0;

	if (cookie)
		hdr[n++] = c;
	if (o)
		hdr[n++] = o;
	hdr[n++] = "Content-Type: application/x-www-form-urlencoded";
	hdr[n] = NULL;
	h->auth_token = NULL; /* a browser sends the cookie, not a bearer token */
	json_decref(h_request(h, "POST", path, form, strlen(form), hdr, &st));
	h->auth_token = saved;
	free(c);
	free(o);
	return st;
}

/* Support's day in the web UI: a failed job retried from its page (303 back to it, queued, the
 * note in the event), then cancelled from it; a resolved escalation cannot be acknowledged (409);
 * a worker drained and resumed from the GPUs page. A form posted from another site changes nothing
 * (403), one without a cookie goes to the login form. */
static void test_web_actions(struct harness *h, const char *wid, const json_t *oom)
{
	json_t *cfg = h_config("ops_web", 10), *extra = json_pack("{s:{s:i}}", "recovery", "max_attempts", 1);
	json_t *job = h_submit(h, cfg, extra), *done = NULL, *r = NULL, *w = NULL;
	char *id = h_id(job, "id"), *esc = NULL, *retry = NULL, *cancel = NULL, *ack = NULL, *drain = NULL, *resume = NULL;
	char *back = NULL, *login = NULL, *origin = xasprintf("http://127.0.0.1:%d", h->port);
	const char *p[1] = { id };
	long st;

	if (!h_ok(h, id != NULL, "web: job submitted (max_attempts 1)"))
		goto out;
	done = attempt_of(h, wid, id, oom);
	esc = h_id(done, "escalation_id");
	if (!h_ok(h, !strcmp(decided(done), "failed") && esc, "web: its OOM fails it with an escalation"))
		goto out;
	retry = xasprintf("/ui/jobs/%s/retry", id);
	cancel = xasprintf("/ui/jobs/%s/cancel", id);
	back = xasprintf("/ui/jobs/%s", id);
	st = web_post(h, retry, "from=current&note=web+retry", true, "http://evil.example");
	h_ok(h, st == 403, "web: a retry form posted from another site is refused (%ld)", st);
	st = web_post(h, retry, "from=current", false, NULL);
	login = xasprintf("/ui/login?next=%%2Fui%%2Fjobs%%2F%s", id);
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, login),
	     "web: without a cookie the form goes to the login, and back to the job page (%ld %s)", st,
	     h->last_location ? h->last_location : "-");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs WHERE id = $1::bigint AND state = 'failed'", 1, p) == 1,
	     "web: and neither changed the job");
	{
		/* a cookie that is not a token: the login form too, and back to the page */
		const char *hdr[] = { "Cookie: rung_token=not a token", "Content-Type: application/x-www-form-urlencoded", NULL };
		const char *saved_tok = h->auth_token;
		h->auth_token = NULL;
		json_decref(h_request(h, "POST", retry, "from=current", 12, hdr, &st));
		h->auth_token = saved_tok;
		h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, login),
		     "web: a cookie that is not a token goes to the login, back to the job page (%ld %s)", st,
		     h->last_location ? h->last_location : "-");
	}
	{
		/* a note of 4096 bytes in two-byte characters fits the form however it is encoded; one more byte
		 * is a 400 that changes nothing */
		size_t cap = 32 + 2049 * 6;
		char *form = xmalloc(cap), *enc = xmalloc(2049 * 6 + 1);
		for (int k = 0; k < 2048; k++)
			memcpy(enc + 6 * k, "%C3%A9", 6);
		enc[2048 * 6] = '\0';
		snprintf(form, cap, "from=bottom&note=%s", enc);
		st = web_post(h, retry, form, true, origin);
		h_ok(h, st == 400, "web: a 4096-byte note, %%XX-encoded (%zu bytes), is read: the 400 is for from=bottom (%ld)",
		     strlen(form), st);
		snprintf(form, cap, "from=current&note=x%s", enc);
		st = web_post(h, retry, form, true, origin);
		h_ok(h, st == 400 && h->last_body && strstr(h->last_body, "at most 4096 bytes"),
		     "web: a 4097-byte note is a 400 naming the limit (%ld)", st);
		free(enc);
		free(form);
	}
	st = web_post(h, retry, "from=bottom", true, origin);
	h_ok(h, st == 400, "web: from=bottom is a 400 (%ld)", st);
	st = web_post(h, retry, "from=current&note=web+retry", true, origin);
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, back), "web: retried, 303 back to the job page (%ld %s)",
	     st, h->last_location ? h->last_location : "-");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM events WHERE job_id = $1::bigint AND kind = 'retried' "
			     "AND data->>'note' = 'web retry' AND data->>'by' = 'it-admin'", 1, p) == 1,
	     "web: the job is queued again, the note and who in the event");
	{
		char *cookie = xasprintf("Cookie: rung_token=%s", h->admin_token);
		const char *hdr[] = { cookie, NULL };
		json_decref(h_request(h, "GET", back, NULL, 0, hdr, &st));
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "action=\"/ui/jobs/") &&
			     strstr(h->last_body, "/cancel\"") && !strstr(h->last_body, "/retry\""),
		     "web: the queued job's page offers cancel, not retry");
		free(cookie);
	}
	st = web_post(h, cancel, "", true, origin);
	h_ok(h, st == 303 && h_sql_int(h, "SELECT count(*) FROM jobs WHERE id = $1::bigint AND state = 'cancelled'", 1, p) == 1,
	     "web: cancelled from its page (%ld)", st);
	ack = xasprintf("/ui/escalations/%s/ack", esc);
	st = web_post(h, ack, "note=looking", true, origin);
	h_ok(h, st == 409, "web: the escalation the retry resolved cannot be acknowledged (%ld)", st);

	drain = xasprintf("/ui/workers/%s/drain", wid);
	resume = xasprintf("/ui/workers/%s/resume", wid);
	st = web_post(h, drain, "note=from+the+page", true, origin);
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, "/ui/gpus"), "web: drain goes back to the GPUs page");
	w = worker_entry(h, wid);
	h_ok(h, w &&
		     !strcmp(h_str(w, "state"), "draining") && !strcmp(h_str(json_object_get(w, "drain"), "note"), "from the page"),
	     "web: a worker drained from the GPUs page, with the note (%ld)", st);
	json_decref(w);
	st = web_post(h, resume, "", true, origin);
	w = worker_entry(h, wid);
	h_ok(h, st == 303 && w && !strcmp(h_str(w, "state"), "online"), "web: and resumed (%ld)", st);
	json_decref(w);
	st = web_post(h, "/ui/workers/x/drain", "", true, origin);
	h_ok(h, st == 404, "web: a worker id that is not one: 404 (%ld)", st);
out:
	free(origin);
	free(login);
	free(back);
	free(retry);
	free(cancel);
	free(ack);
	free(drain);
	free(resume);
	free(esc);
	free(id);
	json_decref(r);
	json_decref(done);
	json_decref(job);
	json_decref(extra);
	json_decref(cfg);
}

/* rungd --fair-share: the admin's two jobs were queued before the submitter's one; the first GPU
 * takes the admin's oldest (neither owner runs a job), the second the submitter's (the admin runs
 * one, the submitter none), where claim order would give the admin's second. Restarts rungd with
 * the flag (the last test: the flag changes every claim after it). */
static void test_fair_share(struct harness *h)
{
	static const char *const extra[] = { "--fair-share", NULL };
	json_t *cfg = h_config("ops_fair", 10), *xtra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0);
	json_t *a1 = NULL, *a2 = NULL, *b1 = NULL, *l1 = NULL, *l2 = NULL;
	char *w1 = NULL, *w2 = NULL, *id[3] = { NULL }, *got[2] = { NULL };
	const char *saved = h->auth_token;
	long st = 0;

	h_sql_int(h, "SELECT count(*) FROM (SELECT rung_cancel(id) FROM jobs WHERE state = 'queued') x", 0, NULL);
	if (!h_ok(h, h_server_stop(h, SIGTERM) == 0 && h_server_start(h, extra) == 0, "fair share: rungd restarted with --fair-share"))
		goto out;
	w1 = h_fake_register(h, "ops-fair-1", "GPU-fair-1", 24576);
	w2 = h_fake_register(h, "ops-fair-2", "GPU-fair-2", 24576);
	a1 = h_submit(h, cfg, xtra);
	a2 = h_submit(h, cfg, xtra);
	h->auth_token = h->submitter_token;
	b1 = h_submit(h, cfg, xtra);
	h->auth_token = saved;
	id[0] = h_id(a1, "id");
	id[1] = h_id(a2, "id");
	id[2] = h_id(b1, "id");
	if (!h_ok(h, w1 && w2 && id[0] && id[1] && id[2] &&
			     h_sql_int(h, "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')", 0, NULL) == 3,
		  "fair share: two GPUs, the admin's two jobs queued before the submitter's one, nothing else"))
		goto out;
	l1 = h_fake_lease(h, w1, "GPU-fair-1", 5000, &st);
	l2 = h_fake_lease(h, w2, "GPU-fair-2", 5000, &st);
	got[0] = h_id(l1, "job_id");
	got[1] = h_id(l2, "job_id");
	h_ok(h, got[0] && !strcmp(got[0], id[0]), "fair share: the first GPU takes the admin's oldest job (%s)",
	     got[0] ? got[0] : "none");
	h_ok(h, got[1] && !strcmp(got[1], id[2]), "fair share: the second takes the submitter's, not the admin's second (%s)",
	     got[1] ? got[1] : "none");
out:
	for (int i = 0; i < 3; i++)
		free(id[i]);
	free(got[0]);
	free(got[1]);
	free(w1);
	free(w2);
	json_decref(a1);
	json_decref(a2);
	json_decref(b1);
	json_decref(l1);
	json_decref(l2);
	json_decref(xtra);
	json_decref(cfg);
}

/* Cancel the jobs that match, from the queue page: the form only where a filter narrows the list; a
 * review that lists them and changes nothing; a confirm that cancels them and goes back to the
 * queue; from another site or without a filter, nothing. */
static void test_web_cancel_matching(struct harness *h)
{
	json_t *cfg = h_config("ops_bulk", 10), *extra = json_pack("{s:{s:s}, s:i}", "labels", "batch", "web-bulk", "priority", 5000);
	char *origin = xasprintf("http://127.0.0.1:%d", h->port);
	int n = 0;
	long st;

	for (int k = 0; k < 3; k++) {
		json_t *j = h_submit(h, cfg, extra);
		n += h_str(j, "id") || json_is_integer(json_object_get(j, "id"));
		json_decref(j);
	}
	const char *q = "SELECT count(*) FROM jobs WHERE labels @> '{\"batch\": \"web-bulk\"}' AND state = 'queued'";
	h_ok(h, n == 3 && h_sql_int(h, q, 0, NULL) == 3, "web cancel: three queued jobs labelled batch=web-bulk");
	st = h_browse(h, h->admin_token, "GET", "/ui/jobs?label=batch%3Dweb-bulk", NULL, NULL);
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "action=\"/ui/jobs/cancel\"") &&
		     strstr(h->last_body, "name=\"label\" value=\"batch=web-bulk\""),
	     "web cancel: the filtered queue has the form, with its filter");
	st = h_browse(h, h->admin_token, "GET", "/ui/jobs", NULL, NULL);
	h_ok(h, st == 200 && h->last_body && !strstr(h->last_body, "/ui/jobs/cancel"),
	     "web cancel: the unfiltered queue has none (that would be every job)");
	st = web_post(h, "/ui/jobs/cancel", "label=batch%3Dweb-bulk&state=queued", true, origin);
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "Cancel 3 jobs?") &&
		     strstr(h->last_body, "Cancel these 3 jobs") && strstr(h->last_body, "name=\"confirm\" value=\"1\"") &&
		     h_sql_int(h, q, 0, NULL) == 3,
	     "web cancel: the review lists the three and cancels nothing (%ld)", st);
	st = web_post(h, "/ui/jobs/cancel", "label=batch%3Dweb-bulk&state=queued&confirm=1", true, "http://evil.example");
	h_ok(h, st == 403 && h_sql_int(h, q, 0, NULL) == 3, "web cancel: a confirm from another site is refused (%ld)", st);
	st = web_post(h, "/ui/jobs/cancel", "state=queued&confirm=1", true, origin);
	h_ok(h, st == 400 && h_sql_int(h, q, 0, NULL) == 3, "web cancel: no filter is refused (%ld)", st);
	st = web_post(h, "/ui/jobs/cancel", "label=bat+ch%3Dx&confirm=1", true, origin);
	h_ok(h, st == 400 && h_sql_int(h, q, 0, NULL) == 3, "web cancel: a bad label is refused (%ld)", st);
	st = web_post(h, "/ui/jobs/cancel", "kind=image&label=batch%3Dweb-bulk", true, origin);
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "href=\"/ui/jobs?kind=image&amp;label=batch%3Dweb-bulk\""),
	     "web cancel: the review's link back keeps both filters, escaped once");
	st = web_post(h, "/ui/jobs/cancel", "kind=image&label=batch%3Dweb-bulk&state=queued&confirm=1", true, origin);
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, "/ui/jobs?kind=image&label=batch%3Dweb-bulk") &&
		     h_sql_int(h, q, 0, NULL) == 0 &&
		     h_sql_int(h, "SELECT count(*) FROM jobs WHERE labels @> '{\"batch\": \"web-bulk\"}' AND state = 'cancelled'",
			       0, NULL) == 3,
	     "web cancel: the confirm cancels the three and goes back to the queue (%ld %s)", st,
	     h->last_location ? h->last_location : "-");
	{
		/* a form posted with the cookie of a token revoked since: its lookup is answered after
		 * the form's handler returned, and the refusal still knows the page to come back to */
		char *tok = h_token_create(h, "admin", "web-revoked"), *cookie = xasprintf("Cookie: rung_token=%s", tok);
		json_t *list = h_get(h, "/v1/tokens", &st), *t;
		size_t i;
		long long tid = 0;
		json_array_foreach(json_object_get(list, "tokens"), i, t)
			if (h_str(t, "name") && !strcmp(h_str(t, "name"), "web-revoked"))
				tid = h_int(t, "id");
		json_decref(list);
		json_decref(h_postf(h, NULL, &st, "/v1/tokens/%lld/revoke", tid));
		const char *hdr[] = { cookie, "Content-Type: application/x-www-form-urlencoded", NULL };
		const char *saved = h->auth_token;
		h->auth_token = NULL;
		json_decref(h_request(h, "POST", "/ui/jobs/cancel", "label=batch%3Dweb-bulk", 21, hdr, &st));
		h->auth_token = saved;
		h_ok(h, tid > 0 && st == 303 && h->last_location &&
			     !strcmp(h->last_location, "/ui/login?next=%2Fui%2Fjobs&why=refused") && h_server_alive(h),
		     "web cancel: a revoked token's cookie goes to the login, back to the queue (%ld %s)", st,
		     h->last_location ? h->last_location : "-");
		free(cookie);
		free(tok);
	}
	json_decref(cfg);
	json_decref(extra);
	free(origin);
}

/* Worker pools on /metrics: per pool its queued jobs and its GPUs not quarantined on live workers,
 * every pool with either listed, so that one whose jobs have no GPU shows 0 (RungPoolWithoutGpus);
 * a quarantined GPU and a drained worker do not count. */
static void test_pool_metrics(struct harness *h)
{
	json_t *cfg = h_config("ops_pools", 10), *in_a = json_pack("{s:s}", "pool", "ops-a"),
	       *in_none = json_pack("{s:s}", "pool", "ops-nogpu");
	json_t *reg = json_pack("{s:s, s:s, s:s, s:[{s:s, s:i, s:s, s:i}, {s:s, s:i, s:s, s:i}]}", "name", "ops-pool-a",
				"host", "test-host", "pool", "ops-a", "gpus", "uuid", "GPU-ops-a0", "index", 0, "name", "NVIDIA Sim",
				"memory_total_mib", 24576, "uuid", "GPU-ops-a1", "index", 1, "name", "NVIDIA Sim",
				"memory_total_mib", 24576);
	long st = 0;
	json_t *r = h_post(h, "/v1/workers", reg, &st), *j1 = h_submit(h, cfg, in_a), *j2 = h_submit(h, cfg, in_none),
	       *j3 = h_submit(h, cfg, in_none);
	char *wid = h_id(r, "id"), *t = h_scrape(h), *ids[3] = { h_id(j1, "id"), h_id(j2, "id"), h_id(j3, "id") };

	h_ok(h, wid && ids[0] && ids[1] && ids[2] && t, "a worker of pool ops-a with 2 GPUs; a job in ops-a, two in ops-nogpu");
	h_ok(h, t && h_sample(t, "rung_pool_queued_jobs{pool=\"ops-a\"}") == 1 &&
		     h_sample(t, "rung_pool_queued_jobs{pool=\"ops-nogpu\"}") == 2,
	     "rung_pool_queued_jobs: 1 in ops-a, 2 in ops-nogpu");
	h_ok(h, t && h_sample(t, "rung_pool_gpus{pool=\"ops-a\"}") == 2 && h_sample(t, "rung_pool_gpus{pool=\"ops-nogpu\"}") == 0,
	     "rung_pool_gpus: 2 in ops-a, and ops-nogpu listed with 0");
	h_ok(h, t && h_sample(t, "rung_queue_unplaceable") == 2,
	     "rung_queue_unplaceable: the 2 jobs of ops-nogpu, as their placement says, while other pools have GPUs (%g)",
	     t ? h_sample(t, "rung_queue_unplaceable") : -1);
	free(t);
	PQclear(h_sql(h, "UPDATE gpus SET state = 'quarantined' WHERE uuid = 'GPU-ops-a1'", 0, NULL));
	t = h_scrape(h);
	h_ok(h, t && h_sample(t, "rung_pool_gpus{pool=\"ops-a\"}") == 1, "a quarantined GPU does not count");
	free(t);
	json_decref(wid ? h_postf(h, NULL, &st, "/v1/workers/%s/drain", wid) : NULL);
	t = h_scrape(h);
	h_ok(h, st == 200 && t && h_sample(t, "rung_pool_gpus{pool=\"ops-a\"}") == 0 &&
		     h_sample(t, "rung_pool_queued_jobs{pool=\"ops-a\"}") == 1,
	     "its worker drained: ops-a has no GPU left for its queued job");
	free(t);
	for (int i = 0; i < 3; i++) {
		if (ids[i])
			json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", ids[i]));
		free(ids[i]);
	}
	t = h_scrape(h);
	h_ok(h, t && h_sample(t, "rung_pool_queued_jobs{pool=\"ops-nogpu\"}") == -1 && h_sample(t, "rung_queue_unplaceable") == 0,
	     "once its jobs are cancelled a pool without GPUs is not listed, and none is unplaceable");
	free(t);
	free(wid);
	json_decref(r);
	json_decref(j1);
	json_decref(j2);
	json_decref(j3);
	json_decref(reg);
	json_decref(in_a);
	json_decref(in_none);
	json_decref(cfg);
}

int main(void)
{
	struct harness *h = h_new("it_ops");
	struct receiver rc = { .fail_first = 1 };
	char *url = NULL, *wid = NULL, *path = NULL;
	json_t *oom = NULL;

	pthread_mutex_init(&rc.mu, NULL);
	rc.port = unused_port();
	url = xasprintf("http://127.0.0.1:%d/hook", rc.port);
	{
		const char *extra[] = { "--escalation-webhook", url, "--webhook-poll-ms", "50", "--webhook-backoff-ms",
					"100", "--webhook-backoff-max-ms", "400", "--webhook-timeout-ms", "2000",
					"--metrics-history-ms", "600000", "--retain-days", "30", "--prune-interval-ms", "3600000",
					"--quota-interval-ms", "200", NULL };
		if (!h_ok(h, rc.port > 0 && h_server_start(h, extra) == 0, "rungd started with a webhook"))
			goto out;
	}
	path = xasprintf("%s/tests/data/facts_train_early_oom.json", h->root);
	oom = json_load_file(path, 0, NULL);
	wid = h_fake_register(h, "ops-w1", GPU, 24576);
	if (!h_ok(h, oom && wid, "facts loaded and fake worker registered"))
		goto out;
	test_metrics(h, wid, oom);
	test_metrics_history(h);
	test_retention(h);
	test_config_once(h, wid, oom);
	test_webhook(h, wid, oom, &rc);
	test_retry(h, wid, oom);
	test_drain(h, wid);
	test_priority(h, wid);
	test_owner_limit(h, wid);
	test_pool_limit(h, wid);
	test_quota(h, wid);
	test_pool_quota(h, wid);
	test_web_actions(h, wid, oom);
	test_web_cancel_matching(h);
	test_fair_share(h);
	test_pool_metrics(h);
out:
	json_decref(oom);
	free(path);
	free(wid);
	free(url);
	{
		int rcode = h_free(h);
		recv_stop(&rc);
		return rcode;
	}
}
