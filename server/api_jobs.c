/* /v1/jobs handlers: submit (the envelope, or a raw AI Toolkit YAML/JSON file with query options;
 * envelope validation, atconfig_validate, kind, RECOVERY defaults, the start time, Idempotency-Key),
 * get, list (keyset on id descending, cursor = last id as a string; state, owner, kind, label and pool filters),
 * attempts, events, cancel, retry, priority, pool (a move to another) and start (a scheduled job now). Each request is one SQL
 * statement (sql/job_*.sql); submits are coalesced into rung_submit_batch() statements
 * (sql/submit_batch.sql, batch.c). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "api_jobs.h"
#include "after.h"
#include "app.h"
#include "atconfig.h"
#include "auth.h"
#include "batch.h"
#include "db.h"
#include "http.h"
#include "labels.h"
#include "pool.h"
#include "priority.h"
#include "lease.h"
#include "log.h"
#include "sql.h"
#include "util.h"
#include "when.h"
#include "yamljson.h"

#define NAME_MAX_LEN 256
#define IDEM_KEY_MAX_LEN 256
#define LIST_DEFAULT 50
#define LIST_MAX 500

/* RECOVERY keys (docs/DESIGN.md): default and allowed range; nullable ones default to null. */
struct recovery_key {
	const char *name;
	enum { RK_BOOL, RK_INT } type;
	bool nullable;
	long long def, min, max; /* def ignored when nullable (null), or the bool default */
};

static const struct recovery_key recovery_keys[] = {
	{ "scale_up", RK_BOOL, false, 1, 0, 1 },
	{ "max_attempts", RK_INT, false, 10, 1, 1000 },
	{ "max_env_retries", RK_INT, false, 3, 0, 100 },
	{ "max_lost", RK_INT, false, 3, 0, 100 },
	{ "max_gpu_seconds", RK_INT, true, 0, 1, 100000000 },
	{ "validate_steps", RK_INT, true, 0, 1, 100000000 },
	{ "early_steps", RK_INT, false, 10, 0, 1000000 },
	{ "quarantine_after", RK_INT, false, 2, 1, 1000 },
	{ "env_fault_window_s", RK_INT, false, 3600, 1, 31536000 },
	{ "stall_timeout_s", RK_INT, true, 0, 0, 604800 }, /* null: the worker's --stall-timeout-s; 0: never */
};

static const char *const submit_keys[] = { "config", "name", "priority", "recovery", "labels", "run_after", "start_in_s",
					   "pool", "after", "after_when", "start_by", "start_within_s" };


static int fail(char **field, char **message, const char *f, char *msg)
{
	*field = xstrdup(f);
	*message = msg;
	return -1;
}

static int check_recovery(const json_t *in, json_t **out, char **field, char **message)
{
	const char *key;
	json_t *v;
	json_t *rec = json_object();

	if (in && !json_is_object(in)) {
		json_decref(rec);
		return fail(field, message, "recovery", xstrdup("recovery must be an object"));
	}
	json_object_foreach((json_t *)in, key, v) {
		const struct recovery_key *k = NULL;
		for (size_t i = 0; i < ARRAY_LEN(recovery_keys); i++)
			if (strcmp(recovery_keys[i].name, key) == 0)
				k = &recovery_keys[i];
		if (!k) {
			json_decref(rec);
			*field = xasprintf("recovery.%s", key);
			*message = xasprintf("unknown recovery setting \"%s\"", key);
			return -1;
		}
	}
	for (size_t i = 0; i < ARRAY_LEN(recovery_keys); i++) {
		const struct recovery_key *k = &recovery_keys[i];
		v = in ? json_object_get(in, k->name) : NULL;
		if (!v || (json_is_null(v) && k->nullable)) {
			if (k->nullable)
				json_object_set_new(rec, k->name, json_null());
			else if (k->type == RK_BOOL)
				json_object_set_new(rec, k->name, json_boolean(k->def));
			else
				json_object_set_new(rec, k->name, json_integer(k->def));
			continue;
		}
		if (k->type == RK_BOOL) {
			if (!json_is_boolean(v))
				goto bad;
			json_object_set(rec, k->name, v);
			continue;
		}
		if (!json_is_integer(v) || json_integer_value(v) < k->min || json_integer_value(v) > k->max)
			goto bad;
		json_object_set(rec, k->name, v);
		continue;
bad:
		json_decref(rec);
		*field = xasprintf("recovery.%s", k->name);
		if (k->type == RK_BOOL)
			*message = xasprintf("recovery.%s must be true or false", k->name);
		else
			*message = xasprintf("recovery.%s must be an integer from %lld to %lld%s", k->name, k->min,
					     k->max, k->nullable ? ", or null" : "");
		return -1;
	}
	*out = rec;
	return 0;
}

/* The start time of a submit (migration 025): "run_after", an RFC 3339 time with its zone (a past one
 * means now; at most WHEN_MAX_AHEAD_S ahead of this rungd's clock), or "start_in_s", 1 to
 * WHEN_MAX_AHEAD_S seconds; at most one of them; null is absent. Sets *run_after_ms (-1: none) and
 * *start_in_s (0: none) and returns 0, or -1 with *field and *message (heap). */
static int check_start(const json_t *body, int64_t *run_after_ms, long long *start_in_s, char **field, char **message)
{
	const json_t *at = json_object_get(body, "run_after"), *in = json_object_get(body, "start_in_s");

	*run_after_ms = -1;
	*start_in_s = 0;
	if (at && json_is_null(at))
		at = NULL;
	if (in && json_is_null(in))
		in = NULL;
	if (at && in)
		return fail(field, message, "start_in_s",
			    xstrdup("give run_after (when to start) or start_in_s (in how many seconds), not both"));
	if (at) {
		if (!json_is_string(at) || util_time_parse(json_string_value(at), run_after_ms) < 0)
			return fail(field, message, "run_after",
				    xstrdup("run_after must be an RFC 3339 time with its zone, e.g. 2026-12-01T22:00:00Z"));
		if (*run_after_ms - util_wall_ms() > WHEN_MAX_AHEAD_S * 1000)
			return fail(field, message, "run_after",
				    xstrdup("run_after is more than 365 days ahead, the most a job may wait"));
	}
	if (in) {
		if (!json_is_integer(in) || json_integer_value(in) < 1 || json_integer_value(in) > WHEN_MAX_AHEAD_S)
			return fail(field, message, "start_in_s",
				    xasprintf("start_in_s must be an integer from 1 to %lld (365 days)", WHEN_MAX_AHEAD_S));
		*start_in_s = (long long)json_integer_value(in);
	}
	return 0;
}

/* The start deadline of a submit (migration 039): "start_by", an RFC 3339 time with its zone, ahead of
 * this rungd's clock and of the job's start time, at most WHEN_MAX_AHEAD_S ahead; or "start_within_s",
 * 1 to WHEN_MAX_AHEAD_S seconds, more than its start_in_s; at most one of them; null is absent. The
 * start time is the checked one (run_after_ms, start_in_s: check_start's). A check only: the
 * item carries the values as the body has them (submit_item_json). Returns 0, or -1 with *field and
 * *message (heap). */
static int check_deadline(const json_t *body, int64_t run_after_ms, long long start_in_s, char **field,
			  char **message)
{
	const json_t *by = json_object_get(body, "start_by"), *within = json_object_get(body, "start_within_s");
	int64_t now = util_wall_ms(), starts = run_after_ms >= 0 ? run_after_ms : now + start_in_s * 1000, ends;

	if (by && json_is_null(by))
		by = NULL;
	if (within && json_is_null(within))
		within = NULL;
	if (!by && !within)
		return 0;
	if (by && within)
		return fail(field, message, "start_within_s",
			    xstrdup("give start_by (a time) or start_within_s (in how many seconds), not both"));
	if (by) {
		if (!json_is_string(by) || util_time_parse(json_string_value(by), &ends) < 0)
			return fail(field, message, "start_by",
				    xstrdup("start_by must be an RFC 3339 time with its zone, e.g. 2026-12-01T22:00:00Z"));
		if (ends - now > WHEN_MAX_AHEAD_S * 1000)
			return fail(field, message, "start_by", xstrdup("start_by is more than 365 days ahead"));
	} else {
		if (!json_is_integer(within) || json_integer_value(within) < 1 || json_integer_value(within) > WHEN_MAX_AHEAD_S)
			return fail(field, message, "start_within_s",
				    xasprintf("start_within_s must be an integer from 1 to %lld (365 days)", WHEN_MAX_AHEAD_S));
		ends = now + (int64_t)json_integer_value(within) * 1000;
	}
	if (ends <= now)
		return fail(field, message, "start_by", xstrdup("start_by has passed: the job could never start by then"));
	if (ends <= starts)
		return fail(field, message, by ? "start_by" : "start_within_s",
			    xstrdup("the start deadline is not after the job's start time (run_after or start_in_s): it could "
				    "never start by then"));
	return 0;
}

/* The jobs a submit runs after (migration 033): absent, null, or a list of 1 to AFTER_MAX job ids
 * (integers from 1); repeats are dropped by the statement. Whether they exist and are the caller's
 * the statement says (rung_submit_batch: "after_unknown"). Returns 0, or -1 with *field, *message. */
