/* The /ui forms that change something (web_act.h): each POST is checked for its site and its
 * caller, runs its API route's statement (sql/job_retry.sql, job_cancel.sql, job_start.sql,
 * escalation_set.sql, gpu_release.sql, worker_drain.sql) and answers 303 back to its page (post/redirect/get), or a
 * page that says why not. Owns the one request in flight per form; the forms' HTML is html.c's. */
#include "web_act.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "api_jobs.h"
#include "app.h"
#include "auth.h"
#include "db.h"
#include "html.h"
#include "http.h"
#include "labels.h"
#include "lease.h"
#include "log.h"
#include "pool.h"
#include "sql.h"
#include "util.h"
#include "web.h"

#define ACT_FORM_MAX (3 * HTTP_NOTE_MAX + 1024) /* a form body: a note of HTTP_NOTE_MAX bytes, each %XX-encoded */

/* An action: what the log and its refusals call it, and where the browser goes back to. */
struct act {
	const char *name;  /* "retry" */
	const char *thing; /* "job": what a 404 names */
	const char *back;  /* the page: "/ui/jobs/" followed by param[0], or "/ui/gpus" alone */
	bool back_id;
	bool announce;     /* something may run now: wake the waiters once it committed */
};

static const struct act act_retry = { "retry", "job", "/ui/jobs/", true, true };
static const struct act act_cancel = { "cancel", "job", "/ui/jobs/", true, true }; /* jobs that run after it (036) */
static const struct act act_start = { "start", "job", "/ui/jobs/", true, true };
static const struct act act_pool = { "move to pool", "job", "/ui/jobs/", true, true };
static const struct act act_requeue = { "requeue", "job", "/ui/jobs/", true, false };
static const struct act act_ack = { "acknowledge", "escalation", "/ui/escalations/", true, false };
static const struct act act_resolve = { "resolve", "escalation", "/ui/escalations/", true, false };
static const struct act act_release = { "release", "GPU", "/ui/gpus", false, true };
static const struct act act_drain = { "drain", "worker", "/ui/gpus", false, true }; /* its released holds */
static const struct act act_resume = { "resume", "worker", "/ui/gpus", false, true };
static const struct act act_cancel_matching = { "cancel matching", "job", "/ui/jobs", false, false }; /* on_matching wakes */

/* One form's statement between db_exec and its callback. */
struct act_req {
	struct hreq *h;
	const struct act *act;
};

int web_act_same_site(const char *origin, const char *fetch_site, const char *host, const char *fwd_host)
{
	const char *rest;

	/* the browser's own verdict, when it gives one: it compares the page with the target as the user
	 * sees them, so it holds behind a reverse proxy that rewrites Host */
	if (fetch_site)
		return !strcmp(fetch_site, "same-origin") || !strcmp(fetch_site, "none");
	if (!origin)
		return 1; /* not a browser's cross-site form: those carry Origin */
	rest = !strncasecmp(origin, "http://", 7) ? origin + 7 : !strncasecmp(origin, "https://", 8) ? origin + 8 : NULL;
	/* X-Forwarded-Host is the proxy's (a page cannot make a browser send it with a form) */
	return rest && ((host && !strcasecmp(rest, host)) || (fwd_host && !strcasecmp(rest, fwd_host)));
}

/* The page to go back to (heap). */
static char *back_path(const struct hreq *h, const struct act *a)
{
	struct hbuf b = { 0 };

	html_add(&b, a->back);
	if (a->back_id)
		html_url(&b, h->param[0]);
	return html_take(&b);
}

/* The value of `key` in the request's form (heap), or NULL. Sets *too_big when the body is over
 * ACT_FORM_MAX. */
static char *form_value(struct hreq *h, const char *key, bool *too_big)
{
	struct evbuffer *in = h->req ? evhttp_request_get_input_buffer(h->req) : NULL;
	size_t len = in ? evbuffer_get_length(in) : 0;

	*too_big = len > ACT_FORM_MAX;
	if (len == 0 || *too_big)
		return NULL;
	return web_form_value((const char *)evbuffer_pullup(in, -1), len, key);
}

