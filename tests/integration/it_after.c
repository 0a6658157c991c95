/* Integration: jobs that run after others (migration 033, POST /v1/jobs "after") with the real rungd,
 * rung-worker and simulated trainer. A job submitted after a job not yet succeeded waits, scheduled,
 * naming it (GET's waits_for and waiting_for, rungctl show, the job page), and is queued by that
 * job's success: a worker of another pool, parked, takes it within seconds (rungd's fallback poll is
 * two minutes and the worker's long-poll one, so only the wake-up the release sends can do that). A
 * job it waits for that was cancelled holds it (and retention keeps that job) until it is retried
 * and succeeds; "Start now" goes on without them; a retried dependent waits again; with a start time
 * too, the scheduler does not queue it before the job it runs after succeeded, and /metrics does not
 * count it late. Every bad "after" (envelope, query, rungctl) is a 400 naming it with nothing
 * stored, and a submitter may name only its own jobs. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "after.h"
#include "harness.h"
#include "util.h"

#define FAST_MS 8000 /* a released job is leased within this (the wake-up, not a poll) */
#define RUN_MS 60000 /* a job of a few simulated steps ends within this */

/* Submits h_config(name, steps) with extra (borrowed; NULL: none); the status in *st, the answer
 * (new reference) returned. */
static json_t *submit(struct harness *h, const char *name, int steps, const json_t *extra, long *st)
{
	json_t *body = extra ? json_deep_copy(extra) : json_object(), *cfg = h_config(name, steps), *j;

	json_object_set_new(body, "config", cfg);
	j = h_post(h, "/v1/jobs", body, st);
	json_decref(body);
	return j;
}

/* A job of steps steps that starts in an hour: it stays scheduled until started (heap id). */
static char *later(struct harness *h, const char *name, int steps)
{
	json_t *extra = json_pack("{s:i}", "start_in_s", 3600);
	char *id = h_submit_id(h, name, steps, extra);

	json_decref(extra);
	return id;
}

/* {"after": [ids...]} for up to two ids (the second may be NULL). New reference. */
static json_t *after(const char *a, const char *b)
{
	json_t *list = json_array();

	json_array_append_new(list, json_integer(atoll(a)));
	if (b)
		json_array_append_new(list, json_integer(atoll(b)));
	return json_pack("{s:o}", "after", list);
}

/* Cancels job id (NULL: nothing); what it answers is another test's business. */
static void cancel(struct harness *h, const char *id)
{
	long st = 0;

	if (id)
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id));
}

static long long jobs_count(struct harness *h)
{
	return h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);
}

/* Every bad "after" is a 400 naming it, and nothing is stored. */
static void test_bad(struct harness *h)
{
	static const char *const bodies[] = {
		"\"x\"", "[]", "[0]", "[-3]", "[1.5]", "[\"3\"]", "{\"id\": 3}",
		"MANY", /* AFTER_MAX + 1 ids */
		"[9007199254740992]",
	};
	static const char *const queries[] = { "after=abc", "after=", "after=3,", "after=0", "after=3,,4" };
	const char *yaml_hdr[] = { "Content-Type: application/yaml", NULL };
	char *yaml = h_slurp("tests/data/aitk_flux_lora_24gb.yaml");
	long long before = jobs_count(h);
	long st = 0;
	json_t *j;
	size_t i;

	char *many = xstrdup("[1"), *next;
	for (int k = 2; k <= AFTER_MAX + 1; k++) {
		next = xasprintf("%s,%d", many, k);
		free(many);
		many = next;
	}
	next = xasprintf("%s]", many);
	free(many);
	many = next;
	for (i = 0; i < ARRAY_LEN(bodies); i++) {
		json_t *cfg = h_config("bad_after", 10);
		char *cfg_text = json_dumps(cfg, JSON_COMPACT);
		char *body = xasprintf("{\"config\": %s, \"after\": %s}", cfg_text, strcmp(bodies[i], "MANY") ? bodies[i] : many);
		j = h_request(h, "POST", "/v1/jobs", body, strlen(body), NULL, &st);
		h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after"), "after %.40s: 400 naming after (%ld %s)", bodies[i],
		     st, h_str(j, "message"));
		json_decref(j);
		free(body);
		free(cfg_text);
		json_decref(cfg);
	}
	for (i = 0; i < ARRAY_LEN(queries); i++) {
		char *path = xasprintf("/v1/jobs?%s", queries[i]);
		j = h_request(h, "POST", path, yaml, strlen(yaml), yaml_hdr, &st);
		h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after"), "a raw file with ?%s: 400 naming after (%ld %s)",
		     queries[i], st, h_str(j, "message"));
		json_decref(j);
		free(path);
	}
	{
		json_t *extra = json_pack("{s:[I]}", "after", (json_int_t)987654321);
		j = submit(h, "after_missing", 10, extra, &st);
		h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after") && strstr(h_str(j, "message"), "987654321") &&
			     strstr(h_str(j, "message"), "does not exist"),
		     "after a job that does not exist: 400 naming after and the id (%ld %s)", st, h_str(j, "message"));
		json_decref(j);
		json_decref(extra);
	}
	h_ok(h, jobs_count(h) == before, "and none of them stored a job");
	{
		/* a submitter may run its job only after its own jobs */
		char *mine = later(h, "admins_dep", 10);
		json_t *extra = mine ? after(mine, NULL) : NULL;
		const char *saved = h->auth_token;
		long long n;
		h->auth_token = h->submitter_token;
		n = jobs_count(h);
		j = extra ? submit(h, "not_yours", 10, extra, &st) : NULL;
		h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after") && strstr(h_str(j, "message"), "not a job of yours") &&
			     jobs_count(h) == n,
		     "a submitter naming the admin's job: 400 naming after, \"not a job of yours\", nothing stored (%ld %s)",
		     st, h_str(j, "message"));
		json_decref(j);
		h->auth_token = saved;
		cancel(h, mine);
		json_decref(extra);
		free(mine);
	}
	{
		int rc = 0;
		char *out = h_rungctl(h, "submit tests/data/aitk_flux_lora_24gb.yaml --after 12,x", &rc);
		h_ok(h, rc == 2 && strstr(out, "--after 12,x") && strstr(out, "1 to 256 job ids"),
		     "rungctl submit --after 12,x: exit 2 naming --after (%d %.200s)", rc, out);
		free(out);
	}
	free(yaml);
	free(many);
}

