// The package loads with `import` as well as `require`, to the same natives.
import test from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import leasehold, { Limiter, ManualClock, decide, Client, SpecError } from 'leasehold-node';

const require = createRequire(import.meta.url);

test('import and require give the same API', () => {
  const cjs = require('leasehold-node');
  assert.equal(Limiter, cjs.Limiter);
  assert.equal(leasehold.decide, decide);
  assert.equal(typeof Client, 'function');
  const limiter = new Limiter({ algorithm: 'quota', limit: 2, window: '1d' }, { clock: new ManualClock(0) });
  assert.equal(limiter.check('k', 2).allowed, true);
  assert.equal(limiter.check('k').allowed, false);
  assert.throws(() => decide({ algorithm: 'quota', limit: 2 }, null, 0, 1), SpecError);
});
