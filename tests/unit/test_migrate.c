/* Tests for server/migrate.c against a real PostgreSQL: the embedded migrations all recorded,
 * idempotence, two concurrent runs serialised by the advisory lock, a failing migration rolled
 * back, waiting for a server that is still starting, giving up on one that never answers.
 * Uses RUNG_TEST_DATABASE_URL/RUNG_TEST_PGDATA/RUNG_TEST_PGPORT, else its own cluster. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "../../server/migrate.h"
#include "log.h"
#include "tap.h"
#include "util.h"

static char pg_dir[512], pg_port[16], pg_url[512], tmp_root[256];

/* --- the Postgres cluster ------------------------------------------------------------------ */

/* tests/pg.sh under $RUNG_ROOT (set by tests/run.sh), else relative to the repository root. */
static const char *pg_sh(void)
{
	static char path[600];
	const char *root = getenv("RUNG_ROOT");

	snprintf(path, sizeof path, "%s%stests/pg.sh", root ? root : "", root ? "/" : "");
	return path;
}

static int pg_run(const char *cmd, const char *mode)
{
	pid_t pid = fork();
	int st = 0;

	if (pid == 0) {
		if (!strcmp(cmd, "start"))
			execl("/bin/sh", "sh", pg_sh(), cmd, pg_dir, pg_port, (char *)NULL);
		else
			execl("/bin/sh", "sh", pg_sh(), cmd, pg_dir, mode, (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
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
	snprintf(tmp_root, sizeof tmp_root, "/tmp/rung-test-migrate.XXXXXX");
	if (!mkdtemp(tmp_root))
		return -1;
	snprintf(pg_dir, sizeof pg_dir, "%s/data", tmp_root);
	snprintf(pg_port, sizeof pg_port, "%d", free_port());
	snprintf(pg_url, sizeof pg_url, "postgresql://postgres@127.0.0.1:%s/postgres", pg_port);
	return pg_run("start", NULL) == 0 ? 0 : -1;
}

static void cluster_teardown(void)
{
	char *cmd;

	if (!tmp_root[0])
		return;
	pg_run("stop", "immediate");
	cmd = xasprintf("rm -rf '%s'", tmp_root);
	if (system(cmd) != 0)
		fprintf(stderr, "# could not remove %s\n", tmp_root);
	free(cmd);
}

/* The test URL with another database name, as a key='value' conninfo string; caller frees. */
static char *url_for_db(const char *db)
{
	PQconninfoOption *opts = PQconninfoParse(pg_url, NULL), *o;
	char *s = xstrdup(""), *t;

	for (o = opts; o && o->keyword; o++) {
		const char *v = !strcmp(o->keyword, "dbname") ? db : o->val;

		if (!v)
			continue;
		t = xasprintf("%s%s='%s' ", s, o->keyword, v);
		free(s);
		s = t;
	}
	PQconninfoFree(opts);
	return s;
}

static void quiet_notice(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* Runs one statement on `conninfo`; the first value of the first row into out. */
static bool sql_scalar(const char *conninfo, const char *sql, int n, const char *const *params,
	char *out, size_t outn)
{
	PGconn *pg = PQconnectdb(conninfo);
	PGresult *res = NULL;
	bool ok = false;

	if (PQstatus(pg) != CONNECTION_OK)
		goto out;
	PQsetNoticeProcessor(pg, quiet_notice, NULL);
	res = PQexecParams(pg, sql, n, NULL, params, NULL, NULL, 0);
	ok = PQresultStatus(res) == PGRES_TUPLES_OK || PQresultStatus(res) == PGRES_COMMAND_OK;
	if (!ok)
		fprintf(stderr, "# %s: %s", sql, PQresultErrorMessage(res));
	if (ok && out)
		snprintf(out, outn, "%s", PQntuples(res) ? PQgetvalue(res, 0, 0) : "");
out:
	PQclear(res);
	PQfinish(pg);
	return ok;
}

/* A fresh database `name`; returns its conninfo (caller frees) or NULL. */
static char *fresh_db(const char *name)
{
	char *drop = xasprintf("DROP DATABASE IF EXISTS %s", name);
	char *create = xasprintf("CREATE DATABASE %s", name);
	bool ok = sql_scalar(pg_url, drop, 0, NULL, NULL, 0) && sql_scalar(pg_url, create, 0, NULL, NULL, 0);

	free(drop);
	free(create);
	return ok ? url_for_db(name) : NULL;
}

static void drop_db(const char *name)
{
	char *drop = xasprintf("DROP DATABASE IF EXISTS %s", name);

	sql_scalar(pg_url, drop, 0, NULL, NULL, 0);
	free(drop);
}

static int count_rows(const char *conninfo, const char *sql)
{
	char v[32] = "";

	return sql_scalar(conninfo, sql, 0, NULL, v, sizeof v) ? atoi(v) : -1;
}

/* --- tests --------------------------------------------------------------------------------- */

static const struct sql_migration list_ok[] = {
	{ "001_a", "SELECT pg_sleep(0.5);\nCREATE TABLE mt_a (x int);\nINSERT INTO mt_a VALUES (1);\n" },
	{ "002_b", "CREATE TABLE mt_b (x int); INSERT INTO mt_b VALUES (2);" },
};
static const struct sql_migration list_bad[] = {
	{ "001_a", "SELECT pg_sleep(0.5);\nCREATE TABLE mt_a (x int);\nINSERT INTO mt_a VALUES (1);\n" },
	{ "002_b", "CREATE TABLE mt_b (x int); INSERT INTO mt_b VALUES (2);" },
	{ "003_c", "CREATE TABLE mt_c (x int);\nSELEC oops;\n" },
};
static const struct sql_migration list_fixed[] = {
	{ "001_a", "SELECT pg_sleep(0.5);\nCREATE TABLE mt_a (x int);\nINSERT INTO mt_a VALUES (1);\n" },
	{ "002_b", "CREATE TABLE mt_b (x int); INSERT INTO mt_b VALUES (2);" },
	{ "003_c", "CREATE TABLE mt_c (x int);" },
	{ "004_commit", "CREATE TABLE mt_d (x int); COMMIT;" },
};

static void test_embedded(void)
{
	char *url = fresh_db("rung_mig_embedded");
	char n[16];
	size_t i, found = 0;

	TAP_OK(url != NULL, "fresh database for the embedded migrations");
	if (!url)
		return;
	TAP_INT_EQ(migrate_run(url, 5000), 0, "migrate_run applies the embedded migrations");
	for (i = 0; i < sql_migrations_count; i++) {
		const char *p[1] = { sql_migrations[i].name };

		found += sql_scalar(url, "SELECT count(*) FROM schema_migrations WHERE name = $1", 1, p, n, sizeof n) &&
			!strcmp(n, "1");
	}
	TAP_INT_EQ(found, sql_migrations_count, "schema_migrations lists every sql_migrations[] name");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_migrations"), sql_migrations_count,
		"and nothing else");
	TAP_INT_EQ(migrate_run(url, 5000), 0, "migrate_run again is a no-op");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_migrations"), sql_migrations_count,
		"still one row per migration");
	free(url);
	drop_db("rung_mig_embedded");
}

struct runner {
	const char *url;
	pthread_barrier_t *start;
	int rc;
};

static void *run_thread(void *arg)
{
	struct runner *r = arg;

	pthread_barrier_wait(r->start);
	r->rc = migrate_apply(r->url, 30000, list_ok, ARRAY_LEN(list_ok));
	return NULL;
}

static void test_concurrent(void)
{
	char *url = fresh_db("rung_mig_conc");
	pthread_barrier_t start;
	struct runner a = { url, &start, -9 }, b = { url, &start, -9 };
	pthread_t ta, tb;

	TAP_OK(url != NULL, "fresh database for concurrent runs");
	if (!url)
		return;
	pthread_barrier_init(&start, NULL, 2);
	pthread_create(&ta, NULL, run_thread, &a);
	pthread_create(&tb, NULL, run_thread, &b);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	pthread_barrier_destroy(&start);
	TAP_INT_EQ(a.rc, 0, "concurrent run 1 succeeds");
	TAP_INT_EQ(b.rc, 0, "concurrent run 2 succeeds (it waited for the lock, found both applied)");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM mt_a"), 1, "001 applied exactly once");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_migrations"), 2, "two migrations recorded");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"), 0,
		"advisory lock released");

	/* A failing migration: rolled back, earlier ones kept, later runs resume after a fix. */
	TAP_INT_EQ(migrate_apply(url, 5000, list_bad, ARRAY_LEN(list_bad)), -1, "failing migration returns -1");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_migrations WHERE name = '003_c'"), 0,
		"failed migration not recorded");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM pg_class WHERE relname = 'mt_c'"), 0,
		"failed migration rolled back (its first statement too)");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_migrations"), 2, "earlier migrations kept");
	TAP_INT_EQ(migrate_apply(url, 5000, list_fixed, 3), 0, "fixed migration applies");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM pg_class WHERE relname = 'mt_c'"), 1, "mt_c exists now");
	TAP_INT_EQ(migrate_apply(url, 5000, list_fixed, 4), -1, "a migration that COMMITs itself is refused");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_migrations WHERE name = '004_commit'"), 0,
		"and not recorded");
	free(url);
	drop_db("rung_mig_conc");
}