static void on_act(PGresult *res, const char *err, void *arg)
{
	struct act_req *r = arg;
	struct hreq *h = r->h;
	const struct act *a = r->act;
	json_t *doc = NULL;
	const char *status;
	char *back = NULL, *msg = NULL;

	free(r);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_warn("web action failed", "action=%s path=%s error=\"%s\"", a->name, h->path,
			 res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?" : err ? err : "?");
		web_message(h, 503, "Database unavailable", "The database could not answer; nothing was changed. Try again.");
		return;
	}
	if (PQntuples(res) == 0 || PQgetisnull(res, 0, 0) || !(doc = json_loads(PQgetvalue(res, 0, 0), 0, NULL))) {
		msg = xasprintf("no such %s: %s", a->thing, h->param[0]);
		web_message(h, 404, "Not found", msg);
		goto out;
	}
	status = json_string_value(json_object_get(doc, "status"));
	if ((status && !strcmp(status, "unavailable")) || json_is_true(json_object_get(doc, "unavailable"))) {
		/* a requeue or a drain with requeue while a pre-029 rungd's function files are in place */
		web_message(h, 503, "Not possible now", "A rungd of a release before this one put its function files back: "
			    "a stop cannot be asked for until a rungd of this release starts again. Nothing was changed.");
		goto out;
	}
	if (status && !strcmp(status, "pool_refused")) {
		msg = xasprintf("the job's owner may not use pool %s (its token's pools are set by an admin)",
				json_string_value(json_object_get(doc, "pool")) ?: "?");
		web_message(h, 403, "Forbidden", msg);
		goto out;
	}
	if (status && !strcmp(status, "conflict")) {
		const json_t *obj = json_object_get(doc, "job") ? json_object_get(doc, "job") : json_object_get(doc, "escalation");
		msg = xasprintf("%s %s is %s: it cannot be %s now", a->thing, h->param[0],
				json_string_value(json_object_get(obj, "state")) ?: "?",
				a == &act_retry   ? "retried (only a failed or cancelled job can be)"
				: a == &act_start ? "started early (only a scheduled job can be)"
				: a == &act_pool  ? "moved (a succeeded job runs nowhere again)"
				: a == &act_requeue ? "requeued (only a running job can be, and not while its cancel is under way)"
						  : "changed that way");
		web_message(h, 409, "Not possible", msg);
		goto out;
	}
	log_info("web action", "action=%s %s=%s by=%s", a->name, a->thing, h->param[0], h->who.name[0] ? h->who.name : "?");
	if (a->announce)
		lease_announce(h->app->lease);
	back = back_path(h, a);
	web_redirect(h, back);
out:
	free(back);
	free(msg);
	json_decref(doc);
}

static void act_exec(struct hreq *h, const struct act *a, const char *sql, int n, const char *const *params)
{
	struct act_req *r = xcalloc(1, sizeof *r);

	r->h = h;
	r->act = a;
	db_exec(h->app->db, sql, n, params, on_act, r);
}

/* The note of the form (heap, NULL when empty); answers 400 and returns -1 when it is too long. */
static int form_note(struct hreq *h, char **note)
{
	bool too_big;

	*note = form_value(h, "note", &too_big);
	if (*note && !**note) {
		free(*note);
		*note = NULL;
	}
	if (too_big || (*note && strlen(*note) > HTTP_NOTE_MAX)) {
		char *msg = xasprintf("the note must be at most %d bytes", HTTP_NOTE_MAX);
		web_message(h, too_big ? 413 : 400, "Bad request", msg);
		free(msg);
		free(*note);
		*note = NULL;
		return -1;
	}
	return 0;
}

/* Checks the site, then the caller (web_gate: roles, scope over param[0]) before fn runs. */
static void act_enter(struct hreq *h, const struct act *a, unsigned roles, enum auth_scope scope,
		      void (*fn)(struct hreq *h))
{
	const char *host = hreq_header(h, "Host");
	char *back;

	if (!web_act_same_site(hreq_header(h, "Origin"), hreq_header(h, "Sec-Fetch-Site"), host,
			       hreq_header(h, "X-Forwarded-Host"))) {
		log_warn("web action refused", "action=%s path=%s origin=%s", a->name, h->path,
			 hreq_header(h, "Origin") ?: "-");
		web_message(h, 403, "Forbidden", "This form was sent from another site; nothing was changed.");
		return;
	}
	back = back_path(h, a); /* a login goes back to the page, not to this form's path */
	web_gate(h, roles, scope, fn, back);
	free(back);
}

