/* Unit tests for recovery/scan: realistic AI Toolkit log excerpts, one table row each, checked for
 * phase, OOM phase, steps, signatures, OOM numbers and error; every row is also fed one byte at a
 * time and must give the same facts. Edge cases: huge lines, binary bytes, \r redraws, no EOL, and the
 * formats of real logs (CRLF, ANSI colours, [rankN]: prefixes, other trainers' wordings). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scan.h"
#include "tap.h"
#include "jpath.h"
#include "util.h"

#define LOAD_LINES \
	"Running 1 job\n" \
	"#############################################\n" \
	"# Running job: my_lora\n" \
	"#############################################\n" \
	"Loading Flux model\n" \
	"Loading transformer\n" \
	"Quantizing transformer\n" \
	"Loading VAE\n" \
	"Loading text encoder\n" \
	"Model Loaded\n" \
	"Caching latents to disk\n" \
	"Caching latents to disk: 100%|##########| 20/20 [00:04<00:00,  4.61it/s]\n" \
	"Bucket sizes for /data/x:\n" \
	"1024x1024: 20 files\n"

#define NEW_OOM(alloc) \
	"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate " alloc ". GPU 0 has a total " \
	"capacity of 23.99 GiB of which 0 bytes is free. Process 1234 has 5.68 GiB memory in use. " \
	"Including non-PyTorch memory, this process has 17.9 GiB memory in use. Of the allocated memory " \
	"21.3 GiB is allocated by PyTorch, and 1.2 GiB is reserved by PyTorch but unallocated.\n"

#define TRACE "Traceback (most recent call last):\n  File \"run.py\", line 90, in <module>\n"

#define BAR(n) "my_lora:  " #n "%|#         | " #n "/2000 [00:10<10:00,  2.92it/s, lr: 1.0e-04 loss: 3.456e-01]"

struct sig_want {
	const char *name;
	int count;
};

struct scan_case {
	const char *name;
	const char *log;
	const char *phase;
	const char *oom_phase;       /* NULL: null */
	long long first_step, last_step, total_steps;   /* -1: null */
	struct sig_want sigs[6];     /* listed ones must match; all others must be 0 */
	long long tried, total, free_mib, alloc;        /* -2: oom is null; -1: field null */
	const char *error;           /* NULL: null */
	int nprocs;
};

