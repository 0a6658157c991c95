/* Integration: versions, for a fleet upgraded host by host. `--version` of bin/rungd, bin/rung-worker
 * and bin/rungctl (exit 0, "NAME VERSION", the same build's version); /healthz's version and schema
 * (the highest migration's number); who says which version to whom (User-Agent of rungctl,
 * rung-worker and rungd's webhooks, the worker's registration body, seen by a receiver standing in
 * for rungd or a webhook's endpoint); registration with a version, without, null, bad ones (400
 * naming version), a re-registration replacing it, GET /v1/workers, rungd's log line for a worker on
 * another version; /metrics' rung_build_info and rung_workers_by_version (live workers only, labels
 * escaped); rungctl workers' VERSION column and the GPUs page (escaped). Real binaries and Postgres. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "receiver.h"
#include "util.h"
#include "version.h"


/* `bin/PROG --version`: exit 0 and one line "PROG VERSION"; returns VERSION (heap) or NULL. */
static char *version_of(struct harness *h, const char *prog)
{
	char *cmd = xasprintf("bin/%s --version", prog), *out, *v = NULL;
	size_t pl = strlen(prog), len;
	int rc = -1;

	out = h_shell(h, cmd, &rc);
	len = strlen(out);
	if (h_ok(h, rc == 0 && len > pl + 2 && !strncmp(out, prog, pl) && out[pl] == ' ' && out[len - 1] == '\n' &&
			    !strchr(out + pl + 1, ' ') && strchr(out, '\n') == out + len - 1,
		 "%s --version: exit 0 and one line \"%s VERSION\" (rc %d)", prog, prog, rc))
		v = xasprintf("%.*s", (int)(len - pl - 2), out + pl + 1);
	else
		h_diag("%s --version printed: %.200s", prog, out);
	free(out);
	free(cmd);
	return v;
}

static void test_version_flags(struct harness *h, char **version)
{
	char *d = version_of(h, "rungd"), *w = version_of(h, "rung-worker"), *c = version_of(h, "rungctl"), *out;
	int rc = -1;

	h_ok(h, d && w && c && !strcmp(d, w) && !strcmp(d, c), "the three binaries print the same version (%s)",
	     d ? d : "none");
	out = h_shell(h, "bin/rungd --help", &rc);
	h_ok(h, rc == 0 && strstr(out, "--version"), "rungd --help lists --version");
	free(out);
	out = h_shell(h, "bin/rung-worker --help", &rc);
	h_ok(h, rc == 0 && strstr(out, "--version"), "rung-worker --help lists --version");
	free(out);
	out = h_shell(h, "bin/rungctl --help", &rc);
	h_ok(h, rc == 0 && strstr(out, "--version"), "rungctl --help lists --version");
	free(out);
	out = h_shell(h, "RUNG_LEASE_SECONDS=bogus bin/rungd migrate --version", &rc);
	h_ok(h, rc == 0 && d && !strncmp(out, "rungd ", 6) && strstr(out, d),
	     "rungd migrate --version: the version, no migration, a bad variable not read (rc %d)", rc);
	free(out);
	out = h_shell(h, "bin/rungctl --url http://127.0.0.1:1 --version", &rc);
	h_ok(h, rc == 0 && c && strstr(out, c), "rungctl --url U --version: the version, no server asked (rc %d)", rc);
	free(out);
	*version = d;
	free(w);
	free(c);
}

/* The receiver's first request whose path starts with path and whose User-Agent starts with agent:
 * that User-Agent and its body into *got_agent and *got_body (heap, may be NULL); false when none came. */
static bool recv_find(struct receiver *r, const char *path, const char *agent, char **got_agent, char **got_body)
{
	bool found = false;

	pthread_mutex_lock(&r->mu);
	for (int i = 0; i < r->got && i < RECV_MAX && !found; i++)
		if (!strncmp(r->paths[i], path, strlen(path)) && !strncmp(r->agents[i], agent, strlen(agent))) {
			if (got_agent)
				*got_agent = xstrdup(r->agents[i]);
			if (got_body)
				*got_body = xstrdup(r->bodies[i]);
			found = true;
		}
	pthread_mutex_unlock(&r->mu);
	return found;
}