static int check_after(const json_t *after, char **field, char **message)
{
	size_t i;
	json_t *v;

	if (!after || json_is_null(after))
		return 0;
	if (!json_is_array(after) || json_array_size(after) == 0 || json_array_size(after) > AFTER_MAX)
		return fail(field, message, "after",
			    xasprintf("after must be a list of 1 to %d job ids: the jobs that must succeed before this one starts",
				      AFTER_MAX));
	json_array_foreach(after, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > AFTER_ID_MAX)
			return fail(field, message, "after", xasprintf("after[%zu] must be a job id (an integer from 1)", i));
	}
	return 0;
}

/* Which endings of the jobs it runs after release a job (migration 036): absent or null (succeeded),
 * or one of AFTER_WHEN_RULE's words, and only beside a list of jobs (after, given as after_name: a
 * submit's "after", a change's). Returns 0, or -1 with *field, *message. */
static int check_after_when(const json_t *when, const json_t *after, const char *after_name, char **field,
			    char **message)
{
	if (!when || json_is_null(when))
		return 0;
	if (!after_when_ok(json_string_value(when)))
		return fail(field, message, "after_when", xstrdup("after_when must be " AFTER_WHEN_RULE));
	if (!json_is_array(after))
		return fail(field, message, "after_when",
			    xasprintf("after_when needs %s: the jobs whose endings it waits for", after_name));
	return 0;
}

int api_jobs_check_submit(const json_t *body, json_t **recovery, const char **name, int *priority,
			  char **field, char **message)
{
	int64_t run_after_ms;
	long long start_in_s;
	const char *key;
	json_t *v, *config;

	*recovery = NULL;
	*field = *message = NULL;
	json_object_foreach((json_t *)body, key, v) {
		bool known = false;
		for (size_t i = 0; i < ARRAY_LEN(submit_keys); i++)
			known |= strcmp(submit_keys[i], key) == 0;
		if (!known) {
			*field = xstrdup(key);
			*message = xasprintf("unknown field \"%s\" (expected config, name, priority, recovery, labels, run_after, "
					     "start_in_s, start_by, start_within_s, pool, after, after_when)", key);
			return -1;
		}
	}
	config = json_object_get(body, "config");
	if (!config)
		return fail(field, message, "config", xstrdup("config is required: the AI Toolkit config object"));
	if (!json_is_object(config))
		return fail(field, message, "config", xstrdup("config must be an object"));
	v = json_object_get(body, "name");
	*name = NULL;
	if (v && !json_is_null(v)) {
		if (!json_is_string(v))
			return fail(field, message, "name", xstrdup("name must be a string"));
		if (json_string_length(v) > NAME_MAX_LEN)
			return fail(field, message, "name", xasprintf("name is longer than %d bytes", NAME_MAX_LEN));
		*name = json_string_value(v);
	}
	v = json_object_get(body, "priority");
	*priority = PRIORITY_DEFAULT;
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < PRIORITY_MIN || json_integer_value(v) > PRIORITY_MAX)
			return fail(field, message, "priority",
				    xasprintf("priority must be an integer from %d to %d", PRIORITY_MIN, PRIORITY_MAX));
		*priority = (int)json_integer_value(v);
	}
	if (labels_check(json_object_get(body, "labels"), field, message) < 0)
		return -1;
	v = json_object_get(body, "pool");
	if (v && !json_is_null(v) && !pool_name_ok(json_string_value(v)))
		return fail(field, message, "pool", xstrdup("pool must be a pool name: " POOL_NAME_RULE));
	if (check_start(body, &run_after_ms, &start_in_s, field, message) < 0)
		return -1;
	if (check_deadline(body, run_after_ms, start_in_s, field, message) < 0)
		return -1;
	if (check_after(json_object_get(body, "after"), field, message) < 0 ||
	    check_after_when(json_object_get(body, "after_when"), json_object_get(body, "after"), "after", field,
			     message) < 0)
		return -1;
	if (check_recovery(json_object_get(body, "recovery"), recovery, field, message) < 0)
		return -1;
	if (atconfig_validate(config, field, message) != 0) {
		json_decref(*recovery);
		*recovery = NULL;
		if (!*field)
			*field = xstrdup("config");
		if (!*message)
			*message = xstrdup("invalid AI Toolkit config");
		return -1;
	}
	return 0;
}

/* ---- raw submit bodies: the AI Toolkit file itself (YAML, or JSON without the envelope) ----
 * Rule: a body (YAML or JSON) is the AI Toolkit file itself when its top level has "job" or its
 * "config" is an object with "process"; otherwise it is the envelope, whose "config" holds the
 * whole file. A raw file takes name, priority, labels, the pool, the start time (run_after or start_in_s) and
 * the RECOVERY settings as query parameters. */

#define RAW_YAML_MAX_NODES 100000 /* values a YAML body may expand to, aliases counted in full */

static bool is_yaml_type(const char *ctype)
{
	static const char *const types[] = { "application/yaml", "text/yaml", "application/x-yaml" };
	size_t n;

	if (!ctype)
		return false;
	ctype += strspn(ctype, " \t");
	n = strcspn(ctype, "; \t");
	for (size_t i = 0; i < ARRAY_LEN(types); i++)
		if (strlen(types[i]) == n && strncasecmp(types[i], ctype, n) == 0)
			return true;
	return false;
}

static bool body_is_file(const json_t *body)
{
	const json_t *cfg = json_object_get(body, "config");

	return json_object_get(body, "job") || (json_is_object(cfg) && json_object_get(cfg, "process"));
}

/* Nesting depth of v, counting stops past cap. */
static int value_depth(const json_t *v, int cap)
{
	int d = 0, c;
	const char *k;
	json_t *x;
	size_t i;

	if (cap < 0)
		return 1;
	if (json_is_object(v)) {
		json_object_foreach((json_t *)v, k, x)
			if ((c = value_depth(x, cap - 1)) > d)
				d = c;
		return d + 1;
	}
	if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if ((c = value_depth(x, cap - 1)) > d)
				d = c;
		return d + 1;
	}
	return 0;
}

int api_jobs_parse_yaml(const char *buf, size_t len, json_t **out, const char **error, char **message)
{
	char *err = NULL;
	json_t *v;

	*out = NULL;
	*message = NULL;
	v = len ? yamljson_parse_capped(buf, len, RAW_YAML_MAX_NODES, &err) : json_null();
	if (!v) {
		*error = "invalid_yaml";
		*message = xasprintf("malformed YAML at %s", err ? err : "?");
		free(err);
		return -1;
	}
	if (!json_is_object(v)) {
		json_decref(v);
		*error = "invalid_body";
		*message = xstrdup("the YAML body must be a mapping: the AI Toolkit config file");
		return -1;
	}
	if (value_depth(v, AUTH_JSON_MAX_DEPTH) > AUTH_JSON_MAX_DEPTH) {
		json_decref(v);
		*error = "json_too_deep";
		*message = xasprintf("YAML nesting is deeper than the limit of %d", AUTH_JSON_MAX_DEPTH);
		return -1;
	}
	*out = v;
	return 0;
}

/* Reads a YAML body into *out (new mapping), typed as AI Toolkit's loader does. On failure answers
 * 413 (over HTTP_MAX_BODY) or 400 (api_jobs_parse_yaml's) and returns -1: h is gone. */
static int read_yaml_body(struct hreq *h, json_t **out)
{
	struct evbuffer *in = h->req ? evhttp_request_get_input_buffer(h->req) : NULL;
	size_t len = in ? evbuffer_get_length(in) : 0;
	const char *error;
	char *message = NULL;

	*out = NULL;
	if (len > HTTP_MAX_BODY) {
		hreq_error(h, 413, "body_too_large", NULL, "request body is %zu bytes, over the %d-byte limit",
			   len, HTTP_MAX_BODY);
		return -1;
	}
	if (api_jobs_parse_yaml(len ? (const char *)evbuffer_pullup(in, -1) : NULL, len, out, &error, &message) < 0) {
		hreq_error(h, 400, error, NULL, "%s", message);
		free(message);
		return -1;
	}
	return 0;
}

/* Checks one query option of a raw submit and stores it in env (name, priority, labels, run_after,
 * start_in_s, pool, after: api_jobs_check_submit then reads them as the envelope's) or rec (RECOVERY).
 * Returns 0, or -1 with *message (heap) saying what the parameter must be. */
