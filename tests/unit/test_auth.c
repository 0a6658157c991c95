/* Unit tests of server/auth: SHA-256 against the FIPS 180-4 vectors, token and name shapes, the
 * role names, the submit token bucket, the JSON depth scan, the token cache's verdicts with the
 * clock driven (a token that expires while cached is refused from that instant, not at the
 * refresh), and the route table's who-may-do-what (routes_access). No database: the router's
 * async path is covered by it_auth. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../server/auth.h"
#include "../../server/http.h"
#include "../../server/routes.h"
#include "tap.h"

static void test_sha256(void)
{
	char out[AUTH_HASH_HEX + 1];
	char *million = malloc(1000000);

	auth_hash_hex("", out);
	TAP_STR_EQ(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "sha256 of empty");
	auth_hash_hex("abc", out);
	TAP_STR_EQ(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "sha256 of abc");
	auth_hash_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", out);
	TAP_STR_EQ(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
		   "sha256 of the 448-bit vector (padding spills into a second block)");
	memset(million, 'a', 1000000);
	{
		uint8_t d[32];
		char hexs[65];
		static const char digits[] = "0123456789abcdef";
		auth_sha256(million, 1000000, d);
		for (int i = 0; i < 32; i++) {
			hexs[2 * i] = digits[d[i] >> 4];
			hexs[2 * i + 1] = digits[d[i] & 15];
		}
		hexs[64] = '\0';
		TAP_STR_EQ(hexs, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
			   "sha256 of a million a's");
	}
	free(million);
	/* lengths around the 55/56/64-byte padding edges differ from each other */
	{
		char a[AUTH_HASH_HEX + 1], b[AUTH_HASH_HEX + 1];
		char s55[56], s56[57];
		memset(s55, 'x', 55);
		s55[55] = '\0';
		memset(s56, 'x', 56);
		s56[56] = '\0';
		auth_hash_hex(s55, a);
		auth_hash_hex(s56, b);
		TAP_OK(strcmp(a, b) != 0 && strlen(a) == 64, "55 and 56 bytes hash differently");
	}
}

static void test_tokens(void)
{
	char t1[AUTH_TOKEN_LEN + 1], t2[AUTH_TOKEN_LEN + 1];
	char bad[AUTH_TOKEN_LEN + 1];

	TAP_INT_EQ(auth_token_new(t1), 0, "token from getrandom");
	TAP_INT_EQ(auth_token_new(t2), 0, "second token");
	TAP_INT_EQ(strlen(t1), AUTH_TOKEN_LEN, "token length is prefix + 64 hex digits");
	TAP_OK(strncmp(t1, "rung_", 5) == 0, "token starts with rung_");
	TAP_OK(strcmp(t1, t2) != 0, "two tokens differ");
	TAP_OK(auth_token_wellformed(t1), "a new token is well formed");
	memcpy(bad, t1, sizeof bad);
	bad[10] = 'G';
	TAP_OK(!auth_token_wellformed(bad), "a non-hex digit is refused");
	TAP_OK(!auth_token_wellformed("rung_abc"), "a short token is refused");
	TAP_OK(!auth_token_wellformed(NULL), "NULL is refused");
	memcpy(bad, t1, sizeof bad);
	bad[0] = 'x';
	TAP_OK(!auth_token_wellformed(bad), "a wrong prefix is refused");
	TAP_OK(auth_name_valid("ci-bot@team.a_1"), "a name with . _ @ - is valid");
	TAP_OK(!auth_name_valid(""), "an empty name is invalid");
	TAP_OK(!auth_name_valid("has space"), "a name with a space is invalid");
	TAP_OK(!auth_name_valid("a/b"), "a name with a slash is invalid");
	TAP_OK(auth_name_valid("42") && !auth_name_new_ok("42"), "an all-digit name is valid but names no new token (it reads as an id)");
	TAP_OK(auth_name_new_ok("42b") && auth_name_new_ok("team-7"), "a name with a digit and more is a new token's");
	{
		char longname[AUTH_NAME_MAX + 2];
		memset(longname, 'n', sizeof longname - 1);
		longname[AUTH_NAME_MAX + 1] = '\0';
		TAP_OK(!auth_name_valid(longname), "a name over 64 bytes is invalid");
		longname[AUTH_NAME_MAX] = '\0';
		TAP_OK(auth_name_valid(longname), "a name of 64 bytes is valid");
	}
}