/* A job after one not yet succeeded waits, naming it, and that job's success queues it: a parked
 * worker of another pool takes it at once. */
static void test_chain(struct harness *h)
{
	char *a = later(h, "chain_a", 10), *b = NULL, *kinds = NULL, *page = NULL;
	json_t *extra = a ? after(a, NULL) : NULL, *job = NULL, *got = NULL;
	struct h_job_ref la = { h, NULL };
	long st = 0;
	int64_t t0;

	if (!h_ok(h, a != NULL, "job A, to start in an hour"))
		goto out;
	json_object_set_new(extra, "pool", json_string("it-after"));
	job = submit(h, "chain_b", 10, extra, &st);
	b = h_id(job, "id");
	h_ok(h, st == 201 && !strcmp(h_str(job, "state"), "scheduled") && json_integer_value(json_array_get(
		     json_object_get(job, "waits_for"), 0)) == atoll(a) && json_array_size(json_object_get(job, "after")) == 1,
	     "job B after A: 201, scheduled, after [A], waits_for [A] (%ld %s)", st, h_str(job, "state"));
	if (!b)
		goto out;
	got = h_job(h, b);
	{
		char *want = xasprintf("waits for job %s to succeed", a);
		const json_t *w = json_array_get(json_object_get(got, "waiting_for"), 0);
		h_ok(h, got && !strcmp(h_str(got, "next_action"), want) && json_integer_value(json_object_get(w, "id")) == atoll(a) &&
			     !strcmp(h_str(w, "state"), "scheduled") && !strcmp(h_str(w, "name"), "chain_a") &&
			     json_is_null(json_object_get(got, "run_after")),
		     "GET B: next_action \"%s\", waiting_for [{A, chain_a, scheduled}], no start time", want);
		free(want);
		want = xasprintf("scheduled: waits for job %s (scheduled) to succeed", a);
		h_ok(h, h_show_has(h, b, want), "rungctl show B: \"%s\"", want);
		{
			char *line = xasprintf("after             [%s]\n", a);
			h_ok(h, h_show_has(h, b, line), "and its summary lists the jobs it runs after");
			free(line);
		}
		page = xasprintf("/ui/jobs/%s", b);
		st = h_browse(h, h->admin_token, "GET", page, NULL, NULL);
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, want), "the job page says it too (%ld)", st);
		{
			char *link = xasprintf("<dt>runs after</dt><dd><a href=\"/ui/jobs/%s\">%s</a></dd>", a, a);
			h_ok(h, h->last_body && strstr(h->last_body, link), "and links the job it runs after");
			free(link);
		}
		free(want);
	}
	/* A starts and succeeds on the default pool's worker; B runs in it-after, whose worker is parked */
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/start", a));
	json_decref(got);
	got = h_wait_job(h, a, "succeeded", RUN_MS);
	t0 = util_mono_ms();
	la.id = b;
	h_ok(h, got && wait_until(h_job_leased, &la, FAST_MS), "A succeeded, and B was leased at once by the parked worker of "
	     "its pool (%lld ms: the release's wake-up, not a poll)", (long long)(util_mono_ms() - t0));
	json_decref(got);
	got = h_wait_job(h, b, "succeeded", RUN_MS);
	h_ok(h, got && json_is_null(json_object_get(got, "waits_for")) && json_array_size(json_object_get(got, "after")) == 1,
	     "B succeeded; waits_for is null, after [A] stays");
	kinds = h_event_kinds(h, b);
	h_ok(h, strstr(kinds, "submitted:>scheduled,") && strstr(kinds, ",dependencies_met:scheduled>queued,"),
	     "B's events: submitted to scheduled, dependencies_met scheduled>queued (%s)", kinds);
	{
		const char *p[2] = { b, a };
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts x WHERE x.job_id = $1::bigint AND x.started_at >= "
				     "(SELECT finished_at FROM jobs WHERE id = $2::bigint)", 2, p) == 1,
		     "B's attempt started after A finished");
	}
	{
		/* a job after one that already succeeded is queued at once */
		json_t *extra2 = after(a, NULL), *c = submit(h, "chain_c", 10, extra2, &st);
		char *cid = h_id(c, "id");
		h_ok(h, st == 201 && !strcmp(h_str(c, "state"), "queued") && json_is_null(json_object_get(c, "waits_for")),
		     "job C after A, which succeeded: 201, queued at once (%ld %s)", st, h_str(c, "state"));
		json_decref(h_wait_job(h, cid ? cid : "0", "succeeded", RUN_MS));
		free(cid);
		json_decref(c);
		json_decref(extra2);
	}
out:
	free(page);
	free(kinds);
	json_decref(got);
	json_decref(job);
	json_decref(extra);
	free(a);
	free(b);
}

/* A job it waits for was cancelled: it holds the job (and retention keeps it) until it is retried
 * and succeeds. */
