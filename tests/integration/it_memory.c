/* Integration: the memory model's data and routes (issue 12, migrations/014_memory.sql) with the real
 * rungd, rung-worker and simulated trainer: each ended attempt stores its peak, features and
 * observation; the CTX of a later finish carries them; /v1/profiles lists the fitted profile and
 * the reset empties it; /v1/jobs/{id}/memory estimates a job's config; bad input is a named 4xx;
 * a worker's --gpu-memory-mib is the size rung registers, learns by and holds the trainer to; the H200
 * run's video replayed on the simulator: the search ends on a failed step with the job's config the
 * one that succeeded, and a second job of that config starts where the search ended. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "memmodel.h"
#include "util.h"

#define GPU_24G 24576

/* The observations and arch of the CTX of running attempt AID (token TOK), read with the same
 * statement rungd runs at a finish (STABLE: it changes nothing). *n_obs: -1 on error. */
static char *ctx_memory(struct harness *h, const char *aid, const char *tok, long long *n_obs, long long *gpu)
{
	char *item = xasprintf("[{\"i\": 0, \"id\": %s, \"token\": \"%s\", \"facts\": {}}]", aid, tok);
	const char *params[1] = { item };
	PGresult *r = h_sql(h, "SELECT jsonb_array_length(ctx->'memory'->'observations'), ctx->'memory'->>'arch', "
			       "(ctx->'memory'->>'gpu_mib')::int FROM rung_finish_ctx_batch($1::jsonb)", 1, params);
	char *arch = NULL;

	*n_obs = -1;
	if (r && PQntuples(r) == 1) {
		*n_obs = atoll(PQgetvalue(r, 0, 0));
		arch = xstrdup(PQgetvalue(r, 0, 1));
		*gpu = atoll(PQgetvalue(r, 0, 2));
	}
	PQclear(r);
	free(item);
	return arch;
}

/* The flux/24 GiB profile of GET /v1/profiles (new reference) or NULL. */
static json_t *flux_profile(struct harness *h)
{
	long st = 0;
	json_t *ans = h_get(h, "/v1/profiles", &st), *p, *out = NULL;
	size_t i;

	json_array_foreach(json_object_get(ans, "profiles"), i, p)
		if (!strcmp(h_str(p, "arch"), "flux") && h_int(p, "gpu_class_mib") == GPU_24G)
			out = json_incref(p);
	json_decref(ans);
	return out;
}

/* The arch rungd stores (memmodel_arch, C) and the one the CTX picks (rung_config_arch, SQL) agree. */
static void test_arch_agrees(struct harness *h)
{
	static const char *const models[] = {
		"{\"arch\": \"flux\"}", "{\"arch\": \"wan22_14b:i2v\"}", "{\"is_flux\": true}", "{\"is_xl\": true}",
		"{\"is_v3\": true}", "{}", "{\"arch\": \"\"}", "{\"arch\": 5, \"is_flux\": true}",
		"{\"arch\": \"qwen_image\", \"is_flux\": true}",
	};
	int agree = 0;

	for (size_t i = 0; i < ARRAY_LEN(models); i++) {
		char *cfg = xasprintf("{\"config\": {\"process\": [{\"model\": %s}]}}", models[i]), c_arch[64];
		json_t *j = json_loads(cfg, 0, NULL);
		const char *params[1] = { cfg };
		PGresult *r = h_sql(h, "SELECT rung_config_arch($1::jsonb)", 1, params);
		memmodel_arch(j, c_arch, sizeof c_arch);
		if (r && PQntuples(r) == 1 && !strcmp(PQgetvalue(r, 0, 0), c_arch))
			agree++;
		else
			h_diag("model %s: C says %s, SQL says %s", models[i], c_arch, r && PQntuples(r) ? PQgetvalue(r, 0, 0) : "?");
		PQclear(r);
		json_decref(j);
		free(cfg);
	}
	h_ok(h, agree == (int)ARRAY_LEN(models), "SQL rung_config_arch agrees with memmodel_arch on %d/%zu models", agree,
	     ARRAY_LEN(models));
}

/* A job that runs out of memory once and then fits: both attempts store peak, features and an
 * observation; the profile rests on them; the job's estimate uses it. Returns the job id (heap). */
