/* Integration: a batch of jobs submitted all or none (POST /v1/jobs/batch, rung_submit_group) with the
 * real rungd, rung-worker and simulated trainer. A batch's jobs may run after earlier jobs of the same
 * batch (after_items), and run in that order; a refusal of any job (a bad field, a job named that does
 * not exist, one that already succeeded for a run-only-if-it-fails job, an Idempotency-Key used for
 * another batch) names jobs[K].FIELD and stores none of them, even those before it; one key stands for
 * the whole batch; rungctl submit --sweep --then sends the sweep and the job after it as one batch, and
 * a sweep rungd refuses in part is not stored at all; rungctl wait follows a sweep until it ended. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"

#define RUN_MS 90000 /* three jobs of a few simulated steps, one after another, end within this */

static long long jobs_count(struct harness *h)
{
	return h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);
}

/* The envelope of job name (steps steps) with extra's members (extra stolen; NULL: none). New reference. */
static json_t *envelope(const char *name, int steps, json_t *extra)
{
	json_t *e = extra ? extra : json_object();

	json_object_set_new(e, "config", h_config(name, steps));
	return e;
}

/* s with every "CFG" replaced by cfg (heap). */
static char *with_cfg(const char *s, const char *cfg)
{
	char *out = xstrdup(""), *next;
	const char *p;

	while ((p = strstr(s, "CFG"))) {
		next = xasprintf("%s%.*s%s", out, (int)(p - s), s, cfg);
		free(out);
		out = next;
		s = p + 3;
	}
	next = xasprintf("%s%s", out, s);
	free(out);
	return next;
}

/* POSTs {"jobs": jobs} (stolen) to /v1/jobs/batch with Idempotency-Key key (NULL: none). */
static json_t *post_batch(struct harness *h, json_t *jobs, const char *key, long *st)
{
	json_t *body = json_pack("{s:o}", "jobs", jobs), *a;
	char *hdr = key ? xasprintf("Idempotency-Key: %s", key) : NULL;
	const char *headers[] = { hdr, NULL };

	a = h_post_hdr(h, "/v1/jobs/batch", body, key ? headers : NULL, st);
	free(hdr);
	json_decref(body);
	return a;
}

/* Job k's id in a batch's answer (heap) or NULL. */
static char *job_id(const json_t *answer, size_t k)
{
	return h_id(json_array_get(json_object_get(answer, "jobs"), k), "id");
}

/* A pipeline of three: A, then B after A, then C after A and B once they ended; they run in that
 * order on the one worker, each only once what it waits for released it. */
static void test_pipeline(struct harness *h)
{
	json_t *jobs = json_array(), *ex, *a, *j;
	char *ids[3] = { NULL, NULL, NULL };
	long st = 0;
	long long before = jobs_count(h);

	json_array_append_new(jobs, envelope("batch_a", 6, NULL));
	ex = json_pack("{s:[i]}", "after_items", 0);
	json_array_append_new(jobs, envelope("batch_b", 6, ex));
	ex = json_pack("{s:[i,i], s:s}", "after_items", 0, 1, "after_when", "ended");
	json_array_append_new(jobs, envelope("batch_c", 6, ex));
	a = post_batch(h, jobs, NULL, &st);
	for (size_t k = 0; k < 3; k++)
		ids[k] = job_id(a, k);
	if (!h_ok(h, st == 201 && json_array_size(json_object_get(a, "jobs")) == 3 && ids[0] && ids[1] && ids[2] &&
			     jobs_count(h) == before + 3,
		  "a batch of three: 201 with the three jobs, in order (%ld %s)", st, h_str(a, "message")))
		goto out;
	j = json_array_get(json_object_get(a, "jobs"), 1);
	h_ok(h, !strcmp(h_str(j, "state"), "scheduled") && json_array_size(json_object_get(j, "after")) == 1 &&
		     json_integer_value(json_array_get(json_object_get(j, "after"), 0)) == atoll(ids[0]) &&
		     !strcmp(h_str(j, "name"), "batch_b") && json_is_object(json_object_get(j, "target_config")),
	     "job 1 (after_items [0]) is scheduled after job 0's id, with its config");
	j = json_array_get(json_object_get(a, "jobs"), 2);
	h_ok(h, !strcmp(h_str(j, "state"), "scheduled") && !strcmp(h_str(j, "after_when"), "ended") &&
		     json_array_size(json_object_get(j, "after")) == 2 &&
		     json_integer_value(json_array_get(json_object_get(j, "after"), 1)) == atoll(ids[1]),
	     "job 2 (after_items [0, 1], after_when ended) waits for both, once they ended");
	for (size_t k = 0; k < 3; k++) {
		json_t *done = h_wait_job(h, ids[k], "succeeded", RUN_MS);
		h_ok(h, done != NULL, "batch job %zu succeeds", k);
		json_decref(done);
	}
	{
		const char *p[] = { ids[0], ids[1], ids[2] };
		h_ok(h, h_sql_int(h,
				  "SELECT ((SELECT min(started_at) FROM attempts WHERE job_id = $2::bigint) >= "
				  "(SELECT max(ended_at) FROM attempts WHERE job_id = $1::bigint) AND "
				  "(SELECT min(started_at) FROM attempts WHERE job_id = $3::bigint) >= "
				  "(SELECT max(ended_at) FROM attempts WHERE job_id = $2::bigint))::int",
				  3, p) == 1,
		     "each started only once the one before it had ended");
	}
out:
	json_decref(a);
	for (size_t k = 0; k < 3; k++)
		free(ids[k]);
}

