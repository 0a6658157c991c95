/* Integration: hostile input on every JSON route (issue 4). A table of routes and their fields is
 * turned into a matrix of malformed bodies, wrong types, missing fields, huge numbers, NUL bytes,
 * invalid UTF-8, over-long strings, deep nesting, injection strings, hostile path ids and query
 * parameters; each must get a 4xx JSON error naming the field and leave every table unchanged
 * (md5 snapshot). Ends with /healthz and a normal job run to success by a real worker. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "util.h"

enum ftype { F_STR, F_INT, F_OBJ, F_ARR, F_BOOL };

/* One field of a route's body. path: dotted path from the body root ("gpus[0].uuid"); max_len:
 * the documented/expected length cap of a string (0: none); inj_ok: an injection string is valid
 * input there (free text), so a 2xx is allowed as long as nothing breaks. */
struct field {
	const char *path;
	enum ftype type;
	bool required, nullable, neg_ok, inj_ok;
	size_t max_len;
};

/* A route with a valid base body (built per case) and its fields. */
struct route {
	const char *name;
	char *path;
	json_t *(*base)(void);
	const struct field *fields;
	size_t nfields;
	bool unknown_refused; /* the route refuses unknown fields (DESIGN/contract) */
};

static char *g_token; /* the running fixture attempt's token */

/* ---- DB snapshot: count and md5 of every public table's rows ---- */

/* workers.last_seen_at is left out: any authenticated call of a worker (a refused lease included)
 * is a sign of life by design (rung_claim_batch touches it first). */

static char *snapshot(struct harness *h)
{
	PGresult *r = h_sql(h,
		"SELECT format('SELECT %L || '':'' || count(*) || '':'' || "
		"coalesce(md5(string_agg((to_jsonb(t) - ''last_seen_at'')::text, ''|'' ORDER BY t::text)), '''') "
		"FROM %I t', tablename, tablename) "
		"FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename", 0, NULL);
	char *out = xstrdup("");
	for (int i = 0; r && i < PQntuples(r); i++) {
		PGresult *t = h_sql(h, PQgetvalue(r, i, 0), 0, NULL);
		char *next = xasprintf("%s%s;", out, t && PQntuples(t) ? PQgetvalue(t, 0, 0) : "?");
		free(out);
		out = next;
		PQclear(t);
	}
	PQclear(r);
	return out;
}

/* ---- one request and its checks ---- */

/* Sends the request; checks a 4xx (want: exact status or 0 for any 4xx; allow_2xx: a 2xx also
 * passes, then the DB may change), the {error, message, field} shape, that `field` (when not
 * NULL) occurs in the answer's field, and that no table changed. */
static void expect(struct harness *h, const char *name, const char *method, const char *path, const char *body,
	size_t len, const char *const *hdr, long want, const char *field, bool allow_2xx)
{
	long st = 0;
	char *before = snapshot(h);
	json_t *j = h_request(h, method, path, body, len, hdr, &st);
	bool two = allow_2xx && st >= 200 && st < 300;
	bool ok = two || (want ? st == want : st >= 400 && st < 500);
	if (!h_ok(h, ok, "%s: %s%s (got %ld)", name, want ? "status " : "4xx", allow_2xx ? " or 2xx" : "", st))
		h_diag("%s %.200s -> body %.300s", method, path, h->last_body ? h->last_body : "");
	if (!two) {
		json_t *f = json_object_get(j, "field");
		bool shape = json_is_string(json_object_get(j, "error")) && json_is_string(json_object_get(j, "message")) &&
			f && (json_is_string(f) || json_is_null(f));
		if (!h_ok(h, shape, "%s: JSON error {error, message, field}", name))
			h_diag("body %.300s", h->last_body ? h->last_body : "");
		if (field && !h_ok(h, json_is_string(f) && strstr(json_string_value(f), field),
				 "%s: field names %s", name, field))
			h_diag("field %s", json_is_string(f) ? json_string_value(f) : "(none)");
		char *after = snapshot(h);
		if (!h_ok(h, !strcmp(before, after), "%s: no table changed", name))
			h_diag("before %.600s\n#   after  %.600s", before, after);
		free(after);
	}
	free(before);
	json_decref(j);
}

static void expect_json(struct harness *h, const char *name, const char *path, const json_t *body, long want,
	const char *field, bool allow_2xx)
{
	char *s = json_dumps(body, JSON_COMPACT);
	expect(h, name, "POST", path, s, strlen(s), NULL, want, field, allow_2xx);
	free(s);
}

/* ---- JSON path helpers: "a.b[0].c" ---- */

