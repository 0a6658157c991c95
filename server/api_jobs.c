/* /v1/jobs handlers: submit (envelope validation, atconfig_validate, kind, RECOVERY defaults,
 * Idempotency-Key), get, list (keyset on id descending, cursor = last id as a string),
 * attempts, events and cancel. Each request is one SQL statement (sql/job_*.sql, submit.sql). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_jobs.h"
#include "app.h"
#include "atconfig.h"
#include "auth.h"
#include "db.h"
#include "http.h"
#include "lease.h"
#include "log.h"
#include "sql.h"
#include "util.h"

#define PRIORITY_MIN (-1000000)
#define PRIORITY_MAX 1000000
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
};

static const char *const submit_keys[] = { "config", "name", "priority", "recovery" };

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

int api_jobs_check_submit(const json_t *body, json_t **recovery, const char **name, int *priority,
			  char **field, char **message)
{
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
			*message = xasprintf("unknown field \"%s\" (expected config, name, priority, recovery)", key);
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
	*priority = 100;
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < PRIORITY_MIN || json_integer_value(v) > PRIORITY_MAX)
			return fail(field, message, "priority",
				    xasprintf("priority must be an integer from %d to %d", PRIORITY_MIN, PRIORITY_MAX));
		*priority = (int)json_integer_value(v);
	}
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

static void on_submitted(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value, *status;
	json_t *doc, *job;
	long long id;
	char loc[64];

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	doc = value ? json_loads(value, 0, NULL) : NULL;
	status = json_string_value(json_object_get(doc, "status"));
	job = json_incref(json_object_get(doc, "job"));
	id = json_integer_value(json_object_get(job, "id"));
	if (!status || !job) {
		json_decref(job);
		json_decref(doc);
		hreq_error(h, 500, "internal", NULL, "submit returned nothing");
		return;
	}
	if (strcmp(status, "conflict") == 0) {
		json_decref(job);
		json_decref(doc);
		hreq_error(h, 409, "idempotency_conflict", NULL,
			   "Idempotency-Key was used for job %lld with a different request", id);
		return;
	}
	snprintf(loc, sizeof loc, "/v1/jobs/%lld", id);
	hreq_add_header(h, "Location", loc);
	if (strcmp(status, "created") == 0) {
		log_info("job submitted", "job=%lld kind=%s priority=%lld", id,
			 json_string_value(json_object_get(job, "kind")),
			 (long long)json_integer_value(json_object_get(job, "priority")));
		lease_wake(h->app->lease);
		hreq_reply(h, 201, job);
	} else {
		log_info("job submit repeated", "job=%lld", id);
		hreq_reply(h, 200, job);
	}
	json_decref(doc);
}

void api_jobs_submit(struct hreq *h)
{
	json_t *body = NULL, *recovery = NULL, *config;
	const char *name = NULL, *key, *cfg_name;
	char *field = NULL, *message = NULL, *config_s = NULL, *recovery_s = NULL, *body_s = NULL;
	char *owner_key = NULL;
	char prio[32];
	int priority;

	if (!auth_submit_allowed(h))
		return;
	if (hreq_body(h, &body) < 0)
		return;
	if (api_jobs_check_submit(body, &recovery, &name, &priority, &field, &message) < 0) {
		hreq_error(h, 400, "invalid_request", field, "%s", message);
		goto out;
	}
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
	config_s = json_dumps(config, JSON_COMPACT);
	recovery_s = json_dumps(recovery, JSON_COMPACT);
	body_s = json_dumps(body, JSON_COMPACT);
	snprintf(prio, sizeof prio, "%d", priority);
	/* the owner is the caller's token name; Idempotency-Keys are scoped per owner */
	owner_key = key ? xasprintf("%s/%s", h->who.name, key) : NULL;
	{
		const char *params[8] = { name, h->who.name, atconfig_kind(config), prio, config_s,
					  recovery_s, owner_key, body_s };
		db_exec(h->app->db, sql_submit, 8, params, on_submitted, h);
	}
out:
	free(field);
	free(message);
	free(config_s);
	free(recovery_s);
	free(body_s);
	free(owner_key);
	json_decref(recovery);
	json_decref(body);
}

/* Replies the statement's JSON value, or 404 when it is NULL / missing. */
static void on_doc(PGresult *res, const char *err, void *arg)
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
	db_exec(h->app->db, sql, 1, params, on_doc, h);
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
	hreq_reply_text(h, 200, value);
}

void api_jobs_cancel(struct hreq *h)
{
	json_t *body = NULL;

	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such job: %s", h->param[0]);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	json_decref(body);
	const char *params[1] = { h->param[0] };
	db_exec(h->app->db, sql_job_cancel, 1, params, on_cancelled, h);
}

static void on_list(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	hreq_reply_text(h, 200, value ? value : "{\"jobs\":[],\"next_cursor\":null}");
}

void api_jobs_list(struct hreq *h)
{
	static const char *const states[] = { "queued", "running", "succeeded", "failed", "cancelled" };
	char *state = hreq_query(h, "state"), *cursor = hreq_query(h, "cursor"), *limit_s = hreq_query(h, "limit");
	char limit[32];
	long long n = LIST_DEFAULT;
	bool ok = false;

	if (state && *state) {
		for (size_t i = 0; i < ARRAY_LEN(states); i++)
			ok |= strcmp(states[i], state) == 0;
		if (!ok) {
			hreq_error(h, 400, "invalid_request", "state",
				   "state must be queued, running, succeeded, failed or cancelled");
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
	snprintf(limit, sizeof limit, "%lld", n);
	{
		/* a submitter sees only its own jobs */
		const char *params[4] = { state, cursor, limit, h->who.name };
		if (h->who.role == AUTH_SUBMITTER)
			db_exec(h->app->db, sql_job_list_owned, 4, params, on_list, h);
		else
			db_exec(h->app->db, sql_job_list, 3, params, on_list, h);
	}
out:
	free(state);
	free(cursor);
	free(limit_s);
}
