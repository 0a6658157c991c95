/* Plain sentences about a job that rungctl's verdict and the web job page both print, written
 * once: the first claim handed back for a bigger GPU (recovery_state.started_bigger), a queued job
 * that no usable GPU can take (the JOB's "placement", GET /v1/jobs/{id}), and the job's last retry
 * (recovery_state.retried). Pure: no I/O; the web page escapes them. */
#ifndef RUNG_JOBTEXT_H
#define RUNG_JOBTEXT_H

#include <jansson.h>

/* "started on a bigger GPU (memory model): its claim on a G MiB GPU was handed back before it
 * ran, for a GPU with at least M MiB" when job (a JOB, borrowed) has recovery_state.started_bigger;
 * else NULL. Heap string, the caller frees. */
char *jobtext_started_bigger(const json_t *job);

/* "waiting for a GPU: none of the usable GPUs on live workers meets its constraints (at least M
 * MiB; the largest has L MiB)" when job's placement counts no GPU ("... the N that meet its
 * constraints are on drained workers ..." when some are on drained ones); NULL when it counts some
 * or the job has no placement (it is not queued). Heap string, the caller frees. */
char *jobtext_placement(const json_t *job);

/* "retried by WHO from the current|target config after it was failed|cancelled; budgets count from
 * attempt N: NOTE" when job has recovery_state.retried (POST /v1/jobs/{id}/retry); else NULL. Heap
 * string, the caller frees. */
char *jobtext_retried(const json_t *job);

#endif
