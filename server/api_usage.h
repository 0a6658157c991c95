/* GET /v1/usage: GPU time per owner over a window of time, for chargeback and for what OOMs cost
 * (sql/usage.sql). */
#ifndef RUNG_API_USAGE_H
#define RUNG_API_USAGE_H

#include <stdint.h>

#include "db.h"

struct auth_who;
struct hreq;

#define USAGE_DEFAULT_WINDOW_MS (7LL * 86400 * 1000)   /* since, when not given: a week before until */

/* The window and scope of a usage report from the query values since, until and owner (NULL or ""
 * when absent; since/until RFC 3339 times, util_time_parse) at now_ms: *lo_ms, *hi_ms (until
 * defaults to now, since to a week before until) and *scope (as api_jobs_list_filter: the owner the
 * report is limited to, a submitter's own name, or NULL). Returns 0, or the HTTP status (400, 403)
 * with *field the parameter and *msg a heap string the caller frees. Pure. */
int api_usage_window(const struct auth_who *who, const char *since, const char *until, const char *owner,
	int64_t now_ms, int64_t *lo_ms, int64_t *hi_ms, const char **scope, const char **field, char **msg);

/* Runs the usage report (sql/usage.sql) over [lo_ms, hi_ms) (epoch ms) for owner (NULL: every
 * owner) and the jobs carrying labels_json (a JSON object's text; NULL: any) on h's database;
 * cb(res, err, arg) gets the one JSON document. The strings are copied before it returns. */
void api_usage_run(struct hreq *h, int64_t lo_ms, int64_t hi_ms, const char *owner, const char *labels_json, db_cb cb,
		   void *arg);

/* GET /v1/usage?since=&until=&owner=&label=: answers h once (label: k=v,k=v, the jobs that carry
 * them, e.g. a sweep's). */
void api_usage_get(struct hreq *h);

#endif
