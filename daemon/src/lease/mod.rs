//! L1: the lease cache. The [`LeaseCache`] answers checks from units it
//! leased from the store in batches, and goes to the store only when a key's
//! units run out.
//!
//! May use: [`crate::store`] (through [`counter::Counters`] and the
//! [`crate::store::Guard`]) and `leasehold-core`. Nothing here knows about
//! surfaces, config files or observability.
//!
//! - [`verdict`]: what is asked ([`Check`]) and answered ([`Verdict`]).
//! - [`settings`]: per-limit and cache-wide settings.
//! - [`counter`]: the rate-limit ops, as a client of the store's CAS loop.
//! - `slot`: one key's lease (the seqlock'd units and their time span).
//! - `ending`: leases ending on time, on eviction and on shutdown.
//! - `store_path`: direct mode, status, and every store call (guarded, with
//!   the fail policy's answer when the store cannot back a decision).
//! - [`stats`]: the counters.
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
//! - **Ahead** (background, one store call): a lease sized by demand that
//!   falls to its low-water mark takes the key's next lease while callers
//!   keep spending the current one; the slow path then switches to it with
//!   no store call (see `slot::Ahead`).
//!
//! ## Bounds
//!
//! Every unit spent locally was first taken from the shared counter, so over
//! any run the admissions of all daemons together never exceed what the
//! counter granted: **no over-issue**, with any number of daemons. Leases end
//! after `ttl`, and for window algorithms at the end of the window they were
//! taken in (a lease never spends a unit in a later window than the one it was
//! counted in). Unused units go back when a lease ends, when its slot is
//! evicted and on shutdown; a crash loses them. Each daemon holds at most two
//! leases of at most `max` unspent units per key (current and ahead), so D
//! daemons **under-issue by at most 2 × D × max** units per key at any moment.

pub mod counter;
mod ending;
pub mod local;
pub mod settings;
mod slot;
pub mod stats;
mod store_path;
pub mod verdict;

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use leasehold_core::{Decision, LeaseTerm, RETRY_NEVER};
use tokio_util::task::TaskTracker;

use crate::store::guard::BreakerState;
use crate::store::{Cas, Guard};
use counter::{Applied, Counters, Op, Scope};
use ending::{Ending, Pending, Refunder, Which};
use settings::{CacheSettings, LimitSettings, Mode};
use slot::{Installed, Slot};
use stats::{add, LeaseStats};
pub use verdict::{Check, CheckError, Served, Verdict};

/// How long a caller denied because the store is unavailable (fail closed)
/// is told to wait: about one breaker probe's worth, long enough not to
/// hammer a sick store, short enough to notice its recovery.
pub const UNAVAILABLE_RETRY_MS: u64 = 1_000;

struct Inner {
    limits: HashMap<String, LimitSettings>,
    counters: Counters,
    guard: Guard,
    /// Slots by a 128-bit hash of `(limit, key)`: a map key of fixed size,
    /// with a collision chance (~2⁻⁶⁴ per pair under two independent seeds)
    /// far below any hardware fault; a collision is still detected and served
    /// exactly, never by sharing a lease.
    slots: moka::sync::Cache<u128, Arc<Slot>>,
    hashers: (RandomState, RandomState),
    stats: Arc<LeaseStats>,
    ending: Ending,
    refunder: Refunder,
    /// How much longer than the local lease the store keeps its units out:
    /// time for the sweeper to notice the end and for the refund to land
    /// before the store counts the units as consumed.
    grace_ms: f64,
    /// Set by shutdown: no more leases are taken ahead, and one that lands
    /// after it goes straight back.
    closing: std::sync::atomic::AtomicBool,
    /// How long store calls take lately (ms, an exponentially weighted
    /// average of successful calls): leases renewed ahead cover at least
    /// this much demand, so they land before the lease they replace runs out.
    latency_ms: slot::AtomicF64,
    /// The single-host table, when this process is its store's only writer.
    local: Option<local::LocalCounters>,
}

/// How many store latencies of demand a lease renewed ahead covers (and how
/// early it is taken): margin for a call slower than the recent average.
const AHEAD_LATENCIES: f64 = 2.0;

