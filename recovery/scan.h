/* The trainer-log scanner: reads AI Toolkit's output as it arrives (bytes, split into lines on
 * \n or \r), tracks the phase and the training step, counts failure signatures, keeps the OOM
 * numbers and the last lines, and builds the FACTS fields it knows (docs/DESIGN.md). Pure code:
 * no I/O, no clocks. Used by rung-worker (live) and `rungctl classify` (a saved log). */
#ifndef RUNG_SCAN_H
#define RUNG_SCAN_H

#include <jansson.h>
#include <stddef.h>

enum scan_phase {
	SCAN_START,           /* nothing recognised yet */
	SCAN_LOAD,            /* job started, model/dataset loading */
	SCAN_BASELINE_SAMPLE, /* samples generated before the first training step */
	SCAN_TRAIN,           /* the training progress bar is moving */
	SCAN_SAMPLE,          /* samples generated after training started */
	SCAN_SAVE,            /* "Saving at step N" */
	SCAN_DONE             /* the Result: block reported a completed job */
};

#define SCAN_TAIL_LINES 200   /* lines kept for log_tail */
#define SCAN_TAIL_BYTES 1000  /* bytes kept of each tail line */
#define SCAN_PATH_CAP 4096    /* bytes kept of a saved file's path */
#define SCAN_LINE_CAP 16384   /* bytes of one line kept for matching; the rest is dropped */

struct scan;

/* A fresh scanner in phase start. Never fails (aborts on memory exhaustion); free with scan_free. */
struct scan *scan_new(void);
/* Frees the scanner; NULL is a no-op. */
void scan_free(struct scan *s);

/* Feeds LEN bytes of trainer output (stdout and stderr mixed) as they arrive; any bytes at all,
 * split anywhere. A line longer than SCAN_LINE_CAP is truncated, never buffered without bound. */
void scan_feed(struct scan *s, const char *data, size_t len);
/* Ends the input: a last line without a newline is scanned. Further feeds start a new line. */
void scan_finish(struct scan *s);

/* Current state, for heartbeats. scan_step/scan_total_steps return -1 while unknown. */
enum scan_phase scan_phase(const struct scan *s);
const char *scan_phase_name(enum scan_phase p);   /* "start", "load", ...: static string */
long long scan_step(const struct scan *s);
long long scan_total_steps(const struct scan *s);
/* Count of one signature (e.g. "cuda_oom"); 0 when never seen. */
int scan_signature(const struct scan *s, const char *name);

/* A new JSON object (caller owns the reference) with the FACTS fields the scanner knows: phase,
 * oom_phase, first_step, last_step, steps_done, total_steps, signatures, oom, error, log_tail,
 * saved_path (the file the last save line named, null when none).
 * steps_done is last_step - first_step (the first bar reading is where this attempt started,
 * which is above 0 for a resumed run). All strings are valid UTF-8 (bad bytes become '?'). */
json_t *scan_facts(const struct scan *s);

#endif
