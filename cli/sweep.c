/* Config variants from `--set PATH=VALUE` and `--sweep PATH=V1,V2,...` (see sweep.h): parsing the
 * options, the paths they name, every combination of the sweeps' values, and the name that tells
 * the variants apart. Pure code over jansson values. */
#include "sweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jpath.h"
#include "util.h"
#include "yamljson.h"

/* One option: a --set is a change with one value, a --sweep one with several. */
struct change {
	char *user_path;   /* as typed, for messages */
	char *path;        /* sweep_path's */
	int is_sweep;
	size_t n;          /* values */
	char **text;       /* each value as typed */
	char **tag;        /* a sweep's: each value's part of a variant's suffix */
	json_t **val;      /* each value, read as YAML */
	long follows;      /* a linked sweep's: the change whose value index it takes (--link); else -1 */
};

struct sweep {
	struct change *ch;
	size_t n;
	char **link_path;  /* --link's paths (sweep_path's), each with its group: link_group[i] */
	int *link_group;
	size_t n_links;
	int groups;
};

struct sweep *sweep_new(void)
{
	return xcalloc(1, sizeof(struct sweep));
}

static void change_clear(struct change *c)
{
	for (size_t j = 0; j < c->n; j++) {
		free(c->text[j]);
		if (c->tag)
			free(c->tag[j]);
		json_decref(c->val[j]);
	}
	free(c->text);
	free(c->tag);
	free(c->val);
	free(c->user_path);
	free(c->path);
}

void sweep_free(struct sweep *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		change_clear(&s->ch[i]);
	for (size_t i = 0; i < s->n_links; i++)
		free(s->link_path[i]);
	free(s->link_path);
	free(s->link_group);
	free(s->ch);
	free(s);
}

/* What may follow a segment of a path at *p: the end, a '[', or a '.' and another key (then *p
 * moves past the dot and *want_key is set). 0 for anything else. */
static int after_segment(const char **p, int *want_key)
{
	if (**p == '.') {
		(*p)++;
		*want_key = 1;
		return **p != '\0';
	}
	*want_key = 0;
	return **p == '\0' || **p == '[';
}

/* Whether path is keys of [A-Za-z0-9_-] and [N] indexes, joined by dots, starting with a key. */
static int path_ok(const char *p)
{
	int want_key = 1; /* at the start and after a dot: a key must follow */
	if (!*p)
		return 0;
	while (*p) {
		if (*p == '[') {
			if (want_key)
				return 0;
			p++;
			if (*p < '0' || *p > '9')
				return 0;
			while (*p >= '0' && *p <= '9')
				p++;
			if (*p++ != ']')
				return 0;
		} else {
			size_t n = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-");
			if (n == 0)
				return 0;
			p += n;
		}
		if (!after_segment(&p, &want_key))
			return 0;
	}
	return 1;
}

char *sweep_path(const char *path)
{
	size_t first = strcspn(path, ".[");
	static const char *const top[] = { "job", "config", "meta" };
	for (size_t i = 0; i < ARRAY_LEN(top); i++)
		if (strlen(top[i]) == first && !strncmp(path, top[i], first))
			return xstrdup(path);
	return xasprintf("config.process[0].%s", path);
}

/* The last key of path ("train.lr" -> "lr", "datasets[0].resolution" -> "resolution",
 * "a.b[2]" -> "b"). Heap string. */
static char *last_key(const char *path)
{
	const char *end = path + strlen(path);
	while (end > path && end[-1] == ']') {
		while (end > path && end[-1] != '[')
			end--;
		if (end > path)
			end--; /* past the '[' */
	}
	const char *start = end;
	while (start > path && start[-1] != '.')
		start--;
	return xasprintf("%.*s", (int)(end - start), start);
}

/* A value's part of a suffix: its text with each run of characters other than A-Z a-z 0-9 . -
 * made one '-', none at either end ("[512, 768]" -> "512-768"). Heap string, may be empty. */
static char *value_tag(const char *text)
{
	size_t n = strlen(text), k = 0;
	char *out = xmalloc(n + 1);
	int gap = 0;
	for (const char *p = text; *p; p++) {
		char ch = *p;
		int keep = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' ||
			   ch == '-';
		if (!keep) {
			gap = 1;
			continue;
		}
		if (gap && k > 0)
			out[k++] = '-';
		gap = 0;
		out[k++] = ch;
	}
	out[k] = '\0';
	return out;
}

