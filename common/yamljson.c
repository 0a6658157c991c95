/* YAML (and JSON) config files to jansson values for rungctl submit/classify and rungd's raw-YAML
 * submit (POST /v1/jobs with Content-Type: application/yaml). Walks libyaml's event
 * stream with an explicit stack; types plain scalars with PyYAML's YAML 1.1 resolvers plus the
 * exponent-float resolver AI Toolkit's toolkit/config.py adds (so `lr: 1e-4` is a float, as the trainer
 * sees it). Aliases are copied (with a node budget against alias bombs); `<<` merge keys are honoured. */
#include "yamljson.h"

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "util.h"

#define YJ_MAX_FILE (16u << 20)     /* configs are a few KiB; refuse anything absurd */
#define YJ_MAX_NODES 1000000u       /* values produced, aliases counted at full size */
#define YJ_MAX_DEPTH 256u

enum yj_kind { YJ_NULL, YJ_BOOL, YJ_INT, YJ_FLOAT, YJ_NKINDS };

struct yj_resolver {
	regex_t re[YJ_NKINDS];
	int ready;
};

struct yj_anchor {
	char *name;
	json_t *value;          /* owned reference */
	size_t nodes;           /* nodes in value, for the alias budget */
};

struct yj_frame {
	json_t *node;           /* object or array being filled (owned) */
	int is_map;
	char *key;              /* map: key awaiting its value (heap), NULL when the next value is a key */
	int key_is_merge;       /* map: the pending key is a plain `<<` */
	json_t *merge;          /* map: keys merged in from `<<` (owned object), or NULL */
	char *anchor;           /* anchor to register when the collection ends (heap) */
	size_t nodes_at_start;  /* parser node count when the collection began */
};

struct yj_parser {
	struct yj_resolver res;
	struct yj_frame stack[YJ_MAX_DEPTH];
	size_t depth;
	struct yj_anchor *anchors;
	size_t nanchors;
	json_t *root;
	int have_root;
	size_t nodes;
	size_t max_nodes;       /* alias budget: the parse fails past this many values */
	char *err;
};

static const char *const yj_patterns[YJ_NKINDS] = {
	[YJ_NULL] = "^(~|null|Null|NULL)?$",
	[YJ_BOOL] = "^(yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$",
	[YJ_INT] = "^[-+]?(0b[01_]+|0[0-7_]+|0|[1-9][0-9_]*|0x[0-9a-fA-F_]+|[1-9][0-9_]*(:[0-5]?[0-9])+)$",
	/* PyYAML's float plus AI Toolkit's fix: an exponent needs no dot and its sign is optional */
	[YJ_FLOAT] = "^([-+]?[0-9][0-9_]*\\.[0-9_]*([eE][-+]?[0-9]+)?"
		"|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+"
		"|\\.[0-9_]+([eE][-+]?[0-9]+)?"
		"|[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\\.[0-9_]*"
		"|[-+]?\\.(inf|Inf|INF)"
		"|\\.(nan|NaN|NAN))$",
};

static void resolver_init(struct yj_resolver *r)
{
	for (int i = 0; i < YJ_NKINDS; i++)
		if (regcomp(&r->re[i], yj_patterns[i], REG_EXTENDED | REG_NOSUB) != 0)
			abort(); /* the patterns are constants: a failure is a bug */
	r->ready = 1;
}

static void resolver_release(struct yj_resolver *r)
{
	if (!r->ready)
		return;
	for (int i = 0; i < YJ_NKINDS; i++)
		regfree(&r->re[i]);
	r->ready = 0;
}

/* Copy of s without underscores (YAML 1.1 digit separators). */
static char *strip_underscores(const char *s)
{
	char *out = xmalloc(strlen(s) + 1), *o = out;
	for (; *s; s++)
		if (*s != '_')
			*o++ = *s;
	*o = '\0';
	return out;
}

static json_t *make_int(const char *text, char **err)
{
	char *s = strip_underscores(text), *p = s;
	json_t *out = NULL;
	int neg = 0;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	errno = 0;
	long long v = 0;
	if (strchr(p, ':')) {
		/* sexagesimal: 1:30 is 90 */
		for (char *part = strtok(p, ":"); part; part = strtok(NULL, ":")) {
			if (__builtin_mul_overflow(v, 60, &v) || __builtin_add_overflow(v, strtoll(part, NULL, 10), &v))
				errno = ERANGE;
		}
	} else if (!strncmp(p, "0b", 2)) {
		v = strtoll(p + 2, NULL, 2);
	} else if (!strncmp(p, "0x", 2)) {
		v = strtoll(p + 2, NULL, 16);
	} else if (p[0] == '0' && p[1]) {
		v = strtoll(p + 1, NULL, 8);
	} else {
		v = strtoll(p, NULL, 10);
	}
	if (errno == ERANGE) {
		*err = xasprintf("integer %s is out of range", text);
		goto out;
	}
	out = json_integer(neg ? -v : v);
out:
	free(s);
	return out;
}

