/* The trainer-log scanner (see scan.h): a line splitter with a capped line buffer, a matcher for
 * AI Toolkit's phase markers, tqdm bars and failure signatures plus tables of other trainers'
 * wordings, markers and traceback frames (tests/data/logs), the OOM message numbers, and a
 * ring of the last lines. It owns no I/O; the worker feeds it and adds exit code, GPU readings
 * and timing to the facts it builds. */
#include "scan.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

enum scan_sig {
	SIG_CUDA_OOM, SIG_SKIPPED_BATCH_OOM, SIG_OOM_3_IN_ROW, SIG_ZERO_BYTES_FREE,
	SIG_CUBLAS_ALLOC_FAILED, SIG_CUBLAS_NOT_INITIALIZED, SIG_HOST_KILLED, SIG_MEMORY_ERROR,
	SIG_NAN_LOSS, SIG_FILE_NOT_FOUND, SIG_NCCL_TIMEOUT, SIG_CONFIG_ERROR, SIG_ERROR_RUNNING_JOB,
	SIG_JOB_STOPPED, SIG_RESUMING, SIG_GPU_BUSY, SIG_HOST_SHM, SIG_COUNT
};

static const char *const sig_names[SIG_COUNT] = {
	"cuda_oom", "skipped_batch_oom", "oom_3_in_row", "zero_bytes_free",
	"cublas_alloc_failed", "cublas_not_initialized", "host_killed", "memory_error",
	"nan_loss", "file_not_found", "nccl_timeout", "config_error", "error_running_job",
	"job_stopped", "resuming", "gpu_busy", "host_shm",
};

static const char *const phase_names[] = {
	"start", "load", "baseline_sample", "train", "sample", "save", "done",
};

#define SCAN_MAX_PROCS 64
#define SCAN_NAME_CAP 256

struct scan_proc {
	long long pid;
	double used_mib;
};

struct scan {
	char line[SCAN_LINE_CAP + 1]; /* the line being assembled, NUL-terminated when scanned */
	size_t len;                   /* bytes in line */
	enum scan_phase phase;        /* last phase seen */
	int oom_phase;                /* phase of the first GPU-OOM signature, -1 when none */
	long long first_step, last_step, total_steps; /* -1 while unknown */
	bool step_named;              /* last_step comes from a line naming it, not a progress bar */
	bool train_started;           /* a training bar was seen */
	bool loading_seen;            /* a model/dataset loading marker was seen */
	bool in_trace;                /* a Python traceback header was seen */
	long long train_ts, oom_ts;   /* log timestamps (s) of the first training line and of the first GPU OOM, -1 */
	int trace_phase;              /* phase of the innermost known trainer frame of the last traceback, -1 */
	char job_name[SCAN_NAME_CAP]; /* from "# Running job: NAME", "" while unknown */
	int sigs[SIG_COUNT];
	double tried_mib, total_mib, free_mib, alloc_mib; /* OOM numbers, NAN while unknown */
	struct scan_proc procs[SCAN_MAX_PROCS];
	size_t nprocs;
	char *error;                  /* last error message (heap), NULL when none */
	char *saved_path;             /* the file the last save line named (heap), NULL when none */
	char *tail[SCAN_TAIL_LINES];  /* ring of sanitised lines (heap) */
	size_t tail_start, tail_count;
	bool tail_last_bar;           /* the newest tail line is a progress bar ... */
	char tail_last_desc[SCAN_NAME_CAP]; /* ... with this description */
};

struct scan *scan_new(void)
{
	struct scan *s = xcalloc(1, sizeof *s);
	s->phase = SCAN_START;
	s->oom_phase = -1;
	s->trace_phase = -1;
	s->first_step = s->last_step = s->total_steps = -1;
	s->train_ts = s->oom_ts = -1;
	s->tried_mib = s->total_mib = s->free_mib = s->alloc_mib = NAN;
	return s;
}

void scan_free(struct scan *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < SCAN_TAIL_LINES; i++)
		free(s->tail[i]);
	free(s->error);
	free(s->saved_path);
	free(s);
}

enum scan_phase scan_phase(const struct scan *s) { return s->phase; }
long long scan_step(const struct scan *s) { return s->last_step; }
long long scan_total_steps(const struct scan *s) { return s->total_steps; }

const char *scan_phase_name(enum scan_phase p)
{
	if ((unsigned)p >= ARRAY_LEN(phase_names))
		return "start";
	return phase_names[p];
}

int scan_signature(const struct scan *s, const char *name)
{
	for (int i = 0; i < SIG_COUNT; i++)
		if (!strcmp(sig_names[i], name))
			return s->sigs[i];
	return 0;
}

