/* The integration test harness (see harness.h): child processes of the real binaries with their
 * logs, HTTP over libcurl, JSON over jansson, polling waits, libpq checks. It owns only test
 * plumbing; what rung should do is in the it_*.c files. */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "util.h"

#define HEALTH_TIMEOUT_MS 20000
#define STOP_TIMEOUT_MS 10000
#define HTTP_TIMEOUT_MS 30000
#define LOG_DUMP_LINES 150

/* ---- small helpers ---- */

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static char **strv_dup(const char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	char **out = xcalloc(n + 1, sizeof(*out));
	for (size_t i = 0; i < n; i++)
		out[i] = xstrdup(v[i]);
	return out;
}

static void strv_free(char **v)
{
	if (!v)
		return;
	for (size_t i = 0; v[i]; i++)
		free(v[i]);
	free(v);
}

/* Appends the NULL-terminated `more` to the NULL-terminated heap vector *v. */
static void strv_append(char ***v, const char *const *more)
{
	size_t n = 0, m = 0;
	while ((*v)[n])
		n++;
	while (more && more[m])
		m++;
	*v = xrealloc(*v, (n + m + 1) * sizeof(**v));
	for (size_t i = 0; i < m; i++)
		(*v)[n + i] = xstrdup(more[i]);
	(*v)[n + m] = NULL;
}

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int port = -1;
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	int rc = fputs(text, f) < 0 ? -1 : 0;
	if (fclose(f) != 0)
		rc = -1;
	return rc;
}

/* ---- checks and diagnostics ---- */

bool h_ok(struct harness *h, bool cond, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("%s - ", cond ? "ok" : "not ok");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	if (cond)
		h->passed++;
	else
		h->failed++;
	return cond;
}

