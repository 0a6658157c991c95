/* A webhook receiver for integration tests: a small evhttp server on its own thread that records
 * what is sent to it (bodies, paths and User-Agent headers) and answers the first `fail_first` POSTs 503, the rest
 * 204. Used by it_ops (escalations) and it_jobhook (jobs that ended). */
#ifndef RUNG_TEST_RECEIVER_H
#define RUNG_TEST_RECEIVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define RECV_MAX 16

/* The webhook receiver: answers the first `fail_first` POSTs 503, the rest 204. To use one: zero
 * it, set port (unused_port) and fail_first, pthread_mutex_init(&mu), then recv_start; recv_stop
 * joins the thread and frees what was recorded. */
struct receiver {
	int port;
	int fail_first;
	pthread_t thread;
	atomic_bool stop;
	pthread_mutex_t mu;
	int got;                  /* POSTs received */
	char *bodies[RECV_MAX];   /* their bodies */
	char *paths[RECV_MAX];
	char *agents[RECV_MAX];   /* their User-Agent headers ("" when none) */
	struct event_base *base;
	struct evhttp *http;
	bool running;             /* the thread was started */
};

/* A loopback port nobody listens on (connections to it are refused until recv_start). */
int unused_port(void);
/* Starts listening on r->port on a thread of its own. 0, or -1. */
int recv_start(struct receiver *r);
/* Stops the thread (when started), frees the server and the recorded bodies; destroys mu. */
void recv_stop(struct receiver *r);
/* POSTs received so far (thread-safe). */
int recv_count(struct receiver *r);

/* For wait_until: true once the receiver got at least n POSTs. */
struct recv_wait {
	struct receiver *r;
	int n;
};
bool recv_has(void *arg);

#endif
