'use strict';
// The socket client against a small fake daemon speaking RESP2 on a Unix socket.
const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { Client, ConnectionError, DaemonError, LeaseholdError, defaultSocketPath } = require('..');

/** Parses complete RESP arrays of bulk strings (what clients send) from `buf`. */
function parseCommands(buf) {
  const commands = [];
  let pos = 0;
  const line = (at) => {
    const eol = buf.indexOf('\r\n', at);
    return eol < 0 ? null : [buf.toString('latin1', at, eol), eol + 2];
  };
  outer: for (;;) {
    const head = line(pos);
    if (!head || head[0][0] !== '*') break;
    let p = head[1];
    const args = [];
    for (let i = 0; i < Number(head[0].slice(1)); i++) {
      const len = line(p);
      if (!len) break outer;
      const n = Number(len[0].slice(1));
      if (buf.length < len[1] + n + 2) break outer;
      args.push(buf.toString('utf8', len[1], len[1] + n));
      p = len[1] + n + 2;
    }
    commands.push(args);
    pos = p;
  }
  return [commands, buf.subarray(pos)];
}

/** A fake daemon: answers THROTTLE/STATUS with fixed arrays, records what it got. */
async function fakeDaemon(t, { chunked = false } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'leasehold-test-'));
  const socketPath = path.join(dir, 'leasehold.sock');
  const received = [];
  const server = net.createServer((conn) => {
    let buf = Buffer.alloc(0);
    conn.on('data', (chunk) => {
      let cmds;
      [cmds, buf] = parseCommands(Buffer.concat([buf, chunk]));
      for (const args of cmds) {
        received.push(args);
        let reply;
        if (args[0] === 'THROTTLE' && args[1] === 'api' && args.length >= 3) {
          reply = args[3] === '5' ? '*5\r\n:0\r\n:100\r\n:0\r\n:250\r\n:60000\r\n' : '*5\r\n:1\r\n:100\r\n:99\r\n:-1\r\n:600\r\n';
        } else if (args[0] === 'STATUS' && args[1] === 'api') {
          reply = '*5\r\n:1\r\n:100\r\n:42\r\n:-1\r\n:3500\r\n';
        } else if (args[0] === 'HANGUP') {
          conn.destroy();
          return;
        } else {
          reply = `-ERR unknown limit '${args[1]}'\r\n`;
        }
        if (chunked) {
          // Deliver the reply a byte at a time to exercise partial parsing.
          for (const ch of reply) conn.write(ch);
        } else {
          conn.write(reply);
        }
      }
    });
  });
  await new Promise((resolve) => server.listen(socketPath, resolve));
  t.after(() => {
    server.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { socketPath, received };
}

test('throttle and status send RESP commands and map the reply arrays', async (t) => {
  const { socketPath, received } = await fakeDaemon(t);
  const client = new Client({ path: socketPath });
  t.after(() => client.close());
  assert.deepEqual(await client.throttle('api', 'user:1', 2), {
    allowed: true, limit: 100, remaining: 99, retryAfterMs: 0, resetAfterMs: 600,
  });
  assert.deepEqual(await client.throttle('api', 'user:1', 5), {
    allowed: false, limit: 100, remaining: 0, retryAfterMs: 250, resetAfterMs: 60000,
  });
  assert.deepEqual(await client.status('api', 'user:1'), {
    allowed: true, limit: 100, remaining: 42, retryAfterMs: 0, resetAfterMs: 3500,
  });
  await client.throttle('api', 'ключ ✓');
  assert.deepEqual(received, [
    ['THROTTLE', 'api', 'user:1', '2'],
    ['THROTTLE', 'api', 'user:1', '5'],
    ['STATUS', 'api', 'user:1'],
    ['THROTTLE', 'api', 'ключ ✓', '1'],
  ]);
});

test('concurrent requests are pipelined and answered in order', async (t) => {
  const { socketPath, received } = await fakeDaemon(t, { chunked: true });
  const client = new Client({ path: socketPath });
  t.after(() => client.close());
  const replies = await Promise.all(
    Array.from({ length: 20 }, (_, i) => (i % 3 === 0 ? client.status('api', `k${i}`) : client.throttle('api', `k${i}`, i % 2 ? 5 : 1))),
  );
  assert.equal(received.length, 20);
  replies.forEach((d, i) => {
    const want = i % 3 === 0 ? 42 : i % 2 ? 0 : 99;
    assert.equal(d.remaining, want, `reply ${i}`);
  });
});

test('an error reply rejects that request only, with DaemonError', async (t) => {
  const { socketPath } = await fakeDaemon(t);
  const client = new Client({ path: socketPath });
  t.after(() => client.close());
  const [bad, good] = await Promise.allSettled([client.throttle('nope', 'k'), client.throttle('api', 'k')]);
  assert.equal(bad.status, 'rejected');
  assert.ok(bad.reason instanceof DaemonError && bad.reason instanceof LeaseholdError);
  assert.equal(bad.reason.message, "ERR unknown limit 'nope'");
  assert.equal(good.value.allowed, true);
});

test('no daemon running: a ConnectionError naming the socket path', async () => {
  const missing = path.join(os.tmpdir(), `leasehold-absent-${process.pid}.sock`);
  const client = new Client({ path: missing });
  await assert.rejects(client.throttle('api', 'k'), (e) => {
    assert.ok(e instanceof ConnectionError, String(e));
    assert.equal(e.path, missing);
    assert.equal(e.syscallCode, 'ENOENT');
    assert.ok(e.message.includes(missing), e.message);
    assert.match(e.message, /daemon/);
    return true;
  });
  // A stale socket file with nobody listening is refused the same way.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'leasehold-test-'));
  const stale = path.join(dir, 'leasehold.sock');
  const server = net.createServer().listen(stale);
  await new Promise((r) => server.on('listening', r));
  await new Promise((r) => server.close(r));
  fs.writeFileSync(stale, ''); // leave a non-socket file behind
  await assert.rejects(new Client({ path: stale }).status('api', 'k'), (e) => e instanceof ConnectionError && e.message.includes(stale));
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a connection dropped mid-request rejects pending requests, and the next request reconnects', async (t) => {
  const { socketPath } = await fakeDaemon(t);
  const client = new Client({ path: socketPath });
  t.after(() => client.close());
  await assert.rejects(client._command(['HANGUP']), (e) => e instanceof ConnectionError && /closed/.test(e.message));
  assert.equal((await client.throttle('api', 'k')).allowed, true);
});

test('the default socket path follows XDG_RUNTIME_DIR', () => {
  const saved = process.env.XDG_RUNTIME_DIR;
  try {
    process.env.XDG_RUNTIME_DIR = '/run/user/1234';
    assert.equal(defaultSocketPath(), '/run/user/1234/leasehold.sock');
    assert.equal(new Client().path, '/run/user/1234/leasehold.sock');
    delete process.env.XDG_RUNTIME_DIR;
    assert.equal(defaultSocketPath(), `/tmp/leasehold-${process.getuid()}/leasehold.sock`, 'the daemon\'s private directory');
  } finally {
    if (saved === undefined) delete process.env.XDG_RUNTIME_DIR;
    else process.env.XDG_RUNTIME_DIR = saved;
  }
});
