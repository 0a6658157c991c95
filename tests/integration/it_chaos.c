/* Integration (issue 4, "Faults"): chaos under load, then proof from the database and the API that
 * nothing was lost or run twice: a worker SIGKILLed mid-attempt, rungd SIGKILLed twice, Postgres
 * restarted fast and immediate, a worker stalled (SIGSTOP) past its lease, two rungd replicas on one
 * database. With RUNG_CHAOS_SOAK_SECONDS set it injects the same faults at random instead (soak.sh). */
#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

#define STEP_MS_DEFAULT 50
#define MAX_LOST "20"

/* Worst count of jobs with two running attempts seen by any sample (must stay 0). */
static long long g_dup_running;
static long g_samples;

static void nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* One sample of "at most one running attempt per job", kept in g_dup_running. */
static void sample_running(struct harness *h)
{
	long long n = h_sql_int(h, "SELECT count(*) FROM (SELECT job_id FROM attempts WHERE state = 'running' "
		"GROUP BY job_id HAVING count(*) > 1) x", 0, NULL);
	if (n > g_dup_running)
		g_dup_running = n;
	g_samples++;
}

/* ---- submitting ---- */

/* Submits job NAME (steps steps; oom: batch 4, which OOMs on 24 GiB and recovers) to the server
 * at h->base_url, once. Returns true on 2xx. scale_up is off so a succeeded job has exactly one
 * succeeded attempt; max_lost is high so repeated faults do not fail jobs. */
static bool submit_one(struct harness *h, const char *name, int steps, bool oom)
{
	json_t *cfg = h_config(name, steps);
	if (oom)
		h_config_set(cfg, "config.process[0].train.batch_size", json_integer(4));
	json_t *body = json_pack("{s:s, s:O, s:{s:b, s:i}}", "name", name, "config", cfg, "recovery", "scale_up", 0,
		"max_lost", atoi(MAX_LOST));
	long st = 0;
	json_t *r = h_post(h, "/v1/jobs", body, &st);
	json_decref(r);
	json_decref(body);
	json_decref(cfg);
	return st >= 200 && st < 300;
}

/* Submits n jobs PREFIX-NNN, retrying each for 20 s (503 during an outage). Returns how many went in. */
static int submit_batch(struct harness *h, const char *prefix, int n, int steps)
{
	int ok = 0;
	for (int i = 0; i < n; i++) {
		char *name = xasprintf("%s-%03d", prefix, i);
		int64_t deadline = util_mono_ms() + 20000;
		bool in = false;
		while (!(in = submit_one(h, name, steps, false)) && util_mono_ms() < deadline)
			nap_ms(100);
		ok += in;
		free(name);
	}
	return ok;
}

/* ---- waiting ---- */

struct count_arg {
	struct harness *h;
	const char *prefix;
	const char *sql; /* one parameter: the LIKE pattern */
	long long want;
};

static bool count_reached(void *arg)
{
	struct count_arg *a = arg;
	char *like = xasprintf("%s-%%", a->prefix);
	const char *p[] = { like };
	sample_running(a->h);
	long long n = h_sql_int(a->h, a->sql, 1, p);
	free(like);
	return n >= a->want;
}

#define SQL_FINAL "SELECT count(*) FROM jobs WHERE name LIKE $1 AND state IN ('succeeded', 'failed', 'cancelled')"
#define SQL_SUCCEEDED "SELECT count(*) FROM jobs WHERE name LIKE $1 AND state = 'succeeded'"

/* Waits (sampling the one-running invariant) until `want` jobs of PREFIX match sql. */
static bool wait_count(struct harness *h, const char *prefix, const char *sql, long long want, int timeout_ms)
{
	struct count_arg a = { h, prefix, sql, want };
	return wait_until(count_reached, &a, timeout_ms);
}

/* ---- logs ---- */

/* Appends to *ids (a "{1,2}" array literal being built) the attempt ids of every worker log line
 * whose msg is MSG. Returns how many. */
static int log_attempts(struct harness *h, const char *msg, char **ids)
{
	char *needle = xasprintf("msg=\"%s\"", msg), *line = NULL;
	size_t cap = 0;
	int n = 0;
	for (int i = 0; i < h->nworkers; i++) {
		FILE *f = h->workers[i].proc.log_path ? fopen(h->workers[i].proc.log_path, "r") : NULL;
		if (!f)
			continue;
		while (getline(&line, &cap, f) > 0) {
			char *at = strstr(line, needle) ? strstr(line, " attempt=") : NULL;
			if (!at)
				continue;
			long long id = strtoll(at + 9, NULL, 10);
			char *next = xasprintf("%s%s%lld", *ids, **ids ? "," : "", id);
			free(*ids);
			*ids = next;
			n++;
		}
		fclose(f);
	}
	free(line);
	free(needle);
	return n;
}

static bool log_has(struct harness *h, struct h_worker *w, const char *text)
{
	FILE *f = fopen(w->proc.log_path, "r");
	char *line = NULL;
	size_t cap = 0;
	bool found = false;
	(void)h;
	while (f && !found && getline(&line, &cap, f) > 0)
		found = strstr(line, text) != NULL;
	free(line);
	if (f)
		fclose(f);
	return found;
}

struct log_arg {
	struct harness *h;
	struct h_worker *w;
	const char *text;
};

static bool log_has_cb(void *arg)
{
	struct log_arg *a = arg;
	return log_has(a->h, a->w, a->text);
}

static int count_lines(struct harness *h, const char *msg)
{
	char *ids = xstrdup("");
	int n = log_attempts(h, msg, &ids);
	free(ids);
	return n;
}

/* True when no trainer process registered in the worker's simulated GPU state still runs (a
 * zombie counts as gone: it holds no memory). */
static bool trainers_gone(void *arg)
{
	struct h_worker *w = arg;
	json_t *st = json_load_file(w->state_path, 0, NULL), *g, *p;
	size_t i, k;
	bool gone = true;
	json_array_foreach(json_object_get(st, "gpus"), i, g) {
		json_array_foreach(json_object_get(g, "processes"), k, p) {
			long pid = (long)json_integer_value(json_object_get(p, "pid"));
			if (!json_is_true(json_object_get(p, "trainer")) || pid <= 0 || kill((pid_t)pid, 0) != 0)
				continue;
			char path[64], buf[512] = "";
			snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
			FILE *f = fopen(path, "r");
			size_t len = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
			if (f)
				fclose(f);
			buf[len] = '\0';
			char *rp = strrchr(buf, ')');
			if (rp && rp[1] == ' ' && rp[2] == 'Z')
				continue;
			gone = false;
		}
	}
	json_decref(st);
	return gone;
}

