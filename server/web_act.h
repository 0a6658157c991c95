/* The /ui forms that change something: retry, cancel and start (a scheduled job now) a job, acknowledge and resolve an
 * escalation, release a GPU, drain and resume a worker. Each POST runs the same statement as its
 * API route, under the same roles, and answers 303 back to the page it came from (or a page that
 * says why not). The forms themselves are html.c's (html_job_forms, ...). */
#ifndef RUNG_WEB_ACT_H
#define RUNG_WEB_ACT_H

struct hreq;

/* Route handlers (server/routes.c), form bodies application/x-www-form-urlencoded. A request from
 * another site (web_act_same_site) is a 403; without a usable cookie the browser goes to the login
 * form and back to the page. */
void web_act_job_retry(struct hreq *h);          /* POST /ui/jobs/{id}/retry    from=&note= */
void web_act_job_cancel(struct hreq *h);         /* POST /ui/jobs/{id}/cancel */
void web_act_job_start(struct hreq *h);          /* POST /ui/jobs/{id}/start: a scheduled job queued now */
void web_act_job_requeue(struct hreq *h);        /* POST /ui/jobs/{id}/requeue  note=: a running job stopped and queued again */
void web_act_job_pool(struct hreq *h);           /* POST /ui/jobs/{id}/pool     pool=: a move to another pool */
/* POST /ui/jobs/cancel  state=&owner=&kind=&label=&pool=&confirm= : the jobs that match (as POST
 * /v1/jobs/cancel, at most API_JOBS_CANCEL_MAX): without confirm=1 a page listing them with the
 * confirm button (nothing changed), with it cancels them and answers 303 back to the queue. */
void web_act_jobs_cancel(struct hreq *h);
void web_act_escalation_ack(struct hreq *h);     /* POST /ui/escalations/{id}/ack      note= */
void web_act_escalation_resolve(struct hreq *h); /* POST /ui/escalations/{id}/resolve  note= */
void web_act_gpu_release(struct hreq *h);        /* POST /ui/gpus/{uuid}/release */
void web_act_worker_drain(struct hreq *h);       /* POST /ui/workers/{id}/drain   note= */
void web_act_worker_resume(struct hreq *h);      /* POST /ui/workers/{id}/resume */

/* Whether a POST with these headers (each may be NULL) comes from this site: a Sec-Fetch-Site, when
 * present, says same-origin (or none: typed by the user); else an Origin, when present, names host
 * or the reverse proxy's X-Forwarded-Host. Pure; for tests. */
int web_act_same_site(const char *origin, const char *fetch_site, const char *host, const char *fwd_host);

#endif
