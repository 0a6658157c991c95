/* The /ui/plan page (web_plan.h): its form, the reading and checking of what was typed (as a submit
 * reads a YAML body), one sql/plan_fleet.sql on the loop per POST and the rendering of
 * api_plan_build's document. Owns the request between db_exec and its callback; stores nothing.
 * The page frame is web.c's, the same-site rule web_act.c's, the decision api_plan.c's. */
#include "web_plan.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api_jobs.h"
#include "api_plan.h"
#include "api_profiles.h"
#include "app.h"
#include "atconfig.h"
#include "auth.h"
#include "db.h"
#include "html.h"
#include "http.h"
#include "log.h"
#include "memmodel.h"
#include "pool.h"
#include "sql.h"
#include "util.h"
#include "web.h"
#include "web_act.h"

#define PLAN_PATH "/ui/plan"
#define PLAN_ROLES (AUTH_SUBMITTER | AUTH_STAFF) /* POST /v1/plan's */
#define MUTED_DASH "<span class=\"muted\">-</span>"

/* One POST /ui/plan between db_exec and its callback. */
struct plan_page {
	struct hreq *h;
	char *text;       /* the config as typed (line ends LF), owned: the answer shows it again */
	char *gpu;        /* gpu_mib as typed, owned; NULL when not given */
	char *pool;       /* the worker pool as typed, owned; NULL when not given (the default pool) */
	json_t *config;   /* the AI Toolkit file parsed from text */
	json_t *recovery; /* RECOVERY, defaults filled (api_jobs_check_submit) */
	const char *kind; /* static (atconfig_kind) */
	char arch[API_PROFILES_ARCH_MAX + 1];
	long extra_mib;   /* gpu_mib, 0 when not given */
};

static void plan_page_free(struct plan_page *p)
{
	if (!p)
		return;
	json_decref(p->recovery);
	json_decref(p->config);
	free(p->gpu);
	free(p->pool);
	free(p->text);
	free(p);
}

/* ---- rendering (pure) ---- */

void web_plan_render_form(struct hbuf *b, const char *config, const char *gpu_mib, const char *pool,
			  const char *field, const char *message)
{
	html_add(b, "<h1>Plan a submit</h1>\n<p class=\"muted\">What a first attempt of this config would run on each GPU "
		    "size of the fleet, from the memory history rung has today, as <code>rungctl plan</code> says it. "
		    "Nothing is submitted or stored.</p>\n");
	if (message) {
		html_add(b, "<p class=\"err\">");
		if (field && *field) {
			html_add(b, "<code class=\"field\">");
			html_esc(b, field);
			html_add(b, "</code>: ");
		}
		html_esc(b, message);
		html_add(b, "</p>\n");
	}
	/* the newline after <textarea> is dropped by the parser, so a config's own first line is kept */
	html_add(b, "<form class=\"plan\" method=\"post\" action=\"" PLAN_PATH "\">"
		    "<label for=\"config\">AI Toolkit config (YAML or JSON)</label>"
		    "<textarea id=\"config\" name=\"config\" rows=\"20\" spellcheck=\"false\" required>\n");
	html_esc(b, config);
	html_printf(b, "</textarea><label for=\"gpu_mib\">Also ask about a GPU of (MiB, optional)</label>"
		       "<input type=\"number\" id=\"gpu_mib\" name=\"gpu_mib\" min=\"1\" max=\"%d\" value=\"",
		    API_PROFILES_GPU_MIB_MAX);
	html_esc(b, gpu_mib);
	/* the sizes and the largest GPU are the pool's (its workers' and its borrowers'), as a lease weighs them */
	html_printf(b, "\"><label for=\"pool\">Worker pool (optional, default <code>" POOL_DEFAULT "</code>)</label>"
		       "<input type=\"text\" id=\"pool\" name=\"pool\" maxlength=\"%d\" placeholder=\"" POOL_DEFAULT
		       "\" value=\"", POOL_NAME_MAX);
	html_esc(b, pool);
	html_add(b, "\"><button type=\"submit\">Plan</button></form>\n");
}

/* "21.5 GiB, fits" / "does not fit" / "unknown" of a PREDICTION, or "no history" when there is none,
 * as rungctl plan's table says it. */