static void test_cancelled_dep(struct harness *h)
{
	char *a = h_submit_id(h, "held_ok", 10, NULL), *e = later(h, "held_e", 10), *f = NULL, *want = NULL;
	json_t *extra = NULL, *job = NULL, *got = NULL;
	long st = 0;

	if (!h_ok(h, a && e, "jobs A (runs now) and E (in an hour)"))
		goto out;
	json_decref(h_wait_job(h, a, "succeeded", RUN_MS));
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", e));
	h_ok(h, st == 200, "E cancelled (%ld)", st);
	extra = after(e, a);
	job = submit(h, "held_f", 10, extra, &st);
	f = h_id(job, "id");
	h_ok(h, st == 201 && !strcmp(h_str(job, "state"), "scheduled") && json_array_size(json_object_get(job, "waits_for")) == 1 &&
		     json_integer_value(json_array_get(json_object_get(job, "waits_for"), 0)) == atoll(e) &&
		     json_integer_value(json_array_get(json_object_get(job, "after"), 0)) == atoll(a),
	     "F after E (cancelled) and A (succeeded): scheduled, after sorted [A, E], waits_for [E] (%ld)", st);
	if (!f)
		goto out;
	{
		const json_t *w = json_array_get(json_object_get(job, "warnings"), 0);
		h_ok(h, !strcmp(h_str(w, "field"), "after") && strstr(h_str(w, "message"), "was cancelled: this job waits until it "
		     "is retried and succeeds"), "the submit's reply warns that E was cancelled (%s)", h_str(w, "message"));
	}
	want = xasprintf("scheduled: waits for job %s (cancelled) to succeed; job %s was cancelled: this job starts only "
			 "once it is retried and succeeds, or when this one is started now", e, e);
	h_ok(h, h_show_has(h, f, want), "rungctl show F: \"%s\"", want);
	free(want);
	got = h_job(h, e);
	h_ok(h, got && json_array_size(json_object_get(got, "awaited_by")) == 1 &&
		     json_integer_value(json_array_get(json_object_get(got, "awaited_by"), 0)) == atoll(f),
	     "GET E: awaited_by [F]");
	json_decref(got);
	got = NULL;
	want = xasprintf("job %s waits for this one to succeed: it starts only once this one is retried and succeeds", f);
	h_ok(h, h_show_has(h, e, want), "rungctl show E: \"%s\"", want);
	{
		char *page = xasprintf("/ui/jobs/%s", e);
		long pst = h_browse(h, h->admin_token, "GET", page, NULL, NULL);
		char *link = xasprintf("<a href=\"/ui/jobs/%s\">%s</a></dd>", f, f);
		h_ok(h, pst == 200 && h->last_body && strstr(h->last_body, want) && strstr(h->last_body, link),
		     "E's page says it too, with a link to F (%ld)", pst);
		free(link);
		free(page);
	}
	{
		const char *p[1] = { e };
		/* retention walks the jobs in id order and stops at the first one created within its window:
		 * the jobs before E are made as old (they ended just now, so none of them is deleted) */
		h_ok(h, h_sql_int(h, "UPDATE jobs SET finished_at = now() - interval '30 days' WHERE id = $1::bigint "
				     "RETURNING 1", 1, p) == 1 &&
			     h_sql_int(h, "UPDATE jobs SET created_at = now() - interval '31 days' WHERE id <= $1::bigint "
					  "RETURNING 1", 1, p) == 1,
		     "E ended 30 days ago");
		h_ok(h, h_sql_int(h, "SELECT rung_prune(1, 1000, '{1}')", 0, NULL) == 0, "retention (1 day) deletes nothing");
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs WHERE id = $1::bigint", 1, p) == 1,
		     "retention (1 day) keeps E: F waits for it");
	}
	got = h_job(h, f);
	h_ok(h, got && !strcmp(h_str(got, "state"), "scheduled") && h_int(got, "attempts") == 0, "F still waits, never leased");
	json_decref(got);
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/retry", e));
	h_ok(h, st == 200, "E retried (%ld)", st);
	got = h_wait_job(h, e, "succeeded", RUN_MS);
	json_decref(got);
	got = h_wait_job(h, f, "succeeded", RUN_MS);
	h_ok(h, got != NULL, "E succeeded, and then F ran to success");
	json_decref(got);
	got = h_job(h, e);
	h_ok(h, got && !json_object_get(got, "awaited_by"), "GET E, succeeded: no awaited_by");
out:
	free(want);
	json_decref(got);
	json_decref(job);
	json_decref(extra);
	free(a);
	free(e);
	free(f);
}

/* "Start now" goes on without the jobs it waits for; a retried dependent waits again. */
static void test_start_and_retry(struct harness *h)
{
	char *g = later(h, "start_g", 10), *hh = NULL, *l = NULL, *kinds = NULL;
	json_t *extra = g ? after(g, NULL) : NULL, *job = NULL, *got = NULL, *ev = NULL, *e;
	long st = 0;
	size_t i;
	bool seen = false;

	if (!h_ok(h, g != NULL, "job G, to start in an hour"))
		goto out;
	job = submit(h, "start_h", 10, extra, &st);
	hh = h_id(job, "id");
	json_decref(job);
	job = hh ? h_postf(h, NULL, &st, "/v1/jobs/%s/start", hh) : NULL;
	h_ok(h, st == 200 && !strcmp(h_str(job, "state"), "queued") && json_is_null(json_object_get(job, "waits_for")),
	     "H after G, started now: 200, queued, waits_for cleared (%ld)", st);
	ev = hh ? h_getf(h, &st, "/v1/jobs/%s/events", hh) : NULL;
	json_array_foreach(json_object_get(ev, "events"), i, e)
		seen |= !strcmp(h_str(e, "kind"), "started_now") && strstr(h_str(e, "reason"), "without waiting for job") &&
			json_integer_value(json_array_get(json_object_get(json_object_get(e, "data"), "waits_for"), 0)) == atoll(g);
	h_ok(h, seen, "its event started_now says it went on without G, data.waits_for [G]");
	got = hh ? h_wait_job(h, hh, "succeeded", RUN_MS) : NULL;
	h_ok(h, got != NULL, "H ran to success while G is still scheduled");
	json_decref(got);
	got = NULL;
	/* a dependent cancelled, then retried: it waits again for G */
	json_decref(job);
	job = submit(h, "retry_l", 10, extra, &st);
	l = h_id(job, "id");
	if (!l)
		goto out;
	cancel(h, l);
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/retry", l));
	kinds = h_event_kinds(h, l);
	h_ok(h, st == 200 && strstr(kinds, "retried:cancelled>scheduled"),
	     "L (after G) cancelled and retried: it waits again, scheduled (%ld %s)", st, kinds);
	got = h_job(h, l);
	h_ok(h, got && !strcmp(h_str(got, "state"), "scheduled") &&
		     json_integer_value(json_array_get(json_object_get(got, "waits_for"), 0)) == atoll(g),
	     "GET L: scheduled, waits_for [G]");
	cancel(h, l);
	cancel(h, g);
out:
	free(kinds);
	json_decref(ev);
	json_decref(got);
	json_decref(job);
	json_decref(extra);
	free(g);
	free(hh);
	free(l);
}

