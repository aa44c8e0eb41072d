'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { Limiter, ManualClock, decide, SpecError, RETRY_NEVER, DEFAULT_MAX_KEYS } = require('..');

const GCRA = { algorithm: 'gcra', limit: 10, period: '1s', burst: 3 };

test('check defaults to a cost of 1 and returns a plain camelCase object', () => {
  const limiter = new Limiter(GCRA, { clock: new ManualClock(1_000) });
  const d = limiter.check('a');
  assert.deepEqual(d, { allowed: true, limit: 3, remaining: 2, retryAfterMs: 0, resetAfterMs: 100 });
  assert.deepEqual(Object.keys(d).sort(), ['allowed', 'limit', 'remaining', 'resetAfterMs', 'retryAfterMs']);
  assert.equal(JSON.stringify(d), '{"allowed":true,"limit":3,"remaining":2,"retryAfterMs":0,"resetAfterMs":100}');
});

test('the manual clock drives refills, steps back and forth', () => {
  const clock = new ManualClock(1_000);
  const limiter = new Limiter(GCRA, { clock });
  assert.equal(limiter.check('a', 3).allowed, true);
  const denied = limiter.check('a');
  assert.equal(denied.allowed, false);
  assert.equal(denied.retryAfterMs, 100);
  clock.advance(100);
  assert.equal(clock.now(), 1_100);
  assert.equal(limiter.check('a').allowed, true);
  clock.set(0); // a step back deducts nothing and admits nothing new
  assert.equal(limiter.check('a').allowed, false);
  assert.equal(limiter.status('a').remaining, 0);
  clock.set(10_000);
  assert.equal(limiter.status('a').remaining, 3);
});

test('a cost over the ceiling can never pass', () => {
  const limiter = new Limiter(GCRA, { clock: new ManualClock(0) });
  const d = limiter.check('a', 4);
  assert.equal(d.allowed, false);
  assert.equal(d.retryAfterMs, RETRY_NEVER);
  assert.equal(limiter.check('a', 0).remaining, 3, 'nothing consumed');
});

test('keys are bounded by maxKeys, least recently used first', () => {
  const clock = new ManualClock(0);
  const limiter = new Limiter({ algorithm: 'fixed_window', limit: 5, window: '1h' }, { clock, maxKeys: 2 });
  limiter.check('a');
  limiter.check('b');
  limiter.check('a');
  limiter.check('c'); // evicts b
  assert.equal(limiter.size, 2);
  assert.equal(limiter.check('a').remaining, 2, 'a was kept');
  assert.equal(limiter.check('b').remaining, 4, 'b starts afresh');
  assert.equal(new Limiter(GCRA).size, 0);
  assert.equal(DEFAULT_MAX_KEYS, 10000);
});

test('the default clock is the system clock', () => {
  const limiter = new Limiter({ algorithm: 'fixed_window', limit: 2, window: '1h' });
  const t = Date.now();
  const out = decide({ algorithm: 'fixed_window', limit: 2, window: '1h' }, null, t, 1);
  const d = limiter.check('k');
  assert.equal(d.allowed, true);
  // Both decide in the same hour window unless the test straddles its end.
  assert.ok(Math.abs(d.resetAfterMs - out.decision.resetAfterMs) < 1_000);
});

test('decide is the pure transition; state round-trips through JSON text', () => {
  const spec = { algorithm: 'token_bucket', capacity: 2, refill_per_sec: 1 };
  let s = decide(spec, null, 1_000, 2);
  assert.equal(s.changed, true);
  assert.equal(typeof s.stateJson, 'string');
  const denied = decide(spec, s.stateJson, 1_000, 1);
  assert.equal(denied.decision.allowed, false);
  assert.equal(denied.changed, false);
  assert.equal(denied.stateJson, s.stateJson);
  assert.equal(decide(spec, s.stateJson, 2_000, 1).decision.allowed, true);
  assert.equal(decide(JSON.stringify(spec), undefined, 0).decision.remaining, 1, 'cost defaults to 1');
});

test('bad arguments name what is wrong', () => {
  const limiter = new Limiter(GCRA);
  for (const cost of [-1, 1.5, NaN, Infinity]) {
    assert.throws(() => limiter.check('a', cost), (e) => e instanceof SpecError && e.field === 'cost');
  }
  assert.throws(() => new Limiter(GCRA, { maxKeys: 0 }), (e) => e instanceof SpecError && e.field === 'maxKeys');
  assert.throws(() => new Limiter(GCRA, { clock: { now: () => 0 } }), (e) => e instanceof SpecError && e.field === 'clock');
  assert.throws(() => new Limiter(42), (e) => e instanceof SpecError && e.field === 'spec');
  assert.throws(() => new Limiter({ algorithm: 'gcra', limit: 10, period: 60 }), /invalid `period`/);
});

test('allowed admits and spends exactly as check does', () => {
  const specs = [GCRA, { algorithm: 'sliding_log', limit: 3, window: '1s' }, { algorithm: 'token_bucket', capacity: 4, refill_per_sec: 2 }];
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
});

test('keys of every length and script are distinct keys, read whole', () => {
  const limiter = new Limiter({ algorithm: 'fixed_window', limit: 1, window: '1h' }, { clock: new ManualClock(0) });
  // Around the addon's 256-byte stack buffer, with 1- to 4-byte characters
  // ending at the boundary, and keys differing only in their last character.
  const keys = [];
  for (const ch of ['a', 'é', '€', '😀']) {
    for (let n = 240; n <= 262; n++) {
      const stem = 'x'.repeat(n);
      keys.push(stem + ch, stem + ch + 'a', stem + ch + 'b');
    }
  }
  keys.push('', 'a\u0000b', 'a\u0000c', 'z'.repeat(100_000), 'z'.repeat(100_000) + '!');
  const unique = [...new Set(keys)];
  const big = new Limiter({ algorithm: 'fixed_window', limit: 1, window: '1h' }, { clock: new ManualClock(0), maxKeys: unique.length });
  for (const key of unique) assert.equal(big.check(key).allowed, true, `first use of a ${key.length}-char key`);
  for (const key of unique) assert.equal(big.allowed(key), false, `second use of a ${key.length}-char key`);
  assert.equal(big.size, unique.length);
  assert.equal(limiter.check('k').allowed, true);
});

test('bad keys and costs throw through allowed too', () => {
  const limiter = new Limiter(GCRA);
  for (const cost of [-1, 1.5, NaN, Infinity]) {
    assert.throws(() => limiter.allowed('a', cost), (e) => e instanceof SpecError && e.field === 'cost');
  }
  for (const key of [undefined, 42, null, {}]) {
    let message;
    assert.throws(() => limiter.check(key), (e) => ((message = e.message), /String/.test(message)));
    assert.throws(() => limiter.allowed(key), (e) => e.message === message);
  }
  assert.equal(limiter.size, 0, 'nothing was decided');
});
