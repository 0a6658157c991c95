/* evhttp plumbing for rungd: routes requests over the table routes.c installs, wraps each request
 * in a struct hreq that is answered exactly once (also after the client went away: evhttp keeps a
 * request it has not seen answered, and our reply then only frees it), and renders JSON replies
 * and errors. Who may call a route, and what is counted, are the hooks' business (http.h). */
#include <ctype.h>
#include <errno.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "app.h"
#include "http.h"
#include "log.h"
#include "util.h"

/* evhttp refuses bodies past this with its own (HTML) 413; between HTTP_MAX_BODY and this we
 * answer a JSON 413 ourselves. */
#define HTTP_HARD_MAX_BODY (16 * 1024 * 1024)

static const struct http_hooks no_hooks;

/* The router of this process (http_setup). */
static struct {
	const struct http_route *routes;
	size_t n;
	const struct http_hooks *hooks;
} router = { NULL, 0, &no_hooks };

static const char *method_name(enum evhttp_cmd_type cmd)
{
	switch (cmd) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	case EVHTTP_REQ_TRACE: return "TRACE";
	case EVHTTP_REQ_CONNECT: return "CONNECT";
	case EVHTTP_REQ_PATCH: return "PATCH";
	default: return "OTHER";
	}
}

/* Matches `path` against `pattern`; on success copies the {} segments into params. */
static bool route_match(const char *pattern, const char *path, char **params)
{
	int n = 0;
	const char *p = pattern, *s = path;

	while (*p && *s) {
		if (p[0] == '{' && p[1] == '}') {
			const char *end = strchr(s, '/');
			size_t len = end ? (size_t)(end - s) : strlen(s);
			if (len == 0 || n >= HTTP_MAX_PARAMS)
				goto fail;
			params[n] = xmalloc(len + 1);
			memcpy(params[n], s, len);
			params[n][len] = '\0';
			n++;
			p += 2;
			s += len;
			continue;
		}
		if (*p != *s)
			goto fail;
		p++;
		s++;
	}
	if (*p == '\0' && (*s == '\0' || (s[0] == '/' && s[1] == '\0')))
		return true;
fail:
	for (int i = 0; i < n; i++) {
		free(params[i]);
		params[i] = NULL;
	}
	return false;
}

static void hreq_free(struct hreq *h)
{
	if (router.hooks->release)
		router.hooks->release(h);
	for (int i = 0; i < HTTP_MAX_PARAMS; i++)
		free(h->param[i]);
	free(h->path);
	free(h->query);
	free(h);
}

/* " job=12" (or attempt=, worker=, gpu=, escalation=, token=) for log lines, from the matched
 * route: the segment before the first {} without its plural s, and param[0] with anything but
 * [A-Za-z0-9._-] shown as '?'. Empty when the route has no {}. */
static const char *hreq_ids(const struct hreq *h, char *buf, size_t n)
{
	const char *brace = h->route ? strstr(h->route, "/{}") : NULL, *seg;
	size_t i = 0, sl;

	buf[0] = '\0';
	if (!brace || !h->param[0] || n < 8)
		return buf;
	for (seg = brace; seg > h->route && seg[-1] != '/'; seg--)
		;
	sl = (size_t)(brace - seg);
	if (sl > 1 && seg[sl - 1] == 's')
		sl--;
	buf[i++] = ' ';
	for (size_t k = 0; k < sl && i + 2 < n; k++)
		buf[i++] = seg[k];
	buf[i++] = '=';
	for (const char *p = h->param[0]; *p && i + 1 < n; p++)
		buf[i++] = (isalnum((unsigned char)*p) || strchr("._-", *p)) ? *p : '?';
	buf[i] = '\0';
	return buf;
}

static void hreq_gone(struct hreq *h)
{
	char ids[96];

	if (h->gone)
		return;
	h->gone = true;
	log_info("client gone", "method=%s path=%s%s", h->method, h->path, hreq_ids(h, ids, sizeof ids));
	if (h->on_gone)
		h->on_gone(h, h->on_gone_arg);
}

