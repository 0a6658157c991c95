/* HTTP plumbing of rungd on evhttp: the router (404/405 as JSON), one `struct hreq` per request
 * that guarantees exactly one reply (also after the client has gone), capped JSON bodies, JSON
 * replies and errors {"error", "message", "field"}. It knows the routes but not what they do. */
#ifndef RUNG_HTTP_H
#define RUNG_HTTP_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "auth.h"

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
	struct auth_who who;           /* the caller, set by the router (auth.c) before the handler */
};

/* Installs the router as evhttp's generic callback and the body-size cap. */
void http_setup(struct app *app);

/* Parses the body as a JSON object into *out (new reference; an empty body reads as {}).
 * On failure answers 400 (malformed or not an object) or 413 (over HTTP_MAX_BODY), frees h, and
 * returns -1: the caller must not touch h again. */
int hreq_body(struct hreq *h, json_t **out);

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

/* The access rule of the route METHOD PATH: its AUTH_* roles (0 = any valid token) and scope.
 * Returns 0, or -1 when no route matches (for tests and docs of who may do what). */
int http_route_access(const char *method, const char *path, unsigned *roles, enum auth_scope *scope);

/* Parses a positive decimal id; returns -1 when it is not one. */
long long http_parse_id(const char *s);

#endif
