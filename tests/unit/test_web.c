/* Unit tests of the web pages' pure parts: HTML escaping, the Markdown subset of escalation
 * reports (report.c's own output included), the SVG memory chart from given facts, the start-lower
 * story of a job (issue 12), the cookie / form / redirect helpers of the login, and which forms a
 * page offers to which caller (html.c) and the same-site check of their POSTs (web_act.c), and the
 * queue page's filter form and links with the rule it shares with GET /v1/jobs (api_jobs.c), the
 * plan page's form and its rendering of a plan document (web_plan.c), and the tokens page, its
 * one-time secret page and its limit field read with the API's rule (web_tokens.c, api_tokens.c),
 * and a scheduled job's line and forms. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../../server/html.h"
#include "../../recovery/report.h"
#include "tap.h"
#include "../../server/api_jobs.h"
#include "../../server/api_tokens.h"
#include "../../server/web.h"
#include "../../server/web_usage.h"
#include "../../server/api_usage.h"
#include "../../server/web_act.h"
#include "../../server/web_plan.h"
#include "../../server/web_tokens.h"
#include "../../server/http.h"

static char *esc(const char *s)
{
	struct hbuf b = { 0 };

	html_esc(&b, s);
	return html_take(&b);
}

static char *md(const char *s)
{
	struct hbuf b = { 0 };

	html_markdown(&b, s);
	return html_take(&b);
}

static bool has(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle) != NULL;
}

static void test_escape(void)
{
	char *s = esc("<script>alert('x')</script> & \"q\"");
	TAP_STR_EQ(s, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;", "html_esc escapes < > & \" '");
	free(s);
	s = esc("a\x01" "b\tc");
	TAP_STR_EQ(s, "a\xef\xbf\xbd" "b\tc", "control bytes become U+FFFD, tab kept");
	free(s);
	s = esc("h\xc3\xa9llo");
	TAP_STR_EQ(s, "h\xc3\xa9llo", "UTF-8 passes unchanged");
	free(s);
	struct hbuf b = { 0 };
	html_url(&b, "/ui/jobs/1?x=a b&c");
	s = html_take(&b);
	TAP_STR_EQ(s, "%2Fui%2Fjobs%2F1%3Fx%3Da%20b%26c", "html_url percent-encodes a query value");
	free(s);
	{
		json_t *v = json_pack("{s:s, s:i, s:n, s:{s:s}}", "s", "<b>", "n", 42, "z", "o", "k", "<v>");
		html_esc_json(&b, json_object_get(v, "s"), "NULL");
		html_add(&b, "|");
		html_esc_json(&b, json_object_get(v, "n"), "NULL");
		html_add(&b, "|");
		html_esc_json(&b, json_object_get(v, "z"), "<i>-</i>");
		html_add(&b, "|");
		html_esc_json(&b, json_object_get(v, "absent"), "<i>-</i>");
		html_add(&b, "|");
		html_esc_json(&b, json_object_get(v, "o"), NULL);
		s = html_take(&b);
		TAP_STR_EQ(s, "&lt;b&gt;|42|<i>-</i>|<i>-</i>|{&quot;k&quot;:&quot;&lt;v&gt;&quot;}",
			   "html_esc_json: a string escaped, a number as JSON, null and absent as the given markup, an object escaped");
		free(s);
		json_decref(v);
	}
	{
		json_t *ch = json_pack("[{s:s, s:i, s:i}, {s:s, s:n, s:s}]", "path", "train.batch_size", "old", 4, "new", 1,
				       "path", "x<y", "old", "new", "<&>");
		html_changes_table(&b, ch, "before", "after", "~");
		s = html_take(&b);
		TAP_OK(has(s, "<th>path</th><th>before</th><th>after</th>"), "html_changes_table heads its columns with the labels");
		TAP_OK(has(s, "<tr><td><code>train.batch_size</code></td><td>4</td><td>1</td></tr>"), "one row per change");
		TAP_OK(has(s, "<tr><td><code>x&lt;y</code></td><td>~</td><td>&lt;&amp;&gt;</td></tr>"),
		       "paths and values escaped, a null value as the given markup");
		free(s);
		json_decref(ch);
	}
}

static void test_markdown(void)
{
	char *h = md("# Title <b>\n\n## Sub\n\nplain **bold** and `co<de>` text\n");
	TAP_OK(has(h, "<h1>Title &lt;b&gt;</h1>"), "heading, escaped");
	TAP_OK(has(h, "<h2>Sub</h2>"), "second-level heading");
	TAP_OK(has(h, "<p>plain <strong>bold</strong> and <code>co&lt;de&gt;</code> text</p>"), "inline bold and code");
	free(h);

	h = md("- one\n- two\n  - nested\n- three\n\nafter\n");
	TAP_OK(has(h, "<ul>\n<li>one</li>\n<li>two<ul>\n<li>nested</li></ul>\n</li>\n<li>three</li></ul>\n<p>after</p>"),
	   "lists, nested by two spaces, closed before a paragraph");
	free(h);

	h = md("| a | b |\n| --- | --- |\n| x \\| y | `z` |\n| 1 | 2 |\n");
	TAP_OK(has(h, "<thead><tr><th>a</th><th>b</th></tr>"), "table header");
	TAP_OK(has(h, "<tr><td>x | y</td><td><code>z</code></td></tr>"), "escaped pipe stays in its cell");
	TAP_OK(has(h, "<tr><td>1</td><td>2</td></tr>"), "second row");
	free(h);

	h = md("````text\n```\n<img src=x onerror=alert(1)>\n````\nafter\n");
	TAP_OK(has(h, "<pre><code>```\n&lt;img src=x onerror=alert(1)&gt;\n</code></pre>"),
	   "a longer fence keeps a shorter one inside, contents escaped");
	TAP_OK(has(h, "<p>after</p>"), "text after the fence is a paragraph");
	free(h);

	h = md("<script>x</script>\n- <i>\n| <b> | c |\n| - | - |\n");
	TAP_OK(!has(h, "<script>") && !has(h, "<i>") && !has(h, "<b>"), "raw HTML never passes");
	free(h);

	h = md("```\nunterminated <x>");
	TAP_OK(has(h, "<pre><code>unterminated &lt;x&gt;\n</code></pre>"), "an unterminated fence ends with the text");
	free(h);
	h = md("");
	TAP_STR_EQ(h, "", "empty document");
	free(h);
}

/* report.c's own Markdown renders with its parts: the trigger heading, the attempts table, the
 * log fence. */
static void test_report_markdown(void)
{
	json_t *ctx = json_pack("{s:{s:i, s:s, s:{s:{s:s}}, s:{s:{s:s}}}, s:[], s:{s:i, s:s, s:{s:s, s:[s, s]}}}",
				"job", "id", 7, "kind", "image", "target_config", "config", "name", "lora|x",
				"current_config", "config", "name", "lora|x", "attempts", "attempt", "number", 1,
				"gpu_uuid", "GPU-1", "facts", "phase", "load", "log_tail", "loading", "Error <fatal>");
	json_t *dec = json_pack("{s:s, s:s, s:s, s:[s], s:s, s:{s:s, s:s, s:s}}", "class", "env_fault", "rule",
				"cublas", "action", "retry_clean", "evidence", "CUBLAS_STATUS_ALLOC_FAILED", "job_state",
				"queued", "escalation", "trigger", "gpu_quarantined", "summary", "GPU GPU-1 quarantined",
				"recommendation", "inspect the GPU");
	json_t *rep = report_build(ctx, dec);
	char *h = md(json_string_value(json_object_get(rep, "markdown")));
	TAP_OK(has(h, "<h1>rung escalation: gpu_quarantined</h1>"), "report heading names the trigger");
	TAP_OK(has(h, "<li><strong>Recommended next step</strong>: inspect the GPU</li>"), "recommendation in the list");
	TAP_OK(has(h, "<th>#</th><th>worker</th><th>GPU</th>") && has(h, "<td>GPU-1</td>"), "attempts table");
	TAP_OK(has(h, "<pre><code>loading\nError &lt;fatal&gt;\n</code></pre>"), "log lines fenced and escaped");
	TAP_OK(!has(h, "```"), "no fence markers left");
	free(h);
	json_decref(rep);
	json_decref(ctx);
	json_decref(dec);
}

static char *chart(const char *attempt_json, long long total, int *drawn)
{
	struct hbuf b = { 0 };
	json_t *a = json_loads(attempt_json, 0, NULL);

	*drawn = html_mem_chart(&b, a, total);
	json_decref(a);
	return html_take(&b);
}

static void test_chart(void)
{
	int drawn;
	char *s = chart("{\"facts\": {\"oom\": {\"tried_to_allocate_mib\": 2000, \"allocated_by_pytorch_mib\": 23000, "
			"\"total_capacity_mib\": 24000}}, \"memory_used_mib\": 100}", 48000, &drawn);
	TAP_OK(drawn == 1 && has(s, "<svg class=\"memchart\""), "OOM facts draw a chart");
	TAP_OK(has(s, "needed 25000 MiB of 24000 MiB"), "need = allocated + tried, against the message's capacity");
	TAP_OK(has(s, "class=\"tried\"") && has(s, "#d9534f"), "the part over capacity is red");
	TAP_OK(has(s, "capacity 24000 MiB") && has(s, "class=\"capacity\""), "capacity line and label");
	/* scale = 25000 * 1.05 = 26250; capacity at 10 + 24000 * 580 / 26250 = 540 */
	TAP_OK(has(s, "x1=\"540\""), "capacity line placed on the scale (x=540)");
	free(s);

	s = chart("{\"facts\": {\"oom\": {\"tried_to_allocate_mib\": 512, \"total_capacity_mib\": null}}}", 8000, &drawn);
	TAP_OK(drawn == 1 && has(s, "needed 512 MiB of 8000 MiB"), "no capacity in the message: the GPU's total");
	free(s);

	s = chart("{\"facts\": {\"oom\": null}, \"memory_used_mib\": 21000}", 24576, &drawn);
	TAP_OK(drawn == 1 && has(s, "last reported 21000 MiB used of 24576 MiB") && has(s, "class=\"used\""),
	   "without OOM figures: the heartbeat's memory against the GPU");
	free(s);

	s = chart("{\"facts\": {\"oom\": null}, \"memory_used_mib\": null}", 24576, &drawn);
	TAP_OK(drawn == 0 && strcmp(s, "") == 0, "nothing to draw: no chart, nothing appended");
	free(s);
	s = chart("{\"memory_used_mib\": 5000}", 0, &drawn);
	TAP_OK(drawn == 0, "unknown capacity: no chart");
	free(s);
}

