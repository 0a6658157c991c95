/* /v1/attempts handlers: heartbeat (a fenced UPDATE) and finish, in three steps: the CTX in a
 * fenced statement, then policy_decide (and report_build when it escalates) on the loop, then the
 * DECISION applied in a statement fenced again by (attempt id, token, state running). Each step is
 * coalesced across requests (batch.c; sql/functions/60_finish_ctx_batch.sql, 62_finish_apply_batch.sql);
 * replies only after the commit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_attempts.h"
#include "app.h"
#include "batch.h"
#include "classify.h"
#include "db.h"
#include "facts.h"
#include "http.h"
#include "jpath.h"
#include "lease.h"
#include "log.h"
#include "memcache.h"
#include "memmodel.h"
#include "policy.h"
#include "report.h"
#include "resume.h"
#include "sql.h"
#include "util.h"

#define TOKEN_MAX_LEN 256
#define FINISH_TAIL_MAX 200            /* facts.log_tail lines (DESIGN.md FACTS); more: 413 */
#define FINISH_LINE_MAX 1000           /* bytes per log_tail line; more: 400 */
#define FINISH_FACTS_MAX (512 * 1024)  /* serialised facts; more: 413 */

struct finish {
	struct hreq *h;
	long long attempt_id;
	char id[32];
	char *token;
	char *facts_s;
	json_t *facts;            /* the reported FACTS */
	json_t *decision;         /* the DECISION being applied */
	json_t *report;           /* {"markdown", "json"} when it escalates, else NULL */
	json_t *obs;              /* the memory OBSERVATION of the attempt (memmodel.h), stored with it */
	json_t *ctx;
	bool fallback;            /* already re-applied a fail-safe decision once */
	bool plain;               /* api_attempts_plain_finish(facts): the CTX may leave out "memory" */
};

static void finish_free(struct finish *f)
{
	if (!f)
		return;
	free(f->token);
	free(f->facts_s);
	json_decref(f->facts);
	json_decref(f->decision);
	json_decref(f->report);
	json_decref(f->obs);
	json_decref(f->ctx);
	free(f);
}

static void fenced(struct hreq *h, const char *id)
{
	hreq_error(h, 409, "not_running", NULL,
		   "attempt %s is not running with this token (stale, finished, or lost)", id);
}

/* Heartbeats are coalesced (batch.c): one rung_heartbeats() statement per batch, each
 * reply sent after it committed, the fence (id, token, running) checked per row. */
struct beat {
	struct hreq *h;
	json_t *item;             /* {"id", "token", "phase", "step", "total", "mem"} */
	long long id;
};

static json_t *beat_json(void *item)
{
	return json_incref(((struct beat *)item)->item);
}

static long long beat_order(void *item)
{
	return ((struct beat *)item)->id;
}

static void beats_done(void **items, int n, PGresult *res, const char *err, void *arg)
{
	struct app *app = arg;
	/* per item: 0 fenced out, else 1 | 2 when its job's cancel was requested | 4 when it is preempted */
	signed char *told = xcalloc((size_t)n + 1, 1);
	const char *value;

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK)
		for (int r = 0; r < PQntuples(res); r++) {
			int i = batch_row_index(res, r, n);
			if (i >= 0)
				told[i] = (signed char)(1 | (PQgetvalue(res, r, 1)[0] == 't' ? 2 : 0) |
							(PQgetvalue(res, r, 2)[0] == 't' ? 4 : 0));
		}
	for (int i = 0; i < n; i++) {
		struct beat *b = items[i];
		struct hreq *h = b->h;
		if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
			hreq_db_value(h, res, err, &value); /* answers 503 or 500 */
		else if (!told[i])
			fenced(h, h->param[0]);
		else {
			if (told[i] & 2)
				log_info("cancel told", "attempt=%s", h->param[0]);
			else if (told[i] & 4)
				log_info("preempt told", "attempt=%s", h->param[0]);
			/* "cancel" for a preemption too: a worker of the release before stops the trainer all the same */
			hreq_reply(h, 200, json_pack("{s:b, s:b, s:i}", "cancel", (told[i] & 6) != 0, "preempt",
						     (told[i] & 4) != 0, "lease_seconds", app->lease_seconds));
		}
		json_decref(b->item);
		free(b);
	}
	free(told);
}

