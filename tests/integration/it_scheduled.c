/* Integration: jobs that start later (migration 025) with the real rungd, rung-worker and simulated
 * trainer. A job submitted to start in an hour stays scheduled while the worker is idle, is queued
 * by rungd's scheduler once its start time is moved into the past (by SQL: no test waits for a
 * clock) and runs to success; POST /v1/jobs/{id}/start and the job page's "Start now" form queue
 * one at once; both wake the parked worker (rungd's fallback poll is set to two minutes, the
 * worker's long-poll to one, so only the wake-up can start the job within seconds); cancel of a
 * scheduled job, alone and by filter; every bad start field answered 400 naming it (envelope and
 * query); a past time queues at once; Idempotency-Key repeats and conflicts; the list's and the
 * queue page's state filter, /metrics and priority. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "jpath.h"
#include "util.h"

#define FAST_MS 8000 /* a due or started job runs within this (the wake-up, not a poll) */

static bool left_scheduled(void *arg)
{
	struct h_job_ref *n = arg;
	json_t *j = h_job(n->h, n->id);
	bool left = j && strcmp(h_str(j, "state"), "scheduled") != 0;

	json_decref(j);
	return left;
}

/* The time seconds from now by this machine's clock, RFC 3339 in UTC (heap). */
static char *time_in(long long seconds)
{
	char when[40];
	time_t t = (time_t)(util_wall_ms() / 1000 + seconds);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S+00:00", &tm);
	return xstrdup(when);
}

/* Submits config with extra (borrowed) and returns the status; *id the job's (heap) or NULL. */
static long submit(struct harness *h, const json_t *config, json_t *extra, char **id, json_t **job)
{
	json_t *body = extra ? json_deep_copy(extra) : json_object(), *j;
	long st = 0;

	json_object_set(body, "config", (json_t *)config);
	j = h_post(h, "/v1/jobs", body, &st);
	json_decref(body);
	if (id)
		*id = h_id(j, "id");
	if (job)
		*job = j;
	else
		json_decref(j);
	return st;
}

/* A job to start in an hour stays scheduled while the worker is idle and runs another job; moved
 * into the past, the scheduler queues it and it succeeds. */
static void test_release(struct harness *h)
{
	json_t *cfg = h_config("later", 10), *now_cfg = h_config("now", 10), *job = NULL, *got = NULL, *other = NULL;
	json_t *extra = json_pack("{s:i}", "start_in_s", 3600);
	char *id = NULL, *oid = NULL, *kinds = NULL;
	struct h_job_ref ns = { h, NULL };
	long st = submit(h, cfg, extra, &id, &job);
	int64_t t0;
	bool ok;

	h_ok(h, st == 201 && !strcmp(h_str(job, "state"), "scheduled") && json_is_string(json_object_get(job, "run_after")),
	     "start_in_s 3600: 201, scheduled, with its run_after (%ld)", st);
	if (!id)
		goto out;
	ns.id = id;
	got = h_job(h, id);
	h_ok(h, got && h_int(got, "starts_in_s") > 3590 && h_int(got, "starts_in_s") <= 3600 &&
		     !json_object_get(got, "placement"),
	     "GET: starts_in_s ~3600 (%lld), no placement", h_int(got, "starts_in_s"));
	/* the worker is idle but for another job, which it runs; the scheduled one stays */
	other = h_submit(h, now_cfg, NULL);
	oid = h_id(other, "id");
	json_decref(got);
	got = oid ? h_wait_job(h, oid, "succeeded", 60000) : NULL;
	h_ok(h, got != NULL, "a job without a start time runs at once on the idle worker");
	json_decref(got);
	got = h_job(h, id);
	h_ok(h, got && !strcmp(h_str(got, "state"), "scheduled") && h_int(got, "attempts") == 0,
	     "the one to start in an hour is still scheduled, never leased, with the worker idle");
	json_decref(got);
	/* its start time comes (moved into the past: no test waits an hour) */
	{
		const char *p[1] = { id };
		t0 = util_mono_ms();
		h_ok(h, h_sql_int(h, "UPDATE jobs SET run_after = now() - interval '1 second' WHERE id = $1::bigint "
				     "RETURNING 1", 1, p) == 1, "its run_after moved one second into the past");
	}
	ok = wait_until(h_job_leased, &ns, FAST_MS);
	h_ok(h, ok, "the scheduler queues it and the parked worker leases it at once (%lld ms)", (long long)(util_mono_ms() - t0));
	got = h_wait_job(h, id, "succeeded", 60000);
	h_ok(h, got && h_int(got, "attempts") == 1 && json_is_string(json_object_get(got, "run_after")),
	     "and it runs to success, keeping its run_after");
	kinds = h_event_kinds(h, id);
	h_ok(h, strstr(kinds, "submitted:>scheduled,start_time_reached:scheduled>queued,leased:queued>running") == kinds,
	     "events: submitted to scheduled, start_time_reached to queued, leased (%s)", kinds);
out:
	free(kinds);
	free(id);
	free(oid);
	json_decref(got);
	json_decref(other);
	json_decref(job);
	json_decref(extra);
	json_decref(cfg);
	json_decref(now_cfg);
}