static char *test_stored(struct harness *h)
{
	static const char *const env[] = { "RUNG_SIM_STEP_MS=60", "RUNG_SIM_LOAD_MS=400", NULL };
	static const char *const args[] = { "--memory-sample-ms", "50", NULL };
	char *gpus = h_sim_gpus("mem", 1, GPU_24G);
	struct h_worker_opts o = { .gpus_json = gpus, .env = env, .args = args };
	struct h_worker *w = h_worker_start(h, "wmem", &o);
	json_t *cfg = h_config("mem_batch", 20), *extra = json_pack("{s:{s:b}}", "recovery", "scale_up", 0);
	json_t *job, *done = NULL, *prof = NULL, *est = NULL;
	long long n24;
	char *id = NULL;
	long st = 0;

	h_config_set(cfg, "config.process[0].train.batch_size", json_integer(4));
	job = h_submit(h, cfg, extra);
	id = h_id(job, "id");
	if (!h_ok(h, w && id, "worker and job started"))
		goto out;
	done = h_wait_job(h, id, "succeeded", 60000 * h_slow());
	h_ok(h, done && h_int(done, "attempts") == 2, "batch 4 runs out of memory once, then fits (%lld attempts)",
	     done ? h_int(done, "attempts") : -1);
	{
		const char *params[1] = { id };
		PGresult *r = h_sql(h, "SELECT number, peak_mib, peak_phase, mem_arch, mem_gpu_mib, "
				       "(coalesce(mem_obs->'features', mem_features)->>'batch')::int, mem_obs->>'outcome', (mem_obs->>'need_mib')::int, "
				       "(mem_obs->>'peak_mib')::int, (mem_features IS NULL)::text FROM attempts WHERE job_id = $1::bigint "
				       "ORDER BY number", 1, params);
		bool two = r && PQntuples(r) == 2;
		h_ok(h, two, "two attempts stored");
		if (two) {
			/* the simulated trainer registers what each phase holds; idle memory.used is 12 MiB */
			h_ok(h, atoi(PQgetvalue(r, 0, 1)) > 10000 && atoi(PQgetvalue(r, 1, 1)) > 10000,
			     "each attempt stores the peak nvidia-smi read while it ran (%s, %s MiB)", PQgetvalue(r, 0, 1),
			     PQgetvalue(r, 1, 1));
			h_ok(h, atoi(PQgetvalue(r, 1, 1)) <= GPU_24G, "a peak never exceeds the GPU");
			h_ok(h, !PQgetisnull(r, 0, 2) && !PQgetisnull(r, 1, 2), "and the phase it was in (%s, %s)",
			     PQgetvalue(r, 0, 2), PQgetvalue(r, 1, 2));
			h_ok(h, !strcmp(PQgetvalue(r, 0, 3), "flux") && atoi(PQgetvalue(r, 0, 4)) == GPU_24G,
			     "arch and GPU stored (%s, %s)", PQgetvalue(r, 0, 3), PQgetvalue(r, 0, 4));
			h_ok(h, atoi(PQgetvalue(r, 0, 5)) == 4 && atoi(PQgetvalue(r, 1, 5)) == 1,
			     "features of the config each attempt ran (batch %s then %s)", PQgetvalue(r, 0, 5), PQgetvalue(r, 1, 5));
			h_ok(h, !strcmp(PQgetvalue(r, 0, 6), "oom") && !strcmp(PQgetvalue(r, 1, 6), "fit"),
			     "observations: oom then fit (%s, %s)", PQgetvalue(r, 0, 6), PQgetvalue(r, 1, 6));
			/* AI Toolkit skips a training step's OOM without PyTorch's message: no figures, no bound */
			h_ok(h, PQgetisnull(r, 0, 7), "a skipped-batch OOM has no lower bound (need_mib null)");
			h_ok(h, !strcmp(PQgetvalue(r, 1, 8), PQgetvalue(r, 1, 1)), "the observation carries the stored peak");
			h_ok(h, !strcmp(PQgetvalue(r, 0, 9), "true") && !strcmp(PQgetvalue(r, 1, 9), "true"),
			     "the features are stored once: in the observation, not again in mem_features (%s, %s)",
			     PQgetvalue(r, 0, 9), PQgetvalue(r, 1, 9));
		}
		PQclear(r);
	}
	prof = flux_profile(h);
	h_ok(h, prof && h_int(prof, "n") == 2, "GET /v1/profiles: flux on 24 GiB rests on 2 attempts (n %lld)",
	     prof ? h_int(prof, "n") : -1);
	h_ok(h, prof && json_is_object(json_object_get(prof, "coef")) && json_is_array(json_object_get(prof, "fits")) &&
	     json_is_null(json_object_get(prof, "reset_at")), "the profile shows its figures and fits, never reset");
	est = h_getf(h, &st, "/v1/jobs/%s/memory", id);
	h_ok(h, st == 200 && h_int(est, "gpu_mib") == GPU_24G && !strcmp(h_str(est, "arch"), "flux"),
	     "GET /v1/jobs/ID/memory: the GPU of the latest attempt");
	h_ok(h, h_int(json_object_get(est, "features"), "batch") == 1, "the estimate is of the current config (batch 1)");
	h_ok(h, json_is_object(json_object_get(est, "estimate")) &&
	     strlen(h_str(json_object_get(est, "estimate"), "evidence")) > 0, "with a prediction and its evidence");
	if (h->failed)
		h_diag_json("memory", est);
	{
		int rc = -1;
		char *args = xasprintf("show %s", id), *out = h_rungctl(h, args, &rc);
		/* the figure is the measured peak of a heavier run: a slow host samples it a little differently */
		h_ok(h, rc == 0 && strstr(out, "memory estimate   2") && strstr(out, " GiB peak on a 24.0 GiB GPU: fits\n") &&
		     strstr(out, "  evidence        flux:") &&
		     strstr(out, "learned from    2 attempt(s) of flux (2 on 24576 MiB GPUs; 1 fit, 1 out of memory)"),
		     "rungctl show prints the estimate of the current config, its evidence and what it rests on");
		if (h->failed)
			h_diag("rungctl show: %s", out);
		free(out);
		out = h_rungctl(h, "profiles", &rc);
		h_ok(h, rc == 0 && strstr(out, "ARCH") && strstr(out, "\nflux  24576          2         2     1    1  "),
		     "rungctl profiles lists flux on 24576 MiB resting on 2 attempts");
		if (h->failed)
			h_diag("rungctl profiles: %s", out);
		free(out);
		out = h_rungctl(h, "profiles reset nosuch 24576", &rc);
		h_ok(h, rc == 4 && strstr(out, "404"), "rungctl profiles reset of an unknown profile: exit 4");
		free(out);
		free(args);
	}
	{
		char *cookie = xasprintf("Cookie: rung_token=%s", h->admin_token), *path = xasprintf("/ui/jobs/%s", id);
		const char *hdr[] = { cookie, NULL };
		json_decref(h_request(h, "GET", path, NULL, 0, hdr, &st));
		h_ok(h, st == 200 && h->last_body && strstr(h->last_body, "<dt>memory peak</dt><dd>2"),
		     "the web job page shows each attempt's memory peak");
		free(path);
		free(cookie);
	}
	n24 = h_int(json_object_get(est, "profile"), "n");
	json_decref(est);
	est = h_getf(h, &st, "/v1/jobs/%s/memory?gpu_mib=81920", id);
	h_ok(h, st == 200 && h_int(est, "gpu_mib") == 81920 && h_int(json_object_get(est, "profile"), "n_here") == 0 &&
	     h_int(json_object_get(est, "profile"), "n") == n24 && n24 > 0,
	     "?gpu_mib picks another GPU class: nothing measured there, the arch's observations from every class count");
out:
	if (w)
		h_worker_stop(h, w, SIGTERM);
	json_decref(est);
	json_decref(prof);
	json_decref(done);
	json_decref(job);
	json_decref(extra);
	json_decref(cfg);
	free(gpus);
	return id;
}

