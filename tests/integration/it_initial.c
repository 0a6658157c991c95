/* Integration: a job's first attempt starts at the config the memory model predicts to fit the leased
 * GPU (issue 12: server/lease.c, server/memcache.c, rung_start_lower) with the real rungd, rung-worker
 * and simulated trainer. Four flux jobs teach the 24 GiB class; then a batch-4 job the model predicts
 * not to fit runs batch 1 first (no OOM), says so in its events, recovery_state, rungctl's story and
 * the web job page, and scales up after the success; one predicted to fit runs as submitted (and its
 * page tells no such story); recovery.scale_up false is respected; after a profile reset the cache is
 * dropped and a first attempt runs as submitted. Then history in which the lightest config the ladder
 * can reach ran out of memory on 24 GiB: with no bigger GPU in the job's pool (a 140 GiB one in
 * another pool is not its to get: migration 026) a first attempt runs as submitted (today's path); once an 80 GiB GPU is in the fleet, the 24 GiB worker's claim is handed
 * back (rung_start_bigger) and the job runs once, as attempt 1, on the 80 GiB GPU; rungctl show and
 * the web job page say why. Before each of those, POST /v1/plan (and rungctl plan) says what the lease
 * then does: as submitted without history, start lower with the same rung, hand over to a bigger GPU;
 * it stores nothing; the /ui/plan page says the same to a browser (its form, YAML and JSON, the
 * refusals, the same-site check, the login). */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "jpath.h"
#include "util.h"

#define GPU_24G 24576
#define GPU_80G 81920
#define GPU_SIDE 143771 /* the GPU of pool side (test_no_bigger): in the fleet, never the default pool's */

/* The value of /metrics sample `key` (name and labels), or -1. */
static long metric(struct harness *h, const char *key)
{
	long st = 0, v = -1;
	json_t *j = h_get(h, "/metrics", &st);
	const char *at = st == 200 && h->last_body ? strstr(h->last_body, key) : NULL;

	if (at && at[strlen(key)] == ' ')
		v = strtol(at + strlen(key), NULL, 10);
	json_decref(j);
	return v;
}

struct ready_arg {
	struct harness *h;
	long want;
};

static bool cache_ready(void *arg)
{
	struct ready_arg *r = arg;
	/* ready, and current: no entry waits for a refill after the last finish (the reaper's tick) */
	return metric(r->h, "rung_memory_profile_cache{state=\"ready\"}") >= r->want &&
	       metric(r->h, "rung_memory_profile_cache{state=\"stale\"}") == 0;
}

/* A flux config (sampling off, one bucket) with the given batch and bucket. New reference. */
static json_t *flux(const char *name, int batch, int bucket)
{
	json_t *c = h_config(name, 30); /* long enough that a slow host reads the training level with its phase */

	h_config_set(c, "config.process[0].train.batch_size", json_integer(batch));
	h_config_set(c, "config.process[0].train.disable_sampling", json_true());
	h_config_set(c, "config.process[0].datasets[0].resolution", json_pack("[i]", bucket));
	return c;
}

/* Submits config (stolen) with extra (borrowed, may be NULL) and waits until the job ends in
 * `state`; returns its id (heap) or NULL. */
static char *run_job(struct harness *h, json_t *config, const json_t *extra, const char *state)
{
	json_t *job = h_submit(h, config, extra), *done;
	char *id = h_id(job, "id");

	done = id ? h_wait_job(h, id, state, 60000 * h_slow()) : NULL;
	if (!done) {
		free(id);
		id = NULL;
	}
	json_decref(done);
	json_decref(job);
	json_decref(config);
	return id;
}

static long long count_events(struct harness *h, const char *id, const char *kind)
{
	const char *params[2] = { id, kind };
	return h_sql_int(h, "SELECT count(*) FROM events WHERE job_id = $1::bigint AND kind = $2", 2, params);
}

/* The body of the web job page of job id as the admin sees it (heap), or NULL unless 200. */
static char *job_page(struct harness *h, const char *id)
{
	char *cookie = xasprintf("Cookie: rung_token=%s", h->admin_token), *path = xasprintf("/ui/jobs/%s", id);
	const char *hdr[] = { cookie, NULL };
	long st = 0;
	char *body = NULL;

	json_decref(h_request(h, "GET", path, NULL, 0, hdr, &st));
	if (st == 200 && h->last_body)
		body = xstrdup(h->last_body);
	free(path);
	free(cookie);
	return body;
}

static long long batch_of(const json_t *attempt)
{
	return jpath_int(attempt, "config.config.process[0].train.batch_size", -1);
}

/* POST /v1/plan of config (stolen) as the envelope, with query (may be NULL); *st gets the status. */
static json_t *plan(struct harness *h, json_t *config, const char *query, long *st)
{
	json_t *body = json_pack("{s:o}", "config", config), *ans;
	char *path = xasprintf("/v1/plan%s", query ? query : "");

	ans = h_post(h, path, body, st);
	free(path);
	json_decref(body);
	return ans;
}

/* The entry of a plan's sizes for a GPU of mib MiB (borrowed), or NULL. */
static const json_t *plan_at(const json_t *p, long long mib)
{
	const json_t *s;
	size_t i;

	json_array_foreach(json_object_get(p, "sizes"), i, s)
		if (jpath_int(s, "gpu_mib", 0) == mib)
			return s;
	return NULL;
}

/* The fleet's first GPU: the worker's 24 GiB GPU is registered (h_worker_start does not wait for it). */
static bool small_gpu_registered(void *arg)
{
	return h_sql_int(arg, "SELECT count(*) FROM gpus WHERE memory_total_mib = 24576", 0, NULL) == 1;
}

static long long jobs_count(struct harness *h)
{
	return h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);
}

/* No history yet: the plan says every size runs the config as submitted, with no estimate; a size
 * asked for (?gpu_mib=) comes in its place, marked as not in the fleet; bad input is named; a worker
 * may not ask; nothing is stored. */
