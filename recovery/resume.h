/* Where a re-queued job should run next so that AI Toolkit resumes from its checkpoint instead of
 * starting over (the checkpoint hold, rungd --resume-hold-s): pure code on a finish's CTX and the
 * DECISION about to be applied, no I/O, no clocks. The claim honours the hold (sql/functions/
 * 40_claim.sql, rung_job_allows): for its length only the home worker's GPUs may take the job. */
#ifndef RUNG_RESUME_H
#define RUNG_RESUME_H

#include <jansson.h>

/* The hold a DECISION should carry, or NULL when none: {"worker_id", "seconds", "attempt", "path"}
 * (the worker whose host holds the job's newest checkpoint, how long the others leave the job to it,
 * the number of the attempt that saved it and the file it named). A hold is made when all of these
 * hold (ctx is a resolved CTX, policy_ctx_resolve; decision the one to apply):
 *   - hold_s > 0 and the decision queues the job again (job_state "queued") after an out-of-memory
 *     error (class oom_*): an OOM retry keeps the config's name so that AI Toolkit resumes. Not
 *     after a move off the host on purpose (env_fault, host_oom), nor after a preemption or a
 *     requeue on request (class preempted: the stop was made to free that GPU, or to move the job);
 *   - the decision's memory floor (constraints.min_gpu_memory_mib, the ladder's requeue_bigger) is
 *     not above the attempt's GPU (CTX attempt.gpu_memory_mib): a bigger GPU is elsewhere;
 *   - the attempt that just ended, or the newest one before it, saved a checkpoint (FACTS.saved_path)
 *     under the config name the next attempt runs (decision next_config, else the job's current
 *     config): AI Toolkit resumes by config.name, so a scale-up's new name starts afresh;
 *   - that attempt ran on the worker of the attempt that just ended (the checkpoint is on that
 *     host), which is online (CTX attempt.worker_state; a draining or unknown one gets no hold), and
 *     neither the decision nor the job's constraints exclude that worker or the decision that GPU.
 * Borrows its arguments; the caller owns the result. */
json_t *resume_hold(const json_t *ctx, const json_t *decision, int hold_s);

/* Puts HOLD (borrowed; NULL: none) into DECISION's constraints as "hold", making the constraints an
 * object when they were null (a server decision's); a NULL hold leaves the decision as it is. */
void resume_hold_attach(json_t *decision, const json_t *hold);

#endif
