/* The rungd server context: the event loop, HTTP server, database pool, timing knobs and the
 * modules hanging off them. One per process, owned by main.c; every handler borrows it. */
#ifndef RUNG_APP_H
#define RUNG_APP_H

#include <stdbool.h>
#include <stdint.h>

struct event_base;
struct evhttp;
struct evhttp_bound_socket;
struct event;
struct db;
struct lease_mgr;
struct memcache;
struct reaper;
struct preempt;
struct retention;
struct scheduler;
struct quota;
struct auth;
struct metrics;
struct webhook;

struct app {
	struct event_base *base;
	struct evhttp *http;
	struct evhttp_bound_socket *listener;
	struct db *db;
	struct lease_mgr *lease;       /* parked long-polls */
	struct memcache *memcache;     /* fitted memory profiles for the first-attempt check (issue 12) */
	struct reaper *reaper;
	struct preempt *preempt;       /* NULL unless --preempt-after-s */
	struct retention *retention;   /* NULL unless --retain-days */
	struct scheduler *scheduler;   /* queues scheduled jobs at their start time (migration 025) */
	struct quota *quota;           /* reads the owners' GPU-hour quotas (migration 035) */
	struct auth *auth;             /* token cache, submit buckets, parked counts (auth.c) */
	struct metrics *metrics;       /* in-process /metrics registry (HTTP latencies) */
	struct webhook *webhook;       /* escalation webhook delivery, NULL when not configured */
	int lease_seconds;             /* --lease-seconds */
	int heartbeat_ms;              /* --heartbeat-ms, told to workers */
	int reap_interval_ms;          /* --reap-interval-ms */
	int preempt_after_s;           /* --preempt-after-s (-1: no preemption) */
	bool has_preempt_priority;     /* --preempt-priority given: urgent jobs stop jobs of their pool */
	int preempt_priority;          /* --preempt-priority: priorities up to it are urgent (submitters may not give them) */
	int resume_hold_s;             /* --resume-hold-s (0: no checkpoint hold, recovery/resume.h) */
	int poll_fallback_ms;          /* --poll-fallback-ms */
	bool fair_share;               /* --fair-share: the claim shares GPUs among owners */
	int quarantine_min_s;          /* --quarantine-min-s: minimum quarantine before a health check lifts it */
	int metrics_history_ms;        /* --metrics-history-ms: how long /metrics reuses the history's counts */
	int retain_days;               /* --retain-days (0: retention off) */
	int prune_interval_ms;         /* --prune-interval-ms */
	int inflight;                  /* requests not yet answered */
	int unflushed;                 /* replies handed to evhttp but not yet written out */
	bool stopping;                 /* SIGTERM/SIGINT seen: no new work */
	bool flush_wait;               /* stopping: waiting (bounded) for unflushed replies */
	struct event *stop_check;      /* fires to finish shutdown once inflight reaches 0 */
	/* Called by http.c after each reply and each reply written out (may be NULL): when stopping
	 * and nothing is in flight or unwritten, main.c finishes shutdown on the next loop pass. */
	void (*request_done)(struct app *app);
};

#endif
