#!/usr/bin/env bash
# The test runner behind `make test`: one throwaway PostgreSQL for the whole run, then the structure
# check (scripts/check-structure.sh), every bin/tests/test_* (unit) and bin/tests/it_* (integration),
# each with a fresh database of its own and a timeout. Counts the TAP-like `ok - ` / `not ok - `
# lines; ends with `N passed, N failed`.
#   tests/run.sh [PATTERN...]   run only the binaries whose name contains one of the patterns
# Env: RUNG_TEST_TIMEOUT (seconds per binary, default 300), RUNG_TEST_VERBOSE=1 (print every log),
#      RUNG_TEST_SLOW (deadline factor for volume-bound waits; 3 under SANITIZE), RUNG_SKIP_BROWSER=1.
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
TIMEOUT=${RUNG_TEST_TIMEOUT:-300}
# --- sanitizers: `make test SANITIZE=...` puts SANITIZE in our environment; ASan+UBSan run slower ---
[ -n "${SANITIZE:-}" ] && [ -z "${RUNG_TEST_TIMEOUT:-}" ] && TIMEOUT=${RUNG_TEST_SANITIZE_TIMEOUT:-900}
VERBOSE=${RUNG_TEST_VERBOSE:-0}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rung-test.XXXXXX") || exit 2
chmod 755 "$TMP"
PGDATA_DIR="$TMP/pg"
PGPORT=""
CHILD=""
cleanup() {
	trap - EXIT INT TERM
	if [ -n "$CHILD" ]; then # the test binary running now (timeout forwards TERM to it)
		kill -TERM "$CHILD" 2>/dev/null
		wait "$CHILD" 2>/dev/null
	fi
	[ -n "$PGPORT" ] && tests/pg.sh stop "$PGDATA_DIR" immediate >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted" >&2; cleanup; exit 130' INT TERM

# A port nobody listens on, below the ephemeral range (32768-60999: an outgoing connection's local
# port there passes the probe but fails the bind); pg_ctl fails when another process takes it first,
# so retry a few times.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for try in 1 2 3 4 5; do
	p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
	port_free "$p" || continue
	if tests/pg.sh start "$PGDATA_DIR" "$p" >"$TMP/pg-start.log" 2>&1; then
		PGPORT=$p
		break
	fi
done
if [ -z "$PGPORT" ]; then
	echo "run.sh: could not start PostgreSQL:" >&2
	cat "$TMP/pg-start.log" >&2
	[ -f "$PGDATA_DIR/server.log" ] && tail -n 30 "$PGDATA_DIR/server.log" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
PGURL_BASE="postgresql://postgres@127.0.0.1:$PGPORT"

# --- sanitizer reports: every sanitized process (test binaries and the rungd, workers, trainers and
# tools they start) writes its ASan/LSan report to a file in SAN_DIR instead of stderr. UBSan (a
# separate runtime with GCC) ignores log_path and writes to stderr, which for children is a log in
# the harness's temp dir: under SANITIZE the harness keeps those dirs (RUNG_TEST_KEEP) and
# san_collect greps them. Each report becomes a `not ok` line in LOG, so a report fails the binary
# it came from even when every process exited 0. ---
SAN_DIR="$TMP/sanitizer"
mkdir -p "$SAN_DIR"
# A 32 MB quarantine (ASan's default is 256 MB) keeps freed memory from counting as the worker's RSS in
# the tests that bound it; use-after-free is still caught on everything freed within those 32 MB.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$SAN_DIR/report:log_exe_name=1:quarantine_size_mb=32"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1"
[ -n "${SANITIZE:-}" ] && export RUNG_TEST_KEEP=1
# Instrumented binaries move data several times slower: tests that wait for a volume of work to
# finish (not for a timing they assert) stretch their deadlines by this factor (harness h_slow()).
[ -n "${SANITIZE:-}" ] && export RUNG_TEST_SLOW=${RUNG_TEST_SLOW:-3}
san_collect() {
	local f d
	for f in "$SAN_DIR"/report.*; do
		[ -f "$f" ] || continue
		echo "not ok - sanitizer report from ${f##*/report.}:" >>"$1"
		cat "$f" >>"$1"
		rm -f "$f"
	done
	for d in "$TMP"/*/; do
		case "$d" in "$PGDATA_DIR/" | "$SAN_DIR/") continue ;; esac
		grep -rlE 'runtime error:|ERROR: (AddressSanitizer|LeakSanitizer)' "$d" 2>/dev/null | while read -r f; do
			echo "not ok - sanitizer report in ${f#"$TMP"/}:" >>"$1"
			grep -E -A 30 'runtime error:|ERROR: (AddressSanitizer|LeakSanitizer)' "$f" | head -n 60 >>"$1"
		done
		[ -n "${SANITIZE:-}" ] && rm -rf "$d"
	done
}

# Binaries to run: unit first, then integration, filtered by the patterns given.
bins=()
for b in bin/tests/test_* bin/tests/it_*; do
	[ -x "$b" ] || continue
	if [ $# -gt 0 ]; then
		keep=0
		for pat in "$@"; do case "$(basename "$b")" in *"$pat"*) keep=1 ;; esac; done
		[ $keep = 1 ] || continue
	fi
	bins+=("$b")
done

passed=0
failed=0
failed_bins=()
n=0

# The structure check (scripts/check-structure.sh: no include or call circle in server/ and recovery/,
# recovery/ pure, one CREATE per SQL function): one more "binary", run first; it reads build/'s objects.
run_structure=0
if [ $# -eq 0 ]; then run_structure=1; else
	for pat in "$@"; do case structure in *"$pat"*) run_structure=1 ;; esac; done
fi
if [ $run_structure = 1 ]; then
	log="$TMP/structure.log"
	scripts/check-structure.sh "$ROOT" >"$log" 2>&1
	rc=$?
	ok=$(grep -c '^ok - ' "$log")
	bad=$(grep -c '^not ok - ' "$log")
	[ "$rc" -ne 0 ] && [ "$bad" -eq 0 ] && bad=1
	passed=$((passed + ok))
	failed=$((failed + bad))
	if [ "$bad" -gt 0 ]; then
		failed_bins+=(check-structure)
		echo "=== check-structure: output ==="
		cat "$log"
		echo "=== FAIL check-structure: $ok passed, $bad failed"
	else
		[ "$VERBOSE" = 1 ] && cat "$log"
		echo "PASS check-structure: $ok passed"
	fi
fi
for b in "${bins[@]}"; do
	n=$((n + 1))
	name=$(basename "$b")
	db="t${n}_$(echo "$name" | tr -c 'a-zA-Z0-9_\n' '_')"
	log="$TMP/$name.log"
	if ! createdb -h 127.0.0.1 -p "$PGPORT" -U postgres "$db" >"$log" 2>&1; then
		echo "not ok - $name: createdb failed"
		cat "$log"
		failed=$((failed + 1))
		failed_bins+=("$name")
		continue
	fi
	start=$(date +%s)
	RUNG_TEST_DATABASE_URL="$PGURL_BASE/$db" RUNG_TEST_PGDATA="$PGDATA_DIR" RUNG_TEST_PGPORT="$PGPORT" \
		RUNG_TEST_PGURL_BASE="$PGURL_BASE" RUNG_ROOT="$ROOT" TMPDIR="$TMP" RUNG_TEST_TIMEOUT="$TIMEOUT" \
		timeout -k 10 "$TIMEOUT" "$b" >"$log" 2>&1 </dev/null &
	CHILD=$!
	# `wait` (unlike a foreground child) lets the INT/TERM trap run at once.
	wait "$CHILD"
	rc=$?
	CHILD=""
	san_collect "$log" # sanitizer reports (see SAN_DIR)
	secs=$(($(date +%s) - start))
	ok=$(grep -c '^ok - ' "$log")
	bad=$(grep -c '^not ok - ' "$log")
	extra=""
	if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
		bad=1
		if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then extra=" (timed out after ${TIMEOUT}s)"
		else extra=" (crashed or exited $rc without a failing check)"; fi
	elif [ "$rc" -eq 0 ] && [ "$ok" -eq 0 ] && [ "$bad" -eq 0 ]; then
		bad=1
		extra=" (ran no checks)"
	fi
	passed=$((passed + ok))
	failed=$((failed + bad))
	if [ "$bad" -gt 0 ]; then
		failed_bins+=("$name")
		echo "=== $name: output ==="
		cat "$log"
		echo "=== FAIL $name: $ok passed, $bad failed$extra, ${secs}s"
	else
		[ "$VERBOSE" = 1 ] && cat "$log"
		echo "PASS $name: $ok passed, ${secs}s"
	fi
	dropdb -h 127.0.0.1 -p "$PGPORT" -U postgres --force "$db" >/dev/null 2>&1
done

# The browser test of the web pages (headless Chromium driven by playwright-core): a script with
# its own Postgres, rungd and workers; it prints the same ok / not ok lines. RUNG_SKIP_BROWSER=1 skips it.
run_browser=0
if [ "${RUNG_SKIP_BROWSER:-0}" != 1 ]; then
	if [ $# -eq 0 ]; then run_browser=1; else
		for pat in "$@"; do case browser in *"$pat"*) run_browser=1 ;; esac; done
	fi
fi
if [ $run_browser = 1 ]; then
	log="$TMP/browser.log"
	start=$(date +%s)
	timeout -k 10 "$TIMEOUT" scripts/browser-test.sh >"$log" 2>&1 </dev/null &
	CHILD=$!
	wait "$CHILD"
	rc=$?
	CHILD=""
	san_collect "$log" # sanitizer reports (see SAN_DIR)
	secs=$(($(date +%s) - start))
	ok=$(grep -c '^ok - ' "$log")
	bad=$(grep -c '^not ok - ' "$log")
	[ "$rc" -ne 0 ] && [ "$bad" -eq 0 ] && bad=1
	passed=$((passed + ok))
	failed=$((failed + bad))
	if [ "$bad" -gt 0 ]; then
		failed_bins+=(browser-test)
		echo "=== browser-test: output ==="
		cat "$log"
		echo "=== FAIL browser-test: $ok passed, $bad failed, ${secs}s"
	else
		echo "PASS browser-test: $ok passed, ${secs}s"
	fi
fi

if [ ${#bins[@]} -eq 0 ] && [ $run_browser = 0 ] && [ $run_structure = 0 ]; then
	echo "run.sh: no test binaries matched${*:+ ($*)}"
fi
if [ ${#failed_bins[@]} -gt 0 ]; then
	echo "failing: ${failed_bins[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
