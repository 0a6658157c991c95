/* Integration: the checkpoint hold (rungd --resume-hold-s, recovery/resume.h). Over the protocol,
 * with two fake workers: a job queued again after an attempt that saved a checkpoint is held for
 * that attempt's worker (its constraints' "hold", its placement's "held" and sentence), the other
 * worker's lease gets nothing while the hold's worker's gets it, the lease drops the hold, an OOM
 * before the next save still holds it for the checkpoint's host, a drain ends the hold and a
 * draining worker gets none, the hold's worker takes its held job before an older one of the same
 * priority (in claim order, under --fair-share, and while an owner is at its limit), a preemption pass stops nothing for a held job,
 * a hold past its end lets any worker take the job (a parked long-poll is served without a new
 * request), and --resume-hold-s 0 holds nothing. End to end, with two real rung-workers and the
 * simulated trainer: a job that runs out of memory while sampling, after a checkpoint, runs again on
 * the same host and resumes from it, and /metrics counts the resume and the steps it spared. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "jobtext.h"
#include "jpath.h"
#include "util.h"

/* FACTS of a CUDA OOM in training at step last on a 24 GiB card; saved: the checkpoint the run
 * saved before it (NULL: none). */
static json_t *facts_oom(int last, const char *saved)
{
	json_t *f = json_pack("{s:i, s:n, s:b, s:s, s:s, s:i, s:i, s:i, s:i, s:{s:i, s:i}, s:{s:i, s:i, s:i, s:i, s:[]},"
			      " s:s, s:i, s:[s]}", "exit_code", 1, "signal", "cancelled", 0, "phase", "train", "oom_phase",
			      "train", "first_step", 0, "last_step", last, "steps_done", last, "total_steps", 100,
			      "signatures", "cuda_oom", 1, "error_running_job", 1, "oom", "tried_to_allocate_mib", 2048,
			      "total_capacity_mib", 24564, "free_mib", 1100, "allocated_by_pytorch_mib", 21564,
			      "processes", "error", "torch.OutOfMemoryError: CUDA out of memory", "duration_ms", 4000,
			      "log_tail", "torch.OutOfMemoryError: CUDA out of memory");

	json_object_set_new(f, "saved_path", saved ? json_string(saved) : json_null());
	return f;
}

/* Finishes the lease with facts (stolen); true on 200. */
static bool finish(struct harness *h, const json_t *l, json_t *facts)
{
	long st = 0;
	char *aid = h_id(l, "attempt_id");
	json_t *r = h_fake_finish(h, aid ? aid : "0", h_str(l, "token"), facts, &st);

	json_decref(r);
	json_decref(facts);
	free(aid);
	return st == 200;
}

/* Leases on fake worker wid's GPU, waiting up to wait_ms, and finishes what it got with a success;
 * true when the lease was of job want. */
static bool leases_done(struct harness *h, const char *wid, const char *gpu, int wait_ms, const char *want)
{
	long st = 0;
	json_t *l = h_fake_lease(h, wid, gpu, wait_ms, &st);
	char *got = h_id(l, "job_id");
	bool ok = l && got && want && !strcmp(got, want);

	if (l)
		finish(h, l, h_facts_success(100));
	if (!ok)
		h_diag("lease on %s: status %ld, job %s (wanted %s)", gpu, st, got ? got : "-", want ? want : "-");
	json_decref(l);
	free(got);
	return ok;
}

/* The job's constraints.hold.worker_id, or -1 when it has no hold. */
static long long hold_worker(struct harness *h, const char *id)
{
	json_t *j = h_job(h, id);
	long long w = jpath_int(j, "constraints.hold.worker_id", -1);

	json_decref(j);
	return w;
}

/* Submits a job of 100 steps named name, without scale-up (its success ends it); returns its id
 * (heap) or NULL. */
static char *submit(struct harness *h, const char *name)
{
	json_t *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0);
	char *id = h_submit_id(h, name, 100, extra);

	json_decref(extra);
	return id;
}

