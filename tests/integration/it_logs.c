/* Integration: what a trainer prints reaches its readers while it runs. The real rung-worker sends
 * the simulated trainer's output in chunks (POST /v1/attempts/{id}/log); GET /v1/jobs/{id}/log pages
 * through it, live and after the end, and reads on a terminal as the trainer's own log does with
 * the progress bar's overwritten redraws left out; rungctl logs prints it. The chunk route spoken
 * directly: fenced by the token, resends and gaps, limits; the reader's errors. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"

#define GPU "GPU-fake-logs"

/* The log as a terminal shows it: each line's text after its last '\r' (a "\r\n" end is "\n"). */
static char *render(const char *s)
{
	size_t n = strlen(s), o = 0, ls = 0;
	char *out = xmalloc(n + 1);

	while (ls < n) {
		const char *nl = strchr(s + ls, '\n');
		size_t le = nl ? (size_t)(nl - s) : n, ce = le, p = ls;
		while (ce > ls && s[ce - 1] == '\r')
			ce--;
		for (size_t i = ls; i < ce; i++)
			if (s[i] == '\r')
				p = i + 1;
		memcpy(out + o, s + p, ce - p);
		o += ce - p;
		if (nl)
			out[o++] = '\n';
		ls = le + (nl ? 1 : 0);
	}
	out[o] = '\0';
	return out;
}

static size_t count_char(const char *s, char c)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == c;
	return n;
}

struct live {
	struct harness *h;
	const char *id;
};

/* The job's log already holds the model loading while its attempt still runs. */
static bool log_live(void *arg)
{
	struct live *l = arg;
	long st = 0;
	json_t *p = h_getf(l->h, &st, "/v1/jobs/%s/log", l->id);
	bool ok = st == 200 && !strcmp(h_str(json_object_get(p, "attempt"), "state"), "running") &&
		  strstr(h_str(p, "text"), "Loading transformer") != NULL;
	json_decref(p);
	return ok;
}

/* Every page of the latest attempt's log from byte 0, LIMIT bytes at a time, joined; *pages gets how many. */
static char *read_pages(struct harness *h, const char *id, int limit, int *pages, bool *ok)
{
	char *all = xstrdup("");
	long long from = 0;

	*pages = 0;
	*ok = true;
	for (;;) {
		long st = 0;
		json_t *p = h_getf(h, &st, "/v1/jobs/%s/log?from=%lld&limit_bytes=%d", id, from, limit);
		if (st != 200 || h_int(p, "from") != from || (h_int(p, "next") <= from && json_is_true(json_object_get(p, "more")))) {
			*ok = false;
			json_decref(p);
			break;
		}
		char *joined = util_concat(all, h_str(p, "text"), NULL);
		free(all);
		all = joined;
		from = h_int(p, "next");
		(*pages)++;
		bool more = json_is_true(json_object_get(p, "more"));
		json_decref(p);
		if (!more || *pages > 10000)
			break;
	}
	return all;
}

