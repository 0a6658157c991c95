/* Unit tests of rungd's request checks: the submit envelope (unknown fields, types, ranges,
 * RECOVERY defaults), AI Toolkit config validation at submit, the reading of a config file as a
 * YAML body (api_jobs_parse_yaml), and id parsing. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../../server/api_jobs.h"
#include "../../server/http.h"
#include "tap.h"

static const char *good_config =
	"{\"job\":\"extension\",\"config\":{\"name\":\"my_lora\",\"process\":[{\"type\":\"diffusion_trainer\","
	"\"training_folder\":\"/tmp/out\",\"train\":{\"batch_size\":4,\"gradient_accumulation\":1,"
	"\"gradient_checkpointing\":true,\"steps\":2000,\"lr\":1e-4,\"optimizer\":\"adamw8bit\"},"
	"\"datasets\":[{\"folder_path\":\"/data/x\",\"resolution\":[512,768,1024]}],"
	"\"sample\":{\"sample_every\":250,\"width\":1024,\"height\":1024,\"sample_steps\":20},"
	"\"model\":{\"name_or_path\":\"x\",\"arch\":\"flux\",\"quantize\":true}}]},\"meta\":{\"name\":\"[name]\"}}";

/* Runs the check on `{"config": CONFIG, EXTRA}`; returns the failing field (heap) or NULL. */
static char *check(const char *extra, json_t **recovery, int *priority)
{
	char *text = NULL, *field = NULL, *message = NULL;
	const char *name;
	json_t *body, *rec = NULL;
	int prio = 0;

	if (asprintf(&text, "{\"config\":%s%s%s}", good_config, extra ? "," : "", extra ? extra : "") < 0)
		abort();
	body = json_loads(text, 0, NULL);
	free(text);
	if (!body)
		return strdup("(test body did not parse)");
	if (api_jobs_check_submit(body, &rec, &name, &prio, &field, &message) == 0) {
		free(field);
		field = NULL;
	}
	free(message);
	if (recovery)
		*recovery = rec;
	else
		json_decref(rec);
	if (priority)
		*priority = prio;
	json_decref(body);
	return field;
}

static void expect_field(const char *extra, const char *want, const char *name)
{
	char *got = check(extra, NULL, NULL);

	TAP_STR_EQ(got, want, name);
	free(got);
}

