/* Authentication and authorisation of rungd (see auth.h): SHA-256, token shapes, the role table,
 * the router's check (bearer token -> cached identity or one async lookup, expiry, role, ownership
 * of the route's object, remembered once owned), and the per-caller abuse limits (submit token
 * bucket, parked long-polls per worker, JSON nesting depth). Tokens are created and revoked in
 * api_tokens.c. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "app.h"
#include "auth.h"
#include "db.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "sql.h"
#include "util.h"

#define AUTH_MEMO_MAX 65536 /* ownership answers kept, all tokens and scopes; past it the memo restarts */
_Static_assert(AUTH_SCOPE_ATTEMPT == 3 && AUTH_SCOPE_WORKER < AUTH_SCOPE_ATTEMPT && AUTH_SCOPE_JOB < AUTH_SCOPE_ATTEMPT,
	       "the memo's hash packs a scope in 2 bits");

/* rung_auth_owner_checks_total{scope, source}: the samples auth registers in metrics.h and pushes
 * into, by owner_sample(). */
static const char *const owner_l0[] = { "scope", "job", "source", "query", NULL };
static const char *const owner_l1[] = { "scope", "job", "source", "memo", NULL };
static const char *const owner_l2[] = { "scope", "attempt", "source", "query", NULL };
static const char *const owner_l3[] = { "scope", "attempt", "source", "memo", NULL };
static const char *const owner_l4[] = { "scope", "worker", "source", "query", NULL };
static const char *const owner_l5[] = { "scope", "worker", "source", "memo", NULL };
static const char *const *const owner_labels[] = { owner_l0, owner_l1, owner_l2, owner_l3, owner_l4, owner_l5 };

static size_t owner_sample(enum auth_scope scope, bool memo)
{
	size_t s = scope == AUTH_SCOPE_JOB ? 0 : scope == AUTH_SCOPE_ATTEMPT ? 1 : 2;

	return s * 2 + (memo ? 1 : 0);
}

/* ---- SHA-256 (FIPS 180-4) ---- */

static const uint32_t sha_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
	return (x >> n) | (x << (32 - n));
}

