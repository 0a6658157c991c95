/* rungctl's job commands: submit, jobs, show, attempts, events, cancel, retry, priority, pool, start, watch.
 * Each parses its options, makes its calls through cli_call and prints a table, lines or the
 * server's JSON. */
#include "cmd_jobs.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "after.h"
#include "cli.h"
#include "cmd_profiles.h"
#include "jobtext.h"
#include "jpath.h"
#include "jsondiff.h"
#include "labels.h"
#include "pool.h"
#include "priority.h"
#include "progress.h"
#include "story.h"
#include "sweep.h"
#include "table.h"
#include "util.h"
#include "when.h"
#include "yamljson.h"

#define WATCH_UNREACHABLE_MS 30000  /* watch gives up after this long without an answer (exit 3) or with only 503s (exit 1) */

json_t *cmd_submit_body(const json_t *config, const struct cmd_submit_opts *o)
{
	json_t *body = json_object(), *rec = json_object();
	json_object_set(body, "config", (json_t *)config);
	if (o->name)
		json_object_set_new(body, "name", json_string(o->name));
	if (o->has_priority)
		json_object_set_new(body, "priority", json_integer(o->priority));
	if (json_object_size(o->labels) > 0)
		json_object_set(body, "labels", (json_t *)o->labels);
	if (o->pool)
		json_object_set_new(body, "pool", json_string(o->pool));
	if (o->run_after)
		json_object_set_new(body, "run_after", json_string(o->run_after));
	else if (o->start_in_s > 0)
		json_object_set_new(body, "start_in_s", json_integer(o->start_in_s));
	if (o->start_by) /* the start deadline (migration 039) */
		json_object_set_new(body, "start_by", json_string(o->start_by));
	else if (o->start_within_s > 0)
		json_object_set_new(body, "start_within_s", json_integer(o->start_within_s));
	if (o->after)
		json_object_set(body, "after", (json_t *)o->after);
	if (o->after_when)
		json_object_set_new(body, "after_when", json_string(o->after_when));
	if (o->no_scale_up)
		json_object_set_new(rec, "scale_up", json_false());
	if (o->max_attempts > 0)
		json_object_set_new(rec, "max_attempts", json_integer(o->max_attempts));
	if (o->validate_steps > 0)
		json_object_set_new(rec, "validate_steps", json_integer(o->validate_steps));
	if (json_object_size(rec) > 0)
		json_object_set(body, "recovery", rec);
	json_decref(rec);
	return body;
}

json_t *cmd_after_ids(const char *ids, char **why)
{
	json_t *list = after_parse(ids);

	*why = list ? NULL : xasprintf("%s: give 1 to %d job ids, comma-separated (12 or 12,13)", ids, AFTER_MAX);
	return list;
}

int cmd_submit_start(const char *at, const char *in, int64_t now_ms, struct cmd_submit_opts *o, char *buf, size_t n,
		     bool *past, char **why)
{
	const char *w;
	int64_t ms;

	*past = false;
	*why = NULL;
	if (at && in) {
		*why = xstrdup("give --at TIME or --in DURATION, not both");
		return -1;
	}
	if (in) {
		if (when_parse_in(in, &o->start_in_s, &w) < 0) {
			*why = xasprintf("--in %s", w);
			return -1;
		}
		return 0;
	}
	if (!at)
		return 0;
	if (when_parse_at(at, now_ms, &ms, &w) < 0) {
		*why = xasprintf("--at %s", w);
		return -1;
	}
	if (util_time_parse(at, &ms) == 0) {
		o->run_after = at; /* as the user wrote it: the same command sends the same body */
	} else {
		when_format_utc(ms, buf, n);
		o->run_after = buf;
	}
	*past = ms <= now_ms;
	return 0;
}

struct sweep *cmd_sweep_read(struct cli *c, const char *cmd, const char *const *sets, size_t n_sets,
	const char *const *sweeps, size_t n_sweeps, const char *const *links, size_t n_links)
{
	struct sweep *sw = sweep_new();
	char *err = NULL;
	for (size_t i = 0; i < n_links && !err; i++) /* first: a sweep knows its link as it is added */
		sweep_add_link(sw, links[i], &err);
	for (size_t i = 0; i < n_sets && !err; i++)
		sweep_add_set(sw, sets[i], &err);
	for (size_t i = 0; i < n_sweeps && !err; i++)
		sweep_add_axis(sw, sweeps[i], &err);
	if (!err)
		sweep_check_links(sw, &err);
	if (err) {
		fprintf(c->err, "rungctl %s: %s\n", cmd, err);
		free(err);
		sweep_free(sw);
		return NULL;
	}
	return sw;
}

/* The bodies of a submit: one per variant of sw (its suffix added to --name), with the sweep label
 * in labels when sw has a sweep. file: the config's file, named in what is printed when a submit has
 * several (NULL: not named). Returns a new array, or NULL after printing why (exit 2). */
static json_t *submit_bodies(struct cli *c, const char *file, const json_t *config, const struct sweep *sw,
	const struct cmd_submit_opts *o)
{
	json_t *bodies = json_array();
	for (size_t i = 0; i < sweep_count(sw); i++) {
		char *sfx = NULL, *added = NULL, *err = NULL, *name = NULL;
		json_t *cfg = sweep_apply(sw, config, i, &sfx, &added, &err);
		if (!cfg) {
			fprintf(c->err, "rungctl submit: %s%s%s\n", file ? file : "", file ? ": " : "", err);
			free(err);
			json_decref(bodies);
			return NULL;
		}
		if (added && i == 0)
			fprintf(c->err, "rungctl submit: warning: %s%sthe config had no %s; added (check the spelling)\n",
				file ? file : "", file ? ": " : "", added);
		struct cmd_submit_opts ov = *o;
		if (o->name && sfx)
			ov.name = name = xasprintf("%s_%s", o->name, sfx);
		json_array_append_new(bodies, cmd_submit_body(cfg, &ov));
		json_decref(cfg);
		free(name);
		free(sfx);
		free(added);
	}
	return bodies;
}

/* Prints the warnings a submit's reply carries with JOB (rung_submit_pool_warning: a pool no worker
 * takes from) on stderr, each text once per command (WARNED: the texts printed), so that a sweep of
 * 50 jobs into one pool says it once. The job was stored all the same. */
static void submit_warnings(struct cli *c, const json_t *job, json_t **warned)
{
	const json_t *w;
	size_t i;

	json_array_foreach(json_object_get(job, "warnings"), i, w) {
		const char *msg = json_string_value(json_object_get(w, "message"));
		const char *field = json_string_value(json_object_get(w, "field"));
		if (!msg || json_object_get(*warned, msg))
			continue;
		json_object_set_new(*warned, msg, json_true());
		fprintf(c->err, "rungctl submit: warning: %s%s%s\n", field ? field : "", field ? ": " : "", msg);
	}
}

/* Prints the id of the job that runs after the n jobs above (not with --json) and, on stderr, what it
 * waits for (when: its after_when). */
static void then_said(struct cli *c, const json_t *job, size_t n, const char *when)
{
	char *id = table_cell(json_object_get(job, "id"));

	if (!c->json)
		fprintf(c->out, "%s\n", id);
	fprintf(c->err, "rungctl submit: job %s runs after the %zu job%s above once %s %s\n", id, n, n == 1 ? "" : "s",
		n == 1 ? "it" : "they",
		!strcmp(when, "ended")	  ? (n == 1 ? "has ended" : "have all ended")
		: !strcmp(when, "failed") ? (n == 1 ? "has failed or was cancelled" : "have all failed or were cancelled")
					  : (n == 1 ? "has succeeded" : "have all succeeded"));
	free(id);
}

#define SUBMIT_FILES_MAX 64  /* config files in one submit */
#define SUBMIT_BATCH_MAX 500 /* jobs in one submit: one POST /v1/jobs/batch (API_JOBS_BATCH_MAX) */
#define BATCH_TRIES 3 /* a batch with no answer (or a 502/503/504) is sent again under its key */

/* A sweep, or jobs and the one --then runs after them, as one batch: POST /v1/jobs/batch, stored all or
 * none under one Idempotency-Key for the whole batch: idem, else one made here, so that a batch that
 * got no answer (or a 502, 503, 504) is sent again (BATCH_TRIES in all) and answered, never stored
 * twice. bodies: the jobs' submits; then_config (NULL: none) runs after all of them once when says,
 * with o's labels and pool. On success appends their JOBs to jobs, sets *then_job (new) and prints
 * their ids and warnings as the one-by-one path does; on a failure says whether anything may have
 * been stored. *old: rungd answered 404, 405 or 413 (a release before batches, or a batch over its
 * body limit): nothing was stored and the caller sends them one by one. *unknown: a failed batch may
 * have been stored (a try got no answer: said here, the caller adds nothing). label: the sweep's, or
 * NULL. Returns cli_call's code. */
