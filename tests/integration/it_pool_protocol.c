/* Integration: worker pools (migration 026) over real HTTP with the real rungd. Workers register
 * into a pool (a bad name is a 400 naming pool), jobs name theirs in the envelope or a raw file's
 * query (a bad one is a 400 naming pool), the list filters by pool, a queued job's placement counts
 * its own pool's GPUs and the others', and a lease gives each GPU only its own pool's jobs: a GPU of
 * the default pool never gets the job of pool h200 queued before its own, and a job of a pool with
 * no host waits while other pools' GPUs are free; a job moved to another pool (POST
 * /v1/jobs/{id}/pool) runs there. A woken round tries every pool's parked GPUs: 130 GPUs of one pool
 * parked before the one GPU of another do not keep it from a job of its pool until the fallback poll
 * (two minutes here). A worker that borrows from another pool (migration 028) takes its jobs only when
 * its own pool has none. Fake workers speak the protocol, so each lease is asked for when the test says. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "jpath.h"
#include "util.h"

/* Registers a fake worker with one GPU into pool (NULL: none sent); returns the status and *id. */
static long join(struct harness *h, const char *name, const char *gpu, int mib, const char *pool, char **id)
{
	long st = 0;
	json_t *body = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", name, "host", "test-host", "gpus", "uuid",
				 gpu, "index", 0, "name", "NVIDIA Sim", "memory_total_mib", mib);
	json_t *r;

	if (pool)
		json_object_set_new(body, "pool", json_string(pool));
	r = h_post(h, "/v1/workers", body, &st);
	*id = (st == 200 || st == 201) ? h_id(r, "id") : NULL;
	if (*id && pool && strcmp(h_str(r, "pool"), pool))
		h_diag("register %s: pool %s in the answer, %s sent", name, h_str(r, "pool"), pool);
	json_decref(body);
	json_decref(r);
	return st;
}

/* The field a 400's body names, or "" (borrowed from h->last_body's parse; heap copy). */
static char *field_of(struct harness *h)
{
	json_t *b = h->last_body ? json_loads(h->last_body, 0, NULL) : NULL;
	char *f = xstrdup(h_str(b, "field"));

	json_decref(b);
	return f;
}

/* The job a lease of (worker, gpu) gets now (wait_ms 0): its name (heap), "" for none. With done,
 * the attempt is finished as a success. */
static char *lease_name_done(struct harness *h, const char *wid, const char *gpu, bool done)
{
	long st = 0;
	json_t *l = h_fake_lease(h, wid, gpu, 0, &st), *j;
	char *job_id = l ? h_id(l, "job_id") : NULL, *name;

	j = job_id ? h_job(h, job_id) : NULL;
	name = xstrdup(j ? h_str(j, "name") : "");
	if (l && done) {
		char *aid = h_id(l, "attempt_id");
		json_t *facts = h_facts_success(10);
		json_decref(h_fake_finish(h, aid, h_str(l, "token"), facts, &st));
		if (st != 200)
			h_diag("finish of attempt %s: %ld", aid, st);
		json_decref(facts);
		free(aid);
	}
	json_decref(j);
	json_decref(l);
	free(job_id);
	return name;
}

static char *lease_name(struct harness *h, const char *wid, const char *gpu)
{
	return lease_name_done(h, wid, gpu, false);
}

/* POST /v1/jobs/ID/pool {"pool": pool}; returns the status, *pool_out the answer's pool (heap). */
static long move(struct harness *h, const char *id, const char *pool, char **pool_out)
{
	long st = 0;
	json_t *body = json_pack("{s:s}", "pool", pool);
	json_t *r = h_postf(h, body, &st, "/v1/jobs/%s/pool", id);

	if (pool_out)
		*pool_out = xstrdup(h_str(r, "pool"));
	json_decref(r);
	json_decref(body);
	return st;
}

/* A parked long-poll on a thread: POST /v1/workers/WID/lease for gpu, waiting up to WAIT_MS. */
struct parked {
	const struct harness *h;
	char path[64], body[128];
	long status, ms;
	char *job_id; /* the lease's job, or NULL */
};

static void *park(void *arg)
{
	struct parked *p = arg;
	json_t *r = h_request_once(p->h, "POST", p->path, p->body, &p->status, &p->ms);

	p->job_id = p->status == 200 ? h_id(r, "job_id") : NULL;
	json_decref(r);
	return NULL;
}

struct waiting {
	struct harness *h;
	long n;
};

static bool waiters_at(void *arg)
{
	struct waiting *w = arg;
	long st = 0;
	json_t *j = h_get(w->h, "/metrics", &st);
	const char *at = st == 200 && w->h->last_body ? strstr(w->h->last_body, "\nrung_lease_waiters ") : NULL;

	json_decref(j);
	/* and no claim round in flight: the last waiter's first round has parked it */
	return at && strtol(at + strlen("\nrung_lease_waiters "), NULL, 10) == w->n &&
	       h_sql_int(w->h, "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active' "
				"AND query LIKE '%rung_claim_round%'", 0, NULL) == 0;
}

