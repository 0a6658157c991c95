/* HTML building blocks for rungd's web pages (web.c): a growable text buffer, escaping of
 * untrusted text, the Markdown subset the escalation reports use (report.c) rendered to HTML, the
 * inline SVG memory chart of an attempt and the start-lower story of a job. Pure code: no I/O, no
 * HTTP, no database. */
#ifndef RUNG_HTML_H
#define RUNG_HTML_H

#include <stddef.h>
#include <jansson.h>

/* A growable NUL-terminated string. Zero-initialise (`struct hbuf b = { 0 };`); s stays NULL until
 * the first append. Release with html_release (or take the string with html_take). */
struct hbuf {
	char *s;
	size_t len, cap;
};

/* Appends n bytes / a C string (NULL appends nothing) / printf output. Abort on exhaustion. */
void html_addn(struct hbuf *b, const char *s, size_t n);
void html_add(struct hbuf *b, const char *s);
void html_printf(struct hbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s with & < > " ' escaped, safe in element text and quoted attribute values. NULL
 * appends nothing. Bytes below 0x20 other than tab and newline become U+FFFD. */
void html_esc(struct hbuf *b, const char *s);
/* Appends any JSON value as escaped text: a string as it is, any other value as compact JSON; a
 * null or absent value appends `null_html` instead (trusted markup, appended as it is; NULL: nothing). */
void html_esc_json(struct hbuf *b, const json_t *v, const char *null_html);
/* Appends a timestamp string as "2025-01-31 12:34:56" (from "2025-01-31T12:34:56.789+00:00", escaped);
 * any other value as html_esc_json with null_html. */
void html_esc_time(struct hbuf *b, const json_t *v, const char *null_html);
/* Appends a <table class="changes"> of a config's CHANGES ([{"path", "old", "new"}], ladder.h): one
 * row per change, the two value columns headed `old_label` and `new_label` (trusted markup), values
 * as html_esc_json with `null_html`. */
void html_changes_table(struct hbuf *b, const json_t *changes, const char *old_label, const char *new_label,
			const char *null_html);
/* Appends s percent-encoded for use as one URL query value or path segment. */
void html_url(struct hbuf *b, const char *s);
/* Appends an href's value: base (escaped) and ?KEY=VALUE&amp;... for the pairs whose value is
 * neither NULL nor "", keys and values percent-encoded (html_url). keys, values: n each. */
void html_href(struct hbuf *b, const char *base, const char *const *keys, const char *const *values, size_t n);
/* Returns the buffer's string (heap, caller frees; "" when empty) and empties b. */
char *html_take(struct hbuf *b);
/* Frees the buffer's string; b can be reused. */
void html_release(struct hbuf *b);

/* Renders the Markdown subset of escalation reports as HTML: ATX headings (#..######), `- `
 * lists nested by two-space indentation, pipe tables (header row, --- separator, `\|` escapes),
 * fenced code blocks (``` or longer fences), paragraphs, and inline **bold**, `code` and
 * backslash escapes. Everything else is text; all text is escaped, raw HTML never passes. */
void html_markdown(struct hbuf *b, const char *md);

/* Appends an inline <svg class="memchart"> of one attempt's GPU memory need against the GPU's
 * capacity, from (first that applies):
 *   facts.oom: allocated_by_pytorch_mib + tried_to_allocate_mib against total_capacity_mib (or
 *              gpu_total_mib when the message did not give it);
 *   memory_used_mib (the last heartbeat's reading of the GPU) against gpu_total_mib.
 * attempt is a rung_attempt_json object (borrowed). Returns 1 when a chart was drawn, 0 when the
 * facts give nothing to draw (nothing is appended). */
int html_mem_chart(struct hbuf *b, const json_t *attempt, long long gpu_total_mib);

/* Issue 12, the job page's telling of rungctl's story_start_text: when job (a rung_job_json object,
 * borrowed) has recovery_state.started_lower, appends <section class="card started-lower"> with
 * "Attempt N started below the target" and the recorded reason, the memory model's estimates of the
 * target and of the config it started with against the GPU's usable memory (peak, margin, usable,
 * the verdict, the evidence), the rungs applied (and skipped) and the config changes it made
 * (path, target, started with). Every recorded text is escaped. Returns 1 when appended, 0 (nothing
 * appended) when the job did not start lower. */
int html_start_lower(struct hbuf *b, const json_t *job);

/* The one-line summary of the same story, as rungctl's verdict phrases it: "started below the
 * target (memory model)[, then scaled up]: attempt N ran with RUNGS applied" (escaped; "then scaled
 * up" when the job has more attempts than N). Returns 1 when appended, 0 when the job did not
 * start lower. */
int html_start_lower_line(struct hbuf *b, const json_t *job);

/* The job whose first claim was handed back for a bigger GPU (recovery_state.started_bigger), in
 * rungctl's words (recovery/jobtext.h: "started on a bigger GPU (memory model): its claim on a G
 * MiB GPU was handed back before it ran, for a GPU with at least M MiB"), escaped. Returns 1 when
 * appended, 0 (nothing appended) when there is no such record. */
int html_start_bigger_line(struct hbuf *b, const json_t *job);

/* A queued job's sentence of recovery/jobtext.h (jobtext_placement: why no usable GPU takes it,
 * when its "placement" counts none, and how many jobs are ahead of it), escaped. Returns 1 when it
 * wrote it, 0 otherwise. */
int html_placement_line(struct hbuf *b, const json_t *job);
/* When a scheduled job starts ("scheduled: starts at T (in 2h05m)", recovery/jobtext.h), escaped;
 * returns 0 (nothing written) when the job is not scheduled. */
int html_scheduled_line(struct hbuf *b, const json_t *job);
/* A job's start deadline while it has not started (recovery/jobtext.h), escaped; returns 0 (nothing
 * written) when it has none. */
int html_deadline_line(struct hbuf *b, const json_t *job);
/* The job's last retry (recovery/jobtext.h), escaped; returns 0 (nothing written) when it has none. */
int html_retried_line(struct hbuf *b, const json_t *job);

/* The job list's filter form: GET to action with a state select (all and states[0..n)), an owner
 * field for staff only (a submitter's list is its own), a kind select (any, image, video), a
 * label field (k=v,k=v) and a pool field (a worker pool's name), each showing the current value
 * (NULL: none; every value escaped). role: enum auth_role bits. */
void html_jobs_filter_form(struct hbuf *b, unsigned role, const char *action, const char *const *states, size_t n,
			   const char *state, const char *owner, const char *kind, const char *label, const char *pool);

/* The attempt number that started below the target (recovery_state.started_lower.attempt, 1 when
 * not recorded), 0 when the job did not start lower. */
long long html_start_lower_attempt(const json_t *job);

/* The queue page's "cancel the jobs that match" form (POST /ui/jobs/cancel), for a role that may
 * cancel (submitter, admin) and only when owner, kind, label or pool narrows the list (nothing,
 * else: the API refuses to cancel "every job"). state: the queue's state filter (queued: not started
 * yet, scheduled, running, active; else the form's default, queued); owner, kind, label, pool: the
 * filters, sent as hidden fields. confirm: the second step's button ("Cancel these N jobs", n), else
 * the first's (which only asks which jobs it would be). Every value escaped. */
void html_cancel_matching_form(struct hbuf *b, unsigned role, const char *state, const char *owner, const char *kind,
			       const char *label, const char *pool, int confirm, long long n);

/* The forms of the /ui pages that change something (server/web_act.c posts them), for a caller of
 * `role` (enum auth_role bits): each appends nothing when that role may not act or nothing applies.
 * job: a JOB (retry, with from and note, when failed or cancelled, for its owner and staff; "Start
 * now" when scheduled, for its owner and staff; requeue, with a note, when running and neither a
 * cancel nor a stop was asked, for its owner and staff; cancel when queued, scheduled or running and
 * no cancel was asked, for its owner and admin; a move to another pool unless succeeded); esc: an escalation
 * (acknowledge when open, resolve until resolved, with a note; staff); gpu: a GPU (release when
 * suspect or quarantined; staff); worker: a WORKER (drain with a note and a "requeue its running jobs" box, or resume; staff). */
void html_job_forms(struct hbuf *b, unsigned role, const json_t *job);
void html_escalation_forms(struct hbuf *b, unsigned role, const json_t *esc);
void html_gpu_form(struct hbuf *b, unsigned role, const json_t *gpu);
void html_worker_form(struct hbuf *b, unsigned role, const json_t *worker);

/* The last MAX_LINES lines of a trainer's output TEXT (what GET /v1/jobs/{id}/log returns) as a
 * terminal shows them, escaped: each line's text after its last '\r' (a progress bar's latest
 * drawing), without ANSI escape sequences (tqdm's cursor moves, colours). Returns how many lines it
 * wrote (0 for an empty text, and nothing is written). */
int html_log_lines(struct hbuf *b, const char *text, int max_lines);

/* The owners table of the GPUs page: owners is rung_owners_summary's array ([{"owner", "queued",
 * "running", "max_running", "pool_limits": [{"pool", "running", "max_running"}]}]); each owner links
 * to the queue filtered on it, an owner at its limit (or at one of its pool limits) is marked. Appends a line saying there is none when the array is empty. */
void html_owners_table(struct hbuf *b, const json_t *owners);
/* The pools table of the GPUs page: pools is rung_pools_json's array ([{"pool", "queued", "scheduled",
 * "running", "workers", "gpus", "draining_gpus", "borrowing_gpus", "borrowed_by", "borrows",
 * "max_gpu_mib"}]); each pool links to the queue filtered on it; every name escaped. Appends nothing
 * for a fleet whose only pool is default and whose workers borrow nothing. */
void html_pools_table(struct hbuf *b, const json_t *pools);

#endif
