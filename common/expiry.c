/* Token lifetimes (see expiry.h): the DURATION parser and its bounds. Knows nothing of tokens
 * beyond those two numbers. */
#include "expiry.h"

#include <ctype.h>
#include <stddef.h>

#define EXPIRY_DIGITS_MAX 12 /* 999999999999 d still fits a long long once multiplied out */

int expiry_parse(const char *text, long long *seconds, const char **why)
{
	static const struct {
		char unit;
		long long seconds;
	} units[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 } };
	const char *p = text;
	long long n = 0, mult = 0;
	int digits = 0;

	*seconds = 0;
	*why = "must be a number of seconds or one with a unit (90d, 12h, 30m, 3600s), from 60 s to 3650d";
	if (!p)
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		if (++digits > EXPIRY_DIGITS_MAX) {
			*why = "is longer than the most a token may live, 3650d";
			return -1;
		}
		n = n * 10 + (*p - '0');
	}
	if (digits == 0)
		return -1;
	if (*p == '\0') {
		mult = 1;
	} else if (p[1] == '\0') {
		for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
			if (units[i].unit == *p)
				mult = units[i].seconds;
	}
	if (!mult)
		return -1;
	n *= mult;
	if (n < EXPIRY_MIN_S) {
		*why = "is shorter than the least a token may live, 60 s";
		return -1;
	}
	if (n > EXPIRY_MAX_S) {
		*why = "is longer than the most a token may live, 3650d (315360000 s)";
		return -1;
	}
	*seconds = n;
	*why = NULL;
	return 0;
}