/* The finish cost (issue 12): with 200 more flux/24 GiB observations stored (copies of the first
 * job's, under its job), the CTX of running attempt AID carries 48, compact (no "at", no false or 0
 * features but grad_ckpt), and is far smaller than the 200 full ones GET /v1/profiles reads. The
 * copies are removed again. */
static void ctx_cost(struct harness *h, const char *aid, const char *tok)
{
	char *item = xasprintf("[{\"i\": 0, \"id\": %s, \"token\": \"%s\", \"facts\": {}}]", aid, tok);
	const char *params[1] = { item };
	PGresult *r;
	long long added;

	added = h_sql_int(h, "WITH ins AS (INSERT INTO attempts (job_id, number, config, config_hash, token, lease_expires_at, "
			  "state, outcome, ended_at, mem_features, mem_arch, mem_gpu_mib, mem_obs) "
			  "SELECT a.job_id, 1000 + g, a.config, a.config_hash, 'copy' || g, now(), 'ended', a.outcome, now(), "
			  "a.mem_features, a.mem_arch, a.mem_gpu_mib, a.mem_obs "
			  "FROM (SELECT * FROM attempts WHERE mem_obs IS NOT NULL ORDER BY id LIMIT 1) a, generate_series(1, 200) g "
			  "RETURNING 1) SELECT count(*) FROM ins", 0, NULL);
	r = h_sql(h, "SELECT jsonb_array_length(c.o), octet_length(c.o::text), "
		     "octet_length(rung_memory_observations('flux', (c.ctx->'memory'->>'gpu_mib')::int, NULL)::text), "
		     "(SELECT count(*) FROM jsonb_array_elements(c.o) e WHERE e ? 'at' OR NOT e->'features' ? 'grad_ckpt' "
		     "   OR e->'features' @> '{\"low_vram\": false}'), octet_length(c.ctx::text) "
		     "FROM (SELECT ctx, ctx->'memory'->'observations' AS o FROM rung_finish_ctx_batch($1::jsonb)) c", 1, params);
	if (h_ok(h, added == 200 && r && PQntuples(r) == 1, "200 more observations stored (%lld)", added)) {
		long long n = atoll(PQgetvalue(r, 0, 0)), now = atoll(PQgetvalue(r, 0, 1)), full = atoll(PQgetvalue(r, 0, 2));
		h_ok(h, n == 48, "the CTX carries at most 48 observations (%lld)", n);
		h_ok(h, atoll(PQgetvalue(r, 0, 3)) == 0, "compact: no \"at\", grad_ckpt kept, false settings left out");
		h_ok(h, now * 4 < full, "the CTX's observations are %lld bytes, the 200 full ones %lld (CTX %s bytes)", now, full,
		     PQgetvalue(r, 0, 4));
	}
	PQclear(r);
	h_sql_int(h, "WITH d AS (DELETE FROM attempts WHERE number > 1000 AND token LIKE 'copy%' RETURNING 1) "
		     "SELECT count(*) FROM d", 0, NULL);
	free(item);
}

