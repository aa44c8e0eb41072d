// Type definitions for leasehold-node.

/** A limit spec in the daemon's config form. */
export type LimitSpec =
  | { algorithm: 'gcra'; limit: number; period: string; burst?: number }
  | { algorithm: 'token_bucket'; capacity: number; refill_per_sec: number }
  | { algorithm: 'leaky_bucket'; capacity: number; leak_per_sec: number }
  | { algorithm: 'fixed_window' | 'sliding_window' | 'sliding_log' | 'quota'; limit: number; window: string };

/** The outcome of one admission check. All numbers are exact integers. */
export interface Decision {
  /** Whether all `cost` units were admitted. */
  allowed: boolean;
  /** The most units the limit can ever grant at once (`burst`, `capacity` or `limit`). */
  limit: number;
  /** Units that could still be admitted right now. */
  remaining: number;
  /** Milliseconds until the same request could pass: 0 when allowed, RETRY_NEVER when it never can. */
  retryAfterMs: number;
  /** Milliseconds until the key is back to its full limit. */
  resetAfterMs: number;
}

/** What `decide` returns. */
export interface Transition {
  decision: Decision;
  /** The state to store: the new state if `changed`, else the state passed in (null if none). */
  stateJson: string | null;
  /** Whether the state changed. */
  changed: boolean;
}

/** A clock that moves only when told, for tests. */
export class ManualClock {
  constructor(nowMs?: number);
  /** Moves the clock by `ms` (negative moves it back). */
  advance(ms: number): void;
  /** Sets the clock to `nowMs`. */
  set(nowMs: number): void;
  /** The time the clock reads, epoch milliseconds. */
  now(): number;
}

export interface LimiterOptions {
  /** The clock to read (default: the system clock). */
  clock?: ManualClock;
  /** Keys kept at most; when full, expired states go first, then the least recently used (default 10000). */
  maxKeys?: number;
}

/** An in-process limiter: one limit spec, a bounded map of keys, a clock. */
export class Limiter {
  /** @throws {SpecError} naming the field when the spec is invalid. */
  constructor(spec: LimitSpec | string, options?: LimiterOptions);
  /** Admits `cost` units (default 1) for `key`, all or nothing. */
  check(key: string, cost?: number): Decision;
  /** `check(key, cost).allowed`, without building the decision object. */
  allowed(key: string, cost?: number): boolean;
  /** The key's standing, consuming nothing. */
  status(key: string): Decision;
  /** Forgets `key`'s state; true when it had any. */
  reset(key: string): boolean;
  /** How many keys hold state. */
  readonly size: number;
}

/**
 * The pure transition: a key's stored state JSON (or null), the time (epoch ms)
 * and the cost -> the decision and the state to store.
 * @throws {SpecError} for an invalid spec, {StateError} for unreadable state.
 */
export function decide(spec: LimitSpec | string, stateJson: string | null, nowMs: number, cost?: number): Transition;

export interface ClientOptions {
  /** The daemon's socket (default `$XDG_RUNTIME_DIR/leasehold.sock`, else `/tmp/leasehold-<uid>/leasehold.sock`). */
  path?: string;
  /** Fail a request with no reply after this long (default 5000). */
  timeoutMs?: number;
}

/** A client for the leasehold daemon's Unix socket (RESP). */
export class Client {
  constructor(options?: ClientOptions);
  readonly path: string;
  /** `THROTTLE limit key cost`. Rejects with ConnectionError or DaemonError. */
  throttle(limit: string, key: string, cost?: number): Promise<Decision>;
  /** `STATUS limit key`. */
  status(limit: string, key: string): Promise<Decision>;
  /** Closes the connection. */
  close(): void;
}

/** `$XDG_RUNTIME_DIR/leasehold.sock`, else `/tmp/leasehold-<uid>/leasehold.sock` */
export function defaultSocketPath(): string;

/** 2^53 - 1 */
export const RETRY_NEVER: number;
export const DEFAULT_MAX_KEYS: number;

export class LeaseholdError extends Error {}
export class SpecError extends LeaseholdError {
  readonly code: 'ERR_LEASEHOLD_SPEC';
  /** The spec field (or argument) that is wrong, e.g. `limit`, `period`, `cost`. */
  readonly field: string;
}
export class StateError extends LeaseholdError {
  readonly code: 'ERR_LEASEHOLD_STATE';
}
export class ConnectionError extends LeaseholdError {
  readonly code: 'ERR_LEASEHOLD_CONNECTION';
  /** The socket path that could not be reached. */
  readonly path: string;
  /** The system error code, e.g. `ENOENT`, `ECONNREFUSED`. */
  readonly syscallCode?: string;
}
export class DaemonError extends LeaseholdError {
  readonly code: 'ERR_LEASEHOLD_DAEMON';
}
