/* rungd's options as one table (config.h): defaults, the `key = value` file, RUNG_* environment
 * variables and long flags, applied in that order so the later source wins. Validation (ranges,
 * booleans, unknown keys) reports the flag, variable or FILE:LINE. Owns the strings in
 * struct config; nothing else. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

#define CONFIG_LINE_MAX 4096

enum opt_kind { OPT_STR, OPT_INT, OPT_BOOL };

struct opt {
	const char *name;  /* long flag without dashes, and the file key */
	enum opt_kind kind;
	size_t off;        /* field in struct config */
	const char *def;   /* default as text, or NULL */
	int min, max;      /* OPT_INT range */
	const char *arg;   /* metavariable in --help */
	const char *help;
	bool no_file;      /* not accepted in the config file */
};

#define F(field) offsetof(struct config, field)

static const struct opt opts[] = {
	{ "listen", OPT_STR, F(listen), "127.0.0.1:8080", 0, 0, "HOST:PORT", "address to serve HTTP on", false },
	{ "database-url", OPT_STR, F(database_url), "postgresql://postgres@127.0.0.1:5432/rung", 0, 0, "URL",
	  "PostgreSQL URL", false },
	{ "config", OPT_STR, F(config_file), NULL, 0, 0, "FILE", "read `key = value` lines (keys: the long flags)", true },
	{ "no-migrate", OPT_BOOL, F(no_migrate), "false", 0, 0, NULL, "do not apply migrations at start-up", false },
	{ "lease-seconds", OPT_INT, F(lease_seconds), "30", 1, 86400, "N", "attempt lease length", false },
	{ "heartbeat-ms", OPT_INT, F(heartbeat_ms), "5000", 10, 3600000, "N", "heartbeat interval told to workers", false },
	{ "reap-interval-ms", OPT_INT, F(reap_interval_ms), "1000", 10, 3600000, "N",
	  "how often expired leases are reaped", false },
	{ "poll-fallback-ms", OPT_INT, F(poll_fallback_ms), "2000", 10, 3600000, "N",
	  "how often parked long-polls retry without a wake-up", false },
	{ "quarantine-min-s", OPT_INT, F(quarantine_min_s), "600", 0, 604800, "N",
	  "a quarantined GPU gets leases again after a passing health check only this long after quarantine", false },
	{ "db-pool", OPT_INT, F(db_pool), "4", 1, 256, "N", "database connections", false },
	{ "submit-rate", OPT_INT, F(submit_rate), "200", 1, 1000000, "N",
	  "job submits per second per token (burst twice that; over it: 429)", false },
	{ "escalation-webhook", OPT_STR, F(escalation_webhook), NULL, 0, 0, "URL",
	  "POST each new escalation here as JSON (none by default)", false },
	{ "webhook-poll-ms", OPT_INT, F(webhook_poll_ms), "1000", 10, 3600000, "N",
	  "how often undelivered escalations are looked for", false },
	{ "webhook-backoff-ms", OPT_INT, F(webhook_backoff_ms), "1000", 1, 3600000, "N",
	  "first retry delay of a failed delivery, doubled per attempt", false },
	{ "webhook-backoff-max-ms", OPT_INT, F(webhook_backoff_max_ms), "300000", 1, 86400000, "N",
	  "retry delay ceiling", false },
	{ "webhook-timeout-ms", OPT_INT, F(webhook_timeout_ms), "10000", 100, 600000, "N",
	  "time limit of one delivery", false },
};

