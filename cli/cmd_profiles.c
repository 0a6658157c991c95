/* rungctl profiles, profiles reset, plan, and the memory lines of show (see cmd_profiles.h): one
 * call each, then the server's JSON or a table / a few lines made by the pure formatters below. */
#include "cmd_profiles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sweep.h"
#include "cmd_jobs.h"
#include "jsondiff.h"
#include "table.h"
#include "pool.h"
#include "util.h"
#include "yamljson.h"

/* "k=v k=v" of an object's members (ceilings), "-" when empty; heap. */
static char *pairs(const json_t *o)
{
	const char *k;
	json_t *v;
	char *out = xstrdup("");

	json_object_foreach((json_t *)o, k, v) {
		char *cell = table_cell(v), *next = xasprintf("%s%s%s=%s", out, *out ? " " : "", k, cell);
		free(cell);
		free(out);
		out = next;
	}
	if (!*out) {
		free(out);
		out = xstrdup("-");
	}
	return out;
}

char *cmd_profiles_table(const json_t *profiles)
{
	static const char *const head[] = { "ARCH", "GPU CLASS MIB", "ATTEMPTS", "HERE", "FIT", "OOM", "MARGIN MIB",
		"USABLE MIB", "CEILINGS", "RESET" };
	struct table *t = table_new(ARRAY_LEN(head), head);
	const json_t *p;
	size_t i;
	char *s;

	json_array_foreach(profiles, i, p) {
		static const char *const keys[] = { "arch", "gpu_class_mib", "n", "n_here", "n_fit", "n_oom", "margin_mib",
			"usable_mib" };
		char *cells[ARRAY_LEN(head)];
		size_t k;
		for (k = 0; k < ARRAY_LEN(keys); k++)
			cells[k] = table_cell(json_object_get(p, keys[k]));
		cells[k++] = pairs(json_object_get(p, "ceilings"));
		cells[k] = table_cell(json_object_get(p, "reset_at"));
		table_add(t, (const char *const *)cells);
		for (k = 0; k < ARRAY_LEN(head); k++)
			free(cells[k]);
	}
	s = table_render(t);
	table_free(t);
	return s;
}

/* MiB as GiB with one decimal, into buf. */
static const char *gib(char *buf, size_t n, long long mib)
{
	snprintf(buf, n, "%.1f GiB", (double)mib / 1024.0);
	return buf;
}

/* "21.5 GiB, fits" / "does not fit" / "unknown" of a PREDICTION (may be null); heap. */
static char *estimate_cell(const json_t *est)
{
	const json_t *peak = json_object_get(est, "peak_mib"), *fits = json_object_get(est, "fits");
	const char *verdict = json_is_true(fits) ? "fits" : json_is_false(fits) ? "does not fit" : "unknown";
	char g[32];

	if (!json_is_object(est))
		return xstrdup("no history");
	if (!json_is_integer(peak))
		return xstrdup(verdict);
	return xasprintf("%s, %s", gib(g, sizeof g, json_integer_value(peak)), verdict);
}

