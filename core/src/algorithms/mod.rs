//! The algorithms, one per file. Each is a validated parameter set; its state
//! is a small serde struct with short field names (it is stored per key).

pub mod fixed_window;
pub mod gcra;
pub mod leaky_bucket;
pub mod quota;
pub mod sliding_log;
pub mod sliding_window;
pub mod token_bucket;
mod window;

pub use fixed_window::FixedWindow;
pub use gcra::{Gcra, GcraState};
pub use leaky_bucket::{LeakyBucket, LeakyState};
pub use quota::Quota;
pub use sliding_log::{LogState, SlidingLog};
pub use sliding_window::{SlidingWindow, SlidingWindowState};
pub use token_bucket::{TokenBucket, TokenState};
pub use window::WindowState;

use crate::error::SpecError;

/// Checks a unit count: a whole number from 1 to [`crate::MAX_UNITS`].
pub(crate) fn check_units(field: &'static str, n: u64) -> Result<u64, SpecError> {
    if n == 0 {
        Err(SpecError::new(field, "must be at least 1"))
    } else if n > crate::MAX_UNITS {
        Err(SpecError::new(field, format!("must be at most {}", crate::MAX_UNITS)))
    } else {
        Ok(n)
    }
}

/// Checks a rate in units per second: finite and greater than zero.
pub(crate) fn check_rate(field: &'static str, r: f64) -> Result<f64, SpecError> {
    if r.is_finite() && r > 0.0 && r <= crate::MAX_UNITS as f64 {
        Ok(r)
    } else {
        Err(SpecError::new(field, format!("must be a number of units per second greater than 0 (got {r})")))
    }
}

/// Checks a period or window length: at least one millisecond.
pub(crate) fn check_span(field: &'static str, ms: crate::DurationMs) -> Result<f64, SpecError> {
    if ms.0 == 0 {
        Err(SpecError::new(field, "must be longer than zero (e.g. \"1s\")"))
    } else {
        Ok(ms.as_f64())
    }
}
