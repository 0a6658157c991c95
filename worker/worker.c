/* The worker core (see worker.h). Threads: the caller of worker_run (start-up, then joins) and
 * one slot thread per GPU, each with its own libcurl handle. Shared state (worker id, stop flag,
 * drain deadline) lives in struct worker under `mu` or in atomics. A slot's state machine:
 * LEASING -> RUNNING (runner + heartbeats) -> FINISHING (spool, send until acknowledged). */
#include "worker.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "gpu.h"
#include "health.h"
#include "jpath.h"
#include "log.h"
#include "logship.h"
#include "pool.h"
#include "runner.h"
#include "scan.h"
#include "spool.h"
#include "util.h"
#include "version.h"

#define WORKER_LOG_CAP ((size_t)64 * 1024 * 1024)
#define WORKER_BACKOFF_MIN_MS 200
#define WORKER_BACKOFF_MAX_MS 5000
#define WORKER_STOP_FINISH_TRIES 3
#define WORKER_HEALTH_IDLE_POLLS 3  /* empty long-polls in a row after which the GPU is checked */
#define WORKER_HEALTH_MIN_WAIT_MS 100

struct worker;

/* What rungd last said about a slot's GPU (POST /v1/gpus/{uuid}/health). */
enum slot_gpu_state { SLOT_GPU_UNKNOWN, SLOT_GPU_OK, SLOT_GPU_SUSPECT, SLOT_GPU_QUARANTINED };

struct slot {
	struct worker *w;
	struct gpu_info gpu;
	pthread_t thread;
	enum slot_gpu_state gpu_state; /* slot thread only */
	int64_t health_due;            /* monotonic ms of the next health check; 0: none scheduled */
	int idle_polls;                /* 204s in a row since the last lease or check */
};

struct worker {
	struct worker_opts o;
	char *work_dir, *spool_dir, *attempts_dir, *host;
	struct slot *slots;
	size_t nslots;
	atomic_int stopping;
	atomic_llong drain_deadline;  /* monotonic ms after which running attempts are stopped */
	pthread_mutex_t mu;           /* guards id, heartbeat_ms; pairs with cond */
	pthread_cond_t cond;          /* broadcast on stop: wakes backoff sleeps */
	pthread_mutex_t reg_mu;       /* one registration at a time */
	char *id;                     /* worker id as a string, NULL before registration */
	json_t *borrow;               /* --borrow parsed: the pools it borrows from, in order ([]: none) */
	long heartbeat_ms;
};

enum slot_state { SLOT_LEASING, SLOT_RUNNING, SLOT_FINISHING };

/* Sleeps MS unless the worker stops (then returns at once). */
static void worker_sleep(struct worker *w, long ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->mu);
	while (!atomic_load(&w->stopping))
		if (pthread_cond_timedwait(&w->cond, &w->mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&w->mu);
}

static long next_backoff(long b)
{
	return b < WORKER_BACKOFF_MIN_MS ? WORKER_BACKOFF_MIN_MS : b * 2 > WORKER_BACKOFF_MAX_MS ? WORKER_BACKOFF_MAX_MS : b * 2;
}

/* An id from JSON (integer or string) as a heap string; NULL when neither. */
static char *id_string(const json_t *v)
{
	if (json_is_integer(v))
		return xasprintf("%" JSON_INTEGER_FORMAT, json_integer_value(v));
	if (json_is_string(v) && json_string_length(v))
		return spool_safe_id(json_string_value(v));
	return NULL;
}

static const char *answer_message(const json_t *ans)
{
	const char *m = json_string_value(json_object_get(ans, "message"));
	return m ? m : "";
}

static char *worker_current_id(struct worker *w)
{
	char *id;
	pthread_mutex_lock(&w->mu);
	id = w->id ? xstrdup(w->id) : NULL;
	pthread_mutex_unlock(&w->mu);
	return id;
}

/* Registers until rungd answers or the worker stops. STALE (may be NULL): skip when another slot
 * already replaced that id. Returns 0 when registered. */
