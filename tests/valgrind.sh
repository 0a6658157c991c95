#!/usr/bin/env bash
# `make valgrind`: runs the unit test binaries given under valgrind (memcheck, full leak check,
# any error fails), each with a fresh database on one throwaway PostgreSQL, as tests/run.sh does.
#   tests/valgrind.sh bin/tests/test_a bin/tests/test_b ...
# Ends with `N passed, N failed` (binaries, not checks).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
command -v valgrind >/dev/null || { echo "valgrind.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
TIMEOUT=${RUNG_TEST_TIMEOUT:-1200} # test_fuzz_replay alone takes ~7 minutes under memcheck on 2 cores

# Valgrind cannot run ASan binaries, and the Makefile does not rebuild when SANITIZE changes: after
# `make test SANITIZE=...` run `make clean` first. test_sim runs the bin/sim tools: `make all` builds them.
for b in "$@"; do
	if grep -qa __asan_init "$b" 2>/dev/null; then
		echo "valgrind.sh: $b is built with -fsanitize=address; run \`make clean && make all && make valgrind\`" >&2
		echo "0 passed, $# failed"
		exit 1
	fi
done
if [[ " $* " == *test_sim* ]] && [ ! -x bin/sim/rung-sim-trainer ]; then
	echo "valgrind.sh: bin/sim/ tools are missing (test_sim runs them): run \`make all\` first" >&2
	echo "0 passed, $# failed"
	exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rung-vg.XXXXXX") || exit 2
chmod 755 "$TMP"
PGDATA_DIR="$TMP/pg"
PGPORT=""
cleanup() {
	trap - EXIT INT TERM
	[ -n "$PGPORT" ] && tests/pg.sh stop "$PGDATA_DIR" immediate >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for try in 1 2 3 4 5; do
	p=$((20000 + (RANDOM * 32768 + RANDOM) % 12000))
	port_free "$p" || continue
	if tests/pg.sh start "$PGDATA_DIR" "$p" >"$TMP/pg-start.log" 2>&1; then PGPORT=$p; break; fi
done
[ -n "$PGPORT" ] || { cat "$TMP/pg-start.log" >&2; echo "0 passed, 1 failed"; exit 1; }
PGURL_BASE="postgresql://postgres@127.0.0.1:$PGPORT"

passed=0
failed=0
n=0
for b in "$@"; do
	n=$((n + 1))
	name=$(basename "$b")
	db="vg${n}_$(echo "$name" | tr -c 'a-zA-Z0-9_\n' '_')"
	log="$TMP/$name.log"
	start=$(date +%s)
	createdb -h 127.0.0.1 -p "$PGPORT" -U postgres "$db" >/dev/null 2>&1
	RUNG_TEST_DATABASE_URL="$PGURL_BASE/$db" RUNG_TEST_PGDATA="$PGDATA_DIR" RUNG_TEST_PGPORT="$PGPORT" \
		RUNG_TEST_PGURL_BASE="$PGURL_BASE" RUNG_ROOT="$ROOT" TMPDIR="$TMP" \
		timeout -k 10 "$TIMEOUT" valgrind -q --leak-check=full --show-leak-kinds=definite,indirect \
		--errors-for-leak-kinds=definite,indirect --error-exitcode=1 "$b" >"$log" 2>&1 </dev/null
	rc=$?
	if [ "$rc" -eq 0 ] && ! grep -q '^not ok - ' "$log"; then
		passed=$((passed + 1))
		echo "PASS $name, $(($(date +%s) - start))s"
	else
		failed=$((failed + 1))
		cat "$log"
		echo "FAIL $name (exit $rc), $(($(date +%s) - start))s"
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
