#!/usr/bin/env bash
# CPU time per unit (attempt, job, decision) of one timed `make bench` window: PostgreSQL (postmaster, live
# children, and children that exited in the window through its cutime/cstime), rungd and the load generator.
# `begin` before the window; `end UNITS` after it prints one JSON object ({} when it cannot tell). Env: PG_DIR,
# CPU_STATE (a file), RUNGD_PID (scripts/bench.sh); RUNG_BENCH_PID (rung-bench sets it for its hooks).
set -u
cmd=${1:-}
tck=$(getconf CLK_TCK)

# utime+stime (+cutime+cstime with $2 = all) of PID in clock ticks; 0 when it is gone (even mid-read)
ticks() {
	# the command name (field 2) may hold spaces: count fields after its closing parenthesis
	sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null |
		awk -v all="${2:-}" '{ t = $12 + $13; if (all == "all") t += $14 + $15 } END { print t + 0 }'
}
pg_ticks() {
	local pm t c v
	pm=$(head -n 1 "$PG_DIR/postmaster.pid" 2>/dev/null) || { echo 0; return; }
	t=$(ticks "$pm" all)
	for c in $(ps -o pid= --ppid "$pm"); do
		v=$(ticks "$c")
		t=$((t + ${v:-0}))
	done
	echo "$t"
}
# rung-bench's pid: RUNG_BENCH_PID, else the nearest ancestor named rung-bench*, else none (0)
loadgen_pid() {
	local p=$$
	[ -n "${RUNG_BENCH_PID:-}" ] && { echo "$RUNG_BENCH_PID"; return; }
	while [ "$p" -gt 1 ]; do
		case "$(cat "/proc/$p/comm" 2>/dev/null)" in rung-bench*) echo "$p"; return ;; esac
		p=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{ print $2 + 0 }')
		[ -n "$p" ] || break
	done
	echo 0
}
snapshot() { echo "$(pg_ticks) $(ticks "${RUNGD_PID:-0}") $(ticks "$(loadgen_pid)")"; }

case "$cmd" in
begin) snapshot >"$CPU_STATE" ;;
end)
	units=${2:-0}
	# a window without its begin (or that completed nothing) has no per-unit figure
	{ read -r pg0 rd0 lg0 <"$CPU_STATE"; } 2>/dev/null || { echo '{}'; exit 0; }
	rm -f "$CPU_STATE"
	read -r pg1 rd1 lg1 <<<"$(snapshot)"
	for v in "$pg0" "$rd0" "$lg0" "$pg1" "$rd1" "$lg1"; do
		case "$v" in '' | *[!0-9]*) echo '{}'; exit 0 ;; esac
	done
	[ "$units" -gt 0 ] 2>/dev/null || { echo '{}'; exit 0; }
	awk -v u="$units" -v t="$tck" -v pg=$((pg1 - pg0)) -v rd=$((rd1 - rd0)) -v lg=$((lg1 - lg0)) 'BEGIN {
		k = 1000 / t / u
		printf "{\"cpu_postgres_ms\": %.3f, \"cpu_rungd_ms\": %.3f, \"cpu_loadgen_ms\": %.3f, \"cpu_total_ms\": %.3f}\n",
			pg * k, rd * k, lg * k, (pg + rd + lg) * k }'
	;;
*) echo "usage: cpu.sh begin | end UNITS" >&2; exit 2 ;;
esac
