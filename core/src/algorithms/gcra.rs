//! GCRA, the generic cell rate algorithm: `limit` units per `period`, with
//! bursts of up to `burst` units. The default algorithm.
//!
//! The state is one number, the theoretical arrival time (`tat`): the instant
//! at which the key would be back to a full burst. Admitting `n` units moves it
//! `n` emission intervals (`period / limit`) later; a request passes when the
//! moved `tat` is no more than `burst` intervals ahead of now.
//!
//! Resolution: `tat` is an epoch-millisecond `f64`, exact to about 0.25 µs, so
//! per-key rates above ~100,000 units/s are better served by the token bucket
//! (whose state keeps the caller's own timestamps and a token count).

use serde::{Deserialize, Serialize};

use super::{check_span, check_units};
use crate::error::SpecError;
use crate::rule::{effective_now, whole_units, Rule};
use crate::DurationMs;

/// GCRA parameters, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gcra {
    limit: u64,
    period: DurationMs,
    burst: u64,
    /// Emission interval: milliseconds per unit.
    interval: f64,
    /// Burst tolerance in milliseconds: `burst × interval`.
    tolerance: f64,
    /// How early (ms) a unit may become available, to absorb the rounding of
    /// `tat`: an epoch-millisecond `f64` is only exact to about 0.25 µs.
    slack: f64,
}

/// GCRA state: the theoretical arrival time, epoch milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcraState {
    /// When the key is back to a full burst.
    pub tat: f64,
}

impl Gcra {
    /// `limit` units per `period`, at most `burst` at once (default: `limit`).
    ///
    /// # Errors
    /// A [`SpecError`] naming `limit`, `period` or `burst` when one is zero or too large.
    pub fn new(limit: u64, period: DurationMs, burst: Option<u64>) -> Result<Self, SpecError> {
        let limit = check_units("limit", limit)?;
        let span = check_span("period", period)?;
        let burst = check_units("burst", burst.unwrap_or(limit))?;
        let interval = span / limit as f64;
        // 1 µs, or a thousandth of an interval for very high rates (a unit is
        // then at worst reported a little late, never early).
        let slack = (interval * 1e-3).min(1e-3);
        Ok(Self { limit, period, burst, interval, tolerance: burst as f64 * interval, slack })
    }

    /// Units per period.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The period the limit is counted over.
    pub fn period(&self) -> DurationMs {
        self.period
    }

    /// The most units admitted at once.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    fn tat(s: Option<&GcraState>, now: f64) -> f64 {
        s.map_or(now, |s| s.tat.max(now))
    }
}

impl Rule for Gcra {
    type State = GcraState;

    fn ceiling(&self) -> u64 {
        self.burst
    }

    fn available(&self, s: Option<&GcraState>, now: f64) -> u64 {
        let now = effective_now(now, None);
        let tat = Self::tat(s, now);
        whole_units((now - tat + self.tolerance + self.slack) / self.interval).min(self.burst)
    }

    fn consume(&self, s: Option<&GcraState>, now: f64, n: u64) -> GcraState {
        let now = effective_now(now, None);
        GcraState { tat: Self::tat(s, now) + n as f64 * self.interval }
    }

    fn refund(&self, s: Option<&GcraState>, now: f64, n: u64) -> Option<GcraState> {
        let now = effective_now(now, None);
        let s = s?;
        if n == 0 || s.tat <= now {
            return None;
        }
        Some(GcraState { tat: (s.tat - n as f64 * self.interval).max(now) })
    }

    fn retry_after(&self, s: Option<&GcraState>, now: f64, cost: u64) -> f64 {
        let now = effective_now(now, None);
        Self::tat(s, now) - now + cost as f64 * self.interval - self.tolerance - self.slack
    }

    fn expires_at(&self, s: &GcraState) -> f64 {
        s.tat
    }
}