void h_diag(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("#   ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
}

void h_diag_json(const char *label, const json_t *v)
{
	char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	h_diag("%s: %.3000s", label, s ? s : "(null)");
	free(s);
}

static void dump_file(const char *label, const char *path)
{
	FILE *f = path ? fopen(path, "r") : NULL;
	char **ring = xcalloc(LOG_DUMP_LINES, sizeof(*ring));
	char *line = NULL;
	size_t cap = 0;
	long n = 0;
	if (!f) {
		printf("# --- %s: no log ---\n", label);
		goto out;
	}
	while (getline(&line, &cap, f) > 0) {
		free(ring[n % LOG_DUMP_LINES]);
		ring[n % LOG_DUMP_LINES] = xstrdup(line);
		n++;
	}
	printf("# --- %s (%s, last %ld of %ld lines) ---\n", label, path, n < LOG_DUMP_LINES ? n : LOG_DUMP_LINES, n);
	for (long i = n < LOG_DUMP_LINES ? 0 : n - LOG_DUMP_LINES; i < n; i++) {
		const char *l = ring[i % LOG_DUMP_LINES];
		printf("# %s%s", l, l[strlen(l) - 1] == '\n' ? "" : "\n");
	}
out:
	for (int i = 0; i < LOG_DUMP_LINES; i++)
		free(ring[i]);
	free(ring);
	free(line);
	if (f)
		fclose(f);
	fflush(stdout);
}

void h_dump_logs(struct harness *h)
{
	if (h->server.state != H_PROC_NONE)
		dump_file(h->server.name, h->server.log_path);
	for (int i = 0; i < h->nworkers; i++)
		dump_file(h->workers[i].proc.name, h->workers[i].proc.log_path);
}

/* ---- lifecycle ---- */

/* The harness of this process, for the deadline handler. */
static struct harness *h_current;

/* Shortly before tests/run.sh's timeout would kill the binary silently, say so, dump the logs
 * and stop the children. Not async-signal-safe (stdio): acceptable for a test that is ending. */
static void on_deadline(int sig)
{
	(void)sig;
	struct harness *h = h_current;
	printf("not ok - harness: deadline reached (RUNG_TEST_TIMEOUT); test stuck\n");
	if (h) {
		h_dump_logs(h);
		for (int i = 0; i < h->nworkers; i++)
			if (h->workers[i].proc.state == H_PROC_RUNNING)
				kill(h->workers[i].proc.pid, SIGKILL);
		if (h->server.state == H_PROC_RUNNING)
			kill(h->server.pid, SIGKILL);
	}
	fflush(stdout);
	_exit(1);
}

static char *need_env(const char *name)
{
	const char *v = getenv(name);
	if (!v || !*v) {
		printf("not ok - environment: %s is not set (run through tests/run.sh)\n", name);
		exit(1);
	}
	return xstrdup(v);
}

struct harness *h_new(const char *test_name)
{
	struct harness *h = xcalloc(1, sizeof(*h));
	const char *tmpdir = getenv("TMPDIR");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	h->root = need_env("RUNG_ROOT");
	h->db_url = need_env("RUNG_TEST_DATABASE_URL");
	h->pgdata = need_env("RUNG_TEST_PGDATA");
	h->tmp = xasprintf("%s/%s.XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp", test_name);
	if (!mkdtemp(h->tmp)) {
		printf("not ok - harness: mkdtemp %s: %s\n", h->tmp, strerror(errno));
		exit(1);
	}
	chmod(h->tmp, 0755);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	h->curl = curl_easy_init();
	h->server_extra = xcalloc(1, sizeof(char *));
	printf("# %s: temp dir %s\n", test_name, h->tmp);
	const char *limit = getenv("RUNG_TEST_TIMEOUT");
	if (limit && atoi(limit) > 20) {
		h_current = h;
		signal(SIGALRM, on_deadline);
		alarm((unsigned)atoi(limit) - 10);
	}
	return h;
}

static void proc_release(struct h_proc *p)
{
	free(p->name);
	free(p->log_path);
	strv_free(p->argv);
	strv_free(p->env);
	memset(p, 0, sizeof(*p));
}

bool h_proc_alive(struct h_proc *p)
{
	if (p->state != H_PROC_RUNNING)
		return false;
	int st;
	pid_t r = waitpid(p->pid, &st, WNOHANG);
	if (r == p->pid || (r < 0 && errno == ECHILD)) {
		p->state = H_PROC_EXITED;
		p->status = r == p->pid ? st : 0;
		return false;
	}
	return true;
}

/* Sends sig and waits up to timeout_ms for the process to exit. Returns 0 when it exited. */
static int proc_stop(struct h_proc *p, int sig, int timeout_ms)
{
	if (!h_proc_alive(p))
		return 0;
	kill(p->pid, sig);
	int64_t deadline = util_mono_ms() + timeout_ms;
	while (util_mono_ms() < deadline) {
		if (!h_proc_alive(p))
			return 0;
		sleep_ms(10);
	}
	return -1;
}

static int proc_spawn(struct h_proc *p)
{
	int fd = open(p->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		h_diag("open %s: %s", p->log_path, strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		close(fd);
		return -1;
	}
	if (pid == 0) {
		/* The child dies with the test binary, even when the test is killed by a timeout. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int nul = open("/dev/null", O_RDONLY);
		dup2(nul, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		for (size_t i = 0; p->env && p->env[i]; i++)
			putenv(p->env[i]);
		/* tests/run.sh runs us in the background, where SIGINT/SIGQUIT start ignored: undo that
		 * (and our SIGPIPE ignore) so the children see default dispositions. */
		signal(SIGPIPE, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGQUIT, SIG_DFL);
		execv(p->argv[0], p->argv);
		dprintf(2, "harness: exec %s: %s\n", p->argv[0], strerror(errno));
		_exit(127);
	}
	close(fd);
	p->pid = pid;
	p->state = H_PROC_RUNNING;
	return 0;
}

int h_run(struct harness *h, const char *const *argv)
{
	char *log = xasprintf("%s/commands.log", h->tmp);
	struct h_proc p = { .name = xstrdup(argv[0]), .log_path = log, .argv = strv_dup(argv) };
	int rc = -1;
	if (proc_spawn(&p) != 0)
		goto out;
	int st;
	while (waitpid(p.pid, &st, 0) < 0)
		if (errno != EINTR)
			goto out;
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
out:
	proc_release(&p);
	return rc;
}

int h_free(struct harness *h)
{
	int rc;
	if (!h)
		return 1;
	for (int i = 0; i < h->nworkers; i++)
		if (proc_stop(&h->workers[i].proc, SIGTERM, 5000) != 0)
			proc_stop(&h->workers[i].proc, SIGKILL, 5000);
	if (proc_stop(&h->server, SIGTERM, 5000) != 0)
		proc_stop(&h->server, SIGKILL, 5000);
	if (h->failed)
		h_dump_logs(h);
	alarm(0);
	h_current = NULL;
	printf("# %d passed, %d failed\n", h->passed, h->failed);
	rc = h->failed ? 1 : 0;
	if (h->pg)
		PQfinish(h->pg);
	if (h->curl)
		curl_easy_cleanup(h->curl);
	if (!h->failed && !getenv("RUNG_TEST_KEEP")) {
		const char *rm[] = { "/bin/rm", "-rf", h->tmp, NULL };
		h_run(h, rm);
	}
	for (int i = 0; i < h->nworkers; i++) {
		proc_release(&h->workers[i].proc);
		free(h->workers[i].name);
		free(h->workers[i].state_path);
		free(h->workers[i].work_dir);
	}
	proc_release(&h->server);
	strv_free(h->server_extra);
	free(h->root);
	free(h->tmp);
	free(h->db_url);
	free(h->pgdata);
	free(h->base_url);
	free(h->last_body);
	free(h->last_location);
	free(h->admin_token);
	free(h->worker_token);
	free(h->submitter_token);
	free(h);
	curl_global_cleanup();
	return rc;
}

/* ---- rungd ---- */

/* Auth hook (owned by the auth engineer): `rungd token create`, stdout captured through a pipe. */
char *h_token_create(struct harness *h, const char *role, const char *name)
{
	char *bin = xasprintf("%s/bin/rungd", h->root);
	const char *argv[] = { bin, "token", "create", "--role", role, "--name", name, "--database-url", h->db_url, NULL };
	char buf[256] = "", *out = NULL;
	size_t len = 0;
	int fd[2], st = -1;
	pid_t pid;

	if (pipe(fd) != 0)
		goto out;
	pid = fork();
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fd[1]);
	for (ssize_t n; pid > 0 && len + 1 < sizeof(buf) && (n = read(fd[0], buf + len, sizeof(buf) - 1 - len)) != 0;) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	close(fd[0]);
	buf[len] = '\0';
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	buf[strcspn(buf, "\n")] = '\0';
	if (pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 && buf[0])
		out = xstrdup(buf);
	else
		h_diag("rungd token create --role %s --name %s failed (status %d)", role, name, st);
out:
	free(bin);
	return out;
}

static int wait_healthy(struct harness *h, int timeout_ms)
{
	int64_t deadline = util_mono_ms() + timeout_ms;
	while (util_mono_ms() < deadline) {
		long st = 0;
		json_t *j = h_request_once(h, "GET", "/healthz", NULL, &st, NULL);
		json_decref(j);
		if (st == 200)
			return 0;
		if (!h_proc_alive(&h->server)) {
			h_diag("rungd exited (status %d) before /healthz answered", h->server.status);
			return -1;
		}
		sleep_ms(25);
	}
	h_diag("rungd: /healthz did not answer 200 within %d ms", timeout_ms);
	return -1;
}

int h_server_start(struct harness *h, const char *const *extra)
{
	char *bin = xasprintf("%s/bin/rungd", h->root);
	char *log = xasprintf("%s/rungd.log", h->tmp);
	char port[16];
	int rc = -1;

	const char *mig[] = { bin, "migrate", "--database-url", h->db_url, NULL };
	int st = h_run(h, mig);
	if (st != 0) {
		h_diag("rungd migrate exited %d; see %s/commands.log", st, h->tmp);
		char *cl = xasprintf("%s/commands.log", h->tmp);
		dump_file("commands", cl);
		free(cl);
		goto out;
	}
	if (!h->admin_token) { /* auth hook: tokens for the harness's own requests and its workers */
		h->admin_token = h_token_create(h, "admin", "it-admin");
		h->worker_token = h_token_create(h, "worker", "it-worker");
		h->submitter_token = h_token_create(h, "submitter", "it-submitter");
		h->auth_token = h->admin_token;
		if (!h->admin_token || !h->worker_token || !h->submitter_token)
			goto out;
	}
	h->port = free_port();
	snprintf(port, sizeof(port), "127.0.0.1:%d", h->port);
	free(h->base_url);
	h->base_url = xasprintf("http://127.0.0.1:%d", h->port);
	const char *argv[] = { bin, "--listen", port, "--database-url", h->db_url, "--lease-seconds", "2",
		"--heartbeat-ms", "200", "--reap-interval-ms", "200", "--poll-fallback-ms", "500", NULL };
	proc_release(&h->server);
	h->server.name = xstrdup("rungd");
	h->server.log_path = xstrdup(log);
	h->server.argv = strv_dup(argv);
	strv_append(&h->server.argv, extra);
	h->server.env = strv_dup(NULL);
	if (proc_spawn(&h->server) != 0)
		goto out;
	rc = wait_healthy(h, HEALTH_TIMEOUT_MS);
out:
	free(bin);
	free(log);
	return rc;
}

int h_server_stop(struct harness *h, int sig)
{
	return proc_stop(&h->server, sig, STOP_TIMEOUT_MS);
}

int h_server_restart(struct harness *h)
{
	if (h->server.state == H_PROC_RUNNING && h_proc_alive(&h->server))
		return -1;
	h->server_dead_noted = false;
	if (proc_spawn(&h->server) != 0)
		return -1;
	return wait_healthy(h, HEALTH_TIMEOUT_MS);
}

bool h_server_alive(struct harness *h)
{
	if (h->server.state == H_PROC_NONE || h_proc_alive(&h->server))
		return true;
	if (!h->server_dead_noted) {
		h->server_dead_noted = true;
		int st = h->server.status;
		h_diag("rungd is not running: %s %d", WIFSIGNALED(st) ? "killed by signal" : "exited with",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	}
	return false;
}

/* ---- workers ---- */

char *h_sim_gpus(const char *tag, int n, int mib)
{
	json_t *gpus = json_array();
	for (int i = 0; i < n; i++) {
		char *uuid = xasprintf("GPU-sim-%s-%d", tag, i);
		json_array_append_new(gpus, json_pack("{s:i, s:s, s:s, s:i, s:i, s:[]}", "index", i, "uuid", uuid,
			"name", "NVIDIA GeForce RTX 4090", "memory_total_mib", mib, "memory_used_mib", 0, "processes"));
		free(uuid);
	}
	json_t *root = json_pack("{s:o}", "gpus", gpus);
	char *s = json_dumps(root, JSON_INDENT(2));
	json_decref(root);
	return s;
}

struct h_worker *h_worker_start(struct harness *h, const char *name, const struct h_worker_opts *o)
{
	struct h_worker *w = NULL;
	for (int i = 0; i < h->nworkers; i++)
		if (!strcmp(h->workers[i].name, name))
			w = &h->workers[i];
	if (w && h_proc_alive(&w->proc)) {
		h_diag("worker %s is already running", name);
		return NULL;
	}
	if (!w) {
		if (h->nworkers == H_MAX_WORKERS) {
			h_diag("harness: more than %d workers; raise H_MAX_WORKERS", H_MAX_WORKERS);
			return NULL;
		}
		w = &h->workers[h->nworkers++];
		w->name = xstrdup(name);
		w->state_path = xasprintf("%s/%s.gpus.json", h->tmp, name);
		w->work_dir = xasprintf("%s/%s", h->tmp, name);
		mkdir(w->work_dir, 0755);
	}
	char *gpus = o && o->gpus_json ? xstrdup(o->gpus_json) : h_sim_gpus(name, 1, 24576);
	if (write_file(w->state_path, gpus) != 0) {
		h_diag("cannot write %s", w->state_path);
		free(gpus);
		return NULL;
	}
	free(gpus);
	char *bin = xasprintf("%s/bin/rung-worker", h->root);
	char *smi = xasprintf("%s/bin/sim/nvidia-smi", h->root);
	char *trainer = xasprintf("%s/bin/sim/rung-sim-trainer {config}", h->root);
	char *state_env = xasprintf("RUNG_SIM_STATE=%s", w->state_path);
	const char *argv[] = { bin, "--server", h->base_url, "--name", name, "--nvidia-smi", smi, "--trainer-cmd",
		trainer, "--trainer-dir", w->work_dir, "--work-dir", w->work_dir, "--lease-wait-ms", "2000",
		"--cancel-grace-ms", "2000", "--drain-timeout-ms", "3000", NULL };
	char *token_env = xasprintf("RUNG_TOKEN=%s", h->worker_token ? h->worker_token : ""); /* auth hook */
	const char *env[] = { state_env, token_env, NULL };
	proc_release(&w->proc);
	w->proc.name = xasprintf("worker %s", name);
	w->proc.log_path = xasprintf("%s/%s.log", h->tmp, name);
	w->proc.argv = strv_dup(argv);
	strv_append(&w->proc.argv, o ? o->args : NULL);
	w->proc.env = strv_dup(env);
	strv_append(&w->proc.env, o ? o->env : NULL);
	free(bin);
	free(smi);
	free(trainer);
	free(state_env);
	free(token_env);
	if (proc_spawn(&w->proc) != 0)
		return NULL;
	return w;
}

int h_worker_stop(struct harness *h, struct h_worker *w, int sig)
{
	(void)h;
	return proc_stop(&w->proc, sig, STOP_TIMEOUT_MS);
}

int h_worker_restart(struct harness *h, struct h_worker *w)
{
	(void)h;
	if (h_proc_alive(&w->proc))
		return -1;
	return proc_spawn(&w->proc);
}

/* ---- HTTP ---- */

struct buf {
	char *p;
	size_t len;
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;
	size_t len = size * n;
	b->p = xrealloc(b->p, b->len + len + 1);
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
	return len;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	char **location = arg;
	size_t len = size * n;
	if (len > 9 && !strncasecmp(data, "Location:", 9)) {
		size_t s = 9, e = len;
		while (s < e && (data[s] == ' ' || data[s] == '\t'))
			s++;
		while (e > s && (data[e - 1] == '\r' || data[e - 1] == '\n' || data[e - 1] == ' '))
			e--;
		free(*location);
		*location = xmalloc(e - s + 1);
		memcpy(*location, data + s, e - s);
		(*location)[e - s] = '\0';
	}
	return len;
}

/* One request on curl handle c. Fills *status (0 on transport failure), *raw (heap, may be NULL),
 * *location (heap or NULL), *ms. Returns the parsed body or NULL. */
static json_t *http_do(CURL *c, const char *base, const char *method, const char *path, const char *body,
	size_t body_len, const char *const *headers, long *status, char **raw, char **location, long *ms, bool quiet,
	const char *bearer)
{
	struct buf b = { 0 };
	struct curl_slist *hl = NULL;
	char *url = xasprintf("%s%s", base ? base : "http://127.0.0.1:1", path);
	json_t *out = NULL;
	int64_t t0 = util_mono_ms();

	*status = 0;
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)HTTP_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, location);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
		bool typed = false; /* the caller's headers name its own Content-Type */
		for (size_t i = 0; headers && headers[i]; i++)
			typed = typed || !strncasecmp(headers[i], "Content-Type:", 13);
		if (!typed)
			hl = curl_slist_append(hl, "Content-Type: application/json");
	} else if (!strcmp(method, "POST")) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	}
	hl = curl_slist_append(hl, "Expect:");
	if (bearer) { /* auth hook */
		char *auth = xasprintf("Authorization: Bearer %s", bearer);
		hl = curl_slist_append(hl, auth);
		free(auth);
	}
	for (size_t i = 0; headers && headers[i]; i++)
		hl = curl_slist_append(hl, headers[i]);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	CURLcode rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	else if (!quiet)
		h_diag("HTTP %s %s: %s", method, path, curl_easy_strerror(rc));
	if (b.p && b.len)
		out = json_loadb(b.p, b.len, JSON_DECODE_ANY, NULL);
	if (ms)
		*ms = (long)(util_mono_ms() - t0);
	if (raw)
		*raw = b.p;
	else
		free(b.p);
	curl_slist_free_all(hl);
	free(url);
	return out;
}

