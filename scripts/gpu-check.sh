#!/usr/bin/env bash
# scripts/gpu-check.sh: rung end to end on real CUDA memory (docs/GPU.md). Starts a throwaway
# PostgreSQL, rungd and rung-worker with the real nvidia-smi and sim/torch_trainer.py as the trainer,
# the GPU capped per job (RUNG_GPU_CAP_GIB); submits an image and a video job that do not fit the cap,
# waits for them and writes a results file: attempts, classes, rungs, final configs, peak memory per
# attempt from torch.cuda.max_memory_* and from nvidia-smi. Exits 1 when a job did not recover as the
# policy says (below), 2 when the machine cannot run the check. Owns only its temp dir and RESULTS.
#
# A job recovered when: it succeeded; its first attempt failed with an OOM class; every failed attempt
# is an OOM class (never not_oom, env_fault or host_oom on a clean capped card); each re-run's config
# is the one the decision gave (its changes recorded); `rungctl classify` on the attempt's saved log
# and config gives the class rungd stored; and every succeeded attempt peaked under the cap.
#
# Binaries: .carry/rung-carry.tgz (scripts/gpu-carry.sh) when present, else this checkout's bin/ and
# the system's PostgreSQL. Env: RUNG_GPU_FAKE=1 rehearses on the CPU (simulated nvidia-smi, the tiny
# network, counted memory); RUNG_GPU_CAP_GIB_IMAGE / _VIDEO (16 / 16): the caps, moved to the middle
# of the measured peaks when those do not straddle them; RUNG_PYTHON (python3); RUNG_GPU_RESULTS
# (the folder for gpu-check.json and gpu-check.md: $OUT when set, else var/gpu-check);
# RUNG_GPU_JOB_TIMEOUT (seconds per job, 420); RUNG_GPU_DEADLINE (seconds for the whole check, 0: none;
# a job still searching upwards at the deadline is cancelled and counts as recovered when it had
# already succeeded after its OOM: the device time is short, the scale-up search long).
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
FAKE=${RUNG_GPU_FAKE:-0}
PY=${RUNG_PYTHON:-python3}
RESULTS=${RUNG_GPU_RESULTS:-${OUT:-$ROOT/var/gpu-check}}
JOB_TIMEOUT=${RUNG_GPU_JOB_TIMEOUT:-420}
DEADLINE=${RUNG_GPU_DEADLINE:-0}
mkdir -p "$RESULTS"
W=$(mktemp -d "${TMPDIR:-/tmp}/rung-gpu.XXXXXX") || exit 2
chmod 755 "$W"
LOG="$RESULTS/gpu-check.log"
: >"$LOG"
PIDS=()
PG_DIR="$W/pg"
PG_UP=0

say() { echo "gpu-check: $*" | tee -a "$LOG"; }
die() { say "$2"; exit "$1"; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
cleanup() {
	trap - EXIT INT TERM
	for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
	[ "$PG_UP" = 1 ] && as_pg "$PGBIN/pg_ctl" -D "$PG_DIR" -m fast -w stop >/dev/null 2>&1
	# keep the worker's attempt logs and configs beside the results, with what rungd said of each job
	# (rungctl show/attempts --json: the facts, the worker's peaks) and the learned model's plan
	if [ -d "$W/work/attempts" ]; then
		mkdir -p "$W/work/rung" && cp "$W"/job-*.json "$W"/attempts-*.json "$W"/plan-*.json "$W/work/rung/" 2>/dev/null
		tar -C "$W/work" -czf "$RESULTS/attempts.tgz" attempts rung 2>/dev/null
	fi
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 12000))
		port_free "$p" && { echo "$p"; return 0; }
	done
	return 1
}

