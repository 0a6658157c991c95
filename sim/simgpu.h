/* The simulated GPUs both sim binaries share: the state file named by RUNG_SIM_STATE (GPUs and the
 * processes holding their memory), loading it, and the trainer's own entry in it (added, updated
 * and removed under an flock). Header-only (static inline) because each sim .c file is its own binary.
 * Owns nothing outside the state file and its ".lock" sibling. */
#ifndef RUNG_SIMGPU_H
#define RUNG_SIMGPU_H

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define SIMGPU_DEFAULT_PATH "./var/sim/gpus.json"
#define SIMGPU_DEFAULT_UUID "GPU-5d1c8f3a-7b2e-4c11-9a3e-2f6b1c0d4e7a"
#define SIMGPU_DEFAULT_NAME "NVIDIA GeForce RTX 4090"
#define SIMGPU_DEFAULT_MIB 24564
#define SIMGPU_BASELINE_MIB 12 /* driver memory nvidia-smi counts as used on an idle GPU */

struct simgpu_proc {
	long pid;
	long used_mib;
	char name[64];
	int trainer; /* written by rung-sim-trainer; dropped when the pid is gone */
};

struct simgpu_gpu {
	char uuid[96];
	char name[128];
	long total_mib;
	struct simgpu_proc *procs;
	size_t nprocs;
};

struct simgpu_state {
	struct simgpu_gpu *gpus;
	size_t ngpus;
};

static inline const char *simgpu_path(void)
{
	const char *p = getenv("RUNG_SIM_STATE");
	return p && *p ? p : SIMGPU_DEFAULT_PATH;
}

/* True when a trainer entry's process still runs (a dead process frees its GPU memory). */
static inline int simgpu_pid_alive(long pid)
{
	if (pid <= 0)
		return 0;
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

static inline void simgpu_release(struct simgpu_state *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->ngpus; i++)
		free(st->gpus[i].procs);
	free(st->gpus);
	st->gpus = NULL;
	st->ngpus = 0;
}

static inline void simgpu_copy(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
}

/* Fills *st from a parsed state document; trainer entries of dead pids are skipped. */
static inline int simgpu_from_json(struct simgpu_state *st, const json_t *root)
{
	const json_t *gpus = json_object_get(root, "gpus");
	if (!json_is_array(gpus) || json_array_size(gpus) == 0)
		return -1;
	st->ngpus = json_array_size(gpus);
	st->gpus = calloc(st->ngpus, sizeof(*st->gpus));
	if (!st->gpus)
		return -1;
	for (size_t i = 0; i < st->ngpus; i++) {
		const json_t *g = json_array_get(gpus, i);
		struct simgpu_gpu *gp = &st->gpus[i];
		char defuuid[96];
		snprintf(defuuid, sizeof(defuuid), "GPU-00000000-0000-4000-8000-%012zu", i);
		simgpu_copy(gp->uuid, sizeof(gp->uuid),
			json_is_string(json_object_get(g, "uuid")) ?
			json_string_value(json_object_get(g, "uuid")) : defuuid);
		simgpu_copy(gp->name, sizeof(gp->name),
			json_is_string(json_object_get(g, "name")) ?
			json_string_value(json_object_get(g, "name")) : SIMGPU_DEFAULT_NAME);
		gp->total_mib = json_is_integer(json_object_get(g, "memory_total_mib")) ?
			(long)json_integer_value(json_object_get(g, "memory_total_mib")) : SIMGPU_DEFAULT_MIB;
		const json_t *procs = json_object_get(g, "processes");
		size_t n = json_is_array(procs) ? json_array_size(procs) : 0;
		gp->procs = calloc(n ? n : 1, sizeof(*gp->procs));
		if (!gp->procs)
			return -1;
		for (size_t j = 0; j < n; j++) {
			const json_t *p = json_array_get(procs, j);
			struct simgpu_proc pr = { 0 };
			pr.pid = (long)json_integer_value(json_object_get(p, "pid"));
			pr.used_mib = (long)json_integer_value(json_object_get(p, "used_mib"));
			pr.trainer = json_is_true(json_object_get(p, "trainer"));
			simgpu_copy(pr.name, sizeof(pr.name), json_is_string(json_object_get(p, "name")) ?
				json_string_value(json_object_get(p, "name")) : "python");
			if (pr.trainer && !simgpu_pid_alive(pr.pid))
				continue;
			gp->procs[gp->nprocs++] = pr;
		}
	}
	return 0;
}