static void test_roles(void)
{
	static const char *const names[] = { "submitter", "worker", "support", "admin" };

	for (size_t i = 0; i < 4; i++)
		TAP_STR_EQ(auth_role_name(auth_role_parse(names[i])), names[i], "role name round-trips");
	TAP_INT_EQ(auth_role_parse("root"), AUTH_NONE, "unknown role parses as none");
	TAP_INT_EQ(auth_role_parse(NULL), AUTH_NONE, "NULL role parses as none");
	TAP_STR_EQ(auth_role_name(AUTH_NONE), "none", "AUTH_NONE is named none");
}

static void test_bucket(void)
{
	struct auth_bucket b = { 0 };
	int64_t retry = 0, t = 1000;
	int taken = 0;

	/* rate 10/s, burst 20: a burst of 20 passes, the 21st waits ~100 ms */
	while (auth_bucket_take(&b, 10, 20, t, &retry))
		taken++;
	TAP_INT_EQ(taken, 20, "a full bucket lets the burst through");
	TAP_OK(retry >= 99 && retry <= 100, "the refusal says when one token is back (100 ms at 10/s)");
	TAP_OK(!auth_bucket_take(&b, 10, 20, t + 50, &retry), "half a token is not enough");
	TAP_OK(auth_bucket_take(&b, 10, 20, t + 100, &retry), "a token is back after 100 ms");
	TAP_OK(!auth_bucket_take(&b, 10, 20, t + 100, &retry), "and only one");
	taken = 0;
	while (auth_bucket_take(&b, 10, 20, t + 100000, &retry))
		taken++;
	TAP_INT_EQ(taken, 20, "a long idle refills only up to the burst");
	TAP_OK(!auth_bucket_take(&b, 10, 20, t + 99000, &retry), "time going backwards adds nothing");
	{
		/* a batch of 50 jobs: one take allowed, 49 more charged as debt, repaid at the rate */
		struct auth_bucket d = { 0 };
		TAP_OK(auth_bucket_take(&d, 10, 20, t, &retry), "a batch's first job passes a full bucket");
		auth_bucket_charge(&d, 49);
		TAP_OK(!auth_bucket_take(&d, 10, 20, t, &retry) && retry >= 3099 && retry <= 3100,
		       "the other 49 are debt (19 - 49 = -30): the next submit waits 3.1 s at 10/s");
		TAP_OK(!auth_bucket_take(&d, 10, 20, t + 3000, &retry), "not before");
		TAP_OK(auth_bucket_take(&d, 10, 20, t + 3100, &retry), "and then passes");
	}
}

static void test_depth(void)
{
	char deep[200];
	size_t n = 0;

	TAP_INT_EQ(auth_json_depth("{}", 2, 64), 1, "{} has depth 1");
	TAP_INT_EQ(auth_json_depth("{\"a\":[1,{\"b\":[]}]}", 17, 64), 4, "nested depth counted");
	TAP_INT_EQ(auth_json_depth("{\"a\":\"[[[[{{{{\"}", 16, 64), 1, "brackets inside strings do not count");
	TAP_INT_EQ(auth_json_depth("{\"a\":\"\\\"[[[\"}", 13, 64), 1, "an escaped quote does not end the string");
	TAP_INT_EQ(auth_json_depth("[][][]", 6, 64), 1, "siblings do not add up");
	for (int i = 0; i < 70; i++)
		deep[n++] = '[';
	TAP_INT_EQ(auth_json_depth(deep, n, 64), 65, "past the cap it stops at cap + 1");
	TAP_INT_EQ(auth_json_depth(deep, 64, 64), 64, "exactly the cap is allowed");
}

