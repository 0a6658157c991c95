/* Sentences about a job shared by rungctl and the web UI (jobtext.h): one wording, two renderings.
 * Owns nothing; reads the JOB document it is given. */
#include "jobtext.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "after.h"
#include "util.h"
#include "when.h"

char *jobtext_started_bigger(const json_t *job)
{
	const json_t *sb = json_object_get(json_object_get(job, "recovery_state"), "started_bigger");

	if (!json_is_object(sb))
		return NULL;
	return xasprintf("started on a bigger GPU (memory model): its claim on a %lld MiB GPU was handed back before it "
			 "ran, for a GPU with at least %lld MiB",
			 (long long)json_integer_value(json_object_get(sb, "gpu_mib")),
			 (long long)json_integer_value(json_object_get(sb, "min_gpu_memory_mib")));
}

char *jobtext_pool_wait(const json_t *job)
{
	const json_t *p = json_object_get(job, "placement");
	const char *pool = json_string_value(json_object_get(p, "pool"));
	long long other = (long long)json_integer_value(json_object_get(p, "other_pools_gpus"));
	long long borrowing = (long long)json_integer_value(json_object_get(p, "borrowing_gpus"));

	if (!json_is_object(p) || json_integer_value(json_object_get(p, "gpus")) > 0 ||
	    json_integer_value(json_object_get(p, "draining_gpus")) > 0 || (other <= 0 && borrowing <= 0))
		return NULL;
	if (!pool)
		pool = json_string_value(json_object_get(job, "pool"));
	if (borrowing > 0) /* borrowers (migration 028) take it, after their own pool's jobs */
		return xasprintf("no GPU in pool %s can run it; %lld GPU%s of workers that borrow from %s may take it when "
				 "their own pool has no job for them", pool ? pool : "?", borrowing, borrowing == 1 ? "" : "s",
				 pool ? pool : "?");
	return xasprintf("no GPU in pool %s can run it (%lld in other pool%s)", pool ? pool : "?", other,
			 other == 1 ? "" : "s");
}

/* Why a queued job no usable GPU can take waits (p: its placement, counting none). Heap string. */
static char *waiting_why(const json_t *job, const json_t *p)
{
	long long min = (long long)json_integer_value(json_object_get(p, "min_gpu_memory_mib"));
	long long max = (long long)json_integer_value(json_object_get(p, "fleet_max_gpu_mib"));
	char *pool = jobtext_pool_wait(job), *out;

	if (pool) { /* GPUs elsewhere would take it: its pool is the reason, whatever else */
		out = xasprintf("waiting for a GPU: %s", pool);
		free(pool);
		return out;
	}
	if (json_integer_value(json_object_get(p, "draining_gpus")) > 0 && json_integer_value(json_object_get(p, "borrowing_gpus")) > 0)
		return xasprintf("waiting for a GPU: the %lld that meet its constraints are on drained workers (it runs once one "
				 "is resumed, or on one of the %lld GPUs of workers that borrow from its pool when their own pool "
				 "has no job for them)", (long long)json_integer_value(json_object_get(p, "draining_gpus")),
				 (long long)json_integer_value(json_object_get(p, "borrowing_gpus")));
	if (json_integer_value(json_object_get(p, "draining_gpus")) > 0)
		return xasprintf("waiting for a GPU: the %lld that meet its constraints are on drained workers (it runs once one "
				 "is resumed)", (long long)json_integer_value(json_object_get(p, "draining_gpus")));
	if (max <= 0)
		return xasprintf("waiting for a GPU: no live worker has a usable GPU");
	if (min > max)
		return xasprintf("waiting for a GPU: none of the usable GPUs on live workers meets its constraints (at "
				 "least %lld MiB; the largest has %lld MiB)", min, max);
	return xasprintf("waiting for a GPU: its exclusions leave no usable GPU on a live worker with at least %lld MiB",
			 min);
}

/* Why a queued job whose owner is at its max_running (pool NULL), or at its limit in the job's pool
 * (migration 034), waits: max and running from the placement. Heap string. */