/* The parent container of path's last component and that component (key or index). */
static json_t *parent_of(json_t *root, const char *path, char *key, size_t keycap, long *idx)
{
	char *p = xstrdup(path), *save = NULL, *tok = strtok_r(p, ".", &save);
	json_t *cur = root;
	*idx = -1;
	while (tok && cur) {
		char *next = strtok_r(NULL, ".", &save);
		char *br = strchr(tok, '[');
		long i = -1;
		if (br) {
			i = strtol(br + 1, NULL, 10);
			*br = '\0';
		}
		if (!next) {
			if (i >= 0) {
				cur = json_object_get(cur, tok);
				*idx = i;
			}
			snprintf(key, keycap, "%s", tok);
			break;
		}
		cur = json_object_get(cur, tok);
		if (i >= 0)
			cur = json_array_get(cur, (size_t)i);
		tok = next;
	}
	free(p);
	return cur;
}

/* Sets (value) or deletes (value NULL) the field at path; steals value. */
static void set_path(json_t *root, const char *path, json_t *value)
{
	char key[128];
	long idx;
	json_t *par = parent_of(root, path, key, sizeof key, &idx);
	if (idx >= 0 && json_is_array(par)) {
		if (value)
			json_array_set_new(par, (size_t)idx, value);
		else
			json_array_remove(par, (size_t)idx);
	} else if (json_is_object(par)) {
		if (value)
			json_object_set_new(par, key, value);
		else
			json_object_del(par, key);
	} else {
		h_diag("cannot set %s", path);
		json_decref(value);
	}
}

/* The body's text with the string "@@X@@" replaced by raw (which may hold any bytes). */
static char *with_raw(const json_t *body, const char *raw, size_t *len)
{
	char *s = json_dumps(body, JSON_COMPACT);
	char *at = strstr(s, "\"@@X@@\"");
	if (!at) {
		*len = strlen(s);
		return s;
	}
	size_t pre = (size_t)(at - s), rl = strlen(raw), post = strlen(at + 7);
	char *out = xmalloc(pre + rl + post + 1);
	memcpy(out, s, pre);
	memcpy(out + pre, raw, rl);
	memcpy(out + pre + rl, at + 7, post + 1);
	*len = pre + rl + post;
	free(s);
	return out;
}

/* ---- the matrix for one route ---- */

static const char *const injections[] = { "'; DROP TABLE jobs; --", "$(reboot)", "../../etc/passwd", "%00",
	"<script>alert(1)</script>", "`id`", "\" OR 1=1 --" };

static json_t *wrong_value(enum ftype t)
{
	switch (t) {
	case F_STR: return json_string("x");
	case F_INT: return json_integer(7);
	case F_OBJ: return json_object();
	case F_ARR: return json_array();
	case F_BOOL: return json_true();
	}
	return json_null();
}

