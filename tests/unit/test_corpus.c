/* The classifier against real trainer logs (tests/data/logs, see its README): every log goes through
 * cmd_classify_facts and policy_classify, the code path of `rungctl classify`; the test prints a
 * confusion table per class and per phase, lists each miss, and fails below the floors. The floors
 * were set from the corpus (issue 15) and may only go up. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/cmd_classify.h"
#include "../../recovery/classify.h"
#include "../../recovery/policy.h"
#include "tap.h"
#include "util.h"

#define FLOOR_GPU_OOM 0.97   /* GPU-OOM vs not */
#define FLOOR_CLASS 0.95     /* the DECISION class */
#define FLOOR_PHASE 0.90     /* the OOM phase, on the logs whose text shows it */
#define MIN_LOGS 60

static const char *const CLASSES[] = {
	"not_oom", "host_oom", "env_fault", "oom_load", "oom_sample", "oom_train_early", "oom_train_intermittent",
};
#define NCLS ARRAY_LEN(CLASSES)
static const char *const PHASES[] = { "-", "load", "baseline_sample", "train", "sample", "save" };
#define NPH ARRAY_LEN(PHASES)

struct tally {
	int n, gpu_ok, cls_ok, ph_n, ph_ok, ladder_wrong, invented;
	int cls[NCLS][NCLS + 1]; /* [label][prediction], the last column for a class outside the list */
	int ph[NPH][NPH + 1];
};

static size_t index_of(const char *const *names, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (s && !strcmp(names[i], s))
			return i;
	return n;
}

