/* Token management (see api_tokens.h): the admin handlers and the blocking `rungd token`
 * command. A token is "rung_" + 64 hex digits of getrandom; the database keeps its SHA-256 only.
 * Revoking through the API drops the token from this replica's cache at once; other replicas
 * (and `rungd token revoke`) take up to AUTH_CACHE_TTL_MS. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_tokens.h"
#include "app.h"
#include "auth.h"
#include "db.h"
#include "expiry.h"
#include "http.h"
#include "lease.h"
#include "log.h"
#include "pool.h"
#include "sql.h"
#include "util.h"

static const char *const create_keys[] = { "role", "name", "expires_in_s" };

const char *api_tokens_check_create(const json_t *body, const char **role, const char **name,
				    long long *expires_in_s, char **msg)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)body, key, v) {
		bool known = false;
		for (size_t i = 0; i < ARRAY_LEN(create_keys); i++)
			known |= strcmp(create_keys[i], key) == 0;
		if (!known) {
			*msg = xasprintf("unknown field \"%s\" (expected role, name, expires_in_s)", key);
			return key; /* borrowed from body, which outlives the error reply */
		}
	}
	*role = json_string_value(json_object_get(body, "role"));
	if (auth_role_parse(*role) == AUTH_NONE) {
		*msg = xstrdup("role must be submitter, worker, support or admin");
		return "role";
	}
	v = json_object_get(body, "name");
	*name = NULL;
	if (v && !json_is_null(v)) {
		*name = json_string_value(v);
		if (!auth_name_new_ok(*name)) {
			*msg = xasprintf("name must be 1 to %d characters of A-Z a-z 0-9 . _ @ -, not all digits (an id)",
					 AUTH_NAME_MAX);
			return "name";
		}
	}
	v = json_object_get(body, "expires_in_s");
	*expires_in_s = 0;
	if (v && !json_is_null(v)) {
		if (!json_is_integer(v) || json_integer_value(v) < EXPIRY_MIN_S || json_integer_value(v) > EXPIRY_MAX_S) {
			*msg = xasprintf("expires_in_s must be an integer number of seconds from %lld (a minute) to %lld "
					 "(3650 days), or null or absent for a token that never expires",
					 EXPIRY_MIN_S, EXPIRY_MAX_S);
			return "expires_in_s";
		}
		*expires_in_s = (long long)json_integer_value(v);
	}
	return NULL;
}

const char *api_tokens_expires_param(long long expires_in_s, char buf[32])
{
	if (expires_in_s <= 0)
		return NULL;
	snprintf(buf, 32, "%lld", expires_in_s);
	return buf;
}

struct create {
	struct hreq *h;
	char token[AUTH_TOKEN_LEN + 1];
};

static void on_created(PGresult *res, const char *err, void *arg)
{
	struct create *c = arg;
	struct hreq *h = c->h;
	const char *value;
	json_t *doc = NULL, *tok;

	if (hreq_db_value(h, res, err, &value) < 0)
		goto out;
	doc = value ? json_loads(value, 0, NULL) : NULL;
	tok = json_object_get(doc, "token");
	if (!json_is_object(tok)) {
		hreq_error(h, 409, "name_taken", "name", "a token with this name exists (names are never reused)");
		goto out;
	}
	log_info("token created", "token=%lld name=%s role=%s expires_at=%s by=%s",
		 (long long)json_integer_value(json_object_get(tok, "id")),
		 json_string_value(json_object_get(tok, "name")), json_string_value(json_object_get(tok, "role")),
		 json_string_value(json_object_get(tok, "expires_at")) ?: "never", h->who.name);
	json_object_set_new(tok, "token", json_string(c->token));
	hreq_reply(h, 201, json_incref(tok));
out:
	json_decref(doc);
	memset(c->token, 0, sizeof c->token);
	free(c);
}

void api_tokens_create(struct hreq *h)
{
	json_t *body = NULL;
	const char *role, *name, *field;
	char *msg = NULL, hash[AUTH_HASH_HEX + 1], secs[32];
	long long expires_in_s;
	struct create *c;

	if (hreq_body(h, &body) < 0)
		return;
	field = api_tokens_check_create(body, &role, &name, &expires_in_s, &msg);
	if (field) {
		hreq_error(h, 400, "invalid_request", field, "%s", msg);
		goto out;
	}
	c = xcalloc(1, sizeof *c);
	c->h = h;
	if (auth_token_new(c->token) < 0) {
		free(c);
		hreq_error(h, 500, "internal", NULL, "no randomness for a token");
		goto out;
	}
	auth_hash_hex(c->token, hash);
	{
		const char *params[4] = { name, role, hash, api_tokens_expires_param(expires_in_s, secs) };
		db_exec(h->app->db, sql_token_create, 4, params, on_created, c);
	}
out:
	free(msg);
	json_decref(body);
}

