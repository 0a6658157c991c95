/* rungctl's shared plumbing (see cli.h): the command table, global help, option handling, and the
 * single place where an HTTP answer becomes an exit code and an error message. */
#include "cli.h"
#include "cmd_profiles.h"
#include "cmd_token.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

const struct cli_cmd cli_cmds[] = {
	{ "submit", "submit CONFIG.yaml|CONFIG.json [CONFIG...] [--name N] [--priority N] [--no-scale-up] [--max-attempts N] "
		"[--validate-steps N] [--idempotency-key K] [--labels K=V,K=V] [--pool NAME] [--at TIME|--in DURATION] "
		"[--start-by TIME|--start-within DURATION] "
		"[--after JOB,JOB [--after-when succeeded|ended|failed]] [--then FILE [--then-when W]] [--set PATH=VALUE]... [--sweep PATH=V1,V2,...]... [--link PATH,PATH,...]... [--dry-run]",
		"Reads an AI Toolkit config (YAML as AI Toolkit reads it, or JSON), submits it as a job and prints\n"
		"the job id (--json: the job). Several CONFIGs (up to 64): a job each, in that order, sent as one\n"
		"batch, stored all or none (--set and --sweep apply to each; --name does not go with them). --labels: up to 16 labels (team=vision,project=portraits), shown with\n"
		"the job, sent in its webhooks, and a filter of `jobs --label`.\n"
		"--pool NAME: the worker pool the job runs in (only workers started with --pool NAME take it;\n"
		"default: the pool `default`); with --sweep every job of the sweep gets it.\n"
		"--at TIME / --in DURATION: the job waits, scheduled, and starts then (until then no GPU runs it;\n"
		"`rungctl start JOB` starts it at once): TIME is an RFC 3339 time with its zone\n"
		"(2026-12-01T22:00:00Z, 2026-12-01T23:00:00+01:00; a past one starts now) or a local time of day\n"
		"HH:MM (22:00: the next one); DURATION is 90m, 2h, 1d, 1h30m, 45s or bare seconds, at most 365d.\n"
		"--start-by TIME / --start-within DURATION: a start deadline, read as --at and --in are: a job that has\n"
		"not started by then is cancelled (once it started, the deadline is spent; a retry clears it).\n"
		"--after JOB,JOB: the job waits, scheduled, until those jobs (up to 256, a submitter's own) have all\n"
		"succeeded, then is queued (with --at/--in, not before that time either); one that failed or was\n"
		"cancelled holds it until it is retried and succeeds (`rungctl show` says which; `rungctl start JOB`\n"
		"starts it at once without them). --after-when ended: once they have all ended, whatever the\n"
		"outcome (succeeded, failed or cancelled: a report, a cleanup, a comparison of runs); --after-when\n"
		"failed: only once they have all failed or were cancelled (a fallback), and a success of one of them\n"
		"cancels this job; succeeded is the default.\n"
		"--then FILE: once the jobs are submitted, submits FILE's config as a job that runs after all of them\n"
		"(at most 256), with their labels (a sweep's too) and pool, once they have all ended, however they\n"
		"ended (--then-when succeeded|failed to ask for that instead): a sweep's comparison, a report.\n"
		"--set PATH=VALUE changes one value first (VALUE read as YAML: 1e-4, true, [512, 768]; PATH under the\n"
		"first process unless it starts with job, config or meta: train.lr, network.linear,\n"
		"datasets[0].resolution, config.name). --sweep PATH=V1,V2,... submits one job per value, several\n"
		"sweeps every combination (at most 256 jobs), except sweeps tied by --link PATH,PATH, which vary\n"
		"together value by value (--sweep network.linear=8,16 --sweep network.linear_alpha=8,16 --link\n"
		"network.linear,network.linear_alpha: 2 jobs, not 4): each job's config.name (its output folder) and --name\n"
		"get the values as a suffix (_lr2e-4_linear32), and all carry the label sweep=ID (--labels sweep=ID\n"
		"to choose it; else made from --idempotency-key K when given). A sweep (with the --then job) is one\n"
		"batch, stored all or none: a job rungd refuses stores none of them; sent again under the same\n"
		"--idempotency-key it answers the same jobs. Prints one id per line, the sweep on\n"
		"stderr. --dry-run prints each job's name and values and sends nothing.", cmd_submit },
	{ "jobs", "jobs [--state S] [--owner NAME] [--kind image|video] [--label K=V,K=V] [--pool NAME] [--limit N]",
		"Lists jobs, newest first: --state queued|scheduled|running|succeeded|failed|cancelled; --owner:\n"
		"the jobs of one token name (support/admin; a submitter sees only its own); --kind image|video;\n"
		"--label: the jobs that carry every one of these labels; --pool: the jobs of one worker pool (a\n"
		"POOL column appears when a listed job is outside the pool `default`).", cmd_jobs },
	{ "show", "show JOB", "Shows a job: summary (with its worker pool); for a finished job its verdict (a success\n"
		"setting by setting: target, achieved, why a setting was given up), for a queued one how many jobs\n"
		"are ahead of it in the queue (and why no GPU takes it: in its pool or at all), for a scheduled one\n"
		"when it starts; each attempt with the\n"
		"config change it led to, against its own config; target vs current config (changed paths);\n"
		"recovery state.", cmd_show },
	{ "attempts", "attempts JOB", "Lists a job's attempts, oldest first.", cmd_attempts },
	{ "events", "events JOB", "Lists a job's events, oldest first.", cmd_events },
	{ "cancel", "cancel JOB | cancel --label K=V,K=V|--owner NAME|--kind image|video|--pool NAME|--after JOB "
		"[--state queued|scheduled|running|active] [--limit N] [--dry-run]",
		"Cancels a job (a running one stops at its next heartbeat), or the jobs that match every filter given,\n"
		"oldest first, at most --limit (1000): those not started yet by default (queued or scheduled),\n"
		"--state scheduled (only those waiting for their start time or for other jobs), running, or active\n"
		"(all three); --after JOB: the jobs that wait for JOB (however they wait), directly or through others (drop\n"
		"what a failed job holds up); --dry-run lists them and changes nothing. A submitter cancels only its own.",
		cmd_cancel },
	{ "retry", "retry JOB [--from current|target] [--note TEXT]",
		"Queues a failed or cancelled job again (its owner, support, admin), with fresh budgets: from the\n"
		"config recovery reached (default), or from the submitted one (--from target); --note says why\n"
		"(kept in the event; it resolves the job's own open escalations, not those about a GPU or host).", cmd_retry },
	{ "requeue", "requeue JOB [--note TEXT]", "Stops a running job's attempt at its next heartbeat and queues the job again\n"
		"unchanged (its owner, support, admin): it resumes from its checkpoint, and the stopped attempt does not\n"
		"count against its budgets.", cmd_requeue },
	{ "priority", "priority JOB PRIORITY", "Changes a queued, scheduled or running job's priority (lower runs first;\n"
		"a scheduled job's counts from its start time, a running job's when it is queued again).", cmd_priority },
	{ "pool", "pool JOB NAME", "Moves a job to another worker pool (any job but a succeeded one): a queued job is claimed\n"
		"from the new pool's queue, a running one's attempt goes on where it is and the job is queued in the\n"
		"new pool if it is queued again, a failed or cancelled one runs there when retried.", cmd_pool },
	{ "start", "start JOB", "Starts a scheduled job now, before its start time (its owner, support, admin): it is queued\n"
		"at once and waits only for a GPU. A job that is not scheduled is refused (exit 1).", cmd_start },
	{ "after", "after JOB JOB,JOB [--when succeeded|ended|failed] | after JOB --none", "Sets again the jobs a job not "
		"started yet runs after (its owner,\nsupport, admin): it waits, scheduled, until they have all succeeded, or "
		"as --when says\n(submit's --after-when; without --when the job's own is kept; --none: for none; it is queued\n"
		"unless its start time is ahead). A job that names this one, directly or through others, is refused\n"
		"(both would wait forever), as is a job that started (exit 1).", cmd_after },
	{ "watch", "watch JOB", "Follows a job until it ends: each attempt's start and ending with the config change\n"
		"it led to (against its own config), the verdict as show prints it. Each line is written as it happens,\n"
		"also into a pipe; in a terminal a progress line shows the speed between the last two step reports\n"
		"and the ETA. Exits 0 when the job succeeded, 1 otherwise.", cmd_watch },
	{ "wait", "wait JOB... | wait --label K=V,K=V [--interval-ms N]",
		"Waits until every job named (up to 64), or every job that carries these labels (a sweep's: --label\n"
		"sweep=ID, its --then job too), has ended: prints each ending as it is seen (a failure with its\n"
		"reason), then how many succeeded, failed and were cancelled. Exits 0 when all succeeded, 1\n"
		"otherwise, 4 when no job carries the labels. --interval-ms: how often it asks (2000). --json:\n"
		"the jobs as they ended.", cmd_wait },
	{ "logs", "logs JOB [--attempt N] [--follow] [--interval-ms N]",
		"Prints what the trainer of the job's latest attempt (--attempt N: that one) printed, as its worker\n"
		"sent it (every --log-interval-ms of the worker, 10 s by default), with the progress bar's\n"
		"overwritten redraws left out. --follow: goes on as it grows, and on to the job's next attempts,\n"
		"until the job ends. Which attempt it is goes to stderr; --json: the last page of each attempt, with\n"
		"the whole text.", cmd_logs },
	{ "escalations", "escalations [--state open|acknowledged|resolved]", "Lists escalations.", cmd_escalations },
	{ "report", "report ESC", "Prints an escalation's report (Markdown).", cmd_report },
	{ "ack", "ack ESC --note TEXT", "Acknowledges an escalation.", cmd_ack },
	{ "resolve", "resolve ESC --note TEXT", "Resolves an escalation.", cmd_resolve },
	{ "workers", "workers", "Lists workers: the pool and the version each registered with (- : a worker from\n"
		"before versions), the pools it borrows from (BORROWS, in its order; - : none), and a\n"
		"drained one with who drained it and why.", cmd_workers },
	{ "drain", "drain WORKER [--note TEXT] [--requeue]", "Drains a worker (support/admin): its GPUs get no new lease, its running\n"
		"attempts go on to their end (with --requeue they stop at their next heartbeat and their jobs are queued\n"
		"again unchanged, to resume from their checkpoints elsewhere), and it stays drained across its restarts\n"
		"until resumed.", cmd_drain },
	{ "resume", "resume WORKER [--note TEXT]", "Puts a drained worker back in service (support/admin).", cmd_resume },
	{ "gpus", "gpus", "Lists GPUs and their health.", cmd_gpus },
	{ "owners", "owners", "Lists who runs and waits per owner (the token that submitted the jobs: a team): running,\n"
		"queued and scheduled jobs (waiting for their start time), with its limit (rungctl token limit), the\n"
		"busiest first (support/admin).", cmd_owners },
	{ "pools", "pools", "Lists the worker pools in use (support/admin): each pool's queued, scheduled and running\n"
		"jobs, its workers and GPUs (and those drained), the GPUs of other pools' workers that borrow from it and\n"
		"their pools, the pools its own workers borrow from, and its largest usable GPU.", cmd_pools },
	{ "usage", "usage [--since 7d|TIME] [--until TIME] [--owner NAME] [--label K=V,K=V]",
		"GPU time per owner (the token that submitted the jobs: a team) from --since (a duration before\n"
		"now: 90m, 36h, 7d, 2w, or an RFC 3339 time; default a week before --until) to --until (default now):\n"
		"GPU hours in all and by how the attempts ended (succeeded, OOM, other failures, cancelled, lost,\n"
		"still running), attempts, and jobs that succeeded or failed in the window; the total says how much\n"
		"went to attempts that ended in an OOM. --label: only the jobs that carry these labels (a sweep's\n"
		"cost: --label sweep=ID). A submitter sees only its own.", cmd_usage },
	{ "version", "version", "Prints rungctl's version and the version and schema (the highest migration applied) of\n"
		"the rungd at --url, from its /healthz (--json: both).", cmd_version },
	{ "gpu release", "gpu release UUID", "Returns a suspect or quarantined GPU to service.", cmd_gpu_release },
	{ "profiles reset", "profiles reset ARCH GPU_CLASS_MIB [--note TEXT]",
		"Forgets what rung learned of ARCH on GPUs of that memory class (support/admin): attempts made\n"
		"there that ended before now no longer count; --note says why (kept in the event).", cmd_profiles_reset },
	{ "profiles", "profiles [--arch A]", "Lists what the memory model learned per (arch, GPU memory class):\n"
		"attempts it rests on, fits and OOMs, margin, usable memory, ceilings (support/admin).", cmd_profiles },
	{ "plan", "plan CONFIG.yaml|CONFIG.json [--gpu-mib N] [--no-scale-up] [--validate-steps N] [--set PATH=VALUE]... "
		"[--pool NAME]",
		"Asks what rung would do with a config before it is submitted (nothing is stored; --set as submit's): for each GPU\n"
		"size of the pool it would be submitted to (--pool; default: the default pool) and --gpu-mib N, the memory\n"
		"model's estimate of the config and what a first attempt would run there: as submitted, lower (the rungs\n"
		"and config changes), or wait for a bigger GPU.", cmd_plan },
	{ "token create", "token create --role submitter|worker|support|admin [--name N] [--expires DURATION]",
		"Creates an API token (admin) and prints it on stdout; it is shown only this once. --expires: it\n"
		"stops working by itself after DURATION: 90d, 12h, 1h30m, 2w, 3600s or bare seconds, 60 s to 3650d\n"
		"(default: never).", cmd_token_create },
	{ "token list", "token list", "Lists API tokens (admin): names, roles, times, expiry (never, when, or\n"
		"expired), never the secrets.",
		cmd_token_list },
	{ "token revoke", "token revoke ID", "Revokes an API token (admin); the server refuses it at once.",
		cmd_token_revoke },
	{ "token limit", "token limit ID [--max-running N|none] [--gpu-hours H|none] [--pool NAME] [--days D]",
		"Sets how many of a token's jobs may run at once (admin): the claim passes over its queued jobs\n"
		"while that many run (0: none starts; none: no limit). With --pool, how many of its jobs of that pool\n"
		"may (wherever they run), beside the limit over every pool; the other pools' limits stay as they are.\n"
		"--gpu-hours: a quota of GPU hours over the last --days days (default 7): while its jobs used that\n"
		"much, none starts (read every --quota-interval-ms of rungd); with --pool, a quota of its jobs of that\n"
		"pool alone (--pool h200 --gpu-hours 500: 500 H200 hours a week), over the same window. Running jobs\n"
		"are not stopped.", cmd_token_limit },
	{ "token pools", "token pools ID NAME,NAME|any",
		"Sets the worker pools a token may use (admin): its owner's jobs may be submitted or moved only to\n"
		"them, and a worker registering with it may join only them (any: every pool). Jobs already in another\n"
		"pool stay there.", cmd_token_pools },
	{ "token expiry", "token expiry ID DURATION|never",
		"Sets when a token expires (admin): DURATION from now (90d, 12h, 1h30m, 2w, 3600s or bare seconds,\n"
		"60 s to 3650d), or never. A token that expired works again (its hosts need no new secret); a\n"
		"revoked one stays revoked.", cmd_token_expiry },
	{ "classify", "classify [--config FILE] [--exit-code N] [--signal N] < LOGFILE",
		"Prints as JSON what rung makes of a trainer log read from stdin: the facts the worker would\n"
		"report and the failure class the policy gives them, without a server. --config: the job's AI\n"
		"Toolkit config; --exit-code/--signal: how the trainer ended (default: 0 when the log shows a\n"
		"completed or stopped job, else 1).",
		cmd_classify },
	{ NULL, NULL, NULL, NULL },
};

