/* GPU discovery and readings through nvidia-smi (a real one or bin/sim/nvidia-smi): runs it with
 * a timeout, parses its CSV robustly, and builds the GPUSTATE objects of docs/DESIGN.md.
 * Owns nothing long-lived; every call runs nvidia-smi afresh. */
#ifndef RUNG_WORKER_GPU_H
#define RUNG_WORKER_GPU_H

#include <jansson.h>
#include <stddef.h>

struct gpu_info {
	int index;
	char uuid[96];
	char name[128];
	long long total_mib, used_mib, free_mib;   /* -1 when nvidia-smi said [N/A] */
};

struct gpu_proc {
	char uuid[96];
	long long pid;
	long long used_mib;                        /* -1 when [N/A] */
};

/* Parses `--query-gpu=index,uuid,name,memory.total,memory.used,memory.free --format=csv,noheader,nounits`
 * output. *out is a new array (caller frees) of *n entries. Returns 0, or -1 with *err (heap) set
 * when a line is malformed. Empty text gives 0 GPUs. */
int gpu_parse_list(const char *text, struct gpu_info **out, size_t *n, char **err);
/* Parses `--query-compute-apps=gpu_uuid,pid,used_memory --format=csv,noheader,nounits` output
 * (empty, or "No running processes found", means none). Same contract as gpu_parse_list. */
int gpu_parse_procs(const char *text, struct gpu_proc **out, size_t *n, char **err);

/* Runs SMI with the GPU query and parses it. Returns 0, or -1 with *err (heap) set when nvidia-smi
 * cannot run, fails, times out (10 s) or prints something unparsable. */
int gpu_list(const char *smi, struct gpu_info **out, size_t *n, char **err);
/* Runs SMI with the compute-apps query. Same contract. */
int gpu_procs(const char *smi, struct gpu_proc **out, size_t *n, char **err);

/* GPUSTATE of the GPU with UUID: {"uuid", "memory_total_mib", "memory_used_mib", "processes":
 * [{"pid", "used_mib"}]}, a new reference; NULL (logged) when nvidia-smi fails or the GPU is
 * missing. */
json_t *gpu_state(const char *smi, const char *uuid);

/* memory.used of the GPU with UUID from one GPU query (cheaper than gpu_state: no process query);
 * -1 when nvidia-smi fails, the GPU is missing or it said [N/A]. Logs nothing. */
long long gpu_used_mib(const char *smi, const char *uuid);

/* The peak of an attempt (FACTS.peak): the highest memory.used seen while the trainer ran, with
 * the phase and step the scanner was in at that reading. Embedded; no heap. */
struct gpu_peak {
	long long mib;     /* -1 while nothing was read */
	char phase[24];    /* load, baseline_sample, train, sample or save */
	long long step;    /* -1 when unknown (load) */
};

/* Starts an empty peak. */
void gpu_peak_init(struct gpu_peak *p);
/* Notes one reading USED_MIB (ignored when < 0) taken in scanner phase PHASE (a scan phase name;
 * "start" counts as load, "done" as save) at STEP (-1: unknown). Of equal highs the last one's phase
 * and step are kept: the log the phase comes from can lag the memory it describes. */
void gpu_peak_note(struct gpu_peak *p, long long used_mib, const char *phase, long long step);
/* FACTS.peak: {"mib", "phase", "step": int|null}, or JSON null when nothing was read. New reference. */
json_t *gpu_peak_json(const struct gpu_peak *p);

#endif