/* POST /v1/jobs/{id}/start: queued at once, the worker woken; a second start is a 409; a
 * submitter starts its own, a worker token may not. */
static void test_start_now(struct harness *h)
{
	json_t *cfg = h_config("start_now", 10), *job = NULL, *ans = NULL, *extra = NULL;
	char *id = NULL, *sid = NULL, *kinds = NULL, *at = NULL;
	struct h_job_ref ns = { h, NULL };
	const char *saved = h->auth_token;
	long st;
	int64_t t0;
	bool ok;

	at = time_in(2 * 3600);
	extra = json_pack("{s:s}", "run_after", at);
	st = submit(h, cfg, extra, &id, &job);
	h_ok(h, st == 201 && !strcmp(h_str(job, "state"), "scheduled"), "run_after in two hours: scheduled (%ld)", st);
	if (!id)
		goto out;
	ns.id = id;
	t0 = util_mono_ms();
	ans = h_postf(h, NULL, &st, "/v1/jobs/%s/start", id);
	h_ok(h, st == 200 && !strcmp(h_str(ans, "state"), "queued"), "POST /start: 200, queued (%ld)", st);
	ok = wait_until(h_job_leased, &ns, FAST_MS);
	h_ok(h, ok, "the parked worker leases it at once (%lld ms)", (long long)(util_mono_ms() - t0));
	json_decref(ans);
	ans = h_postf(h, NULL, &st, "/v1/jobs/%s/start", id);
	h_ok(h, st == 409 && !strcmp(h_str(ans, "error"), "invalid_transition"), "a second start: 409 invalid_transition (%ld)", st);
	json_decref(ans);
	ans = h_post(h, "/v1/jobs/99999999/start", NULL, &st);
	h_ok(h, st == 404, "start of no such job: 404 (%ld)", st);
	json_decref(ans);
	json_decref(h_wait_job(h, id, "succeeded", 60000));
	kinds = h_event_kinds(h, id);
	h_ok(h, strstr(kinds, "submitted:>scheduled,started_now:scheduled>queued,leased:queued>running") == kinds,
	     "events: submitted to scheduled, started_now to queued, leased (%s)", kinds);
	/* a submitter's own job; a worker token may not start jobs */
	h->auth_token = h->submitter_token;
	json_decref(extra);
	extra = json_pack("{s:i}", "start_in_s", 7200);
	st = submit(h, cfg, extra, &sid, NULL);
	h->auth_token = h->worker_token;
	ans = h_postf(h, NULL, &st, "/v1/jobs/%s/start", sid ? sid : "0");
	h_ok(h, st == 403, "a worker token may not start a job (%ld)", st);
	json_decref(ans);
	h->auth_token = h->submitter_token;
	ans = h_postf(h, NULL, &st, "/v1/jobs/%s/start", sid ? sid : "0");
	h_ok(h, st == 200 && !strcmp(h_str(ans, "state"), "queued"), "its submitter starts its own (%ld)", st);
	json_decref(ans);
	h->auth_token = saved;
	if (sid)
		json_decref(h_wait_job(h, sid, "succeeded", 60000));
out:
	h->auth_token = saved;
	free(kinds);
	free(id);
	free(sid);
	free(at);
	json_decref(extra);
	json_decref(job);
	json_decref(cfg);
}

