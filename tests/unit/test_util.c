/* Unit tests of common/util.c's util_json_append (members spliced into a JSON object's text, the
 * way rungd adds config text that Postgres returns beside a lean document), util_concat and
 * util_read_file; util_time_parse (RFC 3339 as the API takes it) and util_duration_parse. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tap.h"
#include "util.h"

static void json_append(void)
{
	char *s = util_json_append("{\"id\": 1}", "\"config\": ", "{\"a\": [1, 2]}", ", \"n\": 3", NULL);
	json_t *doc = s ? json_loads(s, 0, NULL) : NULL;

	TAP_STR_EQ(s ? s : "", "{\"id\": 1, \"config\": {\"a\": [1, 2]}, \"n\": 3}",
		   "members, given in parts, appended before the brace");
	TAP_OK(doc && json_integer_value(json_object_get(doc, "n")) == 3 &&
		       json_array_size(json_object_get(json_object_get(doc, "config"), "a")) == 2,
	       "the result parses as one object with every member");
	json_decref(doc);
	free(s);
	s = util_json_append("{\"id\": 1}\n  ", "\"x\": true", NULL);
	TAP_STR_EQ(s ? s : "", "{\"id\": 1, \"x\": true}", "trailing whitespace after the object is dropped");
	free(s);
	TAP_OK(util_json_append("{}", "\"x\": 1", NULL) == NULL, "an empty object is refused (no member to follow)");
	TAP_OK(util_json_append("[1, 2]", "\"x\": 1", NULL) == NULL, "an array is refused");
	TAP_OK(util_json_append("", "\"x\": 1", NULL) == NULL, "an empty string is refused");
}

static void concat(void)
{
	char *s = util_concat("a", "", "bc", "{\"k\": 1}", NULL);

	TAP_STR_EQ(s, "abc{\"k\": 1}", "util_concat joins every part, empty ones included");
	free(s);
	s = util_concat("only", NULL);
	TAP_STR_EQ(s, "only", "util_concat of one part is a copy");
	free(s);
	s = util_concat("", NULL);
	TAP_STR_EQ(s, "", "util_concat of an empty part is an empty string");
	free(s);
}

/* util_read_file: every byte (a NUL inside and more than one buffer's worth), the length, NULL for
 * a file that is not there. */
static void read_file(void)
{
	char path[] = "/tmp/rung-test-util-XXXXXX", *t;
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
	size_t len = 0, i;
	bool same = true;

	for (i = 0; f && i < 20000; i++)
		fputc(i % 251, f);
	if (f)
		fclose(f);
	t = util_read_file(path, &len);
	for (i = 0; t && i < len; i++)
		same &= (unsigned char)t[i] == i % 251;
	TAP_OK(t && len == 20000 && same && t[len] == '\0', "read_file: 20000 bytes with NULs inside, as written, NUL-terminated");
	free(t);
	unlink(path);
	errno = 0;
	TAP_OK(util_read_file(path, &len) == NULL && errno == ENOENT, "read_file: NULL and ENOENT for a missing file");
}

static void time_parse(void)
{
	static const struct { const char *s; long long ms; } good[] = {
		{ "1970-01-01T00:00:00Z", 0 },
		{ "2026-12-01T00:00:00Z", 1796083200000LL },
		{ "2026-12-01T01:30:00+01:30", 1796083200000LL },
		{ "2026-11-30T22:00:00-02:00", 1796083200000LL },
		{ "2026-12-01t00:00:00.25z", 1796083200250LL },
		{ "2024-02-29T12:00:00Z", 1709208000000LL },
		{ "2000-03-01T00:00:00.123456Z", 951868800123LL },
	};
	static const char *const bad[] = { "", "2026-12-01", "2026-12-01T00:00:00", "2026-12-01 00:00:00Z",
		"2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2025-02-29T00:00:00Z", "2026-12-01T24:00:00Z",
		"2026-12-01T00:60:00Z", "2026-12-01T00:00:00+0100", "2026-12-01T00:00:00Zx", "2026-12-01T00:00:00.Z",
		"26-12-01T00:00:00Z", "1969-12-31T23:59:59Z", "yesterday" };
	int64_t ms = 0;
	for (size_t i = 0; i < ARRAY_LEN(good); i++) {
		int rc = util_time_parse(good[i].s, &ms);
		TAP_OK(rc == 0 && ms == good[i].ms, good[i].s);
		if (rc != 0 || ms != good[i].ms)
			fprintf(stderr, "# %s: rc %d, %lld ms\n", good[i].s, rc, (long long)ms);
	}
	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		TAP_OK(util_time_parse(bad[i], &ms) < 0, bad[i]);
	TAP_OK(util_time_parse(NULL, &ms) < 0, "time: NULL is refused");
}

static void duration_parse(void)
{
	static const struct { const char *s; long long max, want; } cases[] = {
		{ "90m", 100000000, 5400 }, { "2h", 100000000, 7200 }, { "1d", 100000000, 86400 }, { "2w", 100000000, 1209600 },
		{ "1h30m", 100000000, 5400 }, { "1w2d3h4m5s", 100000000, 788645 }, { "3600", 100000000, 3600 }, { "0090m", 100000000, 5400 },
		{ "0", 100000000, 0 }, { "", 100000000, -1 }, { "h", 100000000, -1 }, { "1.5h", 100000000, -1 }, { "-5m", 100000000, -1 },
		{ "+5m", 100000000, -1 }, { " 5m", 100000000, -1 }, { "5m ", 100000000, -1 }, { "5 m", 100000000, -1 }, { "5H", 100000000, -1 },
		{ "30m1h", 100000000, -1 }, { "1h1h", 100000000, -1 }, { "1h30", 100000000, -1 }, { "5y", 100000000, -1 },
		{ "1001", 1000, -2 }, { "17m", 1000, -2 }, { "1000", 1000, 1000 }, { "9999999999999w", 100000000, -2 },
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		long long got = -9;
		int rc = util_duration_parse(cases[i].s, cases[i].max, &got);
		int ok = cases[i].want >= 0 ? rc == 0 && got == cases[i].want : rc == cases[i].want && got == 0;
		TAP_OK(ok, cases[i].s[0] ? cases[i].s : "(empty)");
		if (!ok)
			fprintf(stderr, "# %s: rc %d, %lld\n", cases[i].s, rc, got);
	}
	TAP_OK(util_duration_parse(NULL, 10, &(long long){ 0 }) == -1, "duration: NULL is refused");
}

int main(void)
{
	json_append();
	concat();
	read_file();
	time_parse();
	duration_parse();
	return TAP_DONE();
}
