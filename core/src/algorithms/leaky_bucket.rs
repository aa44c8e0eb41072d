//! Leaky bucket as a meter: each unit adds to a level that leaks away at
//! `leak_per_sec`; a request passes while the level stays within `capacity`.
//!
//! As a meter it admits exactly what a token bucket of the same capacity and
//! rate admits (the level is the tokens spent), so the arithmetic is the token
//! bucket's; only the stored state reads the other way round.

use serde::{Deserialize, Serialize};

use super::{check_rate, check_units, TokenBucket, TokenState};
use crate::error::SpecError;
use crate::lease::{LeaseOut, LeaseTerm};
use crate::rule::Rule;

/// Leaky-bucket parameters, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeakyBucket {
    meter: TokenBucket,
}

/// Leaky-bucket state: the level of the bucket at a time, and the units out on lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeakyState {
    /// Units in the bucket at `ts`, leaking continuously.
    pub level: f64,
    /// Epoch milliseconds the state was last moved to; never moves back.
    pub ts: f64,
    /// Units out on lease, sorted by end: the level never leaks below them
    /// (see [`crate::lease`]). Omitted from the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub out: Vec<LeaseOut>,
}

impl LeakyBucket {
    /// A bucket holding up to `capacity` units that leaks `leak_per_sec` per second.
    ///
    /// # Errors
    /// A [`SpecError`] naming `capacity` or `leak_per_sec`.
    pub fn new(capacity: u64, leak_per_sec: f64) -> Result<Self, SpecError> {
        let capacity = check_units("capacity", capacity)?;
        let leak = check_rate("leak_per_sec", leak_per_sec)?;
        Ok(Self { meter: TokenBucket::new(capacity, leak)? })
    }

    /// Units the bucket holds before it overflows.
    pub fn capacity(&self) -> u64 {
        self.meter.capacity()
    }

    /// Units leaked per second.
    pub fn leak_per_sec(&self) -> f64 {
        self.meter.refill_per_sec()
    }

    fn as_tokens(self, s: Option<&LeakyState>) -> Option<TokenState> {
        s.map(|s| TokenState { tokens: self.capacity() as f64 - s.level, ts: s.ts, out: s.out.clone() })
    }

    fn as_level(self, t: TokenState) -> LeakyState {
        LeakyState { level: (self.capacity() as f64 - t.tokens).max(0.0), ts: t.ts, out: t.out }
    }
}

impl Rule for LeakyBucket {
    type State = LeakyState;

    fn ceiling(&self) -> u64 {
        self.meter.capacity()
    }

    fn available(&self, s: Option<&LeakyState>, now: f64) -> u64 {
        self.meter.available(self.as_tokens(s).as_ref(), now)
    }

    fn consume(&self, s: Option<&LeakyState>, now: f64, n: u64) -> LeakyState {
        self.as_level(self.meter.consume(self.as_tokens(s).as_ref(), now, n))
    }

    fn refund(&self, s: Option<&LeakyState>, now: f64, n: u64) -> Option<(u64, LeakyState)> {
        self.meter.refund(self.as_tokens(s).as_ref(), now, n).map(|(m, t)| (m, self.as_level(t)))
    }

    fn retry_after(&self, s: Option<&LeakyState>, now: f64, cost: u64) -> f64 {
        self.meter.retry_after(self.as_tokens(s).as_ref(), now, cost)
    }

    fn expires_at(&self, s: &LeakyState) -> f64 {
        match self.as_tokens(Some(s)) {
            Some(t) if !s.out.is_empty() => self.meter.expires_at(&t),
            _ => s.ts + s.level.max(0.0) * 1000.0 / self.leak_per_sec(),
        }
    }

    fn take_lease(
        &self,
        s: Option<&LeakyState>,
        now: f64,
        want: u64,
        min: u64,
        until: f64,
    ) -> (u64, Option<LeakyState>) {
        let (granted, next) = self.meter.take_lease(self.as_tokens(s).as_ref(), now, want, min, until);
        (granted, next.map(|t| self.as_level(t)))
    }

    fn refund_lease(&self, s: Option<&LeakyState>, now: f64, lease: LeaseTerm, n: u64) -> (u64, Option<LeakyState>) {
        let (m, next) = self.meter.refund_lease(self.as_tokens(s).as_ref(), now, lease, n);
        (m, next.map(|t| self.as_level(t)))
    }

    fn end_lease(&self, s: Option<&LeakyState>, now: f64, lease: LeaseTerm, n: u64) -> (u64, Option<LeakyState>) {
        let (m, next) = self.meter.end_lease(self.as_tokens(s).as_ref(), now, lease, n);
        (m, next.map(|t| self.as_level(t)))
    }
}
