#!/usr/bin/env bash
# `make fuzz`: builds rung's libFuzzer targets (tests/fuzz/fuzz_*.c, bodies in tests/fuzz/targets.h)
# with clang into build/fuzz/, seeds them with real inputs (the simulated trainer's logs, the configs
# and FACTS of tests/data), runs each for FUZZ_SECONDS, merges what is new into tests/fuzz/corpus/
# (small: at most FUZZ_MAX_FILES per target, each at most 64 KiB) and keeps every crash under
# tests/fuzz/crashes/TARGET/ (replayed by bin/tests/test_fuzz_replay). Exits 1 when a crash was found.
#   scripts/fuzz.sh [TARGET...]      targets: scan config facts submit (default: all)
# fuzz_submit also compiles server/api_jobs.c and server/http.c (build/sql.h from `make` needed) and
# links with unresolved symbols ignored: its path (api_jobs_check_submit, http_parse_id) is pure, so
# the database and event code they reference elsewhere is never called. It is skipped when it
# does not build (those files are being changed), the other targets still run.
# Env: FUZZ_SECONDS (60 per target), FUZZ_MAX_FILES (200), FUZZ_KEEP=1 (keep the work folder),
#      FUZZ_NO_MERGE=1 (leave tests/fuzz/corpus alone).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
SECONDS_PER=${FUZZ_SECONDS:-60}
MAX_FILES=${FUZZ_MAX_FILES:-200}
MAX_BYTES=65536
OUTDIR=build/fuzz
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(scan config facts submit)

say() { echo "fuzz: $*"; }

# clang 14 with the libFuzzer runtime (Debian: clang + libclang-rt-14-dev).
CLANG=""
for c in clang-14 clang; do command -v "$c" >/dev/null 2>&1 && CLANG=$c && break; done
fuzzer_ok() {
	[ -n "$CLANG" ] && echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n); int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' |
		"$CLANG" -x c -fsanitize=fuzzer - -o "$OUTDIR/.probe" >/dev/null 2>&1
}
mkdir -p "$OUTDIR"
if ! fuzzer_ok; then
	if [ "$(id -u)" = 0 ]; then
		say "installing clang and libclang-rt-14-dev"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >/dev/null && apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
		for c in clang-14 clang; do command -v "$c" >/dev/null 2>&1 && CLANG=$c && break; done
	fi
	if ! fuzzer_ok; then
		say "clang with -fsanitize=fuzzer is missing; as root: apt-get install -y clang libclang-rt-14-dev" >&2
		exit 2
	fi
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rung-fuzz.XXXXXX") || exit 2
cleanup() { [ "${FUZZ_KEEP:-0}" = 1 ] && say "work folder kept: $WORK" || rm -rf "$WORK"; }
trap cleanup EXIT