static void do_retry(struct hreq *h)
{
	bool too_big;
	char *from = form_value(h, "from", &too_big), *note = NULL, by[AUTH_NAME_MAX + 32];

	if (from && strcmp(from, "current") && strcmp(from, "target")) {
		web_message(h, 400, "Bad request", "from must be current or target");
		goto out;
	}
	if (form_note(h, &note) < 0)
		goto out;
	{
		const char *params[4] = { h->param[0], from, note, hreq_by(h, by, sizeof by) };
		act_exec(h, &act_retry, sql_job_retry, 4, params);
	}
out:
	free(from);
	free(note);
}

static void do_cancel(struct hreq *h)
{
	const char *params[1] = { h->param[0] };

	act_exec(h, &act_cancel, sql_job_cancel, 1, params);
}

static void do_start(struct hreq *h)
{
	char by[AUTH_NAME_MAX + 32];
	const char *params[2] = { h->param[0], hreq_by(h, by, sizeof by) };

	act_exec(h, &act_start, sql_job_start, 2, params);
}

static void do_pool(struct hreq *h)
{
	bool too_big;
	char *pool = form_value(h, "pool", &too_big), by[AUTH_NAME_MAX + 32];

	if (too_big || !pool_name_ok(pool)) {
		web_message(h, too_big ? 413 : 400, "Bad request", "pool must be a pool name: " POOL_NAME_RULE);
		goto out;
	}
	{
		const char *params[3] = { h->param[0], pool, hreq_by(h, by, sizeof by) };
		act_exec(h, &act_pool, sql_job_pool, 3, params);
	}
out:
	free(pool);
}

static void do_requeue(struct hreq *h)
{
	char *note = NULL, by[AUTH_NAME_MAX + 32];

	if (form_note(h, &note) < 0)
		return;
	{
		const char *params[3] = { h->param[0], hreq_by(h, by, sizeof by), note };
		act_exec(h, &act_requeue, sql_job_requeue, 3, params);
	}
	free(note);
}

static void escalation_set(struct hreq *h, const struct act *a, const char *state)
{
	char *note = NULL;

	if (form_note(h, &note) < 0)
		return;
	{
		const char *params[3] = { h->param[0], state, note };
		act_exec(h, a, sql_escalation_set, 3, params);
	}
	free(note);
}

static void do_ack(struct hreq *h)
{
	escalation_set(h, &act_ack, "acknowledged");
}

static void do_resolve(struct hreq *h)
{
	escalation_set(h, &act_resolve, "resolved");
}

static void do_release(struct hreq *h)
{
	const char *params[1] = { h->param[0] };

	act_exec(h, &act_release, sql_gpu_release, 1, params);
}

/* A drain (with requeue=on: its running attempts stopped too, as POST /v1/workers/{id}/drain's
 * "requeue") or a resume. */
static void worker_drain(struct hreq *h, const struct act *a, bool drain)
{
	bool too_big;
	char *note = NULL, *requeue = drain ? form_value(h, "requeue", &too_big) : NULL, by[AUTH_NAME_MAX + 32];

	if (form_note(h, &note) < 0)
		goto out;
	if (requeue && !strcmp(requeue, "on")) {
		const char *params[3] = { h->param[0], note, hreq_by(h, by, sizeof by) };
		act_exec(h, a, sql_worker_drain_requeue, 3, params);
	} else {
		const char *params[4] = { h->param[0], drain ? "true" : "false", note, hreq_by(h, by, sizeof by) };
		act_exec(h, a, sql_worker_drain, 4, params);
	}
out:
	free(note);
	free(requeue);
}

static void do_drain(struct hreq *h)
{
	worker_drain(h, &act_drain, true);
}

static void do_resume(struct hreq *h)
{
	worker_drain(h, &act_resume, false);
}

/* An id in a path segment: answered 404 here, before the statement casts it. */
static bool id_ok(struct hreq *h, const char *thing)
{
	char *msg;

	if (http_parse_id(h->param[0]) >= 0)
		return true;
	msg = xasprintf("no such %s: %s", thing, h->param[0]);
	web_message(h, 404, "Not found", msg);
	free(msg);
	return false;
}

void web_act_job_retry(struct hreq *h)
{
	if (id_ok(h, "job"))
		act_enter(h, &act_retry, AUTH_SUBMITTER | AUTH_STAFF, AUTH_SCOPE_JOB, do_retry);
}

void web_act_job_cancel(struct hreq *h)
{
	if (id_ok(h, "job"))
		act_enter(h, &act_cancel, AUTH_SUBMITTER | AUTH_ADMIN, AUTH_SCOPE_JOB, do_cancel);
}