static void test_worker_sends(struct harness *h)
{
	const char *env[] = { "RUNG_SIM_STEP_MS=100", NULL };
	const char *args[] = { "--log-interval-ms", "200", NULL };
	struct h_worker_opts o = { .env = env, .args = args };
	struct h_worker *w = h_worker_start(h, "wl", &o);
	json_t *cfg = h_config("logged_job", 40), *job = h_submit(h, cfg, NULL), *done = NULL, *as = NULL, *p = NULL;
	char *id = h_id(job, "id"), *aid = NULL, *raw = NULL, *paged = NULL, *path = NULL, *out = NULL;
	char *r1 = NULL, *r2 = NULL;
	struct live l = { h, id };
	long st = 0;
	int pages = 0, rc = -1;
	bool ok;

	if (!h_ok(h, w && id, "a worker sending its log every 200 ms started, a 40-step job submitted"))
		goto out;
	h_ok(h, wait_until(log_live, &l, 30000),
	     "while the attempt runs, GET /v1/jobs/ID/log already shows the model loading");
	done = h_wait_job(h, id, "succeeded", 60000);
	h_ok(h, done != NULL, "the job succeeds");
	as = h_wait_attempts(h, id, 1, "ended", 5000);
	aid = h_id(json_array_get(as, 0), "id");
	p = h_getf(h, &st, "/v1/jobs/%s/log", id);
	h_ok(h, st == 200 && h_int(json_object_get(p, "attempt"), "number") == 1 &&
		!strcmp(h_str(json_object_get(p, "attempt"), "state"), "ended") && !json_is_true(json_object_get(p, "more")) &&
		!strcmp(h_str(p, "job_state"), "succeeded"),
	     "after the end: attempt 1, ended, the whole log in one page, the job's state");
	path = xasprintf("%s/attempts/%s/trainer.log", w->work_dir, aid ? aid : "none");
	raw = h_slurp(path);
	r1 = render(raw);
	r2 = render(h_str(p, "text"));
	h_ok(h, *raw && !strcmp(r1, r2), "it reads on a terminal as the worker's trainer.log does (%zu and %zu bytes)",
	     strlen(r1), strlen(r2));
	h_ok(h, strstr(r2, "Model Loaded") != NULL, "it holds the model loading");
	h_ok(h, count_char(h_str(p, "text"), '\r') < count_char(raw, '\r'),
	     "the progress bar's overwritten redraws are left out (%zu of %zu carriage returns kept)",
	     count_char(h_str(p, "text"), '\r'), count_char(raw, '\r'));
	h_ok(h, h_int(p, "next") == (long long)strlen(raw), "next is the end of the worker's log (%lld of %zu bytes)",
	     h_int(p, "next"), strlen(raw));
	paged = read_pages(h, id, 300, &pages, &ok);
	h_ok(h, ok && pages > 1 && !strcmp(paged, h_str(p, "text")),
	     "pages of 300 bytes, each from the last one's next, join into the same text (%d pages)", pages);
	{
		char *args_s = xasprintf("logs %s", id);
		out = h_rungctl(h, args_s, &rc);
		free(args_s);
		char *head = xasprintf("==> job %s attempt 1 (ended) <==\n", id);
		bool headed = out && !strncmp(out, head, strlen(head));
		char *ro = render(headed ? out + strlen(head) : "");
		h_ok(h, rc == 0 && headed && !strcmp(ro, r2), "rungctl logs JOB prints it after a line naming the attempt (exit %d)",
		     rc);
		free(ro);
		free(head);
		free(out);
		args_s = xasprintf("logs %s --json", id);
		out = h_rungctl(h, args_s, &rc);
		free(args_s);
		json_t *doc = json_loads(out ? out : "", 0, NULL);
		h_ok(h, rc == 0 && doc && !strcmp(h_str(doc, "text"), h_str(p, "text")) && h_int(doc, "next") == h_int(p, "next") &&
			json_is_false(json_object_get(doc, "more")),
		     "rungctl logs JOB --json: the page, its text the whole log (exit %d)", rc);
		json_decref(doc);
	}
	if (h->failed)
		h_diag_json("log", p);
out:
	if (w)
		h_worker_stop(h, w, SIGTERM);
	free(out);
	free(r1);
	free(r2);
	free(path);
	free(raw);
	free(paged);
	free(aid);
	free(id);
	json_decref(p);
	json_decref(as);
	json_decref(done);
	json_decref(job);
	json_decref(cfg);
}

/* rungctl logs --follow, started before the job runs, follows attempt 1 (an OOM), then attempt 2
 * (recovery's next rung), and ends by itself when the job has succeeded, having printed both logs whole. */
