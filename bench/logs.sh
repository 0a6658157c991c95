#!/usr/bin/env bash
# The `logs` scenario of `make bench` (scripts/bench.sh): what the trainer logs (migration 022) cost
# Postgres. 16 pgbench clients, each a worker sending its attempt's log a chunk at a time through
# rung_log_put (the fence, the look-up of where the log ends, the insert), against the baseline
# measured in the same run: the same row inserted with nothing else. A chunk is one line of a
# trainer's output (BENCH_LOG_BYTES, 300). Prints chunks/s, WAL per chunk and the ratio, and writes
# RESULTS/logs.json. Env (scripts/bench.sh sets it): PGBENCH, PG_PORT, DB, RESULTS, RUNS, SECS, REV.
set -u
BYTES=${BENCH_LOG_BYTES:-300}
BODY=$(printf 'flux_lora:  42%%|████▏     | 1260/3000 [21:05<29:07,  1.00s/it, lr: 1.0e-04 loss: 3.112e-01]%*s\n' 200 '' |
	head -c "$BYTES")
PSQL() { "$(dirname "$PGBENCH")/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres -d "$DB" "$@"; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# SCRIPT: "tps wal_bytes_per_chunk" of one run of SECS seconds at 16 clients, JIT off as in rungd's sessions
run() {
	local lsn0 out n lsn1
	PSQL -c "TRUNCATE attempt_logs, bench_log_bare" || return 1
	lsn0=$(PSQL -c "SELECT pg_current_wal_insert_lsn()") || return 1
	out=$(PGOPTIONS="-c jit=off" "$PGBENCH" -n -M prepared -h 127.0.0.1 -p "$PG_PORT" -U postgres -c 16 -j 2 -T "$SECS" \
		-D pos=0 -D bytes="$BYTES" -D body="$BODY" -f "$1" "$DB" 2>&1) || { echo "$out" >&2; return 1; }
	n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
	lsn1=$(PSQL -c "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$lsn0')") || return 1
	echo "$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out") $(awk -v w="$lsn1" -v n="$n" 'BEGIN { printf "%.0f", n ? w / n : 0 }')"
}

PSQL -f bench/logs_fill.sql >/dev/null || exit 1
lines=""
for what in put bare; do
	tps="" wal=""
	for r in $(seq 1 "$RUNS"); do
		v=$(run "bench/logs_$what.sql") || { echo "logs.sh: pgbench failed ($what)" >&2; exit 1; }
		tps="$tps ${v% *}"
		wal="$wal ${v#* }"
	done
	mt=$(tr ' ' '\n' <<<"$tps" | grep . | median | awk '{ printf "%.0f", $1 }')
	mw=$(tr ' ' '\n' <<<"$wal" | grep . | median)
	lines="$lines$(jq -nc --arg w "$what" --argjson t "$mt" --argjson b "$mw" --arg runs "$tps" \
		'{statement: $w, chunks_per_s: $t, wal_bytes_per_chunk: $b, runs: ($runs | split(" ") | map(select(. != "") | tonumber))}')"$'\n'
done
PSQL -c "DROP TABLE bench_log_bare" || exit 1
rows=$(jq -sc . <<<"$lines")
get() { jq -r --arg w "$1" --arg k "$2" '.[] | select(.statement == $w) | .[$k]' <<<"$rows"; }
ratio=$(awk -v a="$(get put chunks_per_s)" -v b="$(get bare chunks_per_s)" 'BEGIN { printf "%.2f", a / b }')
echo
echo "== logs ==  (16 clients, chunks of $BYTES bytes; median of $RUNS runs of ${SECS}s; ratio to the bare insert)"
printf '%-34s %12s %14s\n' statement "chunks/s" "WAL B/chunk"
printf '%-34s %12s %14s\n' "rung_log_put (fence, end, insert)" "$(get put chunks_per_s)" "$(get put wal_bytes_per_chunk)"
printf '%-34s %12s %14s\n' "bare INSERT of the same row" "$(get bare chunks_per_s)" "$(get bare wal_bytes_per_chunk)"
printf '%-34s %11sx\n' "ratio" "$ratio"
jq -n --arg rev "$REV" --argjson bytes "$BYTES" --argjson rows "$rows" --argjson ratio "$ratio" \
	'{scenario: "logs", git_rev: $rev, chunk_bytes: $bytes, rows: $rows, put_over_bare: $ratio}' >"$RESULTS/logs.json"
