/* The recovery policy: pure code, no I/O. Given what the server knows about a job and the attempt
 * that just ended (CTX in docs/DESIGN.md), it classifies the ending and decides what happens next
 * (DECISION). Ladders are tables of rungs, classes are ordered rules; both read like the guide. */
#ifndef RUNG_POLICY_H
#define RUNG_POLICY_H

#include <jansson.h>

/* Decides what follows the attempt in ctx->attempt. Returns a new reference to a DECISION object
 * (docs/DESIGN.md); the caller owns it. On a malformed ctx returns NULL and sets *err to a heap
 * string naming the problem (the caller frees it). Never touches ctx. */
json_t *policy_decide(const json_t *ctx, char **err);

/* Fills in the configs a CTX from the database leaves NULL because they are the job's target
 * (migrations/006_config_once.sql): job.current_config, attempt.config and each attempts[].config
 * become references to job.target_config (shared, not copied). Changes ctx in place; a ctx without
 * an object target_config is left as it is (policy_decide then reports it). */
void policy_ctx_resolve(json_t *ctx);

/* What rung makes of one attempt's FACTS, for `rungctl classify` and tests: a new object
 * {"class", "rule", "evidence", "phase", "step", "signatures", "oom"}. config may be NULL (the
 * conservative-config test of env faults then cannot hold). Same rules as policy_decide. */
json_t *policy_classify(const json_t *facts, const json_t *config);

/* Issue 12: what a job's first attempt should run on the GPU it is leased to. ctx is a CTX without
 * "attempt": {"job": {"kind", "target_config", "current_config"?, "recovery"?}, "gpu":
 * {"memory_total_mib"}, "fleet": {"max_gpu_memory_mib"}?, "memory": {...}}. Returns a new object
 * {"action": "as_is"|"start_lower"|"requeue_bigger", "next_config": config|null, "changes", "rungs",
 * "skipped"?, "estimate": PREDICTION|null, "constraints"?: {"min_gpu_memory_mib"}, "reason"}:
 * "start_lower" when the memory model predicts the config does not fit (the rungs predicted to fit
 * are applied at once, as after an OOM; scale-up brings the settings back after a success);
 * "requeue_bigger" when every rung is predicted to fail for sure here and the fleet has a bigger
 * GPU (as the ladder's end after a real OOM: the target config, on a GPU of at least that much).
 * Without memory history always "as_is". NULL and *err (heap) on a malformed ctx. */
json_t *policy_initial(const json_t *ctx, char **err);

#endif
