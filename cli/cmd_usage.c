/* rungctl usage: who used how much GPU time, and how much of it OOMs took (GET /v1/usage). Turns
 * `--since 7d` into a time, makes the call and prints a table of GPU hours per owner. */
#include "cmd_usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "httpc.h"
#include "jobtext.h"
#include "table.h"
#include "util.h"

int cmd_usage_time(const char *opt, const char *arg, int64_t now_ms, char **iso, char **err)
{
	int64_t at_ms = -1;
	long long s = 0;

	*iso = NULL;
	*err = NULL;
	if (util_time_parse(arg, &at_ms) < 0) {
		at_ms = -1;
		/* a duration before now: not bare seconds (a number alone is more likely a mistake here) */
		if (strpbrk(arg, "wdhms") && util_duration_parse(arg, now_ms / 1000, &s) == 0 && s > 0)
			at_ms = now_ms - (int64_t)s * 1000;
	}
	if (at_ms < 0) {
		*err = xasprintf("%s '%s': expected a duration before now, after 1970 (90m, 36h, 7d, 2w, 1d12h) or an "
				 "RFC 3339 time (2026-12-01T00:00:00Z)", opt, arg);
		return -1;
	}
	time_t t = (time_t)(at_ms / 1000);
	struct tm tm;
	char buf[32];
	gmtime_r(&t, &tm);
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
	*iso = xstrdup(buf);
	return 0;
}

/* Seconds as hours with one decimal ("12.5"), or "-" for none. */
static void hours(const json_t *v, char *buf, size_t n)
{
	double s = json_number_value(v);
	if (s <= 0)
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.1f", s / 3600.0);
}

/* The GPU hours of each owner per GPU model, the models in the total's order (the most first), then
 * a row "(OOM, all)": the hours OOMs took on each model; or NULL when the window's attempts ran on
 * fewer than two models (the main table says it all). Heap. */
static char *by_gpu_table(const json_t *doc)
{
	const json_t *models = json_object_get(json_object_get(doc, "total"), "by_gpu"), *m, *o;
	size_t nm = json_array_size(models), k, i;
	const char **head;
	char **cells;
	struct table *t;
	char *s;

	if (nm < 2)
		return NULL;
	head = xcalloc(nm + 1, sizeof *head);
	cells = xcalloc(nm + 1, sizeof *cells);
	head[0] = "OWNER";
	json_array_foreach(models, k, m)
		head[k + 1] = json_string_value(json_object_get(m, "model")) ?: "?";
	t = table_new(nm + 1, head);
	json_array_foreach(json_object_get(doc, "owners"), i, o) {
		cells[0] = xstrdup(json_string_value(json_object_get(o, "owner")) ?: "?");
		json_array_foreach(models, k, m) {
			char h[32];
			hours(json_object_get(json_object_get(o, "by_gpu"), head[k + 1]), h, sizeof h);
			cells[k + 1] = xstrdup(h);
		}
		table_add(t, (const char *const *)cells);
		for (k = 0; k <= nm; k++)
			free(cells[k]);
	}
	cells[0] = xstrdup("(OOM, all)");
	json_array_foreach(models, k, m) {
		char h[32];
		hours(json_object_get(m, "oom_gpu_seconds"), h, sizeof h);
		cells[k + 1] = xstrdup(h);
	}
	table_add(t, (const char *const *)cells);
	for (k = 0; k <= nm; k++)
		free(cells[k]);
	s = table_render(t);
	table_free(t);
	free(cells);
	free(head);
	return s;
}