static void test_hold(struct harness *h, const char *a, const char *b)
{
	char *id = submit(h, "res_hold"), *jid = NULL, *why = NULL;
	json_t *l = NULL, *j = NULL;
	long st = 0;
	long long aw = a ? strtoll(a, NULL, 10) : 0;

	if (!h_ok(h, id != NULL, "a job is submitted"))
		return;
	l = h_fake_lease(h, a, "GPU-res-a", 2000, &st);
	jid = h_id(l, "job_id");
	if (!h_ok(h, l && jid && !strcmp(jid, id), "worker A leases it"))
		goto out;
	h_ok(h, finish(h, l, facts_oom(30, "/w/jobs/1/output/res_hold/res_hold_000000020.safetensors")),
	     "attempt 1 ends: out of memory at step 30, after a checkpoint at step 20");
	json_decref(l);
	l = NULL;
	j = h_job(h, id);
	h_ok(h, !strcmp(h_str(j, "state"), "queued") && jpath_int(j, "constraints.hold.worker_id", -1) == aw &&
		     jpath_int(j, "constraints.hold.attempt", -1) == 1 &&
		     json_is_string(jpath_get(j, "constraints.hold.until")) &&
		     !strcmp(jpath_str(j, "constraints.hold.path", ""), "/w/jobs/1/output/res_hold/res_hold_000000020.safetensors"),
	     "it is queued again, held for worker A (the attempt that saved, the file, until when)");
	h_ok(h, jpath_int(j, "placement.held.worker_id", -1) == aw && jpath_int(j, "placement.held.in_s", -1) > 0 &&
		     jpath_int(j, "placement.held.in_s", -1) <= 60,
	     "its placement says so, with the seconds left (%lld)", jpath_int(j, "placement.held.in_s", -1));
	why = jobtext_placement(j);
	h_ok(h, why && strstr(why, "its host has the checkpoint attempt 1 saved") && strstr(why, "resumes there"),
	     "and rungctl show and the job page say why it waits: %s", why ? why : "(none)");
	{
		char *page = xasprintf("/ui/jobs/%s", id);
		long pst = h_browse(h, h->admin_token, "GET", page, NULL, NULL);
		h_ok(h, pst == 200 && h->last_body && strstr(h->last_body, "waiting for worker ") &&
			     strstr(h->last_body, "so the job resumes there instead of starting over") &&
			     strstr(h->last_body, "res_hold_000000020.safetensors"),
		     "the job page says so too, and lists the hold among its placement constraints (status %ld)", pst);
		free(page);
	}
	json_decref(j);
	j = NULL;

	l = h_fake_lease(h, b, "GPU-res-b", 300, &st);
	h_ok(h, l == NULL && st != 200, "worker B's lease gets nothing while the hold lasts (status %ld)", st);
	json_decref(l);
	l = h_fake_lease(h, a, "GPU-res-a", 2000, &st);
	free(jid);
	jid = h_id(l, "job_id");
	if (!h_ok(h, l && jid && !strcmp(jid, id) && jpath_int(l, "number", 0) == 2, "worker A's lease gets it: attempt 2"))
		goto out;
	h_ok(h, hold_worker(h, id) == -1, "the lease drops the hold");
	h_ok(h, finish(h, l, facts_oom(22, NULL)), "attempt 2 ends: out of memory at step 22, before its next save");
	json_decref(l);
	l = NULL;
	j = h_job(h, id);
	h_ok(h, jpath_int(j, "constraints.hold.worker_id", -1) == aw && jpath_int(j, "constraints.hold.attempt", -1) == 1,
	     "held for worker A again: the newest checkpoint is still attempt 1's, on that host");
	json_decref(j);
	j = NULL;

	json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/drain", a));
	h_ok(h, st == 200 && hold_worker(h, id) == -1, "draining worker A ends the hold");
	l = h_fake_lease(h, b, "GPU-res-b", 2000, &st);
	free(jid);
	jid = h_id(l, "job_id");
	if (!h_ok(h, l && jid && !strcmp(jid, id) && jpath_int(l, "number", 0) == 3,
		  "so worker B leases it at once: attempt 3"))
		goto out;
	json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/drain", b));
	h_ok(h, st == 200, "worker B is drained while attempt 3 runs");
	json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/resume", a));
	h_ok(h, finish(h, l, facts_oom(40, "/w/jobs/1/output/res_hold/res_hold_000000030.safetensors")),
	     "attempt 3 ends: out of memory after a checkpoint");
	json_decref(l);
	l = NULL;
	h_ok(h, hold_worker(h, id) == -1, "no hold for a draining worker");
	h_ok(h, leases_done(h, a, "GPU-res-a", 2000, id), "worker A, resumed, leases it at once");
	json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/resume", b));
out:
	json_decref(l);
	json_decref(j);
	free(id);
	free(jid);
	free(why);
}