/* ---- invariants ---- */

struct inv {
	const char *what;
	const char *sql;   /* $1: LIKE pattern of the jobs; returns offending rows (first column: job id) */
};

/* Job-state events: the ones whose from/to are job states. */
#define JOB_EVENTS "(e.kind IN ('submitted', 'leased', 'lease_released', 'cancelled', 'cancel_requested') " \
	"OR e.kind LIKE 'job\\_%')"

static const struct inv INVARIANTS[] = {
	{ "no two attempts of one job overlap in time",
	  "SELECT a.job_id, a.id, b.id FROM attempts a JOIN attempts b ON a.job_id = b.job_id AND a.id < b.id "
	  "JOIN jobs j ON j.id = a.job_id WHERE j.name LIKE $1 AND "
	  "tstzrange(a.started_at, coalesce(a.ended_at, 'infinity'), '[)') && "
	  "tstzrange(b.started_at, coalesce(b.ended_at, 'infinity'), '[)')" },
	{ "no attempt is still running",
	  "SELECT a.job_id, a.id FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name LIKE $1 "
	  "AND a.state = 'running'" },
	{ "one lease, one attempt: unique tokens, numbers 1..n, attempts/lost counters match the rows",
	  "SELECT j.id, j.attempts_count, j.lost_count FROM jobs j WHERE j.name LIKE $1 AND ("
	  "j.attempts_count <> (SELECT count(*) FROM attempts a WHERE a.job_id = j.id) OR "
	  "j.attempts_count <> coalesce((SELECT max(number) FROM attempts a WHERE a.job_id = j.id), 0) OR "
	  "j.lost_count <> (SELECT count(*) FROM attempts a WHERE a.job_id = j.id AND a.state = 'lost') OR "
	  "EXISTS (SELECT 1 FROM attempts a JOIN attempts b ON a.token = b.token AND a.id <> b.id "
	  "WHERE a.job_id = j.id))" },
	{ "a succeeded job has exactly one succeeded attempt, its last, named by the result",
	  "SELECT j.id FROM jobs j WHERE j.name LIKE $1 AND j.state = 'succeeded' AND ("
	  "(SELECT count(*) FROM attempts a WHERE a.job_id = j.id AND a.outcome = 'succeeded') <> 1 OR "
	  "(SELECT a.outcome FROM attempts a WHERE a.job_id = j.id ORDER BY a.number DESC LIMIT 1) "
	  "IS DISTINCT FROM 'succeeded' OR (j.result->>'attempt_id')::bigint IS DISTINCT FROM "
	  "(SELECT a.id FROM attempts a WHERE a.job_id = j.id AND a.outcome = 'succeeded'))" },
	{ "no finished result lost: every ended attempt has its facts, no lost attempt took a late finish",
	  "SELECT a.job_id, a.id, a.state FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.name LIKE $1 "
	  "AND ((a.state = 'ended' AND (a.facts IS NULL OR a.outcome IS NULL OR a.ended_at IS NULL)) OR "
	  "(a.state = 'lost' AND (a.facts IS NOT NULL OR a.outcome <> 'lost')))" },
	{ "a job never regresses from succeeded (one job_succeeded event, nothing after it)",
	  "SELECT j.id FROM jobs j WHERE j.name LIKE $1 AND (EXISTS (SELECT 1 FROM events e WHERE e.job_id = j.id "
	  "AND e.from_state = 'succeeded' AND " JOB_EVENTS ") OR (j.state = 'succeeded' AND (SELECT count(*) FROM "
	  "events e WHERE e.job_id = j.id AND e.kind = 'job_succeeded') <> 1))" },
	{ "event log: submitted first, each from_state is the previous to_state",
	  "SELECT job_id, id, kind, from_state, prev FROM (SELECT e.job_id, e.id, e.kind, e.from_state, e.to_state, "
	  "lag(e.to_state) OVER (PARTITION BY e.job_id ORDER BY e.id) AS prev, "
	  "row_number() OVER (PARTITION BY e.job_id ORDER BY e.id) AS rn FROM events e JOIN jobs j ON "
	  "j.id = e.job_id WHERE j.name LIKE $1 AND " JOB_EVENTS ") x WHERE (rn = 1 AND (kind <> 'submitted' "
	  "OR to_state <> 'queued')) OR (rn > 1 AND from_state IS DISTINCT FROM prev)" },
	{ "event log: the last event's to_state is the job's state",
	  "SELECT j.id, j.state FROM jobs j WHERE j.name LIKE $1 AND j.state IS DISTINCT FROM (SELECT e.to_state "
	  "FROM events e WHERE e.job_id = j.id AND " JOB_EVENTS " ORDER BY e.id DESC LIMIT 1)" },
	{ "event log: every lease, end and loss has its event",
	  "SELECT j.id FROM jobs j WHERE j.name LIKE $1 AND ("
	  "(SELECT count(*) FROM events e WHERE e.job_id = j.id AND e.kind = 'leased') <> j.attempts_count + "
	  "(SELECT count(*) FROM events e WHERE e.job_id = j.id AND e.kind = 'lease_released') OR "
	  "(SELECT count(*) FROM events e WHERE e.job_id = j.id AND e.kind = 'attempt_lost') <> j.lost_count OR "
	  "(SELECT count(*) FROM events e WHERE e.job_id = j.id AND e.kind = 'attempt_ended') <> "
	  "(SELECT count(*) FROM attempts a WHERE a.job_id = j.id AND a.state = 'ended'))" },
};

/* Canary mode: the checks run over rows the test corrupted on purpose; a violation found is
 * counted in g_caught and printed as a diagnostic instead of failing. */
static bool g_canary;
static int g_caught;

