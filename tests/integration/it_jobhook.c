/* Integration: the job webhook (--job-webhook URL, migration 018). A job that succeeds and one
 * cancelled while queued each reach the receiver once, at the job URL, as job.succeeded and
 * job.cancelled with their summary and links; the first POST is refused (503) and tried again. An
 * ending handled by a replica started without the flag writes no row (its sessions do not ask
 * for one), and a retry's second ending is a second notification. A team's quota crossed, over
 * every pool or in one, is quota.over at the same URL, and quota.under once it is back under
 * (migration 038). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "receiver.h"
#include "util.h"

#define GPU "GPU-hook-0"

/* The JSON body of the receiver's n-th POST (new reference) and its path (heap) into *path. */
static json_t *got_body(struct receiver *rc, int n, char **path)
{
	json_t *b = NULL;

	pthread_mutex_lock(&rc->mu);
	if (n < RECV_MAX && rc->bodies[n]) {
		b = json_loads(rc->bodies[n], 0, NULL);
		*path = xstrdup(rc->paths[n] ? rc->paths[n] : "");
	} else {
		*path = xstrdup("");
	}
	pthread_mutex_unlock(&rc->mu);
	return b;
}

/* The received body (new reference) whose job_id is id and event ev, or NULL. */
static json_t *find_event(struct receiver *rc, const char *id, const char *ev)
{
	int n = recv_count(rc);

	for (int i = 0; i < n && i < RECV_MAX; i++) {
		char *path = NULL, *jid;
		json_t *b = got_body(rc, i, &path);
		jid = h_id(b, "job_id");
		free(path);
		if (jid && !strcmp(jid, id) && !strcmp(h_str(b, "event"), ev)) {
			free(jid);
			return b;
		}
		free(jid);
		json_decref(b);
	}
	return NULL;
}

struct sql_wait {
	struct harness *h;
	const char *sql;
	long long want;
};

static bool sql_reaches(void *arg)
{
	struct sql_wait *w = arg;
	return h_sql_int(w->h, w->sql, 0, NULL) >= w->want;
}

