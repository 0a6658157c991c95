/* The scheduler of rungd (migration 025): every second one statement (rung_start_due,
 * sql/functions/23_scheduled.sql, through sql/start_due.sql) queues the scheduled jobs whose start
 * time has come, the earliest first, in batches; after it commits the waiters here and on the other
 * replicas are woken (lease_announce). Safe on several replicas at once (SKIP LOCKED): each job is
 * queued once, by whichever replica reaches it first. A job is queued at most about a second after
 * its run_after (plus the statement's time), whatever the load: a full batch is followed by the next
 * at once. The same statement (rung_start_deadline_due, migration 039) cancels the jobs whose start
 * deadline passed before they started, in the same way: a job whose start time and deadline have both
 * passed is cancelled, never queued late (rung_start_due passes over it). */
#ifndef RUNG_SCHEDULER_H
#define RUNG_SCHEDULER_H

struct app;
struct scheduler;

#define SCHEDULER_TICK_MS 1000 /* how often it looks for due jobs */
#define SCHEDULER_BATCH 500    /* jobs one statement queues at most */

/* Arms the timer on app->base (app borrowed, must outlive it); the first run is on the loop's first
 * pass (jobs that fell due while no rungd ran are queued at once). At most one statement is in
 * flight. Free with scheduler_free. */
struct scheduler *scheduler_new(struct app *app);
/* Stops the timer (shutdown); a statement in flight finishes. Accepts NULL. */
void scheduler_stop(struct scheduler *s);
/* Frees; a statement in flight is left to finish (its callback then only frees). Accepts NULL. */
void scheduler_free(struct scheduler *s);

#endif