static void test_plan_no_history(struct harness *h)
{
	long long before = jobs_count(h);
	long st = 0;
	json_t *p, *e;
	const json_t *s24, *s80;
	const char *saved;

	p = plan(h, flux("plan_none", 4, 1024), "?gpu_mib=81920", &st);
	s24 = plan_at(p, GPU_24G);
	s80 = plan_at(p, GPU_80G);
	h_ok(h, st == 200 && !strcmp(h_str(p, "arch"), "flux") && !strcmp(h_str(p, "kind"), "image") &&
	     h_int(p, "observations") == 0, "plan: 200, flux, image, no observations yet (%ld)", st);
	h_ok(h, s24 && s80 && json_array_size(json_object_get(p, "sizes")) == 2 &&
	     json_array_get(json_object_get(p, "sizes"), 0) == s80,
	     "the fleet's 24 GiB size and the 80 GiB asked for, largest first");
	h_ok(h, s24 && h_int(s24, "gpus") == 1 && json_is_true(json_object_get(s24, "in_fleet")) &&
	     s80 && h_int(s80, "gpus") == 0 && json_is_false(json_object_get(s80, "in_fleet")),
	     "one GPU of 24 GiB in the fleet, none of 80 GiB");
	h_ok(h, s24 && !strcmp(h_str(s24, "action"), "as_is") && json_is_null(json_object_get(s24, "target_estimate")) &&
	     strstr(h_str(s24, "reason"), "no memory history"),
	     "without history a first attempt runs as submitted (%s)", s24 ? h_str(s24, "reason") : "?");
	h_ok(h, jobs_count(h) == before, "a plan stores no job");
	json_decref(p);
	p = plan(h, flux("plan_bad", 1, 512), "?gpu_mib=0", &st);
	h_ok(h, st == 400 && !strcmp(h_str(p, "field"), "gpu_mib"), "gpu_mib 0: 400 naming gpu_mib (%ld)", st);
	json_decref(p);
	e = flux("plan_bad", 1, 512);
	h_config_set(e, "config.process[0].train.batch_size", json_string("four"));
	p = plan(h, e, NULL, &st);
	h_ok(h, st == 400 && strstr(h_str(p, "field"), "batch_size"), "a config a submit refuses: the same 400 (%ld, %s)", st,
	     h_str(p, "field"));
	json_decref(p);
	saved = h->auth_token;
	h->auth_token = h->worker_token;
	p = plan(h, flux("plan_worker", 1, 512), NULL, &st);
	h->auth_token = saved;
	h_ok(h, st == 403, "a worker token may not ask (%ld)", st);
	json_decref(p);
}

/* After the teaching: the batch-4 config is predicted not to fit 24 GiB and the plan starts it with
 * the batch_size rung (batch 4 -> 1), as the lease then does (test_start_lower); a config predicted
 * to fit runs as submitted; rungctl plan prints both; nothing is stored. */
static void test_plan_learned(struct harness *h)
{
	long long before = jobs_count(h);
	long st = 0;
	json_t *p = plan(h, flux("plan_big", 4, 1024), NULL, &st), *q;
	const json_t *s = plan_at(p, GPU_24G), *ch;
	char *cfg, *args, *out;
	int rc = -1;
	FILE *f;

	ch = json_array_get(json_object_get(s, "changes"), 0);
	h_ok(h, st == 200 && s && !strcmp(h_str(s, "action"), "start_lower") && h_int(p, "observations") >= 4,
	     "plan: batch 4 on 1024 px starts lower on 24 GiB (%ld, %s, %lld observations)", st, s ? h_str(s, "action") : "?",
	     h_int(p, "observations"));
	h_ok(h, s && json_is_false(jpath_get(s, "target_estimate.fits")) && json_is_true(jpath_get(s, "estimate.fits")),
	     "the target predicted not to fit, the lowered config predicted to fit");
	h_ok(h, s && json_array_size(json_object_get(s, "rungs")) == 1 &&
	     !strcmp(json_string_value(json_array_get(json_object_get(s, "rungs"), 0)) ?: "", "batch_size") &&
	     !strcmp(h_str(ch, "path"), "config.process[0].train.batch_size") && h_int(ch, "old") == 4 && h_int(ch, "new") == 1,
	     "with the batch_size rung: batch 4 -> 1 (the change the lease then makes)");
	q = plan(h, flux("plan_fit", 1, 768), NULL, &st);
	s = plan_at(q, GPU_24G);
	h_ok(h, st == 200 && s && !strcmp(h_str(s, "action"), "as_is") && json_is_true(jpath_get(s, "target_estimate.fits")) &&
	     json_array_size(json_object_get(s, "changes")) == 0, "batch 1 on 768 px: predicted to fit, as submitted");
	json_decref(q);
	h_ok(h, jobs_count(h) == before, "plans store no job");
	cfg = xasprintf("%s/plan_big.json", h->tmp);
	f = fopen(cfg, "w");
	q = flux("plan_big", 4, 1024);
	if (f) {
		json_dumpf(q, f, JSON_INDENT(2));
		fclose(f);
	}
	json_decref(q);
	args = xasprintf("plan %s --gpu-mib 81920", cfg);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && strstr(out, "image flux: the memory model rests on ") &&
	     strstr(out, "start lower: batch_size") && strstr(out, "as submitted") &&
	     strstr(out, "    config change: config.process[0].train.batch_size: 4 -> 1\n"),
	     "rungctl plan: the table (lower on 24 GiB, as submitted on 80 GiB) and the change");
	if (h->failed)
		h_diag("rungctl plan: %s", out);
	free(out);
	free(args);
	free(cfg);
	json_decref(p);
}

/* ---- the plan page (server/web_plan.c) ---- */

static void yaml_block(FILE *f, const json_t *v, int indent);

/* After a "key:" or "-" at indent: a non-empty mapping or sequence as a block below it, anything
 * else as JSON on the same line. */
static void yaml_value(FILE *f, const json_t *x, int indent)
{
	if (json_is_object(x) ? json_object_size(x) : json_is_array(x) ? json_array_size(x) : 0) {
		fputc('\n', f);
		yaml_block(f, x, indent + 2);
	} else {
		char *t = json_dumps(x, JSON_ENCODE_ANY);
		fprintf(f, " %s\n", t);
		free(t);
	}
}

