'use strict';
// ns per in-process check from Node: leasehold-node (napi), leasehold-wasm
// (nodejs build) and rate-limiter-flexible's RateLimiterMemory, same run.
// Prints one JSON line per implementation. Used by ../bench.sh.
const path = require('node:path');
const N = Number(process.env.BENCH_N || 300000);
const KEYS = Array.from({ length: 1000 }, (_, i) => `user:${i}`);
// Generous enough that every check is admitted (the common, hot path).
const SPEC = { algorithm: 'gcra', limit: 1e9, period: '1s' };

// role: 'ours' (a goal row), 'split' (a breakdown), 'peer' (what ratios are
// taken against).
function report(impl, nsPerOp, role = 'ours', goal = undefined) {
  console.log(JSON.stringify({ lang: 'Node ' + process.version, impl, ns: Math.round(nsPerOp), role, goal }));
}

// Each run times every implementation once, in turn, and each keeps its best
// of RUNS: interleaving exposes all of them to the same load (the bench
// machine is shared), so the ratios hold even when absolute times move.
const RUNS = 5;

function timeSync(fn) {
  const t0 = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - t0) / N;
}

async function timeAsync(fn) {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / N;
}

async function main() {
  const node = require(path.join(__dirname, '..', 'node'));
  const napiLimiter = new node.Limiter(SPEC);
  const wasm = require(path.join(__dirname, '..', 'wasm', 'pkg', 'node', 'leasehold_wasm.js'));
  const wasmLimiter = new wasm.Limiter(SPEC);
  const { RateLimiterMemory } = require(path.join(__dirname, '..', 'node', 'node_modules', 'rate-limiter-flexible'));
  const peer = new RateLimiterMemory({ points: 1e9, duration: 1 });

  const cases = [
    ['leasehold-node Limiter.check (napi)', 'ours', 0.5, () => {
      for (let i = 0; i < N; i++) if (!napiLimiter.check(KEYS[i % 1000]).allowed) throw new Error('denied');
    }],
    ['leasehold-node Limiter.allowed (napi)', 'split', undefined, () => {
      for (let i = 0; i < N; i++) if (!napiLimiter.allowed(KEYS[i % 1000])) throw new Error('denied');
    }],
    ['leasehold-wasm Limiter.check (wasm in Node)', 'ours', 1.0, () => {
      for (let i = 0; i < N; i++) if (!wasmLimiter.check(KEYS[i % 1000]).allowed) throw new Error('denied');
    }],
    ['leasehold-wasm Limiter.allowed (wasm in Node)', 'split', undefined, () => {
      for (let i = 0; i < N; i++) if (!wasmLimiter.allowed(KEYS[i % 1000])) throw new Error('denied');
    }],
  ];
  const best = new Array(cases.length + 1).fill(Infinity);
  for (let r = 0; r < RUNS; r++) {
    for (const [i, [, , , fn]] of cases.entries()) best[i] = Math.min(best[i], timeSync(fn));
    best[cases.length] = Math.min(best[cases.length], await timeAsync(async () => {
      for (let i = 0; i < N; i++) await peer.consume(KEYS[i % 1000]);
    }));
  }
  for (const [i, [impl, role, goal]] of cases.entries()) report(impl, best[i], role, goal);
  report('rate-limiter-flexible RateLimiterMemory.consume (await)', best[cases.length], 'peer');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
