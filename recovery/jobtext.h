/* Plain sentences about a job that rungctl's verdict and the web job page both print, written
 * once: the first claim handed back for a bigger GPU (recovery_state.started_bigger), a queued
 * job's place in the queue and why no usable GPU takes it (the JOB's "placement", GET
 * /v1/jobs/{id}), when a scheduled job starts, the job's last retry (recovery_state.retried) and
 * where its trained file is; and what resuming from checkpoints spared, which `rungctl usage` and
 * the usage page both add to their total. Pure: no I/O; the web page escapes them. */
#ifndef RUNG_JOBTEXT_H
#define RUNG_JOBTEXT_H

#include <jansson.h>

/* "started on a bigger GPU (memory model): its claim on a G MiB GPU was handed back before it
 * ran, for a GPU with at least M MiB" when job (a JOB, borrowed) has recovery_state.started_bigger;
 * else NULL. Heap string, the caller frees. */
char *jobtext_started_bigger(const json_t *job);

/* "no GPU in pool h200 can run it (3 in other pools)" when job (a JOB, borrowed) is queued and its
 * placement counts no GPU in its pool ("gpus" and "draining_gpus" 0) but "other_pools_gpus" > 0:
 * GPUs outside its pool that would otherwise meet its constraints (worker pools: a job runs only in
 * its own); "no GPU in pool h200 can run it; 2 GPUs of workers that borrow from h200 may take it when
 * their own pool has no job for them" when its "borrowing_gpus" > 0 (migration 028: workers of other
 * pools that borrow from its pool, whatever the other pools have); else NULL. Heap string, the caller
 * frees. */
char *jobtext_pool_wait(const json_t *job);

/* The sentence about a queued job (its "placement", GET /v1/jobs/{id}): when the placement counts
 * no GPU in its pool while other pools, or workers that borrow from it, have some, "waiting for a GPU: "
 * and jobtext_pool_wait; when
 * it counts no GPU at all, why it waits: "waiting for a GPU: none of the usable GPUs on live workers meets its
 * constraints (at least M MiB; the largest has L MiB)" ("... the N that meet its constraints are on
 * drained workers ..." when some are on drained ones, naming the borrowers' GPUs when there are some), followed by "; N jobs ahead of it in the
 * queue" when the placement has "ahead" ("1 job", "no job"); when it counts some GPUs, "waiting its
 * turn: N jobs ahead of it in the queue", or NULL without "ahead"; whatever the GPUs, when its
 * owner runs as many jobs as its limit allows (placement "owner_max_running", "owner_running"):
 * "waiting for its owner's limit: OWNER runs N jobs, at most M at once" (M 0: "OWNER may run no job
 * now (max_running 0)"), or its limit in the job's pool ("owner_pool_max_running", "owner_pool_running",
 * migration 034): "waiting for its owner's limit in pool P: OWNER runs N jobs of it, at most M at
 * once", followed by the place in the queue; before those, when its owner is over its GPU-hour quota
 * (placement "owner_quota" {"over": true, "gpu_hours", "days", "used_hours"}, migration 035): "waiting for
 * its owner's GPU-hour quota: " and jobtext_quota's sentence, " (or for an admin to raise it)", followed
 * by the place; before all that, when an attempt is
 * being stopped for it (placement "preempting", rung_preempt): "waiting for a GPU: job N, which
 * that GPU's worker borrowed from another pool, is being stopped on GPU G for it (preemption); it
 * runs there next" ("job N, of a worse priority (P), is being stopped ..." when its "why" is
 * "priority": rungd --preempt-priority), then the place; next, while it is held for the worker whose
 * host has its checkpoint (placement "held", recovery/resume.h): "waiting for worker W: its host has the checkpoint
 * attempt N saved, so the job resumes there instead of starting over; the other workers' GPUs may take
 * it in 1m30s", then the place. NULL when the job has no
 * placement (it is not queued). Heap string, the caller frees. */
char *jobtext_placement(const json_t *job);

/* "scheduled: starts at 2026-12-01T22:00:00Z (in 2h05m)" when job (a JOB, borrowed) is scheduled
 * (migration 025): its run_after in UTC (common/when.h), and the wait from the JOB's "starts_in_s"
 * (GET /v1/jobs/{id}: by the database's clock, so the reader's own clock does not matter): "(due
 * now: it is queued within a second)" at 0, nothing without it (a list's JOB). While it waits for
 * other jobs (migration 033, "waits_for"): "scheduled: waits for job 3 (running) to succeed" ("jobs
 * 3 (running), 4 (failed)"; the states from GET's "waiting_for", bare ids without it; "to end" or "to
 * fail or be cancelled" by its "after_when", migration 036), then, when one of them failed or was
 * cancelled and it waits for their success, "; job 4 failed: this job starts only once it is retried
 * and succeeds, or when this one is started now", and with a start time ", and not before T (in W)".
 * NULL when the job is not scheduled. Heap string, the caller frees. */
