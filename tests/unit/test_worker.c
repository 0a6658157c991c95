/* Unit tests for worker/worker (with gpu, runner, client, spool): the real worker core against a
 * tiny fake rungd (libevent evhttp on a real socket, in a thread), a fake nvidia-smi and fake
 * trainers written as shell scripts into a temp dir. Covers: spooled finish resent at start-up,
 * registration, lease, heartbeats, FACTS of an OOM run, finish retried after a 500, cancel via
 * heartbeat, 409 on heartbeat (trainer killed, no finish), drain on stop. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../worker/gpu.h"
#include "../../worker/spool.h"
#include "pool.h"
#include "tap.h"
#include "util.h"
#include "../../worker/worker.h"

enum hb_mode { HB_OK, HB_CANCEL, HB_GONE };

static struct fake {
	pthread_mutex_t mu;
	int registers, leases_given, heartbeats, finish_calls, finish_fail_first;
	long long hb_mem;        /* memory_used_mib of the last heartbeat */
	enum hb_mode hb;
	json_t *finishes;        /* array of {"path", "body"} */
	json_t *registration;    /* the body of the last POST /v1/workers */
	const char *trainer_tag; /* config.tag of the next lease */
} fk = { .mu = PTHREAD_MUTEX_INITIALIZER };

static char dir[] = "/tmp/rung-test-worker-XXXXXX";

static void reply(struct evhttp_request *req, int code, json_t *body)
{
	struct evbuffer *b = evbuffer_new();
	if (body) {
		char *s = json_dumps(body, 0);
		evbuffer_add(b, s, strlen(s));
		free(s);
		json_decref(body);
	}
	evhttp_send_reply(req, code, "x", b);
	evbuffer_free(b);
}

static void handle(struct evhttp_request *req, void *arg)
{
	const char *uri = evhttp_request_get_uri(req);
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	char *text = xmalloc(n + 1);
	json_t *body;
	(void)arg;
	evbuffer_remove(in, text, n);
	text[n] = '\0';
	body = json_loads(text, 0, NULL);
	free(text);
	pthread_mutex_lock(&fk.mu);
	if (!strcmp(uri, "/v1/workers")) {
		fk.registers++;
		json_decref(fk.registration);
		fk.registration = json_incref(body);
		reply(req, 201, json_pack("{s:i, s:i, s:i}", "id", 7, "lease_seconds", 30, "heartbeat_ms", 100));
	} else if (!strcmp(uri, "/v1/workers/7/lease")) {
		if (fk.trainer_tag) {
			fk.leases_given++;
			reply(req, 200, json_pack("{s:i, s:i, s:i, s:s, s:{s:s, s:{s:s}}, s:i, s:i}", "attempt_id", 10 + fk.leases_given,
						  "job_id", 3, "number", 1, "token", "tok", "config", "tag", fk.trainer_tag,
						  "config", "name", "my_lora", "lease_seconds", 30, "heartbeat_ms", 100));
			fk.trainer_tag = NULL;
		} else {
			reply(req, 204, NULL);
		}
	} else if (strstr(uri, "/heartbeat")) {
		fk.heartbeats++;
		fk.hb_mem = json_integer_value(json_object_get(body, "memory_used_mib"));
		if (fk.hb == HB_GONE)
			reply(req, 409, json_pack("{s:s, s:s}", "error", "not_running", "message", "gone"));
		else
			reply(req, 200, json_pack("{s:b, s:i}", "cancel", fk.hb == HB_CANCEL, "lease_seconds", 30));
	} else if (strstr(uri, "/finish")) {
		fk.finish_calls++;
		if (fk.finish_fail_first) {
			fk.finish_fail_first--;
			reply(req, 500, json_pack("{s:s}", "error", "internal"));
		} else {
			json_array_append_new(fk.finishes, json_pack("{s:s, s:O}", "path", uri, "body", body ? body : json_null()));
			reply(req, 200, json_pack("{s:s}", "job_state", "queued"));
		}
	} else {
		reply(req, 404, json_pack("{s:s}", "error", "not_found"));
	}
	pthread_mutex_unlock(&fk.mu);
	json_decref(body);
}