/* The corpus folder: $RUNG_ROOT/tests/data/logs when run by tests/run.sh, else relative. */
static const char *logs_dir(char *buf, size_t cap)
{
	static const char *const rel[] = { "tests/data/logs", "../../tests/data/logs", "../tests/data/logs" };
	const char *root = getenv("RUNG_ROOT");
	DIR *d;

	if (root) {
		snprintf(buf, cap, "%s/tests/data/logs", root);
		if ((d = opendir(buf))) {
			closedir(d);
			return buf;
		}
	}
	for (size_t i = 0; i < ARRAY_LEN(rel); i++) {
		if ((d = opendir(rel[i]))) {
			closedir(d);
			snprintf(buf, cap, "%s", rel[i]);
			return buf;
		}
	}
	return NULL;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The phase rung claims for an OOM: the scanner's oom_phase; "start" (nothing recognised) is no claim. */
static const char *claimed_phase(const json_t *facts)
{
	const char *p = json_string_value(json_object_get(facts, "oom_phase"));
	return p && strcmp(p, "start") ? p : NULL;
}

static void one_log(const char *dir, const char *stem, struct tally *t)
{
	char path[2200];
	json_error_t jerr;
	json_t *label, *facts = NULL, *verdict = NULL, *config;
	FILE *f = NULL;
	char *err = NULL;
	const char *want_cls, *want_ph, *got_cls, *got_ph;
	bool want_gpu, got_gpu, miss = false;

	snprintf(path, sizeof(path), "%s/%s.json", dir, stem);
	label = json_load_file(path, 0, &jerr);
	if (!label) {
		TAP_OK(0, "label parses");
		printf("#   %s: %s\n", path, jerr.text);
		return;
	}
	snprintf(path, sizeof(path), "%s/%s.log", dir, stem);
	f = fopen(path, "rb");
	if (!f) {
		TAP_OK(0, "log opens");
		printf("#   %s\n", path);
		goto out;
	}
	facts = cmd_classify_facts(f, -1, 0, &err);
	if (!facts) {
		TAP_OK(0, "log reads");
		printf("#   %s: %s\n", path, err);
		goto out;
	}
	config = json_object_get(label, "config");
	verdict = policy_classify(facts, json_is_object(config) ? config : NULL);
	want_cls = json_string_value(json_object_get(label, "class"));
	want_ph = json_string_value(json_object_get(label, "phase"));
	want_gpu = json_is_true(json_object_get(label, "gpu_oom"));
	got_cls = json_string_value(json_object_get(verdict, "class"));
	got_gpu = classify_gpu_signature(facts);
	got_ph = got_gpu ? claimed_phase(facts) : NULL;

	t->n++;
	t->gpu_ok += want_gpu == got_gpu;
	t->cls_ok += want_cls && got_cls && !strcmp(want_cls, got_cls);
	t->cls[index_of(CLASSES, NCLS, want_cls) % NCLS][index_of(CLASSES, NCLS, got_cls)]++;
	if (want_gpu != got_gpu || !want_cls || !got_cls || strcmp(want_cls, got_cls))
		miss = true;
	if (!want_gpu && got_cls && !strncmp(got_cls, "oom_", 4))
		t->ladder_wrong++;
	if (want_gpu) {
		size_t w = want_ph ? index_of(PHASES, NPH, want_ph) : 0, g = got_ph ? index_of(PHASES, NPH, got_ph) : 0;
		t->ph[w % NPH][g]++;
		if (want_ph) {
			t->ph_n++;
			if (got_ph && !strcmp(want_ph, got_ph))
				t->ph_ok++;
			else
				miss = true;
		} else if (got_ph) {
			t->invented++;
			miss = true;
		}
	}
	if (miss)
		printf("# miss %s: want %s/%s/%s, got %s/%s/%s (rule %s)\n", stem, want_gpu ? "gpu" : "-",
		       want_cls ? want_cls : "?", want_ph ? want_ph : "-", got_gpu ? "gpu" : "-",
		       got_cls ? got_cls : "?", got_ph ? got_ph : "-",
		       json_string_value(json_object_get(verdict, "rule")));
out:
	if (f)
		fclose(f);
	free(err);
	json_decref(verdict);
	json_decref(facts);
	json_decref(label);
}

static void print_tables(const struct tally *t)
{
	printf("# class confusion (rows: label, columns: rung)\n# %-24s", "");
	for (size_t j = 0; j < NCLS; j++)
		printf(" %6.6s", CLASSES[j] + (strncmp(CLASSES[j], "oom_", 4) ? 0 : 4));
	printf("  other\n");
	for (size_t i = 0; i < NCLS; i++) {
		printf("# %-24s", CLASSES[i]);
		for (size_t j = 0; j <= NCLS; j++)
			printf(" %6d", t->cls[i][j]);
		printf("\n");
	}
	printf("# phase confusion on GPU-OOM logs (rows: label, columns: rung; - = no phase)\n# %-24s", "");
	for (size_t j = 0; j < NPH; j++)
		printf(" %8.8s", PHASES[j]);
	printf("   other\n");
	for (size_t i = 0; i < NPH; i++) {
		printf("# %-24s", PHASES[i]);
		for (size_t j = 0; j <= NPH; j++)
			printf(" %8d", t->ph[i][j]);
		printf("\n");
	}
}

static double ratio(int a, int b)
{
	return b ? (double)a / b : 1.0;
}

int main(void)
{
	char dirbuf[1024], **stems = NULL, name[128];
	const char *dir = logs_dir(dirbuf, sizeof(dirbuf));
	struct tally t;
	struct dirent *e;
	size_t n = 0, cap = 0;
	DIR *d;

	memset(&t, 0, sizeof(t));
	TAP_OK(dir != NULL, "the corpus folder tests/data/logs exists");
	if (!dir)
		return TAP_DONE();
	d = opendir(dir);
	while (d && (e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < 6 || l >= sizeof(name) || strcmp(e->d_name + l - 5, ".json"))
			continue;
		if (n == cap)
			stems = xrealloc(stems, (cap = cap ? cap * 2 : 64) * sizeof(*stems));
		stems[n] = xstrdup(e->d_name);
		stems[n++][l - 5] = '\0';
	}
	if (d)
		closedir(d);
	if (n)
		qsort(stems, n, sizeof(*stems), by_name);
	for (size_t i = 0; i < n; i++)
		one_log(dir, stems[i], &t);

	print_tables(&t);
	printf("# %d logs: GPU-OOM vs not %d/%d (%.1f%%), class %d/%d (%.1f%%), phase %d/%d (%.1f%%), "
	       "non-OOM sent up the ladder %d, phases invented %d\n", t.n, t.gpu_ok, t.n, 100 * ratio(t.gpu_ok, t.n),
	       t.cls_ok, t.n, 100 * ratio(t.cls_ok, t.n), t.ph_ok, t.ph_n, 100 * ratio(t.ph_ok, t.ph_n),
	       t.ladder_wrong, t.invented);
	TAP_OK(t.n >= MIN_LOGS, "the corpus holds at least 60 labelled logs");
	TAP_OK(ratio(t.gpu_ok, t.n) >= FLOOR_GPU_OOM, "GPU-OOM vs not at or above its floor (97%)");
	TAP_OK(ratio(t.cls_ok, t.n) >= FLOOR_CLASS, "class at or above its floor (95%)");
	TAP_OK(t.ph_n > 0 && ratio(t.ph_ok, t.ph_n) >= FLOOR_PHASE,
	       "phase at or above its floor (90%) on the logs that show it");
	TAP_INT_EQ(t.ladder_wrong, 0, "no non-OOM log is sent up the VRAM ladder");
	TAP_INT_EQ(t.invented, 0, "no phase is claimed where the log does not show one");
	for (size_t i = 0; i < n; i++)
		free(stems[i]);
	free(stems);
	return TAP_DONE();
}