/* Reads one value as YAML (an empty one is null). NULL with *err (heap) when it is not YAML. */
static json_t *read_value(const char *opt, const char *user_path, const char *text, char **err)
{
	char *why = NULL;
	if (!*text)
		return json_null();
	json_t *v = yamljson_parse(text, strlen(text), &why);
	if (!v) {
		*err = xasprintf("%s %s: '%s' is not a YAML value (%s)", opt, user_path, text, why ? why : "unreadable");
		free(why);
	}
	return v;
}

/* Splits a sweep's values at commas outside brackets, braces and quotes, each trimmed of blanks.
 * Returns the count (*items: heap array of heap strings), or 0 with *err on unbalanced brackets or
 * quotes. */
static size_t split_values(const char *opt, const char *user_path, const char *list, char ***items, char **err)
{
	size_t n = 0, cap = 8;
	char **out = xmalloc(cap * sizeof(char *));
	int depth = 0;
	char quote = 0;
	const char *start = list;
	for (const char *p = list;; p++) {
		if (quote) {
			if (*p == '\0')
				break;
			if (*p == '\\' && quote == '"' && p[1]) {
				p++;
				continue;
			}
			if (*p == quote)
				quote = 0;
			continue;
		}
		if (*p == '"' || *p == '\'') {
			quote = *p;
		} else if (*p == '[' || *p == '{') {
			depth++;
		} else if (*p == ']' || *p == '}') {
			if (--depth < 0)
				break;
		} else if ((*p == ',' && depth == 0) || *p == '\0') {
			const char *a = start, *b = p;
			while (a < b && (*a == ' ' || *a == '\t'))
				a++;
			while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
				b--;
			if (n == cap)
				out = xrealloc(out, (cap *= 2) * sizeof(char *));
			out[n++] = xasprintf("%.*s", (int)(b - a), a);
			if (*p == '\0')
				break;
			start = p + 1;
		}
	}
	if (quote || depth != 0) {
		*err = xasprintf("%s %s: unbalanced %s in '%s'", opt, user_path, quote ? "quotes" : "brackets", list);
		for (size_t j = 0; j < n; j++)
			free(out[j]);
		free(out);
		return 0;
	}
	*items = out;
	return n;
}

/* The --link group of PATH (sweep_path's), or -1 when no --link names it. */
static int link_group_of(const struct sweep *s, const char *path)
{
	for (size_t i = 0; i < s->n_links; i++)
		if (!strcmp(s->link_path[i], path))
			return s->link_group[i];
	return -1;
}

/* The sweep already added that a new sweep of PATH takes its value index from: the first one of
 * PATH's --link group; -1 when PATH is linked to none added yet (it leads its group). */
static long linked_leader(const struct sweep *s, const char *path)
{
	int g = link_group_of(s, path);

	for (size_t k = 0; g >= 0 && k < s->n; k++)
		if (s->ch[k].is_sweep && s->ch[k].follows < 0 && link_group_of(s, s->ch[k].path) == g)
			return (long)k;
	return -1;
}