static int submit_batch(struct cli *c, const json_t *bodies, const json_t *then_config, const char *when,
			const struct cmd_submit_opts *o, const char *idem, const char *label, json_t *jobs,
			json_t **then_job, json_t **warned, bool *old, bool *unknown)
{
	json_t *list = json_copy((json_t *)bodies), *doc, *ans = NULL, *v;
	size_t n = json_array_size(bodies), i;
	char *made = NULL;
	int rc, tries = 0;
	bool maybe_stored = false; /* a try went unanswered (or 502/503/504): it may have been stored */

	*old = false;
	*unknown = false;
	if (!idem) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		made = xasprintf("rungctl-%lld-%ld-%u", (long long)ts.tv_sec, ts.tv_nsec, (unsigned)getpid());
	}
	if (then_config) {
		struct cmd_submit_opts to = { .labels = o->labels, .pool = o->pool, .after_when = when };
		json_t *b = cmd_submit_body(then_config, &to), *items = json_array();
		for (i = 0; i < n; i++)
			json_array_append_new(items, json_integer((json_int_t)i));
		json_object_set_new(b, "after_items", items);
		json_array_append_new(list, b);
	}
	doc = json_pack("{s:o}", "jobs", list);
	c->quiet_unsupported = 1;
	for (;;) {
		rc = cli_call(c, "POST", "/v1/jobs/batch", doc, idem ? idem : made, &ans);
		if (rc == CLI_OK)
			break;
		/* after a try with no answer, a 429 (the rate is read before the key) is waited out too */
		if (!(cli_transient(c, rc) || (maybe_stored && c->last_status == 429)) || ++tries >= BATCH_TRIES) {
			maybe_stored |= cli_transient(c, rc);
			break;
		}
		maybe_stored |= cli_transient(c, rc);
		fprintf(c->err, "rungctl submit: the batch got %s; sending it again under its Idempotency-Key\n",
			c->last_status == 429 ? "429 (the submit rate)" : "no answer");
		sleep((unsigned)tries);
	}
	c->quiet_unsupported = 0;
	if (rc != CLI_OK) {
		/* one by one only when rungd said, at the first try, that it takes no batch (or not this one) */
		*old = !maybe_stored && (c->last_status == 404 || c->last_status == 405 || c->last_status == 413);
		*unknown = !*old && (maybe_stored || c->last_status < 400 || c->last_status >= 500);
		if (!*old && !maybe_stored && c->last_status >= 400 && c->last_status < 500)
			fprintf(c->err, "rungctl submit: nothing was submitted (the %zu jobs are one batch, stored all or none)\n",
				json_array_size(list));
		else if (!*old && label)
			fprintf(c->err, "rungctl submit: the batch of %zu jobs may have been stored, or not (it is stored whole or "
					"not at all): rungctl jobs --label sweep=%s shows which\n", json_array_size(list), label);
		else if (!*old)
			fprintf(c->err, "rungctl submit: the batch of %zu jobs may have been stored, or not (it is stored whole or "
					"not at all): rungctl jobs shows which\n", json_array_size(list));
		goto out;
	}
	json_array_foreach(json_object_get(ans, "jobs"), i, v) {
		if (i == n) {
			*then_job = json_incref(v);
			then_said(c, v, n, when);
			break;
		}
		if (!c->json) {
			char *id = table_cell(json_object_get(v, "id"));
			fprintf(c->out, "%s\n", id);
			free(id);
		}
		submit_warnings(c, v, warned);
		json_array_append(jobs, v);
	}
out:
	free(made);
	json_decref(ans);
	json_decref(doc);
	return rc;
}

/* submit --then FILE: the job (config, FILE's) that runs after every job just submitted (jobs: their
 * JOBs), with after_when when (migration 036), the submit's labels (a sweep's label too, so that `jobs
 * --label sweep=ID` and `cancel --label` take it with them) and pool; under IDEM-then when the submit
 * has an Idempotency-Key. Prints its id (not with --json), and says on stderr what it waits for.
 * Returns cli_call's code; *job its JOB (new reference) on success. */
static int submit_then(struct cli *c, const char *file, const json_t *config, const json_t *jobs, const char *when,
		       const struct cmd_submit_opts *o, const char *idem, json_t **job)
{
	struct cmd_submit_opts to = { .labels = o->labels, .pool = o->pool, .after_when = when };
	json_t *ids = json_array(), *body, *v;
	char *key = idem ? xasprintf("%s-then", idem) : NULL;
	size_t i;
	int rc;

	json_array_foreach(jobs, i, v)
		json_array_append(ids, json_object_get(v, "id"));
	to.after = ids;
	body = cmd_submit_body(config, &to);
	rc = cli_call(c, "POST", "/v1/jobs", body, key, job);
	if (rc == CLI_OK) {
		then_said(c, *job, i, when);
	} else {
		fprintf(c->err, "rungctl submit: --then %s: not submitted; the jobs above were\n", file);
	}
	free(key);
	json_decref(body);
	json_decref(ids);
	return rc;
}