static json_t *ctx_json(void *item);
static void ctxs_done(void **items, int n, PGresult *res, const char *err, void *arg);
static json_t *apply_json(void *item);
static void applies_done(void **items, int n, PGresult *res, const char *err, void *arg);
static long long finish_order(void *item);

static const struct batch_ops beat_ops = { sql_heartbeat_batch, beat_json, beats_done, beat_order, NULL };
static const struct batch_ops ctx_ops = { sql_finish_ctx_batch, ctx_json, ctxs_done, NULL, NULL };
static const struct batch_ops apply_ops = { sql_finish_apply_batch, apply_json, applies_done, finish_order, NULL };

#define BEAT_BATCH_MAX 500
#define FINISH_BATCH_MAX 64
#define FINISH_INFLIGHT 2

/* The process's coalescers, made on first use for the app's pool. */
static struct coalescers {
	struct db *db;
	struct batch *beats, *ctx, *apply;
} co;

static struct coalescers *coalescers(struct app *app)
{
	if (co.db != app->db) {
		char lease[32];
		snprintf(lease, sizeof lease, "%d", app->lease_seconds);
		co.db = app->db;
		co.beats = batch_new(app->base, app->db, &beat_ops, app, BEAT_BATCH_MAX, 1, lease);
		co.ctx = batch_new(app->base, app->db, &ctx_ops, app, FINISH_BATCH_MAX, FINISH_INFLIGHT, NULL);
		co.apply = batch_new(app->base, app->db, &apply_ops, app, FINISH_BATCH_MAX, FINISH_INFLIGHT, NULL);
	}
	return &co;
}

/* The decision for an ending that is not the policy's to judge. */
static json_t *server_decision(const json_t *ctx, const char *cls, const char *rule, const char *job_state,
			       const char *reason)
{
	json_t *rs = json_object_get(json_object_get(ctx, "job"), "recovery_state");

	return json_pack("{s:s?, s:s, s:[s], s:s, s:n, s:[], s:n, s:s, s:s, s:n, s:n, s:n, s:O}",
			 "class", cls, "rule", rule, "evidence", reason, "action", "fail", "rung", "changes",
			 "next_config", "job_state", job_state, "reason", reason, "constraints", "gpu",
			 "escalation", "recovery_state", rs ? rs : json_object());
}

/* The decision for an attempt the worker stopped because rungd preempted it (CTX attempt.preempted,
 * sql/functions/44_preempt.sql: for a job of its worker's own pool, attempt.preempt_for, or on request,
 * rung_requeue, rule "requeued"): its job is queued again with the config it ran (next_config null
 * keeps current_config), class and outcome "preempted", which the budgets do not count
 * (recovery/policy.c). The rest of recovery_state is kept; its next_action says why it waits. */
