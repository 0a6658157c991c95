/* Integration: the real bin/rungctl against a real rungd, Postgres and simulated worker, one run per
 * command: submit (YAML fixture, JSON file, recovery options, --set and --sweep), jobs, show, attempts, events, watch
 * (plain lines when not a tty; exit 0/1), cancel, retry, pool, drain, resume, escalations, report, ack, resolve, workers, gpus,
 * gpu release, classify, token create/list/revoke, --json and --help everywhere, the exit codes; and
 * raw AI Toolkit bodies (YAML and JSON without the envelope) POSTed over libcurl with query options. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "jpath.h"
#include "util.h"
#include "yamljson.h"

#define FIXTURE_YAML "tests/data/aitk_flux_lora_24gb.yaml"
#define FAKE_GPU "GPU-cli-0"
#define MAX_ARGS 32

/* What the last rungctl run printed (heap, replaced by the next run). */
static char *g_out, *g_err;

/* Runs bin/rungctl ARGS... (NULL-terminated) with RUNG_URL set to the harness's rungd and RUNG_TOKEN
 * to token (NULL: unset), stdin from in (NULL: /dev/null), and extra env "K=V" (NULL-terminated or
 * NULL). Returns the exit status (128+signal when killed); output in g_out/g_err. */
static int ctl_env(struct harness *h, const char *token, const char *in, const char *const *env, ...)
{
	const char *argv[MAX_ARGS + 2];
	char *bin = xasprintf("%s/bin/rungctl", h->root);
	char *out_path = xasprintf("%s/ctl.out", h->tmp), *err_path = xasprintf("%s/ctl.err", h->tmp);
	va_list ap;
	int n = 0, st = 0, rc = -1;
	pid_t pid;

	argv[n++] = bin;
	va_start(ap, env);
	for (const char *a; n < MAX_ARGS && (a = va_arg(ap, const char *)) != NULL;)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fi = open(in ? in : "/dev/null", O_RDONLY);
		if (fo < 0 || fe < 0 || fi < 0)
			_exit(126);
		dup2(fi, 0);
		dup2(fo, 1);
		dup2(fe, 2);
		setenv("RUNG_URL", h->base_url ? h->base_url : "http://127.0.0.1:1", 1);
		if (token)
			setenv("RUNG_TOKEN", token, 1);
		else
			unsetenv("RUNG_TOKEN");
		for (size_t i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		signal(SIGPIPE, SIG_DFL);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	if (pid > 0) {
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
	free(g_out);
	free(g_err);
	g_out = h_slurp(out_path);
	g_err = h_slurp(err_path);
	if (rc != 0 && rc != 1 && rc != 2 && rc != 3 && rc != 4)
		h_diag("rungctl exited %d; stderr: %s", rc, g_err);
	free(bin);
	free(out_path);
	free(err_path);
	return rc;
}

#define ctl(h, ...) ctl_env((h), (h)->admin_token, NULL, NULL, __VA_ARGS__, NULL)
#define ctl_as(h, token, ...) ctl_env((h), (token), NULL, NULL, __VA_ARGS__, NULL)

/* g_out parsed as JSON (new reference) or NULL. */
static json_t *out_json(void)
{
	return json_loads(g_out, 0, NULL);
}

/* The first line of g_out without its newline (heap). */
static char *out_line(void)
{
	size_t n = strcspn(g_out, "\n");
	char *s = xmalloc(n + 1);
	memcpy(s, g_out, n);
	s[n] = '\0';
	return s;
}

static bool is_digits(const char *s)
{
	return s && *s && strspn(s, "0123456789") == strlen(s);
}

/* True when v is not NULL; drops the reference. */
static bool took(json_t *v)
{
	json_decref(v);
	return v != NULL;
}

/* config.process[0].train.lr of a job's target_config (borrowed) or NULL. */
static json_t *job_lr(const json_t *job)
{
	json_t *p = json_object_get(json_object_get(json_object_get(job, "target_config"), "config"), "process");
	return json_object_get(json_object_get(json_array_get(p, 0), "train"), "lr");
}

static size_t on_curl_body(char *p, size_t sz, size_t n, void *arg)
{
	char **buf = arg;
	size_t old = *buf ? strlen(*buf) : 0;
	*buf = xrealloc(*buf, old + sz * n + 1);
	memcpy(*buf + old, p, sz * n);
	(*buf)[old + sz * n] = '\0';
	return sz * n;
}

/* POSTs body (len bytes) to path with Content-Type ctype and the admin token over its own libcurl
 * handle (the harness always sends application/json); returns the JSON answer (new ref) or NULL. */
static json_t *raw_post(struct harness *h, const char *path, const char *ctype, const char *body, size_t len,
	long *status)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hl = NULL;
	char *url = xasprintf("%s%s", h->base_url, path), *auth = xasprintf("Authorization: Bearer %s", h->admin_token);
	char *ct = xasprintf("Content-Type: %s", ctype), *buf = NULL;
	json_t *ans = NULL;

	*status = 0;
	hl = curl_slist_append(hl, ct);
	hl = curl_slist_append(hl, auth);
	hl = curl_slist_append(hl, "Expect:");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_curl_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &buf);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	ans = buf ? json_loads(buf, 0, NULL) : NULL;
	if (!ans && buf)
		h_diag("non-JSON answer: %.300s", buf);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	free(buf);
	free(url);
	free(auth);
	free(ct);
	return ans;
}

static void test_help_and_usage(struct harness *h)
{
	static const char *const cmds[][2] = { { "submit", NULL }, { "jobs", NULL }, { "show", NULL },
		{ "attempts", NULL }, { "events", NULL }, { "cancel", NULL }, { "retry", NULL }, { "priority", NULL }, { "pool", NULL }, { "watch", NULL }, { "logs", NULL },
		{ "escalations", NULL }, { "report", NULL }, { "ack", NULL }, { "resolve", NULL },
		{ "workers", NULL }, { "drain", NULL }, { "resume", NULL }, { "gpus", NULL }, { "gpu", "release" }, { "token", "create" },
		{ "token", "list" }, { "token", "revoke" }, { "token", "limit" }, { "token", "pools" }, { "plan", NULL }, { "classify", NULL } };

	h_ok(h, ctl(h, "--help") == 0 && strstr(g_out, "exit codes") && strstr(g_out, "gpu release"),
		"rungctl --help: exit 0, lists commands and exit codes");
	for (size_t i = 0; i < ARRAY_LEN(cmds); i++) {
		int rc = cmds[i][1] ? ctl(h, cmds[i][0], cmds[i][1], "--help") : ctl(h, cmds[i][0], "--help");
		char *want = xasprintf("usage: rungctl %s%s%s", cmds[i][0], cmds[i][1] ? " " : "",
			cmds[i][1] ? cmds[i][1] : "");
		h_ok(h, rc == 0 && strstr(g_out, want), "%s --help: exit 0 and its usage (rc %d)", want + 15, rc);
		free(want);
	}
	h_ok(h, ctl(h, "frobnicate") == 2 && strstr(g_err, "unknown command"), "unknown command: exit 2");
	h_ok(h, ctl(h, "show") == 2 && strstr(g_err, "missing argument"), "missing operand: exit 2");
	h_ok(h, ctl(h, "jobs", "--limit", "0") == 2, "out-of-range option: exit 2");
	h_ok(h, ctl(h, "submit", "tests/data/does-not-exist.yaml") == 2 && strstr(g_err, "No such file"),
		"unreadable config file: exit 2");
	h_ok(h, ctl(h, "submit", "tests/data/yaml_malformed.yaml") == 2 && strstr(g_err, "line "),
		"malformed YAML file: exit 2 with the line");
	h_ok(h, ctl(h, "ack", "1") == 2 && strstr(g_err, "--note"), "ack without --note: exit 2");
	h_ok(h, ctl(h, "token", "create") == 2 && strstr(g_err, "--role"), "token create without --role: exit 2");
	h_ok(h, ctl(h, "--url", "http://127.0.0.1:1", "jobs") == 3 && strstr(g_err, "cannot reach"),
		"unreachable server: exit 3");
	h_ok(h, ctl(h, "show", "999999") == 4 && strstr(g_err, "404"), "unknown job: exit 4");
	h_ok(h, ctl(h, "logs", "999999") == 4 && strstr(g_err, "404"), "logs of an unknown job: exit 4");
	h_ok(h, ctl(h, "logs", "1", "--attempt", "0") == 2, "logs --attempt 0: exit 2");
	h_ok(h, ctl_as(h, NULL, "jobs") == 1 && strstr(g_err, "401"), "no token: refused, exit 1");
	h_ok(h, ctl_as(h, h->submitter_token, "workers") == 1 && strstr(g_err, "403"),
		"submitter token on workers: refused (403), exit 1");
}

/* True when every job of a GET /v1/jobs answer has owner `owner` and kind `kind` (NULL: any). */
static bool jobs_all(const json_t *ans, const char *owner, const char *kind)
{
	const json_t *jb;
	size_t i;

	if (!json_is_array(json_object_get(ans, "jobs")))
		return false;
	json_array_foreach(json_object_get(ans, "jobs"), i, jb)
		if ((owner && strcmp(h_str(jb, "owner"), owner)) || (kind && strcmp(h_str(jb, "kind"), kind)))
			return false;
	return true;
}

/* Writes h_config(name, steps) to a temp .json file; returns its path (heap). */
static char *config_file(struct harness *h, const char *name, int steps)
{
	json_t *cfg = h_config(name, steps);
	char *path = xasprintf("%s/%s.json", h->tmp, name);
	json_dump_file(cfg, path, JSON_INDENT(2));
	json_decref(cfg);
	return path;
}

/* Submits a JSON config with options; jobs, show, attempts, events (tables and --json); cancel;
 * watch of the cancelled job exits 1. */
