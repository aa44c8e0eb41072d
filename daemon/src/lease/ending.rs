//! How leases end: on time (a sweeper), on eviction, and on shutdown. Every
//! way gives the unspent units back to the store in the background, on
//! tracked tasks, so shutdown and tests can wait for them.

use std::collections::BinaryHeap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use leasehold_core::LeaseTerm;
use tokio_util::task::TaskTracker;

use super::counter::{Counters, Op};
use super::slot::Slot;
use super::stats::{add, LeaseStats};
use super::LeaseCache;

/// How often the sweeper ends due leases. A lease's units stay held at most
/// this long past its end: held units are under-issue, never over-issue, and
/// a shorter tick only costs wake-ups.
pub(super) const SWEEP_EVERY: Duration = Duration::from_millis(50);

/// The longest a graceful shutdown waits for leases to go back: long enough
/// for a healthy store (a few round trips), short enough that a sick store
/// cannot hold a restart hostage; what is not back by then is under-issue.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(5);

/// A lease waiting for its end, in the sweeper's heap (earliest first).
pub(super) struct Pending {
    pub(super) until: f64,
    pub(super) slot: Weak<Slot>,
    pub(super) which: Which,
}

/// Which of a slot's leases a [`Pending`] end is for.
#[derive(Debug, Clone, Copy)]
pub(super) enum Which {
    /// The current lease, while the slot's generation is this one.
    Current(u64),
    /// The lease staged ahead (ended only if its time is up).
    Ahead,
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
    /// Gives `n` units of `term` back to `slot`'s counter, in the background.
    /// Outside a runtime (a cache dropped late) the units are counted lost.
    pub(super) fn spawn(&self, slot: &Slot, n: u64, term: LeaseTerm) {
        if n == 0 {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            add(&self.stats.units_lost, n);
            return;
        };
        let this = self.clone();
        let (scope, limit, key, alg) = (slot.scope.clone(), slot.limit.clone(), slot.key.clone(), slot.alg);
        rt.spawn(self.tasks.track_future(async move {
            let op = Op::Refund { n, lease: term };
            let accepted = match this.counters.apply_in(scope.as_scope(), &limit, &key, &alg, op).await {
                Ok(a) => a.returned,
                Err(_) => 0,
            };
            add(&this.stats.units_refunded, accepted);
            add(&this.stats.units_lost, n - accepted);
        }));
    }

    /// Gives back the lease staged ahead in `slot`, if any. Call with
    /// `refill` held.
    pub(super) fn end_staged(&self, slot: &Slot) {
        if let Some(staged) = slot.take_staged() {
            add(&self.stats.units_drained, staged.units);
            self.spawn(slot, staged.units, staged.term);
        }
    }

    /// Gives back the units of the lease retired in `slot`, if any.
    pub(super) fn end_retired(&self, slot: &Slot) {
        if let Some((n, term)) = slot.take_retired() {
            self.spawn(slot, n, term);
        }
    }

    /// Takes every lease out of `slot` (current, staged ahead, retired):
    /// their unspent units and identities. Call with `refill` held.
    pub(super) fn take_all(&self, slot: &Slot) -> Vec<(u64, LeaseTerm)> {
        let mut all = vec![slot.drain(&self.stats)];
        if let Some(staged) = slot.take_staged() {
            add(&self.stats.units_drained, staged.units);
            all.push((staged.units, staged.term));
        }
        all.extend(slot.take_retired());
        all
    }

    /// Ends every lease `slot` holds. Call with `refill` held.
    pub(super) fn end_all(&self, slot: &Slot) {
        for (n, term) in self.take_all(slot) {
            self.spawn(slot, n, term);
        }
    }

    /// Ends an evicted slot's leases: drains them under its `refill` lock (on
    /// a task, when a renewal holds the lock) and gives the units back.
    pub(super) fn evicted(&self, slot: Arc<Slot>) {
        slot.evicted.store(true, std::sync::atomic::Ordering::Release);
        if let Ok(_guard) = slot.refill.try_lock() {
            self.end_all(&slot);
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let this = self.clone();
        rt.spawn(self.tasks.track_future(async move {
            let _guard = slot.refill.lock().await;
            this.end_all(&slot);
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
    /// A background task calls it every `SWEEP_EVERY` (50 ms); tests driving a
    /// manual clock call it directly.
    pub fn end_due_leases(&self) {
        let now = self.inner.counters.cas().clock().now_ms();
        let refunder = &self.inner.refunder;
        // Ends whose slot is busy renewing: looked at again next sweep.
        let mut busy = Vec::new();
        loop {
            let due = {
                let mut heap = self.inner.ending.lock().expect("ending lock");
                match heap.peek() {
                    Some(p) if p.until <= now => heap.pop(),
                    _ => None,
                }
            };
            let Some(p) = due else { break };
            let Some(slot) = p.slot.upgrade() else { continue };
            let Ok(_guard) = slot.refill.try_lock() else {
                busy.push(p);
                continue;
            };
            match p.which {
                // Only if that lease is still the slot's.
                Which::Current(generation) => {
                    if slot.generation.load(std::sync::atomic::Ordering::Acquire) == generation {
                        let (n, term) = slot.drain(&self.inner.stats);
                        refunder.spawn(&slot, n, term);
                        refunder.end_retired(&slot);
                    }
                }
                Which::Ahead => {
                    if slot.ahead_due(now) {
                        refunder.end_staged(&slot);
                    }
                }
            }
        }
        self.inner.ending.lock().expect("ending lock").extend(busy);
    }

    /// Waits until every background refund started so far has finished.
    pub async fn refunds_settled(&self) {
        let tasks = &self.inner.refunder.tasks;
        tasks.close();
        tasks.wait().await;
        tasks.reopen();
    }

    /// Gives every leased unit back to the store and waits for the refunds
    /// (and for background refunds already under way), for at most
    /// `SHUTDOWN_DEADLINE` (5 s): call on graceful shutdown. Returns the units
    /// the store took back.
    pub async fn shutdown(&self) -> u64 {
        self.shutdown_within(SHUTDOWN_DEADLINE).await
    }

    /// [`Self::shutdown`] with a deadline of the caller's. Refunds that have
    /// not landed by then are abandoned (their units count as lost:
    /// under-issue until their leases end).
    pub async fn shutdown_within(&self, deadline: Duration) -> u64 {
        let refunded = || self.inner.stats.units_refunded.load(std::sync::atomic::Ordering::Relaxed);
        let before = refunded();
        self.inner.closing.store(true, std::sync::atomic::Ordering::Release);
        let work = async {
            for (_, slot) in self.inner.slots.iter() {
                let _guard = slot.refill.lock().await;
                self.inner.refunder.end_all(&slot);
            }
            self.refunds_settled().await;
            if let Some(local) = &self.inner.local {
                // A last flush, then the flusher stops.
                local.close().await;
            }
        };
        if tokio::time::timeout(deadline, work).await.is_err() {
            tracing::warn!(
                deadline_ms = deadline.as_millis() as u64,
                "shutdown deadline passed; unfinished refunds abandoned"
            );
        }
        refunded() - before
    }
}
