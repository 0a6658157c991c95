/* The jobs a job runs after (migration 033): the one place their bounds and their comma-separated
 * text ("12,13") are written, for rungd (a submit's "after", ?after= on a raw file, a cancel's
 * "after") and rungctl (submit --after, cancel --after). Pure. */
#ifndef RUNG_AFTER_H
#define RUNG_AFTER_H

#include <jansson.h>

#define AFTER_MAX 32                     /* jobs a job may run after */
#define AFTER_ID_MAX 9007199254740991LL  /* 2^53 - 1: a job id any JSON reader keeps exact */

/* "12" or "12,13" (1 to AFTER_MAX ids, each 1..AFTER_ID_MAX, no spaces, no empty item) as a new JSON
 * list of integers; NULL when text is anything else. */
json_t *after_parse(const char *text);

#endif