static const struct scan_case cases[] = {
	{ "oom while loading (new wording)",
	  LOAD_LINES TRACE NEW_OOM("1.50 GiB") "Error running job: CUDA out of memory. Tried to allocate 1.50 GiB.\n",
	  "load", "load", -1, -1, -1, { { "cuda_oom", 2 }, { "zero_bytes_free", 1 }, { "error_running_job", 1 } },
	  1536, 24566, 0, 21811, "CUDA out of memory. Tried to allocate 1.50 GiB.", 1 },
	{ "oom during baseline sample (old wording)",
	  LOAD_LINES "Generating baseline samples before training\n"
	  "Generating Images:   0%|          | 0/2 [00:00<?, ?it/s]\n"
	  "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.99 GiB total capacity; "
	  "22.10 GiB already allocated; 512.00 KiB free; 22.50 GiB reserved in total by PyTorch)\n",
	  "baseline_sample", "baseline_sample", -1, -1, -1, { { "cuda_oom", 1 } },
	  20, 24566, 1, 22630, "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.99 GiB "
	  "total capacity; 22.10 GiB already allocated; 512.00 KiB free; 22.50 GiB reserved in total by PyTorch)", 0 },
	{ "oom in early training: skipped batches then abort",
	  LOAD_LINES "Skipping first sample due to config setting\n"
	  BAR(0) "\r" BAR(1) "\r" BAR(2) "\n"
	  "# OOM during training step, skipping batch 1/3 #\n"
	  "# OOM during training step, skipping batch 2/3 #\n"
	  "# OOM during training step, skipping batch 3/3 #\n"
	  "OOM during training step 3 times in a row, aborting training\n"
	  "Error running job: OOM during training step 3 times in a row, aborting training\n",
	  "train", "train", 0, 2, 2000, { { "skipped_batch_oom", 3 }, { "oom_3_in_row", 2 }, { "error_running_job", 1 } },
	  -1, -1, -1, -1, "OOM during training step 3 times in a row, aborting training", 0 },
	{ "oom while sampling after training started",
	  LOAD_LINES BAR(0) "\r" BAR(5) "\n"
	  "Generating Images:  50%|#####     | 1/2 [00:03<00:03,  3.10s/it]\n"
	  TRACE NEW_OOM("2.00 GiB"),
	  "sample", "sample", 0, 5, 2000, { { "cuda_oom", 1 }, { "zero_bytes_free", 1 } },
	  2048, 24566, 0, 21811, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
	  "total capacity of 23.99 GiB of which 0 bytes is free. Process 1234 has 5.68 GiB memory in use. Including "
	  "non-PyTorch memory, this process has 17.9 GiB memory in use. Of the allocated memory 21.3 GiB is "
	  "allocated by PyTorch, and 1.2 GiB is reserved by PyTorch but unallocated.", 1 },
	{ "oom while saving",
	  LOAD_LINES BAR(250) "\nSaving at step 250\nRuntimeError: CUDA error: out of memory\n",
	  "save", "save", 250, 250, 2000, { { "cuda_oom", 1 } },
	  -1, -1, -1, -1, "RuntimeError: CUDA error: out of memory", 0 },
	{ "cublas alloc failure at load, other processes",
	  LOAD_LINES "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n"
	  "Process 77 has 3.00 GiB memory in use. Process 88 has 1024.00 MiB memory in use.\n",
	  "load", "load", -1, -1, -1, { { "cublas_alloc_failed", 1 } },
	  -1, -1, -1, -1, "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", 2 },
	{ "cublas not initialized, old 0 bytes free",
	  LOAD_LINES "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED\n"
	  "(GPU 0; 23.99 GiB total capacity; 23.00 GiB already allocated; 0 bytes free; 23.5 GiB reserved)\n",
	  "load", "load", -1, -1, -1, { { "cublas_not_initialized", 1 }, { "zero_bytes_free", 1 } },
	  -1, 24566, 0, 23552, "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED", 0 },
	{ "host oom killer",
	  LOAD_LINES BAR(3) "\nKilled\n",
	  "train", NULL, 3, 3, 2000, { { "host_killed", 1 } }, -2, 0, 0, 0, NULL, 0 },
	{ "python MemoryError is not a GPU oom",
	  LOAD_LINES "MemoryError\n", "load", NULL, -1, -1, -1, { { "memory_error", 1 } }, -2, 0, 0, 0, "MemoryError", 0 },
	{ "nan loss",
	  LOAD_LINES "my_lora:   1%|          | 12/2000 [00:10<10:00, lr: 1.0e-04 loss: nan]\n"
	  "ValueError: NaN loss detected\n",
	  "train", NULL, 12, 12, 2000, { { "nan_loss", 2 } }, -2, 0, 0, 0, "ValueError: NaN loss detected", 0 },
	{ "missing dataset",
	  LOAD_LINES "FileNotFoundError: [Errno 2] No such file or directory: '/data/x'\n",
	  "load", NULL, -1, -1, -1, { { "file_not_found", 1 } }, -2, 0, 0, 0,
	  "FileNotFoundError: [Errno 2] No such file or directory: '/data/x'", 0 },
	{ "nccl timeout",
	  LOAD_LINES BAR(40) "\n[E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout\n",
	  "train", NULL, 40, 40, 2000, { { "nccl_timeout", 1 } }, -2, 0, 0, 0, NULL, 0 },
	{ "config error before loading",
	  "Running 1 job\nError running job: Cannot set both gradient_accumulation and gradient_accumulation_steps\n"
	  TRACE "ValueError: Cannot set both gradient_accumulation and gradient_accumulation_steps\n",
	  "load", NULL, -1, -1, -1, { { "config_error", 1 }, { "error_running_job", 1 } }, -2, 0, 0, 0,
	  "ValueError: Cannot set both gradient_accumulation and gradient_accumulation_steps", 0 },
	{ "successful run",
	  LOAD_LINES "Generating baseline samples before training\n"
	  "Generating Images: 100%|##########| 2/2 [00:06<00:00,  3.10s/it]\n"
	  BAR(0) "\r" BAR(1) "\r" BAR(2000) "\n"
	  "Generating Images: 100%|##########| 2/2 [00:06<00:00,  3.10s/it]\n"
	  "Saved to /out/my_lora.safetensors\n========================================\nResult:\n"
	  " - 1 completed jobs\n========================================\n",
	  "done", NULL, 0, 2000, 2000, { { "", 0 } }, -2, 0, 0, 0, NULL, 0 },
	{ "resumed run",
	  "Running 1 job\n# Running job: my_lora\nLoading transformer\n"
	  "#### IMPORTANT RESUMING FROM /out/my_lora/my_lora_000000500.safetensors ####\n"
	  "my_lora:  25%|##        | 500/2000 [00:00<?, ?it/s]\r"
	  "my_lora:  26%|##        | 520/2000 [00:30<10:00,  2.92it/s, lr: 1.0e-04 loss: 3.4e-01]",
	  "train", NULL, 500, 520, 2000, { { "resuming", 1 } }, -2, 0, 0, 0, NULL, 0 },
	{ "ctrl-c",
	  LOAD_LINES BAR(7) "\nJob stopped\n",
	  "train", NULL, 7, 7, 2000, { { "job_stopped", 1 } }, -2, 0, 0, 0, NULL, 0 },
	{ "nothing recognisable",
	  "hello\nworld", "start", NULL, -1, -1, -1, { { "", 0 } }, -2, 0, 0, 0, NULL, 0 },
	/* Formats of real logs (tests/data/logs): Windows line endings, tqdm redraws with a traceback
	 * glued to the bar, ANSI colours, interleaved ranks, other trainers' wordings and markers. */
	{ "windows line endings",
	  "Running 1 job\r\n# Running job: my_lora\r\nLoading transformer\r\n"
	  "my_lora:   0%|          | 0/2000 [00:00<?, ?it/s]\r\n"
	  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\r\n",
	  "train", "train", 0, 0, 2000, { { "cuda_oom", 1 } }, 1024, -1, -1, -1,
	  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.", 0 },
	{ "tqdm redraw with the traceback glued to the bar",
	  "Running 1 job\n# Running job: my_lora\n"
	  "my_lora:   0%|          | 0/2000 [00:00<?, ?it/s]\r"
	  "my_lora:   0%|          | 1/2000 [00:02<?, 2.0s/it, lr: 1.0e-04 loss: 3.4e-01]Traceback (most recent call last):\n"
	  "  File \"/ai-toolkit/jobs/process/BaseSDTrainProcess.py\", line 2147, in run\n"
	  "    loss_dict = self.hook_train_loop(batch_list)\n"
	  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n",
	  "train", "train", 0, 1, 2000, { { "cuda_oom", 1 } }, 2048, -1, -1, -1,
	  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", 0 },
	{ "ansi colours",
	  "\x1b[32mRunning 1 job\x1b[0m\n\x1b[1m# Running job: my_lora\x1b[0m\n\x1b[33mLoading \x1b[1mtransformer\x1b[0m\n"
	  "\x1b[31mtorch.OutOfMemoryError: CUDA out of \x1b[1mmemory\x1b[0m. Tried to allocate 1.00 GiB.\x1b[0m\n",
	  "load", "load", -1, -1, -1, { { "cuda_oom", 1 } }, 1024, -1, -1, -1,
	  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.", 0 },
	{ "interleaved ranks",
	  "[rank0]: Traceback (most recent call last):\n[rank1]: Traceback (most recent call last):\n"
	  "[rank0]:   File \"train.py\", line 9, in <module>\n[rank1]:   File \"train.py\", line 9, in <module>\n"
	  "[rank0]:     loss.backward()\n[rank1]:     loss.backward()\n"
	  "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 18.00 MiB.\n"
	  "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 18.00 MiB.\n",
	  "start", "train", -1, -1, -1, { { "cuda_oom", 2 } }, 18, -1, -1, -1,
	  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 18.00 MiB.", 0 },
	{ "kernel oom killer, older wording: one signature per line",
	  "Out of memory: Kill process 10192 (python) score 398 or sacrifice child\n"
	  "Killed process 10192, UID 1801, (python) total-vm:7804984kB, anon-rss:2460052kB, file-rss:284kB\n",
	  "start", NULL, -1, -1, -1, { { "host_killed", 2 } }, -2, 0, 0, 0, NULL, 0 },
	{ "kernel oom killer line (dmesg)",
	  "[Tue Apr 14 16:07:00 2026] Out of memory: Killed process 1067104 (python)\n",
	  "start", NULL, -1, -1, -1, { { "host_killed", 1 } }, -2, 0, 0, 0, NULL, 0 },
	{ "accelerate: the child died with SIGKILL",
	  "loading vae: <All keys matched successfully>\n"
	  "subprocess.CalledProcessError: Command '['python', 'train_network.py']' died with <Signals.SIGKILL: 9>.\n",
	  "load", NULL, -1, -1, -1, { { "host_killed", 1 } }, -2, 0, 0, 0,
	  "subprocess.CalledProcessError: Command '['python', 'train_network.py']' died with <Signals.SIGKILL: 9>.", 0 },
	{ "dataloader out of shared memory",
	  "RuntimeError: DataLoader worker (pid 3855) is killed by signal: Bus error. It is possible that dataloader's "
	  "workers are out of shared memory. Please try to raise your shared memory limit.\n",
	  "start", NULL, -1, -1, -1, { { "host_shm", 1 } }, -2, 0, 0, 0,
	  "RuntimeError: DataLoader worker (pid 3855) is killed by signal: Bus error. It is possible that dataloader's "
	  "workers are out of shared memory. Please try to raise your shared memory limit.", 0 },
	{ "busy gpu",
	  "torch.AcceleratorError: CUDA error: CUDA-capable device(s) is/are busy or unavailable\n",
	  "start", NULL, -1, -1, -1, { { "gpu_busy", 1 } }, -2, 0, 0, 0,
	  "torch.AcceleratorError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", 0 },
	{ "pytorch 0.x wording, glued to a bar",
	  "Train (loss 63.31) epoch 1:   3%|#         | 1/29 [00:23<11:10, 23.93s/it]THCudaCheck FAIL "
	  "file=THCStorage.cu line=66 error=2 : out of memory\n"
	  "RuntimeError: cuda runtime error (2) : out of memory at THCStorage.cu:66\n",
	  "train", "train", 1, 1, 29, { { "cuda_oom", 2 } }, -1, -1, -1, -1,
	  "RuntimeError: cuda runtime error (2) : out of memory at THCStorage.cu:66", 0 },
	{ "kohya: oom while generating sample images",
	  "steps:  10%|#         | 200/2000 [10:00<90:00,  3.00s/it, avr_loss=0.1]\n"
	  "generating sample images at step / サンプル画像生成 ステップ: 200\n"
	  "Traceback (most recent call last):\n  File \"train_network.py\", line 990, in train\n"
	  "    self.sample_images(accelerator, args, epoch, global_step)\n"
	  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\n",
	  "sample", "sample", 200, 200, 2000, { { "cuda_oom", 1 } }, 1024, -1, -1, -1,
	  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.", 0 },
	{ "the traceback names the baseline sample",
	  "Running 1 job\nError running job: CUDA error: out of memory\n" TRACE
	  "  File \"/ai-toolkit/jobs/process/BaseSDTrainProcess.py\", line 1994, in run\n    self.sample(self.step_num)\n",
	  "load", "baseline_sample", -1, -1, -1, { { "cuda_oom", 1 }, { "error_running_job", 1 } }, -1, -1, -1, -1,
	  "CUDA error: out of memory", 0 },
};

static json_t *facts_of(const char *log, size_t len, int bytewise)
{
	struct scan *s = scan_new();
	json_t *f;
	if (bytewise) {
		for (size_t i = 0; i < len; i++)
			scan_feed(s, log + i, 1);
	} else {
		scan_feed(s, log, len);
	}
	scan_finish(s);
	f = scan_facts(s);
	scan_free(s);
	return f;
}

static long long int_or_minus1(json_t *v)
{
	return json_is_integer(v) ? json_integer_value(v) : -1;
}

static void check_case(const struct scan_case *c)
{
	json_t *f = facts_of(c->log, strlen(c->log), 0), *g = facts_of(c->log, strlen(c->log), 1);
	json_t *sigs = json_object_get(f, "signatures"), *oom = json_object_get(f, "oom");
	char name[256];
	int listed = 0;

	snprintf(name, sizeof name, "%s: phase", c->name);
	TAP_STR_EQ(json_string_value(json_object_get(f, "phase")), c->phase, name);
	snprintf(name, sizeof name, "%s: oom_phase", c->name);
	TAP_STR_EQ(json_string_value(json_object_get(f, "oom_phase")), c->oom_phase, name);
	snprintf(name, sizeof name, "%s: first/last/total steps", c->name);
	TAP_OK(int_or_minus1(json_object_get(f, "first_step")) == c->first_step &&
	       int_or_minus1(json_object_get(f, "last_step")) == c->last_step &&
	       int_or_minus1(json_object_get(f, "total_steps")) == c->total_steps, name);
	for (size_t i = 0; i < ARRAY_LEN(c->sigs) && c->sigs[i].name && c->sigs[i].name[0]; i++) {
		snprintf(name, sizeof name, "%s: signature %s", c->name, c->sigs[i].name);
		TAP_INT_EQ(json_integer_value(json_object_get(sigs, c->sigs[i].name)), c->sigs[i].count, name);
		listed++;
	}
	snprintf(name, sizeof name, "%s: no other signatures", c->name);
	TAP_INT_EQ(json_object_size(sigs), listed, name);
	snprintf(name, sizeof name, "%s: oom numbers", c->name);
	if (c->tried == -2) {
		TAP_OK(json_is_null(oom), name);
	} else {
		TAP_OK(json_is_object(oom) &&
		       int_or_minus1(json_object_get(oom, "tried_to_allocate_mib")) == c->tried &&
		       int_or_minus1(json_object_get(oom, "total_capacity_mib")) == c->total &&
		       int_or_minus1(json_object_get(oom, "free_mib")) == c->free_mib &&
		       int_or_minus1(json_object_get(oom, "allocated_by_pytorch_mib")) == c->alloc &&
		       (int)json_array_size(json_object_get(oom, "processes")) == c->nprocs, name);
	}
	snprintf(name, sizeof name, "%s: error", c->name);
	TAP_STR_EQ(json_string_value(json_object_get(f, "error")), c->error, name);
	snprintf(name, sizeof name, "%s: byte-at-a-time gives the same facts", c->name);
	TAP_OK(json_equal(f, g), name);
	json_decref(f);
	json_decref(g);
}

static void test_oom_processes(void)
{
	const char *log = NEW_OOM("1.50 GiB") "Process 99 has 512.00 MiB memory in use.\n";
	json_t *f = facts_of(log, strlen(log), 0);
	json_t *procs = json_object_get(json_object_get(f, "oom"), "processes");
	TAP_INT_EQ(json_array_size(procs), 2, "oom: both named processes recorded, not 'this process'");
	TAP_INT_EQ(json_integer_value(json_object_get(json_array_get(procs, 0), "pid")), 1234, "oom: first pid");
	TAP_INT_EQ(json_integer_value(json_object_get(json_array_get(procs, 0), "used_mib")), 5816, "oom: 5.68 GiB in MiB");
	TAP_INT_EQ(json_integer_value(json_object_get(json_array_get(procs, 1), "used_mib")), 512, "oom: 512 MiB");
	json_decref(f);
}

static void test_huge_line(void)
{
	size_t n = 5 * 1024 * 1024;
	char *big = xmalloc(n + 64);
	json_t *f, *tail;
	memset(big, 'x', n);
	strcpy(big + n, "\nCUDA out of memory\n");
	f = facts_of(big, strlen(big), 0);
	tail = json_object_get(f, "log_tail");
	TAP_INT_EQ(json_array_size(tail), 2, "huge line: kept as one tail line");
	TAP_INT_EQ(strlen(json_string_value(json_array_get(tail, 0))), SCAN_TAIL_BYTES, "huge line: truncated to 1000 bytes");
	TAP_INT_EQ(json_integer_value(json_object_get(json_object_get(f, "signatures"), "cuda_oom")), 1,
		   "huge line: the next line still scanned");
	json_decref(f);
	free(big);
}

static void test_binary_and_utf8(void)
{
	static const char log[] = "\x00\xff\xfe garbage \xc3\x28 \xe2\x96\x88 ok\nCUDA out of memory";
	json_t *f = facts_of(log, sizeof log - 1, 0);
	json_t *tail = json_object_get(f, "log_tail");
	char *dump;
	TAP_INT_EQ(json_array_size(tail), 2, "binary: two lines, last without newline");
	TAP_STR_EQ(json_string_value(json_array_get(tail, 0)), "??? garbage ?( \xe2\x96\x88 ok",
		   "binary: bad bytes become ?, good UTF-8 kept");
	TAP_INT_EQ(json_integer_value(json_object_get(json_object_get(f, "signatures"), "cuda_oom")), 1,
		   "binary: line without newline at EOF scanned at finish");
	dump = json_dumps(f, 0);
	TAP_OK(dump != NULL, "binary: facts serialise");
	free(dump);
	json_decref(f);
}

static void test_tail_cap_and_bars(void)
{
	struct scan *s = scan_new();
	json_t *f, *tail;
	char line[64];
	for (int i = 0; i < 500; i++) {
		snprintf(line, sizeof line, "line %d\n", i);
		scan_feed(s, line, strlen(line));
	}
	for (int i = 0; i < 300; i++) {
		snprintf(line, sizeof line, "job:  1%%|  | %d/300 [00:01<00:10]\r", i);
		scan_feed(s, line, strlen(line));
	}
	TAP_INT_EQ(scan_step(s), 299, "bars: step follows \\r redraws");
	TAP_INT_EQ(scan_total_steps(s), 300, "bars: total steps");
	TAP_STR_EQ(scan_phase_name(scan_phase(s)), "train", "bars: phase train");
	f = scan_facts(s);
	tail = json_object_get(f, "log_tail");
	TAP_INT_EQ(json_array_size(tail), SCAN_TAIL_LINES, "tail: capped at 200 lines");
	TAP_STR_EQ(json_string_value(json_array_get(tail, 198)), "line 499", "tail: last plain line kept");
	TAP_STR_EQ(json_string_value(json_array_get(tail, 199)), "job:  1%|  | 299/300 [00:01<00:10]",
		   "tail: redraws of one bar collapse to the newest");
	json_decref(f);
	scan_free(s);
}

/* Issue 16.4: the step of an intermittent OOM is the last step the trainer's own lines name before
 * the error (skip, abort and error lines, "Saving at step N"), not the last progress bar drawn (tqdm
 * redraws only now and then); when no line names it, the bar's step is kept and marked an estimate. */
static void test_oom_step_marker(void)
{
	const char *marked = LOAD_LINES BAR(0) "\r" BAR(90) "\n"
		"# OOM during training step 103, skipping batch 1/3 #\n"
		"# OOM during training step 103, skipping batch 2/3 #\n"
		"# OOM during training step 103, skipping batch 3/3 #\n"
		"OOM during training step 3 times in a row, aborting training\n"
		"Error running job: OOM during training step 3 times in a row, aborting training\n";
	const char *unmarked = LOAD_LINES BAR(0) "\r" BAR(90) "\n"
		"# OOM during training step, skipping batch 1/3 #\n"
		"OOM during training step 3 times in a row, aborting training\n";
	const char *saved = LOAD_LINES BAR(0) "\r" BAR(90) "\nSaving at step 100\n"
		"# OOM during training step, skipping batch 1/3 #\n";
	json_t *f = facts_of(marked, strlen(marked), 0), *g = facts_of(marked, strlen(marked), 1);

	TAP_INT_EQ(jpath_int(f, "last_step", -1), 103, "issue 16.4: the step named by the skip lines (103), not the bar (90)");
	TAP_OK(json_is_false(json_object_get(f, "last_step_estimated")), "issue 16.4: a step the trainer named is no estimate");
	TAP_INT_EQ(jpath_int(f, "first_step", -1), 0, "issue 16.4: first_step stays the first bar reading");
	TAP_INT_EQ(jpath_int(f, "signatures.skipped_batch_oom", 0), 3, "skip lines that name the step still count as skips");
	TAP_INT_EQ(jpath_int(f, "signatures.oom_3_in_row", 0), 2, "'3 times in a row' is not read as step 3");
	TAP_OK(json_equal(f, g), "issue 16.4: byte-at-a-time gives the same facts");
	json_decref(f);
	json_decref(g);
	f = facts_of(unmarked, strlen(unmarked), 0);
	TAP_INT_EQ(jpath_int(f, "last_step", -1), 90, "near miss: no line names the step: the last bar reading");
	TAP_OK(json_is_true(json_object_get(f, "last_step_estimated")), "issue 16.4: the facts say it is an estimate");
	json_decref(f);
	f = facts_of(saved, strlen(saved), 0);
	TAP_INT_EQ(jpath_int(f, "last_step", -1), 100, "issue 16.4: Saving at step 100 is a step marker after the bar");
	TAP_OK(json_is_false(json_object_get(f, "last_step_estimated")), "a Saving marker is exact");
	json_decref(f);
}

/* FACTS.saved_path: the file the last save line named (AI Toolkit's "Saved to", kohya's and musubi's
 * "saving checkpoint:"), not a line that names no file. */
static void test_saved_path(void)
{
	static const struct {
		const char *log, *want;
	} cases[] = {
		{ "Saving at step 500\nSaved to /w/jobs/7/output/my_lora/my_lora_000000500.safetensors\n"
		  "Saved to /w/jobs/7/output/my_lora/my_lora.safetensors  \r\n",
		  "/w/jobs/7/output/my_lora/my_lora.safetensors" },
		{ "[my_lora] Saved to output/my_lora/my_lora.safetensors\n", "output/my_lora/my_lora.safetensors" },
		{ "INFO saving checkpoint: D:/Output/run\\run-000002.safetensors   train_network.py:1020\n",
		  "D:/Output/run\\run-000002.safetensors" },
		{ "Saved to /a/b.safetensors\nSaved to disk\n", "/a/b.safetensors" },
		{ "Saved to disk\n", NULL },
		{ "Saved to model.ckpt\n", "model.ckpt" },
		{ "Loading model\n", NULL },
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		json_t *f = facts_of(cases[i].log, strlen(cases[i].log), (int)(i % 2));
		const json_t *v = json_object_get(f, "saved_path");
		if (cases[i].want)
			TAP_STR_EQ(json_string_value(v), cases[i].want, "saved_path: the last file a save line named");
		else
			TAP_OK(json_is_null(v), "saved_path: null when no line named a file");
		json_decref(f);
	}
}

/* FACTS.train_s_before_oom: a trainer that prints no step counter (fairseq-style loggers) still dates its
 * lines; the seconds from the first dated training line to the dated line of the first GPU OOM. */
static void test_train_s_before_oom(void)
{
	const char *dated = "2022-08-20 23:35:25 | INFO | loss scale: 4\n"
		"2022-08-20 23:35:27 | INFO | metaseq.trainer | begin training epoch 1\n"
		"2022-08-21 00:29:47 | WARNING | OOM: Ran out of memory with exception: CUDA out of memory. Tried to allocate 1 GiB\n"
		"2022-08-21 00:30:00 | INFO | later\n";
	const char *load_oom = "2024-03-01T10:00:00 INFO Loading model\n"
		"2024-03-01T10:20:00 torch.OutOfMemoryError: CUDA out of memory.\n";
	const char *undated_oom = "2022-08-20 23:35:27 | INFO | begin training epoch 1\n"
		"RuntimeError: CUDA out of memory.\n2022-08-21 00:29:47 | INFO | after\n";
	json_t *f = facts_of(dated, strlen(dated), 0), *g = facts_of(dated, strlen(dated), 1);

	TAP_INT_EQ(jpath_int(f, "train_s_before_oom", -1), 3260, "train_s_before_oom: 23:35:27 to 00:29:47 across midnight");
	TAP_OK(json_equal(f, g), "train_s_before_oom: byte-at-a-time gives the same facts");
	json_decref(f);
	json_decref(g);
	f = facts_of(load_oom, strlen(load_oom), 0);
	TAP_OK(json_is_null(json_object_get(f, "train_s_before_oom")), "near miss: an OOM while loading has no training time");
	json_decref(f);
	f = facts_of(undated_oom, strlen(undated_oom), 0);
	TAP_OK(json_is_null(json_object_get(f, "train_s_before_oom")),
	       "near miss: an undated OOM line is not dated by a later line");
	json_decref(f);
	{
		/* a line that starts like a date but holds no time of day (an id, a version) dates nothing */
		const char *not_time = "2022-08-20 23:35:27 | INFO | begin training epoch 1\n"
			"2022-08-21 99:99:99 RuntimeError: CUDA out of memory.\n";
		f = facts_of(not_time, strlen(not_time), 0);
		TAP_OK(json_is_null(json_object_get(f, "train_s_before_oom")),
		       "near miss: 99:99:99 is no time of day: the OOM line is undated");
		json_decref(f);
	}
}

int main(void)
{
	test_saved_path();
	test_train_s_before_oom();
	for (size_t i = 0; i < ARRAY_LEN(cases); i++)
		check_case(&cases[i]);
	test_oom_processes();
	test_huge_line();
	test_binary_and_utf8();
	test_tail_cap_and_bars();
	test_oom_step_marker();
	scan_free(NULL);
	TAP_OK(1, "scan_free(NULL) is a no-op");
	return TAP_DONE();
}