/* Skips spaces and ANSI escape sequences (tqdm moves the cursor with them). */
static const char *skip_space_esc(const char *p)
{
	for (;;) {
		if (*p == ' ' || *p == '\t') {
			p++;
		} else if (*p == 0x1b) {
			p++;
			if (*p == '[') {
				p++;
				while (*p && !isalpha((unsigned char)*p))
					p++;
				if (*p)
					p++;
			}
		} else {
			return p;
		}
	}
}

static bool parse_ll(const char **pp, long long *out)
{
	const char *p = *pp;
	long long v = 0;
	if (!isdigit((unsigned char)*p))
		return false;
	while (isdigit((unsigned char)*p)) {
		if (v > 100000000000LL)
			return false;
		v = v * 10 + (*p++ - '0');
	}
	*pp = p;
	*out = v;
	return true;
}

/* Recognises a tqdm bar "DESC:  12%|####| 245/2000 [...]": fills desc (trimmed), n and total. */
static bool parse_bar(const char *l, char *desc, size_t cap, long long *n, long long *total)
{
	const char *pct = strstr(l, "%|"), *q, *d_end, *start, *r;
	size_t dl;

	if (!pct)
		return false;
	q = pct;
	while (q > l && isdigit((unsigned char)q[-1]))
		q--;
	if (q == pct)
		return false;
	d_end = q;
	while (d_end > l && d_end[-1] == ' ')
		d_end--;
	if (d_end > l && d_end[-1] == ':')
		d_end--;
	start = skip_space_esc(l);
	if (start > d_end)
		start = d_end;
	while (d_end > start && d_end[-1] == ' ')
		d_end--;
	dl = (size_t)(d_end - start);
	if (dl >= cap)
		dl = cap - 1;
	memcpy(desc, start, dl);
	desc[dl] = '\0';
	r = strchr(pct + 2, '|');
	if (!r)
		return false;
	r++;
	while (*r == ' ')
		r++;
	if (!parse_ll(&r, n) || *r != '/')
		return false;
	r++;
	if (!parse_ll(&r, total))
		return false;
	return *r == '\0' || *r == ' ' || *r == '[';
}

/* Parses "NUM UNIT" at P into MiB; false when P does not hold a size. */
static bool parse_size(const char *p, double *mib)
{
	static const struct { const char *unit; double mult; } units[] = {
		{ "bytes", 1.0 / 1048576 }, { "KiB", 1.0 / 1024 }, { "MiB", 1 }, { "GiB", 1024 },
		{ "TiB", 1048576 }, { "KB", 1.0 / 1024 }, { "MB", 1 }, { "GB", 1024 }, { "B", 1.0 / 1048576 },
	};
	char *end;
	double v;

	while (*p == ' ')
		p++;
	if (!isdigit((unsigned char)*p))
		return false;
	v = strtod(p, &end);
	if (end == p)
		return false;
	p = end;
	while (*p == ' ')
		p++;
	for (size_t i = 0; i < ARRAY_LEN(units); i++) {
		size_t ul = strlen(units[i].unit);
		if (!strncmp(p, units[i].unit, ul) && !isalpha((unsigned char)p[ul])) {
			*mib = v * units[i].mult;
			return true;
		}
	}
	return false;
}

/* Parses the size that ends just before position K in L ("23.99 GiB total capacity"). */
static bool parse_size_before(const char *l, const char *k, double *mib)
{
	const char *p = k;
	while (p > l && p[-1] == ' ')
		p--;
	while (p > l && isalpha((unsigned char)p[-1]))
		p--;
	while (p > l && p[-1] == ' ')
		p--;
	while (p > l && (isdigit((unsigned char)p[-1]) || p[-1] == '.'))
		p--;
	return parse_size(p, mib);
}

static void note_proc(struct scan *s, long long pid, double mib)
{
	for (size_t i = 0; i < s->nprocs; i++) {
		if (s->procs[i].pid == pid) {
			s->procs[i].used_mib = mib;
			return;
		}
	}
	if (s->nprocs < SCAN_MAX_PROCS)
		s->procs[s->nprocs++] = (struct scan_proc){ pid, mib };
}

