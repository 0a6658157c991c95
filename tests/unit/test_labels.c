/* Tests for common/labels.c: the rules of keys and values at their limits, labels_check's fields,
 * the text form's parser (near misses: no "=", a key twice, one label too many, a bad character)
 * and its sorted printer, read back by the parser; and common/pool.c's pool names, a job's other
 * short name a submitter routes by. */
#include <stdlib.h>
#include <string.h>

#include "labels.h"
#include "pool.h"
#include "tap.h"
#include "util.h"

static char *repeat(char c, size_t n)
{
	char *s = xmalloc(n + 1);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

static void test_rules(void)
{
	char *k63 = repeat('k', LABELS_KEY_MAX), *k64 = repeat('k', LABELS_KEY_MAX + 1);
	char *v63 = repeat('v', LABELS_VALUE_MAX), *v64 = repeat('v', LABELS_VALUE_MAX + 1);

	TAP_OK(labels_key_ok("team") && labels_key_ok("a") && labels_key_ok("0cost.center-2_b"), "keys: plain ones pass");
	TAP_OK(labels_key_ok(k63) && !labels_key_ok(k64), "keys: 63 bytes pass, 64 do not");
	TAP_OK(!labels_key_ok("") && !labels_key_ok(NULL), "keys: empty or missing do not");
	TAP_OK(!labels_key_ok("-team") && !labels_key_ok(".team") && !labels_key_ok("_team"),
	       "keys: must start with a letter or digit");
	TAP_OK(!labels_key_ok("te am") && !labels_key_ok("team=x") && !labels_key_ok("team,x") &&
	       !labels_key_ok("t\xc3\xa9" "am") && !labels_key_ok("a/b"), "keys: no space, =, comma, non-ASCII or slash");
	TAP_OK(labels_value_ok("") && labels_value_ok("vision") && labels_value_ok("-x.y_z"), "values: empty and plain pass");
	TAP_OK(labels_value_ok(v63) && !labels_value_ok(v64), "values: 63 bytes pass, 64 do not");
	TAP_OK(!labels_value_ok("a b") && !labels_value_ok("a,b") && !labels_value_ok("a=b") && !labels_value_ok(NULL),
	       "values: no space, comma or =");
	free(k63);
	free(k64);
	free(v63);
	free(v64);
}

static void test_check(void)
{
	char *field = NULL, *message = NULL;
	json_t *l = json_pack("{s:s, s:s}", "team", "vision", "project", "portraits");

	TAP_INT_EQ(labels_check(l, &field, &message), 0, "check: two plain labels pass");
	TAP_INT_EQ(labels_check(NULL, &field, &message), 0, "check: none passes");
	TAP_INT_EQ(labels_check(json_null(), &field, &message), 0, "check: null passes");
	json_object_set_new(l, "team", json_integer(3));
	TAP_INT_EQ(labels_check(l, &field, &message), -1, "check: a number value is refused");
	TAP_STR_EQ(field, "labels.team", "check: the field names the key");
	free(field);
	free(message);
	json_object_set_new(l, "team", json_string("vis ion"));
	TAP_INT_EQ(labels_check(l, &field, &message), -1, "check: a value with a space is refused");
	TAP_STR_EQ(field, "labels.team", "check: named too");
	free(field);
	free(message);
	json_decref(l);
	l = json_pack("{s:s}", "bad key", "x");
	TAP_INT_EQ(labels_check(l, &field, &message), -1, "check: a bad key is refused");
	TAP_STR_EQ(field, "labels", "check: the field is labels (the key itself is not a path)");
	free(field);
	free(message);
	json_decref(l);
	l = json_pack("[s]", "team=vision");
	TAP_INT_EQ(labels_check(l, &field, &message), -1, "check: an array is refused");
	free(field);
	free(message);
	json_decref(l);
	l = json_object();
	for (int i = 0; i <= LABELS_MAX; i++) {
		char k[16];
		snprintf(k, sizeof k, "k%d", i);
		if (i == LABELS_MAX)
			TAP_INT_EQ(labels_check(l, &field, &message), 0, "check: 16 labels pass");
		json_object_set_new(l, k, json_string("v"));
	}
	TAP_INT_EQ(labels_check(l, &field, &message), -1, "check: 17 do not");
	TAP_OK(message && strstr(message, "17 keys"), "check: and says how many");
	free(field);
	free(message);
	json_decref(l);
}

static void test_text(void)
{
	char *err = NULL, *s;
	json_t *l = labels_parse("team=vision,project=portraits,empty=", "labels", &err), *back;
	struct { const char *text, *want; } bad[] = {
		{ "team", "is not KEY=VALUE" },
		{ "team=a,team=b", "given twice" },
		{ "team=a,", "is not KEY=VALUE" },
		{ "=a", "keys are 1-63" },
		{ "team=a b", "keys are 1-63" },
		{ "team=a=b", "keys are 1-63" },
	};

	TAP_OK(l && json_object_size(l) == 3 && !strcmp(json_string_value(json_object_get(l, "team")), "vision") &&
	       !strcmp(json_string_value(json_object_get(l, "empty")), ""), "parse: three pairs, an empty value kept");
	s = labels_format(l);
	TAP_STR_EQ(s, "empty=,project=portraits,team=vision", "format: keys sorted, comma-separated");
	back = labels_parse(s, "labels", &err);
	TAP_OK(back && json_equal(back, l), "format then parse gives the same labels");
	free(s);
	json_decref(back);
	json_decref(l);
	l = labels_parse("", "labels", &err);
	TAP_OK(l && json_object_size(l) == 0, "parse: empty text is no labels");
	s = labels_format(l);
	TAP_STR_EQ(s, "", "format: no labels is empty");
	free(s);
	json_decref(l);
	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		char name[96];
		l = labels_parse(bad[i].text, "--labels", &err);
		snprintf(name, sizeof name, "parse: \"%s\" is refused, naming --labels", bad[i].text);
		TAP_OK(!l && err && strstr(err, "--labels") && strstr(err, bad[i].want), name);
		free(err);
		err = NULL;
	}
	{
		char *many = xstrdup("");
		for (int i = 0; i <= LABELS_MAX; i++) {
			char *next = xasprintf("%s%sk%d=v", many, i ? "," : "", i);
			free(many);
			many = next;
		}
		l = labels_parse(many, "labels", &err);
		TAP_OK(!l && err && strstr(err, "more than 16"), "parse: 17 pairs are refused");
		free(err);
		free(many);
	}
}

