#!/usr/bin/env bash
# `make bench`: rung against raw PostgreSQL on this machine. Starts its own throwaway Postgres
# (fsync on, synchronous_commit on), a fresh database and rungd per scenario, runs each scenario
# (bin/bench/rung-bench plays submitters and workers over HTTP on 127.0.0.1) and the pgbench
# ceiling on the same Postgres, prints one table per scenario and writes bench/results/SCENARIO.json.
# Env: BENCH_QUICK=1 (one short run each, small N), BENCH_RUNS (3), BENCH_SECONDS (10),
#      BENCH_FLEET (10000 simulated GPUs), BENCH_FLEET_SECONDS (30), BENCH_SCENARIOS
#      ("submit cycle fleet recovery capped logs"; capped: bench/capped.sh, logs: bench/logs.sh), BENCH_CAPPED_BIG, BENCH_LOG_LEVEL (rungd's log level, warn), BENCH_KEEP=1 (keep the temp dir),
#      BENCH_RUNGD_FLAGS (extra rungd flags, e.g. "--db-pool 8"), BENCH_CYCLE_W (worker counts, "1,16,256"),
#      BENCH_PGBENCH=0 (skip the pgbench ceilings, for quick iteration), BENCH_PGSS=1 (load
#      pg_stat_statements and print each scenario's costliest statements: where Postgres spends its time; BENCH_PGSS_TOP, how many, 25),
#      BENCH_PEERS=0 (skip graphile-worker and pg-boss), BENCH_PEER_CONC (their concurrency, 16),
#      BENCH_WRITES=0 (skip counting what Postgres wrote per attempt, bench/writes.sh). Every window but the
#      fleet's also reports the CPU each process used per unit (bench/cpu.sh; bench/hooks.sh runs both hooks).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1

QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then
	RUNS=${BENCH_RUNS:-1}; SECS=${BENCH_SECONDS:-2}; FLEET=${BENCH_FLEET:-400}; FLEET_SECS=${BENCH_FLEET_SECONDS:-4}
	CYCLE_W="1,16,64"
else
	RUNS=${BENCH_RUNS:-3}; SECS=${BENCH_SECONDS:-10}; FLEET=${BENCH_FLEET:-10000}; FLEET_SECS=${BENCH_FLEET_SECONDS:-30}
	CYCLE_W="1,16,256"
fi
CYCLE_W=${BENCH_CYCLE_W:-$CYCLE_W}
PGBENCH_ON=${BENCH_PGBENCH:-1} # 0: skip the pgbench ceilings (for quick iteration; the tables then lack them)
SCENARIOS=${BENCH_SCENARIOS:-"submit cycle fleet recovery capped logs"}
PEERS_ON=${BENCH_PEERS:-1}
PEER_CONC=${BENCH_PEER_CONC:-16}
WRITES_ON=${BENCH_WRITES:-1}
BENCH=${BENCH_TOOL:-bin/bench/rung-bench} # BENCH_TOOL: another build of it (e.g. under ASan)
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
PGBENCH="$PGBIN/pgbench"
for b in bin/rungd "$BENCH" "$PGBENCH"; do
	[ -x "$b" ] || { echo "bench.sh: $b is missing (make bin/rungd bin/bench/rung-bench; apt-get install postgresql)" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "bench.sh: jq is required" >&2; exit 1; }

# Many simulated workers hold one connection each, in rung-bench and in rungd.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" -lt $((FLEET + 1000)) ]; then
	echo "bench.sh: open-file limit $(ulimit -n) is below what $FLEET GPUs need; lowering BENCH_FLEET" >&2
	FLEET=$(( $(ulimit -n) - 1000 ))
fi

TMP=$(mktemp -d /tmp/rung-bench.XXXXXX)
PG_DIR="$TMP/pg"
RESULTS="$ROOT/bench/results"
RAW="$RESULTS/raw.tmp"
mkdir -p "$RESULTS"
: >"$RAW"
RUNGD_PID=""
PG_STARTED=0

