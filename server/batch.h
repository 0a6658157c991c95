/* A coalescer: items of one kind (heartbeats, finishes, submits) that arrive close together are
 * sent to the database as one statement whose $1 is a JSON array of the items, with at most a few
 * such statements in flight. Items arriving while the limit is reached wait for the next batch,
 * so batches grow with the load and a lone item goes out on the next loop pass. A statement that
 * fails with a statement error (not a connection-class one) is split: each item runs alone, so
 * one bad item cannot fail the others; done then sees that item's own error. */
#ifndef RUNG_BATCH_H
#define RUNG_BATCH_H

#include <jansson.h>
#include <libpq-fe.h>

struct event_base;
struct db;
struct batch;

struct batch_ops {
	/* The statement (an embedded sql_* string): $1 the JSON array of the items, $2 `param2`
	 * when not NULL. Its rows carry the item's index in the array (the "i" key) in column 0. */
	const char *sql;
	/* The item's JSON object for the array (new reference; "i" is added by the coalescer). */
	json_t *(*item_json)(void *item);
	/* Called once per batch with its items in array order (index i = position): res holds the
	 * statement's rows (owned by the pool, valid during the call), or res NULL / a failed result
	 * exactly as db_cb gets it. It must finish every item (answer, or hand it on). */
	void (*done)(void **items, int n, PGresult *res, const char *err, void *arg);
	/* Optional: the items of a statement are put in ascending order of this key (e.g. the
	 * attempt id, so that concurrent statements lock rows in one order). */
	long long (*order)(void *item);
	/* Optional, instead of item_json: the item's JSON object as text (borrowed, valid until done;
	 * "i" is added by the coalescer), for an item that carries JSON text it was sent, so that the
	 * text is not parsed into a tree only to be printed again (a submit's 3 KB config). */
	const char *(*item_text)(void *item);
};

/* A coalescer on `base` and `db` (both borrowed, must outlive it). max_items: items per
 * statement (>= 1); max_inflight: statements in flight at once (>= 1); param2 is copied (may be
 * NULL). ops must outlive the coalescer. */
struct batch *batch_new(struct event_base *base, struct db *db, const struct batch_ops *ops, void *arg,
			int max_items, int max_inflight, const char *param2);
/* Frees the coalescer; items still waiting are finished with res NULL, err "shutting down". A
 * statement still in flight must not exist (its callback would use freed memory). Accepts NULL. */
void batch_free(struct batch *b);

/* Queues item (borrowed until done) for the next batch. key >= 0: no two items with the same key
 * go in one statement (a later one waits for the following batch); key < 0: no such rule. */
void batch_add(struct batch *b, void *item, long long key);

/* While a statement is in flight, another goes out only once n items wait (default 1: at once,
 * up to max_inflight). Under light load each item still goes out on the next loop pass; under a
 * steady load small statements are merged into fewer, larger ones (fewer commits, less lock and
 * CPU contention between the pool's connections). n < 1 counts as 1. */
void batch_set_min_fill(struct batch *b, int n);

/* Statements in flight and items waiting: for tests and logs. */
void batch_stats(const struct batch *b, int *inflight, int *waiting);

/* Row r's index column (column 0) as an int in [0, n), or -1 when it is not one. */
int batch_row_index(const PGresult *res, int r, int n);
/* For each of the n items of a batch, the row of res that answers it (by the index column), or -1
 * when no row does. A new array of n ints; the caller frees it. */
int *batch_rows(const PGresult *res, int n);

#endif