static int query_option(const char *key, const char *val, json_t *env, json_t *rec, char **message)
{
	const struct recovery_key *k = NULL;
	long long n;

	if (strcmp(key, "name") == 0) {
		json_t *name = strlen(val) > NAME_MAX_LEN ? NULL : json_string(val); /* NULL: not UTF-8 */
		if (!name) {
			*message = xasprintf("query parameter name must be UTF-8 text of at most %d bytes", NAME_MAX_LEN);
			return -1;
		}
		json_object_set_new(env, "name", name);
		return 0;
	}
	if (strcmp(key, "priority") == 0) {
		if (http_parse_int(val, PRIORITY_MIN, PRIORITY_MAX, &n) < 0) {
			*message = xasprintf("query parameter priority must be an integer from %d to %d", PRIORITY_MIN,
					     PRIORITY_MAX);
			return -1;
		}
		json_object_set_new(env, "priority", json_integer(n));
		return 0;
	}
	if (strcmp(key, "labels") == 0) {
		json_t *labels = labels_parse(val, "query parameter labels", message);
		if (!labels)
			return -1;
		json_object_set_new(env, "labels", labels);
		return 0;
	}
	if (strcmp(key, "pool") == 0) {
		if (!pool_name_ok(val)) {
			*message = xstrdup("query parameter pool must be a pool name: " POOL_NAME_RULE);
			return -1;
		}
		json_object_set_new(env, "pool", json_string(val));
		return 0;
	}
	if (strcmp(key, "run_after") == 0) {
		int64_t ms;
		if (util_time_parse(val, &ms) < 0) {
			*message = xstrdup("query parameter run_after must be an RFC 3339 time with its zone, e.g. "
					   "2026-12-01T22:00:00Z (+ written %2B)");
			return -1;
		}
		json_object_set_new(env, "run_after", json_string(val));
		return 0;
	}
	if (strcmp(key, "after") == 0) { /* after=12,13: the ids, as the envelope's list */
		json_t *ids = after_parse(val);
		if (!ids) {
			*message = xasprintf("query parameter after must be 1 to %d job ids, comma-separated (after=12,13)",
					     AFTER_MAX);
			return -1;
		}
		json_object_set_new(env, "after", ids);
		return 0;
	}
	if (strcmp(key, "after_when") == 0) { /* after_when=ended: as the envelope's, checked with it */
		if (!after_when_ok(val)) {
			*message = xstrdup("query parameter after_when must be " AFTER_WHEN_RULE);
			return -1;
		}
		json_object_set_new(env, "after_when", json_string(val));
		return 0;
	}
	if (strcmp(key, "start_by") == 0) { /* as the envelope's, checked with it */
		int64_t ms;
		if (util_time_parse(val, &ms) < 0) {
			*message = xstrdup("query parameter start_by must be an RFC 3339 time with its zone, e.g. "
					   "2026-12-01T22:00:00Z (+ written %2B)");
			return -1;
		}
		json_object_set_new(env, "start_by", json_string(val));
		return 0;
	}
	if (strcmp(key, "start_within_s") == 0 || strcmp(key, "start_in_s") == 0) { /* seconds from now */
		if (http_parse_int(val, 1, WHEN_MAX_AHEAD_S, &n) < 0) {
			*message = xasprintf("query parameter %s must be an integer from 1 to %lld (365 days)", key,
					     WHEN_MAX_AHEAD_S);
			return -1;
		}
		json_object_set_new(env, key, json_integer(n));
		return 0;
	}
	for (size_t i = 0; i < ARRAY_LEN(recovery_keys); i++)
		if (strcmp(recovery_keys[i].name, key) == 0)
			k = &recovery_keys[i];
	if (!k) {
		*message = xasprintf("unknown query parameter \"%s\" (expected name, priority, labels, run_after, "
				     "start_in_s, start_by, start_within_s, pool, after, after_when or a recovery setting)", key);
		return -1;
	}
	if (k->type == RK_BOOL) {
		if (strcmp(val, "true") != 0 && strcmp(val, "false") != 0) {
			*message = xasprintf("query parameter %s must be true or false", key);
			return -1;
		}
		json_object_set_new(rec, key, json_boolean(val[0] == 't'));
		return 0;
	}
	if (http_parse_int(val, k->min, k->max, &n) < 0) {
		*message = xasprintf("query parameter %s must be an integer from %lld to %lld", key, k->min, k->max);
		return -1;
	}
	json_object_set_new(rec, key, json_integer(n));
	return 0;
}

/* Wraps a raw AI Toolkit file (stolen) into the envelope api_jobs_check_submit takes, with the query
 * options. Returns 0 with *out, or answers 400 naming the parameter and returns -1: h is gone. */
static int raw_envelope(struct hreq *h, json_t *file, const char *also, json_t **out)
{
	struct evkeyvalq q;
	struct evkeyval *kv;
	json_t *env = json_object(), *rec = json_object();
	char *message = NULL;
	int rc = -1;

	TAILQ_INIT(&q);
	*out = NULL;
	json_object_set_new(env, "config", file);
	if (h->query && *h->query && evhttp_parse_query_str(h->query, &q) != 0) {
		hreq_error(h, 400, "invalid_request", NULL, "malformed query string");
		goto out;
	}
	for (kv = q.tqh_first; kv; kv = kv->next.tqe_next) {
		for (struct evkeyval *p = q.tqh_first; p != kv; p = p->next.tqe_next)
			if (strcmp(p->key, kv->key) == 0) {
				hreq_error(h, 400, "invalid_request", kv->key, "query parameter %s is given twice",
					   kv->key);
				goto out;
			}
		if (also && strcmp(kv->key, also) == 0)
			continue;
		if (query_option(kv->key, kv->value, env, rec, &message) < 0) {
			hreq_error(h, 400, "invalid_request", kv->key, "%s", message);
			goto out;
		}
	}
	if (json_object_size(rec) > 0)
		json_object_set(env, "recovery", rec);
	*out = env;
	env = NULL;
	rc = 0;
out:
	evhttp_clear_headers(&q);
	free(message);
	json_decref(rec);
	json_decref(env);
	return rc;
}

/* Reads a submit body into envelope form: a JSON envelope as it is, a raw file (YAML by its
 * Content-Type, or JSON by body_is_file) wrapped with its query options. Query options on an
 * envelope are refused, but for the parameter named also (may be NULL: none), which the caller
 * reads itself in either form. Returns 0 with *out (new reference) and *as_sent true when the
 * envelope is the request body itself (its text, hreq_body_text, is the envelope's), or -1 after
 * answering: h is gone. */
static int read_submit(struct hreq *h, const char *also, json_t **out, bool *as_sent)
{
	json_t *body = NULL;
	struct evkeyvalq q;
	struct evkeyval *kv;

	*out = NULL;
	*as_sent = false;
	if (is_yaml_type(hreq_header(h, "Content-Type")) ? read_yaml_body(h, &body) < 0 : hreq_body(h, &body) < 0)
		return -1;
	if (body_is_file(body))
		return raw_envelope(h, body, also, out);
	TAILQ_INIT(&q);
	if (h->query && *h->query && evhttp_parse_query_str(h->query, &q) != 0) {
		hreq_error(h, 400, "invalid_request", NULL, "malformed query string");
		goto bad;
	}
	for (kv = q.tqh_first; kv; kv = kv->next.tqe_next)
		if (!also || strcmp(kv->key, also) != 0) {
			hreq_error(h, 400, "invalid_request", kv->key,
				   "query options apply only when the body is the AI Toolkit config itself; the "
				   "envelope carries name, priority, recovery and the start time in its body");
			goto bad;
		}
	evhttp_clear_headers(&q);
	*out = body;
	*as_sent = !is_yaml_type(hreq_header(h, "Content-Type"));
	return 0;
bad:
	evhttp_clear_headers(&q);
	json_decref(body);
	return -1;
}

int api_jobs_read_submit(struct hreq *h, const char *also, json_t **body, json_t **recovery)
{
	const char *name;
	char *field = NULL, *message = NULL;
	int priority;
	bool as_sent;

	*recovery = NULL;
	if (read_submit(h, also, body, &as_sent) < 0)
		return -1;
	if (api_jobs_check_submit(*body, recovery, &name, &priority, &field, &message) < 0) {
		hreq_error(h, 400, "invalid_request", field, "%s", message);
		free(field);
		free(message);
		json_decref(*body);
		*body = NULL;
		return -1;
	}
	return 0;
}

/* Submits are coalesced (batch.c): one rung_submit_batch() statement per batch, one NOTIFY after
 * it (lease_announce), each reply (201, 200 for a repeated Idempotency-Key, 409) after it committed. */
struct submit_item {
	struct hreq *h;
	json_t *item;             /* {"name", "owner", "kind", "priority", "recovery", "key", "run_after_ms"?,
				   * "start_in_s"?, "after"?, "after_when"?, "after_any"?} */
	char *text;               /* the statement's item: those and "body", the envelope */
};

#define SUBMIT_BATCH_MAX 256
#define SUBMIT_INFLIGHT 4
#define SUBMIT_MIN_FILL 8     /* beside a submit statement in flight, the next waits for 8 jobs */

static void submit_reply(struct hreq *h, const char *status, long long id, const char *job, const json_t *item);

static const char *submit_text(void *item)
{
	return ((struct submit_item *)item)->text;
}

/* The statement's item as text: item's members and "body": the envelope. When the envelope is
 * the request body itself its text is spliced in as it was sent (json_loadb accepted it, so
 * Postgres' jsonb does): printing the parsed 3 KB config again was ~16 % of rungd's CPU per
 * submit. Otherwise the envelope is printed. A new string. */
