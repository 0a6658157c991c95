/* Unit tests for rungctl's pure parts: option parsing (cli/args), command lookup and exit codes
 * (cli/cli), table rendering (cli/table, the jobs and attempts tables), the config diff
 * (cli/jsondiff), watch's rate (cli/progress), the story of a job (cli/story), the submit body
 * (cli/cmd_jobs), the memory model's table and show lines (cli/cmd_profiles), and token create's
 * --expires DURATION and token list's EXPIRES cell (cli/cmd_token, common/expiry), and submit's
 * --at/--in with the sentence about a scheduled job (common/when, recovery/jobtext). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "after.h"
#include "../../common/jpath.h"
#include "../../cli/args.h"
#include "../../cli/cli.h"
#include "../../cli/cmd_classify.h"
#include "../../cli/cmd_jobs.h"
#include "../../cli/cmd_profiles.h"
#include "../../cli/cmd_usage.h"
#include "../../cli/cmd_token.h"
#include "expiry.h"
#include "../../cli/jsondiff.h"
#include "../../cli/progress.h"
#include "../../cli/story.h"
#include "../../cli/sweep.h"
#include "jobtext.h"
#include "../../cli/table.h"
#include "labels.h"
#include "tap.h"
#include "util.h"
#include "when.h"

static void test_args(void)
{
	const char *name = NULL, *url = NULL;
	long long prio = 0;
	int flag = 0, seen = 0;
	const struct args_opt opts[] = {
		{ .name = "name", .type = ARGS_STRING, .str = &name },
		{ .name = "url", .type = ARGS_STRING, .str = &url },
		{ .name = "priority", .type = ARGS_INT, .num = &prio, .min = -5, .max = 500, .seen = &seen },
		{ .name = "no-scale-up", .type = ARGS_FLAG, .flag = &flag },
		{ .name = "help", .type = ARGS_FLAG, .flag = &flag },
	};
	char *ops[2], *err = NULL;
	size_t n = 0;
	char *v1[] = { "cfg.yaml", "--priority", "7", "--name=my job", "--no-scale-up", "--url", "http://x" };
	int rc = args_parse(opts, 5, 7, v1, ops, 2, &n, &err);
	TAP_INT_EQ(rc, 0, "args: options after the operand parse");
	TAP_INT_EQ(n, 1, "args: one operand");
	TAP_STR_EQ(ops[0], "cfg.yaml", "args: operand kept");
	TAP_INT_EQ(prio, 7, "args: --priority 7");
	TAP_INT_EQ(seen, 1, "args: seen flag set");
	TAP_STR_EQ(name, "my job", "args: --name=VALUE");
	TAP_STR_EQ(url, "http://x", "args: --url VALUE");
	TAP_INT_EQ(flag, 1, "args: flag");

	char *v2[] = { "--priority", "x1" };
	rc = args_parse(opts, 5, 2, v2, ops, 2, &n, &err);
	TAP_OK(rc < 0 && err && strstr(err, "wants an integer"), "args: non-integer refused");
	free(err);
	char *v3[] = { "--priority", "501" };
	rc = args_parse(opts, 5, 2, v3, ops, 2, &n, &err);
	TAP_OK(rc < 0 && err && strstr(err, "between -5 and 500"), "args: out of range refused");
	free(err);
	char *v4[] = { "--bogus" };
	rc = args_parse(opts, 5, 1, v4, ops, 2, &n, &err);
	TAP_OK(rc < 0 && err && strstr(err, "unknown option '--bogus'"), "args: unknown option");
	free(err);
	char *vneg[] = { "7", "-10", "-x" };
	rc = args_parse(opts, 5, 2, vneg, ops, 2, &n, &err);
	TAP_OK(rc == 0 && n == 2 && !strcmp(ops[1], "-10"), "args: a negative number is an operand (rungctl priority 7 -10)");
	rc = args_parse(opts, 5, 3, vneg, ops, 2, &n, &err);
	TAP_OK(rc < 0 && err && strstr(err, "unknown option '-x'"), "args: a dash and a letter is still an option");
	free(err);
	char *v5[] = { "--name" };
	rc = args_parse(opts, 5, 1, v5, ops, 2, &n, &err);
	TAP_OK(rc < 0 && err && strstr(err, "needs a value"), "args: missing value");
	free(err);
	char *v6[] = { "a", "b", "c" };
	rc = args_parse(opts, 5, 3, v6, ops, 2, &n, &err);
	TAP_OK(rc < 0 && err && strstr(err, "unexpected argument 'c'"), "args: too many operands");
	free(err);
	char *v7[] = { "--", "--name" };
	rc = args_parse(opts, 5, 2, v7, ops, 2, &n, &err);
	TAP_OK(rc == 0 && n == 1 && !strcmp(ops[0], "--name"), "args: -- ends options");
	char *v8[] = { "--no-scale-up=1" };
	rc = args_parse(opts, 5, 1, v8, ops, 2, &n, &err);
	TAP_OK(rc < 0 && err && strstr(err, "takes no value"), "args: flag with a value refused");
	free(err);
	flag = 0;
	char *v9[] = { "-h" };
	rc = args_parse(opts, 5, 1, v9, ops, 2, &n, &err);
	TAP_OK(rc == 0 && flag == 1, "args: -h is --help");
	char *v10[] = { "-x" };
	rc = args_parse(opts, 5, 1, v10, ops, 2, &n, &err);
	TAP_OK(rc < 0, "args: short options other than -h refused");
	free(err);
}

static void test_commands(void)
{
	int words = 0;
	char *a1[] = { "gpu", "release", "GPU-1" };
	const struct cli_cmd *k = cli_find(3, a1, &words);
	TAP_OK(k && !strcmp(k->name, "gpu release") && words == 2, "cli: two-word command");
	char *a2[] = { "gpus" };
	k = cli_find(1, a2, &words);
	TAP_OK(k && !strcmp(k->name, "gpus") && words == 1, "cli: gpus is not gpu release");
	char *a3[] = { "gpu" };
	TAP_OK(cli_find(1, a3, &words) == NULL, "cli: 'gpu' alone is unknown");
	TAP_INT_EQ(cli_exit_for_status(201), CLI_OK, "exit: 201 is 0");
	TAP_INT_EQ(cli_exit_for_status(404), CLI_NOTFOUND, "exit: 404 is 4");
	TAP_INT_EQ(cli_exit_for_status(409), CLI_REFUSED, "exit: 409 is 1");
	TAP_INT_EQ(cli_exit_for_status(500), CLI_REFUSED, "exit: 500 is 1");
	json_t *l = json_pack("{s:[i,i]}", "jobs", 1, 2);
	TAP_INT_EQ(json_array_size(cli_list(l, "jobs")), 2, "cli_list finds the named list");
	TAP_OK(cli_list(l, "gpus") == NULL, "cli_list: missing key is NULL");
	json_decref(l);
}

static void test_table(void)
{
	const char *head[] = { "ID", "NAME", "X" };
	struct table *t = table_new(3, head);
	const char *r1[] = { "1", "flux", NULL };
	const char *r2[] = { "123", "ünï", "y" };
	table_add(t, r1);
	table_add(t, r2);
	TAP_INT_EQ(table_rows(t), 2, "table: two rows");
	char *s = table_render(t);
	TAP_STR_EQ(s, "ID   NAME  X\n1    flux  -\n123  ünï   y\n", "table: padded by characters, NULL is -");
	free(s);
	table_free(t);
	table_free(NULL);

	char longcell[100];
	memset(longcell, 'a', 99);
	longcell[99] = '\0';
	const char *h1[] = { "A" };
	const char *r3[] = { longcell };
	t = table_new(1, h1);
	table_add(t, r3);
	s = table_render(t);
	TAP_OK(strlen(s) == 2 + TABLE_MAX_CELL + 1 && strstr(s, "...\n"), "table: long cells cut with ...");
	free(s);
	table_free(t);

	json_t *v = json_pack("{s:i, s:f, s:b, s:n, s:[i]}", "i", 42, "f", 0.5, "b", 1, "n", "a", 1);
	const char *keys[] = { "i", "f", "b", "n", "a", "missing" };
	const char *want[] = { "42", "0.5", "true", "-", "[1]", "-" };
	for (size_t i = 0; i < 6; i++) {
		char *c = table_cell(json_object_get(v, keys[i]));
		TAP_STR_EQ(c, want[i], "table_cell");
		free(c);
	}
	json_decref(v);
}

static void test_job_tables(void)
{
	json_error_t je;
	json_t *jobs = json_loads("[{\"id\": 12, \"state\": \"running\", \"kind\": \"video\", \"name\": \"wan\","
		" \"attempts\": 2, \"updated_at\": \"2025-01-01T00:00:00Z\"}, {\"id\": 9, \"state\": \"queued\"}]",
		0, &je);
	char *s = cmd_jobs_table(jobs);
	TAP_STR_EQ(s, "ID  STATE    KIND   NAME  ATTEMPTS  UPDATED\n"
		"12  running  video  wan   2         2025-01-01T00:00:00Z\n"
		"9   queued   -      -     -         -\n", "jobs table");
	free(s);
	json_decref(jobs);

	/* the list's query: only the filters given, each percent-encoded, limit last */
	s = cmd_jobs_path(NULL, NULL, NULL, NULL, NULL, 0);
	TAP_STR_EQ(s, "/v1/jobs", "jobs path: no filter");
	free(s);
	s = cmd_jobs_path("queued", "team-video", "video", NULL, NULL, 20);
	TAP_STR_EQ(s, "/v1/jobs?state=queued&owner=team-video&kind=video&limit=20", "jobs path: state, owner, kind, limit");
	free(s);
	s = cmd_jobs_path(NULL, "a b&kind=image", NULL, NULL, NULL, 0);
	TAP_STR_EQ(s, "/v1/jobs?owner=a%20b%26kind%3Dimage", "jobs path: an owner is one escaped value");
	free(s);
	s = cmd_jobs_path(NULL, NULL, "image", NULL, NULL, 5);
	TAP_STR_EQ(s, "/v1/jobs?kind=image&limit=5", "jobs path: kind alone");
	free(s);
	s = cmd_jobs_path(NULL, NULL, NULL, "team=vision,project=p", NULL, 0);
	TAP_STR_EQ(s, "/v1/jobs?label=team%3Dvision%2Cproject%3Dp", "jobs path: a label filter, escaped");
	free(s);
	s = cmd_jobs_path("queued", NULL, NULL, NULL, "h200", 10);
	TAP_STR_EQ(s, "/v1/jobs?state=queued&pool=h200&limit=10", "jobs path: --pool as pool=");
	free(s);
	s = cmd_jobs_path(NULL, NULL, NULL, NULL, "a b", 0);
	TAP_STR_EQ(s, "/v1/jobs?pool=a%20b", "jobs path: a pool is sent as given, escaped (the server names it when bad)");
	free(s);
	/* a POOL column only when a listed job is outside the pool "default" */
	jobs = json_loads("[{\"id\": 12, \"state\": \"queued\", \"pool\": \"default\"}, {\"id\": 9, \"state\": \"queued\","
		" \"pool\": \"default\"}]", 0, &je);
	s = cmd_jobs_table(jobs);
	TAP_OK(s && !strstr(s, "POOL") && !strstr(s, "default"), "jobs table: no POOL column when every job is in default");
	free(s);
	json_object_set_new(json_array_get(jobs, 1), "pool", json_string("h200"));
	s = cmd_jobs_table(jobs);
	TAP_STR_EQ(s, "ID  STATE   KIND  NAME  ATTEMPTS  UPDATED  POOL\n"
		"12  queued  -     -     -         -        default\n"
		"9   queued  -     -     -         -        h200\n", "jobs table: a POOL column when a job is in another pool");
	free(s);
	/* a PRIORITY column only when a listed job has another priority than the default (100) */
	json_object_set_new(json_array_get(jobs, 0), "priority", json_integer(100));
	json_object_set_new(json_array_get(jobs, 1), "priority", json_integer(100));
	s = cmd_jobs_table(jobs);
	TAP_OK(s && !strstr(s, "PRIORITY"), "jobs table: no PRIORITY column when every job has the default priority");
	free(s);
	json_object_set_new(json_array_get(jobs, 1), "priority", json_integer(-5));
	s = cmd_jobs_table(jobs);
	TAP_STR_EQ(s, "ID  STATE   KIND  NAME  PRIORITY  ATTEMPTS  UPDATED  POOL\n"
		"12  queued  -     -     100       -         -        default\n"
		"9   queued  -     -     -5        -         -        h200\n",
		"jobs table: a PRIORITY column when a job has another priority, before ATTEMPTS");
	free(s);
	/* a WAITS FOR column only when a listed job waits for others to succeed (migration 033) */
	json_object_set_new(json_array_get(jobs, 0), "waits_for", json_null());
	json_object_set_new(json_array_get(jobs, 1), "waits_for", json_pack("[i,i]", 4, 7));
	json_object_set_new(json_array_get(jobs, 1), "state", json_string("scheduled"));
	s = cmd_jobs_table(jobs);
	TAP_STR_EQ(s, "ID  STATE      KIND  NAME  PRIORITY  ATTEMPTS  UPDATED  POOL     WAITS FOR\n"
		"12  queued     -     -     100       -         -        default  -\n"
		"9   scheduled  -     -     -5        -         -        h200     [4,7]\n",
		"jobs table: a WAITS FOR column when a job waits for others, last");
	free(s);
	{
		json_t *w = json_array();
		for (int k = 100; k < 140; k++)
			json_array_append_new(w, json_integer(k));
		json_object_set_new(json_array_get(jobs, 1), "waits_for", w);
		s = cmd_jobs_table(jobs);
		TAP_OK(s && strstr(s, "h200     [100,101,102,103,104,105,106,107,...] +32\n"),
		       "jobs table: a job after 40 jobs: the first 8 ids and +32");
		free(s);
	}
	json_decref(jobs);

	json_t *att = json_loads("[{\"number\": 1, \"state\": \"ended\", \"outcome\": \"failed\","
		" \"class\": \"oom_train_early\", \"rung\": \"batch_size_1\", \"worker_id\": 3, \"gpu_uuid\": \"GPU-a\","
		" \"facts\": {\"phase\": \"train\", \"last_step\": 4, \"total_steps\": 2000}},"
		" {\"number\": 2, \"state\": \"running\", \"phase\": \"load\", \"step\": null, \"worker_id\": 3}]", 0, &je);
	s = cmd_attempts_table(att);
	TAP_STR_EQ(s, "#  STATE    OUTCOME  CLASS            RUNG          PHASE  STEP    WORKER  GPU\n"
		"1  ended    failed   oom_train_early  batch_size_1  train  4/2000  3       GPU-a\n"
		"2  running  -        -                -             load   -       3       -\n",
		"attempts table: phase/step from facts when the attempt has none");
	free(s);
	json_decref(att);
}

