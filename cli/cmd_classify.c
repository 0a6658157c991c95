/* rungctl classify: what rung makes of a trainer log. Feeds stdin to the same scanner the worker
 * runs live, completes the FACTS the worker would report, and asks the same policy code the server
 * uses (linked from server/) for the class. Prints {"class", "rule", ..., "facts": FACTS}. */
#include "cmd_classify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "policy.h"
#include "scan.h"
#include "util.h"
#include "yamljson.h"

json_t *cmd_classify_facts(FILE *in, int exit_code, int sig, char **err)
{
	struct scan *s = scan_new();
	char buf[65536];
	size_t n;
	json_t *facts = NULL;

	*err = NULL;
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		scan_feed(s, buf, n);
	if (ferror(in)) {
		*err = xasprintf("reading the log: %s", strerror(errno));
		goto out;
	}
	scan_finish(s);
	facts = scan_facts(s);
	if (exit_code < 0)
		exit_code = scan_phase(s) == SCAN_DONE || scan_signature(s, "job_stopped") > 0 ? 0 : 1;
	json_object_set_new(facts, "exit_code", sig > 0 ? json_null() : json_integer(exit_code));
	json_object_set_new(facts, "signal", sig > 0 ? json_integer(sig) : json_null());
	json_object_set_new(facts, "cancelled", json_false());
	json_object_set_new(facts, "gpu_before", json_null());
	json_object_set_new(facts, "gpu_after", json_null());
	json_object_set_new(facts, "duration_ms", json_integer(0));
out:
	scan_free(s);
	return facts;
}

int cmd_classify(struct cli *c, int argc, char **argv)
{
	const char *config_path = NULL;
	long long exit_code = -1, sig = 0;
	char *ops[1], *err = NULL;
	json_t *config = NULL, *facts = NULL, *verdict = NULL;
	const struct args_opt opts[] = {
		CLI_COMMON_OPTS(c),
		{ .name = "config", .type = ARGS_STRING, .str = &config_path },
		{ .name = "exit-code", .type = ARGS_INT, .num = &exit_code, .min = 0, .max = 255 },
		{ .name = "signal", .type = ARGS_INT, .num = &sig, .min = 1, .max = 64 },
	};
	int rc = cli_args(c, cli_cmd_named("classify"), opts, ARRAY_LEN(opts), argc, argv, ops, 0, 0);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	if (config_path) {
		config = yamljson_load_file(config_path, &err);
		if (!config) {
			fprintf(c->err, "rungctl classify: %s\n", err);
			rc = CLI_USAGE;
			goto out;
		}
	}
	facts = cmd_classify_facts(stdin, (int)exit_code, (int)sig, &err);
	if (!facts) {
		fprintf(c->err, "rungctl classify: %s\n", err);
		rc = CLI_USAGE;
		goto out;
	}
	verdict = policy_classify(facts, config);
	if (!verdict) {
		fprintf(c->err, "rungctl classify: the policy could not classify these facts\n");
		rc = CLI_REFUSED;
		goto out;
	}
	json_object_set(verdict, "facts", facts);
	cli_print_json(c, verdict);
out:
	free(err);
	json_decref(verdict);
	json_decref(facts);
	json_decref(config);
	return rc;
}
