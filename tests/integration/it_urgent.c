/* Integration: preemption by priority (rungd --preempt-priority, sql/functions/44_preempt.sql). Over
 * the protocol, with fake workers and rung_preempt_pass called by hand (rungd's timer an hour away): an
 * urgent job (priority at the bound or below) stops nothing while the bound is unset, while it is not
 * urgent, before the running attempt ran --preempt-after-s, or while an idle GPU can take it; with
 * every GPU busy it stops the attempt of the worst priority (the last started of those), once, with
 * an event and a placement that say why; the stopped job is queued again unchanged and the freed GPU
 * leases the urgent job; an urgent job never stops another urgent one; where a worker borrows, a job
 * that is not urgent stops only borrowed work, and never an urgent job that runs borrowed. A submitter token may not give
 * an urgent priority (403 naming priority, nothing stored), support and admin may. End to end, with a
 * real rung-worker and the simulated trainer: a long job is stopped for an urgent one, which runs and
 * succeeds, then the long job resumes from its checkpoint on the same host and succeeds. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"

/* Submits a job named name of steps steps at priority prio into pool (NULL: default) as token (NULL:
 * the harness's admin); returns its id (heap) or NULL, *status the answer's status. */
static char *submit_in(struct harness *h, const char *token, const char *name, int steps, int prio, const char *pool,
		       long *status)
{
	const char *saved = h->auth_token;
	json_t *cfg = h_config(name, steps), *body = json_pack("{s:O, s:i}", "config", cfg, "priority", prio), *j;
	char *id;

	if (pool)
		json_object_set_new(body, "pool", json_string(pool));
	if (token)
		h->auth_token = token;
	j = h_post(h, "/v1/jobs", body, status);
	h->auth_token = saved;
	id = (*status == 201 || *status == 200) ? h_id(j, "id") : NULL;
	json_decref(j);
	json_decref(body);
	json_decref(cfg);
	return id;
}

static char *submit(struct harness *h, const char *token, const char *name, int steps, int prio, long *status)
{
	return submit_in(h, token, name, steps, prio, NULL, status);
}

/* How many attempts one rung_preempt_pass(after_s, 10, no fair share, urgent) call marked (-1 on error);
 * urgent NULL: the bound unset. */
static long long preempt_now(struct harness *h, const char *after_s, const char *urgent)
{
	const char *p[] = { after_s, urgent };

	return h_sql_int(h, "SELECT jsonb_array_length(rung_preempt_pass($1::int, 10, false, $2::int))", 2, p);
}

/* An integer read about one id (one parameter). */
static long long sql_of(struct harness *h, const char *sql, const char *id)
{
	const char *p[] = { id ? id : "0" };

	return h_sql_int(h, sql, 1, p);
}

/* Leases on the fake worker wid's GPU gpu; returns the lease (new reference) or NULL; *job (heap)
 * its job, *attempt (heap) its attempt. */
static json_t *lease(struct harness *h, const char *wid, const char *gpu, char **job, char **attempt)
{
	long st = 0;
	json_t *l = h_fake_lease(h, wid ? wid : "0", gpu, 2000, &st);

	*job = h_id(l, "job_id");
	*attempt = h_id(l, "attempt_id");
	return l;
}

/* Whether the string a and the id b name the same job. */
static bool same(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static void test_trust(struct harness *h)
{
	long st = 0;
	long long before = h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);
	char *u = submit(h, h->submitter_token, "urgent_submitter", 10, 10, &st), *n = NULL;
	json_t *body = NULL, *r = NULL;

	h_ok(h, !u && st == 403 && strstr(h->last_body ? h->last_body : "", "\"field\":\"priority\"") &&
		     strstr(h->last_body, "urgent (10 or below, rungd --preempt-priority)"),
	     "a submitter token's job at priority 10 (urgent): 403 naming priority (%ld %.300s)", st,
	     h->last_body ? h->last_body : "");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == before, "and nothing is stored");
	{
		const char *saved = h->auth_token;
		json_t *j;
		h->auth_token = h->submitter_token;
		static const char *const yaml[] = { "Content-Type: application/yaml", NULL };
		char *file = h_slurp("tests/data/aitk_flux_lora_24gb.yaml");
		j = h_request(h, "POST", "/v1/jobs?priority=-3", file ? file : "", file ? strlen(file) : 0, yaml, &st);
		free(file);
		h->auth_token = saved;
		json_decref(j);
		h_ok(h, st == 403 && strstr(h->last_body ? h->last_body : "", "\"field\":\"priority\""),
		     "nor as a raw file's ?priority=-3 (%ld %.300s)", st, h->last_body ? h->last_body : "");
	}
	n = submit(h, h->submitter_token, "urgent_not", 10, 11, &st);
	h_ok(h, n && st == 201, "priority 11 (not urgent) is the submitter's to give");
	body = json_pack("{s:i}", "priority", 0);
	{
		const char *saved = h->auth_token;
		h->auth_token = h->submitter_token;
		r = h_postf(h, body, &st, "/v1/jobs/%s/priority", n ? n : "0");
		h->auth_token = saved;
	}
	h_ok(h, st == 403 && sql_of(h, "SELECT priority FROM jobs WHERE id = $1::bigint", n) == 11,
	     "nor may it change its job's priority to 0 (403; it stays 11)");
	json_decref(r);
	r = h_postf(h, body, &st, "/v1/jobs/%s/priority", n ? n : "0");
	h_ok(h, st == 200 && sql_of(h, "SELECT priority FROM jobs WHERE id = $1::bigint", n) == 0,
	     "an admin may (200; it is 0)");
	json_decref(r);
	r = h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", n ? n : "0");
	json_decref(r);
	json_decref(body);
	free(u);
	free(n);
}