static void test_output_line(void)
{
	json_t *r = json_loads("{\"result\": {\"output\": {\"attempt\": 2, \"path\": \"/w/jobs/7/out/a.safetensors\", \"worker_id\": 3}}}", 0, NULL);
	char *s = jobtext_output(r);
	TAP_STR_EQ(s, "/w/jobs/7/out/a.safetensors (saved by attempt 2, on worker 3's host)", "output line: path, attempt, worker");
	free(s);
	json_object_del(json_object_get(json_object_get(r, "result"), "output"), "worker_id");
	s = jobtext_output(r);
	TAP_STR_EQ(s, "/w/jobs/7/out/a.safetensors (saved by attempt 2)", "output line: without a worker");
	free(s);
	json_object_set_new(json_object_get(r, "result"), "output", json_null());
	TAP_OK(jobtext_output(r) == NULL && jobtext_output(NULL) == NULL, "output line: none when no file was named");
	json_decref(r);
}

static void test_diff(void)
{
	json_error_t je;
	json_t *a = json_loads("{\"config\": {\"process\": [{\"train\": {\"batch_size\": 4, \"lr\": 0.0001},"
		" \"datasets\": [{\"resolution\": [512, 768, 1024]}]}]}}", 0, &je);
	json_t *b = json_loads("{\"config\": {\"process\": [{\"train\": {\"batch_size\": 1, \"lr\": 0.0001,"
		" \"gradient_checkpointing\": true}, \"datasets\": [{\"resolution\": [512, 768]}]}]}}", 0, &je);
	json_t *d = jsondiff_paths(a, b);
	char *s = jsondiff_format(d);
	TAP_STR_EQ(s, "config.process[0].train.batch_size: 4 -> 1\n"
		"config.process[0].train.gradient_checkpointing: null -> true\n"
		"config.process[0].datasets[0].resolution: [512,768,1024] -> [512,768]\n",
		"diff: changed, removed and added paths in DECISION.changes form");
	free(s);
	json_decref(d);
	d = jsondiff_paths(a, a);
	TAP_INT_EQ(json_array_size(d), 0, "diff: equal documents have no changes");
	json_decref(d);
	json_t *i1 = json_pack("{s:i}", "x", 1), *r1 = json_pack("{s:f}", "x", 1.0);
	d = jsondiff_paths(i1, r1);
	TAP_INT_EQ(json_array_size(d), 0, "diff: 1 equals 1.0");
	json_decref(d);
	json_decref(i1);
	json_decref(r1);
	json_decref(a);
	json_decref(b);
	a = json_loads("{\"r\": [512, 768], \"d\": [{\"f\": 81}]}", 0, &je);
	b = json_loads("{\"r\": [512, 1024], \"d\": [{\"f\": 81}, {\"f\": 21}]}", 0, &je);
	d = jsondiff_paths(a, b);
	s = jsondiff_format(d);
	TAP_STR_EQ(s, "r[1]: 768 -> 1024\nd[1]: null -> {\"f\":21}\n",
		"diff: same-length lists index by index; lists of objects too");
	free(s);
	json_decref(d);
	json_decref(a);
	json_decref(b);
}

/* Issue 18: the rate is measured between the last two step reports, not against the redraw time. */
static void test_progress(void)
{
	struct progress p;
	char buf[96];
	int64_t t = 0;

	progress_reset(&p);
	TAP_STR_EQ(progress_suffix(&p, buf, sizeof(buf)), "", "progress: no rate before two reports");
	progress_note(&p, 100, 2000, 10000);
	TAP_OK(progress_rate(&p) < 0, "progress: one report gives no rate");
	progress_note(&p, 200, 2000, 15000);
	TAP_STR_EQ(progress_suffix(&p, buf, sizeof(buf)), ", 20.00 steps/s, ETA 1m30s",
		"progress: 100 steps in 5 s: 20 steps/s, 1800 steps left");
	progress_note(&p, 200, 2000, 16000);
	progress_note(&p, 200, 2000, 19000);
	TAP_STR_EQ(progress_suffix(&p, buf, sizeof(buf)), ", 20.00 steps/s, ETA 1m30s",
		"progress: redraws and heartbeats at the same step keep the rate (issue 18: it fell)");
	progress_note(&p, 260, 2000, 20000);
	TAP_STR_EQ(progress_suffix(&p, buf, sizeof(buf)), ", 12.00 steps/s, ETA 2m25s",
		"progress: the next report is measured from the last one that moved (60 steps in 5 s)");
	progress_note(&p, 3, 2000, 30000);
	TAP_OK(progress_rate(&p) < 0, "progress: a lower step (a new run) starts over");
	progress_note(&p, 1003, 0, 30000 + 10000);
	TAP_STR_EQ(progress_suffix(&p, buf, sizeof(buf)), ", 100.00 steps/s, ETA 10s", "progress: total kept; ETA in s");
	progress_reset(&p);
	progress_note(&p, 0, 0, 0);
	progress_note(&p, 10, 0, 1000);
	TAP_STR_EQ(progress_suffix(&p, buf, sizeof(buf)), ", 10.00 steps/s", "progress: no total, no ETA");
	progress_reset(&p);
	progress_note(&p, 0, 100000, 0);
	progress_note(&p, 10, 100000, 1000);
	TAP_STR_EQ(progress_suffix(&p, buf, sizeof(buf)), ", 10.00 steps/s, ETA 2h46m", "progress: hours");
	TAP_INT_EQ(progress_parse_time("2026-11-30T06:00:01.25+00:00", &t), 0, "progress: Postgres timestamp parses");
	TAP_INT_EQ(t, 1796018401250LL, "progress: ... to ms since the epoch");
	TAP_INT_EQ(progress_parse_time("2026-11-30 07:00:01.25+01", &t), 0, "progress: space and +01 parse");
	TAP_INT_EQ(t, 1796018401250LL, "progress: ... the offset applied");
	TAP_INT_EQ(progress_parse_time("2026-11-30T06:00:01Z", &t), 0, "progress: Z parses");
	TAP_INT_EQ(t, 1796018401000LL, "progress: ... whole seconds");
	TAP_INT_EQ(progress_parse_time("yesterday", &t), -1, "progress: not a timestamp");
	TAP_INT_EQ(progress_parse_time(NULL, &t), -1, "progress: NULL");
}

static json_t *J(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, 0, &je);
	if (!v)
		printf("# bad test JSON: %s: %s\n", je.text, text);
	return v;
}

/* A config for the story tests: batch, buckets, sample width and name. New reference. */
static json_t *cfg(int batch, int accum, const char *res, int width, const char *name)
{
	char *t = xasprintf("{\"config\": {\"name\": \"%s\", \"process\": [{\"train\": {\"batch_size\": %d, "
		"\"gradient_accumulation\": %d}, \"datasets\": [{\"resolution\": %s}], \"sample\": {\"width\": %d}}]}}",
		name, batch, accum, res, width);
	json_t *v = J(t);
	free(t);
	return v;
}

static json_t *attempt(int n, const char *outcome, const char *cls, const char *action, const char *rung, json_t *config)
{
	json_t *a = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s?, s:o}", "number", n, "state", "ended", "outcome", outcome,
		"class", cls, "action", action, "rung", rung, "config", config);
	return a;
}

/* Issue 12: a job whose first attempt started below its target (recovery_state.started_lower): the
 * start text with the changes from the target, from the recorded changes before attempt 1 is listed;
 * the verdict's line; nothing for a job that started at its target. */