cleanup() {
	trap - EXIT INT TERM
	stop_rungd
	[ "$PG_STARTED" = 1 ] && tests/pg.sh stop "$PG_DIR" fast
	if [ "${BENCH_KEEP:-0}" = 1 ]; then echo "bench.sh: kept $TMP"; else rm -rf "$TMP"; fi
}
stop_rungd() {
	local i
	[ -n "$RUNGD_PID" ] && kill -0 "$RUNGD_PID" 2>/dev/null || { RUNGD_PID=""; return 0; }
	kill -TERM "$RUNGD_PID" 2>/dev/null
	for i in $(seq 1 150); do kill -0 "$RUNGD_PID" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$RUNGD_PID" 2>/dev/null
	wait "$RUNGD_PID" 2>/dev/null
	RUNGD_PID=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
	local p try
	for try in $(seq 1 50); do
		p=$((20000 + RANDOM % 12000))
		port_free "$p" && { echo "$p"; return 0; }
	done
	return 1
}

# 1. Postgres: stock settings, fsync on, synchronous_commit on (the default).
PG_PORT=$(free_port) || { echo "bench.sh: no free port" >&2; exit 1; }
echo "bench.sh: PostgreSQL in $PG_DIR on port $PG_PORT (fsync on, synchronous_commit on)"
PGSS=${BENCH_PGSS:-0}
[ "$PGSS" = 1 ] && export RUNG_PG_OPTS="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all -c pg_stat_statements.track_planning=on"
RUNG_PG_FSYNC=on tests/pg.sh start "$PG_DIR" "$PG_PORT" || { echo "bench.sh: PostgreSQL did not start" >&2; exit 1; }
PG_STARTED=1
export PGOPTIONS="-c client_min_messages=warning"
PSQL() { "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PG_PORT" -U postgres "$@"; }
PG_VERSION=$(PSQL -At -d postgres -c 'SHOW server_version')
SYNC=$(PSQL -At -d postgres -c 'SHOW synchronous_commit')
FSYNC=$(PSQL -At -d postgres -c 'SHOW fsync')

# Machine facts for the results files.
REV=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || REV="$REV+dirty"
MACHINE="$TMP/machine.json"
jq -n --arg cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" \
	--argjson cores "$(nproc)" \
	--argjson mem_mb "$(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo)" \
	--arg kernel "$(uname -r)" --arg os "$(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unknown}")" \
	--arg pg "$PG_VERSION" --arg sync "$SYNC" --arg fsync "$FSYNC" \
	--arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg runs "$RUNS" --arg secs "$SECS" \
	'{cpu: $cpu, cores: $cores, mem_mb: $mem_mb, kernel: $kernel, os: $os, postgres: $pg,
	  synchronous_commit: $sync, fsync: $fsync, date: $date, runs: ($runs|tonumber), seconds: ($secs|tonumber)}' >"$MACHINE"
echo "bench.sh: $(jq -r '"\(.cpu), \(.cores) cores, \(.mem_mb) MB, PostgreSQL \(.postgres)"' "$MACHINE"); rev $REV"

# Peers: graphile-worker and pg-boss from npm, at the versions bench/peers/package-lock.json pins, installed into
# bench/peers/node_modules (ignored by git). Without node (or the install failing) they are skipped, said once.
PEERS_READY=0
if [ "$PEERS_ON" = 1 ]; then
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		echo "bench.sh: node/npm not found: skipping the peers (graphile-worker, pg-boss); tables show rung and pgbench only"
	elif [ -d bench/peers/node_modules/graphile-worker ] && [ -d bench/peers/node_modules/pg-boss ] ||
		(cd bench/peers && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1); then
		PEERS_READY=1
		echo "bench.sh: peers: node $(node --version), $(cd bench/peers && node -p 'const l=require("./package-lock.json").packages; ["graphile-worker","pg-boss"].map(n=>n+" "+l["node_modules/"+n].version).join(", ")'), concurrency $PEER_CONC"
	else
		echo "bench.sh: npm ci in bench/peers failed (offline?): skipping the peers (graphile-worker, pg-boss)"
	fi
