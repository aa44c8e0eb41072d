//! Live stats for the dashboard: a task aggregates the counters every 500 ms
//! into a `stats` event and broadcasts it. Hot keys come from a bounded
//! Space-Saving sketch and recent decisions from a bounded sample, both fed
//! by the surfaces without blocking them: a contended lock skips the sample.
//!
//! Lagging subscribers skip ahead (a bounded `broadcast` channel): a stuck
//! browser never slows decisions.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::broadcast;

use crate::lease::{LimiterCounts, Served, Verdict};

/// How often a `stats` event is sent.
pub const TICK: Duration = Duration::from_millis(500);
/// The window hot keys are counted over.
pub const HOT_WINDOW: Duration = Duration::from_secs(10);
/// One decision in this many is offered to the sketch and the sample.
const SAMPLE_EVERY: u64 = 4;
/// Space-Saving capacity: the sketch never tracks more keys than this.
const SKETCH_CAPACITY: usize = 128;
/// Recent decisions kept between ticks (the sample's rate bound: 20 per tick).
const RECENT_MAX: usize = 20;

/// Space-Saving heavy hitters: at most `capacity` counters; a new key takes
/// over the smallest counter (its count becomes a bound, not an exact figure).
#[derive(Debug, Default)]
pub struct SpaceSaving {
    capacity: usize,
    counts: Vec<(String, u64)>,
    index: HashMap<String, usize>,
}

impl SpaceSaving {
    /// A sketch holding at most `capacity` keys.
    pub fn new(capacity: usize) -> Self {
        Self { capacity, counts: Vec::with_capacity(capacity), index: HashMap::with_capacity(capacity) }
    }

    /// Counts one occurrence of `key` (`weight` times).
    pub fn offer(&mut self, key: &str, weight: u64) {
        if let Some(&i) = self.index.get(key) {
            self.counts[i].1 += weight;
        } else if self.counts.len() < self.capacity {
            self.index.insert(key.to_string(), self.counts.len());
            self.counts.push((key.to_string(), weight));
        } else if let Some((i, _)) = self.counts.iter().enumerate().min_by_key(|(_, c)| c.1) {
            let old = std::mem::replace(&mut self.counts[i].0, key.to_string());
            self.index.remove(&old);
            self.index.insert(key.to_string(), i);
            self.counts[i].1 += weight;
        }
    }

    /// The `n` heaviest keys, heaviest first.
    pub fn top(&self, n: usize) -> Vec<(String, u64)> {
        let mut all = self.counts.clone();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.truncate(n);
        all
    }

    /// Keys tracked (never above the capacity).
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

/// One sampled decision, as the dashboard shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Recent {
    /// The limit.
    pub limit: String,
    /// The key (hashed when `auth.hash_keys_in_events` is on).
    pub key: String,
    /// Allowed or not.
    pub allowed: bool,
    /// `local`, `store`, `degraded` or `unavailable`.
    pub served: &'static str,
}

/// A hot key in a `stats` event.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HotKey {
    /// `limit/key`.
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
    pub totals: LimiterCounts,
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
    /// Top 10 keys over the last window.
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

    fn shown(&self, key: &str) -> String {
        if self.hash_keys {
            format!("#{:016x}", self.hasher.hash_one(key))
        } else {
            key.to_string()
        }
    }

    /// Offers one decision: sampled, and skipped rather than waited for.
    pub fn observe(&self, limit: &str, key: &str, v: &Verdict) {
        if !self.seen.fetch_add(1, Ordering::Relaxed).is_multiple_of(SAMPLE_EVERY) {
            return;
        }
        if let Ok(mut guard) = self.hot.try_lock() {
            // Build `limit/key` in the scratch buffer: a key already tracked costs no allocation.
            let (sketch, _, scratch) = &mut *guard;
            scratch.clear();
            scratch.push_str(limit);
            scratch.push('/');
            if self.hash_keys {
                use std::fmt::Write;
                let _ = write!(scratch, "#{:016x}", self.hasher.hash_one(key));
            } else {
                scratch.push_str(key);
            }
            sketch.offer(scratch, SAMPLE_EVERY);
        }
        if let Ok(mut recent) = self.recent.try_lock() {
            if recent.len() < RECENT_MAX {
                let served = match v.served {
                    Served::Local => "local",
                    Served::Store => "store",
                    Served::Degraded => "degraded",
                    Served::Unavailable => "unavailable",
                };
                recent.push_back(Recent {
                    limit: limit.to_string(),
                    key: self.shown(key),
                    allowed: v.decision.allowed,
                    served,
                });
            }
        }
    }

    fn take(&self) -> (Vec<HotKey>, Vec<Recent>) {
        let hot = {
            let mut hot = self.hot.lock().expect("sketch lock");
            let top = hot.0.top(10).into_iter().map(|(key, decisions)| HotKey { key, decisions }).collect();
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
        Self { sender: broadcast::channel(16).0, backlog: Mutex::default(), observer: Observer::new(hash_keys) }
    }
}