static void estimate_cell(struct hbuf *b, const json_t *est)
{
	const json_t *peak = json_object_get(est, "peak_mib"), *fits = json_object_get(est, "fits");
	const char *verdict = json_is_true(fits) ? "fits" : json_is_false(fits) ? "does not fit" : "unknown";

	if (!json_is_object(est)) {
		html_add(b, "<span class=\"muted\">no history</span>");
		return;
	}
	if (json_is_integer(peak))
		html_printf(b, "%.1f GiB, ", (double)json_integer_value(peak) / 1024.0);
	html_add(b, verdict);
}

/* The rung names of a size joined with " + ", each escaped. */
static void rung_names(struct hbuf *b, const json_t *rungs)
{
	const json_t *r;
	size_t i;

	json_array_foreach(rungs, i, r) {
		html_add(b, i ? " + <code>" : "<code>");
		html_esc_json(b, r, NULL);
		html_add(b, "</code>");
	}
}

static void gpu_mib_text(struct hbuf *b, const json_t *size)
{
	html_esc_json(b, json_object_get(size, "gpu_mib"), "?");
}

/* The table row of one size. */
static void size_row(struct hbuf *b, const json_t *s)
{
	const char *action = json_string_value(json_object_get(s, "action"));
	long long drained = json_integer_value(json_object_get(s, "draining_gpus"));

	html_add(b, "<tr><td>");
	gpu_mib_text(b, s);
	html_add(b, "</td><td>");
	if (!json_is_true(json_object_get(s, "in_fleet"))) {
		html_add(b, "<span class=\"muted\">not in the fleet</span>");
	} else {
		html_esc_json(b, json_object_get(s, "gpus"), "0");
		if (drained > 0)
			html_printf(b, " <span class=\"muted\">(+%lld drained)</span>", drained);
	}
	html_add(b, "</td><td>");
	estimate_cell(b, json_object_get(s, "target_estimate"));
	html_add(b, "</td><td class=\"action\">");
	if (action && !strcmp(action, "start_lower")) {
		html_add(b, "start lower: ");
		rung_names(b, json_object_get(s, "rungs"));
	} else if (action && !strcmp(action, "requeue_bigger")) {
		html_add(b, "wait for &ge; ");
		html_esc_json(b, json_object_get(s, "min_gpu_memory_mib"), "a bigger GPU's");
		html_add(b, " MiB");
	} else if (action && !strcmp(action, "as_is")) {
		html_add(b, "as submitted");
	} else {
		html_esc(b, action ? action : "?");
	}
	html_add(b, "</td><td>");
	if (action && !strcmp(action, "start_lower"))
		estimate_cell(b, json_object_get(s, "estimate"));
	else
		html_add(b, MUTED_DASH);
	html_add(b, "</td></tr>\n");
}

/* Why a size does not run the config as submitted, and what it changes. */
static void size_detail(struct hbuf *b, const json_t *s)
{
	const char *action = json_string_value(json_object_get(s, "action"));
	const json_t *changes = json_object_get(s, "changes"), *skipped = json_object_get(s, "skipped");
	bool lower = action && !strcmp(action, "start_lower");

	html_add(b, "<section class=\"card plan-size\"><h3>On ");
	gpu_mib_text(b, s);
	html_printf(b, " MiB: %s</h3>\n<p class=\"reason\">", lower ? "start lower" : "wait for a bigger GPU");
	html_esc_json(b, json_object_get(s, "reason"), MUTED_DASH);
	html_add(b, "</p>\n");
	if (json_array_size(json_object_get(s, "rungs")) > 0) {
		html_add(b, "<p>Rungs applied before the first attempt: ");
		rung_names(b, json_object_get(s, "rungs"));
		html_add(b, "</p>\n");
	}
	if (json_array_size(skipped) > 0) {
		html_add(b, "<p class=\"muted\">Skipped, predicted to fail on their own: ");
		rung_names(b, skipped);
		html_add(b, "</p>\n");
	}
	if (json_array_size(changes) > 0) {
		html_add(b, "<h4>Config changes</h4>\n");
		html_changes_table(b, changes, "submitted", "first attempt", MUTED_DASH);
	} else {
		html_add(b, "<p class=\"muted\">No config change: the config as submitted.</p>\n");
	}
	html_add(b, "</section>\n");
}

