/* Tests for server/batch.c (the coalescer), the queue-timeout rule of server/db.c, and the batch
 * functions of sql/functions/ against a real PostgreSQL: items arriving together share one
 * statement, keys and order, a failing item is isolated, a long queue on a healthy pool is not a
 * 503, and the claim/heartbeat/submit batch functions keep their per-item fences and rules.
 * Uses RUNG_TEST_DATABASE_URL (tests/run.sh), else starts its own cluster with tests/pg.sh. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "../../server/api_attempts.h"
#include "../../server/batch.h"
#include "../../server/db.h"
#include "../../server/metrics.h"
#include "../../server/migrate.h"
#include "jpath.h"
#include "log.h"
#include "memmodel.h"
#include "policy.h"
#include "sql.h"
#include "tap.h"
#include "util.h"

static struct event_base *base;
static char url[600], own_dir[128], own_port[16];

#define WAIT_FOR(cond, ms) __extension__({ int64_t d_ = util_mono_ms() + (ms); \
	while (!(cond) && util_mono_ms() < d_) \
		event_base_loop(base, EVLOOP_ONCE); \
	(cond); })

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* --- the coalescer ------------------------------------------------------------------------- */

struct item {
	int v;
	int got;          /* the statement's answer for it, -1 none */
	int stmt;         /* which done call answered it */
	bool failed;
	bool done;
	char text[48];    /* its JSON object as text, for ops_text */
};

static const char sql_double[] =
	"SELECT (e->>'i')::int, 10 / ((e->>'v')::int - 13) + (e->>'v')::int * 0, (e->>'v')::int * 2 "
	"FROM jsonb_array_elements($1::jsonb) e";

static int stmts, last_n, order_ok;

static json_t *item_json(void *p)
{
	return json_pack("{s:i}", "v", ((struct item *)p)->v);
}

static long long item_order(void *p)
{
	return ((struct item *)p)->v;
}

static void items_done(void **items, int n, PGresult *res, const char *err, void *arg)
{
	(void)err;
	(void)arg;
	stmts++;
	last_n = n;
	for (int i = 1; i < n; i++)
		order_ok &= ((struct item *)items[i - 1])->v <= ((struct item *)items[i])->v;
	for (int i = 0; i < n; i++) {
		struct item *it = items[i];
		it->stmt = stmts;
		it->done = true;
		it->failed = !res || PQresultStatus(res) != PGRES_TUPLES_OK;
	}
	for (int r = 0; res && PQresultStatus(res) == PGRES_TUPLES_OK && r < PQntuples(res); r++) {
		int i = batch_row_index(res, r, n);
		if (i >= 0)
			((struct item *)items[i])->got = atoi(PQgetvalue(res, r, 2));
	}
}

static const char *item_text(void *p)
{
	return ((struct item *)p)->text;
}

static const struct batch_ops ops = { sql_double, item_json, items_done, NULL, NULL };
static const struct batch_ops ops_ordered = { sql_double, item_json, items_done, item_order, NULL };
static const struct batch_ops ops_text = { sql_double, NULL, items_done, NULL, item_text };

static bool all_done(struct item *it, int n)
{
	for (int i = 0; i < n; i++)
		if (!it[i].done)
			return false;
	return true;
}

static void test_coalesce(struct db *db)
{
	static struct item it[100];
	struct batch *b = batch_new(base, db, &ops, NULL, 500, 1, NULL);
	int ok = 0, inflight, waiting;

	stmts = 0;
	for (int i = 0; i < 100; i++) {
		it[i] = (struct item){ .v = i == 13 ? 14 : i, .got = -1 };
		batch_add(b, &it[i], -1);
	}
	batch_stats(b, &inflight, &waiting);
	TAP_OK(inflight == 0 && waiting == 100, "items wait for the loop, nothing runs inside batch_add");
	TAP_OK(WAIT_FOR(all_done(it, 100), 10000), "100 items answered");
	TAP_INT_EQ(stmts, 1, "100 items added together went out as one statement");
	for (int i = 0; i < 100; i++)
		ok += it[i].got == it[i].v * 2 && !it[i].failed;
	TAP_INT_EQ(ok, 100, "each item got its own row");
	batch_free(b);

	/* max_items 40: three statements, one in flight at a time */
	b = batch_new(base, db, &ops, NULL, 40, 1, NULL);
	stmts = 0;
	for (int i = 0; i < 100; i++) {
		it[i] = (struct item){ .v = i == 13 ? 14 : i, .got = -1 };
		batch_add(b, &it[i], -1);
	}
	TAP_OK(WAIT_FOR(all_done(it, 100), 10000), "100 items answered with max_items 40");
	TAP_INT_EQ(stmts, 3, "in three statements");
	TAP_OK(it[0].stmt == 1 && it[39].stmt == 1 && it[40].stmt == 2 && it[99].stmt == 3, "in arrival order");
	batch_free(b);

	/* keys: the same key never twice in one statement */
	b = batch_new(base, db, &ops, NULL, 500, 1, NULL);
	stmts = 0;
	for (int i = 0; i < 6; i++) {
		it[i] = (struct item){ .v = i, .got = -1 };
		batch_add(b, &it[i], i % 3 == 0 ? 7 : i);
	}
	TAP_OK(WAIT_FOR(all_done(it, 6), 10000), "keyed items answered");
	TAP_INT_EQ(stmts, 2, "two items with one key took two statements");
	TAP_OK(it[0].stmt == 1 && it[3].stmt == 2 && it[1].stmt == 1 && it[5].stmt == 1,
	       "the later duplicate waited, the others went first");
	batch_free(b);

	/* order: sorted by the key in each statement */
	b = batch_new(base, db, &ops_ordered, NULL, 500, 1, NULL);
	stmts = 0;
	order_ok = 1;
	for (int i = 0; i < 20; i++) {
		it[i] = (struct item){ .v = (i * 7) % 20 == 13 ? 25 : (i * 7) % 20, .got = -1 };
		batch_add(b, &it[i], -1);
	}
	TAP_OK(WAIT_FOR(all_done(it, 20), 10000) && stmts == 1, "ordered items in one statement");
	TAP_OK(order_ok, "in ascending order of the order key");
	ok = 0;
	for (int i = 0; i < 20; i++)
		ok += it[i].got == it[i].v * 2;
	TAP_INT_EQ(ok, 20, "rows still matched to their items after sorting");
	batch_free(b);

	/* a failing item (v 13: division by zero) is isolated: the others still succeed */
	b = batch_new(base, db, &ops, NULL, 500, 1, NULL);
	stmts = 0;
	for (int i = 0; i < 10; i++) {
		it[i] = (struct item){ .v = 10 + i, .got = -1 };
		batch_add(b, &it[i], -1);
	}
	TAP_OK(WAIT_FOR(all_done(it, 10), 10000), "items of a failing statement all answered");
	TAP_OK(it[3].failed && last_n >= 1, "the bad item failed");
	ok = 0;
	for (int i = 0; i < 10; i++)
		ok += i != 3 && !it[i].failed && it[i].got == it[i].v * 2;
	TAP_INT_EQ(ok, 9, "the nine others succeeded, each alone");
	batch_free(b);

	/* items given as JSON text (item_text): spliced into the array as they are, "i" added, blank
	 * space and an extra member kept; the failing one split off as with item_json */
	b = batch_new(base, db, &ops_text, NULL, 500, 1, NULL);
	stmts = 0;
	for (int i = 0; i < 10; i++) {
		it[i] = (struct item){ .v = 10 + i, .got = -1 };
		snprintf(it[i].text, sizeof it[i].text, i % 2 ? " {\n \"v\" : %d, \"x\": [1, {}] } " : "{\"v\":%d}",
			 10 + i);
		batch_add(b, &it[i], -1);
	}
	TAP_OK(WAIT_FOR(all_done(it, 10), 10000), "items given as text all answered");
	ok = 0;
	for (int i = 0; i < 10; i++)
		ok += i != 3 && !it[i].failed && it[i].got == it[i].v * 2;
	TAP_OK(ok == 9 && it[3].failed, "each text item got its own row; the bad one failed alone");
	batch_free(b);

	/* batch_free with items waiting: finished with res NULL */
	b = batch_new(base, db, &ops, NULL, 500, 1, NULL);
	it[0] = (struct item){ .v = 1, .got = -1 };
	batch_add(b, &it[0], -1);
	batch_free(b);
	TAP_OK(it[0].done && it[0].failed, "batch_free finishes a waiting item");
}

/* --- min_fill: beside a statement in flight, the next waits for enough items --------------- */

/* Every statement first takes a shared advisory lock that the test holds exclusively: statements
 * stay in flight until the test lets them go. */
static const char sql_locked[] =
	"SELECT (e->>'i')::int, 0, (e->>'v')::int * 2 "
	"FROM pg_advisory_xact_lock_shared(4242) l, jsonb_array_elements($1::jsonb) e";
static const struct batch_ops ops_locked = { sql_locked, item_json, items_done, NULL, NULL };

static void test_min_fill(struct db *db)
{
	static struct item it[4];
	PGconn *hold = PQconnectdb(url);
	struct batch *b = batch_new(base, db, &ops_locked, NULL, 500, 2, NULL);
	int inflight = 0, waiting = 0;

	PQclear(PQexec(hold, "SELECT pg_advisory_lock(4242)"));
	batch_set_min_fill(b, 3);
	stmts = 0;
	for (int i = 0; i < 4; i++)
		it[i] = (struct item){ .v = i + 1, .got = -1 };
	batch_add(b, &it[0], -1);
	TAP_OK(WAIT_FOR((batch_stats(b, &inflight, &waiting), inflight == 1), 5000),
	       "min_fill 3: a lone item goes out at once");
	batch_add(b, &it[1], -1);
	batch_add(b, &it[2], -1);
	for (int i = 0; i < 5; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	batch_stats(b, &inflight, &waiting);
	TAP_OK(inflight == 1 && waiting == 2, "two items wait beside the statement in flight (min_fill 3)");
	batch_add(b, &it[3], -1);
	TAP_OK(WAIT_FOR((batch_stats(b, &inflight, &waiting), inflight == 2 && waiting == 0), 5000),
	       "the third item sends the three as a second statement");
	PQclear(PQexec(hold, "SELECT pg_advisory_unlock(4242)"));
	TAP_OK(WAIT_FOR(all_done(it, 4), 10000), "both statements answered once released");
	TAP_OK(stmts == 2 && it[1].stmt == it[2].stmt && it[2].stmt == it[3].stmt && it[0].stmt != it[1].stmt,
	       "the first item alone, the other three together");
	TAP_OK(it[0].got == 2 && it[1].got == 4 && it[2].got == 6 && it[3].got == 8 && !it[3].failed,
	       "each item got its own row");
	batch_free(b);
	PQfinish(hold);
}

/* --- db.c: a long queue on a healthy pool is not a 503 ------------------------------------ */

struct call {
	int n;
	bool res_null;
	char err[100];
};

static void on_call(PGresult *res, const char *err, void *arg)
{
	struct call *c = arg;

	c->n++;
	c->res_null = !res;
	snprintf(c->err, sizeof c->err, "%s", err ? err : "");
}

static const char sql_sleep[] = "SELECT pg_sleep($1::float8)";
static const char sql_one[] = "SELECT 1";

static void test_queue(void)
{
	struct db *one = db_new(base, url, 1);
	struct call slow = { 0 }, queued = { 0 };
	const char *p[1] = { "0.6" };

	TAP_OK(WAIT_FOR(db_up(one), 10000), "pool of one up");
	db_set_queue_timeout_ms(one, 100);
	db_exec(one, sql_sleep, 1, p, on_call, &slow);
	db_exec(one, sql_one, 0, NULL, on_call, &queued);
	TAP_OK(WAIT_FOR(queued.n && slow.n, 10000), "both statements completed");
	TAP_OK(!queued.res_null, "queued 600 ms behind a busy connection (timeout 100 ms): it still ran");
	TAP_OK(!slow.res_null, "the slow one ran too");
	db_free(one);
}

/* --- the batch SQL (blocking libpq: the functions, not the loop) -------------------------- */

static PGconn *pg;

static char *q1(const char *sql, int n, const char *const *params)
{
	static char buf[8192];
	PGresult *r = PQexecParams(pg, sql, n, NULL, params, NULL, NULL, 0);

	buf[0] = 0;
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		snprintf(buf, sizeof buf, "%s", PQgetvalue(r, 0, 0));
	else if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
		printf("# %s: %s", sql, PQerrorMessage(pg));
	PQclear(r);
	return buf;
}

/* The NOTIFYs on rung_jobs that reached pg since the last call: their number; the last payload
 * into last (size 64). */
static int rung_jobs_notifies(char *last)
{
	PGnotify *nf;
	int n = 0;

	PQconsumeInput(pg);
	while ((nf = PQnotifies(pg))) {
		n += strcmp(nf->relname, "rung_jobs") == 0;
		snprintf(last, 64, "%s", nf->extra);
		PQfreemem(nf);
	}
	return n;
}

static void test_sql(void)
{
	const char *p[2];
	char tokens[2][80];

	pg = PQconnectdb(url);
	TAP_OK(PQstatus(pg) == CONNECTION_OK, "connected");
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("LISTEN rung_jobs", 0, NULL); /* a session hears its own NOTIFYs */
	q1("SELECT rung_register('wb', 'h', '[{\"uuid\":\"G-a\",\"memory_total_mib\":24000},"
	   "{\"uuid\":\"G-b\",\"memory_total_mib\":24000},{\"uuid\":\"G-c\",\"memory_total_mib\":80000}]')", 0, NULL);

	/* submit batch: created, existing (same key, same body), conflict (same key, other body) */
	p[0] = "[{\"i\":0,\"name\":\"a\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"config\":{\"x\":1},"
	       "\"recovery\":{},\"key\":\"o/k1\",\"body\":{\"config\":{\"x\":1}}},"
	       "{\"i\":1,\"name\":\"a\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"config\":{\"x\":1},"
	       "\"recovery\":{},\"key\":\"o/k1\",\"body\":{\"config\":{\"x\":1}}},"
	       "{\"i\":2,\"name\":\"b\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"config\":{\"x\":2},"
	       "\"recovery\":{},\"key\":\"o/k1\",\"body\":{\"config\":{\"x\":2}}},"
	       "{\"i\":3,\"name\":\"c\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"config\":{\"x\":3},"
	       "\"recovery\":{},\"key\":null,\"body\":{\"config\":{\"x\":3}}},"
	       "{\"i\":4,\"name\":\"d\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"config\":{\"x\":4},"
	       "\"recovery\":{},\"key\":null,\"body\":{\"config\":{\"x\":4}}}]";
	TAP_STR_EQ(q1("SELECT string_agg(status || ':' || (job->>'id' = job_id::text), ',' ORDER BY i) FROM rung_submit_batch($1::jsonb)", 1, p),
		   "created:true,existing:true,conflict:true,created:true,created:true", "submit batch: per-item idempotency");
	TAP_STR_EQ(q1("SELECT string_agg(target_config::text || coalesce(current_config::text, '-'), ',' ORDER BY id) FROM jobs", 0, NULL),
		   "{\"x\": 1}-,{\"x\": 3}-,{\"x\": 4}-", "the config is the body's config, stored once");
	TAP_STR_EQ(q1("SELECT string_agg((rung_job_json(j)->'current_config')::text, ',' ORDER BY id) FROM jobs j", 0, NULL),
		   "{\"x\": 1},{\"x\": 3},{\"x\": 4}", "JOB shows current_config resolved to the target");
	TAP_STR_EQ(q1("SELECT count(*) FROM jobs", 0, NULL), "3", "three jobs inserted");
	TAP_STR_EQ(q1("SELECT request_hash = md5('{\"config\":{\"x\":1}}'::jsonb::text) FROM jobs WHERE name = 'a'", 0, NULL),
		   "t", "request hash: md5 of the request body as jsonb text");
	TAP_STR_EQ(q1("SELECT string_agg(name || ':' || coalesce(request_hash, '-'), ',' ORDER BY id) FROM jobs WHERE idempotency_key IS NULL", 0, NULL),
		   "c:-,d:-", "keyless items of a keyed batch store no request hash");
	/* job d may not run on G-a */
	q1("UPDATE jobs SET constraints = '{\"exclude_gpus\":[\"G-a\"]}' WHERE name = 'd'", 0, NULL);
	q1("UPDATE jobs SET constraints = '{\"min_gpu_memory_mib\":60000}' WHERE name = 'c'", 0, NULL);

	/* claim batch: a gets job a; b cannot take c (memory) but takes d; c takes the rest */
	p[0] = "[{\"i\":0,\"worker\":0,\"gpu\":\"G-a\",\"fresh\":true},"
	       "{\"i\":1,\"worker\":0,\"gpu\":\"G-zz\",\"fresh\":true}]";
	{
		char wid[32];
		snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wb'", 0, NULL));
		char *j = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"G-a\",\"fresh\":true},"
				    "{\"i\":1,\"worker\":%s,\"gpu\":\"G-zz\",\"fresh\":true},"
				    "{\"i\":2,\"worker\":%s,\"gpu\":\"G-b\",\"fresh\":false},"
				    "{\"i\":3,\"worker\":%s,\"gpu\":\"G-c\",\"fresh\":true},"
				    "{\"i\":4,\"worker\":999999,\"gpu\":\"G-c\",\"fresh\":true}]", wid, wid, wid, wid);
		p[0] = j;
		p[1] = "30";
		TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status || ':' || coalesce((SELECT name FROM jobs j "
			      "WHERE j.id = b.job_id AND (lease->>'job_id')::bigint = b.job_id "
			      "AND lease->>'token' = b.token AND (lease->>'attempt_id')::bigint = b.attempt_id "
			      "AND b.config::jsonb = coalesce(j.current_config, j.target_config) AND NOT b.lease ? 'config'), '-'), ',' ORDER BY i) "
			      "FROM rung_claim_batch($1::jsonb, $2::int) b", 2, p),
			   "0:ok:a,1:no_gpu:-,2:ok:d,3:ok:c,4:no_worker:-",
			   "claim batch: one lease per GPU, every rule of rung_claim per item, the config beside the LEASE");
		TAP_STR_EQ(q1("SELECT count(*) FROM attempts WHERE state = 'running'", 0, NULL), "3", "three attempts");
		/* nothing queued: a parked (not fresh) waiter is skipped without a row or a write */
		q1("UPDATE workers SET last_seen_at = '2000-01-01'", 0, NULL);
		free(j);
		j = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"G-b\",\"fresh\":true},"
			      "{\"i\":1,\"worker\":%s,\"gpu\":\"G-b\",\"fresh\":false}]", wid, wid);
		p[0] = j;
		TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',') FROM rung_claim_batch($1::jsonb, $2::int)", 2, p),
			   "0:none", "queue empty: the fresh waiter gets none, the parked one no row");
		TAP_STR_EQ(q1("SELECT count(*) FROM workers WHERE last_seen_at = '2000-01-01'", 0, NULL), "0",
			   "the fresh claim touched its worker");
		q1("UPDATE workers SET last_seen_at = '2000-01-01'", 0, NULL);
		free(j);
		j = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"G-b\",\"fresh\":false}]", wid);
		p[0] = j;
		TAP_STR_EQ(q1("SELECT count(*) FROM rung_claim_batch($1::jsonb, $2::int)", 2, p), "0",
			   "queue empty: a parked waiter alone gets no row");
		TAP_STR_EQ(q1("SELECT count(*) FROM workers WHERE last_seen_at = '2000-01-01'", 0, NULL), "1",
			   "and costs no write");
		free(j);
		/* last_seen_at is written at most once a second (008); an offline worker comes back at once */
		q1("UPDATE workers SET last_seen_at = now() - interval '200 ms'", 0, NULL);
		q1("CREATE TEMP TABLE seen AS SELECT id, last_seen_at FROM workers", 0, NULL);
		j = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"G-b\",\"fresh\":true}]", wid);
		p[0] = j;
		TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',') FROM rung_claim_batch($1::jsonb, $2::int)", 2, p),
			   "0:none", "a claim by a worker seen 200 ms ago");
		TAP_STR_EQ(q1("SELECT count(*) FROM workers w JOIN seen s ON s.id = w.id WHERE w.last_seen_at = s.last_seen_at", 0, NULL),
			   "1", "does not rewrite its last_seen_at");
		q1("UPDATE workers SET state = 'offline'", 0, NULL);
		TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',') FROM rung_claim_batch($1::jsonb, $2::int)", 2, p),
			   "0:none", "a claim by an offline worker");
		TAP_STR_EQ(q1("SELECT state || ':' || (w.last_seen_at > s.last_seen_at) FROM workers w JOIN seen s ON s.id = w.id", 0, NULL),
			   "online:true", "brings it back online at once");
		q1("DROP TABLE seen", 0, NULL);
		free(j);
	}

	/* heartbeat batch: fence per row */
	snprintf(tokens[0], sizeof tokens[0], "%s", q1("SELECT token FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = 'a'", 0, NULL));
	snprintf(tokens[1], sizeof tokens[1], "%s", q1("SELECT id FROM attempts a WHERE gpu_uuid = 'G-b'", 0, NULL));
	q1("UPDATE jobs SET cancel_requested = true WHERE name = 'd'", 0, NULL);
	{
		char ida[32], tokb[80];
		snprintf(ida, sizeof ida, "%s", q1("SELECT id FROM attempts a WHERE gpu_uuid = 'G-a'", 0, NULL));
		snprintf(tokb, sizeof tokb, "%s", q1("SELECT token FROM attempts WHERE gpu_uuid = 'G-b'", 0, NULL));
		char *j = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"step\":5},"
				    "{\"i\":1,\"id\":%s,\"token\":\"stale\"},"
				    "{\"i\":2,\"id\":%s,\"token\":\"%s\",\"phase\":\"train\"}]",
				    ida, tokens[0], tokens[1], tokens[1], tokb);
		p[0] = j;
		p[1] = "30";
		/* within two thirds of a lease of its expiry: these heartbeats write (see test_heartbeat_skip) */
		q1("UPDATE attempts SET lease_expires_at = now() + interval '5 seconds'", 0, NULL);
		TAP_STR_EQ(q1("SELECT string_agg(i || ':' || cancel, ',' ORDER BY i) FROM rung_heartbeat_batch($1::jsonb, $2::int)", 2, p),
			   "0:false,2:true", "heartbeat batch: stale token fenced out, cancel flag per row");
		TAP_STR_EQ(q1("SELECT step || '/' || (SELECT phase FROM attempts WHERE gpu_uuid = 'G-b') FROM attempts WHERE gpu_uuid = 'G-a'", 0, NULL),
			   "5/train", "heartbeat fields written per row");
		q1("UPDATE workers SET last_seen_at = now() - interval '200 ms'", 0, NULL);
		q1("CREATE TEMP TABLE seen AS SELECT id, last_seen_at FROM workers", 0, NULL);
		q1("SELECT count(*) FROM rung_heartbeat_batch($1::jsonb, $2::int)", 2, p);
		TAP_STR_EQ(q1("SELECT count(*) FROM workers w JOIN seen s ON s.id = w.id WHERE w.last_seen_at = s.last_seen_at", 0, NULL),
			   "1", "a heartbeat within a second of the last one does not rewrite the worker");
		q1("UPDATE workers SET last_seen_at = '2000-01-01'", 0, NULL);
		q1("SELECT count(*) FROM rung_heartbeat_batch($1::jsonb, $2::int)", 2, p);
		TAP_STR_EQ(q1("SELECT count(*) FROM workers WHERE last_seen_at > now() - interval '1 minute'", 0, NULL),
			   "1", "an older one does");
		q1("DROP TABLE seen", 0, NULL);
		free(j);
	}

	/* rung_merge_constraints: the merge of nothing is a copy (007's fast path), a merge unites */
	TAP_STR_EQ(q1("SELECT rung_merge_constraints('{}', '{\"exclude_gpus\": [], \"exclude_workers\": [], "
		      "\"min_gpu_memory_mib\": null}')::text", 0, NULL),
		   "{\"exclude_gpus\": [], \"exclude_workers\": [], \"min_gpu_memory_mib\": null}",
		   "merge of nothing into {}: the normalized empty constraints");
	TAP_STR_EQ(q1("SELECT rung_merge_constraints('{\"exclude_gpus\": [\"G-a\"], \"exclude_workers\": [3], "
		      "\"min_gpu_memory_mib\": 30000}', '{\"exclude_gpus\": []}')::text", 0, NULL),
		   "{\"exclude_gpus\": [\"G-a\"], \"exclude_workers\": [3], \"min_gpu_memory_mib\": 30000}",
		   "merge of nothing keeps exclusions and the memory floor");
	TAP_STR_EQ(q1("SELECT rung_merge_constraints('{\"exclude_gpus\": [\"G-c\"], \"exclude_workers\": [3], "
		      "\"min_gpu_memory_mib\": 30000}', '{\"exclude_gpus\": [\"G-b\", \"G-c\"], \"exclude_workers\": [1], "
		      "\"min_gpu_memory_mib\": 40000}')::text", 0, NULL),
		   "{\"exclude_gpus\": [\"G-b\", \"G-c\"], \"exclude_workers\": [1, 3], \"min_gpu_memory_mib\": 40000}",
		   "a merge unites exclusions (distinct, sorted) and the newest floor wins");
	TAP_STR_EQ(q1("SELECT rung_merge_constraints('{\"min_gpu_memory_mib\": 30000}', '{\"exclude_workers\": [2]}')::text",
		      0, NULL),
		   "{\"exclude_gpus\": [], \"exclude_workers\": [2], \"min_gpu_memory_mib\": 30000}",
		   "a merge without a new floor keeps the old one");

	/* submit batch without keys: the set-wise insert (migrations/007), items answered by index */
	{
		const char *before = q1("SELECT coalesce(max(id), 0) FROM jobs", 0, NULL);
		char maxid[32];

		snprintf(maxid, sizeof maxid, "%s", before);
		p[0] = "[{\"i\":1,\"name\":\"s1\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":5,"
		       "\"recovery\":{\"r\":1},\"key\":null,\"body\":{\"config\":{\"x\":11}}},"
		       "{\"i\":0,\"name\":\"s0\",\"owner\":\"p\",\"kind\":\"video\",\"priority\":7,"
		       "\"recovery\":{},\"body\":{\"config\":{\"x\":10}}}]";
		TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status || ':' || (job->>'id' = job_id::text) || ':' || (job->>'name') "
			      "|| ':' || coalesce(current, target) || ':' || (job ? 'target_config'), ',' ORDER BY i) FROM rung_submit_batch($1::jsonb)", 1, p),
			   "0:created:true:s0:{\"x\": 10}:false,1:created:true:s1:{\"x\": 11}:false",
			   "keyless batch: every item created, the lean JOB per index and its config as text");
		p[1] = maxid;
		TAP_STR_EQ(q1("SELECT string_agg(name || '/' || owner || '/' || kind || '/' || priority || '/' || recovery::text "
			      "|| '/' || (current_config IS NULL) || '/' || coalesce(request_hash, '-'), "
			      "',' ORDER BY id) FROM jobs WHERE id > $2::bigint AND $1::jsonb IS NOT NULL", 2, p),
			   "s1/o/image/5/{\"r\": 1}/true/-,s0/p/video/7/{}/true/-",
			   "rows inserted in array order with every field, config stored once, no request hash (no key)");
		TAP_STR_EQ(q1("SELECT count(*) FROM events e JOIN jobs j ON j.id = e.job_id WHERE j.id > $2::bigint "
			      "AND e.kind = 'submitted' AND $1::jsonb IS NOT NULL", 2, p),
			   "2", "one submitted event per job");
	}

	/* apply batch: plain decisions set-wise (migrations/009), each fenced, cancel honoured */
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("SELECT rung_register('wa', 'h', '[{\"uuid\":\"A-1\",\"memory_total_mib\":24000},"
	   "{\"uuid\":\"A-2\",\"memory_total_mib\":24000},{\"uuid\":\"A-3\",\"memory_total_mib\":24000}]')", 0, NULL);
	p[0] = "[{\"i\":0,\"name\":\"p1\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":1,\"recovery\":{},"
	       "\"body\":{\"config\":{\"x\":1}}},"
	       "{\"i\":1,\"name\":\"p2\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":2,\"recovery\":{},"
	       "\"body\":{\"config\":{\"x\":2}}},"
	       "{\"i\":2,\"name\":\"p3\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":3,\"recovery\":{},"
	       "\"body\":{\"config\":{\"x\":3}}}]";
	q1("SELECT count(*) FROM rung_submit_batch($1::jsonb)", 1, p);
	{
		char wid[32], *j, *batch;
		char ids[3][32], toks[3][80];
		const char *succ = "{\"class\":\"success\",\"rule\":\"r\",\"evidence\":[],\"action\":\"succeed\",\"rung\":null,"
				   "\"changes\":[],\"next_config\":null,\"job_state\":\"succeeded\",\"reason\":\"ok\","
				   "\"constraints\":{\"exclude_gpus\":[],\"exclude_workers\":[],\"min_gpu_memory_mib\":null},"
				   "\"recovery_state\":{\"mode\":\"recover\",\"next_action\":\"\"}}";
		const char *retry = "{\"class\":\"oom_train_early\",\"rule\":\"r\",\"evidence\":[\"e\"],\"action\":\"retry\","
				    "\"rung\":\"batch_size\",\"changes\":[{\"path\":\"config.x\",\"old\":1,\"new\":0}],"
				    "\"next_config\":{\"x\":77},\"job_state\":\"queued\",\"reason\":\"smaller\","
				    "\"constraints\":{\"exclude_gpus\":[\"A-9\"]},\"recovery_state\":{\"mode\":\"recover\","
				    "\"next_action\":\"run it smaller\"}}";

		snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wa'", 0, NULL));
		j = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"A-1\"},{\"i\":1,\"worker\":%s,\"gpu\":\"A-2\"},"
			      "{\"i\":2,\"worker\":%s,\"gpu\":\"A-3\"}]", wid, wid, wid);
		p[0] = j;
		p[1] = "30";
		TAP_STR_EQ(q1("SELECT count(*) FROM rung_claim_batch($1::jsonb, $2::int) WHERE status = 'ok'", 2, p), "3",
			   "three attempts leased for the apply batch");
		free(j);
		for (int k = 0; k < 3; k++) {
			char name[8];
			const char *np[1] = { name };

			snprintf(name, sizeof name, "p%d", k + 1);
			snprintf(ids[k], sizeof ids[k], "%s",
				 q1("SELECT a.id FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = $1", 1, np));
			snprintf(toks[k], sizeof toks[k], "%s",
				 q1("SELECT a.token FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = $1", 1, np));
		}
		q1("UPDATE jobs SET cancel_requested = true WHERE name = 'p2'", 0, NULL);
		/* a decision that is not a job state: the statement fails and applies nothing */
		batch = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"facts\":{},\"decision\":{\"class\":\"success\","
				  "\"job_state\":\"bogus\"}}]", ids[0], toks[0]);
		p[0] = batch;
		TAP_STR_EQ(q1("SELECT count(*) FROM rung_finish_apply_batch($1::jsonb)", 1, p), "",
			   "a decision with an unknown job_state fails the statement");
		TAP_STR_EQ(q1("SELECT count(*) FROM attempts WHERE state = 'running'", 0, NULL), "3", "and applies nothing");
		free(batch);
		batch = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"facts\":{\"last_step\":10,\"log_tail\":[\"a\"]},"
				  "\"decision\":%s},"
				  "{\"i\":1,\"id\":%s,\"token\":\"%s\",\"facts\":{},\"decision\":%s},"
				  "{\"i\":2,\"id\":%s,\"token\":\"%s\",\"facts\":{},\"decision\":%s},"
				  "{\"i\":3,\"id\":%s,\"token\":\"stale\",\"facts\":{},\"decision\":%s}]",
				  ids[0], toks[0], succ, ids[1], toks[1], retry, ids[2], toks[2], retry, ids[0], succ);
		p[0] = batch;
		TAP_STR_EQ(q1("SELECT string_agg(i || ':' || (doc->>'job_state') || ':' || (doc->'decision'->>'job_state'), ',' "
			      "ORDER BY i) FROM rung_finish_apply_batch($1::jsonb)", 1, p),
			   "0:succeeded:succeeded,1:cancelled:cancelled,2:queued:queued",
			   "apply batch: one row per applied item, a cancel turns a retry into cancelled, a stale token none");
		TAP_STR_EQ(q1("SELECT string_agg(j.name || '/' || j.state || '/' || a.outcome || '/' || a.class || '/' || "
			      "coalesce(a.step::text, '-') || '/' || coalesce(a.log_tail::text, '-') || '/' || "
			      "coalesce(j.current_config::text, 'target') || '/' || coalesce(j.next_action, '-'), ',' ORDER BY j.name) "
			      "FROM jobs j JOIN attempts a ON a.job_id = j.id", 0, NULL),
			   "p1/succeeded/succeeded/success/10/[\"a\"]/target/-,"
			   "p2/cancelled/failed/oom_train_early/-/[]/target/run it smaller,"
			   "p3/queued/failed/oom_train_early/-/[]/{\"x\": 77}/run it smaller",
			   "attempts ended with their facts, jobs moved, next_config stored only where it applies");
		TAP_STR_EQ(q1("SELECT (result ? 'config')::text || '/' || (result->>'attempt_id' = $1) || '/' || "
			      "(rung_job_json(j)->'result'->'config')::text FROM jobs j WHERE name = 'p1'", 1,
			      (const char *[]){ ids[0] }),
			   "false/true/{\"x\": 1}", "the success ran the target: the result stores no config, the JOB shows it");
		TAP_STR_EQ(q1("SELECT constraints::text FROM jobs WHERE name = 'p3'", 0, NULL),
			   "{\"exclude_gpus\": [\"A-9\"], \"exclude_workers\": [], \"min_gpu_memory_mib\": null}",
			   "constraints merged");
		TAP_STR_EQ(q1("SELECT string_agg(j.name || ':' || e.kind || ':' || coalesce(e.from_state, '-') || '>' || "
			      "coalesce(e.to_state, '-'), ',' ORDER BY e.id) FROM events e JOIN jobs j ON j.id = e.job_id "
			      "WHERE e.kind NOT IN ('submitted', 'leased')", 0, NULL),
			   "p1:attempt_ended:running>succeeded,p1:job_succeeded:running>succeeded,"
			   "p2:attempt_ended:running>failed,p2:job_cancelled:running>cancelled,"
			   "p3:attempt_ended:running>failed,p3:job_queued:running>queued",
			   "two events per decision, in attempt order");
		free(batch);

		/* a GPU-marking decision in the same batch as a plain one: applied item by item */
		q1("UPDATE jobs SET state = 'queued', cancel_requested = false, current_config = NULL WHERE name = 'p1'", 0, NULL);
		j = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"A-1\"},{\"i\":1,\"worker\":%s,\"gpu\":\"A-2\"}]", wid, wid);
		p[0] = j;
		p[1] = "30";
		TAP_STR_EQ(q1("SELECT count(*) FROM rung_claim_batch($1::jsonb, $2::int) WHERE status = 'ok'", 2, p), "2",
			   "two more attempts leased");
		free(j);
		snprintf(ids[0], sizeof ids[0], "%s", q1("SELECT id FROM attempts WHERE state = 'running' AND gpu_uuid = 'A-1'", 0, NULL));
		snprintf(toks[0], sizeof toks[0], "%s", q1("SELECT token FROM attempts WHERE state = 'running' AND gpu_uuid = 'A-1'", 0, NULL));
		snprintf(ids[1], sizeof ids[1], "%s", q1("SELECT id FROM attempts WHERE state = 'running' AND gpu_uuid = 'A-2'", 0, NULL));
		snprintf(toks[1], sizeof toks[1], "%s", q1("SELECT token FROM attempts WHERE state = 'running' AND gpu_uuid = 'A-2'", 0, NULL));
		batch = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"facts\":{},\"decision\":{\"class\":\"env_fault\","
				  "\"rule\":\"r\",\"action\":\"retry_clean\",\"job_state\":\"queued\",\"next_config\":{\"x\":3},"
				  "\"reason\":\"gpu at fault\",\"gpu\":{\"uuid\":\"A-1\",\"mark\":\"suspect\"}}},"
				  "{\"i\":1,\"id\":%s,\"token\":\"%s\",\"facts\":{},\"decision\":%s}]",
				  ids[0], toks[0], ids[1], toks[1], succ);
		p[0] = batch;
		TAP_STR_EQ(q1("SELECT string_agg(i || ':' || (doc->>'job_state'), ',' ORDER BY i) FROM rung_finish_apply_batch($1::jsonb)",
			      1, p),
			   "0:queued,1:succeeded", "mixed batch: the GPU-marking item and the plain one both applied");
		TAP_STR_EQ(q1("SELECT state || '/' || (SELECT count(*) FROM gpu_faults WHERE gpu_uuid = 'A-1') FROM gpus WHERE uuid = 'A-1'",
			      0, NULL),
			   "suspect/1", "the env fault marked its GPU and was recorded (rung_finish_apply)");
		free(batch);
		{
			/* rungd wakes the replicas after the commit (lease_announce): a NOTIFY inside these
			 * transactions would make Postgres commit them one at a time */
			char last[64] = "";
			TAP_INT_EQ(rung_jobs_notifies(last), 0,
				   "no NOTIFY from the submit, claim and apply batches, re-queues included");
			q1("SELECT pg_notify('rung_jobs', 'probe')", 0, NULL);
			TAP_OK(rung_jobs_notifies(last) == 1 && strcmp(last, "probe") == 0,
			       "(this session does hear a NOTIFY on rung_jobs)");
		}

		/* CTX batch (010): one query for the batch, configs as stored, fenced items without a row */
		j = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"A-1\"}]", wid);
		p[0] = j;
		p[1] = "30";
		TAP_STR_EQ(q1("SELECT string_agg(status || ':' || (SELECT name FROM jobs WHERE id = b.job_id), ',') "
			      "FROM rung_claim_batch($1::jsonb, $2::int) b", 2, p),
			   "ok:p1", "the re-queued job leased again on its suspect GPU (another config)");
		free(j);
		snprintf(ids[0], sizeof ids[0], "%s", q1("SELECT id FROM attempts WHERE state = 'running' AND gpu_uuid = 'A-1'", 0, NULL));
		snprintf(toks[0], sizeof toks[0], "%s", q1("SELECT token FROM attempts WHERE state = 'running' AND gpu_uuid = 'A-1'", 0, NULL));
		batch = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"stale\",\"facts\":{}},"
				  "{\"i\":1,\"id\":%s,\"token\":\"%s\",\"facts\":{\"duration_ms\":7}}]", ids[0], ids[0], toks[0]);
		p[0] = batch;
		TAP_STR_EQ(q1("SELECT string_agg(i || ':' || (ctx->'job'->>'current_config') || ':' || (ctx->'attempt'->>'config') "
			      "|| ':' || jsonb_array_length(ctx->'attempts') || ':' || jsonb_typeof(ctx->'attempts'->0->'config') "
			      "|| ':' || (ctx->'attempts'->1->>'class') || ':' || (ctx->'gpu'->>'env_faults_in_window') "
			      "|| ':' || (ctx->'fleet'->>'max_gpu_memory_mib') || ':' || (ctx->'attempt'->>'duration_ms') "
			      "|| ':' || (ctx->>'config_succeeded_before'), ',') FROM rung_finish_ctx_batch($1::jsonb)", 1, p),
			   "1:{\"x\": 3}:{\"x\": 3}:2:null:env_fault:1:24000:7:false",
			   "CTX batch: the stale item has no row; configs as stored, earlier attempts, GPU faults, fleet");
		free(batch);
	}
	PQfinish(pg);
}