/* evhttp (2.1) stops reading a connection while its request is unanswered, so it does not see
 * the client leave; this one-shot watch peeks at the socket: EOF or an error means gone. */
static void hreq_on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct hreq *h = arg;
	char c;
	ssize_t n;

	(void)what;
	n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
		hreq_gone(h);
		return;
	}
	if (n < 0)
		event_add(h->watch, NULL);
	/* n > 0: a pipelined request is waiting; stop watching rather than spin */
}

/* The connection is being freed. When evhttp disassociated the request first (EOF or timeout
 * before our reply) it lives on until our reply; when the request is still attached (evhttp_free)
 * it dies with the connection, so forget it. */
static void hreq_on_close(struct evhttp_connection *evcon, void *arg)
{
	struct hreq *h = arg;

	(void)evcon;
	if (h->req && evhttp_request_get_connection(h->req) != NULL)
		h->req = NULL;
	hreq_gone(h);
}

/* The reply was written out completely (not called when the write failed). */
static void hreq_on_written(struct evhttp_request *req, void *arg)
{
	struct app *app = arg;

	(void)req;
	app->unflushed--;
	if (app->request_done)
		app->request_done(app);
}

static void hreq_send(struct hreq *h, int code, const char *ctype, const char *text, size_t len)
{
	struct app *app = h->app;

	if (h->watch) {
		event_free(h->watch);
		h->watch = NULL;
	}
	if (h->req) {
		struct evhttp_connection *evcon = evhttp_request_get_connection(h->req);
		struct evbuffer *buf = NULL;
		if (evcon)
			evhttp_connection_set_closecb(evcon, NULL, NULL);
		if (text) {
			buf = evbuffer_new();
			evbuffer_add(buf, text, len);
			if (!ctype)
				evbuffer_add(buf, "\n", 1);
			evhttp_add_header(evhttp_request_get_output_headers(h->req), "Content-Type",
					  ctype ? ctype : "application/json");
		}
		if (evcon) {
			app->unflushed++;
			evhttp_request_set_on_complete_cb(h->req, hreq_on_written, app);
		}
		evhttp_send_reply(h->req, code, NULL, buf);
		if (buf)
			evbuffer_free(buf);
	}
	log_debug("request", "method=%s path=%s status=%d ms=%lld gone=%d", h->method, h->path, code,
		  (long long)(util_mono_ms() - h->t0_ms), h->gone);
	if (router.hooks->observe)
		router.hooks->observe(h, h->route ? h->route : "unmatched", code,
				      (double)(util_mono_ms() - h->t0_ms) / 1000.0);
	hreq_free(h);
	app->inflight--;
	if (app->request_done)
		app->request_done(app);
}

void hreq_reply(struct hreq *h, int code, json_t *body)
{
	char *text = NULL;

	if (body)
		text = json_dumps(body, JSON_COMPACT);
	hreq_send(h, code, NULL, text, text ? strlen(text) : 0);
	free(text);
	json_decref(body);
}

void hreq_reply_text(struct hreq *h, int code, const char *json_text)
{
	hreq_send(h, code, NULL, json_text, json_text ? strlen(json_text) : 0);
}

void hreq_reply_typed(struct hreq *h, int code, const char *content_type, const char *body, size_t len)
{
	hreq_send(h, code, content_type, body ? body : "", body ? len : 0);
}

/* Whether s is valid UTF-8 (what jansson accepts as a string). */
static bool utf8_valid(const char *s)
{
	json_t *v = json_string(s);
	bool ok = v != NULL;
	json_decref(v);
	return ok;
}

