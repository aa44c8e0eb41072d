'use strict';
// The `--target nodejs` build, loaded with require(), replays the shared vectors.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { Limiter, ManualClock, decide } = require('leasehold-wasm');

const vectors = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'vectors.json'), 'utf8'));

test('decide replays every step bit-identically', () => {
  let steps = 0;
  for (const c of vectors.cases) {
    for (const [i, s] of c.steps.entries()) {
      const out = decide(c.spec, s.stateIn, s.nowMs, s.cost);
      assert.deepEqual(out.decision, s.decision, `${c.name} step ${i}`);
      assert.equal(out.stateJson, s.stateOut, `${c.name} step ${i}`);
      assert.equal(out.changed, s.changed, `${c.name} step ${i}`);
      steps++;
    }
  }
  assert.ok(steps > 700);
});

test('Limiter with a ManualClock replays the chained cases', () => {
  for (const c of vectors.cases.filter((c) => c.chained)) {
    const clock = new ManualClock(0);
    const limiter = new Limiter(JSON.stringify(c.spec), { clock, maxKeys: 4 });
    for (const [i, s] of c.steps.entries()) {
      clock.set(s.nowMs);
      assert.deepEqual(limiter.check('key', s.cost), s.decision, `${c.name} step ${i}`);
      assert.deepEqual(limiter.status('key'), s.status, `${c.name} step ${i} status`);
    }
  }
});

test('an invalid spec throws a SpecError naming the field; bad state a StateError', () => {
  for (const v of vectors.specErrors) {
    for (const make of [() => new Limiter(v.spec), () => decide(v.spec, null, 0, 1)]) {
      assert.throws(make, (e) => {
        assert.ok(e instanceof Error);
        assert.equal(e.name, 'SpecError');
        assert.equal(e.code, 'ERR_LEASEHOLD_SPEC');
        assert.equal(e.field, v.field);
        assert.equal(e.message, v.message);
        return true;
      });
    }
  }
  for (const v of vectors.stateErrors) {
    assert.throws(() => decide(v.spec, v.stateJson, 0, 1), (e) => e.name === 'StateError' && e.message === v.message);
  }
});

test('defaults, the system clock, bounded keys and argument errors', () => {
  const spec = { algorithm: 'fixed_window', limit: 5, window: '1h' };
  const limiter = new Limiter(spec, { maxKeys: 2 });
  const expected = decide(spec, null, Date.now(), 1).decision;
  const d = limiter.check('a');
  assert.equal(d.allowed, true);
  assert.equal(d.remaining, 4, 'cost defaults to 1');
  assert.ok(Math.abs(d.resetAfterMs - expected.resetAfterMs) < 1000, 'Date.now() is the default clock');
  limiter.check('b');
  limiter.check('a');
  limiter.check('c'); // evicts b, the least recently used
  assert.equal(limiter.size, 2);
  assert.equal(limiter.check('b').remaining, 4);
  assert.equal(limiter.reset('b'), true);

  // Any object with now() is a clock.
  let t = 0;
  const custom = new Limiter({ algorithm: 'gcra', limit: 1, period: '1s' }, { clock: { now: () => t } });
  assert.equal(custom.check('k').allowed, true);
  assert.equal(custom.check('k').allowed, false);
  t = 1000;
  assert.equal(custom.check('k').allowed, true);

  const field = (f) => (e) => e.name === 'SpecError' && e.field === f;
  assert.throws(() => limiter.check('a', -1), field('cost'));
  assert.throws(() => limiter.check('a', 0.5), field('cost'));
  assert.throws(() => new Limiter(spec, { maxKeys: 0 }), field('maxKeys'));
  assert.throws(() => new Limiter(spec, { clock: {} }), field('clock'));
  assert.throws(() => new Limiter(42), field('spec'));
  assert.equal(decide(spec, undefined, 0).stateJson, '{"w":0.0,"n":1}');
});

test('allowed admits and spends exactly as check does', () => {
  const specs = [
    { algorithm: 'gcra', limit: 10, period: '1s', burst: 3 },
    { algorithm: 'sliding_log', limit: 3, window: '1s' },
    { algorithm: 'token_bucket', capacity: 4, refill_per_sec: 2 },
  ];
  for (const spec of specs) {
    const a = new ManualClock(5_000);
    const b = new ManualClock(5_000);
    const viaCheck = new Limiter(spec, { clock: a, maxKeys: 3 });
    const viaAllowed = new Limiter(spec, { clock: b, maxKeys: 3 });
    for (let i = 0; i < 60; i++) {
      const key = `k${i % 4}`;
      const cost = i % 5 === 0 ? 2 : i % 7 === 0 ? 0 : 1;
      assert.equal(viaAllowed.allowed(key, cost), viaCheck.check(key, cost).allowed, `step ${i}`);
      assert.deepEqual(viaAllowed.status(key), viaCheck.status(key), `step ${i}`);
      assert.equal(viaAllowed.size, viaCheck.size);
      a.advance(90);
      b.advance(90);
    }
  }
  assert.throws(() => new Limiter(specs[0]).allowed('k', 1.5), /invalid `cost`/);
});
