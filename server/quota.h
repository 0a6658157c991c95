/* GPU-hour quotas of rungd (migration 035): every --quota-interval-ms one statement
 * (rung_quota_pass, sql/functions/45_quota.sql, through sql/quota_pass.sql) reads what each owner
 * with a quota used in its window into quota_use, which the claim reads (an owner over its quota
 * starts no job). Safe on several replicas at once: a pass that finds another under way skips. It
 * logs the owners that went over or came back under, and wakes the parked GPUs of every replica for
 * the latter once the statement committed. */
#ifndef RUNG_QUOTA_H
#define RUNG_QUOTA_H

struct app;
struct quota;

/* Arms the timer on app->base every interval_ms (app borrowed, must outlive it); the first pass is
 * on the loop's first pass. At most one statement is in flight. Free with quota_free. */
struct quota *quota_new(struct app *app, int interval_ms);
/* Stops the timer (shutdown); a statement in flight finishes. Accepts NULL. */
void quota_stop(struct quota *q);
/* Frees; a statement in flight is left to finish (its callback then only frees). Accepts NULL. */
void quota_free(struct quota *q);

#endif
