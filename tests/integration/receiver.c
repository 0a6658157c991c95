/* The tests' webhook receiver (receiver.h). Owns its thread, event base and what it recorded. */
#include "receiver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "util.h"

static void recv_on_request(struct evhttp_request *req, void *arg)
{
	struct receiver *r = arg;
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	char *body = xmalloc(len + 1);
	int n;

	evbuffer_remove(in, body, len);
	body[len] = '\0';
	pthread_mutex_lock(&r->mu);
	n = r->got++;
	if (n < RECV_MAX) {
		r->bodies[n] = body;
		r->paths[n] = xstrdup(evhttp_request_get_uri(req));
		r->agents[n] = xstrdup(evhttp_find_header(evhttp_request_get_input_headers(req), "User-Agent") ?: "");
	} else {
		free(body);
	}
	pthread_mutex_unlock(&r->mu);
	evhttp_send_reply(req, n < r->fail_first ? 503 : 204, NULL, NULL);
}

static void recv_on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct receiver *r = arg;

	(void)fd;
	(void)what;
	if (atomic_load(&r->stop))
		event_base_loopbreak(r->base);
}

static void *recv_run(void *arg)
{
	struct receiver *r = arg;
	struct timeval every = { 0, 20000 };
	struct event *tick = event_new(r->base, -1, EV_PERSIST, recv_on_tick, r);

	event_add(tick, &every);
	event_base_dispatch(r->base);
	event_free(tick);
	return NULL;
}

/* A loopback port nobody listens on (connections to it are refused until recv_start). */
int unused_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &al) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

int recv_start(struct receiver *r)
{
	r->base = event_base_new();
	r->http = evhttp_new(r->base);
	if (evhttp_bind_socket(r->http, "127.0.0.1", (ev_uint16_t)r->port) != 0)
		return -1;
	evhttp_set_gencb(r->http, recv_on_request, r);
	if (pthread_create(&r->thread, NULL, recv_run, r) != 0)
		return -1;
	r->running = true;
	return 0;
}

void recv_stop(struct receiver *r)
{
	if (r->running) {
		atomic_store(&r->stop, true);
		pthread_join(r->thread, NULL);
	}
	if (r->http)
		evhttp_free(r->http);
	if (r->base)
		event_base_free(r->base);
	for (int i = 0; i < RECV_MAX; i++) {
		free(r->bodies[i]);
		free(r->paths[i]);
		free(r->agents[i]);
	}
	pthread_mutex_destroy(&r->mu);
}

int recv_count(struct receiver *r)
{
	int n;

	pthread_mutex_lock(&r->mu);
	n = r->got;
	pthread_mutex_unlock(&r->mu);
	return n;
}


bool recv_has(void *arg)
{
	struct recv_wait *w = arg;
	return recv_count(w->r) >= w->n;
}

