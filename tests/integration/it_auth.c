/* Integration: who may do what. Real rungd and Postgres, fake workers over HTTP. Missing, bad and
 * revoked tokens get 401, expired ones 401 token_expired (the API, the web login and pages, a
 * rung-worker that says so once), wrong roles 403, someone else's job or attempt 404 (never the data);
 * the token API shows a secret once and stores only its hash, and so does the admins' /ui/tokens
 * page, whose forms are the API's; and the abuse limits answer with the right status naming the
 * limit: submit rate 429, parked long-polls 429, finish caps 413/400, page size 400, JSON depth 400. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "util.h"

#define SUBMIT_RATE "5" /* per second per token; burst 10 */

/* Runs one request as `token` (NULL: none) and restores the harness's default token. */
static json_t *as(struct harness *h, const char *token, const char *method, const char *path, const json_t *body,
	long *st)
{
	const char *saved = h->auth_token;
	char *s = body ? json_dumps(body, JSON_COMPACT) : NULL;
	h->auth_token = token;
	json_t *j = h_request(h, method, path, s, s ? strlen(s) : 0, NULL, st);
	h->auth_token = saved;
	free(s);
	return j;
}

/* Checks the status and the JSON error shape; consumes j. */
static bool want_error(struct harness *h, json_t *j, long st, long want, const char *error, const char *name)
{
	bool ok = st == want && json_is_string(json_object_get(j, "error")) &&
		json_is_string(json_object_get(j, "message")) && json_object_get(j, "field") &&
		(!error || !strcmp(h_str(j, "error"), error));
	if (!h_ok(h, ok, "%s: %ld %s", name, want, error ? error : ""))
		h_diag("got %ld: %.400s", st, h->last_body ? h->last_body : "");
	json_decref(j);
	return ok;
}

/* POST /v1/tokens as admin; returns the secret (heap) and the id (heap) or NULL. */
static char *api_token(struct harness *h, const char *role, const char *name, char **id)
{
	long st = 0;
	json_t *b = json_pack("{s:s, s:s}", "role", role, "name", name);
	json_t *j = as(h, h->admin_token, "POST", "/v1/tokens", b, &st);
	char *tok = st == 201 && json_is_string(json_object_get(j, "token")) ? xstrdup(h_str(j, "token")) : NULL;
	if (id)
		*id = h_id(j, "id");
	if (!tok)
		h_diag("POST /v1/tokens %s: %ld %.300s", name, st, h->last_body ? h->last_body : "");
	json_decref(b);
	json_decref(j);
	return tok;
}

static char *submit_as(struct harness *h, const char *token, const char *name, const char *idem, long *st)
{
	json_t *b = json_pack("{s:o}", "config", h_config(name, 10));
	char *s = json_dumps(b, JSON_COMPACT);
	char *key = idem ? xasprintf("Idempotency-Key: %s", idem) : NULL;
	const char *hdrs[] = { key, NULL };
	const char *saved = h->auth_token;
	h->auth_token = token;
	json_t *j = h_request(h, "POST", "/v1/jobs", s, strlen(s), key ? hdrs : NULL, st);
	h->auth_token = saved;
	char *id = *st == 201 || *st == 200 ? h_id(j, "id") : NULL;
	json_decref(j);
	json_decref(b);
	free(s);
	free(key);
	return id;
}

static void test_unauthenticated(struct harness *h)
{
	long st = 0;
	json_t *j = as(h, NULL, "GET", "/v1/jobs", NULL, &st);
	want_error(h, j, st, 401, "unauthorized", "no token");
	j = as(h, "rung_nothex", "GET", "/v1/jobs", NULL, &st);
	want_error(h, j, st, 401, "unauthorized", "malformed token");
	j = as(h, "rung_0000000000000000000000000000000000000000000000000000000000000000", "GET", "/v1/jobs", NULL, &st);
	want_error(h, j, st, 401, "unauthorized", "well-formed but unknown token");
	{
		const char *hdrs[] = { "Authorization: Basic dXNlcjpwYXNz", NULL };
		const char *saved = h->auth_token;
		h->auth_token = NULL;
		j = h_request(h, "GET", "/v1/gpus", NULL, 0, hdrs, &st);
		h->auth_token = saved;
		want_error(h, j, st, 401, "unauthorized", "Basic credentials");
	}
	j = as(h, NULL, "POST", "/v1/workers/1/lease", NULL, &st);
	want_error(h, j, st, 401, "unauthorized", "worker route without a token");
	j = as(h, NULL, "GET", "/healthz", NULL, &st);
	h_ok(h, st == 200, "healthz stays open without a token");
	json_decref(j);
}

static void test_roles(struct harness *h, const char *support)
{
	long st = 0;
	json_t *j = as(h, h->submitter_token, "GET", "/v1/workers", NULL, &st);
	want_error(h, j, st, 403, "forbidden", "submitter lists workers");
	j = as(h, h->worker_token, "POST", "/v1/jobs", NULL, &st);
	want_error(h, j, st, 403, "forbidden", "worker submits");
	j = as(h, h->worker_token, "GET", "/v1/jobs", NULL, &st);
	want_error(h, j, st, 403, "forbidden", "worker lists jobs");
	j = as(h, support, "POST", "/v1/jobs", NULL, &st);
	want_error(h, j, st, 403, "forbidden", "support submits");
	j = as(h, support, "GET", "/v1/tokens", NULL, &st);
	want_error(h, j, st, 403, "forbidden", "support lists tokens");
	j = as(h, h->submitter_token, "POST", "/v1/tokens", NULL, &st);
	want_error(h, j, st, 403, "forbidden", "submitter creates a token");
	j = as(h, h->submitter_token, "POST", "/v1/gpus/GPU-x/release", NULL, &st);
	want_error(h, j, st, 403, "forbidden", "submitter releases a GPU");
	j = as(h, support, "GET", "/v1/gpus", NULL, &st);
	h_ok(h, st == 200, "support reads GPUs");
	json_decref(j);
	j = as(h, support, "GET", "/v1/escalations", NULL, &st);
	h_ok(h, st == 200, "support reads escalations");
	json_decref(j);
}

static void test_token_api(struct harness *h)
{
	long st = 0;
	char *id = NULL;
	char *tok = api_token(h, "submitter", "api-made", &id);

	h_ok(h, tok && strncmp(tok, "rung_", 5) == 0 && strlen(tok) == 69, "POST /v1/tokens shows the token once");
	if (tok) {
		const char *p[] = { tok };
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM tokens WHERE hash = encode(sha256(convert_to($1, 'UTF8')), 'hex')",
				 1, p) == 1, "the database holds the token's SHA-256");
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM tokens t WHERE position($1 in t::text) > 0", 1, p) == 0,
		     "the database never holds the token itself");
		json_t *j = as(h, tok, "GET", "/v1/jobs", NULL, &st);
		h_ok(h, st == 200, "the new token works at once");
		json_decref(j);
	}
	json_t *j = as(h, h->admin_token, "GET", "/v1/tokens", NULL, &st);
	json_t *list = json_object_get(j, "tokens"), *t;
	size_t i;
	bool found = false, secret = false;
	json_array_foreach(list, i, t) {
		found |= !strcmp(h_str(t, "name"), "api-made") && !strcmp(h_str(t, "role"), "submitter");
		secret |= json_object_get(t, "token") != NULL || json_object_get(t, "hash") != NULL;
	}
	h_ok(h, st == 200 && found, "GET /v1/tokens lists the token");
	h_ok(h, !secret, "GET /v1/tokens shows neither secrets nor hashes");
	json_decref(j);

	json_t *b = json_pack("{s:s, s:s}", "role", "submitter", "name", "api-made");
	j = as(h, h->admin_token, "POST", "/v1/tokens", b, &st);
	want_error(h, j, st, 409, "name_taken", "a taken name");
	json_decref(b);
	b = json_pack("{s:s}", "role", "root");
	j = as(h, h->admin_token, "POST", "/v1/tokens", b, &st);
	want_error(h, j, st, 400, "invalid_request", "an unknown role");
	json_decref(b);
	b = json_pack("{s:s, s:s}", "role", "submitter", "name", "17");
	j = as(h, h->admin_token, "POST", "/v1/tokens", b, &st);
	h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "name"),
	     "POST /v1/tokens: an all-digit name is refused, naming name (revoke takes an id or a name)");
	json_decref(j);
	json_decref(b);

	/* Revoked through the API: refused on the next request (this replica forgets it at once). A
	 * token named with the same digits (made before such names were refused) is not touched: digits
	 * are an id. */
	char *path = xasprintf("/v1/tokens/%s/revoke", id ? id : "0");
	{
		const char *p[1] = { id ? id : "0" };
		PQclear(h_sql(h, "INSERT INTO tokens (name, role, hash) VALUES ($1, 'submitter', repeat('7', 64))", 1, p));
	}
	j = as(h, h->admin_token, "POST", path, NULL, &st);
	h_ok(h, st == 200 && json_is_true(json_object_get(j, "revoked")) && !strcmp(h_str(j, "name"), "api-made"),
	     "POST /v1/tokens/ID/revoke revokes the token with that id");
	{
		const char *p[1] = { id ? id : "0" };
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM tokens WHERE name = $1 AND revoked_at IS NULL", 1, p) == 1,
		     "and not a legacy token named with its digits");
	}
	json_decref(j);
	j = as(h, tok, "GET", "/v1/jobs", NULL, &st);
	want_error(h, j, st, 401, "unauthorized", "a token revoked through the API");
	free(path);
	free(tok);
	free(id);
}

struct revoke_poll {
	struct harness *h;
	const char *token;
};

static bool refused(void *arg)
{
	struct revoke_poll *r = arg;
	long st = 0;
	json_t *j = as(r->h, r->token, "GET", "/v1/jobs", NULL, &st);
	json_decref(j);
	return st == 401;
}

