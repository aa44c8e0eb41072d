//! # leasehold-core
//!
//! The rate-limit algorithms of leasehold as pure, serializable state
//! transitions. Nothing here performs I/O or reads a clock: the caller passes
//! the time (`f64` epoch milliseconds) and the current state, and gets back a
//! decision and the state to store. The same code runs in the daemon, in the
//! Node and Python bindings and in the browser (wasm32), so the same state and
//! time give bit-identical answers everywhere.
//!
//! ```
//! use leasehold_core::{Algorithm, LimitSpec};
//!
//! // 10 per second with bursts of 5, parsed from the daemon's config form.
//! let spec: LimitSpec =
//!     serde_json::from_str(r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":5}"#).unwrap();
//! let gcra = Algorithm::try_from(spec).unwrap();
//!
//! let now = 1_700_000_000_000.0;
//! let mut state = None;
//! for _ in 0..5 {
//!     let (decision, next) = gcra.decide(state.as_ref(), now, 1);
//!     assert!(decision.allowed);
//!     state = next.or(state);
//! }
//! let (denied, unchanged) = gcra.decide(state.as_ref(), now, 1);
//! assert!(!denied.allowed);
//! assert_eq!(denied.retry_after_ms, 100); // one emission interval
//! assert!(unchanged.is_none()); // a denial consumes nothing
//! ```
//!
//! ## Operations
//!
//! Every [`Algorithm`] offers the same operations over an optional [`State`]
//! (`None` = never seen, or expired):
//!
//! - [`Algorithm::decide`] — all-or-nothing admission of `cost` units;
//! - [`Algorithm::available`] — how many units could be granted now;
//! - [`Algorithm::take`] — grant up to `want` units, or none if fewer than
//!   `min` are available: the primitive a lease is made of;
//! - [`Algorithm::refund`] — give unused units back, never beyond the
//!   algorithm's ceiling;
//! - [`Algorithm::take_lease`] / [`Algorithm::refund_lease`] — the same for
//!   units spent later, until a lease ends: exact over every interval even
//!   with many leaseholders (see [`lease`]);
//! - [`Algorithm::expires_at_ms`] — when the state is indistinguishable from
//!   absent (what TTLs are set from).
//!
//! Operations that change nothing return `None` for the new state, so a store
//! can skip the write.
//!
//! ## Time
//!
//! A clock that steps backwards deducts nothing and never moves stored time
//! back: the state's own time is used instead. A forward step can mint at most
//! what the interval refills, capped at the algorithm's ceiling. A non-finite
//! `now_ms` is treated like a backward step (the state's own time).
#![forbid(unsafe_code)]

pub mod algorithms;
pub mod clock;
mod decision;
pub mod duration;
mod error;
pub mod lease;
pub mod local;
pub mod ops;
mod rule;
mod spec;
mod state;

pub use clock::{Clock, ManualClock, SystemClock};
pub use decision::{Decision, RETRY_NEVER};
pub use duration::DurationMs;
pub use error::{SpecError, StateError};
pub use lease::LeaseTerm;
pub use local::LocalLimiter;
pub use spec::{Algorithm, AlgorithmKind, LimitSpec};
pub use state::State;

/// The largest unit count any limit, cost or state may hold: 2^53 − 1, the
/// largest integer that every binding (JavaScript included) represents exactly.
pub const MAX_UNITS: u64 = (1 << 53) - 1;
