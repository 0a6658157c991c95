/* HTTP for rungctl (see httpc.h): a fresh curl easy handle per call keeps calls independent; the
 * CLI makes a handful of calls, so connection reuse is not worth the shared state. Each call says
 * `User-Agent: rungctl/VERSION`. */
#include "httpc.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "version.h"

struct httpc {
	char *base;
	char *auth;         /* "Authorization: Bearer ..." or NULL */
	char *agent;        /* "rungctl/VERSION" */
};

struct httpc_buf {
	char *data;
	size_t len, cap;
	int truncated;
};

static size_t on_data(char *ptr, size_t size, size_t n, void *userdata)
{
	struct httpc_buf *b = userdata;
	size_t len = size * n;
	if (b->len + len > HTTPC_MAX_BODY) {
		b->truncated = 1;
		return 0; /* aborts the transfer */
	}
	if (b->len + len + 1 > b->cap) {
		b->cap = (b->len + len + 1) * 2;
		b->data = xrealloc(b->data, b->cap);
	}
	memcpy(b->data + b->len, ptr, len);
	b->len += len;
	b->data[b->len] = '\0';
	return len;
}

struct httpc *httpc_new(const char *base_url, const char *token)
{
	static int curl_ready;
	if (!curl_ready) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		curl_ready = 1;
	}
	struct httpc *h = xcalloc(1, sizeof(*h));
	h->base = xstrdup(base_url);
	size_t l = strlen(h->base);
	while (l > 0 && h->base[l - 1] == '/')
		h->base[--l] = '\0';
	if (token && *token)
		h->auth = xasprintf("Authorization: Bearer %s", token);
	h->agent = xasprintf("rungctl/%s", rung_version());
	return h;
}

void httpc_free(struct httpc *h)
{
	if (!h)
		return;
	free(h->base);
	free(h->auth);
	free(h->agent);
	free(h);
}

char *httpc_escape(const char *segment)
{
	char *e = curl_easy_escape(NULL, segment, 0);
	char *out = xstrdup(e ? e : "");
	curl_free(e);
	return out;
}

int httpc_call(struct httpc *h, const char *method, const char *path, const json_t *body,
	const char *idem_key, long *status, json_t **answer, char **err)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	struct httpc_buf buf = { .data = NULL };
	char *url = xasprintf("%s%s", h->base, path), *text = NULL, *idem = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	int rc = -1;

	*status = 0;
	*answer = NULL;
	*err = NULL;
	if (!c) {
		*err = xstrdup("cannot initialise libcurl");
		goto out;
	}
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	if (h->auth)
		hdrs = curl_slist_append(hdrs, h->auth);
	if (idem_key) {
		idem = xasprintf("Idempotency-Key: %s", idem_key);
		hdrs = curl_slist_append(hdrs, idem);
	}
	if (body) {
		text = json_dumps(body, JSON_COMPACT);
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
	} else if (!strcmp(method, "POST")) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_USERAGENT, h->agent);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &buf);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 60000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	CURLcode cc = curl_easy_perform(c);
	if (cc != CURLE_OK) {
		if (buf.truncated)
			*err = xasprintf("%s %s: answer larger than %u bytes", method, url, HTTPC_MAX_BODY);
		else
			*err = xasprintf("%s %s: %s", method, url, errbuf[0] ? errbuf : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	if (buf.len > 0) {
		json_error_t je;
		*answer = json_loadb(buf.data, buf.len, JSON_DECODE_ANY, &je);
		if (!*answer)
			*answer = json_pack("{s:s, s:s%}", "error", "bad_answer", "message", buf.data,
				buf.len > 500 ? (size_t)500 : buf.len);
		if (!*answer) /* not UTF-8 either */
			*answer = json_pack("{s:s, s:s}", "error", "bad_answer", "message", "answer is not JSON");
	}
	rc = 0;
out:
	free(text);
	free(idem);
	free(url);
	free(buf.data);
	curl_slist_free_all(hdrs);
	if (c)
		curl_easy_cleanup(c);
	return rc;
}
