'use strict';
// The socket client against the real daemon (the `leasehold` binary named by
// LEASEHOLD_BIN; tests/run.sh sets it to the binary its test stage built).
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawn } = require('node:child_process');
const { Client, DaemonError, Limiter, ManualClock } = require('..');

const bin = process.env.LEASEHOLD_BIN;

test('throttle and status against a real leasehold daemon', { skip: !bin && 'set LEASEHOLD_BIN to the leasehold binary' }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'leasehold-node-daemon-'));
  const socket = path.join(dir, 'leasehold.sock');
  const daemon = spawn(bin, ['serve', '--store', 'memory', '--socket', socket, '--http', '127.0.0.1:0'], { stdio: 'ignore' });
  t.after(() => daemon.kill('SIGTERM'));
  for (let i = 0; i < 100 && !fs.existsSync(socket); i++) await new Promise((r) => setTimeout(r, 50));

  const client = new Client({ path: socket });
  t.after(() => client.close());
  // The default `api` limit: GCRA 1000 per minute, bursts of 100.
  const first = await client.throttle('api', 'node-user', 1);
  assert.deepEqual({ ...first }, { allowed: true, limit: 100, remaining: 99, retryAfterMs: 0, resetAfterMs: 60 });
  const heavy = await client.throttle('api', 'node-user', 99);
  assert.equal(heavy.allowed, true);
  assert.equal(heavy.remaining, 0);
  const denied = await client.throttle('api', 'node-user', 1);
  assert.equal(denied.allowed, false);
  assert.ok(denied.retryAfterMs > 0 && denied.retryAfterMs <= 60, `${denied.retryAfterMs}`);
  const status = await client.status('api', 'someone-else');
  assert.equal(status.remaining, 100);
  await assert.rejects(client.throttle('no-such-limit', 'k', 1), (e) => e instanceof DaemonError && /unknown limit/.test(e.message));

  // The daemon and the in-process limiter agree on the same limit.
  const local = new Limiter({ algorithm: 'gcra', limit: 1000, period: '60s', burst: 100 }, { clock: new ManualClock(0) });
  assert.equal(local.check('x', 1).remaining, first.remaining);
});