static json_t *preempt_decision(const json_t *ctx)
{
	const json_t *a = json_object_get(ctx, "attempt");
	/* rung_requeue: no job waits for it (a pre-029 CTX has no preempt_for at all: a preemption, its job unknown) */
	bool asked = json_is_null(json_object_get(a, "preempt_for"));
	json_t *d, *rs;
	char *why = asked ? xasprintf("preempted: attempt %lld was stopped on request (requeue) on GPU %s; queued again "
				      "unchanged (not counted against the budgets)",
				      (long long)json_integer_value(json_object_get(a, "number")),
				      json_string_value(json_object_get(a, "gpu_uuid")) ?: "-")
			  : json_is_integer(json_object_get(a, "preempt_for"))
			  ? xasprintf("preempted: attempt %lld was stopped so that job %lld of its worker's own pool could "
				      "run on GPU %s; queued again unchanged (not counted against the budgets)",
				      (long long)json_integer_value(json_object_get(a, "number")),
				      (long long)json_integer_value(json_object_get(a, "preempt_for")),
				      json_string_value(json_object_get(a, "gpu_uuid")) ?: "-")
			  : xasprintf("preempted: attempt %lld was stopped on GPU %s; queued again unchanged (not counted "
				      "against the budgets)", (long long)json_integer_value(json_object_get(a, "number")),
				      json_string_value(json_object_get(a, "gpu_uuid")) ?: "-");

	d = server_decision(ctx, "preempted", asked ? "requeued" : "preempted", "queued", why);
	rs = json_deep_copy(json_object_get(d, "recovery_state"));
	json_object_set_new(rs, "next_action", json_string(asked ? "run again unchanged: stopped on request (requeue)"
								: "run again unchanged: preempted for a job of the GPU's own pool"));
	json_object_set_new(d, "recovery_state", rs);
	json_object_set_new(d, "action", json_string("requeue_preempted"));
	free(why);
	return d;
}

/* Whether the attempt of CTX was marked for preemption: the CTX's attempt.preempted, or, from a
 * finish CTX of the release before 029 (an older rungd's function files, put back during a rollout),
 * which has no such member, the worker's own record (FACTS.preempted: it was told so). */
static bool preempted(const json_t *ctx, const json_t *facts)
{
	const json_t *a = json_object_get(ctx, "attempt");

	if (json_object_get(a, "preempted"))
		return json_is_true(json_object_get(a, "preempted"));
	return json_is_true(json_object_get(facts, "preempted"));
}

/* Whether a trainer told to stop had ended by itself before the stop reached it: it ran to its end
 * (the scanner saw the run finish, phase "done", or its last step is its total) and its FACTS, read
 * as if no stop had been asked, are a success. A trainer that saved on the interrupt and exited 0
 * halfway did not end by itself. Returns those FACTS (new reference) when it did, else NULL. */
static json_t *ended_by_itself(const json_t *facts)
{
	json_t *f, *c;
	struct classify_in in = { NULL, NULL, 10, false, 0 };
	long long last = jpath_int(facts, "last_step", -1), total = jpath_int(facts, "total_steps", -1);
	bool ok;

	if (strcmp(jpath_str(facts, "phase", ""), "done") && (total <= 0 || last < total))
		return NULL;
	f = json_deep_copy(facts);
	json_object_set_new(f, "cancelled", json_false());
	in.facts = f;
	c = classify_run(&in);
	ok = !strcmp(json_string_value(json_object_get(c, "class")) ?: "", "success");
	json_decref(c);
	if (!ok) {
		json_decref(f);
		return NULL;
	}
	return f;
}

static void finish_apply(struct finish *f, json_t *decision);

static void finish_applied(struct finish *f, const char *value);