static char *start_lower(const char *job_json, int *drawn, char **line)
{
	struct hbuf b = { 0 }, l = { 0 };
	json_t *j = json_loads(job_json, 0, NULL);

	*drawn = html_start_lower(&b, j);
	html_start_lower_line(&l, j);
	*line = html_take(&l);
	json_decref(j);
	return html_take(&b);
}

/* The story as lease.c records it: the reason, the GPU, the rungs, the changes and both estimates;
 * every recorded text (here hostile) escaped. */
static void test_start_lower(void)
{
	int drawn;
	char *line, *s = start_lower(
		"{\"attempts\": 2, \"recovery_state\": {\"ceilings\": {}, \"started_lower\": {\"attempt\": 1, "
		"\"gpu_mib\": 24576, \"reason\": \"memory model: <b>no</b> & fit\", \"rungs\": [\"batch_size\", \"<i>\"], "
		"\"skipped\": [\"resolution\"], \"changes\": [{\"path\": \"config.process[0].train.batch_size\", \"old\": 4, "
		"\"new\": 1}, {\"path\": \"x<y\", \"old\": \"a'b\", \"new\": null}], "
		"\"target_estimate\": {\"peak_mib\": 28800, \"fits\": false, \"margin_mib\": 900, \"usable_mib\": 23552, "
		"\"evidence\": \"flux: est <28.1> GiB\"}, \"estimate\": {\"peak_mib\": 20100, \"fits\": true, "
		"\"margin_mib\": 900, \"usable_mib\": 23552, \"evidence\": \"flux: est 19.6 GiB\"}}}}", &drawn, &line);

	TAP_OK(drawn == 1 && has(s, "<section class=\"card started-lower\" id=\"started-lower\">") &&
	       has(s, "Attempt 1 started below the target"), "a job that started lower gets the story's card");
	TAP_OK(has(s, "memory model: &lt;b&gt;no&lt;/b&gt; &amp; fit") && !has(s, "<b>"), "the reason, escaped");
	TAP_OK(has(s, "on this 24576 MiB GPU") &&
	       has(s, "<tr><th>target</th><td>28800 MiB</td><td>900 MiB</td><td>23552 MiB</td><td>predicted not to fit</td>"
		      "<td>flux: est &lt;28.1&gt; GiB</td></tr>"),
	       "the target's estimate against the GPU's usable memory, evidence escaped");
	TAP_OK(has(s, "<tr><th>started with</th><td>20100 MiB</td><td>900 MiB</td><td>23552 MiB</td><td>predicted to fit</td>"),
	       "the estimate of the config it started with");
	TAP_OK(has(s, "Rungs applied: <code>batch_size</code>, <code>&lt;i&gt;</code>; skipped (predicted to fail alone): "
		      "<code>resolution</code>") && !has(s, "<i>"), "the rungs applied and skipped, escaped");
	TAP_OK(has(s, "<tr><td><code>config.process[0].train.batch_size</code></td><td>4</td><td>1</td></tr>") &&
	       has(s, "<tr><td><code>x&lt;y</code></td><td>a&#39;b</td><td>-</td></tr>"), "the config changes from the target");
	TAP_STR_EQ(line, "started below the target (memory model), then scaled up: attempt 1 ran with <code>batch_size</code>, "
			 "<code>&lt;i&gt;</code> applied", "the summary line as rungctl's verdict phrases it");
	free(s);
	free(line);

	s = start_lower("{\"attempts\": 1, \"recovery_state\": {\"started_lower\": {}}}", &drawn, &line);
	TAP_OK(drawn == 1 && has(s, "Attempt 1 started below the target") &&
	       has(s, "memory model: the target is predicted not to fit this GPU") &&
	       has(s, "<th>target</th><td colspan=\"5\">no estimate recorded</td>") && has(s, "No changes recorded."),
	       "a bare record: attempt 1, the generic reason, nothing invented");
	TAP_STR_EQ(line, "started below the target (memory model): attempt 1 ran with the model's rungs applied",
		   "no later attempt: not scaled up");
	free(s);
	free(line);

	s = start_lower("{\"attempts\": 3, \"recovery_state\": {\"ceilings\": {\"steps\": 100}}}", &drawn, &line);
	TAP_OK(drawn == 0 && !strcmp(s, "") && !strcmp(line, ""), "a job that did not start lower: nothing");
	free(s);
	free(line);
	s = start_lower("{\"recovery_state\": {\"started_lower\": \"yes\"}}", &drawn, &line);
	TAP_OK(drawn == 0 && !strcmp(s, ""), "a started_lower that is not an object: nothing");
	free(s);
	free(line);
	{
		struct hbuf b = { 0 };
		json_t *j = json_loads("{\"recovery_state\": {\"started_bigger\": {\"gpu_mib\": 24576, "
				       "\"min_gpu_memory_mib\": 24577}}}", 0, NULL);
		TAP_OK(html_start_bigger_line(&b, j) == 1, "a job handed back for a bigger GPU: its line");
		s = html_take(&b);
		TAP_STR_EQ(s, "started on a bigger GPU (memory model): its claim on a 24576 MiB GPU was handed back before it "
			   "ran, for a GPU with at least 24577 MiB", "as rungctl's verdict phrases it");
		free(s);
		json_decref(j);
		j = json_loads("{\"placement\": {\"gpus\": 0, \"min_gpu_memory_mib\": 100000, \"fleet_max_gpu_mib\": 81920}}",
			       0, NULL);
		TAP_OK(html_placement_line(&b, j) == 1, "a queued job no GPU can take: its line");
		s = html_take(&b);
		TAP_STR_EQ(s, "waiting for a GPU: none of the usable GPUs on live workers meets its constraints (at least "
			   "100000 MiB; the largest has 81920 MiB)", "in rungctl's words");
		free(s);
		json_decref(j);
		j = json_loads("{\"recovery_state\": {\"retried\": {\"by\": \"<b>x</b>\", \"from\": \"current\", "
			       "\"previous_state\": \"failed\", \"budget_from\": 4, \"note\": \"swap & retry\"}}}", 0, NULL);
		TAP_OK(html_retried_line(&b, j) == 1, "a retried job: its line");
		s = html_take(&b);
		TAP_STR_EQ(s, "retried by &lt;b&gt;x&lt;/b&gt; from the current config after it was failed; budgets count from "
			   "attempt 5: swap &amp; retry", "in rungctl's words, escaped");
		free(s);
		json_decref(j);
		j = json_loads("{\"placement\": {\"gpus\": 3}}", 0, NULL);
		TAP_OK(html_placement_line(&b, j) == 0, "none when a GPU can take it");
		free(html_take(&b));
		json_decref(j);
		j = json_loads("{\"placement\": {\"gpus\": 3, \"ahead\": 4}}", 0, NULL);
		TAP_OK(html_placement_line(&b, j) == 1, "a GPU can take it and 4 jobs are ahead: a line");
		s = html_take(&b);
		TAP_STR_EQ(s, "waiting its turn: 4 jobs ahead of it in the queue", "its place in the queue, in rungctl's words");
		free(s);
		json_decref(j);
		j = json_loads("{\"placement\": {\"gpus\": 0, \"draining_gpus\": 1, \"min_gpu_memory_mib\": 100000, "
			       "\"fleet_max_gpu_mib\": 163840, \"ahead\": 1}}", 0, NULL);
		TAP_OK(html_placement_line(&b, j) == 1, "no GPU now and 1 job ahead: a line");
		s = html_take(&b);
		TAP_STR_EQ(s, "waiting for a GPU: the 1 that meet its constraints are on drained workers (it runs once one is "
			   "resumed); 1 job ahead of it in the queue", "why it waits, then its place");
		free(s);
		json_decref(j);
		j = json_loads("{\"pool\": \"h<200>\", \"placement\": {\"gpus\": 0, \"pool\": \"h<200>\", "
			       "\"other_pools_gpus\": 3, \"ahead\": 0}}", 0, NULL);
		TAP_OK(html_placement_line(&b, j) == 1, "no GPU in its pool, 3 in others: a line");
		s = html_take(&b);
		TAP_STR_EQ(s, "waiting for a GPU: no GPU in pool h&lt;200&gt; can run it (3 in other pools); no job ahead of it "
			   "in the queue", "the pool is why it waits, in rungctl's words, escaped");
		free(s);
		json_decref(j);
		j = json_loads("{\"pool\": \"h<200>\", \"placement\": {\"gpus\": 0, \"pool\": \"h<200>\", "
			       "\"borrowing_gpus\": 2, \"other_pools_gpus\": 3, \"ahead\": 1}}", 0, NULL);
		TAP_OK(html_placement_line(&b, j) == 1, "no GPU in its pool, 2 of borrowers: a line");
		s = html_take(&b);
		TAP_STR_EQ(s, "waiting for a GPU: no GPU in pool h&lt;200&gt; can run it; 2 GPUs of workers that borrow from "
			   "h&lt;200&gt; may take it when their own pool has no job for them; 1 job ahead of it in the queue",
			   "borrowers (migration 028) are why it may still run, in rungctl's words, escaped");
		free(s);
		json_decref(j);
		j = json_loads("{\"recovery_state\": {\"started_lower\": {}}}", 0, NULL);
		TAP_OK(html_start_bigger_line(&b, j) == 0, "none without the record");
		s = html_take(&b);
		TAP_OK(!s || !strcmp(s, ""), "and nothing appended");
		free(s);
		json_decref(j);
	}
}

