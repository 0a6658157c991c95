/* Integration: the worker protocol spoken directly over HTTP by a fake worker, so the test controls
 * timing: register, lease (204 / long-poll wake-up), heartbeat and finish fenced by the token (409
 * for stale or repeated calls), lease expiry → lost attempt → re-queue, cancel of a running job, and
 * the coalesced claim round (one statement leases to every parked GPU). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "util.h"

#define GPU "GPU-fake-0"

struct longpoll {
	const struct harness *h;
	const char *path;
	long status;
	long ms;
	json_t *lease;
};

static void *longpoll_run(void *arg)
{
	struct longpoll *lp = arg;
	char body[128];
	snprintf(body, sizeof(body), "{\"gpu_uuid\": \"%s\", \"wait_ms\": 10000}", GPU);
	lp->lease = h_request_once(lp->h, "POST", lp->path, body, &lp->status, &lp->ms);
	return NULL;
}

struct lost_arg {
	struct harness *h;
	const char *attempt_id;
};

static bool attempt_is_lost(void *arg)
{
	struct lost_arg *a = arg;
	const char *p[] = { a->attempt_id };
	return h_sql_int(a->h, "SELECT count(*) FROM attempts WHERE id = $1 AND state = 'lost'", 1, p) == 1;
}

static void test_register(struct harness *h, char **wid)
{
	long st = 0;
	json_t *body = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", "fake", "host", "h1", "gpus", "uuid",
		GPU, "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 24576);
	json_t *a = h_post(h, "/v1/workers", body, &st);
	h_ok(h, st == 201, "register a new worker: 201 (got %ld)", st);
	h_ok(h, h_int(a, "lease_seconds") == 2 && h_int(a, "heartbeat_ms") == 200,
		"register tells the worker lease_seconds and heartbeat_ms");
	json_t *b = h_post(h, "/v1/workers", body, &st);
	char *ia = h_id(a, "id"), *ib = h_id(b, "id");
	h_ok(h, st == 200 && ia && ib && !strcmp(ia, ib), "re-register with the same name: 200, same id");
	*wid = ia;
	free(ib);
	json_decref(a);
	json_decref(b);
	json_decref(body);
}

static void test_empty_lease(struct harness *h, const char *wid)
{
	long st = 0;
	json_t *l = h_fake_lease(h, wid, GPU, 0, &st);
	h_ok(h, st == 204 && !l, "lease with nothing queued and wait_ms 0: 204 (got %ld)", st);
	json_decref(l);
	int64_t t0 = util_mono_ms();
	l = h_fake_lease(h, wid, GPU, 700, &st);
	int64_t took = util_mono_ms() - t0;
	h_ok(h, st == 204 && took >= 600, "lease with wait_ms 700 and nothing queued: 204 after the wait (%lld ms)",
		(long long)took);
	json_decref(l);
}

/* A worker parked in a long poll gets a job submitted meanwhile, well before its wait ends. */
static void test_long_poll_wakeup(struct harness *h, const char *wid, char **job_id, json_t **lease)
{
	struct longpoll lp = { .h = h };
	char *path = xasprintf("/v1/workers/%s/lease", wid);
	lp.path = path;
	pthread_t t;
	pthread_create(&t, NULL, longpoll_run, &lp);
	/* Give the request time to reach the server and park; the checks below hold either way
	 * (a job queued before the poll arrives is answered at once, also well before 10 s). */
	struct timespec ts = { 0, 300 * 1000000L };
	nanosleep(&ts, NULL);
	json_t *cfg = h_config("wake", 20);
	json_t *job = h_submit(h, cfg, NULL);
	pthread_join(t, NULL);
	*job_id = h_id(job, "id");
	char *lj = h_id(lp.lease, "job_id");
	h_ok(h, lp.status == 200 && lj && *job_id && !strcmp(lj, *job_id),
		"parked long poll answers 200 with the job submitted meanwhile (status %ld)", lp.status);
	h_ok(h, lp.ms < 8000, "the long poll returned before its 10 s wait expired (%ld ms)", lp.ms);
	json_t *l = lp.lease;
	h_ok(h, l && h_int(l, "number") == 1 && *h_str(l, "token") && json_object_get(l, "attempt_id") &&
		json_equal(json_object_get(l, "config"), cfg) && h_int(l, "lease_seconds") == 2 &&
		h_int(l, "heartbeat_ms") == 200, "LEASE has attempt_id, number 1, token, the config, timings");
	json_t *j = *job_id ? h_job(h, *job_id) : NULL;
	h_ok(h, j && !strcmp(h_str(j, "state"), "running"), "leased job is running");
	*lease = l;
	json_decref(j);
	free(lj);
	free(path);
	json_decref(job);
	json_decref(cfg);
}

