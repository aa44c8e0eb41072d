//! The one compare-and-set loop, written once above every store: read, lazily
//! expire, apply updates, conditional write, and on conflict re-read and
//! retry — bounded, with jittered backoff.
//!
//! The loop knows records, not what is in them. A caller describes what to do
//! to one key's record as an [`Update`]: a function from a [`Draft`] (the
//! record as read, and a typed value decoded from it once per round) to the
//! caller's result. Rate-limit counters are one kind of update; any record
//! kind can be another.
//!
//! Concurrent updates of one key within this process are **combined**: they
//! queue behind the key's in-flight round, and everything queued meanwhile is
//! applied in one read-modify-write that runs each update in order and hands
//! each its own result. CAS retries are then spent only on genuine races with
//! other processes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::Clock;
use tokio::sync::oneshot;

pub use super::update::{Content, Draft, Update};
use super::{PutOutcome, Record, Store, StoreError, StoreUnavailable};

/// Tuning of the CAS loop.
#[derive(Debug, Clone)]
pub struct CasSettings {
    /// Key namespace: records are stored under `prefix:...`.
    pub prefix: String,
    /// Conflicts (and transient errors) retried before giving up; default 16.
    pub max_retries: u32,
    /// First backoff after a conflict; doubled each retry, with full jitter.
    pub backoff_base: Duration,
    /// The longest backoff.
    pub backoff_max: Duration,
    /// Write first, read only on conflict: guess a key's record from the
    /// last one this process saw (a key never seen: absent) and write with
    /// the condition on that guess; a wrong guess costs one failed write,
    /// which returns the record as it stands (on stores that can), instead
    /// of a read before every write. For remote stores (DynamoDB).
    pub write_first: bool,
    /// Most bytes of records remembered for guessing (write first only).
    pub remember_bytes: u64,
}

impl Default for CasSettings {
    fn default() -> Self {
        Self {
            prefix: "leasehold".into(),
            max_retries: 16,
            backoff_base: Duration::from_millis(2),
            backoff_max: Duration::from_millis(100),
            write_first: false,
            remember_bytes: 32 << 20,
        }
    }
}

/// Counters of store traffic, for `/metrics`, the dashboard and benchmarks.
#[derive(Debug, Default)]
pub struct CasStats {
    /// Updates submitted.
    pub applies: AtomicU64,
    /// Read-modify-write rounds run (each serves one or more combined updates).
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
    /// Records that could not be decoded (read as absent).
    pub corrupt: AtomicU64,
    /// Writes made on a guessed record (write first), and those whose
    /// guess was wrong (a failed write instead of a read).
    pub guessed: AtomicU64,
    /// See `guessed`.
    pub guessed_wrong: AtomicU64,
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
    pub guessed: u64,
    pub guessed_wrong: u64,
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
            guessed: r(&self.guessed),
            guessed_wrong: r(&self.guessed_wrong),
        }
    }
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Transient store errors retried within one round: conflicts mean a healthy,
/// busy store and get `max_retries`; errors mean a sick one, and waiting on it
/// longer only delays the fail policy's answer.
const MAX_ERROR_RETRIES: u32 = 2;

type Queues = Mutex<HashMap<String, Vec<Box<dyn Queued>>>>;

/// The queue lock. A poisoned lock (a panic while it was held: only a push or
/// a swap of a `Vec`, which cannot leave it half-done) is still usable.
fn lock(q: &Queues) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Box<dyn Queued>>>> {
    q.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes a key's queue when its driver unwinds (see [`Inner::drive`]).
/// Forgotten when the driver ends normally; dropped only while unwinding
/// or when the driver task is cancelled.
struct Unwedge<'a> {
    queues: &'a Queues,
    key: &'a str,
}

impl Drop for Unwedge<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            tracing::error!(key = self.key, "a compare-and-set round panicked; its callers get an error");
        }
        // Panicked or cancelled (the runtime shutting down): either way the
        // queue goes, so no caller waits on a driver that is gone.
        lock(self.queues).remove(self.key);
    }
}

/// A write sent to the store.
#[derive(Debug, Clone, Copy)]
struct Written {
    version: u64,
    write_id: u64,
}

/// The version of a record created at `now_ms`: the clock in microseconds.
/// Versions then never repeat when a record expires, is deleted by the
/// store's TTL and is created again (a stale conditional write expecting an
/// old version can never match a new record), as long as no record sees
/// more than one write per microsecond of its life.
pub fn fresh_version(now_ms: f64) -> u64 {
    if now_ms.is_finite() && now_ms > 0.0 {
        ((now_ms * 1000.0) as u64).max(1)
    } else {
        1
    }
}

