#!/usr/bin/env bash
# rung-bench's one --hook: runs bench/writes.sh (unless BENCH_WRITES is 0) and bench/cpu.sh around each timed
# window and merges what their `end` printed into one JSON object.
set -u
dir=$(cd "$(dirname "$0")" && pwd)
# cpu.sh begins last and ends first, so the others' psql and pg_waldump are outside its window; it begins even
# when another hook's begin failed (its end would otherwise read a stale state)
hooks=("$dir/cpu.sh")
[ "${BENCH_WRITES:-1}" = 0 ] || hooks=("$dir/writes.sh" "${hooks[@]}")
case "${1:-}" in
begin)
	rc=0
	for h in "${hooks[@]}"; do "$h" begin || rc=1; done
	exit "$rc"
	;;
end) for ((k = ${#hooks[@]} - 1; k >= 0; k--)); do "${hooks[k]}" end "${2:-0}"; done | jq -cs 'add // {}' ;;
*) echo "usage: hooks.sh begin | end UNITS" >&2; exit 2 ;;
esac
