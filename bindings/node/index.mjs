// ES module entry: the same API as index.js.
import cjs from './index.js';

export const {
  Limiter,
  ManualClock,
  decide,
  Client,
  defaultSocketPath,
  RETRY_NEVER,
  DEFAULT_MAX_KEYS,
  LeaseholdError,
  SpecError,
  StateError,
  ConnectionError,
  DaemonError,
} = cjs;
export default cjs;
