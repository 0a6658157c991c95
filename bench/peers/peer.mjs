// Peer queues for `make bench` (scripts/bench.sh): graphile-worker and pg-boss on the same PostgreSQL as rung,
// submit (enqueue) and claim+complete, one job at a time and batched, at a given concurrency. Prints one JSON line
// per run in rung-bench's raw format ({scenario, system, setting, run, metrics}); rung-bench report tabulates them.
// usage: node peer.mjs --peer graphile|pg-boss --scenario submit|cycle --mode one|batch --conc C --seconds S
//                      --runs N --url postgresql://... [--payload FILE] [--batch B]
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const peer = args.peer;
const scenario = args.scenario;
const mode = args.mode || "one";
const conc = Number(args.conc || 16);
const seconds = Number(args.seconds || 10);
const runs = Number(args.runs || 1);
const batch = Number(args.batch || 100);
const url = args.url;
const payload = args.payload ? JSON.parse(readFileSync(args.payload, "utf8")) : { n: 1 };
const QUEUE = "rung_bench";

if (!["graphile", "pg-boss"].includes(peer) || !["submit", "cycle"].includes(scenario) || !url) {
  console.error("peer.mjs: --peer graphile|pg-boss --scenario submit|cycle --url URL are required");
  process.exit(2);
}

const now = () => Number(process.hrtime.bigint()) / 1e6; // ms
const pct = (v, p) => {
  if (!v.length) return null;
  v.sort((a, b) => a - b);
  return v[Math.min(v.length - 1, Math.max(0, Math.ceil((p / 100) * v.length) - 1))];
};
const emit = (run, metrics) =>
  process.stdout.write(
    JSON.stringify({ scenario, system: peer, setting: `${mode} c=${conc}`, run, metrics }) + "\n",
  );

// CPU per job over a window, as rung-bench reports it (bench/cpu.sh through BENCH_CPU_HOOK: Postgres), plus this
// node process's own (the peer's client side). Without the hook, nothing is added.
const cpuHook = process.env.BENCH_CPU_HOOK;
// A failure to measure loses the CPU figures only, never the run's rates.
const cpuEnv = () => ({ ...process.env, RUNGD_PID: "", RUNG_BENCH_PID: "" });
const cpuBegin = () => {
  try {
    if (cpuHook) execFileSync(cpuHook, ["begin"], { env: cpuEnv() });
  } catch (e) {
    console.error("peer.mjs: cpu hook begin:", e.message);
  }
  return process.cpuUsage();
};
const cpuEnd = (since, units) => {
  if (!cpuHook || !(units > 0)) return {};
  try {
    const own = process.cpuUsage(since);
    const pg = JSON.parse(execFileSync(cpuHook, ["end", String(units)], { env: cpuEnv() }));
    if (typeof pg.cpu_postgres_ms !== "number") return {};
    const client = (own.user + own.system) / 1000 / units;
    const r3 = (v) => Math.round(v * 1000) / 1000;
    return { cpu_postgres_ms: pg.cpu_postgres_ms, cpu_client_ms: r3(client), cpu_total_ms: r3(pg.cpu_postgres_ms + client) };
  } catch (e) {
    console.error("peer.mjs: cpu hook end:", e.message);
    return {};
  }
};

// conc loops call op() back to back until the window ends; op returns how many jobs it handled.
async function window(op) {
  const lat = [];
  let jobs = 0;
  const cpu0 = cpuBegin();
  const t0 = now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (now() < end) {
        const t = now();
        const n = await op();
        lat.push(now() - t);
        jobs += n;
        if (n === 0) await new Promise((r) => setTimeout(r, 5)); // drained: do not spin
      }
    }),
  );
  const secs = (now() - t0) / 1000;
  return { jobs_per_s: jobs / secs, p50_ms: pct(lat, 50), p99_ms: pct(lat, 99), jobs, ...cpuEnd(cpu0, jobs) };
}