/* A later attempt's CTX carries the stored observations; a reset empties the profile and the CTX. */
static void test_ctx_and_reset(struct harness *h)
{
	char *wid = h_fake_register(h, "fake-mem", "GPU-fake-mem", GPU_24G), *aid = NULL, *arch = NULL;
	json_t *cfg = h_config("mem_ctx", 10), *job = h_submit(h, cfg, NULL), *lease = NULL, *ans = NULL, *prof = NULL;
	json_t *facts = json_pack("{s:i, s:n, s:b, s:s, s:s, s:i, s:i, s:i, s:i, s:{s:i, s:i}, "
				  "s:{s:i, s:i, s:i, s:i, s:[]}, s:s, s:i, s:[s], s:{s:i, s:s, s:i}}",
				  "exit_code", 1, "signal", "cancelled", 0, "phase", "train", "oom_phase", "train",
				  "first_step", 0, "last_step", 3, "steps_done", 3, "total_steps", 10, "signatures",
				  "cuda_oom", 1, "error_running_job", 1, "oom", "tried_to_allocate_mib", 2048,
				  "total_capacity_mib", 24564, "free_mib", 1100, "allocated_by_pytorch_mib", 21000,
				  "processes", "error", "torch.OutOfMemoryError: CUDA out of memory", "duration_ms", 4000,
				  "log_tail", "torch.OutOfMemoryError: CUDA out of memory", "peak", "mib", 23500, "phase",
				  "train", "step", 3);
	long long n = -1, gpu = -1;
	long st = 0;

	lease = wid ? h_fake_lease(h, wid, "GPU-fake-mem", 5000, &st) : NULL;
	aid = h_id(lease, "attempt_id");
	if (!h_ok(h, job && aid, "a fake worker leases a second flux job"))
		goto out;
	arch = ctx_memory(h, aid, h_str(lease, "token"), &n, &gpu);
	h_ok(h, n == 2 && arch && !strcmp(arch, "flux") && gpu == GPU_24G,
	     "its CTX carries the 2 observations of the first job (%lld, arch %s, gpu %lld)", n, arch ? arch : "?", gpu);
	free(arch);
	ctx_cost(h, aid, h_str(lease, "token"));

	{
		json_t *body = json_pack("{s:s}", "note", "driver 550 -> 560");
		ans = h_postf(h, body, &st, "/v1/profiles/flux/%d/reset", GPU_24G);
		json_decref(body);
	}
	h_ok(h, st == 200 && !strcmp(h_str(ans, "arch"), "flux") && h_int(ans, "gpu_class_mib") == GPU_24G &&
	     strlen(h_str(ans, "reset_at")) > 0 && !strcmp(h_str(ans, "note"), "driver 550 -> 560"),
	     "POST /v1/profiles/flux/24576/reset {note} answers the reset with its note");
	json_decref(ans);
	{
		PGresult *r = h_sql(h, "SELECT data->>'note', reason FROM events WHERE kind = 'profile_reset'", 0, NULL);
		h_ok(h, r && PQntuples(r) == 1 && !strcmp(PQgetvalue(r, 0, 0), "driver 550 -> 560") &&
		     strstr(PQgetvalue(r, 0, 1), ": driver 550 -> 560"), "the reset's event keeps the note (%s)",
		     r && PQntuples(r) ? PQgetvalue(r, 0, 1) : "?");
		PQclear(r);
	}
	prof = flux_profile(h);
	h_ok(h, prof && h_int(prof, "n") == 0 && !json_is_null(json_object_get(prof, "reset_at")),
	     "after the reset the profile rests on nothing and says when it was reset");
	h_ok(h, h_sql_int(h, "SELECT count(*) FROM events WHERE kind = 'profile_reset'", 0, NULL) == 1,
	     "the reset is an event");
	arch = ctx_memory(h, aid, h_str(lease, "token"), &n, &gpu);
	h_ok(h, n == 0, "and the CTX no longer carries the old observations (%lld)", n);
	free(arch);

	ans = h_fake_finish(h, aid, h_str(lease, "token"), facts, &st);
	h_ok(h, st == 200 && !strcmp(h_str(json_object_get(ans, "decision"), "class"), "oom_train_early"),
	     "the fake attempt ends out of memory in training (%s)", h_str(json_object_get(ans, "decision"), "class"));
	json_decref(ans);
	{
		const char *params[1] = { aid };
		PGresult *r = h_sql(h, "SELECT peak_mib, peak_phase, mem_obs->>'outcome', (mem_obs->>'need_mib')::int, "
				       "mem_obs->>'phase', (mem_obs->>'peak_mib')::int FROM attempts WHERE id = $1::bigint", 1, params);
		h_ok(h, r && PQntuples(r) == 1 && atoi(PQgetvalue(r, 0, 0)) == 23500 && !strcmp(PQgetvalue(r, 0, 1), "train"),
		     "FACTS.peak stored as reported (%s MiB in %s)", r ? PQgetvalue(r, 0, 0) : "?", r ? PQgetvalue(r, 0, 1) : "?");
		h_ok(h, r && PQntuples(r) == 1 && !strcmp(PQgetvalue(r, 0, 2), "oom") && atoi(PQgetvalue(r, 0, 3)) == 23048 &&
		     !strcmp(PQgetvalue(r, 0, 4), "train") && atoi(PQgetvalue(r, 0, 5)) == 23500,
		     "the observation keeps the OOM's lower bound (allocated 21000 + tried 2048 = %s MiB), phase and peak",
		     r ? PQgetvalue(r, 0, 3) : "?");
		PQclear(r);
	}
	json_decref(prof);
	prof = flux_profile(h);
	h_ok(h, prof && h_int(prof, "n") == 1, "an attempt after the reset counts again (n %lld)", prof ? h_int(prof, "n") : -1);
	{
		char *jid = h_id(lease, "job_id");
		json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", jid ? jid : "0"));
		free(jid);
	}
out:
	json_decref(prof);
	json_decref(facts);
	json_decref(lease);
	json_decref(job);
	json_decref(cfg);
	free(aid);
	free(wid);
}