/// Weight of the newest store call in [`Inner::latency_ms`].
const LATENCY_EWMA_WEIGHT: f64 = 0.2;

/// The lease cache: answers [`Check`]s for named limits. Cheap to clone.
#[derive(Clone)]
pub struct LeaseCache {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LeaseCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseCache").field("limits", &self.inner.limits.keys()).finish()
    }
}

impl LeaseCache {
    /// A lease cache for `limits` over `cas`.
    ///
    /// Must be called inside a tokio runtime: evictions refund on it, and a
    /// background task ends leases on time (it stops when the last clone of
    /// the cache is dropped).
    pub fn new(limits: HashMap<String, LimitSettings>, cas: Cas, settings: CacheSettings) -> Self {
        Self::build(limits, cas, settings, None)
    }

    /// A cache whose decisions are made against `local` (the single-host
    /// table: exact, no leases) when given; else as [`Self::new`]. `cas`
    /// still serves readiness checks.
    pub fn build(
        limits: HashMap<String, LimitSettings>,
        cas: Cas,
        settings: CacheSettings,
        local: Option<local::LocalCounters>,
    ) -> Self {
        let stats = Arc::new(LeaseStats::default());
        let guard = Guard::new(settings.breaker, settings.store_timeout, cas.clock().clone());
        let counters = Counters::new(cas);
        let refunder = Refunder { counters: counters.clone(), stats: stats.clone(), tasks: TaskTracker::new() };
        let listener = {
            let refunder = refunder.clone();
            move |_key: Arc<u128>, slot: Arc<Slot>, _cause: moka::notification::RemovalCause| refunder.evicted(slot)
        };
        // Each slot weighs its bytes, but at least `max_bytes / max_keys`, so
        // both bounds hold with one capacity.
        let floor = settings.max_bytes.div_ceil(settings.max_keys.max(1)).max(1);
        let slots = moka::sync::Cache::builder()
            .max_capacity(settings.max_bytes)
            .weigher(move |_id: &u128, slot: &Arc<Slot>| -> u32 {
                u32::try_from(slot.bytes().max(floor)).unwrap_or(u32::MAX)
            })
            .time_to_idle(settings.idle)
            .eviction_listener(listener)
            .build();
        let inner = Arc::new(Inner {
            limits,
            counters,
            guard,
            slots,
            hashers: (RandomState::new(), RandomState::new()),
            stats,
            ending: Ending::default(),
            refunder,
            grace_ms: (settings.store_timeout + 2 * ending::SWEEP_EVERY).as_millis() as f64,
            closing: std::sync::atomic::AtomicBool::new(false),
            latency_ms: slot::AtomicF64::new(0.0),
            local,
        });
        if let Some(local) = &inner.local {
            local::spawn_collector(local);
        }
        ending::spawn_sweeper(Arc::downgrade(&inner));
        Self { inner }
    }

    /// The counters.
    pub fn stats(&self) -> &LeaseStats {
        &self.inner.stats
    }

    /// The counters in the store (and through them the CAS loop's store,
    /// clock and traffic counters).
    pub fn counters(&self) -> &Counters {
        &self.inner.counters
    }

    /// The circuit breaker's state.
    pub fn breaker_state(&self) -> BreakerState {
        self.inner.guard.breaker_state()
    }

    /// The store guard (breaker and timeout) this cache calls through.
    pub fn guard(&self) -> &Guard {
        &self.inner.guard
    }

    /// Keys with a slot in memory (moka's estimate: evictions it has not
    /// processed yet may still be counted; see [`Self::run_pending_tasks`]).
    pub fn keys_cached(&self) -> u64 {
        if let Some(local) = &self.inner.local {
            return local.len() as u64;
        }
        self.inner.slots.entry_count()
    }

    /// Lets the cache process pending evictions now (they otherwise run
    /// during later calls), so [`Self::keys_cached`] is exact.
    pub fn run_pending_tasks(&self) {
        self.inner.slots.run_pending_tasks();
    }

    /// The configured limits.
    pub fn limits(&self) -> &HashMap<String, LimitSettings> {
        &self.inner.limits
    }

