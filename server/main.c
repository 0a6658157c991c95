/* rungd: the rung server. Parses flags and environment, migrates the schema, then runs one
 * libevent loop with evhttp, the database pool, parked long-polls, the reaper and the scheduler.
 * SIGTERM/SIGINT stop accepting, answer parked long-polls 204, wait for in-flight requests and exit 0. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/http.h>

#include "api_tokens.h"
#include "app.h"
#include "auth.h"
#include "config.h"
#include "db.h"
#include "http.h"
#include "lease.h"
#include "memcache.h"
#include "log.h"
#include "metrics.h"
#include "migrate.h"
#include "preempt.h"
#include "reaper.h"
#include "retention.h"
#include "quota.h"
#include "scheduler.h"
#include "routes.h"
#include "util.h"
#include "version.h"
#include "webhook.h"

#define MIGRATE_WAIT_MS 60000
#define STOP_GRACE_MS 10000
#define STOP_FLUSH_MS 500

static int parse_int(const char *flag, const char *s, int min, int max, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (!*s || *end || v < min || v > max) {
		fprintf(stderr, "rungd: %s must be an integer from %d to %d (got \"%s\")\n", flag, min, max, s);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* Splits HOST:PORT (or [V6]:PORT) into a heap host and a port. */
static int split_listen(const char *s, char **host, int *port)
{
	const char *colon = strrchr(s, ':');
	const char *h = s;
	size_t hl;

	if (!colon || parse_int("--listen port", colon + 1, 0, 65535, port))
		return -1;
	hl = (size_t)(colon - s);
	if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	*host = xmalloc(hl + 1);
	memcpy(*host, h, hl);
	(*host)[hl] = '\0';
	return 0;
}

static void app_request_done(struct app *app)
{
	struct timeval flush = { 0, STOP_FLUSH_MS * 1000 };

	if (!app->stopping || app->inflight != 0 || !app->stop_check)
		return;
	if (app->unflushed <= 0) {
		event_active(app->stop_check, EV_TIMEOUT, 0);
		return;
	}
	/* every reply is given; wait a little for the last ones to reach their sockets */
	if (!app->flush_wait) {
		app->flush_wait = true;
		event_add(app->stop_check, &flush);
	}
}

static void on_stop_check(evutil_socket_t fd, short what, void *arg)
{
	struct app *app = arg;

	(void)fd;
	if (what & EV_TIMEOUT && app->stopping) {
		if (app->inflight)
			log_warn("stop grace over", "inflight=%d", app->inflight);
		event_base_loopexit(app->base, NULL);
	}
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct app *app = arg;
	struct timeval grace = { STOP_GRACE_MS / 1000, 0 };

	(void)what;
	if (app->stopping)
		return;
	log_info("stopping", "signal=%d inflight=%d parked=%d", (int)sig, app->inflight, lease_waiting(app->lease));
	app->stopping = true;
	if (app->listener) {
		evhttp_del_accept_socket(app->http, app->listener);
		app->listener = NULL;
	}
	reaper_stop(app->reaper);
	preempt_stop(app->preempt);
	retention_stop(app->retention);
	scheduler_stop(app->scheduler);
	quota_stop(app->quota);
	lease_shutdown(app->lease);
	event_add(app->stop_check, &grace);
	app_request_done(app);
}

static void on_notify(const char *channel, const char *payload, void *arg)
{
	struct app *app = arg;

	log_debug("notify", "channel=%s payload=%s", channel, payload ? payload : "-");
	lease_notified(app->lease, payload);
}

static void on_listen_reconnect(void *arg)
{
	struct app *app = arg;

	lease_wake(app->lease);
}

/* The event loop. Its epoll changes are batched per loop iteration (libevent's changelist):
 * evhttp disables and re-enables each connection's events several times per request, one
 * epoll_ctl each otherwise (~12 % of rungd's CPU under load). libevent's one caveat, descriptors
 * duplicated with dup(), does not apply: rungd never dup()s a descriptor it polls. */
static struct event_base *new_base(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *base;

	if (!cfg)
		return NULL;
	event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return base;
}

