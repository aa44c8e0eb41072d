//! Sliding log: exact — a request passes while the units admitted in the last
//! `window` (a true sliding window) plus its cost stay within `limit`. The log
//! keeps one `[time, units]` entry per admitting instant, pruned as entries
//! age out, so it never holds more than `limit` entries.
//!
//! A refund takes units back only from the entry of the instant they were
//! taken, never from other writers' entries. Units are logged when taken, so
//! the log is exact for direct decisions; units leased and spent later would
//! leave the log early (see [`crate::lease`]).

use serde::{Deserialize, Serialize};

use super::{check_span, check_units};
use crate::error::SpecError;
use crate::rule::{effective_now, Rule};
use crate::DurationMs;

/// Sliding-log parameters, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlidingLog {
    limit: u64,
    window: DurationMs,
    span: f64,
}

/// Sliding-log state: admissions still inside the window, oldest first.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogState {
    /// `(epoch ms, units)` pairs in time order; an entry leaves the window
    /// `window` milliseconds after its time.
    pub log: Vec<(f64, u64)>,
}

impl SlidingLog {
    /// `limit` units in any `window`-long interval.
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

    /// The entries still inside the window at the effective `now`, and that time.
    fn live<'a>(&self, s: Option<&'a LogState>, now: f64) -> (&'a [(f64, u64)], f64) {
        let log: &[(f64, u64)] = s.map_or(&[], |s| &s.log);
        let now = effective_now(now, log.last().map(|e| e.0));
        let first = log.partition_point(|&(t, _)| t + self.span <= now);
        (&log[first..], now)
    }

    fn used(entries: &[(f64, u64)]) -> u64 {
        entries.iter().map(|e| e.1).sum()
    }
}

impl Rule for SlidingLog {
    type State = LogState;

    fn ceiling(&self) -> u64 {
        self.limit
    }

    fn available(&self, s: Option<&LogState>, now: f64) -> u64 {
        self.limit.saturating_sub(Self::used(self.live(s, now).0))
    }

    fn consume(&self, s: Option<&LogState>, now: f64, n: u64) -> LogState {
        let (live, now) = self.live(s, now);
        let mut log = live.to_vec();
        match log.last_mut() {
            Some(last) if last.0 == now => last.1 += n,
            _ => log.push((now, n)),
        }
        LogState { log }
    }

    /// Gives back up to `n` units from the entry dated exactly `now` (pass
    /// the time the units were taken): the caller's own admission. Entries
    /// at other times are other writers' and are never touched, so a refund
    /// whose entry has aged out (or was never logged) changes nothing.
    fn refund(&self, s: Option<&LogState>, now: f64, n: u64) -> Option<(u64, LogState)> {
        let s = s?;
        let i = s.log.iter().position(|&(t, units)| t == now && units > 0)?;
        let m = n.min(s.log[i].1);
        if m == 0 {
            return None;
        }
        let mut log = s.log.clone();
        log[i].1 -= m;
        log.retain(|e| e.1 > 0);
        Some((m, LogState { log }))
    }

    fn retry_after(&self, s: Option<&LogState>, now: f64, cost: u64) -> f64 {
        let (live, now) = self.live(s, now);
        let mut excess = (Self::used(live) + cost).saturating_sub(self.limit);
        for &(t, units) in live {
            if excess <= units {
                return t + self.span - now;
            }
            excess -= units;
        }
        0.0
    }

    fn expires_at(&self, s: &LogState) -> f64 {
        s.log.last().map_or(0.0, |e| e.0 + self.span)
    }
}
