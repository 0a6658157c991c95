/* The rungd database pool: `size` libpq connections plus an optional LISTEN connection, all driven
 * non-blockingly by libevent events on PQsocket. Owns each connection's state machine, reconnecting
 * with backoff, the per-connection prepared statements (keyed by the sql_* pointer) and the FIFO of
 * statements waiting for a connection. Knows nothing about jobs or what the SQL says. */
#include "db.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "util.h"

#define DB_BACKOFF_MIN_MS     100
#define DB_BACKOFF_MAX_MS     2000
#define DB_CONNECT_TIMEOUT_MS 5000
#define DB_QUEUE_TIMEOUT_MS   2000
#define DB_PING_INTERVAL_MS   5000
#define DB_PING_TIMEOUT_MS    3000
#define DB_MAX_SIZE           64

enum db_conn_state {
	DB_CONN_OFF,        /* not started (LISTEN connection before db_listen) or closed */
	DB_CONN_CONNECTING, /* PQconnectPoll in progress, bounded by the connect timeout */
	DB_CONN_IDLE,       /* connected, nothing in flight; reads only to notice a close or NOTIFY */
	DB_CONN_BUSY,       /* one step (prepare, execute, LISTEN, health check) in flight */
	DB_CONN_BACKOFF,    /* broken and closed; the timer reconnects */
};

enum db_step {
	DB_STEP_PREPARE, /* PQsendPrepare for c->req */
	DB_STEP_EXECUTE, /* PQsendQueryPrepared for c->req */
	DB_STEP_LISTEN,  /* LISTEN on the LISTEN connection */
	DB_STEP_PING,    /* SELECT 1 health check on the LISTEN connection */
};

enum db_health { DB_HEALTH_UNKNOWN, DB_HEALTH_UP, DB_HEALTH_DOWN };

struct db_req {
	struct db_req *next;
	const char *sql;    /* borrowed embedded statement; its address names the prepared statement */
	int nparams;
	char **params;      /* owned copies; NULL entries are SQL NULL */
	db_cb cb;
	void *arg;
	int64_t deadline_ms; /* monotonic: fail with "database unavailable" when still queued then */
};

struct db_conn {
	struct db *db;
	bool listen;             /* the dedicated LISTEN connection */
	enum db_conn_state state;
	enum db_step step;       /* meaningful while BUSY */
	PGconn *pg;
	struct event *ev;        /* I/O on PQsocket; NULL when not watching */
	int ev_fd;
	short ev_what;
	struct event *timer;     /* connect timeout, backoff, health-check interval and timeout */
	int backoff_ms;
	bool flushing;           /* PQflush returned 1: wait for writability too */
	struct db_req *req;      /* the statement in flight (pool connections) */
	PGresult *res;           /* the last result of the current step, until PQgetResult gives NULL */
	const char **prepared;   /* sql pointers prepared on this session */
	size_t nprepared, capprepared;
	enum db_health health;   /* LISTEN connection: last logged transition */
};

struct db {
	struct event_base *base;
	char *conninfo;
	char *options;           /* the sessions' settings (session_options) */
	int size;
	struct db_conn *conns;
	struct db_conn lconn;    /* LISTEN connection, DB_CONN_OFF until db_listen */
	char *channel;
	db_notify_cb notify_cb;
	void *notify_arg;
	void (*reconnect_cb)(void *arg);
	void *reconnect_arg;
	struct db_req *qhead, *qtail;
	int queued;
	int queue_timeout_ms;
	struct event *kick;      /* dispatches the queue on the next loop pass */
	struct event *qtimer;    /* fails queued statements past their deadline */
	enum db_health health;   /* pool: last logged transition */
	char last_err[200];
	bool closing;
};

static void conn_broken(struct db_conn *c, const char *why);
static void conn_connect(struct db_conn *c);
static void conn_send(struct db_conn *c);
static void db_queue_timer_arm(struct db *db);

/* First line of a libpq message, with double quotes softened, for key="value" logs. */
static void db_oneline(char *dst, size_t n, const char *src)
{
	size_t i = 0;

	for (; src && *src && *src != '\n' && i + 1 < n; src++)
		dst[i++] = *src == '"' ? '\'' : *src;
	dst[i] = '\0';
}