static void test_fenced_finish(struct harness *h, const char *job_id, json_t *lease)
{
	char *aid = h_id(lease, "attempt_id");
	const char *token = h_str(lease, "token");
	long st = 0;
	json_t *r = h_fake_heartbeat(h, aid, token, &st);
	h_ok(h, st == 200 && json_is_false(json_object_get(r, "cancel")), "heartbeat with the token: 200, cancel false");
	json_decref(r);
	r = h_fake_heartbeat(h, aid, "wrong-token", &st);
	h_ok(h, st == 409, "heartbeat with a wrong token: 409 (got %ld)", st);
	json_decref(r);
	json_t *facts = h_facts_success(20);
	r = h_fake_finish(h, aid, "wrong-token", facts, &st);
	h_ok(h, st == 409, "finish with a wrong token: 409 (got %ld)", st);
	json_decref(r);
	json_t *j = h_job(h, job_id);
	h_ok(h, j && !strcmp(h_str(j, "state"), "running"), "the wrong-token finish changed nothing");
	json_decref(j);
	r = h_fake_finish(h, aid, token, facts, &st);
	h_ok(h, st == 200 && !strcmp(h_str(r, "job_state"), "succeeded"), "finish with the token: 200, succeeded");
	h_ok(h, !strcmp(h_str(json_object_get(r, "decision"), "action"), "succeed"), "decision action succeed");
	json_decref(r);
	long long events = h_sql_int(h, "SELECT count(*) FROM events", 0, NULL);
	r = h_fake_finish(h, aid, token, facts, &st);
	h_ok(h, st == 409, "a repeated finish: 409 (got %ld)", st);
	json_decref(r);
	r = h_fake_heartbeat(h, aid, token, &st);
	h_ok(h, st == 409, "heartbeat after finish: 409 (got %ld)", st);
	json_decref(r);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM events", 0, NULL) == events, "the repeat wrote no event");
	j = h_job(h, job_id);
	h_ok(h, j && !strcmp(h_str(j, "state"), "succeeded") && h_int(j, "attempts") == 1,
		"job stays succeeded with one attempt");
	json_decref(j);
	json_t *a = h_wait_attempts(h, job_id, 1, "ended", 1000);
	json_t *a0 = json_array_get(a, 0);
	h_ok(h, json_array_size(a) == 1 && !strcmp(h_str(a0, "outcome"), "succeeded"),
		"attempts list: one ended attempt, outcome succeeded");
	json_decref(a);
	json_decref(facts);
	free(aid);
}

/* No heartbeats: the lease expires, the reaper marks the attempt lost and re-queues the job; the
 * old token is then refused and the new attempt finishes the job. */
static void test_lost_and_late_finish(struct harness *h, const char *wid)
{
	json_t *cfg = h_config("lost", 20);
	json_t *job = h_submit(h, cfg, NULL);
	char *jid = h_id(job, "id");
	long st = 0;
	json_t *l1 = h_fake_lease(h, wid, GPU, 2000, &st);
	char *a1 = h_id(l1, "attempt_id");
	if (!h_ok(h, l1 && a1, "lease the job (status %ld)", st))
		goto out;
	struct lost_arg la = { h, a1 };
	h_ok(h, wait_until(attempt_is_lost, &la, 10000), "without heartbeats the attempt becomes lost");
	json_t *j = h_wait_job(h, jid, "queued", 5000);
	h_ok(h, j != NULL, "the job is re-queued after the lost attempt");
	h_ok(h, j && h_int(j, "lost_count") == 1, "lost counted apart (lost_count 1)");
	json_decref(j);
	json_t *facts = h_facts_success(20);
	json_t *r = h_fake_finish(h, a1, h_str(l1, "token"), facts, &st);
	h_ok(h, st == 409, "late finish from the lost attempt: 409 (got %ld)", st);
	json_decref(r);
	j = h_job(h, jid);
	h_ok(h, j && !strcmp(h_str(j, "state"), "queued"), "the late finish changed nothing");
	json_decref(j);

	json_t *l2 = h_fake_lease(h, wid, GPU, 2000, &st);
	char *a2 = h_id(l2, "attempt_id");
	h_ok(h, l2 && h_int(l2, "number") == 2 && strcmp(h_str(l2, "token"), h_str(l1, "token")),
		"re-lease: attempt number 2 with a new token");
	r = h_fake_heartbeat(h, a1, h_str(l1, "token"), &st);
	h_ok(h, st == 409, "heartbeat from the superseded attempt: 409 (got %ld)", st);
	json_decref(r);
	r = h_fake_finish(h, a1, h_str(l1, "token"), facts, &st);
	h_ok(h, st == 409, "finish from the superseded attempt while the new one runs: 409 (got %ld)", st);
	json_decref(r);
	const char *p[] = { jid };
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1 AND state = 'running'", 1, p) == 1,
		"exactly one running attempt");
	r = a2 ? h_fake_finish(h, a2, h_str(l2, "token"), facts, &st) : NULL;
	h_ok(h, st == 200 && !strcmp(h_str(r, "job_state"), "succeeded"), "the new attempt finishes the job");
	json_decref(r);
	json_t *as = h_wait_attempts(h, jid, 2, "ended", 2000);
	h_ok(h, as && !strcmp(h_str(json_array_get(as, 0), "state"), "lost") &&
		!strcmp(h_str(json_array_get(as, 1), "outcome"), "succeeded"),
		"attempts: first lost, second succeeded");
	json_decref(as);
	long st2 = 0;
	json_t *ev = h_getf(h, &st2, "/v1/jobs/%s/events", jid);
	h_ok(h, st2 == 200 && json_array_size(json_object_get(ev, "events")) >= 4,
		"events record submit, lease, lost, lease, finish (%zu)", json_array_size(json_object_get(ev, "events")));
	json_decref(ev);
	json_decref(facts);
	json_decref(l2);
	free(a2);