void web_plan_render(struct hbuf *b, const json_t *plan)
{
	const json_t *sizes = json_object_get(plan, "sizes"), *s;
	const json_t *arch = json_object_get(plan, "arch"), *pool = json_object_get(plan, "pool");
	long long n = json_integer_value(json_object_get(plan, "observations"));
	bool fleet = false;
	size_t i;

	html_add(b, "<h2>Plan for ");
	html_esc_json(b, json_object_get(plan, "kind"), "?");
	html_add(b, " <code class=\"arch\">");
	html_esc_json(b, arch, "?");
	html_add(b, "</code>");
	if (json_is_string(pool) && strcmp(json_string_value(pool), POOL_DEFAULT)) {
		html_add(b, " in pool <code class=\"pool\">");
		html_esc_json(b, pool, "?");
		html_add(b, "</code>");
	}
	html_add(b, "</h2>\n");
	if (n > 0) {
		html_printf(b, "<p class=\"history\">The memory model rests on %lld attempt(s) of <code>", n);
		html_esc_json(b, arch, "?");
		html_add(b, "</code>.</p>\n");
	} else {
		html_add(b, "<p class=\"history none\">No memory history of <code>");
		html_esc_json(b, arch, "?");
		html_add(b, "</code> yet: the memory model has nothing to predict from, so a first attempt runs the config "
			    "as submitted on every GPU.</p>\n");
	}
	json_array_foreach(sizes, i, s)
		fleet |= json_is_true(json_object_get(s, "in_fleet"));
	if (!fleet && json_is_string(pool) && strcmp(json_string_value(pool), POOL_DEFAULT)) {
		html_add(b, "<p class=\"no-gpu err\">Pool <code>");
		html_esc_json(b, pool, "?");
		html_add(b, "</code> has no GPU: no worker of it, nor one that borrows from it, has a usable GPU. Enter a "
			    "GPU size above to ask about one.</p>\n");
	} else if (!fleet) {
		html_add(b, "<p class=\"no-gpu err\">The fleet has no GPU: no worker in the fleet has a usable GPU. Enter a "
			    "GPU size above to ask about one.</p>\n");
	}
	if (json_array_size(sizes) == 0)
		return;
	html_add(b, "<table class=\"plan\"><thead><tr><th>GPU MiB</th><th>GPUs</th><th>target</th><th>first attempt</th>"
		    "<th>it needs</th></tr></thead><tbody>\n");
	json_array_foreach(sizes, i, s)
		size_row(b, s);
	html_add(b, "</tbody></table>\n");
	json_array_foreach(sizes, i, s) {
		const char *action = json_string_value(json_object_get(s, "action"));
		if (!action || strcmp(action, "as_is"))
			size_detail(b, s);
	}
}

/* ---- answers ---- */

/* Answers code with the form as typed and, when message is not NULL, what is wrong with it. */
static void form_page(struct hreq *h, int code, const struct plan_page *p, const char *field, const char *message)
{
	struct hbuf b = { 0 };
	char *page;

	web_plan_render_form(&b, p ? p->text : NULL, p ? p->gpu : NULL, p ? p->pool : NULL, field, message);
	page = html_take(&b);
	web_page(h, code, "Plan", page);
	free(page);
}

static void on_fleet(PGresult *res, const char *err, void *arg)
{
	struct plan_page *p = arg;
	struct hreq *h = p->h;
	struct hbuf b = { 0 };
	json_t *doc = NULL, *plan = NULL;
	char *perr = NULL, *page = NULL;

	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
		log_warn("web plan failed", "arch=%s error=\"%s\"", p->arch,
			 res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "no row" : err ? err : "?");
		web_message(h, 503, "Database unavailable", "The database could not answer; try again shortly.");
		goto out;
	}
	doc = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
	plan = doc ? api_plan_build(p->config, p->recovery, p->kind, p->arch, doc, p->extra_mib, &perr) : NULL;
	if (!plan) {
		log_error("web plan failed", "arch=%s error=\"%s\"", p->arch, perr ? perr : "unreadable fleet document");
		web_message(h, 500, "Plan failed", "The plan could not be made; the server log says why.");
		goto out;
	}
	if (p->pool)
		json_object_set_new(plan, "pool", json_string(p->pool));
	web_plan_render_form(&b, p->text, p->gpu, p->pool, NULL, NULL);
	web_plan_render(&b, plan);
	page = html_take(&b);
	web_page(h, 200, "Plan", page);
out:
	free(page);
	free(perr);
	json_decref(plan);
	json_decref(doc);
	plan_page_free(p);
}

/* A textarea's value comes with CRLF line ends (HTML forms): LF, as a file has them, in place. */
static void crlf_to_lf(char *s)
{
	char *o = s;

	for (; s && *s; s++)
		if (!(s[0] == '\r' && s[1] == '\n'))
			*o++ = *s;
	if (o)
		*o = '\0';
}

