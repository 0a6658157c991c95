/* Integration: borrowing between pools (migration 028) end to end. With real rung-workers: a bad
 * --borrow is refused at start (exit 2 naming it); a worker of pool b-h200 started with --borrow
 * default runs a job of default while default has no worker; with a job of its own pool and one of
 * default both queued it takes its own first; GET /v1/workers, its log lines and the GPUs page name
 * what it borrows; restarted without --borrow, its registration clears the list and it no longer
 * takes default's jobs. With a registered worker that never leases (a lender, so that its jobs stay
 * queued): the placement's borrowing_gpus and the job page's sentence, rung_pool_borrowing_gpus,
 * rung_queue_unplaceable counting the lender's GPUs (exclusions included), and a re-registration
 * with "borrow": [] taking all of it back. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "pool.h"
#include "util.h"

/* The listed worker named name (new reference) or NULL. */
static json_t *listed(struct harness *h, const char *name)
{
	long st = 0;
	json_t *r = h_get(h, "/v1/workers", &st), *w, *out = NULL;
	size_t i;

	json_array_foreach(json_object_get(r, "workers"), i, w)
		if (!strcmp(h_str(w, "name"), name))
			out = json_incref(w);
	json_decref(r);
	return out;
}

/* A wait on GET /v1/workers: the worker named `name` is listed in pool `pool` borrowing `borrow`
 * (its list joined with ","; "" for none, which needs the member to be an array). */
struct borrowing {
	struct harness *h;
	const char *name, *pool, *borrow;
};

static bool is_borrowing(void *arg)
{
	struct borrowing *b = arg;
	json_t *w = listed(b->h, b->name);
	char *list = pool_list_join(json_object_get(w, "borrow"), ",", "");
	bool ok = w && !strcmp(h_str(w, "pool"), b->pool) && json_is_array(json_object_get(w, "borrow")) &&
		  !strcmp(list, b->borrow);

	free(list);
	json_decref(w);
	return ok;
}

/* Whether some line of text holds both a and b. */
static bool line_has(const char *text, const char *a, const char *b)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		const char *end = strchr(p, '\n'), *x = strstr(p, a), *y = strstr(p, b);
		if (x && y && (!end || (x < end && y < end)))
			return true;
	}
	return false;
}

/* A /ui page as the admin, by its cookie (heap body, "" when none); *st its status. */
static char *page(struct harness *h, const char *path, long *st)
{
	*st = h_browse(h, h->admin_token, "GET", path, NULL, NULL);
	return xstrdup(h->last_body ? h->last_body : "");
}

/* Job id's first attempt (new reference) or NULL. */
static json_t *first_attempt(struct harness *h, const char *id)
{
	long st = 0;
	json_t *r = h_getf(h, &st, "/v1/jobs/%s/attempts", id), *a = json_incref(json_array_get(json_object_get(r, "attempts"), 0));

	json_decref(r);
	return a;
}

/* Submits a job of steps steps to pool (NULL: none named) and returns its id (heap) or NULL. */
static char *submit(struct harness *h, const char *name, int steps, const char *pool)
{
	json_t *extra = pool ? json_pack("{s:s}", "pool", pool) : NULL;
	char *id = h_submit_id(h, name, steps, extra);

	json_decref(extra);
	return id;
}

/* rung-worker refuses a bad borrow list before it registers: exit 2, the flag (or variable) named. */
static void test_bad_borrow(struct harness *h)
{
	int rc = -1;
	char *out = h_shell(h, "bin/rung-worker --server http://127.0.0.1:1 --pool b-h200 --borrow default,b-h200", &rc);

	if (!h_ok(h, rc == 2 && strstr(out, "--borrow") && strstr(out, "own pool (b-h200)"),
		  "rung-worker --borrow naming its own pool: exit 2 naming --borrow and why (rc %d)", rc))
		h_diag("output: %.300s", out);
	free(out);
	out = h_shell(h, "bin/rung-worker --server http://127.0.0.1:1 --borrow a,b,a", &rc);
	if (!h_ok(h, rc == 2 && strstr(out, "--borrow") && strstr(out, "pool a twice"),
		  "rung-worker --borrow a,b,a: exit 2 naming --borrow and the pool named twice (rc %d)", rc))
		h_diag("output: %.300s", out);
	free(out);
	out = h_shell(h, "RUNG_BORROW=Default bin/rung-worker --server http://127.0.0.1:1", &rc);
	if (!h_ok(h, rc == 2 && strstr(out, "RUNG_BORROW") && strstr(out, "1 to 63 of a-z 0-9 . _ -"),
		  "RUNG_BORROW=Default: exit 2 naming the variable and the rule (rc %d)", rc))
		h_diag("output: %.300s", out);
	free(out);
}

