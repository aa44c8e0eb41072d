//! One `(limit, key)`'s lease in the cache: the units not yet spent, the
//! lease's time span, a local "denied until", and the key's recent demand.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use leasehold_core::{Algorithm, LeaseTerm};

use super::counter::{OwnedScope, Scope};
use super::stats::{add, LeaseStats};

/// Weight of the newest sample in a key's demand estimate (an exponentially
/// weighted moving average over leases): a half-life of one lease, so demand
/// follows a key's traffic within a few renewals without chasing one outlier.
pub(super) const DEMAND_EWMA_WEIGHT: f64 = 0.5;

/// Bytes a slot costs beyond its struct and strings: the `Arc`, the cache's
/// entry and its bookkeeping (an estimate, measured as RSS growth per key).
const SLOT_OVERHEAD: usize = 160;

/// An `f64` in an atomic.
#[derive(Debug)]
pub(super) struct AtomicF64(AtomicU64);

impl AtomicF64 {
    pub(super) fn new(v: f64) -> Self {
        Self(AtomicU64::new(v.to_bits()))
    }
    pub(super) fn load(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Acquire))
    }
    pub(super) fn store(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Release);
    }
}

/// A key's recent demand, for sizing its next lease.
#[derive(Debug, Default)]
pub(super) struct Demand {
    /// Units per millisecond, an exponentially weighted average over leases.
    pub(super) rate: f64,
}

impl Demand {
    /// Folds in one lease's use: `spent` units over `elapsed_ms`.
    pub(super) fn sample(&mut self, spent: u64, elapsed_ms: f64) {
        let sample = spent as f64 / elapsed_ms.max(1.0);
        self.rate = (1.0 - DEMAND_EWMA_WEIGHT) * self.rate + DEMAND_EWMA_WEIGHT * sample;
    }
}

/// One `(limit, key)`'s lease.
///
/// # Concurrency
/// `units` is spent by a compare-and-swap on the fast path. A lease is changed
/// (drained, installed) only by the holder of `refill`, inside a seqlock on
/// `generation` (odd while changing): a spender that sees the generation move
/// during its spend drops the units it took rather than risk spending a unit
/// of one lease under another's window. A slot evicted during a renewal is
/// drained by the renewal once it sees `evicted`. The eviction listener
/// drains under `refill` too (waiting for it on a task when a renewal holds
/// it), so a lease is never drained while another is being installed.
#[derive(Debug)]
pub(super) struct Slot {
    pub(super) scope: OwnedScope,
    pub(super) limit: Box<str>,
    pub(super) key: Box<str>,
    /// The limit's algorithm: leases end and go back under it, whether the
    /// limit is configured or defined by the request.
    pub(super) alg: Algorithm,
    pub(super) units: AtomicU64,
    pub(super) generation: AtomicU64,
    /// Units may be spent at times in `[lease_from, lease_until)`.
    pub(super) lease_from: AtomicF64,
    pub(super) lease_until: AtomicF64,
    /// The current lease's identity in the store: when it was taken (refunds
    /// of window algorithms go back to that instant) and when the store ends it.
    pub(super) taken_at: AtomicF64,
    pub(super) store_until: AtomicF64,
    /// Units the current lease granted.
    pub(super) granted: AtomicU64,
    /// The store's `remaining` when the lease was taken.
    pub(super) store_remaining: AtomicU64,
    /// When the key is full again by the store's account at the last lease (epoch ms).
    pub(super) reset_at: AtomicF64,
    /// Requests of at least `denied_cost` are denied until this time.
    pub(super) denied_until: AtomicF64,
    pub(super) denied_cost: AtomicU64,
    pub(super) demand: Mutex<Demand>,
    /// When a caller first found the current lease unable to serve it (epoch
    /// ms; +∞ if none has): where the lease's demand sample ends, rather
    /// than when a renewal gets to run.
    pub(super) missed_at: AtomicF64,
    /// When the current lease was installed (epoch ms): its demand sample
    /// runs from here, not from when the store granted it.
    pub(super) since: AtomicF64,
    /// A lease taken ahead of need and the one it will retire (see
    /// [`Ahead`]); boxed, so a key that never renews ahead pays one pointer.
    pub(super) ahead: Mutex<Option<Box<Ahead>>>,
    /// The current lease's low-water mark, plus one: a spend that leaves
    /// fewer units than this starts taking the next lease ahead (0: off, or
    /// already started).
    pub(super) ahead_below: AtomicU64,
    /// One slow path at a time per key. A tokio mutex: held across the store call.
    pub(super) refill: tokio::sync::Mutex<()>,
    pub(super) evicted: AtomicBool,
}

impl Slot {
    pub(super) fn new(scope: Scope<'_>, limit: &str, key: &str, alg: Algorithm) -> Self {
        Self {
            scope: scope.to_owned_scope(),
            limit: limit.into(),
            key: key.into(),
            alg,
            units: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            lease_from: AtomicF64::new(f64::INFINITY),
            lease_until: AtomicF64::new(f64::NEG_INFINITY),
            taken_at: AtomicF64::new(0.0),
            store_until: AtomicF64::new(0.0),
            granted: AtomicU64::new(0),
            store_remaining: AtomicU64::new(0),
            reset_at: AtomicF64::new(0.0),
            denied_until: AtomicF64::new(f64::NEG_INFINITY),
            denied_cost: AtomicU64::new(u64::MAX),
            demand: Mutex::default(),
            missed_at: AtomicF64::new(f64::INFINITY),
            since: AtomicF64::new(0.0),
            ahead: Mutex::new(None),
            ahead_below: AtomicU64::new(0),
            refill: tokio::sync::Mutex::new(()),
            evicted: AtomicBool::new(false),
        }
    }