/* "RUNG_" + name upper-cased with '-' as '_'. */
static void opt_env_name(const struct opt *o, char *buf, size_t n)
{
	size_t i = (size_t)snprintf(buf, n, "RUNG_");

	for (const char *p = o->name; *p && i + 1 < n; p++)
		buf[i++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
	buf[i] = '\0';
}

static const struct opt *opt_find(const char *name, size_t len)
{
	for (size_t i = 0; i < ARRAY_LEN(opts); i++)
		if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
			return &opts[i];
	return NULL;
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

/* Sets option o from text `v`; `where` names the source for the error message. */
static int opt_set(struct config *c, const struct opt *o, const char *v, const char *where, char **err)
{
	void *field = (char *)c + o->off;

	switch (o->kind) {
	case OPT_STR: {
		char **s = field;
		free(*s);
		*s = v && *v ? xstrdup(v) : NULL;
		return 0;
	}
	case OPT_INT: {
		char *end;
		long n;
		errno = 0;
		n = strtol(v, &end, 10);
		if (!*v || *end || errno || n < o->min || n > o->max) {
			*err = xasprintf("%s: %s must be an integer from %d to %d (got \"%s\")", where, o->name,
					 o->min, o->max, v);
			return -1;
		}
		*(int *)field = (int)n;
		return 0;
	}
	case OPT_BOOL:
		if (parse_bool(v, field) < 0) {
			*err = xasprintf("%s: %s must be true or false (got \"%s\")", where, o->name, v);
			return -1;
		}
		return 0;
	default:
		abort();
	}
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
static int config_read_file(struct config *c, const char *path, char **err)
{
	FILE *f = fopen(path, "r");
	char line[CONFIG_LINE_MAX];
	int lineno = 0, rc = -1;

	if (!f) {
		*err = xasprintf("%s: cannot read: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof line, f)) {
		char *s, *eq, *key, *val, where[512];
		size_t vl;
		const struct opt *o;

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			*err = xasprintf("%s:%d: line longer than %d bytes", path, lineno, CONFIG_LINE_MAX - 2);
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
		o = opt_find(key, strlen(key));
		if (!o) {
			*err = xasprintf("%s:%d: unknown key \"%s\"", path, lineno, key);
			goto out;
		}
		if (o->no_file) {
			*err = xasprintf("%s:%d: %s cannot be set in a config file", path, lineno, key);
			goto out;
		}
		snprintf(where, sizeof where, "%s:%d", path, lineno);
		if (opt_set(c, o, val, where, err) < 0)
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
	const struct opt *o;
	const char *value; /* borrowed from argv; NULL for a bare boolean */
	const char *text;  /* the argument as given, for messages */
};

/* Splits argv into known flags; the first argument may be `migrate`. Returns CONFIG_OK, HELP or
 * ERROR. *flags is heap (caller frees). */
static enum config_result config_scan_argv(struct config *c, int argc, char **argv, struct flag **flags,
					   int *nflags, char **err)
{
	int i = 1;

	*flags = xcalloc((size_t)(argc > 0 ? argc : 1), sizeof **flags);
	*nflags = 0;
	if (argc > 1 && strcmp(argv[1], "migrate") == 0) {
		c->migrate_only = true;
		i = 2;
	}
	for (; i < argc; i++) {
		const char *a = argv[i], *name, *eq;
		const struct opt *o;
		struct flag *fl = &(*flags)[*nflags];

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			config_usage(stdout);
			return CONFIG_HELP;
		}
		if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
			*err = xasprintf("unexpected argument \"%s\" (see --help)", a);
			return CONFIG_ERROR;
		}
		name = a + 2;
		eq = strchr(name, '=');
		o = opt_find(name, eq ? (size_t)(eq - name) : strlen(name));
		if (!o) {
			*err = xasprintf("unknown option \"%s\" (see --help)", a);
			return CONFIG_ERROR;
		}
		fl->o = o;
		fl->text = a;
		if (eq) {
			fl->value = eq + 1;
		} else if (o->kind != OPT_BOOL) {
			if (i + 1 >= argc) {
				*err = xasprintf("--%s needs a value", o->name);
				return CONFIG_ERROR;
			}
			fl->value = argv[++i];
		}
		(*nflags)++;
	}
	return CONFIG_OK;
}

enum config_result config_load(struct config *c, int argc, char **argv, char **err)
{
	struct flag *flags = NULL;
	int nflags = 0;
	enum config_result rc;
	const char *file = NULL;
	char where[128];

	*err = NULL;
	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < ARRAY_LEN(opts); i++)
		if (opts[i].def && opt_set(c, &opts[i], opts[i].def, "default", err) < 0)
			abort(); /* a bad default is a programming error */
	rc = config_scan_argv(c, argc, argv, &flags, &nflags, err);
	if (rc != CONFIG_OK)
		goto out;
	rc = CONFIG_ERROR;
	for (int i = 0; i < nflags; i++)
		if (flags[i].o->off == offsetof(struct config, config_file))
			file = flags[i].value;
	if (!file && getenv("RUNG_CONFIG") && *getenv("RUNG_CONFIG"))
		file = getenv("RUNG_CONFIG");
	if (file) {
		if (config_read_file(c, file, err) < 0)
			goto out;
		free(c->config_file);
		c->config_file = xstrdup(file);
	}
	for (size_t i = 0; i < ARRAY_LEN(opts); i++) {
		const char *v;
		opt_env_name(&opts[i], where, sizeof where);
		v = getenv(where);
		if (opts[i].no_file || !v || !*v)
			continue;
		if (opt_set(c, &opts[i], v, where, err) < 0)
			goto out;
	}
	for (int i = 0; i < nflags; i++) {
		snprintf(where, sizeof where, "--%s", flags[i].o->name);
		if (flags[i].o->kind == OPT_BOOL && !flags[i].value) {
			*(bool *)((char *)c + flags[i].o->off) = true;
			continue;
		}
		if (opt_set(c, flags[i].o, flags[i].value, where, err) < 0)
			goto out;
	}
	rc = CONFIG_OK;
out:
	free(flags);
	return rc;
}

void config_release(struct config *c)
{
	for (size_t i = 0; i < ARRAY_LEN(opts); i++) {
		if (opts[i].kind == OPT_STR) {
			char **s = (char **)((char *)c + opts[i].off);
			free(*s);
		}
	}
	memset(c, 0, sizeof *c);
}

void config_usage(FILE *f)
{
	char env[128], flag[64];

	fprintf(f, "usage: rungd [migrate] [options]\n"
		   "       rungd token create --role submitter|worker|support|admin [--name N] [--database-url URL]\n"
		   "       rungd token revoke NAME|ID [--database-url URL]\n"
		   "  migrate                       apply the schema migrations and exit\n"
		   "  token create / revoke         manage API tokens straight in the database (bootstrap an admin)\n");
	for (size_t i = 0; i < ARRAY_LEN(opts); i++) {
		const struct opt *o = &opts[i];
		opt_env_name(o, env, sizeof env);
		snprintf(flag, sizeof flag, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "  %-29s %s\n  %-29s (%s; default %s)\n", flag, o->help, "", env,
			o->def ? o->def : "none");
	}
	fprintf(f, "  %-29s this text\n"
		   "Precedence: flag > environment > config file > default.\n", "--help");
}