/* The hold's worker takes its held job before an older job of the same priority (the older one was
 * scheduled, then started: ahead in claim order); the other worker takes the older one. */
static void test_prefer(struct harness *h, const char *a, const char *b)
{
	json_t *cfg = h_config("res_older", 100), *ex = json_pack("{s:i, s:{s:b}}", "start_in_s", 3600,
								   "recovery", "scale_up", 0);
	json_t *j = h_submit(h, cfg, ex), *l = NULL;
	char *older = h_id(j, "id"), *held = submit(h, "res_held"), *got = NULL;
	long st = 0;

	json_decref(j);
	j = NULL;
	l = h_fake_lease(h, a, "GPU-res-a", 2000, &st);
	got = h_id(l, "job_id");
	if (!h_ok(h, older && held && got && !strcmp(got, held), "an older job waits for its start time; worker A leases a newer one"))
		goto out;
	finish(h, l, facts_oom(30, "/w/jobs/5/output/res_held/res_held_000000020.safetensors"));
	json_decref(l);
	l = NULL;
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/start", older));
	j = h_job(h, older);
	h_ok(h, st == 200 && hold_worker(h, held) == strtoll(a, NULL, 10) && jpath_int(j, "placement.ahead", -1) == 0,
	     "the newer one is held for A; the older one, started now, is first in the queue");
	h_ok(h, leases_done(h, a, "GPU-res-a", 2000, held), "worker A takes its held job first (its checkpoint is on A's host)");
	h_ok(h, leases_done(h, b, "GPU-res-b", 2000, older), "worker B takes the older job");
out:
	json_decref(l);
	json_decref(j);
	json_decref(ex);
	json_decref(cfg);
	free(older);
	free(held);
	free(got);
}

/* rung_claim as one GPU's claim (the fallback of a round, rung_claim_in) while some owner is at its
 * limit: rung_claim_pick, through the queue's head and, with a fair share's running counts, through
 * rung_claim_walk. Neither gives another worker's GPU a job held for worker A; A's gets it. */
static void test_pick(struct harness *h, const char *a, const char *b)
{
	char *id = submit(h, "res_pick"), *got = NULL, *aid = NULL;
	json_t *l = NULL, *lease = NULL;
	long st = 0;
	const char *pb[] = { b }, *pa[] = { a };

	l = h_fake_lease(h, a, "GPU-res-a", 2000, &st);
	got = h_id(l, "job_id");
	if (!h_ok(h, id && got && !strcmp(got, id), "worker A leases a job"))
		goto out;
	h_ok(h, finish(h, l, facts_oom(30, "/w/jobs/9/output/res_pick/res_pick_000000020.safetensors")) &&
		     hold_worker(h, id) == strtoll(a, NULL, 10),
	     "it runs out of memory after a checkpoint: held for worker A");
	json_decref(l);
	l = NULL;
	h_ok(h, h_sql_int(h, "SELECT count(*) WHERE 'it-submitter' = ANY (rung_owners_capped_in(rung_owner_room(), 'default'))", 0, NULL) == 1,
	     "an owner is at its limit, so a one-GPU claim goes through rung_claim_pick");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM rung_claim($1::bigint, 'GPU-res-b', 60, NULL) r WHERE r->>'status' = 'none'",
			  1, pb) == 1,
	     "worker B's one-GPU claim, through the queue's head: nothing");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM rung_claim($1::bigint, 'GPU-res-b', 60, NULL, NULL, '{}'::jsonb) r "
			     "WHERE r->>'status' = 'none'", 1, pb) == 1,
	     "nor with a fair share's running counts (rung_claim_walk)");
	{
		PGresult *r = h_sql(h, "SELECT rung_claim($1::bigint, 'GPU-res-a', 60, NULL)::text", 1, pa);
		lease = r && PQntuples(r) == 1 ? json_loads(PQgetvalue(r, 0, 0), 0, NULL) : NULL;
		PQclear(r);
	}
	free(got);
	got = h_id(json_object_get(lease, "lease"), "job_id");
	aid = h_id(json_object_get(lease, "lease"), "attempt_id");
	h_ok(h, got && !strcmp(got, id), "worker A's one-GPU claim gets the held job");
	h_ok(h, aid && finish(h, json_object_get(lease, "lease"), h_facts_success(100)), "and it succeeds there");
