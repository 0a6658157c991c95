/* Fleet and support handlers: escalations (list, get with the report, ack, resolve), GPUs (list,
 * operator release), workers (list, drain, resume), owners (who runs and waits) and /healthz. One
 * statement each. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_fleet.h"
#include "app.h"
#include "auth.h"
#include "db.h"
#include "http.h"
#include "lease.h"
#include "log.h"
#include "sql.h"
#include "util.h"
#include "version.h"

/* Replies the statement's JSON value, or 404 "no such THING" when it is NULL / missing. */
static void reply_doc(struct hreq *h, PGresult *res, const char *err, const char *thing)
{
	const char *value;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	if (!value) {
		hreq_error(h, 404, "not_found", NULL, "no such %s: %s", thing, h->param[0] ? h->param[0] : "");
		return;
	}
	hreq_reply_text(h, 200, value);
}

static void on_escalation(PGresult *res, const char *err, void *arg)
{
	reply_doc(arg, res, err, "escalation");
}

static void on_list(PGresult *res, const char *err, void *arg)
{
	reply_doc(arg, res, err, "list");
}

void api_fleet_escalations(struct hreq *h)
{
	char *state = hreq_query(h, "state");

	if (state && !*state) {
		free(state);
		state = NULL;
	}
	if (state && strcmp(state, "open") && strcmp(state, "acknowledged") && strcmp(state, "resolved")) {
		hreq_error(h, 400, "invalid_request", "state", "state must be open, acknowledged or resolved");
		goto out;
	}
	{
		const char *params[1] = { state };
		db_exec(h->app->db, sql_escalation_list, 1, params, on_list, h);
	}
out:
	free(state);
}

void api_fleet_escalation_get(struct hreq *h)
{
	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such escalation: %s", h->param[0]);
		return;
	}
	const char *params[1] = { h->param[0] };
	db_exec(h->app->db, sql_escalation_get, 1, params, on_escalation, h);
}

static void on_escalation_set(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value;
	json_t *doc;
	const char *status;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	if (!value) {
		hreq_error(h, 404, "not_found", NULL, "no such escalation: %s", h->param[0]);
		return;
	}
	doc = json_loads(value, 0, NULL);
	status = json_string_value(json_object_get(doc, "status"));
	if (status && strcmp(status, "conflict") == 0) {
		json_decref(doc);
		hreq_error(h, 409, "invalid_transition", NULL, "escalation %s is already resolved", h->param[0]);
		return;
	}
	log_info("escalation updated", "escalation=%s job=%lld state=%s", h->param[0],
		 (long long)json_integer_value(json_object_get(json_object_get(doc, "escalation"), "job_id")),
		 json_string_value(json_object_get(json_object_get(doc, "escalation"), "state")) ?: "?");
	hreq_reply(h, 200, json_incref(json_object_get(doc, "escalation")));
	json_decref(doc);
}

static void escalation_set(struct hreq *h, const char *state)
{
	json_t *body = NULL;
	const char *note;

	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such escalation: %s", h->param[0]);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	if (hreq_note(h, body, &note) == 0) {
		const char *params[3] = { h->param[0], state, note };
		db_exec(h->app->db, sql_escalation_set, 3, params, on_escalation_set, h);
	}
	json_decref(body);
}

void api_fleet_escalation_ack(struct hreq *h)
{
	escalation_set(h, "acknowledged");
}

void api_fleet_escalation_resolve(struct hreq *h)
{
	escalation_set(h, "resolved");
}

void api_fleet_gpus(struct hreq *h)
{
	db_exec(h->app->db, sql_gpu_list, 0, NULL, on_list, h);
}

void api_fleet_workers(struct hreq *h)
{
	db_exec(h->app->db, sql_worker_list, 0, NULL, on_list, h);
}

void api_fleet_pools(struct hreq *h)
{
	db_exec(h->app->db, sql_pool_list, 0, NULL, on_list, h);
}

void api_fleet_owners(struct hreq *h)
{
	db_exec(h->app->db, sql_owner_list, 0, NULL, on_list, h);
}

