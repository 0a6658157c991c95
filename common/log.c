/* Structured key=value logging to stderr; see log.h. A line is written with one
 * fprintf so lines from concurrent processes sharing a file do not interleave mid-line. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static const char *log_prog = "rung";
static enum log_level log_min = LOG_INFO;

void log_init(const char *prog, enum log_level min)
{
	const char *env = getenv("RUNG_LOG_LEVEL");
	log_prog = prog;
	log_min = min;
	if (!env)
		return;
	if (!strcasecmp(env, "debug"))
		log_min = LOG_DEBUG;
	else if (!strcasecmp(env, "info"))
		log_min = LOG_INFO;
	else if (!strcasecmp(env, "warn"))
		log_min = LOG_WARN;
	else if (!strcasecmp(env, "error"))
		log_min = LOG_ERROR;
}

bool log_on(enum log_level lvl)
{
	return lvl >= log_min;
}

void log_msg(enum log_level lvl, const char *msg, const char *fmt, ...)
{
	static const char *names[] = { "debug", "info", "warn", "error" };
	char ts[40], rest[2048];
	struct timespec now;
	struct tm tm;
	va_list ap;

	if (lvl < log_min)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(rest, sizeof rest, fmt, ap);
	va_end(ap);
	fprintf(stderr, "ts=%s.%03ldZ level=%s prog=%s msg=\"%s\"%s%s\n", ts, now.tv_nsec / 1000000,
		names[lvl], log_prog, msg, rest[0] ? " " : "", rest);
}