/* With a start time too: the scheduler does not queue it before the job it runs after succeeded,
 * and /metrics does not count it late meanwhile. */
static void test_time_and_after(struct harness *h)
{
	char *k = later(h, "timed_k", 200), *j = NULL;
	json_t *extra = k ? after(k, NULL) : NULL, *job = NULL, *got = NULL;
	struct h_job_ref la = { h, NULL };
	long st = 0;

	if (!h_ok(h, k != NULL, "job K of 200 steps, to start in an hour"))
		goto out;
	json_object_set_new(extra, "start_in_s", json_integer(3600));
	job = submit(h, "timed_j", 10, extra, &st);
	j = h_id(job, "id");
	h_ok(h, st == 201 && !strcmp(h_str(job, "state"), "scheduled") && json_is_string(json_object_get(job, "run_after")),
	     "J after K, in an hour: scheduled with its run_after (%ld)", st);
	if (!j)
		goto out;
	{
		const char *p[2] = { j, k };
		h_ok(h, h_sql_int(h, "UPDATE jobs SET run_after = CASE id WHEN $1::bigint THEN now() - interval '1 hour' "
				     "ELSE now() - interval '1 second' END WHERE id IN ($1::bigint, $2::bigint) RETURNING 1", 2, p) == 1,
		     "both start times moved into the past (J's an hour ago)");
	}
	la.id = k;
	h_ok(h, wait_until(h_job_leased, &la, FAST_MS), "the scheduler queued K and it runs");
	{
		char *text = h_scrape(h);
		got = h_job(h, j);
		bool waiting = got && !strcmp(h_str(got, "state"), "scheduled");
		double late = h_sample(text, "rung_scheduled_overdue_seconds");
		h_ok(h, !waiting || (late >= 0 && late < 600),
		     "while J waits for K, /metrics does not count it late (rung_scheduled_overdue_seconds %.0f)", late);
		h_ok(h, waiting && h_int(got, "attempts") == 0, "J, due an hour ago, was not queued: it waits for K");
		free(text);
	}
	json_decref(got);
	got = h_wait_job(h, j, "succeeded", RUN_MS * 2);
	{
		const char *p[2] = { j, k };
		h_ok(h, got && h_sql_int(h, "SELECT count(*) FROM attempts x WHERE x.job_id = $1::bigint AND x.started_at >= "
					   "(SELECT finished_at FROM jobs WHERE id = $2::bigint AND state = 'succeeded')", 2, p) == 1,
		     "J ran only after K succeeded");
	}
out:
	json_decref(got);
	json_decref(job);
	json_decref(extra);
	free(k);
	free(j);
}

/* Idempotency-Key: the same "after" repeats the job, another is a conflict; a raw file takes
 * ?after=; rungctl submit --after. */
static void test_forms(struct harness *h)
{
	char *g = later(h, "forms_g", 10), *id1 = NULL, *id2 = NULL, *path = NULL, *yaml = h_slurp("tests/data/aitk_flux_lora_24gb.yaml");
	const char *key_hdr[] = { "Idempotency-Key: after-1", NULL };
	const char *yaml_hdr[] = { "Content-Type: application/yaml", NULL };
	json_t *body = NULL, *j1 = NULL, *j2 = NULL;
	long st1 = 0, st2 = 0;

	if (!h_ok(h, g != NULL, "job G, to start in an hour"))
		goto out;
	body = after(g, NULL);
	json_object_set_new(body, "config", h_config("idem_after", 10));
	j1 = h_post_hdr(h, "/v1/jobs", body, key_hdr, &st1);
	j2 = h_post_hdr(h, "/v1/jobs", body, key_hdr, &st2);
	id1 = h_id(j1, "id");
	id2 = h_id(j2, "id");
	h_ok(h, st1 == 201 && st2 == 200 && id1 && id2 && !strcmp(id1, id2) && !strcmp(h_str(j2, "state"), "scheduled"),
	     "the same submit with after and an Idempotency-Key twice: 201 then 200, the same job (%ld %ld)", st1, st2);
	json_decref(j2);
	json_array_append_new(json_object_get(body, "after"), json_integer(atoll(id1 ? id1 : "1")));
	j2 = h_post_hdr(h, "/v1/jobs", body, key_hdr, &st2);
	h_ok(h, st2 == 409, "the key again with another after: 409 (%ld)", st2);
	json_decref(j2);
	path = xasprintf("/v1/jobs?after=%s&name=raw_after", g);
	j2 = h_request(h, "POST", path, yaml, strlen(yaml), yaml_hdr, &st2);
	h_ok(h, st2 == 201 && !strcmp(h_str(j2, "state"), "scheduled") &&
		     json_integer_value(json_array_get(json_object_get(j2, "waits_for"), 0)) == atoll(g),
	     "a raw YAML file with ?after=G: 201, scheduled, waits_for [G] (%ld)", st2);
	free(id2);
	id2 = h_id(j2, "id");
	{
		int rc = 0;
		char *args = xasprintf("submit tests/data/aitk_flux_lora_24gb.yaml --name cli_after --after %s,%s --json", g,
				       id2 ? id2 : "1");
		char *out = h_rungctl(h, args, &rc);
		json_t *doc = json_loads(out, 0, NULL);
		h_ok(h, rc == 0 && doc && json_array_size(json_object_get(doc, "after")) == 2 &&
			     !strcmp(h_str(doc, "state"), "scheduled"),
		     "rungctl submit --after G,RAW: the job runs after both (%d %.200s)", rc, out);
		{
			char *cid = h_id(doc, "id");
			cancel(h, cid);
			free(cid);
		}
		json_decref(doc);
		free(out);
		free(args);
	}
	cancel(h, id1);
	cancel(h, id2);
	cancel(h, g);
out:
	json_decref(j1);
	json_decref(j2);
	json_decref(body);
	free(path);
	free(yaml);
	free(g);
	free(id1);
	free(id2);
}