int cmd_submit(struct cli *c, int argc, char **argv)
{
	struct cmd_submit_opts o = { .name = NULL };
	const char *idem = NULL, *labels = NULL, *sets[64], *sweeps[8], *links[4], *at = NULL, *in = NULL, *after = NULL;
	const char *then = NULL, *then_when = NULL, *start_by = NULL, *start_within = NULL;
	char by_buf[40];
	size_t n_sets = 0, n_sweeps = 0, n_links = 0, n = 0, n_files = 0, i;
	int dry_run = 0;
	char *ops[SUBMIT_FILES_MAX] = { NULL }, *err = NULL, *label = NULL, at_buf[40];
	bool past, batched = false, old_server = false, unknown = false;
	json_t *config = NULL, *bodies = NULL, *jobs = NULL, *parsed = NULL, *warned = NULL, *after_ids = NULL;
	json_t *then_config = NULL, *then_job = NULL;
	struct sweep *sw = NULL;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "name", .type = ARGS_STRING, .str = &o.name },
		{ .name = "priority", .type = ARGS_INT, .num = &o.priority, .min = PRIORITY_MIN, .max = PRIORITY_MAX,
			.seen = &o.has_priority },
		{ .name = "no-scale-up", .type = ARGS_FLAG, .flag = &o.no_scale_up },
		{ .name = "max-attempts", .type = ARGS_INT, .num = &o.max_attempts, .min = 1, .max = 1000 },
		{ .name = "validate-steps", .type = ARGS_INT, .num = &o.validate_steps, .min = 1, .max = 100000000 },
		{ .name = "idempotency-key", .type = ARGS_STRING, .str = &idem },
		{ .name = "labels", .type = ARGS_STRING, .str = &labels },
		{ .name = "pool", .type = ARGS_STRING, .str = &o.pool },
		{ .name = "at", .type = ARGS_STRING, .str = &at },
		{ .name = "in", .type = ARGS_STRING, .str = &in },
		{ .name = "start-by", .type = ARGS_STRING, .str = &start_by },
		{ .name = "start-within", .type = ARGS_STRING, .str = &start_within },
		{ .name = "after", .type = ARGS_STRING, .str = &after },
		{ .name = "after-when", .type = ARGS_STRING, .str = &o.after_when },
		{ .name = "then", .type = ARGS_STRING, .str = &then },
		{ .name = "then-when", .type = ARGS_STRING, .str = &then_when },
		{ .name = "set", .type = ARGS_LIST, .list = sets, .count = &n_sets, .max = ARRAY_LEN(sets) },
		{ .name = "sweep", .type = ARGS_LIST, .list = sweeps, .count = &n_sweeps, .max = ARRAY_LEN(sweeps) },
		{ .name = "link", .type = ARGS_LIST, .list = links, .count = &n_links, .max = ARRAY_LEN(links) },
		{ .name = "dry-run", .type = ARGS_FLAG, .flag = &dry_run },
	};
	int rc = cli_args(c, cli_cmd_named("submit"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, ARRAY_LEN(ops));
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	rc = CLI_USAGE;
	if (labels && !(parsed = labels_parse(labels, "--labels", &err))) {
		fprintf(c->err, "rungctl submit: %s\n", err);
		goto out;
	}
	if (o.pool && !pool_name_ok(o.pool)) { /* before anything is sent: a sweep is refused whole */
		fprintf(c->err, "rungctl submit: --pool \"%s\": a pool name is %s\n", o.pool, POOL_NAME_RULE);
		goto out;
	}
	if (cmd_submit_start(at, in, util_wall_ms(), &o, at_buf, sizeof at_buf, &past, &err) < 0) {
		fprintf(c->err, "rungctl submit: %s\nusage: rungctl %s\n", err, cli_cmd_named("submit")->usage);
		goto out;
	}
	if (start_by || start_within) { /* the start deadline, read as --at and --in are */
		struct cmd_submit_opts d = { .name = NULL };
		bool gone;
		if (cmd_submit_start(start_by, start_within, util_wall_ms(), &d, by_buf, sizeof by_buf, &gone, &err) < 0 || gone) {
			/* cmd_submit_start names --at and --in: said here as the deadline's options */
			const char *opt = !err ? "--start-by" : !strncmp(err, "--in ", 5) ? "--start-within" : "--start-by";
			const char *why = gone ? "has passed: the job could never start by then"
				: strstr(err, "not both") ? "and --start-within: give one, not both"
				: !strncmp(err, "--at ", 5) || !strncmp(err, "--in ", 5) ? err + 5 : err;
			fprintf(c->err, "rungctl submit: %s %s\nusage: rungctl %s\n", opt, why, cli_cmd_named("submit")->usage);
			goto out;
		}
		o.start_by = d.run_after;
		o.start_within_s = d.start_in_s;
	}
	if (after && !(after_ids = cmd_after_ids(after, &err))) {
		fprintf(c->err, "rungctl submit: --after %s\n", err);
		goto out;
	}
	o.after = after_ids;
	if (o.after_when && (!after_when_ok(o.after_when) || !after)) {
		fprintf(c->err, "rungctl submit: --after-when %s: %s\n", o.after_when,
			!after_when_ok(o.after_when) ? "give " AFTER_WHEN_RULE : "it needs --after JOB,JOB");
		goto out;
	}
	if (then_when && (!then || !after_when_ok(then_when))) {
		fprintf(c->err, "rungctl submit: --then-when %s: %s\n", then_when,
			!then ? "it needs --then FILE" : "give " AFTER_WHEN_RULE);
		goto out;
	}
	if (then) { /* read before anything is sent: a bad file stops the whole submit */
		then_config = yamljson_load_file(then, &err);
		if (!then_config || !json_is_object(then_config)) {
			fprintf(c->err, "rungctl submit: --then %s: %s\n", then,
				err ? err : "expected an AI Toolkit config (a mapping with job, config, meta)");
			goto out;
		}
	}
	if (past)
		fprintf(c->err, "rungctl submit: warning: --at %s has passed: the job starts now\n", at);
	for (n_files = 0; n_files < ARRAY_LEN(ops) && ops[n_files]; n_files++)
		;
	if (n_files > 1 && o.name) {
		fprintf(c->err, "rungctl submit: --name with %zu files: each job takes its own config.name\n", n_files);
		goto out;
	}
	if (!(sw = cmd_sweep_read(c, "submit", sets, n_sets, sweeps, n_sweeps, links, n_links)))
		goto out;
	if (sweep_has_axis(sw)) {
		/* the label that ties the sweep's jobs together: the caller's, else one made here */
		if (!parsed)
			parsed = json_object();
		if (!json_object_get(parsed, "sweep")) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			label = sweep_label(idem, (long long)ts.tv_sec, (unsigned)(ts.tv_nsec ^ (getpid() * 2654435761u)));
			json_object_set_new(parsed, "sweep", json_string(label));
		} else {
			label = xstrdup(json_string_value(json_object_get(parsed, "sweep")));
		}
	}
	o.labels = parsed;
	bodies = json_array();
	for (i = 0; i < n_files; i++) { /* each file's jobs (its sweep's), in the order given: one batch */
		json_t *mine;
		config = yamljson_load_file(ops[i], &err);
		if (!config) {
			fprintf(c->err, "rungctl submit: %s\n", err);
			goto out;
		}
		if (!json_is_object(config)) {
			fprintf(c->err, "rungctl submit: %s: expected an AI Toolkit config (a mapping with job, config, meta)\n",
				ops[i]);
			goto out;
		}
		if (!(mine = submit_bodies(c, n_files > 1 ? ops[i] : NULL, config, sw, &o)))
			goto out;
		json_array_extend(bodies, mine);
		json_decref(mine);
		json_decref(config);
		config = NULL;
	}
	n = json_array_size(bodies);
	if (n > SUBMIT_BATCH_MAX) {
		fprintf(c->err, "rungctl submit: %zu jobs: one submit sends at most %d (one batch)\n", n, SUBMIT_BATCH_MAX);
		goto out;
	}
	if (then && n > AFTER_MAX) {
		fprintf(c->err, "rungctl submit: --then: a job runs after at most %d jobs, and this submit makes %zu\n", AFTER_MAX,
			n);
		goto out;
	}
	if (dry_run) {
		/* what would be submitted, nothing sent */
		if (c->json) {
			if (n == 1 && !label && !then) {
				cli_print_json(c, json_array_get(bodies, 0));
			} else if (!then) {
				cli_print_json(c, bodies);
			} else { /* the shape a submit prints: the jobs, and the one after them */
				struct cmd_submit_opts to = { .labels = o.labels, .pool = o.pool,
							      .after_when = then_when ? then_when : "ended" };
				json_t *tb = cmd_submit_body(then_config, &to), *items = json_array(), *doc;
				for (i = 0; i < n; i++)
					json_array_append_new(items, json_integer((json_int_t)i));
				json_object_set_new(tb, "after_items", items);
				doc = json_pack("{s:s*, s:O, s:o}", "sweep", label, "jobs", bodies, "then", tb);
				cli_print_json(c, doc);
				json_decref(doc);
			}
		} else {
			for (i = 0; i < n; i++) {
				const json_t *b = json_array_get(bodies, i);
				char *what = sweep_describe(sw, i);
				const char *nm = json_string_value(json_object_get(b, "name"));
				if (!nm)
					nm = jpath_str(b, "config.config.name", "(no name)");
				fprintf(c->out, "%s%s%s%s%s\n", nm, o.pool ? "\tpool=" : "", o.pool ? o.pool : "",
					*what ? "\t" : "", what);
				free(what);
			}
		}
		if (then && !c->json)
			fprintf(c->out, "then %s\tafter the %zu job%s above once %s %s\n", then, n, n == 1 ? "" : "s",
				n == 1 ? "it" : "they", then_when && !strcmp(then_when, "succeeded") ? "succeeded"
							: then_when && !strcmp(then_when, "failed") ? "failed or were cancelled"
												     : "ended");
		if (label)
			fprintf(c->err, "rungctl submit: dry run: %zu job%s with the label sweep=%s; nothing submitted\n", n,
				n == 1 ? "" : "s", label);
		rc = CLI_OK;
		goto out;
	}
	jobs = json_array();
	warned = json_object();
	if (n > 1 || then) { /* a sweep, or jobs and the one after them: one batch, all or none */
		rc = submit_batch(c, bodies, then ? then_config : NULL, then_when ? then_when : "ended", &o, idem, label,
				  jobs, &then_job, &warned, &old_server, &unknown);
		if (!old_server) {
			batched = true;
			i = rc == CLI_OK ? n : 0;
		}
	}
	for (i = batched ? i : 0; !batched && i < n; i++) {
		json_t *job = NULL;
		/* one by one (a rungd that takes no batch): a key each, K-1, K-2, ..., when there are several */
		char *key = idem && (label || n > 1) ? xasprintf("%s-%zu", idem, i + 1) : (idem ? xstrdup(idem) : NULL);
		rc = cli_call(c, "POST", "/v1/jobs", json_array_get(bodies, i), key, &job);
		free(key);
		if (rc != CLI_OK) {
			json_decref(job);
			break;
		}
		if (!c->json) {
			char *id = table_cell(json_object_get(job, "id"));
			fprintf(c->out, "%s\n", id);
			fflush(c->out);
			free(id);
		}
		submit_warnings(c, job, &warned);
		json_array_append_new(jobs, job);
	}
	if (then && rc == CLI_OK && !batched) /* the job that runs after them all: a sweep's comparison, a report */
		rc = submit_then(c, then, then_config, jobs, then_when ? then_when : "ended", &o, idem, &then_job);
	if (label && rc != CLI_OK && batched) {
		if (!unknown) /* refused: none of it stored (with no answer, submit_batch said what may be) */
			fprintf(c->err, "rungctl submit: sweep %s: not submitted\n", label);
	} else if ((label || n > 1) && rc != CLI_OK && i < n && !batched)
		fprintf(c->err, "rungctl submit: %s%s%s%zu of %zu jobs submitted, one by one (this rungd takes no batch of "
				"them); %s\n", label ? "sweep " : "", label ? label : "", label ? ": " : "", i, n,
			idem ? "run the same command again to submit the rest (the Idempotency-Keys make the "
			       "submitted ones repeats)"
			     : "the rest were not submitted (give --idempotency-key to make a submit safe to send again)");
	else if (label)
		fprintf(c->err, "rungctl submit: sweep %s: %zu jobs (rungctl jobs --label sweep=%s)\n", label, n, label);
	if (c->json && (rc == CLI_OK || json_array_size(jobs) > 0)) {
		if (!label && !then_job && n == 1) {
			cli_print_json(c, json_array_get(jobs, 0));
		} else {
			json_t *doc = json_pack("{s:s*, s:O}", "sweep", label, "jobs", jobs);
			if (then_job)
				json_object_set(doc, "then", then_job);
			cli_print_json(c, doc);
			json_decref(doc);
		}
	}
