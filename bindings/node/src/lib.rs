//! Node.js bindings of leasehold's rate-limit algorithms: an in-process
//! [`leasehold_core::LocalLimiter`], a manual clock for tests and the pure
//! `decide` transition. The package's `index.js` wraps these natives with the
//! idiomatic API (`new Limiter(spec, { clock, maxKeys })`) and adds the
//! daemon's socket client.

mod error;
mod fast;

use std::sync::Arc;

use leasehold_core::local::{LocalLimiter, DEFAULT_MAX_KEYS};
use leasehold_core::{Algorithm, Clock, SystemClock};
use napi::bindgen_prelude::Unknown;
use napi::Env;
use napi_derive::napi;

use crate::error::Result;

/// The outcome of one admission check (all numbers are exact integers).
#[napi(object)]
#[derive(Debug, Clone, Copy)]
pub struct Decision {
    /// Whether all `cost` units were admitted.
    pub allowed: bool,
    /// The most units the limit can ever grant at once.
    pub limit: f64,
    /// Units that could still be admitted right now.
    pub remaining: f64,
    /// Milliseconds until the same request could pass (0 when allowed).
    pub retry_after_ms: f64,
    /// Milliseconds until the key is back to its full limit.
    pub reset_after_ms: f64,
}

impl From<leasehold_core::Decision> for Decision {
    fn from(d: leasehold_core::Decision) -> Self {
        Self {
            allowed: d.allowed,
            limit: d.limit as f64,
            remaining: d.remaining as f64,
            retry_after_ms: d.retry_after_ms as f64,
            reset_after_ms: d.reset_after_ms as f64,
        }
    }
}

/// The result of [`decide`]: the decision and the state to store.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct Transition {
    /// The admission decision.
    pub decision: Decision,
    /// The state after the call: the new state when units were consumed,
    /// otherwise the state passed in (`null` if none).
    pub state_json: Option<String>,
    /// Whether the state changed (a store can skip the write when not).
    pub changed: bool,
}

/// A clock that moves only when told, for tests.
#[napi]
pub struct ManualClock {
    inner: Arc<leasehold_core::ManualClock>,
}

#[napi]
impl ManualClock {
    /// A clock reading `nowMs` (default 0).
    #[napi(constructor)]
    pub fn new(now_ms: Option<f64>) -> Self {
        Self { inner: Arc::new(leasehold_core::ManualClock::new(now_ms.unwrap_or(0.0))) }
    }

    /// Moves the clock by `ms` (negative moves it back).
    #[napi]
    pub fn advance(&self, ms: f64) {
        self.inner.advance(ms);
    }

    /// Sets the clock to `nowMs`.
    #[napi]
    pub fn set(&self, now_ms: f64) {
        self.inner.set(now_ms);
    }

    /// The time the clock reads, epoch milliseconds.
    #[napi]
    pub fn now(&self) -> f64 {
        self.inner.now_ms()
    }
}

fn algorithm(spec_json: &str) -> Result<Algorithm> {
    Algorithm::from_json(spec_json).map_err(error::spec)
}

fn units(field: &'static str, n: f64) -> Result<u64> {
    if n.is_finite() && n >= 0.0 && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(error::argument(field, format!("must be a whole number of units, 0 or more (got {n})")))
    }
}

fn max_keys(n: Option<f64>) -> Result<usize> {
    match n {
        None => Ok(DEFAULT_MAX_KEYS),
        Some(n) if n.is_finite() && n >= 1.0 && n.fract() == 0.0 => Ok(n as usize),
        Some(n) => Err(error::argument("maxKeys", format!("must be a whole number, 1 or more (got {n})"))),
    }
}

/// A `Float64Array` the addon writes a decision into (read as a mutable
/// slice of its elements; an alias so the binding macro takes it by value).
pub type DecisionOut<'a> = &'a mut [f64];

fn write_decision(d: leasehold_core::Decision, out: &mut [f64]) -> Result<()> {
    let Some(out) = out.get_mut(..5) else {
        return Err(error::argument("out", "must hold at least 5 numbers"));
    };
    out.copy_from_slice(&[
        f64::from(u8::from(d.allowed)),
        d.limit as f64,
        d.remaining as f64,
        d.retry_after_ms as f64,
        d.reset_after_ms as f64,
    ]);
    Ok(())
}