int sweep_add_link(struct sweep *s, const char *spec, char **err)
{
	char **paths = NULL;
	size_t n = split_values("--link", "", spec ? spec : "", &paths, err), i, j;
	int rc = -1;

	if (n == 0 && !*err)
		*err = xasprintf("--link '%s': expected PATH,PATH,...", spec ? spec : "");
	if (n == 0)
		return -1;
	if (n < 2) {
		*err = xasprintf("--link %s: name two sweeps or more (PATH,PATH,...)", spec);
		goto out;
	}
	for (i = 0; i < n; i++) {
		char *p;
		if (!path_ok(paths[i])) {
			*err = xasprintf("--link %s: '%s' is not a config path", spec, paths[i]);
			goto out;
		}
		p = sweep_path(paths[i]);
		free(paths[i]);
		paths[i] = p;
		for (j = 0; j < i; j++)
			if (!strcmp(paths[j], p))
				break;
		if (j < i || link_group_of(s, p) >= 0) {
			*err = xasprintf("--link %s: %s is linked twice", spec, p);
			goto out;
		}
	}
	if (s->n > 0) {
		*err = xasprintf("--link %s: given after the sweeps (the links are read first)", spec);
		goto out;
	}
	s->link_path = xrealloc(s->link_path, (s->n_links + n) * sizeof(char *));
	s->link_group = xrealloc(s->link_group, (s->n_links + n) * sizeof(int));
	for (i = 0; i < n; i++) {
		s->link_path[s->n_links] = paths[i];
		s->link_group[s->n_links++] = s->groups;
		paths[i] = NULL;
	}
	s->groups++;
	rc = 0;
out:
	for (i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	return rc;
}

int sweep_check_links(const struct sweep *s, char **err)
{
	for (size_t i = 0; i < s->n_links; i++) {
		size_t k;
		for (k = 0; k < s->n; k++)
			if (s->ch[k].is_sweep && !strcmp(s->ch[k].path, s->link_path[i]))
				break;
		if (k == s->n) {
			*err = xasprintf("--link names %s, which no --sweep gives", s->link_path[i]);
			return -1;
		}
	}
	return 0;
}

/* Adds a change from spec PATH=VALUE(S); is_sweep splits the values. */
static int add_change(struct sweep *s, const char *spec, int is_sweep, char **err)
{
	const char *opt = is_sweep ? "--sweep" : "--set";
	const char *eq = strchr(spec, '=');
	struct change c = { .is_sweep = is_sweep, .follows = -1 };
	int rc = -1;

	if (!eq) {
		*err = xasprintf("%s '%s': expected PATH=%s", opt, spec, is_sweep ? "V1,V2,..." : "VALUE");
		return -1;
	}
	c.user_path = xasprintf("%.*s", (int)(eq - spec), spec);
	if (!path_ok(c.user_path)) {
		*err = xasprintf("%s '%s': '%s' is not a config path (keys of A-Z a-z 0-9 _ - joined by dots, "
				 "and [N] for a list's item: train.lr, datasets[0].resolution)", opt, spec, c.user_path);
		goto out;
	}
	c.path = sweep_path(c.user_path);
	for (size_t i = 0; i < s->n; i++) {
		if (!strcmp(s->ch[i].path, c.path)) {
			*err = xasprintf("%s %s: %s is already given (by %s %s)", opt, c.user_path, c.path,
					 s->ch[i].is_sweep ? "--sweep" : "--set", s->ch[i].user_path);
			goto out;
		}
	}
	if (is_sweep) {
		c.n = split_values(opt, c.user_path, eq + 1, &c.text, err);
		if (c.n == 0)
			goto out;
	} else {
		c.n = 1;
		c.text = xmalloc(sizeof(char *));
		c.text[0] = xstrdup(eq + 1);
	}
	c.val = xcalloc(c.n, sizeof(json_t *));
	for (size_t j = 0; j < c.n; j++) {
		if (is_sweep && !*c.text[j]) {
			*err = xasprintf("--sweep %s: value %zu is empty", c.user_path, j + 1);
			goto out;
		}
		if (!(c.val[j] = read_value(opt, c.user_path, c.text[j], err)))
			goto out;
		for (size_t k = 0; k < j; k++) {
			if (json_equal(c.val[k], c.val[j])) {
				*err = xasprintf("--sweep %s: '%s' is the same value as '%s'", c.user_path, c.text[j], c.text[k]);
				goto out;
			}
		}
	}
	if (is_sweep && (c.follows = linked_leader(s, c.path)) >= 0 && s->ch[c.follows].n != c.n) {
		*err = xasprintf("--sweep %s: %zu values, but --link ties it to --sweep %s, which has %zu", c.user_path, c.n,
				 s->ch[c.follows].user_path, s->ch[c.follows].n);
		goto out;
	}
	if (is_sweep) {
		size_t total = sweep_count(s);
		if (c.follows < 0 && total * c.n > SWEEP_MAX_VARIANTS) {
			*err = xasprintf("--sweep %s: %zu variants in all, more than %d", c.user_path, total * c.n,
					 SWEEP_MAX_VARIANTS);
			goto out;
		}
		/* each value's part of the suffix; values whose parts read the same get their position */
		char *key = last_key(c.path);
		int same = 0;
		c.tag = xcalloc(c.n, sizeof(char *));
		for (size_t j = 0; j < c.n; j++) {
			c.tag[j] = value_tag(c.text[j]);
			for (size_t k = 0; k < j; k++)
				same |= !strcmp(c.tag[k], c.tag[j]);
		}
		for (size_t j = 0; j < c.n; j++) {
			char *t = same ? xasprintf("%s%s-%zu", key, c.tag[j], j + 1) : xasprintf("%s%s", key, c.tag[j]);
			free(c.tag[j]);
			c.tag[j] = t;
		}
		free(key);
	}
	s->ch = xrealloc(s->ch, (s->n + 1) * sizeof(struct change));
	s->ch[s->n++] = c;
	memset(&c, 0, sizeof(c));
	rc = 0;
out:
	change_clear(&c);
	return rc;
}

int sweep_add_set(struct sweep *s, const char *spec, char **err)
{
	return add_change(s, spec, 0, err);
}

int sweep_add_axis(struct sweep *s, const char *spec, char **err)
{
	return add_change(s, spec, 1, err);
}

size_t sweep_count(const struct sweep *s)
{
	size_t total = 1;
	for (size_t i = 0; i < s->n; i++)
		if (s->ch[i].follows < 0)
			total *= s->ch[i].n;
	return total;
}

int sweep_has_axis(const struct sweep *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->ch[i].is_sweep)
			return 1;
	return 0;
}

