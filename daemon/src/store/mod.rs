//! The store layer: the records that hold authoritative state, the backends
//! that keep them, and the machinery every caller of a backend shares.
//!
//! - [`Store`]: what a backend implements — a strongly consistent `get` and a
//!   conditional `put_if`. Backends: [`dynamodb`], [`embedded`] (redb, the
//!   default), [`memory`], and [`fault`] (a wrapper that injects failures).
//! - [`cas`]: the one compare-and-set loop above every backend. It updates a
//!   key's record with any [`cas::Update`] — read, apply, conditional write,
//!   retry on conflict — and combines concurrent updates of one key into one
//!   round. Rate-limit counters are one client of it; reservations,
//!   idempotency records and customers will be others.
//! - [`guard`]: the circuit breaker and the per-call timeout, for any caller.
//! - [`config`]: `[store]` and opening a backend.
//!
//! This layer knows records, not rate limits: it may use `leasehold-core`'s
//! `Clock` and nothing above it.

pub mod cas;
pub mod config;
pub mod dynamodb;
pub mod embedded;
mod error;
pub mod fault;
pub mod guard;
pub mod memory;
pub mod update;

/// How often expired records are collected in stores without a native TTL.
pub const COLLECT_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// Records looked at per collection pass: a few milliseconds of work, so a
/// pass never holds the writer for long; a large file is covered over passes.
pub const COLLECT_SCAN: usize = 10_000;

/// Collects expired records every [`COLLECT_EVERY`] until the store is dropped.
pub fn spawn_collector(store: &std::sync::Arc<dyn Store>, clock: std::sync::Arc<dyn leasehold_core::Clock>) {
    let weak = std::sync::Arc::downgrade(store);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(COLLECT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(store) = weak.upgrade() else { return };
            match store.collect_expired(clock.now_ms(), COLLECT_SCAN).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(deleted = n, "expired records collected"),
                Err(e) => tracing::warn!(error = %e, "collecting expired records failed"),
            }
        }
    });
}

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use cas::{Cas, CasSettings, CasStats};
pub use config::{StoreConfig, StoreKind};
pub use error::{StoreError, StoreUnavailable};
pub use guard::Guard;

/// One counter as stored: the same attributes as ThrottleKit's DynamoStore,
/// so a table can be shared with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The algorithm's state as compact JSON.
    pub state: String,
    /// Compare-and-set token: +1 on every write. A new record starts at the
    /// writer's clock in microseconds, so a record deleted by a TTL and
    /// created again never repeats a version an old writer may still expect.
    pub version: u64,
    /// Epoch milliseconds after which the record reads as absent
    /// (authoritative; `expires_at`, in seconds, is derived for native TTLs).
    pub expires_at_ms: u64,
    /// A random id of the write that produced this record: after a write
    /// whose reply was lost, finding it tells the writer its write landed.
    /// 0 for records written before write ids existed.
    #[serde(default)]
    pub write_id: u64,
}

impl Record {
    /// `expires_at` in epoch seconds, rounded up: DynamoDB's TTL attribute.
    pub fn expires_at_secs(&self) -> u64 {
        self.expires_at_ms.div_ceil(1000)
    }

    /// Whether the record reads as absent at `now_ms` (lazy expiry).
    pub fn is_expired(&self, now_ms: f64) -> bool {
        (self.expires_at_ms as f64) <= now_ms
    }
}

/// What a conditional write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The record was written.
    Written,
    /// The condition failed: the record changed (or appeared, or vanished)
    /// since it was read. Nothing was written.
    Conflict,
}

/// A record store with a conditional write: the only thing a backend implements.
///
/// # Concurrency
/// `put_if` must be atomic with respect to every other writer of the same key,
/// in this process and in any other: it writes only if the stored version is
/// still `expected_version` (or, for `None`, if no record exists at all).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The backend's name, for errors and metrics.
    fn name(&self) -> &'static str;

    /// Reads a record, strongly consistent with every completed `put_if`.
    /// Expired records are returned as they are; the caller applies lazy expiry.
    async fn get(&self, key: &str) -> Result<Option<Record>, StoreError>;

    /// Writes `record` if the stored version equals `expected_version`
    /// (`None`: only if no record exists).
    async fn put_if(&self, key: &str, record: &Record, expected_version: Option<u64>)
        -> Result<PutOutcome, StoreError>;

    /// As [`Self::put_if`], and on a conflict the record as the failed write
    /// found it (`Some(None)`: absent), when the backend can return it with
    /// the failed write in the same round trip (DynamoDB's
    /// `ReturnValuesOnConditionCheckFailure`). `None` on a conflict means
    /// "not known": the caller reads. The default never knows.
    async fn put_if_or_current(
        &self,
        key: &str,
        record: &Record,
        expected_version: Option<u64>,
    ) -> Result<(PutOutcome, Option<Option<Record>>), StoreError> {
        Ok((self.put_if(key, record, expected_version).await?, None))
    }

    /// Deletes expired records (at most about `scan` looked at per call, so
    /// one pass stays short); returns how many were deleted. Stores with a
    /// native TTL (DynamoDB) need nothing here. Deleting only expired
    /// records is safe: they read as absent already.
    async fn collect_expired(&self, now_ms: f64, scan: usize) -> Result<usize, StoreError> {
        let _ = (now_ms, scan);
        Ok(0)
    }

    /// Whether the store can be reached now (for readiness checks).
    async fn ping(&self) -> Result<(), StoreError> {
        self.get("leasehold:ping").await.map(|_| ())
    }
}