static char *owner_why(const json_t *job, const char *pool, long long max, long long running)
{
	const char *owner = json_string_value(json_object_get(job, "owner"));
	char in[96] = "";

	if (pool)
		snprintf(in, sizeof in, " in pool %s", pool);
	if (max == 0)
		return xasprintf("waiting for its owner's limit%s: %s may run no job%s now (max_running 0)", in,
				 owner ? owner : "?", pool ? " of it" : "");
	return xasprintf("waiting for its owner's limit%s: %s runs %lld job%s%s, at most %lld at once", in,
			 owner ? owner : "?", running, running == 1 ? "" : "s", pool ? " of it" : "", max);
}

/* Why a queued job whose owner is over its GPU-hour quota waits (placement "owner_quota", migration
 * 035: {"gpu_hours", "days", "used_hours"}; or "owner_pool_quota", 037, with its "pool": that quota
 * in the job's pool). Heap string. */
static char *quota_why(const json_t *job, const json_t *quota)
{
	json_t *q = json_deep_copy(quota);
	const char *pool = json_string_value(json_object_get(quota, "pool"));
	char *line, *out;

	json_object_set(q, "owner", json_object_get(job, "owner"));
	line = jobtext_quota(q);
	out = xasprintf("waiting for its owner's GPU-hour quota%s%s: %s (or for an admin to raise it)", pool ? " in pool " : "",
			pool ? pool : "", line);
	free(line);
	json_decref(q);
	return out;
}

/* Whether placement p's owner limit named by key_max (its running jobs under key_running) is spent. */
static bool owner_spent(const json_t *p, const char *key_max, const char *key_running)
{
	return json_is_integer(json_object_get(p, key_max)) &&
	       json_integer_value(json_object_get(p, key_running)) >= json_integer_value(json_object_get(p, key_max));
}

char *jobtext_placement(const json_t *job)
{
	const json_t *p = json_object_get(job, "placement"), *ahead = json_object_get(p, "ahead");
	char *why, *out, place[64] = "";

	if (!json_is_object(p) || !json_is_integer(json_object_get(p, "gpus")))
		return NULL;
	if (json_is_integer(ahead) && json_integer_value(ahead) > 0)
		snprintf(place, sizeof place, "%lld job%s ahead of it in the queue", (long long)json_integer_value(ahead),
			 json_integer_value(ahead) == 1 ? "" : "s");
	else if (json_is_integer(ahead))
		snprintf(place, sizeof place, "no job ahead of it in the queue");
	if (json_is_object(json_object_get(p, "preempting"))) { /* rung_preempt chose a GPU for it */
		const json_t *pre = json_object_get(p, "preempting");
		const char *kind = json_string_value(json_object_get(pre, "why"));
		char whose[64] = ", which that GPU's worker borrowed from another pool,";
		if (kind && !strcmp(kind, "priority")) /* rungd --preempt-priority: this job is urgent */
			snprintf(whose, sizeof whose, ", of a worse priority (%lld),",
				 (long long)json_integer_value(json_object_get(pre, "priority")));
		why = xasprintf("waiting for a GPU: job %lld%s is being stopped on GPU %s for it (preemption); it runs there next",
				(long long)json_integer_value(json_object_get(pre, "job_id")), whose,
				json_string_value(json_object_get(pre, "gpu_uuid")) ?: "?");
	} else if (json_is_object(json_object_get(p, "held"))) { /* the checkpoint hold, recovery/resume.h */
		const json_t *held = json_object_get(p, "held");
		char wait[32];
		when_format_wait((long long)json_integer_value(json_object_get(held, "in_s")), wait, sizeof wait);
		why = xasprintf("waiting for worker %lld: its host has the checkpoint attempt %lld saved, so the job resumes "
				"there instead of starting over; the other workers' GPUs may take it in %s",
				(long long)json_integer_value(json_object_get(held, "worker_id")),
				(long long)json_integer_value(json_object_get(held, "attempt")), wait);
	} else if (json_is_true(json_object_get(json_object_get(p, "owner_quota"), "over"))) { /* and whatever its limits */
		why = quota_why(job, json_object_get(p, "owner_quota"));
	} else if (json_is_true(json_object_get(json_object_get(p, "owner_pool_quota"), "over"))) { /* in its pool (037) */
		why = quota_why(job, json_object_get(p, "owner_pool_quota"));
	} else if (owner_spent(p, "owner_max_running", "owner_running")) { /* the claim passes over it whatever the GPUs */
		why = owner_why(job, NULL, (long long)json_integer_value(json_object_get(p, "owner_max_running")),
				(long long)json_integer_value(json_object_get(p, "owner_running")));
	} else if (owner_spent(p, "owner_pool_max_running", "owner_pool_running")) { /* the same, in its pool */
		why = owner_why(job, json_string_value(json_object_get(p, "pool")) ?: "?",
				(long long)json_integer_value(json_object_get(p, "owner_pool_max_running")),
				(long long)json_integer_value(json_object_get(p, "owner_pool_running")));
	} else if (json_integer_value(json_object_get(p, "gpus")) > 0)
		return *place ? xasprintf("waiting its turn: %s", place) : NULL;
	else
		why = waiting_why(job, p);
	if (!*place)
		return why;
	out = xasprintf("%s; %s", why, place);
	free(why);
	return out;
}