out:
	json_decref(l);
	json_decref(lease);
	free(id);
	free(got);
	free(aid);
}

/* A cancel that lands between a finish's CTX and its apply turns a re-queue into an end, and drops the
 * decision's hold. A server decision (a preemption's, a requeue's) has null constraints: the apply, set-wise
 * (rung_finish_apply_batch) or one by one (rung_finish_apply), must end the job cancelled, not fail. Played
 * in SQL: the cancel is recorded after the lease, the decision applied by hand. */
static void test_cancel_race(struct harness *h, const char *a)
{
	static const char decision[] =
		"{\"class\": \"preempted\", \"rule\": \"requeued\", \"evidence\": [], \"action\": \"requeue_preempted\","
		" \"rung\": null, \"changes\": [], \"next_config\": null, \"job_state\": \"queued\", \"reason\": \"stopped\","
		" \"constraints\": null, \"gpu\": null, \"escalation\": null, \"recovery_state\": {}}";

	for (int batch = 1; batch >= 0; batch--) {
		char *id = submit(h, batch ? "res_race_batch" : "res_race_one"), *aid = NULL, *item = NULL;
		json_t *l = NULL;
		long st = 0;
		PGresult *r;

		l = h_fake_lease(h, a, "GPU-res-a", 2000, &st);
		aid = h_id(l, "attempt_id");
		if (!h_ok(h, id && l && aid, "worker A leases a job (%s apply)", batch ? "set-wise" : "one by one"))
			goto next;
		{
			const char *p[] = { id };
			PQclear(h_sql(h, "UPDATE jobs SET cancel_requested = true WHERE id = $1::bigint", 1, p));
		}
		if (batch) {
			item = xasprintf("[{\"i\": 1, \"id\": %s, \"token\": \"%s\", \"facts\": {\"cancelled\": true},"
					 " \"decision\": %s}]", aid, h_str(l, "token"), decision);
			const char *p[] = { item };
			r = h_sql(h, "SELECT count(*) FROM rung_finish_apply_batch($1::jsonb)", 1, p);
		} else {
			const char *p[] = { aid, h_str(l, "token"), decision };
			r = h_sql(h, "SELECT rung_finish_apply($1::bigint, $2, '{\"cancelled\": true}', $3::jsonb, NULL)->>'job_state'",
				  3, p);
		}
		h_ok(h, r && PQresultStatus(r) == PGRES_TUPLES_OK, "the apply of a re-queue with null constraints, the cancel "
		     "recorded since, succeeds (%s)", r ? PQresultErrorMessage(r) : "no result");
		PQclear(r);
		{
			const char *p[] = { id };
			h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs WHERE id = $1::bigint AND state = 'cancelled'", 1, p) == 1,
			     "and the job ends cancelled");
		}
	next:
		json_decref(l);
		free(id);
		free(aid);
		free(item);
	}
}

/* Sets the max_running of the live token named name (JSON text: a number or null); true on 200. */
static bool limit(struct harness *h, const char *name, const char *v)
{
	long st = 0;
	json_t *r = h_get(h, "/v1/tokens", &st), *t, *body = json_pack("{s:o}", "max_running", json_loads(v, JSON_DECODE_ANY, NULL));
	char *id = NULL;
	size_t i;

	json_array_foreach(json_object_get(r, "tokens"), i, t)
		if (!id && !strcmp(h_str(t, "name"), name) && json_is_null(json_object_get(t, "revoked_at")))
			id = h_id(t, "id");
	st = 0;
	if (id)
		json_decref(h_postf(h, body, &st, "/v1/tokens/%s/limits", id));
	json_decref(body);
	json_decref(r);
	free(id);
	return st == 200;
}

/* Registers fake worker NAME in pool POOL with GPUs "GPU-NAME-0" and "GPU-NAME-1", borrowing BORROW
 * (JSON text, NULL: none); returns its id (heap) or NULL. */