async function graphile() {
  const gw = await import("graphile-worker");
  const pool = conc + 4;
  const utils = await gw.makeWorkerUtils({ connectionString: url, maxPoolSize: pool });
  await utils.migrate();
  const specs = (n) => Array.from({ length: n }, () => ({ identifier: "bench", payload }));
  try {
    for (let run = 1; run <= runs; run++) {
      if (scenario === "submit") {
        const op =
          mode === "one"
            ? async () => (await utils.addJob("bench", payload), 1)
            : async () => (await utils.addJobs(specs(batch)), batch);
        emit(run, await window(op));
        continue;
      }
      // cycle: prefill (untimed), then a runner with a no-op task; completed = jobs deleted in the window
      const want = Math.ceil(seconds * (mode === "one" ? 3000 : 15000));
      for (let left = want; left > 0; left -= 1000) await utils.addJobs(specs(Math.min(1000, left)));
      const count = async () =>
        Number((await utils.withPgClient((c) => c.query("SELECT count(*) AS n FROM graphile_worker._private_jobs"))).rows[0].n);
      let done = 0;
      let started;
      const first = new Promise((r) => (started = r));
      const preset =
        mode === "one"
          ? { worker: { connectionString: url, maxPoolSize: pool, concurrentJobs: conc, completeJobBatchDelay: -1, failJobBatchDelay: -1 } }
          : {
              worker: {
                connectionString: url, maxPoolSize: pool, concurrentJobs: conc,
                localQueue: { size: batch }, completeJobBatchDelay: 5, failJobBatchDelay: 5,
              },
            };
      const runner = await gw.run({
        preset, noHandleSignals: true, logger: new gw.Logger(() => () => {}),
        taskList: { bench: async () => { if (done++ === 0) started(); } },
      });
      await first; // the window starts once the runner works (its start-up is not timed)
      const cpu0 = cpuBegin(); // (a synchronous spawn: before the window's first count)
      const before = await count();
      const t0 = now();
      await new Promise((r) => setTimeout(r, seconds * 1000));
      const completed = before - (await count());
      const secs = (now() - t0) / 1000;
      const cpu = cpuEnd(cpu0, completed);
      await runner.stop();
      emit(run, { jobs_per_s: completed / secs, jobs: completed, drained: (await count()) === 0 ? 1 : 0, ...cpu });
      await utils.withPgClient((c) => c.query("DELETE FROM graphile_worker._private_jobs"));
    }
  } finally {
    await utils.release();
  }
}

async function pgboss() {
  const { PgBoss } = await import("pg-boss");
  const boss = new PgBoss({ connectionString: url, max: conc + 4, supervise: false, schedule: false });
  boss.on("error", (e) => console.error("pg-boss:", e.message));
  await boss.start();
  await boss.createQueue(QUEUE).catch(() => {});
  const jobs = (n) => Array.from({ length: n }, () => ({ data: payload }));
  try {
    for (let run = 1; run <= runs; run++) {
      if (scenario === "submit") {
        const op =
          mode === "one"
            ? async () => (await boss.send(QUEUE, payload), 1)
            : async () => (await boss.insert(QUEUE, jobs(batch)), batch);
        emit(run, await window(op));
        continue;
      }
      // cycle: prefill (untimed), then conc loops of fetch (claim) and complete, as pgbench's claim+complete
      const want = Math.ceil(seconds * (mode === "one" ? 3000 : 15000));
      for (let left = want; left > 0; left -= 1000) await boss.insert(QUEUE, jobs(Math.min(1000, left)));
      const size = mode === "one" ? 1 : batch;
      const op = async () => {
        const got = await boss.fetch(QUEUE, { batchSize: size });
        if (!got.length) return 0;
        await boss.complete(QUEUE, got.map((j) => j.id));
        return got.length;
      };
      emit(run, await window(op));
      await boss.deleteAllJobs(QUEUE);
    }
  } finally {
    await boss.stop({ graceful: false, wait: true });
  }
}

try {
  await (peer === "graphile" ? graphile() : pgboss());
  process.exit(0);
} catch (e) {
  console.error(`peer.mjs ${peer} ${scenario} ${mode}:`, e.stack || e.message);
  process.exit(1);
}
