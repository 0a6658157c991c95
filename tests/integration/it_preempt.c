/* Integration: preemption of borrowed work (migration 029, sql/functions/44_preempt.sql, rungd
 * --preempt-after-s). Over the protocol, with fake workers and rung_preempt called by hand (rungd's
 * timer off): nothing is stopped while the lender's own pool has no job, while that job's owner is
 * paused, before the attempt ran --preempt-after-s, or while an idle GPU of the pool can take the
 * job; with the idle host drained, the borrowed attempt is marked once, its heartbeat says cancel and
 * preempt (the release before's heartbeat function does not), its finish queues the job again
 * unchanged (outcome and class preempted, an event), the worker then leases its own pool's job, the
 * preempted attempt does not count against max_attempts, and a cancel requested meanwhile wins.
 * End to end, with a real rung-worker and the simulated trainer: a long job borrowed from another
 * pool is stopped for the worker's own pool's job, which runs and succeeds, then the borrowed job
 * resumes from its checkpoint and succeeds; the worker's log, /metrics and GET /v1/usage say so. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"

/* Submits a job named name of steps steps into pool with recovery.max_attempts max_attempts (0:
 * the default), as token (NULL: the harness's); returns its id (heap) or NULL. */
static char *submit(struct harness *h, const char *token, const char *name, int steps, const char *pool, int max_attempts)
{
	const char *saved = h->auth_token;
	json_t *extra = json_pack("{s:s}", "pool", pool);
	char *id;

	if (max_attempts > 0)
		json_object_set_new(extra, "recovery", json_pack("{s:i}", "max_attempts", max_attempts));
	if (token)
		h->auth_token = token;
	id = h_submit_id(h, name, steps, extra);
	h->auth_token = saved;
	json_decref(extra);
	return id;
}

/* Plays (old true) or ends a rungd of a release before 029 having put its own function files back:
 * the recorded set without functions/44_preempt (rung_stops_ready false). */
static void old_functions(struct harness *h, bool old)
{
	PGresult *r = h_sql(h, old ? "UPDATE schema_repeatables SET name = 'functions/44_preempt.away' "
				     "WHERE name = 'functions/44_preempt'"
				   : "UPDATE schema_repeatables SET name = 'functions/44_preempt' "
				     "WHERE name = 'functions/44_preempt.away'", 0, NULL);

	PQclear(r);
}

/* How many attempts one rung_preempt(after_s, 10, no fair share) call marked (-1 on error). */
static long long preempt_now(struct harness *h, const char *after_s)
{
	const char *p[] = { after_s };

	return h_sql_int(h, "SELECT jsonb_array_length(rung_preempt($1::int, 10, false))", 1, p);
}

/* An integer read about one id (one parameter). */
static long long sql_of(struct harness *h, const char *sql, const char *id)
{
	const char *p[] = { id ? id : "0" };

	return h_sql_int(h, sql, 1, p);
}

/* FACTS of a CUDA OOM in training at step 3 on a 24 GiB card. */
static json_t *facts_oom(void)
{
	return json_pack("{s:i, s:n, s:b, s:s, s:s, s:i, s:i, s:i, s:i, s:{s:i, s:i}, s:{s:i, s:i, s:i, s:i, s:[]},"
			 " s:s, s:i, s:[s]}", "exit_code", 1, "signal", "cancelled", 0, "phase", "train", "oom_phase", "train",
			 "first_step", 0, "last_step", 3, "steps_done", 3, "total_steps", 10, "signatures", "cuda_oom", 1,
			 "error_running_job", 1, "oom", "tried_to_allocate_mib", 2048, "total_capacity_mib", 24564,
			 "free_mib", 1100, "allocated_by_pytorch_mib", 21564, "processes", "error",
			 "torch.OutOfMemoryError: CUDA out of memory", "duration_ms", 4000, "log_tail",
			 "torch.OutOfMemoryError: CUDA out of memory");
}

/* The id of the live token named name (heap) or NULL. */
static char *token_id(struct harness *h, const char *name)
{
	long st = 0;
	json_t *r = h_get(h, "/v1/tokens", &st), *t;
	char *id = NULL;
	size_t i;

	json_array_foreach(json_object_get(r, "tokens"), i, t)
		if (!id && !strcmp(h_str(t, "name"), name) && json_is_null(json_object_get(t, "revoked_at")))
			id = h_id(t, "id");
	json_decref(r);
	return id;
}

/* Sets the submitter token's max_running (JSON text: a number or null); true on 200. */
static bool submitter_limit(struct harness *h, const char *tid, const char *v)
{
	long st = 0;
	json_t *body = json_pack("{s:o}", "max_running", json_loads(v, JSON_DECODE_ANY, NULL));

	json_decref(h_postf(h, body, &st, "/v1/tokens/%s/limits", tid ? tid : "0"));
	json_decref(body);
	return st == 200;
}