# ---- build: the project's pure modules compiled straight in, nothing that needs a database ----
SRC_LIB=(common/*.c recovery/*.c)
CFLAGS_F=(-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -Icommon -Irecovery -Iserver
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
PG_INC=$(pg_config --includedir 2>/dev/null || echo /usr/include/postgresql)
build() {
	local t=$1 o="$OUTDIR/obj" s b srcs=("${SRC_LIB[@]}") objs=() extra_ld=()
	if [ "$t" = submit ]; then
		srcs+=(server/api_jobs.c server/http.c build/sql.c)
		extra_ld=(-no-pie -Wl,--unresolved-symbols=ignore-all -levent -lpq)
	fi
	mkdir -p "$o"
	# Our own file under -Werror; others' sources only as they are (gcc-only pragmas warn in clang).
	"$CLANG" "${CFLAGS_F[@]}" -I"$PG_INC" -Wall -Wextra -Werror -Wmissing-prototypes -Wstrict-prototypes -Wvla \
		-c "tests/fuzz/fuzz_$t.c" -o "$o/fuzz_$t.o" || return 1
	for s in "${srcs[@]}"; do
		b="$o/$(echo "$s" | tr / _).o"
		objs+=("$b")
		if [ ! -f "$b" ] || [ "$s" -nt "$b" ] || [ -n "$(find common recovery server build/sql.h -name '*.h' -newer "$b" 2>/dev/null | head -1)" ]; then
			"$CLANG" "${CFLAGS_F[@]/-fsanitize=fuzzer,address,undefined/-fsanitize=fuzzer-no-link,address,undefined}" \
				-Ibuild -I"$PG_INC" -Wno-unknown-warning-option -c "$s" -o "$b" || return 1
		fi
	done
	"$CLANG" -fsanitize=fuzzer,address,undefined "$o/fuzz_$t.o" "${objs[@]}" -o "$OUTDIR/fuzz_$t" \
		"${extra_ld[@]}" -ljansson -lm
}

# ---- seeds: real inputs, regenerated each run (the corpus keeps only what adds coverage) ----
SIM=bin/sim/rung-sim-trainer
seed_sim_logs() {
	local dir=$1 cfgdir="$WORK/simcfg" n=0 cfg mib fail env_kv
	mkdir -p "$cfgdir"
	[ -x "$SIM" ] || { say "no $SIM (make all): scan seeds from tests/data only"; return 0; }
	# Short runs of the fixture configs so a whole log fits in 64 KiB.
	for cfg in tests/data/*.json; do
		python3 - "$cfg" "$cfgdir/$(basename "$cfg")" <<'EOF' 2>/dev/null || continue
import json, sys
c = json.load(open(sys.argv[1]))
p = c["config"]["process"][0]
p["train"]["steps"] = 24
if isinstance(p.get("sample"), dict):
    p["sample"]["sample_every"] = 10
json.dump(c, open(sys.argv[2], "w"))
EOF
	done
	for cfg in "$cfgdir"/*.json; do
		[ -f "$cfg" ] || continue
		for mib in 6000 12000 16000 20000 24564 30000 48000 80000; do
			for fail in none nan missing_file config_error nccl memory_error host_oom segv cublas_alloc cublas_init old_wording; do
				# The failure modes once per config, on a GPU the config loads on.
				[ "$fail" != none ] && [ "$mib" != 48000 ] && continue
				env_kv=()
				case $fail in
				none) ;;
				cublas_alloc) env_kv=(RUNG_SIM_CUBLAS=alloc) ;;
				cublas_init) env_kv=(RUNG_SIM_CUBLAS=init) ;;
				old_wording) env_kv=(RUNG_SIM_OLD_WORDING=1 RUNG_SIM_GPU_MIB=12000) ;;
				*) env_kv=(RUNG_SIM_FAIL=$fail) ;;
				esac
				n=$((n + 1))
				( env RUNG_SIM_STATE="$WORK/sim-none.json" RUNG_SIM_REGISTER=0 RUNG_SIM_RUN_DIR="$WORK/simrun$n" \
					RUNG_SIM_STEP_MS=0 RUNG_SIM_LOAD_MS=0 RUNG_SIM_SAMPLE_MS=0 RUNG_SIM_GPU_MIB=$mib \
					"${env_kv[@]}" timeout 20 "$SIM" "$cfg" >"$WORK/simlog$n" 2>&1; true ) 2>/dev/null
				# The first byte picks the chunking (targets.h): a few kinds per log.
				printf '\002' | cat - "$WORK/simlog$n" | head -c $MAX_BYTES >"$dir/sim$n-chunks"
				printf '\005' | cat - "$WORK/simlog$n" | head -c $MAX_BYTES >"$dir/sim$n-bytes-finish"
				cp "$WORK/simlog$n" "$WORK/facts-src$n.log"
				echo "$cfg" >"$WORK/facts-src$n.cfg"
			done
		done
	done
	say "seeded $n simulated trainer logs"
}

seed_scan() {
	local d=$1 f
	mkdir -p "$d"
	seed_sim_logs "$d"
	for f in tests/data/facts_*.json; do
		[ -f "$f" ] || continue
		python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1])).get("log_tail", [])))' "$f" \
			>"$d/tail-$(basename "$f" .json)" 2>/dev/null
	done
}

seed_config() {
	local d=$1 f
	mkdir -p "$d"
	for f in tests/data/*.json; do
		python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); sys.exit(0 if "config" in c else 1)' "$f" 2>/dev/null &&
			cp "$f" "$d/$(basename "$f")"
	done
	for f in tests/data/*.yaml; do
		python3 -c 'import json,sys,yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))' "$f" \
			>"$d/$(basename "$f" .yaml).json" 2>/dev/null || rm -f "$d/$(basename "$f" .yaml).json"
	done
}

seed_facts() {
	local d=$1 f i=0 log
	mkdir -p "$d"
	cp tests/data/facts_*.json "$d/" 2>/dev/null
	# FACTS of the simulated logs as rung builds them (rungctl classify --json prints them).
	[ -x bin/rungctl ] || return 0
	for log in "$WORK"/facts-src*.log; do
		[ -f "$log" ] || continue
		i=$((i + 1))
		bin/rungctl classify --json --config "$(cat "${log%.log}.cfg")" --exit-code 1 <"$log" 2>/dev/null |
			python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["facts"]))' >"$d/sim$i.json" 2>/dev/null ||
			rm -f "$d/sim$i.json"
	done
}

seed_submit() {
	local d=$1 f i=0
	mkdir -p "$d"
	for f in "$WORK/seeds/config"/*.json; do
		[ -f "$f" ] || continue
		i=$((i + 1))
		python3 - "$f" "$d/submit$i" <<'EOF' 2>/dev/null
import json, sys
c = json.load(open(sys.argv[1]))
bodies = [{"config": c},
          {"config": c, "name": "n", "priority": -5, "recovery": {"scale_up": False, "max_attempts": 3,
           "validate_steps": 50, "early_steps": 0, "quarantine_after": 1, "max_gpu_seconds": None}},
          {"config": c, "recovery": {"max_attempts": 1000, "max_env_retries": 100, "env_fault_window_s": 1}}]
for k, b in enumerate(bodies):
    json.dump(b, open(sys.argv[2] + "-" + str(k) + ".json", "w"))
EOF
	done
	printf '42' >"$d/id-42"
	printf '{"config": {}, "bogus": 1}' >"$d/unknown-key.json"
}

dict_of() { [ "$1" = scan ] || echo "-dict=tests/fuzz/json.dict"; }

maxlen_of() { case $1 in config) echo 16384 ;; *) echo $MAX_BYTES ;; esac; }

# ---- run ----
for t in "${TARGETS[@]}"; do
	[ -f "tests/fuzz/fuzz_$t.c" ] || { say "no target $t" >&2; exit 2; }
	say "building fuzz_$t"
	if ! build "$t"; then
		[ "$t" = submit ] || { say "build of fuzz_$t failed" >&2; exit 2; }
		say "fuzz_submit does not build now (server/api_jobs.c, server/http.c): skipped" >&2
		TARGETS=("${TARGETS[@]/submit/}")
	fi
done
set -- ; for t in "${TARGETS[@]}"; do [ -n "$t" ] && set -- "$@" "$t"; done; TARGETS=("$@")
# scan first: its simulated logs also seed facts.
for t in scan config facts submit; do "seed_$t" "$WORK/seeds/$t"; done

# Targets run side by side (one core each); each writes its new inputs to a scratch folder.
pids=()
for t in "${TARGETS[@]}"; do
	mkdir -p "tests/fuzz/corpus/$t" "$WORK/new/$t" "$WORK/art/$t" "$WORK/seeds/$t"
	say "running fuzz_$t for ${SECONDS_PER}s"
	# Cheaper allocations under ASan (the targets copy JSON a lot): no fill, short malloc stacks.
	ASAN_OPTIONS=detect_leaks=1:max_malloc_fill_size=0:malloc_context_size=8:quarantine_size_mb=64 UBSAN_OPTIONS=print_stacktrace=1 \
		"$OUTDIR/fuzz_$t" -max_total_time="$SECONDS_PER" -max_len="$(maxlen_of "$t")" -timeout=20 \
		-rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$WORK/art/$t/" $(dict_of "$t") \
		"$WORK/new/$t" "tests/fuzz/corpus/$t" "$WORK/seeds/$t" >"$WORK/$t.log" 2>&1 &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

found=0
for t in "${TARGETS[@]}"; do
	grep -E '^(stat::|Done|#[0-9]+ +DONE)' "$WORK/$t.log" | sed "s/^/fuzz: $t: /" | head -8
	arts=$(find "$WORK/art/$t" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) 2>/dev/null)
	if [ -n "$arts" ]; then
		found=1
		mkdir -p "tests/fuzz/crashes/$t"
		for a in $arts; do cp "$a" "tests/fuzz/crashes/$t/" && say "$t: CRASH kept as tests/fuzz/crashes/$t/$(basename "$a")"; done
		grep -E -A40 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|fuzz invariant broken' "$WORK/$t.log" | head -60 >&2
		cp "$WORK/$t.log" "tests/fuzz/crashes/$t/last-run.log" 2>/dev/null
	fi
	[ "${FUZZ_NO_MERGE:-0}" = 1 ] && continue
	# Merge: the smallest set covering old corpus, seeds and new finds; then the caps.
	mkdir -p "$WORK/merged/$t"
	ASAN_OPTIONS=detect_leaks=0 "$OUTDIR/fuzz_$t" -merge=1 -max_len="$(maxlen_of "$t")" -timeout=20 \
		"$WORK/merged/$t" "tests/fuzz/corpus/$t" "$WORK/seeds/$t" "$WORK/new/$t" >"$WORK/$t.merge.log" 2>&1 ||
		{ say "$t: merge failed, corpus left as it was"; tail -5 "$WORK/$t.merge.log"; continue; }
	find "$WORK/merged/$t" -type f -size +$((MAX_BYTES / 1024))k -delete
	ls -S -r "$WORK/merged/$t" | tail -n +$((MAX_FILES + 1)) | while read -r f; do rm -f "$WORK/merged/$t/$f"; done
	n=$(ls "$WORK/merged/$t" | wc -l)
	if [ "$n" -gt 0 ]; then
		rm -f "tests/fuzz/corpus/$t"/*
		cp "$WORK/merged/$t"/* "tests/fuzz/corpus/$t/"
	fi
	say "$t: corpus now $(ls "tests/fuzz/corpus/$t" | wc -l) files, $(du -sk "tests/fuzz/corpus/$t" | cut -f1) KiB"
done
[ $found = 0 ] && say "no crash" || say "crashes found: see tests/fuzz/crashes/ (bin/tests/test_fuzz_replay replays them)"
exit $found
