/* The /ui pages: each handler checks the caller (the rung_token cookie), runs one sql/web_*.sql
 * statement on the loop and renders the JSON it returns as one HTML page. Nothing here changes a
 * job, an escalation, a GPU or a worker: the forms that do are web_act.c's. Every text from the
 * database is escaped (html_esc); the pages carry no scripts and a Content-Security-Policy that
 * forbids them. */
#include "web.h"

#include <ctype.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <jansson.h>

#include "api_jobs.h"
#include "app.h"
#include "auth.h"
#include "db.h"
#include "html.h"
#include "labels.h"
#include "http.h"
#include "jobtext.h"
#include "jpath.h"
#include "ladder.h"
#include "log.h"
#include "pool.h"
#include "priority.h"
#include "sql.h"
#include "util.h"
#include "version.h"

#define WEB_COOKIE "rung_token" /* the cookie that carries the API token */
#define WEB_COOKIE_MAX_AGE (30 * 24 * 3600)
#define WEB_TOKEN_MAX 512
#define WEB_FORM_MAX 8192
#define WEB_QUEUE_LIMIT "200"
#define QUEUE_PATH "/ui/jobs" /* the queue page (also at /ui), its form's action and its links */
#define WEB_LOG_LINES 40
#define WEB_LOG_PAGE_BYTES (1024 * 1024) /* of an attempt's log on its page */
#define WEB_LOG_REFRESH_S 10 /* a running attempt's log page reloads this often */

struct web_req;
/* The page a statement's result is rendered into. */
typedef void (*web_render)(struct hbuf *b, const struct web_req *w, const json_t *doc);

/* One page request between db_exec and its callback. */
struct web_req {
	struct hreq *h;
	web_render render;
	const char *title;   /* static */
	const char *missing; /* static: the 404 text when the statement returns no row */
	char *filter;        /* state filter echoed by list pages, owned */
	char *owner, *kind;  /* the queue's other filters as asked (NULL: none), owned */
	char *label;         /* the queue's label filter as asked (k=v,k=v; NULL: none), owned */
	char *pool;          /* the queue's pool filter (common/pool.h; NULL: none), owned */
};

static const char *const job_states[] = { "queued", "scheduled", "running", "succeeded", "failed", "cancelled" };
static const char *const esc_states[] = { "open", "acknowledged", "resolved" };

static const char page_css[] =
	"td.num{text-align:right}"
	"body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}"
	"header{background:#1d2330;color:#fff;padding:10px 24px;display:flex;gap:22px;align-items:center}"
	"header a{color:#cfd8e6;text-decoration:none}header a:hover{color:#fff}header .brand{font-weight:700;color:#fff}"
	"header form{margin-left:auto}header button{background:none;border:1px solid #566;color:#cfd8e6;border-radius:4px;"
	"padding:2px 10px;cursor:pointer}"
	"main{max-width:1180px;margin:0 auto;padding:18px 24px 60px}"
	"h1{font-size:22px;margin:6px 0 12px}h2{font-size:17px;margin:26px 0 10px}h3{font-size:15px;margin:18px 0 8px}"
	"table{border-collapse:collapse;width:100%;background:#fff;margin:6px 0 14px}"
	"th,td{border:1px solid #dde1e7;padding:5px 8px;text-align:left;vertical-align:top}th{background:#eef1f5;font-weight:600}"
	"a{color:#2456a6}code{font:12.5px ui-monospace,Menlo,Consolas,monospace;background:#eef1f5;padding:1px 4px;border-radius:3px}"
	"pre{background:#1d2330;color:#e8ecf2;padding:10px 12px;overflow:auto;border-radius:6px;font-size:12px}"
	"pre code{background:none;color:inherit;padding:0}"
	".state{display:inline-block;padding:1px 9px;border-radius:10px;font-size:12px;font-weight:600;background:#e3e7ee}"
	".s-succeeded,.s-ok,.s-resolved{background:#d6f0dc;color:#1d6b32}.s-failed,.s-quarantined,.s-open,.s-lost{background:#f8d7d7;color:#8f1d1d}"
	".s-running,.s-acknowledged{background:#d9e6fb;color:#1f4f99}.s-queued,.s-suspect,.s-draining{background:#fdefc8;color:#7a5a00}"
	".s-scheduled{background:#e8e2f6;color:#4b3a8a}"
	".s-cancelled,.s-preempted{background:#e5e5e5;color:#555}"
	".filters a{margin-right:12px}.filters a.on{font-weight:700;color:#1d2330;text-decoration:none}"
	"form.filter{display:flex;gap:14px;align-items:center;margin:6px 0}form.filter input[type=text]{width:180px;padding:3px}"
	".pager a{margin-right:14px}"
	".facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 14px;margin:8px 0}.facts dt{color:#5b6472}.facts dd{margin:0}"
	".card{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:12px 16px;margin:12px 0}"
	".attempt h3{margin:0 0 6px;display:flex;gap:10px;align-items:center}"
	".next{background:#fff8e1;border-left:4px solid #e0a800;padding:8px 12px;margin:10px 0}"
	".muted{color:#6b7482}.err{color:#8f1d1d}"
	".login{max-width:420px;margin:60px auto}.login input[type=password]{width:100%;padding:7px;box-sizing:border-box;margin:6px 0 12px}"
	".login button{padding:6px 18px}"
	"table.gpus code,table.gpus td:nth-child(4){white-space:nowrap}table.kv{width:auto;min-width:420px}table.kv th{width:220px}svg.memchart{display:block;margin:8px 0}"
	".started-lower{border-left:4px solid #5b84c4}.started-lower h3{margin:0 0 6px}table.estimates th{width:110px}"
	"form.act{display:inline-flex;gap:6px;align-items:center;margin:6px 10px 6px 0}form.act input[type=text]{width:260px;"
	"padding:4px}form.act button{padding:4px 12px;cursor:pointer}table form.act{margin:0}table form.act input[type=text]"
	"{width:150px}"
	"form.plan{display:grid;gap:6px;max-width:900px;margin:8px 0 18px}form.plan textarea{width:100%;box-sizing:border-box;"
	"min-height:280px;font:12.5px ui-monospace,Menlo,Consolas,monospace;padding:6px}form.plan input{width:160px;padding:4px}"
	"form.plan button{justify-self:start;padding:5px 18px;cursor:pointer}table.plan td:first-child{white-space:nowrap}"
	"form.act select{padding:3px}table form.act input[type=number]{width:90px;padding:3px}tr.revoked,tr.expired{color:#6b7482}"
	"code.secret{display:inline-block;font-size:14px;padding:6px 10px;user-select:all;word-break:break-all}";

/* ---- small pure helpers ---- */

static bool in_list(const char *s, const char *const *list, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return true;
	return false;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

char *web_cookie(const char *header, const char *name)
{
	size_t nl = strlen(name);
	const char *p = header;

	while (p && *p) {
		const char *end;
		while (*p == ' ' || *p == ';')
			p++;
		end = strchr(p, ';');
		if (!end)
			end = p + strlen(p);
		if ((size_t)(end - p) > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
			const char *v = p + nl + 1;
			size_t len = (size_t)(end - v);
			char *out;
			while (len > 0 && v[len - 1] == ' ')
				len--;
			if (len >= 2 && v[0] == '"' && v[len - 1] == '"') {
				v++;
				len -= 2;
			}
			out = xmalloc(len + 1);
			memcpy(out, v, len);
			out[len] = '\0';
			return out;
		}
		p = end;
	}
	return NULL;
}

char *web_form_value(const char *body, size_t len, const char *key)
{
	size_t kl = strlen(key), i = 0;

	while (i < len) {
		size_t j = i, e;
		while (j < len && body[j] != '&')
			j++;
		e = i;
		while (e < j && body[e] != '=')
			e++;
		if (e - i == kl && memcmp(body + i, key, kl) == 0) {
			char *out = xmalloc(j - e + 1);
			size_t o = 0;
			for (size_t k = e < j ? e + 1 : j; k < j; k++) {
				if (body[k] == '+') {
					out[o++] = ' ';
				} else if (body[k] == '%') {
					int hi = k + 2 < j ? hexval((unsigned char)body[k + 1]) : -1;
					int lo = hi >= 0 ? hexval((unsigned char)body[k + 2]) : -1;
					if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
						free(out);
						return NULL;
					}
					out[o++] = (char)(hi * 16 + lo);
					k += 2;
				} else {
					out[o++] = body[k];
				}
			}
			out[o] = '\0';
			return out;
		}
		i = j + 1;
	}
	return NULL;
}