static bool inv_ok(struct harness *h, bool cond, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool inv_ok(struct harness *h, bool cond, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		abort();
	va_end(ap);
	if (g_canary) {
		if (!cond) {
			g_caught++;
			h_diag("canary caught: %s", msg);
		}
	} else {
		h_ok(h, cond, "%s", msg);
	}
	free(msg);
	return cond;
}

/* Prints up to 5 offending rows of r as diagnostics. */
static void diag_rows(PGresult *r)
{
	for (int i = 0; i < PQntuples(r) && i < 5; i++) {
		char line[512] = "";
		size_t len = 0;
		for (int c = 0; c < PQnfields(r) && len < sizeof(line) - 64; c++)
			len += (size_t)snprintf(line + len, sizeof(line) - len, "%s%s=%s", c ? " " : "", PQfname(r, c),
				PQgetisnull(r, i, c) ? "null" : PQgetvalue(r, i, c));
		h_diag("  %s", line);
	}
}

/* Checks every invariant over the jobs named PREFIX-*, all of which must be in want_state (NULL:
 * any final state). Prints the figures as `#` lines. Returns the number of violated invariants. */
static int check_invariants(struct harness *h, const char *label, const char *prefix, const char *want_state)
{
	char *like = xasprintf("%s-%%", prefix);
	const char *p[] = { like };
	int bad = 0;

	PGresult *r = h_sql(h, "SELECT count(*), count(*) FILTER (WHERE state = 'succeeded'), "
		"count(*) FILTER (WHERE state = 'failed'), count(*) FILTER (WHERE state = 'cancelled'), "
		"count(*) FILTER (WHERE state IN ('queued', 'running')), coalesce(sum(attempts_count), 0), "
		"coalesce(sum(lost_count), 0) FROM jobs WHERE name LIKE $1", 1, p);
	long long f[7] = { -1, -1, -1, -1, -1, -1, -1 };
	for (int i = 0; r && i < 7; i++)
		f[i] = strtoll(PQgetvalue(r, 0, i), NULL, 10);
	PQclear(r);
	h_diag("%s: jobs %lld (succeeded %lld, failed %lld, cancelled %lld, unfinished %lld), attempts %lld, "
		"lost %lld", label, f[0], f[1], f[2], f[3], f[4], f[5], f[6]);
	long long oom = h_sql_int(h, "SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE "
		"j.name LIKE $1 AND a.class LIKE 'oom%'", 1, p);
	h_diag("%s: OOM attempts recovered by the ladder %lld; running-twice samples %ld, worst %lld", label, oom,
		g_samples, g_dup_running);

	if (want_state) {
		char *q = xasprintf("SELECT count(*) FROM jobs WHERE name LIKE $1 AND state <> '%s'", want_state);
		long long n = h_sql_int(h, q, 1, p);
		free(q);
		bad += !inv_ok(h, n == 0 && f[0] > 0, "%s: every job ends %s (%lld of %lld do not)", label, want_state, n,
			f[0]);
	} else {
		bad += !inv_ok(h, f[4] == 0 && f[0] > 0, "%s: every job reaches a final state (%lld unfinished)", label,
			f[4]);
	}
	bad += !inv_ok(h, g_dup_running == 0, "%s: never two running attempts of one job in any sample", label);
	for (size_t i = 0; i < sizeof(INVARIANTS) / sizeof(INVARIANTS[0]); i++) {
		r = h_sql(h, INVARIANTS[i].sql, 1, p);
		int n = r ? PQntuples(r) : -1;
		if (!inv_ok(h, n == 0, "%s: %s", label, INVARIANTS[i].what)) {
			bad++;
			if (r)
				diag_rows(r);
		}
		PQclear(r);
	}

	/* Every finish a worker saw acknowledged is stored on an ended attempt. */
	char *ids = xstrdup("");
	int acked = log_attempts(h, "finish acknowledged", &ids);
	char *arr = xasprintf("{%s}", ids);
	const char *pa[] = { arr };
	long long stored = acked ? h_sql_int(h, "SELECT count(*) FROM attempts WHERE id = ANY($1::bigint[]) "
		"AND state = 'ended' AND facts IS NOT NULL", 1, pa) : 0;
	long long distinct = acked ? h_sql_int(h, "SELECT count(DISTINCT x) FROM unnest($1::bigint[]) x", 1, pa) : 0;
	bad += !inv_ok(h, stored == distinct, "%s: every finish the workers saw acknowledged is stored (%lld of %lld)",
		label, stored, distinct);
	free(arr);
	free(ids);

	/* The API agrees with the database on each job's state and attempts. */
	r = h_sql(h, "SELECT id, state, attempts_count FROM jobs WHERE name LIKE $1 ORDER BY id", 1, p);
	int api_bad = 0;
	for (int i = 0; r && i < PQntuples(r); i++) {
		const char *id = PQgetvalue(r, i, 0);
		json_t *j = h_job(h, id);
		long st = 0;
		json_t *as = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
		if (strcmp(h_str(j, "state"), PQgetvalue(r, i, 1)) != 0 ||
			json_array_size(json_object_get(as, "attempts")) != (size_t)atoi(PQgetvalue(r, i, 2))) {
			if (api_bad++ < 3) {
				h_diag("job %s: db state %s, attempts %s", id, PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
				h_diag_json("api job", j);
			}
		}
		json_decref(j);
		json_decref(as);
	}
	bad += !inv_ok(h, r && api_bad == 0, "%s: the API shows the same states and attempts as the database", label);
	PQclear(r);
	free(like);
	return bad;
}

/* ---- scenarios ---- */

/* A pool worker, started again after a fault once its orphaned trainer is gone. */
static struct h_worker *restart_worker(struct harness *h, struct h_worker *w)
{
	h_ok(h, wait_until(trainers_gone, w, 30000), "%s: its orphaned trainer has exited", w->name);
	return h_worker_start(h, w->name, NULL) ? w : NULL;
}

struct running_on {
	struct harness *h;
	const char *gpu;
	char *job_id;
};

static bool attempt_training_on(void *arg)
{
	struct running_on *a = arg;
	const char *p[] = { a->gpu };
	PGresult *r = h_sql(a->h, "SELECT job_id FROM attempts WHERE gpu_uuid = $1 AND state = 'running' "
		"AND step >= 2 LIMIT 1", 1, p);
	bool ok = r && PQntuples(r) == 1;
	if (ok) {
		free(a->job_id);
		a->job_id = xstrdup(PQgetvalue(r, 0, 0));
	}
	PQclear(r);
	return ok;
}

/* 1. A worker SIGKILLed mid-attempt under load: the lease expires, the job re-runs elsewhere and is
 * counted lost, not as an OOM retry (it_faults covers the single-job case; this adds load). */
static void test_worker_kill(struct harness *h, struct h_worker **pool)
{
	const char *pre = "kill";
	int n = submit_batch(h, pre, 9, 30);
	h_ok(h, n == 9, "worker kill: 9 jobs submitted");
	struct running_on ro = { h, "GPU-sim-p2-0", NULL };
	if (!h_ok(h, wait_until(attempt_training_on, &ro, 30000), "worker kill: p2 is training a job"))
		return;
	int64_t t0 = util_mono_ms();
	h_ok(h, h_worker_stop(h, pool[1], SIGKILL) == 0, "worker kill: p2 killed with SIGKILL mid-attempt (job %s)",
		ro.job_id);
	json_t *done = h_wait_job(h, ro.job_id, "succeeded", 60000);
	h_diag("worker kill: the victim's job succeeded elsewhere %lld ms after the kill",
		(long long)(util_mono_ms() - t0));
	h_ok(h, done && h_int(done, "lost_count") == 1 && h_int(done, "attempts") == 2,
		"worker kill: the job is counted lost once (lost_count %lld, attempts %lld)", h_int(done, "lost_count"),
		h_int(done, "attempts"));
	h_ok(h, done && json_equal(json_object_get(done, "current_config"), json_object_get(done, "target_config")),
		"worker kill: a lost attempt is not an OOM retry (config unchanged)");
	const char *p[] = { ro.job_id };
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1 AND (class IS NOT NULL AND "
		"class <> 'success')", 1, p) == 0, "worker kill: no attempt of the job was classified as a failure");
	json_decref(done);
	free(ro.job_id);
	h_ok(h, wait_count(h, pre, SQL_FINAL, 9, 90000), "worker kill: every job finished");
	pool[1] = restart_worker(h, pool[1]);
	check_invariants(h, "worker kill", pre, "succeeded");
}

struct near_end_arg {
	struct harness *h;
};

static bool attempt_near_end(void *arg)
{
	struct near_end_arg *a = arg;
	/* A heartbeat stores its progress only when it renews the lease (every third of a lease, migration
	 * 015), so the stored step may lag: an attempt also counts as near its end once it has run 80 % of
	 * the median duration of the attempts that succeeded before it. */
	return h_sql_int(a->h, "SELECT count(*) FROM attempts a WHERE a.state = 'running' AND ((a.total_steps > 0 AND "
		"a.step >= a.total_steps - 4) OR a.started_at < now() - 0.8 * (SELECT percentile_cont(0.5) WITHIN GROUP "
		"(ORDER BY e.ended_at - e.started_at) FROM attempts e WHERE e.state = 'ended' AND e.outcome = 'succeeded'))",
		0, NULL) > 0;
}

struct undelivered_arg {
	struct harness *h;
	int before;
};

static bool finish_undelivered(void *arg)
{
	struct undelivered_arg *a = arg;
	return count_lines(a->h, "finish not delivered, retrying") > a->before;
}

/* 2. rungd SIGKILLed twice while three workers lease and finish 20 short jobs. */
static void test_rungd_kills(struct harness *h)
{
	const char *pre = "rkill";
	int n = submit_batch(h, pre, 20, 30);
	h_ok(h, n == 20, "rungd kill: 20 jobs submitted");
	int thresholds[2] = { 4, 11 };
	for (int k = 0; k < 2; k++) {
		h_ok(h, wait_count(h, pre, SQL_SUCCEEDED, thresholds[k], 90000), "rungd kill %d: %d jobs succeeded",
			k + 1, thresholds[k]);
		struct near_end_arg ne = { h };
		wait_until(attempt_near_end, &ne, 10000); /* kill while a trainer is about to end */
		struct undelivered_arg ua = { h, count_lines(h, "finish not delivered, retrying") };
		int64_t t0 = util_mono_ms();
		h_ok(h, h_server_stop(h, SIGKILL) == 0, "rungd kill %d: rungd killed with SIGKILL", k + 1);
		/* Down until a worker holds a finish it cannot deliver (bounded below the 2 s lease). */
		bool spooled = wait_until(finish_undelivered, &ua, 1200);
		int64_t down = util_mono_ms() - t0;
		h_ok(h, h_server_restart(h) == 0, "rungd kill %d: rungd restarted", k + 1);
		h_diag("rungd kill %d: down %lld ms (a finish waiting in a spool: %s), healthy again after %lld ms", k + 1,
			(long long)down, spooled ? "yes" : "no", (long long)(util_mono_ms() - t0));
	}
	h_ok(h, wait_count(h, pre, SQL_FINAL, 20, 120000), "rungd kill: every job finished");
	/* A finish that could not be delivered landed when its attempt ended with the outcome the worker
	 * reported: acknowledged on a retry, or committed by the try the kill cut off (its retry then
	 * answers 409, superseded, and the result is kept all the same). Counting "acknowledged" lines
	 * missed the second case. */
	char *und = xstrdup("");
	int nund = log_attempts(h, "finish not delivered, retrying", &und);
	char *a1 = xasprintf("{%s}", und);
	const char *pp[] = { a1 };
	long long landed = nund ? h_sql_int(h, "SELECT count(*) FROM attempts WHERE id = ANY ($1::bigint[]) "
		"AND state = 'ended' AND outcome IS NOT NULL AND outcome <> 'lost'", 1, pp) : 0;
	h_diag("rungd kill: %lld finishes were retried through an outage and landed", landed);
	h_ok(h, landed >= 1, "rungd kill: a finish spooled while rungd was down landed (its result recorded)");
	free(a1);
	free(und);
	check_invariants(h, "rungd kill", pre, "succeeded");
}

/* 3. Postgres restarted (fast, then immediate) while jobs run. */
static void test_pg_restarts(struct harness *h)
{
	const char *pre = "pgrs";
	int n = submit_batch(h, pre, 14, 30);
	h_ok(h, n == 14, "pg restart: 14 jobs submitted");
	const char *modes[2] = { "fast", "immediate" };
	int thresholds[2] = { 3, 8 };
	for (int k = 0; k < 2; k++) {
		h_ok(h, wait_count(h, pre, SQL_SUCCEEDED, thresholds[k], 90000), "pg restart %s: %d jobs succeeded",
			modes[k], thresholds[k]);
		long long before = h_sql_int(h, "SELECT count(*) FROM attempts WHERE state = 'running'", 0, NULL);
		int64_t t0 = util_mono_ms();
		h_ok(h, h_pg_restart(h, modes[k]) == 0, "pg restart %s: Postgres restarted with %lld attempts running",
			modes[k], before);
		int64_t back = util_mono_ms();
		long long s0 = h_sql_int(h, SQL_SUCCEEDED, 1, (const char *[]){ "pgrs-%" });
		bool progress = wait_count(h, pre, SQL_SUCCEEDED, s0 + 1 > 14 ? 14 : s0 + 1, 60000);
		h_ok(h, progress && h_proc_alive(&h->server), "pg restart %s: rungd survives and jobs keep succeeding",
			modes[k]);
		h_diag("pg restart %s: Postgres down %lld ms; next job succeeded %lld ms after it was back", modes[k],
			(long long)(back - t0), (long long)(util_mono_ms() - back));
	}
	h_ok(h, wait_count(h, pre, SQL_FINAL, 14, 120000), "pg restart: every job finished");
	check_invariants(h, "pg restart", pre, "succeeded");
}

struct lost_arg {
	struct harness *h;
	const char *attempt_id;
};

static bool attempt_lost(void *arg)
{
	struct lost_arg *a = arg;
	const char *p[] = { a->attempt_id };
	return h_sql_int(a->h, "SELECT count(*) FROM attempts WHERE id = $1 AND state = 'lost'", 1, p) == 1;
}

/* 4. A worker that cannot reach rungd for longer than the lease (SIGSTOP, then SIGCONT). */
static void test_stall(struct harness *h)
{
	const char *pre = "stall";
	struct h_worker *st = h_worker_start(h, "stalled", NULL);
	if (!h_ok(h, st && submit_batch(h, pre, 1, 40) == 1, "stall: worker started, job submitted"))
		return;
	json_t *as;
	char *like = xasprintf("%s-%%", pre);
	const char *pl[] = { like };
	char *job = xasprintf("%lld", h_sql_int(h, "SELECT id FROM jobs WHERE name LIKE $1", 1, pl));
	free(like);
	as = h_wait_attempts(h, job, 1, "running", 30000);
	char *aid = h_id(json_array_get(as, 0), "id");
	json_decref(as);
	struct running_on ro = { h, "GPU-sim-stalled-0", NULL };
	if (!h_ok(h, aid && wait_until(attempt_training_on, &ro, 30000), "stall: the stalled worker is training"))
		goto out;
	free(ro.job_id);
	int64_t t0 = util_mono_ms();
	kill(st->proc.pid, SIGSTOP);
	struct h_worker *other = h_worker_start(h, "other", NULL);
	struct lost_arg la = { h, aid };
	h_ok(h, wait_until(attempt_lost, &la, 15000), "stall: the stalled attempt is reaped as lost");
	h_diag("stall: reaped %lld ms after the worker stopped", (long long)(util_mono_ms() - t0));
	json_t *done = h_wait_job(h, job, "succeeded", 60000);
	h_ok(h, done && h_int(done, "lost_count") == 1, "stall: the job re-runs on another worker and succeeds");
	json_decref(done);
	/* Its trainer ran on while the worker was stopped: the finish waits to be sent. */
	h_ok(h, wait_until(trainers_gone, st, 30000), "stall: the stalled worker's trainer has ended meanwhile");
	int64_t stopped = util_mono_ms() - t0;
	kill(st->proc.pid, SIGCONT);
	h_diag("stall: worker stopped %lld ms (lease 2000 ms)", (long long)stopped);
	h_ok(h, stopped > 2000, "stall: stopped longer than the lease");
	char *line = xasprintf("msg=\"finish superseded, dropped\" attempt=%s ", aid);
	struct log_arg lg = { h, st, line };
	h_ok(h, wait_until(log_has_cb, &lg, 15000), "stall: its late finish is refused with 409 and dropped");
	free(line);
	const char *pa[] = { aid };
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE id = $1 AND state = 'lost' AND facts IS NULL", 1,
		pa) == 1, "stall: the lost attempt stays lost (the late facts are not stored)");
	/* Still alive and leasing: with the other worker gone it runs the next job. */
	h_ok(h, other && h_worker_stop(h, other, SIGTERM) == 0, "stall: the other worker stops");
	h_ok(h, submit_batch(h, "stall-after", 2, 10) == 2, "stall: two more jobs submitted");
	h_ok(h, wait_count(h, pre, SQL_FINAL, 3, 60000), "stall: the stalled worker leases and runs them");
	h_ok(h, h_proc_alive(&st->proc), "stall: the stalled worker is still alive");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE gpu_uuid = 'GPU-sim-stalled-0' AND "
		"outcome = 'succeeded'", 0, NULL) >= 1, "stall: a later job succeeded on the stalled worker's GPU");
	check_invariants(h, "stall", pre, "succeeded");
	h_worker_stop(h, st, SIGTERM);