static void route_matrix(struct harness *h, const struct route *r)
{
	char name[256];
	size_t len;
	char *s;

	/* Body-level hostility. */
	static const char *const raws[] = { "{\"a\": ", "[]", "\"str\"", "null", "{\"a\":1,\"a\":2}", "{\"a\": 1} x" };
	for (size_t i = 0; i < ARRAY_LEN(raws); i++) {
		snprintf(name, sizeof name, "%s: body %s", r->name, raws[i]);
		expect(h, name, "POST", r->path, raws[i], strlen(raws[i]), NULL, 400, NULL, false);
	}
	/* Deep nesting: 200 levels of arrays inside a known field. */
	{
		char deep[512] = "{\"x\": ";
		size_t n = strlen(deep);
		for (int i = 0; i < 200; i++)
			deep[n++] = '[';
		for (int i = 0; i < 200; i++)
			deep[n++] = ']';
		deep[n++] = '}';
		deep[n] = '\0';
		snprintf(name, sizeof name, "%s: 200-deep nesting", r->name);
		expect(h, name, "POST", r->path, deep, n, NULL, 400, NULL, false);
	}
	/* Over the 1 MiB body cap. */
	{
		size_t big = (1u << 20) + 16;
		json_t *b = r->base();
		char *pad = xmalloc(big + 1);
		memset(pad, 'a', big);
		pad[big] = '\0';
		json_object_set_new(b, "pad", json_string(pad));
		s = json_dumps(b, JSON_COMPACT);
		snprintf(name, sizeof name, "%s: 1 MiB string", r->name);
		expect(h, name, "POST", r->path, s, strlen(s), NULL, 413, NULL, false);
		free(s);
		free(pad);
		json_decref(b);
	}
	if (r->unknown_refused) {
		json_t *b = r->base();
		json_object_set_new(b, "colour", json_string("red"));
		snprintf(name, sizeof name, "%s: unknown field", r->name);
		expect_json(h, name, r->path, b, 400, "colour", false);
		json_decref(b);
	}

	for (size_t fi = 0; fi < r->nfields; fi++) {
		const struct field *f = &r->fields[fi];
		json_t *b;
		/* Wrong types. */
		for (int t = F_STR; t <= F_BOOL; t++) {
			if ((enum ftype)t == f->type)
				continue;
			b = r->base();
			set_path(b, f->path, wrong_value((enum ftype)t));
			snprintf(name, sizeof name, "%s: %s of type %d", r->name, f->path, t);
			expect_json(h, name, r->path, b, 400, f->path, false);
			json_decref(b);
		}
		if (!f->nullable) {
			b = r->base();
			set_path(b, f->path, json_null());
			snprintf(name, sizeof name, "%s: %s null", r->name, f->path);
			expect_json(h, name, r->path, b, 400, f->path, false);
			json_decref(b);
		}
		if (f->required) {
			b = r->base();
			set_path(b, f->path, NULL);
			snprintf(name, sizeof name, "%s: %s missing", r->name, f->path);
			expect_json(h, name, r->path, b, 400, f->path, false);
			json_decref(b);
		}
		if (f->type == F_INT) {
			/* Parseable by JSON: the server must name the field. */
			static const char *const named[] = { "1e308", "1.5", "-1e308" };
			for (size_t i = 0; i < ARRAY_LEN(named); i++) {
				b = r->base();
				set_path(b, f->path, json_string("@@X@@"));
				s = with_raw(b, named[i], &len);
				snprintf(name, sizeof name, "%s: %s = %s", r->name, f->path, named[i]);
				expect(h, name, "POST", r->path, s, len, NULL, 400, f->path, false);
				free(s);
				json_decref(b);
			}
			/* Out of range for a 64-bit integer: jansson refuses the whole body. */
			static const char *const huge[] = { "9223372036854775808", "-9223372036854775809",
				"99999999999999999999" };
			for (size_t i = 0; i < ARRAY_LEN(huge); i++) {
				b = r->base();
				set_path(b, f->path, json_string("@@X@@"));
				s = with_raw(b, huge[i], &len);
				snprintf(name, sizeof name, "%s: %s = %s", r->name, f->path, huge[i]);
				expect(h, name, "POST", r->path, s, len, NULL, 400, NULL, false);
				free(s);
				json_decref(b);
			}
			static const long long named_int[] = { 9223372036854775807LL, -9223372036854775807LL - 1, -1 };
			for (size_t i = 0; i < ARRAY_LEN(named_int); i++) {
				if (named_int[i] == -1 && f->neg_ok)
					continue;
				b = r->base();
				set_path(b, f->path, json_integer(named_int[i]));
				snprintf(name, sizeof name, "%s: %s = %lld", r->name, f->path, named_int[i]);
				expect_json(h, name, r->path, b, 400, f->path, false);
				json_decref(b);
			}
		}
		if (f->type == F_STR) {
			static const char *const bad_text[] = { "\"a\\u0000b\"", "\"a\xff\xfe" "b\"", "\"\xc0\xaf\"",
				"\"\\ud800\"" };
			for (size_t i = 0; i < ARRAY_LEN(bad_text); i++) {
				b = r->base();
				set_path(b, f->path, json_string("@@X@@"));
				s = with_raw(b, bad_text[i], &len);
				snprintf(name, sizeof name, "%s: %s bad text #%zu", r->name, f->path, i);
				expect(h, name, "POST", r->path, s, len, NULL, 400, NULL, false);
				free(s);
				json_decref(b);
			}
			if (f->max_len) {
				char *longs = xmalloc(f->max_len + 2);
				memset(longs, 'n', f->max_len + 1);
				longs[f->max_len + 1] = '\0';
				b = r->base();
				set_path(b, f->path, json_string(longs));
				snprintf(name, sizeof name, "%s: %s of %zu bytes", r->name, f->path, f->max_len + 1);
				expect_json(h, name, r->path, b, 400, f->path, false);
				json_decref(b);
				free(longs);
			}
			for (size_t i = 0; i < ARRAY_LEN(injections); i++) {
				b = r->base();
				set_path(b, f->path, json_string(injections[i]));
				snprintf(name, sizeof name, "%s: %s = %s", r->name, f->path, injections[i]);
				expect_json(h, name, r->path, b, 0, NULL, f->inj_ok);
				json_decref(b);
			}
		}
	}
}