static void test_cli_revoke(struct harness *h)
{
	long st = 0;
	char *tok = h_token_create(h, "submitter", "carol");
	json_t *j = as(h, tok, "GET", "/v1/jobs", NULL, &st);
	h_ok(h, tok && st == 200, "a token made by `rungd token create` works");
	json_decref(j);
	char *bin = xasprintf("%s/bin/rungd", h->root);
	const char *argv[] = { bin, "token", "revoke", "carol", "--database-url", h->db_url, NULL };
	h_ok(h, h_run(h, argv) == 0, "rungd token revoke carol");
	struct revoke_poll r = { h, tok };
	h_ok(h, wait_until(refused, &r, 15000), "a revoked token gets 401 within the cache TTL");
	const char *again[] = { bin, "token", "revoke", "nobody-such", "--database-url", h->db_url, NULL };
	h_ok(h, h_run(h, again) == 1, "revoking an unknown token exits 1");
	free(bin);
	free(tok);
}

static void test_job_ownership(struct harness *h, const char *support)
{
	long st = 0;
	char *alice = api_token(h, "submitter", "alice", NULL), *bob = api_token(h, "submitter", "bob", NULL);
	char *job = submit_as(h, alice, "alice-job", "same-key", &st);
	h_ok(h, job && st == 201, "alice submits");
	if (!job || !bob)
		goto out;
	char *path = xasprintf("/v1/jobs/%s", job);
	json_t *j = as(h, alice, "GET", path, NULL, &st);
	h_ok(h, st == 200 && !strcmp(h_str(j, "owner"), "alice"), "alice sees her job, owner alice");
	json_decref(j);
	j = as(h, bob, "GET", path, NULL, &st);
	h_ok(h, st == 404 && !json_object_get(j, "config") && !json_object_get(j, "target_config"),
	     "bob gets 404 for alice's job, no data");
	json_decref(j);
	char *sub = xasprintf("%s/attempts", path);
	j = as(h, bob, "GET", sub, NULL, &st);
	want_error(h, j, st, 404, "not_found", "bob reads alice's attempts");
	free(sub);
	sub = xasprintf("%s/events", path);
	j = as(h, bob, "GET", sub, NULL, &st);
	want_error(h, j, st, 404, "not_found", "bob reads alice's events");
	free(sub);
	sub = xasprintf("%s/cancel", path);
	j = as(h, bob, "POST", sub, NULL, &st);
	want_error(h, j, st, 404, "not_found", "bob cancels alice's job");
	j = as(h, alice, "GET", path, NULL, &st);
	h_ok(h, !strcmp(h_str(j, "state"), "queued") && !json_is_true(json_object_get(j, "cancel_requested")),
	     "alice's job is untouched by bob's cancel");
	json_decref(j);
	j = as(h, bob, "GET", "/v1/jobs", NULL, &st);
	h_ok(h, st == 200 && json_array_size(json_object_get(j, "jobs")) == 0, "bob's list does not show alice's job");
	json_decref(j);
	j = as(h, alice, "GET", "/v1/jobs?limit=10", NULL, &st);
	h_ok(h, st == 200 && json_array_size(json_object_get(j, "jobs")) == 1, "alice's list shows her job only");
	json_decref(j);
	j = as(h, support, "GET", path, NULL, &st);
	h_ok(h, st == 200, "support reads alice's job");
	json_decref(j);
	/* Idempotency keys are per owner: bob's "same-key" is not alice's. */
	char *bjob = submit_as(h, bob, "alice-job", "same-key", &st);
	h_ok(h, bjob && st == 201 && strcmp(bjob, job) != 0, "bob's Idempotency-Key does not reach alice's job");
	free(bjob);
	j = as(h, alice, "POST", sub, NULL, &st);
	h_ok(h, st == 200 && !strcmp(h_str(j, "state"), "cancelled"), "alice cancels her own job");
	json_decref(j);
	free(sub);
	free(path);
out:
	free(job);
	free(alice);
	free(bob);
}

struct park_arg {
	const struct harness *h;
	char *path;
	long status;
	char error[64]; /* the answer's "error" */
};

static void *park(void *arg)
{
	struct park_arg *p = arg;
	json_t *j = h_request_once(p->h, "POST", p->path, "{\"gpu_uuid\": \"GPU-auth-1\", \"wait_ms\": 4000}",
		&p->status, NULL);
	snprintf(p->error, sizeof p->error, "%s", h_str(j, "error"));
	json_decref(j);
	return NULL;
}

struct lease_poll {
	struct harness *h;
	const char *token;
	const char *path;
	long want;
};

static bool lease_status(void *arg)
{
	struct lease_poll *l = arg;
	json_t *b = json_pack("{s:s, s:i}", "gpu_uuid", "GPU-auth-1", "wait_ms", 0);
	long st = 0;
	json_t *j = as(l->h, l->token, "POST", l->path, b, &st);
	json_decref(j);
	json_decref(b);
	return st == l->want;
}

/* Two worker tokens, one fake worker each; returns in w1/w2 the worker ids. */
static void test_workers(struct harness *h, char *w1tok, char *w2tok)
{
	long st = 0;
	const char *saved = h->auth_token;
	h->auth_token = w1tok;
	char *w1 = h_fake_register(h, "fw-one", "GPU-auth-1", 24576);
	h->auth_token = w2tok;
	char *w2 = h_fake_register(h, "fw-two", "GPU-auth-2", 24576);
	h->auth_token = saved;
	h_ok(h, w1 && w2, "two workers register with their own tokens");
	if (!w1 || !w2)
		goto out;
	json_t *b = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", "fw-one", "host", "x", "gpus", "uuid",
			      "GPU-auth-2", "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 24576);
	json_t *j = as(h, w2tok, "POST", "/v1/workers", b, &st);
	want_error(h, j, st, 409, "worker_name_taken", "a worker token re-registers another token's worker");
	json_decref(b);

	/* Parked long-polls: fw-one has 1 GPU, so 2 may park; of three at once, one is 429. */
	char *lease1 = xasprintf("/v1/workers/%s/lease", w1);
	struct harness view = *h; /* read-only view for the threads: h_request_once uses base_url, auth_token */
	view.auth_token = w1tok;
	struct park_arg pa[3] = { { &view, lease1, 0, "" }, { &view, lease1, 0, "" }, { &view, lease1, 0, "" } };
	pthread_t th[3];
	for (int i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, park, &pa[i]);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	int n204 = 0, n429 = 0;
	for (int i = 0; i < 3; i++) {
		n204 += pa[i].status == 204;
		n429 += pa[i].status == 429 && !strcmp(pa[i].error, "too_many_long_polls");
	}
	if (!h_ok(h, n204 == 2 && n429 == 1, "three parked long-polls of a 1-GPU worker: two wait (204), one 429 too_many_long_polls"))
		h_diag("statuses %ld %ld %ld", pa[0].status, pa[1].status, pa[2].status);
	struct lease_poll lp = { h, w1tok, lease1, 429 };
	lp.want = 204;
	h_ok(h, lease_status(&lp), "their slots are released once answered");

	j = as(h, w2tok, "POST", lease1, NULL, &st);
	want_error(h, j, st, 404, "not_found", "a worker token leases for another token's worker");

	/* An attempt leased to fw-one. */
	char *job = submit_as(h, h->admin_token, "worker-owned", NULL, &st);
	h_ok(h, job != NULL, "a job to lease");
	h->auth_token = w1tok;
	json_t *lease = h_fake_lease(h, w1, "GPU-auth-1", 2000, &st);
	h->auth_token = saved;
	h_ok(h, lease && st == 200, "fw-one leases the job");
	if (!lease) {
		free(job);
		free(lease1);
		goto out;
	}
	char *aid = h_id(lease, "attempt_id");
	const char *atok = h_str(lease, "token");
	h->auth_token = w2tok;
	j = h_fake_heartbeat(h, aid, atok, &st);
	want_error(h, j, st, 404, "not_found", "another worker token heartbeats the attempt (even with its token)");
	json_t *facts = h_facts_success(10);
	j = h_fake_finish(h, aid, atok, facts, &st);
	want_error(h, j, st, 404, "not_found", "another worker token finishes the attempt");
	h->auth_token = h->submitter_token;
	j = h_fake_heartbeat(h, aid, atok, &st);
	want_error(h, j, st, 403, "forbidden", "a submitter heartbeats");
	h->auth_token = w1tok;
	j = h_fake_heartbeat(h, aid, atok, &st);
	h_ok(h, st == 200, "fw-one's token heartbeats its attempt");
	json_decref(j);

	/* Finish caps, then the real finish. */
	json_t *big = json_deep_copy(facts), *tail = json_array();
	for (int i = 0; i < 201; i++)
		json_array_append_new(tail, json_string("line"));
	json_object_set_new(big, "log_tail", tail);
	j = h_fake_finish(h, aid, atok, big, &st);
	if (want_error(h, j, st, 413, "too_large", "201 log_tail lines"))
		h_ok(h, strstr(h->last_body, "facts.log_tail") != NULL, "the 413 names facts.log_tail");
	json_decref(big);
	big = json_deep_copy(facts);
	char *line = xmalloc(1002);
	memset(line, 'y', 1001);
	line[1001] = '\0';
	json_object_set_new(big, "log_tail", json_pack("[s]", line));
	j = h_fake_finish(h, aid, atok, big, &st);
	if (want_error(h, j, st, 400, "invalid_request", "a 1001-byte log_tail line"))
		h_ok(h, strstr(h->last_body, "facts.log_tail[0]") != NULL, "the 400 names the line");
	free(line);
	json_decref(big);
	big = json_deep_copy(facts);
	char *huge = xmalloc(600 * 1024 + 1);
	memset(huge, 'z', 600 * 1024);
	huge[600 * 1024] = '\0';
	json_object_set_new(big, "error", json_string(huge));
	j = h_fake_finish(h, aid, atok, big, &st);
	if (want_error(h, j, st, 413, "too_large", "facts over 512 KiB"))
		h_ok(h, strstr(h->last_body, "\"field\":\"facts\"") != NULL, "the 413 names facts");
	free(huge);
	json_decref(big);
	j = h_fake_finish(h, aid, atok, facts, &st);
	h_ok(h, st == 200 && !strcmp(h_str(j, "job_state"), "succeeded"), "fw-one's token finishes its attempt");
	json_decref(j);
	h->auth_token = saved;
	json_decref(facts);
	json_decref(lease);
	free(aid);
	free(job);
	free(lease1);
out:
	free(w1);
	free(w2);
}