/* Leases on the fake worker; returns the lease (new reference) or NULL; *job (heap) its job. */
static json_t *lease(struct harness *h, const char *wid, const char *gpu, char **job)
{
	long st = 0;
	json_t *l = h_fake_lease(h, wid, gpu, 2000, &st);

	*job = h_id(l, "job_id");
	return l;
}

static void test_protocol(struct harness *h)
{
	char *f1 = h_fake_register_pool(h, "pre-borrower", "GPU-pre-1", 24576, "q-own", "[\"q-lend\"]"), *f2 = NULL;
	char *l1 = submit(h, NULL, "pre_lend", 10, "q-lend", 2), *o1 = NULL, *o2 = NULL, *tid = NULL, *got = NULL;
	char *a1 = NULL, *a2 = NULL, *a3 = NULL;
	json_t *ls = NULL, *ans = NULL, *facts = NULL;
	long st = 0;

	if (!h_ok(h, f1 && l1, "a worker of pool q-own that borrows from q-lend, and a job of q-lend"))
		goto out;
	ls = lease(h, f1, "GPU-pre-1", &got);
	a1 = h_id(ls, "attempt_id");
	if (!h_ok(h, got && !strcmp(got, l1) && a1, "the borrower leases q-lend's job (%s)", got ? got : "none"))
		goto out;
	h_ok(h, preempt_now(h, "0") == 0, "its own pool has no job: nothing is stopped");

	/* the own pool's job, of an owner paused (max_running 0): it could not run, nothing is stopped */
	tid = token_id(h, "it-submitter");
	h_ok(h, submitter_limit(h, tid, "0"), "the submitter's team is paused (max_running 0)");
	o1 = submit(h, h->submitter_token, "pre_own", 10, "q-own", 0);
	h_ok(h, o1 && preempt_now(h, "0") == 0, "a job of q-own whose owner is paused: nothing is stopped");
	h_ok(h, submitter_limit(h, tid, "null"), "the pause is lifted");
	/* paused in q-own alone (migration 034: a limit in one pool): the same */
	{
		json_t *body = json_loads("{\"pool_max_running\": {\"q-own\": 0}}", 0, NULL);
		json_decref(h_postf(h, body, &st, "/v1/tokens/%s/limits", tid ? tid : "0"));
		json_decref(body);
		h_ok(h, st == 200 && preempt_now(h, "0") == 0,
		     "a job of q-own whose owner is paused in q-own alone: nothing is stopped (%ld)", st);
		body = json_loads("{\"pool_max_running\": null}", 0, NULL);
		json_decref(h_postf(h, body, &st, "/v1/tokens/%s/limits", tid ? tid : "0"));
		json_decref(body);
		h_ok(h, st == 200, "the pause in q-own is lifted (%ld)", st);
	}
	h_ok(h, preempt_now(h, "3600") == 0, "the borrowed attempt ran less than --preempt-after-s: nothing is stopped");
	h_ok(h, preempt_now(h, "-1") == 0, "-1 (preemption off): nothing is stopped");

	/* an idle GPU of q-own can take the job: nothing is stopped; drained, it no longer can */
	f2 = h_fake_register_pool(h, "pre-idle", "GPU-pre-2", 24576, "q-own", NULL);
	h_ok(h, f2 && preempt_now(h, "0") == 0, "an idle GPU of q-own may run the job: nothing is stopped");
	json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/drain", f2 ? f2 : "0"));
	h_ok(h, st == 200, "the idle host is drained");
	json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/drain", f1));
	h_ok(h, st == 200 && preempt_now(h, "0") == 0, "while the borrower itself is drained (it would not take the job): nothing is stopped");
	json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/resume", f1));
	{
		/* a quarantined GPU is not freed for a job (the claim would not lease it there) */
		PGresult *r = h_sql(h, "UPDATE gpus SET state = 'quarantined' WHERE uuid = 'GPU-pre-1'", 0, NULL);
		PQclear(r);
		h_ok(h, st == 200 && preempt_now(h, "0") == 0, "while the borrower's GPU is quarantined: nothing is stopped");
		r = h_sql(h, "UPDATE gpus SET state = 'ok' WHERE uuid = 'GPU-pre-1'", 0, NULL);
		PQclear(r);
	}
	h_ok(h, preempt_now(h, "0") == 1, "resumed, its GPU ok, its borrowed attempt is marked for preemption");
	h_ok(h, sql_of(h, "SELECT preempt_for FROM attempts WHERE id = $1::bigint", a1) == atoll(o1 ? o1 : "0") &&
		     sql_of(h, "SELECT count(*) FROM events WHERE job_id = $1::bigint AND kind = 'preempt_requested'", l1) == 1,
	     "marked for q-own's job, with an event preempt_requested on the borrowed job");
	h_ok(h, preempt_now(h, "0") == 0, "a second pass stops nothing more for the same job");
	ans = h_job(h, l1);
	h_ok(h, ans && h_int(json_object_get(ans, "stopping"), "for_job") == atoll(o1 ? o1 : "0") &&
		     !strcmp(h_str(json_object_get(ans, "stopping"), "why"), "borrowed"),
	     "the borrowed job says it is being stopped, for which job and why (borrowed)");
	json_decref(ans);
	h_ok(h, h_show_has(h, l1, "stop              stopping: attempt 1 is being stopped so that job"), "rungctl show says so");
	ans = h_job(h, o1);
	{
		char *pj = h_id(json_object_get(json_object_get(ans, "placement"), "preempting"), "job_id");
		h_ok(h, pj && !strcmp(pj, l1), "the waiting job's placement names the borrowed job being stopped for it");
		free(pj);
	}
	json_decref(ans);
	h_ok(h, h_show_has(h, o1, "is being stopped on GPU GPU-pre-1 for it (preemption)"), "rungctl show says so");
	{
		const char *p[] = { a1, h_str(ls, "token") };
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM rung_heartbeat_batch(jsonb_build_array(jsonb_build_object("
				     "'i', 0, 'id', $1::bigint, 'token', $2::text)), 120) WHERE NOT cancel", 2, p) == 1,
		     "the release before's heartbeat function does not tell it to stop");
	}
	ans = h_fake_heartbeat(h, a1, h_str(ls, "token"), &st);
	h_ok(h, st == 200 && json_is_true(json_object_get(ans, "cancel")) && json_is_true(json_object_get(ans, "preempt")),
	     "its heartbeat answers cancel and preempt");
	json_decref(ans);
	facts = h_facts_stopped(10, 4);
	ans = h_fake_finish(h, a1, h_str(ls, "token"), facts, &st);
	h_ok(h, st == 200 && !strcmp(h_str(ans, "job_state"), "queued") &&
		     !strcmp(h_str(json_object_get(ans, "decision"), "class"), "preempted") &&
		     !strcmp(h_str(json_object_get(ans, "decision"), "action"), "requeue_preempted"),
	     "the stopped attempt's finish queues its job again (class preempted, action requeue_preempted)");
	json_decref(ans);
	ans = h_job(h, l1);
	h_ok(h, ans && !strcmp(h_str(ans, "state"), "queued") &&
		     sql_of(h, "SELECT count(*) FROM jobs WHERE id = $1::bigint AND current_config IS NULL", l1) == 1 &&
		     !strncmp(h_str(ans, "next_action"), "run again unchanged", 19),
	     "the job waits with its config unchanged, and says why (%s)", ans ? h_str(ans, "next_action") : "?");
	json_decref(ans);
	h_ok(h, sql_of(h, "SELECT count(*) FROM attempts WHERE id = $1::bigint AND outcome = 'preempted' AND class = 'preempted'",
		       a1) == 1, "the attempt's outcome and class are preempted");
	json_decref(ls);
	free(got);
	ls = lease(h, f1, "GPU-pre-1", &got);
	h_ok(h, got && o1 && !strcmp(got, o1), "the worker's next lease is its own pool's job (%s)", got ? got : "none");
	{
		char *aid = h_id(ls, "attempt_id");
		json_t *ok = h_facts_success(10);
		ans = h_fake_finish(h, aid ? aid : "0", h_str(ls, "token"), ok, &st);
		h_ok(h, st == 200 && !strcmp(h_str(ans, "job_state"), "succeeded"), "its own pool's job succeeds there");
		json_decref(ans);
		json_decref(ok);
		free(aid);
	}

	/* outside the budgets: with max_attempts 2, the OOM of the attempt after the preempted one is retried */
	json_decref(ls);
	free(got);
	ls = lease(h, f1, "GPU-pre-1", &got);
	a2 = h_id(ls, "attempt_id");
	h_ok(h, got && !strcmp(got, l1), "then it borrows the preempted job again");
	json_decref(facts);
	facts = facts_oom();
	ans = h_fake_finish(h, a2, h_str(ls, "token"), facts, &st);
	h_ok(h, st == 200 && !strcmp(h_str(ans, "job_state"), "queued"),
	     "its OOM (attempt 2 of max_attempts 2) is retried: the preempted attempt did not count (%s, %s)",
	     h_str(ans, "job_state"), h_str(json_object_get(ans, "decision"), "reason"));
	json_decref(ans);

	/* a cancel requested while the stop is under way wins: the job ends cancelled */
	json_decref(ls);
	free(got);
	ls = lease(h, f1, "GPU-pre-1", &got);
	a3 = h_id(ls, "attempt_id");
	o2 = submit(h, NULL, "pre_own_2", 10, "q-own", 0);
	h_ok(h, got && !strcmp(got, l1) && o2 && preempt_now(h, "0") == 1, "borrowed again, and marked for another job of q-own");
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", l1));
	json_decref(facts);
	facts = h_facts_stopped(10, 4);
	ans = h_fake_finish(h, a3 ? a3 : "0", h_str(ls, "token"), facts, &st);
	h_ok(h, st == 200 && !strcmp(h_str(ans, "job_state"), "cancelled"), "cancelled meanwhile: the job ends cancelled (%s)",
	     h_str(ans, "job_state"));
	json_decref(ans);
	ans = NULL;
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", o2 ? o2 : "0"));
	json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/resume", f2 ? f2 : "0"));
out:
	json_decref(ls);
	json_decref(facts);
	free(f1);
	free(f2);
	free(l1);
	free(o1);
	free(o2);
	free(tid);
	free(got);
	free(a1);
	free(a2);
	free(a3);
}

/* Two borrowed attempts on two workers of pool s-own, and an owner with room for one job: one stop,
 * the attempt that started last; with the limit lifted, the second job gets the other. */
static void test_room(struct harness *h)
{
	char *w1 = h_fake_register_pool(h, "pre-room-1", "GPU-room-1", 24576, "s-own", "[\"s-lend\"]");
	char *w2 = h_fake_register_pool(h, "pre-room-2", "GPU-room-2", 24576, "s-own", "[\"s-lend\"]");
	char *b1 = submit(h, NULL, "room_lend_1", 10, "s-lend", 0), *b2 = submit(h, NULL, "room_lend_2", 10, "s-lend", 0);
	char *tid = token_id(h, "it-submitter"), *g1 = NULL, *g2 = NULL, *a1 = NULL, *a2 = NULL, *o1 = NULL, *o2 = NULL;
	json_t *l1 = NULL, *l2 = NULL;
	long st = 0;

	if (!h_ok(h, w1 && w2 && b1 && b2, "two workers of s-own borrowing from s-lend, two jobs of s-lend"))
		goto out;
	l1 = lease(h, w1, "GPU-room-1", &g1);
	l2 = lease(h, w2, "GPU-room-2", &g2);
	a1 = h_id(l1, "attempt_id");
	a2 = h_id(l2, "attempt_id");
	h_ok(h, a1 && a2, "both borrow a job of s-lend");
	h_ok(h, submitter_limit(h, tid, "1"), "the submitter's team may run one job");
	o1 = submit(h, h->submitter_token, "room_own_1", 10, "s-own", 0);
	o2 = submit(h, h->submitter_token, "room_own_2", 10, "s-own", 0);
	h_ok(h, o1 && o2 && preempt_now(h, "0") == 1, "two jobs of s-own of that team: one stop, for its one place");
	h_ok(h, sql_of(h, "SELECT count(*) FROM attempts WHERE id = $1::bigint AND preempted_at IS NOT NULL", a2) == 1 &&
		     sql_of(h, "SELECT preempt_for FROM attempts WHERE id = $1::bigint", a2) == atoll(o1 ? o1 : "0"),
	     "the attempt that started last is stopped, for the older job");
	h_ok(h, submitter_limit(h, tid, "null"), "the limit is lifted");
	h_ok(h, preempt_now(h, "0") == 1 &&
		     sql_of(h, "SELECT preempt_for FROM attempts WHERE id = $1::bigint", a1) == atoll(o2 ? o2 : "0"),
	     "now the other attempt is stopped, for the second job");
out:
	/* nothing of s-own waits after this: no later pass stops anything here */
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", o1 ? o1 : "0"));
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", o2 ? o2 : "0"));
	json_decref(l1);
	json_decref(l2);
	free(w1);
	free(w2);
	free(b1);
	free(b2);
	free(tid);
	free(g1);
	free(g2);
	free(a1);
	free(a2);
	free(o1);
	free(o2);
}

/* The 5 minutes after a stop made for a job (its GPU went elsewhere: here, the job was cancelled and
 * retried, so the borrower took its lender's job back), and a trainer that finished before the stop
 * reached it. */
static void test_backoff(struct harness *h)
{
	char *w = h_fake_register_pool(h, "pre-backoff", "GPU-bo-1", 24576, "v-own", "[\"v-lend\"]");
	char *l = submit(h, NULL, "bo_lend", 10, "v-lend", 0), *o = NULL, *got = NULL, *a1 = NULL, *a2 = NULL;
	json_t *ls = NULL, *ans = NULL, *stopped = h_facts_stopped(10, 4), *done = h_facts_success(10);
	long st = 0;

	json_object_set_new(done, "cancelled", json_true()); /* told to stop, as the worker reports it */

	ls = lease(h, w, "GPU-bo-1", &got);
	a1 = h_id(ls, "attempt_id");
	o = submit(h, NULL, "bo_own", 10, "v-own", 0);
	old_functions(h, true);
	h_ok(h, preempt_now(h, "0") == 0, "while the recorded function files lack 44_preempt: nothing is stopped");
	old_functions(h, false);
	if (!h_ok(h, w && l && o && a1 && preempt_now(h, "0") == 1, "a borrowed attempt stopped for a job of v-own"))
		goto out;
	json_decref(h_fake_finish(h, a1, h_str(ls, "token"), stopped, &st));
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", o));
	json_decref(ls);
	free(got);
	ls = lease(h, w, "GPU-bo-1", &got);
	a2 = h_id(ls, "attempt_id");
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/retry", o));
	h_ok(h, got && !strcmp(got, l) && st == 200, "the job of v-own cancelled, the borrower took v-lend's back, then it was retried");
	h_ok(h, preempt_now(h, "0") == 0, "less than 5 minutes after the stop made for it: no new stop");
	{
		const char *p[] = { a1 };
		PGresult *r = h_sql(h, "UPDATE attempts SET started_at = started_at - interval '7 minutes', ended_at = now() - interval '6 minutes' WHERE id = $1::bigint", 1, p);
		PQclear(r);
	}
	h_ok(h, preempt_now(h, "0") == 1 &&
		     sql_of(h, "SELECT preempt_for FROM attempts WHERE id = $1::bigint", a2) == atoll(o),
	     "that stop ended 6 minutes ago: the borrowed attempt is stopped for it again");
	ans = h_fake_finish(h, a2, h_str(ls, "token"), done, &st);
	h_ok(h, st == 200 && !strcmp(h_str(ans, "job_state"), "succeeded"),
	     "its trainer had finished before the stop reached it (exit 0, no `Job stopped`): the job succeeds (%s)",
	     h_str(ans, "job_state"));
	json_decref(ans);
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", o));
out:
	json_decref(ls);
	json_decref(stopped);
	json_decref(done);
	free(w);
	free(l);
	free(o);
	free(got);
	free(a1);
	free(a2);
}

/* With a fair share, the job a stop is made for is the one the claim would give the GPU: the owner
 * running the fewest first, not the oldest job. */
static void test_fair(struct harness *h)
{
	char *w = h_fake_register_pool(h, "pre-fair", "GPU-fair-1", 24576, "x-own", "[\"x-lend\"]");
	char *l = submit(h, NULL, "fair_lend", 10, "x-lend", 0), *a = NULL, *b = NULL, *got = NULL, *aid = NULL;
	json_t *ls = lease(h, w, "GPU-fair-1", &got);
	long st = 0;

	aid = h_id(ls, "attempt_id");
	a = submit(h, NULL, "fair_admin", 10, "x-own", 0);              /* it-admin runs the borrowed job */
	b = submit(h, h->submitter_token, "fair_team", 10, "x-own", 0); /* it-submitter runs none */
	h_ok(h, w && l && got && !strcmp(got, l) && a && b &&
		     h_sql_int(h, "SELECT jsonb_array_length(rung_preempt(0, 10, true))", 0, NULL) == 1 &&
		     sql_of(h, "SELECT preempt_for FROM attempts WHERE id = $1::bigint", aid) == atoll(b),
	     "with a fair share, the stop is made for the younger job of the owner that runs nothing");
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", a ? a : "0"));
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", b ? b : "0"));
	json_decref(ls);
	free(w);
	free(l);
	free(a);
	free(b);
	free(got);
	free(aid);
}

/* Requeue on request: POST /v1/jobs/{id}/requeue (and rungctl requeue) and a drain with "requeue". */
static void test_requeue(struct harness *h)
{
	char *w = h_fake_register_pool(h, "pre-requeue", "GPU-rq-1", 24576, "t-pool", NULL), *j1 = submit(h, NULL, "rq_one", 10, "t-pool", 1);
	char *got = NULL, *aid = NULL, *out = NULL, *args = NULL, *other = NULL, *j2 = NULL, *j3 = NULL;
	json_t *ls = NULL, *ans = NULL, *facts = h_facts_stopped(10, 4);
	long st = 0;
	int rc = -1;

	if (!h_ok(h, w && j1, "a worker of t-pool and a job there (max_attempts 1)"))
		goto out;
	ans = h_postf(h, NULL, &st, "/v1/jobs/%s/requeue", j1);
	h_ok(h, st == 409 && !strcmp(h_str(ans, "error"), "invalid_transition"), "a queued job cannot be requeued: 409 (%ld)", st);
	json_decref(ans);
	ans = h_post(h, "/v1/jobs/999999/requeue", NULL, &st);
	h_ok(h, st == 404, "no such job: 404 (%ld)", st);
	json_decref(ans);
	{
		/* roles: a submitter may not drain a worker; support may requeue (checked on a queued job: 409, not 403) */
		char *support = h_token_create(h, "support", "it-support-rq");
		const char *saved = h->auth_token;
		h->auth_token = h->submitter_token;
		ans = h_postf(h, NULL, &st, "/v1/workers/%s/drain", w);
		h->auth_token = saved;
		h_ok(h, st == 403, "a submitter's drain: 403 (%ld)", st);
		json_decref(ans);
		h->auth_token = support;
		ans = h_postf(h, NULL, &st, "/v1/jobs/%s/requeue", j1);
		h->auth_token = saved;
		h_ok(h, st == 409, "support may requeue: a queued job is 409, not 403 (%ld)", st);
		json_decref(ans);
		free(support);
	}
	ls = lease(h, w, "GPU-rq-1", &got);
	aid = h_id(ls, "attempt_id");
	h_ok(h, got && !strcmp(got, j1) && aid, "it runs");
	{
		json_t *bad = json_pack("{s:i}", "note", 5);
		ans = h_postf(h, bad, &st, "/v1/jobs/%s/requeue", j1);
		h_ok(h, st == 400 && !strcmp(h_str(ans, "field"), "note"), "a note that is not text: 400 naming note (%ld)", st);
		json_decref(ans);
		json_decref(bad);
	}
	other = h_token_create(h, "submitter", "it-other-team");
	{
		const char *saved = h->auth_token;
		h->auth_token = other;
		ans = h_postf(h, NULL, &st, "/v1/jobs/%s/requeue", j1);
		h->auth_token = saved;
		h_ok(h, st == 404, "another team's submitter: 404, as for any job of someone else (%ld)", st);
		json_decref(ans);
	}
	{
		/* while a pre-029 rungd's function files are in place: 503, nothing written */
		json_t *rq = json_pack("{s:b}", "requeue", 1);
		old_functions(h, true);
		ans = h_postf(h, NULL, &st, "/v1/jobs/%s/requeue", j1);
		h_ok(h, st == 503 && !strcmp(h_str(ans, "error"), "unavailable"), "requeue while an old release's functions are in place: 503 (%ld)", st);
		json_decref(ans);
		ans = h_postf(h, rq, &st, "/v1/workers/%s/drain", w);
		h_ok(h, st == 503 && sql_of(h, "SELECT count(*) FROM workers WHERE id = $1::bigint AND state = 'online'", w) == 1,
		     "a drain with requeue then: 503, and the worker is not drained (%ld)", st);
		json_decref(ans);
		json_decref(rq);
		old_functions(h, false);
	}
	args = xasprintf("requeue %s --note 'move it off this host'", j1);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "its running attempt stops at its next heartbeat"),
	     "rungctl requeue: exit 0 and what happens next (rc %d)", rc);
	h_ok(h, sql_of(h, "SELECT count(*) FROM events WHERE job_id = $1::bigint AND kind = 'requeue_requested' "
			  "AND data->>'note' = 'move it off this host' AND data->>'by' = 'it-admin'", j1) == 1,
	     "an event requeue_requested with who and why");
	free(out);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && sql_of(h, "SELECT count(*) FROM events WHERE job_id = $1::bigint AND kind = 'requeue_requested'", j1) == 1,
	     "asked again while the stop is under way: ok, nothing more written");
	ans = h_job(h, j1);
	h_ok(h, ans && !strcmp(h_str(json_object_get(ans, "stopping"), "why"), "requeue"),
	     "its stopping says why (requeue)");
	json_decref(ans);
	ans = h_fake_heartbeat(h, aid, h_str(ls, "token"), &st);
	h_ok(h, st == 200 && json_is_true(json_object_get(ans, "cancel")) && json_is_true(json_object_get(ans, "preempt")),
	     "its heartbeat answers cancel and preempt");
	json_decref(ans);
	{
		/* a trainer that saved on the interrupt and exited 0 halfway, without `Job stopped`: still a stop */
		json_t *half = h_facts_success(10);
		json_object_set_new(half, "cancelled", json_true());
		json_object_set_new(half, "phase", json_string("train"));
		json_object_set_new(half, "last_step", json_integer(4));
		json_decref(facts);
		facts = half;
	}
	ans = h_fake_finish(h, aid, h_str(ls, "token"), facts, &st);
	h_ok(h, st == 200 && !strcmp(h_str(ans, "job_state"), "queued") &&
		     !strcmp(h_str(json_object_get(ans, "decision"), "rule"), "requeued") &&
		     strstr(h_str(json_object_get(ans, "decision"), "reason"), "stopped on request (requeue)"),
	     "its finish queues the job again, stopped on request (%s)", h_str(json_object_get(ans, "decision"), "reason"));
	json_decref(ans);

	/* a drain with requeue: the host's running attempt stops; the job, max_attempts 1, runs again and succeeds */
	json_decref(ls);
	free(got);
	free(aid);
	ls = lease(h, w, "GPU-rq-1", &got);
	aid = h_id(ls, "attempt_id");
	h_ok(h, got && !strcmp(got, j1), "it runs again (max_attempts 1: the requeued attempt did not count)");
	{
		json_t *bad = json_pack("{s:s}", "requeue", "yes");
		ans = h_postf(h, bad, &st, "/v1/workers/%s/drain", w);
		h_ok(h, st == 400 && !strcmp(h_str(ans, "field"), "requeue"), "drain with requeue \"yes\": 400 naming requeue");
		json_decref(ans);
		ans = h_postf(h, bad, &st, "/v1/workers/%s/resume", w);
		h_ok(h, st == 400 && !strcmp(h_str(ans, "field"), "requeue"), "a resume takes no requeue: 400 naming it");
		json_decref(ans);
		json_decref(bad);
	}
	free(args);
	args = xasprintf("drain %s --requeue --note 'kernel upgrade'", w);
	free(out);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "draining (no new leases; 1 running attempt stopped at the next heartbeat"),
	     "rungctl drain --requeue: drained, and its 1 running attempt stopped (%s)", out ? out : "");
	h_ok(h, sql_of(h, "SELECT count(*) FROM attempts WHERE id = $1::bigint AND preempted_at IS NOT NULL AND preempt_for IS NULL", aid) == 1,
	     "the attempt is marked");
	ans = h_fake_finish(h, aid, h_str(ls, "token"), facts, &st);
	h_ok(h, st == 200 && !strcmp(h_str(ans, "job_state"), "queued"), "its finish queues the job again");
	json_decref(ans);
	json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/resume", w));
	json_decref(ls);
	free(got);
	ls = lease(h, w, "GPU-rq-1", &got);
	{
		char *a3 = h_id(ls, "attempt_id");
		json_t *ok = h_facts_success(10);
		ans = h_fake_finish(h, a3 ? a3 : "0", h_str(ls, "token"), ok, &st);
		h_ok(h, st == 200 && !strcmp(h_str(ans, "job_state"), "succeeded"),
		     "resumed, the worker runs it a third time and it succeeds, max_attempts 1 notwithstanding");
		json_decref(ans);
		json_decref(ok);
		free(a3);
	}
	ans = h_postf(h, NULL, &st, "/v1/jobs/%s/requeue", j1);
	h_ok(h, st == 409, "a succeeded job cannot be requeued: 409 (%ld)", st);
	json_decref(ans);

	/* the job page's form */
	j2 = submit(h, NULL, "rq_page", 10, "t-pool", 0);
	json_decref(ls);
	free(got);
	ls = lease(h, w, "GPU-rq-1", &got);
	{
		char *path = xasprintf("/ui/jobs/%s", j2 ? j2 : "0"), *act = xasprintf("/ui/jobs/%s/requeue", j2 ? j2 : "0");
		long pst = h_browse(h, h->admin_token, "GET", path, NULL, NULL);
		h_ok(h, got && j2 && !strcmp(got, j2) && pst == 200 && h->last_body &&
			     strstr(h->last_body, "Requeue (stop, run again unchanged)"),
		     "a running job's page has a requeue form");
		pst = h_browse(h, h->admin_token, "POST", act, "note=from+the+page", "Sec-Fetch-Site: same-origin");
		h_ok(h, pst == 303 && sql_of(h, "SELECT count(*) FROM events WHERE job_id = $1::bigint AND kind = 'requeue_requested' "
					 "AND data->>'note' = 'from the page'", j2) == 1,
		     "its form stops the attempt (303 back to the page, the event with its note) (%ld)", pst);
		pst = h_browse(h, h->admin_token, "GET", path, NULL, NULL);
		h_ok(h, pst == 200 && h->last_body && strstr(h->last_body, "is being stopped on request (requeue)") &&
			     !strstr(h->last_body, "Requeue (stop, run again unchanged)"),
		     "the page then says the stop is under way, and offers no second requeue");
		pst = h_browse(h, h->admin_token, "POST", act, "note=x", "Origin: http://evil.example");
		h_ok(h, pst == 403, "a form from another site: 403 (%ld)", pst);
		free(path);
		free(act);
	}
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", j2 ? j2 : "0"));
	ans = h_postf(h, NULL, &st, "/v1/jobs/%s/requeue", j2 ? j2 : "0");
	h_ok(h, st == 409, "a running job whose cancel was requested cannot be requeued: 409 (%ld)", st);
	json_decref(ans);
	{
		char *a2 = h_id(ls, "attempt_id");
		ans = h_fake_finish(h, a2 ? a2 : "0", h_str(ls, "token"), facts, &st);
		h_ok(h, st == 200 && !strcmp(h_str(ans, "job_state"), "cancelled"), "its stop ends it cancelled");
		json_decref(ans);
		free(a2);
	}

	/* the GPUs page's drain form with its requeue box; a page's stop while an old release's functions are in place */
	j3 = submit(h, NULL, "rq_drain_page", 10, "t-pool", 0);
	json_decref(ls);
	free(got);
	ls = lease(h, w, "GPU-rq-1", &got);
	{
		char *act = xasprintf("/ui/workers/%s/drain", w), *jact = xasprintf("/ui/jobs/%s/requeue", j3 ? j3 : "0");
		char *a3 = h_id(ls, "attempt_id");
		long pst;
		old_functions(h, true);
		pst = h_browse(h, h->admin_token, "POST", jact, "note=x", "Sec-Fetch-Site: same-origin");
		h_ok(h, pst == 503, "the job page's requeue while an old release's functions are in place: 503 (%ld)", pst);
		old_functions(h, false);
		pst = h_browse(h, h->admin_token, "POST", act, "note=rack+move&requeue=on", "Sec-Fetch-Site: same-origin");
		h_ok(h, got && j3 && !strcmp(got, j3) && pst == 303 &&
			     sql_of(h, "SELECT count(*) FROM workers WHERE id = $1::bigint AND state = 'draining'", w) == 1 &&
			     sql_of(h, "SELECT count(*) FROM attempts WHERE id = $1::bigint AND preempted_at IS NOT NULL", a3) == 1,
		     "the GPUs page's drain with \"requeue its running jobs\": drained, and its attempt stopped (%ld)", pst);
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", j3 ? j3 : "0"));
		json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/resume", w));
		free(act);
		free(jact);
		free(a3);
	}
