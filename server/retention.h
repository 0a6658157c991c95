/* Retention of rungd (--retain-days): at start and every --prune-interval-ms one statement (rung_prune,
 * sql/functions/75_prune.sql) deletes up to a batch of jobs that ended more than that many days
 * ago, with their attempts, events, escalations and webhook deliveries; a full batch is followed
 * by the next at once, so a backlog drains without waiting. Safe on several replicas at once. */
#ifndef RUNG_RETENTION_H
#define RUNG_RETENTION_H

struct app;
struct retention;

/* Arms the timer on app->base when app->retain_days > 0; returns NULL (nothing to do) otherwise.
 * At most one prune statement is in flight. Registers rung_retention_pruned_jobs_total. */
struct retention *retention_new(struct app *app);
/* Stops the timer (shutdown); a statement in flight finishes. Accepts NULL. */
void retention_stop(struct retention *r);
/* Frees; a statement in flight is left to finish (its callback then only frees). Accepts NULL. */
void retention_free(struct retention *r);

#endif
