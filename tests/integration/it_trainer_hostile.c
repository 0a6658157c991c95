/* Integration: a hostile trainer (issue 4). A real rung-worker runs a generated sh script as its
 * trainer; the job name picks the behaviour: multi-MB lines, no newline at all, binary garbage,
 * a 400 MB flood with no pause, closed stdout/stderr, a grandchild holding the pipe, SIGINT ignored on cancel. Each attempt must
 * end cleanly (facts stored, log_tail capped), the worker must heartbeat through the flood with a
 * bounded RSS, lease the next job, and leave no process of the trainer's group behind. A trainer
 * that goes silent (a hang) is killed by a worker with --stall-timeout-s and reported as stalled:
 * env_fault, rule trainer_stalled. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "util.h"

#define RSS_LIMIT_KB (200 * 1024)

static const char script_fmt[] =
	"#!/bin/sh\n"
	"dir='%s'\n"
	"mode=$(grep -o 'hostile-[a-z]*' \"$1\" | head -n 1)\n"
	"[ -n \"$mode\" ] && echo $$ > \"$dir/$mode.pid\"\n"
	"case \"$mode\" in\n"
	"hostile-bigline) i=0; while [ $i -lt 12 ]; do head -c 4000000 /dev/zero | tr '\\0' x; echo; "
	"i=$((i+1)); sleep 0.2; done ;;\n"
	"hostile-nonl) head -c 20000000 /dev/zero | tr '\\0' a; sleep 1 ;;\n"
	"hostile-binary) i=0; while [ $i -lt 10 ]; do head -c 2000000 /dev/urandom; sleep 0.25; i=$((i+1)); done ;;\n"
	"hostile-flood) yes 'a line of trainer output that never stops' | head -c 400000000 ;;\n"
	"hostile-closed) exec >&- 2>&- </dev/null; sleep 3 ;;\n"
	"hostile-grandchild) sh -c 'echo $$ > \"$0/grandchild.pid\"; exec sleep 300' \"$dir\" & "
	"while [ ! -s \"$dir/grandchild.pid\" ]; do sleep 0.05; done; echo parent leaves ;;\n"
	"hostile-noint) trap '' INT; echo started; while :; do sleep 0.1; done ;;\n"
	"hostile-hang) echo started; exec sleep 300 ;;\n"
	"*) exec '%s/bin/sim/rung-sim-trainer' \"$1\" ;;\n"
	"esac\n"
	"exit 0\n";

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static long rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "VmRSS:", 6))
			kb = strtol(line + 6, NULL, 10);
	fclose(f);
	return kb;
}

/* Whether pid is gone (no such process, or a zombie waiting for init). */
static bool pid_gone(pid_t pid)
{
	char path[64], line[256];
	bool gone = true;
	if (pid <= 0)
		return true;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return true;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "State:", 6))
			gone = strchr(line, 'Z') != NULL || strchr(line, 'X') != NULL;
	fclose(f);
	return gone;
}

static pid_t read_pid(const char *dir, const char *name)
{
	char *p = xasprintf("%s/%s.pid", dir, name);
	FILE *f = fopen(p, "r");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	free(p);
	return (pid_t)v;
}

struct seen {
	char state[16], hb[64];
	long long id;
};

/* The job's latest attempt: id, state, last_heartbeat_at. False when none yet. */
static bool latest_attempt(struct harness *h, const char *job, struct seen *s)
{
	const char *p[] = { job };
	PGresult *r = h_sql(h, "SELECT id, state, coalesce(last_heartbeat_at::text, '') FROM attempts "
			       "WHERE job_id = $1 ORDER BY id DESC LIMIT 1", 1, p);
	bool ok = r && PQntuples(r) == 1;
	if (ok) {
		s->id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
		snprintf(s->state, sizeof s->state, "%s", PQgetvalue(r, 0, 1));
		snprintf(s->hb, sizeof s->hb, "%s", PQgetvalue(r, 0, 2));
	}
	PQclear(r);
	return ok;
}

/* Runs one job whose trainer behaves as `mode`; checks the attempt's end, heartbeats during the
 * run (min_beats distinct values), the worker's RSS, and (cancel) cancel with SIGKILL. */
