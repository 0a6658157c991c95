/* AI Toolkit configs as rung sees them: the whole file object ({"job", "config": {"name",
 * "process": [...]}, "meta"}), accessors for the keys that matter for memory, validation at
 * submit, and the job kind. Pure code on jansson values; no I/O. */
#ifndef RUNG_ATCONFIG_H
#define RUNG_ATCONFIG_H

#include <jansson.h>

/* Checks that `file` has the shape AI Toolkit needs (config.process[0] with train, datasets, model;
 * numbers where numbers belong; sane ranges so the policy cannot misbehave). Returns 0 when valid;
 * else -1 with *field set to the JSON path of the first problem (e.g. "config.process[0].train.batch_size")
 * and *message to a sentence; both heap strings the caller frees. */
int atconfig_validate(const json_t *file, char **field, char **message);

/* "video" when any dataset or the sample asks for more than one frame, or the arch is a video
 * model (wan*, ltx*, hunyuan_video*); else "image". Borrowed static string. */
const char *atconfig_kind(const json_t *file);

/* Borrowed pointer to config.process[0], or NULL. */
json_t *atconfig_process(const json_t *file);

#endif
