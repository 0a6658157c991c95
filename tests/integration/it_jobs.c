/* Integration: the job API without workers: submit shape, idempotent submit, keyset pagination
 * of GET /v1/jobs and its filters (state, owner, kind) and the /ui/jobs page's, a queued job's
 * place in the queue, cancelling a queued job. Real rungd and Postgres. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "jpath.h"
#include "util.h"

static void test_submit_shape(struct harness *h)
{
	json_t *cfg = h_config("shape", 50);
	json_t *extra = json_pack("{s:s, s:i}", "name", "shape job", "priority", 7);
	json_t *job = h_submit(h, cfg, extra);
	h_ok(h, job && h->last_status == 201, "submit answers 201 with a job (got %ld)", h->last_status);
	if (!job)
		goto out;
	char *id = h_id(job, "id");
	char *want_loc = xasprintf("/v1/jobs/%s", id);
	h_ok(h, h->last_location && strstr(h->last_location, want_loc), "Location header points at the job");
	h_ok(h, !strcmp(h_str(job, "state"), "queued"), "new job is queued");
	h_ok(h, !strcmp(h_str(job, "kind"), "image"), "a Flux image config has kind image");
	h_ok(h, h_int(job, "priority") == 7, "priority kept");
	h_ok(h, !strcmp(h_str(job, "name"), "shape job"), "name kept");
	h_ok(h, json_equal(json_object_get(job, "target_config"), cfg), "target_config is the submitted config");
	h_ok(h, json_equal(json_object_get(job, "current_config"), cfg), "current_config starts as the target");
	json_t *rec = json_object_get(job, "recovery");
	h_ok(h, h_int(rec, "max_attempts") == 10 && json_is_true(json_object_get(rec, "scale_up")),
		"recovery defaults filled in (max_attempts 10, scale_up true)");
	json_t *got = h_job(h, id);
	h_ok(h, got && !strcmp(h_str(got, "state"), "queued") && json_equal(json_object_get(got, "target_config"), cfg),
		"GET /v1/jobs/ID returns the same job");
	/* GET adds a queued job's placement (rung_job_placement); the submit reply does not: it would read
	 * every GPU on the submit path */
	h_ok(h, got && json_is_object(json_object_get(got, "placement")) && !json_object_get(job, "placement"),
	     "GET adds the queued job's placement, the submit reply does not");
	if (got)
		json_object_del(got, "placement");
	h_ok(h, got && json_equal(got, job), "the submit reply is the whole JOB, equal to GET's (configs spliced in)");
	long st = 0;
	json_t *ev = h_getf(h, &st, "/v1/jobs/%s/events", id);
	h_ok(h, st == 200 && json_array_size(json_object_get(ev, "events")) >= 1, "a submit event is recorded");
	json_t *at = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
	h_ok(h, st == 200 && json_array_size(json_object_get(at, "attempts")) == 0, "no attempts yet");
	json_decref(ev);
	json_decref(at);
	json_decref(got);
	free(want_loc);
	free(id);
out:
	json_decref(job);
	json_decref(cfg);
	json_decref(extra);
}

/* Labels: kept from the envelope and from a raw file's ?labels=, {} when none, in GET too; the
 * refusals are it_hostile's. */
static void test_labels(struct harness *h)
{
	json_t *cfg = h_config("labelled", 10), *extra = json_pack("{s:{s:s, s:s}}", "labels", "team", "vision", "project",
								  "portraits");
	json_t *job = h_submit(h, cfg, NULL), *lab = h_submit(h, cfg, extra), *raw = NULL, *got = NULL;
	char *file = json_dumps(cfg, JSON_COMPACT), *id = h_id(lab, "id");
	long st = 0;

	h_ok(h, job && json_is_object(json_object_get(job, "labels")) && json_object_size(json_object_get(job, "labels")) == 0,
	     "a job without labels has labels {}");
	h_ok(h, lab && json_equal(json_object_get(lab, "labels"), json_object_get(extra, "labels")),
	     "the envelope's labels are the job's");
	got = id ? h_job(h, id) : NULL;
	h_ok(h, got && json_equal(json_object_get(got, "labels"), json_object_get(extra, "labels")), "GET shows them");
	raw = h_request(h, "POST", "/v1/jobs?labels=team=audio,cost-center=42&name=raw_labelled", file, strlen(file), NULL, &st);
	h_ok(h, st == 201 && !strcmp(h_str(json_object_get(raw, "labels"), "team"), "audio") &&
	     !strcmp(h_str(json_object_get(raw, "labels"), "cost-center"), "42") && json_object_size(json_object_get(raw, "labels")) == 2,
	     "a raw file's ?labels=team=audio,cost-center=42 (%ld)", st);
	{
		/* ?label=: only the jobs that carry every pair, newest first, paged by the cursor */
		json_t *lab2 = h_submit(h, cfg, extra), *l;
		char *id2 = h_id(lab2, "id"), *cur = NULL;
		const char *saved = h->auth_token;

		l = h_get(h, "/v1/jobs?label=team=vision", &st);
		h_ok(h, st == 200 && json_array_size(json_object_get(l, "jobs")) == 2 &&
		     h_int(json_array_get(json_object_get(l, "jobs"), 0), "id") == atoll(id2 ? id2 : "0") &&
		     h_int(json_array_get(json_object_get(l, "jobs"), 1), "id") == atoll(id ? id : "0"),
		     "?label=team=vision: the two jobs with it, newest first (%ld)", st);
		json_decref(l);
		l = h_get(h, "/v1/jobs?label=team=vision,project=portraits&limit=1", &st);
		cur = h_id(l, "next_cursor");
		h_ok(h, st == 200 && json_array_size(json_object_get(l, "jobs")) == 1 && cur, "two pairs, a page of 1 and a cursor");
		json_decref(l);
		l = h_getf(h, &st, "/v1/jobs?label=team=vision,project=portraits&limit=1&cursor=%s", cur ? cur : "0");
		h_ok(h, st == 200 && json_array_size(json_object_get(l, "jobs")) == 1 &&
		     h_int(json_array_get(json_object_get(l, "jobs"), 0), "id") == atoll(id ? id : "0") &&
		     json_is_null(json_object_get(l, "next_cursor")), "the next page: the older one, and no further cursor");
		json_decref(l);
		l = h_get(h, "/v1/jobs?label=team=audio", &st);
		h_ok(h, st == 200 && json_array_size(json_object_get(l, "jobs")) == 1, "?label=team=audio: the raw submit alone");
		json_decref(l);
		l = h_get(h, "/v1/jobs?label=team=vision,project=other", &st);
		h_ok(h, st == 200 && json_array_size(json_object_get(l, "jobs")) == 0, "a pair no job has: none (near miss)");
		json_decref(l);
		l = h_get(h, "/v1/jobs?label=team=vision&kind=video", &st);
		h_ok(h, st == 200 && json_array_size(json_object_get(l, "jobs")) == 0, "with kind=video: none (the others hold)");
		json_decref(l);
		l = h_get(h, "/v1/jobs?label=team", &st);
		h_ok(h, st == 400 && !strcmp(h_str(l, "field"), "label"), "?label=team: 400 naming label (%ld)", st);
		json_decref(l);
		h->auth_token = h->submitter_token;
		l = h_get(h, "/v1/jobs?label=team=vision", &st);
		h->auth_token = saved;
		h_ok(h, st == 200 && json_array_size(json_object_get(l, "jobs")) == 0,
		     "a submitter's label list holds only its own jobs (the admin's are not)");
		json_decref(l);
		json_decref(lab2);
		free(id2);
		free(cur);
	}
	json_decref(got);
	json_decref(raw);
	json_decref(job);
	json_decref(lab);
	json_decref(extra);
	json_decref(cfg);
	free(file);
	free(id);
}

