/* rungctl's account of a job (see story.h): attempt lines with the config change against the
 * attempt before, and a finished job's verdict setting by setting. The settings table maps the
 * keys of result.target/achieved (recovery/ladder.c's ladder_summary) to the scale-up setting whose
 * ceiling covers them; anything else in the result is shown by its own key. When the policy gives
 * its own account (result.settings, result.good_attempt), that is what is told. A job whose first
 * attempt started below its target (issue 12, recovery_state.started_lower) says so and why, and one
 * whose first claim was handed back for a bigger GPU (recovery_state.started_bigger) says that. */
#include "story.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobtext.h"
#include "jsondiff.h"
#include "table.h"
#include "util.h"

enum story_kind {
	STORY_SCALE,    /* scale-up restores it after a success (guide 7) */
	STORY_ACCUM,    /* moves with batch_size so batch x accumulation stays the target's */
	STORY_MEMORY,   /* a memory-saving switch: stays after a success (guide 7) */
};

static const struct story_setting {
	const char *key;        /* key of result.target and result.achieved */
	const char *setting;    /* key of result.ceilings (the scale-up setting), NULL for none */
	enum story_kind kind;
} SETTINGS[] = {
	{ "steps", "steps", STORY_SCALE },
	{ "resolution", "bucket", STORY_SCALE },
	{ "num_frames", "num_frames", STORY_SCALE },
	{ "sampling", "sampling_on", STORY_SCALE },
	{ "sample_width", "sample_size", STORY_SCALE },
	{ "sample_height", "sample_size", STORY_SCALE },
	{ "sample_steps", "sample_rate", STORY_SCALE },
	{ "sample_every", "sample_rate", STORY_SCALE },
	{ "batch_size", "batch_size", STORY_SCALE },
	{ "gradient_accumulation", "batch_size", STORY_ACCUM },
	{ "gradient_checkpointing", NULL, STORY_MEMORY },
	{ "low_vram", NULL, STORY_MEMORY },
	{ "quantize", NULL, STORY_MEMORY },
	{ "layer_offloading", NULL, STORY_MEMORY },
};