static void test_story_start_lower(void)
{
	json_t *atts = json_array();
	json_t *job = J("{\"id\": 9, \"state\": \"succeeded\", \"attempts\": 2, \"result\": {\"config_name\": \"x\"},"
		" \"recovery_state\": {\"started_lower\": {\"attempt\": 1, \"reason\": \"memory model: predicted not to fit\","
		" \"rungs\": [\"batch_size\"], \"changes\": [{\"path\": \"config.process[0].train.batch_size\", \"old\": 4,"
		" \"new\": 1}]}}}");
	char *s;

	json_object_set_new(job, "target_config", cfg(4, 1, "[1024]", 1024, "x"));
	s = story_start_text(job, atts);
	TAP_STR_EQ(s, "attempt 1 started below the target: memory model: predicted not to fit\n"
		"  config change: config.process[0].train.batch_size: 4 -> 1\n",
		"story: a start below the target, from the recorded changes before attempt 1 is listed");
	free(s);
	json_array_append_new(atts, attempt(1, "succeeded", "success", "scale_up", "batch_size", cfg(1, 4, "[1024]", 1024, "x")));
	json_array_append_new(atts, attempt(2, "succeeded", "success", "succeed", NULL, cfg(2, 2, "[1024]", 1024, "x")));
	s = story_start_text(job, atts);
	TAP_STR_EQ(s, "attempt 1 started below the target: memory model: predicted not to fit\n"
		"  config change: config.process[0].train.batch_size: 4 -> 1\n"
		"  config change: config.process[0].train.gradient_accumulation: 1 -> 4\n",
		"story: ... and from the target to attempt 1's config once it is listed");
	free(s);
	s = story_verdict(job, atts, NULL);
	TAP_OK(s && strstr(s, "\n  started below the target (memory model), then scaled up: attempt 1 ran with batch_size applied\n"),
		"story: the verdict says the job started lower and scaled up");
	free(s);
	json_object_set_new(job, "attempts", json_integer(1));
	s = story_verdict(job, atts, NULL);
	TAP_OK(s && strstr(s, "\n  started below the target (memory model): attempt 1 ran with batch_size applied\n"),
		"story: ... or only that it started lower");
	free(s);
	json_object_set_new(job, "recovery_state", json_object());
	s = story_start_text(job, atts);
	TAP_OK(s == NULL, "story: nothing for a job that started at its target");
	free(s);
	s = story_verdict(job, atts, NULL);
	TAP_OK(s && !strstr(s, "started below"), "story: and no verdict line");
	free(s);
	/* a first claim handed back for a bigger GPU (recovery_state.started_bigger) */
	json_object_set_new(job, "recovery_state", J("{\"started_bigger\": {\"attempt\": 1, \"gpu_mib\": 24576, "
		"\"min_gpu_memory_mib\": 24577, \"reason\": \"memory model: every rung fails here\"}}"));
	s = story_verdict(job, atts, NULL);
	TAP_OK(s && strstr(s, "\n  started on a bigger GPU (memory model): its claim on a 24576 MiB GPU was handed back "
			     "before it ran, for a GPU with at least 24577 MiB\n    why: memory model: every rung fails here\n") &&
	       !strstr(s, "started below"), "story: the verdict says the first claim was handed back for a bigger GPU, and why");
	free(s);
	/* a retried job (recovery_state.retried, POST /v1/jobs/{id}/retry) */
	json_object_set_new(job, "recovery_state", J("{\"budget_from\": 2, \"retried\": {\"by\": \"oncall\", \"from\": "
		"\"target\", \"note\": \"GPU-12 replaced\", \"previous_state\": \"failed\", \"budget_from\": 2}}"));
	s = story_verdict(job, atts, NULL);
	TAP_OK(s && strstr(s, "\n  retried by oncall from the target config after it was failed; budgets count from attempt 3: "
			     "GPU-12 replaced\n"), "story: the verdict says who retried it, from what, and why");
	free(s);
	json_object_set_new(job, "recovery_state", J("{\"retried\": {\"from\": \"current\", \"previous_state\": \"cancelled\", "
		"\"budget_from\": 0}}"));
	s = story_verdict(job, atts, NULL);
	TAP_OK(s && strstr(s, "\n  retried from the current config after it was cancelled; budgets count from attempt 1\n"),
	       "story: a retry without a name or note");
	free(s);
	json_object_set_new(job, "recovery_state", json_object());
	/* a queued job: why no usable GPU takes it, and its place in the queue (the JOB's placement,
	 * recovery/jobtext.h) */
	{
		static const struct {
			const char *placement, *line, *name;
		} cases[] = {
			{ "{\"gpus\": 0, \"min_gpu_memory_mib\": 100000, \"fleet_max_gpu_mib\": 81920}",
			  "\n  waiting for a GPU: none of the usable GPUs on live workers meets its constraints (at least 100000 MiB; "
			  "the largest has 81920 MiB)\n", "story: a floor above the fleet" },
			{ "{\"gpus\": 0, \"min_gpu_memory_mib\": 40000, \"fleet_max_gpu_mib\": 81920}",
			  "\n  waiting for a GPU: its exclusions leave no usable GPU on a live worker with at least 40000 MiB\n",
			  "story: the GPUs big enough are excluded" },
			{ "{\"gpus\": 0, \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 0}",
			  "\n  waiting for a GPU: no live worker has a usable GPU\n", "story: no live worker" },
			{ "{\"gpus\": 0, \"draining_gpus\": 2, \"min_gpu_memory_mib\": 100000, \"fleet_max_gpu_mib\": 163840}",
			  "\n  waiting for a GPU: the 2 that meet its constraints are on drained workers (it runs once one is "
			  "resumed)\n", "story: the GPUs it needs are on drained workers" },
			{ "{\"gpus\": 2, \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920}", NULL,
			  "story: no waiting line when a GPU can take it" },
			/* its place in the queue ("ahead": rung_job_ahead), added to the sentence, or alone */
			{ "{\"gpus\": 0, \"min_gpu_memory_mib\": 100000, \"fleet_max_gpu_mib\": 81920, \"ahead\": 3}",
			  "\n  waiting for a GPU: none of the usable GPUs on live workers meets its constraints (at least 100000 MiB; "
			  "the largest has 81920 MiB); 3 jobs ahead of it in the queue\n", "story: why it waits, and 3 jobs ahead" },
			{ "{\"gpus\": 0, \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 0, \"ahead\": 0}",
			  "\n  waiting for a GPU: no live worker has a usable GPU; no job ahead of it in the queue\n",
			  "story: why it waits, and no job ahead" },
			{ "{\"gpus\": 2, \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 1}",
			  "\n  waiting its turn: 1 job ahead of it in the queue\n", "story: a GPU can take it, 1 job ahead" },
			{ "{\"gpus\": 2, \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 12}",
			  "\n  waiting its turn: 12 jobs ahead of it in the queue\n", "story: a GPU can take it, 12 jobs ahead" },
			/* its owner's limit (tokens.max_running): the claim passes over it whatever the GPUs */
			{ "{\"gpus\": 2, \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 1, "
			  "\"owner_max_running\": 2, \"owner_running\": 2}",
			  "\n  waiting for its owner's limit: team-a runs 2 jobs, at most 2 at once; 1 job ahead of it in the queue\n",
			  "story: its owner at its limit" },
			{ "{\"gpus\": 2, \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 0, "
			  "\"owner_max_running\": 0, \"owner_running\": 0}",
			  "\n  waiting for its owner's limit: team-a may run no job now (max_running 0); no job ahead of it in the queue\n",
			  "story: its owner paused (max_running 0)" },
			{ "{\"gpus\": 2, \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 1, "
			  "\"owner_max_running\": 3, \"owner_running\": 2}",
			  "\n  waiting its turn: 1 job ahead of it in the queue\n", "story: below its owner's limit, its turn (near miss)" },
			/* its owner's limit in its pool (tokens.pool_limits, migration 034) */
			{ "{\"gpus\": 2, \"pool\": \"h200\", \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 0, "
			  "\"owner_pool_max_running\": 2, \"owner_pool_running\": 2}",
			  "\n  waiting for its owner's limit in pool h200: team-a runs 2 jobs of it, at most 2 at once; no job ahead of "
			  "it in the queue\n",
			  "story: its owner at its limit in the job's pool" },
			{ "{\"gpus\": 2, \"pool\": \"h200\", \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, "
			  "\"owner_pool_max_running\": 0, \"owner_pool_running\": 0}",
			  "\n  waiting for its owner's limit in pool h200: team-a may run no job of it now (max_running 0)\n",
			  "story: its owner paused in the job's pool" },
			{ "{\"gpus\": 2, \"pool\": \"h200\", \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 1, "
			  "\"owner_pool_max_running\": 3, \"owner_pool_running\": 2}",
			  "\n  waiting its turn: 1 job ahead of it in the queue\n", "story: below its limit in the pool, its turn (near miss)" },
			{ "{\"gpus\": 2, \"pool\": \"h200\", \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, "
			  "\"owner_max_running\": 1, \"owner_running\": 1, \"owner_pool_max_running\": 1, \"owner_pool_running\": 1}",
			  "\n  waiting for its owner's limit: team-a runs 1 job, at most 1 at once\n",
			  "story: both limits spent: the one over every pool is named" },
			/* its owner's GPU-hour quota (migration 035): before its limits */
			{ "{\"gpus\": 2, \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 2, "
			  "\"owner_max_running\": 1, \"owner_running\": 1, \"owner_quota\": {\"gpu_hours\": 500, \"days\": 7, "
			  "\"used_hours\": 512.3, \"over\": true}}",
			  "\n  waiting for its owner's GPU-hour quota: team-a used 512.3 of 500 GPU hours in the last 7 days: over its "
			  "quota, none of its jobs starts until older hours leave that window (or for an admin to raise it); 2 jobs "
			  "ahead of it in the queue\n",
			  "story: its owner over its GPU-hour quota (named before its limit)" },
			/* its owner's quota in the job's pool (migration 037) */
			{ "{\"gpus\": 2, \"pool\": \"h200\", \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 0, "
			  "\"owner_quota\": null, \"owner_pool_quota\": {\"pool\": \"h200\", \"gpu_hours\": 100, \"days\": 7, "
			  "\"used_hours\": 100.5, \"over\": true}}",
			  "\n  waiting for its owner's GPU-hour quota in pool h200: team-a used 100.5 of 100 GPU hours of pool h200 in "
			  "the last 7 days: over its quota, none of its jobs of that pool starts until older hours leave that window "
			  "(or for an admin to raise it); no job ahead of it in the queue\n",
			  "story: its owner over its quota in the job's pool" },
			{ "{\"gpus\": 2, \"pool\": \"h200\", \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 0, "
			  "\"owner_pool_quota\": {\"pool\": \"h200\", \"gpu_hours\": 100, \"days\": 7, \"used_hours\": 99.9, "
			  "\"over\": false}}",
			  "\n  waiting its turn: no job ahead of it in the queue\n", "story: under its quota in the pool, its turn (near miss)" },
			{ "{\"gpus\": 2, \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 0, "
			  "\"owner_quota\": {\"gpu_hours\": 500, \"days\": 1, \"used_hours\": 499.9, \"over\": false}}",
			  "\n  waiting its turn: no job ahead of it in the queue\n", "story: under its quota, its turn (near miss)" },
			/* worker pools: no GPU in its pool, some in others */
			{ "{\"gpus\": 0, \"pool\": \"h200\", \"other_pools_gpus\": 3, \"min_gpu_memory_mib\": 0, "
			  "\"fleet_max_gpu_mib\": 0, \"ahead\": 0}",
			  "\n  waiting for a GPU: no GPU in pool h200 can run it (3 in other pools); no job ahead of it in the queue\n",
			  "story: its pool has no GPU for it, other pools have 3" },
			{ "{\"gpus\": 0, \"pool\": \"h200\", \"other_pools_gpus\": 1, \"min_gpu_memory_mib\": 100000, "
			  "\"fleet_max_gpu_mib\": 81920}",
			  "\n  waiting for a GPU: no GPU in pool h200 can run it (1 in other pool)\n",
			  "story: its pool's GPUs too small, one in another pool: the pool is the reason" },
			{ "{\"gpus\": 0, \"pool\": \"h200\", \"other_pools_gpus\": 0, \"min_gpu_memory_mib\": 0, "
			  "\"fleet_max_gpu_mib\": 0}",
			  "\n  waiting for a GPU: no live worker has a usable GPU\n", "story: no GPU in any pool: as before" },
			{ "{\"gpus\": 0, \"draining_gpus\": 2, \"pool\": \"h200\", \"other_pools_gpus\": 4, "
			  "\"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920}",
			  "\n  waiting for a GPU: the 2 that meet its constraints are on drained workers (it runs once one is "
			  "resumed)\n", "story: drained GPUs in its own pool come before other pools'" },
			/* borrowing (migration 028): workers of other pools that borrow from its pool take it */
			{ "{\"gpus\": 0, \"pool\": \"h200\", \"borrowing_gpus\": 2, \"other_pools_gpus\": 3, "
			  "\"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 0}",
			  "\n  waiting for a GPU: no GPU in pool h200 can run it; 2 GPUs of workers that borrow from h200 may take "
			  "it when their own pool has no job for them; no job ahead of it in the queue\n",
			  "story: no GPU in its pool, 2 of borrowers: they are named, not the other pools" },
			{ "{\"gpus\": 0, \"pool\": \"h200\", \"borrowing_gpus\": 1, \"other_pools_gpus\": 0, "
			  "\"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920}",
			  "\n  waiting for a GPU: no GPU in pool h200 can run it; 1 GPU of workers that borrow from h200 may take "
			  "it when their own pool has no job for them\n",
			  "story: a pool served only by a borrower" },
			{ "{\"gpus\": 0, \"draining_gpus\": 1, \"pool\": \"h200\", \"borrowing_gpus\": 2, "
			  "\"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920}",
			  "\n  waiting for a GPU: the 1 that meet its constraints are on drained workers (it runs once one is "
			  "resumed, or on one of the 2 GPUs of workers that borrow from its pool when their own pool has no job "
			  "for them)\n", "story: drained GPUs in its pool, and borrowers" },
			/* preemption (migration 029): a borrowed attempt is being stopped for it, whatever else */
			{ "{\"gpus\": 1, \"pool\": \"h200\", \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 0, "
			  "\"preempting\": {\"attempt_id\": 9, \"job_id\": 41, \"worker_id\": 2, \"gpu_uuid\": \"GPU-7\"}}",
			  "\n  waiting for a GPU: job 41, which that GPU's worker borrowed from another pool, is being stopped on GPU "
			  "GPU-7 for it (preemption); it runs there next; no job ahead of it in the queue\n",
			  "story: a borrowed job being stopped for it" },
			/* rungd --preempt-priority: a job of its own pool, of a worse priority, is being stopped for it */
			{ "{\"gpus\": 1, \"pool\": \"h200\", \"min_gpu_memory_mib\": 0, \"fleet_max_gpu_mib\": 81920, \"ahead\": 0, "
			  "\"preempting\": {\"attempt_id\": 9, \"job_id\": 41, \"worker_id\": 2, \"gpu_uuid\": \"GPU-7\", "
			  "\"why\": \"priority\", \"priority\": 100}}",
			  "\n  waiting for a GPU: job 41, of a worse priority (100), is being stopped on GPU GPU-7 for it (preemption); "
			  "it runs there next; no job ahead of it in the queue\n",
			  "story: a job of a worse priority being stopped for an urgent one" },
			{ "{\"gpus\": 1, \"pool\": \"h200\", \"other_pools_gpus\": 4, \"min_gpu_memory_mib\": 0, "
			  "\"fleet_max_gpu_mib\": 81920, \"ahead\": 2}",
			  "\n  waiting its turn: 2 jobs ahead of it in the queue\n", "story: a GPU in its pool: its turn" },
		};
		json_object_set_new(job, "state", json_string("queued"));
		json_object_set_new(job, "owner", json_string("team-a"));
		for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
			json_object_set_new(job, "placement", J(cases[k].placement));
			s = story_verdict(job, atts, NULL);
			TAP_OK(s && (cases[k].line ? strstr(s, cases[k].line) != NULL : !strstr(s, "waiting")),
			       cases[k].name);
			free(s);
		}
	}
	json_decref(job);
	json_decref(atts);
}