const struct cli_cmd *cli_find(int argc, char **argv, int *words)
{
	for (const struct cli_cmd *k = cli_cmds; k->name; k++) {
		const char *sp = strchr(k->name, ' ');
		if (!sp && argc >= 1 && !strcmp(argv[0], k->name)) {
			*words = 1;
			return k;
		}
		if (sp && argc >= 2 && !strncmp(argv[0], k->name, (size_t)(sp - k->name))
			&& strlen(argv[0]) == (size_t)(sp - k->name) && !strcmp(argv[1], sp + 1)) {
			*words = 2;
			return k;
		}
	}
	return NULL;
}

const struct cli_cmd *cli_cmd_named(const char *name)
{
	for (const struct cli_cmd *k = cli_cmds; k->name; k++)
		if (!strcmp(k->name, name))
			return k;
	abort();
}

void cli_usage(FILE *f)
{
	fprintf(f, "usage: rungctl [--url URL] [--token TOKEN] COMMAND [ARGS] [--json] [--help]\n"
		"       rungctl --version    (prints \"rungctl VERSION\": this build's)\n\n"
		"Talks to rungd, the service that keeps AI Toolkit LoRA training jobs alive through CUDA\n"
		"out-of-memory failures.\n\ncommands:\n");
	for (const struct cli_cmd *k = cli_cmds; k->name; k++)
		fprintf(f, "  %s\n", k->usage);
	fprintf(f, "\noptions (every command):\n"
		"  --url URL      server (default: $RUNG_URL, else " CLI_DEFAULT_URL ")\n"
		"  --token TOKEN  bearer token (default: $RUNG_TOKEN)\n"
		"  --json         print the server's JSON (read commands)\n"
		"  --help         help for a command: rungctl COMMAND --help\n\n"
		"exit codes:\n"
		"  0  ok (watch: the job succeeded)\n"
		"  1  the server said no, or the job failed (watch)\n"
		"  2  usage error (bad arguments, unreadable or malformed config file)\n"
		"  3  cannot reach the server\n"
		"  4  not found (no such job, escalation or GPU)\n");
}

