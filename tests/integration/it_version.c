/* Integration: versions, for a fleet upgraded host by host. `--version` of bin/rungd, bin/rung-worker
 * and bin/rungctl (exit 0, "NAME VERSION", the same build's version). Real binaries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "util.h"

/* Runs `ROOT/CMD` through the shell, stderr with stdout; returns the output (heap) and the exit
 * status in *rc (-1 when it did not exit). */
static char *run_cmd(struct harness *h, const char *cmd, int *rc)
{
	char *line = xasprintf("cd %s && %s 2>&1", h->root, cmd);
	FILE *p = popen(line, "r");
	char *out = xcalloc(1, 65536);
	size_t n = 0, got;
	int st;

	while (p && n < 65535 && (got = fread(out + n, 1, 65535 - n, p)) > 0)
		n += got;
	st = p ? pclose(p) : -1;
	*rc = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	free(line);
	return out;
}

/* `bin/PROG --version`: exit 0 and one line "PROG VERSION"; returns VERSION (heap) or NULL. */
static char *version_of(struct harness *h, const char *prog)
{
	char *cmd = xasprintf("bin/%s --version", prog), *out, *v = NULL;
	size_t pl = strlen(prog), len;
	int rc = -1;

	out = run_cmd(h, cmd, &rc);
	len = strlen(out);
	if (h_ok(h, rc == 0 && len > pl + 2 && !strncmp(out, prog, pl) && out[pl] == ' ' && out[len - 1] == '\n' &&
			    !strchr(out + pl + 1, ' ') && strchr(out, '\n') == out + len - 1,
		 "%s --version: exit 0 and one line \"%s VERSION\" (rc %d)", prog, prog, rc))
		v = xasprintf("%.*s", (int)(len - pl - 2), out + pl + 1);
	else
		h_diag("%s --version printed: %.200s", prog, out);
	free(out);
	free(cmd);
	return v;
}

static void test_version_flags(struct harness *h, char **version)
{
	char *d = version_of(h, "rungd"), *w = version_of(h, "rung-worker"), *c = version_of(h, "rungctl"), *out;
	int rc = -1;

	h_ok(h, d && w && c && !strcmp(d, w) && !strcmp(d, c), "the three binaries print the same version (%s)",
	     d ? d : "none");
	out = run_cmd(h, "bin/rungd --help", &rc);
	h_ok(h, rc == 0 && strstr(out, "--version"), "rungd --help lists --version");
	free(out);
	out = run_cmd(h, "bin/rung-worker --help", &rc);
	h_ok(h, rc == 0 && strstr(out, "--version"), "rung-worker --help lists --version");
	free(out);
	out = run_cmd(h, "bin/rungctl --help", &rc);
	h_ok(h, rc == 0 && strstr(out, "--version"), "rungctl --help lists --version");
	free(out);
	out = run_cmd(h, "RUNG_LEASE_SECONDS=bogus bin/rungd migrate --version", &rc);
	h_ok(h, rc == 0 && d && !strncmp(out, "rungd ", 6) && strstr(out, d),
	     "rungd migrate --version: the version, no migration, a bad variable not read (rc %d)", rc);
	free(out);
	out = run_cmd(h, "bin/rungctl --url http://127.0.0.1:1 --version", &rc);
	h_ok(h, rc == 0 && c && strstr(out, c), "rungctl --url U --version: the version, no server asked (rc %d)", rc);
	free(out);
	*version = d;
	free(w);
	free(c);
}

int main(void)
{
	struct harness *h = h_new("it_version");
	char *version = NULL;

	test_version_flags(h, &version);
	free(version);
	return h_free(h);
}