static const char *conn_name(const struct db_conn *c)
{
	return c->listen ? "listen" : "pool";
}

static void db_health_update(struct db *db)
{
	int i, connecting = 0;
	bool up = db_up(db);

	if (db->closing)
		return;
	if (up) {
		if (db->health != DB_HEALTH_UP)
			log_info("database up", "pool_size=%d", db->size);
		db->health = DB_HEALTH_UP;
		return;
	}
	for (i = 0; i < db->size; i++)
		connecting += db->conns[i].state == DB_CONN_CONNECTING;
	/* Down once every connection has failed at least once: one line, not one per retry. */
	if (db->health != DB_HEALTH_DOWN && !connecting) {
		log_warn("database down", "reason=\"%s\" retry_max_ms=%d", db->last_err, DB_BACKOFF_MAX_MS);
		db->health = DB_HEALTH_DOWN;
	}
}

/* The one place a connection changes state. */
static void conn_set_state(struct db_conn *c, enum db_conn_state s)
{
	switch (s) {
	case DB_CONN_OFF:
	case DB_CONN_CONNECTING:
	case DB_CONN_IDLE:
	case DB_CONN_BUSY:
	case DB_CONN_BACKOFF:
		break;
	default:
		abort();
	}
	if (c->state == s)
		return;
	log_debug("db connection state", "conn=%s from=%d to=%d", conn_name(c), (int)c->state, (int)s);
	c->state = s;
	if (!c->listen)
		db_health_update(c->db);
}

static void conn_on_event(evutil_socket_t fd, short what, void *arg);

/* Watches PQsocket for `what` (EV_READ and/or EV_WRITE); 0 stops watching. The event is
 * recreated whenever the socket or the interest changes (libpq may switch sockets while
 * connecting). */
static void conn_watch(struct db_conn *c, short what)
{
	int fd = c->pg ? PQsocket(c->pg) : -1;

	if (c->ev && c->ev_fd == fd && c->ev_what == what)
		return;
	if (c->ev) {
		event_free(c->ev);
		c->ev = NULL;
	}
	if (!what || fd < 0)
		return;
	c->ev = event_new(c->db->base, fd, what | EV_PERSIST, conn_on_event, c);
	if (!c->ev || event_add(c->ev, NULL) < 0) {
		log_error("db event setup failed", "conn=%s fd=%d", conn_name(c), fd);
		abort();
	}
	c->ev_fd = fd;
	c->ev_what = what;
}

static void conn_timer(struct db_conn *c, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(c->timer, &tv);
}

static void db_kick(struct db *db)
{
	if (!db->closing)
		event_active(db->kick, EV_TIMEOUT, 0);
}

static void req_free(struct db_req *r)
{
	int i;

	if (!r)
		return;
	for (i = 0; i < r->nparams; i++)
		free(r->params[i]);
	free(r->params);
	free(r);
}

/* Calls the request's callback once and frees the request; res stays owned here. */
static void req_finish(struct db_req *r, PGresult *res, const char *err)
{
	r->cb(res, err, r->arg);
	req_free(r);
}

static void conn_prepared_clear(struct db_conn *c)
{
	free(c->prepared);
	c->prepared = NULL;
	c->nprepared = c->capprepared = 0;
}

static bool conn_is_prepared(const struct db_conn *c, const char *sql)
{
	size_t i;

	for (i = 0; i < c->nprepared; i++)
		if (c->prepared[i] == sql)
			return true;
	return false;
}

static void conn_prepared_add(struct db_conn *c, const char *sql)
{
	if (c->nprepared == c->capprepared) {
		c->capprepared = c->capprepared ? 2 * c->capprepared : 16;
		c->prepared = xrealloc(c->prepared, c->capprepared * sizeof *c->prepared);
	}
	c->prepared[c->nprepared++] = sql;
}

static void stmt_name(char *buf, size_t n, const char *sql)
{
	snprintf(buf, n, "rung_%jx", (uintmax_t)(uintptr_t)sql);
}