static json_t *make_float(const char *text, char **err)
{
	char *s = strip_underscores(text), *p = s;
	json_t *out = NULL;
	double sign = 1.0, v;
	if (*p == '+' || *p == '-')
		sign = *p++ == '-' ? -1.0 : 1.0;
	if (strpbrk(p, "iInN")) {
		*err = xasprintf("%s (infinity or NaN) cannot be represented in JSON", text);
		goto out;
	}
	if (strchr(p, ':')) {
		v = 0.0;
		for (char *part = strtok(p, ":"); part; part = strtok(NULL, ":"))
			v = v * 60.0 + strtod(part, NULL);
	} else {
		char *end = NULL;
		v = strtod(p, &end);
		if (end == p || *end) {
			out = json_string(text); /* e.g. "._": PyYAML would choke; keep the text */
			goto out;
		}
	}
	out = json_real(sign * v);
	if (!out)
		*err = xasprintf("%s is out of range for JSON", text);
out:
	free(s);
	return out;
}

static json_t *resolve_plain(struct yj_resolver *r, const char *text, char **err)
{
	if (!regexec(&r->re[YJ_NULL], text, 0, NULL, 0))
		return json_null();
	if (!regexec(&r->re[YJ_BOOL], text, 0, NULL, 0))
		return json_boolean(strchr("yYtT", text[0]) || !strcasecmp(text, "on"));
	if (!regexec(&r->re[YJ_FLOAT], text, 0, NULL, 0))
		return make_float(text, err);
	if (!regexec(&r->re[YJ_INT], text, 0, NULL, 0))
		return make_int(text, err);
	return json_string(text);
}

json_t *yamljson_scalar(const char *text, char **err)
{
	struct yj_resolver r = { .ready = 0 };
	resolver_init(&r);
	json_t *v = resolve_plain(&r, text, err);
	resolver_release(&r);
	return v;
}

static void set_err(struct yj_parser *p, const yaml_mark_t *mark, const char *fmt, const char *arg)
{
	if (p->err)
		return;
	char *msg = xasprintf(fmt, arg ? arg : "");
	p->err = xasprintf("line %zu column %zu: %s", mark->line + 1, mark->column + 1, msg);
	free(msg);
}

static void add_anchor(struct yj_parser *p, const char *name, json_t *value, size_t nodes)
{
	for (size_t i = 0; i < p->nanchors; i++) {
		if (!strcmp(p->anchors[i].name, name)) { /* a redefinition replaces the old one */
			json_decref(p->anchors[i].value);
			p->anchors[i].value = json_incref(value);
			p->anchors[i].nodes = nodes;
			return;
		}
	}
	p->anchors = xrealloc(p->anchors, (p->nanchors + 1) * sizeof(*p->anchors));
	p->anchors[p->nanchors++] = (struct yj_anchor){ xstrdup(name), json_incref(value), nodes };
}

static const struct yj_anchor *find_anchor(const struct yj_parser *p, const char *name)
{
	for (size_t i = 0; i < p->nanchors; i++)
		if (!strcmp(p->anchors[i].name, name))
			return &p->anchors[i];
	return NULL;
}

/* A JSON object key for a scalar value: strings as they are, others as JSON text (as Python's
 * json.dumps writes a non-string dict key: true, null, 3). NULL when the key is not a scalar. */
static char *key_text(const json_t *v)
{
	if (json_is_string(v))
		return xstrdup(json_string_value(v));
	if (json_is_object(v) || json_is_array(v))
		return NULL;
	char *s = json_dumps(v, JSON_ENCODE_ANY);
	char *out = xstrdup(s ? s : "");
	free(s);
	return out;
}

/* Folds the value of a `<<` key into f->merge: a mapping, or a sequence of mappings where earlier
 * ones win. Keys already in f->merge (from an earlier `<<`) win as well, as in PyYAML. */
static int merge_into(struct yj_frame *f, json_t *v)
{
	const char *k;
	json_t *c;
	size_t i;
	if (!f->merge)
		f->merge = json_object();
	if (json_is_object(v)) {
		json_object_foreach(v, k, c)
			if (!json_object_get(f->merge, k))
				json_object_set(f->merge, k, c);
		return 0;
	}
	if (!json_is_array(v))
		return -1;
	json_array_foreach(v, i, c) {
		if (!json_is_object(c))
			return -1;
		merge_into(f, c);
	}
	return 0;
}