/* The CTX of a finish, its memory section, as a new string (NULL when the fence failed). */
static char *ctx_text(const char *id, const char *token, bool plain)
{
	char *item = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"facts\":{\"duration_ms\":1000},\"plain\":%s}]", id,
			       token, plain ? "true" : "false");
	const char *p[1] = { item };
	PGresult *r = PQexecParams(pg, "SELECT ctx FROM rung_finish_ctx_batch($1::jsonb)", 1, NULL, p, NULL, NULL, 0);
	char *out = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? xstrdup(PQgetvalue(r, 0, 0)) : NULL;

	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		printf("# ctx: %s", PQerrorMessage(pg));
	PQclear(r);
	free(item);
	return out;
}

/* The decision rungd makes from CTX text with FACTS (as ctx_value does); drop_memory: decided as if
 * the CTX had no memory section. A new object, NULL on a policy error. */
static json_t *decide_text(const char *text, const json_t *facts, bool drop_memory)
{
	json_t *ctx = json_loads(text ? text : "null", 0, NULL), *d;
	char *err = NULL;

	policy_ctx_resolve(ctx);
	json_object_set(json_object_get(ctx, "attempt"), "facts", (json_t *)facts);
	if (drop_memory)
		json_object_del(ctx, "memory");
	d = policy_decide(ctx, &err);
	if (!d)
		printf("# policy: %s\n", err ? err : "?");
	free(err);
	json_decref(ctx);
	return d;
}

/* Round 6 (docs/PERFORMANCE.md): a plain finish (FACTS classify as success or cancelled) of an
 * attempt that ran the job's target config gets a CTX without the memory section, and the policy
 * decides exactly as with it; a success below the target (scale-up may run) still gets the memory,
 * and there it changes the decision; an OOM, a stopped or killed run are not plain (their CTX is
 * the full one, checked above). */
static void test_plain_ctx(void)
{
	json_t *cfg = json_load_file("bench/flux_lora_3k.json", 0, NULL), *low, *feat, *obs, *ok, *oom, *d1, *d2;
	json_t *succ = json_pack("{s:i, s:i, s:i, s:i, s:{s:i}}", "exit_code", 0, "first_step", 1, "last_step", 2000,
				 "duration_ms", 1000, "peak", "mib", 20000);
	char *cfg_s, *low_s, *hist, *c_full, *c_plain;
	char ids[2][32];
	const char *p[3];

	pg = PQconnectdb(url);
	TAP_OK(cfg != NULL, "the flux config (bench/flux_lora_3k.json) read");
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox, memory_profiles CASCADE",
	   0, NULL);
	q1("SELECT rung_register('wp', 'h', '[{\"uuid\":\"P-1\",\"memory_total_mib\":24576},"
	   "{\"uuid\":\"P-2\",\"memory_total_mib\":24576}]')", 0, NULL);
	cfg_s = json_dumps(cfg, JSON_COMPACT);
	low = json_deep_copy(cfg);
	json_object_set_new(json_object_get(json_array_get(jpath_get(low, "config.process"), 0), "train"), "batch_size",
			    json_integer(1));
	low_s = json_dumps(low, JSON_COMPACT);

	/* history: the target OOMed on this GPU class, batch 1 fit; kept under a job of its own */
	feat = memmodel_features(cfg, "image");
	obs = json_pack("{s:s, s:{s:i}}", "oom_phase", "train", "peak", "mib", 24400);
	oom = memmodel_observation("flux", 24576, feat, "oom_train_early", obs, 0, 0);
	json_decref(obs);
	json_decref(feat);
	feat = memmodel_features(low, "image");
	ok = memmodel_observation("flux", 24576, feat, "success", succ, 0, 0);
	json_decref(feat);
	obs = json_pack("[o, o]", oom, ok);
	hist = json_dumps(obs, JSON_COMPACT);
	p[0] = cfg_s;
	p[1] = hist;
	q1("WITH j AS (INSERT INTO jobs (name, kind, state, target_config, recovery, attempts_count) "
	   "VALUES ('hist', 'image', 'succeeded', $1::jsonb, '{}', 2) RETURNING id) "
	   "INSERT INTO attempts (job_id, number, config, config_hash, token, lease_expires_at, state, outcome, ended_at, "
	   "mem_arch, mem_gpu_mib, mem_obs) SELECT j.id, o.n, NULL, 'h' || o.n, 'hist' || o.n, now(), 'ended', "
	   "'failed', now(), 'flux', 24576, o.obs FROM j, jsonb_array_elements($2::jsonb) WITH ORDINALITY o(obs, n)", 2, p);

	/* two running attempts: "at" ran the target (config NULL), "below" ran batch 1 */
	p[1] = low_s;
	q1("INSERT INTO jobs (name, kind, state, target_config, current_config, recovery, attempts_count) "
	   "VALUES ('at', 'image', 'running', $1::jsonb, NULL, '{}', 1), "
	   "('below', 'image', 'running', $1::jsonb, $2::jsonb, '{}', 1)", 2, p);
	q1("INSERT INTO attempts (job_id, number, worker_id, gpu_uuid, config, config_hash, token, lease_expires_at) "
	   "SELECT j.id, 1, (SELECT id FROM workers WHERE name = 'wp'), CASE j.name WHEN 'at' THEN 'P-1' ELSE 'P-2' END, "
	   "j.current_config, md5(j.name), 'tok-' || j.name, now() + interval '1 hour' FROM jobs j WHERE j.name IN ('at', 'below')",
	   0, NULL);
	snprintf(ids[0], sizeof ids[0], "%s", q1("SELECT a.id FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = 'at'", 0, NULL));
	snprintf(ids[1], sizeof ids[1], "%s", q1("SELECT a.id FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = 'below'", 0, NULL));

	/* rungd's side: which FACTS are plain */
	{
		static const char *const facts[][2] = {
			{ "{\"exit_code\": 0, \"last_step\": 10}", "1" },
			{ "{\"cancelled\": true, \"exit_code\": 1}", "1" },
			{ "{\"exit_code\": 0, \"signatures\": {\"job_stopped\": 1}}", "0" },
			{ "{\"exit_code\": 0, \"signal\": 9}", "0" },
			{ "{\"exit_code\": 1, \"oom_phase\": \"train\", \"signatures\": {\"cuda_oom\": 2}}", "0" },
			{ "{\"exit_code\": 1}", "0" },
			{ "{}", "0" },
		};
		for (size_t i = 0; i < ARRAY_LEN(facts); i++) {
			json_t *f = json_loads(facts[i][0], 0, NULL);
			char name[160];
			snprintf(name, sizeof name, "plain finish (%s): %s", facts[i][0], facts[i][1][0] == '1' ? "yes" : "no");
			TAP_OK(api_attempts_plain_finish(f) == (facts[i][1][0] == '1'), name);
			json_decref(f);
		}
	}

	/* at the target: no memory when plain, the same decision as with it */
	c_full = ctx_text(ids[0], "tok-at", false);
	c_plain = ctx_text(ids[0], "tok-at", true);
	p[0] = c_full ? c_full : "null";
	p[1] = c_plain ? c_plain : "null";
	TAP_STR_EQ(q1("SELECT jsonb_array_length($1::jsonb->'memory'->'observations') || ':' || "
		      "jsonb_typeof($2::jsonb->'memory') || ':' || (($1::jsonb - 'memory') = ($2::jsonb - 'memory'))", 2, p),
		   "2:null:true", "at the target: the full CTX has 2 observations, the plain one none, the rest equal");
	d1 = decide_text(c_full, succ, false);
	d2 = decide_text(c_plain, succ, false);
	TAP_OK(d1 && d2 && json_equal(d1, d2), "a success at the target decides the same with and without memory");
	TAP_STR_EQ(json_string_value(json_object_get(d2, "job_state")) ?: "?", "succeeded", "... and the job succeeds");
	json_decref(d1);
	json_decref(d2);
	free(c_full);
	free(c_plain);

	/* below the target: the memory stays, and it decides the scale-up */
	c_plain = ctx_text(ids[1], "tok-below", true);
	p[0] = c_plain ? c_plain : "null";
	TAP_STR_EQ(q1("SELECT jsonb_array_length($1::jsonb->'memory'->'observations')::text", 1, p), "2",
		   "below the target: a plain finish's CTX keeps the memory (scale-up may run)");
	d1 = decide_text(c_plain, succ, false);
	d2 = decide_text(c_plain, succ, true);
	{
		char name[200];
		snprintf(name, sizeof name, "... and there the memory changes the decision (rung %s with it, %s without)",
			 json_string_value(json_object_get(d1, "rung")) ?: "-", json_string_value(json_object_get(d2, "rung")) ?: "-");
		TAP_OK(d1 && d2 && !json_equal(d1, d2), name);
	}
	json_decref(d1);
	json_decref(d2);
	free(c_plain);

	free(hist);
	json_decref(obs);
	free(cfg_s);
	free(low_s);
	json_decref(low);
	json_decref(cfg);
	json_decref(succ);
	PQfinish(pg);
}

/* Blocks (shared hit + read) that one statement touched, its nested statements included, from
 * EXPLAIN (ANALYZE, BUFFERS); -1 when it failed. The statement runs twice, each time rolled back:
 * the first run warms this session's catalog caches, the second is measured. */
static long blocks(const char *sql, int n, const char *const *params)
{
	char *ex = xasprintf("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) %s", sql);
	long total = -1;
	PGresult *r;

	PQclear(PQexec(pg, "BEGIN"));
	PQclear(PQexecParams(pg, ex, n, NULL, params, NULL, NULL, 0));
	PQclear(PQexec(pg, "ROLLBACK"));
	PQclear(PQexec(pg, "BEGIN"));
	r = PQexecParams(pg, ex, n, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
		json_t *doc = json_loads(PQgetvalue(r, 0, 0), 0, NULL);
		json_t *plan = json_object_get(json_array_get(doc, 0), "Plan");
		if (plan)
			total = (long)(json_integer_value(json_object_get(plan, "Shared Hit Blocks")) +
				       json_integer_value(json_object_get(plan, "Shared Read Blocks")));
		json_decref(doc);
	} else {
		printf("# %s: %s", sql, PQerrorMessage(pg));
	}
	PQclear(r);
	PQclear(PQexec(pg, "ROLLBACK"));
	free(ex);
	return total;
}

/* How many times sql (run in a transaction rolled back after) called the SQL function fn, by
 * pg_stat_xact_user_functions (track_functions = all counts the SQL functions the planner could not
 * inline): a figure computed once per statement must be called once, not once per item. -1 on error. */
static long xact_calls(const char *sql, int n, const char *const *params, const char *fn)
{
	const char *fp[1] = { fn };
	long calls = -1;
	PGresult *r;

	PQclear(PQexec(pg, "BEGIN"));
	PQclear(PQexec(pg, "SET LOCAL track_functions = 'all'"));
	r = PQexecParams(pg, sql, n, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		printf("# %s: %s", sql, PQerrorMessage(pg));
	PQclear(r);
	r = PQexecParams(pg, "SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions WHERE funcname = $1", 1, NULL,
			 fp, NULL, NULL, 0);
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		calls = atol(PQgetvalue(r, 0, 0));
	PQclear(r);
	PQclear(PQexec(pg, "ROLLBACK"));
	return calls;
}

/* The check of an O(batch) statement: it touched some blocks, but fewer than limit. */
static void blocks_under(long b, long limit, const char *what)
{
	char name[160];

	snprintf(name, sizeof name, "%s: %ld blocks (< %ld)", what, b, limit);
	TAP_OK(b > 0 && b < limit, name);
}

/* The check of test_scale: a batch of two touched fewer than 150 blocks. */
static void few_blocks(long b, const char *what)
{
	blocks_under(b, 150, what);
}

/* A batch costs O(batch), not O(running attempts) or O(queue length) (migration 011): with 10,000
 * running attempts and 10,000 queued jobs, a batch of two touches a few dozen blocks; reading every
 * running attempt or queued job would touch hundreds. */
static void test_scale(void)
{
	const char *p[2];
	char *items;
	char ids[2][32], toks[2][80], wid[32];
	long b;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("SELECT rung_register('ws', 'h', '[{\"uuid\":\"S-0\",\"memory_total_mib\":24000},"
	   "{\"uuid\":\"S-1\",\"memory_total_mib\":24000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'ws'", 0, NULL));
	q1("INSERT INTO jobs (name, kind, state, target_config, recovery, attempts_count) "
	   "SELECT 'run' || g, 'image', 'running', '{\"x\":1}', '{}', 1 FROM generate_series(1, 10000) g", 0, NULL);
	q1("INSERT INTO attempts (job_id, number, worker_id, gpu_uuid, config_hash, token, lease_expires_at) "
	   "SELECT id, 1, (SELECT id FROM workers), 'S-0', md5('{\"x\": 1}'), 'tok' || id, now() + interval '1 hour' "
	   "FROM jobs", 0, NULL);
	q1("INSERT INTO jobs (name, kind, target_config, recovery) "
	   "SELECT 'q' || g, 'image', '{\"x\":1}', '{}' FROM generate_series(1, 10000) g", 0, NULL);
	TAP_STR_EQ(q1("SELECT count(*) FROM attempts WHERE state = 'running'", 0, NULL), "10000", "10,000 running attempts");
	for (int k = 0; k < 2; k++) {
		const char *nth[] = { k ? "7000" : "3" };
		snprintf(ids[k], sizeof ids[k], "%s", q1("SELECT id FROM attempts ORDER BY id OFFSET $1::int LIMIT 1", 1, nth));
		snprintf(toks[k], sizeof toks[k], "tok%s", q1("SELECT job_id FROM attempts WHERE id = $1::bigint", 1,
							    (const char *[]){ ids[k] }));
	}

	items = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"step\":5},{\"i\":1,\"id\":%s,\"token\":\"%s\"}]",
			  ids[0], toks[0], ids[1], toks[1]);
	p[0] = items;
	p[1] = "30";
	b = blocks("SELECT * FROM rung_heartbeat_batch($1::jsonb, $2::int)", 2, p);
	few_blocks(b, "heartbeat batch of 2 among 10,000 running attempts");
	free(items);

	items = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"facts\":{}},{\"i\":1,\"id\":%s,\"token\":\"%s\",\"facts\":{}}]",
			  ids[0], toks[0], ids[1], toks[1]);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT count(*) FROM rung_finish_ctx_batch($1::jsonb)", 1, p), "2", "CTX batch: both fences hold");
	/* round 24: the fleet's largest GPU is read once per batch (f MATERIALIZED), not once per item */
	TAP_INT_EQ(xact_calls("SELECT * FROM rung_finish_ctx_batch($1::jsonb)", 1, p, "rung_fleet_max_gpu_mib"), 1,
		   "CTX batch of 2: the fleet's largest GPU read once");
	b = blocks("SELECT * FROM rung_finish_ctx_batch($1::jsonb)", 1, p);
	few_blocks(b, "CTX batch of 2 among 10,000 running attempts");
	/* round 6: with 10,000 succeeded attempts of the same config, config_succeeded_before is one
	 * probe per item, not a hash of every succeeded attempt (the EXISTS form read them all) */
	q1("INSERT INTO attempts (job_id, number, worker_id, gpu_uuid, config_hash, token, lease_expires_at, state, outcome, "
	   "ended_at) SELECT id, 1, (SELECT id FROM workers), 'S-1', md5('{\"x\": 1}'), 'done' || id, now(), 'ended', "
	   "'succeeded', now() FROM jobs WHERE name LIKE 'q%'", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(ctx->>'config_succeeded_before', ',') FROM rung_finish_ctx_batch($1::jsonb)", 1, p),
		   "true,true", "CTX batch: the config succeeded before");
	b = blocks("SELECT * FROM rung_finish_ctx_batch($1::jsonb)", 1, p);
	few_blocks(b, "CTX batch of 2 beside 10,000 succeeded attempts");
	q1("DELETE FROM attempts WHERE token LIKE 'done%'", 0, NULL);
	free(items);

	items = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"facts\":{},\"decision\":{\"class\":\"success\","
			  "\"rule\":\"r\",\"reason\":\"ok\",\"job_state\":\"succeeded\"}},"
			  "{\"i\":1,\"id\":%s,\"token\":\"%s\",\"facts\":{},\"decision\":{\"class\":\"success\","
			  "\"rule\":\"r\",\"reason\":\"ok\",\"job_state\":\"succeeded\"}}]",
			  ids[0], toks[0], ids[1], toks[1]);
	p[0] = items;
	b = blocks("SELECT * FROM rung_finish_apply_batch($1::jsonb)", 1, p);
	few_blocks(b, "apply batch of 2 among 10,000 running attempts");
	free(items);

	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"S-0\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"S-1\",\"fresh\":true}]", wid, wid);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(status, ',') FROM rung_claim_batch($1::jsonb, 30)", 1, p), "ok,ok",
		   "claim batch: two leases from a queue of 10,000");
	b = blocks("SELECT * FROM rung_claim_batch($1::jsonb, 30)", 1, p);
	few_blocks(b, "claim batch of 2 from a queue of 10,000");
	free(items);

	/* the profile cache's fill also reads the fleet's largest usable GPU (requeue_bigger at a lease):
	 * with 10,000 GPUs, the largest quarantined, it counts as the finish CTX does and reads a few
	 * blocks (gpus_usable_memory backwards), not the table */
	q1("INSERT INTO gpus (uuid, worker_id, memory_total_mib, state) SELECT 'F-' || g, $1::bigint, 16384 + (g % 57) * 1024, "
	   "CASE WHEN g = 10000 THEN 'quarantined' WHEN g % 7 = 0 THEN 'suspect' ELSE 'ok' END FROM generate_series(1, 10000) g",
	   1, (const char *[]){ wid });
	q1("UPDATE gpus SET memory_total_mib = 143771 WHERE uuid = 'F-10000'", 0, NULL);
	p[0] = "flux";
	p[1] = "24576";
	TAP_STR_EQ(q1("SELECT count(*) || ':' || (SELECT max(memory_total_mib) FROM gpus) FROM gpus", 0, NULL), "10002:143771",
		   "10,000 more GPUs, the largest (143771 MiB) quarantined");
	{
		PGresult *r = PQexecParams(pg, sql_memcache_fill, 2, NULL, p, NULL, NULL, 0);
		char want[32];
		snprintf(want, sizeof want, "%d", 16384 + 56 * 1024);
		TAP_OK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQnfields(r) == 2 &&
		       !strcmp(PQgetvalue(r, 0, 1), want), "the fill's fleet figure: the largest GPU not quarantined");
		PQclear(r);
	}
	b = blocks(sql_memcache_fill, 2, p);
	few_blocks(b, "profile cache fill with the fleet's largest GPU among 10,002");

	/* only workers that are still there count: a bigger GPU on a worker not seen for 11 minutes (a
	 * host gone for good) promises nothing; one drained by support (maintenance) still does, and an
	 * offline one does not */
	q1("SELECT rung_register('gone', 'h', '[{\"uuid\":\"G-1\",\"memory_total_mib\":200000}]')", 0, NULL);
	{
		static const struct {
			const char *set, *want, *name;
		} cases[] = {
			{ "last_seen_at = now() - interval '11 minutes'", "73728", "a worker not seen for 11 minutes: its GPU does not count" },
			{ "last_seen_at = now() - interval '9 minutes'", "200000", "seen 9 minutes ago: it counts" },
			{ "state = 'draining'", "200000", "drained by support, seen 9 minutes ago: it still counts (it comes back)" },
			{ "state = 'offline'", "73728", "offline: it does not count" },
		};
		for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
			char *sql = xasprintf("UPDATE workers SET %s WHERE name = 'gone'", cases[k].set), name[160];
			PGresult *r;
			q1(sql, 0, NULL);
			free(sql);
			r = PQexecParams(pg, sql_memcache_fill, 2, NULL, p, NULL, NULL, 0);
			TAP_OK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
			       !strcmp(PQgetvalue(r, 0, 1), cases[k].want), cases[k].name);
			PQclear(r);
			snprintf(name, sizeof name, "and the CTX's fleet figure (%s)", cases[k].set);
			TAP_STR_EQ(q1("SELECT rung_fleet_max_gpu_mib()", 0, NULL), cases[k].want, name);
		}
	}
	b = blocks(sql_memcache_fill, 2, p);
	few_blocks(b, "profile cache fill, the largest GPU's worker draining");
	PQfinish(pg);
}

/* The newest observations of an arch (rung_memory_newest, sql/functions/55_memory.sql) cost O(limit)
 * whatever the statistics say. 2,000 observations of sdxl, then 10,000 newer ones of flux, ANALYZE
 * having seen only the first 6 of flux:
 * - sdxl's newest 48 lie under every flux row: the plain "ORDER BY id DESC LIMIT 48" was planned as
 *   the primary key walked backwards (the arch assumed spread evenly) and read all 10,000 first, on
 *   every call (this check fails against it);
 * - flux's estimate (~36) is below the limit, the case the bench's fresh database planned as "read
 *   every observation, sort" (docs/PERFORMANCE.md, round 10).
 * The walk keeps the plain query's answer: the newest 20, on a GPU class reset after they ended, are
 * stepped over. */
static void test_memory_walk(void)
{
	const char *p[2];
	char plain[8192];
	long b;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox, memory_profiles "
	   "CASCADE", 0, NULL);
	q1("ALTER TABLE attempts SET (autovacuum_enabled = off)", 0, NULL);
	/* 1,200 jobs of 10 attempts each */
	q1("INSERT INTO jobs (name, kind, state, target_config, recovery, attempts_count) "
	   "SELECT 'hist' || g, 'image', 'succeeded', '{\"x\":1}', '{}', 10 FROM generate_series(0, 1199) g", 0, NULL);
	/* what ANALYZE sees: 2,000 observations of another arch and the first 6 of flux; then 10,000 more of
	 * flux on 24 GiB, the newest 20 on 40 GiB, every one ~400 bytes as the real ones. The estimate
	 * of flux's rows is then ~36, below the limit of 48. */
	q1("INSERT INTO attempts (job_id, number, config_hash, token, lease_expires_at, state, outcome, ended_at, "
	   "mem_arch, mem_gpu_mib, mem_obs) SELECT j.id, g, 'h', 'o' || g, now(), 'ended', 'succeeded', "
	   "now() - interval '1 hour', 'sdxl', 24576, jsonb_build_object('outcome', 'success', 'n', g) "
	   "FROM generate_series(1, 2000) g JOIN jobs j ON j.name = 'hist' || (g / 10) ORDER BY g", 0, NULL);
	for (int k = 0; k < 2; k++) {
		p[0] = k ? "7" : "1";
		p[1] = k ? "10006" : "6";
		q1("INSERT INTO attempts (job_id, number, config_hash, token, lease_expires_at, state, outcome, ended_at, "
		   "mem_arch, mem_gpu_mib, mem_obs) SELECT j.id, 2000 + g, 'h', 'f' || g, now(), 'ended', 'succeeded', "
		   "now() - interval '1 hour', 'flux', CASE WHEN g > 9986 THEN 40960 ELSE 24576 END, "
		   "jsonb_build_object('outcome', 'success', 'n', g, 'features', jsonb_build_object('res', 1024, "
		   "'batch', 1, 'grad_ckpt', true, 'low_vram', false), 'pad', repeat('x', 300)) "
		   "FROM generate_series($1::int, $2::int) g JOIN jobs j ON j.name = 'hist' || ((1999 + g) / 10) ORDER BY g",
		   2, p);
		if (!k)
			q1("ANALYZE attempts", 0, NULL);
	}
	q1("INSERT INTO memory_profiles (arch, gpu_class_mib, reset_at) VALUES ('flux', 40960, now())", 0, NULL);

	snprintf(plain, sizeof plain, "%s",
		 q1("SELECT string_agg(x.id::text, ',' ORDER BY x.id DESC) FROM (SELECT v.id FROM memory_observations v "
		    "WHERE v.mem_arch = 'flux' ORDER BY v.id DESC LIMIT 48) x", 0, NULL));
	TAP_STR_EQ(q1("SELECT string_agg(n.id::text, ',') FROM rung_memory_newest('flux', 48) n", 0, NULL), plain,
		   "the walk answers what the plain query answers, newest first");
	TAP_STR_EQ(q1("SELECT count(*) || ':' || min(n.mem_obs->>'n') || '..' || max(n.mem_obs->>'n') "
		      "FROM rung_memory_newest('flux', 48) n", 0, NULL), "48:9939..9986",
		   "48 observations, the 20 newest (reset 40 GiB class) stepped over");
	TAP_STR_EQ(q1("SELECT count(*) FROM rung_memory_newest('flux', 20000)", 0, NULL), "9986",
		   "a limit beyond the history: every observation that counts");
	TAP_STR_EQ(q1("SELECT count(*) FROM rung_memory_newest('sd3', 48)", 0, NULL), "0", "an arch with none: none");
	TAP_STR_EQ(q1("SELECT jsonb_array_length(rung_memory_ctx_observations('flux', 24576, NULL))", 0, NULL), "48",
		   "the CTX reads 48 of them");

	TAP_STR_EQ(q1("SELECT jsonb_array_length(rung_memory_ctx_observations('sdxl', 24576, NULL))", 0, NULL), "48",
		   "and 48 of the older arch");
	for (int k = 0; k < 2; k++) {
		char name[160];
		p[0] = k ? "flux" : "sdxl";
		b = blocks("SELECT rung_memory_ctx_observations($1, 24576, NULL)", 1, p);
		snprintf(name, sizeof name, "the CTX's observations of %s: %ld blocks (< 400; the 10,000 flux rows fill over "
			 "1,000)", p[0], b);
		TAP_OK(b > 0 && b < 400, name);
	}
	q1("ALTER TABLE attempts RESET (autovacuum_enabled)", 0, NULL);
	PQfinish(pg);
}

