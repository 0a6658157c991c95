/* Tests for server/migrate.c against a real PostgreSQL: the embedded migrations all recorded,
 * idempotence, two concurrent runs serialised by the advisory lock, a failing migration rolled
 * back, waiting for a server that is still starting, giving up on one that never answers; the
 * repeatable function files (applied once, again only when they change, all or nothing); and the
 * upgrade of a database built by the old tree's migrations 001-012 (tests/data/migrations-012/)
 * with data in it, which must keep its data, work, and end with the functions of a fresh one.
 * Uses RUNG_TEST_DATABASE_URL/RUNG_TEST_PGDATA/RUNG_TEST_PGPORT, else its own cluster. */
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <errno.h>
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
	TAP_INT_EQ(migrate_run(url, 5000, false), 0, "migrate_run applies the embedded migrations");
	for (i = 0; i < sql_migrations_count; i++) {
		const char *p[1] = { sql_migrations[i].name };

		found += sql_scalar(url, "SELECT count(*) FROM schema_migrations WHERE name = $1", 1, p, n, sizeof n) &&
			!strcmp(n, "1");
	}
	TAP_INT_EQ(found, sql_migrations_count, "schema_migrations lists every sql_migrations[] name");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_migrations"), sql_migrations_count,
		"and nothing else");
	TAP_INT_EQ(migrate_run(url, 5000, false), 0, "migrate_run again is a no-op");
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
	TAP_INT_EQ(migrate_run(nowhere, 400, false), -1, "nothing listening: -1");
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

/* --- the repeatable files ------------------------------------------------------------------- */

/* One value per rung function and trigger: its xmin, which changes when it is created again. */
static const char sql_versions[] =
	"SELECT string_agg(x, ',' ORDER BY x) FROM ("
	" SELECT p.oid::regprocedure::text || '@' || p.xmin::text AS x FROM pg_proc p WHERE p.proname LIKE 'rung\\_%'"
	" UNION ALL SELECT t.tgname || '@' || t.xmin::text FROM pg_trigger t WHERE NOT t.tgisinternal) s";
/* Every rung function's definition and every trigger's, as one text (names, not oids). */
static const char sql_defs[] =
	"SELECT string_agg(x, E'\\n' ORDER BY x) FROM ("
	" SELECT pg_get_functiondef(p.oid) AS x FROM pg_proc p"
	" JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
	" UNION ALL SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t WHERE NOT t.tgisinternal) s";