json_t *h_request(struct harness *h, const char *method, const char *path, const char *body, size_t body_len,
	const char *const *headers, long *status)
{
	long st_local;
	free(h->last_body);
	h->last_body = NULL;
	free(h->last_location);
	h->last_location = NULL;
	if (!status)
		status = &st_local;
	json_t *out = http_do(h->curl, h->base_url, method, path, body, body_len, headers, status, &h->last_body,
		&h->last_location, &h->last_ms, h->server_dead_noted, h->auth_token);
	h->last_status = *status;
	if (*status == 0)
		h_server_alive(h);
	return out;
}

json_t *h_request_once(const struct harness *h, const char *method, const char *path, const char *body,
	long *status, long *ms)
{
	CURL *c = curl_easy_init();
	char *location = NULL;
	long st_local;
	json_t *out = http_do(c, h->base_url, method, path, body, body ? strlen(body) : 0, NULL,
		status ? status : &st_local, NULL, &location, ms, true, h->auth_token);
	free(location);
	curl_easy_cleanup(c);
	return out;
}

json_t *h_post_hdr(struct harness *h, const char *path, const json_t *body, const char *const *headers, long *status)
{
	char *s = body ? json_dumps(body, JSON_COMPACT) : xstrdup("{}");
	json_t *out = h_request(h, "POST", path, s, strlen(s), headers, status);
	free(s);
	return out;
}