static void test_helpers(void)
{
	char *v = web_cookie("a=1; rung_token=rung_abc; b=2", "rung_token");
	TAP_STR_EQ(v, "rung_abc", "cookie found among others");
	free(v);
	v = web_cookie("xrung_token=no; rung_token=\"q\"", "rung_token");
	TAP_STR_EQ(v, "q", "cookie name matched exactly, quotes removed");
	free(v);
	TAP_OK(web_cookie("a=1", "rung_token") == NULL && web_cookie(NULL, "rung_token") == NULL, "absent cookie");

	const char *form = "next=%2Fui%2Fjobs%2F3&token=rung_a%2Bb+c";
	v = web_form_value(form, strlen(form), "token");
	TAP_STR_EQ(v, "rung_a+b c", "form value decoded (+ and %XX)");
	free(v);
	v = web_form_value(form, strlen(form), "next");
	TAP_STR_EQ(v, "/ui/jobs/3", "second form value");
	free(v);
	TAP_OK(web_form_value("token=%zz", 9, "token") == NULL, "malformed escape refused");
	TAP_OK(web_form_value("token=%00", 9, "token") == NULL, "NUL refused");
	TAP_OK(web_form_value("token=ab%", 9, "token") == NULL, "truncated escape refused");

	TAP_OK(web_safe_next("/ui/jobs/3") && web_safe_next("/ui") && web_safe_next("/ui/?state=failed"), "local pages");
	TAP_OK(!web_safe_next("//evil.example/ui") && !web_safe_next("https://evil.example/") &&
	   !web_safe_next("/ui//evil.example") && !web_safe_next("/uix") && !web_safe_next("/ui/\\evil") &&
	   !web_safe_next("/v1/jobs") && !web_safe_next(NULL), "no open redirect");
}

/* The queue page's filters: the links that carry them and the form that shows them (html.c), and
 * the rule the page shares with GET /v1/jobs (api_jobs_list_filter). */
