/* POST /v1/plan: what rung would do with a config before it is submitted. The body is what
 * POST /v1/jobs takes; nothing is stored. For each GPU memory size in the fleet (and one asked
 * for), the memory model's first-attempt decision (policy_initial, as a lease makes it). */
#ifndef RUNG_API_PLAN_H
#define RUNG_API_PLAN_H

struct hreq;

/* Answers h once: 200 {"kind", "arch", "features", "observations": how many the model fits on,
 * "fleet_max_gpu_mib", "sizes": [{"gpu_mib", "gpus", "draining_gpus", "in_fleet", "action":
 * "as_is"|"start_lower"|"requeue_bigger", "reason", "estimate" (of the config that would run, or
 * null), "target_estimate", "rungs", "changes", "skipped"?, "min_gpu_memory_mib"?}]} with the
 * fleet's sizes largest first and ?gpu_mib= (a size to ask about, e.g. a card not bought yet)
 * among them; the errors of a submit (400 naming the field, 413) and 400 "gpu_mib". */
void api_plan(struct hreq *h);

#endif