static void test_video_kind(struct harness *h)
{
	json_t *cfg = h_config("video", 50);
	h_config_set(cfg, "config.process[0].datasets[0].num_frames", json_integer(81));
	h_config_set(cfg, "config.process[0].model.arch", json_string("wan22_14b"));
	json_t *job = h_submit(h, cfg, NULL);
	h_ok(h, job && !strcmp(h_str(job, "kind"), "video"), "a Wan config with 81 frames has kind video");
	json_decref(job);
	json_decref(cfg);
}

static void test_idempotency(struct harness *h)
{
	json_t *cfg = h_config("idem", 50);
	json_t *body = json_pack("{s:O}", "config", cfg);
	const char *hk1[] = { "Idempotency-Key: key-one", NULL };
	const char *hk2[] = { "Idempotency-Key: key-two", NULL };
	long s1 = 0, s2 = 0, s3 = 0;
	long long before = h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);
	json_t *a = h_post_hdr(h, "/v1/jobs", body, hk1, &s1);
	char *id1 = h_id(a, "id");
	const char *idp[] = { id1 ? id1 : "0" };
	/* as after a rung: the stored current_config differs from the target */
	h_ok(h, h_sql_int(h, "UPDATE jobs SET current_config = jsonb_set(target_config, '{config,name}', '\"idem_rung\"') "
			     "WHERE id = $1::bigint RETURNING 1", 1, idp) == 1, "current_config of the keyed job changed");
	json_t *b = h_post_hdr(h, "/v1/jobs", body, hk1, &s2);
	json_t *got = id1 ? h_job(h, id1) : NULL;
	if (got)
		json_object_del(got, "placement"); /* GET's alone, as above */
	h_ok(h, b && got && json_equal(b, got) &&
		!strcmp(jpath_str(b, "current_config.config.name", ""), "idem_rung") &&
		json_equal(json_object_get(b, "target_config"), cfg),
	     "the repeat's JOB carries the stored current_config and the target, equal to GET's");
	json_decref(got);
	free(id1);
	json_t *c = h_post_hdr(h, "/v1/jobs", body, hk2, &s3);
	char *ia = h_id(a, "id"), *ib = h_id(b, "id"), *ic = h_id(c, "id");
	h_ok(h, s1 == 201, "first submit with a key: 201 (got %ld)", s1);
	h_ok(h, s2 == 200, "repeat with the same key: 200 (got %ld)", s2);
	h_ok(h, ia && ib && !strcmp(ia, ib), "repeat returns the same job id");
	h_ok(h, s3 == 201 && ic && ia && strcmp(ia, ic), "another key makes another job");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == before + 2, "two rows for three submits");
	free(ia);
	free(ib);
	free(ic);
	json_decref(a);
	json_decref(b);
	json_decref(c);
	json_decref(body);
	json_decref(cfg);
}

/* The envelope is handed to Postgres as it was sent (api_jobs.c submit_item_text): blank space,
 * escapes, braces and quotes inside strings, and the key order the client chose all arrive as the
 * same JSON; the same document sent with other spacing under the same Idempotency-Key is a repeat,
 * a different one a conflict. */
static void test_submit_as_sent(struct harness *h)
{
	json_t *cfg = h_config("as_sent", 50);
	char *c = json_dumps(cfg, JSON_COMPACT | JSON_PRESERVE_ORDER);
	/* the config's name holds quotes, braces, a backslash and escaped non-ASCII text */
	const char *name = " \"n\\\"a}m{e\\\\ \\u00e9\\ud83d\\ude00\" ";
	char *body = xasprintf("\n {\t\"priority\" : 3 ,\r\n  \"name\":%s, \"config\" :\n%s , \"recovery\": { } }  \n", name, c);
	char *spaced = xasprintf("{\"name\":%s,\"priority\":3,\"config\":%s,\"recovery\":{}}", name, c);
	const char *hk[] = { "Content-Type: application/json", "Idempotency-Key: as-sent", NULL };
	long st = 0, st2 = 0, st3 = 0;
	json_t *job = h_request(h, "POST", "/v1/jobs", body, strlen(body), hk, &st);
	json_t *sent = json_loads(body, 0, NULL);
	h_ok(h, st == 201 && job && sent, "an envelope with blank space and escapes is accepted (%ld)", st);
	h_ok(h, job && json_equal(json_object_get(job, "target_config"), cfg) &&
		!strcmp(h_str(job, "name") ?: "", json_string_value(json_object_get(sent, "name")) ?: "-") &&
		h_int(job, "priority") == 3, "the job holds the config, the name (quotes, braces, \\u escapes) and the priority sent");
	char *id = job ? h_id(job, "id") : NULL;
	json_t *got = id ? h_job(h, id) : NULL;
	if (got)
		json_object_del(got, "placement"); /* GET's alone */
	h_ok(h, got && json_equal(got, job), "GET returns that job");
	json_t *again = h_request(h, "POST", "/v1/jobs", spaced, strlen(spaced), hk, &st2);
	char *id2 = again ? h_id(again, "id") : NULL;
	h_ok(h, st2 == 200 && id && id2 && !strcmp(id, id2), "the same document spaced otherwise is a repeat (%ld)", st2);
	json_decref(again);
	free(spaced);
	spaced = xasprintf("{\"name\":%s,\"priority\":4,\"config\":%s,\"recovery\":{}}", name, c);
	again = h_request(h, "POST", "/v1/jobs", spaced, strlen(spaced), hk, &st3);
	h_ok(h, st3 == 409, "another priority under that key is a conflict (%ld)", st3);
	json_decref(again);
	json_decref(got);
	json_decref(sent);
	json_decref(job);
	free(id);
	free(id2);
	free(spaced);
	free(body);
	free(c);
	json_decref(cfg);
}

