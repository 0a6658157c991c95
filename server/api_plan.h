/* POST /v1/plan: what rung would do with a config before it is submitted. The body is what
 * POST /v1/jobs takes; nothing is stored. For each GPU memory size in the fleet (and one asked
 * for), the memory model's first-attempt decision (policy_initial, as a lease makes it). */
#ifndef RUNG_API_PLAN_H
#define RUNG_API_PLAN_H

#include <jansson.h>

struct hreq;

/* Answers h once: 200 {"kind", "arch", "features", "observations": how many the model fits on,
 * "fleet_max_gpu_mib", "sizes": [{"gpu_mib", "gpus", "draining_gpus", "in_fleet", "action":
 * "as_is"|"start_lower"|"requeue_bigger", "reason", "estimate" (of the config that would run, or
 * null), "target_estimate", "rungs", "changes", "skipped"?, "min_gpu_memory_mib"?}]} with the
 * fleet's sizes largest first and ?gpu_mib= (a size to ask about, e.g. a card not bought yet)
 * among them; the errors of a submit (400 naming the field, 413) and 400 "gpu_mib". */
void api_plan(struct hreq *h);

/* The plan document api_plan answers (the 200's body above), made without a request, for POST
 * /ui/plan too (web_plan.c). config: the AI Toolkit file; recovery: RECOVERY with its defaults
 * filled (api_jobs_check_submit's); kind: atconfig_kind(config); arch: memmodel_arch(config);
 * fleet: the document sql/plan_fleet.sql returns for that arch ({"sizes", "fleet_max_gpu_mib",
 * "observations"}); extra_mib: a GPU size to ask about besides the fleet's (0: none). All
 * borrowed, none changed. Returns a new reference the caller owns, or NULL with *err a heap string
 * the caller frees (a context the policy refuses; out of memory). Pure: no I/O. */
json_t *api_plan_build(const json_t *config, const json_t *recovery, const char *kind, const char *arch,
		       const json_t *fleet, long extra_mib, char **err);

#endif
