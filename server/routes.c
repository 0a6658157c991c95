/* The route table of rungd and the hooks that give http.c what auth.c and metrics.c need to see of
 * each request (see routes.h). Owns no state: the table is static, the hooks forward. */
#include "routes.h"

#include <stdbool.h>
#include <stddef.h>

#include "api_attempts.h"
#include "api_fleet.h"
#include "api_health.h"
#include "api_jobs.h"
#include "api_logs.h"
#include "api_profiles.h"
#include "api_plan.h"
#include "api_tokens.h"
#include "api_usage.h"
#include "api_workers.h"
#include "app.h"
#include "auth.h"
#include "http.h"
#include "metrics.h"
#include "util.h"
#include "web.h"
#include "web_act.h"
#include "web_plan.h"
#include "web_tokens.h"
#include "web_usage.h"

static const struct http_route routes[] = {
	{ "POST", "/v1/jobs", api_jobs_submit, AUTH_SUBMITTER | AUTH_ADMIN, AUTH_SCOPE_NONE },
	{ "GET", "/v1/jobs", api_jobs_list, AUTH_READERS, AUTH_SCOPE_NONE },
	{ "POST", "/v1/jobs/cancel", api_jobs_cancel_matching, AUTH_SUBMITTER | AUTH_ADMIN, AUTH_SCOPE_NONE },
	{ "POST", "/v1/jobs/batch", api_jobs_submit_batch, AUTH_SUBMITTER | AUTH_ADMIN, AUTH_SCOPE_NONE },
	{ "GET", "/v1/jobs/{}", api_jobs_get, AUTH_READERS, AUTH_SCOPE_JOB },
	{ "GET", "/v1/jobs/{}/attempts", api_jobs_attempts, AUTH_READERS, AUTH_SCOPE_JOB },
	{ "GET", "/v1/jobs/{}/events", api_jobs_events, AUTH_READERS, AUTH_SCOPE_JOB },
	{ "GET", "/v1/jobs/{}/log", api_logs_get, AUTH_READERS, AUTH_SCOPE_JOB },
	{ "POST", "/v1/jobs/{}/cancel", api_jobs_cancel, AUTH_SUBMITTER | AUTH_ADMIN, AUTH_SCOPE_JOB },
	{ "POST", "/v1/jobs/{}/retry", api_jobs_retry, AUTH_SUBMITTER | AUTH_STAFF, AUTH_SCOPE_JOB },
	{ "POST", "/v1/jobs/{}/priority", api_jobs_priority, AUTH_SUBMITTER | AUTH_STAFF, AUTH_SCOPE_JOB },
	{ "POST", "/v1/jobs/{}/requeue", api_jobs_requeue, AUTH_SUBMITTER | AUTH_STAFF, AUTH_SCOPE_JOB },
	{ "POST", "/v1/jobs/{}/pool", api_jobs_pool, AUTH_SUBMITTER | AUTH_STAFF, AUTH_SCOPE_JOB },
	{ "POST", "/v1/jobs/{}/start", api_jobs_start, AUTH_SUBMITTER | AUTH_STAFF, AUTH_SCOPE_JOB },
	{ "POST", "/v1/jobs/{}/after", api_jobs_after, AUTH_SUBMITTER | AUTH_STAFF, AUTH_SCOPE_JOB },
	{ "GET", "/v1/jobs/{}/memory", api_profiles_job, AUTH_READERS, AUTH_SCOPE_JOB },
	{ "POST", "/v1/plan", api_plan, AUTH_SUBMITTER | AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "GET", "/v1/profiles", api_profiles_list, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "POST", "/v1/profiles/{}/{}/reset", api_profiles_reset, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "POST", "/v1/workers", api_workers_register, AUTH_WORKERS, AUTH_SCOPE_NONE },
	{ "GET", "/v1/workers", api_fleet_workers, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "GET", "/v1/owners", api_fleet_owners, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "GET", "/v1/pools", api_fleet_pools, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "GET", "/v1/usage", api_usage_get, AUTH_READERS, AUTH_SCOPE_NONE },
	{ "POST", "/v1/workers/{}/drain", api_fleet_worker_drain, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "POST", "/v1/workers/{}/resume", api_fleet_worker_resume, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "POST", "/v1/workers/{}/lease", api_workers_lease, AUTH_WORKERS, AUTH_SCOPE_WORKER },
	{ "POST", "/v1/attempts/{}/heartbeat", api_attempts_heartbeat, AUTH_WORKERS, AUTH_SCOPE_ATTEMPT },
	{ "POST", "/v1/attempts/{}/finish", api_attempts_finish, AUTH_WORKERS, AUTH_SCOPE_ATTEMPT },
	{ "POST", "/v1/attempts/{}/log", api_logs_put, AUTH_WORKERS, AUTH_SCOPE_ATTEMPT },
	{ "GET", "/v1/escalations", api_fleet_escalations, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "GET", "/v1/escalations/{}", api_fleet_escalation_get, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "POST", "/v1/escalations/{}/ack", api_fleet_escalation_ack, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "POST", "/v1/escalations/{}/resolve", api_fleet_escalation_resolve, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "GET", "/v1/gpus", api_fleet_gpus, AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "POST", "/v1/gpus/{}/release", api_fleet_gpu_release, AUTH_STAFF, AUTH_SCOPE_NONE },
	/* workers only for GPUs of their own workers: checked in rung_gpu_health against the token */
	{ "POST", "/v1/gpus/{}/health", api_health_report, AUTH_WORKER | AUTH_STAFF, AUTH_SCOPE_NONE },
	{ "POST", "/v1/tokens", api_tokens_create, AUTH_ADMIN, AUTH_SCOPE_NONE },
	{ "GET", "/v1/tokens", api_tokens_list, AUTH_ADMIN, AUTH_SCOPE_NONE },
	{ "POST", "/v1/tokens/{}/revoke", api_tokens_revoke, AUTH_ADMIN, AUTH_SCOPE_NONE },
	{ "POST", "/v1/tokens/{}/limits", api_tokens_limits, AUTH_ADMIN, AUTH_SCOPE_NONE },
	{ "POST", "/v1/tokens/{}/pools", api_tokens_pools, AUTH_ADMIN, AUTH_SCOPE_NONE },
	{ "POST", "/v1/tokens/{}/expiry", api_tokens_expiry, AUTH_ADMIN, AUTH_SCOPE_NONE },
	{ "GET", "/healthz", api_fleet_healthz, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "GET", "/metrics", metrics_handle, AUTH_STAFF, AUTH_SCOPE_NONE },
	/* web pages: open here, web.c checks the rung_token cookie with auth_dispatch itself */
	{ "GET", "/ui", web_queue, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "GET", "/ui/jobs", web_queue, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "GET", "/ui/jobs/{}", web_job, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "GET", "/ui/jobs/{}/log", web_job_log, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "GET", "/ui/escalations", web_escalations, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "GET", "/ui/escalations/{}", web_escalation, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "GET", "/ui/gpus", web_gpus, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "GET", "/ui/usage", web_usage_page, AUTH_OPEN, AUTH_SCOPE_NONE },
	/* POST /v1/plan as a page (web_plan.c): changes nothing, checked for its site as the forms are */
	{ "GET", "/ui/plan", web_plan_form, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/plan", web_plan_post, AUTH_OPEN, AUTH_SCOPE_NONE },
	/* the forms that change something (web_act.c): same statements and roles as the API routes */
	{ "POST", "/ui/jobs/cancel", web_act_jobs_cancel, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/jobs/{}/retry", web_act_job_retry, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/jobs/{}/requeue", web_act_job_requeue, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/jobs/{}/cancel", web_act_job_cancel, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/jobs/{}/start", web_act_job_start, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/jobs/{}/pool", web_act_job_pool, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/escalations/{}/ack", web_act_escalation_ack, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/escalations/{}/resolve", web_act_escalation_resolve, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/gpus/{}/release", web_act_gpu_release, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/workers/{}/drain", web_act_worker_drain, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/workers/{}/resume", web_act_worker_resume, AUTH_OPEN, AUTH_SCOPE_NONE },
	/* the tokens page (web_tokens.c): admins, the token API's statements, same-site checked */
	{ "GET", "/ui/tokens", web_tokens_page, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/tokens", web_tokens_create, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/tokens/{}/revoke", web_tokens_revoke, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/tokens/{}/limits", web_tokens_limits, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/tokens/{}/expiry", web_tokens_expiry, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "GET", "/ui/login", web_login_form, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/login", web_login, AUTH_OPEN, AUTH_SCOPE_NONE },
	{ "POST", "/ui/logout", web_logout, AUTH_OPEN, AUTH_SCOPE_NONE },
};

/* The guard: auth checks the token, the role (0: any valid token) and ownership, then runs the
 * handler. */
static void routes_guard(struct hreq *h, const struct http_route *r)
{
	auth_dispatch(h, r->access ? r->access : AUTH_ANY, (enum auth_scope)r->scope, r->handler);
}

static void routes_observe(struct hreq *h, const char *route, int status, double seconds)
{
	metrics_http_observe(h->app->metrics, h->method, route, status, seconds);
}

static const struct http_hooks hooks = {
	.guard = routes_guard,
	.body_check = auth_body_check,
	.observe = routes_observe,
	.release = auth_hreq_release,
};

void routes_setup(struct app *app)
{
	http_setup(app, routes, ARRAY_LEN(routes), &hooks);
}

int routes_access(const char *method, const char *path, unsigned *roles, enum auth_scope *scope)
{
	const struct http_route *r = http_route_find(routes, ARRAY_LEN(routes), method, path);

	if (!r)
		return -1;
	*roles = r->access;
	*scope = (enum auth_scope)r->scope;
	return 0;
}
