/* Handlers of /v1/attempts: heartbeat and finish, both fenced by the attempt's token. Finish
 * builds the CTX, runs the policy (and the report on escalation) and applies the DECISION. */
#ifndef RUNG_API_ATTEMPTS_H
#define RUNG_API_ATTEMPTS_H

#include <jansson.h>
#include <stdbool.h>

struct hreq;

/* Each handler answers h exactly once. */
void api_attempts_heartbeat(struct hreq *h);
void api_attempts_finish(struct hreq *h);

/* Whether a finish with these FACTS (borrowed) needs no memory section in its CTX when the attempt
 * ran the job's target config: the FACTS classify as "success" or "cancelled" (classify_run's
 * first two rules, which read the FACTS alone, so the policy's class is the same). A success at
 * the target ends the job without a scale-up walk (policy.c scale_next) and a cancelled attempt
 * never reaches the policy, so neither reads ctx.memory; rung_finish_ctx_batch decides the rest
 * (sql/functions/60_finish_ctx_batch.sql). */
bool api_attempts_plain_finish(const json_t *facts);

#endif
