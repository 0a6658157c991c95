/* The build's version (version.h): the text scripts/version.sh wrote into build/version_gen.h, which
 * only this file includes, so a new version compiles this file again and relinks, nothing more. */
#include "version.h"

#include "version_gen.h"

const char *rung_version(void)
{
	return RUNG_VERSION_TEXT;
}

bool rung_version_valid(const char *s, size_t len)
{
	if (!s || len == 0 || len > RUNG_VERSION_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return false;
	return true;
}
