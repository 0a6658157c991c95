/* Preemption (rungd --preempt-after-s, migration 029): a timer that asks rung_preempt_pass() which
 * attempts to stop: of jobs borrowed from other pools, for their worker's own pool's queued jobs,
 * and with --preempt-priority of jobs of a worse priority, for an urgent job of their pool. Safe on
 * several replicas (one pass at a time, an advisory lock). */
#ifndef RUNG_PREEMPT_H
#define RUNG_PREEMPT_H

struct app;
struct preempt;

/* Arms the timer on app->base (every app->reap_interval_ms) when app->preempt_after_s >= 0; NULL
 * (nothing armed) otherwise. At most one statement is in flight. */
struct preempt *preempt_new(struct app *app);
/* Stops the timer without freeing (shutdown). Accepts NULL. */
void preempt_stop(struct preempt *p);
/* Stops the timer; a statement in flight is left to finish (its callback then frees). Accepts NULL. */
void preempt_free(struct preempt *p);

#endif