/* rungctl cancel --after A: the jobs that wait for A, directly or through others, and no other. */
static void test_cancel_after(struct harness *h)
{
	char *a = later(h, "drop_a", 10), *g = later(h, "drop_g", 10), *b = NULL, *c = NULL, *d = NULL, *args = NULL, *out = NULL;
	json_t *ea = NULL, *eb = NULL, *eg = NULL, *j = NULL;
	long st = 0;
	int rc = 0;

	if (!h_ok(h, a && g, "jobs A and G, to start in an hour"))
		goto out;
	ea = after(a, NULL);
	b = h_submit_id(h, "drop_b", 10, ea);
	eb = b ? after(b, NULL) : NULL;
	c = eb ? h_submit_id(h, "drop_c", 10, eb) : NULL;
	eg = after(g, NULL);
	d = h_submit_id(h, "drop_d", 10, eg);
	if (!h_ok(h, b && c && d, "B after A, C after B, D after G"))
		goto out;
	args = xasprintf("cancel --after %s --dry-run", a);
	out = h_rungctl(h, args, &rc);
	{
		char *want = xasprintf("would cancel 2 job(s): %s %s\n", b, c);
		h_ok(h, rc == 0 && out && strstr(out, want), "rungctl cancel --after A --dry-run: B and C, through B (%.200s)", out);
		free(want);
	}
	free(out);
	free(args);
	args = xasprintf("cancel --after %s", a);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "cancelled or told to stop: 2 job(s)"), "rungctl cancel --after A (%.200s)", out);
	{
		const char *p[4] = { a, b, c, d };
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs WHERE (id IN ($2::bigint, $3::bigint) AND state = 'cancelled') OR "
				     "(id IN ($1::bigint, $4::bigint) AND state = 'scheduled')", 4, p) == 4,
		     "B and C cancelled; A and D (after G) still scheduled");
	}
	{
		json_t *bad = json_pack("{s:s}", "after", "x");
		j = h_post(h, "/v1/jobs/cancel", bad, &st);
		json_decref(bad);
	}
	h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after"), "POST /v1/jobs/cancel {\"after\": \"x\"}: 400 naming after (%ld)", st);
	cancel(h, a);
	cancel(h, g);
	cancel(h, d);
out:
	free(out);
	free(args);
	json_decref(j);
	json_decref(ea);
	json_decref(eb);
	json_decref(eg);
	free(a);
	free(g);
	free(b);
	free(c);
	free(d);
}

/* POST /v1/jobs/{id}/after and rungctl after: a job not started yet changes the jobs it runs after;
 * a cycle, an unknown job, a bad body or a job that ran are refused. */
static void test_set_after(struct harness *h)
{
	char *p = later(h, "set_p", 10), *q = NULL, *done = h_submit_id(h, "set_done", 10, NULL), *args = NULL, *out = NULL;
	char *kinds = NULL;
	json_t *extra = json_pack("{s:s}", "pool", "it-nowhere"), *j = NULL, *body = NULL;
	long st = 0;
	int rc = 0;

	q = h_submit_id(h, "set_q", 10, extra);
	if (!h_ok(h, p && q && done, "P (in an hour), Q (queued in a pool no worker serves), and a job that runs"))
		goto out;
	args = xasprintf("after %s %s", q, p);
	out = h_rungctl(h, args, &rc);
	j = h_job(h, q);
	h_ok(h, rc == 0 && out && strstr(out, "scheduled: waits for job") && j && !strcmp(h_str(j, "state"), "scheduled") &&
		     json_integer_value(json_array_get(json_object_get(j, "waits_for"), 0)) == atoll(p),
	     "rungctl after Q P: Q waits, scheduled, for P (%d %.200s)", rc, out);
	kinds = h_event_kinds(h, q);
	h_ok(h, strstr(kinds, "after_changed:queued>scheduled") != NULL, "with an event after_changed (%s)", kinds);
	json_decref(j);
	body = json_loads("{\"after\": [0]}", 0, NULL);
	j = h_postf(h, body, &st, "/v1/jobs/%s/after", q);
	h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after"), "after [0]: 400 naming after (%ld)", st);
	json_decref(j);
	json_decref(body);
	body = json_object();
	j = h_postf(h, body, &st, "/v1/jobs/%s/after", q);
	h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after"), "no after: 400 naming after (%ld)", st);
	json_decref(j);
	json_decref(body);
	body = json_pack("{s:[I]}", "after", (json_int_t)987654321);
	j = h_postf(h, body, &st, "/v1/jobs/%s/after", q);
	h_ok(h, st == 400 && strstr(h_str(j, "message"), "does not exist"), "after a job that does not exist: 400 (%ld)", st);
	json_decref(j);
	json_decref(body);
	body = json_pack("{s:[I]}", "after", (json_int_t)atoll(q));
	j = h_postf(h, body, &st, "/v1/jobs/%s/after", p);
	h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after") && strstr(h_str(j, "message"), "wait forever"),
	     "P after Q, which waits for P: 400, a cycle (%ld %s)", st, h_str(j, "message"));
	json_decref(j);
	j = h_postf(h, body, &st, "/v1/jobs/%s/after", q);
	h_ok(h, st == 400 && strstr(h_str(j, "message"), "wait forever"), "Q after itself: 400, a cycle (%ld)", st);
	json_decref(j);
	json_decref(body);
	json_decref(h_wait_job(h, done, "succeeded", RUN_MS));
	body = json_pack("{s:[I]}", "after", (json_int_t)atoll(p));
	j = h_postf(h, body, &st, "/v1/jobs/%s/after", done);
	h_ok(h, st == 409, "a job that ran: 409 (%ld)", st);
	json_decref(j);
	json_decref(body);
	body = NULL;
	free(out);
	free(args);
	args = xasprintf("after %s 12,x", q);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 2 && out && strstr(out, "rungctl after: 12,x: give 1 to 256 job ids"),
	     "rungctl after Q 12,x: exit 2, the ids named, nothing sent (%d %.200s)", rc, out);
	free(out);
	free(args);
	args = xasprintf("after %s --none", q);
	out = h_rungctl(h, args, &rc);
	j = h_job(h, q);
	h_ok(h, rc == 0 && j && !strcmp(h_str(j, "state"), "queued") && json_is_null(json_object_get(j, "waits_for")) &&
		     json_is_null(json_object_get(j, "after")),
	     "rungctl after Q --none: queued again, waiting for no job (%d %.200s)", rc, out);
	json_decref(j);
	j = NULL;
	cancel(h, p);
	cancel(h, q);
