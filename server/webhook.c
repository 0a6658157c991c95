/* The webhook loop (webhook.h): escalations and, with --job-webhook, jobs that ended and quotas crossed
 * (migration 038). A poll timer
 * claims due outbox rows of the kinds it has a URL for in one statement; each row becomes one curl
 * easy handle on a curl multi whose sockets and timeout are libevent events
 * (CURLMOPT_SOCKETFUNCTION / CURLMOPT_TIMERFUNCTION, curl_multi_socket_action), so nothing
 * blocks the loop. Finished POSTs are marked delivered (2xx) or rescheduled with backoff. Owns the
 * curl multi, its events and the deliveries in flight; the rows belong to PostgreSQL. */
#include "webhook.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <jansson.h>

#include "db.h"
#include "log.h"
#include "sql.h"
#include "util.h"
#include "version.h"

#define WEBHOOK_BATCH 16
#define WEBHOOK_ERR_MAX (CURL_ERROR_SIZE + 16)

struct webhook {
	struct event_base *base;
	struct db *db;
	char *url;                /* escalations, or NULL */
	char *job_url;            /* jobs that ended and quotas crossed, or NULL */
	char *kinds;              /* the outbox kinds this replica delivers, as a text[] literal */
	int poll_ms, backoff_ms, backoff_max_ms, timeout_ms;
	CURLM *multi;
	struct curl_slist *headers;
	struct event *tick;       /* the poll timer */
	struct event *curl_timer; /* curl's own timeout */
	bool claiming;            /* a claim statement is in flight (it holds a pointer to us) */
	bool dead;                /* webhook_free ran while claiming: the claim callback frees */
	struct delivery *head;    /* deliveries in flight */
	int inflight;
	long delivered;
};

/* One POST in flight. */
struct delivery {
	struct webhook *w;
	struct delivery *prev, *next;
	CURL *easy;
	long long id;             /* outbox row */
	int attempt;              /* this try's number, 1-based */
	long long escalation, job;
	char *body;
	char err[CURL_ERROR_SIZE];
};

/* What the mark statement's callback needs; it must not point at the webhook (which may be
 * gone when the pool calls back at shutdown). */
struct mark {
	long long id, escalation, job;
	int attempt;
	bool delivered;
};

int64_t webhook_backoff_ms(int n, int base_ms, int max_ms)
{
	int64_t d = base_ms;

	for (int i = 1; i < n && d < max_ms; i++)
		d *= 2;
	return d < max_ms ? d : max_ms;
}

int webhook_inflight(const struct webhook *w)
{
	return w ? w->inflight : 0;
}

long webhook_delivered(const struct webhook *w)
{
	return w ? w->delivered : 0;
}

static void on_marked(PGresult *res, const char *err, void *arg)
{
	struct mark *m = arg;

	if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
		log_warn("webhook mark failed", "outbox=%lld escalation=%lld job=%lld delivered=%d error=\"%s\"",
			 m->id, m->escalation, m->job, m->delivered,
			 err ? err : res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?" : "?");
	free(m);
}

/* Takes d off the multi and the list and frees it. */
static void delivery_free(struct delivery *d)
{
	struct webhook *w = d->w;

	curl_multi_remove_handle(w->multi, d->easy);
	curl_easy_cleanup(d->easy);
	if (d->prev)
		d->prev->next = d->next;
	else
		w->head = d->next;
	if (d->next)
		d->next->prev = d->prev;
	w->inflight--;
	free(d->body);
	free(d);
}

/* A POST ended: mark the row and free the delivery. */
static void delivery_done(struct delivery *d, CURLcode rc)
{
	struct webhook *w = d->w;
	long status = 0;
	struct mark *m = xcalloc(1, sizeof *m);
	char id[32], st[16], delay[32];

	curl_easy_getinfo(d->easy, CURLINFO_RESPONSE_CODE, &status);
	m->id = d->id;
	m->escalation = d->escalation;
	m->job = d->job;
	m->attempt = d->attempt;
	m->delivered = rc == CURLE_OK && status >= 200 && status < 300;
	snprintf(id, sizeof id, "%lld", d->id);
	snprintf(st, sizeof st, "%ld", status);
	if (m->delivered) {
		const char *params[2] = { id, st };
		w->delivered++;
		log_info("webhook delivered", "outbox=%lld escalation=%lld job=%lld try=%d status=%ld", d->id,
			 d->escalation, d->job, d->attempt, status);
		db_exec(w->db, sql_webhook_done, 2, params, on_marked, m);
	} else {
		int64_t wait = webhook_backoff_ms(d->attempt, w->backoff_ms, w->backoff_max_ms);
		char why[WEBHOOK_ERR_MAX];
		const char *params[4] = { id, delay, st, why };
		if (rc != CURLE_OK)
			snprintf(why, sizeof why, "%s", d->err[0] ? d->err : curl_easy_strerror(rc));
		else
			snprintf(why, sizeof why, "HTTP %ld", status);
		snprintf(delay, sizeof delay, "%lld", (long long)wait);
		log_warn("webhook failed", "outbox=%lld escalation=%lld job=%lld try=%d status=%ld retry_ms=%lld error=\"%s\"",
			 d->id, d->escalation, d->job, d->attempt, status, (long long)wait, why);
		db_exec(w->db, sql_webhook_retry, 4, params, on_marked, m);
	}
	delivery_free(d);
}

static void check_done(struct webhook *w)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(w->multi, &left)) != NULL) {
		struct delivery *d = NULL;
		if (msg->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&d);
		delivery_done(d, msg->data.result);
	}
}