char *sweep_label(const char *idem_key, long long now, unsigned rnd)
{
	if (idem_key && *idem_key) {
		char buf[64];
		size_t k = 0;
		const char *p = idem_key;
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			buf[k++] = 'k';
		for (; *p && k < sizeof(buf) - 1; p++) {
			char ch = *p;
			int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
				 ch == '_' || ch == '.' || ch == '-';
			buf[k++] = ok ? ch : '-';
		}
		buf[k] = '\0';
		return xstrdup(buf);
	}
	time_t t = (time_t)now;
	struct tm tm;
	char when[32];
	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y%m%d-%H%M%S", &tm);
	return xasprintf("%s-%04x", when, rnd & 0xffffu);
}

/* Which value of each change variant i takes: the last sweep varies fastest. pick[k] for change k. */
static void variant_picks(const struct sweep *s, size_t i, size_t *pick)
{
	for (size_t k = s->n; k-- > 0;) {
		if (s->ch[k].follows >= 0)
			continue;
		pick[k] = i % s->ch[k].n;
		i /= s->ch[k].n;
	}
	for (size_t k = 0; k < s->n; k++) /* a linked sweep takes its leader's index (--link) */
		if (s->ch[k].follows >= 0)
			pick[k] = pick[s->ch[k].follows];
}

/* Appends "sep"+part to a heap string (NULL: none yet). */
static char *join(char *acc, const char *sep, const char *part)
{
	char *r = acc ? xasprintf("%s%s%s", acc, sep, part) : xstrdup(part);
	free(acc);
	return r;
}

json_t *sweep_apply(const struct sweep *s, const json_t *base, size_t i, char **suffix, char **added, char **err)
{
	size_t *pick = xcalloc(s->n ? s->n : 1, sizeof(size_t));
	json_t *cfg = json_deep_copy(base);
	char *sfx = NULL, *missing = NULL;
	int names_itself = 0;

	*suffix = NULL;
	if (added)
		*added = NULL;
	variant_picks(s, i, pick);
	for (size_t k = 0; k < s->n; k++) {
		const struct change *c = &s->ch[k];
		if (!jpath_get(cfg, c->path))
			missing = join(missing, ", ", c->path);
		if (jpath_set(cfg, c->path, json_deep_copy(c->val[pick[k]])) < 0) {
			*err = xasprintf("%s %s: cannot set %s in this config (a part of it is not a mapping, or an "
					 "index is past the end of a list)", c->is_sweep ? "--sweep" : "--set", c->user_path,
					 c->path);
			json_decref(cfg);
			cfg = NULL;
			goto out;
		}
		if (c->is_sweep) {
			sfx = join(sfx, "_", c->tag[pick[k]]);
			names_itself |= !strcmp(c->path, "config.name");
		}
	}
	if (sfx && !names_itself) {
		const char *name = jpath_str(cfg, "config.name", NULL);
		if (name)
			jpath_set(cfg, "config.name", json_sprintf("%s_%s", name, sfx));
	}
	*suffix = sfx;
	sfx = NULL;
	if (added) {
		*added = missing;
		missing = NULL;
	}
out:
	free(sfx);
	free(missing);
	free(pick);
	return cfg;
}

char *sweep_describe(const struct sweep *s, size_t i)
{
	size_t *pick = xcalloc(s->n ? s->n : 1, sizeof(size_t));
	char *acc = NULL;
	variant_picks(s, i, pick);
	for (size_t k = 0; k < s->n; k++) {
		if (!s->ch[k].is_sweep)
			continue;
		char *part = xasprintf("%s=%s", s->ch[k].user_path, s->ch[k].text[pick[k]]);
		acc = join(acc, ", ", part);
		free(part);
	}
	free(pick);
	return acc ? acc : xstrdup("");
}
