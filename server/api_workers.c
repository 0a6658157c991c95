/* /v1/workers handlers: register (one statement upserting the worker by name, with the version it
 * runs, its pool and the pools it borrows from, and its GPUs by uuid; a line in the log when that version is not this rungd's) and lease
 * (body validation here, the long-poll itself in lease.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_workers.h"
#include "app.h"
#include "auth.h"
#include "db.h"
#include "http.h"
#include "lease.h"
#include "log.h"
#include "sql.h"
#include "util.h"
#include "pool.h"
#include "version.h"

#define LEASE_WAIT_MAX_MS 60000
#define TEXT_MAX_LEN 256

/* True when a GPU uuid can stand as one path segment as clients send it (unencoded): nvidia-smi's
 * "GPU-8e3b..." can; a "/", "?", "#" or "%" would route elsewhere or be decoded. */
static bool uuid_routable(const char *s)
{
	if (!strcmp(s, ".") || !strcmp(s, "..")) /* a proxy may fold them into the path */
		return false;
	for (; *s; s++)
		if (strchr("/?#%", *s) || (unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

/* s as the inside of a quoted log value in buf (always terminated): `"` and `\` escaped with a
 * backslash, control characters as `?`, cut at n - 1 bytes; a worker picks its name and version. */
static const char *log_quoted(char *buf, size_t n, const char *s)
{
	size_t i = 0;

	for (; s && *s && i + 2 < n; s++) {
		if (*s == '"' || *s == '\\')
			buf[i++] = '\\';
		buf[i++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
	}
	buf[i] = '\0';
	return buf;
}

static void on_registered(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value, *version, *name;
	char *borrow;
	json_t *borrow_list;
	char vq[2 * RUNG_VERSION_MAX + 1], nq[2 * TEXT_MAX_LEN + 1];
	json_t *doc;
	long long id;
	bool created;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	doc = value ? json_loads(value, 0, NULL) : NULL;
	if (!doc) {
		hreq_error(h, 500, "internal", NULL, "register returned nothing");
		return;
	}
	if (strcmp(json_string_value(json_object_get(doc, "status")) ?: "", "pool_refused") == 0) {
		/* its token is kept to some pools (migration 027): a host cannot join a pool kept for others */
		char *list = pool_list_join(json_object_get(doc, "pools"), ", ", "none");
		bool borrow = strcmp(json_string_value(json_object_get(doc, "field")) ?: "", "borrow") == 0;
		json_decref(doc);
		if (borrow)
			hreq_error(h, 403, "forbidden", "borrow",
				   "this worker token may not borrow from a pool outside its pools: %s", list);
		else
			hreq_error(h, 403, "forbidden", "pool", "this worker token may not join that pool; its pools: %s",
				   list);
		free(list);
		return;
	}
	if (strcmp(json_string_value(json_object_get(doc, "status")) ?: "", "taken") == 0) {
		json_decref(doc);
		hreq_error(h, 409, "worker_name_taken", "name",
			   "worker name is bound to another live worker token (revoke it, or register as admin)");
		return;
	}
	id = json_integer_value(json_object_get(doc, "id"));
	created = json_is_true(json_object_get(doc, "created"));
	version = json_string_value(json_object_get(doc, "version")); /* what it sent, echoed by the statement */
	name = json_string_value(json_object_get(doc, "name"));
	auth_worker_changed(h->app->auth, id); /* its GPUs or its token may be new */
	log_quoted(vq, sizeof vq, version ? version : "unknown");
	borrow = pool_list_join(json_object_get(doc, "borrow"), ",", "none");
	log_info(created ? "worker registered" : "worker re-registered", "worker=%lld version=\"%s\" pool=%s borrow=%s",
		 id, vq, json_string_value(json_object_get(doc, "pool")) ?: POOL_DEFAULT, borrow);
	free(borrow);
	/* A mixed fleet is normal while a rollout goes on: a line to follow it by, not an error. */
	if (!version || strcmp(version, rung_version()))
		log_info("worker runs another version than this rungd", "worker=%lld name=\"%s\" version=\"%s\" rungd_version=%s",
			 id, log_quoted(nq, sizeof nq, name), vq, rung_version());
	borrow_list = json_object_get(doc, "borrow");
	hreq_reply(h, created ? 201 : 200,
		   json_pack("{s:I, s:i, s:i, s:s, s:o}", "id", (json_int_t)id, "lease_seconds", h->app->lease_seconds,
			     "heartbeat_ms", h->app->heartbeat_ms, "pool",
			     json_string_value(json_object_get(doc, "pool")) ?: POOL_DEFAULT, "borrow",
			     /* "o" steals: a new [] when the database answered no list (the release before's functions) */
			     json_is_array(borrow_list) ? json_incref(borrow_list) : json_array()));
	json_decref(doc);
}

/* Checks the GPU list; returns NULL when valid, else the failing field as a heap string. */
static char *check_gpus(const json_t *gpus, char **message)
{
	size_t i;
	json_t *g;

	/* A worker exists to drive GPUs: one that has none has nothing to lease for. */
	if (!json_is_array(gpus) || json_array_size(gpus) == 0 || json_array_size(gpus) > 64) {
		*message = xstrdup("gpus is required: a non-empty array (at most 64) of {uuid, index, name, memory_total_mib}");
		return xstrdup("gpus");
	}
	json_array_foreach(gpus, i, g) {
		json_t *v;
		if (!json_is_object(g)) {
			*message = xstrdup("each GPU must be an object");
			return xasprintf("gpus[%zu]", i);
		}
		v = json_object_get(g, "uuid");
		if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > TEXT_MAX_LEN) {
			*message = xstrdup("uuid must be a non-empty string");
			return xasprintf("gpus[%zu].uuid", i);
		}
		if (!uuid_routable(json_string_value(v))) {
			/* the worker's health reports and support's release name it in a path: /v1/gpus/{uuid} */
			*message = xstrdup("uuid must not be . or .. or hold / ? # %, spaces or control characters "
					   "(it is a path segment)");
			return xasprintf("gpus[%zu].uuid", i);
		}
		v = json_object_get(g, "index");
		if (v && !(json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < 1024)) {
			*message = xstrdup("index must be an integer from 0 to 1023");
			return xasprintf("gpus[%zu].index", i);
		}
		v = json_object_get(g, "name");
		if (v && (!json_is_string(v) || json_string_length(v) > TEXT_MAX_LEN)) {
			*message = xasprintf("name must be a string of at most %d bytes", TEXT_MAX_LEN);
			return xasprintf("gpus[%zu].name", i);
		}
		v = json_object_get(g, "memory_total_mib");
		if (!(json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < 100000000)) {
			*message = xstrdup("memory_total_mib must be a non-negative integer");
			return xasprintf("gpus[%zu].memory_total_mib", i);
		}
	}
	return NULL;
}

void api_workers_register(struct hreq *h)
{
	json_t *body = NULL, *name, *host, *gpus, *version, *pool, *borrow, *reg = NULL;
	char *field = NULL, *message = NULL, *reg_s = NULL;

	if (hreq_body(h, &body) < 0)
		return;
	name = json_object_get(body, "name");
	host = json_object_get(body, "host");
	gpus = json_object_get(body, "gpus");
	version = json_object_get(body, "version");
	pool = json_object_get(body, "pool");
	borrow = json_object_get(body, "borrow");
	if (!json_is_string(name) || json_string_length(name) == 0 || json_string_length(name) > TEXT_MAX_LEN) {
		hreq_error(h, 400, "invalid_request", "name", "name must be a non-empty string");
		goto out;
	}
	if (host && !json_is_null(host) && (!json_is_string(host) || json_string_length(host) > TEXT_MAX_LEN)) {
		hreq_error(h, 400, "invalid_request", "host", "host must be a string of at most %d bytes", TEXT_MAX_LEN);
		goto out;
	}
	/* optional: a worker from before versions sends none (null reads as none); shown in lists, logs
	 * and a metric label, so only printable ASCII */
	if (version && !json_is_null(version) &&
	    (!json_is_string(version) || !rung_version_valid(json_string_value(version), json_string_length(version)))) {
		hreq_error(h, 400, "invalid_request", "version",
			   "version must be a string of 1 to %d printable ASCII characters", RUNG_VERSION_MAX);
		goto out;
	}
	/* optional: a worker from before pools sends none, and serves the default pool (a worker
	 * restarted without --pool goes back to it) */
	if (pool && !json_is_null(pool) && !pool_name_ok(json_string_value(pool))) {
		hreq_error(h, 400, "invalid_request", "pool", "pool must be a pool name: " POOL_NAME_RULE);
		goto out;
	}
	/* optional (migration 028): the pools it takes jobs from when its own has none for it, in order;
	 * absent or null is none, so a worker restarted without --borrow stops borrowing */
	if (borrow && !json_is_null(borrow)) {
		message = pool_borrow_check(borrow, json_is_string(pool) ? json_string_value(pool) : POOL_DEFAULT);
		if (message) {
			hreq_error(h, 400, "invalid_request", "borrow", "%s", message);
			goto out;
		}
	}
	field = check_gpus(gpus, &message);
	if (field) {
		hreq_error(h, 400, "invalid_request", field, "%s", message);
		goto out;
	}
	reg = json_pack("{s:O, s:s, s:O, s:O, s:s, s:o}", "name", name,
			"host", json_is_string(host) ? json_string_value(host) : "", "gpus", gpus, "version",
			json_is_string(version) ? version : json_null(), "pool",
			json_is_string(pool) ? json_string_value(pool) : POOL_DEFAULT, "borrow",
			json_is_array(borrow) ? json_incref(borrow) : json_array());
	reg_s = json_dumps(reg, JSON_COMPACT);
	{
		/* the worker row is bound to the registering token (auth.h: AUTH_SCOPE_WORKER) */
		char token_id[32];
		snprintf(token_id, sizeof token_id, "%lld", h->who.token_id);
		const char *params[3] = { reg_s, token_id, h->who.role == AUTH_ADMIN ? "true" : "false" };
		db_exec(h->app->db, sql_token_register, 3, params, on_registered, h);
	}
out:
	free(field);
	free(message);
	free(reg_s);
	json_decref(reg);
	json_decref(body);
}

void api_workers_lease(struct hreq *h)
{
	json_t *body = NULL, *gpu, *wait, *state;
	long long worker = http_parse_id(h->param[0]);
	int wait_ms = 0;

	if (worker < 0) {
		hreq_error(h, 404, "unknown_worker", NULL, "no such worker: %s", h->param[0]);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	gpu = json_object_get(body, "gpu_uuid");
	wait = json_object_get(body, "wait_ms");
	state = json_object_get(body, "gpu_state");
	if (!json_is_string(gpu) || json_string_length(gpu) == 0 || json_string_length(gpu) > TEXT_MAX_LEN) {
		hreq_error(h, 400, "invalid_request", "gpu_uuid", "gpu_uuid must be a non-empty string");
		goto out;
	}
	if (wait && !json_is_null(wait)) {
		if (!json_is_integer(wait) || json_integer_value(wait) < 0 ||
		    json_integer_value(wait) > LEASE_WAIT_MAX_MS) {
			hreq_error(h, 400, "invalid_request", "wait_ms", "wait_ms must be an integer from 0 to %d",
				   LEASE_WAIT_MAX_MS);
			goto out;
		}
		wait_ms = (int)json_integer_value(wait);
	}
	if (state && !json_is_null(state) && !json_is_object(state)) {
		hreq_error(h, 400, "invalid_request", "gpu_state", "gpu_state must be an object");
		goto out;
	}
	if (!auth_park_enter(h, worker))
		goto out; /* over its GPU count + 1 parked long-polls: answered 429 */
	lease_park(h->app->lease, h, worker, json_string_value(gpu),
		   json_is_object(state) ? json_incref(state) : NULL, wait_ms);
out:
	json_decref(body);
}
