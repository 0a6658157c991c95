/* Differences between two JSON documents as a list of changed paths, for `rungctl show` (target vs
 * current config) and `rungctl watch` (config changes between attempts). Paths are written the way
 * DECISION.changes writes them: `config.process[0].train.batch_size`. Pure code. */
#ifndef RUNG_JSONDIFF_H
#define RUNG_JSONDIFF_H

#include <jansson.h>

/* Returns a new array of {"path", "old", "new"} for every leaf that differs between a and b (either
 * may be NULL, meaning absent; an absent side reads as null in the entry). Objects are compared key by
 * key (a's order first, then keys only in b), arrays index by index, except that a list of plain
 * values whose length changed is one entry (a dropped bucket reads [512,768,1024] -> [512,768]); a
 * value whose type changes is one entry. Numbers compare by value (1 equals 1.0). The caller owns the result. */
json_t *jsondiff_paths(const json_t *a, const json_t *b);

/* One line per change: "PATH: OLD -> NEW" with compact JSON values; heap string the caller frees
 * ("" when diff is empty). */
char *jsondiff_format(const json_t *diff);

#endif