/* ---- routes and base bodies ---- */

static json_t *base_submit(void)
{
	return json_pack("{s:o, s:s, s:i, s:{s:i, s:b}, s:{s:s}}", "config", h_config("hostile", 10), "name", "n",
		"priority", 5, "recovery", "max_attempts", 3, "scale_up", 1, "labels", "team", "red");
}
static const struct field submit_fields[] = {
	{ "config", F_OBJ, true, false, false, false, 0 },
	{ "name", F_STR, false, true, false, true, 256 },
	{ "priority", F_INT, false, true, true, false, 0 },
	{ "recovery", F_OBJ, false, true, false, false, 0 },
	{ "recovery.max_attempts", F_INT, false, false, false, false, 0 },
	{ "recovery.scale_up", F_BOOL, false, false, false, false, 0 },
	{ "labels", F_OBJ, false, true, false, false, 0 },
	{ "labels.team", F_STR, false, false, false, false, 63 },
};

static json_t *base_register(void)
{
	return json_pack("{s:s, s:s, s:[{s:s, s:i, s:s, s:i}]}", "name", "w-hostile", "host", "h", "gpus", "uuid",
		"GPU-hostile-0", "index", 0, "name", "NVIDIA Sim", "memory_total_mib", 1000);
}
static const struct field register_fields[] = {
	{ "name", F_STR, true, false, false, true, 256 },
	{ "host", F_STR, false, true, false, true, 256 },
	{ "gpus", F_ARR, true, false, false, false, 0 },
	{ "gpus[0]", F_OBJ, false, false, false, false, 0 },
	{ "gpus[0].uuid", F_STR, true, false, false, true, 256 },
	{ "gpus[0].index", F_INT, false, false, false, false, 0 },
	{ "gpus[0].name", F_STR, false, false, false, true, 256 },
	{ "gpus[0].memory_total_mib", F_INT, true, false, false, false, 0 },
};

static json_t *base_lease(void)
{
	return json_pack("{s:s, s:i, s:n}", "gpu_uuid", "GPU-fix-0", "wait_ms", 0, "gpu_state");
}
static const struct field lease_fields[] = {
	{ "gpu_uuid", F_STR, true, false, false, false, 256 },
	{ "wait_ms", F_INT, false, true, false, false, 0 },
	{ "gpu_state", F_OBJ, false, true, false, false, 0 },
};

static json_t *base_heartbeat(void)
{
	return json_pack("{s:s, s:s, s:i, s:i, s:i}", "token", g_token, "phase", "train", "step", 1, "total_steps",
		10, "memory_used_mib", 100);
}
static const struct field heartbeat_fields[] = {
	{ "token", F_STR, true, false, false, false, 256 },
	{ "phase", F_STR, false, true, false, true, 64 },
	{ "step", F_INT, false, true, false, false, 0 },
	{ "total_steps", F_INT, false, true, false, false, 0 },
	{ "memory_used_mib", F_INT, false, true, false, false, 0 },
};

static json_t *base_finish(void)
{
	json_t *f = h_facts_success(10);
	return json_pack("{s:s, s:o}", "token", g_token, "facts", f);
}
/* Only the fields the handler checks before touching the database; FACTS types come after. */
static const struct field finish_fields[] = {
	{ "token", F_STR, true, false, false, false, 256 },
	{ "facts", F_OBJ, true, false, false, false, 0 },
	{ "facts.log_tail", F_ARR, false, true, false, false, 0 },
	{ "facts.log_tail[0]", F_STR, false, false, false, true, 1000 },
};

static json_t *base_note(void)
{
	return json_pack("{s:s}", "note", "looked at it");
}
static const struct field note_fields[] = {
	{ "note", F_STR, false, true, false, false, 4096 },
};

static json_t *base_token(void)
{
	return json_pack("{s:s, s:s}", "role", "support", "name", "t-hostile");
}
static const struct field token_fields[] = {
	{ "role", F_STR, true, false, false, false, 0 },
	{ "name", F_STR, false, true, false, false, 64 },
};

/* ---- config (policy) hostility at submit ---- */

static void bad_config(struct harness *h, const char *name, const char *path, json_t *value, const char *field)
{
	json_t *cfg = h_config("bad", 100);
	if (h_config_set(cfg, path, value) != 0)
		h_diag("cannot set %s", path);
	json_t *body = json_pack("{s:o}", "config", cfg);
	expect_json(h, name, "/v1/jobs", body, 400, field, false);
	json_decref(body);
}

