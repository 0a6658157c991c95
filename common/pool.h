/* Worker pools (migrations/026_pools.sql): a job runs only on a worker of its pool. The one place a
 * pool name's rule is written, for rungd (a submit's "pool", a registration's), rung-worker --pool,
 * rungctl --pool and the tests. Pure. */
#ifndef RUNG_POOL_H
#define RUNG_POOL_H

#include <jansson.h>
#include <stdbool.h>

#define POOL_DEFAULT "default" /* a job's or worker's pool when none is named */
#define POOL_NAME_MAX 63       /* bytes of a name */

/* What a pool name is, for error messages: "1 to 63 of a-z 0-9 . _ -, starting with a letter or digit". */
#define POOL_NAME_RULE "1 to 63 of a-z 0-9 . _ -, starting with a letter or digit"

/* Whether NAME (NULL: no) is a pool name: 1 to POOL_NAME_MAX bytes of a-z 0-9 . _ -, the first a
 * letter or digit. Lower case only, so that "H200" and "h200" cannot name two pools. */
bool pool_name_ok(const char *name);

/* Borrowing (migration 028): a worker may also take the jobs of up to POOL_BORROW_MAX other pools,
 * in the order named, when its own pool has none it may run. */
#define POOL_BORROW_MAX 8

/* Checks BORROW, a worker's pools to borrow from: a JSON array of at most POOL_BORROW_MAX distinct
 * pool names, none of them OWN (its own pool). Returns NULL when valid, else a heap message for a
 * 400 naming "borrow" (the caller frees it). */
char *pool_borrow_check(const json_t *borrow, const char *own);

/* Parses TEXT, a comma-separated list of pool names ("a,b"; "" is none; spaces around a name are
 * ignored) into a new JSON array, checked as pool_borrow_check does against OWN. Returns the array,
 * or NULL with *err a heap message (rung-worker --borrow). */
json_t *pool_borrow_parse(const char *text, const char *own, char **err);

/* The pool names of a JSON array (a token's pools, migration 027) joined with sep: "a, b" (heap);
 * a copy of none when names is not an array or is empty. Elements that are not strings read "?". */
char *pool_list_join(const json_t *names, const char *sep, const char *none);

/* A token's limits per pool (migration 034: {"POOL": N}, a JSON object; or its quotas per pool, 037:
 * {"POOL": hours}, a fraction printed as %g) as "h200:2,video:0" (heap): "POOL:N" joined with sep, in the object's order; a copy of none when lim is not an object or is
 * empty. rungd's log, rungctl's cells and the tokens page write it so. */
char *pool_limits_text(const json_t *lim, const char *sep, const char *none);

#endif
