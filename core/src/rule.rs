//! The one shape every algorithm has, and the operations written once over it.
//!
//! An algorithm only says how many units are available, how to consume and give
//! back units, and when units come back. `decide`, `take` and the decision
//! fields are derived here, once, so every algorithm answers consistently:
//! `decide(cost)` admits exactly when `available() >= cost`, and `take` never
//! grants more than `available()`.

use crate::decision::{Decision, RETRY_NEVER};

/// Tolerance, in units, when turning a fractional unit count into whole units.
/// Float rounding can leave `2.9999999999999996` where the exact answer is 3;
/// without the tolerance such a state would under-report by one unit. It is far
/// below any fraction that integer-millisecond times and realistic rates produce.
pub(crate) const UNIT_EPSILON: f64 = 1e-9;

/// Whole units in a fractional amount, with [`UNIT_EPSILON`] tolerance.
pub(crate) fn whole_units(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    let w = (x + UNIT_EPSILON).floor();
    if w >= crate::MAX_UNITS as f64 {
        crate::MAX_UNITS
    } else {
        w as u64
    }
}

/// Milliseconds as a whole number, rounded up (so waiting that long suffices).
pub(crate) fn ceil_ms(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        0
    } else if x >= RETRY_NEVER as f64 {
        RETRY_NEVER
    } else {
        // A retry time within float noise of a whole millisecond is that millisecond.
        (x - 1e-7).ceil().max(0.0) as u64
    }
}

/// The time an operation runs at: never before the state's own time (a clock
/// that stepped back), and the state's time when `now` is not a number.
pub(crate) fn effective_now(now: f64, state_time: Option<f64>) -> f64 {
    match state_time {
        Some(t) if !now.is_finite() || now < t => t,
        None if !now.is_finite() => 0.0,
        _ => now,
    }
}

/// One rate-limit algorithm as pure functions over its optional state.
pub(crate) trait Rule {
    /// The algorithm's stored state.
    type State: Clone + PartialEq;

    /// The most units the algorithm can ever grant at once.
    fn ceiling(&self) -> u64;

    /// Whole units that could be granted at `now`.
    fn available(&self, s: Option<&Self::State>, now: f64) -> u64;

    /// The state after consuming `n` units at `now`; `n <= available`.
    fn consume(&self, s: Option<&Self::State>, now: f64, n: u64) -> Self::State;

    /// The units accepted and the state after giving back `n` unused units at
    /// `now`, capped at the ceiling; `None` when nothing changes.
    fn refund(&self, s: Option<&Self::State>, now: f64, n: u64) -> Option<(u64, Self::State)>;

    /// Milliseconds from `now` until `cost` units (`0 < cost <= ceiling`) are available.
    fn retry_after(&self, s: Option<&Self::State>, now: f64, cost: u64) -> f64;

    /// Epoch milliseconds at which the state is indistinguishable from absent.
    fn expires_at(&self, s: &Self::State) -> f64;

    /// All-or-nothing admission of `cost` units; a denial returns no new state.
    fn decide(&self, s: Option<&Self::State>, now: f64, cost: u64) -> (Decision, Option<Self::State>) {
        let avail = self.available(s, now);
        let reset = |st: Option<&Self::State>| st.map_or(0, |st| ceil_ms(self.expires_at(st) - now));
        if cost <= avail {
            if cost == 0 {
                let d = Decision {
                    allowed: true,
                    limit: self.ceiling(),
                    remaining: avail,
                    retry_after_ms: 0,
                    reset_after_ms: reset(s),
                };
                return (d, None);
            }
            let next = self.consume(s, now, cost);
            let d = Decision {
                allowed: true,
                limit: self.ceiling(),
                // Consuming `cost` lowers what is available by exactly `cost`.
                remaining: avail - cost,
                retry_after_ms: 0,
                reset_after_ms: reset(Some(&next)),
            };
            (d, Some(next))
        } else {
            let retry =
                if cost > self.ceiling() { RETRY_NEVER } else { ceil_ms(self.retry_after(s, now, cost)).max(1) };
            let d = Decision {
                allowed: false,
                limit: self.ceiling(),
                remaining: avail,
                retry_after_ms: retry,
                reset_after_ms: reset(s),
            };
            (d, None)
        }
    }

    /// Grant up to `want` units, or none when fewer than `min` are available.
    fn take(&self, s: Option<&Self::State>, now: f64, want: u64, min: u64) -> (u64, Option<Self::State>) {
        let granted = self.grant(s, now, want, min);
        if granted == 0 {
            (0, None)
        } else {
            (granted, Some(self.consume(s, now, granted)))
        }
    }

    /// What `take` would grant: up to `want`, or 0 when fewer than `min` are available.
    fn grant(&self, s: Option<&Self::State>, now: f64, want: u64, min: u64) -> u64 {
        let granted = want.min(self.available(s, now));
        if granted < min {
            0
        } else {
            granted
        }
    }

    /// Grant up to `want` units as a lease spendable until `until` (see
    /// [`crate::lease`]). Algorithms without an out list (the windows) take
    /// plainly: their leases end with the window the units are counted in.
    fn take_lease(
        &self,
        s: Option<&Self::State>,
        now: f64,
        want: u64,
        min: u64,
        _until: f64,
    ) -> (u64, Option<Self::State>) {
        self.take(s, now, want, min)
    }

    /// Give back `n` unused units of `lease` at `now`: the units accepted and
    /// the new state. Without an out list this is a refund dated when the
    /// units were taken, so they go back only into the window they came from.
    fn refund_lease(
        &self,
        s: Option<&Self::State>,
        _now: f64,
        lease: crate::lease::LeaseTerm,
        n: u64,
    ) -> (u64, Option<Self::State>) {
        match self.refund(s, lease.taken_at_ms, n) {
            Some((m, next)) => (m, Some(next)),
            None => (0, None),
        }
    }

    /// Ends `lease` at `now`: gives back `n` unused units (as
    /// [`Self::refund_lease`]) and, for algorithms with an out list, closes
    /// its entry, so the units spent count as consumed now. The holder must
    /// not spend the lease afterwards.
    fn end_lease(
        &self,
        s: Option<&Self::State>,
        now: f64,
        lease: crate::lease::LeaseTerm,
        n: u64,
    ) -> (u64, Option<Self::State>) {
        self.refund_lease(s, now, lease, n)
    }
}

/// Implements [`Rule`] for a newtype over another rule with the same state.
macro_rules! delegate_rule {
    ($outer:ty, $state:ty) => {
        impl Rule for $outer {
            type State = $state;

            fn ceiling(&self) -> u64 {
                self.0.ceiling()
            }

            fn available(&self, s: Option<&$state>, now: f64) -> u64 {
                self.0.available(s, now)
            }

            fn consume(&self, s: Option<&$state>, now: f64, n: u64) -> $state {
                self.0.consume(s, now, n)
            }

            fn refund(&self, s: Option<&$state>, now: f64, n: u64) -> Option<(u64, $state)> {
                self.0.refund(s, now, n)
            }

            fn retry_after(&self, s: Option<&$state>, now: f64, cost: u64) -> f64 {
                self.0.retry_after(s, now, cost)
            }

            fn expires_at(&self, s: &$state) -> f64 {
                self.0.expires_at(s)
            }
        }
    };
}
pub(crate) use delegate_rule;