static void test_job_commands(struct harness *h)
{
	char *cfg = config_file(h, "cli_json", 30), *id = NULL;
	json_t *j = NULL;

	int rc = ctl(h, "submit", cfg, "--name", "cli json job", "--priority", "7", "--max-attempts", "2",
		"--validate-steps", "10", "--no-scale-up", "--labels", "team=vision,project=cli");
	id = out_line();
	h_ok(h, rc == 0 && is_digits(id), "submit JSON file: exit 0, prints the id (%s)", id);
	h_ok(h, ctl(h, "show", id, "--json") == 0 && (j = out_json()) != NULL, "show --json parses");
	json_t *rec = json_object_get(j, "recovery");
	h_ok(h, h_int(j, "priority") == 7 && !strcmp(h_str(j, "name"), "cli json job"), "--priority and --name sent");
	h_ok(h, h_int(rec, "max_attempts") == 2 && h_int(rec, "validate_steps") == 10 &&
		json_is_false(json_object_get(rec, "scale_up")), "--max-attempts, --validate-steps, --no-scale-up sent");
	h_ok(h, !strcmp(h_str(json_object_get(j, "labels"), "team"), "vision") &&
		!strcmp(h_str(json_object_get(j, "labels"), "project"), "cli"), "--labels sent");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "show", id) == 0 && strstr(g_out, "state") && strstr(g_out, "queued") &&
		strstr(g_out, "current = target"), "show: summary and no config changes");
	h_ok(h, ctl(h, "show", id) == 0 && strstr(g_out, "\nlabels            project=cli,team=vision\n"),
	     "show: the labels, sorted");
	h_ok(h, ctl(h, "jobs", "--label", "project=cli", "--json") == 0 && (j = out_json()) &&
		json_array_size(json_object_get(j, "jobs")) == 1 && strstr(g_out, "cli json job"),
	     "jobs --label project=cli: this job alone");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "jobs", "--label", "project=nope") == 0 && !strstr(g_out, "cli json job"),
	     "jobs --label project=nope: not listed");
	h_ok(h, ctl(h, "submit", cfg, "--labels", "team") == 2 && strstr(g_err, "--labels"),
	     "submit --labels team: usage error naming --labels, exit 2");
	rc = ctl(h, "show", id); /* before h_ok: its arguments read g_out */
	h_ok(h, rc == 0 && strstr(g_out, "\nqueue             ") && strstr(g_out, " ahead of it in the queue\n"),
	     "show of a queued job: its place in the queue (%s)", strstr(g_out, "\nqueue") ? strstr(g_out, "\nqueue") + 1 : "");
	h_ok(h, ctl(h, "jobs", "--state", "queued") == 0 && strstr(g_out, "ID") && strstr(g_out, "cli json job"),
		"jobs --state queued: a table with the job");
	h_ok(h, ctl(h, "jobs", "--state", "succeeded") == 0 && !strstr(g_out, "cli json job"),
		"jobs --state succeeded: not listed");
	h_ok(h, ctl(h, "jobs", "--state", "bogus") == 1 && strstr(g_err, "400"), "jobs --state bogus: 400, exit 1");
	h_ok(h, ctl(h, "jobs", "--json") == 0 && (j = out_json()) && json_array_size(json_object_get(j, "jobs")) >= 1,
		"jobs --json parses");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "jobs", "--owner", "it-admin", "--kind", "image", "--json") == 0 && (j = out_json()) &&
		jobs_all(j, "it-admin", "image") && strstr(g_out, "cli json job"),
	     "jobs --owner it-admin --kind image: the admin's image jobs, this one among them");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "jobs", "--kind", "video", "--json") == 0 && (j = out_json()) && jobs_all(j, NULL, "video") &&
		!strstr(g_out, "cli json job"), "jobs --kind video: video jobs only, not this image one");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "jobs", "--owner", "it-submitter") == 0 && strstr(g_out, "ID") && !strstr(g_out, "cli json job"),
	     "jobs --owner it-submitter: a table without the admin's job");
	rc = ctl_as(h, h->submitter_token, "jobs", "--owner", "it-admin"); /* g_err is replaced by each ctl: read it after */
	h_ok(h, rc == 1 && strstr(g_err, "403") && strstr(g_err, "owner"), "a submitter's jobs --owner it-admin: 403, exit 1 (%s)",
	     g_err);
	h_ok(h, ctl(h, "jobs", "--kind", "audio") == 1 && strstr(g_err, "400") && strstr(g_err, "kind"),
	     "jobs --kind audio: 400, exit 1");
	h_ok(h, ctl(h, "attempts", id) == 0 && strstr(g_out, "OUTCOME"), "attempts: table header");
	h_ok(h, ctl(h, "attempts", id, "--json") == 0 && (j = out_json()) && json_is_array(json_object_get(j, "attempts")),
		"attempts --json parses");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "events", id) == 0 && strlen(g_out) > 0, "events: lines");
	h_ok(h, ctl(h, "events", id, "--json") == 0 && (j = out_json()) &&
		json_array_size(json_object_get(j, "events")) >= 1, "events --json parses");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "attempts", "999999") == 4 && ctl(h, "events", "999999") == 4 && ctl(h, "cancel", "999999") == 4,
		"attempts/events/cancel of an unknown job: exit 4");
	rc = ctl(h, "priority", id, "-5"); /* g_out is replaced by each ctl: read it after */
	h_ok(h, rc == 0 && strstr(g_out, "priority -5 (queued)"), "priority: a negative priority (%s)", g_out);
	h_ok(h, ctl(h, "priority", id, "soon") == 2, "priority soon: exit 2");
	h_ok(h, ctl(h, "cancel", id) == 0 && strstr(g_out, "cancelled"), "cancel: the queued job is cancelled");
	h_ok(h, ctl(h, "cancel", id, "--json") == 0 && (j = out_json()) && !strcmp(h_str(j, "state"), "cancelled"),
		"cancel --json parses");
	json_decref(j);
	rc = ctl(h, "watch", id, "--interval-ms", "50");
	h_ok(h, rc == 1 && strstr(g_out, "cancelled") && !strchr(g_out, '\r'),
		"watch of a cancelled job: plain lines, exit 1 (rc %d)", rc);
	h_ok(h, ctl(h, "retry", id, "--from", "bottom") == 2 && strstr(g_err, "current or target"),
		"retry --from bottom: exit 2");
	h_ok(h, ctl(h, "retry", "999999") == 4, "retry of an unknown job: exit 4");
	rc = ctl(h, "retry", id, "--note", "cancelled by mistake");
	h_ok(h, rc == 0 && strstr(g_out, "queued again from the current config; budgets count from attempt 1"),
		"retry: the cancelled job is queued again (%s)", g_out);
	h_ok(h, ctl(h, "retry", id) == 1 && strstr(g_err, "409") && strstr(g_err, "is queued"),
		"retry of a queued job: 409, exit 1");
	h_ok(h, ctl(h, "events", id) == 0 && strstr(g_out, "retried") && strstr(g_out, "cancelled by mistake"),
		"events: the retry with its note");
	h_ok(h, ctl(h, "cancel", id, "--json") == 0 && ctl(h, "retry", id, "--from", "target", "--json") == 0 &&
		(j = out_json()) && !strcmp(h_str(j, "state"), "queued") &&
		!strcmp(h_str(json_object_get(json_object_get(j, "recovery_state"), "retried"), "from"), "target"),
		"retry --from target --json: the job, queued");
	json_decref(j);
	h_ok(h, ctl(h, "cancel", id) == 0, "cancelled again");
	free(cfg);
	free(id);
}

/* A fake worker fails a max_attempts-1 job with an OOM: the job fails with an escalation. watch exits
 * 1; escalations, report, ack, resolve; workers, gpus, gpu release. */
/* cancel by filters: --dry-run lists, then the jobs are cancelled; by --pool alone; a JOB and
 * filters together, or neither, is a usage error, and so is a bad --pool (before anything is sent). */
static void test_cancel_matching(struct harness *h)
{
	char *cfg = config_file(h, "cli_bulk", 10), *a = NULL, *b = NULL, *want = NULL;
	int rc;

	rc = ctl(h, "submit", cfg, "--labels", "batch=cli-bulk");
	a = out_line();
	ctl(h, "submit", cfg, "--labels", "batch=cli-bulk");
	b = out_line();
	want = xasprintf("would cancel 2 job(s): %s %s\n", a, b);
	rc = rc == 0 ? ctl(h, "cancel", "--label", "batch=cli-bulk", "--dry-run") : rc;
	h_ok(h, rc == 0 && !strcmp(g_out, want), "cancel --label --dry-run lists the two jobs (%s)", g_out);
	free(want);
	want = xasprintf("cancelled or told to stop: 2 job(s): %s %s\n", a, b);
	h_ok(h, ctl(h, "cancel", "--label", "batch=cli-bulk") == 0 && !strcmp(g_out, want), "cancel --label cancels them");
	h_ok(h, ctl(h, "show", a) == 0 && strstr(g_out, "cancelled"), "the first is cancelled");
	h_ok(h, ctl(h, "cancel") == 2 && ctl(h, "cancel", a, "--label", "batch=x") == 2 && ctl(h, "cancel", a, "--dry-run") == 2,
	     "cancel with neither a JOB nor a filter, or with both: exit 2");
	h_ok(h, ctl(h, "cancel", "--kind", "audio") == 1 && strstr(g_err, "kind"), "a bad filter: refused, naming it (exit 1)");
	free(want);
	free(a);
	free(b);
	rc = ctl(h, "submit", cfg, "--pool", "cli-cancel-pool");
	a = out_line();
	want = xasprintf("would cancel 1 job(s): %s\n", a);
	rc = rc == 0 ? ctl(h, "cancel", "--pool", "cli-cancel-pool", "--dry-run") : rc;
	h_ok(h, rc == 0 && !strcmp(g_out, want), "cancel --pool --dry-run lists the pool's one job (%s)", g_out);
	free(want);
	want = xasprintf("cancelled or told to stop: 1 job(s): %s\n", a);
	h_ok(h, ctl(h, "cancel", "--pool", "cli-cancel-pool") == 0 && !strcmp(g_out, want), "cancel --pool cancels it");
	h_ok(h, ctl(h, "cancel", "--pool", "Big") == 2 && strstr(g_err, "--pool must be a pool name"),
	     "a bad --pool: exit 2, naming the rule");
	free(want);
	free(a);
	free(cfg);
}