static void test_queue_filters(void)
{
	static const char *const states[] = { "queued", "failed" };
	static const char *const keys[] = { "state", "owner", "kind", "cursor" };
	struct hbuf b = { 0 };
	struct auth_who staff = { .role = AUTH_SUPPORT }, sub = { .role = AUTH_SUBMITTER };
	const char *scope, *kind, *field;
	char *s, *msg;

	{
		const char *values[] = { "queued", "a&b \"c\"", NULL, "42" };
		html_href(&b, "/ui/jobs", keys, values, 4);
		s = html_take(&b);
		TAP_STR_EQ(s, "/ui/jobs?state=queued&amp;owner=a%26b%20%22c%22&amp;cursor=42",
			   "html_href: the values given, percent-encoded, joined by &amp;");
		free(s);
		const char *none[] = { NULL, "", NULL, NULL };
		html_href(&b, "/ui/jobs", keys, none, 4);
		s = html_take(&b);
		TAP_STR_EQ(s, "/ui/jobs", "html_href: no value, no query");
		free(s);
	}

	html_jobs_filter_form(&b, AUTH_SUPPORT, "/ui/jobs", states, 2, "failed", "\"><script>x</script>", "video",
			      "team=\"><b>", "h200\"><i>");
	s = html_take(&b);
	TAP_OK(has(s, "<form method=\"get\" class=\"filter\" action=\"/ui/jobs\">"), "the filter form is a GET to the page");
	TAP_OK(has(s, "<option value=\"failed\" selected>failed</option>") && has(s, "<option value=\"queued\">queued</option>") &&
	       has(s, "<option value=\"\">all</option>"), "state: every state and all, the current one selected");
	TAP_OK(has(s, "name=\"owner\" maxlength=\"64\" value=\"&quot;&gt;&lt;script&gt;x&lt;/script&gt;\"") && !has(s, "<script>"),
	       "staff get the owner field, its value escaped");
	TAP_OK(has(s, "<option value=\"video\" selected>video</option>") && has(s, "<option value=\"image\">image</option>"),
	       "kind: image and video, the current one selected");
	TAP_OK(has(s, "name=\"label\" maxlength=\"1024\" value=\"team=&quot;&gt;&lt;b&gt;\"") && !has(s, "<b>"),
	       "the labels field, its value escaped");
	TAP_OK(has(s, "name=\"pool\" maxlength=\"63\" value=\"h200&quot;&gt;&lt;i&gt;\"") && !has(s, "<i>"),
	       "the pool field, at most a pool name long, its value escaped");
	free(s);
	html_jobs_filter_form(&b, AUTH_SUBMITTER, "/ui/jobs", states, 2, NULL, NULL, NULL, NULL, NULL);
	s = html_take(&b);
	TAP_OK(has(s, "name=\"state\"") && has(s, "name=\"kind\"") && !has(s, "name=\"owner\"") && !has(s, "selected"),
	       "a submitter's form: state and kind, no owner field, nothing selected");
	TAP_OK(has(s, "name=\"pool\" maxlength=\"63\" value=\"\""), "a submitter's form has the pool field, empty");
	free(s);

	snprintf(sub.name, sizeof sub.name, "alice");
	TAP_OK(api_jobs_list_filter(&staff, "bob", "video", &scope, &kind, &field, &msg) == 0 && !strcmp(scope, "bob") &&
	       !strcmp(kind, "video") && !msg, "staff name an owner and a kind");
	TAP_OK(api_jobs_list_filter(&staff, "", "", &scope, &kind, &field, &msg) == 0 && !scope && !kind,
	       "empty values are no filter: every owner");
	TAP_OK(api_jobs_list_filter(&sub, NULL, NULL, &scope, &kind, &field, &msg) == 0 && !strcmp(scope, "alice"),
	       "a submitter's list is its own");
	TAP_OK(api_jobs_list_filter(&sub, "alice", NULL, &scope, &kind, &field, &msg) == 0 && !strcmp(scope, "alice"),
	       "a submitter may name itself");
	TAP_OK(api_jobs_list_filter(&sub, "bob", NULL, &scope, &kind, &field, &msg) == 403 && !strcmp(field, "owner") && msg,
	       "a submitter naming another owner: 403 naming owner");
	free(msg);
	TAP_OK(api_jobs_list_filter(&staff, NULL, "audio", &scope, &kind, &field, &msg) == 400 && !strcmp(field, "kind"),
	       "kind audio: 400 naming kind");
	free(msg);
	TAP_OK(api_jobs_list_filter(&staff, "a b", NULL, &scope, &kind, &field, &msg) == 400 && !strcmp(field, "owner"),
	       "an owner that is not a token name: 400 naming owner");
	free(msg);

	/* GET /v1/usage's window and scope (api_usage_window) */
	const int64_t now = 1796083200000LL; /* 2026-12-01T00:00:00Z */
	int64_t lo, hi;
	TAP_OK(api_usage_window(&staff, NULL, "", NULL, now, &lo, &hi, &scope, &field, &msg) == 0 && hi == now &&
		       lo == now - USAGE_DEFAULT_WINDOW_MS && !scope,
	       "usage: until defaults to now, since to a week before, every owner for staff");
	TAP_OK(api_usage_window(&staff, NULL, "2026-11-01T00:00:00+01:00", NULL, now, &lo, &hi, &scope, &field, &msg) == 0 &&
		       hi == 1793487600000LL && lo == hi - USAGE_DEFAULT_WINDOW_MS,
	       "usage: since defaults to a week before the until given");
	TAP_OK(api_usage_window(&sub, "2026-11-01T00:00:00Z", NULL, NULL, now, &lo, &hi, &scope, &field, &msg) == 0 &&
		       lo == 1793491200000LL && !strcmp(scope, "alice"),
	       "usage: a submitter's is its own");
	TAP_OK(api_usage_window(&sub, NULL, NULL, "bob", now, &lo, &hi, &scope, &field, &msg) == 403 &&
		       !strcmp(field, "owner") && strstr(msg, "usage"),
	       "usage: a submitter naming another owner: 403 naming owner, in usage's words");
	free(msg);
	static const struct { const char *since, *until, *field; } bad[] = {
		{ "yesterday", NULL, "since" }, { NULL, "2026-11-01", "until" },
		{ "2026-12-01T00:00:00Z", "2026-12-01T00:00:00Z", "since" }, { "2026-12-02T00:00:00Z", NULL, "since" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int code = api_usage_window(&staff, bad[i].since, bad[i].until, NULL, now, &lo, &hi, &scope, &field, &msg);
		TAP_OK(code == 400 && !strcmp(field, bad[i].field) && msg, "usage: a bad window names its field");
		free(msg);
	}
}

/* The forms a page shows depend on the caller's role and the object's state; a POST from another
 * site is refused. */
static void test_actions(void)
{
	struct hreq h;
	struct hbuf b = { 0 };
	json_t *failed = json_loads("{\"id\": 7, \"state\": \"failed\"}", 0, NULL);
	json_t *queued = json_loads("{\"id\": 8, \"state\": \"queued\", \"cancel_requested\": false}", 0, NULL);
	json_t *open = json_loads("{\"id\": 3, \"state\": \"open\"}", 0, NULL);
	json_t *acked = json_loads("{\"id\": 3, \"state\": \"acknowledged\"}", 0, NULL);
	json_t *gpu = json_loads("{\"uuid\": \"GPU-a/b\", \"state\": \"quarantined\"}", 0, NULL);
	json_t *okgpu = json_loads("{\"uuid\": \"GPU-c\", \"state\": \"ok\"}", 0, NULL);
	json_t *worker = json_loads("{\"id\": 4, \"state\": \"online\"}", 0, NULL);
	json_t *drained = json_loads("{\"id\": 4, \"state\": \"draining\"}", 0, NULL);
	char *s;

	memset(&h, 0, sizeof h);
	h.who.role = AUTH_SUPPORT;
	html_job_forms(&b, h.who.role, failed);
	s = html_take(&b);
	TAP_OK(strstr(s, "action=\"/ui/jobs/7/retry\"") && strstr(s, "name=\"from\"") && strstr(s, "value=\"target\"") &&
	       !strstr(s, "cancel"), "support on a failed job: the retry form (from, note), no cancel");
	free(s);
	html_job_forms(&b, h.who.role, queued);
	s = html_take(&b);
	TAP_OK(s && !strstr(s, "/cancel") && strstr(s, "action=\"/ui/jobs/8/pool\"") && strstr(s, "name=\"pool\""),
	       "support on a queued job: no cancel (the owner's or an admin's), a move to another pool");
	free(s);
	h.who.role = AUTH_SUBMITTER;
	html_job_forms(&b, h.who.role, queued);
	s = html_take(&b);
	TAP_OK(s && strstr(s, "action=\"/ui/jobs/8/cancel\"") && !strstr(s, "retry"), "its owner on a queued job: cancel");
	free(s);
	json_object_set_new(queued, "state", json_string("running"));
	html_job_forms(&b, h.who.role, queued);
	s = html_take(&b);
	TAP_OK(s && strstr(s, "action=\"/ui/jobs/8/requeue\"") && strstr(s, "action=\"/ui/jobs/8/cancel\""),
	       "its owner on a running job: requeue and cancel");
	free(s);
	json_object_set_new(queued, "cancel_requested", json_true());
	html_job_forms(&b, h.who.role, queued);
	s = html_take(&b);
	TAP_OK(s && !strstr(s, "/cancel") && !strstr(s, "/requeue"), "a cancel already asked: no second cancel form, no requeue");
	free(s);
	json_object_set_new(queued, "state", json_string("queued"));
	json_object_set_new(queued, "state", json_string("succeeded"));
	html_job_forms(&b, h.who.role, queued);
	s = html_take(&b);
	TAP_OK(!s || !*s, "a succeeded job: no form, not even a move (it runs nowhere again)");
	free(s);
	html_escalation_forms(&b, h.who.role, open);
	s = html_take(&b);
	TAP_OK(!s || !*s, "a submitter gets no escalation forms");
	free(s);
	h.who.role = AUTH_ADMIN;
	html_escalation_forms(&b, h.who.role, open);
	s = html_take(&b);
	TAP_OK(s && strstr(s, "/ui/escalations/3/ack") && strstr(s, "/ui/escalations/3/resolve") && strstr(s, "name=\"note\""),
	       "an open escalation: acknowledge and resolve, with notes");
	free(s);
	html_escalation_forms(&b, h.who.role, acked);
	s = html_take(&b);
	TAP_OK(s && !strstr(s, "/ack") && strstr(s, "/resolve"), "an acknowledged one: resolve only");
	free(s);
	html_gpu_form(&b, h.who.role, gpu);
	html_gpu_form(&b, h.who.role, okgpu);
	s = html_take(&b);
	TAP_OK(s && strstr(s, "action=\"/ui/gpus/GPU-a%2Fb/release\"") && !strstr(s, "GPU-c"),
	       "a quarantined GPU: release (its uuid escaped in the path); an ok one: nothing");
	free(s);
	html_worker_form(&b, h.who.role, worker);
	s = html_take(&b);
	TAP_OK(s && strstr(s, "/ui/workers/4/drain") && strstr(s, "name=\"note\"") && strstr(s, "name=\"requeue\""),
	       "an online worker: drain, with a note and a requeue box");
	free(s);
	html_worker_form(&b, h.who.role, drained);
	s = html_take(&b);
	TAP_OK(s && strstr(s, "/ui/workers/4/resume") && !strstr(s, "drain\""), "a drained one: resume");
	free(s);

	TAP_OK(web_act_same_site(NULL, NULL, "h:8080", NULL), "same site: a POST without Origin or Sec-Fetch-Site (not a browser)");
	TAP_OK(web_act_same_site("http://h:8080", "same-origin", "h:8080", NULL), "same site: Origin is this host");
	TAP_OK(web_act_same_site("https://H:8080", NULL, "h:8080", NULL), "same site: https and another case");
	TAP_OK(!web_act_same_site("http://evil.example", NULL, "h:8080", NULL), "another Origin: refused");
	TAP_OK(!web_act_same_site("http://h:8081", NULL, "h:8080", NULL), "another port: refused");
	TAP_OK(!web_act_same_site(NULL, "cross-site", "h:8080", NULL), "Sec-Fetch-Site cross-site: refused");
	TAP_OK(!web_act_same_site(NULL, "same-site", "h:8080", NULL), "Sec-Fetch-Site same-site (a sibling host): refused");
	TAP_OK(!web_act_same_site("null", NULL, "h:8080", NULL), "Origin null: refused");
	/* behind a reverse proxy that sends Host: 127.0.0.1:8080 */
	TAP_OK(web_act_same_site("https://rung.example.com", "same-origin", "127.0.0.1:8080", NULL),
	       "behind a proxy: the browser's same-origin verdict holds");
	TAP_OK(web_act_same_site("https://rung.example.com", NULL, "127.0.0.1:8080", "rung.example.com"),
	       "behind a proxy, an older browser: the proxy's X-Forwarded-Host");
	TAP_OK(!web_act_same_site("https://evil.example", NULL, "127.0.0.1:8080", "rung.example.com"),
	       "behind a proxy: another Origin still refused");
	TAP_OK(!web_act_same_site("https://rung.example.com", "cross-site", "127.0.0.1:8080", "rung.example.com"),
	       "the browser's cross-site verdict wins over a matching Origin");
	json_decref(failed);
	json_decref(queued);
	json_decref(open);
	json_decref(acked);
	json_decref(gpu);
	json_decref(okgpu);
	json_decref(worker);
	json_decref(drained);
}

/* Occurrences of needle in hay. */
static int count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay ? strstr(hay, needle) : NULL; p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* web_plan_render of a plan document given as JSON text; heap. */
static char *plan_html(const char *doc)
{
	struct hbuf b = { 0 };
	json_t *p = json_loads(doc, 0, NULL);

	if (!p)
		return strdup("(test document did not parse)");
	web_plan_render(&b, p);
	json_decref(p);
	return html_take(&b);
}

/* The plan page: the three actions as rungctl plan names them, drained GPUs, a size not in the
 * fleet, no history, no GPU, and escaping of everything the document carries. */
static void test_plan(void)
{
	struct hbuf b = { 0 };
	char *s = plan_html(
		"{\"kind\": \"image\", \"arch\": \"flux\", \"observations\": 5, \"fleet_max_gpu_mib\": 49152, \"sizes\": ["
		"{\"gpu_mib\": 81920, \"gpus\": 0, \"draining_gpus\": 0, \"in_fleet\": false, \"action\": \"as_is\","
		" \"reason\": \"predicted to fit\", \"estimate\": null, \"target_estimate\": {\"peak_mib\": 28774, \"fits\": true},"
		" \"rungs\": [], \"changes\": []},"
		"{\"gpu_mib\": 24576, \"gpus\": 1, \"draining_gpus\": 0, \"in_fleet\": true, \"action\": \"start_lower\","
		" \"reason\": \"the target is predicted to need 28.1 GiB\", \"estimate\": {\"peak_mib\": 20480, \"fits\": true},"
		" \"target_estimate\": {\"peak_mib\": 28774, \"fits\": false}, \"rungs\": [\"batch_size\"],"
		" \"skipped\": [\"resolution\"],"
		" \"changes\": [{\"path\": \"config.process[0].train.batch_size\", \"old\": 4, \"new\": 1}]},"
		"{\"gpu_mib\": 16384, \"gpus\": 3, \"draining_gpus\": 2, \"in_fleet\": true, \"action\": \"requeue_bigger\","
		" \"reason\": \"every rung is predicted to fail on 16 GiB\", \"estimate\": null, \"target_estimate\": {\"fits\": false},"
		" \"rungs\": [], \"changes\": [], \"min_gpu_memory_mib\": 24576}]}");

	TAP_OK(has(s, "<h2>Plan for image <code class=\"arch\">flux</code></h2>") &&
	       has(s, "The memory model rests on 5 attempt(s) of <code>flux</code>"), "plan: the kind, the arch, the history");
	TAP_OK(has(s, "<tr><td>81920</td><td><span class=\"muted\">not in the fleet</span></td><td>28.1 GiB, fits</td>"
		      "<td class=\"action\">as submitted</td><td><span class=\"muted\">-</span></td></tr>"),
	       "a size not in the fleet, predicted to fit: as submitted");
	TAP_OK(has(s, "<tr><td>24576</td><td>1</td><td>28.1 GiB, does not fit</td><td class=\"action\">start lower: "
		      "<code>batch_size</code></td><td>20.0 GiB, fits</td></tr>"),
	       "start lower: the rungs and what the lowered config needs");
	TAP_OK(has(s, "<tr><td>16384</td><td>3 <span class=\"muted\">(+2 drained)</span></td><td>does not fit</td>"
		      "<td class=\"action\">wait for &ge; 24576 MiB</td>"),
	       "requeue bigger: wait for the size it needs; the drained GPUs counted apart");
	TAP_INT_EQ(count(s, "<section class=\"card plan-size\">"), 2, "a detail for each size not run as submitted, none for as_is");
	TAP_OK(has(s, "<h3>On 24576 MiB: start lower</h3>\n<p class=\"reason\">the target is predicted to need 28.1 GiB</p>") &&
	       has(s, "<tr><td><code>config.process[0].train.batch_size</code></td><td>4</td><td>1</td></tr>") &&
	       has(s, "<th>path</th><th>submitted</th><th>first attempt</th>") &&
	       has(s, "Skipped, predicted to fail on their own: <code>resolution</code>"),
	       "start lower's reason, skipped rungs and config changes (submitted -> first attempt)");
	TAP_OK(has(s, "<h3>On 16384 MiB: wait for a bigger GPU</h3>\n<p class=\"reason\">every rung is predicted to fail") &&
	       has(s, "No config change"), "requeue bigger's reason, without config changes");
	TAP_OK(!has(s, "no-gpu") && !has(s, "No memory history"), "a fleet with GPUs and history says neither is missing");
	free(s);

	s = plan_html("{\"kind\": \"video\", \"arch\": \"wan22_14b\", \"observations\": 0, \"sizes\": ["
		      "{\"gpu_mib\": 24576, \"gpus\": 2, \"draining_gpus\": 0, \"in_fleet\": true, \"action\": \"as_is\","
		      " \"reason\": \"no memory history\", \"estimate\": null, \"target_estimate\": null, \"rungs\": [], \"changes\": []}]}");
	TAP_OK(has(s, "No memory history of <code>wan22_14b</code> yet") && has(s, "runs the config as submitted"),
	       "no history: said plainly");
	TAP_OK(has(s, "<tr><td>24576</td><td>2</td><td><span class=\"muted\">no history</span></td><td class=\"action\">as "
		      "submitted</td>") && !has(s, "<section"), "no history: the target has no estimate, runs as submitted");
	free(s);

	s = plan_html("{\"kind\": \"image\", \"arch\": \"flux\", \"observations\": 3, \"sizes\": []}");
	TAP_OK(has(s, "The fleet has no GPU") && !has(s, "<table"), "no GPU in the fleet: said, no table");
	free(s);
	s = plan_html("{\"kind\": \"image\", \"arch\": \"flux\", \"observations\": 3, \"sizes\": [{\"gpu_mib\": 81920, \"gpus\": 0,"
		      " \"draining_gpus\": 0, \"in_fleet\": false, \"action\": \"as_is\", \"target_estimate\": null}]}");
	TAP_OK(has(s, "The fleet has no GPU") && has(s, "<tr><td>81920</td><td><span class=\"muted\">not in the fleet</span>"),
	       "no GPU in the fleet but a size asked for: said, and that size's row");
	free(s);

	s = plan_html("{\"kind\": \"<i>k</i>\", \"arch\": \"<script>alert(1)</script>\", \"observations\": 0, \"sizes\": ["
		      "{\"gpu_mib\": 24576, \"gpus\": 1, \"draining_gpus\": 0, \"in_fleet\": true, \"action\": \"start_lower\","
		      " \"reason\": \"<img src=x onerror=alert(2)>\", \"estimate\": null, \"target_estimate\": null,"
		      " \"rungs\": [\"<b>r</b>\"], \"skipped\": [\"<u>s</u>\"],"
		      " \"changes\": [{\"path\": \"a<p>\", \"old\": \"<o>\", \"new\": {\"k\": \"<n>\"}}]},"
		      "{\"gpu_mib\": \"<g>\", \"in_fleet\": true, \"gpus\": \"<c>\", \"action\": \"<x>\", \"reason\": \"'\\\"&\"}]}");
	TAP_OK(!has(s, "<script") && !has(s, "<img") && !has(s, "<b>") && !has(s, "<u>") && !has(s, "<i>") &&
	       !has(s, "<o>") && !has(s, "<n>") && !has(s, "<g>") && !has(s, "<c>") && !has(s, "<x>"),
	       "no markup from the document passes");
	TAP_OK(has(s, "&lt;script&gt;alert(1)&lt;/script&gt;") && has(s, "&lt;img src=x onerror=alert(2)&gt;") &&
	       has(s, "<code>&lt;b&gt;r&lt;/b&gt;</code>") && has(s, "<code>a&lt;p&gt;</code>") &&
	       has(s, "{&quot;k&quot;:&quot;&lt;n&gt;&quot;}") && has(s, "&#39;&quot;&amp;") && has(s, "&lt;x&gt;"),
	       "a hostile arch, reason, rung, change and action are shown escaped");
	free(s);

	web_plan_render_form(&b, "name: x\n</textarea><script>alert(1)</script>", "\"><x", "<p\"ool>", "config.x<y>",
			     "bad & <worse>");
	s = html_take(&b);
	TAP_OK(has(s, "<textarea id=\"config\" name=\"config\" rows=\"20\" spellcheck=\"false\" required>\n"
		      "name: x\n&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt;</textarea>"),
	       "the form keeps what was typed, escaped (a newline first, so a leading one survives the parser)");
	TAP_OK(has(s, "name=\"gpu_mib\"") && has(s, "value=\"&quot;&gt;&lt;x\"") && !has(s, "<x"), "gpu_mib kept, escaped");
	TAP_OK(has(s, "name=\"pool\"") && has(s, "value=\"&lt;p&quot;ool&gt;\"") && !has(s, "<p\"ool"), "pool kept, escaped");
	TAP_OK(has(s, "<p class=\"err\"><code class=\"field\">config.x&lt;y&gt;</code>: bad &amp; &lt;worse&gt;</p>"),
	       "the refusal names the field, escaped");
	TAP_OK(has(s, "<form class=\"plan\" method=\"post\" action=\"/ui/plan\">"), "the form posts to /ui/plan");
	free(s);
	web_plan_render_form(&b, NULL, NULL, NULL, NULL, NULL);
	s = html_take(&b);
	TAP_OK(has(s, "required>\n</textarea>") && !has(s, "class=\"err\""), "the empty form: no refusal");
	free(s);
}

/* The tokens page: a row per token, a hostile name escaped, the limit and revoke forms only for
 * tokens not revoked, the caller's own row marked; the secret page; the limit field's rule. */
/* The GPUs page's owners table (html_owners_table): each owner links to the queue filtered on it
 * (its name escaped and URL-encoded), none / a limit / 0 (paused), and an owner at its limit marked. */
static void test_owners(void)
{
	json_t *o = json_loads("[{\"owner\": \"team<a>\", \"queued\": 7, \"running\": 4, \"max_running\": 4},"
			       "{\"owner\": \"team-b\", \"queued\": 2, \"running\": 1, \"scheduled\": 5, \"max_running\": null},"
			       "{\"owner\": \"team-c\", \"queued\": 3, \"running\": 0, \"max_running\": 0}]", 0, NULL);
	struct hbuf b = { 0 };
	char *s;

	html_owners_table(&b, o);
	s = html_take(&b);
	TAP_OK(strstr(s, "<a href=\"/ui/jobs?owner=team%3Ca%3E\">team&lt;a&gt;</a></td><td>4</td><td>7</td>") != NULL,
	       "owners: a row links to the queue of that owner, the name escaped and URL-encoded");
	TAP_OK(strstr(s, "<td class=\"limit\">4 <span class=\"state s-queued\">at its limit</span></td>") != NULL,
	       "owners: an owner running its limit is marked");
	TAP_OK(strstr(s, "team-b</a></td><td>1</td><td>2</td><td>5</td><td class=\"limit\"><span class=\"muted\">none</span>") != NULL &&
		       strstr(s, "<td class=\"limit\">0 (paused)</td>") != NULL,
	       "owners: its scheduled jobs; no limit says none, 0 says paused");
	TAP_OK(!strstr(s, "<a>"), "owners: nothing unescaped");
	free(s);
	json_decref(o);
	o = json_array();
	html_owners_table(&b, o);
	s = html_take(&b);
	TAP_OK(strstr(s, "No owner runs or waits") && !strstr(s, "<table"), "owners: none, a line and no table");
	free(s);
	json_decref(o);
}

/* The GPUs page's pools table (html_pools_table): none for a fleet that names no pool; a row per
 * pool linking to its queue, the borrowers and borrowed pools listed, every name escaped. */
static void test_pools_table(void)
{
	json_t *only = json_loads("[{\"pool\": \"default\", \"queued\": 3, \"borrows\": [], \"borrowed_by\": []}]", 0, NULL);
	json_t *p = json_loads("[{\"pool\": \"default\", \"queued\": 3, \"scheduled\": 1, \"running\": 2, \"workers\": 1, "
			       "\"gpus\": 1, \"draining_gpus\": 0, \"borrowing_gpus\": 8, \"borrowed_by\": [\"h<200>\"], \"borrows\": [], "
			       "\"max_gpu_mib\": 143771},"
			       "{\"pool\": \"h<200>\", \"queued\": 0, \"scheduled\": 0, \"running\": 8, \"workers\": 1, \"gpus\": 8, "
			       "\"draining_gpus\": 0, \"borrowing_gpus\": 0, \"borrowed_by\": [], \"borrows\": [\"default\", \"b\"], "
			       "\"max_gpu_mib\": 143771}]", 0, NULL);
	struct hbuf b = { 0 };
	char *s;

	html_pools_table(&b, only);
	s = html_take(&b);
	TAP_OK(!s || !*s, "pools table: a fleet with only the default pool and no borrower shows none");
	free(s);
	html_pools_table(&b, p);
	s = html_take(&b);
	TAP_OK(s && strstr(s, "<h2>Pools</h2>") &&
		       strstr(s, "<a href=\"/ui/jobs?pool=default\">default</a></td><td>3</td><td>1</td><td>2</td><td>1</td><td>1</td>"
				 "<td>0</td><td>8</td><td>h&lt;200&gt;</td><td><span class=\"muted\">-</span></td><td>143771</td>"),
	       "pools table: default's row: its jobs, its GPU, 8 GPUs lent by h<200> (escaped), it borrows none");
	TAP_OK(s && strstr(s, "h&lt;200&gt;</a>") && strstr(s, "<td>default, b</td>") && !strstr(s, "<200>"),
	       "pools table: the borrower's row lists what it borrows from, in order; nothing unescaped");
	free(s);
	json_decref(only);
	json_decref(p);
}

static void test_log_lines(void)
{
	struct hbuf b = { 0 };
	char *s;

	TAP_INT_EQ(html_log_lines(&b, "", 5), 0, "log lines: an empty log writes none");
	TAP_INT_EQ(html_log_lines(&b, "one\ntwo\nthree\nfour\n", 2), 2, "log lines: the last 2 of 4");
	s = html_take(&b);
	TAP_STR_EQ(s, "three\nfour\n", "log lines: the last ones, in order");
	free(s);
	TAP_INT_EQ(html_log_lines(&b, "a\nb\rc", 5), 2, "log lines: a last line without its end counts");
	s = html_take(&b);
	TAP_STR_EQ(s, "a\nc\n", "log lines: a redrawn line shows its last drawing");
	free(s);
	html_log_lines(&b, "\033[A\033[2Kstep 3/10 <b>\r\n\rloss=0.1 \033[32mok\033[0m\n", 5);
	s = html_take(&b);
	TAP_STR_EQ(s, "step 3/10 &lt;b&gt;\nloss=0.1 ok\n", "log lines: escape sequences dropped, \"\\r\\n\" a line end, text escaped");
	free(s);
}

static void test_tokens(void)
{
	struct hbuf b = { 0 };
	json_t *doc = json_loads(
		"{\"tokens\": ["
		"{\"id\": 1, \"name\": \"root-admin\", \"role\": \"admin\", \"created_at\": \"2025-01-01T10:00:00.5+00:00\","
		" \"revoked_at\": null, \"revoked\": false, \"max_running\": null, \"running\": 0},"
		"{\"id\": 2, \"name\": \"<img src=x onerror=alert(1)>&\\\"'\", \"role\": \"submitter\","
		" \"created_at\": \"2025-01-01T11:00:00+00:00\", \"revoked_at\": null, \"revoked\": false,"
		" \"max_running\": 2, \"pool_max_running\": {\"h200\": 1, \"<b>\": 0}, \"gpu_hours\": 500, \"gpu_hours_days\": 30,"
		" \"pool_gpu_hours\": {\"h200\": 100, \"<i>\": 2.5}, \"running\": 1},"
		"{\"id\": 3, \"name\": \"old-worker\", \"role\": \"worker\", \"created_at\": \"2025-01-01T12:00:00+00:00\","
		" \"revoked_at\": \"2025-01-02T03:04:05.678+00:00\", \"revoked\": true, \"max_running\": 0, \"running\": 0}"
		"]}", 0, NULL);
	json_t *tok = json_loads("{\"id\": 9, \"name\": \"team-<a>\", \"role\": \"submitter\"}", 0, NULL);
	char *s;

	web_tokens_render(&b, doc, 1);
	s = html_take(&b);
	TAP_INT_EQ(count(s, "<tr class="), 3, "tokens: one row per token");
	TAP_OK(has(s, "<td>2</td><td>&lt;img src=x onerror=alert(1)&gt;&amp;&quot;&#39;</td><td>submitter</td>") &&
		       !has(s, "<img"),
	       "tokens: a hostile name is escaped, never markup");
	TAP_OK(has(s, "action=\"/ui/tokens/1/revoke\"") && has(s, "action=\"/ui/tokens/2/revoke\"") &&
		       has(s, "action=\"/ui/tokens/1/limits\"") && has(s, "action=\"/ui/tokens/2/limits\"") &&
		       !has(s, "/ui/tokens/3/"),
	       "tokens: revoke and limit forms for the live tokens, none for the revoked one");
	TAP_INT_EQ(count(s, "name=\"max_running\""), 4, "tokens: a limit field per live token, and one for a pool's");
	TAP_INT_EQ(count(s, "<form method=\"post\" class=\"act pool-limits\" action=\"/ui/tokens/"), 2,
		   "tokens: a pool limit form (pool and limit) per live token");
	TAP_INT_EQ(count(s, "<form method=\"post\" class=\"act quota\" action=\"/ui/tokens/"), 2,
		   "tokens: a quota form (hours and days) per live token");
	TAP_INT_EQ(count(s, "<form method=\"post\" class=\"act pool-quota\" action=\"/ui/tokens/"), 2,
		   "tokens: a pool quota form (pool and hours) per live token");
	TAP_OK(has(s, "<br><span class=\"pool-quota\">GPU hours per pool: h200:100, &lt;i&gt;:2.5 per 30 days</span>"),
	       "tokens: the quotas per pool under the quota, escaped, with the window");
	TAP_OK(has(s, "name=\"gpu_hours\" min=\"0\" step=\"any\" max=\"10000000\" placeholder=\"no quota\" aria-label=\"GPU hours (empty: "
		      "no quota)\" value=\"500\"><input type=\"number\" name=\"gpu_hours_days\" min=\"1\" max=\"90\" "
		      "placeholder=\"days\" aria-label=\"over the last days\" value=\"30\">") &&
		       has(s, "value=\"\"><input type=\"number\" name=\"gpu_hours_days\" min=\"1\" max=\"90\" placeholder=\"days\" "
			      "aria-label=\"over the last days\" value=\"7\">") &&
		       has(s, "<br><span class=\"quota\">500 GPU hours per 30 days</span><br>"),
	       "tokens: the quota form holds the current quota and window (empty and 7 for none); the cell shows it");
	TAP_OK(has(s, "<td class=\"limit\">2<br><span class=\"pool-limits\">per pool: h200:1, &lt;b&gt;:0</span><br>") &&
		       !has(s, "<td class=\"limit\">none<br>"),
	       "tokens: the limits per pool under the limit, escaped; none for a token without");
	TAP_OK(has(s, "<td class=\"limit\">none</td>") && has(s, "<td class=\"limit\">2<br>") &&
		       has(s, "<td class=\"limit\">0 (paused)</td>") && has(s, "value=\"2\"><button"),
	       "tokens: max running as none, N or 0 (paused); the form holds the current limit");
	TAP_OK(has(s, "<td class=\"running\">1</td>"), "tokens: how many of its jobs run now");
	TAP_OK(has(s, "<td>2025-01-02 03:04:05</td>") && has(s, "<td>2025-01-01 10:00:00</td>"),
	       "tokens: created and revoked times");
	TAP_OK(count(s, "(you)") == 1 && has(s, "root-admin <span class=\"muted\">(you)</span>"),
	       "tokens: the caller's own token is marked");
	TAP_OK(has(s, "<form method=\"post\" class=\"act create\" action=\"/ui/tokens\">") && count(s, "<option value=") == 4 &&
		       has(s, "name=\"role\"") && has(s, "name=\"name\""),
	       "tokens: the create form (a role select of four, an optional name)");
	free(s);
	json_object_set_new(doc, "tokens", json_array());
	web_tokens_render(&b, doc, 0);
	s = html_take(&b);
	TAP_OK(has(s, "No tokens") && !has(s, "<tr class=") && has(s, "action=\"/ui/tokens\""), "tokens: none, the create form still");
	free(s);

	web_tokens_render_created(&b, tok, "rung_<b>x</b>");
	s = html_take(&b);
	TAP_OK(has(s, "<code class=\"secret\">rung_&lt;b&gt;x&lt;/b&gt;</code>") && has(s, "shown only this once"),
	       "created: the secret (escaped) with the warning that it is shown only once");
	TAP_OK(has(s, "team-&lt;a&gt;") && !has(s, "<a>") && has(s, "<td>9</td>") && has(s, "href=\"/ui/tokens\""),
	       "created: the token's id and name (escaped), a link back");
	free(s);

	{
		static const struct { const char *text; bool ok; const char *name; } cases[] = {
			{ NULL, true, "limit: absent is no limit" },
			{ "", true, "limit: empty is no limit" },
			{ "  ", true, "limit: blank is no limit" },
			{ "0", true, "limit: 0 (paused)" },
			{ " 3 ", true, "limit: 3 with spaces" },
			{ "1000000", true, "limit: the most" },
			{ "1000001", false, "limit: over the most" },
			{ "-1", false, "limit: negative" },
			{ "1.5", false, "limit: not an integer" },
			{ "abc", false, "limit: not a number" },
			{ "-", false, "limit: a sign alone" },
			{ "99999999999999999999", false, "limit: past long long" },
		};
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
			json_t *v = web_tokens_limit_value(cases[i].text);
			TAP_OK(api_tokens_limit_ok(v) == cases[i].ok, cases[i].name);
			json_decref(v);
		}
		json_t *v = web_tokens_limit_value(" 3 ");
		TAP_INT_EQ(json_integer_value(v), 3, "limit: \" 3 \" reads as 3");
		json_decref(v);
		v = web_tokens_limit_value("");
		TAP_OK(json_is_null(v), "limit: empty reads as null");
		json_decref(v);
	}
	{
		/* the quota forms' hours (migrations 035, 037): fractions too, checked as the API checks them */
		static const struct {
			const char *text;
			const char *want; /* the JSON it reads as */
		} hours[] = {
			{ "", "null" }, { " ", "null" }, { "12", "12" }, { " 12.5 ", "12.5" }, { "0", "0" }, { "0.25", "0.25" },
			{ "-1", "\"-1\"" }, { "1e3", "\"1e3\"" }, { "inf", "\"inf\"" }, { "nan", "\"nan\"" }, { ".", "\".\"" },
			{ "1.2.3", "\"1.2.3\"" }, { "abc", "\"abc\"" },
		};
		for (size_t i = 0; i < sizeof hours / sizeof hours[0]; i++) {
			json_t *v = web_tokens_hours_value(hours[i].text);
			char *got = json_dumps(v, JSON_ENCODE_ANY), name[96];
			snprintf(name, sizeof name, "quota hours: \"%s\" reads as %s", hours[i].text, hours[i].want);
			TAP_STR_EQ(got, hours[i].want, name);
			free(got);
			json_decref(v);
		}
	}
	json_decref(tok);
	json_decref(doc);
}