/* Closes the session (if any) and forgets everything tied to it. */
static void conn_close(struct db_conn *c)
{
	conn_watch(c, 0);
	evtimer_del(c->timer);
	if (c->res) {
		PQclear(c->res);
		c->res = NULL;
	}
	if (c->pg) {
		PQfinish(c->pg);
		c->pg = NULL;
	}
	c->flushing = false;
	conn_prepared_clear(c);
}

/* The connection failed or broke: close it, arm the backoff, and give the statement in flight
 * (outcome unknown) NULL. The callback runs last, with the connection already consistent. */
static void conn_broken(struct db_conn *c, const char *why)
{
	struct db *db = c->db;
	struct db_req *r = c->req;
	bool was_up = c->state == DB_CONN_IDLE || c->state == DB_CONN_BUSY;
	char msg[sizeof db->last_err];

	db_oneline(msg, sizeof msg, why && *why ? why : "connection failed");
	c->req = NULL;
	conn_close(c);
	if (!c->listen)
		snprintf(db->last_err, sizeof db->last_err, "%s", msg);
	if (c->listen && was_up && c->health != DB_HEALTH_DOWN) {
		log_warn("database listen connection lost", "channel=\"%s\" reason=\"%s\"", db->channel, msg);
		c->health = DB_HEALTH_DOWN;
	} else {
		log_debug("db connection failed", "conn=%s reason=\"%s\" retry_ms=%d", conn_name(c), msg,
			c->backoff_ms);
	}
	conn_set_state(c, DB_CONN_BACKOFF);
	conn_timer(c, c->backoff_ms);
	c->backoff_ms = c->backoff_ms * 2 > DB_BACKOFF_MAX_MS ? DB_BACKOFF_MAX_MS : c->backoff_ms * 2;
	if (r)
		req_finish(r, NULL, "connection lost");
}

static void conn_flush(struct db_conn *c)
{
	int r = PQflush(c->pg);

	if (r < 0) {
		conn_broken(c, PQerrorMessage(c->pg));
		return;
	}
	c->flushing = r == 1;
	conn_watch(c, c->flushing ? EV_READ | EV_WRITE : EV_READ);
}

static void listen_send(struct db_conn *c, enum db_step step)
{
	struct db *db = c->db;
	char *ident = NULL, *q = NULL;
	int ok;

	if (step == DB_STEP_LISTEN) {
		ident = PQescapeIdentifier(c->pg, db->channel, strlen(db->channel));
		if (!ident) {
			conn_broken(c, PQerrorMessage(c->pg));
			return;
		}
		q = xasprintf("LISTEN %s", ident);
		ok = PQsendQuery(c->pg, q);
		PQfreemem(ident);
		free(q);
	} else {
		ok = PQsendQuery(c->pg, "SELECT 1");
	}
	if (!ok) {
		conn_broken(c, PQerrorMessage(c->pg));
		return;
	}
	c->step = step;
	conn_set_state(c, DB_CONN_BUSY);
	evtimer_del(c->timer);
	conn_timer(c, DB_PING_TIMEOUT_MS);
	conn_flush(c);
}

static void conn_connected(struct db_conn *c)
{
	if (PQsetnonblocking(c->pg, 1) != 0) {
		conn_broken(c, PQerrorMessage(c->pg));
		return;
	}
	evtimer_del(c->timer);
	c->backoff_ms = DB_BACKOFF_MIN_MS;
	conn_set_state(c, DB_CONN_IDLE);
	conn_watch(c, EV_READ);
	if (c->listen)
		listen_send(c, DB_STEP_LISTEN);
	else
		db_kick(c->db);
}

/* Server messages that arrive outside a result (e.g. "terminating connection") would otherwise
 * go to stderr; the transitions they cause are logged once elsewhere. */
static void conn_on_notice(void *arg, const char *msg)
{
	struct db_conn *c = arg;
	char line[200];

	db_oneline(line, sizeof line, msg);
	log_debug("db notice", "conn=%s text=\"%s\"", conn_name(c), line);
}

