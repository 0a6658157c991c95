/* Start times of scheduled jobs (when.h): the --in and --at parsers, their bounds, and the two
 * formats people read. Knows nothing of jobs beyond those. */
#include "when.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util.h"

int when_parse_in(const char *text, long long *seconds, const char **why)
{
	long long n = 0;
	int rc = util_duration_parse(text, WHEN_MAX_AHEAD_S, &n);

	*seconds = 0;
	*why = NULL;
	if (rc == -1)
		*why = "must be a duration like 90m, 2h, 1d, 1h30m or 3600 (seconds), from 1 s to 365d";
	else if (rc == -2)
		*why = "is longer than the most a job may wait, 365d (31536000 s)";
	else if (n < 1)
		*why = "must be at least 1 s (to start now, leave --in out)";
	else
		*seconds = n;
	return *why ? -1 : 0;
}

/* "HH:MM" (two digits each, 24-hour): the next such local time of day after now_ms. */
static int next_time_of_day(const char *text, int64_t now_ms, int64_t *epoch_ms)
{
	int h, m;
	time_t now = (time_t)(now_ms / 1000), t;
	struct tm tm;

	if (strlen(text) != 5 || !isdigit((unsigned char)text[0]) || !isdigit((unsigned char)text[1]) || text[2] != ':' ||
	    !isdigit((unsigned char)text[3]) || !isdigit((unsigned char)text[4]))
		return -1;
	h = (text[0] - '0') * 10 + (text[1] - '0');
	m = (text[3] - '0') * 10 + (text[4] - '0');
	if (h > 23 || m > 59 || !localtime_r(&now, &tm))
		return -1;
	for (int day = 0; day < 2; day++) { /* today's, else tomorrow's; one in a DST gap is mktime's (an hour on) */
		struct tm want = tm;
		want.tm_mday += day;
		want.tm_hour = h;
		want.tm_min = m;
		want.tm_sec = 0;
		want.tm_isdst = -1;
		t = mktime(&want);
		if (t != (time_t)-1 && t > now) {
			*epoch_ms = (int64_t)t * 1000;
			return 0;
		}
	}
	return -1;
}

int when_parse_at(const char *text, int64_t now_ms, int64_t *epoch_ms, const char **why)
{
	*epoch_ms = 0;
	*why = "must be an RFC 3339 time with its zone (2026-12-01T22:00:00Z, 2026-12-01T23:00:00+01:00) or a local "
	       "time of day HH:MM (22:00: the next one)";
	if (!text || (util_time_parse(text, epoch_ms) < 0 && next_time_of_day(text, now_ms, epoch_ms) < 0))
		return -1;
	if (*epoch_ms - now_ms > WHEN_MAX_AHEAD_S * 1000) {
		*why = "is more than 365 days ahead, the most a job may wait";
		return -1;
	}
	*why = NULL;
	return 0;
}

void when_format_utc(int64_t epoch_ms, char *buf, size_t n)
{
	time_t t = (time_t)(epoch_ms >= 0 ? epoch_ms / 1000 : (epoch_ms - 999) / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, n, "?");
}

void when_format_wait(long long seconds, char *buf, size_t n)
{
	long long s = seconds < 0 ? 0 : seconds;

	if (s < 60)
		snprintf(buf, n, "%llds", s);
	else if (s < 3600)
		snprintf(buf, n, "%lldm%02llds", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, n, "%lldh%02lldm", s / 3600, s % 3600 / 60);
	else
		snprintf(buf, n, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
}