static void run_mode(struct harness *h, struct h_worker *w, const char *mode, int min_beats, bool cancel)
{
	json_t *cfg = h_config(mode, 10), *extra = json_pack("{s:{s:i}}", "recovery", "max_attempts", 1);
	json_t *job = h_submit(h, cfg, extra);
	char *id = h_id(job, "id");
	struct seen s = { 0 };
	char last_hb[64] = "";
	int beats = 0;
	long max_rss = 0;
	bool cancelled_sent = false;
	/* the worker scans the 400 MB flood in ~7 s, in over 40 s under ASan: the deadline stretches */
	int64_t deadline = util_mono_ms() + 40000 * h_slow(), t0 = util_mono_ms();

	json_decref(cfg);
	json_decref(extra);
	json_decref(job);
	if (!h_ok(h, id != NULL, "%s: submitted", mode))
		return;
	while (util_mono_ms() < deadline) {
		long kb = rss_kb(w->proc.pid);
		if (kb > max_rss)
			max_rss = kb;
		if (latest_attempt(h, id, &s)) {
			if (!strcmp(s.state, "running") && s.hb[0] && strcmp(s.hb, last_hb)) {
				beats++;
				snprintf(last_hb, sizeof last_hb, "%s", s.hb);
			}
			if (strcmp(s.state, "running"))
				break;
			if (cancel && !cancelled_sent && read_pid(h->tmp, mode) > 0) {
				long st = 0;
				json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", id));
				h_ok(h, st == 200, "%s: cancel accepted (got %ld)", mode, st);
				cancelled_sent = true;
			}
		}
		sleep_ms(50);
	}
	h_diag("%s: attempt %lld %s after %lld ms, %d heartbeats seen, max worker RSS %ld kB", mode, s.id, s.state,
		(long long)(util_mono_ms() - t0), beats, max_rss);
	h_ok(h, !strcmp(s.state, "ended"), "%s: the attempt ended (not lost, not stuck): %s", mode, s.state);
	h_ok(h, beats >= min_beats, "%s: the worker heartbeat while the trainer ran (%d >= %d)", mode, beats, min_beats);
	h_ok(h, max_rss > 0 && max_rss < RSS_LIMIT_KB, "%s: worker RSS stayed under %d kB (max %ld)", mode,
		RSS_LIMIT_KB, max_rss);
	char aid[32];
	snprintf(aid, sizeof aid, "%lld", s.id);
	const char *p[] = { aid };
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE id = $1 AND facts IS NOT NULL", 1, p) == 1,
		"%s: the finish stored its facts", mode);
	long long lines = h_sql_int(h, "SELECT coalesce(jsonb_array_length(log_tail), 0) FROM attempts WHERE id = $1",
		1, p);
	long long widest = h_sql_int(h, "SELECT coalesce(max(octet_length(e)), 0) FROM attempts a, "
		"jsonb_array_elements_text(coalesce(a.log_tail, '[]')) e WHERE a.id = $1", 1, p);
	h_ok(h, lines >= 0 && lines <= 200 && widest >= 0 && widest <= 1000,
		"%s: log_tail capped (%lld lines, widest %lld bytes)", mode, lines, widest);
	pid_t trainer = read_pid(h->tmp, mode);
	h_ok(h, trainer > 0 && pid_gone(trainer), "%s: the trainer process (%d) is gone", mode, (int)trainer);
	if (cancel) {
		json_t *j = h_wait_job(h, id, "cancelled", 5000);
		h_ok(h, j != NULL, "%s: the job is cancelled", mode);
		json_decref(j);
		long long sig = h_sql_int(h, "SELECT (facts->>'signal')::int FROM attempts WHERE id = $1", 1, p);
		h_ok(h, sig == SIGKILL, "%s: the SIGINT-ignoring trainer was SIGKILLed (signal %lld)", mode, sig);
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE id = $1 AND outcome = 'cancelled'", 1, p) == 1,
			"%s: the attempt's outcome is cancelled", mode);
	}
	h_ok(h, h_proc_alive(&w->proc), "%s: the worker is still running", mode);
	free(id);
}