static int worker_register(struct worker *w, struct client *c, const char *stale)
{
	json_t *gpus = json_array(), *body, *ans = NULL;
	long backoff = 0;
	int rc = -1;

	pthread_mutex_lock(&w->reg_mu);
	if (stale) {
		char *cur = worker_current_id(w);
		bool replaced = cur && strcmp(cur, stale);
		free(cur);
		if (replaced) {
			rc = 0;
			goto out;
		}
	}
	for (size_t i = 0; i < w->nslots; i++)
		json_array_append_new(gpus, json_pack("{s:s, s:i, s:s, s:I}", "uuid", w->slots[i].gpu.uuid,
						      "index", w->slots[i].gpu.index, "name", w->slots[i].gpu.name,
						      "memory_total_mib", (json_int_t)w->slots[i].gpu.total_mib));
	/* version: which build this host runs, for GET /v1/workers and /metrics during a rollout (a
	 * rungd from before it ignores the member); pool: always sent, so that a worker restarted
	 * without --pool goes back to the default pool rather than keeping its last one; borrow: always
	 * sent too ([] when none), so that a worker restarted without --borrow stops borrowing */
	body = json_pack("{s:s, s:s, s:O, s:s, s:s, s:O}", "name", w->o.name, "host", w->host, "gpus", gpus, "version",
			 rung_version(), "pool", w->o.pool, "borrow", w->borrow);
	while (!atomic_load(&w->stopping)) {
		char *err = NULL, *id;
		int st = client_post(c, "/v1/workers", body, 10000, &w->stopping, &ans, &err);
		if ((st == 200 || st == 201) && (id = id_string(json_object_get(ans, "id")))) {
			json_int_t hb = json_integer_value(json_object_get(ans, "heartbeat_ms"));
			pthread_mutex_lock(&w->mu);
			free(w->id);
			w->id = id;
			if (hb > 0)
				w->heartbeat_ms = (long)hb;
			pthread_mutex_unlock(&w->mu);
			char *borrow = pool_list_join(w->borrow, ",", "none");
			log_info("registered", "worker=%s name=%s pool=%s borrow=%s gpus=%zu heartbeat_ms=%ld", id,
				 w->o.name, w->o.pool, borrow, w->nslots, w->heartbeat_ms);
			free(borrow);
			json_decref(ans);
			rc = 0;
			break;
		}
		if (!atomic_load(&w->stopping))
			log_warn("registration failed, retrying", "server=%s status=%d error=\"%s\"", w->o.server,
				 st, err ? err : answer_message(ans));
		free(err);
		json_decref(ans);
		ans = NULL;
		backoff = next_backoff(backoff);
		worker_sleep(w, backoff);
	}
	json_decref(body);
out:
	json_decref(gpus);
	pthread_mutex_unlock(&w->reg_mu);
	return rc;
}

/* Posts a spooled finish DOC until rungd acknowledges it (2xx), rejects it (409: superseded; other
 * 4xx: logged), or the worker is stopping and a few tries failed; removes the spool file unless it
 * must be kept. Returns 0 when the file is gone. */
static int worker_send_finish(struct worker *w, struct client *c, const char *id, const json_t *doc)
{
	char *path = xasprintf("/v1/attempts/%s/finish", id);
	json_t *body = json_pack("{s:O, s:O}", "token", json_object_get(doc, "token"), "facts",
				 json_object_get(doc, "facts"));
	long backoff = 0;
	int tries = 0, rc = -1;

	for (;;) {
		json_t *ans = NULL;
		char *err = NULL;
		int st = client_post(c, path, body, 30000, NULL, &ans, &err);
		if (st >= 200 && st < 300) {
			const json_t *d = json_object_get(ans, "decision");
			log_info("finish acknowledged", "attempt=%s job_state=%s class=%s action=%s", id,
				 json_string_value(json_object_get(ans, "job_state")) ?: "?",
				 json_string_value(json_object_get(d, "class")) ?: "?",
				 json_string_value(json_object_get(d, "action")) ?: "?");
		} else if (st == 409) {
			log_warn("finish superseded, dropped", "attempt=%s message=\"%s\"", id, answer_message(ans));
		} else if (st >= 400 && st < 500) {
			log_error("finish rejected, dropped", "attempt=%s status=%d message=\"%s\"", id, st,
				  answer_message(ans));
		}
		json_decref(ans);
		if (st >= 200 && st < 500) {
			free(err);
			spool_remove(w->spool_dir, id);
			rc = 0;
			break;
		}
		log_warn("finish not delivered, retrying", "attempt=%s status=%d error=\"%s\"", id, st, err ? err : "");
		free(err);
		if (atomic_load(&w->stopping) && ++tries >= WORKER_STOP_FINISH_TRIES) {
			log_warn("finish left in the spool for the next start", "attempt=%s", id);
			break;
		}
		backoff = next_backoff(backoff);
		if (atomic_load(&w->stopping))
			usleep((useconds_t)backoff * 1000);
		else
			worker_sleep(w, backoff);
	}
	json_decref(body);
	free(path);
	return rc;
}

static void worker_resend_spool(struct worker *w, struct client *c)
{
	char **ids = spool_list(w->spool_dir);
	for (size_t i = 0; ids[i]; i++) {
		json_t *doc = spool_get(w->spool_dir, ids[i]);
		if (!doc)
			continue;
		log_info("resending spooled finish", "attempt=%s", ids[i]);
		worker_send_finish(w, c, ids[i], doc);
		json_decref(doc);
	}
	spool_list_free(ids);
}

/* The template split on spaces, placeholders substituted; a NULL-terminated heap array. */
static char **build_argv(const char *tmpl, const char *const *keys, const char *const *vals, size_t nk)
{
	char *copy = xstrdup(tmpl), *save = NULL, *tok;
	char **argv = xcalloc(strlen(tmpl) / 2 + 2, sizeof *argv);
	size_t n = 0;

	for (tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *arg = xstrdup(tok);
		for (size_t k = 0; k < nk; k++) {
			char *at;
			size_t kl = strlen(keys[k]);
			while ((at = strstr(arg, keys[k]))) {
				char *next = xasprintf("%.*s%s%s", (int)(at - arg), arg, vals[k], at + kl);
				free(arg);
				arg = next;
			}
		}
		argv[n++] = arg;
	}
	argv[n] = NULL;
	free(copy);
	return argv;
}

