/* rung-worker's core: GPU discovery, registration with rungd, one slot thread per GPU that
 * long-polls for a lease, runs the attempt (runner), heartbeats, and delivers the finish through
 * the spool; GPU health reports (health.h) at slot start, every interval while the GPU is not ok,
 * and after a few empty long-polls in a row; draining on stop. main.c owns flags and signals; this owns everything after. */
#ifndef RUNG_WORKER_WORKER_H
#define RUNG_WORKER_WORKER_H

#include <jansson.h>

struct worker_opts {
	const char *server;       /* rungd base URL */
	const char *name;         /* worker name (re-registering with it keeps the id) */
	const char *pool;         /* worker pool (common/pool.h): only its jobs are leased here; NULL: "default" */
	const char *borrow;       /* "a,b": other pools whose jobs it also takes, in order, when its own has none
				   * (migration 028); NULL or "": none */
	const char *smi;          /* nvidia-smi path */
	const char *trainer_cmd;  /* argv template, split on spaces: {config} {attempt} {job} {gpu_index} {gpu_uuid} */
	const char *trainer_dir;  /* cwd of the trainer */
	const char *work_dir;     /* attempts/ and spool/ live here */
	const char *gpus;         /* "0,2": the subset of GPU indexes to use; NULL: all */
	long lease_wait_ms, cancel_grace_ms, drain_timeout_ms;
	const char *health_cmd;   /* health check argv template ({gpu_index} {gpu_uuid}); NULL: built-in */
	long health_interval_ms;  /* between checks of a GPU that is not ok; 0: 60000 */
	long health_timeout_ms;   /* health command time limit; 0: 60000 */
	long health_max_used_mib; /* built-in check: memory.used limit; 0: 1024 */
	long memory_sample_ms;    /* between memory.used readings for FACTS.peak while a trainer runs; 0: 1000 */
	long gpu_memory_mib;      /* each GPU's memory as rung counts it when under nvidia-smi's memory.total
				   * (a GPU shared with other work, a trainer held under a cap); also the
				   * trainer's RUNG_GPU_MEMORY_MIB; 0: memory.total */
	long stall_timeout_s;     /* a trainer that prints nothing this long is killed as stalled; 0: never */
	long log_interval_ms;     /* between sends of new trainer output to rungd (its log); 0: never */
};

#define WORKER_MEMORY_SAMPLE_MS_DEFAULT 1000
#define WORKER_UNKILLABLE_MS 30000 /* after the stall's SIGKILL, how long before the attempt is reported anyway */

struct worker;

/* Checks the options (a pool that is not a pool name: an error naming --pool; a borrow list that
 * pool_borrow_parse refuses: an error naming --borrow), creates the work directories and discovers the GPUs with nvidia-smi.
 * Returns a worker (free with worker_free), or NULL with *err (heap) saying why. */
struct worker *worker_new(const struct worker_opts *opts, char **err);

/* Resends spooled finishes, registers (retrying while rungd is unreachable), runs one slot per
 * GPU and returns 0 once worker_stop was called and every slot has drained; -1 on a fatal error. */
int worker_run(struct worker *w);

/* Asks the worker to stop: no new leases at once; running attempts get the drain timeout (none
 * when IMMEDIATE), then SIGINT, then SIGKILL after the cancel grace. Thread-safe; not for use
 * inside a signal handler. */
void worker_stop(struct worker *w, int immediate);

/* NULL is a no-op. Only after worker_run returned (or was never called). */
void worker_free(struct worker *w);

/* The config an attempt of job `job_id` runs: `config` with each relative or absent
 * process[].training_folder moved under WORK_DIR/jobs/JOB_ID/ (absolute ones kept). Borrows its
 * arguments; returns a new reference the caller owns. */
json_t *worker_job_config(const json_t *config, const char *work_dir, const char *job_id);

#endif
