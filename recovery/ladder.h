/* The rollback ladders (guide section 6) and the way back up (guide section 7) as tables: each
 * rung is one memory-saving change to an AI Toolkit config file, each setting one step back toward
 * the target. Every change is recorded as {"path", "old", "new"} with paths from the file root.
 * Pure code on jansson values; no I/O. */
#ifndef RUNG_LADDER_H
#define RUNG_LADDER_H

#include <jansson.h>
#include <stdbool.h>

#define LADDER_FRAMES_FLOOR 17   /* never fewer training/sample frames than this (on every grid) */
#define LADDER_SAMPLE_MIN_SIDE 512 /* cheaper sampling: longest side at most this (or the largest bucket) */
#define LADDER_SAMPLE_MIN_STEPS 10 /* cheaper sampling: halve sample_steps down to this */

struct ladder_rung {
	const char *name;  /* e.g. "batch_size", shown in decisions and reports */
	const char *guide; /* the guide section it implements */
	bool (*apply)(json_t *file, json_t *changes); /* changes file; false when it changed nothing */
};

struct ladder_setting {
	const char *name;  /* e.g. "bucket"; the key of recovery_state.ceilings */
	const char *guide;
	/* one step toward target, below ceil (the setting's recorded ceiling or NULL); NULL for the
	 * memory settings that stay (guide 7 step 1) */
	bool (*step)(json_t *cur, const json_t *target, const json_t *ceil, json_t *changes);
	json_t *(*value)(const json_t *file); /* the setting's value in file (new reference) */
	bool below_ceiling; /* a ceiling bounds the setting (frames: the grid midpoint) instead of ending it */
};

/* Applies to file the first rung that changes something in the plan for failure class cls
 * ("oom_train_early", "oom_sample", "oom_load", "oom_train_intermittent") of an image or video job,
 * appending the changes to the changes array (borrowed). Returns the rung, or NULL when every rung
 * of the plan is exhausted (file and changes untouched). */
const struct ladder_rung *ladder_step(const char *cls, bool video, json_t *file, json_t *changes);

/* Position of the rung in the job's ladder (0-based), or -1 when it is not on it. */
int ladder_position(const struct ladder_rung *r, bool video);

/* Moves cur one setting back toward target (guide section 7): the first setting of the scale-up
 * order that is not in ceilings (object of NAME: value, may be NULL; frames step below their ceiling
 * to the grid midpoint instead of stopping) and still below target. When
 * steps_only, only the "steps" setting is considered. Returns the setting or NULL when all are at
 * target or ceiling. Changes are appended to changes. */
const struct ladder_setting *ladder_scale_up(bool video, json_t *cur, const json_t *target,
					     const json_t *ceilings, bool steps_only, json_t *changes);

/* The scale-up order of an image or video job (NULL-terminated table, static). */
const struct ladder_setting *const *ladder_scale_up_order(bool video);

/* The memory settings a rung may apply and scale-up keeps (guide 7 step 1): checkpointing,
 * low_vram, quantize, layer_offloading (NULL-terminated table, static). */
const struct ladder_setting *const *ladder_kept_settings(void);

/* The scale-up setting called name, or NULL. */
const struct ladder_setting *ladder_setting_named(const char *name);

/* True when config a asks no more of GPU memory than config b in every setting the ladder and
 * scale-up change (batch, buckets, frames, checkpointing, the low-memory path, sampling) and is
 * otherwise the same, leaving out what does not change memory (config.name, training_folder,
 * steps, accumulation, sample prompts and frequency). A run of b can then only fail where a run of
 * a failed (issue 16.2). */
bool ladder_no_larger(const json_t *a, const json_t *b);

/* Caps train.steps at cap (recovery.validate_steps); true when it changed something. */
bool ladder_cap_steps(json_t *file, long long cap, json_t *changes);

/* Sets path in file to nv (stolen) and records the change when the value differs; nv NULL deletes
 * the key. True when something changed. */
bool ladder_set(json_t *file, json_t *changes, const char *path, json_t *nv);

/* Frame grid of the model: 4 for Wan (4n+1), 8 for LTX (8n+1), 1 otherwise. */
int ladder_frame_grid(const json_t *file);

/* One grid step down from n (about half, snapped to the grid, not below the floor). */
long long ladder_frames_down(long long n, int grid);

/* Largest training bucket over all datasets (512 when none is given). */
long long ladder_largest_bucket(const json_t *file);

/* Conservative config in the sense of guide section 5: batch 1, checkpointing on, no bucket above
 * 768, no more than 33 frames. On false, *why (may be NULL) gets a borrowed static reason. */
bool ladder_conservative(const json_t *file, const char **why);

/* Appends to changes one {"path", "old", "new"} per leaf that differs between old and new (objects
 * member by member, arrays of objects element by element, anything else as a whole). */
void ladder_diff(const json_t *old, const json_t *new, json_t *changes);

/* A new object summarising the memory-relevant settings of file (for results and reports). */
json_t *ladder_summary(const json_t *file);

#endif