static inline void simgpu_default(struct simgpu_state *st)
{
	st->ngpus = 1;
	st->gpus = calloc(1, sizeof(*st->gpus));
	if (!st->gpus)
		abort();
	st->gpus[0].procs = calloc(1, sizeof(*st->gpus[0].procs));
	if (!st->gpus[0].procs)
		abort();
	simgpu_copy(st->gpus[0].uuid, sizeof(st->gpus[0].uuid), SIMGPU_DEFAULT_UUID);
	simgpu_copy(st->gpus[0].name, sizeof(st->gpus[0].name), SIMGPU_DEFAULT_NAME);
	st->gpus[0].total_mib = SIMGPU_DEFAULT_MIB;
}

/* Loads the state file into *st (zeroed by the caller; release with simgpu_release). A missing
 * file means one idle 24564 MiB GPU. Returns 0, or -1 with a message on stderr when the file
 * exists but is not a valid state document. */
static inline int simgpu_load(struct simgpu_state *st)
{
	const char *path = simgpu_path();
	json_error_t err;
	json_t *root = NULL;
	int rc = -1;

	if (access(path, F_OK) != 0) {
		simgpu_default(st);
		return 0;
	}
	root = json_load_file(path, 0, &err);
	if (!root) {
		fprintf(stderr, "sim state %s: %s (line %d)\n", path, err.text, err.line);
		goto out;
	}
	if (simgpu_from_json(st, root) != 0) {
		fprintf(stderr, "sim state %s: expected {\"gpus\": [...]}\n", path);
		simgpu_release(st);
		goto out;
	}
	rc = 0;
out:
	json_decref(root);
	return rc;
}

/* Memory the GPU's processes hold, in MiB (the driver baseline not included). */
static inline long simgpu_procs_mib(const struct simgpu_gpu *g)
{
	long sum = 0;
	for (size_t i = 0; i < g->nprocs; i++)
		sum += g->procs[i].used_mib;
	return sum;
}

/* Sets (used_mib > 0) or removes (used_mib <= 0) the entry of PID on the GPU with UUID, marked
 * "trainer": true, in the state file; dead trainer entries are pruned on the way. Serialised by
 * flock on PATH.lock; the file is replaced atomically. No state file: nothing to do. Returns 0/-1. */
static inline int simgpu_set_trainer(const char *uuid, long pid, long used_mib)
{
	const char *path = simgpu_path();
	char lockpath[4096], tmppath[4096];
	json_t *root = NULL;
	int lockfd = -1, rc = -1;

	if (access(path, F_OK) != 0)
		return 0;
	snprintf(lockpath, sizeof(lockpath), "%s.lock", path);
	snprintf(tmppath, sizeof(tmppath), "%s.tmp.%ld", path, (long)getpid());
	lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (lockfd < 0 || flock(lockfd, LOCK_EX) != 0)
		goto out;
	root = json_load_file(path, 0, NULL);
	json_t *gpus = json_object_get(root, "gpus");
	size_t i;
	json_t *g;
	json_array_foreach(gpus, i, g) {
		json_t *procs = json_object_get(g, "processes");
		const char *gu = json_string_value(json_object_get(g, "uuid"));
		if (!json_is_array(procs)) {
			procs = json_array();
			json_object_set_new(g, "processes", procs);
		}
		for (size_t j = json_array_size(procs); j-- > 0;) {
			json_t *p = json_array_get(procs, j);
			long ppid = (long)json_integer_value(json_object_get(p, "pid"));
			if (json_is_true(json_object_get(p, "trainer")) && (ppid == pid || !simgpu_pid_alive(ppid)))
				json_array_remove(procs, j);
		}
		if (used_mib > 0 && gu && !strcmp(gu, uuid))
			json_array_append_new(procs, json_pack("{s:I,s:I,s:s,s:b}", "pid", (json_int_t)pid,
				"used_mib", (json_int_t)used_mib, "name", "python", "trainer", 1));
	}
	if (!root || json_dump_file(root, tmppath, JSON_INDENT(2)) != 0)
		goto out;
	if (rename(tmppath, path) != 0) {
		unlink(tmppath);
		goto out;
	}
	rc = 0;
out:
	json_decref(root);
	if (lockfd >= 0)
		close(lockfd);
	return rc;
}

#endif
