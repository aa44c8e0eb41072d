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

function bestOf(runs, fn) {
  let best = Infinity;
  for (let r = 0; r < runs; r++) {
    const t0 = process.hrtime.bigint();
    fn();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / N);
  }
  return best;
}

async function bestOfAsync(runs, fn) {
  let best = Infinity;
  for (let r = 0; r < runs; r++) {
    const t0 = process.hrtime.bigint();
    await fn();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / N);
  }
  return best;
}

async function main() {
  const node = require(path.join(__dirname, '..', 'node'));
  const napiLimiter = new node.Limiter(SPEC);
  report('leasehold-node Limiter.check (napi)', bestOf(5, () => {
    for (let i = 0; i < N; i++) if (!napiLimiter.check(KEYS[i % 1000]).allowed) throw new Error('denied');
  }), 'ours', 0.5);
  report('leasehold-node Limiter.allowed (napi)', bestOf(5, () => {
    for (let i = 0; i < N; i++) if (!napiLimiter.allowed(KEYS[i % 1000])) throw new Error('denied');
  }), 'split');

  const wasm = require(path.join(__dirname, '..', 'wasm', 'pkg', 'node', 'leasehold_wasm.js'));
  const wasmLimiter = new wasm.Limiter(SPEC);
  report('leasehold-wasm Limiter.check (wasm in Node)', bestOf(5, () => {
    for (let i = 0; i < N; i++) if (!wasmLimiter.check(KEYS[i % 1000]).allowed) throw new Error('denied');
  }), 'ours', 1.0);
  report('leasehold-wasm Limiter.allowed (wasm in Node)', bestOf(5, () => {
    for (let i = 0; i < N; i++) if (!wasmLimiter.allowed(KEYS[i % 1000])) throw new Error('denied');
  }), 'split');

  const { RateLimiterMemory } = require(path.join(__dirname, '..', 'node', 'node_modules', 'rate-limiter-flexible'));
  const peer = new RateLimiterMemory({ points: 1e9, duration: 1 });
  report('rate-limiter-flexible RateLimiterMemory.consume (await)', await bestOfAsync(5, async () => {
    for (let i = 0; i < N; i++) await peer.consume(KEYS[i % 1000]);
  }), 'peer');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
