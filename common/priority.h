/* A job's priority: lower runs first. The one place its range and default are written, for rungd (a
 * submit's "priority", POST /v1/jobs/{id}/priority, --preempt-priority), rungctl (--priority, the
 * jobs list) and the web queue page. Pure. */
#ifndef RUNG_PRIORITY_H
#define RUNG_PRIORITY_H

#include <jansson.h>
#include <stdbool.h>

#define PRIORITY_MIN (-1000000)
#define PRIORITY_MAX 1000000
#define PRIORITY_DEFAULT 100 /* a job submitted without one; --preempt-priority stays below it */

/* Whether a job of JOBS (a JSON array of JOBs, borrowed; NULL: none) has an integer "priority" other
 * than PRIORITY_DEFAULT: the jobs lists then show a priority column. */
bool priority_any_other(const json_t *jobs);

#endif