void web_act_job_start(struct hreq *h)
{
	if (id_ok(h, "job"))
		act_enter(h, &act_start, AUTH_SUBMITTER | AUTH_STAFF, AUTH_SCOPE_JOB, do_start);
}

void web_act_job_requeue(struct hreq *h)
{
	if (id_ok(h, "job"))
		act_enter(h, &act_requeue, AUTH_SUBMITTER | AUTH_STAFF, AUTH_SCOPE_JOB, do_requeue);
}

void web_act_job_pool(struct hreq *h)
{
	if (id_ok(h, "job"))
		act_enter(h, &act_pool, AUTH_SUBMITTER | AUTH_STAFF, AUTH_SCOPE_JOB, do_pool);
}

void web_act_escalation_ack(struct hreq *h)
{
	if (id_ok(h, "escalation"))
		act_enter(h, &act_ack, AUTH_STAFF, AUTH_SCOPE_NONE, do_ack);
}

void web_act_escalation_resolve(struct hreq *h)
{
	if (id_ok(h, "escalation"))
		act_enter(h, &act_resolve, AUTH_STAFF, AUTH_SCOPE_NONE, do_resolve);
}

void web_act_gpu_release(struct hreq *h)
{
	act_enter(h, &act_release, AUTH_STAFF, AUTH_SCOPE_NONE, do_release);
}

void web_act_worker_drain(struct hreq *h)
{
	if (id_ok(h, "worker"))
		act_enter(h, &act_drain, AUTH_STAFF, AUTH_SCOPE_NONE, do_drain);
}

void web_act_worker_resume(struct hreq *h)
{
	if (id_ok(h, "worker"))
		act_enter(h, &act_resume, AUTH_STAFF, AUTH_SCOPE_NONE, do_resume);
}

/* ---- cancel the jobs that match (POST /ui/jobs/cancel): review, then confirm ---- */

/* The filters of one cancel-matching form, between db_exec and its callback. */
struct matching_req {
	struct hreq *h;
	char *state, *owner, *kind, *label, *pool; /* as the form sent them (NULL: absent) */
	bool confirm;
};

static void matching_free(struct matching_req *m)
{
	free(m->state);
	free(m->owner);
	free(m->kind);
	free(m->label);
	free(m->pool);
	free(m);
}

/* The queue page with m's filters, as a URL (heap): for a Location header as it is, for a link
 * through html_esc (html_href would give its separators as &amp;, which a header must not carry). */
static char *matching_back(const struct matching_req *m)
{
	static const char *const keys[] = { "owner", "kind", "label", "pool" };
	const char *vals[] = { m->owner, m->kind, m->label, m->pool };
	const char *sep = "?";
	struct hbuf b = { 0 };

	html_add(&b, "/ui/jobs");
	for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
		if (!vals[i] || !*vals[i])
			continue;
		html_add(&b, sep);
		html_add(&b, keys[i]);
		html_add(&b, "=");
		html_url(&b, vals[i]);
		sep = "&";
	}
	return html_take(&b);
}

