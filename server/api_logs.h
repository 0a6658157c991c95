/* Handlers of the attempts' trainer output (migration 022): rung-worker's chunks in, readers' pages
 * out. The worker cuts and cleans the chunks (worker/logship.h); rungd stores them as sent. */
#ifndef RUNG_API_LOGS_H
#define RUNG_API_LOGS_H

struct hreq;

#define API_LOGS_TOKEN_MAX 256
#define API_LOGS_CHUNK_MAX (256 * 1024)                      /* bytes of text per chunk; more: 413 */
#define API_LOGS_MAX_BYTES (65LL * 1024 * 1024)              /* an attempt's log is kept up to this byte; past it: 413 log_full */
#define API_LOGS_PAGE_DEFAULT (256 * 1024)                   /* bytes of text per page unless limit_bytes */
#define API_LOGS_PAGE_MAX (1024 * 1024)

/* POST /v1/attempts/{id}/log {"token", "from", "to", "text"}: bytes [from, to) (to > from) of the attempt's
 * trainer log as text (valid UTF-8, no NUL; at most API_LOGS_CHUNK_MAX bytes). Fenced by (id,
 * token, running): 409 not_running otherwise. 200 {"stored", "end"}: stored only when from is where
 * the stored log ends; "end" is where it ends now, where the next chunk starts (a resend moves the
 * worker on, a gap back). 400 naming token, from, to or text; 413 too_large (text), log_full (to
 * past API_LOGS_MAX_BYTES). Answers h exactly once. */
void api_logs_put(struct hreq *h);

/* GET /v1/jobs/{id}/log?attempt=N&from=B&limit_bytes=L: a page of attempt N's output (default: the
 * latest attempt) from byte B (0, or the previous page's "next"), at most L bytes of text but at
 * least one chunk (sql/job_log.sql has the document). 400 naming attempt, from or limit_bytes;
 * 404 no such job. Answers h exactly once. */
void api_logs_get(struct hreq *h);

#endif