/* The sessions' settings: rungd's own, then the caller's extra ones, then the conninfo's own
 * `options`; the server applies them in order, so for a setting named twice the conninfo wins, and
 * the others stay. JIT off: rungd's statements are short, and a cost estimate past
 * jit_above_cost bought ~1 s of compiling for a statement that runs in 0.1 s (GET /metrics' counts
 * at 9,000 jobs: 1.3 s with JIT, 0.12 s without; docs/PERFORMANCE.md, round 10). Heap. */
static char *session_options(const char *conninfo, const char *extra)
{
	PQconninfoOption *opts = PQconninfoParse(conninfo, NULL), *o;
	const char *theirs = NULL;
	char *s;

	for (o = opts; o && o->keyword; o++)
		if (!strcmp(o->keyword, "options") && o->val && *o->val)
			theirs = o->val;
	s = xasprintf("-c jit=off%s%s%s%s", extra ? " " : "", extra ? extra : "", theirs ? " " : "", theirs ? theirs : "");
	PQconninfoFree(opts);
	return s;
}

static void conn_connect(struct db_conn *c)
{
	/* Our defaults first: the conninfo (expanded from dbname) may override them, except options,
	 * which come after it because they already hold the conninfo's own (session_options). */
	static const char *const keys[] = { "application_name", "keepalives", "keepalives_idle",
		"keepalives_interval", "keepalives_count", "tcp_user_timeout", "dbname", "options", NULL };
	const char *vals[] = { "rungd", "1", "5", "2", "3", "10000", c->db->conninfo, c->db->options, NULL };

	c->pg = PQconnectStartParams(keys, vals, 1);
	if (!c->pg) {
		log_error("db connect: out of memory", "conn=%s", conn_name(c));
		abort();
	}
	PQsetNoticeProcessor(c->pg, conn_on_notice, c);
	conn_set_state(c, DB_CONN_CONNECTING);
	if (PQstatus(c->pg) == CONNECTION_BAD) {
		conn_broken(c, PQerrorMessage(c->pg));
		return;
	}
	/* libpq: behave as if PQconnectPoll had returned PGRES_POLLING_WRITING. */
	conn_watch(c, EV_WRITE);
	conn_timer(c, DB_CONNECT_TIMEOUT_MS);
}

static void conn_poll_connect(struct db_conn *c)
{
	switch (PQconnectPoll(c->pg)) {
	case PGRES_POLLING_READING:
		conn_watch(c, EV_READ);
		break;
	case PGRES_POLLING_WRITING:
		conn_watch(c, EV_WRITE);
		break;
	case PGRES_POLLING_OK:
		conn_connected(c);
		break;
	case PGRES_POLLING_FAILED:
	default:
		conn_broken(c, PQerrorMessage(c->pg));
		break;
	}
}

static void conn_drain_notifies(struct db_conn *c)
{
	struct db *db = c->db;
	PGnotify *n;

	while (c->pg && (n = PQnotifies(c->pg))) {
		if (c->listen && db->notify_cb)
			db->notify_cb(n->relname, n->extra, db->notify_arg);
		PQfreemem(n);
	}
}

/* SQLSTATE classes that mean the session is ending (admin/crash shutdown, connection failure):
 * the statement's outcome is unknown, so the caller gets NULL as for a broken socket. */
static bool res_is_disconnect(const PGresult *res)
{
	const char *st = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	return st && (!strncmp(st, "57P", 3) || !strncmp(st, "08", 2));
}

static void conn_deliver(struct db_conn *c, PGresult *res)
{
	struct db_req *r = c->req;
	ExecStatusType st = PQresultStatus(res);
	const char *err = NULL;

	c->req = NULL;
	conn_set_state(c, DB_CONN_IDLE);
	if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
		err = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
		if (!err)
			err = "statement failed";
	}
	db_kick(c->db);
	req_finish(r, res, err);
	PQclear(res);
}