static void config_matrix(struct harness *h)
{
	const char *res = "config.process[0].datasets[0].resolution";
	bad_config(h, "config: resolution []", res, json_array(), "resolution");
	bad_config(h, "config: resolution [0]", res, json_pack("[i]", 0), "resolution");
	bad_config(h, "config: resolution [-512]", res, json_pack("[i]", -512), "resolution");
	bad_config(h, "config: resolution [\"x\"]", res, json_pack("[s]", "x"), "resolution");
	bad_config(h, "config: resolution [1e308]", res, json_pack("[f]", 1e308), "resolution");
	json_t *many = json_array();
	for (int i = 0; i < 5000; i++)
		json_array_append_new(many, json_integer(256 + 8 * i));
	bad_config(h, "config: 5000 resolution buckets", res, many, "resolution");
	bad_config(h, "config: num_frames 0", "config.process[0].datasets[0].num_frames", json_integer(0),
		"num_frames");
	bad_config(h, "config: num_frames \"many\"", "config.process[0].datasets[0].num_frames", json_string("many"),
		"num_frames");
	bad_config(h, "config: num_frames -1", "config.process[0].datasets[0].num_frames", json_integer(-1),
		"num_frames");
	bad_config(h, "config: batch_size 0", "config.process[0].train.batch_size", json_integer(0), "batch_size");
	bad_config(h, "config: batch_size 1e308", "config.process[0].train.batch_size", json_real(1e308),
		"batch_size");
	bad_config(h, "config: batch_size 2^63-1", "config.process[0].train.batch_size",
		json_integer(9223372036854775807LL), "batch_size");
	bad_config(h, "config: steps -5", "config.process[0].train.steps", json_integer(-5), "steps");
	bad_config(h, "config: steps 0", "config.process[0].train.steps", json_integer(0), "steps");
	bad_config(h, "config: steps 2^63-1", "config.process[0].train.steps", json_integer(9223372036854775807LL),
		"steps");
	bad_config(h, "config: gradient_accumulation 0", "config.process[0].train.gradient_accumulation",
		json_integer(0), "gradient_accumulation");
	bad_config(h, "config: sample width 0", "config.process[0].sample.width", json_integer(0), "width");
	bad_config(h, "config: sample height -1", "config.process[0].sample.height", json_integer(-1), "height");
	bad_config(h, "config: sample width \"wide\"", "config.process[0].sample.width", json_string("wide"), "width");
	bad_config(h, "config: process []", "config.process", json_array(), "process");
	bad_config(h, "config: process [null]", "config.process", json_pack("[n]"), "process");
	bad_config(h, "config: datasets {}", "config.process[0].datasets", json_object(), "datasets");
	bad_config(h, "config: train null", "config.process[0].train", json_null(), "train");
}

/* ---- hostile path ids and query parameters ---- */

static const char *const bad_ids[] = { "0", "-1", "abc", "99999999999999999999", "9223372036854775808", "1e308",
	"%00", "1%00", "..%2F..%2Fetc%2Fpasswd", "%27%3B%20DROP%20TABLE%20jobs%3B%20--", "%3Cscript%3E", "%24(reboot)",
	"%ff%fe", "1.5", "+1", "0x10", "%201" };

static void path_matrix(struct harness *h)
{
	static const struct { const char *method, *fmt; } routes[] = {
		{ "GET", "/v1/jobs/%s" }, { "GET", "/v1/jobs/%s/attempts" }, { "GET", "/v1/jobs/%s/events" },
		{ "POST", "/v1/jobs/%s/cancel" }, { "POST", "/v1/workers/%s/lease" },
		{ "POST", "/v1/attempts/%s/heartbeat" }, { "POST", "/v1/attempts/%s/finish" },
		{ "GET", "/v1/escalations/%s" }, { "POST", "/v1/escalations/%s/ack" },
		{ "POST", "/v1/escalations/%s/resolve" }, { "POST", "/v1/gpus/%s/release" },
		{ "POST", "/v1/tokens/%s/revoke" },
	};
	for (size_t r = 0; r < ARRAY_LEN(routes); r++)
		for (size_t i = 0; i < ARRAY_LEN(bad_ids); i++) {
			char *path = xasprintf(routes[r].fmt, bad_ids[i]);
			char *name = xasprintf("path %s %s", routes[r].method, path);
			const char *body = !strcmp(routes[r].method, "POST") ? "{}" : NULL;
			expect(h, name, routes[r].method, path, body, body ? 2 : 0, NULL, 0, NULL, false);
			free(name);
			free(path);
		}
}