struct recv_wait_for {
	struct receiver *r;
	const char *path, *agent;
};

static bool recv_came(void *arg)
{
	struct recv_wait_for *w = arg;
	return recv_find(w->r, w->path, w->agent, NULL, NULL);
}

/* Checks that a request to path came from `prog/VERSION`; returns its body (heap) or NULL. */
static char *check_agent(struct harness *h, struct receiver *rc, const char *path, const char *prog,
			 const char *version, const char *what)
{
	char *prefix = xasprintf("%s/", prog), *want = xasprintf("%s/%s", prog, version), *agent = NULL, *body = NULL;
	struct recv_wait_for w = { rc, path, prefix };

	if (wait_until(recv_came, &w, 20000))
		recv_find(rc, path, prefix, &agent, &body);
	if (!h_ok(h, agent && !strcmp(agent, want), "%s: User-Agent: %s", what, want))
		h_diag("got User-Agent %s", agent ? agent : "(no request from it)");
	free(agent);
	free(want);
	free(prefix);
	return body;
}

/* rungctl and rung-worker pointed at the receiver say who they are; the worker registers with its
 * version; rungd's webhook deliveries say who sends them. */
static void test_agents(struct harness *h, struct receiver *rc, const char *version)
{
	char *url = xasprintf("http://127.0.0.1:%d", rc->port), *cmd = xasprintf("bin/rungctl --url %s workers", url);
	const char *args[] = { "--server", url, NULL };
	struct h_worker_opts wo = { .args = args };
	struct h_worker *w;
	json_t *cfg = h_config("agent", 10), *job = NULL, *doc = NULL;
	char *id = NULL, *body;
	long st = 0;
	int rc_ = -1;

	free(h_shell(h, cmd, &rc_));
	free(check_agent(h, rc, "/v1/workers", "rungctl", version, "rungctl"));

	w = h_worker_start(h, "agent-w", &wo);
	body = check_agent(h, rc, "/v1/workers", "rung-worker", version, "rung-worker's registration");
	doc = body ? json_loads(body, 0, NULL) : NULL;
	h_ok(h, doc && !strcmp(h_str(doc, "version"), version) && json_is_array(json_object_get(doc, "gpus")),
	     "its registration carries \"version\": VERSION beside its GPUs");
	json_decref(doc);
	free(body);
	if (w)
		h_worker_stop(h, w, SIGKILL);

	/* a queued job cancelled: its job.cancelled webhook comes from rungd/VERSION */
	job = h_submit(h, cfg, NULL);
	id = h_id(job, "id");
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id ? id : "0"));
	h_ok(h, st == 200, "a queued job cancelled (%ld)", st);
	free(check_agent(h, rc, "/hook", "rungd", version, "rungd's job webhook"));
	free(id);
	json_decref(job);
	json_decref(cfg);
	free(cmd);
	free(url);
}

/* POST /v1/workers as a fake worker named name with one GPU, "version": version (json_null() for
 * null, NULL for none; stolen); returns the status, the worker's id into *id (heap) when given. */
static long reg(struct harness *h, const char *name, json_t *version, char **id)
{
	char *uuid = xasprintf("GPU-ver-%s", name);
	json_t *body = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", name, "host", "ver-host", "gpus", "uuid",
				 uuid, "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 24576), *ans;
	long st = 0;

	if (version)
		json_object_set_new(body, "version", version);
	ans = h_post(h, "/v1/workers", body, &st);
	if (id)
		*id = h_id(ans, "id");
	json_decref(ans);
	json_decref(body);
	free(uuid);
	return st;
}