static void on_drained(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	json_t *doc = hreq_db_doc(h, res, err, "worker");

	if (!doc)
		return;
	if (json_is_true(json_object_get(doc, "unavailable"))) { /* rung_stops_ready (44_preempt.sql): nothing changed */
		hreq_error(h, 503, "unavailable", NULL,
			   "a rungd of a release before this one put its function files back: a drain with requeue cannot stop "
			   "attempts until a rungd of this release starts again (nothing was changed)");
		json_decref(doc);
		return;
	}
	if (json_is_true(json_object_get(doc, "changed"))) {
		const char *state = json_string_value(json_object_get(json_object_get(doc, "worker"), "state"));
		log_info(state && !strcmp(state, "draining") ? "worker drained" : "worker resumed", "worker=%s by=%s",
			 h->param[0], h->who.name[0] ? h->who.name : "?");
		/* resumed: its parked long-polls may take work now; drained: the jobs held for its checkpoints
		 * (recovery/resume.h) may run elsewhere now */
		lease_announce(h->app->lease);
	}
	if (json_is_integer(json_object_get(doc, "requeued"))) { /* drain with "requeue" */
		log_info("worker's attempts requeued", "worker=%s attempts=%lld by=%s", h->param[0],
			 (long long)json_integer_value(json_object_get(doc, "requeued")), h->who.name[0] ? h->who.name : "?");
		json_object_set(json_object_get(doc, "worker"), "requeued", json_object_get(doc, "requeued"));
	}
	hreq_reply(h, 200, json_incref(json_object_get(doc, "worker")));
	json_decref(doc);
}

/* POST /v1/workers/{id}/drain and /resume: one rung_worker_drain statement; a drain with "requeue":
 * true drains it and stops its running attempts in one statement (rung_worker_drain_requeue). */
static void worker_drain(struct hreq *h, bool drain)
{
	json_t *body = NULL, *requeue;
	const char *note = NULL;
	char by[AUTH_NAME_MAX + 32];

	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such worker: %s", h->param[0]);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	requeue = json_object_get(body, "requeue");
	if (requeue && !json_is_null(requeue) && (!drain || !json_is_boolean(requeue))) {
		hreq_error(h, 400, "invalid_request", "requeue",
			   drain ? "requeue must be true or false" : "requeue is for a drain (a resume takes a note only)");
		goto out;
	}
	if (hreq_note(h, body, &note) < 0)
		goto out;
	if (json_is_true(requeue)) { /* its host must be free now: its attempts stop and run again elsewhere */
		const char *params[3] = { h->param[0], note, hreq_by(h, by, sizeof by) };
		db_exec(h->app->db, sql_worker_drain_requeue, 3, params, on_drained, h);
	} else {
		const char *params[4] = { h->param[0], drain ? "true" : "false", note, hreq_by(h, by, sizeof by) };
		db_exec(h->app->db, sql_worker_drain, 4, params, on_drained, h);
	}
out:
	json_decref(body);
}

void api_fleet_worker_drain(struct hreq *h)
{
	worker_drain(h, true);
}

void api_fleet_worker_resume(struct hreq *h)
{
	worker_drain(h, false);
}

static void on_gpu_released(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0)) {
		log_info("gpu released", "gpu=%s", h->param[0]);
		lease_announce(h->app->lease);
	}
	reply_doc(h, res, err, "GPU");
}

void api_fleet_gpu_release(struct hreq *h)
{
	json_t *body = NULL;

	if (hreq_body(h, &body) < 0)
		return;
	json_decref(body);
	const char *params[1] = { h->param[0] };
	db_exec(h->app->db, sql_gpu_release, 1, params, on_gpu_released, h);
}

/* The /healthz answer: this rungd's version always; the schema's number while the database answers,
 * else null. */
static json_t *health_doc(bool up, json_t *schema)
{
	return json_pack("{s:b, s:s, s:s, s:o}", "ok", up, "database", up ? "up" : "down", "version", rung_version(),
			 "schema", schema ? schema : json_null());
}

static void on_health(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *sqlstate = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	/* undefined_table: a database no migration ever ran on (rungd --no-migrate); it answers all the same */
	bool bare = res && PQresultStatus(res) == PGRES_FATAL_ERROR && sqlstate && !strcmp(sqlstate, "42P01");
	bool up = (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) || bare;
	json_t *schema = NULL;

	if (!up)
		log_warn("health check failed", "error=\"%s\"", res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : err);
	else
		schema = json_integer(bare || PQgetisnull(res, 0, 0) ? 0 : strtoll(PQgetvalue(res, 0, 0), NULL, 10));
	hreq_reply(h, up ? 200 : 503, health_doc(up, schema));
}

void api_fleet_healthz(struct hreq *h)
{
	if (!db_up(h->app->db)) {
		hreq_reply(h, 503, health_doc(false, NULL));
		return;
	}
	db_exec(h->app->db, sql_healthz, 0, NULL, on_health, h);
}
