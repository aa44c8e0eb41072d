//! How leases end: on time (a sweeper), on eviction, and on shutdown. Every
//! way gives the unspent units back to the store in the background, on
//! tracked tasks, so shutdown and tests can wait for them.

use std::collections::BinaryHeap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use leasehold_core::Algorithm;
use tokio_util::task::TaskTracker;

use super::counter::{Counters, Op};
use super::slot::Slot;
use super::stats::{add, LeaseStats};
use super::LeaseCache;

/// How often the sweeper ends due leases. A lease's units stay held at most
/// this long past its end: held units are under-issue, never over-issue, and
/// a shorter tick only costs wake-ups.
pub(super) const SWEEP_EVERY: Duration = Duration::from_millis(50);

/// A lease waiting for its end, in the sweeper's heap (earliest first).
pub(super) struct Pending {
    pub(super) until: f64,
    pub(super) slot: Weak<Slot>,
    pub(super) generation: u64,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.until == o.until
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.until.total_cmp(&self.until)
    }
}

/// The leases waiting for their end.
pub(super) type Ending = std::sync::Mutex<BinaryHeap<Pending>>;

/// Gives unspent units back to the store on tracked background tasks.
#[derive(Clone)]
pub(super) struct Refunder {
    pub(super) counters: Counters,
    pub(super) stats: Arc<LeaseStats>,
    pub(super) tasks: TaskTracker,
}

impl Refunder {
    /// Gives `n` units taken at `at` back to `slot`'s counter, in the background.
    /// Outside a runtime (a cache dropped late) the units are counted lost.
    pub(super) fn spawn(&self, alg: Algorithm, slot: &Slot, n: u64, at: f64) {
        if n == 0 {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            add(&self.stats.units_lost, n);
            return;
        };
        let (counters, stats) = (self.counters.clone(), self.stats.clone());
        let (limit, key) = (slot.limit.to_string(), slot.key.to_string());
        rt.spawn(self.tasks.track_future(async move {
            let accepted = match counters.apply(&limit, &key, &alg, Op::Refund { n, taken_at_ms: at }).await {
                Ok(a) => a.returned,
                Err(_) => 0,
            };
            add(&stats.units_refunded, accepted);
            add(&stats.units_lost, n - accepted);
            accepted
        }));
    }
}

/// Runs the sweeper until the cache is dropped.
pub(super) fn spawn_sweeper(cache: Weak<super::Inner>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(inner) = cache.upgrade() else { return };
            LeaseCache { inner }.end_due_leases();
        }
    });
}

impl LeaseCache {
    /// Ends the leases whose time is up and gives their unused units back.
    /// A background task calls it every [`SWEEP_EVERY`]; tests driving a
    /// manual clock call it directly.
    pub fn end_due_leases(&self) {
        let now = self.inner.counters.cas().clock().now_ms();
        loop {
            let due = {
                let mut heap = self.inner.ending.lock().expect("ending lock");
                match heap.peek() {
                    Some(p) if p.until <= now => heap.pop(),
                    _ => None,
                }
            };
            let Some(p) = due else { return };
            let Some(slot) = p.slot.upgrade() else { continue };
            // Only if that lease is still the slot's, and nobody is renewing it.
            let Ok(_guard) = slot.refill.try_lock() else { continue };
            if slot.generation.load(std::sync::atomic::Ordering::Acquire) != p.generation {
                continue;
            }
            let (n, at) = slot.drain(&self.inner.stats);
            if let Some(settings) = self.inner.limits.get(&*slot.limit) {
                self.inner.refunder.spawn(settings.algorithm, &slot, n, at);
            }
        }
    }

    /// Waits until every background refund started so far has finished.
    pub async fn refunds_settled(&self) {
        let tasks = &self.inner.refunder.tasks;
        tasks.close();
        tasks.wait().await;
        tasks.reopen();
    }

    /// Gives every leased unit back to the store and waits for the refunds
    /// (and for background refunds already under way): call on graceful
    /// shutdown. Returns the units the store took back.
    pub async fn shutdown(&self) -> u64 {
        let mut refunds = Vec::new();
        for (_, slot) in self.inner.slots.iter() {
            let _guard = slot.refill.lock().await;
            let (n, at) = slot.drain(&self.inner.stats);
            if n == 0 {
                continue;
            }
            if let Some(settings) = self.inner.limits.get(&*slot.limit) {
                let (limit, key, alg) = (slot.limit.to_string(), slot.key.to_string(), settings.algorithm);
                let counters = self.inner.counters.clone();
                refunds.push(tokio::spawn(async move {
                    let r = counters.apply(&limit, &key, &alg, Op::Refund { n, taken_at_ms: at }).await;
                    (n, r.map_or(0, |a| a.returned))
                }));
            }
        }
        let mut back = 0;
        for r in refunds {
            if let Ok((n, accepted)) = r.await {
                add(&self.inner.stats.units_refunded, accepted);
                add(&self.inner.stats.units_lost, n - accepted);
                back += accepted;
            }
        }
        self.refunds_settled().await;
        back
    }
}