static void query_matrix(struct harness *h)
{
	static const struct { const char *query, *field; } q[] = {
		{ "/v1/jobs?limit=-1", "limit" }, { "/v1/jobs?limit=0", "limit" }, { "/v1/jobs?limit=501", "limit" },
		{ "/v1/jobs?limit=1e308", "limit" }, { "/v1/jobs?limit=99999999999999999999", "limit" },
		{ "/v1/jobs?limit=-9223372036854775809", "limit" }, { "/v1/jobs?limit=9223372036854775808", "limit" },
		{ "/v1/jobs?limit=abc", "limit" }, { "/v1/jobs?limit=%00", "limit" }, { "/v1/jobs?limit=1%00", "limit" },
		{ "/v1/jobs?limit=", "limit" }, { "/v1/jobs?limit=%2010", "limit" }, { "/v1/jobs?limit=10abc", "limit" },
		{ "/v1/jobs?state=%27%3B%20DROP%20TABLE%20jobs%3B%20--", "state" }, { "/v1/jobs?state=%3Cscript%3E", "state" },
		{ "/v1/jobs?state=%ff%fe", "state" }, { "/v1/jobs?state=queued%00", "state" },
		{ "/v1/jobs?cursor=abc", "cursor" }, { "/v1/jobs?cursor=-1", "cursor" },
		{ "/v1/jobs?cursor=99999999999999999999", "cursor" }, { "/v1/jobs?cursor=1%20OR%201%3D1", "cursor" },
		{ "/v1/jobs?cursor=1e308", "cursor" }, { "/v1/jobs?label=team", "label" },
		{ "/v1/jobs?label=%27%3B%20DROP%20TABLE%20jobs=1", "label" }, { "/v1/jobs?label=team=a%20b", "label" },
		{ "/v1/jobs?label=team=a,team=b", "label" },
		{ "/v1/escalations?state=bogus", "state" }, { "/v1/escalations?state=%27%3B%20DROP%20TABLE%20jobs", "state" },
		{ "/v1/escalations?state=%ff", "state" },
	};
	for (size_t i = 0; i < ARRAY_LEN(q); i++) {
		char *name = xasprintf("query GET %s", q[i].query);
		expect(h, name, "GET", q[i].query, NULL, 0, NULL, 400, q[i].field, false);
		free(name);
	}
}

/* The raw form of POST /v1/jobs: the file itself with query options. */
static void raw_submit_matrix(struct harness *h)
{
	json_t *cfg = h_config("raw", 10);
	char *file = json_dumps(cfg, JSON_COMPACT);
	static const struct { const char *query, *field; } q[] = {
		{ "priority=abc", "priority" }, { "priority=1e308", "priority" },
		{ "priority=99999999999999999999", "priority" }, { "priority=-9223372036854775809", "priority" },
		{ "priority=1000001", "priority" }, { "priority=", "priority" }, { "priority=1%00", "priority" },
		{ "name=%ff%fe", "name" }, { "name=a%00b", "name" }, { "max_attempts=0", "max_attempts" },
		{ "max_attempts=-1", "max_attempts" }, { "max_attempts=abc", "max_attempts" },
		{ "max_attempts=1e308", "max_attempts" }, { "scale_up=maybe", "scale_up" }, { "colour=red", "colour" },
		{ "priority=1&priority=2", "priority" }, { "%27%3B%20DROP%20TABLE%20jobs=1", "DROP" },
		{ "labels=team", "labels" }, { "labels=team=a,team=b", "labels" }, { "labels=team=a%20b", "labels" },
		{ "labels=%3Cscript%3E=1", "labels" }, { "labels=team=%ff", "labels" }, { "labels=team=a&labels=x=y", "labels" },
	};
	for (size_t i = 0; i < ARRAY_LEN(q); i++) {
		char *path = xasprintf("/v1/jobs?%s", q[i].query);
		char *name = xasprintf("raw submit ?%s", q[i].query);
		expect(h, name, "POST", path, file, strlen(file), NULL, 400, q[i].field, false);
		free(name);
		free(path);
	}
	char *longname = xmalloc(300);
	memset(longname, 'n', 299);
	longname[299] = '\0';
	char *path = xasprintf("/v1/jobs?name=%s", longname);
	expect(h, "raw submit ?name of 299 bytes", "POST", path, file, strlen(file), NULL, 400, "name", false);
	free(path);
	free(longname);

	/* YAML bodies. */
	const char *yaml_hdr[] = { "Content-Type: application/yaml", NULL };
	static const char *const yamls[] = {
		"job: extension\nconfig: [\n",
		"a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
		"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
		"f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\njob: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n",
		"- just\n- a list\n",
		"job: extension\nconfig: !!binary \"\\xff\"\n",
		"job: extension\nconfig:\n  name: \"\xff\xfe\"\n  process: []\n",
	};
	for (size_t i = 0; i < ARRAY_LEN(yamls); i++) {
		char *name = xasprintf("raw YAML submit #%zu", i);
		expect(h, name, "POST", "/v1/jobs", yamls[i], strlen(yamls[i]), yaml_hdr, 400, NULL, false);
		free(name);
	}
	char deep[1200];
	size_t n = 0;
	n += (size_t)snprintf(deep, sizeof deep, "job: extension\nconfig: ");
	for (int i = 0; i < 200; i++)
		deep[n++] = '[';
	for (int i = 0; i < 200; i++)
		deep[n++] = ']';
	deep[n++] = '\n';
	deep[n] = '\0';
	expect(h, "raw YAML submit 200-deep", "POST", "/v1/jobs", deep, n, yaml_hdr, 400, NULL, false);
	free(file);
	json_decref(cfg);
}

