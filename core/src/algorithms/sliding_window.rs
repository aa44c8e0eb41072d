//! Sliding window as a weighted two-window counter: the estimate of units in
//! the last `window` is the current window's count plus the previous window's
//! count weighted by how much of it still overlaps. A request passes while the
//! estimate stays within `limit`. Memory is two counters per key; no aligned
//! window ever admits more than `limit`.

use serde::{Deserialize, Serialize};

use super::{check_span, check_units};
use crate::error::SpecError;
use crate::rule::{effective_now, whole_units, Rule};
use crate::DurationMs;

/// Sliding-window parameters, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlidingWindow {
    limit: u64,
    window: DurationMs,
    span: f64,
}

/// Sliding-window state: the counts of the current and previous windows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlidingWindowState {
    /// Start of the current window, epoch milliseconds.
    pub w: f64,
    /// Units admitted in the current window.
    pub cur: u64,
    /// Units admitted in the window before it.
    pub prev: u64,
}

/// The counts as seen from one instant.
struct View {
    w: f64,
    cur: u64,
    prev: u64,
    /// Fraction of the current window that has elapsed, in [0, 1).
    elapsed: f64,
}

impl SlidingWindow {
    /// `limit` units per sliding `window`.
    ///
    /// # Errors
    /// A [`SpecError`] naming `limit` or `window`.
    pub fn new(limit: u64, window: DurationMs) -> Result<Self, SpecError> {
        Ok(Self { limit: check_units("limit", limit)?, window, span: check_span("window", window)? })
    }

    /// Units per window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window length.
    pub fn window(&self) -> DurationMs {
        self.window
    }

    fn start(&self, t: f64) -> f64 {
        (t / self.span).floor() * self.span
    }

    fn view(&self, s: Option<&SlidingWindowState>, now: f64) -> View {
        let now = effective_now(now, s.map(|s| s.w));
        let w = self.start(now);
        let (cur, prev) = match s {
            Some(s) if s.w == w => (s.cur, s.prev),
            Some(s) if s.w + self.span == w => (0, s.cur),
            _ => (0, 0),
        };
        View { w, cur, prev, elapsed: (now - w) / self.span }
    }

    fn estimate(v: &View) -> f64 {
        v.prev as f64 * (1.0 - v.elapsed) + v.cur as f64
    }
}

impl Rule for SlidingWindow {
    type State = SlidingWindowState;

    fn ceiling(&self) -> u64 {
        self.limit
    }

    fn available(&self, s: Option<&SlidingWindowState>, now: f64) -> u64 {
        let v = self.view(s, now);
        whole_units(self.limit as f64 - Self::estimate(&v)).min(self.limit - v.cur.min(self.limit))
    }

    fn consume(&self, s: Option<&SlidingWindowState>, now: f64, n: u64) -> SlidingWindowState {
        let v = self.view(s, now);
        SlidingWindowState { w: v.w, cur: v.cur + n, prev: v.prev }
    }

    /// Units go back to the window they were taken in: the current one, or the
    /// previous one when the window has turned since.
    fn refund(&self, s: Option<&SlidingWindowState>, now: f64, n: u64) -> Option<(u64, SlidingWindowState)> {
        let s = s?;
        if n == 0 || !now.is_finite() {
            return None;
        }
        let w = self.start(now);
        if w == s.w && s.cur > 0 {
            let m = n.min(s.cur);
            Some((m, SlidingWindowState { cur: s.cur - m, ..*s }))
        } else if w + self.span == s.w && s.prev > 0 {
            let m = n.min(s.prev);
            Some((m, SlidingWindowState { prev: s.prev - m, ..*s }))
        } else {
            None
        }
    }

    fn retry_after(&self, s: Option<&SlidingWindowState>, now: f64, cost: u64) -> f64 {
        let v = self.view(s, now);
        let now = v.w + v.elapsed * self.span;
        let (limit, cost) = (self.limit as f64, cost as f64);
        // Passes in this window once the previous window's weight has shrunk
        // enough; otherwise in the next, where today's count becomes the weighted one.
        let (start, weighted, counted) = if v.cur as f64 + cost <= limit {
            (v.w, v.prev as f64, v.cur as f64)
        } else {
            (v.w + self.span, v.cur as f64, 0.0)
        };
        let fraction = if weighted > 0.0 { (1.0 - (limit - counted - cost) / weighted).max(0.0) } else { 0.0 };
        start + fraction * self.span - now
    }

    fn expires_at(&self, s: &SlidingWindowState) -> f64 {
        s.w + 2.0 * self.span
    }
}