/* v as a YAML block (mappings as "key: value", sequences as "- item", scalars as JSON, which YAML
 * reads alike) at indent, written to f: the form's YAML path with a real block document. */
static void yaml_block(FILE *f, const json_t *v, int indent)
{
	const char *k;
	json_t *x;
	size_t i;

	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x) {
			fprintf(f, "%*s%s:", indent, "", k);
			yaml_value(f, x, indent);
		}
		return;
	}
	json_array_foreach(v, i, x) {
		fprintf(f, "%*s-", indent, "");
		yaml_value(f, x, indent);
	}
}

/* config (borrowed) as YAML text, heap. */
static char *yaml_text(const json_t *config)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		abort();
	yaml_block(f, config, 0);
	fclose(f);
	return text;
}

/* application/x-www-form-urlencoded "key=value" of text, every byte but [A-Za-z0-9._~-] as %XX,
 * as a browser sends a form; heap. */
static char *form_pair(const char *key, const char *text)
{
	size_t n = strlen(text), o;
	char *out = xmalloc(strlen(key) + 2 + 3 * n);

	o = (size_t)sprintf(out, "%s=", key);
	for (const unsigned char *c = (const unsigned char *)text; *c; c++)
		o += (size_t)(isalnum(*c) || strchr("._~-", *c) ? sprintf(out + o, "%c", *c) : sprintf(out + o, "%%%02X", *c));
	out[o] = '\0';
	return out;
}


/* The page's text from `from` to the end of its element `until` (heap), or "" when absent. */
static char *page_part(const char *page, const char *from, const char *until)
{
	const char *a = page ? strstr(page, from) : NULL, *b = a ? strstr(a, until) : NULL;
	size_t n = a && b ? (size_t)(b - a) + strlen(until) : 0;
	char *out = xmalloc(n + 1);

	memcpy(out, a ? a : "", n);
	out[n] = '\0';
	return out;
}

/* The /ui/plan page says what POST /v1/plan says, for a browser: the form; the learned batch-4
 * config, pasted as YAML and as JSON (with a browser's CRLF line ends), starts lower on 24 GiB with
 * batch_size, 4 -> 1, and runs as submitted on an 80 GiB GPU asked about; a config a submit refuses
 * is a 400 naming the field, the text kept; from another site a 403, without a cookie the login;
 * a worker's cookie may not; nothing is stored. */
static void test_plan_page(struct harness *h)
{
	long long before = jobs_count(h);
	json_t *cfg = flux("plan_page", 4, 1024), *bad = flux("plan_page_bad", 1, 512);
	char *yaml = yaml_text(cfg), *json = json_dumps(cfg, JSON_INDENT(2)), *crlf, *form, *f2, *part = NULL;
	size_t o = 0;
	long st;

	crlf = xmalloc(2 * strlen(json) + 1);
	for (const char *c = json; *c; c++) {
		if (*c == '\n')
			crlf[o++] = '\r';
		crlf[o++] = *c;
	}
	crlf[o] = '\0';

	st = h_browse(h, h->admin_token, "GET", "/ui/plan", NULL, NULL);
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "<textarea id=\"config\" name=\"config\"") &&
	     strstr(h->last_body, "name=\"gpu_mib\"") && strstr(h->last_body, "action=\"/ui/plan\"") &&
	     strstr(h->last_body, "<a href=\"/ui/plan\">Plan</a>"), "plan page: GET /ui/plan has the form, and the nav links it (%ld)",
	     st);
	st = h_browse(h, h->submitter_token, "GET", "/ui/plan", NULL, NULL);
	h_ok(h, st == 200, "plan page: a submitter may open it (%ld)", st);
	st = h_browse(h, h->worker_token, "GET", "/ui/plan", NULL, NULL);
	h_ok(h, st == 403, "plan page: a worker's token may not (%ld)", st);
	st = h_browse(h, NULL, "GET", "/ui/plan", NULL, NULL);
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, "/ui/login?next=%2Fui%2Fplan"),
	     "plan page: without a cookie, the login and back (%ld %s)", st, h->last_location ? h->last_location : "-");

	form = form_pair("config", yaml);
	st = h_browse(h, h->admin_token, "POST", "/ui/plan", form, "Sec-Fetch-Site: same-origin");
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "<td class=\"action\">start lower: <code>batch_size</code></td>") &&
	     strstr(h->last_body, "<tr><td><code>config.process[0].train.batch_size</code></td><td>4</td><td>1</td></tr>") &&
	     strstr(h->last_body, "The memory model rests on "),
	     "plan page: the config as YAML starts lower on 24 GiB with batch_size, 4 -> 1 (%ld)", st);
	if (h->failed)
		h_diag("page: %s", h->last_body ? h->last_body : "-");
	part = page_part(h->last_body, "<textarea", "</textarea>");
	h_ok(h, strstr(part, "  name: &quot;plan_page&quot;\n") != NULL, "plan page: the answer keeps the YAML in the form");
	free(part);
	free(form);

	form = form_pair("config", crlf);
	f2 = xasprintf("%s&gpu_mib=81920", form);
	st = h_browse(h, h->submitter_token, "POST", "/ui/plan", f2, "Sec-Fetch-Site: same-origin");
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "start lower: <code>batch_size</code>") &&
	     strstr(h->last_body, "<tr><td>81920</td><td><span class=\"muted\">not in the fleet</span>") &&
	     strstr(h->last_body, "<td class=\"action\">as submitted</td>"),
	     "plan page: as JSON from a submitter, with 81920 MiB asked: lower on 24 GiB, as submitted on 80 GiB (%ld)", st);
	part = page_part(h->last_body, "<textarea", "</textarea>");
	h_ok(h, strstr(part, "\"job\": \"extension\"") == NULL && strstr(part, "&quot;job&quot;: &quot;extension&quot;,\n") &&
	     !strchr(part, '\r') && !strstr(part, "\xef\xbf\xbd"),
	     "plan page: the JSON kept, escaped, with LF line ends (a browser's CRLF read as a file's)");
	free(part);
	free(f2);
	free(form);

	h_config_set(bad, "config.process[0].train.batch_size", json_string("four"));
	free(json);
	json = json_dumps(bad, JSON_INDENT(2));
	form = form_pair("config", json);
	st = h_browse(h, h->admin_token, "POST", "/ui/plan", form, "Sec-Fetch-Site: same-origin");
	part = page_part(h->last_body, "<p class=\"err\">", "</p>");
	h_ok(h, st == 400 && strstr(part, "batch_size") && h->last_body &&
	     strstr(h->last_body, "&quot;batch_size&quot;: &quot;four&quot;"),
	     "plan page: a config a submit refuses: 400 naming the field (%s), the text kept (%ld)", part, st);
	free(part);
	free(form);
	form = form_pair("config", yaml);
	f2 = xasprintf("%s&gpu_mib=&pool=nohost", form);
	st = h_browse(h, h->admin_token, "POST", "/ui/plan", f2, "Sec-Fetch-Site: same-origin");
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, " in pool <code class=\"pool\">nohost</code></h2>") &&
	     strstr(h->last_body, "Pool <code>nohost</code> has no GPU") && !strstr(h->last_body, "<td class=\"action\">") &&
	     strstr(h->last_body, "value=\"nohost\""),
	     "plan page: for pool nohost, no worker's: the pool has no GPU, no size planned, the pool kept in the form (%ld)", st);
	free(f2);
	f2 = xasprintf("%s&pool=Big", form);
	st = h_browse(h, h->admin_token, "POST", "/ui/plan", f2, "Sec-Fetch-Site: same-origin");
	part = page_part(h->last_body, "<p class=\"err\">", "</p>");
	h_ok(h, st == 400 && strstr(part, "<code class=\"field\">pool</code>") && strstr(part, "pool name"),
	     "plan page: pool Big: 400 naming pool (%s)", part);
	free(part);
	free(f2);
	free(form);
	st = h_browse(h, h->admin_token, "POST", "/ui/plan", "config=job%3A+%5Bx&gpu_mib=", "Sec-Fetch-Site: same-origin");
	part = page_part(h->last_body, "<p class=\"err\">", "</p>");
	h_ok(h, st == 400 && strstr(part, "malformed YAML at line"), "plan page: malformed YAML: 400 naming the line (%s)", part);
	free(part);
	form = form_pair("config", yaml);
	f2 = xasprintf("%s&gpu_mib=0", form);
	st = h_browse(h, h->admin_token, "POST", "/ui/plan", f2, "Sec-Fetch-Site: same-origin");
	part = page_part(h->last_body, "<p class=\"err\">", "</p>");
	h_ok(h, st == 400 && strstr(part, "gpu_mib"), "plan page: gpu_mib 0: 400 naming gpu_mib (%s)", part);
	free(part);
	free(f2);

	st = h_browse(h, h->admin_token, "POST", "/ui/plan", form, "Sec-Fetch-Site: cross-site");
	h_ok(h, st == 403 && h->last_body && !strstr(h->last_body, "batch_size"),
	     "plan page: posted from another site: 403, not run (%ld)", st);
	st = h_browse(h, NULL, "POST", "/ui/plan", form, "Sec-Fetch-Site: same-origin");
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, "/ui/login?next=%2Fui%2Fplan"),
	     "plan page: posted without a cookie: the login, and back to the page (%ld %s)", st,
	     h->last_location ? h->last_location : "-");
	st = h_browse(h, h->worker_token, "POST", "/ui/plan", form, "Sec-Fetch-Site: same-origin");
	h_ok(h, st == 403, "plan page: a worker's token may not post it (%ld)", st);
	free(form);
	h_ok(h, jobs_count(h) == before, "plan page: stores no job");
	free(crlf);
	free(json);
	free(yaml);
	json_decref(bad);
	json_decref(cfg);
}