static void test_borrower(struct harness *h)
{
	static const char *const borrow_args[] = { "--pool", "b-h200", "--borrow", "default", NULL };
	static const char *const own_args[] = { "--pool", "b-h200", NULL };
	const struct h_worker_opts borrowing = { .args = borrow_args }, not_borrowing = { .args = own_args };
	struct borrowing wait = { h, "borrower", "b-h200", "default" };
	struct h_worker *w = NULL;
	json_t *j = NULL, *lw = NULL, *a2 = NULL, *a3 = NULL;
	char *j1 = NULL, *j2 = NULL, *j3 = NULL, *j4 = NULL, *j5 = NULL, *wid = NULL, *log = NULL, *body = NULL, *show = NULL;
	long st = 0;
	int rc = -1;

	/* a job of default, and no worker of default anywhere */
	j1 = submit(h, "borrow_one", 10, NULL);
	j = j1 ? h_job(h, j1) : NULL;
	h_ok(h, j && !strcmp(h_str(j, "state"), "queued") && h_int(json_object_get(j, "placement"), "gpus") == 0 &&
		     h_int(json_object_get(j, "placement"), "borrowing_gpus") == 0,
	     "a job of default with no worker: queued, no GPU of its pool nor of a borrower");
	json_decref(j);
	j = NULL;

	w = h_worker_start(h, "borrower", &borrowing);
	if (!h_ok(h, w && wait_until(is_borrowing, &wait, 20000),
		  "a worker started with --pool b-h200 --borrow default is listed in b-h200, borrowing [\"default\"]"))
		goto out;
	lw = listed(h, "borrower");
	wid = h_id(lw, "id");
	j = j1 ? h_wait_job(h, j1, "succeeded", 60000) : NULL;
	h_ok(h, j != NULL, "the default job succeeded on the borrower");
	json_decref(j);
	j = j1 ? first_attempt(h, j1) : NULL;
	{
		char *ran = h_id(j, "worker_id");
		h_ok(h, ran && wid && !strcmp(ran, wid), "it ran on the b-h200 worker that borrows from default");
		free(ran);
	}
	json_decref(j);
	j = NULL;
	log = h_slurp(w->proc.log_path);
	h_ok(h, line_has(log, "msg=\"started\"", " borrow=default ") && line_has(log, "msg=\"registered\"", " borrow=default "),
	     "its log's started and registered lines name what it borrows");
	free(log);
	log = NULL;
	body = page(h, "/ui/gpus", &st);
	h_ok(h, st == 200 && strstr(body, "<th>borrows</th>") && strstr(body, "<td class=\"borrow\">default</td>"),
	     "the GPUs page's workers table shows what the worker borrows");
	free(body);
	body = NULL;

	/* its own pool's job first: both queued while it is stopped (the default one first), then it comes back */
	h_ok(h, h_worker_stop(h, w, SIGTERM) == 0, "the borrower stopped");
	j2 = submit(h, "borrow_default", 10, NULL);
	j3 = submit(h, "borrow_own", 60, "b-h200");
	h_ok(h, j2 && j3, "a job of default, then one of b-h200, queued while it is away");
	h_ok(h, h_worker_restart(h, w) == 0, "the borrower restarted with --borrow default");
	j = j3 ? h_wait_job(h, j3, "running", 60000) : NULL;
	h_ok(h, j != NULL, "its own pool's job runs");
	json_decref(j);
	j = j2 ? h_job(h, j2) : NULL;
	h_ok(h, j && !strcmp(h_str(j, "state"), "queued") && h_int(json_object_get(j, "placement"), "gpus") == 0 &&
		     h_int(json_object_get(j, "placement"), "borrowing_gpus") == 1,
	     "meanwhile the older default job waits, the borrower's GPU counted in its placement (%s)", h_str(j, "state"));
	json_decref(j);
	{
		/* while its own job still runs after the show, the default one was waiting throughout */
		char *args = xasprintf("show %s", j2 ? j2 : "0");
		bool busy;
		show = h_rungctl(h, args, &rc);
		free(args);
		j = j3 ? h_job(h, j3) : NULL;
		busy = j && !strcmp(h_str(j, "state"), "running");
		json_decref(j);
		j = NULL;
		h_ok(h, rc == 0 && show && (!busy || strstr(show, "waiting for a GPU: no GPU in pool default can run it; 1 GPU "
								  "of workers that borrow from default may take it when their own "
								  "pool has no job for them")),
		     "rungctl show of the waiting default job names the borrower's GPU");
	}
	j = j3 ? h_wait_job(h, j3, "succeeded", 60000) : NULL;
	h_ok(h, j != NULL, "the b-h200 job succeeded");
	json_decref(j);
	j = j2 ? h_wait_job(h, j2, "succeeded", 60000) : NULL;
	h_ok(h, j != NULL, "then the default job succeeded");
	json_decref(j);
	j = NULL;
	a2 = j2 ? first_attempt(h, j2) : NULL;
	a3 = j3 ? first_attempt(h, j3) : NULL;
	h_ok(h, a2 && a3 && h_int(a3, "id") < h_int(a2, "id"),
	     "the borrower leased its own pool's job before the older one of default (attempts %lld, %lld)",
	     a3 ? h_int(a3, "id") : -1, a2 ? h_int(a2, "id") : -1);

	/* restarted without --borrow: its registration clears the list, default's jobs are not its any more */
	h_ok(h, h_worker_stop(h, w, SIGTERM) == 0, "the borrower stopped again");
	w = h_worker_start(h, "borrower", &not_borrowing);
	wait.borrow = "";
	h_ok(h, w && wait_until(is_borrowing, &wait, 20000), "restarted without --borrow it is listed borrowing none ([])");
	log = w ? h_slurp(w->proc.log_path) : NULL;
	h_ok(h, log && line_has(log, "msg=\"registered\"", " borrow=none "), "its registered line says it borrows none");
	j4 = submit(h, "borrow_not", 10, NULL);
	j5 = submit(h, "borrow_own2", 10, "b-h200");
	j = j5 ? h_wait_job(h, j5, "succeeded", 60000) : NULL;
	h_ok(h, j != NULL, "a later job of its own pool ran");
	json_decref(j);
	free(j5);
	j5 = submit(h, "borrow_own3", 10, "b-h200"); /* its slot leased again between the two: default's job was there */
	j = j5 ? h_wait_job(h, j5, "succeeded", 60000) : NULL;
	h_ok(h, j != NULL, "and another");
	json_decref(j);
	j = j4 ? h_job(h, j4) : NULL;
	h_ok(h, j && !strcmp(h_str(j, "state"), "queued") && h_int(json_object_get(j, "placement"), "borrowing_gpus") == 0 &&
		     h_int(json_object_get(j, "placement"), "other_pools_gpus") == 1,
	     "the default job submitted before them still waits, the worker's GPU now counted in other pools (%s)",
	     h_str(j, "state"));
	free(show);
	{
		char *args = xasprintf("show %s", j4 ? j4 : "0");
		show = h_rungctl(h, args, &rc);
		free(args);
	}
	h_ok(h, rc == 0 && show && strstr(show, "waiting for a GPU: no GPU in pool default can run it (1 in other pool)"),
	     "rungctl show: no GPU in its pool, one in another");
	if (j4)
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", j4));
out:
	json_decref(j);
	json_decref(lw);
	json_decref(a2);
	json_decref(a3);
	free(j1);
	free(j2);
	free(j3);
	free(j4);
	free(j5);
	free(wid);
	free(log);
	free(show);
}