int web_safe_next(const char *next)
{
	if (!next || strncmp(next, "/ui", 3) != 0 || (next[3] != '\0' && next[3] != '/' && next[3] != '?'))
		return 0;
	for (const char *p = next; *p; p++)
		if ((unsigned char)*p < 0x21 || *p == '\\' || *p == 0x7f || (p[0] == '/' && p[1] == '/'))
			return 0;
	return 1;
}

/* Token characters a cookie value may carry unquoted (RFC 6265 cookie-octet, minus ; , " \). */
static bool token_ok(const char *t)
{
	size_t n = strlen(t);

	if (n == 0 || n > WEB_TOKEN_MAX)
		return false;
	for (; *t; t++)
		if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f || strchr("\";,\\", *t))
			return false;
	return true;
}

/* Display text of any JSON value: strings as they are, null as a muted "-", the rest as compact JSON. */
static void esc_val(struct hbuf *b, const json_t *v)
{
	html_esc_json(b, v, "<span class=\"muted\">-</span>");
}

/* "2025-01-31T12:34:56.789+00:00" -> "2025-01-31 12:34:56". */
static void esc_time(struct hbuf *b, const json_t *v)
{
	html_esc_time(b, v, "<span class=\"muted\">-</span>");
}

static void state_badge(struct hbuf *b, const char *state)
{
	html_add(b, "<span class=\"state s-");
	html_esc(b, state ? state : "none");
	html_add(b, "\">");
	html_esc(b, state ? state : "-");
	html_add(b, "</span>");
}

static void dt(struct hbuf *b, const char *label, const json_t *v)
{
	html_printf(b, "<dt>%s</dt><dd>", label);
	esc_val(b, v);
	html_add(b, "</dd>");
}

/* ---- page frame and replies ---- */

