/* The job commands of rungctl (submit, jobs, show, attempts, events, cancel, retry, priority, pool,
 * start, watch; declared in cli.h) and the pure pieces they are made of, exported for unit tests. */
#ifndef RUNG_CMD_JOBS_H
#define RUNG_CMD_JOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct cmd_submit_opts {
	const char *name;               /* --name or NULL */
	int has_priority;
	long long priority;             /* --priority */
	int no_scale_up;                /* --no-scale-up */
	long long max_attempts;         /* --max-attempts, 0 when not given */
	long long validate_steps;       /* --validate-steps, 0 when not given */
	const json_t *labels;           /* --labels, parsed (labels_parse), or NULL */
	const char *run_after;          /* --at as an RFC 3339 time (cmd_submit_start), or NULL */
	long long start_in_s;           /* --in in seconds, 0 when not given */
	const char *pool;               /* --pool (common/pool.h) or NULL: the server's default pool */
	const json_t *after;            /* --after, parsed (cmd_after_ids), or NULL */
	const char *after_when;         /* --after-when (common/after.h: succeeded, ended, failed) or NULL */
	const char *start_by;           /* --start-by as an RFC 3339 time (cmd_submit_start), or NULL */
	long long start_within_s;       /* --start-within in seconds, 0 when not given */
};

/* Reads IDS ("12" or "12,13": the jobs that must succeed first, migration 033; `submit --after` and
 * `after JOB IDS`) into a new JSON list of ids (common/after.h); NULL with *why (heap: "IDS: give 1 to
 * 256 job ids ...", the caller names its option) when it is not 1 to AFTER_MAX (256) ids from 1. */
json_t *cmd_after_ids(const char *ids, char **why);

/* The POST /v1/jobs body {"config": config, "name"?, "priority"?, "labels"?, "pool"?, "run_after"? |
 * "start_in_s"?, "start_by"? | "start_within_s"?, "after"?, "after_when"?, "recovery"?: {...}} ("recovery" only when an option sets a key of it; "labels" only
 * when some were given; "pool" only when --pool was; the start time only when --at or --in was;
 * "after" only when --after was, "after_when" when --after-when was).
 * config is borrowed (incref'd into the body). New reference. */
json_t *cmd_submit_body(const json_t *config, const struct cmd_submit_opts *o);

/* Reads `submit`'s --at TIME and --in DURATION (each may be NULL) into o->run_after and
 * o->start_in_s (common/when.h): TIME as given when it is an RFC 3339 time, else ("HH:MM") the next
 * such local time after now_ms, written in UTC into buf (n >= 24), which o->run_after then points
 * at. Returns 0; *past true when TIME has already passed (the server starts the job at once); or -1
 * with *why (heap, for the usage line) when a value is bad or both are given. */
int cmd_submit_start(const char *at, const char *in, int64_t now_ms, struct cmd_submit_opts *o, char *buf, size_t n,
		     bool *past, char **why);

struct cli;
struct sweep;

/* The --set (sets), --sweep (sweeps) and --link (links) options of `rungctl CMD` read into a new
 * sweep (sweep.h) the caller frees; NULL after printing why to c->err (a usage error, exit 2). */
struct sweep *cmd_sweep_read(struct cli *c, const char *cmd, const char *const *sets, size_t n_sets,
	const char *const *sweeps, size_t n_sweeps, const char *const *links, size_t n_links);

/* One attempt's value under key, falling back to its facts (heartbeats fill phase/step on the attempt,
 * the finish report fills facts.phase/last_step). Borrowed, may be NULL. */
const json_t *cmd_attempt_field(const json_t *attempt, const char *key, const char *facts_key);

/* The GET path of `rungctl jobs`: /v1/jobs with ?state=&owner=&kind=&label=&pool= for those given
 * (each percent-encoded; NULL: left out) and limit= when limit > 0. Heap string, the caller frees. */
char *cmd_jobs_path(const char *state, const char *owner, const char *kind, const char *label, const char *pool,
		    long long limit);

/* Tables as `rungctl jobs` and `rungctl attempts` print them; heap strings the caller frees. The
 * jobs table has a PRIORITY column when a job in it has a priority other than the default (100), and
 * a POOL column when one names a pool other than "default" (a plain fleet reads as before). */
char *cmd_jobs_table(const json_t *jobs);
char *cmd_attempts_table(const json_t *attempts);

#endif