static void test_protocol(struct harness *h)
{
	char *w1 = h_fake_register(h, "urg-1", "GPU-urg-1", 24576), *w2 = h_fake_register(h, "urg-2", "GPU-urg-2", 24576);
	char *w3 = NULL, *lo = NULL, *mid = NULL, *u = NULL, *u2 = NULL, *u3 = NULL, *n = NULL;
	char *got = NULL, *a_lo = NULL, *a_mid = NULL, *a = NULL;
	json_t *l_lo = NULL, *l_mid = NULL, *l = NULL, *ans = NULL, *facts = NULL;
	long st = 0;

	lo = submit(h, NULL, "urg_low", 10, 100, &st);
	mid = submit(h, NULL, "urg_mid", 10, 50, &st);
	if (!h_ok(h, w1 && w2 && lo && mid, "two workers of one GPU each, jobs of priority 100 and 50"))
		goto out;
	l_lo = lease(h, w1, "GPU-urg-1", &got, &a_lo);
	h_ok(h, same(got, mid), "the first GPU leases the priority-50 job");
	free(got);
	l_mid = lease(h, w2, "GPU-urg-2", &got, &a_mid);
	h_ok(h, same(got, lo), "the second the priority-100 one");
	free(got);
	got = NULL;
	/* names follow the jobs: a_lo is the attempt of mid, a_mid of lo; swap so that each names its job */
	{
		char *t = a_lo;
		json_t *tl = l_lo;
		a_lo = a_mid;
		a_mid = t;
		l_lo = l_mid;
		l_mid = tl;
	}
	n = submit(h, NULL, "urg_notyet", 10, 20, &st);
	h_ok(h, n && preempt_now(h, "0", "10") == 0, "a queued job of priority 20 is not urgent (bound 10): nothing is stopped");
	u = submit(h, NULL, "urg_one", 10, 0, &st);
	h_ok(h, u && preempt_now(h, "0", NULL) == 0, "an urgent job (priority 0), the bound unset: nothing is stopped");
	h_ok(h, preempt_now(h, "3600", "0") == 0, "the bound 0, the attempts ran less than --preempt-after-s: nothing is stopped");
	h_ok(h, preempt_now(h, "0", "-1") == 0, "the bound -1 (priority 0 is not urgent): nothing is stopped");
	w3 = h_fake_register(h, "urg-3", "GPU-urg-3", 24576);
	h_ok(h, w3 && preempt_now(h, "0", "10") == 0, "an idle GPU may run the urgent job: nothing is stopped");
	json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/drain", w3 ? w3 : "0"));
	h_ok(h, st == 200 && preempt_now(h, "0", "10") == 1, "that host drained: one attempt is marked");
	h_ok(h, sql_of(h, "SELECT preempt_for FROM attempts WHERE id = $1::bigint", a_lo) == atoll(u ? u : "0") &&
		     sql_of(h, "SELECT count(*) FROM attempts WHERE id = $1::bigint AND preempted_at IS NOT NULL", a_mid) == 0,
	     "the attempt of the worst priority (100) is marked for the urgent job, not the one of priority 50");
	h_ok(h, sql_of(h, "SELECT count(*) FROM events WHERE job_id = $1::bigint AND kind = 'preempt_requested' "
			  "AND data->>'why' = 'priority' AND reason LIKE '%of priority 0 (urgent: 10 or below; this job''s is 100)%'",
		       lo) == 1, "with an event preempt_requested on it that says why");
	h_ok(h, preempt_now(h, "0", "10") == 0, "a second pass stops nothing more");
	ans = h_job(h, lo);
	h_ok(h, ans && !strcmp(h_str(json_object_get(ans, "stopping"), "why"), "priority") &&
		     h_int(json_object_get(ans, "stopping"), "for_job") == atoll(u ? u : "0"),
	     "the stopped job says it is being stopped, for which job and why (priority)");
	json_decref(ans);
	ans = h_job(h, u);
	{
		const json_t *pre = json_object_get(json_object_get(ans, "placement"), "preempting");
		h_ok(h, pre && !strcmp(h_str(pre, "why"), "priority") && h_int(pre, "priority") == 100 &&
			     h_int(pre, "job_id") == atoll(lo),
		     "the urgent job's placement names the job stopped for it, why and its priority");
	}
	json_decref(ans);
	h_ok(h, h_show_has(h, u, ", of a worse priority (100), is being stopped on GPU GPU-urg-2 for it"),
	     "rungctl show says so");
	ans = h_fake_heartbeat(h, a_lo, h_str(l_lo, "token"), &st);
	h_ok(h, st == 200 && json_is_true(json_object_get(ans, "preempt")), "its heartbeat answers preempt");
	json_decref(ans);
	facts = h_facts_stopped(10, 4);
	ans = h_fake_finish(h, a_lo, h_str(l_lo, "token"), facts, &st);
	h_ok(h, st == 200 && !strcmp(h_str(ans, "job_state"), "queued") &&
		     !strcmp(h_str(json_object_get(ans, "decision"), "action"), "requeue_preempted"),
	     "its finish queues the job again unchanged (requeue_preempted)");
	json_decref(ans);
	l = lease(h, w2, "GPU-urg-2", &got, &a);
	h_ok(h, same(got, u), "the freed GPU leases the urgent job");

	/* a second urgent job stops the priority-50 one; a third finds only urgent jobs running */
	u2 = submit(h, NULL, "urg_two", 10, 5, &st);
	h_ok(h, u2 && preempt_now(h, "0", "10") == 1 &&
		     sql_of(h, "SELECT preempt_for FROM attempts WHERE id = $1::bigint", a_mid) == atoll(u2 ? u2 : "0"),
	     "a second urgent job (priority 5) stops the priority-50 job, not the urgent one running");
	ans = h_fake_finish(h, a_mid, h_str(l_mid, "token"), facts, &st);
	json_decref(ans);
	json_decref(l);
	free(got);
	free(a);
	l = lease(h, w1, "GPU-urg-1", &got, &a);
	h_ok(h, same(got, u2), "and runs on its GPU");
	u3 = submit(h, NULL, "urg_three", 10, -10, &st);
	h_ok(h, u3 && preempt_now(h, "0", "10") == 0, "an urgent job of priority -10 never stops an urgent one (0, 5)");
out:
	/* what is left queued or running goes, so that the real worker below starts on an empty queue */
	h_cancel_active(h, "pool", "default");
	json_decref(l_lo);
	json_decref(l_mid);
	json_decref(l);
	json_decref(facts);
	free(w1);
	free(w2);
	free(w3);
	free(lo);
	free(mid);
	free(u);
	free(u2);
	free(u3);
	free(n);
	free(got);
	free(a_lo);
	free(a_mid);
	free(a);
}