static void test_route_table(void)
{
	unsigned roles = 0;
	enum auth_scope scope = AUTH_SCOPE_NONE;

	TAP_INT_EQ(routes_access("GET", "/healthz", &roles, &scope), 0, "healthz is a route");
	TAP_OK(roles & AUTH_OPEN, "healthz is open");
	routes_access("POST", "/v1/jobs", &roles, &scope);
	TAP_OK((roles & AUTH_SUBMITTER) && !(roles & AUTH_WORKER) && !(roles & AUTH_SUPPORT), "submit: submitters, not workers or support");
	routes_access("GET", "/v1/jobs/7", &roles, &scope);
	TAP_OK((roles & AUTH_SUBMITTER) && (roles & AUTH_SUPPORT) && !(roles & AUTH_WORKER) && scope == AUTH_SCOPE_JOB,
	       "job view: submitter (own) and support, not worker");
	routes_access("POST", "/v1/jobs/7/cancel", &roles, &scope);
	TAP_OK((roles & AUTH_SUBMITTER) && !(roles & AUTH_SUPPORT) && scope == AUTH_SCOPE_JOB, "cancel: submitter (own), not support");
	routes_access("POST", "/v1/jobs/cancel", &roles, &scope);
	TAP_OK(roles == (AUTH_SUBMITTER | AUTH_ADMIN) && scope == AUTH_SCOPE_NONE,
	       "cancel many: submitters (their own, by the filter) and admin, as one cancel; on no one job");
	routes_access("GET", "/v1/jobs/7/log", &roles, &scope);
	TAP_OK((roles & AUTH_SUBMITTER) && (roles & AUTH_SUPPORT) && !(roles & AUTH_WORKER) && scope == AUTH_SCOPE_JOB,
	       "job log: submitter (own) and support, not worker");
	routes_access("POST", "/v1/attempts/3/log", &roles, &scope);
	TAP_OK(roles == (AUTH_WORKER | AUTH_ADMIN) && scope == AUTH_SCOPE_ATTEMPT, "log chunk: worker (own) and admin");
	routes_access("POST", "/v1/workers/3/lease", &roles, &scope);
	TAP_OK(roles == (AUTH_WORKER | AUTH_ADMIN) && scope == AUTH_SCOPE_WORKER, "lease: worker (own) and admin");
	routes_access("POST", "/v1/attempts/3/heartbeat", &roles, &scope);
	TAP_OK(roles == (AUTH_WORKER | AUTH_ADMIN) && scope == AUTH_SCOPE_ATTEMPT, "heartbeat: worker (own) and admin");
	routes_access("POST", "/v1/attempts/3/finish", &roles, &scope);
	TAP_OK(roles == (AUTH_WORKER | AUTH_ADMIN) && scope == AUTH_SCOPE_ATTEMPT, "finish: worker (own) and admin");
	routes_access("POST", "/v1/escalations/3/ack", &roles, &scope);
	TAP_OK(roles == (AUTH_SUPPORT | AUTH_ADMIN), "ack: support and admin");
	routes_access("POST", "/v1/gpus/GPU-1/release", &roles, &scope);
	TAP_OK(roles == (AUTH_SUPPORT | AUTH_ADMIN), "gpu release: support and admin");
	routes_access("POST", "/v1/tokens/4/limits", &roles, &scope);
	TAP_OK(roles == AUTH_ADMIN && scope == AUTH_SCOPE_NONE, "token limits: admin only");
	routes_access("POST", "/v1/plan", &roles, &scope);
	TAP_OK(roles == (AUTH_SUBMITTER | AUTH_SUPPORT | AUTH_ADMIN) && scope == AUTH_SCOPE_NONE,
	       "plan: submitters and staff, not workers, on no job");
	routes_access("GET", "/v1/workers", &roles, &scope);
	TAP_OK(!(roles & AUTH_SUBMITTER) && !(roles & AUTH_WORKER), "worker list: not submitters or workers");
	TAP_INT_EQ(routes_access("POST", "/v1/tokens", &roles, &scope), 0, "token create is a route");
	TAP_OK(roles == AUTH_ADMIN, "token create: admin only");
	routes_access("GET", "/v1/tokens", &roles, &scope);
	TAP_OK(roles == AUTH_ADMIN, "token list: admin only");
	routes_access("POST", "/v1/tokens/5/revoke", &roles, &scope);
	TAP_OK(roles == AUTH_ADMIN, "token revoke: admin only");
	TAP_INT_EQ(routes_access("DELETE", "/v1/jobs/1", &roles, &scope), -1, "no route, no rule");
}