/* The /ui/usage page's content: hours per owner and ending, a dash for none, the OOM share, names
 * escaped, links and the owner field for staff only. */
static void test_usage_page(void)
{
	json_t *doc = json_loads("{\"owners\": [{\"owner\": \"team<a>\", \"gpu_seconds\": 10800, \"attempts\": 2, \"jobs\": 1,"
				 " \"by_outcome\": {\"succeeded\": 7200, \"oom\": 3600, \"failed\": 0, \"cancelled\": 0,"
				 " \"lost\": 0, \"running\": 0}, \"jobs_succeeded\": 1, \"jobs_failed\": 0}],"
				 " \"total\": {\"gpu_seconds\": 10800, \"attempts\": 2, \"jobs\": 1, \"oom_gpu_seconds\": 3600}}",
				 0, NULL);
	struct hbuf b = { 0 };
	web_usage_render(&b, doc, 30, "x\"y", 1);
	char *s = html_take(&b);
	TAP_OK(strstr(s, "GPU time, last 30 days") && strstr(s, "<option selected>30</option>"),
	       "usage page: the window in the title and the form");
	TAP_OK(strstr(s, "href=\"/ui/jobs?owner=team%3Ca%3E\">team&lt;a&gt;</a>") && !strstr(s, "team<a>"),
	       "usage page: the owner escaped, linking to its jobs");
	TAP_OK(strstr(s, "value=\"x&quot;y\""), "usage page: the owner filter escaped in its field");
	TAP_OK(strstr(s, "<td class=\"num\">3.0</td><td class=\"num\">2.0</td><td class=\"num\">1.0</td>"
			 "<td class=\"num\"><span class=\"muted\">-</span></td>"),
	       "usage page: hours in all, succeeded, OOM, then a dash for none");
	TAP_OK(strstr(s, "1.0 of them (33%) in attempts that ended in an OOM"), "usage page: the OOM share");
	TAP_OK(!strstr(s, "by GPU model"), "usage page: one GPU model or none: no table of models");
	TAP_OK(!strstr(s, "GPU-hour quotas"), "usage page: no quota: no quota section");
	free(s);
	json_object_set_new(doc, "quotas",
			    json_loads("[{\"owner\": \"team<a>\", \"gpu_hours\": 500, \"days\": 7, \"used_hours\": 512.3, "
				       "\"over\": true}]", 0, NULL));
	web_usage_render(&b, doc, 30, NULL, 1);
	s = html_take(&b);
	TAP_OK(strstr(s, "<h2>GPU-hour quotas</h2>\n<ul class=\"quotas\"><li class=\"over\">team&lt;a&gt; used 512.3 of 500 GPU "
			 "hours in the last 7 days: over its quota") != NULL,
	       "usage page: a quota over, marked, the owner escaped");
	free(s);
	json_object_del(doc, "quotas");
	/* the jobs recovered from an OOM: said after the OOM share */
	json_object_set_new(json_object_get(doc, "total"), "recovered", json_pack("{s:i, s:i}", "jobs", 2, "oom_attempts", 3));
	web_usage_render(&b, doc, 30, NULL, 1);
	s = html_take(&b);
	TAP_OK(strstr(s, "in attempts that ended in an OOM</strong>; 2 jobs succeeded after running out of GPU memory (3 OOM "
			 "attempts before the config that fit). An attempt counts") != NULL,
	       "usage page: the jobs recovered from an OOM");
	free(s);
	json_object_del(json_object_get(doc, "total"), "recovered");
	/* two GPU models: each owner's hours per model, the models escaped, in the total's order */
	json_object_set_new(json_object_get(doc, "total"), "by_gpu",
			    json_pack("[{s:s, s:f}, {s:s, s:f, s:f}]", "model", "NVIDIA H200", "gpu_seconds", 7200.0, "model",
				      "A<100>", "gpu_seconds", 3600.0, "oom_gpu_seconds", 720.0));
	json_object_set_new(json_array_get(json_object_get(doc, "owners"), 0), "by_gpu",
			    json_pack("{s:f, s:f}", "NVIDIA H200", 7200.0, "A<100>", 3600.0));
	web_usage_render(&b, doc, 30, NULL, 1);
	s = html_take(&b);
	TAP_OK(strstr(s, "<h2>GPU hours by GPU model</h2>") &&
		       strstr(s, "<th>owner</th><th>NVIDIA H200</th><th>A&lt;100&gt;</th>") &&
		       strstr(s, "<td>team&lt;a&gt;</td><td class=\"num\">2.0</td><td class=\"num\">1.0</td>"),
	       "usage page: two GPU models: a table of each owner's hours per model, escaped");
	TAP_OK(strstr(s, "<tr class=\"oom\"><td>OOM, all owners</td><td class=\"num\"><span class=\"muted\">-</span></td>"
			 "<td class=\"num\">0.2</td></tr>"),
	       "usage page: then the hours OOMs took on each model");
	free(s);
	web_usage_render(&b, doc, 1, NULL, 0);
	s = html_take(&b);
	TAP_OK(strstr(s, "last 1 day<") && !strstr(s, "name=\"owner\"") && !strstr(s, "<a href=\"/ui/jobs?owner"),
	       "usage page for a submitter: no owner field, no links to others' queues");
	free(s);
	json_t *none = json_loads("{\"owners\": [], \"total\": {}}", 0, NULL);
	web_usage_render(&b, none, 7, NULL, 1);
	s = html_take(&b);
	TAP_OK(strstr(s, "No GPU time in this window."), "usage page: an empty window says so");
	free(s);
	json_decref(none);
	json_decref(doc);
}