static void free_argv(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

static json_t *gpu_used_json(const json_t *state)
{
	json_t *v = json_object_get(state, "memory_used_mib");
	return v ? json_incref(v) : json_null();
}

/* gpu_state of the slot's GPU with memory_total_mib held to --gpu-memory-mib: every reading
 * rungd gets (lease, heartbeat, health, the facts) counts the GPU as the size it registered with.
 * Returns a new reference or NULL (gpu_state's). */
static json_t *slot_gpu_reading(const struct slot *s)
{
	json_t *st = gpu_state(s->w->o.smi, s->gpu.uuid);
	long long total = jpath_int(st, "memory_total_mib", -1), cap = s->w->o.gpu_memory_mib;

	if (st && cap > 0 && total > cap)
		json_object_set_new(st, "memory_total_mib", json_integer(cap));
	return st;
}

/* One heartbeat; its nvidia-smi reading also goes into the attempt's peak PK. Returns the HTTP
 * status (or -1); *cancel and *preempt set from the answer (preempt: rungd stops this borrowed job
 * for a job of the worker's own pool; it comes with cancel). */
static int slot_heartbeat(struct slot *s, struct client *c, const char *aid, const char *token,
			  const struct scan *sc, long timeout_ms, struct gpu_peak *pk, bool *cancel, bool *preempt)
{
	json_t *state = slot_gpu_reading(s), *ans = NULL;
	json_t *body = json_pack("{s:s, s:s}", "token", token, "phase", scan_phase_name(scan_phase(sc)));
	char *path = xasprintf("/v1/attempts/%s/heartbeat", aid), *err = NULL;
	int st;

	if (scan_step(sc) >= 0)
		json_object_set_new(body, "step", json_integer(scan_step(sc)));
	if (scan_total_steps(sc) >= 0)
		json_object_set_new(body, "total_steps", json_integer(scan_total_steps(sc)));
	if (state) {
		json_t *used = json_object_get(state, "memory_used_mib");
		json_object_set_new(body, "memory_used_mib", gpu_used_json(state));
		if (json_is_integer(used))
			gpu_peak_note(pk, json_integer_value(used), scan_phase_name(scan_phase(sc)), scan_step(sc));
	}
	st = client_post(c, path, body, timeout_ms, NULL, &ans, &err);
	if (st == 200 && json_is_true(json_object_get(ans, "cancel")))
		*cancel = true;
	if (st == 200 && json_is_true(json_object_get(ans, "preempt")))
		*preempt = true;
	if (st < 0 || st >= 500)
		log_warn("heartbeat failed", "attempt=%s gpu=%s status=%d error=\"%s\"", aid, s->gpu.uuid, st,
			 err ? err : "");
	free(err);
	free(path);
	json_decref(ans);
	json_decref(body);
	json_decref(state);
	return st;
}

/* Sends what the trainer printed since *SENT (bytes of LOG_PATH) to rungd, a chunk at a time
 * (logship.h), at most MAX_CHUNKS of them and none once DEADLINE (monotonic ms) has passed: the
 * slot's heartbeats and its finish wait meanwhile, so the caller bounds the time. FINAL: the trainer
 * has exited, the end of the log goes too. Moves *SENT to where rungd's copy ends. Stops for good
 * (*ON false) when rungd refuses the attempt's log (409: the lease is gone, the heartbeat or the
 * finish deals with it; 413: the log is full) or a chunk (400); a failure to reach it leaves the
 * rest for the next call. */
static void slot_ship_log(struct slot *s, struct client *c, const char *aid, const char *token, const char *log_path,
			  bool final, int max_chunks, int64_t deadline, long long *sent, bool *on)
{
	char *path = xasprintf("/v1/attempts/%s/log", aid);

	for (int i = 0; i < max_chunks && *on; i++) {
		struct logship_chunk ch;
		json_t *body, *ans = NULL;
		char *err = NULL;
		int64_t left = deadline - util_mono_ms();
		int st, got;
		if (left < 100)
			break;
		got = logship_next(log_path, *sent, LOGSHIP_CHUNK_BYTES, final, &ch);
		if (got <= 0) {
			if (got < 0)
				log_warn("cannot read trainer log", "attempt=%s path=%s error=\"%s\"", aid, log_path,
					 strerror(errno));
			break;
		}
		body = json_pack("{s:s, s:I, s:I, s:s}", "token", token, "from", (json_int_t)ch.from, "to",
				 (json_int_t)ch.to, "text", ch.text);
		st = client_post(c, path, body, left < 5000 ? (long)left : 5000, NULL, &ans, &err);
		if (st == 200 && json_is_integer(json_object_get(ans, "end")))
			*sent = (long long)json_integer_value(json_object_get(ans, "end"));
		else if (st == 409 || st == 413 || st == 400 || st == 404 || st == 403) {
			log_warn("rungd takes no more of this attempt's log", "attempt=%s gpu=%s status=%d at=%lld", aid,
				 s->gpu.uuid, st, ch.from);
			*on = false;
		} else {
			log_warn("log chunk not delivered, kept for later", "attempt=%s gpu=%s status=%d error=\"%s\"", aid,
				 s->gpu.uuid, st, err ? err : "");
			i = max_chunks;
		}
		free(err);
		free(ch.text);
		json_decref(ans);
		json_decref(body);
	}
	free(path);
}

/* Gives each job its own output folder: a relative (or absent) process[].training_folder becomes
 * WORK/jobs/JOB/<folder>, so retries of a job on this host resume from its checkpoints (AI Toolkit
 * resumes a run with the same name and folder) while two jobs with the same config.name never
 * share one. An absolute folder is the user's choice and stays as is. Returns a new reference. */
json_t *worker_job_config(const json_t *config, const char *work_dir, const char *job_id)
{
	json_t *copy = json_deep_copy(config), *procs, *p;
	size_t i;

	procs = json_object_get(json_object_get(copy, "config"), "process");
	json_array_foreach(procs, i, p) {
		const char *tf = json_string_value(json_object_get(p, "training_folder"));
		if (!json_is_object(p) || (tf && tf[0] == '/'))
			continue;
		json_object_set_new(p, "training_folder",
				    json_sprintf("%s/jobs/%s/%s", work_dir, job_id, tf && tf[0] ? tf : "output"));
	}
	return copy;
}

/* Runs one leased attempt to its end and delivers its finish. */
static void slot_attempt(struct slot *s, struct client *c, const json_t *lease, json_t *gpu_before)
{
	struct worker *w = s->w;
	char *aid = id_string(json_object_get(lease, "attempt_id"));
	char *jid = id_string(json_object_get(lease, "job_id"));
	const char *token = json_string_value(json_object_get(lease, "token"));
	const json_t *config = json_object_get(lease, "config");
	long hb_ms = (long)json_integer_value(json_object_get(lease, "heartbeat_ms"));
	long lease_ms = (long)json_integer_value(json_object_get(lease, "lease_seconds")) * 1000;
	/* the job's recovery.stall_timeout_s when it set one (0: never), else this worker's */
	const json_t *job_stall = json_object_get(lease, "stall_timeout_s");
	long long stall_s = json_is_integer(job_stall) ? (long long)json_integer_value(job_stall) : w->o.stall_timeout_s;
	char *dir = NULL, *cfg_path = NULL, *log_path = NULL, *err = NULL, idx[16], **argv = NULL;
	struct scan *sc = scan_new();
	struct runner *r = NULL;
	json_t *facts = NULL, *doc = NULL, *job_config = NULL;
	int64_t started = util_mono_ms(), next_hb, next_sample, kill_at = 0;
	struct gpu_peak pk;
	bool cancelled = false, preempted = false, drain_sent = false, dropped = false;
	long long stalled_s = 0; /* killed after this long without output (0: not stalled) */
	int64_t stall_kill_at = 0;
	/* the pace of training (FACTS train_ms over train_steps): when the first step was seen and when
	 * the step last moved, and those steps (0 and -1: none seen yet) */
	int64_t first_step_at = 0, last_step_at = 0;
	long long first_step_seen = -1, last_step_seen = -1;
	bool unkillable = false; /* SIGKILLed as stalled and still not gone (stuck in the driver) */
	enum slot_state state = SLOT_RUNNING;
	long long log_sent = 0;  /* bytes of trainer.log rungd has (POST /v1/attempts/{id}/log) */
	bool log_on = w->o.log_interval_ms > 0;
	int64_t next_log;
	long ship_ms; /* the time one log send may take (slot_ship_log's deadline) */
	char mem_var[48] = "";   /* RUNG_GPU_MEMORY_MIB=N for the trainer under --gpu-memory-mib */
	char *mem_env[] = { mem_var, NULL };

	if (w->o.gpu_memory_mib > 0)
		snprintf(mem_var, sizeof mem_var, "RUNG_GPU_MEMORY_MIB=%ld", w->o.gpu_memory_mib);
	if (!aid || !jid || !token || !json_is_object(config)) {
		log_error("malformed lease, ignored", "gpu=%s", s->gpu.uuid);
		goto out;
	}
	if (lease_ms <= 0)
		lease_ms = 30000; /* rungd's default --lease-seconds */
	/* a log send holds up this slot's heartbeats (and, at the end, its finish): a quarter of the lease
	 * at most, so one late heartbeat still finds it valid, and never over 5 s */
	ship_ms = lease_ms / 4 < 5000 ? lease_ms / 4 : 5000;
	if (hb_ms <= 0) {
		pthread_mutex_lock(&w->mu);
		hb_ms = w->heartbeat_ms;
		pthread_mutex_unlock(&w->mu);
	}
	snprintf(idx, sizeof idx, "%d", s->gpu.index);
	dir = xasprintf("%s/%s", w->attempts_dir, aid);
	cfg_path = xasprintf("%s/config.json", dir);
	log_path = xasprintf("%s/trainer.log", dir);
	log_info("lease granted", "attempt=%s job=%s gpu=%s index=%s", aid, jid, s->gpu.uuid, idx);
	job_config = worker_job_config(config, w->work_dir, jid);
	if (spool_mkdir_p(dir, &err) < 0 || json_dump_file(job_config, cfg_path, JSON_INDENT(2)) < 0) {
		if (!err)
			err = xasprintf("cannot write %s", cfg_path);
	} else {
		const char *keys[] = { "{config}", "{attempt}", "{job}", "{gpu_index}", "{gpu_uuid}" };
		const char *vals[] = { cfg_path, aid, jid, idx, s->gpu.uuid };
		struct runner_spec spec = { 0 };
		argv = build_argv(w->o.trainer_cmd, keys, vals, ARRAY_LEN(keys));
		spec.argv = argv;
		spec.cwd = w->o.trainer_dir;
		spec.cuda_visible = idx;
		spec.env = mem_var[0] ? (const char *const *)mem_env : NULL;
		spec.log_path = log_path;
		spec.log_cap = WORKER_LOG_CAP;
		r = runner_start(&spec, sc);
		log_info("trainer started", "attempt=%s job=%s gpu=%s pid=%d", aid, jid, s->gpu.uuid,
			 (int)runner_pid(r));
	}
	gpu_peak_init(&pk);
	next_hb = util_mono_ms() + hb_ms;
	next_sample = util_mono_ms(); /* the first reading at once: short attempts get one too */
	next_log = util_mono_ms() + w->o.log_interval_ms;
	while (r && runner_poll(r, 100) == RUNNER_RUNNING) {
		int64_t now = util_mono_ms();
		if (scan_step(sc) >= 0 && scan_step(sc) != last_step_seen) {
			if (!first_step_at) {
				first_step_at = now;
				first_step_seen = scan_step(sc);
			}
			last_step_at = now;
			last_step_seen = scan_step(sc);
		}
		if (now >= next_sample && now < next_hb) { /* a heartbeat reads the GPU itself */
			gpu_peak_note(&pk, gpu_used_mib(w->o.smi, s->gpu.uuid), scan_phase_name(scan_phase(sc)),
				      scan_step(sc));
			now = util_mono_ms();
			next_sample = now + w->o.memory_sample_ms;
		}
		if (now >= next_hb) {
			bool cancel = false, preempt = false;
			int st = slot_heartbeat(s, c, aid, token, sc, hb_ms < 5000 ? (hb_ms > 1000 ? hb_ms : 1000) : 5000,
						&pk, &cancel, &preempt);
			if (st == 409) {
				log_warn("lease gone, trainer stopped, attempt dropped", "attempt=%s job=%s gpu=%s",
					 aid, jid, s->gpu.uuid);
				runner_kill(r, SIGKILL);
				dropped = true;
				break;
			}
			if (cancel && !cancelled) {
				if (preempt)
					log_info("preempted (its job is queued again), interrupting trainer",
						 "attempt=%s job=%s gpu=%s", aid, jid, s->gpu.uuid);
				else
					log_info("cancel requested, interrupting trainer", "attempt=%s job=%s gpu=%s", aid,
						 jid, s->gpu.uuid);
				cancelled = true;
				preempted = preempt;
				runner_kill(r, SIGINT);
				kill_at = util_mono_ms() + w->o.cancel_grace_ms;
			}
			now = util_mono_ms();
			next_hb = now + hb_ms;
			next_sample = now + w->o.memory_sample_ms;
		}
		if (log_on && now >= next_log) {
			slot_ship_log(s, c, aid, token, log_path, false, 16, now + ship_ms, &log_sent, &log_on);
			now = util_mono_ms();
			next_log = now + w->o.log_interval_ms;
		}
		if (atomic_load(&w->stopping) && !drain_sent && now >= atomic_load(&w->drain_deadline)) {
			log_info("drain timeout, interrupting trainer", "attempt=%s job=%s gpu=%s", aid, jid, s->gpu.uuid);
			drain_sent = true;
			runner_kill(r, SIGINT);
			if (!kill_at)
				kill_at = now + w->o.cancel_grace_ms;
		}
		if (stall_s > 0 && !stalled_s && !cancelled && runner_silent_ms(r) >= (int64_t)stall_s * 1000) {
			/* hung (a collective that never returns, a deadlocked data loader, a GPU that stopped
			 * answering): nothing to save, so no SIGINT; the finish reports it (FACTS.stalled_s) */
			stalled_s = (long long)(runner_silent_ms(r) / 1000);
			log_warn("trainer silent, killed as stalled", "attempt=%s job=%s gpu=%s silent_s=%lld phase=%s step=%lld",
				 aid, jid, s->gpu.uuid, stalled_s, scan_phase_name(scan_phase(sc)), (long long)scan_step(sc));
			runner_kill(r, SIGKILL);
			stall_kill_at = now;
		}
		if (stall_kill_at && now - stall_kill_at >= WORKER_UNKILLABLE_MS) {
			/* a process in uninterruptible sleep in the driver: report the attempt so the job goes
			 * on elsewhere; this slot stays with its GPU (runner_free waits for the process) */
			log_error("stalled trainer did not die after SIGKILL, reporting the attempt", "attempt=%s job=%s gpu=%s pid=%d",
				  aid, jid, s->gpu.uuid, (int)runner_pid(r));
			unkillable = true;
			break;
		}
		if (kill_at && now >= kill_at) {
			log_warn("trainer ignored SIGINT, killing", "attempt=%s job=%s gpu=%s", aid, jid, s->gpu.uuid);
			runner_kill(r, SIGKILL);
			kill_at = now + 1000;
		}
	}
	if (dropped)
		goto out;
	state = SLOT_FINISHING;
	scan_finish(sc);
	facts = scan_facts(sc);
	if (r && runner_signal(r)) {
		json_object_set_new(facts, "exit_code", json_null());
		json_object_set_new(facts, "signal", json_integer(runner_signal(r)));
	} else {
		json_object_set_new(facts, "exit_code", r ? json_integer(runner_exit_code(r)) : json_null());
		json_object_set_new(facts, "signal", json_null());
	}
	if (!r || runner_error(r))
		json_object_set_new(facts, "error", json_string(r ? runner_error(r) : err));
	if (unkillable) { /* killed, as far as anyone can tell: not reaped */
		json_object_set_new(facts, "exit_code", json_null());
		json_object_set_new(facts, "signal", json_integer(SIGKILL));
	}
	json_object_set_new(facts, "cancelled", json_boolean(cancelled));
	if (preempted) /* for the record: rungd decides from its own mark (attempts.preempted_at) */
		json_object_set_new(facts, "preempted", json_true());
	/* stalled only when the kill ended it: a trainer that finished by itself meanwhile did not stall */
	if (stalled_s && (unkillable || (r && runner_signal(r) == SIGKILL)))
		json_object_set_new(facts, "stalled_s", json_integer(stalled_s));
	json_object_set(facts, "gpu_before", gpu_before ? gpu_before : json_null());
	json_object_set_new(facts, "gpu_after", slot_gpu_reading(s) ?: json_null());
	json_object_set_new(facts, "duration_ms", json_integer(util_mono_ms() - started));
	/* the pace of training, from the first step seen to the last one seen (to the loop's poll): what a
	 * step took here, which prices the steps a resume did not run again (rung_resumed_gpu_s,
	 * 61_finish_apply.sql); not the end, which may add a save, a teardown or a stall */
	json_object_set_new(facts, "train_ms",
			    last_step_seen > first_step_seen ? json_integer(last_step_at - first_step_at) : json_null());
	json_object_set_new(facts, "train_steps",
			    last_step_seen > first_step_seen ? json_integer(last_step_seen - first_step_seen) : json_null());
	json_object_set_new(facts, "peak", gpu_peak_json(&pk));
	log_info("trainer ended", "attempt=%s job=%s gpu=%s exit_code=%d signal=%d phase=%s cancelled=%d", aid, jid,
		 s->gpu.uuid, r ? runner_exit_code(r) : -1, r ? runner_signal(r) : 0,
		 scan_phase_name(scan_phase(sc)), cancelled);
	doc = json_pack("{s:O, s:s, s:o}", "attempt_id", json_object_get(lease, "attempt_id"), "token", token,
			"facts", facts);
	facts = NULL;
	free(err);
	err = NULL;
	if (spool_put(w->spool_dir, aid, doc, &err) < 0)
		log_error("cannot spool finish, sending anyway", "attempt=%s error=\"%s\"", aid, err);
	/* the rest of what it printed, before the finish ends the lease: spooled first (a crash here loses
	 * no result) */
	if (log_on && r)
		slot_ship_log(s, c, aid, token, log_path, true, 64, util_mono_ms() + ship_ms, &log_sent, &log_on);
	worker_send_finish(w, c, aid, doc);
out:
	(void)state;
	runner_free(r);
	scan_free(sc);
	json_decref(facts);
	json_decref(job_config);
	json_decref(doc);
	free_argv(argv);
	free(err);
	free(log_path);
	free(cfg_path);
	free(dir);
	free(jid);
	free(aid);
}

static enum slot_gpu_state slot_gpu_state_parse(const char *s)
{
	if (!s)
		return SLOT_GPU_UNKNOWN;
	if (!strcmp(s, "ok"))
		return SLOT_GPU_OK;
	if (!strcmp(s, "suspect"))
		return SLOT_GPU_SUSPECT;
	if (!strcmp(s, "quarantined"))
		return SLOT_GPU_QUARANTINED;
	return SLOT_GPU_UNKNOWN;
}

/* Runs the health check of the slot's GPU (the operator's command, else the built-in nvidia-smi
 * judgement), reports it to rungd and schedules the next one from the answer: none while the GPU
 * is ok, else after the interval or the server's next_check_ms, whichever comes first. */
static void slot_health(struct slot *s, struct client *c)
{
	struct worker *w = s->w;
	json_t *gstate = slot_gpu_reading(s), *body, *ans = NULL;
	char *detail = NULL, *err = NULL, *path = xasprintf("/v1/gpus/%s/health", s->gpu.uuid);
	int64_t now;
	bool passed;
	int st;

	if (w->o.health_cmd && *w->o.health_cmd) {
		char idx[16], **argv, *log_path;
		const char *keys[] = { "{gpu_index}", "{gpu_uuid}" };
		const char *vals[] = { idx, s->gpu.uuid };
		snprintf(idx, sizeof idx, "%d", s->gpu.index);
		argv = build_argv(w->o.health_cmd, keys, vals, ARRAY_LEN(keys));
		log_path = xasprintf("%s/health-%d.log", w->work_dir, s->gpu.index);
		passed = health_run(argv, idx, w->o.health_timeout_ms, log_path, &w->stopping, &detail);
		free(log_path);
		free_argv(argv);
	} else {
		passed = health_judge(gstate, w->o.health_max_used_mib, &detail);
	}
	body = json_pack("{s:b, s:s, s:O}", "passed", passed, "detail", detail, "gpu_state",
			 gstate ? gstate : json_null());
	st = atomic_load(&w->stopping) ? -1 : client_post(c, path, body, 15000, &w->stopping, &ans, &err);
	now = util_mono_ms();
	s->idle_polls = 0;
	if (st == 200) {
		const json_t *next = json_object_get(ans, "next_check_ms");
		long wait = w->o.health_interval_ms;
		enum slot_gpu_state prev = s->gpu_state;
		s->gpu_state = slot_gpu_state_parse(json_string_value(json_object_get(ans, "state")));
		if (json_is_integer(next) && json_integer_value(next) > 0 && json_integer_value(next) < wait)
			wait = (long)json_integer_value(next);
		if (wait < WORKER_HEALTH_MIN_WAIT_MS)
			wait = WORKER_HEALTH_MIN_WAIT_MS;
		s->health_due = s->gpu_state == SLOT_GPU_OK ? 0 : now + wait;
		if (s->gpu_state != SLOT_GPU_OK || prev != SLOT_GPU_OK || !passed)
			log_info("gpu health reported", "gpu=%s passed=%d state=%s next_check_ms=%ld detail=\"%s\"",
				 s->gpu.uuid, passed, json_string_value(json_object_get(ans, "state")) ?: "?",
				 s->health_due ? wait : 0L, detail);
	} else if (st == 404 || st == 403 || st == 405) {
		/* a rungd without health reports, or a GPU it does not know: the next lease answer decides */
		log_warn("gpu health report refused", "gpu=%s status=%d message=\"%s\"", s->gpu.uuid, st,
			 answer_message(ans));
		s->health_due = 0;
	} else {
		if (!atomic_load(&w->stopping))
			log_warn("gpu health report failed, retrying later", "gpu=%s status=%d error=\"%s\"",
				 s->gpu.uuid, st, err ? err : answer_message(ans));
		s->health_due = now + w->o.health_interval_ms;
	}
	free(err);
	free(detail);
	free(path);
	json_decref(ans);
	json_decref(body);
	json_decref(gstate);
}

static bool slot_health_is_due(const struct slot *s)
{
	return (s->health_due && util_mono_ms() >= s->health_due) || s->idle_polls >= WORKER_HEALTH_IDLE_POLLS;
}

static void *slot_main(void *arg)
{
	struct slot *s = arg;
	struct worker *w = s->w;
	struct client *c = client_new(w->o.server);
	long backoff = 0;
	enum slot_state state = SLOT_LEASING;

	s->gpu_state = SLOT_GPU_UNKNOWN;
	s->health_due = util_mono_ms(); /* report once at start: learn the GPU's state */
	s->idle_polls = 0;
	while (!atomic_load(&w->stopping)) {
		json_t *gstate, *body, *ans = NULL;
		char *id, *path, *err = NULL;
		int64_t t0;
		long wait_ms = w->o.lease_wait_ms;
		int st;

		if (slot_health_is_due(s)) {
			slot_health(s, c);
			if (atomic_load(&w->stopping))
				break;
		}
		if (s->health_due && s->health_due - util_mono_ms() < wait_ms) /* wake up for the next check */
			wait_ms = s->health_due - util_mono_ms() > 0 ? (long)(s->health_due - util_mono_ms()) : 0;
		gstate = slot_gpu_reading(s);
		id = worker_current_id(w);
		path = xasprintf("/v1/workers/%s/lease", id);
		t0 = util_mono_ms();
		body = json_pack("{s:s, s:I}", "gpu_uuid", s->gpu.uuid, "wait_ms", (json_int_t)wait_ms);
		if (gstate)
			json_object_set(body, "gpu_state", gstate);
		st = client_post(c, path, body, wait_ms + 15000, &w->stopping, &ans, &err);
		if (st == 200 && json_is_object(ans)) {
			backoff = 0;
			s->idle_polls = 0;
			state = SLOT_RUNNING;
			slot_attempt(s, c, ans, gstate);
			state = SLOT_LEASING;
		} else if (st == 204) {
			backoff = 0;
			if (wait_ms == w->o.lease_wait_ms) /* a full wait, not one cut short for a check */
				s->idle_polls++;
			if (util_mono_ms() - t0 < 50)
				worker_sleep(w, 50); /* a server that does not park must not make us spin */
		} else if (st == 404) {
			log_warn("server lost this worker, registering again", "worker=%s gpu=%s", id, s->gpu.uuid);
			worker_register(w, c, id);
		} else if (!atomic_load(&w->stopping)) {
			log_warn("lease failed, retrying", "worker=%s gpu=%s status=%d error=\"%s\"", id, s->gpu.uuid, st,
				 err ? err : answer_message(ans));
			backoff = next_backoff(backoff);
			worker_sleep(w, backoff);
		}
		free(err);
		json_decref(ans);
		json_decref(body);
		json_decref(gstate);
		free(path);
		free(id);
	}
	(void)state;
	log_info("slot stopped", "gpu=%s", s->gpu.uuid);
	client_free(c);
	return NULL;
}

/* Keeps the GPUs named in LIST ("0,2"); all when LIST is NULL or empty. */
static int select_gpus(struct worker *w, struct gpu_info *gpus, size_t n, const char *list, char **err)
{
	char *copy, *save = NULL, *tok;
	int rc = -1;

	w->slots = xcalloc(n ? n : 1, sizeof *w->slots);
	if (!list || !*list) {
		for (size_t i = 0; i < n; i++)
			w->slots[w->nslots++].gpu = gpus[i];
		return 0;
	}
	copy = xstrdup(list);
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long want = strtol(tok, &end, 10);
		size_t i;
		bool dup = false;
		if (end == tok || *end) {
			*err = xasprintf("--gpus: '%s' is not a GPU index", tok);
			goto out;
		}
		for (i = 0; i < n && gpus[i].index != want; i++)
			;
		if (i == n) {
			*err = xasprintf("--gpus: nvidia-smi shows no GPU %ld", want);
			goto out;
		}
		for (size_t k = 0; k < w->nslots; k++)
			dup = dup || w->slots[k].gpu.index == want;
		if (!dup && w->nslots < n)
			w->slots[w->nslots++].gpu = gpus[i];
	}
	rc = 0;
out:
	free(copy);
	return rc;
}