/* Bad input to the routes: a 4xx JSON error naming the field; roles. */
static void test_bad_input(struct harness *h, const char *job_id)
{
	static const struct {
		const char *method, *path, *field;
		long status;
		const char *body;
	} cases[] = {
		{ "POST", "/v1/profiles/flux/24576/reset", "note", 400, "{\"note\": 42}" },
		{ "POST", "/v1/profiles/flux/24576/reset", NULL, 400, "{\"note\": " }, /* invalid_json */
		{ "POST", "/v1/profiles/fl%20ux/24576/reset", "arch", 400, NULL },
		{ "POST", "/v1/profiles/flux/abc/reset", "gpu_class_mib", 400, NULL },
		{ "POST", "/v1/profiles/flux/0/reset", "gpu_class_mib", 400, NULL },
		{ "POST", "/v1/profiles/flux/99999999999/reset", "gpu_class_mib", 400, NULL },
		{ "GET", "/v1/profiles?arch=a;b", "arch", 400, NULL },
		{ "POST", "/v1/profiles/nosuch/24576/reset", NULL, 404, NULL },
	};
	long st = 0;
	json_t *ans;

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		ans = h_request(h, cases[i].method, cases[i].path, cases[i].body ? cases[i].body : "",
				cases[i].body ? strlen(cases[i].body) : 0, NULL, &st);
		h_ok(h, st == cases[i].status && json_is_string(json_object_get(ans, "error")) &&
		     (!cases[i].field || !strcmp(h_str(ans, "field"), cases[i].field)), "%s %s: %ld naming %s (got %ld, %s)",
		     cases[i].method, cases[i].path, cases[i].status, cases[i].field ? cases[i].field : "-", st,
		     h_str(ans, "field"));
		json_decref(ans);
	}
	ans = h_getf(h, &st, "/v1/jobs/%s/memory?gpu_mib=-5", job_id ? job_id : "1");
	h_ok(h, st == 400 && !strcmp(h_str(ans, "field"), "gpu_mib"), "GET /v1/jobs/ID/memory?gpu_mib=-5: 400 naming gpu_mib");
	json_decref(ans);
	ans = h_get(h, "/v1/jobs/999999/memory", &st);
	h_ok(h, st == 404, "the memory of a missing job: 404");
	json_decref(ans);
	h->auth_token = h->submitter_token;
	ans = h_get(h, "/v1/profiles", &st);
	h_ok(h, st == 403, "a submitter may not list profiles (403)");
	json_decref(ans);
	ans = h_post(h, "/v1/profiles/flux/24576/reset", NULL, &st);
	h_ok(h, st == 403, "nor reset one (403)");
	json_decref(ans);
	h->auth_token = h->admin_token;
}

/* FACTS of an OOM in training at step 3 on a GPU of capacity MiB. New reference. */
static json_t *oom_facts(int capacity)
{
	return json_pack("{s:i, s:n, s:b, s:s, s:s, s:i, s:i, s:i, s:i, s:{s:i, s:i}, s:{s:i, s:i, s:i, s:i, s:[]},"
			 " s:s, s:i, s:[s]}", "exit_code", 1, "signal", "cancelled", 0, "phase", "train", "oom_phase", "train",
			 "first_step", 0, "last_step", 3, "steps_done", 3, "total_steps", 10, "signatures", "cuda_oom", 1,
			 "error_running_job", 1, "oom", "tried_to_allocate_mib", 2048, "total_capacity_mib", capacity,
			 "free_mib", 1100, "allocated_by_pytorch_mib", capacity - 3000, "processes", "error",
			 "torch.OutOfMemoryError: CUDA out of memory", "duration_ms", 4000, "log_tail",
			 "torch.OutOfMemoryError: CUDA out of memory");
}

/* One attempt of a new job of cfg on the fake worker wid/gpu, ended with facts: the decision's
 * class (heap) or NULL. The job is cancelled afterwards if it is queued again. */
