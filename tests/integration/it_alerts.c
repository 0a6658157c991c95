/* Integration: the alerting rules shipped in deploy/prometheus/rung-alerts.yml name only what a real
 * rungd exports. Each rule is complete (alert, expr, severity page|ticket, summary, description);
 * every rung_* series an expression reads is a family in rungd's /metrics, and every label="value"
 * matcher on it matches a sample there (the by-state families list every state, 0 included). The
 * checker itself is shown to refuse a made-up series and a made-up state. `promtool check rules`
 * runs where promtool is installed (Debian's prometheus package); elsewhere that check says SKIP. */
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

/* Whether the scrape has family name: a "# TYPE name " line. */
static bool has_family(const char *scrape, const char *name)
{
	char *line = xasprintf("# TYPE %s ", name);
	bool ok = strstr(scrape, line) != NULL;

	free(line);
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

/* The checker refuses what rungd does not export, so the test above can fail. */
static void test_checker(struct harness *h, const char *scrape)
{
	char *a = check_expr("max(rung_no_such_series) > 0", scrape);
	char *b = check_expr("max(rung_gpus{state=\"melted\"}) > 0", scrape);
	char *c = check_expr("max(rung_gpus{state=\"quarantined\"}) > 0 and max(rung_queue_depth) > 0", scrape);

	h_ok(h, a && strstr(a, "rung_no_such_series"), "the checker refuses a series rungd does not export");
	h_ok(h, b && strstr(b, "melted"), "and a state no sample has");
	h_ok(h, c == NULL, "and passes a known series with a known state (%s)", c ? c : "ok");
	free(a);
	free(b);
	free(c);
}

static void test_promtool(struct harness *h)
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
	if (!exe) {
		printf("ok - promtool check rules # SKIP promtool not installed (apt-get install prometheus)\n");
		fflush(stdout);
		return;
	}
	{
		const char *argv[] = { exe, "check", "rules", RULES, NULL };
		h_ok(h, h_run(h, argv) == 0, "promtool check rules accepts %s", RULES);
	}
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
	json_decref(h_get(h, "/metrics", &st));
	scrape = st == 200 && h->last_body ? xasprintf("\n%s", h->last_body) : NULL;
	if (!h_ok(h, scrape && strstr(scrape, "\nrung_database_up 1"), "a scrape of /metrics with the database up (%ld)", st))
		goto out;
	test_checker(h, scrape);
	test_rules(h, rules, scrape);
	test_promtool(h);
out:
	free(scrape);
	free(err);
	json_decref(rules);
	return h_free(h);
}