/* The job predicted not to fit: attempt 1 ran batch 1 (accumulation 4), succeeded, the lowering is
 * recorded in the database before the attempt ran, and scale-up followed. */
static void test_start_lower(struct harness *h)
{
	char *id = run_job(h, flux("init_big", 4, 1024), NULL, "succeeded");
	json_t *job = NULL, *as = NULL, *a1, *a2, *sl;
	long st = 0;

	if (!h_ok(h, id != NULL, "a batch-4 job on 1024 px (28.1 GiB in the sim, on a 24 GiB GPU) succeeds"))
		return;
	job = h_job(h, id);
	as = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
	a1 = json_array_get(json_object_get(as, "attempts"), 0);
	a2 = json_array_get(json_object_get(as, "attempts"), 1);
	h_ok(h, batch_of(a1) == 1, "its first attempt ran the lowered config: batch 1 (got %lld)", batch_of(a1));
	h_ok(h, json_integer_value(jpath_get(a1, "config.config.process[0].train.gradient_accumulation")) == 4,
	     "with gradient accumulation 4 (batch x accumulation as the target)");
	h_ok(h, !strcmp(h_str(a1, "outcome"), "succeeded") && !strcmp(h_str(a1, "class"), "success"),
	     "and did not run out of memory (outcome %s, class %s)", h_str(a1, "outcome"), h_str(a1, "class"));
	h_ok(h, !strcmp(h_str(a1, "action"), "scale_up") && a2 && batch_of(a2) == 2 &&
	     !strcmp(h_str(a2, "outcome"), "succeeded"),
	     "after its success scale-up ran batch 2, which fit (action %s, batch %lld, %s)", h_str(a1, "action"),
	     batch_of(a2), h_str(a2, "outcome"));
	h_ok(h, count_events(h, id, "started_lower") == 1, "one started_lower event");
	{
		const char *params[1] = { id };
		PGresult *r = h_sql(h, "SELECT e.reason, e.data->'rungs', e.attempt_id = a.id, e.id < (SELECT min(x.id) FROM events x "
				       "WHERE x.job_id = e.job_id AND x.kind NOT IN ('submitted', 'leased', 'started_lower')) "
				       "FROM events e JOIN attempts a ON a.job_id = e.job_id AND a.number = 1 "
				       "WHERE e.job_id = $1::bigint AND e.kind = 'started_lower'", 1, params);
		h_ok(h, r && PQntuples(r) == 1 && strstr(PQgetvalue(r, 0, 0), "memory model: the config is predicted not to fit") &&
		     strstr(PQgetvalue(r, 0, 0), "the target: flux: est ") && !strcmp(PQgetvalue(r, 0, 1), "[\"batch_size\"]") &&
		     !strcmp(PQgetvalue(r, 0, 2), "t") && !strcmp(PQgetvalue(r, 0, 3), "t"),
		     "it names the model's evidence for the target and the rung applied, on attempt 1, before it ran (%s)",
		     r && PQntuples(r) ? PQgetvalue(r, 0, 0) : "?");
		PQclear(r);
		r = h_sql(h, "SELECT a.config_hash = md5(a.config::text), (a.config->'config'->'process'->0->'train'->>'batch_size')::int "
			     "FROM attempts a WHERE a.job_id = $1::bigint AND a.number = 1", 1, params);
		h_ok(h, r && PQntuples(r) == 1 && !strcmp(PQgetvalue(r, 0, 0), "t") && atoi(PQgetvalue(r, 0, 1)) == 1,
		     "the attempt row stores the lowered config and its hash");
		PQclear(r);
	}
	sl = jpath_get(job, "recovery_state.started_lower");
	h_ok(h, json_is_object(sl) && json_integer_value(json_object_get(sl, "attempt")) == 1 &&
	     json_integer_value(json_object_get(sl, "gpu_mib")) == GPU_24G &&
	     json_is_false(jpath_get(sl, "target_estimate.fits")) && json_is_true(jpath_get(sl, "estimate.fits")),
	     "recovery_state.started_lower keeps the story: attempt 1, the GPU, the target predicted not to fit, "
	     "the lowered config predicted to fit");
	{
		int rc = -1;
		char *args = xasprintf("show %s", id), *out = h_rungctl(h, args, &rc);
		h_ok(h, rc == 0 && strstr(out, "attempt 1 started below the target: memory model:") &&
		     strstr(out, "  config change: config.process[0].train.batch_size: 4 -> 1\n"),
		     "rungctl show says attempt 1 started below the target, why, and what it changed");
		h_ok(h, rc == 0 && strstr(out, "  started below the target (memory model), then scaled up: attempt 1 ran "),
		     "and the verdict says the job started lower");
		if (h->failed)
			h_diag("rungctl show: %s", out);
		free(out);
		free(args);
		args = xasprintf("watch %s", id);
		out = h_rungctl(h, args, &rc);
		h_ok(h, rc == 0 && strstr(out, "attempt 1 started below the target: memory model:"),
		     "rungctl watch tells it too");
		free(out);
		free(args);
		out = job_page(h, id);
		{
			char *peak = xasprintf("<tr><th>target</th><td>%lld MiB</td><td>%lld MiB</td><td>%lld MiB</td>"
					       "<td>predicted not to fit</td>", jpath_int(sl, "target_estimate.peak_mib", -1),
					       jpath_int(sl, "target_estimate.margin_mib", -1),
					       jpath_int(sl, "target_estimate.usable_mib", -1));
			const char *sec = out ? strstr(out, "id=\"started-lower\"") : NULL;
			const char *a1 = out ? strstr(out, "id=\"attempt-1\"") : NULL;
			h_ok(h, sec && strstr(out, "Attempt 1 started below the target</h3>") &&
			     strstr(out, "memory model: the config is predicted not to fit") && strstr(out, "the target: flux: est "),
			     "the web job page says attempt 1 started below the target, and why");
			h_ok(h, out && strstr(out, peak) && strstr(out, "<tr><th>started with</th>") &&
			     strstr(out, "on this 24576 MiB GPU"),
			     "with the target's estimate against the GPU's usable memory (%s)", peak);
			h_ok(h, out && strstr(out, "<tr><td><code>config.process[0].train.batch_size</code></td><td>4</td><td>1</td></tr>") &&
			     strstr(out, "Rungs applied: <code>batch_size</code>"),
			     "and the config change it made (batch 4 -> 1) with the rung applied");
			h_ok(h, out && strstr(out, "started below the target (memory model), then scaled up: attempt 1 ran with "
						"<code>batch_size</code> applied"),
			     "the job's facts summarise it as rungctl's verdict does");
			h_ok(h, sec && a1 && sec < a1, "the story comes before attempt 1 in the timeline");
			if (h->failed)
				h_diag("web job page: %s", out ? out : "(no page)");
			free(peak);
		}
		free(out);
	}
	json_decref(as);
	json_decref(job);
	free(id);
}