json_t *h_post(struct harness *h, const char *path, const json_t *body, long *status)
{
	return h_post_hdr(h, path, body, NULL, status);
}

json_t *h_post_raw(struct harness *h, const char *path, const char *body, size_t len, long *status)
{
	return h_request(h, "POST", path, body, len, NULL, status);
}

json_t *h_get(struct harness *h, const char *path, long *status)
{
	return h_request(h, "GET", path, NULL, 0, NULL, status);
}

long h_browse(struct harness *h, const char *token, const char *method, const char *path, const char *form,
	      const char *header)
{
	char *cookie = token ? xasprintf("Cookie: rung_token=%s", token) : NULL;
	const char *hdr[4], *saved = h->auth_token;
	int n = 0;
	long st = 0;

	if (cookie)
		hdr[n++] = cookie;
	if (header)
		hdr[n++] = header;
	if (form)
		hdr[n++] = "Content-Type: application/x-www-form-urlencoded";
	hdr[n] = NULL;
	h->auth_token = NULL;
	json_decref(h_request(h, method, path, form, form ? strlen(form) : 0, hdr, &st));
	h->auth_token = saved;
	free(cookie);
	return st;
}

json_t *h_getf(struct harness *h, long *status, const char *fmt, ...)
{
	va_list ap;
	char *path = NULL;
	va_start(ap, fmt);
	if (vasprintf(&path, fmt, ap) < 0)
		abort();
	va_end(ap);
	json_t *out = h_get(h, path, status);
	free(path);
	return out;
}

