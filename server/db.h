/* The database pool of rungd: a few libpq connections driven non-blockingly on the libevent
 * loop (PQsendQueryPrepared -> PQflush -> PQconsumeInput/PQisBusy/PQgetResult on PQsocket
 * events). It reconnects by itself and owns LISTEN; it knows nothing about jobs. */
#ifndef RUNG_DB_H
#define RUNG_DB_H

#include <stdbool.h>
#include <libpq-fe.h>

struct event_base;
struct db;

/* Called exactly once per db_exec, always from the event loop and never from inside db_exec.
 * res: the statement's result (PGRES_TUPLES_OK / PGRES_COMMAND_OK, or PGRES_FATAL_ERROR with the
 * server's message), owned by the pool and cleared after the callback returns; NULL when the
 * statement could not be run (no connection within the queue timeout, or the connection broke
 * mid-statement: the outcome is then unknown, the caller answers 503). err: a short reason
 * when res is NULL or failed, else NULL. */
typedef void (*db_cb)(PGresult *res, const char *err, void *arg);
typedef void (*db_notify_cb)(const char *channel, const char *payload, void *arg);

/* Opens `size` connections to `conninfo` in the background. Returns NULL only on bad arguments.
 * Sessions run with JIT off and application_name rungd unless the conninfo says otherwise (its
 * own options are kept, and win for a setting they name). */
struct db *db_new(struct event_base *base, const char *conninfo, int size);
/* db_new with extra session settings `options` ("-c name=value ...", copied; NULL: none), applied
 * after rungd's defaults and before the conninfo's own options. */
struct db *db_new_with(struct event_base *base, const char *conninfo, int size, const char *options);
/* Closes every connection; pending callbacks (in flight and queued) are called with res NULL and
 * err "database closed" before it returns. Accepts NULL. Must not be called from inside a db_cb
 * or db_notify_cb of the same pool. */
void db_free(struct db *db);

/* How long a statement may wait in the queue for a connection while no connection is up before
 * it gets res NULL, err "database unavailable" (default 2000 ms). A long queue on a healthy pool
 * never fails a statement: at the deadline, if a connection is up, the statement waits another
 * window. Applies to statements queued after the call. */
void db_set_queue_timeout_ms(struct db *db, int ms);

/* Runs one statement with text parameters (NULL = SQL NULL). `sql` is a statement from
 * build/sql.h (an embedded sql_* string); it is prepared once per connection, keyed by the
 * pointer, so pass the same pointer each time (it must outlive the pool). The parameters are
 * copied. Queued (FIFO) when every connection is busy or down; one statement per connection
 * at a time. A failed Prepare reaches cb as that PGRES_FATAL_ERROR result. */
void db_exec(struct db *db, const char *sql, int nparams, const char *const *params, db_cb cb, void *arg);

/* True while at least one connection is up. */
bool db_up(const struct db *db);
/* Connections busy, idle, and statements queued: for /metrics and tests. */
void db_stats(const struct db *db, int *busy, int *idle, int *queued);

/* LISTENs on `channel` on a dedicated connection, re-LISTENing after every reconnect and
 * health-checking it; cb runs on the loop for each NOTIFY. One channel per pool. */
void db_listen(struct db *db, const char *channel, db_notify_cb cb, void *arg);
/* Called after every (re)connect of the LISTEN connection, so the caller can re-scan for
 * work it may have missed while it was down. */
void db_on_listen_reconnect(struct db *db, void (*cb)(void *arg), void *arg);

#endif