static void test_pagination(struct harness *h)
{
	long long total = h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);
	json_t *cfg = h_config("page", 10);
	for (int i = 0; i < 5; i++) {
		json_decref(h_submit(h, cfg, NULL));
		total++;
	}
	json_decref(cfg);
	long long seen = 0, prev = -1, pages = 0;
	bool order_ok = true, shape_ok = true;
	char *cursor = NULL;
	for (;;) {
		long st = 0;
		json_t *page = cursor ? h_getf(h, &st, "/v1/jobs?limit=2&cursor=%s", cursor) : h_get(h, "/v1/jobs?limit=2", &st);
		free(cursor);
		cursor = NULL;
		json_t *jobs = json_object_get(page, "jobs");
		if (st != 200 || !json_is_array(jobs) || json_array_size(jobs) > 2) {
			shape_ok = false;
			h_diag("page: status %ld body %.500s", st, h->last_body ? h->last_body : "");
			json_decref(page);
			break;
		}
		size_t i;
		json_t *jb;
		json_array_foreach(jobs, i, jb) {
			long long id = h_int(jb, "id");
			if (prev >= 0 && id >= prev)
				order_ok = false;
			prev = id;
			seen++;
		}
		pages++;
		json_t *nc = json_object_get(page, "next_cursor");
		if (json_is_string(nc))
			cursor = xstrdup(json_string_value(nc));
		else if (!json_is_null(nc))
			shape_ok = false;
		json_decref(page);
		if (!cursor || pages > 50)
			break;
	}
	free(cursor);
	h_ok(h, shape_ok, "pages have {jobs, next_cursor} and at most limit jobs");
	h_ok(h, order_ok, "ids strictly descending across pages");
	h_ok(h, seen == total, "every job seen exactly once across pages (%lld of %lld)", seen, total);
	h_ok(h, pages >= 3, "limit 2 over %lld jobs takes several pages (%lld)", total, pages);

	long st = 0;
	json_t *q = h_get(h, "/v1/jobs?state=queued&limit=100", &st);
	size_t i;
	json_t *jb;
	bool all_queued = st == 200;
	json_array_foreach(json_object_get(q, "jobs"), i, jb)
		if (strcmp(h_str(jb, "state"), "queued"))
			all_queued = false;
	h_ok(h, all_queued && json_array_size(json_object_get(q, "jobs")) > 0, "state filter returns only queued jobs");
	json_decref(q);
}

/* Runs GET path as token (NULL: none) and restores the harness's default token. */
static json_t *get_as(struct harness *h, const char *token, const char *path, long *st)
{
	const char *saved = h->auth_token;
	h->auth_token = token;
	json_t *j = h_get(h, path, st);
	h->auth_token = saved;
	return j;
}

/* Submits n jobs as token (kind video when video), each named `name`. Returns how many were made. */
static int submit_as(struct harness *h, const char *token, const char *name, bool video, int n)
{
	const char *saved = h->auth_token;
	json_t *cfg = h_config(name, 10), *extra = json_pack("{s:s}", "name", name);
	int made = 0;

	if (video) {
		h_config_set(cfg, "config.process[0].datasets[0].num_frames", json_integer(81));
		h_config_set(cfg, "config.process[0].model.arch", json_string("wan22_14b"));
	}
	h->auth_token = token;
	for (int i = 0; i < n; i++) {
		json_t *job = h_submit(h, cfg, extra);
		made += job && !strcmp(h_str(job, "kind"), video ? "video" : "image");
		json_decref(job);
	}
	h->auth_token = saved;
	json_decref(extra);
	json_decref(cfg);
	return made;
}

/* Every job GET /v1/jobs?QUERY&limit=LIMIT lists as token, following next_cursor: how many, and
 * whether each page answered 200 with ids strictly descending across pages and every job had
 * owner `owner` and kind `kind` (NULL: any). -1 when a page failed. *pages: pages read. */
static long long list_all(struct harness *h, const char *token, const char *query, int limit, const char *owner,
			  const char *kind, bool *all_match, int *pages)
{
	char *cursor = NULL;
	long long seen = 0, prev = -1;

	*all_match = true;
	*pages = 0;
	for (;;) {
		long st = 0;
		char *path = cursor ? xasprintf("/v1/jobs?%s&limit=%d&cursor=%s", query, limit, cursor)
				    : xasprintf("/v1/jobs?%s&limit=%d", query, limit);
		json_t *page = get_as(h, token, path, &st), *jb;
		size_t i;
		free(path);
		free(cursor);
		cursor = NULL;
		if (st != 200 || !json_is_array(json_object_get(page, "jobs"))) {
			h_diag("list %s: status %ld body %.300s", query, st, h->last_body ? h->last_body : "");
			json_decref(page);
			return -1;
		}
		json_array_foreach(json_object_get(page, "jobs"), i, jb) {
			long long id = h_int(jb, "id");
			if ((prev >= 0 && id >= prev) || (owner && strcmp(h_str(jb, "owner"), owner)) ||
			    (kind && strcmp(h_str(jb, "kind"), kind)))
				*all_match = false;
			prev = id;
			seen++;
		}
		(*pages)++;
		if (json_is_string(json_object_get(page, "next_cursor")))
			cursor = xstrdup(json_string_value(json_object_get(page, "next_cursor")));
		json_decref(page);
		if (!cursor || *pages > 100)
			break;
	}
	free(cursor);
	return seen;
}

/* True when j is a {"error", "message", "field"} answer of status want (got st) naming field. */
static bool is_error(const json_t *j, long st, long want, const char *error, const char *field)
{
	return st == want && j && !strcmp(h_str(j, "error"), error) && !strcmp(h_str(j, "field"), field) &&
	       json_is_string(json_object_get(j, "message"));
}

/* GET /v1/jobs?owner=&kind=: staff list one owner's jobs (through job_list_owned.sql) and one
 * kind's; a submitter may name only itself; bad values are 400s naming the field; the cursor
 * pages through a filtered list. */
