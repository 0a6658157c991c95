/* The build's version (scripts/version.sh: `git describe`, a VERSION file or "unknown", made at
 * build time into build/version_gen.h) and the rule a version string must follow on the wire: what
 * `--version` prints, rungd reports in /healthz and /metrics, and rung-worker registers with. */
#ifndef RUNG_VERSION_H
#define RUNG_VERSION_H

#include <stdbool.h>
#include <stddef.h>

#define RUNG_VERSION_MAX 64 /* bytes of a version: 1..64 printable ASCII characters (0x20-0x7e) */

/* This build's version, e.g. "v1.4.0-12-g3f2a9c1-dirty"; static, never NULL or empty, and always
 * rung_version_valid. */
const char *rung_version(void);

/* Whether s (len bytes, which may hold a NUL) is a version rungd accepts from a worker: 1 to
 * RUNG_VERSION_MAX printable ASCII characters. */
bool rung_version_valid(const char *s, size_t len);

#endif