    fn slot_id(&self, scope: Scope<'_>, limit: &str, key: &str) -> u128 {
        let h = |s: &RandomState| {
            let mut h = s.build_hasher();
            scope.hash(&mut h);
            limit.hash(&mut h);
            key.hash(&mut h);
            h.finish()
        };
        (u128::from(h(&self.inner.hashers.0)) << 64) | u128::from(h(&self.inner.hashers.1))
    }

    fn now(&self) -> f64 {
        self.inner.counters.cas().clock().now_ms()
    }

    /// Decides a check asked without a tenant ([`Scope::Host`]).
    ///
    /// # Errors
    /// [`CheckError::UnknownLimit`] when the limit is not configured. A store
    /// outage is not an error: it is answered by the limit's fail policy.
    pub async fn check(&self, check: Check<'_>) -> Result<Verdict, CheckError> {
        self.check_in(Scope::Host, check).await
    }

    /// Decides a check in `scope` (a tenant's keys never share a counter with
    /// another's, nor with the socket's).
    ///
    /// # Errors
    /// As [`Self::check`].
    pub async fn check_in(&self, scope: Scope<'_>, check: Check<'_>) -> Result<Verdict, CheckError> {
        let settings =
            self.inner.limits.get(check.limit).ok_or_else(|| CheckError::UnknownLimit(check.limit.into()))?;
        Ok(self.decide(scope, settings, check).await)
    }

    async fn decide(&self, scope: Scope<'_>, settings: &LimitSettings, check: Check<'_>) -> Verdict {
        let alg = settings.algorithm;
        if check.cost > alg.ceiling() {
            let now = self.now();
            add(&self.inner.stats.denied_local, 1);
            let decision = alg.decide(None, now, check.cost).0;
            return Verdict { decision, served: Served::Local, unavailable: None, at_ms: now };
        }
        if check.cost == 0 {
            return self.standing(scope, settings, check.limit, check.key).await;
        }
        if let Some(local) = &self.inner.local {
            return self.local(local, scope, settings, check, Op::Decide { cost: check.cost }).await;
        }
        let now = self.now();
        if settings.mode == Mode::Direct {
            return self.direct(scope, settings, check, now).await;
        }
        let id = self.slot_id(scope, check.limit, check.key);
        let slot = self.inner.slots.get_with(id, || Arc::new(Slot::new(scope, check.limit, check.key, alg)));
        if !slot.is_for(scope, check.limit, check.key) || slot.alg != alg {
            // A 128-bit hash collision: serve this key exactly rather than share a lease.
            return self.direct(scope, settings, check, now).await;
        }
        if let Some(v) = self.try_local(settings, &slot, check.cost, now) {
            return v;
        }
        self.renew(scope, settings, &slot, check).await
    }

    /// A decision (or status) against the single-host table.
    async fn local(
        &self,
        local: &local::LocalCounters,
        scope: Scope<'_>,
        settings: &LimitSettings,
        check: Check<'_>,
        op: Op,
    ) -> Verdict {
        match local.apply(scope, check.limit, check.key, &settings.algorithm, op).await {
            Ok(a) => {
                if check.cost > 0 {
                    let stats = &self.inner.stats;
                    add(if a.decision.allowed { &stats.allowed_local } else { &stats.denied_local }, 1);
                }
                // No store call: the table is the counter.
                Verdict { decision: a.decision, served: Served::Local, unavailable: None, at_ms: a.at_ms }
            }
            Err(e) => self.fail(settings, check, self.now(), e),
        }
    }

    /// Applies a caller's own `change` to a counter, always directly (never
    /// from a lease): against the single-host table, or through the store's
    /// compare-and-set behind the guard. For commands whose answer is exact
    /// arithmetic of their own on an algorithm's state (`CL.THROTTLE`).
    ///
    /// # Errors
    /// [`StoreUnavailable`](crate::store::StoreUnavailable) when the store cannot back it.
    pub async fn change<F: counter::StateChange>(
        &self,
        scope: Scope<'_>,
        limit: &str,
        key: &str,
        alg: &leasehold_core::Algorithm,
        change: F,
    ) -> Result<F::Out, crate::store::StoreUnavailable> {
        if let Some(local) = &self.inner.local {
            return local.change(scope, limit, key, alg, change).await;
        }
        self.inner.guard.call(self.inner.counters.change_in(scope, limit, key, alg, change)).await
    }