fi

# peers SCENARIO: each peer in a fresh database of its own on the same Postgres, one at a time and batched.
peers_run() {
	[ "$PEERS_READY" = 1 ] || return 0
	local sc=$1 peer mode pdb url
	for peer in graphile pg-boss; do
		pdb="peer_${peer//-/_}"
		PSQL -d postgres -c "DROP DATABASE IF EXISTS $pdb" -c "CREATE DATABASE $pdb" || return 1
		url=$(tests/pg.sh url "$PG_PORT" "$pdb")
		for mode in one batch; do
			(cd bench/peers && BENCH_CPU_HOOK="$ROOT/bench/cpu.sh" node peer.mjs --peer "$peer" --scenario "$sc" --mode "$mode" --conc "$PEER_CONC" \
				--seconds "$SECS" --runs "$RUNS" --url "$url" --payload ../flux_lora_3k.json) >>"$RAW" ||
				{ echo "bench.sh: peer $peer $sc $mode failed" >&2; FAILED=1; }
		done
		PSQL -d postgres -c "DROP DATABASE IF EXISTS $pdb" >/dev/null
	done
}

# What Postgres wrote per attempt/job: bench/writes.sh around every timed window (rung-bench --hook).
# And the CPU each process used per attempt/job (bench/cpu.sh); bench/hooks.sh runs both.
export PGBIN PG_PORT PG_DIR WRITES_STATE="$TMP/writes.lsn" CPU_STATE="$TMP/cpu.ticks" BENCH_WRITES="$WRITES_ON"
HOOK=(--hook "$ROOT/bench/hooks.sh")

# The HOT ratio as pg_stat_user_tables counts it, over the whole scenario (read after rungd stopped: a backend
# sends its counters when it exits).
hot_ratio() {
	echo "-- $sc: pg_stat_user_tables over the whole scenario (prefill included): updates, HOT updates, HOT ratio --"
	PSQL -d "$DB" -At -F ' ' -c "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd,
		CASE WHEN n_tup_upd > 0 THEN round(100.0 * n_tup_hot_upd / n_tup_upd, 1) END
		FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd > 0 AND relname NOT LIKE 'bench_%' ORDER BY relname" |
		awk '{ printf "  %-16s inserted %8d  updated %8d  HOT %8d  HOT ratio %s%%\n", $1, $2, $3, $4, ($5 == "" ? "-" : $5) }'
}

# A fresh database per scenario, and rungd on it.
DBN=0
fresh_db() {
	DBN=$((DBN + 1))
	DB="bench$DBN"
	export DB
	PSQL -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" || exit 1
	DB_URL=$(tests/pg.sh url "$PG_PORT" "$DB")
	# schema, then one admin token for the load generator (admin skips per-owner checks)
	bin/rungd migrate --database-url "$DB_URL" 2>>"$TMP/rungd.log" || { echo "bench.sh: migrate failed" >&2; exit 1; }
	RUNG_BENCH_TOKEN=$(bin/rungd token create --role admin --name "bench$DBN" --database-url "$DB_URL" 2>>"$TMP/rungd.log") ||
		{ echo "bench.sh: token create failed" >&2; exit 1; }
	export RUNG_BENCH_TOKEN
}
start_rungd() { # extra rungd flags
	local i
	RUNGD_PORT=$(free_port) || { echo "bench.sh: no free port" >&2; exit 1; }
	# --submit-rate: the per-token abuse limit would otherwise cap the submit scenario at 200/s
	RUNG_LOG_LEVEL=${BENCH_LOG_LEVEL:-warn} bin/rungd --listen "127.0.0.1:$RUNGD_PORT" --database-url "$DB_URL" \
		--submit-rate "${BENCH_SUBMIT_RATE:-1000000}" ${BENCH_RUNGD_FLAGS:-} "$@" \
		2>>"$TMP/rungd.log" &
	RUNGD_PID=$!
	export RUNGD_PID # bench/cpu.sh reads rungd's CPU time
	for i in $(seq 1 300); do
		kill -0 "$RUNGD_PID" 2>/dev/null || { echo "bench.sh: rungd exited; its log:" >&2; tail -n 30 "$TMP/rungd.log" >&2; exit 1; }
		curl -sf "http://127.0.0.1:$RUNGD_PORT/healthz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "bench.sh: rungd did not become healthy" >&2
	exit 1
}

