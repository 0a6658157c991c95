/* The job commands of rungctl (submit, jobs, show, attempts, events, cancel, retry, priority,
 * watch; declared in cli.h) and the pure pieces they are made of, exported for unit tests. */
#ifndef RUNG_CMD_JOBS_H
#define RUNG_CMD_JOBS_H

#include <stddef.h>
#include <jansson.h>

struct cmd_submit_opts {
	const char *name;               /* --name or NULL */
	int has_priority;
	long long priority;             /* --priority */
	int no_scale_up;                /* --no-scale-up */
	long long max_attempts;         /* --max-attempts, 0 when not given */
	long long validate_steps;       /* --validate-steps, 0 when not given */
	const json_t *labels;           /* --labels, parsed (labels_parse), or NULL */
};

/* The POST /v1/jobs body {"config": config, "name"?, "priority"?, "labels"?, "recovery"?: {...}}
 * ("recovery" only when an option sets a key of it; "labels" only when some were given). config is borrowed (incref'd into the body). New reference. */
json_t *cmd_submit_body(const json_t *config, const struct cmd_submit_opts *o);

struct cli;
struct sweep;

/* The --set (sets) and --sweep (sweeps) options of `rungctl CMD` read into a new sweep (sweep.h) the
 * caller frees; NULL after printing why to c->err (a usage error, exit 2). */
struct sweep *cmd_sweep_read(struct cli *c, const char *cmd, const char *const *sets, size_t n_sets,
	const char *const *sweeps, size_t n_sweeps);

/* One attempt's value under key, falling back to its facts (heartbeats fill phase/step on the attempt,
 * the finish report fills facts.phase/last_step). Borrowed, may be NULL. */
const json_t *cmd_attempt_field(const json_t *attempt, const char *key, const char *facts_key);

/* The GET path of `rungctl jobs`: /v1/jobs with ?state=&owner=&kind=&label= for those given (each
 * percent-encoded; NULL: left out) and limit= when limit > 0. Heap string, the caller frees. */
char *cmd_jobs_path(const char *state, const char *owner, const char *kind, const char *label, long long limit);

/* Tables as `rungctl jobs` and `rungctl attempts` print them; heap strings the caller frees. */
char *cmd_jobs_table(const json_t *jobs);
char *cmd_attempts_table(const json_t *attempts);

#endif
