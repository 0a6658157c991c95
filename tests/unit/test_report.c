/* Unit tests of report_build (recovery/report.c): job, target vs last diff, attempts table, evidence,
 * GPU snapshots, last 40 log lines in fences, recommendation, Markdown escaping. */
#include "tap.h"
#include "policy_fixtures.h"
#include "../../recovery/report.h"

/* Issue 12: the estimate section: profile, target and last config with the fit's evidence. */
static void memory_estimate(const json_t *flux, const json_t *last)
{
	json_t *facts = fx_load("facts_zero_free_load.json"), *ctx, *d, *r, *obs = json_array();
	static const int res[] = { 512, 768, 1024 };
	const char *md;
	size_t i;

	/* a plain OOM at load: with the GPU's alloc-failure signatures at the ladder's end it would be an
	 * env fault (issue 16), which teaches the model nothing */
	jpath_del(facts, "signatures.zero_bytes_free");
	jpath_del(facts, "signatures.cublas_alloc_failed");
	ctx = fx_ctx(flux, last, facts, 2, 24564);
	for (i = 0; i < 3; i++)
		json_array_append_new(obs, json_pack("{s:s, s:i, s:{s:i, s:i, s:b, s:b, s:b}, s:s, s:s, s:i, s:i}", "arch", "flux",
						     "gpu_mib", 24564, "features", "res_max", res[i], "batch", 1, "grad_ckpt", 1,
						     "quantize", 1, "sampling", 0, "outcome", "fit", "phase", "train", "peak_mib",
						     16000 + 9000 * res[i] / 1024 * res[i] / 1024, "attempt_id", (int)i + 1));
	json_object_set_new(ctx, "memory", json_pack("{s:s, s:i, s:o}", "arch", "flux", "gpu_mib", 24564, "observations", obs));
	d = fx_decide(ctx);
	r = report_build(ctx, d);
	md = json_string_value(json_object_get(r, "markdown"));
	TAP_OK(strstr(md, "## Memory estimate") != NULL, "issue 12: report has the memory estimate section");
	TAP_OK(strstr(md, "- **Profile**: flux on the 24564 MiB class, 4 attempt(s) (3 fit, 1 OOM)") != NULL,
	       "issue 12: report names the profile and how many attempts it rests on");
	TAP_OK(strstr(md, "- **Target config**: ") != NULL && strstr(md, "- **Last config**: ") != NULL,
	       "issue 12: report estimates target and last config");
	TAP_OK(strstr(md, "flux: a config no heavier than this ran out of memory") != NULL, "issue 12: report carries the evidence line (the last config OOMed)");
	TAP_INT_EQ(jpath_int(r, "json.memory.profile.n", 0), 4, "issue 12: report json memory.profile.n");
	TAP_OK(json_is_object(jpath_get(r, "json.memory.target")), "issue 12: report json memory.target");
	json_decref(r);
	json_decref(d);
	json_decref(ctx);
}

