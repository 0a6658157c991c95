#!/usr/bin/env bash
# `make soak`: the chaos faults of tests/integration/it_chaos.c injected at random for SOAK_SECONDS
# (default 600) against one throwaway PostgreSQL, two rungd replicas and six simulated-GPU workers
# under a steady stream of jobs (some OOM and recover); then the same invariants and a summary.
# Loopback only; stops by itself. Env: SOAK_SECONDS, SOAK_SEED (repeat a run), SOAK_KEEP=1 (keep logs).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
SECS=${SOAK_SECONDS:-600}
case "$SECS" in '' | *[!0-9]*) echo "soak.sh: SOAK_SECONDS must be a number of seconds" >&2; exit 2 ;; esac
[ "$SECS" -ge 10 ] || { echo "soak.sh: SOAK_SECONDS must be at least 10" >&2; exit 2; }

NEED="bin/rungd bin/rung-worker bin/sim/nvidia-smi bin/sim/rung-sim-trainer bin/tests/it_chaos"
# shellcheck disable=SC2086
if ! make -s $NEED; then
	for b in $NEED; do [ -x "$b" ] || { echo "soak.sh: cannot build $b" >&2; exit 2; }; done
	echo "soak.sh: the build failed; soaking the binaries already built" >&2
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/rung-soak.XXXXXX") || exit 2
chmod 755 "$TMP"
# A private copy of the binaries: a rebuild in the tree during a long soak must not change (or
# briefly remove) what is being tested.
SNAP="$TMP/root"
mkdir -p "$SNAP/bin/sim" "$SNAP/bin/tests" "$SNAP/tests" &&
	cp bin/rungd bin/rung-worker "$SNAP/bin/" && cp bin/sim/nvidia-smi bin/sim/rung-sim-trainer "$SNAP/bin/sim/" &&
	cp bin/tests/it_chaos "$SNAP/bin/tests/" && cp tests/pg.sh "$SNAP/tests/" || exit 2
PGDATA_DIR="$TMP/pg"
PGPORT=""
KEEP=${SOAK_KEEP:-0}
cleanup() {
	trap - EXIT INT TERM
	[ -n "$PGPORT" ] && tests/pg.sh stop "$PGDATA_DIR" immediate >/dev/null 2>&1
	if [ "$KEEP" = 1 ]; then echo "soak.sh: logs kept in $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'echo "soak.sh: interrupted" >&2; cleanup; exit 130' INT TERM

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
	echo "soak.sh: could not start PostgreSQL:" >&2
	cat "$TMP/pg-start.log" >&2
	exit 1
fi
PGURL_BASE="postgresql://postgres@127.0.0.1:$PGPORT"
createdb -h 127.0.0.1 -p "$PGPORT" -U postgres soak || exit 1

echo "soak.sh: ${SECS}s of random faults (worker SIGKILL/SIGSTOP, rungd A/B SIGKILL, Postgres fast/immediate restart)"
LIMIT=$((SECS + 420)) # the run, then up to 4 min of draining and the checks
# Progress while it runs: the checks and the `#` figures, not the children's log dumps (in the log).
RUNG_CHAOS_SOAK_SECONDS="$SECS" RUNG_TEST_DATABASE_URL="$PGURL_BASE/soak" RUNG_TEST_PGDATA="$PGDATA_DIR" \
	RUNG_TEST_PGPORT="$PGPORT" RUNG_TEST_PGURL_BASE="$PGURL_BASE" RUNG_ROOT="$SNAP" TMPDIR="$TMP" \
	RUNG_TEST_TIMEOUT="$LIMIT" timeout -k 10 "$LIMIT" "$SNAP/bin/tests/it_chaos" 2>&1 </dev/null |
	tee "$TMP/soak.log" | grep --line-buffered -E '^(ok - |not ok - |#   )'
rc=${PIPESTATUS[0]}
bad=$(grep -c '^not ok - ' "$TMP/soak.log")
if [ "$rc" -ne 0 ] || [ "$bad" -ne 0 ]; then
	KEEP=1
	echo "soak.sh: FAILED (exit $rc, $bad failing checks); full log: $TMP/soak.log"
	[ "$rc" -eq 0 ] && rc=1
else
	echo "soak.sh: passed ($(grep -c '^ok - ' "$TMP/soak.log") checks)"
fi
exit "$rc"
