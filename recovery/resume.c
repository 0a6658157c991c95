/* The checkpoint hold (resume.h): which worker's host holds the checkpoint a re-queued job would
 * resume from, and whether the job should wait a little for that worker's GPUs. Pure: reads a CTX and
 * a DECISION, builds a small object. */
#include "resume.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "jpath.h"

/* The config.name an attempt's config (resolved) runs under, or "" when it has none. */
static const char *config_name(const json_t *config)
{
	return jpath_str(config, "config.name", "");
}

static bool saved(const json_t *attempt)
{
	return json_is_string(jpath_get(attempt, "facts.saved_path"));
}

static bool excludes(const json_t *list, const json_t *v)
{
	size_t i;
	json_t *x;

	json_array_foreach(list, i, x)
		if (json_equal(x, v) || (json_is_string(x) && json_is_integer(v) &&
					 json_integer_value(v) == strtoll(json_string_value(x), NULL, 10)))
			return true;
	return false;
}

/* The newest attempt, the one that just ended first, that saved a checkpoint under NAME; NULL when
 * none did. */
static const json_t *newest_saver(const json_t *ctx, const char *name)
{
	const json_t *a = json_object_get(ctx, "attempt"), *all = json_object_get(ctx, "attempts");
	size_t i;

	if (saved(a) && !strcmp(config_name(json_object_get(a, "config")), name))
		return a;
	for (i = json_array_size(all); i-- > 0;) {
		const json_t *o = json_array_get(all, i);
		if (saved(o) && !strcmp(config_name(json_object_get(o, "config")), name))
			return o;
	}
	return NULL;
}

json_t *resume_hold(const json_t *ctx, const json_t *decision, int hold_s)
{
	const json_t *a = json_object_get(ctx, "attempt"), *next = json_object_get(decision, "next_config");
	const json_t *worker = json_object_get(a, "worker_id"), *home;
	const char *cls = jpath_str(decision, "class", ""), *name;

	if (hold_s <= 0 || strcmp(jpath_str(decision, "job_state", ""), "queued") != 0 || strncmp(cls, "oom_", 4) != 0 ||
	    !json_is_integer(worker) || strcmp(jpath_str(a, "worker_state", ""), "online") != 0)
		return NULL;
	/* the ladder's end sends the job to a bigger GPU (requeue_bigger): not this host's */
	if (jpath_int(decision, "constraints.min_gpu_memory_mib", 0) > jpath_int(a, "gpu_memory_mib", 0))
		return NULL;
	if (!json_is_object(next))
		next = jpath_get(ctx, "job.current_config");
	name = config_name(next);
	if (!name[0])
		return NULL;
	home = newest_saver(ctx, name);
	if (!home || !json_equal(json_object_get(home, "worker_id"), worker))
		return NULL;
	if (excludes(jpath_get(decision, "constraints.exclude_workers"), worker) ||
	    excludes(jpath_get(ctx, "job.constraints.exclude_workers"), worker) ||
	    excludes(jpath_get(decision, "constraints.exclude_gpus"), json_object_get(a, "gpu_uuid")))
		return NULL;
	return json_pack("{s:O, s:i, s:O?, s:O}", "worker_id", worker, "seconds", hold_s, "attempt",
			 json_object_get(home, "number"), "path", jpath_get(home, "facts.saved_path"));
}

void resume_hold_attach(json_t *decision, const json_t *hold)
{
	json_t *c;

	if (!hold)
		return;
	c = json_object_get(decision, "constraints");
	if (!json_is_object(c)) {
		c = json_object();
		json_object_set_new(decision, "constraints", c);
	}
	json_object_set(c, "hold", (json_t *)hold);
}