/* A copy of s that jansson accepts: when s is not valid UTF-8, every byte >= 0x80 becomes '?'. */
static char *utf8_clean(const char *s)
{
	char *out = xstrdup(s);
	if (!utf8_valid(out))
		for (char *p = out; *p; p++)
			if ((unsigned char)*p >= 0x80)
				*p = '?';
	return out;
}

/* Whether the raw query string holds an encoded NUL (%00) in a key or value; *key gets that
 * parameter's raw key (heap, UTF-8 cleaned). evhttp decodes values into C strings, where the NUL
 * would silently cut the value short ("limit=1%00x" read as "1"). */
static bool query_nul(const char *q, char **key)
{
	const char *p = q;

	*key = NULL;
	while (p && *p) {
		size_t n = strcspn(p, "&;");
		for (size_t i = 0; i + 3 <= n; i++) {
			if (p[i] == '%' && p[i + 1] == '0' && p[i + 2] == '0') {
				size_t k = strcspn(p, "=&;");
				char *raw = xmalloc(k + 1);
				memcpy(raw, p, k);
				raw[k] = '\0';
				*key = utf8_clean(raw);
				free(raw);
				return true;
			}
		}
		p += n;
		if (*p)
			p++;
	}
	return false;
}

void hreq_error(struct hreq *h, int code, const char *error, const char *field, const char *fmt, ...)
{
	char *msg = NULL;
	va_list ap;
	char ids[96];

	hreq_ids(h, ids, sizeof ids);
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (code >= 500)
		log_warn("request failed", "method=%s path=%s%s status=%d error=%s message=\"%s\"", h->method,
			 h->path, ids, code, error, msg ? msg : "");
	else
		log_info("request refused", "method=%s path=%s%s status=%d error=%s field=%s message=\"%s\"",
			 h->method, h->path, ids, code, error, field ? field : "-", msg ? msg : "");
	{
		/* the message and field may quote request text that is not UTF-8 (a path, a key) */
		char *m = utf8_clean(msg ? msg : error), *f = field ? utf8_clean(field) : NULL;
		hreq_reply(h, code, json_pack("{s:s, s:s, s:s?}", "error", error, "message", m, "field", f));
		free(m);
		free(f);
	}
	free(msg);
}

void hreq_db_error(struct hreq *h, const char *err)
{
	hreq_error(h, 503, "database_unavailable", NULL, "%s",
		   err ? err : "unknown error");
}