out:
	free(kinds);
	free(out);
	free(args);
	json_decref(j);
	json_decref(body);
	json_decref(extra);
	free(p);
	free(q);
	free(done);
}

/* after_when (migration 036): bad values and a lone after_when are 400s naming after_when (envelope,
 * query, rungctl); "ended" starts a job once the job it runs after ends however it ends: a cancel
 * here, and the parked worker of its pool takes it within seconds (the cancel wakes the waiters);
 * "failed" after a job that succeeds cancels it, and is refused (409 after_never) after one that
 * already succeeded; rungctl after --when changes it, and keeps it when not given. */
static void test_after_when(struct harness *h)
{
	const char *yaml_hdr[] = { "Content-Type: application/yaml", NULL };
	char *yaml = h_slurp("tests/data/aitk_flux_lora_24gb.yaml");
	char *a = later(h, "when_a", 10), *b = NULL, *c = later(h, "when_c", 10), *d = NULL, *g = NULL, *want = NULL;
	char *args = NULL, *out = NULL, *kinds = NULL, *page = NULL;
	json_t *extra = NULL, *j = NULL, *got = NULL;
	struct h_job_ref lb = { h, NULL };
	long long before;
	long st = 0;
	int rc = 0;
	bool leased;
	int64_t t0;

	if (!h_ok(h, a && c && yaml, "jobs A and C, to start in an hour"))
		goto out;
	before = jobs_count(h);
	extra = after(a, NULL);
	json_object_set_new(extra, "after_when", json_string("sometimes"));
	j = submit(h, "when_bad", 10, extra, &st);
	h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after_when") && strstr(h_str(j, "message"), "ended"),
	     "after_when \"sometimes\": 400 naming after_when (%ld %s)", st, h_str(j, "message"));
	json_decref(j);
	json_object_del(extra, "after");
	json_object_set_new(extra, "after_when", json_string("ended"));
	j = submit(h, "when_alone", 10, extra, &st);
	h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after_when") && strstr(h_str(j, "message"), "needs after"),
	     "after_when without after: 400 naming after_when (%ld %s)", st, h_str(j, "message"));
	json_decref(j);
	j = h_request(h, "POST", "/v1/jobs?after=1&after_when=maybe", yaml, strlen(yaml), yaml_hdr, &st);
	h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after_when"), "a raw file with ?after_when=maybe: 400 naming it (%ld %s)",
	     st, h_str(j, "message"));
	json_decref(j);
	j = NULL;
	h_ok(h, jobs_count(h) == before, "and none of them stored a job");
	out = h_rungctl(h, "submit tests/data/aitk_flux_lora_24gb.yaml --after 1 --after-when later", &rc);
	h_ok(h, rc == 2 && strstr(out, "--after-when later") && strstr(out, "ended"),
	     "rungctl submit --after-when later: exit 2 naming it (%d %.200s)", rc, out);
	free(out);
	out = h_rungctl(h, "submit tests/data/aitk_flux_lora_24gb.yaml --after-when ended", &rc);
	h_ok(h, rc == 2 && strstr(out, "needs --after"), "rungctl submit --after-when without --after: exit 2 (%d %.200s)", rc, out);
	free(out);
	out = NULL;
	json_decref(extra);

	/* B after A, once it ends: A's cancel starts B, on the parked worker of its pool */
	extra = after(a, NULL);
	json_object_set_new(extra, "after_when", json_string("ended"));
	json_object_set_new(extra, "pool", json_string("it-after"));
	j = submit(h, "when_b", 10, extra, &st);
	b = h_id(j, "id");
	h_ok(h, st == 201 && !strcmp(h_str(j, "state"), "scheduled") && !strcmp(h_str(j, "after_when"), "ended"),
	     "B after A once it ends: 201, scheduled, after_when ended (%ld %s)", st, h_str(j, "after_when"));
	json_decref(j);
	j = NULL;
	if (!b)
		goto out;
	want = xasprintf("scheduled: waits for job %s (scheduled) to end", a);
	h_ok(h, h_show_has(h, b, want), "rungctl show B: \"%s\"", want);
	{
		char *line = xasprintf("%-17s %s\n", "after_when", "ended");
		h_ok(h, h_show_has(h, b, line), "and its summary says after_when ended");
		free(line);
	}
	page = xasprintf("/ui/jobs/%s", b);
	st = h_browse(h, h->admin_token, "GET", page, NULL, NULL);
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, want) && strstr(h->last_body, "once they end, whatever the outcome"),
	     "the job page says it, and how B runs after A (%ld)", st);
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", a));
	t0 = util_mono_ms();
	lb.id = b;
	leased = wait_until(h_job_leased, &lb, FAST_MS);
	h_ok(h, st == 200 && leased, "A cancelled, and B was leased at once by the parked worker of its pool (%lld ms: the "
	     "cancel's wake-up, not a poll)", (long long)(util_mono_ms() - t0));
	got = h_wait_job(h, b, "succeeded", RUN_MS);
	kinds = h_event_kinds(h, b);
	h_ok(h, got && strstr(kinds, ",dependencies_met:scheduled>queued,"), "B succeeded after dependencies_met (%s)", kinds);
	json_decref(got);
	got = NULL;
	free(want);

	/* D after C only if it fails: C's success cancels D */
	json_decref(extra);
	extra = after(c, NULL);
	json_object_set_new(extra, "after_when", json_string("failed"));
	j = submit(h, "when_d", 10, extra, &st);
	d = h_id(j, "id");
	h_ok(h, st == 201 && !strcmp(h_str(j, "state"), "scheduled"), "D after C only if it fails: scheduled (%ld)", st);
	json_decref(j);
	j = NULL;
	if (!d)
		goto out;
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/start", c));
	json_decref(h_wait_job(h, c, "succeeded", RUN_MS));
	got = h_wait_job(h, d, "cancelled", RUN_MS);
	want = xasprintf("job %s succeeded: this job was to run only if it failed or was cancelled", c);
	h_ok(h, got && !strcmp(h_str(json_object_get(got, "result"), "reason"), want) &&
		     h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint", 1, (const char *[]){ d }) == 0,
	     "C succeeded: D was cancelled without running, its result says why (%s)", h_str(json_object_get(got, "result"), "reason"));
	json_decref(got);
	got = NULL;
	before = jobs_count(h);
	j = submit(h, "when_e", 10, extra, &st);
	h_ok(h, st == 409 && !strcmp(h_str(j, "error"), "after_never") && !strcmp(h_str(j, "field"), "after") &&
		     strstr(h_str(j, "message"), "would never start") && jobs_count(h) == before,
	     "E after C (succeeded) only if it fails: 409 after_never naming after, nothing stored (%ld %s)", st,
	     h_str(j, "message"));
	json_decref(j);
	j = NULL;

	/* rungctl after --when: set, kept when not given, a bad word refused */
	json_decref(extra);
	extra = json_pack("{s:s}", "pool", "it-nowhere");
	g = h_submit_id(h, "when_g", 10, extra);
	free(a);
	a = later(h, "when_a2", 10);
	if (!h_ok(h, g && a, "G (queued where no worker serves) and A2 (in an hour)"))
		goto out;
	free(args);
	args = xasprintf("after %s %s --when ended", g, a);
	out = h_rungctl(h, args, &rc);
	j = h_job(h, g);
	h_ok(h, rc == 0 && strstr(out, "to end") && j && !strcmp(h_str(j, "after_when"), "ended"),
	     "rungctl after G A2 --when ended: G waits for A2 to end (%d %.200s)", rc, out);
	json_decref(j);
	free(out);
	free(args);
	args = xasprintf("after %s %s", g, a);
	out = h_rungctl(h, args, &rc);
	j = h_job(h, g);
	h_ok(h, rc == 0 && j && !strcmp(h_str(j, "after_when"), "ended"), "rungctl after G A2 without --when keeps ended (%d)", rc);
	json_decref(j);
	j = NULL;
	free(out);
	free(args);
	args = xasprintf("after %s %s --when whenever", g, a);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 2 && strstr(out, "--when whenever"), "rungctl after --when whenever: exit 2 (%d %.200s)", rc, out);
	{
		json_t *body = json_loads("{\"after\": null, \"after_when\": \"ended\"}", 0, NULL);
		j = h_postf(h, body, &st, "/v1/jobs/%s/after", g);
		h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "after_when"), "POST after {null, after_when}: 400 naming after_when (%ld)",
		     st);
		json_decref(body);
	}
	cancel(h, g);
	cancel(h, a);
