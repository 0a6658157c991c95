/* The /ui/usage page: GET /v1/usage for a browser, GPU hours per owner over the last N days and
 * what OOMs took of them. */
#ifndef RUNG_WEB_USAGE_H
#define RUNG_WEB_USAGE_H

#include <jansson.h>

struct hbuf;
struct hreq;

#define WEB_USAGE_DAYS_DEFAULT 7
#define WEB_USAGE_DAYS_MAX 366

/* The page's content for a usage document (sql/usage.sql) over the last `days` days (owner: the
 * filter shown in the form, NULL for none; staff: whether the form offers it): the form, a table of
 * owners (each linking to its jobs) in GPU hours by ending, and the total with the OOM share. Every
 * text escaped. Pure. */
void web_usage_render(struct hbuf *b, const json_t *doc, int days, const char *owner, int staff);

/* GET /ui/usage?days=&owner= (readers; a submitter sees its own): answers once. */
void web_usage_page(struct hreq *h);

#endif
