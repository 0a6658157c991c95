/* Prometheus exposition for rungd (metrics.h): histogram bookkeeping, the text-format writers
 * (HELP/TYPE, escaped labels, cumulative buckets), the in-process registry (HTTP latencies fed by
 * the router's observe hook, and the families other modules register and push into), and the GET
 * /metrics handler that adds rungd's build (rung_build_info) and the database counts: what is true
 * now (sql/metrics_live.sql, every scrape, the live workers per version and the worker pools among them) and the
 * history's counts (sql/metrics_history.sql, kept for --metrics-history-ms). Owns the registry and
 * that kept reading; reads no other module's state but the pool's statistics. */
#include "metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "app.h"
#include "db.h"
#include "http.h"
#include "log.h"
#include "sql.h"
#include "util.h"
#include "version.h"

static const double http_bounds[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
/* queued -> leased, seconds; must match the text below (the statement's $1) */
static const double wait_bounds[] = { 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400 };
const char metrics_lease_wait_bounds_sql[] = "{0.1,0.5,1,5,10,30,60,300,900,3600,14400}";

static const char *const job_states[] = { "queued", "scheduled", "running", "succeeded", "failed", "cancelled" };
static const char *const gpu_states[] = { "ok", "suspect", "quarantined" };
static const char *const worker_states[] = { "online", "draining", "offline" };
static const char *const esc_states[] = { "open", "acknowledged", "resolved" };
static const char *const status_classes[] = { "1xx", "2xx", "3xx", "4xx", "5xx", "other" };

struct http_series {
	const char *method; /* static */
	const char *route;  /* static: the route table's pattern or "unmatched" */
	int klass;          /* index into status_classes */
	struct metrics_hist hist;
};

struct metrics_family {
	const char *name, *type, *help;   /* static */
	size_t n;                         /* samples */
	const char *const *const *labels; /* per sample (static): "key", "value", ..., NULL */
	double *values;
};

struct metrics {
	struct http_series *http;
	size_t nhttp, caphttp;
	struct metrics_family **fam;      /* in registration order */
	size_t nfam;
	json_t *history;                  /* the last reading of sql/metrics_history.sql, or NULL */
	int64_t history_ms;               /* when it was read (util_mono_ms) */
};

/* One GET /metrics: the live statement and, when the kept history is too old, the history's;
 * answered when both are back. */
struct scrape {
	struct hreq *h;
	json_t *live;                     /* NULL until read, or when it failed */
	int pending;                      /* statements not yet answered */
};

void metrics_hist_init(struct metrics_hist *hi, const double *bounds, int nbounds)
{
	hi->bounds = bounds;
	hi->nbounds = nbounds;
	hi->counts = xcalloc((size_t)nbounds + 1, sizeof *hi->counts);
	hi->sum = 0;
	hi->count = 0;
}

void metrics_hist_release(struct metrics_hist *hi)
{
	free(hi->counts);
	hi->counts = NULL;
}

void metrics_hist_observe(struct metrics_hist *hi, double v)
{
	int i = 0;

	while (i < hi->nbounds && v > hi->bounds[i])
		i++;
	hi->counts[i]++;
	hi->sum += v;
	hi->count++;
}

void metrics_escape_label(struct evbuffer *b, const char *value)
{
	for (const char *p = value ? value : ""; *p; p++) {
		switch (*p) {
		case '\\': evbuffer_add(b, "\\\\", 2); break;
		case '"': evbuffer_add(b, "\\\"", 2); break;
		case '\n': evbuffer_add(b, "\\n", 2); break;
		default: evbuffer_add(b, p, 1); break;
		}
	}
}

/* Numbers: integers without a fraction, others with up to 15 significant digits. */
static void write_number(struct evbuffer *b, double v)
{
	if (isnan(v))
		evbuffer_add_printf(b, "NaN");
	else if (isinf(v))
		evbuffer_add_printf(b, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 1e15)
		evbuffer_add_printf(b, "%.0f", v);
	else
		evbuffer_add_printf(b, "%.15g", v);
}

/* {k="v",...,extra_k="extra_v"}; nothing when there are no labels at all. */
static void write_labels(struct evbuffer *b, const char *const *labels, const char *extra_k, const char *extra_v)
{
	bool any = false;

	for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
		evbuffer_add_printf(b, "%s%s=\"", any ? "," : "{", labels[i]);
		metrics_escape_label(b, labels[i + 1]);
		evbuffer_add(b, "\"", 1);
		any = true;
	}
	if (extra_k) {
		evbuffer_add_printf(b, "%s%s=\"", any ? "," : "{", extra_k);
		metrics_escape_label(b, extra_v);
		evbuffer_add(b, "\"", 1);
		any = true;
	}
	if (any)
		evbuffer_add(b, "}", 1);
}

