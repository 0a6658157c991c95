/* POST /v1/plan (see api_plan.h): the submit's reading and validation (api_jobs_read_submit), one
 * statement for the fleet's GPU sizes and the arch's observations (sql/plan_fleet.sql), then
 * policy_initial per size on the loop (api_plan_build, which the /ui/plan page runs too): the same
 * pure decision a lease makes for a first attempt (server/lease.c start_lower), on the same
 * observations. A lease reads them through rungd's profile cache (server/memcache.c), which may be
 * a fill behind or cold: then the plan, read fresh, knows a little more than the lease. */
#include "api_plan.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "api_jobs.h"
#include "api_profiles.h"
#include "app.h"
#include "auth.h"
#include "atconfig.h"
#include "db.h"
#include "http.h"
#include "jpath.h"
#include "log.h"
#include "memmodel.h"
#include "memplan.h"
#include "pool.h"
#include "policy.h"
#include "sql.h"
#include "util.h"

/* What the plan is made of, borrowed from api_plan_build's arguments. */
struct plan_in {
	const json_t *config;   /* the AI Toolkit file (the envelope's "config") */
	const json_t *recovery; /* RECOVERY, defaults filled */
	const char *kind;
	const char *arch;
};

/* One POST /v1/plan between db_exec and its callback. */
struct plan_req {
	struct hreq *h;
	json_t *config;   /* the AI Toolkit file (the envelope's "config") */
	json_t *recovery; /* RECOVERY, defaults filled */
	const char *kind; /* static (atconfig_kind) */
	char arch[API_PROFILES_ARCH_MAX + 1];
	long extra_mib;   /* ?gpu_mib=, 0 when not asked */
};

static void plan_req_free(struct plan_req *p)
{
	if (!p)
		return;
	json_decref(p->config);
	json_decref(p->recovery);
	free(p);
}

/* The decision for one GPU size: policy_initial on the CTX a lease would build (start_lower in
 * lease.c) plus the target's own estimate. A new object, or NULL with *err (heap). */
static json_t *plan_size(const struct plan_in *p, const json_t *size, const json_t *obs, long long fleet_mib,
			 char **err)
{
	long long gpu = jpath_int(size, "gpu_mib", 0);
	json_t *ctx, *init, *profile, *target_est, *out;

	/* json_pack's O only takes a reference: nothing borrowed is changed */
	ctx = json_pack("{s:{s:s, s:O, s:O}, s:{s:I}, s:{s:s, s:I, s:O}}", "job", "kind", p->kind, "target_config",
			(json_t *)p->config, "recovery", (json_t *)p->recovery, "gpu", "memory_total_mib", (json_int_t)gpu,
			"memory", "arch", p->arch, "gpu_mib", (json_int_t)gpu, "observations", (json_t *)obs);
	if (!ctx) {
		*err = xstrdup("cannot build the decision's context");
		return NULL;
	}
	if (fleet_mib > gpu) /* as a lease: requeue_bigger only toward a bigger GPU the fleet has */
		json_object_set_new(ctx, "fleet", json_pack("{s:I}", "max_gpu_memory_mib", (json_int_t)fleet_mib));
	init = policy_initial(ctx, err);
	if (!init) {
		json_decref(ctx);
		return NULL;
	}
	profile = memplan_profile(ctx, NULL);
	target_est = profile ? memplan_estimate(profile, !strcmp(p->kind, "video"), p->config) : NULL;
	/* a size asked for (?gpu_mib=) that the fleet lacks: no "gpus" of its own, 0 of them */
	out = json_pack("{s:I, s:I, s:I, s:b, s:O, s:O, s:O, s:o, s:O, s:O}", "gpu_mib", (json_int_t)gpu, "gpus",
			(json_int_t)jpath_int(size, "gpus", 0), "draining_gpus", (json_int_t)jpath_int(size, "draining_gpus", 0),
			"in_fleet", json_is_integer(json_object_get(size, "gpus")), "action", json_object_get(init, "action"), "reason",
			json_object_get(init, "reason"), "estimate", json_object_get(init, "estimate"), "target_estimate",
			target_est ? target_est : json_null(), "rungs", json_object_get(init, "rungs"), "changes",
			json_object_get(init, "changes"));
	if (out && json_object_get(init, "skipped"))
		json_object_set(out, "skipped", json_object_get(init, "skipped"));
	if (out && jpath_get(init, "constraints.min_gpu_memory_mib"))
		json_object_set(out, "min_gpu_memory_mib", jpath_get(init, "constraints.min_gpu_memory_mib"));
	json_decref(profile);
	json_decref(init);
	json_decref(ctx);
	if (!out)
		*err = xstrdup("cannot build the plan of a size");
	return out;
}

