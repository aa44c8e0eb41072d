//! What the lease cache runs with, resolved from the config: each named
//! limit's algorithm, mode, fail policy and lease tuning ([`LimitSettings`]),
//! and the cache's own bounds ([`CacheSettings`]). Limits are addressed by
//! name everywhere (config, socket, HTTP), so later features (plans) can refer
//! to them.

use std::time::Duration;

use leasehold_core::Algorithm;
use serde::{Deserialize, Serialize};

use crate::store::guard::BreakerSettings;

/// How decisions for a limit are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Units are leased from the store in batches and spent locally (default).
    #[default]
    Leased,
    /// Every decision is one compare-and-set on the store: exact per request.
    Direct,
}

/// What a decision is when the store cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailPolicy {
    /// Deny, with the reason "unavailable" (default).
    #[default]
    Closed,
    /// Allow, and count the decision as degraded.
    Open,
}

/// Lease tuning for one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseSettings {
    /// The longest a lease lives; unused units then go back to the store.
    pub ttl: Duration,
    /// How far ahead a lease provisions: `want = demand rate × horizon`.
    pub horizon: Duration,
    /// The most units one lease holds unspent. A daemon holds at most two
    /// leases per key (current and ahead), so D daemons under-issue by at
    /// most 2 × D × max.
    pub max: u64,
}

/// Everything about one named limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitSettings {
    /// The algorithm and its parameters.
    pub algorithm: Algorithm,
    /// Leased or direct.
    pub mode: Mode,
    /// Closed or open.
    pub fail: FailPolicy,
    /// Lease tuning (ignored in direct mode).
    pub lease: LeaseSettings,
}

impl LimitSettings {
    /// A limit with the default mode, fail policy and lease tuning: leases
    /// live 2 s, provision 250 ms of demand, and hold at most a tenth of the
    /// limit's ceiling (at least 1).
    pub fn new(algorithm: Algorithm) -> Self {
        Self {
            algorithm,
            mode: Mode::Leased,
            fail: FailPolicy::Closed,
            lease: LeaseSettings {
                ttl: Duration::from_secs(2),
                horizon: Duration::from_millis(250),
                max: (algorithm.ceiling() / 10).max(1),
            },
        }
    }
}

/// Daemon-wide lease-cache settings (from `[lease]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSettings {
    /// The most keys with a slot in memory.
    pub max_keys: u64,
    /// The most bytes the slots may hold (their keys included); whichever of
    /// this and `max_keys` binds first evicts.
    pub max_bytes: u64,
    /// A slot unused this long is evicted (its units go back).
    pub idle: Duration,
    /// The longest one store call may take before it counts as unavailable.
    pub store_timeout: Duration,
    /// The circuit breaker in front of the store.
    pub breaker: BreakerSettings,
}

impl Default for CacheSettings {
    fn default() -> Self {
        Self {
            max_keys: 1_000_000,
            max_bytes: 256 << 20,
            idle: Duration::from_secs(60),
            store_timeout: Duration::from_millis(500),
            breaker: BreakerSettings::default(),
        }
    }
}
