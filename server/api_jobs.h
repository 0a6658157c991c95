/* Handlers of /v1/jobs: submit (validation, recovery defaults, the start time, Idempotency-Key),
 * get, list (keyset pagination; filters by state, owner, kind), attempts, events, cancel, retry,
 * priority, start.
 * Each is one SQL statement. */
#ifndef RUNG_API_JOBS_H
#define RUNG_API_JOBS_H

#include <stdbool.h>

#include <jansson.h>
#include <libpq-fe.h>

struct hreq;
struct auth_who;

/* Each handler answers h exactly once (possibly later, from a database callback). */
void api_jobs_submit(struct hreq *h);
/* POST /v1/jobs/batch {"jobs": [ENVELOPE, ...]}: 1 to API_JOBS_BATCH_MAX jobs, each as POST /v1/jobs
 * takes its envelope, plus "after_items" (indexes of earlier jobs of the batch it runs after), stored
 * all or none in one statement (rung_submit_group). 201 {"jobs": [JOB, ...]} in order; 200 the same
 * for a repeated Idempotency-Key (one key for the batch); else the first refusal, naming jobs[K].FIELD,
 * and nothing is stored. Each job counts against the token's submit rate (auth_submit_charge). */
void api_jobs_submit_batch(struct hreq *h);
#define API_JOBS_BATCH_MAX 500
void api_jobs_get(struct hreq *h);
void api_jobs_list(struct hreq *h);
void api_jobs_attempts(struct hreq *h);
void api_jobs_events(struct hreq *h);
void api_jobs_cancel(struct hreq *h);
#define API_JOBS_CANCEL_MAX 1000 /* jobs one POST /v1/jobs/cancel cancels at most */

/* POST /v1/jobs/cancel {"state"?: "queued" (default: not started yet, queued or scheduled) |
 * "scheduled" | "running" | "active" (all three), "owner"?, "label"?: "k=v,k=v", "kind"?, "pool"?,
 * "limit"?: 1..API_JOBS_CANCEL_MAX, "dry_run"?: bool}: cancels the matching jobs (a running one is told
 * to stop at its next heartbeat), oldest first, each as POST
 * /v1/jobs/{id}/cancel would; 200 {"ids", "more"} (dry_run: the ids it would cancel). owner and kind
 * follow the list's rule (a submitter's jobs only its own; 403 naming owner for another's); at least
 * one of owner, label, kind, pool must be given (400 otherwise: no filter would be every job). 400
 * naming state, owner, kind, label, pool, limit or dry_run. */
void api_jobs_cancel_matching(struct hreq *h);
/* Whether state is one a cancel of the matching jobs takes (above; the /ui/jobs/cancel form's too),
 * and the 400's message for one it does not. Pure. */
bool api_jobs_cancel_state_ok(const char *state);
#define API_JOBS_CANCEL_STATES \
	"state must be queued (not started yet: queued or scheduled), scheduled, running or active (all three)"
/* POST /v1/jobs/{id}/retry {"from"?: "current"|"target", "note"?}: a failed or cancelled job is
 * queued again with fresh budgets (sql/functions/22_job_ops.sql) and the waiters are woken; 400
 * naming from/note, 404, 409 invalid_transition for a job in any other state. */
void api_jobs_retry(struct hreq *h);
/* POST /v1/jobs/{id}/requeue {"note"?}: a running job's attempt is stopped at its next heartbeat and
 * the job queued again unchanged, outside its budgets (rung_requeue, sql/functions/44_preempt.sql);
 * 400 naming note, 404, 409 invalid_transition when it is not running or its cancel was requested. */
void api_jobs_requeue(struct hreq *h);
/* POST /v1/jobs/{id}/priority {"priority"}: a queued, scheduled or running job's priority (lower runs
 * first), with an event; 400 naming priority, 404, 409 invalid_transition for an ended job. */