/* The worker named name as GET /v1/workers lists it (new reference) or NULL. */
static json_t *listed(struct harness *h, const char *name)
{
	long st = 0;
	json_t *all = h_get(h, "/v1/workers", &st), *w, *found = NULL;
	size_t i;

	json_array_foreach(json_object_get(all, "workers"), i, w)
		if (!strcmp(h_str(w, "name"), name))
			found = json_incref(w);
	json_decref(all);
	return found;
}

/* How many lines of rungd's log hold every one of the (NULL-terminated) strings. */
static int log_lines(struct harness *h, ...)
{
	char *text = h_slurp(h->server.log_path), *line = text, *nl;
	int n = 0;

	for (; line && *line; line = nl ? nl + 1 : line + strlen(line)) {
		const char *s;
		bool all = true;
		va_list ap;

		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		va_start(ap, h);
		while (all && (s = va_arg(ap, const char *)) != NULL)
			all = strstr(line, s) != NULL;
		va_end(ap);
		n += all;
	}
	free(text);
	return n;
}

/* Registration with a version, without one, with this rungd's, with null; a re-registration
 * replaces it; bad ones are refused naming "version" and store nothing; GET /v1/workers lists it;
 * rungd logs a line for each worker on another version. */
static void test_registration(struct harness *h, const char *version)
{
	static const char *const bad_text[] = { "", "a\nb", "tab\there", "v1-\xc3\xa9", "del\x7f" };
	char *id = NULL, *want, long_v[RUNG_VERSION_MAX + 2];
	json_t *w;
	long long before;
	size_t i;

	h_ok(h, reg(h, "ver-old", json_string("old-1.0"), &id) == 201, "register with \"version\": 201");
	w = listed(h, "ver-old");
	h_ok(h, w && !strcmp(h_str(w, "version"), "old-1.0"), "GET /v1/workers lists its version");
	json_decref(w);
	want = xasprintf("worker=%s ", id ? id : "?");
	h_ok(h, log_lines(h, "worker runs another version than this rungd", want, "name=\"ver-old\"",
			  "version=\"old-1.0\"", "rungd_version=", NULL) == 1,
	     "rungd logs one line: the worker runs another version than its own");
	h_ok(h, log_lines(h, "level=info", "worker runs another version", want, NULL) == 1, "at level info, not an error");
	free(want);
	free(id);

	h_ok(h, reg(h, "ver-none", NULL, &id) == 201, "register without a version (a worker from before): 201");
	w = listed(h, "ver-none");
	h_ok(h, w && json_is_null(json_object_get(w, "version")), "listed with \"version\": null");
	json_decref(w);
	want = xasprintf("worker=%s ", id ? id : "?");
	h_ok(h, log_lines(h, "worker runs another version", want, "version=\"unknown\"", NULL) == 1,
	     "a worker without a version is logged as on another version (unknown)");
	free(want);
	free(id);

	h_ok(h, reg(h, "ver-same", json_string(version), &id) == 201, "register with this rungd's version: 201");
	want = xasprintf("worker=%s ", id ? id : "?");
	h_ok(h, log_lines(h, "worker runs another version", want, NULL) == 0 &&
		     log_lines(h, "worker registered", want, NULL) == 1,
	     "no line for a worker on rungd's own version (the registration's line only)");
	free(want);
	free(id);

	h_ok(h, reg(h, "ver-null", json_null(), NULL) == 201, "\"version\": null reads as none: 201");
	w = listed(h, "ver-null");
	h_ok(h, w && json_is_null(json_object_get(w, "version")), "listed with \"version\": null");
	json_decref(w);

	h_ok(h, reg(h, "ver-old", json_string("new-2.0"), NULL) == 200, "the same name re-registers with another version: 200");
	w = listed(h, "ver-old");
	h_ok(h, w && !strcmp(h_str(w, "version"), "new-2.0"), "its version is replaced");
	json_decref(w);
	h_ok(h, reg(h, "ver-old", NULL, NULL) == 200, "and again without one (rolled back to an old build)");
	w = listed(h, "ver-old");
	h_ok(h, w && json_is_null(json_object_get(w, "version")), "its version is null again, not the stale one");
	json_decref(w);

	memset(long_v, 'v', sizeof long_v);
	long_v[RUNG_VERSION_MAX] = '\0';
	h_ok(h, reg(h, "ver-64", json_string(long_v), NULL) == 201, "64 characters accepted");
	before = h_sql_int(h, "SELECT count(*) FROM workers", 0, NULL);
	long_v[RUNG_VERSION_MAX] = 'v';
	long_v[RUNG_VERSION_MAX + 1] = '\0';
	{
		json_t *bad[ARRAY_LEN(bad_text) + 3];
		const char *what[ARRAY_LEN(bad_text) + 3] = { "empty", "a newline", "a tab", "non-ASCII", "DEL",
							      "65 characters", "a number", "an object" };
		for (i = 0; i < ARRAY_LEN(bad_text); i++)
			bad[i] = json_string(bad_text[i]);
		bad[i++] = json_string(long_v);
		bad[i++] = json_integer(7);
		bad[i++] = json_pack("{s:s}", "git", "abc");
		for (i = 0; i < ARRAY_LEN(bad); i++) {
			char *name = xasprintf("ver-bad-%zu", i);
			char *uuid = xasprintf("GPU-ver-%s", name);
			json_t *body = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}], s:o}", "name", name, "host", "h", "gpus",
						 "uuid", uuid, "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 24576,
						 "version", bad[i]);
			long st = 0;
			json_t *ans = h_post(h, "/v1/workers", body, &st);
			h_ok(h, st == 400 && !strcmp(h_str(ans, "field"), "version") && !strcmp(h_str(ans, "error"), "invalid_request") &&
				     strstr(h_str(ans, "message"), "printable ASCII"),
			     "a version that is %s: 400 naming the field version (%ld)", what[i], st);
			json_decref(ans);
			json_decref(body);
			free(uuid);
			free(name);
		}
	}
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM workers", 0, NULL) == before, "a refused registration stores nothing");
}