void metrics_write_head(struct evbuffer *b, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(b, "# HELP %s ", name);
	for (const char *p = help; *p; p++) {
		if (*p == '\\')
			evbuffer_add(b, "\\\\", 2);
		else if (*p == '\n')
			evbuffer_add(b, "\\n", 2);
		else
			evbuffer_add(b, p, 1);
	}
	evbuffer_add_printf(b, "\n# TYPE %s %s\n", name, type);
}

void metrics_write_sample(struct evbuffer *b, const char *name, const char *const *labels, double v)
{
	evbuffer_add_printf(b, "%s", name);
	write_labels(b, labels, NULL, NULL);
	evbuffer_add(b, " ", 1);
	write_number(b, v);
	evbuffer_add(b, "\n", 1);
}

void metrics_write_hist_cumulative(struct evbuffer *b, const char *name, const char *const *labels,
				   const double *bounds, const uint64_t *cumulative, int nbounds, double sum,
				   uint64_t count)
{
	char le[64];

	for (int i = 0; i < nbounds; i++) {
		snprintf(le, sizeof le, "%g", bounds[i]);
		evbuffer_add_printf(b, "%s_bucket", name);
		write_labels(b, labels, "le", le);
		evbuffer_add_printf(b, " %llu\n", (unsigned long long)cumulative[i]);
	}
	evbuffer_add_printf(b, "%s_bucket", name);
	write_labels(b, labels, "le", "+Inf");
	evbuffer_add_printf(b, " %llu\n%s_sum", (unsigned long long)count, name);
	write_labels(b, labels, NULL, NULL);
	evbuffer_add(b, " ", 1);
	write_number(b, sum);
	evbuffer_add_printf(b, "\n%s_count", name);
	write_labels(b, labels, NULL, NULL);
	evbuffer_add_printf(b, " %llu\n", (unsigned long long)count);
}

void metrics_write_hist(struct evbuffer *b, const char *name, const char *const *labels,
			const struct metrics_hist *hi)
{
	uint64_t *cum = xcalloc((size_t)hi->nbounds + 1, sizeof *cum);
	uint64_t run = 0;

	for (int i = 0; i < hi->nbounds; i++) {
		run += hi->counts[i];
		cum[i] = run;
	}
	metrics_write_hist_cumulative(b, name, labels, hi->bounds, cum, hi->nbounds, hi->sum, hi->count);
	free(cum);
}

struct metrics *metrics_new(void)
{
	return xcalloc(1, sizeof(struct metrics));
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nhttp; i++)
		metrics_hist_release(&m->http[i].hist);
	free(m->http);
	for (size_t i = 0; i < m->nfam; i++) {
		free(m->fam[i]->values);
		free(m->fam[i]);
	}
	free(m->fam);
	json_decref(m->history);
	free(m);
}

void metrics_http_observe(struct metrics *m, const char *method, const char *route, int status, double seconds)
{
	int klass = status >= 100 && status < 600 ? status / 100 - 1 : 5;
	struct http_series *s = NULL;

	if (!m)
		return;
	for (size_t i = 0; i < m->nhttp && !s; i++)
		if (m->http[i].klass == klass && strcmp(m->http[i].method, method) == 0 &&
		    strcmp(m->http[i].route, route) == 0)
			s = &m->http[i];
	if (!s) {
		if (m->nhttp == m->caphttp) {
			m->caphttp = m->caphttp ? m->caphttp * 2 : 16;
			m->http = xrealloc(m->http, m->caphttp * sizeof *m->http);
		}
		s = &m->http[m->nhttp++];
		s->method = method;
		s->route = route;
		s->klass = klass;
		metrics_hist_init(&s->hist, http_bounds, (int)ARRAY_LEN(http_bounds));
	}
	metrics_hist_observe(&s->hist, seconds);
}