static char *submit_item_text(const json_t *item, const json_t *body, const char *sent, size_t sent_len)
{
	char *meta = json_dumps(item, JSON_COMPACT), *envelope = NULL, *text = NULL;

	if (sent && !memchr(sent, '\0', sent_len)) { /* the body is not NUL-terminated where it lies */
		envelope = xmalloc(sent_len + 1);
		memcpy(envelope, sent, sent_len);
		envelope[sent_len] = '\0';
	} else {
		envelope = json_dumps(body, JSON_COMPACT);
	}
	if (meta && envelope)
		text = util_json_append(meta, "\"body\": ", envelope, NULL);
	free(meta);
	free(envelope);
	return text;
}

/* Answers 403 naming field (the submit's pool): the job's owner may not use the pool it asked for
 * (migration 027); doc is the statement's {"pool", "pools": [the token's pools]}
 * (rung_submit_pool_refusal; borrowed). */
static void pool_refused(struct hreq *h, const json_t *doc, const char *field)
{
	const char *pool = json_string_value(json_object_get(doc, "pool"));
	char *list = pool_list_join(json_object_get(doc, "pools"), ", ", "none");

	hreq_error(h, 403, "forbidden", field, "the job's owner may not use pool %s; its token's pools: %s (an admin "
		   "sets them: POST /v1/tokens/{id}/pools)", pool ? pool : "?", list);
	free(list);
}

/* Answers 409 naming field (the submit's after): job ID, which the job was to run after only if it
 * failed, has succeeded: the job would never start; nothing was stored (migration 036: "after_never"). */
static void after_never(struct hreq *h, long long id, const char *field)
{
	hreq_error(h, 409, "after_never", field, "after names job %lld, which succeeded: with after_when failed this job "
		   "runs only if the jobs it runs after fail or are cancelled, so it would never start", id);
}

/* Answers 400 naming field (the submit's after): job ID, which the submit runs after, does not exist,
 * or (for a submitter) is not its own; nothing was stored (rung_submit_batch's "after_unknown"). */
static void after_unknown(struct hreq *h, long long id, const char *field)
{
	if (h->who.role == AUTH_SUBMITTER)
		hreq_error(h, 400, "invalid_request", field, "after names job %lld, which is not a job of yours "
			   "(a job runs only after jobs its own owner submitted)", id);
	else
		hreq_error(h, 400, "invalid_request", field, "after names job %lld, which does not exist", id);
}

static void submits_done(void **items, int n, PGresult *res, const char *err, void *arg)
{
	bool ok = res && PQresultStatus(res) == PGRES_TUPLES_OK;
	int *row = ok ? batch_rows(res, n) : NULL;
	const char *value;

	(void)arg;
	for (int i = 0; i < n; i++) {
		struct submit_item *s = items[i];
		if (!ok)
			hreq_db_value(s->h, res, err, &value); /* answers 503 or 500 */
		else if (row[i] < 0 || PQgetisnull(res, row[i], 3))
			hreq_error(s->h, 500, "internal", NULL, "submit returned nothing");
		else if (!strcmp(PQgetvalue(res, row[i], 1), "pool_refused")) {
			json_t *refusal = json_loads(PQgetvalue(res, row[i], 3), 0, NULL);
			pool_refused(s->h, refusal, "pool");
			json_decref(refusal);
		} else if (!strcmp(PQgetvalue(res, row[i], 1), "after_unknown") ||
			   !strcmp(PQgetvalue(res, row[i], 1), "after_never")) {
			json_t *doc = json_loads(PQgetvalue(res, row[i], 3), 0, NULL);
			long long id = (long long)json_integer_value(json_object_get(doc, "after"));
			if (!strcmp(PQgetvalue(res, row[i], 1), "after_never"))
				after_never(s->h, id, "after");
			else
				after_unknown(s->h, id, "after");
			json_decref(doc);
		} else {
			/* JOB = the lean JOB with the configs spliced in as text (sql/submit_batch.sql) */
			const char *lean = PQgetvalue(res, row[i], 3), *target = PQgetvalue(res, row[i], 4);
			const char *current = PQgetisnull(res, row[i], 5) ? target : PQgetvalue(res, row[i], 5);
			char *job = util_json_append(lean, "\"target_config\": ", target, ", \"current_config\": ", current,
						     NULL);

			if (job)
				submit_reply(s->h, PQgetvalue(res, row[i], 1), atoll(PQgetvalue(res, row[i], 2)), job,
					     s->item);
			else
				hreq_error(s->h, 500, "internal", NULL, "submit returned a malformed job");
			free(job);
		}
		json_decref(s->item);
		free(s->text);
		free(s);
	}
	free(row);
}

static const struct batch_ops submit_ops = { sql_submit_batch, NULL, submits_done, NULL, submit_text };

/* The process's submit coalescer, made on first use for the app's pool. */
static struct batch *submit_batch(struct app *app)
{
	static struct batch *b;
	static struct db *db;

	if (db != app->db) {
		db = app->db;
		b = batch_new(app->base, app->db, &submit_ops, app, SUBMIT_BATCH_MAX, SUBMIT_INFLIGHT, NULL);
		batch_set_min_fill(b, SUBMIT_MIN_FILL);
	}
	return b;
}

/* Answers h for its submit: status "created" (201), "existing" (200, a repeated
 * Idempotency-Key) or "conflict" (409); job is the JOB text, item the submit (both borrowed). */
static void submit_reply(struct hreq *h, const char *status, long long id, const char *job, const json_t *item)
{
	char loc[64];

	if (strcmp(status, "conflict") == 0) {
		hreq_error(h, 409, "idempotency_conflict", NULL,
			   "Idempotency-Key was used for job %lld with a different request", id);
		return;
	}
	snprintf(loc, sizeof loc, "/v1/jobs/%lld", id);
	hreq_add_header(h, "Location", loc);
	if (strcmp(status, "created") == 0) {
		char start[48] = "now";
		if (json_is_integer(json_object_get(item, "run_after_ms")))
			when_format_utc(json_integer_value(json_object_get(item, "run_after_ms")), start, sizeof start);
		else if (json_is_integer(json_object_get(item, "start_in_s")))
			snprintf(start, sizeof start, "in_%llds",
				 (long long)json_integer_value(json_object_get(item, "start_in_s")));
		log_info("job submitted", "job=%lld kind=%s priority=%lld start=%s", id,
			 json_string_value(json_object_get(item, "kind")) ?: "-",
			 (long long)json_integer_value(json_object_get(item, "priority")), start);
		lease_announce(h->app->lease); /* the batch's announces are one NOTIFY */
		hreq_reply_text(h, 201, job);
	} else {
		log_info("job submit repeated", "job=%lld", id);
		hreq_reply_text(h, 200, job);
	}
}

/* Whether the caller may give a job PRIORITY. With rungd --preempt-priority, a priority at that bound
 * or below is urgent: it stops running jobs of its pool (44_preempt.sql), so a submitter token may not
 * give one (support and admin may). Else answers 403 naming field (the priority's) and returns false. */
static bool urgent_allowed(struct hreq *h, long long priority, const char *field)
{
	if (!h->app->has_preempt_priority || priority > h->app->preempt_priority || h->who.role != AUTH_SUBMITTER)
		return true;
	hreq_error(h, 403, "forbidden", field,
		   "priority %lld is urgent (%d or below, rungd --preempt-priority): such a job stops running jobs of its "
		   "pool, so only a support or admin token may give it; use a priority above %d, or ask support to set it",
		   priority, h->app->preempt_priority, h->app->preempt_priority);
	return false;
}

/* The statement's item for a submit whose envelope body (borrowed) was checked: name, owner (the
 * caller), kind, priority, recovery (borrowed), key (the owner-scoped Idempotency-Key or NULL), the
 * start time and the jobs it runs after. A new object, or NULL when out of memory. */
static json_t *submit_item_json(const struct hreq *h, const json_t *body, const char *name, int priority,
				json_t *recovery, int64_t run_after_ms, long long start_in_s, const char *key)
{
	json_t *item = json_pack("{s:s, s:s, s:s, s:i, s:O, s:s?}", "name", name, "owner", h->who.name, "kind",
				 atconfig_kind(json_object_get(body, "config")), "priority", priority, "recovery", recovery,
				 "key", key);

	if (!item)
		return NULL;
	/* the start time, read from the body (whose text, hashed for the Idempotency-Key, carries it):
	 * the statement turns it into run_after by the database's clock (rung_submit_run_after) */
	if (run_after_ms >= 0)
		json_object_set_new(item, "run_after_ms", json_integer(run_after_ms));
	else if (start_in_s > 0)
		json_object_set_new(item, "start_in_s", json_integer(start_in_s));
	{
		/* the start deadline (migration 039), checked with the body (check_deadline), read as it is: the
		 * statement makes it a time by the database's clock (rung_submit_start_by) */
		const json_t *by = json_object_get(body, "start_by"), *within = json_object_get(body, "start_within_s");
		int64_t by_ms;
		if (json_is_string(by) && util_time_parse(json_string_value(by), &by_ms) == 0)
			json_object_set_new(item, "start_by_ms", json_integer(by_ms));
		else if (json_is_integer(within))
			json_object_set(item, "start_within_s", (json_t *)within);
	}
	/* the jobs it runs after (migration 033): a submitter's must be its own, staff's any */
	if (json_is_array(json_object_get(body, "after")))
		json_object_set(item, "after", json_object_get(body, "after"));
	if (json_is_array(json_object_get(body, "after")) || json_is_array(json_object_get(body, "after_items"))) {
		json_object_set_new(item, "after_any", json_boolean(h->who.role != AUTH_SUBMITTER));
		if (json_is_string(json_object_get(body, "after_when")))
			json_object_set(item, "after_when", json_object_get(body, "after_when"));
	}
	return item;
}

