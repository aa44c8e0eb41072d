'use strict';
// The package's error classes. The addon throws plain Errors with a `code`
// (see src/error.rs); `fromNative` turns them into these.

/** Base class of every error this package throws. */
class LeaseholdError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** An invalid limit spec or argument. `field` names what is wrong. */
class SpecError extends LeaseholdError {
  constructor(message, field) {
    super(message);
    this.code = 'ERR_LEASEHOLD_SPEC';
    this.field = field;
  }
}

/** Stored state that is not valid state for the spec's algorithm. */
class StateError extends LeaseholdError {
  constructor(message) {
    super(message);
    this.code = 'ERR_LEASEHOLD_STATE';
  }
}

/** The daemon's socket could not be reached, or the connection broke. */
class ConnectionError extends LeaseholdError {
  constructor(message, path, cause) {
    super(message, cause ? { cause } : undefined);
    this.code = 'ERR_LEASEHOLD_CONNECTION';
    this.path = path;
    if (cause && cause.code) this.syscallCode = cause.code;
  }
}

/** The daemon answered with an error reply (`-ERR ...`). */
class DaemonError extends LeaseholdError {
  constructor(message) {
    super(message);
    this.code = 'ERR_LEASEHOLD_DAEMON';
  }
}

const FIELD = /^invalid `([^`]+)`/;

/** Maps an error thrown by the addon to the package's classes. */
function fromNative(err) {
  if (err && err.code === 'ERR_LEASEHOLD_SPEC') {
    const m = FIELD.exec(err.message);
    return new SpecError(err.message, m ? m[1] : undefined);
  }
  if (err && err.code === 'ERR_LEASEHOLD_STATE') return new StateError(err.message);
  return err;
}

module.exports = { LeaseholdError, SpecError, StateError, ConnectionError, DaemonError, fromNative };