/* The number of lines of s. */
static size_t line_count(const char *s)
{
	size_t n = 0;
	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

/* submit --set and --sweep: a sweep of 2 x 2 makes four queued jobs, each with its values, its own
 * config.name, the one sweep label; sent again under the same Idempotency-Key it makes no new job;
 * --set alone changes the one job; --dry-run sends nothing; a path the config cannot take, or a sweep
 * of a value twice, is a usage error that submits nothing; plan --set asks about the changed config. */
static void test_sweep(struct harness *h)
{
	char *cfg = config_file(h, "cli_sweep", 10), *first = NULL, *again = NULL, *id = NULL;
	json_t *jobs = NULL, *j = NULL, *plan = NULL;
	long st = 0;
	long long before = h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);

	int rc = ctl(h, "submit", cfg, "--sweep", "train.lr=1e-4,3e-4", "--sweep", "network.linear=8,16", "--set",
		     "train.batch_size=2", "--idempotency-key", "cli-sweep-1", "--labels", "team=vision");
	first = xstrdup(g_out);
	h_ok(h, rc == 0 && line_count(g_out) == 4 && strstr(g_err, "sweep cli-sweep-1: 4 jobs"),
	     "submit --sweep x --sweep: four job ids, the sweep on stderr (%d, %s / %s)", rc, g_out, g_err);
	jobs = h_get(h, "/v1/jobs?label=sweep=cli-sweep-1,team=vision", &st);
	json_t *arr = json_object_get(jobs, "jobs");
	h_ok(h, st == 200 && json_array_size(arr) == 4, "the four carry the sweep label and the caller's (%zu)",
	     json_array_size(arr));
	/* each job: its values, the --set, its name; the list is newest first, the ids in submit order */
	static const char *const want_name[] = { "cli_sweep_lr1e-4_linear8", "cli_sweep_lr1e-4_linear16",
						 "cli_sweep_lr3e-4_linear8", "cli_sweep_lr3e-4_linear16" };
	static const double want_lr[] = { 1e-4, 1e-4, 3e-4, 3e-4 };
	static const long long want_rank[] = { 8, 16, 8, 16 };
	const char *p = first;
	bool all = true;
	for (int k = 0; k < 4 && p && *p; k++) {
		size_t n = strcspn(p, "\n");
		free(id);
		id = xasprintf("%.*s", (int)n, p);
		p += n + (p[n] == '\n');
		json_decref(j);
		j = h_job(h, id);
		json_t *proc = json_array_get(json_object_get(json_object_get(json_object_get(j, "target_config"), "config"),
						      "process"), 0);
		const char *cname = json_string_value(json_object_get(json_object_get(json_object_get(j, "target_config"),
										     "config"), "name"));
		bool ok = cname && !strcmp(cname, want_name[k]) && !strcmp(h_str(j, "name"), want_name[k]) &&
			  json_real_value(job_lr(j)) == want_lr[k] &&
			  json_integer_value(json_object_get(json_object_get(proc, "network"), "linear")) == want_rank[k] &&
			  json_integer_value(json_object_get(json_object_get(proc, "train"), "batch_size")) == 2;
		if (!ok)
			h_diag("job %s: name %s, lr %g", id, cname ? cname : "-", json_real_value(job_lr(j)));
		all = all && ok;
	}
	h_ok(h, all, "each job has its values, the --set and its own config.name (the output folder) and name");
	rc = ctl(h, "submit", cfg, "--sweep", "train.lr=1e-4,3e-4", "--sweep", "network.linear=8,16", "--set",
		 "train.batch_size=2", "--idempotency-key", "cli-sweep-1", "--labels", "team=vision");
	again = xstrdup(g_out);
	h_ok(h, rc == 0 && !strcmp(first, again) &&
		     h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == before + 4,
	     "the same sweep sent again under its Idempotency-Key: the same four ids, no new job");

	rc = ctl(h, "cancel", "--label", "sweep=cli-sweep-1"); /* before h_ok: its arguments read g_out */
	h_ok(h, rc == 0 && strstr(g_out, "4 job(s)"), "the sweep's label cancels its four jobs (%s)", g_out);
	rc = ctl(h, "submit", cfg, "--set", "train.lr=5e-5", "--json");
	json_decref(j);
	j = out_json();
	char *one = h_id(j, "id");
	if (one)
		ctl(h, "cancel", one);
	free(one);
	h_ok(h, rc == 0 && json_real_value(job_lr(j)) == 5e-5 &&
		     !json_object_get(json_object_get(j, "labels"), "sweep") &&
		     !strcmp(h_str(j, "name"), "cli_sweep"),
	     "submit --set alone: one job with the value, its name and labels as they were");

	long long n0 = h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);
	rc = ctl(h, "submit", cfg, "--sweep", "train.lr=1e-4,2e-4,4e-4", "--dry-run");
	h_ok(h, rc == 0 && line_count(g_out) == 3 && strstr(g_out, "cli_sweep_lr4e-4\ttrain.lr=4e-4") &&
		     h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == n0,
	     "--dry-run prints each job's name and values and submits nothing (%s)", g_out);
	/* --link: a rank and its alpha varied together, the --link given before the sweeps it names */
	rc = ctl(h, "submit", cfg, "--link", "network.linear,network.linear_alpha", "--sweep", "network.linear=8,32",
		 "--sweep", "network.linear_alpha=4,16", "--dry-run");
	h_ok(h, rc == 0 && line_count(g_out) == 2 &&
		     strstr(g_out, "cli_sweep_linear8_linear_alpha4\tnetwork.linear=8, network.linear_alpha=4") &&
		     strstr(g_out, "cli_sweep_linear32_linear_alpha16\tnetwork.linear=32, network.linear_alpha=16") &&
		     h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == n0,
	     "submit --link with two sweeps: two jobs, each value with its partner, not four (%s)", g_out);
	rc = ctl(h, "submit", cfg, "--link", "network.linear,network.linear_alpha", "--sweep", "network.linear=8,32",
		 "--sweep", "network.linear_alpha=4");
	h_ok(h, rc == 2 && strstr(g_err, "--link ties it to --sweep network.linear") &&
		     h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == n0,
	     "linked sweeps of 2 and 1 values: exit 2, nothing submitted (%s)", g_err);
	h_ok(h, ctl(h, "submit", cfg, "--set", "datasets[5].resolution=[512]") == 2 && strstr(g_err, "datasets[5]") &&
		     ctl(h, "submit", cfg, "--sweep", "train.lr=1e-4,0.0001") == 2 && strstr(g_err, "same value") &&
		     ctl(h, "submit", cfg, "--set", "train.lr") == 2 && strstr(g_err, "PATH=VALUE") &&
		     h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == n0,
	     "a path the config cannot take, a value swept twice, a --set without '=': exit 2, nothing submitted");

	rc = ctl(h, "plan", cfg, "--set", "train.batch_size=3", "--json");
	plan = out_json();
	h_ok(h, rc == 0 && json_integer_value(json_object_get(json_object_get(plan, "features"), "batch")) == 3,
	     "plan --set: the server is asked about the changed config (batch 3)");
	if (!plan)
		h_diag("plan: %s / %s", g_out, g_err);
	json_decref(plan);
	rc = ctl(h, "plan", cfg, "--pool", "cli-empty-pool", "--json");
	plan = out_json();
	h_ok(h, rc == 0 && json_array_size(json_object_get(plan, "sizes")) == 0 &&
		     json_integer_value(json_object_get(plan, "fleet_max_gpu_mib")) == 0,
	     "plan --pool: a pool with no GPU plans over none (the default pool's do not count)");
	json_decref(plan);
	h_ok(h, ctl(h, "plan", cfg, "--pool", "Cli") == 2 && strstr(g_err, "--pool must be a pool name"),
	     "plan --pool with a bad name: exit 2");
	json_decref(j);
	json_decref(jobs);
	free(id);
	free(first);
	free(again);
	free(cfg);
}