static void test_limits(struct harness *h)
{
	long st = 0;
	char *dave = api_token(h, "submitter", "dave", NULL);
	int created = 0, limited = 0;
	bool named = false;

	for (int i = 0; i < 16 && dave; i++) {
		char *id = submit_as(h, dave, "burst", NULL, &st);
		created += st == 201;
		if (st == 429) {
			limited++;
			named |= strstr(h->last_body ? h->last_body : "", "submit_rate") != NULL;
		}
		free(id);
	}
	h_ok(h, created >= 10 && created <= 12 && limited >= 4,
	     "16 quick submits at %s/s (burst 10): about 10 pass, the rest 429", SUBMIT_RATE);
	h_diag("created %d, limited %d", created, limited);
	h_ok(h, named, "the 429 names submit_rate");
	char *other = submit_as(h, h->submitter_token, "other-token", NULL, &st);
	h_ok(h, st == 201, "another token's bucket is its own");
	free(other);
	{
		/* plans count against the same rate: each parses a config and runs the policy per GPU size */
		char *planner = api_token(h, "submitter", "planner", NULL);
		json_t *body = json_pack("{s:o}", "config", h_config("plan-burst", 10));
		int planned = 0, refused = 0;
		for (int i = 0; i < 16 && planner; i++) {
			json_t *a = as(h, planner, "POST", "/v1/plan", body, &st);
			planned += st == 200;
			refused += st == 429 && strstr(h->last_body ? h->last_body : "", "submit_rate") != NULL;
			json_decref(a);
		}
		h_ok(h, planned >= 10 && planned <= 12 && refused >= 4,
		     "16 quick plans at %s/s (burst 10): about 10 answered, the rest 429 naming submit_rate (%d, %d)",
		     SUBMIT_RATE, planned, refused);
		{
			/* the web page draws on the same bucket, and says so as a page */
			char *cookie = planner ? xasprintf("Cookie: rung_token=%s", planner) : NULL;
			const char *hdr[] = { cookie, "Sec-Fetch-Site: same-origin", "Content-Type: application/x-www-form-urlencoded",
					      NULL };
			const char *saved = h->auth_token;
			int pages = 0;
			h->auth_token = NULL;
			for (int i = 0; i < 8 && cookie; i++) {
				json_decref(h_request(h, "POST", "/ui/plan", "config=job%3A%20x", 17, hdr, &st));
				pages += st == 429 && h->last_body && strstr(h->last_body, "<h1>Too many requests</h1>");
			}
			h->auth_token = saved;
			h_ok(h, pages >= 1, "and /ui/plan from the same token: a 429 page (%d of 8)", pages);
			free(cookie);
		}
		json_decref(body);
		free(planner);
	}

	json_t *j = as(h, h->admin_token, "GET", "/v1/jobs?limit=501", NULL, &st);
	if (want_error(h, j, st, 400, "invalid_request", "limit=501"))
		h_ok(h, strstr(h->last_body, "\"field\":\"limit\"") != NULL, "the 400 names limit");
	j = as(h, h->admin_token, "GET", "/v1/jobs?limit=500", NULL, &st);
	h_ok(h, st == 200, "limit=500 is allowed");
	json_decref(j);

	char deep[256];
	size_t n = 0;
	n += (size_t)snprintf(deep, sizeof deep, "{\"config\":");
	for (int i = 0; i < 64; i++)
		deep[n++] = '[';
	for (int i = 0; i < 64; i++)
		deep[n++] = ']';
	deep[n++] = '}';
	deep[n] = '\0';
	h->auth_token = h->admin_token;
	j = h_post_raw(h, "/v1/jobs", deep, n, &st);
	if (want_error(h, j, st, 400, "json_too_deep", "JSON nested 65 deep"))
		h_ok(h, strstr(h->last_body, "64") != NULL, "the 400 names the depth limit");
	n = (size_t)snprintf(deep, sizeof deep, "{\"config\":");
	for (int i = 0; i < 63; i++)
		deep[n++] = '[';
	for (int i = 0; i < 63; i++)
		deep[n++] = ']';
	deep[n++] = '}';
	deep[n] = '\0';
	j = h_post_raw(h, "/v1/jobs", deep, n, &st);
	h_ok(h, st == 400 && strcmp(h_str(j, "error"), "json_too_deep") != 0, "64 deep is parsed (then refused as a config)");
	json_decref(j);

	size_t big = (1u << 20) + 16;
	char *body = xmalloc(big + 32);
	n = (size_t)snprintf(body, 32, "{\"name\": \"");
	memset(body + n, 'x', big);
	strcpy(body + n + big, "\"}");
	j = h_post_raw(h, "/v1/jobs", body, strlen(body), &st);
	want_error(h, j, st, 413, "body_too_large", "a body over 1 MiB");
	free(body);
	free(dave);
}

/* The value of the /metrics sample `key` (name and labels; read as admin), or -1. Consumes key. */
static long metric(struct harness *h, char *key)
{
	long st = 0, v = -1;
	json_t *j = as(h, h->admin_token, "GET", "/metrics", NULL, &st);
	const char *at = st == 200 && h->last_body ? strstr(h->last_body, key) : NULL;

	if (at && at[strlen(key)] == ' ')
		v = strtol(at + strlen(key), NULL, 10);
	json_decref(j);
	free(key);
	return v;
}

/* rung_auth_owner_checks_total{scope="SCOPE",source="SOURCE"}, or -1. */
static long owner_checks(struct harness *h, const char *scope, const char *source)
{
	return metric(h, xasprintf("rung_auth_owner_checks_total{scope=\"%s\",source=\"%s\"}", scope, source));
}

/* The worker scope of owner_checks. */
static long worker_checks(struct harness *h, const char *source)
{
	return owner_checks(h, "worker", source);
}

/* A lease that does not wait, as token for worker wid (GPU gpu): the status. */
static long lease_now(struct harness *h, const char *token, const char *wid, const char *gpu)
{
	long st = 0;
	char *path = xasprintf("/v1/workers/%s/lease", wid);
	json_t *b = json_pack("{s:s, s:i}", "gpu_uuid", gpu, "wait_ms", 0);

	json_decref(as(h, token, "POST", path, b, &st));
	json_decref(b);
	free(path);
	return st;
}

/* Who may act for a worker is read once per token and worker, then trusted as long as the token
 * (the memo): a second long-poll runs no ownership query. A re-registration on this replica is
 * seen at once: the next call reads the GPUs again, and a token that no longer owns the worker is
 * refused. */
static void test_worker_memo(struct harness *h, const char *wtok)
{
	const char *saved = h->auth_token;
	char *w = h_fake_register(h, "memo-w", "GPU-memo-1", 24576);
	long q0, m0, st = 0;
	json_t *b;

	h->auth_token = wtok;
	char *own = h_fake_register(h, "memo-own", "GPU-memo-2", 24576);
	h->auth_token = saved;
	if (!h_ok(h, w && own, "workers for the memo registered (admin, worker token)"))
		goto out;
	q0 = worker_checks(h, "query");
	m0 = worker_checks(h, "memo");
	h_ok(h, q0 >= 0 && m0 >= 0, "/metrics counts worker ownership checks (query %ld, memo %ld)", q0, m0);
	h_ok(h, lease_now(h, h->admin_token, w, "GPU-memo-1") == 204 &&
		     lease_now(h, h->admin_token, w, "GPU-memo-1") == 204, "two long-polls for memo-w: 204 each");
	h_ok(h, worker_checks(h, "query") == q0 + 1 && worker_checks(h, "memo") == m0 + 1,
	     "the first ran the ownership query, the second was answered by the memo");

	b = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}, {s:s, s:i, s:s, s:i}]}", "name", "memo-w", "host", "x",
		      "gpus", "uuid", "GPU-memo-1", "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 24576,
		      "uuid", "GPU-memo-3", "index", 1, "name", "NVIDIA Sim", "memory_total_mib", 24576);
	json_decref(as(h, h->admin_token, "POST", "/v1/workers", b, &st));
	json_decref(b);
	h_ok(h, st == 200, "memo-w registers again with two GPUs (status %ld)", st);
	q0 = worker_checks(h, "query");
	st = lease_now(h, h->admin_token, w, "GPU-memo-3");
	h_ok(h, st == 204 && worker_checks(h, "query") == q0 + 1,
	     "after memo-w registered again (two GPUs), its next long-poll (%ld) reads its owner and GPUs again", st);

	h_ok(h, lease_now(h, wtok, own, "GPU-memo-2") == 204, "the worker token long-polls for its memo-own");
	b = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", "memo-own", "host", "x", "gpus", "uuid",
		      "GPU-memo-2", "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 24576);
	json_decref(as(h, h->admin_token, "POST", "/v1/workers", b, &st));
	json_decref(b);
	h_ok(h, st == 200, "admin registers memo-own again (status %ld)", st);
	st = lease_now(h, wtok, own, "GPU-memo-2");
	h_ok(h, st == 404, "once admin registered memo-own again (and owns it), the worker token is refused at once (%ld)",
	     st);
out:
	free(w);
	free(own);
}

/* The status of METHOD /v1/jobs/ID[/tail] as token. */
static long job_call(struct harness *h, const char *token, const char *method, const char *id, const char *tail)
{
	long st = 0;
	char *path = xasprintf("/v1/jobs/%s%s", id, tail);

	json_decref(as(h, token, method, path, NULL, &st));
	free(path);
	return st;
}

/* A submitter's jobs and a worker's attempts are remembered as its own once read, for as long as
 * the token stays cached: polling one's job or heartbeating one's attempt runs one ownership query,
 * not one per call. The memo is per token: holding one token's answers, it answers nobody else,
 * and a refusal is never remembered. Leaves no job queued (later tests lease). */
