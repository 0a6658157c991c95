/* A tiny TAP-like harness for unit tests: each check prints `ok - NAME` or `not ok - NAME`
 * (with file:line and the failed expression); tests/run.sh counts the lines. */
#ifndef RUNG_TAP_H
#define RUNG_TAP_H

#include <stdio.h>
#include <string.h>

static int tap_failed;

#define TAP_OK(cond, name) do { \
	if (cond) { printf("ok - %s\n", (name)); } \
	else { tap_failed++; printf("not ok - %s\n#   %s:%d: %s\n", (name), __FILE__, __LINE__, #cond); } \
	fflush(stdout); } while (0)
#define TAP_STR_EQ(got, want, name) do { const char *g_ = (got), *w_ = (want); \
	int ok_ = g_ && w_ ? !strcmp(g_, w_) : g_ == w_; \
	if (ok_) { printf("ok - %s\n", (name)); } \
	else { tap_failed++; printf("not ok - %s\n#   %s:%d: got \"%s\" want \"%s\"\n", (name), __FILE__, \
		__LINE__, g_ ? g_ : "(null)", w_ ? w_ : "(null)"); } fflush(stdout); } while (0)
#define TAP_INT_EQ(got, want, name) do { long long g_ = (long long)(got), w_ = (long long)(want); \
	if (g_ == w_) { printf("ok - %s\n", (name)); } \
	else { tap_failed++; printf("not ok - %s\n#   %s:%d: got %lld want %lld\n", (name), __FILE__, \
		__LINE__, g_, w_); } fflush(stdout); } while (0)
#define TAP_DONE() (tap_failed ? 1 : 0)

#endif
