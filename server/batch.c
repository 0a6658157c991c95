/* The coalescer: a FIFO of waiting items, a flush event on the loop, and the statements in
 * flight. Owns the item array and JSON text of each statement; a statement that loses a deadlock
 * (40P01) or a serialization check (40001) is run again as it was, a few times. */
#include "batch.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "db.h"
#include "log.h"
#include "util.h"

#define BATCH_RETRIES 3

struct batch_node {
	struct batch_node *next;
	void *item;
	long long key;
};

struct batch {
	struct event_base *base;
	struct db *db;
	const struct batch_ops *ops;
	void *arg;
	int max_items, max_inflight;
	int min_fill;             /* items that must wait before a statement goes out beside another */
	char *param2;
	struct batch_node *head, *tail;
	int waiting, inflight;
	struct event *flush;      /* sends the next batch on the next loop pass */
	long long *keys;          /* open-addressing set of the keys in the batch being built */
	size_t nkeys;             /* its size, a power of two >= 2 * max_items */
};

struct batch_stmt {
	struct batch *b;
	void **items;
	int n;
	char *json;
	int retries;
	bool split;               /* one item of a failed statement, outside the in-flight count */
};

struct order_ent {
	long long key;
	int pos;
	void *item;
};

static int order_cmp(const void *a, const void *b)
{
	const struct order_ent *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->pos - y->pos;
}

/* The statement's JSON array, "i" = position. */
static char *stmt_json(const struct batch *b, void **items, int n)
{
	json_t *arr;
	char *s;

	if (b->ops->item_text) { /* [{"i":0,<the object's members>},...] */
		size_t cap = 2, len = 0;
		for (int i = 0; i < n; i++)
			cap += strlen(b->ops->item_text(items[i])) + 24;
		s = xmalloc(cap + 1);
		s[len++] = '[';
		for (int i = 0; i < n; i++) {
			const char *t = b->ops->item_text(items[i]);
			t += strspn(t, " \t\r\n");
			if (*t == '{')
				t++;
			t += strspn(t, " \t\r\n");
			len += (size_t)snprintf(s + len, cap + 1 - len, "%s{\"i\":%d%s%s", i ? "," : "", i, *t == '}' ? "" : ",",
						t);
		}
		s[len++] = ']';
		s[len] = '\0';
		return s;
	}
	arr = json_array();
	for (int i = 0; i < n; i++) {
		json_t *o = b->ops->item_json(items[i]);
		json_object_set_new(o, "i", json_integer(i));
		json_array_append_new(arr, o);
	}
	s = json_dumps(arr, JSON_COMPACT);
	json_decref(arr);
	return s;
}

/* Whether the next batch may go out now: always when nothing is in flight; beside statements in
 * flight only under max_inflight and once min_fill items wait (a few items are better sent with
 * the ones that arrive while the statement in flight runs than as a statement of their own). */
static bool can_send(const struct batch *b)
{
	return b->head && b->inflight < b->max_inflight && (b->inflight == 0 || b->waiting >= b->min_fill);
}

static void batch_schedule(struct batch *b)
{
	if (can_send(b) && !event_pending(b->flush, EV_TIMEOUT, NULL))
		event_active(b->flush, EV_TIMEOUT, 0);
}

static void stmt_exec(struct batch_stmt *s);

static void on_stmt(PGresult *res, const char *err, void *arg)
{
	struct batch_stmt *s = arg;
	struct batch *b = s->b;
	const char *st = res && PQresultStatus(res) == PGRES_FATAL_ERROR ? PQresultErrorField(res, PG_DIAG_SQLSTATE)
									   : NULL;

	if (st && (strcmp(st, "40P01") == 0 || strcmp(st, "40001") == 0) && s->retries < BATCH_RETRIES) {
		s->retries++;
		log_warn("batch retried", "items=%d sqlstate=%s retry=%d", s->n, st, s->retries);
		stmt_exec(s);
		return;
	}
	if (st && s->n > 1 && strncmp(st, "08", 2) != 0 && strncmp(st, "57", 2) != 0 && strncmp(st, "53", 2) != 0) {
		log_warn("batch split", "items=%d sqlstate=%s error=\"%s\"", s->n, st,
			 PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) ?: "?");
		for (int i = 0; i < s->n; i++) {
			struct batch_stmt *one = xcalloc(1, sizeof *one);
			one->b = b;
			one->items = xcalloc(1, sizeof *one->items);
			one->items[0] = s->items[i];
			one->n = 1;
			one->split = true;
			one->json = stmt_json(b, one->items, 1);
			stmt_exec(one);
		}
		b->inflight--;
		free(s->items);
		free(s->json);
		free(s);
		batch_schedule(b);
		return;
	}
	if (!s->split)
		b->inflight--;
	b->ops->done(s->items, s->n, res, err, b->arg);
	free(s->items);
	free(s->json);
	free(s);
	batch_schedule(b);
}