out:
	json_decref(ls);
	json_decref(facts);
	free(w);
	free(j1);
	free(got);
	free(aid);
	free(out);
	free(args);
	free(other);
	free(j2);
	free(j3);
}

/* With a real rung-worker and the simulated trainer, rungd preempting after 0 s. */
static void test_real(struct harness *h)
{
	static const char *const args[] = { "--pool", "r-video", "--borrow", "r-lend", "--log-interval-ms", "200", NULL };
	const struct h_worker_opts opts = { .args = args };
	const char *extra[] = { "--preempt-after-s", "0", NULL };
	struct h_worker *w = NULL;
	json_t *j = NULL;
	char *d = NULL, *v = NULL, *log = NULL, *text = NULL;
	long st = 0;

	h_ok(h, h_server_stop(h, SIGTERM) == 0 && h_server_start(h, extra) == 0, "rungd restarted with --preempt-after-s 0");
	w = h_worker_start(h, "pre-real", &opts);
	d = w ? h_long_job_saved(h, "pre_long", "r-lend") : NULL;
	if (!h_ok(h, w && d, "a worker of r-video borrowing from r-lend, and a long job of r-lend (max_attempts 1)"))
		goto out;
	{
		json_t *vc = h_config("pre_video", 10), *ve = json_pack("{s:s}", "pool", "r-video");
		j = h_submit(h, vc, ve);
		v = h_id(j, "id");
		json_decref(j);
		json_decref(vc);
		json_decref(ve);
	}
	j = v ? h_wait_job(h, v, "succeeded", 60000) : NULL;
	h_ok(h, j != NULL, "a job of its own pool r-video is submitted: it runs there and succeeds");
	json_decref(j);
	j = NULL;
	h_ok_stopped_then_resumed(h, d, "the borrowed job");
	log = h_slurp(w->proc.log_path);
	h_ok(h, strstr(log, "preempted (its job is queued again), interrupting trainer") != NULL,
	     "the worker's log says why it stopped the trainer");
	text = h_scrape(h);
	h_ok(h, h_sample(text, "rung_attempts_total{outcome=\"preempted\",class=\"preempted\"}") >= 1,
	     "/metrics counts the preempted attempt");
	h_ok(h, h_sample(text, "rung_preempt_stops_total{why=\"borrowed\"}") == 1 &&
		     h_sample(text, "rung_preempt_stops_total{why=\"priority\"}") == 0,
	     "and rungd's pass counts the stop it made by why: rung_preempt_stops_total{why=\"borrowed\"} 1, "
	     "{why=\"priority\"} 0");
	j = h_getf(h, &st, "/v1/usage");
	{
		const json_t *o;
		double pre = 0;
		size_t i;
		json_array_foreach(json_object_get(j, "owners"), i, o)
			if (!strcmp(h_str(o, "owner"), "it-admin"))
				pre = json_number_value(json_object_get(json_object_get(o, "by_outcome"), "preempted"));
		h_ok(h, st == 200 && pre > 0, "GET /v1/usage counts its GPU time as preempted (%.1f s)", pre);
	}
out:
	json_decref(j);
	free(d);
	free(v);
	free(log);
	free(text);
}

int main(void)
{
	struct harness *h = h_new("it_preempt");
	const char *protocol[] = { "--lease-seconds", "120", NULL };

	if (!h_ok(h, h_server_start(h, protocol) == 0, "rungd starts (no preemption timer)"))
		return h_free(h);
	test_protocol(h);
	test_room(h);
	test_backoff(h);
	test_fair(h);
	test_requeue(h);
	test_real(h);
	return h_free(h);
}
