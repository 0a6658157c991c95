/* The /ui/tokens page and its forms (web_tokens.h): the table from sql/web_tokens.sql, and create,
 * revoke and limit through the token API's statements and checks (api_tokens.c). Owns the one
 * request in flight per page or form, and a new secret until its page is answered; the frame is
 * web.c's, the same-site rule web_act.c's. */
#include "web_tokens.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_tokens.h"
#include "app.h"
#include "auth.h"
#include "db.h"
#include "expiry.h"
#include "html.h"
#include "http.h"
#include "lease.h"
#include "log.h"
#include "pool.h"
#include "sql.h"
#include "util.h"
#include "web.h"
#include "web_act.h"

#define TOKENS_PATH "/ui/tokens"
#define TOKENS_FORM_MAX 4096 /* a form: a role, a name of AUTH_NAME_MAX bytes %XX-encoded, a number or two */
#define DAY_S 86400LL
#define MUTED_DASH "<span class=\"muted\">-</span>"

static const char *const roles[] = { "submitter", "worker", "support", "admin" };

/* One create between db_exec and its callback: the secret lives until its page is answered. */
struct create_req {
	struct hreq *h;
	char secret[AUTH_TOKEN_LEN + 1];
};

/* ---- rendering (pure) ---- */

/* A form field's text without the blanks around it: its start, and its length in *n (NULL reads
 * as ""). */
static const char *trimmed(const char *text, size_t *n)
{
	const char *s = text ? text : "";

	while (isspace((unsigned char)*s))
		s++;
	*n = strlen(s);
	while (*n > 0 && isspace((unsigned char)s[*n - 1]))
		(*n)--;
	return s;
}

json_t *web_tokens_limit_value(const char *text)
{
	size_t n;
	const char *s = trimmed(text, &n), *p;
	char *end;
	long long v;

	if (n == 0)
		return json_null();
	p = s + (*s == '-' || *s == '+');
	for (const char *q = p; q < s + n; q++)
		if (!isdigit((unsigned char)*q))
			return json_string(text);
	if (p == s + n || s + n - p > 18) /* a sign alone; or past any limit, and past long long */
		return json_string(text);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end != s + n)
		return json_string(text);
	return json_integer(v);
}

json_t *web_tokens_hours_value(const char *text)
{
	size_t n;
	const char *s = trimmed(text, &n);
	char *end, *copy;
	double v;
	bool ok;

	if (n == 0)
		return json_null();
	if (strspn(s, "0123456789.") != n) /* digits and a point only: no sign, exponent, inf or nan */
		return json_string(text);
	copy = xasprintf("%.*s", (int)n, s);
	errno = 0;
	v = strtod(copy, &end);
	ok = !errno && end == copy + n && end != copy && isfinite(v);
	free(copy);
	if (!ok)
		return json_string(text);
	return v < 1e15 && v == (double)(long long)v ? json_integer((json_int_t)v) : json_real(v); /* the cast only in range */
}

int web_tokens_expires_days(const char *text, long long *seconds)
{
	size_t n;
	const char *s = trimmed(text, &n);
	long long days = 0;

	*seconds = 0;
	if (n == 0)
		return 0;
	if (n > 6) /* past 3650 whatever the digits */
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		days = days * 10 + (s[i] - '0');
	}
	if (days < 1 || days * DAY_S > EXPIRY_MAX_S)
		return -1;
	*seconds = days * DAY_S;
	return 0;
}

/* The id of a TOKEN as text ("?" when absent). */
static void id_text(const json_t *t, char *out, size_t n)
{
	const json_t *id = json_object_get(t, "id");

	if (json_is_integer(id))
		snprintf(out, n, "%lld", (long long)json_integer_value(id));
	else
		snprintf(out, n, "?");
}

