/* Applies the embedded migrations and then the repeatable function files (see migrate.h):
 * blocking libpq, one transaction per migration and one for the whole repeatable set, a session
 * advisory lock around the whole run, and the schema_migrations / schema_repeatables bookkeeping
 * tables. Owns nothing after it returns; knows nothing about what the files contain. */
#include "migrate.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "log.h"
#include "util.h"

#define MIGRATE_RETRY_MS 200

static const char migrate_sql_lock[] = "SELECT pg_advisory_lock($1::bigint)";
static const char migrate_sql_unlock[] = "SELECT pg_advisory_unlock($1::bigint)";
static const char migrate_sql_table[] =
	"CREATE TABLE IF NOT EXISTS schema_migrations ("
	" name text PRIMARY KEY,"
	" applied_at timestamptz NOT NULL DEFAULT now())";
static const char migrate_sql_applied[] = "SELECT 1 FROM schema_migrations WHERE name = $1";
static const char migrate_sql_record[] = "INSERT INTO schema_migrations (name) VALUES ($1)";
/* The repeatable files as last applied: one row per file with the md5 of its text. */
static const char migrate_sql_rep_table[] =
	"CREATE TABLE IF NOT EXISTS schema_repeatables ("
	" name text PRIMARY KEY,"
	" checksum text NOT NULL,"
	" applied_at timestamptz NOT NULL DEFAULT now())";
static const char migrate_sql_rep_same[] =
	"SELECT 1 FROM schema_repeatables WHERE name = $1 AND checksum = md5($2)";
static const char migrate_sql_rep_count[] = "SELECT 1 FROM schema_repeatables HAVING count(*) = $1::int";
static const char migrate_sql_rep_clear[] = "DELETE FROM schema_repeatables";
static const char migrate_sql_rep_record[] = "INSERT INTO schema_repeatables (name, checksum) VALUES ($1, md5($2))";
/* A migration recorded after the newest this build knows ($1): a newer release migrated the database.
 * (Names sort in their order; one that sorts before, such as a name a migration had before it was
 * renamed, is not a newer release's.) */
static const char migrate_sql_newer[] = "SELECT max(name) FROM schema_migrations WHERE name > $1";

/* Postgres NOTICEs ("already exists, skipping") are debug noise here. */
static void migrate_notice(void *arg, const char *msg)
{
	(void)arg;
	log_debug("migrate notice", "text=\"%.*s\"", (int)strcspn(msg, "\n\""), msg);
}

/* First line of a Postgres message with double quotes softened, for key="value" logs. */
static const char *migrate_errline(char *buf, size_t n, const char *msg)
{
	size_t i = 0;

	for (; msg && *msg && *msg != '\n' && i + 1 < n; msg++)
		buf[i++] = *msg == '"' ? '\'' : *msg;
	buf[i] = '\0';
	return buf;
}

/* Runs one parameterised statement; true when it succeeded. On failure logs `what` + error. */
static bool migrate_exec(PGconn *pg, const char *sql, int nparams, const char *const *params,
	const char *what, const char *name, bool *found)
{
	PGresult *res = PQexecParams(pg, sql, nparams, NULL, params, NULL, NULL, 0);
	ExecStatusType st = PQresultStatus(res);
	bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
	char err[256];

	if (!ok)
		log_error("migrate failed", "step=%s migration=\"%s\" error=\"%s\"", what, name ? name : "",
			migrate_errline(err, sizeof err, PQresultErrorMessage(res)));
	else if (found)
		*found = PQntuples(res) > 0;
	PQclear(res);
	return ok;
}

static PGconn *migrate_connect(const char *conninfo, int wait_ms)
{
	int64_t deadline = util_mono_ms() + (wait_ms > 0 ? wait_ms : 0);
	struct timespec ts = { 0, MIGRATE_RETRY_MS * 1000000L };
	char err[256];
	bool logged = false;
	PGconn *pg;

	for (;;) {
		pg = PQconnectdb(conninfo);
		if (pg && PQstatus(pg) == CONNECTION_OK)
			return pg;
		migrate_errline(err, sizeof err, pg ? PQerrorMessage(pg) : "out of memory");
		PQfinish(pg);
		if (util_mono_ms() >= deadline) {
			log_error("migrate: cannot connect to the database", "wait_ms=%d error=\"%s\"", wait_ms, err);
			return NULL;
		}
		if (!logged)
			log_info("migrate: waiting for the database", "wait_ms=%d error=\"%s\"", wait_ms, err);
		logged = true;
		nanosleep(&ts, NULL); /* a retry interval, not synchronisation */
	}
}