void api_jobs_priority(struct hreq *h);
/* POST /v1/jobs/{id}/pool {"pool"}: rung_set_pool (sql/functions/22_job_ops.sql); every job but a
 * succeeded one (409); 400 naming pool; announces after the change (a parked GPU of the new pool). */
void api_jobs_pool(struct hreq *h);
/* POST /v1/jobs/{id}/start (body empty or {}): a scheduled job is queued at once, before its start
 * time (rung_start_now, sql/functions/23_scheduled.sql, an event started_now naming the caller),
 * and the waiters are woken; 200 with the job, 404, 409 invalid_transition for a job in any other
 * state. */
void api_jobs_start(struct hreq *h);
/* POST /v1/jobs/{id}/after {"after": [ids] | null}: the jobs a job not started yet runs after, set
 * again (migration 033, rung_set_after): 200 the job; 400 naming after (malformed, unknown or not the
 * submitter's own, or a cycle); 404; 409 once it started. Wakes the lease waiters after the commit. */
void api_jobs_after(struct hreq *h);

/* A db_exec callback (arg: the struct hreq) for a statement about job param[0] that returns one
 * JSON document: replies it (200), or 404 "no such job" when it is NULL or missing, or what
 * hreq_db_value answers. */
void api_jobs_on_doc(PGresult *res, const char *err, void *arg);

/* The owner= and kind= filters of a job list, one rule for GET /v1/jobs and the /ui/jobs page:
 * kind is image or video; owner is a token name (1..AUTH_NAME_MAX of [A-Za-z0-9._@-]) and a
 * submitter may name only itself. owner, kind: the query values or NULL ("" reads as absent).
 * Returns 0 and sets *scope to the owner the list is limited to (owner, a submitter's own name,
 * or NULL: every owner) and *kind_out to kind or NULL (both borrowed from the arguments); or the
 * HTTP status to answer (400, or 403 for a submitter naming another owner) with *field the
 * parameter's name and *msg a heap string the caller frees. Pure. */
int api_jobs_list_filter(const struct auth_who *who, const char *owner, const char *kind, const char **scope,
			 const char **kind_out, const char **field, char **msg);

/* Validates a submit body and builds what is stored. Returns 0 and sets *recovery (new
 * reference, defaults filled), *name (borrowed from body), *priority; or -1 with *field and
 * *message heap strings (caller frees) describing the first problem. The start time ("run_after":
 * RFC 3339 with its zone, at most 365 days ahead of this process's clock, or "start_in_s": 1 to
 * 31536000; not both) is checked, not returned: api_jobs_submit reads it. Pure but for that clock;
 * for tests. */
int api_jobs_check_submit(const json_t *body, json_t **recovery, const char **name, int *priority,
			  char **field, char **message);

/* Parses an AI Toolkit config file as a YAML submit body is read (buf: len bytes, JSON too; typed
 * as AI Toolkit's loader does), with the same caps: values (aliases counted in full) and nesting.
 * Returns 0 with *out a new mapping the caller owns; or -1 with *error the 400's code (static:
 * "invalid_yaml" naming line and column, "invalid_body" for anything but a mapping, "json_too_deep")
 * and *message a heap string the caller frees. Pure; POST /v1/jobs, /v1/plan and /ui/plan. */
int api_jobs_parse_yaml(const char *buf, size_t len, json_t **out, const char **error, char **message);

/* Reads and validates a submit body as POST /v1/jobs does (either form; api_jobs_check_submit),
 * for routes that take what a submit takes (POST /v1/plan). The query parameter named also (may
 * be NULL) is left to the caller: the file form does not read it as an option, the envelope form
 * does not refuse it. Returns 0 with *body (the envelope) and *recovery (defaults filled), new
 * references the caller frees; or -1 after answering h (400 naming the field, 413): h is gone. */
int api_jobs_read_submit(struct hreq *h, const char *also, json_t **body, json_t **recovery);

#endif
