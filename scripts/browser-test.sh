#!/usr/bin/env bash
# Browser test of rungd's web pages (/ui). Installs what it lacks (chromium via apt as root, the
# pinned playwright-core via npm; never downloads a browser), starts a throwaway Postgres, rungd and
# simulated workers, runs two jobs (one recovers through two rungs, one escalates an env fault on a
# dirty GPU), then tests/browser/ui.test.js checks the pages and saves screenshots to
# tests/browser/out/. Prints `ok -` / `not ok -` lines; exits non-zero on any failure.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
TMP=$(mktemp -d /tmp/rung-browser.XXXXXX)
PIDS=()
PG_STARTED=0
FAILED=0

say() { echo "# $*"; }
fail() { echo "not ok - $*"; FAILED=1; }
stop_pid() {
	local pid=$1 i
	kill -0 "$pid" 2>/dev/null || return 0
	kill -TERM "$pid" 2>/dev/null
	for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}
cleanup() {
	local p
	for p in "${PIDS[@]}"; do stop_pid "$p"; done
	[ "$PG_STARTED" = 1 ] && tests/pg.sh stop "$TMP/pg" immediate
	if [ "$FAILED" = 0 ]; then rm -rf "$TMP"; else
		for f in "$TMP"/*.log; do [ -f "$f" ] && { say "--- $f (last 30 lines)"; tail -n 30 "$f" | sed 's/^/# /'; }; done
		say "logs kept in $TMP"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. What the test needs.
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
	if [ "$(id -u)" = 0 ]; then
		say "installing chromium"
		DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >"$TMP/apt.log" 2>&1 ||
			{ apt-get update >>"$TMP/apt.log" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium >>"$TMP/apt.log" 2>&1; }
	fi
	[ -x "$CHROMIUM" ] || { fail "chromium is installed ($CHROMIUM; as root: apt-get install -y chromium)"; exit 1; }
fi
if [ ! -d tests/browser/node_modules/playwright-core ]; then
	say "installing playwright-core (no browser download)"
	(cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund >"$TMP/npm.log" 2>&1) ||
		{ fail "npm ci in tests/browser"; exit 1; }
fi
for b in bin/rungd bin/rung-worker bin/sim/nvidia-smi bin/sim/rung-sim-trainer; do
	[ -x "$b" ] || make -s "$b" >"$TMP/make.log" 2>&1 || { fail "$b builds"; exit 1; }
done

# Ports below Linux's ephemeral range (32768-60999): a port there may be the local end of an outgoing
# connection, which the probe below does not see and which makes the bind fail.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() { local p; for _ in $(seq 1 50); do p=$((20000 + RANDOM % 12000)); port_free "$p" && { echo "$p"; return; }; done; echo 0; }

# 2. Postgres, schema, tokens, rungd.
PG_PORT=$(pick_port)
tests/pg.sh start "$TMP/pg" "$PG_PORT" >"$TMP/pg.log" 2>&1 || { fail "PostgreSQL starts"; exit 1; }
PG_STARTED=1
createdb -h 127.0.0.1 -p "$PG_PORT" -U postgres rung 2>>"$TMP/pg.log"
DB=$(tests/pg.sh url "$PG_PORT" rung)
bin/rungd migrate --database-url "$DB" >"$TMP/migrate.log" 2>&1 || { fail "rungd migrate"; exit 1; }
token() { bin/rungd token create --role "$1" --name "$2" --database-url "$DB" 2>>"$TMP/tokens.log"; }
ADMIN=$(token admin browser-admin); SUPPORT=$(token support browser-support)
WTOK_DIRTY=$(token worker browser-dirty); WTOK_CLEAN=$(token worker browser-clean)
[ -n "$ADMIN" ] && [ -n "$SUPPORT" ] && [ -n "$WTOK_DIRTY" ] && [ -n "$WTOK_CLEAN" ] || { fail "tokens are created"; exit 1; }
HTTP_PORT=$(pick_port)
URL="http://127.0.0.1:$HTTP_PORT"
bin/rungd --listen "127.0.0.1:$HTTP_PORT" --database-url "$DB" --lease-seconds 5 --heartbeat-ms 200 \
	--reap-interval-ms 200 --poll-fallback-ms 500 >"$TMP/rungd.log" 2>&1 &
PIDS+=($!)
api() { curl -sS -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' "$@"; }
# json FIELD-EXPRESSION: evaluates a JS expression on the JSON read from stdin (d), prints the result.
json() { node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{let d;try{d=JSON.parse(s)}catch(e){return}const v=('"$1"');if(v!==undefined&&v!==null)console.log(v)})'; }
wait_for() { # SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s until it succeeds
	local deadline=$((SECONDS + $1)) what=$2; shift 2
	until "$@"; do
		[ $SECONDS -lt $deadline ] || { fail "$what (waited)"; return 1; }
		sleep 0.2
	done
}
healthy() { curl -sf "$URL/healthz" >/dev/null; }
wait_for 20 "rungd answers /healthz" healthy || exit 1

start_worker() { # NAME TOKEN GPUS-JSON [ENV...]
	local name=$1 tok=$2 gpus=$3; shift 3
	mkdir -p "$TMP/$name"
	echo "$gpus" >"$TMP/$name.gpus.json"
	env RUNG_SIM_STATE="$TMP/$name.gpus.json" RUNG_TOKEN="$tok" "$@" bin/rung-worker --server "$URL" --name "$name" \
		--nvidia-smi "$ROOT/bin/sim/nvidia-smi" --trainer-cmd "$ROOT/bin/sim/rung-sim-trainer {config}" \
		--trainer-dir "$TMP/$name" --work-dir "$TMP/$name" --lease-wait-ms 2000 --cancel-grace-ms 2000 \
		>"$TMP/$name.log" 2>&1 &
	PIDS+=($!)
	LAST_WORKER=$!
}
# A Flux LoRA config (sim/README.md memory model); TRAIN is merged into process[0].train.
config() { # NAME RESOLUTIONS TRAIN-JSON
	cat <<-EOF
	{"job": "extension", "config": {"name": "$1", "process": [{"type": "diffusion_trainer", "training_folder": "output",
	 "device": "cuda:0", "network": {"type": "lora", "linear": 16, "linear_alpha": 16},
	 "save": {"dtype": "float16", "save_every": 250},
	 "train": $(node -e 'console.log(JSON.stringify(Object.assign({batch_size: 1, gradient_accumulation: 1,
	   gradient_checkpointing: true, steps: 20, lr: 1e-4, optimizer: "adamw8bit", disable_sampling: false, dtype: "bf16"},
	   JSON.parse(process.argv[1]))))' "$3"),
	 "datasets": [{"folder_path": "/data/example", "caption_ext": "txt", "resolution": $2}],
	 "sample": {"sample_every": 250, "width": 1024, "height": 1024, "sample_steps": 20, "prompts": ["a photo of a cat"]},
	 "model": {"name_or_path": "black-forest-labs/FLUX.1-dev", "arch": "flux", "quantize": true, "low_vram": false}}]},
	 "meta": {"name": "[name]"}}
	EOF
}

# 3. The escalation: a CUBLAS allocation failure on a GPU another process holds memory on is an
#    environment fault; with quarantine_after 1 the GPU is quarantined and support gets an escalation.
DIRTY='{"gpus": [{"uuid": "GPU-browser-dirty-0", "name": "NVIDIA GeForce RTX 4090", "memory_total_mib": 24576,
  "processes": [{"pid": 999999, "used_mib": 3000, "name": "python"}]}]}'
start_worker browser-dirty "$WTOK_DIRTY" "$DIRTY" RUNG_SIM_CUBLAS=alloc
DIRTY_PID=$LAST_WORKER
JOB_E=$(api -X POST "$URL/v1/jobs" --data-binary "{\"name\": \"env fault on a dirty GPU\", \"recovery\": {\"quarantine_after\": 1},
  \"config\": $(config env_fault '[512]' '{}')}" | json 'd.id')
[ -n "$JOB_E" ] || { fail "the escalating job is submitted"; exit 1; }
esc_open() { ESC_ID=$(api "$URL/v1/escalations" | json 'd.escalations.length ? d.escalations[0].id : undefined'); [ -n "$ESC_ID" ]; }
wait_for 45 "job $JOB_E escalates (gpu_quarantined)" esc_open || exit 1
echo "ok - job $JOB_E hit an env fault on the dirty GPU; escalation $ESC_ID is open"
stop_pid "$DIRTY_PID"

# 4. The recovery: checkpointing off and batch 4 on a 24 GiB GPU needs both checkpointing (rung 1)
#    and batch 1 (rung 2): train 57607 -> 28807 -> 21607 MiB (rung-sim-trainer --estimate).
CLEAN='{"gpus": [{"uuid": "GPU-browser-clean-0", "name": "NVIDIA GeForce RTX 4090", "memory_total_mib": 24576, "processes": []}]}'
start_worker browser-clean "$WTOK_CLEAN" "$CLEAN"
JOB_R=$(api -X POST "$URL/v1/jobs" --data-binary "{\"name\": \"recover <b>&two rungs</b>\", \"recovery\": {\"scale_up\": false},
  \"config\": $(config two_rungs '[512, 768, 1024]' '{"gradient_checkpointing": false, "batch_size": 4}')}" | json 'd.id')
[ -n "$JOB_R" ] || { fail "the recovering job is submitted"; exit 1; }
job_state() { [ "$(api "$URL/v1/jobs/$1" | json 'd.state')" = "$2" ]; }
wait_for 90 "job $JOB_R succeeds" job_state "$JOB_R" succeeded || exit 1
echo "ok - job $JOB_R succeeded after $(api "$URL/v1/jobs/$JOB_R" | json 'd.attempts') attempts"
wait_for 60 "job $JOB_E succeeds on the clean GPU" job_state "$JOB_E" succeeded || exit 1
echo "ok - job $JOB_E re-ran on the clean GPU and succeeded"

# 5. The browser.
mkdir -p tests/browser/out
RUNG_URL=$URL RUNG_UI_TOKEN=$SUPPORT RUNG_ADMIN_TOKEN=$ADMIN JOB_RECOVERED=$JOB_R JOB_ESCALATED=$JOB_E ESCALATION_ID=$ESC_ID \
	OUT_DIR="$ROOT/tests/browser/out" CHROMIUM=$CHROMIUM timeout 90 node tests/browser/ui.test.js || FAILED=1
[ "$FAILED" = 0 ] && say "screenshots in tests/browser/out/"
exit "$FAILED"