static void test_list_filters(struct harness *h)
{
	char *support = h_token_create(h, "support", "it-support");
	const char *sub = h->submitter_token, *sp[1] = { "it-submitter" };
	bool match;
	int pages;
	long st = 0;
	json_t *j;

	if (!h_ok(h, support != NULL, "a support token"))
		return;
	h_ok(h, submit_as(h, sub, "flt-sub-img", false, 3) == 3 && submit_as(h, sub, "flt-sub-vid", true, 2) == 2 &&
		submit_as(h, h->admin_token, "flt-adm-img", false, 2) == 2 &&
		submit_as(h, h->admin_token, "flt-adm-vid", true, 1) == 1,
	     "the submitter submits 3 image and 2 video jobs, the admin 2 and 1");
	long long sub_all = h_sql_int(h, "SELECT count(*) FROM jobs WHERE owner = $1", 1, sp);
	long long sub_vid = h_sql_int(h, "SELECT count(*) FROM jobs WHERE owner = $1 AND kind = 'video'", 1, sp);
	long long all_vid = h_sql_int(h, "SELECT count(*) FROM jobs WHERE kind = 'video'", 0, NULL);
	long long all_img = h_sql_int(h, "SELECT count(*) FROM jobs WHERE kind = 'image'", 0, NULL);
	long long adm_all = h_sql_int(h, "SELECT count(*) FROM jobs WHERE owner = 'it-admin'", 0, NULL);

	long long n = list_all(h, support, "owner=it-submitter", 50, "it-submitter", NULL, &match, &pages);
	h_ok(h, n == sub_all && match && sub_all >= 5, "support ?owner=it-submitter: that owner's %lld jobs only (%lld)",
	     sub_all, n);
	n = list_all(h, support, "owner=it-submitter&kind=video", 50, "it-submitter", "video", &match, &pages);
	h_ok(h, n == sub_vid && match && sub_vid == 2, "support ?owner=&kind=video: its video jobs only (%lld)", n);
	n = list_all(h, h->admin_token, "kind=video", 50, NULL, "video", &match, &pages);
	h_ok(h, n == all_vid && match && all_vid >= 3, "admin ?kind=video: every video job, no other (%lld of %lld)", n,
	     all_vid);
	n = list_all(h, h->admin_token, "state=queued&owner=it-admin&kind=image", 50, "it-admin", "image", &match, &pages);
	h_ok(h, n == h_sql_int(h, "SELECT count(*) FROM jobs WHERE owner = 'it-admin' AND kind = 'image' AND state = 'queued'",
			       0, NULL) && n >= 2 && match, "state, owner and kind together (%lld)", n);
	n = list_all(h, support, "owner=nobody-here", 50, NULL, NULL, &match, &pages);
	h_ok(h, n == 0 && pages == 1, "an owner with no jobs: an empty list, not an error");
	n = list_all(h, support, "owner=&kind=", 500, NULL, NULL, &match, &pages);
	h_ok(h, n == all_vid + all_img, "empty owner and kind read as no filter (%lld)", n);

	/* the cursor carries on within the filter: one job a page over the admin's and the kind's */
	n = list_all(h, support, "owner=it-admin", 1, "it-admin", NULL, &match, &pages);
	h_ok(h, n == adm_all && match && pages >= adm_all, "paging ?owner=it-admin one a page: %lld jobs over %d pages, "
	     "each the admin's, ids descending", n, pages);
	n = list_all(h, sub, "kind=image", 2, "it-submitter", "image", &match, &pages);
	h_ok(h, n == sub_all - sub_vid && match && pages >= 2, "paging a submitter's ?kind=image two a page: its %lld "
	     "image jobs over %d pages", n, pages);

	/* a submitter names only itself */
	n = list_all(h, sub, "owner=it-submitter", 50, "it-submitter", NULL, &match, &pages);
	h_ok(h, n == sub_all && match, "a submitter naming itself: its own jobs");
	j = get_as(h, sub, "/v1/jobs?owner=it-admin", &st);
	h_ok(h, is_error(j, st, 403, "forbidden", "owner"), "a submitter naming another owner: 403 naming owner (%ld %.200s)",
	     st, h->last_body ? h->last_body : "");
	json_decref(j);

	/* bad values, as the other parameters: 400 {"error", "message", "field"} */
	static const struct {
		const char *query, *field;
	} bad[] = {
		{ "kind=audio", "kind" }, { "kind=Video", "kind" }, { "kind=image%00", "kind" },
		{ "owner=a%20b", "owner" }, { "owner=%3Cx%3E", "owner" },
		{ "owner=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "owner" }, /* 65 */
	};
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		j = h_getf(h, &st, "/v1/jobs?%s", bad[i].query);
		h_ok(h, is_error(j, st, 400, "invalid_request", bad[i].field), "?%.40s: 400 naming %s (%ld)", bad[i].query,
		     bad[i].field, st);
		json_decref(j);
	}
	j = get_as(h, sub, "/v1/jobs?owner=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &st);
	h_ok(h, is_error(j, st, 400, "invalid_request", "owner"), "a submitter's too long owner: 400, not 403");
	json_decref(j);
	j = h_get(h, "/v1/jobs?owner=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", &st); /* 64 */
	h_ok(h, st == 200 && json_array_size(json_object_get(j, "jobs")) == 0, "an owner of 64 characters is a name (%ld)",
	     st);
	json_decref(j);
	free(support);
}

/* GET path as a browser with token's cookie (no bearer token); the page stays in h->last_body. */
static long page_as(struct harness *h, const char *token, const char *path)
{
	char *cookie = xasprintf("Cookie: rung_token=%s", token);
	const char *hdr[] = { cookie, NULL }, *saved = h->auth_token;
	long st = 0;

	h->auth_token = NULL;
	json_decref(h_request(h, "GET", path, NULL, 0, hdr, &st));
	h->auth_token = saved;
	free(cookie);
	return st;
}

/* How many times needle occurs in hay. */
static int count_of(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; p && (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The href of the first <a class="CLS" in the last page, unescaped (&amp; -> &); heap or NULL. */
static char *page_link(struct harness *h, const char *cls)
{
	char *want = xasprintf("<a class=\"%s\" href=\"", cls), *out = NULL;
	const char *p = h->last_body ? strstr(h->last_body, want) : NULL;

	if (p) {
		p += strlen(want);
		out = xmalloc(strcspn(p, "\"") + 1);
		size_t o = 0;
		for (const char *q = p; *q && *q != '"'; q++) {
			out[o++] = *q;
			if (!strncmp(q, "&amp;", 5))
				q += 4;
		}
		out[o] = '\0';
	}
	free(want);
	return out;
}

/* The /ui/jobs page's labels: a column, and the API's label filter (rows, the form's value, the
 * state links keep it; a bad one is a 400 page). */
static void test_web_labels(struct harness *h)
{
	long st;
	const char *body;

	h_ok(h, h_sql_int(h, "WITH n AS (INSERT INTO jobs (name, owner, kind, target_config, recovery, labels) VALUES "
			     "('web-lab-1', 'it-admin', 'image', '{\"x\": 1}', '{}', '{\"team\": \"web-vision\", \"p\": \"q\"}'), "
			     "('web-lab-2', 'it-admin', 'image', '{\"x\": 1}', '{}', '{\"team\": \"web-vision\"}'), "
			     "('web-lab-3', 'it-admin', 'image', '{\"x\": 1}', '{}', '{\"team\": \"web-audio\"}'), "
			     "('web-lab-4', 'it-admin', 'image', '{\"x\": 1}', '{}', '{}') RETURNING 1) "
			     "SELECT count(*) FROM n", 0, NULL) == 4, "four jobs, three labelled");
	st = page_as(h, h->admin_token, "/ui/jobs?label=team=web-vision");
	body = h->last_body ? h->last_body : "";
	h_ok(h, st == 200 && strstr(body, ">web-lab-1<") && strstr(body, ">web-lab-2<") && !strstr(body, ">web-lab-3<") &&
	     !strstr(body, ">web-lab-4<"), "?label=team=web-vision: its two jobs, not the others (%ld)", st);
	h_ok(h, strstr(body, "<td class=\"labels\">p=q,team=web-vision</td>") != NULL, "a labels column, sorted");
	h_ok(h, strstr(body, "name=\"label\" maxlength=\"1024\" value=\"team=web-vision\"") != NULL, "the form shows the filter");
	h_ok(h, strstr(body, "href=\"/ui/jobs?state=queued&amp;label=team%3Dweb-vision\"") != NULL, "the state links keep it");
	st = page_as(h, h->admin_token, "/ui/jobs?label=team");
	h_ok(h, st == 400 && h->last_body && strstr(h->last_body, "is not KEY=VALUE"), "?label=team: a 400 page (%ld)", st);
}

/* Worker pools on the pages: /ui/jobs?pool= lists that pool's jobs with a pool column (not shown
 * while every listed job is in default; a priority column likewise once one has another priority), keeps the filter in the form, the state links and the
 * cancel-matching form (whose review lists the pool's jobs) and refuses a bad name (400); the job
 * page names the pool and why it waits when only other pools have GPUs; the GPUs page shows each
 * worker's pool. */
static void test_web_pools(struct harness *h)
{
	char *wid = h_fake_register(h, "web-pool-default", "GPU-web-pool-0", 24576), *id = NULL, *path = NULL;
	json_t *cfg = h_config("web_pool", 10), *extra = json_pack("{s:s}", "pool", "web-h200"), *job = NULL;
	const char *body;
	long st;

	h_ok(h, wid && h_sql_int(h, "WITH n AS (INSERT INTO jobs (name, owner, kind, target_config, recovery, labels, pool) VALUES "
				   "('web-pool-1', 'it-admin', 'image', '{\"x\": 1}', '{}', '{\"web\": \"pools\"}', 'web-h200'), "
				   "('web-pool-2', 'it-admin', 'image', '{\"x\": 1}', '{}', '{\"web\": \"pools\"}', 'web-h200'), "
				   "('web-pool-3', 'it-admin', 'image', '{\"x\": 1}', '{}', '{\"web\": \"pools\"}', 'web-a100'), "
				   "('web-pool-4', 'it-admin', 'image', '{\"x\": 1}', '{}', '{\"web\": \"pools\"}', 'default') RETURNING 1) "
				   "SELECT count(*) FROM n", 0, NULL) == 4,
	     "a worker in default; four jobs in three pools");
	st = page_as(h, h->admin_token, "/ui/jobs?pool=web-h200");
	body = h->last_body ? h->last_body : "";
	h_ok(h, st == 200 && strstr(body, ">web-pool-1<") && strstr(body, ">web-pool-2<") && !strstr(body, ">web-pool-3<") &&
	     !strstr(body, ">web-pool-4<"), "?pool=web-h200: its two jobs, not the others (%ld)", st);
	h_ok(h, strstr(body, "<th>pool</th>") && count_of(body, "<td class=\"pool\">web-h200</td>") == 2,
	     "a pool column, the jobs being outside default");
	h_ok(h, !strstr(body, "<th>priority</th>"), "no priority column while every job has the default priority");
	h_ok(h, h_sql_int(h, "WITH u AS (UPDATE jobs SET priority = 5 WHERE name = 'web-pool-2' RETURNING 1) SELECT count(*) "
			     "FROM u", 0, NULL) == 1 && page_as(h, h->admin_token, "/ui/jobs?pool=web-h200") == 200 &&
		     strstr(h->last_body, "<th>priority</th>") && count_of(h->last_body, "<td class=\"num\">5</td>") == 1 &&
		     count_of(h->last_body, "<td class=\"num\">100</td>") == 1,
	     "one job at priority 5: a priority column, with each job's");
	body = h->last_body ? h->last_body : "";
	h_ok(h, strstr(body, "name=\"pool\" maxlength=\"63\" value=\"web-h200\"") != NULL, "the form shows the filter");
	h_ok(h, strstr(body, "href=\"/ui/jobs?state=queued&amp;pool=web-h200\"") != NULL, "the state links keep it");
	h_ok(h, strstr(body, ">queued (2)</a>") != NULL, "the counts are the pool's");
	h_ok(h, strstr(body, "cancel-matching") && strstr(body, "name=\"pool\" value=\"web-h200\""),
	     "the cancel-matching form carries the pool filter");
	st = h_browse(h, h->admin_token, "POST", "/ui/jobs/cancel", "pool=web-h200&state=queued", "Sec-Fetch-Site: same-origin");
	body = h->last_body ? h->last_body : "";
	h_ok(h, st == 200 && strstr(body, "Cancel 2 jobs?") && strstr(body, "name=\"pool\" value=\"web-h200\""),
	     "its review lists the pool's two jobs and keeps the pool for the confirm (%ld)", st);
	st = page_as(h, h->admin_token, "/ui/jobs?pool=default&label=web=pools");
	body = h->last_body ? h->last_body : "";
	h_ok(h, st == 200 && strstr(body, ">web-pool-4<") && !strstr(body, ">web-pool-1<") && !strstr(body, "<th>pool</th>"),
	     "?pool=default: its jobs, no pool column while all are in default (%ld)", st);
	st = page_as(h, h->admin_token, "/ui/jobs?pool=Web%20H200");
	h_ok(h, st == 400 && h->last_body && strstr(h->last_body, "pool must be 1 to 63 of a-z 0-9 . _ -"),
	     "?pool=Web H200: a 400 page with the rule (%ld)", st);
	{
		json_t *c = json_pack("{s:s}", "label", "web=pools");
		json_decref(h_post(h, "/v1/jobs/cancel", c, &st));
		json_decref(c);
		h_ok(h, st == 200, "the four cancelled (%ld)", st);
	}

	/* a queued job of pool web-h200: no GPU there, the default worker's elsewhere */
	job = h_submit(h, cfg, extra);
	id = h_id(job, "id");
	path = id ? xasprintf("/ui/jobs/%s", id) : NULL;
	st = path ? page_as(h, h->admin_token, path) : 0;
	body = h->last_body ? h->last_body : "";
	h_ok(h, st == 200 && strstr(body, "<dt>pool</dt><dd>web-h200</dd>"), "the job page names its pool (%ld)", st);
	h_ok(h, strstr(body, "waiting for a GPU: no GPU in pool web-h200 can run it (") && strstr(body, " in other pool"),
	     "the job page: no GPU in its pool, some in others");
	h_ok(h, id && strstr(body, "action=\"/ui/jobs/") && strstr(body, "/pool\"") && strstr(body, "Move to pool"),
	     "and a form to move it to another pool");
	if (id) {
		char *form_path = xasprintf("/ui/jobs/%s/pool", id);
		json_t *moved;
		st = h_browse(h, h->admin_token, "POST", form_path, "pool=web-a100", "Sec-Fetch-Site: same-origin");
		moved = h_job(h, id);
		h_ok(h, st == 303 && moved && !strcmp(h_str(moved, "pool"), "web-a100"),
		     "the form moves it: 303 back to the page, the job in web-a100 (%ld)", st);
		json_decref(moved);
		st = h_browse(h, h->admin_token, "POST", form_path, "pool=Web%20A100", "Sec-Fetch-Site: same-origin");
		h_ok(h, st == 400 && h->last_body && strstr(h->last_body, "pool must be a pool name"), "a bad name: a 400 page (%ld)", st);
		st = h_browse(h, h->admin_token, "POST", form_path, "pool=web-h200", "Origin: http://evil.example");
		moved = h_job(h, id);
		h_ok(h, st == 403 && moved && !strcmp(h_str(moved, "pool"), "web-a100"), "from another site: 403, nothing moved (%ld)", st);
		json_decref(moved);
		free(form_path);
	}
	if (id)
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id));
	{
		const char *p[1] = { wid ? wid : "0" };
		PQclear(h_sql(h, "UPDATE workers SET pool = 'web-gpus' WHERE id = $1::bigint", 1, p));
	}
	st = page_as(h, h->admin_token, "/ui/gpus");
	body = h->last_body ? h->last_body : "";
	h_ok(h, st == 200 && count_of(body, "<td class=\"pool\">web-gpus</td>") == 2,
	     "the GPUs page: the worker's pool in its row and its GPU's (%ld)", st);
	json_decref(job);
	json_decref(cfg);
	json_decref(extra);
	free(path);
	free(id);
	free(wid);
}

/* The /ui/jobs page takes the same filters as GET /v1/jobs: the rows are the owner's and the
 * kind's, the form shows them, the state links and the link to older jobs carry them, and the
 * rule is the API's (a submitter naming another owner: 403; bad values: 400). */
static void test_web_queue_filters(struct harness *h)
{
	char *support = h_token_create(h, "support", "it-web-support"), *older = NULL, *newest = NULL;
	const char *sub = h->submitter_token;
	long st;

	if (!h_ok(h, support != NULL, "a second support token"))
		return;
	/* 205 video jobs of one owner among as many image ones: more than a page (WEB_QUEUE_LIMIT, 200) */
	h_ok(h, h_sql_int(h, "WITH n AS (INSERT INTO jobs (name, owner, kind, target_config, recovery) "
			     "SELECT 'web-pager-' || g, 'web-pager', CASE WHEN g % 2 = 0 THEN 'video' ELSE 'image' END, "
			     "'{\"x\": 1}', '{}' FROM generate_series(1, 410) g RETURNING 1) SELECT count(*) FROM n", 0, NULL) == 410,
	     "410 jobs of web-pager, half of them video");

	st = page_as(h, support, "/ui/jobs?owner=web-pager&kind=video");
	const char *body = h->last_body ? h->last_body : "";
	h_ok(h, st == 200 && count_of(body, "<tr><td><a href=\"/ui/jobs/") == 200 &&
		count_of(body, "<td>web-pager</td>") == 200 && count_of(body, "<td>video</td>") == 200,
	     "support ?owner=web-pager&kind=video: a page of 200 rows, each web-pager's and video (%ld)", st);
	h_ok(h, strstr(body, "name=\"owner\" maxlength=\"64\" value=\"web-pager\"") &&
		strstr(body, "<option value=\"video\" selected>video</option>"), "the form shows the owner and the kind");
	h_ok(h, strstr(body, "href=\"/ui/jobs?state=queued&amp;owner=web-pager&amp;kind=video\"") != NULL,
	     "the state links keep the owner and the kind");
	h_ok(h, strstr(body, ">queued (205)</a>") != NULL, "the counts are the owner's and the kind's");
	older = page_link(h, "older");
	h_ok(h, older && strstr(older, "/ui/jobs?owner=web-pager&kind=video&cursor=") == older,
	     "the link to older jobs carries the filters (%s)", older ? older : "none");
	st = older ? page_as(h, support, older) : 0;
	body = h->last_body ? h->last_body : "";
	h_ok(h, st == 200 && count_of(body, "<tr><td><a href=\"/ui/jobs/") == 5 && count_of(body, "<td>web-pager</td>") == 5 &&
		count_of(body, "<td>video</td>") == 5 && !strstr(body, "class=\"older\""),
	     "following it: the 5 older video jobs of web-pager, and no further link (%ld)", st);
	newest = page_link(h, "newest");
	h_ok(h, newest && !strcmp(newest, "/ui/jobs?owner=web-pager&kind=video"), "and a link back to the newest, filters kept");

	st = page_as(h, support, "/ui/jobs?state=queued&owner=it-submitter");
	body = h->last_body ? h->last_body : "";
	h_ok(h, st == 200 && count_of(body, "<td>it-submitter</td>") >= 5 && !strstr(body, "<td>it-admin</td>") &&
		!strstr(body, "<td>web-pager</td>"), "support ?owner=it-submitter: only its jobs");
	st = page_as(h, sub, "/ui/jobs?kind=video");
	body = h->last_body ? h->last_body : "";
	h_ok(h, st == 200 && count_of(body, "<td>it-submitter</td>") == 2 && count_of(body, "<td>video</td>") == 2 &&
		!strstr(body, "name=\"owner\""), "a submitter's ?kind=video: its 2 video jobs, no owner field");
	h_ok(h, page_as(h, sub, "/ui/jobs?owner=it-submitter") == 200, "a submitter naming itself: its page");
	h_ok(h, page_as(h, sub, "/ui/jobs?owner=web-pager") == 403 && strstr(h->last_body ? h->last_body : "", "own jobs"),
	     "a submitter naming another owner: 403 saying why");
	h_ok(h, page_as(h, support, "/ui/jobs?kind=audio") == 400, "?kind=audio: 400");
	h_ok(h, page_as(h, support, "/ui/jobs?owner=%3Cb%3E") == 400 && !strstr(h->last_body ? h->last_body : "", "<b>"),
	     "?owner=<b>: 400, not echoed");
	h_ok(h, page_as(h, support, "/ui/jobs?cursor=x") == 400, "?cursor=x: 400");
	free(older);
	free(newest);
	free(support);
}

/* GET /v1/jobs/{id}'s placement says how many queued jobs come before the job in claim order
 * (rung_job_ahead): at the lowest priority a job is first; another of that priority submitted after
 * it is second; a job of the next priority up comes after both; a priority change moves it. */
static void test_queue_position(struct harness *h)
{
	json_t *cfg = h_config("ahead", 10);
	json_t *lo = json_pack("{s:i}", "priority", -1000000), *next = json_pack("{s:i}", "priority", -999999);
	json_t *y = h_submit(h, cfg, lo), *z = h_submit(h, cfg, lo), *x = h_submit(h, cfg, next);
	char *yid = h_id(y, "id"), *zid = h_id(z, "id"), *xid = h_id(x, "id");
	json_t *gy = yid ? h_job(h, yid) : NULL, *gz = zid ? h_job(h, zid) : NULL, *gx = xid ? h_job(h, xid) : NULL;
	long st = 0;

	h_ok(h, gy && gz && gx && h_int(json_object_get(gy, "placement"), "ahead") == 0 &&
		h_int(json_object_get(gz, "placement"), "ahead") == 1 && h_int(json_object_get(gx, "placement"), "ahead") == 2,
	     "placement.ahead: 0 for the first of the lowest priority, 1 for the next of it, 2 for one priority up");
	json_t *body = json_pack("{s:i}", "priority", -1000000);
	json_decref(xid ? h_postf(h, body, &st, "/v1/jobs/%s/priority", xid) : NULL);
	json_decref(gx);
	gx = xid ? h_job(h, xid) : NULL;
	h_ok(h, st == 200 && gx && h_int(json_object_get(gx, "placement"), "ahead") == 2,
	     "moved to the lowest priority it still comes after the two submitted before it (ahead 2)");
	json_decref(body);
	body = json_pack("{s:i}", "priority", -999999);
	json_decref(yid ? h_postf(h, body, &st, "/v1/jobs/%s/priority", yid) : NULL);
	json_decref(gx);
	gx = xid ? h_job(h, xid) : NULL;
	h_ok(h, st == 200 && gx && h_int(json_object_get(gx, "placement"), "ahead") == 1,
	     "one of them moved up a priority: one ahead of it");
	json_t *c = xid ? h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", xid) : NULL;
	json_decref(c);
	c = xid ? h_job(h, xid) : NULL;
	h_ok(h, c && !json_object_get(c, "placement"), "a cancelled job has no placement");
	json_decref(c);
	for (int i = 0; i < 2; i++) { /* leave the queue as it was for the tests after */
		char *id = i ? zid : yid;
		json_decref(id ? h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id) : NULL);
	}
	json_decref(body);
	json_decref(gx);
	json_decref(gy);
	json_decref(gz);
	free(xid);
	free(yid);
	free(zid);
	json_decref(x);
	json_decref(y);
	json_decref(z);
	json_decref(lo);
	json_decref(next);
	json_decref(cfg);
}

