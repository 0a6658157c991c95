/* Aborting allocators, clocks and string helpers; see util.h. */
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void util_oom(size_t n)
{
	fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		util_oom(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		util_oom(n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		util_oom(n);
	return q;
}

char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(xmalloc(n), s, n);
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	int n;
	char *s;

	va_start(ap, fmt);
	/* GCC 12's -Wformat-truncation misreads UBSan's null checks on fmt as a NULL format. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation"
	n = vsnprintf(NULL, 0, fmt, ap);
#pragma GCC diagnostic pop
	va_end(ap);
	if (n < 0)
		util_oom(0);
	s = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(s, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return s;
}

static int64_t util_clock_ms(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t util_mono_ms(void) { return util_clock_ms(CLOCK_MONOTONIC); }
int64_t util_wall_ms(void) { return util_clock_ms(CLOCK_REALTIME); }

#define UTIL_PARTS_MAX 16

/* The n parts of the given lengths, concatenated into a new heap string. */
static char *concat_n(const char *const *parts, const size_t *lens, size_t n)
{
	size_t total = 1, at = 0;
	char *s;

	for (size_t i = 0; i < n; i++)
		total += lens[i];
	s = xmalloc(total);
	for (size_t i = 0; i < n; i++) {
		memcpy(s + at, parts[i], lens[i]);
		at += lens[i];
	}
	s[at] = 0;
	return s;
}

/* Appends first and the strings after it, up to a NULL, to parts/lens from index *n. */
static void collect(const char **parts, size_t *lens, size_t *n, const char *first, va_list ap)
{
	for (const char *p = first; p; p = va_arg(ap, const char *)) {
		if (*n == UTIL_PARTS_MAX) { /* a programming error: more parts than any caller passes */
			fprintf(stderr, "fatal: util_concat: more than %d parts\n", UTIL_PARTS_MAX);
			abort();
		}
		parts[*n] = p;
		lens[(*n)++] = strlen(p);
	}
}

char *util_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0, got;

	if (!f)
		return NULL;
	do {
		if (cap - n < 4096)
			buf = xrealloc(buf, cap = cap * 2 + 8192);
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
	} while (got > 0);
	if (ferror(f)) {
		free(buf);
		buf = NULL;
	} else {
		buf[n] = '\0';
		if (len)
			*len = n;
	}
	fclose(f);
	return buf;
}

char *util_concat(const char *first, ...)
{
	const char *parts[UTIL_PARTS_MAX];
	size_t lens[UTIL_PARTS_MAX], n = 0;
	va_list ap;

	va_start(ap, first);
	collect(parts, lens, &n, first, ap);
	va_end(ap);
	return concat_n(parts, lens, n);
}

char *util_json_append(const char *object, const char *first, ...)
{
	const char *parts[UTIL_PARTS_MAX + 3];
	size_t lens[UTIL_PARTS_MAX + 3], n = 2, end = strlen(object);
	va_list ap;

	while (end > 0 && object[end - 1] != '}')
		end--;
	if (end < 3 || object[0] != '{')
		return NULL;
	parts[0] = object; /* without its closing brace */
	lens[0] = end - 1;
	parts[1] = ", ";
	lens[1] = 2;
	va_start(ap, first);
	collect(parts, lens, &n, first, ap);
	va_end(ap);
	parts[n] = "}";
	lens[n++] = 1;
	return concat_n(parts, lens, n);
}

char *util_utf8_sanitize(const char *src, size_t len, size_t max)
{
	const unsigned char *p = (const unsigned char *)src;
	char *out;
	size_t i = 0, o = 0;

	if (len > max)
		len = max;
	out = xmalloc(len + 1);
	while (i < len) {
		unsigned char c = p[i];
		size_t need = 0;
		unsigned int cp = 0, min = 0;
		if (c >= 0x01 && c < 0x80) {
			out[o++] = (char)c;
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF)
			need = 1, cp = c & 0x1F, min = 0x80;
		else if (c >= 0xE0 && c <= 0xEF)
			need = 2, cp = c & 0x0F, min = 0x800;
		else if (c >= 0xF0 && c <= 0xF4)
			need = 3, cp = c & 0x07, min = 0x10000;
		if (need && i + need < len) {
			size_t k;
			for (k = 1; k <= need; k++) {
				if ((p[i + k] & 0xC0) != 0x80)
					break;
				cp = (cp << 6) | (p[i + k] & 0x3F);
			}
			if (k == need + 1 && cp >= min && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF)) {
				memcpy(out + o, p + i, need + 1);
				o += need + 1;
				i += need + 1;
				continue;
			}
		}
		out[o++] = '?';
		i++;
	}
	out[o] = '\0';
	return out;
}

