//! Token bucket: a bucket of `capacity` tokens refilled at `refill_per_sec`;
//! each unit spends a token. While units are out on lease the bucket refills
//! only to `capacity` less those units (see [`crate::lease`]).

use serde::{Deserialize, Serialize};

use super::{check_rate, check_units};
use crate::error::SpecError;
use crate::lease::{self, LeaseOut, LeaseTerm};
use crate::rule::{effective_now, whole_units, Rule};

/// Token-bucket parameters, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    capacity: u64,
    refill_per_sec: f64,
}

/// Token-bucket state: tokens left at a time, and the units out on lease.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenState {
    /// Tokens in the bucket at `ts` (fractional: refill is continuous).
    pub tokens: f64,
    /// Epoch milliseconds the state was last moved to; never moves back.
    pub ts: f64,
    /// Units out on lease, sorted by end; refill never raises the tokens above
    /// `capacity` minus the units out (see [`crate::lease`]). Omitted from
    /// the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub out: Vec<LeaseOut>,
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
    /// capped at capacity less the units out on lease; a clock that stepped
    /// back refills nothing.
    pub(crate) fn level(&self, s: Option<&TokenState>, now: f64) -> (f64, f64) {
        let cap = self.capacity as f64;
        match s {
            None => (cap, effective_now(now, None)),
            Some(s) if s.out.is_empty() => {
                let now = effective_now(now, Some(s.ts));
                let refilled = s.tokens + (now - s.ts) * self.refill_per_sec / 1000.0;
                (refilled.min(cap), now)
            }
            Some(s) => {
                let now = effective_now(now, Some(s.ts));
                let out = lease::sorted(&s.out);
                // Refill segment by segment between lease ends, each capped at
                // the capacity less the units still out on it.
                let mut left = lease::units_out(&out, s.ts);
                let mut tokens = s.tokens.min(cap - left as f64);
                let mut t = s.ts;
                for o in out.iter().filter(|o| o.until_ms > s.ts) {
                    if o.until_ms > now {
                        break;
                    }
                    tokens = (tokens + (o.until_ms - t) * self.refill_per_sec / 1000.0).min(cap - left as f64);
                    t = o.until_ms;
                    left = left.saturating_sub(o.units);
                }
                let refilled = tokens + (now - t) * self.refill_per_sec / 1000.0;
                (refilled.min(cap - left as f64), now)
            }
        }
    }

    /// The state at `now` with `tokens`, keeping the units still out then.
    fn at(s: Option<&TokenState>, tokens: f64, ts: f64) -> TokenState {
        let out = s.map_or_else(Vec::new, |s| if s.out.is_empty() { Vec::new() } else { lease::pruned(&s.out, ts) });
        TokenState { tokens, ts, out }
    }

    /// Gives back `n` units of `lease` (closing its entry with `close`).
    fn settle_lease(
        &self,
        s: Option<&TokenState>,
        now: f64,
        lease: LeaseTerm,
        n: u64,
        close: bool,
    ) -> (u64, Option<TokenState>) {
        let Some(s) = s else { return (0, None) };
        if !now.is_finite() {
            return (0, None);
        }
        let (tokens, ts) = self.level(Some(s), now);
        let next = Self::at(Some(s), tokens, ts);
        let (m, changed, out) = lease::settle(next.out, ts, lease, n, close);
        if !changed {
            return (0, None);
        }
        let cap = self.capacity as f64 - lease::units_out(&out, ts) as f64;
        (m, Some(TokenState { tokens: (tokens + m as f64).min(cap), ts, out }))
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
        Self::at(s, tokens - n as f64, ts)
    }

    fn refund(&self, s: Option<&TokenState>, now: f64, n: u64) -> Option<(u64, TokenState)> {
        let s = s?;
        let (tokens, ts) = self.level(Some(s), now);
        let next = Self::at(Some(s), tokens, ts);
        let cap = self.capacity as f64 - lease::units_out(&next.out, ts) as f64;
        if n == 0 || tokens >= cap {
            return None;
        }
        let refilled = (tokens + n as f64).min(cap);
        let accepted = ((refilled - tokens).round() as u64).min(n);
        Some((accepted, TokenState { tokens: refilled, ..next }))
    }

    fn retry_after(&self, s: Option<&TokenState>, now: f64, cost: u64) -> f64 {
        let (tokens, now) = self.level(s, now);
        let out = match s {
            Some(s) if !s.out.is_empty() => lease::sorted(&s.out),
            _ => return (cost as f64 - tokens) * 1000.0 / self.refill_per_sec,
        };
        // Walk the lease ends still ahead: while the cap is below `cost`,
        // the level can reach `cost` only after the next end.
        let cap = self.capacity as f64;
        let mut left = lease::units_out(&out, now);
        let (mut level, mut t, mut wait) = (tokens, now, 0.0);
        for o in out.iter().filter(|o| o.until_ms > now) {
            if cost as f64 <= cap - left as f64 {
                let need = ((cost as f64 - level) * 1000.0 / self.refill_per_sec).max(0.0);
                if t + need < o.until_ms {
                    return wait + need;
                }
            }
            level = (level + (o.until_ms - t) * self.refill_per_sec / 1000.0).min(cap - left as f64);
            wait += o.until_ms - t;
            t = o.until_ms;
            left = left.saturating_sub(o.units);
        }
        wait + ((cost as f64 - level) * 1000.0 / self.refill_per_sec).max(0.0)
    }

    fn expires_at(&self, s: &TokenState) -> f64 {
        if s.out.is_empty() {
            return s.ts + (self.capacity as f64 - s.tokens).max(0.0) * 1000.0 / self.refill_per_sec;
        }
        // Full once every lease has ended and the level has refilled after the last.
        let last = s.out.iter().map(|o| o.until_ms).fold(s.ts, f64::max);
        let (tokens, t) = self.level(Some(s), last);
        t + (self.capacity as f64 - tokens).max(0.0) * 1000.0 / self.refill_per_sec
    }

    fn take_lease(
        &self,
        s: Option<&TokenState>,
        now: f64,
        want: u64,
        min: u64,
        until: f64,
    ) -> (u64, Option<TokenState>) {
        let (tokens, ts) = self.level(s, now);
        if !lease::valid_term(now, ts, until) {
            return (0, None);
        }
        let granted = self.grant(s, now, want, min);
        if granted == 0 {
            return (0, None);
        }
        let next = Self::at(s, tokens - granted as f64, ts);
        let out = lease::with_lease(next.out, LeaseOut { units: granted, until_ms: until, taken_at_ms: now });
        (granted, Some(TokenState { out, ..next }))
    }

    fn refund_lease(&self, s: Option<&TokenState>, now: f64, lease: LeaseTerm, n: u64) -> (u64, Option<TokenState>) {
        self.settle_lease(s, now, lease, n, false)
    }

    fn end_lease(&self, s: Option<&TokenState>, now: f64, lease: LeaseTerm, n: u64) -> (u64, Option<TokenState>) {
        self.settle_lease(s, now, lease, n, true)
    }
}