/* Every bad batch is a 400 naming the field (jobs[K].FIELD for a job's), and nothing is stored. */
static void test_bad(struct harness *h)
{
	static const struct {
		const char *jobs_tail; /* after one good job: ", JOB" or a whole body when body */
		const char *field;
	} bad[] = {
		{ ", 3", "jobs[1]" },
		{ ", {\"name\": \"x\"}", "jobs[1].config" },
		{ ", {\"config\": CFG, \"priority\": \"high\"}", "jobs[1].priority" },
		{ ", {\"config\": CFG, \"after_items\": [1]}", "jobs[1].after_items" },
		{ ", {\"config\": CFG, \"after_items\": [2]}", "jobs[1].after_items" },
		{ ", {\"config\": CFG, \"after_items\": [-1]}", "jobs[1].after_items" },
		{ ", {\"config\": CFG, \"after_items\": []}", "jobs[1].after_items" },
		{ ", {\"config\": CFG, \"after_items\": \"0\"}", "jobs[1].after_items" },
		{ ", {\"config\": CFG, \"after_items\": [0], \"after_when\": \"sometimes\"}", "jobs[1].after_when" },
		{ ", {\"config\": CFG, \"after_when\": \"ended\"}", "jobs[1].after_when" },
		{ ", {\"config\": CFG, \"after\": [0]}", "jobs[1].after" },
		{ ", {\"config\": CFG, \"colour\": \"red\"}", "jobs[1].colour" },
		{ ", {\"config\": CFG, \"pool\": \"Not A Pool\"}", "jobs[1].pool" },
	};
	static const char *const whole[][2] = {
		{ "{}", "jobs" },
		{ "{\"jobs\": []}", "jobs" },
		{ "{\"jobs\": {}}", "jobs" },
		{ "{\"jobs\": [CFGJOB], \"extra\": 1}", "extra" },
		{ "{\"jobs\": [{\"config\": CFG, \"after_items\": [0]}]}", "jobs[0].after_items" },
	};
	json_t *cfg = h_config("batch_bad", 5);
	char *cfg_text = json_dumps(cfg, JSON_COMPACT), *good = xasprintf("{\"config\": %s}", cfg_text);
	long long before = jobs_count(h);
	long st = 0;
	json_t *a;

	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		char *tail = with_cfg(bad[i].jobs_tail, cfg_text);
		char *body = xasprintf("{\"jobs\": [%s%s]}", good, tail);
		a = h_request(h, "POST", "/v1/jobs/batch", body, strlen(body), NULL, &st);
		h_ok(h, st == 400 && !strcmp(h_str(a, "field"), bad[i].field), "batch with %.60s: 400 naming %s (%ld %s %s)",
		     bad[i].jobs_tail, bad[i].field, st, h_str(a, "field"), h_str(a, "message"));
		json_decref(a);
		free(body);
		free(tail);
	}
	for (size_t i = 0; i < ARRAY_LEN(whole); i++) {
		char *t1 = strstr(whole[i][0], "CFGJOB") ? xasprintf("{\"jobs\": [%s], \"extra\": 1}", good)
							     : xstrdup(whole[i][0]);
		char *body = with_cfg(t1, cfg_text);
		a = h_request(h, "POST", "/v1/jobs/batch", body, strlen(body), NULL, &st);
		h_ok(h, st == 400 && !strcmp(h_str(a, "field"), whole[i][1]), "batch %.60s: 400 naming %s (%ld %s %s)",
		     whole[i][0], whole[i][1], st, h_str(a, "field"), h_str(a, "message"));
		json_decref(a);
		free(body);
		free(t1);
	}
	{
		/* one job over the most a batch takes */
		json_t *jobs = json_array();
		for (int i = 0; i < 501; i++)
			json_array_append_new(jobs, json_pack("{s:O}", "config", cfg));
		a = post_batch(h, jobs, NULL, &st);
		h_ok(h, st == 400 && !strcmp(h_str(a, "field"), "jobs") && strstr(h_str(a, "message"), "1 to 500"),
		     "a batch of 501 jobs: 400 naming jobs (%ld %s)", st, h_str(a, "message"));
		json_decref(a);
	}
	{
		char *body = xasprintf("{\"jobs\": [%s]}", good);
		a = h_request(h, "POST", "/v1/jobs/batch?pool=zzz&priority=1", body, strlen(body), NULL, &st);
		h_ok(h, st == 400 && !strcmp(h_str(a, "field"), "pool"),
		     "a batch with query options: 400 naming the first, nothing stored (%ld %s)", st, h_str(a, "message"));
		json_decref(a);
		free(body);
	}
	h_ok(h, jobs_count(h) == before, "and none of them stored a job");
	free(good);
	free(cfg_text);
	json_decref(cfg);
}

