/* Handlers of /v1/attempts: heartbeat and finish, both fenced by the attempt's token. Finish
 * builds the CTX, runs the policy (and the report on escalation) and applies the DECISION. */
#ifndef RUNG_API_ATTEMPTS_H
#define RUNG_API_ATTEMPTS_H

struct hreq;

/* Each handler answers h exactly once. */
void api_attempts_heartbeat(struct hreq *h);
void api_attempts_finish(struct hreq *h);

#endif
