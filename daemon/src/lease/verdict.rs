//! What the lease cache is asked and what it answers.

use leasehold_core::Decision;
use thiserror::Error;

use crate::store::StoreUnavailable;

/// One question: may `key` spend `cost` units of `limit` now?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check<'a> {
    /// The limit's name, as configured.
    pub limit: &'a str,
    /// The caller's key (user, IP, API key...).
    pub key: &'a str,
    /// Units to spend.
    pub cost: u64,
}

/// Where a decision came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// From leased units, a local "denied until", or the single-host table
    /// (see [`crate::lease::local`]): no store call.
    Local,
    /// After a store call (a new lease, a denial from the store, or direct mode).
    Store,
    /// The store was unavailable and the limit fails open: allowed, degraded.
    Degraded,
    /// The store was unavailable and the limit fails closed: denied.
    Unavailable,
}

impl Served {
    /// `local`, `store`, `degraded` or `unavailable`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Store => "store",
            Self::Degraded => "degraded",
            Self::Unavailable => "unavailable",
        }
    }
}

/// A decision and how it was reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The decision.
    pub decision: Decision,
    /// Where it came from.
    pub served: Served,
    /// Why the store could not be used, for `Degraded` and `Unavailable`.
    pub unavailable: Option<StoreUnavailable>,
    /// The time (epoch ms) the decision was made at.
    pub at_ms: f64,
}

/// A check that cannot be answered at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CheckError {
    /// No limit by that name is configured.
    #[error("unknown limit {0:?}")]
    UnknownLimit(String),
}
