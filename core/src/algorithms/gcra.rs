//! GCRA, the generic cell rate algorithm: `limit` units per `period`, with
//! bursts of up to `burst` units. The default algorithm.
//!
//! The state is one number, the theoretical arrival time (`tat`): the instant
//! at which the key would be back to a full burst. Admitting `n` units moves it
//! `n` emission intervals (`period / limit`) later; a request passes when the
//! moved `tat` is no more than `burst` intervals ahead of now. While `u`
//! units are out on lease, `tat` is held at least `u` intervals ahead, so at
//! most `burst − u` units are available (see [`crate::lease`]).
//!
//! Resolution: `tat` is an epoch-millisecond `f64`, exact to about 0.25 µs, so
//! per-key rates above ~100,000 units/s are better served by the token bucket
//! (whose state keeps the caller's own timestamps and a token count).

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::{check_span, check_units};
use crate::error::SpecError;
use crate::lease::{self, LeaseOut, LeaseTerm};
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

/// GCRA state: the theoretical arrival time, epoch milliseconds, and the
/// units out on lease.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct GcraState {
    /// When the key is back to a full burst.
    pub tat: f64,
    /// Units out on lease, sorted by end: while `u` units are out the key
    /// holds at most `burst − u` (see [`crate::lease`]). Omitted from the
    /// JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub out: Vec<LeaseOut>,
}

/// Reads `{"tat": …}` with an optional `"out"`, refusing other fields. Written
/// by hand so the error for an unknown field still says ``expected `tat` ``,
/// as the cross-language vectors (and every binding) expect of GCRA state.
impl<'de> Deserialize<'de> for GcraState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        enum Field {
            Tat,
            Out,
        }

        impl<'de> Deserialize<'de> for Field {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Name;
                impl Visitor<'_> for Name {
                    type Value = Field;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("`tat`")
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<Field, E> {
                        match v {
                            "tat" => Ok(Field::Tat),
                            "out" => Ok(Field::Out),
                            _ => Err(E::unknown_field(v, &["tat"])),
                        }
                    }
                }
                d.deserialize_identifier(Name)
            }
        }

        struct State;
        impl<'de> Visitor<'de> for State {
            type Value = GcraState;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("struct GcraState")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GcraState, A::Error> {
                let (mut tat, mut out) = (None, None);
                while let Some(field) = map.next_key()? {
                    match field {
                        Field::Tat if tat.is_some() => return Err(de::Error::duplicate_field("tat")),
                        Field::Tat => tat = Some(map.next_value()?),
                        Field::Out if out.is_some() => return Err(de::Error::duplicate_field("out")),
                        Field::Out => out = Some(map.next_value()?),
                    }
                }
                let tat = tat.ok_or_else(|| de::Error::missing_field("tat"))?;
                Ok(GcraState { tat, out: out.unwrap_or_default() })
            }
        }

        d.deserialize_struct("GcraState", &["tat", "out"], State)
    }
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

    /// The theoretical arrival time as seen at `now`: never before `now`,
    /// and, while units are out, late enough that at most `burst − out` units
    /// are available. Where the cap bound at a lease end `e` with `u` units
    /// out just before it, the refill stopped there: `tat >= e + u × interval`.
    fn tat(&self, s: Option<&GcraState>, now: f64) -> f64 {
        match s {
            None => now,
            Some(s) if s.out.is_empty() => s.tat.max(now),
            Some(s) => {
                let out = lease::sorted(&s.out);
                let mut left = lease::units_out(&out, f64::NEG_INFINITY);
                let mut tat = s.tat.max(now);
                for o in out.iter() {
                    if o.until_ms > now {
                        break;
                    }
                    tat = tat.max(o.until_ms + left as f64 * self.interval);
                    left = left.saturating_sub(o.units);
                }
                tat.max(now + left as f64 * self.interval)
            }
        }
    }

    /// The state written at `now` with `tat`, keeping the units still out then.
    fn at(s: Option<&GcraState>, tat: f64, now: f64) -> GcraState {
        let out = s.map_or_else(Vec::new, |s| if s.out.is_empty() { Vec::new() } else { lease::pruned(&s.out, now) });
        GcraState { tat, out }
    }

    /// Gives back `n` units of `lease` (closing its entry with `close`).
    fn settle_lease(
        &self,
        s: Option<&GcraState>,
        now: f64,
        lease: LeaseTerm,
        n: u64,
        close: bool,
    ) -> (u64, Option<GcraState>) {
        let Some(s) = s else { return (0, None) };
        if !now.is_finite() {
            return (0, None);
        }
        let from = self.tat(Some(s), now);
        let next = Self::at(Some(s), from, now);
        let (m, changed, out) = lease::settle(next.out, now, lease, n, close);
        if !changed {
            return (0, None);
        }
        // `from` leaves room for at most `burst − out` units, so `m` more fit.
        (m, Some(GcraState { tat: (from - m as f64 * self.interval).max(now), out }))
    }
}

