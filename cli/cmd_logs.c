/* `rungctl logs JOB`: what an attempt's trainer printed (GET /v1/jobs/{id}/log), page by page, as
 * the worker sent it; --follow goes on as it grows and on to the job's next attempts until the job
 * ends, as `tail -f` would. The text goes to stdout unchanged (a terminal redraws the progress
 * bar's '\r' lines); which attempt it is goes to stderr. --json: a document per attempt, its last
 * page's with the text of all its pages. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "util.h"

#define LOGS_UNREACHABLE_MS 60000 /* --follow gives up after this long without an answer (or only 503s) */

static bool job_ended(const json_t *page)
{
	const char *st = json_string_value(json_object_get(page, "job_state"));
	return st && (!strcmp(st, "succeeded") || !strcmp(st, "failed") || !strcmp(st, "cancelled"));
}

int cmd_logs(struct cli *c, int argc, char **argv)
{
	char *ops[1], *e = NULL;
	long long attempt = 0, interval = 1000, from = 0, shown = -1;
	int follow = 0;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "attempt", .type = ARGS_INT, .num = &attempt, .min = 1, .max = 2147483647 },
		{ .name = "follow", .type = ARGS_FLAG, .flag = &follow },
		{ .name = "interval-ms", .type = ARGS_INT, .num = &interval, .min = 50, .max = 60000 },
	};
	int rc = cli_args(c, cli_cmd_named("logs"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);
	json_t *all = NULL; /* --json: the first page, its text the whole log */
	int64_t last_ok = util_mono_ms();

	if (rc)
		return rc < 0 ? CLI_OK : rc;
	e = httpc_escape(ops[0]);
	for (;;) {
		json_t *page = NULL;
		char *path = attempt ? xasprintf("/v1/jobs/%s/log?attempt=%lld&from=%lld", e, attempt, from)
				     : xasprintf("/v1/jobs/%s/log?from=%lld", e, from);
		rc = cli_call(c, "GET", path, NULL, NULL, &page);
		free(path);
		if (rc != CLI_OK) {
			json_decref(page);
			if (follow && cli_transient(c, rc) && util_mono_ms() - last_ok < LOGS_UNREACHABLE_MS)
				goto wait;
			break;
		}
		last_ok = util_mono_ms();
		const json_t *a = json_object_get(page, "attempt");
		long long number = json_integer_value(json_object_get(a, "number"));
		const char *text = json_string_value(json_object_get(page, "text"));
		bool more = json_is_true(json_object_get(page, "more"));
		bool running = !strcmp(json_string_value(json_object_get(a, "state")) ?: "", "running");
		if (json_is_object(a) && !attempt)
			attempt = number; /* the latest when asked for none: stay with it */
		if (json_is_object(a) && number != shown && !c->json) {
			fprintf(c->err, "==> job %s attempt %lld (%s) <==\n", ops[0], number,
				json_string_value(json_object_get(a, "state")) ?: "?");
			shown = number;
		}
		if (c->json) {
			if (!all)
				all = json_incref(page);
			else {
				char *t = util_concat(json_string_value(json_object_get(all, "text")), text ?: "", NULL);
				json_object_set_new(all, "text", json_string(t));
				json_object_set(all, "next", json_object_get(page, "next"));
				json_object_set(all, "more", json_object_get(page, "more"));
				json_object_set(all, "attempt", json_object_get(page, "attempt"));
				json_object_set(all, "job_state", json_object_get(page, "job_state"));
				json_object_set(all, "attempts", json_object_get(page, "attempts"));
				free(t);
			}
		} else if (text && *text) {
			fputs(text, c->out);
			fflush(c->out);
		}
		from = json_integer_value(json_object_get(page, "next"));
		if (more) {
			json_decref(page);
			continue;
		}
		if (!follow) {
			json_decref(page);
			break;
		}
		long long started = json_integer_value(json_object_get(page, "attempts"));
		if (!running && started > (json_is_object(a) ? number : attempt - 1) && attempt) {
			/* ended (or never started: released), and recovery started another: on to it */
			attempt = (json_is_object(a) ? number : attempt) + 1;
			from = 0;
			if (c->json && all) { /* --json: one document per attempt */
				cli_print_json(c, all);
				json_decref(all);
				all = NULL;
			}
			json_decref(page);
			continue;
		}
		if (!running && job_ended(page)) {
			json_decref(page);
			break;
		}
		json_decref(page);
wait:;
		struct timespec ts = { interval / 1000, (interval % 1000) * 1000000L };
		nanosleep(&ts, NULL); /* the polling cadence, not a synchronisation */
	}
	if (c->json && all && rc == CLI_OK)
		cli_print_json(c, all);
	json_decref(all);
	free(e);
	return rc;
}