out:
	free(aid);
	free(job);
}

static long metric(struct harness *h, const char *url, const char *name)
{
	char *saved = h->base_url;
	h->base_url = (char *)url;
	long st = 0, v = -1;
	json_decref(h_get(h, "/metrics", &st));
	h->base_url = saved;
	const char *at = h->last_body;
	size_t nl = strlen(name);
	while (st == 200 && at && (at = strstr(at, name))) {
		if ((at == h->last_body || at[-1] == '\n') && (at[nl] == ' ' || at[nl] == '{')) {
			const char *sp = strchr(at, ' ');
			v = sp ? strtol(sp + 1, NULL, 10) : -1;
			break;
		}
		at += nl;
	}
	return v;
}

struct parked_arg {
	struct harness *h;
	const char *url;
};

static bool parked(void *arg)
{
	struct parked_arg *a = arg;
	return metric(a->h, a->url, "rung_lease_waiters") >= 1;
}

struct notified_arg {
	struct harness *h;
	const char *url;
	const char *event;
};

static bool notified(void *arg)
{
	struct notified_arg *a = arg;
	char *name = xasprintf("rung_lease_notifies_total{event=\"%s\"}", a->event);
	long v = metric(a->h, a->url, name);
	free(name);
	return v >= 1;
}

/* 5. Two rungd replicas on one database, workers split across them. */
static void test_replicas(struct harness *h)
{
	struct h_proc b = { 0 };
	char *burl = NULL, *aurl = xstrdup(h->base_url);
	/* B's reaper is held back (an hour): every lease that expires is reaped by A, whose announce
	 * must reach B's parked worker (the reaper's re-queue below) */
	const char *bextra[] = { "--poll-fallback-ms", "30000", "--reap-interval-ms", "3600000", NULL };
	const char *pre = "repl";
	if (!h_ok(h, h_replica_start(h, &b, "rungd-b", bextra, &burl) == 0,
		"replicas: a second rungd (poll fallback 30 s) on the same database"))
		goto out;
	/* NOTIFY wake-up: a worker parked 30 s on B gets a job submitted on A at once. */
	const char *bargs[] = { "--server", burl, "--lease-wait-ms", "30000", NULL };
	struct h_worker_opts bo = { .args = bargs };
	struct h_worker *wb = h_worker_start(h, "rb1", &bo);
	struct parked_arg pk = { h, burl };
	h_ok(h, wb && wait_until(parked, &pk, 15000), "replicas: a worker parks a 30 s long-poll on B");
	for (int k = 0; k < 2; k++) {
		char *name = xasprintf("%s-wake%d", pre, k);
		int64_t t0 = util_mono_ms();
		h_ok(h, submit_one(h, name, 10, false), "replicas: job %s submitted on A", name);
		char *like = xasprintf("%s", name);
		const char *pl[] = { like };
		char *id = xasprintf("%lld", h_sql_int(h, "SELECT id FROM jobs WHERE name = $1", 1, pl));
		json_t *as = h_wait_attempts(h, id, 1, NULL, 10000);
		int64_t took = util_mono_ms() - t0;
		h_diag("replicas: wake-up %d: leased on B %lld ms after the submit on A (B's fallback poll: 30000 ms)",
			k + 1, (long long)took);
		h_ok(h, as && took < 5000, "replicas: the worker on B leased it through LISTEN/NOTIFY (%lld ms)",
			(long long)took);
		json_decref(as);
		json_t *done = h_wait_job(h, id, "succeeded", 60000);
		json_decref(done);
		h_ok(h, wait_until(parked, &pk, 15000), "replicas: the worker parks on B again");
		free(id);
		free(like);
		free(name);
	}
	/* Each replica counts the wake-ups: A sent them, B received them, and A heard its own and
	 * ignored them (it woke its own waiters when it sent them). */
	struct notified_arg na = { h, aurl, "own" };
	h_ok(h, wait_until(notified, &na, 10000) && metric(h, aurl, "rung_lease_notifies_total{event=\"sent\"}") >= 2,
		"replicas: A sent its wake-ups and ignored its own NOTIFYs (own %ld)",
		metric(h, aurl, "rung_lease_notifies_total{event=\"own\"}"));
	h_ok(h, metric(h, burl, "rung_lease_notifies_total{event=\"received\"}") >= 2,
		"replicas: B received them");
	/* A re-queue wakes B as well: A applies a finish that re-queues and then announces it with a
	 * NOTIFY of its own (lease_announce). rb1 stops so that the job goes to a fake worker on A,
	 * then parks on B again before A takes the fake worker's OOM. */
	h_ok(h, h_worker_stop(h, wb, SIGTERM) == 0, "replicas: rb1 stops");
	h_ok(h, submit_one(h, "rqwake", 10, false), "replicas: job rqwake submitted on A");
	const char *rq[] = { "rqwake" };
	char *rqid = xasprintf("%lld", h_sql_int(h, "SELECT id FROM jobs WHERE name = $1", 1, rq));
	char *fw = h_fake_register(h, "ra-fake", "GPU-fake-rqwake", 24576);
	long st = 0;
	json_t *fl = fw ? h_fake_lease(h, fw, "GPU-fake-rqwake", 0, &st) : NULL;
	char *faid = fl ? h_id(fl, "attempt_id") : NULL, *fjob = fl ? h_id(fl, "job_id") : NULL;
	h_ok(h, faid && fjob && !strcmp(fjob, rqid), "replicas: a fake worker on A leases rqwake");
	h_ok(h, h_worker_restart(h, wb) == 0 && wait_until(parked, &pk, 15000), "replicas: rb1 parks on B again");
	json_t *oom = json_pack("{s:i, s:n, s:b, s:s, s:s, s:i, s:i, s:i, s:i, s:{s:i, s:i}, s:{s:i, s:i, s:i, s:i, "
				"s:[]}, s:s, s:i, s:[s]}", "exit_code", 1, "signal", "cancelled", 0, "phase", "train",
				"oom_phase", "train", "first_step", 0, "last_step", 3, "steps_done", 3, "total_steps",
				10, "signatures", "cuda_oom", 1, "error_running_job", 1, "oom", "tried_to_allocate_mib",
				2048, "total_capacity_mib", 24564, "free_mib", 1100, "allocated_by_pytorch_mib", 21564,
				"processes", "error", "torch.OutOfMemoryError: CUDA out of memory", "duration_ms", 4000,
				"log_tail", "torch.OutOfMemoryError: CUDA out of memory");
	int64_t t0 = util_mono_ms();
	json_t *fin = faid ? h_fake_finish(h, faid, h_str(fl, "token"), oom, &st) : NULL;
	h_ok(h, st == 200 && !strcmp(h_str(fin, "job_state") ?: "", "queued"),
		"replicas: A re-queues rqwake after its OOM (%ld, %s)", st, h_str(fin, "job_state") ?: "-");
	json_t *as = h_wait_attempts(h, rqid, 2, NULL, 10000);
	int64_t took = util_mono_ms() - t0;
	h_ok(h, as && took < 5000, "replicas: rb1 on B leased the re-queued job through LISTEN/NOTIFY (%lld ms)",
		(long long)took);
	json_t *rqdone = h_wait_job(h, rqid, "succeeded", 60000);
	h_ok(h, rqdone != NULL, "replicas: rqwake succeeds on B");
	h_ok(h, wait_until(parked, &pk, 15000), "replicas: rb1 parks on B again");
	json_decref(rqdone);
	json_decref(as);
	json_decref(fin);
	json_decref(oom);
	json_decref(fl);
	free(faid);
	free(fjob);
	free(fw);
	free(rqid);
	/* A lease that expires wakes B too: a fake worker on A leases reapwake and goes silent, its lease
	 * held an hour until rb1 parks on B (30 s fallback poll), then expired; A's reaper re-queues it
	 * and announces it (lease_announce), and rb1 gets it at once. */
	h_ok(h, h_worker_stop(h, wb, SIGTERM) == 0, "replicas: rb1 stops");
	h_ok(h, submit_one(h, "reapwake", 10, false), "replicas: job reapwake submitted on A");
	const char *rw[] = { "reapwake" };
	char *rwid = xasprintf("%lld", h_sql_int(h, "SELECT id FROM jobs WHERE name = $1", 1, rw));
	char *rfw = h_fake_register(h, "ra-silent", "GPU-fake-reapwake", 24576);
	json_t *rl = rfw ? h_fake_lease(h, rfw, "GPU-fake-reapwake", 0, &st) : NULL;
	char *rjob = rl ? h_id(rl, "job_id") : NULL;
	h_ok(h, rjob && !strcmp(rjob, rwid), "replicas: a fake worker on A leases reapwake, then goes silent");
	PQclear(h_sql(h, "UPDATE attempts SET lease_expires_at = now() + interval '1 hour' WHERE job_id = $1::bigint",
		      1, (const char *[]){ rwid }));
	h_ok(h, h_worker_restart(h, wb) == 0 && wait_until(parked, &pk, 15000), "replicas: rb1 parks on B again");
	PQclear(h_sql(h, "UPDATE attempts SET lease_expires_at = now() WHERE job_id = $1::bigint", 1,
		      (const char *[]){ rwid }));
	int64_t rt0 = util_mono_ms();
	json_t *ras = h_wait_attempts(h, rwid, 2, NULL, 20000);
	int64_t rtook = util_mono_ms() - rt0;
	h_ok(h, ras && rtook < 5000,
	     "replicas: rb1 on B leased it %lld ms after its lease expired (A's reaper; B's fallback poll is 30 s)",
	     (long long)rtook);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts a JOIN jobs j ON j.id = a.job_id "
			     "WHERE j.name = $1 AND a.number = 1 AND a.outcome = 'lost'", 1, rw) == 1,
	     "replicas: its first attempt was reaped as lost");
	json_t *rwdone = h_wait_job(h, rwid, "succeeded", 60000);
	h_ok(h, rwdone != NULL, "replicas: reapwake succeeds on B");
	h_ok(h, wait_until(parked, &pk, 15000), "replicas: rb1 parks on B again");
	json_decref(rwdone);
	json_decref(ras);
	json_decref(rl);
	free(rjob);
	free(rfw);
	free(rwid);
	/* Load split across both: two workers on A, two on B. */
	struct h_worker *wa1 = h_worker_start(h, "ra1", NULL), *wa2 = h_worker_start(h, "ra2", NULL);
	const char *bargs2[] = { "--server", burl, NULL };
	struct h_worker_opts bo2 = { .args = bargs2 };
	struct h_worker *wb2 = h_worker_start(h, "rb2", &bo2);
	h_ok(h, wa1 && wa2 && wb2, "replicas: workers ra1, ra2 on A and rb1, rb2 on B");
	int n = submit_batch(h, "repl-a", 8, 20);
	char *own = h->base_url;
	h->base_url = burl;
	int nb = submit_batch(h, "repl-b", 8, 20);
	h->base_url = own;
	h_ok(h, n == 8 && nb == 8, "replicas: 16 jobs submitted, half on each replica");
	h_ok(h, wait_count(h, pre, SQL_FINAL, 18, 120000), "replicas: every job finished");
	long long on_b = h_sql_int(h, "SELECT count(*) FROM attempts a JOIN workers w ON w.id = a.worker_id WHERE "
		"w.name LIKE 'rb%' AND a.outcome = 'succeeded'", 0, NULL);
	long long on_a = h_sql_int(h, "SELECT count(*) FROM attempts a JOIN workers w ON w.id = a.worker_id WHERE "
		"w.name LIKE 'ra%' AND a.outcome = 'succeeded'", 0, NULL);
	h_diag("replicas: attempts succeeded through A %lld, through B %lld", on_a, on_b);
	h_ok(h, on_a >= 1 && on_b >= 1, "replicas: both replicas handed out leases");
	check_invariants(h, "replicas", pre, "succeeded");
	h_ok(h, h_proc_alive(&b), "replicas: B is still running");
