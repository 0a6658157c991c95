/* Integration: the job API without workers: submit shape, idempotent submit, keyset pagination
 * of GET /v1/jobs, cancelling a queued job. Real rungd and Postgres. */
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
	test_cancel_queued(h);
	return h_free(h);
}