static void test_repeatables(void)
{
	static const struct sql_migration mig[] = { { "001_t", "CREATE TABLE rt (x int);" } };
	static const struct sql_migration mig2[] = { { "001_t", "CREATE TABLE rt (x int);" },
						     { "002_t", "CREATE TABLE rt2 (x int);" } };
	static const struct sql_migration mig3[] = { { "001_t", "CREATE TABLE rt (x int);" },
						     { "003_t", "CREATE TABLE rt3 (x int);" } };
	static const struct sql_migration rep_a[] = {
		{ "functions/10_a", "CREATE OR REPLACE FUNCTION rung_rt_a() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;" },
		{ "functions/20_b", "CREATE OR REPLACE FUNCTION rung_rt_b() RETURNS int LANGUAGE sql AS $$ SELECT rung_rt_a() + 1 $$;" },
	};
	static const struct sql_migration rep_b[] = {
		{ "functions/10_a", "CREATE OR REPLACE FUNCTION rung_rt_a() RETURNS int LANGUAGE sql AS $$ SELECT 10 $$;" },
		{ "functions/20_b", "CREATE OR REPLACE FUNCTION rung_rt_b() RETURNS int LANGUAGE sql AS $$ SELECT rung_rt_a() + 1 $$;" },
	};
	static const struct sql_migration rep_bad[] = {
		{ "functions/10_a", "CREATE OR REPLACE FUNCTION rung_rt_a() RETURNS int LANGUAGE sql AS $$ SELECT 20 $$;" },
		{ "functions/20_b", "CREATE OR REPLACE FUNCTION rung_rt_b() RETURNS int LANGUAGE sql AS $$ SELEC 2 $$;" },
	};
	static const struct sql_migration rep_commit[] = {
		{ "functions/10_a", "CREATE OR REPLACE FUNCTION rung_rt_a() RETURNS int LANGUAGE sql AS $$ SELECT 30 $$; COMMIT;" },
	};
	char *url = fresh_db("rung_mig_rep");
	char v1[4096] = "", v2[4096] = "", n[32] = "";

	TAP_OK(url != NULL, "fresh database for the repeatable files");
	if (!url)
		return;
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig, 1, rep_a, 2, false), 0, "migrations, then the repeatable files in order");
	TAP_OK(sql_scalar(url, "SELECT rung_rt_b()", 0, NULL, n, sizeof n) && !strcmp(n, "2"),
		"the second file uses what the first created");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_repeatables"), 2, "both files recorded");
	sql_scalar(url, sql_versions, 0, NULL, v1, sizeof v1);
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig, 1, rep_a, 2, false), 0, "again, unchanged");
	sql_scalar(url, sql_versions, 0, NULL, v2, sizeof v2);
	TAP_OK(v1[0] && !strcmp(v1, v2), "unchanged files are not applied again (same function versions)");
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig, 1, rep_b, 2, false), 0, "a changed file");
	TAP_OK(sql_scalar(url, "SELECT rung_rt_b()", 0, NULL, n, sizeof n) && !strcmp(n, "11"),
		"a changed file is applied again");
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig, 1, rep_bad, 2, false), -1, "a failing file: -1");
	TAP_OK(sql_scalar(url, "SELECT rung_rt_b()", 0, NULL, n, sizeof n) && !strcmp(n, "11"),
		"and the whole set is rolled back (the file before it too)");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_repeatables"), 0,
		"and nothing is recorded as applied");
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig, 1, rep_commit, 1, false), -1, "a file that COMMITs itself is refused");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_repeatables"), 0, "and not recorded");
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig, 1, rep_b, 2, false), 0, "the set that applied before");
	TAP_OK(sql_scalar(url, "SELECT rung_rt_a()", 0, NULL, n, sizeof n) && !strcmp(n, "10"),
		"is applied again after a failed run, though its checksums were recorded before it");
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig, 1, rep_a, 1, false), 0, "a file removed from the set");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_repeatables"), 1, "is no longer recorded");
	/* A newer release (one more migration) installs its files; this release, restarted, leaves them */
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig2, 2, rep_b, 2, false), 0, "a newer release: one more migration, its files");
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig, 1, rep_a, 2, false), 0, "this release started again: 0");
	TAP_OK(sql_scalar(url, "SELECT rung_rt_a()", 0, NULL, n, sizeof n) && !strcmp(n, "10") &&
		       count_rows(url, "SELECT count(*) FROM schema_repeatables") == 2,
	       "the newer release's functions are left in place (not this release's)");
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig, 1, rep_a, 2, true), 0, "with force_functions (a deliberate rollback)");
	TAP_OK(sql_scalar(url, "SELECT rung_rt_a()", 0, NULL, n, sizeof n) && !strcmp(n, "1"),
	       "this release's functions are installed");
	/* an unknown name that sorts before the newest known one (a migration renamed since) is no newer release's */
	sql_scalar(url, "DELETE FROM schema_migrations WHERE name = '002_t'", 0, NULL, n, sizeof n);
	sql_scalar(url, "INSERT INTO schema_migrations (name) VALUES ('0005_renamed')", 0, NULL, n, sizeof n);
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig, 1, rep_b, 2, false), 0, "a recorded name older than every known one");
	TAP_OK(sql_scalar(url, "SELECT rung_rt_a()", 0, NULL, n, sizeof n) && !strcmp(n, "10"),
	       "does not stop this release's changed files from being applied");
	/* a run that applies a migration now applies its files, whatever else is recorded */
	sql_scalar(url, "INSERT INTO schema_migrations (name) VALUES ('009_later')", 0, NULL, n, sizeof n);
	TAP_INT_EQ(migrate_apply_all(url, 5000, mig3, 2, rep_a, 2, false), 0, "a run that applies 003_t now");
	TAP_OK(sql_scalar(url, "SELECT rung_rt_a()", 0, NULL, n, sizeof n) && !strcmp(n, "1"),
	       "applies its files though a later name is recorded");
	free(url);
	drop_db("rung_mig_rep");
}