/* The queue's cancel-matching form: only for roles that may cancel and with a filter; the filters
 * as hidden fields, escaped; the confirm step's button. */
static void test_cancel_matching_form(void)
{
	struct hbuf b = { 0 };
	char *s;

	html_cancel_matching_form(&b, AUTH_SUPPORT, "queued", "team-a", NULL, NULL, NULL, 0, 0);
	html_cancel_matching_form(&b, AUTH_ADMIN, "queued", NULL, "", NULL, "", 0, 0);
	s = html_take(&b);
	TAP_STR_EQ(s, "", "cancel form: none for support, none without a filter");
	free(s);
	html_cancel_matching_form(&b, AUTH_SUBMITTER, "failed", NULL, "video", "a=\"b\"", NULL, 0, 0);
	s = html_take(&b);
	TAP_OK(strstr(s, "action=\"/ui/jobs/cancel\"") && strstr(s, "name=\"kind\" value=\"video\"") &&
		       strstr(s, "name=\"label\" value=\"a=&quot;b&quot;\"") && strstr(s, "<option value=\"queued\" selected>") &&
		       !strstr(s, "confirm"),
	       "cancel form: the filters hidden and escaped, queued by default (the queue showed failed)");
	free(s);
	html_cancel_matching_form(&b, AUTH_ADMIN, "running", "team-a", NULL, NULL, NULL, 1, 12);
	s = html_take(&b);
	TAP_OK(strstr(s, "name=\"state\" value=\"running\"") && strstr(s, "name=\"confirm\" value=\"1\"") &&
		       strstr(s, "Cancel these 12 jobs"),
	       "cancel form: the confirm step keeps the state and says how many");
	free(s);
	html_cancel_matching_form(&b, AUTH_ADMIN, "queued", NULL, NULL, NULL, "h200", 0, 0);
	s = html_take(&b);
	TAP_OK(strstr(s, "name=\"pool\" value=\"h200\"") && strstr(s, "Review"),
	       "cancel form: a pool alone narrows the list, and goes as a hidden field");
	free(s);
}

