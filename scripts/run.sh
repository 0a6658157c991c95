#!/usr/bin/env bash
# `make run`: rung on one machine, in the foreground. A local PostgreSQL under var/pg (unless
# RUNG_DATABASE_URL is set), `rungd migrate`, rungd on 127.0.0.1:8080 and one rung-worker: on the
# real GPUs when `nvidia-smi -L` works, else on one simulated 24 GiB GPU with the simulated trainer.
# Ctrl-C stops the worker, rungd and the Postgres it started.
# Env: RUNG_DATABASE_URL, RUNG_LISTEN (127.0.0.1:8080), RUNG_PG_PORT (5433), RUNG_TRAINER_DIR
# (AI Toolkit's folder, default ~/ai-toolkit), RUNG_TRAINER_CMD (overrides the trainer command).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
VAR="$ROOT/var"
LISTEN=${RUNG_LISTEN:-127.0.0.1:8080}
URL="http://$LISTEN"
PG_DIR="$VAR/pg"
PG_STARTED=0
RUNGD_PID=""
WORKER_PID=""

for b in bin/rungd bin/rung-worker; do
	[ -x "$b" ] || { echo "run.sh: $b is missing; run make first" >&2; exit 1; }
done

stop_pid() { # PID NAME: TERM, wait up to 10 s, then KILL
	local pid=$1 i
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "run.sh: $2 did not stop; killing it" >&2
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
}
cleanup() {
	trap - EXIT INT TERM
	echo "run.sh: stopping"
	stop_pid "$WORKER_PID" rung-worker
	stop_pid "$RUNGD_PID" rungd
	if [ "$PG_STARTED" = 1 ]; then
		tests/pg.sh stop "$PG_DIR" fast
		echo "run.sh: PostgreSQL stopped"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# 1. Postgres.
if [ -z "${RUNG_DATABASE_URL:-}" ]; then
	mkdir -p "$VAR"
	tests/pg.sh stop "$PG_DIR" fast # a cluster left running by a run that was killed
	port=${RUNG_PG_PORT:-5433}
	if ! port_free "$port"; then
		for try in $(seq 1 20); do
			port=$((20000 + RANDOM % 12000))
			port_free "$port" && break
		done
	fi
	echo "run.sh: starting PostgreSQL in $PG_DIR on port $port"
	tests/pg.sh start "$PG_DIR" "$port" || { echo "run.sh: PostgreSQL did not start" >&2; exit 1; }
	PG_STARTED=1
	# A new database numbers its jobs from 1 again: the worker keeps each job's checkpoints in
	# var/work/jobs/ID/, and an older database's job 1 must not be resumed by this one's.
	if createdb -h 127.0.0.1 -p "$port" -U postgres rung 2>/dev/null; then
		rm -rf "$VAR/work/jobs"
	fi
	RUNG_DATABASE_URL=$(tests/pg.sh url "$port" rung)
fi
export RUNG_DATABASE_URL

# 2. Schema, then the server.
bin/rungd migrate --database-url "$RUNG_DATABASE_URL" || { echo "run.sh: migrate failed" >&2; exit 1; }
bin/rungd --listen "$LISTEN" --database-url "$RUNG_DATABASE_URL" &
RUNGD_PID=$!
for i in $(seq 1 200); do
	kill -0 "$RUNGD_PID" 2>/dev/null || { echo "run.sh: rungd exited" >&2; exit 1; }
	if command -v curl >/dev/null; then
		curl -sf "$URL/healthz" >/dev/null && break
	else
		port_free "${LISTEN##*:}" || break
	fi
	sleep 0.1
done

# Tokens (auth is always on): one for the worker, one for you. The previous run's worker token is
# revoked first, so the worker (same name, bound to its token) may register again with the new one.
mkdir -p "$VAR"
[ -f "$VAR/worker-token-name" ] && bin/rungd token revoke "$(cat "$VAR/worker-token-name")" \
	--database-url "$RUNG_DATABASE_URL" 2>/dev/null
WT_NAME="run-worker-$(date +%s)"
WORKER_TOKEN=$(bin/rungd token create --role worker --name "$WT_NAME" --database-url "$RUNG_DATABASE_URL") || exit 1
echo "$WT_NAME" >"$VAR/worker-token-name"
SUBMIT_TOKEN=$(bin/rungd token create --role submitter --database-url "$RUNG_DATABASE_URL") || exit 1

# 3. One worker: real GPUs or the simulated one.
mkdir -p "$VAR/work"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
	TDIR=${RUNG_TRAINER_DIR:-$HOME/ai-toolkit}
	PY=python3
	[ -x "$TDIR/venv/bin/python" ] && PY="$TDIR/venv/bin/python"
	TRAINER=${RUNG_TRAINER_CMD:-"$PY run.py {config}"}
	echo "run.sh: real GPUs:"
	nvidia-smi -L | sed 's/^/run.sh:   /'
	echo "run.sh: trainer: $TRAINER"
	[ -f "$TDIR/run.py" ] || echo "run.sh: warning: $TDIR/run.py not found; set RUNG_TRAINER_DIR to AI Toolkit's folder" >&2
	RUNG_TOKEN=$WORKER_TOKEN bin/rung-worker --server "$URL" --name "$(hostname)" --trainer-cmd "$TRAINER" --trainer-dir "$TDIR" \
		--work-dir "$VAR/work" &
	WORKER_PID=$!
else
	mkdir -p "$VAR/sim"
	export RUNG_SIM_STATE="$VAR/sim/gpus.json"
	# RUNG_SIM_MEMORY_MIB sizes the simulated card: 24564 (an RTX 4090) by default; 16376 (an RTX 4080)
	# makes AI Toolkit's own 24 GB Flux example run out of memory, to watch rung walk the ladder.
	SIM_MIB=${RUNG_SIM_MEMORY_MIB:-24564}
	case "$SIM_MIB" in ''|*[!0-9]*) echo "run.sh: RUNG_SIM_MEMORY_MIB must be a number of MiB" >&2; exit 1 ;; esac
	SIM_NAME="NVIDIA GeForce RTX 4090"
	[ "$SIM_MIB" -lt 20000 ] && SIM_NAME="NVIDIA GeForce RTX 4080"
	cat >"$RUNG_SIM_STATE" <<-EOF
	{ "gpus": [ { "uuid": "GPU-5d1c8f3a-7b2e-4c11-9a3e-2f6b1c0d4e7a", "name": "$SIM_NAME",
	              "memory_total_mib": $SIM_MIB, "processes": [] } ] }
	EOF
	TRAINER=${RUNG_TRAINER_CMD:-"$ROOT/bin/sim/rung-sim-trainer {config}"}
	echo "run.sh: no usable nvidia-smi: SIMULATED GPUs ($RUNG_SIM_STATE: one $SIM_NAME, $SIM_MIB MiB) and the simulated trainer"
	RUNG_TOKEN=$WORKER_TOKEN bin/rung-worker --server "$URL" --name "$(hostname)-sim" --nvidia-smi "$ROOT/bin/sim/nvidia-smi" \
		--trainer-cmd "$TRAINER" --trainer-dir "$VAR/work" --work-dir "$VAR/work" &
	WORKER_PID=$!
fi

cat <<EOF

rung is running: rungd on $URL (pid $RUNGD_PID), rung-worker (pid $WORKER_PID).
Submit the example Flux LoRA job:
  export RUNG_TOKEN=$SUBMIT_TOKEN     # a submitter token, shown only now (rungctl reads RUNG_TOKEN)
  curl -sS -X POST $URL/v1/jobs -H "Authorization: Bearer \$RUNG_TOKEN" -H 'Content-Type: application/json' \\
       --data-binary "{\"name\": \"example\", \"config\": \$(cat $ROOT/examples/flux_lora.json)}"
Watch it (ID from the answer):
  bin/rungctl watch ID; bin/rungctl logs ID --follow; bin/rungctl show ID; bin/rungctl attempts ID; bin/rungctl events ID; bin/rungctl jobs
Escalations, GPUs and tokens need a support or admin token:
  bin/rungd token create --role admin --database-url '$RUNG_DATABASE_URL'
Ctrl-C stops everything.

EOF

# Foreground until Ctrl-C or until one of them exits.
wait -n "$RUNGD_PID" "$WORKER_PID"
echo "run.sh: a process exited; shutting down" >&2
exit 1
