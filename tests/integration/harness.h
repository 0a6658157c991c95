/* The integration test harness: one per test binary. Owns a temp dir, the real rungd and
 * rung-worker child processes (logs to files, dumped when a check fails), HTTP helpers over
 * libcurl + jansson, polling waits with deadlines, and read-only SQL checks over libpq.
 * It reads the env tests/run.sh sets (RUNG_TEST_DATABASE_URL, RUNG_TEST_PGDATA, RUNG_ROOT, ...). */
#ifndef RUNG_HARNESS_H
#define RUNG_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>
#include <jansson.h>
#include <libpq-fe.h>

#define H_MAX_WORKERS 32

enum h_proc_state {
	H_PROC_NONE,    /* never started */
	H_PROC_RUNNING, /* started, not reaped */
	H_PROC_EXITED   /* reaped; status holds the wait status */
};

struct h_proc {
	enum h_proc_state state;
	pid_t pid;
	int status;       /* wait status once EXITED */
	char *name;       /* "rungd", "worker w1" */
	char *log_path;   /* stdout+stderr, appended across restarts */
	char **argv;      /* NULL-terminated, kept for restarts */
	char **env;       /* extra "KEY=VALUE" entries, NULL-terminated */
};

struct h_worker {
	struct h_proc proc;
	char *name;
	char *state_path; /* the RUNG_SIM_STATE gpus.json */
	char *work_dir;
};

struct harness {
	char *root;       /* RUNG_ROOT */
	char *tmp;        /* this binary's temp dir */
	char *db_url;     /* RUNG_TEST_DATABASE_URL */
	char *pgdata;     /* RUNG_TEST_PGDATA */
	int port;         /* rungd's port */
	char *base_url;   /* http://127.0.0.1:PORT */
	struct h_proc server;
	char **server_extra; /* extra rungd args, NULL-terminated */
	struct h_worker workers[H_MAX_WORKERS];
	int nworkers;
	int passed, failed;
	void *curl;       /* CURL *, reused */
	PGconn *pg;       /* lazily opened */
	char *last_body;  /* raw body of the last HTTP answer */
	char *last_location; /* Location header of the last answer, or NULL */
	long last_ms;     /* duration of the last HTTP request */
	long last_status; /* status of the last HTTP answer (0: transport failure) */
	bool server_dead_noted; /* "rungd exited" already said */
	/* auth hook (owned by the auth engineer): tokens made with `rungd token create` right after the
	 * first migrate; auth_token is sent as `Authorization: Bearer` on every request (default the
	 * admin token; NULL sends none); workers get worker_token as RUNG_TOKEN. */
	char *admin_token, *worker_token, *submitter_token;
	const char *auth_token;
};

/* Options for h_worker_start. gpus_json: the simulated GPU state file's text (see sim/README.md),
 * NULL for h_sim_gpus(1, 24576). env: extra "KEY=VALUE" (RUNG_SIM_* knobs), NULL-terminated or NULL.
 * args: extra rung-worker arguments, NULL-terminated or NULL. */
struct h_worker_opts {
	const char *gpus_json;
	const char *const *env;
	const char *const *args;
};

/* POST /v1/jobs/cancel {KEY: VALUE, "state": "active"}: cancels the queued, scheduled and running
 * jobs of a pool, kind or owner (cleanup between cases). Returns the HTTP status. */
long h_cancel_active(struct harness *h, const char *key, const char *value);

/* "class/action/rung" of each attempt of an attempts array, joined by spaces ("-" for no rung); heap. */
char *h_story(const json_t *attempts);

/* Creates the harness from the env set by tests/run.sh and a temp dir; prints a `not ok` and
 * exits 1 when the env is missing. Never returns NULL. Free with h_free. */
struct harness *h_new(const char *test_name);
/* Stops every child (SIGTERM, then SIGKILL after 5 s), dumps the logs when a check failed,
 * removes the temp dir, frees. Returns the exit code for main: 0 when every check passed. */
int h_free(struct harness *h);

/* Checks: print `ok - NAME` or `not ok - NAME` and count; h_free dumps the children's logs when
 * any check failed. h_ok returns cond so callers can skip dependent checks. */