/* Issue 16 part 3: the config change against the attempt before; the verdict setting by setting. */
static void test_story(void)
{
	json_t *atts = json_array();
	json_array_append_new(atts, attempt(1, "failed", "oom_train_early", "retry", "batch_size",
		cfg(4, 1, "[512,768,1024]", 1024, "x")));
	json_array_append_new(atts, attempt(2, "succeeded", "success", "scale_up", "bucket",
		cfg(1, 4, "[512,768]", 512, "x")));
	json_array_append_new(atts, attempt(3, "failed", "oom_train_intermittent", "scale_up", "sample_size",
		cfg(1, 4, "[512,768,1024]", 512, "x_s1")));
	json_array_append_new(atts, attempt(4, "failed", "oom_sample", "succeed", NULL,
		cfg(1, 4, "[512,768]", 1024, "x_s2")));
	json_t *job = J("{\"id\": 7, \"state\": \"succeeded\", \"attempts\": 4, \"recovery\": {\"scale_up\": true},"
		" \"recovery_state\": {\"last_good_attempt\": 2},"
		" \"result\": {\"class\": \"oom_sample\", \"reason\": \"oom_sample: job succeeded with x (every setting at target or ceiling)\","
		" \"config_name\": \"x\", \"ceilings\": {\"bucket\": [512,768,1024], \"sample_size\": 1024},"
		" \"target\": {\"steps\": 100, \"batch_size\": 4, \"gradient_accumulation\": 1, \"resolution\": [[512,768,1024]],"
		" \"num_frames\": [81], \"sample_width\": 1024, \"low_vram\": false, \"gradient_checkpointing\": true},"
		" \"achieved\": {\"steps\": 100, \"batch_size\": 1, \"gradient_accumulation\": 4, \"resolution\": [[512,768]],"
		" \"num_frames\": [21], \"sample_width\": 512, \"low_vram\": true, \"gradient_checkpointing\": true}}}");
	bool known = false;

	TAP_OK(story_next_config(job, atts, 0, &known) == json_object_get(json_array_get(atts, 1), "config") && known,
		"story: the next config is the next attempt's");
	TAP_OK(story_next_config(job, atts, 3, &known) == NULL && known, "story: none after the last attempt of an ended job");
	json_t *q = J("{\"state\": \"queued\", \"attempts\": 4, \"current_config\": {\"a\": 1}}");
	TAP_OK(story_next_config(q, atts, 3, &known) == json_object_get(q, "current_config") && known,
		"story: a queued job's current config follows its last attempt");
	json_object_set_new(q, "state", json_string("running"));
	TAP_OK(story_next_config(q, atts, 3, &known) == NULL && !known,
		"story: a job read before the attempt ended cannot tell yet");
	json_decref(q);

	char *s = story_attempt_text(json_array_get(atts, 2), json_object_get(json_array_get(atts, 3), "config"));
	TAP_STR_EQ(s, "attempt 3 ended: outcome failed, class oom_train_intermittent, action scale_up, rung sample_size\n"
		"  config change: config.name: \"x_s1\" -> \"x_s2\"\n"
		"  config change: config.process[0].datasets[0].resolution: [512,768,1024] -> [512,768]\n"
		"  config change: config.process[0].sample.width: 512 -> 1024\n",
		"story: after a failed scale-up the revert shows (against the attempt's own config)");
	free(s);

	s = story_verdict(job, atts, NULL);
	TAP_STR_EQ(s, "job 7 succeeded after 4 attempt(s) with attempt 2's run (x)\n"
		"  resolution: target [512,768,1024], achieved [512,768]: given up: attempt 3 ran out of memory with bucket [512,768,1024] (oom_train_intermittent)\n"
		"  num_frames: target 81, achieved 21: not scaled back up (no ceiling recorded)\n"
		"  sample_width: target 1024, achieved 512: given up: attempt 4 ran out of memory with sample_size 1024 (oom_sample)\n"
		"  batch_size: target 4, achieved 1: not scaled back up (no ceiling recorded)\n"
		"  gradient_accumulation: target 1, achieved 4: follows batch_size (batch x accumulation = 4, as the target)\n"
		"  low_vram: target false, achieved true: kept: memory-saving settings stay after a success (guide 7)\n"
		"  at target: steps, gradient_checkpointing\n",
		"story: a succeeded job setting by setting: ceilings with the attempt that hit them, frames left below "
		"target said so (issue 16: not 'every setting at target')");
	TAP_OK(!strstr(s, "oom_sample:") && !strstr(s, "every setting at target"),
		"story: never the last failed class as the story, never the blanket claim");
	free(s);

	json_object_set_new(json_object_get(job, "recovery"), "scale_up", json_false());
	json_object_set_new(json_object_get(job, "result"), "given_up",
		json_pack("{s:s}", "num_frames", "frames 41 failed in attempt 5; 29 not tried: budget"));
	s = story_verdict(job, atts, "my-id");
	TAP_OK(strstr(s, "job my-id succeeded") != NULL, "story: the id as the user wrote it");
	TAP_OK(strstr(s, "  num_frames: target 81, achieved 21: frames 41 failed in attempt 5; 29 not tried: budget\n") != NULL,
		"story: a reason the policy gives for a setting (result.given_up) is used");
	TAP_OK(strstr(s, "  batch_size: target 4, achieved 1: not scaled back up: recovery.scale_up is off\n") != NULL,
		"story: scale-up off is the reason when nothing else is");
	free(s);

	json_t *r = json_object_get(job, "result");
	json_object_set(r, "achieved", json_object_get(r, "target"));
	s = story_verdict(job, atts, NULL);
	TAP_STR_EQ(s, "job 7 succeeded after 4 attempt(s) with attempt 2's run (x)\n  every setting at target\n",
		"story: everything at target says so");
	free(s);

	/* the policy's own account (result.settings, good_attempt) wins when present */
	json_object_set_new(r, "good_attempt", json_integer(3));
	json_object_set_new(r, "settings", J("[{\"setting\": \"steps\", \"target\": 100, \"achieved\": 100, \"status\": \"at_target\"},"
		" {\"setting\": \"bucket\", \"target\": [512,768,1024], \"achieved\": [512,768], \"status\": \"ceiling\","
		" \"ceiling\": [512,768,1024], \"attempt\": 1, \"why\": \"attempt 1 ran out of memory (oom_train_early) with it\"},"
		" {\"setting\": \"sample_size\", \"target\": {\"width\": 1024, \"height\": 1024}, \"achieved\": {\"width\": 512, \"height\": 512},"
		" \"status\": \"ceiling\", \"ceiling\": {\"width\": 1024, \"height\": 1024}, \"attempt\": 1},"
		" {\"setting\": \"num_frames\", \"target\": 81, \"achieved\": 21, \"status\": \"below_target\","
		" \"why\": \"recovery.max_attempts reached\"},"
		" {\"setting\": \"low_vram\", \"target\": false, \"achieved\": true, \"status\": \"kept\","
		" \"why\": \"a memory-saving rung stays after a success (guide 7)\"}]"));
	s = story_verdict(job, atts, NULL);
	TAP_STR_EQ(s, "job 7 succeeded after 4 attempt(s) with attempt 3's run (x)\n"
		"  bucket: target [512,768,1024], achieved [512,768]: given up at [512,768,1024]: attempt 1 ran out of memory (oom_train_early) with it\n"
		"  sample_size: target 1024x1024, achieved 512x512: given up at 1024x1024: attempt 1 ran out of memory (oom_train_early)\n"
		"  num_frames: target 81, achieved 21: not scaled back up: recovery.max_attempts reached\n"
		"  low_vram: target false, achieved true: kept: a memory-saving rung stays after a success (guide 7)\n"
		"  at target: steps\n",
		"story: result.settings (the policy's account, branch fix16) is told setting by setting");
	free(s);

	json_t *f = J("{\"id\": 8, \"state\": \"failed\", \"attempts\": 2, \"result\": {\"reason\": \"not_oom: missing file\"}}");
	s = story_verdict(f, NULL, NULL);
	TAP_STR_EQ(s, "job 8 failed after 2 attempt(s): not_oom: missing file\n", "story: a failed job keeps its reason");
	free(s);
	json_decref(f);
	json_decref(job);
	json_decref(atts);
}

static void test_submit_body(void)
{
	json_t *cfg = json_pack("{s:s}", "job", "extension");
	struct cmd_submit_opts o = { .name = NULL };
	json_t *b = cmd_submit_body(cfg, &o);
	char *s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	TAP_STR_EQ(s, "{\"config\":{\"job\":\"extension\"}}", "submit body: just the config");
	free(s);
	json_decref(b);
	o = (struct cmd_submit_opts){ .name = "n", .has_priority = 1, .priority = 0, .no_scale_up = 1,
		.max_attempts = 3, .validate_steps = 20 };
	b = cmd_submit_body(cfg, &o);
	s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	TAP_STR_EQ(s, "{\"config\":{\"job\":\"extension\"},\"name\":\"n\",\"priority\":0,"
		"\"recovery\":{\"max_attempts\":3,\"scale_up\":false,\"validate_steps\":20}}",
		"submit body: name, priority 0, recovery options");
	free(s);
	json_decref(b);
	{
		char *err = NULL;
		json_t *labels = labels_parse("team=vision", "--labels", &err);
		o = (struct cmd_submit_opts){ .labels = labels };
		b = cmd_submit_body(cfg, &o);
		s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
		TAP_STR_EQ(s, "{\"config\":{\"job\":\"extension\"},\"labels\":{\"team\":\"vision\"}}", "submit body: --labels");
		free(s);
		json_decref(b);
		json_decref(labels);
		o = (struct cmd_submit_opts){ .labels = NULL };
	}
	o = (struct cmd_submit_opts){ .pool = "h200" };
	b = cmd_submit_body(cfg, &o);
	s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	TAP_STR_EQ(s, "{\"config\":{\"job\":\"extension\"},\"pool\":\"h200\"}", "submit body: --pool");
	free(s);
	json_decref(b);
	json_decref(cfg);
}

