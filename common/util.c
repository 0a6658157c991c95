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

char *util_json_append(const char *object, const char *members)
{
	size_t n = strlen(object);

	while (n > 0 && object[n - 1] != '}')
		n--;
	if (n < 3 || object[0] != '{')
		return NULL;
	return xasprintf("%.*s, %s}", (int)(n - 1), object, members);
}