static void test_follow(struct harness *h)
{
	const char *env[] = { "RUNG_SIM_STEP_MS=50", NULL };
	const char *args[] = { "--log-interval-ms", "150", NULL };
	char *gpus = h_sim_gpus("wf", 1, 24576);
	struct h_worker_opts o = { .gpus_json = gpus, .env = env, .args = args };
	json_t *cfg = h_config("followed_job", 20), *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", false);
	json_t *job = NULL, *p1 = NULL, *p2 = NULL, *done = NULL;
	char *id = NULL, *cmd = NULL, *out = NULL, *want = NULL, *got = NULL, *h1 = NULL, *h2 = NULL;
	struct h_worker *w = NULL;
	long st = 0;
	int rc = -1;

	h_config_set(cfg, "config.process[0].train.batch_size", json_integer(4));
	job = h_submit(h, cfg, extra); /* batch 4 on 24 GB: an OOM early in training, then batch 1 fits */
	id = h_id(job, "id");
	w = h_worker_start(h, "wf", &o);
	if (!h_ok(h, w && id, "a worker on a 24 GB GPU, a job with batch 4 submitted"))
		goto out;
	cmd = xasprintf("logs %s --follow --interval-ms 100", id);
	out = h_rungctl(h, cmd, &rc); /* returns when the job has ended */
	done = h_job(h, id);
	h_ok(h, rc == 0 && !strcmp(h_str(done, "state"), "succeeded") && h_int(done, "attempts") == 2,
	     "rungctl logs --follow returns by itself once the job has succeeded on attempt 2 (exit %d)", rc);
	p1 = h_getf(h, &st, "/v1/jobs/%s/log?attempt=1", id);
	p2 = h_getf(h, &st, "/v1/jobs/%s/log?attempt=2", id);
	h1 = xasprintf("==> job %s attempt 1 (", id);
	h2 = xasprintf("==> job %s attempt 2 (", id);
	h_ok(h, out && strstr(out, h1) && strstr(out, h2) && strstr(out, h1) < strstr(out, h2),
	     "it names attempt 1, then attempt 2, as it reaches them");
	h_ok(h, strstr(h_str(p1, "text"), "OOM during training step") && !strstr(h_str(p2, "text"), "OOM during training step"),
	     "attempt 1's log holds the OOM, attempt 2's does not");
	if (h->failed) {
		h_diag_json("attempt 1", p1);
		h_diag_json("attempt 2", p2);
	}
	want = util_concat(h_str(p1, "text"), h_str(p2, "text"), NULL);
	{
		/* the output without the two "==> ... <==" lines (stderr, in the same pipe here) */
		size_t n = out ? strlen(out) : 0, o2 = 0;
		got = xmalloc(n + 1);
		for (size_t i = 0; i < n;) {
			const char *nl = strchr(out + i, '\n');
			size_t le = nl ? (size_t)(nl - out) + 1 : n;
			bool header = !strncmp(out + i, "==> job ", 8) && (i == 0 || out[i - 1] == '\n');
			if (!header) {
				memcpy(got + o2, out + i, le - i);
				o2 += le - i;
			}
			i = le;
		}
		got[o2] = '\0';
	}
	h_ok(h, !strcmp(got, want), "between them it printed both attempts' logs whole, in order (%zu bytes)", strlen(got));
out:
	if (w)
		h_worker_stop(h, w, SIGTERM);
	free(h1);
	free(h2);
	free(got);
	free(want);
	free(out);
	free(cmd);
	free(id);
	free(gpus);
	json_decref(p1);
	json_decref(p2);
	json_decref(done);
	json_decref(job);
	json_decref(extra);
	json_decref(cfg);
}

/* POST /v1/attempts/AID/log with from, to and text; the answer, the status in *st. */
static json_t *put(struct harness *h, const char *aid, const char *token, long long from, long long to, const char *text,
		   long *st)
{
	json_t *b = json_pack("{s:s, s:I, s:I, s:s}", "token", token, "from", (json_int_t)from, "to", (json_int_t)to,
			      "text", text);
	json_t *a = h_postf(h, b, st, "/v1/attempts/%s/log", aid);
	json_decref(b);
	return a;
}

static bool answered(const json_t *a, bool stored, long long end)
{
	return json_is_boolean(json_object_get(a, "stored")) && json_is_true(json_object_get(a, "stored")) == stored &&
	       h_int(a, "end") == end;
}

