/* Integration: worker pools end to end with real rung-workers: --pool refused at start when it is
 * not a pool name; a worker's pool in GET /v1/workers and its log; a job of a pool runs only on a
 * worker of that pool, one that names none only on a default worker; a job of a pool without
 * workers waits and says where the GPUs are; a worker restarted without --pool is back in default. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"

/* A wait on GET /v1/workers: the worker named `name` is listed in pool `pool`. */
struct in_pool {
	struct harness *h;
	const char *name, *pool;
};

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

static bool is_in_pool(void *arg)
{
	struct in_pool *p = arg;
	json_t *w = listed(p->h, p->name);
	bool ok = w && !strcmp(h_str(w, "pool"), p->pool);

	json_decref(w);
	return ok;
}

/* rung-worker refuses a bad pool before it registers: exit 2, the flag (or variable) and the rule named. */
static void test_bad_pool(struct harness *h)
{
	int rc = -1;
	char *out = h_shell(h, "bin/rung-worker --server http://127.0.0.1:1 --pool H200", &rc);

	if (!h_ok(h, rc == 2 && strstr(out, "--pool") && strstr(out, "1 to 63 of a-z 0-9 . _ -") && strstr(out, "\"H200\""),
		  "rung-worker --pool H200: exit 2 naming --pool, the rule and the value (rc %d)", rc))
		h_diag("output: %.300s", out);
	free(out);
	out = h_shell(h, "RUNG_POOL=-spot bin/rung-worker --server http://127.0.0.1:1", &rc);
	if (!h_ok(h, rc == 2 && strstr(out, "RUNG_POOL") && strstr(out, "1 to 63 of a-z 0-9 . _ -"),
		  "RUNG_POOL=-spot: exit 2 naming the variable (rc %d)", rc))
		h_diag("output: %.300s", out);
	free(out);
}

/* The worker id of job id's first attempt (heap) or NULL. */
static char *attempt_worker(struct harness *h, const char *id)
{
	long st = 0;
	json_t *r = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
	char *wid = h_id(json_array_get(json_object_get(r, "attempts"), 0), "worker_id");

	json_decref(r);
	return wid;
}