static void test_owner_memo(struct harness *h, const char *w1tok, const char *w2tok)
{
	const char *saved = h->auth_token;
	char *erin = api_token(h, "submitter", "erin", NULL), *frank = api_token(h, "submitter", "frank", NULL);
	char *ejob = NULL, *fjob = NULL, *wid = NULL, *job = NULL, *aid = NULL, *other = NULL;
	json_t *lease = NULL, *facts = NULL, *j;
	long q0, m0, st = 0;

	ejob = erin ? submit_as(h, erin, "erin-job", NULL, &st) : NULL;
	fjob = frank ? submit_as(h, frank, "frank-job", NULL, &st) : NULL;
	if (!h_ok(h, ejob && fjob, "erin and frank submit a job each"))
		goto out;
	q0 = owner_checks(h, "job", "query");
	m0 = owner_checks(h, "job", "memo");
	h_ok(h, q0 >= 0 && m0 >= 0, "/metrics counts job ownership checks (query %ld, memo %ld)", q0, m0);
	h_ok(h, job_call(h, erin, "GET", ejob, "") == 200 && job_call(h, erin, "GET", ejob, "") == 200 &&
		     job_call(h, erin, "GET", ejob, "/events") == 200, "erin reads her job twice and its events");
	h_ok(h, owner_checks(h, "job", "query") == q0 + 1 && owner_checks(h, "job", "memo") == m0 + 2,
	     "the first read ran the ownership query, the next two were answered by the memo");
	h_ok(h, job_call(h, frank, "GET", ejob, "") == 404 && job_call(h, erin, "GET", fjob, "") == 404 &&
		     job_call(h, erin, "GET", fjob, "") == 404,
	     "with erin's job in the memo, frank still gets 404 for it, and erin 404 (twice) for frank's");
	h_ok(h, owner_checks(h, "job", "query") == q0 + 4 && owner_checks(h, "job", "memo") == m0 + 2,
	     "each refusal ran its query: a job is remembered only for its owner, and \"not yours\" not at all");
	h_ok(h, job_call(h, frank, "GET", fjob, "") == 200 && job_call(h, frank, "POST", fjob, "/cancel") == 200 &&
		     job_call(h, erin, "POST", ejob, "/cancel") == 200 &&
		     owner_checks(h, "job", "query") == q0 + 5 && owner_checks(h, "job", "memo") == m0 + 4,
	     "frank reads and cancels his job (one query, then the memo), erin cancels hers (the memo)");

	/* An attempt of w1tok's worker: heartbeats and the finish name it on every call. */
	h->auth_token = w1tok;
	wid = h_fake_register(h, "memo-att", "GPU-memo-4", 24576);
	h->auth_token = saved;
	job = submit_as(h, h->admin_token, "attempt-memo", NULL, &st);
	h->auth_token = w1tok;
	lease = wid && job ? h_fake_lease(h, wid, "GPU-memo-4", 2000, &st) : NULL;
	h->auth_token = saved;
	aid = lease ? h_id(lease, "attempt_id") : NULL;
	if (!h_ok(h, aid != NULL, "w1tok's worker leases a job (%ld)", st))
		goto out;
	q0 = owner_checks(h, "attempt", "query");
	m0 = owner_checks(h, "attempt", "memo");
	h->auth_token = w1tok;
	json_decref(h_fake_heartbeat(h, aid, h_str(lease, "token"), &st));
	h_ok(h, st == 200, "w1tok heartbeats its attempt");
	h->auth_token = saved;
	other = h_fake_register(h, "memo-other", "GPU-memo-5", 24576);
	h_ok(h, other != NULL, "another worker registers (its attempts are not w1tok's)");
	h->auth_token = w1tok;
	json_decref(h_fake_heartbeat(h, aid, h_str(lease, "token"), &st));
	h_ok(h, st == 200, "and again");
	h->auth_token = w2tok;
	j = h_fake_heartbeat(h, aid, h_str(lease, "token"), &st);
	want_error(h, j, st, 404, "not_found", "w2tok heartbeats w1tok's remembered attempt");
	h->auth_token = w1tok;
	facts = h_facts_success(10);
	json_decref(h_fake_finish(h, aid, h_str(lease, "token"), facts, &st));
	h_ok(h, st == 200, "w1tok finishes its attempt");
	h->auth_token = saved;
	h_ok(h, owner_checks(h, "attempt", "query") == q0 + 2 && owner_checks(h, "attempt", "memo") == m0 + 2,
	     "the first heartbeat and w2tok's ran the ownership query; the second heartbeat (after another "
	     "worker registered) and the finish were answered by the memo");

	/* Admin takes the worker over by registering it: w1tok no longer owns its attempts, at once. */
	json_decref(lease);
	free(aid);
	free(job);
	job = submit_as(h, h->admin_token, "attempt-takeover", NULL, &st);
	h->auth_token = w1tok;
	lease = job ? h_fake_lease(h, wid, "GPU-memo-4", 2000, &st) : NULL;
	aid = lease ? h_id(lease, "attempt_id") : NULL;
	if (aid)
		json_decref(h_fake_heartbeat(h, aid, h_str(lease, "token"), &st));
	h->auth_token = saved;
	if (!h_ok(h, aid && st == 200, "w1tok's worker leases another job and heartbeats it (%ld)", st))
		goto out;
	j = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", "memo-att", "host", "x", "gpus", "uuid",
		      "GPU-memo-4", "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 24576);
	json_decref(as(h, h->admin_token, "POST", "/v1/workers", j, &st));
	json_decref(j);
	h_ok(h, st == 200, "admin registers memo-att again (status %ld)", st);
	h->auth_token = w1tok;
	j = h_fake_heartbeat(h, aid, h_str(lease, "token"), &st);
	h->auth_token = saved;
	want_error(h, j, st, 404, "not_found", "w1tok heartbeats its remembered attempt after the takeover");
	json_decref(h_fake_finish(h, aid, h_str(lease, "token"), facts, &st));
	h_ok(h, st == 200, "admin finishes it (%ld)", st);
out:
	h->auth_token = saved;
	json_decref(facts);
	json_decref(lease);
	free(aid);
	free(job);
	free(wid);
	free(other);
	free(ejob);
	free(fjob);
	free(erin);
	free(frank);
}

/* ---- the tokens page (server/web_tokens.c) ---- */

#define SAME_SITE "Sec-Fetch-Site: same-origin"

static bool body_has(const struct harness *h, const char *needle)
{
	return h->last_body && strstr(h->last_body, needle);
}

/* The token named name in GET /v1/tokens (new reference), or NULL. */
static json_t *listed(struct harness *h, const char *name)
{
	long st = 0;
	json_t *all = as(h, h->admin_token, "GET", "/v1/tokens", NULL, &st), *t, *found = NULL;
	size_t i;

	json_array_foreach(json_object_get(all, "tokens"), i, t)
		if (!strcmp(h_str(t, "name"), name))
			found = json_incref(t);
	json_decref(all);
	return found;
}

/* max_running of the token named name in GET /v1/tokens: the limit, -1 when none, -2 when not listed. */
static long long listed_limit(struct harness *h, const char *name)
{
	json_t *t = listed(h, name);
	const json_t *v = json_object_get(t, "max_running");
	long long n = !t ? -2 : json_is_integer(v) ? json_integer_value(v) : json_is_null(v) ? -1 : -3;

	json_decref(t);
	return n;
}

struct notify_wait {
	struct harness *h;
	long before; /* rung_lease_notifies_total{event="sent"} before the change */
};

static bool notified(void *arg)
{
	struct notify_wait *w = arg;

	return metric(w->h, xasprintf("rung_lease_notifies_total{event=\"sent\"}")) > w->before;
}

/* An admin at /ui/tokens: the page and the navigation link (admins only), a token created (its
 * secret shown once, on the page, and it works), revoked (401 after), limited and lifted (as GET
 * /v1/tokens reads them; the change wakes the parked GPUs as the API's does), bad forms named,
 * unknown ids 404. Support and submitters get 403 for the page and its forms, a page from another
 * site 403, and neither changes anything. */
