/* Webhook delivery for rungd: a loop on the libevent base that claims due rows of webhook_outbox
 * (filled by triggers in the transaction that opens an escalation, migration 003, or that ends a
 * job, migration 018), POSTs each payload to its kind's URL with libcurl's multi interface driven
 * by libevent, marks 2xx answers delivered and reschedules the rest with exponential backoff.
 * Delivery is at-least-once. */
#ifndef RUNG_WEBHOOK_H
#define RUNG_WEBHOOK_H

#include <stdint.h>

struct db;
struct event_base;
struct webhook;

struct webhook_opts {
	const char *url;     /* where escalations are POSTed (copied), or NULL */
	const char *job_url; /* where jobs that ended are POSTed (copied), or NULL */
	int poll_ms;        /* how often due rows are looked for */
	int backoff_ms;     /* delay after the first failed try */
	int backoff_max_ms; /* delay ceiling */
	int timeout_ms;     /* one POST's time limit */
};

/* Starts the loop on base with the pool db (both borrowed, must outlive it; free the webhook
 * before the pool); it claims only the kinds it has a URL for. Returns NULL when neither URL is
 * given or libcurl cannot be set up (logged). */
struct webhook *webhook_new(struct event_base *base, struct db *db, const struct webhook_opts *o);
/* Stops the loop and drops POSTs in flight (their rows are claimed until the claim deadline and
 * then sent again). Accepts NULL. Must not be called from inside a db callback. */
void webhook_free(struct webhook *w);

/* Delay before try n+1 after the n-th failed try (n >= 1): base * 2^(n-1), at most max_ms. */
int64_t webhook_backoff_ms(int n, int base_ms, int max_ms);

/* POSTs in flight now, and deliveries completed (2xx) since start: for tests and logs. */
int webhook_inflight(const struct webhook *w);
long webhook_delivered(const struct webhook *w);

#endif