static void test_partition(struct harness *h)
{
	static const char *const pool_args[] = { "--pool", "it-h200", NULL };
	const struct h_worker_opts in_h200 = { .args = pool_args };
	struct h_worker *wh = h_worker_start(h, "pool-h200", &in_h200), *wd = h_worker_start(h, "pool-def", NULL);
	struct in_pool lh = { h, "pool-h200", "it-h200" }, ld = { h, "pool-def", "default" };
	json_t *cfg = h_config("pool_job", 10), *to_h200 = json_pack("{s:s}", "pool", "it-h200");
	json_t *to_none = json_pack("{s:s}", "pool", "it-nobody"), *a = NULL, *b = NULL, *c = NULL, *done = NULL;
	json_t *lwh = NULL, *lwd = NULL;
	char *whid = NULL, *wdid = NULL, *aid = NULL, *bid = NULL, *cid = NULL, *w = NULL, *log = NULL, *show = NULL;
	long st = 0;
	int rc = -1;

	if (!h_ok(h, wh && wd && wait_until(is_in_pool, &lh, 20000) && wait_until(is_in_pool, &ld, 20000),
		  "a worker started with --pool it-h200 is listed in it, one without in default"))
		goto out;
	log = h_slurp(wh->proc.log_path);
	h_ok(h, log && strstr(log, "msg=\"started\"") && strstr(log, "pool=it-h200"), "its log's start line names its pool");
	lwh = listed(h, "pool-h200");
	lwd = listed(h, "pool-def");
	whid = h_id(lwh, "id");
	wdid = h_id(lwd, "id");

	/* a job of it-h200 and one that names none: each on its own pool's worker */
	for (int round = 0; round < 2; round++) {
		a = h_submit(h, cfg, to_h200);
		b = h_submit(h, cfg, NULL);
		aid = h_id(a, "id");
		bid = h_id(b, "id");
		h_ok(h, aid && bid && !strcmp(h_str(a, "pool"), "it-h200") && !strcmp(h_str(b, "pool"), "default"),
		     "round %d: a job submitted to it-h200, one to no pool (default)", round);
		json_decref(done = aid ? h_wait_job(h, aid, "succeeded", 60000) : NULL);
		h_ok(h, done != NULL, "round %d: the it-h200 job succeeded", round);
		json_decref(done = bid ? h_wait_job(h, bid, "succeeded", 60000) : NULL);
		h_ok(h, done != NULL, "round %d: the default job succeeded", round);
		w = aid ? attempt_worker(h, aid) : NULL;
		h_ok(h, w && whid && !strcmp(w, whid), "round %d: it ran on the it-h200 worker", round);
		free(w);
		w = bid ? attempt_worker(h, bid) : NULL;
		h_ok(h, w && wdid && !strcmp(w, wdid), "round %d: the other on the default one", round);
		free(w);
		w = NULL;
		json_decref(a);
		json_decref(b);
		a = b = NULL;
		free(aid);
		free(bid);
		aid = bid = NULL;
	}

	/* a pool without workers: its job waits, and says the GPUs are elsewhere */
	c = h_submit(h, cfg, to_none);
	cid = h_id(c, "id");
	json_decref(c);
	c = cid ? h_job(h, cid) : NULL;
	h_ok(h, c && !strcmp(h_str(c, "state"), "queued") && h_int(json_object_get(c, "placement"), "gpus") == 0 &&
		     h_int(json_object_get(c, "placement"), "other_pools_gpus") == 2,
	     "a job of pool it-nobody: queued, no GPU in its pool, the 2 of the others counted");
	{
		char *args = xasprintf("show %s", cid ? cid : "0");
		show = h_rungctl(h, args, &rc);
		free(args);
	}
	if (!h_ok(h, rc == 0 && strstr(show, "no GPU in pool it-nobody can run it (2 in other pools)"),
		  "rungctl show says where the GPUs are"))
		h_diag("show: %.600s", show);
	if (cid)
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", cid));
	{
		/* rungctl submit says it at once: a sweep of three into a pool no worker takes from warns once */
		char *out = h_rungctl(h, "submit examples/flux_lora.json --pool it-nobody --sweep train.lr=1e-4,2e-4,3e-4", &rc);
		const char *warn = "warning: pool: no worker in the fleet serves pool it-nobody or borrows from it";
		const char *first = out ? strstr(out, warn) : NULL;
		if (!h_ok(h, rc == 0 && first && !strstr(first + 1, warn),
			  "rungctl submit into a pool no worker takes from: the jobs are stored, the warning said once"))
			h_diag("submit: %.800s", out ? out : "-");
		free(out);
		out = h_rungctl(h, "submit examples/flux_lora.json --pool it-h200", &rc);
		h_ok(h, rc == 0 && out && !strstr(out, "warning"), "into it-h200, whose worker is up: no warning");
		free(out);
		out = h_rungctl(h, "cancel --pool it-nobody", &rc);
		free(out);
	}

	/* restarted without --pool: back in default */
	h_ok(h, h_worker_stop(h, wh, SIGTERM) == 0, "the it-h200 worker stopped");
	wh = h_worker_start(h, "pool-h200", NULL);
	lh.pool = "default";
	h_ok(h, wh && wait_until(is_in_pool, &lh, 20000), "restarted without --pool it is in default again");
out:
	free(whid);
	free(wdid);
	free(show);
	free(log);
	free(cid);
	json_decref(c);
	json_decref(lwh);
	json_decref(lwd);
	json_decref(to_none);
	json_decref(to_h200);
	json_decref(cfg);
}

int main(void)
{
	struct harness *h = h_new("it_pools");

	test_bad_pool(h);
	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	test_partition(h);
	return h_free(h);
}