static void on_sock_event(evutil_socket_t fd, short what, void *arg)
{
	struct webhook *w = arg;
	int action = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);
	int running = 0;

	curl_multi_socket_action(w->multi, fd, action, &running);
	check_done(w);
}

static void on_curl_timer_event(evutil_socket_t fd, short what, void *arg)
{
	struct webhook *w = arg;
	int running = 0;

	(void)fd;
	(void)what;
	curl_multi_socket_action(w->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_done(w);
}

/* curl tells which events a socket needs; socketp is our event for it (or NULL). */
static int on_curl_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct webhook *w = userp;
	struct event *ev = socketp;
	short kind;

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (ev)
			event_free(ev);
		return 0;
	}
	kind = (short)((what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0) | EV_PERSIST);
	if (ev) {
		event_del(ev);
		event_assign(ev, w->base, s, kind, on_sock_event, w);
	} else {
		ev = event_new(w->base, s, kind, on_sock_event, w);
		curl_multi_assign(w->multi, s, ev);
	}
	event_add(ev, NULL);
	return 0;
}

/* curl asks to be called back after timeout_ms (-1: no timer). Never act from in here. */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
	struct webhook *w = userp;
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };

	(void)multi;
	if (timeout_ms < 0)
		evtimer_del(w->curl_timer);
	else
		evtimer_add(w->curl_timer, &tv);
	return 0;
}

static size_t discard(char *ptr, size_t size, size_t n, void *arg)
{
	(void)ptr;
	(void)arg;
	return size * n;
}