static void create_form(struct hbuf *b)
{
	html_add(b, "<h2>Create a token</h2>\n<form method=\"post\" class=\"act create\" action=\"" TOKENS_PATH "\">"
		    "<label for=\"role\">role</label><select id=\"role\" name=\"role\">");
	for (size_t i = 0; i < ARRAY_LEN(roles); i++)
		html_printf(b, "<option value=\"%s\">%s</option>", roles[i], roles[i]);
	html_printf(b, "</select><label for=\"name\">name</label><input type=\"text\" id=\"name\" name=\"name\" "
		       "maxlength=\"%d\" placeholder=\"optional: ROLE-ID\"><label for=\"expires_in_days\">expires in (days)</label>"
		       "<input type=\"number\" id=\"expires_in_days\" name=\"expires_in_days\" min=\"1\" max=\"%lld\" "
		       "placeholder=\"optional: never\"><button type=\"submit\">Create</button></form>\n"
		       "<p class=\"muted\">A name is 1 to %d characters of A-Z a-z 0-9 . _ @ -, not all digits, and is never reused; it is "
		       "the owner of the token's jobs. A token given a number of days (1 to %lld) stops working by itself that long "
		       "after it is created; left empty, it never expires. The secret is shown once, on the next page.</p>\n",
		    AUTH_NAME_MAX, EXPIRY_MAX_S / DAY_S, AUTH_NAME_MAX, EXPIRY_MAX_S / DAY_S);
}

/* The forms of a token not revoked: its limit (empty: none), its limit in one pool (a pool name and
 * a limit, empty: none there; migration 034), its GPU-hour quota (hours, 12.5 too; empty: none; and its
 * window in days; migration 035), its quota in one pool (037), its expiry (days from now; empty: never)
 * and revoke. */
static void row_forms(struct hbuf *b, const char *id, const json_t *t)
{
	const json_t *max = json_object_get(t, "max_running"), *quota = json_object_get(t, "gpu_hours");
	long long days = json_is_integer(json_object_get(t, "gpu_hours_days"))
				 ? (long long)json_integer_value(json_object_get(t, "gpu_hours_days"))
				 : 7;
	char hours[32] = "";

	if (json_is_number(quota))
		snprintf(hours, sizeof hours, "%g", json_number_value(quota));
	html_printf(b, "<form method=\"post\" class=\"act limits\" action=\"" TOKENS_PATH "/%s/limits\">"
		       "<input type=\"number\" name=\"max_running\" min=\"0\" max=\"%d\" placeholder=\"none\" "
		       "aria-label=\"most jobs running at once (empty: none; 0: paused)\" value=\"",
		    id, API_TOKENS_MAX_RUNNING);
	if (json_is_integer(max))
		html_printf(b, "%lld", (long long)json_integer_value(max));
	html_printf(b, "\"><button type=\"submit\">Set limit</button></form>"
		       "<form method=\"post\" class=\"act pool-limits\" action=\"" TOKENS_PATH "/%s/limits\">"
		       "<input type=\"text\" name=\"pool\" required maxlength=\"%d\" placeholder=\"pool\" "
		       "aria-label=\"pool\"><input type=\"number\" name=\"max_running\" min=\"0\" max=\"%d\" "
		       "placeholder=\"none\" aria-label=\"most jobs of that pool running at once (empty: none; 0: paused)\">"
		       "<button type=\"submit\">Set pool limit</button></form>"
		       "<form method=\"post\" class=\"act quota\" action=\"" TOKENS_PATH "/%s/limits\">"
		       "<input type=\"number\" name=\"gpu_hours\" min=\"0\" step=\"any\" max=\"%d\" placeholder=\"no quota\" "
		       "aria-label=\"GPU hours (empty: no quota)\" value=\"%s\"><input type=\"number\" name=\"gpu_hours_days\" "
		       "min=\"%d\" max=\"%d\" placeholder=\"days\" aria-label=\"over the last days\" value=\"%lld\">"
		       "<button type=\"submit\">Set quota</button></form>"
		       "<form method=\"post\" class=\"act pool-quota\" action=\"" TOKENS_PATH "/%s/limits\">"
		       "<input type=\"text\" name=\"pool\" required maxlength=\"%d\" placeholder=\"pool\" "
		       "aria-label=\"pool\"><input type=\"number\" name=\"gpu_hours\" min=\"0\" step=\"any\" max=\"%d\" "
		       "placeholder=\"no quota\" aria-label=\"GPU hours of that pool (empty: no quota there)\">"
		       "<button type=\"submit\">Set pool quota</button></form>"
		       "<form method=\"post\" class=\"act expiry\" action=\"" TOKENS_PATH "/%s/expiry\">"
		       "<input type=\"number\" name=\"expires_in_days\" min=\"1\" max=\"%lld\" placeholder=\"never\" "
		       "aria-label=\"expires in (days from now; empty: never)\"><button type=\"submit\">Set expiry</button></form>"
		       "<form method=\"post\" class=\"act revoke\" action=\"" TOKENS_PATH "/%s/revoke\">"
		       "<button type=\"submit\">Revoke</button></form>",
		    id, POOL_NAME_MAX, API_TOKENS_MAX_RUNNING, id, API_TOKENS_MAX_GPU_HOURS, hours, API_TOKENS_QUOTA_DAYS_MIN,
		    API_TOKENS_QUOTA_DAYS_MAX, days, id, POOL_NAME_MAX, API_TOKENS_MAX_GPU_HOURS, id, EXPIRY_MAX_S / DAY_S, id);
}