void metrics_write_http(const struct metrics *m, struct evbuffer *b)
{
	metrics_write_head(b, "rung_http_request_duration_seconds", "histogram",
			   "HTTP request latency by route pattern, method and status class.");
	for (size_t i = 0; m && i < m->nhttp; i++) {
		const struct http_series *s = &m->http[i];
		const char *labels[] = { "route", s->route, "method", s->method, "status",
					 status_classes[s->klass], NULL };
		metrics_write_hist(b, "rung_http_request_duration_seconds", labels, &s->hist);
	}
}

static double jnum(const json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

/* One gauge per known state (0 when absent from the counts) plus any unknown state seen. */
static void write_by_state(struct evbuffer *b, const char *name, const char *type, const char *help,
			   const json_t *counts, const char *const *states, size_t nstates)
{
	const char *key;
	json_t *v;

	metrics_write_head(b, name, type, help);
	for (size_t i = 0; i < nstates; i++) {
		const char *labels[] = { "state", states[i], NULL };
		metrics_write_sample(b, name, labels, jnum(counts, states[i]));
	}
	json_object_foreach((json_t *)counts, key, v) {
		bool known = false;
		for (size_t i = 0; i < nstates; i++)
			known = known || strcmp(states[i], key) == 0;
		if (!known) {
			const char *labels[] = { "state", key, NULL };
			metrics_write_sample(b, name, labels, json_number_value(v));
		}
	}
}

/* rung_jobs: the ended states from the history's reading (none when there is none yet), queued,
 * scheduled and running from the live one. */
static void write_jobs(struct evbuffer *b, const json_t *live, const json_t *history)
{
	json_t *counts = json_deep_copy(json_object_get(history, "jobs"));

	if (!json_is_object(counts)) {
		json_decref(counts);
		counts = json_object();
	}
	json_object_set_new(counts, "queued", json_integer((json_int_t)jnum(live, "queue_depth")));
	json_object_set_new(counts, "scheduled", json_integer((json_int_t)jnum(live, "scheduled")));
	json_object_set_new(counts, "running", json_integer((json_int_t)jnum(live, "running")));
	write_by_state(b, "rung_jobs", "gauge", "Jobs by state.", counts, job_states, ARRAY_LEN(job_states));
	json_decref(counts);
}

/* Per owner (rung_owners_summary's array): a series {owner} of name with the number under key of the
 * owner's object sub (NULL: the owner's entry itself), for the owners that have one. */
static void write_owner_values(struct evbuffer *b, const json_t *owners, const char *name, const char *sub,
			       const char *key, const char *help)
{
	const json_t *o;
	size_t i;

	metrics_write_head(b, name, "gauge", help);
	json_array_foreach(owners, i, o) {
		const char *labels[] = { "owner", json_string_value(json_object_get(o, "owner")) ?: "", NULL };
		const json_t *from = sub ? json_object_get(o, sub) : o;
		if (json_is_number(json_object_get(from, key)))
			metrics_write_sample(b, name, labels, jnum(from, key));
	}
}

/* Per owner and pool of the array list of its summary ("pool_limits", migration 034; "pool_quotas", 037):
 * a series {owner, pool} of name, from each element's key, where it is a number (a quota not read yet
 * has no hours used). */
static void write_owner_pools(struct evbuffer *b, const json_t *owners, const char *list, const char *name,
			      const char *key, const char *help)
{
	const json_t *o, *l;
	size_t i, k;

	metrics_write_head(b, name, "gauge", help);
	json_array_foreach(owners, i, o) {
		json_array_foreach(json_object_get(o, list), k, l) {
			const char *labels[] = { "owner", json_string_value(json_object_get(o, "owner")) ?: "", "pool",
						 json_string_value(json_object_get(l, "pool")) ?: "", NULL };
			if (json_is_number(json_object_get(l, key)))
				metrics_write_sample(b, name, labels, jnum(l, key));
		}
	}
}

/* Per owner (metrics_live.sql's "owners", rung_owners_summary's array): its queued and running jobs,
 * and its token's limit where one is set. A shared cluster's teams are its tokens, so the series are
 * as many as the teams with work or a limit, not as the jobs. */
static void write_owners(struct evbuffer *b, const json_t *owners)
{
	const json_t *o;
	size_t i;

	metrics_write_head(b, "rung_owner_jobs", "gauge",
			   "Queued, running and scheduled jobs per owner (the token that submitted them).");
	json_array_foreach(owners, i, o) {
		const char *owner = json_string_value(json_object_get(o, "owner"));
		const char *queued[] = { "owner", owner ? owner : "", "state", "queued", NULL };
		const char *running[] = { "owner", owner ? owner : "", "state", "running", NULL };
		const char *scheduled[] = { "owner", owner ? owner : "", "state", "scheduled", NULL };
		metrics_write_sample(b, "rung_owner_jobs", queued, jnum(o, "queued"));
		metrics_write_sample(b, "rung_owner_jobs", running, jnum(o, "running"));
		metrics_write_sample(b, "rung_owner_jobs", scheduled, jnum(o, "scheduled"));
	}
	write_owner_values(b, owners, "rung_owner_max_running", NULL, "max_running",
			   "Per owner with a limit (tokens' max_running): how many of its jobs may run at once.");
	write_owner_values(b, owners, "rung_owner_gpu_hours_quota", "quota", "gpu_hours",
			   "Per owner with a GPU-hour quota: the GPU hours its jobs may take in its window (tokens' gpu_hours).");
	write_owner_values(b, owners, "rung_owner_gpu_hours_used", "quota", "used_hours",
			   "Per owner with a GPU-hour quota: the GPU hours its jobs took in its window, as last read.");
	write_owner_pools(b, owners, "pool_limits", "rung_owner_pool_max_running", "max_running",
			  "Per owner and pool it is limited in (tokens' pool limits): how many of its jobs of that pool may "
			  "run at once.");
	write_owner_pools(b, owners, "pool_limits", "rung_owner_pool_running", "running",
			  "Per owner and pool it is limited in: how many of its jobs of that pool run now, wherever they run.");
	write_owner_pools(b, owners, "pool_quotas", "rung_owner_pool_gpu_hours_quota", "gpu_hours",
			  "Per owner and pool it has a GPU-hour quota in (tokens' pool_gpu_hours): the GPU hours its jobs of "
			  "that pool may take in its window.");
	write_owner_pools(b, owners, "pool_quotas", "rung_owner_pool_gpu_hours_used", "used_hours",
			  "Per owner and pool it has a GPU-hour quota in: the GPU hours its jobs of that pool took in its "
			  "window, as last read.");
}

/* Per version (a label value escaped as any other), the live workers that registered with it. */
static void write_workers_by_version(struct evbuffer *b, const json_t *counts)
{
	const char *key;
	json_t *v;

	metrics_write_head(b, "rung_workers_by_version", "gauge",
			   "Live workers (online or draining) by the version they registered with (unknown: none sent).");
	json_object_foreach((json_t *)counts, key, v) {
		const char *labels[] = { "version", key, NULL };
		metrics_write_sample(b, "rung_workers_by_version", labels, json_number_value(v));
	}
}

void metrics_write_token_expiry(struct evbuffer *b, const json_t *tokens)
{
	const json_t *t;
	size_t i;

	metrics_write_head(b, "rung_token_expiry_seconds", "gauge",
			   "Seconds until a token with an expiry stops working (negative for a day after it has): live "
			   "tokens that expire, by id, name (its owner or host) and role.");
	json_array_foreach(tokens, i, t) {
		char id[32];
		const char *labels[] = { "id", id, "name", json_string_value(json_object_get(t, "name")) ?: "", "role",
					 json_string_value(json_object_get(t, "role")) ?: "", NULL };
		snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(t, "id")));
		metrics_write_sample(b, "rung_token_expiry_seconds", labels, jnum(t, "s"));
	}
}

