/* HTTP client to rungd (see client.h) on a libcurl easy handle reused between calls (keeps the
 * connection), each call identified as `User-Agent: rung-worker/VERSION`. Answers are capped at
 * 1 MiB; the progress callback watches the abort flag. Says once when rungd refuses the bearer
 * token as expired. */
#include "client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"
#include "version.h"

#define CLIENT_ANSWER_CAP (1024 * 1024)

static char *client_auth; /* "Authorization: Bearer TOKEN" or NULL (client_set_token) */
static atomic_int client_expired_said; /* the token's expiry was logged; a call that passes resets it */

/* Every call comes here with its answer: a 401 token_expired is logged once, in one line that says
 * what to do, however many slots and retries meet it (each caller still logs its own failure and
 * retries as it always does); a call that passes means the token works again (an admin moved its
 * expiry), so a later expiry is said again. */
static void client_note_token(long status, const json_t *answer)
{
	const char *error = json_string_value(json_object_get(answer, "error"));

	if (status >= 200 && status < 300) {
		atomic_store(&client_expired_said, 0);
		return;
	}
	if (status != 401 || !error || strcmp(error, "token_expired") != 0)
		return;
	if (atomic_exchange(&client_expired_said, 1))
		return;
	log_error("this worker's token expired: rungd refuses every call until it gets a new one",
		  "message=\"%s\" fix=\"create a worker token (rungctl token create --role worker), give it to rung-worker "
		  "(RUNG_TOKEN or --token) and restart it\"",
		  json_string_value(json_object_get(answer, "message")) ?: "");
}

void client_set_token(const char *token)
{
	free(client_auth);
	client_auth = token && *token ? xasprintf("Authorization: Bearer %s", token) : NULL;
}

struct client {
	CURL *curl;
	char *base;
	char *agent;        /* "rung-worker/VERSION" */
	char *buf;          /* answer being received */
	size_t len;
	int overflow;
};

struct client *client_new(const char *base_url)
{
	struct client *c = xcalloc(1, sizeof *c);
	size_t l;
	c->curl = curl_easy_init();
	if (!c->curl) {
		fprintf(stderr, "fatal: curl_easy_init failed\n");
		abort();
	}
	c->base = xstrdup(base_url);
	c->agent = xasprintf("rung-worker/%s", rung_version());
	l = strlen(c->base);
	while (l && c->base[l - 1] == '/')
		c->base[--l] = '\0';
	return c;
}

void client_free(struct client *c)
{
	if (!c)
		return;
	curl_easy_cleanup(c->curl);
	free(c->base);
	free(c->agent);
	free(c->buf);
	free(c);
}

static size_t client_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct client *c = arg;
	size_t n = size * nmemb;
	if (c->len + n > CLIENT_ANSWER_CAP) {
		c->overflow = 1;
		return 0;
	}
	c->buf = xrealloc(c->buf, c->len + n + 1);
	memcpy(c->buf + c->len, data, n);
	c->len += n;
	c->buf[c->len] = '\0';
	return n;
}

static int client_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t d, curl_off_t e)
{
	const atomic_int *abort_flag = arg;
	(void)a, (void)b, (void)d, (void)e;
	return abort_flag && atomic_load(abort_flag) ? 1 : 0;
}

int client_post(struct client *c, const char *path, const json_t *body, long timeout_ms,
		const atomic_int *abort_flag, json_t **answer, char **err)
{
	char *url = xasprintf("%s%s", c->base, path), *text = body ? json_dumps(body, JSON_COMPACT) : xstrdup("{}");
	struct curl_slist *hdrs = NULL;
	long status = 0;
	CURLcode rc;
	int result = -1;

	*answer = NULL;
	c->len = 0;
	c->overflow = 0;
	if (!text) {
		*err = xstrdup("cannot serialise request body");
		goto out;
	}
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (client_auth)
		hdrs = curl_slist_append(hdrs, client_auth);
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_USERAGENT, c->agent);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, text);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, client_write);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, client_progress);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, (void *)abort_flag);
	rc = curl_easy_perform(c->curl);
	if (rc != CURLE_OK) {
		*err = xasprintf("POST %s: %s%s", url, curl_easy_strerror(rc),
				 c->overflow ? " (answer over 1 MiB)" : "");
		goto out;
	}
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (c->len)
		*answer = json_loadb(c->buf, c->len, 0, NULL);
	client_note_token(status, *answer);
	result = (int)status;
out:
	curl_slist_free_all(hdrs);
	free(text);
	free(url);
	return result;
}