static void test_cancel_queued(struct harness *h)
{
	json_t *cfg = h_config("cancel-queued", 10);
	json_t *job = h_submit(h, cfg, NULL);
	char *id = h_id(job, "id");
	long st = 0;
	json_t *c = id ? h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id) : NULL;
	h_ok(h, st == 200 && !strcmp(h_str(c, "state"), "cancelled"), "cancel of a queued job: cancelled at once");
	json_t *again = id ? h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id) : NULL;
	json_t *now = id ? h_job(h, id) : NULL;
	h_ok(h, now && !strcmp(h_str(now, "state"), "cancelled"), "a second cancel leaves it cancelled (status %ld)", st);
	json_decref(now);
	json_decref(again);
	json_decref(c);
	c = h_post(h, "/v1/jobs/987654/cancel", NULL, &st);
	h_ok(h, st == 404, "cancel of an unknown job: 404 (got %ld)", st);
	json_decref(c);
	free(id);
	json_decref(job);
	json_decref(cfg);
}

/* POST /v1/jobs/cancel with BODY (JSON text); the answer, the status in *st. */
static json_t *cancel_many(struct harness *h, const char *body, long *st)
{
	return h_post_raw(h, "/v1/jobs/cancel", body, strlen(body), st);
}

/* The answer's ids as "1,2,3" (heap). */
static char *ids_of(const json_t *a)
{
	char *s = xstrdup("");
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(a, "ids"), i, v) {
		char *n = xasprintf("%s%s%lld", s, *s ? "," : "", (long long)json_integer_value(v));
		free(s);
		s = n;
	}
	return s;
}

