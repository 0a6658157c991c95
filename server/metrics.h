/* GET /metrics for rungd in the Prometheus text exposition format (version 0.0.4): the counts
 * kept in the database (what is true now: running attempts, queue, heartbeats, GPUs, workers by
 * state and by version, queued jobs and GPUs per worker pool, escalations, webhook outbox, read at every scrape; and the history's: jobs ended, attempts,
 * rungs, lease waits, read at most once per --metrics-history-ms), and what only the process
 * knows (its build's version, HTTP request latency by route and status class, the database pool, and the families
 * other modules register here and push into: parked long-polls, ownership checks). It includes
 * none of those modules. */
#ifndef RUNG_METRICS_H
#define RUNG_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct evbuffer;
struct hreq;
struct metrics;

/* A histogram with fixed upper bounds (ascending, borrowed: static storage). */
struct metrics_hist {
	const double *bounds;
	int nbounds;
	uint64_t *counts; /* per bound, not cumulative; counts[nbounds] is the overflow (+Inf only) */
	double sum;
	uint64_t count;
};

void metrics_hist_init(struct metrics_hist *hi, const double *bounds, int nbounds);
void metrics_hist_release(struct metrics_hist *hi);
/* Counts v in the first bucket whose bound is >= v (Prometheus `le` semantics). */
void metrics_hist_observe(struct metrics_hist *hi, double v);

/* Exposition writers. labels: "key", "value" pairs ending with NULL (or NULL for none); values
 * are escaped (backslash, double quote, newline). */
void metrics_write_head(struct evbuffer *b, const char *name, const char *type, const char *help);
void metrics_write_sample(struct evbuffer *b, const char *name, const char *const *labels, double v);
/* name_bucket{labels,le="B"} cumulative for each bound and +Inf, then name_sum and name_count. */
void metrics_write_hist(struct evbuffer *b, const char *name, const char *const *labels,
			const struct metrics_hist *hi);
/* The same from cumulative counts given per bound (as SQL computes them) plus sum and count. */
void metrics_write_hist_cumulative(struct evbuffer *b, const char *name, const char *const *labels,
				   const double *bounds, const uint64_t *cumulative, int nbounds, double sum,
				   uint64_t count);
/* The worker pools' families from metrics_live.sql's "pools" ({POOL: {"queued": n, "gpus": n,
 * "borrowing_gpus": n}}, borrowed; NULL or empty: the three heads alone): rung_pool_queued_jobs{pool},
 * rung_pool_gpus{pool} and rung_pool_borrowing_gpus{pool} (migration 028: the GPUs of workers of other
 * pools that borrow from it), a sample of each for every pool listed (the alert RungPoolWithoutGpus
 * compares them pool by pool, so a pool with queued jobs and no GPU has all three). */
void metrics_write_pools(struct evbuffer *b, const json_t *pools);
/* rung_token_expiry_seconds{id, name, role}: one sample per element of tokens (the live statement's
 * "token_expiry": [{"id", "name", "role", "s"}]; NULL: the head alone), labels escaped. */
void metrics_write_token_expiry(struct evbuffer *b, const json_t *tokens);
/* A label value escaped for the exposition format, appended to b. */
void metrics_escape_label(struct evbuffer *b, const char *value);

/* The in-process registry; metrics_free(NULL) is a no-op. */
struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);
/* Records one answered request: method and route are static strings (the route table's
 * pattern, "unmatched" when none matched); status is the HTTP code. m may be NULL. */
void metrics_http_observe(struct metrics *m, const char *method, const char *route, int status, double seconds);
/* Appends the in-process metrics (HTTP histograms) to b. */
void metrics_write_http(const struct metrics *m, struct evbuffer *b);

/* A family of `n` samples that its owner pushes into: a counter (metrics_add) or a gauge
 * (metrics_set), written after the HTTP histograms in registration order. name, type
 * ("counter" | "gauge"), help and labels (per sample: "key", "value", ..., NULL; or NULL for
 * none) are borrowed and must be static. Registering a name again returns the same family (NULL
 * when n differs). Returns NULL when m is NULL; metrics_add/metrics_set on NULL, or with
 * sample >= n, do nothing. Freed with m. */
struct metrics_family *metrics_register(struct metrics *m, const char *name, const char *type, const char *help,
	size_t n, const char *const *const *labels);
void metrics_add(struct metrics_family *f, size_t sample, double v);
void metrics_set(struct metrics_family *f, size_t sample, double v);
/* Appends every registered family to b. */
void metrics_write_families(const struct metrics *m, struct evbuffer *b);

/* The lease-wait histogram's upper bounds in seconds as a Postgres float8[] literal: what
 * sql/metrics_history.sql counts against, and what retention records a pruned job's waits
 * against (sql/prune.sql). */
extern const char metrics_lease_wait_bounds_sql[];

/* The GET /metrics handler: the live counts' statement, the history's too when the kept reading
 * is app->metrics_history_ms old or more (or there is none), then the in-process ones; answers
 * 200 text/plain even when the database is down (rung_database_up 0). */
void metrics_handle(struct hreq *h);

#endif
