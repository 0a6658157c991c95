/* rungd: the rung server. Parses flags and environment, migrates the schema, then runs one
 * libevent loop with evhttp, the database pool, parked long-polls and the reaper. SIGTERM/SIGINT
 * stop accepting, answer parked long-polls 204, wait for in-flight requests and exit 0. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/http.h>

#include "app.h"
#include "db.h"
#include "http.h"
#include "lease.h"
#include "log.h"
#include "migrate.h"
#include "reaper.h"
#include "util.h"

#define MIGRATE_WAIT_MS 60000
#define STOP_GRACE_MS 10000
#define STOP_FLUSH_MS 500

struct opts {
	const char *listen;
	const char *database_url;
	bool no_migrate;
	bool migrate_only;
	int lease_seconds, heartbeat_ms, reap_interval_ms, poll_fallback_ms, db_pool;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rungd [migrate] [options]\n"
		"  migrate                 apply the schema migrations and exit\n"
		"  --listen HOST:PORT      address to serve HTTP on (RUNG_LISTEN, default 127.0.0.1:8080)\n"
		"  --database-url URL      PostgreSQL URL (RUNG_DATABASE_URL,\n"
		"                          default postgresql://postgres@127.0.0.1:5432/rung)\n"
		"  --no-migrate            do not apply migrations at start-up\n"
		"  --lease-seconds N       attempt lease length (30)\n"
		"  --heartbeat-ms N        heartbeat interval told to workers (5000)\n"
		"  --reap-interval-ms N    how often expired leases are reaped (1000)\n"
		"  --poll-fallback-ms N    how often parked long-polls retry without a wake-up (2000)\n"
		"  --db-pool N             database connections (4)\n"
		"  --help                  this text\n");
}

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

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "database-url", required_argument, NULL, 'd' },
		{ "no-migrate", no_argument, NULL, 'n' },
		{ "lease-seconds", required_argument, NULL, 'L' },
		{ "heartbeat-ms", required_argument, NULL, 'H' },
		{ "reap-interval-ms", required_argument, NULL, 'R' },
		{ "poll-fallback-ms", required_argument, NULL, 'P' },
		{ "db-pool", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	o->listen = getenv("RUNG_LISTEN") ? getenv("RUNG_LISTEN") : "127.0.0.1:8080";
	o->database_url = getenv("RUNG_DATABASE_URL") ? getenv("RUNG_DATABASE_URL")
						      : "postgresql://postgres@127.0.0.1:5432/rung";
	o->lease_seconds = 30;
	o->heartbeat_ms = 5000;
	o->reap_interval_ms = 1000;
	o->poll_fallback_ms = 2000;
	o->db_pool = 4;
	if (argc > 1 && strcmp(argv[1], "migrate") == 0) {
		o->migrate_only = true;
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'l': o->listen = optarg; break;
		case 'd': o->database_url = optarg; break;
		case 'n': o->no_migrate = true; break;
		case 'L': if (parse_int("--lease-seconds", optarg, 1, 86400, &o->lease_seconds)) return -1; break;
		case 'H': if (parse_int("--heartbeat-ms", optarg, 10, 3600000, &o->heartbeat_ms)) return -1; break;
		case 'R': if (parse_int("--reap-interval-ms", optarg, 10, 3600000, &o->reap_interval_ms)) return -1; break;
		case 'P': if (parse_int("--poll-fallback-ms", optarg, 10, 3600000, &o->poll_fallback_ms)) return -1; break;
		case 'p': if (parse_int("--db-pool", optarg, 1, 256, &o->db_pool)) return -1; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "rungd: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return -1;
	}
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
	lease_shutdown(app->lease);
	event_add(app->stop_check, &grace);
	app_request_done(app);
}

static void on_notify(const char *channel, const char *payload, void *arg)
{
	struct app *app = arg;

	log_debug("notify", "channel=%s job=%s", channel, payload ? payload : "-");
	lease_wake(app->lease);
}

static void on_listen_reconnect(void *arg)
{
	struct app *app = arg;

	lease_wake(app->lease);
}

int main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct app app = { 0 };
	struct event *sigterm = NULL, *sigint = NULL;
	char *host = NULL;
	int port = 0, rc = 1;

	log_init("rungd", LOG_INFO);
	if (parse_opts(argc, argv, &o) < 0)
		return 2;
	if (o.migrate_only)
		return migrate_run(o.database_url, MIGRATE_WAIT_MS) == 0 ? 0 : 1;
	if (split_listen(o.listen, &host, &port) < 0) {
		fprintf(stderr, "rungd: --listen wants HOST:PORT (got \"%s\")\n", o.listen);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (!o.no_migrate && migrate_run(o.database_url, MIGRATE_WAIT_MS) != 0) {
		log_error("migration failed", "url=%s", o.database_url);
		goto out;
	}
	app.lease_seconds = o.lease_seconds;
	app.heartbeat_ms = o.heartbeat_ms;
	app.reap_interval_ms = o.reap_interval_ms;
	app.poll_fallback_ms = o.poll_fallback_ms;
	app.base = event_base_new();
	app.http = evhttp_new(app.base);
	if (!app.base || !app.http)
		goto out;
	app.listener = evhttp_bind_socket_with_handle(app.http, host, (ev_uint16_t)port);
	if (!app.listener) {
		log_error("cannot listen", "listen=%s", o.listen);
		goto out;
	}
	http_setup(&app);
	app.db = db_new(app.base, o.database_url, o.db_pool);
	if (!app.db)
		goto out;
	app.lease = lease_new(&app);
	app.reaper = reaper_new(&app);
	db_listen(app.db, "rung_jobs", on_notify, &app);
	db_on_listen_reconnect(app.db, on_listen_reconnect, &app);
	app.stop_check = event_new(app.base, -1, 0, on_stop_check, &app);
	app.request_done = app_request_done;
	sigterm = evsignal_new(app.base, SIGTERM, on_signal, &app);
	sigint = evsignal_new(app.base, SIGINT, on_signal, &app);
	event_add(sigterm, NULL);
	event_add(sigint, NULL);
	log_info("listening", "listen=%s lease_seconds=%d heartbeat_ms=%d reap_interval_ms=%d poll_fallback_ms=%d db_pool=%d",
		 o.listen, o.lease_seconds, o.heartbeat_ms, o.reap_interval_ms, o.poll_fallback_ms, o.db_pool);
	event_base_dispatch(app.base);
	rc = 0;
	log_info("stopped", "inflight=%d", app.inflight);
out:
	reaper_free(app.reaper);
	db_free(app.db);
	lease_free(app.lease);
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
	free(host);
	return rc;
}
