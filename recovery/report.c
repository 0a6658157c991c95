/* Escalation reports for support: the job, target vs last config, the attempts, the evidence, GPU
 * snapshots, the last log lines of each failed attempt and the recommended next step, as Markdown
 * and as JSON. Pure code; owns only its string building. */
#include "report.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpath.h"
#include "ladder.h"
#include "memplan.h"
#include "util.h"

#define REPORT_LOG_LINES 40

struct sb {
	char *s;
	size_t len, cap;
};

static void sb_add(struct sb *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->s = xrealloc(b->s, b->cap);
	}
	memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void sb_printf(struct sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sb *b, const char *fmt, ...)
{
	va_list ap;
	char *t = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&t, fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_add(b, t, (size_t)n);
	free(t);
}

/* A table cell: pipes and backslashes escaped, line breaks and control characters as spaces. */
static void sb_cell(struct sb *b, const char *s)
{
	sb_add(b, " ", 1);
	for (; s && *s; s++) {
		if (*s == '|' || *s == '\\')
			sb_add(b, "\\", 1);
		if ((unsigned char)*s < 0x20)
			sb_add(b, " ", 1);
		else
			sb_add(b, s, 1);
	}
	sb_add(b, " |", 2);
}

/* Cell text of any JSON value (strings unquoted); heap. */
static char *val_text(const json_t *v)
{
	if (!v || json_is_null(v))
		return xstrdup("-");
	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
}

static void sb_cell_val(struct sb *b, const json_t *v)
{
	char *t = val_text(v);

	sb_cell(b, t);
	free(t);
}

/* A fenced code block whose fence is longer than any run of backticks inside. */
static void sb_fenced(struct sb *b, const json_t *lines)
{
	size_t i, run, longest = 0, k;
	json_t *l;
	const char *s;

	json_array_foreach(lines, i, l)
		for (s = json_string_value(l), run = 0; s && *s; s++) {
			run = *s == '`' ? run + 1 : 0;
			if (run > longest)
				longest = run;
		}
	for (k = 0; k < (longest >= 3 ? longest + 1 : 3); k++)
		sb_add(b, "`", 1);
	sb_add(b, "text\n", 5);
	json_array_foreach(lines, i, l) {
		s = json_string_value(l);
		sb_printf(b, "%s\n", s ? s : "");
	}
	for (k = 0; k < (longest >= 3 ? longest + 1 : 3); k++)
		sb_add(b, "`", 1);
	sb_add(b, "\n\n", 2);
}

/* Every attempt, the one that just ended last, with the decision's verdict on it. */
static json_t *all_attempts(const json_t *ctx, const json_t *decision)
{
	json_t *out = json_array(), *a, *cur;
	size_t i;

	json_array_foreach(json_object_get(ctx, "attempts"), i, a)
		json_array_append(out, a);
	cur = json_object_get(ctx, "attempt");
	if (json_is_object(cur)) {
		a = json_deep_copy(cur);
		json_object_set(a, "class", json_object_get(decision, "class"));
		json_object_set(a, "action", json_object_get(decision, "action"));
		json_object_set(a, "rung", json_object_get(decision, "rung") ? json_object_get(decision, "rung") : json_null());
		json_array_append_new(out, a);
	}
	return out;
}

static bool attempt_failed(const json_t *a)
{
	const char *c = jpath_str(a, "class", "");

	return strcmp(c, "success") && strcmp(c, "cancelled");
}

static json_t *tail(const json_t *lines, size_t n)
{
	json_t *out = json_array();
	size_t i, len = json_array_size(lines);

	for (i = len > n ? len - n : 0; i < len; i++)
		json_array_append(out, json_array_get(lines, i));
	return out;
}

/* A figure in MiB, or "unknown" when the worker did not report it (issue 16.1: never "0"). */
static void mib_or_unknown(struct sb *b, const json_t *v)
{
	if (json_is_integer(v))
		sb_printf(b, "%lld", (long long)json_integer_value(v));
	else
		sb_add(b, "unknown", 7);
}

static void gpu_line(struct sb *b, const char *label, const json_t *g)
{
	json_t *p;
	size_t i;

	if (!json_is_object(g)) {
		sb_printf(b, "  - %s: not reported\n", label);
		return;
	}
	sb_printf(b, "  - %s: ", label);
	mib_or_unknown(b, json_object_get(g, "memory_used_mib"));
	sb_add(b, " / ", 3);
	mib_or_unknown(b, json_object_get(g, "memory_total_mib"));
	sb_add(b, " MiB used", 9);
	json_array_foreach(json_object_get(g, "processes"), i, p)
		sb_printf(b, "%s pid %lld %lld MiB", i ? "," : "; processes:", jpath_int(p, "pid", 0),
			  jpath_int(p, "used_mib", 0));
	sb_add(b, "\n", 1);
}