/* Bulk cancel by label, owner or kind: a dry run lists and changes nothing; queued jobs are cancelled,
 * a running one is told to stop at its next heartbeat (state running, or active for both); a limit
 * leaves the rest for the next call (more); a submitter cancels only its own; no filter, or a bad
 * one, is a 400 naming it. */
static void test_cancel_matching(struct harness *h)
{
	json_t *cfg = h_config("bulk", 10), *jobs[5] = { 0 }, *a = NULL, *lease = NULL;
	char *id[5] = { 0 }, *want = NULL, *got = NULL, *wid = h_fake_register(h, "fake-bulk", "GPU-bulk", 24576);
	static const char *const batch[5] = { "bulk-a", "bulk-a", "bulk-a", "bulk-b", "bulk-b" };
	long st = 0;

	for (int i = 0; i < 5; i++) {
		json_t *extra = json_pack("{s:{s:s}, s:i}", "labels", "batch", batch[i], "priority", i == 0 ? 0 : 100);
		jobs[i] = h_submit(h, cfg, extra);
		id[i] = h_id(jobs[i], "id");
		json_decref(extra);
	}
	lease = h_fake_lease(h, wid, "GPU-bulk", 5000, &st);
	if (!h_ok(h, id[4] && lease && h_int(lease, "job_id") == atoll(id[0]), "five labelled jobs, the first one leased"))
		goto out;
	want = xasprintf("%s,%s,%s", id[0], id[1], id[2]);
	a = cancel_many(h, "{\"label\": \"batch=bulk-a\", \"state\": \"active\", \"dry_run\": true}", &st);
	got = ids_of(a);
	json_t *j1 = h_job(h, id[1]);
	h_ok(h, st == 200 && !strcmp(got, want) && !strcmp(h_str(j1, "state"), "queued"),
	     "dry run: the three batch=bulk-a jobs, oldest first (%s), nothing changed", got);
	json_decref(j1);
	json_decref(a);
	free(got);
	free(want);
	want = xasprintf("%s,%s", id[1], id[2]);
	a = cancel_many(h, "{\"label\": \"batch=bulk-a\"}", &st);
	got = ids_of(a);
	j1 = h_job(h, id[1]);
	json_t *j3 = h_job(h, id[3]);
	h_ok(h, st == 200 && !strcmp(got, want) && !strcmp(h_str(j1, "state"), "cancelled") &&
		!strcmp(h_str(j3, "state"), "queued") && json_is_false(json_object_get(a, "more")),
	     "state queued (the default): the two queued bulk-a jobs cancelled (%s); the running one and bulk-b untouched", got);
	json_decref(j1);
	json_decref(j3);
	json_decref(a);
	free(got);
	a = cancel_many(h, "{\"label\": \"batch=bulk-a\", \"state\": \"running\"}", &st);
	got = ids_of(a);
	{
		char *aid = h_id(lease, "attempt_id");
		json_t *beat = aid ? h_fake_heartbeat(h, aid, h_str(lease, "token"), &st) : NULL;
		h_ok(h, !strcmp(got, id[0]) && json_is_true(json_object_get(beat, "cancel")),
		     "state running: the leased job is told to stop at its next heartbeat (%s)", got);
		json_decref(beat);
		free(aid);
	}
	json_decref(a);
	free(got);
	a = cancel_many(h, "{\"label\": \"batch=bulk-a\", \"state\": \"active\"}", &st);
	got = ids_of(a);
	h_ok(h, st == 200 && !strcmp(got, ""), "again: nothing left to cancel (a running job told once is not counted again)");
	json_decref(a);
	free(got);
	a = cancel_many(h, "{\"label\": \"batch=bulk-b\", \"kind\": \"video\", \"dry_run\": true}", &st);
	got = ids_of(a);
	h_ok(h, st == 200 && !strcmp(got, ""), "kind video: none of the (image) bulk-b jobs");
	json_decref(a);
	free(got);
	{
		char *body = xasprintf("{\"owner\": \"%s\", \"label\": \"batch=bulk-b\", \"dry_run\": true}",
				       h_str(jobs[3], "owner"));
		a = cancel_many(h, body, &st);
		got = ids_of(a);
		free(want);
		want = xasprintf("%s,%s", id[3], id[4]);
		h_ok(h, st == 200 && !strcmp(got, want), "an admin naming the owner: that owner's bulk-b jobs (%s)", got);
		json_decref(a);
		a = cancel_many(h, "{\"owner\": \"nobody-at-all\", \"label\": \"batch=bulk-b\", \"dry_run\": true}", &st);
		free(got);
		got = ids_of(a);
		h_ok(h, st == 200 && !strcmp(got, ""), "an admin naming another owner: none of them");
		json_decref(a);
		free(got);
		free(body);
	}
	a = cancel_many(h, "{\"label\": \"batch=bulk-b\", \"limit\": 1}", &st);
	got = ids_of(a);
	h_ok(h, !strcmp(got, id[3]) && json_is_true(json_object_get(a, "more")), "limit 1: the oldest, and more says the rest waits");
	json_decref(a);
	free(got);
	a = cancel_many(h, "{\"label\": \"batch=bulk-b\", \"limit\": 1}", &st);
	got = ids_of(a);
	h_ok(h, !strcmp(got, id[4]) && json_is_false(json_object_get(a, "more")), "the next call: the rest");
	json_decref(a);
	free(got);
	got = NULL;
	{
		json_t *ev = h_getf(h, &st, "/v1/jobs/%s/events", id[1]);
		json_t *last = json_array_get(json_object_get(ev, "events"), json_array_size(json_object_get(ev, "events")) - 1);
		h_ok(h, !strcmp(h_str(last, "kind"), "cancelled"), "each cancelled job has its event, as one cancel leaves");
		json_decref(ev);
	}
	/* a submitter's: its own only */
	{
		json_t *extra = json_pack("{s:{s:s}}", "labels", "batch", "bulk-c");
		json_t *mine, *theirs = h_submit(h, cfg, extra);
		char *theirs_id = h_id(theirs, "id"), *mine_id;
		h->auth_token = h->submitter_token;
		mine = h_submit(h, cfg, extra);
		mine_id = h_id(mine, "id");
		a = cancel_many(h, "{\"label\": \"batch=bulk-c\"}", &st);
		got = ids_of(a);
		h_ok(h, st == 200 && mine_id && !strcmp(got, mine_id), "a submitter's bulk cancel takes only its own job (%s)", got);
		json_decref(a);
		a = cancel_many(h, "{\"owner\": \"someone-else\"}", &st);
		h_ok(h, st == 403 && !strcmp(h_str(a, "field"), "owner"), "a submitter naming another owner: 403 naming owner");
		json_decref(a);
		h->auth_token = h->admin_token;
		json_t *t = h_job(h, theirs_id);
		h_ok(h, !strcmp(h_str(t, "state"), "queued"), "the admin's bulk-c job is still queued");
		json_decref(t);
		json_decref(theirs);
		json_decref(mine);
		json_decref(extra);
		free(theirs_id);
		free(mine_id);
	}
	{
		static const struct {
			const char *body, *field;
		} bad[] = { { "{}", NULL }, { "{\"state\": \"done\", \"label\": \"batch=x\"}", "state" },
			    { "{\"label\": \"bad label\"}", "label" }, { "{\"label\": \"batch=x\", \"limit\": 0}", "limit" },
			    { "{\"label\": \"batch=x\", \"dry_run\": \"yes\"}", "dry_run" }, { "{\"owner\": 5}", "owner" },
			    { "{\"kind\": \"audio\"}", "kind" } };
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			a = cancel_many(h, bad[i].body, &st);
			const char *f = h_str(a, "field");
			h_ok(h, st == 400 && (bad[i].field ? f && !strcmp(f, bad[i].field) : json_is_null(json_object_get(a, "field"))),
			     "%s: 400 naming %s (got %ld)", bad[i].body, bad[i].field ? bad[i].field : "no field", st);
			json_decref(a);
		}
	}