static void sha_block(uint32_t st[8], const uint8_t *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, h;

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
		       (uint32_t)p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = st[0], b = st[1], c = st[2], d = st[3], e = st[4], f = st[5], g = st[6], h = st[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = h + (ror(e, 6) ^ ror(e, 11) ^ ror(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
		uint32_t t2 = (ror(a, 2) ^ ror(a, 13) ^ ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		h = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
	}
	st[0] += a, st[1] += b, st[2] += c, st[3] += d, st[4] += e, st[5] += f, st[6] += g, st[7] += h;
}

void auth_sha256(const void *data, size_t len, uint8_t out[32])
{
	uint32_t st[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
			   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
	const uint8_t *p = data;
	uint8_t last[128] = { 0 };
	size_t full = len / 64 * 64, rest = len - full, tail;
	uint64_t bits = (uint64_t)len * 8;

	for (size_t i = 0; i < full; i += 64)
		sha_block(st, p + i);
	if (rest)
		memcpy(last, p + full, rest);
	last[rest] = 0x80;
	tail = rest + 1 + 8 <= 64 ? 64 : 128;
	for (int i = 0; i < 8; i++)
		last[tail - 1 - i] = (uint8_t)(bits >> (8 * i));
	sha_block(st, last);
	if (tail == 128)
		sha_block(st, last + 64);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(st[i] >> 24);
		out[4 * i + 1] = (uint8_t)(st[i] >> 16);
		out[4 * i + 2] = (uint8_t)(st[i] >> 8);
		out[4 * i + 3] = (uint8_t)st[i];
	}
}

static void hex(const uint8_t *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

void auth_hash_hex(const char *s, char out[AUTH_HASH_HEX + 1])
{
	uint8_t d[32];

	auth_sha256(s, strlen(s), d);
	hex(d, sizeof d, out);
}

/* ---- tokens, names, roles ---- */

int auth_token_new(char out[AUTH_TOKEN_LEN + 1])
{
	uint8_t r[AUTH_TOKEN_BYTES];
	size_t got = 0;

	while (got < sizeof r) {
		ssize_t n = getrandom(r + got, sizeof r - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		got += (size_t)n;
	}
	memcpy(out, AUTH_TOKEN_PREFIX, 5);
	hex(r, sizeof r, out + 5);
	return 0;
}

bool auth_token_wellformed(const char *s)
{
	if (!s || strlen(s) != AUTH_TOKEN_LEN || strncmp(s, AUTH_TOKEN_PREFIX, 5) != 0)
		return false;
	for (const char *p = s + 5; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

bool auth_name_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > AUTH_NAME_MAX)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("._@-", *s))
			return false;
	return true;
}

bool auth_name_new_ok(const char *s)
{
	if (!auth_name_valid(s))
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return true;
	return false;
}

static const struct {
	enum auth_role role;
	const char *name;
} role_names[] = {
	{ AUTH_SUBMITTER, "submitter" },
	{ AUTH_WORKER, "worker" },
	{ AUTH_SUPPORT, "support" },
	{ AUTH_ADMIN, "admin" },
};

const char *auth_role_name(enum auth_role r)
{
	for (size_t i = 0; i < ARRAY_LEN(role_names); i++)
		if (role_names[i].role == r)
			return role_names[i].name;
	return "none";
}

enum auth_role auth_role_parse(const char *s)
{
	for (size_t i = 0; s && i < ARRAY_LEN(role_names); i++)
		if (strcmp(role_names[i].name, s) == 0)
			return role_names[i].role;
	return AUTH_NONE;
}

/* ---- limits ---- */

bool auth_bucket_take(struct auth_bucket *b, double rate, double burst, int64_t now_ms, int64_t *retry_ms)
{
	*retry_ms = 0;
	if (!b->primed) {
		b->primed = true;
		b->tokens = burst;
		b->last_ms = now_ms;
	}
	if (now_ms > b->last_ms) {
		b->tokens += rate * (double)(now_ms - b->last_ms) / 1000.0;
		if (b->tokens > burst)
			b->tokens = burst;
		b->last_ms = now_ms;
	}
	if (b->tokens >= 1.0) {
		b->tokens -= 1.0;
		return true;
	}
	*retry_ms = (int64_t)ceil((1.0 - b->tokens) * 1000.0 / rate);
	if (*retry_ms < 1)
		*retry_ms = 1;
	return false;
}

void auth_bucket_charge(struct auth_bucket *b, double n)
{
	if (n > 0)
		b->tokens -= n;
}

int auth_json_depth(const char *buf, size_t len, int cap)
{
	int depth = 0, max = 0;
	bool in_str = false;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"') {
			in_str = true;
		} else if (c == '[' || c == '{') {
			if (++depth > max) {
				max = depth;
				if (max > cap)
					return cap + 1;
			}
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		}
	}
	return max;
}

/* ---- state: verified tokens, parked long-polls ---- */

struct auth_entry {
	char hash[AUTH_HASH_HEX + 1];
	long long token_id;
	enum auth_role role;
	char name[AUTH_NAME_MAX + 1];
	int64_t verified_ms;          /* monotonic time of the last successful lookup */
	int64_t expires_ms;           /* monotonic instant the token expires (INT64_MAX: never), checked
				       * at every request */
	char expires_at[AUTH_EXPIRES_TEXT]; /* that instant as the database wrote it, "" when never */
	struct auth_bucket submit;    /* kept across re-verifications */
};

struct auth_park {
	long long worker_id;
	int count;
};

/* An ownership answer: the token owns the object (refusals are not kept), and a worker has `gpus`
 * GPUs. A job's owner never changes, nor the worker an attempt is leased to, so these answers are
 * kept as long as the token stays cached; an attempt is owned through its worker's token, and a
 * worker's owner and GPUs change with a registration, so both are forgotten when that worker
 * registers here, and a worker answer, which other replicas' registrations do not reach, is
 * trusted for AUTH_CACHE_TTL_MS like the token itself. scope AUTH_SCOPE_NONE marks an empty slot,
 * at_ms -1 a stale answer. */
struct auth_memo {
	long long token_id, object_id;
	long long worker_id; /* the worker the answer depends on (itself, an attempt's), or 0 */
	enum auth_scope scope;
	int gpus;
	int64_t at_ms; /* when the query that read it was sent */
};

struct auth {
	struct app *app;
	int submit_rate;
	struct auth_entry **entries;
	size_t n, cap;
	struct auth_memo *memo;       /* by (token, scope, object): open addressing, at most half full */
	size_t memo_n, memo_cap;
	unsigned long long memo_gen;  /* bumped by every invalidation: a worker or attempt answer read
				       * before it is not kept */
	struct metrics_family *owner_checks; /* by scope and source (owner_sample) */
	struct auth_park *parks;
	size_t nparks, parks_cap;
};

struct auth *auth_new(struct app *app, int submit_rate)
{
	struct auth *a = xcalloc(1, sizeof *a);

	a->app = app;
	a->submit_rate = submit_rate > 0 ? submit_rate : AUTH_SUBMIT_RATE_DEFAULT;
	a->owner_checks = metrics_register(app ? app->metrics : NULL, "rung_auth_owner_checks_total", "counter",
		"Ownership checks of the job, attempt or worker a route names, by how they were answered.",
		ARRAY_LEN(owner_labels), owner_labels);
	return a;
}

void auth_free(struct auth *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->n; i++)
		free(a->entries[i]);
	free(a->entries);
	free(a->memo);
	free(a->parks);
	free(a);
}

static struct auth_entry *entry_find(struct auth *a, const char *hash)
{
	for (size_t i = 0; a && i < a->n; i++)
		if (strcmp(a->entries[i]->hash, hash) == 0)
			return a->entries[i];
	return NULL;
}

/* The entry of hash and what it says at now_ms (auth_cache_get); NULL with AUTH_CACHED_MISS when
 * there is none. */
static struct auth_entry *cache_find(struct auth *a, const char *hash, int64_t now_ms, enum auth_cached *verdict)
{
	struct auth_entry *e = entry_find(a, hash);

	if (!e || now_ms - e->verified_ms >= AUTH_CACHE_TTL_MS)
		*verdict = AUTH_CACHED_MISS;
	else if (now_ms >= e->expires_ms)
		*verdict = AUTH_CACHED_EXPIRED;
	else
		*verdict = AUTH_CACHED_LIVE;
	return e;
}

enum auth_cached auth_cache_get(struct auth *a, const char *hash, int64_t now_ms)
{
	enum auth_cached verdict;

	cache_find(a, hash, now_ms, &verdict);
	return verdict;
}

/* auth_cache_put, returning the entry (owned by a). */
static struct auth_entry *cache_put(struct auth *a, const char *hash, long long token_id, const char *name,
				    enum auth_role role, int64_t expires_ms, const char *expires_at, int64_t now_ms)
{
	struct auth_entry *e = entry_find(a, hash);

	if (!e) {
		if (a->n == a->cap) {
			a->cap = a->cap ? 2 * a->cap : 16;
			a->entries = xrealloc(a->entries, a->cap * sizeof *a->entries);
		}
		e = xcalloc(1, sizeof *e);
		snprintf(e->hash, sizeof e->hash, "%s", hash);
		a->entries[a->n++] = e;
	}
	e->token_id = token_id;
	snprintf(e->name, sizeof e->name, "%s", name ? name : "");
	e->role = role;
	e->verified_ms = now_ms;
	e->expires_ms = expires_ms;
	snprintf(e->expires_at, sizeof e->expires_at, "%s", expires_at ? expires_at : "");
	return e;
}

void auth_cache_put(struct auth *a, const char *hash, long long token_id, const char *name, enum auth_role role,
		    int64_t expires_ms, const char *expires_at, int64_t now_ms)
{
	cache_put(a, hash, token_id, name, role, expires_ms, expires_at, now_ms);
}

/* ---- the ownership memo ---- */

static size_t memo_home(long long token_id, enum auth_scope scope, long long id, size_t mask)
{
	uint64_t v = (uint64_t)id * 0x9E3779B97F4A7C15ull ^
		     ((uint64_t)token_id << 2 | (uint64_t)scope) * 0xC2B2AE3D27D4EB4Full;

	return (size_t)(v >> 17) & mask;
}

/* The memo slot of (token, scope, object): the one holding it, else (insert) a free one claimed for
 * it, else NULL. */
static struct auth_memo *memo_slot(struct auth *a, long long token_id, enum auth_scope scope, long long id,
				   bool insert)
{
	size_t mask, i;

	if (insert && 2 * (a->memo_n + 1) > a->memo_cap) {
		struct auth_memo *old = a->memo;
		size_t old_cap = a->memo_cap;
		bool restart = a->memo_n >= AUTH_MEMO_MAX;
		a->memo_cap = restart ? a->memo_cap : old_cap ? 2 * old_cap : 64;
		a->memo = xcalloc(a->memo_cap, sizeof *a->memo);
		a->memo_n = 0;
		/* stale answers are not carried over: their slots would only fill the new table */
		for (size_t k = 0; !restart && k < old_cap; k++) {
			if (!old[k].scope || old[k].at_ms < 0)
				continue;
			*memo_slot(a, old[k].token_id, old[k].scope, old[k].object_id, true) = old[k];
		}
		free(old);
	}
	if (!a->memo_cap)
		return NULL;
	mask = a->memo_cap - 1;
	for (i = memo_home(token_id, scope, id, mask); a->memo[i].scope; i = (i + 1) & mask)
		if (a->memo[i].object_id == id && a->memo[i].token_id == token_id && a->memo[i].scope == scope)
			return &a->memo[i];
	if (!insert)
		return NULL;
	a->memo[i] = (struct auth_memo){ token_id, id, 0, scope, 0, -1 };
	a->memo_n++;
	return &a->memo[i];
}

/* The answer that token_id owns the object, if one is remembered and still trusted now. */
static const struct auth_memo *memo_get(struct auth *a, long long token_id, enum auth_scope scope, long long id)
{
	const struct auth_memo *m = memo_slot(a, token_id, scope, id, false);

	if (!m || m->at_ms < 0)
		return NULL;
	if (scope == AUTH_SCOPE_WORKER && util_mono_ms() - m->at_ms >= AUTH_CACHE_TTL_MS)
		return NULL;
	return m;
}

/* Marks stale every answer that depends on worker worker_id (> 0: the worker's own, its attempts')
 * or, with worker_id 0, every answer of token_id; a worker or attempt answer being read now is not
 * kept either (the generation moves on). */
static void memo_expire(struct auth *a, long long token_id, long long worker_id)
{
	if (a)
		a->memo_gen++;
	for (size_t i = 0; a && i < a->memo_cap; i++) {
		struct auth_memo *m = &a->memo[i];
		if (m->scope && (worker_id ? m->worker_id == worker_id : m->token_id == token_id))
			m->at_ms = -1;
	}
}

void auth_worker_changed(struct auth *a, long long worker_id)
{
	if (worker_id > 0)
		memo_expire(a, 0, worker_id);
}

static struct auth_entry *entry_by_id(struct auth *a, long long token_id)
{
	for (size_t i = 0; a && i < a->n; i++)
		if (a->entries[i]->token_id == token_id)
			return a->entries[i];
	return NULL;
}

static void entry_remove(struct auth *a, struct auth_entry *e)
{
	for (size_t i = 0; i < a->n; i++) {
		if (a->entries[i] != e)
			continue;
		memo_expire(a, e->token_id, 0);
		free(e);
		a->entries[i] = a->entries[--a->n];
		return;
	}
}

void auth_forget(struct auth *a, long long token_id)
{
	struct auth_entry *e;

	while ((e = entry_by_id(a, token_id)) != NULL)
		entry_remove(a, e);
}

/* ---- the router's check ---- */

struct auth_check {
	struct hreq *h;
	unsigned roles;
	enum auth_scope scope;
	void (*handler)(struct hreq *h);
	auth_refused_fn refused;      /* answers a refusal of the token itself; NULL: 401 JSON */
	char *refused_arg;            /* auth_dispatch_as's, copied (heap, NULL): the lookup outlives the call */
	int64_t lookup_ms;            /* when the token lookup was sent: its expiry is counted from it */
	char hash[AUTH_HASH_HEX + 1];
	long long object_id;
	char token_id_s[32];
	unsigned long long memo_gen;  /* the memo generation when the ownership query was sent */
	int64_t sent_ms;              /* and when */
};

static void unauthorized(struct hreq *h, const char *why)
{
	hreq_add_header(h, "WWW-Authenticate", "Bearer realm=\"rung\"");
	hreq_error(h, 401, "unauthorized", NULL, "%s", why);
}

/* Refuses the token itself (why, and msg for a 401 unauthorized): through refused when there is
 * one, else as JSON; an expired one (e: its entry) as 401 token_expired saying when. */
static void refuse_token(struct hreq *h, enum auth_refusal why, const char *msg, const struct auth_entry *e,
			 auth_refused_fn refused, const char *arg)
{
	const char *when = e && e->expires_at[0] ? e->expires_at : "an earlier time";

	if (refused) {
		refused(h, why, why == AUTH_REFUSED_EXPIRED ? when : NULL, arg);
		return;
	}
	if (why != AUTH_REFUSED_EXPIRED) {
		unauthorized(h, msg);
		return;
	}
	hreq_add_header(h, "WWW-Authenticate",
			"Bearer realm=\"rung\", error=\"invalid_token\", error_description=\"the token expired\"");
	hreq_error(h, 401, "token_expired", NULL,
		   "the bearer token %s (id %lld) expired at %s; an admin can create a new one (rungctl token create)",
		   e ? e->name : "?", e ? e->token_id : 0LL, when);
}

static const char *scope_noun(enum auth_scope s)
{
	switch (s) {
	case AUTH_SCOPE_JOB: return "job";
	case AUTH_SCOPE_WORKER: return "worker";
	case AUTH_SCOPE_ATTEMPT: return "attempt";
	case AUTH_SCOPE_NONE: return "object";
	default: abort();
	}
}

static void check_free(struct auth_check *c)
{
	if (!c)
		return;
	free(c->refused_arg);
	free(c);
}

static void run_handler(struct auth_check *c)
{
	void (*handler)(struct hreq *h) = c->handler;
	struct hreq *h = c->h;

	check_free(c);
	handler(h);
}

static void on_owned(PGresult *res, const char *err, void *arg)
{
	struct auth_check *c = arg;
	struct hreq *h = c->h;
	struct auth *a = h->app->auth;
	const char *value;

	if (hreq_db_value(h, res, err, &value) < 0) {
		check_free(c);
		return;
	}
	if (PQntuples(res) == 0) {
		run_handler(c); /* no such object: the handler answers as it always does */
		return;
	}
	if (c->scope == AUTH_SCOPE_WORKER && PQnfields(res) > 1)
		h->who.worker_gpus = atoi(PQgetvalue(res, 0, 1));
	if (!value || value[0] != 't') {
		log_info("not the caller's", "token=%lld role=%s %s=%lld", h->who.token_id,
			 auth_role_name(h->who.role), scope_noun(c->scope), c->object_id);
		hreq_error(h, 404, "not_found", NULL, "no such %s: %s", scope_noun(c->scope), h->param[0]);
		check_free(c);
		return;
	}
	/* Kept only while the token is still cached (a revocation forgets its answers) and, for a
	 * worker or an attempt, when nothing was invalidated while the query ran (a registration
	 * answered in the meantime may have moved the worker); dated from when it was asked. */
	if (entry_find(a, c->hash) && (c->scope == AUTH_SCOPE_JOB || a->memo_gen == c->memo_gen)) {
		struct auth_memo *m = memo_slot(a, h->who.token_id, c->scope, c->object_id, true);
		m->gpus = h->who.worker_gpus;
		m->at_ms = c->sent_ms;
		if (c->scope == AUTH_SCOPE_WORKER)
			m->worker_id = c->object_id;
		else if (c->scope == AUTH_SCOPE_ATTEMPT && PQnfields(res) > 1 && !PQgetisnull(res, 0, 1))
			m->worker_id = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	}
	run_handler(c);
}

/* Role known: checks it, then ownership of the route's object. */
static void check_access(struct auth_check *c, const struct auth_entry *e)
{
	struct hreq *h = c->h;
	struct auth *a = h->app->auth;
	const struct auth_memo *m;
	const char *sql = NULL;
	const char *params[2];
	bool scoped;

	h->who.role = e->role;
	h->who.token_id = e->token_id;
	h->who.expires_ms = e->expires_ms;
	snprintf(h->who.name, sizeof h->who.name, "%s", e->name);
	if (!(c->roles & (unsigned)e->role)) {
		hreq_error(h, 403, "forbidden", NULL, "the %s role may not %s %s", auth_role_name(e->role),
			   h->method, h->path);
		check_free(c);
		return;
	}
	c->object_id = http_parse_id(h->param[0]);
	switch (c->scope) {
	case AUTH_SCOPE_NONE: scoped = false; break;
	case AUTH_SCOPE_JOB: scoped = e->role == AUTH_SUBMITTER; sql = sql_token_owns_job; break;
	case AUTH_SCOPE_ATTEMPT: scoped = e->role == AUTH_WORKER; sql = sql_token_owns_attempt; break;
	/* also for admin: the parked long-poll limit needs the worker's GPU count */
	case AUTH_SCOPE_WORKER: scoped = true; sql = sql_token_owns_worker; break;
	default: abort();
	}
	if (!scoped || c->object_id < 0) {
		run_handler(c);
		return;
	}
	/* Long-polls name their worker on every call, heartbeats their attempt, and a submitter's
	 * tools poll its jobs: an owner once read is remembered (see struct auth_memo). */
	m = memo_get(a, e->token_id, c->scope, c->object_id);
	if (m) {
		metrics_add(a->owner_checks, owner_sample(c->scope, true), 1);
		h->who.worker_gpus = m->gpus;
		run_handler(c);
		return;
	}
	metrics_add(a->owner_checks, owner_sample(c->scope, false), 1);
	c->memo_gen = a->memo_gen;
	c->sent_ms = util_mono_ms();
	snprintf(c->token_id_s, sizeof c->token_id_s, "%lld", e->token_id);
	params[0] = h->param[0];
	if (c->scope == AUTH_SCOPE_JOB)
		params[1] = h->who.name;
	else
		params[1] = e->role == AUTH_ADMIN ? NULL : c->token_id_s;
	db_exec(h->app->db, sql, 2, params, on_owned, c);
}

static void on_lookup(PGresult *res, const char *err, void *arg)
{
	struct auth_check *c = arg;
	struct hreq *h = c->h;
	struct auth *a = h->app->auth;
	struct auth_entry *e;
	const char *value;
	int64_t expires_ms = INT64_MAX, now;

	if (hreq_db_value(h, res, err, &value) < 0) {
		check_free(c);
		return;
	}
	e = entry_find(a, c->hash);
	if (!value || PQnfields(res) < 5 || auth_role_parse(PQgetvalue(res, 0, 2)) == AUTH_NONE) {
		if (e)
			entry_remove(a, e);
		refuse_token(h, AUTH_REFUSED_UNKNOWN, "the bearer token is unknown or revoked", NULL, c->refused,
			     c->refused_arg);
		check_free(c);
		return;
	}
	/* The time left by the database's clock, counted from when the lookup was sent: the token
	 * expires here a round trip early rather than late, whatever this host's wall clock says. */
	if (!PQgetisnull(res, 0, 3))
		expires_ms = c->lookup_ms + strtoll(PQgetvalue(res, 0, 3), NULL, 10);
	now = util_mono_ms();
	e = cache_put(a, c->hash, strtoll(value, NULL, 10), PQgetvalue(res, 0, 1), auth_role_parse(PQgetvalue(res, 0, 2)),
		      expires_ms, PQgetisnull(res, 0, 4) ? NULL : PQgetvalue(res, 0, 4), now);
	if (now >= e->expires_ms) {
		refuse_token(h, AUTH_REFUSED_EXPIRED, NULL, e, c->refused, c->refused_arg);
		check_free(c);
		return;
	}
	check_access(c, e);
}

void auth_dispatch_as(struct hreq *h, const char *token, unsigned roles, enum auth_scope scope,
		      void (*handler)(struct hreq *h), auth_refused_fn refused, const char *refused_arg)
{
	struct auth *a = h->app->auth;
	const char *hdr, *tok = token;
	struct auth_check *c;
	struct auth_entry *e;
	enum auth_cached verdict;
	const char *params[1];

	memset(&h->who, 0, sizeof h->who);
	if (roles & AUTH_OPEN) {
		handler(h);
		return;
	}
	if (!tok) {
		hdr = hreq_header(h, "Authorization");
		if (!hdr) {
			refuse_token(h, AUTH_REFUSED_MISSING, "missing Authorization: Bearer TOKEN", NULL, refused, refused_arg);
			return;
		}
		if (strncasecmp(hdr, "Bearer ", 7) != 0) {
			refuse_token(h, AUTH_REFUSED_MISSING, "the Authorization header must be Bearer TOKEN", NULL, refused,
				     refused_arg);
			return;
		}
		tok = hdr + 7;
		while (*tok == ' ')
			tok++;
	}
	if (!auth_token_wellformed(tok)) {
		refuse_token(h, AUTH_REFUSED_MISSING, "the bearer token is malformed", NULL, refused, refused_arg);
		return;
	}
	c = xcalloc(1, sizeof *c);
	c->h = h;
	c->roles = roles;
	c->scope = scope;
	c->handler = handler;
	c->refused = refused;
	c->refused_arg = refused_arg ? xstrdup(refused_arg) : NULL;
	auth_hash_hex(tok, c->hash);
	e = cache_find(a, c->hash, util_mono_ms(), &verdict);
	switch (verdict) {
	case AUTH_CACHED_LIVE:
		check_access(c, e);
		return;
	case AUTH_CACHED_EXPIRED:
		/* exact: the expiry the cache holds has passed, however recently the token was read */
		refuse_token(h, AUTH_REFUSED_EXPIRED, NULL, e, refused, refused_arg);
		check_free(c);
		return;
	case AUTH_CACHED_MISS:
		break;
	default:
		abort();
	}
	c->lookup_ms = util_mono_ms();
	params[0] = c->hash;
	db_exec(h->app->db, sql_token_lookup, 1, params, on_lookup, c);
}

void auth_dispatch(struct hreq *h, unsigned roles, enum auth_scope scope, void (*handler)(struct hreq *h))
{
	auth_dispatch_as(h, NULL, roles, scope, handler, NULL, NULL);
}

bool auth_submit_take(struct hreq *h, int64_t *retry_ms)
{
	struct auth *a = h->app->auth;
	struct auth_entry *e = entry_by_id(a, h->who.token_id);

	*retry_ms = 0;
	return !e || auth_bucket_take(&e->submit, a->submit_rate, 2.0 * a->submit_rate, util_mono_ms(), retry_ms);
}

void auth_submit_charge(struct hreq *h, double n)
{
	struct auth_entry *e = entry_by_id(h->app->auth, h->who.token_id);

	if (e)
		auth_bucket_charge(&e->submit, n);
}

bool auth_submit_allowed(struct hreq *h)
{
	struct auth *a = h->app->auth;
	int64_t retry_ms;
	char after[32];

	if (auth_submit_take(h, &retry_ms))
		return true;
	snprintf(after, sizeof after, "%lld", (long long)((retry_ms + 999) / 1000));
	hreq_add_header(h, "Retry-After", after);
	hreq_error(h, 429, "rate_limited", "submit_rate",
		   "submit rate limit of %d/s per token (burst %d) exceeded; retry in %lld ms", a->submit_rate,
		   2 * a->submit_rate, (long long)retry_ms);
	return false;
}

static struct auth_park *park_find(struct auth *a, long long worker_id)
{
	for (size_t i = 0; i < a->nparks; i++)
		if (a->parks[i].worker_id == worker_id)
			return &a->parks[i];
	return NULL;
}

int auth_parked(const struct auth *a, long long worker_id)
{
	struct auth_park *p = a ? park_find((struct auth *)a, worker_id) : NULL;

	return p ? p->count : 0;
}

bool auth_park_enter(struct hreq *h, long long worker_id)
{
	struct auth *a = h->app->auth;
	struct auth_park *p;
	int limit = h->who.worker_gpus + 1;

	if (!a)
		return true;
	p = park_find(a, worker_id);
	if (p && p->count >= limit) {
		hreq_add_header(h, "Retry-After", "1");
		hreq_error(h, 429, "too_many_long_polls", "wait_ms",
			   "worker %lld already has %d parked lease requests (limit: its %d GPUs + 1)", worker_id,
			   p->count, h->who.worker_gpus);
		return false;
	}
	if (!p) {
		if (a->nparks == a->parks_cap) {
			a->parks_cap = a->parks_cap ? 2 * a->parks_cap : 16;
			a->parks = xrealloc(a->parks, a->parks_cap * sizeof *a->parks);
		}
		p = &a->parks[a->nparks++];
		p->worker_id = worker_id;
		p->count = 0;
	}
	p->count++;
	h->who.parked_worker = worker_id;
	return true;
}

void auth_hreq_release(struct hreq *h)
{
	struct auth *a = h->app ? h->app->auth : NULL;
	struct auth_park *p;

	if (!a || h->who.parked_worker <= 0)
		return;
	p = park_find(a, h->who.parked_worker);
	h->who.parked_worker = 0;
	if (p && --p->count <= 0)
		*p = a->parks[--a->nparks];
}

bool auth_body_check(struct hreq *h, const char *buf, size_t len)
{
	if (auth_json_depth(buf, len, AUTH_JSON_MAX_DEPTH) <= AUTH_JSON_MAX_DEPTH)
		return true;
	hreq_error(h, 400, "json_too_deep", NULL, "JSON nesting is deeper than the limit of %d", AUTH_JSON_MAX_DEPTH);
	return false;
}