/* A real rung-worker registers with the version it was built with: rungd's, so no line for it. */
struct listed_as {
	struct harness *h;
	const char *name, *version;
};

static bool is_listed(void *arg)
{
	struct listed_as *l = arg;
	json_t *w = listed(l->h, l->name);
	bool ok = w && !strcmp(h_str(w, "version"), l->version);

	json_decref(w);
	return ok;
}

static void test_real_worker(struct harness *h, const char *version)
{
	struct h_worker *w = h_worker_start(h, "ver-real", NULL);
	struct listed_as l = { h, "ver-real", version };

	h_ok(h, w && wait_until(is_listed, &l, 20000), "a real rung-worker is listed with its build's version");
	h_ok(h, log_lines(h, "worker runs another version", "name=\"ver-real\"", NULL) == 0,
	     "no other-version line for it: it runs rungd's build");
}

/* The highest NNN of the tree's migrations/NNN_name.sql: what a database rungd migrated is at. */
static long highest_migration(struct harness *h)
{
	char *cmd = xasprintf("ls %s/migrations", h->root), *out;
	long best = -1;
	int rc = -1;

	out = h_shell(h, cmd, &rc);
	for (char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
		if (*p >= '0' && *p <= '9' && strtol(p, NULL, 10) > best)
			best = strtol(p, NULL, 10);
	free(out);
	free(cmd);
	return best;
}

/* GET /healthz says rungd's version (the one --version prints) and the schema's number: the highest
 * migration applied, a gap in the numbering included. */
static void test_healthz(struct harness *h, const char *version)
{
	long st = 0, want = highest_migration(h);
	json_t *j = h_get(h, "/healthz", &st), *schema = json_object_get(j, "schema");

	h_ok(h, st == 200 && json_is_true(json_object_get(j, "ok")) && !strcmp(h_str(j, "database"), "up"),
	     "healthz: 200, ok, database up");
	h_ok(h, !strcmp(h_str(j, "version"), version), "healthz: \"version\" is what rungd --version prints (%s)",
	     h_str(j, "version"));
	h_ok(h, json_is_integer(schema) && json_integer_value(schema) == want && want >= 24,
	     "healthz: \"schema\" is the highest migration's number, %ld (got %lld)", want,
	     (long long)json_integer_value(schema));
	h_ok(h, h_sql_int(h, "SELECT max(left(name, 3)::int) FROM schema_migrations", 0, NULL) == want,
	     "the same as schema_migrations' highest");
	json_decref(j);
}

/* /metrics: rung_build_info{version=rungd's} 1; rung_workers_by_version counts the live workers
 * (online or draining, seen in the last 10 minutes) per version, "unknown" for none, the label
 * escaped as the text format wants. */
static void test_metrics(struct harness *h, const char *version)
{
	const char *odd = "m \"rc\" \\ 1"; /* m "rc" \ 1: a quote and a backslash to escape */
	char *ids[4] = { NULL }, *line, *scrape;
	long st = 0;
	long long unknown;

	h_ok(h, reg(h, "ver-m-a", json_string(odd), &ids[0]) == 201 && reg(h, "ver-m-b", json_string(odd), &ids[1]) == 201 &&
		     reg(h, "ver-m-c", json_string(odd), &ids[2]) == 201 && reg(h, "ver-m-d", json_string(odd), &ids[3]) == 201,
	     "four workers registered with a version holding a quote and a backslash");
	json_decref(h_postf(h, NULL, &st, "/v1/workers/%s/drain", ids[1] ? ids[1] : "0"));
	h_ok(h, st == 200, "one drained (still live)");
	{
		const char *p[2] = { ids[2] ? ids[2] : "0", ids[3] ? ids[3] : "0" };
		PQclear(h_sql(h, "UPDATE workers SET last_seen_at = now() - interval '11 minutes' WHERE id = $1::bigint", 1, p));
		PQclear(h_sql(h, "UPDATE workers SET state = 'offline' WHERE id = $1::bigint", 1, p + 1));
	}
	unknown = h_sql_int(h, "SELECT count(*) FROM workers WHERE version IS NULL AND state <> 'offline' "
			       "AND last_seen_at > now() - interval '10 minutes'", 0, NULL);

	json_decref(h_get(h, "/metrics", &st));
	scrape = h->last_body ? xstrdup(h->last_body) : NULL;
	h_ok(h, st == 200 && scrape, "GET /metrics: 200");
	h_ok(h, scrape && strstr(scrape, "# TYPE rung_build_info gauge\n"), "rung_build_info is a gauge");
	line = xasprintf("rung_build_info{version=\"%s\"}", version);
	h_ok(h, h_sample(scrape, line) == 1, "%s 1", line);
	free(line);
	h_ok(h, scrape && strstr(scrape, "# TYPE rung_workers_by_version gauge\n"), "rung_workers_by_version is a gauge");
	h_ok(h, h_sample(scrape, "rung_workers_by_version{version=\"m \\\"rc\\\" \\\\ 1\"}") == 2,
	     "rung_workers_by_version{version=\"m \\\"rc\\\" \\\\ 1\"} 2: the online and the drained one, "
	     "escaped; not the one unseen for 11 minutes nor the offline one");
	h_ok(h, unknown >= 3 && h_sample(scrape, "rung_workers_by_version{version=\"unknown\"}") == (double)unknown,
	     "rung_workers_by_version{version=\"unknown\"} %lld: the live ones that sent none", unknown);
	line = xasprintf("rung_workers_by_version{version=\"%s\"}", version);
	h_ok(h, h_sample(scrape, line) >= 1, "%s: the real worker and the one registered with rungd's version", line);
	free(line);
	free(scrape);
	for (int i = 0; i < 4; i++)
		free(ids[i]);
}

/* rungctl workers has a VERSION column with each worker's version ("-" for none); the GPUs page's
 * workers table shows it, HTML-escaped, beside this rungd's. */
static void test_lists(struct harness *h, const char *version)
{
	const char *html_v = "<b>x</b>&1";
	char *out, *row, *want;
	int rc = -1;
	long st;

	h_ok(h, reg(h, "ver-html", json_string(html_v), NULL) == 201, "a worker registered with <b>x</b>&1");
	out = h_rungctl(h, "workers", &rc);
	row = out ? strstr(out, "ver-html") : NULL;
	h_ok(h, rc == 0 && strstr(out, " VERSION ") && row && strstr(row, html_v) &&
		     strstr(row, html_v) < (strchr(row, '\n') ? strchr(row, '\n') : row + strlen(row)),
	     "rungctl workers: a VERSION column, the worker's version on its row");
	row = out ? strstr(out, "ver-none") : NULL;
	h_ok(h, row && strstr(row, " - "), "rungctl workers: - for a worker that sent none");
	free(out);

	st = h_browse(h, h->admin_token, "GET", "/ui/gpus", NULL, NULL);
	h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "<th>version</th>"),
	     "the GPUs page's workers table has a version column");
	h_ok(h, h->last_body && strstr(h->last_body, "&lt;b&gt;x&lt;/b&gt;&amp;1") && !strstr(h->last_body, html_v),
	     "the version shown HTML-escaped");
	want = xasprintf("This rungd runs <code>%s</code>", version);
	h_ok(h, h->last_body && strstr(h->last_body, want), "and this rungd's own beside them");
	free(want);
}

