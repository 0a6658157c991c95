/* Integration: the alerting rules shipped in deploy/prometheus/rung-alerts.yml and the Grafana
 * dashboard in deploy/grafana/rung-dashboard.json name only what a real rungd exports. Each rule is
 * complete (alert, expr, severity page|ticket, summary, description), each panel has a title, a
 * place and the dashboard's datasource variable; every rung_* series an expression reads is a family
 * in rungd's /metrics (a histogram's _bucket, _sum and _count too), and every label="value" matcher
 * on it matches a sample there (the by-state families list every state, 0 included; a queued job
 * gives the per-owner ones a sample; a history counter with no sample yet is checked as a family). The checker itself is shown to refuse a made-up series and a
 * made-up state. `promtool check rules` runs where promtool is installed (Debian's prometheus
 * package), and so does `promtool test rules` over tests/data/prometheus/rung-alerts-test.yml (what
 * the rules fire on); elsewhere those checks say SKIP. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"
#include "yamljson.h"

#define RULES "deploy/prometheus/rung-alerts.yml"
#define DASHBOARD "deploy/grafana/rung-dashboard.json"
#define RULES_TEST "tests/data/prometheus/rung-alerts-test.yml" /* promtool test rules: alerts on made-up series */

/* Whether the scrape has family name: a "# TYPE name " line, or name is a histogram's _bucket,
 * _sum or _count series. */
static bool has_family(const char *scrape, const char *name)
{
	static const char *const parts[] = { "_bucket", "_sum", "_count" };
	char *line = xasprintf("# TYPE %s ", name);
	bool ok = strstr(scrape, line) != NULL;
	size_t n = strlen(name);

	free(line);
	for (size_t i = 0; !ok && i < sizeof parts / sizeof parts[0]; i++) {
		size_t k = strlen(parts[i]);
		if (n > k && !strcmp(name + n - k, parts[i])) {
			line = xasprintf("# TYPE %.*s histogram\n", (int)(n - k), name);
			ok = strstr(scrape, line) != NULL;
			free(line);
		}
	}
	return ok;
}

/* Whether a sample of name carries label="value" (the matcher as written in the rule). */
static bool has_sample(const char *scrape, const char *name, const char *matcher)
{
	char *head = xasprintf("\n%s{", name);
	bool ok = false;

	for (const char *p = strstr(scrape, head); p && !ok; p = strstr(p + 1, head)) {
		const char *end = strchr(p + 1, '\n');
		const char *m = strstr(p, matcher);
		ok = m && (!end || m < end);
	}
	free(head);
	return ok;
}

/* Checks expr against the scrape: every rung_* name a family, every label="value" matcher right
 * after it found on one of its samples. Returns NULL when all hold, else what failed (heap). */