/* A pool where a worker borrows: a job that is not urgent may stop only the borrowed attempt, never
 * one of its own pool of a worse priority; an urgent one then stops that one. */
static void test_mixed(struct harness *h)
{
	char *m1 = h_fake_register_pool(h, "mx-1", "GPU-mx-1", 24576, "mx", NULL);
	char *m2 = h_fake_register_pool(h, "mx-2", "GPU-mx-2", 24576, "mx", "[\"mx-lend\"]");
	char *lent = NULL, *own = NULL, *q1 = NULL, *q2 = NULL, *u = NULL, *got = NULL, *a_lent = NULL, *a_own = NULL;
	json_t *l1 = NULL, *l2 = NULL;
	long st = 0;

	lent = submit_in(h, NULL, "mx_lent", 10, 100, "mx-lend", &st);
	l2 = lease(h, m2, "GPU-mx-2", &got, &a_lent);
	h_ok(h, same(got, lent), "a worker of pool mx borrows a job of mx-lend");
	free(got);
	own = submit_in(h, NULL, "mx_own", 10, 150, "mx", &st);
	l1 = lease(h, m1, "GPU-mx-1", &got, &a_own);
	h_ok(h, same(got, own), "the other runs a job of mx of priority 150");
	q1 = submit_in(h, NULL, "mx_q1", 10, 100, "mx", &st);
	h_ok(h, sql_of(h, "UPDATE jobs SET constraints = '{\"exclude_gpus\": [\"GPU-mx-2\"]}' WHERE id = $1::bigint "
			  "RETURNING 1", q1) == 1 && preempt_now(h, "0", "10") == 0,
	     "a job of mx of priority 100 (not urgent) that may not run on the borrowed GPU: nothing is stopped");
	q2 = submit_in(h, NULL, "mx_q2", 10, 100, "mx", &st);
	h_ok(h, sql_of(h, "UPDATE jobs SET priority = 5 WHERE id = $1::bigint RETURNING 1", lent) == 1 && q2 &&
		     preempt_now(h, "0", "10") == 0,
	     "a second one that may: while the borrowed job is urgent (priority 5), it is not stopped");
	h_ok(h, sql_of(h, "UPDATE jobs SET priority = 100 WHERE id = $1::bigint RETURNING 1", lent) == 1 &&
		     preempt_now(h, "0", "10") == 1 &&
		     sql_of(h, "SELECT preempt_for FROM attempts WHERE id = $1::bigint", a_lent) == atoll(q2 ? q2 : "0"),
	     "of priority 100 again, the borrowed attempt is stopped for it");
	u = submit_in(h, NULL, "mx_urgent", 10, 1, "mx", &st);
	h_ok(h, u && preempt_now(h, "0", "10") == 1 &&
		     sql_of(h, "SELECT preempt_for FROM attempts WHERE id = $1::bigint", a_own) == atoll(u ? u : "0"),
	     "an urgent job of mx stops the job of its own pool of priority 150");
	h_cancel_active(h, "pool", "mx");
	h_cancel_active(h, "pool", "mx-lend");
	json_decref(l1);
	json_decref(l2);
	free(m1);
	free(m2);
	free(lent);
	free(own);
	free(q1);
	free(q2);
	free(u);
	free(got);
	free(a_lent);
	free(a_own);
}