/* No job is queued or running (an expiring lease's re-queue would wake the waiters). */
static bool all_ended(void *arg)
{
	return h_sql_int(arg, "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')", 0, NULL) == 0;
}

/* 130 GPUs of pool many parked first, then the one GPU of pool few: a job submitted to few reaches
 * it at once (the wake), though the woken round takes at most 128 parked waiters. */
static void test_wake_every_pool(struct harness *h, const json_t *cfg)
{
	enum { MANY = 130, WAIT_MS = 20000 };
	struct harness view = *h; /* read-only for the threads: h_request_once reads base_url and auth_token */
	struct parked *p = calloc(MANY + 1, sizeof *p);
	pthread_t th[MANY + 1];
	struct waiting wt = { h, MANY };
	char *wid[3] = { NULL, NULL, NULL }, *wfew = NULL;
	int started = 0, k;
	json_t *extra, *job = NULL;
	char *id = NULL;

	for (k = 0; k < 3; k++) {
		/* three workers of pool many: 64, 64 and 2 GPUs */
		int n = k < 2 ? 64 : 2;
		long st = 0;
		json_t *gpus = json_array(), *body, *r;
		char name[16];
		for (int g = 0; g < n; g++)
			json_array_append_new(gpus, json_pack("{s:o, s:i}", "uuid", json_sprintf("GPU-many-%d-%d", k, g),
							      "memory_total_mib", 24576));
		snprintf(name, sizeof name, "many%d", k);
		body = json_pack("{s:s, s:s, s:s, s:o}", "name", name, "host", "h", "pool", "many", "gpus", gpus);
		r = h_post(h, "/v1/workers", body, &st);
		wid[k] = st == 201 ? h_id(r, "id") : NULL;
		json_decref(r);
		json_decref(body);
	}
	if (!h_ok(h, wid[0] && wid[1] && wid[2] && join(h, "few", "GPU-few-0", 24576, "few", &wfew) == 201,
		  "three workers with 130 GPUs register into pool many, one with a GPU into pool few"))
		goto out;
	{
		/* the earlier jobs ended: no lease of theirs expires (and wakes the waiters) meanwhile */
		long st = h_cancel_active(h, "kind", "image");
		if (!h_ok(h, st == 200 && wait_until(all_ended, h, 20000 * h_slow()), "the earlier jobs are cancelled"))
			goto out;
	}
	for (k = 0; k < MANY; k++) {
		int wk = k < 64 ? 0 : k < 128 ? 1 : 2, g = k < 64 ? k : k < 128 ? k - 64 : k - 128;
		p[k].h = &view;
		snprintf(p[k].path, sizeof p[k].path, "/v1/workers/%s/lease", wid[wk]);
		snprintf(p[k].body, sizeof p[k].body, "{\"gpu_uuid\": \"GPU-many-%d-%d\", \"wait_ms\": %d}", wk, g, WAIT_MS);
		if (pthread_create(&th[k], NULL, park, &p[k]) == 0)
			started++;
	}
	if (!h_ok(h, started == MANY && wait_until(waiters_at, &wt, 10000 * h_slow()), "130 GPUs of pool many parked"))
		goto join;
	p[MANY].h = &view;
	snprintf(p[MANY].path, sizeof p[MANY].path, "/v1/workers/%s/lease", wfew);
	snprintf(p[MANY].body, sizeof p[MANY].body, "{\"gpu_uuid\": \"GPU-few-0\", \"wait_ms\": %d}", WAIT_MS);
	if (pthread_create(&th[MANY], NULL, park, &p[MANY]) == 0)
		started++;
	wt.n = MANY + 1;
	if (!h_ok(h, started == MANY + 1 && wait_until(waiters_at, &wt, 10000 * h_slow()), "then the GPU of pool few parks"))
		goto join;
	extra = json_pack("{s:s, s:s}", "pool", "few", "name", "for-few");
	job = h_submit(h, cfg, extra);
	id = job ? h_id(job, "id") : NULL;
	json_decref(extra);
join:
	for (k = 0; k < started; k++)
		pthread_join(th[k], NULL);
	if (id) {
		h_ok(h, p[MANY].job_id && !strcmp(p[MANY].job_id, id) && p[MANY].ms < WAIT_MS / 2,
		     "the GPU of pool few got the job at the wake (%ld ms into its %d ms wait), not at the fallback poll",
		     p[MANY].ms, WAIT_MS);
		int leased = 0;
		for (k = 0; k < MANY; k++)
			leased += p[k].job_id != NULL;
		h_ok(h, leased == 0, "no GPU of pool many got it (%d)", leased);
	}
out:
	for (k = 0; k <= MANY; k++)
		free(p[k].job_id);
	free(p);
	for (k = 0; k < 3; k++)
		free(wid[k]);
	free(wfew);
	free(id);
	json_decref(job);
}