/* Hands a finished value (stolen) to the collection on top of the stack, or makes it the root. */
static int deliver(struct yj_parser *p, json_t *v, int plain_merge_key, const yaml_mark_t *mark)
{
	if (p->depth == 0) {
		if (p->have_root) {
			json_decref(v);
			set_err(p, mark, "more than one document in the file%s", NULL);
			return -1;
		}
		p->root = v;
		p->have_root = 1;
		return 0;
	}
	struct yj_frame *f = &p->stack[p->depth - 1];
	if (!f->is_map) {
		json_array_append_new(f->node, v);
		return 0;
	}
	if (!f->key) {
		f->key = key_text(v);
		f->key_is_merge = plain_merge_key;
		json_decref(v);
		if (!f->key) {
			set_err(p, mark, "mapping keys must be scalars%s", NULL);
			return -1;
		}
		return 0;
	}
	int rc = 0;
	if (f->key_is_merge) {
		if (merge_into(f, v) < 0) {
			set_err(p, mark, "the value of a << merge key must be a mapping or a list of mappings%s", NULL);
			rc = -1;
		}
		json_decref(v);
	} else {
		json_object_set_new(f->node, f->key, v);
	}
	free(f->key);
	f->key = NULL;
	f->key_is_merge = 0;
	return rc;
}

static int on_scalar(struct yj_parser *p, const yaml_event_t *ev)
{
	const char *text = (const char *)ev->data.scalar.value;
	const char *tag = (const char *)ev->data.scalar.tag;
	int plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	char *err = NULL;
	json_t *v;

	if (tag && !strcmp(tag, "tag:yaml.org,2002:str")) {
		v = json_string(text);
	} else if (tag && strcmp(tag, "!") != 0) {
		static const char *const typed[] = { "tag:yaml.org,2002:null", "tag:yaml.org,2002:bool",
			"tag:yaml.org,2002:int", "tag:yaml.org,2002:float" };
		static const json_type want[] = { JSON_NULL, JSON_TRUE, JSON_INTEGER, JSON_REAL };
		size_t i;
		for (i = 0; i < ARRAY_LEN(typed) && strcmp(tag, typed[i]); i++)
			;
		if (i == ARRAY_LEN(typed)) {
			set_err(p, &ev->start_mark, "unsupported tag %s", tag);
			return -1;
		}
		v = resolve_plain(&p->res, text, &err);
		if (v && i == 3 && json_is_integer(v)) {
			json_t *r = json_real((double)json_integer_value(v));
			json_decref(v);
			v = r;
		}
		int ok = v && (json_typeof(v) == want[i] || (i == 1 && json_is_false(v)));
		if (!ok) {
			json_decref(v);
			free(err);
			set_err(p, &ev->start_mark, "value does not match its tag %s", tag);
			return -1;
		}
	} else if (plain && !tag) {
		v = resolve_plain(&p->res, text, &err);
	} else {
		v = json_string(text);
	}
	if (!v) {
		if (!err)
			err = xasprintf("string is not valid UTF-8");
		set_err(p, &ev->start_mark, "%s", err);
		free(err);
		return -1;
	}
	p->nodes++;
	if (ev->data.scalar.anchor)
		add_anchor(p, (const char *)ev->data.scalar.anchor, v, 1);
	return deliver(p, v, plain && !tag && !strcmp(text, "<<"), &ev->start_mark);
}

static int on_alias(struct yj_parser *p, const yaml_event_t *ev)
{
	const char *name = (const char *)ev->data.alias.anchor;
	const struct yj_anchor *a = find_anchor(p, name);
	if (!a) {
		set_err(p, &ev->start_mark, "unknown alias *%s (anchors must be defined before use)", name);
		return -1;
	}
	p->nodes += a->nodes;
	if (p->nodes > p->max_nodes) {
		char *n = xasprintf("%zu", p->max_nodes);
		set_err(p, &ev->start_mark, "aliases expand to too many values (more than %s)", n);
		free(n);
		return -1;
	}
	return deliver(p, json_deep_copy(a->value), 0, &ev->start_mark);
}

static int on_start(struct yj_parser *p, const yaml_event_t *ev, int is_map)
{
	if (p->depth == YJ_MAX_DEPTH) {
		set_err(p, &ev->start_mark, "nesting deeper than 256 levels%s", NULL);
		return -1;
	}
	const yaml_char_t *anchor = is_map ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
	struct yj_frame *f = &p->stack[p->depth++];
	*f = (struct yj_frame){ .node = is_map ? json_object() : json_array(), .is_map = is_map,
		.anchor = anchor ? xstrdup((const char *)anchor) : NULL, .nodes_at_start = p->nodes };
	p->nodes++;
	return 0;
}

