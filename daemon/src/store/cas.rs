//! The one compare-and-set loop, written once above every store: read, lazily
//! expire, apply a core transition, conditional write, and on conflict re-read
//! and retry — bounded, with jittered backoff.
//!
//! Concurrent applies to one key within this process are **combined**: they
//! queue behind the key's in-flight CAS, and everything queued meanwhile is
//! applied in one read-modify-write whose transition runs each request in
//! order and hands each its own result. CAS retries are then spent only on
//! genuine races with other processes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::{Algorithm, Clock, Decision, State};
use tokio::sync::oneshot;

use super::{PutOutcome, Record, Store, StoreError, StoreUnavailable};

/// One request against a key's counter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// All-or-nothing admission of `cost` units.
    Decide {
        /// Units to admit.
        cost: u64,
    },
    /// Grant up to `want` units, or none if fewer than `min` are available;
    /// first giving back the unused units of a previous grant, in the same write.
    Take {
        /// Units wanted.
        want: u64,
        /// The fewest units worth granting.
        min: u64,
        /// Unused units of an earlier grant, and when that grant was taken.
        give_back: Option<(u64, f64)>,
    },
    /// Give back `n` unused units that were taken at `taken_at_ms`.
    Refund {
        /// Units given back.
        n: u64,
        /// When they were taken (window algorithms accept them back only into that window).
        taken_at_ms: f64,
    },
    /// Read the key's standing; consumes nothing and never writes.
    Status,
}

/// The result of one [`Op`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Applied {
    /// Units granted: `cost` for an allowed `Decide`, the grant of a `Take`; else 0.
    pub granted: u64,
    /// Units given back and accepted (by a `Refund`, or a `Take`'s
    /// `give_back`): none when the state was at its ceiling already or the
    /// units' window is over.
    pub returned: u64,
    /// The decision as the key stands after the op. For a `Take` that granted
    /// nothing, `retry_after_ms` is when `min` units will be available.
    pub decision: Decision,
    /// The time (epoch ms) the op was applied at.
    pub at_ms: f64,
}

fn apply_op(alg: &Algorithm, state: Option<&State>, now: f64, op: Op) -> (Applied, Option<State>) {
    let mut returned = 0;
    let (granted, decision, next) = match op {
        Op::Decide { cost } => {
            let (d, next) = alg.decide(state, now, cost);
            (if d.allowed { cost } else { 0 }, d, next)
        }
        Op::Take { want, min, give_back } => {
            let back = give_back.and_then(|(n, at)| alg.refund(state, at, n).map(|s| (n, s)));
            returned = back.as_ref().map_or(0, |b| b.0);
            let back = back.map(|b| b.1);
            let base = back.as_ref().or(state);
            let (granted, taken) = alg.take(base, now, want, min);
            let d = match &taken {
                Some(t) => Decision { allowed: true, ..alg.status(Some(t), now) },
                None => alg.decide(base, now, min.max(1)).0,
            };
            let next = taken.or(back);
            (granted, d, next)
        }
        Op::Refund { n, taken_at_ms } => {
            let next = alg.refund(state, taken_at_ms, n);
            returned = if next.is_some() { n } else { 0 };
            (0, alg.status(next.as_ref().or(state), now), next)
        }
        Op::Status => (0, alg.status(state, now), None),
    };
    (Applied { granted, returned, decision, at_ms: now }, next)
}

/// Tuning of the CAS loop.
#[derive(Debug, Clone)]
pub struct CasOptions {
    /// Key namespace: records are stored under `prefix:limit:key`.
    pub prefix: String,
    /// Conflicts (and transient errors) retried before giving up; default 16.
    pub max_retries: u32,
    /// First backoff after a conflict; doubled each retry, with full jitter.
    pub backoff_base: Duration,
    /// The longest backoff.
    pub backoff_max: Duration,
}

impl Default for CasOptions {
    fn default() -> Self {
        Self {
            prefix: "leasehold".into(),
            max_retries: 16,
            backoff_base: Duration::from_millis(2),
            backoff_max: Duration::from_millis(100),
        }
    }
}

