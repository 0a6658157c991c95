/* Worker pool names: their one rule, and a list of them as text (pool.h). Pure. */
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "util.h"

static bool pool_char_ok(char c, bool first)
{
	if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
		return true;
	return !first && (c == '.' || c == '_' || c == '-');
}

bool pool_name_ok(const char *name)
{
	size_t n;

	if (!name)
		return false;
	n = strlen(name);
	if (n == 0 || n > POOL_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!pool_char_ok(name[i], i == 0))
			return false;
	return true;
}

char *pool_list_join(const json_t *names, const char *sep, const char *none)
{
	char *out = NULL;
	const json_t *v;
	size_t i;

	json_array_foreach(names, i, v) {
		char *next = xasprintf("%s%s%s", out ? out : "", out ? sep : "", json_string_value(v) ?: "?");
		free(out);
		out = next;
	}
	return out ? out : xstrdup(none);
}

char *pool_limits_text(const json_t *lim, const char *sep, const char *none)
{
	char *out = NULL;
	const char *pool;
	json_t *n;

	if (!json_is_object(lim))
		return xstrdup(none);
	json_object_foreach((json_t *)lim, pool, n) {
		char *next = json_is_real(n) /* a quota of GPU hours per pool (migration 037) may be a fraction */
				     ? xasprintf("%s%s%s:%g", out ? out : "", out ? sep : "", pool, json_real_value(n))
				     : xasprintf("%s%s%s:%lld", out ? out : "", out ? sep : "", pool,
						 (long long)json_integer_value(n));
		free(out);
		out = next;
	}
	return out ? out : xstrdup(none);
}

char *pool_borrow_check(const json_t *borrow, const char *own)
{
	const json_t *v, *w;
	size_t i, j;

	if (!json_is_array(borrow) || json_array_size(borrow) > POOL_BORROW_MAX)
		return xasprintf("borrow must be an array of at most %d pool names", POOL_BORROW_MAX);
	json_array_foreach(borrow, i, v) {
		if (!pool_name_ok(json_string_value(v)))
			return xstrdup("borrow must hold pool names: " POOL_NAME_RULE);
		if (own && strcmp(json_string_value(v), own) == 0)
			return xasprintf("borrow must not name the worker's own pool (%s)", own);
		for (j = 0; j < i; j++) {
			w = json_array_get(borrow, j);
			if (strcmp(json_string_value(v), json_string_value(w)) == 0)
				return xasprintf("borrow names pool %s twice", json_string_value(v));
		}
	}
	return NULL;
}

json_t *pool_borrow_parse(const char *text, const char *own, char **err)
{
	json_t *out = json_array();
	const char *p = text ? text : "";
	char *msg;

	while (*p) {
		const char *start, *end;
		while (*p == ' ' || *p == ',')
			p++;
		if (!*p)
			break;
		start = p;
		while (*p && *p != ',')
			p++;
		end = p;
		while (end > start && end[-1] == ' ')
			end--;
		/* json_stringn is NULL for a name that is not UTF-8: refused, not dropped from the list */
		json_array_append_new(out, json_stringn(start, (size_t)(end - start)) ?: json_null());
	}
	msg = pool_borrow_check(out, own);
	if (msg) {
		*err = msg;
		json_decref(out);
		return NULL;
	}
	return out;
}