static void test_support_commands(struct harness *h)
{
	char *cfg = config_file(h, "cli_esc", 10), *id = NULL, *wid = NULL, *aid = NULL, *esc = NULL;
	json_t *facts = json_load_file("tests/data/facts_train_early_oom.json", 0, NULL), *lease = NULL, *done = NULL;
	json_t *j = NULL;
	long st = 0;

	wid = h_fake_register(h, "cli-fake", FAKE_GPU, 24576);
	h_ok(h, ctl(h, "submit", cfg, "--max-attempts", "1") == 0, "submit the job a fake worker fails");
	id = out_line();
	lease = wid ? h_fake_lease(h, wid, FAKE_GPU, 5000, &st) : NULL;
	aid = h_id(lease, "attempt_id");
	if (!h_ok(h, aid != NULL, "fake worker leased it (%ld)", st))
		goto out;
	done = h_fake_finish(h, aid, h_str(lease, "token"), facts, &st);
	esc = h_id(done, "escalation_id");
	if (!h_ok(h, st == 200 && esc, "the OOM finish fails the job and opens an escalation"))
		goto out;
	int rc = ctl(h, "watch", id);
	h_ok(h, rc == 1 && strstr(g_out, "failed") && strstr(g_out, "attempt 1 ended") && !strchr(g_out, '\r'),
		"watch of a failed job: plain lines with the attempt and the verdict, exit 1 (rc %d)", rc);
	h_ok(h, ctl(h, "watch", id, "--json") == 1 && (j = out_json()) && !strcmp(h_str(j, "state"), "failed"),
		"watch --json prints the final job");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "escalations", "--state", "open") == 0 && strstr(g_out, "TRIGGER") && strstr(g_out, id),
		"escalations --state open: a table naming the job");
	h_ok(h, ctl(h, "escalations", "--json") == 0 && (j = out_json()) &&
		json_array_size(json_object_get(j, "escalations")) >= 1, "escalations --json parses");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "report", esc) == 0 && strstr(g_out, "#"), "report: Markdown");
	h_ok(h, ctl(h, "report", esc, "--json") == 0 && (j = out_json()) && json_is_string(json_object_get(j, "report_markdown")),
		"report --json parses");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "report", "999999") == 4, "report of an unknown escalation: exit 4");
	h_ok(h, ctl_as(h, h->submitter_token, "escalations") == 1, "escalations with a submitter token: exit 1");
	h_ok(h, ctl(h, "ack", esc, "--note", "looking") == 0 && strstr(g_out, "acknowledged"), "ack: acknowledged");
	h_ok(h, ctl(h, "resolve", esc, "--note", "fixed", "--json") == 0 && (j = out_json()) &&
		!strcmp(h_str(j, "state"), "resolved"), "resolve --json: resolved");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "ack", "999999", "--note", "x") == 4, "ack of an unknown escalation: exit 4");
	h_ok(h, ctl(h, "escalations", "--state", "open") == 0 && !strstr(g_out, "budget") && !strstr(g_out, " open "),
		"no open escalation is left");
	h_ok(h, ctl(h, "workers") == 0 && strstr(g_out, "cli-fake") && strstr(g_out, " VERSION "),
	     "workers: the fake worker listed, under a VERSION column");
	h_ok(h, ctl(h, "workers", "--json") == 0 && (j = out_json()) && json_array_size(json_object_get(j, "workers")) >= 1,
		"workers --json parses");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl_as(h, h->submitter_token, "drain", wid) == 1 && strstr(g_err, "403"), "drain with a submitter token: 403, exit 1");
	h_ok(h, ctl(h, "drain", "999999") == 4, "drain of an unknown worker: exit 4");
	h_ok(h, ctl(h, "drain", wid, "--note", "kernel update") == 0 && strstr(g_out, "draining (no new leases"),
		"drain: the worker is draining");
	h_ok(h, ctl(h, "workers") == 0 && strstr(g_out, "draining") && strstr(g_out, "kernel update") &&
		strstr(g_out, "DRAINED BY"), "workers: the drained worker with who and why");
	h_ok(h, ctl(h, "resume", wid, "--json") == 0 && (j = out_json()) && !strcmp(h_str(j, "state"), "online"),
		"resume --json: online");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "gpus") == 0 && strstr(g_out, FAKE_GPU), "gpus: the fake GPU listed");
	h_ok(h, ctl(h, "gpus", "--json") == 0 && (j = out_json()) && json_array_size(json_object_get(j, "gpus")) >= 1,
		"gpus --json parses");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "gpu", "release", FAKE_GPU) == 0 && strstr(g_out, "ok"), "gpu release: ok");
	h_ok(h, ctl(h, "gpu", "release", FAKE_GPU, "--json") == 0 && (j = out_json()) && !strcmp(h_str(j, "state"), "ok"),
		"gpu release --json parses");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "gpu", "release", "GPU-nope") == 4, "gpu release of an unknown GPU: exit 4");
out:
	json_decref(lease);
	json_decref(done);
	json_decref(facts);
	free(cfg);
	free(id);
	free(wid);
	free(aid);
	free(esc);
}

static void test_token_commands(struct harness *h)
{
	json_t *j = NULL;
	char *tok = NULL, *tid = NULL;
	int rc;

	h_ok(h, ctl(h, "token", "create", "--role", "submitter", "--name", "cli-sub") == 0 && !strncmp(g_out, "rung_", 5),
		"token create: the secret alone on stdout");
	tok = out_line();
	h_ok(h, ctl_as(h, tok, "jobs") == 0, "the new token works");
	h_ok(h, ctl(h, "token", "list") == 0 && strstr(g_out, "cli-sub") && !strstr(g_out, tok),
		"token list: the name, never the secret");
	h_ok(h, ctl(h, "token", "list", "--json") == 0 && (j = out_json()) != NULL, "token list --json parses");
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(j, "tokens"), i, t)
		if (!strcmp(h_str(t, "name"), "cli-sub"))
			tid = h_id(t, "id");
	h_ok(h, tid && ctl(h, "token", "limit", tid, "--max-running", "3") == 0 && strstr(g_out, "max_running 3"),
	     "token limit --max-running 3: set");
	h_ok(h, ctl(h, "token", "list") == 0 && strstr(g_out, "MAX RUNNING"), "token list: a MAX RUNNING column");
	h_ok(h, tid && ctl(h, "token", "limit", tid, "--max-running", "none") == 0 && strstr(g_out, "max_running none"),
	     "token limit --max-running none: lifted");
	h_ok(h, tid && ctl(h, "token", "limit", tid, "--max-running", "-2") == 2 && strstr(g_err, "--max-running"),
	     "token limit --max-running -2: usage error, exit 2");
	h_ok(h, tid && ctl(h, "token", "limit", tid) == 2, "token limit without --max-running: exit 2");
	h_ok(h, tid && ctl(h, "token", "limit", tid, "--gpu-hours", "inf") == 2 && strstr(g_err, "--gpu-hours"),
	     "token limit --gpu-hours inf: usage error, exit 2");
	h_ok(h, tid && ctl(h, "token", "limit", tid, "--gpu-hours", "-1") == 2, "token limit --gpu-hours -1: exit 2");
	h_ok(h, tid && ctl(h, "token", "limit", tid, "--days", "0") == 2 && strstr(g_err, "--days"),
	     "token limit --days 0: exit 2");
	h_ok(h, tid && ctl(h, "token", "limit", tid, "--pool", "h200") == 2 && strstr(g_err, "--pool"),
	     "token limit --pool without --max-running: exit 2");
	rc = tid ? ctl(h, "token", "limit", tid, "--gpu-hours", "12.5", "--days", "3") : -1; /* before h_ok: it reads g_out */
	h_ok(h, rc == 0 && strstr(g_out, "gpu_hours 12.5 per 3 days"), "token limit --gpu-hours 12.5 --days 3: set (%s)", g_out);
	h_ok(h, tid && ctl(h, "token", "limit", tid, "--gpu-hours", "none") == 0 && strstr(g_out, "gpu_hours none"),
	     "token limit --gpu-hours none: lifted");
	/* a quota per pool (migration 037): --pool with --gpu-hours */
	rc = tid ? ctl(h, "token", "limit", tid, "--pool", "h200", "--gpu-hours", "7.5") : -1;
	h_ok(h, rc == 0 && strstr(g_out, "gpu_hours h200:7.5 per 3 days"), "token limit --pool h200 --gpu-hours 7.5: set (%s)",
	     g_out);
	h_ok(h, ctl(h, "token", "list") == 0 && strstr(g_out, "h200:7.5 per 3 days"), "token list: the pool's quota in GPU HOURS");
	h_ok(h, tid && ctl(h, "token", "limit", tid, "--pool", "h200", "--gpu-hours", "none") == 0 &&
		     strstr(g_out, "gpu_hours none"),
	     "token limit --pool h200 --gpu-hours none: lifted");
	rc = tid ? ctl(h, "token", "pools", tid, "h200,default") : -1; /* before h_ok: its message reads g_out */
	h_ok(h, rc == 0 && strstr(g_out, "pools default,h200"), "token pools ID h200,default: set, listed sorted (%s)", g_out);
	h_ok(h, ctl(h, "token", "list") == 0 && strstr(g_out, "POOLS") && strstr(g_out, "default,h200"),
	     "token list: a POOLS column");
	h_ok(h, tid && ctl(h, "token", "pools", tid, "any") == 0 && strstr(g_out, "pools any"), "token pools ID any: lifted");
	h_ok(h, tid && ctl(h, "token", "pools", tid, "h200,Big") == 2 && strstr(g_err, "\"Big\" is not a pool name"),
	     "token pools with a bad name: exit 2, nothing sent");
	h_ok(h, tid && ctl(h, "token", "revoke", tid) == 0 && strstr(g_out, "revoked"), "token revoke: revoked");
	h_ok(h, ctl_as(h, tok, "jobs") == 1 && strstr(g_err, "401"), "the revoked token is refused: exit 1");
	h_ok(h, ctl(h, "token", "create", "--role", "emperor") == 1 && strstr(g_err, "400"),
		"token create with an unknown role: 400, exit 1");
	h_ok(h, ctl(h, "token", "create", "--role", "support", "--json") == 0 && took(out_json()),
		"token create --json parses");
	h_ok(h, ctl_as(h, h->submitter_token, "token", "list") == 1 && strstr(g_err, "403"),
		"token list with a submitter token: 403, exit 1");
	json_decref(j);
	free(tok);
	free(tid);
}

/* A row of token list's table: the line naming name (heap), or NULL. */
static char *list_row(const char *name)
{
	for (const char *p = g_out; p && *p;) {
		size_t n = strcspn(p, "\n");
		char *line = strndup(p, n);
		if (strstr(line, name))
			return line;
		free(line);
		p += n + (p[n] == '\n');
	}
	return NULL;
}

/* token create --expires DURATION, token list's EXPIRES (never, the time, expired), an expired
 * token refused with the server's message, and bad durations as usage errors before any call. */