/* The page's head and navigation; "Tokens" only for an admin (role: the caller's, 0 before the gate). */
static void page_open(struct hbuf *b, const char *title, unsigned role)
{
	html_add(b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>");
	html_esc(b, title);
	html_add(b, " - rung</title><style>");
	html_add(b, page_css);
	html_add(b, "</style></head><body><header><a class=\"brand\" href=\"/ui/\">rung</a>"
		    "<a href=\"/ui/\">Queue</a><a href=\"/ui/plan\">Plan</a><a href=\"/ui/escalations\">Escalations</a><a href=\"/ui/gpus\">GPUs</a><a href=\"/ui/usage\">Usage</a>");
	if (role & AUTH_ADMIN)
		html_add(b, "<a href=\"/ui/tokens\">Tokens</a>");
	html_add(b, "<form method=\"post\" action=\"/ui/logout\"><button type=\"submit\">Log out</button></form>"
		    "</header><main>\n");
}

static void page_close(struct hbuf *b)
{
	html_add(b, "</main></body></html>");
}

static void reply_html(struct hreq *h, int code, struct hbuf *b)
{
	char *s = html_take(b);

	hreq_add_header(h, "Cache-Control", "no-store");
	hreq_add_header(h, "X-Content-Type-Options", "nosniff");
	hreq_add_header(h, "Referrer-Policy", "same-origin");
	hreq_add_header(h, "Content-Security-Policy",
			"default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
			"frame-ancestors 'none'; base-uri 'none'");
	hreq_reply_typed(h, code, "text/html; charset=utf-8", s, strlen(s));
	free(s);
}

void web_message(struct hreq *h, int code, const char *title, const char *msg)
{
	struct hbuf b = { 0 };

	page_open(&b, title, h->who.role);
	html_add(&b, "<h1>");
	html_esc(&b, title);
	html_add(&b, "</h1><p class=\"err\">");
	html_esc(&b, msg);
	html_add(&b, "</p>");
	page_close(&b);
	reply_html(h, code, &b);
}

void web_page(struct hreq *h, int code, const char *title, const char *body)
{
	struct hbuf b = { 0 };

	page_open(&b, title, h->who.role);
	html_add(&b, body);
	page_close(&b);
	reply_html(h, code, &b);
}

void web_redirect(struct hreq *h, const char *location)
{
	hreq_add_header(h, "Location", location);
	hreq_add_header(h, "Cache-Control", "no-store");
	hreq_reply_text(h, 303, NULL);
}

/* ---- the caller ---- */

/* The owner a page is limited to: the caller's name for a submitter (its own jobs only), NULL
 * (everything) for support and admin. */
static const char *owner_filter(const struct hreq *h)
{
	return (h->who.role & (AUTH_SUPPORT | AUTH_ADMIN)) ? NULL : h->who.name;
}

/* The login form's URL that comes back to back (NULL: this request's own page, with its query)
 * and says why (NULL: nothing; "expired", "refused"). Heap. */
static char *login_location(const struct hreq *h, const char *back, const char *why)
{
	struct hbuf loc = { 0 };

	html_add(&loc, "/ui/login?next=");
	html_url(&loc, back ? back : h->path);
	if (!back && h->query) {
		html_url(&loc, "?");
		html_url(&loc, h->query);
	}
	if (why) {
		html_add(&loc, "&why=");
		html_url(&loc, why);
	}
	return html_take(&loc);
}

/* The cookie's token was refused (expired, revoked, unknown, not a token): the cookie is cleared
 * and the browser sent to the login form, which says why and comes back to the page (arg: web_gate's
 * back). */
static void gate_refused(struct hreq *h, enum auth_refusal why, const char *expired_at, const char *arg)
{
	char *loc = login_location(h, arg, why == AUTH_REFUSED_EXPIRED ? "expired" : "refused");

	log_info("web token refused", "path=%s why=%s expired_at=%s", h->path,
		 why == AUTH_REFUSED_EXPIRED ? "expired" : why == AUTH_REFUSED_UNKNOWN ? "unknown_or_revoked" : "malformed",
		 expired_at ? expired_at : "-");
	hreq_add_header(h, "Set-Cookie", WEB_COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
	web_redirect(h, loc);
	free(loc);
}

/* Runs page(h) for a caller with one of `roles`, checked by server/auth.c exactly as for the API:
 * the rung_token cookie is the bearer token (an Authorization header, when the request carries
 * one, is checked instead). Without a usable cookie, or with one whose token is refused (expired,
 * revoked, unknown), the browser is sent to the login form with the page to come back to: back,
 * or this one. */
void web_gate(struct hreq *h, unsigned roles, enum auth_scope scope, void (*page)(struct hreq *h), const char *back)
{
	char *tok = web_cookie(hreq_header(h, "Cookie"), WEB_COOKIE);

	if (tok && token_ok(tok)) {
		/* the token is hashed before auth_dispatch_as returns: tok may go */
		/* with an Authorization header that is the token checked: its refusal is not the cookie's,
		 * which stays (a 401 as the API answers) */
		bool bearer = hreq_header(h, "Authorization") != NULL;
		auth_dispatch_as(h, bearer ? NULL : tok, roles, scope, page, bearer ? NULL : gate_refused, back);
	} else {
		char *next = login_location(h, back, NULL);
		web_redirect(h, next);
		free(next);
	}
	free(tok);
}

/* ---- running a page's statement ---- */

static void on_page(PGresult *res, const char *err, void *arg)
{
	struct web_req *w = arg;
	struct hreq *h = w->h;
	struct hbuf b = { 0 };
	json_t *doc = NULL;

	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_warn("web page failed", "path=%s error=\"%s\"", h->path,
			 res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?" : err ? err : "?");
		web_message(h, 503, "Database unavailable", "The database could not answer; try again shortly.");
		goto out;
	}
	if (PQntuples(res) == 0 || PQgetisnull(res, 0, 0) ||
	    !(doc = json_loads(PQgetvalue(res, 0, 0), 0, NULL))) {
		web_message(h, 404, "Not found", w->missing);
		goto out;
	}
	page_open(&b, w->title, h->who.role);
	w->render(&b, w, doc);
	page_close(&b);
	reply_html(h, 200, &b);
out:
	json_decref(doc);
	free(w->filter);
	free(w->owner);
	free(w->kind);
	free(w->label);
	free(w->pool);
	free(w);
}

/* A page request; filter (owned) is the state filter a list page echoes. Run it with page_run. */
static struct web_req *page_req(struct hreq *h, web_render render, const char *title, const char *missing,
				char *filter)
{
	struct web_req *w = xcalloc(1, sizeof *w);

	w->h = h;
	w->render = render;
	w->title = title;
	w->missing = missing;
	w->filter = filter;
	return w;
}

static void page_run(struct web_req *w, const char *sql, int n, const char *const *params)
{
	db_exec(w->h->app->db, sql, n, params, on_page, w);
}

static void run_page(struct hreq *h, const char *sql, int n, const char *const *params, web_render render,
		     const char *title, const char *missing, char *filter)
{
	page_run(page_req(h, render, title, missing, filter), sql, n, params);
}

/* ?state= when it is one of list; "" and absent read as no filter. Returns -1 after answering 400. */
static int state_param(struct hreq *h, const char *const *list, size_t n, char **out)
{
	char *s = hreq_query(h, "state");

	*out = NULL;
	if (s && *s && !in_list(s, list, n)) {
		free(s);
		web_message(h, 400, "Bad request", "unknown state filter");
		return -1;
	}
	if (s && *s)
		*out = s;
	else
		free(s);
	return 0;
}

/* The state links of a list page; owner, kind, label and pool: the queue's other filters, which
 * each link keeps (NULL: none, as on the escalations page). */
static void filters(struct hbuf *b, const char *base, const char *const *list, size_t n, const char *on,
		    const json_t *counts, const char *owner, const char *kind, const char *label, const char *pool)
{
	static const char *const keys[] = { "state", "owner", "kind", "label", "pool" };
	const char *values[] = { NULL, owner, kind, label, pool };

	html_add(b, "<p class=\"filters\"><a href=\"");
	html_href(b, base, keys, values, ARRAY_LEN(keys));
	html_printf(b, "\"%s>all</a>", on ? "" : " class=\"on\"");
	for (size_t i = 0; i < n; i++) {
		values[0] = list[i];
		html_add(b, "<a href=\"");
		html_href(b, base, keys, values, ARRAY_LEN(keys));
		html_printf(b, "\"%s>%s", on && !strcmp(on, list[i]) ? " class=\"on\"" : "", list[i]);
		if (counts)
			html_printf(b, " (%lld)", (long long)json_integer_value(json_object_get(counts, list[i])));
		html_add(b, "</a>");
	}
	html_add(b, "</p>\n");
}

/* ---- the queue ---- */

/* The queue page's link to the older jobs past next_cursor, or back to the newest, keeping the filters. */
static void queue_link(struct hbuf *b, const struct web_req *w, const char *cursor, const char *cls, const char *text)
{
	static const char *const keys[] = { "state", "owner", "kind", "label", "pool", "cursor" };
	const char *values[] = { w->filter, w->owner, w->kind, w->label, w->pool, cursor };

	html_printf(b, "<a class=\"%s\" href=\"", cls);
	html_href(b, QUEUE_PATH, keys, values, ARRAY_LEN(keys));
	html_printf(b, "\">%s</a>", text);
}

/* Whether a job of the list is in a pool other than "default": the queue then shows a pool column
 * (a fleet without pools reads as before). */
static bool any_pool(const json_t *jobs)
{
	const json_t *j;
	size_t i;

	json_array_foreach(jobs, i, j) {
		const char *p = json_string_value(json_object_get(j, "pool"));
		if (p && strcmp(p, POOL_DEFAULT))
			return true;
	}
	return false;
}

/* Links to the jobs of ids (a JSON list of job ids, migration 033): "<a>41</a>, <a>42</a>". */
static void job_links(struct hbuf *b, const json_t *ids)
{
	const json_t *v;
	size_t i;

	json_array_foreach(ids, i, v) {
		long long id = json_integer_value(v);
		html_printf(b, "%s<a href=\"/ui/jobs/%lld\">%lld</a>", i ? ", " : "", id, id);
	}
}

static void render_queue(struct hbuf *b, const struct web_req *w, const json_t *doc)
{
	const json_t *jobs = json_object_get(doc, "jobs"), *j, *next = json_object_get(doc, "next_cursor");
	const char *on = w->filter;
	char *cursor = hreq_query(w->h, "cursor");
	bool pools = any_pool(jobs), prios = priority_any_other(jobs);
	size_t i;

	html_add(b, "<h1>Jobs</h1>\n");
	html_jobs_filter_form(b, w->h->who.role, QUEUE_PATH, job_states, ARRAY_LEN(job_states), w->filter, w->owner,
			      w->kind, w->label, w->pool);
	filters(b, QUEUE_PATH, job_states, ARRAY_LEN(job_states), on, json_object_get(doc, "counts"), w->owner, w->kind,
		w->label, w->pool);
	html_cancel_matching_form(b, w->h->who.role, w->filter, w->owner, w->kind, w->label, w->pool, 0, 0);
	if (json_array_size(jobs) == 0) {
		html_add(b, "<p class=\"muted\">No jobs.</p>");
		if (cursor && *cursor) {
			html_add(b, "<p class=\"pager\">");
			queue_link(b, w, NULL, "newest", "Newest jobs");
			html_add(b, "</p>\n");
		}
		free(cursor);
		return;
	}
	html_add(b, "<table class=\"jobs\"><thead><tr><th>#</th><th>name</th><th>state</th><th>kind</th><th>owner</th>");
	if (prios) /* lower runs first; a column only when some listed job is off the default */
		html_add(b, "<th>priority</th>");
	if (pools)
		html_add(b, "<th>pool</th>");
	html_add(b, "<th>labels</th><th>attempts</th><th>next action</th><th>updated</th></tr></thead><tbody>\n");
	json_array_foreach(jobs, i, j) {
		long long id = json_integer_value(json_object_get(j, "id"));
		html_printf(b, "<tr><td><a href=\"/ui/jobs/%lld\">%lld</a></td><td><a href=\"/ui/jobs/%lld\">", id, id, id);
		html_esc(b, json_string_value(json_object_get(j, "name")));
		html_add(b, "</a></td><td>");
		state_badge(b, json_string_value(json_object_get(j, "state")));
		html_add(b, "</td><td>");
		esc_val(b, json_object_get(j, "kind"));
		html_add(b, "</td><td>");
		esc_val(b, json_object_get(j, "owner"));
		if (prios) {
			html_add(b, "</td><td class=\"num\">");
			esc_val(b, json_object_get(j, "priority"));
		}
		if (pools) {
			html_add(b, "</td><td class=\"pool\">");
			esc_val(b, json_object_get(j, "pool"));
		}
		html_add(b, "</td><td class=\"labels\">");
		{
			char *l = labels_format(json_object_get(j, "labels"));
			html_esc(b, l);
			free(l);
		}
		html_add(b, "</td><td>");
		esc_val(b, json_object_get(j, "attempts"));
		html_add(b, "</td><td>");
		esc_val(b, json_object_get(j, "next_action"));
		html_add(b, "</td><td>");
		esc_time(b, json_object_get(j, "updated_at"));
		html_add(b, "</td></tr>\n");
	}
	html_add(b, "</tbody></table>\n");
	if (json_is_integer(next) || (cursor && *cursor)) {
		char older[32];
		snprintf(older, sizeof older, "%lld", (long long)json_integer_value(next));
		html_add(b, "<p class=\"pager\">");
		if (cursor && *cursor)
			queue_link(b, w, NULL, "newest", "Newest jobs");
		if (json_is_integer(next))
			queue_link(b, w, older, "older", "Older jobs");
		html_add(b, "</p>\n");
	}
	free(cursor);
}

/* ?state=&owner=&kind=&label=&pool=&cursor=: the filters as GET /v1/jobs reads them
 * (api_jobs_list_filter: owner is staff's, a submitter may name only itself; pool a pool name,
 * common/pool.h), WEB_QUEUE_LIMIT jobs a page. */
static void queue_page(struct hreq *h)
{
	char *state = NULL, *owner = hreq_query(h, "owner"), *kind = hreq_query(h, "kind"), *cursor = hreq_query(h, "cursor");
	char *label = hreq_query(h, "label"), *pool = hreq_query(h, "pool"), *label_json = NULL, *msg = NULL;
	const char *scope, *kind_f, *field;
	struct web_req *w;
	int code;

	if (state_param(h, job_states, ARRAY_LEN(job_states), &state) < 0)
		goto out;
	code = api_jobs_list_filter(&h->who, owner, kind, &scope, &kind_f, &field, &msg);
	if (code) {
		web_message(h, code, code == 403 ? "Forbidden" : "Bad request", msg);
		goto out;
	}
	if (cursor && *cursor && http_parse_id(cursor) < 0) {
		web_message(h, 400, "Bad request", "cursor is not one this page gave out");
		goto out;
	}
	if (pool && *pool && !pool_name_ok(pool)) {
		msg = xasprintf("pool must be %s", POOL_NAME_RULE);
		web_message(h, 400, "Bad request", msg);
		goto out;
	}
	if (label && *label) { /* as GET /v1/jobs?label= reads it */
		json_t *labels = labels_parse(label, "label", &msg);
		if (!labels) {
			web_message(h, 400, "Bad request", msg);
			goto out;
		}
		if (json_object_size(labels) > 0)
			label_json = json_dumps(labels, JSON_COMPACT);
		json_decref(labels);
	}
	{
		const char *params[7] = { state, scope, WEB_QUEUE_LIMIT, kind_f, cursor && *cursor ? cursor : NULL, label_json,
					  pool && *pool ? pool : NULL };
		w = page_req(h, render_queue, "Jobs", "no jobs", state);
		state = NULL;
		if (owner && *owner) {
			w->owner = owner;
			owner = NULL;
		}
		if (kind_f) {
			w->kind = kind;
			kind = NULL;
		}
		if (label_json) {
			w->label = label;
			label = NULL;
		}
		if (pool && *pool) {
			w->pool = pool;
			pool = NULL;
		}
		page_run(w, sql_web_jobs, 7, params);
	}
out:
	free(pool);
	free(label_json);
	free(label);
	free(msg);
	free(cursor);
	free(kind);
	free(owner);
	free(state);
}

/* ---- one job ---- */

/* A table of the leaves that differ between a and b (ladder_diff), or `same` when none do. */
static void diff_table(struct hbuf *b, const json_t *a, const json_t *bb, const char *la, const char *lb,
		       const char *same)
{
	json_t *d = json_array(), *c;
	size_t i;

	if (json_is_object(a) && json_is_object(bb))
		ladder_diff(a, bb, d);
	if (json_array_size(d) == 0) {
		html_printf(b, "<p class=\"muted\">%s</p>\n", same);
		json_decref(d);
		return;
	}
	html_printf(b, "<table class=\"diff\"><thead><tr><th>path</th><th>%s</th><th>%s</th></tr></thead><tbody>\n", la,
		    lb);
	json_array_foreach(d, i, c) {
		html_add(b, "<tr><td><code>");
		html_esc(b, json_string_value(json_object_get(c, "path")));
		html_add(b, "</code></td><td>");
		esc_val(b, json_object_get(c, "old"));
		html_add(b, "</td><td>");
		esc_val(b, json_object_get(c, "new"));
		html_add(b, "</td></tr>\n");
	}
	html_add(b, "</tbody></table>\n");
	json_decref(d);
}

static void changes_table(struct hbuf *b, const json_t *changes)
{
	html_changes_table(b, changes, "old", "new", "<span class=\"muted\">-</span>");
}

static void kv_table(struct hbuf *b, const json_t *obj)
{
	const char *k;
	json_t *v;

	html_add(b, "<table class=\"kv\"><tbody>\n");
	json_object_foreach((json_t *)obj, k, v) {
		html_add(b, "<tr><th>");
		html_esc(b, k);
		html_add(b, "</th><td>");
		esc_val(b, v);
		html_add(b, "</td></tr>\n");
	}
	html_add(b, "</tbody></table>\n");
}

static void render_attempt(struct hbuf *b, const json_t *a, const json_t *prev_config, const json_t *target)
{
	const json_t *f = json_object_get(a, "facts"), *phase = jpath_get(a, "facts.oom_phase"), *ev, *l;
	const json_t *changes = json_object_get(a, "changes"), *lines = jpath_get(a, "facts.log_tail");
	const char *outcome = json_string_value(json_object_get(a, "outcome"));
	size_t i, n;

	if (!json_is_string(phase))
		phase = json_object_get(a, "phase");
	html_printf(b, "<section class=\"card attempt\" id=\"attempt-%lld\"><h3>Attempt %lld ",
		    (long long)json_integer_value(json_object_get(a, "number")),
		    (long long)json_integer_value(json_object_get(a, "number")));
	state_badge(b, outcome ? outcome : json_string_value(json_object_get(a, "state")));
	if (json_is_string(json_object_get(a, "rung"))) {
		html_add(b, " <span class=\"rung\">rung <code>");
		html_esc(b, json_string_value(json_object_get(a, "rung")));
		html_add(b, "</code></span>");
	}
	html_add(b, "</h3><dl class=\"facts\">");
	dt(b, "worker", json_object_get(a, "worker_id"));
	html_add(b, "<dt>GPU</dt><dd>");
	esc_val(b, json_object_get(a, "gpu_uuid"));
	if (json_is_integer(json_object_get(a, "gpu_memory_mib"))) {
		html_add(b, " <span class=\"muted\">(");
		html_esc(b, json_string_value(json_object_get(a, "gpu_name")));
		html_printf(b, ", %lld MiB)</span>", (long long)json_integer_value(json_object_get(a, "gpu_memory_mib")));
	}
	html_add(b, "</dd>");
	html_printf(b, "<dt>log</dt><dd><a href=\"/ui/jobs/%lld/log?attempt=%lld\">what the trainer printed</a></dd>",
		    (long long)json_integer_value(json_object_get(a, "job_id")),
		    (long long)json_integer_value(json_object_get(a, "number")));
	dt(b, "phase", phase);
	html_add(b, "<dt>step</dt><dd>");
	esc_val(b, json_object_get(a, "step"));
	if (json_is_integer(json_object_get(a, "total_steps")))
		html_printf(b, " / %lld", (long long)json_integer_value(json_object_get(a, "total_steps")));
	html_add(b, "</dd>");
	dt(b, "class", json_object_get(a, "class"));
	dt(b, "rule", json_object_get(a, "rule"));
	dt(b, "action", json_object_get(a, "action"));
	dt(b, "rung", json_object_get(a, "rung"));
	dt(b, "outcome", json_object_get(a, "outcome"));
	html_add(b, "<dt>started</dt><dd>");
	esc_time(b, json_object_get(a, "started_at"));
	html_add(b, "</dd>");
	if (json_is_object(f) && json_is_integer(json_object_get(f, "duration_ms")))
		html_printf(b, "<dt>duration</dt><dd>%.1f s</dd>",
			    (double)json_integer_value(json_object_get(f, "duration_ms")) / 1000.0);
	if (json_is_integer(jpath_get(f, "peak.mib"))) { /* FACTS.peak: nvidia-smi's highest reading */
		html_printf(b, "<dt>memory peak</dt><dd>%lld MiB in ", (long long)json_integer_value(jpath_get(f, "peak.mib")));
		html_esc(b, json_string_value(jpath_get(f, "peak.phase")));
		if (json_is_integer(jpath_get(f, "peak.step")))
			html_printf(b, " at step %lld", (long long)json_integer_value(jpath_get(f, "peak.step")));
		html_add(b, "</dd>");
	}
	if (json_is_string(json_object_get(f, "error"))) {
		html_add(b, "<dt>error</dt><dd><code>");
		html_esc(b, json_string_value(json_object_get(f, "error")));
		html_add(b, "</code></dd>");
	}
	html_add(b, "</dl>\n");
	if (json_array_size(json_object_get(a, "evidence")) > 0) {
		html_add(b, "<ul class=\"evidence\">");
		json_array_foreach(json_object_get(a, "evidence"), i, ev) {
			html_add(b, "<li>");
			esc_val(b, ev);
			html_add(b, "</li>");
		}
		html_add(b, "</ul>\n");
	}
	html_add(b, "<div class=\"chart\">");
	if (!html_mem_chart(b, a, json_integer_value(json_object_get(a, "gpu_memory_mib"))))
		html_add(b, "<p class=\"muted\">No memory figures for this attempt.</p>");
	html_add(b, "</div>\n");
	html_add(b, "<h4>Config this attempt ran</h4>\n");
	diff_table(b, prev_config ? prev_config : target, json_object_get(a, "config"),
		   prev_config ? "previous attempt" : "target", "this attempt",
		   prev_config ? "Same config as the previous attempt." : "The target config, unchanged.");
	if (json_array_size(changes) > 0) {
		html_add(b, "<h4>Changes decided for the next attempt</h4>\n");
		changes_table(b, changes);
	}
	n = json_array_size(lines);
	if (n > 0) {
		html_printf(b, "<details><summary>last %zu log lines</summary><pre><code>",
			    n > WEB_LOG_LINES ? (size_t)WEB_LOG_LINES : n);
		for (i = n > WEB_LOG_LINES ? n - WEB_LOG_LINES : 0; i < n; i++) {
			l = json_array_get(lines, i);
			html_esc(b, json_string_value(l));
			html_add(b, "\n");
		}
		html_add(b, "</code></pre></details>\n");
	}
	html_add(b, "</section>\n");
}

/* What the running attempt's trainer printed so far (web_job.sql "log"), its last lines. */
static void render_live_log(struct hbuf *b, const json_t *log, long long job_id)
{
	if (!json_is_object(log))
		return;
	html_printf(b, "<h2 id=\"log\">Log of attempt %lld so far</h2>\n",
		    (long long)json_integer_value(json_object_get(log, "number")));
	html_add(b, "<pre class=\"log\"><code>");
	if (!html_log_lines(b, json_string_value(json_object_get(log, "text")), WEB_LOG_LINES))
		html_add(b, "(nothing yet)");
	html_printf(b, "</code></pre>\n<p class=\"muted\">The last %d lines as its worker sent them (every "
		    "<code>--log-interval-ms</code>); <a href=\"/ui/jobs/%lld/log?attempt=%lld\">all of it</a>, or "
		    "<code>rungctl logs %lld --follow</code>.</p>\n", WEB_LOG_LINES, job_id,
		    (long long)json_integer_value(json_object_get(log, "number")), job_id);
}

static void render_job(struct hbuf *b, const struct web_req *w, const json_t *doc)
{
	const json_t *j = json_object_get(doc, "job"), *as = json_object_get(doc, "attempts");
	const json_t *esc = json_object_get(doc, "escalations"), *a, *e, *prev = NULL;
	const json_t *target = json_object_get(j, "target_config"), *ceil = jpath_get(j, "recovery_state.ceilings");
	const json_t *cons = json_object_get(j, "constraints");
	const char *next = json_string_value(json_object_get(j, "next_action"));
	long long lower = html_start_lower_attempt(j);
	int told_start = lower == 0; /* nothing to tell, or told */
	size_t i;

	html_printf(b, "<h1>Job %lld: ", (long long)json_integer_value(json_object_get(j, "id")));
	html_esc(b, json_string_value(json_object_get(j, "name")));
	html_add(b, " ");
	state_badge(b, json_string_value(json_object_get(j, "state")));
	html_add(b, "</h1>\n<dl class=\"facts job\">");
	dt(b, "kind", json_object_get(j, "kind"));
	dt(b, "owner", json_object_get(j, "owner"));
	if (json_is_string(json_object_get(j, "pool")))
		dt(b, "pool", json_object_get(j, "pool"));
	if (json_object_size(json_object_get(j, "labels")) > 0) {
		char *l = labels_format(json_object_get(j, "labels"));
		html_add(b, "<dt>labels</dt><dd>");
		html_esc(b, l);
		html_add(b, "</dd>");
		free(l);
	}
	dt(b, "priority", json_object_get(j, "priority"));
	dt(b, "attempts", json_object_get(j, "attempts"));
	if (json_is_true(json_object_get(j, "cancel_requested")))
		html_add(b, "<dt>cancel</dt><dd>requested</dd>");
	{
		char *stop = jobtext_stopping(j); /* preempted or requeued: its attempt is being stopped */
		if (stop) {
			html_add(b, "<dt>stop</dt><dd>");
			html_esc(b, stop);
			html_add(b, "</dd>");
		}
		free(stop);
	}
	html_add(b, "<dt>created</dt><dd>");
	esc_time(b, json_object_get(j, "created_at"));
	html_add(b, "</dd><dt>updated</dt><dd>");
	esc_time(b, json_object_get(j, "updated_at"));
	html_add(b, "</dd>");
	if (!json_is_null(json_object_get(j, "finished_at"))) {
		html_add(b, "<dt>finished</dt><dd>");
		esc_time(b, json_object_get(j, "finished_at"));
		html_add(b, "</dd>");
	}
	if (json_is_object(json_object_get(j, "result")))
		dt(b, "result", jpath_get(j, "result.reason"));
	{
		char *o = jobtext_output(j); /* where the trained file is */
		if (o) {
			html_add(b, "<dt>output</dt><dd>");
			html_esc(b, o);
			html_add(b, "</dd>");
		}
		free(o);
	}
	if (lower > 0) { /* issue 12: the story itself precedes that attempt below */
		html_add(b, "<dt>start</dt><dd><a href=\"#started-lower\">");
		html_start_lower_line(b, j);
		html_add(b, "</a></dd>");
	}
	if (json_is_object(jpath_get(j, "recovery_state.started_bigger"))) { /* issue 12: handed back before it ran */
		html_add(b, "<dt>bigger GPU</dt><dd>");
		html_start_bigger_line(b, j);
		if (json_is_string(jpath_get(j, "recovery_state.started_bigger.reason"))) {
			html_add(b, "<br><span class=\"reason\">");
			html_esc(b, json_string_value(jpath_get(j, "recovery_state.started_bigger.reason")));
			html_add(b, "</span>");
		}
		html_add(b, "</dd>");
	}
	if (json_is_object(jpath_get(j, "recovery_state.retried"))) {
		html_add(b, "<dt>retried</dt><dd>");
		html_retried_line(b, j);
		html_add(b, "</dd>");
	}
	{
		char *awaited = jobtext_awaited(j); /* migration 033: the scheduled jobs that run after it */
		if (awaited) {
			html_add(b, "<dt>awaited</dt><dd class=\"reason\">");
			html_esc(b, awaited);
			html_add(b, " ");
			job_links(b, json_object_get(j, "awaited_by"));
			html_add(b, "</dd>");
		}
		free(awaited);
	}
	if (json_array_size(json_object_get(j, "after")) > 0) { /* the jobs it runs after, each a link */
		const char *when = json_string_value(json_object_get(j, "after_when")); /* migration 036 */
		html_add(b, "<dt>runs after</dt><dd>");
		job_links(b, json_object_get(j, "after"));
		if (when && !strcmp(when, "ended"))
			html_add(b, " <span class=\"muted\">once they end, whatever the outcome</span>");
		else if (when && !strcmp(when, "failed"))
			html_add(b, " <span class=\"muted\">only if they fail or are cancelled</span>");
		html_add(b, "</dd>");
	}
	{
		struct hbuf line = { 0 };
		if (html_scheduled_line(&line, j)) { /* migration 025: when it starts */
			html_add(b, "<dt>scheduled</dt><dd class=\"reason\">");
			html_add(b, line.s);
			html_add(b, "</dd>");
		}
		html_release(&line);
	}
	{
		struct hbuf line = { 0 };
		if (html_deadline_line(&line, j)) { /* migration 039: by when it must start */
			html_add(b, "<dt>deadline</dt><dd class=\"reason\">");
			html_add(b, line.s);
			html_add(b, "</dd>");
		}
		html_release(&line);
	}
	if (json_is_object(json_object_get(j, "placement"))) { /* why it waits, or its turn in the queue */
		struct hbuf line = { 0 };
		if (html_placement_line(&line, j)) {
			html_add(b, "<dt>waiting</dt><dd class=\"reason\">");
			html_add(b, line.s);
			html_add(b, "</dd>");
		}
		html_release(&line);
	}
	html_add(b, "</dl>\n");
	if (next) {
		html_add(b, "<div class=\"next\"><strong>Next action:</strong> ");
		html_esc(b, next);
		html_add(b, "</div>\n");
	}
	html_job_forms(b, w->h->who.role, j);
	if (json_array_size(esc) > 0) {
		html_add(b, "<h2>Escalations</h2><ul class=\"escalations\">");
		json_array_foreach(esc, i, e) {
			long long id = json_integer_value(json_object_get(e, "id"));
			html_printf(b, "<li><a href=\"/ui/escalations/%lld\">escalation %lld</a> ", id, id);
			state_badge(b, json_string_value(json_object_get(e, "state")));
			html_add(b, " <code>");
			html_esc(b, json_string_value(json_object_get(e, "trigger")));
			html_add(b, "</code> ");
			html_esc(b, json_string_value(json_object_get(e, "summary")));
			html_add(b, "</li>");
		}
		html_add(b, "</ul>\n");
	}
	html_add(b, "<h2>Target vs current config</h2>\n");
	diff_table(b, target, json_object_get(j, "current_config"), "target", "current",
		   "The current config is the target config.");
	html_add(b, "<h2>Ceilings and budget</h2>\n");
	if (json_object_size(ceil) > 0) {
		html_add(b, "<h3>Ceilings found by the ladder</h3>");
		kv_table(b, ceil);
	}
	if (json_object_size(cons) > 0) {
		html_add(b, "<h3>Placement constraints</h3>");
		kv_table(b, cons);
	}
	html_add(b, "<h3>Recovery settings</h3>");
	kv_table(b, json_object_get(j, "recovery"));
	html_printf(b, "<h2>Attempts (%zu)</h2>\n", json_array_size(as));
	if (json_array_size(as) == 0)
		html_add(b, "<p class=\"muted\">No attempt has started yet.</p>");
	json_array_foreach(as, i, a) {
		if (!told_start && json_integer_value(json_object_get(a, "number")) >= lower)
			told_start = html_start_lower(b, j); /* the step before that attempt, as rungctl tells it */
		render_attempt(b, a, prev, target);
		prev = json_object_get(a, "config");
	}
	if (!told_start)
		html_start_lower(b, j);
	render_live_log(b, json_object_get(doc, "log"), json_integer_value(json_object_get(j, "id")));
}

/* ---- an attempt's whole log ---- */

#define WEB_LOG_ATTEMPT_LINKS 50 /* attempts linked at the top of a log page */

static void render_log(struct hbuf *b, const struct web_req *w, const json_t *doc)
{
	const json_t *a = json_object_get(doc, "attempt");
	long long id = json_integer_value(json_object_get(doc, "job_id"));
	long long n = json_integer_value(json_object_get(a, "number")), count = json_integer_value(json_object_get(doc, "attempts"));

	html_printf(b, "<h1><a href=\"/ui/jobs/%lld\">Job %lld</a>: ", id, id);
	if (json_is_object(a)) {
		html_printf(b, "log of attempt %lld ", n);
		state_badge(b, json_string_value(json_object_get(a, "state")));
	} else
		html_add(b, "log");
	html_add(b, "</h1>\n");
	if (count > 1) {
		html_add(b, "<p class=\"filters\">attempt");
		for (long long k = count > WEB_LOG_ATTEMPT_LINKS ? count - WEB_LOG_ATTEMPT_LINKS + 1 : 1; k <= count; k++)
			html_printf(b, "<a href=\"/ui/jobs/%lld/log?attempt=%lld\"%s>%lld</a>", id, k,
				    k == n ? " class=\"on\"" : "", k);
		html_add(b, "</p>\n");
	}
	if (!json_is_object(a)) {
		html_add(b, "<p class=\"muted\">No attempt of that number has started.</p>\n");
		return;
	}
	if (!strcmp(json_string_value(json_object_get(a, "state")) ?: "", "running")) {
		/* a header, not a script: the page reloads at its end while the trainer runs */
		char *refresh = xasprintf("%d; url=/ui/jobs/%lld/log?attempt=%lld#end", WEB_LOG_REFRESH_S, id, n);
		hreq_add_header(w->h, "Refresh", refresh);
		free(refresh);
		html_printf(b, "<p class=\"muted\">The attempt runs: this page reloads every %d s, at <a href=\"#end\">its "
			    "end</a>.</p>\n", WEB_LOG_REFRESH_S);
	}
	html_add(b, "<pre class=\"log\"><code>");
	if (!html_log_lines(b, json_string_value(json_object_get(doc, "text")), INT_MAX))
		html_add(b, "(nothing yet)");
	html_add(b, "</code></pre>\n<p id=\"end\"></p>\n");
	if (json_is_true(json_object_get(doc, "more")))
		html_printf(b, "<p class=\"muted\">The first %d KiB of it; all of it: <code>rungctl logs %lld --attempt %lld</code>.</p>\n",
			    WEB_LOG_PAGE_BYTES / 1024, id, n);
	else
		html_add(b, "<p class=\"muted\">As its worker sent it, a progress bar as its last drawing; the last 200 lines are "
			    "also on the job page once the attempt has ended.</p>\n");
}

static void log_page(struct hreq *h)
{
	char *q = hreq_query(h, "attempt"), nb[24], limit[24];
	long long n = 0;

	bool bad_job = http_parse_id(h->param[0]) < 0, bad_attempt = q && http_parse_int(q, 1, 2147483647, &n) < 0;

	free(q);
	if (bad_job || bad_attempt) {
		web_message(h, bad_job ? 404 : 400, bad_job ? "Not found" : "Bad request",
			    bad_job ? "no such job" : "attempt must be a number from 1");
		return;
	}
	snprintf(nb, sizeof nb, "%lld", n);
	snprintf(limit, sizeof limit, "%d", WEB_LOG_PAGE_BYTES);
	const char *params[4] = { h->param[0], n ? nb : NULL, "0", limit };
	run_page(h, sql_job_log, 4, params, render_log, "Log", "no such job", NULL);
}

static void job_page(struct hreq *h)
{
	if (http_parse_id(h->param[0]) < 0) {
		web_message(h, 404, "Not found", "no such job");
		return;
	}
	const char *params[2] = { h->param[0], owner_filter(h) };
	run_page(h, sql_web_job, 2, params, render_job, "Job", "no such job", NULL);
}

/* ---- escalations ---- */

static void render_escalations(struct hbuf *b, const struct web_req *w, const json_t *doc)
{
	const json_t *list = json_object_get(doc, "escalations"), *e;
	size_t i;

	html_add(b, "<h1>Escalations</h1>\n");
	filters(b, "/ui/escalations", esc_states, ARRAY_LEN(esc_states), w->filter, NULL, NULL, NULL, NULL, NULL);
	if (json_array_size(list) == 0) {
		html_add(b, "<p class=\"muted\">No escalations.</p>");
		return;
	}
	html_add(b, "<table class=\"escalations\"><thead><tr><th>#</th><th>job</th><th>trigger</th><th>state</th>"
		    "<th>summary</th><th>opened</th></tr></thead><tbody>\n");
	json_array_foreach(list, i, e) {
		long long id = json_integer_value(json_object_get(e, "id"));
		long long job = json_integer_value(json_object_get(e, "job_id"));
		html_printf(b, "<tr><td><a href=\"/ui/escalations/%lld\">%lld</a></td><td><a href=\"/ui/jobs/%lld\">%lld ",
			    id, id, job, job);
		html_esc(b, json_string_value(json_object_get(e, "job_name")));
		html_add(b, "</a></td><td><code>");
		html_esc(b, json_string_value(json_object_get(e, "trigger")));
		html_add(b, "</code></td><td>");
		state_badge(b, json_string_value(json_object_get(e, "state")));
		html_add(b, "</td><td>");
		esc_val(b, json_object_get(e, "summary"));
		html_add(b, "</td><td>");
		esc_time(b, json_object_get(e, "created_at"));
		html_add(b, "</td></tr>\n");
	}
	html_add(b, "</tbody></table>\n");
}

static void escalations_page(struct hreq *h)
{
	char *state;

	if (state_param(h, esc_states, ARRAY_LEN(esc_states), &state) < 0)
		return;
	const char *params[2] = { state, owner_filter(h) };
	run_page(h, sql_web_escalations, 2, params, render_escalations, "Escalations", "no escalations", state);
}

static void render_escalation(struct hbuf *b, const struct web_req *w, const json_t *e)
{
	long long job = json_integer_value(json_object_get(e, "job_id"));

	html_printf(b, "<h1>Escalation %lld ", (long long)json_integer_value(json_object_get(e, "id")));
	state_badge(b, json_string_value(json_object_get(e, "state")));
	html_add(b, "</h1>\n<dl class=\"facts escalation\"><dt>trigger</dt><dd><code class=\"trigger\">");
	html_esc(b, json_string_value(json_object_get(e, "trigger")));
	html_printf(b, "</code></dd><dt>job</dt><dd><a href=\"/ui/jobs/%lld\">%lld ", job, job);
	html_esc(b, json_string_value(json_object_get(e, "job_name")));
	html_add(b, "</a> ");
	state_badge(b, json_string_value(json_object_get(e, "job_state")));
	html_add(b, "</dd>");
	dt(b, "summary", json_object_get(e, "summary"));
	html_add(b, "<dt>opened</dt><dd>");
	esc_time(b, json_object_get(e, "created_at"));
	html_add(b, "</dd>");
	if (json_is_string(json_object_get(e, "note")))
		dt(b, "note", json_object_get(e, "note"));
	html_add(b, "</dl>\n<div class=\"next recommendation\"><strong>Recommendation:</strong> ");
	esc_val(b, json_object_get(e, "recommendation"));
	html_add(b, "</div>\n");
	html_escalation_forms(b, w->h->who.role, e);
	html_add(b, "<h2>Report</h2>\n<article class=\"card report\">\n");
	if (json_is_string(json_object_get(e, "report_markdown")))
		html_markdown(b, json_string_value(json_object_get(e, "report_markdown")));
	else
		html_add(b, "<p class=\"muted\">No report.</p>");
	html_add(b, "</article>\n");
}

static void escalation_page(struct hreq *h)
{
	if (http_parse_id(h->param[0]) < 0) {
		web_message(h, 404, "Not found", "no such escalation");
		return;
	}
	const char *params[2] = { h->param[0], owner_filter(h) };
	run_page(h, sql_web_escalation, 2, params, render_escalation, "Escalation", "no such escalation", NULL);
}

/* ---- GPUs ---- */

/* The workers: their pool and the pools they borrow from (migration 028, in their order; - : none),
 * state, the version each registered with beside this rungd's (a rollout's progress),
 * running attempts, last seen, who drained one and why, and for staff the drain or resume form. */
static void render_workers(struct hbuf *b, const struct web_req *w, const json_t *workers)
{
	const json_t *k;
	size_t i;

	html_add(b, "<h2>Workers</h2>\n");
	if (json_array_size(workers) == 0) {
		html_add(b, "<p class=\"muted\">No workers registered.</p>");
		return;
	}
	html_add(b, "<p class=\"muted\">This rungd runs <code>");
	html_esc(b, rung_version());
	html_add(b, "</code>; a worker's version is the one it registered with (- : it sent none).</p>\n");
	html_add(b, "<table class=\"workers\"><thead><tr><th>worker</th><th>host</th><th>pool</th><th>borrows</th><th>state</th>"
		    "<th>version</th><th>GPUs</th><th>running</th><th>last seen</th><th>drained</th><th></th></tr></thead><tbody>\n");
	json_array_foreach(workers, i, k) {
		const json_t *drain = json_object_get(k, "drain");
		html_add(b, "<tr><td>");
		esc_val(b, json_object_get(k, "name"));
		html_add(b, "</td><td>");
		esc_val(b, json_object_get(k, "host"));
		html_add(b, "</td><td class=\"pool\">");
		esc_val(b, json_object_get(k, "pool"));
		html_add(b, "</td><td class=\"borrow\">");
		{
			char *borrow = pool_list_join(json_object_get(k, "borrow"), ", ", "-");
			html_esc(b, borrow);
			free(borrow);
		}
		html_add(b, "</td><td>");
		state_badge(b, json_string_value(json_object_get(k, "state")));
		html_add(b, "</td><td>");
		esc_val(b, json_object_get(k, "version"));
		html_printf(b, "</td><td>%zu</td><td>", json_array_size(json_object_get(k, "gpus")));
		esc_val(b, json_object_get(k, "running_attempts"));
		html_add(b, "</td><td>");
		esc_time(b, json_object_get(k, "last_seen_at"));
		html_add(b, "</td><td>");
		if (json_is_object(drain)) {
			html_add(b, "by ");
			esc_val(b, json_object_get(drain, "by"));
			if (json_is_string(json_object_get(drain, "note"))) {
				html_add(b, ": ");
				esc_val(b, json_object_get(drain, "note"));
			}
		}
		html_add(b, "</td><td>");
		html_worker_form(b, w->h->who.role, k);
		html_add(b, "</td></tr>\n");
	}
	html_add(b, "</tbody></table>\n");
}

static void render_gpus(struct hbuf *b, const struct web_req *w, const json_t *doc)
{
	const json_t *gpus = json_object_get(doc, "gpus"), *g;
	size_t i;

	html_add(b, "<h1>GPUs</h1>\n");
	if (json_array_size(gpus) == 0) {
		html_add(b, "<p class=\"muted\">No GPUs registered.</p>");
		return;
	}
	html_add(b, "<table class=\"gpus\"><thead><tr><th>GPU</th><th>name</th><th>worker</th><th>pool</th><th>memory</th>"
		    "<th>state</th><th>env faults</th><th>reason</th><th>running job</th><th>released</th><th></th></tr></thead>"
		    "<tbody>\n");
	json_array_foreach(gpus, i, g) {
		const json_t *job = json_object_get(g, "running_job");
		html_add(b, "<tr><td><code>");
		html_esc(b, json_string_value(json_object_get(g, "uuid")));
		html_add(b, "</code></td><td>");
		esc_val(b, json_object_get(g, "name"));
		html_add(b, "</td><td>");
		esc_val(b, json_object_get(g, "worker_name"));
		html_add(b, " ");
		state_badge(b, json_string_value(json_object_get(g, "worker_state")));
		html_add(b, "</td><td class=\"pool\">");
		esc_val(b, json_object_get(g, "worker_pool"));
		html_printf(b, "</td><td>%lld MiB</td><td>", (long long)json_integer_value(json_object_get(g, "memory_total_mib")));
		state_badge(b, json_string_value(json_object_get(g, "state")));
		html_add(b, "</td><td>");
		esc_val(b, json_object_get(g, "env_faults"));
		html_add(b, "</td><td>");
		esc_val(b, json_object_get(g, "reason"));
		html_add(b, "</td><td>");
		if (json_is_integer(job))
			html_printf(b, "<a href=\"/ui/jobs/%lld\">%lld</a>", (long long)json_integer_value(job),
				    (long long)json_integer_value(job));
		else
			html_add(b, "<span class=\"muted\">-</span>");
		html_add(b, "</td><td>");
		esc_time(b, json_object_get(g, "released_at"));
		html_add(b, "</td><td>");
		html_gpu_form(b, w->h->who.role, g);
		html_add(b, "</td></tr>\n");
	}
	html_add(b, "</tbody></table>\n");
	render_workers(b, w, json_object_get(doc, "workers"));
	html_pools_table(b, json_object_get(doc, "pools"));
	html_owners_table(b, json_object_get(doc, "owners"));
}

static void gpus_page(struct hreq *h)
{
	run_page(h, sql_web_gpus, 0, NULL, render_gpus, "GPUs", "no GPUs", NULL);
}

void web_queue(struct hreq *h)
{
	web_gate(h, AUTH_READERS, AUTH_SCOPE_NONE, queue_page, NULL);
}

void web_job(struct hreq *h)
{
	web_gate(h, AUTH_READERS, AUTH_SCOPE_JOB, job_page, NULL);
}

void web_job_log(struct hreq *h)
{
	web_gate(h, AUTH_READERS, AUTH_SCOPE_JOB, log_page, NULL);
}

void web_escalations(struct hreq *h)
{
	web_gate(h, AUTH_STAFF, AUTH_SCOPE_NONE, escalations_page, NULL);
}

void web_escalation(struct hreq *h)
{
	web_gate(h, AUTH_STAFF, AUTH_SCOPE_NONE, escalation_page, NULL);
}

void web_gpus(struct hreq *h)
{
	web_gate(h, AUTH_STAFF, AUTH_SCOPE_NONE, gpus_page, NULL);
}

/* ---- login ---- */

static void login_page(struct hreq *h, int code, const char *next, const char *error)
{
	struct hbuf b = { 0 };

	html_add(&b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Log in - rung</title><style>");
	html_add(&b, page_css);
	html_add(&b, "</style></head><body><header><span class=\"brand\">rung</span></header><main><div class=\"card login\">"
		     "<h1>Log in</h1>");
	if (error) {
		html_add(&b, "<p class=\"err\">");
		html_esc(&b, error);
		html_add(&b, "</p>");
	}
	html_add(&b, "<form method=\"post\" action=\"/ui/login\"><label for=\"token\">API token</label>"
		     "<input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"current-password\" required>"
		     "<input type=\"hidden\" name=\"next\" value=\"");
	html_esc(&b, next && web_safe_next(next) ? next : "/ui/");
	html_add(&b, "\"><button type=\"submit\">Log in</button></form>"
		     "<p class=\"muted\">The token is kept in an HttpOnly cookie for this site only.</p></div>");
	page_close(&b);
	reply_html(h, code, &b);
}

void web_login_form(struct hreq *h)
{
	char *next = hreq_query(h, "next"), *why = hreq_query(h, "why");
	const char *error = NULL;

	/* set by web_gate when it refused a page's cookie (which it cleared) */
	if (why && !strcmp(why, "expired"))
		error = "Your token expired: log in with a new one (an admin creates it).";
	else if (why && !strcmp(why, "refused"))
		error = "Your token was refused (revoked or unknown): log in with another one.";
	login_page(h, 200, next, error);
	free(why);
	free(next);
}

/* The login form's field key (heap; NULL when absent or malformed); the body is h's, read until h
 * is answered. */
static char *login_field(struct hreq *h, const char *key)
{
	size_t len = 0;
	const char *body = hreq_body_text(h, &len);

	return body && len <= WEB_FORM_MAX ? web_form_value(body, len, key) : NULL;
}

/* The token of the form was refused by auth.c: the form again, saying why. */
static void login_refused(struct hreq *h, enum auth_refusal why, const char *expired_at, const char *arg)
{
	char *next = login_field(h, "next"), *msg;

	(void)arg;
	switch (why) {
	case AUTH_REFUSED_EXPIRED:
		msg = xasprintf("This token expired at %s: it no longer works. Ask an admin for a new one.",
				expired_at ? expired_at : "an earlier time");
		break;
	case AUTH_REFUSED_UNKNOWN:
		msg = xstrdup("This token is unknown or revoked.");
		break;
	case AUTH_REFUSED_MISSING:
		msg = xstrdup("This is not an API token (rung_ followed by 64 hex digits).");
		break;
	default:
		abort();
	}
	log_info("web login refused", "why=%s expired_at=%s",
		 why == AUTH_REFUSED_EXPIRED ? "expired" : why == AUTH_REFUSED_UNKNOWN ? "unknown_or_revoked" : "malformed",
		 expired_at ? expired_at : "-");
	login_page(h, why == AUTH_REFUSED_MISSING ? 400 : 401, next, msg);
	free(msg);
	free(next);
}

/* The token of the form is live (h->who): the cookie, kept no longer than the token lives, and
 * back to the page. */
static void login_accepted(struct hreq *h)
{
	char *token = login_field(h, "token"), *next = login_field(h, "next"), *cookie;
	int64_t max_age = WEB_COOKIE_MAX_AGE, left_ms = h->who.expires_ms - util_mono_ms();

	if (h->who.expires_ms != INT64_MAX && left_ms / 1000 + 1 < max_age)
		max_age = left_ms / 1000 + 1;
	cookie = xasprintf(WEB_COOKIE "=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%lld", token ? token : "",
			   (long long)max_age);
	hreq_add_header(h, "Set-Cookie", cookie);
	log_info("web login", "token=%lld name=%s role=%s", h->who.token_id, h->who.name, auth_role_name(h->who.role));
	web_redirect(h, next && web_safe_next(next) ? next : "/ui/");
	free(cookie);
	free(next);
	free(token);
}

void web_login(struct hreq *h)
{
	size_t len = 0;
	char *token = NULL, *next = NULL;

	hreq_body_text(h, &len);
	if (len > WEB_FORM_MAX) {
		login_page(h, 413, NULL, "The form is too large.");
		goto out;
	}
	token = login_field(h, "token");
	if (!token || !token_ok(token)) {
		next = login_field(h, "next");
		login_page(h, 400, next, "Enter an API token (printable characters, no spaces).");
		goto out;
	}
	/* the token is checked as a page's would be (any role may log in; a page says what its role
	 * may read), and hashed before auth_dispatch_as returns */
	auth_dispatch_as(h, token, AUTH_ANY, AUTH_SCOPE_NONE, login_accepted, login_refused, NULL);
out:
	free(token);
	free(next);
}

void web_logout(struct hreq *h)
{
	hreq_add_header(h, "Set-Cookie", WEB_COOKIE "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
	web_redirect(h, "/ui/login");
}