out:
	json_decref(l1);
	free(a1);
	free(jid);
	json_decref(job);
	json_decref(cfg);
}

static void test_cancel_running(struct harness *h, const char *wid)
{
	json_t *cfg = h_config("cancel", 20);
	json_t *job = h_submit(h, cfg, NULL);
	char *jid = h_id(job, "id");
	long st = 0;
	json_t *l = h_fake_lease(h, wid, GPU, 2000, &st);
	char *aid = h_id(l, "attempt_id");
	if (!h_ok(h, l && aid, "lease a job to cancel"))
		goto out;
	json_t *c = h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", jid);
	h_ok(h, st == 200 && json_is_true(json_object_get(c, "cancel_requested")) && !strcmp(h_str(c, "state"), "running"),
		"cancel of a running job: cancel_requested, still running");
	json_decref(c);
	json_t *r = h_fake_heartbeat(h, aid, h_str(l, "token"), &st);
	h_ok(h, st == 200 && json_is_true(json_object_get(r, "cancel")), "the next heartbeat says cancel true");
	json_decref(r);
	json_t *facts = h_facts_stopped(20, 3);
	r = h_fake_finish(h, aid, h_str(l, "token"), facts, &st);
	json_decref(r);
	json_t *j = h_job(h, jid);
	h_ok(h, st == 200 && j && !strcmp(h_str(j, "state"), "cancelled"), "finish after cancel: job cancelled");
	json_decref(j);
	json_decref(facts);
out:
	json_decref(l);
	free(aid);
	free(jid);
	json_decref(job);
	json_decref(cfg);
}

/* ---- coalescing (issue 5): one claim statement serves every parked long-poll ---- */

#define ROUND_N 24

struct round_poll {
	const struct harness *h;
	char path[96];
	char gpu[48];
	long status;
};

static void *round_poll_run(void *arg)
{
	struct round_poll *rp = arg;
	char body[160];
	json_t *r;

	snprintf(body, sizeof(body), "{\"gpu_uuid\": \"%s\", \"wait_ms\": 20000}", rp->gpu);
	r = h_request_once(rp->h, "POST", rp->path, body, &rp->status, NULL);
	json_decref(r);
	return NULL;
}

/* The value of the rung_lease_waiters gauge, or -1. */
static double lease_waiters(struct harness *h)
{
	long st = 0;
	json_t *r = h_get(h, "/metrics", &st);
	const char *p = st == 200 && h->last_body ? strstr(h->last_body, "\nrung_lease_waiters ") : NULL;

	json_decref(r);
	return p ? strtod(p + strlen("\nrung_lease_waiters "), NULL) : -1;
}

static bool all_parked(void *arg)
{
	return lease_waiters(arg) >= ROUND_N;
}

/* ROUND_N GPUs park a long-poll; ROUND_N jobs then appear in one transaction with one NOTIFY: every
 * GPU gets a lease, and all of them were started by a single claim statement (one transaction:
 * their attempt rows, which are their `leased` events since migration 015, share one xmin). Claiming
 * per request would show ROUND_N transactions. */
