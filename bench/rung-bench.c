/* rung-bench: the load generator and report writer behind `make bench` (scripts/bench.sh).
 * Plays submitters and workers against a running rungd over HTTP (libevent evhttp client, one
 * connection per simulated client, traffic to 127.0.0.1 only), prints one JSON line per run, and
 * turns those lines (plus the pgbench and peer lines bench.sh adds) into tables, side-by-side ratios and
 * bench/results/SCENARIO.json. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "util.h"

#define LAT_MAX_SAMPLES (4u << 20) /* per series; later samples are dropped (bounded memory) */
#define CONN_TIMEOUT_S 120         /* must exceed the longest long-poll (60 s) */
#define REGISTER_CONNS 32
#define PREFILL_CONNS 32
#define WAKE_TABLE_BITS 17
#define MAX_ERRORS 1000            /* a run with more errors than this stops early */

/* ---- options and the shared run state ---- */

struct opts {
	const char *host;
	int port;
	char hostport[128];
	char *auth;                /* "Bearer TOKEN" from RUNG_BENCH_TOKEN, or NULL */
	int runs;
	double seconds;
	const char *list;          /* submit: concurrency; cycle: workers */
	int batch;                 /* submit: jobs per call (> 1: POST /v1/jobs/batch) */
	int fleet;                 /* fleet: GPUs */
	int gpus_per_worker;
	double busy;               /* fleet: fraction of GPUs holding a lease */
	int hb_interval_ms;        /* fleet: heartbeat period of a leased GPU */
	int probe_interval_ms;     /* fleet: time between wake probes */
	int rungd_pid;
	int workers;               /* recovery: workers */
	const char *config_path;
	const char *raw_path;      /* report */
	const char *scenario;      /* report */
	const char *out_path;      /* report */
	const char *machine_path;  /* report */
	const char *rev;           /* report */
	bool quick;                /* report */
	const char *hook;          /* run before each timed window ("HOOK begin") and after it ("HOOK end UNITS") */
};

struct lat {
	double *v; /* milliseconds */
	size_t n, cap;
};

enum sim_state {
	SIM_IDLE,
	SIM_REGISTER,  /* POST /v1/workers in flight */
	SIM_SUBMIT,    /* POST /v1/jobs in flight */
	SIM_LEASE,     /* POST /v1/workers/ID/lease in flight (maybe parked) */
	SIM_HOLD,      /* holds a lease, heartbeat timer armed (fleet) */
	SIM_HEARTBEAT, /* heartbeat in flight */
	SIM_FINISH,    /* finish in flight */
	SIM_DONE,
};

enum mode {
	MODE_SUBMIT,   /* timed submitter */
	MODE_PREFILL,  /* untimed submitter of a fixed number of jobs */
	MODE_PROBE,    /* fleet: one submit at a time, for wake latency */
	MODE_REGISTER,
	MODE_CYCLE,    /* worker: lease + 3 heartbeats + finish(success) */
	MODE_RECOVERY, /* worker: lease + finish(OOM, OOM, success) */
	MODE_FLEET,    /* GPU: parked long-poll, heartbeats every interval while leased */
};

struct bench;

struct sim {
	struct bench *b;
	enum mode mode;
	struct evhttp_connection *conn;
	enum sim_state state;
	int idx;
	long long worker_id;
	char gpu_uuid[64];
	long long attempt_id, job_id;
	int number;
	char *token;
	int hb_left;
	int step;
	int backoff_ms;        /* fleet: next retry delay after a refused lease */
	bool stop;             /* fleet cleanup: finish what is held, lease nothing new */
	int64_t t_sent;        /* µs */
	struct event *timer;
	char *facts[2];        /* the FACTS text it finishes with: [0] success, [1] OOM (made once) */
};

struct wake {
	long long job_id; /* 0 = empty */
	int64_t t201, tlease;
};

struct bench {
	struct opts *o;
	struct event_base *base;
	bool timed_out;
	int64_t t_start, t_end, deadline; /* µs */
	/* submit / prefill / register */
	char *submit_body;
	size_t submit_len;
	char *batch_body;      /* submit --batch N: {"jobs": [N submits]} */
	size_t batch_len;
	long long target;      /* prefill / register: how many */
	long long issued, ok, errors, retries;
	int active;
	struct lat lat_submit;
	/* register */
	int reg_gpus;
	const char *reg_prefix;
	long long *worker_ids;
	/* workers */
	long long remaining;   /* cycle: queued jobs left; recovery: jobs not yet ended */
	long long attempts, decisions, jobs_done;
	json_t *classes;       /* recovery: decision class -> count */
	struct lat lat_lease, lat_hb, lat_finish;
	/* fleet */
	bool window;
	long long holding, hold_target, leased_total, probes, lease_before_201;
	struct sim *probe;
	struct event *probe_timer, *sample_timer;
	long long rss_max_kb;
	struct wake *wakes;
};

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- latency series ---- */