/* PQgetResult gave NULL: the current step is complete. */
static void conn_step_done(struct db_conn *c)
{
	struct db *db = c->db;
	PGresult *res = c->res;
	ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

	c->res = NULL;
	if (!res || PQstatus(c->pg) == CONNECTION_BAD || res_is_disconnect(res)) {
		char msg[160];

		db_oneline(msg, sizeof msg, res ? PQresultErrorMessage(res) : PQerrorMessage(c->pg));
		PQclear(res);
		conn_broken(c, msg);
		return;
	}
	switch (c->step) {
	case DB_STEP_PREPARE:
		if (st != PGRES_COMMAND_OK) {
			conn_deliver(c, res);
			return;
		}
		PQclear(res);
		conn_prepared_add(c, c->req->sql);
		conn_send(c);
		return;
	case DB_STEP_EXECUTE:
		conn_deliver(c, res);
		return;
	case DB_STEP_LISTEN:
	case DB_STEP_PING:
		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
			char msg[160];

			db_oneline(msg, sizeof msg, PQresultErrorMessage(res));
			log_error("database listen failed", "channel=\"%s\" error=\"%s\"", db->channel, msg);
			PQclear(res);
			conn_broken(c, msg);
			return;
		}
		PQclear(res);
		conn_set_state(c, DB_CONN_IDLE);
		evtimer_del(c->timer);
		conn_timer(c, DB_PING_INTERVAL_MS);
		if (c->step == DB_STEP_LISTEN) {
			if (c->health != DB_HEALTH_UP)
				log_info("database listen connection up", "channel=\"%s\"", db->channel);
			c->health = DB_HEALTH_UP;
			if (db->reconnect_cb)
				db->reconnect_cb(db->reconnect_arg);
		}
		return;
	default:
		abort();
	}
}

static void conn_io_busy(struct db_conn *c, short what)
{
	PGresult *r;

	if ((what & EV_READ) && !PQconsumeInput(c->pg)) {
		conn_broken(c, PQerrorMessage(c->pg));
		return;
	}
	conn_drain_notifies(c);
	if (c->flushing) {
		conn_flush(c);
		if (c->state != DB_CONN_BUSY)
			return;
	}
	while (!PQisBusy(c->pg)) {
		r = PQgetResult(c->pg);
		if (!r) {
			conn_step_done(c);
			return;
		}
		if (c->res)
			PQclear(c->res);
		c->res = r;
	}
}

static void conn_io_idle(struct db_conn *c)
{
	if (!PQconsumeInput(c->pg) || PQstatus(c->pg) == CONNECTION_BAD) {
		conn_broken(c, PQerrorMessage(c->pg));
		return;
	}
	conn_drain_notifies(c);
}

static void conn_on_event(evutil_socket_t fd, short what, void *arg)
{
	struct db_conn *c = arg;

	(void)fd;
	switch (c->state) {
	case DB_CONN_CONNECTING:
		conn_poll_connect(c);
		break;
	case DB_CONN_IDLE:
		conn_io_idle(c);
		break;
	case DB_CONN_BUSY:
		conn_io_busy(c, what);
		break;
	case DB_CONN_OFF:
	case DB_CONN_BACKOFF:
		conn_watch(c, 0);
		break;
	default:
		abort();
	}
}

static void conn_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct db_conn *c = arg;

	(void)fd;
	(void)what;
	switch (c->state) {
	case DB_CONN_CONNECTING:
		conn_broken(c, "connect timeout");
		break;
	case DB_CONN_BACKOFF:
		conn_connect(c);
		break;
	case DB_CONN_IDLE:
		if (c->listen)
			listen_send(c, DB_STEP_PING);
		break;
	case DB_CONN_BUSY:
		if (c->listen)
			conn_broken(c, "health check timed out");
		break;
	case DB_CONN_OFF:
		break;
	default:
		abort();
	}
}

/* Sends c->req: the Prepare first when this session has not prepared that statement yet.
 * A send that fails puts the request back at the queue head (nothing reached the server). */
static void conn_send(struct db_conn *c)
{
	struct db *db = c->db;
	struct db_req *r = c->req;
	char name[40];
	int ok;

	stmt_name(name, sizeof name, r->sql);
	if (conn_is_prepared(c, r->sql)) {
		ok = PQsendQueryPrepared(c->pg, name, r->nparams, (const char *const *)r->params, NULL, NULL, 0);
		c->step = DB_STEP_EXECUTE;
	} else {
		ok = PQsendPrepare(c->pg, name, r->sql, r->nparams, NULL);
		c->step = DB_STEP_PREPARE;
	}
	if (!ok) {
		c->req = NULL;
		r->next = db->qhead;
		db->qhead = r;
		if (!db->qtail)
			db->qtail = r;
		db->queued++;
		conn_broken(c, PQerrorMessage(c->pg));
		db_queue_timer_arm(db);
		return;
	}
	conn_set_state(c, DB_CONN_BUSY);
	conn_flush(c);
}