/// Counters of store traffic, for `/metrics`, the dashboard and benchmarks.
#[derive(Debug, Default)]
pub struct CasStats {
    /// Ops submitted.
    pub applies: AtomicU64,
    /// Read-modify-write rounds run (each serves one or more combined ops).
    pub batches: AtomicU64,
    /// `get` calls.
    pub reads: AtomicU64,
    /// Conditional writes attempted.
    pub writes: AtomicU64,
    /// Conditional writes that lost to another writer.
    pub conflicts: AtomicU64,
    /// Rounds retried (after a conflict or a transient error).
    pub retries: AtomicU64,
    /// Store errors seen.
    pub errors: AtomicU64,
    /// Records whose state could not be read for the limit's algorithm (read as absent).
    pub corrupt: AtomicU64,
}

/// A snapshot of [`CasStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct CasCounts {
    pub applies: u64,
    pub batches: u64,
    pub reads: u64,
    pub writes: u64,
    pub conflicts: u64,
    pub retries: u64,
    pub errors: u64,
    pub corrupt: u64,
}

impl CasStats {
    /// The counters now.
    pub fn snapshot(&self) -> CasCounts {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        CasCounts {
            applies: r(&self.applies),
            batches: r(&self.batches),
            reads: r(&self.reads),
            writes: r(&self.writes),
            conflicts: r(&self.conflicts),
            retries: r(&self.retries),
            errors: r(&self.errors),
            corrupt: r(&self.corrupt),
        }
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Transient store errors retried within one apply (conflicts have their own budget).
const MAX_ERROR_RETRIES: u32 = 2;

type Reply = oneshot::Sender<Result<Applied, StoreUnavailable>>;

struct Queued {
    alg: Algorithm,
    op: Op,
    reply: Reply,
}

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    options: CasOptions,
    stats: CasStats,
    /// Ops waiting per storage key. A key is present exactly while a driver
    /// task is running for it. A `std::sync::Mutex`: held only to push or swap
    /// a `Vec`, never across an `.await`.
    queues: Mutex<HashMap<String, Vec<Queued>>>,
}

/// The rate limiter over a [`Store`]: applies [`Op`]s to keys' counters.
/// Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Cas {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Cas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cas").field("store", &self.inner.store.name()).field("options", &self.inner.options).finish()
    }
}

impl Cas {
    /// A CAS loop over `store`, reading time from `clock`.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, options: CasOptions) -> Self {
        Self { inner: Arc::new(Inner { store, clock, options, stats: CasStats::default(), queues: Mutex::default() }) }
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The clock decisions are made with.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Store traffic counters.
    pub fn stats(&self) -> &CasStats {
        &self.inner.stats
    }

    /// The storage key of `key` under `limit`: `prefix:limit:key`.
    pub fn storage_key(&self, limit: &str, key: &str) -> String {
        format!("{}:{limit}:{key}", self.inner.options.prefix)
    }

    /// Applies `op` to the counter of `key` under `limit` (using `alg`).
    ///
    /// # Errors
    /// [`StoreUnavailable`] when the store failed or every retry conflicted;
    /// the op then had no effect, unless the store failed after accepting the
    /// write, in which case units may have been consumed but are never granted
    /// (under-issue, never over-issue).
    ///
    /// # Concurrency
    /// Runs on a task of its own, so dropping the returned future (a timeout)
    /// never leaves a key half-applied; concurrent ops on one key are combined.
    pub async fn apply(&self, limit: &str, key: &str, alg: &Algorithm, op: Op) -> Result<Applied, StoreUnavailable> {
        bump(&self.inner.stats.applies);
        let (reply, rx) = oneshot::channel();
        let storage_key = self.storage_key(limit, key);
        let start_driver = {
            let mut queues = self.inner.queues.lock().expect("cas queue lock");
            match queues.get_mut(&storage_key) {
                Some(waiting) => {
                    waiting.push(Queued { alg: *alg, op, reply });
                    false
                }
                None => {
                    queues.insert(storage_key.clone(), vec![Queued { alg: *alg, op, reply }]);
                    true
                }
            }
        };
        if start_driver {
            let inner = self.inner.clone();
            tokio::spawn(async move { inner.drive(storage_key).await });
        }
        rx.await.unwrap_or_else(|_| Err(StoreError::transient("cas", "driver task ended unexpectedly").into()))
    }
}