/* --- the upgrade from the old tree's migration 012 ------------------------------------------ */

struct frozen {
	struct sql_migration *list;
	size_t n;
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sql_migration *)a)->name, ((const struct sql_migration *)b)->name);
}

/* tests/data/migrations-012/NNN_name.sql, the old tree's migrations as they were, sorted by name. */
static struct frozen frozen_load(void)
{
	const char *root = getenv("RUNG_ROOT");
	char *dir = xasprintf("%s%stests/data/migrations-012", root ? root : "", root ? "/" : "");
	struct frozen fz = { NULL, 0 };
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		fprintf(stderr, "# %s: %s\n", dir, strerror(errno));
	while (d && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char *path;

		if (len < 5 || strcmp(de->d_name + len - 4, ".sql"))
			continue;
		path = xasprintf("%s/%s", dir, de->d_name);
		fz.list = xrealloc(fz.list, (fz.n + 1) * sizeof *fz.list);
		fz.list[fz.n].name = xasprintf("%.*s", (int)(len - 4), de->d_name);
		fz.list[fz.n].text = util_read_file(path, NULL);
		fz.n += fz.list[fz.n].text != NULL;
		free(path);
	}
	if (d)
		closedir(d);
	if (fz.n)
		qsort(fz.list, fz.n, sizeof *fz.list, name_cmp);
	free(dir);
	return fz;
}

static void frozen_free(struct frozen *fz)
{
	size_t i;

	for (i = 0; i < fz->n; i++) {
		free((char *)fz->list[i].name);
		free((char *)fz->list[i].text);
	}
	free(fz->list);
}

/* The first value of `sql` (params p) on url, in out; "(error)" when it failed. */
static const char *val(const char *url, const char *sql, int n, const char *const *p, char *out, size_t outn)
{
	out[0] = '\0';
	return sql_scalar(url, sql, n, p, out, outn) ? out : "(error)";
}

/* A digest of every row of the tables whose data must survive the upgrade. Since migration 015 an attempt has a
 * lease_event_id (NULL for the attempts before it) and `events` is a view whose ids are the stored ids doubled: the
 * digest leaves the one out and halves the other, so the same rows give the same digest on either side. */
static const char sql_data[] =
	"SELECT md5(concat_ws('|',"
	" (SELECT string_agg((to_jsonb(t) - ARRAY['labels', 'run_after', 'pool', 'after_ids', 'waits_for', 'has_dependents', 'after_when', 'start_by'])::text, ',' ORDER BY t.id) FROM jobs t),"
	/* columns added since 012 start NULL or at their default: migrations/014_memory.sql's, 015's
	 * lease_event_id, 017's workers.drain, 018's webhook_outbox kind and job_id, 019's jobs.labels,
	 * 020's tokens.max_running, 023's tokens.expires_at, 024's workers.version, 026's jobs.pool and
	 * workers.pool, 027's tokens.pools, 028's workers.borrow, 029's attempts.preempted_at and
	 * preempt_for, 031's attempts.resumed_step, 032's resumed_gpu_s, 033's jobs.after_ids, waits_for and
	 * has_dependents, 034's tokens.pool_limits, 035's gpu_hours and gpu_hours_days 036's jobs.after_when and
	 * 037's tokens.pool_gpu_hours and 039's jobs.start_by are left out */
	" (SELECT string_agg((to_jsonb(t) - ARRAY['peak_mib', 'peak_phase', 'mem_features', 'mem_arch', 'mem_gpu_mib',"
	"   'mem_obs', 'lease_event_id', 'preempted_at', 'preempt_for', 'resumed_step', 'resumed_gpu_s'])::text, ',' ORDER BY t.id) FROM attempts t),"
	" (SELECT string_agg((to_jsonb(t) - ARRAY['drain', 'version', 'pool', 'borrow'])::text, ',' ORDER BY t.id) FROM workers t),"
	" (SELECT string_agg(t::text, ',' ORDER BY t.uuid) FROM gpus t),"
	" (SELECT string_agg((to_jsonb(t) - ARRAY['max_running', 'expires_at', 'pools', 'pool_limits', 'gpu_hours', 'gpu_hours_days', 'pool_gpu_hours'])::text, ',' ORDER BY t.id) FROM tokens t),"
	" (SELECT string_agg(jsonb_set(to_jsonb(t), '{id}', to_jsonb(t.id / CASE WHEN to_regclass('event_log') IS NULL"
	"   THEN 1 ELSE 2 END))::text, ',' ORDER BY t.id) FROM events t),"
	" (SELECT string_agg(t::text, ',' ORDER BY t.id) FROM escalations t),"
	" (SELECT string_agg((to_jsonb(t) - ARRAY['kind', 'job_id'])::text, ',' ORDER BY t.id) FROM webhook_outbox t),"
	" (SELECT string_agg(t::text, ',' ORDER BY t.id) FROM gpu_faults t)))";