    /// Memory the slot holds: the struct, its strings, the cache's entry.
    pub(super) fn bytes(&self) -> u64 {
        let scope = match &self.scope {
            OwnedScope::Tenant(t) => t.len(),
            _ => 0,
        };
        (std::mem::size_of::<Self>() + SLOT_OVERHEAD + self.limit.len() + self.key.len() + scope) as u64
    }

    /// Whether this slot is the one for `(scope, limit, key)` (not a hash collision).
    pub(super) fn is_for(&self, scope: Scope<'_>, limit: &str, key: &str) -> bool {
        self.scope.as_scope() == scope && &*self.limit == limit && &*self.key == key
    }

    /// Takes every unspent unit out of the lease: the units and the lease
    /// they belong to. Call with `refill` held: no lease is installed meanwhile.
    pub(super) fn drain(&self, stats: &LeaseStats) -> (u64, LeaseTerm) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        let n = self.units.swap(0, Ordering::AcqRel);
        add(&stats.units_drained, n);
        let term = LeaseTerm { taken_at_ms: self.taken_at.load(), until_ms: self.store_until.load() };
        self.lease_until.store(f64::NEG_INFINITY);
        self.generation.fetch_add(1, Ordering::AcqRel);
        (n, term)
    }

    /// Installs a new lease. Call with `refill` held.
    pub(super) fn install(&self, lease: Installed) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.taken_at.store(lease.term.taken_at_ms);
        self.store_until.store(lease.term.until_ms);
        self.granted.store(lease.granted, Ordering::Relaxed);
        self.store_remaining.store(lease.store_remaining, Ordering::Relaxed);
        self.reset_at.store(lease.reset_at);
        self.missed_at.store(f64::INFINITY);
        self.lease_from.store(lease.from);
        self.lease_until.store(lease.until);
        self.units.store(lease.units, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Notes that a caller found the lease unable to serve it at `now`.
    pub(super) fn note_miss(&self, now: f64) {
        if now < self.missed_at.load() {
            self.missed_at.store(now);
        }
    }

    /// Units this slot holds for spending at `now`: the current lease's and
    /// the one taken ahead.
    pub(super) fn held_at(&self, now: f64) -> u64 {
        let current = if now < self.lease_until.load() { self.units.load(Ordering::Relaxed) } else { 0 };
        let ahead = self.ahead.lock().expect("ahead lock");
        let staged = ahead.as_ref().and_then(|a| a.staged.as_ref()).filter(|s| s.usable_at(now)).map_or(0, |s| s.units);
        current + staged
    }

    /// Takes the lease staged ahead out of the slot. Call with `refill` held.
    pub(super) fn take_staged(&self) -> Option<Installed> {
        self.ahead.lock().expect("ahead lock").as_mut().and_then(|a| a.staged.take())
    }

    /// Whether the lease staged ahead can no longer be spent at `now`.
    pub(super) fn ahead_due(&self, now: f64) -> bool {
        let ahead = self.ahead.lock().expect("ahead lock");
        ahead.as_ref().and_then(|a| a.staged.as_ref()).is_some_and(|s| now >= s.until)
    }

    /// Whether a lease is staged ahead.
    pub(super) fn has_staged(&self) -> bool {
        self.ahead.lock().expect("ahead lock").as_ref().is_some_and(|a| a.staged.is_some())
    }

    /// Stages `lease` to be installed when the current one runs out. Call
    /// with `refill` held.
    pub(super) fn stage(&self, lease: Installed) {
        self.ahead.lock().expect("ahead lock").get_or_insert_with(Box::default).staged = Some(lease);
    }

    /// Takes the retired lease whose end rides on the key's next write.
    pub(super) fn take_retired(&self) -> Option<(u64, LeaseTerm)> {
        self.ahead.lock().expect("ahead lock").as_mut().and_then(|a| a.retired.take())
    }

    /// Remembers a lease replaced without a store write, to end it in the
    /// key's next write; returns the one it displaces (if any), whose end the
    /// caller must send on its own.
    pub(super) fn retire(&self, left: u64, term: LeaseTerm) -> Option<(u64, LeaseTerm)> {
        self.ahead.lock().expect("ahead lock").get_or_insert_with(Box::default).retired.replace((left, term))
    }
}

/// A slot's lease taken ahead of need, and the lease it replaced without a
/// store write.
///
/// A key with steady demand takes its next lease while the current one still
/// has units (at a low-water mark), so its callers do not wait for the store
/// when the current one runs out: the staged lease is installed in its place
/// with no store call. The replaced lease is *retired*: its end (and any unit
/// it has left) is sent with the key's next write, the next lease taken ahead.
/// A staged lease is out in the store from when it was granted, so it counts
/// against the limit like any lease; it is never spent before it is
/// installed, nor outside its span.
#[derive(Debug, Default)]
pub(super) struct Ahead {
    pub(super) staged: Option<Installed>,
    pub(super) retired: Option<(u64, LeaseTerm)>,
}

/// A new lease for [`Slot::install`].
#[derive(Debug)]
pub(super) struct Installed {
    /// Unspent units.
    pub(super) units: u64,
    /// Units the store granted.
    pub(super) granted: u64,
    /// Units may be spent at times in `[from, until)`.
    pub(super) from: f64,
    pub(super) until: f64,
    /// The lease's identity in the store.
    pub(super) term: LeaseTerm,
    /// The store's `remaining` after the grant.
    pub(super) store_remaining: u64,
    /// When the key is full again by the store's account (epoch ms).
    pub(super) reset_at: f64,
}

impl Installed {
    /// Whether its units may be spent at `now`.
    pub(super) fn usable_at(&self, now: f64) -> bool {
        self.from <= now && now < self.until
    }
}