static char *join2(struct harness *h, const char *name, const char *pool, const char *borrow)
{
	long st = 0;
	char g0[64], g1[64];
	json_t *body, *r;
	char *id;

	snprintf(g0, sizeof g0, "GPU-%s-0", name);
	snprintf(g1, sizeof g1, "GPU-%s-1", name);
	body = json_pack("{s:s, s:s, s:s, s:[{s:s, s:i, s:s, s:i}, {s:s, s:i, s:s, s:i}]}", "name", name, "host", name,
			 "pool", pool, "gpus", "uuid", g0, "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 24564,
			 "uuid", g1, "index", 1, "name", "NVIDIA Sim", "memory_total_mib", 24564);
	if (borrow)
		json_object_set_new(body, "borrow", json_loads(borrow, JSON_DECODE_ANY, NULL));
	r = h_post(h, "/v1/workers", body, &st);
	id = (st == 200 || st == 201) ? h_id(r, "id") : NULL;
	json_decref(body);
	json_decref(r);
	return id;
}

/* A preemption pass makes no stop for a held job: worker H (pool rp, borrowing from rq) runs a job
 * of rq on one GPU while its own pool's job, held for it after an OOM, waits; worker X of rp is idle
 * (the hold keeps the job from it). Without the pass's rule it would stop H's borrowed job. */
static void test_preempt(struct harness *h)
{
	char *hid = join2(h, "res-h", "rp", "[\"rq\"]"), *xid = join2(h, "res-x", "rp", NULL);
	json_t *cfg = h_config("res_own", 100), *ex = json_pack("{s:s, s:{s:b}}", "pool", "rp", "recovery", "scale_up", 0);
	json_t *j = h_submit(h, cfg, ex), *l1 = NULL, *l2 = NULL;
	char *own = h_id(j, "id"), *borrowed = NULL, *got = NULL, *first = NULL;
	const char *p[1];
	long st = 0;

	json_decref(j);
	j = NULL;
	if (!h_ok(h, hid && xid && own, "workers H (rp, borrowing rq) and X (rp), a job of rp"))
		goto out;
	l1 = h_fake_lease(h, hid, "GPU-res-h-0", 2000, &st);
	got = h_id(l1, "job_id");
	if (!h_ok(h, l1 && got && !strcmp(got, own), "H's first GPU leases its own pool's job"))
		goto out;
	json_decref(ex);
	ex = json_pack("{s:s}", "pool", "rq");
	json_decref(cfg);
	cfg = h_config("res_borrowed", 100);
	j = h_submit(h, cfg, ex);
	borrowed = h_id(j, "id");
	l2 = h_fake_lease(h, hid, "GPU-res-h-1", 2000, &st);
	free(got);
	got = h_id(l2, "job_id");
	if (!h_ok(h, l2 && got && borrowed && !strcmp(got, borrowed), "H's second GPU borrows a job of rq"))
		goto out;
	finish(h, l1, facts_oom(30, "/w/jobs/9/output/res_own/res_own_000000020.safetensors"));
	json_decref(l1);
	l1 = NULL;
	h_ok(h, hold_worker(h, own) == strtoll(hid, NULL, 10), "the own pool's job ran out of memory and is held for H");
	/* H's freed GPU takes a job of rp that comes first (priority 10): H has no idle GPU now */
	json_decref(j);
	json_decref(ex);
	/* no scale-up: were it started lower (the memory model's cache may hold flux's history by now),
	 * a scale-up step would queue it again ahead of the held job */
	ex = json_pack("{s:s, s:i, s:{s:b}}", "pool", "rp", "priority", 10, "recovery", "scale_up", 0);
	json_decref(cfg);
	cfg = h_config("res_first", 100);
	j = h_submit(h, cfg, ex);
	free(first);
	first = h_id(j, "id");
	l1 = h_fake_lease(h, hid, "GPU-res-h-0", 2000, &st);
	free(got);
	got = h_id(l1, "job_id");
	h_ok(h, l1 && got && first && !strcmp(got, first), "H's freed GPU leases a job of rp of a higher priority");
	h_ok(h, h_sql_int(h, "SELECT jsonb_array_length(rung_preempt(0, 10, false))", 0, NULL) == 0,
	     "a preemption pass stops nothing for the held job (X is idle, the hold keeps the job for H)");
	if (l1)
		finish(h, l1, h_facts_success(100));
	json_decref(l1);
	l1 = NULL;
	p[0] = borrowed;
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint AND preempted_at IS NOT NULL", 1, p) == 0,
	     "H's borrowed job is not marked");
	l1 = h_fake_lease(h, hid, "GPU-res-h-0", 2000, &st);
	free(got);
	got = h_id(l1, "job_id");
	if (!h_ok(h, l1 && got && !strcmp(got, own), "H's first GPU takes the held job again")) {
		json_t *oj = h_job(h, own);
		h_diag("lease status %ld, job %s", st, got ? got : "(none)");
		h_diag_json("the held job", oj);
		json_decref(oj);
	}
	if (l1)
		finish(h, l1, h_facts_success(100));
	finish(h, l2, h_facts_success(100));