static void *wait_thread(void *arg)
{
	struct runner *r = arg;

	r->rc = migrate_apply(r->url, 60000, list_ok, 2);
	return NULL;
}

static void test_wait(void)
{
	char *url = fresh_db("rung_mig_wait"), *nowhere;
	struct runner r = { url, NULL, -9 };
	pthread_t t;
	int64_t t0, took;

	TAP_OK(url != NULL, "fresh database for the wait test");
	if (!url)
		return;
	nowhere = xasprintf("postgresql://postgres@127.0.0.1:%d/postgres", free_port());
	t0 = util_mono_ms();
	TAP_INT_EQ(migrate_run(nowhere, 400), -1, "nothing listening: -1");
	took = util_mono_ms() - t0;
	TAP_OK(took >= 400 && took < 3000, "after retrying for about wait_ms");
	free(nowhere);

	TAP_INT_EQ(pg_run("stop", "fast"), 0, "Postgres stopped");
	pthread_create(&t, NULL, wait_thread, &r);
	TAP_INT_EQ(pg_run("start", NULL), 0, "Postgres started while migrate waits");
	pthread_join(t, NULL);
	TAP_INT_EQ(r.rc, 0, "migrate waited for Postgres to come up and succeeded");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_migrations"), 2, "both migrations recorded");
	free(url);
	drop_db("rung_mig_wait");
}

int main(void)
{
	log_init("test_migrate", LOG_WARN);
	if (cluster_setup() < 0) {
		TAP_OK(false, "start a throwaway Postgres with tests/pg.sh");
		cluster_teardown();
		return 1;
	}
	test_embedded();
	test_concurrent();
	test_wait();
	cluster_teardown();
	return TAP_DONE();
}