static void on_list(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	hreq_reply_text(h, 200, value ? value : "{\"tokens\":[]}");
}

void api_tokens_list(struct hreq *h)
{
	db_exec(h->app->db, sql_token_list, 0, NULL, on_list, h);
}

static void on_revoked(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value;
	json_t *doc;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	if (!value) {
		hreq_error(h, 404, "not_found", NULL, "no such token: %s", h->param[0]);
		return;
	}
	doc = json_loads(value, 0, NULL);
	auth_forget(h->app->auth, json_integer_value(json_object_get(doc, "id")));
	log_info("token revoked", "token=%s by=%s", h->param[0], h->who.name);
	hreq_reply(h, 200, doc);
}

void api_tokens_revoke(struct hreq *h)
{
	json_t *body = NULL;

	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such token: %s", h->param[0]);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	json_decref(body);
	const char *params[1] = { h->param[0] };
	db_exec(h->app->db, sql_token_revoke, 1, params, on_revoked, h);
}

void api_tokens_log_limits(const char *token, const json_t *doc, const char *by, const char *via)
{
	char n[32] = "none", hours[48] = "none", *pools = pool_limits_text(json_object_get(doc, "pool_max_running"), ",", "none");
	char *pool_hours = pool_limits_text(json_object_get(doc, "pool_gpu_hours"), ",", "none");

	if (json_is_integer(json_object_get(doc, "max_running")))
		snprintf(n, sizeof n, "%lld", (long long)json_integer_value(json_object_get(doc, "max_running")));
	if (json_is_number(json_object_get(doc, "gpu_hours")))
		snprintf(hours, sizeof hours, "%g/%lldd", json_number_value(json_object_get(doc, "gpu_hours")),
			 (long long)json_integer_value(json_object_get(doc, "gpu_hours_days")));
	log_info("token limit set", "token=%s max_running=%s pool_max_running=%s gpu_hours=%s pool_gpu_hours=%s by=%s via=%s",
		 token, n, pools, hours, pool_hours, by, via);
	free(pools);
	free(pool_hours);
}

bool api_tokens_limit_ok(const json_t *v)
{
	return json_is_null(v) ||
	       (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= API_TOKENS_MAX_RUNNING);
}

static void on_limited(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	json_t *doc = hreq_db_doc(h, res, err, "token");

	if (!doc)
		return;
	api_tokens_log_limits(h->param[0], doc, h->who.name, "api");
	lease_announce(h->app->lease); /* a raised or lifted limit: the parked GPUs of every replica may take its jobs */
	hreq_reply(h, 200, doc);
}

/* A map of pools in a limits body: null, or {"POOL": value | null} of 1 to API_TOKENS_POOLS_MAX pool
 * names, each value a limit (api_tokens_limit_ok: pool_max_running, migration 034) or, with hours, a
 * number of GPU hours 0 to API_TOKENS_MAX_GPU_HOURS (pool_gpu_hours, 037). 0, or -1 with *msg. */
static int check_pools(const json_t *v, bool hours, char **msg)
{
	const char *pool;
	json_t *n;

	if (json_is_null(v))
		return 0;
	if (!json_is_object(v) || json_object_size(v) == 0 || json_object_size(v) > API_TOKENS_POOLS_MAX) {
		*msg = hours ? xasprintf("must be an object of 1 to %d pools, each with its quota (a number of GPU hours from 0 "
					 "to %d, or null to lift it), or null (no quota in any pool)",
					 API_TOKENS_POOLS_MAX, API_TOKENS_MAX_GPU_HOURS)
			     : xasprintf("must be an object of 1 to %d pools, each with its limit (an integer from 0 to %d, or "
					 "null to lift it), or null (no limit in any pool)",
					 API_TOKENS_POOLS_MAX, API_TOKENS_MAX_RUNNING);
		return -1;
	}
	json_object_foreach((json_t *)v, pool, n) {
		if (!pool_name_ok(pool)) {
			*msg = xasprintf("\"%.64s\" is not a pool name: %s", pool, POOL_NAME_RULE);
			return -1;
		}
		if (hours && !json_is_null(n) &&
		    (!json_is_number(n) || json_number_value(n) < 0 || json_number_value(n) > API_TOKENS_MAX_GPU_HOURS)) {
			*msg = xasprintf("the quota of pool %s must be a number of GPU hours from 0 (none of its jobs of that "
					 "pool starts) to %d, or null (no quota there)", pool, API_TOKENS_MAX_GPU_HOURS);
			return -1;
		}
		if (!hours && !api_tokens_limit_ok(n)) {
			*msg = xasprintf("the limit of pool %s must be an integer from 0 (none of its jobs of that pool starts) "
					 "to %d, or null (no limit there)", pool, API_TOKENS_MAX_RUNNING);
			return -1;
		}
	}
	return 0;
}