static void on_applied(PGresult *res, const char *err, void *arg)
{
	struct finish *f = arg;
	struct hreq *h = f->h;
	const char *value;

	if (res && PQresultStatus(res) == PGRES_FATAL_ERROR && !f->fallback) {
		const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		if (st && strncmp(st, "08", 2) != 0 && strncmp(st, "57", 2) != 0 && strncmp(st, "53", 2) != 0) {
			char *reason = xasprintf("the decision could not be applied: %s",
						 PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?");
			log_error("decision rejected", "job=%lld attempt=%lld worker=%lld gpu=%s error=\"%s\"",
				  (long long)json_integer_value(json_object_get(json_object_get(f->ctx, "job"), "id")),
				  f->attempt_id,
				  (long long)json_integer_value(json_object_get(json_object_get(f->ctx, "attempt"), "worker_id")),
				  json_string_value(json_object_get(json_object_get(f->ctx, "attempt"), "gpu_uuid")) ?: "-",
				  reason);
			f->fallback = true;
			finish_apply(f, server_decision(f->ctx, NULL, "apply_error", "failed", reason));
			free(reason);
			return;
		}
	}
	if (hreq_db_value(h, res, err, &value) < 0) {
		finish_free(f);
		return;
	}
	finish_applied(f, value);
}

/* The decision committed (value: the reply) or was fenced out (value NULL): answers and frees f. */
static void finish_applied(struct finish *f, const char *value)
{
	struct hreq *h = f->h;

	if (!value) {
		fenced(h, f->id);
		goto out;
	}
	if (log_on(LOG_INFO)) { /* the reply is passed through as text; parsed only for this line */
		json_t *doc = json_loads(value, 0, NULL);
		log_info("attempt finished", "job=%lld attempt=%lld worker=%lld gpu=%s escalation=%lld job_state=%s class=%s action=%s rung=%s",
			 (long long)json_integer_value(json_object_get(doc, "job_id")), f->attempt_id,
			 (long long)json_integer_value(json_object_get(json_object_get(f->ctx, "attempt"), "worker_id")),
			 json_string_value(json_object_get(json_object_get(f->ctx, "attempt"), "gpu_uuid")) ?: "-",
			 (long long)json_integer_value(json_object_get(doc, "escalation_id")),
			 json_string_value(json_object_get(doc, "job_state")) ?: "?",
			 json_string_value(json_object_get(json_object_get(doc, "decision"), "class")) ?: "-",
			 json_string_value(json_object_get(json_object_get(doc, "decision"), "action")) ?: "-",
			 json_string_value(json_object_get(json_object_get(doc, "decision"), "rung")) ?: "-");
		json_decref(doc);
	}
	memcache_note_finish(h->app->memcache, f->obs, util_mono_ms()); /* issue 12: the profile learned */
	/* a re-queue wakes the lease waiters of every replica (a cancel may have turned it into an end:
	 * the spare wake-up finds nothing to claim), and so does the ending of a job that jobs were
	 * submitted to run after (the reply's "dependents", migrations 033 and 036: its trigger may have
	 * queued them); the
	 * batch's announces are one NOTIFY */
	if (strcmp(json_string_value(json_object_get(f->decision, "job_state")) ?: "", "queued") == 0 ||
	    (value && strstr(value, "\"dependents\": true")))
		lease_announce(h->app->lease);
	hreq_reply_text(h, 200, value);
out:
	finish_free(f);
}

/* The memory OBSERVATION of the attempt that ended (memmodel_observation): the FEATURES of the
 * config it ran, its arch and GPU, the decision's class and FACTS (peak, OOM figures). Stored with
 * the finish (migrations/014_memory.sql); the CTX and /v1/profiles read it back. */
static json_t *finish_observation(const struct finish *f, const json_t *decision)
{
	const json_t *job = json_object_get(f->ctx, "job"), *a = json_object_get(f->ctx, "attempt");
	const json_t *config = json_object_get(a, "config");
	json_t *features, *obs;
	char arch[64];

	if (!json_is_object(config))
		config = json_object_get(job, "target_config");
	features = memmodel_features(config, json_string_value(json_object_get(job, "kind")));
	memmodel_arch(config, arch, sizeof arch);
	obs = memmodel_observation(arch, (int)json_integer_value(json_object_get(a, "gpu_memory_mib")), features,
				   json_string_value(json_object_get(decision, "class")), f->facts,
				   (long long)json_integer_value(json_object_get(job, "id")), f->attempt_id);
	json_decref(features);
	return obs;
}

/* Applies `decision` (stolen) with the report when it escalates, and the checkpoint hold when the
 * job is queued again after a checkpoint on a live host (recovery/resume.h, --resume-hold-s): queued
 * for the next coalesced rung_finish_apply_batch() statement. */
static void finish_apply(struct finish *f, json_t *decision)
{
	if (f->ctx && decision) {
		json_t *hold = resume_hold(f->ctx, decision, f->h->app->resume_hold_s);
		resume_hold_attach(decision, hold);
		json_decref(hold);
	}
	json_decref(f->decision);
	json_decref(f->report);
	f->report = NULL;
	if (json_is_object(json_object_get(decision, "escalation"))) {
		json_t *r = report_build(f->ctx, decision);
		f->report = r ? json_pack("{s:O?, s:O?}", "markdown", json_object_get(r, "markdown"), "json",
					  json_object_get(r, "json")) : NULL;
		json_decref(r);
	}
	f->decision = decision;
	json_decref(f->obs);
	f->obs = f->ctx ? finish_observation(f, decision) : NULL;
	batch_add(coalescers(f->h->app)->apply, f, -1);
}

static json_t *apply_json(void *item)
{
	struct finish *f = item;

	return json_pack("{s:I, s:s, s:O, s:O, s:O?, s:O?}", "id", (json_int_t)f->attempt_id, "token", f->token,
			 "facts", f->facts, "decision", f->decision, "report", f->report, "obs", f->obs);
}

static long long finish_order(void *item)
{
	return ((struct finish *)item)->attempt_id;
}

/* Hands each item of a finished batch statement its JSON value (column 1 of its row; NULL when
 * fenced out), or, when the statement failed as a whole, the failure through on_fail one by one. */
static void each_value(void **items, int n, PGresult *res, const char *err, db_cb on_fail,
		       void (*on_value)(struct finish *f, const char *value))
{
	int *row;

	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
		for (int i = 0; i < n; i++)
			on_fail(res, err, items[i]);
		return;
	}
	row = batch_rows(res, n);
	for (int i = 0; i < n; i++)
		on_value(items[i], row[i] < 0 || PQgetisnull(res, row[i], 1) ? NULL : PQgetvalue(res, row[i], 1));
	free(row);
}