/* Cancel of a scheduled job, alone and as the jobs that match a label (state queued: not started
 * yet; state scheduled: only those); priority changes apply to it. */
static void test_cancel(struct harness *h)
{
	json_t *cfg = h_config("cancel_later", 10), *extra = json_pack("{s:i, s:{s:s}}", "start_in_s", 3600, "labels", "night", "n1");
	json_t *ans = NULL, *body = NULL;
	char *a = NULL, *b = NULL, *c = NULL;
	long st;

	submit(h, cfg, extra, &a, NULL);
	submit(h, cfg, extra, &b, NULL);
	submit(h, cfg, extra, &c, NULL);
	if (!h_ok(h, a && b && c, "three jobs scheduled, labelled night=n1"))
		goto out;
	body = json_pack("{s:i}", "priority", 5);
	ans = h_postf(h, body, &st, "/v1/jobs/%s/priority", a);
	h_ok(h, st == 200 && h_int(ans, "priority") == 5 && !strcmp(h_str(ans, "state"), "scheduled"),
	     "priority of a scheduled job: 200, still scheduled (%ld)", st);
	json_decref(ans);
	json_decref(body);
	ans = h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", a);
	h_ok(h, st == 200 && !strcmp(h_str(ans, "state"), "cancelled") &&
		     !strcmp(jpath_str(ans, "result.reason", ""), "cancelled while scheduled"),
	     "cancel of a scheduled job: cancelled at once, \"cancelled while scheduled\" (%ld)", st);
	json_decref(ans);
	body = json_pack("{s:s, s:s, s:b}", "label", "night=n1", "state", "scheduled", "dry_run", 1);
	ans = h_post(h, "/v1/jobs/cancel", body, &st);
	h_ok(h, st == 200 && json_array_size(json_object_get(ans, "ids")) == 2, "cancel matching, state scheduled, dry run: the two left");
	json_decref(ans);
	json_decref(body);
	body = json_pack("{s:s}", "label", "night=n1");
	ans = h_post(h, "/v1/jobs/cancel", body, &st);
	h_ok(h, st == 200 && json_array_size(json_object_get(ans, "ids")) == 2,
	     "cancel matching with the default state (not started yet): both scheduled ones cancelled (%ld)", st);
	json_decref(ans);
	json_decref(body);
	body = json_pack("{s:s, s:s}", "label", "night=n1", "state", "later");
	ans = h_post(h, "/v1/jobs/cancel", body, &st);
	h_ok(h, st == 400 && !strcmp(h_str(ans, "field"), "state"), "cancel matching, state later: 400 naming state (%ld)", st);
out:
	json_decref(ans);
	json_decref(body);
	free(a);
	free(b);
	free(c);
	json_decref(extra);
	json_decref(cfg);
}

/* Every bad start field is a 400 naming it, in the envelope and as a raw file's query parameter; a
 * past time queues at once; a raw file's ?start_in_s= schedules. */