/* DURATION: 90d, 12h, 30m, 1h30m, 2w, 3600s or bare seconds, 60 s to 3650d; anything else names what is wrong. */
static void test_token_expires(void)
{
	static const struct {
		const char *text;
		long long want; /* -1: refused */
	} cases[] = {
		{ "90d", 90 * 86400LL }, { "12h", 12 * 3600LL }, { "30m", 1800 }, { "3600s", 3600 }, { "3600", 3600 },
		{ "60", 60 }, { "1m", 60 }, { "3650d", 315360000 }, { "315360000", 315360000 }, { "0090d", 90 * 86400LL },
		{ "59", -1 }, { "59s", -1 }, { "0", -1 }, { "3651d", -1 }, { "315360001", -1 }, { "", -1 }, { "d", -1 },
		{ "12x", -1 }, { "12H", -1 }, { "1.5h", -1 }, { "-5m", -1 }, { "+5m", -1 }, { " 5m", -1 }, { "5m ", -1 },
		{ "5 m", -1 }, { "5mm", -1 }, { "1h30m", 5400 }, { "2w", 14 * 86400LL }, { "30m1h", -1 }, { "never", -1 }, { "99999999999999999999d", -1 },
		{ "999999999999d", -1 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		long long got = -2;
		const char *why = NULL;
		char name[96];
		int rc = expiry_parse(cases[i].text, &got, &why);
		snprintf(name, sizeof name, "expires: \"%s\" -> %lld", cases[i].text, cases[i].want);
		if (cases[i].want < 0)
			TAP_OK(rc == -1 && why && *why && got == 0, name);
		else
			TAP_OK(rc == 0 && got == cases[i].want && !why, name);
	}
	{
		long long got;
		const char *why;
		TAP_OK(expiry_parse("30s", &got, &why) < 0 && strstr(why, "shorter"), "expires: too short says so");
		TAP_OK(expiry_parse("3651d", &got, &why) < 0 && strstr(why, "longer"), "expires: too long says so");
		TAP_OK(expiry_parse("soon", &got, &why) < 0 && strstr(why, "90d"), "expires: not a duration shows the forms");
		TAP_OK(expiry_parse("3651d", &got, &why) < 0 && strstr(why, "3650d"), "expires: too long says the most");
	}
	{
		char *err = NULL, *s;
		json_t *b = cmd_token_create_body("submitter", "ci", "12h", &err);
		s = b ? json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		TAP_STR_EQ(s, "{\"expires_in_s\":43200,\"name\":\"ci\",\"role\":\"submitter\"}",
			   "token create body: --expires 12h is expires_in_s 43200");
		free(s);
		json_decref(b);
		b = cmd_token_create_body("worker", NULL, NULL, &err);
		s = b ? json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		TAP_STR_EQ(s, "{\"name\":null,\"role\":\"worker\"}", "token create body: without --expires, no expires_in_s (never)");
		free(s);
		json_decref(b);
		b = cmd_token_create_body("worker", NULL, "5x", &err);
		TAP_OK(!b && err && strstr(err, "--expires 5x") && strstr(err, "90d"),
		       "token create body: --expires 5x is refused, naming the option and the forms");
		free(err);
		err = NULL;
		b = cmd_token_create_body("worker", NULL, "10s", &err);
		TAP_OK(!b && err && strstr(err, "--expires 10s") && strstr(err, "shorter"), "token create body: --expires 10s is too short");
		free(err);
		err = NULL;
		b = cmd_token_create_body(NULL, NULL, "1d", &err);
		TAP_OK(!b && err && strstr(err, "--role"), "token create body: --role is still required");
		free(err);
	}
	{
		json_t *never = json_pack("{s:s, s:n, s:b}", "name", "a", "expires_at", "expired", 0);
		json_t *later = json_pack("{s:s, s:s, s:b}", "name", "b", "expires_at", "2030-01-31T12:00:00+00:00", "expired", 0);
		json_t *gone = json_pack("{s:s, s:s, s:b}", "name", "c", "expires_at", "2020-01-31T12:00:00+00:00", "expired", 1);
		json_t *old = json_pack("{s:s}", "name", "d"); /* a server without expiry */
		char *c1 = cmd_token_expires_cell(never), *c2 = cmd_token_expires_cell(later), *c3 = cmd_token_expires_cell(gone);
		char *c4 = cmd_token_expires_cell(old);
		TAP_STR_EQ(c1, "never", "token list EXPIRES: never");
		TAP_STR_EQ(c2, "2030-01-31T12:00:00+00:00", "token list EXPIRES: the time");
		TAP_STR_EQ(c3, "expired", "token list EXPIRES: expired");
		TAP_STR_EQ(c4, "never", "token list EXPIRES: no expires_at reads as never");
		free(c1);
		free(c2);
		free(c3);
		free(c4);
		json_decref(never);
		json_decref(later);
		json_decref(gone);
		json_decref(old);
	}
}

static json_t *facts_of(const char *log, int exit_code, int sig)
{
	char *err = NULL;
	FILE *f = fmemopen((void *)log, strlen(log), "r");
	json_t *facts = cmd_classify_facts(f, exit_code, sig, &err);
	fclose(f);
	free(err);
	return facts;
}

static void test_classify_facts(void)
{
	const char *oom = "Running 1 job\n# Running job: x\nx:   1%|  | 12/2000 [00:10<30:00, lr: 1.0e-04]\n"
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
		"Error running job: CUDA out of memory\n";
	json_t *f = facts_of(oom, -1, 0);
	TAP_OK(f != NULL, "classify facts: built");
	TAP_INT_EQ(json_integer_value(json_object_get(f, "exit_code")), 1, "classify facts: a failed log guesses exit 1");
	TAP_OK(json_is_null(json_object_get(f, "signal")), "classify facts: no signal");
	TAP_INT_EQ(json_integer_value(json_object_get(f, "total_steps")), 2000, "classify facts: scanner fields kept");
	TAP_OK(json_object_get(json_object_get(f, "signatures"), "cuda_oom") != NULL, "classify facts: oom signature");
	json_decref(f);
	f = facts_of(oom, 0, 9);
	TAP_OK(json_is_null(json_object_get(f, "exit_code")) && json_integer_value(json_object_get(f, "signal")) == 9,
		"classify facts: --signal wins over the exit code");
	json_decref(f);
	f = facts_of("Running 1 job\nJob stopped\n", -1, 0);
	TAP_INT_EQ(json_integer_value(json_object_get(f, "exit_code")), 0, "classify facts: Job stopped guesses exit 0");
	json_decref(f);
}

/* rungctl profiles and the memory lines of show, from answers in the server's shapes. */
static void test_profiles(void)
{
	char *a1[] = { "profiles", "reset", "flux", "24576" }, *a2[] = { "profiles", "--json" };
	int words = 0;
	const struct cli_cmd *k = cli_find(4, a1, &words);
	json_t *list = json_loads("[{\"arch\": \"flux\", \"gpu_class_mib\": 24576, \"n\": 5, \"n_here\": 4, \"n_fit\": 3, \"n_oom\": 2,"
				  " \"margin_mib\": 512, \"usable_mib\": 24064, \"ceilings\": {\"batch_size\": 1, \"res_max\": 768},"
				  " \"reset_at\": null},"
				  " {\"arch\": \"wan22_14b\", \"gpu_class_mib\": 81920, \"n\": 0, \"n_here\": 0, \"n_fit\": 0, \"n_oom\": 0,"
				  " \"margin_mib\": 0, \"usable_mib\": 81408, \"ceilings\": {}, \"reset_at\": \"2026-12-01T10:00:00Z\"}]",
				  0, NULL);
	json_t *mem = json_loads("{\"job_id\": 7, \"arch\": \"flux\", \"gpu_mib\": 24576, \"features\": {\"batch\": 1},"
				 " \"profile\": {\"n\": 5, \"n_here\": 4, \"n_fit\": 3, \"n_oom\": 2, \"margin_mib\": 512},"
				 " \"estimate\": {\"peak_mib\": 22019, \"fits\": true, \"evidence\": \"flux: fit 22019 MiB\"}}", 0, NULL);
	char *s;

	TAP_OK(k && !strcmp(k->name, "profiles reset") && words == 2, "cli: profiles reset is a two-word command");
	k = cli_find(2, a2, &words);
	TAP_OK(k && !strcmp(k->name, "profiles") && words == 1, "cli: profiles alone lists");
	s = cmd_profiles_table(list);
	TAP_STR_EQ(s, "ARCH       GPU CLASS MIB  ATTEMPTS  HERE  FIT  OOM  MARGIN MIB  USABLE MIB  CEILINGS                  RESET\n"
		   "flux       24576          5         4     3    2    512         24064       batch_size=1 res_max=768  -\n"
		   "wan22_14b  81920          0         0     0    0    0           81408       -                         "
		   "2026-12-01T10:00:00Z\n", "profiles: the table");
	free(s);
	s = cmd_memory_lines(mem);
	TAP_STR_EQ(s, "memory estimate   21.5 GiB peak on a 24.0 GiB GPU: fits\n"
		   "  evidence        flux: fit 22019 MiB\n"
		   "  learned from    5 attempt(s) of flux (4 on 24576 MiB GPUs; 3 fit, 2 out of memory), margin 512 MiB\n",
		   "show: the memory estimate, its evidence and what it rests on");
	free(s);
	json_object_set_new(json_object_get(mem, "estimate"), "fits", json_false());
	s = cmd_memory_lines(mem);
	TAP_OK(strstr(s, "does not fit") != NULL, "show: a config predicted not to fit says so");
	free(s);
	json_object_set_new(json_object_get(mem, "estimate"), "peak_mib", json_null());
	json_object_set_new(json_object_get(mem, "estimate"), "fits", json_null());
	s = cmd_memory_lines(mem);
	TAP_OK(strstr(s, "unknown on a 24.0 GiB GPU: not enough history") != NULL, "show: no prediction without history");
	free(s);
	json_object_set_new(mem, "estimate", json_null());
	s = cmd_memory_lines(mem);
	TAP_STR_EQ(s, "memory estimate   none: the job has not run on a GPU yet\n", "show: no GPU yet, no estimate");
	free(s);
	json_decref(mem);
	json_decref(list);
}

/* rungctl plan's text, from answers in the server's shape: the three actions, drained GPUs, a size
 * not in the fleet, no GPU at all, no history. */
static void test_plan_text(void)
{
	json_t *p = json_loads("{\"kind\": \"image\", \"arch\": \"flux\", \"observations\": 6, \"fleet_max_gpu_mib\": 81920,"
			       " \"sizes\": [{\"gpu_mib\": 81920, \"gpus\": 2, \"draining_gpus\": 1, \"in_fleet\": true,"
			       " \"action\": \"as_is\", \"reason\": \"start as submitted\", \"estimate\": null,"
			       " \"target_estimate\": {\"peak_mib\": 28774, \"fits\": true}, \"rungs\": [], \"changes\": []},"
			       " {\"gpu_mib\": 49152, \"gpus\": 0, \"draining_gpus\": 0, \"in_fleet\": false,"
			       " \"action\": \"start_lower\", \"reason\": \"memory model: lower\","
			       " \"estimate\": {\"peak_mib\": 20480, \"fits\": true},"
			       " \"target_estimate\": {\"peak_mib\": 60000, \"fits\": false}, \"rungs\": [\"batch_size\", \"resolution\"],"
			       " \"changes\": [{\"path\": \"config.process[0].train.batch_size\", \"old\": 4, \"new\": 1}]},"
			       " {\"gpu_mib\": 24576, \"gpus\": 3, \"draining_gpus\": 0, \"in_fleet\": true,"
			       " \"action\": \"requeue_bigger\", \"reason\": \"memory model: every rung\", \"min_gpu_memory_mib\": 24577,"
			       " \"estimate\": {\"peak_mib\": null, \"fits\": false}, \"target_estimate\": {\"peak_mib\": null, \"fits\": null},"
			       " \"rungs\": [], \"changes\": []}]}", 0, NULL);
	char *s = cmd_plan_text(p);

	TAP_STR_EQ(s, "image flux: the memory model rests on 6 attempt(s) of flux\n"
		   "GPU MIB  GPUS            TARGET                  FIRST ATTEMPT                         IT NEEDS\n"
		   "81920    2 (+1 drained)  28.1 GiB, fits          as submitted                          -\n"
		   "49152    none            58.6 GiB, does not fit  start lower: batch_size + resolution  20.0 GiB, fits\n"
		   "24576    3               unknown                 wait for >= 24577 MiB                 -\n"
		   "  on 49152 MiB: memory model: lower\n"
		   "    config change: config.process[0].train.batch_size: 4 -> 1\n"
		   "  on 24576 MiB: memory model: every rung\n", "plan: a row per size, then why and what changes where not as submitted");
	free(s);
	json_object_set_new(p, "sizes", json_array());
	json_object_set_new(p, "observations", json_integer(0));
	s = cmd_plan_text(p);
	TAP_STR_EQ(s, "image flux: no memory history of flux yet, so a first attempt runs as submitted\n"
		   "no GPU in the fleet: --gpu-mib N asks about a GPU of N MiB\n", "plan: no history, no GPU");
	free(s);
	json_decref(p);
}

/* --set and --sweep (cli/sweep): paths, values read as YAML, the combinations in order, the names
 * that tell them apart, the sweep label, and every refusal; and ARGS_LIST, the repeatable option. */
static void test_sweep(void)
{
	const char *sets[2];
	size_t n_sets = 0, n = 0;
	const struct args_opt lopt[] = {
		{ .name = "set", .type = ARGS_LIST, .list = sets, .count = &n_sets, .max = 2 },
	};
	char *ops[1], *err = NULL, *sfx = NULL, *added = NULL, *s = NULL;
	char *lv[] = { "--set", "a=1", "--set=b=2" };
	TAP_OK(args_parse(lopt, 1, 3, lv, ops, 1, &n, &err) == 0 && n_sets == 2 && !strcmp(sets[0], "a=1") &&
		       !strcmp(sets[1], "b=2"), "args: a repeatable option keeps each value in order");
	char *lv3[] = { "--set", "a=1", "--set", "b=2", "--set", "c=3" };
	n_sets = 0;
	TAP_OK(args_parse(lopt, 1, 6, lv3, ops, 1, &n, &err) < 0 && err && strstr(err, "more than 2 times"),
	       "args: a repeatable option past its capacity is refused");
	free(err);
	err = NULL;

	s = sweep_path("train.lr");
	TAP_STR_EQ(s, "config.process[0].train.lr", "sweep: a path is under the first process");
	free(s);
	s = sweep_path("config.name");
	TAP_STR_EQ(s, "config.name", "sweep: a path from the top (config) is kept");
	free(s);
	s = sweep_path("meta.version");
	TAP_STR_EQ(s, "meta.version", "sweep: a path from the top (meta) is kept");
	free(s);
	s = sweep_path("configs.x");
	TAP_STR_EQ(s, "config.process[0].configs.x", "sweep: a key that only starts like config is under the process");
	free(s);

	json_t *base = json_pack("{s:s, s:{s:s, s:[{s:{s:i, s:f}, s:{s:i}, s:[{s:[i, i]}]}]}}", "job", "extension",
				 "config", "name", "lora", "process", "train", "batch_size", 4, "lr", 0.0001, "network",
				 "linear", 16, "datasets", "resolution", 512, 1024);
	struct sweep *sw = sweep_new();
	json_t *v = sweep_apply(sw, base, 0, &sfx, &added, &err);
	TAP_OK(v && json_equal(v, base) && !sfx && !added && sweep_count(sw) == 1 && !sweep_has_axis(sw),
	       "sweep: no option: one variant, the config unchanged, no suffix");
	json_decref(v);

	TAP_OK(sweep_add_set(sw, "train.batch_size=2", &err) == 0, "sweep: --set train.batch_size=2");
	TAP_OK(sweep_add_axis(sw, "train.lr=1e-4, 2e-4", &err) == 0, "sweep: --sweep train.lr=1e-4, 2e-4");
	TAP_OK(sweep_add_axis(sw, "datasets[0].resolution=[512],[512, 768],[1024]", &err) == 0,
	       "sweep: --sweep of lists split at commas outside brackets");
	TAP_INT_EQ(sweep_count(sw), 6, "sweep: 2 x 3 variants");
	v = sweep_apply(sw, base, 4, &sfx, &added, &err);
	json_t *proc = json_array_get(json_object_get(json_object_get(v, "config"), "process"), 0);
	TAP_OK(v && json_integer_value(json_object_get(json_object_get(proc, "train"), "batch_size")) == 2 &&
		       json_real_value(json_object_get(json_object_get(proc, "train"), "lr")) == 2e-4,
	       "sweep: variant 4 has the --set and the second lr (the last sweep varies fastest)");
	json_t *res = json_object_get(json_array_get(json_object_get(proc, "datasets"), 0), "resolution");
	TAP_OK(json_array_size(res) == 2 && json_integer_value(json_array_get(res, 1)) == 768,
	       "sweep: variant 4 has the second resolution list, [512, 768]");
	TAP_STR_EQ(sfx, "lr2e-4_resolution512-768", "sweep: the suffix names each path's last key and value");
	TAP_STR_EQ(json_string_value(json_object_get(json_object_get(v, "config"), "name")), "lora_lr2e-4_resolution512-768",
		   "sweep: config.name (the output folder) gets the suffix");
	TAP_OK(!added, "sweep: no path was missing");
	json_t *p0 = json_array_get(json_object_get(json_object_get(base, "config"), "process"), 0);
	TAP_OK(json_integer_value(json_object_get(json_object_get(p0, "train"), "batch_size")) == 4,
	       "sweep: the base config is left as it was");
	s = sweep_describe(sw, 4);
	TAP_STR_EQ(s, "train.lr=2e-4, datasets[0].resolution=[512, 768]", "sweep: a variant described as typed");
	free(s);
	free(sfx);
	json_decref(v);
	sweep_free(sw);

	/* refusals, each naming the option */
	static const struct { int axis; const char *spec, *want; } bad[] = {
		{ 0, "train.lr", "expected PATH=VALUE" },
		{ 1, "train.lr", "expected PATH=V1,V2" },
		{ 0, "train..lr=1", "not a config path" },
		{ 0, "[0].x=1", "not a config path" },
		{ 0, "train.lr.=1", "not a config path" },
		{ 0, "train lr=1", "not a config path" },
		{ 0, "datasets[x]=1", "not a config path" },
		{ 0, "train.lr=[1, 2", "not a YAML value" },
		{ 1, "train.lr=1e-4,0.0001", "same value" },
		{ 1, "train.lr=1,,2", "value 2 is empty" },
		{ 1, "train.lr=[1,2", "unbalanced brackets" },
		{ 1, "train.lr='a,b", "unbalanced quotes" },
	};
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		sw = sweep_new();
		int rc = bad[i].axis ? sweep_add_axis(sw, bad[i].spec, &err) : sweep_add_set(sw, bad[i].spec, &err);
		TAP_OK(rc < 0 && err && strstr(err, bad[i].want) && strstr(err, bad[i].axis ? "--sweep" : "--set"),
		       bad[i].spec);
		if (!(rc < 0 && err && strstr(err, bad[i].want)))
			fprintf(stderr, "# %s: %s\n", bad[i].spec, err ? err : "(accepted)");
		free(err);
		err = NULL;
		sweep_free(sw);
	}
	sw = sweep_new();
	sweep_add_set(sw, "train.lr=1", &err);
	TAP_OK(sweep_add_axis(sw, "config.process[0].train.lr=1,2", &err) < 0 && err && strstr(err, "already given"),
	       "sweep: one path given twice (in two spellings) is refused");
	free(err);
	err = NULL;
	sweep_free(sw);
	sw = sweep_new();
	sweep_add_axis(sw, "a=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", &err);
	TAP_OK(sweep_add_axis(sw, "b=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", &err) == 0 &&
		       sweep_add_axis(sw, "c=1,2", &err) < 0 && err && strstr(err, "512 variants"),
	       "sweep: 256 variants are taken, 512 refused");
	free(err);
	err = NULL;
	sweep_free(sw);

	/* --link: sweeps that vary together, value by value */
	sw = sweep_new();
	TAP_OK(sweep_add_link(sw, "network.linear, network.linear_alpha", &err) == 0 &&
		       sweep_add_axis(sw, "train.lr=1e-4,2e-4", &err) == 0 &&
		       sweep_add_axis(sw, "network.linear=8,16,32", &err) == 0 &&
		       sweep_add_axis(sw, "network.linear_alpha=4,8,16", &err) == 0 && sweep_check_links(sw, &err) == 0,
	       "sweep: --link network.linear,network.linear_alpha beside a sweep of train.lr");
	TAP_INT_EQ((int)sweep_count(sw), 6, "sweep: 2 x 3 variants, the linked pair counted once (not 18)");
	{
		json_t *lb = json_pack("{s:{s:s, s:[{s:{s:f}, s:{s:i, s:i}}]}}", "config", "name", "x", "process", "train", "lr",
				       1e-3, "network", "linear", 1, "linear_alpha", 1);
		char *desc = sweep_describe(sw, 4), *sfx = NULL;
		json_t *v = sweep_apply(sw, lb, 4, &sfx, NULL, &err);
		TAP_OK(v && json_integer_value(jpath_get(v, "config.process[0].network.linear")) == 16 &&
			       json_integer_value(jpath_get(v, "config.process[0].network.linear_alpha")) == 8,
		       "sweep: variant 4 takes the second value of both linked sweeps (16, 8)");
		TAP_STR_EQ(desc, "train.lr=2e-4, network.linear=16, network.linear_alpha=8",
			   "sweep: its description names the three values");
		TAP_STR_EQ(sfx, "lr2e-4_linear16_linear_alpha8", "sweep: and its suffix");
		free(desc);
		free(sfx);
		json_decref(v);
		json_decref(lb);
	}
	sweep_free(sw);
	{
		struct { const char *link, *a, *b, *want; } bad[] = {
			{ "network.linear", NULL, NULL, "two sweeps or more" },
			{ "network.linear,network.linear", NULL, NULL, "linked twice" },
			{ "network.linear,bad path", NULL, NULL, "not a config path" },
			{ "network.linear,network.linear_alpha", "network.linear=8,16", "network.linear_alpha=8,16,32",
			  "3 values, but --link ties it to --sweep network.linear, which has 2" },
			{ "network.linear,network.linear_alpha", "network.linear=8,16", NULL, "which no --sweep gives" },
		};
		for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			int rc;
			sw = sweep_new();
			rc = sweep_add_link(sw, bad[i].link, &err);
			if (!rc && bad[i].a)
				rc = sweep_add_axis(sw, bad[i].a, &err);
			if (!rc && bad[i].b)
				rc = sweep_add_axis(sw, bad[i].b, &err);
			if (!rc)
				rc = sweep_check_links(sw, &err);
			if (!(rc < 0 && err && strstr(err, bad[i].want)))
				printf("# --link %s: want \"%s\", got \"%s\"\n", bad[i].link, bad[i].want, err ? err : "no error");
			TAP_OK(rc < 0 && err && strstr(err, bad[i].want), "sweep: a bad --link refused with its reason");
			free(err);
			err = NULL;
			sweep_free(sw);
		}
	}
	/* linked sweeps of 20 values each make 20 variants: within the limit, though 20 x 20 is not */
	sw = sweep_new();
	sweep_add_link(sw, "a,b", &err);
	sweep_add_axis(sw, "a=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20", &err);
	TAP_OK(sweep_add_axis(sw, "b=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20", &err) == 0 && sweep_count(sw) == 20,
	       "sweep: two linked sweeps of 20 values: 20 variants, taken");
	free(err);
	err = NULL;
	sweep_free(sw);

	/* quoted values and values whose names would clash */
	sw = sweep_new();
	sweep_add_axis(sw, "sample.prompts[0]=\"a, b\",'a b'", &err);
	TAP_OK(!err && sweep_count(sw) == 2, "sweep: a comma inside quotes is part of the value");
	free(err);
	err = NULL;
	json_t *base2 = json_pack("{s:{s:s, s:[{s:{s:[s]}}]}}", "config", "name", "x", "process", "sample", "prompts", "p");
	char *s0 = NULL, *s1 = NULL;
	json_t *v0 = sweep_apply(sw, base2, 0, &s0, NULL, &err), *v1 = sweep_apply(sw, base2, 1, &s1, NULL, &err);
	TAP_OK(s0 && s1 && strcmp(s0, s1) != 0 && !strcmp(s0, "promptsa-b-1") && !strcmp(s1, "promptsa-b-2"),
	       "sweep: values whose suffixes read the same get their position");
	const char *pr = json_string_value(json_array_get(json_object_get(json_object_get(json_array_get(json_object_get(
		json_object_get(v0, "config"), "process"), 0), "sample"), "prompts"), 0));
	TAP_STR_EQ(pr, "a, b", "sweep: a quoted value is the string inside the quotes");
	free(s0);
	free(s1);
	json_decref(v0);
	json_decref(v1);
	sweep_free(sw);

	/* a sweep of config.name names the jobs itself; a path the config lacks is added and reported;
	 * one that crosses a list's end cannot be set */
	sw = sweep_new();
	sweep_add_axis(sw, "config.name=alpha,beta", &err);
	sweep_add_set(sw, "train.new_key=1", &err);
	v = sweep_apply(sw, base2, 1, &sfx, &added, &err);
	TAP_STR_EQ(json_string_value(json_object_get(json_object_get(v, "config"), "name")), "beta",
		   "sweep: a sweep of config.name is not suffixed again");
	TAP_STR_EQ(added, "config.process[0].train.new_key", "sweep: a path the config lacked is reported");
	free(sfx);
	free(added);
	json_decref(v);
	sweep_free(sw);
	sw = sweep_new();
	sweep_add_set(sw, "datasets[3].resolution=[512]", &err);
	v = sweep_apply(sw, base, 0, &sfx, &added, &err);
	TAP_OK(!v && err && strstr(err, "cannot set config.process[0].datasets[3].resolution"),
	       "sweep: an index past a list's end cannot be set");
	free(err);
	err = NULL;
	sweep_free(sw);
	json_decref(base);
	json_decref(base2);

	s = sweep_label("run 42/a", 0, 0);
	TAP_STR_EQ(s, "run-42-a", "sweep: the label from an Idempotency-Key");
	free(s);
	s = sweep_label("_x", 0, 0);
	TAP_STR_EQ(s, "k_x", "sweep: a label starts with a letter or digit");
	free(s);
	s = sweep_label(NULL, 1796342400LL, 0x1abcd);
	TAP_STR_EQ(s, "20261204-000000-abcd", "sweep: a label made from the time and 16 random bits");
	free(s);
}

