//! The stored state of any algorithm.

use serde::Serialize;

use crate::algorithms::{GcraState, LeakyState, LogState, SlidingWindowState, TokenState, WindowState};

/// The state of one key under one algorithm. Serializes to the algorithm's
/// compact JSON (no tag: the algorithm is known from the limit's config); read
/// it back with [`crate::Algorithm::parse_state`]. Every `f64` round-trips
/// bit-identically.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum State {
    /// GCRA's theoretical arrival time.
    Gcra(GcraState),
    /// Token bucket's tokens.
    TokenBucket(TokenState),
    /// Leaky bucket's level.
    LeakyBucket(LeakyState),
    /// Fixed window's count.
    FixedWindow(WindowState),
    /// Sliding window's two counts.
    SlidingWindow(SlidingWindowState),
    /// Sliding log's entries.
    SlidingLog(LogState),
    /// Quota's count.
    Quota(WindowState),
}

impl State {
    /// The state as compact JSON, the form stored in every store's records.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("state serializes: plain numbers and arrays")
    }
}