/// A queued update with its reply channel, type-erased so one queue can hold
/// updates of any kind.
trait Queued: Send {
    fn run(&mut self, draft: &mut Draft);
    fn succeed(self: Box<Self>);
    fn fail(self: Box<Self>, e: StoreUnavailable);
}

struct Entry<U: Update> {
    update: U,
    output: Option<U::Output>,
    reply: oneshot::Sender<Result<U::Output, StoreUnavailable>>,
}

impl<U: Update> Queued for Entry<U> {
    fn run(&mut self, draft: &mut Draft) {
        self.output = Some(self.update.apply(draft));
    }
    fn succeed(self: Box<Self>) {
        if let Some(out) = self.output {
            let _ = self.reply.send(Ok(out));
        }
    }
    fn fail(self: Box<Self>, e: StoreUnavailable) {
        let _ = self.reply.send(Err(e));
    }
}

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    settings: CasSettings,
    stats: CasStats,
    /// Updates waiting per storage key. A key is present exactly while a
    /// driver task is running for it. A `std::sync::Mutex`: held only to push
    /// or swap a `Vec`, never across an `.await`.
    queues: Queues,
    /// The last record seen per key (write first only): the next write's guess.
    seen: Option<moka::sync::Cache<String, Record>>,
    /// Keys whose last guess was wrong (another process writes them too):
    /// read first for a while, since a failed conditional write costs a
    /// write (DynamoDB bills it as one), more than the read it saves.
    contended: Option<moka::sync::Cache<String, ()>>,
}

/// How long a key whose guess was wrong is read before being written.
const CONTENDED_FOR: Duration = Duration::from_secs(30);

/// Where an attempt's record comes from.
enum Source {
    /// Read from the store.
    Read,
    /// Known from a failed write's reply (as good as a read).
    Known(Option<Record>),
    /// Guessed from the last record seen (write first).
    Guess,
}

/// How an attempt ended.
enum Attempt {
    Done,
    Conflict,
    /// Retry at once from this source (no backoff: nobody raced us).
    Again(Source),
}

/// The compare-and-set loop over a [`Store`]. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub struct Cas {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Cas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cas").field("store", &self.inner.store.name()).field("settings", &self.inner.settings).finish()
    }
}

impl Cas {
    /// A CAS loop over `store`, reading time from `clock`.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, settings: CasSettings) -> Self {
        let seen = settings.write_first.then(|| {
            moka::sync::Cache::builder()
                .max_capacity(settings.remember_bytes)
                .weigher(|k: &String, r: &Record| u32::try_from(k.len() + r.state.len() + 64).unwrap_or(u32::MAX))
                .build()
        });
        let contended = settings
            .write_first
            .then(|| moka::sync::Cache::builder().max_capacity(100_000).time_to_live(CONTENDED_FOR).build());
        let stats = CasStats::default();
        Self { inner: Arc::new(Inner { store, clock, settings, stats, queues: Mutex::default(), seen, contended }) }
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The clock rounds run at.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// The key namespace (`[store] prefix`).
    pub fn prefix(&self) -> &str {
        &self.inner.settings.prefix
    }

    /// Store traffic counters.
    pub fn stats(&self) -> &CasStats {
        &self.inner.stats
    }

    /// Applies `update` to the record stored under `key` (a full storage key).
    ///
    /// # Errors
    /// [`StoreUnavailable`] when the store failed or every retry conflicted;
    /// the update then had no effect, unless the store failed after
    /// accepting the write.
    ///
    /// # Concurrency
    /// Runs on a task of its own, so dropping the returned future (a timeout)
    /// never leaves a key half-applied; concurrent updates of one key are combined.
    pub async fn update<U: Update>(&self, key: String, update: U) -> Result<U::Output, StoreUnavailable> {
        bump(&self.inner.stats.applies);
        let (reply, rx) = oneshot::channel();
        let entry: Box<dyn Queued> = Box::new(Entry { update, output: None, reply });
        let start_driver = {
            let mut queues = lock(&self.inner.queues);
            match queues.get_mut(&key) {
                Some(waiting) => {
                    waiting.push(entry);
                    None
                }
                None => {
                    queues.insert(key.clone(), vec![entry]);
                    Some(key)
                }
            }
        };
        if let Some(key) = start_driver {
            let inner = self.inner.clone();
            tokio::spawn(async move { inner.drive(key).await });
        }
        rx.await.unwrap_or_else(|_| Err(StoreError::transient("cas", "driver task ended unexpectedly").into()))
    }
}