static void test_pool_names(void)
{
	char *p63 = repeat('p', POOL_NAME_MAX), *p64 = repeat('p', POOL_NAME_MAX + 1);

	TAP_OK(pool_name_ok("default") && pool_name_ok("h200") && pool_name_ok("0a") && pool_name_ok("team-a.video_2"),
	       "pools: plain names pass");
	TAP_OK(pool_name_ok(p63) && !pool_name_ok(p64), "pools: 63 bytes pass, 64 do not");
	TAP_OK(!pool_name_ok("") && !pool_name_ok(NULL), "pools: empty or missing do not");
	TAP_OK(!pool_name_ok("H200") && !pool_name_ok("h200 "), "pools: upper case and spaces do not");
	TAP_OK(!pool_name_ok("-a") && !pool_name_ok(".a") && !pool_name_ok("_a"), "pools: a mark first does not");
	TAP_OK(!pool_name_ok("a/b") && !pool_name_ok("a,b") && !pool_name_ok("a=b") && !pool_name_ok("\xc3\xa9"),
	       "pools: other characters do not");
	free(p63);
	free(p64);
	{
		json_t *two = json_loads("[\"a\", \"h200\"]", 0, NULL), *odd = json_loads("[\"a\", 3]", 0, NULL);
		json_t *none = json_array();
		char *s1 = pool_list_join(two, ", ", "none"), *s2 = pool_list_join(odd, ",", "any");
		char *s3 = pool_list_join(none, ",", "any"), *s4 = pool_list_join(NULL, ",", "any");
		TAP_OK(!strcmp(s1, "a, h200") && !strcmp(s2, "a,?") && !strcmp(s3, "any") && !strcmp(s4, "any"),
		       "pools: a list joined, a non-string as ?, empty or missing as the word given");
		json_t *lim = json_loads("{\"h200\": 2, \"video\": 0}", 0, NULL), *empty = json_object();
		char *l1 = pool_limits_text(lim, ",", "none"), *l2 = pool_limits_text(empty, ",", "none");
		char *l3 = pool_limits_text(NULL, ", ", "-"), *l4 = pool_limits_text(two, ",", "none");
		TAP_OK(!strcmp(l1, "h200:2,video:0") && !strcmp(l2, "none") && !strcmp(l3, "-") && !strcmp(l4, "none"),
		       "pools: limits per pool as POOL:N joined, none for empty, missing or not an object");
		free(l1);
		free(l2);
		free(l3);
		free(l4);
		json_decref(lim);
		json_decref(empty);
		free(s1);
		free(s2);
		free(s3);
		free(s4);
		json_decref(two);
		json_decref(odd);
		json_decref(none);
	}
}

int main(void)
{
	test_pool_names();
	test_rules();
	test_check();
	test_text();
	return TAP_DONE();
}