static atomic_int server_stop;

/* libevent is not built thread-aware here: the loop polls a flag from a timer to stop. */
static void server_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	if (atomic_load(&server_stop))
		event_base_loopbreak(arg);
}

static void *server_thread(void *arg)
{
	struct timeval tv = { 0, 20000 };
	struct event *tick = event_new(arg, -1, EV_PERSIST, server_tick, arg);
	event_add(tick, &tv);
	event_base_dispatch(arg);
	event_free(tick);
	return NULL;
}

static void *worker_thread(void *arg)
{
	worker_run(arg);
	return NULL;
}

static void write_script(const char *name, const char *body)
{
	char *p = xasprintf("%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	fputs(body, f);
	fclose(f);
	chmod(p, 0755);
	free(p);
}

/* Polls COND (re-evaluated under the fake's lock) until true or 10 s pass. */
#define WAIT_FOR(cond) do { int64_t end_ = util_mono_ms() + 10000; int ok_ = 0; \
	while (!ok_ && util_mono_ms() < end_) { pthread_mutex_lock(&fk.mu); ok_ = (cond); \
		pthread_mutex_unlock(&fk.mu); if (!ok_) usleep(10000); } } while (0)

static int spool_empty(const char *dir)
{
	char **ids = spool_list(dir);
	int empty = ids[0] == NULL;

	spool_list_free(ids);
	return empty;
}

static json_t *finish_facts(size_t i)
{
	return json_object_get(json_object_get(json_array_get(fk.finishes, i), "body"), "facts");
}

/* Each job gets its own output folder, so jobs sharing a config.name never resume each other. */
static void test_job_config(void)
{
	json_t *cfg = json_pack("{s:{s:[{s:s},{s:s},{}]}}", "config", "process", "training_folder", "output",
				"training_folder", "/mnt/shared/runs");
	json_t *out = worker_job_config(cfg, "/var/lib/rung-worker", "42");
	json_t *procs = json_object_get(json_object_get(out, "config"), "process");

	TAP_STR_EQ(json_string_value(json_object_get(json_array_get(procs, 0), "training_folder")),
		   "/var/lib/rung-worker/jobs/42/output", "job config: relative training_folder moves under the job's dir");
	TAP_STR_EQ(json_string_value(json_object_get(json_array_get(procs, 1), "training_folder")),
		   "/mnt/shared/runs", "job config: absolute training_folder kept");
	TAP_STR_EQ(json_string_value(json_object_get(json_array_get(procs, 2), "training_folder")),
		   "/var/lib/rung-worker/jobs/42/output", "job config: absent training_folder gets AI Toolkit's default under the job's dir");
	TAP_STR_EQ(json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(cfg, "config"),
		   "process"), 0), "training_folder")), "output", "job config: the lease's config is not modified");
	json_decref(out);
	json_decref(cfg);
}