static void test_chunks(struct harness *h)
{
	char *wid = h_fake_register(h, "fake-logs", GPU, 24576);
	json_t *cfg = h_config("chunked_job", 10), *job = h_submit(h, cfg, NULL), *lease = NULL, *a = NULL, *p = NULL;
	char *id = h_id(job, "id"), *aid = NULL;
	const char *token;
	long st = 0;

	p = h_getf(h, &st, "/v1/jobs/%s/log", id);
	h_ok(h, st == 200 && json_is_null(json_object_get(p, "attempt")) && !strcmp(h_str(p, "text"), "") &&
		h_int(p, "next") == 0, "a job not yet leased: no attempt, no text");
	json_decref(p);
	lease = h_fake_lease(h, wid, GPU, 5000, &st);
	aid = h_id(lease, "attempt_id");
	token = h_str(lease, "token");
	if (!h_ok(h, wid && lease && aid, "a fake worker leased the job"))
		goto out;
	a = put(h, aid, token, 0, 12, "line one\nli", &st);
	h_ok(h, st == 200 && answered(a, true, 12), "a first chunk [0, 12) is stored; the log ends at 12");
	json_decref(a);
	a = put(h, aid, token, 0, 12, "line one\nli", &st);
	h_ok(h, st == 200 && answered(a, false, 12), "the same chunk again (its answer lost): not stored twice, end 12");
	json_decref(a);
	a = put(h, aid, token, 20, 30, "lost bytes", &st);
	h_ok(h, st == 200 && answered(a, false, 12), "a chunk past the end (a gap): not stored, end 12 says where to resume");
	json_decref(a);
	a = put(h, aid, token, 12, 25, "ne two\n\rbar", &st);
	h_ok(h, st == 200 && answered(a, true, 25), "the next chunk from 12 is stored; end 25");
	json_decref(a);
	a = put(h, aid, "not-the-token", 25, 30, "x", &st);
	h_ok(h, st == 409 && !strcmp(h_str(a, "error"), "not_running"), "another token: 409 not_running (got %ld)", st);
	json_decref(a);
	a = put(h, aid, token, 25, 65LL * 1024 * 1024 + 1, "x", &st);
	h_ok(h, st == 413 && !strcmp(h_str(a, "field"), "to") && !strcmp(h_str(a, "error"), "log_full"),
	     "a chunk ending past 65 MiB: 413 log_full naming to");
	json_decref(a);
	a = put(h, aid, token, 30, 25, "x", &st);
	h_ok(h, st == 400 && !strcmp(h_str(a, "field"), "to"), "to below from: 400 naming to");
	json_decref(a);
	a = put(h, aid, token, 25, 25, "", &st);
	h_ok(h, st == 400 && !strcmp(h_str(a, "field"), "to"), "an empty chunk (to = from): 400 naming to");
	json_decref(a);
	{
		json_t *b = json_pack("{s:s, s:i, s:s}", "token", token, "to", 30, "text", "x");
		a = h_postf(h, b, &st, "/v1/attempts/%s/log", aid);
		h_ok(h, st == 400 && !strcmp(h_str(a, "field"), "from"), "no from: 400 naming from");
		json_decref(a);
		json_decref(b);
		const char nul[] = "{\"token\": \"%s\", \"from\": 25, \"to\": 27, \"text\": \"a\\u0000\"}";
		char *body = xasprintf(nul, token), *path = xasprintf("/v1/attempts/%s/log", aid);
		a = h_post_raw(h, path, body, strlen(body), &st);
		h_ok(h, st == 400, "text holding a NUL: 400 (got %ld)", st);
		json_decref(a);
		free(body);
		free(path);
		char *big = xmalloc(256 * 1024 + 2);
		memset(big, 'x', 256 * 1024 + 1);
		big[256 * 1024 + 1] = '\0';
		a = put(h, aid, token, 25, 25 + 256 * 1024 + 1, big, &st);
		h_ok(h, st == 413 && !strcmp(h_str(a, "field"), "text"), "a chunk over 256 KiB of text: 413 naming text");
		json_decref(a);
		free(big);
	}
	h->auth_token = h->submitter_token;
	a = put(h, aid, token, 25, 30, "x", &st);
	h->auth_token = h->admin_token;
	h_ok(h, st == 403, "a submitter's token may not send a log: 403 (got %ld)", st);
	json_decref(a);
	p = h_getf(h, &st, "/v1/jobs/%s/log", id);
	h_ok(h, st == 200 && !strcmp(h_str(p, "text"), "line one\nline two\n\rbar") && h_int(p, "next") == 25 &&
		!strcmp(h_str(json_object_get(p, "attempt"), "state"), "running"),
	     "the reader gets the stored chunks in order, nothing twice and nothing of the refused ones");
	json_decref(p);
	{
		char *page = xasprintf("/ui/jobs/%s", id);
		st = h_browse(h, h->admin_token, "GET", page, NULL, NULL);
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "Log of attempt 1 so far") &&
			strstr(h->last_body, "line one\nline two\nbar\n</code></pre>"),
		     "the job page shows the running attempt's log as a terminal would (the bar's '\\r' drawn)");
		free(page);
		page = xasprintf("/ui/jobs/%s/log?attempt=1", id);
		st = h_browse(h, h->admin_token, "GET", page, NULL, NULL);
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "this page reloads every 10 s"),
		     "a running attempt's log page says it reloads (a Refresh header, at its end)");
		free(page);
	}
	{
		json_t *facts = h_facts_success(10);
		json_decref(h_fake_finish(h, aid, token, facts, &st));
		json_decref(facts);
		h_ok(h, st == 200, "the attempt finishes");
	}
	a = put(h, aid, token, 25, 30, "late\n", &st);
	h_ok(h, st == 409, "after the finish the attempt takes no more log: 409 (got %ld)", st);
	json_decref(a);
	{
		char *page = xasprintf("/ui/jobs/%s/log?attempt=1", id), *job_page = xasprintf("/ui/jobs/%s", id);
		char *link = xasprintf("<a href=\"/ui/jobs/%s/log?attempt=1\">", id), *other = NULL;
		st = h_browse(h, h->admin_token, "GET", job_page, NULL, NULL);
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, link) && !strstr(h->last_body, "so far</h2>"),
		     "the job page links each attempt to its log, and shows no live log once none runs");
		st = h_browse(h, h->admin_token, "GET", page, NULL, NULL);
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "log of attempt 1 ") &&
			strstr(h->last_body, "<code>line one\nline two\nbar\n</code></pre>") && !strstr(h->last_body, "reloads every"),
		     "/ui/jobs/ID/log?attempt=1: the attempt's whole log as a terminal shows it, no reload once it ended");
		free(page);
		page = xasprintf("/ui/jobs/%s/log?attempt=x", id);
		st = h_browse(h, h->admin_token, "GET", page, NULL, NULL);
		h_ok(h, st == 400, "?attempt=x: a 400 page (got %ld)", st);
		free(page);
		page = xasprintf("/ui/jobs/%s/log", id);
		other = h_token_create(h, "submitter", "log-reader");
		st = h_browse(h, other, "GET", page, NULL, NULL);
		h_ok(h, st == 404, "another submitter's job's log page: 404 (got %ld)", st);
		free(other);
		free(page);
		free(link);
		free(job_page);
	}
	p = h_getf(h, &st, "/v1/jobs/%s/log?attempt=1&from=12", id);
	h_ok(h, st == 200 && !strcmp(h_str(p, "text"), "ne two\n\rbar") && h_int(p, "from") == 12,
	     "?attempt=1&from=12: the chunks from byte 12");
	json_decref(p);
	p = h_getf(h, &st, "/v1/jobs/%s/log?attempt=7", id);
	h_ok(h, st == 200 && json_is_null(json_object_get(p, "attempt")) && h_int(p, "attempts") == 1,
	     "?attempt=7 of a job with one attempt: attempt null, attempts 1");
	json_decref(p);
	/* the reader's errors */
	static const struct {
		const char *query, *field;
	} bad[] = { { "attempt=0", "attempt" }, { "attempt=x", "attempt" }, { "from=-1", "from" },
		    { "limit_bytes=0", "limit_bytes" }, { "limit_bytes=2000000", "limit_bytes" } };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		p = h_getf(h, &st, "/v1/jobs/%s/log?%s", id, bad[i].query);
		h_ok(h, st == 400 && !strcmp(h_str(p, "field"), bad[i].field), "?%s: 400 naming %s (got %ld)", bad[i].query,
		     bad[i].field, st);
		json_decref(p);
	}
	p = h_getf(h, &st, "/v1/jobs/999999/log");
	h_ok(h, st == 404, "an unknown job: 404");
	json_decref(p);
	{
		char *other = h_token_create(h, "submitter", "other-team");
		h->auth_token = other;
		p = h_getf(h, &st, "/v1/jobs/%s/log", id);
		h->auth_token = h->admin_token;
		h_ok(h, st == 404, "another submitter's job's log: 404 (got %ld)", st);
		json_decref(p);
		free(other);
	}
