/* Replays every input of tests/fuzz/corpus/TARGET/ and tests/fuzz/crashes/TARGET/ through the
 * fuzz target bodies (tests/fuzz/targets.h) with the ordinary build, so what the fuzzers found
 * stays a regression test. Corpus inputs run in this process (leaks show under SANITIZE); each
 * kept crash runs in a child of its own so a crash still failing is named and the rest still run. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../fuzz/targets.h"
#include "tap.h"

struct target {
	const char *name;
	int (*one)(const uint8_t *data, size_t size);
};

static const struct target targets[] = {
	{ "scan", fuzz_scan_one },
	{ "config", fuzz_config_one },
	{ "facts", fuzz_facts_one },
	{ "submit", fuzz_submit_one },
};

/* The whole file at path into *buf (heap, caller frees); -1 when it cannot be read. */
static int read_all(const char *path, uint8_t **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = NULL;
	size_t cap = 0, n = 0, r;
	int rc = -1;

	if (!f)
		return -1;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			b = xrealloc(b, cap);
		}
		r = fread(b + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	if (ferror(f))
		goto out;
	*buf = b;
	*len = n;
	b = NULL;
	rc = 0;
out:
	free(b);
	fclose(f);
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted regular files of dir (heap array of heap paths, *n entries); an absent dir gives none. */
static char **list_dir(const char *dir, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;
	char **v = NULL, *p;
	size_t cap = 0;

	*n = 0;
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !strcmp(de->d_name, "last-run.log"))
			continue;
		p = xasprintf("%s/%s", dir, de->d_name);
		if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
			free(p);
			continue;
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			v = xrealloc(v, cap * sizeof(*v));
		}
		v[(*n)++] = p;
	}
	closedir(d);
	if (*n)
		qsort(v, *n, sizeof(*v), by_name);
	return v;
}

static void free_list(char **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Runs one kept crash in a child; true when it exits 0 (the bug is fixed). */
static bool replay_isolated(const struct target *t, const char *path)
{
	pid_t pid;
	int status = 0;
	uint8_t *buf;
	size_t len;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		if (read_all(path, &buf, &len) < 0)
			_exit(3);
		t->one(buf, len);
		free(buf);
		exit(0);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(status))
		printf("#   %s: killed by signal %d\n", path, WTERMSIG(status));
	else if (WEXITSTATUS(status))
		printf("#   %s: exit status %d\n", path, WEXITSTATUS(status));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The fuzz data lives at the root of the checkout; tests run from there (tests/run.sh) or from
 * wherever RUNG_FUZZ_DIR points. */
static const char *fuzz_dir(void)
{
	static const char *const dirs[] = { "tests/fuzz", "../../tests/fuzz", "../tests/fuzz" };
	const char *env = getenv("RUNG_FUZZ_DIR");
	struct stat st;
	size_t i;

	if (env)
		return env;
	for (i = 0; i < ARRAY_LEN(dirs); i++)
		if (stat(dirs[i], &st) == 0 && S_ISDIR(st.st_mode))
			return dirs[i];
	return "tests/fuzz";
}

int main(void)
{
	const char *root = fuzz_dir();
	size_t ti, i, n, nc, total = 0;
	char **files, *dir, name[160];
	uint8_t *buf;
	size_t len;
	int unreadable, failed;

	fz_thorough = 1;

	for (ti = 0; ti < ARRAY_LEN(targets); ti++) {
		const struct target *t = &targets[ti];

		dir = xasprintf("%s/corpus/%s", root, t->name);
		files = list_dir(dir, &n);
		unreadable = 0;
		for (i = 0; i < n; i++) {
			if (read_all(files[i], &buf, &len) < 0) {
				unreadable++;
				continue;
			}
			t->one(buf, len);
			free(buf);
		}
		total += n;
		free_list(files, n);
		free(dir);

		dir = xasprintf("%s/crashes/%s", root, t->name);
		files = list_dir(dir, &nc);
		failed = 0;
		for (i = 0; i < nc; i++)
			if (!replay_isolated(t, files[i]))
				failed++;
		total += nc;
		free_list(files, nc);
		free(dir);
		snprintf(name, sizeof(name), "fuzz_%s: %zu corpus and %zu crash inputs replayed", t->name, n, nc);
		TAP_OK(n > 0 && unreadable == 0 && failed == 0, name);
	}
	printf("# %zu inputs in all\n", total);
	return TAP_DONE();
}