void api_jobs_submit(struct hreq *h)
{
	json_t *body = NULL, *recovery = NULL, *config;
	const char *name = NULL, *key, *cfg_name;
	char *field = NULL, *message = NULL;
	char *owner_key = NULL;
	int priority;
	int64_t run_after_ms;
	long long start_in_s;
	bool as_sent;

	if (!auth_submit_allowed(h))
		return;
	if (read_submit(h, NULL, &body, &as_sent) < 0)
		return;
	if (api_jobs_check_submit(body, &recovery, &name, &priority, &field, &message) < 0 ||
	    check_start(body, &run_after_ms, &start_in_s, &field, &message) < 0) {
		hreq_error(h, 400, "invalid_request", field, "%s", message);
		goto out;
	}
	if (!urgent_allowed(h, priority, "priority"))
		goto out;
	key = hreq_header(h, "Idempotency-Key");
	if (key && (strlen(key) == 0 || strlen(key) > IDEM_KEY_MAX_LEN)) {
		hreq_error(h, 400, "invalid_request", NULL, "Idempotency-Key must be 1 to %d bytes",
			   IDEM_KEY_MAX_LEN);
		goto out;
	}
	config = json_object_get(body, "config");
	if (!name) {
		cfg_name = json_string_value(json_object_get(json_object_get(config, "config"), "name"));
		name = cfg_name ? cfg_name : "";
	}
	/* the owner is the caller's token name; Idempotency-Keys are scoped per owner */
	owner_key = key ? xasprintf("%s/%s", h->who.name, key) : NULL;
	{
		struct submit_item *si = xcalloc(1, sizeof *si);
		size_t sent_len = 0;
		const char *sent = as_sent ? hreq_body_text(h, &sent_len) : NULL;

		si->h = h;
		si->item = submit_item_json(h, body, name, priority, recovery, run_after_ms, start_in_s, owner_key);
		/* the job's config is body.config: sent once, inside the body */
		si->text = si->item ? submit_item_text(si->item, body, sent, sent_len) : NULL;
		if (!si->text) {
			json_decref(si->item);
			free(si);
			hreq_error(h, 500, "internal", NULL, "the submit could not be encoded");
			goto out;
		}
		batch_add(submit_batch(h->app), si, -1);
	}
out:
	free(field);
	free(message);
	free(owner_key);
	json_decref(recovery);
	json_decref(body);
}

/* ---- a batch of jobs submitted all or none: POST /v1/jobs/batch ----
 * The batch is one statement of its own (rung_submit_group: one block, rolled back whole at the first
 * refusal), not coalesced with other requests' submits, so that its refusal stores nothing of it and
 * touches no one else's. */
struct group_submit {
	struct hreq *h;
	char *text;	/* the statement's item: {"jobs": [ITEM, ...], "request": the body as sent} */
	size_t n;	/* jobs in the batch */
};

#define GROUP_INFLIGHT 2 /* batches in flight at once: one batch of 500 holds a connection ~0.3 s */

/* Answers 400 naming jobs[k].field with message (a heap string, freed here). */
static void group_refuse(struct hreq *h, size_t k, const char *field, char *message)
{
	char *f = xasprintf("jobs[%zu]%s%s", k, field ? "." : "", field ? field : "");

	hreq_error(h, 400, "invalid_request", f, "jobs[%zu]: %s", k, message ? message : "invalid");
	free(f);
	free(message);
}

/* Checks after_items, the earlier jobs of the batch job k runs after: absent or null, or 1 to AFTER_MAX
 * indexes from 0 to k - 1 (so that a batch holds no cycle), at most AFTER_MAX with after. Returns 0,
 * or -1 with *field (static) and *message (heap). */
static int check_after_items(const json_t *items, const json_t *after, size_t k, const char **field, char **message)
{
	size_t i;
	json_t *v;

	*field = "after_items";
	if (!items || json_is_null(items))
		return 0;
	if (!json_is_array(items) || json_array_size(items) == 0 || json_array_size(items) + json_array_size(after) > AFTER_MAX) {
		*message = xasprintf("after_items must be a list of 1 to %d indexes of earlier jobs of this batch (with after, at "
				     "most %d jobs in all)", AFTER_MAX, AFTER_MAX);
		return -1;
	}
	json_array_foreach(items, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || (size_t)json_integer_value(v) >= k) {
			*message = k ? xasprintf("after_items[%zu] must be the index of an earlier job of this batch (0 to %zu)", i,
						 k - 1)
				     : xasprintf("after_items[%zu]: the first job of a batch has no earlier job to run after", i);
			return -1;
		}
	}
	return 0;
}

/* Job k of a batch: env, its envelope, checked as POST /v1/jobs checks one, with "after_items" beside
 * "after" (and "after_when" for either). key: its owner-scoped Idempotency-Key or NULL. Returns the
 * statement's item (new, with "after_items"; its body is the request's text, spliced in by the
 * caller), or NULL once h is answered (400/403 naming jobs[k].FIELD, 500). */
static json_t *group_item(struct hreq *h, json_t *env, size_t k, const char *key)
{
	json_t *chk = NULL, *recovery = NULL, *item = NULL, *items, *when;
	const char *name = NULL, *afield = NULL;
	char *field = NULL, *message = NULL, *pf;
	int priority;
	int64_t run_after_ms;
	long long start_in_s;

	if (!json_is_object(env)) {
		group_refuse(h, k, NULL, xstrdup("each job of a batch is a submit's envelope: an object with config and "
						 "the fields POST /v1/jobs takes"));
		return NULL;
	}
	chk = json_copy(env);
	items = json_object_get(env, "after_items");
	json_object_del(chk, "after_items");
	if (check_after_items(items, json_object_get(env, "after"), k, &afield, &message) < 0) {
		group_refuse(h, k, afield, message);
		goto out;
	}
	when = json_object_get(env, "after_when");
	if (json_is_array(items) && !json_is_array(json_object_get(env, "after")) && when && !json_is_null(when)) {
		/* after_when with only after_items: checked here, as after's company */
		if (!after_when_ok(json_string_value(when))) {
			group_refuse(h, k, "after_when", xstrdup("after_when must be " AFTER_WHEN_RULE));
			goto out;
		}
		json_object_del(chk, "after_when");
	}
	if (api_jobs_check_submit(chk, &recovery, &name, &priority, &field, &message) < 0 ||
	    check_start(chk, &run_after_ms, &start_in_s, &field, &message) < 0) {
		group_refuse(h, k, field, message);
		goto out;
	}
	pf = xasprintf("jobs[%zu].priority", k);
	if (!urgent_allowed(h, priority, pf)) {
		free(pf);
		goto out;
	}
	free(pf);
	if (!name)
		name = json_string_value(json_object_get(json_object_get(json_object_get(env, "config"), "config"), "name"));
	item = submit_item_json(h, env, name ? name : "", priority, recovery, run_after_ms, start_in_s, key);
	if (!item) {
		hreq_error(h, 500, "internal", NULL, "the batch could not be encoded");
		goto out;
	}
	if (json_is_array(items))
		json_object_set(item, "after_items", items);
out:
	free(field);
	json_decref(recovery);
	json_decref(chk);
	return item;
}