static char *one_attempt(struct harness *h, const json_t *cfg, const char *wid, const char *gpu, const json_t *facts)
{
	json_t *job = h_submit(h, cfg, NULL), *lease = NULL, *ans = NULL;
	char *jid = h_id(job, "id"), *ljid = NULL, *aid = NULL, *cls = NULL;
	long st = 0;

	lease = jid ? h_fake_lease(h, wid, gpu, 5000, &st) : NULL;
	ljid = h_id(lease, "job_id");
	aid = h_id(lease, "attempt_id");
	if (!h_ok(h, ljid && !strcmp(ljid, jid) && aid, "%s leases the new job (%s)", gpu, ljid ? ljid : "none"))
		goto out;
	ans = h_fake_finish(h, aid, h_str(lease, "token"), facts, &st);
	if (st == 200)
		cls = xstrdup(h_str(json_object_get(ans, "decision"), "class"));
	json_decref(h_postf(h, NULL, &st, "/v1/jobs/%s/cancel", jid));
out:
	json_decref(ans);
	json_decref(lease);
	json_decref(job);
	free(jid);
	free(ljid);
	free(aid);
	return cls;
}

/* Guide 2D reads an OOM of a config that succeeded before as a config at its limit; the success
 * must be on a card no bigger: one on 40 GiB says nothing of an OOM on 24 GiB. */
static void test_succeeded_before_card(struct harness *h)
{
	char *big = h_fake_register(h, "fake-big", "GPU-fake-big", 40960);
	char *small = h_fake_register(h, "fake-small", "GPU-fake-small", GPU_24G);
	json_t *cfg = h_config("at_the_limit", 10), *ok = h_facts_success(10), *oom24 = oom_facts(24564), *oom40 = oom_facts(40960);
	char *cls;

	cls = big && small ? one_attempt(h, cfg, big, "GPU-fake-big", ok) : NULL;
	h_ok(h, cls && !strcmp(cls, "success"), "the config succeeds on the 40 GiB card (%s)", cls ? cls : "?");
	free(cls);
	cls = big && small ? one_attempt(h, cfg, small, "GPU-fake-small", oom24) : NULL;
	h_ok(h, cls && !strcmp(cls, "oom_train_early"),
	     "the same config's OOM on 24 GiB is not 'at its limit': it never succeeded on a card that small (%s)",
	     cls ? cls : "?");
	free(cls);
	cls = big && small ? one_attempt(h, cfg, big, "GPU-fake-big", oom40) : NULL;
	h_ok(h, cls && !strcmp(cls, "oom_train_intermittent"),
	     "its OOM on the 40 GiB card where it succeeded is (guide 2D: %s)", cls ? cls : "?");
	free(cls);
	{ /* support forgets the 40 GiB card's lessons, saying why */
		int rc = -1;
		char *out = h_rungctl(h, "profiles reset flux 40960 --note 'card swapped'", &rc);
		h_ok(h, rc == 0 && strstr(out, "profile flux on 40960 MiB GPUs: reset at "), "rungctl profiles reset --note: %s", out);
		free(out);
		h_ok(h, h_sql_int(h, "SELECT count(*) FROM events WHERE kind = 'profile_reset' AND data->>'note' = 'card swapped' "
				 "AND (data->>'gpu_class_mib')::int = 40960", 0, NULL) == 1, "the note reaches the reset's event");
	}
	json_decref(cfg);
	json_decref(ok);
	json_decref(oom24);
	json_decref(oom40);
	free(big);
	free(small);
}

/* rung-worker --gpu-memory-mib on an 80 GiB card held to 32 GiB (docs/GPU.md: the H200 run, where
 * the cap was invisible to rung): the GPU registers at 32 GiB, the trainer gets RUNG_GPU_MEMORY_MIB
 * and holds itself under it, so a config that fits 80 GiB but not 32 runs out of memory, and the
 * observation and the facts name the 32 GiB the run had. */
