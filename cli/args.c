/* rungctl option parsing (see args.h). Deliberately not getopt: no global state, options may follow
 * operands (`rungctl show 12 --json`), and integer values are validated here with one message. */
#include "args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const struct args_opt *find_opt(const struct args_opt *opts, size_t n, const char *name, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len))
			return &opts[i];
	return NULL;
}

static int set_value(const struct args_opt *o, const char *val, char **err)
{
	if (o->type == ARGS_STRING) {
		*o->str = val;
		return 0;
	}
	if (o->type == ARGS_LIST) {
		if ((long long)*o->count >= o->max) {
			*err = xasprintf("--%s is given more than %lld times", o->name, o->max);
			return -1;
		}
		o->list[(*o->count)++] = val;
		return 0;
	}
	char *end = NULL;
	errno = 0;
	long long n = strtoll(val, &end, 10);
	if (!*val || *end || errno == ERANGE) {
		*err = xasprintf("--%s wants an integer, not '%s'", o->name, val);
		return -1;
	}
	if (n < o->min || n > o->max) {
		*err = xasprintf("--%s must be between %lld and %lld, not %lld", o->name, o->min, o->max, n);
		return -1;
	}
	*o->num = n;
	return 0;
}

int args_parse(const struct args_opt *opts, size_t n_opts, int argc, char **argv,
	char **operands, size_t max_operands, size_t *n_operands, char **err)
{
	int only_operands = 0;
	*n_operands = 0;
	*err = NULL;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		/* "-5" is a negative number (a priority), not an option */
		if (only_operands || a[0] != '-' || !strcmp(a, "-") || (a[1] >= '0' && a[1] <= '9')) {
			if (*n_operands == max_operands) {
				*err = xasprintf("unexpected argument '%s'", a);
				return -1;
			}
			operands[(*n_operands)++] = argv[i];
			continue;
		}
		if (!strcmp(a, "--")) {
			only_operands = 1;
			continue;
		}
		const char *name = a + 1 + (a[1] == '-');
		if (!strcmp(a, "-h"))
			name = "help";
		else if (a[1] != '-') {
			*err = xasprintf("unknown option '%s' (options are spelled --name)", a);
			return -1;
		}
		const char *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		const struct args_opt *o = find_opt(opts, n_opts, name, len);
		if (!o) {
			*err = xasprintf("unknown option '--%.*s'", (int)len, name);
			return -1;
		}
		if (o->seen)
			*o->seen = 1;
		if (o->type == ARGS_FLAG) {
			if (eq) {
				*err = xasprintf("--%s takes no value", o->name);
				return -1;
			}
			*o->flag = 1;
			continue;
		}
		const char *val = eq ? eq + 1 : NULL;
		if (!val) {
			if (i + 1 >= argc) {
				*err = xasprintf("--%s needs a value", o->name);
				return -1;
			}
			val = argv[++i];
		}
		if (set_value(o, val, err) < 0)
			return -1;
	}
	return 0;
}
