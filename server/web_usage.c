/* /ui/usage: the GPU time report (sql/usage.sql, the statement of GET /v1/usage) as a page: the
 * window is the last N days, the scope that of the API (api_jobs_list_filter: a submitter its own).
 * The frame is web.c's. */
#include "web_usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_jobs.h"
#include "api_usage.h"
#include "app.h"
#include "auth.h"
#include "db.h"
#include "html.h"
#include "http.h"
#include "jobtext.h"
#include "log.h"
#include "sql.h"
#include "util.h"
#include "web.h"

/* One cell: seconds as hours with one decimal, or a muted dash for none. */
static void hours_cell(struct hbuf *b, const json_t *v)
{
	double s = json_number_value(v);
	if (s <= 0)
		html_add(b, "<td class=\"num\"><span class=\"muted\">-</span></td>");
	else
		html_printf(b, "<td class=\"num\">%.1f</td>", s / 3600.0);
}

/* Each owner's GPU hours per GPU model, the models in the total's order (the most first), when the
 * window's attempts ran on two models or more: chargeback, where an hour of one card is not an hour
 * of another; then the hours OOMs took on each model, all owners together. */
static void by_gpu_table(struct hbuf *b, const json_t *doc)
{
	const json_t *models = json_object_get(json_object_get(doc, "total"), "by_gpu"), *m, *o;
	size_t k, i;

	if (json_array_size(models) < 2)
		return;
	html_add(b, "<h2>GPU hours by GPU model</h2>\n<table class=\"usage\"><thead><tr><th>owner</th>");
	json_array_foreach(models, k, m) {
		html_add(b, "<th>");
		html_esc(b, json_string_value(json_object_get(m, "model")));
		html_add(b, "</th>");
	}
	html_add(b, "</tr></thead><tbody>\n");
	json_array_foreach(json_object_get(doc, "owners"), i, o) {
		html_add(b, "<tr><td>");
		html_esc(b, json_string_value(json_object_get(o, "owner")));
		html_add(b, "</td>");
		json_array_foreach(models, k, m)
			hours_cell(b, json_object_get(json_object_get(o, "by_gpu"),
						      json_string_value(json_object_get(m, "model")) ?: ""));
		html_add(b, "</tr>\n");
	}
	html_add(b, "<tr class=\"oom\"><td>OOM, all owners</td>");
	json_array_foreach(models, k, m)
		hours_cell(b, json_object_get(m, "oom_gpu_seconds"));
	html_add(b, "</tr>\n</tbody></table>\n");
}