/* A request as the given token (the harness' admin token otherwise); st gets the status. */
static json_t *as(struct harness *h, const char *token, const char *method, const char *path, const json_t *body, long *st)
{
	const char *saved = h->auth_token;
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_t *j;

	h->auth_token = token;
	j = h_request(h, method, path, s, s ? strlen(s) : 0, NULL, st);
	h->auth_token = saved;
	free(s);
	return j;
}

/* A token's pools (migration 027): an admin keeps the submitter's token to pool h200 and the worker's
 * to pool kept; the submitter's submit and move elsewhere are 403 naming pool and store nothing, in
 * h200 they go on; the worker joins kept, not default; a bad list is a 400; null lifts it. */
static void test_token_pools(struct harness *h, const json_t *cfg)
{
	const char *ps[1] = { "it-submitter" }, *pw[1] = { "it-worker" };
	long long sid = h_sql_int(h, "SELECT id FROM tokens WHERE name = $1", 1, ps);
	long long wid = h_sql_int(h, "SELECT id FROM tokens WHERE name = $1", 1, pw);
	long long before;
	long st = 0;
	json_t *body, *r;
	char *f, *id = NULL;

	body = json_pack("{s:[s]}", "pools", "h200");
	r = h_postf(h, body, &st, "/v1/tokens/%lld/pools", sid);
	h_ok(h, st == 200 && json_array_size(json_object_get(r, "pools")) == 1, "POST /v1/tokens/ID/pools keeps the submitter to h200");
	json_decref(r);
	json_decref(body);
	before = h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);
	body = json_pack("{s:O}", "config", cfg);
	r = as(h, h->submitter_token, "POST", "/v1/jobs", body, &st);
	h_ok(h, st == 403 && !strcmp(h_str(r, "field"), "pool") && strstr(h_str(r, "message"), "h200"),
	     "its submit to default: 403 naming pool, saying its pools (%ld %s)", st, h_str(r, "message"));
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == before, "and nothing stored");
	json_decref(r);
	json_decref(body);
	body = json_pack("{s:O, s:s}", "config", cfg, "pool", "h200");
	r = as(h, h->submitter_token, "POST", "/v1/jobs", body, &st);
	id = st == 201 ? h_id(r, "id") : NULL;
	h_ok(h, id != NULL, "its submit to h200: 201 (%ld)", st);
	json_decref(r);
	json_decref(body);
	if (id) {
		char *path = xasprintf("/v1/jobs/%s/pool", id);
		body = json_pack("{s:s}", "pool", "default");
		r = as(h, h->submitter_token, "POST", path, body, &st);
		h_ok(h, st == 403 && !strcmp(h_str(r, "field"), "pool"), "its move to default: 403 naming pool (%ld)", st);
		json_decref(r);
		r = as(h, h->admin_token, "POST", path, body, &st);
		h_ok(h, st == 403, "an admin's too: a job stays in a pool its owner may use (%ld)", st);
		json_decref(r);
		json_decref(body);
		{
			/* the job page's move form says the same, as a page, and moves nothing */
			char *form_path = xasprintf("/ui/jobs/%s/pool", id);
			json_t *j;
			bool said;
			st = h_browse(h, h->submitter_token, "POST", form_path, "pool=default", "Sec-Fetch-Site: same-origin");
			said = st == 403 && h->last_body && strstr(h->last_body, "may not use pool default");
			j = h_job(h, id);
			h_ok(h, said && j && !strcmp(h_str(j, "pool"), "h200"),
			     "the move form to default: a 403 page saying why, the job still in h200 (%ld)", st);
			json_decref(j);
			free(form_path);
		}
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id));
		free(path);
	}
	body = json_pack("{s:[s]}", "pools", "kept");
	json_decref(h_postf(h, body, &st, "/v1/tokens/%lld/pools", wid));
	json_decref(body);
	{
		json_t *reg = json_pack("{s:s, s:s, s:s, s:[{s:s, s:i}]}", "name", "kept-host", "host", "h", "pool", "default",
					"gpus", "uuid", "GPU-kept-0", "memory_total_mib", 24576);
		r = as(h, h->worker_token, "POST", "/v1/workers", reg, &st);
		h_ok(h, st == 403 && !strcmp(h_str(r, "field"), "pool") && strstr(h_str(r, "message"), "kept"),
		     "a worker token kept to pool kept may not join default: 403 naming pool (%ld)", st);
		json_decref(r);
		json_object_set_new(reg, "pool", json_string("kept"));
		r = as(h, h->worker_token, "POST", "/v1/workers", reg, &st);
		h_ok(h, st == 201, "it may join kept (%ld)", st);
		json_decref(r);
		json_decref(reg);
	}
	{
		static const char *const bad[] = { "{\"pools\": []}", "{\"pools\": [\"H200\"]}", "{\"pools\": \"h200\"}",
						   "{\"pools\": [1]}", "{}" };
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			char *path = xasprintf("/v1/tokens/%lld/pools", sid);
			json_decref(h_request(h, "POST", path, bad[i], strlen(bad[i]), NULL, &st));
			f = field_of(h);
			h_ok(h, st == 400 && !strcmp(f, "pools"), "pools %s: 400 naming pools", bad[i]);
			free(f);
			free(path);
		}
	}
	r = as(h, h->submitter_token, "POST", "/v1/tokens/1/pools", NULL, &st);
	h_ok(h, st == 403, "a submitter may not set a token's pools (%ld)", st);
	json_decref(r);
	body = json_pack("{s:n}", "pools");
	r = h_postf(h, body, &st, "/v1/tokens/%lld/pools", sid);
	h_ok(h, st == 200 && json_is_null(json_object_get(r, "pools")), "null lifts it");
	json_decref(r);
	json_decref(h_postf(h, body, &st, "/v1/tokens/%lld/pools", wid));
	json_decref(body);
	body = json_pack("{s:O}", "config", cfg);
	r = as(h, h->submitter_token, "POST", "/v1/jobs", body, &st);
	h_ok(h, st == 201, "and its submit to default is taken again (%ld)", st);
	if (st == 201) {
		char *jid = h_id(r, "id");
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", jid));
		free(jid);
	}
	json_decref(r);
	json_decref(body);
	free(id);
}