json_t *h_postf(struct harness *h, const json_t *body, long *status, const char *fmt, ...)
{
	va_list ap;
	char *path = NULL;
	va_start(ap, fmt);
	if (vasprintf(&path, fmt, ap) < 0)
		abort();
	va_end(ap);
	json_t *out = h_post(h, path, body, status);
	free(path);
	return out;
}

/* ---- JSON ---- */

char *h_id(const json_t *obj, const char *key)
{
	json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	if (json_is_integer(v))
		return xasprintf("%lld", (long long)json_integer_value(v));
	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	return NULL;
}

const char *h_str(const json_t *obj, const char *key)
{
	json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	return json_is_string(v) ? json_string_value(v) : "";
}

long long h_int(const json_t *obj, const char *key)
{
	json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

int h_slow(void)
{
	const char *v = getenv("RUNG_TEST_SLOW");
	int f = v ? atoi(v) : 1;

	return f >= 1 && f <= 20 ? f : 1;
}

bool wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms)
{
	int64_t deadline = util_mono_ms() + timeout_ms;
	for (;;) {
		if (cond(arg))
			return true;
		if (util_mono_ms() >= deadline)
			return cond(arg);
		sleep_ms(25);
	}
}

long h_cancel_active(struct harness *h, const char *key, const char *value)
{
	long st = 0;
	json_t *body = json_pack("{s:s, s:s}", key, value, "state", "active");

	json_decref(h_post(h, "/v1/jobs/cancel", body, &st));
	json_decref(body);
	return st;
}

char *h_story(const json_t *attempts)
{
	char *out = xstrdup(""), *n;
	size_t i;
	json_t *a;

	json_array_foreach(attempts, i, a) {
		n = xasprintf("%s%s%s/%s/%s", out, i ? " " : "", h_str(a, "class"), h_str(a, "action"),
			      json_is_string(json_object_get(a, "rung")) ? h_str(a, "rung") : "-");
		free(out);
		out = n;
	}
	return out;
}

json_t *h_config(const char *name, int steps)
{
	json_t *cfg = json_pack("{s:s, s:{s:s, s:[{s:s, s:s, s:s, s:{s:s, s:i, s:i}, s:{s:s, s:i}, "
		"s:{s:i, s:i, s:b, s:i, s:f, s:s, s:b, s:s}, "
		"s:[{s:s, s:s, s:[i,i,i]}], "
		"s:{s:i, s:i, s:i, s:i, s:[s]}, "
		"s:{s:s, s:s, s:b, s:b}}]}, s:{s:s}}",
		"job", "extension",
		"config", "name", name, "process",
		"type", "diffusion_trainer", "training_folder", "output", "device", "cuda:0",
		"network", "type", "lora", "linear", 16, "linear_alpha", 16,
		"save", "dtype", "float16", "save_every", 250,
		"train", "batch_size", 1, "gradient_accumulation", 1, "gradient_checkpointing", 1, "steps", steps,
		"lr", 1e-4, "optimizer", "adamw8bit", "disable_sampling", 0, "dtype", "bf16",
		"datasets", "folder_path", "/data/example", "caption_ext", "txt", "resolution", 512, 768, 1024,
		"sample", "sample_every", 250, "width", 1024, "height", 1024, "sample_steps", 20, "prompts",
		"a photo of a cat",
		"model", "name_or_path", "black-forest-labs/FLUX.1-dev", "arch", "flux", "quantize", 1, "low_vram", 0,
		"meta", "name", "[name]");
	if (!cfg)
		abort();
	return cfg;
}

int h_config_set(json_t *file, const char *path, json_t *value)
{
	char *p = xstrdup(path), *save = NULL;
	json_t *cur = file;
	int rc = -1;
	char *tok = strtok_r(p, ".", &save);
	while (tok) {
		char *next = strtok_r(NULL, ".", &save);
		char *br = strchr(tok, '[');
		long idx = -1;
		if (br) {
			idx = strtol(br + 1, NULL, 10);
			*br = '\0';
		}
		if (!next && idx < 0) {
			if (!json_is_object(cur))
				goto out;
			rc = json_object_set_new(cur, tok, value);
			value = NULL;
			goto out;
		}
		cur = json_object_get(cur, tok);
		if (idx >= 0) {
			if (!json_is_array(cur) || (size_t)idx >= json_array_size(cur))
				goto out;
			if (!next) {
				rc = json_array_set_new(cur, (size_t)idx, value);
				value = NULL;
				goto out;
			}
			cur = json_array_get(cur, (size_t)idx);
		}
		if (!cur)
			goto out;
		tok = next;
	}
out:
	json_decref(value);
	free(p);
	return rc;
}

