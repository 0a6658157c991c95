/* rungctl: the command-line client of rungd. main only splits global options from the command
 * and dispatches through cli_cmds (cli.c); every command lives in a cmd_*.c module. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "log.h"
#include "util.h"
#include "version.h"

int main(int argc, char **argv)
{
	struct cli c;
	int i = 1, words = 0, rc;

	log_init("rungctl", LOG_WARN);
	cli_init(&c);
	/* global options before the command: --url U, --token T, --json, --help, --version */
	while (i < argc && argv[i][0] == '-') {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			cli_usage(stdout);
			return CLI_OK;
		} else if (!strcmp(a, "--version")) {
			printf("rungctl %s\n", rung_version());
			return CLI_OK;
		} else if (!strcmp(a, "--json")) {
			c.json = 1;
			i++;
		} else if ((!strcmp(a, "--url") || !strcmp(a, "--token")) && i + 1 < argc) {
			*(a[2] == 'u' ? &c.url : &c.token) = argv[i + 1];
			i += 2;
		} else if (!strncmp(a, "--url=", 6)) {
			c.url = a + 6;
			i++;
		} else if (!strncmp(a, "--token=", 8)) {
			c.token = a + 8;
			i++;
		} else {
			fprintf(stderr, "rungctl: unknown or incomplete option '%s'\n\n", a);
			cli_usage(stderr);
			return CLI_USAGE;
		}
	}
	const struct cli_cmd *cmd = cli_find(argc - i, argv + i, &words);
	if (!cmd) {
		if (i < argc)
			fprintf(stderr, "rungctl: unknown command '%s' (rungctl --help lists them)\n", argv[i]);
		else
			cli_usage(stderr);
		return CLI_USAGE;
	}
	rc = cmd->run(&c, argc - i - words, argv + i + words);
	cli_release(&c);
	return rc;
}
