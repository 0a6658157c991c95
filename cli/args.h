/* Command-line options for rungctl's subcommands: a small parser over a table of long options
 * (--name VALUE, --name=VALUE, flags, integers with ranges; options and operands in any order,
 * `--` ends options). Owns no global state, so tests can call it repeatedly. */
#ifndef RUNG_ARGS_H
#define RUNG_ARGS_H

#include <stddef.h>

enum args_type {
	ARGS_FLAG,      /* --x: *flag = 1 */
	ARGS_STRING,    /* --x V: *str = V (borrowed from argv) */
	ARGS_INT,       /* --x N: *num = N, checked against [min, max] */
	ARGS_LIST,      /* --x V, repeatable: list[(*count)++] = V (borrowed), at most max of them */
};

struct args_opt {
	const char *name;       /* without the dashes, e.g. "priority" */
	enum args_type type;
	int *flag;              /* ARGS_FLAG target */
	const char **str;       /* ARGS_STRING target */
	long long *num;         /* ARGS_INT target */
	long long min, max;     /* ARGS_INT range; ARGS_LIST: max is list's capacity */
	const char **list;      /* ARGS_LIST target */
	size_t *count;          /* ARGS_LIST: values stored so far (the caller sets it to 0) */
	int *seen;              /* optional: set to 1 when the option was given */
};

/* Parses argv[0..argc) (argv[0] is the first argument, not the command name) against opts. Operands
 * (non-options) are stored in order into operands[0..max_operands) (borrowed) and counted in
 * *n_operands; an argument of '-' and a digit ("-5") is an operand, a negative number. `-h` means
 * `--help` when an option named "help" exists. Returns 0, or -1 with *err set to a heap string
 * (unknown option, missing or bad value, too many operands); the caller frees it. */
int args_parse(const struct args_opt *opts, size_t n_opts, int argc, char **argv,
	char **operands, size_t max_operands, size_t *n_operands, char **err);

#endif