static void test_bad_fields(struct harness *h)
{
	static const struct {
		const char *extra, *field, *what;
	} cases[] = {
		{ "{\"run_after\": \"tomorrow\"}", "run_after", "run_after not a time" },
		{ "{\"run_after\": \"2030-12-01T22:00:00\"}", "run_after", "run_after without its zone" },
		{ "{\"run_after\": \"2030-12-01 22:00:00Z\"}", "run_after", "run_after with a space" },
		{ "{\"run_after\": 1900000000}", "run_after", "run_after a number" },
		{ "{\"run_after\": \"2999-01-01T00:00:00Z\"}", "run_after", "run_after more than 365 days ahead" },
		{ "{\"start_in_s\": 0}", "start_in_s", "start_in_s 0" },
		{ "{\"start_in_s\": -5}", "start_in_s", "start_in_s negative" },
		{ "{\"start_in_s\": 31536001}", "start_in_s", "start_in_s past 365 days" },
		{ "{\"start_in_s\": \"60\"}", "start_in_s", "start_in_s a string" },
		{ "{\"start_in_s\": 1.5}", "start_in_s", "start_in_s a fraction" },
		{ "{\"start_in_s\": 60, \"run_after\": \"2030-12-01T22:00:00Z\"}", "start_in_s", "both given" },
	};
	json_t *cfg = h_config("bad_start", 10), *ans;
	char *file = json_dumps(cfg, JSON_COMPACT), *id = NULL;
	long st;

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		json_t *extra = json_loads(cases[i].extra, 0, NULL);
		st = submit(h, cfg, extra, NULL, &ans);
		h_ok(h, st == 400 && !strcmp(h_str(ans, "field"), cases[i].field), "%s: 400 naming %s (%ld %s)", cases[i].what,
		     cases[i].field, st, h_str(ans, "field"));
		json_decref(ans);
		json_decref(extra);
	}
	ans = h_request(h, "POST", "/v1/jobs?run_after=soon", file, strlen(file), NULL, &st);
	h_ok(h, st == 400 && !strcmp(h_str(ans, "field"), "run_after"), "?run_after=soon: 400 naming run_after (%ld)", st);
	json_decref(ans);
	ans = h_request(h, "POST", "/v1/jobs?start_in_s=0", file, strlen(file), NULL, &st);
	h_ok(h, st == 400 && !strcmp(h_str(ans, "field"), "start_in_s"), "?start_in_s=0: 400 naming start_in_s (%ld)", st);
	json_decref(ans);
	ans = h_request(h, "POST", "/v1/jobs?start_in_s=60&run_after=2030-12-01T22:00:00Z", file, strlen(file), NULL, &st);
	h_ok(h, st == 400 && !strcmp(h_str(ans, "field"), "start_in_s"), "both in the query: 400 naming start_in_s (%ld)", st);
	json_decref(ans);
	ans = h_request(h, "POST", "/v1/jobs?start_in_s=3600&name=raw_later", file, strlen(file), NULL, &st);
	h_ok(h, st == 201 && !strcmp(h_str(ans, "state"), "scheduled"), "a raw file's ?start_in_s=3600: scheduled (%ld)", st);
	id = h_id(ans, "id");
	json_decref(ans);
	if (id) {
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id)); /* not to run later in this test */
		free(id);
	}
	ans = h_request(h, "POST", "/v1/jobs?run_after=2020-01-01T00:00:00%2B01:00&name=raw_past", file, strlen(file), NULL, &st);
	h_ok(h, st == 201 && !strcmp(h_str(ans, "state"), "queued") && json_is_null(json_object_get(ans, "run_after")),
	     "a raw file's past ?run_after= (+ as %%2B): queued at once, no run_after (%ld)", st);
	id = h_id(ans, "id");
	json_decref(ans);
	if (id) {
		json_decref(h_wait_job(h, id, "succeeded", 60000));
		free(id);
	}
	{
		json_t *extra = json_pack("{s:s}", "run_after", "2001-02-03T04:05:06Z");
		st = submit(h, cfg, extra, &id, &ans);
		h_ok(h, st == 201 && !strcmp(h_str(ans, "state"), "queued"), "an envelope's past run_after: queued at once (%ld)", st);
		json_decref(ans);
		json_decref(extra);
		if (id)
			json_decref(h_wait_job(h, id, "succeeded", 60000));
		free(id);
	}
	free(file);
	json_decref(cfg);
}