out:
	free(yaml);
	free(page);
	free(kinds);
	free(want);
	free(out);
	free(args);
	json_decref(j);
	json_decref(got);
	json_decref(extra);
	free(a);
	free(b);
	free(c);
	free(d);
	free(g);
}

/* rungctl submit --then FILE: a sweep of two (in a pool no worker serves, so that they wait) and a job
 * after both, once they end, carrying the sweep's label and pool; the sweep's two cancels release it
 * (queued). --dry-run says so and sends nothing; --then-when without --then, an unreadable --then file
 * and a sweep of more than 32 with --then are refused before anything is sent. */
static void test_then(struct harness *h)
{
	const char *fx = "tests/data/aitk_flux_lora_24gb.yaml";
	char *args = NULL, *out = NULL, *ids[3] = { NULL, NULL, NULL }, *p;
	json_t *t = NULL;
	long long before = jobs_count(h);
	int rc = 0, n = 0;

	args = xasprintf("submit %s --sweep train.lr=1e-4,2e-4 --pool it-nowhere --then %s --dry-run", fx, fx);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0 && out && strstr(out, "then tests/data/aitk_flux_lora_24gb.yaml\tafter the 2 jobs above once they ended") &&
		     jobs_count(h) == before,
	     "submit --sweep --then --dry-run: says what would run after them, sends nothing (%d %.300s)", rc, out);
	free(out);
	free(args);
	args = xasprintf("submit %s --then-when ended", fx);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 2 && out && strstr(out, "needs --then"), "submit --then-when without --then: exit 2 (%d)", rc);
	free(out);
	free(args);
	args = xasprintf("submit %s --sweep train.lr=1e-4,2e-4 --then tests/data/no-such.yaml", fx);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 2 && out && strstr(out, "--then tests/data/no-such.yaml") && jobs_count(h) == before,
	     "submit --then with a file that cannot be read: exit 2, nothing sent (%d %.200s)", rc, out);
	free(out);
	free(args);
	{
		/* past AFTER_MAX jobs (two files, a sweep of 129 each): refused before anything is sent */
		char *vals = xstrdup("1"), *nx;
		for (int k = 2; k <= 129; k++) {
			nx = xasprintf("%s,%d", vals, k);
			free(vals);
			vals = nx;
		}
		args = xasprintf("submit %s %s --sweep train.steps=%s --then %s", fx, fx, vals, fx);
		out = h_rungctl(h, args, &rc);
		h_ok(h, rc == 2 && out && strstr(out, "at most 256 jobs, and this submit makes 258") && jobs_count(h) == before,
		     "submit --then after 258 jobs: exit 2, nothing sent (%d %.200s)", rc, out);
		free(out);
		free(args);
		free(vals);
	}
	{
		/* a sweep of 36 (6 x 6) and the job after it: one batch; its sentence names 32 and "4 more" */
		json_t *then = NULL;
		char *last = NULL;
		int ids_seen = 0;
		args = xasprintf("submit %s --sweep train.lr=1,2,3,4,5,6 --sweep train.steps=1,2,3,4,5,6 --pool it-nowhere "
				 "--then %s", fx, fx);
		out = h_rungctl(h, args, &rc);
		for (p = out; rc == 0 && p && *p;) { /* the ids, a line each: the last is the job after them */
			size_t k = strcspn(p, "\n");
			if (k > 0 && strspn(p, "0123456789") == k) {
				free(last);
				last = xasprintf("%.*s", (int)k, p);
				ids_seen++;
			}
			p += k + (p[k] == '\n');
		}
		then = last ? h_job(h, last) : NULL;
		h_ok(h, rc == 0 && ids_seen == 37 && json_array_size(json_object_get(then, "after")) == 36 &&
			     strstr(h_str(then, "next_action"), " and 4 more to end"),
		     "submit --then after a sweep of 36: the job runs after all 36, \"... and 4 more to end\" (%d %d %s)", rc,
		     ids_seen, h_str(then, "next_action"));
		h_cancel_active(h, "pool", "it-nowhere");
		json_decref(then);
		free(last);
		free(out);
		free(args);
	}
	args = xasprintf("submit %s --sweep train.lr=1e-4,2e-4 --pool it-nowhere --then %s", fx, fx);
	out = h_rungctl(h, args, &rc);
	/* three ids, each on a line of its own: the sweep's two, then the job after them (stderr's lines among them) */
	for (p = out; rc == 0 && p && *p && n < 3;) {
		size_t k = strcspn(p, "\n");
		if (k > 0 && strspn(p, "0123456789") == k)
			ids[n++] = xasprintf("%.*s", (int)k, p);
		p += k + (p[k] == '\n');
	}
	if (!h_ok(h, rc == 0 && n == 3, "submit --sweep (2) --then: three job ids (%d %.300s)", rc, out))
		goto out;
	t = h_job(h, ids[2]);
	h_ok(h, t && !strcmp(h_str(t, "state"), "scheduled") && !strcmp(h_str(t, "after_when"), "ended") &&
		     json_array_size(json_object_get(t, "after")) == 2 &&
		     json_integer_value(json_array_get(json_object_get(t, "after"), 0)) == atoll(ids[0]) &&
		     json_integer_value(json_array_get(json_object_get(t, "after"), 1)) == atoll(ids[1]) &&
		     !strcmp(h_str(t, "pool"), "it-nowhere") && json_is_string(json_object_get(json_object_get(t, "labels"), "sweep")),
	     "the --then job: scheduled after the two, once they end, with the sweep's label and pool");
	json_decref(t);
	cancel(h, ids[0]);
	t = h_job(h, ids[2]);
	h_ok(h, t && !strcmp(h_str(t, "state"), "scheduled"), "one of the two cancelled: it waits for the other");
	json_decref(t);
	cancel(h, ids[1]);
	t = h_job(h, ids[2]);
	h_ok(h, t && !strcmp(h_str(t, "state"), "queued"), "both ended (cancelled): it is queued");
	cancel(h, ids[2]);