void metrics_write_pools(struct evbuffer *b, const json_t *pools)
{
	const char *pool;
	json_t *v;

	metrics_write_head(b, "rung_pool_queued_jobs", "gauge",
			   "Queued jobs per worker pool (a job runs only on a worker of its pool).");
	json_object_foreach((json_t *)pools, pool, v) {
		const char *labels[] = { "pool", pool, NULL };
		metrics_write_sample(b, "rung_pool_queued_jobs", labels, jnum(v, "queued"));
	}
	metrics_write_head(b, "rung_pool_gpus", "gauge",
			   "GPUs not quarantined on live workers per worker pool (0 with jobs queued: none of them runs).");
	json_object_foreach((json_t *)pools, pool, v) {
		const char *labels[] = { "pool", pool, NULL };
		metrics_write_sample(b, "rung_pool_gpus", labels, jnum(v, "gpus"));
	}
	metrics_write_head(b, "rung_pool_borrowing_gpus", "gauge",
			   "GPUs not quarantined on live workers of other pools that borrow from this worker pool (they take "
			   "its jobs when their own pool has none for them).");
	json_object_foreach((json_t *)pools, pool, v) {
		const char *labels[] = { "pool", pool, NULL };
		metrics_write_sample(b, "rung_pool_borrowing_gpus", labels, jnum(v, "borrowing_gpus"));
	}
}

