/* How rungctl tells a job's story (watch and show): the config change each attempt made, against
 * the config of the attempt before it (so a failed scale-up's revert shows), and a finished job's
 * verdict: for a succeeded job, setting by setting what was achieved against the target and why
 * each setting below target was given up (from the job's `result` and its attempts), never the
 * last failed attempt's class. Pure code over the API's documents (Job, attempts); no I/O. */
#ifndef RUNG_STORY_H
#define RUNG_STORY_H

#include <stdbool.h>
#include <jansson.h>

/* The config the attempt after attempts[i] runs (borrowed), for attempts[i] that has ended: the next
 * attempt's config when it is listed; NULL when the job ended (no next config); the job's
 * current_config while the job waits for that attempt (state queued and job.attempts == i + 1). Sets
 * *known to false, and returns NULL, when the documents cannot tell yet (the job was read before
 * the attempt ended): ask again after the next poll. */
const json_t *story_next_config(const json_t *job, const json_t *attempts, size_t i, bool *known);

/* "attempt N ended: outcome O, class C, action A, rung R\n" followed by one
 * "  config change: PATH: OLD -> NEW\n" per leaf that differs from attempts[i]'s config to next
 * (NULL: none). Heap string. */
char *story_attempt_text(const json_t *attempt, const json_t *next);

/* Issue 12: when the job's first attempt started below its target because the memory model predicted
 * the target not to fit (job.recovery_state.started_lower), "attempt N started below the target:
 * REASON\n" and one "  config change: PATH: OLD -> NEW\n" per leaf from the target to that attempt's
 * config (attempts may be NULL or not list it yet: the recorded changes then). NULL otherwise.
 * Heap string. */
char *story_start_text(const json_t *job, const json_t *attempts);

/* The verdict of a finished job, lines ending in "\n" (heap string):
 *   succeeded: "job ID succeeded after N attempt(s) with attempt K's run (NAME)" then
 *     "  every setting at target", or per setting below target
 *     "  SETTING: target T, achieved A: WHY" and "  at target: S1, S2, ..."; the settings and their
 *     reasons come from result.settings when the policy gives them, else from result.target,
 *     achieved and ceilings and the attempts (which scale-up attempt hit each ceiling);
 *   failed/cancelled: "job ID STATE after N attempt(s): REASON";
 *   then, for a job that started below its target (story_start_text), "  started below the target
 *   (memory model)[, then scaled up]: attempt N ran with RUNGS applied"; for one whose first claim
 *   was handed back for a bigger GPU (recovery_state.started_bigger), "  started on a bigger GPU
 *   (memory model): its claim on a G MiB GPU was handed back before it ran, for a GPU with at least
 *   M MiB" and "    why: REASON"; for a scheduled job "  scheduled: starts at T (in 2h05m)"; for a
 *   queued job, its line of recovery/jobtext.h ("  waiting for a GPU: WHY; N jobs ahead of it in the
 *   queue", or "  waiting its turn: N jobs ahead of it in the queue").
 * id: the job id as the user wrote it (NULL: the job's own). attempts may be NULL. */
char *story_verdict(const json_t *job, const json_t *attempts, const char *id);

#endif
