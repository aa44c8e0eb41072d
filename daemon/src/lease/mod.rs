//! L1: the lease cache. The [`Limiter`] answers checks from units it leased
//! from the store in batches, and goes to the store only when a key's units
//! run out.
//!
//! ## Paths
//!
//! - **Fast path** (no store call, no lock, no allocation): a key denied until
//!   later is denied locally; otherwise `cost` is taken from the key's leased
//!   units with one atomic operation.
//! - **Slow path** (one in flight per key): unused units of the old lease go
//!   back and a new lease is taken in the same compare-and-set, sized from the
//!   key's recent demand (`rate × horizon`, at least `cost`, at most `max`). A
//!   cold key leases exactly `cost`, so it is exact like direct mode. A grant of
//!   zero sets "denied until" from the algorithm's retry time.
//!
//! ## Bounds
//!
//! Every unit spent locally was first taken from the shared counter, so over
//! any run the admissions of all daemons together never exceed what the
//! counter granted: **no over-issue**, with any number of daemons. Leases end
//! after `ttl`, and for window algorithms at the end of the window they were
//! taken in (a lease never spends a unit in a later window than the one it was
//! counted in). Unused units go back when a lease ends, when its slot is
//! evicted and on shutdown; a crash loses them. Each daemon holds at most
//! `max` unspent units per key, so D daemons **under-issue by at most
//! D × max** units per key at any moment.

use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use leasehold_core::{Algorithm, Decision, RETRY_NEVER};
use thiserror::Error;

use crate::breaker::{Breaker, BreakerConfig, BreakerState};
use crate::limits::{FailPolicy, LimitSettings, Mode};
use crate::store::{Applied, Cas, Op, StoreUnavailable};

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
    /// From leased units or a local "denied until": no store call.
    Local,
    /// After a store call (a new lease, a denial from the store, or direct mode).
    Store,
    /// The store was unavailable and the limit fails open: allowed, degraded.
    Degraded,
    /// The store was unavailable and the limit fails closed: denied.
    Unavailable,
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

/// Daemon-wide lease-cache tuning (`[lease]` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimiterConfig {
    /// The most keys with a slot in memory (moka's `max_capacity`).
    pub max_keys: u64,
    /// A slot unused this long is evicted (its units go back).
    pub idle: Duration,
    /// The longest one store call may take before it counts as unavailable.
    pub store_timeout: Duration,
    /// The circuit breaker in front of the store.
    pub breaker: BreakerConfig,
}

impl Default for LimiterConfig {
    fn default() -> Self {
        Self {
            max_keys: 1_000_000,
            idle: Duration::from_secs(60),
            store_timeout: Duration::from_millis(500),
            breaker: BreakerConfig::default(),
        }
    }
}

/// Counters for the dashboard and `/metrics`.
#[derive(Debug, Default)]
pub struct LimiterStats {
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

/// A snapshot of [`LimiterStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[allow(missing_docs)]
pub struct LimiterCounts {
    pub allowed_local: u64,
    pub allowed_store: u64,
    pub denied_local: u64,
    pub denied_store: u64,
    pub degraded: u64,
    pub unavailable: u64,
    pub leases: u64,
    pub units_leased: u64,
    pub units_refunded: u64,
    pub units_lost: u64,
    /// Units held in leases right now, not yet spent or given back.
    pub units_held: u64,
}

impl LimiterStats {
    /// The counters now.
    pub fn snapshot(&self) -> LimiterCounts {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LimiterCounts {
            allowed_local: r(&self.allowed_local),
            allowed_store: r(&self.allowed_store),
            denied_local: r(&self.denied_local),
            denied_store: r(&self.denied_store),
            degraded: r(&self.degraded),
            unavailable: r(&self.unavailable),
            leases: r(&self.leases),
            units_leased: r(&self.units_leased),
            units_refunded: r(&self.units_refunded),
            units_lost: r(&self.units_lost),
            units_held: r(&self.units_leased)
                .saturating_sub(r(&self.units_spent))
                .saturating_sub(r(&self.units_drained)),
        }
    }
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// An `f64` in an atomic.
#[derive(Debug)]
struct AtomicF64(AtomicU64);

impl AtomicF64 {
    fn new(v: f64) -> Self {
        Self(AtomicU64::new(v.to_bits()))
    }
    fn load(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Acquire))
    }
    fn store(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Release);
    }
}