/// The in-process limiter the JavaScript `Limiter` class wraps.
#[napi]
pub struct NativeLimiter {
    /// Shared with the functions [`Self::check_function`] makes.
    inner: Arc<LocalLimiter>,
}

#[napi]
impl NativeLimiter {
    /// A limiter for the spec (JSON text) on the system clock.
    #[napi(constructor)]
    pub fn new(spec_json: String, max_keys_opt: Option<f64>) -> Result<Self> {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        Ok(Self { inner: Arc::new(LocalLimiter::new(algorithm(&spec_json)?, max_keys(max_keys_opt)?, clock)) })
    }

    /// A limiter for the spec (JSON text) reading `clock`.
    #[napi(factory)]
    pub fn with_clock(spec_json: String, max_keys_opt: Option<f64>, clock: &ManualClock) -> Result<Self> {
        let clock: Arc<dyn Clock> = clock.inner.clone();
        Ok(Self { inner: Arc::new(LocalLimiter::new(algorithm(&spec_json)?, max_keys(max_keys_opt)?, clock)) })
    }

    /// Admits `cost` units for `key`, or none.
    #[napi]
    pub fn check(&self, key: String, cost: f64) -> Result<Decision> {
        Ok(self.inner.check(&key, units("cost", cost)?).into())
    }

    /// The key's standing, consuming nothing.
    #[napi]
    pub fn status(&self, key: String) -> Decision {
        self.inner.status(&key).into()
    }

    /// [`Self::check`] writing the decision into `out` (at least 5 numbers:
    /// allowed 1|0, limit, remaining, retryAfterMs, resetAfterMs) instead of
    /// returning an object: building the object in JavaScript is several
    /// times cheaper than through N-API. `index.js` uses this.
    #[napi]
    pub fn check_into(&self, key: String, cost: f64, out: DecisionOut<'_>) -> Result<()> {
        let d = self.inner.check(&key, units("cost", cost)?);
        write_decision(d, out)
    }

    /// [`Self::status`] writing into `out`, like [`Self::check_into`].
    #[napi]
    pub fn status_into(&self, key: String, out: DecisionOut<'_>) -> Result<()> {
        write_decision(self.inner.status(&key), out)
    }

    /// A plain function `(key, cost, out) => allowed | undefined` deciding
    /// with this limiter, several times cheaper per call than
    /// [`Self::check_into`]: it writes the decision into `out` like that
    /// method and returns `allowed`, or returns `undefined` without deciding
    /// when the arguments are not a string, a whole number of units and a
    /// `Float64Array` of at least 5 (then call `checkInto` for the error).
    /// `index.js` uses this for `check` and `allowed`.
    #[napi(ts_return_type = "(key: string, cost: number, out: Float64Array) => boolean | undefined")]
    pub fn check_function<'env>(&self, env: &'env Env) -> napi::Result<Unknown<'env>> {
        let f = fast::check_function(env.raw(), &self.inner)?;
        // SAFETY: `f` is a function value just created in `env`.
        #[allow(unsafe_code)]
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), f) })
    }

    /// How many keys hold state.
    #[napi(getter)]
    pub fn size(&self) -> u32 {
        u32::try_from(self.inner.len()).unwrap_or(u32::MAX)
    }

    /// Forgets a key; true when it had state.
    #[napi]
    pub fn reset(&self, key: String) -> bool {
        self.inner.remove(&key)
    }
}

/// The pure transition: `spec` (JSON text), the stored state JSON (or null),
/// the time and the cost → the decision and the state to store.
#[napi]
pub fn decide(spec_json: String, state_json: Option<String>, now_ms: f64, cost: f64) -> Result<Transition> {
    let alg = algorithm(&spec_json)?;
    let cost = units("cost", cost)?;
    let state = state_json.as_deref().map(|s| alg.parse_state(s)).transpose().map_err(error::state)?;
    let (decision, next) = alg.decide(state.as_ref(), now_ms, cost);
    let changed = next.is_some();
    let state_json = match next {
        Some(s) => Some(s.to_json()),
        None => state_json,
    };
    Ok(Transition { decision: decision.into(), state_json, changed })
}