/* Replies to each finish after the batch committed; a failed statement (after the coalescer
 * split it, or a lost connection) goes through on_applied, one by one. */
static void applies_done(void **items, int n, PGresult *res, const char *err, void *arg)
{
	(void)arg;
	each_value(items, n, res, err, on_applied, finish_applied);
}

static bool decision_ok(const json_t *d, char **why)
{
	const char *js = json_string_value(json_object_get(d, "job_state"));

	if (!json_is_object(d)) {
		*why = xstrdup("decision is not an object");
		return false;
	}
	if (!js || (strcmp(js, "queued") && strcmp(js, "succeeded") && strcmp(js, "failed"))) {
		*why = xstrdup("decision.job_state is not queued, succeeded or failed");
		return false;
	}
	if (strcmp(js, "queued") == 0 && !json_is_object(json_object_get(d, "next_config"))) {
		*why = xstrdup("decision re-queues without a next_config");
		return false;
	}
	return true;
}

static void ctx_value(struct finish *f, const char *value);

static void on_ctx(PGresult *res, const char *err, void *arg)
{
	struct finish *f = arg;
	const char *value;

	if (hreq_db_value(f->h, res, err, &value) < 0) {
		finish_free(f);
		return;
	}
	ctx_value(f, value);
}

static json_t *ctx_json(void *item)
{
	struct finish *f = item;

	json_t *d = json_object_get(f->facts, "duration_ms");

	/* The CTX's attempt.facts are f->facts, set after parsing (ctx_value): the statement only needs
	 * duration_ms, so the FACTS (log tail included) are neither sent nor echoed back. "plain": the
	 * statement leaves out the memory section when the attempt also ran the job's target config. */
	return json_pack("{s:I, s:s, s:{s:O?}, s:b}", "id", (json_int_t)f->attempt_id, "token", f->token, "facts",
			 "duration_ms", d, "plain", f->plain);
}