/// A key's recent demand, for sizing its next lease.
#[derive(Debug, Default)]
struct Demand {
    /// Units per millisecond, an exponentially weighted average over leases.
    rate: f64,
}

/// One `(limit, key)`'s lease.
///
/// # Concurrency
/// `units` is spent by a compare-and-swap on the fast path. A lease is changed
/// (drained, installed) only by the holder of `refill`, inside a seqlock on
/// `generation` (odd while changing): a spender that sees the generation move
/// during its spend drops the units it took rather than risk spending a unit
/// of one lease under another's window. One interleaving escapes the seqlock:
/// the eviction listener drains a slot (without `refill`) while a renewal is
/// installing into it, so both bump the generation at once; a spender caught
/// exactly between can spend a unit of the lease being installed. The
/// renewal then sees `evicted` and drains the rest, so the exposure is the
/// units of one lease on a key that was just evicted as idle.
#[derive(Debug)]
struct Slot {
    limit: Box<str>,
    key: Box<str>,
    units: AtomicU64,
    generation: AtomicU64,
    /// Units may be spent at times in `[lease_from, lease_until)`.
    lease_from: AtomicF64,
    lease_until: AtomicF64,
    /// When the current lease was taken (refunds go back to that instant).
    taken_at: AtomicF64,
    /// Units the current lease granted.
    granted: AtomicU64,
    /// The store's `remaining` when the lease was taken.
    store_remaining: AtomicU64,
    /// When the key is full again by the store's account at the last lease (epoch ms).
    reset_at: AtomicF64,
    /// Requests of at least `denied_cost` are denied until this time.
    denied_until: AtomicF64,
    denied_cost: AtomicU64,
    demand: Mutex<Demand>,
    /// One slow path at a time per key. A tokio mutex: held across the store call.
    refill: tokio::sync::Mutex<()>,
    evicted: AtomicBool,
}

impl Slot {
    fn new(limit: &str, key: &str) -> Self {
        Self {
            limit: limit.into(),
            key: key.into(),
            units: AtomicU64::new(0),
            generation: AtomicU64::new(0),
            lease_from: AtomicF64::new(f64::INFINITY),
            lease_until: AtomicF64::new(f64::NEG_INFINITY),
            taken_at: AtomicF64::new(0.0),
            granted: AtomicU64::new(0),
            store_remaining: AtomicU64::new(0),
            reset_at: AtomicF64::new(0.0),
            denied_until: AtomicF64::new(f64::NEG_INFINITY),
            denied_cost: AtomicU64::new(u64::MAX),
            demand: Mutex::default(),
            refill: tokio::sync::Mutex::new(()),
            evicted: AtomicBool::new(false),
        }
    }

    /// Takes every unspent unit out of the lease: `(units, taken_at)`. Call
    /// with `refill` held (or on an evicted slot, which no one renews).
    fn drain(&self, stats: &LimiterStats) -> (u64, f64) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        let n = self.units.swap(0, Ordering::AcqRel);
        add(&stats.units_drained, n);
        let at = self.taken_at.load();
        self.lease_until.store(f64::NEG_INFINITY);
        self.generation.fetch_add(1, Ordering::AcqRel);
        (n, at)
    }

    /// Installs a new lease of `units` unspent units. Call with `refill` held.
    fn install(&self, units: u64, granted: u64, from: f64, until: f64, taken_at: f64, store_remaining: u64) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.taken_at.store(taken_at);
        self.granted.store(granted, Ordering::Relaxed);
        self.store_remaining.store(store_remaining, Ordering::Relaxed);
        self.lease_from.store(from);
        self.lease_until.store(until);
        self.units.store(units, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// A lease waiting for its end, in the sweeper's heap (earliest first).
struct Pending {
    until: f64,
    slot: Weak<Slot>,
    generation: u64,
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

struct Inner {
    limits: HashMap<String, LimitSettings>,
    cas: Cas,
    slots: moka::sync::Cache<u128, Arc<Slot>>,
    hashers: (RandomState, RandomState),
    breaker: Breaker,
    stats: Arc<LimiterStats>,
    config: LimiterConfig,
    ending: Mutex<BinaryHeap<Pending>>,
}

/// The lease cache: answers [`Check`]s for named limits. Cheap to clone.
#[derive(Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Limiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limiter").field("limits", &self.inner.limits.keys()).finish()
    }
}