const char *api_tokens_check_limits(const json_t *body, char **msg)
{
	const char *key;
	json_t *v;

	*msg = NULL;
	if (!json_is_object(body) || (!json_object_get(body, "max_running") && !json_object_get(body, "pool_max_running") &&
				      !json_object_get(body, "gpu_hours") && !json_object_get(body, "gpu_hours_days") &&
				      !json_object_get(body, "pool_gpu_hours"))) {
		*msg = xasprintf("the body is {\"max_running\": N | null, \"pool_max_running\": {\"POOL\": N | null} | "
				 "null, \"gpu_hours\": H | null, \"gpu_hours_days\": D, \"pool_gpu_hours\": {\"POOL\": H | "
				 "null} | null}, with at least one of them");
		return "max_running";
	}
	json_object_foreach((json_t *)body, key, v) {
		if (!strcmp(key, "max_running")) {
			if (!api_tokens_limit_ok(v)) {
				*msg = xasprintf("must be an integer from 0 (none of its jobs starts) to %d, or null (no limit)",
						 API_TOKENS_MAX_RUNNING);
				return "max_running";
			}
		} else if (!strcmp(key, "pool_max_running") || !strcmp(key, "pool_gpu_hours")) {
			if (check_pools(v, !strcmp(key, "pool_gpu_hours"), msg) < 0)
				return !strcmp(key, "pool_gpu_hours") ? "pool_gpu_hours" : "pool_max_running";
		} else if (!strcmp(key, "gpu_hours")) { /* migration 035: a quota of GPU hours over gpu_hours_days */
			if (!json_is_null(v) && (!json_is_number(v) || json_number_value(v) < 0 ||
						 json_number_value(v) > API_TOKENS_MAX_GPU_HOURS)) {
				*msg = xasprintf("must be a number of GPU hours from 0 (none of its jobs starts) to %d, or null "
						 "(no quota)", API_TOKENS_MAX_GPU_HOURS);
				return "gpu_hours";
			}
		} else if (!strcmp(key, "gpu_hours_days")) {
			if (!json_is_integer(v) || json_integer_value(v) < API_TOKENS_QUOTA_DAYS_MIN ||
			    json_integer_value(v) > API_TOKENS_QUOTA_DAYS_MAX) {
				*msg = xasprintf("must be a whole number of days from %d to %d: the window gpu_hours counts",
						 API_TOKENS_QUOTA_DAYS_MIN, API_TOKENS_QUOTA_DAYS_MAX);
				return "gpu_hours_days";
			}
		} else {
			*msg = xasprintf("is not a field of a token's limits (max_running, pool_max_running, gpu_hours, "
					 "gpu_hours_days, pool_gpu_hours)");
			return key;
		}
	}
	return NULL;
}

void api_tokens_limits(struct hreq *h)
{
	json_t *body = NULL;
	const char *field;
	char *msg = NULL, *text = NULL;

	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such token: %s", h->param[0]);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	field = api_tokens_check_limits(body, &msg);
	if (field) {
		hreq_error(h, 400, "invalid_request", field, "%s", msg);
		goto out;
	}
	text = json_dumps(body, JSON_COMPACT);
	{
		const char *params[2] = { h->param[0], text };
		db_exec(h->app->db, sql_token_set_limit, 2, params, on_limited, h);
	}
out:
	free(text);
	free(msg);
	json_decref(body);
}

