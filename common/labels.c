/* Job labels' rules and text form (see labels.h): the character classes, the limits, the parser of
 * "k=v,k2=v2" and its printer. Values are kept to a URL- and shell-safe alphabet so that the text
 * form needs no quoting anywhere it is typed (a query string, a command line). */
#include "labels.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static bool plain(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-';
}

bool labels_key_ok(const char *key)
{
	size_t n = key ? strlen(key) : 0;

	if (n == 0 || n > LABELS_KEY_MAX || !isalnum((unsigned char)key[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!plain(key[i]))
			return false;
	return true;
}

bool labels_value_ok(const char *value)
{
	size_t n = value ? strlen(value) : 0;

	if (!value || n > LABELS_VALUE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!plain(value[i]))
			return false;
	return true;
}

int labels_check(const json_t *labels, char **field, char **message)
{
	const char *key;
	json_t *v;

	*field = *message = NULL;
	if (!labels || json_is_null(labels))
		return 0;
	if (!json_is_object(labels)) {
		*field = xstrdup("labels");
		*message = xstrdup("labels must be an object of strings");
		return -1;
	}
	if (json_object_size(labels) > LABELS_MAX) {
		*field = xstrdup("labels");
		*message = xasprintf("labels has %zu keys, over the limit of %d", json_object_size(labels), LABELS_MAX);
		return -1;
	}
	json_object_foreach((json_t *)labels, key, v) {
		if (!labels_key_ok(key)) {
			*field = xstrdup("labels");
			*message = xasprintf("label key \"%.80s\" must be 1-%d characters of A-Z a-z 0-9 _ . -, starting with a "
					     "letter or digit", key, LABELS_KEY_MAX);
			return -1;
		}
		if (!json_is_string(v) || !labels_value_ok(json_string_value(v))) {
			*field = xasprintf("labels.%s", key);
			*message = xasprintf("labels.%s must be a string of 0-%d characters of A-Z a-z 0-9 _ . -", key,
					     LABELS_VALUE_MAX);
			return -1;
		}
	}
	return 0;
}

json_t *labels_parse(const char *text, const char *what, char **err)
{
	json_t *out = json_object();
	char *copy = xstrdup(text ? text : ""), *field = NULL, *message = NULL;

	*err = NULL;
	if (*copy) {
		char *p = copy;
		for (;;) {
			char *end = strchr(p, ','), *eq;
			if (end)
				*end = '\0';
			eq = strchr(p, '=');
			if (!eq) {
				*err = xasprintf("%s: \"%.80s\" is not KEY=VALUE", what, p);
				goto out;
			}
			*eq = '\0';
			if (json_object_get(out, p)) {
				*err = xasprintf("%s: key \"%.80s\" is given twice", what, p);
				goto out;
			}
			if (json_object_size(out) == LABELS_MAX) {
				*err = xasprintf("%s: more than %d labels", what, LABELS_MAX);
				goto out;
			}
			if (!labels_key_ok(p) || !labels_value_ok(eq + 1)) {
				*err = xasprintf("%s: \"%.80s=%.80s\": keys are 1-%d and values 0-%d characters of A-Z a-z 0-9 _ . - "
						 "(a key starts with a letter or digit)", what, p, eq + 1, LABELS_KEY_MAX,
						 LABELS_VALUE_MAX);
				goto out;
			}
			json_object_set_new(out, p, json_string(eq + 1));
			if (!end)
				break;
			p = end + 1;
		}
	}
	if (labels_check(out, &field, &message) < 0) /* the same rules, one place: cannot fail after the above */
		*err = xasprintf("%s: %s", what, message);
out:
	free(field);
	free(message);
	free(copy);
	if (*err) {
		json_decref(out);
		return NULL;
	}
	return out;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *labels_format(const json_t *labels)
{
	size_t n = json_is_object(labels) ? json_object_size(labels) : 0, i = 0;
	const char **keys = xcalloc(n ? n : 1, sizeof *keys);
	const char *key;
	json_t *v;
	char *out = xstrdup("");

	if (n)
		json_object_foreach((json_t *)labels, key, v)
			keys[i++] = key;
	qsort(keys, i, sizeof *keys, cmp_str);
	for (size_t k = 0; k < i; k++) {
		const char *val = json_string_value(json_object_get(labels, keys[k]));
		char *next = xasprintf("%s%s%s=%s", out, k ? "," : "", keys[k], val ? val : "");
		free(out);
		out = next;
	}
	free(keys);
	return out;
}
