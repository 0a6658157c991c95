/* rungctl token create|list|revoke|limit (see cmd_token.h): one call each to the admin token API.
 * create prints the secret alone on stdout (details on stderr) so scripts can capture it. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_token.h"
#include "expiry.h"
#include "pool.h"
#include "table.h"
#include "util.h"

json_t *cmd_token_create_body(const char *role, const char *name, const char *expires, char **err)
{
	long long secs = 0;
	const char *why;
	json_t *body;

	*err = NULL;
	if (!role) {
		*err = xstrdup("--role submitter|worker|support|admin is required");
		return NULL;
	}
	if (expires && expiry_parse(expires, &secs, &why) < 0) {
		*err = xasprintf("--expires %s: %s", expires, why);
		return NULL;
	}
	body = json_pack("{s:s, s:s?}", "role", role, "name", name);
	if (!body) {
		*err = xstrdup("--role and --name must be UTF-8 text");
		return NULL;
	}
	if (expires)
		json_object_set_new(body, "expires_in_s", json_integer(secs));
	return body;
}

char *cmd_token_expires_cell(const json_t *token)
{
	const json_t *at = json_object_get(token, "expires_at");

	if (!json_is_string(at))
		return xstrdup("never");
	if (json_is_true(json_object_get(token, "expired")))
		return xstrdup("expired");
	return xstrdup(json_string_value(at));
}

int cmd_token_create(struct cli *c, int argc, char **argv)
{
	const char *role = NULL, *name = NULL, *expires = NULL;
	char *ops[1], *err = NULL;
	json_t *ans = NULL, *body = NULL;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "role", .type = ARGS_STRING, .str = &role },
		{ .name = "name", .type = ARGS_STRING, .str = &name },
		{ .name = "expires", .type = ARGS_STRING, .str = &expires },
	};
	int rc = cli_args(c, cli_cmd_named("token create"), opts, ARRAY_LEN(opts), argc, argv, ops, 0, 0);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	body = cmd_token_create_body(role, name, expires, &err);
	if (!body) {
		fprintf(c->err, "rungctl token create: %s\n", err);
		free(err);
		return CLI_USAGE;
	}
	rc = cli_call(c, "POST", "/v1/tokens", body, NULL, &ans);
	if (rc == CLI_OK) {
		if (c->json) {
			cli_print_json(c, ans);
		} else {
			fprintf(c->out, "%s\n", json_string_value(json_object_get(ans, "token")) ?: "");
			fprintf(c->err, "token %lld name=%s role=%s expires=%s: shown only this once\n",
				(long long)json_integer_value(json_object_get(ans, "id")),
				json_string_value(json_object_get(ans, "name")) ?: "?",
				json_string_value(json_object_get(ans, "role")) ?: "?",
				json_string_value(json_object_get(ans, "expires_at")) ?: "never");
		}
	}
	json_decref(body);
	json_decref(ans);
	return rc;
}

/* A token's GPU-hour quotas as a cell: "500 per 7 days", "500, h200:100 per 7 days" with quotas per
 * pool (migration 037), "h200:100 per 7 days" with those alone, or "none" (migration 035). Heap. */
static char *quota_cell(const json_t *t)
{
	const json_t *h = json_object_get(t, "gpu_hours"), *ph = json_object_get(t, "pool_gpu_hours");
	long long days = (long long)json_integer_value(json_object_get(t, "gpu_hours_days"));
	char all[48] = "", *pools = json_object_size(ph) > 0 ? pool_limits_text(ph, ",", "") : NULL, *out;

	if (json_is_number(h))
		snprintf(all, sizeof all, "%g", json_number_value(h));
	if (!all[0] && !pools)
		return xstrdup("none");
	out = xasprintf("%s%s%s per %lld day%s", all, all[0] && pools ? ", " : "", pools ? pools : "", days,
			days == 1 ? "" : "s");
	free(pools);
	return out;
}

/* A token's limits per pool as a cell: "h200:2,video:0", or "none" (migration 034). Heap. */
static char *pool_limits_cell(const json_t *t)
{
	return pool_limits_text(json_object_get(t, "pool_max_running"), ",", "none");
}

/* A token's pools as a cell: "a,b", or "any" for none set (migration 027). Heap. */
static char *pools_cell(const json_t *t)
{
	return pool_list_join(json_object_get(t, "pools"), ",", "any");
}

