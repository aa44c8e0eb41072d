//! leasehold's rate-limit algorithms for the browser and Node, with
//! wasm-bindgen: an in-process [`Limiter`] (a
//! [`leasehold_core::LocalLimiter`]), a [`ManualClock`] for tests and the pure
//! [`decide`] transition, deciding bit-identically to the daemon and the Node
//! and Python bindings.
//!
//! ```js
//! const limiter = new Limiter({ algorithm: "gcra", limit: 10, period: "1s" });
//! if (!limiter.check("user:1").allowed) { /* slow down */ }
//! ```

mod error;

use std::sync::Arc;

use js_sys::{Function, Object, Reflect, JSON};
use leasehold_core::local::{LocalLimiter, DEFAULT_MAX_KEYS};
use leasehold_core::{Algorithm, Clock};
use wasm_bindgen::prelude::*;

#[wasm_bindgen(typescript_custom_section)]
const TS_TYPES: &str = r#"
/** A limit spec in the daemon's config form. */
export type LimitSpec =
  | { algorithm: "gcra"; limit: number; period: string; burst?: number }
  | { algorithm: "token_bucket"; capacity: number; refill_per_sec: number }
  | { algorithm: "leaky_bucket"; capacity: number; leak_per_sec: number }
  | { algorithm: "fixed_window" | "sliding_window" | "sliding_log" | "quota"; limit: number; window: string };

/** The outcome of one admission check. All numbers are exact integers. */
export interface Decision {
  allowed: boolean;
  limit: number;
  remaining: number;
  retryAfterMs: number;
  resetAfterMs: number;
}

/** What `decide` returns: the state to store is `stateJson`. */
export interface Transition {
  decision: Decision;
  stateJson: string | null;
  changed: boolean;
}

export interface LimiterOptions {
  /** Anything with `now()` returning epoch ms, e.g. a ManualClock (default: Date.now). */
  clock?: { now(): number };
  /** Keys kept at most (default 10000). */
  maxKeys?: number;
}
"#;

/// The browser's (or Node's) wall clock: `Date.now()`.
#[derive(Debug, Clone, Copy, Default)]
struct DateClock;

impl Clock for DateClock {
    fn now_ms(&self) -> f64 {
        js_sys::Date::now()
    }
}

/// A clock that moves only when told, for tests. Any object with a `now()`
/// method returning epoch milliseconds works as a `Limiter`'s clock too.
#[wasm_bindgen]
#[derive(Debug)]
pub struct ManualClock {
    inner: Arc<leasehold_core::ManualClock>,
}

#[wasm_bindgen]
impl ManualClock {
    /// A clock reading `nowMs` (default 0).
    #[wasm_bindgen(constructor)]
    pub fn new(#[wasm_bindgen(js_name = nowMs)] now_ms: Option<f64>) -> Self {
        Self { inner: Arc::new(leasehold_core::ManualClock::new(now_ms.unwrap_or(0.0))) }
    }

    /// Moves the clock by `ms` (negative moves it back).
    pub fn advance(&self, ms: f64) {
        self.inner.advance(ms);
    }

    /// Sets the clock to `nowMs`.
    pub fn set(&self, now_ms: f64) {
        self.inner.set(now_ms);
    }

    /// The time the clock reads, epoch milliseconds.
    pub fn now(&self) -> f64 {
        leasehold_core::Clock::now_ms(&*self.inner)
    }
}

/// Where a limiter reads the time.
enum TimeSource {
    /// `Date.now()` through the limiter's own clock.
    Date,
    /// A JavaScript object's `now()` method (a `ManualClock` or any other).
    Js { this: JsValue, now: Function },
}

#[wasm_bindgen(inline_js = "export function decision(allowed, limit, remaining, retryAfterMs, resetAfterMs) {
  return { allowed, limit, remaining, retryAfterMs, resetAfterMs };
}")]
extern "C" {
    /// Builds the decision object in JavaScript from plain numbers: one call
    /// across the boundary, where setting five properties from Rust took
    /// eleven (an object, five numbers made into values, five sets).
    #[wasm_bindgen(js_name = decision)]
    fn make_decision(allowed: bool, limit: f64, remaining: f64, retry_after_ms: f64, reset_after_ms: f64) -> JsValue;
}

fn to_decision(d: leasehold_core::Decision) -> JsValue {
    make_decision(d.allowed, d.limit as f64, d.remaining as f64, d.retry_after_ms as f64, d.reset_after_ms as f64)
}

/// Reads a spec given as an object or as JSON text.
fn algorithm(spec: &JsValue) -> Result<Algorithm, JsValue> {
    let text = match spec.as_string() {
        Some(s) => s,
        None if spec.is_object() => JSON::stringify(spec)
            .ok()
            .and_then(|s| s.as_string())
            .ok_or_else(|| error::argument("spec", "must be an object or JSON text"))?,
        None => return Err(error::argument("spec", "must be an object or JSON text")),
    };
    Algorithm::from_json(&text).map_err(error::spec)
}

fn units(field: &'static str, n: f64) -> Result<u64, JsValue> {
    if n.is_finite() && n >= 0.0 && n.fract() == 0.0 {
        Ok(n as u64)
    } else {
        Err(error::argument(field, format!("must be a whole number of units, 0 or more (got {n})")))
    }
}