json_t *h_submit(struct harness *h, const json_t *config, const json_t *extra)
{
	json_t *body = extra ? json_deep_copy(extra) : json_object();
	long st = 0;
	json_object_set(body, "config", (json_t *)config);
	json_t *job = h_post(h, "/v1/jobs", body, &st);
	json_decref(body);
	if (st < 200 || st > 299 || !json_is_integer(json_object_get(job, "id"))) {
		h_diag("submit: status %ld body %.500s", st, h->last_body ? h->last_body : "");
		json_decref(job);
		return NULL;
	}
	if (st != 201)
		h_diag("submit: status %ld, not 201 (job %lld)", st, h_int(job, "id"));
	return job;
}

char *h_submit_id(struct harness *h, const char *name, int steps, const json_t *extra)
{
	json_t *cfg = h_config(name, steps), *j = h_submit(h, cfg, extra);
	char *id = h_id(j, "id");

	json_decref(j);
	json_decref(cfg);
	return id;
}

json_t *h_job(struct harness *h, const char *id)
{
	long st = 0;
	json_t *j = h_getf(h, &st, "/v1/jobs/%s", id);
	if (st != 200) {
		json_decref(j);
		return NULL;
	}
	return j;
}

json_t *h_wait_job(struct harness *h, const char *id, const char *state, int timeout_ms)
{
	int64_t deadline = util_mono_ms() + timeout_ms;
	json_t *j = NULL;
	for (;;) {
		json_decref(j);
		j = h_job(h, id);
		if (j && !strcmp(h_str(j, "state"), state))
			return j;
		if (util_mono_ms() >= deadline || !h_server_alive(h))
			break;
		sleep_ms(25);
	}
	h_diag("job %s did not reach %s within %d ms; last seen:", id, state, timeout_ms);
	h_diag_json("job", j);
	json_decref(j);
	return NULL;
}

json_t *h_wait_attempts(struct harness *h, const char *id, int n, const char *state, int timeout_ms)
{
	int64_t deadline = util_mono_ms() + timeout_ms;
	json_t *j = NULL;
	for (;;) {
		json_decref(j);
		long st = 0;
		j = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
		json_t *a = json_object_get(j, "attempts");
		size_t len = json_array_size(a);
		if (len >= (size_t)n && (!state || !strcmp(h_str(json_array_get(a, len - 1), "state"), state))) {
			json_incref(a);
			json_decref(j);
			return a;
		}
		if (util_mono_ms() >= deadline || !h_server_alive(h))
			break;
		sleep_ms(25);
	}
	h_diag("job %s: no %d attempts (last %s) within %d ms", id, n, state ? state : "any", timeout_ms);
	h_diag_json("attempts", j);
	json_decref(j);
	return NULL;
}

/* ---- Postgres ---- */

PGresult *h_sql(struct harness *h, const char *sql, int n, const char *const *params)
{
	if (h->pg && PQstatus(h->pg) != CONNECTION_OK) {
		PQfinish(h->pg);
		h->pg = NULL;
	}
	if (!h->pg) {
		h->pg = PQconnectdb(h->db_url);
		if (PQstatus(h->pg) != CONNECTION_OK) {
			h_diag("libpq connect: %s", PQerrorMessage(h->pg));
			PQfinish(h->pg);
			h->pg = NULL;
			return NULL;
		}
	}
	PGresult *r = PQexecParams(h->pg, sql, n, NULL, params, NULL, NULL, 0);
	ExecStatusType s = PQresultStatus(r);
	if (s != PGRES_TUPLES_OK && s != PGRES_COMMAND_OK) {
		h_diag("SQL failed: %s: %s", sql, PQresultErrorMessage(r));
		PQclear(r);
		return NULL;
	}
	return r;
}