/* Registers fake worker NAME (one GPU of 80 GiB) into POOL with the borrow member BORROW (JSON text;
 * NULL: none sent), as TOKEN (NULL: the harness's); returns the status, *id (heap) and the answer's
 * borrow list as text into out (size 128). */
static long join_borrow(struct harness *h, const char *token, const char *name, const char *gpu, const char *pool,
			const char *borrow, char **id, char *out)
{
	long st = 0;
	json_t *body = json_pack("{s:s, s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", name, "host", "test-host", "pool", pool,
				 "gpus", "uuid", gpu, "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 81920);
	json_t *r;
	char *list;

	if (borrow)
		json_object_set_new(body, "borrow", json_loads(borrow, JSON_DECODE_ANY, NULL));
	r = token ? as(h, token, "POST", "/v1/workers", body, &st) : h_post(h, "/v1/workers", body, &st);
	*id = (st == 200 || st == 201) ? h_id(r, "id") : NULL;
	list = json_dumps(json_object_get(r, "borrow"), JSON_COMPACT | JSON_ENCODE_ANY);
	snprintf(out, 128, "%s", list ? list : "");
	free(list);
	json_decref(body);
	json_decref(r);
	return st;
}

/* Borrowing (migration 028) over HTTP: a bad borrow list is a 400 naming borrow; a worker of pool
 * borrower that borrows from pool lend takes lend's job when its own pool has none, its own pool's
 * first when both are queued (lend's submitted first); the placement counts it as borrowing; a
 * re-registration without the member stops it; a worker token kept to some pools borrows only from
 * them (403 naming borrow). */
/* A database whose rung_worker_join answers no "borrow" (an old replica's start-up migrate put its
 * release's function files back, README "Upgrades"): the registration still answers 201 with borrow
 * [] (under AddressSanitizer: without leaking the empty list it answers). */
static void test_join_without_borrow(struct harness *h)
{
	char *id = NULL, list[128];
	long st;

	h_sql_int(h, "ALTER FUNCTION rung_worker_join(jsonb, bigint, boolean) RENAME TO rung_worker_join_now", 0, NULL);
	h_sql_int(h, "CREATE FUNCTION rung_worker_join(p jsonb, p_token bigint, p_admin boolean) RETURNS jsonb "
		     "LANGUAGE sql AS $$ SELECT rung_worker_join_now(p - 'borrow', p_token, p_admin) - 'borrow' $$", 0, NULL);
	st = join_borrow(h, NULL, "old-fn", "GPU-old-fn", "default", "[\"lend\"]", &id, list);
	h_ok(h, st == 201 && !strcmp(list, "[]"), "a database answering no borrow (the release before's functions): 201, "
	     "borrow [] (got %ld, %s)", st, list);
	h_sql_int(h, "DROP FUNCTION rung_worker_join(jsonb, bigint, boolean)", 0, NULL);
	h_sql_int(h, "ALTER FUNCTION rung_worker_join_now(jsonb, bigint, boolean) RENAME TO rung_worker_join", 0, NULL);
	free(id);
}

static void test_borrow(struct harness *h, const json_t *cfg)
{
	const char *pw[1] = { "it-worker" };
	long long wtok = h_sql_int(h, "SELECT id FROM tokens WHERE name = $1", 1, pw);
	char *bw = NULL, *bad = NULL, *f, *got, list[128];
	json_t *extra, *job, *p, *body, *r;
	long st = 0;
	size_t i;
	static const char *const bads[] = { "\"lend\"", "[\"Lend\"]", "[\"borrower\"]", "[\"lend\", \"lend\"]", "[1]",
					    "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]" };

	for (i = 0; i < sizeof bads / sizeof bads[0]; i++) {
		long s = join_borrow(h, NULL, "bx", "GPU-borrow-x", "borrower", bads[i], &bad, list);
		f = field_of(h);
		h_ok(h, s == 400 && !strcmp(f, "borrow"), "register with borrow %s: 400 naming borrow (got %ld, %s)", bads[i], s, f);
		free(f);
		free(bad);
		bad = NULL;
	}
	h_ok(h, join_borrow(h, NULL, "bw", "GPU-borrow-w", "borrower", "[\"lend\"]", &bw, list) == 201 &&
		 !strcmp(list, "[\"lend\"]"), "a worker of pool borrower registers, borrowing from lend (%s)", list);
	if (!bw)
		return;
	extra = json_pack("{s:s, s:s}", "pool", "lend", "name", "lent-1");
	job = h_submit(h, cfg, extra);
	json_decref(extra);
	if (job) {
		char *id = h_id(job, "id");
		json_t *j = h_job(h, id);
		p = json_object_get(j, "placement");
		h_ok(h, p && h_int(p, "gpus") == 0 && h_int(p, "borrowing_gpus") == 1 && h_int(p, "fleet_max_gpu_mib") == 81920,
		     "a job of lend: no GPU of its own pool, one borrowing, whose memory is the pool's largest");
		json_decref(j);
		free(id);
	}
	json_decref(job);
	{
		/* GET /v1/pools and rungctl pools: lend's queued job and the GPU lent to it, borrower's worker */
		json_t *pools = h_get(h, "/v1/pools", &st), *pl, *lend = NULL, *own = NULL;
		char *out, *bb, *bo;
		int rc = -1;
		json_array_foreach(json_object_get(pools, "pools"), i, pl) {
			if (!strcmp(h_str(pl, "pool"), "lend"))
				lend = pl;
			else if (!strcmp(h_str(pl, "pool"), "borrower"))
				own = pl;
		}
		bb = lend ? json_dumps(json_object_get(lend, "borrowed_by"), JSON_COMPACT) : NULL;
		bo = own ? json_dumps(json_object_get(own, "borrows"), JSON_COMPACT) : NULL;
		h_ok(h, st == 200 && lend && h_int(lend, "queued") == 1 && h_int(lend, "workers") == 0 && h_int(lend, "gpus") == 0 &&
			     h_int(lend, "borrowing_gpus") == 1 && bb && !strcmp(bb, "[\"borrower\"]") &&
			     h_int(lend, "max_gpu_mib") == 81920,
		     "GET /v1/pools: lend has its queued job, no worker of its own, one GPU lent by pool borrower (%s)", bb ? bb : "-");
		h_ok(h, own && h_int(own, "workers") == 1 && h_int(own, "gpus") == 1 && h_int(own, "queued") == 0 && bo &&
			     !strcmp(bo, "[\"lend\"]"),
		     "GET /v1/pools: borrower has its worker and GPU, and borrows from lend (%s)", bo ? bo : "-");
		free(bb);
		free(bo);
		json_decref(pools);
		out = h_rungctl(h, "pools", &rc);
		h_ok(h, rc == 0 && out && strstr(out, "BORROWED BY") && strstr(out, "lend ") && strstr(out, "borrower"),
		     "rungctl pools lists them (%d)", rc);
		if (h->failed)
			h_diag("pools: %s", out ? out : "-");
		free(out);
		json_decref(as(h, h->submitter_token, "GET", "/v1/pools", NULL, &st));
		h_ok(h, st == 403, "a submitter may not list the pools (%ld)", st);
		st = h_browse(h, h->admin_token, "GET", "/ui/gpus", NULL, NULL);
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "<h2>Pools</h2>") &&
			     strstr(h->last_body, "<a href=\"/ui/jobs?pool=lend\">lend</a></td><td>1</td>") &&
			     strstr(h->last_body, "<td>borrower</td>"),
		     "the GPUs page's pools table: lend with its queued job and the pool that lends it a GPU (%ld)", st);
	}
	body = json_pack("{s:O, s:s}", "config", cfg, "pool", "lend");
	r = h_post(h, "/v1/plan", body, &st);
	p = json_array_get(json_object_get(r, "sizes"), 0);
	h_ok(h, st == 200 && h_int(r, "fleet_max_gpu_mib") == 81920 && h_int(p, "gpu_mib") == 81920 && h_int(p, "gpus") == 1,
	     "the plan for lend counts the borrower's GPU (%ld)", st);
	json_decref(r);
	json_decref(body);
	got = lease_name_done(h, bw, "GPU-borrow-w", true);
	h_ok(h, !strcmp(got, "lent-1"), "the borrower's GPU takes lend's job, its own pool having none (%s)", got);
	free(got);
	extra = json_pack("{s:s, s:s}", "pool", "lend", "name", "lent-2");
	json_decref(h_submit(h, cfg, extra));
	json_decref(extra);
	extra = json_pack("{s:s, s:s}", "pool", "borrower", "name", "own-1");
	json_decref(h_submit(h, cfg, extra));
	json_decref(extra);
	got = lease_name_done(h, bw, "GPU-borrow-w", true);
	h_ok(h, !strcmp(got, "own-1"), "both queued: its own pool's job first, though lend's came first (%s)", got);
	free(got);
	free(bw);
	h_ok(h, join_borrow(h, NULL, "bw", "GPU-borrow-w", "borrower", NULL, &bw, list) == 200 && !strcmp(list, "[]"),
	     "registered again without borrow: it borrows from none (%s)", list);
	got = bw ? lease_name(h, bw, "GPU-borrow-w") : xstrdup("?");
	h_ok(h, !strcmp(got, ""), "and takes lend's job no more (%s)", got);
	free(got);
	/* a worker token kept to pools kept and lend borrows only from them */
	body = json_pack("{s:[s, s]}", "pools", "kept", "lend");
	json_decref(h_postf(h, body, &st, "/v1/tokens/%lld/pools", wtok));
	json_decref(body);
	st = join_borrow(h, h->worker_token, "kept-borrower", "GPU-borrow-k", "kept", "[\"default\"]", &bad, list);
	r = h->last_body ? json_loads(h->last_body, 0, NULL) : NULL;
	h_ok(h, st == 403 && !strcmp(h_str(r, "field"), "borrow") && strstr(h_str(r, "message"), "kept, lend"),
	     "a worker token kept to kept and lend may not borrow from default: 403 naming borrow, its pools (%ld)", st);
	json_decref(r);
	free(bad);
	bad = NULL;
	h_ok(h, join_borrow(h, h->worker_token, "kept-borrower", "GPU-borrow-k", "kept", "[\"lend\"]", &bad, list) == 201,
	     "from lend it may");
	free(bad);
	body = json_pack("{s:n}", "pools");
	json_decref(h_postf(h, body, &st, "/v1/tokens/%lld/pools", wtok));
	json_decref(body);
	free(bw);
}

