/* Unit tests of common/util.c's util_json_append: members spliced into a JSON object's text, the
 * way rungd adds config text that Postgres returns beside a lean document. */
#include <jansson.h>
#include <stdlib.h>

#include "tap.h"
#include "util.h"

static void json_append(void)
{
	char *s = util_json_append("{\"id\": 1}", "\"config\": {\"a\": [1, 2]}, \"n\": 3");
	json_t *doc = s ? json_loads(s, 0, NULL) : NULL;

	TAP_STR_EQ(s ? s : "", "{\"id\": 1, \"config\": {\"a\": [1, 2]}, \"n\": 3}", "members appended before the brace");
	TAP_OK(doc && json_integer_value(json_object_get(doc, "n")) == 3 &&
		       json_array_size(json_object_get(json_object_get(doc, "config"), "a")) == 2,
	       "the result parses as one object with every member");
	json_decref(doc);
	free(s);
	s = util_json_append("{\"id\": 1}\n  ", "\"x\": true");
	TAP_STR_EQ(s ? s : "", "{\"id\": 1, \"x\": true}", "trailing whitespace after the object is dropped");
	free(s);
	TAP_OK(util_json_append("{}", "\"x\": 1") == NULL, "an empty object is refused (no member to follow)");
	TAP_OK(util_json_append("[1, 2]", "\"x\": 1") == NULL, "an array is refused");
	TAP_OK(util_json_append("", "\"x\": 1") == NULL, "an empty string is refused");
}

int main(void)
{
	json_append();
	return TAP_DONE();
}