char *cmd_plan_text(const json_t *plan)
{
	static const char *const head[] = { "GPU MIB", "GPUS", "TARGET", "FIRST ATTEMPT", "IT NEEDS" };
	const json_t *sizes = json_object_get(plan, "sizes"), *s;
	const char *arch = json_string_value(json_object_get(plan, "arch")) ?: "?";
	long long n = json_integer_value(json_object_get(plan, "observations"));
	struct table *t = table_new(ARRAY_LEN(head), head);
	char *out, *tab, *detail = xstrdup("");
	size_t i;

	json_array_foreach(sizes, i, s) {
		const char *action = json_string_value(json_object_get(s, "action")) ?: "?";
		const json_t *rungs = json_object_get(s, "rungs");
		char *cells[ARRAY_LEN(head)], *names = xstrdup(""), *more;
		long long live = json_integer_value(json_object_get(s, "gpus"));
		long long drained = json_integer_value(json_object_get(s, "draining_gpus"));
		const json_t *r;
		size_t k;

		json_array_foreach(rungs, k, r) {
			char *next = xasprintf("%s%s%s", names, *names ? " + " : "", json_string_value(r) ?: "?");
			free(names);
			names = next;
		}
		cells[0] = table_cell(json_object_get(s, "gpu_mib"));
		cells[1] = !json_is_true(json_object_get(s, "in_fleet")) ? xstrdup("none") :
			   drained ? xasprintf("%lld (+%lld drained)", live, drained) : xasprintf("%lld", live);
		cells[2] = estimate_cell(json_object_get(s, "target_estimate"));
		if (!strcmp(action, "start_lower"))
			cells[3] = xasprintf("start lower: %s", names);
		else if (!strcmp(action, "requeue_bigger"))
			cells[3] = xasprintf("wait for >= %lld MiB",
					     (long long)json_integer_value(json_object_get(s, "min_gpu_memory_mib")));
		else
			cells[3] = xstrdup("as submitted");
		cells[4] = !strcmp(action, "start_lower") ? estimate_cell(json_object_get(s, "estimate")) : xstrdup("-");
		table_add(t, (const char *const *)cells);
		for (k = 0; k < ARRAY_LEN(head); k++)
			free(cells[k]);
		if (strcmp(action, "as_is")) { /* why, and what it changes */
			char *changes = jsondiff_format(json_object_get(s, "changes")), *lines = xstrdup("");
			for (char *save = NULL, *l = strtok_r(changes, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
				char *next = xasprintf("%s    config change: %s\n", lines, l);
				free(lines);
				lines = next;
			}
			more = xasprintf("%s  on %lld MiB: %s\n%s", detail, (long long)json_integer_value(json_object_get(s, "gpu_mib")),
					 json_string_value(json_object_get(s, "reason")) ?: "", lines);
			free(detail);
			detail = more;
			free(lines);
			free(changes);
		}
		free(names);
	}
	tab = json_array_size(sizes) ? table_render(t) :
	      xstrdup("no GPU in the fleet: --gpu-mib N asks about a GPU of N MiB\n");
	table_free(t);
	if (n > 0)
		out = xasprintf("%s %s: the memory model rests on %lld attempt(s) of %s\n%s%s",
				json_string_value(json_object_get(plan, "kind")) ?: "?", arch, n, arch, tab, detail);
	else
		out = xasprintf("%s %s: no memory history of %s yet, so a first attempt runs as submitted\n%s%s",
				json_string_value(json_object_get(plan, "kind")) ?: "?", arch, arch, tab, detail);
	free(tab);
	free(detail);
	return out;
}

int cmd_plan(struct cli *c, int argc, char **argv)
{
	struct cmd_submit_opts o = { .name = NULL };
	long long gpu_mib = 0;
	const char *sets[64];
	size_t n_sets = 0;
	char *ops[1], *err = NULL, *path;
	json_t *config = NULL, *body = NULL, *ans = NULL, *changed = NULL;
	struct sweep *sw = NULL;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "gpu-mib", .type = ARGS_INT, .num = &gpu_mib, .min = 1, .max = 10000000 },
		{ .name = "set", .type = ARGS_LIST, .list = sets, .count = &n_sets, .max = ARRAY_LEN(sets) },
		{ .name = "no-scale-up", .type = ARGS_FLAG, .flag = &o.no_scale_up },
		{ .name = "validate-steps", .type = ARGS_INT, .num = &o.validate_steps, .min = 1, .max = 100000000 },
		{ .name = "pool", .type = ARGS_STRING, .str = &o.pool },
	};
	int rc = cli_args(c, cli_cmd_named("plan"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);

	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (o.pool && !pool_name_ok(o.pool)) {
		fprintf(c->err, "rungctl plan: --pool must be a pool name: %s\n", POOL_NAME_RULE);
		return CLI_USAGE;
	}
	config = yamljson_load_file(ops[0], &err);
	if (!json_is_object(config)) {
		fprintf(c->err, "rungctl plan: %s\n", err ? err : "expected an AI Toolkit config (a mapping with job, config, meta)");
		rc = CLI_USAGE;
		goto out;
	}
	if (!(sw = cmd_sweep_read(c, "plan", sets, n_sets, NULL, 0, NULL, 0))) {
		rc = CLI_USAGE;
		goto out;
	}
	char *sfx = NULL, *added = NULL;
	if (!(changed = sweep_apply(sw, config, 0, &sfx, &added, &err))) {
		fprintf(c->err, "rungctl plan: %s\n", err);
		rc = CLI_USAGE;
		goto out;
	}
	if (added)
		fprintf(c->err, "rungctl plan: warning: the config had no %s; added (check the spelling)\n", added);
	free(added);
	free(sfx);
	body = cmd_submit_body(changed, &o);
	path = gpu_mib > 0 ? xasprintf("/v1/plan?gpu_mib=%lld", gpu_mib) : xstrdup("/v1/plan");
	rc = cli_call(c, "POST", path, body, NULL, &ans);
	free(path);
	if (rc == CLI_OK) {
		if (c->json) {
			cli_print_json(c, ans);
		} else {
			char *s = cmd_plan_text(ans);
			fputs(s, c->out);
			free(s);
		}
	}
out:
	free(err);
	json_decref(ans);
	json_decref(body);
	json_decref(changed);
	json_decref(config);
	sweep_free(sw);
	return rc;
}