int main(void)
{
	struct harness *h = h_new("it_pool_protocol");
	char *w_def = NULL, *w_big = NULL, *bad = NULL, *f, *id_a = NULL, *id_d = NULL, *id_n = NULL, *got;
	json_t *cfg = h_config("pool-a", 10), *extra, *job, *list, *ws, *p;
	long st = 0;
	size_t i;
	int listed = 0, others = 0;

	/* the fallback poll at two minutes: a lease within seconds was woken, not polled */
	static const char *const server_args[] = { "--poll-fallback-ms", "120000", NULL };

	if (!h_ok(h, h_server_start(h, server_args) == 0, "rungd starts"))
		goto out;
	h_ok(h, join(h, "fd", "GPU-pool-d", 24576, NULL, &w_def) == 201, "a worker that names no pool registers");
	h_ok(h, join(h, "fb", "GPU-pool-b", 143771, "h200", &w_big) == 201, "a worker registers into pool h200");
	{
		static const char *const bads[] = { "H200", "", "-x", "a b", "a/b" };
		for (i = 0; i < sizeof bads / sizeof bads[0]; i++) {
			long s = join(h, "fx", "GPU-pool-x", 24576, bads[i], &bad);
			f = field_of(h);
			h_ok(h, s == 400 && !strcmp(f, "pool"), "register with pool \"%s\": 400 naming pool (got %ld, %s)", bads[i],
			     s, f);
			free(f);
			free(bad);
			bad = NULL;
		}
	}
	ws = h_get(h, "/v1/workers", &st);
	{
		json_t *w;
		char *pools = xstrdup("");
		json_array_foreach(json_object_get(ws, "workers"), i, w) {
			char *next = xasprintf("%s%s=%s,", pools, h_str(w, "name"), h_str(w, "pool"));
			free(pools);
			pools = next;
		}
		h_ok(h, !strcmp(pools, "fd=default,fb=h200,"), "GET /v1/workers names each worker's pool (%s)", pools);
		free(pools);
	}
	json_decref(ws);

	/* the h200 job first in claim order, then a default one, then one for a pool with no host */
	extra = json_pack("{s:s, s:s}", "pool", "h200", "name", "big-one");
	job = h_submit(h, cfg, extra);
	id_a = job ? h_id(job, "id") : NULL;
	h_ok(h, job && !strcmp(h_str(job, "pool"), "h200") && !json_object_get(job, "warnings"),
	     "a job submitted to pool h200 says so, with no warning (a worker serves h200)");
	json_decref(job);
	json_decref(extra);
	extra = json_pack("{s:s}", "name", "small-one");
	job = h_submit(h, cfg, extra);
	id_d = job ? h_id(job, "id") : NULL;
	h_ok(h, job && !strcmp(h_str(job, "pool"), "default"), "a job that names no pool is in default");
	json_decref(job);
	json_decref(extra);
	extra = json_pack("{s:s, s:s}", "pool", "nohost", "name", "lonely");
	job = h_submit(h, cfg, extra);
	id_n = job ? h_id(job, "id") : NULL;
	{
		json_t *w = json_array_get(json_object_get(job, "warnings"), 0);
		h_ok(h, id_n && w && !strcmp(h_str(w, "field"), "pool") && strstr(h_str(w, "message"), "pool nohost"),
		     "a submit into a pool no worker takes from: stored, its reply warns naming pool (%s)", h_str(w, "message"));
	}
	json_decref(job);
	json_decref(extra);
	{
		static const char *const bads[] = { "H200", "", "a,b" };
		for (i = 0; i < sizeof bads / sizeof bads[0]; i++) {
			json_t *body = json_pack("{s:O, s:s}", "config", cfg, "pool", bads[i]);
			json_decref(h_post(h, "/v1/jobs", body, &st));
			f = field_of(h);
			h_ok(h, st == 400 && !strcmp(f, "pool"), "submit with pool \"%s\": 400 naming pool", bads[i]);
			free(f);
			json_decref(body);
		}
		json_t *body = json_pack("{s:O, s:i}", "config", cfg, "pool", 7);
		json_decref(h_post(h, "/v1/jobs", body, &st));
		f = field_of(h);
		h_ok(h, st == 400 && !strcmp(f, "pool"), "submit with a pool that is not a string: 400 naming pool");
		free(f);
		json_decref(body);
	}
	{
		/* a raw file takes the pool as a query option */
		char *text = json_dumps(cfg, JSON_COMPACT);
		job = h_post_raw(h, "/v1/jobs?pool=h200&name=raw-one", text, strlen(text), &st);
		h_ok(h, st == 201 && !strcmp(h_str(job, "pool"), "h200"), "a raw file with ?pool=h200 is in h200 (%ld)", st);
		if (job) {
			char *rid = h_id(job, "id");
			json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", rid));
			free(rid);
		}
		json_decref(job);
		json_decref(h_post_raw(h, "/v1/jobs?pool=Big", text, strlen(text), &st));
		f = field_of(h);
		h_ok(h, st == 400 && !strcmp(f, "pool"), "a raw file with ?pool=Big: 400 naming pool");
		free(f);
		free(text);
	}

	list = h_get(h, "/v1/jobs?pool=h200&state=queued", &st);
	json_array_foreach(json_object_get(list, "jobs"), i, job) {
		listed++;
		others += strcmp(h_str(job, "pool"), "h200") != 0;
	}
	h_ok(h, st == 200 && listed == 1 && others == 0, "GET /v1/jobs?pool=h200 lists the one queued h200 job (%d, %d other)",
	     listed, others);
	json_decref(list);
	json_decref(h_get(h, "/v1/jobs?pool=H200", &st));
	f = field_of(h);
	h_ok(h, st == 400 && !strcmp(f, "pool"), "GET /v1/jobs?pool=H200: 400 naming pool");
	free(f);

	job = id_n ? h_job(h, id_n) : NULL;
	p = json_object_get(job, "placement");
	h_ok(h, p && !strcmp(h_str(p, "pool"), "nohost") && h_int(p, "gpus") == 0 && h_int(p, "other_pools_gpus") == 2,
	     "a job of a pool with no host: placement 0 GPUs of its pool, 2 in others");
	json_decref(job);
	job = id_a ? h_job(h, id_a) : NULL;
	p = json_object_get(job, "placement");
	h_ok(h, p && h_int(p, "gpus") == 1 && h_int(p, "other_pools_gpus") == 1 && h_int(p, "fleet_max_gpu_mib") == 143771,
	     "the h200 job: its pool's one GPU, one elsewhere, its pool's largest GPU");
	json_decref(job);

	got = w_def ? lease_name(h, w_def, "GPU-pool-d") : xstrdup("?");
	h_ok(h, !strcmp(got, "small-one"), "the default GPU leases the default job, not the h200 one queued before it (%s)", got);
	free(got);
	got = w_def ? lease_name(h, w_def, "GPU-pool-d") : xstrdup("?");
	h_ok(h, !strcmp(got, ""), "and then nothing, with the h200 and nohost jobs queued (%s)", got);
	free(got);
	got = w_big ? lease_name_done(h, w_big, "GPU-pool-b", true) : xstrdup("?");
	h_ok(h, !strcmp(got, "big-one"), "the h200 GPU leases the h200 job (%s), which succeeds", got);
	free(got);
	got = w_big ? lease_name(h, w_big, "GPU-pool-b") : xstrdup("?");
	h_ok(h, !strcmp(got, ""), "and not the nohost job (%s)", got);
	free(got);
	job = id_n ? h_job(h, id_n) : NULL;
	h_ok(h, job && !strcmp(h_str(job, "state"), "queued"), "the nohost job waits, queued");
	json_decref(job);

	/* moving a job: the nohost job to h200, where the free GPU takes it */
	if (id_n) {
		char *to = NULL;
		int n_ev = 0;
		json_t *ev, *e;
		h_ok(h, move(h, id_n, "h200", &to) == 200 && !strcmp(to, "h200"), "POST /v1/jobs/ID/pool moves the nohost job to h200");
		free(to);
		ev = h_getf(h, &st, "/v1/jobs/%s/events", id_n);
		json_array_foreach(json_object_get(ev, "events"), i, e)
			n_ev += !strcmp(h_str(e, "kind"), "pool_changed") && !strcmp(jpath_str(e, "data.from", ""), "nohost") &&
				!strcmp(jpath_str(e, "data.to", ""), "h200");
		json_decref(ev);
		h_ok(h, n_ev == 1, "one pool_changed event, nohost -> h200");
		h_ok(h, move(h, id_n, "h200", NULL) == 200, "the same pool again is ok");
		ev = h_getf(h, &st, "/v1/jobs/%s/events", id_n);
		n_ev = 0;
		json_array_foreach(json_object_get(ev, "events"), i, e)
			n_ev += !strcmp(h_str(e, "kind"), "pool_changed");
		json_decref(ev);
		h_ok(h, n_ev == 1, "and writes no second event");
		h_ok(h, move(h, id_n, "Nope", NULL) == 400, "a bad pool name: 400");
		f = field_of(h);
		h_ok(h, !strcmp(f, "pool"), "naming pool (%s)", f);
		free(f);
		got = w_big ? lease_name(h, w_big, "GPU-pool-b") : xstrdup("?");
		h_ok(h, !strcmp(got, "lonely"), "the h200 GPU now leases the moved job (%s)", got);
		free(got);
	}
	h_ok(h, move(h, "999999", "h200", NULL) == 404, "moving no such job: 404");
	{
		/* cancel by pool: a pool alone narrows the cancel; a bad name is refused */
		json_t *body = json_pack("{s:s, s:s, s:b}", "pool", "h200", "state", "active", "dry_run", 1), *r, *v;
		int n = 0, all_h200 = 1;
		r = h_post(h, "/v1/jobs/cancel", body, &st);
		json_array_foreach(json_object_get(r, "ids"), i, v) {
			char idt[32];
			json_t *j;
			snprintf(idt, sizeof idt, "%lld", (long long)json_integer_value(v));
			j = h_job(h, idt);
			all_h200 &= j && !strcmp(h_str(j, "pool"), "h200");
			json_decref(j);
			n++;
		}
		h_ok(h, st == 200 && n == 1 && all_h200, "POST /v1/jobs/cancel {pool, dry_run}: the one active h200 job (%d)", n);
		json_decref(r);
		json_decref(body);
		body = json_pack("{s:s}", "pool", "No Pool");
		json_decref(h_post(h, "/v1/jobs/cancel", body, &st));
		f = field_of(h);
		h_ok(h, st == 400 && !strcmp(f, "pool"), "a bad pool: 400 naming pool");
		free(f);
		json_decref(body);
	}
	h_ok(h, id_a && move(h, id_a, "default", NULL) == 409, "moving a succeeded job: 409");

	{
		/* the plan weighs the pool the job would be submitted to */
		json_t *body = json_pack("{s:O, s:s}", "config", cfg, "pool", "h200"), *pl;
		pl = h_post(h, "/v1/plan", body, &st);
		h_ok(h, st == 200 && h_int(pl, "fleet_max_gpu_mib") == 143771 && json_array_size(json_object_get(pl, "sizes")) == 1 &&
			     h_int(json_array_get(json_object_get(pl, "sizes"), 0), "gpu_mib") == 143771,
		     "POST /v1/plan {pool: h200}: that pool's one size and largest GPU (%ld)", st);
		json_decref(pl);
		json_decref(body);
		body = json_pack("{s:O}", "config", cfg);
		pl = h_post(h, "/v1/plan", body, &st);
		h_ok(h, st == 200 && h_int(pl, "fleet_max_gpu_mib") == 24576, "without a pool: the default pool's (%lld)",
		     h_int(pl, "fleet_max_gpu_mib"));
		json_decref(pl);
		json_decref(body);
	}
	/* a worker restarted without a pool goes back to the default pool: an h200 job queued, its GPU
	 * takes it no more */
	extra = json_pack("{s:s, s:s}", "pool", "h200", "name", "after-restart");
	job = h_submit(h, cfg, extra);
	h_ok(h, job && !strcmp(h_str(job, "state"), "queued"), "an h200 job is queued");
	json_decref(job);
	json_decref(extra);
	free(w_big);
	h_ok(h, join(h, "fb", "GPU-pool-b", 143771, NULL, &w_big) == 200,
	     "the h200 worker registers again, naming no pool");
	got = w_big ? lease_name(h, w_big, "GPU-pool-b") : xstrdup("?");
	h_ok(h, !strcmp(got, ""), "its GPU, in default now, takes no h200 job (%s)", got);
	free(got);
	test_token_pools(h, cfg);
	test_wake_every_pool(h, cfg);
	test_borrow(h, cfg);
	test_join_without_borrow(h);
out:
	free(w_def);
	free(w_big);
	free(id_a);
	free(id_d);
	free(id_n);
	json_decref(cfg);
	return h_free(h);
}