/* Answers a batch from rung_submit_group's rows: one refusal (nothing stored), or one row per job. */
static void group_answer(struct group_submit *g, PGresult *res)
{
	struct hreq *h = g->h;
	int rows = PQntuples(res);
	const char *status = rows > 0 ? PQgetvalue(res, 0, 1) : "";
	long long k = rows > 0 ? atoll(PQgetvalue(res, 0, 0)) : 0, id = rows > 0 ? atoll(PQgetvalue(res, 0, 2)) : 0;
	json_t *doc = rows > 0 ? json_loads(PQgetvalue(res, 0, 3), 0, NULL) : NULL;
	char *f = NULL;
	struct evbuffer *out = NULL;

	if (!strcmp(status, "pool_refused")) {
		f = xasprintf("jobs[%lld].pool", k);
		pool_refused(h, doc, f);
	} else if (!strcmp(status, "after_unknown") || !strcmp(status, "after_never")) {
		f = xasprintf("jobs[%lld].after", k);
		if (!strcmp(status, "after_never"))
			after_never(h, (long long)json_integer_value(json_object_get(doc, "after")), f);
		else
			after_unknown(h, (long long)json_integer_value(json_object_get(doc, "after")), f);
	} else if (!strcmp(status, "conflict")) {
		hreq_error(h, 409, "idempotency_conflict", NULL,
			   "Idempotency-Key was used for a batch with a different request (its job %lld is jobs[%lld]); "
			   "nothing was stored", id, k);
	} else if ((size_t)rows != g->n || (strcmp(status, "created") && strcmp(status, "existing"))) {
		hreq_error(h, 500, "internal", NULL, "the batch's submit returned %d rows for %zu jobs", rows, g->n);
	} else {
		out = evbuffer_new();
		evbuffer_add_printf(out, "{\"jobs\": [");
		for (int r = 0; r < rows; r++) {
			const char *target = PQgetvalue(res, r, 4);
			const char *current = PQgetisnull(res, r, 5) ? target : PQgetvalue(res, r, 5);
			char *job = util_json_append(PQgetvalue(res, r, 3), "\"target_config\": ", target,
						     ", \"current_config\": ", current, NULL);
			if (!job) {
				hreq_error(h, 500, "internal", NULL, "the batch's submit returned a malformed job");
				goto out;
			}
			evbuffer_add_printf(out, "%s%s", r ? ", " : "", job);
			free(job);
		}
		evbuffer_add(out, "]}", 3); /* with its NUL: pulled up as one string */
		if (!strcmp(status, "created")) {
			log_info("jobs submitted", "jobs=%d first_job=%lld last_job=%lld", rows, id,
				 atoll(PQgetvalue(res, rows - 1, 2)));
			lease_announce(h->app->lease);
		} else {
			log_info("job batch repeated", "jobs=%d first_job=%lld", rows, id);
		}
		hreq_reply_text(h, strcmp(status, "created") ? 200 : 201,
				(const char *)evbuffer_pullup(out, -1));
	}
out:
	if (out)
		evbuffer_free(out);
	free(f);
	json_decref(doc);
}

static void groups_done(void **items, int n, PGresult *res, const char *err, void *arg)
{
	const char *value;

	(void)arg;
	for (int i = 0; i < n; i++) {
		struct group_submit *g = items[i];
		if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
			hreq_db_value(g->h, res, err, &value); /* answers 503 or 500 */
		else
			group_answer(g, res);
		free(g->text);
		free(g);
	}
}

static const char *group_text(void *item)
{
	return ((struct group_submit *)item)->text;
}

static const struct batch_ops group_ops = { sql_submit_group, NULL, groups_done, NULL, group_text };

/* The process's batch submitter: one batch per statement, made on first use for the app's pool. */
static struct batch *group_batch(struct app *app)
{
	static struct batch *b;
	static struct db *db;

	if (db != app->db) {
		db = app->db;
		b = batch_new(app->base, app->db, &group_ops, app, 1, GROUP_INFLIGHT, NULL);
	}
	return b;
}

void api_jobs_submit_batch(struct hreq *h)
{
	json_t *body = NULL, *jobs, *items = NULL, *doc = NULL, *v;
	const char *key, *name, *sent;
	char *owner_key = NULL, *meta = NULL, *request = NULL;
	struct evkeyvalq q;
	struct group_submit *g;
	size_t i, sent_len = 0;

	if (!auth_submit_allowed(h))
		return;
	if (hreq_body(h, &body) < 0)
		return;
	TAILQ_INIT(&q);
	if (h->query && *h->query) { /* a batch's jobs carry their options in their envelopes */
		const char *first = evhttp_parse_query_str(h->query, &q) == 0 && q.tqh_first ? q.tqh_first->key : NULL;
		hreq_error(h, 400, "invalid_request", first, "a batch takes no query options: each job's envelope carries "
			   "its name, priority, pool, recovery and start time");
		evhttp_clear_headers(&q);
		goto out;
	}
	json_object_foreach(body, name, v) {
		if (strcmp(name, "jobs")) {
			hreq_error(h, 400, "invalid_request", name, "unknown field \"%s\" (a batch is {\"jobs\": [...]})", name);
			goto out;
		}
	}
	jobs = json_object_get(body, "jobs");
	if (!json_is_array(jobs) || json_array_size(jobs) == 0 || json_array_size(jobs) > API_JOBS_BATCH_MAX) {
		hreq_error(h, 400, "invalid_request", "jobs", "jobs must be a list of 1 to %d jobs, each as POST /v1/jobs "
			   "takes its envelope ({\"config\": ..., \"name\"?, ...})", API_JOBS_BATCH_MAX);
		goto out;
	}
	key = hreq_header(h, "Idempotency-Key");
	if (key && (strlen(key) == 0 || strlen(key) > IDEM_KEY_MAX_LEN)) {
		hreq_error(h, 400, "invalid_request", NULL, "Idempotency-Key must be 1 to %d bytes", IDEM_KEY_MAX_LEN);
		goto out;
	}
	/* the batch's key stands for all its jobs: job k is stored under OWNER#KEY#k, which no submit's
	 * OWNER/KEY can be ('#' is in no token name) */
	owner_key = key ? xasprintf("%s#%s", h->who.name, key) : NULL;
	items = json_array();
	json_array_foreach(jobs, i, v) {
		char *ikey = owner_key ? xasprintf("%s#%zu", owner_key, i) : NULL;
		json_t *item = group_item(h, v, i, ikey);
		free(ikey);
		if (!item)
			goto out; /* answered */
		json_array_append_new(items, item);
	}
	/* the other jobs count against the submit rate too (one was taken above) */
	auth_submit_charge(h, (double)json_array_size(items) - 1);
	/* each job's body is its envelope in the request as it was sent (json_loadb accepted it, so
	 * Postgres' jsonb does): a config's numbers are stored as written, not printed again */
	doc = json_pack("{s:O}", "jobs", items);
	meta = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	sent = hreq_body_text(h, &sent_len);
	if (sent && !memchr(sent, '\0', sent_len)) {
		request = xmalloc(sent_len + 1);
		memcpy(request, sent, sent_len);
		request[sent_len] = '\0';
	} else {
		request = json_dumps(body, JSON_COMPACT); /* the body is not NUL-terminated where it lies */
	}
	g = xcalloc(1, sizeof *g);
	g->h = h;
	g->n = json_array_size(items);
	g->text = meta && request ? util_json_append(meta, "\"request\": ", request, NULL) : NULL;
	if (!g->text) {
		free(g);
		hreq_error(h, 500, "internal", NULL, "the batch could not be encoded");
		goto out;
	}
	batch_add(group_batch(h->app), g, -1);
out:
	free(owner_key);
	free(meta);
	free(request);
	json_decref(doc);
	json_decref(items);
	json_decref(body);
}

void api_jobs_on_doc(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	if (!value) {
		hreq_error(h, 404, "not_found", NULL, "no such job: %s", h->param[0]);
		return;
	}
	hreq_reply_text(h, 200, value);
}

static void by_job_id(struct hreq *h, const char *sql)
{
	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such job: %s", h->param[0]);
		return;
	}
	const char *params[1] = { h->param[0] };
	db_exec(h->app->db, sql, 1, params, api_jobs_on_doc, h);
}

void api_jobs_get(struct hreq *h)
{
	by_job_id(h, sql_job_get);
}

void api_jobs_attempts(struct hreq *h)
{
	by_job_id(h, sql_job_attempts);
}

void api_jobs_events(struct hreq *h)
{
	by_job_id(h, sql_job_events);
}

static void on_cancelled(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	if (!value) {
		hreq_error(h, 404, "not_found", NULL, "no such job: %s", h->param[0]);
		return;
	}
	log_info("job cancel", "job=%s", h->param[0]);
	/* a job cancelled before it started may queue the jobs that run after it whatever its ending
	 * (migration 036, its trigger): wake the waiters of every replica once it committed */
	lease_announce(h->app->lease);
	hreq_reply_text(h, 200, value);
}

/* The preamble of an action on one job (POST /v1/jobs/{id}/...): the route's id and the request's JSON
 * body. 0 with *body (new reference; NULL for an empty body), or -1 once answered: 404 for an id that is
 * not one, 400 for a malformed body. */
static int job_action_body(struct hreq *h, json_t **body)
{
	*body = NULL;
	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such job: %s", h->param[0]);
		return -1;
	}
	return hreq_body(h, body) < 0 ? -1 : 0;
}

void api_jobs_cancel(struct hreq *h)
{
	json_t *body = NULL;

	if (job_action_body(h, &body) < 0)
		return;
	json_decref(body);
	const char *params[1] = { h->param[0] };
	db_exec(h->app->db, sql_job_cancel, 1, params, on_cancelled, h);
}

static void on_cancelled_many(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	lease_announce(h->app->lease); /* as on_cancelled: the cancels may queue jobs that run after them */
	hreq_reply_text(h, 200, value ? value : "{\"ids\": [], \"more\": false}");
}

/* An optional string field of a cancel-many body: *out its text (borrowed from body; NULL when
 * absent, null or ""); false after answering 400 naming it when it is another type. */
static bool opt_str(struct hreq *h, const json_t *body, const char *key, const char **out)
{
	const json_t *v = json_object_get(body, key);

	*out = json_is_string(v) && json_string_length(v) > 0 ? json_string_value(v) : NULL;
	if (v && !json_is_null(v) && !json_is_string(v)) {
		hreq_error(h, 400, "invalid_request", key, "%s must be a string", key);
		return false;
	}
	return true;
}

