/* Validation of FACTS at the door of rungd; see facts.h. A table of the known keys and their
 * kinds, plus the nested shapes (signatures, oom, GPU state). */
#include "facts.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

enum facts_kind {
	FK_INT_OR_NULL,   /* an integer, or null */
	FK_COUNT_OR_NULL, /* an integer >= 0, or null */
	FK_COUNT,         /* an integer >= 0 */
	FK_BOOL,          /* true or false */
	FK_PHASE_OR_NULL, /* one of the phase names, or null */
	FK_STR_OR_NULL,   /* a string, or null */
	FK_SIGNATURES,    /* an object of name -> count */
	FK_OOM_OR_NULL,   /* the numbers of an OOM message, or null */
	FK_GPU_OR_NULL,   /* a GPUSTATE, or null */
	FK_LINES_OR_NULL, /* an array of strings, or null (its caps are checked by the handler) */
	FK_PEAK_OR_NULL,  /* {"mib", "phase", "step"}: the attempt's memory peak, or null */
};

static const struct facts_key {
	const char *name;
	enum facts_kind kind;
} facts_keys[] = {
	{ "exit_code", FK_INT_OR_NULL },     { "signal", FK_COUNT_OR_NULL },
	{ "cancelled", FK_BOOL },            { "phase", FK_PHASE_OR_NULL },
	{ "oom_phase", FK_PHASE_OR_NULL },   { "first_step", FK_COUNT_OR_NULL },
	{ "last_step", FK_COUNT_OR_NULL },   { "steps_done", FK_COUNT },
	{ "total_steps", FK_COUNT_OR_NULL }, { "signatures", FK_SIGNATURES },
	{ "oom", FK_OOM_OR_NULL },           { "error", FK_STR_OR_NULL },
	{ "gpu_before", FK_GPU_OR_NULL },    { "gpu_after", FK_GPU_OR_NULL },
	{ "duration_ms", FK_COUNT },         { "log_tail", FK_LINES_OR_NULL },
	{ "peak", FK_PEAK_OR_NULL },         { "stalled_s", FK_COUNT_OR_NULL },
	{ "saved_path", FK_STR_OR_NULL },    { "train_s_before_oom", FK_COUNT_OR_NULL },
	{ "preempted", FK_BOOL },            { "train_ms", FK_COUNT_OR_NULL },
	{ "train_steps", FK_COUNT_OR_NULL },
};

static const char *const facts_phases[] = { "start", "load", "baseline_sample", "train", "sample", "save", "done" };
/* The phases a memory peak can be in (the trainer runs: not before it starts, not after it is done). */
static const char *const facts_peak_phases[] = { "load", "baseline_sample", "train", "sample", "save" };

/* Counts and sizes fit comfortably in 2^53, so a JSON number never loses precision on the way. */
#define FACTS_MAX_INT 9007199254740991LL

static int fail(char **field, char **message, char *f, char *m)
{
	*field = f;
	*message = m;
	return -1;
}

static bool is_count(const json_t *v)
{
	return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= FACTS_MAX_INT;
}

static bool is_amount(const json_t *v) /* MiB figures: a number >= 0 */
{
	return (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= FACTS_MAX_INT) ||
	       (json_is_real(v) && json_real_value(v) >= 0 && json_real_value(v) <= (double)FACTS_MAX_INT);
}

static int check_processes(const json_t *procs, const char *at, char **field, char **message)
{
	size_t i;
	json_t *p;

	if (!json_is_array(procs))
		return fail(field, message, xasprintf("%s.processes", at), xstrdup("processes must be an array"));
	json_array_foreach(procs, i, p) {
		if (!json_is_object(p))
			return fail(field, message, xasprintf("%s.processes[%zu]", at, i),
				    xstrdup("each process must be an object {pid, used_mib}"));
		if (json_object_get(p, "pid") && !is_count(json_object_get(p, "pid")))
			return fail(field, message, xasprintf("%s.processes[%zu].pid", at, i),
				    xstrdup("pid must be a non-negative integer"));
		if (json_object_get(p, "used_mib") && !is_amount(json_object_get(p, "used_mib")))
			return fail(field, message, xasprintf("%s.processes[%zu].used_mib", at, i),
				    xstrdup("used_mib must be a non-negative number"));
	}
	return 0;
}

/* An object whose listed number keys are amounts (or null) and whose "processes" is a process list. */
static int check_numbers(const json_t *v, const char *at, const char *const *keys, char **field, char **message)
{
	const json_t *x;

	for (size_t i = 0; keys[i]; i++) {
		x = json_object_get(v, keys[i]);
		if (x && !json_is_null(x) && !is_amount(x))
			return fail(field, message, xasprintf("%s.%s", at, keys[i]),
				    xasprintf("%s must be a non-negative number or null", keys[i]));
	}
	x = json_object_get(v, "processes");
	return x && !json_is_null(x) ? check_processes(x, at, field, message) : 0;
}