/* rungctl version: its own version, then the server's and its schema from /healthz; without a
 * server its own and exit 3. */
static void test_rungctl_version(struct harness *h, const char *d)
{
	const char *c = d; /* the three binaries print the same version (test_version_flags) */
	char *out;
	int rc = -1;
	char *cmd = xasprintf("bin/rungctl --url %s version", h->base_url), *want_d = xasprintf("rungd %s (", d ? d : "?");
	char *want_c = xasprintf("rungctl %s\n", c ? c : "?");
	long st = 0;
	json_t *hz = h_get(h, "/healthz", &st);
	char *want_s = xasprintf(", schema %lld)\n", (long long)json_integer_value(json_object_get(hz, "schema")));
	json_decref(hz);
	out = h_shell(h, cmd, &rc);
	h_ok(h, rc == 0 && d && c && !strncmp(out, want_c, strlen(want_c)) && strstr(out, want_d) && strstr(out, want_s),
	     "rungctl version: its own and the server's, with the schema (%s)", out);
	free(out);
	free(cmd);
	free(want_d);
	free(want_c);
	free(want_s);
	out = h_shell(h, "bin/rungctl --url http://127.0.0.1:1 version", &rc);
	h_ok(h, rc == 3 && c && strstr(out, c), "rungctl version without a server: its own, then exit 3 (rc %d)", rc);
	free(out);
}

int main(void)
{
	struct harness *h = h_new("it_version");
	struct receiver rc = { 0 };
	char *version = NULL, *hook = NULL;

	pthread_mutex_init(&rc.mu, NULL);
	test_version_flags(h, &version);
	if (!version)
		version = xstrdup("?");
	rc.port = unused_port();
	hook = xasprintf("http://127.0.0.1:%d/hook", rc.port);
	if (!h_ok(h, rc.port > 0 && recv_start(&rc) == 0, "receiver listening"))
		goto out;
	{
		const char *flags[] = { "--job-webhook", hook, "--webhook-poll-ms", "50", NULL };
		if (!h_ok(h, h_server_start(h, flags) == 0, "rungd starts"))
			goto out;
	}
	test_healthz(h, version);
	test_rungctl_version(h, version);
	test_agents(h, &rc, version);
	test_registration(h, version);
	test_real_worker(h, version);
	test_metrics(h, version);
	test_lists(h, version);
out:
	recv_stop(&rc);
	free(hook);
	free(version);
	return h_free(h);
}
