//! The answer to "may this key spend `cost` units now?".

use serde::{Deserialize, Serialize};

/// `retry_after_ms` of a request that can never pass: its cost exceeds what
/// the limit could ever grant at once. 2^53 − 1, exact in every binding.
pub const RETRY_NEVER: u64 = crate::MAX_UNITS;

/// The outcome of one admission check. A denial is an outcome, not an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// Whether the `cost` units were admitted (all of them; never a part).
    pub allowed: bool,
    /// The most units the limit can ever grant at once: `burst` for GCRA,
    /// `capacity` for the buckets, `limit` for the window algorithms.
    pub limit: u64,
    /// Units that could still be admitted right now, after this decision.
    pub remaining: u64,
    /// Milliseconds until the same request could be admitted; 0 when allowed,
    /// [`RETRY_NEVER`] when the cost exceeds `limit` and can never pass.
    pub retry_after_ms: u64,
    /// Milliseconds until the key is back to its full `limit` (the state has
    /// fully recovered), assuming no further traffic.
    pub reset_after_ms: u64,
}

impl Decision {
    /// True when the request was denied because its cost can never be granted.
    pub fn is_impossible(&self) -> bool {
        !self.allowed && self.retry_after_ms == RETRY_NEVER
    }
}