/* FACTS of the wrong type at finish: the policy must not run on them. Last: an accepted one ends
 * the fixture attempt. */
static void facts_matrix(struct harness *h, const char *wid)
{
	static const struct { const char *path; const char *raw; } cases[] = {
		{ "facts.exit_code", "\"abc\"" }, { "facts.exit_code", "1e308" }, { "facts.steps_done", "-5" },
		{ "facts.steps_done", "\"many\"" }, { "facts.last_step", "[]" }, { "facts.total_steps", "{}" },
		{ "facts.phase", "\"'; DROP TABLE jobs; --\"" }, { "facts.phase", "7" }, { "facts.signatures", "[]" },
		{ "facts.signatures", "{\"cuda_oom\": \"x\"}" }, { "facts.oom", "\"x\"" }, { "facts.duration_ms", "-1" },
		{ "facts.cancelled", "\"yes\"" }, { "facts.gpu_before", "[]" },
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		/* each case on a fresh running attempt: an accepted one ends its attempt */
		long st = 0;
		json_t *cfg = h_config("facts", 10), *first = json_pack("{s:i}", "priority", -1000000);
		json_decref(h_submit(h, cfg, first));
		json_decref(first);
		json_decref(cfg);
		json_t *lease = h_fake_lease(h, wid, "GPU-fix-0", 0, &st);
		char *aid = h_id(lease, "attempt_id");
		free(g_token);
		g_token = xstrdup(h_str(lease, "token"));
		json_decref(lease);
		if (!h_ok(h, aid != NULL, "a fresh attempt for FACTS case %zu (lease %ld)", i, st))
			continue;
		char *attempt_path = xasprintf("/v1/attempts/%s/finish", aid);
		free(aid);
		json_t *b = base_finish();
		size_t len;
		set_path(b, cases[i].path, json_string("@@X@@"));
		char *s = with_raw(b, cases[i].raw, &len);
		char *name = xasprintf("finish: %s = %s", cases[i].path, cases[i].raw);
		expect(h, name, "POST", attempt_path, s, len, NULL, 400, cases[i].path, false);
		free(name);
		free(s);
		free(attempt_path);
		json_decref(b);
	}
}

static bool page_escapes(struct harness *h, const char *path)
{
	long st = 0;
	char *cookie = xasprintf("Cookie: rung_token=%s", h->admin_token);
	const char *hdr[] = { cookie, NULL };
	json_t *j = h_request(h, "GET", path, NULL, 0, hdr, &st);
	json_decref(j);
	free(cookie);
	const char *hit = h->last_body ? strstr(h->last_body, "<script>alert(1)</script>") : NULL;
	if (st != 200 || hit)
		h_diag("GET %s: status %ld, %.200s", path, st, hit ? hit - (hit - h->last_body > 100 ? 100 : 0) : "");
	return st == 200 && h->last_body && !hit;
}