int cmd_token_list(struct cli *c, int argc, char **argv)
{
	/* EXPIRES, POOLS, POOL LIMITS and GPU HOURS: cmd_token_expires_cell, pools_cell, pool_limits_cell and
	 * quota_cell, not a key's value */
	static const char *const head[] = { "ID", "NAME", "ROLE", "MAX RUNNING", "POOL LIMITS", "GPU HOURS", "CREATED",
					    "REVOKED", "EXPIRES", "POOLS" };
	static const char *const keys[] = { "id", "name", "role", "max_running", "pool_max_running", "gpu_hours",
					    "created_at", "revoked_at", NULL, "pools" };
	char *ops[1];
	json_t *ans = NULL, *t;
	size_t i;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("token list"), opts, ARRAY_LEN(opts), argc, argv, ops, 0, 0);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	rc = cli_call(c, "GET", "/v1/tokens", NULL, NULL, &ans);
	if (rc == CLI_OK && c->json) {
		cli_print_json(c, ans);
	} else if (rc == CLI_OK) {
		struct table *tb = table_new(ARRAY_LEN(head), head);
		json_array_foreach(cli_list(ans, "tokens"), i, t) {
			char *cells[ARRAY_LEN(keys)];
			for (size_t k = 0; k < ARRAY_LEN(keys); k++)
				cells[k] = !keys[k]			      ? cmd_token_expires_cell(t)
					   : !strcmp(keys[k], "pools")	      ? pools_cell(t)
					   : !strcmp(keys[k], "pool_max_running") ? pool_limits_cell(t)
					   : !strcmp(keys[k], "gpu_hours")	      ? quota_cell(t)
										  : table_cell(json_object_get(t, keys[k]));
			table_add(tb, (const char *const *)cells);
			for (size_t k = 0; k < ARRAY_LEN(keys); k++)
				free(cells[k]);
		}
		char *s = table_render(tb);
		fputs(s, c->out);
		free(s);
		table_free(tb);
	}
	json_decref(ans);
	return rc;
}

int cmd_token_revoke(struct cli *c, int argc, char **argv)
{
	char *ops[1];
	json_t *ans = NULL;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("token revoke"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	char *e = httpc_escape(ops[0]);
	char *path = xasprintf("/v1/tokens/%s/revoke", e);
	rc = cli_call(c, "POST", path, NULL, NULL, &ans);
	if (rc == CLI_OK) {
		if (c->json)
			cli_print_json(c, ans);
		else
			fprintf(c->out, "token %s (%s): revoked\n", ops[0], json_string_value(json_object_get(ans, "name")) ?: "?");
	}
	json_decref(ans);
	free(path);
	free(e);
	return rc;
}

/* A token's limit as a cell: its max_running, or "none". Heap. */
static char *limit_cell(const json_t *t)
{
	return json_is_null(json_object_get(t, "max_running")) ? xstrdup("none")
								: table_cell(json_object_get(t, "max_running"));
}

/* The setters' one shape: POST /v1/tokens/{id}/VERB with body (consumed), then the answer as JSON,
 * or "token ID (NAME): WHAT CELL" with cell(answer). Returns the cli_exit code. */
static int token_set(struct cli *c, const char *id, const char *verb, json_t *body, const char *what,
		     char *(*cell)(const json_t *))
{
	char *e = httpc_escape(id), *path = xasprintf("/v1/tokens/%s/%s", e, verb);
	json_t *ans = NULL;
	int rc = cli_call(c, "POST", path, body, NULL, &ans);

	if (rc == CLI_OK && c->json) {
		cli_print_json(c, ans);
	} else if (rc == CLI_OK) {
		char *text = cell(ans);
		fprintf(c->out, "token %s (%s): %s %s\n", id, json_string_value(json_object_get(ans, "name")) ?: "?", what, text);
		free(text);
	}
	json_decref(ans);
	json_decref(body);
	free(path);
	free(e);
	return rc;
}

/* Every limit of a token, as `token limit` prints it: "max_running 4, pool_max_running h200:2,
 * gpu_hours 500 per 7 days" (each "none" when unset). Heap. */
static char *limits_cell(const json_t *t)
{
	char *max = limit_cell(t), *pools = pool_limits_cell(t), *quota = quota_cell(t);
	char *out = xasprintf("max_running %s, pool_max_running %s, gpu_hours %s", max, pools, quota);

	free(max);
	free(pools);
	free(quota);
	return out;
}

int cmd_token_limit(struct cli *c, int argc, char **argv)
{
	char *ops[1], *end = NULL;
	const char *max = NULL, *pool = NULL, *hours = NULL, *days = NULL;
	json_t *body;
	long long v = -1, d = 0;
	double h = -1;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "max-running", .type = ARGS_STRING, .str = &max },
		{ .name = "pool", .type = ARGS_STRING, .str = &pool },
		{ .name = "gpu-hours", .type = ARGS_STRING, .str = &hours },
		{ .name = "days", .type = ARGS_STRING, .str = &days },
	};
	int rc = cli_args(c, cli_cmd_named("token limit"), opts, ARRAY_LEN(opts), argc, argv, ops, 1, 1);

	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (!max && !hours && !days) {
		fprintf(c->err, "rungctl token limit: give --max-running N|none (with --pool NAME: in that pool), --gpu-hours "
				"H|none or --days D\n");
		return CLI_USAGE;
	}
	if (max && strcmp(max, "none")) {
		v = strtoll(max, &end, 10);
		if (!*max || *end || v < 0) {
			fprintf(c->err, "rungctl token limit: --max-running must be a number from 0, or none\n");
			return CLI_USAGE;
		}
	}
	if (pool && ((!max && !hours) || !pool_name_ok(pool))) {
		fprintf(c->err, "rungctl token limit: --pool needs a pool name (%s) and --max-running or --gpu-hours\n",
			POOL_NAME_RULE);
		return CLI_USAGE;
	}
	if (hours && strcmp(hours, "none")) {
		h = strtod(hours, &end);
		if (!*hours || *end || !(h >= 0 && h <= 10000000)) { /* NaN and infinities fail too */
			fprintf(c->err, "rungctl token limit: --gpu-hours must be a number of hours from 0 to 10000000, or none\n");
			return CLI_USAGE;
		}
	}
	if (days) {
		d = strtoll(days, &end, 10);
		if (!*days || *end || d < 1) {
			fprintf(c->err, "rungctl token limit: --days must be a whole number of days from 1\n");
			return CLI_USAGE;
		}
	}
	body = json_object();
	/* with --pool, the limit in that pool alone (migration 034); the others stay as they are */
	if (max && pool)
		json_object_set_new(body, "pool_max_running", json_pack("{s:o}", pool, v >= 0 ? json_integer(v) : json_null()));
	else if (max)
		json_object_set_new(body, "max_running", v >= 0 ? json_integer(v) : json_null());
	/* a GPU-hour quota over the last --days days (migration 035); with --pool, that pool's alone (037) */
	if (hours && pool)
		json_object_set_new(body, "pool_gpu_hours", json_pack("{s:o}", pool, h >= 0 ? json_real(h) : json_null()));
	else if (hours)
		json_object_set_new(body, "gpu_hours", h >= 0 ? json_real(h) : json_null());
	if (days)
		json_object_set_new(body, "gpu_hours_days", json_integer(d));
	return token_set(c, ops[0], "limits", body, "limits:", limits_cell);
}