/* Token expiry on the page (an expires column: never, when, expired; the create form's optional days
 * field, read into the API's expires_in_s) and POST /v1/tokens's expires_in_s rule, which both share. */
static void test_token_expiry(void)
{
	struct hbuf b = { 0 };
	json_t *doc = json_loads(
		"{\"tokens\": ["
		"{\"id\": 1, \"name\": \"forever\", \"role\": \"admin\", \"created_at\": \"2025-01-01T10:00:00+00:00\","
		" \"revoked\": false, \"expires_at\": null, \"expired\": false, \"running\": 0},"
		"{\"id\": 2, \"name\": \"ci-nightly\", \"role\": \"submitter\", \"created_at\": \"2025-01-01T11:00:00+00:00\","
		" \"revoked\": false, \"expires_at\": \"2030-01-31T12:00:00.25+00:00\", \"expired\": false, \"running\": 0},"
		"{\"id\": 3, \"name\": \"contractor\", \"role\": \"support\", \"created_at\": \"2024-01-01T11:00:00+00:00\","
		" \"revoked\": false, \"expires_at\": \"2024-02-01T09:08:07+00:00\", \"expired\": true, \"running\": 0}"
		"]}", 0, NULL);
	json_t *tok = json_loads("{\"id\": 9, \"name\": \"ci\", \"role\": \"submitter\", "
				 "\"expires_at\": \"2030-01-31T12:00:00+00:00\", \"expired\": false}", 0, NULL);
	char *s;

	web_tokens_render(&b, doc, 1);
	s = html_take(&b);
	TAP_OK(has(s, "<th>expires</th>"), "token expiry: an expires column");
	TAP_OK(has(s, "<td class=\"expires\">never</td>"), "token expiry: a token without one never expires");
	TAP_OK(has(s, "<td class=\"expires\">2030-01-31 12:00:00</td>"), "token expiry: an expiring token shows when");
	TAP_OK(has(s, "<tr class=\"expired\"><td>3</td>") &&
		       has(s, "<td class=\"expires\"><strong>expired</strong> 2024-02-01 09:08:07</td>"),
	       "token expiry: an expired token says so, and when");
	TAP_OK(has(s, "name=\"expires_in_days\"") && has(s, "expires in (days)") && has(s, "max=\"3650\""),
	       "token expiry: the create form has an optional expires in (days) field, 1 to 3650");
	free(s);
	web_tokens_render_created(&b, tok, "rung_x");
	s = html_take(&b);
	TAP_OK(has(s, "<th>expires</th><td class=\"expires\">2030-01-31 12:00:00</td>"), "token expiry: the created page says when");
	free(s);

	{
		static const struct { const char *text; long long want; } cases[] = {
			{ NULL, 0 }, { "", 0 }, { "  ", 0 }, { "1", 86400 }, { " 30 ", 30 * 86400LL }, { "3650", 315360000 },
			{ "0", -1 }, { "3651", -1 }, { "-1", -1 }, { "1.5", -1 }, { "abc", -1 }, { "1d", -1 },
			{ "99999999999999999999", -1 },
		};
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
			long long got = -2;
			char name[96];
			int rc = web_tokens_expires_days(cases[i].text, &got);
			snprintf(name, sizeof name, "token expiry: days \"%s\" -> %lld s", cases[i].text ? cases[i].text : "(none)",
				 cases[i].want);
			TAP_OK(cases[i].want < 0 ? rc == -1 && got == 0 : rc == 0 && got == cases[i].want, name);
		}
	}
	{
		static const struct { const char *body; const char *field; long long want; } cases[] = {
			{ "{\"role\": \"submitter\"}", NULL, 0 },
			{ "{\"role\": \"submitter\", \"expires_in_s\": null}", NULL, 0 },
			{ "{\"role\": \"submitter\", \"expires_in_s\": 60}", NULL, 60 },
			{ "{\"role\": \"submitter\", \"expires_in_s\": 315360000}", NULL, 315360000 },
			{ "{\"role\": \"submitter\", \"expires_in_s\": 59}", "expires_in_s", 0 },
			{ "{\"role\": \"submitter\", \"expires_in_s\": 0}", "expires_in_s", 0 },
			{ "{\"role\": \"submitter\", \"expires_in_s\": -3600}", "expires_in_s", 0 },
			{ "{\"role\": \"submitter\", \"expires_in_s\": 315360001}", "expires_in_s", 0 },
			{ "{\"role\": \"submitter\", \"expires_in_s\": 3600.0}", "expires_in_s", 0 },
			{ "{\"role\": \"submitter\", \"expires_in_s\": \"3600\"}", "expires_in_s", 0 },
			{ "{\"role\": \"submitter\", \"expires_in_s\": true}", "expires_in_s", 0 },
			{ "{\"role\": \"submitter\", \"expires_in_s\": [3600]}", "expires_in_s", 0 },
			{ "{\"role\": \"submitter\", \"expires_in\": 3600}", "expires_in", 0 },
		};
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
			json_t *body = json_loads(cases[i].body, 0, NULL);
			const char *role = NULL, *name = NULL, *field;
			long long secs = -2;
			char *msg = NULL, label[160];
			field = api_tokens_check_create(body, &role, &name, &secs, &msg);
			snprintf(label, sizeof label, "token expiry: POST /v1/tokens %s -> %s", cases[i].body,
				 cases[i].field ? cases[i].field : "ok");
			if (cases[i].field)
				TAP_OK(field && !strcmp(field, cases[i].field) && msg && strstr(msg, cases[i].field), label);
			else
				TAP_OK(!field && secs == cases[i].want, label);
			free(msg);
			json_decref(body);
		}
	}
	{
		/* POST /v1/tokens/{id}/limits (migration 034: per pool too) */
		static const struct {
			const char *body, *field;
		} cases[] = {
			{ "{\"max_running\": 3}", NULL },
			{ "{\"max_running\": null}", NULL },
			{ "{\"pool_max_running\": {\"h200\": 2, \"video\": null}}", NULL },
			{ "{\"pool_max_running\": null, \"max_running\": 0}", NULL },
			{ "{}", "max_running" },
			{ "{\"max_running\": 1000001}", "max_running" },
			{ "{\"pool_max_running\": {}}", "pool_max_running" },
			{ "{\"pool_max_running\": 2}", "pool_max_running" },
			{ "{\"pool_max_running\": {\"a/b\": 2}}", "pool_max_running" },
			{ "{\"pool_max_running\": {\"h200\": 2.5}}", "pool_max_running" },
			{ "{\"pool_max_running\": {\"h200\": 1000001}}", "pool_max_running" },
			{ "{\"max_running\": 1, \"pools\": [\"a\"]}", "pools" },
			/* a GPU-hour quota (migration 035) */
			{ "{\"gpu_hours\": 500}", NULL },
			{ "{\"gpu_hours\": 12.5, \"gpu_hours_days\": 30}", NULL },
			{ "{\"gpu_hours\": null}", NULL },
			{ "{\"gpu_hours_days\": 90}", NULL },
			{ "{\"gpu_hours\": -0.5}", "gpu_hours" },
			{ "{\"gpu_hours\": true}", "gpu_hours" },
			{ "{\"gpu_hours_days\": 0}", "gpu_hours_days" },
			{ "{\"gpu_hours_days\": null}", "gpu_hours_days" },
			{ "{\"gpu_hours_days\": 7.0}", "gpu_hours_days" },
			/* quotas per pool (migration 037) */
			{ "{\"pool_gpu_hours\": {\"h200\": 500}}", NULL },
			{ "{\"pool_gpu_hours\": {\"h200\": 12.5, \"video\": null}}", NULL },
			{ "{\"pool_gpu_hours\": null}", NULL },
			{ "{\"pool_gpu_hours\": {}}", "pool_gpu_hours" },
			{ "{\"pool_gpu_hours\": 500}", "pool_gpu_hours" },
			{ "{\"pool_gpu_hours\": {\"a/b\": 1}}", "pool_gpu_hours" },
			{ "{\"pool_gpu_hours\": {\"h200\": -1}}", "pool_gpu_hours" },
			{ "{\"pool_gpu_hours\": {\"h200\": true}}", "pool_gpu_hours" },
		};
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
			json_t *body = json_loads(cases[i].body, 0, NULL);
			char *msg = NULL, label[160];
			const char *field = api_tokens_check_limits(body, &msg);
			snprintf(label, sizeof label, "token limits: %s -> %s", cases[i].body, cases[i].field ? cases[i].field : "ok");
			TAP_OK(cases[i].field ? field && !strcmp(field, cases[i].field) && msg : !field && !msg, label);
			free(msg);
			json_decref(body);
		}
		json_t *many = json_object(), *body;
		char *msg = NULL;
		for (int i = 0; i <= API_TOKENS_POOLS_MAX; i++) {
			char name[16];
			snprintf(name, sizeof name, "p%d", i);
			json_object_set_new(many, name, json_integer(1));
		}
		body = json_pack("{s:o}", "pool_max_running", many);
		TAP_STR_EQ(api_tokens_check_limits(body, &msg), "pool_max_running", "token limits: 33 pools in one body are too many");
		free(msg);
		json_decref(body);
	}
	{
		char buf[32];
		TAP_OK(api_tokens_expires_param(0, buf) == NULL, "token expiry: never is SQL NULL");
		TAP_STR_EQ(api_tokens_expires_param(3600, buf), "3600", "token expiry: seconds as text");
	}
	json_decref(tok);
	json_decref(doc);
}

