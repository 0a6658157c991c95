/* The jobs a job runs after (migration 033): the one place their bounds, their comma-separated
 * text ("12,13") and the words of after_when (036) are written, for rungd (a submit's "after", ?after= on a raw file, a cancel's
 * "after") and rungctl (submit --after, cancel --after). Pure. */
#ifndef RUNG_AFTER_H
#define RUNG_AFTER_H

#include <jansson.h>
#include <stdbool.h>

#define AFTER_MAX 256                    /* jobs a job may run after: a whole sweep (cli/sweep.c's most) */
#define AFTER_LISTED 32                  /* a sentence names this many of them, then says how many more */
#define AFTER_ID_MAX 9007199254740991LL  /* 2^53 - 1: a job id any JSON reader keeps exact */

/* Which endings of the jobs it runs after release a job (migration 036, "after_when"): the words
 * rungd accepts and rungctl checks before sending, and what a refusal says. */
#define AFTER_WHEN_RULE \
	"succeeded (the default: each job it runs after must succeed), ended (each must end, whatever its " \
	"outcome) or failed (each must fail or be cancelled; a success cancels this job)"

/* Whether when is "succeeded", "ended" or "failed". NULL is not. */
bool after_when_ok(const char *when);

/* "12" or "12,13" (1 to AFTER_MAX ids, each 1..AFTER_ID_MAX, no spaces, no empty item) as a new JSON
 * list of integers; NULL when text is anything else. */
json_t *after_parse(const char *text);

#endif