static void lat_add(struct lat *l, double ms)
{
	if (l->n == l->cap) {
		if (l->cap >= LAT_MAX_SAMPLES)
			return;
		l->cap = l->cap ? l->cap * 2 : 1024;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = ms;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile; NAN when empty. Sorts the series in place. */
static double lat_pct(struct lat *l, double p)
{
	size_t rank;

	if (l->n == 0)
		return NAN;
	qsort(l->v, l->n, sizeof(*l->v), cmp_double);
	rank = (size_t)ceil(p / 100.0 * (double)l->n);
	if (rank < 1)
		rank = 1;
	return l->v[rank - 1];
}

static void lat_reset(struct lat *l)
{
	l->n = 0;
}

static void lat_release(struct lat *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* Adds NAME: number (null when NAN) to OBJ. */
static void put_num(json_t *obj, const char *name, double v)
{
	json_object_set_new(obj, name, isnan(v) ? json_null() : json_real(round(v * 1000.0) / 1000.0));
}

static void emit(const char *scenario, const char *setting, int run, json_t *metrics)
{
	json_t *line = json_pack("{s:s, s:s, s:s, s:i, s:o}", "scenario", scenario, "system", "rung", "setting",
				 setting, "run", run, "metrics", metrics);
	char *s = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));

	printf("%s\n", s);
	fflush(stdout);
	free(s);
	json_decref(line);
}

/* ---- HTTP plumbing ---- */

static void on_reply(struct evhttp_request *req, void *arg);

static struct evhttp_connection *conn_new(struct bench *b)
{
	struct evhttp_connection *c = evhttp_connection_base_new(b->base, NULL, b->o->host, (unsigned short)b->o->port);

	if (!c) {
		fprintf(stderr, "rung-bench: cannot create a connection\n");
		exit(1);
	}
	evhttp_connection_set_timeout(c, CONN_TIMEOUT_S);
	return c;
}

/* Sends POST PATH with BODY (borrowed) on the sim's connection; the reply comes to on_reply. */
static void sim_post(struct sim *s, enum sim_state st, const char *path, const char *body, size_t len)
{
	struct evhttp_request *r = evhttp_request_new(on_reply, s);
	struct evkeyvalq *h = evhttp_request_get_output_headers(r);

	if (!s->conn)
		s->conn = conn_new(s->b);
	evhttp_add_header(h, "Host", s->b->o->hostport);
	evhttp_add_header(h, "Content-Type", "application/json");
	if (s->b->o->auth)
		evhttp_add_header(h, "Authorization", s->b->o->auth);
	evbuffer_add(evhttp_request_get_output_buffer(r), body, len);
	s->state = st;
	s->t_sent = now_us();
	if (evhttp_make_request(s->conn, r, EVHTTP_REQ_POST, path) != 0) {
		fprintf(stderr, "rung-bench: cannot send %s\n", path);
		exit(1);
	}
}

/* Sends POST PATH with the JSON DOC (stolen). */
static void sim_post_json(struct sim *s, enum sim_state st, const char *path, json_t *doc)
{
	char *body = json_dumps(doc, JSON_COMPACT);

	sim_post(s, st, path, body, strlen(body));
	free(body);
	json_decref(doc);
}

/* The reply's JSON body; for a LEASE (lease true), only its members before the config: a
 * simulated worker with a no-op trainer uses the ids and the token, and parsing the ~3 KB config
 * cost this process a quarter of its CPU. rungd splices the config in after the lean LEASE
 * (server/lease.c), so the text up to `, "config": ` closed with a brace is the LEASE without it;
 * any other shape falls back to parsing the whole body. */
static json_t *reply_json(struct evhttp_request *req, bool lease)
{
	static const char cut[] = ", \"config\": ";
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	const char *text;

	if (n == 0)
		return NULL;
	text = (const char *)evbuffer_pullup(in, -1);
	if (lease) {
		const char *at = memmem(text, n, cut, sizeof cut - 1);
		if (at && at > text) {
			size_t k = (size_t)(at - text);
			char *lean = xmalloc(k + 2);
			json_t *doc;
			memcpy(lean, text, k);
			lean[k] = '}';
			lean[k + 1] = 0;
			doc = json_loadb(lean, k + 1, 0, NULL);
			free(lean);
			if (doc)
				return doc;
		}
	}
	return json_loadb(text, n, 0, NULL);
}

static void loop_done(struct bench *b)
{
	event_base_loopbreak(b->base);
}

static void on_watchdog(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	(void)fd;
	(void)what;
	b->timed_out = true;
	event_base_loopbreak(b->base);
}

/* Runs the loop until loop_done or MAX_S seconds; returns false on the time limit. */
static bool phase_run(struct bench *b, double max_s)
{
	struct event *wd = evtimer_new(b->base, on_watchdog, b);
	struct timeval tv = { (time_t)max_s, (suseconds_t)((max_s - floor(max_s)) * 1e6) };

	b->timed_out = false;
	evtimer_add(wd, &tv);
	event_base_dispatch(b->base);
	event_free(wd);
	return !b->timed_out;
}

static void arm(struct sim *s, event_callback_fn fn, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (!s->timer)
		s->timer = evtimer_new(s->b->base, fn, s);
	evtimer_add(s->timer, &tv);
}

static void sim_release(struct sim *s)
{
	if (s->timer)
		event_free(s->timer);
	if (s->conn)
		evhttp_connection_free(s->conn);
	free(s->token);
	free(s->facts[0]);
	free(s->facts[1]);
	memset(s, 0, sizeof(*s));
}

/* ---- facts the simulated workers report ---- */

static json_t *facts_success(const char *uuid)
{
	return json_pack("{s:i, s:n, s:b, s:s, s:n, s:i, s:i, s:i, s:i, s:{}, s:n, s:n,"
			 " s:{s:s, s:i, s:i, s:[]}, s:n, s:i, s:[s, s, s]}",
			 "exit_code", 0, "signal", "cancelled", 0, "phase", "done", "oom_phase", "first_step", 1,
			 "last_step", 2000, "steps_done", 2000, "total_steps", 2000, "signatures", "oom", "error",
			 "gpu_before", "uuid", uuid, "memory_total_mib", 24564, "memory_used_mib", 3, "processes",
			 "gpu_after", "duration_ms", 3600000, "log_tail", "Saving at step 2000",
			 "Saved to output/my_first_flux_lora_v1", "Result: - 1 completed job");
}

/* An early train-phase CUDA OOM (three skipped batches, then the trainer gives up). */
static json_t *facts_oom(const char *uuid)
{
	return json_pack("{s:i, s:n, s:b, s:s, s:s, s:i, s:i, s:i, s:i,"
			 " s:{s:i, s:i, s:i, s:i}, s:{s:i, s:i, s:i, s:i, s:[]}, s:s,"
			 " s:{s:s, s:i, s:i, s:[]}, s:n, s:i, s:[s, s, s]}",
			 "exit_code", 1, "signal", "cancelled", 0, "phase", "train", "oom_phase", "train",
			 "first_step", 1, "last_step", 3, "steps_done", 3, "total_steps", 2000, "signatures",
			 "cuda_oom", 1, "skipped_batch_oom", 3, "oom_3_in_row", 1, "error_running_job", 1, "oom",
			 "tried_to_allocate_mib", 1536, "total_capacity_mib", 24564, "free_mib", 212,
			 "allocated_by_pytorch_mib", 22118, "processes", "error",
			 "OOM during training step 3 times in a row, aborting training", "gpu_before", "uuid", uuid,
			 "memory_total_mib", 24564, "memory_used_mib", 3, "processes", "gpu_after", "duration_ms",
			 412000, "log_tail", "# OOM during training step, skipping batch 3/3 #",
			 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total "
			 "capacity of 23.99 GiB of which 212.00 MiB is free.",
			 "Error running job: OOM during training step 3 times in a row, aborting training");
}

/* ---- worker calls ---- */

static void sim_lease(struct sim *s, int wait_ms)
{
	char path[96];

	snprintf(path, sizeof(path), "/v1/workers/%lld/lease", s->worker_id);
	sim_post_json(s, SIM_LEASE, path, json_pack("{s:s, s:i}", "gpu_uuid", s->gpu_uuid, "wait_ms", wait_ms));
}

/* Request bodies are formatted, not built with jansson: the token is hex and the FACTS text is
 * made once per sim, so the load generator spends its CPU on HTTP, as a lean worker would. */
static void sim_heartbeat(struct sim *s)
{
	char path[96], body[512];
	int n;

	snprintf(path, sizeof(path), "/v1/attempts/%lld/heartbeat", s->attempt_id);
	s->step += 10;
	n = snprintf(body, sizeof body,
		     "{\"token\":\"%s\",\"phase\":\"train\",\"step\":%d,\"total_steps\":2000,"
		     "\"memory_used_mib\":21000}", s->token, s->step);
	if (n < 0 || (size_t)n >= sizeof body)
		abort(); /* a lease token is 64 hex digits, at most 256 (rungd TOKEN_MAX_LEN) */
	sim_post(s, SIM_HEARTBEAT, path, body, (size_t)n);
}

static void sim_finish(struct sim *s, bool oom)
{
	char path[96], *body;

	snprintf(path, sizeof(path), "/v1/attempts/%lld/finish", s->attempt_id);
	if (!s->facts[oom]) {
		json_t *f = oom ? facts_oom(s->gpu_uuid) : facts_success(s->gpu_uuid);
		s->facts[oom] = json_dumps(f, JSON_COMPACT);
		json_decref(f);
	}
	body = util_concat("{\"token\":\"", s->token, "\",\"facts\":", s->facts[oom], "}", NULL);
	sim_post(s, SIM_FINISH, path, body, strlen(body));
	free(body);
}

static void sim_submit(struct sim *s)
{
	s->b->issued++;
	if (s->mode == MODE_SUBMIT && s->b->batch_body)
		sim_post(s, SIM_SUBMIT, "/v1/jobs/batch", s->b->batch_body, s->b->batch_len);
	else
		sim_post(s, SIM_SUBMIT, "/v1/jobs", s->b->submit_body, s->b->submit_len);
}

static bool take_lease(struct sim *s, const json_t *doc)
{
	const char *tok = json_string_value(json_object_get(doc, "token"));

	s->attempt_id = json_integer_value(json_object_get(doc, "attempt_id"));
	s->job_id = json_integer_value(json_object_get(doc, "job_id"));
	s->number = (int)json_integer_value(json_object_get(doc, "number"));
	if (!tok || s->attempt_id <= 0)
		return false;
	free(s->token);
	s->token = xstrdup(tok);
	s->step = 0;
	return true;
}

/* ---- fleet wake-latency table: job id -> (time of the 201, time of the lease) ---- */

static struct wake *wake_slot(struct bench *b, long long job_id)
{
	size_t mask = ((size_t)1 << WAKE_TABLE_BITS) - 1;
	size_t i = (size_t)job_id * 2654435761u & mask;
	size_t n;

	for (n = 0; n <= mask; n++, i = (i + 1) & mask) {
		if (b->wakes[i].job_id == job_id)
			return &b->wakes[i];
		if (b->wakes[i].job_id == 0) {
			b->wakes[i].job_id = job_id;
			return &b->wakes[i];
		}
	}
	return NULL;
}

/* ---- the reply state machine ---- */

/* Re-sends what a sim was refused (503 while rungd is saturated), as a real client would. */
static void on_retry_timer(evutil_socket_t fd, short what, void *arg)
{
	struct sim *s = arg;

	(void)fd;
	(void)what;
	if (s->mode == MODE_PREFILL)
		sim_submit(s);
	else if (s->mode == MODE_FLEET && !s->stop)
		sim_lease(s, 60000);
	else
		s->state = SIM_IDLE;
}

static void on_hb_timer(evutil_socket_t fd, short what, void *arg);

static void count_error(struct bench *b, struct sim *s, const char *what, int code)
{
	if (b->errors++ < 10)
		fprintf(stderr, "rung-bench: %s on sim %d: HTTP %d\n", what, s->idx, code);
}

static void sim_end(struct sim *s)
{
	struct bench *b = s->b;

	s->state = SIM_DONE;
	if (--b->active == 0)
		loop_done(b);
}

static void fleet_hold(struct sim *s)
{
	struct bench *b = s->b;

	s->state = SIM_HOLD;
	b->holding++;
	if (s->stop) {
		sim_finish(s, false);
		return;
	}
	/* spread the first heartbeat over one interval so the load is even */
	arm(s, on_hb_timer, (int)(random() % b->o->hb_interval_ms) + 1);
}

static void on_hb_timer(evutil_socket_t fd, short what, void *arg)
{
	struct sim *s = arg;

	(void)fd;
	(void)what;
	if (s->state == SIM_HOLD && !s->stop)
		sim_heartbeat(s);
}

static void fleet_reply(struct sim *s, int code, json_t *doc, double ms)
{
	struct bench *b = s->b;

	switch (s->state) {
	case SIM_LEASE:
		if (code == 200 || code == 204)
			s->backoff_ms = 0;
		if (code == 200 && take_lease(s, doc)) {
			b->leased_total++;
			if (b->window) {
				struct wake *w = wake_slot(b, s->job_id);
				if (w && !w->tlease)
					w->tlease = now_us();
			}
			fleet_hold(s);
		} else if (code == 204 && !s->stop) {
			sim_lease(s, 60000);
		} else if (!s->stop) {
			/* back off as a real worker would: 1 s doubling to 16 s, with jitter */
			count_error(b, s, "lease", code);
			s->state = SIM_IDLE;
			s->backoff_ms = s->backoff_ms ? (s->backoff_ms < 16000 ? s->backoff_ms * 2 : 16000) : 1000;
			arm(s, on_retry_timer, s->backoff_ms / 2 + (int)(random() % (s->backoff_ms / 2 + 1)));
		} else {
			s->state = SIM_IDLE;
		}
		return;
	case SIM_HEARTBEAT:
		if (b->window)
			lat_add(&b->lat_hb, ms);
		if (code != 200) {
			count_error(b, s, "heartbeat", code);
			b->holding--;
			if (!s->stop)
				sim_lease(s, 60000);
			else
				s->state = SIM_IDLE;
			return;
		}
		s->state = SIM_HOLD;
		if (s->stop)
			sim_finish(s, false);
		else
			arm(s, on_hb_timer, b->o->hb_interval_ms);
		return;
	case SIM_FINISH:
		if (code != 200)
			count_error(b, s, "finish", code);
		s->state = SIM_IDLE;
		if (--b->holding == 0 && s->stop)
			loop_done(b);
		return;
	default:
		abort();
	}
}

static void worker_reply(struct sim *s, int code, json_t *doc, double ms)
{
	struct bench *b = s->b;
	bool after = now_us() >= b->deadline;

	switch (s->state) {
	case SIM_LEASE:
		if (code == 200 && take_lease(s, doc)) {
			lat_add(&b->lat_lease, ms);
			if (s->mode == MODE_CYCLE) {
				b->remaining--;
				s->hb_left = 3;
				sim_heartbeat(s);
			} else {
				sim_finish(s, s->number <= 2);
			}
		} else if (code == 204 && !after && b->remaining > 0) {
			sim_lease(s, 200);
		} else {
			if (code != 204)
				count_error(b, s, "lease", code);
			sim_end(s);
		}
		return;
	case SIM_HEARTBEAT:
		lat_add(&b->lat_hb, ms);
		if (code != 200) {
			count_error(b, s, "heartbeat", code);
			sim_end(s);
		} else if (--s->hb_left > 0) {
			sim_heartbeat(s);
		} else {
			sim_finish(s, false);
		}
		return;
	case SIM_FINISH:
		lat_add(&b->lat_finish, ms);
		if (code != 200) {
			count_error(b, s, "finish", code);
			sim_end(s);
			return;
		}
		b->attempts++;
		b->t_end = now_us();
		if (s->mode == MODE_RECOVERY) {
			json_t *d = json_object_get(doc, "decision");
			const char *cls = json_string_value(json_object_get(d, "class"));
			const char *js = json_string_value(json_object_get(doc, "job_state"));
			b->decisions++;
			if (cls)
				json_object_set_new(b->classes, cls,
						    json_integer(json_integer_value(json_object_get(b->classes, cls)) + 1));
			if (js && strcmp(js, "queued") != 0) {
				b->jobs_done++;
				b->remaining--;
			}
		}
		if (after || b->errors > MAX_ERRORS || (s->mode == MODE_RECOVERY && b->remaining <= 0))
			sim_end(s);
		else
			sim_lease(s, 200);
		return;
	default:
		abort();
	}
}

static void on_reply(struct evhttp_request *req, void *arg)
{
	struct sim *s = arg;
	struct bench *b = s->b;
	int code = req ? evhttp_request_get_response_code(req) : 0; /* 0: connection failed */
	double ms = (double)(now_us() - s->t_sent) / 1000.0;
	/* A reply is parsed only where its body is used (ids, lease tokens, decisions, errors): a
	 * client that needs the status code alone does not pay for parsing a 6 KB JOB. */
	bool status_only = code >= 200 && code < 300 &&
			   (s->mode == MODE_SUBMIT || s->mode == MODE_PREFILL ||
			    (s->mode == MODE_CYCLE && s->state != SIM_LEASE));
	json_t *doc = code && !status_only ? reply_json(req, code == 200 && s->state == SIM_LEASE) : NULL;

	switch (s->mode) {
	case MODE_SUBMIT:
	case MODE_PREFILL:
		if (code == 201) {
			b->ok += s->mode == MODE_SUBMIT && b->batch_body ? b->o->batch : 1;
			if (s->mode == MODE_SUBMIT)
				lat_add(&b->lat_submit, ms);
			b->t_end = now_us();
		} else if (s->mode == MODE_PREFILL) {
			/* untimed set-up: retry until the phase's time limit */
			b->retries++;
			b->issued--;
			s->state = SIM_IDLE;
			arm(s, on_retry_timer, 200 + (int)(random() % 300));
			break;
		} else {
			count_error(b, s, "submit", code);
		}
		if (b->errors > MAX_ERRORS || (s->mode == MODE_SUBMIT && now_us() >= b->deadline) ||
		    (s->mode == MODE_PREFILL && b->issued >= b->target))
			sim_end(s);
		else
			sim_submit(s);
		break;
	case MODE_PROBE:
		s->state = SIM_IDLE;
		if (code == 201 && b->window) {
			struct wake *w = wake_slot(b, json_integer_value(json_object_get(doc, "id")));
			if (w) {
				w->t201 = now_us();
				if (w->tlease)
					b->lease_before_201++;
			}
		} else if (code != 201) {
			count_error(b, s, "probe submit", code);
		}
		break;
	case MODE_REGISTER:
		if (code == 200 || code == 201) {
			b->worker_ids[s->idx] = json_integer_value(json_object_get(doc, "id"));
			b->ok++;
		} else {
			count_error(b, s, "register", code);
		}
		s->state = SIM_IDLE;
		break;
	case MODE_CYCLE:
	case MODE_RECOVERY:
		worker_reply(s, code, doc, ms);
		break;
	case MODE_FLEET:
		fleet_reply(s, code, doc, ms);
		break;
	}
	json_decref(doc);
}

/* ---- phases ---- */

static char *load_submit_body(const char *path)
{
	json_error_t err;
	json_t *cfg = json_load_file(path, 0, &err);
	json_t *req;
	char *s;

	if (!cfg) {
		fprintf(stderr, "rung-bench: %s: %s (line %d)\n", path, err.text, err.line);
		exit(1);
	}
	req = json_pack("{s:s, s:o}", "name", "bench", "config", cfg);
	s = json_dumps(req, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(req);
	return s;
}

/* Submits N jobs with PREFILL_CONNS connections (not timed), for at most MAX_S seconds. */
static bool prefill(struct bench *b, long long n, double max_s)
{
	struct sim sims[PREFILL_CONNS];
	int k = n < PREFILL_CONNS ? (int)n : PREFILL_CONNS, i;
	bool ok = true;

	if (n <= 0)
		return true;
	memset(sims, 0, sizeof(sims));
	b->issued = b->ok = 0;
	b->target = n;
	b->active = k;
	for (i = 0; i < k; i++) {
		sims[i].b = b;
		sims[i].mode = MODE_PREFILL;
		sims[i].idx = i;
		sim_submit(&sims[i]);
	}
	ok = phase_run(b, max_s) && b->ok == n;
	for (i = 0; i < k; i++)
		sim_release(&sims[i]);
	if (!ok)
		fprintf(stderr, "rung-bench: prefill submitted %lld of %lld jobs\n", b->ok, n);
	return ok;
}

/* Registers N workers named PREFIX-i with G GPUs each (uuid GPU-PREFIX-i-g); ids into b->worker_ids. */
static bool register_workers(struct bench *b, const char *prefix, int n, int g)
{
	struct sim *sims = xcalloc(REGISTER_CONNS, sizeof(*sims));
	long long next = 0;
	bool ok;
	int i;

	free(b->worker_ids);
	b->worker_ids = xcalloc((size_t)n, sizeof(*b->worker_ids));
	b->ok = b->errors = 0;
	b->target = n;
	/* one in flight per connection; refill idle connections from a timer-free loop */
	while (b->ok + b->errors < n) {
		for (i = 0; i < REGISTER_CONNS && next < n; i++) {
			json_t *gpus;
			char name[96];
			int j;
			if (sims[i].state != SIM_IDLE)
				continue;
			sims[i].b = b;
			sims[i].mode = MODE_REGISTER;
			sims[i].idx = (int)next;
			gpus = json_array();
			for (j = 0; j < g; j++) {
				char uuid[96];
				snprintf(uuid, sizeof(uuid), "GPU-%s-%lld-%d", prefix, next, j);
				json_array_append_new(gpus, json_pack("{s:s, s:i, s:s, s:i}", "uuid", uuid, "index", j,
								      "name", "NVIDIA GeForce RTX 4090",
								      "memory_total_mib", 24564));
			}
			snprintf(name, sizeof(name), "%s-%lld", prefix, next);
			sim_post_json(&sims[i], SIM_REGISTER, "/v1/workers",
				      json_pack("{s:s, s:s, s:o}", "name", name, "host", "bench", "gpus", gpus));
			next++;
		}
		/* run until any reply (on_reply marks the sim idle) */
		event_base_loop(b->base, EVLOOP_ONCE);
		if (b->errors > MAX_ERRORS)
			break;
	}
	for (i = 0; i < REGISTER_CONNS; i++)
		sim_release(&sims[i]);
	free(sims);
	ok = b->ok == n;
	if (!ok)
		fprintf(stderr, "rung-bench: registered %lld of %d workers\n", b->ok, n);
	return ok;
}

static void reset_counts(struct bench *b)
{
	b->issued = b->ok = b->errors = 0;
	b->attempts = b->decisions = b->jobs_done = 0;
	b->holding = b->leased_total = b->probes = b->lease_before_201 = 0;
	lat_reset(&b->lat_submit);
	lat_reset(&b->lat_lease);
	lat_reset(&b->lat_hb);
	lat_reset(&b->lat_finish);
}

static int parse_list(const char *s, int *out, int max)
{
	int n = 0;
	char *copy = xstrdup(s), *tok, *save = NULL;

	for (tok = strtok_r(copy, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save))
		if (atoi(tok) > 0)
			out[n++] = atoi(tok);
	free(copy);
	return n;
}

/* --hook: "HOOK begin" before a timed window; "HOOK end UNITS" after it prints one JSON object whose numbers
 * (per unit: attempt, job, decision) join the run's metrics (bench/hooks.sh: what Postgres wrote, writes.sh, and
 * the CPU each process used, cpu.sh, which finds this process through RUNG_BENCH_PID). */
static void hook_begin(struct bench *b)
{
	char *cmd;

	if (!b->o->hook)
		return;
	cmd = xasprintf("%s begin", b->o->hook);
	if (system(cmd) != 0)
		fprintf(stderr, "rung-bench: hook failed: %s\n", cmd);
	free(cmd);
}

static void hook_end(struct bench *b, long long units, json_t *metrics)
{
	char *cmd, buf[4096];
	FILE *p;
	size_t n;
	json_t *doc, *v;
	const char *key;

	if (!b->o->hook)
		return;
	cmd = xasprintf("%s end %lld", b->o->hook, units);
	p = popen(cmd, "r");
	if (!p) {
		fprintf(stderr, "rung-bench: hook failed: %s\n", cmd);
		free(cmd);
		return;
	}
	n = fread(buf, 1, sizeof(buf) - 1, p);
	buf[n] = '\0';
	if (pclose(p) != 0)
		fprintf(stderr, "rung-bench: hook exited non-zero: %s\n", cmd);
	free(cmd);
	doc = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
	json_object_foreach(doc, key, v) {
		if (json_is_number(v))
			json_object_set(metrics, key, v);
	}
	json_decref(doc);
}

/* 1. submit: S connections each POST /v1/jobs back to back for the window (--batch N: POST
 * /v1/jobs/batch of N jobs, the setting "batch S=16"; jobs_per_s counts jobs, the latency calls). */
static int scenario_submit(struct bench *b)
{
	int conc[8], nc = parse_list(b->o->list ? b->o->list : "16,64", conc, 8), c, run, i;

	for (c = 0; c < nc; c++) {
		for (run = 1; run <= b->o->runs; run++) {
			struct sim *sims = xcalloc((size_t)conc[c], sizeof(*sims));
			char setting[32];
			json_t *m;
			double secs;

			reset_counts(b);
			hook_begin(b);
			b->active = conc[c];
			b->t_start = now_us();
			b->t_end = b->t_start;
			b->deadline = b->t_start + (int64_t)(b->o->seconds * 1e6);
			for (i = 0; i < conc[c]; i++) {
				sims[i].b = b;
				sims[i].mode = MODE_SUBMIT;
				sims[i].idx = i;
				sim_submit(&sims[i]);
			}
			phase_run(b, b->o->seconds + 60);
			secs = (double)(b->t_end - b->t_start) / 1e6;
			snprintf(setting, sizeof(setting), "%sS=%d", b->batch_body ? "batch " : "", conc[c]);
			m = json_object();
			put_num(m, "jobs_per_s", secs > 0 ? (double)b->ok / secs : NAN);
			put_num(m, "p50_ms", lat_pct(&b->lat_submit, 50));
			put_num(m, "p99_ms", lat_pct(&b->lat_submit, 99));
			json_object_set_new(m, "jobs", json_integer(b->ok));
			json_object_set_new(m, "errors", json_integer(b->errors));
			hook_end(b, b->ok, m);
			emit("submit", setting, run, m);
			for (i = 0; i < conc[c]; i++)
				sim_release(&sims[i]);
			free(sims);
		}
	}
	return 0;
}

/* Runs W registered workers (one GPU each) until the window ends (each finishes its attempt)
 * or the work runs out. */
static void run_workers(struct bench *b, struct sim *sims, int w)
{
	int i;

	b->active = w;
	b->t_start = now_us();
	b->t_end = b->t_start;
	b->deadline = b->t_start + (int64_t)(b->o->seconds * 1e6);
	for (i = 0; i < w; i++)
		sim_lease(&sims[i], 200);
	phase_run(b, b->o->seconds + 120);
}

static struct sim *make_sims(struct bench *b, enum mode mode, const char *prefix, int w, int g)
{
	struct sim *sims = xcalloc((size_t)w * (size_t)g, sizeof(*sims));
	int i;

	for (i = 0; i < w * g; i++) {
		sims[i].b = b;
		sims[i].mode = mode;
		sims[i].idx = i;
		sims[i].worker_id = b->worker_ids[i / g];
		snprintf(sims[i].gpu_uuid, sizeof(sims[i].gpu_uuid), "GPU-%s-%d-%d", prefix, i / g, i % g);
	}
	return sims;
}

/* 2. cycle: W workers each lease + 3 heartbeats + finish(success), back to back. */
static int scenario_cycle(struct bench *b)
{
	int ws[8], nw = parse_list(b->o->list ? b->o->list : "1,16,256", ws, 8), c, run, i;
	/* enough that a first run at ~2,500 attempts/s does not drain the queue (a drained run is cut short) */
	long long want0 = (long long)(2500 * b->o->seconds), want, queued = 0;

	for (c = 0; c < nw; c++) {
		char prefix[32];

		snprintf(prefix, sizeof(prefix), "bench-cycle%d", ws[c]);
		want = want0; /* grows to 1.3 x what a run consumed, so later runs never run dry */
		if (!register_workers(b, prefix, ws[c], 1))
			return 1;
		for (run = 1; run <= b->o->runs; run++) {
			struct sim *sims = make_sims(b, MODE_CYCLE, prefix, ws[c], 1);
			char setting[32];
			json_t *m;
			double secs;

			if (!prefill(b, want - queued, 600))
				return 1;
			queued = want;
			reset_counts(b);
			b->remaining = queued;
			hook_begin(b);
			run_workers(b, sims, ws[c]);
			queued = b->remaining;
			secs = (double)(b->t_end - b->t_start) / 1e6;
			if (secs > 0 && (long long)((double)b->attempts / secs * b->o->seconds * 1.3) > want)
				want = (long long)((double)b->attempts / secs * b->o->seconds * 1.3);
			snprintf(setting, sizeof(setting), "W=%d", ws[c]);
			m = json_object();
			put_num(m, "attempts_per_s", secs > 0 ? (double)b->attempts / secs : NAN);
			put_num(m, "lease_p50_ms", lat_pct(&b->lat_lease, 50));
			put_num(m, "lease_p99_ms", lat_pct(&b->lat_lease, 99));
			put_num(m, "heartbeat_p50_ms", lat_pct(&b->lat_hb, 50));
			put_num(m, "heartbeat_p99_ms", lat_pct(&b->lat_hb, 99));
			put_num(m, "finish_p50_ms", lat_pct(&b->lat_finish, 50));
			put_num(m, "finish_p99_ms", lat_pct(&b->lat_finish, 99));
			json_object_set_new(m, "attempts", json_integer(b->attempts));
			json_object_set_new(m, "drained", json_boolean(queued == 0));
			json_object_set_new(m, "errors", json_integer(b->errors));
			hook_end(b, b->attempts, m);
			emit("cycle", setting, run, m);
			for (i = 0; i < ws[c]; i++)
				sim_release(&sims[i]);
			free(sims);
		}
	}
	return 0;
}

/* 4. recovery: every job OOMs (early, train phase) on attempts 1 and 2, then succeeds. */
static int scenario_recovery(struct bench *b)
{
	int w = b->o->workers, run, i;
	long long jobs = (long long)(300 * b->o->seconds);

	if (!register_workers(b, "bench-recovery", w, 1))
		return 1;
	for (run = 1; run <= b->o->runs; run++) {
		struct sim *sims = make_sims(b, MODE_RECOVERY, "bench-recovery", w, 1);
		char setting[32];
		json_t *m;
		double secs;

		if (!prefill(b, jobs, 600))
			return 1;
		reset_counts(b);
		json_decref(b->classes);
		b->classes = json_object();
		b->remaining = jobs;
		hook_begin(b);
		run_workers(b, sims, w);
		secs = (double)(b->t_end - b->t_start) / 1e6;
		snprintf(setting, sizeof(setting), "W=%d", w);
		m = json_object();
		put_num(m, "decisions_per_s", secs > 0 ? (double)b->decisions / secs : NAN);
		put_num(m, "jobs_per_s", secs > 0 ? (double)b->jobs_done / secs : NAN);
		put_num(m, "finish_p50_ms", lat_pct(&b->lat_finish, 50));
		put_num(m, "finish_p99_ms", lat_pct(&b->lat_finish, 99));
		json_object_set_new(m, "decisions", json_integer(b->decisions));
		json_object_set_new(m, "jobs_ended", json_integer(b->jobs_done));
		json_object_set_new(m, "classes", json_incref(b->classes));
		json_object_set_new(m, "errors", json_integer(b->errors));
		hook_end(b, b->decisions, m);
		emit("recovery", setting, run, m);
		/* jobs left mid-ladder stay queued; the next run brings its own */
		for (i = 0; i < w; i++)
			sim_release(&sims[i]);
		free(sims);
	}
	return 0;
}

/* ---- fleet ---- */

static long long proc_rss_kb(int pid)
{
	char path[64], line[256];
	long long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			kb = atoll(line + 6);
	fclose(f);
	return kb;
}

/* utime + stime of PID in seconds, -1 when unreadable. */
static double proc_cpu_s(int pid)
{
	char path[64], buf[2048], *p;
	unsigned long long ut = 0, st = 0;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	/* after ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15) */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void on_probe_timer(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;
	struct timeval tv = { b->o->probe_interval_ms / 1000, (b->o->probe_interval_ms % 1000) * 1000 };

	(void)fd;
	(void)what;
	if (!b->window)
		return;
	if (b->probe->state == SIM_IDLE) {
		b->probes++;
		sim_post(b->probe, SIM_SUBMIT, "/v1/jobs", b->submit_body, b->submit_len);
	}
	evtimer_add(b->probe_timer, &tv);
}

static void on_sample_timer(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;
	struct timeval tv = { 1, 0 };
	long long kb = proc_rss_kb(b->o->rungd_pid);

	(void)fd;
	(void)what;
	if (kb > b->rss_max_kb)
		b->rss_max_kb = kb;
	if (b->window)
		evtimer_add(b->sample_timer, &tv);
}

static void on_ramp_check(evutil_socket_t fd, short what, void *arg)
{
	struct bench *b = arg;

	(void)fd;
	(void)what;
	if (b->holding >= b->hold_target)
		loop_done(b);
}

static void on_window_end(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	loop_done(arg);
}

/* 3. fleet: N GPUs parked on long-polls, a share of them holding leases and heartbeating. */
static int scenario_fleet(struct bench *b)
{
	int g = b->o->gpus_per_worker, nw = (b->o->fleet + g - 1) / g, n = nw * g, run, i;
	struct sim probe;

	if (!register_workers(b, "bench-fleet", nw, g))
		return 1;
	for (run = 1; run <= b->o->runs; run++) {
		struct sim *sims = make_sims(b, MODE_FLEET, "bench-fleet", nw, g);
		long long busy = (long long)(b->o->busy * n), wakes = 0;
		struct event *check = event_new(b->base, -1, EV_PERSIST, on_ramp_check, b);
		struct event *wend = evtimer_new(b->base, on_window_end, b);
		struct timeval tv50 = { 0, 50000 }, tvw = { (time_t)b->o->seconds, 0 }, tv1 = { 1, 0 };
		struct lat wake = { 0 };
		double cpu0, cpu1, secs;
		long long setup_errors;
		int64_t t0, tsetup = now_us();
		json_t *m;
		size_t k;

		reset_counts(b);
		memset(b->wakes, 0, sizeof(*b->wakes) << WAKE_TABLE_BITS);
		b->window = false;
		/* park every GPU, a few hundred connections at a time */
		for (i = 0; i < n; i++) {
			sim_lease(&sims[i], 60000);
			if (i % 250 == 249) {
				struct timeval tv = { 0, 100000 };
				event_base_loopexit(b->base, &tv);
				event_base_dispatch(b->base);
			}
		}
		/* give the last long-polls time to reach rungd, then hand out the busy share */
		{
			struct timeval tv = { 1, 0 };
			event_base_loopexit(b->base, &tv);
			event_base_dispatch(b->base);
		}
		b->hold_target = busy;
		if (!prefill(b, busy, 60))
			fprintf(stderr, "rung-bench: fleet: continuing with the jobs that were accepted\n");
		evtimer_add(check, &tv50);
		if (busy > 0 && !phase_run(b, 60))
			fprintf(stderr, "rung-bench: fleet: only %lld of %lld GPUs got a lease\n", b->holding, busy);
		event_del(check);

		/* the measured window */
		memset(&probe, 0, sizeof(probe));
		probe.b = b;
		probe.mode = MODE_PROBE;
		probe.idx = -1;
		b->probe = &probe;
		b->probe_timer = evtimer_new(b->base, on_probe_timer, b);
		b->sample_timer = evtimer_new(b->base, on_sample_timer, b);
		b->rss_max_kb = proc_rss_kb(b->o->rungd_pid);
		lat_reset(&b->lat_hb);
		setup_errors = b->errors;
		b->errors = 0;
		b->window = true;
		cpu0 = proc_cpu_s(b->o->rungd_pid);
		t0 = now_us();
		evtimer_add(b->probe_timer, &tv50);
		evtimer_add(b->sample_timer, &tv1);
		evtimer_add(wend, &tvw);
		phase_run(b, b->o->seconds + 30);
		cpu1 = proc_cpu_s(b->o->rungd_pid);
		secs = (double)(now_us() - t0) / 1e6;
		b->window = false;
		on_sample_timer(-1, 0, b);
		for (k = 0; k < ((size_t)1 << WAKE_TABLE_BITS); k++) {
			struct wake *w = &b->wakes[k];
			if (w->job_id && w->t201 && w->tlease) {
				lat_add(&wake, w->tlease > w->t201 ? (double)(w->tlease - w->t201) / 1000.0 : 0.0);
				wakes++;
			}
		}
		m = json_object();
		json_object_set_new(m, "gpus", json_integer(n));
		json_object_set_new(m, "workers", json_integer(nw));
		json_object_set_new(m, "leased", json_integer(b->holding));
		put_num(m, "rss_mb", (double)proc_rss_kb(b->o->rungd_pid) / 1024.0);
		put_num(m, "rss_max_mb", (double)b->rss_max_kb / 1024.0);
		put_num(m, "cpu_pct", cpu0 >= 0 && cpu1 >= 0 ? 100.0 * (cpu1 - cpu0) / secs : NAN);
		put_num(m, "heartbeat_p50_ms", lat_pct(&b->lat_hb, 50));
		put_num(m, "heartbeat_p99_ms", lat_pct(&b->lat_hb, 99));
		json_object_set_new(m, "heartbeats", json_integer((json_int_t)b->lat_hb.n));
		put_num(m, "wake_p50_ms", lat_pct(&wake, 50));
		put_num(m, "wake_p99_ms", lat_pct(&wake, 99));
		json_object_set_new(m, "wakes", json_integer(wakes));
		json_object_set_new(m, "probes", json_integer(b->probes));
		json_object_set_new(m, "lease_before_201", json_integer(b->lease_before_201));
		json_object_set_new(m, "errors", json_integer(b->errors));
		json_object_set_new(m, "setup_errors", json_integer(setup_errors));
		json_object_set_new(m, "setup_s", json_real(round((double)(t0 - tsetup) / 1e5) / 10.0));
		lat_release(&wake);

		/* clean up: finish every held attempt; parked long-polls are dropped with their connections */
		for (i = 0; i < n; i++) {
			sims[i].stop = true;
			if (sims[i].state == SIM_HOLD) {
				evtimer_del(sims[i].timer);
				sim_finish(&sims[i], false);
			}
		}
		if (b->holding > 0 && !phase_run(b, 60))
			fprintf(stderr, "rung-bench: fleet cleanup: %lld attempts still held\n", b->holding);
		{
			char setting[32];
			snprintf(setting, sizeof(setting), "N=%d", n);
			emit("fleet", setting, run, m);
		}
		event_free(b->probe_timer);
		event_free(b->sample_timer);
		event_free(check);
		event_free(wend);
		sim_release(&probe);
		b->probe = NULL;
		for (i = 0; i < n; i++)
			sim_release(&sims[i]);
		free(sims);
	}
	return 0;
}

/* ---- report: tables and bench/results/<scenario>.json ---- */

struct target {
	const char *scenario, *system, *setting, *metric; /* setting NULL: every setting */
	char op;                                          /* '>' at least, '<' below */
	double value;
};

static const struct target targets[] = {
	{ "submit", "rung", "S=16", "p99_ms", '<', 50 },
	{ "fleet", "rung", NULL, "rss_mb", '<', 200 },
	{ "fleet", "rung", NULL, "heartbeat_p99_ms", '<', 100 },
	{ "fleet", "rung", NULL, "wake_p50_ms", '<', 5 },
};

/* The side-by-side table: each system's rate in a scenario, and rung's rate as a ratio of it (issue 13: the
 * machine's speed drifts between runs, so the targets are ratios within one invocation). */
struct headline {
	const char *scenario, *system, *metric;
};

static const struct headline headlines[] = {
	{ "submit", "rung", "jobs_per_s" },       { "submit", "pgbench", "tx_per_s" },
	{ "submit", "graphile", "jobs_per_s" },   { "submit", "pg-boss", "jobs_per_s" },
	{ "cycle", "rung", "attempts_per_s" },    { "cycle", "pgbench", "jobs_per_s" },
	{ "cycle", "graphile", "jobs_per_s" },    { "cycle", "pg-boss", "jobs_per_s" },
	{ "recovery", "rung", "decisions_per_s" },
};

struct ratio_target {
	const char *scenario, *rung_setting; /* rung's reference row (the last rung setting when absent) */
	const char *system, *setting;        /* setting NULL: the best of the system's rows starting with "one " */
	double value;                        /* rung / it at least this */
};

static const struct ratio_target ratio_targets[] = {
	{ "submit", "S=16", "pgbench", "c=16", 0.9 },
	{ "submit", "S=16", "graphile", NULL, 3.0 },
	{ "submit", "S=16", "pg-boss", NULL, 3.0 },
	{ "cycle", "W=256", "pgbench", "c=16", 0.9 },
	{ "cycle", "W=256", "graphile", "one c=16", 1.5 },
};

/* Writes per unit (bench/writes.sh through --hook), shown for rung under the side-by-side table. */
static const char *const write_metrics[] = { "rows_inserted", "rows_updated", "hot_pct", "index_entries",
					     "row_locks", "rows_deleted", "commits", "wal_kb" };

static const struct target *target_for(const char *sc, const char *sys, const char *set, const char *metric)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(targets); i++) {
		const struct target *t = &targets[i];
		if (strcmp(t->scenario, sc) == 0 && strcmp(t->system, sys) == 0 && strcmp(t->metric, metric) == 0 &&
		    (!t->setting || strcmp(t->setting, set) == 0))
			return t;
	}
	return NULL;
}

static void fmt_num(char *buf, size_t n, double v)
{
	if (isnan(v))
		snprintf(buf, n, "-");
	else if (fabs(v) >= 100 || v == floor(v))
		snprintf(buf, n, "%.0f", v);
	else
		snprintf(buf, n, "%.2f", v);
}

static bool is_write_metric(const char *m)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(write_metrics); i++)
		if (strcmp(write_metrics[i], m) == 0)
			return true;
	return false;
}