/* A refusal the database makes after earlier jobs of the batch were inserted rolls them back: a job
 * named that does not exist, and a run-only-if-it-fails job after a job that already succeeded. */
static void test_all_or_none(struct harness *h, const char *succeeded)
{
	long long before = jobs_count(h);
	json_t *jobs, *ex, *a;
	long st = 0;

	jobs = json_array();
	json_array_append_new(jobs, envelope("aon_0", 5, NULL));
	json_array_append_new(jobs, envelope("aon_1", 5, NULL));
	ex = json_pack("{s:[I]}", "after", (json_int_t)987654321);
	json_array_append_new(jobs, envelope("aon_2", 5, ex));
	a = post_batch(h, jobs, NULL, &st);
	h_ok(h, st == 400 && !strcmp(h_str(a, "field"), "jobs[2].after") && strstr(h_str(a, "message"), "987654321") &&
		     jobs_count(h) == before,
	     "job 2 naming a job that does not exist: 400 naming jobs[2].after, jobs 0 and 1 not stored (%ld %s)", st,
	     h_str(a, "message"));
	json_decref(a);

	jobs = json_array();
	json_array_append_new(jobs, envelope("aon_3", 5, NULL));
	ex = json_pack("{s:[I], s:s}", "after", (json_int_t)atoll(succeeded), "after_when", "failed");
	json_array_append_new(jobs, envelope("aon_4", 5, ex));
	a = post_batch(h, jobs, NULL, &st);
	h_ok(h, st == 409 && !strcmp(h_str(a, "error"), "after_never") && !strcmp(h_str(a, "field"), "jobs[1].after") &&
		     jobs_count(h) == before,
	     "job 1 to run only if a succeeded job fails: 409 after_never naming jobs[1].after, job 0 not stored (%ld %s)",
	     st, h_str(a, "message"));
	json_decref(a);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM event_log WHERE kind = 'submitted' AND job_id NOT IN (SELECT id FROM jobs)",
			  0, NULL) == 0,
	     "and no submitted event outlived its job");
}

/* One Idempotency-Key stands for the whole batch: the same batch again answers the same jobs (200),
 * another batch under it is a 409 that stores nothing, whether it changes a job or adds one. */