out:
	free(got);
	free(want);
	free(wid);
	for (int i = 0; i < 5; i++) {
		free(id[i]);
		json_decref(jobs[i]);
	}
	json_decref(lease);
	json_decref(cfg);
}

struct bg_cancel {
	struct harness *h;
	const char *body;
	long status;
};

/* On its own connection: the harness' curl handle stays the main thread's. */
static void *bg_cancel_run(void *arg)
{
	struct bg_cancel *b = arg;
	long ms = 0;
	json_t *a = h_request_once(b->h, "POST", "/v1/jobs/cancel", b->body, &b->status, &ms);
	json_decref(a);
	return NULL;
}

struct lock_wait {
	struct harness *h;
};

/* A rungd backend waits for a row lock inside rung_cancel_where. */
static bool cancel_waits(void *arg)
{
	struct lock_wait *w = arg;
	return h_sql_int(w->h, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
			 "AND query LIKE '%rung_cancel_where%' AND pid <> pg_backend_pid()", 0, NULL) == 1;
}

/* A statement Postgres rolls back to break a deadlock is answered 503 (send it again), not 500, and
 * changes nothing. Another session holds job B and then asks for job A, which the cancel of A and B
 * (locking A first) holds while it waits for B: the cancel waited first, so its deadlock check runs
 * first and it is the one rolled back. */
