/* The memory model's use in decisions (issue 12): from a CTX's "memory" section, the profile; after
 * an OOM, the first rung or smallest combination of rungs, in ladder order, predicted to fit; before
 * a first attempt, the config predicted to fit the leased GPU; during scale-up, whether a step is
 * predicted to fail for sure. Pure code on jansson values; no I/O. */
#ifndef RUNG_MEMPLAN_H
#define RUNG_MEMPLAN_H

#include <jansson.h>
#include <stdbool.h>

#include "ladder.h"

/* The PROFILE a CTX carries (recovery/memmodel.h): ctx.memory.profile when the server cached one,
 * else memmodel_fit over ctx.memory.observations plus the attempt that just ended (class cls, may be
 * NULL; added when no observation has its attempt id). NULL when ctx has no "memory" or no
 * observations: the policy is then today's ladder. The caller owns the result. */
json_t *memplan_profile(const json_t *ctx, const char *cls);

/* After an OOM of class cls on config ran: applies the class plan's rungs one after another (the
 * same order ladder_step walks) until the config is not predicted to fail; a video whose frames the
 * rungs cut then gets back the most frames, up to ran's, that a run of it proved to fit here (a
 * fit observation predicted to fit: a scale-up search's find), so no search is run twice. Returns a new object
 *   {"config": next config, "changes": [{"path","old","new"}] (ran -> config), "rungs": [names applied],
 *    "skipped": [rungs whose config alone was predicted to fail], "pruned": [rungs that turn on what
 *    scale-up keeps, applied on the way, taken back because the config without them is still
 *    predicted to fit (the smallest combination)], "estimate": PREDICTION of config,
 *    "exhausted": bool (every rung applied and still predicted to fail for sure),
 *    "position": ladder_position of the last rung, "guide": its guide section}
 * or NULL when no rung is left. With a profile that predicts nothing the answer is ladder_step's one
 * rung. Borrows its arguments; *last (may be NULL) gets the last rung applied (static). */
json_t *memplan_descend(const json_t *profile, const char *cls, bool video, const json_t *ran,
			const struct ladder_rung **last);

/* Before a job's first attempt: when config is predicted not to fit (fits false, and the estimate
 * itself above the usable memory: inside the margin it runs as submitted), the plan of
 * memplan_descend for the class its predicted phase implies (sample: oom_sample, load: oom_load,
 * else oom_train_early), "exhausted" true when every rung is predicted to fail for sure; NULL when
 * it is predicted to fit or unknown (the first attempt runs it as today). */
json_t *memplan_initial(const json_t *profile, bool video, const json_t *config);

/* True when prediction (memmodel_predict's) says for sure that the config fails: a config no
 * heavier ran out of memory, or the estimate minus the fit's error ("error_mib", at least 64 MiB, at
 * most half the margin) is above the usable memory AND the
 * fit rests on at least 6 measured runs AND the config reaches at most 1.5x the largest size they
 * measured in the deciding phase ("n_measured", "reach"). Anything less is tried, not skipped. */
bool memplan_sure_fail(const json_t *prediction);

/* The prediction of config under profile (both borrowed), or NULL when profile is NULL. */
json_t *memplan_estimate(const json_t *profile, bool video, const json_t *config);

#endif