void web_usage_render(struct hbuf *b, const json_t *doc, int days, const char *owner, int staff)
{
	static const char *const buckets[] = { "succeeded", "oom", "failed", "cancelled", "lost", "preempted", "running" };
	static const int choices[] = { 1, 7, 30, 90 };
	const json_t *owners = json_object_get(doc, "owners"), *total = json_object_get(doc, "total"), *o;
	size_t i;

	html_printf(b, "<h1>GPU time, last %d day%s</h1>\n", days, days == 1 ? "" : "s");
	html_add(b, "<form class=\"filters\" method=\"get\" action=\"/ui/usage\"><label>days <select name=\"days\">");
	for (i = 0; i < ARRAY_LEN(choices); i++)
		html_printf(b, "<option%s>%d</option>", choices[i] == days ? " selected" : "", choices[i]);
	html_add(b, "</select></label>");
	if (staff) {
		html_add(b, " <label>owner <input name=\"owner\" value=\"");
		html_esc(b, owner ? owner : "");
		html_add(b, "\"></label>");
	}
	html_add(b, " <button type=\"submit\">Show</button></form>\n");
	if (json_array_size(owners) == 0) {
		html_add(b, "<p class=\"muted\">No GPU time in this window.</p>\n");
		return;
	}
	html_add(b, "<table class=\"usage\"><thead><tr><th>owner</th><th>GPU hours</th><th>succeeded</th><th>OOM</th>"
		    "<th>other failed</th><th>cancelled</th><th>lost</th><th>preempted</th><th>running</th><th>attempts</th>"
		    "<th>jobs ok</th><th>jobs failed</th></tr></thead><tbody>\n");
	json_array_foreach(owners, i, o) {
		const char *name = json_string_value(json_object_get(o, "owner"));
		const char *keys[] = { "owner" }, *vals[] = { name };
		const json_t *by = json_object_get(o, "by_outcome");

		html_add(b, "<tr><td>");
		if (staff) {
			html_add(b, "<a href=\"");
			html_href(b, "/ui/jobs", keys, vals, 1);
			html_add(b, "\">");
			html_esc(b, name ? name : "?");
			html_add(b, "</a>");
		} else {
			html_esc(b, name ? name : "?");
		}
		html_add(b, "</td>");
		hours_cell(b, json_object_get(o, "gpu_seconds"));
		for (size_t k = 0; k < ARRAY_LEN(buckets); k++)
			hours_cell(b, json_object_get(by, buckets[k]));
		html_printf(b, "<td class=\"num\">%lld</td><td class=\"num\">%lld</td><td class=\"num\">%lld</td></tr>\n",
			    (long long)json_integer_value(json_object_get(o, "attempts")),
			    (long long)json_integer_value(json_object_get(o, "jobs_succeeded")),
			    (long long)json_integer_value(json_object_get(o, "jobs_failed")));
	}
	double all = json_number_value(json_object_get(total, "gpu_seconds"));
	double oom = json_number_value(json_object_get(total, "oom_gpu_seconds"));
	char *spared = jobtext_spared(json_object_get(total, "resumed"));
	char *recovered = jobtext_recovered(json_object_get(total, "recovered")); /* what the recovery brought through */
	html_printf(b, "</tbody></table>\n<p>%.1f GPU hours in %lld attempts of %lld jobs; <strong>%.1f of them (%.0f%%) "
		       "in attempts that ended in an OOM</strong>",
		    all / 3600.0, (long long)json_integer_value(json_object_get(total, "attempts")),
		    (long long)json_integer_value(json_object_get(total, "jobs")), oom / 3600.0,
		    all > 0 ? 100.0 * oom / all : 0.0);
	html_esc(b, recovered);
	html_esc(b, spared);
	free(recovered);
	html_add(b, ". An attempt counts from its lease to its end (a running one to now), cut at the window's start.</p>\n");
	free(spared);
	by_gpu_table(b, doc);
	if (json_array_size(json_object_get(doc, "quotas")) > 0) { /* migration 035: each in its own window */
		const json_t *q;
		size_t k;
		html_add(b, "<h2>GPU-hour quotas</h2>\n<ul class=\"quotas\">");
		json_array_foreach(json_object_get(doc, "quotas"), k, q) {
			char *line = jobtext_quota(q);
			html_add(b, json_is_true(json_object_get(q, "over")) ? "<li class=\"over\">" : "<li>");
			html_esc(b, line);
			html_add(b, "</li>");
			free(line);
		}
		html_add(b, "</ul>\n");
	}
}

/* What the statement's callback needs of the request. */
struct usage_req {
	struct hreq *h;
	int days;
	char *owner; /* the form's owner filter, or NULL */
};

static void on_usage(PGresult *res, const char *err, void *arg)
{
	struct usage_req *u = arg;
	struct hreq *h = u->h;
	json_t *doc = NULL;
	char *body = NULL;
	struct hbuf b = { 0 };

	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
	    !(doc = json_loads(PQgetvalue(res, 0, 0), 0, NULL))) {
		log_warn("web page failed", "path=%s error=\"%s\"", h->path,
			 res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?" : err ? err : "?");
		web_message(h, 503, "Database unavailable", "The database could not answer; try again shortly.");
		goto out;
	}
	web_usage_render(&b, doc, u->days, u->owner, (h->who.role & AUTH_STAFF) != 0);
	body = html_take(&b);
	web_page(h, 200, "GPU time", body);
out:
	free(body);
	json_decref(doc);
	free(u->owner);
	free(u);
}

static void usage_page(struct hreq *h)
{
	char *days_s = hreq_query(h, "days"), *owner = hreq_query(h, "owner"), *msg = NULL, *end = NULL;
	const char *scope = NULL, *kind = NULL, *field = NULL;
	long days = WEB_USAGE_DAYS_DEFAULT;
	int code;

	if (days_s && *days_s) {
		days = strtol(days_s, &end, 10);
		if (*end || days < 1 || days > WEB_USAGE_DAYS_MAX) {
			char *m = xasprintf("days must be a whole number of days from 1 to %d", WEB_USAGE_DAYS_MAX);
			web_message(h, 400, "Bad request", m);
			free(m);
			goto out;
		}
	}
	code = api_jobs_list_filter(&h->who, owner, NULL, &scope, &kind, &field, &msg);
	if (code) {
		web_message(h, code, code == 403 ? "Forbidden" : "Bad request", msg);
		goto out;
	}
	{
		struct usage_req *u = xcalloc(1, sizeof *u);
		int64_t now = util_wall_ms();
		u->h = h;
		u->days = (int)days;
		u->owner = owner && *owner ? xstrdup(owner) : NULL;
		api_usage_run(h, now - (int64_t)days * 86400 * 1000, now, scope, NULL, on_usage, u);
	}
out:
	free(msg);
	free(days_s);
	free(owner);
}

void web_usage_page(struct hreq *h)
{
	web_gate(h, AUTH_READERS, AUTH_SCOPE_NONE, usage_page, NULL);
}
