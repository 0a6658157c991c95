/* The caller of a request as auth.c establishes it (role, token, name, the worker a route names),
 * carried in each struct hreq: the vocabulary that http.h and auth.h share, so that http.h need
 * not include auth.h. Types only; no code. */
#ifndef RUNG_AUTH_WHO_H
#define RUNG_AUTH_WHO_H

#include <stdint.h>

#define AUTH_NAME_MAX 64 /* token names: 1..64 bytes of [A-Za-z0-9._@-] */

/* Roles, usable as bits in a route's allowed set. */
enum auth_role {
	AUTH_NONE = 0,
	AUTH_SUBMITTER = 1 << 0, /* submits; sees and cancels only its own jobs */
	AUTH_WORKER = 1 << 1,    /* registers, leases, heartbeats and finishes only its own attempts */
	AUTH_SUPPORT = 1 << 2,   /* reads everything, acks/resolves escalations, releases GPUs */
	AUTH_ADMIN = 1 << 3,     /* everything, and tokens */
};

/* The caller, filled in by the router's guard (auth_dispatch) before the handler runs (zeroed
 * on open routes). */
struct auth_who {
	enum auth_role role;
	long long token_id;
	int64_t expires_ms;       /* monotonic instant the token expires (INT64_MAX: never) */
	char name[AUTH_NAME_MAX + 1];
	int worker_gpus;          /* AUTH_SCOPE_WORKER: GPUs of the worker named by the route */
	long long parked_worker;  /* set by auth_park_enter, released when the request is answered */
};

#endif
