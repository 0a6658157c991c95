/* rungctl's fleet and support commands: escalations, report, ack, resolve, workers, drain, resume,
 * owners, gpus, gpu release. Same shape as cmd_jobs.c: options, one call, a table or the server's JSON. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "jobtext.h"
#include "jpath.h"
#include "pool.h"
#include "table.h"
#include "util.h"
#include "version.h"

/* An owner's limits per pool (GET /v1/owners' "pool_limits", migration 034: [{"pool", "running",
 * "max_running"}]) as "h200 1/2,video 0/1": its jobs of each pool running, of the most that may;
 * "-" when none. Heap. */
static char *pool_limits_cell(const json_t *list)
{
	char *out = NULL;
	const json_t *l;
	size_t i;

	json_array_foreach(list, i, l) {
		char *next = xasprintf("%s%s%s %lld/%lld", out ? out : "", out ? "," : "",
				       json_string_value(json_object_get(l, "pool")) ?: "?",
				       (long long)json_integer_value(json_object_get(l, "running")),
				       (long long)json_integer_value(json_object_get(l, "max_running")));
		free(out);
		out = next;
	}
	return out ? out : xstrdup("-");
}

/* An owner's GPU-hour quota (GET /v1/owners' "quota", migration 035: {"gpu_hours", "days",
 * "used_hours", "over"}) as "512.3/500 in 7d (over)": the hours used in its window of the most;
 * "-" when it has none. Heap. */
static char *quota_cell(const json_t *q)
{
	char *cell, *out;

	if (!json_is_object(q))
		return xstrdup("-");
	cell = jobtext_quota_cell(q);
	out = xasprintf("%s%s", cell, json_is_true(json_object_get(q, "over")) ? " (over)" : "");
	free(cell);
	return out;
}

/* An owner's quotas per pool (GET /v1/owners' "pool_quotas", migration 037: [{"pool", "gpu_hours",
 * "days", "used_hours", "over"}]) as "h200 3.0/2 in 7d (over),video 0.0/10 in 7d"; "-" when none. Heap. */
static char *pool_quotas_cell(const json_t *list)
{
	char *out = NULL;
	const json_t *q;
	size_t i;

	json_array_foreach(list, i, q) {
		char *cell = quota_cell(q);
		char *next = xasprintf("%s%s%s %s", out ? out : "", out ? "," : "", json_string_value(json_object_get(q, "pool")) ?: "?",
				       cell);
		free(cell);
		free(out);
		out = next;
	}
	return out ? out : xstrdup("-");
}

/* Prints the objects of list as a table with these headers; a key may be a path ("a.b"), "a|b" (a,
 * else b), "#k" (the length of the array under k), ",k" (the names in the array under k joined with
 * ",", "-" when none), "/k" (the per-pool limits under k: pool_limits_cell), "*k" (a GPU-hour quota:
 * quota_cell) or "%k" (the quotas per pool under k: pool_quotas_cell). */
static void print_table(struct cli *c, const json_t *list, const char *const *head, const char *const *keys,
	size_t n)
{
	struct table *t = table_new(n, head);
	size_t i;
	json_t *o;
	json_array_foreach(list, i, o) {
		char *cells[16];
		for (size_t k = 0; k < n; k++) {
			char *alts = xstrdup(keys[k]), *save = NULL;
			const json_t *v = NULL;
			int count = alts[0] == '#', names = alts[0] == ',', limits = alts[0] == '/', quota = alts[0] == '*';
			int pool_quotas = alts[0] == '%';
			for (char *p = strtok_r(alts + count + names + limits + quota + pool_quotas, "|", &save); p && !v;
			     p = strtok_r(NULL, "|", &save))
				v = jpath_get(o, p);
			if (names) /* an array of names: "a,b", "-" when empty or absent */
				cells[k] = pool_list_join(v, ",", "-");
			else if (limits)
				cells[k] = pool_limits_cell(v);
			else if (quota)
				cells[k] = quota_cell(v);
			else if (pool_quotas)
				cells[k] = pool_quotas_cell(v);
			else
				cells[k] = count && json_is_array(v) ? xasprintf("%zu", json_array_size(v)) : table_cell(v);
			free(alts);
		}
		table_add(t, (const char *const *)cells);
		for (size_t k = 0; k < n; k++)
			free(cells[k]);
	}
	char *s = table_render(t);
	fputs(s, c->out);
	free(s);
	table_free(t);
}

/* A read command: parse no options of its own, GET path, print JSON or a table of list_key. */
static int list_cmd(struct cli *c, const char *name, int argc, char **argv, const char *path,
	const char *list_key, const char *const *head, const char *const *keys, size_t n)
{
	char *ops[1];
	json_t *ans = NULL;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named(name), opts, ARRAY_LEN(opts), argc, argv, ops, 0, 0);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	rc = cli_call(c, "GET", path, NULL, NULL, &ans);
	if (rc == CLI_OK) {
		if (c->json)
			cli_print_json(c, ans);
		else
			print_table(c, cli_list(ans, list_key), head, keys, n);
	}
	json_decref(ans);
	return rc;
}

