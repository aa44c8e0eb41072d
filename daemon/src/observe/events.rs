//! Live stats for the dashboard: a task aggregates the counters every 500 ms
//! into a `stats` event and broadcasts it. Hot keys come from a bounded
//! Space-Saving sketch and recent decisions from a bounded sample, both fed
//! by the surfaces without blocking them: a contended lock skips the sample.
//!
//! Lagging subscribers skip ahead (a bounded `broadcast` channel): a stuck
//! browser never slows decisions.

use std::collections::VecDeque;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::broadcast;

use super::sketch::SpaceSaving;
use super::Snapshot;
use crate::lease::stats::LeaseCounts;
use crate::lease::Verdict;

/// How often a `stats` event is sent.
pub const TICK: Duration = Duration::from_millis(500);
/// The window hot keys are counted over.
pub const HOT_WINDOW: Duration = Duration::from_secs(10);
/// One decision in this many is offered to the sketch and the sample.
const SAMPLE_EVERY: u64 = 4;
/// Space-Saving capacity: the sketch never tracks more keys than this.
const SKETCH_CAPACITY: usize = 128;
/// Hot keys a viewer is shown.
pub const HOT_SHOWN: usize = 10;
/// Recent decisions kept between ticks (the sample's rate bound: 20 per tick).
const RECENT_MAX: usize = 20;
/// Events kept for clients resuming with `Last-Event-ID`: 10 s of ticks,
/// enough to ride out a browser's reconnect.
const BACKLOG: usize = 20;
/// Events buffered per live subscriber before it lags and skips ahead.
const CHANNEL: usize = 16;

/// One sampled decision, as the dashboard shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Recent {
    /// The tenant of the API key that asked (`None`: the socket, or HTTP
    /// without keys). Not sent: the surface shows each viewer its own.
    #[serde(skip)]
    pub tenant: Option<String>,
    /// The limit.
    pub limit: String,
    /// The key, as stored (`<tenant>:<key>` for a tenant's), its caller's part
    /// hashed when `auth.hash_keys_in_events` is on.
    pub key: String,
    /// Allowed or not.
    pub allowed: bool,
    /// `local`, `store`, `degraded` or `unavailable`.
    pub served: &'static str,
}

/// A hot key in a `stats` event.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HotKey {
    /// The tenant whose key it is, as in [`Recent::tenant`]. Not sent.
    #[serde(skip)]
    pub tenant: Option<String>,
    /// `limit/key`, the key as in [`Recent::key`].
    pub key: String,
    /// Sampled decisions over the window, scaled back to an estimate.
    pub decisions: u64,
}

/// The `stats` event.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    /// Sequence number (the SSE `id`).
    pub seq: u64,
    /// Seconds since start.
    pub uptime_s: f64,
    /// Totals since start.
    pub totals: LeaseCounts,
    /// Store reads and writes since start.
    pub store_reads: u64,
    /// See `store_reads`.
    pub store_writes: u64,
    /// Store conflicts since start.
    pub store_conflicts: u64,
    /// Per-second rates over the last tick.
    pub allowed_per_s: f64,
    /// Denied per second.
    pub denied_per_s: f64,
    /// Decisions served from leased units or local denials, per second.
    pub local_per_s: f64,
    /// Decisions that needed the store, per second.
    pub store_per_s: f64,
    /// Store reads per second.
    pub reads_per_s: f64,
    /// Store writes per second.
    pub writes_per_s: f64,
    /// Store conflicts per second.
    pub conflicts_per_s: f64,
    /// Store writes per decision since start.
    pub writes_per_decision: f64,
    /// What direct mode would have cost: one conditional write per allowed decision.
    pub direct_writes_per_decision: f64,
    /// Store calls (reads and writes) per decision since start.
    pub store_calls_per_decision: f64,
    /// What direct mode would have cost: a read per decision and a write per allowed one.
    pub direct_calls_per_decision: f64,
    /// Leases with unspent units and the units they hold.
    pub units_held: u64,
    /// The breaker: `closed`, `open`, `half_open`.
    pub breaker: &'static str,
    /// Keys with a slot in the lease cache.
    pub l1_keys: u64,
    /// Every key the sketch tracks over the last window, heaviest first (at
    /// most its capacity); a surface shows each viewer the top
    /// [`HOT_SHOWN`] of the keys it may see.
    pub hot_keys: Vec<HotKey>,
    /// Decisions sampled since the last event.
    pub recent: Vec<Recent>,
}

/// The sketch and the sample, fed by the surfaces.
#[derive(Debug)]
pub struct Observer {
    seen: AtomicU64,
    /// The sketch, when its window started, and a scratch buffer for keys.
    hot: Mutex<(SpaceSaving, Instant, String)>,
    recent: Mutex<VecDeque<Recent>>,
    hash_keys: bool,
    hasher: RandomState,
}

impl Observer {
    /// An observer; with `hash_keys`, keys are shown as hashes.
    pub fn new(hash_keys: bool) -> Self {
        Self {
            seen: AtomicU64::new(0),
            hot: Mutex::new((SpaceSaving::new(SKETCH_CAPACITY), Instant::now(), String::with_capacity(64))),
            recent: Mutex::new(VecDeque::with_capacity(RECENT_MAX)),
            hash_keys,
            hasher: RandomState::new(),
        }
    }