/* Runs one multi-statement file inside the open transaction; false (logged) when it failed or
 * ended the transaction itself. */
static bool migrate_file(PGconn *pg, const struct sql_migration *m, const char *kind)
{
	PGresult *res = PQexec(pg, m->text); /* simple query protocol: many statements */
	ExecStatusType st = PQresultStatus(res);
	char err[256];
	bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY;

	if (!ok)
		log_error("migration failed", "%s=\"%s\" error=\"%s\"", kind, m->name,
			migrate_errline(err, sizeof err, PQresultErrorMessage(res)));
	else if (PQtransactionStatus(pg) != PQTRANS_INTRANS) {
		log_error("migration failed", "%s=\"%s\" error=\"%s\"", kind, m->name,
			"the file must not end the transaction itself (no COMMIT/ROLLBACK)");
		ok = false;
	}
	PQclear(res);
	return ok;
}

/* Applies one migration in its own transaction; rolls it back on failure. */
static int migrate_one(PGconn *pg, const struct sql_migration *m)
{
	const char *params[1] = { m->name };
	int rc = -1;

	if (!migrate_exec(pg, "BEGIN", 0, NULL, "begin", m->name, NULL))
		goto out;
	if (!migrate_file(pg, m, "migration"))
		goto rollback;
	if (!migrate_exec(pg, migrate_sql_record, 1, params, "record", m->name, NULL))
		goto rollback;
	if (!migrate_exec(pg, "COMMIT", 0, NULL, "commit", m->name, NULL))
		goto out;
	log_info("migration applied", "migration=\"%s\"", m->name);
	rc = 0;
	goto out;
rollback:
	PQclear(PQexec(pg, "ROLLBACK"));
out:
	return rc;
}

/* Whether the repeatable set recorded in schema_repeatables is exactly rep[0..n) (same names,
 * same checksums). -1 when a query failed. */
static int migrate_rep_current(PGconn *pg, const struct sql_migration *rep, size_t n)
{
	char count[24];
	const char *cp[1] = { count };
	bool found = false;
	size_t i;

	snprintf(count, sizeof count, "%zu", n);
	if (!migrate_exec(pg, migrate_sql_rep_count, 1, cp, "check", NULL, &found))
		return -1;
	for (i = 0; found && i < n; i++) {
		const char *params[2] = { rep[i].name, rep[i].text };

		if (!migrate_exec(pg, migrate_sql_rep_same, 2, params, "check", rep[i].name, &found))
			return -1;
	}
	return found ? 1 : 0;
}

/* Applies every repeatable file, in order, in one transaction, and records their checksums;
 * rolls the whole set back when one fails. The record is cleared first, on its own: should a
 * file commit part of itself before failing, the next run applies the set again. */
static int migrate_repeatables(PGconn *pg, const struct sql_migration *rep, size_t n)
{
	size_t i;

	if (!migrate_exec(pg, migrate_sql_rep_clear, 0, NULL, "record", NULL, NULL) ||
		!migrate_exec(pg, "BEGIN", 0, NULL, "begin", NULL, NULL))
		return -1;
	for (i = 0; i < n; i++)
		if (!migrate_file(pg, &rep[i], "repeatable"))
			goto rollback;
	if (!migrate_exec(pg, migrate_sql_rep_clear, 0, NULL, "record", NULL, NULL))
		goto rollback;
	for (i = 0; i < n; i++) {
		const char *params[2] = { rep[i].name, rep[i].text };

		if (!migrate_exec(pg, migrate_sql_rep_record, 2, params, "record", rep[i].name, NULL))
			goto rollback;
	}
	if (!migrate_exec(pg, "COMMIT", 0, NULL, "commit", NULL, NULL))
		return -1;
	log_info("functions applied", "files=%zu", n);
	return 0;
rollback:
	PQclear(PQexec(pg, "ROLLBACK"));
	return -1;
}