out:
	free(aid);
	free(id);
	free(wid);
	json_decref(lease);
	json_decref(job);
	json_decref(cfg);
}

struct bg_ctl {
	struct harness *h;
	const char *args;
	char *out;
	int rc;
};

static void *bg_ctl_run(void *arg)
{
	struct bg_ctl *b = arg;
	b->out = h_rungctl(b->h, b->args, &b->rc);
	return NULL;
}

struct refused {
	struct harness *h;
	const char *path; /* "path=/v1/jobs/ID/log" */
};

/* rungd has answered the follower 503 (its database is down). */
static bool follower_refused(void *arg)
{
	struct refused *r = arg;
	char *log = h_slurp(r->h->server.log_path);
	bool seen = false;
	for (char *l = log; l && *l && !seen;) {
		char *nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		seen = strstr(l, r->path) && strstr(l, "status=503");
		l = nl ? nl + 1 : l + strlen(l);
	}
	free(log);
	return seen;
}

static int count_of(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s ? strstr(s, what) : NULL; p; p = strstr(p + 1, what))
		n++;
	return n;
}

/* The database goes away while rungctl logs --follow and rungctl watch wait for a queued job: rungd
 * answers 503 and both wait that out (as they wait out an unreachable rungd), saying so once,
 * instead of ending; once the database is back and the job is cancelled, logs returns 0 and watch
 * prints the verdict (exit 1: the job did not succeed). */