static const char *const esc_head[] = { "ID", "STATE", "TRIGGER", "JOB", "SUMMARY", "CREATED" };
static const char *const esc_keys[] = { "id", "state", "trigger", "job_id", "summary", "created_at" };

int cmd_escalations(struct cli *c, int argc, char **argv)
{
	const char *state = NULL;
	char *ops[1];
	json_t *ans = NULL;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "state", .type = ARGS_STRING, .str = &state },
	};
	int rc = cli_args(c, cli_cmd_named("escalations"), opts, ARRAY_LEN(opts), argc, argv, ops, 0, 0);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	char *st = state ? httpc_escape(state) : NULL;
	char *path = xasprintf("/v1/escalations%s%s", st ? "?state=" : "", st ? st : "");
	rc = cli_call(c, "GET", path, NULL, NULL, &ans);
	if (rc == CLI_OK) {
		if (c->json)
			cli_print_json(c, ans);
		else
			print_table(c, cli_list(ans, "escalations"), esc_head, esc_keys, ARRAY_LEN(esc_head));
	}
	json_decref(ans);
	free(path);
	free(st);
	return rc;
}

int cmd_report(struct cli *c, int argc, char **argv)
{
	char *ops[1];
	json_t *ans = NULL;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("report"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	char *e = httpc_escape(ops[0]);
	char *path = xasprintf("/v1/escalations/%s", e);
	rc = cli_call(c, "GET", path, NULL, NULL, &ans);
	if (rc == CLI_OK) {
		const char *md = json_string_value(json_object_get(ans, "report_markdown"));
		if (c->json) {
			cli_print_json(c, ans);
		} else if (md) {
			fputs(md, c->out);
			if (*md && md[strlen(md) - 1] != '\n')
				fputc('\n', c->out);
		} else {
			fprintf(c->err, "rungctl report: escalation %s has no report_markdown\n", ops[0]);
			rc = CLI_REFUSED;
		}
	}
	json_decref(ans);
	free(path);
	free(e);
	return rc;
}

/* ack, resolve, drain, resume and requeue: POST /v1/COLLECTION/ID/VERB {"note", "requeue"?} (need_note:
 * --note is required; can_requeue: --requeue is taken, a drain's); prints "THING ID: STATE" (and what
 * a drain or a requeue does to the running attempts) or the server's JSON. */
static int note_cmd(struct cli *c, const char *verb, const char *collection, const char *thing, bool need_note,
	bool can_requeue, int argc, char **argv)
{
	const char *note = NULL;
	char *ops[1], *e = NULL, *path = NULL;
	json_t *ans = NULL, *body = NULL;
	int requeue = 0;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "note", .type = ARGS_STRING, .str = &note },
		{ .name = "requeue", .type = ARGS_FLAG, .flag = &requeue },
	};
	/* --requeue is in the table for a drain only */
	int rc = cli_args(c, cli_cmd_named(verb), opts, ARRAY_LEN(opts) - (can_requeue ? 0 : 1), argc, argv, ops, 1, 1);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (need_note && !note) {
		fprintf(c->err, "rungctl %s: --note TEXT is required\nusage: rungctl %s\n", verb,
			cli_cmd_named(verb)->usage);
		return CLI_USAGE;
	}
	body = json_pack("{s:s?}", "note", note);
	if (!body) {
		fprintf(c->err, "rungctl %s: --note must be UTF-8 text\n", verb);
		return CLI_USAGE;
	}
	if (requeue)
		json_object_set_new(body, "requeue", json_true());
	e = httpc_escape(ops[0]);
	path = xasprintf("/v1/%s/%s/%s", collection, e, verb);
	rc = cli_call(c, "POST", path, body, NULL, &ans);
	if (rc == CLI_OK) {
		if (c->json) {
			cli_print_json(c, ans);
		} else if (!strcmp(verb, "requeue")) {
			fprintf(c->out, "job %s: its running attempt stops at its next heartbeat; the job is then queued again "
				"unchanged, outside its budgets\n", ops[0]);
		} else if (json_is_integer(json_object_get(ans, "requeued"))) {
			long long n = (long long)json_integer_value(json_object_get(ans, "requeued"));
			fprintf(c->out, "%s %s: draining (no new leases; %lld running attempt%s stopped at the next heartbeat, "
				"their jobs queued again unchanged)\n", thing, ops[0], n, n == 1 ? "" : "s");
		} else {
			char *st = table_cell(json_object_get(ans, "state"));
			fprintf(c->out, "%s %s: %s%s\n", thing, ops[0], st,
				!strcmp(st, "draining") ? " (no new leases; running attempts go on)" : "");
			free(st);
		}
	}
	json_decref(body);
	json_decref(ans);
	free(path);
	free(e);
	return rc;
}

int cmd_ack(struct cli *c, int argc, char **argv)
{
	return note_cmd(c, "ack", "escalations", "escalation", true, false, argc, argv);
}