int main(void)
{
	struct harness *h = h_new("it_jobhook");
	struct receiver rc = { .fail_first = 1 };
	struct h_proc plain = { 0 };
	char *url = NULL, *wid = NULL, *ida = NULL, *idb = NULL, *idc = NULL, *plain_url = NULL, *aid = NULL;
	json_t *cfg = h_config("hooked", 10), *extra = json_pack("{s:{s:b, s:i}, s:{s:s}}", "recovery", "scale_up", 0,
							  "max_attempts", 1, "labels", "team", "vision");
	json_t *a = NULL, *b = NULL, *c = NULL, *lease = NULL, *done = NULL, *ev = NULL, *ok = h_facts_success(10);
	long st = 0;

	pthread_mutex_init(&rc.mu, NULL);
	rc.port = unused_port();
	url = xasprintf("http://127.0.0.1:%d/jobs", rc.port);
	if (!h_ok(h, rc.port > 0 && recv_start(&rc) == 0, "receiver listening"))
		goto out;
	{
		const char *flags[] = { "--job-webhook", url, "--webhook-poll-ms", "50", "--webhook-backoff-ms", "100", NULL };
		if (!h_ok(h, h_server_start(h, flags) == 0, "rungd started with --job-webhook"))
			goto out;
	}
	wid = h_fake_register(h, "hook-w1", GPU, 24576);
	a = h_submit(h, cfg, extra);
	ida = h_id(a, "id");
	lease = wid && ida ? h_fake_lease(h, wid, GPU, 5000, &st) : NULL;
	aid = h_id(lease, "attempt_id");
	if (!h_ok(h, aid != NULL, "a job leased (%ld)", st))
		goto out;
	done = h_fake_finish(h, aid, h_str(lease, "token"), ok, &st);
	h_ok(h, st == 200 && !strcmp(h_str(json_object_get(done, "decision"), "job_state"), "succeeded"), "it succeeds");
	b = h_submit(h, cfg, extra);
	idb = h_id(b, "id");
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", idb ? idb : "0"));
	h_ok(h, st == 200, "a second job cancelled while queued");
	{
		struct sql_wait delivered = { h, "SELECT count(*) FROM webhook_outbox WHERE kind = 'job' AND delivered_at IS NOT NULL", 2 };
		h_ok(h, wait_until(sql_reaches, &delivered, 20000), "both endings delivered");
	}
	ev = find_event(&rc, ida, "job.succeeded");
	{
		char *want = xasprintf("/v1/jobs/%s", ida);
		h_ok(h, ev && !strcmp(h_str(ev, "state"), "succeeded") && *h_str(ev, "summary") && h_int(ev, "attempts") == 1 &&
			     !strcmp(h_str(ev, "job"), want) && !strcmp(h_str(ev, "name"), "hooked") && *h_str(ev, "finished_at"),
		     "job.succeeded: state, summary, attempts, name, links");
		h_ok(h, ev && !strcmp(h_str(json_object_get(ev, "labels"), "team"), "vision") &&
			     json_object_size(json_object_get(ev, "labels")) == 1,
		     "and the job's labels, for the receiver to route by");
		free(want);
	}
	if (h->failed)
		h_diag_json("job.succeeded", ev);
	json_decref(ev);
	ev = NULL;
	ev = find_event(&rc, idb, "job.cancelled");
	h_ok(h, ev && !strcmp(h_str(ev, "class"), "cancelled"), "job.cancelled for the cancelled job");
	json_decref(ev);
	ev = NULL;
	{
		char *path = NULL;
		json_decref(got_body(&rc, 0, &path));
		h_ok(h, !strcmp(path, "/jobs"), "POSTed to the job URL (%s)", path);
		free(path);
	}
	h_ok(h, recv_count(&rc) == 3 && h_sql_int(h, "SELECT max(attempts) FROM webhook_outbox", 0, NULL) == 2,
	     "the refused first POST was tried again: three POSTs for two rows (%d)", recv_count(&rc));

	/* a replica without --job-webhook: its endings write no row */
	{
		const char *none[] = { NULL };
		if (!h_ok(h, h_replica_start(h, &plain, "plain", none, &plain_url) == 0, "a replica without the flag"))
			goto out;
	}
	c = h_submit(h, cfg, extra);
	idc = h_id(c, "id");
	{
		char *save = h->base_url;
		h->base_url = plain_url;
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", idc ? idc : "0"));
		h->base_url = save;
	}
	{
		const char *p[1] = { idc };
		h_ok(h, st == 200 && h_sql_int(h, "SELECT count(*) FROM webhook_outbox WHERE job_id = $1::bigint", 1, p) == 0,
		     "cancelled through that replica: no outbox row");
		/* retried and cancelled again through the hooked one: its second ending is a second row */
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/retry", idc));
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", idc));
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM webhook_outbox WHERE job_id = $1::bigint AND kind = 'job'", 1, p) == 1,
		     "retried and cancelled through this one: one row");
	}
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM webhook_outbox WHERE kind = 'escalation'", 0, NULL) == 0,
	     "no escalation rows (none opened)");

	/* quota webhooks (migration 038): a quota set below what the team used, over every pool and in
	 * h200, is two quota.over POSTs to the job URL; raised, two quota.under */
	{
		long long tid = h_sql_int(h, "SELECT id FROM tokens WHERE name = 'it-submitter'", 0, NULL);
		json_t *body = json_loads("{\"gpu_hours\": 0, \"pool_gpu_hours\": {\"h200\": 0}}", 0, NULL);
		struct sql_wait over = { h, "SELECT count(*) FROM webhook_outbox WHERE kind = 'quota' AND delivered_at IS NOT NULL", 2 };
		struct sql_wait under = { h, "SELECT count(*) FROM webhook_outbox WHERE kind = 'quota' AND delivered_at IS NOT NULL", 4 };
		json_t *q = NULL;
		int n;

		json_decref(h_postf(h, body, &st, "/v1/tokens/%lld/limits", tid));
		h_ok(h, st == 200 && wait_until(sql_reaches, &over, 20000),
		     "a quota of 0, over every pool and in h200: two quota rows delivered (%ld)", st);
		n = recv_count(&rc);
		for (int i = 0; i < n && i < RECV_MAX; i++) {
			char *path = NULL;
			json_t *got = got_body(&rc, i, &path);
			if (!strcmp(h_str(got, "event"), "quota.over") && json_is_string(json_object_get(got, "pool")) &&
			    !strcmp(path, "/jobs")) {
				json_decref(q);
				q = json_incref(got);
			}
			json_decref(got);
			free(path);
		}
		h_ok(h, q && !strcmp(h_str(q, "owner"), "it-submitter") && !strcmp(h_str(q, "pool"), "h200") &&
			     json_number_value(json_object_get(q, "gpu_hours")) == 0 && h_int(q, "days") == 7 &&
			     !strcmp(h_str(q, "ui"), "/ui/gpus"),
		     "quota.over for pool h200 at the job URL: owner, pool, hours, window, where to look");
		if (h->failed)
			h_diag_json("quota.over", q);
		json_decref(q);
		json_decref(body);
		body = json_loads("{\"gpu_hours\": 10, \"pool_gpu_hours\": {\"h200\": 10}}", 0, NULL);
		json_decref(h_postf(h, body, &st, "/v1/tokens/%lld/limits", tid));
		h_ok(h, st == 200 && wait_until(sql_reaches, &under, 20000) &&
			     h_sql_int(h, "SELECT count(*) FROM webhook_outbox WHERE kind = 'quota' AND payload->>'event' = 'quota.under'",
				       0, NULL) == 2,
		     "raised to 10 hours: two quota.under delivered (%ld)", st);
		json_decref(body);
		body = json_loads("{\"gpu_hours\": null, \"pool_gpu_hours\": null}", 0, NULL);
		json_decref(h_postf(h, body, &st, "/v1/tokens/%lld/limits", tid));
		h_ok(h, st == 200 && h_sql_int(h, "SELECT count(*) FROM webhook_outbox WHERE kind = 'quota'", 0, NULL) == 4,
		     "lifted: no more rows (an admin lifting a quota is told by no webhook)");
		json_decref(body);
	}
out:
	h_replica_free(h, &plain);
	free(plain_url);
	json_decref(ok);
	json_decref(ev);
	json_decref(done);
	json_decref(lease);
	json_decref(a);
	json_decref(b);
	json_decref(c);
	json_decref(cfg);
	json_decref(extra);
	free(aid);
	free(ida);
	free(idb);
	free(idc);
	free(wid);
	free(url);
	{
		int code = h_free(h);
		recv_stop(&rc);
		return code;
	}
}
