//! Python bindings of leasehold's rate-limit algorithms, generated with uniffi:
//! an in-process [`leasehold_core::LocalLimiter`], a manual clock for tests
//! and the pure `decide` transition. The `leasehold` Python package wraps
//! this `_native` module with the idiomatic API and the daemon clients.

mod error;
mod fast;

use std::sync::Arc;

use leasehold_core::local::LocalLimiter;
use leasehold_core::{Algorithm, Clock, SpecError, SystemClock};

pub use crate::error::LeaseholdNativeError;

uniffi::setup_scaffolding!();

/// The outcome of one admission check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct Decision {
    /// Whether all `cost` units were admitted.
    pub allowed: bool,
    /// The most units the limit can ever grant at once.
    pub limit: u64,
    /// Units that could still be admitted right now.
    pub remaining: u64,
    /// Milliseconds until the same request could pass (0 when allowed).
    pub retry_after_ms: u64,
    /// Milliseconds until the key is back to its full limit.
    pub reset_after_ms: u64,
}

impl From<leasehold_core::Decision> for Decision {
    fn from(d: leasehold_core::Decision) -> Self {
        Self {
            allowed: d.allowed,
            limit: d.limit,
            remaining: d.remaining,
            retry_after_ms: d.retry_after_ms,
            reset_after_ms: d.reset_after_ms,
        }
    }
}

/// The result of [`decide`]: the decision and the state to store.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Transition {
    /// The admission decision.
    pub decision: Decision,
    /// The state after the call: the new state when units were consumed,
    /// otherwise the state passed in (`None` if none).
    pub state_json: Option<String>,
    /// Whether the state changed.
    pub changed: bool,
}

/// A clock that moves only when told, for tests.
#[derive(Debug, uniffi::Object)]
pub struct ManualClock {
    inner: Arc<leasehold_core::ManualClock>,
}

#[uniffi::export]
impl ManualClock {
    /// A clock reading `now_ms`.
    #[uniffi::constructor]
    pub fn new(now_ms: f64) -> Self {
        Self { inner: Arc::new(leasehold_core::ManualClock::new(now_ms)) }
    }

    /// Moves the clock by `ms` (negative moves it back).
    pub fn advance(&self, ms: f64) {
        self.inner.advance(ms);
    }

    /// Sets the clock to `now_ms`.
    pub fn set(&self, now_ms: f64) {
        self.inner.set(now_ms);
    }

    /// The time the clock reads, epoch milliseconds.
    pub fn now(&self) -> f64 {
        self.inner.now_ms()
    }
}

/// The in-process limiter the Python `Limiter` class wraps.
#[derive(Debug, uniffi::Object)]
pub struct NativeLimiter {
    inner: LocalLimiter,
}

#[uniffi::export]
impl NativeLimiter {
    /// A limiter for the spec (JSON text) keeping at most `max_keys` keys,
    /// reading `clock` (the system clock when `None`).
    #[uniffi::constructor]
    pub fn new(
        spec_json: String,
        max_keys: u64,
        clock: Option<Arc<ManualClock>>,
    ) -> Result<Self, LeaseholdNativeError> {
        let alg = Algorithm::from_json(&spec_json)?;
        if max_keys == 0 {
            return Err(SpecError { field: "max_keys", reason: "must be at least 1".into() }.into());
        }
        let clock: Arc<dyn Clock> = match clock {
            Some(c) => c.inner.clone(),
            None => Arc::new(SystemClock),
        };
        let max_keys = usize::try_from(max_keys).unwrap_or(usize::MAX);
        Ok(Self { inner: LocalLimiter::new(alg, max_keys, clock) })
    }

    /// Admits `cost` units for `key`, or none.
    pub fn check(&self, key: &str, cost: u64) -> Decision {
        self.inner.check(key, cost).into()
    }

    /// The key's standing, consuming nothing.
    pub fn status(&self, key: &str) -> Decision {
        self.inner.status(key).into()
    }

    /// This limiter's address, for the C entry point `leasehold_native_check`
    /// (`fast.rs`) that `Limiter.check` calls through `ctypes`: valid while
    /// the Python object holding this limiter is alive.
    pub fn fast_address(&self) -> u64 {
        self as *const Self as usize as u64
    }

    /// How many keys hold state.
    pub fn size(&self) -> u64 {
        self.inner.len() as u64
    }

    /// Forgets a key; true when it had state.
    pub fn reset(&self, key: &str) -> bool {
        self.inner.remove(key)
    }
}

/// The pure transition: `spec_json`, the stored state JSON (or `None`), the
/// time and the cost → the decision and the state to store.
#[uniffi::export]
pub fn decide(
    spec_json: &str,
    state_json: Option<String>,
    now_ms: f64,
    cost: u64,
) -> Result<Transition, LeaseholdNativeError> {
    let alg = Algorithm::from_json(spec_json)?;
    let state = state_json.as_deref().map(|s| alg.parse_state(s)).transpose()?;
    let (decision, next) = alg.decide(state.as_ref(), now_ms, cost);
    let changed = next.is_some();
    let state_json = match next {
        Some(s) => Some(s.to_json()),
        None => state_json,
    };
    Ok(Transition { decision: decision.into(), state_json, changed })
}
