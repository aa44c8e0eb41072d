'use strict';
// leasehold-node: in-process rate limits with leasehold's core algorithms
// (the napi-rs addon `leasehold.node`, built by build.sh) and a client for the
// leasehold daemon's Unix socket.

const native = require('./leasehold.node');
const errors = require('./errors.js');
const { Client, defaultSocketPath } = require('./client.js');

const { fromNative } = errors;

/** `retryAfterMs` of a request that can never pass (2^53 - 1). */
const RETRY_NEVER = Number.MAX_SAFE_INTEGER;
/** Keys a Limiter keeps by default. */
const DEFAULT_MAX_KEYS = 10000;

function specText(spec) {
  if (typeof spec === 'string') return spec;
  if (spec === null || typeof spec !== 'object') {
    throw new errors.SpecError(`invalid \`spec\`: must be an object or JSON text (got ${spec})`, 'spec');
  }
  return JSON.stringify(spec);
}

/** A clock that moves only when told: `advance(ms)`, `set(ms)`, `now()`. */
const { ManualClock } = native;

/**
 * An in-process limiter: one limit spec, a bounded map of keys, a clock.
 * `new Limiter({algorithm: 'gcra', limit: 1000, period: '60s', burst: 100}, {maxKeys, clock})`
 */
class Limiter {
  #native;
  // The addon's fast path: `(key, cost, out) => allowed`, or `undefined` when
  // the arguments are not well-formed (then `#native.checkInto` throws why).
  #check;
  // The addon writes each decision here; the object is built in JavaScript
  // (several times cheaper than building it through N-API).
  #out = new Float64Array(5);

  constructor(spec, options = {}) {
    const { clock, maxKeys } = options;
    const text = specText(spec);
    if (clock !== undefined && clock !== null && !(clock instanceof ManualClock)) {
      throw new errors.SpecError('invalid `clock`: must be a ManualClock', 'clock');
    }
    try {
      this.#native =
        clock === undefined || clock === null
          ? new native.NativeLimiter(text, maxKeys)
          : native.NativeLimiter.withClock(text, maxKeys, clock);
    } catch (e) {
      throw fromNative(e);
    }
    this.#check = this.#native.checkFunction();
  }

  // The slow path of a check the fast path declined: throws the error.
  #checkSlow(key, cost) {
    try {
      this.#native.checkInto(key, cost, this.#out);
    } catch (e) {
      throw fromNative(e);
    }
    return this.#out[0] === 1;
  }

  /** Admits `cost` units for `key` (all or nothing) and returns the decision. */
  check(key, cost = 1) {
    const out = this.#out;
    if (this.#check(key, cost, out) === undefined) this.#checkSlow(key, cost);
    return { allowed: out[0] === 1, limit: out[1], remaining: out[2], retryAfterMs: out[3], resetAfterMs: out[4] };
  }

  /** `check(key, cost).allowed`, without building the decision object. */
  allowed(key, cost = 1) {
    const allowed = this.#check(key, cost, this.#out);
    return allowed === undefined ? this.#checkSlow(key, cost) : allowed;
  }

  /** The key's standing without consuming anything. */
  status(key) {
    const out = this.#out;
    this.#native.statusInto(key, out);
    return { allowed: out[0] === 1, limit: out[1], remaining: out[2], retryAfterMs: out[3], resetAfterMs: out[4] };
  }

  /** Forgets `key`'s state; true when it had any. */
  reset(key) {
    return this.#native.reset(key);
  }

  /** How many keys hold state (at most `maxKeys`). */
  get size() {
    return this.#native.size;
  }
}

/**
 * The pure transition: the stored state JSON (or null) of a key, the time and
 * the cost -> `{decision, stateJson, changed}`; store `stateJson` when `changed`.
 */
function decide(spec, stateJson, nowMs, cost = 1) {
  try {
    const out = native.decide(specText(spec), stateJson ?? null, nowMs, cost);
    if (out.stateJson === undefined) out.stateJson = null;
    return out;
  } catch (e) {
    throw fromNative(e);
  }
}

module.exports = {
  Limiter,
  ManualClock,
  decide,
  Client,
  defaultSocketPath,
  RETRY_NEVER,
  DEFAULT_MAX_KEYS,
  LeaseholdError: errors.LeaseholdError,
  SpecError: errors.SpecError,
  StateError: errors.StateError,
  ConnectionError: errors.ConnectionError,
  DaemonError: errors.DaemonError,
};
