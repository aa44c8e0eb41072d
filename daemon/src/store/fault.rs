//! A store wrapper that injects faults: fails after a countdown of calls, fails
//! while switched off, or answers slowly. For tests of outage handling.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{PutOutcome, Record, Store, StoreError};

/// Wraps a store and misbehaves on request. All switches can be flipped while
/// traffic runs.
pub struct FaultStore {
    inner: Arc<dyn Store>,
    /// Calls left before every call fails; negative = no countdown.
    countdown: AtomicI64,
    /// While true every call fails.
    down: AtomicBool,
    /// Added latency per call, in milliseconds.
    delay_ms: AtomicU64,
    /// Calls seen (failed ones included).
    calls: AtomicU64,
    /// Writes left whose reply is lost although they land.
    lost_replies: AtomicU64,
    /// While true every write loses to another writer (a healthy, contended store).
    conflicts: AtomicBool,
    /// Chance (as bits of an `f64`) that a write lands but its reply is lost.
    lost_reply_chance: AtomicU64,
}

impl FaultStore {
    /// A wrapper that, until told otherwise, passes every call through.
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self {
            inner,
            countdown: AtomicI64::new(-1),
            down: AtomicBool::new(false),
            delay_ms: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            lost_replies: AtomicU64::new(0),
            conflicts: AtomicBool::new(false),
            lost_reply_chance: AtomicU64::new(0f64.to_bits()),
        }
    }

    /// Lets `n` more calls through, then fails every call (until [`Self::heal`]).
    pub fn fail_after(&self, n: u32) {
        self.countdown.store(i64::from(n), Ordering::SeqCst);
    }

    /// The next `n` writes land, but their callers get a transient error
    /// instead of the reply (a timeout or reset after the store applied it).
    pub fn lose_replies(&self, n: u64) {
        self.lost_replies.store(n, Ordering::SeqCst);
    }

    /// Each write from now on lands but loses its reply with chance `p`.
    pub fn set_lost_reply_chance(&self, p: f64) {
        self.lost_reply_chance.store(p.to_bits(), Ordering::SeqCst);
    }

    /// While `on`, every write reports a conflict and writes nothing.
    pub fn set_conflicts(&self, on: bool) {
        self.conflicts.store(on, Ordering::SeqCst);
    }

    /// Fails every call while `down` is true.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Delays every call by `delay`.
    pub fn set_delay(&self, delay: Duration) {
        self.delay_ms.store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Clears every fault.
    pub fn heal(&self) {
        self.countdown.store(-1, Ordering::SeqCst);
        self.lost_replies.store(0, Ordering::SeqCst);
        self.set_conflicts(false);
        self.set_lost_reply_chance(0.0);
        self.set_down(false);
        self.set_delay(Duration::ZERO);
    }

    /// Calls seen so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    async fn enter(&self) -> Result<(), StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let delay = self.delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let left = self.countdown.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| (c > 0).then(|| c - 1));
        if self.down.load(Ordering::SeqCst) || left == Ok(0) || left == Err(0) {
            return Err(StoreError::transient("fault", "injected fault: store unreachable"));
        }
        Ok(())
    }
}

#[async_trait]
impl Store for FaultStore {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        self.enter().await?;
        self.inner.get(key).await
    }

    async fn put_if(
        &self,
        key: &str,
        record: &Record,
        expected_version: Option<u64>,
    ) -> Result<PutOutcome, StoreError> {
        self.enter().await?;
        if self.conflicts.load(Ordering::SeqCst) {
            return Ok(PutOutcome::Conflict);
        }
        let outcome = self.inner.put_if(key, record, expected_version).await?;
        let chance = f64::from_bits(self.lost_reply_chance.load(Ordering::SeqCst));
        if self.lost_replies.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
            || (chance > 0.0 && fastrand::f64() < chance)
        {
            return Err(StoreError::transient("fault", "injected fault: the write landed but its reply was lost"));
        }
        Ok(outcome)
    }

    async fn collect_expired(&self, now_ms: f64, scan: usize) -> Result<usize, StoreError> {
        self.enter().await?;
        self.inner.collect_expired(now_ms, scan).await
    }
}