# pgbench ROWS_LABEL SCENARIO SETTING RUN METRIC SCRIPT CLIENTS [pgbench args]: one run, one raw line.
pgbench_run() {
	[ "$PGBENCH_ON" = 1 ] || return 0
	local scenario=$1 setting=$2 run=$3 metric=$4 script=$5 clients=$6 threads out tps lat ntx cpu client TIMEFORMAT
	shift 6
	threads=$(( clients < $(nproc) ? clients : $(nproc) ))
	# CPU per transaction as for rung (bench/cpu.sh: Postgres), plus the pgbench client's own (bash's
	# `time`: user and system seconds)
	RUNGD_PID="" RUNG_BENCH_PID="" "$ROOT/bench/cpu.sh" begin || rm -f "$CPU_STATE"
	{ TIMEFORMAT='%U %S'; time "$PGBENCH" -n -M prepared -h 127.0.0.1 -p "$PG_PORT" -U postgres -c "$clients" \
		-j "$threads" -T "$SECS" -f "$script" "$@" "$DB" >"$TMP/pgbench.out" 2>&1; } 2>"$TMP/pgbench.time"
	out=$(cat "$TMP/pgbench.out")
	tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' <<<"$out" | head -n 1)
	lat=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' <<<"$out" | head -n 1)
	ntx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out" | head -n 1)
	cpu=$(RUNGD_PID="" RUNG_BENCH_PID="" "$ROOT/bench/cpu.sh" end "${ntx:-0}")
	client=$(awk -v n="${ntx:-0}" 'NF == 2 && n > 0 { printf "%.3f", ($1 + $2) * 1000 / n }' "$TMP/pgbench.time")
	if [ -z "$tps" ] || grep -q "client [0-9]* aborted" <<<"$out"; then
		echo "bench.sh: pgbench failed:" >&2
		tail -n 5 <<<"$out" >&2
		[ -z "$tps" ] && return 1
	fi
	jq -nc --arg sc "$scenario" --arg set "$setting" --argjson run "$run" --arg m "$metric" \
		--argjson tps "$tps" --argjson lat "${lat:-null}" --argjson cpu "${cpu:-{\}}" --argjson client "${client:-null}" \
		'{scenario: $sc, system: "pgbench", setting: $set, run: $run,
		  metrics: ({($m): $tps, latency_avg_ms: $lat}
		            + (if $client == null or $cpu.cpu_postgres_ms == null then {} else
		               {cpu_postgres_ms: $cpu.cpu_postgres_ms, cpu_client_ms: $client,
		                cpu_total_ms: (($cpu.cpu_postgres_ms + $client) * 1000 | round / 1000)} end))}' >>"$RAW"
}

report() { # SCENARIO
	local q=""
	[ "$QUICK" = 1 ] && q=--quick
	"$BENCH" report --raw "$RAW" --scenario "$1" --out "$RESULTS/$1.json" --machine "$MACHINE" --rev "$REV" $q
}

# BENCH_PGSS=1: the scenario's statements by total time (top-level and nested, track=all).
pgss_top() {
	echo "== pg_stat_statements, $sc (ms total, calls, ms/call, rows, plans, planning ms/call, query) =="
	PSQL -d "$DB" -At -F ' | ' -c "SELECT round(total_exec_time)::bigint, calls,
		round((total_exec_time / greatest(calls, 1))::numeric, 3), rows, plans,
		round((total_plan_time / greatest(calls, 1))::numeric, 3),
		left(regexp_replace(query, '\s+', ' ', 'g'), 110)
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT ${BENCH_PGSS_TOP:-25}"
}