static const char *str_of(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static bool same(const json_t *a, const json_t *b)
{
	if (json_is_number(a) && json_is_number(b))
		return json_number_value(a) == json_number_value(b);
	return a && b && json_equal(a, b);
}

static bool terminal(const char *st)
{
	return st && (!strcmp(st, "succeeded") || !strcmp(st, "failed") || !strcmp(st, "cancelled"));
}

const json_t *story_next_config(const json_t *job, const json_t *attempts, size_t i, bool *known)
{
	const json_t *next = json_array_get(attempts, i + 1);
	const char *st = str_of(job, "state");

	*known = true;
	if (next)
		return json_object_get(next, "config");
	if (terminal(st))
		return NULL;
	if (st && !strcmp(st, "queued") && json_integer_value(json_object_get(job, "attempts")) == (json_int_t)(i + 1))
		return json_object_get(job, "current_config");
	*known = false;
	return NULL;
}

/* Appends to *s (heap) with printf formatting. */
static void cat(char **s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cat(char **s, const char *fmt, ...)
{
	va_list ap;
	char *add = NULL;

	va_start(ap, fmt);
	if (vasprintf(&add, fmt, ap) < 0)
		add = NULL;
	va_end(ap);
	if (!add)
		return;
	char *n = xasprintf("%s%s", *s ? *s : "", add);
	free(add);
	free(*s);
	*s = n;
}

char *story_attempt_text(const json_t *a, const json_t *next)
{
	char *out = NULL;
	char *num = table_cell(json_object_get(a, "number")), *state = table_cell(json_object_get(a, "state"));
	char *outcome = table_cell(json_object_get(a, "outcome")), *cls = table_cell(json_object_get(a, "class"));
	char *act = table_cell(json_object_get(a, "action")), *rung = table_cell(json_object_get(a, "rung"));

	cat(&out, "attempt %s %s: outcome %s, class %s, action %s, rung %s\n", num, state, outcome, cls, act, rung);
	if (next) {
		json_t *d = jsondiff_paths(json_object_get(a, "config"), next);
		char *txt = jsondiff_format(d);
		for (char *save = NULL, *l = strtok_r(txt, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
			cat(&out, "  config change: %s\n", l);
		free(txt);
		json_decref(d);
	}
	free(num);
	free(state);
	free(outcome);
	free(cls);
	free(act);
	free(rung);
	return out;
}

/* The attempt numbered n in attempts (borrowed) or NULL. */
static const json_t *attempt_numbered(const json_t *attempts, long long n)
{
	const json_t *a;
	size_t i;

	json_array_foreach(attempts, i, a)
		if (json_integer_value(json_object_get(a, "number")) == n)
			return a;
	return NULL;
}

char *story_start_text(const json_t *job, const json_t *attempts)
{
	const json_t *sl = json_object_get(json_object_get(job, "recovery_state"), "started_lower"), *a, *c;
	long long n = json_integer_value(json_object_get(sl, "attempt"));
	char *out = NULL, *txt = NULL;
	size_t i;

	if (!json_is_object(sl))
		return NULL;
	cat(&out, "attempt %lld started below the target: %s\n", n > 0 ? n : 1,
	    str_of(sl, "reason") ? str_of(sl, "reason") : "memory model: the target is predicted not to fit this GPU");
	a = attempt_numbered(attempts, n > 0 ? n : 1);
	if (a && json_is_object(json_object_get(a, "config")) && json_is_object(json_object_get(job, "target_config"))) {
		json_t *d = jsondiff_paths(json_object_get(job, "target_config"), json_object_get(a, "config"));
		txt = jsondiff_format(d);
		json_decref(d);
	} else {
		json_array_foreach(json_object_get(sl, "changes"), i, c) {
			char *o = table_cell(json_object_get(c, "old")), *nw = table_cell(json_object_get(c, "new"));
			cat(&txt, "%s: %s -> %s\n", str_of(c, "path") ? str_of(c, "path") : "?", o, nw);
			free(o);
			free(nw);
		}
	}
	for (char *save = NULL, *l = txt ? strtok_r(txt, "\n", &save) : NULL; l; l = strtok_r(NULL, "\n", &save))
		cat(&out, "  config change: %s\n", l);
	free(txt);
	return out;
}

/* The verdict's line for a job that started below its target, or NULL. Heap string. */
static char *started_lower_line(const json_t *job)
{
	const json_t *sl = json_object_get(json_object_get(job, "recovery_state"), "started_lower"), *r;
	long long n = json_integer_value(json_object_get(sl, "attempt"));
	char *rungs = NULL, *out = NULL;
	size_t i;

	if (!json_is_object(sl))
		return NULL;
	json_array_foreach(json_object_get(sl, "rungs"), i, r)
		cat(&rungs, "%s%s", rungs ? ", " : "", json_string_value(r) ? json_string_value(r) : "?");
	cat(&out, "  started below the target (memory model)%s: attempt %lld ran with %s applied\n",
	    json_integer_value(json_object_get(job, "attempts")) > (n > 0 ? n : 1) ? ", then scaled up" : "", n > 0 ? n : 1,
	    rungs ? rungs : "the model's rungs");
	free(rungs);
	return out;
}

/* The verdict's lines for a job that was retried, one that scheduled jobs wait for, one whose first claim was handed back for a
 * bigger GPU before it ran (and why), a scheduled job: when it starts, and a queued job: its place
 * in the queue, and why when no usable GPU can take it (recovery/jobtext.h); NULL when none. Heap
 * string. */
static char *placement_lines(const json_t *job)
{
	const json_t *sb = json_object_get(json_object_get(job, "recovery_state"), "started_bigger");
	char *bigger = jobtext_started_bigger(job), *waiting = jobtext_placement(job), *retried = jobtext_retried(job);
	char *sched = jobtext_scheduled(job), *awaited = jobtext_awaited(job);
	char *out = NULL;

	if (retried)
		cat(&out, "  %s\n", retried);
	if (awaited) /* a failed or cancelled job that scheduled jobs still wait for (migration 033) */
		cat(&out, "  %s\n", awaited);
	if (bigger) {
		cat(&out, "  %s\n", bigger);
		if (str_of(sb, "reason"))
			cat(&out, "    why: %s\n", str_of(sb, "reason"));
	}
	if (sched)
		cat(&out, "  %s\n", sched);
	if (waiting)
		cat(&out, "  %s\n", waiting);
	free(bigger);
	free(waiting);
	free(retried);
	free(sched);
	free(awaited);
	return out;
}

/* A summary value as people read it: a one-dataset list ([[512,768]] or [1]) shows its element. */
static char *value_text(const char *key, const json_t *v)
{
	if ((!strcmp(key, "resolution") || !strcmp(key, "num_frames")) && json_is_array(v) && json_array_size(v) == 1)
		v = json_array_get(v, 0);
	return table_cell(v);
}

/* The attempt that tried `setting` on scale-up and failed: the one after the last scale_up decision
 * for it. Borrowed, or NULL. */
static const json_t *failed_try(const json_t *attempts, const char *setting)
{
	const json_t *found = NULL, *a;
	size_t i;

	json_array_foreach(attempts, i, a) {
		const json_t *next = json_array_get(attempts, i + 1);
		const char *act = str_of(a, "action"), *rung = str_of(a, "rung");
		if (next && act && rung && !strcmp(act, "scale_up") && !strcmp(rung, setting) &&
		    str_of(next, "outcome") && !strcmp(str_of(next, "outcome"), "failed"))
			found = next;
	}
	return found;
}

/* A reason the policy gave for one setting, when the result carries one (result.given_up or
 * result.settings, keyed by summary key or by setting; a string or an object with reason/why). */
static const char *given_reason(const json_t *result, const char *key, const char *setting)
{
	static const char *const maps[] = { "given_up", "settings", "reasons" };
	static const char *const fields[] = { "reason", "why" };

	for (size_t m = 0; m < ARRAY_LEN(maps); m++) {
		const json_t *map = json_object_get(result, maps[m]);
		const json_t *e = json_object_get(map, key);
		if (!e && setting)
			e = json_object_get(map, setting);
		if (json_is_string(e))
			return json_string_value(e);
		for (size_t f = 0; f < ARRAY_LEN(fields); f++)
			if (json_is_string(json_object_get(e, fields[f])))
				return json_string_value(json_object_get(e, fields[f]));
	}
	return NULL;
}

/* Why scale-up stopped, from the result: an explicit field, else the "(...)" that ends its reason,
 * unless that is the blanket "every setting at target or ceiling". Heap string or NULL. */
static char *stop_reason(const json_t *result)
{
	static const char *const keys[] = { "stopped", "stop_reason", "why" };
	const char *r = str_of(result, "reason"), *open, *close;

	for (size_t k = 0; k < ARRAY_LEN(keys); k++)
		if (str_of(result, keys[k]))
			return xstrdup(str_of(result, keys[k]));
	if (!r || !(close = strrchr(r, ')')) || !(open = strrchr(r, '(')) || open > close)
		return NULL;
	if (!strncmp(open + 1, "every setting at target", 23))
		return NULL;
	char *s = xmalloc((size_t)(close - open));
	memcpy(s, open + 1, (size_t)(close - open - 1));
	s[close - open - 1] = '\0';
	return s;
}

/* A ceiling's value: the value itself, or its "value" when the policy recorded an object. */
static const json_t *ceiling_value(const json_t *c)
{
	return json_is_object(c) && json_object_get(c, "value") ? json_object_get(c, "value") : c;
}

/* Why a setting of a succeeded job is not at its target. Heap string. */
static char *why_below(const json_t *job, const json_t *attempts, const struct story_setting *s)
{
	const json_t *result = json_object_get(job, "result");
	const json_t *target = json_object_get(result, "target"), *got = json_object_get(result, "achieved");
	const json_t *ceil = s && s->setting ? json_object_get(json_object_get(result, "ceilings"), s->setting) : NULL;
	const char *given = given_reason(result, s ? s->key : "", s ? s->setting : NULL);
	char *stop = NULL, *out = NULL;

	if (given)
		return xstrdup(given);
	if (!s)
		return xstrdup("differs from the target");
	if (s->kind == STORY_MEMORY)
		return xstrdup("kept: memory-saving settings stay after a success (guide 7)");
	if (s->kind == STORY_ACCUM) {
		long long tb = json_integer_value(json_object_get(target, "batch_size"));
		long long ab = json_integer_value(json_object_get(got, "batch_size"));
		long long ta = json_integer_value(json_object_get(target, "gradient_accumulation"));
		long long aa = json_integer_value(json_object_get(got, "gradient_accumulation"));
		if (tb != ab && tb * ta == ab * aa)
			return xasprintf("follows batch_size (batch x accumulation = %lld, as the target)", tb * ta);
	}
	if (ceil) {
		const json_t *tried = failed_try(attempts, s->setting);
		char *v = value_text(s->key, ceiling_value(ceil));
		if (tried) {
			char *n = table_cell(json_object_get(tried, "number")), *c = table_cell(json_object_get(tried, "class"));
			out = xasprintf("given up: attempt %s ran out of memory with %s %s (%s)", n, s->setting, v, c);
			free(n);
			free(c);
		} else {
			out = xasprintf("given up: %s %s is its recorded ceiling", s->setting, v);
		}
		free(v);
		return out;
	}
	if (json_is_false(json_object_get(json_object_get(job, "recovery"), "scale_up")))
		return xstrdup("not scaled back up: recovery.scale_up is off");
	stop = stop_reason(result);
	out = stop ? xasprintf("not scaled back up: %s", stop) : xstrdup("not scaled back up (no ceiling recorded)");
	free(stop);
	return out;
}

/* Number of the attempt whose run is the result (borrowed value), or NULL. */
static const json_t *result_attempt(const json_t *job, const json_t *attempts)
{
	const json_t *n = json_object_get(json_object_get(job, "result"), "good_attempt");
	const json_t *res = json_object_get(job, "result"), *a, *by_name = NULL, *last = NULL;
	const char *name = str_of(res, "config_name");
	size_t i;

	if (!json_is_integer(n) || json_integer_value(n) <= 0)
		n = json_object_get(json_object_get(job, "recovery_state"), "last_good_attempt");
	if (json_is_integer(n) && json_integer_value(n) > 0)
		return n;
	json_array_foreach(attempts, i, a) {
		if (!str_of(a, "outcome") || strcmp(str_of(a, "outcome"), "succeeded"))
			continue;
		last = a;
		const char *an = str_of(json_object_get(json_object_get(a, "config"), "config"), "name");
		if (name && an && !strcmp(an, name))
			by_name = a;
	}
	a = by_name ? by_name : last;
	return a ? json_object_get(a, "number") : NULL;
}

/* The class of attempt number n (borrowed string) or NULL. */
static const char *class_of(const json_t *attempts, const json_t *n)
{
	const json_t *a;
	size_t i;

	json_array_foreach(attempts, i, a)
		if (json_is_integer(n) && json_integer_value(json_object_get(a, "number")) == json_integer_value(n))
			return str_of(a, "class");
	return NULL;
}

/* The policy's own account, when the result carries one: result.settings = [{"setting", "target",
 * "achieved", "status": "at_target"|"ceiling"|"below_target"|"kept", "ceiling"?, "attempt"?, "why"?}].
 * NULL when it does not. */
/* Ends a settings story: "every setting at target" when nothing differed, else the settings at
 * target on one line. Takes both heap strings (either may be NULL); returns the story (heap). */
static char *settings_close(char *out, char *at)
{
	if (!out)
		cat(&out, "  every setting at target\n");
	else if (at)
		cat(&out, "  at target: %s\n", at);
	free(at);
	return out;
}

/* A setting's value as people write it: {"width":1024,"height":1024} as 1024x1024, other objects as
 * "key value, ..." in their order, anything else as a table cell. Heap string. */
static char *setting_value(const json_t *v)
{
	const json_t *w = json_object_get(v, "width"), *h = json_object_get(v, "height"), *x;
	char *out = NULL;
	const char *k;

	if (!json_is_object(v))
		return table_cell(v);
	if (json_is_integer(w) && json_is_integer(h) && json_object_size(v) == 2) {
		cat(&out, "%lldx%lld", (long long)json_integer_value(w), (long long)json_integer_value(h));
		return out;
	}
	json_object_foreach((json_t *)v, k, x) {
		char *c = table_cell(x);
		cat(&out, "%s%s %s", out ? ", " : "", k, c);
		free(c);
	}
	return out ? out : xstrdup("{}");
}

static char *settings_story(const json_t *result, const json_t *attempts)
{
	const json_t *list = json_object_get(result, "settings"), *e;
	char *out = NULL, *at = NULL;
	size_t i;

	if (!json_is_array(list) || json_array_size(list) == 0)
		return NULL;
	json_array_foreach(list, i, e) {
		const char *name = str_of(e, "setting"), *status = str_of(e, "status"), *why = str_of(e, "why");
		if (!name)
			continue;
		if ((status && !strcmp(status, "at_target")) || (!status && same(json_object_get(e, "target"),
			json_object_get(e, "achieved")))) {
			cat(&at, "%s%s", at ? ", " : "", name);
			continue;
		}
		char *ts = setting_value(json_object_get(e, "target")), *gs = setting_value(json_object_get(e, "achieved"));
		cat(&out, "  %s: target %s, achieved %s: ", name, ts, gs);
		if (status && !strcmp(status, "ceiling")) {
			const json_t *n = json_object_get(e, "attempt");
			const char *cls = class_of(attempts, n);
			char *cv = setting_value(json_object_get(e, "ceiling"));
			cat(&out, "given up at %s: ", cv);
			if (why) /* the policy's sentence names the attempt that proved the ceiling */
				cat(&out, "%s", why);
			else if (json_is_integer(n))
				cat(&out, "attempt %lld ran out of memory%s%s%s", (long long)json_integer_value(n), cls ? " (" : "",
				    cls ? cls : "", cls ? ")" : "");
			else
				cat(&out, "ran out of memory");
			free(cv);
		} else if (status && !strcmp(status, "kept")) {
			cat(&out, "kept: %s", why ? why : "a memory-saving setting stays after a success (guide 7)");
		} else if (status && !strcmp(status, "below_target")) {
			cat(&out, "not scaled back up: %s", why ? why : "no ceiling recorded");
		} else {
			cat(&out, "%s", why ? why : status ? status : "differs from the target");
		}
		cat(&out, "\n");
		free(ts);
		free(gs);
	}
	return settings_close(out, at);
}

static char *succeeded_story(const json_t *job, const json_t *attempts)
{
	const json_t *result = json_object_get(job, "result");
	const json_t *target = json_object_get(result, "target"), *got = json_object_get(result, "achieved");
	char *out = NULL, *at = NULL;
	const char *k;
	json_t *v;

	if ((out = settings_story(result, attempts)) != NULL)
		return out;
	if (!json_is_object(target) || !json_is_object(got))
		return NULL;
	for (size_t i = 0; i < ARRAY_LEN(SETTINGS); i++) {
		const json_t *t = json_object_get(target, SETTINGS[i].key), *g = json_object_get(got, SETTINGS[i].key);
		if (!t && !g)
			continue;
		if (same(t, g)) {
			cat(&at, "%s%s", at ? ", " : "", SETTINGS[i].key);
			continue;
		}
		char *ts = value_text(SETTINGS[i].key, t), *gs = value_text(SETTINGS[i].key, g);
		char *why = why_below(job, attempts, &SETTINGS[i]);
		cat(&out, "  %s: target %s, achieved %s: %s\n", SETTINGS[i].key, ts, gs, why);
		free(ts);
		free(gs);
		free(why);
	}
	json_object_foreach((json_t *)target, k, v) {
		size_t i;
		for (i = 0; i < ARRAY_LEN(SETTINGS) && strcmp(SETTINGS[i].key, k); i++)
			;
		if (i < ARRAY_LEN(SETTINGS))
			continue;
		if (same(v, json_object_get(got, k))) {
			cat(&at, "%s%s", at ? ", " : "", k);
			continue;
		}
		char *ts = table_cell(v), *gs = table_cell(json_object_get(got, k)), *why = why_below(job, attempts, NULL);
		cat(&out, "  %s: target %s, achieved %s: %s\n", k, ts, gs, why);
		free(ts);
		free(gs);
		free(why);
	}
	return settings_close(out, at);
}

char *story_verdict(const json_t *job, const json_t *attempts, const char *id)
{
	const char *st = str_of(job, "state");
	const json_t *res = json_object_get(job, "result");
	char *jid = id ? xstrdup(id) : table_cell(json_object_get(job, "id"));
	char *n = table_cell(json_object_get(job, "attempts")), *out = NULL;

	if (st && !strcmp(st, "succeeded")) {
		char *settings = succeeded_story(job, attempts);
		const json_t *k = result_attempt(job, attempts);
		const char *name = str_of(res, "config_name");
		cat(&out, "job %s succeeded after %s attempt(s)", jid, n);
		if (k)
			cat(&out, " with attempt %lld's run", (long long)json_integer_value(k));
		if (name)
			cat(&out, " (%s)", name);
		cat(&out, "\n%s", settings ? settings : "");
		free(settings);
	} else {
		const json_t *why = json_is_object(res) ? json_object_get(res, "reason") : res;
		cat(&out, "job %s %s after %s attempt(s)", jid, st ? st : "?", n);
		if (why && !json_is_null(why)) {
			char *r = table_cell(why);
			cat(&out, ": %s", r);
			free(r);
		}
		cat(&out, "\n");
	}
	{
		char *sl = started_lower_line(job);
		if (sl)
			cat(&out, "%s", sl);
		free(sl);
	}
	{
		char *sb = placement_lines(job);
		if (sb)
			cat(&out, "%s", sb);
		free(sb);
	}
	free(jid);
	free(n);
	return out;
}