/* The median of SYSTEM/SETTING/METRIC in the summary (NAN when absent). */
static double summary_median(json_t *summary, const char *sys, const char *set, const char *metric)
{
	size_t i;
	json_t *r;

	json_array_foreach(summary, i, r) {
		if (strcmp(json_string_value(json_object_get(r, "system")), sys) == 0 &&
		    strcmp(json_string_value(json_object_get(r, "setting")), set) == 0 &&
		    strcmp(json_string_value(json_object_get(r, "metric")), metric) == 0)
			return json_number_value(json_object_get(r, "median"));
	}
	return NAN;
}

static const char *headline_metric(const char *sc, const char *sys)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(headlines); i++)
		if (strcmp(headlines[i].scenario, sc) == 0 && strcmp(headlines[i].system, sys) == 0)
			return headlines[i].metric;
	return NULL;
}

/* One row per (system, setting) with a headline rate, in first-seen order, plus rung's ratio to each; the
 * ratio targets are checked here. Returns the side-by-side rows (also kept in the results file). */
static json_t *side_by_side(const char *sc, json_t *summary)
{
	json_t *rows = json_array(), *r, *row;
	const char *ref_set = NULL, *best_peer = NULL;
	double ref = NAN, bref = NAN, best = -1;
	size_t i, k;

	json_array_foreach(summary, i, r) {
		const char *sys = json_string_value(json_object_get(r, "system"));
		const char *set = json_string_value(json_object_get(r, "setting"));
		const char *hm = headline_metric(sc, sys);
		bool dup = false;

		if (!hm || strcmp(hm, json_string_value(json_object_get(r, "metric"))) != 0)
			continue;
		json_array_foreach(rows, k, row)
			dup |= strcmp(json_string_value(json_object_get(row, "system")), sys) == 0 &&
			       strcmp(json_string_value(json_object_get(row, "setting")), set) == 0;
		if (dup)
			continue;
		row = json_pack("{s:s, s:s, s:s}", "system", sys, "setting", set, "metric", hm);
		put_num(row, "per_s", json_number_value(json_object_get(r, "median")));
		put_num(row, "p99_ms", summary_median(summary, sys, set, strcmp(sys, "rung") == 0 && strcmp(sc, "cycle") == 0
										 ? "finish_p99_ms" : "p99_ms"));
		/* CPU per unit, all processes (bench/cpu.sh; pgbench and the peers: Postgres and their client) */
		put_num(row, "cpu_ms", summary_median(summary, sys, set, "cpu_total_ms"));
		json_array_append_new(rows, row);
	}
	/* rung's reference row: the one the targets name, else its last setting; a peer's batched row
	 * ("batch c=16") is set beside rung's batched one ("batch S=16", POST /v1/jobs/batch) when there is one */
	for (i = 0; i < ARRAY_LEN(ratio_targets); i++)
		if (strcmp(ratio_targets[i].scenario, sc) == 0 && strncmp(ratio_targets[i].rung_setting, "batch ", 6) != 0)
			ref_set = ratio_targets[i].rung_setting;
	json_array_foreach(rows, i, row) {
		if (strcmp(json_string_value(json_object_get(row, "system")), "rung") != 0)
			continue;
		if (strncmp(json_string_value(json_object_get(row, "setting")), "batch ", 6) == 0)
			continue;
		if (!ref_set || isnan(ref) || strcmp(json_string_value(json_object_get(row, "setting")), ref_set) == 0) {
			bool named = ref_set && strcmp(json_string_value(json_object_get(row, "setting")), ref_set) == 0;
			ref = json_number_value(json_object_get(row, "per_s"));
			if (named)
				break;
		}
	}
	json_array_foreach(rows, i, row) /* rung's batched row, for the peers' batched rows */
		if (strcmp(json_string_value(json_object_get(row, "system")), "rung") == 0 && isnan(bref) &&
		    strncmp(json_string_value(json_object_get(row, "setting")), "batch ", 6) == 0)
			bref = json_number_value(json_object_get(row, "per_s"));
	json_array_foreach(rows, i, row) { /* the best one-at-a-time peer */
		const char *sys = json_string_value(json_object_get(row, "system"));
		const char *set = json_string_value(json_object_get(row, "setting"));
		double v = json_number_value(json_object_get(row, "per_s"));
		if ((strcmp(sys, "graphile") == 0 || strcmp(sys, "pg-boss") == 0) && strncmp(set, "one ", 4) == 0 && v > best) {
			best = v;
			best_peer = sys;
		}
	}
	json_array_foreach(rows, i, row) {
		const char *sys = json_string_value(json_object_get(row, "system"));
		const char *set = json_string_value(json_object_get(row, "setting"));
		double v = json_number_value(json_object_get(row, "per_s"));
		double rr = strncmp(set, "batch ", 6) == 0 && !isnan(bref) ? bref : ref; /* like for like */

		if (strcmp(sys, "rung") == 0)
			continue;
		put_num(row, "rung_ratio", v > 0 ? rr / v : NAN);
		for (k = 0; k < ARRAY_LEN(ratio_targets); k++) {
			const struct ratio_target *t = &ratio_targets[k];
			bool hit = strcmp(t->scenario, sc) == 0 && strcmp(t->system, sys) == 0 &&
				   (t->setting ? strcmp(t->setting, set) == 0
					       : best_peer && strcmp(best_peer, sys) == 0 && strncmp(set, "one ", 4) == 0 &&
							 v == best);
			if (hit && v > 0 && !isnan(rr)) {
				char tgt[64];
				bool met = rr / v >= t->value;
				snprintf(tgt, sizeof(tgt), "rung >= %gx %s", t->value, met ? "✓" : "✗");
				json_object_set_new(row, "target", json_string(tgt));
				json_object_set_new(row, "met", json_boolean(met));
			}
		}
	}
	return rows;
}

