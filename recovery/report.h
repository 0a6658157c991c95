/* Escalation reports for support: turns a CTX and the DECISION that escalated into a Markdown
 * page and a JSON document. Pure code, no I/O. */
#ifndef RUNG_REPORT_H
#define RUNG_REPORT_H

#include <jansson.h>

/* Returns a new object {"markdown": STRING, "json": {...}} describing the job, target vs last
 * config, a table of attempts (worker, GPU, phase, step, class, action), the evidence, GPU state
 * snapshots, the last 40 log lines of each failed attempt and the recommended next step.
 * Borrows both arguments; the caller owns the result. Never returns NULL. */
json_t *report_build(const json_t *ctx, const json_t *decision);

#endif
