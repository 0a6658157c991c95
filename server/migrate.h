/* Schema migrations for rungd: applies the embedded migrations/ files (build/sql.h) in name
 * order, each in its own transaction, under a Postgres advisory lock so that concurrent rungd
 * processes never apply one twice. Blocking libpq: runs before the event loop starts. */
#ifndef RUNG_MIGRATE_H
#define RUNG_MIGRATE_H

#include <stddef.h>

#include "sql.h"

/* The advisory-lock key every rung process takes while migrating ("rungmigr"). */
#define MIGRATE_LOCK_KEY "8247057358766009714"

/* Connects to `conninfo`, retrying until `wait_ms` has elapsed (so rungd can start while
 * Postgres is still coming up), then applies every sql_migrations[] entry not yet recorded in
 * schema_migrations (created if missing). Returns 0 when the schema is current, -1 after
 * logging the reason (connection, or which migration failed with Postgres's message; that
 * migration is rolled back, earlier ones stay applied). Idempotent. */
int migrate_run(const char *conninfo, int wait_ms);

/* migrate_run over an explicit list (for tests and tools): `list[0..n)` in the given order,
 * names unique; the list is borrowed. Same contract as migrate_run. */
int migrate_apply(const char *conninfo, int wait_ms, const struct sql_migration *list, size_t n);

#endif
