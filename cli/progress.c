/* watch's progress arithmetic (see progress.h): two step reports make a rate, the rate and the
 * steps left make an ETA, and server timestamps are read into milliseconds. No I/O. */
#include "progress.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void progress_reset(struct progress *p)
{
	memset(p, 0, sizeof(*p));
}

void progress_note(struct progress *p, long long step, long long total, int64_t at_ms)
{
	if (total > 0)
		p->total = total;
	if (p->n > 0 && step == p->step[1])
		return;
	if (p->n > 0 && step < p->step[1])
		p->n = 0;
	if (p->n == 2 || p->n == 1) {
		p->step[0] = p->step[1];
		p->at_ms[0] = p->at_ms[1];
		p->n = 2;
	} else {
		p->n = 1;
	}
	p->step[1] = step;
	p->at_ms[1] = at_ms;
}

double progress_rate(const struct progress *p)
{
	if (p->n < 2 || p->at_ms[1] <= p->at_ms[0] || p->step[1] <= p->step[0])
		return -1;
	return (double)(p->step[1] - p->step[0]) * 1000.0 / (double)(p->at_ms[1] - p->at_ms[0]);
}

double progress_eta_s(const struct progress *p)
{
	double r = progress_rate(p);

	if (r <= 0 || p->total <= 0)
		return -1;
	return p->total > p->step[1] ? (double)(p->total - p->step[1]) / r : 0;
}

char *progress_suffix(const struct progress *p, char *buf, unsigned cap)
{
	double r = progress_rate(p), eta = progress_eta_s(p);
	int n;

	buf[0] = '\0';
	if (r <= 0)
		return buf;
	n = snprintf(buf, cap, ", %.2f steps/s", r);
	if (eta >= 0 && n >= 0 && (unsigned)n < cap) {
		long long s = (long long)(eta + 0.5);
		if (s >= 3600)
			snprintf(buf + n, cap - (unsigned)n, ", ETA %lldh%02lldm", s / 3600, s / 60 % 60);
		else if (s >= 60)
			snprintf(buf + n, cap - (unsigned)n, ", ETA %lldm%02llds", s / 60, s % 60);
		else
			snprintf(buf + n, cap - (unsigned)n, ", ETA %llds", s);
	}
	return buf;
}

int progress_parse_time(const char *s, int64_t *ms)
{
	struct tm tm;
	int y, mo, d, h, mi, sec, used = 0;
	long frac_ms = 0, off_min = 0;

	if (!s || sscanf(s, "%4d-%2d-%2d%*1[T ]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6 || !used)
		return -1;
	s += used;
	if (*s == '.') {
		long scale = 100;
		for (s++; isdigit((unsigned char)*s); s++, scale /= 10)
			frac_ms += scale > 0 ? (*s - '0') * scale : 0;
	}
	if (*s == '+' || *s == '-') {
		int oh = 0, om = 0, sign = *s == '-' ? -1 : 1;
		if (sscanf(s + 1, "%2d:%2d", &oh, &om) < 1 && sscanf(s + 1, "%2d%2d", &oh, &om) < 1)
			return -1;
		off_min = sign * (oh * 60 + om);
	} else if (*s != 'Z' && *s != '\0') {
		return -1;
	}
	memset(&tm, 0, sizeof(tm));
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	*ms = ((int64_t)timegm(&tm) - (int64_t)off_min * 60) * 1000 + frac_ms;
	return 0;
}