long long h_sql_int(struct harness *h, const char *sql, int n, const char *const *params)
{
	PGresult *r = h_sql(h, sql, n, params);
	long long v = -1;
	if (r && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

int h_pg_restart(struct harness *h, const char *mode)
{
	if (h->pg) {
		PQfinish(h->pg);
		h->pg = NULL;
	}
	char *pgsh = xasprintf("%s/tests/pg.sh", h->root);
	const char *argv[] = { "/bin/sh", pgsh, "restart", h->pgdata, mode, NULL };
	int rc = h_run(h, argv);
	free(pgsh);
	if (rc != 0)
		h_diag("pg.sh restart %s exited %d", mode, rc);
	return rc == 0 ? 0 : -1;
}

int h_pg_stop(struct harness *h, const char *mode)
{
	if (h->pg) {
		PQfinish(h->pg);
		h->pg = NULL;
	}
	char *pgsh = xasprintf("%s/tests/pg.sh", h->root);
	const char *argv[] = { "/bin/sh", pgsh, "stop", h->pgdata, mode, NULL };
	int rc = h_run(h, argv);
	free(pgsh);
	return rc == 0 ? 0 : -1;
}

int h_pg_start(struct harness *h)
{
	const char *port = getenv("RUNG_TEST_PGPORT");
	if (!port)
		return -1;
	char *pgsh = xasprintf("%s/tests/pg.sh", h->root);
	const char *argv[] = { "/bin/sh", pgsh, "start", h->pgdata, port, NULL };
	int rc = h_run(h, argv);
	free(pgsh);
	if (rc != 0)
		h_diag("pg.sh start exited %d", rc);
	return rc == 0 ? 0 : -1;
}

/* ---- fake worker ---- */

char *h_fake_register(struct harness *h, const char *name, const char *gpu_uuid, int mib)
{
	return h_fake_register_pool(h, name, gpu_uuid, mib, NULL, NULL);
}

char *h_fake_register_pool(struct harness *h, const char *name, const char *gpu_uuid, int mib, const char *pool,
			   const char *borrow)
{
	long st = 0;
	json_t *body = json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", name, "host", "test-host", "gpus",
		"uuid", gpu_uuid, "index", 0, "name", "NVIDIA Sim", "memory_total_mib", mib);
	json_t *r;
	char *id;

	if (pool)
		json_object_set_new(body, "pool", json_string(pool));
	if (borrow)
		json_object_set_new(body, "borrow", json_loads(borrow, JSON_DECODE_ANY, NULL));
	r = h_post(h, "/v1/workers", body, &st);
	id = (st == 200 || st == 201) ? h_id(r, "id") : NULL;
	if (!id)
		h_diag("register %s: status %ld body %.1000s", name, st, h->last_body ? h->last_body : "");
	json_decref(body);
	json_decref(r);
	return id;
}

json_t *h_facts_success(int steps)
{
	return json_pack("{s:i, s:n, s:b, s:s, s:n, s:i, s:i, s:i, s:i, s:{}, s:n, s:n, s:n, s:n, s:i, s:[s]}",
		"exit_code", 0, "signal", "cancelled", 0, "phase", "done", "oom_phase", "first_step", 1, "last_step",
		steps, "steps_done", steps, "total_steps", steps, "signatures", "oom", "error", "gpu_before",
		"gpu_after", "duration_ms", 1000, "log_tail", "done");
}

bool h_log_has(void *arg)
{
	struct h_log_has *l = arg;
	long st = 0;
	json_t *r = h_getf(l->h, &st, "/v1/jobs/%s/log?attempt=%d", l->id, l->n);
	bool ok = st == 200 && strstr(h_str(r, "text"), l->text) != NULL;

	json_decref(r);
	return ok;
}

char *h_long_job_saved(struct harness *h, const char *name, const char *pool)
{
	json_t *cfg = h_config(name, 200), *body, *j;
	struct h_log_has saved = { h, NULL, "Saving at step 20", 1 };
	long st = 0;
	char *id;

	h_config_set(cfg, "config.process[0].save.save_every", json_integer(10));
	body = json_pack("{s:O, s:{s:i}}", "config", cfg, "recovery", "max_attempts", 1);
	if (pool)
		json_object_set_new(body, "pool", json_string(pool));
	j = h_post(h, "/v1/jobs", body, &st);
	id = h_id(j, "id");
	saved.id = id;
	if (id)
		h_ok(h, wait_until(h_log_has, &saved, 60000), "a worker runs the long job %s and saves a checkpoint", id);
	json_decref(j);
	json_decref(body);
	json_decref(cfg);
	return id;
}

void h_ok_stopped_then_resumed(struct harness *h, const char *id, const char *what)
{
	json_t *j = h_wait_job(h, id, "succeeded", 90000);
	struct h_log_has resumed = { h, id, "starting from there", 2 };
	const char *p[] = { id };

	h_ok(h, j != NULL, "%s then runs again and succeeds, max_attempts 1 notwithstanding", what);
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint AND number = 1 AND outcome = 'preempted'",
			  1, p) == 1 && h_sql_int(h, "SELECT count(*) FROM attempts WHERE job_id = $1::bigint", 1, p) == 2,
	     "%s: its first attempt was preempted, its second succeeded", what);
	h_ok(h, wait_until(h_log_has, &resumed, 1) &&
		     h_sql_int(h, "SELECT (facts->>'first_step')::int FROM attempts WHERE job_id = $1::bigint AND number = 2",
			       1, p) > 1,
	     "%s: the second attempt resumed from the checkpoint on the same host", what);
	json_decref(j);
}

json_t *h_facts_stopped(int steps, int at)
{
	json_t *f = h_facts_success(steps);

	json_object_set_new(f, "cancelled", json_true());
	json_object_set_new(f, "signatures", json_pack("{s:i}", "job_stopped", 1));
	json_object_set_new(f, "phase", json_string("train"));
	json_object_set_new(f, "last_step", json_integer(at));
	json_object_set_new(f, "steps_done", json_integer(at));
	return f;
}

json_t *h_fake_lease(struct harness *h, const char *worker_id, const char *gpu_uuid, int wait_ms, long *status)
{
	json_t *body = json_pack("{s:s, s:i}", "gpu_uuid", gpu_uuid, "wait_ms", wait_ms);
	json_t *r = h_postf(h, body, status, "/v1/workers/%s/lease", worker_id);
	json_decref(body);
	if (*status != 200) {
		json_decref(r);
		return NULL;
	}
	return r;
}

json_t *h_fake_heartbeat(struct harness *h, const char *attempt_id, const char *token, long *status)
{
	json_t *body = json_pack("{s:s}", "token", token);
	json_t *r = h_postf(h, body, status, "/v1/attempts/%s/heartbeat", attempt_id);
	json_decref(body);
	return r;
}

json_t *h_fake_finish(struct harness *h, const char *attempt_id, const char *token, const json_t *facts,
	long *status)
{
	json_t *body = json_pack("{s:s, s:O}", "token", token, "facts", facts);
	json_t *r = h_postf(h, body, status, "/v1/attempts/%s/finish", attempt_id);
	json_decref(body);
	return r;
}

/* ---- extra rungd replicas (chaos tests addition, owned by it_chaos) ---- */

int h_replica_start(struct harness *h, struct h_proc *p, const char *name, const char *const *extra,
	char **base_url)
{
	char *bin = xasprintf("%s/bin/rungd", h->root);
	char port[32];
	int rc, pn = free_port();

	snprintf(port, sizeof(port), "127.0.0.1:%d", pn);
	*base_url = xasprintf("http://127.0.0.1:%d", pn);
	const char *argv[] = { bin, "--listen", port, "--database-url", h->db_url, "--lease-seconds", "2",
		"--heartbeat-ms", "200", "--reap-interval-ms", "200", "--poll-fallback-ms", "500", NULL };
	memset(p, 0, sizeof(*p));
	p->name = xstrdup(name);
	p->log_path = xasprintf("%s/%s.log", h->tmp, name);
	p->argv = strv_dup(argv);
	strv_append(&p->argv, extra);
	p->env = strv_dup(NULL);
	free(bin);
	if (proc_spawn(p) != 0)
		return -1;
	rc = h_replica_restart(h, p, *base_url);
	return rc;
}