out:
	h_replica_free(h, &b);
	free(burl);
	free(aurl);
}

/* ---- soak: the same faults at random ---- */

enum fault {
	F_WORKER_KILL,
	F_WORKER_STALL,
	F_RUNGD_A,
	F_RUNGD_B,
	F_PG_FAST,
	F_PG_IMMEDIATE,
	F_COUNT
};

static const char *const FAULT_NAMES[F_COUNT] = { "worker_sigkill", "worker_stall", "rungd_a_sigkill",
	"rungd_b_sigkill", "pg_restart_fast", "pg_restart_immediate" };

#define SOAK_WORKERS 6

struct soak_w {
	char *name;
	struct h_worker *w;
	bool on_b;
	bool killed;
	int64_t stalled_until; /* 0: not stalled */
};

/* (Re)starts soak worker sw on its replica with a fresh GPU state file. */
static bool soak_start_worker(struct harness *h, struct soak_w *sw, const char *burl)
{
	const char *bargs[] = { "--server", burl, NULL };
	struct h_worker_opts o = { .args = sw->on_b ? bargs : NULL };
	sw->w = h_worker_start(h, sw->name, &o);
	return sw->w != NULL;
}

static bool soak_submit(struct harness *h, const char *burl, bool a_up, bool b_up, long seq)
{
	char *own = h->base_url;
	char *name = xasprintf("soak-%06ld", seq);
	bool oom = rand() % 8 == 0, ok = false;
	int steps = 10 + rand() % 30;
	bool use_b = rand() % 2;
	for (int t = 0; t < 2 && !ok; t++, use_b = !use_b) {
		if (use_b ? !b_up : !a_up)
			continue;
		h->base_url = use_b ? (char *)burl : own;
		ok = submit_one(h, name, steps, oom);
	}
	h->base_url = own;
	free(name);
	return ok;
}