int migrate_apply(const char *conninfo, int wait_ms, const struct sql_migration *list, size_t n)
{
	return migrate_apply_all(conninfo, wait_ms, list, n, NULL, 0, false);
}

/* The newest migration recorded in schema_migrations that sorts after every name of list[0..n) (n > 0),
 * into out (size cap): 1 when there is one (a newer release migrated the database), 0 when none, -1
 * when the query failed (logged). */
static int migrate_newer(PGconn *pg, const struct sql_migration *list, size_t n, char *out, size_t cap)
{
	const char *newest = list[0].name, *params[1];
	PGresult *r;
	int rc = -1;
	size_t i;

	for (i = 1; i < n; i++)
		if (strcmp(list[i].name, newest) > 0)
			newest = list[i].name;
	params[0] = newest;
	r = PQexecParams(pg, migrate_sql_newer, 1, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		char line[256];
		log_error("migration failed", "step=check_newer error=\"%s\"",
			  migrate_errline(line, sizeof line, PQerrorMessage(pg)));
		goto out;
	}
	rc = !PQgetisnull(r, 0, 0);
	if (rc)
		snprintf(out, cap, "%s", PQgetvalue(r, 0, 0));
out:
	PQclear(r);
	return rc;
}

int migrate_apply_all(const char *conninfo, int wait_ms, const struct sql_migration *list, size_t n,
	const struct sql_migration *rep, size_t nrep, bool force_functions)
{
	char newer[256] = "";
	const char *key[1] = { MIGRATE_LOCK_KEY };
	PGconn *pg = NULL;
	bool locked = false, found = false;
	size_t i, applied = 0;
	int rc = -1, current;

	if (!conninfo || (n && !list) || (nrep && !rep))
		goto out;
	pg = migrate_connect(conninfo, wait_ms);
	if (!pg)
		goto out;
	PQsetNoticeProcessor(pg, migrate_notice, NULL);
	if (!migrate_exec(pg, migrate_sql_lock, 1, key, "lock", NULL, NULL))
		goto out;
	locked = true;
	if (!migrate_exec(pg, migrate_sql_table, 0, NULL, "create_table", NULL, NULL))
		goto out;
	for (i = 0; i < n; i++) {
		const char *params[1] = { list[i].name };

		if (!migrate_exec(pg, migrate_sql_applied, 1, params, "check", list[i].name, &found))
			goto out;
		if (found)
			continue;
		if (migrate_one(pg, &list[i]) < 0)
			goto out;
		applied++;
	}
	log_info("schema up to date", "migrations=%zu applied_now=%zu", n, applied);
	if (nrep && n && !applied && !force_functions) {
		/* A newer release migrated this database and installed its functions, which keep this
		 * release's calls working (README, Upgrading a fleet): an older rungd restarted during a
		 * rollout must not put its own back under every replica. (A run that applied a migration
		 * now always applies its files: no newer release has been here.) */
		int nw = migrate_newer(pg, list, n, newer, sizeof newer);
		if (nw < 0)
			goto out;
		if (nw) {
			log_warn("functions left as a newer release installed them", "newer_migration=\"%s\" files=%zu "
				 "hint=\"rungd migrate --force-functions installs this release's (a deliberate rollback)\"",
				 newer, nrep);
			nrep = 0;
		}
	}
	if (nrep) {
		/* After any migration the whole set runs again (a migration may have dropped what a
		 * function or trigger needed); otherwise only when a file changed, came or went. */
		if (!migrate_exec(pg, migrate_sql_rep_table, 0, NULL, "create_table", NULL, NULL))
			goto out;
		current = applied ? 0 : migrate_rep_current(pg, rep, nrep);
		if (current < 0 || (!current && migrate_repeatables(pg, rep, nrep) < 0))
			goto out;
		if (current)
			log_info("functions up to date", "files=%zu", nrep);
	}
	rc = 0;
out:
	if (locked)
		migrate_exec(pg, migrate_sql_unlock, 1, key, "unlock", NULL, NULL);
	PQfinish(pg);
	return rc;
}

int migrate_run(const char *conninfo, int wait_ms, bool force_functions)
{
	return migrate_apply_all(conninfo, wait_ms, sql_migrations, sql_migrations_count, sql_repeatables,
		sql_repeatables_count, force_functions);
}