/* A queued job's place in the queue (rung_job_ahead, "ahead" in rung_job_placement): the queued
 * jobs before it in claim order, (priority, created_at, id). Four queued jobs, inserted in id order
 * A, B, C, D: B has the lowest priority number; C has A's priority and is older than A though its id
 * is larger (the near miss: created_at decides before id); D has A's priority and created_at and a
 * larger id. A running job of the lowest priority does not count. The claims then take them in the
 * order their counts say, each count going down by one per claim. */
static void test_queue_ahead(void)
{
	static const char *const names[] = { "B", "C", "A", "D" }; /* claim order */
	char wid[32];

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("SELECT rung_register('qa', 'h', '[{\"uuid\":\"QA-1\",\"memory_total_mib\":81920}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'qa'", 0, NULL));
	q1("INSERT INTO jobs (name, kind, priority, created_at, target_config, recovery) VALUES "
	   "('A', 'image', 100, now() - interval '10 minutes', '{\"x\":1}', '{}'), "
	   "('B', 'image', 50, now(), '{\"x\":1}', '{}'), "
	   "('C', 'image', 100, now() - interval '20 minutes', '{\"x\":1}', '{}'), "
	   "('D', 'image', 100, now() - interval '10 minutes', '{\"x\":1}', '{}'), "
	   "('R', 'image', 0, now() - interval '1 hour', '{\"x\":1}', '{}')", 0, NULL);
	q1("UPDATE jobs SET state = 'running' WHERE name = 'R'", 0, NULL);
	q1("UPDATE jobs SET created_at = (SELECT created_at FROM jobs WHERE name = 'A') WHERE name = 'D'", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(name || ':' || (rung_job_placement(j)->>'ahead'), ',' ORDER BY name) FROM jobs j "
		      "WHERE state = 'queued'", 0, NULL), "A:2,B:0,C:1,D:3",
		   "ahead: B (priority 50) first, then C (older than A, larger id), A, D (A's time, larger id)");
	TAP_STR_EQ(q1("SELECT rung_job_ahead(j)::text FROM jobs j WHERE name = 'R'", 0, NULL), "0",
		   "a running job is ahead of nobody (and nobody counts it)");
	for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
		char *items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"QA-1\",\"fresh\":true}]", wid);
		const char *p[1] = { k % 2 ? items : wid };
		char want[64], got[64];
		snprintf(want, sizeof want, "%s", names[k]);
		/* the claim round and the one-GPU claim in turn: both take the queue in this order */
		snprintf(got, sizeof got, "%s",
			 q1(k % 2 ? "SELECT j.name FROM rung_claim_batch($1::jsonb, 30) b JOIN jobs j ON j.id = b.job_id"
				  : "WITH c AS (SELECT rung_claim($1::bigint, 'QA-1', 30, NULL) AS r) "
				    "SELECT j.name FROM c JOIN jobs j ON j.id = (c.r->'lease'->>'job_id')::bigint", 1, p));
		free(items);
		TAP_STR_EQ(got, want, k % 2 ? "rung_claim_batch takes the job whose count was lowest"
					    : "rung_claim takes the job whose count was lowest");
		/* free the GPU for the next claim; the claimed job leaves the queue */
		q1("UPDATE attempts SET state = 'ended', outcome = 'failed', ended_at = now()", 0, NULL);
		snprintf(got, sizeof got, "%s", q1("SELECT coalesce(string_agg(name || ':' || rung_job_ahead(j), ',' ORDER BY name), '') "
						   "FROM jobs j WHERE state = 'queued'", 0, NULL));
		snprintf(want, sizeof want, "%s", k == 0 ? "A:1,C:0,D:2" : k == 1 ? "A:0,D:1" : k == 2 ? "D:0" : "");
		TAP_STR_EQ(got, want, "after that claim, each job left has one fewer ahead");
	}
	PQfinish(pg);
}

/* Where a queued job could run (rung_job_placement, sql/functions/55_memory.sql): the GPUs not
 * quarantined, on live workers, that meet its constraints as a claim reads them; those on a drained
 * host apart. */
static void test_placement(void)
{
	static const struct {
		const char *constraints, *want, *name;
	} cases[] = {
		{ "{}", "3:0:81920", "no constraints: every usable GPU on a live worker (not the quarantined one, not the gone worker's)" },
		{ "{\"min_gpu_memory_mib\": 40000}", "1:40000:81920", "a floor: the GPUs at or above it" },
		{ "{\"min_gpu_memory_mib\": 100000}", "0:100000:81920", "a floor above the fleet (the 160 GiB GPU's worker is gone): none" },
		{ "{\"exclude_gpus\": [\"PL-1\", \"PL-2\"]}", "1:0:81920", "excluded GPUs do not count" },
		{ "{\"exclude_workers\": [%s]}", "0:0:81920", "an excluded worker's GPUs do not count (as a number)" },
		{ "{\"exclude_workers\": [\"%s\"]}", "0:0:81920", "nor as a string" },
	};
	char wid[32];

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("SELECT rung_register('pl', 'h', '[{\"uuid\":\"PL-1\",\"memory_total_mib\":24576},"
	   "{\"uuid\":\"PL-2\",\"memory_total_mib\":24576},{\"uuid\":\"PL-3\",\"memory_total_mib\":81920},"
	   "{\"uuid\":\"PL-4\",\"memory_total_mib\":81920}]')", 0, NULL);
	q1("UPDATE gpus SET state = 'quarantined' WHERE uuid = 'PL-4'", 0, NULL);
	q1("SELECT rung_register('gone', 'h', '[{\"uuid\":\"PL-9\",\"memory_total_mib\":163840}]')", 0, NULL);
	q1("UPDATE workers SET last_seen_at = now() - interval '11 minutes' WHERE name = 'gone'", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'pl'", 0, NULL));
	TAP_STR_EQ(q1("SELECT rung_worker_live(id)::text || rung_worker_live(NULL)::text FROM workers WHERE name = 'gone'",
		      0, NULL), "falsefalse", "a worker not seen for 11 minutes is not live, nor is no worker");
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		char *cons = xasprintf(cases[k].constraints, wid); /* %s: the worker's id, where there is one */
		const char *p[1] = { cons };
		q1("DELETE FROM jobs", 0, NULL);
		q1("INSERT INTO jobs (name, kind, target_config, recovery, constraints) VALUES ('pl', 'image', '{\"x\":1}', '{}', "
		   "$1::jsonb)", 1, p);
		TAP_STR_EQ(q1("SELECT p->>'gpus' || ':' || (p->>'min_gpu_memory_mib') || ':' || (p->>'fleet_max_gpu_mib') "
			      "FROM (SELECT rung_job_placement(j) AS p FROM jobs j) x", 0, NULL), cases[k].want, cases[k].name);
		{
			/* /metrics counts it unplaceable exactly when the placement counts no GPU, drained ones included */
			json_t *live = json_loads(q1(sql_metrics_live, 0, NULL), 0, NULL);
			long none = cases[k].want[0] == '0';
			char name[200];
			snprintf(name, sizeof name, "/metrics: %s unplaceable (%s)", none ? "counted" : "not counted",
				 cases[k].name);
			TAP_OK(live && json_integer_value(json_object_get(live, "unplaceable")) == none, name);
			json_decref(live);
		}
		free(cons);
	}
	/* the big host in maintenance (drained by support, still seen): the job waits for it */
	q1("UPDATE workers SET state = 'draining', last_seen_at = now() WHERE name = 'gone'", 0, NULL);
	q1("UPDATE jobs SET constraints = '{\"min_gpu_memory_mib\": 100000}'", 0, NULL);
	TAP_STR_EQ(q1("SELECT p->>'gpus' || ':' || (p->>'draining_gpus') || ':' || (p->>'fleet_max_gpu_mib') "
		      "FROM (SELECT rung_job_placement(j) AS p FROM jobs j) x", 0, NULL), "0:1:163840",
		   "a drained host's GPU: none now, one once it is resumed; the fleet's largest still counts it");
	q1("UPDATE workers SET state = 'offline', last_seen_at = now() - interval '11 minutes' WHERE name = 'gone'", 0, NULL);
	{
		json_t *live = json_loads(q1(sql_metrics_live, 0, NULL), 0, NULL);
		TAP_OK(live && json_integer_value(json_object_get(live, "unplaceable")) == 1 &&
			       json_integer_value(json_object_get(live, "queue_depth")) == 1,
		       "/metrics' live counts: the one queued job is unplaceable");
		json_decref(live);
	}
	/* no usable GPU at all: a job without constraints has none either, and is counted */
	q1("UPDATE jobs SET constraints = '{}'", 0, NULL);
	q1("UPDATE gpus SET state = 'quarantined'", 0, NULL);
	{
		json_t *live = json_loads(q1(sql_metrics_live, 0, NULL), 0, NULL);
		TAP_OK(live && json_integer_value(json_object_get(live, "unplaceable")) == 1 &&
			       !strcmp(q1("SELECT rung_job_placement(j)->>'gpus' FROM jobs j", 0, NULL), "0"),
		       "/metrics: every GPU quarantined, a job without constraints is unplaceable, as its placement says");
		json_decref(live);
	}
	PQfinish(pg);
}

/* /metrics' history counts (sql/metrics_history.sql) as text, the lease waits' float sum rounded to
 * the millisecond (deleting rows changes the order it is summed in). Static buffer. */
static const char *history_counts(void)
{
	static char out[16384];
	const char *p[1] = { metrics_lease_wait_bounds_sql };
	PGresult *r = PQexecParams(pg, sql_metrics_history, 1, NULL, p, NULL, NULL, 0);
	json_t *doc = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ?
			      json_loads(PQgetvalue(r, 0, 0), 0, NULL) : NULL;
	json_t *lw = json_object_get(doc, "lease_wait");
	char *s;

	PQclear(r);
	out[0] = 0;
	if (!doc)
		return out;
	json_object_set_new(lw, "sum", json_integer((json_int_t)(json_number_value(json_object_get(lw, "sum")) * 1000 + 0.5)));
	s = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	snprintf(out, sizeof out, "%s", s ? s : "");
	free(s);
	json_decref(doc);
	return out;
}

/* Retention (rung_prune, sql/functions/75_prune.sql): jobs that ended more than N days ago go with
 * their attempts, events, escalations and webhook rows; a job still waiting for support, one that
 * ended recently, one still running, and every younger job stay. Batches are bounded, and the
 * search stops at the first young job (a few blocks among 10,000 of them). */
static void test_prune(void)
{
	/* name, state, created (days ago), finished (days ago, -1: not), escalation state or NULL */
	static const struct {
		const char *name, *state;
		int created, finished;
		const char *esc;
	} jobs[] = {
		{ "old-ok", "succeeded", 40, 39, "resolved" },
		{ "old-support", "failed", 40, 39, "open" },
		{ "old-acked", "failed", 40, 39, "acknowledged" },
		{ "old-ended-late", "succeeded", 40, 1, NULL },
		{ "old-running", "running", 40, -1, NULL },
		{ "old-cancelled", "cancelled", 35, 34, NULL },
		{ "young", "succeeded", 2, 1, NULL },
	};
	char sql[1024], before[16384];
	const char *p[2];
	long b;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox, metrics_pruned, "
	   "attempt_logs CASCADE", 0, NULL);
	for (size_t k = 0; k < sizeof jobs / sizeof jobs[0]; k++) {
		char created[16], finished[16];
		snprintf(created, sizeof created, "%d", jobs[k].created);
		snprintf(finished, sizeof finished, "%d", jobs[k].finished);
		p[0] = jobs[k].name;
		p[1] = jobs[k].state;
		snprintf(sql, sizeof sql,
			 "INSERT INTO jobs (name, kind, state, target_config, recovery, attempts_count, created_at, finished_at) "
			 "VALUES ($1, 'image', $2, '{\"x\":1}', '{}', 2, now() - interval '%s days', "
			 "CASE WHEN %s < 0 THEN NULL ELSE now() - interval '%s days' END)", created, finished, finished);
		q1(sql, 2, p);
		/* submitted (queued) when created; each attempt leased a minute later than the one before */
		q1("INSERT INTO event_log (job_id, kind, to_state, reason, at) SELECT id, 'submitted', 'queued', 'x', created_at "
		   "FROM jobs WHERE name = $1", 1, p);
		q1("WITH a AS (INSERT INTO attempts (job_id, number, config_hash, token, lease_expires_at, state, outcome, class, "
		   "rung, started_at, ended_at, resumed_step, resumed_gpu_s) SELECT j.id, n, 'h', $1 || n, now(), CASE WHEN $2 = 'running' AND n = 2 THEN 'running' "
		   "ELSE 'ended' END, CASE WHEN $2 = 'running' AND n = 2 THEN NULL ELSE 'failed' END, "
		   "CASE WHEN n = 1 THEN 'oom_train_early' ELSE 'nan_loss' END, "
		   "CASE WHEN n = 1 THEN 'batch_size' END, j.created_at + make_interval(mins => n), "
		   "CASE WHEN $2 = 'running' AND n = 2 THEN NULL ELSE j.created_at + make_interval(mins => n + 30 * n) END, "
		   "CASE WHEN n = 2 AND $2 <> 'running' THEN 500 END, "
		   /* resumed from step 500 at 0.2 s a step: 100 GPU seconds spared */
		   "CASE WHEN n = 2 AND $2 <> 'running' THEN 100 END "
		   "FROM jobs j, generate_series(1, 2) n WHERE j.name = $1 ORDER BY n RETURNING id, job_id) "
		   "INSERT INTO event_log (job_id, attempt_id, kind, reason) SELECT a.job_id, a.id, 'x', 'x' FROM a", 2, p);
		/* two owners, so that the GPU seconds per owner are kept per owner */
		q1("UPDATE jobs SET owner = CASE WHEN name LIKE 'old-c%' THEN 'team-b' ELSE 'team-a' END WHERE name = $1", 1, p);
		if (jobs[k].esc) {
			p[1] = jobs[k].esc;
			q1("INSERT INTO escalations (job_id, trigger, state) SELECT id, 'x', $2 FROM jobs WHERE name = $1", 2, p);
		}
	}
	q1("INSERT INTO attempt_logs (attempt_id, byte_from, byte_to, body) SELECT id, 0, 3, 'hi' || chr(10) FROM attempts",
	   0, NULL); /* each attempt's trainer output (migration 022) */
	TAP_STR_EQ(q1("SELECT count(*) || ':' || (SELECT count(*) FROM attempts) || ':' || (SELECT count(*) FROM event_log) "
		      "|| ':' || (SELECT count(*) FROM escalations) || ':' || (SELECT count(*) FROM webhook_outbox) FROM jobs",
		      0, NULL), "7:14:21:3:3", "seven jobs, two attempts and three events each, three escalations and their webhooks");
	TAP_STR_EQ(q1("SELECT rung_prune(0, 500, '{1}') || ':' || rung_prune(30, 0, '{1}')", 0, NULL), "0:0", "0 days or a limit of 0: nothing");
	p[0] = metrics_lease_wait_bounds_sql;
	snprintf(before, sizeof before, "%s", history_counts());
	TAP_STR_EQ(q1("SELECT rung_prune(30, 500, $1::float8[])", 1, p), "2", "30 days: two jobs pruned");
	TAP_STR_EQ(history_counts(), before, "/metrics' history counts are the same after the prune (metrics_pruned)");
	TAP_OK(strstr(before, "\"resumed\":{\"attempts\":6,\"gpu_s\":600,\"steps\":3000}") != NULL,
	       "the resumed attempts, their steps and the GPU seconds spared are among them (six ended attempts resumed "
	       "from step 500 at 0.2 s a step)");
	TAP_OK(strstr(before, "\"class\":\"oom_train_early\",\"gpu_s\":12600,") &&
		       strstr(before, "{\"outcome\":\"oom\",\"owner\":\"team-b\",\"s\":1800}"),
	       "the history has GPU seconds per outcome and class and per owner");
	TAP_STR_EQ(q1("SELECT string_agg(name, ',' ORDER BY id) FROM jobs", 0, NULL),
		   "old-support,old-acked,old-ended-late,old-running,young",
		   "kept: waiting for support (open, acknowledged), ended within 30 days, running, young");
	TAP_STR_EQ(q1("SELECT (SELECT count(*) FROM attempts WHERE job_id NOT IN (SELECT id FROM jobs)) || ':' || "
		      "(SELECT count(*) FROM event_log WHERE job_id NOT IN (SELECT id FROM jobs)) || ':' || "
		      "(SELECT count(*) FROM escalations) || ':' || (SELECT count(*) FROM webhook_outbox) || ':' || "
		      "(SELECT count(*) FROM attempts) || ':' || (SELECT count(*) FROM event_log) || ':' || "
		      "(SELECT count(*) FROM attempt_logs WHERE attempt_id NOT IN (SELECT id FROM attempts)) || ':' || "
		      "(SELECT count(*) FROM attempt_logs)", 0, NULL),
		   "0:0:2:2:10:15:0:10",
		   "their attempts (and their trainer output), events, resolved escalation and its webhook went with them; the rest stayed");
	TAP_STR_EQ(q1("SELECT rung_prune(30, 500, $1::float8[])", 1, p), "0", "again: nothing left to prune");
	/* quota webhook rows (migration 038) belong to no job: pruned by their age, even by a run with no job to prune */
	q1("INSERT INTO webhook_outbox (kind, payload, created_at, delivered_at) VALUES "
	   "('quota', '{\"event\": \"quota.over\"}', now() - interval '40 days', now() - interval '40 days'), "
	   "('quota', '{\"event\": \"quota.under\"}', now() - interval '1 day', NULL)", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_prune(30, 500, $1::float8[])", 1, p), "0", "a run with quota rows: no job pruned");
	TAP_STR_EQ(q1("SELECT string_agg(payload->>'event', ',') FROM webhook_outbox WHERE kind = 'quota'", 0, NULL), "quota.under",
		   "the quota row older than 30 days went, the recent one stayed");
	q1("DELETE FROM webhook_outbox WHERE kind = 'quota'", 0, NULL);
	q1("UPDATE escalations SET state = 'resolved'", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_prune(30, 1, $1::float8[]) || ':' || rung_prune(30, 1, $1::float8[]) || ':' || "
		      "rung_prune(30, 1, $1::float8[])", 1, p), "1:1:0",
		   "once support resolved them: pruned, one per call with a limit of 1");
	TAP_STR_EQ(history_counts(), before, "and the history counts still the same");

	/* 10,000 young jobs: finding nothing to prune reads a few blocks */
	q1("INSERT INTO jobs (name, kind, state, target_config, recovery, finished_at) SELECT 'y' || g, 'image', 'succeeded', "
	   "'{\"x\":1}', '{}', now() FROM generate_series(1, 10000) g", 0, NULL);
	q1("ANALYZE jobs", 0, NULL); /* as autovacuum keeps it (jobs: analyze_scale_factor 0.02); with none the walk's
				      * cursor may sort the table instead, once per --prune-interval-ms */
	{
		const char *pp[3] = { "30", "500", metrics_lease_wait_bounds_sql };
		b = blocks("SELECT rung_prune($1::int, $2::int, $3::float8[])", 3, pp);
	}
	few_blocks(b, "retention among 10,000 young jobs and an old running one");
	PQfinish(pg);
}

/* Two fences of migration 011's batches, each a regression a review found:
 * - a claim round whose later waiter falls back to rung_claim() succeeds, and the fallback does not
 *   take the job the round gave an earlier waiter (this statement's own lock does not make SKIP
 *   LOCKED skip it: since migration 021 the round passes its jobs as p_skip; before, the later
 *   waiter took it and the earlier one parked, and before that the statement failed on
 *   attempts_one_running when the set-wise start no longer checked that its jobs were queued);
 * - a stale heartbeat or finish does not lock an attempt it does not touch (it waited behind
 *   whoever held the row). */
static void test_fences_011(void)
{
	const char *p[2];
	char *items, w1[32], w2[32], id[32], tok[80], want[48];
	PGconn *hold;
	PGresult *r;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("SELECT rung_register('f1', 'h', '[{\"uuid\":\"F-1\",\"memory_total_mib\":80000}]')", 0, NULL);
	q1("SELECT rung_register('f2', 'h', '[{\"uuid\":\"F-2\",\"memory_total_mib\":80000}]')", 0, NULL);
	snprintf(w1, sizeof w1, "%s", q1("SELECT id FROM workers WHERE name = 'f1'", 0, NULL));
	snprintf(w2, sizeof w2, "%s", q1("SELECT id FROM workers WHERE name = 'f2'", 0, NULL));
	q1("INSERT INTO jobs (name, kind, target_config, recovery, priority) VALUES ('any', 'image', '{\"x\":1}', '{}', 1)",
	   0, NULL);
	q1("INSERT INTO jobs (name, kind, target_config, recovery, priority, constraints) VALUES ('big', 'image', "
	   "'{\"x\":2}', '{}', 2, '{\"min_gpu_memory_mib\":100000}')", 0, NULL);
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"F-1\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"F-2\",\"fresh\":true}]", w1, w2);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || (SELECT name FROM jobs WHERE id = b.job_id), ',') "
		      "FROM rung_claim_batch($1::jsonb, 30) b", 1, p),
		   "0:ok:any", "claim fallback: the round succeeds, the first waiter keeps its job (the fallback skips it)");
	snprintf(want, sizeof want, "1:%s", w1);
	TAP_STR_EQ(q1("SELECT count(*) || ':' || min(worker_id) FROM attempts WHERE state = 'running'", 0, NULL), want,
		   "one running attempt, on the first worker");
	free(items);

	/* end it, then let another session hold its row: stale calls must not wait for it */
	snprintf(id, sizeof id, "%s", q1("SELECT id FROM attempts", 0, NULL));
	snprintf(tok, sizeof tok, "%s", q1("SELECT token FROM attempts", 0, NULL));
	q1("UPDATE attempts SET state = 'ended', outcome = 'failed', ended_at = now()", 0, NULL);
	hold = PQconnectdb(url);
	PQclear(PQexec(hold, "BEGIN"));
	r = PQexecParams(hold, "SELECT 1 FROM attempts WHERE id = $1::bigint FOR UPDATE", 1, NULL,
			 (const char *const[]){ id }, NULL, NULL, 0);
	TAP_OK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1, "another session holds the ended attempt's row");
	PQclear(r);
	q1("SET lock_timeout = '2s'", 0, NULL);
	items = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"step\":9}]", id, tok);
	p[0] = items;
	p[1] = "30";
	TAP_STR_EQ(q1("SELECT 'rows:' || count(*) FROM rung_heartbeat_batch($1::jsonb, $2::int)", 2, p), "rows:0",
		   "a heartbeat for the ended attempt is fenced without waiting for its row");
	free(items);
	items = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"facts\":{},\"decision\":{\"class\":\"success\","
			  "\"rule\":\"r\",\"reason\":\"ok\",\"job_state\":\"succeeded\"}}]", id, tok);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT 'rows:' || count(*) FROM rung_finish_apply_batch($1::jsonb)", 1, p), "rows:0",
		   "a finish for the ended attempt is fenced without waiting for its row");
	free(items);
	q1("RESET lock_timeout", 0, NULL);
	PQclear(PQexec(hold, "ROLLBACK"));
	PQfinish(hold);
	PQfinish(pg);
}

/* Heartbeats that need not move the stored expiry do not write (migration 015, sql/functions/50_heartbeat_batch.sql):
 * after an attempt's first heartbeat (which writes, so its progress is on record), one within the first third of
 * its lease is answered after the fence check and leaves the row as it was (same xmin, same expiry, progress not
 * stored); one closer than two thirds of a lease to its expiry renews it.
 * With a 3 s lease and heartbeats every 0.3 s for 4.5 s (longer than the lease), the reaper, run after each
 * heartbeat, never takes the attempt, and only a fraction of the heartbeats wrote. A cancel requested while
 * heartbeats are skipping reaches the very next heartbeat. */
static void test_heartbeat_skip(void)
{
	const char *p[2];
	char *items, id[32], tok[80], x0[64], x1[64], name[160];
	int k, writes = 0, beats = 0, reaped = 0;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("SELECT rung_register('hs', 'h', '[{\"uuid\":\"H-1\",\"memory_total_mib\":80000}]')", 0, NULL);
	q1("INSERT INTO jobs (name, kind, target_config, recovery) VALUES ('hb', 'image', '{\"x\":1}', '{}')", 0, NULL);
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"H-1\",\"fresh\":true}]",
			  q1("SELECT id FROM workers WHERE name = 'hs'", 0, NULL));
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(status, ',') FROM rung_claim_batch($1::jsonb, 30)", 1, p), "ok", "leased for 30 s");
	TAP_STR_EQ(q1("SELECT array_to_string(proconfig, ',') FROM pg_proc WHERE proname = 'rung_claim_pool_round'", 0, NULL),
		   "plan_cache_mode=force_generic_plan",
		   "the claim round's statements use generic plans, planned once per session (docs/PERFORMANCE.md, round 8)");
	free(items);
	snprintf(id, sizeof id, "%s", q1("SELECT id FROM attempts", 0, NULL));
	snprintf(tok, sizeof tok, "%s", q1("SELECT token FROM attempts", 0, NULL));
	items = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"step\":7,\"phase\":\"train\"}]", id, tok);
	p[0] = items;
	p[1] = "30";

	q1("BEGIN", 0, NULL); /* to read the transaction's synchronous_commit before it commits */
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || cancel, ',') FROM rung_heartbeat_batch($1::jsonb, $2::int)", 2, p),
		   "0:false", "an attempt's first heartbeat is answered");
	TAP_STR_EQ(q1("SHOW synchronous_commit", 0, NULL), "off",
		   "its write is progress alone (the lease is not due): committed without waiting for the WAL flush");
	q1("COMMIT", 0, NULL);
	TAP_STR_EQ(q1("SELECT step || ':' || phase || ':' || (last_heartbeat_at IS NOT NULL) FROM attempts", 0, NULL),
		   "7:train:true", "and writes: its progress is on record however short the attempt");
	free(items);
	items = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"step\":8}]", id, tok);
	p[0] = items;
	snprintf(x0, sizeof x0, "%s", q1("SELECT xmin::text || '/' || lease_expires_at FROM attempts", 0, NULL));
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || cancel, ',') FROM rung_heartbeat_batch($1::jsonb, $2::int)", 2, p),
		   "0:false", "a later heartbeat in the lease's first third is answered");
	snprintf(x1, sizeof x1, "%s", q1("SELECT xmin::text || '/' || lease_expires_at FROM attempts", 0, NULL));
	TAP_STR_EQ(x1, x0, "and does not write the attempt (same xmin, same expiry)");
	TAP_STR_EQ(q1("SELECT step::text FROM attempts", 0, NULL), "7", "its progress is not stored");
	TAP_STR_EQ(q1("SELECT 'rows:' || count(*) FROM rung_heartbeat_batch(('[{\"i\":0,\"id\":' || $1 || ',\"token\":\"stale\"}]')::jsonb, 30)",
		      1, (const char *const[]){ id }), "rows:0", "a stale token is still fenced out");

	q1("UPDATE jobs SET cancel_requested = true", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || cancel, ',') FROM rung_heartbeat_batch($1::jsonb, $2::int)", 2, p),
		   "0:true", "a cancel requested meanwhile reaches the next heartbeat, written or not");
	q1("UPDATE jobs SET cancel_requested = false", 0, NULL);

	q1("UPDATE attempts SET lease_expires_at = now() + interval '19 seconds'", 0, NULL);
	snprintf(x0, sizeof x0, "%s", q1("SELECT xmin::text FROM attempts", 0, NULL));
	q1("BEGIN", 0, NULL);
	q1("SELECT count(*) FROM rung_heartbeat_batch($1::jsonb, $2::int)", 2, p);
	TAP_STR_EQ(q1("SHOW synchronous_commit", 0, NULL), "on", "a lease renewal due commits synchronously");
	q1("COMMIT", 0, NULL);
	TAP_OK(strcmp(q1("SELECT xmin::text FROM attempts", 0, NULL), x0) != 0, "under two thirds of a lease left: written");
	TAP_STR_EQ(q1("SELECT (lease_expires_at > now() + interval '29 seconds') || ':' || step || ':' || phase FROM attempts",
		      0, NULL), "true:8:train", "the lease runs a full period again, progress stored");

	/* a 3 s lease, a heartbeat every 0.3 s for 4.5 s, the reaper after each one */
	q1("UPDATE attempts SET lease_expires_at = now() + interval '3 seconds'", 0, NULL);
	p[1] = "3";
	for (k = 0; k < 15; k++) {
		snprintf(x0, sizeof x0, "%s", q1("SELECT xmin::text FROM attempts", 0, NULL));
		beats += strcmp(q1("SELECT count(*) FROM rung_heartbeat_batch($1::jsonb, $2::int)", 2, p), "1") == 0;
		writes += strcmp(q1("SELECT xmin::text FROM attempts", 0, NULL), x0) != 0;
		reaped += strcmp(q1("SELECT jsonb_array_length(rung_reap(10))", 0, NULL), "0") != 0;
		usleep(300 * 1000); /* the heartbeat period: a lease is about time passing */
	}
	snprintf(name, sizeof name, "a 3 s lease heartbeated for 4.5 s: every heartbeat answered (%d), never reaped (%d)",
		 beats, reaped);
	TAP_OK(beats == 15 && reaped == 0, name);
	snprintf(name, sizeof name, "only the heartbeats in the lease's last two thirds wrote (%d of 15)", writes);
	TAP_OK(writes >= 2 && writes <= 8, name);
	TAP_STR_EQ(q1("SELECT state || ':' || (lease_expires_at > now() + interval '1 second') FROM attempts", 0, NULL),
		   "running:true", "still running, with at least a third of a lease left");
	free(items);
	PQfinish(pg);
}

/* The claim round's rules per waiter, checked set-wise since migration 012: a job excluded from a
 * worker (by id, as a number or a string) or from a GPU, one whose current config failed on this
 * GPU, one needing more memory, and a quarantined GPU; a parked waiter far past the round's first
 * slice still gets a job the waiters before it could not take; and a wake-up round with one job and
 * seven parked waiters reads (and touches) only the one it serves. */
