/* What attempts' trainers printed (migration 022): the chunks rung-worker sends while an attempt
 * runs (POST /v1/attempts/{id}/log, fenced by the attempt's token as a heartbeat is) and the pages
 * readers ask for (GET /v1/jobs/{id}/log: rungctl logs, scripts). One statement each, not
 * coalesced: a worker sends at most one chunk per GPU every --log-interval-ms (10 s by default). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_jobs.h"
#include "api_logs.h"
#include "app.h"
#include "db.h"
#include "http.h"
#include "log.h"
#include "sql.h"

static void fenced(struct hreq *h)
{
	hreq_error(h, 409, "not_running", NULL,
		   "attempt %s is not running with this token (stale, finished, or lost)", h->param[0]);
}

static void on_put(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *stored;

	if (hreq_db_value(h, res, err, &stored) < 0)
		return;
	if (!stored) {
		fenced(h);
		return;
	}
	hreq_reply(h, 200, json_pack("{s:b, s:I}", "stored", stored[0] == 't', "end",
				     (json_int_t)strtoll(PQgetvalue(res, 0, 1), NULL, 10)));
}

/* A non-negative integer field of body into *v; false (after answering 400 naming it) otherwise. */
static bool byte_field(struct hreq *h, const json_t *body, const char *key, long long *v)
{
	json_t *f = json_object_get(body, key);

	if (!json_is_integer(f) || json_integer_value(f) < 0) {
		hreq_error(h, 400, "invalid_request", key, "%s must be a non-negative integer (a byte offset)", key);
		return false;
	}
	*v = (long long)json_integer_value(f);
	return true;
}

void api_logs_put(struct hreq *h)
{
	json_t *body = NULL, *token, *text;
	long long from = 0, to = 0;
	char from_s[24], to_s[24];

	if (http_parse_id(h->param[0]) < 0) {
		fenced(h);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	token = json_object_get(body, "token");
	text = json_object_get(body, "text");
	if (!json_is_string(token) || json_string_length(token) == 0 || json_string_length(token) > API_LOGS_TOKEN_MAX) {
		hreq_error(h, 400, "invalid_request", "token", "token must be a non-empty string");
		goto out;
	}
	if (!byte_field(h, body, "from", &from) || !byte_field(h, body, "to", &to))
		goto out;
	if (to <= from) {
		hreq_error(h, 400, "invalid_request", "to", "to (%lld) must be above from (%lld): a chunk holds at least a byte",
			   to, from);
		goto out;
	}
	if (to > API_LOGS_MAX_BYTES) {
		hreq_error(h, 413, "log_full", "to", "an attempt's log is kept up to byte %lld; this chunk ends at %lld",
			   (long long)API_LOGS_MAX_BYTES, to);
		goto out;
	}
	if (!json_is_string(text)) {
		hreq_error(h, 400, "invalid_request", "text", "text must be a string");
		goto out;
	}
	if (json_string_length(text) > API_LOGS_CHUNK_MAX) {
		hreq_error(h, 413, "too_large", "text", "text is %zu bytes, over the limit of %d per chunk",
			   json_string_length(text), API_LOGS_CHUNK_MAX);
		goto out;
	}
	if (strlen(json_string_value(text)) != json_string_length(text)) {
		hreq_error(h, 400, "invalid_request", "text", "text must not contain NUL (\\u0000)");
		goto out;
	}
	snprintf(from_s, sizeof from_s, "%lld", from);
	snprintf(to_s, sizeof to_s, "%lld", to);
	{
		const char *params[5] = { h->param[0], json_string_value(token), from_s, to_s, json_string_value(text) };
		db_exec(h->app->db, sql_attempt_log_put, 5, params, on_put, h);
	}
out:
	json_decref(body);
}

/* An optional integer query parameter in [min, max] into *v (kept when absent); false after
 * answering 400 naming it. */
static bool query_int(struct hreq *h, const char *key, long long min, long long max, long long *v, bool *given)
{
	char *s = hreq_query(h, key);
	bool ok = true;

	*given = s != NULL;
	if (s && http_parse_int(s, min, max, v) < 0) {
		hreq_error(h, 400, "invalid_request", key, "%s must be an integer from %lld to %lld", key, min, max);
		ok = false;
	}
	free(s);
	return ok;
}

void api_logs_get(struct hreq *h)
{
	long long attempt = 0, from = 0, limit = API_LOGS_PAGE_DEFAULT;
	bool has_attempt, given;
	char attempt_s[24], from_s[24], limit_s[24];

	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such job: %s", h->param[0]);
		return;
	}
	if (!query_int(h, "attempt", 1, 2147483647, &attempt, &has_attempt) ||
	    !query_int(h, "from", 0, API_LOGS_MAX_BYTES, &from, &given) ||
	    !query_int(h, "limit_bytes", 1, API_LOGS_PAGE_MAX, &limit, &given))
		return;
	snprintf(attempt_s, sizeof attempt_s, "%lld", attempt);
	snprintf(from_s, sizeof from_s, "%lld", from);
	snprintf(limit_s, sizeof limit_s, "%lld", limit);
	const char *params[4] = { h->param[0], has_attempt ? attempt_s : NULL, from_s, limit_s };
	db_exec(h->app->db, sql_job_log, 4, params, api_jobs_on_doc, h);
}
