/* Integration: the README's walk-throughs, run for real and compared line by line with the README
 * (the fenced blocks of its "Walkthrough" section that show `rungctl watch` output): examples/
 * flux_lora.json on a simulated 24 GiB GPU and AI Toolkit's Flux example on 16 GiB, each on a fresh
 * database and again after other jobs ran on it (a story must not depend on what ran before, once
 * the memory model's profile of the card is reset: what it learned shortens a story, checked too). Also
 * `rungctl watch` with its stdout to a pipe (each line arrives while the job still runs) and to a
 * terminal (the speed between step reports, and the ETA). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "memmodel.h"
#include "util.h"
#include "yamljson.h"

#define WALK_BLOCKS 2
#define MAX_ARGS 16

/* The README's walk-throughs, in the order their blocks appear in its Walkthrough section. */
static const struct walk {
	const char *config;     /* what the README submits */
	int gpu_mib;            /* the simulated card: make run's default, or RUNG_SIM_MEMORY_MIB=16376 */
} WALKS[WALK_BLOCKS] = {
	{ "examples/flux_lora.json", 24564 },
	{ "tests/data/aitk_flux_lora_24gb.yaml", 16376 },
};

/* Fast simulated trainer: the memory model decides the story, not the speed. */
static const char *const FAST_SIM[] = { "RUNG_SIM_STEP_MS=0", "RUNG_SIM_LOAD_MS=5", "RUNG_SIM_SAMPLE_MS=2", NULL };

/* Starts bin/rungctl ARGS (NULL-terminated array) with RUNG_URL/RUNG_TOKEN set, stdout to out_fd,
 * stderr to err_path. Returns the pid or -1. */
