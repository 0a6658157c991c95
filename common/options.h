/* A table-driven option loader shared by rungd and rung-worker: each option is a long flag, an
 * environment variable (given, or RUNG_ + the name upper-cased, dashes as underscores) and a
 * `key = value` line of an optional file (the option marked OPTIONS_CONFIG). Precedence: flag >
 * env > file > default. It stores and validates text; the caller's table and getters give meaning. */
#ifndef RUNG_OPTIONS_H
#define RUNG_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum options_kind {
	OPTIONS_STR,  /* any text; an empty value means unset (NULL) */
	OPTIONS_INT,  /* a decimal integer within [min, max] */
	OPTIONS_BOOL  /* 1/true/yes/on or 0/false/no/off; a bare flag means true */
};

enum options_flag {
	OPTIONS_NO_FILE = 1, /* not accepted in the config file */
	OPTIONS_CONFIG = 2   /* names the config file (implies OPTIONS_NO_FILE); at most one per table */
};

/* One option. Its value lives at the same index of struct options' values. */
struct options_desc {
	const char *name;       /* long flag without dashes, and the file key */
	enum options_kind kind;
	const char *arg;        /* metavariable in --help, or NULL (booleans) */
	const char *def;        /* default as text, or NULL (unset) */
	const char *help;       /* one line */
	const char *env;        /* environment variable, or NULL: RUNG_ + upper-cased name */
	long min, max;          /* OPTIONS_INT range */
	unsigned flags;         /* enum options_flag bits */
	const char *def_help;   /* shown as the default in --help instead of def, or NULL */
};

enum options_result {
	OPTIONS_OK,    /* every value is set and valid */
	OPTIONS_HELP,  /* -h/--help was given; nothing printed, the caller prints its usage; exit 0 */
	OPTIONS_VERSION, /* --version was given; nothing printed, the caller prints "PROGRAM VERSION"; exit 0 */
	OPTIONS_ERROR  /* *err says why (heap, caller frees); exit 2 */
};

struct options {
	const struct options_desc *table; /* borrowed; outlives the struct */
	size_t n;
	char **values;  /* values[i]: table[i]'s text, or NULL when unset; owned */
	char **sources; /* where values[i] came from: "default", "--name", "RUNG_X", "FILE:LINE"; owned */
};

/* Prepares *o for TABLE (N entries, borrowed) with every value unset. Release with options_release. */
void options_init(struct options *o, const struct options_desc *table, size_t n);
/* Frees the values and zeroes *o; accepts a zeroed struct. */
void options_release(struct options *o);

/* Fills *o (after options_init) from the defaults, the config file (the OPTIONS_CONFIG option's
 * flag or variable), the environment and argv[1..argc-1], in rising precedence, validating each
 * value as it is applied. Only `--name VALUE`, `--name=VALUE` and bare `--bool` are accepted.
 * --help and --version end the scan where they stand (an unknown flag before them is still an
 * error); nothing after them, nor the file or the environment, is read or validated.
 * argv is not modified; values are copied. On OPTIONS_ERROR *err (heap) names the flag, variable
 * or FILE:LINE at fault and *o may be partly filled. */
enum options_result options_load(struct options *o, int argc, char **argv, char **err);

/* Value i as text: borrowed from *o, NULL when unset. */
const char *options_str(const struct options *o, size_t i);
/* Value i of an OPTIONS_INT (validated by options_load); 0 when unset. */
long options_int(const struct options *o, size_t i);
/* Value i of an OPTIONS_BOOL; false when unset. */
bool options_bool(const struct options *o, size_t i);
/* Where value i came from (borrowed), or NULL when unset. */
const char *options_source(const struct options *o, size_t i);

/* Writes d's environment variable name into buf (always terminated). */
void options_env_name(const struct options_desc *d, char *buf, size_t n);
/* Prints one entry per option (flag and metavariable, help, variable and default), --version and
 * --help lines and the precedence; the caller prints its own usage line first. */
void options_usage(FILE *f, const struct options_desc *table, size_t n);

#endif