int main(void)
{
	json_t *rec = NULL, *body;
	int prio = 0;
	char *field, *message;
	const char *name;

	field = check(NULL, &rec, &prio);
	TAP_OK(field == NULL, "a plain AI Toolkit config is accepted");
	free(field);
	TAP_INT_EQ(prio, 100, "priority defaults to 100");
	TAP_OK(json_is_true(json_object_get(rec, "scale_up")), "recovery.scale_up defaults to true");
	TAP_INT_EQ(json_integer_value(json_object_get(rec, "max_attempts")), 10, "recovery.max_attempts defaults to 10");
	TAP_INT_EQ(json_integer_value(json_object_get(rec, "max_env_retries")), 3, "recovery.max_env_retries defaults to 3");
	TAP_INT_EQ(json_integer_value(json_object_get(rec, "max_lost")), 3, "recovery.max_lost defaults to 3");
	TAP_OK(json_is_null(json_object_get(rec, "max_gpu_seconds")), "recovery.max_gpu_seconds defaults to null");
	TAP_OK(json_is_null(json_object_get(rec, "validate_steps")), "recovery.validate_steps defaults to null");
	TAP_INT_EQ(json_integer_value(json_object_get(rec, "early_steps")), 10, "recovery.early_steps defaults to 10");
	TAP_INT_EQ(json_integer_value(json_object_get(rec, "quarantine_after")), 2, "recovery.quarantine_after defaults to 2");
	TAP_INT_EQ(json_integer_value(json_object_get(rec, "env_fault_window_s")), 3600,
		   "recovery.env_fault_window_s defaults to 3600");
	TAP_OK(json_is_null(json_object_get(rec, "stall_timeout_s")), "recovery.stall_timeout_s defaults to null (the worker's)");
	TAP_INT_EQ(json_object_size(rec), 10, "recovery has exactly the ten RECOVERY keys");
	json_decref(rec);

	field = check("\"priority\":5,\"recovery\":{\"max_lost\":0,\"max_gpu_seconds\":7200}", &rec, &prio);
	TAP_OK(field == NULL, "given priority and recovery values are accepted");
	free(field);
	TAP_INT_EQ(prio, 5, "the given priority is kept");
	TAP_INT_EQ(json_integer_value(json_object_get(rec, "max_lost")), 0, "a given recovery value is kept");
	TAP_INT_EQ(json_integer_value(json_object_get(rec, "max_gpu_seconds")), 7200, "a nullable knob takes an integer");
	TAP_INT_EQ(json_integer_value(json_object_get(rec, "max_attempts")), 10, "the others still get defaults");
	json_decref(rec);

	expect_field("\"bogus\":1", "bogus", "an unknown top-level field is named");
	/* the start time (migration 025): run_after or start_in_s, one of them, each checked */
	expect_field("\"start_in_s\":3600", NULL, "start_in_s 3600 is taken");
	expect_field("\"start_in_s\":null,\"run_after\":null", NULL, "null start fields are absent");
	expect_field("\"run_after\":\"2001-01-01T00:00:00Z\"", NULL, "a past run_after is taken (it means now)");
	expect_field("\"run_after\":\"2001-01-01T00:00:00\"", "run_after", "a run_after without its zone is refused");
	expect_field("\"run_after\":\"2999-01-01T00:00:00Z\"", "run_after", "a run_after past 365 days is refused");
	expect_field("\"run_after\":0", "run_after", "a numeric run_after is refused");
	expect_field("\"start_in_s\":0", "start_in_s", "start_in_s 0 is refused");
	expect_field("\"start_in_s\":31536001", "start_in_s", "start_in_s past 365 days is refused");
	expect_field("\"start_in_s\":\"5\"", "start_in_s", "a string start_in_s is refused");
	expect_field("\"start_in_s\":5,\"run_after\":\"2001-01-01T00:00:00Z\"", "start_in_s", "both: refused, naming start_in_s");
	expect_field("\"name\":7", "name", "a non-string name is refused");
	expect_field("\"priority\":\"high\"", "priority", "a non-integer priority is refused");
	expect_field("\"priority\":1.5", "priority", "a fractional priority is refused");
	expect_field("\"priority\":100000000", "priority", "an out-of-range priority is refused");
	expect_field("\"recovery\":[]", "recovery", "a non-object recovery is refused");
	expect_field("\"recovery\":{\"max_tries\":3}", "recovery.max_tries", "an unknown recovery key is named");
	expect_field("\"recovery\":{\"max_attempts\":0}", "recovery.max_attempts", "max_attempts below 1 is refused");
	expect_field("\"recovery\":{\"max_lost\":-1}", "recovery.max_lost", "a negative max_lost is refused");
	expect_field("\"recovery\":{\"scale_up\":1}", "recovery.scale_up", "a non-boolean scale_up is refused");
	expect_field("\"recovery\":{\"stall_timeout_s\":604801}", "recovery.stall_timeout_s",
		     "a stall timeout over a week is refused");
	expect_field("\"recovery\":{\"max_attempts\":null}", "recovery.max_attempts",
		     "null is refused for a knob that is not nullable");

	body = json_pack("{s:s}", "name", "x");
	TAP_OK(api_jobs_check_submit(body, &rec, &name, &prio, &field, &message) == -1, "a body without config is refused");
	TAP_STR_EQ(field, "config", "a missing config is named");
	free(field);
	free(message);
	json_decref(body);

	body = json_pack("{s:{s:s}}", "config", "job", "extension");
	TAP_OK(api_jobs_check_submit(body, &rec, &name, &prio, &field, &message) == -1,
	       "a config that is not an AI Toolkit config is refused");
	TAP_OK(field != NULL && message != NULL, "the config's problem comes with a field and a message");
	TAP_OK(rec == NULL, "no recovery object is returned on refusal");
	free(field);
	free(message);
	json_decref(body);

	TAP_INT_EQ(http_parse_id("42"), 42, "an id parses");
	TAP_INT_EQ(http_parse_id("0"), -1, "id 0 is refused");
	TAP_INT_EQ(http_parse_id("-3"), -1, "a negative id is refused");
	TAP_INT_EQ(http_parse_id("12abc"), -1, "trailing garbage is refused");
	TAP_INT_EQ(http_parse_id("99999999999999999999999"), -1, "an overflowing id is refused");
	TAP_INT_EQ(http_parse_id(NULL), -1, "a missing id is refused");

	/* who an action's record names (hreq_by): the token's name, else its id */
	{
		struct hreq h;
		char by[64];
		memset(&h, 0, sizeof h);
		h.who.token_id = 17;
		TAP_STR_EQ(hreq_by(&h, by, sizeof by), "token 17", "hreq_by: a token without a name is named by its id");
		snprintf(h.who.name, sizeof h.who.name, "oncall");
		TAP_STR_EQ(hreq_by(&h, by, sizeof by), "oncall", "hreq_by: else by its name");
	}
	/* a config file as a YAML submit body and the /ui/plan form read it */
	{
		static const char yaml[] = "job: extension\nconfig:\n  name: x\n  process: [{type: sd_trainer}]\n";
		static const char tabbed[] = "{\n\t\"job\": \"extension\",\n\t\"config\": {\"name\": \"x\"}\n}\n";
		const char *error = NULL;
		char deep[200] = "", *m = NULL;
		json_t *v = NULL;

		TAP_OK(api_jobs_parse_yaml(yaml, strlen(yaml), &v, &error, &m) == 0 &&
		       !strcmp(json_string_value(json_object_get(v, "job")) ?: "", "extension") && m == NULL,
		       "parse_yaml: a YAML config file is a mapping");
		json_decref(v);
		TAP_OK(api_jobs_parse_yaml(good_config, strlen(good_config), &v, &error, &m) == 0 &&
		       json_integer_value(json_object_get(json_object_get(json_array_get(json_object_get(
			       json_object_get(v, "config"), "process"), 0), "train"), "batch_size")) == 4,
		       "parse_yaml: a JSON config file too, typed");
		json_decref(v);
		TAP_OK(api_jobs_parse_yaml(tabbed, strlen(tabbed), &v, &error, &m) == 0 && json_is_object(v),
		       "parse_yaml: JSON indented with tabs");
		json_decref(v);
		TAP_OK(api_jobs_parse_yaml("job: [x\n", 8, &v, &error, &m) == -1 && v == NULL && !strcmp(error, "invalid_yaml") &&
		       strstr(m, "line "), "parse_yaml: malformed YAML is invalid_yaml, naming the line");
		free(m);
		TAP_OK(api_jobs_parse_yaml("- a\n- b\n", 8, &v, &error, &m) == -1 && !strcmp(error, "invalid_body") &&
		       strstr(m, "mapping"), "parse_yaml: a list is not a config file");
		free(m);
		TAP_OK(api_jobs_parse_yaml(NULL, 0, &v, &error, &m) == -1 && !strcmp(error, "invalid_body"),
		       "parse_yaml: nothing is not a config file");
		free(m);
		for (int i = 0; i < 65; i++)
			strcat(deep, "[");
		for (int i = 0; i < 65; i++)
			strcat(deep, "]");
		memmove(deep + 3, deep, strlen(deep) + 1);
		memcpy(deep, "a: ", 3);
		TAP_OK(api_jobs_parse_yaml(deep, strlen(deep), &v, &error, &m) == -1 && !strcmp(error, "json_too_deep"),
		       "parse_yaml: nesting past the JSON limit is refused");
		free(m);
	}
	return TAP_DONE();
}