/* "job 3 (running)" / "jobs 3 (running), 4 (failed)" for the jobs a scheduled job waits for
 * (migration 033), past AFTER_LISTED the first of them and "and N more", and in *stuck (heap, or
 * NULL) the first of them all that failed or was cancelled: "job 4 failed". Heap. */
static char *waits_for_list(const json_t *job, char **stuck)
{
	const json_t *ids = json_object_get(job, "waits_for"), *seen = json_object_get(job, "waiting_for"), *v;
	size_t i, j;
	char *out = xstrdup(json_array_size(ids) == 1 ? "job " : "jobs ");

	*stuck = NULL;
	json_array_foreach(ids, i, v) {
		const char *state = NULL;
		const json_t *d;
		char *next;
		json_array_foreach(seen, j, d)
			if (json_integer_value(json_object_get(d, "id")) == json_integer_value(v))
				state = json_string_value(json_object_get(d, "state"));
		if (i < AFTER_LISTED) {
			next = state ? xasprintf("%s%s%lld (%s)", out, i ? ", " : "", (long long)json_integer_value(v), state)
				     : xasprintf("%s%s%lld", out, i ? ", " : "", (long long)json_integer_value(v));
			free(out);
			out = next;
		}
		if (!*stuck && state && (!strcmp(state, "failed") || !strcmp(state, "cancelled")))
			*stuck = xasprintf("job %lld %s", (long long)json_integer_value(v),
					   !strcmp(state, "failed") ? "failed" : "was cancelled");
	}
	if (json_array_size(ids) > AFTER_LISTED) {
		char *next = xasprintf("%s and %zu more", out, json_array_size(ids) - AFTER_LISTED);
		free(out);
		out = next;
	}
	return out;
}

char *jobtext_deadline(const json_t *job, int64_t now_ms)
{
	const char *by = json_string_value(json_object_get(job, "start_by"));
	const char *st = json_string_value(json_object_get(job, "state"));
	char when[40], wait[32];
	int64_t ms;

	if (!by || !st || (strcmp(st, "queued") && strcmp(st, "scheduled")) ||
	    json_integer_value(json_object_get(job, "attempts")) > 0 || util_time_parse(by, &ms) < 0)
		return NULL;
	when_format_utc(ms, when, sizeof when);
	if (ms <= now_ms)
		return xasprintf("must start by %s (due: it is cancelled within a second)", when);
	when_format_wait((long long)((ms - now_ms + 999) / 1000), wait, sizeof wait);
	return xasprintf("must start by %s (in %s), else it is cancelled", when, wait);
}

/* The start time of a scheduled job: "2026-12-01T22:00:00Z (in 2h05m)", "... (due now: it is queued
 * within a second)" or the time alone without starts_in_s; NULL without a run_after. Heap. */
static char *start_time(const json_t *job)
{
	const char *at = json_string_value(json_object_get(job, "run_after"));
	const json_t *in = json_object_get(job, "starts_in_s");
	char when[40], wait[32];
	int64_t ms;

	if (!at)
		return NULL;
	if (util_time_parse(at, &ms) == 0)
		when_format_utc(ms, when, sizeof when);
	else
		snprintf(when, sizeof when, "%.39s", at);
	if (!json_is_integer(in))
		return xstrdup(when);
	if (json_integer_value(in) <= 0)
		return xasprintf("%s (due now: it is queued within a second)", when);
	when_format_wait((long long)json_integer_value(in), wait, sizeof wait);
	return xasprintf("%s (in %s)", when, wait);
}