bool api_attempts_plain_finish(const json_t *facts)
{
	struct classify_in in = { facts, NULL, 10, false, 0 };
	json_t *c = classify_run(&in);
	const char *cls = json_string_value(json_object_get(c, "class"));
	bool plain = cls && (!strcmp(cls, "success") || !strcmp(cls, "cancelled"));

	json_decref(c);
	return plain;
}

static void ctxs_done(void **items, int n, PGresult *res, const char *err, void *arg)
{
	(void)arg;
	each_value(items, n, res, err, on_ctx, ctx_value);
}

/* The CTX (value) of a finish, or NULL when its fence failed: decides and applies, or answers. */
static void ctx_value(struct finish *f, const char *value)
{
	json_t *facts, *decision;
	char *perr = NULL;

	if (!value) {
		fenced(f->h, f->id);
		finish_free(f);
		return;
	}
	f->ctx = json_loads(value, 0, NULL);
	policy_ctx_resolve(f->ctx);
	if (json_is_object(json_object_get(f->ctx, "attempt")))
		json_object_set(json_object_get(f->ctx, "attempt"), "facts", f->facts);
	facts = json_object_get(json_object_get(f->ctx, "attempt"), "facts");
	if (json_is_true(json_object_get(facts, "cancelled")) &&
	    !json_is_true(json_object_get(json_object_get(f->ctx, "job"), "cancel_requested")) && preempted(f->ctx, facts)) {
		json_t *done = ended_by_itself(facts);
		if (!done) {
			finish_apply(f, preempt_decision(f->ctx));
			return;
		}
		/* it finished meanwhile: its own ending decides, as if no stop had been asked (the FACTS stored are
		 * the worker's, which say a stop was sent) */
		json_object_set_new(json_object_get(f->ctx, "attempt"), "facts", done);
		facts = done;
	}
	if (json_is_true(json_object_get(facts, "cancelled")) ||
	    json_is_true(json_object_get(json_object_get(f->ctx, "job"), "cancel_requested"))) {
		decision = server_decision(f->ctx, "cancelled", "cancelled", "cancelled", "cancelled on request");
		finish_apply(f, decision);
		return;
	}
	decision = policy_decide(f->ctx, &perr);
	if (decision && !decision_ok(decision, &perr)) {
		json_decref(decision);
		decision = NULL;
	}
	if (!decision) {
		char *reason = xasprintf("policy error: %s", perr ? perr : "no decision");
		log_error("policy failed", "attempt=%lld job=%lld error=\"%s\"", f->attempt_id,
			  (long long)json_integer_value(json_object_get(json_object_get(f->ctx, "job"), "id")), reason);
		decision = server_decision(f->ctx, NULL, "policy_error", "failed", reason);
		free(reason);
	}
	free(perr);
	finish_apply(f, decision);
}

