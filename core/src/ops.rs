//! The operations a counter store applies to one key's state, as one pure
//! function: [`apply`]. The daemon runs it inside its compare-and-set loop
//! (several ops combined in one read-modify-write run it in order); here it
//! can be tested without a store.
//!
//! ```
//! use leasehold_core::ops::{apply, Op};
//! use leasehold_core::Algorithm;
//!
//! let alg = Algorithm::from_json(r#"{"algorithm":"token_bucket","capacity":10,"refill_per_sec":10}"#).unwrap();
//! let now = 1_700_000_000_000.0;
//! let (a, state) = apply(&alg, None, now, Op::Take { want: 4, min: 1, lease_ms: 1_000.0, give_back: None });
//! assert_eq!(a.granted, 4);
//! let lease = a.lease.unwrap();
//! // Two units come back before the lease ends.
//! let (b, _) = apply(&alg, state.as_ref(), now + 10.0, Op::Refund { n: 2, lease });
//! assert_eq!(b.returned, 2);
//! ```

use crate::{Algorithm, Decision, LeaseTerm, State};

/// One request against a key's counter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// All-or-nothing admission of `cost` units.
    Decide {
        /// Units to admit.
        cost: u64,
    },
    /// Lease up to `want` units, or none if fewer than `min` are available;
    /// first giving back the unused units of an earlier lease, in the same write.
    Take {
        /// Units wanted.
        want: u64,
        /// The fewest units worth granting.
        min: u64,
        /// How long the store keeps the lease's units out (from the op's time);
        /// window algorithms end it with the window. The holder must stop
        /// spending before then, early enough for its refund to arrive in time.
        lease_ms: f64,
        /// Unused units of an earlier lease, which ends with this op.
        give_back: Option<(u64, LeaseTerm)>,
    },
    /// End `lease`: give back its `n` unused units; the holder spends no more of it.
    Refund {
        /// Units given back.
        n: u64,
        /// The lease they came from.
        lease: LeaseTerm,
    },
    /// Read the key's standing; consumes nothing and never writes.
    Status,
}

/// The result of one [`Op`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Applied {
    /// Units granted: `cost` for an allowed `Decide`, the grant of a `Take`; else 0.
    pub granted: u64,
    /// Units given back and accepted (by a `Refund`, or a `Take`'s
    /// `give_back`): none when the state was at its ceiling already, the
    /// lease has ended (its units were consumed), or the units' window is over.
    pub returned: u64,
    /// The decision as the key stands after the op. For a `Take` that granted
    /// nothing, `retry_after_ms` is when `min` units will be available.
    pub decision: Decision,
    /// The lease a `Take` granted (its identity, for giving units back).
    pub lease: Option<LeaseTerm>,
    /// The time (epoch ms) the op was applied at.
    pub at_ms: f64,
}

