/* JSON paths ("config.process[0].train.batch_size") over jansson values: parse, walk, get,
 * set, delete. Owns nothing but the parsing; the values belong to the caller. */
#include "jpath.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum seg_kind { SEG_KEY, SEG_INDEX, SEG_END, SEG_BAD };

struct seg {
	enum seg_kind kind;
	char key[128];   /* SEG_KEY: the member name */
	size_t index;    /* SEG_INDEX */
};

/* Reads the segment at *p and advances *p past it (and past a following dot). */
static void seg_next(const char **p, struct seg *s)
{
	const char *c = *p;
	size_t n = 0;

	if (*c == '\0') {
		s->kind = SEG_END;
		return;
	}
	if (*c == '[') {
		char *end;
		unsigned long long v;
		c++;
		if (!isdigit((unsigned char)*c)) {
			s->kind = SEG_BAD;
			return;
		}
		v = strtoull(c, &end, 10);
		if (*end != ']') {
			s->kind = SEG_BAD;
			return;
		}
		s->kind = SEG_INDEX;
		s->index = (size_t)v;
		c = end + 1;
	} else {
		while (*c && *c != '.' && *c != '[') {
			if (n + 1 >= sizeof(s->key)) {
				s->kind = SEG_BAD;
				return;
			}
			s->key[n++] = *c++;
		}
		if (n == 0) {
			s->kind = SEG_BAD;
			return;
		}
		s->key[n] = '\0';
		s->kind = SEG_KEY;
	}
	if (*c == '.') {
		c++;
		if (*c == '\0' || *c == '[' || *c == '.') {
			s->kind = SEG_BAD;
			return;
		}
	}
	*p = c;
}

static json_t *seg_child(const json_t *node, const struct seg *s)
{
	if (s->kind == SEG_KEY)
		return json_is_object(node) ? json_object_get(node, s->key) : NULL;
	if (s->kind == SEG_INDEX)
		return json_is_array(node) ? json_array_get(node, s->index) : NULL;
	return NULL;
}

json_t *jpath_get(const json_t *root, const char *path)
{
	const char *p = path;
	const json_t *node = root;
	struct seg s;

	if (!root || !path)
		return NULL;
	for (;;) {
		seg_next(&p, &s);
		if (s.kind == SEG_END)
			return (json_t *)node;
		if (s.kind == SEG_BAD)
			return NULL;
		node = seg_child(node, &s);
		if (!node)
			return NULL;
	}
}

/* Walks to the parent of the last segment, creating objects when create is set; *last gets
 * the last segment. Returns the parent or NULL. */
static json_t *walk_parent(json_t *root, const char *path, int create, struct seg *last)
{
	const char *p = path;
	json_t *node = root;
	struct seg cur, nxt;

	seg_next(&p, &cur);
	if (cur.kind != SEG_KEY && cur.kind != SEG_INDEX)
		return NULL;
	for (;;) {
		json_t *child;
		seg_next(&p, &nxt);
		if (nxt.kind == SEG_BAD)
			return NULL;
		if (nxt.kind == SEG_END) {
			*last = cur;
			return node;
		}
		child = seg_child(node, &cur);
		if (!child && create && cur.kind == SEG_KEY && json_is_object(node)) {
			child = nxt.kind == SEG_KEY ? json_object() : NULL;
			if (!child)
				return NULL;
			json_object_set_new(node, cur.key, child);
		}
		if (!child)
			return NULL;
		node = child;
		cur = nxt;
	}
}

int jpath_set(json_t *root, const char *path, json_t *value)
{
	struct seg last;
	json_t *parent;
	int rc = -1;

	if (!root || !path || !value)
		goto out;
	parent = walk_parent(root, path, 1, &last);
	if (!parent)
		goto out;
	if (last.kind == SEG_KEY && json_is_object(parent)) {
		rc = json_object_set(parent, last.key, value);
	} else if (last.kind == SEG_INDEX && json_is_array(parent) && last.index < json_array_size(parent)) {
		rc = json_array_set(parent, last.index, value);
	}
out:
	json_decref(value);
	return rc ? -1 : 0;
}

int jpath_del(json_t *root, const char *path)
{
	struct seg last;
	json_t *parent;

	if (!root || !path)
		return -1;
	parent = walk_parent(root, path, 0, &last);
	if (!parent)
		return -1;
	if (last.kind == SEG_KEY && json_is_object(parent))
		return json_object_del(parent, last.key) ? -1 : 0;
	if (last.kind == SEG_INDEX && json_is_array(parent))
		return json_array_remove(parent, last.index) ? -1 : 0;
	return -1;
}

long long jpath_int(const json_t *root, const char *path, long long dflt)
{
	json_t *v = jpath_get(root, path);
	double d;

	if (json_is_integer(v))
		return (long long)json_integer_value(v);
	if (json_is_real(v)) {
		d = json_real_value(v);
		if (d == floor(d) && fabs(d) < 9e15)
			return (long long)d;
	}
	return dflt;
}

int jpath_bool(const json_t *root, const char *path, int dflt)
{
	json_t *v = jpath_get(root, path);

	return json_is_boolean(v) ? json_is_true(v) : dflt;
}

const char *jpath_str(const json_t *root, const char *path, const char *dflt)
{
	json_t *v = jpath_get(root, path);

	return json_is_string(v) ? json_string_value(v) : dflt;
}