void api_attempts_finish(struct hreq *h)
{
	json_t *body = NULL, *token, *facts, *tail;
	struct finish *f;
	char *bad_field = NULL, *bad_message = NULL;
	long long id = http_parse_id(h->param[0]);

	if (id < 0) {
		fenced(h, h->param[0]);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	token = json_object_get(body, "token");
	facts = json_object_get(body, "facts");
	tail = json_object_get(facts, "log_tail");
	if (!json_is_string(token) || json_string_length(token) == 0 || json_string_length(token) > TOKEN_MAX_LEN) {
		hreq_error(h, 400, "invalid_request", "token", "token must be a non-empty string");
		goto out;
	}
	if (!json_is_object(facts)) {
		hreq_error(h, 400, "invalid_request", "facts", "facts must be an object (FACTS)");
		goto out;
	}
	if (tail && !json_is_null(tail) && !json_is_array(tail)) {
		hreq_error(h, 400, "invalid_request", "facts.log_tail", "facts.log_tail must be an array of strings");
		goto out;
	}
	if (json_array_size(tail) > FINISH_TAIL_MAX) {
		hreq_error(h, 413, "too_large", "facts.log_tail", "facts.log_tail has %zu lines, over the limit of %d",
			   json_array_size(tail), FINISH_TAIL_MAX);
		goto out;
	}
	for (size_t i = 0; i < json_array_size(tail); i++) {
		json_t *line = json_array_get(tail, i);
		if (!json_is_string(line) || json_string_length(line) > FINISH_LINE_MAX) {
			char field[48];
			snprintf(field, sizeof field, "facts.log_tail[%zu]", i);
			hreq_error(h, 400, "invalid_request", field, "each log_tail line must be a string of at most %d bytes",
				   FINISH_LINE_MAX);
			goto out;
		}
	}
	if (facts_validate(facts, &bad_field, &bad_message) < 0) {
		hreq_error(h, 400, "invalid_request", bad_field, "%s", bad_message);
		free(bad_field);
		free(bad_message);
		goto out;
	}
	f = xcalloc(1, sizeof *f);
	f->h = h;
	f->attempt_id = id;
	snprintf(f->id, sizeof f->id, "%lld", id);
	f->token = xstrdup(json_string_value(token));
	f->facts_s = json_dumps(facts, JSON_COMPACT);
	if (!f->facts_s || strlen(f->facts_s) > FINISH_FACTS_MAX) {
		finish_free(f);
		hreq_error(h, 413, "too_large", "facts", "facts are over the limit of %d bytes", FINISH_FACTS_MAX);
		goto out;
	}
	f->facts = json_incref(facts);
	f->plain = api_attempts_plain_finish(facts);
	batch_add(coalescers(h->app)->ctx, f, -1);
out:
	json_decref(body);
}

/* Optional non-negative integer field as text into buf; returns false (after answering 400)
 * when present with another type. */
static bool opt_int(struct hreq *h, const json_t *body, const char *key, char *buf, size_t n, const char **out)
{
	json_t *v = json_object_get(body, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 2147483647) {
		hreq_error(h, 400, "invalid_request", key, "%s must be a non-negative integer", key);
		return false;
	}
	snprintf(buf, n, "%lld", (long long)json_integer_value(v));
	*out = buf;
	return true;
}

void api_attempts_heartbeat(struct hreq *h)
{
	json_t *body = NULL, *token, *phase;
	char step_b[32], total_b[32], mem_b[32];
	const char *step, *total, *mem;

	if (http_parse_id(h->param[0]) < 0) {
		fenced(h, h->param[0]);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	token = json_object_get(body, "token");
	phase = json_object_get(body, "phase");
	if (!json_is_string(token) || json_string_length(token) == 0 || json_string_length(token) > TOKEN_MAX_LEN) {
		hreq_error(h, 400, "invalid_request", "token", "token must be a non-empty string");
		goto out;
	}
	if (phase && !json_is_null(phase) && (!json_is_string(phase) || json_string_length(phase) > 64)) {
		hreq_error(h, 400, "invalid_request", "phase", "phase must be a short string");
		goto out;
	}
	if (!opt_int(h, body, "step", step_b, sizeof step_b, &step) ||
	    !opt_int(h, body, "total_steps", total_b, sizeof total_b, &total) ||
	    !opt_int(h, body, "memory_used_mib", mem_b, sizeof mem_b, &mem))
		goto out;
	{
		struct beat *b = xcalloc(1, sizeof *b);
		b->h = h;
		b->id = http_parse_id(h->param[0]);
		b->item = json_pack("{s:I, s:s, s:s?, s:o?, s:o?, s:o?}", "id", (json_int_t)b->id, "token",
				    json_string_value(token), "phase", json_is_string(phase) ? json_string_value(phase) : NULL,
				    "step", step ? json_integer(atoll(step)) : NULL, "total", total ? json_integer(atoll(total)) : NULL,
				    "mem", mem ? json_integer(atoll(mem)) : NULL);
		batch_add(coalescers(h->app)->beats, b, b->id);
	}
out:
	json_decref(body);
}