static void print_side_by_side(const char *sc, json_t *rows, json_t *summary)
{
	json_t *row;
	size_t i, k;
	bool any_rung_writes = false;

	if (json_array_size(rows) == 0)
		return;
	printf("\n-- %s: side by side (medians; CPU ms = CPU of every process per unit; rung/it = rung's reference row over that row, same invocation) --\n", sc);
	printf("%-9s %-12s %10s %9s %7s %9s   %s\n", "system", "setting", "per s", "p99 ms", "CPU ms", "rung/it", "target");
	json_array_foreach(rows, i, row) {
		char a[32], b1[32], c[32], cpu[32];
		json_t *t = json_object_get(row, "target");
		json_t *cm = json_object_get(row, "cpu_ms");
		if (json_is_number(cm))
			snprintf(cpu, sizeof(cpu), "%.2f", json_number_value(cm));
		else
			snprintf(cpu, sizeof(cpu), "-");
		fmt_num(a, sizeof(a), json_number_value(json_object_get(row, "per_s")));
		fmt_num(b1, sizeof(b1), json_is_number(json_object_get(row, "p99_ms"))
					       ? json_number_value(json_object_get(row, "p99_ms")) : NAN);
		if (json_is_number(json_object_get(row, "rung_ratio")))
			snprintf(c, sizeof(c), "%.2fx", json_number_value(json_object_get(row, "rung_ratio")));
		else
			snprintf(c, sizeof(c), "-");
		printf("%-9s %-12s %10s %9s %7s %9s   %s\n", json_string_value(json_object_get(row, "system")),
		       json_string_value(json_object_get(row, "setting")), a, b1, cpu, c, t ? json_string_value(t) : "");
	}
	json_array_foreach(rows, i, row)
		any_rung_writes |= strcmp(json_string_value(json_object_get(row, "system")), "rung") == 0 &&
				   !isnan(summary_median(summary, "rung", json_string_value(json_object_get(row, "setting")),
							 "index_entries"));
	if (!any_rung_writes)
		return;
	printf("\n-- %s: what Postgres wrote per %s (WAL records of the window, bench/writes.sh; medians) --\n", sc,
	       strcmp(sc, "submit") == 0 ? "job" : strcmp(sc, "recovery") == 0 ? "decision" : "attempt");
	printf("%-8s", "setting");
	for (k = 0; k < ARRAY_LEN(write_metrics); k++)
		printf(" %13s", write_metrics[k]);
	printf("\n");
	json_array_foreach(rows, i, row) {
		const char *set = json_string_value(json_object_get(row, "setting"));
		if (strcmp(json_string_value(json_object_get(row, "system")), "rung") != 0)
			continue;
		printf("%-8s", set);
		for (k = 0; k < ARRAY_LEN(write_metrics); k++) {
			double v = summary_median(summary, "rung", set, write_metrics[k]);
			char a[32];
			if (isnan(v))
				snprintf(a, sizeof(a), "-");
			else
				snprintf(a, sizeof(a), "%.2f", v);
			printf(" %13s", a);
		}
		printf("\n");
	}
}