static void write_live_counts(struct evbuffer *b, const json_t *doc)
{
	metrics_write_head(b, "rung_attempts_running", "gauge", "Attempts running now.");
	metrics_write_sample(b, "rung_attempts_running", NULL, jnum(doc, "running"));
	metrics_write_head(b, "rung_queue_depth", "gauge", "Jobs waiting for a GPU.");
	metrics_write_sample(b, "rung_queue_depth", NULL, jnum(doc, "queue_depth"));
	metrics_write_head(b, "rung_queue_unplaceable", "gauge",
			   "Queued jobs that no usable GPU of their worker pool, or of a worker that borrows from it, may take "
			   "(their minimum GPU memory, their exclusions, a pool without GPUs).");
	metrics_write_sample(b, "rung_queue_unplaceable", NULL, jnum(doc, "unplaceable"));
	metrics_write_head(b, "rung_queue_owner_capped", "gauge",
			   "Queued jobs whose owner runs as many jobs as its token's max_running allows.");
	metrics_write_sample(b, "rung_queue_owner_capped", NULL, jnum(doc, "owner_capped"));
	write_owners(b, json_object_get(doc, "owners"));
	metrics_write_pools(b, json_object_get(doc, "pools"));
	metrics_write_head(b, "rung_queue_oldest_age_seconds", "gauge",
			   "How long the longest-waiting queued job has waited (0 when none).");
	metrics_write_sample(b, "rung_queue_oldest_age_seconds", NULL, jnum(doc, "oldest_queued_s"));
	metrics_write_head(b, "rung_scheduled_overdue_seconds", "gauge",
			   "How long past its start time the most overdue scheduled job still waits (0 when none: the "
			   "scheduler queues each within about a second).");
	metrics_write_sample(b, "rung_scheduled_overdue_seconds", NULL, jnum(doc, "scheduled_overdue_s"));
	metrics_write_head(b, "rung_heartbeat_lag_seconds_max", "gauge",
			   "Longest time since a running attempt's last heartbeat (or start).");
	metrics_write_sample(b, "rung_heartbeat_lag_seconds_max", NULL, jnum(doc, "heartbeat_lag_max_s"));
	write_by_state(b, "rung_gpus", "gauge", "GPUs by state.", json_object_get(doc, "gpus"), gpu_states,
		       ARRAY_LEN(gpu_states));
	write_by_state(b, "rung_workers", "gauge", "Workers by state (draining: no new leases, set by support).",
		       json_object_get(doc, "workers"), worker_states, ARRAY_LEN(worker_states));
	write_workers_by_version(b, json_object_get(doc, "workers_by_version"));
	metrics_write_token_expiry(b, json_object_get(doc, "token_expiry"));
	write_by_state(b, "rung_escalations", "gauge", "Escalations by state (open ones need a person).",
		       json_object_get(doc, "escalations"), esc_states, ARRAY_LEN(esc_states));
	metrics_write_head(b, "rung_webhook_pending", "gauge", "Webhooks not yet delivered: escalations, jobs that ended and quotas crossed.");
	metrics_write_sample(b, "rung_webhook_pending", NULL, jnum(doc, "webhook_pending"));
}

