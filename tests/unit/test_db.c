/* Tests for server/db.c against a real PostgreSQL: concurrency beyond the pool size, SQL errors,
 * prepared-statement reuse, server restarts (fast and immediate) and a stopped server while the
 * loop keeps running, LISTEN/NOTIFY across restarts and a hung LISTEN backend, db_free with work
 * pending. Uses RUNG_TEST_DATABASE_URL/RUNG_TEST_PGDATA/RUNG_TEST_PGPORT, else its own cluster. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>
#include <libpq-fe.h>

#include "../../server/db.h"
#include "log.h"
#include "tap.h"
#include "util.h"

static const char sql_double[] = "SELECT $1::int * 2, pg_backend_pid()";
static const char sql_div[] = "SELECT 10 / $1::int";
static const char sql_bad[] = "SELEC 1";
static const char sql_reuse[] = "SELECT $1::int + 1";
static const char sql_plans[] =
	"SELECT count(*), coalesce(sum(generic_plans + custom_plans), 0) FROM pg_prepared_statements "
	"WHERE statement = $1";
static const char sql_isnull[] = "SELECT $1::text IS NULL";
static const char sql_sleep[] = "SELECT pg_sleep($1::float8)";
static const char sql_one[] = "SELECT 1 AS one";
static const char sql_session[] = "SELECT current_setting('jit'), current_setting('application_name')";
static const char sql_session2[] = "SELECT current_setting('jit') || ':' || current_setting('statement_timeout') || ':' || "
				   "coalesce(current_setting('rung.job_webhook', true), '-'), current_setting('application_name')";

static struct event_base *base;
static bool in_exec;
static char pg_dir[512], pg_port[16], pg_url[512], tmp_root[256];

struct call {
	int n;             /* times the callback ran: must end at exactly 1 */
	bool res_null;
	int status;
	char err[160];
	char v0[64], v1[64];
	bool inside_exec;  /* ran from inside db_exec: a bug */
	int64_t at_ms;
};

static void on_result(PGresult *res, const char *err, void *arg)
{
	struct call *c = arg;

	c->n++;
	c->inside_exec |= in_exec;
	c->at_ms = util_mono_ms();
	c->res_null = !res;
	c->status = res ? (int)PQresultStatus(res) : -1;
	snprintf(c->err, sizeof c->err, "%s", err ? err : "");
	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0) {
		snprintf(c->v0, sizeof c->v0, "%s", PQgetvalue(res, 0, 0));
		if (PQnfields(res) > 1)
			snprintf(c->v1, sizeof c->v1, "%s", PQgetvalue(res, 0, 1));
	}
}

static void exec1(struct db *db, const char *sql, const char *p, struct call *c)
{
	const char *params[1] = { p };

	memset(c, 0, sizeof *c);
	in_exec = true;
	db_exec(db, sql, p ? 1 : (sql == sql_isnull ? 1 : 0), params, on_result, c);
	in_exec = false;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* Runs the loop until COND holds or MS pass (the tick timer bounds each pass); yields COND. */
#define WAIT_FOR(cond, ms) __extension__({ int64_t d_ = util_mono_ms() + (ms); \
	while (!(cond) && util_mono_ms() < d_) \
		event_base_loop(base, EVLOOP_ONCE); \
	(cond); })

/* --- the Postgres cluster ------------------------------------------------------------------ */

/* tests/pg.sh under $RUNG_ROOT (set by tests/run.sh), else relative to the repository root. */
static const char *pg_sh(void)
{
	static char path[600];
	const char *root = getenv("RUNG_ROOT");

	snprintf(path, sizeof path, "%s%stests/pg.sh", root ? root : "", root ? "/" : "");
	return path;
}