/* The cache's verdicts at given instants: expiry is compared at every request against what the
 * cache holds, the TTL only decides when the database is asked again. */
static void test_cache_expiry(void)
{
	struct auth *a = auth_new(NULL, 0);
	char live[AUTH_HASH_HEX + 1], soon[AUTH_HASH_HEX + 1], gone[AUTH_HASH_HEX + 1];
	const int64_t t0 = 1000000;

	auth_hash_hex("rung_live", live);
	auth_hash_hex("rung_soon", soon);
	auth_hash_hex("rung_gone", gone);
	TAP_INT_EQ(auth_cache_get(a, live, t0), AUTH_CACHED_MISS, "cache: an unknown token is looked up");
	auth_cache_put(a, live, 1, "ci-forever", AUTH_SUBMITTER, INT64_MAX, NULL, t0);
	auth_cache_put(a, soon, 2, "ci-nightly", AUTH_SUBMITTER, t0 + 1500, "2030-01-31T12:00:00Z", t0);
	TAP_INT_EQ(auth_cache_get(a, live, t0 + 10), AUTH_CACHED_LIVE, "cache: a token that never expires is trusted");
	TAP_INT_EQ(auth_cache_get(a, soon, t0 + 10), AUTH_CACHED_LIVE, "cache: an expiring token works before its expiry");
	TAP_INT_EQ(auth_cache_get(a, soon, t0 + 1499), AUTH_CACHED_LIVE, "cache: ... up to the last millisecond");
	TAP_INT_EQ(auth_cache_get(a, soon, t0 + 1500), AUTH_CACHED_EXPIRED,
		   "cache: a cached token is refused at the instant it expires, long before the cache's TTL");
	TAP_OK(1500 < AUTH_CACHE_TTL_MS, "cache: (that instant is within the TTL)");
	TAP_INT_EQ(auth_cache_get(a, live, t0 + 1500), AUTH_CACHED_LIVE, "cache: the other token is not touched");
	TAP_INT_EQ(auth_cache_get(a, soon, t0 + AUTH_CACHE_TTL_MS), AUTH_CACHED_MISS,
		   "cache: past the TTL an expired token is read again (the database decides)");
	TAP_INT_EQ(auth_cache_get(a, live, t0 + AUTH_CACHE_TTL_MS), AUTH_CACHED_MISS, "cache: and so is a live one");
	/* read again with a later expiry (an operator moved it): live again until then */
	auth_cache_put(a, soon, 2, "ci-nightly", AUTH_SUBMITTER, t0 + 60000, "2030-02-01T12:00:00Z", t0 + AUTH_CACHE_TTL_MS);
	TAP_INT_EQ(auth_cache_get(a, soon, t0 + AUTH_CACHE_TTL_MS + 1), AUTH_CACHED_LIVE,
		   "cache: read again with a later expiry, the token works again");
	/* read already expired (the lookup found it so): refused from the cache until the TTL passes */
	auth_cache_put(a, gone, 3, "contractor", AUTH_SUPPORT, t0 - 5, "2020-01-01T00:00:00Z", t0);
	TAP_INT_EQ(auth_cache_get(a, gone, t0), AUTH_CACHED_EXPIRED, "cache: a token read after its expiry is refused");
	auth_free(a);
}

int main(void)
{
	test_sha256();
	test_tokens();
	test_roles();
	test_bucket();
	test_depth();
	test_cache_expiry();
	test_route_table();
	return TAP_DONE();
}