fn get(obj: &JsValue, key: &str) -> Result<JsValue, JsValue> {
    Reflect::get(obj, &JsValue::from_str(key))
}

/// An in-process limiter: one limit spec, a bounded map of keys, a clock.
#[wasm_bindgen]
pub struct Limiter {
    inner: LocalLimiter,
    time: TimeSource,
}

#[wasm_bindgen]
impl Limiter {
    /// `new Limiter(spec, { clock, maxKeys })`: `spec` is the config object
    /// (or its JSON text); `clock` anything with `now()` (default `Date.now`),
    /// `maxKeys` the keys kept (default 10000). Throws a `SpecError` naming
    /// the field when the spec is invalid.
    #[wasm_bindgen(constructor)]
    pub fn new(
        #[wasm_bindgen(unchecked_param_type = "LimitSpec | string")] spec: JsValue,
        options: Option<Object>,
    ) -> Result<Limiter, JsValue> {
        let alg = algorithm(&spec)?;
        let mut max_keys = DEFAULT_MAX_KEYS;
        let mut time = TimeSource::Date;
        if let Some(options) = options {
            let options: JsValue = options.into();
            let n = get(&options, "maxKeys")?;
            if !n.is_undefined() && !n.is_null() {
                max_keys = match n.as_f64() {
                    Some(n) if n >= 1.0 && n.fract() == 0.0 && n.is_finite() => n as usize,
                    _ => return Err(error::argument("maxKeys", "must be a whole number, 1 or more")),
                };
            }
            let clock = get(&options, "clock")?;
            if !clock.is_undefined() && !clock.is_null() {
                let now = get(&clock, "now")?
                    .dyn_into::<Function>()
                    .map_err(|_| error::argument("clock", "must have a now() method returning epoch milliseconds"))?;
                time = TimeSource::Js { this: clock, now };
            }
        }
        Ok(Limiter { inner: LocalLimiter::new(alg, max_keys, Arc::new(DateClock)), time })
    }

    fn now(&self) -> Result<Option<f64>, JsValue> {
        match &self.time {
            TimeSource::Date => Ok(None),
            TimeSource::Js { this, now } => {
                let t = now.call0(this)?;
                t.as_f64()
                    .map(Some)
                    .ok_or_else(|| error::argument("clock", "now() must return a number of epoch milliseconds"))
            }
        }
    }

    /// Admits `cost` units (default 1) for `key`, all or nothing; returns
    /// `{allowed, limit, remaining, retryAfterMs, resetAfterMs}`.
    #[wasm_bindgen(unchecked_return_type = "Decision")]
    pub fn check(&self, key: &str, cost: Option<f64>) -> Result<JsValue, JsValue> {
        let cost = units("cost", cost.unwrap_or(1.0))?;
        let d = match self.now()? {
            Some(t) => self.inner.check_at(key, cost, t),
            None => self.inner.check(key, cost),
        };
        Ok(to_decision(d))
    }

    /// `check(key, cost).allowed`, without building the decision object.
    pub fn allowed(&self, key: &str, cost: Option<f64>) -> Result<bool, JsValue> {
        let cost = units("cost", cost.unwrap_or(1.0))?;
        Ok(match self.now()? {
            Some(t) => self.inner.check_at(key, cost, t),
            None => self.inner.check(key, cost),
        }
        .allowed)
    }

    /// The key's standing, consuming nothing.
    #[wasm_bindgen(unchecked_return_type = "Decision")]
    pub fn status(&self, key: &str) -> Result<JsValue, JsValue> {
        let d = match self.now()? {
            Some(t) => self.inner.status_at(key, t),
            None => self.inner.status(key),
        };
        Ok(to_decision(d))
    }

    /// Forgets `key`'s state; true when it had any.
    pub fn reset(&self, key: &str) -> bool {
        self.inner.remove(key)
    }

    /// How many keys hold state.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> usize {
        self.inner.len()
    }
}

/// The pure transition: a key's stored state JSON (or null), the time (epoch
/// ms) and the cost → `{decision, stateJson, changed}`; `stateJson` is the
/// state to store (the one passed in when nothing changed).
#[wasm_bindgen(unchecked_return_type = "Transition")]
pub fn decide(
    #[wasm_bindgen(unchecked_param_type = "LimitSpec | string")] spec: JsValue,
    #[wasm_bindgen(js_name = stateJson)] state_json: Option<String>,
    #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
    cost: Option<f64>,
) -> Result<JsValue, JsValue> {
    let alg = algorithm(&spec)?;
    let cost = units("cost", cost.unwrap_or(1.0))?;
    let state = state_json.as_deref().map(|s| alg.parse_state(s)).transpose().map_err(error::state)?;
    let (decision, next) = alg.decide(state.as_ref(), now_ms, cost);
    let changed = next.is_some();
    let state_json = match next {
        Some(s) => Some(s.to_json()),
        None => state_json,
    };
    let o = Object::new();
    Reflect::set(&o, &"decision".into(), &to_decision(decision))?;
    Reflect::set(&o, &"stateJson".into(), &state_json.map_or(JsValue::NULL, |s| JsValue::from_str(&s)))?;
    Reflect::set(&o, &"changed".into(), &JsValue::from_bool(changed))?;
    Ok(o.into())
}
