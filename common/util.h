/* Small helpers every rung binary uses: allocation that aborts on exhaustion (a control
 * plane that cannot allocate a few bytes cannot do anything useful), clocks, strings. */
#ifndef RUNG_UTIL_H
#define RUNG_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* malloc/calloc/realloc/strdup that abort with a message instead of returning NULL. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* printf into a new heap string; the caller frees it. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The strings up to the terminating NULL (at most 16), concatenated into a new heap string the
 * caller frees. Copies with memcpy: splicing kilobytes of JSON text this way costs a fraction of
 * printf's %s (xasprintf). */
char *util_concat(const char *first, ...) __attribute__((sentinel));

/* A JSON object's text with more members appended: object "{...}" (trailing whitespace allowed)
 * and the members' text, given as the strings up to the terminating NULL (at most 16, concatenated
 * as util_concat does: "\"k\": ", value, ...), give "{..., members}". Returns a new heap string the
 * caller frees, or NULL when object is not an object with at least one member. Lets rungd add large
 * values that Postgres returns as text beside a document without parsing either. */
char *util_json_append(const char *object, const char *first, ...) __attribute__((sentinel));

/* The whole file at path in a new NUL-terminated heap string the caller frees, its length in *len
 * (len may be NULL); NULL (errno set) when it cannot be opened or read. */
char *util_read_file(const char *path, size_t *len);

/* Copies at most MAX bytes of SRC (LEN bytes, NULs allowed) into a new heap string, which the caller
 * frees, that is valid UTF-8: every byte that does not start a well-formed sequence (or a NUL)
 * becomes '?'. Trainer output reaches JSON and Postgres text, which take nothing else. */
char *util_utf8_sanitize(const char *src, size_t len, size_t max);

/* Parses an RFC 3339 time as an API takes it: `2026-12-01T00:00:00Z`, fractional seconds allowed,
 * `Z` or an offset `+HH:MM` / `-HH:MM` required, each field in range. Sets *epoch_ms to the time in
 * ms since the epoch and returns 0, or returns -1 when s is anything else. */
int util_time_parse(const char *s, int64_t *epoch_ms);

/* Parses a DURATION as people type one: NUMBER UNIT groups with the units w, d, h, m, s, each at
 * most once and in that order ("90m", "2h", "1d", "1h30m", "2w"), or a bare number of seconds
 * alone ("3600"). Sets *seconds and returns 0; -1 when text is not one (NULL, empty, blanks, signs,
 * fractions, another unit); -2 when it is longer than max_s. The bounds and the messages are the
 * callers' (token lifetimes, start delays, report windows). */
int util_duration_parse(const char *text, long long max_s, long long *seconds);

/* Monotonic and wall clocks in milliseconds. */
int64_t util_mono_ms(void);
int64_t util_wall_ms(void);

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