char *jobtext_scheduled(const json_t *job);

/* A job's start deadline (migration 039, "start_by") while it has not started (queued or scheduled,
 * no attempt): "must start by T (in W), else it is cancelled", or "... (due: it is cancelled within a
 * second)" once now_ms (the caller's clock) is past it. NULL otherwise. Heap string, the caller frees. */
char *jobtext_deadline(const json_t *job, int64_t now_ms);

/* "job 7 waits for this one" ("jobs 7, 8 wait ...") when job (a JOB, borrowed) has "awaited_by" (GET
 * /v1/jobs/{id}: the scheduled jobs that run after it, migration 033); when it failed or was cancelled
 * (then only jobs that wait for its success are left, 036), "job 7 waits for this one to succeed: it
 * starts only once this one is retried and succeeds (or when it is started now); cancel it to drop it"
 * ("they ... each ... them"). NULL without any. Heap string, the caller frees. */
char *jobtext_awaited(const json_t *job);

/* "stopping: attempt 3 is being stopped so that job 41 of its worker's own pool can run on its GPU
 * (preemption); the job is queued again unchanged when it ends" ("so that job 41, an urgent one, can
 * run" when its "why" is "priority": rungd --preempt-priority), or "... is being stopped on request
 * (requeue); ..." when job (a JOB, borrowed: GET /v1/jobs/{id}'s "stopping", migration 029) has a
 * running attempt marked for a stop. NULL otherwise. Heap string, the caller frees. */
char *jobtext_stopping(const json_t *job);

/* "retried by WHO from the current|target config after it was failed|cancelled; budgets count from
 * attempt N: NOTE" when job has recovery_state.retried (POST /v1/jobs/{id}/retry); else NULL. Heap
 * string, the caller frees. */
char *jobtext_retried(const json_t *job);

/* Where a succeeded job's trained file is (result.output: the file its result's attempt saved):
 * "PATH (saved by attempt N, on worker W's host)"; NULL when job (a JOB, borrowed) names none. Heap
 * string, the caller frees. */
char *jobtext_output(const json_t *job);

/* "; resuming from checkpoints spared about 1.5 GPU hours (1800 steps not run again, in 2 attempts)"
 * from GET /v1/usage's "resumed" {"attempts", "steps", "priced", "gpu_seconds"} (borrowed; the
 * total's or an owner's), to end the report's total line. When only some were priced ("priced" <
 * "attempts": the others did not time their steps): "; ... spared 1800 steps in 3 attempts, about
 * 0.9 GPU hours for the 2 that timed their steps"; none: "; ... spared 1800 steps (in 3 attempts)".
 * "" when no attempt resumed (or resumed is not an object). The hours are an estimate
 * (attempts.resumed_gpu_s). Heap string, the caller frees. */
char *jobtext_spared(const json_t *resumed);

/* "; 7 jobs succeeded after running out of GPU memory (12 OOM attempts before the config that fit)"
 * from GET /v1/usage's "recovered" {"jobs", "oom_attempts"} (borrowed; the total's or an owner's): the
 * jobs rung's recovery brought to a config that fit, to end the report's total line. "" when none (or
 * recovered is not an object). Heap string, the caller frees. */
char *jobtext_recovered(const json_t *recovered);

/* An owner's GPU-hour quota (GET /v1/usage's "quotas" entries, migration 035: {"owner", "gpu_hours",
 * "days", "used_hours", "over"}; borrowed) as one sentence: "team-a used 512.3 of 500 GPU hours in the
 * last 7 days: over its quota, none of its jobs starts until older hours leave that window" ("... 7
 * days (97%)" when under; "not read yet" when used_hours is null). With a "pool" (a quota per pool,
 * migration 037): "... 500 GPU hours of pool h200 in the last 7 days: over its quota, none of its jobs
 * of that pool starts ...". Heap string, the caller frees. */
char *jobtext_quota(const json_t *quota);
/* The same quota in a table cell: "512.3/500 in 7d" (the hours used in its window of the most; "?"
 * for the hours before the first read). Heap string, the caller frees. */
char *jobtext_quota_cell(const json_t *quota);

#endif