static void test_claim_rules(void)
{
	const char *p[2];
	char *items, wid[8][32], name[8];
	char *arr;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	for (int k = 0; k < 8; k++) {
		/* R-3, R-5 and R-6 are too small for the job below; the others refused are refused by one rule each */
		char *gpus = xasprintf("[{\"uuid\":\"R-%d\",\"memory_total_mib\":%d}]", k,
				       k == 3 || k == 5 || k == 6 ? 24000 : 80000);
		const char *rp[2] = { name, gpus };
		snprintf(name, sizeof name, "r%d", k);
		q1("SELECT rung_register($1, 'h', $2::jsonb)", 2, rp);
		snprintf(wid[k], sizeof wid[k], "%s", q1("SELECT id FROM workers WHERE name = $1", 1, rp));
		free(gpus);
	}
	q1("UPDATE gpus SET state = 'quarantined' WHERE uuid = 'R-4'", 0, NULL);
	/* one job that only R-7 (worker r7) may take: every other waiter is refused by one rule */
	arr = xasprintf("{\"exclude_workers\":[%s,\"%s\"],\"exclude_gpus\":[\"R-2\"],\"min_gpu_memory_mib\":30000}",
			wid[0], wid[1]);
	p[0] = arr;
	q1("INSERT INTO jobs (name, kind, target_config, recovery, constraints) VALUES ('only7', 'image', '{\"x\":1}', '{}', $1::jsonb)",
	   1, p);
	free(arr);
	/* waiters 0..6 are each refused: 0 and 1 excluded (number, string), 2 excluded GPU, 3 too small,
	 * 4 quarantined, 5 and 6 too small; 7 takes it. All parked but the first: the round's first slice
	 * is one fresh waiter plus one parked (one candidate). */
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"R-0\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"R-1\",\"fresh\":false},"
			  "{\"i\":2,\"worker\":%s,\"gpu\":\"R-2\",\"fresh\":false},"
			  "{\"i\":3,\"worker\":%s,\"gpu\":\"R-3\",\"fresh\":false},"
			  "{\"i\":4,\"worker\":%s,\"gpu\":\"R-4\",\"fresh\":false},"
			  "{\"i\":5,\"worker\":%s,\"gpu\":\"R-5\",\"fresh\":false},"
			  "{\"i\":6,\"worker\":%s,\"gpu\":\"R-6\",\"fresh\":false},"
			  "{\"i\":7,\"worker\":%s,\"gpu\":\"R-7\",\"fresh\":false}]",
			  wid[0], wid[1], wid[2], wid[3], wid[4], wid[5], wid[6], wid[7]);
	p[0] = items;
	p[1] = "30";
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',' ORDER BY i) FROM rung_claim_batch($1::jsonb, $2::int)", 2, p),
		   "0:none,7:ok", "claim rules: excluded workers (number, string), GPU, memory, quarantine; the 8th waiter leases");
	/* it fails on R-7 with this config: R-7 may not have it again, until the config changes */
	q1("UPDATE attempts SET state = 'ended', outcome = 'failed', ended_at = now()", 0, NULL);
	q1("UPDATE jobs SET state = 'queued', constraints = '{}'", 0, NULL);
	free(items);
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"R-7\",\"fresh\":true}]", wid[7]);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',') FROM rung_claim_batch($1::jsonb, $2::int)", 2, p),
		   "0:none", "claim rules: not offered again to the GPU its current config failed on");
	free(items);
	/* unless the job was retried since (sql/functions/22_job_ops.sql: the GPU or host changed), in
	 * rung_claim (the fallback) and in the set-wise rule */
	{
		const char *cp[1] = { wid[7] };
		q1("UPDATE jobs SET recovery_state = jsonb_build_object('budget_from', attempts_count)", 0, NULL);
		TAP_STR_EQ(q1("SELECT rung_claim($1::bigint, 'R-7', 30, NULL)->>'status'", 1, cp), "ok",
			   "claim rules: after a retry rung_claim offers it to that GPU again");
		q1("UPDATE attempts SET state = 'ended', outcome = 'failed', ended_at = now() WHERE state = 'running'", 0, NULL);
		q1("UPDATE jobs SET state = 'queued', recovery_state = '{}'", 0, NULL);
		TAP_STR_EQ(q1("SELECT rung_claim($1::bigint, 'R-7', 30, NULL)->>'status'", 1, cp), "none",
			   "claim rules: rung_claim's rule without a retry (near miss)");
		q1("UPDATE jobs SET recovery_state = jsonb_build_object('budget_from', attempts_count)", 0, NULL);
		items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"R-7\",\"fresh\":true},"
				  "{\"i\":1,\"worker\":%s,\"gpu\":\"R-none\",\"fresh\":false}]", wid[7], wid[7]);
		p[0] = items;
		TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',' ORDER BY i) FROM rung_claim_batch($1::jsonb, $2::int)", 2, p),
			   "0:ok", "claim rules: after a retry the set-wise rule offers it to that GPU again");
		free(items);
		q1("UPDATE attempts SET state = 'ended', outcome = 'failed', ended_at = now() WHERE state = 'running'", 0, NULL);
		q1("UPDATE jobs SET state = 'queued', recovery_state = '{}'", 0, NULL);
	}
	/* (a second waiter, on no GPU, keeps the round from falling back to rung_claim: the set-wise rule
	 * itself must offer the job) */
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"R-6\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"R-none\",\"fresh\":false}]", wid[6], wid[6]);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',' ORDER BY i) FROM rung_claim_batch($1::jsonb, $2::int)", 2, p),
		   "0:ok", "but offered to another GPU");
	q1("UPDATE attempts SET state = 'ended', outcome = 'failed', ended_at = now() WHERE state = 'running'", 0, NULL);
	q1("UPDATE jobs SET state = 'queued', current_config = '{\"x\":2}'", 0, NULL);
	free(items);
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"R-7\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"R-none\",\"fresh\":false}]", wid[7], wid[7]);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',' ORDER BY i) FROM rung_claim_batch($1::jsonb, $2::int)", 2, p),
		   "0:ok", "and to the GPU it failed on once its config changed");
	free(items);

	/* a wake-up round: one job, seven parked waiters */
	q1("UPDATE attempts SET state = 'ended', outcome = 'succeeded', ended_at = now() WHERE state = 'running'", 0, NULL);
	q1("UPDATE jobs SET state = 'succeeded'", 0, NULL);
	q1("INSERT INTO jobs (name, kind, target_config, recovery) VALUES ('wake', 'image', '{\"x\":3}', '{}')", 0, NULL);
	q1("UPDATE workers SET last_seen_at = '2000-01-01'", 0, NULL);
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"R-0\",\"fresh\":false},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"R-1\",\"fresh\":false},"
			  "{\"i\":2,\"worker\":%s,\"gpu\":\"R-2\",\"fresh\":false},"
			  "{\"i\":3,\"worker\":%s,\"gpu\":\"R-3\",\"fresh\":false},"
			  "{\"i\":5,\"worker\":%s,\"gpu\":\"R-5\",\"fresh\":false},"
			  "{\"i\":6,\"worker\":%s,\"gpu\":\"R-6\",\"fresh\":false},"
			  "{\"i\":7,\"worker\":%s,\"gpu\":\"R-7\",\"fresh\":false}]",
			  wid[0], wid[1], wid[2], wid[3], wid[5], wid[6], wid[7]);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',') FROM rung_claim_batch($1::jsonb, $2::int)", 2, p),
		   "0:ok", "wake-up round: the first parked waiter leases, the others get no row");
	TAP_STR_EQ(q1("SELECT count(*) FROM workers WHERE last_seen_at = '2000-01-01'", 0, NULL), "7",
		   "and only its worker was read and touched");
	free(items);
	PQfinish(pg);
}

/* rung_start_bigger (sql/functions/43_start_lower.sql): a claimed first attempt at the target is
 * handed back for a bigger GPU in one transaction (attempt gone, count back, job queued with the
 * memory floor merged into its constraints, the story in recovery_state and an event, no NOTIFY);
 * its fence (token, running, still the target) changes nothing when it does not hold, and the
 * small GPU cannot claim the job again while the big one can, as attempt 1 at the target. */
static void test_start_bigger(void)
{
	const char *p[5];
	char ids[4][32], toks[4][80], wid[32], last[64] = "";
	char *items;
	const char *data = "{\"attempt\": 1, \"gpu_mib\": 24000, \"min_gpu_memory_mib\": 24001, \"reason\": \"why\"}";

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("LISTEN rung_jobs", 0, NULL);
	q1("SELECT rung_register('wbig', 'h', '[{\"uuid\":\"S-1\",\"memory_total_mib\":24000},"
	   "{\"uuid\":\"S-2\",\"memory_total_mib\":24000},{\"uuid\":\"S-3\",\"memory_total_mib\":24000},"
	   "{\"uuid\":\"S-4\",\"memory_total_mib\":24000},{\"uuid\":\"L-1\",\"memory_total_mib\":80000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wbig'", 0, NULL));
	q1("INSERT INTO jobs (name, kind, priority, target_config, recovery, constraints) VALUES "
	   "('nb1', 'image', 1, '{\"x\":1}', '{}', '{\"exclude_gpus\":[\"Z-9\"]}'), "
	   "('nb2', 'image', 2, '{\"x\":2}', '{}', '{}'), ('nb3', 'image', 3, '{\"x\":3}', '{}', '{}'), "
	   "('nb4', 'image', 4, '{\"x\":4}', '{}', '{\"min_gpu_memory_mib\": 20000}')", 0, NULL);
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"S-1\",\"fresh\":true},{\"i\":1,\"worker\":%s,\"gpu\":\"S-2\",\"fresh\":true},"
			  "{\"i\":2,\"worker\":%s,\"gpu\":\"S-3\",\"fresh\":true},{\"i\":3,\"worker\":%s,\"gpu\":\"S-4\",\"fresh\":true}]",
			  wid, wid, wid, wid);
	p[0] = items;
	p[1] = "30";
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status || ':' || number, ',' ORDER BY i) FROM rung_claim_batch($1::jsonb, $2::int)",
		      2, p), "0:ok:1,1:ok:1,2:ok:1,3:ok:1", "start bigger: four first attempts claimed on 24000 MiB GPUs");
	free(items);
	for (int k = 0; k < 4; k++) {
		char name[8];
		const char *np[1] = { name };

		snprintf(name, sizeof name, "nb%d", k + 1);
		snprintf(ids[k], sizeof ids[k], "%s", q1("SELECT a.id FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = $1", 1, np));
		snprintf(toks[k], sizeof toks[k], "%s", q1("SELECT a.token FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = $1", 1, np));
	}
	rung_jobs_notifies(last);

	/* the fence: a wrong token, an attempt already lowered, one not running */
	p[0] = ids[0];
	p[1] = "not-the-token";
	p[2] = "24001";
	p[3] = "why";
	p[4] = data;
	TAP_STR_EQ(q1("SELECT rung_start_bigger($1::bigint, $2, $3::int, $4, $5::jsonb)::text", 5, p), "false",
		   "start bigger: a wrong token: false");
	p[0] = ids[1];
	p[1] = toks[1];
	p[2] = "{\"x\":0}";
	p[3] = "lower";
	p[4] = "{}";
	TAP_STR_EQ(q1("SELECT rung_start_lower($1::bigint, $2, $3::jsonb, $4, $5::jsonb)", 5, p), "{\"x\": 0}",
		   "start bigger: (nb2's attempt started lower first)");
	p[2] = "24001";
	p[3] = "why";
	p[4] = data;
	TAP_STR_EQ(q1("SELECT rung_start_bigger($1::bigint, $2, $3::int, $4, $5::jsonb)::text", 5, p), "false",
		   "start bigger: an attempt that no longer runs the target: false");
	q1("UPDATE attempts SET state = 'ended', outcome = 'failed', ended_at = now() WHERE id = $1::bigint", 1,
	   (const char *[]){ ids[2] });
	p[0] = ids[2];
	p[1] = toks[2];
	TAP_STR_EQ(q1("SELECT rung_start_bigger($1::bigint, $2, $3::int, $4, $5::jsonb)::text", 5, p), "false",
		   "start bigger: an attempt that is not running: false");
	TAP_STR_EQ(q1("SELECT string_agg(j.name || ':' || j.state || ':' || j.attempts_count || ':' || "
		      "coalesce(j.constraints->>'min_gpu_memory_mib', '-') || ':' || (j.recovery_state ? 'started_bigger') || ':' || "
		      "(SELECT count(*) FROM attempts a WHERE a.job_id = j.id), ',' ORDER BY j.name) FROM jobs j WHERE j.name < 'nb4'",
		      0, NULL),
		   "nb1:running:1:-:false:1,nb2:running:1:-:false:1,nb3:running:1:-:false:1",
		   "start bigger: refused calls changed no job, count, constraint, story or attempt");
	TAP_STR_EQ(q1("SELECT count(*) FROM events WHERE kind = 'started_bigger'", 0, NULL), "0", "and logged no event");

	/* nb1: handed back */
	p[0] = ids[0];
	p[1] = toks[0];
	TAP_STR_EQ(q1("SELECT rung_start_bigger($1::bigint, $2, $3::int, $4, $5::jsonb)::text", 5, p), "true",
		   "start bigger: the running first attempt at the target: true");
	TAP_STR_EQ(q1("SELECT j.state || ':' || j.attempts_count || ':' || j.constraints::text || ':' || "
		      "(j.recovery_state->'started_bigger' = $5::jsonb) || ':' || coalesce(j.next_action, '-') || ':' || "
		      "(j.current_config IS NULL) || ':' || (SELECT count(*) FROM attempts a WHERE a.job_id = j.id) "
		      "FROM jobs j WHERE j.name = 'nb1' AND $1::text IS NOT NULL AND $2::text IS NOT NULL AND $3::text IS NOT NULL "
		      "AND $4::text IS NOT NULL", 5, p),
		   "queued:0:{\"exclude_gpus\": [\"Z-9\"], \"exclude_workers\": [], \"min_gpu_memory_mib\": 24001}:true:"
		   "run the target config on a GPU with at least 24001 MiB:true:0",
		   "the attempt is gone, the job queued at its target with the floor merged and the story kept");
	TAP_STR_EQ(q1("SELECT string_agg(e.kind || ':' || e.from_state || '>' || e.to_state || ':' || e.reason || ':' || "
		      "(e.attempt_id = $1::bigint) || ':' || (e.data = $2::jsonb), ',') FROM events e JOIN jobs j ON j.id = e.job_id "
		      "WHERE j.name = 'nb1' AND e.kind NOT IN ('submitted')", 2, (const char *[]){ ids[0], data }),
		   "started_bigger:running>queued:why:true:true", "one started_bigger event (the leased one went with the attempt)");
	TAP_STR_EQ(q1("SELECT rung_start_bigger($1::bigint, $2, $3::int, $4, $5::jsonb)::text", 5, p), "false",
		   "start bigger: called again: false");
	TAP_INT_EQ(rung_jobs_notifies(last), 0, "start bigger: no NOTIFY (rungd announces after the commit)");

	/* nb4: a floor already above the answer's stays; a cancel asked meanwhile cancels */
	q1("UPDATE jobs SET constraints = '{\"min_gpu_memory_mib\": 30000}', cancel_requested = true WHERE name = 'nb4'", 0, NULL);
	p[0] = ids[3];
	p[1] = toks[3];
	TAP_STR_EQ(q1("SELECT rung_start_bigger($1::bigint, $2, $3::int, $4, $5::jsonb)::text", 5, p), "true",
		   "start bigger: a job with a cancel asked");
	TAP_STR_EQ(q1("SELECT state || ':' || (constraints->>'min_gpu_memory_mib') || ':' || (finished_at IS NOT NULL) || ':' || "
		      "(SELECT to_state FROM events e WHERE e.job_id = j.id AND e.kind = 'started_bigger') FROM jobs j WHERE name = 'nb4'",
		      0, NULL),
		   "cancelled:30000:true:cancelled", "is cancelled, as rung_release does; a higher floor is kept");

	/* no loop: the small GPU may not take nb1 again, the big one takes it as attempt 1 at the target */
	q1("UPDATE attempts SET state = 'ended', outcome = 'succeeded', ended_at = now() WHERE state = 'running'", 0, NULL);
	q1("UPDATE jobs SET state = 'succeeded' WHERE name IN ('nb2', 'nb3')", 0, NULL);
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"S-1\",\"fresh\":true}]", wid);
	p[0] = items;
	p[1] = "30";
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',') FROM rung_claim_batch($1::jsonb, $2::int)", 2, p), "0:none",
		   "start bigger: the 24000 MiB GPU cannot claim the job again");
	free(items);
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"L-1\",\"fresh\":true}]", wid);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status || ':' || (SELECT name FROM jobs WHERE id = b.job_id) || ':' || "
		      "number || ':' || coalesce(init_gpu_mib::text, '-'), ',') FROM rung_claim_batch($1::jsonb, $2::int) b", 2, p),
		   "0:ok:nb1:1:80000", "the 80000 MiB GPU claims it as attempt 1, with the first-attempt check's columns");
	TAP_STR_EQ(q1("SELECT (a.config IS NULL) || ':' || (j.current_config IS NULL) FROM attempts a JOIN jobs j ON j.id = a.job_id "
		      "WHERE j.name = 'nb1' AND a.state = 'running'", 0, NULL), "true:true", "at the target");
	free(items);
	PQfinish(pg);
}

/* rung_retry (sql/functions/22_job_ops.sql): a failed job queued again from its target loses its
 * config changes, constraints, result and lost count, keeps its history, has its escalation
 * resolved and an event retried; /metrics' history counts do not fall (the ending stays counted
 * through metrics_pruned); its next attempt is a first attempt at the target again, so the claim
 * hands rungd the first-attempt check's columns. A retry from the current config keeps both;
 * jobs in other states are a conflict, a missing one NULL, an unknown "from" an error. */
static void test_retry(void)
{
	const char *p[2];
	char jid[32], before[4096], *items;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox, metrics_pruned "
	   "CASCADE", 0, NULL);
	q1("SELECT rung_register('wr', 'h', '[{\"uuid\":\"T-1\",\"memory_total_mib\":80000}]')", 0, NULL);
	q1("INSERT INTO jobs (name, kind, target_config, recovery) VALUES ('rt', 'image', '{\"x\":1}', '{}')", 0, NULL);
	snprintf(jid, sizeof jid, "%s", q1("SELECT id FROM jobs WHERE name = 'rt'", 0, NULL));
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"T-1\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"T-none\",\"fresh\":false}]",
			  q1("SELECT id FROM workers WHERE name = 'wr'", 0, NULL), q1("SELECT id FROM workers WHERE name = 'wr'", 0, NULL));
	p[0] = items;
	p[1] = "30";
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status || ':' || number || ':' || coalesce(init_gpu_mib::text, '-'), ',') "
		      "FROM rung_claim_batch($1::jsonb, $2::int)", 2, p), "0:ok:1:80000", "retry: attempt 1, with the first-attempt check");
	/* it fails; recovery had lowered the config and raised a floor; support was called */
	q1("UPDATE attempts SET state = 'ended', outcome = 'failed', class = 'oom_train_early', ended_at = now()", 0, NULL);
	q1("UPDATE jobs SET state = 'failed', finished_at = now(), current_config = '{\"x\":2}', lost_count = 2, "
	   "constraints = '{\"min_gpu_memory_mib\": 90000}', result = '{\"class\": \"oom_train_early\"}', "
	   "recovery_state = '{\"ladder_position\": 3}'", 0, NULL);
	q1("INSERT INTO escalations (job_id, trigger) SELECT id, 'budget_exhausted' FROM jobs", 0, NULL);
	q1("INSERT INTO escalations (job_id, trigger) SELECT id, 'gpu_quarantined' FROM jobs", 0, NULL);
	snprintf(before, sizeof before, "%s", history_counts());
	p[0] = jid;
	TAP_STR_EQ(q1("SELECT rung_retry($1::bigint, 'target', 'GPU swapped', 'oncall')->>'status'", 1, p), "ok",
		   "retry: a failed job, from the target: ok");
	TAP_STR_EQ(history_counts(), before, "retry: /metrics' history counts are the same (the ending stays counted)");
	TAP_STR_EQ(q1("SELECT state || ':' || (current_config IS NULL) || ':' || constraints::text || ':' || lost_count || ':' || "
		      "(finished_at IS NULL) || ':' || (result IS NULL) || ':' || (recovery_state->>'budget_from') || ':' || "
		      "coalesce(recovery_state->>'ladder_position', '-') || ':' || (recovery_state->'retried'->>'by') FROM jobs", 0, NULL),
		   "queued:true:{}:0:true:true:1:-:oncall",
		   "retry from the target: the target config, no constraints, no lost count or result, a fresh state, budget_from 1");
	TAP_STR_EQ(q1("SELECT string_agg(trigger || ':' || state || ':' || coalesce(note, '-'), ',' ORDER BY id) FROM escalations",
		      0, NULL),
		   "budget_exhausted:resolved:retried by oncall from the target config: GPU swapped,gpu_quarantined:open:-",
		   "retry: the job's own escalation is resolved with the note; the GPU's stays open for support");
	TAP_STR_EQ(q1("SELECT string_agg(kind || ':' || coalesce(from_state, '-') || '>' || to_state, ',' ORDER BY id) "
		      "FROM events WHERE kind IN ('retried', 'escalation_resolved')", 0, NULL),
		   "escalation_resolved:->resolved,retried:failed>queued", "retry: the events escalation_resolved and retried");
	TAP_STR_EQ(q1("SELECT rung_retry($1::bigint, 'target', NULL, NULL)->>'status'", 1, p), "conflict",
		   "retry: a queued job is a conflict");
	TAP_STR_EQ(q1("SELECT coalesce(rung_retry(-1, NULL, NULL, NULL)::text, 'null')", 0, NULL), "null", "retry: no such job: NULL");
	TAP_STR_EQ(q1("SELECT rung_retry($1::bigint, 'bottom', NULL, NULL)", 1, p), "", "retry: from 'bottom' is an error");
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status || ':' || number || ':' || coalesce(init_gpu_mib::text, '-'), ',') "
		      "FROM rung_claim_batch($1::jsonb, $2::int)", 2, p), "0:ok:2:80000",
		   "retry: attempt 2 is the first at the target since the retry: the first-attempt check's columns again");
	/* from the current config: the config and the floor stay */
	q1("UPDATE attempts SET state = 'ended', outcome = 'failed', class = 'oom_train_early', ended_at = now() "
	   "WHERE state = 'running'", 0, NULL);
	q1("UPDATE jobs SET state = 'cancelled', finished_at = now(), current_config = '{\"x\":3}', "
	   "constraints = '{\"min_gpu_memory_mib\": 90000}'", 0, NULL);
	snprintf(before, sizeof before, "%s", history_counts());
	p[0] = jid;
	TAP_STR_EQ(q1("SELECT rung_retry($1::bigint, NULL, NULL, NULL)->>'status'", 1, p), "ok", "retry: a cancelled job: ok");
	TAP_STR_EQ(history_counts(), before, "retry: the cancelled ending stays counted");
	TAP_STR_EQ(q1("SELECT state || ':' || current_config::text || ':' || (constraints->>'min_gpu_memory_mib') || ':' || "
		      "(recovery_state->>'budget_from') || ':' || (recovery_state->'retried'->>'previous_state') FROM jobs", 0, NULL),
		   "queued:{\"x\": 3}:90000:2:cancelled", "retry from the current config: the config and the floor stay, budget_from 2");
	q1("UPDATE jobs SET state = 'succeeded'", 0, NULL);
	TAP_STR_EQ(q1("SELECT (rung_retry($1::bigint, 'current', NULL, NULL)->'job'->>'state')", 1, p), "succeeded",
		   "retry: a succeeded job is a conflict and answers the job as it is");
	free(items);

	/* two re-run jobs whose config failed on T-2, in claim order B (priority 1, retried since) then A
	 * (priority 2, lower id, not retried): each job's own budget_from decides, so T-2 takes B */
	q1("TRUNCATE jobs, attempts, event_log, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("SELECT rung_register('wr2', 'h', '[{\"uuid\":\"T-2\",\"memory_total_mib\":80000}]')", 0, NULL);
	q1("INSERT INTO jobs (name, kind, priority, target_config, recovery, attempts_count, recovery_state) VALUES "
	   "('ra', 'image', 2, '{\"x\":1}', '{}', 1, '{}'), ('rb', 'image', 1, '{\"x\":2}', '{}', 1, '{\"budget_from\": 1}')",
	   0, NULL);
	q1("INSERT INTO attempts (job_id, number, gpu_uuid, config_hash, token, lease_expires_at, state, outcome) "
	   "SELECT id, 1, 'T-2', md5(target_config::text), 'tok' || id, now(), 'ended', 'failed' FROM jobs", 0, NULL);
	{
		char w2[32];
		snprintf(w2, sizeof w2, "%s", q1("SELECT id FROM workers WHERE name = 'wr2'", 0, NULL));
		items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"T-2\",\"fresh\":true},"
				  "{\"i\":1,\"worker\":%s,\"gpu\":\"T-none\",\"fresh\":false}]", w2, w2);
	}
	p[0] = items;
	p[1] = "30";
	TAP_STR_EQ(q1("SELECT string_agg(b.status || ':' || j.name, ',') FROM rung_claim_batch($1::jsonb, $2::int) b "
		      "JOIN jobs j ON j.id = b.job_id", 2, p), "ok:rb",
		   "claim: of two jobs that failed on this GPU, the retried one is offered it, by its own budget_from");
	free(items);

	/* the webhook loop claims only the kinds it has a URL for (sql/webhook_claim.sql, migration 018) */
	q1("INSERT INTO escalations (job_id, trigger) SELECT id, 'budget_exhausted' FROM jobs WHERE name = 'ra'", 0, NULL);
	q1("INSERT INTO webhook_outbox (kind, job_id, payload) SELECT 'job', id, '{}' FROM jobs WHERE name = 'ra'", 0, NULL);
	{
		const char *kp[3] = { "10", "30", "{escalation}" };
		PGresult *r = PQexecParams(pg, sql_webhook_claim, 3, NULL, kp, NULL, NULL, 0);
		TAP_OK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !strcmp(PQgetvalue(r, 0, 3), "escalation"),
		       "webhook: a replica with only the escalation URL claims the escalation row, not the job's");
		PQclear(r);
		kp[2] = "{job}";
		r = PQexecParams(pg, sql_webhook_claim, 3, NULL, kp, NULL, NULL, 0);
		TAP_OK(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !strcmp(PQgetvalue(r, 0, 3), "job"),
		       "webhook: one with only the job URL claims the job row");
		PQclear(r);
	}
	PQfinish(pg);
}

/* Owner limits (migration 020, rung_owner_room in 40_claim.sql): the claim round and the one-GPU
 * claim pass over the queued jobs of an owner that runs as many as its token's max_running allows,
 * count their own choices in the round, and leave others alone; 0 pauses an owner; no limit reads
 * nothing; the room's token rows are locked for the claim's transaction; the placement says why. */
static void test_owner_limits(void)
{
	const char *p[2];
	char wid[32], *items;
	PGconn *other;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("DELETE FROM tokens WHERE name LIKE 'lim-%'", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{}", "limits: none set, an empty room");
	q1("INSERT INTO tokens (name, role, hash) VALUES ('lim-a', 'submitter', repeat('1', 64)), "
	   "('lim-b', 'submitter', repeat('2', 64))", 0, NULL);
	q1("UPDATE tokens SET max_running = 1 WHERE name = 'lim-a'", 0, NULL);
	q1("SELECT rung_register('wl', 'h', '[{\"uuid\":\"L-1\",\"memory_total_mib\":80000},"
	   "{\"uuid\":\"L-2\",\"memory_total_mib\":80000},{\"uuid\":\"L-3\",\"memory_total_mib\":80000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wl'", 0, NULL));
	/* claim order: a1, a2, a3 (lim-a), then b1 (lim-b) */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery) VALUES "
	   "('a1', 'lim-a', 'image', 1, '{\"x\":1}', '{}'), ('a2', 'lim-a', 'image', 2, '{\"x\":1}', '{}'), "
	   "('a3', 'lim-a', 'image', 3, '{\"x\":1}', '{}'), ('b1', 'lim-b', 'image', 4, '{\"x\":1}', '{}')", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{\"lim-a\": 1}", "limits: lim-a has room for 1");
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"L-1\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"L-2\",\"fresh\":true},"
			  "{\"i\":2,\"worker\":%s,\"gpu\":\"L-3\",\"fresh\":true}]", wid, wid, wid);
	p[0] = items;
	p[1] = "30";
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:a1,1:ok:b1,2:none:-",
		   "limits: three GPUs in one round: a1, then lim-a is at 1 and a2 waits, b1; the third GPU gets nothing");
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{\"lim-a\": 0}", "limits: lim-a's room is spent");
	p[0] = wid;
	TAP_STR_EQ(q1("SELECT rung_claim($1::bigint, 'L-3', 30, NULL)->>'status'", 1, p), "none",
		   "limits: nor does rung_claim start a2");
	TAP_STR_EQ(q1("SELECT (rung_job_placement(j)->>'owner_max_running') || ':' || (rung_job_placement(j)->>'owner_running') "
		      "FROM jobs j WHERE name = 'a2'", 0, NULL), "1:1", "limits: a2's placement: lim-a runs 1 of 1");
	TAP_STR_EQ(q1("SELECT coalesce(rung_job_placement(j)->>'owner_max_running', 'none') FROM jobs j WHERE name = 'b1'", 0, NULL),
		   "none", "limits: an owner without a limit has none in the placement");
	/* near miss: a limit of 2 leaves room for one more */
	q1("UPDATE tokens SET max_running = 2 WHERE name = 'lim-a'", 0, NULL);
	TAP_STR_EQ(q1("SELECT j.name FROM jobs j WHERE j.id = (rung_claim($1::bigint, 'L-3', 30, NULL)->'lease'->>'job_id')::bigint",
		      1, p), "a2", "limits: at 2, rung_claim starts a2");
	q1("UPDATE attempts SET state = 'ended', outcome = 'failed', ended_at = now()", 0, NULL);
	q1("UPDATE jobs SET state = 'failed' WHERE state = 'running'", 0, NULL);
	q1("UPDATE tokens SET max_running = 0 WHERE name = 'lim-a'", 0, NULL);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status, ',' ORDER BY b.i) FROM rung_claim_batch($1::jsonb, $2::int) b",
		      2, p), "0:none,1:none,2:none", "limits: 0 pauses lim-a: a3 waits with every GPU free");
	/* the lock: a claim's transaction holds the limited tokens until it ends */
	other = PQconnectdb(url);
	q1("BEGIN", 0, NULL);
	q1("SELECT rung_owner_room()::text", 0, NULL);
	{
		PGresult *r = PQexec(other, "SET lock_timeout = '200ms'");
		PQclear(r);
		r = PQexec(other, "SELECT rung_owner_room()");
		TAP_OK(PQresultStatus(r) != PGRES_TUPLES_OK && strstr(PQresultErrorMessage(r), "lock timeout"),
		       "limits: a second claim waits for the first's token lock (lock_timeout here)");
		PQclear(r);
	}
	q1("COMMIT", 0, NULL);
	{
		PGresult *r = PQexec(other, "SELECT rung_owner_room()::text");
		TAP_OK(PQresultStatus(r) == PGRES_TUPLES_OK && !strcmp(PQgetvalue(r, 0, 0), "{\"lim-a\": 0}"),
		       "limits: and takes it once the first ended");
		PQclear(r);
	}
	PQfinish(other);
	q1("UPDATE tokens SET max_running = NULL WHERE name = 'lim-a'", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status, ',' ORDER BY b.i) FROM rung_claim_batch($1::jsonb, $2::int) b",
		      2, p), "0:ok,1:none,2:none", "limits: lifted, a3 runs");
	q1("DELETE FROM tokens WHERE name LIKE 'lim-%'", 0, NULL);
	free(items);
	PQfinish(pg);
}

