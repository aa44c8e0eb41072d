'use strict';
// A Promise client for the leasehold daemon's Unix socket. The daemon speaks
// RESP2: `THROTTLE <limit> <key> [<cost>]` and `STATUS <limit> <key>` answer
// `[allowed 1|0, limit, remaining, retry_after_ms (-1 if allowed), reset_after_ms]`.
// One connection, opened on first use, requests pipelined in order.

const net = require('node:net');
const path = require('node:path');
const { ConnectionError, DaemonError, LeaseholdError } = require('./errors.js');

/** The daemon's default socket: `$XDG_RUNTIME_DIR/leasehold.sock`, else `/tmp/leasehold-<uid>/leasehold.sock`. */
function defaultSocketPath() {
  const dir = process.env.XDG_RUNTIME_DIR || `/tmp/leasehold-${process.getuid()}`;
  return path.join(dir, 'leasehold.sock');
}

function encode(args) {
  let out = `*${args.length}\r\n`;
  for (const a of args) {
    const s = String(a);
    out += `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
  }
  return out;
}

const INCOMPLETE = Symbol('incomplete');

/** Parses one RESP2 value from `buf` at `pos`: `[value, nextPos]` or INCOMPLETE. */
function parse(buf, pos) {
  if (pos >= buf.length) return INCOMPLETE;
  const eol = buf.indexOf('\r\n', pos);
  if (eol < 0) return INCOMPLETE;
  const type = String.fromCharCode(buf[pos]);
  const line = buf.toString('utf8', pos + 1, eol);
  const next = eol + 2;
  switch (type) {
    case '+':
      return [line, next];
    case '-':
      return [new DaemonError(line), next];
    case ':':
      return [Number(line), next];
    case '$': {
      const n = Number(line);
      if (n < 0) return [null, next];
      if (buf.length < next + n + 2) return INCOMPLETE;
      return [buf.toString('utf8', next, next + n), next + n + 2];
    }
    case '*': {
      const n = Number(line);
      if (n < 0) return [null, next];
      const items = [];
      let p = next;
      for (let i = 0; i < n; i++) {
        const r = parse(buf, p);
        if (r === INCOMPLETE) return INCOMPLETE;
        items.push(r[0]);
        p = r[1];
      }
      return [items, p];
    }
    default:
      throw new LeaseholdError(`unexpected RESP reply type ${JSON.stringify(type)} from the daemon`);
  }
}

function toDecision(reply) {
  if (!Array.isArray(reply) || reply.length !== 5 || !reply.every(Number.isInteger)) {
    throw new LeaseholdError(`unexpected reply from the daemon: ${JSON.stringify(reply)}`);
  }
  const [allowed, limit, remaining, retryAfterMs, resetAfterMs] = reply;
  return { allowed: allowed === 1, limit, remaining, retryAfterMs: Math.max(0, retryAfterMs), resetAfterMs };
}

class Client {
  /**
   * @param {{path?: string, timeoutMs?: number}} [options]
   */
  constructor(options = {}) {
    this.path = options.path || defaultSocketPath();
    this.timeoutMs = options.timeoutMs ?? 5000;
    this._socket = null;
    this._pending = [];
    this._buf = Buffer.alloc(0);
  }

  /** `THROTTLE limit key cost`: admits `cost` units of `limit` for `key`, or none. */
  throttle(limit, key, cost = 1) {
    return this._command(['THROTTLE', limit, key, cost]).then(toDecision);
  }

  /** `STATUS limit key`: the key's standing, consuming nothing. */
  status(limit, key) {
    return this._command(['STATUS', limit, key]).then(toDecision);
  }

  /** Closes the connection; pending requests fail. */
  close() {
    if (this._socket) this._socket.destroy();
    this._socket = null;
  }

  _connect() {
    const socket = net.createConnection({ path: this.path });
    socket.setNoDelay?.(true);
    socket.on('data', (chunk) => this._onData(chunk));
    socket.on('error', (err) => this._fail(socket, err));
    socket.on('close', () => this._fail(socket, null));
    socket.setTimeout(this.timeoutMs, () => {
      if (this._pending.length) {
        const err = Object.assign(new Error(`no reply within ${this.timeoutMs} ms`), { code: 'ETIMEDOUT' });
        socket.destroy(err);
      }
    });
    this._socket = socket;
    this._buf = Buffer.alloc(0);
    return socket;
  }

  _fail(socket, err) {
    if (socket !== this._socket) return;
    this._socket = null;
    const pending = this._pending;
    this._pending = [];
    const why = err ? `${err.code ? err.code + ': ' : ''}${err.message}` : 'connection closed before a reply';
    const hint =
      err && (err.code === 'ENOENT' || err.code === 'ECONNREFUSED') ? ' (is the leasehold daemon running?)' : '';
    for (const p of pending) {
      p.reject(new ConnectionError(`leasehold daemon not reachable at ${this.path}: ${why}${hint}`, this.path, err));
    }
  }

  _onData(chunk) {
    this._buf = this._buf.length ? Buffer.concat([this._buf, chunk]) : chunk;
    let pos = 0;
    for (;;) {
      let r;
      try {
        r = parse(this._buf, pos);
      } catch (e) {
        this._socket.destroy(e);
        return;
      }
      if (r === INCOMPLETE) break;
      pos = r[1];
      const p = this._pending.shift();
      if (!p) continue;
      if (r[0] instanceof DaemonError) p.reject(r[0]);
      else p.resolve(r[0]);
    }
    this._buf = pos === this._buf.length ? Buffer.alloc(0) : this._buf.subarray(pos);
  }

  _command(args) {
    return new Promise((resolve, reject) => {
      const socket = this._socket || this._connect();
      this._pending.push({ resolve, reject });
      socket.write(encode(args));
    });
  }
}

module.exports = { Client, defaultSocketPath };