out:
	free(err);
	free(label);
	sweep_free(sw);
	json_decref(warned);
	json_decref(jobs);
	json_decref(bodies);
	json_decref(config);
	json_decref(parsed);
	json_decref(after_ids);
	json_decref(then_config);
	json_decref(then_job);
	return rc;
}

/* Adds a row built from the named keys of obj (each key may be "a|b" meaning a, else b). */
static void add_row_from(struct table *t, const json_t *obj, const char *const *keys, size_t n)
{
	char *cells[16] = { NULL };
	for (size_t i = 0; i < n; i++) {
		char *alts = xstrdup(keys[i]), *save = NULL;
		const json_t *v = NULL;
		for (char *k = strtok_r(alts, "|", &save); k && !v; k = strtok_r(NULL, "|", &save))
			v = json_object_get(obj, k);
		cells[i] = table_cell(v);
		free(alts);
	}
	table_add(t, (const char *const *)cells);
	for (size_t i = 0; i < n; i++)
		free(cells[i]);
}

/* Whether a job of the list names a pool other than the default one. */
static bool any_pool(const json_t *jobs)
{
	size_t i;
	json_t *j;
	json_array_foreach(jobs, i, j) {
		const char *p = json_string_value(json_object_get(j, "pool"));
		if (p && strcmp(p, POOL_DEFAULT))
			return true;
	}
	return false;
}

/* Whether some listed job still waits for other jobs to succeed (migration 033). */
static bool any_waiting(const json_t *jobs)
{
	size_t i;
	json_t *j;

	json_array_foreach(jobs, i, j)
		if (json_array_size(json_object_get(j, "waits_for")) > 0)
			return true;
	return false;
}

#define WAITS_SHOWN 8 /* ids a WAITS FOR cell lists before "+N" */

char *cmd_jobs_table(const json_t *jobs)
{
	static const char *const head[] = { "ID", "STATE", "KIND", "NAME", "PRIORITY", "ATTEMPTS", "UPDATED", "POOL",
		"WAITS FOR" };
	static const char *const keys[] = { "id", "state", "kind", "name", "priority", "attempts", "updated_at", "pool",
		"waits_for" };
	/* PRIORITY, POOL and WAITS FOR only when some listed job is off the default: a plain queue reads as before */
	const bool shown[] = { true, true, true, true, priority_any_other(jobs), true, true, any_pool(jobs), any_waiting(jobs) };
	const char *h[ARRAY_LEN(head)], *k[ARRAY_LEN(head)];
	size_t n = 0, i;
	json_t *j;
	for (i = 0; i < ARRAY_LEN(head); i++)
		if (shown[i]) {
			h[n] = head[i];
			k[n++] = keys[i];
		}
	struct table *t = table_new(n, h);
	json_array_foreach(jobs, i, j) {
		const json_t *w = json_object_get(j, "waits_for");
		if (json_array_size(w) > WAITS_SHOWN) { /* after a whole sweep: the first ids and how many more */
			json_t *row = json_copy((json_t *)j);
			char *cell = xstrdup("["), *next;
			for (size_t x = 0; x < WAITS_SHOWN; x++) {
				next = xasprintf("%s%s%lld", cell, x ? "," : "", (long long)json_integer_value(json_array_get(w, x)));
				free(cell);
				cell = next;
			}
			json_object_set_new(row, "waits_for", json_sprintf("%s,...] +%zu", cell, json_array_size(w) - WAITS_SHOWN));
			add_row_from(t, row, k, n);
			json_decref(row);
			free(cell);
			continue;
		}
		add_row_from(t, j, k, n);
	}
	char *s = table_render(t);
	table_free(t);
	return s;
}

const json_t *cmd_attempt_field(const json_t *attempt, const char *key, const char *facts_key)
{
	const json_t *v = json_object_get(attempt, key);
	if (v && !json_is_null(v))
		return v;
	return json_object_get(json_object_get(attempt, "facts"), facts_key);
}

/* "245/2000", "245", or NULL when the attempt reported no step. Heap string. */
static char *step_text(const json_t *a)
{
	const json_t *s = cmd_attempt_field(a, "step", "last_step");
	const json_t *t = cmd_attempt_field(a, "total_steps", "total_steps");
	if (!json_is_integer(s))
		return NULL;
	if (json_is_integer(t))
		return xasprintf("%lld/%lld", (long long)json_integer_value(s), (long long)json_integer_value(t));
	return xasprintf("%lld", (long long)json_integer_value(s));
}

char *cmd_attempts_table(const json_t *attempts)
{
	static const char *const head[] = { "#", "STATE", "OUTCOME", "CLASS", "RUNG", "PHASE", "STEP", "WORKER",
		"GPU" };
	struct table *t = table_new(ARRAY_LEN(head), head);
	size_t i;
	json_t *a;
	json_array_foreach(attempts, i, a) {
		char *cells[ARRAY_LEN(head)] = {
			table_cell(json_object_get(a, "number")), table_cell(json_object_get(a, "state")),
			table_cell(json_object_get(a, "outcome")), table_cell(json_object_get(a, "class")),
			table_cell(json_object_get(a, "rung")), table_cell(cmd_attempt_field(a, "phase", "phase")),
			step_text(a),
			table_cell(json_object_get(a, "worker_name") ? json_object_get(a, "worker_name")
				: json_object_get(a, "worker_id")),
			table_cell(json_object_get(a, "gpu_uuid") ? json_object_get(a, "gpu_uuid")
				: json_object_get(a, "gpu")),
		};
		table_add(t, (const char *const *)cells);
		for (size_t k = 0; k < ARRAY_LEN(cells); k++)
			free(cells[k]);
	}
	char *s = table_render(t);
	table_free(t);
	return s;
}

static void print_owned(struct cli *c, char *s)
{
	fputs(s, c->out);
	free(s);
}

char *cmd_jobs_path(const char *state, const char *owner, const char *kind, const char *label, const char *pool,
		    long long limit)
{
	const struct {
		const char *key, *value;
	} q[] = { { "state", state }, { "owner", owner }, { "kind", kind }, { "label", label }, { "pool", pool } };
	char *path = xstrdup("/v1/jobs"), *p2;
	char sep = '?';

	for (size_t i = 0; i < ARRAY_LEN(q); i++) {
		if (!q[i].value)
			continue;
		char *e = httpc_escape(q[i].value);
		p2 = xasprintf("%s%c%s=%s", path, sep, q[i].key, e);
		free(e);
		free(path);
		path = p2;
		sep = '&';
	}
	if (limit) {
		p2 = xasprintf("%s%climit=%lld", path, sep, limit);
		free(path);
		path = p2;
	}
	return path;
}

int cmd_jobs(struct cli *c, int argc, char **argv)
{
	const char *state = NULL, *owner = NULL, *kind = NULL, *label = NULL, *pool = NULL;
	long long limit = 0;
	char *ops[1], *path;
	json_t *ans = NULL;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "state", .type = ARGS_STRING, .str = &state },
		{ .name = "owner", .type = ARGS_STRING, .str = &owner },
		{ .name = "kind", .type = ARGS_STRING, .str = &kind },
		{ .name = "label", .type = ARGS_STRING, .str = &label },
		{ .name = "pool", .type = ARGS_STRING, .str = &pool },
		{ .name = "limit", .type = ARGS_INT, .num = &limit, .min = 1, .max = 1000 },
	};
	int rc = cli_args(c, cli_cmd_named("jobs"), opts, ARRAY_LEN(opts), argc, argv, ops, 0, 0);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	/* the values go to the server as they are: it checks them, and names the one it refuses */
	path = cmd_jobs_path(state, owner, kind, label, pool, limit);
	rc = cli_call(c, "GET", path, NULL, NULL, &ans);
	if (rc == CLI_OK) {
		if (c->json)
			cli_print_json(c, ans);
		else
			print_owned(c, cmd_jobs_table(cli_list(ans, "jobs")));
	}
	json_decref(ans);
	free(path);
	return rc;
}

