/* FACTS, what a worker reports when a trainer exits (docs/DESIGN.md): the type and range rules that
 * rungd checks at the door of POST /v1/attempts/{id}/finish, so the policy and SQL only ever see
 * well-typed facts. Pure code on jansson values; no I/O. */
#ifndef RUNG_FACTS_H
#define RUNG_FACTS_H

#include <jansson.h>

/* Checks `facts` against the FACTS shape: known keys have the documented types and ranges
 * (unknown keys are allowed, so a newer worker can add facts). Returns 0 when valid; else -1 with
 * *field set to the path of the first problem, prefixed "facts." (e.g. "facts.signatures.cuda_oom"),
 * and *message to a sentence; both heap strings the caller frees. */
int facts_validate(const json_t *facts, char **field, char **message);

#endif
