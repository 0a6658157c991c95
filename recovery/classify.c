/* The failure classes of guide sections 1, 2 and 5 as an ordered rule table: cancelled, env_fault
 * (a stalled trainer), success, env_fault (busy GPU), not_oom, host_oom, env_fault (four ways),
 * oom_train_early (phase unknown), oom_load, oom_sample, oom_train_early, oom_train_intermittent. First match wins; each rule writes
 * its own evidence. Owns no state. */
#include "classify.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "jpath.h"
#include "ladder.h"
#include "util.h"

struct view {
	const struct classify_in *in;
	const char *oom_phase; /* oom_phase, else the last phase seen */
	long long steps;       /* steps completed in this attempt */
	long long trained_s;   /* seconds of training before the OOM by the log's timestamps, -1 when unknown or
				* when the log counts steps (then the steps say how far training got) */
	bool gpu_sig;
	bool host_sig;
};

static long long sig(const struct view *v, const char *name)
{
	return jpath_int(json_object_get(v->in->facts, "signatures"), name, 0);
}

static void ev(json_t *evidence, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void ev(json_t *evidence, const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_array_append_new(evidence, json_string(buf));
}

/* Evidence lines for each signature with a non-zero count among names. */
static bool ev_sigs(const struct view *v, json_t *e, const char *const *names)
{
	bool any = false;

	for (; *names; names++) {
		long long n = sig(v, *names);
		if (n > 0) {
			ev(e, "signature %s x%lld", *names, n);
			any = true;
		}
	}
	return any;
}

static const char *const GPU_SIGS[] = { "cuda_oom", "skipped_batch_oom", "oom_3_in_row", "zero_bytes_free",
					"cublas_alloc_failed", "cublas_not_initialized", NULL };
static const char *const HOST_SIGS[] = { "host_killed", "memory_error", "host_shm", NULL };
static const char *const ENV_SIGS[] = { "zero_bytes_free", "cublas_alloc_failed", "cublas_not_initialized", NULL };
static const char *const OTHER_SIGS[] = { "nan_loss", "file_not_found", "nccl_timeout", "config_error",
					  "error_running_job", "job_stopped", NULL };

static long long exit_code(const struct view *v)
{
	return jpath_int(v->in->facts, "exit_code", -1);
}

static long long signal_no(const struct view *v)
{
	return jpath_int(v->in->facts, "signal", 0);
}

static bool phase_is(const struct view *v, const char *a, const char *b)
{
	return v->oom_phase && ((a && !strcmp(v->oom_phase, a)) || (b && !strcmp(v->oom_phase, b)));
}

/* ---- the rules ---- */

static bool m_cancelled(const struct view *v, json_t *e)
{
	if (!jpath_bool(v->in->facts, "cancelled", 0))
		return false;
	ev(e, "the attempt was cancelled on request");
	return true;
}

/* The worker killed a trainer that printed nothing for its stall timeout (FACTS.stalled_s, with the
 * SIGKILL that ended it): a hang (a collective that never returns, a deadlocked data loader, a GPU
 * that stopped answering), not memory; re-run on a clean GPU like any environment fault (the
 * policy marks the GPU only when the killed trainer left it dirty). */
static bool m_stalled(const struct view *v, json_t *e)
{
	long long s = jpath_int(v->in->facts, "stalled_s", 0);

	if (s <= 0 || signal_no(v) != 9) /* not killed after all: it ended by itself meanwhile */
		return false;
	ev(e, "the trainer printed nothing for %lld s and the worker killed it (--stall-timeout-s)", s);
	ev(e, "a hang, not an out-of-memory error: the same config runs again on a clean GPU");
	return true;
}

static bool m_success(const struct view *v, json_t *e)
{
	if (exit_code(v) != 0 || signal_no(v) || sig(v, "job_stopped"))
		return false;
	ev(e, "exit_code=0 after step %lld", jpath_int(v->in->facts, "last_step", 0));
	if (sig(v, "skipped_batch_oom"))
		ev(e, "AI Toolkit skipped %lld batch(es) for OOM on the way: the config is near the limit",
		   sig(v, "skipped_batch_oom"));
	return true;
}

/* Guide 5: the GPU was busy or unavailable (another process holds it in exclusive mode, or it is in a
 * bad state): the worker's problem whatever the config; never the VRAM ladder. */
static bool m_gpu_busy(const struct view *v, json_t *e)
{
	if (!sig(v, "gpu_busy"))
		return false;
	ev(e, "signature gpu_busy x%lld: `CUDA-capable device(s) is/are busy or unavailable`", sig(v, "gpu_busy"));
	ev(e, "the GPU could not be used at all: run again on a clean GPU, not with a smaller config");
	return true;
}

static bool m_not_oom(const struct view *v, json_t *e)
{
	const char *err = jpath_str(v->in->facts, "error", NULL);

	if (v->gpu_sig || v->host_sig)
		return false;
	ev(e, "no GPU-memory signature in the log");
	ev_sigs(v, e, OTHER_SIGS);
	if (err)
		ev(e, "error: %.300s", err);
	ev(e, "exit_code=%lld signal=%lld", exit_code(v), signal_no(v));
	return true;
}

static bool m_host_oom(const struct view *v, json_t *e)
{
	if (v->gpu_sig || !v->host_sig)
		return false;
	ev(e, "host memory, not GPU memory: the VRAM ladder does not apply");
	ev_sigs(v, e, HOST_SIGS);
	if (signal_no(v) == 9 || exit_code(v) == 137)
		ev(e, "killed by SIGKILL (exit_code=%lld signal=%lld): the host's OOM killer", exit_code(v),
		   signal_no(v));
	return true;
}

/* Guide 5: the GPU was not clean when the attempt started (gpu_before: foreign processes or memory used). */
static bool m_dirty_gpu(const struct view *v, json_t *e)
{
	const json_t *g = json_object_get(v->in->facts, "gpu_before");
	json_t *procs = json_object_get(g, "processes"), *p;
	long long used = jpath_int(g, "memory_used_mib", 0);
	size_t i;
	bool dirty = false;

	if (!v->gpu_sig || !json_is_object(g))
		return false;
	json_array_foreach(procs, i, p) {
		ev(e, "before the attempt, process %lld held %lld MiB on the GPU", jpath_int(p, "pid", 0),
		   jpath_int(p, "used_mib", 0));
		dirty = true;
	}
	if (used > CLASSIFY_DIRTY_GPU_MIB) {
		ev(e, "before the attempt, %lld MiB of GPU memory were already in use (threshold %d MiB)", used,
		   CLASSIFY_DIRTY_GPU_MIB);
		dirty = true;
	}
	return dirty;
}

/* Guide 5: the OOM message names other processes holding memory. A process that holds at least what
 * PyTorch itself allocated is taken for the trainer seen from another PID namespace (containers). */
static bool m_foreign(const struct view *v, json_t *e)
{
	const json_t *oom = json_object_get(v->in->facts, "oom");
	long long alloc = jpath_int(oom, "allocated_by_pytorch_mib", 0);
	json_t *p;
	size_t i, trainer = (size_t)-1;
	long long trainer_used = 0;
	bool foreign = false;

	if (!v->gpu_sig)
		return false;
	/* At most one process is the trainer: the smallest that holds at least what PyTorch allocated. */
	json_array_foreach(json_object_get(oom, "processes"), i, p) {
		long long used = jpath_int(p, "used_mib", 0);
		if (alloc > 0 && used >= alloc && (trainer == (size_t)-1 || used < trainer_used)) {
			trainer = i;
			trainer_used = used;
		}
	}
	json_array_foreach(json_object_get(oom, "processes"), i, p) {
		long long used = jpath_int(p, "used_mib", 0);
		if (used <= 0 || i == trainer)
			continue;
		ev(e, "the OOM message names process %lld holding %lld MiB besides the trainer", jpath_int(p, "pid", 0),
		   used);
		foreign = true;
	}
	return foreign;
}

/* An allocation failure before training really started: the environment's signatures, at load. */
static bool alloc_failure_at_load(const struct view *v)
{
	return (sig(v, "zero_bytes_free") || sig(v, "cublas_alloc_failed") || sig(v, "cublas_not_initialized")) &&
	       v->steps == 0 && (!v->oom_phase || phase_is(v, "start", "load"));
}

/* Guide 5: `0 bytes is free` or a CUBLAS allocation failure with a conservative config, before
 * training really started. */
static bool m_zero_free(const struct view *v, json_t *e)
{
	const char *why = NULL;

	if (!sig(v, "zero_bytes_free") && !sig(v, "cublas_alloc_failed") && !sig(v, "cublas_not_initialized"))
		return false;
	if (!v->in->config || !ladder_conservative(v->in->config, &why) || v->steps > 0)
		return false;
	ev_sigs(v, e, ENV_SIGS);
	ev(e, "conservative config (batch 1, checkpointing on, buckets <= 768, frames <= 33)");
	ev(e, "failed before training really started (phase %s, 0 steps)", v->oom_phase ? v->oom_phase : "?");
	return true;
}

/* Issue 16.1: the guide's evidence that memory is not the cause: the allocation failure at load
 * persists on this GPU after the low-memory rungs lowered what the config asks. */
static bool m_alloc_persists(const struct view *v, json_t *e)
{
	if (v->in->alloc_failed_before <= 0 || !alloc_failure_at_load(v))
		return false;
	ev_sigs(v, e, ENV_SIGS);
	ev(e, "attempt %lld failed the same way on this GPU before training, with a config asking no less memory",
	   v->in->alloc_failed_before);
	ev(e, "the low-memory rungs changed nothing: memory is not the cause; the GPU is suspect");
	return true;
}

/* "N MiB", or "unknown" when the log did not give the figure (issue 16.1: never "0 MiB"). */
static const char *mib(const json_t *oom, const char *key, char *buf, size_t n)
{
	json_t *x = json_object_get(oom, key);

	if (!json_is_integer(x))
		return "unknown";
	snprintf(buf, n, "%lld MiB", (long long)json_integer_value(x));
	return buf;
}

static void ev_oom(const struct view *v, json_t *e)
{
	const json_t *oom = json_object_get(v->in->facts, "oom");
	char a[32], b[32], c[32], d[32];

	ev_sigs(v, e, GPU_SIGS);
	ev(e, "oom_phase=%s, %lld step(s) completed in this attempt%s", v->oom_phase ? v->oom_phase : "?", v->steps,
	   jpath_bool(v->in->facts, "last_step_estimated", 0) ? " (the last step is the progress bar's, an estimate)"
							     : "");
	if (json_is_object(oom))
		ev(e, "tried to allocate %s of %s total, %s free, %s allocated by PyTorch",
		   mib(oom, "tried_to_allocate_mib", a, sizeof(a)), mib(oom, "total_capacity_mib", b, sizeof(b)),
		   mib(oom, "free_mib", c, sizeof(c)), mib(oom, "allocated_by_pytorch_mib", d, sizeof(d)));
}

/* A GPU OOM with no phase marker before it (a log cut to its error, another trainer's wording): no
 * phase is invented; the class is the one whose plan walks the whole ladder from its first rung. */
static bool m_phase_unknown(const struct view *v, json_t *e)
{
	if (!v->gpu_sig || (v->oom_phase && strcmp(v->oom_phase, "start")))
		return false;
	ev_oom(v, e);
	ev(e, "no phase marker or trainer frame before the OOM: the phase is unknown, so the whole ladder "
	   "from its first rung (guide 6) rather than a phase's own first rung");
	return true;
}

/* Guide 2A: before the baseline sample or the first step. */
static bool m_load(const struct view *v, json_t *e)
{
	if (!v->gpu_sig || !phase_is(v, "load", NULL))
		return false;
	ev_oom(v, e);
	ev(e, "out of memory while loading, before the baseline sample or the first step");
	return true;
}

/* Guide 2C: the baseline, a periodic or the final sample. */
static bool m_sample(const struct view *v, json_t *e)
{
	if (!v->gpu_sig || !phase_is(v, "baseline_sample", "sample"))
		return false;
	ev_oom(v, e);
	ev(e, "out of memory while generating samples: the preview is too expensive");
	return true;
}

/* Recovered skips before the final OOM: more than the 3-in-a-row run that aborted. */
static bool skipped_before(const struct view *v)
{
	return sig(v, "skipped_batch_oom") > (sig(v, "oom_3_in_row") ? 3 : 0);
}

/* Guide 2B: the first recovery.early_steps steps of this attempt, with a config not known to work, unless a
 * trainer that prints no step counter ran CLASSIFY_LONG_TRAIN_S of training first by its log's timestamps. */
static bool m_early(const struct view *v, json_t *e)
{
	if (!v->gpu_sig || v->steps >= v->in->early_steps || v->in->succeeded_before || skipped_before(v) ||
	    v->trained_s >= CLASSIFY_LONG_TRAIN_S)
		return false;
	ev_oom(v, e);
	ev(e, "out of memory in the first %lld steps of the attempt: a config-caused OOM", v->in->early_steps);
	return true;
}

/* Guide 2D: after training ran for a while (steps, or CLASSIFY_LONG_TRAIN_S by the log's timestamps), after
 * skipped batches, or with a config that worked. */
static bool m_intermittent(const struct view *v, json_t *e)
{
	if (!v->gpu_sig)
		return false;
	ev_oom(v, e);
	if (v->steps >= v->in->early_steps)
		ev(e, "training ran fine for %lld steps first", v->steps);
	if (v->trained_s >= CLASSIFY_LONG_TRAIN_S)
		ev(e, "the log's timestamps show %lld s of training before the OOM", v->trained_s);
	if (skipped_before(v))
		ev(e, "AI Toolkit had already skipped batches for OOM");
	if (v->in->succeeded_before)
		ev(e, "this config succeeded before: it is at the limit");
	return true;
}

static const struct rule {
	const char *cls;
	const char *name;
	const char *guide;
	bool (*matches)(const struct view *v, json_t *evidence);
} RULES[] = {
	{ "cancelled", "cancel_requested", "DESIGN states", m_cancelled },
	{ "env_fault", "trainer_stalled", "guide 5 (a hang)", m_stalled },
	{ "success", "exit_zero", "guide 7", m_success },
	{ "env_fault", "gpu_busy_or_unavailable", "guide 5", m_gpu_busy },
	{ "not_oom", "no_gpu_memory_signature", "guide 1", m_not_oom },
	{ "host_oom", "host_oom_killer", "guide 1 (not GPU memory)", m_host_oom },
	{ "env_fault", "gpu_not_clean_at_start", "guide 5", m_dirty_gpu },
	{ "env_fault", "foreign_processes_in_oom", "guide 5", m_foreign },
	{ "env_fault", "zero_free_conservative_config", "guide 5", m_zero_free },
	{ "env_fault", "alloc_failure_persists", "guide 5, issue 16.1", m_alloc_persists },
	{ "oom_train_early", "oom_phase_unknown", "guide 6 (phase unknown)", m_phase_unknown },
	{ "oom_load", "oom_before_training", "guide 2A", m_load },
	{ "oom_sample", "oom_while_sampling", "guide 2C", m_sample },
	{ "oom_train_early", "oom_in_first_steps", "guide 2B", m_early },
	{ "oom_train_intermittent", "oom_after_stable_training", "guide 2D", m_intermittent },
};

long long classify_steps_in_attempt(const json_t *facts)
{
	json_t *f = json_object_get(facts, "first_step"), *l = json_object_get(facts, "last_step");
	long long n;

	if (json_is_integer(f) && json_is_integer(l)) {
		n = json_integer_value(l) - json_integer_value(f) + 1;
		return n > 0 ? n : 0;
	}
	n = jpath_int(facts, "steps_done", 0);
	return n > 0 ? n : 0;
}

bool classify_gpu_signature(const json_t *facts)
{
	json_t *sigs = json_object_get(facts, "signatures");
	size_t i;

	for (i = 0; GPU_SIGS[i]; i++)
		if (jpath_int(sigs, GPU_SIGS[i], 0) > 0)
			return true;
	return json_is_string(json_object_get(facts, "oom_phase")) || json_is_object(json_object_get(facts, "oom"));
}

json_t *classify_run(const struct classify_in *in)
{
	struct view v = { in, NULL, 0, -1, false, false };
	json_t *out = NULL, *e;
	size_t i;

	v.oom_phase = jpath_str(in->facts, "oom_phase", NULL);
	if (!v.oom_phase)
		v.oom_phase = jpath_str(in->facts, "phase", NULL);
	v.steps = classify_steps_in_attempt(in->facts);
	/* only for a trainer that prints no step counter: a slow video model's first steps can take
	 * minutes each, and its step 8 after 11 minutes is still a config-caused OOM */
	v.trained_s = json_is_integer(json_object_get(in->facts, "last_step")) || v.steps > 0
			      ? -1 : jpath_int(in->facts, "train_s_before_oom", -1);
	v.gpu_sig = classify_gpu_signature(in->facts);
	v.host_sig = signal_no(&v) == 9 || exit_code(&v) == 137;
	for (i = 0; HOST_SIGS[i]; i++)
		v.host_sig = v.host_sig || sig(&v, HOST_SIGS[i]) > 0;
	for (i = 0; i < ARRAY_LEN(RULES); i++) {
		e = json_array();
		if (RULES[i].matches(&v, e)) {
			out = json_pack("{s:s, s:s, s:s, s:o}", "class", RULES[i].cls, "rule", RULES[i].name, "guide",
					RULES[i].guide, "evidence", e);
			break;
		}
		json_decref(e);
	}
	if (!out) /* unreachable: not_oom and the intermittent rule cover every exit */
		out = json_pack("{s:s, s:s, s:s, s:[s]}", "class", "not_oom", "rule", "unclassified", "guide", "-",
				"evidence", "no rule matched");
	return out;
}