static void test_idempotency(struct harness *h)
{
	json_t *jobs, *a = NULL, *b = NULL, *c = NULL;
	long st = 0, st2 = 0, st3 = 0;
	long long before;
	char *first = NULL, *again = NULL, *second = NULL, *second_again = NULL;

	jobs = json_array();
	json_array_append_new(jobs, envelope("idem_0", 5, json_pack("{s:i}", "start_in_s", 3600)));
	json_array_append_new(jobs, envelope("idem_1", 5, json_pack("{s:[i]}", "after_items", 0)));
	a = post_batch(h, json_deep_copy(jobs), "batch-key-1", &st);
	before = jobs_count(h);
	b = post_batch(h, json_deep_copy(jobs), "batch-key-1", &st2);
	first = job_id(a, 0);
	again = job_id(b, 0);
	second = job_id(a, 1);
	second_again = job_id(b, 1);
	h_ok(h, st == 201 && st2 == 200 && first && again && !strcmp(first, again) && second && second_again &&
		     !strcmp(second, second_again) && jobs_count(h) == before,
	     "the same batch under the same key: 201, then 200 with the same two jobs, nothing more stored (%ld %ld)", st,
	     st2);
	json_array_append_new(jobs, envelope("idem_2", 5, NULL));
	c = post_batch(h, json_deep_copy(jobs), "batch-key-1", &st3);
	h_ok(h, st3 == 409 && !strcmp(h_str(c, "error"), "idempotency_conflict") && jobs_count(h) == before,
	     "the key with a third job added: 409 idempotency_conflict, nothing stored (%ld %s)", st3, h_str(c, "message"));
	json_decref(c);
	json_object_set_new(json_array_get(jobs, 1), "priority", json_integer(7));
	json_array_remove(jobs, 2);
	c = post_batch(h, json_deep_copy(jobs), "batch-key-1", &st3);
	h_ok(h, st3 == 409 && !strcmp(h_str(c, "error"), "idempotency_conflict") && jobs_count(h) == before,
	     "the key with job 1 changed: 409, nothing stored (%ld %s)", st3, h_str(c, "message"));
	json_decref(c);
	{
		json_t *first_only = json_array();
		json_array_append(first_only, json_array_get(jobs, 0));
		c = post_batch(h, first_only, "batch-key-1", &st3);
		h_ok(h, st3 == 409 && !strcmp(h_str(c, "error"), "idempotency_conflict") && jobs_count(h) == before,
		     "the key with job 1 left out: 409, not a repeat of job 0 (%ld %s)", st3, h_str(c, "message"));
	}
	{
		/* a submit's own key cannot name a batch's job: "batch-key-1#0" is a key of its own */
		const char *hdr[] = { "Idempotency-Key: batch-key-1#0", NULL };
		json_t *one = h_post_hdr(h, "/v1/jobs", json_array_get(jobs, 0), hdr, &st3);
		char *id = h_id(one, "id");
		h_ok(h, st3 == 201 && id && first && strcmp(id, first) != 0,
		     "POST /v1/jobs under the key batch-key-1#0: a new job, not the batch's job 0 (%ld)", st3);
		if (id)
			json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id));
		free(id);
		json_decref(one);
	}
	if (first)
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", first));
	if (second)
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", second));
	free(first);
	free(again);
	free(second);
	free(second_again);
	json_decref(a);
	json_decref(b);
	json_decref(c);
	json_decref(jobs);
}

/* A config's numbers are stored as the request wrote them (its text, not a double printed again). */
static void test_numbers(struct harness *h)
{
	json_t *cfg = h_config("numbers", 5), *a;
	char *text = json_dumps(cfg, JSON_COMPACT), *meta = strstr(text, "\"meta\":{"), *body = NULL, *id = NULL;
	long st = 0;

	if (h_ok(h, meta != NULL, "the config has a meta block")) {
		meta += strlen("\"meta\":{");
		body = xasprintf("{\"jobs\": [{\"config\": %.*s\"ratio\": 0.1, %s, \"start_in_s\": 3600}]}", (int)(meta - text),
				 text, meta);
		a = h_request(h, "POST", "/v1/jobs/batch", body, strlen(body), NULL, &st);
		id = job_id(a, 0);
		json_decref(a);
		{
			const char *p[] = { id ? id : "0" };
			h_ok(h, st == 201 && id &&
				     h_sql_int(h, "SELECT (target_config #>> '{meta,ratio}' = '0.1')::int FROM jobs WHERE id = $1::bigint",
					       1, p) == 1,
			     "meta.ratio 0.1 is stored as 0.1 (%ld)", st);
		}
		if (id)
			json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id));
	}
	free(id);
	free(body);
	free(text);
	json_decref(cfg);
}