static int on_end(struct yj_parser *p, const yaml_event_t *ev)
{
	struct yj_frame f = p->stack[--p->depth];
	json_t *v = f.node;
	if (f.merge) {
		/* merged keys come first and explicit keys win, as PyYAML's flatten_mapping does */
		json_object_update(f.merge, v);
		json_decref(v);
		v = f.merge;
	}
	if (f.anchor)
		add_anchor(p, f.anchor, v, p->nodes - f.nodes_at_start);
	free(f.anchor);
	free(f.key);
	return deliver(p, v, 0, &ev->start_mark);
}

static void parser_release(struct yj_parser *p)
{
	while (p->depth > 0) {
		struct yj_frame *f = &p->stack[--p->depth];
		json_decref(f->node);
		json_decref(f->merge);
		free(f->key);
		free(f->anchor);
	}
	for (size_t i = 0; i < p->nanchors; i++) {
		free(p->anchors[i].name);
		json_decref(p->anchors[i].value);
	}
	free(p->anchors);
	json_decref(p->root);
	resolver_release(&p->res);
}

json_t *yamljson_parse(const char *buf, size_t len, char **err)
{
	return yamljson_parse_capped(buf, len, YJ_MAX_NODES, err);
}

json_t *yamljson_parse_capped(const char *buf, size_t len, size_t max_nodes, char **err)
{
	struct yj_parser p = { .depth = 0, .max_nodes = max_nodes };
	yaml_parser_t yp;
	yaml_event_t ev;
	json_t *out = NULL;
	int done = 0, docs = 0;

	*err = NULL;
	resolver_init(&p.res);
	if (!yaml_parser_initialize(&yp)) {
		*err = xstrdup("cannot initialise the YAML parser");
		resolver_release(&p.res);
		return NULL;
	}
	yaml_parser_set_input_string(&yp, (const unsigned char *)buf, len);
	while (!done && !p.err) {
		if (!yaml_parser_parse(&yp, &ev)) {
			const yaml_mark_t *m = yp.problem_mark.line || yp.problem_mark.column ? &yp.problem_mark
				: &yp.context_mark;
			char *ctx = !yp.context ? xstrdup("")
				: yp.context_mark.line != m->line ? xasprintf(" %s started at line %zu", yp.context,
					yp.context_mark.line + 1)
				: xasprintf(" %s", yp.context);
			p.err = xasprintf("line %zu column %zu: %s%s", m->line + 1, m->column + 1,
				yp.problem ? yp.problem : "invalid YAML", ctx);
			free(ctx);
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1)
				set_err(&p, &ev.start_mark, "more than one YAML document (---) in the file%s", NULL);
			break;
		case YAML_SCALAR_EVENT:
			on_scalar(&p, &ev);
			break;
		case YAML_ALIAS_EVENT:
			on_alias(&p, &ev);
			break;
		case YAML_SEQUENCE_START_EVENT:
			on_start(&p, &ev, 0);
			break;
		case YAML_MAPPING_START_EVENT:
			on_start(&p, &ev, 1);
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			on_end(&p, &ev);
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&yp);
	if (p.err) {
		*err = p.err;
		p.err = NULL;
		goto out;
	}
	/* an empty file (or only comments) is a null document, as PyYAML reads it */
	out = p.have_root ? p.root : json_null();
	p.root = NULL;
out:
	parser_release(&p);
	return out;
}

json_t *yamljson_load_file(const char *path, char **err)
{
	FILE *f = NULL;
	char *buf = NULL, *perr = NULL;
	size_t len = 0;
	json_t *out = NULL;

	*err = NULL;
	f = fopen(path, "rb");
	if (!f) {
		*err = xasprintf("%s: %s", path, strerror(errno));
		goto out;
	}
	buf = xmalloc(YJ_MAX_FILE + 1);
	len = fread(buf, 1, YJ_MAX_FILE + 1, f);
	if (ferror(f)) {
		*err = xasprintf("%s: %s", path, strerror(errno));
		goto out;
	}
	if (len > YJ_MAX_FILE) {
		*err = xasprintf("%s: larger than 16 MiB; not a training config", path);
		goto out;
	}
	buf[len] = '\0';
	const char *dot = strrchr(path, '.');
	size_t skip = strspn(buf, " \t\r\n");
	if ((dot && !strcmp(dot, ".json")) || buf[skip] == '{') {
		json_error_t je;
		out = json_loadb(buf, len, JSON_DECODE_ANY, &je);
		if (!out)
			*err = xasprintf("%s: line %d column %d: %s", path, je.line, je.column, je.text);
		goto out;
	}
	out = yamljson_parse(buf, len, &perr);
	if (!out)
		*err = xasprintf("%s: %s", path, perr);
out:
	free(perr);
	free(buf);
	if (f)
		fclose(f);
	return out;
}