int h_replica_restart(struct harness *h, struct h_proc *p, const char *base_url)
{
	CURL *c = curl_easy_init();
	int64_t deadline = util_mono_ms() + HEALTH_TIMEOUT_MS;
	int rc = -1;

	if (!h_proc_alive(p) && proc_spawn(p) != 0)
		goto out;
	while (util_mono_ms() < deadline) {
		long st = 0;
		json_t *j = http_do(c, base_url, "GET", "/healthz", NULL, 0, NULL, &st, NULL, NULL, NULL, true, NULL);
		json_decref(j);
		if (st == 200) {
			rc = 0;
			goto out;
		}
		if (!h_proc_alive(p)) {
			h_diag("%s exited (status %d) before /healthz answered", p->name, p->status);
			goto out;
		}
		sleep_ms(25);
	}
	h_diag("%s: /healthz did not answer 200 within %d ms", p->name, HEALTH_TIMEOUT_MS);
out:
	curl_easy_cleanup(c);
	(void)h;
	return rc;
}

int h_replica_stop(struct h_proc *p, int sig)
{
	return proc_stop(p, sig, STOP_TIMEOUT_MS);
}

void h_replica_free(struct harness *h, struct h_proc *p)
{
	if (!p || p->state == H_PROC_NONE)
		return;
	if (proc_stop(p, SIGTERM, 5000) != 0)
		proc_stop(p, SIGKILL, 5000);
	if (h->failed)
		dump_file(p->name, p->log_path);
	proc_release(p);
}

char *h_slurp(const char *path)
{
	char *t = util_read_file(path, NULL);

	return t ? t : xstrdup("");
}

int h_forget_arch(struct harness *h, const char *arch)
{
	long st = 0;
	json_t *ans = h_getf(h, &st, "/v1/profiles?arch=%s", arch), *p;
	size_t i;
	int n = 0;

	if (st != 200) {
		h_diag("GET /v1/profiles?arch=%s answered %ld", arch, st);
		n = -1;
	}
	json_array_foreach(json_object_get(ans, "profiles"), i, p) {
		json_decref(h_postf(h, NULL, &st, "/v1/profiles/%s/%lld/reset", arch,
				    (long long)json_integer_value(json_object_get(p, "gpu_class_mib"))));
		if (st != 200) {
			h_diag("reset of %s on %lld MiB answered %ld", arch,
			       (long long)json_integer_value(json_object_get(p, "gpu_class_mib")), st);
			n = -1;
		} else if (n >= 0) {
			n++;
		}
	}
	json_decref(ans);
	return n;
}

char *h_shell(struct harness *h, const char *cmd, int *rc)
{
	char *line = xasprintf("cd %s && %s 2>&1", h->root, cmd);
	FILE *p = popen(line, "r");
	char *out = xcalloc(1, 65536);
	size_t n = 0, got;
	int st;

	while (p && n < 65535 && (got = fread(out + n, 1, 65535 - n, p)) > 0)
		n += got;
	st = p ? pclose(p) : -1;
	*rc = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	free(line);
	return out;
}

char *h_rungctl(struct harness *h, const char *args, int *rc)
{
	char *cmd = xasprintf("RUNG_URL=%s RUNG_TOKEN=%s %s/bin/rungctl %s", h->base_url, h->admin_token, h->root, args);
	char *out = h_shell(h, cmd, rc);

	free(cmd);
	return out;
}

bool h_show_has(struct harness *h, const char *id, const char *text)
{
	char *args = xasprintf("show %s", id ? id : "0"), *out;
	int rc = -1;
	bool ok;

	out = h_rungctl(h, args, &rc);
	ok = rc == 0 && out && strstr(out, text);
	if (!ok)
		h_diag("rungctl %s: exit %d, wanted \"%s\" in: %.2000s", args, rc, text, out ? out : "");
	free(out);
	free(args);
	return ok;
}

bool h_job_leased(void *arg)
{
	struct h_job_ref *r = arg;
	json_t *j = h_job(r->h, r->id);
	bool yes = j && h_int(j, "attempts") >= 1;

	json_decref(j);
	return yes;
}

char *h_event_kinds(struct harness *h, const char *id)
{
	long st = 0;
	json_t *ev = h_getf(h, &st, "/v1/jobs/%s/events", id), *e;
	size_t i;
	char *out = xstrdup("");

	json_array_foreach(json_object_get(ev, "events"), i, e) {
		char *next = xasprintf("%s%s%s:%s>%s", out, i ? "," : "", h_str(e, "kind"), h_str(e, "from_state"),
				       h_str(e, "to_state"));
		free(out);
		out = next;
	}
	json_decref(ev);
	return out;
}

bool h_changed(const json_t *attempt, const char *suffix)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(attempt, "changes"), i, c) {
		const char *p = h_str(c, "path");
		size_t lp = strlen(p), ls = strlen(suffix);
		if (lp >= ls && !strcmp(p + lp - ls, suffix))
			return true;
	}
	return false;
}

char *h_scrape(struct harness *h)
{
	long st = 0;
	json_t *r = h_get(h, "/metrics", &st);
	char *text = st == 200 && h->last_body ? xstrdup(h->last_body) : NULL;

	json_decref(r);
	return text;
}

double h_sample(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, name, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}