static int report(struct opts *o)
{
	FILE *f = fopen(o->raw_path, "r");
	json_t *runs = json_array(), *summary = json_array(), *doc, *machine = NULL, *line, *side = NULL;
	char buf[65536];
	size_t i, j;
	int rc = 1;

	if (!f) {
		fprintf(stderr, "rung-bench report: %s: %s\n", o->raw_path, strerror(errno));
		goto out;
	}
	while (fgets(buf, sizeof(buf), f)) {
		json_t *l = json_loads(buf, 0, NULL);
		if (l && json_is_string(json_object_get(l, "scenario")) &&
		    strcmp(json_string_value(json_object_get(l, "scenario")), o->scenario) == 0)
			json_array_append(runs, l);
		json_decref(l);
	}
	fclose(f);
	if (o->machine_path)
		machine = json_load_file(o->machine_path, 0, NULL);

	/* one summary row per (system, setting, metric), in first-seen order */
	json_array_foreach(runs, i, line) {
		const char *sys = json_string_value(json_object_get(line, "system"));
		const char *set = json_string_value(json_object_get(line, "setting"));
		const char *key;
		json_t *val;
		json_object_foreach(json_object_get(line, "metrics"), key, val) {
			json_t *row = NULL, *r;
			size_t k;
			if (!json_is_number(val))
				continue;
			json_array_foreach(summary, k, r) {
				if (strcmp(json_string_value(json_object_get(r, "system")), sys) == 0 &&
				    strcmp(json_string_value(json_object_get(r, "setting")), set) == 0 &&
				    strcmp(json_string_value(json_object_get(r, "metric")), key) == 0) {
					row = r;
					break;
				}
			}
			if (!row) {
				row = json_pack("{s:s, s:s, s:s, s:[]}", "system", sys, "setting", set, "metric", key,
						"values");
				json_array_append_new(summary, row);
			}
			json_array_append_new(json_object_get(row, "values"), json_real(json_number_value(val)));
		}
	}
	printf("\n== %s ==  (median of %s; min..max)\n", o->scenario, o->quick ? "1 quick run" : "the runs");
	printf("%-8s %-8s %-18s %10s %23s   %s\n", "system", "setting", "metric", "median", "min..max", "target");
	json_array_foreach(summary, i, line) {
		json_t *vals = json_object_get(line, "values");
		size_t n = json_array_size(vals);
		double *v = xcalloc(n ? n : 1, sizeof(double)), med, lo, hi;
		const char *sys = json_string_value(json_object_get(line, "system"));
		const char *set = json_string_value(json_object_get(line, "setting"));
		const char *metric = json_string_value(json_object_get(line, "metric"));
		const struct target *t = target_for(o->scenario, sys, set, metric);
		char a[32], b1[32], c[32], range[72], tgt[64] = "";

		for (j = 0; j < n; j++)
			v[j] = json_real_value(json_array_get(vals, j));
		qsort(v, n, sizeof(double), cmp_double);
		med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
		lo = v[0];
		hi = v[n - 1];
		free(v);
		put_num(line, "median", med);
		put_num(line, "min", lo);
		put_num(line, "max", hi);
		json_object_set_new(line, "runs", json_integer((json_int_t)n));
		if (t) {
			bool met = t->op == '>' ? med >= t->value : med < t->value;
			snprintf(tgt, sizeof(tgt), "%s %g %s", t->op == '>' ? ">=" : "<", t->value, met ? "✓" : "✗");
			json_object_set_new(line, "target", json_string(tgt));
			json_object_set_new(line, "met", json_boolean(met));
		}
		if (is_write_metric(metric))
			continue; /* shown in the writes table */
		fmt_num(a, sizeof(a), med);
		fmt_num(b1, sizeof(b1), lo);
		fmt_num(c, sizeof(c), hi);
		snprintf(range, sizeof(range), "%s..%s", b1, c);
		printf("%-8s %-8s %-18s %10s %23s   %s\n", sys, set, metric, a, range, tgt);
	}
	side = side_by_side(o->scenario, summary);
	print_side_by_side(o->scenario, side, summary);
	doc = json_pack("{s:s, s:s, s:b, s:o, s:O, s:O, s:O}", "scenario", o->scenario, "git_rev",
			o->rev ? o->rev : "unknown", "quick", o->quick, "machine", machine ? machine : json_object(),
			"summary", summary, "side_by_side", side, "runs", runs);
	machine = NULL;
	if (o->out_path && json_dump_file(doc, o->out_path, JSON_INDENT(1) | JSON_PRESERVE_ORDER) != 0) {
		fprintf(stderr, "rung-bench report: cannot write %s\n", o->out_path);
		json_decref(doc);
		goto out;
	}
	json_decref(doc);
	rc = 0;
out:
	json_decref(side);
	json_decref(machine);
	json_decref(summary);
	json_decref(runs);
	return rc;
}

