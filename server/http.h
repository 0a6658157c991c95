/* HTTP plumbing of rungd on evhttp: the router over a route table it is given (404/405 as JSON),
 * one `struct hreq` per request that guarantees exactly one reply (also after the client has
 * gone), capped JSON bodies, JSON replies and errors {"error", "message", "field"}. It knows no
 * route, handler, role or metric: routes.c gives it the table and the hooks (the guard that checks
 * the caller, the body check, the reply observer, the release of what a request holds). */
#ifndef RUNG_HTTP_H
#define RUNG_HTTP_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "auth_who.h"

struct app;
struct evhttp_request;
struct event;

#define HTTP_MAX_BODY (1024 * 1024) /* larger bodies are answered 413 */
#define HTTP_MAX_PARAMS 2

/* One request in flight. Created by the router, freed by the reply. */
struct hreq {
	struct evhttp_request *req;    /* NULL once evhttp freed it with its connection */
	struct app *app;
	bool gone;                     /* the client closed the connection before the reply */
	void (*on_gone)(struct hreq *h, void *arg); /* optional: runs once when the client goes */
	void *on_gone_arg;
	const char *method;            /* "GET", "POST", ... (static) */
	char *path;                    /* decoded path, owned */
	char *param[HTTP_MAX_PARAMS];  /* the {} segments of the route, owned */
	char *query;                   /* raw query string or NULL, owned */
	int64_t t0_ms;                 /* monotonic start, for the access log */
	const char *route;             /* matched route pattern (static) or "unmatched": for /metrics */
	struct event *watch;           /* EOF watch on the client socket while unanswered */
	struct auth_who who;           /* the caller, set by the guard (auth.c) before the handler */
};

/* A route: METHOD and PATTERN (segments; "{}" matches any one segment, copied into param[]) to a
 * handler, with an access rule that http.c passes to the guard without reading it. */
struct http_route {
	const char *method;
	const char *pattern;
	void (*handler)(struct hreq *h);
	unsigned access;  /* the guard's rule (routes.c: AUTH_* roles, AUTH_OPEN; 0 = any caller) */
	int scope;        /* the guard's object scope (routes.c: enum auth_scope of param[0]) */
};

/* What the layers above plug into the request path; any may be NULL. */
struct http_hooks {
	/* Runs the matched route's handler, or refuses the request by answering it (NULL: calls
	 * r->handler(h) at once). h->route and h->param are set. */
	void (*guard)(struct hreq *h, const struct http_route *r);
	/* Before a non-empty body is parsed: returns false after answering h to refuse it. */
	bool (*body_check)(struct hreq *h, const char *buf, size_t len);
	/* After each reply: h->method, the route pattern ("unmatched" when none), the status. */
	void (*observe)(struct hreq *h, const char *route, int status, double seconds);
	/* When h is freed: releases what the request held. */
	void (*release)(struct hreq *h);
};

/* Installs the router as evhttp's generic callback, with the body-size cap, over routes[0..n) (in
 * match order) and hooks (both borrowed: static storage). One router per process. */
void http_setup(struct app *app, const struct http_route *routes, size_t n, const struct http_hooks *hooks);
/* The route of routes[0..n) that METHOD PATH matches, or NULL. */
const struct http_route *http_route_find(const struct http_route *routes, size_t n, const char *method,
	const char *path);

/* Parses the body as a JSON object into *out (new reference; an empty body reads as {}).
 * On failure answers 400 (malformed or not an object) or 413 (over HTTP_MAX_BODY), frees h, and
 * returns -1: the caller must not touch h again. */
int hreq_body(struct hreq *h, json_t **out);
/* The request body's bytes as received (not NUL-terminated; *len its length), or NULL when it is
 * empty. Borrowed from h: valid until h is answered. */
const char *hreq_body_text(struct hreq *h, size_t *len);

/* Value of query parameter `key` as a new heap string (caller frees), or NULL when absent. */
char *hreq_query(const struct hreq *h, const char *key);
/* Request header value (borrowed, valid until the reply) or NULL. */
const char *hreq_header(const struct hreq *h, const char *key);
/* Adds a response header; call before the reply. */
void hreq_add_header(struct hreq *h, const char *key, const char *value);

/* Replies `code` with `body` (stolen; NULL sends no body, e.g. 204) as application/json, then
 * frees h. Safe when the client has gone (nothing is written). */
void hreq_reply(struct hreq *h, int code, json_t *body);
/* Same with a JSON text produced elsewhere (e.g. by Postgres); borrowed. */
void hreq_reply_text(struct hreq *h, int code, const char *json_text);
/* Replies `code` with len bytes of body (borrowed) as content_type (e.g. text/plain), then frees h. */
void hreq_reply_typed(struct hreq *h, int code, const char *content_type, const char *body, size_t len);
/* Replies {"error": error, "message": printf(fmt...), "field": field-or-null} and frees h. */
void hreq_error(struct hreq *h, int code, const char *error, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* The 503 every handler gives when the database could not run a statement. */
void hreq_db_error(struct hreq *h, const char *err);

/* Checks a database callback's result: returns 0 and sets *value to the first column of the first
 * row (borrowed from res; NULL when there is no row or it is SQL NULL), or answers 503 (no
 * connection, connection-class errors) or 500 (any other error), frees h and returns -1. */
int hreq_db_value(struct hreq *h, PGresult *res, const char *err, const char **value);

#define HTTP_NOTE_MAX 4096 /* bytes of an operator's note: escalations, retries, profile resets, drains */

/* The optional field "note" of a request body (borrowed): returns 0 and sets *note to its text
 * (borrowed from body; NULL when absent or null), or answers 400 naming note (a string of at most
 * HTTP_NOTE_MAX bytes), frees h and returns -1: the caller then only frees body. */
int hreq_note(struct hreq *h, const json_t *body, const char **note);

/* Who is calling, for the records an action leaves (an event's "by"): the token's name, else
 * "token ID". Written into buf (n bytes); returns buf. */
const char *hreq_by(const struct hreq *h, char *buf, size_t n);

/* A statement's one JSON value (hreq_db_value), parsed: a new reference, or NULL after answering
 * 404 "no such THING: {param[0]}" (no row or SQL NULL), 500 (unreadable JSON) or what
 * hreq_db_value answers; h is then freed. */
json_t *hreq_db_doc(struct hreq *h, PGresult *res, const char *err, const char *thing);

/* Parses a positive decimal id; returns -1 when it is not one. */
long long http_parse_id(const char *s);
/* Parses a decimal integer (a query parameter's value) into *v: 0, or -1 when text is not one or
 * it lies outside [min, max]. */
int http_parse_int(const char *text, long long min, long long max, long long *v);

#endif