/// Aggregates every [`TICK`] until the app is dropped.
pub fn spawn_aggregator(app: &crate::app::App) {
    let weak = Arc::downgrade(&app.events);
    let limiter = app.limiter.clone();
    let started = app.started;
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut last, mut last_store, mut last_at, mut seq) =
            (LimiterCounts::default(), (0, 0, 0), Instant::now(), 0u64);
        loop {
            tick.tick().await;
            let Some(events) = weak.upgrade() else { return };
            let l = limiter.stats().snapshot();
            let c = limiter.cas().stats().snapshot();
            let dt = last_at.elapsed().as_secs_f64().max(1e-3);
            let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / dt;
            let local = |x: &LimiterCounts| x.allowed_local + x.denied_local;
            let store = |x: &LimiterCounts| x.allowed_store + x.denied_store + x.degraded + x.unavailable;
            let allowed = |x: &LimiterCounts| x.allowed_local + x.allowed_store + x.degraded;
            let denied = |x: &LimiterCounts| x.denied_local + x.denied_store + x.unavailable;
            let decisions = (local(&l) + store(&l)).max(1) as f64;
            let (hot_keys, recent) = events.observer.take();
            seq += 1;
            let stats = Arc::new(Stats {
                seq,
                uptime_s: started.elapsed().as_secs_f64(),
                totals: l,
                store_reads: c.reads,
                store_writes: c.writes,
                store_conflicts: c.conflicts,
                allowed_per_s: rate(allowed(&l), allowed(&last)),
                denied_per_s: rate(denied(&l), denied(&last)),
                local_per_s: rate(local(&l), local(&last)),
                store_per_s: rate(store(&l), store(&last)),
                reads_per_s: rate(c.reads, last_store.0),
                writes_per_s: rate(c.writes, last_store.1),
                conflicts_per_s: rate(c.conflicts, last_store.2),
                writes_per_decision: c.writes as f64 / decisions,
                direct_writes_per_decision: allowed(&l) as f64 / decisions,
                store_calls_per_decision: (c.reads + c.writes) as f64 / decisions,
                direct_calls_per_decision: (decisions + allowed(&l) as f64) / decisions,
                units_held: l.units_held,
                breaker: limiter.breaker_state().name(),
                l1_keys: limiter.keys_cached(),
                hot_keys,
                recent,
            });
            {
                let mut backlog = events.backlog.lock().expect("backlog lock");
                if backlog.len() == 20 {
                    backlog.pop_front();
                }
                backlog.push_back(stats.clone());
            }
            let _ = events.sender.send(stats);
            (last, last_store, last_at) = (l, (c.reads, c.writes, c.conflicts), Instant::now());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_saving_finds_the_heavy_hitters_within_bounded_memory() {
        let mut s = SpaceSaving::new(16);
        let mut rng = fastrand::Rng::with_seed(7);
        for i in 0..100_000u64 {
            // Three heavy keys among a long tail of 10,000 light ones.
            let key = match i % 10 {
                0..=2 => "heavy-a".to_string(),
                3..=4 => "heavy-b".to_string(),
                5 => "heavy-c".to_string(),
                _ => format!("tail-{}", rng.u32(..10_000)),
            };
            s.offer(&key, 1);
            assert!(s.len() <= 16);
        }
        let top: Vec<String> = s.top(3).into_iter().map(|t| t.0).collect();
        assert_eq!(top, ["heavy-a", "heavy-b", "heavy-c"]);
        assert!(s.top(1)[0].1 >= 30_000, "counts never under-estimate");
    }
}
