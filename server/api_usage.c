/* GET /v1/usage: who used how much GPU time in a window, and how much of it went to OOMs. Checks the
 * query here, then one statement (sql/usage.sql) reads the attempts that overlap the window. */
#include "api_usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_jobs.h"
#include "app.h"
#include "auth.h"
#include "db.h"
#include "http.h"
#include "labels.h"
#include "sql.h"
#include "util.h"

int api_usage_window(const struct auth_who *who, const char *since, const char *until, const char *owner,
	int64_t now_ms, int64_t *lo_ms, int64_t *hi_ms, const char **scope, const char **field, char **msg)
{
	const char *kind;
	int code;

	*field = NULL;
	*msg = NULL;
	*hi_ms = now_ms;
	if (until && *until && util_time_parse(until, hi_ms) < 0) {
		*field = "until";
		*msg = xstrdup("until must be an RFC 3339 time with its zone, e.g. 2026-12-01T00:00:00Z");
		return 400;
	}
	*lo_ms = *hi_ms - USAGE_DEFAULT_WINDOW_MS;
	if (since && *since && util_time_parse(since, lo_ms) < 0) {
		*field = "since";
		*msg = xstrdup("since must be an RFC 3339 time with its zone, e.g. 2026-11-24T00:00:00Z");
		return 400;
	}
	if (*lo_ms >= *hi_ms) {
		*field = "since";
		*msg = xstrdup("since must be before until");
		return 400;
	}
	code = api_jobs_list_filter(who, owner, NULL, scope, &kind, field, msg);
	if (code == 403) {
		free(*msg);
		*msg = xstrdup("a submitter sees only its own usage: owner may only be its own token name");
	}
	return code;
}

void api_usage_run(struct hreq *h, int64_t lo_ms, int64_t hi_ms, const char *owner, const char *labels_json, db_cb cb,
		   void *arg)
{
	char lo[32], hi[32];
	const char *params[4] = { lo, hi, owner, labels_json };

	snprintf(lo, sizeof lo, "%.3f", (double)lo_ms / 1000.0);
	snprintf(hi, sizeof hi, "%.3f", (double)hi_ms / 1000.0);
	db_exec(h->app->db, sql_usage, 4, params, cb, arg);
}

static void on_usage(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	hreq_reply_text(h, 200, value ? value : "{}");
}

void api_usage_get(struct hreq *h)
{
	char *since = hreq_query(h, "since"), *until = hreq_query(h, "until"), *owner = hreq_query(h, "owner");
	char *label = hreq_query(h, "label"), *msg = NULL, *label_json = NULL;
	const char *scope, *field;
	json_t *labels = NULL;
	int64_t lo_ms, hi_ms;
	int code = api_usage_window(&h->who, since, until, owner, util_wall_ms(), &lo_ms, &hi_ms, &scope, &field, &msg);

	if (code) {
		hreq_error(h, code, code == 403 ? "forbidden" : "invalid_request", field, "%s", msg);
		goto out;
	}
	if (label && *label) {
		if (!(labels = labels_parse(label, "label", &msg))) {
			hreq_error(h, 400, "invalid_request", "label", "%s", msg);
			goto out;
		}
		if (json_object_size(labels) > 0)
			label_json = json_dumps(labels, JSON_COMPACT);
	}
	api_usage_run(h, lo_ms, hi_ms, scope, label_json, on_usage, h);
out:
	json_decref(labels);
	free(label_json);
	free(label);
	free(msg);
	free(since);
	free(until);
	free(owner);
}