impl Inner {
    /// Runs rounds for `key` until nothing is queued for it.
    async fn drive(&self, key: String) {
        // If a round panics (a bug in an update), the key must not stay
        // wedged: its queue is removed, so every waiting caller gets an error
        // and the next update starts a new driver.
        let wedge = Unwedge { queues: &self.queues, key: &key };
        self.drive_rounds(&key).await;
        std::mem::forget(wedge);
    }

    async fn drive_rounds(&self, key: &str) {
        loop {
            // Let callers that are about to queue for this key join the round.
            tokio::task::yield_now().await;
            let batch = {
                let mut queues = lock(&self.queues);
                let waiting = queues.get_mut(key).map(std::mem::take).unwrap_or_default();
                if waiting.is_empty() {
                    queues.remove(key);
                    return;
                }
                waiting
            };
            self.round(key, batch).await;
        }
    }

    /// One combined read-modify-write for `batch`, retried on conflict.
    async fn round(&self, key: &str, mut batch: Vec<Box<dyn Queued>>) {
        bump(&self.stats.batches);
        let (mut attempts, mut errors) = (0u32, 0u32);
        // A write whose reply was lost: it may have landed.
        // Writes of this round whose replies were lost: any may still land.
        let mut unsure: Vec<Written> = Vec::new();
        let contended = self.contended.as_ref().is_some_and(|c| c.contains_key(key));
        let mut source = if self.seen.is_some() && !contended { Source::Guess } else { Source::Read };
        let failure = loop {
            match self.attempt(key, &mut batch, &mut unsure, source).await {
                Ok(Attempt::Done) => {
                    for q in batch {
                        q.succeed();
                    }
                    return;
                }
                Ok(Attempt::Again(next)) => {
                    // A wrong guess: at most once per round (what comes back is known).
                    source = next;
                    continue;
                }
                Ok(Attempt::Conflict) => bump(&self.stats.conflicts),
                Err(e) => {
                    bump(&self.stats.errors);
                    errors += 1;
                    if !e.transient || errors > MAX_ERROR_RETRIES || attempts >= self.settings.max_retries {
                        break StoreUnavailable::Backend(e);
                    }
                }
            }
            source = Source::Read;
            attempts += 1;
            if attempts > self.settings.max_retries {
                break StoreUnavailable::Contention { attempts };
            }
            bump(&self.stats.retries);
            tokio::time::sleep(self.backoff(attempts)).await;
        };
        if let Some(seen) = &self.seen {
            seen.invalidate(key);
        }
        for q in batch {
            q.fail(failure.clone());
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let cap = self.settings.backoff_base.saturating_mul(1 << attempt.min(16)).min(self.settings.backoff_max);
        cap.mul_f64(fastrand::f64())
    }

    /// Read (or guess, or use what a failed write returned), run every
    /// update in order, write if anything changed.
    ///
    /// Writes are idempotent: each carries a random write id. When a write's
    /// reply is lost (timeout, reset, 5xx) it is remembered in `unsure` for
    /// the rest of the round; a later read that finds the record at that
    /// version with that id (it landed, perhaps late) ends the batch as done,
    /// and one that finds the record past that version without it gives up
    /// — its updates are never applied twice (a refund applied twice would
    /// mint units).
    ///
    /// A guess is only ever trusted through a conditional write: when the
    /// updates change nothing on a guessed record (a denial, a status), the
    /// round reads and runs them again, so no answer rests on a guess.
    async fn attempt(
        &self,
        key: &str,
        batch: &mut [Box<dyn Queued>],
        unsure: &mut Vec<Written>,
        source: Source,
    ) -> Result<Attempt, StoreError> {
        let guessed = matches!(source, Source::Guess) && unsure.is_empty();
        let record = match source {
            _ if !unsure.is_empty() => self.read(key).await?,
            Source::Read => self.read(key).await?,
            Source::Known(r) => {
                if let (Some(seen), Some(r)) = (&self.seen, &r) {
                    seen.insert(key.to_owned(), r.clone());
                }
                r
            }
            Source::Guess => self.seen.as_ref().and_then(|s| s.get(key)),
        };
        // Every lost write of the round is remembered to its end: one may
        // land late (after a read that did not see it), so forgetting it
        // after one read could apply the batch twice.
        if let (Some(r), Some(first)) = (&record, unsure.iter().map(|w| w.version).min()) {
            if unsure.iter().any(|w| r.version == w.version && r.write_id == w.write_id) {
                return Ok(Attempt::Done);
            }
            // Another write reached a lost write's version or beyond: ours
            // may have landed before it. Applying the batch again could apply
            // it twice, so give up on it (under-issue at worst).
            if r.version >= first {
                return Err(StoreError::record("cas", "a write's reply was lost and the record has changed since"));
            }
        }
        // Otherwise the record is still older than any lost write: none landed yet.
        let now = self.clock.now_ms();
        let live = record.as_ref().filter(|r| !r.is_expired(now)).cloned();
        let mut draft = Draft::new(live, now);
        for q in batch.iter_mut() {
            q.run(&mut draft);
        }
        if draft.corrupt {
            bump(&self.stats.corrupt);
            tracing::warn!(key, "unreadable record; treating the key as fresh");
        }
        let Some(value) = draft.value.filter(|_| draft.changed) else {
            return Ok(if guessed { Attempt::Again(Source::Read) } else { Attempt::Done });
        };
        let next = Record {
            state: value.encode(),
            version: record.as_ref().map_or_else(|| fresh_version(now), |r| r.version + 1),
            expires_at_ms: value.expires_at_ms(),
            write_id: fastrand::u64(1..),
        };
        bump(&self.stats.writes);
        if guessed {
            bump(&self.stats.guessed);
        }
        let expected = record.as_ref().map(|r| r.version);
        let outcome = if self.seen.is_some() {
            self.store.put_if_or_current(key, &next, expected).await
        } else {
            self.store.put_if(key, &next, expected).await.map(|o| (o, None))
        };
        match outcome {
            Ok((PutOutcome::Written, _)) => {
                if let Some(seen) = &self.seen {
                    seen.insert(key.to_owned(), next);
                }
                Ok(Attempt::Done)
            }
            Ok((PutOutcome::Conflict, current)) => {
                if let Some(seen) = &self.seen {
                    seen.invalidate(key);
                }
                match (guessed, current) {
                    (true, current) => {
                        bump(&self.stats.guessed_wrong);
                        if let (Some(c), Some(_)) = (&self.contended, &record) {
                            // Guessed from a record we had seen: someone else writes this key.
                            c.insert(key.to_owned(), ());
                        }
                        Ok(Attempt::Again(current.map_or(Source::Read, Source::Known)))
                    }
                    // A known record is as good as a read for the retry (after backoff).
                    (false, _) => Ok(Attempt::Conflict),
                }
            }
            Err(e) => {
                unsure.push(Written { version: next.version, write_id: next.write_id });
                Err(e)
            }
        }
    }

    async fn read(&self, key: &str) -> Result<Option<Record>, StoreError> {
        bump(&self.stats.reads);
        let record = self.store.get(key).await?;
        if let (Some(seen), Some(r)) = (&self.seen, &record) {
            seen.insert(key.to_owned(), r.clone());
        }
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use std::any::Any;

    use super::*;
    use crate::store::memory::MemoryStore;
    use leasehold_core::ManualClock;

    struct Boom;
    impl Update for Boom {
        type Output = ();
        fn apply(&self, _: &mut Draft) {
            panic!("a bug in an update");
        }
    }

    struct Count;
    impl Content for u64 {
        fn encode(&self) -> String {
            self.to_string()
        }
        fn expires_at_ms(&self) -> u64 {
            u64::MAX
        }
        fn as_any(&self) -> &dyn Any {
            self
        }
    }
    impl Update for Count {
        type Output = u64;
        fn apply(&self, d: &mut Draft) -> u64 {
            let n = d.value(|r| r.state.parse::<u64>().ok()).copied().unwrap_or(0) + 1;
            d.set(n);
            n
        }
    }

    #[tokio::test]
    async fn a_panicking_update_does_not_wedge_its_key() {
        let cas = Cas::new(Arc::new(MemoryStore::new()), Arc::new(ManualClock::new(1.0e12)), CasSettings::default());
        assert_eq!(cas.update("k".into(), Count).await, Ok(1));
        assert!(cas.update("k".into(), Boom).await.is_err(), "the caller of the panicking round gets an error");
        let next = tokio::time::timeout(Duration::from_secs(5), cas.update("k".into(), Count)).await;
        assert_eq!(next.expect("the key is not wedged"), Ok(2));
    }
}