/* A job predicted to fit runs as submitted: no lowering, no event, nothing in recovery_state. */
static void test_fits(struct harness *h)
{
	char *id = run_job(h, flux("init_fit", 1, 768), NULL, "succeeded");
	json_t *job = id ? h_job(h, id) : NULL, *as = NULL;
	long st = 0;

	if (!h_ok(h, id != NULL, "a batch-1 job on 768 px (20.1 GiB) succeeds"))
		return;
	as = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
	h_ok(h, h_int(job, "attempts") == 1 && batch_of(json_array_get(json_object_get(as, "attempts"), 0)) == 1,
	     "predicted to fit: it runs as submitted, once");
	h_ok(h, count_events(h, id, "started_lower") == 0 && !jpath_get(job, "recovery_state.started_lower"),
	     "no started_lower event or story");
	{
		char *page = job_page(h, id);
		h_ok(h, page && strstr(page, "id=\"attempt-1\"") && !strstr(page, "id=\"started-lower\"") &&
		     !strstr(page, "started below the target"), "its web job page tells no start-lower story");
		free(page);
	}
	{
		const char *params[1] = { id };
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint AND config IS NULL", 1, params) == 1,
		     "its attempt stores the target (config NULL)");
	}
	json_decref(as);
	json_decref(job);
	free(id);
}

/* recovery.scale_up false: it still starts lower, and ends there. */
static void test_no_scale_up(struct harness *h)
{
	json_t *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0), *job = NULL;
	char *id = run_job(h, flux("init_noup", 4, 1024), extra, "succeeded");

	if (h_ok(h, id != NULL, "a batch-4 job with recovery.scale_up false succeeds")) {
		job = h_job(h, id);
		h_ok(h, h_int(job, "attempts") == 1 && count_events(h, id, "started_lower") == 1,
		     "after one attempt, started lower (%lld attempt(s))", h_int(job, "attempts"));
		h_ok(h, strstr(h_str(json_object_get(job, "result"), "reason"), "recovery.scale_up is off") != NULL,
		     "and not scaled up: %s", h_str(json_object_get(job, "result"), "reason"));
	}
	json_decref(job);
	json_decref(extra);
	free(id);
}

