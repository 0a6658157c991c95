#!/usr/bin/env bash
# CPU time per unit (attempt, job, decision) over one timed window of `make bench`, per process: PostgreSQL
# (the postmaster, its live children, and the children that exited in the window through its cutime/cstime),
# rungd and the load generator (rung-bench, found as this hook's ancestor). rung-bench runs it around each
# window (--hook, through bench/hooks.sh): `cpu.sh begin`, then `cpu.sh end UNITS` prints one JSON object.
# Env (scripts/bench.sh sets it): PG_DIR (the cluster's data directory), RUNGD_PID, CPU_STATE (a file).
set -u
cmd=${1:-}
tck=$(getconf CLK_TCK)

# utime+stime (+cutime+cstime with $2 = all) of PID in clock ticks; 0 when it is gone
ticks() {
	[ -r "/proc/$1/stat" ] || { echo 0; return; }
	# the command name (field 2) may hold spaces: count fields after its closing parenthesis
	sed 's/^.*) //' "/proc/$1/stat" | awk -v all="${2:-}" '{ t = $12 + $13; if (all == "all") t += $14 + $15; print t }'
}
pg_ticks() {
	local pm t c
	pm=$(head -n 1 "$PG_DIR/postmaster.pid" 2>/dev/null) || { echo 0; return; }
	t=$(ticks "$pm" all)
	for c in $(ps -o pid= --ppid "$pm"); do t=$((t + $(ticks "$c"))); done
	echo "$t"
}
loadgen_pid() {
	local p=$$
	while [ "$p" -gt 1 ]; do
		case "$(cat "/proc/$p/comm" 2>/dev/null)" in rung-bench*) echo "$p"; return ;; esac
		p=$(sed 's/^.*) //' "/proc/$p/stat" | awk '{print $2}')
	done
	echo 0
}
snapshot() { echo "$(pg_ticks) $(ticks "${RUNGD_PID:-0}") $(ticks "$(loadgen_pid)")"; }

case "$cmd" in
begin) snapshot >"$CPU_STATE" ;;
end)
	units=${2:-0}
	read -r pg0 rd0 lg0 <"$CPU_STATE" || exit 1
	read -r pg1 rd1 lg1 <<<"$(snapshot)"
	awk -v u="$units" -v t="$tck" -v pg=$((pg1 - pg0)) -v rd=$((rd1 - rd0)) -v lg=$((lg1 - lg0)) 'BEGIN {
		u = u > 0 ? u : 1; k = 1000 / t / u
		printf "{\"cpu_postgres_ms\": %.3f, \"cpu_rungd_ms\": %.3f, \"cpu_loadgen_ms\": %.3f, \"cpu_total_ms\": %.3f}\n",
			pg * k, rd * k, lg * k, (pg + rd + lg) * k }'
	;;
*) echo "usage: cpu.sh begin | end UNITS" >&2; exit 2 ;;
esac