static void test_token_expiry(struct harness *h)
{
	char *tok = NULL, *row = NULL;
	long long before = h_sql_int(h, "SELECT count(*) FROM tokens", 0, NULL);
	static const char *const bad[] = { "5x", "1.5h", "-3m", "30s", "59", "3651d", "12H", "", "never" };

	h_ok(h, ctl(h, "token", "create", "--role", "submitter", "--name", "cli-ci", "--expires", "12h") == 0 &&
		     !strncmp(g_out, "rung_", 5) && strstr(g_err, "expires="),
	     "token create --expires 12h: the secret alone on stdout, when it expires on stderr");
	tok = out_line();
	h_ok(h, h_sql_int(h, "SELECT round(extract(epoch FROM expires_at - created_at)) FROM tokens WHERE name = 'cli-ci'", 0,
			  NULL) == 43200,
	     "token create --expires 12h: it expires 43200 s after it was created");
	h_ok(h, ctl(h, "token", "create", "--role", "submitter", "--name", "cli-secs", "--expires", "3600") == 0 &&
		     h_sql_int(h, "SELECT round(extract(epoch FROM expires_at - created_at)) FROM tokens WHERE name = 'cli-secs'", 0,
			       NULL) == 3600,
	     "token create --expires 3600: bare seconds");
	h_ok(h, ctl_as(h, tok, "jobs") == 0, "an expiring token works before it expires");
	h_ok(h, ctl(h, "token", "list") == 0 && strstr(g_out, "EXPIRES"), "token list: an EXPIRES column");
	row = list_row("cli-ci");
	h_ok(h, row && !strstr(row, "never") && !strstr(row, "expired") && strstr(row, "T"),
	     "token list: an expiring token's row shows the time (%s)", row ? row : "-");
	free(row);
	row = list_row("it-admin");
	h_ok(h, row && strstr(row, "never"), "token list: one without expiry says never (%s)", row ? row : "-");
	free(row);
	PQclear(h_sql(h, "UPDATE tokens SET expires_at = now() - interval '1 minute' WHERE name = 'cli-ci'", 0, NULL));
	h_ok(h, ctl(h, "token", "list") == 0, "token list after it expired");
	row = list_row("cli-ci");
	h_ok(h, row && strstr(row, "expired"), "token list: an expired token says expired (%s)", row ? row : "-");
	free(row);
	/* a token this rungd has not seen since its expiry passed is refused at its next call (cli-ci,
	 * seen and cached before the SQL above moved its expiry, may pass until the cache reads it again:
	 * that move is not what an expiry is) */
	h_ok(h, ctl(h, "token", "create", "--role", "submitter", "--name", "cli-gone", "--expires", "1d") == 0,
	     "token create --expires 1d");
	{
		char *gone = out_line();
		PQclear(h_sql(h, "UPDATE tokens SET expires_at = now() - interval '1 minute' WHERE name = 'cli-gone'", 0, NULL));
		int rc_gone = ctl_as(h, gone, "jobs"); /* before h_ok: its arguments read g_err */
		h_ok(h, rc_gone == 1 && strstr(g_err, "401 token_expired") && strstr(g_err, "expired at"),
		     "an expired token: rungctl says 401 token_expired and when, exit 1 (%s)", g_err);
		free(gone);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc_bad = ctl(h, "token", "create", "--role", "submitter", "--expires", bad[i]); /* before h_ok reads g_err */
		h_ok(h, rc_bad == 2 && strstr(g_err, "--expires"), "token create --expires '%s': usage error, exit 2 (%s)",
		     bad[i], g_err);
	}
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM tokens", 0, NULL) == before + 3, "and none of the bad ones made a token");
	h_ok(h, ctl(h, "token", "create", "--help") == 0 && strstr(g_out, "--expires"), "token create --help names --expires");
	free(tok);
}

/* Raw AI Toolkit bodies over HTTP: YAML (three media types) and JSON without the envelope, with
 * query options; and their 400s/413. Created jobs are cancelled at the end. */
static void test_raw_submit(struct harness *h)
{
	char *yaml = h_slurp(FIXTURE_YAML), *err = NULL;
	json_t *want = yamljson_load_file(FIXTURE_YAML, &err), *j, *cfg = h_config("cli_raw_json", 20);
	char *cfg_s = json_dumps(cfg, JSON_COMPACT);
	long st = 0;
	json_t *ids = json_array();

	j = raw_post(h, "/v1/jobs?name=raw%20yaml&priority=3&scale_up=false&max_attempts=4&validate_steps=10",
		"application/yaml", yaml, strlen(yaml), &st);
	json_t *rec = json_object_get(j, "recovery");
	h_ok(h, st == 201, "raw YAML submit: 201 (got %ld)", st);
	h_ok(h, json_equal(json_object_get(j, "target_config"), want), "the YAML is stored as AI Toolkit reads it");
	h_ok(h, !strcmp(h_str(j, "name"), "raw yaml") && h_int(j, "priority") == 3, "name and priority from the query");
	h_ok(h, json_is_false(json_object_get(rec, "scale_up")) && h_int(rec, "max_attempts") == 4 &&
		h_int(rec, "validate_steps") == 10 && h_int(rec, "max_lost") == 3,
		"recovery from the query, the rest defaulted");
	json_array_append(ids, json_object_get(j, "id"));
	json_decref(j);
	static const char *const types[] = { "text/yaml", "application/x-yaml", "Application/YAML; charset=utf-8" };
	for (size_t i = 0; i < ARRAY_LEN(types); i++) {
		j = raw_post(h, "/v1/jobs", types[i], yaml, strlen(yaml), &st);
		h_ok(h, st == 201 && !strcmp(h_str(j, "name"), "flux_lora_test_v1"),
			"Content-Type %s: 201, named after config.name (%ld)", types[i], st);
		json_array_append(ids, json_object_get(j, "id"));
		json_decref(j);
	}
	j = raw_post(h, "/v1/jobs?priority=9&early_steps=5", "application/json", cfg_s, strlen(cfg_s), &st);
	h_ok(h, st == 201 && h_int(j, "priority") == 9 && h_int(json_object_get(j, "recovery"), "early_steps") == 5 &&
		json_equal(json_object_get(j, "target_config"), cfg), "raw JSON file (no envelope) with query options: 201");
	json_array_append(ids, json_object_get(j, "id"));
	json_decref(j);

	static const struct { const char *query, *field; } bad[] = {
		{ "priority=abc", "priority" }, { "priority=99999999999", "priority" }, { "max_attempts=0", "max_attempts" },
		{ "scale_up=maybe", "scale_up" }, { "validate_steps=", "validate_steps" }, { "bogus=1", "bogus" },
		{ "priority=1&priority=2", "priority" }, { "env_fault_window_s=1x", "env_fault_window_s" },
	};
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		char *path = xasprintf("/v1/jobs?%s", bad[i].query);
		j = raw_post(h, path, "application/yaml", yaml, strlen(yaml), &st);
		h_ok(h, st == 400 && !strcmp(h_str(j, "field"), bad[i].field) && strstr(h_str(j, "message"), bad[i].field),
			"?%s: 400 naming %s (got %ld %s)", bad[i].query, bad[i].field, st, h_str(j, "message"));
		json_decref(j);
		free(path);
	}
	char *bad_yaml = h_slurp("tests/data/yaml_malformed.yaml");
	j = raw_post(h, "/v1/jobs", "application/yaml", bad_yaml, strlen(bad_yaml), &st);
	h_ok(h, st == 400 && !strcmp(h_str(j, "error"), "invalid_yaml") && strstr(h_str(j, "message"), "line ") &&
		strstr(h_str(j, "message"), "column "), "malformed YAML: 400 with line and column (%s)", h_str(j, "message"));
	json_decref(j);
	free(bad_yaml);
	j = raw_post(h, "/v1/jobs", "application/yaml", "- a\n- b\n", 8, &st);
	h_ok(h, st == 400 && !strcmp(h_str(j, "error"), "invalid_body"), "a YAML list: 400 invalid_body");
	json_decref(j);
	j = raw_post(h, "/v1/jobs", "application/yaml", "job: extension\nconfig:\n  name: x\n", 33, &st);
	h_ok(h, st == 400 && strstr(h_str(j, "field"), "config"), "a YAML file without process: 400 naming config (%s)",
		h_str(j, "field"));
	json_decref(j);
	{
		/* over 1 MiB of valid YAML: 413 */
		size_t n = (1u << 20) + 4096;
		char *big = xmalloc(n + 1);
		memcpy(big, yaml, strlen(yaml));
		for (size_t k = strlen(yaml); k < n; k++)
			big[k] = (k % 64 == 63) ? '\n' : (k % 64 == 0 ? '#' : 'x');
		big[n] = '\0';
		j = raw_post(h, "/v1/jobs", "application/yaml", big, n, &st);
		h_ok(h, st == 413 && !strcmp(h_str(j, "error"), "body_too_large"), "YAML over 1 MiB: 413 (got %ld)", st);
		json_decref(j);
		free(big);
	}
	{
		/* the envelope takes no query options */
		json_t *env = json_pack("{s:O}", "config", cfg);
		char *env_s = json_dumps(env, JSON_COMPACT);
		j = raw_post(h, "/v1/jobs?priority=1", "application/json", env_s, strlen(env_s), &st);
		h_ok(h, st == 400 && !strcmp(h_str(j, "field"), "priority"), "envelope with query options: 400 (%ld)", st);
		json_decref(j);
		j = raw_post(h, "/v1/jobs", "application/json", env_s, strlen(env_s), &st);
		h_ok(h, st == 201, "the envelope still works (%ld)", st);
		json_array_append(ids, json_object_get(j, "id"));
		json_decref(j);
		free(env_s);
		json_decref(env);
	}
	size_t i;
	json_t *id;
	json_array_foreach(ids, i, id) {
		json_t *r = h_postf(h, NULL, &st, "/v1/jobs/%lld/cancel", (long long)json_integer_value(id));
		json_decref(r);
	}
	json_decref(ids);
	json_decref(want);
	json_decref(cfg);
	free(cfg_s);
	free(err);
	free(yaml);
}