bool h_ok(struct harness *h, bool cond, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void h_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints a compact JSON value as a diagnostic line prefixed with `label`. */
void h_diag_json(const char *label, const json_t *v);
/* Prints the last lines of every child's log as `#` lines. */
void h_dump_logs(struct harness *h);

/* rungd: runs `rungd migrate` then starts rungd on a free port with the short test timings and
 * waits (20 s) until GET /healthz answers 200. extra: more arguments (NULL-terminated) or NULL,
 * kept for restarts. Returns 0, or -1 (with diagnostics) when it did not come up. */
int h_server_start(struct harness *h, const char *const *extra);
/* Auth hook: runs `rungd token create --role ROLE --name NAME` against the test database and
 * returns the printed token (heap) or NULL with a diagnostic. */
char *h_token_create(struct harness *h, const char *role, const char *name);

/* Sends sig to rungd and waits (10 s) for it to exit. Returns 0 when it exited. */
int h_server_stop(struct harness *h, int sig);
/* Starts rungd again with the same port and arguments (no migrate), waits for /healthz. */
int h_server_restart(struct harness *h);

/* Starts a rung-worker named `name` (a new slot, or the same slot again after it exited) with the
 * simulated nvidia-smi and trainer. Returns the worker (owned by h) or NULL. */
struct h_worker *h_worker_start(struct harness *h, const char *name, const struct h_worker_opts *o);
/* Sends sig to the worker and waits (10 s) for it to exit. Returns 0 when it exited. */
int h_worker_stop(struct harness *h, struct h_worker *w, int sig);
/* Restarts a stopped worker with its previous arguments and env. Returns 0 or -1. */
int h_worker_restart(struct harness *h, struct h_worker *w);
/* True while the process has not exited (reaps it when it has). */
bool h_proc_alive(struct h_proc *p);
/* False (with a one-time diagnostic) when rungd was started and has exited since: waits give up. */
bool h_server_alive(struct harness *h);

/* A simulated GPU state file's text with n GPUs of mib MiB each (uuid GPU-sim-<tag>-<i>). Heap. */
char *h_sim_gpus(const char *tag, int n, int mib);

/* HTTP. Each returns the parsed JSON answer (new reference; NULL for an empty or non-JSON body,
 * whose text stays in h->last_body) and stores the status in *status (0 when the request failed
 * at the transport level). headers: extra "Name: value" lines, NULL-terminated, or NULL
 * (a body is sent as application/json unless they name a Content-Type). */
json_t *h_request(struct harness *h, const char *method, const char *path, const char *body,
	size_t body_len, const char *const *headers, long *status);
/* POSTs body (borrowed; NULL posts an empty object). */
json_t *h_post(struct harness *h, const char *path, const json_t *body, long *status);
json_t *h_post_hdr(struct harness *h, const char *path, const json_t *body, const char *const *headers,
	long *status);
json_t *h_post_raw(struct harness *h, const char *path, const char *body, size_t len, long *status);
json_t *h_get(struct harness *h, const char *path, long *status);
/* One request on a fresh connection that touches no harness state: safe from another thread.
 * *ms: how long it took. Returns the parsed answer (new reference) or NULL. */
json_t *h_request_once(const struct harness *h, const char *method, const char *path, const char *body,
	long *status, long *ms);
/* A browser's request to a /ui page: the rung_token cookie of token (NULL: none) and no bearer
 * token, one more header line (NULL: none; "Sec-Fetch-Site: ..." or "Origin: ...") and, with a
 * form (NULL: no body), its Content-Type. Returns the status; the page stays in h->last_body, a
 * redirect's target in h->last_location. */
long h_browse(struct harness *h, const char *token, const char *method, const char *path, const char *form,
	const char *header);
/* printf-style path variants. */
json_t *h_getf(struct harness *h, long *status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
json_t *h_postf(struct harness *h, const json_t *body, long *status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* An id field (integer or string) as a heap string, or NULL when absent. */
char *h_id(const json_t *obj, const char *key);
/* String field or "" (borrowed). */
const char *h_str(const json_t *obj, const char *key);
/* Integer field or -1. */
long long h_int(const json_t *obj, const char *key);

/* Polls cond(arg) every 25 ms until it returns true or timeout_ms passes. Returns the last result. */
bool wait_until(bool (*cond)(void *arg), void *arg, int timeout_ms);

/* The factor by which deadlines that wait for a volume of work stretch: RUNG_TEST_SLOW (set by
 * tests/run.sh under sanitizers, whose binaries run several times slower), else 1. */
int h_slow(void);

/* A small Flux LoRA config (image, batch 1, checkpointing on) with `steps` steps and the
 * given name; new reference. Tests change fields with h_config_set. */
json_t *h_config(const char *name, int steps);
/* Sets a value at a dotted path below the file root, e.g. "config.process[0].train.batch_size";
 * steals value. Returns 0, or -1 when the path does not exist. */
int h_config_set(json_t *file, const char *path, json_t *value);
/* Submits {"config": config, ...extra} (both borrowed; extra may be NULL) and returns the job
 * (new reference) when the answer is 2xx with a job id, else NULL with diagnostics; a 2xx other
 * than 201 is noted as a diagnostic (h->last_status tells which; tests of submit check it). */
json_t *h_submit(struct harness *h, const json_t *config, const json_t *extra);
/* h_submit of h_config(name, steps) with extra (borrowed; NULL: none); returns the job's id (heap)
 * or NULL. */
char *h_submit_id(struct harness *h, const char *name, int steps, const json_t *extra);
/* GET /v1/jobs/ID; new reference or NULL. */
json_t *h_job(struct harness *h, const char *id);
/* Waits until the job is in `state` (polling GET) and returns it (new reference), or NULL after
 * timeout_ms with a diagnostic naming the last state seen. */
json_t *h_wait_job(struct harness *h, const char *id, const char *state, int timeout_ms);
/* Waits until GET /v1/jobs/ID/attempts lists at least n attempts, the last in attempt state
 * `state` (NULL: any); returns the attempts array (new reference) or NULL. */
json_t *h_wait_attempts(struct harness *h, const char *id, int n, const char *state, int timeout_ms);

/* SQL over libpq on the test database (read-only checks). Returns the result (PQclear it) or NULL
 * with a diagnostic. params: text, NULL-terminated count given by n. */
PGresult *h_sql(struct harness *h, const char *sql, int n, const char *const *params);
/* First column of the first row as an integer; -1 on error or no row. */
long long h_sql_int(struct harness *h, const char *sql, int n, const char *const *params);
/* Restarts the test cluster (tests/pg.sh restart DIR MODE). Closes h->pg first. Returns 0 or -1. */
int h_pg_restart(struct harness *h, const char *mode);
/* Stops the test cluster (mode fast|immediate) or starts it again on RUNG_TEST_PGPORT. 0 or -1. */
int h_pg_stop(struct harness *h, const char *mode);
int h_pg_start(struct harness *h);
/* Runs argv (NULL-terminated) and waits; returns its exit status (or -1). Output to the harness log. */
int h_run(struct harness *h, const char *const *argv);

/* A fake worker speaking the HTTP protocol directly (register, lease, heartbeat, finish), for
 * protocol tests that must control timing. Registers `name` with one GPU of mib MiB; returns
 * the worker id (heap) or NULL. */
char *h_fake_register(struct harness *h, const char *name, const char *gpu_uuid, int mib);
/* The same, joining pool (NULL: none sent, so `default`) and borrowing borrow (a JSON list as text;
 * NULL: none sent). */
char *h_fake_register_pool(struct harness *h, const char *name, const char *gpu_uuid, int mib, const char *pool,
			   const char *borrow);
/* POST /v1/workers/WID/lease {"gpu_uuid", "wait_ms"}; returns the LEASE (new reference) on 200,
 * else NULL; *status gets the status. */
json_t *h_fake_lease(struct harness *h, const char *worker_id, const char *gpu_uuid, int wait_ms, long *status);
/* POST /v1/attempts/AID/heartbeat {"token"} or /finish {"token", "facts"} (facts borrowed);
 * returns the answer (new reference or NULL) and the status in *status. */
json_t *h_fake_heartbeat(struct harness *h, const char *attempt_id, const char *token, long *status);
json_t *h_fake_finish(struct harness *h, const char *attempt_id, const char *token, const json_t *facts,
	long *status);
/* For wait_until(h_log_has, &l): whether attempt n of job id's log, as shipped (GET
 * /v1/jobs/{id}/log?attempt=n), holds text. */
struct h_log_has {
	struct harness *h;
	const char *id, *text;
	int n;
};
bool h_log_has(void *arg);
/* The start of a preemption played with a real worker: submits job NAME of 200 steps with a
 * checkpoint every 10 and max_attempts 1, into POOL (NULL: none named), and waits up to 60 s for
 * attempt 1 to save at step 20 (h_ok says so). Returns its id (heap), or NULL when it was not
 * accepted. */
char *h_long_job_saved(struct harness *h, const char *name, const char *pool);
/* The end of a preemption played with a real worker: waits up to 90 s for job id to succeed, then
 * checks (h_ok, prefixed by what: "the long job") that it ran twice, attempt 1 preempted and attempt
 * 2 resumed from attempt 1's checkpoint (its log says so; its first step is past 1). */
void h_ok_stopped_then_resumed(struct harness *h, const char *id, const char *what);

/* FACTS for a clean success of `steps` steps; new reference. */
json_t *h_facts_success(int steps);
/* FACTS of a trainer of `steps` steps that the worker stopped on a cancel (SIGINT) after step `at`:
 * it said `Job stopped`; new reference. */
json_t *h_facts_stopped(int steps, int at);

/* ---- extra rungd replicas (chaos tests addition, owned by it_chaos) ---- */
/* Starts another rungd (no migrate, no tokens) on a free port against the test database with the
 * test timings plus extra (NULL-terminated or NULL; later flags win), into the caller's *p, and
 * waits (20 s) for /healthz. *base_url (heap, the caller frees) gets http://127.0.0.1:PORT.
 * Returns 0, or -1 with a diagnostic. Free p with h_replica_free. */
int h_replica_start(struct harness *h, struct h_proc *p, const char *name, const char *const *extra,
	char **base_url);
/* Starts p again (same port and arguments) when it is not running; waits for /healthz. 0 or -1. */
int h_replica_restart(struct harness *h, struct h_proc *p, const char *base_url);
/* Sends sig and waits (10 s) for the replica to exit. Returns 0 when it exited. */
int h_replica_stop(struct h_proc *p, int sig);
/* Stops the replica (TERM, then KILL), dumps its log when a check failed, releases p. NULL-safe. */
void h_replica_free(struct harness *h, struct h_proc *p);

/* The whole file at path as a heap string ("" when it cannot be opened); the caller frees it. */
char *h_slurp(const char *path);

/* Support's reset of every (arch, GPU class) profile GET /v1/profiles?arch= lists, so a case tells
 * the story of a fleet with no memory history of arch (the model learns an arch from every class).
 * Returns how many were reset, -1 (with a diagnostic) when the list or a reset failed. */
int h_forget_arch(struct harness *h, const char *arch);

/* GET /metrics as the harness's token (heap text), or NULL when it did not answer 200. */
char *h_scrape(struct harness *h);
/* The value of the sample line `name` (exact, labels included) in the exposition text, or -1 when
 * absent (text NULL: -1). */
double h_sample(const char *text, const char *name);
/* Runs the shell command cmd in the repository root, stderr with stdout; returns what it printed
 * (heap, at most 64 KiB) and its exit status in *rc (-1 when it did not exit). */
char *h_shell(struct harness *h, const char *cmd, int *rc);
/* Runs `rungctl ARGS` (a shell word list) against this rungd with the admin token (h_shell). */
char *h_rungctl(struct harness *h, const char *args, int *rc);
/* Whether `rungctl show ID` (as admin) exits 0 and prints text; ID NULL reads as "0". */
bool h_show_has(struct harness *h, const char *id, const char *text);
/* A job for wait_until's conditions. */
struct h_job_ref {
	struct harness *h;
	const char *id;
};
/* For wait_until(h_job_leased, &ref): whether the job has an attempt (it was leased). */
bool h_job_leased(void *arg);
/* The kinds of job id's events as "kind:from>to", comma-separated, oldest first (heap). */
char *h_event_kinds(struct harness *h, const char *id);

/* True when one of the attempt's ladder changes ("changes" of an attempt document) has a path
 * ending in suffix. */
bool h_changed(const json_t *attempt, const char *suffix);

#endif