static void write_history_counts(struct evbuffer *b, const json_t *doc, double age_s)
{
	const json_t *lw = json_object_get(doc, "lease_wait");
	const json_t *buckets = json_object_get(lw, "buckets");
	uint64_t cum[ARRAY_LEN(wait_bounds)] = { 0 };
	const char *key;
	json_t *v;
	size_t i;

	metrics_write_head(b, "rung_metrics_history_age_seconds", "gauge",
			   "Age of the history's counts below (jobs ended, attempts, rungs, lease waits).");
	metrics_write_sample(b, "rung_metrics_history_age_seconds", NULL, age_s);
	metrics_write_head(b, "rung_attempts_total", "counter", "Ended attempts by outcome and failure class.");
	json_array_foreach(json_object_get(doc, "attempts"), i, v) {
		const char *labels[] = { "outcome", json_string_value(json_object_get(v, "outcome")), "class",
					 json_string_value(json_object_get(v, "class")), NULL };
		metrics_write_sample(b, "rung_attempts_total", labels, jnum(v, "n"));
	}
	metrics_write_head(b, "rung_attempt_gpu_seconds_total", "counter",
			   "GPU seconds of ended attempts (lease to end) by outcome and failure class.");
	json_array_foreach(json_object_get(doc, "attempts"), i, v) {
		const char *labels[] = { "outcome", json_string_value(json_object_get(v, "outcome")), "class",
					 json_string_value(json_object_get(v, "class")), NULL };
		metrics_write_sample(b, "rung_attempt_gpu_seconds_total", labels, jnum(v, "gpu_s"));
	}
	metrics_write_head(b, "rung_owner_gpu_seconds_total", "counter",
			   "GPU seconds of ended attempts per owner (a team's token) and ending: succeeded, oom, failed, "
			   "cancelled, lost, preempted.");
	json_array_foreach(json_object_get(doc, "owner_gpu_s"), i, v) {
		const char *labels[] = { "owner", json_string_value(json_object_get(v, "owner")), "outcome",
					 json_string_value(json_object_get(v, "outcome")), NULL };
		metrics_write_sample(b, "rung_owner_gpu_seconds_total", labels, jnum(v, "s"));
	}
	metrics_write_head(b, "rung_resumed_attempts_total", "counter",
			   "Ended attempts that resumed from a checkpoint (the trainer said so) instead of starting over.");
	metrics_write_sample(b, "rung_resumed_attempts_total", NULL, jnum(json_object_get(doc, "resumed"), "attempts"));
	metrics_write_head(b, "rung_resumed_steps_total", "counter",
			   "Training steps those attempts did not run again: the steps they resumed from.");
	metrics_write_sample(b, "rung_resumed_steps_total", NULL, jnum(json_object_get(doc, "resumed"), "steps"));
	metrics_write_head(b, "rung_resumed_gpu_seconds_total", "counter",
			   "GPU seconds those steps would have taken, estimated at each resumed attempt's own pace (the steps its "
			   "worker timed).");
	metrics_write_sample(b, "rung_resumed_gpu_seconds_total", NULL, jnum(json_object_get(doc, "resumed"), "gpu_s"));
	metrics_write_head(b, "rung_rungs_applied_total", "counter", "Ladder rungs applied, by rung name.");
	json_object_foreach(json_object_get(doc, "rungs"), key, v) {
		const char *labels[] = { "rung", key, NULL };
		metrics_write_sample(b, "rung_rungs_applied_total", labels, json_number_value(v));
	}
	for (i = 0; i < ARRAY_LEN(wait_bounds); i++)
		cum[i] = (uint64_t)json_number_value(json_array_get(buckets, i)); /* with metrics_pruned: float8 sums */
	metrics_write_head(b, "rung_lease_wait_seconds", "histogram",
			   "Time from a job being queued to an attempt leasing it.");
	metrics_write_hist_cumulative(b, "rung_lease_wait_seconds", NULL, wait_bounds, cum,
				      (int)ARRAY_LEN(wait_bounds), jnum(lw, "sum"),
				      (uint64_t)json_number_value(json_object_get(lw, "count")));
}

struct metrics_family *metrics_register(struct metrics *m, const char *name, const char *type, const char *help,
	size_t n, const char *const *const *labels)
{
	struct metrics_family *f;

	if (!m)
		return NULL;
	for (size_t i = 0; i < m->nfam; i++)
		if (!strcmp(m->fam[i]->name, name))
			return m->fam[i]->n == n ? m->fam[i] : NULL;
	f = xcalloc(1, sizeof *f);
	f->name = name;
	f->type = type;
	f->help = help;
	f->n = n;
	f->labels = labels;
	f->values = xcalloc(n ? n : 1, sizeof *f->values);
	m->fam = xrealloc(m->fam, (m->nfam + 1) * sizeof *m->fam);
	m->fam[m->nfam++] = f;
	return f;
}

void metrics_add(struct metrics_family *f, size_t sample, double v)
{
	if (f && sample < f->n)
		f->values[sample] += v;
}