static void stmt_exec(struct batch_stmt *s)
{
	const char *params[2] = { s->json, s->b->param2 };

	db_exec(s->b->db, s->b->ops->sql, s->b->param2 ? 2 : 1, params, on_stmt, s);
}

/* Adds key to the set; false when it is already there. */
static bool key_take(struct batch *b, long long key)
{
	size_t mask = b->nkeys - 1, i = (size_t)((uint64_t)key * 0x9E3779B97F4A7C15ull >> 17) & mask;

	for (; b->keys[i] >= 0; i = (i + 1) & mask)
		if (b->keys[i] == key)
			return false;
	b->keys[i] = key;
	return true;
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct batch *b = arg;
	struct batch_stmt *s;
	struct batch_node **pp, *node, *prev = NULL;
	bool keyed = false;

	(void)fd;
	(void)what;
	if (!can_send(b))
		return;
	s = xcalloc(1, sizeof *s);
	s->b = b;
	s->items = xcalloc((size_t)b->max_items, sizeof *s->items);
	for (pp = &b->head; (node = *pp) && s->n < b->max_items;) {
		if (node->key >= 0) {
			if (!keyed) {
				memset(b->keys, 0xff, b->nkeys * sizeof *b->keys);
				keyed = true;
			}
			if (!key_take(b, node->key)) {
				prev = node; /* same key already in this batch: the next one takes it */
				pp = &node->next;
				continue;
			}
		}
		*pp = node->next;
		if (b->tail == node)
			b->tail = prev;
		b->waiting--;
		s->items[s->n++] = node->item;
		free(node);
	}
	if (b->ops->order && s->n > 1) {
		struct order_ent *e = xcalloc((size_t)s->n, sizeof *e);
		for (int i = 0; i < s->n; i++)
			e[i] = (struct order_ent){ b->ops->order(s->items[i]), i, s->items[i] };
		qsort(e, (size_t)s->n, sizeof *e, order_cmp);
		for (int i = 0; i < s->n; i++)
			s->items[i] = e[i].item;
		free(e);
	}
	s->json = stmt_json(b, s->items, s->n);
	log_debug("batch sent", "items=%d waiting=%d bytes=%zu", s->n, b->waiting, strlen(s->json));
	b->inflight++;
	stmt_exec(s);
	batch_schedule(b);
}

struct batch *batch_new(struct event_base *base, struct db *db, const struct batch_ops *ops, void *arg,
			int max_items, int max_inflight, const char *param2)
{
	struct batch *b;

	if (!base || !db || !ops || max_items < 1 || max_inflight < 1)
		return NULL;
	b = xcalloc(1, sizeof *b);
	b->base = base;
	b->db = db;
	b->ops = ops;
	b->arg = arg;
	b->max_items = max_items;
	b->max_inflight = max_inflight;
	b->min_fill = 1;
	b->param2 = param2 ? xstrdup(param2) : NULL;
	for (b->nkeys = 16; b->nkeys < 2 * (size_t)max_items; b->nkeys *= 2)
		;
	b->keys = xcalloc(b->nkeys, sizeof *b->keys);
	b->flush = event_new(base, -1, 0, on_flush, b);
	if (!b->flush)
		abort();
	return b;
}

void batch_free(struct batch *b)
{
	struct batch_node *node;

	if (!b)
		return;
	while ((node = b->head)) {
		void *item = node->item;
		b->head = node->next;
		free(node);
		b->ops->done(&item, 1, NULL, "shutting down", b->arg);
	}
	event_free(b->flush);
	free(b->keys);
	free(b->param2);
	free(b);
}

void batch_add(struct batch *b, void *item, long long key)
{
	struct batch_node *node = xcalloc(1, sizeof *node);

	node->item = item;
	node->key = key;
	if (b->tail)
		b->tail->next = node;
	else
		b->head = node;
	b->tail = node;
	b->waiting++;
	batch_schedule(b);
}

void batch_set_min_fill(struct batch *b, int n)
{
	b->min_fill = n < 1 ? 1 : n;
	batch_schedule(b);
}

void batch_stats(const struct batch *b, int *inflight, int *waiting)
{
	if (inflight)
		*inflight = b ? b->inflight : 0;
	if (waiting)
		*waiting = b ? b->waiting : 0;
}

int batch_row_index(const PGresult *res, int r, int n)
{
	const char *v;
	char *end;
	long i;

	if (r < 0 || r >= PQntuples(res) || PQgetisnull(res, r, 0))
		return -1;
	v = PQgetvalue(res, r, 0);
	i = strtol(v, &end, 10);
	if (end == v || *end || i < 0 || i >= n)
		return -1;
	return (int)i;
}

int *batch_rows(const PGresult *res, int n)
{
	int *row = xmalloc(((size_t)n + 1) * sizeof *row);

	for (int i = 0; i < n; i++)
		row[i] = -1;
	for (int r = 0; r < PQntuples(res); r++) {
		int i = batch_row_index(res, r, n);
		if (i >= 0)
			row[i] = r;
	}
	return row;
}