out:
	json_decref(j);
	json_decref(l1);
	json_decref(l2);
	json_decref(cfg);
	json_decref(ex);
	if (hid)
		json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/drain", hid));
	if (xid)
		json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/drain", xid));
	free(hid);
	free(xid);
	free(own);
	free(borrowed);
	free(got);
	free(first);
}

/* Restarts rungd with FLAGS, submits job NAME, leases it on worker A and ends that attempt with an
 * OOM past a checkpoint; returns the job's id (heap) or NULL (each step checked). */
static char *oom_after_restart(struct harness *h, const char *const *flags, const char *what, const char *a,
			       const char *name)
{
	char path[128], *id;
	json_t *l;
	long st = 0;

	if (!h_ok(h, h_server_stop(h, SIGTERM) == 0 && h_server_start(h, flags) == 0, "rungd restarted with %s", what))
		return NULL;
	id = submit(h, name);
	l = h_fake_lease(h, a, "GPU-res-a", 2000, &st);
	snprintf(path, sizeof path, "/w/jobs/x/output/%s/%s_000000020.safetensors", name, name);
	if (!h_ok(h, id && l && finish(h, l, facts_oom(30, path)), "worker A leases %s; it runs out of memory past a checkpoint",
		  name)) {
		free(id);
		id = NULL;
	}
	json_decref(l);
	return id;
}

/* rungd restarted with --resume-hold-s 2: a hold ends and a parked long-poll of another worker
 * gets the job; then --resume-hold-s 0 holds nothing. */
static void test_end(struct harness *h, const char *a, const char *b)
{
	const char *two[] = { "--resume-hold-s", "2", NULL }, *zero[] = { "--resume-hold-s", "0", NULL };
	char *id = oom_after_restart(h, two, "--resume-hold-s 2", a, "res_end");

	if (id) {
		h_ok(h, hold_worker(h, id) == strtoll(a, NULL, 10), "it is held for worker A");
		/* one request, parked while the hold lasts: served once it ends (rungd's long-poll retries) */
		h_ok(h, leases_done(h, b, "GPU-res-b", 15000, id), "worker B's one long-poll gets it once the 2 s hold ends");
		free(id);
	}
	id = oom_after_restart(h, zero, "--resume-hold-s 0", a, "res_zero");
	if (id) {
		h_ok(h, hold_worker(h, id) == -1, "--resume-hold-s 0: no hold");
		h_ok(h, leases_done(h, b, "GPU-res-b", 2000, id), "worker B leases it at once");
		free(id);
	}
}

