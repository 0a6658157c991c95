/* GPU health reports (see api_health.h): validates the body, runs rung_gpu_health in one
 * statement (ownership for the worker role checked there against the token's worker binding),
 * logs a state change and wakes parked long-polls when a GPU returns to service. */
#include "api_health.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "db.h"
#include "http.h"
#include "lease.h"
#include "log.h"
#include "sql.h"
#include "util.h"

int api_health_parse(const json_t *body, struct api_health_report *out, const char **field, const char **why)
{
	const json_t *passed = json_object_get(body, "passed");
	const json_t *detail = json_object_get(body, "detail");
	const json_t *state = json_object_get(body, "gpu_state");

	memset(out, 0, sizeof *out);
	if (!json_is_object(body)) {
		*field = NULL;
		*why = "the body must be a JSON object";
		return -1;
	}
	if (!json_is_boolean(passed)) {
		*field = "passed";
		*why = "passed must be true or false";
		return -1;
	}
	if (detail && !json_is_null(detail) &&
	    (!json_is_string(detail) || json_string_length(detail) > API_HEALTH_DETAIL_MAX ||
	     strlen(json_string_value(detail)) != json_string_length(detail))) {
		*field = "detail";
		*why = "detail must be a string of at most 4096 bytes without NUL";
		return -1;
	}
	if (state && !json_is_null(state) && !json_is_object(state)) {
		*field = "gpu_state";
		*why = "gpu_state must be a GPUSTATE object or null";
		return -1;
	}
	out->passed = json_is_true(passed);
	out->detail = json_is_string(detail) ? json_string_value(detail) : NULL;
	out->gpu_state = json_is_object(state) ? state : NULL;
	return 0;
}

static void on_health(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value, *status, *state, *from;
	json_t *doc;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	doc = value ? json_loads(value, 0, NULL) : NULL;
	status = json_string_value(json_object_get(doc, "status"));
	if (!status || strcmp(status, "ok")) {
		json_decref(doc);
		hreq_error(h, 404, "not_found", NULL, "no such GPU: %s", h->param[0]);
		return;
	}
	state = json_string_value(json_object_get(doc, "state"));
	from = json_string_value(json_object_get(doc, "from_state"));
	if (state && from && strcmp(state, from)) {
		log_info("gpu state changed by a health check", "gpu=%s from=%s to=%s", h->param[0], from, state);
		lease_announce(h->app->lease);
	}
	hreq_reply(h, 200, json_pack("{s:O, s:O, s:O}", "uuid", json_object_get(doc, "uuid"), "state",
				     json_object_get(doc, "state"), "next_check_ms",
				     json_object_get(doc, "next_check_ms") ?: json_null()));
	json_decref(doc);
}

void api_health_report(struct hreq *h)
{
	json_t *body = NULL;
	struct api_health_report r;
	const char *field = NULL, *why = NULL;
	char token_id[32], min_s[16], *gpu_state = NULL;

	if (!h->param[0] || strlen(h->param[0]) > API_HEALTH_UUID_MAX) {
		hreq_error(h, 404, "not_found", NULL, "no such GPU");
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	if (api_health_parse(body, &r, &field, &why) < 0) {
		hreq_error(h, 400, "invalid_request", field, "%s", why);
		goto out;
	}
	snprintf(token_id, sizeof token_id, "%lld", h->who.token_id);
	snprintf(min_s, sizeof min_s, "%d", h->app->quarantine_min_s);
	gpu_state = r.gpu_state ? json_dumps(r.gpu_state, JSON_COMPACT) : NULL;
	{
		/* only the worker role is held to its own GPUs; support and admin report for any */
		const char *params[6] = { h->param[0], h->who.role == AUTH_WORKER ? token_id : NULL,
					  r.passed ? "true" : "false", r.detail, gpu_state, min_s };
		db_exec(h->app->db, sql_gpu_health, 6, params, on_health, h);
	}
out:
	free(gpu_state);
	json_decref(body);
}
