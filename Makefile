# rung: one Makefile for rungd, rung-worker, rungctl, the simulated GPU tools and the tests.
# Modules are found by wildcard: drop a .c into a folder and it is built into that folder's binary.
#   make            build everything (installs missing Debian -dev packages first)
#   make run        local Postgres under var/, migrate, rungd on 127.0.0.1:8080 and one worker
#   make test       unit + integration tests against a throwaway Postgres; ends with "N passed, N failed"
#   make test SANITIZE=address,undefined    the same under ASan/UBSan
#   make RUNG_VERSION=v1.2.3    the version the binaries report (default: git describe, else VERSION, else unknown)

CC       ?= cc
SANITIZE ?=
OPT      ?= -O2
PG_INC   := $(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)

CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -g $(OPT) \
	-Wall -Wextra -Werror -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes -Wvla -fno-common \
	-Wno-format-nonliteral -MMD -MP -Icommon -Irecovery -Ibuild -I$(PG_INC)
LDLIBS   := -lpq -levent -ljansson -lcurl -lyaml -lm
ifneq ($(SANITIZE),)
CFLAGS_BASE += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS  += -fsanitize=$(SANITIZE)
endif
CFLAGS := $(CFLAGS_BASE) $(EXTRA_CFLAGS)

B := build
COMMON_SRC := $(wildcard common/*.c)
RECOVERY_SRC := $(wildcard recovery/*.c)
SERVER_SRC := $(filter-out server/main.c,$(wildcard server/*.c))
WORKER_SRC := $(filter-out worker/main.c,$(wildcard worker/*.c))
CLI_SRC    := $(filter-out cli/main.c,$(wildcard cli/*.c))
SIM_SRC    := $(wildcard sim/*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
IT_SRC     := $(wildcard tests/integration/it_*.c)
IT_LIB_SRC := $(filter-out $(IT_SRC),$(wildcard tests/integration/*.c))
BENCH_SRC  := $(wildcard bench/*.c)

obj = $(patsubst %.c,$(B)/%.o,$(1))

LIBCOMMON := $(B)/libcommon.a
LIBRECOVERY := $(B)/librecovery.a
LIBSERVER := $(B)/libserver.a
LIBWORKER := $(B)/libworker.a
LIBCLI    := $(B)/libcli.a
LIBIT     := $(B)/libit.a

BINS := bin/rungd bin/rung-worker bin/rungctl \
	$(patsubst sim/%.c,bin/sim/%,$(SIM_SRC))
UNIT_BINS := $(patsubst tests/unit/%.c,bin/tests/%,$(UNIT_SRC))
IT_BINS   := $(patsubst tests/integration/%.c,bin/tests/%,$(IT_SRC))
BENCH_BINS := $(patsubst bench/%.c,bin/bench/%,$(BENCH_SRC))

.PHONY: all deps run test unit tests bench bench-recovery clean valgrind fmt fuzz soak FORCE
all: $(BINS)

# Install what a fresh Debian machine lacks, once; a stamp keeps it from running again.
$(B)/.deps:
	@scripts/deps.sh
	@mkdir -p $(B) && touch $@
deps: $(B)/.deps

# SQL lives in sql/ (queries), sql/functions/ (functions and triggers, applied after the migrations) and
# migrations/ (the schema); it is embedded at build time so the binaries need no files beside them.
# The script rewrites sql.h only when it changes (a new query), so sql.h may stay older than the SQL: a stamp
# records the run, or every later make would embed and compile again.
$(B)/sql.stamp: scripts/embed-sql.sh $(wildcard sql/*.sql) $(wildcard sql/functions/*.sql) \
		$(wildcard migrations/*.sql) | $(B)/.deps
	@mkdir -p $(B)
	@scripts/embed-sql.sh $(B)/sql.c $(B)/sql.h
	@touch $@
$(B)/sql.c $(B)/sql.h: $(B)/sql.stamp
	@test -f $@ || scripts/embed-sql.sh $(B)/sql.c $(B)/sql.h   # deleted since the stamp: embed again

# The build's version (scripts/version.sh: RUNG_VERSION, git describe, VERSION, or "unknown") as a header the
# script runs for at every make but rewrites only when the version changed: only common/version.c includes it,
# so a new version compiles that file again and relinks; the same version compiles nothing.
$(B)/version_gen.h: FORCE | $(B)/.deps
	@mkdir -p $(B)
	@scripts/version.sh $@
$(B)/common/version.o: $(B)/version_gen.h
FORCE:

$(B)/%.o: %.c | $(B)/.deps $(B)/sql.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIBCOMMON): $(call obj,$(COMMON_SRC))
	@rm -f $@ && ar rcs $@ $^
$(LIBRECOVERY): $(call obj,$(RECOVERY_SRC))
	@rm -f $@ && ar rcs $@ $^
$(LIBSERVER): $(call obj,$(SERVER_SRC)) $(B)/build/sql.o
	@rm -f $@ && ar rcs $@ $^
$(LIBWORKER): $(call obj,$(WORKER_SRC)) | $(B)/.deps
	@rm -f $@ && ar rcs $@ $^
$(LIBCLI): $(call obj,$(CLI_SRC)) | $(B)/.deps
	@rm -f $@ && ar rcs $@ $^
$(LIBIT): $(call obj,$(IT_LIB_SRC)) | $(B)/.deps
	@rm -f $@ && ar rcs $@ $^

$(B)/build/sql.o: $(B)/sql.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

bin/rungd: $(B)/server/main.o $(LIBSERVER) $(LIBRECOVERY) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
bin/rung-worker: $(B)/worker/main.o $(LIBWORKER) $(LIBRECOVERY) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
# rungctl links the recovery library (rungctl classify runs the service's own code path), never server/.
bin/rungctl: $(B)/cli/main.o $(LIBCLI) $(LIBRECOVERY) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
bin/sim/%: $(B)/sim/%.o $(LIBRECOVERY) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
bin/tests/test_%: $(B)/tests/unit/test_%.o $(LIBCLI) $(LIBSERVER) $(LIBWORKER) $(LIBRECOVERY) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
bin/tests/it_%: $(B)/tests/integration/it_%.o $(LIBIT) $(LIBRECOVERY) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
bin/bench/%: $(B)/bench/%.o $(LIBRECOVERY) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The objects of the binaries built by pattern (sim tools, tests, bench) are kept: as intermediates make
# would delete them after a first build and compile them again at the next (their .d files name them).
.SECONDARY: $(call obj,$(SIM_SRC) $(UNIT_SRC) $(IT_SRC) $(BENCH_SRC))

run: all
	@scripts/run.sh

unit: $(UNIT_BINS)

tests: all $(UNIT_BINS) $(IT_BINS)

test: all $(UNIT_BINS) $(IT_BINS)
	@tests/run.sh

bench: all $(BENCH_BINS)
	@scripts/bench.sh

# The memory model's benchmark (issue 12): in-process fleet, three ways, two memory laws; no Postgres.
bench-recovery: bin/bench/recovery-model
	@mkdir -p bench/results
	@bin/bench/recovery-model --out bench/results/recovery.md

# libFuzzer targets (clang) over the request validator, the trainer-log scanner and the ladder's config
# rewriting; FUZZ_SECONDS per target (default 60). Crashes found are kept under tests/fuzz/crashes as regressions.
fuzz: all
	@scripts/fuzz.sh

# Faults at random (worker/rungd kills, Postgres restarts, stalls, two replicas) for SOAK_SECONDS, then a summary.
soak: all bin/tests/it_chaos
	@scripts/soak.sh

valgrind: all $(UNIT_BINS)
	@tests/valgrind.sh $(UNIT_BINS)

clean:
	rm -rf $(B) bin

-include $(shell find $(B) -name '*.d' 2>/dev/null)
