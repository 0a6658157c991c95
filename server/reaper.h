/* The reaper: every --reap-interval-ms one guarded statement (rung_reap) turns running attempts
 * whose lease expired into lost ones and re-queues or fails their jobs. Safe on several
 * replicas at once (SKIP LOCKED). */
#ifndef RUNG_REAPER_H
#define RUNG_REAPER_H

struct app;
struct reaper;

/* Arms the timer on app->base; at most one reap statement is in flight. */
struct reaper *reaper_new(struct app *app);
/* Stops the timer; a statement in flight is left to finish (its callback then only logs).
 * Accepts NULL. */
void reaper_free(struct reaper *r);
/* Stops the timer without freeing (shutdown). */
void reaper_stop(struct reaper *r);

#endif
