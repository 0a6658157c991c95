/* The recovery policy (docs/DESIGN.md, CTX → DECISION): classify the attempt that ended
 * (recovery/classify.c), then act on its class: walk the job's ladder (recovery/ladder.c), re-run on a
 * clean GPU, re-queue on a bigger GPU, scale back up after a success, or end the job, within the
 * budgets. Pure code; owns the shape of job.recovery_state. */
#include "policy.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atconfig.h"
#include "classify.h"
#include "jpath.h"
#include "ladder.h"
#include "memplan.h"
#include "util.h"

/* What the policy reads from CTX (all borrowed). */
struct pctx {
	const json_t *job, *attempts, *attempt, *facts, *gpu, *fleet;
	const json_t *target;  /* job.target_config */
	const json_t *ran;     /* the config the attempt ran */
	const json_t *rstate;  /* job.recovery_state as stored */
	bool video;
	bool scaling;          /* recovery_state.mode == "scale_up": a good result exists */
	bool succeeded_before; /* this exact config succeeded before */
	bool scale_up;
	long long max_attempts, max_env_retries, max_gpu_seconds, validate_steps, early_steps, quarantine_after;
	long long budget_from; /* recovery_state.budget_from: attempts up to this number were made before a
				* retry (sql/functions/22_job_ops.sql) and spend none of the budgets */
	json_t *profile;       /* issue 12: the memory profile of ctx.memory (owned), NULL without history */
};

/* The decision being built (owned references). */
struct dec {
	json_t *cls;        /* classify_run's object */
	const char *action, *rung, *job_state;
	json_t *changes, *next_config, *rstate, *escalation, *result;
	json_t *exclude_gpus, *exclude_workers;
	long long min_gpu_mib;
	const char *gpu_mark;
	const char *gpu_uuid;  /* borrowed from ctx */
	const json_t *good;    /* the last config that succeeded (borrowed), NULL before the first success */
	char *reason, *next_action;
	json_t *estimate;      /* issue 12: the memory model's view of next_config, NULL without a profile */
};

static long long knob(const json_t *rec, const char *key, long long dflt)
{
	return jpath_int(rec, key, dflt);
}