void cli_init(struct cli *c)
{
	*c = (struct cli){ .url = getenv("RUNG_URL"), .token = getenv("RUNG_TOKEN"), .out = stdout, .err = stderr };
	if (!c->url || !*c->url)
		c->url = CLI_DEFAULT_URL;
}

void cli_release(struct cli *c)
{
	httpc_free(c->http);
	c->http = NULL;
}

int cli_args(struct cli *c, const struct cli_cmd *cmd, const struct args_opt *opts, size_t n_opts,
	int argc, char **argv, char **operands, size_t n_min, size_t n_max)
{
	char *err = NULL;
	size_t n = 0;
	if (args_parse(opts, n_opts, argc, argv, operands, n_max, &n, &err) < 0) {
		fprintf(c->err, "rungctl %s: %s\nusage: rungctl %s\n", cmd->name, err, cmd->usage);
		free(err);
		return CLI_USAGE;
	}
	if (c->help) {
		fprintf(c->out, "usage: rungctl %s\n\n%s\n\nAlso: --url URL, --token TOKEN, --json, --help "
			"(see rungctl --help for exit codes).\n", cmd->usage, cmd->help);
		return -1;
	}
	if (n < n_min) {
		fprintf(c->err, "rungctl %s: missing argument\nusage: rungctl %s\n", cmd->name, cmd->usage);
		return CLI_USAGE;
	}
	return 0;
}

