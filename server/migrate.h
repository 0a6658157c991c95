/* Schema migrations for rungd: applies the embedded migrations/ files (build/sql.h) in name
 * order, each in its own transaction, then the repeatable sql/functions/ files (every function and
 * trigger, CREATE OR REPLACE) in one transaction when they changed, all under a Postgres advisory
 * lock so that concurrent rungd processes never apply one twice. Blocking libpq: runs before the
 * event loop starts. */
#ifndef RUNG_MIGRATE_H
#define RUNG_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>

#include "sql.h"

/* The advisory-lock key every rung process takes while migrating ("rungmigr"). */
#define MIGRATE_LOCK_KEY "8247057358766009714"

/* Connects to `conninfo`, retrying until `wait_ms` has elapsed (so rungd can start while
 * Postgres is still coming up), then applies every sql_migrations[] entry not yet recorded in
 * schema_migrations (created if missing), then all of sql_repeatables[], in order and in one
 * transaction, when a migration was applied now or the files differ from those recorded in
 * schema_repeatables (names and md5 of their text). When schema_migrations records a migration
 * whose name sorts after every one this build knows (a newer release migrated the database), and
 * none was applied now, the function files are left as that release installed them (logged),
 * unless force_functions (`rungd migrate --force-functions`, a deliberate rollback). Returns 0 when the schema and functions are
 * current, -1 after logging the reason (connection, or which file failed with Postgres's
 * message; that migration, or the whole repeatable set, is rolled back, earlier migrations stay
 * applied). Idempotent: a second run changes nothing. */
int migrate_run(const char *conninfo, int wait_ms, bool force_functions);

/* migrate_run over explicit lists (for tests and tools): migrations `list[0..n)` and repeatable
 * files `rep[0..nrep)`, each in the given order, names unique; the lists are borrowed. With
 * nrep == 0 the repeatable step (and schema_repeatables) is left alone. Same contract as
 * migrate_run. */
int migrate_apply_all(const char *conninfo, int wait_ms, const struct sql_migration *list, size_t n,
	const struct sql_migration *rep, size_t nrep, bool force_functions);

/* migrate_apply_all with migrations only. */
int migrate_apply(const char *conninfo, int wait_ms, const struct sql_migration *list, size_t n);

#endif