static void delivery_start(struct webhook *w, long long id, int attempt, const char *payload, const char *kind)
{
	struct delivery *d = xcalloc(1, sizeof *d);
	json_t *doc = json_loads(payload, 0, NULL);

	d->w = w;
	d->id = id;
	d->attempt = attempt;
	d->escalation = json_integer_value(json_object_get(doc, "escalation_id"));
	d->job = json_integer_value(json_object_get(doc, "job_id"));
	if (doc) {
		json_object_set_new(doc, "delivery", json_pack("{s:I, s:i}", "outbox_id", (json_int_t)id, "try", attempt));
		d->body = json_dumps(doc, JSON_COMPACT);
	}
	if (!d->body)
		d->body = xstrdup(payload);
	json_decref(doc);
	d->easy = curl_easy_init();
	if (!d->easy) {
		log_error("webhook: curl_easy_init failed", "outbox=%lld escalation=%lld job=%lld", id, d->escalation,
			  d->job);
		free(d->body);
		free(d);
		return;
	}
	curl_easy_setopt(d->easy, CURLOPT_URL, strcmp(kind, "escalation") ? w->job_url : w->url);
	curl_easy_setopt(d->easy, CURLOPT_HTTPHEADER, w->headers);
	curl_easy_setopt(d->easy, CURLOPT_POSTFIELDS, d->body);
	curl_easy_setopt(d->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(d->body));
	curl_easy_setopt(d->easy, CURLOPT_TIMEOUT_MS, (long)w->timeout_ms);
	curl_easy_setopt(d->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(d->easy, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(d->easy, CURLOPT_ERRORBUFFER, d->err);
	curl_easy_setopt(d->easy, CURLOPT_PRIVATE, d);
	curl_easy_setopt(d->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	d->next = w->head;
	if (w->head)
		w->head->prev = d;
	w->head = d;
	w->inflight++;
	log_debug("webhook sending", "outbox=%lld escalation=%lld job=%lld try=%d", id, d->escalation, d->job, attempt);
	curl_multi_add_handle(w->multi, d->easy);
}

static void on_claimed(PGresult *res, const char *err, void *arg)
{
	struct webhook *w = arg;

	w->claiming = false;
	if (w->dead) {
		/* freed meanwhile: the rows stay claimed until the deadline, then go out again */
		webhook_free(w);
		return;
	}
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
		log_warn("webhook claim failed", "error=\"%s\"",
			 err ? err : res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?" : "?");
		return;
	}
	for (int i = 0; i < PQntuples(res); i++)
		delivery_start(w, strtoll(PQgetvalue(res, i, 0), NULL, 10), atoi(PQgetvalue(res, i, 1)),
			       PQgetvalue(res, i, 2), PQgetvalue(res, i, 3));
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct webhook *w = arg;
	char batch[16], claim_s[16];
	const char *params[3] = { batch, claim_s, w->kinds };

	(void)fd;
	(void)what;
	if (w->claiming || w->inflight > 0 || !db_up(w->db))
		return;
	snprintf(batch, sizeof batch, "%d", WEBHOOK_BATCH);
	/* the claim outlives one POST: no other replica sends the row meanwhile */
	snprintf(claim_s, sizeof claim_s, "%d", w->timeout_ms / 1000 + 5);
	w->claiming = true;
	db_exec(w->db, sql_webhook_claim, 3, params, on_claimed, w);
}

struct webhook *webhook_new(struct event_base *base, struct db *db, const struct webhook_opts *o)
{
	struct webhook *w = NULL;
	struct timeval every = { o->poll_ms / 1000, (o->poll_ms % 1000) * 1000 };

	if (!o->url && !o->job_url)
		return NULL;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		log_error("webhook: curl_global_init failed", "url=%s", o->url ? o->url : o->job_url);
		return NULL;
	}
	w = xcalloc(1, sizeof *w);
	w->base = base;
	w->db = db;
	w->url = o->url ? xstrdup(o->url) : NULL;
	w->job_url = o->job_url ? xstrdup(o->job_url) : NULL;
	/* the job URL hears of jobs that ended and of quotas crossed (migration 038) */
	w->kinds = xasprintf("{%s%s%s}", o->url ? "escalation" : "", o->url && o->job_url ? "," : "",
			     o->job_url ? "job,quota" : "");
	w->poll_ms = o->poll_ms;
	w->backoff_ms = o->backoff_ms;
	w->backoff_max_ms = o->backoff_max_ms;
	w->timeout_ms = o->timeout_ms;
	w->multi = curl_multi_init();
	if (!w->multi) {
		log_error("webhook: curl_multi_init failed", "url=%s", o->url ? o->url : o->job_url);
		webhook_free(w);
		return NULL;
	}
	w->headers = curl_slist_append(NULL, "Content-Type: application/json");
	{
		char *agent = xasprintf("User-Agent: rungd/%s", rung_version()); /* the list keeps a copy */
		w->headers = curl_slist_append(w->headers, agent);
		free(agent);
	}
	curl_multi_setopt(w->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
	curl_multi_setopt(w->multi, CURLMOPT_SOCKETDATA, w);
	curl_multi_setopt(w->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	curl_multi_setopt(w->multi, CURLMOPT_TIMERDATA, w);
	w->curl_timer = evtimer_new(base, on_curl_timer_event, w);
	w->tick = event_new(base, -1, EV_PERSIST, on_tick, w);
	event_add(w->tick, &every);
	log_info("webhook on", "url=%s job_url=%s poll_ms=%d backoff_ms=%d backoff_max_ms=%d timeout_ms=%d",
		 w->url ? w->url : "-", w->job_url ? w->job_url : "-", w->poll_ms, w->backoff_ms, w->backoff_max_ms,
		 w->timeout_ms);
	return w;
}

void webhook_free(struct webhook *w)
{
	if (!w)
		return;
	if (w->tick) {
		event_free(w->tick);
		w->tick = NULL;
	}
	if (w->claiming) {
		w->dead = true;
		return;
	}
	while (w->head)
		delivery_free(w->head);
	if (w->multi)
		curl_multi_cleanup(w->multi);
	if (w->curl_timer)
		event_free(w->curl_timer);
	curl_slist_free_all(w->headers);
	free(w->url);
	free(w->job_url);
	free(w->kinds);
	free(w);
	curl_global_cleanup();
}