/* A reset drops the cached profile at once: the next first attempt runs as submitted. */
static void test_reset(struct harness *h)
{
	json_t *ans, *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0), *job = NULL, *as = NULL;
	long st = 0;
	char *id;

	ans = h_postf(h, NULL, &st, "/v1/profiles/flux/%d/reset", GPU_24G);
	h_ok(h, st == 200, "POST /v1/profiles/flux/24576/reset");
	json_decref(ans);
	h_ok(h, metric(h, "rung_memory_profile_cache{state=\"ready\"}") == 0, "the cached profile is dropped at once");
	id = run_job(h, flux("init_after_reset", 4, 1024), extra, "succeeded");
	if (h_ok(h, id != NULL, "a batch-4 job after the reset succeeds")) {
		job = h_job(h, id);
		as = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
		h_ok(h, count_events(h, id, "started_lower") == 0 &&
		     batch_of(json_array_get(json_object_get(as, "attempts"), 0)) == 4 &&
		     !strcmp(h_str(json_array_get(json_object_get(as, "attempts"), 0), "outcome"), "failed"),
		     "its first attempt ran as submitted (batch 4) and ran out of memory: nothing learned is used");
	}
	json_decref(as);
	json_decref(job);
	json_decref(extra);
	free(id);
}

/* Memory history that spends the ladder on 24 GiB: the lightest config every rung together can make
 * (256 px, batch 1, checkpointing, low_vram, quantize, offloading, no sampling) ran out of memory at
 * load on a 24 GiB GPU; every flux config is then predicted to fail for sure there ("a config no
 * heavier than this ran out of memory"). Kept under a job of its own, ended now (after the last
 * reset). */
static bool seed_spent_ladder(struct harness *h)
{
	PGresult *r = h_sql(h, "WITH j AS (INSERT INTO jobs (name, kind, state, target_config, recovery, attempts_count) "
			       "VALUES ('seed_spent_ladder', 'image', 'failed', '{}', '{}', 1) RETURNING id) "
			       "INSERT INTO attempts (job_id, number, config, config_hash, token, lease_expires_at, state, outcome, "
			       "ended_at, mem_arch, mem_gpu_mib, mem_obs) SELECT j.id, 1, NULL, 'seed', 'seed-' || j.id || '-' || "
			       "clock_timestamp(), now(), 'ended', 'failed', now(), 'flux', 24576, jsonb_build_object('arch', 'flux', "
			       "'gpu_mib', 24576, 'features', '{\"res_max\": 256, \"res_n\": 1, \"batch\": 1, \"grad_ckpt\": true, "
			       "\"frames\": 1, \"low_vram\": true, \"quantize\": true, \"offload\": true, \"sampling\": false}'::jsonb, "
			       "'outcome', 'oom', 'phase', 'load', 'need_mib', 24600, 'job_id', j.id) FROM j", 0, NULL);
	bool ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;

	PQclear(r);
	return ok;
}

/* A profile of flux on 24 GiB is cached and the fleet figure the fills read is r->want. */
static bool profile_and_fleet(void *arg)
{
	struct ready_arg *r = arg;
	return metric(r->h, "rung_memory_profile_cache{state=\"ready\"}") >= 1 &&
	       metric(r->h, "\nrung_memory_fleet_max_gpu_mib") == r->want;
}

/* Resets what flux learned on 24 GiB, seeds the spent ladder and runs a small job that fits: its
 * lease is the first lookup after the reset (as submitted, a fill starts), so every profile cached
 * afterwards includes the seed; waits until one is cached with fleet figure fleet_mib. */
static bool spent_ladder_cached(struct harness *h, const char *primer, long fleet_mib)
{
	struct ready_arg ready = { h, fleet_mib };
	json_t *ans;
	long st = 0;
	char *id;
	bool ok;

	ans = h_postf(h, NULL, &st, "/v1/profiles/flux/%d/reset", GPU_24G);
	json_decref(ans);
	ok = h_ok(h, st == 200, "%s: profile of flux on 24 GiB reset", primer) &&
	     h_ok(h, seed_spent_ladder(h), "%s: history seeded: the lightest config the ladder reaches ran out of memory on 24 GiB",
		  primer);
	if (!ok)
		return false;
	id = run_job(h, flux(primer, 1, 768), NULL, "succeeded");
	ok = h_ok(h, id != NULL, "%s: a batch-1 job on 768 px, the first lease after the reset, runs as submitted and succeeds",
		  primer);
	free(id);
	return ok && h_ok(h, wait_until(profile_and_fleet, &ready, 20000 * h_slow()),
			  "%s: a profile with that history cached, the fleet's largest GPU read as %ld MiB (%ld)", primer,
			  fleet_mib, metric(h, "\nrung_memory_fleet_max_gpu_mib"));
}

/* No bigger GPU in the fleet: a first attempt predicted to fail on every rung runs as submitted,
 * as before (nothing is re-queued, nothing lowered); its OOM then spends the ladder at once. */