/* A job per state, attempts, a worker with three GPUs (one quarantined), tokens, an escalation
 * and its webhook row, all written by the old tree's own functions. */
static bool upgrade_fill(const char *url)
{
	static const char *steps[] = {
		"INSERT INTO tokens (name, role, hash) VALUES ('sub1', 'submitter', repeat('a', 64)),"
		" ('wk1', 'worker', repeat('b', 64)), ('gone', 'admin', repeat('c', 64))",
		"UPDATE tokens SET revoked_at = now() WHERE name = 'gone'",
		"SELECT rung_register_owned('w1', 'h1', '[{\"uuid\": \"U-1\", \"memory_total_mib\": 24000},"
		" {\"uuid\": \"U-2\", \"memory_total_mib\": 24000}, {\"uuid\": \"U-3\", \"memory_total_mib\": 24000}]',"
		" (SELECT id FROM tokens WHERE name = 'wk1'), false)",
		"SELECT count(*) FROM rung_submit_batch('["
		"{\"i\": 0, \"name\": \"a\", \"owner\": \"sub1\", \"kind\": \"image\", \"priority\": 100, \"recovery\": {}, \"key\": null, \"body\": {\"config\": {\"x\": 1}}},"
		"{\"i\": 1, \"name\": \"b\", \"owner\": \"sub1\", \"kind\": \"image\", \"priority\": 100, \"recovery\": {}, \"key\": null, \"body\": {\"config\": {\"x\": 2}}},"
		"{\"i\": 2, \"name\": \"c\", \"owner\": \"sub1\", \"kind\": \"video\", \"priority\": 100, \"recovery\": {}, \"key\": null, \"body\": {\"config\": {\"x\": 3}}}]')",
		"SELECT count(*) FROM rung_submit_batch('["
		"{\"i\": 0, \"name\": \"d\", \"owner\": \"sub1\", \"kind\": \"image\", \"priority\": 100, \"recovery\": {}, \"key\": \"k1\", \"body\": {\"config\": {\"x\": 4}}}]')",
		"SELECT count(*) FROM rung_claim_batch(jsonb_build_array("
		" jsonb_build_object('i', 0, 'worker', (SELECT id FROM workers WHERE name = 'w1'), 'gpu', 'U-1', 'fresh', true),"
		" jsonb_build_object('i', 1, 'worker', (SELECT id FROM workers WHERE name = 'w1'), 'gpu', 'U-2', 'fresh', true),"
		" jsonb_build_object('i', 2, 'worker', (SELECT id FROM workers WHERE name = 'w1'), 'gpu', 'U-3', 'fresh', true)), 600)",
		/* a succeeds; c fails on U-3, which is quarantined, and escalates */
		"SELECT count(*) FROM rung_finish_apply_batch((SELECT jsonb_agg(jsonb_build_object('i', a.number, 'id', a.id,"
		" 'token', a.token, 'facts', '{\"duration_ms\": 5}'::jsonb, 'decision', CASE j.name WHEN 'a' THEN"
		" '{\"class\": \"success\", \"job_state\": \"succeeded\", \"rule\": \"r0\", \"reason\": \"done\"}'::jsonb ELSE"
		" '{\"class\": \"env_fault\", \"job_state\": \"failed\", \"rule\": \"r1\", \"reason\": \"gave up\","
		"   \"gpu\": {\"mark\": \"quarantine\"}, \"escalation\": {\"trigger\": \"env\", \"summary\": \"s\", \"recommendation\": \"r\"}}'::jsonb END,"
		" 'report', '{\"markdown\": \"# r\", \"json\": {}}'::jsonb) ORDER BY a.id)"
		" FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name IN ('a', 'c')))",
	};
	size_t i;

	for (i = 0; i < ARRAY_LEN(steps); i++)
		if (!sql_scalar(url, steps[i], 0, NULL, NULL, 0))
			return false;
	return true;
}