/* Per-pool owner limits (migration 034, rung_owner_room and rung_room_open in 40_claim.sql): a
 * token's limit in a pool caps its jobs of that pool alone, in the claim round, in its one-GPU
 * fallback (rung_claim) and beside max_running, which still counts every pool; a borrower's GPU
 * taking another pool's job counts it there; the placement, the owners' summary and the room say so;
 * rung_token_set_limits merges a body's pools into those set before. */
static void test_pool_limits(void)
{
	const char *p[2];
	char wd[32], wh[32], *items, *four;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("DELETE FROM tokens WHERE name LIKE 'pl-%'", 0, NULL);
	q1("INSERT INTO tokens (name, role, hash) VALUES ('pl-a', 'submitter', repeat('5', 64)), "
	   "('pl-b', 'submitter', repeat('6', 64))", 0, NULL);
	q1("SELECT rung_worker_join('{\"name\": \"pd\", \"host\": \"h\", \"pool\": \"default\", \"borrow\": [], \"gpus\": "
	   "[{\"uuid\": \"PD-1\", \"memory_total_mib\": 24576}]}', NULL, false)", 0, NULL);
	q1("SELECT rung_worker_join('{\"name\": \"ph\", \"host\": \"h\", \"pool\": \"h200\", \"borrow\": [\"default\"], "
	   "\"gpus\": [{\"uuid\": \"PH-1\", \"memory_total_mib\": 143771}, {\"uuid\": \"PH-2\", \"memory_total_mib\": 143771}, "
	   "{\"uuid\": \"PH-3\", \"memory_total_mib\": 143771}]}', NULL, false)", 0, NULL);
	snprintf(wd, sizeof wd, "%s", q1("SELECT id FROM workers WHERE name = 'pd'", 0, NULL));
	snprintf(wh, sizeof wh, "%s", q1("SELECT id FROM workers WHERE name = 'ph'", 0, NULL));
	/* h200: h1, h2 (pl-a), then hb (pl-b); default: d1, d2 (pl-a) */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, pool) VALUES "
	   "('h1', 'pl-a', 'image', 1, '{\"x\":1}', '{}', 'h200'), ('h2', 'pl-a', 'image', 2, '{\"x\":1}', '{}', 'h200'), "
	   "('hb', 'pl-b', 'image', 3, '{\"x\":1}', '{}', 'h200'), ('d1', 'pl-a', 'image', 4, '{\"x\":1}', '{}', 'default'), "
	   "('d2', 'pl-a', 'image', 5, '{\"x\":1}', '{}', 'default')", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_token_set_limits(id, '{\"pool_max_running\": {\"h200\": 1}}')->>'pool_max_running' "
		      "FROM tokens WHERE name = 'pl-a'", 0, NULL), "{\"h200\": 1}", "pool limits: pl-a may run 1 job of h200");
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{\"pl-a/h200\": 1}",
		   "pool limits: the room has its key per pool, none over every pool");
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"PH-1\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"PH-2\",\"fresh\":true}]", wh, wh);
	p[0] = items;
	p[1] = "30";
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_round($1::jsonb, $2::int, false) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:h1,1:ok:hb", "pool limits: two h200 GPUs: h1, then pl-a is at 1 in h200 and h2 waits, hb");
	p[0] = wh;
	TAP_STR_EQ(q1("SELECT rung_claim($1::bigint, 'PH-3', 30, NULL)->>'status'", 1, p), "none",
		   "pool limits: nor does the one-GPU claim start h2");
	TAP_STR_EQ(q1("SELECT (p->>'owner_pool_max_running') || ':' || (p->>'owner_pool_running') || ':' || "
		      "coalesce(p->>'owner_max_running', 'none') FROM (SELECT rung_job_placement(j) AS p FROM jobs j "
		      "WHERE j.name = 'h2') x", 0, NULL), "1:1:none", "pool limits: h2's placement: pl-a runs 1 of 1 in h200");
	TAP_STR_EQ(q1("SELECT coalesce(rung_job_placement(j)->>'owner_pool_max_running', 'none') FROM jobs j WHERE name = 'd1'",
		      0, NULL), "none", "pool limits: a job of another pool has no pool limit in its placement");
	TAP_STR_EQ(q1("SELECT e->'pool_limits' FROM jsonb_array_elements(rung_owners_summary()) e WHERE e->>'owner' = 'pl-a'",
		      0, NULL), "[{\"pool\": \"h200\", \"queued\": 1, \"running\": 1, \"max_running\": 1}]",
		   "pool limits: the owners' summary: 1 of h200 running, at most 1, 1 queued");
	TAP_STR_EQ(q1("SELECT coalesce(array_to_string(rung_owners_capped_in(rung_owner_room_now(), 'h200'), ','), '-') "
		      "|| ':' || coalesce(array_to_string(rung_owners_capped_in(rung_owner_room_now(), 'default'), ','), '-')",
		      0, NULL), "pl-a:-", "pool limits: pl-a is capped in h200, not in default");
	/* the default pool's jobs are not held by it: the borrower's third GPU takes d1 */
	p[0] = wh;
	TAP_STR_EQ(q1("WITH c AS MATERIALIZED (SELECT rung_claim_in('default', $1::bigint, 'PH-3', 30, NULL, NULL, NULL, NULL) "
		      "AS r) SELECT j.name FROM c JOIN jobs j ON j.id = (c.r->'lease'->>'job_id')::bigint", 1, p), "d1",
		   "pool limits: a job of its other pool starts (on a borrower's GPU)");
	q1("ROLLBACK", 0, NULL);
	/* with max_running 2 as well: the default round (first by name) takes d1, the h200 round h1 and hb;
	 * the borrower's third GPU finds d2, but pl-a runs 2 over every pool */
	q1("SELECT rung_token_set_limits(id, '{\"max_running\": 2}') FROM tokens WHERE name = 'pl-a'", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{\"pl-a\": 2, \"pl-a/h200\": 1}",
		   "pool limits: max_running set beside it, the pool's limit kept");
	four = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"PH-1\",\"fresh\":true},"
			 "{\"i\":1,\"worker\":%s,\"gpu\":\"PH-2\",\"fresh\":true},"
			 "{\"i\":2,\"worker\":%s,\"gpu\":\"PH-3\",\"fresh\":true},"
			 "{\"i\":3,\"worker\":%s,\"gpu\":\"PD-1\",\"fresh\":true}]", wh, wh, wh, wd);
	p[0] = four;
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_round($1::jsonb, $2::int, false) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:h1,1:ok:hb,2:none:-,3:ok:d1",
		   "pool limits: both limits in one round: h1 (h200's 1), hb, d1 (the 2 over every pool), d2 waits");
	TAP_STR_EQ(q1("SELECT rung_owner_room_now()::text", 0, NULL), "{\"pl-a\": 0, \"pl-a/h200\": 0}",
		   "pool limits: both spent, counted from the running attempts");
	q1("ROLLBACK", 0, NULL);
	/* a fair share reads the queue's head by its owners, capped ones left out */
	q1("SELECT rung_token_set_limits(id, '{\"max_running\": null}') FROM tokens WHERE name = 'pl-a'", 0, NULL);
	p[0] = items;
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_round($1::jsonb, $2::int, true) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:h1,1:ok:hb", "pool limits: with a fair share too, h2 waits");
	q1("ROLLBACK", 0, NULL);
	/* what the API's body merges */
	TAP_STR_EQ(q1("SELECT rung_token_set_limits(id, '{\"pool_max_running\": {\"video\": 0}}')->>'pool_max_running' "
		      "FROM tokens WHERE name = 'pl-a'", 0, NULL), "{\"h200\": 1, \"video\": 0}",
		   "pool limits: a second pool's is added to the first's");
	TAP_STR_EQ(q1("SELECT rung_token_set_limits(id, '{\"pool_max_running\": {\"h200\": null}}')->>'pool_max_running' "
		      "FROM tokens WHERE name = 'pl-a'", 0, NULL), "{\"video\": 0}", "pool limits: null lifts one pool's");
	TAP_STR_EQ(q1("SELECT coalesce(rung_token_set_limits(id, '{\"pool_max_running\": {\"video\": null}}')->>'pool_max_running', "
		      "'null') FROM tokens WHERE name = 'pl-a'", 0, NULL), "null",
		   "pool limits: the last one lifted, no per-pool limit is left (NULL, not {})");
	q1("SELECT rung_token_set_limits(id, '{\"pool_max_running\": {\"h200\": 0, \"default\": 0}}') FROM tokens WHERE name = 'pl-a'",
	   0, NULL);
	TAP_STR_EQ(q1("SELECT coalesce(rung_token_set_limits(id, '{\"pool_max_running\": null}')->>'pool_max_running', 'null') "
		      "FROM tokens WHERE name = 'pl-a'", 0, NULL), "null", "pool limits: null lifts them all");
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{}", "pool limits: none left, an empty room");
	q1("DELETE FROM tokens WHERE name LIKE 'pl-%'", 0, NULL);
	free(items);
	free(four);
	PQfinish(pg);
}

/* GPU-hour quotas (migration 035, 45_quota.sql): an owner's GPU time in its window is summed as GET
 * /v1/usage sums it (a window's part of each attempt), read into quota_use when a quota is set and by
 * the pass, which names the owners that went over or came back; over it, the claim starts none of its
 * jobs (its room is 0), the placement says so; a pass another replica runs is skipped; lifted, its row
 * goes. */
static void test_quota(void)
{
	const char *p[2];
	char wid[32], *items;
	PGconn *other;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("DELETE FROM tokens WHERE name LIKE 'qt-%'", 0, NULL);
	q1("INSERT INTO tokens (name, role, hash) VALUES ('qt-a', 'submitter', repeat('8', 64)), "
	   "('qt-b', 'submitter', repeat('9', 64))", 0, NULL);
	q1("SELECT rung_register('wq', 'h', '[{\"uuid\":\"Q-1\",\"memory_total_mib\":80000},"
	   "{\"uuid\":\"Q-2\",\"memory_total_mib\":80000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wq'", 0, NULL));
	/* qt-a's history: 2 h three hours ago, 24 h ten days ago (outside 7 days), 25 h ending 1 h inside them */
	q1("INSERT INTO jobs (name, owner, kind, state, priority, target_config, recovery, attempts_count) VALUES "
	   "('qh', 'qt-a', 'image', 'succeeded', 1, '{\"x\":1}', '{}', 3)", 0, NULL);
	q1("INSERT INTO attempts (job_id, number, worker_id, gpu_uuid, config, config_hash, token, lease_expires_at, state, "
	   "outcome, started_at, ended_at) SELECT j.id, n, w.id, 'Q-1', '{}', 'h', 'qh' || n, now(), 'ended', 'failed', s, e "
	   "FROM jobs j, workers w, (VALUES (1, now() - interval '10 days', now() - interval '9 days'), "
	   "(2, now() - interval '8 days', now() - interval '7 days' + interval '1 hour'), "
	   "(3, now() - interval '3 hours', now() - interval '1 hour')) x(n, s, e) WHERE j.name = 'qh' AND w.name = 'wq'",
	   0, NULL);
	TAP_STR_EQ(q1("SELECT round((rung_owner_gpu_s('qt-a', 7) / 3600)::numeric, 1)::text || ':' || "
		      "round((rung_owner_gpu_s('qt-a', 1) / 3600)::numeric, 1)::text || ':' || rung_owner_gpu_s('qt-b', 7)::text",
		      0, NULL), "3.0:2.0:0", "quota: 3 GPU hours in 7 days (the part of each attempt inside), 2 in 1 day, none for qt-b");
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery) VALUES "
	   "('qa1', 'qt-a', 'image', 1, '{\"x\":1}', '{}'), ('qa2', 'qt-a', 'image', 2, '{\"x\":1}', '{}'), "
	   "('qb1', 'qt-b', 'image', 3, '{\"x\":1}', '{}')", 0, NULL);
	/* (each read of quota_use in a statement of its own: a statement sees the writes of the ones before) */
	TAP_STR_EQ(q1("SELECT rung_token_set_limits(id, '{\"gpu_hours\": 5}')->>'gpu_hours' FROM tokens WHERE name = 'qt-a'",
		      0, NULL), "5", "quota: 5 hours set");
	TAP_STR_EQ(q1("SELECT round((u.used_s / 3600)::numeric, 1) || ':' || u.over FROM quota_use u JOIN tokens t "
		      "ON t.id = u.token_id WHERE t.name = 'qt-a'", 0, NULL), "3.0:false",
		   "quota: its use read at once: 3.0, not over");
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{}", "quota: under it, no room key");
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"Q-1\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"Q-2\",\"fresh\":true}]", wid, wid);
	p[0] = items;
	p[1] = "30";
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:qa1,1:ok:qa2", "quota: under it, both of its jobs start (near miss)");
	q1("ROLLBACK", 0, NULL);
	q1("SELECT rung_token_set_limits(id, '{\"gpu_hours\": 2.5}') FROM tokens WHERE name = 'qt-a'", 0, NULL);
	TAP_STR_EQ(q1("SELECT u.over::text FROM quota_use u JOIN tokens t ON t.id = u.token_id WHERE t.name = 'qt-a'", 0, NULL),
		   "true", "quota: lowered to 2.5 hours, over it at once");
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{\"qt-a\": 0}", "quota: over it, no room");
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:qb1,1:none:-", "quota: over it, none of its jobs starts; qt-b's does");
	q1("ROLLBACK", 0, NULL);
	TAP_STR_EQ(q1("SELECT (p->'owner_quota'->>'over') || ':' || (p->'owner_quota'->>'used_hours') || ':' || "
		      "(p->'owner_quota'->>'gpu_hours') || ':' || (p->'owner_quota'->>'days') "
		      "FROM (SELECT rung_job_placement(j) AS p FROM jobs j WHERE j.name = 'qa1') x", 0, NULL), "true:3.0:2.5:7",
		   "quota: the placement says so");
	TAP_STR_EQ(q1("SELECT e->'quota'->>'over' FROM jsonb_array_elements(rung_owners_summary()) e WHERE e->>'owner' = 'qt-a'",
		      0, NULL), "true", "quota: so does the owners' summary");
	TAP_STR_EQ(q1("SELECT rung_quota_pass()::text", 0, NULL), "{\"read\": 1, \"freed\": [], \"capped\": []}",
		   "quota: a pass that finds nothing changed names nobody");
	q1("UPDATE attempts SET started_at = started_at - interval '20 days', ended_at = ended_at - interval '20 days' "
	   "WHERE token = 'qh3'", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_quota_pass()::text", 0, NULL), "{\"read\": 1, \"freed\": [\"qt-a\"], \"capped\": []}",
		   "quota: its 2 recent hours left the window: the pass frees qt-a");
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{}", "quota: and it has room again");
	q1("UPDATE attempts SET started_at = now() - interval '3 hours', ended_at = now() - interval '1 hour' WHERE token = 'qh3'",
	   0, NULL);
	other = PQconnectdb(url);
	{
		PGresult *r = PQexec(other, "BEGIN");
		PQclear(r);
		r = PQexec(other, "SELECT pg_advisory_xact_lock(rung_quota_lock())");
		PQclear(r);
		TAP_STR_EQ(q1("SELECT rung_quota_pass()->>'skipped'", 0, NULL), "true",
			   "quota: a pass while another replica's runs skips");
		r = PQexec(other, "COMMIT");
		PQclear(r);
	}
	PQfinish(other);
	TAP_STR_EQ(q1("SELECT rung_quota_pass()::text", 0, NULL), "{\"read\": 1, \"freed\": [], \"capped\": [\"qt-a\"]}",
		   "quota: back in the window: the next pass caps qt-a");
	q1("SELECT rung_token_set_limits(id, '{\"gpu_hours_days\": 1}') FROM tokens WHERE name = 'qt-a'", 0, NULL);
	TAP_STR_EQ(q1("SELECT t.gpu_hours_days || ':' || round((u.used_s / 3600)::numeric, 1) FROM quota_use u "
		      "JOIN tokens t ON t.id = u.token_id WHERE t.name = 'qt-a'", 0, NULL), "1:2.0",
		   "quota: a window of 1 day counts 2.0 hours");
	TAP_STR_EQ(q1("SELECT coalesce(rung_token_set_limits(id, '{\"gpu_hours\": null}')->>'gpu_hours', 'null') "
		      "FROM tokens WHERE name = 'qt-a'", 0, NULL), "null", "quota: lifted");
	TAP_STR_EQ(q1("SELECT count(*) FROM quota_use u JOIN tokens t ON t.id = u.token_id WHERE t.name = 'qt-a'", 0, NULL),
		   "0", "quota: its row goes");
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{}", "quota: none left, an empty room");
	q1("DELETE FROM tokens WHERE name LIKE 'qt-%'", 0, NULL);
	free(items);
	PQfinish(pg);
}

/* GPU-hour quotas per pool (migration 037): each pool's use read from the same scan, the pools over
 * their quota in quota_use.pools_over, no room in them ("owner/POOL" at 0) while the owner's other
 * pools run on; the placement and the owners' summary say so; the pass names "owner/POOL" when it caps
 * or frees one; a body's pools are merged, null lifts one or all. */
static void test_pool_quota(void)
{
	const char *p[2];
	char wid[32], *items;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("DELETE FROM tokens WHERE name LIKE 'pq-%'", 0, NULL);
	q1("INSERT INTO tokens (name, role, hash) VALUES ('pq-a', 'submitter', repeat('7', 64))", 0, NULL);
	q1("SELECT rung_register('wpq', 'h', '[{\"uuid\":\"PQ-1\",\"memory_total_mib\":80000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wpq'", 0, NULL));
	/* pq-a's history: 3 h of a job of pool h200, 2 h of one of default, both inside 7 days */
	q1("INSERT INTO jobs (name, owner, kind, state, priority, target_config, recovery, pool) VALUES "
	   "('ph', 'pq-a', 'image', 'succeeded', 1, '{\"x\":1}', '{}', 'h200'), "
	   "('pd', 'pq-a', 'image', 'succeeded', 1, '{\"x\":1}', '{}', 'default')", 0, NULL);
	q1("INSERT INTO attempts (job_id, number, worker_id, gpu_uuid, config, config_hash, token, lease_expires_at, state, "
	   "outcome, started_at, ended_at) SELECT j.id, 1, w.id, 'PQ-1', '{}', 'h', 'pq' || j.name, now(), 'ended', 'succeeded', "
	   "now() - CASE j.name WHEN 'ph' THEN interval '4 hours' ELSE interval '3 hours' END, now() - interval '1 hour' "
	   "FROM jobs j, workers w WHERE j.name IN ('ph', 'pd') AND w.name = 'wpq'", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(e.key || '=' || round((e.value::float8 / 3600)::numeric, 1), ',' ORDER BY e.key) "
		      "FROM jsonb_each_text(rung_owner_gpu_s_pools('pq-a', 7)) e", 0, NULL), "default=2.0,h200=3.0",
		   "pool quota: each pool's GPU hours in the window");
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery) VALUES "
	   "('pd1', 'pq-a', 'image', 1, '{\"x\":1}', '{}')", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_token_set_limits(id, '{\"pool_gpu_hours\": {\"h200\": 2}}')->>'pool_gpu_hours' "
		      "FROM tokens WHERE name = 'pq-a'", 0, NULL), "{\"h200\": 2}", "pool quota: 2 H200 hours set");
	TAP_STR_EQ(q1("SELECT u.pools_over::text || ':' || u.over FROM quota_use u JOIN tokens t ON t.id = u.token_id "
		      "WHERE t.name = 'pq-a'", 0, NULL), "{h200}:false", "pool quota: read at once: over in h200, no quota over all");
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{\"pq-a/h200\": 0}", "pool quota: no room in h200");
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"PQ-1\",\"fresh\":true}]", wid);
	p[0] = items;
	p[1] = "30";
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:pd1", "pool quota: over it in h200, its default job starts");
	q1("ROLLBACK", 0, NULL);
	q1("SELECT rung_token_set_limits(id, '{\"pool_gpu_hours\": {\"default\": 1}}') FROM tokens WHERE name = 'pq-a'", 0, NULL);
	TAP_STR_EQ(q1("SELECT (rung_token_json(t)->'pool_gpu_hours')::text || '|' || u.pools_over::text FROM tokens t "
		      "JOIN quota_use u ON u.token_id = t.id WHERE t.name = 'pq-a'", 0, NULL),
		   "{\"h200\": 2, \"default\": 1}|{default,h200}", "pool quota: a second pool merged; over in both");
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:none:-", "pool quota: over it in default too, its default job waits");
	q1("ROLLBACK", 0, NULL);
	TAP_STR_EQ(q1("SELECT (p->'owner_pool_quota'->>'pool') || ':' || (p->'owner_pool_quota'->>'over') || ':' || "
		      "(p->'owner_pool_quota'->>'used_hours') || ':' || (p->'owner_pool_quota'->>'gpu_hours') || ':' || "
		      "(p->'owner_pool_quota'->>'days') FROM (SELECT rung_job_placement(j) AS p FROM jobs j WHERE j.name = 'pd1') x",
		      0, NULL), "default:true:2.0:1:7", "pool quota: the placement says so for the job's pool");
	TAP_STR_EQ(q1("SELECT string_agg((q->>'pool') || '=' || (q->>'used_hours') || '/' || (q->>'gpu_hours'), ',') "
		      "FROM jsonb_array_elements(rung_owners_summary()) e, jsonb_array_elements(e->'pool_quotas') q "
		      "WHERE e->>'owner' = 'pq-a'", 0, NULL), "default=2.0/1,h200=3.0/2",
		   "pool quota: the owners' summary lists both");
	TAP_STR_EQ(q1("SELECT rung_quota_pass()::text", 0, NULL), "{\"read\": 1, \"freed\": [], \"capped\": []}",
		   "pool quota: a pass that finds nothing changed names nobody");
	q1("UPDATE attempts SET started_at = started_at - interval '20 days', ended_at = ended_at - interval '20 days' "
	   "WHERE token = 'pqph'", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_quota_pass()::text", 0, NULL), "{\"read\": 1, \"freed\": [\"pq-a/h200\"], \"capped\": []}",
		   "pool quota: its H200 hours left the window: the pass frees pq-a/h200");
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{\"pq-a/default\": 0}", "pool quota: room in h200 again");
	q1("UPDATE attempts SET started_at = started_at + interval '20 days', ended_at = ended_at + interval '20 days' "
	   "WHERE token = 'pqph'", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_quota_pass()::text", 0, NULL), "{\"read\": 1, \"freed\": [], \"capped\": [\"pq-a/h200\"]}",
		   "pool quota: back in the window: the next pass caps pq-a/h200");
	/* quota webhooks (migration 038), for a session that asks for them: a crossing writes a row, a lift none */
	q1("BEGIN", 0, NULL);
	q1("SET LOCAL rung.job_webhook = 'on'", 0, NULL);
	q1("SELECT rung_token_set_limits(id, '{\"pool_gpu_hours\": {\"video\": 0}}') FROM tokens WHERE name = 'pq-a'", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg((payload->>'event') || ':' || (payload->>'owner') || ':' || (payload->>'pool'), ',') "
		      "FROM webhook_outbox WHERE kind = 'quota'", 0, NULL), "quota.over:pq-a:video",
		   "pool quota webhook: a new quota of 0 in video, over at once: one quota.over row");
	q1("SELECT rung_token_set_limits(id, '{\"pool_gpu_hours\": {\"video\": null}}') FROM tokens WHERE name = 'pq-a'", 0, NULL);
	TAP_STR_EQ(q1("SELECT count(*) FROM webhook_outbox WHERE kind = 'quota'", 0, NULL), "1",
		   "pool quota webhook: that quota lifted: no quota.under (an admin did it)");
	q1("ROLLBACK", 0, NULL);
	TAP_STR_EQ(q1("SELECT (rung_token_set_limits(id, '{\"pool_gpu_hours\": {\"default\": null}}')->'pool_gpu_hours')::text "
		      "FROM tokens WHERE name = 'pq-a'", 0, NULL), "{\"h200\": 2}", "pool quota: one pool's lifted");
	TAP_STR_EQ(q1("SELECT coalesce(rung_token_set_limits(id, '{\"pool_gpu_hours\": null}')->>'pool_gpu_hours', 'null') "
		      "FROM tokens WHERE name = 'pq-a'", 0, NULL), "null", "pool quota: all lifted");
	TAP_STR_EQ(q1("SELECT count(*) FROM quota_use u JOIN tokens t ON t.id = u.token_id WHERE t.name = 'pq-a'", 0, NULL),
		   "0", "pool quota: its row goes");
	TAP_STR_EQ(q1("SELECT rung_owner_room()::text", 0, NULL), "{}", "pool quota: none left, an empty room");
	q1("DELETE FROM tokens WHERE name LIKE 'pq-%'", 0, NULL);
	free(items);
	PQfinish(pg);
}

/* The capped walk (migration 021, rung_queue_head and rung_claim in 40_claim.sql): while an owner is
 * at its limit, a claim reads the other owners' queues (jobs_claim_owner) and merges them in claim
 * order: the same jobs, in the same order, as passing over the capped owner's jobs would give, a
 * GPU that may run none of the head looks further with rung_claim, a head job another transaction
 * holds is passed over, and the capped owner's 30,000 queued jobs in front are not read (a round
 * touches about a hundred blocks, passing over them over a thousand). A limit's change waits for the
 * claims under way (rung_owner_limits_lock), a token's first limit too. */
static void test_owner_queue(void)
{
	const char *p[2];
	char wid[32], *one, *three, *small;
	PGconn *other;
	PGresult *r;
	long b;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("DELETE FROM tokens WHERE name LIKE 'cap-%'", 0, NULL);
	q1("INSERT INTO tokens (name, role, hash) VALUES ('cap-a', 'submitter', repeat('3', 64)), "
	   "('cap-b', 'submitter', repeat('4', 64)), ('cap-c', 'submitter', repeat('5', 64))", 0, NULL);
	q1("UPDATE tokens SET max_running = 0 WHERE name = 'cap-a'", 0, NULL);
	q1("SELECT rung_register('wq', 'h', '[{\"uuid\":\"Q-1\",\"memory_total_mib\":80000},"
	   "{\"uuid\":\"Q-2\",\"memory_total_mib\":80000},{\"uuid\":\"Q-3\",\"memory_total_mib\":80000},"
	   "{\"uuid\":\"Q-S\",\"memory_total_mib\":16000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wq'", 0, NULL));
	/* claim order: cap-a's 30,000 jobs, b1 (needs 40,000 MiB), c1, b2 */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery) "
	   "SELECT 'a' || g, 'cap-a', 'image', 0, '{\"x\":1}', '{}' FROM generate_series(1, 30000) g", 0, NULL);
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, constraints) VALUES "
	   "('b1', 'cap-b', 'image', 1, '{\"x\":1}', '{}', '{\"min_gpu_memory_mib\":40000}'), "
	   "('c1', 'cap-c', 'image', 2, '{\"x\":1}', '{}', '{}'), ('b2', 'cap-b', 'image', 3, '{\"x\":1}', '{}', '{}')",
	   0, NULL);
	q1("ANALYZE jobs", 0, NULL);
	TAP_STR_EQ(q1("SELECT array_to_string(rung_queued_owners('{cap-a}', 'default'), ',')", 0, NULL), "cap-b,cap-c",
		   "capped walk: the owners with queued jobs, the capped one left out");
	TAP_STR_EQ(q1("SELECT string_agg(j.name, ',' ORDER BY h.n) FROM unnest(rung_queue_head('{cap-a}', 2, NULL, 'default')) "
		      "WITH ORDINALITY AS h(id, n) JOIN jobs j ON j.id = h.id", 0, NULL), "b1,c1",
		   "capped walk: the head is the others' first jobs in claim order");
	small = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"Q-S\",\"fresh\":true}]", wid);
	one = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"Q-1\",\"fresh\":true}]", wid);
	three = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"Q-1\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"Q-2\",\"fresh\":true},"
			  "{\"i\":2,\"worker\":%s,\"gpu\":\"Q-3\",\"fresh\":true}]", wid, wid, wid);
	p[1] = "30";
	p[0] = three;
	b = blocks("SELECT * FROM rung_claim_batch($1::jsonb, $2::int)", 2, p);
	/* the round starts its leases too; passing over 30,000 queued jobs touched over 1,000 */
	blocks_under(b, 250, "capped walk: a round of 3 behind 30,000 queued jobs of a capped owner");
	p[0] = wid;
	b = blocks("SELECT rung_claim($1::bigint, 'Q-S', 30, NULL)", 1, p);
	blocks_under(b, 250, "capped walk: rung_claim behind 30,000 queued jobs of a capped owner");
	/* a head job held by another transaction: the round passes over it to rung_claim's walk */
	other = PQconnectdb(url);
	PQclear(PQexec(other, "BEGIN"));
	PQclear(PQexec(other, "SELECT 1 FROM jobs WHERE name = 'b1' FOR UPDATE"));
	p[0] = one;
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:c1", "capped walk: b1 held elsewhere, the GPU takes c1 (not none, not cap-a's)");
	PQclear(PQexec(other, "ROLLBACK"));
	/* a small GPU: the head (b1) needs more memory, rung_claim walks on to b2 */
	p[0] = small;
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:b2", "capped walk: a 16 GB GPU passes over b1 to b2");
	p[0] = three;
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:b1,1:none:-,2:none:-", "capped walk: b1 on an 80 GB GPU; cap-a's jobs still wait");
	/* an owner whose 30,000 queued jobs this GPU may not run, the first 100 of them before another
	 * owner's job it may (so past the 64 the walk tries first): each owner's first 1,024 jobs give
	 * that job, and the walk past them stops at it; the 30,000 are not read (about 1,400 blocks: their
	 * pages, read in order), with or without a fair share that favours the owner of the 30,000 */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, created_at) VALUES "
	   "('c2', 'cap-c', 'image', 5, '{\"x\":1}', '{}', now() - interval '1 hour')", 0, NULL);
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, constraints, created_at) "
	   "SELECT 'huge' || g, 'cap-b', 'image', 5, '{\"x\":1}', '{}', '{\"min_gpu_memory_mib\": 90000}', "
	   "now() - interval '1 hour' + (g - 100) * interval '1 ms' FROM generate_series(1, 30000) g", 0, NULL);
	q1("ANALYZE jobs", 0, NULL);
	p[0] = wid;
	b = blocks("SELECT rung_claim($1::bigint, 'Q-S', 30, NULL)", 1, p);
	blocks_under(b, 800, "capped walk: rung_claim past an owner's 30,000 jobs this GPU may not run");
	b = blocks("SELECT rung_claim($1::bigint, 'Q-S', 30, NULL, NULL, '{\"cap-c\": 3}')", 1, p);
	blocks_under(b, 800, "capped walk: and with a fair share favouring that owner");
	TAP_STR_EQ(q1("WITH c AS (SELECT rung_claim($1::bigint, 'Q-S', 30, NULL, NULL, '{\"cap-c\": 3}') AS r) "
		      "SELECT j.name FROM c JOIN jobs j ON j.id = (c.r->'lease'->>'job_id')::bigint", 1, p), "c2",
		   "capped walk: and takes the other owner's job");
	q1("DELETE FROM jobs WHERE name LIKE 'huge%'", 0, NULL);
	/* a change of a limit waits for a claim under way, a token's first limit too */
	q1("BEGIN", 0, NULL);
	q1("SELECT rung_owner_room()::text", 0, NULL);
	PQclear(PQexec(other, "SET lock_timeout = '200ms'"));
	r = PQexec(other, "SELECT rung_token_set_limit(id, 1) FROM tokens WHERE name = 'cap-c'");
	TAP_OK(PQresultStatus(r) != PGRES_TUPLES_OK && strstr(PQresultErrorMessage(r), "lock timeout"),
	       "limits: cap-c's first limit waits for the claim under way (lock_timeout here)");
	PQclear(r);
	q1("COMMIT", 0, NULL);
	r = PQexec(other, "SELECT rung_token_set_limit(id, 1)->>'max_running' FROM tokens WHERE name = 'cap-c'");
	TAP_OK(PQresultStatus(r) == PGRES_TUPLES_OK && !strcmp(PQgetvalue(r, 0, 0), "1"),
	       "limits: and is set once the claim ended");
	PQclear(r);
	PQfinish(other);
	q1("UPDATE tokens SET max_running = NULL WHERE name LIKE 'cap-%'", 0, NULL);
	p[0] = one;
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:a1", "capped walk: lifted, cap-a's first job runs");
	q1("DELETE FROM tokens WHERE name LIKE 'cap-%'", 0, NULL);
	free(small);
	free(one);
	free(three);
	PQfinish(pg);
}