static pid_t pg_spawn(const char *cmd, const char *mode)
{
	pid_t pid = fork();

	if (pid == 0) {
		if (!strcmp(cmd, "start"))
			execl("/bin/sh", "sh", pg_sh(), cmd, pg_dir, pg_port, (char *)NULL);
		else
			execl("/bin/sh", "sh", pg_sh(), cmd, pg_dir, mode, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int pg_wait(pid_t pid)
{
	int st = 0;

	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Spawned child still running? Reaps it when it ended. */
static pid_t child_pid;
static int child_rc;
static bool child_done(void)
{
	int st;

	if (child_pid <= 0)
		return true;
	if (waitpid(child_pid, &st, WNOHANG) == child_pid) {
		child_rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		child_pid = 0;
		return true;
	}
	return false;
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t n = sizeof a;
	int s = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
		getsockname(s, (struct sockaddr *)&a, &n) == 0)
		port = ntohs(a.sin_port);
	if (s >= 0)
		close(s);
	return port;
}

static int cluster_setup(void)
{
	const char *url = getenv("RUNG_TEST_DATABASE_URL"), *dir = getenv("RUNG_TEST_PGDATA");
	const char *port = getenv("RUNG_TEST_PGPORT");

	if (url && dir && port) {
		snprintf(pg_url, sizeof pg_url, "%s", url);
		snprintf(pg_dir, sizeof pg_dir, "%s", dir);
		snprintf(pg_port, sizeof pg_port, "%s", port);
		return 0;
	}
	snprintf(tmp_root, sizeof tmp_root, "/tmp/rung-test-db.XXXXXX");
	if (!mkdtemp(tmp_root))
		return -1;
	snprintf(pg_dir, sizeof pg_dir, "%s/data", tmp_root);
	snprintf(pg_port, sizeof pg_port, "%d", free_port());
	snprintf(pg_url, sizeof pg_url, "postgresql://postgres@127.0.0.1:%s/postgres", pg_port);
	return pg_wait(pg_spawn("start", NULL)) == 0 ? 0 : -1;
}

static void cluster_teardown(void)
{
	char *cmd;

	if (!tmp_root[0])
		return;
	pg_wait(pg_spawn("stop", "immediate"));
	cmd = xasprintf("rm -rf '%s' '%s/data.initdb.log'", tmp_root, tmp_root);
	if (system(cmd) != 0)
		fprintf(stderr, "# could not remove %s\n", tmp_root);
	free(cmd);
}

/* Blocking helper connection for the test's own side (NOTIFY, pg_stat_activity). */
static bool sql_scalar(const char *sql, int n, const char *const *params, char *out, size_t outn)
{
	PGconn *pg = PQconnectdb(pg_url);
	PGresult *res = NULL;
	bool ok = false;

	if (PQstatus(pg) != CONNECTION_OK)
		goto out;
	res = PQexecParams(pg, sql, n, NULL, params, NULL, NULL, 0);
	ok = PQresultStatus(res) == PGRES_TUPLES_OK;
	if (ok && out)
		snprintf(out, outn, "%s", PQntuples(res) ? PQgetvalue(res, 0, 0) : "");
out:
	PQclear(res);
	PQfinish(pg);
	return ok;
}

/* --- tests --------------------------------------------------------------------------------- */

static struct db *cur;
static bool cur_up(void)
{
	return db_up(cur);
}

static bool cur_idle_n(int n)
{
	int busy, idle, queued;

	db_stats(cur, &busy, &idle, &queued);
	return idle == n && busy == 0 && queued == 0;
}

#define NCONC 50
static void test_concurrency(void)
{
	static struct call calls[NCONC];
	char p[16], want[16];
	int i, j, pids = 0, queued = 0, bad = 0, once = 0, in_exec_bad = 0;

	cur = db_new(base, pg_url, 4);
	TAP_OK(cur != NULL, "db_new");
	TAP_OK(db_new(base, pg_url, 0) == NULL, "db_new rejects size 0");
	TAP_OK(WAIT_FOR(cur_up(), 10000), "pool comes up");
	TAP_OK(WAIT_FOR(cur_idle_n(4), 10000), "all 4 connections up and idle");
	for (i = 0; i < NCONC; i++) {
		snprintf(p, sizeof p, "%d", i);
		exec1(cur, sql_double, p, &calls[i]);
	}
	db_stats(cur, NULL, NULL, &queued);
	TAP_INT_EQ(queued, NCONC, "statements queued, none run inside db_exec");
	TAP_OK(WAIT_FOR(__extension__({ bool a = true; for (int k = 0; k < NCONC; k++) a &= calls[k].n > 0; a; }),
		10000), "all 50 callbacks ran");
	for (i = 0; i < NCONC; i++) {
		snprintf(want, sizeof want, "%d", 2 * i);
		bad += strcmp(calls[i].v0, want) != 0 || calls[i].status != PGRES_TUPLES_OK;
		once += calls[i].n == 1;
		in_exec_bad += calls[i].inside_exec;
		for (j = 0; j < i && strcmp(calls[j].v1, calls[i].v1); j++)
			;
		pids += j == i;
	}
	TAP_INT_EQ(bad, 0, "each callback got its own statement's result");
	TAP_INT_EQ(once, NCONC, "each callback ran exactly once");
	TAP_INT_EQ(in_exec_bad, 0, "no callback ran inside db_exec");
	TAP_INT_EQ(pids, 4, "statements spread over the 4 connections");
}

static void test_errors(void)
{
	static struct call a, b, c, d, e;

	exec1(cur, sql_div, "0", &a);
	exec1(cur, sql_bad, NULL, &b);
	TAP_OK(WAIT_FOR(a.n && b.n, 5000), "error callbacks ran");
	TAP_INT_EQ(a.status, PGRES_FATAL_ERROR, "division by zero is PGRES_FATAL_ERROR");
	TAP_OK(strstr(a.err, "division by zero") != NULL, "err carries the server message");
	TAP_INT_EQ(b.status, PGRES_FATAL_ERROR, "failed Prepare is PGRES_FATAL_ERROR");
	TAP_OK(strstr(b.err, "syntax error") != NULL, "err carries the syntax error");
	exec1(cur, sql_div, "2", &c);
	exec1(cur, sql_isnull, NULL, &d);
	exec1(cur, NULL, NULL, &e);
	TAP_OK(e.n == 0, "bad arguments: no callback inside db_exec");
	TAP_OK(WAIT_FOR(c.n && d.n && e.n, 5000), "statements after errors ran");
	TAP_STR_EQ(c.v0, "5", "connection still usable after an error");
	TAP_STR_EQ(d.v0, "t", "NULL parameter is SQL NULL");
	TAP_OK(e.res_null && !e.inside_exec, "NULL sql fails on the loop with res NULL");
	TAP_INT_EQ(a.n + b.n + c.n + d.n + e.n, 5, "each error callback ran once");
}

static void test_prepared_reuse(void)
{
	static struct call calls[100], plans;
	struct db *one = db_new(base, pg_url, 1);
	char p[16];
	int i, ok = 0;

	cur = one;
	TAP_OK(WAIT_FOR(cur_up(), 10000), "single-connection pool up");
	for (i = 0; i < 100; i++) {
		snprintf(p, sizeof p, "%d", i);
		exec1(one, sql_reuse, p, &calls[i]);
	}
	exec1(one, sql_plans, sql_reuse, &plans);
	TAP_OK(WAIT_FOR(plans.n == 1, 10000), "reuse statements ran");
	for (i = 0; i < 100; i++) {
		snprintf(p, sizeof p, "%d", i + 1);
		ok += calls[i].n == 1 && !strcmp(calls[i].v0, p);
	}
	TAP_INT_EQ(ok, 100, "100 executions of one statement correct");
	TAP_STR_EQ(plans.v0, "1", "the statement was prepared once on the connection");
	TAP_STR_EQ(plans.v1, "100", "and executed 100 times as that prepared statement");
	db_free(one);
}

/* A session's defaults (db.c conn_connect): JIT off and application_name rungd, unless the
 * conninfo says otherwise (its own options win for what they name, and are merged). */
static void test_session_defaults(void)
{
	static struct call c;
	char url[600];
	struct db *one;

	for (int k = 0; k < 2; k++) {
		snprintf(url, sizeof url, "%s%soptions=-c%%20jit%%3Don", pg_url, strchr(pg_url, '?') ? "&" : "?");
		one = db_new(base, k ? url : pg_url, 1);
		cur = one;
		TAP_OK(WAIT_FOR(cur_up(), 10000), k ? "pool up (conninfo with options)" : "pool up");
		exec1(one, sql_session, NULL, &c);
		TAP_OK(WAIT_FOR(c.n == 1, 10000), "session settings read");
		TAP_STR_EQ(c.v0, k ? "on" : "off", k ? "the conninfo's options win over rungd's jit=off" :
						       "rungd's sessions run without JIT");
		TAP_STR_EQ(c.v1, "rungd", "application_name rungd");
		db_free(one);
	}
	/* the conninfo's options are merged, not swapped for rungd's: a setting they do not name keeps
	 * rungd's value, and the caller's extra settings (db_new_with) come through */
	{
		static struct call c2;
		snprintf(url, sizeof url, "%s%soptions=-c%%20statement_timeout%%3D1234", pg_url, strchr(pg_url, '?') ? "&" : "?");
		one = db_new_with(base, url, 1, "-c rung.job_webhook=on");
		cur = one;
		TAP_OK(WAIT_FOR(cur_up(), 10000), "pool up (conninfo options and extra settings)");
		exec1(one, sql_session2, NULL, &c2);
		TAP_OK(WAIT_FOR(c2.n == 1, 10000), "session settings read");
		TAP_STR_EQ(c2.v0, "off:1234ms:on", "JIT still off beside the conninfo's statement_timeout, and the extra setting on");
		db_free(one);
	}
}

static bool restart_ok;
static void test_restart(const char *mode)
{
	static struct call sleeper, after, many[8];
	char name[96];
	int i, ok = 0;

	db_set_queue_timeout_ms(cur, 8000);
	TAP_OK(WAIT_FOR(cur_up(), 10000), "pool up before restart");
	exec1(cur, sql_sleep, "30", &sleeper);
	TAP_OK(WAIT_FOR(__extension__({ int b; db_stats(cur, &b, NULL, NULL); b == 1; }), 5000),
		"sleep statement in flight");
	child_pid = pg_spawn("restart", mode);
	snprintf(name, sizeof name, "restart %s: statement in flight gets NULL", mode);
	TAP_OK(WAIT_FOR(child_done() && sleeper.n, 60000) && sleeper.res_null, name);
	snprintf(name, sizeof name, "restart %s: pg.sh restart succeeded", mode);
	TAP_INT_EQ(child_rc, 0, name);
	snprintf(name, sizeof name, "restart %s: err is connection lost", mode);
	TAP_STR_EQ(sleeper.err, "connection lost", name);
	/* Right after the server is back: no rungd-side intervention. */
	exec1(cur, sql_one, NULL, &after);
	for (i = 0; i < 8; i++)
		exec1(cur, sql_double, "21", &many[i]);
	snprintf(name, sizeof name, "restart %s: later statements succeed", mode);
	TAP_OK(WAIT_FOR(__extension__({ bool a = after.n; for (int k = 0; k < 8; k++) a &= many[k].n > 0; a; }),
		15000) && !strcmp(after.v0, "1"), name);
	for (i = 0; i < 8; i++)
		ok += many[i].n == 1 && !strcmp(many[i].v0, "42");
	snprintf(name, sizeof name, "restart %s: 8 concurrent statements correct", mode);
	TAP_INT_EQ(ok, 8, name);
	TAP_OK(sleeper.n == 1 && after.n == 1, "restart: callbacks ran once");
	restart_ok = child_rc == 0;
}

static void test_stopped(void)
{
	static struct call down, back;
	int64_t t0, took;

	child_pid = pg_spawn("stop", "fast");
	TAP_OK(WAIT_FOR(child_done(), 60000), "pg stopped");
	TAP_OK(WAIT_FOR(!cur_up(), 5000), "db_up false once Postgres is stopped");
	db_set_queue_timeout_ms(cur, 700);
	t0 = util_mono_ms();
	exec1(cur, sql_one, NULL, &down);
	TAP_OK(WAIT_FOR(down.n, 5000), "statement with Postgres stopped completes (no hang)");
	took = down.at_ms - t0;
	TAP_OK(down.res_null, "it gets res NULL");
	TAP_STR_EQ(down.err, "database unavailable", "err is database unavailable");
	TAP_OK(took >= 650 && took < 2000, "within the queue timeout");
	child_pid = pg_spawn("start", NULL);
	TAP_OK(WAIT_FOR(child_done(), 60000) && child_rc == 0, "pg started again");
	db_set_queue_timeout_ms(cur, 8000);
	exec1(cur, sql_one, NULL, &back);
	TAP_OK(WAIT_FOR(back.n, 15000) && !strcmp(back.v0, "1"), "statements succeed after Postgres returns");
}

static int notifies, reconnects;
static char last_channel[64], last_payload[64];
static void on_notify(const char *channel, const char *payload, void *arg)
{
	(void)arg;
	notifies++;
	snprintf(last_channel, sizeof last_channel, "%s", channel);
	snprintf(last_payload, sizeof last_payload, "%s", payload);
}
static void on_reconnect(void *arg)
{
	(void)arg;
	reconnects++;
}

static bool notify(const char *channel, const char *payload)
{
	const char *p[2] = { channel, payload };

	return sql_scalar("SELECT pg_notify($1, $2)::text", 2, p, NULL, 0);
}

static void test_listen(void)
{
	static const char chan[] = "rung test \"chan\"";
	char pid[32] = "";
	int before, n;

	cur = db_new(base, pg_url, 1);
	db_on_listen_reconnect(cur, on_reconnect, NULL);
	db_listen(cur, chan, on_notify, NULL);
	TAP_OK(WAIT_FOR(reconnects == 1, 10000), "listen: reconnect callback after first connect");
	TAP_OK(notify(chan, "hello 1"), "listen: NOTIFY sent");
	TAP_OK(WAIT_FOR(notifies == 1, 5000), "listen: notification delivered");
	TAP_STR_EQ(last_channel, chan, "listen: channel name (quoted identifier) intact");
	TAP_STR_EQ(last_payload, "hello 1", "listen: payload");

	if (restart_ok) {
		child_pid = pg_spawn("restart", "fast");
		TAP_OK(WAIT_FOR(child_done() && reconnects >= 2, 30000), "listen: re-LISTEN after restart");
		n = notifies;
		TAP_OK(notify(chan, "hello 2"), "listen: NOTIFY after restart sent");
		TAP_OK(WAIT_FOR(notifies == n + 1, 5000), "listen: notification after restart delivered");
		TAP_STR_EQ(last_payload, "hello 2", "listen: payload after restart");
	}

	/* A hung backend (SIGSTOP) answers nothing: the health check must drop and reconnect. */
	TAP_OK(sql_scalar("SELECT pid::text FROM pg_stat_activity WHERE application_name = 'rungd' AND "
		"(query LIKE 'LISTEN %' OR query = 'SELECT 1')", 0, NULL, pid, sizeof pid) && pid[0],
		"listen: found the LISTEN backend");
	before = reconnects;
	if (pid[0] && kill((pid_t)atoi(pid), SIGSTOP) == 0) {
		TAP_OK(WAIT_FOR(reconnects == before + 1, 15000), "listen: hung connection dropped and re-LISTENed");
		kill((pid_t)atoi(pid), SIGCONT);
		n = notifies;
		TAP_OK(notify(chan, "hello 3"), "listen: NOTIFY after hang sent");
		TAP_OK(WAIT_FOR(notifies == n + 1, 5000), "listen: notification after hang delivered");
	} else {
		TAP_OK(false, "listen: could not SIGSTOP the LISTEN backend");
	}
	db_free(cur);
	cur = NULL;
}

static void test_free_pending(void)
{
	static struct call c[5];
	struct db *db = db_new(base, pg_url, 2);
	int i, ok = 0;

	cur = db;
	TAP_OK(WAIT_FOR(cur_idle_n(2), 10000), "free: pool up");
	exec1(db, sql_sleep, "10", &c[0]);
	exec1(db, sql_sleep, "10", &c[1]);
	for (i = 2; i < 5; i++)
		exec1(db, sql_one, NULL, &c[i]);
	TAP_OK(WAIT_FOR(__extension__({ int b, q; db_stats(cur, &b, NULL, &q); b == 2 && q == 3; }), 5000),
		"free: 2 in flight, 3 queued");
	db_free(db);
	cur = NULL;
	for (i = 0; i < 5; i++)
		ok += c[i].n == 1 && c[i].res_null && !strcmp(c[i].err, "database closed");
	TAP_INT_EQ(ok, 5, "free: every pending callback got NULL once, before db_free returned");
	db_free(NULL);
}

int main(void)
{
	struct event *tick;
	struct db *pool;
	struct timeval tv = { 0, 20000 };

	log_init("test_db", LOG_INFO);
	signal(SIGPIPE, SIG_IGN);
	if (cluster_setup() < 0) {
		TAP_OK(false, "start a throwaway Postgres with tests/pg.sh");
		cluster_teardown();
		return 1;
	}
	base = event_base_new();
	tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
	event_add(tick, &tv);

	test_concurrency();
	pool = cur;
	test_errors();
	test_prepared_reuse();
	test_session_defaults();
	cur = pool; /* the 4-connection pool carries on through restarts and a stop */
	test_restart("fast");
	test_restart("immediate");
	test_stopped();
	db_free(pool);
	test_listen();
	test_free_pending();
	event_free(tick);
	event_base_free(base);
	cluster_teardown();
	return TAP_DONE();
}