static pid_t ctl_spawn(struct harness *h, const char *const *args, int out_fd, const char *err_path)
{
	const char *argv[MAX_ARGS + 2];
	char *bin = xasprintf("%s/bin/rungctl", h->root);
	int n = 0;
	pid_t pid;

	argv[n++] = bin;
	for (size_t i = 0; args[i] && n < MAX_ARGS; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int fi = open("/dev/null", O_RDONLY);
		if (fe < 0 || fi < 0)
			_exit(126);
		dup2(fi, 0);
		dup2(out_fd, 1);
		dup2(fe, 2);
		setenv("RUNG_URL", h->base_url, 1);
		setenv("RUNG_TOKEN", h->admin_token ? h->admin_token : "", 1);
		signal(SIGPIPE, SIG_DFL);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	free(bin);
	return pid;
}

static int wait_exit(pid_t pid)
{
	int st = 0;

	if (pid <= 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs rungctl ARGS... (NULL-terminated) to the end; *out gets its stdout (heap). Exit status. */
static int ctl(struct harness *h, char **out, ...)
{
	const char *args[MAX_ARGS + 1];
	char *out_path = xasprintf("%s/ctl.out", h->tmp), *err_path = xasprintf("%s/ctl.err", h->tmp);
	va_list ap;
	int n = 0, fd, rc;

	va_start(ap, out);
	for (const char *a; n < MAX_ARGS && (a = va_arg(ap, const char *)) != NULL;)
		args[n++] = a;
	va_end(ap);
	args[n] = NULL;
	fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	rc = wait_exit(fd < 0 ? -1 : ctl_spawn(h, args, fd, err_path));
	if (fd >= 0)
		close(fd);
	*out = h_slurp(out_path);
	if (rc != 0) {
		char *err = h_slurp(err_path);
		h_diag("rungctl %s exited %d: %s", args[0], rc, err);
		free(err);
	}
	free(out_path);
	free(err_path);
	return rc;
}

/* ---- the README's blocks ---- */

/* A line the comparison skips: when an attempt starts and which state the job passes through are
 * timing (a fast attempt may end between two polls), and the commands the reader types. */
static bool skipped(const char *l)
{
	return !*l || (!strncmp(l, "attempt ", 8) && strstr(l, " running on worker ")) ||
		(!strncmp(l, "job ", 4) && (strstr(l, " queued") || strstr(l, " running")) && !strstr(l, " after ")) ||
		!strncmp(l, "bin/", 4) || !strncmp(l, "$ ", 2);
}

/* The lines of text worth comparing, as a JSON array of strings (new reference). */
static json_t *story_lines(const char *text)
{
	json_t *out = json_array();
	char *copy = xstrdup(text);

	for (char *save = NULL, *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		if (!skipped(l))
			json_array_append_new(out, json_string(l));
	free(copy);
	return out;
}

/* The fenced blocks of README.md's "## Walkthrough" section that show watch's output (they hold an
 * "ended: outcome" line), as arrays of lines. Returns how many were found (at most max). */
static size_t readme_blocks(struct harness *h, json_t **blocks, size_t max)
{
	char *path = xasprintf("%s/README.md", h->root), *md = h_slurp(path);
	char *sec = strstr(md, "\n## Walkthrough"), *end, *p;
	size_t n = 0;

	if (!sec)
		goto out;
	end = strstr(sec + 1, "\n## ");
	if (end)
		*end = '\0';
	for (p = sec; n < max && (p = strstr(p, "\n```")) != NULL;) {
		char *body = strchr(p + 1, '\n'), *close;
		if (!body || !(close = strstr(body, "\n```")))
			break;
		*close = '\0';
		if (strstr(body, "ended: outcome"))
			blocks[n++] = story_lines(body + 1);
		p = close + 1;
	}
out:
	free(md);
	free(path);
	return n;
}

/* A README line against watch's: "ID" stands for the job id, and a line ending in "..." matches any
 * line that begins with what comes before the dots. */
static bool line_matches(const char *want, const char *got, const char *id)
{
	char *w = xstrdup(want), *at;
	bool ok;

	while ((at = strstr(w, " ID ")) != NULL) {
		char *n = xasprintf("%.*s %s %s", (int)(at - w), w, id, at + 4);
		free(w);
		w = n;
	}
	size_t len = strlen(w);
	if (len >= 3 && !strcmp(w + len - 3, "..."))
		ok = !strncmp(w, got, len - 3);
	else
		ok = !strcmp(w, got);
	free(w);
	return ok;
}

/* Submits the walk-through's config with rungctl, watches it to its end, and compares watch's
 * lines with the README block. */
static void walk(struct harness *h, size_t k, const json_t *want, const char *when)
{
	const struct walk *wk = &WALKS[k];
	char *out = NULL, *id = NULL;

	int rc = ctl(h, &out, "submit", wk->config, NULL);
	id = xstrdup(strtok(out, "\n") ? out : "");
	free(out);
	if (!h_ok(h, rc == 0 && *id, "%s: rungctl submit %s (%s)", when, wk->config, id))
		goto done;
	rc = ctl(h, &out, "watch", id, "--interval-ms", "100", NULL);
	json_t *got = story_lines(out);
	size_t n = json_array_size(got), m = json_array_size(want), i;
	bool same = n == m;
	for (i = 0; same && i < n; i++)
		same = line_matches(json_string_value(json_array_get(want, i)), json_string_value(json_array_get(got, i)), id);
	h_ok(h, rc == 0, "%s: watch %s exits 0 (the job succeeded)", when, wk->config);
	if (!h_ok(h, same, "%s: %s on %d MiB tells the README's story line for line (%zu lines)", when, wk->config,
		wk->gpu_mib, m)) {
		for (i = 0; i < (n > m ? n : m); i++) {
			const char *w = json_string_value(json_array_get(want, i)), *g = json_string_value(json_array_get(got, i));
			h_diag("%s README: %s", w && g && line_matches(w, g, id) ? "  " : "!!", w ? w : "(none)");
			h_diag("   watch:  %s", g ? g : "(none)");
		}
	}
	json_decref(got);
	free(out);
done:
	free(id);
}

/* Forgets what the memory model learned of flux on every card (support's reset), so walk-through
 * K's story is the README's. */
static void forget(struct harness *h, size_t k)
{
	h_ok(h, h_forget_arch(h, "flux") >= 0, "walk-through %zu: every flux profile reset", k + 1);
}

/* Walk-through K once more without the reset: the model learned from the runs before, so the job
 * needs fewer attempts than the README's story. */
static void learned(struct harness *h, size_t k, const json_t *want)
{
	char *err = NULL;
	json_t *cfg = yamljson_load_file(WALKS[k].config, &err), *job = cfg ? h_submit(h, cfg, NULL) : NULL, *done = NULL;
	char *id = h_id(job, "id");
	long long readme = 0;
	size_t i;

	for (i = 0; i < json_array_size(want); i++)
		if (!strncmp(json_string_value(json_array_get(want, i)), "attempt ", 8) &&
		    strstr(json_string_value(json_array_get(want, i)), " ended: "))
			readme++;
	done = id ? h_wait_job(h, id, "succeeded", 60000 * h_slow()) : NULL;
	h_ok(h, done && h_int(done, "attempts") < readme,
	     "without the reset the model's history shortens %s: %lld attempts instead of %lld", WALKS[k].config,
	     done ? h_int(done, "attempts") : -1, readme);
	json_decref(done);
	json_decref(job);
	json_decref(cfg);
	free(err);
	free(id);
}

/* ---- watch into a pipe ---- */

/* Reads one line (without its newline) from fd within timeout_ms into buf. 0, or -1 on timeout/EOF. */
static int read_line(int fd, char *buf, size_t cap, int timeout_ms)
{
	int64_t deadline = util_mono_ms() + timeout_ms;
	size_t len = 0;

	while (len + 1 < cap) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - util_mono_ms();
		char c;
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		if (read(fd, &c, 1) != 1)
			break;
		if (c == '\n') {
			buf[len] = '\0';
			return 0;
		}
		buf[len++] = c;
	}
	buf[len] = '\0';
	return -1;
}

static const char *job_state(struct harness *h, const char *id, char *buf, size_t cap)
{
	json_t *j = h_job(h, id);
	snprintf(buf, cap, "%s", j ? h_str(j, "state") : "?");
	json_decref(j);
	return buf;
}

/* watch's stdout is a pipe: its first line ("job ID queued") and the attempt's start must come out
 * while the job is still queued, then running (checked through the API after each line is read),
 * not when watch exits. */
static void test_watch_pipe(struct harness *h)
{
	const char *env[] = { "RUNG_SIM_STEP_MS=20", "RUNG_SIM_LOAD_MS=5", "RUNG_SIM_SAMPLE_MS=2", NULL };
	struct h_worker_opts o = { .env = env };
	json_t *cfg = h_config("watch_pipe", 100000), *job = h_submit(h, cfg, NULL);
	char *id = h_id(job, "id"), *err_path = xasprintf("%s/watch.err", h->tmp), line[512], st[32];
	struct h_worker *w = NULL;
	int fds[2] = { -1, -1 };
	pid_t pid = -1;

	if (!h_ok(h, id && pipe(fds) == 0, "a job to watch, and a pipe"))
		goto out;
	const char *args[] = { "watch", id, "--interval-ms", "100", NULL };
	pid = ctl_spawn(h, args, fds[1], err_path);
	close(fds[1]);
	fds[1] = -1;
	int r = read_line(fds[0], line, sizeof(line), 10000);
	char *want = xasprintf("job %s queued", id);
	h_ok(h, r == 0 && !strcmp(line, want), "pipe: the first line arrives at once (%s)", line);
	free(want);
	h_ok(h, !strcmp(job_state(h, id, st, sizeof(st)), "queued"), "pipe: ... while the job is still queued (%s)", st);
	w = h_worker_start(h, "pipe-w", &o);
	h_ok(h, w != NULL, "pipe: a worker to run it");
	r = read_line(fds[0], line, sizeof(line), 20000);
	h_ok(h, r == 0 && !strncmp(line, "attempt 1 running on worker ", 28), "pipe: the attempt's start arrives (%s)",
		line);
	h_ok(h, !strcmp(job_state(h, id, st, sizeof(st)), "running"), "pipe: ... while the job runs (%s)", st);
	json_t *c = h_postf(h, NULL, NULL, "/v1/jobs/%s/cancel", id);
	json_decref(c);
	bool ended = false;
	while (read_line(fds[0], line, sizeof(line), 20000) == 0)
		if (strstr(line, "cancelled after "))
			ended = true;
	h_ok(h, ended, "pipe: the verdict arrives when the job is cancelled");
	h_ok(h, wait_exit(pid) == 1, "pipe: watch exits 1 for a cancelled job");
	pid = -1;
	if (w)
		h_worker_stop(h, w, SIGTERM);
out:
	if (pid > 0) {
		kill(pid, SIGTERM);
		wait_exit(pid);
	}
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	json_decref(cfg);
	json_decref(job);
	free(id);
	free(err_path);
}

/* watch in a terminal (a pty): its progress line carries a speed and an ETA, and two redraws of the
 * same step show the same speed (issue 18: the speed fell with every redraw of the same step). */
static void test_watch_tty(struct harness *h)
{
	const char *env[] = { "RUNG_SIM_STEP_MS=20", "RUNG_SIM_LOAD_MS=5", "RUNG_SIM_SAMPLE_MS=2", NULL };
	struct h_worker_opts o = { .env = env };
	json_t *cfg = h_config("watch_tty", 100000), *job = h_submit(h, cfg, NULL);
	char *id = h_id(job, "id"), *err_path = xasprintf("%s/watch-tty.err", h->tmp), *text = xstrdup("");
	struct h_worker *w = h_worker_start(h, "tty-w", &o);
	int master = posix_openpt(O_RDWR | O_NOCTTY), slave = -1;
	pid_t pid = -1;
	bool rate = false, eta = false, steady = true, same_step_seen = false;
	long long last_step = -1;
	char last_rate[32] = "";

	if (!h_ok(h, id && w && master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0 &&
		(slave = open(ptsname(master), O_RDWR | O_NOCTTY)) >= 0, "tty: a running job and a pty"))
		goto out;
	const char *args[] = { "watch", id, "--interval-ms", "100", NULL };
	pid = ctl_spawn(h, args, slave, err_path);
	close(slave);
	/* read redraws until two of the same step both show a speed, or 30 s */
	for (int64_t deadline = util_mono_ms() + 30000 * h_slow(); util_mono_ms() < deadline && !same_step_seen;) {
		struct pollfd p = { .fd = master, .events = POLLIN };
		char buf[4096], *seg, *save = NULL;
		if (poll(&p, 1, 500) <= 0)
			continue;
		ssize_t n = read(master, buf, sizeof(buf) - 1);
		if (n <= 0)
			break;
		buf[n] = '\0';
		char *all = xasprintf("%s%s", text, buf);
		free(text);
		text = all;
		char *end = strrchr(text, '\r'); /* complete redraws end where the next one starts */
		if (!end)
			continue;
		*end = '\0';
		for (seg = strtok_r(text, "\r", &save); seg; seg = strtok_r(NULL, "\r", &save)) {
			long long step = -1, total = -1;
			char r[32] = "";
			const char *at = strstr(seg, ", step ");
			if (!at || sscanf(at, ", step %lld/%lld, %31[0-9.] steps/s", &step, &total, r) != 3)
				continue;
			rate = true;
			eta = eta || strstr(seg, ", ETA ") != NULL;
			if (step == last_step && *last_rate) {
				same_step_seen = true;
				steady = steady && !strcmp(r, last_rate);
			}
			last_step = step;
			snprintf(last_rate, sizeof(last_rate), "%s", r);
		}
		char *rest = xstrdup(end + 1);
		free(text);
		text = rest;
	}
	h_ok(h, rate && eta, "tty: the progress line shows steps/s and an ETA");
	h_ok(h, same_step_seen && steady, "tty: redraws of the same step keep the same speed (last %s at step %lld)",
		last_rate, last_step);
out:
	if (id) {
		json_t *c = h_postf(h, NULL, NULL, "/v1/jobs/%s/cancel", id);
		json_decref(c);
	}
	if (pid > 0)
		h_ok(h, wait_exit(pid) == 1, "tty: watch exits 1 for the cancelled job");
	if (w)
		h_worker_stop(h, w, SIGTERM);
	if (master >= 0)
		close(master);
	json_decref(cfg);
	json_decref(job);
	free(id);
	free(err_path);
	free(text);
}

/* Other jobs on the same database between two runs of a walk-through: AI Toolkit's example on
 * 24 GiB (it fits: one attempt, as the README says; its config then "succeeded before") and a
 * small job. */
static void other_jobs(struct harness *h)
{
	char *out = NULL;
	int rc = ctl(h, &out, "submit", WALKS[1].config, NULL);
	char *id = xstrdup(strtok(out, "\n") ? out : "");
	free(out);
	json_t *cfg = h_config("other_job", 30), *j = h_submit(h, cfg, NULL);
	json_t *done = rc == 0 ? h_wait_job(h, id, "succeeded", 60000 * h_slow()) : NULL;
	h_ok(h, done && h_int(done, "attempts") == 1, "%s fits the 24 GiB card: succeeded on its first attempt",
		WALKS[1].config);
	json_decref(done);
	char *jid = h_id(j, "id");
	done = jid ? h_wait_job(h, jid, "succeeded", 60000 * h_slow()) : NULL;
	h_ok(h, done != NULL, "a small job succeeded too");
	json_decref(done);
	json_decref(j);
	json_decref(cfg);
	free(jid);
	free(id);
}

/* What the README says does not change the story: examples/flux_lora.json succeeded on a bigger card
 * says nothing of 24 GiB (guide 2D's "at its limit" needs a success on a card no bigger), so its
 * OOM there is the README's oom_train_early and rung lowers the batch. */
static void test_succeeded_before(struct harness *h)
{
	char *g40 = h_sim_gpus("w40", 1, 40960), *g24 = h_sim_gpus("w24b", 1, WALKS[0].gpu_mib);
	struct h_worker_opts o40 = { .gpus_json = g40, .env = FAST_SIM }, o24 = { .gpus_json = g24, .env = FAST_SIM };
	char *err = NULL, *id = NULL;
	json_t *cfg = json_load_file(WALKS[0].config, 0, NULL), *job = NULL, *done = NULL, *att = NULL;
	struct h_worker *w = h_worker_start(h, "w40", &o40);

	job = w ? h_submit(h, cfg, NULL) : NULL;
	id = h_id(job, "id");
	done = id ? h_wait_job(h, id, "succeeded", 60000 * h_slow()) : NULL;
	h_ok(h, done && h_int(done, "attempts") == 1, "%s succeeds at once on a 40 GiB card", WALKS[0].config);
	if (w)
		h_worker_stop(h, w, SIGTERM);
	json_decref(job);
	json_decref(done);
	free(id);
	/* what the model learned from that run and the 24 GiB ones would pick the rungs too, or start it
	 * lower (it learns flux from every class): forget it, so the first attempt shows the classification */
	h_ok(h, h_forget_arch(h, "flux") >= 2, "every flux profile reset, the 40 GiB card's among them");
	w = h_worker_start(h, "w24b", &o24);
	job = w ? h_submit(h, cfg, NULL) : NULL;
	id = h_id(job, "id");
	done = id ? h_wait_job(h, id, "succeeded", 60000 * h_slow()) : NULL;
	att = done ? h_wait_attempts(h, id, 1, NULL, 5000) : NULL;
	const json_t *a1 = json_array_get(att, 0);
	h_ok(h, a1 && !strcmp(h_str(a1, "class"), "oom_train_early") && !strcmp(h_str(a1, "rung"), "batch_size"),
		"then on 24 GiB its first attempt is still oom_train_early and lowers the batch (%s, %s)", h_str(a1, "class"),
		h_str(a1, "rung"));
	if (w)
		h_worker_stop(h, w, SIGTERM);
	json_decref(att);
	json_decref(job);
	json_decref(done);
	json_decref(cfg);
	free(id);
	free(err);
	free(g40);
	free(g24);
}

int main(void)
{
	struct harness *h = h_new("it_walkthrough");
	json_t *blocks[WALK_BLOCKS + 1] = { NULL };
	struct h_worker *w = NULL;
	char *g24 = h_sim_gpus("w24", 1, WALKS[0].gpu_mib), *g16 = h_sim_gpus("w16", 1, WALKS[1].gpu_mib);
	struct h_worker_opts o24 = { .gpus_json = g24, .env = FAST_SIM }, o16 = { .gpus_json = g16, .env = FAST_SIM };

	if (chdir(h->root) != 0)
		h_diag("chdir %s: %s", h->root, strerror(errno));
	size_t nb = readme_blocks(h, blocks, WALK_BLOCKS + 1);
	if (!h_ok(h, nb == WALK_BLOCKS, "README's Walkthrough section shows %d watch outputs (found %zu)", WALK_BLOCKS,
		nb))
		goto out;
	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd started"))
		goto out;
	test_watch_pipe(h);
	test_watch_tty(h);
	w = h_worker_start(h, "w24", &o24);
	if (!h_ok(h, w != NULL, "a worker with one simulated %d MiB GPU", WALKS[0].gpu_mib))
		goto out;
	walk(h, 0, blocks[0], "first job on the database");
	other_jobs(h);
	forget(h, 0);
	walk(h, 0, blocks[0], "after other jobs");
	h_worker_stop(h, w, SIGTERM);
	w = h_worker_start(h, "w16", &o16);
	if (!h_ok(h, w != NULL, "a worker with one simulated %d MiB GPU", WALKS[1].gpu_mib))
		goto out;
	forget(h, 1);
	walk(h, 1, blocks[1], "after other jobs (its config succeeded on 24 GiB)");
	forget(h, 1);
	walk(h, 1, blocks[1], "again");
	learned(h, 1, blocks[1]);
	h_worker_stop(h, w, SIGTERM);
	test_succeeded_before(h);
out:
	for (size_t i = 0; i <= WALK_BLOCKS; i++)
		json_decref(blocks[i]);
	free(g24);
	free(g16);
	return h_free(h);
}