/* A token's expiry cell: "never", the instant, or "expired" and the instant. */
static void expires_cell(struct hbuf *b, const json_t *t)
{
	const json_t *at = json_object_get(t, "expires_at");

	if (!json_is_string(at)) {
		html_add(b, "never");
	} else if (json_is_true(json_object_get(t, "expired"))) {
		html_add(b, "<strong>expired</strong> ");
		html_esc_time(b, at, MUTED_DASH);
	} else {
		html_esc_time(b, at, MUTED_DASH);
	}
}

static void token_row(struct hbuf *b, const json_t *t, long long self_id)
{
	const json_t *max = json_object_get(t, "max_running");
	bool revoked = json_is_true(json_object_get(t, "revoked"));
	bool expired = json_is_true(json_object_get(t, "expired"));
	char id[32];

	id_text(t, id, sizeof id);
	html_printf(b, "<tr class=\"%s\"><td>%s</td><td>", revoked ? "revoked" : expired ? "expired" : "live", id);
	html_esc_json(b, json_object_get(t, "name"), MUTED_DASH);
	if (self_id > 0 && json_integer_value(json_object_get(t, "id")) == self_id)
		html_add(b, " <span class=\"muted\">(you)</span>");
	html_add(b, "</td><td>");
	html_esc_json(b, json_object_get(t, "role"), MUTED_DASH);
	html_add(b, "</td><td>");
	html_esc_time(b, json_object_get(t, "created_at"), MUTED_DASH);
	html_add(b, "</td><td>");
	if (revoked)
		html_esc_time(b, json_object_get(t, "revoked_at"), "yes");
	else
		html_add(b, MUTED_DASH);
	html_add(b, "</td><td class=\"expires\">");
	expires_cell(b, t);
	html_add(b, "</td><td class=\"limit\">");
	if (json_is_integer(max))
		html_printf(b, "%lld%s", (long long)json_integer_value(max), json_integer_value(max) == 0 ? " (paused)" : "");
	else
		html_add(b, "none");
	if (json_is_object(json_object_get(t, "pool_max_running"))) { /* migration 034: set with rungctl token limit --pool */
		char *pools = pool_limits_text(json_object_get(t, "pool_max_running"), ", ", "");
		html_add(b, "<br><span class=\"pool-limits\">per pool: ");
		html_esc(b, pools);
		html_add(b, "</span>");
		free(pools);
	}
	if (json_is_number(json_object_get(t, "gpu_hours"))) /* migration 035: a GPU-hour quota */
		html_printf(b, "<br><span class=\"quota\">%g GPU hours per %lld days</span>",
			    json_number_value(json_object_get(t, "gpu_hours")),
			    (long long)json_integer_value(json_object_get(t, "gpu_hours_days")));
	if (json_is_object(json_object_get(t, "pool_gpu_hours"))) { /* migration 037: quotas per pool, the same window */
		char *pools = pool_limits_text(json_object_get(t, "pool_gpu_hours"), ", ", "");
		html_add(b, "<br><span class=\"pool-quota\">GPU hours per pool: ");
		html_esc(b, pools);
		html_printf(b, " per %lld days</span>", (long long)json_integer_value(json_object_get(t, "gpu_hours_days")));
		free(pools);
	}
	html_add(b, "</td><td class=\"running\">");
	html_esc_json(b, json_object_get(t, "running"), "0");
	html_add(b, "</td><td>");
	if (revoked)
		html_add(b, MUTED_DASH);
	else
		row_forms(b, id, t);
	html_add(b, "</td></tr>\n");
}