/* Two real workers, the simulated trainer, the default hold. */
static void test_real(struct harness *h)
{
	json_t *cfg = h_config("res_real", 60), *j = NULL, *atts = NULL;
	char *text = NULL;
	struct h_worker *w1, *w2;
	char *id = NULL;
	const json_t *a1, *a2;

	h_ok(h, h_server_stop(h, SIGTERM) == 0 && h_server_start(h, NULL) == 0, "rungd restarted with the default hold");
	w1 = h_worker_start(h, "res-real-1", NULL);
	w2 = h_worker_start(h, "res-real-2", NULL);
	/* a 2048² preview at step 20 runs out of memory (it_recovery's sample_oom), after the save at 10 */
	h_config_set(cfg, "config.process[0].save.save_every", json_integer(10));
	h_config_set(cfg, "config.process[0].sample.sample_every", json_integer(20));
	h_config_set(cfg, "config.process[0].sample.width", json_integer(2048));
	h_config_set(cfg, "config.process[0].sample.height", json_integer(2048));
	h_config_set(cfg, "config.process[0].train.skip_first_sample", json_true());
	j = h_submit(h, cfg, NULL);
	id = h_id(j, "id");
	json_decref(j);
	j = NULL;
	if (!h_ok(h, w1 && w2 && id, "two workers, and a job whose 2048² preview at step 20 does not fit"))
		goto out;
	j = h_wait_job(h, id, "succeeded", 120000);
	h_ok(h, j != NULL, "the job succeeds");
	atts = h_getf(h, &(long){ 0 }, "/v1/jobs/%s/attempts", id);
	a1 = json_array_get(json_object_get(atts, "attempts"), 0);
	a2 = json_array_get(json_object_get(atts, "attempts"), 1);
	h_ok(h, a1 && a2 && !strcmp(h_str(a1, "class"), "oom_sample"), "attempt 1 ran out of memory while sampling (%s)",
	     a1 ? h_str(a1, "class") : "-");
	h_ok(h, a1 && a2 && json_equal(json_object_get(a1, "worker_id"), json_object_get(a2, "worker_id")),
	     "attempt 2 ran on attempt 1's worker, though the other worker was idle");
	h_ok(h, a2 && jpath_int(a2, "facts.first_step", 0) >= 10 && jpath_int(a2, "facts.signatures.resuming", 0) >= 1,
	     "and resumed from its checkpoint (first step %lld)", a2 ? jpath_int(a2, "facts.first_step", 0) : -1);
	text = h_scrape(h);
	h_ok(h, h_sample(text, "rung_resumed_attempts_total") == 1 &&
		     h_sample(text, "rung_resumed_steps_total") == (double)jpath_int(a2, "facts.first_step", -1),
	     "/metrics counts the resumed attempt and the steps it did not run again (%.0f)",
	     h_sample(text, "rung_resumed_steps_total"));
	{
		/* what they would have cost: those steps at attempt 2's own pace, as the worker timed it */
		double train_s = (double)jpath_int(a2, "facts.train_ms", -1) / 1000.0;
		double done = (double)jpath_int(a2, "facts.train_steps", 0), first = (double)jpath_int(a2, "facts.first_step", 0);
		double want = done > 0 ? first * train_s / done : -1, got = h_sample(text, "rung_resumed_gpu_seconds_total");
		json_t *u = h_getf(h, &(long){ 0 }, "/v1/usage");
		const json_t *r = json_object_get(json_object_get(u, "total"), "resumed");
		char *out = NULL;
		int rc = -1;
		h_ok(h, done >= 10 && train_s * 1000 <= (double)jpath_int(a2, "facts.duration_ms", 0) &&
			     train_s / done > 0.025 && train_s / done < 0.15,
		     "the worker timed %.0f steps in %.2f s: %.0f ms a step, the simulated trainer's 50 ms give or take its "
		     "samples (not its load or its end)", done, train_s, 1000 * train_s / (done > 0 ? done : 1));
		h_ok(h, train_s > 0 && want > 0 && got > want - 0.01 && got < want + 0.01,
		     "/metrics prices them at attempt 2's pace: %.2f GPU seconds (%.0f steps x %.3f s / %.0f steps)",
		     got, first, train_s, done);
		h_ok(h, h_int(r, "attempts") == 1 && h_int(r, "steps") == (long long)first && h_int(r, "priced") == 1 &&
			     json_number_value(json_object_get(r, "gpu_seconds")) > want - 0.06 &&
			     json_number_value(json_object_get(r, "gpu_seconds")) < want + 0.06,
		     "GET /v1/usage's total says so too (%lld attempts, %lld steps, %.1f s)", h_int(r, "attempts"),
		     h_int(r, "steps"), json_number_value(json_object_get(r, "gpu_seconds")));
		out = h_rungctl(h, "usage", &rc);
		h_ok(h, rc == 0 && out && strstr(out, "; resuming from checkpoints spared about ") &&
			     strstr(out, "steps not run again, in 1 attempt)"),
		     "rungctl usage's total line says what resuming spared");
		{
			/* the fake workers' "NVIDIA Sim" earlier, the real worker's simulated RTX 4090 now */
			const json_t *models = json_object_get(json_object_get(u, "total"), "by_gpu"), *m;
			double sum = 0, all = json_number_value(json_object_get(json_object_get(u, "total"), "gpu_seconds"));
			bool sim = false, rtx = false;
			size_t k;
			json_array_foreach(models, k, m) {
				sum += json_number_value(json_object_get(m, "gpu_seconds"));
				sim = sim || !strcmp(h_str(m, "model"), "NVIDIA Sim");
				rtx = rtx || !strcmp(h_str(m, "model"), "NVIDIA GeForce RTX 4090");
			}
			h_ok(h, sim && rtx && sum > all - 0.05 * (double)json_array_size(models) - 0.05 &&
				     sum < all + 0.05 * (double)json_array_size(models) + 0.05,
			     "GET /v1/usage splits the GPU time by GPU model, as the workers registered them (%.1f of %.1f s "
			     "in %zu models)", sum, all, json_array_size(models));
			h_ok(h, out && strstr(out, "GPU hours by GPU model:\nOWNER") && strstr(out, "NVIDIA GeForce RTX 4090") &&
				     strstr(out, "\n(OOM, all) "),
			     "and rungctl usage prints each owner's hours per model, and the OOMs' per model");
			{
				double oom = 0, all_oom = json_number_value(json_object_get(json_object_get(u, "total"),
											     "oom_gpu_seconds"));
				json_array_foreach(models, k, m)
					oom += json_number_value(json_object_get(m, "oom_gpu_seconds"));
				h_ok(h, all_oom > 0 && oom > all_oom - 0.05 * (double)json_array_size(models) - 0.05 &&
					     oom < all_oom + 0.05 * (double)json_array_size(models) + 0.05,
				     "GET /v1/usage splits the OOMs' GPU time by model too (%.1f of %.1f s)", oom, all_oom);
			}
		}
		free(out);
		json_decref(u);
	}
	/* figures a worker may send that no int holds, and too few steps timed: no estimate, no error */
	h_ok(h, h_sql_int(h, "SELECT count(*) WHERE rung_resumed_step('{\"signatures\": {\"resuming\": 9007199254740991}, "
			     "\"first_step\": 3000000000}') IS NULL AND rung_resumed_gpu_s('{\"signatures\": {\"resuming\": 1}, "
			     "\"first_step\": 500, \"train_ms\": 9007199254740991, \"train_steps\": 9}') IS NULL AND "
			     "rung_resumed_gpu_s('{\"signatures\": {\"resuming\": 1}, \"first_step\": 500, \"train_ms\": 20000, "
			     "\"train_steps\": 100}') = 100", 0, NULL) == 1,
	     "a first step past an int prices nothing, nor 9 steps timed; 100 steps in 20 s price 500 at 100 s");
out:
	free(text);
	json_decref(j);
	json_decref(atts);
	json_decref(cfg);
	free(id);
}