/* A fair share (rung_claim_batch's p_fair, rungd --fair-share; rung_queue_head's p_running): within a
 * priority the next GPU goes to the owner running the fewest jobs, oldest first, this round's choices
 * counted; a better priority still goes first; rung_claim's walk weighs the same. Without it, claim
 * order (priority, age). */
static void test_fair_share(void)
{
	const char *p[3];
	char wid[32], *one, *two;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("SELECT rung_register('wf', 'h', '[{\"uuid\":\"F-1\",\"memory_total_mib\":80000},"
	   "{\"uuid\":\"F-2\",\"memory_total_mib\":80000},{\"uuid\":\"F-3\",\"memory_total_mib\":80000},"
	   "{\"uuid\":\"F-4\",\"memory_total_mib\":80000},{\"uuid\":\"F-5\",\"memory_total_mib\":80000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wf'", 0, NULL));
	/* claim order: fa's a1..a4, then fb's b1, b2 (all priority 0) */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, created_at) "
	   "SELECT 'a' || g, 'fa', 'image', 0, '{\"x\":1}', '{}', now() - interval '1 hour' + g * interval '1 s' "
	   "FROM generate_series(1, 4) g", 0, NULL);
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, created_at) "
	   "SELECT 'b' || g, 'fb', 'image', 0, '{\"x\":1}', '{}', now() - interval '30 minutes' + g * interval '1 s' "
	   "FROM generate_series(1, 2) g", 0, NULL);
	one = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"F-3\",\"fresh\":true}]", wid);
	two = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"F-1\",\"fresh\":true},"
			"{\"i\":1,\"worker\":%s,\"gpu\":\"F-2\",\"fresh\":true}]", wid, wid);
	p[1] = "30";
	TAP_STR_EQ(q1("SELECT string_agg(j.name, ',' ORDER BY h.n) FROM unnest(rung_queue_head('{}', 6, '{\"fa\": 1}', 'default')) "
		      "WITH ORDINALITY AS h(id, n) JOIN jobs j ON j.id = h.id", 0, NULL), "b1,a1,b2,a2,a3,a4",
		   "fair share: the head when fa runs 1 and fb none: b1 (place 0), a1 and b2 (1), a2, a3, a4");
	TAP_STR_EQ(q1("SELECT string_agg(j.name, ',' ORDER BY h.n) FROM unnest(rung_queue_head('{}', 6, NULL, 'default')) "
		      "WITH ORDINALITY AS h(id, n) JOIN jobs j ON j.id = h.id", 0, NULL), "a1,a2,a3,a4,b1,b2",
		   "fair share: without running counts the head is in claim order");
	/* without a fair share two GPUs take a1, a2; then with one, fb's b1 goes before fa's older a3 */
	p[0] = two;
	p[2] = "false";
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int, $3::boolean) b LEFT JOIN jobs j ON j.id = b.job_id", 3, p),
		   "0:ok:a1,1:ok:a2", "fair share: off, two GPUs take fa's a1 and a2 (claim order)");
	p[0] = one;
	p[2] = "true";
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int, $3::boolean) b LEFT JOIN jobs j ON j.id = b.job_id", 3, p),
		   "0:ok:b1", "fair share: on, fa runs 2 and fb none: fb's b1 before fa's older a3");
	/* fa runs 2, fb 1: b2 (place 1), then a3 (place 2): this round counts its own choice */
	q1("UPDATE gpus SET state = 'ok'", 0, NULL);
	{
		char *other = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"F-4\",\"fresh\":true},"
					"{\"i\":1,\"worker\":%s,\"gpu\":\"F-5\",\"fresh\":true}]", wid, wid);
		p[0] = other;
		TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
			      "FROM rung_claim_batch($1::jsonb, $2::int, $3::boolean) b LEFT JOIN jobs j ON j.id = b.job_id",
			      3, p),
			   "0:ok:b2,1:ok:a3", "fair share: fa runs 2, fb 1: b2, then a3");
		free(other);
	}
	/* rung_claim's walk: fa runs 3, fb 2, each with one queued job: a4 (fb has none queued now);
	 * with fb below fa and a job queued, fb's goes first */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery) VALUES "
	   "('b3', 'fb', 'image', 0, '{\"x\":1}', '{}')", 0, NULL);
	p[0] = wid;
	/* (a CTE: a volatile call in the WHERE of a scan of jobs would claim once per row read) */
	TAP_STR_EQ(q1("WITH c AS (SELECT rung_claim($1::bigint, 'F-3', 30, NULL, NULL, '{\"fa\": 3, \"fb\": 2}') AS r) "
		      "SELECT j.name FROM c JOIN jobs j ON j.id = (c.r->'lease'->>'job_id')::bigint", 1, p),
		   "b3", "fair share: rung_claim takes fb's newer b3 before fa's older a4");
	/* a better priority goes first whoever runs the most */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery) VALUES "
	   "('a0', 'fa', 'image', -1, '{\"x\":1}', '{}'), ('b4', 'fb', 'image', 0, '{\"x\":1}', '{}')", 0, NULL);
	q1("UPDATE attempts SET state = 'ended', outcome = 'failed', ended_at = now() WHERE gpu_uuid = 'F-1'", 0, NULL);
	q1("UPDATE jobs SET state = 'failed' WHERE name = 'a1'", 0, NULL);
	p[0] = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"F-1\",\"fresh\":true}]", wid);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int, $3::boolean) b LEFT JOIN jobs j ON j.id = b.job_id", 3, p),
		   "0:ok:a0", "fair share: fa's a0 of a better priority goes first though fa runs the most");
	free((char *)p[0]);
	/* a round weighs each GPU's own choice: fa runs none and its older job needs a bigger GPU than the
	 * 24 GB one; fb runs one and has a job older than fa's other: the 24 GB GPU takes fa's, as
	 * rung_claim would (the head's order put fb's first, counting fa's big job as taken) */
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("SELECT rung_register('wg', 'h', '[{\"uuid\":\"G-80\",\"memory_total_mib\":80000},"
	   "{\"uuid\":\"G-24\",\"memory_total_mib\":24000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wg'", 0, NULL));
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, constraints, created_at) VALUES "
	   "('bx', 'fb', 'image', 0, '{\"x\":1}', '{}', '{}', now() - interval '4 hours'), "
	   "('b0', 'fb', 'image', 0, '{\"x\":1}', '{}', '{}', now() - interval '3 hours'), "
	   "('a0', 'fa', 'image', 0, '{\"x\":1}', '{}', '{\"min_gpu_memory_mib\": 90000}', now() - interval '2 hours'), "
	   "('a1', 'fa', 'image', 0, '{\"x\":1}', '{}', '{}', now() - interval '1 hour')", 0, NULL);
	p[2] = "true";
	p[0] = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"G-80\",\"fresh\":true}]", wid);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int, $3::boolean) b LEFT JOIN jobs j ON j.id = b.job_id", 3, p),
		   "0:ok:bx", "fair share: nobody runs, the oldest job that fits (fb's bx) goes first");
	free((char *)p[0]);
	p[0] = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"G-24\",\"fresh\":true}]", wid);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int, $3::boolean) b LEFT JOIN jobs j ON j.id = b.job_id", 3, p),
		   "0:ok:a1", "fair share: fb runs 1, fa none: the 24 GB GPU takes fa's a1, not fb's older b0");
	free((char *)p[0]);
	free(one);
	free(two);
	PQfinish(pg);
}

/* rung_worker_drain (sql/functions/31_drain.sql): a drained worker's GPUs get no lease, in the
 * set-wise claim and in rung_claim; registering again (a restart) keeps it drained; resumed, it
 * leases. Repeats change nothing and write no event. */
/* Borrowing between pools (migration 028): a worker of pool a-h200 that borrows from default (and
 * b) takes default's jobs only when its own pool has none it may run; the default pool's own GPU
 * comes first in the round though a-h200 sorts first; one row per fresh waiter; the borrowed pool's
 * largest GPU, placement and owner limits count the borrower. */
static void test_borrow(void)
{
	const char *p[2];
	char wd[32], wh[32], *both, *parked, *lone, *ctx;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("DELETE FROM tokens WHERE name LIKE 'borrow-%'", 0, NULL);
	q1("SELECT rung_worker_join('{\"name\": \"wd\", \"host\": \"h\", \"pool\": \"default\", \"borrow\": [], \"gpus\": "
	   "[{\"uuid\": \"BD-1\", \"memory_total_mib\": 24576}]}', NULL, false)", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_worker_join('{\"name\": \"wh\", \"host\": \"h\", \"pool\": \"a-h200\", \"borrow\": [\"b\", \"default\"], "
		      "\"gpus\": [{\"uuid\": \"BH-1\", \"memory_total_mib\": 143771}]}', NULL, false)->>'borrow'", 0, NULL),
		   "[\"b\", \"default\"]", "borrow: a worker of a-h200 borrows from b, then default, in that order");
	snprintf(wd, sizeof wd, "%s", q1("SELECT id FROM workers WHERE name = 'wd'", 0, NULL));
	snprintf(wh, sizeof wh, "%s", q1("SELECT id FROM workers WHERE name = 'wh'", 0, NULL));
	q1("SELECT rung_register('wh', 'h', '[{\"uuid\":\"BH-1\",\"memory_total_mib\":143771}]')", 0, NULL);
	TAP_STR_EQ(q1("SELECT array_to_string(borrow, ',') FROM workers WHERE name = 'wh'", 0, NULL), "b,default",
		   "borrow: registered again by the release before's name (no borrow), it keeps its list");
	TAP_STR_EQ(q1("SELECT rung_worker_json(w)->>'borrow' FROM workers w WHERE name = 'wh'", 0, NULL), "[\"b\", \"default\"]",
		   "borrow: GET /v1/workers shows the list");
	/* d1, d2 of default (d1 first), nothing in a-h200 or b */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery) VALUES "
	   "('d1', 'borrow-o', 'image', 1, '{\"x\":1}', '{}'), ('d2', 'borrow-o', 'image', 2, '{\"x\":1}', '{}')", 0, NULL);
	TAP_STR_EQ(q1("SELECT (p->>'gpus') || ':' || (p->>'borrowing_gpus') || ':' || (p->>'other_pools_gpus') || ':' || "
		      "(p->>'fleet_max_gpu_mib') FROM (SELECT rung_job_placement(j) AS p FROM jobs j WHERE j.name = 'd1') x", 0, NULL),
		   "1:1:0:143771", "borrow: a default job's placement counts the borrower's GPU apart, and its memory as the pool's largest");
	q1("BEGIN", 0, NULL);
	q1("UPDATE workers SET state = 'draining' WHERE name = 'wh'", 0, NULL);
	TAP_STR_EQ(q1("SELECT (p->>'gpus') || ':' || (p->>'draining_gpus') || ':' || (p->>'borrowing_gpus') "
		      "FROM (SELECT rung_job_placement(j) AS p FROM jobs j WHERE j.name = 'd1') x", 0, NULL), "1:1:0",
		   "borrow: a drained borrower's GPU counts as draining (resumed, it takes the job), not as nowhere");
	q1("ROLLBACK", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_pool_max_gpu_mib('default')::text || ':' || rung_pool_max_gpu_mib('a-h200') || ':' || "
		      "rung_pool_max_gpu_mib('c')", 0, NULL), "143771:143771:0", "borrow: each pool's largest GPU, a borrower's counted");
	both = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"BH-1\",\"fresh\":true},"
			 "{\"i\":1,\"worker\":%s,\"gpu\":\"BD-1\",\"fresh\":true}]", wh, wd);
	parked = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"BH-1\",\"fresh\":false}]", wh);
	lone = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"BH-1\",\"fresh\":true}]", wh);
	p[0] = both;
	p[1] = "30";
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-') || ':' || b.pool || ':' || "
		      "coalesce(b.init_fleet_mib::text, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_round($1::jsonb, $2::int, false) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:d2:a-h200:143771,1:ok:d1:default:143771",
		   "borrow: the default GPU takes d1, the first, though a-h200's round comes first; the borrower takes d2, "
		   "its row naming its own pool and the default pool's largest GPU");
	q1("ROLLBACK", 0, NULL);
	/* a job of its own pool, queued after the default ones and of a lower priority: the borrower takes it */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, pool) VALUES "
	   "('h1', 'borrow-o', 'image', 50, '{\"x\":1}', '{}', 'a-h200')", 0, NULL);
	p[0] = lone;
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.status || ':' || coalesce(j.name, '-'), ',') "
		      "FROM rung_claim_round($1::jsonb, $2::int, false) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p), "ok:h1",
		   "borrow: its own pool's job first, whatever the borrowed pool's priorities");
	q1("ROLLBACK", 0, NULL);
	/* a job of its own pool it may not run (it needs more memory): one row, default's job */
	q1("UPDATE jobs SET constraints = '{\"min_gpu_memory_mib\": 200000}' WHERE name = 'h1'", 0, NULL);
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.status || ':' || coalesce(j.name, '-'), ',') "
		      "FROM rung_claim_round($1::jsonb, $2::int, false) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p), "ok:d1",
		   "borrow: its own pool's job needs a bigger GPU: one row, the borrowed job (the own pool's none held back)");
	q1("ROLLBACK", 0, NULL);
	q1("DELETE FROM jobs WHERE name = 'h1'", 0, NULL);
	/* a job of b, the first it borrows from, before default's */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, pool) VALUES "
	   "('b1', 'borrow-o', 'image', 50, '{\"x\":1}', '{}', 'b')", 0, NULL);
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.status || ':' || coalesce(j.name, '-'), ',') "
		      "FROM rung_claim_round($1::jsonb, $2::int, false) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p), "ok:b1",
		   "borrow: then the pools it borrows from, in its order (b before default)");
	q1("ROLLBACK", 0, NULL);
	q1("DELETE FROM jobs WHERE name = 'b1'", 0, NULL);
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.status || ':' || coalesce(j.name, '-'), ',') "
		      "FROM rung_claim_round($1::jsonb, $2::int, false) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p), "ok:d1",
		   "borrow: nothing in a-h200 or b: default's first job, through two empty pools");
	q1("ROLLBACK", 0, NULL);
	p[0] = parked;
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.status || ':' || coalesce(j.name, '-'), ',') "
		      "FROM rung_claim_round($1::jsonb, $2::int, false) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p), "ok:d1",
		   "borrow: a parked borrower (a woken round) takes it too");
	q1("ROLLBACK", 0, NULL);
	/* one default job, both GPUs asking: the default GPU gets it; the borrower one row, none */
	q1("DELETE FROM jobs WHERE name = 'd2'", 0, NULL);
	p[0] = both;
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_round($1::jsonb, $2::int, false) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:none:-,1:ok:d1", "borrow: one job, the pool's own GPU takes it; the borrower gets one row, none");
	q1("ROLLBACK", 0, NULL);
	p[0] = parked;
	q1("BEGIN", 0, NULL);
	q1("UPDATE jobs SET state = 'running' WHERE name = 'd1'", 0, NULL);
	TAP_STR_EQ(q1("SELECT count(*) FROM rung_claim_round($1::jsonb, $2::int, false)", 2, p), "0",
		   "borrow: nothing anywhere: no row for a parked borrower");
	q1("ROLLBACK", 0, NULL);
	/* the owner's limit counts what the pool's own GPU took in the same round */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery) VALUES "
	   "('d3', 'borrow-o', 'image', 3, '{\"x\":1}', '{}')", 0, NULL);
	q1("INSERT INTO tokens (name, role, hash, max_running) VALUES ('borrow-o', 'submitter', repeat('b', 64), 1)", 0, NULL);
	p[0] = both;
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_round($1::jsonb, $2::int, false) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:none:-,1:ok:d1", "borrow: an owner at max_running 1: the borrower does not start its second job");
	q1("ROLLBACK", 0, NULL);
	q1("DELETE FROM tokens WHERE name = 'borrow-o'", 0, NULL);
	/* a submit into a pool no worker serves or borrows from warns (the job is stored) */
	TAP_STR_EQ(q1("SELECT rung_submit_pool_warning('default')::text || ':' || rung_submit_pool_warning('a-h200')::text "
		      "|| ':' || rung_submit_pool_warning('b')::text || ':' || "
		      "(rung_submit_pool_warning('nohost')->'warnings'->0->>'field')", 0, NULL), "{}:{}:{}:pool",
		   "borrow: no warning for default, a served pool or a borrowed one; one naming pool for a pool no worker takes from");
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status || ':' || coalesce(job->'warnings'->0->>'field', '-'), ',' ORDER BY i) "
		      "FROM rung_submit_batch('["
		      "{\"i\": 0, \"name\": \"w1\", \"owner\": \"o\", \"kind\": \"image\", \"priority\": 1, \"recovery\": {}, "
		      "\"key\": null, \"body\": {\"config\": {\"x\": 1}, \"pool\": \"nohost\"}},"
		      "{\"i\": 1, \"name\": \"w2\", \"owner\": \"o\", \"kind\": \"image\", \"priority\": 1, \"recovery\": {}, "
		      "\"key\": null, \"body\": {\"config\": {\"x\": 1}, \"pool\": \"b\"}}]')", 0, NULL),
		   "0:created:pool,1:created:-", "borrow: set-wise, the job of pool nohost carries the warning, b's none");
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status || ':' || coalesce(job->'warnings'->0->>'field', '-'), ',' ORDER BY i) "
		      "FROM rung_submit_batch('["
		      "{\"i\": 0, \"name\": \"w3\", \"owner\": \"o\", \"kind\": \"image\", \"priority\": 1, \"recovery\": {}, "
		      "\"key\": \"bw-1\", \"body\": {\"config\": {\"x\": 1}, \"pool\": \"nohost\"}},"
		      "{\"i\": 1, \"name\": \"w3\", \"owner\": \"o\", \"kind\": \"image\", \"priority\": 1, \"recovery\": {}, "
		      "\"key\": \"bw-1\", \"body\": {\"config\": {\"x\": 1}, \"pool\": \"nohost\"}}]')", 0, NULL),
		   "0:created:pool,1:existing:pool", "borrow: keyed, created and repeated, the same");
	q1("DELETE FROM jobs WHERE name IN ('w1', 'w2', 'w3')", 0, NULL);
	/* rung_claim_in: a worker takes a pool's job only when the pool is its own or one it borrows from */
	p[0] = wd;
	TAP_STR_EQ(q1("SELECT rung_claim_in('a-h200', $1::bigint, 'BD-1', 30, NULL, NULL, NULL, NULL)->>'status'", 1, p), "none",
		   "borrow: rung_claim_in refuses a pool the worker neither serves nor borrows from");
	p[0] = wh;
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT j.name FROM jobs j WHERE j.id = (rung_claim_in('default', $1::bigint, 'BH-1', 30, NULL, NULL, NULL, "
		      "NULL)->'lease'->>'job_id')::bigint", 1, p), "d1", "borrow: and takes one from a pool it borrows from");
	q1("ROLLBACK", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_claim($1::bigint, 'BH-1', 30, NULL)->>'status'", 1, p), "none",
		   "borrow: rung_claim, the release before's name, claims from the worker's own pool only");
	/* a borrower that stopped borrowing between the round's grouping and its sub-round: the
	 * sub-round's check under the touch reads the list again */
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.status, ',') FROM rung_claim_pool_round(jsonb_build_array(jsonb_build_object('i', 0, "
		      "'worker', $1::bigint, 'gpu', 'BH-1', 'fresh', true)), 30, false, 'default') b", 1, p), "ok",
		   "borrow: (control) a borrower's waiter in default's sub-round gets d1");
	q1("ROLLBACK", 0, NULL);
	q1("BEGIN", 0, NULL);
	q1("UPDATE workers SET borrow = '{b}' WHERE name = 'wh'", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(b.status, ',') FROM rung_claim_pool_round(jsonb_build_array(jsonb_build_object('i', 0, "
		      "'worker', $1::bigint, 'gpu', 'BH-1', 'fresh', true)), 30, false, 'default') b", 1, p), "none",
		   "borrow: once it no longer borrows from default, default's sub-round gives it none");
	q1("ROLLBACK", 0, NULL);
	/* a finish's CTX for a job of default: its pool's largest GPU, the borrower's */
	p[0] = lone;
	q1("SELECT count(*) FROM rung_claim_round($1::jsonb, $2::int, false)", 2, p);
	ctx = xstrdup(q1("SELECT jsonb_build_array(jsonb_build_object('i', 0, 'id', a.id, 'token', a.token, 'facts', "
			 "'{}'::jsonb, 'plain', false)) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = 'd1'", 0, NULL));
	p[0] = ctx;
	TAP_STR_EQ(q1("SELECT ctx->'fleet'->>'max_gpu_memory_mib' FROM rung_finish_ctx_batch($1::jsonb)", 1, p), "143771",
		   "borrow: the borrowed job's finish weighs its pool's largest GPU, the borrower's");
	/* registration: [] stops borrowing; a token kept to some pools borrows only from them */
	q1("SELECT rung_worker_join('{\"name\": \"wh\", \"host\": \"h\", \"pool\": \"a-h200\", \"borrow\": [], \"gpus\": []}', "
	   "NULL, false)", 0, NULL);
	TAP_STR_EQ(q1("SELECT cardinality(borrow)::text || ':' || rung_pool_max_gpu_mib('default') FROM workers WHERE name = 'wh'",
		      0, NULL), "0:24576", "borrow: an empty list stops it, and default's largest GPU is its own again");
	q1("INSERT INTO tokens (name, role, hash, pools) VALUES ('borrow-host', 'worker', repeat('c', 64), '{a-h200,b}')", 0, NULL);
	TAP_STR_EQ(q1("SELECT (j->>'status') || ':' || (j->>'field') FROM rung_worker_join('{\"name\": \"wt\", \"host\": \"h\", "
		      "\"pool\": \"a-h200\", \"borrow\": [\"b\", \"default\"], \"gpus\": []}', "
		      "(SELECT id FROM tokens WHERE name = 'borrow-host'), false) j", 0, NULL), "pool_refused:borrow",
		   "borrow: a worker token kept to a-h200 and b may not borrow from default, and the refusal names borrow");
	TAP_STR_EQ(q1("SELECT rung_worker_join('{\"name\": \"wt\", \"host\": \"h\", \"pool\": \"a-h200\", \"borrow\": [\"b\"], "
		      "\"gpus\": []}', (SELECT id FROM tokens WHERE name = 'borrow-host'), false)->>'status'", 0, NULL), "ok",
		   "borrow: from b it may");
	TAP_STR_EQ(q1("SELECT array_to_string(borrow, ',') FROM workers WHERE name = 'wt'", 0, NULL), "b",
		   "borrow: and is stored with its list");
	q1("DELETE FROM workers WHERE name = 'wt'", 0, NULL);
	q1("DELETE FROM tokens WHERE name LIKE 'borrow-%'", 0, NULL);
	/* every worker in default, one borrowing from canary: a canary job's finish weighs the borrower's
	 * 24 GiB, not the fleet's 140 */
	q1("UPDATE workers SET pool = 'default', borrow = '{}' WHERE name = 'wh'", 0, NULL);
	q1("UPDATE workers SET borrow = '{canary}' WHERE name = 'wd'", 0, NULL);
	q1("DELETE FROM jobs WHERE state = 'queued'", 0, NULL);
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, pool) VALUES "
	   "('c1', 'borrow-o', 'image', 1, '{\"x\":1}', '{}', 'canary')", 0, NULL);
	free(lone);
	lone = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"BD-1\",\"fresh\":true}]", wd);
	p[0] = lone;
	p[1] = "30";
	TAP_STR_EQ(q1("SELECT string_agg(j.name, ',') FROM rung_claim_round($1::jsonb, $2::int, false) b JOIN jobs j ON j.id = b.job_id",
		      2, p), "c1", "borrow: a default worker that borrows from canary takes its job");
	free(ctx);
	ctx = xstrdup(q1("SELECT jsonb_build_array(jsonb_build_object('i', 0, 'id', a.id, 'token', a.token, 'facts', "
			 "'{}'::jsonb, 'plain', false)) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = 'c1'", 0, NULL));
	p[0] = ctx;
	TAP_STR_EQ(q1("SELECT ctx->'fleet'->>'max_gpu_memory_mib' FROM rung_finish_ctx_batch($1::jsonb)", 1, p), "24576",
		   "borrow: with every worker in default, a canary job's finish weighs canary's largest GPU, the borrower's");
	/* a borrower whose own pool is empty, behind 30,000 queued jobs of another pool: the round's probe
	 * of its empty pool reads jobs_claim, not the table (an EXISTS's generic plan read it whole) */
	q1("UPDATE workers SET pool = 'own', borrow = '{default}' WHERE name = 'wh'", 0, NULL);
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, pool) "
	   "SELECT 'zz' || g, 'borrow-z', 'image', 0, '{\"x\":1}', '{}', 'zz' FROM generate_series(1, 30000) g", 0, NULL);
	q1("ANALYZE jobs", 0, NULL);
	free(lone);
	lone = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"BH-1\",\"fresh\":true}]", wh);
	p[0] = lone;
	blocks_under(blocks("SELECT * FROM rung_claim_round($1::jsonb, $2::int, false)", 2, p), 250,
		     "borrow: a borrower's round, its own pool empty, behind 30,000 queued jobs of another pool");
	q1("DELETE FROM jobs WHERE pool = 'zz'", 0, NULL);
	free(both);
	free(parked);
	free(lone);
	free(ctx);
	PQfinish(pg);
	pg = NULL;
}

static void test_drain(void)
{
	const char *p[2];
	char wid[32], *items;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("SELECT rung_register('wd', 'h', '[{\"uuid\":\"D-1\",\"memory_total_mib\":80000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wd'", 0, NULL));
	q1("INSERT INTO jobs (name, kind, target_config, recovery) VALUES ('dj', 'image', '{\"x\":1}', '{}')", 0, NULL);
	p[0] = wid;
	TAP_STR_EQ(q1("SELECT (rung_worker_drain($1::bigint, true, 'psu', 'ops')->>'changed') || ':' || "
		      "(rung_worker_drain($1::bigint, true, 'again', 'ops')->>'changed')", 1, p), "true:false",
		   "drain: drained, and a repeat changes nothing");
	TAP_STR_EQ(q1("SELECT state || ':' || (drain->>'note') || ':' || (drain->>'by') FROM workers", 0, NULL), "draining:psu:ops",
		   "drain: the state and the first record");
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"D-1\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"D-none\",\"fresh\":false}]", wid, wid);
	p[1] = "30";
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',' ORDER BY i) FROM rung_claim_batch($1::jsonb, $2::int)", 2, p),
		   "0:none,1:no_gpu", "drain: the set-wise claim gives its GPU nothing");
	p[0] = wid;
	TAP_STR_EQ(q1("SELECT rung_claim($1::bigint, 'D-1', 30, NULL)->>'status'", 1, p), "none", "drain: nor does rung_claim");
	q1("SELECT rung_register('wd', 'h2', '[{\"uuid\":\"D-1\",\"memory_total_mib\":80000}]')", 0, NULL);
	TAP_STR_EQ(q1("SELECT state FROM workers", 0, NULL), "draining", "drain: registering again keeps it drained");
	TAP_STR_EQ(q1("SELECT rung_worker_drain($1::bigint, false, NULL, 'ops')->>'changed'", 1, p), "true", "drain: resumed");
	TAP_STR_EQ(q1("SELECT state || ':' || (drain IS NULL) FROM workers", 0, NULL), "online:true",
		   "drain: online, the record gone");
	TAP_STR_EQ(q1("SELECT string_agg(kind || ':' || from_state || '>' || to_state, ',' ORDER BY id) FROM events "
		      "WHERE kind LIKE 'worker_%'", 0, NULL), "worker_drained:online>draining,worker_resumed:draining>online",
		   "drain: one event each way");
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',' ORDER BY i) FROM rung_claim_batch($1::jsonb, $2::int)", 2, p),
		   "0:ok", "drain: resumed, its GPU leases the job");
	TAP_STR_EQ(q1("SELECT coalesce(rung_worker_drain(-1, true, NULL, NULL)::text, 'null')", 0, NULL), "null",
		   "drain: no such worker: NULL");
	free(items);
	PQfinish(pg);
}

/* Worker pools (migration 026): a job runs only on a worker of its pool. A registration names its
 * worker's pool and one without a pool (the release before's, through the old names) keeps it; a
 * submit's body names the job's. A round serves each pool's waiters with that pool's jobs, whatever
 * the claim order across pools, on every path: the plain scan, rung_claim's fallback, the capped
 * head and the fair share. A GPU of the default pool behind 30,000 queued jobs of another pool reads
 * a few blocks (the claim indexes lead with the pool). A first attempt's lease carries its pool's
 * largest GPU, and so does a finish's CTX; the placement and "ahead" count within the job's pool. */