static const char *fits_word(const json_t *pred)
{
	const json_t *f = json_object_get(pred, "fits");

	return json_is_true(f) ? "fits" : json_is_false(f) ? "does not fit" : "unknown";
}

/* Issue 12: the memory model's estimate of the target, last and next configs with its evidence;
 * JSON null (and a line saying so) when the CTX carries no memory history. */
static json_t *memory_section(struct sb *b, const json_t *ctx, const json_t *decision, const json_t *target,
			      const json_t *last)
{
	json_t *prof = memplan_profile(ctx, jpath_str(decision, "class", NULL)), *t, *l, *out, *ceil;
	const json_t *next = json_object_get(decision, "estimate");
	bool video = !strcmp(jpath_str(ctx, "job.kind", "image"), "video");
	const char *k;
	json_t *v;

	sb_printf(b, "## Memory estimate\n\n");
	if (!prof) {
		sb_printf(b, "No memory history for this architecture: the ladder ran one rung per attempt.\n\n");
		return json_null();
	}
	t = memplan_estimate(prof, video, target);
	l = json_is_object(last) ? memplan_estimate(prof, video, last) : json_null();
	sb_printf(b, "- **Profile**: %s on the %lld MiB class, %lld attempt(s) (%lld fit, %lld OOM), margin %lld MiB%s\n",
		  jpath_str(prof, "arch", "?"), jpath_int(prof, "gpu_mib", 0), jpath_int(prof, "n", 0),
		  jpath_int(prof, "n_fit", 0), jpath_int(prof, "n_oom", 0), jpath_int(prof, "margin_mib", 0),
		  jpath_bool(prof, "ok", 0) ? "" : " (too little history to fit; evidence rules only)");
	ceil = json_object_get(prof, "ceilings");
	if (json_object_size(ceil)) {
		sb_printf(b, "- **Learned ceilings**:");
		json_object_foreach(ceil, k, v)
			sb_printf(b, " %s %lld;", k, (long long)json_integer_value(v));
		sb_printf(b, "\n");
	}
	sb_printf(b, "- **Target config**: %s: %s\n", fits_word(t), jpath_str(t, "evidence", "-"));
	if (json_is_object(l))
		sb_printf(b, "- **Last config**: %s: %s\n", fits_word(l), jpath_str(l, "evidence", "-"));
	if (json_is_object(next))
		sb_printf(b, "- **Next config**: %s: %s\n", fits_word(next), jpath_str(next, "evidence", "-"));
	sb_printf(b, "\n");
	out = json_pack("{s:{s:O?, s:O?, s:O?, s:O?, s:O?, s:O?}, s:o, s:o, s:O?}", "profile", "arch",
			json_object_get(prof, "arch"), "gpu_mib", json_object_get(prof, "gpu_mib"), "n",
			json_object_get(prof, "n"), "margin_mib", json_object_get(prof, "margin_mib"), "coef",
			json_object_get(prof, "coef"), "ceilings", ceil, "target", t ? t : json_null(), "last", l, "next",
			next);
	json_decref(prof);
	return out ? out : json_null();
}

