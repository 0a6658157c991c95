#!/usr/bin/env bash
# The `capped` scenario of `make bench` (scripts/bench.sh): what an owner at its running-job limit
# (migration 020) costs the others' claims. A queue of BENCH_CAPPED_BIG (100,000) jobs of one owner in
# front of 1,000 of five others; pgbench times a claim round of 16 GPUs (rung_claim_batch) and one
# GPU's claim (rung_claim), each rolled back, with no limit set (the baseline, measured in the same
# run), with the big owner capped (max_running 0): the round then reads the other owners' queues
# (jobs_claim_owner, migration 021) instead of passing over the capped owner's jobs, and with a fair
# share (rungd --fair-share, no limit: the running counts and each owner's head). "pool capped"
# (migration 034): the big owner paused in pool default alone (tokens.pool_limits), which the round
# reads as the same capped list, by rung_owners_capped_in. Two more settings
# keep the big owner's jobs off these GPUs (migration 026): "floor", as it was done before worker
# pools (the jobs need 90,000 MiB, the GPUs have 80,000: every claim passes over them), and "other
# pool" (the jobs are in pool side, which a second worker serves: the claim reads the default
# pool's queue only). "borrowing" (migration 028): bench-w's own pool (own) is empty and it borrows
# from default, so each round first serves its empty pool, then borrows default's jobs: against
# "other pool", what borrowing adds to a round (the one-GPU claim asks the borrowed pool directly,
# rung_claim_in). Prints a table of medians with each setting's ratio to no limit and writes
# RESULTS/capped.json.
# Env (scripts/bench.sh sets it): PGBENCH, PG_PORT, DB, RESULTS, RUNS, SECS, REV; BENCH_CAPPED_BIG.
set -u
BIG=${BENCH_CAPPED_BIG:-100000}
PSQL() { "$(dirname "$PGBENCH")/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" "$@"; }
ms() { # SCRIPT FAIR: pgbench's average latency in ms over SECS seconds, one client, JIT off as in
	# rungd's sessions (server/db.c: a fair share's plan estimate passes jit_above_cost, 59 ms a round)
	PGOPTIONS="-c jit=off" "$PGBENCH" -n -M prepared -h 127.0.0.1 -p "$PG_PORT" -U postgres -c 1 -T "$SECS" -D fair="$2" -f "$1" "$DB" 2>&1 |
		sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p'
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

PSQL -v nbig="$BIG" -f bench/capped_fill.sql >/dev/null || exit 1
lines=""
for setting in "no limit" "capped" "pool capped" "fair share" "floor" "other pool" "borrowing"; do
	fair=false
	case "$setting" in
	capped) PSQL -c "UPDATE tokens SET max_running = 0 WHERE name = 'bench-big'" || exit 1 ;;
	"pool capped") PSQL -c "UPDATE tokens SET max_running = NULL, pool_limits = '{\"default\": 0}' WHERE name = 'bench-big'" ||
		exit 1 ;;
	"fair share") PSQL -c "UPDATE tokens SET max_running = NULL, pool_limits = NULL WHERE name = 'bench-big'" || exit 1
		fair=true ;;
	floor) PSQL -c "UPDATE jobs SET constraints = '{\"min_gpu_memory_mib\": 90000}' WHERE owner = 'bench-big'" \
		-c "VACUUM ANALYZE jobs" || exit 1 ;;
	"other pool") PSQL -c "UPDATE jobs SET constraints = '{}', pool = 'side' WHERE owner = 'bench-big'" \
		-c "SELECT rung_worker_join('{\"name\": \"bench-side\", \"host\": \"h\", \"pool\": \"side\", \"gpus\": [{\"uuid\": \"S-1\", \"memory_total_mib\": 80000}]}', NULL, false)" \
		-c "VACUUM ANALYZE jobs" >/dev/null || exit 1 ;;
	borrowing) PSQL -c "UPDATE workers SET pool = 'own', borrow = '{default}' WHERE name = 'bench-w'" >/dev/null || exit 1 ;;
	esac
	for what in round one; do
		vals=""
		for run in $(seq 1 "$RUNS"); do
			v=$(ms "bench/capped_$what.sql" "$fair")
			[ -n "$v" ] || { echo "capped.sh: pgbench failed ($setting, $what)" >&2; exit 1; }
			vals="$vals $v"
		done
		med=$(tr ' ' '\n' <<<"$vals" | grep . | median)
		lines="$lines$(jq -nc --arg s "$setting" --arg w "$what" --argjson m "$med" --arg runs "$vals" \
			'{setting: $s, claim: $w, latency_ms: $m, runs: ($runs | split(" ") | map(select(. != "") | tonumber))}')"$'\n'
	done
done
rows=$(jq -sc . <<<"$lines")
lat() { jq -r --arg s "$1" --arg w "$2" '.[] | select(.setting == $s and .claim == $w) | .latency_ms' <<<"$rows"; }
echo
echo "== capped ==  ($BIG jobs of one owner in front; median of $RUNS runs of ${SECS}s, ms per claim; ratio to no limit)"
printf '%-22s %10s %10s %8s %11s %8s %10s %8s %10s %8s %10s %8s %10s %8s\n' claim "no limit" capped ratio "pool capped" \
	ratio "fair share" ratio floor ratio "other pool" ratio borrowing ratio
ratios="{}"
for what in round one; do
	a=$(lat "no limit" "$what")
	b=$(lat capped "$what")
	pc=$(lat "pool capped" "$what")
	f=$(lat "fair share" "$what")
	fl=$(lat floor "$what")
	op=$(lat "other pool" "$what")
	bo=$(lat borrowing "$what")
	rb=$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", b / a }')
	rpc=$(awk -v a="$a" -v b="$pc" 'BEGIN { printf "%.2f", b / a }')
	rf=$(awk -v a="$a" -v b="$f" 'BEGIN { printf "%.2f", b / a }')
	rfl=$(awk -v a="$a" -v b="$fl" 'BEGIN { printf "%.2f", b / a }')
	rop=$(awk -v a="$a" -v b="$op" 'BEGIN { printf "%.2f", b / a }')
	rbo=$(awk -v a="$a" -v b="$bo" 'BEGIN { printf "%.2f", b / a }')
	label=$([ "$what" = round ] && echo "round of 16 GPUs" || echo "one GPU (rung_claim)")
	printf '%-22s %10s %10s %7sx %11s %7sx %10s %7sx %10s %7sx %10s %7sx %10s %7sx\n' "$label" "$a" "$b" "$rb" "$pc" "$rpc" \
		"$f" "$rf" "$fl" "$rfl" "$op" "$rop" "$bo" "$rbo"
	ratios=$(jq -c --arg w "$what" --argjson rb "$rb" --argjson rpc "$rpc" --argjson rf "$rf" --argjson rfl "$rfl" \
		--argjson rop "$rop" --argjson rbo "$rbo" \
		'. + {($w): {capped: $rb, pool_capped: $rpc, fair_share: $rf, floor: $rfl, other_pool: $rop, borrowing: $rbo}}' \
		<<<"$ratios")
done
jq -n --arg rev "$REV" --argjson big "$BIG" --argjson rows "$rows" --argjson ratios "$ratios" \
	'{scenario: "capped", git_rev: $rev, capped_jobs_in_front: $big, rows: $rows, over_no_limit: $ratios}' \
	>"$RESULTS/capped.json"
