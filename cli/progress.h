/* The progress line of `rungctl watch`: training speed measured between the last two step reports
 * of an attempt (the worker's heartbeats), never against the time of the redraw, and the ETA that
 * speed gives. Pure code: the caller passes the times. */
#ifndef RUNG_PROGRESS_H
#define RUNG_PROGRESS_H

#include <stdint.h>

struct progress {
	long long step[2];      /* the last two distinct step reports; [1] is the newest */
	int64_t at_ms[2];       /* when each was reported (ms, any epoch, the same for both) */
	int n;                  /* reports held: 0, 1 or 2 */
	long long total;        /* total steps, 0 when unknown */
};

/* Forgets every report (a new attempt starts from nothing). */
void progress_reset(struct progress *p);

/* Notes that step `step` (of `total`, 0 when unknown) was reported at at_ms. The same step as the
 * newest report is not a new report (a redraw, or a heartbeat without progress) and changes nothing;
 * a lower step (the trainer started again) starts over from this report. */
void progress_note(struct progress *p, long long step, long long total, int64_t at_ms);

/* Steps per second between the last two reports, or -1 before there are two. */
double progress_rate(const struct progress *p);

/* Seconds left at that rate from the newest report, or -1 when the rate or the total is unknown. */
double progress_eta_s(const struct progress *p);

/* ", 12.50 steps/s, ETA 2m40s" (or "" before a rate exists) into buf of cap bytes; returns buf. */
char *progress_suffix(const struct progress *p, char *buf, unsigned cap);

/* Parses an ISO 8601 / PostgreSQL timestamp ("2026-11-30T06:00:00.123456+00:00", "... Z", a space
 * for the T) into ms since the epoch. Returns 0, or -1 when s is not one. */
int progress_parse_time(const char *s, int64_t *ms);

#endif
