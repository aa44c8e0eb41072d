//! The counter both window algorithms (fixed window and quota) are made of:
//! at most `limit` units in each window aligned to the epoch.

use serde::{Deserialize, Serialize};

use super::{check_span, check_units};
use crate::error::SpecError;
use crate::rule::{effective_now, Rule};
use crate::DurationMs;

/// A count of units in one epoch-aligned window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowState {
    /// Start of the window the count belongs to, epoch milliseconds.
    pub w: f64,
    /// Units admitted in that window.
    pub n: u64,
}

/// `limit` units per epoch-aligned `window`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct WindowCounter {
    pub(crate) limit: u64,
    pub(crate) window: DurationMs,
    span: f64,
}

impl WindowCounter {
    pub(crate) fn new(limit: u64, window: DurationMs) -> Result<Self, SpecError> {
        Ok(Self { limit: check_units("limit", limit)?, window, span: check_span("window", window)? })
    }

    /// Start of the window containing `t`.
    pub(crate) fn start(&self, t: f64) -> f64 {
        (t / self.span).floor() * self.span
    }

    /// The current window's start and count; a clock behind the stored window
    /// is held at that window.
    fn current(&self, s: Option<&WindowState>, now: f64) -> (f64, u64) {
        let now = effective_now(now, s.map(|s| s.w));
        let w = self.start(now);
        match s {
            Some(s) if s.w == w => (w, s.n),
            _ => (w, 0),
        }
    }
}

impl Rule for WindowCounter {
    type State = WindowState;

    fn ceiling(&self) -> u64 {
        self.limit
    }

    fn available(&self, s: Option<&WindowState>, now: f64) -> u64 {
        self.limit.saturating_sub(self.current(s, now).1)
    }

    fn consume(&self, s: Option<&WindowState>, now: f64, n: u64) -> WindowState {
        let (w, used) = self.current(s, now);
        WindowState { w, n: used + n }
    }

    /// Units go back only to the window they were taken in: a refund at a
    /// time outside the stored window changes nothing, so units leased in one
    /// window can never be spent in the next.
    fn refund(&self, s: Option<&WindowState>, now: f64, n: u64) -> Option<(u64, WindowState)> {
        let s = s?;
        let m = n.min(s.n);
        (m > 0 && now.is_finite() && self.start(now) == s.w).then(|| (m, WindowState { w: s.w, n: s.n - m }))
    }

    fn retry_after(&self, s: Option<&WindowState>, now: f64, _cost: u64) -> f64 {
        let (w, _) = self.current(s, now);
        w + self.span - now
    }

    fn expires_at(&self, s: &WindowState) -> f64 {
        s.w + self.span
    }
}