static char *check_expr(const char *expr, const char *scrape)
{
	const char *p = expr;

	while ((p = strstr(p, "rung_")) != NULL) {
		size_t n = 0;
		char *name;

		if (p > expr && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) {
			p++;
			continue;
		}
		while (isalnum((unsigned char)p[n]) || p[n] == '_')
			n++;
		name = xasprintf("%.*s", (int)n, p);
		if (!has_family(scrape, name)) {
			char *why = xasprintf("%s: no such family in /metrics", name);
			free(name);
			return why;
		}
		p += n;
		if (*p == '{') {
			const char *close = strchr(p, '}');
			char *sel = close ? xasprintf("%.*s", (int)(close - p - 1), p + 1) : xstrdup("");
			for (char *save = NULL, *m = strtok_r(sel, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
				while (*m == ' ')
					m++;
				if (strstr(m, "=~") || strstr(m, "!=") || !strchr(m, '='))
					continue; /* a regex or negative matcher: the family is enough */
				if (!has_sample(scrape, name, ""))
					continue; /* a counter with no sample yet (no attempt has ended): the family is enough */
				if (!has_sample(scrape, name, m)) {
					char *why = xasprintf("%s{%s}: no sample has it", name, m);
					free(sel);
					free(name);
					return why;
				}
			}
			free(sel);
		}
		free(name);
	}
	return NULL;
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
	const json_t *v = json_object_get(o, a);
	return json_string_value(b ? json_object_get(v, b) : v);
}

static void test_rules(struct harness *h, const json_t *rules, const char *scrape)
{
	const json_t *g, *r;
	size_t i, k;
	int n = 0, complete = 0, known = 0;
	char *names = xstrdup(" ");

	json_array_foreach(json_object_get(rules, "groups"), i, g) {
		json_array_foreach(json_object_get(g, "rules"), k, r) {
			const char *alert = str_at(r, "alert", NULL), *expr = str_at(r, "expr", NULL);
			const char *sev = str_at(r, "labels", "severity"), *sum = str_at(r, "annotations", "summary");
			const char *desc = str_at(r, "annotations", "description");
			char *key = xasprintf(" %s ", alert ? alert : "?"), *why;
			n++;
			if (alert && !strncmp(alert, "Rung", 4) && expr && sev && (!strcmp(sev, "page") || !strcmp(sev, "ticket")) &&
			    sum && *sum && desc && *desc && !strstr(names, key))
				complete++;
			else
				h_diag("incomplete or repeated rule: %s", alert ? alert : "(no alert)");
			if (alert) {
				char *more = xasprintf("%s%s ", names, alert);
				free(names);
				names = more;
			}
			why = expr ? check_expr(expr, scrape) : xstrdup("no expr");
			if (!why)
				known++;
			else
				h_diag("%s: %s", alert ? alert : "?", why);
			free(why);
			free(key);
		}
	}
	h_ok(h, n >= 8, "the rules file has its rules (%d)", n);
	h_ok(h, complete == n, "each has a Rung* name of its own, an expr, severity page or ticket, a summary and a description");
	h_ok(h, known == n, "each expression reads only series and states rungd exports (%d of %d)", known, n);
	free(names);
}

/* Every panel of the dashboard: a title, a place (gridPos), and for a panel that draws (not a row)
 * the datasource variable and expressions that read only what rungd exports. */
static void test_dashboard(struct harness *h, const char *scrape)
{
	json_error_t jerr;
	json_t *dash = json_load_file(DASHBOARD, 0, &jerr), *p, *t;
	size_t i, k;
	int panels = 0, placed = 0, exprs = 0, known = 0;

	if (!h_ok(h, json_is_object(dash), "%s parses as JSON (%s)", DASHBOARD, json_is_object(dash) ? "ok" : jerr.text))
		return;
	h_ok(h, json_is_string(json_object_get(dash, "uid")) && json_is_string(json_object_get(dash, "title")),
	     "the dashboard has a uid and a title");
	json_array_foreach(json_object_get(dash, "panels"), i, p) {
		const char *type = json_string_value(json_object_get(p, "type")) ?: "";
		const char *ds = json_string_value(json_object_get(json_object_get(p, "datasource"), "uid"));
		panels++;
		if (json_is_string(json_object_get(p, "title")) && json_is_object(json_object_get(p, "gridPos")) &&
		    (!strcmp(type, "row") || (ds && !strcmp(ds, "${datasource}") && json_array_size(json_object_get(p, "targets")))))
			placed++;
		else
			h_diag("panel %zu: no title, place, datasource or target", i);
		json_array_foreach(json_object_get(p, "targets"), k, t) {
			const char *expr = json_string_value(json_object_get(t, "expr"));
			char *why = expr ? check_expr(expr, scrape) : xstrdup("no expr");
			exprs++;
			if (!why)
				known++;
			else
				h_diag("panel \"%s\": %s", json_string_value(json_object_get(p, "title")) ?: "?", why);
			free(why);
		}
	}
	h_ok(h, panels >= 10 && placed == panels, "each of the dashboard's %d panels has a title, a place and its datasource",
	     panels);
	h_ok(h, exprs >= 20 && known == exprs, "each of its expressions reads only series and states rungd exports (%d of %d)",
	     known, exprs);
	json_decref(dash);
}

/* The checker refuses what rungd does not export, so the test above can fail. */
static void test_checker(struct harness *h, const char *scrape)
{
	char *a = check_expr("max(rung_no_such_series) > 0", scrape);
	char *b = check_expr("max(rung_gpus{state=\"melted\"}) > 0", scrape);
	char *c = check_expr("max(rung_gpus{state=\"quarantined\"}) > 0 and max(rung_queue_depth) > 0", scrape);
	char *d = check_expr("rate(rung_queue_depth_bucket[5m])", scrape);

	h_ok(h, a && strstr(a, "rung_no_such_series"), "the checker refuses a series rungd does not export");
	h_ok(h, b && strstr(b, "melted"), "and a state no sample has");
	h_ok(h, c == NULL, "and passes a known series with a known state (%s)", c ? c : "ok");
	h_ok(h, d && strstr(d, "rung_queue_depth_bucket"), "and a _bucket of a family that is no histogram");
	free(d);
	free(a);
	free(b);
	free(c);
}

/* promtool on PATH (heap), or NULL. */
static char *promtool_path(void)
{
	char *path = getenv("PATH") ? xstrdup(getenv("PATH")) : xstrdup("/usr/bin:/bin"), *exe = NULL;

	for (char *save = NULL, *d = strtok_r(path, ":", &save); d && !exe; d = strtok_r(NULL, ":", &save)) {
		exe = xasprintf("%s/promtool", d);
		if (access(exe, X_OK) != 0) {
			free(exe);
			exe = NULL;
		}
	}
	free(path);
	return exe;
}

/* promtool check rules over the alerting rules, and over the dashboard's expressions written as
 * recording rules (so that promtool parses each as PromQL). */
static void test_promtool(struct harness *h, const char *dir)
{
	char *exe = promtool_path(), *exprs = xasprintf("%s/dashboard-rules.yml", dir);
	json_t *dash = json_load_file(DASHBOARD, 0, NULL), *p, *t;
	FILE *f;
	size_t i, k;
	int n = 0;

	if (!exe) {
		printf("ok - promtool check rules # SKIP promtool not installed (apt-get install prometheus)\n");
		printf("ok - promtool parses the dashboard's expressions # SKIP promtool not installed\n");
		printf("ok - promtool test rules # SKIP promtool not installed\n");
		fflush(stdout);
		goto out;
	}
	{
		const char *argv[] = { exe, "check", "rules", RULES, NULL };
		h_ok(h, h_run(h, argv) == 0, "promtool check rules accepts %s", RULES);
	}
	{
		/* the rules' behaviour: RungPoolWithoutGpus with borrowers, and beside replicas of the
		 * release before, which export no rung_pool_borrowing_gpus */
		const char *argv[] = { exe, "test", "rules", RULES_TEST, NULL };
		h_ok(h, h_run(h, argv) == 0, "promtool test rules %s", RULES_TEST);
	}
	f = fopen(exprs, "w");
	if (f) {
		fprintf(f, "groups:\n  - name: dashboard\n    rules:\n");
		json_array_foreach(json_object_get(dash, "panels"), i, p)
			json_array_foreach(json_object_get(p, "targets"), k, t) {
				char *e = json_dumps(json_object_get(t, "expr"), JSON_ENCODE_ANY); /* a JSON string is YAML */
				fprintf(f, "      - record: rung:dashboard_%d\n        expr: %s\n", n++, e ? e : "\"\"");
				free(e);
			}
		fclose(f);
	}
	{
		const char *argv[] = { exe, "check", "rules", exprs, NULL };
		h_ok(h, n > 0 && h_run(h, argv) == 0, "promtool parses the dashboard's %d expressions", n);
	}
out:
	json_decref(dash);
	free(exprs);
	free(exe);
}

int main(void)
{
	struct harness *h = h_new("it_alerts");
	char *err = NULL, *scrape = NULL;
	json_t *rules = yamljson_load_file(RULES, &err);
	long st = 0;

	if (!h_ok(h, json_is_object(rules), "%s parses as YAML (%s)", RULES, err ? err : "ok"))
		goto out;
	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		goto out;
	/* a queued job: the per-owner series get their samples */
	{
		json_t *cfg = h_config("alerts_owner", 10), *j = h_submit(h, cfg, NULL);
		h_ok(h, j && h->last_status == 201, "a job queued (%ld)", h->last_status);
		json_decref(j);
		json_decref(cfg);
	}
	json_decref(h_get(h, "/metrics", &st));
	scrape = st == 200 && h->last_body ? xasprintf("\n%s", h->last_body) : NULL;
	if (!h_ok(h, scrape && strstr(scrape, "\nrung_database_up 1"), "a scrape of /metrics with the database up (%ld)", st))
		goto out;
	test_checker(h, scrape);
	test_rules(h, rules, scrape);
	test_dashboard(h, scrape);
	test_promtool(h, h->tmp);
out:
	free(scrape);
	free(err);
	json_decref(rules);
	return h_free(h);
}