/* A worker that never leases, of pool lend-a, borrowing from lend-b: lend-b's job stays queued. */
static void test_lender(struct harness *h)
{
	json_t *reg = json_pack("{s:s, s:s, s:s, s:[s], s:[{s:s, s:i, s:s, s:i}]}", "name", "lender", "host", "test-host",
				"pool", "lend-a", "borrow", "lend-b", "gpus", "uuid", "GPU-lend-0", "index", 0, "name",
				"NVIDIA Sim", "memory_total_mib", 81920);
	json_t *r = NULL, *j = NULL;
	char *id = NULL, *t = NULL, *body = NULL, *path = NULL;
	const char *p[1];
	long st = 0;

	r = h_post(h, "/v1/workers", reg, &st);
	h_ok(h, (st == 200 || st == 201) && json_array_size(json_object_get(r, "borrow")) == 1 &&
		     !strcmp(json_string_value(json_array_get(json_object_get(r, "borrow"), 0)) ?: "", "lend-b"),
	     "a worker of lend-a registered borrowing from lend-b; the answer says so (%ld)", st);
	json_decref(r);
	id = submit(h, "lend_job", 10, "lend-b");
	j = id ? h_job(h, id) : NULL;
	h_ok(h, j && !strcmp(h_str(j, "state"), "queued") && h_int(json_object_get(j, "placement"), "gpus") == 0 &&
		     h_int(json_object_get(j, "placement"), "borrowing_gpus") == 1,
	     "a job of lend-b: no GPU of its pool, the lender's one counted in borrowing_gpus");
	json_decref(j);
	j = NULL;
	path = xasprintf("/ui/jobs/%s", id ? id : "0");
	body = page(h, path, &st);
	h_ok(h, st == 200 && strstr(body, "waiting for a GPU: no GPU in pool lend-b can run it; 1 GPU of workers that borrow "
					  "from lend-b may take it when their own pool has no job for them"),
	     "the job page says a borrower may take it");
	free(body);
	body = page(h, "/ui/gpus", &st);
	h_ok(h, st == 200 && strstr(body, "<td class=\"borrow\">lend-b</td>"), "the GPUs page shows the lender's list");
	free(body);
	body = NULL;

	t = h_scrape(h);
	h_ok(h, t && h_sample(t, "rung_pool_borrowing_gpus{pool=\"lend-b\"}") == 1 && h_sample(t, "rung_pool_gpus{pool=\"lend-b\"}") == 0 &&
		     h_sample(t, "rung_pool_queued_jobs{pool=\"lend-b\"}") == 1,
	     "/metrics: lend-b has a queued job, no GPU of its own and 1 of a borrower (RungPoolWithoutGpus quiet)");
	h_ok(h, t && h_sample(t, "rung_pool_borrowing_gpus{pool=\"lend-a\"}") == 0,
	     "/metrics: lend-a, the lender's own pool, borrowed from by none");
	h_ok(h, t && h_sample(t, "rung_queue_unplaceable") == 0, "/metrics: the lend-b job is not unplaceable (%g)",
	     t ? h_sample(t, "rung_queue_unplaceable") : -1);
	free(t);
	p[0] = id ? id : "0";
	PQclear(h_sql(h, "UPDATE jobs SET constraints = '{\"exclude_gpus\": [\"GPU-elsewhere\"]}' WHERE id = $1::bigint", 1, p));
	t = h_scrape(h);
	h_ok(h, t && h_sample(t, "rung_queue_unplaceable") == 0,
	     "/metrics: with exclusions that leave the lender's GPU, still not unplaceable (%g)",
	     t ? h_sample(t, "rung_queue_unplaceable") : -1);
	free(t);
	PQclear(h_sql(h, "UPDATE jobs SET constraints = '{\"exclude_gpus\": [\"GPU-lend-0\"]}' WHERE id = $1::bigint", 1, p));
	t = h_scrape(h);
	h_ok(h, t && h_sample(t, "rung_queue_unplaceable") == 1, "/metrics: excluding the lender's GPU, unplaceable (%g)",
	     t ? h_sample(t, "rung_queue_unplaceable") : -1);
	free(t);
	PQclear(h_sql(h, "UPDATE jobs SET constraints = '{}' WHERE id = $1::bigint", 1, p));

	/* registered again with "borrow": [] it lends nothing */
	json_object_set_new(reg, "borrow", json_array());
	json_decref(r = h_post(h, "/v1/workers", reg, &st));
	j = id ? h_job(h, id) : NULL;
	h_ok(h, st == 200 && j && h_int(json_object_get(j, "placement"), "borrowing_gpus") == 0 &&
		     h_int(json_object_get(j, "placement"), "other_pools_gpus") >= 1,
	     "re-registered with borrow []: the lend-b job's placement counts the GPU in other pools");
	t = h_scrape(h);
	h_ok(h, t && h_sample(t, "rung_pool_borrowing_gpus{pool=\"lend-b\"}") == 0 && h_sample(t, "rung_pool_gpus{pool=\"lend-b\"}") == 0 &&
		     h_sample(t, "rung_queue_unplaceable") == 1,
	     "/metrics: lend-b listed with 0 GPUs of either kind (RungPoolWithoutGpus fires), its job unplaceable");
	free(t);
	if (id)
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id));
	json_decref(j);
	json_decref(reg);
	free(path);
	free(id);
}

int main(void)
{
	struct harness *h = h_new("it_borrow");

	test_bad_borrow(h);
	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	test_borrower(h);
	test_lender(h);
	return h_free(h);
}