char *jobtext_scheduled(const json_t *job)
{
	const char *st = json_string_value(json_object_get(job, "state"));
	const json_t *in = json_object_get(job, "starts_in_s");

	if (!st || strcmp(st, "scheduled"))
		return NULL;
	if (json_array_size(json_object_get(job, "waits_for")) > 0) {
		const char *when = json_string_value(json_object_get(job, "after_when"));
		char *stuck = NULL, *list = waits_for_list(job, &stuck), *start = NULL, *out;
		/* a start time already past no longer holds it: only the jobs do */
		if (!json_is_integer(in) || json_integer_value(in) > 0)
			start = start_time(job);
		if (when && strcmp(when, "succeeded")) { /* migration 036: any ending, or a failure, releases it */
			free(stuck);
			stuck = NULL;
		}
		out = xasprintf("scheduled: waits for %s %s%s%s%s%s%s", list,
				when && !strcmp(when, "ended")	  ? "to end"
				: when && !strcmp(when, "failed") ? "to fail or be cancelled"
								  : "to succeed",
				stuck ? "; " : "", stuck ? stuck : "",
				stuck ? ": this job starts only once it is retried and succeeds, or when this one is started now" : "",
				start ? ", and not before " : "", start ? start : "");
		free(list);
		free(stuck);
		free(start);
		return out;
	}
	{
		char *start = start_time(job), *out = xasprintf("scheduled: starts at %s", start ? start : "?");
		free(start);
		return out;
	}
}

char *jobtext_awaited(const json_t *job)
{
	const json_t *by = json_object_get(job, "awaited_by"), *v;
	const char *st = json_string_value(json_object_get(job, "state"));
	size_t i, n = json_array_size(by);
	char *list, *out;

	if (n == 0)
		return NULL;
	list = xstrdup(n == 1 ? "job " : "jobs ");
	json_array_foreach(by, i, v) {
		char *next = xasprintf("%s%s%lld", list, i ? ", " : "", (long long)json_integer_value(v));
		free(list);
		list = next;
	}
	/* a failed or cancelled job holds only those that wait for its success (an ending or a failure
	 * released the others, migration 036) */
	bool held = st && (!strcmp(st, "failed") || !strcmp(st, "cancelled"));
	out = xasprintf("%s %s for this one%s%s", list, n == 1 ? "waits" : "wait", held ? " to succeed" : "",
			held	? n == 1 ? ": it starts only once this one is retried and succeeds (or when it is started now); "
					   "cancel it to drop it"
					 : ": they start only once this one is retried and succeeds (or when each is started now); "
					   "cancel them to drop them"
				: "");
	free(list);
	return out;
}

char *jobtext_stopping(const json_t *job)
{
	const json_t *st = json_object_get(job, "stopping");
	long long n = (long long)json_integer_value(json_object_get(st, "number"));

	if (!json_is_object(st))
		return NULL;
	const char *why = json_string_value(json_object_get(st, "why"));

	if (json_is_integer(json_object_get(st, "for_job")))
		return xasprintf("stopping: attempt %lld is being stopped so that job %lld%s can run on its GPU (preemption); "
				 "the job is queued again unchanged when it ends", n,
				 (long long)json_integer_value(json_object_get(st, "for_job")),
				 why && !strcmp(why, "priority") ? ", an urgent one," : " of its worker's own pool");
	return xasprintf("stopping: attempt %lld is being stopped on request (requeue); the job is queued again unchanged "
			 "when it ends", n);
}

char *jobtext_retried(const json_t *job)
{
	const json_t *r = json_object_get(json_object_get(job, "recovery_state"), "retried");
	const char *by = json_string_value(json_object_get(r, "by")), *note = json_string_value(json_object_get(r, "note"));
	const char *from = json_string_value(json_object_get(r, "from")), *was = json_string_value(json_object_get(r, "previous_state"));

	if (!json_is_object(r))
		return NULL;
	return xasprintf("retried%s%s from the %s config after it was %s; budgets count from attempt %lld%s%s", by ? " by " : "",
			 by ? by : "", from ? from : "current", was ? was : "failed",
			 (long long)json_integer_value(json_object_get(r, "budget_from")) + 1, note ? ": " : "", note ? note : "");
}