static void test_no_bigger(struct harness *h)
{
	json_t *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0), *job = NULL, *as = NULL, *a1;
	long st = 0;
	char *id;

	{
		/* a bigger GPU in another pool (migration 026) is one this job never gets: the lease weighs
		 * its own pool's largest GPU, so the claim is not handed back to wait for it */
		json_t *body = json_pack("{s:s, s:s, s:s, s:[{s:s, s:i}]}", "name", "side-h200", "host", "h", "pool", "side",
					 "gpus", "uuid", "GPU-side-1", "memory_total_mib", GPU_SIDE);
		json_decref(h_post(h, "/v1/workers", body, &st));
		h_ok(h, st == 201, "a worker with a 140 GiB GPU registers into pool side (%ld)", st);
		json_decref(body);
	}
	/* the cache's fleet figure (the whole fleet's) counts it: only the pool's figure keeps the claim */
	if (!spent_ladder_cached(h, "init_prime_a", GPU_SIDE))
		goto out;
	id = run_job(h, flux("init_nobig", 4, 1024), extra, "failed");
	if (h_ok(h, id != NULL, "no bigger GPU: a batch-4 job on 1024 px ends failed")) {
		job = h_job(h, id);
		as = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
		a1 = json_array_get(json_object_get(as, "attempts"), 0);
		h_ok(h, h_int(job, "attempts") == 1 && batch_of(a1) == 4 && !strcmp(h_str(a1, "outcome"), "failed"),
		     "its first attempt ran as submitted (batch %lld, %s, %lld attempt(s)): the lease path as before",
		     batch_of(a1), h_str(a1, "outcome"), h_int(job, "attempts"));
		h_ok(h, count_events(h, id, "started_bigger") == 0 && count_events(h, id, "started_lower") == 0 &&
		     !jpath_get(job, "recovery_state.started_bigger"), "no started_bigger or started_lower");
		h_ok(h, jpath_get(job, "constraints.min_gpu_memory_mib") == NULL ||
		     json_is_null(jpath_get(job, "constraints.min_gpu_memory_mib")), "and no memory floor");
	}
	free(id);
out:
	json_decref(as);
	json_decref(job);
	json_decref(extra);
}

struct event_arg {
	struct harness *h;
	const char *id, *kind;
};

static bool has_event(void *arg)
{
	struct event_arg *e = arg;
	return count_events(e->h, e->id, e->kind) >= 1;
}

static bool gpu_registered(void *arg)
{
	return h_sql_int(arg, "SELECT count(*) FROM gpus WHERE memory_total_mib = 81920", 0, NULL) == 1;
}

/* An 80 GiB GPU in the fleet (its worker registered, then stopped): the 24 GiB worker claims the
 * job, rungd hands the claim back with the job re-queued for at least 24577 MiB, the story in an
 * event and recovery_state; the job runs once, as attempt 1 at its target, on the 80 GiB GPU when
 * that worker comes back. */
static void test_bigger(struct harness *h, const struct h_worker_opts *small)
{
	static const char *const env[] = { "RUNG_SIM_STEP_MS=60", "RUNG_SIM_LOAD_MS=150", NULL };
	char *gpus = h_sim_gpus("big", 1, GPU_80G), *id = NULL, *big_uuid = NULL;
	struct h_worker_opts o = { .gpus_json = gpus, .env = env, .args = small->args };
	struct h_worker *big = h_worker_start(h, "wbig", &o);
	json_t *cfg = flux("init_bigger", 4, 1024), *sub = NULL, *job = NULL, *as = NULL, *done = NULL, *a1, *sb;
	struct event_arg ev = { h, NULL, "started_bigger" };
	long st = 0;

	if (!h_ok(h, big && wait_until(gpu_registered, h, 20000 * h_slow()), "a worker with one 80 GiB GPU registers") ||
	    !h_ok(h, h_worker_stop(h, big, SIGTERM) == 0, "and stops: its GPU stays in the fleet"))
		goto out;
	{
		PGresult *r = h_sql(h, "SELECT uuid FROM gpus WHERE memory_total_mib = 81920", 0, NULL);
		big_uuid = r && PQntuples(r) == 1 ? xstrdup(PQgetvalue(r, 0, 0)) : NULL;
		PQclear(r);
	}
	/* the cache's fleet figure is the whole fleet's (pool side's GPU); the lease weighs the default
	 * pool's 80 GiB (the claim row's), as started_bigger's fleet_max_gpu_mib says below */
	if (!spent_ladder_cached(h, "init_prime_b", GPU_SIDE))
		goto out;
	{
		json_t *p = plan(h, json_deep_copy(cfg), NULL, &st);
		const json_t *s24 = plan_at(p, GPU_24G), *s80 = plan_at(p, GPU_80G);
		h_ok(h, st == 200 && s24 && !strcmp(h_str(s24, "action"), "requeue_bigger") &&
		     h_int(s24, "min_gpu_memory_mib") == GPU_24G + 1 && s80 && !strcmp(h_str(s80, "action"), "as_is"),
		     "plan: on 24 GiB it would wait for a GPU of at least 24577 MiB, on 80 GiB run as submitted (%s, %s)",
		     s24 ? h_str(s24, "action") : "?", s80 ? h_str(s80, "action") : "?");
		json_decref(p);
	}
	sub = h_submit(h, cfg, NULL);
	id = h_id(sub, "id");
	ev.id = id;
	if (!h_ok(h, id && wait_until(has_event, &ev, 30000 * h_slow()),
		  "a batch-4 job on 1024 px claimed on 24 GiB: started_bigger recorded"))
		goto out;
	job = h_job(h, id);
	h_ok(h, !strcmp(h_str(job, "state"), "queued") && h_int(job, "attempts") == 0,
	     "the claim is undone: the job is queued with no attempt (%s, %lld)", h_str(job, "state"), h_int(job, "attempts"));
	h_ok(h, jpath_int(job, "constraints.min_gpu_memory_mib", 0) == GPU_24G + 1,
	     "re-queued for a GPU with at least 24577 MiB (got %lld)", jpath_int(job, "constraints.min_gpu_memory_mib", 0));
	{
		const char *params[1] = { id };
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint", 1, params) == 0,
		     "no attempt row is left of the claim");
	}
	sb = jpath_get(job, "recovery_state.started_bigger");
	h_ok(h, json_is_object(sb) && jpath_int(sb, "gpu_mib", 0) == GPU_24G && jpath_int(sb, "fleet_max_gpu_mib", 0) == GPU_80G &&
	     jpath_int(sb, "min_gpu_memory_mib", 0) == GPU_24G + 1 && jpath_int(sb, "attempt", 0) == 1 &&
	     json_is_false(jpath_get(sb, "target_estimate.fits")) &&
	     strstr(jpath_str(sb, "reason", ""), "every rung of the ladder is predicted not to fit this 24576 MiB GPU") &&
	     strstr(jpath_str(sb, "reason", ""), "ran out of memory on a 24576 MiB GPU"),
	     "recovery_state.started_bigger keeps the story: the 24 GiB GPU, the fleet's 80 GiB, the floor, why (%s)",
	     jpath_str(sb, "reason", "?"));
	{
		const char *params[1] = { id };
		PGresult *r = h_sql(h, "SELECT e.from_state || '>' || e.to_state, e.reason = e.data->>'reason', e.data->>'gpu_uuid' "
				       "FROM events e WHERE e.job_id = $1::bigint AND e.kind = 'started_bigger'", 1, params);
		h_ok(h, r && PQntuples(r) == 1 && !strcmp(PQgetvalue(r, 0, 0), "running>queued") && !strcmp(PQgetvalue(r, 0, 1), "t") &&
		     big_uuid && strcmp(PQgetvalue(r, 0, 2), big_uuid),
		     "one started_bigger event, running > queued, with the reason, naming the 24 GiB GPU");
		PQclear(r);
	}
	if (!h_ok(h, h_worker_restart(h, big) == 0, "the 80 GiB worker comes back"))
		goto out;
	done = h_wait_job(h, id, "succeeded", 60000 * h_slow());
	if (!h_ok(h, done != NULL, "the job succeeds on it"))
		goto out;
	json_decref(job);
	job = h_job(h, id);
	as = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
	a1 = json_array_get(json_object_get(as, "attempts"), 0);
	h_ok(h, h_int(job, "attempts") == 1 && h_int(a1, "number") == 1 && big_uuid &&
	     !strcmp(h_str(a1, "gpu_uuid"), big_uuid) && batch_of(a1) == 4 && !strcmp(h_str(a1, "outcome"), "succeeded"),
	     "one attempt, number 1, on the 80 GiB GPU, at its target (batch %lld), succeeded (%lld attempt(s), gpu %s)",
	     batch_of(a1), h_int(job, "attempts"), h_str(a1, "gpu_uuid"));
	h_ok(h, count_events(h, id, "started_bigger") == 1 && count_events(h, id, "started_lower") == 0,
	     "the small GPU never claimed it again: one started_bigger, no lowering");
	{
		int rc = -1;
		char *args = xasprintf("show %s", id), *out = h_rungctl(h, args, &rc), *page;
		h_ok(h, rc == 0 && strstr(out, "  started on a bigger GPU (memory model): its claim on a 24576 MiB GPU was handed "
					       "back before it ran, for a GPU with at least 24577 MiB\n    why: memory model: every rung"),
		     "rungctl show says the first claim was handed back for a bigger GPU, and why");
		if (h->failed)
			h_diag("rungctl show: %s", out);
		free(out);
		free(args);
		page = job_page(h, id);
		h_ok(h, page && strstr(page, "<dt>bigger GPU</dt><dd>started on a bigger GPU (memory model): its claim on a 24576 MiB "
					     "GPU was handed back before it ran, for a GPU with at least 24577 MiB"),
		     "and so does the web job page");
		free(page);
	}
	if (h->failed)
		h_diag("job: %s", h->last_body ? h->last_body : "?");