int main(void)
{
	json_t *flux = fx_load("flux_image.json"), *last = json_deep_copy(flux), *facts = fx_load("facts_zero_free_load.json");
	json_t *ctx, *d, *r, *lines = json_array();
	const char *md;
	int i;

	jpath_set(last, P0 ".train.batch_size", json_integer(1));
	jpath_set(last, P0 ".model.low_vram", json_true());
	jpath_set(last, P0 ".model.layer_offloading", json_true());
	jpath_set(last, P0 ".model.quantize_te", json_true());
	for (i = 0; i < 60; i++)
		json_array_append_new(lines, json_sprintf("line %d", i));
	json_array_append_new(lines, json_string("weird | pipe ``` fence"));
	json_object_set_new(facts, "log_tail", lines);
	/* a plain OOM at load (no CUBLAS or 0-bytes-free evidence) with every rung spent: ladder exhausted */
	jpath_del(facts, "signatures.zero_bytes_free");
	jpath_del(facts, "signatures.cublas_alloc_failed");
	jpath_set(facts, "oom.free_mib", json_integer(12));
	jpath_set(facts, "gpu_before", fx_json("{\"uuid\": \"GPU-1\", \"memory_total_mib\": null, \"processes\": []}"));
	ctx = fx_ctx(flux, last, facts, 2, 24564);
	fx_add_attempt(ctx, 1, flux, "failed", "oom_train_early", "retry", "GPU-|x", 3);
	d = fx_decide(ctx);
	r = report_build(ctx, d);
	md = json_string_value(json_object_get(r, "markdown"));
	TAP_OK(md != NULL, "report: markdown string");
	TAP_STR_EQ(jpath_str(d, "escalation.trigger", NULL), "ladder_exhausted", "report fixture escalates ladder_exhausted");
	TAP_OK(strstr(md, "# rung escalation: ladder_exhausted") != NULL, "report: title names the trigger");
	TAP_OK(strstr(md, "my_first_flux_lora_v1") != NULL, "report: the job");
	TAP_OK(strstr(md, "| config.process[0].train.batch_size | 4 | 1 |") != NULL, "report: target vs last diff row");
	TAP_OK(strstr(md, "| # | worker | GPU | phase | step | class | action | rung |") != NULL, "report: attempts table header");
	TAP_OK(strstr(md, "GPU-\\|x") != NULL, "report: table cells escape pipes");
	TAP_OK(strstr(md, "| 2 | 3 | GPU-1 | load |") != NULL, "report: the last attempt's row");
	TAP_OK(strstr(md, "## Evidence") != NULL, "report: evidence section");
	TAP_OK(strstr(md, "signature cuda_oom") != NULL, "report: evidence lines");
	TAP_OK(strstr(md, "after: 23800 / 24564 MiB used; processes: pid 4242 23800 MiB") != NULL, "report: gpu_after snapshot");
	TAP_OK(strstr(md, "before: unknown / unknown MiB used") != NULL && !strstr(md, "0 / 0 MiB"),
	       "issue 16.1: a figure the worker did not report reads unknown, not 0 MiB");
	TAP_OK(strstr(md, "line 21\n") != NULL && strstr(md, "line 20\n") == NULL, "report: only the last 40 log lines");
	TAP_OK(strstr(md, "````text\n") != NULL, "report: fence longer than any backtick run in the log");
	TAP_OK(strstr(md, "````\n\nThe whole log: `rungctl logs 7 --attempt 2`, or `/ui/jobs/7/log?attempt=2`.\n") != NULL,
	       "report: after a failed attempt's last lines, where to read all of it");
	TAP_OK(strstr(md, "**Recommended next step**") != NULL, "report: recommended next step");
	TAP_INT_EQ(json_array_size(jpath_get(r, "json.attempts")), 2, "report json: attempts");
	TAP_INT_EQ(json_array_size(jpath_get(r, "json.logs[1].lines")), 40, "report json: 40 log lines of the failed attempt");
	TAP_OK(json_array_size(jpath_get(r, "json.config_diff")) >= 4, "report json: config diff");
	TAP_OK(jpath_get(r, "json.gpu_snapshots[1].gpu_after") != NULL, "report json: gpu snapshots");
	TAP_STR_EQ(jpath_str(r, "json.escalation.trigger", NULL), "ladder_exhausted", "report json: escalation");
	TAP_OK(strstr(md, "No memory history") != NULL, "issue 12: without history the report says the ladder ran blind");
	TAP_OK(json_is_null(jpath_get(r, "json.memory")), "issue 12: report json memory null without history");
	json_decref(r);
	memory_estimate(flux, last);
	r = report_build(NULL, NULL);
	TAP_OK(json_is_string(json_object_get(r, "markdown")), "report_build never returns NULL, even on empty input");
	json_decref(r);
	json_decref(d);
	json_decref(ctx);
	json_decref(last);
	json_decref(flux);
	return TAP_DONE();
}
