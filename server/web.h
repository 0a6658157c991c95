/* rungd's web pages for support and operators (/ui/...): the queue, a job with its attempt
 * timeline and memory charts, escalations with their rendered reports, the GPUs and workers, and
 * the login form that keeps an API token in an HttpOnly cookie. Server-rendered HTML, no scripts,
 * no external assets. Data comes from sql/web_*.sql; the HTML pieces from html.c; the forms that
 * change something (retry, cancel, ack, resolve, release, drain) from web_act.c; the plan of a
 * config before a submit from web_plan.c; the admins' tokens page from web_tokens.c. */
#ifndef RUNG_WEB_H
#define RUNG_WEB_H

#include <stddef.h>

#include "auth.h"

struct hreq;


/* Route handlers (server/http.c). Each answers exactly once with text/html (or a 303 redirect to
 * the login form when the request carries no usable token). */
void web_queue(struct hreq *h);          /* GET /ui, /ui/jobs   ?state=&owner=&kind=&cursor= */
void web_job(struct hreq *h);            /* GET /ui/jobs/{id} */
void web_job_log(struct hreq *h);        /* GET /ui/jobs/{id}/log   ?attempt= */
void web_escalations(struct hreq *h);    /* GET /ui/escalations   ?state= */
void web_escalation(struct hreq *h);     /* GET /ui/escalations/{id} */
void web_gpus(struct hreq *h);           /* GET /ui/gpus */
void web_login_form(struct hreq *h);     /* GET /ui/login   ?next=&why=expired|refused (why: says so) */
/* POST /ui/login   form token=&next=: looks the token up (auth_dispatch_as, any role); a live one
 * gets the cookie (Max-Age no longer than the token lives) and a 303 to next; an expired one a 401
 * form saying when it expired, a revoked or unknown one a 401 form, text that is no token a 400. */
void web_login(struct hreq *h);
void web_logout(struct hreq *h);         /* POST /ui/logout : clears the cookie, 303 to the form */

/* Runs page(h) for a caller with one of `roles` (and `scope` over param[0]), checked by auth.c as
 * for the API with the rung_token cookie as the bearer token; without a usable cookie answers a 303
 * to the login form that comes back to `back` (a local page; NULL: this request's own), and with
 * one whose token auth.c refuses (expired, revoked, unknown) clears the cookie and answers a 303 to
 * that form with why=expired or why=refused. A wrong role is still auth.c's 403. */
void web_gate(struct hreq *h, unsigned roles, enum auth_scope scope, void (*page)(struct hreq *h), const char *back);
/* Answers `code` with a page titled `title` that says msg (escaped). */
void web_message(struct hreq *h, int code, const char *title, const char *msg);
/* Answers `code` with a page titled `title` (escaped) whose content is body: trusted markup, every
 * text in it escaped by the caller (html_esc). The pages' frame, navigation and headers (no-store,
 * the Content-Security-Policy without scripts). For pages rendered outside web.c (web_plan.c). */
void web_page(struct hreq *h, int code, const char *title, const char *body);
/* Answers 303 to location (a local path). */
void web_redirect(struct hreq *h, const char *location);

/* Value of cookie `name` in a Cookie header (heap, caller frees), or NULL when absent. */
char *web_cookie(const char *header, const char *name);
/* Value of `key` in an application/x-www-form-urlencoded body of len bytes, decoded (+ and %XX;
 * heap, caller frees), or NULL when absent or malformed. */
char *web_form_value(const char *body, size_t len, const char *key);
/* True when `next` is a safe place to send a browser after login: a local /ui path (no scheme,
 * no //host, no backslash, no control characters). */
int web_safe_next(const char *next);

#endif