impl Inner {
    /// Runs rounds for `key` until nothing is queued for it.
    async fn drive(&self, key: String) {
        loop {
            // Let callers that are about to queue for this key join the round.
            tokio::task::yield_now().await;
            let batch = {
                let mut queues = self.queues.lock().expect("cas queue lock");
                let waiting = queues.get_mut(&key).map(std::mem::take).unwrap_or_default();
                if waiting.is_empty() {
                    queues.remove(&key);
                    return;
                }
                waiting
            };
            self.round(&key, batch).await;
        }
    }

    /// One combined read-modify-write for `batch`, retried on conflict.
    async fn round(&self, key: &str, batch: Vec<Queued>) {
        bump(&self.stats.batches);
        let (mut attempts, mut errors) = (0u32, 0u32);
        let failure = loop {
            match self.attempt(key, &batch).await {
                Ok(Some(results)) => {
                    for (q, r) in batch.into_iter().zip(results) {
                        let _ = q.reply.send(Ok(r));
                    }
                    return;
                }
                Ok(None) => bump(&self.stats.conflicts),
                Err(e) => {
                    bump(&self.stats.errors);
                    errors += 1;
                    // Conflicts mean a healthy, busy store and are retried up to
                    // `max_retries`; errors mean a sick one: retried twice at most.
                    if !e.transient || errors > MAX_ERROR_RETRIES || attempts >= self.options.max_retries {
                        break StoreUnavailable::Backend(e);
                    }
                }
            }
            attempts += 1;
            if attempts > self.options.max_retries {
                break StoreUnavailable::Contention { attempts };
            }
            bump(&self.stats.retries);
            tokio::time::sleep(self.backoff(attempts)).await;
        };
        for q in batch {
            let _ = q.reply.send(Err(failure.clone()));
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let cap = self.options.backoff_base.saturating_mul(1 << attempt.min(16)).min(self.options.backoff_max);
        cap.mul_f64(fastrand::f64())
    }

    /// Read, apply every op in order, write if anything changed. `Ok(None)` on conflict.
    async fn attempt(&self, key: &str, batch: &[Queued]) -> Result<Option<Vec<Applied>>, StoreError> {
        bump(&self.stats.reads);
        let record = self.store.get(key).await?;
        let now = self.clock.now_ms();
        let alg = batch[0].alg;
        let mut state = match &record {
            Some(r) if !r.is_expired(now) => match alg.parse_state(&r.state) {
                Ok(s) => Some(s),
                Err(e) => {
                    bump(&self.stats.corrupt);
                    tracing::warn!(key, error = %e, "unreadable state; treating the key as fresh");
                    None
                }
            },
            _ => None,
        };
        let mut changed = false;
        let mut results = Vec::with_capacity(batch.len());
        for q in batch {
            let (applied, next) = apply_op(&q.alg, state.as_ref(), now, q.op);
            if let Some(next) = next {
                state = Some(next);
                changed = true;
            }
            results.push(applied);
        }
        let Some(state) = state.filter(|_| changed) else {
            return Ok(Some(results));
        };
        let next = Record {
            state: state.to_json(),
            version: record.as_ref().map_or(1, |r| r.version + 1),
            expires_at_ms: alg.expires_at_ms(&state).max(0.0) as u64,
        };
        bump(&self.stats.writes);
        match self.store.put_if(key, &next, record.map(|r| r.version)).await? {
            PutOutcome::Written => Ok(Some(results)),
            PutOutcome::Conflict => Ok(None),
        }
    }
}