int main(void)
{
	struct harness *h = h_new("it_hostile");
	const char *extra[] = { "--lease-seconds", "600", "--submit-rate", "100000", NULL };
	long st = 0;
	json_t *j;
	char *wid = NULL, *job1 = NULL, *job2 = NULL, *aid = NULL;

	if (!h_ok(h, h_server_start(h, extra) == 0, "rungd starts and answers /healthz"))
		return h_free(h);

	/* Fixtures: a fake worker with a running attempt, and one queued job. */
	wid = h_fake_register(h, "w-fix", "GPU-fix-0", 24576);
	json_t *cfg = h_config("fixture", 10);
	j = h_submit(h, cfg, NULL);
	job1 = h_id(j, "id");
	json_decref(j);
	json_t *lease = wid ? h_fake_lease(h, wid, "GPU-fix-0", 0, &st) : NULL;
	aid = h_id(lease, "attempt_id");
	g_token = xstrdup(h_str(lease, "token"));
	json_decref(lease);
	j = h_submit(h, cfg, NULL);
	job2 = h_id(j, "id");
	json_decref(j);
	json_decref(cfg);
	if (!h_ok(h, wid && job1 && job2 && aid && *g_token, "fixtures: worker, running attempt, queued job"))
		goto out;

	struct route routes[] = {
		{ "submit", xstrdup("/v1/jobs"), base_submit, submit_fields, ARRAY_LEN(submit_fields), true },
		{ "register", xstrdup("/v1/workers"), base_register, register_fields, ARRAY_LEN(register_fields), false },
		{ "lease", xasprintf("/v1/workers/%s/lease", wid), base_lease, lease_fields, ARRAY_LEN(lease_fields),
			false },
		{ "heartbeat", xasprintf("/v1/attempts/%s/heartbeat", aid), base_heartbeat, heartbeat_fields,
			ARRAY_LEN(heartbeat_fields), false },
		{ "finish", xasprintf("/v1/attempts/%s/finish", aid), base_finish, finish_fields,
			ARRAY_LEN(finish_fields), false },
		{ "ack", xstrdup("/v1/escalations/999999/ack"), base_note, note_fields, ARRAY_LEN(note_fields), false },
		{ "resolve", xstrdup("/v1/escalations/999999/resolve"), base_note, note_fields, ARRAY_LEN(note_fields),
			false },
		{ "token create", xstrdup("/v1/tokens"), base_token, token_fields, ARRAY_LEN(token_fields), true },
	};
	int64_t t0 = util_mono_ms();
	path_matrix(h); /* first: accepted injections below register GPUs with those names */
	for (size_t i = 0; i < ARRAY_LEN(routes); i++)
		route_matrix(h, &routes[i]);
	config_matrix(h);
	query_matrix(h);
	raw_submit_matrix(h);
	/* Bodies on routes that take none. */
	expect(h, "gpu release: malformed body", "POST", "/v1/gpus/GPU-fix-0/release", "{\"a\": ", 6, NULL, 400, NULL,
		false);
	expect(h, "cancel: body []", "POST", "/v1/jobs/999999/cancel", "[]", 2, NULL, 0, NULL, false);
	h_diag("matrix took %lld ms", (long long)(util_mono_ms() - t0));

	/* Injection strings that were accepted are stored verbatim and shown escaped. */
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM jobs", 0, NULL) >= 2, "jobs table intact after injections");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM workers WHERE name = '''; DROP TABLE jobs; --'", 0, NULL) <= 1,
		"an injected worker name is at most one verbatim row");
	h_ok(h, page_escapes(h, "/ui/jobs"), "/ui/jobs shows injected names escaped");
	char *ui = xasprintf("/ui/jobs/%s", job1);
	h_ok(h, page_escapes(h, ui), "/ui/jobs/ID shows the injected heartbeat phase escaped");
	free(ui);
	h_ok(h, page_escapes(h, "/ui/gpus"), "/ui/gpus shows injected GPU and worker names escaped");

	facts_matrix(h, wid);

	/* Healthy afterwards: /healthz, and a normal job runs to success on a real worker. */
	j = h_get(h, "/healthz", &st);
	h_ok(h, st == 200 && json_is_true(json_object_get(j, "ok")), "healthz ok after the matrix");
	json_decref(j);
	h_ok(h, h_proc_alive(&h->server), "rungd is still running");
	if (h_worker_start(h, "w-real", NULL)) {
		cfg = h_config("after-hostile", 20);
		json_t *prio = json_pack("{s:i}", "priority", -1000000); /* ahead of the accepted injections */
		j = h_submit(h, cfg, prio);
		json_decref(prio);
		char *id = h_id(j, "id");
		json_decref(j);
		json_decref(cfg);
		json_t *done = id ? h_wait_job(h, id, "succeeded", 60000) : NULL;
		h_ok(h, done != NULL, "a normal job still runs to success");
		json_decref(done);
		free(id);
	} else {
		h_ok(h, false, "start a real worker");
	}
	for (size_t i = 0; i < ARRAY_LEN(routes); i++)
		free(routes[i].path);
out:
	free(wid);
	free(job1);
	free(job2);
	free(aid);
	free(g_token);
	return h_free(h);
}
