//! The lease cache's counters, for the dashboard, `/metrics` and `INFO`.
//!
//! Units are conserved: `units_leased = units_held + units_spent +
//! units_drained`, and every drained unit is eventually counted as refunded
//! (the store took it back) or lost (it did not).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters, updated with relaxed atomics on every decision.
#[derive(Debug, Default)]
pub struct LeaseStats {
    /// Allowed from leased units.
    pub allowed_local: AtomicU64,
    /// Allowed after a store call.
    pub allowed_store: AtomicU64,
    /// Denied locally (denied-until, or a cost above the limit's ceiling).
    pub denied_local: AtomicU64,
    /// Denied by the store.
    pub denied_store: AtomicU64,
    /// Allowed while the store was unavailable (fail open).
    pub degraded: AtomicU64,
    /// Denied because the store was unavailable (fail closed).
    pub unavailable: AtomicU64,
    /// Leases taken (grants above zero).
    pub leases: AtomicU64,
    /// Of those, leases taken ahead of need (a key's next lease, taken in
    /// the background while its current one still had units).
    pub leases_ahead: AtomicU64,
    /// Leases taken ahead that were installed when the current one ran out
    /// (a renewal without a store call).
    pub leases_switched: AtomicU64,
    /// Units granted by leases.
    pub units_leased: AtomicU64,
    /// Units given back and accepted by the store.
    pub units_refunded: AtomicU64,
    /// Units dropped: refunds the store did not accept (window over, store
    /// down) and units caught in a race with a lease change.
    pub units_lost: AtomicU64,
    /// Units of leases spent on decisions.
    pub units_spent: AtomicU64,
    /// Units taken out of leases unspent (given back, or dropped).
    pub units_drained: AtomicU64,
}

/// A snapshot of [`LeaseStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[allow(missing_docs)]
pub struct LeaseCounts {
    pub allowed_local: u64,
    pub allowed_store: u64,
    pub denied_local: u64,
    pub denied_store: u64,
    pub degraded: u64,
    pub unavailable: u64,
    pub leases: u64,
    pub leases_ahead: u64,
    pub leases_switched: u64,
    pub units_leased: u64,
    pub units_refunded: u64,
    pub units_lost: u64,
    /// Units held in leases right now, not yet spent or given back.
    pub units_held: u64,
}

impl LeaseCounts {
    /// Decisions served without a store call.
    pub fn local(&self) -> u64 {
        self.allowed_local + self.denied_local
    }

    /// Decisions that needed the store (including fail-policy answers).
    pub fn store(&self) -> u64 {
        self.allowed_store + self.denied_store + self.degraded + self.unavailable
    }

    /// Decisions that admitted.
    pub fn allowed(&self) -> u64 {
        self.allowed_local + self.allowed_store + self.degraded
    }

    /// Decisions that refused.
    pub fn denied(&self) -> u64 {
        self.denied_local + self.denied_store + self.unavailable
    }
}

impl LeaseStats {
    /// The counters now.
    pub fn snapshot(&self) -> LeaseCounts {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LeaseCounts {
            allowed_local: r(&self.allowed_local),
            allowed_store: r(&self.allowed_store),
            denied_local: r(&self.denied_local),
            denied_store: r(&self.denied_store),
            degraded: r(&self.degraded),
            unavailable: r(&self.unavailable),
            leases: r(&self.leases),
            leases_ahead: r(&self.leases_ahead),
            leases_switched: r(&self.leases_switched),
            units_leased: r(&self.units_leased),
            units_refunded: r(&self.units_refunded),
            units_lost: r(&self.units_lost),
            units_held: r(&self.units_leased)
                .saturating_sub(r(&self.units_spent))
                .saturating_sub(r(&self.units_drained)),
        }
    }
}

/// Adds `n` to a counter.
pub(crate) fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}