int main(void)
{
	struct harness *h = h_new("it_resume");
	const char *hold[] = { "--resume-hold-s", "60", NULL }, *fair[] = { "--fair-share", "--resume-hold-s", "60", NULL };
	char *a = NULL, *b = NULL;

	if (!h_ok(h, h_server_start(h, hold) == 0, "rungd starts with --resume-hold-s 60"))
		return h_free(h);
	a = h_fake_register(h, "res-a", "GPU-res-a", 24564);
	b = h_fake_register(h, "res-b", "GPU-res-b", 24564);
	if (h_ok(h, a && b, "two fake workers register")) {
		test_hold(h, a, b);
		test_prefer(h, a, b);
		/* the same under a fair share: the held job is the first of its priority for its worker */
		if (h_ok(h, h_server_stop(h, SIGTERM) == 0 && h_server_start(h, fair) == 0,
			 "rungd restarted with --fair-share --resume-hold-s 60"))
			test_prefer(h, a, b);
		/* and while some owner is at its limit (the round reads the queue's head, rung_queue_head) */
		if (h_ok(h, h_server_stop(h, SIGTERM) == 0 && h_server_start(h, hold) == 0 && limit(h, "it-submitter", "0"),
			 "rungd restarted without a fair share; the submitter's team is paused (max_running 0)")) {
			test_prefer(h, a, b);
			test_pick(h, a, b);
		}
		h_ok(h, limit(h, "it-submitter", "null"), "the pause is lifted");
		test_preempt(h);
		test_cancel_race(h, a);
		test_end(h, a, b);
	}
	json_decref(h_postf(h, NULL, &(long){ 0 }, "/v1/workers/%s/drain", a ? a : "0"));
	json_decref(h_postf(h, NULL, &(long){ 0 }, "/v1/workers/%s/drain", b ? b : "0"));
	test_real(h);
	free(a);
	free(b);
	return h_free(h);
}