fn refund_in_background(cas: &Cas, stats: &Arc<LimiterStats>, alg: Algorithm, slot: &Slot, n: u64, at: f64) {
    if n == 0 {
        return;
    }
    let (cas, stats) = (cas.clone(), stats.clone());
    let (limit, key) = (slot.limit.to_string(), slot.key.to_string());
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            let accepted = match cas.apply(&limit, &key, &alg, Op::Refund { n, taken_at_ms: at }).await {
                Ok(a) => a.returned,
                Err(_) => 0,
            };
            add(&stats.units_refunded, accepted);
            add(&stats.units_lost, n - accepted);
        });
    } else {
        add(&stats.units_lost, n);
    }
}

impl Limiter {
    /// A lease cache for `limits` over `cas`.
    ///
    /// Must be called inside a tokio runtime: evictions refund on it, and a
    /// background task ends leases on time (it stops when the last clone of
    /// the limiter is dropped).
    pub fn new(limits: HashMap<String, LimitSettings>, cas: Cas, config: LimiterConfig) -> Self {
        let stats = Arc::new(LimiterStats::default());
        let algorithms: HashMap<String, Algorithm> = limits.iter().map(|(k, v)| (k.clone(), v.algorithm)).collect();
        let listener = {
            let (cas, stats) = (cas.clone(), stats.clone());
            move |_key: Arc<u128>, slot: Arc<Slot>, _cause: moka::notification::RemovalCause| {
                slot.evicted.store(true, Ordering::Release);
                let (n, at) = slot.drain(&stats);
                if let Some(alg) = algorithms.get(&*slot.limit) {
                    refund_in_background(&cas, &stats, *alg, &slot, n, at);
                }
            }
        };
        let slots = moka::sync::Cache::builder()
            .max_capacity(config.max_keys)
            .time_to_idle(config.idle)
            .eviction_listener(listener)
            .build();
        let inner = Arc::new(Inner {
            limits,
            cas,
            slots,
            hashers: (RandomState::new(), RandomState::new()),
            breaker: Breaker::new(config.breaker),
            stats,
            config,
            ending: Mutex::default(),
        });
        let weak = Arc::downgrade(&inner);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                Limiter { inner }.end_due_leases();
            }
        });
        Self { inner }
    }

    /// The counters.
    pub fn stats(&self) -> &LimiterStats {
        &self.inner.stats
    }

    /// Store traffic counters (reads, writes, conflicts).
    pub fn cas(&self) -> &Cas {
        &self.inner.cas
    }

    /// The circuit breaker's state.
    pub fn breaker_state(&self) -> BreakerState {
        self.inner.breaker.state()
    }

    /// Keys with a slot in memory.
    pub fn keys_cached(&self) -> u64 {
        self.inner.slots.run_pending_tasks();
        self.inner.slots.entry_count()
    }

    /// The configured limits.
    pub fn limits(&self) -> &HashMap<String, LimitSettings> {
        &self.inner.limits
    }

    fn slot_id(&self, limit: &str, key: &str) -> u128 {
        let h = |s: &RandomState| {
            let mut h = s.build_hasher();
            limit.hash(&mut h);
            key.hash(&mut h);
            h.finish()
        };
        (u128::from(h(&self.inner.hashers.0)) << 64) | u128::from(h(&self.inner.hashers.1))
    }

    /// Decides a check.
    ///
    /// # Errors
    /// [`CheckError::UnknownLimit`] when the limit is not configured. A store
    /// outage is not an error: it is answered by the limit's fail policy.
    pub async fn check(&self, check: Check<'_>) -> Result<Verdict, CheckError> {
        let settings =
            self.inner.limits.get(check.limit).ok_or_else(|| CheckError::UnknownLimit(check.limit.into()))?;
        Ok(self.check_with(settings, check).await)
    }

    /// Decides a check against `settings` instead of a configured limit (for
    /// limits defined by the request, like redis-cell's `CL.THROTTLE`).
    /// `check.limit` must name `settings` uniquely: it is part of the storage key.
    pub async fn check_with(&self, settings: &LimitSettings, check: Check<'_>) -> Verdict {
        let alg = settings.algorithm;
        let now = self.inner.cas.clock().now_ms();
        if check.cost > alg.ceiling() {
            add(&self.inner.stats.denied_local, 1);
            let decision = alg.decide(None, now, check.cost).0;
            return Verdict { decision, served: Served::Local, unavailable: None, at_ms: now };
        }
        if check.cost == 0 {
            return self.status_with(settings, check.limit, check.key).await;
        }
        if settings.mode == Mode::Direct {
            return self.direct(settings, check, now).await;
        }
        let id = self.slot_id(check.limit, check.key);
        let slot = self.inner.slots.get_with(id, || Arc::new(Slot::new(check.limit, check.key)));
        if &*slot.limit != check.limit || &*slot.key != check.key {
            // A 128-bit hash collision: serve this key exactly rather than share a lease.
            return self.direct(settings, check, now).await;
        }
        if let Some(v) = self.try_local(&alg, &slot, check.cost, now) {
            return v;
        }
        self.renew(settings, &slot, check).await
    }

    /// The fast path: a local denial, or `cost` from leased units.
    fn try_local(&self, alg: &Algorithm, slot: &Slot, cost: u64, now: f64) -> Option<Verdict> {
        let stats = &self.inner.stats;
        let denied_until = slot.denied_until.load();
        if now < denied_until && cost >= slot.denied_cost.load(Ordering::Relaxed) {
            add(&stats.denied_local, 1);
            let decision = Decision {
                allowed: false,
                limit: alg.ceiling(),
                remaining: 0,
                retry_after_ms: (denied_until - now).ceil() as u64,
                reset_after_ms: 0,
            };
            return Some(Verdict { decision, served: Served::Local, unavailable: None, at_ms: now });
        }
        let g1 = slot.generation.load(Ordering::Acquire);
        if g1 % 2 == 1 || !(slot.lease_from.load() <= now && now < slot.lease_until.load()) {
            return None;
        }
        let before = slot.units.fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| u.checked_sub(cost)).ok()?;
        if slot.generation.load(Ordering::Acquire) != g1 {
            // The lease changed under us: these units may belong to another
            // lease. Drop them (under-issue) and take the slow path.
            add(&stats.units_lost, cost);
            add(&stats.units_drained, cost);
            return None;
        }
        add(&stats.allowed_local, 1);
        add(&stats.units_spent, cost);
        let left = before - cost;
        let decision = Decision {
            allowed: true,
            limit: alg.ceiling(),
            remaining: left + slot.store_remaining.load(Ordering::Relaxed),
            retry_after_ms: 0,
            reset_after_ms: (slot.reset_at.load() - now).max(0.0).ceil() as u64,
        };
        Some(Verdict { decision, served: Served::Local, unavailable: None, at_ms: now })
    }

    /// The slow path: give back what is left, take a new lease, serve from it.
    async fn renew(&self, settings: &LimitSettings, slot: &Arc<Slot>, check: Check<'_>) -> Verdict {
        let alg = settings.algorithm;
        let _one_at_a_time = slot.refill.lock().await;
        let now = self.inner.cas.clock().now_ms();
        if let Some(v) = self.try_local(&alg, slot, check.cost, now) {
            return v;
        }
        let (left, taken_at) = slot.drain(&self.inner.stats);
        let previous = slot.granted.swap(0, Ordering::Relaxed);
        let want = {
            let mut demand = slot.demand.lock().expect("demand lock");
            if previous > 0 {
                let spent = previous.saturating_sub(left) as f64;
                let sample = spent / (now - taken_at).max(1.0);
                demand.rate = 0.5 * demand.rate + 0.5 * sample;
            }
            let provision = (demand.rate * settings.lease.horizon.as_millis() as f64).ceil();
            (provision.min(settings.lease.max as f64) as u64).max(check.cost)
        };
        let give_back = (left > 0).then_some((left, taken_at));
        let op = Op::Take { want, min: check.cost, give_back };
        let stats = &self.inner.stats;
        match self.call(check.limit, check.key, &alg, op).await {
            Ok(applied) => {
                add(&stats.units_refunded, applied.returned);
                add(&stats.units_lost, left - applied.returned);
                self.serve_lease(settings, slot, check, applied)
            }
            Err(e) => {
                // Units sent back in a write whose fate is unknown are never spent again.
                add(&stats.units_lost, left);
                self.fail(settings, check, now, e)
            }
        }
    }

    fn serve_lease(&self, settings: &LimitSettings, slot: &Arc<Slot>, check: Check<'_>, a: Applied) -> Verdict {
        let (alg, stats) = (settings.algorithm, &self.inner.stats);
        if a.granted == 0 {
            add(&stats.denied_store, 1);
            if a.decision.retry_after_ms != RETRY_NEVER {
                slot.denied_cost.store(check.cost, Ordering::Relaxed);
                slot.denied_until.store(a.at_ms + a.decision.retry_after_ms as f64);
            }
            let decision = Decision { allowed: false, ..a.decision };
            return Verdict { decision, served: Served::Store, unavailable: None, at_ms: a.at_ms };
        }
        add(&stats.allowed_store, 1);
        add(&stats.leases, 1);
        add(&stats.units_leased, a.granted);
        add(&stats.units_spent, check.cost);
        slot.denied_until.store(f64::NEG_INFINITY);
        let ttl_end = a.at_ms + settings.lease.ttl.as_millis() as f64;
        let (from, until) = match alg.window_end_ms(a.at_ms) {
            Some(end) => (a.at_ms, end.min(ttl_end)),
            None => (f64::NEG_INFINITY, ttl_end),
        };
        let left = a.granted - check.cost;
        slot.reset_at.store(a.at_ms + a.decision.reset_after_ms as f64);
        slot.install(left, a.granted, from, until, a.at_ms, a.decision.remaining);
        if left > 0 {
            let generation = slot.generation.load(Ordering::Acquire);
            self.inner.ending.lock().expect("ending lock").push(Pending {
                until,
                slot: Arc::downgrade(slot),
                generation,
            });
        }
        if slot.evicted.load(Ordering::Acquire) {
            // Evicted while the lease was being taken: nobody will find these units.
            let (n, at) = slot.drain(stats);
            refund_in_background(&self.inner.cas, stats, alg, slot, n, at);
        }
        let decision = Decision { allowed: true, remaining: a.decision.remaining + left, ..a.decision };
        Verdict { decision, served: Served::Store, unavailable: None, at_ms: a.at_ms }
    }

    /// Direct mode: one compare-and-set per decision.
    async fn direct(&self, settings: &LimitSettings, check: Check<'_>, now: f64) -> Verdict {
        let stats = &self.inner.stats;
        match self.call(check.limit, check.key, &settings.algorithm, Op::Decide { cost: check.cost }).await {
            Ok(a) => {
                add(if a.decision.allowed { &stats.allowed_store } else { &stats.denied_store }, 1);
                Verdict { decision: a.decision, served: Served::Store, unavailable: None, at_ms: a.at_ms }
            }
            Err(e) => self.fail(settings, check, now, e),
        }
    }

    /// The fail policy's answer when the store is unavailable.
    fn fail(&self, settings: &LimitSettings, check: Check<'_>, now: f64, e: StoreUnavailable) -> Verdict {
        tracing::debug!(limit = check.limit, error = %e, "store unavailable");
        let limit = settings.algorithm.ceiling();
        let (allowed, served) = match settings.fail {
            FailPolicy::Closed => (false, Served::Unavailable),
            FailPolicy::Open => (true, Served::Degraded),
        };
        add(if allowed { &self.inner.stats.degraded } else { &self.inner.stats.unavailable }, 1);
        let retry_after_ms = if allowed { 0 } else { 1_000 };
        let decision = Decision { allowed, limit, remaining: 0, retry_after_ms, reset_after_ms: 0 };
        Verdict { decision, served, unavailable: Some(e), at_ms: now }
    }

    /// One store call behind the breaker and the per-call timeout.
    async fn call(&self, limit: &str, key: &str, alg: &Algorithm, op: Op) -> Result<Applied, StoreUnavailable> {
        let inner = &self.inner;
        if !inner.breaker.allow() {
            return Err(StoreUnavailable::CircuitOpen);
        }
        match tokio::time::timeout(inner.config.store_timeout, inner.cas.apply(limit, key, alg, op)).await {
            Ok(Ok(a)) => {
                inner.breaker.success();
                Ok(a)
            }
            Ok(Err(e @ StoreUnavailable::Contention { .. })) => Err(e),
            Ok(Err(e)) => {
                inner.breaker.failure();
                Err(e)
            }
            Err(_) => {
                inner.breaker.failure();
                Err(StoreUnavailable::Timeout(inner.config.store_timeout.as_millis() as u64))
            }
        }
    }

    /// The key's standing without consuming: the store's view plus the units
    /// this daemon holds for it.
    ///
    /// # Errors
    /// [`CheckError::UnknownLimit`].
    pub async fn status(&self, limit: &str, key: &str) -> Result<Verdict, CheckError> {
        let settings = self.inner.limits.get(limit).ok_or_else(|| CheckError::UnknownLimit(limit.into()))?;
        Ok(self.status_with(settings, limit, key).await)
    }

    /// [`Self::status`] against `settings` (see [`Self::check_with`]).
    pub async fn status_with(&self, settings: &LimitSettings, limit: &str, key: &str) -> Verdict {
        let now = self.inner.cas.clock().now_ms();
        let check = Check { limit, key, cost: 0 };
        match self.call(limit, key, &settings.algorithm, Op::Status).await {
            Ok(a) => {
                let held = self
                    .inner
                    .slots
                    .get(&self.slot_id(limit, key))
                    .filter(|s| now < s.lease_until.load())
                    .map_or(0, |s| s.units.load(Ordering::Relaxed));
                let decision = Decision { remaining: a.decision.remaining + held, ..a.decision };
                Verdict { decision, served: Served::Store, unavailable: None, at_ms: a.at_ms }
            }
            Err(e) => self.fail(settings, check, now, e),
        }
    }

    /// Ends the leases whose time is up and gives their unused units back.
    /// A background task calls it every 50 ms; tests driving a manual clock
    /// call it directly.
    pub fn end_due_leases(&self) {
        let now = self.inner.cas.clock().now_ms();
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
            if slot.generation.load(Ordering::Acquire) != p.generation {
                continue;
            }
            let (n, at) = slot.drain(&self.inner.stats);
            if let Some(settings) = self.inner.limits.get(&*slot.limit) {
                refund_in_background(&self.inner.cas, &self.inner.stats, settings.algorithm, &slot, n, at);
            }
        }
    }

    /// Gives every leased unit back to the store and waits for the refunds:
    /// call on graceful shutdown. Returns the units given back.
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
                let cas = self.inner.cas.clone();
                refunds.push(tokio::spawn(async move {
                    let r = cas.apply(&limit, &key, &alg, Op::Refund { n, taken_at_ms: at }).await;
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
        back
    }
}
