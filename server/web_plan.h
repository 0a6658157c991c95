/* The /ui/plan page: POST /v1/plan for a person with a browser. A form takes an AI Toolkit config
 * (YAML or JSON) and an optional GPU size; the answer says, for each GPU memory size of the fleet,
 * what a first attempt would run and why. Nothing is submitted or stored. */
#ifndef RUNG_WEB_PLAN_H
#define RUNG_WEB_PLAN_H

#include <jansson.h>

#include "html.h"

struct hreq;

/* Route handlers (server/routes.c), for the roles of POST /v1/plan (submitter, support, admin),
 * checked by web_gate on the rung_token cookie; without one the browser goes to the login form and
 * back to /ui/plan. Each answers once with text/html. */
void web_plan_form(struct hreq *h); /* GET /ui/plan: the empty form */
/* POST /ui/plan, form config=&gpu_mib=&pool= (application/x-www-form-urlencoded, up to HTTP_MAX_BODY):
 * 403 from another site (web_act_same_site, as the forms that change something); 413 over the
 * cap; 400 with the form as typed and the field and message of the submit's refusal (the config
 * is read and checked as POST /v1/jobs does: api_jobs_parse_yaml, api_jobs_check_submit), or of
 * gpu_mib, or of pool (not a pool name); 503 when the database cannot answer; else 200 with the form
 * as typed and the plan for the GPUs of that pool (none typed: the default pool; sql/plan_fleet.sql,
 * api_plan_build). */
void web_plan_post(struct hreq *h);

/* Appends the page's form: a textarea holding config, a number input holding gpu_mib and a text
 * input holding pool (each may be NULL: empty; all escaped), preceded by the refusal when message is
 * not NULL (field may be NULL; both escaped). Pure; for tests. */
void web_plan_render_form(struct hbuf *b, const char *config, const char *gpu_mib, const char *pool,
			  const char *field, const char *message);
/* Appends plan, api_plan_build's document (borrowed), as HTML: its kind, arch and "pool" when that is
 * set and not the default pool; what the model rests on (or that
 * the arch has no memory history), one table row per GPU size (GPU MiB; the GPUs of that size in
 * the fleet, "+N drained", or "not in the fleet"; the target's estimate; the first attempt: "as
 * submitted", "start lower: RUNGS" or "wait for >= N MiB"; what that needs), that the fleet has no
 * GPU when no size is in it, then for each size not run as submitted the reason, the rungs skipped
 * and the config changes. Every text from the document is escaped. Pure; for tests. */
void web_plan_render(struct hbuf *b, const json_t *plan);

#endif