/* A submitter's batch: its jobs run after one another (its own, made in the batch), and after none
 * of another owner's. */
static void test_submitter(struct harness *h)
{
	const char *saved = h->auth_token;
	char *admins = NULL, *id0 = NULL;
	json_t *jobs, *ex, *a;
	long st = 0;
	long long before;

	ex = json_pack("{s:i}", "start_in_s", 3600);
	admins = h_submit_id(h, "admins_job", 5, ex);
	json_decref(ex);
	ex = NULL;
	h->auth_token = h->submitter_token;
	jobs = json_array();
	json_array_append_new(jobs, envelope("sub_0", 5, json_pack("{s:i}", "start_in_s", 3600)));
	ex = json_pack("{s:[i]}", "after_items", 0);
	json_array_append_new(jobs, envelope("sub_1", 5, ex));
	a = post_batch(h, jobs, NULL, &st);
	id0 = job_id(a, 0);
	h_ok(h, st == 201 && id0 &&
		     json_integer_value(json_array_get(json_object_get(json_array_get(json_object_get(a, "jobs"), 1), "after"), 0)) ==
			     atoll(id0),
	     "a submitter's batch: job 1 runs after job 0, its own (%ld %s)", st, h_str(a, "message"));
	json_decref(a);
	before = jobs_count(h);
	jobs = json_array();
	json_array_append_new(jobs, envelope("sub_2", 5, NULL));
	ex = json_pack("{s:[I], s:[i]}", "after", (json_int_t)(admins ? atoll(admins) : 1), "after_items", 0);
	json_array_append_new(jobs, envelope("sub_3", 5, ex));
	a = post_batch(h, jobs, NULL, &st);
	h_ok(h, st == 400 && !strcmp(h_str(a, "field"), "jobs[1].after") && strstr(h_str(a, "message"), "not a job of yours") &&
		     jobs_count(h) == before,
	     "a submitter's job naming the admin's job: 400 naming jobs[1].after, nothing stored (%ld %s)", st,
	     h_str(a, "message"));
	json_decref(a);
	{
		/* a plain batch (no key, no after: one set-wise statement) answers its jobs in order; one job
		 * of a pool the submitter's token may not use refuses it whole */
		char *ids[3] = { NULL, NULL, NULL };
		json_t *pools = json_pack("{s:[s]}", "pools", "default");
		jobs = json_array();
		for (int k = 0; k < 3; k++) {
			char name[16];
			snprintf(name, sizeof name, "plain_%d", k);
			json_array_append_new(jobs, envelope(name, 5, json_pack("{s:i}", "start_in_s", 3600)));
		}
		a = post_batch(h, jobs, NULL, &st);
		for (size_t k = 0; k < 3; k++)
			ids[k] = job_id(a, k);
		h_ok(h, st == 201 && ids[2] &&
			     !strcmp(h_str(json_array_get(json_object_get(a, "jobs"), 0), "name"), "plain_0") &&
			     !strcmp(h_str(json_array_get(json_object_get(a, "jobs"), 2), "name"), "plain_2") &&
			     atoll(ids[0]) < atoll(ids[1]) && atoll(ids[1]) < atoll(ids[2]),
		     "a plain batch of three: 201, its jobs in order (%ld %s)", st, h_str(a, "message"));
		json_decref(a);
		h->auth_token = saved;
		json_decref(h_postf(h, pools, &st, "/v1/tokens/%lld/pools",
				    h_sql_int(h, "SELECT id FROM tokens WHERE name = 'it-submitter'", 0, NULL)));
		h_ok(h, st == 200, "the submitter's token is kept to pool default (%ld)", st);
		h->auth_token = h->submitter_token;
		before = jobs_count(h);
		jobs = json_array();
		json_array_append_new(jobs, envelope("pool_0", 5, NULL));
		json_array_append_new(jobs, envelope("pool_1", 5, json_pack("{s:s}", "pool", "h200")));
		a = post_batch(h, jobs, NULL, &st);
		h_ok(h, st == 403 && !strcmp(h_str(a, "field"), "jobs[1].pool") && jobs_count(h) == before,
		     "job 1 of a pool its token may not use: 403 naming jobs[1].pool, job 0 not stored (%ld %s)", st,
		     h_str(a, "message"));
		json_decref(a);
		h->auth_token = saved;
		json_object_set_new(pools, "pools", json_null());
		json_decref(h_postf(h, pools, &st, "/v1/tokens/%lld/pools",
				    h_sql_int(h, "SELECT id FROM tokens WHERE name = 'it-submitter'", 0, NULL)));
		for (size_t k = 0; k < 3; k++) {
			if (ids[k])
				json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", ids[k]));
			free(ids[k]);
		}
		json_decref(pools);
	}
	h->auth_token = saved;
	for (size_t k = 0; id0 && k < 2; k++) /* the submitter's two, ids id0 and the next */
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%lld/cancel", atoll(id0) + (long long)k));
	if (admins)
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", admins));
	free(admins);
	free(id0);
}

