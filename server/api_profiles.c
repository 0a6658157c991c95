/* Handlers of the memory model's routes (see api_profiles.h): one statement each for the stored
 * observations, then memmodel_fit / memmodel_predict on the loop (pure, at most 200 observations
 * per profile), then the reply. */
#include "api_profiles.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "db.h"
#include "http.h"
#include "log.h"
#include "memcache.h"
#include "memmodel.h"
#include "sql.h"
#include "util.h"

bool api_profiles_arch_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > API_PROFILES_ARCH_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
			return false;
	return true;
}

long api_profiles_parse_mib(const char *s)
{
	long v = 0;

	if (!s || !*s || strlen(s) > 9)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v >= 1 && v <= API_PROFILES_GPU_MIB_MAX ? v : -1;
}

static void on_list(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	json_t *doc = hreq_db_doc(h, res, err, "profiles"), *out, *e;
	size_t i;

	if (!doc)
		return;
	out = json_array();
	json_array_foreach(doc, i, e) {
		const char *arch = json_string_value(json_object_get(e, "arch"));
		int cls = (int)json_integer_value(json_object_get(e, "gpu_class_mib"));
		json_t *p = memmodel_fit(json_object_get(e, "observations"), arch ? arch : "unknown", cls);
		json_object_set(p, "gpu_class_mib", json_object_get(e, "gpu_class_mib"));
		json_object_set(p, "reset_at", json_object_get(e, "reset_at"));
		json_object_set(p, "reset_by", json_object_get(e, "reset_by"));
		json_array_append_new(out, p);
	}
	json_decref(doc);
	hreq_reply(h, 200, json_pack("{s:o}", "profiles", out));
}

/* The 400 of an arch that is not one (api_profiles_arch_ok). */
static void arch_error(struct hreq *h)
{
	hreq_error(h, 400, "invalid_request", "arch", "arch must be 1-%d characters of A-Z a-z 0-9 _ . -",
		   API_PROFILES_ARCH_MAX);
}

void api_profiles_list(struct hreq *h)
{
	char *arch = hreq_query(h, "arch");
	const char *params[1];

	if (arch && *arch && !api_profiles_arch_ok(arch)) {
		arch_error(h);
		goto out;
	}
	params[0] = arch && *arch ? arch : NULL;
	db_exec(h->app->db, sql_profile_list, 1, params, on_list, h);
out:
	free(arch);
}

static void on_reset(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	const char *value;

	if (hreq_db_value(h, res, err, &value) < 0)
		return;
	if (!value) {
		hreq_error(h, 404, "not_found", NULL, "no memory profile of %s on %s MiB GPUs", h->param[0], h->param[1]);
		return;
	}
	log_info("memory profile reset", "arch=%s gpu_class_mib=%s by=%s", h->param[0], h->param[1], h->who.name);
	memcache_reset(h->app->memcache, h->param[0], atoi(h->param[1])); /* leases stop using what it learned */
	hreq_reply_text(h, 200, value);
}

void api_profiles_reset(struct hreq *h)
{
	json_t *body = NULL;
	const char *note;
	char cls[24];
	long mib;

	if (!api_profiles_arch_ok(h->param[0])) {
		arch_error(h);
		return;
	}
	mib = api_profiles_parse_mib(h->param[1]);
	if (mib < 0) {
		hreq_error(h, 400, "invalid_request", "gpu_class_mib", "gpu_class_mib must be an integer from 1 to %d",
			   API_PROFILES_GPU_MIB_MAX);
		return;
	}
	if (hreq_body(h, &body) < 0)
		return;
	if (hreq_note(h, body, &note) < 0)
		goto out;
	snprintf(cls, sizeof cls, "%ld", mib);
	{
		const char *params[4] = { h->param[0], cls, h->who.name[0] ? h->who.name : NULL, note };
		db_exec(h->app->db, sql_profile_reset, 4, params, on_reset, h);
	}
out:
	json_decref(body);
}

static void on_job(PGresult *res, const char *err, void *arg)
{
	struct hreq *h = arg;
	json_t *doc = hreq_db_doc(h, res, err, "job"), *features, *profile = NULL, *estimate = NULL;
	const char *arch;
	int gpu;

	if (!doc)
		return;
	arch = json_string_value(json_object_get(doc, "arch"));
	gpu = (int)json_integer_value(json_object_get(doc, "gpu_mib"));
	features = memmodel_features(json_object_get(doc, "config"), json_string_value(json_object_get(doc, "kind")));
	if (gpu > 0) {
		profile = memmodel_fit(json_object_get(doc, "observations"), arch ? arch : "unknown", gpu);
		estimate = memmodel_predict(profile, features);
		json_object_del(profile, "fits"); /* the configs that ran fine: /v1/profiles lists them */
	}
	hreq_reply(h, 200, json_pack("{s:O, s:s?, s:O, s:o, s:o, s:o}", "job_id", json_object_get(doc, "job_id"), "arch",
				     arch, "gpu_mib", json_object_get(doc, "gpu_mib"), "features", features,
				     "profile", profile ? profile : json_null(), "estimate",
				     estimate ? estimate : json_null()));
	json_decref(doc);
}

void api_profiles_job(struct hreq *h)
{
	char *gpu = hreq_query(h, "gpu_mib"), cls[24];
	long mib = -1;

	if (http_parse_id(h->param[0]) < 0) {
		hreq_error(h, 404, "not_found", NULL, "no such job: %s", h->param[0]);
		goto out;
	}
	if (gpu && (mib = api_profiles_parse_mib(gpu)) < 0) {
		hreq_error(h, 400, "invalid_request", "gpu_mib", "gpu_mib must be an integer from 1 to %d",
			   API_PROFILES_GPU_MIB_MAX);
		goto out;
	}
	snprintf(cls, sizeof cls, "%ld", mib);
	{
		const char *params[2] = { h->param[0], mib > 0 ? cls : NULL };
		db_exec(h->app->db, sql_job_memory, 2, params, on_job, h);
	}
out:
	free(gpu);
}