/* rungctl usage's pieces: --since/--until as durations or times, and the printed report. */
static void test_usage(void)
{
	char *iso = NULL, *err = NULL;
	const int64_t now = 1796083200000LL; /* 2026-12-01T00:00:00Z */
	static const struct { const char *arg, *want; } good[] = {
		{ "7d", "2026-11-24T00:00:00Z" }, { "36h", "2026-11-29T12:00:00Z" }, { "90m", "2026-11-30T22:30:00Z" },
		{ "2w", "2026-11-17T00:00:00Z" }, { "30s", "2026-11-30T23:59:30Z" }, { "1d12h", "2026-11-29T12:00:00Z" },
		{ "2026-11-01T10:00:00+02:00", "2026-11-01T08:00:00Z" },
	};
	for (size_t i = 0; i < ARRAY_LEN(good); i++) {
		int rc = cmd_usage_time("--since", good[i].arg, now, &iso, &err);
		TAP_OK(rc == 0 && iso && !strcmp(iso, good[i].want), good[i].arg);
		free(iso);
		free(err);
	}
	static const char *const bad[] = { "7", "d", "7x", "-7d", "0d", "7dd", "1.5h", "yesterday", "2026-11-01",
					   "100000w" /* before 1970 */ };
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		int rc = cmd_usage_time("--since", bad[i], now, &iso, &err);
		TAP_OK(rc < 0 && !iso && err && strstr(err, "--since") && strstr(err, bad[i]), bad[i]);
		free(err);
	}
	json_t *doc = json_loads("{\"since\": \"2026-11-01T00:00:00+00:00\", \"until\": \"2026-11-02T00:00:00+00:00\","
				 " \"owners\": [{\"owner\": \"team-a\", \"gpu_seconds\": 10800, \"attempts\": 2, \"jobs\": 1,"
				 " \"by_outcome\": {\"succeeded\": 7200, \"oom\": 3600, \"failed\": 0, \"cancelled\": 0,"
				 " \"lost\": 0, \"preempted\": 1800, \"running\": 0}, \"jobs_succeeded\": 1, \"jobs_failed\": 0}],"
				 " \"total\": {\"gpu_seconds\": 10800, \"attempts\": 2, \"jobs\": 1, \"oom_gpu_seconds\": 3600}}",
				 0, NULL);
	char *s = cmd_usage_text(doc);
	TAP_OK(strstr(s, "OWNER") && strstr(s, "team-a  3.0        2.0        1.0  -"),
	       "usage: a row per owner in GPU hours, '-' for none");
	TAP_OK(strstr(s, "LOST  PREEMPTED  RUNNING") && strstr(s, "-     0.5        -"),
	       "usage: the GPU hours of preempted attempts in their own column");
	TAP_OK(strstr(s, "3.0 GPU hours in 2 attempts of 1 jobs; 1.0 of them (33%) in attempts that ended in an OOM\n"),
	       "usage: the total and the OOM share, and nothing about resumes when the report has none");
	free(s);
	json_object_set_new(json_object_get(doc, "total"), "resumed",
			    json_pack("{s:i, s:i, s:f}", "attempts", 2, "steps", 1800, "gpu_seconds", 5400.0));
	s = cmd_usage_text(doc);
	TAP_OK(strstr(s, "in attempts that ended in an OOM; resuming from checkpoints spared about 1.5 GPU hours (1800 "
			 "steps not run again, in 2 attempts)\n") != NULL, "usage: what resuming from checkpoints spared");
	free(s);
	json_object_set_new(json_object_get(doc, "total"), "resumed",
			    json_pack("{s:i, s:i, s:f}", "attempts", 0, "steps", 0, "gpu_seconds", 0.0));
	s = cmd_usage_text(doc);
	TAP_OK(strstr(s, "ended in an OOM\n") != NULL && !strstr(s, "by GPU model"),
	       "usage: no resume in the window: nothing said; one GPU model: no table of models");
	free(s);
	json_object_set_new(json_object_get(doc, "total"), "by_gpu",
			    json_pack("[{s:s, s:f, s:f}, {s:s, s:f}]", "model", "NVIDIA H200", "gpu_seconds", 7200.0,
				      "oom_gpu_seconds", 1800.0, "model", "NVIDIA A100 80GB", "gpu_seconds", 3600.0));
	json_object_set_new(json_array_get(json_object_get(doc, "owners"), 0), "by_gpu",
			    json_pack("{s:f}", "NVIDIA H200", 10800.0));
	s = cmd_usage_text(doc);
	TAP_OK(strstr(s, "ended in an OOM\n\nGPU hours by GPU model:\nOWNER       NVIDIA H200  NVIDIA A100 80GB\n"
			 "team-a      3.0          -\n") != NULL,
	       "usage: two GPU models: each owner's hours per model after the total, '-' for none");
	TAP_OK(strstr(s, "\n(OOM, all)  0.5          -\n") != NULL,
	       "usage: then the hours OOMs took on each model, all owners together");
	TAP_OK(!strstr(s, "quota:"), "usage: no quota in the report: nothing said of one");
	free(s);
	/* the owners' GPU-hour quotas (migration 035), each in its own window, after the rest */
	json_object_set_new(doc, "quotas",
			    json_loads("[{\"owner\": \"team-a\", \"gpu_hours\": 500, \"days\": 7, \"used_hours\": 512.3, "
				       "\"over\": true}, {\"owner\": \"team-b\", \"gpu_hours\": 100, \"days\": 1, "
				       "\"used_hours\": 25.0, \"over\": false}, {\"owner\": \"team-c\", \"gpu_hours\": 10, "
				       "\"days\": 30, \"used_hours\": null, \"over\": false}]", 0, NULL));
	s = cmd_usage_text(doc);
	TAP_OK(strstr(s, "\n\nquota: team-a used 512.3 of 500 GPU hours in the last 7 days: over its quota, none of its jobs "
			 "starts until older hours leave that window\nquota: team-b used 25.0 of 100 GPU hours in the last 1 "
			 "day (25%)\nquota: team-c may use 10 GPU hours in 30 days (not read yet)\n") != NULL,
	       "usage: each quota, over, under (its share) and not read yet, after the tables");
	free(s);
	{
		char *c1 = jobtext_quota_cell(json_array_get(json_object_get(doc, "quotas"), 0));
		char *c3 = jobtext_quota_cell(json_array_get(json_object_get(doc, "quotas"), 2));
		TAP_OK(!strcmp(c1, "512.3/500 in 7d") && !strcmp(c3, "?/10 in 30d"),
		       "quota cell: used/quota in the window, ? before the first read");
		free(c1);
		free(c3);
	}
	{
		json_t *one = json_pack("{s:i, s:i, s:i, s:f}", "attempts", 1, "steps", 40, "priced", 1, "gpu_seconds", 36.0);
		{
			json_t *rec = json_pack("{s:i, s:i}", "jobs", 7, "oom_attempts", 12);
			char *t = jobtext_recovered(rec);
			TAP_STR_EQ(t, "; 7 jobs succeeded after running out of GPU memory (12 OOM attempts before the config that fit)",
				   "jobtext_recovered: jobs and their OOM attempts");
			free(t);
			json_object_set_new(rec, "jobs", json_integer(1));
			json_object_set_new(rec, "oom_attempts", json_integer(1));
			t = jobtext_recovered(rec);
			TAP_STR_EQ(t, "; 1 job succeeded after running out of GPU memory (1 OOM attempt before the config that fit)",
				   "jobtext_recovered: singular");
			free(t);
			json_object_set_new(rec, "jobs", json_integer(0));
			t = jobtext_recovered(rec);
			TAP_STR_EQ(t, "", "jobtext_recovered: none, nothing");
			free(t);
			t = jobtext_recovered(NULL);
			TAP_STR_EQ(t, "", "jobtext_recovered: a report without it (a rungd before it), nothing");
			free(t);
			json_decref(rec);
		}
		s = jobtext_spared(one);
		TAP_STR_EQ(s, "; resuming from checkpoints spared about 0.0 GPU hours (40 steps not run again, in 1 attempt)",
			   "jobtext_spared: one attempt, singular");
		free(s);
		json_object_set_new(one, "attempts", json_integer(3));
		json_object_set_new(one, "steps", json_integer(1800));
		json_object_set_new(one, "priced", json_integer(2));
		json_object_set_new(one, "gpu_seconds", json_real(3240.0));
		s = jobtext_spared(one);
		TAP_STR_EQ(s, "; resuming from checkpoints spared 1800 steps in 3 attempts, about 0.9 GPU hours for the 2 that "
			      "timed their steps", "jobtext_spared: some attempts did not time their steps: the hours are theirs");
		free(s);
		json_object_set_new(one, "priced", json_integer(0));
		json_object_set_new(one, "gpu_seconds", json_real(0));
		s = jobtext_spared(one);
		TAP_STR_EQ(s, "; resuming from checkpoints spared 1800 steps (in 3 attempts)",
			   "jobtext_spared: none timed (a worker before it): the steps alone, no 0.0 hours");
		free(s);
		json_decref(one);
		s = jobtext_spared(NULL);
		TAP_STR_EQ(s, "", "jobtext_spared: no resumed object (a rungd before it): nothing");
		free(s);
	}
	json_decref(doc);
}