static void test_web_tokens(struct harness *h, const char *support)
{
	char *lid = NULL, *ltok = api_token(h, "submitter", "web-limited", &lid), *secret = NULL, *wid = NULL;
	char *limits = xasprintf("/ui/tokens/%s/limits", lid ? lid : "0"), *revoke = NULL, *form = NULL;
	long long tokens = h_sql_int(h, "SELECT count(*) FROM tokens", 0, NULL);
	long st;

	if (!h_ok(h, ltok && lid && tokens > 0, "web tokens: a submitter token to limit"))
		goto out;
	st = h_browse(h, h->admin_token, "GET", "/ui/tokens", NULL, NULL);
	h_ok(h, st == 200 && body_has(h, "<h1>Tokens</h1>") && body_has(h, ">web-limited</td><td>submitter</td>") &&
		     body_has(h, ">sam</td><td>support</td>") && body_has(h, "<td class=\"running\">0</td>") &&
		     body_has(h, "action=\"/ui/tokens\"") && body_has(h, limits) && body_has(h, "<a href=\"/ui/tokens\">Tokens</a>"),
	     "web tokens: an admin's page lists the tokens with their forms and the create form (%ld)", st);
	st = h_browse(h, h->admin_token, "GET", "/ui/jobs", NULL, NULL);
	h_ok(h, st == 200 && body_has(h, "href=\"/ui/tokens\""), "web tokens: Tokens in an admin's navigation");
	st = h_browse(h, support, "GET", "/ui/jobs", NULL, NULL);
	h_ok(h, st == 200 && !body_has(h, "/ui/tokens"), "web tokens: not in support's");
	st = h_browse(h, NULL, "GET", "/ui/tokens", NULL, NULL);
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, "/ui/login?next=%2Fui%2Ftokens"),
	     "web tokens: without a cookie, the login form and back (%ld)", st);

	/* other roles: 403 for the page and each form, nothing changed */
	st = h_browse(h, support, "GET", "/ui/tokens", NULL, NULL);
	h_ok(h, st == 403, "web tokens: support may not see the page (%ld)", st);
	st = h_browse(h, h->submitter_token, "GET", "/ui/tokens", NULL, NULL);
	h_ok(h, st == 403, "web tokens: nor a submitter (%ld)", st);
	st = h_browse(h, support, "POST", "/ui/tokens", "role=admin&name=web-by-support", SAME_SITE);
	h_ok(h, st == 403, "web tokens: support may not create one (%ld)", st);
	st = h_browse(h, h->submitter_token, "POST", limits, "max_running=", SAME_SITE);
	h_ok(h, st == 403, "web tokens: a submitter may not set a limit (%ld)", st);
	revoke = xasprintf("/ui/tokens/%s/revoke", lid);
	st = h_browse(h, support, "POST", revoke, "", SAME_SITE);
	h_ok(h, st == 403, "web tokens: support may not revoke one (%ld)", st);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM tokens", 0, NULL) == tokens && listed_limit(h, "web-by-support") == -2 &&
		     h_sql_int(h, "SELECT count(*) FROM tokens WHERE name = 'web-limited' AND revoked_at IS NULL", 0, NULL) == 1,
	     "web tokens: and none of it changed a token");

	/* create: the secret on the page, once, and it works */
	st = h_browse(h, h->admin_token, "POST", "/ui/tokens", "role=submitter&name=web-made", SAME_SITE);
	{
		const char *at = h->last_body ? strstr(h->last_body, "<code class=\"secret\">") : NULL;
		if (at && strlen(at += strlen("<code class=\"secret\">")) >= 69 && !strncmp(at, "rung_", 5))
			secret = strndup(at, 69);
	}
	h_ok(h, st == 200 && secret && !h->last_location && body_has(h, "shown only this once"),
	     "web tokens: created, the secret on the page with its warning, no redirect (%ld)", st);
	if (secret) {
		json_t *j = as(h, secret, "GET", "/v1/jobs", NULL, &st);
		h_ok(h, st == 200, "web tokens: the secret shown works against the API (%ld)", st);
		json_decref(j);
	}
	{
		json_t *t = listed(h, "web-made");
		h_ok(h, t && !strcmp(h_str(t, "role"), "submitter"), "web tokens: GET /v1/tokens lists it, a submitter");
		wid = h_id(t, "id");
		json_decref(t);
	}
	st = h_browse(h, h->admin_token, "GET", "/ui/tokens", NULL, NULL);
	h_ok(h, st == 200 && secret && !body_has(h, secret), "web tokens: the list never shows the secret again");
	st = h_browse(h, h->admin_token, "POST", "/ui/tokens", "role=submitter&name=web-made", SAME_SITE);
	h_ok(h, st == 409 && body_has(h, "never reused"), "web tokens: a taken name is a 409 page (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", "/ui/tokens", "role=root&name=web-root", SAME_SITE);
	h_ok(h, st == 400 && body_has(h, "<code class=\"field\">role</code>"),
	     "web tokens: an unknown role is a 400 naming role (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", "/ui/tokens", "role=submitter&name=%3Cb%3E", SAME_SITE);
	h_ok(h, st == 400 && body_has(h, "<code class=\"field\">name</code>") && !body_has(h, "<b>"),
	     "web tokens: a bad name is a 400 naming name (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", "/ui/tokens", "role=support&name=web-evil", "Origin: http://evil.example");
	h_ok(h, st == 403 && listed_limit(h, "web-evil") == -2, "web tokens: a create from another site: 403, none made (%ld)", st);

	/* revoke: 303 back, the token refused after, no forms for it */
	free(revoke);
	revoke = xasprintf("/ui/tokens/%s/revoke", wid ? wid : "0");
	st = h_browse(h, h->admin_token, "POST", revoke, "", "Sec-Fetch-Site: cross-site");
	h_ok(h, st == 403 &&
		     h_sql_int(h, "SELECT count(*) FROM tokens WHERE name = 'web-made' AND revoked_at IS NULL", 0, NULL) == 1,
	     "web tokens: a revoke from another site: 403, still live (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", revoke, "", SAME_SITE);
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, "/ui/tokens"),
	     "web tokens: revoked, 303 back (%ld)", st);
	if (secret) {
		json_t *j = as(h, secret, "GET", "/v1/jobs", NULL, &st);
		want_error(h, j, st, 401, "unauthorized", "web tokens: a token revoked on the page");
	}
	st = h_browse(h, h->admin_token, "GET", "/ui/tokens", NULL, NULL);
	h_ok(h, st == 200 && body_has(h, ">web-made</td>") && !body_has(h, revoke), "web tokens: a revoked row offers no revoke");

	/* limits: set, lifted, refused; each change wakes the parked GPUs */
	{
		struct notify_wait w = { h, metric(h, xasprintf("rung_lease_notifies_total{event=\"sent\"}")) };
		st = h_browse(h, h->admin_token, "POST", limits, "max_running=3", SAME_SITE);
		h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, "/ui/tokens") &&
			     listed_limit(h, "web-limited") == 3,
		     "web tokens: a limit of 3 set, 303 back, GET /v1/tokens says 3 (%ld)", st);
		h_ok(h, w.before >= 0 && wait_until(notified, &w, 10000), "web tokens: the change wakes the parked GPUs (a NOTIFY sent)");
	}
	st = h_browse(h, h->admin_token, "GET", "/ui/tokens", NULL, NULL);
	h_ok(h, st == 200 && body_has(h, "<td class=\"limit\">3</td>"), "web tokens: the page shows the limit");
	st = h_browse(h, h->admin_token, "POST", limits, "max_running=0", SAME_SITE);
	h_ok(h, st == 303 && listed_limit(h, "web-limited") == 0, "web tokens: 0 pauses (%ld)", st);
	{
		/* and a form without the field, or with one that cannot be decoded: never read as "no limit" */
		static const char *const bad[] = { "max_running=abc", "max_running=-1", "max_running=1.5", "max_running=1000001",
						   "", "max_running=%ZZ" };
		for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
			st = h_browse(h, h->admin_token, "POST", limits, bad[i], SAME_SITE);
			h_ok(h, st == 400 && body_has(h, "<code class=\"field\">max_running</code>"),
			     "web tokens: %s is a 400 naming max_running (%ld)", bad[i], st);
		}
	}
	h_ok(h, listed_limit(h, "web-limited") == 0, "web tokens: and they changed nothing");
	st = h_browse(h, h->admin_token, "POST", limits, "max_running=", "Origin: http://evil.example");
	h_ok(h, st == 403 && listed_limit(h, "web-limited") == 0,
	     "web tokens: a limit from another site: 403, unchanged (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", limits, "max_running=", SAME_SITE);
	h_ok(h, st == 303 && listed_limit(h, "web-limited") == -1, "web tokens: lifted with an empty field (%ld)", st);
	/* the pool form (migration 034): the limit in that pool alone */
	st = h_browse(h, h->admin_token, "POST", limits, "pool=h200&max_running=2", SAME_SITE);
	h_ok(h, st == 303 && listed_limit(h, "web-limited") == -1 &&
		     h_sql_int(h, "SELECT (pool_limits->>'h200')::int FROM tokens WHERE name = 'web-limited'", 0, NULL) == 2,
	     "web tokens: the pool form sets 2 in h200, the limit over every pool left as it was (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", limits, "pool=H200&max_running=2", SAME_SITE);
	h_ok(h, st == 400 && body_has(h, "<code class=\"field\">pool</code>"), "web tokens: a bad pool name is a 400 naming pool (%ld)",
	     st);
	st = h_browse(h, h->admin_token, "POST", limits, "pool=&max_running=2", SAME_SITE);
	h_ok(h, st == 400 && body_has(h, "<code class=\"field\">pool</code>"), "web tokens: so is an empty one (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", limits, "pool=h200&max_running=", SAME_SITE);
	h_ok(h, st == 303 && h_sql_int(h, "SELECT count(*) FROM tokens WHERE name = 'web-limited' AND pool_limits IS NULL", 0,
				      NULL) == 1,
	     "web tokens: and lifted with an empty limit (%ld)", st);
	/* the quota form (migration 035) */
	st = h_browse(h, h->admin_token, "POST", limits, "gpu_hours=5&gpu_hours_days=3", SAME_SITE);
	h_ok(h, st == 303 && h_sql_int(h, "SELECT (gpu_hours * 10)::int * 100 + gpu_hours_days FROM tokens "
					  "WHERE name = 'web-limited'", 0, NULL) == 5003,
	     "web tokens: the quota form sets 5 GPU hours over 3 days (%ld)", st);
	{
		static const struct {
			const char *form, *field;
		} bad[] = { { "gpu_hours=abc", "gpu_hours" }, { "gpu_hours=-1", "gpu_hours" },
			    { "gpu_hours=5&gpu_hours_days=0", "gpu_hours_days" }, { "gpu_hours=%ZZ", "gpu_hours" },
			    { "gpu_hours=5&gpu_hours_days=x", "gpu_hours_days" } };
		for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
			char *want = xasprintf("<code class=\"field\">%s</code>", bad[i].field);
			st = h_browse(h, h->admin_token, "POST", limits, bad[i].form, SAME_SITE);
			h_ok(h, st == 400 && body_has(h, want), "web tokens: %s is a 400 naming %s (%ld)", bad[i].form, bad[i].field,
			     st);
			free(want);
		}
	}
	st = h_browse(h, h->admin_token, "POST", limits, "gpu_hours=2.5", SAME_SITE);
	h_ok(h, st == 303 && h_sql_int(h, "SELECT (gpu_hours * 10)::int FROM tokens WHERE name = 'web-limited'", 0, NULL) == 25,
	     "web tokens: the quota form takes a fraction of an hour, 2.5 (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", limits, "gpu_hours=&gpu_hours_days=", SAME_SITE);
	h_ok(h, st == 303 && h_sql_int(h, "SELECT count(*) FROM tokens WHERE name = 'web-limited' AND gpu_hours IS NULL "
					  "AND gpu_hours_days = 3", 0, NULL) == 1,
	     "web tokens: lifted with an empty field, the window kept (%ld)", st);
	/* the pool quota form (migration 037) */
	st = h_browse(h, h->admin_token, "POST", limits, "pool=h200&gpu_hours=40", SAME_SITE);
	h_ok(h, st == 303 && h_sql_int(h, "SELECT (pool_gpu_hours->>'h200')::int FROM tokens WHERE name = 'web-limited'", 0,
				      NULL) == 40 &&
		     h_sql_int(h, "SELECT count(*) FROM tokens WHERE name = 'web-limited' AND gpu_hours IS NULL", 0, NULL) == 1,
	     "web tokens: the pool quota form sets 40 GPU hours in h200, the quota over every pool left as it was (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", limits, "pool=H200&gpu_hours=40", SAME_SITE);
	h_ok(h, st == 400 && body_has(h, "<code class=\"field\">pool</code>"), "web tokens: a bad pool name there is a 400 (%ld)",
	     st);
	st = h_browse(h, h->admin_token, "POST", limits, "pool=h200&gpu_hours=", SAME_SITE);
	h_ok(h, st == 303 && h_sql_int(h, "SELECT count(*) FROM tokens WHERE name = 'web-limited' AND pool_gpu_hours IS NULL", 0,
				      NULL) == 1,
	     "web tokens: and lifted with an empty field (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", "/ui/tokens/999999/limits", "max_running=1", SAME_SITE);
	h_ok(h, st == 404, "web tokens: an unknown token id is a 404 (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", "/ui/tokens/999999/revoke", "", SAME_SITE);
	h_ok(h, st == 404, "web tokens: and for a revoke (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", "/ui/tokens/x/revoke", "", SAME_SITE);
	h_ok(h, st == 404, "web tokens: an id that is not one: 404 (%ld)", st);
	form = xmalloc(5000);
	memset(form, 'a', 4999);
	memcpy(form, "max_running=", 12);
	form[4999] = '\0';
	st = h_browse(h, h->admin_token, "POST", limits, form, SAME_SITE);
	h_ok(h, st == 413 && listed_limit(h, "web-limited") == -1, "web tokens: a form over 4 KiB: 413 (%ld)", st);
