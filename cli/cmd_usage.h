/* `rungctl usage`: GPU time per owner over a window (GET /v1/usage), and the pure pieces it is made
 * of, exported for unit tests. */
#ifndef RUNG_CMD_USAGE_H
#define RUNG_CMD_USAGE_H

#include <stdint.h>
#include <jansson.h>

/* A time as `usage --since/--until` take it: a duration before now_ms (`90m`, `36h`, `7d`, `2w`; a
 * whole number and one of s m h d w) or an RFC 3339 time (`2026-12-01T00:00:00Z`), into the RFC
 * 3339 UTC text the API takes (heap, *iso). Returns 0, or -1 with *err (heap) naming opt. */
int cmd_usage_time(const char *opt, const char *arg, int64_t now_ms, char **iso, char **err);

/* The report as `rungctl usage` prints it: a table of owners (GPU hours in all and by how the
 * attempts ended, attempts, jobs that ended) and a total line with the share lost to OOMs and what
 * resuming from checkpoints spared (jobtext_spared); then, when the window's attempts ran on two GPU
 * models or more, each owner's GPU hours per model ("GPU hours by GPU model:"). Heap string. */
char *cmd_usage_text(const json_t *doc);

#endif