int hreq_db_value(struct hreq *h, PGresult *res, const char *err, const char **value)
{
	const char *state;
	char ids[96];

	*value = NULL;
	if (!res) {
		hreq_db_error(h, err);
		return -1;
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		/* connection, shutdown, resources, and a transaction Postgres rolled back to break a deadlock
		 * or a serialization conflict: the statement may succeed if sent again (503) */
		if (state && (strncmp(state, "08", 2) == 0 || strncmp(state, "57", 2) == 0 ||
			      strncmp(state, "53", 2) == 0 || strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0)) {
			hreq_db_error(h, PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
			return -1;
		}
		log_error("statement failed", "method=%s path=%s%s sqlstate=%s error=\"%s\"", h->method, h->path,
			  hreq_ids(h, ids, sizeof ids), state ? state : "-", PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?");
		hreq_error(h, 500, "internal", NULL, "the database refused the statement");
		return -1;
	}
	if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		*value = PQgetvalue(res, 0, 0);
	return 0;
}

const char *hreq_body_text(struct hreq *h, size_t *len)
{
	struct evbuffer *in = h->req ? evhttp_request_get_input_buffer(h->req) : NULL;

	*len = in ? evbuffer_get_length(in) : 0;
	return *len ? (const char *)evbuffer_pullup(in, -1) : NULL;
}

int hreq_body(struct hreq *h, json_t **out)
{
	struct evbuffer *in = h->req ? evhttp_request_get_input_buffer(h->req) : NULL;
	size_t len = in ? evbuffer_get_length(in) : 0;
	json_error_t jerr;
	json_t *body;

	*out = NULL;
	if (len > HTTP_MAX_BODY) {
		hreq_error(h, 413, "body_too_large", NULL, "request body is %zu bytes, over the %d-byte limit",
			   len, HTTP_MAX_BODY);
		return -1;
	}
	if (len == 0) {
		*out = json_object();
		return 0;
	}
	if (router.hooks->body_check && !router.hooks->body_check(h, (const char *)evbuffer_pullup(in, -1), len))
		return -1;
	body = json_loadb((const char *)evbuffer_pullup(in, -1), len, JSON_REJECT_DUPLICATES, &jerr);
	if (!body) {
		hreq_error(h, 400, "invalid_json", NULL, "malformed JSON at line %d column %d: %s", jerr.line,
			   jerr.column, jerr.text);
		return -1;
	}
	if (!json_is_object(body)) {
		json_decref(body);
		hreq_error(h, 400, "invalid_body", NULL, "the request body must be a JSON object");
		return -1;
	}
	*out = body;
	return 0;
}

char *hreq_query(const struct hreq *h, const char *key)
{
	struct evkeyvalq q;
	const char *v;
	char *out = NULL;

	if (!h->query)
		return NULL;
	if (evhttp_parse_query_str(h->query, &q) == 0 && (v = evhttp_find_header(&q, key)) != NULL)
		out = xstrdup(v);
	evhttp_clear_headers(&q);
	return out;
}

const char *hreq_header(const struct hreq *h, const char *key)
{
	return h->req ? evhttp_find_header(evhttp_request_get_input_headers(h->req), key) : NULL;
}

void hreq_add_header(struct hreq *h, const char *key, const char *value)
{
	if (h->req)
		evhttp_add_header(evhttp_request_get_output_headers(h->req), key, value);
}

long long http_parse_id(const char *s)
{
	char *end;
	long long v;

	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v <= 0)
		return -1;
	return v;
}

int http_parse_int(const char *text, long long min, long long max, long long *v)
{
	char *end;

	if (!*text || strspn(text, "+-0123456789") != strlen(text))
		return -1;
	errno = 0;
	*v = strtoll(text, &end, 10);
	return errno || *end || *v < min || *v > max ? -1 : 0;
}

const struct http_route *http_route_find(const struct http_route *routes, size_t n, const char *method,
	const char *path)
{
	for (size_t i = 0; i < n; i++) {
		char *params[HTTP_MAX_PARAMS] = { NULL };
		bool match = strcmp(routes[i].method, method) == 0 && route_match(routes[i].pattern, path, params);
		for (int k = 0; k < HTTP_MAX_PARAMS; k++)
			free(params[k]);
		if (match)
			return &routes[i];
	}
	return NULL;
}

static void http_dispatch(struct evhttp_request *req, void *arg)
{
	struct app *app = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *raw_path = uri ? evhttp_uri_get_path(uri) : NULL;
	const char *raw_query = uri ? evhttp_uri_get_query(uri) : NULL;
	struct hreq *h = xcalloc(1, sizeof *h);
	const struct http_route *found = NULL;
	bool path_known = false, bad_path = false;
	char allow[64] = "";
	size_t path_len = 0;
	char *nul_key = NULL;

	h->req = req;
	h->app = app;
	h->t0_ms = util_mono_ms();
	h->method = method_name(evhttp_request_get_command(req));
	h->path = evhttp_uridecode(raw_path && *raw_path ? raw_path : "/", 0, &path_len);
	if (!h->path)
		h->path = xstrdup("/");
	else if (strlen(h->path) != path_len) /* a %00 would cut the path short: /v1/jobs/1%00 is not job 1 */
		bad_path = true;
	h->query = raw_query ? xstrdup(raw_query) : NULL;
	app->inflight++;
	{
		struct evhttp_connection *evcon = evhttp_request_get_connection(req);
		struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
		evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
		if (evcon)
			evhttp_connection_set_closecb(evcon, hreq_on_close, h);
		if (fd >= 0) {
			h->watch = event_new(app->base, fd, EV_READ, hreq_on_readable, h);
			event_add(h->watch, NULL);
		}
	}

	if (app->stopping) {
		hreq_error(h, 503, "shutting_down", NULL, "the server is shutting down");
		return;
	}
	if (bad_path || !utf8_valid(h->path)) {
		free(h->path);
		h->path = xstrdup("/");
		hreq_error(h, 400, "invalid_request", "path", "the URL path holds a NUL byte or is not UTF-8");
		return;
	}
	if (query_nul(h->query, &nul_key)) {
		hreq_error(h, 400, "invalid_request", nul_key, "query parameter %s holds a NUL byte", nul_key);
		free(nul_key);
		return;
	}
	for (size_t i = 0; i < router.n; i++) {
		const struct http_route *r = &router.routes[i];
		char *params[HTTP_MAX_PARAMS] = { NULL };
		if (!route_match(r->pattern, h->path, params))
			continue;
		path_known = true;
		if (strcmp(r->method, h->method) == 0) {
			found = r;
			h->route = found->pattern;
			memcpy(h->param, params, sizeof params);
			break;
		}
		if (strlen(allow) + strlen(r->method) + 3 < sizeof allow) {
			if (allow[0])
				strcat(allow, ", ");
			strcat(allow, r->method);
		}
		for (int k = 0; k < HTTP_MAX_PARAMS; k++)
			free(params[k]);
	}
	if (found) {
		if (router.hooks->guard)
			router.hooks->guard(h, found);
		else
			found->handler(h);
		return;
	}
	if (path_known) {
		hreq_add_header(h, "Allow", allow);
		hreq_error(h, 405, "method_not_allowed", NULL, "%s is not allowed on %s (allowed: %s)",
			   h->method, h->path, allow);
		return;
	}
	hreq_error(h, 404, "not_found", NULL, "no route for %s %s", h->method, h->path);
}

void http_setup(struct app *app, const struct http_route *routes, size_t n, const struct http_hooks *hooks)
{
	router.routes = routes;
	router.n = routes ? n : 0;
	router.hooks = hooks ? hooks : &no_hooks;
	evhttp_set_allowed_methods(app->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
				   EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	evhttp_set_max_body_size(app->http, HTTP_HARD_MAX_BODY);
	evhttp_set_max_headers_size(app->http, 64 * 1024);
	evhttp_set_timeout(app->http, 120);
	evhttp_set_default_content_type(app->http, "application/json");
	evhttp_set_gencb(app->http, http_dispatch, app);
}

int hreq_note(struct hreq *h, const json_t *body, const char **note)
{
	const json_t *v = json_object_get(body, "note");

	*note = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v) || json_string_length(v) > HTTP_NOTE_MAX) {
		hreq_error(h, 400, "invalid_request", "note", "note must be a string of at most %d bytes", HTTP_NOTE_MAX);
		return -1;
	}
	*note = json_string_value(v);
	return 0;
}

const char *hreq_by(const struct hreq *h, char *buf, size_t n)
{
	if (h->who.name[0])
		snprintf(buf, n, "%s", h->who.name);
	else
		snprintf(buf, n, "token %lld", h->who.token_id);
	return buf;
}

json_t *hreq_db_doc(struct hreq *h, PGresult *res, const char *err, const char *thing)
{
	const char *value;
	json_t *doc;

	if (hreq_db_value(h, res, err, &value) < 0)
		return NULL;
	if (!value) {
		hreq_error(h, 404, "not_found", NULL, "no such %s: %s", thing, h->param[0] ? h->param[0] : "");
		return NULL;
	}
	doc = json_loads(value, 0, NULL);
	if (!doc)
		hreq_error(h, 500, "internal", NULL, "the database answered unreadable JSON");
	return doc;
}