/* Which answers watch and logs --follow wait out: nothing, a 503, a proxy's 502 or 504; not a 500,
 * a 4xx or a success. */
static void test_transient(void)
{
	struct cli c = { .last_status = 0 };
	TAP_OK(cli_transient(&c, CLI_UNREACHABLE), "transient: no answer");
	static const long yes[] = { 502, 503, 504 }, no[] = { 200, 400, 404, 409, 429, 500, 501 };
	for (size_t i = 0; i < ARRAY_LEN(yes); i++) {
		c.last_status = yes[i];
		TAP_OK(cli_transient(&c, CLI_REFUSED) && cli_status_transient(yes[i]), "transient: 502, 503, 504");
	}
	for (size_t i = 0; i < ARRAY_LEN(no); i++) {
		c.last_status = no[i];
		TAP_OK(!cli_transient(&c, cli_exit_for_status(no[i])), "not transient: 2xx, 4xx, 500, 501");
	}
}

/* Scheduled jobs (migration 025): --in DURATION and --at TIME (common/when.h), the submit body they
 * make (cli/cmd_jobs cmd_submit_start), the two formats people read, and the sentence rungctl show,
 * watch and the verdict print (recovery/jobtext.h). TZ is set to a zone with summer time so that
 * HH:MM is read as a local time of day. */
