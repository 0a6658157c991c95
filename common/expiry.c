/* Token lifetimes (see expiry.h): the DURATION parser and its bounds. Knows nothing of tokens
 * beyond those two numbers. */
#include "expiry.h"

#include <stddef.h>

#include "util.h"

int expiry_parse(const char *text, long long *seconds, const char **why)
{
	long long n = 0;
	int rc = util_duration_parse(text, EXPIRY_MAX_S, &n);

	*seconds = 0;
	*why = NULL;
	if (rc == -1)
		*why = "must be a number of seconds or one with units (90d, 12h, 30m, 1h30m, 2w, 3600s), from 60 s to 3650d";
	else if (rc == -2)
		*why = "is longer than the most a token may live, 3650d (315360000 s)";
	else if (n < EXPIRY_MIN_S)
		*why = "is shorter than the least a token may live, 60 s";
	else
		*seconds = n;
	return *why ? -1 : 0;
}