/* The same Idempotency-Key: the same body (the same start) is a repeat, another start a conflict. */
static void test_idempotency(struct harness *h)
{
	char *at = time_in(3 * 86400);
	json_t *cfg = h_config("idem_later", 10), *b1 = json_pack("{s:O, s:i}", "config", cfg, "start_in_s", 3600);
	json_t *b2 = json_pack("{s:O, s:i}", "config", cfg, "start_in_s", 7200);
	json_t *b3 = json_pack("{s:O, s:s}", "config", cfg, "run_after", at);
	const char *hk[] = { "Idempotency-Key: nightly-1", NULL };
	long s1 = 0, s2 = 0, s3 = 0, s4 = 0;
	json_t *a = h_post_hdr(h, "/v1/jobs", b1, hk, &s1), *b = h_post_hdr(h, "/v1/jobs", b1, hk, &s2);
	json_t *c = h_post_hdr(h, "/v1/jobs", b2, hk, &s3), *d = h_post_hdr(h, "/v1/jobs", b3, hk, &s4);

	h_ok(h, s1 == 201 && !strcmp(h_str(a, "state"), "scheduled"), "a keyed scheduled submit: 201 (%ld)", s1);
	h_ok(h, s2 == 200 && h_int(a, "id") == h_int(b, "id") && !strcmp(h_str(b, "run_after"), h_str(a, "run_after")),
	     "the same body again: 200, the same job and start time (%ld)", s2);
	h_ok(h, s3 == 409 && s4 == 409, "the key with another start_in_s or a run_after: 409 (%ld, %ld)", s3, s4);
	json_decref(h_postf(h, NULL, &s1, "/v1/jobs/%lld/cancel", h_int(a, "id")));
	json_decref(a);
	json_decref(b);
	json_decref(c);
	json_decref(d);
	json_decref(b1);
	json_decref(b2);
	json_decref(b3);
	json_decref(cfg);
	free(at);
}

/* GET /v1/jobs?state=scheduled, the queue page's filter and a job page's line and "Start now" form
 * (same-site only), /metrics. */
static void test_seen(struct harness *h)
{
	json_t *cfg = h_config("seen_later", 10), *extra = json_pack("{s:i}", "start_in_s", 7500), *l = NULL;
	char *id = NULL, *page = NULL, *form = NULL;
	struct h_job_ref ns = { h, NULL };
	long st = submit(h, cfg, extra, &id, NULL);

	if (!h_ok(h, st == 201 && id, "a job to start in 2h05m"))
		goto out;
	ns.id = id;
	l = h_get(h, "/v1/jobs?state=scheduled", &st);
	h_ok(h, st == 200 && json_array_size(json_object_get(l, "jobs")) == 1 &&
		     h_int(json_array_get(json_object_get(l, "jobs"), 0), "id") == atoll(id),
	     "GET /v1/jobs?state=scheduled lists it alone (%ld)", st);
	json_decref(l);
	l = h_get(h, "/v1/jobs?state=later", &st);
	h_ok(h, st == 400 && !strcmp(h_str(l, "field"), "state"), "?state=later: 400 naming state");
	json_decref(l);
	l = NULL;
	st = h_browse(h, h->admin_token, "GET", "/ui/jobs?state=scheduled", NULL, NULL);
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "seen_later") && !strstr(h->last_body, "idem_later"),
	     "the queue page's state=scheduled filter (%ld)", st);
	page = xasprintf("/ui/jobs/%s", id);
	st = h_browse(h, h->admin_token, "GET", page, NULL, NULL);
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "<dt>scheduled</dt><dd class=\"reason\">scheduled: starts at ") &&
		     (strstr(h->last_body, "(in 2h04m)") || strstr(h->last_body, "(in 2h05m)")),
	     "the job page: \"scheduled: starts at T (in 2h05m)\"");
	form = xasprintf("action=\"/ui/jobs/%s/start\"", id);
	h_ok(h, h->last_body && strstr(h->last_body, form) && strstr(h->last_body, "Start now"), "and a Start now form");
	free(form);
	form = xasprintf("/ui/jobs/%s/start", id);
	st = h_browse(h, h->admin_token, "POST", form, "", "Sec-Fetch-Site: cross-site");
	h_ok(h, st == 403, "Start now from another site: 403 (%ld)", st);
	l = h_job(h, id);
	h_ok(h, l && !strcmp(h_str(l, "state"), "scheduled"), "and it changed nothing");
	json_decref(l);
	l = NULL;
	json_decref(h_request(h, "GET", "/metrics", NULL, 0, NULL, &st));
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "rung_jobs{state=\"scheduled\"} 1\n") &&
		     strstr(h->last_body, "rung_scheduled_overdue_seconds 0\n"),
	     "/metrics: rung_jobs{state=\"scheduled\"} 1, rung_scheduled_overdue_seconds 0");
	{
		/* its owner's count of scheduled jobs: /metrics, GET /v1/owners and the GPUs page */
		char *sample = xasprintf("rung_owner_jobs{owner=\"%s\",state=\"scheduled\"} 1\n", "it-admin");
		json_t *o, *e;
		size_t i;
		int seen = 0;
		h_ok(h, h->last_body && strstr(h->last_body, sample), "/metrics: %s", sample);
		free(sample);
		o = h_get(h, "/v1/owners", &st);
		json_array_foreach(json_object_get(o, "owners"), i, e)
			seen += !strcmp(h_str(e, "owner"), "it-admin") && h_int(e, "scheduled") == 1;
		h_ok(h, st == 200 && seen == 1, "GET /v1/owners: its owner has 1 scheduled job (%ld)", st);
		json_decref(o);
		st = h_browse(h, h->admin_token, "GET", "/ui/gpus", NULL, NULL);
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "<th>scheduled</th>"),
		     "the GPUs page's owners table has a scheduled column (%ld)", st);
	}
	st = h_browse(h, h->admin_token, "POST", form, "", "Sec-Fetch-Site: same-origin");
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, page), "Start now from the page: 303 back to it (%ld)", st);
	h_ok(h, wait_until(left_scheduled, &ns, FAST_MS), "and the job left scheduled");
	json_decref(h_wait_job(h, id, "succeeded", 60000));