/* GET /v1/jobs/ID[suffix] with the id escaped. */
static int get_job_part(struct cli *c, const char *id, const char *suffix, json_t **ans)
{
	char *e = httpc_escape(id);
	char *path = xasprintf("/v1/jobs/%s%s", e, suffix);
	int rc = cli_call(c, "GET", path, NULL, NULL, ans);
	free(path);
	free(e);
	return rc;
}

static const json_t *first_of(const json_t *o, const char *a, const char *b)
{
	const json_t *v = json_object_get(o, a);
	return v ? v : json_object_get(o, b);
}

static void print_kv(struct cli *c, const char *label, const json_t *v)
{
	char *s = table_cell(v);
	fprintf(c->out, "%-17s %s\n", label, s);
	free(s);
}

/* The number of the attempt that started below the job's target (recovery_state.started_lower), 0
 * when none did. */
static long long started_lower_number(const json_t *job)
{
	const json_t *sl = json_object_get(json_object_get(job, "recovery_state"), "started_lower");
	long long n = json_integer_value(json_object_get(sl, "attempt"));

	return json_is_object(sl) ? (n > 0 ? n : 1) : 0;
}

/* show's story: the verdict of a finished job (setting by setting for a success), or a queued job's
 * place in the queue (and why no GPU takes it), then each attempt with the config change it led
 * to, against its own config. */
static void show_story(struct cli *c, const json_t *job, const json_t *attempts, const char *id)
{
	const char *st = json_string_value(json_object_get(job, "state"));
	size_t i;
	json_t *a;

	if (st && (!strcmp(st, "succeeded") || !strcmp(st, "failed") || !strcmp(st, "cancelled"))) {
		char *v = story_verdict(job, attempts, id);
		fprintf(c->out, "%-17s %s", "result", v);
		free(v);
	} else {
		char *waiting = jobtext_placement(job); /* a queued job: its turn, or why no GPU takes it */
		char *sched = jobtext_scheduled(job);   /* a scheduled one: when it starts */
		char *stop = jobtext_stopping(job);     /* a running one being stopped: why */
		char *awaited = jobtext_awaited(job);   /* the jobs that run after it (migration 033) */
		char *deadline = jobtext_deadline(job, util_wall_ms()); /* by when it must start (039) */
		print_kv(c, "result", json_object_get(job, "result"));
		if (sched)
			fprintf(c->out, "%-17s %s\n", "start", sched);
		if (deadline)
			fprintf(c->out, "%-17s %s\n", "deadline", deadline);
		free(deadline);
		if (waiting)
			fprintf(c->out, "%-17s %s\n", "queue", waiting);
		if (stop)
			fprintf(c->out, "%-17s %s\n", "stop", stop);
		if (awaited)
			fprintf(c->out, "%-17s %s\n", "awaited", awaited);
		free(sched);
		free(waiting);
		free(stop);
		free(awaited);
	}
	json_array_foreach(attempts, i, a) {
		const char *as = json_string_value(json_object_get(a, "state"));
		bool known = true;
		if (json_integer_value(json_object_get(a, "number")) == started_lower_number(job)) {
			char *sl = story_start_text(job, attempts);
			if (sl)
				fputs(sl, c->out);
			free(sl);
		}
		if (as && !strcmp(as, "running")) {
			char *wk = table_cell(first_of(a, "worker_name", "worker_id"));
			char *gpu = table_cell(first_of(a, "gpu_uuid", "gpu"));
			fprintf(c->out, "attempt %lld running on worker %s gpu %s\n",
				(long long)json_integer_value(json_object_get(a, "number")), wk, gpu);
			free(wk);
			free(gpu);
			continue;
		}
		const json_t *next = story_next_config(job, attempts, i, &known);
		char *txt = story_attempt_text(a, next);
		fputs(txt, c->out);
		free(txt);
	}
}

