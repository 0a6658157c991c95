/* A job's priority (priority.h): what the jobs lists need to know of it. Pure. */
#include "priority.h"

bool priority_any_other(const json_t *jobs)
{
	const json_t *j;
	size_t i;

	json_array_foreach(jobs, i, j) {
		const json_t *p = json_object_get(j, "priority");
		if (json_is_integer(p) && json_integer_value(p) != PRIORITY_DEFAULT)
			return true;
	}
	return false;
}