/* The numbers PyTorch puts in an OOM message, old and new wordings. */
static void scan_oom_numbers(struct scan *s, const char *l)
{
	const char *k;
	double v;

	if ((k = strstr(l, "Tried to allocate ")) && parse_size(k + 18, &v))
		s->tried_mib = v;
	if ((k = strstr(l, "total capacity of ")) && parse_size(k + 18, &v))
		s->total_mib = v;
	else if ((k = strstr(l, " total capacity")) && parse_size_before(l, k, &v))
		s->total_mib = v;
	if ((k = strstr(l, "of which ")) && parse_size(k + 9, &v))
		s->free_mib = v;
	else if ((k = strstr(l, " free;")) && parse_size_before(l, k, &v))
		s->free_mib = v;
	if ((k = strstr(l, "Of the allocated memory ")) && parse_size(k + 24, &v))
		s->alloc_mib = v;
	else if ((k = strstr(l, " already allocated")) && parse_size_before(l, k, &v))
		s->alloc_mib = v;
	for (k = l; (k = strstr(k, "Process ")); ) {
		const char *p = k + 8;
		long long pid;
		k += 8;
		if (!parse_ll(&p, &pid) || strncmp(p, " has ", 5))
			continue;
		p += 5;
		if (parse_size(p, &v) && strstr(p, " memory in use"))
			note_proc(s, pid, v);
	}
}

/* "0 bytes is free" / "0 bytes free", not "10 bytes free". */
static bool has_zero_bytes_free(const char *l)
{
	static const char *const pats[] = { "0 bytes is free", "0 bytes free" };
	for (size_t i = 0; i < ARRAY_LEN(pats); i++) {
		for (const char *k = l; (k = strstr(k, pats[i])); k++)
			if (k == l || (!isdigit((unsigned char)k[-1]) && k[-1] != '.'))
				return true;
	}
	return false;
}

/* "MemoryError" as a word (not "OutOfMemoryError"). */
static bool has_memory_error(const char *l)
{
	for (const char *k = l; (k = strstr(k, "MemoryError")); k++) {
		char before = k == l ? ' ' : k[-1], after = k[11];
		if (!isalnum((unsigned char)before) && before != '_' &&
		    (after == '\0' || after == ':' || after == ' ' || after == '('))
			return true;
	}
	return false;
}

/* The shell's "Killed" line (or "1234 Killed  python ..."). */
static bool has_killed(const char *l, const char *trimmed)
{
	const char *k;
	if (!strncmp(trimmed, "Killed", 6) && (trimmed[6] == '\0' || trimmed[6] == ' '))
		return true;
	for (k = l; (k = strstr(k, " Killed")); k++)
		if (k > l && isdigit((unsigned char)k[-1]) && (k[7] == '\0' || k[7] == ' '))
			return true;
	return false;
}

/* A Python exception line "NAME: message" or "NAME" where NAME ends in Error/Exception;
 * copies the name into NAME. */
