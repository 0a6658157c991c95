/* How long a token may live (migrations/023_token_expiry.sql): the bounds of POST /v1/tokens's
 * "expires_in_s" and the DURATION text that `rungctl token create --expires` and `rungd token
 * create --expires` take ("90d", "12h", "1h30m", "3600s", or bare seconds). The one place both are
 * written, for rungd, rungctl and the tests. Pure. */
#ifndef RUNG_EXPIRY_H
#define RUNG_EXPIRY_H

#define EXPIRY_MIN_S 60LL         /* a minute: shorter would expire before it could be handed over */
#define EXPIRY_MAX_S 315360000LL  /* 3650 days (ten years of 365 days) */

/* Parses DURATION (util_duration_parse: "90d", "12h", "1h30m", "2w", or bare seconds) into
 * *seconds, which must lie in [EXPIRY_MIN_S, EXPIRY_MAX_S].
 * Returns 0, or -1 with *why (static text, for a usage line) saying what is wrong: not a
 * duration, too short or too long. */
int expiry_parse(const char *text, long long *seconds, const char **why);

#endif
