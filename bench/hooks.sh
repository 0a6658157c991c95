#!/usr/bin/env bash
# rung-bench's one --hook: runs bench/writes.sh (when BENCH_WRITES is not 0) and bench/cpu.sh around each
# timed window and merges what their `end` printed into one JSON object.
set -u
dir=$(cd "$(dirname "$0")" && pwd)
# cpu.sh begins last and ends first, so the others' psql and pg_waldump are outside its window.
hooks=("$dir/cpu.sh")
[ "${BENCH_WRITES:-1}" = 0 ] || hooks=("$dir/writes.sh" "${hooks[@]}")
case "${1:-}" in
begin) for h in "${hooks[@]}"; do "$h" begin || exit 1; done ;;
end) for ((k = ${#hooks[@]} - 1; k >= 0; k--)); do "${hooks[k]}" end "${2:-0}"; done | jq -cs 'add // {}' ;;
*) echo "usage: hooks.sh begin | end UNITS" >&2; exit 2 ;;
esac