static bool is_exception_line(const char *t, char *name, size_t cap)
{
	const char *p = t;
	size_t n;
	if (!isalpha((unsigned char)*p) && *p != '_')
		return false;
	while (isalnum((unsigned char)*p) || *p == '_' || *p == '.')
		p++;
	if (*p != ':' && *p != '\0')
		return false;
	n = (size_t)(p - t);
	if (n < 5 || n >= cap)
		return false;
	memcpy(name, t, n);
	name[n] = '\0';
	return (n >= 5 && !strcmp(name + n - 5, "Error")) ||
	       (n >= 9 && !strcmp(name + n - 9, "Exception"));
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

static bool is_config_exception(const char *name)
{
	static const char *const names[] = {
		"ValueError", "KeyError", "TypeError", "AttributeError", "ScannerError",
		"ParserError", "ConstructorError", "JSONDecodeError", "ValidationError",
	};
	for (size_t i = 0; i < ARRAY_LEN(names); i++)
		if (ends_with(name, names[i]))
			return true;
	return false;
}

static void set_error(struct scan *s, const char *msg)
{
	free(s->error);
	s->error = util_utf8_sanitize(msg, strlen(msg), SCAN_TAIL_BYTES);
}

static void tail_add(struct scan *s, const char *l, size_t len, bool bar, const char *desc)
{
	char *copy = util_utf8_sanitize(l, len, SCAN_TAIL_BYTES);
	if (s->tail_count && bar && s->tail_last_bar && !strcmp(desc, s->tail_last_desc)) {
		size_t last = (s->tail_start + s->tail_count - 1) % SCAN_TAIL_LINES;
		free(s->tail[last]);
		s->tail[last] = copy;
		return;
	}
	if (s->tail_count == SCAN_TAIL_LINES) {
		free(s->tail[s->tail_start]);
		s->tail[s->tail_start] = copy;
		s->tail_start = (s->tail_start + 1) % SCAN_TAIL_LINES;
	} else {
		s->tail[(s->tail_start + s->tail_count) % SCAN_TAIL_LINES] = copy;
		s->tail_count++;
	}
	s->tail_last_bar = bar;
	snprintf(s->tail_last_desc, sizeof s->tail_last_desc, "%s", bar ? desc : "");
}

static bool is_train_desc(const struct scan *s, const char *desc, const char *line)
{
	static const char *const not_train[] = {
		"Generating", "Caching", "Loading", "Quantizing", "Fetching", "Downloading", "Saving",
		"Making", "Processing", "Encoding", "Sampling", "Computing", "Map", "Resolving",
	};
	if (!desc[0])
		return false;
	if (s->job_name[0] && !strcmp(desc, s->job_name))
		return true;
	for (size_t i = 0; i < ARRAY_LEN(not_train); i++)
		if (!strncasecmp(desc, not_train[i], strlen(not_train[i])))
			return false;
	return !s->job_name[0] || strstr(line, "loss:") != NULL;
}

static void note_gpu_oom(struct scan *s)
{
	if (s->oom_phase < 0)
		s->oom_phase = (int)s->phase;
}

static void set_phase(struct scan *s, enum scan_phase p)
{
	if (s->phase != SCAN_DONE)
		s->phase = p;
}

/* ---- what real trainer logs say (tests/data/logs): tables, each row tried on every line ---- */

/* Signature wordings beyond AI Toolkit's own, as other trainers, PyTorch versions, the kernel and
 * launchers print them. A row matches when the line holds TEXT (and ALSO, when set). */
static const struct sig_text {
	enum scan_sig sig;
	const char *text;
	const char *also;
	bool gpu_oom;            /* a GPU-memory failure: note the OOM phase */
} SIG_TEXTS[] = {
	{ SIG_CUDA_OOM, "cuda runtime error (2) : out of memory", NULL, true },   /* PyTorch 0.x */
	{ SIG_CUDA_OOM, "error=2 : out of memory", "THCudaCheck", true },          /* PyTorch 0.x THC */
	{ SIG_CUDA_OOM, "CUDA_ERROR_OUT_OF_MEMORY", NULL, true },
	{ SIG_HOST_KILLED, "Out of memory: Kill", NULL, false },          /* kernel OOM killer (dmesg) */
	{ SIG_HOST_KILLED, "Killed process ", NULL, false },
	{ SIG_HOST_KILLED, "died with <Signals.SIGKILL: 9>", NULL, false }, /* accelerate/subprocess */
	{ SIG_HOST_KILLED, "(exitcode: -9)", NULL, false },                /* torch elastic */
	{ SIG_HOST_KILLED, "oom-kill event", NULL, false },               /* Slurm cgroup */
	{ SIG_HOST_KILLED, "Out Of Memory", "srun: error:", false },
	{ SIG_HOST_SHM, "out of shared memory", NULL, false },            /* DataLoader Bus error */
	{ SIG_GPU_BUSY, "CUDA-capable device(s) is/are busy or unavailable", NULL, false },
	{ SIG_GPU_BUSY, "CUDA-capable devices are busy or unavailable", NULL, false },
};

/* Phase markers of the trainers AI Toolkit users also run (kohya sd-scripts, musubi-tuner, diffusers
 * examples, fairseq-style trainers); AI Toolkit's own markers are matched in scan_line. */
static const struct phase_text {
	const char *text;       /* matched as written (strstr: the scanner must keep up with a flood) */
	enum scan_phase phase;  /* SCAN_SAMPLE means "baseline or periodic", decided by train_started */
} PHASE_TEXTS[] = {
	{ "load StableDiffusion checkpoint", SCAN_LOAD },
	{ "Loading pipeline components", SCAN_LOAD },
	{ "caching latents", SCAN_LOAD },
	{ "Running training", SCAN_TRAIN },            /* diffusers `***** Running training *****` */
	{ "running training", SCAN_TRAIN },            /* kohya `running training / 学習開始` */
	{ "begin training epoch", SCAN_TRAIN },
	{ "generating sample images", SCAN_SAMPLE },  /* kohya, musubi-tuner */
	{ "Generating sample images", SCAN_SAMPLE },
	{ "Running validation", SCAN_SAMPLE },        /* diffusers examples */
};

/* Where a traceback says the trainer was: the innermost line of the last traceback that names a
 * known trainer function (real AI Toolkit tracebacks go from run() into load_model(), sample(),
 * hook_train_loop() or save(); kohya's into sample_images(), process_batch(), ...). */
static const struct frame_text {
	const char *text;
	enum scan_phase phase;
} FRAME_TEXTS[] = {
	{ "load_model", SCAN_LOAD }, { "from_pretrained", SCAN_LOAD }, { "quantize_model", SCAN_LOAD },
	{ ", in load_", SCAN_LOAD }, { "cache_latents", SCAN_LOAD }, { "cache_text_e", SCAN_LOAD },
	{ "self.sample(", SCAN_SAMPLE }, { "generate_images", SCAN_SAMPLE }, { "sample_images", SCAN_SAMPLE },
	{ "sample_image_inference", SCAN_SAMPLE }, { "log_validation", SCAN_SAMPLE },
	{ "hook_train_loop", SCAN_TRAIN }, { "train_single_accumulation", SCAN_TRAIN },
	{ "process_batch", SCAN_TRAIN }, { "backward(", SCAN_TRAIN }, { ", in backward", SCAN_TRAIN },
	{ "training_step", SCAN_TRAIN },
	{ "self.save(", SCAN_SAVE }, { "save_model(", SCAN_SAVE }, { "save_weights", SCAN_SAVE },
};

/* Removes ANSI escape sequences (colours, cursor moves) anywhere in the line, in place; returns the new length. */
static size_t strip_ansi(char *l, size_t len)
{
	size_t i = 0, o = 0;

	while (i < len) {
		if (l[i] == 0x1b) {
			i++;
			if (i < len && l[i] == '[') {
				i++;
				while (i < len && !isalpha((unsigned char)l[i]))
					i++;
			}
			if (i < len)
				i++;
			continue;
		}
		l[o++] = l[i++];
	}
	l[o] = '\0';
	return o;
}

/* Skips what launchers and people put before a trainer's line: `[rank3]:` (torchrun), `> ` (a
 * quoted paste), then spaces. */
static const char *skip_line_prefix(const char *t)
{
	for (;;) {
		if (!strncmp(t, "[rank", 5)) {
			const char *p = t + 5;
			while (isdigit((unsigned char)*p))
				p++;
			if (p > t + 5 && p[0] == ']' && p[1] == ':') {
				t = skip_space_esc(p + 2);
				continue;
			}
		}
		if (t[0] == '>' && (t[1] == ' ' || t[1] == '\0')) {
			t = skip_space_esc(t + 1);
			continue;
		}
		return t;
	}
}

/* BEFORE: the signature counts before this line, so that a signature already counted on it by
 * scan_line's own checks is not counted twice. */
static void scan_tables(struct scan *s, const char *l, const int *before)
{
	for (size_t i = 0; i < ARRAY_LEN(SIG_TEXTS); i++) {
		const struct sig_text *r = &SIG_TEXTS[i];
		if (s->sigs[r->sig] > before[r->sig] || !strstr(l, r->text) || (r->also && !strstr(l, r->also)))
			continue;
		s->sigs[r->sig]++;
		if (r->gpu_oom)
			note_gpu_oom(s);
		while (i + 1 < ARRAY_LEN(SIG_TEXTS) && SIG_TEXTS[i + 1].sig == r->sig)
			i++; /* once per line and signature */
	}
	for (size_t i = 0; i < ARRAY_LEN(PHASE_TEXTS); i++) {
		enum scan_phase p = PHASE_TEXTS[i].phase;
		if (!strstr(l, PHASE_TEXTS[i].text))
			continue;
		if (p == SCAN_SAMPLE)
			p = s->train_started ? SCAN_SAMPLE : SCAN_BASELINE_SAMPLE;
		if (p == SCAN_LOAD && s->phase != SCAN_START && s->phase != SCAN_LOAD)
			continue;
		set_phase(s, p);
		break;
	}
	if (strstr(l, "Traceback (most recent call last)"))
		s->in_trace = true;
	if (!s->in_trace)
		return;
	for (size_t i = 0; i < ARRAY_LEN(FRAME_TEXTS); i++) {
		if (strstr(l, FRAME_TEXTS[i].text)) {
			s->trace_phase = (int)FRAME_TEXTS[i].phase;
			break;
		}
	}
}

/* Issue 16.4: the step a trainer line names ("Saving at step N", a skip, abort or error line with
 * "step N"), or -1. tqdm redraws its bar only now and then, so these are the exact readings; the
 * "3" of "step 3 times in a row" is not a step. */
static long long named_step(const char *l)
{
	const char *k = l, *p;
	char *end;
	long long n, found = -1;

	if (!strstr(l, "Saving at step") && !strstr(l, "OOM during training step") && !strstr(l, "Error running job:"))
		return -1;
	while ((k = strcasestr(k, "step"))) {
		for (p = k + 4; *p == ' ' || *p == ':' || *p == '='; p++)
			;
		k += 4;
		if (!isdigit((unsigned char)*p))
			continue;
		n = strtoll(p, &end, 10);
		while (*end == ' ')
			end++;
		if (strncasecmp(end, "time", 4))
			found = n;
	}
	return found;
}

/* A line that names the file a trainer just saved: AI Toolkit's "Saved to PATH" (BaseSDTrainProcess.save,
 * after the file is written) and kohya sd-scripts' and musubi-tuner's "saving checkpoint: PATH" (before
 * it). The last one of a successful run is its output (FACTS.saved_path). A path has a '/' or '\\' or a
 * model file's extension, so "Saved to disk" is not one; it ends at the line's end or at two spaces. */
static void note_saved(struct scan *s, const char *l)
{
	static const char *const marks[] = { "Saved to ", "saving checkpoint: " };
	static const char *const exts[] = { ".safetensors", ".ckpt", ".pt", ".bin" };

	for (size_t i = 0; i < ARRAY_LEN(marks); i++) {
		const char *p = strstr(l, marks[i]), *e;
		bool named = false;
		if (!p)
			continue;
		p += strlen(marks[i]);
		while (*p == ' ')
			p++;
		e = strstr(p, "  "); /* rich's log lines put the source file after a run of spaces */
		if (!e)
			e = p + strlen(p);
		while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
			e--;
		named = memchr(p, '/', (size_t)(e - p)) || memchr(p, '\\', (size_t)(e - p));
		for (size_t k = 0; !named && k < ARRAY_LEN(exts); k++)
			named = (size_t)(e - p) > strlen(exts[k]) && !strncmp(e - strlen(exts[k]), exts[k], strlen(exts[k]));
		if (!named)
			continue;
		free(s->saved_path);
		s->saved_path = util_utf8_sanitize(p, (size_t)(e - p), SCAN_PATH_CAP);
		return;
	}
}

/* The timestamp a logger puts at the start of a line, "YYYY-MM-DD HH:MM:SS" (or with a 'T'), as seconds
 * since 1970 (days from the civil date); -1 when the line does not start with one. Trainers that print no
 * step counter (fairseq-style loggers, Python's logging) still give the time. */
static long long log_timestamp(const char *t)
{
	static const char shape[] = "dddd-dd-dd dd:dd:dd";
	long long y, m, d, era, yoe, doy, doe;

	for (size_t i = 0; i < sizeof shape - 1; i++) {
		if (shape[i] == 'd' ? !isdigit((unsigned char)t[i]) :
		    i == 10 ? (t[i] != ' ' && t[i] != 'T') : t[i] != shape[i])
			return -1;
	}
	y = strtoll(t, NULL, 10);
	m = strtoll(t + 5, NULL, 10);
	d = strtoll(t + 8, NULL, 10);
	if (m < 1 || m > 12 || d < 1 || d > 31 || strtoll(t + 11, NULL, 10) > 23 || strtoll(t + 14, NULL, 10) > 59 ||
	    strtoll(t + 17, NULL, 10) > 60)
		return -1; /* not a time of day: a line that merely starts with digits and dashes */
	y -= m <= 2;
	era = y / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return ((era * 146097 + doe - 719468) * 24 + strtoll(t + 11, NULL, 10)) * 3600 +
	       strtoll(t + 14, NULL, 10) * 60 + strtoll(t + 17, NULL, 10);
}

static void scan_line(struct scan *s, char *l, size_t len)
{
	char desc[SCAN_NAME_CAP], exc[128];
	int before[SIG_COUNT];
	long long n, total;
	const char *t, *k;
	long long ts;
	int oom_before = s->oom_phase;
	bool bar;

	l[len] = '\0';
	len = strip_ansi(l, len);
	t = skip_line_prefix(skip_space_esc(l));
	if (!*t)
		return;
	bar = parse_bar(l, desc, sizeof desc, &n, &total);
	tail_add(s, l, len, bar, bar ? desc : "");
	if (!bar)
		note_saved(s, t);

	if (bar) {
		if (!strncasecmp(desc, "Generating", 10)) {
			set_phase(s, s->train_started ? SCAN_SAMPLE : SCAN_BASELINE_SAMPLE);
		} else if (is_train_desc(s, desc, l)) {
			if (s->first_step < 0)
				s->first_step = n;
			s->last_step = n;
			s->step_named = false;
			s->total_steps = total;
			s->train_started = true;
			set_phase(s, SCAN_TRAIN);
		}
	} else if (strstr(l, "Generating baseline samples")) {
		set_phase(s, SCAN_BASELINE_SAMPLE);
	} else if (strstr(l, "Generating Samples") || strstr(l, "Generating Images")) {
		set_phase(s, s->train_started ? SCAN_SAMPLE : SCAN_BASELINE_SAMPLE);
	} else if (strstr(l, "Saving at step")) {
		set_phase(s, SCAN_SAVE);
	} else if ((k = strstr(l, " completed job"))) {
		const char *p = k;
		while (p > l && isdigit((unsigned char)p[-1]))
			p--;
		if (p < k && strtoll(p, NULL, 10) > 0)
			set_phase(s, SCAN_DONE);
	} else if (s->phase == SCAN_START || s->phase == SCAN_LOAD) {
		if ((k = strstr(l, "# Running job:"))) {
			size_t nl;
			k = skip_space_esc(k + 14);
			nl = strlen(k);
			while (nl && (k[nl - 1] == ' ' || k[nl - 1] == '#'))
				nl--;
			if (nl >= sizeof s->job_name)
				nl = sizeof s->job_name - 1;
			memcpy(s->job_name, k, nl);
			s->job_name[nl] = '\0';
			set_phase(s, SCAN_LOAD);
		} else if (!strncmp(t, "Running ", 8) && isdigit((unsigned char)t[8]) && strstr(t, " job")) {
			set_phase(s, SCAN_LOAD);
		} else if (strcasestr(l, "Loading transformer") || strstr(l, "Quantizing") ||
			   strcasestr(l, "Loading text encoder") || strcasestr(l, "Loading VAE") ||
			   strcasestr(l, "Loading model") || strcasestr(l, "Loading checkpoint") ||
			   strstr(l, "Model Loaded") || strstr(l, "Caching latents") ||
			   strstr(l, "Caching text embeddings") || strstr(l, "Bucket sizes")) {
			s->loading_seen = true;
			set_phase(s, SCAN_LOAD);
		}
	}

	/* Signatures: each counted at most once per line. */
	memcpy(before, s->sigs, sizeof before);
	if ((n = named_step(l)) >= 0 && n >= s->last_step) {
		s->last_step = n;
		s->step_named = true;
	}
	if ((k = strstr(l, "OOM during training step")) && strstr(k, "skipping batch")) {
		s->sigs[SIG_SKIPPED_BATCH_OOM]++;
		if (s->phase != SCAN_TRAIN && s->phase != SCAN_DONE) {
			s->train_started = true;
			s->phase = SCAN_TRAIN;
		}
		note_gpu_oom(s);
	}
	if ((k = strstr(l, "OOM during training step ")) && strstr(k, "times in a row")) {
		s->sigs[SIG_OOM_3_IN_ROW]++;
		note_gpu_oom(s);
	}
	if (strstr(l, "CUDA out of memory") || strstr(l, "OutOfMemoryError") ||
	    strstr(l, "CUDA error: out of memory") || strstr(l, "Allocation on device")) {
		s->sigs[SIG_CUDA_OOM]++;
		note_gpu_oom(s);
	}
	if (has_zero_bytes_free(l)) {
		s->sigs[SIG_ZERO_BYTES_FREE]++;
		note_gpu_oom(s);
	}
	if (strstr(l, "CUBLAS_STATUS_ALLOC_FAILED")) {
		s->sigs[SIG_CUBLAS_ALLOC_FAILED]++;
		note_gpu_oom(s);
	}
	if (strstr(l, "CUBLAS_STATUS_NOT_INITIALIZED")) {
		s->sigs[SIG_CUBLAS_NOT_INITIALIZED]++;
		note_gpu_oom(s);
	}
	if (has_killed(l, t))
		s->sigs[SIG_HOST_KILLED]++;
	if (has_memory_error(l))
		s->sigs[SIG_MEMORY_ERROR]++;
	if (strcasestr(l, "loss: nan") || strcasestr(l, "loss is nan") || strcasestr(l, "nan loss") ||
	    strcasestr(l, "loss=nan") || strcasestr(l, "nan detected"))
		s->sigs[SIG_NAN_LOSS]++;
	if (strstr(l, "FileNotFoundError") || strstr(l, "No such file"))
		s->sigs[SIG_FILE_NOT_FOUND]++;
	if (strcasestr(l, "nccl") && (strcasestr(l, "timeout") || strcasestr(l, "timed out")))
		s->sigs[SIG_NCCL_TIMEOUT]++;
	if (strstr(l, "Job stopped"))
		s->sigs[SIG_JOB_STOPPED]++;
	if (strstr(l, "#### IMPORTANT RESUMING FROM"))
		s->sigs[SIG_RESUMING]++;
	if ((k = strstr(l, "Error running job:"))) {
		s->sigs[SIG_ERROR_RUNNING_JOB]++;
		set_error(s, skip_space_esc(k + 18));
	} else if (is_exception_line(t, exc, sizeof exc)) {
		set_error(s, t);
		if (is_config_exception(exc) && !s->loading_seen && !s->train_started)
			s->sigs[SIG_CONFIG_ERROR]++;
	}
	scan_tables(s, l, before);
	if ((ts = log_timestamp(t)) >= 0) {
		if (s->train_ts < 0 && (s->train_started || s->phase == SCAN_TRAIN))
			s->train_ts = ts;
		if (oom_before < 0 && s->oom_phase >= 0 && s->oom_ts < 0)
			s->oom_ts = ts;
	}
	if (strstr(l, "allocate") || strstr(l, "capacity") || strstr(l, "free") || strstr(l, "Process "))
		scan_oom_numbers(s, l);
}

void scan_feed(struct scan *s, const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		char c = data[i];
		if (c == '\n' || c == '\r') {
			scan_line(s, s->line, s->len);
			s->len = 0;
		} else if (s->len < SCAN_LINE_CAP) {
			s->line[s->len++] = c ? c : '?';
		}
	}
}