int main(int argc, char **argv)
{
	struct config o = { 0 };
	char *err = NULL;
	struct app app = { 0 };
	struct event *sigterm = NULL, *sigint = NULL;
	char *host = NULL;
	int port = 0, rc = 1;

	log_init("rungd", LOG_INFO);
	if (argc > 1 && strcmp(argv[1], "token") == 0)
		return api_tokens_cmd(argc - 1, argv + 1); /* bootstrap: blocking, before any admin exists */
	switch (config_load(&o, argc, argv, &err)) {
	case CONFIG_OK: break;
	case CONFIG_HELP: rc = 0; goto out;
	case CONFIG_VERSION: rc = 0; goto out;
	default:
		fprintf(stderr, "rungd: %s\n", err);
		rc = 2;
		goto out;
	}
	if (o.migrate_only) {
		rc = migrate_run(o.database_url, MIGRATE_WAIT_MS, o.force_functions) == 0 ? 0 : 1;
		goto out;
	}
	if (split_listen(o.listen, &host, &port) < 0) {
		fprintf(stderr, "rungd: --listen wants HOST:PORT (got \"%s\")\n", o.listen);
		rc = 2;
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);
	if (o.force_functions && !o.migrate_only)
		log_warn("force-functions is set", "hint=\"this rungd installs its function files over a newer release's at "
			 "every start; meant for one `rungd migrate` of a deliberate rollback\"");
	if (!o.no_migrate && migrate_run(o.database_url, MIGRATE_WAIT_MS, o.force_functions) != 0) {
		log_error("migration failed", "url=%s", o.database_url);
		goto out;
	}
	app.lease_seconds = o.lease_seconds;
	app.heartbeat_ms = o.heartbeat_ms;
	app.reap_interval_ms = o.reap_interval_ms;
	app.preempt_after_s = o.preempt_after_s;
	app.has_preempt_priority = o.has_preempt_priority;
	app.preempt_priority = o.preempt_priority;
	app.resume_hold_s = o.resume_hold_s;
	app.poll_fallback_ms = o.poll_fallback_ms;
	app.fair_share = o.fair_share;
	app.metrics_history_ms = o.metrics_history_ms;
	app.retain_days = o.retain_days;
	app.prune_interval_ms = o.prune_interval_ms;
	app.quarantine_min_s = o.quarantine_min_s;
	app.base = new_base();
	app.http = evhttp_new(app.base);
	if (!app.base || !app.http)
		goto out;
	app.listener = evhttp_bind_socket_with_handle(app.http, host, (ev_uint16_t)port);
	if (!app.listener) {
		log_error("cannot listen", "listen=%s", o.listen);
		goto out;
	}
	routes_setup(&app);
	/* --job-webhook: the sessions ask the jobs_ended_webhook trigger for an outbox row per ending
	 * (sql/functions/80_escalations.sql); without it an ending writes none */
	app.db = db_new_with(app.base, o.database_url, o.db_pool, o.job_webhook ? "-c rung.job_webhook=on" : NULL);
	if (!app.db)
		goto out;
	app.metrics = metrics_new(); /* first: lease and auth register their families in it */
	app.memcache = memcache_new_db(app.db, app.metrics); /* before lease: its first-attempt check */
	app.lease = lease_new(&app);
	app.auth = auth_new(&app, o.submit_rate);
	if (o.escalation_webhook || o.job_webhook) {
		struct webhook_opts wo = { o.escalation_webhook, o.job_webhook, o.webhook_poll_ms, o.webhook_backoff_ms,
					   o.webhook_backoff_max_ms, o.webhook_timeout_ms };
		app.webhook = webhook_new(app.base, app.db, &wo);
	}
	app.reaper = reaper_new(&app);
	app.preempt = preempt_new(&app);
	app.retention = retention_new(&app);
	app.scheduler = scheduler_new(&app);
	app.quota = quota_new(&app, o.quota_interval_ms);
	db_listen(app.db, "rung_jobs", on_notify, &app);
	db_on_listen_reconnect(app.db, on_listen_reconnect, &app);
	app.stop_check = event_new(app.base, -1, 0, on_stop_check, &app);
	app.request_done = app_request_done;
	sigterm = evsignal_new(app.base, SIGTERM, on_signal, &app);
	sigint = evsignal_new(app.base, SIGINT, on_signal, &app);
	event_add(sigterm, NULL);
	event_add(sigint, NULL);
	{
		char urgent[24] = "unset";
		if (o.has_preempt_priority)
			snprintf(urgent, sizeof urgent, "%d", o.preempt_priority);
		log_info("listening", "version=%s listen=%s lease_seconds=%d heartbeat_ms=%d reap_interval_ms=%d "
			 "poll_fallback_ms=%d db_pool=%d retain_days=%d fair_share=%d preempt_after_s=%d preempt_priority=%s "
			 "resume_hold_s=%d quota_interval_ms=%d", rung_version(), o.listen, o.lease_seconds, o.heartbeat_ms,
			 o.reap_interval_ms, o.poll_fallback_ms, o.db_pool, o.retain_days, o.fair_share, o.preempt_after_s,
			 urgent, o.resume_hold_s, o.quota_interval_ms);
	}
	event_base_dispatch(app.base);
	rc = 0;
	log_info("stopped", "inflight=%d", app.inflight);
out:
	reaper_free(app.reaper);
	preempt_free(app.preempt);
	retention_free(app.retention);
	scheduler_free(app.scheduler);
	quota_free(app.quota);
	webhook_free(app.webhook);
	db_free(app.db);
	lease_free(app.lease);
	memcache_free(app.memcache); /* after db_free: its fills in flight were answered */
	if (app.http)
		evhttp_free(app.http);
	if (sigterm)
		event_free(sigterm);
	if (sigint)
		event_free(sigint);
	if (app.stop_check)
		event_free(app.stop_check);
	if (app.base)
		event_base_free(app.base);
	auth_free(app.auth); /* after evhttp_free and db_free: their replies release parked slots */
	metrics_free(app.metrics);
	free(host);
	free(err);
	config_release(&o);
	return rc;
}