int cmd_show(struct cli *c, int argc, char **argv)
{
	char *ops[1];
	json_t *job = NULL, *att = NULL;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("show"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	rc = get_job_part(c, ops[0], "", &job);
	if (rc != CLI_OK)
		return rc;
	if (c->json) {
		cli_print_json(c, job);
		goto out;
	}
	rc = get_job_part(c, ops[0], "/attempts", &att);
	if (rc != CLI_OK)
		goto out;
	static const char *const keys[] = { "id", "name", "state", "kind", "priority", "owner", "pool", "attempts",
		"cancel_requested", "created_at", "updated_at", "finished_at", "next_action" };
	for (size_t i = 0; i < ARRAY_LEN(keys); i++)
		print_kv(c, keys[i], json_object_get(job, keys[i]));
	if (json_is_string(json_object_get(job, "run_after"))) /* scheduled, or was (migration 025) */
		print_kv(c, "run_after", json_object_get(job, "run_after"));
	if (json_array_size(json_object_get(job, "after")) > 0) { /* the jobs it runs after (migration 033) */
		print_kv(c, "after", json_object_get(job, "after"));
		print_kv(c, "after_when", json_object_get(job, "after_when")); /* which endings release it (036) */
	}
	if (json_object_size(json_object_get(job, "labels")) > 0) {
		char *l = labels_format(json_object_get(job, "labels"));
		fprintf(c->out, "%-17s %s\n", "labels", l);
		free(l);
	}
	show_story(c, job, cli_list(att, "attempts"), ops[0]);
	{
		char *o = jobtext_output(job);
		if (o)
			fprintf(c->out, "%-17s %s\n", "output", o);
		free(o);
	}
	json_t *d = jsondiff_paths(json_object_get(job, "target_config"), json_object_get(job, "current_config"));
	if (json_array_size(d) == 0) {
		fprintf(c->out, "config            current = target (no changes)\n");
	} else {
		fprintf(c->out, "config changes    (target -> current)\n");
		char *txt = jsondiff_format(d);
		for (char *save = NULL, *l = strtok_r(txt, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
			fprintf(c->out, "  %s\n", l);
		free(txt);
	}
	json_decref(d);
	fprintf(c->out, "recovery_state    ");
	cli_print_json(c, json_object_get(job, "recovery_state"));
	{
		json_t *mem = NULL;
		if (get_job_part(c, ops[0], "/memory", &mem) == CLI_OK) { /* the memory model's estimate */
			char *lines = cmd_memory_lines(mem);
			fputs(lines, c->out);
			free(lines);
		}
		json_decref(mem);
	}
out:
	json_decref(att);
	json_decref(job);
	return rc;
}

int cmd_attempts(struct cli *c, int argc, char **argv)
{
	char *ops[1];
	json_t *ans = NULL;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("attempts"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	rc = get_job_part(c, ops[0], "/attempts", &ans);
	if (rc == CLI_OK) {
		if (c->json)
			cli_print_json(c, ans);
		else
			print_owned(c, cmd_attempts_table(cli_list(ans, "attempts")));
	}
	json_decref(ans);
	return rc;
}

int cmd_events(struct cli *c, int argc, char **argv)
{
	char *ops[1];
	json_t *ans = NULL, *e;
	size_t i;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("events"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	rc = get_job_part(c, ops[0], "/events", &ans);
	if (rc != CLI_OK)
		goto out;
	if (c->json) {
		cli_print_json(c, ans);
		goto out;
	}
	json_array_foreach(cli_list(ans, "events"), i, e) {
		char *at = table_cell(first_of(e, "at", "created_at"));
		char *kind = table_cell(first_of(e, "kind", "type"));
		const json_t *att = json_object_get(e, "attempt_id");
		const json_t *from = json_object_get(e, "from_state"), *to = json_object_get(e, "to_state");
		const json_t *why = first_of(e, "reason", "message");
		const json_t *data = json_object_get(e, "data");
		fprintf(c->out, "%s  %s", at, kind);
		if (att && !json_is_null(att))
			fprintf(c->out, "  attempt=%lld", (long long)json_integer_value(att));
		if (json_is_string(from) || json_is_string(to))
			fprintf(c->out, "  %s -> %s", json_is_string(from) ? json_string_value(from) : "-",
				json_is_string(to) ? json_string_value(to) : "-");
		if (json_is_string(why))
			fprintf(c->out, "  %s", json_string_value(why));
		if (data && !json_is_null(data) && !(json_is_object(data) && json_object_size(data) == 0)) {
			char *d = table_cell(data);
			fprintf(c->out, "  %s", d);
			free(d);
		}
		fputc('\n', c->out);
		free(at);
		free(kind);
	}
out:
	json_decref(ans);
	return rc;
}

/* cancel JOB, or the jobs matching --label/--owner/--kind/--pool (POST /v1/jobs/cancel). */
static int cancel_matching(struct cli *c, const char *state, const char *owner, const char *label, const char *kind,
			   const char *pool, long long after, long long limit, int dry)
{
	json_t *body = json_pack("{s:s?, s:s?, s:s?, s:s?, s:s?, s:b}", "state", state, "owner", owner, "label", label,
				 "kind", kind, "pool", pool, "dry_run", dry), *ans = NULL, *v;
	size_t i;
	int rc;

	if (limit > 0)
		json_object_set_new(body, "limit", json_integer(limit));
	if (after > 0)
		json_object_set_new(body, "after", json_integer(after));
	rc = cli_call(c, "POST", "/v1/jobs/cancel", body, NULL, &ans);
	if (rc == CLI_OK && c->json) {
		cli_print_json(c, ans);
	} else if (rc == CLI_OK) {
		const json_t *ids = json_object_get(ans, "ids");
		fprintf(c->out, "%s %zu job(s)%s", dry ? "would cancel" : "cancelled or told to stop:", json_array_size(ids),
			json_array_size(ids) ? ":" : "");
		json_array_foreach(ids, i, v)
			fprintf(c->out, " %lld", (long long)json_integer_value(v));
		fputc('\n', c->out);
		if (json_is_true(json_object_get(ans, "more")))
			fprintf(c->out, "more match: run it again (or raise --limit)\n");
	}
	json_decref(ans);
	json_decref(body);
	return rc;
}

int cmd_cancel(struct cli *c, int argc, char **argv)
{
	char *ops[1] = { NULL };
	const char *state = NULL, *owner = NULL, *label = NULL, *kind = NULL, *pool = NULL;
	long long limit = 0, after = 0;
	int dry = 0;
	json_t *job = NULL;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "state", .type = ARGS_STRING, .str = &state },
		{ .name = "after", .type = ARGS_INT, .num = &after, .min = 1, .max = AFTER_ID_MAX },
		{ .name = "owner", .type = ARGS_STRING, .str = &owner },
		{ .name = "label", .type = ARGS_STRING, .str = &label },
		{ .name = "kind", .type = ARGS_STRING, .str = &kind },
		{ .name = "pool", .type = ARGS_STRING, .str = &pool },
		{ .name = "limit", .type = ARGS_INT, .num = &limit, .min = 1, .max = 1000 },
		{ .name = "dry-run", .type = ARGS_FLAG, .flag = &dry },
	};
	int rc = cli_args(c, cli_cmd_named("cancel"), opts, ARRAY_LEN(opts), argc, argv, ops, 0, 1);
	bool filters = owner || label || kind || pool || after;
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (!ops[0] == !filters || (ops[0] && (state || limit || dry))) {
		fprintf(c->err, "rungctl: cancel takes a JOB, or --label/--owner/--kind/--pool/--after (with --state, --limit, "
				"--dry-run)\n"
				"usage: rungctl %s\n", cli_cmd_named("cancel")->usage);
		return CLI_USAGE;
	}
	if (pool && !pool_name_ok(pool)) {
		fprintf(c->err, "rungctl: --pool must be a pool name: %s\n", POOL_NAME_RULE);
		return CLI_USAGE;
	}
	if (filters)
		return cancel_matching(c, state, owner, label, kind, pool, after, limit, dry);
	char *e = httpc_escape(ops[0]);
	char *path = xasprintf("/v1/jobs/%s/cancel", e);
	rc = cli_call(c, "POST", path, NULL, NULL, &job);
	if (rc == CLI_OK) {
		if (c->json) {
			cli_print_json(c, job);
		} else {
			const char *st = json_string_value(json_object_get(job, "state"));
			int pending = json_is_true(json_object_get(job, "cancel_requested"));
			fprintf(c->out, "job %s: %s\n", ops[0], st && !strcmp(st, "cancelled") ? "cancelled"
				: pending ? "cancel requested (the worker stops it at its next heartbeat)" : st ? st : "?");
		}
	}
	json_decref(job);
	free(path);
	free(e);
	return rc;
}

/* retry: POST /v1/jobs/ID/retry {"from"?, "note"?}. */
int cmd_retry(struct cli *c, int argc, char **argv)
{
	const char *from = NULL, *note = NULL;
	char *ops[1], *e = NULL, *path = NULL;
	json_t *job = NULL, *body = NULL;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "from", .type = ARGS_STRING, .str = &from },
		{ .name = "note", .type = ARGS_STRING, .str = &note },
	};
	int rc = cli_args(c, cli_cmd_named("retry"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (from && strcmp(from, "current") && strcmp(from, "target")) {
		fprintf(c->err, "rungctl retry: --from must be current or target\nusage: rungctl %s\n",
			cli_cmd_named("retry")->usage);
		return CLI_USAGE;
	}
	body = json_pack("{s:s?, s:s?}", "from", from, "note", note);
	if (!body) {
		fprintf(c->err, "rungctl retry: --note must be UTF-8 text\n");
		return CLI_USAGE;
	}
	e = httpc_escape(ops[0]);
	path = xasprintf("/v1/jobs/%s/retry", e);
	rc = cli_call(c, "POST", path, body, NULL, &job);
	if (rc == CLI_OK) {
		if (c->json) {
			cli_print_json(c, job);
		} else {
			const json_t *story = json_object_get(json_object_get(job, "recovery_state"), "retried");
			fprintf(c->out, "job %s: queued again from the %s config; budgets count from attempt %lld\n", ops[0],
				jpath_str(story, "from", "current"), jpath_int(story, "budget_from", 0) + 1);
		}
	}
	json_decref(body);
	json_decref(job);
	free(path);
	free(e);
	return rc;
}

/* priority: POST /v1/jobs/ID/priority {"priority"}. */
int cmd_priority(struct cli *c, int argc, char **argv)
{
	char *ops[2], *e = NULL, *path = NULL, *end = NULL;
	json_t *job = NULL, *body = NULL;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	long long prio;
	int rc = cli_args(c, cli_cmd_named("priority"), opts, ARRAY_LEN(opts), argc, argv, ops, 2, 2);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	prio = strtoll(ops[1], &end, 10);
	if (!*ops[1] || *end) {
		fprintf(c->err, "rungctl priority: PRIORITY must be an integer (lower runs first)\nusage: rungctl %s\n",
			cli_cmd_named("priority")->usage);
		return CLI_USAGE;
	}
	body = json_pack("{s:I}", "priority", (json_int_t)prio);
	e = httpc_escape(ops[0]);
	path = xasprintf("/v1/jobs/%s/priority", e);
	rc = cli_call(c, "POST", path, body, NULL, &job);
	if (rc == CLI_OK) {
		if (c->json)
			cli_print_json(c, job);
		else
			fprintf(c->out, "job %s: priority %lld (%s)\n", ops[0], (long long)jpath_int(job, "priority", prio),
				jpath_str(job, "state", "?"));
	}
	json_decref(body);
	json_decref(job);
	free(path);
	free(e);
	return rc;
}

/* start: POST /v1/jobs/ID/start, a scheduled job now. */
int cmd_start(struct cli *c, int argc, char **argv)
{
	char *ops[1], *e = NULL, *path = NULL;
	json_t *job = NULL;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("start"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	e = httpc_escape(ops[0]);
	path = xasprintf("/v1/jobs/%s/start", e);
	rc = cli_call(c, "POST", path, NULL, NULL, &job);
	if (rc == CLI_OK) {
		if (c->json)
			cli_print_json(c, job);
		else
			fprintf(c->out, "job %s: started now, before its start time (%s: it waits only for a GPU)\n", ops[0],
				jpath_str(job, "state", "?"));
	}
	json_decref(job);
	free(path);
	free(e);
	return rc;
}

/* after JOB IDS [--when W] | after JOB --none: POST /v1/jobs/ID/after, the jobs a job not started yet
 * runs after, set again (migration 033), and which of their endings release it (036; without --when the
 * job's own is kept). */
int cmd_after(struct cli *c, int argc, char **argv)
{
	char *ops[2] = { NULL, NULL }, *e = NULL, *path = NULL, *why = NULL;
	const char *when = NULL;
	int none = 0;
	json_t *job = NULL, *body = NULL, *ids = NULL;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c), { .name = "none", .type = ARGS_FLAG, .flag = &none },
					 { .name = "when", .type = ARGS_STRING, .str = &when } };
	int rc = cli_args(c, cli_cmd_named("after"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 2);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (!ops[1] == !none) {
		fprintf(c->err, "rungctl after: give the job ids (12,13) or --none, not both\nusage: rungctl %s\n",
			cli_cmd_named("after")->usage);
		return CLI_USAGE;
	}
	if (when && (!after_when_ok(when) || none)) {
		fprintf(c->err, "rungctl after: --when %s: %s\n", when, none ? "it needs job ids, not --none" : "give " AFTER_WHEN_RULE);
		return CLI_USAGE;
	}
	if (ops[1] && !(ids = cmd_after_ids(ops[1], &why))) {
		fprintf(c->err, "rungctl after: %s\n", why);
		free(why);
		return CLI_USAGE;
	}
	body = json_pack("{s:o}", "after", ids ? ids : json_null());
	if (when)
		json_object_set_new(body, "after_when", json_string(when));
	e = httpc_escape(ops[0]);
	path = xasprintf("/v1/jobs/%s/after", e);
	rc = cli_call(c, "POST", path, body, NULL, &job);
	if (rc == CLI_OK) {
		if (c->json) {
			cli_print_json(c, job);
		} else {
			char *sched = jobtext_scheduled(job);
			fprintf(c->out, "job %s: %s\n", ops[0], sched ? sched : jpath_str(job, "state", "?"));
			free(sched);
		}
	}
	json_decref(job);
	json_decref(body);
	free(path);
	free(e);
	return rc;
}

/* pool JOB NAME: POST /v1/jobs/ID/pool, the job moved to another worker pool. */
int cmd_pool(struct cli *c, int argc, char **argv)
{
	char *ops[2], *e = NULL, *path = NULL;
	json_t *job = NULL, *body = NULL;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("pool"), opts, ARRAY_LEN(opts), argc, argv, ops, 2, 2);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (!pool_name_ok(ops[1])) {
		fprintf(c->err, "rungctl pool: \"%s\": a pool name is %s\nusage: rungctl %s\n", ops[1], POOL_NAME_RULE,
			cli_cmd_named("pool")->usage);
		return CLI_USAGE;
	}
	body = json_pack("{s:s}", "pool", ops[1]);
	e = httpc_escape(ops[0]);
	path = xasprintf("/v1/jobs/%s/pool", e);
	rc = cli_call(c, "POST", path, body, NULL, &job);
	if (rc == CLI_OK) {
		if (c->json)
			cli_print_json(c, job);
		else
			fprintf(c->out, "job %s: pool %s (%s)\n", ops[0], jpath_str(job, "pool", ops[1]), jpath_str(job, "state", "?"));
	}
	json_decref(body);
	json_decref(job);
	free(path);
	free(e);
	return rc;
}

/* ---- watch ---- */

struct watch_attempt {
	long long number;
	char *state;            /* last state printed */
	bool told_start;        /* its "started below the target" lines are printed (issue 12) */
	struct progress prog;   /* step reports, for the rate and the ETA */
};

struct watch {
	struct cli *c;
	const char *id;
	int tty;
	int quiet;              /* --json: only the final job is printed */
	int progress_shown;     /* a \r progress line is on screen */
	struct watch_attempt *att;
	size_t natt;
	char *job_state;        /* job state last printed */
	char *pool_wait;        /* jobtext_pool_wait last printed, or NULL */
};

/* Every line watch prints goes out at once: a pipe (tee, a CI log, a systemd unit) is block-buffered. */
static void watch_flush(struct watch *w)
{
	fflush(w->c->out);
}

static void watch_clear(struct watch *w)
{
	if (w->progress_shown)
		fputs("\r\033[K", w->c->out);
	w->progress_shown = 0;
}

static struct watch_attempt *watch_slot(struct watch *w, long long number)
{
	for (size_t i = 0; i < w->natt; i++)
		if (w->att[i].number == number)
			return &w->att[i];
	w->att = xrealloc(w->att, (w->natt + 1) * sizeof(*w->att));
	w->att[w->natt] = (struct watch_attempt){ .number = number };
	progress_reset(&w->att[w->natt].prog);
	return &w->att[w->natt++];
}

static void watch_progress(struct watch *w, const json_t *a, long long number)
{
	struct watch_attempt *s = watch_slot(w, number);
	const json_t *step = cmd_attempt_field(a, "step", "last_step");
	const json_t *total = cmd_attempt_field(a, "total_steps", "total_steps");
	char *phase = table_cell(cmd_attempt_field(a, "phase", "phase"));
	char *st = step_text(a);
	char speed[96];
	int64_t at;

	/* a step report is timed by the heartbeat that brought it (server time), else by when it was seen */
	if (progress_parse_time(json_string_value(json_object_get(a, "last_heartbeat_at")), &at) != 0)
		at = util_wall_ms();
	if (json_is_integer(step))
		progress_note(&s->prog, json_integer_value(step), json_is_integer(total) ? json_integer_value(total) : 0,
			at);
	fprintf(w->c->out, "\r\033[Kattempt %lld: phase %s, step %s%s", number, phase, st ? st : "-",
		progress_suffix(&s->prog, speed, sizeof(speed)));
	watch_flush(w);
	w->progress_shown = 1;
	free(phase);
	free(st);
}

/* Prints what changed since the last poll; returns 1 when the job has ended. An attempt's ending is
 * printed once the config after it is known (the config change is against the attempt's own). */
static int watch_step(struct watch *w, const json_t *job, const json_t *attempts)
{
	size_t i;
	json_t *a;
	const char *js = json_string_value(json_object_get(job, "state"));
	int terminal = js && (!strcmp(js, "succeeded") || !strcmp(js, "failed") || !strcmp(js, "cancelled"));
	if (w->quiet)
		return terminal;
	json_array_foreach(attempts, i, a) {
		long long number = json_integer_value(json_object_get(a, "number"));
		const char *state = json_string_value(json_object_get(a, "state"));
		struct watch_attempt *s = watch_slot(w, number);
		if (!state)
			continue;
		if (!s->told_start && number == started_lower_number(job)) { /* first seen: how it started */
			char *sl = story_start_text(job, attempts);
			if (sl) {
				watch_clear(w);
				fputs(sl, w->c->out);
			}
			free(sl);
			s->told_start = true;
		}
		if (!s->state || strcmp(s->state, state)) {
			if (!strcmp(state, "running")) {
				char *wk = table_cell(first_of(a, "worker_name", "worker_id"));
				char *gpu = table_cell(first_of(a, "gpu_uuid", "gpu"));
				watch_clear(w);
				fprintf(w->c->out, "attempt %lld running on worker %s gpu %s\n", number, wk, gpu);
				free(wk);
				free(gpu);
			} else {
				bool known = true;
				const json_t *next = story_next_config(job, attempts, i, &known);
				if (!known)
					break; /* the job was read before this attempt ended: the next poll tells */
				char *txt = story_attempt_text(a, next);
				watch_clear(w);
				fputs(txt, w->c->out);
				free(txt);
			}
			watch_flush(w);
			free(s->state);
			s->state = xstrdup(state);
		}
		if (!strcmp(state, "running") && w->tty)
			watch_progress(w, a, number);
	}
	if (js && !terminal && (!w->job_state || strcmp(w->job_state, js))) {
		char *sched = jobtext_scheduled(job);
		const char *pool = json_string_value(json_object_get(job, "pool"));
		bool named = pool && strcmp(pool, POOL_DEFAULT);
		watch_clear(w);
		/* "job 7 scheduled: starts at T (in 2h)", "job 7 queued in pool h200" */
		fprintf(w->c->out, "job %s %s%s%s\n", w->id, sched ? sched : js, named ? " in pool " : "", named ? pool : "");
		free(sched);
		watch_flush(w);
		free(w->job_state);
		w->job_state = xstrdup(js);
	}
	if (!terminal) { /* why a queued job waits when only other pools have its GPUs: once, again when it changes */
		char *pw = jobtext_pool_wait(job);
		if (pw && (!w->pool_wait || strcmp(pw, w->pool_wait))) {
			watch_clear(w);
			fprintf(w->c->out, "job %s waiting for a GPU: %s\n", w->id, pw);
			watch_flush(w);
		}
		free(w->pool_wait);
		w->pool_wait = pw;
	}
	return terminal;
}

static void watch_verdict(struct watch *w, const json_t *job, const json_t *attempts)
{
	char *v = story_verdict(job, attempts, w->id);
	watch_clear(w);
	fputs(v, w->c->out);
	watch_flush(w);
	free(v);
}

int cmd_watch(struct cli *c, int argc, char **argv)
{
	char *ops[1];
	long long interval = 500;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "interval-ms", .type = ARGS_INT, .num = &interval, .min = 50, .max = 60000 },
	};
	int rc = cli_args(c, cli_cmd_named("watch"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	struct watch w = { .c = c, .id = ops[0], .tty = isatty(fileno(c->out)), .quiet = c->json };
	int64_t last_ok = util_mono_ms();
	for (;;) {
		json_t *job = NULL, *att = NULL;
		rc = get_job_part(c, w.id, "", &job);
		if (rc == CLI_OK)
			rc = get_job_part(c, w.id, "/attempts", &att);
		if (rc == CLI_OK) {
			last_ok = util_mono_ms();
			int done = watch_step(&w, job, cli_list(att, "attempts"));
			if (done) {
				if (c->json)
					cli_print_json(c, job);
				else
					watch_verdict(&w, job, cli_list(att, "attempts"));
				const char *st = json_string_value(json_object_get(job, "state"));
				rc = st && !strcmp(st, "succeeded") ? CLI_OK : CLI_REFUSED;
			}
			json_decref(job);
			json_decref(att);
			if (done)
				break;
		} else {
			json_decref(job);
			json_decref(att);
			if (!cli_transient(c, rc) || util_mono_ms() - last_ok > WATCH_UNREACHABLE_MS)
				break;
		}
		struct timespec ts = { interval / 1000, (interval % 1000) * 1000000L };
		nanosleep(&ts, NULL); /* the polling cadence, not a synchronisation */
	}
	watch_clear(&w);
	watch_flush(&w);
	for (size_t i = 0; i < w.natt; i++)
		free(w.att[i].state);
	free(w.att);
	free(w.job_state);
	free(w.pool_wait);
	return rc;
}

#define WAIT_IDS_MAX 64

/* Whether a job's state is an ending. */
static bool state_ended(const char *state)
{
	return state && (!strcmp(state, "succeeded") || !strcmp(state, "failed") || !strcmp(state, "cancelled"));
}

/* The jobs wait follows, as the server has them now: those named (ids; ids[0] NULL: none), or every
 * job that carries the labels (every page of GET /v1/jobs?label=). Returns cli_call's code, *jobs a
 * new array of JOBs. */
static int wait_read(struct cli *c, char *const *ids, const char *label, json_t **jobs)
{
	int rc = CLI_OK;

	*jobs = json_array();
	if (!label) {
		for (size_t i = 0; i < WAIT_IDS_MAX && ids[i] && rc == CLI_OK; i++) {
			json_t *job = NULL;
			rc = get_job_part(c, ids[i], "", &job);
			if (rc == CLI_OK)
				json_array_append_new(*jobs, job);
		}
		return rc;
	}
	char *cursor = NULL;
	do {
		char *base = cmd_jobs_path(NULL, NULL, NULL, label, NULL, 500), *path, *e;
		json_t *ans = NULL, *v;
		size_t i;
		e = cursor ? httpc_escape(cursor) : NULL;
		path = e ? xasprintf("%s&cursor=%s", base, e) : xstrdup(base);
		free(e);
		free(base);
		free(cursor);
		cursor = NULL;
		rc = cli_call(c, "GET", path, NULL, NULL, &ans);
		free(path);
		if (rc == CLI_OK) {
			json_array_foreach(cli_list(ans, "jobs"), i, v)
				json_array_append(*jobs, v);
			if (json_is_string(json_object_get(ans, "next_cursor")))
				cursor = xstrdup(json_string_value(json_object_get(ans, "next_cursor")));
		}
		json_decref(ans);
	} while (rc == CLI_OK && cursor);
	free(cursor);
	return rc;
}

/* A scheduled job that waits for jobs which have all ended without releasing it (one failed or was
 * cancelled and it runs after their success: it waits for a retry, a person's move): "job 41 failed"
 * (heap), read from GET /v1/jobs/ID's waiting_for; NULL when it is not held (or cannot be read). */
static char *wait_held(struct cli *c, const json_t *job)
{
	json_t *full = NULL, *v;
	char *id, *why = NULL;
	size_t i;
	bool all_ended = true;

	if (strcmp(jpath_str(job, "state", ""), "scheduled") || json_array_size(json_object_get(job, "waits_for")) == 0)
		return NULL;
	id = table_cell(json_object_get(job, "id"));
	if (get_job_part(c, id, "", &full) == CLI_OK && json_array_size(json_object_get(full, "waiting_for")) > 0) {
		json_array_foreach(json_object_get(full, "waiting_for"), i, v) {
			const char *st = jpath_str(v, "state", "");
			all_ended &= state_ended(st);
			if (!why && (!strcmp(st, "failed") || !strcmp(st, "cancelled")))
				why = xasprintf("job %lld %s", (long long)json_integer_value(json_object_get(v, "id")),
						!strcmp(st, "failed") ? "failed" : "was cancelled");
		}
		if (!all_ended) {
			free(why);
			why = NULL;
		} else if (!why) {
			why = xstrdup("the jobs it runs after ended without releasing it");
		}
	}
	json_decref(full);
	free(id);
	return why;
}

int cmd_wait(struct cli *c, int argc, char **argv)
{
	char *ops[WAIT_IDS_MAX] = { NULL };
	const char *label = NULL;
	long long interval = 2000;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "label", .type = ARGS_STRING, .str = &label },
		{ .name = "interval-ms", .type = ARGS_INT, .num = &interval, .min = 50, .max = 600000 },
	};
	json_t *said = json_object(), *jobs = NULL, *v;
	int64_t last_ok = util_mono_ms();
	size_t i, n_ok = 0, n_ended = 0;
	char *failed = NULL, *cancelled = NULL, *held = NULL;
	int rc = cli_args(c, cli_cmd_named("wait"), opts, ARRAY_LEN(opts), argc, argv, ops, 0, ARRAY_LEN(ops));

	if (rc) {
		rc = rc < 0 ? CLI_OK : rc;
		goto out;
	}
	if (!ops[0] == !label) {
		fprintf(c->err, "rungctl wait: name the jobs (their ids) or --label K=V, not both\nusage: rungctl %s\n",
			cli_cmd_named("wait")->usage);
		rc = CLI_USAGE;
		goto out;
	}
	for (;;) {
		size_t active = 0;
		json_decref(jobs);
		rc = wait_read(c, ops, label, &jobs);
		if (rc != CLI_OK) {
			if (!cli_transient(c, rc) || util_mono_ms() - last_ok > WATCH_UNREACHABLE_MS)
				goto out;
		} else {
			last_ok = util_mono_ms();
			if (json_array_size(jobs) == 0) {
				fprintf(c->err, "rungctl wait: no job carries the labels %s\n", label);
				rc = CLI_NOTFOUND;
				goto out;
			}
			json_array_foreach(jobs, i, v) {
				const char *st = jpath_str(v, "state", "");
				char *id = table_cell(json_object_get(v, "id")), *hold = NULL, *line = NULL;
				if (state_ended(st)) {
					const char *why = json_string_value(json_object_get(json_object_get(v, "result"), "reason"));
					line = xasprintf("job %s %s\t%s%s%s", id, st, jpath_str(v, "name", ""),
							 strcmp(st, "succeeded") && why ? ": " : "", strcmp(st, "succeeded") && why ? why : "");
				} else if ((hold = wait_held(c, v))) { /* nothing more happens to it without a person */
					line = xasprintf("job %s held\t%s: %s: it starts only once that is retried and succeeds, or when "
							 "it is started now", id, jpath_str(v, "name", ""), hold);
				} else {
					active++;
				}
				/* each ending said once, and again when it changes (a retried job that ended anew) */
				if (line && strcmp(json_string_value(json_object_get(said, id)) ?: "", line)) {
					json_object_set_new(said, id, json_string(line));
					if (!c->json) {
						fprintf(c->out, "%s\n", line);
						fflush(c->out);
					}
				}
				free(line);
				free(hold);
				free(id);
			}
			if (active == 0)
				break;
		}
		struct timespec ts = { interval / 1000, (interval % 1000) * 1000000L };
		nanosleep(&ts, NULL); /* the polling cadence, not a synchronisation */
	}
	/* the summary and the exit code from the last reading */
	json_array_foreach(jobs, i, v) {
		const char *st = jpath_str(v, "state", "");
		char *id = table_cell(json_object_get(v, "id"));
		char **list = !strcmp(st, "failed") ? &failed : !strcmp(st, "cancelled") ? &cancelled : state_ended(st) ? NULL : &held;
		n_ended += state_ended(st);
		n_ok += !strcmp(st, "succeeded");
		if (list) {
			char *next = xasprintf("%s%s%s", *list ? *list : "", *list ? ", " : "", id);
			free(*list);
			*list = next;
		}
		free(id);
	}
	if (c->json)
		cli_print_json(c, jobs);
	fprintf(c->json ? c->err : c->out, "%zu job%s ended: %zu succeeded%s%s%s%s%s%s\n", n_ended, n_ended == 1 ? "" : "s",
		n_ok, failed ? "; failed: " : "", failed ? failed : "", cancelled ? "; cancelled: " : "",
		cancelled ? cancelled : "", held ? "; held, waiting for a retry: " : "", held ? held : "");
	rc = n_ok == json_array_size(jobs) ? CLI_OK : CLI_REFUSED;
out:
	json_decref(jobs);
	json_decref(said);
	free(failed);
	free(cancelled);
	free(held);
	return rc;
}