impl Rule for Gcra {
    type State = GcraState;

    fn ceiling(&self) -> u64 {
        self.burst
    }

    fn available(&self, s: Option<&GcraState>, now: f64) -> u64 {
        let now = effective_now(now, None);
        let tat = self.tat(s, now);
        whole_units((now - tat + self.tolerance + self.slack) / self.interval).min(self.burst)
    }

    fn consume(&self, s: Option<&GcraState>, now: f64, n: u64) -> GcraState {
        let now = effective_now(now, None);
        Self::at(s, self.tat(s, now) + n as f64 * self.interval, now)
    }

    fn refund(&self, s: Option<&GcraState>, now: f64, n: u64) -> Option<(u64, GcraState)> {
        let now = effective_now(now, None);
        let s = s?;
        if s.out.is_empty() {
            if n == 0 || s.tat <= now {
                return None;
            }
            let tat = (s.tat - n as f64 * self.interval).max(now);
            let accepted = (((s.tat - tat) / self.interval).round() as u64).min(n);
            return Some((accepted, GcraState { tat, out: Vec::new() }));
        }
        let from = self.tat(Some(s), now);
        let next = Self::at(Some(s), from, now);
        // The earliest tat the units still out allow.
        let floor = now + lease::units_out(&next.out, now) as f64 * self.interval;
        if n == 0 || from <= floor {
            return None;
        }
        let tat = (from - n as f64 * self.interval).max(floor);
        let accepted = (((from - tat) / self.interval).round() as u64).min(n);
        Some((accepted, GcraState { tat, ..next }))
    }

    fn retry_after(&self, s: Option<&GcraState>, now: f64, cost: u64) -> f64 {
        let now = effective_now(now, None);
        let out = match s {
            Some(s) if !s.out.is_empty() => lease::sorted(&s.out),
            _ => return self.tat(s, now) - now + cost as f64 * self.interval - self.tolerance - self.slack,
        };
        // Walk the lease ends still ahead: while `burst − out < cost` the
        // units can only come after the next end.
        let mut tat = self.tat(s, now);
        let mut left = lease::units_out(&out, now);
        let mut from = now;
        for o in out.iter().filter(|o| o.until_ms > now) {
            if cost.saturating_add(left) <= self.burst {
                let t = (tat + cost as f64 * self.interval - self.tolerance - self.slack).max(from);
                if t < o.until_ms {
                    return t - now;
                }
            }
            tat = tat.max(o.until_ms + left as f64 * self.interval);
            left = left.saturating_sub(o.units);
            from = o.until_ms;
        }
        (tat + cost as f64 * self.interval - self.tolerance - self.slack).max(from) - now
    }

    fn expires_at(&self, s: &GcraState) -> f64 {
        // Back to a full burst once every lease has ended and the refill
        // held back by each end's cap has caught up: past every lease end.
        let out = lease::sorted(&s.out);
        let mut left = lease::units_out(&out, f64::NEG_INFINITY);
        let mut tat = s.tat;
        for o in out.iter() {
            tat = tat.max(o.until_ms + left as f64 * self.interval);
            left = left.saturating_sub(o.units);
        }
        tat
    }

    fn take_lease(&self, s: Option<&GcraState>, now: f64, want: u64, min: u64, until: f64) -> (u64, Option<GcraState>) {
        if !lease::valid_term(now, now, until) {
            return (0, None);
        }
        let granted = self.grant(s, now, want, min);
        if granted == 0 {
            return (0, None);
        }
        let next = self.consume(s, now, granted);
        let out = lease::with_lease(next.out, LeaseOut { units: granted, until_ms: until, taken_at_ms: now });
        (granted, Some(GcraState { out, ..next }))
    }

    fn refund_lease(&self, s: Option<&GcraState>, now: f64, lease: LeaseTerm, n: u64) -> (u64, Option<GcraState>) {
        self.settle_lease(s, now, lease, n, false)
    }

    fn end_lease(&self, s: Option<&GcraState>, now: f64, lease: LeaseTerm, n: u64) -> (u64, Option<GcraState>) {
        self.settle_lease(s, now, lease, n, true)
    }
}
