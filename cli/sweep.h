/* Config variants from the command line: `--set PATH=VALUE` changes one value of an AI Toolkit config,
 * `--sweep PATH=V1,V2,...` makes one variant per value (several sweeps: every combination; sweeps tied
 * by `--link` vary together). What
 * `rungctl submit` and `rungctl plan` apply before they send a config. Pure code: no I/O. */
#ifndef RUNG_SWEEP_H
#define RUNG_SWEEP_H

#include <stddef.h>
#include <jansson.h>

#define SWEEP_MAX_VARIANTS 256   /* more is almost surely a typo in a --sweep; refused */

struct sweep;

/* An empty set of changes (one variant: the config as it is). Never NULL. */
struct sweep *sweep_new(void);
void sweep_free(struct sweep *s);

/* The config path PATH names: as written when it starts with `job`, `config` or `meta` (the top of an
 * AI Toolkit file), else under the first process, `config.process[0].` + PATH, so `train.lr` means
 * config.process[0].train.lr. Heap string the caller frees. */
char *sweep_path(const char *path);

/* Adds `--set PATH=VALUE`: VALUE is read as a YAML value, as it would be written in the file (`1e-4`
 * a number, `true` a boolean, `[512, 768]` a list, `"32"` a string). Returns 0, or -1 with *err (heap
 * string, naming the option and the problem: no `=`, a malformed path, a bad value, a path given
 * twice). */
int sweep_add_set(struct sweep *s, const char *spec, char **err);

/* Adds `--sweep PATH=V1,V2,...`: the values are split at commas outside brackets and quotes
 * (`[512,768],[1024]` is two lists) and each read as --set reads one. Errors as sweep_add_set, and a
 * value repeated or empty, or one sweep making past SWEEP_MAX_VARIANTS variants with the others. */
int sweep_add_axis(struct sweep *s, const char *spec, char **err);

/* Adds `--link PATH,PATH,...`, before any --set or --sweep is added: the sweeps of those paths vary
 * together, value by value (their first values in one variant, their second in the next...), so
 * they count as one sweep: `--sweep network.linear=8,16,32 --sweep network.linear_alpha=8,16,32
 * --link network.linear,network.linear_alpha` makes 3 variants, not 9. A linked sweep must have as
 * many values as the first of its link (sweep_add_axis refuses it otherwise). Returns 0, or -1 with
 * *err (heap): fewer than two paths, a malformed path, a path linked twice. */
int sweep_add_link(struct sweep *s, const char *spec, char **err);
/* After every sweep was added: 0, or -1 with *err (heap) when a --link names a path that no --sweep
 * gave. */
int sweep_check_links(const struct sweep *s, char **err);

/* How many variants: the product of the sweeps' value counts (a linked sweep's not counted again),
 * 1 without a sweep. */
size_t sweep_count(const struct sweep *s);

/* Whether a --sweep was given (then every variant is named by its suffix, even a single one). */
int sweep_has_axis(const struct sweep *s);

/* The value of the `sweep` label that ties a sweep's jobs together: made from the Idempotency-Key
 * when one is given (so that the same command sent again makes the same jobs: each character
 * outside A-Z a-z 0-9 _ . - becomes '-', at most 63, a leading 'k' when it would not start with a
 * letter or digit), else `YYYYMMDD-HHMMSS-xxxx` from now (UTC) and 16 bits of rnd. Heap string. */
char *sweep_label(const char *idem_key, long long now, unsigned rnd);

/* Variant i (0 .. sweep_count-1): a new copy of base with every --set and then variant i's sweep
 * values applied, the last sweep varying fastest. With a sweep, *suffix is set to a heap string
 * naming the variant's values (`lr2e-4_linear32`: each path's last key and its value as typed, a run
 * of characters other than A-Z a-z 0-9 . - made one `-`), unique among the variants, and the
 * config's `config.name` (AI Toolkit's output folder: variants must not write over each other's
 * checkpoints) gets `_` + suffix, unless a sweep sets config.name itself; without a sweep, *suffix
 * is NULL. *added (optional) is set to a heap string listing the paths the config did not
 * have (", "-separated; NULL when none), for a warning. Returns NULL with *err (heap string) when a
 * path cannot be set in base (it crosses a value that is not a mapping or list, or an index past a
 * list's end). */
json_t *sweep_apply(const struct sweep *s, const json_t *base, size_t i, char **suffix, char **added,
	char **err);

/* The text `PATH=VALUE, PATH=VALUE` of variant i's sweep values (as typed; empty string without a
 * sweep), for `--dry-run` and messages. Heap string the caller frees. */
char *sweep_describe(const struct sweep *s, size_t i);

#endif