/* With a real rung-worker and the simulated trainer, rungd preempting after 0 s for priorities 10 and below. */
static void test_real(struct harness *h)
{
	static const char *const args[] = { "--log-interval-ms", "200", NULL };
	const struct h_worker_opts opts = { .args = args };
	const char *extra[] = { "--preempt-after-s", "0", "--preempt-priority", "10", NULL };
	struct h_worker *w = NULL;
	json_t *j = NULL;
	char *d = NULL, *v = NULL, *log = NULL;
	long st = 0;

	h_ok(h, h_server_stop(h, SIGTERM) == 0 && h_server_start(h, extra) == 0,
	     "rungd restarted with --preempt-after-s 0 --preempt-priority 10");
	w = h_worker_start(h, "urg-real", &opts);
	d = w ? h_long_job_saved(h, "urg_long", NULL) : NULL;
	if (!h_ok(h, w && d, "a worker, and a long job of the default priority 100 (max_attempts 1)"))
		goto out;
	v = submit(h, NULL, "urg_real", 10, 0, &st);
	j = v ? h_wait_job(h, v, "succeeded", 60000) : NULL;
	h_ok(h, j != NULL, "an urgent job (priority 0) is submitted: it runs there and succeeds");
	json_decref(j);
	j = NULL;
	h_ok_stopped_then_resumed(h, d, "the long job");
	log = h_slurp(h->server.log_path);
	h_ok(h, log && strstr(log, "why=priority") != NULL, "rungd's log says why it stopped the attempt");
	{
		char *text = h_scrape(h);
		h_ok(h, h_sample(text, "rung_preempt_stops_total{why=\"priority\"}") == 1 &&
			     h_sample(text, "rung_preempt_stops_total{why=\"borrowed\"}") == 0,
		     "/metrics counts it by why: rung_preempt_stops_total{why=\"priority\"} 1, {why=\"borrowed\"} 0");
		free(text);
	}
out:
	json_decref(j);
	free(d);
	free(v);
	free(log);
}

int main(void)
{
	struct harness *h = h_new("it_urgent");
	/* the preemption timer an hour away: the protocol tests call rung_preempt_pass by hand */
	const char *protocol[] = { "--lease-seconds", "120", "--preempt-after-s", "0", "--preempt-priority", "10",
				   "--reap-interval-ms", "3600000", NULL };

	if (!h_ok(h, h_server_start(h, protocol) == 0, "rungd starts (--preempt-priority 10, no pass due)"))
		return h_free(h);
	test_trust(h);
	test_protocol(h);
	test_mixed(h);
	test_real(h);
	return h_free(h);
}