bool api_jobs_cancel_state_ok(const char *state)
{
	static const char *const states[] = { "queued", "scheduled", "running", "active" };

	for (size_t i = 0; state && i < ARRAY_LEN(states); i++)
		if (!strcmp(state, states[i]))
			return true;
	return false;
}

void api_jobs_cancel_matching(struct hreq *h)
{
	json_t *body = NULL, *labels = NULL, *limit_v, *dry_v, *after_v;
	const char *state, *owner, *kind, *label, *pool, *scope = NULL, *kind_f = NULL, *field = NULL;
	char *msg = NULL, *label_json = NULL, limit[24], after[24] = "";
	long long n = API_JOBS_CANCEL_MAX;
	int code;

	if (hreq_body(h, &body) < 0)
		return;
	if (!opt_str(h, body, "state", &state) || !opt_str(h, body, "owner", &owner) || !opt_str(h, body, "kind", &kind) ||
	    !opt_str(h, body, "label", &label) || !opt_str(h, body, "pool", &pool))
		goto out;
	if (!state)
		state = "queued";
	if (!api_jobs_cancel_state_ok(state)) {
		hreq_error(h, 400, "invalid_request", "state", "%s", API_JOBS_CANCEL_STATES);
		goto out;
	}
	code = api_jobs_list_filter(&h->who, owner, kind, &scope, &kind_f, &field, &msg);
	if (code) {
		hreq_error(h, code, code == 403 ? "forbidden" : "invalid_request", field, "%s", msg);
		goto out;
	}
	if (label) {
		labels = labels_parse(label, "label", &msg);
		if (!labels) {
			hreq_error(h, 400, "invalid_request", "label", "%s", msg);
			goto out;
		}
		if (json_object_size(labels) > 0)
			label_json = json_dumps(labels, JSON_COMPACT);
	}
	if (pool && !pool_name_ok(pool)) {
		hreq_error(h, 400, "invalid_request", "pool", "pool must be a pool name: " POOL_NAME_RULE);
		goto out;
	}
	after_v = json_object_get(body, "after"); /* the jobs that wait for this one (migration 033) */
	if (after_v && !json_is_null(after_v)) {
		if (!json_is_integer(after_v) || json_integer_value(after_v) < 1 || json_integer_value(after_v) > AFTER_ID_MAX) {
			hreq_error(h, 400, "invalid_request", "after",
				   "after must be a job id: the jobs that wait for it are the ones cancelled");
			goto out;
		}
		snprintf(after, sizeof after, "%lld", (long long)json_integer_value(after_v));
	}
	if (!owner && !label_json && !kind_f && !pool && !*after) {
		hreq_error(h, 400, "invalid_request", NULL,
			   "name the jobs to cancel: owner, label, kind, pool or after (no filter would be every job)");
		goto out;
	}
	limit_v = json_object_get(body, "limit");
	if (limit_v && !json_is_null(limit_v)) {
		if (!json_is_integer(limit_v) || json_integer_value(limit_v) < 1 || json_integer_value(limit_v) > API_JOBS_CANCEL_MAX) {
			hreq_error(h, 400, "invalid_request", "limit", "limit must be an integer from 1 to %d", API_JOBS_CANCEL_MAX);
			goto out;
		}
		n = (long long)json_integer_value(limit_v);
	}
	dry_v = json_object_get(body, "dry_run");
	if (dry_v && !json_is_null(dry_v) && !json_is_boolean(dry_v)) {
		hreq_error(h, 400, "invalid_request", "dry_run", "dry_run must be true or false");
		goto out;
	}
	snprintf(limit, sizeof limit, "%lld", n);
	log_info("jobs cancel", "by=%s state=%s owner=%s label=%s kind=%s pool=%s after=%s limit=%s dry_run=%d",
		 h->who.name ? h->who.name : "-", state, scope ? scope : "-", label_json ? label_json : "-",
		 kind_f ? kind_f : "-", pool ? pool : "-", *after ? after : "-", limit, json_is_true(dry_v));
	{
		const char *params[8] = { state, scope, label_json, kind_f, limit, json_is_true(dry_v) ? "true" : "false", pool,
					   *after ? after : NULL };
		db_exec(h->app->db, sql_job_cancel_matching, 8, params, on_cancelled_many, h);
	}
out:
	free(msg);
	free(label_json);
	json_decref(labels);
	json_decref(body);
}

/* Answers a job change's {"status", "job"} (rung_retry, rung_set_priority, rung_start_now,
 * rung_requeue, rung_set_after): 200 with the job when it was "ok", 404 when there is no such job, 403
 * for "pool_refused", 503 for "unavailable", 400 naming after for "after_unknown" and "cycle",
 * otherwise 409 naming the job's state and why_not. queued:
 * the change was made: logged as that message, and, with announce, the waiters are woken (NULL:
 * neither). */
static void job_change_answer(struct hreq *h, PGresult *res, const char *err, const char *why_not, const char *queued,
			      bool announce)
{
	json_t *doc = hreq_db_doc(h, res, err, "job");
	const char *state, *status;

	if (!doc)
		return;
	status = json_string_value(json_object_get(doc, "status"));
	state = json_string_value(json_object_get(json_object_get(doc, "job"), "state"));
	if (status && !strcmp(status, "pool_refused")) {
		pool_refused(h, doc, "pool");
	} else if (status && !strcmp(status, "unavailable")) { /* rung_stops_ready: a requeue, see 44_preempt.sql */
		hreq_error(h, 503, "unavailable", NULL,
			   "a rungd of a release before this one put its function files back: a stop cannot be asked for "
			   "until a rungd of this release starts again");
	} else if (!status || strcmp(status, "ok")) {
		hreq_error(h, 409, "invalid_transition", NULL, "job %s is %s: %s", h->param[0], state ? state : "?", why_not);
	} else {
		if (queued) {
			log_info(queued, "job=%s by=%s", h->param[0], h->who.name[0] ? h->who.name : "?");
			if (announce)
				lease_announce(h->app->lease);
		}
		hreq_reply(h, 200, json_incref(json_object_get(doc, "job")));
	}
	json_decref(doc);
}

static void on_retried(PGresult *res, const char *err, void *arg)
{
	job_change_answer(arg, res, err, "only a failed or cancelled job can be retried (submit it again to run a succeeded "
				      "one again)", "job retried", true);
}

void api_jobs_retry(struct hreq *h)
{
	json_t *body = NULL, *from;
	const char *note;
	char by[AUTH_NAME_MAX + 32];

	if (job_action_body(h, &body) < 0)
		return;
	from = json_object_get(body, "from");
	if (from && !json_is_null(from) && (!json_is_string(from) || (strcmp(json_string_value(from), "current") &&
								      strcmp(json_string_value(from), "target")))) {
		hreq_error(h, 400, "invalid_request", "from", "from must be \"current\" or \"target\"");
		goto out;
	}
	if (hreq_note(h, body, &note) < 0)
		goto out;
	{
		const char *params[4] = { h->param[0], json_is_string(from) ? json_string_value(from) : NULL, note,
					  hreq_by(h, by, sizeof by) };
		db_exec(h->app->db, sql_job_retry, 4, params, on_retried, h);
	}
out:
	json_decref(body);
}

static void on_requeued(PGresult *res, const char *err, void *arg)
{
	/* nothing to announce: the job is queued again when its worker reports the stop */
	job_change_answer(arg, res, err, "only a running job can be requeued (and not while its cancel is under way)",
			  "job requeue asked", false);
}

void api_jobs_requeue(struct hreq *h)
{
	json_t *body = NULL;
	const char *note;
	char by[AUTH_NAME_MAX + 32];

	if (job_action_body(h, &body) < 0)
		return;
	if (hreq_note(h, body, &note) == 0) {
		const char *params[3] = { h->param[0], hreq_by(h, by, sizeof by), note };
		db_exec(h->app->db, sql_job_requeue, 3, params, on_requeued, h);
	}
	json_decref(body);
}

static void on_prioritized(PGresult *res, const char *err, void *arg)
{
	job_change_answer(arg, res, err, "only a queued, scheduled or running job's priority can change", NULL, false);
}

void api_jobs_priority(struct hreq *h)
{
	json_t *body = NULL, *v;
	char by[AUTH_NAME_MAX + 32], prio[24];

	if (job_action_body(h, &body) < 0)
		return;
	v = json_object_get(body, "priority");
	if (!json_is_integer(v) || json_integer_value(v) < PRIORITY_MIN || json_integer_value(v) > PRIORITY_MAX) {
		hreq_error(h, 400, "invalid_request", "priority", "priority must be an integer from %d to %d (lower runs first)",
			   PRIORITY_MIN, PRIORITY_MAX);
		goto out;
	}
	if (!urgent_allowed(h, (long long)json_integer_value(v), "priority"))
		goto out;
	snprintf(prio, sizeof prio, "%lld", (long long)json_integer_value(v));
	{
		const char *params[3] = { h->param[0], prio, hreq_by(h, by, sizeof by) };
		db_exec(h->app->db, sql_job_priority, 3, params, on_prioritized, h);
	}
out:
	json_decref(body);
}