static void test_held_gpu(struct harness *h)
{
	static const char *const args[] = { "--gpu-memory-mib", "32768", NULL };
	char *gpus = h_sim_gpus("held", 1, 81920);
	struct h_worker_opts o = { .gpus_json = gpus, .args = args };
	struct h_worker *w = h_worker_start(h, "wheld", &o);
	json_t *cfg = h_config("held_qwen", 10), *extra = json_pack("{s:{s:i}}", "recovery", "max_attempts", 1);
	json_t *job = NULL, *done = NULL;
	char *id = NULL;

	/* qwen_image at batch 1 needs between 32 and 40 GiB in the simulator: it fits the whole card */
	h_config_set(cfg, "config.process[0].model.arch", json_string("qwen_image"));
	job = h_submit(h, cfg, extra);
	id = h_id(job, "id");
	if (!h_ok(h, w && id, "worker and job started"))
		goto out;
	done = h_wait_job(h, id, "failed", 60000 * h_slow());
	h_ok(h, done != NULL, "the job that fits 80 GiB runs out of memory held to 32 GiB (one attempt allowed)");
	/* (the worker has registered by now: it ran the attempt) */
	h_ok(h, h_sql_int(h, "SELECT g.memory_total_mib FROM gpus g JOIN workers w ON w.id = g.worker_id "
			  "WHERE w.name = 'wheld'", 0, NULL) == 32768,
	     "the 80 GiB GPU registers at --gpu-memory-mib's 32768 MiB");
	{
		const char *params[1] = { id };
		PGresult *r = h_sql(h, "SELECT class, mem_gpu_mib, (facts->'gpu_after'->>'memory_total_mib')::int, "
				       "mem_obs->>'outcome' FROM attempts WHERE job_id = $1::bigint", 1, params);
		bool one = r && PQntuples(r) == 1;
		h_ok(h, one && !strncmp(PQgetvalue(r, 0, 0), "oom_", 4), "its attempt ended in an OOM class (%s)",
		     one ? PQgetvalue(r, 0, 0) : "?");
		h_ok(h, one && atoi(PQgetvalue(r, 0, 1)) == 32768 && atoi(PQgetvalue(r, 0, 2)) == 32768,
		     "the memory model's observation and the facts' GPU reading name 32768 MiB (%s, %s)",
		     one ? PQgetvalue(r, 0, 1) : "?", one ? PQgetvalue(r, 0, 2) : "?");
		h_ok(h, one && !strcmp(PQgetvalue(r, 0, 3), "oom"), "observed as an OOM at that size");
		PQclear(r);
	}
out:
	if (w) /* no later job may land on this held card */
		h_worker_stop(h, w, SIGTERM);
	json_decref(done);
	json_decref(job);
	json_decref(cfg);
	json_decref(extra);
	free(id);
	free(gpus);
}

/* h_story of job ID's attempts (heap). */
static char *attempt_story(struct harness *h, const char *id)
{
	long st = 0;
	json_t *ans = h_getf(h, &st, "/v1/jobs/%s/attempts", id);
	char *out = h_story(json_object_get(ans, "attempts"));

	json_decref(ans);
	return out;
}

/* The dataset frames of a job's current config (its target's when current_config is null). */
static long long job_frames(const json_t *job)
{
	const json_t *c = json_object_get(job, "current_config");
	json_t *cfg = json_is_object(c) ? (json_t *)c : json_object_get(job, "target_config");
	const json_t *n = json_object_get(json_array_get(json_object_get(json_array_get(json_object_get(
		json_object_get(cfg, "config"), "process"), 0), "datasets"), 0), "num_frames");

	return json_is_integer(n) ? json_integer_value(n) : -1;
}

/* The H200 run's video job (tests/data/torch_gpu_video.json, docs/GPU.md) on a simulated 57 GiB card,
 * where its training steps at 81 frames need 66552 MiB, at 61 57552 and at 65 59352 (bin/sim/
 * rung-sim-trainer --estimate: train_typical_mib; its 12 steps take no 1024 batch): 81 runs out of memory, 41
 * fits, the scale-up search fits 61 and fails at 69 and 65, as on the H200. The job ends succeeded
 * with 61 frames as its config (not 65, the step that failed), and a second job of the same config
 * starts at 61, the frames the first proved, and needs one attempt. */
static void test_video_search(struct harness *h)
{
	static const char *const env[] = { "RUNG_SIM_STEP_MS=0", "RUNG_SIM_SAMPLE_MS=0", "RUNG_SIM_LOAD_MS=0", NULL };
	char *gpus = h_sim_gpus("vsearch", 1, 58368), *path = xasprintf("%s/tests/data/torch_gpu_video.json", h->root);
	struct h_worker_opts o = { .gpus_json = gpus, .env = env };
	struct h_worker *w = h_worker_start(h, "wvsearch", &o);
	json_error_t e;
	json_t *file = json_load_file(path, 0, &e), *cfg = json_object_get(file, "config");
	json_t *j1 = NULL, *j2 = NULL, *d1 = NULL, *d2 = NULL;
	char *id1 = NULL, *id2 = NULL, *s1 = NULL, *s2 = NULL, *out = NULL;
	int rc = -1;

	if (!h_ok(h, w && cfg, "worker started, %s read", path))
		goto out;
	j1 = h_submit(h, file, NULL);
	id1 = h_id(j1, "id");
	d1 = id1 ? h_wait_job(h, id1, "succeeded", 90000 * h_slow()) : NULL;
	s1 = id1 ? attempt_story(h, id1) : xstrdup("");
	h_ok(h, d1 && !strcmp(s1, "oom_train_early/retry/num_frames success/scale_up/num_frames success/scale_up/num_frames "
			       "oom_train_early/scale_up/num_frames oom_train_early/succeed/-"),
	     "the first job searches as on the H200: 81 OOM, 41, 61, 69 OOM, 65 OOM (%s)", s1);
	h_ok(h, d1 && job_frames(d1) == 61,
	     "it ends with 61 frames as its config, the one it succeeded with, not the failed step's (%lld)",
	     d1 ? job_frames(d1) : -1);
	{
		char *args = xasprintf("show %s", id1 ? id1 : "0");
		out = h_rungctl(h, args, &rc);
		h_ok(h, rc == 0 && out && strstr(out, "num_frames: 81 -> 61"),
		     "rungctl show's target -> current says 81 -> 61");
		free(args);
	}
	j2 = h_submit(h, file, NULL);
	id2 = h_id(j2, "id");
	d2 = id2 ? h_wait_job(h, id2, "succeeded", 90000 * h_slow()) : NULL;
	s2 = id2 ? attempt_story(h, id2) : xstrdup("");
	h_ok(h, d2 && h_int(d2, "attempts") == 1 && job_frames(d2) == 61,
	     "a second job of that config starts at the 61 frames the first proved and needs one attempt (%s; %lld frames)",
	     s2, d2 ? job_frames(d2) : -1);
	if (h->failed) {
		{
			long st2 = 0;
			json_t *as = h_getf(h, &st2, "/v1/jobs/%s/attempts", id1 ? id1 : "0");
			h_diag_json("first job's attempts", as);
			json_decref(as);
		}
		h_diag_json("first job", d1);
		h_diag_json("second job", d2);
		h_diag("rungctl show: %s", out ? out : "(none)");
	}
out:
	if (w)
		h_worker_stop(h, w, SIGTERM);
	free(out);
	free(s1);
	free(s2);
	free(id1);
	free(id2);
	json_decref(j1);
	json_decref(j2);
	json_decref(d1);
	json_decref(d2);
	json_decref(file);
	free(path);
	free(gpus);
}