/* ---- main ---- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rung-bench submit|cycle|fleet|recovery --url http://127.0.0.1:PORT [options]\n"
		"       rung-bench report --raw FILE --scenario NAME [--out FILE] [--machine FILE] [--rev REV] [--quick]\n"
		"  --runs N             runs per setting (3)\n"
		"  --seconds S          window per run (10)\n"
		"  --list A,B,..        submit: concurrent submitters (16,64); cycle: workers (1,16,256)\n"
		"  --batch N            submit: N jobs per call, POST /v1/jobs/batch (1: POST /v1/jobs)\n"
		"  --config FILE        the AI Toolkit config submitted (bench/flux_lora_3k.json)\n"
		"  --fleet N            fleet: simulated GPUs (10000)\n"
		"  --gpus-per-worker G  fleet: GPUs per registered worker (8)\n"
		"  --busy F             fleet: share of GPUs holding a lease (0.5)\n"
		"  --hb-interval-ms MS  fleet: heartbeat period (10000)\n"
		"  --probe-interval-ms  fleet: time between wake probes (100)\n"
		"  --rungd-pid PID      fleet: rungd's pid for RSS and CPU\n"
		"  --workers W          recovery: workers (16)\n"
		"  --hook CMD           run \"CMD begin\" before each timed window, \"CMD end UNITS\" after it;\n"
		"                       the JSON object it prints joins the run's metrics (bench/hooks.sh)\n"
		"RUNG_BENCH_TOKEN in the environment: the bearer token sent on every call (an admin token)\n");
}

static int parse_url(struct opts *o, const char *url)
{
	char host[64];
	int port;

	if (sscanf(url, "http://%63[^:/]:%d", host, &port) != 2 || port <= 0 || port > 65535) {
		fprintf(stderr, "rung-bench: --url must be http://HOST:PORT (got %s)\n", url);
		return -1;
	}
	if (strcmp(host, "127.0.0.1") != 0 && strcmp(host, "localhost") != 0) {
		fprintf(stderr, "rung-bench: refusing to load anything but 127.0.0.1\n");
		return -1;
	}
	o->host = xstrdup("127.0.0.1");
	o->port = port;
	snprintf(o->hostport, sizeof(o->hostport), "127.0.0.1:%d", port);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "url", required_argument, NULL, 'u' },
		{ "runs", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ "list", required_argument, NULL, 'l' },
		{ "batch", required_argument, NULL, 'B' },
		{ "config", required_argument, NULL, 'c' },
		{ "fleet", required_argument, NULL, 'f' },
		{ "gpus-per-worker", required_argument, NULL, 'g' },
		{ "busy", required_argument, NULL, 'b' },
		{ "hb-interval-ms", required_argument, NULL, 'H' },
		{ "probe-interval-ms", required_argument, NULL, 'P' },
		{ "rungd-pid", required_argument, NULL, 'p' },
		{ "workers", required_argument, NULL, 'w' },
		{ "raw", required_argument, NULL, 'R' },
		{ "scenario", required_argument, NULL, 'S' },
		{ "out", required_argument, NULL, 'o' },
		{ "machine", required_argument, NULL, 'm' },
		{ "rev", required_argument, NULL, 'v' },
		{ "quick", no_argument, NULL, 'q' },
		{ "hook", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .runs = 3, .seconds = 10, .fleet = 10000, .gpus_per_worker = 8, .busy = 0.5,
			  .hb_interval_ms = 10000, .probe_interval_ms = 100, .workers = 16,
			  .config_path = "bench/flux_lora_3k.json" };
	struct bench b;
	const char *cmd;
	int c, rc = 1;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	cmd = argv[1];
	argv[1] = argv[0];
	argv++;
	argc--;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'u': if (parse_url(&o, optarg)) return 2; break;
		case 'r': o.runs = atoi(optarg); break;
		case 's': o.seconds = atof(optarg); break;
		case 'l': o.list = optarg; break;
		case 'B': o.batch = atoi(optarg); break;
		case 'c': o.config_path = optarg; break;
		case 'f': o.fleet = atoi(optarg); break;
		case 'g': o.gpus_per_worker = atoi(optarg); break;
		case 'b': o.busy = atof(optarg); break;
		case 'H': o.hb_interval_ms = atoi(optarg); break;
		case 'P': o.probe_interval_ms = atoi(optarg); break;
		case 'p': o.rungd_pid = atoi(optarg); break;
		case 'w': o.workers = atoi(optarg); break;
		case 'R': o.raw_path = optarg; break;
		case 'S': o.scenario = optarg; break;
		case 'o': o.out_path = optarg; break;
		case 'm': o.machine_path = optarg; break;
		case 'v': o.rev = optarg; break;
		case 'q': o.quick = true; break;
		case 'k': o.hook = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (strcmp(cmd, "report") == 0) {
		if (!o.raw_path || !o.scenario) {
			usage(stderr);
			return 2;
		}
		return report(&o);
	}
	if (!o.host || o.runs < 1 || o.runs > 100 || o.seconds <= 0 || o.seconds > 3600 || o.fleet < 1 ||
	    o.fleet > 100000 || o.gpus_per_worker < 1 || o.busy < 0 || o.busy > 1 || o.hb_interval_ms < 10 ||
	    o.probe_interval_ms < 1 || o.workers < 1 || o.workers > 10000) {
		usage(stderr);
		return 2;
	}
	if (getenv("RUNG_BENCH_TOKEN") && *getenv("RUNG_BENCH_TOKEN"))
		o.auth = xasprintf("Bearer %s", getenv("RUNG_BENCH_TOKEN"));
	if (o.hook) { /* the hook's bench/cpu.sh counts this process as the load generator */
		char pid[24];
		snprintf(pid, sizeof(pid), "%ld", (long)getpid());
		setenv("RUNG_BENCH_PID", pid, 1);
	}
	memset(&b, 0, sizeof(b));
	b.o = &o;
	{
		/* epoll changes batched per loop iteration, as rungd does (server/main.c); no dup()ed fds */
		struct event_config *cfg = event_config_new();

		if (cfg)
			event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
		b.base = cfg ? event_base_new_with_config(cfg) : event_base_new();
		if (cfg)
			event_config_free(cfg);
	}
	b.submit_body = load_submit_body(o.config_path);
	b.submit_len = strlen(b.submit_body);
	if (o.batch > 1) {
		char *list = xstrdup("{\"jobs\":["), *next;
		for (int i = 0; i < o.batch; i++) {
			next = util_concat(list, i ? "," : "", b.submit_body, NULL);
			free(list);
			list = next;
		}
		b.batch_body = util_concat(list, "]}", NULL);
		b.batch_len = strlen(b.batch_body);
		free(list);
	}
	b.wakes = xcalloc((size_t)1 << WAKE_TABLE_BITS, sizeof(*b.wakes));
	b.classes = json_object();
	srandom(12345);
	if (strcmp(cmd, "submit") == 0)
		rc = scenario_submit(&b);
	else if (strcmp(cmd, "cycle") == 0)
		rc = scenario_cycle(&b);
	else if (strcmp(cmd, "recovery") == 0)
		rc = scenario_recovery(&b);
	else if (strcmp(cmd, "fleet") == 0) {
		if (o.rungd_pid <= 0) {
			fprintf(stderr, "rung-bench fleet: --rungd-pid is required\n");
			rc = 2;
		} else {
			rc = scenario_fleet(&b);
		}
	} else {
		usage(stderr);
		rc = 2;
	}
	json_decref(b.classes);
	free(b.wakes);
	free(b.worker_ids);
	free(b.submit_body);
	free(b.batch_body);
	lat_release(&b.lat_submit);
	lat_release(&b.lat_lease);
	lat_release(&b.lat_hb);
	lat_release(&b.lat_finish);
	event_base_free(b.base);
	free((char *)o.host);
	free(o.auth);
	return rc;
}