static void test_follow_outage(struct harness *h)
{
	json_t *cfg = h_config("outage_job", 10), *job = h_submit(h, cfg, NULL), *c = NULL;
	char *id = h_id(job, "id"), *args = xasprintf("logs %s --follow --interval-ms 100", id ? id : "0");
	char *wargs = xasprintf("watch %s --interval-ms 100", id ? id : "0");
	char *path = xasprintf("path=/v1/jobs/%s/log", id ? id : "0");
	struct bg_ctl b = { h, args, NULL, -1 }, wb = { h, wargs, NULL, -1 };
	struct refused r = { h, path };
	pthread_t t, wt;
	bool t_on = false, wt_on = false;
	long st = 0;

	if (!h_ok(h, id && h_pg_stop(h, "fast") == 0, "a queued job, and the database stopped"))
		goto out;
	t_on = pthread_create(&t, NULL, bg_ctl_run, &b) == 0;
	wt_on = pthread_create(&wt, NULL, bg_ctl_run, &wb) == 0;
	h_ok(h, t_on && wt_on && wait_until(follower_refused, &r, 20000),
	     "rungd answers the follower 503 while the database is down");
	h_ok(h, h_pg_start(h) == 0, "the database is back");
	c = h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id);
	h_ok(h, st == 200, "the job is cancelled (got %ld)", st);
	if (t_on)
		pthread_join(t, NULL);
	if (wt_on)
		pthread_join(wt, NULL);
	h_ok(h, b.rc == 0 && count_of(b.out, "rungctl: 503") == 1,
	     "rungctl logs --follow waited the outage out, said so once, and returned 0 once the job ended (exit %d)", b.rc);
	h_ok(h, wb.rc == 1 && wb.out && strstr(wb.out, "cancelled after") && count_of(wb.out, "rungctl: 503") <= 1,
	     "rungctl watch waited it out too and printed the verdict (exit %d)", wb.rc);
	if (h->failed) {
		h_diag("follower said: %s", b.out ? b.out : "(nothing)");
		h_diag("watch said: %s", wb.out ? wb.out : "(nothing)");
	}
out:
	free(b.out);
	free(wb.out);
	free(path);
	free(args);
	free(wargs);
	free(id);
	json_decref(c);
	json_decref(job);
	json_decref(cfg);
}

/* A job cancelled before any attempt: --follow has nothing to wait for and returns at once. */
static void test_follow_cancelled(struct harness *h)
{
	json_t *cfg = h_config("never_ran", 10), *job = h_submit(h, cfg, NULL), *c = NULL;
	char *id = h_id(job, "id"), *cmd = xasprintf("logs %s --follow --interval-ms 100", id ? id : "0"), *out = NULL;
	long st = 0;
	int rc = -1;

	c = h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id ? id : "0");
	h_ok(h, st == 200 && !strcmp(h_str(c, "state"), "cancelled"), "a queued job, no worker: cancelled at once");
	out = h_rungctl(h, cmd, &rc);
	h_ok(h, rc == 0 && out && !*out, "rungctl logs --follow of a job that ended with no attempt: returns, prints nothing");
	free(out);
	free(cmd);
	free(id);
	json_decref(c);
	json_decref(job);
	json_decref(cfg);
}

int main(void)
{
	struct harness *h = h_new("it_logs");
	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	test_chunks(h);
	test_worker_sends(h);
	test_follow(h);
	test_follow_cancelled(h);
	test_follow_outage(h);
	return h_free(h);
}
