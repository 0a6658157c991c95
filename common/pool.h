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

/* The pool names of a JSON array (a token's pools, migration 027) joined with sep: "a, b" (heap);
 * a copy of none when names is not an array or is empty. Elements that are not strings read "?". */
char *pool_list_join(const json_t *names, const char *sep, const char *none);

#endif