static void test_deadlock_is_503(struct harness *h)
{
	json_t *cfg = h_config("deadlock", 10), *extra = json_pack("{s:{s:s}}", "labels", "batch", "dl");
	json_t *ja = h_submit(h, cfg, extra), *jb = h_submit(h, cfg, extra), *a = NULL, *b2 = NULL;
	char *ida = h_id(ja, "id"), *idb = h_id(jb, "id");
	PGconn *s = PQconnectdb(h->db_url);
	struct bg_cancel bg = { h, "{\"label\": \"batch=dl\"}", 0 };
	struct lock_wait lw = { h };
	const char *pa[1] = { ida }, *pb[1] = { idb };
	pthread_t t;
	bool started = false;
	PGresult *r;

	if (!h_ok(h, ida && idb && PQstatus(s) == CONNECTION_OK, "two queued jobs batch=dl, and a session of our own"))
		goto out;
	PQclear(PQexec(s, "BEGIN"));
	r = PQexecParams(s, "SELECT 1 FROM jobs WHERE id = $1::bigint FOR UPDATE", 1, NULL, pb, NULL, NULL, 0);
	h_ok(h, PQresultStatus(r) == PGRES_TUPLES_OK, "the session holds job B");
	PQclear(r);
	started = pthread_create(&t, NULL, bg_cancel_run, &bg) == 0;
	h_ok(h, started && wait_until(cancel_waits, &lw, 20000), "the cancel of batch=dl holds A and waits for B");
	h_ok(h, PQsendQueryParams(s, "SELECT 1 FROM jobs WHERE id = $1::bigint FOR UPDATE", 1, NULL, pa, NULL, NULL, 0) == 1,
	     "the session asks for A: a deadlock");
	if (started)
		pthread_join(t, NULL);
	h_ok(h, bg.status == 503, "the cancel, rolled back to break it, is answered 503 (got %ld)", bg.status);
	while ((r = PQgetResult(s)))
		PQclear(r);
	PQclear(PQexec(s, "ROLLBACK"));
	a = h_job(h, ida);
	b2 = h_job(h, idb);
	h_ok(h, !strcmp(h_str(a, "state"), "queued") && !strcmp(h_str(b2, "state"), "queued"), "and it changed nothing");
	json_decref(a);
	json_decref(b2);
	long st = 0;
	a = h_post_raw(h, "/v1/jobs/cancel", bg.body, strlen(bg.body), &st);
	h_ok(h, st == 200 && json_array_size(json_object_get(a, "ids")) == 2, "sent again: both cancelled");
	json_decref(a);
out:
	PQfinish(s);
	free(ida);
	free(idb);
	json_decref(ja);
	json_decref(jb);
	json_decref(extra);
	json_decref(cfg);
}

int main(void)
{
	struct harness *h = h_new("it_jobs");
	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	test_submit_shape(h);
	test_video_kind(h);
	test_labels(h);
	test_idempotency(h);
	test_submit_as_sent(h);
	test_pagination(h);
	test_list_filters(h);
	test_web_queue_filters(h);
	test_web_labels(h);
	test_web_pools(h);
	test_queue_position(h);
	test_cancel_queued(h);
	test_cancel_matching(h);
	test_deadlock_is_503(h);
	return h_free(h);
}