int cli_exit_for_status(long status)
{
	if (status >= 200 && status < 300)
		return CLI_OK;
	return status == 404 ? CLI_NOTFOUND : CLI_REFUSED;
}

int cli_call(struct cli *c, const char *method, const char *path, const json_t *body, const char *idem_key,
	json_t **answer)
{
	json_t *a = NULL;
	char *err = NULL;
	long status = 0;
	int rc;

	if (answer)
		*answer = NULL;
	if (!c->http)
		c->http = httpc_new(c->url, c->token);
	c->last_status = 0;
	if (httpc_call(c->http, method, path, body, idem_key, &status, &a, &err) < 0) {
		if (!c->unreachable_said)
			fprintf(c->err, "rungctl: cannot reach the server: %s\n", err);
		c->unreachable_said = 1;
		free(err);
		return CLI_UNREACHABLE;
	}
	c->unreachable_said = 0;
	c->last_status = status;
	rc = cli_exit_for_status(status);
	if (cli_status_transient(status) && c->busy_said) { /* still the same outage: said once */
		json_decref(a);
		return rc;
	}
	c->busy_said = cli_status_transient(status);
	if (rc != CLI_OK && c->quiet_unsupported && (status == 404 || status == 405 || status == 413)) {
		json_decref(a);
		return rc;
	}
	if (rc != CLI_OK) {
		const char *code = json_string_value(json_object_get(a, "error"));
		const char *msg = json_string_value(json_object_get(a, "message"));
		const char *field = json_string_value(json_object_get(a, "field"));
		fprintf(c->err, "rungctl: %ld %s: %s", status, code ? code : "error", msg ? msg : "(no message)");
		if (field)
			fprintf(c->err, " (field: %s)", field);
		fputc('\n', c->err);
		json_decref(a);
		return rc;
	}
	if (answer)
		*answer = a;
	else
		json_decref(a);
	return CLI_OK;
}

int cli_status_transient(long status)
{
	/* 503: rungd's database is down or it is shutting down; 502 and 504: the proxy in front of the
	 * replicas has none to send to (a rolling restart) or one that did not answer in time */
	return status == 502 || status == 503 || status == 504;
}

int cli_transient(const struct cli *c, int rc)
{
	return rc == CLI_UNREACHABLE || (rc == CLI_REFUSED && cli_status_transient(c->last_status));
}

void cli_print_json(struct cli *c, const json_t *v)
{
	json_dumpf(v ? v : json_null(), c->out, JSON_INDENT(2) | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
	fputc('\n', c->out);
}

json_t *cli_list(const json_t *answer, const char *key)
{
	if (json_is_array(answer))
		return (json_t *)answer;
	json_t *l = json_object_get(answer, key);
	return json_is_array(l) ? l : NULL;
}