/* FACTS.peak: {"mib": count, "phase": a peak phase, "step": count or null}. */
static int check_peak(const json_t *v, const char *at, char **field, char **message)
{
	const json_t *phase = json_object_get(v, "phase"), *step = json_object_get(v, "step");
	size_t i;

	if (!json_is_object(v))
		return fail(field, message, xstrdup(at), xstrdup("peak must be an object {mib, phase, step} or null"));
	if (!is_count(json_object_get(v, "mib")))
		return fail(field, message, xasprintf("%s.mib", at), xstrdup("peak.mib must be a non-negative integer"));
	for (i = 0; json_is_string(phase) && i < ARRAY_LEN(facts_peak_phases); i++)
		if (!strcmp(json_string_value(phase), facts_peak_phases[i]))
			break;
	if (!json_is_string(phase) || i == ARRAY_LEN(facts_peak_phases))
		return fail(field, message, xasprintf("%s.phase", at),
			    xstrdup("peak.phase must be one of load, baseline_sample, train, sample, save"));
	if (step && !json_is_null(step) && !is_count(step))
		return fail(field, message, xasprintf("%s.step", at),
			    xstrdup("peak.step must be a non-negative integer or null"));
	return 0;
}

static int check_key(const struct facts_key *k, const json_t *v, char **field, char **message)
{
	static const char *const oom_keys[] = { "tried_to_allocate_mib", "total_capacity_mib", "free_mib",
						"allocated_by_pytorch_mib", NULL };
	static const char *const gpu_keys[] = { "memory_total_mib", "memory_used_mib", "memory_free_mib", NULL };
	char *at = xasprintf("facts.%s", k->name);
	const char *key;
	json_t *x;
	size_t i;
	int rc = 0;

	switch (k->kind) {
	case FK_INT_OR_NULL:
		if (!json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) >= -FACTS_MAX_INT &&
					  json_integer_value(v) <= FACTS_MAX_INT))
			rc = fail(field, message, at, xasprintf("%s must be an integer or null", k->name));
		break;
	case FK_COUNT_OR_NULL:
		if (!json_is_null(v) && !is_count(v))
			rc = fail(field, message, at, xasprintf("%s must be a non-negative integer or null", k->name));
		break;
	case FK_COUNT:
		if (!is_count(v))
			rc = fail(field, message, at, xasprintf("%s must be a non-negative integer", k->name));
		break;
	case FK_BOOL:
		if (!json_is_boolean(v))
			rc = fail(field, message, at, xasprintf("%s must be true or false", k->name));
		break;
	case FK_PHASE_OR_NULL:
		if (json_is_null(v))
			break;
		for (i = 0; json_is_string(v) && i < ARRAY_LEN(facts_phases); i++)
			if (!strcmp(json_string_value(v), facts_phases[i]))
				break;
		if (!json_is_string(v) || i == ARRAY_LEN(facts_phases))
			rc = fail(field, message, at, xasprintf("%s must be one of start, load, baseline_sample, "
								"train, sample, save, done, or null", k->name));
		break;
	case FK_STR_OR_NULL:
		if (!json_is_null(v) && !json_is_string(v))
			rc = fail(field, message, at, xasprintf("%s must be a string or null", k->name));
		break;
	case FK_SIGNATURES:
		if (!json_is_object(v)) {
			rc = fail(field, message, at, xstrdup("signatures must be an object of name -> count"));
			break;
		}
		json_object_foreach((json_t *)v, key, x) {
			if (!is_count(x)) {
				rc = fail(field, message, xasprintf("%s.%s", at, key),
					  xstrdup("a signature count must be a non-negative integer"));
				break;
			}
		}
		break;
	case FK_OOM_OR_NULL:
	case FK_GPU_OR_NULL:
		if (json_is_null(v))
			break;
		if (!json_is_object(v)) {
			rc = fail(field, message, at, xasprintf("%s must be an object or null", k->name));
			break;
		}
		rc = check_numbers(v, at, k->kind == FK_OOM_OR_NULL ? oom_keys : gpu_keys, field, message);
		break;
	case FK_LINES_OR_NULL:
		if (json_is_null(v))
			break;
		if (!json_is_array(v)) {
			rc = fail(field, message, at, xstrdup("log_tail must be an array of strings"));
			break;
		}
		json_array_foreach(v, i, x) {
			if (!json_is_string(x)) {
				rc = fail(field, message, xasprintf("%s[%zu]", at, i), xstrdup("log lines must be strings"));
				break;
			}
		}
		break;
	case FK_PEAK_OR_NULL:
		if (!json_is_null(v))
			rc = check_peak(v, at, field, message);
		break;
	default:
		abort();
	}
	if (rc == 0 || *field != at)
		free(at);
	return rc;
}

int facts_validate(const json_t *facts, char **field, char **message)
{
	*field = NULL;
	*message = NULL;
	if (!json_is_object(facts))
		return fail(field, message, xstrdup("facts"), xstrdup("facts must be an object"));
	for (size_t i = 0; i < ARRAY_LEN(facts_keys); i++) {
		const json_t *v = json_object_get(facts, facts_keys[i].name);
		if (v && check_key(&facts_keys[i], v, field, message) < 0)
			return -1;
	}
	return 0;
}