/* With a simulated worker: AI Toolkit's own YAML example through rungctl submit, watched to success. */
static void test_yaml_fixture_run(struct harness *h)
{
	const char *env[] = { "RUNG_SIM_STEP_MS=1", "RUNG_SIM_LOAD_MS=10", "RUNG_SIM_SAMPLE_MS=5", NULL };
	struct h_worker_opts o = { .env = env };
	json_t *j = NULL;
	char *err = NULL, *id = NULL;
	json_t *want = yamljson_load_file(FIXTURE_YAML, &err);

	h_ok(h, h_worker_start(h, "cli-w1", &o) != NULL, "simulated worker started");
	/* the story below is that of a fleet with no memory history: earlier cases' fake OOMs of lighter
	 * flux configs would start it lower (issue 12) */
	h_forget_arch(h, "flux");
	int rc = ctl(h, "submit", FIXTURE_YAML, "--priority", "5", "--no-scale-up", "--max-attempts", "3",
		"--validate-steps", "20", "--json");
	j = out_json();
	h_ok(h, rc == 0 && j, "submit the AI Toolkit YAML example with --json: exit 0, JSON");
	h_ok(h, json_equal(json_object_get(j, "target_config"), want), "target_config is the YAML as AI Toolkit reads it");
	h_ok(h, json_is_real(job_lr(j)) && json_real_value(job_lr(j)) == 1e-4, "lr: 1e-4 arrives as a number");
	id = h_id(j, "id");
	json_decref(j);
	if (!id)
		goto out;
	rc = ctl(h, "watch", id, "--interval-ms", "100");
	h_ok(h, rc == 0 && strstr(g_out, "succeeded") && strstr(g_out, "attempt 1 running") && !strchr(g_out, '\r') &&
		!strstr(g_out, "\033["), "watch: plain lines to the end, exit 0 on success (rc %d)", rc);
	if (rc != 0)
		h_diag("watch stdout: %s stderr: %s", g_out, g_err);
	h_ok(h, ctl(h, "attempts", id) == 0 && strstr(g_out, "succeeded"), "attempts: the succeeded attempt");
	char *verdict = xasprintf("result            job %s succeeded after 1 attempt(s) with attempt 1's run "
		"(flux_lora_test_v1)\n  every setting at target\n", id);
	h_ok(h, ctl(h, "show", id) == 0 && strstr(g_out, verdict) &&
		strstr(g_out, "attempt 1 ended: outcome succeeded, class success, action succeed, rung -\n"),
		"show: a succeeded job's verdict setting by setting, and its attempts");
	if (!strstr(g_out, verdict))
		h_diag("show stdout: %s", g_out);
	free(verdict);
out:
	json_decref(want);
	free(err);
	free(id);
}

/* classify over a log the simulated trainer printed when the GPU was too small to load the model. */
static void test_classify(struct harness *h)
{
	char *cfg = config_file(h, "cli_classify", 10);
	char *log = xasprintf("%s/trainer.log", h->tmp), *state = xasprintf("RUNG_SIM_STATE=%s/classify-gpus.json", h->tmp);
	char *run_dir = xasprintf("RUNG_SIM_RUN_DIR=%s/classify-run", h->tmp);
	char *cmd = xasprintf("cd %s && %s %s RUNG_SIM_GPU_MIB=8000 RUNG_SIM_REGISTER=0 RUNG_SIM_LOAD_MS=1 "
		"%s/bin/sim/rung-sim-trainer %s >%s 2>&1", h->tmp, state, run_dir, h->root, cfg, log);
	const char *sh[] = { "/bin/sh", "-c", cmd, NULL };
	json_t *j = NULL;

	int st = h_run(h, sh);
	h_ok(h, st != 0, "the simulated trainer fails on an 8000 MiB GPU (exit %d)", st);
	int rc = ctl_env(h, NULL, log, NULL, "classify", "--config", cfg, NULL);
	j = out_json();
	h_ok(h, rc == 0 && j && !strcmp(h_str(j, "class"), "oom_load"),
		"classify: the log is an OOM while loading (%s)", j ? h_str(j, "class") : g_err);
	h_ok(h, j && json_is_object(json_object_get(j, "facts")) &&
		!strcmp(h_str(json_object_get(j, "facts"), "oom_phase"), "load"), "classify prints the facts");
	json_decref(j);
	rc = ctl_env(h, NULL, log, NULL, "classify", "--config", "tests/data/nope.yaml", NULL);
	h_ok(h, rc == 2, "classify with a missing config: exit 2");
	free(cfg);
	free(log);
	free(state);
	free(run_dir);
	free(cmd);
}

/* GPU seconds of owner o's bucket b in a usage document, or -1 when o has no row. */
static double usage_of(const json_t *doc, const char *owner, const char *bucket)
{
	size_t i;
	json_t *o;
	json_array_foreach(json_object_get(doc, "owners"), i, o) {
		if (!strcmp(h_str(o, "owner"), owner))
			return bucket ? json_number_value(json_object_get(json_object_get(o, "by_outcome"), bucket))
				      : json_number_value(json_object_get(o, "gpu_seconds"));
	}
	return -1;
}

/* GET /v1/usage and rungctl usage: team A's job OOMs for an hour and then succeeds in two (times
 * set in the database), team B's has run for an hour and still runs. The report splits GPU time by
 * owner and ending, clips attempts to the window, counts the jobs that ended in it, limits a
 * submitter to its own, names each bad parameter; rungctl prints the table and the OOM share. */
static void test_usage(struct harness *h)
{
	char *ta = h_token_create(h, "submitter", "usage-a"), *tb = h_token_create(h, "submitter", "usage-b");
	char *cfg = config_file(h, "usage_cfg", 10), *ja = NULL, *jb = NULL, *w1 = NULL, *w2 = NULL, *aid = NULL;
	json_t *facts = json_load_file("tests/data/facts_train_early_oom.json", 0, NULL), *ok = h_facts_success(10);
	json_t *l = NULL, *u = NULL;
	long st = 0;
	bool leased = true;

	ctl_as(h, ta, "submit", cfg, "--priority", "-1000", "--labels", "sweep=usage-s1");
	ja = out_line();
	ctl_as(h, tb, "submit", cfg, "--priority", "-999");
	jb = out_line();
	w1 = h_fake_register(h, "usage-fake-1", "GPU-usage-1", 24576);
	w2 = h_fake_register(h, "usage-fake-2", "GPU-usage-2", 24576);
	/* A: an OOM, then a success; B: leased and left running */
	for (int k = 0; k < 2 && leased; k++) {
		l = w1 ? h_fake_lease(h, w1, "GPU-usage-1", 5000, &st) : NULL;
		free(aid);
		aid = h_id(l, "attempt_id");
		char *job = h_id(l, "job_id");
		leased = aid && job && !strcmp(job, ja);
		if (leased)
			json_decref(h_fake_finish(h, aid, h_str(l, "token"), k == 0 ? facts : ok, &st));
		leased = leased && st == 200;
		free(job);
		json_decref(l);
		l = NULL;
	}
	l = w2 ? h_fake_lease(h, w2, "GPU-usage-2", 5000, &st) : NULL;
	char *jobb = h_id(l, "job_id");
	leased = leased && jobb && !strcmp(jobb, jb);
	free(jobb);
	if (!h_ok(h, leased && !strcmp(h_str(u = h_job(h, ja), "state"), "succeeded"),
		  "team A's job: an OOM then a success; team B's job leased"))
		goto out;
	json_decref(u);
	u = NULL;
	const char *pa[] = { ja }, *pb[] = { jb };
	long long set = h_sql_int(h, "WITH u AS (UPDATE attempts SET "
				     "started_at = CASE number WHEN 1 THEN timestamptz '2026-11-01T10:00:00Z' ELSE '2026-11-01T11:00:00Z' END, "
				     "ended_at = CASE number WHEN 1 THEN timestamptz '2026-11-01T11:00:00Z' ELSE '2026-11-01T13:00:00Z' END "
				     "WHERE job_id = $1::bigint RETURNING 1) SELECT count(*) FROM u", 1, pa);
	set += h_sql_int(h, "WITH u AS (UPDATE jobs SET finished_at = '2026-11-01T13:00:00Z' WHERE id = $1::bigint "
			    "RETURNING 1) SELECT count(*) FROM u", 1, pa);
	set += h_sql_int(h, "WITH u AS (UPDATE attempts SET started_at = now() - interval '1 hour' WHERE job_id = $1::bigint "
			    "RETURNING 1) SELECT count(*) FROM u", 1, pb);
	h_ok(h, set == 4, "attempt times set (%lld rows)", set);

	u = h_get(h, "/v1/usage?since=2026-11-01T00:00:00Z&until=2026-11-02T00:00:00Z", &st);
	json_t *oa = NULL, *o;
	size_t i;
	json_array_foreach(json_object_get(u, "owners"), i, o)
		if (!strcmp(h_str(o, "owner"), "usage-a"))
			oa = o;
	h_ok(h, st == 200 && oa && h_int(oa, "attempts") == 2 && h_int(oa, "jobs") == 1 &&
		     h_int(oa, "jobs_succeeded") == 1 && h_int(oa, "jobs_failed") == 0 &&
		     usage_of(u, "usage-a", NULL) == 10800 && usage_of(u, "usage-a", "oom") == 3600 &&
		     usage_of(u, "usage-a", "succeeded") == 7200 && usage_of(u, "usage-b", NULL) < 0 &&
		     json_number_value(json_object_get(json_object_get(u, "total"), "oom_gpu_seconds")) == 3600,
	     "a day's usage: team A 3 GPU hours, 1 of them the OOM, its job succeeded; team B none that day");
	h_ok(h, oa && jpath_int(oa, "recovered.jobs", -1) == 1 && jpath_int(oa, "recovered.oom_attempts", -1) == 1 &&
		     jpath_int(u, "total.recovered.jobs", -1) == 1,
	     "a day's usage: team A's job recovered from its OOM, one OOM attempt before the config that fit");
	if (!oa)
		h_diag_json("usage", u);
	json_decref(u);
	u = h_get(h, "/v1/usage?since=2026-11-01T10:30:00Z&until=2026-11-01T12:00:00%2B00:00", &st);
	h_ok(h, st == 200 && usage_of(u, "usage-a", "oom") == 1800 && usage_of(u, "usage-a", "succeeded") == 3600 &&
		     usage_of(u, "usage-a", NULL) == 5400,
	     "a window cuts the attempts at its ends (10:30 to 12:00: half the OOM, an hour of the success)");
	json_decref(u);
	u = h_get(h, "/v1/usage?owner=usage-b", &st);
	double run = usage_of(u, "usage-b", "running");
	h_ok(h, st == 200 && run >= 3590 && run < 3900 && usage_of(u, "usage-a", NULL) < 0,
	     "the last week of team B: its running attempt counts up to now (%.0f s), no other owner", run);
	json_decref(u);
	u = NULL;

	h_ok(h, ctl_as(h, ta, "usage", "--since", "2026-11-01T00:00:00Z", "--until", "2026-11-02T00:00:00Z", "--json") == 0 &&
		     (u = out_json()) && json_array_size(json_object_get(u, "owners")) == 1 &&
		     usage_of(u, "usage-a", NULL) == 10800,
	     "a submitter's usage: its own");
	json_decref(u);
	u = NULL;
	h_ok(h, ctl(h, "usage", "--since", "2026-11-01T00:00:00Z", "--until", "2026-11-02T00:00:00Z", "--label",
		    "sweep=usage-s1", "--json") == 0 &&
		     (u = out_json()) && usage_of(u, "usage-a", NULL) == 10800 &&
		     json_array_size(json_object_get(u, "owners")) == 1,
	     "usage --label sweep=ID: the GPU time of the jobs that carry it");
	json_decref(u);
	u = h_get(h, "/v1/usage?since=2026-11-01T00:00:00Z&until=2026-11-02T00:00:00Z&label=sweep%3Dother", &st);
	h_ok(h, st == 200 && json_array_size(json_object_get(u, "owners")) == 0, "usage of a label no job carries: no owner");
	json_decref(u);
	u = NULL;
	int rc_u = ctl_as(h, ta, "usage", "--owner", "usage-b"); /* before h_ok: its arguments read g_err */
	h_ok(h, rc_u == 1 && strstr(g_err, "owner"), "a submitter asking for another owner: refused, naming owner (%s)",
	     g_err);
	json_decref(u);
	u = NULL;
	static const struct { const char *q, *field; } bad[] = {
		{ "since=yesterday", "since" },
		{ "until=2026-13-01T00:00:00Z", "until" },
		{ "until=2026-11-01T00:00:00", "until" },
		{ "since=2026-11-02T00:00:00Z&until=2026-11-01T00:00:00Z", "since" },
		{ "owner=no%20such", "owner" },
		{ "label=no%20such", "label" },
	};
	for (size_t k = 0; k < ARRAY_LEN(bad); k++) {
		char *path = xasprintf("/v1/usage?%s", bad[k].q);
		u = h_get(h, path, &st);
		h_ok(h, st == 400 && !strcmp(h_str(u, "field"), bad[k].field), "usage?%s: 400 naming %s", bad[k].q,
		     bad[k].field);
		json_decref(u);
		u = NULL;
		free(path);
	}
	rc_u = ctl(h, "usage", "--since", "2026-11-01T00:00:00Z", "--until", "2026-11-02T00:00:00Z");
	h_ok(h, rc_u == 0 && strstr(g_out, "usage-a") && strstr(g_out, "GPU HOURS") && strstr(g_out, "3.0 GPU hours") &&
		     strstr(g_out, "1.0 of them (33%) in attempts that ended in an OOM; 1 job succeeded after running out of "
				   "GPU memory (1 OOM attempt before the config that fit)"),
	     "rungctl usage: the table, the OOM share and the job recovered (%s)", g_out);
	h_ok(h, ctl(h, "usage", "--since", "yesterday") == 2 && strstr(g_err, "--since"), "rungctl usage --since yesterday: exit 2");

	/* the page: the last week's running attempt of team B; a submitter sees its own only */
	long code = h_browse(h, h->admin_token, "GET", "/ui/usage?days=7", NULL, NULL);
	h_ok(h, code == 200 && h->last_body && strstr(h->last_body, "GPU time, last 7 days") &&
		     strstr(h->last_body, ">usage-b</a>") && strstr(h->last_body, "<option selected>7</option>"),
	     "/ui/usage: the week's owners, each linking to its jobs (%ld)", code);
	code = h_browse(h, ta, "GET", "/ui/usage?days=30", NULL, NULL);
	h_ok(h, code == 200 && h->last_body && !strstr(h->last_body, "usage-b") && !strstr(h->last_body, "name=\"owner\""),
	     "/ui/usage for a submitter: no other owner, no owner field (%ld)", code);
	h_ok(h, h_browse(h, ta, "GET", "/ui/usage?owner=usage-b", NULL, NULL) == 403 &&
		     h_browse(h, h->admin_token, "GET", "/ui/usage?days=0", NULL, NULL) == 400 &&
		     h_browse(h, h->admin_token, "GET", "/ui/usage?days=7x", NULL, NULL) == 400 &&
		     h_browse(h, h->admin_token, "GET", "/ui/usage?owner=a%20b", NULL, NULL) == 400,
	     "/ui/usage: another owner for a submitter 403, bad days or owner 400");
out:
	json_decref(u);
	json_decref(l);
	json_decref(facts);
	json_decref(ok);
	free(ta);
	free(tb);
	free(cfg);
	free(ja);
	free(jb);
	free(w1);
	free(w2);
	free(aid);
}

