/* GPU health checks of rung-worker: the built-in judgement of an nvidia-smi reading (no compute
 * process, memory.used under a threshold) and the operator's command (its own process group,
 * CUDA_VISIBLE_DEVICES set, time-limited; exit 0 = pass). It neither schedules checks nor talks
 * to rungd: worker.c does that. */
#ifndef RUNG_WORKER_HEALTH_H
#define RUNG_WORKER_HEALTH_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

#define HEALTH_MAX_USED_MIB_DEFAULT 1024   /* built-in check: memory.used must stay below this */
#define HEALTH_TIMEOUT_MS_DEFAULT 60000    /* a health command is killed after this */
#define HEALTH_INTERVAL_MS_DEFAULT 60000   /* between checks of a GPU that is not ok */
#define HEALTH_DETAIL_MAX 1000             /* bytes of detail sent to rungd */

/* The built-in check on GPUSTATE (borrowed; NULL = nvidia-smi failed): passes when it lists no
 * compute process and memory_used_mib is known and below max_used_mib. *detail (heap, caller
 * frees) says what was seen either way. */
bool health_judge(const json_t *gpu_state, long long max_used_mib, char **detail);

/* Runs ARGV (borrowed) with CUDA_VISIBLE_DEVICES=CUDA_VISIBLE, output to LOG_PATH (truncated;
 * NULL: none), in its own process group; kills the group after TIMEOUT_MS or when *STOP (may be
 * NULL) becomes non-zero. Passes when it exits 0. *detail (heap, caller frees): the exit and the
 * last line of its output. */
bool health_run(char *const *argv, const char *cuda_visible, long timeout_ms, const char *log_path,
		const atomic_int *stop, char **detail);

#endif