    /// The single-host table, when decisions are made against it.
    pub fn local_counters(&self) -> Option<&local::LocalCounters> {
        self.inner.local.as_ref()
    }

    /// The fast path: a local denial, or `cost` from leased units. A spend
    /// that takes the lease below its low-water mark starts taking the next
    /// lease ahead, in the background.
    fn try_local(&self, settings: &LimitSettings, slot: &Arc<Slot>, cost: u64, now: f64) -> Option<Verdict> {
        let (stats, ceiling) = (&self.inner.stats, settings.algorithm.ceiling());
        let denied_until = slot.denied_until.load();
        if now < denied_until && cost >= slot.denied_cost.load(Ordering::Relaxed) {
            add(&stats.denied_local, 1);
            let decision = Decision {
                allowed: false,
                limit: ceiling,
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
        if left < slot.ahead_below.load(Ordering::Relaxed) && slot.ahead_below.swap(0, Ordering::AcqRel) != 0 {
            self.spawn_lease_ahead(settings, slot);
        }
        let decision = Decision {
            allowed: true,
            limit: ceiling,
            remaining: left + slot.store_remaining.load(Ordering::Relaxed),
            retry_after_ms: 0,
            reset_after_ms: (slot.reset_at.load() - now).max(0.0).ceil() as u64,
        };
        Some(Verdict { decision, served: Served::Local, unavailable: None, at_ms: now })
    }

    /// The slow path: switch to the lease taken ahead if there is one;
    /// otherwise give back what is left and take a new lease in one write,
    /// and serve from it.
    async fn renew(&self, scope: Scope<'_>, settings: &LimitSettings, slot: &Arc<Slot>, check: Check<'_>) -> Verdict {
        slot.note_miss(self.now());
        let _one_at_a_time = slot.refill.lock().await;
        let now = self.now();
        if let Some(v) = self.try_local(settings, slot, check.cost, now) {
            return v;
        }
        if let Some(v) = self.switch_ahead(settings, slot, check.cost, now) {
            return v;
        }
        let previous = self.retire_current(slot, now);
        let want = self.provision(settings, slot).max(check.cost);
        // End the previous lease in the same write, even when all of it was
        // spent: its spent units then count as consumed now, not at its term.
        // A lease retired earlier (replaced by one taken ahead) ends on its own.
        if let Some((n, term)) = slot.take_retired() {
            self.inner.refunder.spawn(slot, n, term);
        }
        let left = previous.map_or(0, |p| p.0);
        let lease_ms = settings.lease.ttl.as_millis() as f64 + self.inner.grace_ms;
        let op = Op::Take { want, min: check.cost, lease_ms, give_back: previous };
        let stats = &self.inner.stats;
        match self.call(scope, check.limit, check.key, settings, op).await {
            Ok(applied) => {
                add(&stats.units_refunded, applied.returned);
                add(&stats.units_lost, left - applied.returned);
                self.serve_lease(settings, slot, check, want, applied)
            }
            Err(e) => {
                // Units sent back in a write whose fate is unknown are never spent again.
                add(&stats.units_lost, left);
                self.fail(settings, check, now, e)
            }
        }
    }

    /// Drains the current lease and folds its use into the key's demand:
    /// the units spent from it over the time it served, which ends when a
    /// caller first found it short, not when the renewal got to run (a lease
    /// spent in a millisecond and renewed after a 100 ms store call served
    /// a demand 100 times larger than it looks over its lifetime; measured
    /// that way, a hot key behind a slow store would keep leases too small
    /// and its callers would queue behind every store call). Returns its
    /// unused units and identity, or `None` when no lease was taken since the
    /// last one ended. Call with `refill` held.
    fn retire_current(&self, slot: &Slot, now: f64) -> Option<(u64, LeaseTerm)> {
        let (left, term) = slot.drain(&self.inner.stats);
        let previous = slot.granted.swap(0, Ordering::Relaxed);
        if previous == 0 {
            return None;
        }
        let served = slot.missed_at.load().min(now) - slot.since.load();
        slot.demand.lock().expect("demand lock").sample(previous.saturating_sub(left), served);
        Some((left, term))
    }

    /// Units a new lease for `slot` should hold: its recent demand over the
    /// horizon (or over [`AHEAD_LATENCIES`] store latencies, if longer: a
    /// slow store needs larger leases for a renewal to land in time), at
    /// most `lease.max` (0 for a key with no demand yet).
    fn provision(&self, settings: &LimitSettings, slot: &Slot) -> u64 {
        let rate = slot.demand.lock().expect("demand lock").rate;
        let span = (settings.lease.horizon.as_millis() as f64).max(AHEAD_LATENCIES * self.inner.latency_ms.load());
        (rate * span).ceil().min(settings.lease.max as f64) as u64
    }

    /// Installs the lease taken ahead, if there is one and it can be spent
    /// now, and serves `cost` from it: no store call. The lease it replaces
    /// is retired (its end goes with the key's next write).
    fn switch_ahead(&self, settings: &LimitSettings, slot: &Arc<Slot>, cost: u64, now: f64) -> Option<Verdict> {
        let staged = slot.take_staged()?;
        if !staged.usable_at(now) {
            // Its window is over (or its time is up): give it back.
            add(&self.inner.stats.units_drained, staged.units);
            self.inner.refunder.spawn(slot, staged.units, staged.term);
            return None;
        }
        if let Some((left, term)) = self.retire_current(slot, now) {
            if let Some((n, term)) = slot.retire(left, term) {
                self.inner.refunder.spawn(slot, n, term);
            }
        }
        self.install(settings, slot, staged, now);
        add(&self.inner.stats.leases_switched, 1);
        self.try_local(settings, slot, cost, now)
    }

    /// Installs `lease` as the slot's current one, schedules its end, and
    /// sets its low-water mark. Call with `refill` held.
    fn install(&self, settings: &LimitSettings, slot: &Arc<Slot>, lease: Installed, now: f64) {
        let (units, granted, until) = (lease.units, lease.granted, lease.until);
        slot.since.store(now);
        slot.install(lease);
        if units > 0 {
            let generation = slot.generation.load(Ordering::Acquire);
            self.inner.ending.lock().expect("ending lock").push(Pending {
                until,
                slot: Arc::downgrade(slot),
                which: Which::Current(generation),
            });
        }
        slot.ahead_below.store(self.low_water(settings, slot, granted, units), Ordering::Release);
    }

    /// The low-water mark (plus one; 0 for none) of a lease of `granted`
    /// units with `units` left: half of it, or what the key's demand spends
    /// in [`AHEAD_LATENCIES`] store latencies if more, so the next lease
    /// lands before this one runs out. Only a lease sized by demand (larger
    /// than the request it came with) renews ahead: a cold key stays exact
    /// and costs nothing extra.
    fn low_water(&self, settings: &LimitSettings, slot: &Slot, granted: u64, units: u64) -> u64 {
        if units == 0 || settings.mode == Mode::Direct {
            return 0;
        }
        let rate = slot.demand.lock().expect("demand lock").rate;
        let ahead = (rate * AHEAD_LATENCIES * self.inner.latency_ms.load()).ceil() as u64;
        ahead.max(granted / 2).min(units) + 1
    }

    /// Takes the slot's next lease in the background ([`Self::lease_ahead`]).
    fn spawn_lease_ahead(&self, settings: &LimitSettings, slot: &Arc<Slot>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        if self.inner.closing.load(Ordering::Acquire) {
            return;
        }
        let (this, settings, slot) = (self.clone(), *settings, slot.clone());
        rt.spawn(self.inner.refunder.tasks.track_future(async move { this.lease_ahead(&settings, &slot).await }));
    }

    /// Takes a lease ahead of need and stages it in the slot; the retired
    /// lease (if any) ends in the same write. Holds `refill` during the store
    /// call, so a caller that runs out meanwhile waits for this lease rather
    /// than taking another.
    async fn lease_ahead(&self, settings: &LimitSettings, slot: &Arc<Slot>) {
        let _one_at_a_time = slot.refill.lock().await;
        let now = self.now();
        if slot.evicted.load(Ordering::Acquire) || slot.has_staged() || slot.held_at(now) == 0 {
            // Evicted, already staged, or the lease ran out and a caller renewed it.
            return;
        }
        let want = self.provision(settings, slot);
        if want == 0 {
            return;
        }
        let give_back = slot.take_retired();
        let left = give_back.map_or(0, |g| g.0);
        let lease_ms = settings.lease.ttl.as_millis() as f64 + self.inner.grace_ms;
        let op = Op::Take { want, min: 0, lease_ms, give_back };
        let stats = &self.inner.stats;
        let applied = match self.call(slot.scope.as_scope(), &slot.limit, &slot.key, settings, op).await {
            Ok(a) => a,
            Err(e) => {
                tracing::debug!(limit = &*slot.limit, error = %e, "lease ahead failed");
                add(&stats.units_lost, left);
                return;
            }
        };
        add(&stats.units_refunded, applied.returned);
        add(&stats.units_lost, left - applied.returned);
        let Some(term) = applied.lease.filter(|_| applied.granted > 0) else { return };
        add(&stats.leases, 1);
        add(&stats.leases_ahead, 1);
        add(&stats.units_leased, applied.granted);
        let (from, until) = self.span(settings, applied.at_ms);
        slot.stage(Installed {
            units: applied.granted,
            granted: applied.granted,
            from,
            until,
            term,
            store_remaining: applied.decision.remaining,
            reset_at: applied.at_ms + applied.decision.reset_after_ms as f64,
        });
        self.inner.ending.lock().expect("ending lock").push(Pending {
            until,
            slot: Arc::downgrade(slot),
            which: Which::Ahead,
        });
        if slot.evicted.load(Ordering::Acquire) || self.inner.closing.load(Ordering::Acquire) {
            self.inner.refunder.end_staged(slot);
        }
    }

    /// When a lease taken at `at_ms` may be spent: from that instant (a
    /// caller whose clock read is older than the grant — it read the clock,
    /// then waited for a CPU while another caller renewed — takes the slow
    /// path and reads it again, so no admission is ever dated before the
    /// grant that backs it) until its ttl, and for window algorithms only
    /// inside the window it was taken in.
    fn span(&self, settings: &LimitSettings, at_ms: f64) -> (f64, f64) {
        let ttl_end = at_ms + settings.lease.ttl.as_millis() as f64;
        match settings.algorithm.window_end_ms(at_ms) {
            Some(end) => (at_ms, end.min(ttl_end)),
            None => (at_ms, ttl_end),
        }
    }

    fn serve_lease(
        &self,
        settings: &LimitSettings,
        slot: &Arc<Slot>,
        check: Check<'_>,
        want: u64,
        a: Applied,
    ) -> Verdict {
        let stats = &self.inner.stats;
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
        let (from, until) = self.span(settings, a.at_ms);
        let left = a.granted - check.cost;
        let term = a.lease.unwrap_or(LeaseTerm { taken_at_ms: a.at_ms, until_ms: until });
        let lease = Installed {
            units: left,
            granted: a.granted,
            from,
            until,
            term,
            store_remaining: a.decision.remaining,
            reset_at: a.at_ms + a.decision.reset_after_ms as f64,
        };
        self.install(settings, slot, lease, self.now());
        if want <= check.cost {
            // Sized by the request, not by demand: no lease ahead.
            slot.ahead_below.store(0, Ordering::Release);
        }
        if slot.evicted.load(Ordering::Acquire) {
            // Evicted while the lease was being taken: nobody will find these units.
            let (n, term) = slot.drain(stats);
            self.inner.refunder.spawn(slot, n, term);
        }
        let decision = Decision { allowed: true, remaining: a.decision.remaining + left, ..a.decision };
        Verdict { decision, served: Served::Store, unavailable: None, at_ms: a.at_ms }
    }
}
