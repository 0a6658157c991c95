/* /v1/attempts handlers: heartbeat (one fenced UPDATE) and finish, in three steps: the CTX in one
 * fenced statement, then policy_decide (and report_build when it escalates) on the loop, then the
 * DECISION applied in one statement fenced again by (attempt id, token, state running). Replies
 * only after the decision committed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_attempts.h"
#include "app.h"
#include "db.h"
#include "http.h"
#include "log.h"
#include "policy.h"
#include "report.h"
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
	json_t *ctx;
	char *decision_s;
	char *report_s;
	bool fallback;            /* already re-applied a fail-safe decision once */
};

static void finish_free(struct finish *f)
{
	if (!f)
		return;
	free(f->token);
	free(f->facts_s);
	json_decref(f->ctx);
	free(f->decision_s);
	free(f->report_s);
	free(f);
}

static void fenced(struct hreq *h, const char *id)
{
	hreq_error(h, 409, "not_running", NULL,
		   "attempt %s is not running with this token (stale, finished, or lost)", id);
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

static void finish_apply(struct finish *f, json_t *decision);

static void on_applied(PGresult *res, const char *err, void *arg)
{
	struct finish *f = arg;
	struct hreq *h = f->h;
	const char *value;
	json_t *doc;

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
	if (hreq_db_value(h, res, err, &value) < 0)
		goto out;
	if (!value) {
		fenced(h, f->id);
		goto out;
	}
	doc = json_loads(value, 0, NULL);
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
	hreq_reply_text(h, 200, value);
out:
	finish_free(f);
}

/* Applies `decision` (stolen) with the report when it escalates. */
static void finish_apply(struct finish *f, json_t *decision)
{
	json_t *report = NULL;
	const char *params[5];

	free(f->decision_s);
	free(f->report_s);
	f->report_s = NULL;
	if (json_is_object(json_object_get(decision, "escalation"))) {
		json_t *r = report_build(f->ctx, decision);
		report = r ? json_pack("{s:O?, s:O?}", "markdown", json_object_get(r, "markdown"), "json",
				       json_object_get(r, "json")) : NULL;
		json_decref(r);
		f->report_s = report ? json_dumps(report, JSON_COMPACT) : NULL;
		json_decref(report);
	}
	f->decision_s = json_dumps(decision, JSON_COMPACT);
	json_decref(decision);
	params[0] = f->id;
	params[1] = f->token;
	params[2] = f->facts_s;
	params[3] = f->decision_s;
	params[4] = f->report_s;
	db_exec(f->h->app->db, sql_finish_apply, 5, params, on_applied, f);
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

static void on_ctx(PGresult *res, const char *err, void *arg)
{
	struct finish *f = arg;
	const char *value;
	json_t *facts, *decision;
	char *perr = NULL;

	if (hreq_db_value(f->h, res, err, &value) < 0) {
		finish_free(f);
		return;
	}
	if (!value) {
		fenced(f->h, f->id);
		finish_free(f);
		return;
	}
	f->ctx = json_loads(value, 0, NULL);
	facts = json_object_get(json_object_get(f->ctx, "attempt"), "facts");
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
	{
		const char *params[3] = { f->id, f->token, f->facts_s };
		db_exec(h->app->db, sql_finish_ctx, 3, params, on_ctx, f);
	}
out:
	json_decref(body);
}

static void on_heartbeat(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	if (!value) {
		fenced(h, h->param[0]);
		return;
	}
	if (value[0] == 't')
		log_info("cancel told", "attempt=%s", h->param[0]);
	hreq_reply(h, 200, json_pack("{s:b, s:i}", "cancel", value[0] == 't', "lease_seconds",
				     h->app->lease_seconds));
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
	char lease[32], step_b[32], total_b[32], mem_b[32];
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
	snprintf(lease, sizeof lease, "%d", h->app->lease_seconds);
	{
		const char *params[7] = { h->param[0], json_string_value(token), lease,
					  json_is_string(phase) ? json_string_value(phase) : NULL, step, total, mem };
		db_exec(h->app->db, sql_heartbeat, 7, params, on_heartbeat, h);
	}
out:
	json_decref(body);
}
