//! Token bucket: a bucket of `capacity` tokens refilled at `refill_per_sec`;
//! each unit spends a token.

use serde::{Deserialize, Serialize};

use super::{check_rate, check_units};
use crate::error::SpecError;
use crate::rule::{effective_now, whole_units, Rule};

/// Token-bucket parameters, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    capacity: u64,
    refill_per_sec: f64,
}

/// Token-bucket state: tokens left at a time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenState {
    /// Tokens in the bucket at `ts` (fractional: refill is continuous).
    pub tokens: f64,
    /// Epoch milliseconds the state was last moved to; never moves back.
    pub ts: f64,
}

impl TokenBucket {
    /// A bucket of `capacity` tokens refilled at `refill_per_sec` tokens per second.
    ///
    /// # Errors
    /// A [`SpecError`] naming `capacity` or `refill_per_sec`.
    pub fn new(capacity: u64, refill_per_sec: f64) -> Result<Self, SpecError> {
        Ok(Self {
            capacity: check_units("capacity", capacity)?,
            refill_per_sec: check_rate("refill_per_sec", refill_per_sec)?,
        })
    }

    /// Tokens the bucket holds when full.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Tokens added per second.
    pub fn refill_per_sec(&self) -> f64 {
        self.refill_per_sec
    }

    /// Tokens and the effective time at `now`: refilled for the elapsed time,
    /// capped at capacity; a clock that stepped back refills nothing.
    pub(crate) fn level(&self, s: Option<&TokenState>, now: f64) -> (f64, f64) {
        let cap = self.capacity as f64;
        match s {
            None => (cap, effective_now(now, None)),
            Some(s) => {
                let now = effective_now(now, Some(s.ts));
                let refilled = s.tokens + (now - s.ts) * self.refill_per_sec / 1000.0;
                (refilled.min(cap), now)
            }
        }
    }
}

impl Rule for TokenBucket {
    type State = TokenState;

    fn ceiling(&self) -> u64 {
        self.capacity
    }

    fn available(&self, s: Option<&TokenState>, now: f64) -> u64 {
        whole_units(self.level(s, now).0).min(self.capacity)
    }

    fn consume(&self, s: Option<&TokenState>, now: f64, n: u64) -> TokenState {
        let (tokens, ts) = self.level(s, now);
        TokenState { tokens: tokens - n as f64, ts }
    }

    fn refund(&self, s: Option<&TokenState>, now: f64, n: u64) -> Option<TokenState> {
        let (tokens, ts) = self.level(Some(s?), now);
        let cap = self.capacity as f64;
        (n > 0 && tokens < cap).then(|| TokenState { tokens: (tokens + n as f64).min(cap), ts })
    }

    fn retry_after(&self, s: Option<&TokenState>, now: f64, cost: u64) -> f64 {
        let (tokens, _) = self.level(s, now);
        (cost as f64 - tokens) * 1000.0 / self.refill_per_sec
    }

    fn expires_at(&self, s: &TokenState) -> f64 {
        s.ts + (self.capacity as f64 - s.tokens).max(0.0) * 1000.0 / self.refill_per_sec
    }
}