static void test_scheduled(void)
{
	static const struct {
		const char *text;
		long long want; /* -1: refused */
	} ins[] = {
		{ "90m", 5400 }, { "2h", 7200 }, { "1d", 86400 }, { "1h30m", 5400 }, { "45s", 45 }, { "3600", 3600 },
		{ "1", 1 }, { "1d2h3m4s", 93784 }, { "365d", 31536000 }, { "31536000", 31536000 }, { "0090m", 5400 },
		{ "0", -1 }, { "0s", -1 }, { "366d", -1 }, { "31536001", -1 }, { "", -1 }, { "h", -1 }, { "2x", -1 },
		{ "2H", -1 }, { "1.5h", -1 }, { "-5m", -1 }, { " 5m", -1 }, { "5m ", -1 }, { "5 m", -1 }, { "30m1h", -1 },
		{ "1h1h", -1 }, { "1h30", -1 }, { "soon", -1 }, { "9999999999d", -1 },
	};
	for (size_t i = 0; i < ARRAY_LEN(ins); i++) {
		long long got = -2;
		const char *why = NULL;
		char name[96];
		int rc = when_parse_in(ins[i].text, &got, &why);
		snprintf(name, sizeof name, "--in \"%s\" -> %lld", ins[i].text, ins[i].want);
		if (ins[i].want < 0)
			TAP_OK(rc == -1 && why && *why && got == 0, name);
		else
			TAP_OK(rc == 0 && got == ins[i].want && !why, name);
	}
	{
		long long got;
		const char *why;
		TAP_OK(when_parse_in("366d", &got, &why) < 0 && strstr(why, "365d"), "--in: too long says the most");
		TAP_OK(when_parse_in("later", &got, &why) < 0 && strstr(why, "90m, 2h, 1d"), "--in: not a duration shows the forms");
	}
	setenv("TZ", "Europe/Berlin", 1);
	tzset();
	{
		/* now: 2026-12-01 20:00 in Berlin (19:00Z, winter time, +01:00) */
		const int64_t now = 1796151600000LL;
		int64_t got;
		const char *why;
		char buf[40];
		TAP_OK(when_parse_at("22:00", now, &got, &why) == 0 && got == now + 2 * 3600000LL, "--at 22:00: today's, local");
		TAP_OK(when_parse_at("19:30", now, &got, &why) == 0 && got == now + 23 * 3600000LL + 1800000LL,
		       "--at 19:30, past today: tomorrow's");
		TAP_OK(when_parse_at("20:00", now, &got, &why) == 0 && got == now + 24 * 3600000LL, "--at now's HH:MM: tomorrow's");
		TAP_OK(when_parse_at("2026-12-01T22:00:00Z", now, &got, &why) == 0 && got == now + 3 * 3600000LL,
		       "--at an RFC 3339 time in UTC");
		TAP_OK(when_parse_at("2026-12-01T23:00:00+01:00", now, &got, &why) == 0 && got == now + 3 * 3600000LL,
		       "--at an RFC 3339 time with an offset");
		TAP_OK(when_parse_at("2026-11-01T00:00:00Z", now, &got, &why) == 0 && got < now, "--at a past time is read (the server starts it now)");
		TAP_OK(when_parse_at("2028-01-01T00:00:00Z", now, &got, &why) < 0 && strstr(why, "365 days"), "--at past 365 days: refused");
		TAP_OK(when_parse_at("24:00", now, &got, &why) < 0 && strstr(why, "HH:MM"), "--at 24:00: refused, the forms shown");
		TAP_OK(when_parse_at("9:30", now, &got, &why) < 0, "--at 9:30 (one digit): refused");
		TAP_OK(when_parse_at("2026-12-01T22:00:00", now, &got, &why) < 0, "--at without a zone: refused");
		TAP_OK(when_parse_at("tonight", now, &got, &why) < 0, "--at tonight: refused");
		/* 2027-03-28 02:30 does not exist in Berlin (the clocks go from 02:00 to 03:00): the instant an
		 * hour after 02:00 winter time, 03:30 summer time, as cron runs a skipped time after the jump */
		TAP_OK(when_parse_at("02:30", 1806174000000LL /* 2027-03-27 20:00 +01:00 */, &got, &why) == 0 &&
			       got == 1806197400000LL /* 2027-03-28 03:30 +02:00 */,
		       "--at 02:30 on the night summer time starts: 03:30 summer time");
		when_format_utc(now + 3 * 3600000LL, buf, sizeof buf);
		TAP_STR_EQ(buf, "2026-12-01T22:00:00Z", "a start time in UTC to the second");
	}
	{
		static const struct {
			long long s;
			const char *want;
		} waits[] = { { -3, "0s" }, { 0, "0s" }, { 45, "45s" }, { 60, "1m00s" }, { 725, "12m05s" }, { 3600, "1h00m" },
			      { 7500, "2h05m" }, { 86399, "23h59m" }, { 86400, "1d00h" }, { 273600, "3d04h" }, { 31536000, "365d00h" } };
		for (size_t i = 0; i < ARRAY_LEN(waits); i++) {
			char buf[32], name[64];
			when_format_wait(waits[i].s, buf, sizeof buf);
			snprintf(name, sizeof name, "wait %lld s reads %s", waits[i].s, waits[i].want);
			TAP_STR_EQ(buf, waits[i].want, name);
		}
	}
	{
		const int64_t now = 1796151600000LL;
		struct cmd_submit_opts o = { .name = NULL };
		json_t *cfg = json_pack("{s:s}", "job", "extension"), *b;
		char buf[40], *why = NULL, *s;
		bool past;
		TAP_OK(cmd_submit_start("22:00", "2h", now, &o, buf, sizeof buf, &past, &why) < 0 && why && strstr(why, "not both"),
		       "submit: --at and --in together: a usage error");
		free(why);
		why = NULL;
		TAP_OK(cmd_submit_start(NULL, "2h30", now, &o, buf, sizeof buf, &past, &why) < 0 && why && !strncmp(why, "--in ", 5),
		       "submit: a bad --in names it");
		free(why);
		why = NULL;
		TAP_OK(cmd_submit_start("25:00", NULL, now, &o, buf, sizeof buf, &past, &why) < 0 && why && !strncmp(why, "--at ", 5),
		       "submit: a bad --at names it");
		free(why);
		why = NULL;
		TAP_OK(cmd_submit_start(NULL, "90m", now, &o, buf, sizeof buf, &past, &why) == 0 && o.start_in_s == 5400 && !o.run_after,
		       "submit: --in 90m is start_in_s 5400");
		b = cmd_submit_body(cfg, &o);
		s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
		TAP_STR_EQ(s, "{\"config\":{\"job\":\"extension\"},\"start_in_s\":5400}", "submit body: start_in_s");
		free(s);
		json_decref(b);
		o = (struct cmd_submit_opts){ .name = NULL };
		TAP_OK(cmd_submit_start("22:00", NULL, now, &o, buf, sizeof buf, &past, &why) == 0 && !past && o.run_after == buf &&
			       !strcmp(buf, "2026-12-01T21:00:00Z"),
		       "submit: --at 22:00 in Berlin is run_after 2026-12-01T21:00:00Z");
		b = cmd_submit_body(cfg, &o);
		s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
		TAP_STR_EQ(s, "{\"config\":{\"job\":\"extension\"},\"run_after\":\"2026-12-01T21:00:00Z\"}", "submit body: run_after");
		free(s);
		json_decref(b);
		{
			/* --after 3,4 --after-when ended (migration 036) */
			json_t *ids = cmd_after_ids("3,4", &why);
			struct cmd_submit_opts oa = { .after = ids, .after_when = "ended" };
			b = cmd_submit_body(cfg, &oa);
			s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
			TAP_STR_EQ(s, "{\"after\":[3,4],\"after_when\":\"ended\",\"config\":{\"job\":\"extension\"}}",
				   "submit body: after and after_when");
			free(s);
			json_decref(b);
			json_decref(ids);
			TAP_OK(after_when_ok("succeeded") && after_when_ok("ended") && after_when_ok("failed") &&
				       !after_when_ok("end") && !after_when_ok("") && !after_when_ok(NULL),
			       "after_when_ok: the three words, nothing else");
		}
		o = (struct cmd_submit_opts){ .name = NULL };
		TAP_OK(cmd_submit_start("2026-12-01T23:00:00+01:00", NULL, now, &o, buf, sizeof buf, &past, &why) == 0 &&
			       !strcmp(o.run_after, "2026-12-01T23:00:00+01:00"),
		       "submit: an RFC 3339 --at is sent as written (the same command, the same body)");
		TAP_OK(cmd_submit_start("2026-11-01T00:00:00Z", NULL, now, &o, buf, sizeof buf, &past, &why) == 0 && past,
		       "submit: a past --at is said to be past");
		json_decref(cfg);
	}
	unsetenv("TZ");
	tzset();
	{
		json_t *job = json_loads("{\"id\": 7, \"state\": \"scheduled\", \"attempts\": 0, \"run_after\": "
					 "\"2026-12-01T23:00:00.25+01:00\", \"starts_in_s\": 7500}", 0, NULL);
		char *t = jobtext_scheduled(job), *v;
		TAP_STR_EQ(t, "scheduled: starts at 2026-12-01T22:00:00Z (in 2h05m)", "jobtext: a scheduled job's start, in UTC, and the wait");
		free(t);
		v = story_verdict(job, NULL, "7");
		TAP_OK(v && strstr(v, "\n  scheduled: starts at 2026-12-01T22:00:00Z (in 2h05m)\n"), "the verdict's lines say it too");
		free(v);
		json_object_set_new(job, "starts_in_s", json_integer(0));
		t = jobtext_scheduled(job);
		TAP_STR_EQ(t, "scheduled: starts at 2026-12-01T22:00:00Z (due now: it is queued within a second)",
			   "jobtext: a due job");
		free(t);
		json_object_del(job, "starts_in_s");
		t = jobtext_scheduled(job);
		TAP_STR_EQ(t, "scheduled: starts at 2026-12-01T22:00:00Z", "jobtext: without starts_in_s (a list's JOB), the time alone");
		free(t);
		json_object_set_new(job, "state", json_string("queued"));
		t = jobtext_scheduled(job);
		TAP_OK(t == NULL, "jobtext: a queued job (started, with its run_after kept): nothing");
		free(t);
		json_decref(job);
	}
	{
		/* a job that runs after others (migration 033) */
		json_t *job = json_loads("{\"id\": 9, \"state\": \"scheduled\", \"run_after\": null, \"after\": [3, 4, 5], "
					 "\"waits_for\": [4, 5], \"waiting_for\": [{\"id\": 4, \"name\": \"a\", \"state\": \"running\"}, "
					 "{\"id\": 5, \"name\": \"b\", \"state\": \"queued\"}], \"starts_in_s\": null}", 0, NULL);
		char *t = jobtext_scheduled(job);
		TAP_STR_EQ(t, "scheduled: waits for jobs 4 (running), 5 (queued) to succeed", "jobtext: the jobs it waits for, with their states");
		free(t);
		json_object_set_new(json_array_get(json_object_get(job, "waiting_for"), 1), "state", json_string("failed"));
		t = jobtext_scheduled(job);
		TAP_STR_EQ(t, "scheduled: waits for jobs 4 (running), 5 (failed) to succeed; job 5 failed: this job starts only "
			      "once it is retried and succeeds, or when this one is started now", "jobtext: one failed: what holds it");
		free(t);
		/* after_when (migration 036): another ending waited for, and no failure holds it */
		json_object_set_new(job, "after_when", json_string("ended"));
		t = jobtext_scheduled(job);
		TAP_STR_EQ(t, "scheduled: waits for jobs 4 (running), 5 (failed) to end", "jobtext: after_when ended");
		free(t);
		json_object_set_new(job, "after_when", json_string("failed"));
		t = jobtext_scheduled(job);
		TAP_STR_EQ(t, "scheduled: waits for jobs 4 (running), 5 (failed) to fail or be cancelled", "jobtext: after_when failed");
		free(t);
		json_object_set_new(job, "after_when", json_string("succeeded"));
		t = jobtext_scheduled(job);
		TAP_OK(t && strstr(t, "to succeed; job 5 failed: this job starts only once"), "jobtext: after_when succeeded, said");
		free(t);
		json_object_set_new(job, "waits_for", json_pack("[i]", 4));
		json_object_set_new(job, "run_after", json_string("2026-12-01T22:00:00Z"));
		json_object_set_new(job, "starts_in_s", json_integer(3600));
		t = jobtext_scheduled(job);
		TAP_STR_EQ(t, "scheduled: waits for job 4 (running) to succeed, and not before 2026-12-01T22:00:00Z (in 1h00m)",
			   "jobtext: one job left, and a start time ahead");
		free(t);
		json_object_set_new(job, "starts_in_s", json_integer(0));
		json_object_del(job, "waiting_for");
		t = jobtext_scheduled(job);
		TAP_STR_EQ(t, "scheduled: waits for job 4 to succeed", "jobtext: a start time past no longer holds it; no states: bare ids");
		free(t);
		/* a job after a whole sweep: the first AFTER_LISTED named, then how many more; a failure past them still said */
		json_t *ids = json_array(), *seen = json_array();
		for (int k = 100; k < 140; k++) {
			json_array_append_new(ids, json_integer(k));
			json_array_append_new(seen, json_pack("{s:i, s:s, s:s}", "id", k, "name", "x", "state", k == 139 ? "failed" : "queued"));
		}
		json_object_set_new(job, "waits_for", ids);
		json_object_set_new(job, "waiting_for", seen);
		json_object_set_new(job, "run_after", json_null());
		t = jobtext_scheduled(job);
		TAP_OK(t && strstr(t, "waits for jobs 100 (queued), 101 (queued), ") && strstr(t, ", 131 (queued) and 8 more to succeed; ") &&
			       !strstr(t, "132 (queued)") && strstr(t, "job 139 failed: this job starts only once"),
		       "jobtext: 40 jobs: 32 named, \"and 8 more\", and the failure of the 40th said");
		free(t);
		json_decref(job);
	}
	{
		/* a start deadline (migration 039): said while the job has not started, by the caller's clock */
		json_t *job = json_loads("{\"id\": 5, \"state\": \"queued\", \"attempts\": 0, "
					 "\"start_by\": \"2026-12-01T22:00:00+00:00\"}", 0, NULL);
		int64_t at;
		util_time_parse("2026-12-01T20:55:00Z", &at);
		char *t = jobtext_deadline(job, at);
		TAP_STR_EQ(t, "must start by 2026-12-01T22:00:00Z (in 1h05m), else it is cancelled", "jobtext: a start deadline ahead");
		free(t);
		t = jobtext_deadline(job, at + 2 * 3600 * 1000);
		TAP_STR_EQ(t, "must start by 2026-12-01T22:00:00Z (due: it is cancelled within a second)", "jobtext: a deadline passed");
		free(t);
		json_object_set_new(job, "attempts", json_integer(1));
		t = jobtext_deadline(job, at);
		TAP_OK(t == NULL, "jobtext: a job that started: its deadline is spent, nothing said");
		free(t);
		json_object_set_new(job, "attempts", json_integer(0));
		json_object_set_new(job, "state", json_string("cancelled"));
		t = jobtext_deadline(job, at);
		TAP_OK(t == NULL, "jobtext: an ended job: nothing said");
		free(t);
		json_decref(job);
	}
	{
		json_t *job = json_loads("{\"id\": 4, \"state\": \"running\", \"awaited_by\": [9]}", 0, NULL);
		char *t = jobtext_awaited(job);
		TAP_STR_EQ(t, "job 9 waits for this one", "jobtext: who waits for a running job (whichever ending releases it)");
		free(t);
		json_object_set_new(job, "state", json_string("failed"));
		json_array_append_new(json_object_get(job, "awaited_by"), json_integer(11));
		t = jobtext_awaited(job);
		TAP_STR_EQ(t, "jobs 9, 11 wait for this one to succeed: they start only once this one is retried and succeeds (or "
			      "when each is started now); cancel them to drop them", "jobtext: a failed job that jobs wait for");
		free(t);
		json_object_set_new(job, "awaited_by", json_array());
		t = jobtext_awaited(job);
		TAP_OK(t == NULL, "jobtext: nobody waits: nothing");
		free(t);
		json_decref(job);
	}
	{
		char *why = NULL;
		json_t *ids = cmd_after_ids("12,13", &why);
		char *s = ids ? json_dumps(ids, JSON_COMPACT) : NULL;
		TAP_STR_EQ(s, "[12,13]", "submit --after 12,13: the ids");
		free(s);
		json_decref(ids);
		char *many = xstrdup("1"), *next;
		for (int k = 2; k <= AFTER_MAX + 1; k++) { /* one id more than a job may run after */
			next = xasprintf("%s,%d", many, k);
			free(many);
			many = next;
		}
		const char *const bad[] = { "", "x", "12,", ",12", "0", "-1", "12,,13", "1.5", "9007199254740992", "12 ", many };
		for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
			ids = cmd_after_ids(bad[i], &why);
			char nm[96];
			snprintf(nm, sizeof nm, "submit --after \"%.20s\": refused, saying what it takes", bad[i]);
			TAP_OK(!ids && why && strstr(why, "1 to 256 job ids"), nm);
			free(why);
			why = NULL;
		}
		free(many);
	}
	{
		/* a running job whose attempt is being stopped (migration 029) */
		json_t *job = json_loads("{\"id\": 7, \"state\": \"running\", \"stopping\": {\"attempt_id\": 12, \"number\": 3, "
					 "\"at\": \"2026-12-01T22:00:00Z\", \"for_job\": 41}}", 0, NULL);
		char *t = jobtext_stopping(job);
		TAP_STR_EQ(t, "stopping: attempt 3 is being stopped so that job 41 of its worker's own pool can run on its GPU "
			      "(preemption); the job is queued again unchanged when it ends", "jobtext: a preemption under way");
		free(t);
		json_object_set_new(json_object_get(job, "stopping"), "why", json_string("priority"));
		t = jobtext_stopping(job);
		TAP_STR_EQ(t, "stopping: attempt 3 is being stopped so that job 41, an urgent one, can run on its GPU "
			      "(preemption); the job is queued again unchanged when it ends",
			   "jobtext: a stop for an urgent job (rungd --preempt-priority)");
		free(t);
		json_object_set_new(json_object_get(job, "stopping"), "for_job", json_null());
		t = jobtext_stopping(job);
		TAP_STR_EQ(t, "stopping: attempt 3 is being stopped on request (requeue); the job is queued again unchanged "
			      "when it ends", "jobtext: a requeue under way");
		free(t);
		json_object_del(job, "stopping");
		t = jobtext_stopping(job);
		TAP_OK(t == NULL, "jobtext: a running job no stop was asked for: nothing");
		free(t);
		json_decref(job);
	}
}

int main(void)
{
	test_profiles();
	test_plan_text();
	test_classify_facts();
	test_args();
	test_commands();
	test_table();
	test_job_tables();
	test_output_line();
	test_diff();
	test_progress();
	test_story();
	test_story_start_lower();
	test_submit_body();
	test_sweep();
	test_usage();
	test_transient();
	test_token_expires();
	test_scheduled();
	return TAP_DONE();
}