struct worker *worker_new(const struct worker_opts *opts, char **err)
{
	struct worker *w = xcalloc(1, sizeof *w);
	struct gpu_info *gpus = NULL;
	size_t n = 0;
	char host[256] = "", *gerr = NULL, *abs = NULL;
	pthread_condattr_t ca;

	w->o = *opts;
	pthread_mutex_init(&w->mu, NULL);
	pthread_mutex_init(&w->reg_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	w->heartbeat_ms = 5000;
	if (!w->o.pool)
		w->o.pool = POOL_DEFAULT;
	if (w->o.health_interval_ms <= 0)
		w->o.health_interval_ms = HEALTH_INTERVAL_MS_DEFAULT;
	if (w->o.health_timeout_ms <= 0)
		w->o.health_timeout_ms = HEALTH_TIMEOUT_MS_DEFAULT;
	if (w->o.health_max_used_mib <= 0)
		w->o.health_max_used_mib = HEALTH_MAX_USED_MIB_DEFAULT;
	if (w->o.memory_sample_ms <= 0)
		w->o.memory_sample_ms = WORKER_MEMORY_SAMPLE_MS_DEFAULT;
	gethostname(host, sizeof host - 1);
	if (!pool_name_ok(w->o.pool)) {
		*err = xasprintf("--pool \"%s\": a pool name is %s", w->o.pool, POOL_NAME_RULE);
		goto fail;
	}
	w->borrow = pool_borrow_parse(w->o.borrow, w->o.pool, &gerr);
	if (!w->borrow) {
		*err = xasprintf("--borrow \"%s\": %s", w->o.borrow ? w->o.borrow : "", gerr);
		goto fail;
	}
	w->host = xstrdup(host[0] ? host : "localhost");
	if (spool_mkdir_p(opts->work_dir, err) < 0)
		goto fail;
	abs = realpath(opts->work_dir, NULL);
	if (!abs) {
		*err = xasprintf("work dir %s: %s", opts->work_dir, strerror(errno));
		goto fail;
	}
	w->work_dir = xstrdup(abs);
	free(abs);
	w->spool_dir = xasprintf("%s/spool", w->work_dir);
	w->attempts_dir = xasprintf("%s/attempts", w->work_dir);
	if (spool_mkdir_p(w->spool_dir, err) < 0 || spool_mkdir_p(w->attempts_dir, err) < 0)
		goto fail;
	if (gpu_list(opts->smi, &gpus, &n, &gerr) < 0) {
		*err = xasprintf("GPU discovery failed: %s", gerr);
		goto fail;
	}
	if (select_gpus(w, gpus, n, opts->gpus, err) < 0)
		goto fail;
	for (size_t i = 0; i < w->nslots; i++) /* registered at this size, so rungd places and learns by it */
		if (w->o.gpu_memory_mib > 0 && w->slots[i].gpu.total_mib > w->o.gpu_memory_mib)
			w->slots[i].gpu.total_mib = w->o.gpu_memory_mib;
	if (!w->nslots) {
		*err = xasprintf("GPU discovery failed: %s lists no GPU", opts->smi);
		goto fail;
	}
	free(gpus);
	return w;
fail:
	free(gerr);
	free(gpus);
	worker_free(w);
	return NULL;
}

int worker_run(struct worker *w)
{
	struct client *c = client_new(w->o.server);
	size_t started = 0;
	int rc = 0;

	/* register first: it binds this worker's row, and so its attempts, to the token it runs with now,
	 * so that a finish spooled under a token since rotated (revoked, expired) is still the caller's
	 * when it is resent; registering touches no attempt, and no slot leases before the spool is sent */
	if (worker_register(w, c, NULL) < 0)
		goto out;
	worker_resend_spool(w, c);
	for (size_t i = 0; i < w->nslots; i++) {
		w->slots[i].w = w;
		if (pthread_create(&w->slots[i].thread, NULL, slot_main, &w->slots[i])) {
			log_error("cannot start slot thread", "gpu=%s", w->slots[i].gpu.uuid);
			worker_stop(w, 1);
			rc = -1;
			break;
		}
		log_info("slot started", "gpu=%s index=%d", w->slots[i].gpu.uuid, w->slots[i].gpu.index);
		started++;
	}
	for (size_t i = 0; i < started; i++)
		pthread_join(w->slots[i].thread, NULL);
	worker_resend_spool(w, c);
out:
	client_free(c);
	return rc;
}

void worker_stop(struct worker *w, int immediate)
{
	int64_t deadline = util_mono_ms() + (immediate ? 0 : w->o.drain_timeout_ms);
	if (immediate || !atomic_load(&w->stopping))
		atomic_store(&w->drain_deadline, deadline); /* before the flag: slots read both */
	atomic_store(&w->stopping, 1);
	pthread_mutex_lock(&w->mu);
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mu);
}

void worker_free(struct worker *w)
{
	if (!w)
		return;
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->reg_mu);
	pthread_mutex_destroy(&w->mu);
	free(w->id);
	json_decref(w->borrow);
	free(w->slots);
	free(w->host);
	free(w->attempts_dir);
	free(w->spool_dir);
	free(w->work_dir);
	free(w);
}