/* Reads exactly n digits at *p into *v and advances *p; -1 when they are not there. */
static int read_digits(const char **p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		if (**p < '0' || **p > '9')
			return -1;
		*v = *v * 10 + (**p - '0');
	}
	return 0;
}

int util_time_parse(const char *s, int64_t *epoch_ms)
{
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
	int64_t frac = 0, scale = 100;
	const char *p = s;

	if (!s || read_digits(&p, 4, &y) || *p++ != '-' || read_digits(&p, 2, &mo) || *p++ != '-' ||
	    read_digits(&p, 2, &d) || (*p != 'T' && *p != 't') || !*p++ || read_digits(&p, 2, &h) || *p++ != ':' ||
	    read_digits(&p, 2, &mi) || *p++ != ':' || read_digits(&p, 2, &sec))
		return -1;
	if (mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h > 23 || mi > 59 || sec > 60 || y < 1970)
		return -1;
	if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
		return -1;
	if (*p == '.') {
		if (p[1] < '0' || p[1] > '9')
			return -1;
		for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
			frac += (*p - '0') * scale;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p++ == '-' ? -1 : 1;
		if (read_digits(&p, 2, &oh) || *p++ != ':' || read_digits(&p, 2, &om) || oh > 23 || om > 59)
			return -1;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	/* days since the epoch of a proleptic Gregorian date (Howard Hinnant's days_from_civil) */
	int yy = y - (mo <= 2);
	int64_t era = yy / 400, yoe = yy - era * 400, doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy, days = era * 146097 + doe - 719468;
	int64_t secs = days * 86400 + h * 3600 + mi * 60 + (sec > 59 ? 59 : sec) - (int64_t)sign * (oh * 3600 + om * 60);
	*epoch_ms = secs * 1000 + frac;
	return 0;
}

int util_duration_parse(const char *text, long long max_s, long long *seconds)
{
	static const struct {
		char unit;
		long long seconds;
	} units[] = { { 'w', 7 * 86400 }, { 'd', 86400 }, { 'h', 3600 }, { 'm', 60 }, { 's', 1 } };
	const char *p = text;
	long long total = 0;
	size_t next = 0; /* the first unit a group may still use */

	*seconds = 0;
	if (!p || !*p)
		return -1;
	while (*p) {
		long long n = 0, mult = 0;
		int digits = 0;

		for (; *p >= '0' && *p <= '9'; p++) {
			if (++digits > 12) /* 999999999999 w still fits a long long once multiplied out */
				return -2;
			n = n * 10 + (*p - '0');
		}
		if (digits == 0)
			return -1;
		if (*p == '\0' && next == 0) {
			mult = 1; /* bare seconds, alone */
		} else {
			for (size_t i = next; i < ARRAY_LEN(units) && !mult; i++)
				if (units[i].unit == *p) {
					mult = units[i].seconds;
					next = i + 1;
				}
			if (!mult)
				return -1;
			p++;
		}
		total += n * mult;
		if (total > max_s)
			return -2;
	}
	*seconds = total;
	return 0;
}