/* The plan of a size the fleet lacks (?gpu_mib=): no "gpus" of its own. */
static json_t *plan_extra(const struct plan_in *p, long extra_mib, const json_t *obs, long long fleet_mib, char **err)
{
	json_t *extra = json_pack("{s:I}", "gpu_mib", (json_int_t)extra_mib), *one;

	one = plan_size(p, extra, obs, fleet_mib, err);
	json_decref(extra);
	return one;
}

json_t *api_plan_build(const json_t *config, const json_t *recovery, const char *kind, const char *arch,
		       const json_t *fleet, long extra_mib, char **err)
{
	const struct plan_in in = { config, recovery, kind, arch };
	const json_t *obs = json_object_get(fleet, "observations"), *s;
	long long fleet_mib = jpath_int(fleet, "fleet_max_gpu_mib", 0);
	json_t *sizes = json_array(), *out = NULL, *one;
	bool asked = extra_mib <= 0;
	size_t i;

	*err = NULL;
	json_array_foreach(json_object_get(fleet, "sizes"), i, s) {
		if (!asked && extra_mib > jpath_int(s, "gpu_mib", 0)) { /* the asked size, in its place */
			asked = true;
			if (!(one = plan_extra(&in, extra_mib, obs, fleet_mib, err)))
				goto out;
			json_array_append_new(sizes, one);
		}
		asked |= extra_mib == jpath_int(s, "gpu_mib", 0);
		if (!(one = plan_size(&in, s, obs, fleet_mib, err)))
			goto out;
		json_array_append_new(sizes, one);
	}
	if (!asked) {
		if (!(one = plan_extra(&in, extra_mib, obs, fleet_mib, err)))
			goto out;
		json_array_append_new(sizes, one);
	}
	out = json_pack("{s:s, s:s, s:o, s:I, s:I, s:O}", "kind", kind, "arch", arch, "features",
			memmodel_features(config, kind), "observations", (json_int_t)json_array_size(obs),
			"fleet_max_gpu_mib", (json_int_t)fleet_mib, "sizes", sizes);
	if (!out)
		*err = xstrdup("the plan could not be encoded");
out:
	json_decref(sizes);
	return out;
}

static void on_fleet(PGresult *res, const char *err, void *arg)
{
	struct plan_req *p = arg;
	struct hreq *h = p->h;
	json_t *doc = hreq_db_doc(h, res, err, "fleet"), *out = NULL;
	char *perr = NULL;

	if (!doc)
		goto out;
	out = api_plan_build(p->config, p->recovery, p->kind, p->arch, doc, p->extra_mib, &perr);
	if (!out) {
		log_error("plan failed", "arch=%s error=\"%s\"", p->arch, perr);
		hreq_error(h, 500, "internal", NULL, "the plan could not be made: %s", perr);
		goto out;
	}
	hreq_reply(h, 200, out);
out:
	free(perr);
	json_decref(doc);
	plan_req_free(p);
}

void api_plan(struct hreq *h)
{
	struct plan_req *p;
	json_t *body = NULL;
	char *gpu;

	/* a plan parses up to a megabyte and runs the policy per GPU size on the loop: it counts
	 * against the caller's submit rate, as a submit does */
	if (!auth_submit_allowed(h))
		return;
	p = xcalloc(1, sizeof *p);
	gpu = hreq_query(h, "gpu_mib");
	p->h = h;
	if (gpu && (p->extra_mib = api_profiles_parse_mib(gpu)) < 0) {
		hreq_error(h, 400, "invalid_request", "gpu_mib", "gpu_mib must be an integer from 1 to %d",
			   API_PROFILES_GPU_MIB_MAX);
		goto fail;
	}
	if (api_jobs_read_submit(h, "gpu_mib", &body, &p->recovery) < 0)
		goto fail;
	p->config = json_incref(json_object_get(body, "config"));
	p->kind = atconfig_kind(p->config);
	memmodel_arch(p->config, p->arch, sizeof p->arch);
	{
		/* the GPUs of the pool the job would be submitted to (api_jobs_check_submit checked it) */
		const char *params[2] = { p->arch, json_string_value(json_object_get(body, "pool")) ?: POOL_DEFAULT };
		db_exec(h->app->db, sql_plan_fleet, 2, params, on_fleet, p);
	}
	p = NULL;
fail:
	plan_req_free(p);
	json_decref(body);
	free(gpu);
}
