/* Unit tests of common/version.c: the build's version is a valid one, and the rule rungd holds a
 * worker's version to (1..64 printable ASCII characters). */
#include <string.h>

#include "tap.h"
#include "version.h"

int main(void)
{
	const char *v = rung_version();
	char s[RUNG_VERSION_MAX + 2];

	TAP_OK(v && *v, "the build has a version (git describe, VERSION or unknown)");
	TAP_OK(v && rung_version_valid(v, strlen(v)), "the build's version is one rungd accepts from a worker");
	TAP_OK(v && !strchr(v, ' ') && !strchr(v, '"') && !strchr(v, '\\') && !strchr(v, '/'),
	       "the build's version needs no quoting (scripts/version.sh keeps A-Za-z0-9._+~-)");
	TAP_OK(rung_version_valid("v1.4.0-12-g3f2a9c1-dirty", 24), "a git describe");
	TAP_OK(rung_version_valid("x", 1), "one character");
	TAP_OK(rung_version_valid("2.0 beta \"rc\" \\ ~", 17), "spaces, quotes and backslashes are printable");
	TAP_OK(!rung_version_valid("", 0), "empty refused");
	TAP_OK(!rung_version_valid(NULL, 3), "NULL refused");
	memset(s, 'a', sizeof s);
	TAP_OK(rung_version_valid(s, RUNG_VERSION_MAX), "64 characters");
	TAP_OK(!rung_version_valid(s, RUNG_VERSION_MAX + 1), "65 refused");
	TAP_OK(!rung_version_valid("a\nb", 3), "a newline refused");
	TAP_OK(!rung_version_valid("a\tb", 3), "a tab refused");
	TAP_OK(!rung_version_valid("a\x7f", 2), "DEL refused");
	TAP_OK(!rung_version_valid("a\0b", 3), "a NUL inside refused");
	TAP_OK(!rung_version_valid("v1-\xc3\xa9", 5), "non-ASCII refused");
	return TAP_DONE();
}