/* Scheduled jobs (migration 025): submit --in and --at (RFC 3339, or HH:MM read in TZ), each bad
 * value a usage error before anything is sent; show's start line; jobs --state scheduled; start
 * (exit 1 for a job that is not scheduled, 4 for none); cancel of a scheduled job and by filter. */
static void test_scheduled(struct harness *h)
{
	char *cfg = config_file(h, "cli_later", 10), *id = NULL, *at_id = NULL, *past_id = NULL, *hhmm_id = NULL;
	char at[40];
	const char *const utc[] = { "TZ=UTC", NULL };
	json_t *j = NULL;
	int rc;

	{
		time_t t = (time_t)(util_wall_ms() / 1000 + 3 * 3600);
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	rc = ctl(h, "submit", cfg, "--in", "2h", "--labels", "night=cli");
	id = out_line();
	h_ok(h, rc == 0 && is_digits(id), "submit --in 2h: exit 0, the id (%s)", id);
	rc = ctl(h, "show", id);
	h_ok(h, rc == 0 && strstr(g_out, "\nstate             scheduled\n") && strstr(g_out, "\nrun_after         ") &&
		     strstr(g_out, "\nstart             scheduled: starts at ") &&
		     (strstr(g_out, "Z (in 2h00m)\n") || strstr(g_out, "Z (in 1h59m)\n")),
	     "show: scheduled, its run_after, \"start  scheduled: starts at T (in 2h00m)\"");
	h_ok(h, ctl(h, "jobs", "--state", "scheduled") == 0 && strstr(g_out, "scheduled") && strstr(g_out, "cli_later"),
	     "jobs --state scheduled lists it");
	rc = ctl(h, "submit", cfg, "--at", at, "--labels", "night=cli", "--json");
	h_ok(h, rc == 0 && (j = out_json()) && !strcmp(h_str(j, "state"), "scheduled"), "submit --at %s: scheduled", at);
	at_id = h_id(j, "id");
	json_decref(j);
	j = NULL;
	rc = ctl_env(h, h->admin_token, NULL, utc, "submit", cfg, "--at", "23:59", "--labels", "night=cli", "--json", NULL);
	j = out_json();
	h_ok(h, rc == 0 && j && !strcmp(h_str(j, "state"), "scheduled") && strstr(h_str(j, "run_after"), "T23:59:00"),
	     "submit --at 23:59 (TZ=UTC): scheduled for the next 23:59 UTC (%s)", h_str(j, "run_after"));
	hhmm_id = h_id(j, "id");
	json_decref(j);
	j = NULL;
	rc = ctl(h, "submit", cfg, "--at", "2001-02-03T04:05:06Z", "--labels", "night=cli", "--json");
	h_ok(h, rc == 0 && (j = out_json()) && !strcmp(h_str(j, "state"), "queued") && strstr(g_err, "has passed"),
	     "submit --at a past time: queued now, with a warning");
	past_id = h_id(j, "id");
	json_decref(j);
	j = NULL;
	h_ok(h, ctl(h, "submit", cfg, "--in", "2x") == 2 && strstr(g_err, "--in ") && strstr(g_err, "usage:"),
	     "submit --in 2x: usage error naming --in, exit 2");
	h_ok(h, ctl(h, "submit", cfg, "--in", "400d") == 2 && strstr(g_err, "365d"), "submit --in 400d: exit 2, the most said");
	h_ok(h, ctl(h, "submit", cfg, "--at", "25:00") == 2 && strstr(g_err, "--at "), "submit --at 25:00: exit 2");
	h_ok(h, ctl(h, "submit", cfg, "--at", "2026-12-01T22:00:00") == 2, "submit --at without a zone: exit 2");
	h_ok(h, ctl(h, "submit", cfg, "--at", at, "--in", "1h") == 2 && strstr(g_err, "not both"), "submit --at and --in: exit 2");
	h_ok(h, ctl(h, "submit", cfg, "--in", "90m", "--dry-run", "--json") == 0 && (j = out_json()) &&
		     h_int(j, "start_in_s") == 5400, "submit --in 90m --dry-run --json: the body's start_in_s 5400");
	json_decref(j);
	j = NULL;
	rc = ctl(h, "start", at_id ? at_id : "0");
	h_ok(h, rc == 0 && strstr(g_out, "started now"), "start: the job is queued now (%s)", g_out);
	rc = ctl(h, "start", at_id ? at_id : "0");
	h_ok(h, rc == 1 && strstr(g_err, "409") && strstr(g_err, "scheduled"), "start again: 409, exit 1 (%s)", g_err);
	h_ok(h, ctl(h, "start", "999999") == 4, "start of an unknown job: exit 4");
	h_ok(h, ctl(h, "start") == 2, "start without a job: exit 2");
	h_ok(h, ctl(h, "events", at_id ? at_id : "0") == 0 && strstr(g_out, "started_now  scheduled -> queued"),
	     "events: started_now, scheduled -> queued");
	h_ok(h, ctl(h, "cancel", id) == 0 && strstr(g_out, "cancelled"), "cancel of a scheduled job: cancelled");
	rc = ctl(h, "cancel", "--label", "night=cli", "--state", "scheduled", "--dry-run"); /* before g_out is read */
	h_ok(h, rc == 0 && strstr(g_out, "would cancel 1 job(s)"),
	     "cancel --label --state scheduled --dry-run: the one scheduled left (%s)", g_out);
	rc = ctl(h, "cancel", "--label", "night=cli");
	h_ok(h, rc == 0 && strstr(g_out, "cancelled or told to stop: 3 job(s)"),
	     "cancel --label: the not started ones, scheduled and queued (%s)", g_out); /* none left for the next tests */
	free(cfg);
	free(id);
	free(at_id);
	free(past_id);
	free(hhmm_id);
}

/* Whether the file (arg: {path, needle}) holds needle yet. */
struct file_wait {
	const char *path, *needle;
};

static bool file_has(void *arg)
{
	const struct file_wait *fw = arg;
	char *text = h_slurp(fw->path);
	bool ok = text && strstr(text, fw->needle);

	free(text);
	return ok;
}

/* Worker pools: submit --pool (alone and with a sweep, its --dry-run, a bad name refused before
 * anything is sent), jobs --pool and its POOL column, show's pool and why it waits when only other
 * pools have its GPUs, watch's lines about it, workers' POOL column. */
static void test_pools(struct harness *h)
{
	char *cfg = config_file(h, "cli_pool", 10), *id = NULL, *wid = NULL, *cmd = NULL, *out = NULL;
	json_t *j = NULL, *reg = NULL;
	long long n0 = h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);
	long st = 0;
	int rc;

	/* a worker in default and one in pool cli-h200, so that the jobs below have GPUs only elsewhere */
	wid = h_fake_register(h, "cli-pool-default", "GPU-cli-pool-0", 24576);
	reg = json_pack("{s:s, s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", "cli-pool-h200", "host", "test-host", "pool",
			"cli-h200", "gpus", "uuid", "GPU-cli-pool-1", "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 81920);
	json_decref(j = h_post(h, "/v1/workers", reg, &st));
	j = NULL;
	h_ok(h, wid && (st == 200 || st == 201), "a worker registered in default, one in pool cli-h200 (%ld)", st);

	rc = ctl(h, "submit", cfg, "--pool", "H200");
	h_ok(h, rc == 2 && strstr(g_err, "--pool") && strstr(g_err, "1 to 63 of a-z 0-9 . _ -") &&
		     h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == n0,
	     "submit --pool H200: exit 2 naming --pool and the rule, nothing submitted (%s)", g_err);
	rc = ctl(h, "submit", cfg, "--sweep", "train.lr=1e-4,2e-4", "--pool", "cli-a100", "--dry-run");
	h_ok(h, rc == 0 && line_count(g_out) == 2 && strstr(g_out, "cli_pool_lr1e-4\tpool=cli-a100\ttrain.lr=1e-4\n") &&
		     strstr(g_out, "cli_pool_lr2e-4\tpool=cli-a100\ttrain.lr=2e-4\n") &&
		     h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) == n0,
	     "submit --sweep --pool --dry-run: each job with its pool, nothing submitted (%s)", g_out);
	rc = ctl(h, "submit", cfg, "--sweep", "train.lr=1e-4,2e-4", "--pool", "cli-a100", "--labels", "sweep=cli-pools");
	h_ok(h, rc == 0 && line_count(g_out) == 2, "submit --sweep --pool: two jobs (%d, %s)", rc, g_err);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs WHERE labels @> '{\"sweep\": \"cli-pools\"}' AND pool = 'cli-a100'",
			  0, NULL) == 2, "every job of the sweep is in pool cli-a100");
	rc = ctl(h, "submit", cfg, "--pool", "cli-a100", "--json");
	j = out_json();
	id = h_id(j, "id");
	h_ok(h, rc == 0 && id && !strcmp(h_str(j, "pool"), "cli-a100"), "submit --pool cli-a100 --json: the job, in its pool");
	json_decref(j);
	j = NULL;

	rc = ctl(h, "jobs", "--pool", "cli-a100");
	h_ok(h, rc == 0 && line_count(g_out) == 4 && strstr(g_out, "POOL") && strstr(g_out, "  cli-a100\n") &&
		     !strstr(g_out, "default"),
	     "jobs --pool cli-a100: its three jobs, with a POOL column (%s)", g_out);
	rc = ctl(h, "jobs", "--pool", "cli-nobody", "--json");
	h_ok(h, rc == 0 && (j = out_json()) && json_array_size(json_object_get(j, "jobs")) == 0,
	     "jobs --pool cli-nobody: none");
	json_decref(j);
	j = NULL;
	rc = ctl(h, "jobs", "--pool", "Bad Pool");
	h_ok(h, rc == 1 && strstr(g_err, "400") && strstr(g_err, "pool"), "jobs --pool 'Bad Pool': 400 naming pool, exit 1 (%s)",
	     g_err);

	rc = ctl(h, "show", id);
	h_ok(h, rc == 0 && strstr(g_out, "\npool              cli-a100\n"), "show: the job's pool");
	h_ok(h, strstr(g_out, "waiting for a GPU: no GPU in pool cli-a100 can run it (") && strstr(g_out, " in other pools)"),
	     "show: no GPU in its pool, some in others (%s)", strstr(g_out, "\nqueue") ? strstr(g_out, "\nqueue") + 1 : g_out);

	/* watch of the queued job, in the background until its lines are out; the cancel ends it */
	out = xasprintf("%s/watch-pool.out", h->tmp);
	cmd = xasprintf("RUNG_URL=%s RUNG_TOKEN=%s timeout 60 bin/rungctl watch %s --interval-ms 100 >%s 2>&1 &", h->base_url,
			h->admin_token, id, out);
	free(h_shell(h, cmd, &rc));
	{
		struct file_wait fw = { out, "waiting for a GPU: no GPU in pool cli-a100 can run it (" };
		h_ok(h, wait_until(file_has, &fw, 20000), "watch: why it waits, once its pool has no GPU for it");
		fw.needle = "queued in pool cli-a100\n";
		h_ok(h, file_has(&fw), "watch: the job's state names its pool");
		h_ok(h, ctl(h, "cancel", id) == 0, "the watched job cancelled");
		fw.needle = "cancelled after";
		h_ok(h, wait_until(file_has, &fw, 20000), "watch ends with the verdict");
	}

	rc = ctl(h, "workers");
	h_ok(h, rc == 0 && strstr(g_out, "POOL") && strstr(g_out, "cli-h200") && strstr(g_out, "default"),
	     "workers: a POOL column, each worker's pool");

	/* pool JOB NAME: the cancelled job moved (it runs there when retried); a bad name is refused here */
	rc = ctl(h, "pool", id, "cli-h200");
	h_ok(h, rc == 0 && strstr(g_out, "pool cli-h200 (cancelled)"), "pool JOB cli-h200: moved (%s)", g_out);
	rc = ctl(h, "events", id);
	h_ok(h, rc == 0 && strstr(g_out, "pool_changed"), "events: the move");
	rc = ctl(h, "pool", id, "Nope");
	h_ok(h, rc == 2 && strstr(g_err, "1 to 63 of a-z 0-9 . _ -"), "pool JOB Nope: exit 2 with the rule");
	h_ok(h, ctl(h, "pool", "999999", "cli-h200") == 4, "pool of an unknown job: exit 4");
	ctl(h, "cancel", "--label", "sweep=cli-pools");

	/* borrowing (migration 028): a worker of pool cli-lender that borrows from cli-b100 and cli-h200, in
	 * that order; a job of cli-b100, which has no worker of its own, says the borrower may take it */
	json_decref(reg);
	reg = json_pack("{s:s, s:s, s:s, s:[s, s], s:[{s:s, s:i, s:s, s:i}]}", "name", "cli-pool-lender", "host", "test-host",
			"pool", "cli-lender", "borrow", "cli-b100", "cli-h200", "gpus", "uuid", "GPU-cli-pool-2", "index", 0,
			"name", "NVIDIA Sim", "memory_total_mib", 81920);
	json_decref(j = h_post(h, "/v1/workers", reg, &st));
	j = NULL;
	h_ok(h, st == 200 || st == 201, "a worker of pool cli-lender registered, borrowing from cli-b100 and cli-h200 (%ld)", st);
	rc = ctl(h, "workers");
	{
		/* the header's BORROWS column, and each row's cell under it: the lender's list, "-" for the others */
		const char *head = strstr(g_out, "BORROWS"), *lender = strstr(g_out, "cli-pool-lender"),
			   *other = strstr(g_out, "cli-pool-h200");
		size_t col = head ? (size_t)(head - g_out) : 0;

		while (lender && lender > g_out && lender[-1] != '\n')
			lender--;
		while (other && other > g_out && other[-1] != '\n')
			other--;
		h_ok(h, rc == 0 && head && lender && other && strlen(lender) > col && strlen(other) > col &&
			     !strncmp(lender + col, "cli-b100,cli-h200 ", 18) && !strncmp(other + col, "- ", 2),
		     "workers: a BORROWS column, aligned: the lender's pools in its order, - for one that borrows none (%s)",
		     g_out);
	}
	rc = ctl(h, "submit", cfg, "--pool", "cli-b100", "--json");
	j = out_json();
	free(id);
	id = h_id(j, "id");
	json_decref(j);
	j = NULL;
	h_ok(h, rc == 0 && id, "a job submitted to cli-b100, a pool with no worker of its own");
	rc = ctl(h, "show", id ? id : "0");
	h_ok(h, rc == 0 && strstr(g_out, "waiting for a GPU: no GPU in pool cli-b100 can run it; 1 GPU of workers that borrow "
				    "from cli-b100 may take it when their own pool has no job for them"),
	     "show: no GPU in its pool, the borrower's counted (%s)",
	     strstr(g_out, "\nqueue") ? strstr(g_out, "\nqueue") + 1 : g_out);
	h_ok(h, ctl(h, "cancel", id ? id : "0") == 0, "the cli-b100 job cancelled");
	free(cmd);
	free(out);
	free(wid);
	free(id);
	free(cfg);
	json_decref(reg);
}

int main(void)
{
	struct harness *h = h_new("it_cli");

	if (chdir(h->root) != 0)
		h_diag("chdir %s: %s", h->root, strerror(errno));
	if (h_ok(h, h_server_start(h, NULL) == 0, "rungd started")) {
		test_help_and_usage(h);
		test_job_commands(h);
		test_cancel_matching(h);
		test_scheduled(h);
		test_sweep(h);
		test_support_commands(h);
		test_token_commands(h);
		test_token_expiry(h);
		test_raw_submit(h);
		test_classify(h);
		test_usage(h); /* before the next starts a worker that would lease its jobs */
		test_pools(h);
		test_yaml_fixture_run(h);
	}
	free(g_out);
	free(g_err);
	return h_free(h);
}