/* A scheduled job's page (migration 025): its "scheduled" line in rungctl show's words, escaped, and
 * the forms: "Start now" for its owner and staff (posted to /ui/jobs/ID/start), cancel for its owner
 * and admin; none of them once it is queued; the cancel-matching form's "scheduled" state. */
static void test_scheduled(void)
{
	struct hbuf b = { 0 };
	json_t *job = json_loads("{\"id\": 9, \"state\": \"scheduled\", \"cancel_requested\": false, \"run_after\": "
				 "\"2026-12-01T22:00:00+00:00\", \"starts_in_s\": 7500}", 0, NULL);
	char *s;
	int n;

	n = html_scheduled_line(&b, job);
	s = html_take(&b);
	TAP_OK(n == 1, "scheduled line: written");
	TAP_STR_EQ(s, "scheduled: starts at 2026-12-01T22:00:00Z (in 2h05m)", "scheduled line: rungctl show's sentence");
	free(s);
	html_job_forms(&b, AUTH_SUBMITTER, job);
	s = html_take(&b);
	TAP_OK(has(s, "<form method=\"post\" class=\"act start\" action=\"/ui/jobs/9/start\">") && has(s, ">Start now</button>") &&
		       has(s, "action=\"/ui/jobs/9/cancel\"") && !has(s, "retry"),
	       "its owner on a scheduled job: Start now and cancel");
	free(s);
	html_job_forms(&b, AUTH_SUPPORT, job);
	s = html_take(&b);
	TAP_OK(has(s, "action=\"/ui/jobs/9/start\"") && !has(s, "/cancel"), "support: Start now, no cancel (the owner's or an admin's)");
	free(s);
	html_job_forms(&b, AUTH_WORKER, job);
	s = html_take(&b);
	TAP_OK(!s || !*s, "a worker token: no form");
	free(s);
	json_object_set_new(job, "state", json_string("queued"));
	html_job_forms(&b, AUTH_ADMIN, job);
	n = html_scheduled_line(&b, job);
	s = html_take(&b);
	TAP_OK(n == 0 && has(s, "/ui/jobs/9/cancel") && !has(s, "/start") && !has(s, "scheduled"),
	       "once queued: no line, no Start now (cancel stays)");
	free(s);
	json_object_set_new(job, "state", json_string("scheduled"));
	json_object_set_new(job, "run_after", json_string("<b>"));
	html_scheduled_line(&b, job);
	s = html_take(&b);
	TAP_OK(has(s, "&lt;b&gt;") && !has(s, "<b>"), "scheduled line: escaped");
	free(s);
	html_cancel_matching_form(&b, AUTH_ADMIN, "scheduled", "team-a", NULL, NULL, NULL, 0, 0);
	s = html_take(&b);
	TAP_OK(has(s, "<option value=\"scheduled\" selected>scheduled</option>") &&
		       has(s, "<option value=\"queued\">not started (queued or scheduled)</option>"),
	       "cancel form: the queue's scheduled filter chooses scheduled; queued reads as not started");
	free(s);
	/* a start deadline (migration 039): its line while the job has not started; none once it did */
	json_object_set_new(job, "start_by", json_string("2999-01-01T00:00:00+00:00"));
	json_object_set_new(job, "attempts", json_integer(0));
	n = html_deadline_line(&b, job);
	s = html_take(&b);
	TAP_OK(n == 1 && has(s, "must start by 2999-01-01T00:00:00Z (in ") && has(s, "), else it is cancelled"),
	       "deadline line: rungctl show's sentence");
	free(s);
	json_object_set_new(job, "attempts", json_integer(2));
	n = html_deadline_line(&b, job);
	s = html_take(&b);
	TAP_OK(n == 0 && (!s || !*s), "deadline line: none once it started");
	free(s);
	json_decref(job);
}

int main(void)
{
	test_escape();
	test_markdown();
	test_report_markdown();
	test_chart();
	test_start_lower();
	test_helpers();
	test_queue_filters();
	test_actions();
	test_plan();
	test_log_lines();
	test_tokens();
	test_token_expiry();
	test_owners();
	test_pools_table();
	test_usage_page();
	test_cancel_matching_form();
	test_scheduled();
	return TAP_DONE();
}