static void on_pools_set(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	json_t *doc = hreq_db_doc(h, res, err, "token");
	char *pools;

	if (!doc)
		return;
	pools = json_is_array(json_object_get(doc, "pools")) ? json_dumps(json_object_get(doc, "pools"), JSON_COMPACT)
							   : xstrdup("any");
	log_info("token pools set", "token=%s pools=%s by=%s", h->param[0], pools ? pools : "?", h->who.name);
	free(pools);
	hreq_reply(h, 200, doc);
}

void api_tokens_pools(struct hreq *h)
{
	json_t *body = NULL, *v, *p;
	char *text = NULL;
	size_t i;

	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such token: %s", h->param[0]);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	v = json_object_get(body, "pools");
	if (!json_is_object(body) || json_object_size(body) != 1 || !(json_is_null(v) || json_is_array(v)) ||
	    json_array_size(v) > API_TOKENS_POOLS_MAX || (json_is_array(v) && json_array_size(v) == 0))
		goto bad;
	json_array_foreach(v, i, p)
		if (!pool_name_ok(json_string_value(p)))
			goto bad;
	text = json_is_array(v) ? json_dumps(v, JSON_COMPACT) : NULL;
	{
		const char *params[2] = { h->param[0], text };
		db_exec(h->app->db, sql_token_set_pools, 2, params, on_pools_set, h);
	}
	goto out;
bad:
	hreq_error(h, 400, "invalid_request", "pools",
		   "the body is {\"pools\": [NAME, ...]} with 1 to %d pool names (%s), or null (any pool)",
		   API_TOKENS_POOLS_MAX, POOL_NAME_RULE);
out:
	free(text);
	json_decref(body);
}

static void on_expiry_set(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	json_t *doc = hreq_db_doc(h, res, err, "token"), *tok;

	if (!doc)
		return;
	tok = json_object_get(doc, "token");
	if (strcmp(json_string_value(json_object_get(doc, "status")) ?: "", "revoked") == 0) {
		hreq_error(h, 409, "token_revoked", NULL, "token %s was revoked: a revoked token stays revoked (create a new one)",
			   h->param[0]);
		json_decref(doc);
		return;
	}
	auth_forget(h->app->auth, json_integer_value(json_object_get(tok, "id"))); /* its cached expiry is stale */
	log_info("token expiry set", "token=%s expires_at=%s by=%s", h->param[0],
		 json_string_value(json_object_get(tok, "expires_at")) ?: "never", h->who.name);
	hreq_reply(h, 200, json_incref(tok));
	json_decref(doc);
}

void api_tokens_expiry(struct hreq *h)
{
	json_t *body = NULL, *v;
	char secs[32];

	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such token: %s", h->param[0]);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	v = json_object_get(body, "expires_in_s");
	if (!json_is_object(body) || json_object_size(body) != 1 || !v ||
	    !(json_is_null(v) || (json_is_integer(v) && json_integer_value(v) >= EXPIRY_MIN_S &&
				   json_integer_value(v) <= EXPIRY_MAX_S))) {
		hreq_error(h, 400, "invalid_request", "expires_in_s",
			   "the body is {\"expires_in_s\": N} with N seconds from now, %lld (a minute) to %lld (3650 days), "
			   "or null (never expires)", EXPIRY_MIN_S, EXPIRY_MAX_S);
		goto out;
	}
	{
		const char *params[2] = { h->param[0],
					  api_tokens_expires_param(json_is_null(v) ? 0 : json_integer_value(v), secs) };
		db_exec(h->app->db, sql_token_set_expiry, 2, params, on_expiry_set, h);
	}
out:
	json_decref(body);
}

/* ---- rungd token create|revoke (blocking) ---- */

static void cmd_usage(FILE *f)
{
	fputs("usage: rungd token create --role submitter|worker|support|admin [--name NAME] [--expires DURATION]\n"
	      "                          [--database-url URL]\n"
	      "       rungd token revoke NAME|ID [--database-url URL]\n"
	      "create prints the new token on stdout; it is shown only this once (the database keeps its\n"
	      "SHA-256). --expires: the token stops working by itself after DURATION (90d, 12h, 30m, 3600s or\n"
	      "bare seconds; 60 s to 3650d); without it, it never expires. A revoke takes effect on running\n"
	      "servers within 5 seconds.\n", f);
}