static void test_claim_round(struct harness *h)
{
	struct harness view = *h; /* read-only view for the threads */
	struct round_poll rp[ROUND_N];
	pthread_t th[ROUND_N];
	int started = 0, leased = 0;
	char n[16];
	const char *np[] = { n };

	snprintf(n, sizeof n, "%d", ROUND_N);
	for (int i = 0; i < ROUND_N; i++) {
		char name[32];
		char *wid;

		snprintf(name, sizeof name, "round-w%d", i);
		snprintf(rp[i].gpu, sizeof rp[i].gpu, "GPU-round-%d", i);
		wid = h_fake_register(h, name, rp[i].gpu, 24576);
		if (!h_ok(h, wid != NULL, "round worker %d registered", i))
			goto out;
		rp[i].h = &view;
		rp[i].status = 0;
		snprintf(rp[i].path, sizeof rp[i].path, "/v1/workers/%s/lease", wid);
		free(wid);
	}
	for (started = 0; started < ROUND_N; started++)
		if (pthread_create(&th[started], NULL, round_poll_run, &rp[started]) != 0)
			break;
	if (!h_ok(h, started == ROUND_N && wait_until(all_parked, h, 10000), "%d long-polls parked", ROUND_N))
		goto out;
	h_ok(h, h_sql_int(h, "WITH ins AS (INSERT INTO jobs (name, kind, target_config, recovery) "
			     "SELECT 'round' || g, 'image', '{\"job\": \"extension\", \"config\": {\"name\": \"round\"}}', '{}' "
			     "FROM generate_series(1, $1::int) g RETURNING id), "
			     "ev AS (INSERT INTO events (job_id, kind, to_state, reason) "
			     "SELECT id, 'submitted', 'queued', 'submitted' FROM ins) "
			     "SELECT count(*) FROM ins, (SELECT pg_notify('rung_jobs', '')) n", 1, np) == ROUND_N,
	     "%d jobs queued in one transaction, one NOTIFY", ROUND_N);
out:
	for (int i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		leased += rp[i].status == 200;
	}
	if (started == ROUND_N) {
		h_ok(h, leased == ROUND_N, "every parked GPU got a lease (%d of %d)", leased, ROUND_N);
		h_ok(h, h_sql_int(h, "SELECT count(DISTINCT a.xmin::text) FROM attempts a JOIN jobs j ON j.id = a.job_id "
				     "WHERE j.name LIKE 'round%' AND a.number = 1", 0, NULL) == 1,
		     "all %d leases were started by one claim statement (one transaction)", ROUND_N);
	}
}

/* FACTS whose counts pass the door (up to 2^53) but hold no int: the finish still lands (the steps
 * kept at the int's ceiling), the job ends, nothing is left running. */
static void test_outsized_facts(struct harness *h, const char *wid)
{
	json_t *cfg = h_config("outsized", 20), *job = h_submit(h, cfg, NULL), *facts = h_facts_success(20), *r = NULL;
	char *jid = h_id(job, "id"), *aid = NULL;
	long st = 0;
	json_t *l = h_fake_lease(h, wid, GPU, 2000, &st);

	aid = h_id(l, "attempt_id");
	if (!h_ok(h, jid && aid, "lease a job (status %ld)", st))
		goto out;
	json_object_set_new(facts, "first_step", json_integer(3000000000LL));
	json_object_set_new(facts, "last_step", json_integer(3000000020LL));
	json_object_set_new(facts, "total_steps", json_integer(9007199254740991LL));
	json_object_set_new(facts, "signatures", json_pack("{s:I}", "resuming", (json_int_t)9007199254740991LL));
	r = h_fake_finish(h, aid, h_str(l, "token"), facts, &st);
	h_ok(h, st == 200 && !strcmp(h_str(r, "job_state"), "succeeded"),
	     "a finish whose steps hold no int (3,000,000,020 of 2^53-1): 200, the job succeeds (%ld %.200s)", st,
	     h->last_body ? h->last_body : "");
	{
		const char *p[] = { aid };
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE id = $1::bigint AND state = 'ended' AND "
				     "step = 2147483647 AND total_steps = 2147483647 AND resumed_step IS NULL AND peak_mib IS NULL",
				     1, p) == 1,
		     "the attempt ended, its steps kept at the int's ceiling, no resume counted from a step past it, and "
		     "no peak where the worker reported none");
	}
out:
	json_decref(r);
	json_decref(l);
	json_decref(facts);
	json_decref(job);
	json_decref(cfg);
	free(jid);
	free(aid);
}

int main(void)
{
	struct harness *h = h_new("it_protocol");
	char *wid = NULL, *job_id = NULL;
	json_t *lease = NULL;
	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	test_register(h, &wid);
	if (!wid)
		return h_free(h);
	test_empty_lease(h, wid);
	test_long_poll_wakeup(h, wid, &job_id, &lease);
	if (lease && job_id)
		test_fenced_finish(h, job_id, lease);
	test_lost_and_late_finish(h, wid);
	test_cancel_running(h, wid);
	test_outsized_facts(h, wid);
	test_claim_round(h);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM (SELECT job_id FROM attempts WHERE state = 'running' "
		"GROUP BY job_id HAVING count(*) > 1) x", 0, NULL) == 0, "never two running attempts of one job");
	json_decref(lease);
	free(job_id);
	free(wid);
	return h_free(h);
}
