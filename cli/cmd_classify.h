/* `rungctl classify`: a saved trainer log through the worker's scanner (recovery/scan) and the server's
 * policy (policy_classify), without a server. The pure part is exported for tests. */
#ifndef RUNG_CMD_CLASSIFY_H
#define RUNG_CMD_CLASSIFY_H

#include <jansson.h>
#include <stdio.h>

/* Reads all of in through the scanner and returns new FACTS: the scanner's fields plus exit_code
 * (exit_code >= 0 as given; -1 guesses as the trainer would have ended: 0 when the log reached "done"
 * or shows `Job stopped`, else 1), signal (null unless sig > 0), cancelled false, gpu_before/after null,
 * duration_ms 0. Returns NULL with *err (heap) on a read error. */
json_t *cmd_classify_facts(FILE *in, int exit_code, int sig, char **err);

#endif
