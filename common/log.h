/* Structured logging shared by every rung binary: one line per event, key=value pairs,
 * to stderr. Owns the process-wide program name and minimum level; nothing else. */
#ifndef RUNG_LOG_H
#define RUNG_LOG_H

#include <stdbool.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

/* Sets the program name printed on every line (borrowed: must outlive the process) and the
 * minimum level; RUNG_LOG_LEVEL=debug|info|warn|error in the environment overrides it. */
void log_init(const char *prog, enum log_level min);

/* Prints `ts=... level=... prog=... msg="MSG" ` followed by FMT, which should be key=value pairs,
 * e.g. log_info("lease granted", "job=%lld attempt=%lld", job, attempt). Never fails. */
void log_msg(enum log_level lvl, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Whether a line at lvl would be printed: lets a caller skip work done only for a log line. */
bool log_on(enum log_level lvl);

#define log_debug(msg, ...) log_msg(LOG_DEBUG, msg, __VA_ARGS__)
#define log_info(msg, ...)  log_msg(LOG_INFO, msg, __VA_ARGS__)
#define log_warn(msg, ...)  log_msg(LOG_WARN, msg, __VA_ARGS__)
#define log_error(msg, ...) log_msg(LOG_ERROR, msg, __VA_ARGS__)

#endif
