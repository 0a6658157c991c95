/* The memory model's routes (issue 12): GET /v1/profiles lists what rung learned per (arch, GPU
 * class), POST /v1/profiles/{arch}/{gpu_class_mib}/reset forgets one, GET /v1/jobs/{id}/memory
 * estimates a job's current config. The SQL reads stored OBSERVATIONs (migrations/014_memory.sql);
 * the fit and the prediction are recovery/memmodel.c, run here on the loop. */
#ifndef RUNG_API_PROFILES_H
#define RUNG_API_PROFILES_H

#include <stdbool.h>

struct hreq;

#define API_PROFILES_ARCH_MAX 64          /* bytes of an arch name */
#define API_PROFILES_GPU_MIB_MAX 10000000 /* 10 TB of GPU memory: anything above is a typo */

/* True when s names an arch as stored: 1..API_PROFILES_ARCH_MAX bytes of [A-Za-z0-9_.-]. */
bool api_profiles_arch_ok(const char *s);
/* A GPU memory size in MiB as text: 1..API_PROFILES_GPU_MIB_MAX, digits only; -1 when not. */
long api_profiles_parse_mib(const char *s);

/* Each handler answers h exactly once.
 * list: 200 {"profiles": [PROFILE + {"gpu_class_mib", "reset_at", "reset_by"}]} (?arch= filters;
 * 400 field "arch"). reset (body {"note"?: why, kept in the profile_reset event}): 200 {"arch",
 * "gpu_class_mib", "reset_at", "reset_by", "note"}; 400 field "arch", "gpu_class_mib" or "note";
 * 404 when rung knows nothing of that profile. job: 200 {"job_id",
 * "arch", "gpu_mib", "features", "profile", "estimate"} (?gpu_mib= picks the GPU, else the job's
 * latest attempt's; profile and estimate null when neither is known); 400 field "gpu_mib"; 404. */
void api_profiles_list(struct hreq *h);
void api_profiles_reset(struct hreq *h);
void api_profiles_job(struct hreq *h);

#endif
