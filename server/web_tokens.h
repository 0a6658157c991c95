/* The /ui/tokens page, for admins: the tokens with their limits and running jobs, and the forms
 * that create, revoke and limit one. Each form runs its API route's statement with its API route's
 * checks (api_tokens.c, sql/token_*.sql); a new token's secret is shown once, on the page that
 * answers the create, never in a URL. */
#ifndef RUNG_WEB_TOKENS_H
#define RUNG_WEB_TOKENS_H

#include <jansson.h>

#include "html.h"

struct hreq;

/* Route handlers (server/routes.c), for admins only: web_gate checks the rung_token cookie (another
 * role: auth.c's 403; no usable cookie: a 303 to the login form and back to /ui/tokens). Each
 * answers once. The POSTs take application/x-www-form-urlencoded forms of at most 4 KiB (413) and
 * are refused with a 403 page when they come from another site (web_act_same_site), before the
 * cookie is read; an id that is not one, or names no token, is a 404 page. */
/* GET /ui/tokens: the table (sql/web_tokens.sql) and the forms; 503 page when the database cannot answer. */
void web_tokens_page(struct hreq *h);
/* POST /ui/tokens  role=&name=&expires_in_days= (name and expires_in_days optional: ROLE-ID and
 * never): 400 page naming expires_in_days (web_tokens_expires_days), role or name (POST
 * /v1/tokens's checks), 409 page when the name is taken, else 200 with the secret
 * (web_tokens_render_created). */
void web_tokens_create(struct hreq *h);
/* POST /ui/tokens/{id}/revoke: sql/token_revoke.sql, forgets the token in this replica's cache at
 * once, 303 to /ui/tokens. */
void web_tokens_revoke(struct hreq *h);
/* POST /ui/tokens/{id}/limits  max_running= (empty: no limit; 0: none of its jobs starts), and
 * pool= for the limit in that pool alone (migration 034; the others stay as they are): 400 page
 * naming pool unless it is a pool name, or max_running unless web_tokens_limit_value passes
 * api_tokens_limit_ok; or gpu_hours= (whole hours; empty: no quota) and gpu_hours_days= (empty: as it
 * was), a GPU-hour quota (migration 035): 400 page naming the field api_tokens_check_limits names; else
 * sql/token_set_limit.sql, wakes the parked waiters once it committed (lease_announce, as the API
 * does), 303 to /ui/tokens. */
void web_tokens_limits(struct hreq *h);
/* POST /ui/tokens/{id}/expiry  expires_in_days= (whole days from now; empty: never): 400 page naming
 * expires_in_days unless web_tokens_expires_days reads it; else sql/token_set_expiry.sql (an expired
 * token works again; 409 page for a revoked one), forgets the token in this replica's cache at
 * once, 303 to /ui/tokens. */
void web_tokens_expiry(struct hreq *h);

/* The limit form's max_running text as the API's JSON value (new reference): NULL, empty or
 * blank -> null; an optionally signed decimal integer (spaces around allowed) -> that integer;
 * anything else -> the text as a string (which api_tokens_limit_ok refuses). Pure; for tests. */
json_t *web_tokens_limit_value(const char *text);
/* The quota forms' gpu_hours text as the API's JSON value (new reference): NULL, empty or blank ->
 * null; a decimal number (12, 12.5; spaces around allowed) -> that number (an integer when it is
 * one); anything else, an infinity or NaN included -> the text as a string (which
 * api_tokens_check_limits refuses). Pure; for tests. */
json_t *web_tokens_hours_value(const char *text);
/* The create form's expires_in_days text as the API's expires_in_s: NULL, empty or blank -> 0
 * (never); a whole number of days from 1 to 3650 (spaces around allowed) -> that many days in
 * seconds; returns 0, or -1 for anything else (*seconds 0). Pure; for tests. */
int web_tokens_expires_days(const char *text, long long *seconds);
/* Appends the page's content for doc, sql/web_tokens.sql's {"tokens": [TOKEN + running]}
 * (borrowed): the create form (role select, optional name, optional expires in days), then one
 * table row per token (id, name, role, created, revoked when, expires: "never", when, or
 * "expired" and when, max running or "none", running now) with, for a token not
 * revoked, a limit form, an expiry form and a revoke form. self_id: the caller's token id, marked "you" (0: none).
 * Every text from doc escaped. Pure; for tests. */
void web_tokens_render(struct hbuf *b, const json_t *doc, long long self_id);
/* Appends the page that answers a create: the secret (escaped), the warning that it is shown only
 * this once, the token's id, name, role and expiry (TOKEN, borrowed; escaped) and a link back. Pure. */
void web_tokens_render_created(struct hbuf *b, const json_t *token, const char *secret);

#endif