static void set_reason(struct dec *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(struct dec *d, const char *fmt, ...)
{
	va_list ap;

	free(d->reason);
	va_start(ap, fmt);
	if (vasprintf(&d->reason, fmt, ap) < 0)
		d->reason = xstrdup("(no reason)");
	va_end(ap);
}

static void set_next_action(struct dec *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_next_action(struct dec *d, const char *fmt, ...)
{
	va_list ap;

	free(d->next_action);
	va_start(ap, fmt);
	if (vasprintf(&d->next_action, fmt, ap) < 0)
		d->next_action = xstrdup("");
	va_end(ap);
}

static void escalate(struct dec *d, const char *trigger, const char *summary, const char *recommendation)
{
	json_decref(d->escalation);
	d->escalation = json_pack("{s:s, s:s, s:s}", "trigger", trigger, "summary", summary, "recommendation",
				  recommendation);
}

static const char *cls_name(const struct dec *d)
{
	return jpath_str(d->cls, "class", "?");
}

static const char *short_path(const char *p)
{
	static const char pre[] = "config.process[0].";

	return strncmp(p, pre, sizeof(pre) - 1) ? p : p + sizeof(pre) - 1;
}

/* "train.batch_size 4->1, train.gradient_accumulation 1->4" (heap). */
static char *changes_text(const json_t *changes)
{
	char *s = xstrdup(""), *n, *o, *w;
	size_t i;
	json_t *c;

	json_array_foreach(changes, i, c) {
		o = json_object_get(c, "old") ? json_dumps(json_object_get(c, "old"), JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
		w = json_object_get(c, "new") ? json_dumps(json_object_get(c, "new"), JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
		n = xasprintf("%s%s%s %s->%s", s, i ? ", " : "", short_path(jpath_str(c, "path", "?")), o ? o : "(unset)",
			      w ? w : "(unset)");
		free(o);
		free(w);
		free(s);
		s = n;
	}
	return s;
}

static const char *config_name(const json_t *file)
{
	return jpath_str(file, "config.name", "job");
}

static const json_t *attempt_config(const json_t *a)
{
	const json_t *c = json_object_get(a, "config");

	return json_is_object(c) ? c : NULL;
}

static bool attempt_succeeded(const json_t *a)
{
	return !strcmp(jpath_str(a, "outcome", ""), "succeeded") || !strcmp(jpath_str(a, "class", ""), "success");
}

/* Whether an earlier attempt counts against the budgets: made since the job's last retry, and not
 * stopped by a preemption (its GPU was wanted by the worker's own pool: not the job's doing). */
static bool in_budget(const struct pctx *p, const json_t *a)
{
	return jpath_int(a, "number", 0) > p->budget_from && strcmp(jpath_str(a, "outcome", ""), "preempted") != 0;
}

/* Attempts since the last retry, the one just ended included. */
static long long attempts_since_retry(const struct pctx *p)
{
	size_t i;
	json_t *a;
	long long n = 1;

	json_array_foreach(p->attempts, i, a)
		if (in_budget(p, a))
			n++;
	return n;
}

/* Earlier attempts of class cls since the last retry (the env-fault and host-OOM re-run budgets). */
static long long count_class(const struct pctx *p, const char *cls)
{
	size_t i;
	json_t *a;
	long long n = 0;

	json_array_foreach(p->attempts, i, a)
		if (in_budget(p, a) && !strcmp(jpath_str(a, "class", ""), cls))
			n++;
	return n;
}

/* The config of the last attempt that succeeded (recovery_state.last_good_attempt, else the latest
 * succeeded attempt, else recovery_state.last_good_config), or NULL. */
static const json_t *last_good(const struct pctx *p)
{
	long long want = jpath_int(p->rstate, "last_good_attempt", -1);
	const json_t *found = NULL;
	size_t i;
	json_t *a;

	json_array_foreach(p->attempts, i, a) {
		if (want >= 0 && jpath_int(a, "number", -2) == want && attempt_config(a))
			return attempt_config(a);
		if (attempt_succeeded(a) && attempt_config(a))
			found = attempt_config(a);
	}
	if (found)
		return found;
	found = json_object_get(p->rstate, "last_good_config");
	return json_is_object(found) ? found : NULL;
}

static long long gpu_memory(const struct pctx *p)
{
	long long m = jpath_int(p->attempt, "gpu_memory_mib", 0);

	return m > 0 ? m : jpath_int(p->gpu, "memory_total_mib", 0);
}

/* Exclusions carried from earlier attempts since the last retry: GPUs with env faults, workers with
 * host OOMs, and the memory floor of earlier requeue_bigger decisions. */
static void carry_constraints(const struct pctx *p, struct dec *d)
{
	size_t i;
	json_t *a;

	json_array_foreach(p->attempts, i, a) {
		const char *c = jpath_str(a, "class", "");
		if (!in_budget(p, a)) /* a retry from the target cleared them; one from the current config kept them */
			continue;
		if (!strcmp(c, "env_fault") && json_is_string(json_object_get(a, "gpu_uuid")))
			json_array_append(d->exclude_gpus, json_object_get(a, "gpu_uuid"));
		if (!strcmp(c, "host_oom") && json_object_get(a, "worker_id"))
			json_array_append(d->exclude_workers, json_object_get(a, "worker_id"));
		if (!strcmp(jpath_str(a, "action", ""), "requeue_bigger") &&
		    jpath_int(a, "gpu_memory_mib", 0) + 1 > d->min_gpu_mib)
			d->min_gpu_mib = jpath_int(a, "gpu_memory_mib", 0) + 1;
	}
}

static bool in_array(const json_t *arr, const json_t *v)
{
	size_t i;
	json_t *x;

	json_array_foreach(arr, i, x)
		if (v && json_equal(x, v))
			return true;
	return false;
}

static void add_unique(json_t *arr, json_t *v)
{
	if (!v || json_is_null(v) || in_array(arr, v))
		return;
	json_array_append(arr, v);
}

/* ---- evidence from earlier attempts (issue 16) ---- */

static bool oom_class(const char *c)
{
	return !strncmp(c, "oom_", 4);
}

/* An allocation failure before training (CUBLAS_STATUS_ALLOC_FAILED, `0 bytes is free`) in facts. */
static bool alloc_failure(const json_t *facts)
{
	const char *ph = jpath_str(facts, "oom_phase", jpath_str(facts, "phase", "load"));

	return (jpath_int(facts, "signatures.zero_bytes_free", 0) > 0 ||
		jpath_int(facts, "signatures.cublas_alloc_failed", 0) > 0 ||
		jpath_int(facts, "signatures.cublas_not_initialized", 0) > 0) &&
	       classify_steps_in_attempt(facts) == 0 && (!strcmp(ph, "start") || !strcmp(ph, "load"));
}

/* Issue 16.1: the first earlier attempt on this attempt's GPU that failed with an allocation
 * failure before training and asked no less memory than what just ran (a low-memory rung came in
 * between and changed nothing), or NULL. */
static const json_t *alloc_failure_chain(const struct pctx *p)
{
	const char *gpu = jpath_str(p->attempt, "gpu_uuid", NULL);
	size_t i;
	json_t *a;

	if (!gpu || !alloc_failure(p->facts))
		return NULL;
	json_array_foreach(p->attempts, i, a)
		if (!strcmp(jpath_str(a, "gpu_uuid", ""), gpu) && alloc_failure(json_object_get(a, "facts")) &&
		    ladder_no_larger(p->ran, attempt_config(a)))
			return a;
	return NULL;
}

/* Issue 16.2: an attempt that ran out of GPU memory with a config asking no more than cand, on a
 * GPU no larger than this one, and failed no later than cand's last step: cand is certain to fail.
 * The attempt just ended counts when it failed; an attempt on a GPU this job found at fault, or
 * one that failed to allocate at load (the GPU's signature), proves nothing about memory. Returns
 * the attempt or NULL. */
static const json_t *failed_no_larger(const struct pctx *p, const struct dec *d, const json_t *cand)
{
	long long mem = gpu_memory(p), steps = jpath_int(cand, "config.process[0].train.steps", 0);
	size_t i, n = json_array_size(p->attempts);
	const json_t *a;

	for (i = 0; i <= n; i++) {
		long long am, at;
		a = i < n ? json_array_get(p->attempts, i) : p->attempt;
		if (!oom_class(i < n ? jpath_str(a, "class", "") : cls_name(d)))
			continue;
		if (in_array(d->exclude_gpus, json_object_get(a, "gpu_uuid")) || alloc_failure(json_object_get(a, "facts")))
			continue;
		am = jpath_int(a, "gpu_memory_mib", 0);
		at = jpath_int(json_object_get(a, "facts"), "last_step", 0);
		if ((am > 0 && mem > 0 && am < mem) || !attempt_config(a) || !ladder_no_larger(attempt_config(a), cand))
			continue;
		if (at <= steps || jpath_int(attempt_config(a), "config.process[0].train.steps", 0) <= steps)
			return a;
	}
	return NULL;
}

/* Records value(file) as the ceiling of setting s, proven by attempt a (class cls); inferred when
 * the value was not run again but a no larger run had failed with it. */
static void record_ceiling(struct dec *d, const struct ladder_setting *s, const json_t *file, const json_t *a,
			   const char *cls, bool inferred)
{
	json_t *v = s->value(file), *why;
	long long n = jpath_int(a, "number", 0);

	json_object_set(json_object_get(d->rstate, "ceilings"), s->name, v);
	if (!json_is_object(json_object_get(d->rstate, "ceiling_attempts")))
		json_object_set_new(d->rstate, "ceiling_attempts", json_object());
	if (!json_is_object(json_object_get(d->rstate, "ceiling_why")))
		json_object_set_new(d->rstate, "ceiling_why", json_object());
	json_object_set_new(json_object_get(d->rstate, "ceiling_attempts"), s->name, json_integer(n));
	/* the value itself is the ceiling, shown beside this sentence */
	why = inferred ? json_sprintf("attempt %lld ran out of memory (%s) with it and every other setting no larger: "
				      "not run again", n, cls)
		       : json_sprintf("attempt %lld ran out of memory (%s) with it", n, cls);
	json_object_set_new(json_object_get(d->rstate, "ceiling_why"), s->name, why);
	json_decref(v);
}

/* Appends "text" to *acc, separated by ", " (heap strings; *acc may be NULL). */
static void append(char **acc, const char *text)
{
	char *n = *acc ? xasprintf("%s, %s", *acc, text) : xstrdup(text);

	free(*acc);
	*acc = n;
}

/* A setting's value for people: "1024x768" for a sample size, "20 steps every 250" for a sample
 * rate, else compact JSON (heap). */
static char *compact(const json_t *v)
{
	char *t;

	if (json_is_integer(json_object_get(v, "width")))
		return xasprintf("%lldx%lld", jpath_int(v, "width", 0), jpath_int(v, "height", 0));
	if (json_is_integer(json_object_get(v, "sample_steps")))
		return xasprintf("%lld steps every %lld", jpath_int(v, "sample_steps", 0), jpath_int(v, "sample_every", 0));
	t = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	return t ? t : xstrdup("?");
}

/* The number of the attempt whose run is the job's result. */
static long long good_attempt(const struct pctx *p, const struct dec *d, const json_t *good)
{
	return good == p->ran ? jpath_int(p->attempt, "number", 0) : jpath_int(d->rstate, "last_good_attempt", 0);
}

/* Issue 12: whether setting's ceiling came from the memory model (recovery_state.predicted_ceilings). */
static bool predicted(const struct dec *d, const char *setting)
{
	json_t *name = json_string(setting);
	bool in = in_array(json_object_get(d->rstate, "predicted_ceilings"), name);

	json_decref(name);
	return in;
}

/* Issue 16.3: one entry per setting, what the result achieved against the target and, where it
 * gave something up, why: {"setting", "target", "achieved", "status": "at_target" | "ceiling" |
 * "below_target" | "kept", "ceiling"?, "attempt"?, "why"?}. stop says why scaling up stopped early
 * (NULL: it ran its course). *summary gets the sentence people read (heap). */
static json_t *result_settings(const struct pctx *p, const struct dec *d, const json_t *good, const char *stop,
			       char **summary)
{
	const struct ladder_setting *const *s;
	json_t *out = json_array(), *ceil = json_object_get(d->rstate, "ceilings");
	char *at = NULL, *up = NULL, *below = NULL, *kept = NULL, *t;
	int pass;

	for (pass = 0; pass < 2; pass++)
		for (s = pass ? ladder_kept_settings() : ladder_scale_up_order(p->video); *s; s++) {
			json_t *tv = (*s)->value(p->target), *av = (*s)->value(good), *e;
			const json_t *cv = json_object_get(ceil, (*s)->name);
			char *ta = compact(av), *tt = compact(tv);
			e = json_pack("{s:s, s:o, s:o}", "setting", (*s)->name, "target", tv, "achieved", av);
			if (json_equal(tv, av)) {
				json_object_set_new(e, "status", json_string("at_target"));
				if (!pass)
					append(&at, (*s)->name);
			} else if (pass) {
				json_object_set_new(e, "status", json_string("kept"));
				json_object_set_new(e, "why", json_string("a memory-saving rung stays after a success (guide 7)"));
				t = xasprintf("%s %s (target %s)", (*s)->name, ta, tt);
				append(&kept, t);
				free(t);
			} else if (cv) {
				const char *why = jpath_str(json_object_get(d->rstate, "ceiling_why"), (*s)->name, "ran out of memory");
				long long n = jpath_int(json_object_get(d->rstate, "ceiling_attempts"), (*s)->name, 0);
				char *tc = compact(cv), *by = n > 0 ? xasprintf(", attempt %lld", n) : xstrdup("");
				json_object_set_new(e, "status", json_string("ceiling"));
				json_object_set(e, "ceiling", (json_t *)cv);
				if (json_object_get(json_object_get(d->rstate, "ceiling_attempts"), (*s)->name))
					json_object_set(e, "attempt", json_object_get(json_object_get(d->rstate, "ceiling_attempts"),
										      (*s)->name));
				json_object_set_new(e, "why", json_string(why));
				t = xasprintf("%s %s of %s (%s at %s%s)", (*s)->name, ta, tt,
					      n > 0 || !predicted(d, (*s)->name) ? "ran out of memory" : "predicted not to fit",
					      tc, by);
				append(&up, t);
				free(t);
				free(tc);
				free(by);
			} else {
				const char *why = stop ? stop : "scale-up did not reach it";
				json_object_set_new(e, "status", json_string("below_target"));
				json_object_set_new(e, "why", json_string(why));
				t = xasprintf("%s %s of %s (%s)", (*s)->name, ta, tt, why);
				append(&below, t);
				free(t);
			}
			json_array_append_new(out, e);
			free(ta);
			free(tt);
		}
	*summary = xasprintf("succeeded with %s (attempt %lld)%s%s%s%s%s%s%s%s%s",
			     config_name(good), good_attempt(p, d, good),
			     below ? "" : up ? ": every setting at target or at a proven ceiling" : ": every setting at target",
			     up ? "; given up at a ceiling: " : "", up ? up : "", below ? "; below target: " : "",
			     below ? below : "", kept ? "; memory settings kept: " : "", kept ? kept : "",
			     at ? "; at target: " : "", at ? at : "");
	free(at);
	free(up);
	free(below);
	free(kept);
	return out;
}

/* The job's result: the config that produced the good run (not the scale-up try that OOMed after
 * it), achieved vs target settings, and the story setting by setting (result_settings). "config"
 * is there only where it replaces the server's default, the config of the attempt that just ended:
 * most successes would otherwise carry a copy of the ~3 KB config through the apply statement and
 * into the job row. "reason" replaces the server's (the decision's reason with its next action). */
/* Where the result's trained file is: {"attempt", "path", "worker_id", "gpu_uuid"} of attempt N
 * (the one whose config is the result) when its trainer named the file it saved (FACTS.saved_path,
 * recovery/scan.c); null when it named none. The path is on that worker's host. */
static json_t *result_output(const struct pctx *p, long long n)
{
	const json_t *a = jpath_int(p->attempt, "number", 0) == n ? p->attempt : NULL, *x;
	size_t i;

	json_array_foreach(p->attempts, i, x)
		if (!a && jpath_int(x, "number", 0) == n)
			a = x;
	if (!json_is_string(jpath_get(a, "facts.saved_path")))
		return json_null();
	return json_pack("{s:I, s:O, s:O?, s:O?}", "attempt", (json_int_t)n, "path", jpath_get(a, "facts.saved_path"),
			 "worker_id", json_object_get(a, "worker_id"), "gpu_uuid", json_object_get(a, "gpu_uuid"));
}

static json_t *result_of(const struct pctx *p, const struct dec *d, const json_t *good, const char *stop,
			 char **summary)
{
	json_t *target = ladder_summary(p->target);
	json_t *settings = result_settings(p, d, good, stop, summary);
	json_t *r = json_pack("{s:o, s:o, s:O, s:O, s:s, s:o, s:s, s:s, s:I}", "achieved",
			      json_equal(good, p->target) ? json_deep_copy(target) : ladder_summary(good), "target", target,
			      "ceilings", json_object_get(d->rstate, "ceilings"),
			      "scale_up_done", json_object_get(d->rstate, "scale_up_done"), "config_name",
			      config_name(good), "settings", settings, "summary", *summary, "reason", *summary,
			      "good_attempt", (json_int_t)good_attempt(p, d, good));

	if (r && !json_equal(good, p->ran))
		json_object_set(r, "config", (json_t *)good);
	if (r)
		json_object_set_new(r, "output", result_output(p, good_attempt(p, d, good)));
	return r;
}

static void end_job(struct dec *d, const char *action, const char *state)
{
	d->action = action;
	d->job_state = state;
	d->rung = NULL;
	json_array_clear(d->changes);
	json_decref(d->next_config);
	d->next_config = NULL;
}

/* The job ends succeeded with the last good result (guide 7: the job is done when every setting is
 * at target or ceiling, or when scaling up must stop: stop says why, NULL when it ran its course). */
static void succeed_with(const struct pctx *p, struct dec *d, const json_t *good, const char *stop)
{
	char *summary = NULL;

	end_job(d, "succeed", "succeeded");
	json_decref(d->result);
	json_object_set_new(d->rstate, "mode", json_string("done"));
	d->result = result_of(p, d, good, stop, &summary);
	set_reason(d, "%s", summary);
	set_next_action(d, "none: the job is finished; result lists achieved vs target settings");
	free(summary);
}

/* Budgets (max_attempts, max_gpu_seconds), over the attempts since the last retry: NULL when
 * another attempt may run, else a static why. */
static const char *budget_spent(const struct pctx *p)
{
	long long ms = 0;
	size_t i;
	json_t *a;

	if (attempts_since_retry(p) >= p->max_attempts)
		return "recovery.max_attempts reached";
	json_array_foreach(p->attempts, i, a)
		if (in_budget(p, a))
			ms += jpath_int(a, "duration_ms", jpath_int(json_object_get(a, "facts"), "duration_ms", 0));
	ms += jpath_int(p->attempt, "duration_ms", jpath_int(p->facts, "duration_ms", 0));
	if (p->max_gpu_seconds > 0 && ms >= p->max_gpu_seconds * 1000)
		return "recovery.max_gpu_seconds reached";
	return NULL;
}

/* Budget exhausted: a job with a good result keeps it; otherwise it fails and support hears of it. */
static void out_of_budget(const struct pctx *p, struct dec *d, const char *why)
{
	char *sum;

	if (d->good) {
		succeed_with(p, d, d->good, why);
		return;
	}
	end_job(d, "fail", "failed");
	sum = xasprintf("job %s: %s after %lld attempt(s)%s; last failure %s%s", config_name(p->target), why,
			attempts_since_retry(p), p->budget_from > 0 ? " since its retry" : "", cls_name(d),
			strcmp(cls_name(d), "env_fault") ? "" : ": suspected environment fault (the GPU or worker, not the config)");
	escalate(d, "budget_exhausted", sum, "review the attempts and the config; raise the budget or fix the cause");
	set_reason(d, "%s: %s, job failed", cls_name(d), why);
	set_next_action(d, "support: see the escalation report");
	free(sum);
}

/* Queues next_config (already in d) with action unless a budget is spent. */
static void requeue(const struct pctx *p, struct dec *d, const char *action)
{
	const char *why = budget_spent(p);

	if (why) {
		out_of_budget(p, d, why);
		return;
	}
	d->action = action;
	d->job_state = "queued";
}

/* Issue 12: records value(file) as the ceiling of setting s because the memory model predicts for
 * sure that file fails (pred, memplan_sure_fail): the step is not run; its name is added to
 * recovery_state.predicted_ceilings and the why names the model's evidence. */
static void record_predicted_ceiling(struct dec *d, const struct ladder_setting *s, const json_t *file,
				     const json_t *pred)
{
	json_t *v = s->value(file), *skipped;

	json_object_set(json_object_get(d->rstate, "ceilings"), s->name, v);
	if (!json_is_object(json_object_get(d->rstate, "ceiling_why")))
		json_object_set_new(d->rstate, "ceiling_why", json_object());
	json_object_set_new(json_object_get(d->rstate, "ceiling_why"), s->name,
			    json_sprintf("memory model: predicted not to fit (%s): not run",
					 jpath_str(pred, "evidence", "?")));
	skipped = json_object_get(d->rstate, "predicted_ceilings");
	if (!json_is_array(skipped)) {
		skipped = json_array();
		json_object_set_new(d->rstate, "predicted_ceilings", skipped);
	}
	json_array_append_new(skipped, json_string(s->name));
	json_decref(v);
}

/* Guide 7: the next heavier setting from base (the last good config); ends the job when none is left. */
static void scale_next(const struct pctx *p, struct dec *d, const json_t *base, const char *prefix)
{
	json_t *next, *prev, *changes, *ceil = json_object_get(d->rstate, "ceilings");
	const struct ladder_setting *s;
	bool stuck;
	long long k;
	char *name, *txt;

	if (json_equal(base, p->target)) { /* the target itself ran: nothing to scale up (most successes) */
		succeed_with(p, d, base, NULL);
		return;
	}
	for (prev = NULL;; prev = next) { /* issue 16.2: a step a failed run no larger took is a ceiling */
		const json_t *proof;
		json_t *pred;
		next = json_deep_copy(base);
		changes = json_array();
		s = ladder_scale_up(p->video, next, p->target, ceil, !p->scale_up, changes);
		stuck = s && prev && json_equal(prev, next); /* a ceiling that does not move the step */
		json_decref(prev);
		if (!s || stuck) {
			json_decref(next);
			json_decref(changes);
			succeed_with(p, d, base, !p->scale_up ? "recovery.scale_up is off" :
					     stuck ? "every step left repeats a run that failed" : NULL);
			return;
		}
		proof = failed_no_larger(p, d, next);
		if (proof) {
			record_ceiling(d, s, next, proof, proof == p->attempt ? cls_name(d) : jpath_str(proof, "class", "?"),
				       true);
			json_decref(changes);
			continue;
		}
		pred = p->profile ? memplan_estimate(p->profile, p->video, next) : NULL;
		if (!memplan_sure_fail(pred)) { /* issue 12: only a certain failure is skipped */
			json_decref(d->estimate);
			d->estimate = pred;
			break;
		}
		record_predicted_ceiling(d, s, next, pred);
		json_decref(pred);
		json_decref(changes);
	}
	/* A finished run would be resumed under its old name: each scale-up attempt gets its own. */
	k = jpath_int(d->rstate, "scale_ups", 0) + 1;
	name = xasprintf("%s_s%lld", config_name(p->target), k);
	ladder_set(next, changes, "config.name", json_string(name));
	json_object_set_new(d->rstate, "scale_ups", json_integer(k));
	json_object_set_new(d->rstate, "mode", json_string("scale_up"));
	json_object_set_new(d->rstate, "pending",
			    json_pack("{s:s, s:O?}", "setting", s->name, "value",
				      json_object_get(json_array_get(changes, 0), "new")));
	json_decref(d->changes);
	d->changes = changes;
	json_decref(d->next_config);
	d->next_config = next;
	d->rung = s->name;
	txt = changes_text(changes);
	set_reason(d, "%s%sscale up %s (%s): %s", prefix ? prefix : "", prefix ? "; " : "", s->name, s->guide, txt);
	set_next_action(d, "run %s; on success scale up the next setting, on OOM revert %s and record its ceiling",
			name, s->name);
	free(txt);
	free(name);
	requeue(p, d, "scale_up");
}

static void on_success(const struct pctx *p, struct dec *d)
{
	const char *pending = jpath_str(d->rstate, "pending.setting", NULL);

	if (pending) {
		json_array_append_new(json_object_get(d->rstate, "scale_up_done"), json_string(pending));
		json_object_del(d->rstate, "pending");
	}
	json_object_set_new(d->rstate, "last_good_attempt", json_integer(jpath_int(p->attempt, "number", 0)));
	d->good = p->ran;
	scale_next(p, d, p->ran, "success");
}

static void on_not_oom(const struct pctx *p, struct dec *d)
{
	const char *err = jpath_str(p->facts, "error", NULL);
	if (d->good) {
		succeed_with(p, d, d->good, "scale-up stopped: the attempt failed for a reason other than GPU memory");
		return;
	}
	end_job(d, "fail", "failed");
	set_reason(d, "not_oom: %s; not a GPU-memory failure, the same config is not re-run",
		   err ? err : "the trainer failed without an OOM signature");
	set_next_action(d, "fix the cause named in the log and submit again");
}

/* Guide 1: host memory is not VRAM: one re-run elsewhere, then escalate. */
static void on_host_oom(const struct pctx *p, struct dec *d)
{
	char *sum;

	if (count_class(p, "host_oom") >= 1) {
		sum = xasprintf("job %s was killed for host memory twice (attempts on different workers)",
				config_name(p->target));
		escalate(d, "host_oom_repeated", sum,
			 "give the workers more host RAM or swap, or lower host-side caching (cache_latents_to_disk)");
		free(sum);
		if (d->good) {
			succeed_with(p, d, d->good, "scale-up stopped: host out of memory twice");
			return;
		}
		end_job(d, "fail", "failed");
		set_reason(d, "host_oom: killed for host memory again; job failed and escalated");
		set_next_action(d, "support: see the escalation report");
		return;
	}
	add_unique(d->exclude_workers, json_object_get(p->attempt, "worker_id"));
	json_decref(d->next_config);
	d->next_config = json_deep_copy(p->ran);
	set_reason(d, "host_oom: killed for host memory; re-run once, unchanged, on another worker");
	set_next_action(d, "re-run on another worker; a second host OOM escalates host_oom_repeated");
	requeue(p, d, "retry_clean");
}

/* A stalled trainer (rule trainer_stalled) whose GPU nvidia-smi showed with no process left after
 * the kill: the hang was the trainer's (a deadlocked data loader, a collective), not the GPU's. */
static bool stalled_clean(const struct pctx *p, const struct dec *d)
{
	const json_t *after = json_object_get(p->facts, "gpu_after"), *procs = json_object_get(after, "processes");

	return !strcmp(jpath_str(d->cls, "rule", ""), "trainer_stalled") && json_is_object(after) && json_is_array(procs) &&
	       json_array_size(procs) == 0;
}

/* Guide 5: the GPU or worker, not the config: re-run on a clean one, mark the GPU, escalate a regression.
 * A trainer that stalled and left its GPU clean re-runs elsewhere without a mark on the GPU. */
static void on_env_fault(const struct pctx *p, struct dec *d)
{
	long long in_window = jpath_int(p->gpu, "env_faults_in_window", 0);
	bool clean = stalled_clean(p, d);
	bool quarantine = !clean && in_window + 1 >= p->quarantine_after;
	bool host_wide = jpath_int(p->facts, "signatures.cublas_not_initialized", 0) > 0;
	bool regression = p->succeeded_before && classify_steps_in_attempt(p->facts) == 0;
	/* issue 16.1: the low-memory rungs spent on this GPU were answers to a fault, not to memory */
	const json_t *chain = alloc_failure_chain(p);
	const char *uuid = jpath_str(p->attempt, "gpu_uuid", jpath_str(p->gpu, "uuid", NULL));
	char *sum;

	d->gpu_mark = clean ? NULL : quarantine ? "quarantine" : "suspect";
	d->gpu_uuid = uuid;
	if (quarantine) {
		sum = xasprintf("GPU %s had %lld environment fault(s) in the window: quarantined", uuid ? uuid : "?",
				in_window + 1);
		escalate(d, "gpu_quarantined", sum, "inspect the GPU and its host (nvidia-smi, dmesg/Xid), then release it");
		free(sum);
	}
	if (regression) {
		sum = xasprintf("job %s: a conservative config that succeeded before now fails at once on GPU %s%s",
				config_name(p->target), uuid ? uuid : "?", quarantine ? " (GPU quarantined)" : "");
		escalate(d, "env_fault_regression", sum,
			 "check the worker and GPU (stale processes, driver, Xid errors); the config is not the cause");
		free(sum);
	}
	if (uuid)
		add_unique(d->exclude_gpus, json_object_get(p->attempt, "gpu_uuid") ? json_object_get(p->attempt, "gpu_uuid")
										   : json_object_get(p->gpu, "uuid"));
	if (host_wide)
		add_unique(d->exclude_workers, json_object_get(p->attempt, "worker_id"));
	if (count_class(p, "env_fault") + 1 > p->max_env_retries) {
		out_of_budget(p, d, "recovery.max_env_retries reached");
		return;
	}
	json_decref(d->next_config);
	d->next_config = json_deep_copy(chain ? attempt_config(chain) : p->ran);
	if (chain)
		ladder_diff(p->ran, d->next_config, d->changes);
	set_reason(d, "env_fault (%s): suspected environment fault; %s re-run on a clean GPU%s; GPU marked %s",
		   jpath_str(d->cls, "rule", "?"),
		   chain && json_array_size(d->changes) ? "the config of the first attempt that failed there is"
							 : "the same config is",
		   host_wide ? " on another worker" : "", d->gpu_mark ? d->gpu_mark : "(none: it was left clean)");
	set_next_action(d, "re-run %s away from GPU %s; up to %lld environment re-run(s)",
			json_array_size(d->changes) ? "with the rungs spent there given back" : "unchanged", uuid ? uuid : "?",
			p->max_env_retries);
	requeue(p, d, "retry_clean");
}

/* Issue 16.1: at the latest before the ladder is declared exhausted, an allocation failure at load
 * is taken for the GPU's fault: the verdict becomes env_fault and the job tries a clean GPU. */
static void env_fault_instead(const struct pctx *p, struct dec *d)
{
	json_t *ev = json_deep_copy(json_object_get(d->cls, "evidence"));

	json_array_append_new(ev, json_string("every rung of the ladder is spent and allocations still fail before "
					      "training: a clean GPU is tried before the ladder is declared exhausted"));
	json_decref(d->cls);
	d->cls = json_pack("{s:s, s:s, s:s, s:o}", "class", "env_fault", "rule", "alloc_failure_at_ladder_end", "guide",
			   "guide 5, issue 16.1", "evidence", ev);
	json_array_clear(d->changes);
	on_env_fault(p, d);
}

/* Every rung exhausted: a bigger GPU class if the fleet has one, else support (guide 6). */
static void on_exhausted(const struct pctx *p, struct dec *d)
{
	long long mem = gpu_memory(p), fleet = jpath_int(p->fleet, "max_gpu_memory_mib", 0);
	bool env = alloc_failure(p->facts);
	char *sum;

	if (env && count_class(p, "env_fault") == 0) {
		env_fault_instead(p, d);
		return;
	}
	if (fleet > mem && mem > 0 && !env) {
		if (mem + 1 > d->min_gpu_mib)
			d->min_gpu_mib = mem + 1;
		json_decref(d->next_config);
		d->next_config = json_deep_copy(p->target);
		ladder_diff(p->ran, p->target, d->changes);
		json_object_set_new(d->rstate, "mode", json_string("recover"));
		json_object_set_new(d->rstate, "ladder_position", json_integer(-1));
		json_object_set_new(d->rstate, "ceilings", json_object());
		set_reason(d, "%s: every rung of the ladder is spent on a %lld MiB GPU; re-queue the target config for a "
			      "GPU with at least %lld MiB", cls_name(d), mem, d->min_gpu_mib);
		set_next_action(d, "run the target config on a bigger GPU; the ladder starts again there if needed");
		requeue(p, d, "requeue_bigger");
		return;
	}
	end_job(d, "fail", "failed");
	if (env) {
		sum = xasprintf("job %s: suspected environment fault: allocations still fail before training "
				"(CUBLAS_STATUS_ALLOC_FAILED or 0 bytes free) with every rung of the ladder applied, "
				"on clean GPUs too; memory is not shown to be the cause", config_name(p->target));
		escalate(d, "ladder_exhausted", sum,
			 "check the workers and GPUs (driver, Xid errors, stale processes, CUDA install) before the config");
		set_reason(d, "%s: ladder exhausted with allocation failures at load: suspected environment fault; "
			      "job failed", cls_name(d));
		free(sum);
		set_next_action(d, "support: see the escalation report");
		return;
	}
	sum = xasprintf("job %s: still out of memory (%s) with every rung of the ladder applied on a %lld MiB GPU; "
			"cannot fit this GPU class", config_name(p->target), cls_name(d), mem);
	escalate(d, "ladder_exhausted", sum,
		 "train on a GPU with more memory, or reduce the dataset resolution/frames below the ladder floors");
	free(sum);
	set_reason(d, "%s: ladder exhausted, cannot fit this GPU class; job failed", cls_name(d));
	set_next_action(d, "support: see the escalation report");
}

/* Prefixes the decision's reason with text (heap reason replaced). */
static void reason_prefix(struct dec *d, const char *text)
{
	char *old = d->reason;

	d->reason = NULL;
	set_reason(d, "%s; %s", text, old ? old : "");
	free(old);
}

/* Issue 12: with a memory profile, the rungs predicted to fail are skipped and the first rung or
 * smallest combination of rungs in ladder order that is not predicted to fail is taken at once
 * (recovery/memplan.c). Every rung predicted to fail for sure: the ladder is spent, as on_exhausted.
 * False when no rung is left (the caller goes on as without a model). The class is never changed. */
static bool on_oom_model(const struct pctx *p, struct dec *d)
{
	const struct ladder_rung *last = NULL;
	json_t *plan = memplan_descend(p->profile, cls_name(d), p->video, p->ran, &last), *rungs, *skipped;
	char *txt, *names, *skip, *pre;
	size_t i, n;

	if (!plan)
		return false;
	json_decref(d->estimate);
	d->estimate = json_incref(json_object_get(plan, "estimate"));
	rungs = json_object_get(plan, "rungs");
	skipped = json_object_get(plan, "skipped");
	if (json_is_object(d->estimate)) {
		json_object_set(d->estimate, "rungs", rungs);
		json_object_set(d->estimate, "skipped", skipped);
	}
	if (jpath_bool(plan, "exhausted", 0)) {
		on_exhausted(p, d);
		pre = xasprintf("memory model: every rung of the ladder predicted not to fit (%s)",
				jpath_str(plan, "estimate.evidence", "?"));
		reason_prefix(d, pre);
		free(pre);
		json_decref(plan);
		return true;
	}
	names = xstrdup("");
	n = json_array_size(rungs);
	for (i = 0; i < n; i++) {
		txt = xasprintf("%s%s%s", names, i ? "+" : "", json_string_value(json_array_get(rungs, i)));
		free(names);
		names = txt;
	}
	skip = json_array_size(skipped) ? xasprintf("; %zu rung(s) before it predicted not to fit", json_array_size(skipped))
					 : xstrdup("");
	json_decref(d->next_config);
	d->next_config = json_deep_copy(json_object_get(plan, "config"));
	json_array_extend(d->changes, json_object_get(plan, "changes"));
	if (p->validate_steps > 0)
		ladder_cap_steps(d->next_config, p->validate_steps, d->changes);
	d->rung = last->name;
	json_object_set_new(d->rstate, "mode", json_string("recover"));
	json_object_set_new(d->rstate, "ladder_position", json_integer(jpath_int(plan, "position", -1)));
	txt = changes_text(d->changes);
	set_reason(d, "%s: rung%s %s (%s): %s; memory model: %s%s", cls_name(d), n > 1 ? "s" : "", names,
		   jpath_str(plan, "guide", "?"), txt, jpath_str(plan, "estimate.evidence", "no estimate"), skip);
	set_next_action(d, "retry with %s; if it OOMs again: the next rung not predicted to fail", names);
	free(txt);
	free(names);
	free(skip);
	json_decref(plan);
	requeue(p, d, "retry");
	return true;
}

/* Guide 2 + 6: the plan of the failure class, one rung per attempt; the name is kept so AI Toolkit
 * resumes from its checkpoint. */
static void on_oom_recover(const struct pctx *p, struct dec *d)
{
	json_t *next, *probe, *pch;
	const struct ladder_rung *r, *after;
	char *txt;

	if (p->profile && on_oom_model(p, d))
		return;
	next = json_deep_copy(p->ran);
	r = ladder_step(cls_name(d), p->video, next, d->changes);
	if (!r) {
		json_decref(next);
		on_exhausted(p, d);
		return;
	}
	if (p->validate_steps > 0)
		ladder_cap_steps(next, p->validate_steps, d->changes);
	json_decref(d->next_config);
	d->next_config = next;
	d->rung = r->name;
	json_object_set_new(d->rstate, "mode", json_string("recover"));
	json_object_set_new(d->rstate, "ladder_position", json_integer(ladder_position(r, p->video)));
	probe = json_deep_copy(next);
	pch = json_array();
	after = ladder_step(cls_name(d), p->video, probe, pch);
	txt = changes_text(d->changes);
	set_reason(d, "%s: rung %s (%s): %s", cls_name(d), r->name, r->guide, txt);
	if (after)
		set_next_action(d, "retry with %s; if it OOMs the same way again: rung %s", r->name, after->name);
	else
		set_next_action(d, "retry with %s; it is the last rung for this failure: then a bigger GPU or support",
				r->name);
	free(txt);
	json_decref(probe);
	json_decref(pch);
	requeue(p, d, "retry");
}

/* Guide 7: an OOM on a scale-up attempt reverts that one change and records its ceiling. */
static void on_oom_scaling(const struct pctx *p, struct dec *d, const json_t *good)
{
	const char *setting = jpath_str(d->rstate, "pending.setting", NULL);
	const struct ladder_setting *s = ladder_setting_named(setting);
	char *prefix;

	if (s) {
		record_ceiling(d, s, p->ran, p->attempt, cls_name(d), false);
	} else if (setting) {
		json_t *v = jpath_get(d->rstate, "pending.value");
		json_object_set(json_object_get(d->rstate, "ceilings"), setting, v ? v : json_true());
	}
	prefix = xasprintf("%s on scale-up: reverted %s (ceiling recorded)", cls_name(d), setting ? setting : "?");
	json_object_del(d->rstate, "pending");
	scale_next(p, d, good, prefix);
	free(prefix);
}

static int read_ctx(const json_t *ctx, struct pctx *p, char **err)
{
	const json_t *rec;
	size_t i;
	json_t *a;

	memset(p, 0, sizeof(*p));
	p->job = json_object_get(ctx, "job");
	p->attempt = json_object_get(ctx, "attempt");
	p->facts = json_object_get(p->attempt, "facts");
	p->attempts = json_object_get(ctx, "attempts");
	p->gpu = json_object_get(ctx, "gpu");
	p->fleet = json_object_get(ctx, "fleet");
	p->target = json_object_get(p->job, "target_config");
	p->ran = attempt_config(p->attempt) ? attempt_config(p->attempt) : json_object_get(p->job, "current_config");
	p->rstate = json_object_get(p->job, "recovery_state");
	if (!json_is_object(ctx) || !json_is_object(p->job)) {
		*err = xstrdup("ctx.job must be an object");
		return -1;
	}
	if (!json_is_object(p->target)) {
		*err = xstrdup("ctx.job.target_config must be an object");
		return -1;
	}
	if (!json_is_object(p->attempt) || !json_is_object(p->facts)) {
		*err = xstrdup("ctx.attempt.facts must be an object");
		return -1;
	}
	if (!json_is_object(p->ran)) {
		*err = xstrdup("ctx.attempt.config (or ctx.job.current_config) must be an object");
		return -1;
	}
	if (p->attempts && !json_is_array(p->attempts)) {
		*err = xstrdup("ctx.attempts must be an array");
		return -1;
	}
	p->video = !strcmp(jpath_str(p->job, "kind", atconfig_kind(p->target)), "video");
	rec = json_object_get(p->job, "recovery");
	p->scale_up = jpath_bool(rec, "scale_up", 1);
	p->max_attempts = knob(rec, "max_attempts", 10);
	p->max_env_retries = knob(rec, "max_env_retries", 3);
	p->max_gpu_seconds = knob(rec, "max_gpu_seconds", 0);
	p->validate_steps = knob(rec, "validate_steps", 0);
	p->early_steps = knob(rec, "early_steps", 10);
	p->quarantine_after = knob(rec, "quarantine_after", 2);
	p->budget_from = jpath_int(p->rstate, "budget_from", 0);
	p->scaling = !strcmp(jpath_str(p->rstate, "mode", "recover"), "scale_up");
	p->succeeded_before = jpath_bool(ctx, "config_succeeded_before", 0);
	json_array_foreach(p->attempts, i, a)
		if (attempt_succeeded(a) && attempt_config(a) && json_equal(attempt_config(a), p->ran))
			p->succeeded_before = true;
	return 0;
}

static json_t *new_rstate(const json_t *old)
{
	json_t *s = json_is_object(old) ? json_deep_copy(old) : json_object();

	if (!json_is_string(json_object_get(s, "mode")))
		json_object_set_new(s, "mode", json_string("recover"));
	if (!json_is_integer(json_object_get(s, "ladder_position")))
		json_object_set_new(s, "ladder_position", json_integer(-1));
	if (!json_is_object(json_object_get(s, "ceilings")))
		json_object_set_new(s, "ceilings", json_object());
	if (!json_is_array(json_object_get(s, "scale_up_done")))
		json_object_set_new(s, "scale_up_done", json_array());
	return s;
}

static json_t *build(struct dec *d)
{
	json_t *out;

	json_object_set_new(d->rstate, "next_action", json_string(d->next_action ? d->next_action : ""));
	out = json_pack("{s:O, s:O, s:O, s:s, s:s?, s:O, s:O?, s:s, s:s++, s:{s:O, s:O, s:o}, s:o, s:O?, s:O}",
			"class", json_object_get(d->cls, "class"), "rule", json_object_get(d->cls, "rule"), "evidence",
			json_object_get(d->cls, "evidence"), "action", d->action, "rung", d->rung, "changes", d->changes,
			"next_config", d->next_config, "job_state", d->job_state, "reason", d->reason ? d->reason : "",
			"; next_action: ", d->next_action ? d->next_action : "-", "constraints", "exclude_gpus",
			d->exclude_gpus, "exclude_workers", d->exclude_workers, "min_gpu_memory_mib",
			d->min_gpu_mib > 0 ? json_integer(d->min_gpu_mib) : json_null(), "gpu",
			d->gpu_mark ? json_pack("{s:s?, s:s}", "uuid", d->gpu_uuid, "mark", d->gpu_mark) : json_null(),
			"escalation", d->escalation, "recovery_state", d->rstate);
	if (out && d->result)
		json_object_set(out, "result", d->result);
	return out;
}

static void resolve_config(json_t *holder, const char *key, json_t *target)
{
	if (json_is_object(holder) && !json_is_object(json_object_get(holder, key)))
		json_object_set(holder, key, target);
}

void policy_ctx_resolve(json_t *ctx)
{
	json_t *job = json_object_get(ctx, "job"), *target = json_object_get(job, "target_config"), *a;
	size_t i;

	if (!json_is_object(target))
		return;
	resolve_config(job, "current_config", target);
	resolve_config(json_object_get(ctx, "attempt"), "config", target);
	json_array_foreach(json_object_get(ctx, "attempts"), i, a)
		resolve_config(a, "config", target);
}

json_t *policy_decide(const json_t *ctx, char **err)
{
	struct pctx p;
	struct dec d;
	struct classify_in in;
	const char *c;
	const json_t *alloc;
	json_t *out = NULL;

	*err = NULL;
	memset(&d, 0, sizeof(d));
	if (read_ctx(ctx, &p, err) < 0)
		return NULL;
	in.facts = p.facts;
	in.config = p.ran;
	in.early_steps = p.early_steps;
	in.succeeded_before = p.succeeded_before;
	alloc = alloc_failure_chain(&p);
	in.alloc_failed_before = alloc ? jpath_int(alloc, "number", 0) : 0;
	d.cls = classify_run(&in);
	d.changes = json_array();
	d.rstate = new_rstate(p.rstate);
	d.exclude_gpus = json_array();
	d.exclude_workers = json_array();
	d.action = "fail";
	d.job_state = "failed";
	d.good = p.scaling ? last_good(&p) : NULL;
	carry_constraints(&p, &d);
	c = cls_name(&d);
	p.profile = memplan_profile(ctx, c);

	if (!strcmp(c, "cancelled")) {
		end_job(&d, "fail", "cancelled");
		set_reason(&d, "cancelled on request");
		set_next_action(&d, "none");
	} else if (!strcmp(c, "success")) {
		on_success(&p, &d);
	} else if (!strcmp(c, "not_oom")) {
		on_not_oom(&p, &d);
	} else if (!strcmp(c, "host_oom")) {
		on_host_oom(&p, &d);
	} else if (!strcmp(c, "env_fault")) {
		on_env_fault(&p, &d);
	} else if (d.good) {
		on_oom_scaling(&p, &d, d.good);
	} else {
		on_oom_recover(&p, &d);
	}
	if (p.profile && d.next_config && !d.estimate)
		d.estimate = memplan_estimate(p.profile, p.video, d.next_config);
	out = build(&d);
	if (out && d.estimate)
		json_object_set(out, "estimate", d.estimate);
	if (!out)
		*err = xstrdup("cannot build the decision");
	json_decref(d.cls);
	json_decref(d.changes);
	json_decref(d.next_config);
	json_decref(d.rstate);
	json_decref(d.escalation);
	json_decref(d.result);
	json_decref(d.exclude_gpus);
	json_decref(d.exclude_workers);
	json_decref(d.estimate);
	json_decref(p.profile);
	free(d.reason);
	free(d.next_action);
	return out;
}

json_t *policy_classify(const json_t *facts, const json_t *config)
{
	struct classify_in in = { facts, config, 10, false, 0 };
	json_t *out = classify_run(&in), *f = json_is_object(facts) ? (json_t *)facts : NULL;
	json_t *phase = json_object_get(f, "oom_phase");

	if (!json_is_string(phase))
		phase = json_object_get(f, "phase");
	json_object_set(out, "phase", phase ? phase : json_null());
	json_object_set(out, "step", json_object_get(f, "last_step") ? json_object_get(f, "last_step") : json_null());
	json_object_set_new(out, "signatures", json_object_get(f, "signatures") ?
				json_deep_copy(json_object_get(f, "signatures")) : json_object());
	json_object_set(out, "oom", json_object_get(f, "oom") ? json_object_get(f, "oom") : json_null());
	json_object_del(out, "guide");
	return out;
}

json_t *policy_initial(const json_t *ctx, char **err)
{
	const json_t *job = json_object_get(ctx, "job"), *target = json_object_get(job, "target_config");
	const json_t *cur = json_object_get(job, "current_config");
	json_t *profile = NULL, *plan = NULL, *est = NULL, *out;
	long long gpu, fleet;
	bool video;
	char *reason;

	*err = NULL;
	if (!json_is_object(target)) {
		*err = xstrdup("ctx.job.target_config must be an object");
		return NULL;
	}
	cur = json_is_object(cur) ? cur : target;
	video = !strcmp(jpath_str(job, "kind", atconfig_kind(target)), "video");
	profile = memplan_profile(ctx, NULL);
	plan = profile ? memplan_initial(profile, video, cur) : NULL;
	gpu = jpath_int(ctx, "gpu.memory_total_mib", 0);
	fleet = jpath_int(ctx, "fleet.max_gpu_memory_mib", 0);
	if (plan && jpath_bool(plan, "exhausted", 0) && gpu > 0 && fleet > gpu) {
		/* As on_exhausted after a real OOM, without spending the attempt: a bigger GPU class. */
		reason = xasprintf("memory model: every rung of the ladder is predicted not to fit this %lld MiB GPU (%s); "
				   "start on a GPU with at least %lld MiB", gpu, jpath_str(plan, "estimate.evidence", "?"), gpu + 1);
		out = json_pack("{s:s, s:n, s:[], s:[], s:O, s:{s:I}, s:s}", "action", "requeue_bigger", "next_config",
				"changes", "rungs", "estimate", json_object_get(plan, "estimate"), "constraints",
				"min_gpu_memory_mib", (json_int_t)(gpu + 1), "reason", reason);
	} else if (!plan || jpath_bool(plan, "exhausted", 0)) {
		est = memplan_estimate(profile, video, cur);
		reason = xasprintf("start as submitted%s%s", est ? "; memory model: " : " (no memory history for this arch)",
				   est ? jpath_str(est, "evidence", "") : "");
		out = json_pack("{s:s, s:n, s:[], s:[], s:o, s:s}", "action", "as_is", "next_config", "changes", "rungs",
				"estimate", est ? est : json_null(), "reason", reason);
	} else {
		json_t *next = json_deep_copy(json_object_get(plan, "config")), *changes = json_deep_copy(json_object_get(plan, "changes"));
		long long cap = jpath_int(job, "recovery.validate_steps", 0);

		if (cap > 0)
			ladder_cap_steps(next, cap, changes);
		reason = xasprintf("memory model: the config is predicted not to fit this GPU; start with %zu rung(s) applied (%s)",
				   json_array_size(json_object_get(plan, "rungs")), jpath_str(plan, "estimate.evidence", "?"));
		out = json_pack("{s:s, s:o, s:o, s:O, s:O, s:O, s:s}", "action", "start_lower", "next_config", next, "changes",
				changes, "rungs", json_object_get(plan, "rungs"), "skipped", json_object_get(plan, "skipped"),
				"estimate", json_object_get(plan, "estimate"), "reason", reason);
	}
	free(reason);
	json_decref(plan);
	json_decref(profile);
	return out;
}
