/* Integration: bad requests get a 4xx with the JSON error shape {error, message, field} naming
 * the field, and change nothing (rows counted in Postgres). Real rungd and Postgres, no worker. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"

/* Checks status (want 0: any 4xx), the error shape, and that `field` (when not NULL) occurs in
 * the answer's field path. Consumes j. */
static void check_error(struct harness *h, const char *name, long st, long want, json_t *j, const char *field)
{
	bool status_ok = want ? st == want : st >= 400 && st < 500;
	if (!h_ok(h, status_ok, "%s: status %ld", name, want))
		h_diag("got %ld, body %.500s", st, h->last_body ? h->last_body : "");
	json_t *f = json_object_get(j, "field");
	bool shape = json_is_string(json_object_get(j, "error")) && json_is_string(json_object_get(j, "message")) &&
		f && (json_is_string(f) || json_is_null(f));
	if (!h_ok(h, shape, "%s: JSON error {error, message, field}", name))
		h_diag("body %.500s", h->last_body ? h->last_body : "");
	if (field) {
		const char *got = json_is_string(f) ? json_string_value(f) : "";
		if (!h_ok(h, strstr(got, field) != NULL, "%s: field names %s", name, field))
			h_diag("field %s", json_is_string(f) ? got : "(not a string)");
	}
	json_decref(j);
}

static void post_body(struct harness *h, const char *name, const json_t *body, long want, const char *field)
{
	long st = 0;
	json_t *j = h_post(h, "/v1/jobs", body, &st);
	check_error(h, name, st, want, j, field);
}

/* Submits a valid config with one change at `path` and expects a 400 naming `field`. */
static void bad_config(struct harness *h, const char *name, const char *path, json_t *value, const char *field)
{
	json_t *cfg = h_config("bad", 100);
	if (h_config_set(cfg, path, value) != 0)
		h_diag("cannot set %s", path);
	json_t *body = json_pack("{s:o}", "config", cfg);
	post_body(h, name, body, 400, field);
	json_decref(body);
}

static long long count_jobs(struct harness *h)
{
	return h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL);
}