out:
	free(form);
	free(revoke);
	free(limits);
	free(secret);
	free(wid);
	free(ltok);
	free(lid);
}

/* ---- token expiry (migrations/023_token_expiry.sql) ---- */

/* POST /v1/tokens {"role", "name", "expires_in_s"} as admin; returns the answer (new reference)
 * and the secret (heap) or NULL. */
static char *expiring_token(struct harness *h, const char *role, const char *name, long long secs, json_t **ans)
{
	long st = 0;
	json_t *b = json_pack("{s:s, s:s, s:I}", "role", role, "name", name, "expires_in_s", (json_int_t)secs);
	json_t *j = as(h, h->admin_token, "POST", "/v1/tokens", b, &st);
	char *tok = st == 201 && json_is_string(json_object_get(j, "token")) ? xstrdup(h_str(j, "token")) : NULL;

	if (!tok)
		h_diag("POST /v1/tokens %s expiring: %ld %.300s", name, st, h->last_body ? h->last_body : "");
	json_decref(b);
	if (ans)
		*ans = j;
	else
		json_decref(j);
	return tok;
}

/* Moves the expiry of the token named name into the past (a minute ago), through the test's own
 * connection: expiry made to happen, never waited for. */
static void expire_now(struct harness *h, const char *name)
{
	const char *p[1] = { name };

	PQclear(h_sql(h, "UPDATE tokens SET expires_at = now() - interval '1 minute' WHERE name = $1", 1, p));
}

/* Seconds from now until the token named name expires (by the database's clock), -1 when none. */
static long long expires_in(struct harness *h, const char *name)
{
	const char *p[1] = { name };

	return h_sql_int(h, "SELECT coalesce(round(extract(epoch FROM expires_at - now()))::bigint, -1) FROM tokens "
			    "WHERE name = $1", 1, p);
}

static void test_token_expiry_api(struct harness *h)
{
	json_t *ans = NULL, *j, *t;
	char *ci = expiring_token(h, "submitter", "ci-pipeline", 3600, &ans), *gone = NULL;
	long long before;
	long st = 0;

	h_ok(h, ci && json_is_string(json_object_get(ans, "expires_at")) && json_is_false(json_object_get(ans, "expired")),
	     "expiry: POST /v1/tokens with expires_in_s 3600 answers its expires_at, not expired");
	h_ok(h, expires_in(h, "ci-pipeline") >= 3590 && expires_in(h, "ci-pipeline") <= 3600,
	     "expiry: the database holds expires_at an hour from now (%lld s)", expires_in(h, "ci-pipeline"));
	json_decref(ans);
	j = as(h, ci, "GET", "/v1/jobs", NULL, &st);
	h_ok(h, st == 200, "expiry: a token that expires works before it does (%ld)", st);
	json_decref(j);
	t = listed(h, "ci-pipeline");
	h_ok(h, t && json_is_string(json_object_get(t, "expires_at")) && json_is_false(json_object_get(t, "expired")),
	     "expiry: GET /v1/tokens shows its expires_at, expired false");
	json_decref(t);
	t = listed(h, "sam");
	h_ok(h, t && json_is_null(json_object_get(t, "expires_at")) && json_is_false(json_object_get(t, "expired")),
	     "expiry: a token made without one shows expires_at null (never), expired false");
	json_decref(t);

	/* expired before this replica ever saw it: the lookup refuses it */
	gone = expiring_token(h, "submitter", "contractor-gone", 86400, NULL);
	expire_now(h, "contractor-gone");
	j = as(h, gone, "GET", "/v1/jobs", NULL, &st);
	h_ok(h, st == 401 && !strcmp(h_str(j, "error"), "token_expired") && strstr(h_str(j, "message"), "expired at") &&
		     strstr(h_str(j, "message"), "contractor-gone"),
	     "expiry: an expired token is refused 401 token_expired, saying which and when (%ld %s)", st,
	     h->last_body ? h->last_body : "");
	json_decref(j);
	j = as(h, gone, "GET", "/v1/jobs", NULL, &st);
	want_error(h, j, st, 401, "token_expired", "expiry: and again at the next request");
	j = as(h, gone, "POST", "/v1/jobs", NULL, &st);
	want_error(h, j, st, 401, "token_expired", "expiry: on every route, a submit too");
	t = listed(h, "contractor-gone");
	h_ok(h, t && json_is_true(json_object_get(t, "expired")) && json_is_false(json_object_get(t, "revoked")),
	     "expiry: GET /v1/tokens shows it expired (not revoked)");
	json_decref(t);
	{
		/* /metrics: the seconds each token that expires has left, negative for a day after */
		const char *pc[1] = { "ci-pipeline" }, *pg[1] = { "contractor-gone" };
		long long ci_id = h_sql_int(h, "SELECT id FROM tokens WHERE name = $1", 1, pc);
		long long gone_id = h_sql_int(h, "SELECT id FROM tokens WHERE name = $1", 1, pg);
		long ci_s = metric(h, xasprintf("rung_token_expiry_seconds{id=\"%lld\",name=\"ci-pipeline\",role=\"submitter\"}",
						ci_id));
		long gone_s = metric(h, xasprintf("rung_token_expiry_seconds{id=\"%lld\",name=\"contractor-gone\",role=\"submitter\"}",
						  gone_id));
		const char *ps[1] = { "sam" };
		char *sam = xasprintf("rung_token_expiry_seconds{id=\"%lld\"", h_sql_int(h, "SELECT id FROM tokens WHERE name = $1", 1, ps));
		long st2 = 0;
		json_t *m;
		h_ok(h, ci_s > 3500 && ci_s <= 3600, "expiry: rung_token_expiry_seconds of ci-pipeline about an hour (%ld)", ci_s);
		h_ok(h, gone_s < 0 && gone_s > -86400, "expiry: the expired one's is negative, listed for a day (%ld)", gone_s);
		m = as(h, h->admin_token, "GET", "/metrics", NULL, &st2);
		h_ok(h, st2 == 200 && h->last_body && strstr(h->last_body, "# TYPE rung_token_expiry_seconds gauge") &&
			     !strstr(h->last_body, sam),
		     "expiry: a token that never expires has no sample");
		json_decref(m);
		free(sam);
	}

	/* bad values, each named; nothing created */
	before = h_sql_int(h, "SELECT count(*) FROM tokens", 0, NULL);
	{
		static const char *const bad[] = { "59", "0", "-3600", "315360001", "3600.5", "\"3600\"", "true", "{}" };
		for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
			char *body = xasprintf("{\"role\": \"submitter\", \"expires_in_s\": %s}", bad[i]);
			const char *saved = h->auth_token;
			h->auth_token = h->admin_token;
			j = h_request(h, "POST", "/v1/tokens", body, strlen(body), NULL, &st);
			h->auth_token = saved;
			h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "expires_in_s") && strstr(h_str(j, "message"), "expires_in_s"),
			     "expiry: expires_in_s %s is a 400 naming expires_in_s (%ld)", bad[i], st);
			json_decref(j);
			free(body);
		}
	}
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM tokens", 0, NULL) == before, "expiry: and none of them made a token");
	free(gone);
	free(ci);
}

/* POST /v1/tokens/{id}/expiry (rungctl token expiry): an expired token given time works again at
 * once on this replica (its cached expiry forgotten), its new expiry an hour from now, and never;
 * a revoked one is 409 and stays revoked; bad bodies are 400 naming expires_in_s; a submitter may
 * not call it; an unknown id is 404. */