char *cmd_memory_lines(const json_t *m)
{
	const json_t *est = json_object_get(m, "estimate"), *prof = json_object_get(m, "profile");
	const json_t *fits = json_object_get(est, "fits"), *peak = json_object_get(est, "peak_mib");
	long long gpu = json_integer_value(json_object_get(m, "gpu_mib"));
	const char *ev = json_string_value(json_object_get(est, "evidence"));
	char a[32], b[32], *line1, *out;

	if (!json_is_object(est))
		return xstrdup("memory estimate   none: the job has not run on a GPU yet\n");
	if (json_is_integer(peak))
		line1 = xasprintf("memory estimate   %s peak on a %s GPU: %s\n", gib(a, sizeof a, json_integer_value(peak)),
				  gib(b, sizeof b, gpu), json_is_true(fits) ? "fits" : json_is_false(fits) ? "does not fit" :
				  "unknown");
	else
		line1 = xasprintf("memory estimate   unknown on a %s GPU: %s\n", gib(b, sizeof b, gpu),
				  json_is_true(fits) ? "fits" : json_is_false(fits) ? "does not fit" : "not enough history");
	out = xasprintf("%s  evidence        %s\n  learned from    %lld attempt(s) of %s (%lld on %lld MiB GPUs; %lld fit, %lld out "
			"of memory), margin %lld MiB\n", line1, ev ? ev : "-",
			(long long)json_integer_value(json_object_get(prof, "n")),
			json_string_value(json_object_get(m, "arch")) ?: "?",
			(long long)json_integer_value(json_object_get(prof, "n_here")), gpu,
			(long long)json_integer_value(json_object_get(prof, "n_fit")),
			(long long)json_integer_value(json_object_get(prof, "n_oom")),
			(long long)json_integer_value(json_object_get(prof, "margin_mib")));
	free(line1);
	return out;
}

int cmd_profiles(struct cli *c, int argc, char **argv)
{
	const char *arch = NULL;
	char *ops[1], *a = NULL, *path;
	json_t *ans = NULL;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "arch", .type = ARGS_STRING, .str = &arch },
	};
	int rc = cli_args(c, cli_cmd_named("profiles"), opts, ARRAY_LEN(opts), argc, argv, ops, 0, 0);

	if (rc)
		return rc < 0 ? CLI_OK : rc;
	a = arch ? httpc_escape(arch) : NULL;
	path = xasprintf("/v1/profiles%s%s", a ? "?arch=" : "", a ? a : "");
	rc = cli_call(c, "GET", path, NULL, NULL, &ans);
	if (rc == CLI_OK) {
		if (c->json) {
			cli_print_json(c, ans);
		} else {
			char *s = cmd_profiles_table(cli_list(ans, "profiles"));
			fputs(s, c->out);
			free(s);
		}
	}
	json_decref(ans);
	free(path);
	free(a);
	return rc;
}

int cmd_profiles_reset(struct cli *c, int argc, char **argv)
{
	char *ops[2], *a, *g, *path;
	const char *note = NULL;
	json_t *ans = NULL, *body;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "note", .type = ARGS_STRING, .str = &note },
	};
	int rc = cli_args(c, cli_cmd_named("profiles reset"), opts, ARRAY_LEN(opts), argc, argv, ops, 2, 2);

	if (rc)
		return rc < 0 ? CLI_OK : rc;
	body = note ? json_pack("{s:s}", "note", note) : json_object();
	if (!body) {
		fprintf(c->err, "rungctl profiles reset: --note must be UTF-8 text\n");
		return CLI_USAGE;
	}
	a = httpc_escape(ops[0]);
	g = httpc_escape(ops[1]);
	path = xasprintf("/v1/profiles/%s/%s/reset", a, g);
	rc = cli_call(c, "POST", path, body, NULL, &ans);
	json_decref(body);
	if (rc == CLI_OK) {
		if (c->json) {
			cli_print_json(c, ans);
		} else {
			char *at = table_cell(json_object_get(ans, "reset_at"));
			fprintf(c->out, "profile %s on %s MiB GPUs: reset at %s\n", ops[0], ops[1], at);
			free(at);
		}
	}
	json_decref(ans);
	free(path);
	free(g);
	free(a);
	return rc;
}
