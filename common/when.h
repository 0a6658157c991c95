/* When a scheduled job starts (migration 025): the bounds of a submit's "start_in_s" and
 * "run_after", the DURATION and TIME texts `rungctl submit --in/--at` take, and how a start time and
 * the wait until it are written for people (rungctl show and the web job page, through
 * recovery/jobtext.h). The one place each is written, for rungd, rungctl and the tests. Pure: the
 * caller passes the clock; --at's HH:MM reads the local time zone (TZ). */
#ifndef RUNG_WHEN_H
#define RUNG_WHEN_H

#include <stddef.h>
#include <stdint.h>

#define WHEN_MAX_AHEAD_S 31536000LL /* 365 days: how far ahead a job may be scheduled */

/* Parses DURATION, the wait of --in: one or more NUMBER UNIT groups with units d, h, m, s, each at
 * most once and in that order ("90m", "2h", "1d", "1h30m", "45s"), or bare seconds ("3600"), into
 * *seconds, which must lie in [1, WHEN_MAX_AHEAD_S]. Returns 0, or -1 with *why (static text, for a
 * usage line) saying what is wrong. */
int when_parse_in(const char *text, long long *seconds, const char **why);

/* Parses TIME, the start of --at: an RFC 3339 time with its zone (util_time_parse: any time from
 * 1970, a past one included: the server then queues the job at once), or "HH:MM" (24-hour, local
 * time): the next such time of day after now_ms (today's, else tomorrow's; one that a change to
 * summer time skips is the instant it would have been, an hour on by the clock). The time must be at
 * most WHEN_MAX_AHEAD_S after now_ms. Sets *epoch_ms and returns 0, or -1 with *why (static). */
int when_parse_at(const char *text, int64_t now_ms, int64_t *epoch_ms, const char **why);

/* epoch_ms as an RFC 3339 UTC time to the second, "2026-12-01T22:00:00Z", into buf (n >= 21). */
void when_format_utc(int64_t epoch_ms, char *buf, size_t n);

/* A wait of seconds (< 0 counts as 0) for people, two units at most: "45s", "12m05s", "2h05m",
 * "3d04h", into buf (n >= 24). */
void when_format_wait(long long seconds, char *buf, size_t n);

#endif