static void test_pools(void)
{
	const char *p[2];
	char wdef[32], wa[32], *three, *dflt, *ctx_items;
	long b;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox CASCADE", 0, NULL);
	q1("DELETE FROM tokens WHERE name LIKE 'pool-%'", 0, NULL);
	q1("SELECT rung_register('wdef', 'h', '[{\"uuid\":\"PD-1\",\"memory_total_mib\":24576}]')", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_worker_join('{\"name\": \"wa\", \"host\": \"h\", \"pool\": \"a\", \"gpus\": "
		      "[{\"uuid\": \"PA-1\", \"memory_total_mib\": 81920}, {\"uuid\": \"PA-2\", \"memory_total_mib\": 81920}]}', "
		      "NULL, false)->>'pool'", 0, NULL), "a", "pools: a worker joins pool a");
	snprintf(wdef, sizeof wdef, "%s", q1("SELECT id FROM workers WHERE name = 'wdef'", 0, NULL));
	snprintf(wa, sizeof wa, "%s", q1("SELECT id FROM workers WHERE name = 'wa'", 0, NULL));
	q1("SELECT rung_register('wa', 'h', '[{\"uuid\":\"PA-1\",\"memory_total_mib\":81920},"
	   "{\"uuid\":\"PA-2\",\"memory_total_mib\":81920}]')", 0, NULL);
	TAP_STR_EQ(q1("SELECT pool FROM workers WHERE name = 'wa'", 0, NULL), "a",
		   "pools: registered again by the release before's name (no pool), it stays in a");
	q1("SELECT rung_worker_join('{\"name\": \"wa\", \"host\": \"h\", \"pool\": \"default\", \"gpus\": []}', NULL, false)",
	   0, NULL);
	TAP_STR_EQ(q1("SELECT pool FROM workers WHERE name = 'wa'", 0, NULL), "default", "pools: a pool sent moves it");
	q1("SELECT rung_worker_join('{\"name\": \"wa\", \"host\": \"h\", \"pool\": \"a\", \"gpus\": []}', NULL, false)", 0, NULL);
	/* round 24: a keyless batch reads each pool's warning once (warn MATERIALIZED), not once per job:
	 * three jobs of two pools, two calls (rolled back) */
	TAP_INT_EQ(xact_calls("SELECT * FROM rung_submit_batch('["
			      "{\"i\": 0, \"name\": \"w1\", \"owner\": \"o\", \"kind\": \"image\", \"priority\": 0, "
			      "\"recovery\": {}, \"key\": null, \"body\": {\"config\": {\"x\": 1}, \"pool\": \"a\"}},"
			      "{\"i\": 1, \"name\": \"w2\", \"owner\": \"o\", \"kind\": \"image\", \"priority\": 0, "
			      "\"recovery\": {}, \"key\": null, \"body\": {\"config\": {\"x\": 1}, \"pool\": \"a\"}},"
			      "{\"i\": 2, \"name\": \"w3\", \"owner\": \"o\", \"kind\": \"image\", \"priority\": 0, "
			      "\"recovery\": {}, \"key\": null, \"body\": {\"config\": {\"x\": 1}}}]')",
			      0, NULL, "rung_submit_pool_warning"),
		   2, "pools: a batch of 3 jobs in 2 pools reads each pool's warning once");
	/* claim order across pools: a1 (pool a), d1 (default), a2 (pool a) */
	TAP_STR_EQ(q1("SELECT string_agg(job->>'pool', ',' ORDER BY i) FROM rung_submit_batch('["
		      "{\"i\": 0, \"name\": \"a1\", \"owner\": \"o\", \"kind\": \"image\", \"priority\": 0, \"recovery\": {}, \"key\": null, "
		      "\"body\": {\"config\": {\"x\": 1}, \"pool\": \"a\"}},"
		      "{\"i\": 1, \"name\": \"d1\", \"owner\": \"o\", \"kind\": \"image\", \"priority\": 1, \"recovery\": {}, \"key\": null, "
		      "\"body\": {\"config\": {\"x\": 1}}},"
		      "{\"i\": 2, \"name\": \"a2\", \"owner\": \"o\", \"kind\": \"image\", \"priority\": 2, \"recovery\": {}, \"key\": \"pk\", "
		      "\"body\": {\"config\": {\"x\": 1}, \"pool\": \"a\"}}]')", 0, NULL),
		   "a,default,a", "pools: a submit's body names the job's pool, set-wise or keyed; none is default");
	TAP_STR_EQ(q1("SELECT string_agg(j.name || ':' || (rung_job_placement(j)->>'ahead'), ',' ORDER BY j.id) FROM jobs j", 0, NULL),
		   "a1:0,d1:0,a2:1", "pools: ahead counts the queued jobs of the job's own pool");
	TAP_STR_EQ(q1("SELECT (p->>'pool') || ':' || (p->>'gpus') || ':' || (p->>'other_pools_gpus') || ':' || (p->>'fleet_max_gpu_mib') "
		      "FROM (SELECT rung_job_placement(j) AS p FROM jobs j WHERE j.name = 'd1') x", 0, NULL), "default:1:2:24576",
		   "pools: a default job's placement: its pool's one GPU, two in another pool, its pool's largest GPU");
	TAP_STR_EQ(q1("SELECT (p->>'gpus') || ':' || (p->>'other_pools_gpus') || ':' || (p->>'fleet_max_gpu_mib') "
		      "FROM (SELECT rung_job_placement(j) AS p FROM jobs j WHERE j.name = 'a1') x", 0, NULL), "2:1:81920",
		   "pools: pool a's job: the two GPUs of a");
	three = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"PD-1\",\"fresh\":true},"
			  "{\"i\":1,\"worker\":%s,\"gpu\":\"PA-1\",\"fresh\":true},"
			  "{\"i\":2,\"worker\":%s,\"gpu\":\"PA-2\",\"fresh\":true}]", wdef, wa, wa);
	dflt = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"PD-1\",\"fresh\":true}]", wdef);
	p[0] = three;
	p[1] = "30";
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || j.name || ':' || coalesce(b.init_fleet_mib::text, '-'), ',' "
		      "ORDER BY b.i) FROM rung_claim_round($1::jsonb, $2::int, false) b JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:d1:24576,1:ok:a1:81920,2:ok:a2:81920",
		   "pools: one round, each GPU its own pool's job (not a1, first in claim order, for the default GPU), "
		   "each first lease with its pool's largest GPU");
	/* only pool a's jobs are queued: the default GPU gets none, by the round or by rung_claim */
	q1("INSERT INTO jobs (name, kind, target_config, recovery, pool) VALUES ('a3', 'image', '{\"x\":1}', '{}', 'a')", 0, NULL);
	p[0] = dflt;
	TAP_STR_EQ(q1("SELECT coalesce(string_agg(status, ','), '-') FROM rung_claim_batch($1::jsonb, $2::int)", 2, p), "none",
		   "pools: a default GPU takes no job of pool a");
	p[0] = wdef;
	TAP_STR_EQ(q1("SELECT rung_claim($1::bigint, 'PD-1', 30, NULL)->>'status'", 1, p), "none", "pools: nor does rung_claim");
	/* 30,000 queued jobs of pool a ahead of one default job */
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery, pool) "
	   "SELECT 'big' || g, 'pool-x', 'image', 0, '{\"x\":1}', '{}', 'a' FROM generate_series(1, 30000) g", 0, NULL);
	q1("INSERT INTO jobs (name, owner, kind, priority, target_config, recovery) VALUES ('d2', 'pool-y', 'image', 5, "
	   "'{\"x\":1}', '{}')", 0, NULL);
	q1("ANALYZE jobs", 0, NULL);
	p[0] = dflt;
	b = blocks("SELECT * FROM rung_claim_round($1::jsonb, $2::int, false)", 2, p);
	blocks_under(b, 250, "pools: a round of a default GPU behind 30,000 queued jobs of pool a");
	b = blocks("SELECT * FROM rung_claim_round($1::jsonb, $2::int, true)", 2, p);
	blocks_under(b, 250, "pools: with a fair share");
	p[0] = wdef;
	b = blocks("SELECT rung_claim($1::bigint, 'PD-1', 30, NULL)", 1, p);
	blocks_under(b, 250, "pools: rung_claim behind them");
	q1("INSERT INTO tokens (name, role, hash, max_running) VALUES ('pool-x', 'submitter', repeat('7', 64), 0)", 0, NULL);
	p[0] = dflt;
	b = blocks("SELECT * FROM rung_claim_round($1::jsonb, $2::int, false)", 2, p);
	blocks_under(b, 250, "pools: a round with an owner capped (the head's path)");
	TAP_STR_EQ(q1("SELECT string_agg(b.status || ':' || j.name, ',') FROM rung_claim_round($1::jsonb, $2::int, true) b "
		      "JOIN jobs j ON j.id = b.job_id", 2, p), "ok:d2",
		   "pools: with an owner capped and a fair share, the default GPU takes the default job");
	TAP_STR_EQ(q1("SELECT j.name FROM rung_claim_round(jsonb_build_array(jsonb_build_object('i', 0, 'worker', $1::bigint, "
		      "'gpu', 'PA-1', 'fresh', true)), 30, true) b JOIN jobs j ON j.id = b.job_id", 1, (const char *[]){ wa }),
		   "a3", "pools: and pool a's GPU the only job of a whose owner has room");
	/* a finish's CTX: the fleet figure of the job's pool */
	ctx_items = xstrdup(q1("SELECT jsonb_build_array(jsonb_build_object('i', 0, 'id', a.id, 'token', a.token, 'facts', "
			       "'{}'::jsonb, 'plain', false)) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = 'd2'",
			       0, NULL));
	p[0] = ctx_items;
	TAP_STR_EQ(q1("SELECT ctx->'fleet'->>'max_gpu_memory_mib' FROM rung_finish_ctx_batch($1::jsonb)", 1, p), "24576",
		   "pools: a finish's CTX weighs its pool's largest GPU (24 GiB), not pool a's 80");
	TAP_STR_EQ(q1("SELECT rung_fleet_max_gpu_mib()::text || ':' || rung_pool_max_gpu_mib('a') || ':' || "
		      "rung_pool_max_gpu_mib('none')", 0, NULL), "81920:81920:0", "pools: the fleet's and each pool's largest GPU");
	/* a token kept to some pools (migration 027): its submits, moves and workers stay in them */
	q1("INSERT INTO tokens (name, role, hash, pools) VALUES ('pool-team', 'submitter', repeat('8', 64), '{a}'), "
	   "('pool-host', 'worker', repeat('9', 64), '{a}')", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_pool_allowed('pool-team', 'a')::text || rung_pool_allowed('pool-team', 'default')::text || "
		      "rung_pool_allowed('pool-x', 'default')::text || rung_pool_allowed('no-such-token', 'b')::text", 0, NULL),
		   "truefalsetruetrue", "pools: a token's list allows its pools only; no list, or no token: any");
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status || ':' || coalesce(job->>'pool', '-') || ':' || coalesce(job->>'pools', '-'), "
		      "',' ORDER BY i) FROM rung_submit_batch('["
		      "{\"i\": 0, \"name\": \"t1\", \"owner\": \"pool-team\", \"kind\": \"image\", \"priority\": 1, \"recovery\": {}, "
		      "\"key\": null, \"body\": {\"config\": {\"x\": 1}, \"pool\": \"a\"}},"
		      "{\"i\": 1, \"name\": \"t2\", \"owner\": \"pool-team\", \"kind\": \"image\", \"priority\": 1, \"recovery\": {}, "
		      "\"key\": null, \"body\": {\"config\": {\"x\": 1}}}]')", 0, NULL),
		   "0:created:a:-,1:pool_refused:default:[\"a\"]",
		   "pools: set-wise, the job in its token's pool is created, the one in default refused with the token's pools");
	TAP_STR_EQ(q1("SELECT count(*) FROM jobs WHERE owner = 'pool-team'", 0, NULL), "1", "pools: the refused job was not stored");
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',' ORDER BY i) FROM rung_submit_batch('["
		      "{\"i\": 0, \"name\": \"t3\", \"owner\": \"pool-team\", \"kind\": \"image\", \"priority\": 1, \"recovery\": {}, "
		      "\"key\": \"pt-1\", \"body\": {\"config\": {\"x\": 1}, \"pool\": \"b\"}},"
		      "{\"i\": 1, \"name\": \"t4\", \"owner\": \"pool-team\", \"kind\": \"image\", \"priority\": 1, \"recovery\": {}, "
		      "\"key\": \"pt-2\", \"body\": {\"config\": {\"x\": 1}, \"pool\": \"a\"}}]')", 0, NULL),
		   "0:pool_refused,1:created", "pools: keyed, the same");
	q1("UPDATE tokens SET pools = '{b}' WHERE name = 'pool-team'", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(i || ':' || status, ',' ORDER BY i) FROM rung_submit_batch('["
		      "{\"i\": 0, \"name\": \"t4\", \"owner\": \"pool-team\", \"kind\": \"image\", \"priority\": 1, \"recovery\": {}, "
		      "\"key\": \"pt-2\", \"body\": {\"config\": {\"x\": 1}, \"pool\": \"a\"}}]')", 0, NULL),
		   "0:existing", "pools: a repeated key answers its job, though its pool is no longer the token's");
	TAP_STR_EQ(q1("SELECT (rung_set_pool(id, 'default', 'ops')->>'status') || ':' || (rung_set_pool(id, 'b', 'ops')->>'status') "
		      "|| ':' || pool FROM jobs WHERE name = 't1'", 0, NULL), "pool_refused:ok:a",
		   "pools: a move to a pool the owner may not use is refused, to one it may is done");
	TAP_STR_EQ(q1("SELECT pool FROM jobs WHERE name = 't1'", 0, NULL), "b", "pools: the job is in b");
	TAP_STR_EQ(q1("SELECT (rung_worker_join('{\"name\": \"wt1\", \"host\": \"h\", \"pool\": \"default\", \"gpus\": []}', "
		      "(SELECT id FROM tokens WHERE name = 'pool-host'), false)->>'status') || ':' || "
		      "(rung_worker_join('{\"name\": \"wt1\", \"host\": \"h\", \"pool\": \"a\", \"gpus\": []}', "
		      "(SELECT id FROM tokens WHERE name = 'pool-host'), false)->>'status')", 0, NULL), "pool_refused:ok",
		   "pools: a worker token kept to a may not join default, may join a");
	TAP_STR_EQ(q1("SELECT rung_token_set_pools((SELECT id FROM tokens WHERE name = 'pool-team'), '{c,b,c}')->>'pools'", 0, NULL),
		   "[\"b\", \"c\"]", "pools: a token's list is stored sorted, once each");
	TAP_STR_EQ(q1("SELECT coalesce(rung_token_set_pools((SELECT id FROM tokens WHERE name = 'pool-team'), NULL)->>'pools', 'any')",
		      0, NULL), "any", "pools: NULL lifts it");
	q1("DELETE FROM jobs WHERE owner = 'pool-team'", 0, NULL);
	q1("DELETE FROM workers WHERE name = 'wt1'", 0, NULL);
	q1("DELETE FROM tokens WHERE name LIKE 'pool-%'", 0, NULL);
	/* What changed between two statements of one claim is read again under the lock. A worker that
	 * joined another pool after rung_claim_round grouped its waiters (here: a default worker's
	 * waiter in pool a's round) takes none of the round's pool. A head that still names a job moved
	 * to another pool since it was read (here: a head that names pool a's big1 to a default GPU)
	 * gives it neither to the round's scan nor to rung_claim's pick. */
	p[0] = dflt;
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT coalesce(string_agg(status || ':' || coalesce(job_id::text, '-'), ','), '-') "
		      "FROM rung_claim_pool_round($1::jsonb, $2::int, false, 'a')", 2, p), "none:-",
		   "pools: a waiter whose worker is in another pool than its round's takes none of that pool's jobs");
	q1("ROLLBACK", 0, NULL);
	q1("BEGIN", 0, NULL);
	q1("CREATE OR REPLACE FUNCTION rung_queue_head(p_capped text[], p_n int, p_running jsonb, p_pool text) "
	   "RETURNS bigint[] LANGUAGE sql AS $$ SELECT ARRAY[(SELECT id FROM jobs WHERE name = 'big1')] $$", 0, NULL);
	TAP_STR_EQ(q1("SELECT coalesce(string_agg(status || ':' || coalesce(job_id::text, '-'), ','), '-') "
		      "FROM rung_claim_pool_round($1::jsonb, $2::int, true, 'default')", 2, p), "none:-",
		   "pools: the round's head, read again under its lock, gives no job of another pool");
	q1("ROLLBACK", 0, NULL);
	q1("BEGIN", 0, NULL);
	q1("CREATE OR REPLACE FUNCTION rung_queue_head(p_capped text[], p_n int, p_running jsonb, p_pool text) "
	   "RETURNS bigint[] LANGUAGE sql AS $$ SELECT ARRAY[(SELECT id FROM jobs WHERE name = 'big1')] $$", 0, NULL);
	p[0] = wdef;
	TAP_STR_EQ(q1("SELECT rung_claim($1::bigint, 'PD-1', 30, NULL, '{pool-nobody}')->>'status'", 1, p), "none",
		   "pools: nor does rung_claim's pick from a capped head");
	q1("ROLLBACK", 0, NULL);
	free(ctx_items);
	free(three);
	free(dflt);
	PQfinish(pg);
}

/* Jobs that start later (migration 025, sql/functions/23_scheduled.sql): a submit item whose start
 * time is in the future is stored scheduled with its run_after (by the database's clock for
 * start_in_s), one whose time has passed is queued, in the set-wise and the keyed paths, and a body
 * with another start time under the same key is a conflict; no claim takes a scheduled job;
 * rung_start_due queues the due ones earliest first, at most its limit, passes over one another
 * transaction holds (SKIP LOCKED) and writes their events in that order, reading a few blocks among
 * 10,000 that are not due; rung_start_now; cancel, cancel-matching and priority take scheduled jobs;
 * /metrics' history never counts them as ended, the live counts do count them; retention never
 * deletes one. */
/* A submit item after job X (rung_submit_batch's item path), as text: {"i", "name", "owner", "kind",
 * "priority", "recovery", "key", "after", "body"}. Heap. */
static char *after_item(const char *name, const char *x)
{
	return xasprintf("[{\"i\":0,\"name\":\"%s\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,"
			 "\"recovery\":{},\"key\":null,\"after\":[%s],\"body\":{\"config\":{\"x\":1},\"after\":[%s]}}]",
			 name, x, x);
}

/* Jobs that run after others (migration 033) at the SQL level: the single apply path's reply says
 * "dependents" and the trigger queues the waiting job; a submit that names a job whose success is
 * being committed by another transaction waits for that commit (the lock rung_after_arm takes even
 * on a job already marked) and then reads the success, so the new job is queued, not left waiting
 * for a release that already happened. */
static void test_after(void)
{
	const char *p[4];
	char wid[32], xid[32], aid[32], tok[80], *items;
	PGconn *other, *watch;
	PGresult *r;
	int waited = 0;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox, metrics_pruned "
	   "CASCADE", 0, NULL);
	q1("SELECT rung_register('wa', 'h', '[{\"uuid\":\"A-1\",\"memory_total_mib\":24000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wa'", 0, NULL));
	q1("INSERT INTO jobs (name, owner, kind, target_config, recovery) VALUES ('x', 'o', 'image', '{\"x\":1}', '{}')", 0, NULL);
	snprintf(xid, sizeof xid, "%s", q1("SELECT id FROM jobs WHERE name = 'x'", 0, NULL));
	p[0] = wid;
	snprintf(aid, sizeof aid, "%s", q1("SELECT rung_claim($1::bigint, 'A-1', 30, NULL)->'lease'->>'attempt_id'", 1, p));
	p[0] = aid;
	snprintf(tok, sizeof tok, "%s", q1("SELECT token FROM attempts WHERE id = $1::bigint", 1, p));
	items = after_item("d0", xid);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT status || ':' || (job->>'state') FROM rung_submit_batch($1::jsonb)", 1, p), "created:scheduled",
		   "after: d0 after the running x waits, scheduled");
	free(items);
	/* x's success is being committed by another transaction while d1 is submitted after it */
	other = PQconnectdb(url);
	watch = PQconnectdb(url);
	PQclear(PQexec(other, "BEGIN"));
	p[0] = aid;
	p[1] = tok;
	r = PQexecParams(other, "SELECT rung_finish_apply($1::bigint, $2, '{}'::jsonb, '{\"class\": \"success\", "
			 "\"job_state\": \"succeeded\", \"rule\": \"r\", \"reason\": \"done\"}'::jsonb, NULL)->>'dependents'",
			 2, NULL, p, NULL, NULL, 0);
	TAP_STR_EQ(PQresultStatus(r) == PGRES_TUPLES_OK && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : "-", "true",
		   "after: rung_finish_apply's reply says dependents: rungd wakes the waiters after the commit");
	PQclear(r);
	items = after_item("d1", xid);
	p[0] = items;
	TAP_OK(PQsendQueryParams(pg, "SELECT status || ':' || (job->>'state') FROM rung_submit_batch($1::jsonb)", 1, NULL, p,
				 NULL, NULL, 0) == 1, "after: d1 submitted after x");
	/* until the submit waits for x's row lock (not a sleep: pg_stat_activity says so) */
	for (int i = 0; i < 2000 && !waited; i++) {
		PGresult *w = PQexec(watch, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
					    "AND query LIKE '%rung_submit_batch%'");
		waited = PQresultStatus(w) == PGRES_TUPLES_OK && atoi(PQgetvalue(w, 0, 0)) > 0;
		PQclear(w);
		if (!waited)
			usleep(5000);
	}
	TAP_OK(waited, "after: the submit waits for the finish's lock on x");
	PQclear(PQexec(other, "COMMIT"));
	r = PQgetResult(pg);
	TAP_STR_EQ(PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : PQerrorMessage(pg), "created:queued",
		   "after: once the finish committed, d1 reads x succeeded and is queued at once");
	PQclear(r);
	while ((r = PQgetResult(pg)))
		PQclear(r);
	free(items);
	TAP_STR_EQ(q1("SELECT string_agg(j.name || ':' || j.state || ':' || coalesce(j.waits_for::text, '-'), ',' ORDER BY j.id) "
		      "FROM jobs j WHERE j.name LIKE 'd%'", 0, NULL),
		   "d0:queued:-,d1:queued:-", "after: d0 was queued by the trigger on x's success, d1 at its submit");
	TAP_STR_EQ(q1("SELECT string_agg(e.kind || ':' || e.from_state || '>' || e.to_state, ',') FROM events e JOIN jobs j "
		      "ON j.id = e.job_id WHERE j.name = 'd0' AND e.kind = 'dependencies_met'", 0, NULL),
		   "dependencies_met:scheduled>queued", "after: d0's event dependencies_met");
	PQfinish(other);
	PQfinish(watch);
	PQfinish(pg);
}

/* A submit item after jobs X (ids, comma-separated) with after_when WHEN (NULL: none), as text. Heap. */
static char *after_when_item(const char *name, const char *x, const char *when)
{
	char *w = when ? xasprintf(",\"after_when\":\"%s\"", when) : xstrdup("");
	char *out = xasprintf("[{\"i\":0,\"name\":\"%s\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,"
			      "\"recovery\":{},\"key\":null,\"after\":[%s]%s,\"body\":{\"config\":{\"x\":1},\"after\":[%s]%s}}]",
			      name, x, w, x, w);
	free(w);
	return out;
}

/* Submits after_when_item(name, x, when) and answers "status:state" (or the status alone). */
static char *after_when_submit(const char *name, const char *x, const char *when)
{
	char *items = after_when_item(name, x, when);
	const char *p[1] = { items };
	char *out = q1("SELECT status || coalesce(':' || (job->>'state'), '') FROM rung_submit_batch($1::jsonb)", 1, p);
	free(items);
	return out;
}

/* A job's id by its name into buf (size 32). */
static void job_id_of(const char *name, char *buf)
{
	const char *p[1] = { name };
	snprintf(buf, 32, "%s", q1("SELECT id FROM jobs WHERE name = $1", 1, p));
}

/* "name:state:waits_for:after_when" of the jobs named in names (SQL LIKE pattern), by id. */
static char *after_states(const char *like)
{
	const char *p[1] = { like };
	return q1("SELECT string_agg(j.name || ':' || j.state || ':' || coalesce(j.waits_for::text, '-') || ':' || "
		  "coalesce(j.after_when, '-'), ',' ORDER BY j.id) FROM jobs j WHERE j.name LIKE $1", 1, p);
}

/* Whether a backend other than watch's own waits for a lock while running a query LIKE like, within
 * about 10 s (pg_stat_activity says so: not a sleep standing in for it). */
static bool lock_waiter(PGconn *watch, const char *like)
{
	const char *p[1] = { like };

	for (int i = 0; i < 2000; i++) {
		PGresult *w = PQexecParams(watch, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
						  "AND query LIKE $1", 1, NULL, p, NULL, NULL, 0);
		bool found = PQresultStatus(w) == PGRES_TUPLES_OK && atoi(PQgetvalue(w, 0, 0)) > 0;
		PQclear(w);
		if (found)
			return true;
		usleep(5000);
	}
	return false;
}

/* Starts job NAME on GPU A-1 of worker wid (inserted, claimed): its attempt's id and token into aid and
 * tok (sizes 32 and 80). */
static void run_job(const char *name, const char *wid, char *aid, char *tok)
{
	const char *p[2] = { name, wid };

	q1("INSERT INTO jobs (name, owner, kind, target_config, recovery, priority) VALUES ($1, 'o', 'image', '{\"x\":1}', '{}', "
	   "-1000)", 1, p);
	p[0] = wid;
	snprintf(aid, 32, "%s", q1("SELECT rung_claim($1::bigint, 'A-1', 30, NULL)->'lease'->>'attempt_id'", 1, p));
	p[0] = aid;
	snprintf(tok, 80, "%s", q1("SELECT token FROM attempts WHERE id = $1::bigint", 1, p));
}

/* after_when "failed" against a success being committed (migration 036): a submit that names the job
 * waits for its lock and is then refused (after_never), not queued to run after a success; and a
 * dependent retried while the success commits is cancelled by its trigger, not left waiting for a
 * success that has come. Each would fail with the state read before the lock was held. */
static void after_when_races(const char *wid)
{
	const char *p[2];
	char aid[32], tok[80], a[32], d[32], *items;
	PGconn *other = PQconnectdb(url), *watch = PQconnectdb(url);
	PGresult *r;
	static const char ok[] = "SELECT rung_finish_apply($1::bigint, $2, '{}'::jsonb, '{\"class\": \"success\", "
				 "\"job_state\": \"succeeded\", \"rule\": \"r\", \"reason\": \"done\"}'::jsonb, NULL)->>'job_state'";

	/* 1: the submit */
	run_job("race-a", wid, aid, tok);
	job_id_of("race-a", a);
	PQclear(PQexec(other, "BEGIN"));
	p[0] = aid;
	p[1] = tok;
	PQclear(PQexecParams(other, ok, 2, NULL, p, NULL, NULL, 0));
	items = after_when_item("race-n", a, "failed");
	p[0] = items;
	TAP_OK(PQsendQueryParams(pg, "SELECT status FROM rung_submit_batch($1::jsonb)", 1, NULL, p, NULL, NULL, 0) == 1,
	       "after_when race: a submit after race-a only if it fails, while race-a's success commits");
	TAP_OK(lock_waiter(watch, "%rung_submit_batch%"), "after_when race: the submit waits for race-a's lock");
	PQclear(PQexec(other, "COMMIT"));
	r = PQgetResult(pg);
	TAP_STR_EQ(PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : PQerrorMessage(pg), "after_never",
		   "after_when race: once the success committed, the submit is refused (it would never start)");
	PQclear(r);
	while ((r = PQgetResult(pg)))
		PQclear(r);
	free(items);
	TAP_STR_EQ(q1("SELECT count(*) FROM jobs WHERE name = 'race-n'", 0, NULL), "0", "after_when race: nothing stored");

	/* 2: the retry */
	run_job("race-b", wid, aid, tok);
	job_id_of("race-b", a);
	TAP_STR_EQ(after_when_submit("race-d", a, "failed"), "created:scheduled", "after_when race: race-d after race-b (failed)");
	job_id_of("race-d", d);
	p[0] = d;
	q1("SELECT rung_cancel($1::bigint)", 1, p);
	q1("BEGIN", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_retry($1::bigint, 'current', 'ops', NULL)->'job'->>'state'", 1, p), "scheduled",
		   "after_when race: race-d cancelled and retried (not committed): it waits for race-b again");
	p[0] = aid;
	p[1] = tok;
	TAP_OK(PQsendQueryParams(other, ok, 2, NULL, p, NULL, NULL, 0) == 1, "after_when race: race-b's success sent meanwhile");
	TAP_OK(lock_waiter(watch, "%rung_finish_apply%"), "after_when race: its trigger waits for race-d's lock");
	q1("COMMIT", 0, NULL);
	r = PQgetResult(other);
	TAP_STR_EQ(PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : PQerrorMessage(other), "succeeded",
		   "after_when race: race-b succeeded");
	PQclear(r);
	while ((r = PQgetResult(other)))
		PQclear(r);
	p[0] = d;
	TAP_STR_EQ(q1("SELECT state FROM jobs WHERE id = $1::bigint", 1, p), "cancelled",
		   "after_when race: the retried race-d is cancelled by race-b's success, not left waiting for it");
	PQfinish(other);
	PQfinish(watch);
}

/* after_when (migration 036) at the SQL level: which endings release a waiting job. "ended": any ending
 * (a cancel here, a failure through rung_finish_apply, whose reply then says "dependents" so that rungd
 * wakes the waiters); "failed": a failure or a cancel, and a success cancels it (and its own
 * dependents' triggers run in turn); a submit or a change with "failed" after a job that already
 * succeeded is refused ("after_never"), a retry goes on without it; a change without after_when keeps
 * the job's. */