static void on_matching(PGresult *res, const char *err, void *arg)
{
	struct matching_req *m = arg;
	struct hreq *h = m->h;
	json_t *doc = NULL, *id;
	const json_t *ids;
	struct hbuf b = { 0 };
	char *body = NULL, *back = NULL;
	size_t i, n;

	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
	    !(doc = json_loads(PQgetvalue(res, 0, 0), 0, NULL))) {
		log_warn("web action failed", "action=cancel matching path=%s error=\"%s\"", h->path,
			 res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?" : err ? err : "?");
		web_message(h, 503, "Database unavailable", "The database could not answer; nothing was changed. Try again.");
		goto out;
	}
	ids = json_object_get(doc, "ids");
	n = json_array_size(ids);
	back = matching_back(m);
	if (m->confirm) {
		log_info("web action", "action=cancel matching jobs=%zu state=%s owner=%s kind=%s label=%s pool=%s by=%s", n,
			 m->state ? m->state : "queued", m->owner ? m->owner : "-", m->kind ? m->kind : "-",
			 m->label ? m->label : "-", m->pool ? m->pool : "-", h->who.name[0] ? h->who.name : "?");
		lease_announce(h->app->lease); /* the cancels may queue jobs that run after them (036) */
		web_redirect(h, back);
		goto out;
	}
	/* the review: which jobs the confirm would cancel now */
	html_printf(&b, "<h1>Cancel %zu job%s?</h1>\n", n, n == 1 ? "" : "s");
	if (n == 0) {
		html_add(&b, "<p class=\"muted\">No job matches these filters now; nothing would be cancelled.</p>");
	} else {
		html_add(&b, "<p>These jobs match now");
		if (json_is_true(json_object_get(doc, "more")))
			html_printf(&b, " (the first %zu, oldest first: more match, and a confirm cancels at most that many)", n);
		html_add(&b, ": ");
		json_array_foreach(ids, i, id) {
			long long v = (long long)json_integer_value(id);
			html_printf(&b, "%s<a href=\"/ui/jobs/%lld\">#%lld</a>", i ? ", " : "", v, v);
		}
		html_add(&b, ". A queued or scheduled job is cancelled at once, a running one is told to stop at its next heartbeat; "
			     "the confirm cancels what matches when it is sent.</p>\n");
		html_cancel_matching_form(&b, h->who.role, m->state, m->owner, m->kind, m->label, m->pool, 1, (long long)n);
	}
	html_add(&b, "<p><a href=\"");
	html_esc(&b, back);
	html_add(&b, "\">Back to the jobs</a></p>\n");
	body = html_take(&b);
	web_page(h, 200, "Cancel jobs", body);
out:
	free(body);
	free(back);
	json_decref(doc);
	matching_free(m);
}

static void do_cancel_matching(struct hreq *h)
{
	bool too_big = false, big;
	struct matching_req *m = xcalloc(1, sizeof *m);
	const char *scope = NULL, *kind = NULL, *field = NULL;
	char *msg = NULL, *confirm = NULL, *label_json = NULL, limit[24];
	json_t *labels = NULL;
	int code;

	m->h = h;
	m->state = form_value(h, "state", &big);
	too_big |= big;
	m->owner = form_value(h, "owner", &big);
	too_big |= big;
	m->kind = form_value(h, "kind", &big);
	too_big |= big;
	m->label = form_value(h, "label", &big);
	too_big |= big;
	m->pool = form_value(h, "pool", &big);
	too_big |= big;
	confirm = form_value(h, "confirm", &big);
	m->confirm = confirm && !strcmp(confirm, "1");
	if (too_big) {
		web_message(h, 413, "Bad request", "the form is too large");
		goto out;
	}
	if (m->state && *m->state && !api_jobs_cancel_state_ok(m->state)) {
		web_message(h, 400, "Bad request", API_JOBS_CANCEL_STATES);
		goto out;
	}
	code = api_jobs_list_filter(&h->who, m->owner, m->kind, &scope, &kind, &field, &msg);
	if (code) {
		web_message(h, code, code == 403 ? "Forbidden" : "Bad request", msg);
		goto out;
	}
	if (m->label && *m->label) {
		if (!(labels = labels_parse(m->label, "label", &msg))) {
			web_message(h, 400, "Bad request", msg);
			goto out;
		}
		if (json_object_size(labels) > 0)
			label_json = json_dumps(labels, JSON_COMPACT);
	}
	if (m->pool && *m->pool && !pool_name_ok(m->pool)) {
		web_message(h, 400, "Bad request", "pool must be a pool name: " POOL_NAME_RULE);
		goto out;
	}
	if (!(m->owner && *m->owner) && !label_json && !kind && !(m->pool && *m->pool)) {
		web_message(h, 400, "Bad request",
			    "name the jobs to cancel: owner, label, kind or pool (no filter would be every job)");
		goto out;
	}
	snprintf(limit, sizeof limit, "%d", API_JOBS_CANCEL_MAX);
	{
		/* (no "after" filter on the queue page's form: NULL) */
		const char *params[8] = { m->state && *m->state ? m->state : "queued", scope, label_json, kind, limit,
					  m->confirm ? "false" : "true", m->pool && *m->pool ? m->pool : NULL, NULL };
		db_exec(h->app->db, sql_job_cancel_matching, 8, params, on_matching, m);
	}
	m = NULL;
out:
	if (m)
		matching_free(m);
	free(msg);
	free(confirm);
	free(label_json);
	json_decref(labels);
}

void web_act_jobs_cancel(struct hreq *h)
{
	act_enter(h, &act_cancel_matching, AUTH_SUBMITTER | AUTH_ADMIN, AUTH_SCOPE_NONE, do_cancel_matching);
}