void scan_finish(struct scan *s)
{
	if (s->len)
		scan_line(s, s->line, s->len);
	s->len = 0;
}

static json_t *mib_or_null(double v)
{
	return isnan(v) ? json_null() : json_integer((json_int_t)llround(v));
}

static json_t *ll_or_null(long long v)
{
	return v < 0 ? json_null() : json_integer(v);
}

/* The phase of the first GPU OOM: where the traceback says the trainer was when there is one (the
 * innermost known frame), else the marker phase when the OOM was first seen; -1 when no GPU OOM. */
static int oom_phase_of(const struct scan *s)
{
	if (s->oom_phase < 0 || s->trace_phase < 0)
		return s->oom_phase;
	if (s->trace_phase == SCAN_SAMPLE && !s->train_started)
		return SCAN_BASELINE_SAMPLE;
	return s->trace_phase;
}

json_t *scan_facts(const struct scan *s)
{
	int oom_phase = oom_phase_of(s);

	json_t *f = json_object(), *sigs = json_object(), *tail = json_array(), *oom;

	json_object_set_new(f, "phase", json_string(scan_phase_name(s->phase)));
	json_object_set_new(f, "oom_phase", oom_phase < 0 ? json_null() :
			    json_string(scan_phase_name((enum scan_phase)oom_phase)));
	json_object_set_new(f, "first_step", ll_or_null(s->first_step));
	json_object_set_new(f, "last_step", ll_or_null(s->last_step));
	/* A bar that went backwards (a restarted loop) must not report negative progress. */
	json_object_set_new(f, "steps_done", json_integer(s->first_step < 0 || s->last_step < s->first_step ? 0 :
			    s->last_step - s->first_step));
	json_object_set_new(f, "total_steps", ll_or_null(s->total_steps));
	/* Issue 16.4: a GPU OOM whose step only the progress bar gave: the trainer got further. */
	json_object_set_new(f, "last_step_estimated",
			    json_boolean(s->last_step >= 0 && !s->step_named && s->oom_phase >= 0));
	/* How long training had run when the GPU OOM came, by the log's own timestamps (a trainer that prints
	 * no step counter still tells an OOM after an hour from one in the first minute), null when unknown. */
	json_object_set_new(f, "train_s_before_oom", s->train_ts >= 0 && s->oom_ts >= s->train_ts ?
			    json_integer(s->oom_ts - s->train_ts) : json_null());
	for (int i = 0; i < SIG_COUNT; i++)
		if (s->sigs[i])
			json_object_set_new(sigs, sig_names[i], json_integer(s->sigs[i]));
	json_object_set_new(f, "signatures", sigs);
	json_object_set_new(f, "saved_path", s->saved_path ? json_string(s->saved_path) : json_null());
	if (oom_phase >= 0 || !isnan(s->tried_mib) || !isnan(s->total_mib) || s->nprocs) {
		json_t *procs = json_array();
		oom = json_object();
		json_object_set_new(oom, "tried_to_allocate_mib", mib_or_null(s->tried_mib));
		json_object_set_new(oom, "total_capacity_mib", mib_or_null(s->total_mib));
		json_object_set_new(oom, "free_mib", mib_or_null(s->free_mib));
		json_object_set_new(oom, "allocated_by_pytorch_mib", mib_or_null(s->alloc_mib));
		for (size_t i = 0; i < s->nprocs; i++)
			json_array_append_new(procs, json_pack("{s:I, s:I}", "pid", (json_int_t)s->procs[i].pid,
							       "used_mib", (json_int_t)llround(s->procs[i].used_mib)));
		json_object_set_new(oom, "processes", procs);
	} else {
		oom = json_null();
	}
	json_object_set_new(f, "oom", oom);
	json_object_set_new(f, "error", s->error ? json_string(s->error) : json_null());
	for (size_t i = 0; i < s->tail_count; i++)
		json_array_append_new(tail, json_string(s->tail[(s->tail_start + i) % SCAN_TAIL_LINES]));
	json_object_set_new(f, "log_tail", tail);
	return f;
}