char *jobtext_output(const json_t *job)
{
	const json_t *o = json_object_get(json_object_get(job, "result"), "output"), *worker = json_object_get(o, "worker_id");
	const char *path = json_string_value(json_object_get(o, "path"));
	long long n = json_integer_value(json_object_get(o, "attempt"));

	if (!path)
		return NULL;
	if (json_is_integer(worker))
		return xasprintf("%s (saved by attempt %lld, on worker %lld's host)", path, n,
				 (long long)json_integer_value(worker));
	return xasprintf("%s (saved by attempt %lld)", path, n);
}

char *jobtext_quota(const json_t *q)
{
	const char *owner = json_string_value(json_object_get(q, "owner"));
	double quota = json_number_value(json_object_get(q, "gpu_hours"));
	long long days = (long long)json_integer_value(json_object_get(q, "days"));
	const json_t *used = json_object_get(q, "used_hours");

	const char *pool = json_string_value(json_object_get(q, "pool")); /* a quota per pool (migration 037) */
	char of[80] = "", there[80] = "";

	if (pool) {
		snprintf(of, sizeof of, " of pool %.64s", pool);
		snprintf(there, sizeof there, " of that pool");
	}
	if (!json_is_number(used))
		return xasprintf("%s may use %g GPU hours%s in %lld day%s (not read yet)", owner ? owner : "?", quota, of, days,
				 days == 1 ? "" : "s");
	if (json_is_true(json_object_get(q, "over")))
		return xasprintf("%s used %.1f of %g GPU hours%s in the last %lld day%s: over its quota, none of its jobs%s "
				 "starts until older hours leave that window", owner ? owner : "?", json_number_value(used),
				 quota, of, days, days == 1 ? "" : "s", there);
	return xasprintf("%s used %.1f of %g GPU hours%s in the last %lld day%s (%.0f%%)", owner ? owner : "?",
			 json_number_value(used), quota, of, days, days == 1 ? "" : "s",
			 quota > 0 ? 100.0 * json_number_value(used) / quota : 100.0);
}

char *jobtext_quota_cell(const json_t *q)
{
	const json_t *used = json_object_get(q, "used_hours");
	char u[32] = "?";

	if (json_is_number(used))
		snprintf(u, sizeof u, "%.1f", json_number_value(used));
	return xasprintf("%s/%g in %lldd", u, json_number_value(json_object_get(q, "gpu_hours")),
			 (long long)json_integer_value(json_object_get(q, "days")));
}

char *jobtext_recovered(const json_t *recovered)
{
	long long jobs = (long long)json_integer_value(json_object_get(recovered, "jobs"));
	long long ooms = (long long)json_integer_value(json_object_get(recovered, "oom_attempts"));

	if (jobs <= 0)
		return xstrdup("");
	return xasprintf("; %lld job%s succeeded after running out of GPU memory (%lld OOM attempt%s before the config "
			 "that fit)", jobs, jobs == 1 ? "" : "s", ooms, ooms == 1 ? "" : "s");
}

char *jobtext_spared(const json_t *resumed)
{
	long long n = (long long)json_integer_value(json_object_get(resumed, "attempts"));
	long long steps = (long long)json_integer_value(json_object_get(resumed, "steps"));
	/* a report without "priced" (a rungd before it) priced them all */
	const json_t *pv = json_object_get(resumed, "priced");
	long long priced = json_is_integer(pv) ? (long long)json_integer_value(pv) : n;
	double hours = json_number_value(json_object_get(resumed, "gpu_seconds")) / 3600.0;

	if (n <= 0)
		return xstrdup("");
	if (priced <= 0) /* none timed: the steps alone */
		return xasprintf("; resuming from checkpoints spared %lld steps (in %lld attempt%s)", steps, n,
				 n == 1 ? "" : "s");
	if (priced < n)
		return xasprintf("; resuming from checkpoints spared %lld steps in %lld attempts, about %.1f GPU hours for "
				 "the %lld that timed their steps", steps, n, hours, priced);
	return xasprintf("; resuming from checkpoints spared about %.1f GPU hours (%lld steps not run again, in %lld "
			 "attempt%s)", hours, steps, n, n == 1 ? "" : "s");
}