    /// Writes the key as shown: `<tenant>:` (if any), then the caller's key
    /// or its hash.
    fn write_key(&self, out: &mut String, tenant: Option<&str>, key: &str) {
        if let Some(t) = tenant {
            out.push_str(t);
            out.push(':');
        }
        if self.hash_keys {
            use std::fmt::Write;
            let _ = write!(out, "#{:016x}", self.hasher.hash_one(key));
        } else {
            out.push_str(key);
        }
    }

    /// Offers one decision on `key` as its caller sent it, by `tenant` (the
    /// API key's; `None` for the socket and for HTTP without keys): sampled,
    /// and skipped rather than waited for.
    pub fn observe(&self, tenant: Option<&str>, limit: &str, key: &str, v: &Verdict) {
        if !self.seen.fetch_add(1, Ordering::Relaxed).is_multiple_of(SAMPLE_EVERY) {
            return;
        }
        if let Ok(mut guard) = self.hot.try_lock() {
            // Build `<tenant>\0limit/key` in the scratch buffer: a key already
            // tracked costs no allocation. A tenant holds no control character,
            // so the first NUL ends it.
            let (sketch, _, scratch) = &mut *guard;
            scratch.clear();
            scratch.push_str(tenant.unwrap_or(""));
            scratch.push('\0');
            scratch.push_str(limit);
            scratch.push('/');
            self.write_key(scratch, tenant, key);
            sketch.offer(scratch, SAMPLE_EVERY);
        }
        if let Ok(mut recent) = self.recent.try_lock() {
            if recent.len() < RECENT_MAX {
                let served = v.served.name();
                let mut shown = String::new();
                self.write_key(&mut shown, tenant, key);
                recent.push_back(Recent {
                    tenant: tenant.map(str::to_string),
                    limit: limit.to_string(),
                    key: shown,
                    allowed: v.decision.allowed,
                    served,
                });
            }
        }
    }

    fn take(&self) -> (Vec<HotKey>, Vec<Recent>) {
        let hot = {
            let mut hot = self.hot.lock().expect("sketch lock");
            let top = hot
                .0
                .top(SKETCH_CAPACITY)
                .into_iter()
                .map(|(tracked, decisions)| {
                    let (tenant, key) = tracked.split_once('\0').unwrap_or(("", &tracked));
                    let tenant = (!tenant.is_empty()).then(|| tenant.to_string());
                    HotKey { tenant, key: key.to_string(), decisions }
                })
                .collect();
            if hot.1.elapsed() >= HOT_WINDOW {
                hot.0 = SpaceSaving::new(SKETCH_CAPACITY);
                hot.1 = Instant::now();
            }
            top
        };
        let recent = self.recent.lock().expect("recent lock").drain(..).collect();
        (hot, recent)
    }
}

/// The broadcast side: subscribe for `stats` events; the last few are kept
/// for clients resuming with `Last-Event-ID`.
#[derive(Debug)]
pub struct Events {
    /// New events.
    pub sender: broadcast::Sender<Arc<Stats>>,
    /// The most recent events, oldest first.
    pub backlog: Mutex<VecDeque<Arc<Stats>>>,
    /// Decisions offered by the surfaces.
    pub observer: Observer,
}

impl Events {
    /// An event hub.
    pub fn new(hash_keys: bool) -> Self {
        Self { sender: broadcast::channel(CHANNEL).0, backlog: Mutex::default(), observer: Observer::new(hash_keys) }
    }
}

/// Aggregates a [`Snapshot`] from `source` every [`TICK`] into a `stats`
/// event, until `events` is dropped.
pub fn spawn_aggregator(events: &Arc<Events>, started: Instant, source: impl Fn() -> Snapshot + Send + 'static) {
    let weak = Arc::downgrade(events);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut last, mut last_store, mut last_at, mut seq) =
            (LeaseCounts::default(), (0, 0, 0), Instant::now(), 0u64);
        loop {
            tick.tick().await;
            let Some(events) = weak.upgrade() else { return };
            let snap = source();
            let (l, c) = (snap.lease, snap.store);
            let dt = last_at.elapsed().as_secs_f64().max(1e-3);
            let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / dt;
            let decisions = (l.local() + l.store()).max(1) as f64;
            let (hot_keys, recent) = events.observer.take();
            seq += 1;
            let stats = Arc::new(Stats {
                seq,
                uptime_s: started.elapsed().as_secs_f64(),
                totals: l,
                store_reads: c.reads,
                store_writes: c.writes,
                store_conflicts: c.conflicts,
                allowed_per_s: rate(l.allowed(), last.allowed()),
                denied_per_s: rate(l.denied(), last.denied()),
                local_per_s: rate(l.local(), last.local()),
                store_per_s: rate(l.store(), last.store()),
                reads_per_s: rate(c.reads, last_store.0),
                writes_per_s: rate(c.writes, last_store.1),
                conflicts_per_s: rate(c.conflicts, last_store.2),
                writes_per_decision: c.writes as f64 / decisions,
                direct_writes_per_decision: l.allowed() as f64 / decisions,
                store_calls_per_decision: (c.reads + c.writes) as f64 / decisions,
                direct_calls_per_decision: (decisions + l.allowed() as f64) / decisions,
                units_held: l.units_held,
                breaker: snap.breaker.name(),
                l1_keys: snap.l1_keys,
                hot_keys,
                recent,
            });
            {
                let mut backlog = events.backlog.lock().expect("backlog lock");
                if backlog.len() == BACKLOG {
                    backlog.pop_front();
                }
                backlog.push_back(stats.clone());
            }
            let _ = events.sender.send(stats);
            (last, last_store, last_at) = (l, (c.reads, c.writes, c.conflicts), Instant::now());
        }
    });
}