static void test_token_expiry_set(struct harness *h)
{
	char *tok = expiring_token(h, "worker", "rack-7", 86400, NULL), *path, *out;
	const char *pn[1] = { "rack-7" };
	long long id = h_sql_int(h, "SELECT id FROM tokens WHERE name = $1", 1, pn);
	json_t *j, *body;
	long st = 0;
	int rc = -1;

	path = xasprintf("/v1/tokens/%lld/expiry", id);
	expire_now(h, "rack-7");
	j = as(h, tok, "POST", "/v1/workers", NULL, &st);
	want_error(h, j, st, 401, "token_expired", "expiry set: the worker token ran out");
	body = json_pack("{s:i}", "expires_in_s", 3600);
	j = as(h, h->admin_token, "POST", path, body, &st);
	h_ok(h, st == 200 && json_is_string(json_object_get(j, "expires_at")) && json_is_false(json_object_get(j, "expired")),
	     "expiry set: an hour more: 200 TOKEN, not expired (%ld)", st);
	h_ok(h, expires_in(h, "rack-7") >= 3590 && expires_in(h, "rack-7") <= 3600,
	     "expiry set: the database holds an hour from now (%lld s)", expires_in(h, "rack-7"));
	json_decref(j);
	json_decref(body);
	j = as(h, tok, "GET", "/v1/jobs", NULL, &st);
	h_ok(h, st != 401, "expiry set: the same secret works again at once, this replica's cached expiry forgotten (%ld)", st);
	json_decref(j);
	body = json_pack("{s:n}", "expires_in_s");
	j = as(h, h->admin_token, "POST", path, body, &st);
	h_ok(h, st == 200 && json_is_null(json_object_get(j, "expires_at")) && expires_in(h, "rack-7") == -1,
	     "expiry set: null: it never expires (%ld)", st);
	json_decref(j);
	j = as(h, h->submitter_token, "POST", path, body, &st);
	h_ok(h, st == 403, "expiry set: a submitter may not (%ld)", st);
	json_decref(j);
	j = as(h, h->admin_token, "POST", "/v1/tokens/999999/expiry", body, &st);
	h_ok(h, st == 404, "expiry set: an unknown id is 404 (%ld)", st);
	json_decref(j);
	json_decref(body);
	{
		static const char *const bad[] = { "{\"expires_in_s\": 59}", "{\"expires_in_s\": 315360001}",
						   "{\"expires_in_s\": \"90d\"}", "{\"expires_in_s\": 3600.5}", "{}",
						   "{\"expires_in_s\": 3600, \"x\": 1}" };
		for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
			const char *saved = h->auth_token;
			h->auth_token = h->admin_token;
			j = h_request(h, "POST", path, bad[i], strlen(bad[i]), NULL, &st);
			h->auth_token = saved;
			h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "expires_in_s"), "expiry set: %s is a 400 naming expires_in_s (%ld)",
			     bad[i], st);
			json_decref(j);
		}
	}
	h_ok(h, expires_in(h, "rack-7") == -1, "expiry set: and none of them changed it");
	out = h_rungctl(h, "token expiry rack-7 90d", &rc);
	h_ok(h, rc != 0, "expiry set: rungctl token expiry takes an id, not a name (%d)", rc);
	free(out);
	{
		char *args = xasprintf("token expiry %lld 90d", id);
		out = h_rungctl(h, args, &rc);
		h_ok(h, rc == 0 && out && strstr(out, "(rack-7): expires 20") && expires_in(h, "rack-7") > 89 * 86400,
		     "expiry set: rungctl token expiry ID 90d (%d %s)", rc, out ? out : "-");
		free(out);
		free(args);
		args = xasprintf("token expiry %lld never", id);
		out = h_rungctl(h, args, &rc);
		h_ok(h, rc == 0 && out && strstr(out, "expires never") && expires_in(h, "rack-7") == -1,
		     "expiry set: rungctl token expiry ID never (%d %s)", rc, out ? out : "-");
		free(out);
		free(args);
		args = xasprintf("token expiry %lld 5x", id);
		out = h_rungctl(h, args, &rc);
		h_ok(h, rc == 2 && out && strstr(out, "5x"), "expiry set: a bad DURATION is a usage error, nothing sent (%d)", rc);
		free(out);
		free(args);
	}
	{
		/* the tokens page's expiry form: days from now, empty for never; refusals named */
		char *form_path = xasprintf("/ui/tokens/%lld/expiry", id);
		st = h_browse(h, h->admin_token, "GET", "/ui/tokens", NULL, NULL);
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, form_path) && strstr(h->last_body, "Set expiry"),
		     "expiry set: the tokens page has the expiry form (%ld)", st);
		expire_now(h, "rack-7");
		st = h_browse(h, h->admin_token, "POST", form_path, "expires_in_days=30", SAME_SITE);
		h_ok(h, st == 303 && expires_in(h, "rack-7") > 29 * 86400 && expires_in(h, "rack-7") <= 30 * 86400,
		     "expiry set: the form gives an expired token 30 days (%ld, %lld s)", st, expires_in(h, "rack-7"));
		st = h_browse(h, h->admin_token, "POST", form_path, "expires_in_days=", SAME_SITE);
		h_ok(h, st == 303 && expires_in(h, "rack-7") == -1, "expiry set: an empty field: never (%ld)", st);
		st = h_browse(h, h->admin_token, "POST", form_path, "expires_in_days=0", SAME_SITE);
		h_ok(h, st == 400 && h->last_body && strstr(h->last_body, "expires_in_days") && expires_in(h, "rack-7") == -1,
		     "expiry set: 0 days: a 400 page naming expires_in_days, unchanged (%ld)", st);
		st = h_browse(h, h->admin_token, "POST", form_path, "other=1", SAME_SITE);
		h_ok(h, st == 400 && expires_in(h, "rack-7") == -1, "expiry set: no field: 400, not read as never (%ld)", st);
		st = h_browse(h, h->admin_token, "POST", form_path, "expires_in_days=30", "Origin: http://evil.example");
		h_ok(h, st == 403 && expires_in(h, "rack-7") == -1, "expiry set: the form from another site: 403 (%ld)", st);
		st = h_browse(h, h->submitter_token, "POST", form_path, "expires_in_days=30", SAME_SITE);
		h_ok(h, st == 403 && expires_in(h, "rack-7") == -1, "expiry set: a submitter's form: 403 (%ld)", st);
		st = h_browse(h, h->admin_token, "POST", "/ui/tokens/999999/expiry", "expires_in_days=30", SAME_SITE);
		h_ok(h, st == 404, "expiry set: the form for an unknown token: 404 (%ld)", st);
		free(form_path);
	}
	{
		char *revoke = xasprintf("/v1/tokens/%lld/revoke", id);
		json_decref(as(h, h->admin_token, "POST", revoke, NULL, &st));
		free(revoke);
	}
	{
		char *form_path = xasprintf("/ui/tokens/%lld/expiry", id);
		st = h_browse(h, h->admin_token, "POST", form_path, "expires_in_days=30", SAME_SITE);
		h_ok(h, st == 409 && expires_in(h, "rack-7") == -1, "expiry set: the form for a revoked token: 409 page (%ld)", st);
		free(form_path);
	}
	body = json_pack("{s:i}", "expires_in_s", 3600);
	j = as(h, h->admin_token, "POST", path, body, &st);
	h_ok(h, st == 409 && !strcmp(h_str(j, "error"), "token_revoked") && expires_in(h, "rack-7") == -1,
	     "expiry set: a revoked token: 409 token_revoked, unchanged (%ld)", st);
	json_decref(j);
	json_decref(body);
	j = as(h, tok, "GET", "/v1/jobs", NULL, &st);
	h_ok(h, st == 401, "expiry set: and it stays refused (%ld)", st);
	json_decref(j);
	free(path);
	free(tok);
}

/* `rungd token create --expires`: the bootstrap path straight to the database. */
static void test_token_expiry_bootstrap(struct harness *h)
{
	char *bin = xasprintf("%s/bin/rungd", h->root);
	const char *ok[] = { bin, "token", "create", "--role", "submitter", "--name", "boot-ci", "--expires", "90d",
			     "--database-url", h->db_url, NULL };
	const char *bad[] = { bin, "token", "create", "--role", "submitter", "--name", "boot-bad", "--expires", "5x",
			      "--database-url", h->db_url, NULL };
	const char *short_[] = { bin, "token", "create", "--role", "submitter", "--name", "boot-short", "--expires", "30s",
				 "--database-url", h->db_url, NULL };
	long long left;

	h_ok(h, h_run(h, ok) == 0, "expiry: rungd token create --expires 90d");
	left = expires_in(h, "boot-ci");
	h_ok(h, left > 90 * 86400LL - 120 && left <= 90 * 86400LL, "expiry: it expires in 90 days (%lld s)", left);
	h_ok(h, h_run(h, bad) == 2 && expires_in(h, "boot-bad") == -1 &&
		     h_sql_int(h, "SELECT count(*) FROM tokens WHERE name = 'boot-bad'", 0, NULL) == 0,
	     "expiry: --expires 5x is a usage error (exit 2), nothing made");
	h_ok(h, h_run(h, short_) == 2 && h_sql_int(h, "SELECT count(*) FROM tokens WHERE name = 'boot-short'", 0, NULL) == 0,
	     "expiry: --expires 30s (under a minute) too");
	free(bin);
}

