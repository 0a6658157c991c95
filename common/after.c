/* The jobs a job runs after (after.h): their comma-separated text and the words of after_when. Pure. */
#include "after.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool after_when_ok(const char *when)
{
	return when && (!strcmp(when, "succeeded") || !strcmp(when, "ended") || !strcmp(when, "failed"));
}

json_t *after_parse(const char *text)
{
	json_t *list = json_array();
	const char *p = text;

	while (p) {
		char *end;
		long long id;
		if (*p < '0' || *p > '9')
			break;
		errno = 0;
		id = strtoll(p, &end, 10);
		if (errno || id < 1 || id > AFTER_ID_MAX || (*end && *end != ',') || json_array_size(list) >= AFTER_MAX)
			break;
		json_array_append_new(list, json_integer(id));
		if (!*end)
			return list;
		p = end + 1;
	}
	json_decref(list);
	return NULL;
}
