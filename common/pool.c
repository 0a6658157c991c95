/* Worker pool names: their one rule (pool.h). Pure. */
#include <string.h>

#include "pool.h"

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