static void test_after_when(void)
{
	const char *p[5];
	char p1[32], p2[32], p3[32], id[32], wid[32], aid[32], tok[80], *want;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox, metrics_pruned "
	   "CASCADE", 0, NULL);
	q1("INSERT INTO jobs (name, owner, kind, target_config, recovery) VALUES ('p1', 'o', 'image', '{\"x\":1}', '{}'), "
	   "('p2', 'o', 'image', '{\"x\":1}', '{}'), ('p3', 'o', 'image', '{\"x\":1}', '{}')", 0, NULL);
	job_id_of("p1", p1);
	job_id_of("p2", p2);
	job_id_of("p3", p3);

	/* p1 cancelled: the jobs after it with "ended" or "failed" start, the default one waits on */
	TAP_STR_EQ(after_when_submit("a-s", p1, NULL), "created:scheduled", "after_when: a-s after p1 (succeeded) waits");
	TAP_STR_EQ(after_when_submit("a-e", p1, "ended"), "created:scheduled", "after_when: a-e after p1 (ended) waits");
	TAP_STR_EQ(after_when_submit("a-f", p1, "failed"), "created:scheduled", "after_when: a-f after p1 (failed) waits");
	TAP_STR_EQ(after_when_submit("a-x", p1, "succeeded"), "created:scheduled", "after_when: a-x after p1 (succeeded, said)");
	want = xasprintf("a-s:scheduled:{%s}:-,a-e:scheduled:{%s}:ended,a-f:scheduled:{%s}:failed,a-x:scheduled:{%s}:-",
			 p1, p1, p1, p1);
	TAP_STR_EQ(after_states("a-%"), want, "after_when: stored (\"succeeded\", the default, as none)");
	free(want);
	job_id_of("a-f", id);
	p[0] = id;
	want = xasprintf("failed:waits for job %s to fail or be cancelled", p1);
	TAP_STR_EQ(q1("SELECT (rung_job_json(j)->>'after_when') || ':' || j.next_action FROM jobs j WHERE j.id = $1::bigint",
		      1, p), want, "after_when: the JOB says it, next_action what it waits for");
	free(want);
	job_id_of("a-s", id);
	TAP_STR_EQ(q1("SELECT rung_job_json(j)->>'after_when' FROM jobs j WHERE j.id = $1::bigint", 1, p), "succeeded",
		   "after_when: a job after others says succeeded by default");
	TAP_STR_EQ(q1("SELECT coalesce(rung_job_json(j)->>'after_when', 'null') FROM jobs j WHERE j.name = 'p1'", 0, NULL),
		   "null", "after_when: null on a job that runs after none");
	p[0] = p1;
	q1("SELECT rung_cancel($1::bigint)", 1, p);
	want = xasprintf("a-s:scheduled:{%s}:-,a-e:queued:-:ended,a-f:queued:-:failed,a-x:scheduled:{%s}:-", p1, p1);
	TAP_STR_EQ(after_states("a-%"), want, "after_when: p1's cancel queues a-e and a-f; a-s and a-x wait on");
	free(want);
	want = xasprintf("job %s was cancelled, the last of the jobs it runs after:cancelled", p1);
	TAP_STR_EQ(q1("SELECT e.reason || ':' || (e.data->>'ended') FROM events e JOIN jobs j ON j.id = e.job_id "
		      "WHERE j.name = 'a-e' AND e.kind = 'dependencies_met'", 0, NULL), want,
		   "after_when: a-e's dependencies_met names the ending");
	free(want);

	/* p2 succeeds: a job after it with "failed" is cancelled, and that ending releases its own "ended" dependent */
	TAP_STR_EQ(after_when_submit("b-f", p2, "failed"), "created:scheduled", "after_when: b-f after p2 (failed)");
	TAP_STR_EQ(after_when_submit("b-e", p2, "ended"), "created:scheduled", "after_when: b-e after p2 (ended)");
	job_id_of("b-f", id);
	TAP_STR_EQ(after_when_submit("c-e", id, "ended"), "created:scheduled", "after_when: c-e after b-f (ended)");
	TAP_STR_EQ(after_when_submit("c-s", id, NULL), "created:scheduled", "after_when: c-s after b-f (succeeded)");
	p[0] = p2;
	q1("UPDATE jobs SET state = 'succeeded', finished_at = now() WHERE id = $1::bigint", 1, p);
	want = xasprintf("b-f:cancelled:{%s}:failed,b-e:queued:-:ended", p2);
	TAP_STR_EQ(after_states("b-%"), want, "after_when: p2's success cancels b-f (it would never start), queues b-e");
	free(want);
	want = xasprintf("c-e:queued:-:ended,c-s:scheduled:{%s}:-", id);
	TAP_STR_EQ(after_states("c-%"), want, "after_when: b-f's cancel queues c-e in turn; c-s waits (b-f did not succeed)");
	free(want);
	want = xasprintf("job %s succeeded: this job was to run only if it failed or was cancelled|cancelled|%s", p2, p2);
	TAP_STR_EQ(q1("SELECT e.reason || '|' || (j.result->>'class') || '|' || (e.data->>'succeeded') FROM events e "
		      "JOIN jobs j ON j.id = e.job_id WHERE j.name = 'b-f' AND e.kind = 'cancelled'", 0, NULL), want,
		   "after_when: b-f's event and result say why it was cancelled");
	free(want);

	/* a submit with "failed" after a job that succeeded would never start: refused, nothing stored */
	TAP_STR_EQ(after_when_submit("n-f", p2, "failed"), "after_never", "after_when: failed after a success is refused");
	want = xasprintf("{\"after\": %s}", p2);
	{
		char *items = after_when_item("n-f", p2, "failed");
		p[0] = items;
		TAP_STR_EQ(q1("SELECT job::text FROM rung_submit_batch($1::jsonb)", 1, p), want, "after_when: ... naming it");
		free(items);
	}
	free(want);
	TAP_STR_EQ(q1("SELECT count(*) FROM jobs WHERE name = 'n-f'", 0, NULL), "0", "after_when: ... and nothing is stored");
	/* after jobs that already ended their way: queued at once */
	TAP_STR_EQ(after_when_submit("n-e", p1, "ended"), "created:queued", "after_when: ended after a cancelled job: queued");
	TAP_STR_EQ(after_when_submit("n-g", p1, "failed"), "created:queued", "after_when: failed after a cancelled job: queued");

	/* a retry of b-f (cancelled, after p2, which succeeded) runs it: the person asked */
	job_id_of("b-f", id);
	p[0] = id;
	TAP_STR_EQ(q1("SELECT (rung_retry($1::bigint, 'current', 'ops', NULL)->'job'->>'state')", 1, p), "queued",
		   "after_when: a retry of b-f runs it without p2");

	/* a change: "ended" kept when not given, "failed" after a success refused, none drops it */
	q1("INSERT INTO jobs (name, owner, kind, target_config, recovery) VALUES ('q', 'o', 'image', '{\"x\":1}', '{}')", 0, NULL);
	job_id_of("q", id);
	{
		char arr[80];
		snprintf(arr, sizeof arr, "{%s}", p3);
		p[0] = id;
		p[1] = arr;
		p[2] = "ended";
		TAP_STR_EQ(q1("SELECT (r->>'status') || ':' || (r->'job'->>'state') || ':' || (r->'job'->>'after_when') "
			      "FROM rung_set_after_when($1::bigint, $2::bigint[], $3, NULL, 'ops') r", 3, p), "ok:scheduled:ended",
			   "after_when: q set to run after p3 once it ends");
		TAP_STR_EQ(q1("SELECT (r->>'status') || ':' || (r->'job'->>'after_when') "
			      "FROM rung_set_after($1::bigint, $2::bigint[], NULL, 'ops') r", 2, p), "ok:ended",
			   "after_when: the release before's rung_set_after keeps it");
		snprintf(arr, sizeof arr, "{%s,%s}", p3, p2);
		p[2] = "failed";
		want = xasprintf("after_never:%s", p2);
		TAP_STR_EQ(q1("SELECT (r->>'status') || ':' || (r->>'after') FROM rung_set_after_when($1::bigint, $2::bigint[], $3, "
			      "NULL, 'ops') r", 3, p), want, "after_when: a change to failed after a success is refused");
		free(want);
		TAP_STR_EQ(q1("SELECT (r->>'status') || ':' || (r->'job'->>'state') || ':' || coalesce(r->'job'->>'after_when', 'null') "
			      "FROM rung_set_after_when($1::bigint, NULL, 'ended', NULL, 'ops') r", 1, p), "ok:queued:null",
			   "after_when: no jobs, no after_when");
	}

	/* a failure through rung_finish_apply: the reply says dependents, the "ended" job is queued */
	q1("SELECT rung_register('wa', 'h', '[{\"uuid\":\"A-1\",\"memory_total_mib\":24000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'wa'", 0, NULL));
	q1("UPDATE jobs SET state = 'cancelled' WHERE state = 'queued' AND id <> $1::bigint", 1, (const char *[]){ p3 });
	p[0] = wid;
	snprintf(aid, sizeof aid, "%s", q1("SELECT rung_claim($1::bigint, 'A-1', 30, NULL)->'lease'->>'attempt_id'", 1, p));
	p[0] = aid;
	snprintf(tok, sizeof tok, "%s", q1("SELECT token FROM attempts WHERE id = $1::bigint", 1, p));
	TAP_STR_EQ(q1("SELECT j.name FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE a.id = $1::bigint", 1, p), "p3",
		   "after_when: p3 runs");
	TAP_STR_EQ(after_when_submit("d-e", p3, "ended"), "created:scheduled", "after_when: d-e after the running p3 (ended)");
	p[1] = tok;
	TAP_STR_EQ(q1("SELECT rung_finish_apply($1::bigint, $2, '{}'::jsonb, '{\"class\": \"not_oom\", \"job_state\": \"failed\", "
		      "\"rule\": \"r\", \"reason\": \"a crash\"}'::jsonb, NULL)->>'dependents'", 2, p), "true",
		   "after_when: a failure's reply says dependents (rungd wakes the waiters)");
	TAP_STR_EQ(after_states("d-%"), "d-e:queued:-:ended", "after_when: p3's failure queues d-e");
	{
		/* the set-wise apply (62): a failure's row says dependents too, and the "ended" job is queued */
		char *batch;
		run_job("p5", wid, aid, tok);
		job_id_of("p5", id);
		TAP_STR_EQ(after_when_submit("e-e", id, "ended"), "created:scheduled", "after_when: e-e after the running p5 (ended)");
		batch = xasprintf("[{\"i\":0,\"id\":%s,\"token\":\"%s\",\"facts\":{},\"decision\":{\"class\":\"not_oom\","
				  "\"rule\":\"r\",\"reason\":\"a crash\",\"job_state\":\"failed\"}}]", aid, tok);
		p[0] = batch;
		TAP_STR_EQ(q1("SELECT (doc->>'job_state') || ':' || (doc->>'dependents') FROM rung_finish_apply_batch($1::jsonb)", 1, p),
			   "failed:true", "after_when: the batch apply's reply to p5's failure says dependents");
		TAP_STR_EQ(after_states("e-%"), "e-e:queued:-:ended", "after_when: and e-e is queued");
		free(batch);
	}
	after_when_races(wid);
	PQfinish(pg);
}

static void test_scheduled(void)
{
	const char *p[3];
	char ms_ahead[32], ms_past[32], wid[32], before[16384], *items;
	PGconn *other;
	PGresult *r;
	long b;

	pg = PQconnectdb(url);
	q1("TRUNCATE jobs, attempts, event_log, gpus, workers, gpu_faults, escalations, webhook_outbox, metrics_pruned "
	   "CASCADE", 0, NULL);
	snprintf(ms_ahead, sizeof ms_ahead, "%s", q1("SELECT (extract(epoch FROM now() + interval '2 hours') * 1000)::bigint", 0, NULL));
	snprintf(ms_past, sizeof ms_past, "%s", q1("SELECT (extract(epoch FROM now() - interval '1 hour') * 1000)::bigint", 0, NULL));
	items = xasprintf("["
			  "{\"i\":0,\"name\":\"in\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"recovery\":{},"
			  "\"key\":null,\"start_in_s\":3600,\"body\":{\"config\":{\"x\":1},\"start_in_s\":3600}},"
			  "{\"i\":1,\"name\":\"at\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"recovery\":{},"
			  "\"key\":null,\"run_after_ms\":%s,\"body\":{\"config\":{\"x\":2}}},"
			  "{\"i\":2,\"name\":\"past\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"recovery\":{},"
			  "\"key\":null,\"run_after_ms\":%s,\"body\":{\"config\":{\"x\":3}}},"
			  "{\"i\":3,\"name\":\"now\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"recovery\":{},"
			  "\"key\":null,\"body\":{\"config\":{\"x\":4}}}]", ms_ahead, ms_past);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(status || ':' || (job->>'state') || ':' || (job->>'run_after' IS NOT NULL), ',' "
		      "ORDER BY i) FROM rung_submit_batch($1::jsonb)", 1, p),
		   "created:scheduled:true,created:scheduled:true,created:queued:false,created:queued:false",
		   "scheduled: a set-wise batch: start_in_s and a future run_after scheduled, a past one and none queued");
	free(items);
	p[0] = ms_ahead;
	TAP_STR_EQ(q1("SELECT (abs(extract(epoch FROM run_after - now()) - 3600) < 5) || ':' || "
		      "(SELECT run_after = to_timestamp($1::float8 / 1000) FROM jobs WHERE name = 'at') FROM jobs WHERE name = 'in'",
		      1, p), "true:true", "scheduled: start_in_s counts from the database's now(), run_after_ms is the time given");
	TAP_STR_EQ(q1("SELECT string_agg(j.name || ':' || e.to_state || ':' || (e.data ? 'run_after'), ',' ORDER BY j.id) "
		      "FROM jobs j JOIN events e ON e.job_id = j.id AND e.kind = 'submitted'", 0, NULL),
		   "in:scheduled:true,at:scheduled:true,past:queued:false,now:queued:false",
		   "scheduled: the submitted events go to scheduled with the start time, or to queued");
	/* the keyed path: scheduled too; the same key and body a repeat, another start time a conflict */
	items = xasprintf("["
			  "{\"i\":0,\"name\":\"k\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"recovery\":{},"
			  "\"key\":\"o/s1\",\"start_in_s\":600,\"body\":{\"config\":{\"x\":5},\"start_in_s\":600}},"
			  "{\"i\":1,\"name\":\"k\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"recovery\":{},"
			  "\"key\":\"o/s1\",\"start_in_s\":600,\"body\":{\"config\":{\"x\":5},\"start_in_s\":600}},"
			  "{\"i\":2,\"name\":\"k\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"recovery\":{},"
			  "\"key\":\"o/s1\",\"start_in_s\":900,\"body\":{\"config\":{\"x\":5},\"start_in_s\":900}},"
			  "{\"i\":3,\"name\":\"k2\",\"owner\":\"o\",\"kind\":\"image\",\"priority\":100,\"recovery\":{},"
			  "\"key\":\"o/s2\",\"run_after_ms\":%s,\"body\":{\"config\":{\"x\":6}}}]", ms_past);
	p[0] = items;
	TAP_STR_EQ(q1("SELECT string_agg(status || ':' || (job->>'state'), ',' ORDER BY i) FROM rung_submit_batch($1::jsonb)", 1, p),
		   "created:scheduled,existing:scheduled,conflict:scheduled,created:queued",
		   "scheduled: keyed items: scheduled, a repeat, another start time under the key a conflict, a past time queued");
	free(items);
	TAP_STR_EQ(q1("SELECT string_agg(e.to_state, ',' ORDER BY e.id) FROM events e JOIN jobs j ON j.id = e.job_id "
		      "WHERE j.name IN ('k', 'k2')", 0, NULL), "scheduled,queued", "scheduled: the keyed path's events");

	/* no claim takes a scheduled job: three GPUs, the two queued jobs */
	q1("SELECT rung_register('ws', 'h', '[{\"uuid\":\"S-1\",\"memory_total_mib\":24000},"
	   "{\"uuid\":\"S-2\",\"memory_total_mib\":24000},{\"uuid\":\"S-3\",\"memory_total_mib\":24000}]')", 0, NULL);
	snprintf(wid, sizeof wid, "%s", q1("SELECT id FROM workers WHERE name = 'ws'", 0, NULL));
	items = xasprintf("[{\"i\":0,\"worker\":%s,\"gpu\":\"S-1\",\"fresh\":true},{\"i\":1,\"worker\":%s,\"gpu\":\"S-2\","
			  "\"fresh\":true},{\"i\":2,\"worker\":%s,\"gpu\":\"S-3\",\"fresh\":true}]", wid, wid, wid);
	p[0] = items;
	p[1] = "30";
	TAP_STR_EQ(q1("SELECT string_agg(b.i || ':' || b.status || ':' || coalesce(j.name, '-'), ',' ORDER BY b.i) "
		      "FROM rung_claim_batch($1::jsonb, $2::int) b LEFT JOIN jobs j ON j.id = b.job_id", 2, p),
		   "0:ok:past,1:ok:now,2:ok:k2", "scheduled: a claim round leases the queued jobs and none of the scheduled ones");
	p[0] = wid;
	TAP_STR_EQ(q1("SELECT rung_claim($1::bigint, 'S-3', 30, NULL)->>'status'", 1, p), "none",
		   "scheduled: nor does rung_claim, with a GPU free");
	free(items);

	/* nothing due: nothing queued */
	TAP_STR_EQ(q1("SELECT count(*) FROM rung_start_due(500)", 0, NULL), "0", "start due: nothing due, nothing queued");
	/* three due, in an order unlike the ids: at (30 min ago), k (20), in (10) */
	q1("UPDATE jobs SET run_after = now() - CASE name WHEN 'at' THEN interval '30 minutes' WHEN 'k' THEN interval "
	   "'20 minutes' ELSE interval '10 minutes' END WHERE state = 'scheduled' AND name IN ('in', 'at', 'k')", 0, NULL);
	q1("INSERT INTO jobs (name, kind, state, run_after, target_config, recovery) VALUES "
	   "('later', 'image', 'scheduled', now() + interval '1 day', '{\"x\":9}', '{}')", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(j.name, ',' ORDER BY d.run_after) FROM rung_start_due(2) d JOIN jobs j ON j.id = d.job_id",
		      0, NULL), "at,k", "start due: a limit of 2 queues the two earliest start times");
	/* another transaction holds the third: passed over, then taken once it lets go */
	other = PQconnectdb(url);
	PQclear(PQexec(other, "BEGIN"));
	PQclear(PQexec(other, "SELECT id FROM jobs WHERE name = 'in' FOR UPDATE"));
	TAP_STR_EQ(q1("SELECT count(*) FROM rung_start_due(500)", 0, NULL), "0",
		   "start due: a due job another transaction holds is skipped, without waiting (SKIP LOCKED)");
	PQclear(PQexec(other, "ROLLBACK"));
	PQfinish(other);
	TAP_STR_EQ(q1("SELECT string_agg(j.name, ',') FROM rung_start_due(500) d JOIN jobs j ON j.id = d.job_id", 0, NULL), "in",
		   "start due: let go, it is queued by the next run");
	TAP_STR_EQ(q1("SELECT string_agg(name || ':' || state, ',' ORDER BY id) FROM jobs WHERE run_after IS NOT NULL", 0, NULL),
		   "in:queued,at:queued,k:queued,later:scheduled", "start due: the due ones queued, keeping run_after; the later one stays");
	TAP_STR_EQ(q1("SELECT string_agg(j.name || ':' || e.from_state || '>' || e.to_state || ':' || "
		      "(e.data->>'run_after' IS NOT NULL), ',' ORDER BY e.id) FROM events e JOIN jobs j ON j.id = e.job_id "
		      "WHERE e.kind = 'start_time_reached'", 0, NULL),
		   "at:scheduled>queued:true,k:scheduled>queued:true,in:scheduled>queued:true",
		   "start due: an event start_time_reached each, in start-time order");
	TAP_STR_EQ(q1("SELECT count(*) FROM lease_waits", 0, NULL), "3", "scheduled: lease waits are the three leases so far");

	/* start now, cancel, priority */
	TAP_STR_EQ(q1("SELECT (rung_start_now(id, 'ops')->>'status') || ':' || (rung_start_now(id, 'ops')->>'status') "
		      "FROM jobs WHERE name = 'later'", 0, NULL), "ok:conflict", "start now: a scheduled job, then a conflict");
	TAP_STR_EQ(q1("SELECT state || ':' || e.kind || ':' || e.from_state || '>' || e.to_state || ':' || (e.data->>'by') || "
		      "':' || e.reason FROM jobs j JOIN events e ON e.job_id = j.id AND e.kind = 'started_now' WHERE j.name = 'later'",
		      0, NULL), "queued:started_now:scheduled>queued:ops:started now by ops, before its start time",
		   "start now: queued, with an event started_now saying who");
	TAP_STR_EQ(q1("SELECT coalesce(rung_start_now(-1, NULL)::text, 'null')", 0, NULL), "null", "start now: no such job: NULL");
	q1("INSERT INTO jobs (name, owner, kind, state, run_after, target_config, recovery, labels) VALUES "
	   "('s1', 'o', 'image', 'scheduled', now() + interval '1 hour', '{\"x\":1}', '{}', '{\"b\": \"1\"}'), "
	   "('s2', 'o', 'image', 'scheduled', now() + interval '1 hour', '{\"x\":1}', '{}', '{\"b\": \"1\"}'), "
	   "('q1', 'o', 'image', 'queued', NULL, '{\"x\":1}', '{}', '{\"b\": \"1\"}'), "
	   "('s3', 'o', 'image', 'scheduled', now() + interval '1 hour', '{\"x\":1}', '{}', '{\"b\": \"2\"}')", 0, NULL);
	TAP_STR_EQ(q1("SELECT (rung_set_priority(id, 5, 'ops')->>'status') || ':' || priority FROM jobs WHERE name = 's1'", 0, NULL),
		   "ok:100", "priority: a scheduled job's changes");
	TAP_STR_EQ(q1("SELECT priority || ':' || state FROM jobs WHERE name = 's1'", 0, NULL), "5:scheduled",
		   "priority: it stays scheduled with its new priority");
	p[0] = "{\"b\": \"1\"}";
	TAP_STR_EQ(q1("SELECT string_agg(j.name, ',' ORDER BY j.id) FROM jobs j WHERE j.id IN (SELECT jsonb_array_elements_text("
		      "rung_cancel_matching('scheduled', 'o', $1::jsonb, NULL, 10, true)->'ids')::bigint)", 1, p), "s1,s2",
		   "cancel matching, state scheduled: only the scheduled ones (a dry run)");
	TAP_STR_EQ(q1("SELECT string_agg(j.name, ',' ORDER BY j.id) FROM jobs j WHERE j.id IN (SELECT jsonb_array_elements_text("
		      "rung_cancel_matching('queued', 'o', $1::jsonb, NULL, 10, true)->'ids')::bigint)", 1, p), "s1,s2,q1",
		   "cancel matching, state queued: every job not started yet, queued or scheduled");
	TAP_STR_EQ(q1("SELECT rung_cancel(id)->>'state' FROM jobs WHERE name = 's3'", 0, NULL), "cancelled",
		   "cancel: a scheduled job is cancelled at once");
	TAP_STR_EQ(q1("SELECT (result->>'reason') || ':' || e.from_state || '>' || e.to_state FROM jobs j JOIN events e "
		      "ON e.job_id = j.id AND e.kind = 'cancelled' WHERE j.name = 's3'", 0, NULL),
		   "cancelled while scheduled:scheduled>cancelled", "cancel: its reason and event say it was scheduled");
	q1("SELECT rung_cancel_matching('active', 'o', $1::jsonb, NULL, 10, false)", 1, p);
	TAP_STR_EQ(q1("SELECT string_agg(name || ':' || state, ',' ORDER BY id) FROM jobs WHERE name IN ('s1', 's2', 'q1')", 0, NULL),
		   "s1:cancelled,s2:cancelled,q1:cancelled", "cancel matching, state active: the scheduled ones too");

	/* what the counts say: a scheduled job is neither ended (history) nor queued; it is scheduled (live) */
	q1("INSERT INTO jobs (name, kind, state, run_after, target_config, recovery, created_at) VALUES "
	   "('far', 'image', 'scheduled', now() + interval '300 days', '{\"x\":1}', '{}', now() - interval '400 days')", 0, NULL);
	snprintf(before, sizeof before, "%s", history_counts());
	TAP_OK(!strstr(before, "\"scheduled\"") && !strstr(before, "\"queued\"") && strstr(before, "\"cancelled\":4"),
	       "the history counts ended jobs only: four cancelled, no scheduled (or queued) among them");
	q1("UPDATE jobs SET run_after = now() - interval '90 seconds' WHERE name = 'far'", 0, NULL);
	r = PQexec(pg, sql_metrics_live);
	{
		json_t *live = PQresultStatus(r) == PGRES_TUPLES_OK ? json_loads(PQgetvalue(r, 0, 0), 0, NULL) : NULL;
		TAP_OK(live && json_integer_value(json_object_get(live, "scheduled")) == 1 &&
			       json_number_value(json_object_get(live, "scheduled_overdue_s")) >= 89 &&
			       json_integer_value(json_object_get(live, "queue_depth")) == 4,
		       "live counts: one scheduled, 90 s overdue, not in the queue's depth (four queued)");
		json_decref(live);
	}
	PQclear(r);
	TAP_STR_EQ(q1("SELECT (rung_job_json_placed(j) ? 'placement') || ':' || (rung_job_json_placed(j)->>'starts_in_s') "
		      "FROM jobs j WHERE name = 'far'", 0, NULL), "false:0", "a due scheduled job shows starts_in_s 0, no placement");
	q1("UPDATE jobs SET run_after = now() + interval '2 hours 5 minutes' WHERE name = 'far'", 0, NULL);
	TAP_STR_EQ(q1("SELECT rung_job_json_placed(j)->>'starts_in_s' FROM jobs j WHERE name = 'far'", 0, NULL), "7500",
		   "a scheduled job shows starts_in_s, the seconds left by the database's clock");
	/* retention: the 400-day-old scheduled job stays; the ended ones (finished 40 days ago) go */
	q1("UPDATE jobs SET finished_at = now() - interval '40 days', created_at = now() - interval '41 days' "
	   "WHERE state <> 'scheduled'", 0, NULL);
	p[0] = metrics_lease_wait_bounds_sql;
	TAP_OK(atoi(q1("SELECT rung_prune(30, 500, $1::float8[])", 1, p)) > 0, "retention pruned the old ended jobs");
	TAP_STR_EQ(q1("SELECT string_agg(name || ':' || state, ',') FROM jobs WHERE name = 'far' OR state IN "
		      "('succeeded', 'failed', 'cancelled')", 0, NULL), "far:scheduled",
		   "retention: a scheduled job created 400 days ago stays, the ended ones went");

	/* 10,000 scheduled jobs not due: a run reads a few blocks */
	q1("INSERT INTO jobs (name, kind, state, run_after, target_config, recovery) SELECT 'f' || g, 'image', 'scheduled', "
	   "now() + make_interval(secs => g), '{\"x\":1}', '{}' FROM generate_series(1, 10000) g", 0, NULL);
	q1("ANALYZE jobs", 0, NULL);
	p[0] = "500";
	b = blocks(sql_start_due, 1, p);
	few_blocks(b, "start due among 10,000 scheduled jobs none of which is due");
	q1("UPDATE jobs SET run_after = now() - interval '1 second' WHERE name IN ('f1', 'f2', 'f3')", 0, NULL);
	TAP_STR_EQ(q1("SELECT count(*) FROM rung_start_due(500)", 0, NULL), "3", "and queues the three due among them");
	PQfinish(pg);
}

/* Start deadlines (migration 039): rung_start_deadline_due and a retry. Last: it cancels jobs and
 * retries one, which the counts of the tests before it would see. */
static void test_start_deadline(void)
{
	pg = PQconnectdb(url);
	/* start deadlines (migration 039): due and not started, cancelled earliest first; one not due, or one
	 * that started (an attempt, queued again after an OOM), is left */
	q1("INSERT INTO jobs (name, kind, state, start_by, target_config, recovery) VALUES "
	   "('dl_past', 'image', 'queued', now() - interval '1 minute', '{\"x\":1}', '{}'), "
	   "('dl_sched', 'image', 'scheduled', now() - interval '2 minutes', '{\"x\":1}', '{}'), "
	   "('dl_future', 'image', 'queued', now() + interval '1 hour', '{\"x\":1}', '{}'), "
	   "('dl_started', 'image', 'queued', now() - interval '3 minutes', '{\"x\":1}', '{}')", 0, NULL);
	/* its start time and its deadline both passed: never queued late, cancelled */
	q1("INSERT INTO jobs (name, kind, state, run_after, start_by, target_config, recovery) VALUES "
	   "('dl_both', 'image', 'scheduled', now() - interval '10 minutes', now() - interval '90 seconds', '{\"x\":1}', '{}')",
	   0, NULL);
	TAP_STR_EQ(q1("SELECT count(*) FROM rung_start_due(500) d JOIN jobs j ON j.id = d.job_id WHERE j.name = 'dl_both'", 0,
		      NULL), "0", "start deadline: a job whose start time and deadline passed is not queued by rung_start_due");
	q1("UPDATE jobs SET attempts_count = 1 WHERE name = 'dl_started'", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(j.name, ',' ORDER BY d.start_by) FROM rung_start_deadline_due(500) d "
		      "JOIN jobs j ON j.id = d.job_id", 0, NULL),
		   "dl_sched,dl_both,dl_past", "start deadline: the three due that never started, earliest first");
	TAP_STR_EQ(q1("SELECT string_agg(name || ':' || state || ':' || coalesce((result->>'reason' LIKE 'not started by %, its start "
		      "deadline: cancelled while %')::text, '-'), ',' ORDER BY id) FROM jobs WHERE name LIKE 'dl\\_%'", 0, NULL),
		   "dl_past:cancelled:true,dl_sched:cancelled:true,dl_future:queued:-,dl_started:queued:-,dl_both:cancelled:true",
		   "start deadline: cancelled with the reason; the one not due and the one that started left");
	TAP_STR_EQ(q1("SELECT string_agg(j.name || ':' || e.from_state || '>' || e.to_state || ':' || (e.data ? 'start_by'), ',' "
		      "ORDER BY e.id) FROM events e JOIN jobs j ON j.id = e.job_id WHERE e.kind = 'start_deadline_passed'", 0, NULL),
		   "dl_sched:scheduled>cancelled:true,dl_both:scheduled>cancelled:true,dl_past:queued>cancelled:true",
		   "start deadline: an event start_deadline_passed each, from the state it left");
	TAP_STR_EQ(q1("SELECT count(*) FROM rung_start_deadline_due(500)", 0, NULL), "0", "start deadline: a second run finds none");
	/* a claim never starts a job whose deadline passed (the pass cancels it within the second) */
	q1("SELECT rung_register('wdl', 'h', '[{\"uuid\":\"DL-0\",\"memory_total_mib\":24000}]')", 0, NULL);
	q1("INSERT INTO jobs (name, kind, state, start_by, target_config, recovery) VALUES "
	   "('dl_late', 'image', 'queued', now() - interval '1 second', '{\"x\":1}', '{}'), "
	   "('dl_soon', 'image', 'queued', now() + interval '1 hour', '{\"x\":1}', '{}')", 0, NULL);
	TAP_STR_EQ(q1("SELECT string_agg(j.name || ':' || (rung_claim_start(j.id, w.id, 'DL-0', 30, NULL)->>'status'), ',' "
		      "ORDER BY j.id) FROM jobs j, workers w WHERE j.name IN ('dl_late', 'dl_soon') AND w.name = 'wdl'", 0, NULL),
		   "dl_late:none,dl_soon:ok", "start deadline: a claim does not start a job past its deadline, and starts one before it");
	q1("UPDATE attempts SET state = 'ended', outcome = 'cancelled', ended_at = now() WHERE job_id = "
	   "(SELECT id FROM jobs WHERE name = 'dl_soon')", 0, NULL);
	q1("UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE name IN ('dl_late', 'dl_soon')", 0, NULL);
	TAP_STR_EQ(q1("SELECT (rung_retry(id, NULL, NULL, 'ops')->'job'->>'start_by') IS NULL FROM jobs WHERE name = 'dl_past'",
		      0, NULL), "t", "start deadline: a retry clears it (a person asked it to run)");
	q1("UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE name LIKE 'dl\\_%' AND state = 'queued'", 0, NULL);
	/* 10,000 queued jobs with a deadline none of which is due: a pass reads a few blocks (jobs_start_by) */
	q1("INSERT INTO jobs (name, kind, state, start_by, target_config, recovery) SELECT 'dlq' || g, 'image', 'queued', "
	   "now() + make_interval(secs => 3600 + g), '{\"x\":1}', '{}' FROM generate_series(1, 10000) g", 0, NULL);
	q1("ANALYZE jobs", 0, NULL);
	{
		const char *p[1] = { "500" };
		long b = blocks(sql_start_due, 1, p); /* rungd's tick: the deadlines, then the start times */
		few_blocks(b, "the scheduler's tick among 10,000 queued jobs with a deadline none of which is due");
	}
	q1("UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE name LIKE 'dlq%'", 0, NULL);
	PQfinish(pg);
}

int main(void)
{
	const char *env = getenv("RUNG_TEST_DATABASE_URL");
	struct event *tick;
	struct timeval tv = { 0, 20000 };
	struct db *db;

	log_init("test_batch", LOG_WARN);
	if (env) {
		snprintf(url, sizeof url, "%s", env);
	} else {
		char cmd[400];
		FILE *f;
		snprintf(own_dir, sizeof own_dir, "/tmp/rung-test-batch.%d", (int)getpid());
		snprintf(own_port, sizeof own_port, "%d", 40000 + (int)getpid() % 10000);
		snprintf(cmd, sizeof cmd, "tests/pg.sh start %s %s >/dev/null 2>&1", own_dir, own_port);
		TAP_OK(system(cmd) == 0, "own PostgreSQL started");
		snprintf(cmd, sizeof cmd, "tests/pg.sh url %s", own_port);
		f = popen(cmd, "r");
		if (!f || !fgets(url, sizeof url, f))
			url[0] = 0;
		if (f)
			pclose(f);
		url[strcspn(url, "\n")] = 0;
	}
	TAP_INT_EQ(migrate_run(url, 10000, false), 0, "migrations applied (004_batch included)");
	base = event_base_new();
	tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
	event_add(tick, &tv);
	db = db_new(base, url, 2);
	TAP_OK(WAIT_FOR(db_up(db), 10000), "pool up");
	test_coalesce(db);
	test_min_fill(db);
	test_queue();
	test_sql();
	test_scale();
	test_memory_walk();
	test_placement();
	test_queue_ahead();
	test_prune();
	test_fences_011();
	test_heartbeat_skip();
	test_claim_rules();
	test_plain_ctx();
	test_start_bigger();
	test_retry();
	test_scheduled();
	test_after();
	test_after_when();
	test_pools();
	test_borrow();
	test_drain();
	test_owner_limits();
	test_pool_limits();
	test_quota();
	test_pool_quota();
	test_owner_queue();
	test_fair_share();
	test_start_deadline();
	db_free(db);
	event_free(tick);
	event_base_free(base);
	if (!env) {
		char cmd[300];
		snprintf(cmd, sizeof cmd, "tests/pg.sh stop %s >/dev/null 2>&1; rm -rf %s", own_dir, own_dir);
		if (system(cmd) != 0)
			printf("# could not stop %s\n", own_dir);
	}
	return TAP_DONE();
}