static void test_upgrade(void)
{
	struct frozen fz = frozen_load();
	char *url = fresh_db("rung_mig_upgrade"), *furl = fresh_db("rung_mig_fresh");
	char before[64] = "", after[64] = "", b[256], id[32], tok[80], v1[8192] = "", v2[8192] = "";
	char *defs_up = NULL, *defs_fresh = NULL;
	const char *p[2];

	TAP_INT_EQ(fz.n, 12, "the old tree's migrations 001-012 (tests/data/migrations-012)");
	TAP_OK(url && furl, "fresh databases for the upgrade");
	if (!url || !furl || fz.n != 12)
		goto out;
	TAP_INT_EQ(migrate_apply(url, 5000, fz.list, fz.n), 0, "a database at migration 012, as the old tree built it");
	TAP_OK(upgrade_fill(url), "filled by the old functions: jobs, attempts, a worker, GPUs, tokens, an escalation");
	TAP_STR_EQ(val(url, "SELECT string_agg(name || ':' || state, ',' ORDER BY name) FROM jobs", 0, NULL, b, sizeof b),
		"a:succeeded,b:running,c:failed,d:queued", "one job per state before the upgrade");
	TAP_OK(sql_scalar(url, sql_data, 0, NULL, before, sizeof before), "a digest of the data before");

	TAP_INT_EQ(migrate_run(url, 5000, false), 0, "today's migrate upgrades it");
	TAP_OK(sql_scalar(url, sql_data, 0, NULL, after, sizeof after) && !strcmp(before, after),
		"every row of every table is as it was");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_migrations"), sql_migrations_count,
		"every migration recorded");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM tokens WHERE expires_at IS NOT NULL"), 0,
		"tokens made before migration 023 never expire");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM schema_repeatables"), sql_repeatables_count,
		"every repeatable file recorded");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM pg_proc WHERE proname = 'rung_finish_ctx'"), 0,
		"the unused rung_finish_ctx is dropped");

	/* The functions work on the old data: the running attempt finishes, the queued job is leased. */
	val(url, "SELECT a.id FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = 'b'", 0, NULL, id, sizeof id);
	val(url, "SELECT a.token FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name = 'b'", 0, NULL, tok, sizeof tok);
	p[0] = id;
	p[1] = tok;
	TAP_STR_EQ(val(url, "SELECT (ctx->'job'->>'kind') || ':' || (ctx->'attempt'->>'number') FROM rung_finish_ctx_batch("
		"jsonb_build_array(jsonb_build_object('i', 0, 'id', $1::bigint, 'token', $2::text, 'facts', '{}'::jsonb)))",
		2, p, b, sizeof b), "image:1", "the CTX of an attempt that started before the upgrade");
	TAP_STR_EQ(val(url, "SELECT string_agg(doc->>'job_state', ',') FROM rung_finish_apply_batch(jsonb_build_array("
		"jsonb_build_object('i', 0, 'id', $1::bigint, 'token', $2::text, 'facts', '{}'::jsonb, 'decision',"
		" '{\"class\": \"success\", \"job_state\": \"succeeded\", \"rule\": \"r0\", \"reason\": \"done\"}'::jsonb)))",
		2, p, b, sizeof b), "succeeded", "and it finishes with its lease token");
	TAP_STR_EQ(val(url, "SELECT string_agg(status || ':' || (SELECT name FROM jobs WHERE id = c.job_id), ',')"
		" FROM rung_claim_batch(jsonb_build_array(jsonb_build_object('i', 0, 'worker',"
		" (SELECT id FROM workers WHERE name = 'w1'), 'gpu', 'U-1', 'fresh', true)), 600) c", 0, NULL, b, sizeof b),
		"ok:d", "a claim round leases the job queued before the upgrade");
	TAP_STR_EQ(val(url, "SELECT string_agg(doc->>'job_state', ',') FROM rung_finish_apply_batch((SELECT jsonb_agg("
		"jsonb_build_object('i', 0, 'id', a.id, 'token', a.token, 'facts', '{}'::jsonb, 'decision',"
		" '{\"class\": \"oom\", \"job_state\": \"failed\", \"rule\": \"r2\", \"reason\": \"no rung left\","
		"   \"escalation\": {\"trigger\": \"ladder\", \"summary\": \"s2\", \"recommendation\": \"r2\"}}'::jsonb))"
		" FROM attempts a WHERE a.state = 'running'))", 0, NULL, b, sizeof b),
		"failed", "its finish escalates");
	TAP_INT_EQ(count_rows(url, "SELECT count(*) FROM webhook_outbox"), 2, "and the webhook trigger queued its notification");
	TAP_STR_EQ(val(url, "SELECT string_agg(name || ':' || state, ',' ORDER BY name) FROM jobs", 0, NULL, b, sizeof b),
		"a:succeeded,b:succeeded,c:failed,d:failed", "every job where the calls put it");
	{
		/* during a rollout a rungd from before migration 024 still registers, as it always did */
		const char *reg[5] = { "old-rungd", "h", "[{\"uuid\": \"U-old\", \"memory_total_mib\": 1024}]", NULL, "true" };
		TAP_STR_EQ(val(url, "SELECT rung_register_owned($1, $2, $3::jsonb, $4::bigint, $5::boolean)->>'status'", 5, reg,
			       b, sizeof b), "ok", "a rungd from before 024 registers with its five arguments (rollout: the old name kept)");
		TAP_STR_EQ(val(url, "SELECT coalesce(version, 'none') FROM workers WHERE name = 'old-rungd'", 0, NULL, b, sizeof b),
			   "none", "its worker without a version");
	}

	/* Twice is a no-op; a fresh database ends with the same functions and triggers. */
	sql_scalar(url, sql_versions, 0, NULL, v1, sizeof v1);
	TAP_INT_EQ(migrate_run(url, 5000, false), 0, "migrate again");
	sql_scalar(url, sql_versions, 0, NULL, v2, sizeof v2);
	TAP_OK(v1[0] && !strcmp(v1, v2), "a no-op: no function or trigger created again");
	TAP_INT_EQ(migrate_run(furl, 5000, false), 0, "a fresh database migrated");
	defs_up = xmalloc(1 << 20);
	defs_fresh = xmalloc(1 << 20);
	TAP_OK(sql_scalar(url, sql_defs, 0, NULL, defs_up, 1 << 20) && sql_scalar(furl, sql_defs, 0, NULL, defs_fresh, 1 << 20)
		&& strlen(defs_up) > 1000 && !strcmp(defs_up, defs_fresh),
		"the upgraded and the fresh database have the same function and trigger definitions");
	TAP_INT_EQ(count_rows(furl, "SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal"), 5,
		"the five triggers (GPU quarantine stamp, escalation webhook, the events view's insert, job webhook, "
		"release of the jobs that run after one)");
	{
		/* A rollback: a rungd of the release before applies its own function files again at start,
		 * with the old names and signatures. Its calls must resolve to those (no overload makes them
		 * ambiguous), and this release's calls, by their new names, still work. */
		sql_scalar(url, "CREATE OR REPLACE FUNCTION rung_register(p_name text, p_host text, p_gpus jsonb) RETURNS jsonb "
			   "LANGUAGE plpgsql AS $$ BEGIN RETURN '{\"old\": true}'; END $$", 0, NULL, b, sizeof b);
		sql_scalar(url, "CREATE OR REPLACE FUNCTION rung_register_owned(p_name text, p_host text, p_gpus jsonb, "
			   "p_token bigint, p_admin boolean) RETURNS jsonb LANGUAGE plpgsql AS $$ BEGIN "
			   "RETURN rung_register(p_name, p_host, p_gpus) || '{\"status\": \"ok\"}'; END $$", 0, NULL, b, sizeof b);
		sql_scalar(url, "CREATE OR REPLACE FUNCTION rung_token_create(p_name text, p_role text, p_hash text) RETURNS jsonb "
			   "LANGUAGE plpgsql AS $$ BEGIN RETURN '{\"old\": true}'; END $$", 0, NULL, b, sizeof b);
		const char *reg[5] = { "old-again", "h", "[]", NULL, "true" };
		TAP_STR_EQ(val(url, "SELECT rung_register_owned($1, $2, $3::jsonb, $4::bigint, $5::boolean)->>'old'", 5, reg,
			       b, sizeof b), "true", "rolled back: the old release's registration resolves to its own function");
		const char *tok[3] = { "old-tok", "submitter", "0123" };
		TAP_STR_EQ(val(url, "SELECT rung_token_create($1, $2, $3)->>'old'", 3, tok, b, sizeof b), "true",
			   "rolled back: the old release's token create resolves to its own function");
		const char *reg6[6] = { "new-again", "h", "[]", NULL, "true", "v9" };
		TAP_STR_EQ(val(url, "SELECT rung_worker_register_owned($1, $2, $3::jsonb, $4::bigint, $5::boolean, $6::text)->>'status'",
			       6, reg6, b, sizeof b), "ok", "and this release's registration, by its own name, still works");
		const char *tok4[4] = { "new-tok", "submitter",
				       "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789", "3600" };
		TAP_STR_EQ(val(url, "SELECT rung_token_issue($1, $2, $3, $4::int)->>'status'", 4, tok4, b, sizeof b), "created",
			   "and its token issue too");
		/* migration 026's pools: the release before's claim helpers come back beside the new ones,
		 * which take a pool and no default, so neither release's calls are ambiguous */
		sql_scalar(url, "CREATE OR REPLACE FUNCTION rung_queue_head(p_capped text[], p_n int, p_running jsonb DEFAULT NULL) "
			   "RETURNS bigint[] LANGUAGE sql AS $$ SELECT '{-1}'::bigint[] $$", 0, NULL, b, sizeof b);
		sql_scalar(url, "CREATE OR REPLACE FUNCTION rung_queued_owners(p_capped text[]) RETURNS text[] "
			   "LANGUAGE sql AS $$ SELECT '{old}'::text[] $$", 0, NULL, b, sizeof b);
		TAP_STR_EQ(val(url, "SELECT array_to_string(rung_queue_head('{}', 2), ',') || '/' || "
			       "array_to_string(rung_queued_owners('{}'), ',')", 0, NULL, b, sizeof b), "-1/old",
			   "rolled back: the old release's claim helpers resolve to its own functions");
		sql_scalar(url, "SELECT count(*) FROM rung_submit_batch('[{\"i\": 0, \"name\": \"e\", \"owner\": \"sub1\", "
			   "\"kind\": \"image\", \"priority\": 100, \"recovery\": {}, \"key\": null, \"body\": {\"config\": {\"x\": 5}}}]')",
			   0, NULL, b, sizeof b);
		TAP_STR_EQ(val(url, "SELECT string_agg(status || ':' || (SELECT name FROM jobs WHERE id = c.job_id), ',') "
			       "FROM rung_claim_round(jsonb_build_array(jsonb_build_object('i', 0, 'worker', "
			       "(SELECT id FROM workers WHERE name = 'w1'), 'gpu', 'U-2', 'fresh', true)), 600, true) c",
			       0, NULL, b, sizeof b), "ok:e",
			   "and this release's round, whose fair share reads the head by the new helpers, leases a job");
		TAP_STR_EQ(val(url, "SELECT coalesce(array_to_string(rung_queue_head('{}', 2, NULL, 'default'), ','), '') || '/' || "
			       "array_to_string(rung_queued_owners('{}', 'default'), ',')", 0, NULL, b, sizeof b), "/",
			   "and its helpers, by their pool argument, are its own");
	}
out:
	free(defs_up);
	free(defs_fresh);
	free(url);
	free(furl);
	drop_db("rung_mig_upgrade");
	drop_db("rung_mig_fresh");
	frozen_free(&fz);
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
	test_repeatables();
	test_upgrade();
	test_wait();
	cluster_teardown();
	return TAP_DONE();
}