out:
	json_decref(l);
	free(form);
	free(page);
	free(id);
	json_decref(extra);
	json_decref(cfg);
}

/* Start deadlines (migration 039): a job of a pool no worker takes, to start within 2 s, is cancelled
 * by the scheduler soon after, saying why (result, event, webhook-visible state), and a retry clears its
 * deadline; one that starts in time runs as any other; rungctl show says by when a job must start;
 * every bad deadline is a 400 naming it, with nothing stored. */
static void test_deadline(struct harness *h)
{
	json_t *cfg = h_config("deadline", 3), *ex, *j = NULL;
	char *id = NULL, *ok_id = NULL, *when, *out;
	long st;
	int rc = 0;
	long long before;

	ex = json_pack("{s:i, s:s}", "start_within_s", 2, "pool", "it-deadline-nowhere");
	st = submit(h, cfg, ex, &id, &j);
	json_decref(ex);
	h_ok(h, st == 201 && id && json_is_string(json_object_get(j, "start_by")) && !strcmp(h_str(j, "state"), "queued"),
	     "a job to start within 2 s, in a pool no worker takes: 201, queued, with its start_by (%ld)", st);
	json_decref(j);
	j = id ? h_wait_job(h, id, "cancelled", 15000) : NULL;
	h_ok(h, j && strstr(h_str(json_object_get(j, "result"), "reason"), "not started by ") &&
		     strstr(h_str(json_object_get(j, "result"), "reason"), "its start deadline: cancelled while queued"),
	     "the scheduler cancels it once its deadline passed, saying why (%s)", j ? h_str(json_object_get(j, "result"), "reason") : "-");
	json_decref(j);
	{
		const char *p[] = { id ? id : "0" };
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM event_log WHERE job_id = $1::bigint AND kind = 'start_deadline_passed' "
				     "AND from_state = 'queued' AND to_state = 'cancelled'", 1, p) == 1,
		     "an event start_deadline_passed, queued -> cancelled");
	}
	j = id ? h_postf(h, NULL, &st, "/v1/jobs/%s/retry", id) : NULL;
	h_ok(h, st == 200 && !strcmp(h_str(j, "state"), "queued") && json_is_null(json_object_get(j, "start_by")),
	     "a retry queues it again without its deadline (%ld)", st);
	json_decref(j);
	if (id)
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id));

	/* one that starts in time runs as any other */
	ex = json_pack("{s:i}", "start_within_s", 600);
	st = submit(h, cfg, ex, &ok_id, NULL);
	json_decref(ex);
	j = ok_id ? h_wait_job(h, ok_id, "succeeded", 60000) : NULL;
	h_ok(h, st == 201 && j && json_is_string(json_object_get(j, "start_by")),
	     "a job that starts before its deadline succeeds, its start_by kept (%ld)", st);
	json_decref(j);

	/* rungctl show says by when a queued job must start */
	when = time_in(7200);
	ex = json_pack("{s:s, s:s}", "start_by", when, "pool", "it-deadline-nowhere");
	free(id);
	id = NULL;
	st = submit(h, cfg, ex, &id, NULL);
	json_decref(ex);
	{
		char *args = xasprintf("show %s", id ? id : "0");
		out = h_rungctl(h, args, &rc);
		h_ok(h, rc == 0 && out && strstr(out, "deadline") && strstr(out, "must start by ") &&
			     strstr(out, "else it is cancelled"),
		     "rungctl show: \"must start by T (in W), else it is cancelled\" (%d %.400s)", rc, out);
		free(out);
		free(args);
	}
	if (id)
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id));
	free(when);

	/* bad deadlines: 400 naming the field, nothing stored */
	before = h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);
	{
		char *past = time_in(-60), *soon = time_in(600), *later = time_in(3600);
		json_t *bad[] = {
			json_pack("{s:s}", "start_by", past),
			json_pack("{s:s}", "start_by", "tomorrow"),
			json_pack("{s:i}", "start_within_s", 0),
			json_pack("{s:s, s:i}", "start_by", later, "start_within_s", 60),
			json_pack("{s:s, s:s}", "run_after", later, "start_by", soon),
			json_pack("{s:i, s:i}", "start_in_s", 600, "start_within_s", 60),
		};
		static const char *const field[] = { "start_by", "start_by", "start_within_s", "start_within_s", "start_by",
						     "start_within_s" };
		for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
			json_t *body = json_deep_copy(bad[i]), *a;
			json_object_set(body, "config", cfg);
			a = h_post(h, "/v1/jobs", body, &st);
			h_ok(h, st == 400 && !strcmp(h_str(a, "field"), field[i]), "bad deadline %zu: 400 naming %s (%ld %s %s)", i,
			     field[i], st, h_str(a, "field"), h_str(a, "message"));
			json_decref(a);
			json_decref(body);
			json_decref(bad[i]);
		}
		free(past);
		free(soon);
		free(later);
	}
	out = h_rungctl(h, "submit tests/data/aitk_flux_lora_24gb.yaml --start-by 2020-01-01T00:00:00Z", &rc);
	h_ok(h, rc == 2 && out && strstr(out, "--start-by has passed"), "rungctl submit --start-by in the past: exit 2 (%d)", rc);
	free(out);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == before, "and none of them stored a job");
	free(id);
	free(ok_id);
	json_decref(cfg);
}

int main(void)
{
	struct harness *h = h_new("it_scheduled");
	/* the fallback poll at two minutes and the worker's long-poll at one: a job that runs within
	 * seconds was woken by rungd (lease_announce), not found by a poll */
	const char *server_args[] = { "--poll-fallback-ms", "120000", NULL };
	const char *worker_args[] = { "--lease-wait-ms", "60000", NULL };
	struct h_worker_opts wo = { .args = worker_args };
	struct h_worker *w;

	if (!h_ok(h, h_server_start(h, server_args) == 0, "rungd starts"))
		return h_free(h);
	w = h_worker_start(h, "w1", &wo);
	if (!h_ok(h, w != NULL, "a worker starts"))
		return h_free(h);
	test_bad_fields(h);
	test_release(h);
	test_start_now(h);
	test_cancel(h);
	test_idempotency(h);
	test_seen(h);
	test_deadline(h);
	h_worker_stop(h, w, SIGTERM);
	return h_free(h);
}
