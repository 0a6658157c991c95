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
