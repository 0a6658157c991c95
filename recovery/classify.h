/* Failure classes as an ordered table of rules (guide sections 1, 2 and 5): the first rule that
 * matches an attempt's FACTS names its class and the evidence people see. Pure code, no I/O. */
#ifndef RUNG_CLASSIFY_H
#define RUNG_CLASSIFY_H

#include <jansson.h>
#include <stdbool.h>

#define CLASSIFY_DIRTY_GPU_MIB 1024 /* gpu_before memory used above this: the GPU was not clean */
#define CLASSIFY_LONG_TRAIN_S 600   /* FACTS.train_s_before_oom at or above this: training ran a while first */

struct classify_in {
	const json_t *facts;    /* FACTS as reported (borrowed) */
	const json_t *config;   /* the config file the attempt ran (borrowed, may be NULL) */
	long long early_steps;  /* recovery.early_steps */
	bool succeeded_before;  /* this exact config succeeded before (this job or another) */
	long long alloc_failed_before; /* number of an earlier attempt of this job that failed with an
					* allocation failure before training on the same GPU, with a config
					* no smaller than this one; 0 when none (issue 16.1) */
};

/* Returns a new object {"class", "rule", "guide", "evidence": [STRING...]} (the caller owns it).
 * Never returns NULL: facts it cannot read are treated as absent. */
json_t *classify_run(const struct classify_in *in);

/* Steps completed in this attempt, counted from first_step (a resumed attempt starts at its
 * checkpoint); steps_done when first/last are missing. */
long long classify_steps_in_attempt(const json_t *facts);

/* True when the facts carry any GPU-memory signature (or an OOM phase or OOM numbers). */
bool classify_gpu_signature(const json_t *facts);

#endif