static bool blank(const char *s)
{
	return !s || s[strspn(s, " \t\r\n")] == '\0';
}

/* After the gate: reads the form, checks the config as a submit does and runs the fleet's statement. */
static void plan_post(struct hreq *h)
{
	size_t len = 0;
	const char *body = hreq_body_text(h, &len), *error, *name;
	struct plan_page *p = xcalloc(1, sizeof *p);
	json_t *env = NULL;
	char *field = NULL, *message = NULL;
	int priority;
	int64_t retry_ms;

	p->h = h;
	if (!auth_submit_take(h, &retry_ms)) { /* as POST /v1/plan: it counts against the submit rate */
		char after[32];
		snprintf(after, sizeof after, "%lld", (long long)((retry_ms + 999) / 1000));
		hreq_add_header(h, "Retry-After", after);
		message = xasprintf("Too many plans and submits from this token just now; try again in %s s.", after);
		web_message(h, 429, "Too many requests", message);
		goto out;
	}
	if (len > HTTP_MAX_BODY) {
		message = xasprintf("The form is %zu bytes, over the %d-byte limit.", len, HTTP_MAX_BODY);
		web_message(h, 413, "Too large", message);
		goto out;
	}
	p->text = body ? web_form_value(body, len, "config") : NULL;
	p->gpu = body ? web_form_value(body, len, "gpu_mib") : NULL;
	p->pool = body ? web_form_value(body, len, "pool") : NULL;
	crlf_to_lf(p->text);
	if (blank(p->gpu)) {
		free(p->gpu);
		p->gpu = NULL;
	}
	if (blank(p->pool)) {
		free(p->pool);
		p->pool = NULL;
	}
	if (p->pool && !pool_name_ok(p->pool)) {
		form_page(h, 400, p, "pool", "pool must be a pool name: " POOL_NAME_RULE);
		goto out;
	}
	if (p->gpu && (p->extra_mib = api_profiles_parse_mib(p->gpu)) < 0) {
		message = xasprintf("gpu_mib must be an integer from 1 to %d", API_PROFILES_GPU_MIB_MAX);
		form_page(h, 400, p, "gpu_mib", message);
		goto out;
	}
	if (blank(p->text)) {
		form_page(h, 400, p, "config", "paste an AI Toolkit config (YAML or JSON)");
		goto out;
	}
	if (api_jobs_parse_yaml(p->text, strlen(p->text), &p->config, &error, &message) < 0) {
		form_page(h, 400, p, "config", message);
		goto out;
	}
	env = json_pack("{s:O}", "config", p->config);
	if (api_jobs_check_submit(env, &p->recovery, &name, &priority, &field, &message) < 0) {
		form_page(h, 400, p, field, message);
		goto out;
	}
	p->kind = atconfig_kind(p->config);
	memmodel_arch(p->config, p->arch, sizeof p->arch);
	{
		/* the GPUs of the pool typed (none: the default pool), as POST /v1/plan's envelope "pool" */
		const char *params[2] = { p->arch, p->pool ? p->pool : POOL_DEFAULT };
		db_exec(h->app->db, sql_plan_fleet, 2, params, on_fleet, p);
	}
	p = NULL;
out:
	json_decref(env);
	free(field);
	free(message);
	plan_page_free(p);
}

static void plan_form(struct hreq *h)
{
	form_page(h, 200, NULL, NULL, NULL);
}

void web_plan_form(struct hreq *h)
{
	web_gate(h, PLAN_ROLES, AUTH_SCOPE_NONE, plan_form, NULL);
}

void web_plan_post(struct hreq *h)
{
	/* it changes nothing, but it spends the caller's token on the fleet's statement and the policy
	 * per size: a page of another site must not make a logged-in browser run it */
	if (!web_act_same_site(hreq_header(h, "Origin"), hreq_header(h, "Sec-Fetch-Site"), hreq_header(h, "Host"),
			       hreq_header(h, "X-Forwarded-Host"))) {
		log_warn("web plan refused", "path=%s origin=%s", h->path, hreq_header(h, "Origin") ?: "-");
		web_message(h, 403, "Forbidden", "This form was sent from another site; it was not run.");
		return;
	}
	web_gate(h, PLAN_ROLES, AUTH_SCOPE_NONE, plan_post, PLAN_PATH);
}