/* Writes config (borrowed) as JSON to name in the harness's temp dir; returns its path (heap). */
static char *write_config(struct harness *h, const char *name, const json_t *config)
{
	char *path = xasprintf("%s/%s", h->tmp, name);

	if (json_dump_file(config, path, JSON_COMPACT) != 0)
		h_diag("cannot write %s", path);
	return path;
}

/* A config file of job name whose meta carries kib KiB of notes: over rungd's 1 MiB body limit when
 * a batch holds a few of them. Its path (heap). */
static char *big_config(struct harness *h, const char *name, size_t kib)
{
	json_t *big = h_config(name, 5);
	char *pad = xmalloc(kib * 1024 + 1), *file = xasprintf("%s.json", name), *path;

	memset(pad, 'x', kib * 1024);
	pad[kib * 1024] = '\0';
	json_object_set_new(json_object_get(big, "meta"), "notes", json_string(pad));
	path = write_config(h, file, big);
	free(file);
	free(pad);
	json_decref(big);
	return path;
}

/* rungctl submit --sweep --then: the sweep and the job after it are one batch (one line in rungd's
 * log), the job after them runs after their ids. */
static void test_rungctl(struct harness *h)
{
	const char *fx = "tests/data/aitk_flux_lora_24gb.yaml";
	long long before = jobs_count(h);
	char *args = xasprintf("submit %s --sweep train.lr=1e-4,2e-4,3e-4 --pool it-nowhere --then %s --json", fx, fx);
	int rc = 0;
	char *out = h_rungctl(h, args, &rc);
	json_t *doc = out ? json_loads(strchr(out, '{') ? strchr(out, '{') : out, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
	json_t *then = json_object_get(doc, "then");

	h_ok(h, rc == 0 && json_array_size(json_object_get(doc, "jobs")) == 3 && json_is_object(then) &&
		     json_array_size(json_object_get(then, "after")) == 3 && jobs_count(h) == before + 4,
	     "rungctl submit --sweep (3) --then: four jobs, the last after the three (%d %.300s)", rc, out);
	h_ok(h, json_integer_value(json_array_get(json_object_get(then, "after"), 2)) ==
			json_integer_value(json_object_get(json_array_get(json_object_get(doc, "jobs"), 2), "id")),
	     "the --then job runs after the sweep's third job");
	{
		char *log = h_slurp(h->server.log_path);
		h_ok(h, log && strstr(log, "jobs submitted") && strstr(log, "jobs=4"),
		     "rungd logged them as one batch of four");
		free(log);
	}
	h_cancel_active(h, "pool", "it-nowhere");
	json_decref(doc);
	free(out);
	free(args);
	{
		/* a sweep whose batch is over rungd's 1 MiB body limit, each job under it: 413, and rungctl
		 * sends the jobs one by one (as to a rungd that predates batches, which answers 405) */
		char *path = big_config(h, "cli_big", 400);
		before = jobs_count(h);
		args = xasprintf("submit %s --sweep train.lr=1e-4,2e-4,3e-4 --pool it-nowhere", path);
		out = h_rungctl(h, args, &rc);
		h_ok(h, rc == 0 && jobs_count(h) == before + 3 && out && strstr(out, ": 3 jobs"),
		     "a sweep over the body limit as one batch: sent one by one, three jobs (%d %.300s)", rc, out);
		free(out);
		free(args);
		free(path);
	}
	{
		/* two files over the body limit together, under one key: one by one as K-1 and K-2 (not both as K),
		 * and the same command again makes no new job */
		char *path = big_config(h, "cli_big2", 600);
		before = jobs_count(h);
		args = xasprintf("submit %s %s --pool it-nowhere --idempotency-key two-big", path, path);
		for (int round = 0; round < 2; round++) {
			out = h_rungctl(h, args, &rc);
			h_ok(h, rc == 0 && jobs_count(h) == before + 2,
			     "two files over the body limit, --idempotency-key, %s: two jobs (%d %.300s)",
			     round ? "sent again" : "sent one by one", rc, out);
			free(out);
		}
		free(args);
		free(path);
	}
	h_ok(h, h_sql_int(h, "SELECT (rung_jobs_text('{}'::bigint[]) IS NULL)::int", 0, NULL) == 1,
	     "rung_jobs_text of no job: NULL");
	{
		/* several files: a job each, in order, one batch; one that rungd refuses stores none */
		json_t *bad = h_config("cli_bad_file", 5), *d2;
		char *bad_path;
		h_config_set(bad, "config.process[0].train.batch_size", json_integer(0));
		bad_path = write_config(h, "bad.json", bad);
		before = jobs_count(h);
		args = xasprintf("submit %s tests/data/flux_image.json --pool it-nowhere --json", fx);
		out = h_rungctl(h, args, &rc);
		d2 = out && strchr(out, '{') ? json_loads(strchr(out, '{'), JSON_DISABLE_EOF_CHECK, NULL) : NULL;
		h_ok(h, rc == 0 && json_array_size(json_object_get(d2, "jobs")) == 2 && jobs_count(h) == before + 2 &&
			     json_integer_value(json_object_get(json_array_get(json_object_get(d2, "jobs"), 0), "id")) <
				     json_integer_value(json_object_get(json_array_get(json_object_get(d2, "jobs"), 1), "id")),
		     "rungctl submit FILE FILE: two jobs, in the order given (%d %.300s)", rc, out);
		json_decref(d2);
		free(out);
		free(args);
		before = jobs_count(h);
		args = xasprintf("submit %s %s --pool it-nowhere", fx, bad_path);
		out = h_rungctl(h, args, &rc);
		h_ok(h, rc != 0 && out && strstr(out, "jobs[1].config") && jobs_count(h) == before,
		     "rungctl submit GOOD BAD: refused at jobs[1], the good one not stored either (%d %.300s)", rc, out);
		free(out);
		free(args);
		args = xasprintf("submit %s %s --name two", fx, fx);
		out = h_rungctl(h, args, &rc);
		h_ok(h, rc == 2 && out && strstr(out, "--name with 2 files"), "rungctl submit FILE FILE --name: exit 2 (%d %.200s)",
		     rc, out);
		free(out);
		free(args);
		free(bad_path);
		json_decref(bad);
	}
	/* a sweep one of whose jobs rungd refuses: none of it is stored (one by one, the first was) */
	before = jobs_count(h);
	args = xasprintf("submit %s --sweep train.batch_size=1,0 --pool it-nowhere", fx);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc != 0 && out && strstr(out, "jobs[1].config") && strstr(out, "nothing was submitted") &&
		     strstr(out, "not submitted") && jobs_count(h) == before,
	     "rungctl submit --sweep with a value rungd refuses: exit %d, naming jobs[1], nothing stored (%.300s)", rc, out);
	free(out);
	free(args);
}