# ---- 1. binaries ----
if [ -f .carry/rung-carry.tgz ]; then
	mkdir -p "$W/carry" && tar -C "$W/carry" -xzf .carry/rung-carry.tgz || die 2 "cannot unpack .carry/rung-carry.tgz"
	BIN="$W/carry/bin"
	PGBIN=$(ls -d "$W"/carry/pg/usr/lib/postgresql/*/bin | tail -n 1)
	SIM_SMI="$BIN/nvidia-smi"
	say "carried binaries: $(tr '\n' ' ' <"$W/carry/CARRY.txt")"
	if [ ! -e /usr/share/zoneinfo/UTC ] && [ "$(id -u)" = 0 ]; then
		mkdir -p /usr/share/zoneinfo/Etc && cp "$W/carry/zoneinfo/UTC" /usr/share/zoneinfo/UTC &&
			cp "$W/carry/zoneinfo/Etc/UTC" /usr/share/zoneinfo/Etc/UTC
	fi
else
	BIN="$ROOT/bin"
	PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	SIM_SMI="$ROOT/bin/sim/nvidia-smi"
fi
say "this machine: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), glibc $(ldd --version 2>/dev/null | head -n 1 | awk '{ print $NF }')"
for b in "$BIN/rungd" "$BIN/rung-worker" "$BIN/rungctl" "$PGBIN/postgres" "$PGBIN/initdb"; do
	if ! out=$("$b" --help 2>&1 >/dev/null) && [ -n "$out" ]; then
		say "$b does not run here: $out"
		ldd "$b" 2>&1 | grep -E 'not found|GLIBC' | tee -a "$LOG"
		die 2 "rebuild or carry again (scripts/gpu-carry.sh) on a system with this glibc or older"
	fi
done
export TZ=UTC

# ---- 2. the GPU and PyTorch ----
TRAINER="$PY $ROOT/sim/torch_trainer.py {config}"
if [ "$FAKE" = 1 ]; then
	NVSMI=$SIM_SMI
	export RUNG_TORCH_DEVICE=cpu RUNG_GPU_FAKE=1 RUNG_TORCH_NET=tiny RUNG_SIM_STATE="$W/gpus.json"
	"$PY" -c 'import torch' 2>>"$LOG" || die 2 "$PY cannot import torch"
	say "REHEARSAL on the CPU: simulated nvidia-smi, tiny network, counted memory (RUNG_GPU_FAKE=1)"
else
	NVSMI=nvidia-smi
	nvidia-smi -L >>"$LOG" 2>&1 || die 2 "nvidia-smi -L failed: no GPU here (RUNG_GPU_FAKE=1 rehearses on the CPU)"
	"$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>>"$LOG" ||
		die 2 "$PY has no CUDA PyTorch"
	export RUNG_TORCH_DEVICE=cuda RUNG_TORCH_NET=full
fi
"$PY" -c 'import torch, sys; print("torch", torch.__version__, "python", sys.version.split()[0],
	torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")' 2>&1 | tee -a "$LOG"
"$NVSMI" --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"

# ---- 3. the jobs, and their caps from measured peaks ----
JOBS=(image video)
declare -A CFG=([image]=tests/data/torch_gpu_image.json [video]=tests/data/torch_gpu_video.json)
declare -A CAP_GIB=([image]=${RUNG_GPU_CAP_GIB_IMAGE:-16} [video]=${RUNG_GPU_CAP_GIB_VIDEO:-16})
# calib JOB VARIANT: a short uncapped run (2 steps, baseline and final sample) of the job's target
# config or of its first rung (image: checkpointing on; video: 41 frames), peaks into calib.jsonl.
calib() {
	local job=$1 variant=$2 c="$W/calib-$1-$2.json"
	"$PY" - "${CFG[$job]}" "$c" "$variant" <<-'EOF' || return 1
	import json, sys
	d = json.load(open(sys.argv[1])); p = d["config"]["process"][0]
	d["config"]["name"] += "_calib_" + sys.argv[3]
	p["train"]["steps"] = 2; p["save"]["save_every"] = 0; p["sample"]["sample_every"] = 0
	if sys.argv[3] == "rung1":
	    if p["datasets"][0].get("num_frames", 1) > 1:
	        p["datasets"][0]["num_frames"] = 41; p["sample"]["num_frames"] = 41
	    else:
	        p["train"]["gradient_checkpointing"] = True
	json.dump(d, open(sys.argv[2], "w"))
	EOF
	RUNG_TORCH_STATS="$W/calib.jsonl" RUNG_TORCH_RUN_DIR="$W/calib-run" RUNG_TORCH_IMAGES_PER_BUCKET=4 \
		"$PY" sim/torch_trainer.py "$c" >"$W/calib-$job-$variant.log" 2>&1
}
for job in "${JOBS[@]}"; do
	for v in target rung1; do
		say "measuring $job ($v config, uncapped, 2 steps)"
		calib "$job" "$v" || { tail -n 20 "$W/calib-$job-$v.log" | tee -a "$LOG"; die 2 "the $job $v run failed uncapped"; }
	done
	cap=$("$PY" - "$W/calib.jsonl" "$job" "${CAP_GIB[$job]}" "$FAKE" <<-'EOF'
	import json, sys
	recs = {}
	for line in open(sys.argv[1]):
	    r = json.loads(line)
	    if r["name"].startswith("rung_gpu_%s_calib_" % sys.argv[2]):
	        recs[r["name"].rsplit("_calib_", 1)[1]] = r
	t = max(v["reserved_mib"] for v in recs["target"]["peaks"].values())
	f = max(v["reserved_mib"] for v in recs["rung1"]["peaks"].values())
	cap = float(sys.argv[3]) * 1024
	if sys.argv[4] == "1" or not (f < 0.9 * cap and t > 1.1 * cap):
	    cap = (t + f) / 2
	print("%.1f %.1f %.1f" % (cap, t, f))
	EOF
	) || die 2 "cannot read the $job measurements"
	read -r c t f <<<"$cap"
	declare -g "CAPMIB_$job=$c"
	say "$job: target peaks at $t MiB, its first rung at $f MiB: cap $c MiB"
	awk -v t="$t" -v f="$f" 'BEGIN { exit !(t > f) }' || die 2 "$job: the first rung does not lower the peak; nothing to check"
done

# ---- 4. Postgres, rungd, tokens ----
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
	useradd -r -M -d "$W" postgres 2>/dev/null || echo "postgres:x:26:26::$W:/bin/sh" >>/etc/passwd
fi
mkdir -p "$PG_DIR" && [ "$(id -u)" = 0 ] && chown postgres "$PG_DIR"
as_pg "$PGBIN/initdb" -D "$PG_DIR" -A trust -U postgres --no-sync -E UTF8 --locale=C >"$W/initdb.log" 2>&1 ||
	{ cat "$W/initdb.log" | tee -a "$LOG"; die 2 "initdb failed"; }
PGPORT=$(free_port) || die 2 "no free port"
as_pg "$PGBIN/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w -t 60 \
	-o "-p $PGPORT -c listen_addresses=127.0.0.1 -k '' -c fsync=off" start >/dev/null ||
	{ tail -n 20 "$PG_DIR/server.log" | tee -a "$LOG"; die 2 "postgres did not start"; }
PG_UP=1
as_pg "$PGBIN/createdb" -h 127.0.0.1 -p "$PGPORT" -U postgres rung || die 2 "createdb failed"
DB="postgresql://postgres@127.0.0.1:$PGPORT/rung"
"$BIN/rungd" migrate --database-url "$DB" >>"$LOG" 2>&1 || die 2 "rungd migrate failed"
HTTP=$(free_port) || die 2 "no free port"
export RUNG_URL="http://127.0.0.1:$HTTP"
"$BIN/rungd" --listen "127.0.0.1:$HTTP" --database-url "$DB" >"$W/rungd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do port_free "$HTTP" || break; sleep 0.1; done
WTOKEN=$("$BIN/rungd" token create --role worker --name gpu-check --database-url "$DB") || die 2 "token create failed"
export RUNG_TOKEN
RUNG_TOKEN=$("$BIN/rungd" token create --role admin --database-url "$DB") || die 2 "token create failed"

# ---- 5. each job on its own capped worker, nvidia-smi sampled all along ----
# --gpu-memory-mib: rung registers and learns the GPU at the cap, not at the whole card's memory.total
( while :; do
	echo "$(date +%s.%N) $("$NVSMI" --query-gpu=memory.used,memory.total --format=csv,noheader,nounits 2>/dev/null | head -n 1)"
	sleep 0.2
done ) >"$W/smi.log" 2>/dev/null &
SAMPLER=$!
PIDS+=("$SAMPLER")
declare -A JOB_ID
for job in "${JOBS[@]}"; do
	capvar="CAPMIB_$job"
	cap=${!capvar}
	if [ "$FAKE" = 1 ]; then
		printf '{"gpus": [{"uuid": "GPU-7e57c0de-0000-4000-8000-000000000001", "name": "NVIDIA H200 (simulated, capped)", "memory_total_mib": %d, "processes": []}]}\n' \
			"${cap%.*}" >"$RUNG_SIM_STATE"
	fi
	mkdir -p "$W/work" "$W/trainer"
	RUNG_GPU_CAP_MIB=$cap RUNG_TORCH_STATS="$W/stats.jsonl" RUNG_TORCH_RUN_DIR="$W/runs" RUNG_TOKEN=$WTOKEN \
		PYTHONUNBUFFERED=1 "$BIN/rung-worker" --name gpu-check --nvidia-smi "$NVSMI" --gpu-memory-mib "${cap%.*}" \
		--trainer-cmd "$TRAINER" --trainer-dir "$W/trainer" --work-dir "$W/work" --lease-wait-ms 2000 \
		>"$W/worker-$job.log" 2>&1 &
	WPID=$!
	PIDS+=("$WPID")
	id=$("$BIN/rungctl" submit "${CFG[$job]}" --name "gpu-check-$job") || die 2 "submit of the $job job failed"
	JOB_ID[$job]=$id
	wait_s=$JOB_TIMEOUT
	if [ "$DEADLINE" -gt 0 ]; then
		# leave 30 s for the results; never less than 30 s for a job
		left=$((DEADLINE - SECONDS - 30))
		[ "$left" -lt "$wait_s" ] && wait_s=$left
		[ "$wait_s" -lt 30 ] && wait_s=30
	fi
	say "$job job $id submitted, cap $cap MiB; waiting (at most ${wait_s}s)"
	timeout "$wait_s" "$BIN/rungctl" watch "$id" 2>&1 | tee -a "$LOG"
	state=$("$BIN/rungctl" show "$id" --json | "$PY" -c 'import json, sys; print(json.load(sys.stdin).get("state"))')
	case "$state" in
	succeeded | failed | cancelled | escalated) ;;
	*)
		say "$job job $id still $state after ${wait_s}s: cancelled (cut)"
		echo cut >"$W/cut-$job"
		"$BIN/rungctl" cancel "$id" >>"$LOG" 2>&1
		;;
	esac
	kill -TERM "$WPID" 2>/dev/null
	wait "$WPID" 2>/dev/null
	"$BIN/rungctl" show "$id" --json >"$W/job-$job.json"
	"$BIN/rungctl" attempts "$id" --json >"$W/attempts-$job.json"
	echo "$cap" >"$W/cap-$job"
	# what the memory model learned from these attempts says now of the target on the capped card
	# (POST /v1/plan; informational, beside the measured peaks: docs/GPU.md)
	"$BIN/rungctl" plan "${CFG[$job]}" --gpu-mib "${cap%.*}" --json >"$W/plan-$job.json" 2>>"$LOG" ||
		rm -f "$W/plan-$job.json"
done
kill -TERM "$SAMPLER" 2>/dev/null

# ---- 6. the results and the verdict ----
"$PY" - "$W" "$RESULTS" "$BIN/rungctl" "$FAKE" "${JOBS[@]}" <<-'EOF' 2>&1 | tee -a "$LOG"
import json, os, subprocess, sys
w, out, rungctl, fake, jobs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", sys.argv[5:]
stats = [json.loads(l) for l in open(os.path.join(w, "stats.jsonl"))] if os.path.exists(os.path.join(w, "stats.jsonl")) else []
calib = [json.loads(l) for l in open(os.path.join(w, "calib.jsonl"))]
smi = []
for line in open(os.path.join(w, "smi.log")):
    parts = line.replace(",", " ").split()
    if len(parts) >= 3:
        try:
            smi.append((float(parts[0]), float(parts[1])))
        except ValueError:
            pass
OOM = ("oom_load", "oom_sample", "oom_train_early", "oom_train_intermittent")
res = {"fake": fake, "calibration": calib, "jobs": {}}
bad = []
for job in jobs:
    jd = json.load(open(os.path.join(w, "job-%s.json" % job)))
    at = json.load(open(os.path.join(w, "attempts-%s.json" % job)))
    at = at.get("attempts", at) if isinstance(at, dict) else at
    cap = float(open(os.path.join(w, "cap-%s" % job)).read())
    cut = os.path.exists(os.path.join(w, "cut-%s" % job))
    rows = []
    for i, a in enumerate(at):
        aid = str(a.get("id"))
        st = next((s for s in stats if os.path.basename(os.path.dirname(s.get("config", ""))) == aid), None)
        row = {"number": a.get("number"), "id": aid, "outcome": a.get("outcome"), "class": a.get("class"),
               "action": a.get("action"), "rung": a.get("rung"), "changes": a.get("changes"),
               "config_hash": a.get("config_hash"),
               "phase": (a.get("facts") or {}).get("phase"), "oom_phase": (a.get("facts") or {}).get("oom_phase"),
               "steps": [(a.get("facts") or {}).get("first_step"), (a.get("facts") or {}).get("last_step")]}
        if st:
            row["torch_peak_allocated_mib"] = st.get("peak_allocated_mib")
            row["torch_peak_reserved_mib"] = st.get("peak_reserved_mib")
            row["torch_peaks_by_phase"] = st.get("peaks")
            row["settings"] = st.get("settings")
            win = [u for t, u in smi if st["start"] - 0.1 <= t <= st["end"] + 0.3]
            row["nvidia_smi_peak_used_mib"] = max(win) if win else None
            row["nvidia_smi_samples"] = len(win)
        # the class rungd stored, against rungctl classify on the saved log
        d = os.path.join(w, "work", "attempts", aid)
        if os.path.exists(os.path.join(d, "trainer.log")):
            facts = a.get("facts") or {}
            code = facts.get("exit_code")
            cmd = [rungctl, "classify", "--config", os.path.join(d, "config.json")]
            cmd += ["--exit-code", str(code if isinstance(code, int) else 1)]
            with open(os.path.join(d, "trainer.log")) as f:
                p = subprocess.run(cmd, stdin=f, capture_output=True, text=True)
            try:
                row["classify_again"] = json.loads(p.stdout).get("class")
            except ValueError:
                row["classify_again"] = None
        rows.append(row)
    res["jobs"][job] = {"id": jd.get("id"), "state": jd.get("state"), "cap_mib": cap, "attempts": rows, "cut": cut,
                        # the config the job succeeded with (rungd before 8f9d373 left current_config at
                        # the last scale-up step tried, which may be the one that ran out of memory)
                        "target_config": jd.get("target_config"),
                        "final_config": (jd.get("result") or {}).get("config") or jd.get("current_config"),
                        "result": jd.get("result")}
    # the learned model's view after the run: the target on the capped card, against its measured peak
    pf = os.path.join(w, "plan-%s.json" % job)
    if os.path.exists(pf):
        pl = json.load(open(pf))
        at_cap = next((s for s in pl.get("sizes", []) if int(s.get("gpu_mib", 0)) == int(cap)), None)
        measured = next((max(v["reserved_mib"] for v in c["peaks"].values()) for c in calib
                         if c["name"] == "rung_gpu_%s_calib_target" % job), None)
        if at_cap:
            te = at_cap.get("target_estimate") or {}
            res["jobs"][job]["learned"] = {"observations": pl.get("observations"), "action": at_cap.get("action"),
                                           "rungs": at_cap.get("rungs"), "target_peak_mib": te.get("peak_mib"),
                                           "target_fits": te.get("fits"), "basis": te.get("basis"),
                                           "evidence": te.get("evidence"),
                                           "measured_target_peak_reserved_mib": measured}
    # the verdict
    why = []
    # cut at the deadline: recovered all the same when it had succeeded after its OOM and was
    # searching upwards (scale-up) when cancelled; the attempt the cancel ended is not judged
    ok_rows = [r for r in rows if r["outcome"] == "succeeded"]
    searching = cut and ok_rows and ok_rows[-1]["action"] == "scale_up"
    if searching:
        rows_judged = [r for r in rows if r["outcome"] not in ("cancelled", "running", None)]
    else:
        rows_judged = rows
    if jd.get("state") != "succeeded" and not searching:
        why.append("job ended %s" % jd.get("state"))
    if not rows or rows[0]["outcome"] == "succeeded" or rows[0]["class"] not in OOM:
        why.append("the first attempt did not run out of memory (class %s)" % (rows[0]["class"] if rows else None))
    for r in rows_judged:
        if r["outcome"] != "succeeded" and r["class"] not in OOM and r["class"] != "success":
            why.append("attempt %s: class %s is not an OOM class" % (r["number"], r["class"]))
        if r.get("classify_again") and r["class"] and r["classify_again"] != r["class"]:
            why.append("attempt %s: rungd said %s, rungctl classify on its log says %s" % (r["number"], r["class"], r["classify_again"]))
        if r["outcome"] == "succeeded" and (r.get("torch_peak_reserved_mib") or 0) > cap * 1.001:
            why.append("attempt %s succeeded above the cap" % r["number"])
    for prev, nxt in zip(rows_judged, rows_judged[1:]):
        if prev["action"] in ("retry", "scale_up") and (not prev["changes"] or prev["config_hash"] == nxt["config_hash"]):
            why.append("attempt %s: re-run without a recorded change" % prev["number"])
    if not any(r["outcome"] == "succeeded" for r in rows):
        why.append("no attempt succeeded")
    verdict = "recovered" if not why else "NOT recovered: " + "; ".join(why)
    if searching and not why:
        verdict += " (its scale-up search was cut at the check's deadline, at attempt %s)" % rows[-1]["number"]
    res["jobs"][job]["verdict"] = verdict
    bad += ["%s: %s" % (job, x) for x in why]
res["ok"] = not bad
json.dump(res, open(os.path.join(out, "gpu-check.json"), "w"), indent=2)
md = ["# gpu-check results (%s)" % ("REHEARSAL on the CPU, counted memory" if fake else "real CUDA memory"), ""]
for job, j in res["jobs"].items():
    md += ["## %s job %s: %s, cap %.0f MiB: %s" % (job, j["id"], j["state"], j["cap_mib"], j["verdict"]), "",
           "| # | outcome | class | action | rung | oom phase | torch peak alloc / reserved MiB | nvidia-smi peak MiB | classify again |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in j["attempts"]:
        md.append("| %s | %s | %s | %s | %s | %s | %s / %s | %s | %s |" % (
            r["number"], r["outcome"], r["class"], r["action"], r["rung"], r["oom_phase"],
            r.get("torch_peak_allocated_mib"), r.get("torch_peak_reserved_mib"), r.get("nvidia_smi_peak_used_mib"),
            r.get("classify_again")))
    md.append("")
    for r in j["attempts"]:
        for c in r["changes"] or []:
            md.append("- attempt %s: `%s`" % (r["number"], json.dumps(c)))
    md.append("")
    ln = j.get("learned")
    if ln:
        md += ["Learned model after the run (%s observations), the target on this %d MiB card: predicted peak %s MiB"
               " (fits: %s; %s), measured uncapped %s MiB reserved; a first attempt would run: %s %s" % (
                   ln["observations"], int(j["cap_mib"]), ln["target_peak_mib"], ln["target_fits"], ln["evidence"],
                   ln["measured_target_peak_reserved_mib"], ln["action"], " + ".join(ln["rungs"] or [])), ""]
md += ["## uncapped measurements (2 steps each)", "", "| run | load | baseline sample | train | sample | save (reserved MiB) |",
       "| --- | --- | --- | --- | --- | --- |"]
for c in calib:
    pk = c["peaks"]
    md.append("| %s | %s |" % (c["name"], " | ".join(str(pk.get(ph, {}).get("reserved_mib", "-"))
                                                    for ph in ("load", "baseline_sample", "train", "sample", "save"))))
open(os.path.join(out, "gpu-check.md"), "w").write("\n".join(md) + "\n")
print("\n".join(md))
print("VERDICT: " + ("both jobs recovered" if not bad else "; ".join(bad)))
sys.exit(0 if not bad else 1)
EOF
rc=${PIPESTATUS[0]}
say "results in $RESULTS/gpu-check.json and gpu-check.md (exit $rc)"
exit "$rc"