out:
	json_decref(t);
	for (int k = 0; k < 3; k++)
		free(ids[k]);
	free(out);
	free(args);
}

int main(void)
{
	struct harness *h = h_new("it_after");
	/* the fallback poll at two minutes and the workers' long-poll at one: a job that runs within
	 * seconds of its release was woken by rungd, not found by a poll */
	const char *server_args[] = { "--poll-fallback-ms", "120000", NULL };
	const char *worker_args[] = { "--lease-wait-ms", "60000", NULL };
	const char *pool_args[] = { "--lease-wait-ms", "60000", "--pool", "it-after", NULL };
	struct h_worker_opts wo = { .args = worker_args }, po = { .args = pool_args };
	struct h_worker *w, *wp;

	if (!h_ok(h, h_server_start(h, server_args) == 0, "rungd starts"))
		return h_free(h);
	w = h_worker_start(h, "w1", &wo);
	wp = h_worker_start(h, "w-after", &po);
	if (!h_ok(h, w && wp, "a worker of the default pool and one of pool it-after start"))
		return h_free(h);
	test_bad(h);
	test_chain(h);
	test_cancelled_dep(h);
	test_start_and_retry(h);
	test_time_and_after(h);
	test_forms(h);
	test_cancel_after(h);
	test_set_after(h);
	test_after_when(h);
	test_then(h);
	h_worker_stop(h, w, SIGTERM);
	h_worker_stop(h, wp, SIGTERM);
	return h_free(h);
}