int cmd_token_pools(struct cli *c, int argc, char **argv)
{
	char *ops[2], *list, *save = NULL;
	json_t *body = NULL, *pools;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("token pools"), opts, ARRAY_LEN(opts), argc, argv, ops, 2, 2);

	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (!strcmp(ops[1], "any")) {
		body = json_pack("{s:n}", "pools");
	} else {
		pools = json_array();
		list = xstrdup(ops[1]);
		for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
			if (!pool_name_ok(p)) {
				fprintf(c->err, "rungctl token pools: \"%s\" is not a pool name: %s\n", p, POOL_NAME_RULE);
				free(list);
				json_decref(pools);
				return CLI_USAGE;
			}
			json_array_append_new(pools, json_string(p));
		}
		free(list);
		if (json_array_size(pools) == 0) {
			fprintf(c->err, "rungctl token pools: name the pools (NAME,NAME) or any\n");
			json_decref(pools);
			return CLI_USAGE;
		}
		body = json_pack("{s:o}", "pools", pools);
	}
	return token_set(c, ops[0], "pools", body, "pools", pools_cell);
}

int cmd_token_expiry(struct cli *c, int argc, char **argv)
{
	char *ops[2];
	json_t *body;
	const char *why;
	long long secs = 0;
	const struct args_opt opts[] = { CLI_COMMON_OPTS(c) };
	int rc = cli_args(c, cli_cmd_named("token expiry"), opts, ARRAY_LEN(opts), argc, argv, ops, 2, 2);

	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (strcmp(ops[1], "never") && expiry_parse(ops[1], &secs, &why) < 0) {
		fprintf(c->err, "rungctl token expiry: %s: %s (or never)\n", ops[1], why);
		return CLI_USAGE;
	}
	body = secs > 0 ? json_pack("{s:I}", "expires_in_s", (json_int_t)secs) : json_pack("{s:n}", "expires_in_s");
	return token_set(c, ops[0], "expiry", body, "expires", cmd_token_expires_cell);
}