out:
	json_decref(done);
	json_decref(as);
	json_decref(job);
	json_decref(sub);
	json_decref(cfg);
	free(big_uuid);
	free(id);
	free(gpus);
}

int main(void)
{
	static const char *const env[] = { "RUNG_SIM_STEP_MS=60", "RUNG_SIM_LOAD_MS=150", NULL };
	static const char *const args[] = { "--memory-sample-ms", "50", NULL };
	static const int teach[][2] = { { 1, 512 }, { 1, 1024 }, { 2, 768 }, { 2, 1024 } };
	struct harness *h = h_new("it_initial");
	char *gpus = h_sim_gpus("init", 1, GPU_24G);
	struct h_worker_opts o = { .gpus_json = gpus, .env = env, .args = args };
	struct h_worker *w;
	struct ready_arg ready = { h, 1 };
	int taught = 0;

	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		goto out;
	w = h_worker_start(h, "winit", &o);
	if (!h_ok(h, w != NULL, "a worker with one 24 GiB GPU starts"))
		goto out;
	h_ok(h, metric(h, "rung_memory_profile_cache{state=\"ready\"}") == 0, "no profile cached before any job");
	/* the plan counts the fleet's GPUs: ask once the worker has registered its GPU */
	h_ok(h, wait_until(small_gpu_registered, h, 20000 * h_slow()), "the worker's 24 GiB GPU registers");
	test_plan_no_history(h);
	for (size_t i = 0; i < ARRAY_LEN(teach); i++) {
		char name[32];
		snprintf(name, sizeof name, "teach_%zu", i);
		char *id = run_job(h, flux(name, teach[i][0], teach[i][1]), NULL, "succeeded");
		json_t *job = id ? h_job(h, id) : NULL;
		if (h_int(job, "attempts") == 1) /* it fit at once: a measured peak of its own size */
			taught++;
		json_decref(job);
		free(id);
	}
	h_ok(h, taught == (int)ARRAY_LEN(teach), "four flux jobs that fit teach the 24 GiB class (%d)", taught);
	/* the cache fills in the background after each finish: wait for a profile that predicts */
	h_ok(h, wait_until(cache_ready, &ready, 20000 * h_slow()), "rungd caches a profile of flux on 24 GiB, current");
	h_ok(h, metric(h, "rung_memory_profile_fills_total{result=\"ok\"}") >= 2, "fills counted in /metrics");
	test_plan_learned(h);
	test_plan_page(h);
	test_start_lower(h);
	test_fits(h);
	test_no_scale_up(h);
	test_reset(h);
	test_no_bigger(h);
	test_bigger(h, &o);
	if (h->failed) { /* what the model learned from: peaks and their phases (a slow host mislabels them) */
		PGresult *r = h_sql(h, "SELECT string_agg(id || ': ' || coalesce(peak_mib::text, '-') || ' MiB in ' || "
				       "coalesce(peak_phase, '-') || ', ' || coalesce(mem_features::text, '-'), E'\\n' ORDER BY id) "
				       "FROM attempts", 0, NULL);
		h_diag("observations:\n%s", r && PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "?");
		PQclear(r);
	}
out:
	free(gpus);
	return h_free(h);
}