json_t *report_build(const json_t *ctx, const json_t *decision)
{
	struct sb b = { NULL, 0, 0 };
	const json_t *job = json_object_get(ctx, "job"), *esc = json_object_get(decision, "escalation");
	const json_t *target = json_object_get(job, "target_config");
	const json_t *last = jpath_get(ctx, "attempt.config");
	json_t *attempts = all_attempts(ctx, decision), *diff = json_array(), *rows = json_array();
	json_t *snaps = json_array(), *logs = json_array(), *a, *c, *e, *out, *memory;
	const char *name = jpath_str(target, "config.name", jpath_str(job, "name", "?"));
	const char *rec = jpath_str(esc, "recommendation", NULL);
	const char *next = rec ? rec : jpath_str(decision, "reason", "-");
	size_t i;

	if (!json_is_object(last))
		last = json_object_get(job, "current_config");
	if (json_is_object(target) && json_is_object(last))
		ladder_diff(target, last, diff);

	sb_printf(&b, "# rung escalation: %s\n\n", jpath_str(esc, "trigger", jpath_str(decision, "class", "report")));
	sb_printf(&b, "- **Job**: %lld `%s` (%s)\n", jpath_int(job, "id", 0), name, jpath_str(job, "kind", "?"));
	sb_printf(&b, "- **Summary**: %s\n", jpath_str(esc, "summary", jpath_str(decision, "reason", "-")));
	sb_printf(&b, "- **Verdict**: class `%s`, rule `%s`, action `%s`, job %s\n", jpath_str(decision, "class", "?"),
		  jpath_str(decision, "rule", "?"), jpath_str(decision, "action", "?"),
		  jpath_str(decision, "job_state", "?"));
	sb_printf(&b, "- **Recommended next step**: %s\n\n", next);

	sb_printf(&b, "## Evidence\n\n");
	json_array_foreach(json_object_get(decision, "evidence"), i, e)
		sb_printf(&b, "- %s\n", json_string_value(e) ? json_string_value(e) : "");
	sb_printf(&b, "\n## Target vs last config\n\n");
	if (json_array_size(diff) == 0) {
		sb_printf(&b, "The last attempt ran the target config unchanged.\n\n");
	} else {
		sb_printf(&b, "| path | target | last |\n| --- | --- | --- |\n");
		json_array_foreach(diff, i, c) {
			sb_add(&b, "|", 1);
			sb_cell(&b, jpath_str(c, "path", "?"));
			sb_cell_val(&b, json_object_get(c, "old"));
			sb_cell_val(&b, json_object_get(c, "new"));
			sb_add(&b, "\n", 1);
		}
		sb_add(&b, "\n", 1);
	}

	memory = memory_section(&b, ctx, decision, target, last);
	sb_printf(&b, "## Attempts\n\n| # | worker | GPU | phase | step | class | action | rung |\n"
		      "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
	json_array_foreach(attempts, i, a) {
		const json_t *f = json_object_get(a, "facts");
		json_t *phase = json_object_get(f, "oom_phase");
		if (!json_is_string(phase))
			phase = json_object_get(f, "phase");
		sb_add(&b, "|", 1);
		sb_cell_val(&b, json_object_get(a, "number"));
		sb_cell_val(&b, json_object_get(a, "worker_id"));
		sb_cell_val(&b, json_object_get(a, "gpu_uuid"));
		sb_cell_val(&b, phase);
		sb_cell_val(&b, json_object_get(f, "last_step"));
		sb_cell_val(&b, json_object_get(a, "class"));
		sb_cell_val(&b, json_object_get(a, "action"));
		sb_cell_val(&b, json_object_get(a, "rung"));
		sb_add(&b, "\n", 1);
		json_array_append_new(rows, json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?}", "number",
						      json_object_get(a, "number"), "worker_id", json_object_get(a, "worker_id"),
						      "gpu_uuid", json_object_get(a, "gpu_uuid"), "phase", phase, "step",
						      json_object_get(f, "last_step"), "class", json_object_get(a, "class"),
						      "action", json_object_get(a, "action"), "rung", json_object_get(a, "rung")));
		json_array_append_new(snaps, json_pack("{s:O?, s:O?, s:O?, s:O?}", "number", json_object_get(a, "number"),
						       "gpu_uuid", json_object_get(a, "gpu_uuid"), "gpu_before",
						       json_object_get(f, "gpu_before"), "gpu_after",
						       json_object_get(f, "gpu_after")));
	}
	sb_printf(&b, "\n## GPU state\n\n");
	json_array_foreach(attempts, i, a) {
		const json_t *f = json_object_get(a, "facts");
		sb_printf(&b, "- attempt %lld on GPU %s\n", jpath_int(a, "number", 0), jpath_str(a, "gpu_uuid", "?"));
		gpu_line(&b, "before", json_object_get(f, "gpu_before"));
		gpu_line(&b, "after", json_object_get(f, "gpu_after"));
	}
	sb_printf(&b, "\n## Logs of failed attempts (last %d lines)\n\n", REPORT_LOG_LINES);
	json_array_foreach(attempts, i, a) {
		json_t *t;
		if (!attempt_failed(a))
			continue;
		t = tail(jpath_get(a, "facts.log_tail"), REPORT_LOG_LINES);
		sb_printf(&b, "### Attempt %lld (%s)\n\n", jpath_int(a, "number", 0), jpath_str(a, "class", "?"));
		sb_fenced(&b, t);
		/* all of it as the worker sent it (migration 022): the command and the page, relative to rungd */
		sb_printf(&b, "The whole log: `rungctl logs %lld --attempt %lld`, or `/ui/jobs/%lld/log?attempt=%lld`.\n\n",
			  jpath_int(job, "id", 0), jpath_int(a, "number", 0), jpath_int(job, "id", 0), jpath_int(a, "number", 0));
		json_array_append_new(logs, json_pack("{s:O?, s:o}", "number", json_object_get(a, "number"), "lines", t));
	}

	out = json_pack("{s:s, s:{s:{s:O?, s:s, s:O?}, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:s, s:o, s:o, s:o, s:o, s:o}}",
			"markdown", b.s ? b.s : "", "json", "job", "id", json_object_get(job, "id"), "name", name, "kind",
			json_object_get(job, "kind"), "escalation", esc, "class", json_object_get(decision, "class"),
			"rule", json_object_get(decision, "rule"), "action", json_object_get(decision, "action"),
			"reason", json_object_get(decision, "reason"), "evidence", json_object_get(decision, "evidence"),
			"recommendation", next, "config_diff", diff, "attempts", rows, "gpu_snapshots", snaps, "logs",
			logs, "memory", memory);
	free(b.s);
	json_decref(attempts);
	if (!out)
		out = json_pack("{s:s, s:{}}", "markdown", "# rung escalation\n\n(report could not be built)\n", "json");
	return out;
}