int cmd_resolve(struct cli *c, int argc, char **argv)
{
	return note_cmd(c, "resolve", "escalations", "escalation", true, false, argc, argv);
}

int cmd_workers(struct cli *c, int argc, char **argv)
{
	/* BORROWS: the pools whose jobs it also takes when its own has none (migration 028), in its order */
	static const char *const head[] = { "ID", "NAME", "HOST", "POOL", "BORROWS", "STATE", "VERSION", "GPUS",
		"RUNNING", "LAST SEEN", "DRAINED BY", "WHY" };
	static const char *const keys[] = { "id", "name", "host", "pool", ",borrow", "state", "version", "#gpus",
		"running_attempts", "last_seen_at", "drain.by", "drain.note" };
	return list_cmd(c, "workers", argc, argv, "/v1/workers", "workers", head, keys, ARRAY_LEN(head));
}

int cmd_owners(struct cli *c, int argc, char **argv)
{
	/* POOL LIMITS: per pool it is limited in, its jobs of that pool running / the most (migration 034) */
	/* GPU HOURS: its quota's hours used in the window of the most (migration 035); POOL GPU HOURS: the same
	 * per pool it has a quota in (037) */
	static const char *const head[] = { "OWNER", "RUNNING", "QUEUED", "SCHEDULED", "MAX RUNNING", "POOL LIMITS",
					    "GPU HOURS", "POOL GPU HOURS" };
	static const char *const keys[] = { "owner", "running", "queued", "scheduled", "max_running", "/pool_limits",
					    "*quota", "%pool_quotas" };
	return list_cmd(c, "owners", argc, argv, "/v1/owners", "owners", head, keys, ARRAY_LEN(head));
}

int cmd_pools(struct cli *c, int argc, char **argv)
{
	/* BORROWED BY: the pools whose workers take its jobs when their own have none; BORROWS: the pools
	 * its own workers borrow from (migration 028) */
	static const char *const head[] = { "POOL", "QUEUED", "SCHEDULED", "RUNNING", "WORKERS", "GPUS", "DRAINING",
		"BORROWING GPUS", "BORROWED BY", "BORROWS", "LARGEST GPU MIB" };
	static const char *const keys[] = { "pool", "queued", "scheduled", "running", "workers", "gpus", "draining_gpus",
		"borrowing_gpus", ",borrowed_by", ",borrows", "max_gpu_mib" };
	return list_cmd(c, "pools", argc, argv, "/v1/pools", "pools", head, keys, ARRAY_LEN(head));
}

int cmd_gpus(struct cli *c, int argc, char **argv)
{
	static const char *const head[] = { "UUID", "WORKER", "INDEX", "NAME", "MEMORY MIB", "STATE", "ENV FAULTS",
		"REASON" };
	static const char *const keys[] = { "uuid", "worker_id", "index", "name", "memory_total_mib", "state",
		"env_faults", "reason" };
	return list_cmd(c, "gpus", argc, argv, "/v1/gpus", "gpus", head, keys, ARRAY_LEN(head));
}

int cmd_drain(struct cli *c, int argc, char **argv)
{
	return note_cmd(c, "drain", "workers", "worker", false, true, argc, argv);
}

int cmd_requeue(struct cli *c, int argc, char **argv)
{
	return note_cmd(c, "requeue", "jobs", "job", false, false, argc, argv);
}

int cmd_resume(struct cli *c, int argc, char **argv)
{
	return note_cmd(c, "resume", "workers", "worker", false, false, argc, argv);
}

int cmd_gpu_release(struct cli *c, int argc, char **argv)
{
	char *ops[1];
	json_t *ans = NULL;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("gpu release"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	char *e = httpc_escape(ops[0]);
	char *path = xasprintf("/v1/gpus/%s/release", e);
	rc = cli_call(c, "POST", path, NULL, NULL, &ans);
	if (rc == CLI_OK) {
		if (c->json) {
			cli_print_json(c, ans);
		} else {
			char *st = table_cell(json_object_get(ans, "state"));
			fprintf(c->out, "gpu %s: %s\n", ops[0], st);
			free(st);
		}
	}
	json_decref(ans);
	free(path);
	free(e);
	return rc;
}

int cmd_version(struct cli *c, int argc, char **argv)
{
	char *ops[1];
	json_t *ans = NULL;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("version"), opts, ARRAY_LEN(opts), argc, argv, ops, 0, 0);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (!c->json)
		fprintf(c->out, "rungctl %s\n", rung_version());
	rc = cli_call(c, "GET", "/healthz", NULL, NULL, &ans);
	if (rc == CLI_OK && c->json) {
		json_t *doc = json_pack("{s:s, s:O}", "rungctl", rung_version(), "rungd", ans);
		cli_print_json(c, doc);
		json_decref(doc);
	} else if (rc == CLI_OK) {
		const char *v = json_string_value(json_object_get(ans, "version"));
		fprintf(c->out, "rungd %s (%s, schema %lld)\n", v ? v : "(from before versions)", c->url,
			(long long)json_integer_value(json_object_get(ans, "schema")));
	}
	json_decref(ans);
	return rc;
}
