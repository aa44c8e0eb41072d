//! Observability: Prometheus metrics, and the live `stats` events the
//! dashboard streams. Fed by the surfaces (decisions, latencies) and by a
//! [`Snapshot`] of the lower layers' counters; it never reaches into them.
//!
//! May use: [`crate::lease`] and [`crate::store`] types (counters, verdicts).

pub mod events;
pub mod metrics;
pub mod sketch;

use crate::lease::stats::LeaseCounts;
use crate::store::cas::CasCounts;
use crate::store::guard::BreakerState;

/// The lower layers' counters at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot {
    /// The lease cache's counters.
    pub lease: LeaseCounts,
    /// Store traffic.
    pub store: CasCounts,
    /// The store breaker.
    pub breaker: BreakerState,
    /// Keys with a slot in the lease cache.
    pub l1_keys: u64,
}
