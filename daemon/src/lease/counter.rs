//! Rate-limit counters: the ops a lease cache (or direct mode) applies to a
//! key's counter, as one client of the store layer's compare-and-set loop.
//!
//! A counter record holds one algorithm's state as JSON. The pure part —
//! what an op does to a state — is [`apply_op`]; this module only names the
//! record and runs the op inside a CAS round.

use leasehold_core::{Algorithm, Decision, State};

use crate::store::cas::{Content, Draft, Update};
use crate::store::{Cas, StoreUnavailable};

/// One request against a key's counter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// All-or-nothing admission of `cost` units.
    Decide {
        /// Units to admit.
        cost: u64,
    },
    /// Grant up to `want` units, or none if fewer than `min` are available;
    /// first giving back the unused units of a previous grant, in the same write.
    Take {
        /// Units wanted.
        want: u64,
        /// The fewest units worth granting.
        min: u64,
        /// Unused units of an earlier grant, and when that grant was taken.
        give_back: Option<(u64, f64)>,
    },
    /// Give back `n` unused units that were taken at `taken_at_ms`.
    Refund {
        /// Units given back.
        n: u64,
        /// When they were taken (window algorithms accept them back only into that window).
        taken_at_ms: f64,
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
    /// `give_back`): none when the state was at its ceiling already or the
    /// units' window is over.
    pub returned: u64,
    /// The decision as the key stands after the op. For a `Take` that granted
    /// nothing, `retry_after_ms` is when `min` units will be available.
    pub decision: Decision,
    /// The time (epoch ms) the op was applied at.
    pub at_ms: f64,
}

/// What `op` does to `state` at `now`: its result, and the new state (`None`
/// when nothing changed, so nothing needs writing). Pure.
pub fn apply_op(alg: &Algorithm, state: Option<&State>, now: f64, op: Op) -> (Applied, Option<State>) {
    let mut returned = 0;
    let (granted, decision, next) = match op {
        Op::Decide { cost } => {
            let (d, next) = alg.decide(state, now, cost);
            (if d.allowed { cost } else { 0 }, d, next)
        }
        Op::Take { want, min, give_back } => {
            let back = give_back.and_then(|(n, at)| alg.refund(state, at, n).map(|s| (n, s)));
            returned = back.as_ref().map_or(0, |b| b.0);
            let back = back.map(|b| b.1);
            let base = back.as_ref().or(state);
            let (granted, taken) = alg.take(base, now, want, min);
            let d = match &taken {
                Some(t) => Decision { allowed: true, ..alg.status(Some(t), now) },
                None => alg.decide(base, now, min.max(1)).0,
            };
            let next = taken.or(back);
            (granted, d, next)
        }
        Op::Refund { n, taken_at_ms } => {
            let next = alg.refund(state, taken_at_ms, n);
            returned = if next.is_some() { n } else { 0 };
            (0, alg.status(next.as_ref().or(state), now), next)
        }
        Op::Status => (0, alg.status(state, now), None),
    };
    (Applied { granted, returned, decision, at_ms: now }, next)
}

/// A counter record's content: an algorithm's state.
struct Counter {
    alg: Algorithm,
    state: State,
}

impl Content for Counter {
    fn encode(&self) -> String {
        self.state.to_json()
    }
    fn expires_at_ms(&self) -> u64 {
        self.alg.expires_at_ms(&self.state).max(0.0) as u64
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

struct CounterOp {
    alg: Algorithm,
    op: Op,
}

impl Update for CounterOp {
    type Output = Applied;

    fn apply(&self, draft: &mut Draft) -> Applied {
        let (alg, now) = (self.alg, draft.now_ms());
        let state = draft.value(|r| alg.parse_state(&r.state).ok().map(|state| Counter { alg, state }));
        let (applied, next) = apply_op(&alg, state.map(|c| &c.state), now, self.op);
        if let Some(state) = next {
            draft.set(Counter { alg, state });
        }
        applied
    }
}

/// Rate-limit counters over the CAS loop. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Counters {
    cas: Cas,
}

impl Counters {
    /// Counters stored through `cas`.
    pub fn new(cas: Cas) -> Self {
        Self { cas }
    }

    /// The CAS loop underneath (its store, clock and traffic counters).
    pub fn cas(&self) -> &Cas {
        &self.cas
    }

    /// The storage key of `key` under `limit`: `prefix:limit:key`.
    pub fn storage_key(&self, limit: &str, key: &str) -> String {
        format!("{}:{limit}:{key}", self.cas.prefix())
    }

    /// Applies `op` to the counter of `key` under `limit` (using `alg`).
    ///
    /// # Errors
    /// [`StoreUnavailable`] when the store failed or every retry conflicted;
    /// the op then had no effect, unless the store failed after accepting the
    /// write, in which case units may have been consumed but are never granted
    /// (under-issue, never over-issue).
    pub async fn apply(&self, limit: &str, key: &str, alg: &Algorithm, op: Op) -> Result<Applied, StoreUnavailable> {
        self.cas.update(self.storage_key(limit, key), CounterOp { alg: *alg, op }).await
    }
}