/* rungctl wait: follows a sweep (by its label) or jobs (by id) until every one ended; exit 0 when all
 * succeeded, 1 otherwise, 4 when no job carries the labels, 2 for a bad command line. */
static void test_wait(struct harness *h)
{
	json_t *cfg = h_config("wait_me", 4);
	char *path = write_config(h, "wait.json", cfg), *args, *out, *later = NULL, *quick = NULL;
	json_t *ex;
	int rc = 0;
	long st = 0;

	args = xasprintf("submit %s --sweep train.lr=1e-4,2e-4 --labels sweep=wait-test", path);
	out = h_rungctl(h, args, &rc);
	h_ok(h, rc == 0, "a sweep of two to wait for (%d %.200s)", rc, out);
	free(out);
	free(args);
	out = h_rungctl(h, "wait --label sweep=wait-test --interval-ms 200", &rc);
	h_ok(h, rc == 0 && out && strstr(out, "succeeded\twait_me_lr1e-4") && strstr(out, "succeeded\twait_me_lr2e-4") &&
		     strstr(out, "2 jobs ended: 2 succeeded\n"),
	     "rungctl wait --label sweep=ID: each ending, then \"2 jobs ended: 2 succeeded\", exit 0 (%d %.300s)", rc, out);
	free(out);
	quick = h_submit_id(h, "wait_quick", 3, NULL);
	ex = json_pack("{s:i}", "start_in_s", 3600);
	later = h_submit_id(h, "wait_later", 3, ex);
	json_decref(ex);
	if (later)
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", later));
	args = xasprintf("wait %s %s --interval-ms 200", quick ? quick : "0", later ? later : "0");
	out = h_rungctl(h, args, &rc);
	{
		char *want = xasprintf("2 jobs ended: 1 succeeded; cancelled: %s\n", later ? later : "?");
		h_ok(h, rc == 1 && out && strstr(out, want), "rungctl wait A B, B cancelled: \"%s\", exit 1 (%d %.300s)", want, rc,
		     out);
		free(want);
	}
	free(out);
	free(args);
	{
		/* a job held by a cancelled job it runs after: said, counted, and no endless wait */
		char *dep = NULL, *want;
		ex = json_pack("{s:[I]}", "after", (json_int_t)(later ? atoll(later) : 1));
		dep = h_submit_id(h, "wait_held", 3, ex);
		json_decref(ex);
		args = xasprintf("wait %s %s --interval-ms 200", later ? later : "0", dep ? dep : "0");
		out = h_rungctl(h, args, &rc);
		want = xasprintf("1 job ended: 0 succeeded; cancelled: %s; held, waiting for a retry: %s\n", later ? later : "?",
				 dep ? dep : "?");
		h_ok(h, rc == 1 && out && strstr(out, "held\twait_held: job ") && strstr(out, "was cancelled") && strstr(out, want),
		     "rungctl wait on a job held by a cancelled one: \"held\", the summary, exit 1 (%d %.400s)", rc, out);
		free(want);
		free(out);
		free(args);
		if (dep)
			json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", dep));
		free(dep);
	}
	out = h_rungctl(h, "wait --label sweep=nothing-carries-this", &rc);
	h_ok(h, rc == 4 && out && strstr(out, "no job carries the labels"), "rungctl wait --label that no job has: exit 4 (%d)",
	     rc);
	free(out);
	out = h_rungctl(h, "wait", &rc);
	h_ok(h, rc == 2, "rungctl wait with neither ids nor --label: exit 2 (%d)", rc);
	free(out);
	out = h_rungctl(h, "wait 5 --label a=b", &rc);
	h_ok(h, rc == 2, "rungctl wait with both: exit 2 (%d)", rc);
	free(out);
	free(quick);
	free(later);
	free(path);
	json_decref(cfg);
}

int main(void)
{
	struct harness *h = h_new("it_submit_batch");
	struct h_worker *w;
	char *done_id = NULL;
	json_t *done = NULL;

	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	w = h_worker_start(h, "w1", NULL);
	if (!h_ok(h, w != NULL, "a worker starts"))
		return h_free(h);
	test_bad(h);
	test_pipeline(h);
	done_id = h_submit_id(h, "done_first", 4, NULL);
	done = done_id ? h_wait_job(h, done_id, "succeeded", RUN_MS) : NULL;
	if (h_ok(h, done != NULL, "a job that succeeds, for the run-only-if-it-fails case"))
		test_all_or_none(h, done_id);
	test_idempotency(h);
	test_numbers(h);
	test_submitter(h);
	test_rungctl(h);
	test_wait(h);
	json_decref(done);
	free(done_id);
	h_worker_stop(h, w, SIGTERM);
	return h_free(h);
}