char *cmd_usage_text(const json_t *doc)
{
	static const char *const head[] = { "OWNER", "GPU HOURS", "SUCCEEDED", "OOM", "OTHER FAILED", "CANCELLED",
		"LOST", "PREEMPTED", "RUNNING", "ATTEMPTS", "JOBS OK", "JOBS FAILED" };
	static const char *const buckets[] = { "succeeded", "oom", "failed", "cancelled", "lost", "preempted", "running" };
	struct table *t = table_new(ARRAY_LEN(head), head);
	const json_t *o, *total = json_object_get(doc, "total");
	size_t i;
	char cells[ARRAY_LEN(head)][32];
	const char *row[ARRAY_LEN(head)];

	json_array_foreach(json_object_get(doc, "owners"), i, o) {
		const json_t *by = json_object_get(o, "by_outcome");
		snprintf(cells[0], sizeof cells[0], "%s", json_string_value(json_object_get(o, "owner")) ?
			 json_string_value(json_object_get(o, "owner")) : "?");
		hours(json_object_get(o, "gpu_seconds"), cells[1], sizeof cells[1]);
		for (size_t k = 0; k < ARRAY_LEN(buckets); k++)
			hours(json_object_get(by, buckets[k]), cells[2 + k], sizeof cells[2 + k]);
		snprintf(cells[9], sizeof cells[9], "%lld", (long long)json_integer_value(json_object_get(o, "attempts")));
		snprintf(cells[10], sizeof cells[10], "%lld", (long long)json_integer_value(json_object_get(o, "jobs_succeeded")));
		snprintf(cells[11], sizeof cells[11], "%lld", (long long)json_integer_value(json_object_get(o, "jobs_failed")));
		for (size_t k = 0; k < ARRAY_LEN(head); k++)
			row[k] = cells[k];
		table_add(t, row);
	}
	char *tab = table_render(t);
	table_free(t);
	double all = json_number_value(json_object_get(total, "gpu_seconds"));
	double oom = json_number_value(json_object_get(total, "oom_gpu_seconds"));
	char *spared = jobtext_spared(json_object_get(total, "resumed"));
	char *recovered = jobtext_recovered(json_object_get(total, "recovered")); /* what the recovery brought through */
	char *out = xasprintf("%s%s to %s: %.1f GPU hours in %lld attempts of %lld jobs; %.1f of them (%.0f%%) in attempts "
			      "that ended in an OOM%s%s\n",
			      tab, json_string_value(json_object_get(doc, "since")) ?
			      json_string_value(json_object_get(doc, "since")) : "?",
			      json_string_value(json_object_get(doc, "until")) ?
			      json_string_value(json_object_get(doc, "until")) : "?",
			      all / 3600.0, (long long)json_integer_value(json_object_get(total, "attempts")),
			      (long long)json_integer_value(json_object_get(total, "jobs")), oom / 3600.0,
			      all > 0 ? 100.0 * oom / all : 0.0, recovered, spared);
	free(recovered);
	free(spared);
	free(tab);
	char *models = by_gpu_table(doc);
	if (models) { /* chargeback: an hour of one card is not an hour of another */
		char *all_out = xasprintf("%s\nGPU hours by GPU model:\n%s", out, models);
		free(out);
		free(models);
		out = all_out;
	}
	json_array_foreach(json_object_get(doc, "quotas"), i, o) { /* migration 035: each in its own window */
		char *line = jobtext_quota(o);
		char *all_out = xasprintf("%s%squota: %s\n", out, i == 0 ? "\n" : "", line);
		free(out);
		free(line);
		out = all_out;
	}
	return out;
}

int cmd_usage(struct cli *c, int argc, char **argv)
{
	const char *since = NULL, *until = NULL, *owner = NULL, *label = NULL;
	char *ops[1], *err = NULL, *since_iso = NULL, *until_iso = NULL, *path = NULL;
	json_t *ans = NULL;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "since", .type = ARGS_STRING, .str = &since },
		{ .name = "until", .type = ARGS_STRING, .str = &until },
		{ .name = "owner", .type = ARGS_STRING, .str = &owner },
		{ .name = "label", .type = ARGS_STRING, .str = &label },
	};
	int rc = cli_args(c, cli_cmd_named("usage"), opts, ARRAY_LEN(opts), argc, argv, ops, 0, 0);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	int64_t now = util_wall_ms();
	if ((since && cmd_usage_time("--since", since, now, &since_iso, &err) < 0) ||
	    (until && cmd_usage_time("--until", until, now, &until_iso, &err) < 0)) {
		fprintf(c->err, "rungctl usage: %s\n", err);
		rc = CLI_USAGE;
		goto out;
	}
	char *es = since_iso ? httpc_escape(since_iso) : NULL, *eu = until_iso ? httpc_escape(until_iso) : NULL;
	char *eo = owner ? httpc_escape(owner) : NULL, *el = label ? httpc_escape(label) : NULL;
	path = xasprintf("/v1/usage?since=%s&until=%s&owner=%s&label=%s", es ? es : "", eu ? eu : "", eo ? eo : "",
			 el ? el : "");
	free(es);
	free(eu);
	free(eo);
	free(el);
	rc = cli_call(c, "GET", path, NULL, NULL, &ans);
	if (rc == CLI_OK) {
		if (c->json) {
			cli_print_json(c, ans);
		} else {
			char *s = cmd_usage_text(ans);
			fputs(s, c->out);
			free(s);
		}
	}
out:
	free(err);
	free(since_iso);
	free(until_iso);
	free(path);
	json_decref(ans);
	return rc;
}