static void on_pooled(PGresult *res, const char *err, void *arg)
{
	/* announced: a queued job's new pool may have a parked GPU */
	job_change_answer(arg, res, err, "a succeeded job runs nowhere again (submit it again, naming the pool)",
			  "job moved to another pool", true);
}

void api_jobs_pool(struct hreq *h)
{
	json_t *body = NULL, *v;
	char by[AUTH_NAME_MAX + 32];

	if (job_action_body(h, &body) < 0)
		return;
	v = json_object_get(body, "pool");
	if (!pool_name_ok(json_string_value(v))) {
		hreq_error(h, 400, "invalid_request", "pool", "pool must be a pool name: " POOL_NAME_RULE);
		goto out;
	}
	{
		const char *params[3] = { h->param[0], json_string_value(v), hreq_by(h, by, sizeof by) };
		db_exec(h->app->db, sql_job_pool, 3, params, on_pooled, h);
	}
out:
	json_decref(body);
}

static void on_after_set(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	json_t *doc;
	const char *status;

	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
		job_change_answer(h, res, err, "", NULL, false); /* 404, 503 or 500 */
		return;
	}
	doc = json_loads(PQgetvalue(res, 0, 0), 0, NULL);
	status = json_string_value(json_object_get(doc, "status"));
	if (status && !strcmp(status, "after_unknown"))
		after_unknown(h, (long long)json_integer_value(json_object_get(doc, "after")), "after");
	else if (status && !strcmp(status, "after_never"))
		after_never(h, (long long)json_integer_value(json_object_get(doc, "after")), "after");
	else if (status && !strcmp(status, "cycle"))
		hreq_error(h, 400, "invalid_request", "after", "after names job %lld, which waits for job %s itself (directly "
			   "or through others): both would wait forever", (long long)json_integer_value(json_object_get(doc, "after")),
			   h->param[0]);
	else
		job_change_answer(h, res, err, "only a job not started yet (queued or scheduled) can change the jobs it runs "
				  "after", "job after changed", true);
	json_decref(doc);
}

void api_jobs_after(struct hreq *h)
{
	json_t *body = NULL, *v;
	char by[AUTH_NAME_MAX + 32], *field = NULL, *message = NULL, *ids = NULL;

	if (job_action_body(h, &body) < 0)
		return;
	v = json_object_get(body, "after");
	if (!v) {
		hreq_error(h, 400, "invalid_request", "after", "after is required: a list of 1 to %d job ids, or null for none",
			   AFTER_MAX);
		goto out;
	}
	if (check_after(v, &field, &message) < 0 ||
	    check_after_when(json_object_get(body, "after_when"), v, "a list of jobs in after", &field, &message) < 0) {
		hreq_error(h, 400, "invalid_request", field, "%s", message);
		goto out;
	}
	if (json_is_array(v)) { /* as a Postgres array: {12,13} */
		size_t i;
		json_t *id;
		ids = xstrdup("{");
		json_array_foreach(v, i, id) {
			char *next = xasprintf("%s%s%lld", ids, i ? "," : "", (long long)json_integer_value(id));
			free(ids);
			ids = next;
		}
		char *closed = xasprintf("%s}", ids);
		free(ids);
		ids = closed;
	}
	{
		/* a submitter's job runs only after its own jobs (as at submit); staff's after any */
		/* after_when absent: the job's own is kept (rung_set_after_when) */
		const char *params[5] = { h->param[0], ids, json_string_value(json_object_get(body, "after_when")),
					  h->who.role == AUTH_SUBMITTER ? h->who.name : NULL, hreq_by(h, by, sizeof by) };
		db_exec(h->app->db, sql_job_after, 5, params, on_after_set, h);
	}
out:
	free(field);
	free(message);
	free(ids);
	json_decref(body);
}

static void on_started(PGresult *res, const char *err, void *arg)
{
	job_change_answer(arg, res, err, "only a scheduled job can be started now (a queued one waits only for a GPU)",
			  "job started now", true);
}

void api_jobs_start(struct hreq *h)
{
	json_t *body = NULL;
	char by[AUTH_NAME_MAX + 32];

	if (job_action_body(h, &body) < 0) /* an empty body or {}: nothing to read, but a malformed one is a 400 */
		return;
	json_decref(body);
	{
		const char *params[2] = { h->param[0], hreq_by(h, by, sizeof by) };
		db_exec(h->app->db, sql_job_start, 2, params, on_started, h);
	}
}

static void on_list(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	hreq_reply_text(h, 200, value ? value : "{\"jobs\":[],\"next_cursor\":null}");
}

int api_jobs_list_filter(const struct auth_who *who, const char *owner, const char *kind, const char **scope,
			 const char **kind_out, const char **field, char **msg)
{
	*scope = NULL;
	*kind_out = NULL;
	*field = NULL;
	*msg = NULL;
	if (kind && *kind) {
		if (strcmp(kind, "image") && strcmp(kind, "video")) {
			*field = "kind";
			*msg = xstrdup("kind must be image or video");
			return 400;
		}
		*kind_out = kind;
	}
	if (owner && *owner) {
		if (!auth_name_valid(owner)) {
			*field = "owner";
			*msg = xasprintf("owner must be a token name: 1 to %d characters of A-Z a-z 0-9 . _ @ -", AUTH_NAME_MAX);
			return 400;
		}
		/* a submitter's list is its own jobs whatever it asks; naming another owner is a
		 * mistake worth telling rather than an empty page */
		if (who->role == AUTH_SUBMITTER && strcmp(owner, who->name)) {
			*field = "owner";
			*msg = xstrdup("a submitter lists only its own jobs: owner may only be its own token name");
			return 403;
		}
		*scope = owner;
	}
	if (who->role == AUTH_SUBMITTER)
		*scope = who->name;
	return 0;
}

void api_jobs_list(struct hreq *h)
{
	static const char *const states[] = { "queued", "scheduled", "running", "succeeded", "failed", "cancelled" };
	char *state = hreq_query(h, "state"), *cursor = hreq_query(h, "cursor"), *limit_s = hreq_query(h, "limit");
	char *owner = hreq_query(h, "owner"), *kind = hreq_query(h, "kind"), *label = hreq_query(h, "label"), *msg = NULL;
	char *pool = hreq_query(h, "pool"), *label_json = NULL;
	const char *scope, *kind_f, *field;
	char limit[32];
	long long n = LIST_DEFAULT;
	bool ok = false;
	int code;

	if (state && *state) {
		for (size_t i = 0; i < ARRAY_LEN(states); i++)
			ok |= strcmp(states[i], state) == 0;
		if (!ok) {
			hreq_error(h, 400, "invalid_request", "state",
				   "state must be queued, scheduled, running, succeeded, failed or cancelled");
			goto out;
		}
	} else {
		free(state);
		state = NULL;
	}
	if (cursor && *cursor && http_parse_id(cursor) < 0) {
		hreq_error(h, 400, "invalid_request", "cursor", "cursor is not one this server gave out");
		goto out;
	}
	if (cursor && !*cursor) {
		free(cursor);
		cursor = NULL;
	}
	if (limit_s) {
		n = http_parse_id(limit_s);
		if (n < 1 || n > LIST_MAX) {
			hreq_error(h, 400, "invalid_request", "limit", "limit must be an integer from 1 to %d", LIST_MAX);
			goto out;
		}
	}
	code = api_jobs_list_filter(&h->who, owner, kind, &scope, &kind_f, &field, &msg);
	if (code) {
		hreq_error(h, code, code == 403 ? "forbidden" : "invalid_request", field, "%s", msg);
		goto out;
	}
	if (pool && *pool && !pool_name_ok(pool)) {
		hreq_error(h, 400, "invalid_request", "pool", "pool must be a pool name: " POOL_NAME_RULE);
		goto out;
	}
	if (pool && !*pool) {
		free(pool);
		pool = NULL;
	}
	if (label && *label) {
		json_t *labels = labels_parse(label, "label", &msg);
		if (!labels) {
			hreq_error(h, 400, "invalid_request", "label", "%s", msg);
			goto out;
		}
		if (json_object_size(labels) > 0)
			label_json = json_dumps(labels, JSON_COMPACT);
		json_decref(labels);
	}
	snprintf(limit, sizeof limit, "%lld", n);
	{
		/* one owner's jobs (a submitter's own, or the one staff named) walk jobs_owner_id; labelled
		 * jobs come from jobs_labels */
		const char *labelled[7] = { state, cursor, limit, kind_f, scope, label_json, pool };
		const char *owned[6] = { state, cursor, limit, kind_f, scope, pool };
		const char *all[5] = { state, cursor, limit, kind_f, pool };
		if (label_json)
			db_exec(h->app->db, sql_job_list_labelled, 7, labelled, on_list, h);
		else if (scope)
			db_exec(h->app->db, sql_job_list_owned, 6, owned, on_list, h);
		else
			db_exec(h->app->db, sql_job_list, 5, all, on_list, h);
	}
out:
	free(pool);
	free(msg);
	free(label_json);
	free(label);
	free(kind);
	free(owner);
	free(state);
	free(cursor);
	free(limit_s);
}