static struct db_conn *db_idle_conn(struct db *db)
{
	int i;

	for (i = 0; i < db->size; i++)
		if (db->conns[i].state == DB_CONN_IDLE)
			return &db->conns[i];
	return NULL;
}

static void db_queue_timer_arm(struct db *db)
{
	int64_t ms;
	struct timeval tv;

	if (!db->qhead) {
		evtimer_del(db->qtimer);
		return;
	}
	ms = db->qhead->deadline_ms;
	for (struct db_req *r = db->qhead->next; r; r = r->next)
		if (r->deadline_ms < ms)
			ms = r->deadline_ms; /* refreshed deadlines are no longer in queue order */
	ms -= util_mono_ms();
	if (ms < 0)
		ms = 0;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(db->qtimer, &tv);
}

static void db_on_kick(evutil_socket_t fd, short what, void *arg)
{
	struct db *db = arg;
	struct db_conn *c;
	struct db_req *r;

	(void)fd;
	(void)what;
	while (db->qhead && (c = db_idle_conn(db))) {
		r = db->qhead;
		db->qhead = r->next;
		if (!db->qhead)
			db->qtail = NULL;
		db->queued--;
		r->next = NULL;
		c->req = r;
		conn_send(c);
	}
	db_queue_timer_arm(db);
}

static void db_on_queue_timer(evutil_socket_t fd, short what, void *arg)
{
	struct db *db = arg;
	struct db_req **pp = &db->qhead, *r, *expired = NULL, **etail = &expired;
	int64_t now = util_mono_ms();

	(void)fd;
	(void)what;
	/* A long queue alone never fails a statement: while a connection is up, statements past
	 * their deadline get a fresh window (they fail only if the database is still unreachable
	 * then). Unlink first: the callbacks may queue new statements. */
	db->qtail = NULL;
	while ((r = *pp)) {
		if (r->deadline_ms <= now && db_up(db))
			r->deadline_ms = now + db->queue_timeout_ms;
		if (r->deadline_ms <= now) {
			*pp = r->next;
			r->next = NULL;
			*etail = r;
			etail = &r->next;
			db->queued--;
		} else {
			db->qtail = r;
			pp = &r->next;
		}
	}
	while ((r = expired)) {
		expired = r->next;
		req_finish(r, NULL, "database unavailable");
	}
	db_queue_timer_arm(db);
}

static void conn_init(struct db *db, struct db_conn *c, bool listen)
{
	c->db = db;
	c->listen = listen;
	c->state = DB_CONN_OFF;
	c->ev_fd = -1;
	c->backoff_ms = DB_BACKOFF_MIN_MS;
	c->timer = evtimer_new(db->base, conn_on_timer, c);
	if (!c->timer)
		abort();
}

struct db *db_new(struct event_base *base, const char *conninfo, int size)
{
	return db_new_with(base, conninfo, size, NULL);
}

struct db *db_new_with(struct event_base *base, const char *conninfo, int size, const char *options)
{
	struct db *db;
	int i;

	if (!base || !conninfo || size < 1 || size > DB_MAX_SIZE)
		return NULL;
	db = xcalloc(1, sizeof *db);
	db->base = base;
	db->conninfo = xstrdup(conninfo);
	db->options = session_options(conninfo, options);
	db->size = size;
	db->queue_timeout_ms = DB_QUEUE_TIMEOUT_MS;
	db->kick = event_new(base, -1, 0, db_on_kick, db);
	db->qtimer = evtimer_new(base, db_on_queue_timer, db);
	if (!db->kick || !db->qtimer)
		abort();
	snprintf(db->last_err, sizeof db->last_err, "not connected yet");
	db->conns = xcalloc((size_t)size, sizeof *db->conns);
	conn_init(db, &db->lconn, true);
	for (i = 0; i < size; i++) {
		conn_init(db, &db->conns[i], false);
		conn_connect(&db->conns[i]);
	}
	return db;
}