void web_tokens_render(struct hbuf *b, const json_t *doc, long long self_id)
{
	const json_t *tokens = json_object_get(doc, "tokens"), *t;
	size_t i;

	html_printf(b, "<h1>Tokens</h1>\n<p class=\"muted\">The API tokens and the roles they carry (as <code>rungctl token "
		       "list</code> shows them). A limit caps how many of a token's jobs run at once: empty for none, 0 pauses "
		       "them; jobs running when it is lowered run to their end. A limit per pool (<code>rungctl token limit ID "
		       "--pool NAME --max-running N</code>) caps its jobs of that pool alone, beside it. A revoked token is "
		       "refused at once on this "
		       "server, within %d s on the others (revoking your own logs you out); an expired one on every server from "
		       "the instant it expires.</p>\n",
		    AUTH_CACHE_TTL_MS / 1000);
	create_form(b);
	html_add(b, "<h2>All tokens</h2>\n");
	if (json_array_size(tokens) == 0) {
		html_add(b, "<p class=\"muted\">No tokens.</p>\n");
		return;
	}
	html_add(b, "<table class=\"tokens\"><thead><tr><th>id</th><th>name</th><th>role</th><th>created</th>"
		    "<th>revoked</th><th>expires</th><th>max running</th><th>running now</th><th></th></tr></thead><tbody>\n");
	json_array_foreach(tokens, i, t)
		token_row(b, t, self_id);
	html_add(b, "</tbody></table>\n");
}

void web_tokens_render_created(struct hbuf *b, const json_t *token, const char *secret)
{
	html_add(b, "<h1>Token created</h1>\n<p class=\"next\"><strong>Copy the token now: it is shown only this "
		    "once.</strong> rung keeps only its SHA-256, so neither this page nor <code>rungctl</code> can show it again; a lost "
		    "token is revoked and another one created.</p>\n<p><code class=\"secret\">");
	html_esc(b, secret);
	html_add(b, "</code></p>\n<table class=\"kv\"><tr><th>id</th><td>");
	html_esc_json(b, json_object_get(token, "id"), MUTED_DASH);
	html_add(b, "</td></tr><tr><th>name</th><td>");
	html_esc_json(b, json_object_get(token, "name"), MUTED_DASH);
	html_add(b, "</td></tr><tr><th>role</th><td>");
	html_esc_json(b, json_object_get(token, "role"), MUTED_DASH);
	html_add(b, "</td></tr><tr><th>expires</th><td class=\"expires\">");
	expires_cell(b, token);
	html_add(b, "</td></tr></table>\n<p><a href=\"" TOKENS_PATH "\">Back to the tokens</a></p>\n");
}

/* ---- answers ---- */

/* A refusal page: code, the field it names (may be NULL) and why, escaped, and a link back. */
static void refuse(struct hreq *h, int code, const char *title, const char *field, const char *msg)
{
	struct hbuf b = { 0 };
	char *page;

	html_add(&b, "<h1>");
	html_esc(&b, title);
	html_add(&b, "</h1>\n<p class=\"err\">");
	if (field) {
		html_add(&b, "<code class=\"field\">");
		html_esc(&b, field);
		html_add(&b, "</code>: ");
	}
	html_esc(&b, msg);
	html_add(&b, "</p>\n<p><a href=\"" TOKENS_PATH "\">Back to the tokens</a></p>\n");
	page = html_take(&b);
	web_page(h, code, title, page);
	free(page);
}