/* Runs one embedded statement; returns the first value (heap; NULL when none) or sets *failed. */
static char *cmd_value(PGconn *pg, const char *sql, int n, const char *const *params, bool *failed)
{
	PGresult *r = PQexecParams(pg, sql, n, NULL, params, NULL, NULL, 0);
	char *out = NULL;

	*failed = PQresultStatus(r) != PGRES_TUPLES_OK;
	if (*failed)
		fprintf(stderr, "rungd token: %s", PQresultErrorMessage(r));
	else if (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		out = xstrdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return out;
}

int api_tokens_cmd(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "role", required_argument, NULL, 'r' },
		{ "name", required_argument, NULL, 'n' },
		{ "expires", required_argument, NULL, 'e' },
		{ "database-url", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *url = getenv("RUNG_DATABASE_URL") ? getenv("RUNG_DATABASE_URL")
						      : "postgresql://postgres@127.0.0.1:5432/rung";
	const char *role = NULL, *name = NULL, *expires = NULL, *verb, *why;
	char token[AUTH_TOKEN_LEN + 1] = "", hash[AUTH_HASH_HEX + 1], secs[32];
	long long expires_in_s = 0;
	char *value = NULL;
	json_t *doc = NULL;
	PGconn *pg = NULL;
	bool failed;
	int c, rc = 2;

	if (argc < 2) {
		cmd_usage(stderr);
		return 2;
	}
	verb = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': role = optarg; break;
		case 'n': name = optarg; break;
		case 'e': expires = optarg; break;
		case 'd': url = optarg; break;
		case 'h': cmd_usage(stdout); return 0;
		default: cmd_usage(stderr); return 2;
		}
	}
	if (strcmp(verb, "create") == 0) {
		if (optind != argc || auth_role_parse(role) == AUTH_NONE || (name && !auth_name_new_ok(name))) {
			fprintf(stderr, "rungd token create: needs --role submitter|worker|support|admin and an optional "
					"--name of 1-%d characters [A-Za-z0-9._@-]\n", AUTH_NAME_MAX);
			return 2;
		}
		if (expires && expiry_parse(expires, &expires_in_s, &why) < 0) {
			fprintf(stderr, "rungd token create: --expires %s: %s\n", expires, why);
			return 2;
		}
	} else if (strcmp(verb, "revoke") == 0) {
		if (optind != argc - 1 || expires) {
			cmd_usage(stderr);
			return 2;
		}
	} else {
		cmd_usage(stderr);
		return 2;
	}
	rc = 1;
	pg = PQconnectdb(url);
	if (PQstatus(pg) != CONNECTION_OK) {
		fprintf(stderr, "rungd token: cannot connect: %s", PQerrorMessage(pg));
		goto out;
	}
	if (strcmp(verb, "revoke") == 0) {
		const char *params[1] = { argv[optind] };
		value = cmd_value(pg, sql_token_revoke, 1, params, &failed);
		if (failed)
			goto out;
		if (!value) {
			fprintf(stderr, "rungd token revoke: no such token: %s\n", argv[optind]);
			goto out;
		}
		fprintf(stderr, "rungd token: revoked %s (running servers stop accepting it within %d s)\n", value,
			AUTH_CACHE_TTL_MS / 1000);
		rc = 0;
		goto out;
	}
	if (auth_token_new(token) < 0) {
		fprintf(stderr, "rungd token: no randomness\n");
		goto out;
	}
	auth_hash_hex(token, hash);
	{
		const char *params[4] = { name, role, hash, api_tokens_expires_param(expires_in_s, secs) };
		value = cmd_value(pg, sql_token_create, 4, params, &failed);
	}
	if (failed)
		goto out;
	doc = value ? json_loads(value, 0, NULL) : NULL;
	if (!json_is_object(json_object_get(doc, "token"))) {
		fprintf(stderr, "rungd token create: a token named \"%s\" exists (names are never reused)\n",
			name ? name : "?");
		goto out;
	}
	printf("%s\n", token);
	fflush(stdout);
	fprintf(stderr, "rungd token: created id=%lld name=%s role=%s expires_at=%s; the token above is shown only once\n",
		(long long)json_integer_value(json_object_get(json_object_get(doc, "token"), "id")),
		json_string_value(json_object_get(json_object_get(doc, "token"), "name")), role,
		json_string_value(json_object_get(json_object_get(doc, "token"), "expires_at")) ?: "never");
	rc = 0;
out:
	memset(token, 0, sizeof token);
	json_decref(doc);
	free(value);
	PQfinish(pg);
	return rc;
}