static int soak(struct harness *h, int seconds)
{
	struct h_proc b = { 0 };
	char *burl = NULL;
	struct soak_w ws[SOAK_WORKERS] = { 0 };
	long faults[F_COUNT] = { 0 }, submitted = 0, seq = 0;
	bool a_up = true, b_up = true;
	unsigned seed = getenv("SOAK_SEED") ? (unsigned)atoi(getenv("SOAK_SEED")) : (unsigned)time(NULL);

	srand(seed);
	h_diag("soak: %d s, seed %u", seconds, seed);
	if (!h_ok(h, h_server_start(h, NULL) == 0, "soak: rungd A starts"))
		goto out;
	if (!h_ok(h, h_replica_start(h, &b, "rungd-b", NULL, &burl) == 0, "soak: rungd B starts"))
		goto out;
	for (int i = 0; i < SOAK_WORKERS; i++) {
		ws[i].name = xasprintf("s%d", i);
		ws[i].on_b = i % 2;
		if (!h_ok(h, soak_start_worker(h, &ws[i], burl), "soak: worker s%d starts on %s", i, ws[i].on_b ? "B" : "A"))
			goto out;
	}
	int64_t t_end = util_mono_ms() + (int64_t)seconds * 1000, next_fault = util_mono_ms() + 3000;
	int64_t next_submit = 0, next_report = util_mono_ms() + 30000;
	while (util_mono_ms() < t_end) {
		int64_t now = util_mono_ms();
		sample_running(h);
		long long open = h_sql_int(h, "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')", 0, NULL);
		if (now >= next_submit && open >= 0 && open < 2 * SOAK_WORKERS) {
			submitted += soak_submit(h, burl, a_up, b_up, seq++);
			next_submit = now + 100 + rand() % 300;
		}
		if (!a_up) /* a restart that failed is tried again */
			a_up = h_server_restart(h) == 0;
		if (!b_up)
			b_up = h_replica_restart(h, &b, burl) == 0;
		for (int i = 0; i < SOAK_WORKERS; i++) {
			if (ws[i].stalled_until && now >= ws[i].stalled_until) {
				kill(ws[i].w->proc.pid, SIGCONT);
				ws[i].stalled_until = 0;
			}
			if (ws[i].killed && trainers_gone(ws[i].w) && soak_start_worker(h, &ws[i], burl))
				ws[i].killed = false;
		}
		if (now >= next_fault) {
			enum fault f = (enum fault)(rand() % F_COUNT);
			int i = rand() % SOAK_WORKERS;
			bool done = false;
			switch (f) {
			case F_WORKER_KILL:
				if (!ws[i].killed && !ws[i].stalled_until) {
					done = h_worker_stop(h, ws[i].w, SIGKILL) == 0;
					ws[i].killed = done;
				}
				break;
			case F_WORKER_STALL:
				if (!ws[i].killed && !ws[i].stalled_until) {
					done = kill(ws[i].w->proc.pid, SIGSTOP) == 0;
					ws[i].stalled_until = now + 2500 + rand() % 2000;
				}
				break;
			case F_RUNGD_A:
				done = h_server_stop(h, SIGKILL) == 0;
				a_up = h_server_restart(h) == 0;
				break;
			case F_RUNGD_B:
				done = h_replica_stop(&b, SIGKILL) == 0;
				b_up = h_replica_restart(h, &b, burl) == 0;
				break;
			case F_PG_FAST:
			case F_PG_IMMEDIATE:
				done = h_pg_restart(h, f == F_PG_FAST ? "fast" : "immediate") == 0;
				break;
			case F_COUNT:
				break;
			}
			faults[f] += done;
			next_fault = util_mono_ms() + 3000 + rand() % 5000;
		}
		if (now >= next_report) {
			h_diag("soak: %lld s left, %ld submitted, %lld open", (long long)(t_end - now) / 1000, submitted,
				open);
			next_report = now + 30000;
		}
		nap_ms(50);
	}
	/* Stop the faults, bring everything back, let the work drain. */
	for (int i = 0; i < SOAK_WORKERS; i++) {
		if (ws[i].stalled_until)
			kill(ws[i].w->proc.pid, SIGCONT);
		if (ws[i].killed) {
			wait_until(trainers_gone, ws[i].w, 30000);
			soak_start_worker(h, &ws[i], burl);
		}
	}
	if (!h_proc_alive(&h->server))
		h_server_restart(h);
	if (!h_proc_alive(&b))
		h_replica_restart(h, &b, burl);
	int64_t t_drain = util_mono_ms();
	bool drained = false;
	for (int64_t dl = util_mono_ms() + 240000; util_mono_ms() < dl;) {
		sample_running(h);
		if (h_sql_int(h, "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')", 0, NULL) == 0) {
			drained = true;
			break;
		}
		nap_ms(200);
	}
	h_ok(h, drained, "soak: every job reached a final state after the faults stopped (%lld ms)",
		(long long)(util_mono_ms() - t_drain));
	long total = 0;
	for (int f = 0; f < F_COUNT; f++)
		total += faults[f];
	h_diag("soak summary: %ld jobs submitted, %ld faults injected", submitted, total);
	for (int f = 0; f < F_COUNT; f++)
		h_diag("soak summary: faults %-22s %ld", FAULT_NAMES[f], faults[f]);
	int bad = check_invariants(h, "soak summary", "soak", NULL);
	PGresult *r = h_sql(h, "SELECT state, count(*) FROM jobs WHERE name LIKE 'soak-%' GROUP BY state ORDER BY 1",
		0, NULL);
	for (int i = 0; r && i < PQntuples(r); i++)
		h_diag("soak summary: jobs %-10s %s", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
	PQclear(r);
	h_diag("soak summary: invariant violations %d (running-twice sampled %ld times)", bad, g_samples);
out:
	for (int i = 0; i < SOAK_WORKERS; i++)
		free(ws[i].name);
	h_replica_free(h, &b);
	free(burl);
	return h_free(h);
}

/* The checks themselves bite: a job corrupted on purpose (two overlapping succeeded attempts
 * sharing a token, no facts, no lease or end events) trips the invariants it breaks. */
static void test_canary(struct harness *h)
{
	long long id = h_sql_int(h, "INSERT INTO jobs (name, kind, state, target_config, current_config, recovery, "
		"attempts_count, result) VALUES ('canary-000', 'image', 'succeeded', '{}', '{}', '{}', 2, '{}') "
		"RETURNING id", 0, NULL);
	char *ids = xasprintf("%lld", id);
	const char *p[] = { ids };
	/* lease_event_id NULL: attempts without their `leased` event (an attempt row is that event since 015) */
	PGresult *r = h_sql(h, "INSERT INTO attempts (job_id, number, config, config_hash, token, lease_expires_at, "
		"state, outcome, started_at, ended_at, lease_event_id) VALUES "
		"($1, 1, '{}', 'x', 'same', now(), 'ended', 'succeeded', now() - interval '10 s', now(), NULL), "
		"($1, 2, '{}', 'x', 'same', now(), 'ended', 'succeeded', now() - interval '5 s', now(), NULL)", 1, p);
	PQclear(r);
	r = h_sql(h, "INSERT INTO events (job_id, kind, to_state) VALUES ($1, 'submitted', 'queued')", 1, p);
	PQclear(r);
	long long dup = g_dup_running;
	g_canary = true;
	check_invariants(h, "canary", "canary", "succeeded");
	g_canary = false;
	g_dup_running = dup;
	h_ok(h, g_caught == 7, "canary: the invariant checks catch a corrupted job (%d of 7 violations found)",
		g_caught);
	free(ids);
}

int main(void)
{
	struct harness *h = h_new("it_chaos");
	const char *soak_s = getenv("RUNG_CHAOS_SOAK_SECONDS");
	if (soak_s && atoi(soak_s) > 0)
		return soak(h, atoi(soak_s));
	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	struct h_worker *pool[3];
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "p%d", i + 1);
		pool[i] = h_worker_start(h, name, NULL);
	}
	if (!h_ok(h, pool[0] && pool[1] && pool[2], "three workers start"))
		return h_free(h);
	test_worker_kill(h, pool);
	test_rungd_kills(h);
	test_pg_restarts(h);
	for (int i = 0; i < 3; i++)
		if (pool[i])
			h_worker_stop(h, pool[i], SIGTERM);
	test_stall(h);
	test_replicas(h);
	test_canary(h);
	return h_free(h);
}