URLARG() { echo "http://127.0.0.1:$RUNGD_PORT"; }
FAILED=0

for sc in $SCENARIOS; do
	echo "bench.sh: scenario $sc"
	fresh_db
	PSQL -d "$DB" -f bench/schema.sql >/dev/null || exit 1
	[ "$PGSS" = 1 ] && PSQL -d "$DB" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" -c "SELECT pg_stat_statements_reset()" >/dev/null
	case "$sc" in
	submit)
		PAYLOAD=$(jq -c . bench/flux_lora_3k.json)
		for c in 1 16; do
			for run in $(seq 1 "$RUNS"); do
				pgbench_run submit "c=$c" "$run" tx_per_s bench/insert_3k.sql "$c" -D "payload=$PAYLOAD" || FAILED=1
			done
		done
		start_rungd
		"$BENCH" submit --url "$(URLARG)" --runs "$RUNS" --seconds "$SECS" --list 16,64 "${HOOK[@]}" >>"$RAW" || FAILED=1
		# batched, as the peers' batch rows: 100 jobs per POST /v1/jobs/batch, 16 at once
		"$BENCH" submit --url "$(URLARG)" --runs "$RUNS" --seconds "$SECS" --list 16 --batch 100 "${HOOK[@]}" >>"$RAW" || FAILED=1
		stop_rungd
		peers_run submit
		;;
	cycle)
		ROWS=$(awk -v s="$SECS" 'BEGIN { print int(8000 * s + 1000) }')
		for c in 1 4 16; do
			for run in $(seq 1 "$RUNS"); do
				PSQL -d "$DB" -v rows="$ROWS" -f bench/fill_queue.sql >/dev/null || exit 1
				pgbench_run cycle "c=$c" "$run" jobs_per_s bench/claim_complete.sql "$c" || FAILED=1
			done
		done
		start_rungd
		"$BENCH" cycle --url "$(URLARG)" --runs "$RUNS" --seconds "$SECS" --list "$CYCLE_W" "${HOOK[@]}" >>"$RAW" || FAILED=1
		stop_rungd
		peers_run cycle
		;;
	fleet)
		start_rungd
		"$BENCH" fleet --url "$(URLARG)" --runs "$RUNS" --seconds "$FLEET_SECS" --fleet "$FLEET" \
			--rungd-pid "$RUNGD_PID" >>"$RAW" || FAILED=1
		;;
	capped)
		# SQL only (no rungd): its own table and bench/results/capped.json
		PGBENCH="$PGBENCH" PG_PORT="$PG_PORT" DB="$DB" RESULTS="$RESULTS" RUNS="$RUNS" SECS="$SECS" REV="$REV" \
			bench/capped.sh || FAILED=1
		continue
		;;
	logs)
		# SQL only (no rungd): its own table and bench/results/logs.json
		PGBENCH="$PGBENCH" PG_PORT="$PG_PORT" DB="$DB" RESULTS="$RESULTS" RUNS="$RUNS" SECS="$SECS" REV="$REV" \
			bench/logs.sh || FAILED=1
		continue
		;;
	recovery)
		start_rungd
		"$BENCH" recovery --url "$(URLARG)" --runs "$RUNS" --seconds "$SECS" --workers 16 "${HOOK[@]}" >>"$RAW" || FAILED=1
		;;
	*) echo "bench.sh: unknown scenario $sc" >&2; FAILED=1; continue ;;
	esac
	stop_rungd
	[ "$PGSS" = 1 ] && pgss_top
	[ "$sc" = fleet ] || hot_ratio
	report "$sc" || FAILED=1
done

if grep -qiE 'level=(error|fatal)' "$TMP/rungd.log" 2>/dev/null; then
	echo "bench.sh: rungd logged errors (first 5):"
	grep -iE 'level=(error|fatal)' "$TMP/rungd.log" | head -n 5
fi
echo "bench.sh: results in bench/results/ (rev $REV)"
exit "$FAILED"