/// What `op` does to `state` at `now`: its result, and the new state (`None`
/// when nothing changed, so nothing needs writing).
pub fn apply(alg: &Algorithm, state: Option<&State>, now: f64, op: Op) -> (Applied, Option<State>) {
    let mut returned = 0;
    let mut lease = None;
    let (granted, decision, next) = match op {
        Op::Decide { cost } => {
            let (d, next) = alg.decide(state, now, cost);
            (if d.allowed { cost } else { 0 }, d, next)
        }
        Op::Take { want, min, lease_ms, give_back } => {
            let back = give_back.and_then(|(n, term)| match alg.end_lease(state, now, term, n) {
                (accepted, Some(s)) => Some((accepted, s)),
                _ => None,
            });
            returned = back.as_ref().map_or(0, |b| b.0);
            let back = back.map(|b| b.1);
            let base = back.as_ref().or(state);
            let until = alg.window_end_ms(now).map_or(now + lease_ms, |end| end.min(now + lease_ms));
            // The `min` units the caller spends at once are consumed now, like
            // a decision; only the rest goes out on lease. A cold key that
            // leases exactly its cost then holds nothing out at all.
            let consumed = match min {
                0 => Some(None),
                _ => match alg.decide(base, now, min) {
                    (d, after) if d.allowed => Some(after),
                    _ => None,
                },
            };
            if let Some(after) = consumed {
                let (extra, taken) = match want.saturating_sub(min) {
                    0 => (0, None),
                    more => alg.take_lease(after.as_ref().or(base), now, more, 0, until),
                };
                if extra > 0 {
                    lease = Some(LeaseTerm { taken_at_ms: now, until_ms: until });
                }
                let next = taken.or(after).or(back);
                let d = Decision { allowed: true, ..alg.status(next.as_ref().or(state), now) };
                (min + extra, d, next)
            } else {
                (0, alg.decide(base, now, min.max(1)).0, back)
            }
        }
        Op::Refund { n, lease } => {
            let (accepted, next) = alg.end_lease(state, now, lease, n);
            returned = accepted;
            (0, alg.status(next.as_ref().or(state), now), next)
        }
        Op::Status => (0, alg.status(state, now), None),
    };
    (Applied { granted, returned, decision, lease, at_ms: now }, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: f64 = 1_700_000_000_000.0;

    fn bucket() -> Algorithm {
        Algorithm::from_json(r#"{"algorithm":"token_bucket","capacity":20,"refill_per_sec":20}"#).unwrap()
    }

    #[test]
    fn a_take_gives_back_the_old_lease_and_grants_a_new_one_in_one_step() {
        let alg = bucket();
        let (a, s) = apply(&alg, None, T0, Op::Take { want: 10, min: 1, lease_ms: 1_000.0, give_back: None });
        assert_eq!((a.granted, a.lease), (10, Some(LeaseTerm { taken_at_ms: T0, until_ms: T0 + 1_000.0 })));
        // One unit (the caller's cost) was consumed at once: 9 are out.
        let give_back = Some((4, a.lease.unwrap()));
        let (b, s2) = apply(&alg, s.as_ref(), T0 + 100.0, Op::Take { want: 10, min: 1, lease_ms: 1_000.0, give_back });
        assert_eq!(b.returned, 4);
        assert_eq!(b.granted, 10);
        // 10 left; the 2 that refilled meanwhile fit under the cap (20 − 9
        // out = 11): 11; ending the lease gives 4 back and closes it (15,
        // none out); 10 are taken (1 spent, 9 out): 5 remain.
        assert_eq!(b.decision.remaining, 5, "{:?}", b.decision);
        assert!(s2.is_some());
    }

    #[test]
    fn units_leased_do_not_refill_while_out() {
        let alg = bucket();
        let (_, s) = apply(&alg, None, T0, Op::Take { want: 20, min: 1, lease_ms: 1_000.0, give_back: None });
        // Half a second later ten units have refilled, but nineteen are still
        // out (one was the caller's, consumed at once): one fits.
        let (a, _) = apply(&alg, s.as_ref(), T0 + 500.0, Op::Status);
        assert_eq!(a.decision.remaining, 1);
        let (a, _) = apply(&alg, s.as_ref(), T0 + 1_500.0, Op::Status);
        // The one refilled by then, plus 500 ms of refill since the lease ended.
        assert_eq!(a.decision.remaining, 11, "refill resumes when the lease ends");
    }

    #[test]
    fn a_lease_of_exactly_the_cost_holds_nothing_out() {
        let alg = Algorithm::from_json(r#"{"algorithm":"gcra","limit":1,"period":"1s"}"#).unwrap();
        let (a, s) = apply(&alg, None, T0, Op::Take { want: 1, min: 1, lease_ms: 2_000.0, give_back: None });
        assert_eq!((a.granted, a.lease), (1, None));
        let (st, _) = apply(&alg, s.as_ref(), T0 + 1_000.0, Op::Status);
        assert_eq!(st.decision.remaining, 1, "refilled after one period, not held until the lease term");
    }

    #[test]
    fn a_refund_after_the_lease_ended_is_refused() {
        let alg = bucket();
        let (a, s) = apply(&alg, None, T0, Op::Take { want: 5, min: 1, lease_ms: 100.0, give_back: None });
        let (r, next) = apply(&alg, s.as_ref(), T0 + 100.0, Op::Refund { n: 5, lease: a.lease.unwrap() });
        assert_eq!((r.returned, next), (0, None));
    }

    #[test]
    fn ending_a_lease_releases_its_spent_units_at_once() {
        let alg = bucket();
        let (a, s) = apply(&alg, None, T0, Op::Take { want: 20, min: 1, lease_ms: 10_000.0, give_back: None });
        // All 20 spent; the lease ends 500 ms in: refill resumes from then.
        let (r, s) = apply(&alg, s.as_ref(), T0 + 500.0, Op::Refund { n: 0, lease: a.lease.unwrap() });
        assert_eq!(r.returned, 0);
        let (st, _) = apply(&alg, s.as_ref(), T0 + 1_000.0, Op::Status);
        // 1 refilled under the cap (20 − 19 out) before the end, then 10 in 500 ms.
        assert_eq!(st.decision.remaining, 11, "refilled for 500 ms since the end, not held until 10 s");
    }

    #[test]
    fn a_window_lease_ends_with_its_window() {
        let alg = Algorithm::from_json(r#"{"algorithm":"fixed_window","limit":10,"window":"1s"}"#).unwrap();
        let (a, _) = apply(&alg, None, T0 + 900.0, Op::Take { want: 3, min: 1, lease_ms: 5_000.0, give_back: None });
        assert_eq!(a.lease.unwrap().until_ms, T0 + 1_000.0);
    }

    #[test]
    fn status_never_writes() {
        let alg = bucket();
        assert_eq!(apply(&alg, None, T0, Op::Status).1, None);
    }
}