int main(void)
{
	struct event_base *base;
	struct evhttp *http;
	struct evhttp_bound_socket *sock;
	struct sockaddr_in sa;
	socklen_t sl = sizeof sa;
	pthread_t st, wt;
	struct worker_opts o = { 0 };
	struct worker *w;
	char *url, *smi, *work, *cmd, *spool, *err = NULL;
	json_t *f;

	if (!mkdtemp(dir))
		return 1;
	fk.finishes = json_array();
	test_job_config();
	base = event_base_new();
	http = evhttp_new(base);
	evhttp_set_gencb(http, handle, NULL);
	sock = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
	getsockname(evhttp_bound_socket_get_fd(sock), (struct sockaddr *)&sa, &sl);
	url = xasprintf("http://127.0.0.1:%d", ntohs(sa.sin_port));
	pthread_create(&st, NULL, server_thread, base);

	write_script("nvidia-smi",
		"#!/bin/sh\ncase \"$1\" in\n"
		"--query-gpu*) u=$(cat \"$(dirname \"$0\")/used\" 2>/dev/null || echo 1200);"
		" echo \"0, GPU-aaa, NVIDIA GeForce RTX 4090, 24564, $u, 23364\" ;;\n"
		"--query-compute-apps*) echo 'GPU-aaa, 4242, 1100' ;;\nesac\n");
	write_script("trainer",
		"#!/bin/sh\n"
		"grep -q '\"oom\"' \"$1\" && { echo 'Running 1 job'; echo '# Running job: my_lora'; echo 'Loading transformer';\n"
		"  printf 'my_lora:   0%%|  | 0/100 [00:00<?]\\rmy_lora:   2%%|  | 2/100 [00:01<?]\\n';\n"
		"  echo \"gpu=$CUDA_VISIBLE_DEVICES attempt=$2\";\n"
		"  echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.99 GiB of which 0 bytes is free.' >&2; exit 1; }\n"
		"trap 'echo Job stopped; exit 0' INT\n"
		"grep -q '\"peak\"' \"$1\" && { echo 'Running 1 job'; echo '# Running job: my_lora';"
		" printf 'my_lora:   5%%|  | 5/100 [00:01<?]\\n'; sleep 0.3; echo 9000 > \"$(dirname \"$0\")/used\"; }\n"
		"while :; do sleep 0.05; done\n");
	smi = xasprintf("%s/nvidia-smi", dir);
	work = xasprintf("%s/work", dir);
	cmd = xasprintf("%s/trainer {config} {attempt}", dir);
	spool = xasprintf("%s/work/spool", dir);

	{
		struct gpu_info *g = NULL;
		size_t n = 0;
		TAP_INT_EQ(gpu_list(smi, &g, &n, &err), 0, "fake nvidia-smi parsed");
		TAP_OK(n == 1 && g[0].total_mib == 24564 && !strcmp(g[0].name, "NVIDIA GeForce RTX 4090"), "gpu fields");
		free(g);
	}

	/* a finish spooled by an earlier run */
	TAP_INT_EQ(spool_mkdir_p(spool, &err), 0, "spool dir");
	f = json_pack("{s:i, s:s, s:{s:i}}", "attempt_id", 5, "token", "old", "facts", "exit_code", 0);
	TAP_INT_EQ(spool_put(spool, "5", f, &err), 0, "old finish spooled");
	json_decref(f);

	o = (struct worker_opts){ .server = url, .name = "w1", .smi = smi, .trainer_cmd = cmd, .trainer_dir = dir,
				  .work_dir = work, .lease_wait_ms = 200, .cancel_grace_ms = 2000, .drain_timeout_ms = 10000 };
	{
		struct worker_opts bad = o;
		bad.smi = "/nonexistent/nvidia-smi";
		TAP_OK(worker_new(&bad, &err) == NULL && strstr(err, "GPU discovery failed"), "nvidia-smi failure: clear error");
		free(err);
		err = NULL;
		bad.smi = smi;
		bad.gpus = "5";
		TAP_OK(worker_new(&bad, &err) == NULL && strstr(err, "no GPU 5"), "--gpus names a missing GPU: error");
		free(err);
		err = NULL;
		bad.gpus = NULL;
		bad.pool = "GPU Pool";
		TAP_OK(worker_new(&bad, &err) == NULL && strstr(err, "--pool") && strstr(err, POOL_NAME_RULE),
		       "a pool that is not a pool name: error naming --pool and the rule");
		free(err);
		err = NULL;
		bad.pool = "h200";
		bad.borrow = "default,h200";
		TAP_OK(worker_new(&bad, &err) == NULL && strstr(err, "--borrow") && strstr(err, "own pool (h200)"),
		       "a borrow list naming its own pool: error naming --borrow");
		free(err);
		err = NULL;
	}
	w = worker_new(&o, &err);
	TAP_OK(w != NULL, "worker_new");
	pthread_mutex_lock(&fk.mu);
	fk.finish_fail_first = 1; /* the resend at start-up meets a 500 first */
	pthread_mutex_unlock(&fk.mu);
	pthread_create(&wt, NULL, worker_thread, w);

	WAIT_FOR(json_array_size(fk.finishes) >= 1 && fk.registers >= 1);
	pthread_mutex_lock(&fk.mu);
	TAP_STR_EQ(json_string_value(json_object_get(fk.registration, "pool")), "default",
		   "registration names the pool even without --pool: a restart without it goes back to default");
	TAP_STR_EQ(json_string_value(json_object_get(fk.registration, "name")), "w1", "registration names the worker");
	TAP_OK(json_is_array(json_object_get(fk.registration, "borrow")) &&
	       json_array_size(json_object_get(fk.registration, "borrow")) == 0,
	       "registration sends borrow [] without --borrow: a restart without it stops borrowing");
	TAP_STR_EQ(json_string_value(json_object_get(json_array_get(fk.finishes, 0), "path")), "/v1/attempts/5/finish",
		   "spooled finish resent first, after a 500 retry");
	TAP_INT_EQ(fk.finish_calls, 2, "resend retried once");
	fk.trainer_tag = "oom";
	fk.finish_fail_first = 1;
	pthread_mutex_unlock(&fk.mu);

	WAIT_FOR(json_array_size(fk.finishes) >= 2);
	pthread_mutex_lock(&fk.mu);
	f = finish_facts(1);
	TAP_STR_EQ(json_string_value(json_object_get(json_array_get(fk.finishes, 1), "path")), "/v1/attempts/11/finish",
		   "finish of the leased attempt");
	TAP_STR_EQ(json_string_value(json_object_get(json_object_get(json_array_get(fk.finishes, 1), "body"), "token")),
		   "tok", "finish carries the token");
	TAP_INT_EQ(json_integer_value(json_object_get(f, "exit_code")), 1, "facts: exit_code");
	TAP_OK(json_is_null(json_object_get(f, "signal")), "facts: signal null");
	TAP_STR_EQ(json_string_value(json_object_get(f, "oom_phase")), "train", "facts: oom_phase");
	TAP_INT_EQ(json_integer_value(json_object_get(f, "last_step")), 2, "facts: last_step");
	TAP_INT_EQ(json_integer_value(json_object_get(json_object_get(f, "oom"), "tried_to_allocate_mib")), 2048, "facts: oom numbers");
	TAP_INT_EQ(json_integer_value(json_object_get(json_array_get(json_object_get(json_object_get(f, "gpu_before"),
		   "processes"), 0), "pid")), 4242, "facts: gpu_before lists the foreign process");
	TAP_INT_EQ(json_integer_value(json_object_get(json_object_get(f, "gpu_after"), "memory_used_mib")), 1200, "facts: gpu_after");
	TAP_OK(json_is_false(json_object_get(f, "cancelled")), "facts: not cancelled");
	TAP_OK(json_is_integer(json_object_get(f, "duration_ms")), "facts: duration_ms");
	{
		json_t *tail = json_object_get(f, "log_tail");
		int seen = 0;
		for (size_t i = 0; i < json_array_size(tail); i++)
			seen |= !strcmp(json_string_value(json_array_get(tail, i)), "gpu=0 attempt=11");
		TAP_OK(seen, "trainer got CUDA_VISIBLE_DEVICES and {attempt}");
	}
	TAP_INT_EQ(fk.finish_calls, 4, "finish retried after a 500");
	pthread_mutex_unlock(&fk.mu);
	/* The fake server records the finish before the worker reads its 200 and removes the spool
	 * file: wait for the removal rather than racing it. */
	WAIT_FOR(spool_empty(spool));
	TAP_OK(spool_empty(spool), "spool empty once acknowledged");
	{
		char *cfg = xasprintf("%s/attempts/11/config.json", work);
		json_t *c = json_load_file(cfg, 0, NULL);
		TAP_STR_EQ(json_string_value(json_object_get(c, "tag")), "oom", "config written for the trainer");
		json_decref(c);
		free(cfg);
	}

	/* cancel through the heartbeat answer */
	pthread_mutex_lock(&fk.mu);
	fk.hb = HB_CANCEL;
	fk.trainer_tag = "loop";
	pthread_mutex_unlock(&fk.mu);
	WAIT_FOR(json_array_size(fk.finishes) >= 3);
	pthread_mutex_lock(&fk.mu);
	f = finish_facts(2);
	TAP_OK(json_is_true(json_object_get(f, "cancelled")), "cancel: facts.cancelled");
	TAP_INT_EQ(json_integer_value(json_object_get(json_object_get(f, "signatures"), "job_stopped")), 1,
		   "cancel: trainer got SIGINT");
	TAP_INT_EQ(json_integer_value(json_object_get(f, "exit_code")), 0, "cancel: exit 0");

	/* 409 on heartbeat: trainer stopped, no finish */
	fk.hb = HB_GONE;
	fk.trainer_tag = "loop";
	fk.heartbeats = 0;
	pthread_mutex_unlock(&fk.mu);
	WAIT_FOR(fk.heartbeats >= 1 && fk.leases_given == 3);
	/* the slot leases again once the attempt is dropped: give it a fourth, long-running one */
	pthread_mutex_lock(&fk.mu);
	fk.hb = HB_OK;
	fk.trainer_tag = "peak";
	pthread_mutex_unlock(&fk.mu);
	WAIT_FOR(fk.leases_given == 4);
	pthread_mutex_lock(&fk.mu);
	TAP_INT_EQ(json_array_size(fk.finishes), 3, "409 on heartbeat: attempt dropped without a finish");
	pthread_mutex_unlock(&fk.mu);

	/* drain: stop with a short deadline; the running trainer gets SIGINT and is reported */
	/* the trainer raised memory.used to 9000 while training: a heartbeat saw it, so the peak has it */
	WAIT_FOR(fk.heartbeats >= 2 && fk.hb_mem == 9000);
	worker_stop(w, 1);
	pthread_join(wt, NULL);
	pthread_mutex_lock(&fk.mu);
	TAP_INT_EQ(json_array_size(fk.finishes), 4, "drain: running attempt reported");
	f = finish_facts(3);
	TAP_OK(json_is_false(json_object_get(f, "cancelled")), "drain: cancelled false");
	TAP_INT_EQ(json_integer_value(json_object_get(json_object_get(f, "peak"), "mib")), 9000,
		   "facts.peak: the highest memory.used read while the trainer ran");
	TAP_STR_EQ(json_string_value(json_object_get(json_object_get(f, "peak"), "phase")), "train",
		   "facts.peak: the phase the scanner was in");
	TAP_INT_EQ(json_integer_value(json_object_get(json_object_get(f, "peak"), "step")), 5, "facts.peak: the step");
	pthread_mutex_unlock(&fk.mu);
	worker_free(w);

	/* a second worker of pool h200 registers with it */
	o.pool = "h200";
	o.borrow = "b, default";
	o.name = "w2";
	w = worker_new(&o, &err);
	TAP_OK(w != NULL, "worker_new with a pool");
	pthread_create(&wt, NULL, worker_thread, w);
	WAIT_FOR(fk.registration && !strcmp(json_string_value(json_object_get(fk.registration, "name")), "w2"));
	pthread_mutex_lock(&fk.mu);
	TAP_STR_EQ(json_string_value(json_object_get(fk.registration, "pool")), "h200", "registration sends --pool");
	TAP_OK(json_array_size(json_object_get(fk.registration, "borrow")) == 2 &&
	       !strcmp(json_string_value(json_array_get(json_object_get(fk.registration, "borrow"), 0)) ?: "", "b") &&
	       !strcmp(json_string_value(json_array_get(json_object_get(fk.registration, "borrow"), 1)) ?: "", "default"),
	       "registration sends --borrow's pools in its order");
	pthread_mutex_unlock(&fk.mu);
	worker_stop(w, 1);
	pthread_join(wt, NULL);
	worker_free(w);

	atomic_store(&server_stop, 1);
	pthread_join(st, NULL);
	evhttp_free(http);
	event_base_free(base);
	json_decref(fk.finishes);
	json_decref(fk.registration);
	free(url), free(smi), free(work), free(cmd), free(spool), free(err);
	{
		char *rm = xasprintf("rm -rf %s", dir);
		if (system(rm)) {}
		free(rm);
	}
	return TAP_DONE();
}