int main(void)
{
	struct harness *h = h_new("it_trainer_hostile");
	char *script = NULL, *text = NULL, *cmd = NULL;

	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	script = xasprintf("%s/trainer.sh", h->tmp);
	text = xasprintf(script_fmt, h->tmp, h->root);
	FILE *f = fopen(script, "w");
	if (!h_ok(h, f && fputs(text, f) >= 0 && fclose(f) == 0 && chmod(script, 0755) == 0, "trainer script written"))
		goto out;
	cmd = xasprintf("/bin/sh %s {config}", script);
	const char *args[] = { "--trainer-cmd", cmd, NULL };
	struct h_worker_opts o = { .args = args };
	struct h_worker *w = h_worker_start(h, "wh", &o);
	if (!h_ok(h, w != NULL, "worker starts"))
		goto out;

	run_mode(h, w, "hostile-bigline", 3, false);
	run_mode(h, w, "hostile-nonl", 0, false);
	run_mode(h, w, "hostile-binary", 3, false);
	run_mode(h, w, "hostile-flood", 2, false); /* 400 MB as fast as the pipe takes it */
	run_mode(h, w, "hostile-closed", 3, false);
	run_mode(h, w, "hostile-grandchild", 0, false);
	pid_t gc = read_pid(h->tmp, "grandchild");
	h_ok(h, gc > 0 && pid_gone(gc), "grandchild (%d) holding the pipe was killed with the group", (int)gc);
	if (gc > 0 && !pid_gone(gc))
		kill(gc, SIGKILL);
	run_mode(h, w, "hostile-noint", 0, true);

	/* The worker still leases and runs a normal job to success. */
	json_t *cfg = h_config("plain", 20);
	json_t *job = h_submit(h, cfg, NULL);
	char *id = h_id(job, "id");
	json_t *done = id ? h_wait_job(h, id, "succeeded", 60000) : NULL;
	h_ok(h, done != NULL, "the worker leases the next job and runs it to success");
	json_decref(done);
	json_decref(job);
	json_decref(cfg);
	free(id);

	/* a hung trainer: one line, then silence; a worker with --stall-timeout-s 2 kills it */
	h_ok(h, h_worker_stop(h, w, SIGTERM) == 0, "the first worker stopped");
	{
		const char *sargs[] = { "--trainer-cmd", cmd, "--stall-timeout-s", "2", NULL };
		struct h_worker_opts so = { .args = sargs };
		json_t *hcfg = h_config("hostile-hang", 10), *hextra = json_pack("{s:{s:i}}", "recovery", "max_attempts", 1);
		json_t *hjob = NULL, *ended = NULL;
		char *hid = NULL;
		struct h_worker *ws = h_worker_start(h, "wstall", &so);

		if (h_ok(h, ws != NULL, "a worker with --stall-timeout-s 2 starts")) {
			hjob = h_submit(h, hcfg, hextra);
			hid = h_id(hjob, "id");
			ended = hid ? h_wait_job(h, hid, "failed", 30000 * h_slow()) : NULL;
			h_ok(h, ended != NULL, "hostile-hang: the silent trainer's attempt ended and the job (max_attempts 1) failed");
			if (hid) {
				const char *p[] = { hid };
				h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint AND class = 'env_fault' "
						     "AND rule = 'trainer_stalled' AND (facts->>'stalled_s')::int >= 2 "
						     "AND (facts->>'signal')::int = 9", 1, p) == 1,
				     "hostile-hang: killed after 2 s of silence, reported as stalled: env_fault, trainer_stalled");
				h_ok(h, h_sql_int(h, "SELECT count(*) FROM gpus g JOIN attempts a ON a.gpu_uuid = g.uuid "
						     "WHERE a.job_id = $1::bigint AND g.state = 'ok'", 1, p) == 1 &&
					     h_sql_int(h, "SELECT count(*) FROM gpu_faults f JOIN attempts a ON a.id = f.attempt_id "
							  "WHERE a.job_id = $1::bigint", 1, p) == 0,
				     "hostile-hang: the GPU, clean after the kill, is neither marked nor charged a fault");
			}
			pid_t hung = read_pid(h->tmp, "hostile-hang");
			h_ok(h, hung > 0 && pid_gone(hung), "hostile-hang: the hung trainer (%d) is gone", (int)hung);
			h_ok(h, h_proc_alive(&ws->proc), "hostile-hang: the worker is still running");
			/* the job's own recovery.stall_timeout_s, on a worker left at its default (1800 s) */
			h_ok(h, h_worker_stop(h, ws, SIGTERM) == 0, "the stall worker stopped");
			{
				const char *dargs[] = { "--trainer-cmd", cmd, NULL };
				struct h_worker_opts dopt = { .args = dargs };
				json_t *pextra = json_pack("{s:{s:i, s:i}}", "recovery", "max_attempts", 1, "stall_timeout_s", 2);
				json_t *pjob = NULL, *pend = NULL;
				char *pid_ = NULL;
				struct h_worker *wd = h_worker_start(h, "wdefault", &dopt);
				if (h_ok(h, wd != NULL, "a worker with the default stall timeout starts")) {
					pjob = h_submit(h, hcfg, pextra);
					pid_ = h_id(pjob, "id");
					pend = pid_ ? h_wait_job(h, pid_, "failed", 30000 * h_slow()) : NULL;
					if (pid_) {
						const char *p[] = { pid_ };
						h_ok(h, pend && h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint "
									   "AND rule = 'trainer_stalled' AND (facts->>'stalled_s')::int >= 2",
									   1, p) == 1,
						     "hostile-hang: the job's stall_timeout_s 2 wins over the worker's 1800 s");
					}
				}
				json_decref(pend);
				json_decref(pjob);
				json_decref(pextra);
				free(pid_);
			}
		}
		json_decref(ended);
		json_decref(hjob);
		json_decref(hcfg);
		json_decref(hextra);
		free(hid);
	}
out:
	free(cmd);
	free(text);
	free(script);
	return h_free(h);
}
