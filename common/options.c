/* The generic option loader (options.h): defaults, the `key = value` file, environment variables
 * and long flags, applied in that order so the later source wins, each value validated as it is
 * applied so an error names its flag, variable or FILE:LINE. Owns the value strings of a struct
 * options; knows nothing of any binary's options. */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "util.h"

#define OPTIONS_LINE_MAX 4096
#define OPTIONS_ENV_MAX 128

void options_env_name(const struct options_desc *d, char *buf, size_t n)
{
	size_t i;

	if (n == 0)
		return;
	if (d->env) {
		snprintf(buf, n, "%s", d->env);
		return;
	}
	i = (size_t)snprintf(buf, n, "RUNG_");
	if (i >= n)
		i = n - 1;
	for (const char *p = d->name; *p && i + 1 < n; p++)
		buf[i++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
	buf[i] = '\0';
}

void options_init(struct options *o, const struct options_desc *table, size_t n)
{
	o->table = table;
	o->n = n;
	o->values = xcalloc(n ? n : 1, sizeof *o->values);
	o->sources = xcalloc(n ? n : 1, sizeof *o->sources);
}

void options_release(struct options *o)
{
	for (size_t i = 0; o->values && i < o->n; i++) {
		free(o->values[i]);
		free(o->sources[i]);
	}
	free(o->values);
	free(o->sources);
	memset(o, 0, sizeof *o);
}

static ssize_t opt_find(const struct options *o, const char *name, size_t len)
{
	for (size_t i = 0; i < o->n; i++)
		if (strlen(o->table[i].name) == len && strncmp(o->table[i].name, name, len) == 0)
			return (ssize_t)i;
	return -1;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "true", "yes", "on" };
	static const char *const no[] = { "0", "false", "no", "off" };

	for (size_t i = 0; i < ARRAY_LEN(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

static int parse_int(const char *s, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return !*s || *end || errno ? -1 : 0;
}

/* Validates v for option i and stores it (a copy); `where` names the source. */
static int opt_set(struct options *o, size_t i, const char *v, const char *where, char **err)
{
	const struct options_desc *d = &o->table[i];
	long n;
	bool b;

	switch (d->kind) {
	case OPTIONS_STR:
		break;
	case OPTIONS_INT:
		if (parse_int(v, &n) < 0 || n < d->min || n > d->max) {
			*err = xasprintf("%s: %s must be an integer from %ld to %ld (got \"%s\")", where, d->name,
					 d->min, d->max, v);
			return -1;
		}
		break;
	case OPTIONS_BOOL:
		if (parse_bool(v, &b) < 0) {
			*err = xasprintf("%s: %s must be true or false (got \"%s\")", where, d->name, v);
			return -1;
		}
		break;
	default:
		abort();
	}
	free(o->values[i]);
	free(o->sources[i]);
	o->values[i] = *v ? xstrdup(v) : NULL;
	o->sources[i] = *v ? xstrdup(where) : NULL;
	return 0;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Reads `key = value` lines; '#' starts a comment line; a value may be "double-quoted". */
static int read_file(struct options *o, const char *path, char **err)
{
	FILE *f = fopen(path, "r");
	char line[OPTIONS_LINE_MAX];
	int lineno = 0, rc = -1;

	if (!f) {
		*err = xasprintf("%s: cannot read: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		char *s, *eq, *key, *val, *where;
		size_t vl;
		ssize_t i;
		int set;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			*err = xasprintf("%s:%d: line longer than %d bytes", path, lineno, OPTIONS_LINE_MAX - 2);
			goto out;
		}
		s = trim(line);
		if (*s == '\0' || *s == '#')
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			*err = xasprintf("%s:%d: expected `key = value`, got \"%s\"", path, lineno, s);
			goto out;
		}
		*eq = '\0';
		key = trim(s);
		val = trim(eq + 1);
		vl = strlen(val);
		if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') {
			val[vl - 1] = '\0';
			val++;
		}
		i = opt_find(o, key, strlen(key));
		if (i < 0) {
			*err = xasprintf("%s:%d: unknown key \"%s\"", path, lineno, key);
			goto out;
		}
		if (o->table[i].flags & (OPTIONS_NO_FILE | OPTIONS_CONFIG)) {
			*err = xasprintf("%s:%d: %s cannot be set in a config file", path, lineno, key);
			goto out;
		}
		where = xasprintf("%s:%d", path, lineno);
		set = opt_set(o, (size_t)i, val, where, err);
		free(where);
		if (set < 0)
			goto out;
	}
	if (ferror(f)) {
		*err = xasprintf("%s: read error", path);
		goto out;
	}
	rc = 0;
out:
	fclose(f);
	return rc;
}

/* One parsed command-line option. */
struct flag {
	size_t i;          /* index in the table */
	const char *value; /* borrowed from argv; NULL for a bare boolean */
};

/* Splits argv into known flags; *flags is heap (caller frees). */
static enum options_result scan_argv(const struct options *o, int argc, char **argv, struct flag **flags,
				     int *nflags, char **err)
{
	*flags = xcalloc((size_t)(argc > 0 ? argc : 1), sizeof **flags);
	*nflags = 0;
	for (int k = 1; k < argc; k++) {
		const char *a = argv[k], *name, *eq;
		struct flag *fl = &(*flags)[*nflags];
		ssize_t i;

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
			return OPTIONS_HELP;
		if (strcmp(a, "--version") == 0)
			return OPTIONS_VERSION;
		if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
			*err = xasprintf("unexpected argument \"%s\" (see --help)", a);
			return OPTIONS_ERROR;
		}
		name = a + 2;
		eq = strchr(name, '=');
		i = opt_find(o, name, eq ? (size_t)(eq - name) : strlen(name));
		if (i < 0) {
			*err = xasprintf("unknown option \"%s\" (see --help)", a);
			return OPTIONS_ERROR;
		}
		fl->i = (size_t)i;
		if (eq) {
			fl->value = eq + 1;
		} else if (o->table[i].kind != OPTIONS_BOOL) {
			if (k + 1 >= argc) {
				*err = xasprintf("--%s needs a value", o->table[i].name);
				return OPTIONS_ERROR;
			}
			fl->value = argv[++k];
		}
		(*nflags)++;
	}
	return OPTIONS_OK;
}

enum options_result options_load(struct options *o, int argc, char **argv, char **err)
{
	struct flag *flags = NULL;
	int nflags = 0;
	enum options_result rc;
	const char *file = NULL, *v;
	char env[OPTIONS_ENV_MAX], where[OPTIONS_ENV_MAX];
	ssize_t cfg = -1;

	*err = NULL;
	for (size_t i = 0; i < o->n; i++) {
		if (o->table[i].flags & OPTIONS_CONFIG)
			cfg = (ssize_t)i;
		if (o->table[i].def && opt_set(o, i, o->table[i].def, "default", err) < 0)
			abort(); /* a bad default is a programming error */
	}
	rc = scan_argv(o, argc, argv, &flags, &nflags, err);
	if (rc != OPTIONS_OK)
		goto out;
	rc = OPTIONS_ERROR;
	if (cfg >= 0) {
		for (int k = 0; k < nflags; k++)
			if (flags[k].i == (size_t)cfg && flags[k].value && *flags[k].value) {
				file = flags[k].value;
				snprintf(where, sizeof where, "--%s", o->table[cfg].name);
			}
		options_env_name(&o->table[cfg], env, sizeof env);
		if (!file && (v = getenv(env)) && *v) {
			file = v;
			snprintf(where, sizeof where, "%s", env);
		}
		if (file) {
			char *path = xstrdup(file); /* getenv's string may not outlive a setenv */
			int r = read_file(o, path, err);
			if (r == 0)
				r = opt_set(o, (size_t)cfg, path, where, err);
			free(path);
			if (r < 0)
				goto out;
		}
	}
	for (size_t i = 0; i < o->n; i++) {
		if (o->table[i].flags & OPTIONS_CONFIG)
			continue;
		options_env_name(&o->table[i], env, sizeof env);
		v = getenv(env);
		if (!v || !*v)
			continue;
		if (opt_set(o, i, v, env, err) < 0)
			goto out;
	}
	for (int k = 0; k < nflags; k++) {
		if ((ssize_t)flags[k].i == cfg)
			continue; /* already applied */
		snprintf(where, sizeof where, "--%s", o->table[flags[k].i].name);
		if (opt_set(o, flags[k].i, flags[k].value ? flags[k].value : "true", where, err) < 0)
			goto out;
	}
	rc = OPTIONS_OK;
out:
	free(flags);
	return rc;
}

const char *options_str(const struct options *o, size_t i)
{
	return i < o->n ? o->values[i] : NULL;
}

long options_int(const struct options *o, size_t i)
{
	long n = 0;

	if (i < o->n && o->values[i] && parse_int(o->values[i], &n) < 0)
		n = 0;
	return n;
}

bool options_bool(const struct options *o, size_t i)
{
	bool b = false;

	if (i < o->n && o->values[i] && parse_bool(o->values[i], &b) < 0)
		b = false;
	return b;
}

const char *options_source(const struct options *o, size_t i)
{
	return i < o->n ? o->sources[i] : NULL;
}

void options_usage(FILE *f, const struct options_desc *table, size_t n)
{
	char env[OPTIONS_ENV_MAX], flag[64];

	for (size_t i = 0; i < n; i++) {
		const struct options_desc *d = &table[i];
		const char *def = d->def_help ? d->def_help : d->def ? d->def : "none";

		options_env_name(d, env, sizeof env);
		snprintf(flag, sizeof flag, "--%s%s%s", d->name, d->arg ? " " : "", d->arg ? d->arg : "");
		fprintf(f, "  %-29s %s\n  %-29s (%s; default %s)\n", flag, d->help, "", env, def);
	}
	fprintf(f, "  %-29s print the program's version and exit\n"
		   "  %-29s this text\n"
		   "Precedence: flag > environment > config file > default.\n", "--version", "--help");
}