static void conn_release(struct db_conn *c)
{
	struct db_req *r = c->req;

	c->req = NULL;
	conn_close(c);
	c->state = DB_CONN_OFF;
	event_free(c->timer);
	c->timer = NULL;
	if (r)
		req_finish(r, NULL, "database closed");
}

void db_free(struct db *db)
{
	struct db_req *r;
	int i;

	if (!db)
		return;
	db->closing = true;
	for (i = 0; i < db->size; i++)
		conn_release(&db->conns[i]);
	conn_release(&db->lconn);
	while ((r = db->qhead)) {
		db->qhead = r->next;
		db->queued--;
		req_finish(r, NULL, "database closed");
	}
	event_free(db->kick);
	event_free(db->qtimer);
	free(db->conns);
	free(db->channel);
	free(db->conninfo);
	free(db->options);
	free(db);
}

void db_set_queue_timeout_ms(struct db *db, int ms)
{
	if (db && ms >= 0)
		db->queue_timeout_ms = ms;
}

struct db_deferred {
	db_cb cb;
	void *arg;
	const char *err;
};

static void db_on_deferred(evutil_socket_t fd, short what, void *arg)
{
	struct db_deferred *d = arg;

	(void)fd;
	(void)what;
	d->cb(NULL, d->err, d->arg);
	free(d);
}

void db_exec(struct db *db, const char *sql, int nparams, const char *const *params, db_cb cb, void *arg)
{
	struct db_req *r;
	int i;

	if (!db || !cb)
		return;
	if (db->closing || !sql || nparams < 0 || (nparams > 0 && !params)) {
		/* Fail on the loop, never from inside db_exec. */
		struct db_deferred *d = xmalloc(sizeof *d);

		d->cb = cb;
		d->arg = arg;
		d->err = db->closing ? "database closed" : "bad statement arguments";
		if (event_base_once(db->base, -1, EV_TIMEOUT, db_on_deferred, d, NULL) < 0)
			abort();
		return;
	}
	r = xcalloc(1, sizeof *r);
	r->sql = sql;
	r->nparams = nparams;
	r->params = xcalloc((size_t)(nparams ? nparams : 1), sizeof *r->params);
	for (i = 0; i < nparams; i++)
		r->params[i] = params[i] ? xstrdup(params[i]) : NULL;
	r->cb = cb;
	r->arg = arg;
	r->deadline_ms = util_mono_ms() + db->queue_timeout_ms;
	if (db->qtail)
		db->qtail->next = r;
	else
		db->qhead = r;
	db->qtail = r;
	db->queued++;
	if (!evtimer_pending(db->qtimer, NULL))
		db_queue_timer_arm(db);
	db_kick(db);
}

bool db_up(const struct db *db)
{
	int i;

	if (!db)
		return false;
	for (i = 0; i < db->size; i++)
		if (db->conns[i].state == DB_CONN_IDLE || db->conns[i].state == DB_CONN_BUSY)
			return true;
	return false;
}

void db_stats(const struct db *db, int *busy, int *idle, int *queued)
{
	int i, b = 0, n = 0;

	for (i = 0; db && i < db->size; i++) {
		b += db->conns[i].state == DB_CONN_BUSY;
		n += db->conns[i].state == DB_CONN_IDLE;
	}
	if (busy)
		*busy = b;
	if (idle)
		*idle = n;
	if (queued)
		*queued = db ? db->queued : 0;
}

void db_listen(struct db *db, const char *channel, db_notify_cb cb, void *arg)
{
	if (!db || !channel || !cb)
		return;
	if (db->channel) {
		log_error("db_listen called twice", "channel=\"%s\" ignored=\"%s\"", db->channel, channel);
		return;
	}
	db->channel = xstrdup(channel);
	db->notify_cb = cb;
	db->notify_arg = arg;
	conn_connect(&db->lconn);
}

void db_on_listen_reconnect(struct db *db, void (*cb)(void *arg), void *arg)
{
	if (!db)
		return;
	db->reconnect_cb = cb;
	db->reconnect_arg = arg;
}