/* The web login and pages with an expired token, and the tokens page's expiry. */
static void test_token_expiry_web(struct harness *h)
{
	char *live = expiring_token(h, "support", "web-expiring", 7200, NULL);
	char *dead = expiring_token(h, "support", "web-expired", 7200, NULL);
	char *form = NULL;
	long long before;
	long st;

	if (!h_ok(h, live && dead, "expiry web: two expiring support tokens"))
		goto out;
	expire_now(h, "web-expired");
	form = xasprintf("token=%s&next=%%2Fui%%2Fgpus", dead);
	st = h_browse(h, NULL, "POST", "/ui/login", form, NULL);
	h_ok(h, st == 401 && !h->last_location && body_has(h, "This token expired at") && body_has(h, "<h1>Log in</h1>"),
	     "expiry web: logging in with an expired token is refused with a page saying it expired (%ld)", st);
	free(form);
	form = xasprintf("token=%s&next=%%2Fui%%2Fgpus", live);
	st = h_browse(h, NULL, "POST", "/ui/login", form, NULL);
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, "/ui/gpus"),
	     "expiry web: one not yet expired logs in, back to the page (%ld)", st);
	free(form);
	form = xstrdup("token=rung_0000000000000000000000000000000000000000000000000000000000000000&next=%2Fui%2Fgpus");
	st = h_browse(h, NULL, "POST", "/ui/login", form, NULL);
	h_ok(h, st == 401 && body_has(h, "unknown or revoked"), "expiry web: an unknown token is refused at the login too (%ld)", st);
	st = h_browse(h, live, "GET", "/ui/gpus", NULL, NULL);
	h_ok(h, st == 200, "expiry web: a page with the live token's cookie (%ld)", st);

	/* a cookie whose token expired: back to the login, which says why */
	st = h_browse(h, dead, "GET", "/ui/gpus", NULL, NULL);
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, "/ui/login?next=%2Fui%2Fgpus&why=expired"),
	     "expiry web: a page with an expired token's cookie sends the browser to the login (%ld %s)", st,
	     h->last_location ? h->last_location : "-");
	st = h_browse(h, NULL, "GET", "/ui/login?next=%2Fui%2Fgpus&why=expired", NULL, NULL);
	h_ok(h, st == 200 && body_has(h, "Your token expired") && body_has(h, "value=\"/ui/gpus\""),
	     "expiry web: the login form says the token expired and comes back to the page (%ld)", st);
	st = h_browse(h, "rung_0000000000000000000000000000000000000000000000000000000000000000", "GET", "/ui/gpus", NULL, NULL);
	h_ok(h, st == 303 && h->last_location && !strcmp(h->last_location, "/ui/login?next=%2Fui%2Fgpus&why=refused"),
	     "expiry web: an unknown token's cookie goes to the login too (%ld)", st);

	/* the tokens page: expiry per token, the create form's days */
	st = h_browse(h, h->admin_token, "GET", "/ui/tokens", NULL, NULL);
	h_ok(h, st == 200 && body_has(h, "<th>expires</th>") && body_has(h, "<strong>expired</strong>") &&
		     body_has(h, "<td class=\"expires\">never</td>") && body_has(h, "name=\"expires_in_days\""),
	     "expiry web: the tokens page shows expiry (never, expired) and the days field (%ld)", st);
	st = h_browse(h, h->admin_token, "POST", "/ui/tokens", "role=submitter&name=web-30d&expires_in_days=30", SAME_SITE);
	h_ok(h, st == 200 && body_has(h, "shown only this once") && body_has(h, "<th>expires</th>") &&
		     expires_in(h, "web-30d") > 30 * 86400LL - 120 && expires_in(h, "web-30d") <= 30 * 86400LL,
	     "expiry web: created with 30 days, the database says so (%ld, %lld s)", st, expires_in(h, "web-30d"));
	st = h_browse(h, h->admin_token, "POST", "/ui/tokens", "role=submitter&name=web-never&expires_in_days=", SAME_SITE);
	h_ok(h, st == 200 && h_sql_int(h, "SELECT count(*) FROM tokens WHERE name = 'web-never' AND expires_at IS NULL", 0, NULL) == 1,
	     "expiry web: the field left empty: never (%ld)", st);
	before = h_sql_int(h, "SELECT count(*) FROM tokens", 0, NULL);
	{
		static const char *const bad[] = { "0", "3651", "abc", "1.5", "-2", "%ZZ" };
		for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
			char *f = xasprintf("role=submitter&name=web-bad-%zu&expires_in_days=%s", i, bad[i]);
			st = h_browse(h, h->admin_token, "POST", "/ui/tokens", f, SAME_SITE);
			h_ok(h, st == 400 && body_has(h, "<code class=\"field\">expires_in_days</code>"),
			     "expiry web: expires_in_days=%s is a 400 page naming the field (%ld)", bad[i], st);
			free(f);
		}
	}
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM tokens", 0, NULL) == before, "expiry web: and none of them made a token");
out:
	free(form);
	free(live);
	free(dead);
}

struct log_wait {
	const char *path;
	const char *needle;
	int times;
};

static int count_in(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

static bool log_has(void *arg)
{
	struct log_wait *w = arg;
	char *text = h_slurp(w->path);
	bool ok = count_in(text, w->needle) >= w->times;

	free(text);
	return ok;
}

/* A rung-worker whose token expired: its registrations are refused, and it says why in one line,
 * however often it retries (retrying as before). */
static void test_token_expiry_worker(struct harness *h)
{
	char *wtok = expiring_token(h, "worker", "w-expired", 3600, NULL), *env = NULL, *text = NULL;
	struct h_worker *w;

	if (!h_ok(h, wtok != NULL, "expiry worker: a worker token"))
		return;
	expire_now(h, "w-expired");
	env = xasprintf("RUNG_TOKEN=%s", wtok);
	{
		const char *e[] = { env, NULL };
		struct h_worker_opts o = { .env = e };
		w = h_worker_start(h, "w-exp", &o);
	}
	if (h_ok(h, w != NULL, "expiry worker: started with the expired token")) {
		struct log_wait lw = { w->proc.log_path, "registration failed, retrying", 3 };
		h_ok(h, wait_until(log_has, &lw, 20000 * h_slow()), "expiry worker: its registration is refused, and retried");
		text = h_slurp(w->proc.log_path);
		h_ok(h, count_in(text, "this worker's token expired") == 1 &&
			     strstr(text, "w-expired") && strstr(text, "rungctl token create --role worker"),
		     "expiry worker: one clear line says its token expired and what to do, once over %d refusals",
		     count_in(text, "registration failed, retrying"));
		h_ok(h, h_worker_stop(h, w, SIGTERM) == 0, "expiry worker: stops");
	}
	free(text);
	free(env);
	free(wtok);
}

/* A worker restarted with a new token (the old one revoked or expired: a rotation) still delivers
 * the finish its spool kept from before: it registers first, which binds the worker's row, and its
 * attempts, to the new token, then resends the spool. Sent before, the finish was "not the
 * caller's" (404) and dropped, and the attempt ran again. */
static void test_worker_token_rotation(struct harness *h)
{
	char *ta_id = NULL, *ta = api_token(h, "worker", "rot-a", &ta_id), *tb = api_token(h, "worker", "rot-b", NULL);
	char *gpus = h_sim_gpus("rot-w", 1, 24576), *wid = NULL, *aid = NULL, *jid = NULL, *dir = NULL, *path = NULL;
	json_t *cfg = h_config("rot_job", 10), *extra = json_pack("{s:i}", "priority", -100000), *job = NULL;
	json_t *lease = NULL, *spooled = NULL, *facts = h_facts_success(10), *done = NULL;
	const char *saved = h->auth_token;
	long st = 0;

	job = h_submit(h, cfg, extra);
	jid = h_id(job, "id");
	h->auth_token = ta;
	wid = h_fake_register(h, "rot-w", "GPU-sim-rot-w-0", 24576);
	lease = wid ? h_fake_lease(h, wid, "GPU-sim-rot-w-0", 5000, &st) : NULL;
	h->auth_token = saved;
	aid = h_id(lease, "attempt_id");
	char *leased_job = h_id(lease, "job_id");
	bool ours = jid && leased_job && !strcmp(jid, leased_job);
	free(leased_job);
	if (!h_ok(h, ta && tb && ours && aid, "rotation: worker rot-w leased the job with token rot-a"))
		goto out;
	json_decref(h_postf(h, NULL, &st, "/v1/tokens/%s/revoke", ta_id));
	h_ok(h, st == 200, "rotation: rot-a revoked (%ld)", st);
	/* what the worker's spool holds after a finish it could not deliver before it stopped */
	dir = xasprintf("%s/rot-w/spool", h->tmp);
	path = xasprintf("%s/%s.json", dir, aid);
	char *wd = xasprintf("%s/rot-w", h->tmp);
	mkdir(wd, 0755);
	mkdir(dir, 0755);
	free(wd);
	spooled = json_pack("{s:s, s:O}", "token", h_str(lease, "token"), "facts", facts);
	h_ok(h, json_dump_file(spooled, path, JSON_COMPACT) == 0, "rotation: a finish waits in rot-w's spool");
	{
		const char *args[] = { "--token", tb, NULL };
		struct h_worker_opts o = { .gpus_json = gpus, .args = args };
		h_ok(h, h_worker_start(h, "rot-w", &o) != NULL, "rotation: rot-w starts again with token rot-b");
	}
	done = h_wait_job(h, jid, "succeeded", 30000 * h_slow());
	const char *p[1] = { jid };
	long long n = h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint", 1, p);
	long long ok1 = h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint AND number = 1 "
				     "AND outcome = 'succeeded'", 1, p);
	h_ok(h, done && n == 1 && ok1 == 1,
	     "rotation: the spooled finish landed under the new token: the job succeeded in its one attempt (%lld attempts)",
	     n);
out:
	h->auth_token = saved;
	json_decref(cfg);
	json_decref(extra);
	json_decref(job);
	json_decref(lease);
	json_decref(spooled);
	json_decref(facts);
	json_decref(done);
	free(ta);
	free(ta_id);
	free(tb);
	free(gpus);
	free(wid);
	free(aid);
	free(jid);
	free(dir);
	free(path);
}

int main(void)
{
	struct harness *h = h_new("it_auth");
	const char *extra[] = { "--submit-rate", SUBMIT_RATE, NULL };
	char *support = NULL, *w1tok = NULL, *w2tok = NULL;

	if (!h_ok(h, h_server_start(h, extra) == 0, "rungd starts with auth and the bootstrap tokens"))
		return h_free(h);
	support = api_token(h, "support", "sam", NULL);
	w1tok = api_token(h, "worker", "wtok-one", NULL);
	w2tok = api_token(h, "worker", "wtok-two", NULL);
	if (!h_ok(h, support && w1tok && w2tok, "admin makes support and worker tokens"))
		goto out;
	test_worker_memo(h, w1tok);
	test_owner_memo(h, w1tok, w2tok);
	test_unauthenticated(h);
	test_roles(h, support);
	test_workers(h, w1tok, w2tok);
	test_job_ownership(h, support);
	test_token_api(h);
	test_cli_revoke(h);
	test_web_tokens(h, support);
	test_token_expiry_api(h);
	test_token_expiry_set(h);
	test_token_expiry_bootstrap(h);
	test_token_expiry_web(h);
	test_token_expiry_worker(h);
	test_limits(h);
	test_worker_token_rotation(h);
out:
	free(support);
	free(w1tok);
	free(w2tok);
	return h_free(h);
}