/* A statement that failed: logged, and a 503 page. Returns true when res is not a result to read. */
static bool db_failed(struct hreq *h, PGresult *res, const char *err, const char *what)
{
	if (res && PQresultStatus(res) == PGRES_TUPLES_OK)
		return false;
	log_warn("web tokens failed", "action=%s path=%s error=\"%s\"", what, h->path,
		 res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?" : err ? err : "?");
	web_message(h, 503, "Database unavailable", "The database could not answer; nothing was changed. Try again.");
	return true;
}

/* The statement's one JSON value (new reference), or NULL when it returned none. */
static json_t *db_doc(PGresult *res)
{
	if (PQntuples(res) == 0 || PQgetisnull(res, 0, 0))
		return NULL;
	return json_loads(PQgetvalue(res, 0, 0), 0, NULL);
}

static void not_found(struct hreq *h)
{
	char *msg = xasprintf("no such token: %s", h->param[0]);

	refuse(h, 404, "Not found", NULL, msg);
	free(msg);
}

/* The form's value of key (heap; NULL when absent or malformed). Answers 413 and returns -1 when
 * the body is over TOKENS_FORM_MAX. */
static int form_value(struct hreq *h, const char *key, char **out)
{
	size_t len = 0;
	const char *body = hreq_body_text(h, &len);

	*out = NULL;
	if (len > TOKENS_FORM_MAX) {
		char *msg = xasprintf("The form is %zu bytes, over the %d-byte limit.", len, TOKENS_FORM_MAX);
		web_message(h, 413, "Too large", msg);
		free(msg);
		return -1;
	}
	*out = body ? web_form_value(body, len, key) : NULL;
	return 0;
}

/* Whether the form names key at all (with a value that may not decode). */
static bool form_has(struct hreq *h, const char *key)
{
	size_t len = 0, kl = strlen(key);
	const char *body = hreq_body_text(h, &len);

	for (size_t i = 0; body && i < len;) {
		size_t j = i;
		while (j < len && body[j] != '&')
			j++;
		if (j - i >= kl && memcmp(body + i, key, kl) == 0 && (j - i == kl || body[i + kl] == '='))
			return true;
		i = j + 1;
	}
	return false;
}

static void on_list(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	struct hbuf b = { 0 };
	json_t *doc;
	char *page;

	if (db_failed(h, res, err, "list"))
		return;
	doc = db_doc(res);
	web_tokens_render(&b, doc, h->who.token_id);
	page = html_take(&b);
	web_page(h, 200, "Tokens", page);
	free(page);
	json_decref(doc);
}

static void tokens_page(struct hreq *h)
{
	db_exec(h->app->db, sql_web_tokens, 0, NULL, on_list, h);
}

static void on_created(PGresult *res, const char *err, void *arg)
{
	struct create_req *c = arg;
	struct hreq *h = c->h;
	struct hbuf b = { 0 };
	json_t *doc = NULL, *tok;
	char *page = NULL;

	if (db_failed(h, res, err, "create"))
		goto out;
	doc = db_doc(res);
	tok = json_object_get(doc, "token");
	if (!json_is_object(tok)) {
		refuse(h, 409, "Name taken", "name", "a token with this name exists (names are never reused)");
		goto out;
	}
	log_info("token created", "token=%lld name=%s role=%s expires_at=%s by=%s via=web",
		 (long long)json_integer_value(json_object_get(tok, "id")), json_string_value(json_object_get(tok, "name")) ?: "?",
		 json_string_value(json_object_get(tok, "role")) ?: "?",
		 json_string_value(json_object_get(tok, "expires_at")) ?: "never", h->who.name);
	web_tokens_render_created(&b, tok, c->secret);
	page = html_take(&b);
	web_page(h, 200, "Token created", page);
	memset(page, 0, strlen(page));
out:
	free(page);
	json_decref(doc);
	memset(c->secret, 0, sizeof c->secret);
	free(c);
}

static void create(struct hreq *h)
{
	char *role = NULL, *name = NULL, *days = NULL, *msg = NULL, hash[AUTH_HASH_HEX + 1], secs[32];
	const char *r, *n, *field;
	long long expires_in_s = 0;
	json_t *body = NULL;
	struct create_req *c;

	if (form_value(h, "role", &role) < 0 || form_value(h, "name", &name) < 0 ||
	    form_value(h, "expires_in_days", &days) < 0)
		goto out;
	if (name && !*name) { /* the field left empty: ROLE-ID */
		free(name);
		name = NULL;
	}
	/* absent or empty: never; anything else but whole days in range, an undecodable value too, is
	 * named: a token meant to expire is never made one that does not */
	if ((!days && form_has(h, "expires_in_days")) || web_tokens_expires_days(days, &expires_in_s) < 0) {
		char *why = xasprintf("must be a whole number of days from 1 to %lld, or empty for a token that never expires",
				      EXPIRY_MAX_S / DAY_S);
		refuse(h, 400, "Bad request", "expires_in_days", why);
		free(why);
		goto out;
	}
	/* unchecked strings: bytes that are not UTF-8 reach the checks, which refuse them by name */
	body = json_object();
	json_object_set_new(body, "role", role ? json_string_nocheck(role) : json_null());
	json_object_set_new(body, "name", name ? json_string_nocheck(name) : json_null());
	json_object_set_new(body, "expires_in_s", expires_in_s ? json_integer(expires_in_s) : json_null());
	field = api_tokens_check_create(body, &r, &n, &expires_in_s, &msg);
	if (field) {
		refuse(h, 400, "Bad request", field, msg);
		goto out;
	}
	c = xcalloc(1, sizeof *c);
	c->h = h;
	if (auth_token_new(c->secret) < 0) {
		free(c);
		web_message(h, 500, "No token", "The server found no randomness for a token; nothing was created.");
		goto out;
	}
	auth_hash_hex(c->secret, hash);
	{
		const char *params[4] = { n, r, hash, api_tokens_expires_param(expires_in_s, secs) };
		db_exec(h->app->db, sql_token_create, 4, params, on_created, c);
	}
out:
	json_decref(body);
	free(msg);
	free(days);
	free(name);
	free(role);
}

static void on_revoked(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	json_t *doc;

	if (db_failed(h, res, err, "revoke"))
		return;
	doc = db_doc(res);
	if (!doc) {
		not_found(h);
		return;
	}
	auth_forget(h->app->auth, json_integer_value(json_object_get(doc, "id")));
	log_info("token revoked", "token=%s by=%s via=web", h->param[0], h->who.name);
	web_redirect(h, TOKENS_PATH);
	json_decref(doc);
}

static void revoke(struct hreq *h)
{
	const char *params[1] = { h->param[0] };

	db_exec(h->app->db, sql_token_revoke, 1, params, on_revoked, h);
}

static void on_limited(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	json_t *doc;

	if (db_failed(h, res, err, "limits"))
		return;
	doc = db_doc(res);
	if (!doc) {
		not_found(h);
		return;
	}
	api_tokens_log_limits(h->param[0], doc, h->who.name, "web");
	lease_announce(h->app->lease); /* as api_tokens_limits: a raised or lifted limit may let jobs run */
	web_redirect(h, TOKENS_PATH);
	json_decref(doc);
}

/* Sets the token's limits to body (checked; borrowed): sql/token_set_limit.sql, answered by on_limited. */
static void send_limits(struct hreq *h, const json_t *body)
{
	char *text = json_dumps(body, JSON_COMPACT);
	const char *params[2] = { h->param[0], text };

	db_exec(h->app->db, sql_token_set_limit, 2, params, on_limited, h);
	free(text);
}

/* The quota form (migration 035): gpu_hours= (hours, 12.5 too; empty: no quota) and gpu_hours_days= (1 to
 * 90; empty: as it was); the pool quota form (037): pool= and gpu_hours= (that pool's quota, merged
 * into the others), checked as the API checks its body (api_tokens_check_limits). */
static void quota_form(struct hreq *h)
{
	char *hours = NULL, *days = NULL, *pool = NULL, *msg = NULL;
	const char *field;
	json_t *body = NULL;

	if (form_value(h, "gpu_hours", &hours) < 0 || form_value(h, "gpu_hours_days", &days) < 0 ||
	    form_value(h, "pool", &pool) < 0)
		goto out;
	if (!hours) { /* not decodable: never read as "no quota", which the empty field means */
		refuse(h, 400, "Bad request", "gpu_hours", "must be a number of GPU hours (12, 12.5), or empty (no quota)");
		goto out;
	}
	if (form_has(h, "pool") && !pool_name_ok(pool)) {
		refuse(h, 400, "Bad request", "pool", "must be a pool name: " POOL_NAME_RULE);
		goto out;
	}
	body = pool ? json_pack("{s:{s:o}}", "pool_gpu_hours", pool, web_tokens_hours_value(hours))
		    : json_pack("{s:o}", "gpu_hours", web_tokens_hours_value(hours));
	if (days && *days)
		json_object_set_new(body, "gpu_hours_days", web_tokens_limit_value(days));
	field = api_tokens_check_limits(body, &msg);
	if (field) {
		refuse(h, 400, "Bad request", field, msg);
		goto out;
	}
	send_limits(h, body);
out:
	json_decref(body);
	free(msg);
	free(hours);
	free(days);
	free(pool);
}

static void limits(struct hreq *h)
{
	char *text = NULL, *pool = NULL;
	json_t *v = NULL, *body = NULL;

	if (form_has(h, "gpu_hours")) {
		quota_form(h);
		return;
	}
	if (form_value(h, "max_running", &text) < 0 || form_value(h, "pool", &pool) < 0)
		goto out;
	if (form_has(h, "pool") && !pool_name_ok(pool)) { /* the pool form's (migration 034) */
		refuse(h, 400, "Bad request", "pool", "must be a pool name: " POOL_NAME_RULE);
		goto out;
	}
	if (!text) { /* absent or not decodable: never read as "no limit", which the empty field means */
		refuse(h, 400, "Bad request", "max_running",
		       "is required: an integer, or empty for no limit (the form sent none, or one that could not be read)");
		goto out;
	}
	v = web_tokens_limit_value(text);
	if (!api_tokens_limit_ok(v)) {
		char *msg = xasprintf("must be an integer from 0 (none of its jobs starts) to %d, or empty (no limit)",
				      API_TOKENS_MAX_RUNNING);
		refuse(h, 400, "Bad request", "max_running", msg);
		free(msg);
		goto out;
	}
	/* the limit over every pool, the per-pool ones staying as they are; or the one in that pool */
	body = pool ? json_pack("{s:{s:O}}", "pool_max_running", pool, v) : json_pack("{s:O}", "max_running", v);
	send_limits(h, body);
out:
	json_decref(body);
	json_decref(v);
	free(text);
	free(pool);
}

static void on_expiry_set(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	json_t *doc, *tok;

	if (db_failed(h, res, err, "expiry"))
		return;
	doc = db_doc(res);
	if (!doc) {
		not_found(h);
		return;
	}
	tok = json_object_get(doc, "token");
	if (strcmp(json_string_value(json_object_get(doc, "status")) ?: "", "revoked") == 0) {
		web_message(h, 409, "Revoked", "This token was revoked: a revoked token stays revoked. Create a new one.");
		json_decref(doc);
		return;
	}
	auth_forget(h->app->auth, json_integer_value(json_object_get(tok, "id"))); /* its cached expiry is stale */
	log_info("token expiry set", "token=%s expires_at=%s by=%s via=web", h->param[0],
		 json_string_value(json_object_get(tok, "expires_at")) ?: "never", h->who.name);
	web_redirect(h, TOKENS_PATH);
	json_decref(doc);
}

/* As POST /v1/tokens/{id}/expiry: expires_in_days whole days from now (empty: never). */
static void expiry(struct hreq *h)
{
	char *days = NULL, secs[32];
	long long expires_in_s = 0;

	if (form_value(h, "expires_in_days", &days) < 0)
		goto out;
	/* absent or undecodable (NULL) is refused, never read as the empty field's "never" */
	if (!days || web_tokens_expires_days(days, &expires_in_s) < 0) {
		char *why = xasprintf("must be a whole number of days from 1 to %lld, or empty for a token that never expires",
				      EXPIRY_MAX_S / DAY_S);
		refuse(h, 400, "Bad request", "expires_in_days", why);
		free(why);
		goto out;
	}
	{
		const char *params[2] = { h->param[0], api_tokens_expires_param(expires_in_s, secs) };
		db_exec(h->app->db, sql_token_set_expiry, 2, params, on_expiry_set, h);
	}
out:
	free(days);
}

/* ---- route handlers ---- */

/* A POST: checked for its site, then its id (when it names one), then the caller (admins). */
static void post_enter(struct hreq *h, bool by_id, void (*fn)(struct hreq *h))
{
	if (!web_act_same_site(hreq_header(h, "Origin"), hreq_header(h, "Sec-Fetch-Site"), hreq_header(h, "Host"),
			       hreq_header(h, "X-Forwarded-Host"))) {
		log_warn("web tokens refused", "path=%s origin=%s", h->path, hreq_header(h, "Origin") ?: "-");
		web_message(h, 403, "Forbidden", "This form was sent from another site; nothing was changed.");
		return;
	}
	if (by_id && http_parse_id(h->param[0]) < 0) {
		not_found(h);
		return;
	}
	web_gate(h, AUTH_ADMIN, AUTH_SCOPE_NONE, fn, TOKENS_PATH);
}

void web_tokens_page(struct hreq *h)
{
	web_gate(h, AUTH_ADMIN, AUTH_SCOPE_NONE, tokens_page, NULL);
}

void web_tokens_create(struct hreq *h)
{
	post_enter(h, false, create);
}

void web_tokens_revoke(struct hreq *h)
{
	post_enter(h, true, revoke);
}

void web_tokens_limits(struct hreq *h)
{
	post_enter(h, true, limits);
}

void web_tokens_expiry(struct hreq *h)
{
	post_enter(h, true, expiry);
}