int main(void)
{
	struct harness *h = h_new("it_badinput");
	long st = 0;
	json_t *j;

	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts and answers /healthz"))
		return h_free(h);

	j = h_get(h, "/healthz", &st);
	h_ok(h, st == 200 && json_is_true(json_object_get(j, "ok")) && !strcmp(h_str(j, "database"), "up"),
		"healthz: ok true, database up");
	json_decref(j);

	/* Transport-level and routing errors. */
	j = h_get(h, "/v1/no-such-route", &st);
	check_error(h, "unknown route", st, 404, j, NULL);
	j = h_get(h, "/v1/jobs/999999", &st);
	check_error(h, "unknown job id", st, 404, j, NULL);
	j = h_get(h, "/v1/jobs/abc", &st);
	check_error(h, "non-numeric job id", st, 0, j, NULL);

	const char *malformed = "{\"config\": {\"job\": ";
	j = h_post_raw(h, "/v1/jobs", malformed, strlen(malformed), &st);
	check_error(h, "malformed JSON", st, 400, j, NULL);
	j = h_post_raw(h, "/v1/jobs", "[1,2]", 5, &st);
	check_error(h, "body not an object", st, 400, j, NULL);
	j = h_post_raw(h, "/v1/jobs", "", 0, &st);
	check_error(h, "empty body", st, 400, j, NULL);

	/* An oversized body (> 1 MiB): a valid JSON string padded past the cap. */
	size_t big = (1u << 20) + 4096;
	char *body = xmalloc(big + 64);
	int n = snprintf(body, 64, "{\"name\": \"");
	memset(body + n, 'x', big);
	strcpy(body + n + big, "\", \"config\": {}}");
	j = h_post_raw(h, "/v1/jobs", body, strlen(body), &st);
	check_error(h, "oversized body", st, 413, j, NULL);
	free(body);

	/* Request shape. */
	json_t *b = json_object();
	post_body(h, "missing config", b, 400, "config");
	json_decref(b);
	b = json_pack("{s:s}", "config", "not an object");
	post_body(h, "config of the wrong type", b, 400, "config");
	json_decref(b);
	b = json_pack("{s:o, s:s}", "config", h_config("x", 10), "priority", "high");
	post_body(h, "priority of the wrong type", b, 400, "priority");
	json_decref(b);
	b = json_pack("{s:o, s:i}", "config", h_config("x", 10), "name", 7);
	post_body(h, "name of the wrong type", b, 400, "name");
	json_decref(b);
	b = json_pack("{s:o, s:i}", "config", h_config("x", 10), "colour", 1);
	post_body(h, "unknown top-level field", b, 400, "colour");
	json_decref(b);
	b = json_pack("{s:o, s:{s:s}}", "config", h_config("x", 10), "recovery", "max_attempts", "ten");
	post_body(h, "recovery field of the wrong type", b, 400, "max_attempts");
	json_decref(b);

	/* Config validation (atconfig_validate): the field is the path of the problem. */
	bad_config(h, "batch_size 0", "config.process[0].train.batch_size", json_integer(0), "train.batch_size");
	bad_config(h, "batch_size a string", "config.process[0].train.batch_size", json_string("four"),
		"train.batch_size");
	bad_config(h, "empty resolution list", "config.process[0].datasets[0].resolution", json_array(),
		"resolution");
	bad_config(h, "non-numeric frames", "config.process[0].datasets[0].num_frames", json_string("many"),
		"num_frames");
	bad_config(h, "steps negative", "config.process[0].train.steps", json_integer(-5), "train.steps");
	bad_config(h, "process not a list", "config.process", json_string("x"), "process");

	h_ok(h, count_jobs(h) == 0, "no job row was inserted by any bad request");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM events", 0, NULL) == 0, "no event row was written");

	/* The same valid config is accepted: the rejections above were about the bad parts only. */
	json_t *cfg = h_config("good", 100);
	j = h_submit(h, cfg, NULL);
	h_ok(h, j && h->last_status == 201, "a valid config is accepted (201, got %ld)", h->last_status);
	h_ok(h, count_jobs(h) == 1, "exactly one job row after the valid submit");
	json_decref(j);
	json_decref(cfg);

	/* Worker-side routes. */
	b = json_pack("{s:s}", "name", "w");
	j = h_post(h, "/v1/workers", b, &st);
	check_error(h, "register without gpus", st, 400, j, "gpus");
	json_decref(b);
	/* a uuid is a path segment of /v1/gpus/{uuid} (health, release): one that could not route is refused */
	b = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", "w-mig", "host", "h", "gpus", "uuid",
		      "MIG-GPU-8e3b2a1c/1/0", "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 24576);
	j = h_post(h, "/v1/workers", b, &st);
	check_error(h, "register a GPU whose uuid holds a slash", st, 400, j, "gpus[0].uuid");
	json_decref(b);
	b = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", "w-dots", "host", "h", "gpus", "uuid", "..", "index",
		      0, "name", "NVIDIA Sim", "memory_total_mib", 24576);
	j = h_post(h, "/v1/workers", b, &st);
	check_error(h, "register a GPU whose uuid is ..", st, 400, j, "gpus[0].uuid");
	json_decref(b);
	/* "version" is optional, but when given 1..64 printable ASCII characters (a label, a log value) */
	b = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}], s:s}", "name", "w-ver", "host", "h", "gpus", "uuid", "GPU-ver-0",
		      "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 24576, "version", "v1\n2");
	j = h_post(h, "/v1/workers", b, &st);
	check_error(h, "register with a version holding a newline", st, 400, j, "version");
	json_decref(b);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM workers", 0, NULL) == 0, "no worker row from a refused registration");
	char *wid = h_fake_register(h, "wbad", "GPU-bad-0", 24576);
	h_ok(h, wid != NULL, "register a worker");
	if (wid) {
		b = json_pack("{s:s, s:i}", "gpu_uuid", "GPU-bad-0", "wait_ms", 70000);
		j = h_postf(h, b, &st, "/v1/workers/%s/lease", wid);
		check_error(h, "lease wait_ms out of range", st, 400, j, "wait_ms");
		json_decref(b);
		b = json_pack("{s:i}", "wait_ms", 0);
		j = h_postf(h, b, &st, "/v1/workers/%s/lease", wid);
		check_error(h, "lease without gpu_uuid", st, 400, j, "gpu_uuid");
		json_decref(b);
	}
	b = json_pack("{s:s}", "token", "nope");
	j = h_post(h, "/v1/attempts/424242/heartbeat", b, &st);
	h_ok(h, st == 409 || st == 404, "heartbeat for an unknown attempt: 409/404 (got %ld)", st);
	json_decref(j);
	json_decref(b);
	j = h_get(h, "/v1/jobs?limit=abc", &st);
	check_error(h, "list with a non-numeric limit", st, 400, j, "limit");
	j = h_get(h, "/v1/jobs?state=bogus", &st);
	check_error(h, "list with an unknown state", st, 400, j, "state");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts", 0, NULL) == 0, "no attempt row was created");

	free(wid);
	return h_free(h);
}
