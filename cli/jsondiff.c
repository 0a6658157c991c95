/* Path-level JSON diff (see jsondiff.h). Recursion depth is bounded by the documents, which the
 * server produced from configs of a few levels. */
#include "jsondiff.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

static int same_number(const json_t *a, const json_t *b)
{
	return json_is_number(a) && json_is_number(b) && json_number_value(a) == json_number_value(b);
}

static char *child_path(const char *path, const char *key)
{
	return *path ? xasprintf("%s.%s", path, key) : xstrdup(key);
}

static void add(json_t *out, const char *path, const json_t *a, const json_t *b)
{
	json_array_append_new(out, json_pack("{s:s, s:O, s:O}", "path", path,
		"old", a ? (json_t *)a : json_null(), "new", b ? (json_t *)b : json_null()));
}

/* True when no element of the array is an object or an array. */
static int scalars(const json_t *arr)
{
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
		if (json_is_object(v) || json_is_array(v))
			return 0;
	return 1;
}

static void diff(json_t *out, const char *path, const json_t *a, const json_t *b)
{
	const char *k;
	json_t *v;
	if (a && b && (json_equal(a, b) || same_number(a, b)))
		return;
	if (json_is_object(a) && json_is_object(b)) {
		json_object_foreach((json_t *)a, k, v) {
			char *p = child_path(path, k);
			diff(out, p, v, json_object_get(b, k));
			free(p);
		}
		json_object_foreach((json_t *)b, k, v) {
			if (json_object_get(a, k))
				continue;
			char *p = child_path(path, k);
			diff(out, p, NULL, v);
			free(p);
		}
		return;
	}
	if (json_is_array(a) && json_is_array(b)) {
		size_t na = json_array_size(a), nb = json_array_size(b);
		if (na != nb && scalars(a) && scalars(b)) { /* a list that grew or shrank: [512,768,1024] -> [512,768] */
			add(out, path, a, b);
			return;
		}
		for (size_t i = 0; i < na || i < nb; i++) {
			char *p = xasprintf("%s[%zu]", path, i);
			diff(out, p, json_array_get(a, i), json_array_get(b, i));
			free(p);
		}
		return;
	}
	if (!a && !b)
		return;
	add(out, path, a, b);
}

json_t *jsondiff_paths(const json_t *a, const json_t *b)
{
	json_t *out = json_array();
	diff(out, "", a, b);
	return out;
}

char *jsondiff_format(const json_t *d)
{
	size_t i;
	json_t *e;
	char *out = xstrdup("");
	json_array_foreach(d, i, e) {
		char *o = json_dumps(json_object_get(e, "old"), JSON_COMPACT | JSON_ENCODE_ANY);
		char *n = json_dumps(json_object_get(e, "new"), JSON_COMPACT | JSON_ENCODE_ANY);
		char *next = xasprintf("%s%s: %s -> %s\n", out, json_string_value(json_object_get(e, "path")),
			o ? o : "?", n ? n : "?");
		free(o);
		free(n);
		free(out);
		out = next;
	}
	return out;
}