void metrics_set(struct metrics_family *f, size_t sample, double v)
{
	if (f && sample < f->n)
		f->values[sample] = v;
}

void metrics_write_families(const struct metrics *m, struct evbuffer *b)
{
	for (size_t i = 0; m && i < m->nfam; i++) {
		const struct metrics_family *f = m->fam[i];

		metrics_write_head(b, f->name, f->type, f->help);
		for (size_t k = 0; k < f->n; k++)
			metrics_write_sample(b, f->name, f->labels ? f->labels[k] : NULL, f->values[k]);
	}
}

/* The JSON document of a one-row, one-column counts statement, or NULL (logged with WHAT). */
static json_t *counts_doc(PGresult *res, const char *err, const char *what)
{
	json_t *doc = NULL;

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 && !PQgetisnull(res, 0, 0))
		doc = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
	if (!doc)
		log_warn("metrics without database counts", "counts=%s error=\"%s\"", what,
			 err ? err : res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?" : "?");
	return doc;
}

/* Both statements are back: the reply. rung_database_up is 1 when the live counts were read and
 * a reading of the history exists (this scrape's or a kept one). */
static void scrape_answer(struct scrape *sc)
{
	struct hreq *h = sc->h;
	struct app *app = h->app;
	struct metrics *m = app->metrics;
	struct evbuffer *b = evbuffer_new();
	bool up = sc->live && m->history;
	int busy = 0, idle = 0, queued = 0;

	metrics_write_head(b, "rung_build_info", "gauge", "This rungd's build: always 1, its version in the label.");
	metrics_write_sample(b, "rung_build_info", (const char *const[]){ "version", rung_version(), NULL }, 1);
	metrics_write_head(b, "rung_database_up", "gauge", "Whether the database counts could be read.");
	metrics_write_sample(b, "rung_database_up", NULL, up ? 1 : 0);
	if (sc->live) {
		write_jobs(b, sc->live, m->history);
		write_live_counts(b, sc->live);
	}
	if (m->history)
		write_history_counts(b, m->history, (double)(util_mono_ms() - m->history_ms) / 1000.0);
	metrics_write_http(m, b);
	db_stats(app->db, &busy, &idle, &queued);
	metrics_write_head(b, "rung_db_connections", "gauge", "Database pool connections by state.");
	metrics_write_sample(b, "rung_db_connections", (const char *const[]){ "state", "busy", NULL }, busy);
	metrics_write_sample(b, "rung_db_connections", (const char *const[]){ "state", "idle", NULL }, idle);
	metrics_write_head(b, "rung_db_queued_statements", "gauge", "Statements waiting for a connection.");
	metrics_write_sample(b, "rung_db_queued_statements", NULL, queued);
	metrics_write_families(m, b); /* lease waiters, auth's ownership checks */
	hreq_reply_typed(h, 200, "text/plain; version=0.0.4; charset=utf-8",
			 (const char *)evbuffer_pullup(b, -1), evbuffer_get_length(b));
	evbuffer_free(b);
	json_decref(sc->live);
	free(sc);
}

static void on_live(PGresult *res, const char *err, void *arg)
{
	struct scrape *sc = arg;

	sc->live = counts_doc(res, err, "live");
	if (--sc->pending == 0)
		scrape_answer(sc);
}

/* A failed reading keeps the one before it (the counts are then older, as the age gauge says). */
static void on_history(PGresult *res, const char *err, void *arg)
{
	struct scrape *sc = arg;
	struct metrics *m = sc->h->app->metrics;
	json_t *doc = counts_doc(res, err, "history");

	if (doc) {
		json_decref(m->history);
		m->history = doc;
		m->history_ms = util_mono_ms();
	}
	if (--sc->pending == 0)
		scrape_answer(sc);
}

void metrics_handle(struct hreq *h)
{
	const char *params[1] = { metrics_lease_wait_bounds_sql };
	struct app *app = h->app;
	struct metrics *m = app->metrics;
	struct scrape *sc = xcalloc(1, sizeof *sc);
	bool stale = !m->history || util_mono_ms() - m->history_ms >= app->metrics_history_ms;

	sc->h = h;
	sc->pending = stale ? 2 : 1;
	db_exec(app->db, sql_metrics_live, 0, NULL, on_live, sc);
	if (stale)
		db_exec(app->db, sql_metrics_history, 1, params, on_history, sc);
}
