/* The memory model (issue 12): what an AI Toolkit config needs on a GPU, learned from ended attempts.
 * FEATURES are the memory-relevant settings of a config; an OBSERVATION is one ended attempt; a
 * PROFILE is the fit over the observations of one (arch, GPU memory class); a prediction is the
 * estimated peak of a candidate config with its evidence. Pure code on jansson values; no I/O. */
#ifndef RUNG_MEMMODEL_H
#define RUNG_MEMMODEL_H

#include <jansson.h>
#include <stdbool.h>

#define MEMMODEL_MAX_OBSERVATIONS 200 /* GET /v1/profiles fits at most this many (newest first) */
#define MEMMODEL_CTX_OBSERVATIONS 48  /* a finish's CTX: the job's own and the newest, this many in all */
#define MEMMODEL_CLASS_PCT 10         /* same GPU memory class: total memory within ±10 % */

/* A new object of the memory-relevant settings of an AI Toolkit config file (the first process),
 * the same quantities recovery/ladder.c changes:
 *   {"res_max": px (largest bucket over datasets, 512 when none), "res_n": buckets of that dataset,
 *    "batch": largest batch (train or per dataset), "grad_ckpt": bool, "frames": largest dataset
 *    num_frames, "sample_px": w*h of the largest sample (0 when sampling is off), "sample_steps",
 *    "sample_frames", "sampling": bool, "low_vram", "quantize", "offload": bool}
 * kind is "image" or "video" (NULL: read from the config; video forces frames >= 1 as written).
 * Missing keys get AI Toolkit's defaults; never returns NULL (a non-object config gives defaults).
 * The caller owns the result. */
json_t *memmodel_features(const json_t *config, const char *kind);

/* The model's arch key of a config: model.arch without a ":tag" suffix, or what the legacy flags
 * (is_flux, is_xl, is_v3) say, "unknown" when nothing does. Written into buf (always terminated). */
void memmodel_arch(const json_t *config, char *buf, size_t cap);

/* The key of a GPU's memory class in storage (memory_profiles.gpu_class_mib): total MiB rounded to
 * the nearest GiB, in MiB (24564 -> 24576, 81559 -> 81920). */
int memmodel_gpu_class(int gpu_mib);

/* True when two GPUs are of the same memory class: b within ±MEMMODEL_CLASS_PCT % of a. */
bool memmodel_same_class(int a_mib, int b_mib);

/* The OOM lower bound of FACTS: oom.allocated_by_pytorch_mib + oom.tried_to_allocate_mib when both
 * are there, else oom.total_capacity_mib, else -1 (no figures). */
int memmodel_need_mib(const json_t *facts);

/* The observation outcome of a failure class: "success" -> "fit"; oom_train_early, oom_sample,
 * oom_load, oom_train_intermittent -> "oom"; anything else (env_fault, not_oom, host_oom,
 * cancelled, NULL) -> "other". A static string. */
const char *memmodel_outcome(const char *cls);

/* OBSERVATION (one ended attempt, as JSON):
 *   {"arch", "gpu_mib", "features": FEATURES, "outcome": "fit"|"oom"|"other",
 *    "phase": "load|baseline_sample|train|sample|save"|null, "peak_mib": int|null (nvidia-smi peak
 *    while it ran), "need_mib": int|null (memmodel_need_mib), "job_id", "attempt_id", "at"}
 * A new observation built from an attempt's config, GPU memory, class and FACTS (facts.peak,
 * facts.oom, facts.oom_phase); job_id/attempt_id may be 0 when unknown. The caller owns it. */
json_t *memmodel_observation(const char *arch, int gpu_mib, const json_t *features, const char *cls,
			     const json_t *facts, long long job_id, long long attempt_id);

/* Fits a PROFILE of (arch, gpu_mib) over observations (array, borrowed; those of another arch and
 * outcome "other" are skipped). Observations of every GPU memory class count: what a config needs
 * does not depend on the card it ran on (an OOM's floor is a floor anywhere); gpu_mib sets the
 * usable memory the predictions are judged against and the evidence rules' "a GPU at least this big":
 *   {"arch", "gpu_mib", "n": observations used, "n_here": those made on gpu_mib's class, "n_fit",
 *    "n_oom", "n_exact": fitted rows (floors
 *    included), "n_measured": measured peaks, "max_train_mpx", "max_sample_mpx": largest measured sizes,
 *    "coef": {"load_mib": {combination of savers: MiB}, "train_mib_per_mpx", "train_mib_per_mpx2",
 *             "nockpt_mib_per_mpx", "sample_mib_per_mpx", "sample_mib_per_mpx2"},   the fitted
 *             figures (the "2" terms: attention, quadratic in one item's tokens; see memmodel.c)
 *    "margin_mib": safety margin from the residuals, "error_mib": the fit's own error (largest
 *    residual, at least 2 x RMS; -1 before a fit), "usable_mib": what a config may use here,
 *    "ceilings": {setting: value},   the largest values seen to fit where a larger one OOMed
 *    "fits": [FEATURES that ran fine (at most 20, newest first)], "ok": bool (enough to predict)}
 * Never returns NULL; with no usable observation "n" is 0 and "ok" false. The caller owns it. */
json_t *memmodel_fit(const json_t *observations, const char *arch, int gpu_mib);

/* Predicts the peak of FEATURES under PROFILE (both borrowed): a new object
 *   {"peak_mib": int|null, "fits": true|false|null (null = unknown), "evidence": "one line",
 *    "basis": "lighter_oom|heavier_fit|fit|bound|none", "phase", "margin_mib", "usable_mib",
 *    "n_measured"?, "reach"?, "error_mib"? (basis "fit": the measured runs the fit rests on, and the estimated
 *    size over the largest measured size of the deciding phase)}.
 * fits is true only when peak + margin <= usable memory (or the same features ran fine), false
 * when the peak exceeds it or the same or a heavier config OOMed; null when the profile is not ok.
 * A combination of memory savers never measured is bounded (basis "bound"): above by a measured
 * combination that saves less, below by one that saves more (a step without checkpointing: below by
 * the checkpointed step); fits when the upper bound fits, not when the lower bound does not, else
 * null. */
json_t *memmodel_predict(const json_t *profile, const json_t *features);

#endif