/* Both applies of a decision (set-wise, rung_finish_apply_batch, and one by one, rung_finish_apply)
 * keep a succeeded job's result.config as its current_config: the job ended with a config other
 * than the one its last attempt ran (played in SQL with a fake worker). */
static void test_apply_keeps_result_config(struct harness *h)
{
	char *wid = h_fake_register(h, "fake-apply", "GPU-fake-apply", GPU_24G);

	for (int batch = 1; batch >= 0; batch--) {
		json_t *cfg = h_config(batch ? "apply_set" : "apply_one", 10), *good = h_config("apply_good", 10);
		json_t *j = h_submit(h, cfg, NULL), *l = NULL;
		char *id = h_id(j, "id"), *aid = NULL, *dec = NULL, *gtxt = NULL, *item = NULL;
		long st = 0;
		PGresult *r = NULL;

		h_config_set(good, "config.process[0].train.batch_size", json_integer(2));
		gtxt = json_dumps(good, JSON_COMPACT);
		l = wid && id ? h_fake_lease(h, wid, "GPU-fake-apply", 2000, &st) : NULL;
		aid = h_id(l, "attempt_id");
		if (!h_ok(h, aid != NULL, "a fake worker leases the job (%s apply)", batch ? "set-wise" : "one by one"))
			goto next;
		dec = xasprintf("{\"class\": \"oom_train_early\", \"rule\": \"r\", \"evidence\": [], \"action\": \"succeed\","
				" \"rung\": null, \"changes\": [], \"next_config\": null, \"job_state\": \"succeeded\","
				" \"reason\": \"search ended\", \"constraints\": null, \"gpu\": null, \"escalation\": null,"
				" \"recovery_state\": {}, \"result\": {\"config\": %s}}", gtxt);
		if (batch) {
			item = xasprintf("[{\"i\": 1, \"id\": %s, \"token\": \"%s\", \"facts\": {}, \"decision\": %s}]", aid,
					 h_str(l, "token"), dec);
			const char *p[] = { item };
			r = h_sql(h, "SELECT count(*) FROM rung_finish_apply_batch($1::jsonb)", 1, p);
		} else {
			const char *p[] = { aid, h_str(l, "token"), dec };
			r = h_sql(h, "SELECT rung_finish_apply($1::bigint, $2, '{}', $3::jsonb, NULL)", 3, p);
		}
		h_ok(h, r && PQresultStatus(r) == PGRES_TUPLES_OK, "the apply runs (%s)", r ? PQresultErrorMessage(r) : "no result");
		PQclear(r);
		{
			const char *p[] = { id };
			h_ok(h, h_sql_int(h, "SELECT (current_config->'config'->'process'->0->'train'->>'batch_size')::int FROM jobs "
					  "WHERE id = $1::bigint AND state = 'succeeded'", 1, p) == 2,
			     "the job ends succeeded with result.config as its current config (%s apply)",
			     batch ? "set-wise" : "one by one");
		}
	next:
		json_decref(l);
		json_decref(j);
		json_decref(cfg);
		json_decref(good);
		free(id);
		free(aid);
		free(dec);
		free(gtxt);
		free(item);
	}
	free(wid);
}

int main(void)
{
	struct harness *h = h_new("it_memory");
	char *id;

	if (!h_ok(h, h_server_start(h, NULL) == 0, "rungd starts"))
		return h_free(h);
	test_arch_agrees(h);
	id = test_stored(h);
	test_ctx_and_reset(h);
	test_bad_input(h, id);
	test_succeeded_before_card(h);
	test_held_gpu(h);
	test_video_search(h);
	test_apply_keeps_result_config(h);
	free(id);
	return h_free(h);
}
