//! The single-host counter table: when the daemon is the only writer of its
//! store (the embedded file, or memory), its memory is authoritative and
//! every decision is made against it directly, exactly, with no lease and no
//! store round trip — a hash lookup and the algorithm, as Redis would.
//!
//! The file is a durable copy written behind (see [`Sync`]): every write
//! marks its record dirty; a flusher thread writes the dirty records in one
//! transaction per batch. A key not in memory is read through from the file
//! once (after a restart, or after it expired from memory).
//!
//! ## What a crash can forget
//!
//! - `sync = "always"`: nothing. A decision is answered only after the
//!   transaction holding it is committed (many decisions share one commit).
//! - `sync = "<interval>"` (default `"100ms"`): the decisions of at most the
//!   last interval plus one commit. After a crash (SIGKILL, power loss) the
//!   restarted daemon's counters have forgotten that consumption, so those
//!   keys may admit up to what was admitted in that interval again. A clean
//!   shutdown (SIGTERM, SIGINT) flushes everything first.
//!
//! Either way a decision never admits a unit the table did not grant: the
//! table is the counter.

use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use leasehold_core::{Algorithm, AlgorithmKind, Clock, State};

use super::counter::{apply_op, Applied, Op, Scope, StateChange};
use crate::store::embedded::EmbeddedStore;
use crate::store::{Record, StoreError, StoreUnavailable};

/// Shards of the table (a power of two): concurrent decisions on different
/// keys rarely share a lock.
const SHARDS: usize = 64;

/// When the file copy is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    /// Before a decision is answered (group-committed).
    Always,
    /// In the background, at most this long after a change.
    Every(Duration),
}

impl Default for Sync {
    fn default() -> Self {
        Self::Every(Duration::from_millis(100))
    }
}

/// One key's counter.
#[derive(Debug)]
struct Entry {
    /// The storage key (`prefix:<space>:limit:key`), for the file.
    key: Box<str>,
    /// Its hash (see [`LocalCounters::hash`]).
    hash: u64,
    state: State,
    /// The file record's version for this state (written as is).
    version: u64,
    expires_at_ms: f64,
    dirty: bool,
}

#[derive(Debug, Default)]
struct Shard {
    map: HashTable<Entry>,
    /// Keys changed since the last flush, by hash (an entry whose hash
    /// another key shares is found by comparing keys when flushing).
    dirty: Vec<(u64, Box<str>)>,
}

/// The file behind the table, and the flusher's bookkeeping.
struct Disk {
    store: EmbeddedStore,
    sync: Sync,
    /// Sequence number of the newest change (taken under its shard's lock).
    changed: AtomicU64,
    /// Changes up to this sequence number are in the file.
    committed: tokio::sync::watch::Sender<u64>,
    /// Wakes the flusher (`always`: at once; an interval: on shutdown).
    wake: (Mutex<bool>, Condvar),
    /// The last flush's error, if it failed (decisions under `always` fail
    /// with it; the flusher retries).
    failed: Mutex<Option<StoreError>>,
    /// Records read from the file (keys not in memory) and written to it.
    reads: AtomicU64,
    writes: AtomicU64,
    /// Held for a whole flush.
    flushing: Mutex<()>,
    /// Set when the flusher thread has ended: nobody waits for it then.
    stopped: std::sync::atomic::AtomicBool,
}

struct Inner {
    /// parking_lot's mutex: a decision holds it for ~100 ns, and a hot key's
    /// callers on other threads spin briefly instead of sleeping in the kernel.
    shards: Box<[parking_lot::Mutex<Shard>]>,
    /// Seeded per process: keys a client chooses cannot be made to collide.
    hasher: DefaultHashBuilder,
    prefix: String,
    clock: Arc<dyn Clock>,
    disk: Option<Disk>,
    /// With a file: the most keys a shard keeps in memory; beyond it, keys
    /// already written are dropped (they are read back when next asked for).
    shard_keys: usize,
    stop: std::sync::atomic::AtomicBool,
    flusher: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// The table. Cheap to clone.
#[derive(Clone)]
pub struct LocalCounters {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for LocalCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCounters").field("keys", &self.len()).finish()
    }
}

fn kind_of(state: &State) -> AlgorithmKind {
    match state {
        State::Gcra(_) => AlgorithmKind::Gcra,
        State::TokenBucket(_) => AlgorithmKind::TokenBucket,
        State::LeakyBucket(_) => AlgorithmKind::LeakyBucket,
        State::FixedWindow(_) => AlgorithmKind::FixedWindow,
        State::SlidingWindow(_) => AlgorithmKind::SlidingWindow,
        State::SlidingLog(_) => AlgorithmKind::SlidingLog,
        State::Quota(_) => AlgorithmKind::Quota,
    }
}

impl LocalCounters {
    /// A table in memory only (the `memory` store).
    pub fn in_memory(prefix: &str, clock: Arc<dyn Clock>) -> Self {
        Self::build(prefix, clock, None, usize::MAX)
    }

    /// A table written behind to `store`, and the flusher thread that writes
    /// it. [`Self::stop`] flushes a last time and stops it (it also stops,
    /// without flushing, when the last clone of the table is dropped).
    /// About `max_keys` keys stay in memory; beyond that, keys already in the
    /// file are dropped from memory and read back when next asked for.
    ///
    /// # Errors
    /// When the flusher thread cannot be started.
    pub fn over_file(
        prefix: &str,
        clock: Arc<dyn Clock>,
        store: EmbeddedStore,
        sync: Sync,
        max_keys: u64,
    ) -> Result<Self, StoreError> {
        let disk = Disk {
            store,
            sync,
            changed: AtomicU64::new(0),
            committed: tokio::sync::watch::Sender::new(0),
            wake: (Mutex::new(false), Condvar::new()),
            failed: Mutex::new(None),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            flushing: Mutex::new(()),
            stopped: std::sync::atomic::AtomicBool::new(false),
        };
        let shard_keys = usize::try_from(max_keys.div_ceil(SHARDS as u64)).unwrap_or(usize::MAX).max(16);
        let table = Self::build(prefix, clock, Some(disk), shard_keys);
        let weak = Arc::downgrade(&table.inner);
        let handle = std::thread::Builder::new()
            .name("leasehold-flusher".into())
            .spawn(move || flusher(&weak))
            .map_err(|e| StoreError::permanent("embedded", format!("cannot start the flusher thread: {e}")))?;
        *table.inner.flusher.lock().expect("flusher lock") = Some(handle);
        Ok(table)
    }

    fn build(prefix: &str, clock: Arc<dyn Clock>, disk: Option<Disk>, shard_keys: usize) -> Self {
        let shards = (0..SHARDS).map(|_| parking_lot::Mutex::new(Shard::default())).collect();
        let inner = Inner {
            shards,
            hasher: DefaultHashBuilder::default(),
            prefix: prefix.to_owned(),
            clock,
            disk,
            shard_keys,
            stop: std::sync::atomic::AtomicBool::new(false),
            flusher: Mutex::new(None),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Keys in memory (expired ones included until collected).
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| s.lock().map.len()).sum()
    }

    /// Whether no key is in memory.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records read from the file and written to it so far (0, 0 without a file).
    pub fn file_traffic(&self) -> (u64, u64) {
        self.inner.disk.as_ref().map_or((0, 0), |d| (d.reads.load(Ordering::Relaxed), d.writes.load(Ordering::Relaxed)))
    }

    /// The clock decisions are made with.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Applies `op` to `key`'s counter under `limit` in `scope`, with `alg`.
    /// With `sync = "always"`, returns once the change is in the file.
    ///
    /// # Errors
    /// Only with a file: it could not be read (for a key not in memory) or,
    /// under `always`, written.
    pub async fn apply(
        &self,
        scope: Scope<'_>,
        limit: &str,
        key: &str,
        alg: &Algorithm,
        op: Op,
    ) -> Result<Applied, StoreUnavailable> {
        let alg_ = *alg;
        self.change(scope, limit, key, alg, move |state, now| apply_op(&alg_, state, now, op)).await
    }

    /// Applies a caller's own `change` (see [`StateChange`]) to `key`'s
    /// counter under `limit` in `scope`, whose records `alg` reads.
    ///
    /// # Errors
    /// As [`Self::apply`].
    pub async fn change<F: StateChange>(
        &self,
        scope: Scope<'_>,
        limit: &str,
        key: &str,
        alg: &Algorithm,
        change: F,
    ) -> Result<F::Out, StoreUnavailable> {
        let (out, seq) = self.change_now(scope, limit, key, alg, change)?;
        if let (Some(seq), Some(disk)) = (seq, &self.inner.disk) {
            if disk.sync == Sync::Always {
                self.wait_committed(disk, seq).await?;
            }
        }
        Ok(out)
    }

    /// The change, in memory; with the sequence number of the change (if it
    /// changed anything and there is a file).
    fn change_now<F: StateChange>(
        &self,
        scope: Scope<'_>,
        limit: &str,
        key: &str,
        alg: &Algorithm,
        change: F,
    ) -> Result<(F::Out, Option<u64>), StoreUnavailable> {
        let hash = self.inner.hasher.hash_one((scope, limit, key));
        let is = |e: &Entry| e.hash == hash && key_is(&e.key, &self.inner.prefix, scope, limit, key);
        let now = self.inner.clock.now_ms();
        let mut guard = self.shard(hash).lock();
        let shard = &mut *guard;
        if shard.map.find(hash, is).is_none() {
            let storage_key = super::counter::storage_key(&self.inner.prefix, scope, limit, key).into_boxed_str();
            if let Some(entry) = self.read_through(storage_key, hash, alg)? {
                make_room(shard, self.inner.shard_keys);
                shard.map.insert_unique(hash, entry, |e| e.hash);
            }
        }
        let current = shard.map.find(hash, is);
        let state = current.filter(|e| e.expires_at_ms > now && kind_of(&e.state) == alg.kind()).map(|e| &e.state);
        let (out, next) = change(state, now);
        let Some(next) = next else { return Ok((out, None)) };
        let expires_at_ms = alg.expires_at_ms(&next);
        let version = current.map_or_else(|| crate::store::cas::fresh_version(now), |e| e.version + 1);
        let disk = self.inner.disk.as_ref();
        let was_dirty = match shard.map.find_mut(hash, is) {
            Some(e) => {
                e.state = next;
                e.version = version;
                e.expires_at_ms = expires_at_ms;
                std::mem::replace(&mut e.dirty, disk.is_some())
            }
            None => {
                make_room(shard, self.inner.shard_keys);
                let key = super::counter::storage_key(&self.inner.prefix, scope, limit, key).into_boxed_str();
                let entry = Entry { key, hash, state: next, version, expires_at_ms, dirty: disk.is_some() };
                shard.map.insert_unique(hash, entry, |e| e.hash);
                false
            }
        };
        let Some(disk) = disk else { return Ok((out, None)) };
        if !was_dirty {
            let key = shard.map.find(hash, is).map(|e| e.key.clone()).expect("just written");
            shard.dirty.push((hash, key));
        }
        let seq = disk.changed.fetch_add(1, Ordering::AcqRel) + 1;
        drop(guard);
        if disk.sync == Sync::Always {
            let (lock, cv) = &disk.wake;
            *lock.lock().expect("wake lock") = true;
            cv.notify_one();
        }
        Ok((out, Some(seq)))
    }

    fn shard(&self, hash: u64) -> &parking_lot::Mutex<Shard> {
        // The high bits: the table inside a shard indexes by the low ones.
        &self.inner.shards[(hash >> 58) as usize % SHARDS]
    }

    /// A key's record from the file, as an entry (`None`: absent, expired,
    /// unreadable for `alg`, or no file). An unreadable state is treated as
    /// absent (the next write replaces it), as in every store.
    fn read_through(
        &self,
        storage_key: Box<str>,
        hash: u64,
        alg: &Algorithm,
    ) -> Result<Option<Entry>, StoreUnavailable> {
        let Some(disk) = &self.inner.disk else { return Ok(None) };
        disk.reads.fetch_add(1, Ordering::Relaxed);
        let now = self.inner.clock.now_ms();
        let Some(record) = disk.store.read_now(&storage_key, now)? else { return Ok(None) };
        Ok(alg.parse_state(&record.state).ok().map(|state| Entry {
            key: storage_key,
            hash,
            state,
            version: record.version,
            expires_at_ms: record.expires_at_ms as f64,
            dirty: false,
        }))
    }

    async fn wait_committed(&self, disk: &Disk, seq: u64) -> Result<(), StoreUnavailable> {
        let mut rx = disk.committed.subscribe();
        loop {
            if *rx.borrow_and_update() >= seq {
                return Ok(());
            }
            if let Some(e) = disk.failed.lock().expect("failed lock").clone() {
                return Err(e.into());
            }
            if disk.stopped.load(Ordering::Acquire) {
                return Err(StoreError::transient("embedded", "the file writer has stopped").into());
            }
            if rx.changed().await.is_err() {
                return Err(StoreError::transient("embedded", "the flusher stopped").into());
            }
        }
    }

    /// Writes every dirty record to the file now (shutdown, tests).
    ///
    /// # Errors
    /// When the file cannot be written.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.flush_now())
            .await
            .map_err(|e| StoreError::transient("embedded", format!("flush task failed: {e}")))?
    }

    /// One flush: takes the dirty records of every shard and writes them in
    /// one transaction; then publishes how far the file is.
    fn flush_now(&self) -> Result<(), StoreError> {
        let Some(disk) = &self.inner.disk else { return Ok(()) };
        // One flush at a time (the flusher thread, and `flush` from outside).
        let _one = disk.flushing.lock().expect("flushing lock");
        let upto = disk.changed.load(Ordering::Acquire);
        let mut batch = Vec::new();
        for shard in self.inner.shards.iter() {
            let mut shard = shard.lock();
            let shard = &mut *shard;
            for (hash, key) in std::mem::take(&mut shard.dirty) {
                // Still dirty until its commit lands: an entry in flight is
                // never dropped from memory (eviction and expiry skip dirty
                // ones), so nothing reads the older file copy meanwhile.
                if let Some(e) = shard.map.find(hash, |e| e.hash == hash && e.key == key).filter(|e| e.dirty) {
                    batch.push((hash, key, e.state.clone(), e.version, e.expires_at_ms));
                }
            }
        }
        let records = batch
            .into_iter()
            .map(|(hash, key, state, version, expires)| {
                let record =
                    Record { state: state.to_json(), version, expires_at_ms: expires.max(0.0) as u64, write_id: 0 };
                (hash, key, record)
            })
            .collect::<Vec<_>>();
        let written = {
            let batch: Vec<(&str, &Record)> = records.iter().map(|(_, k, r)| (&**k, r)).collect();
            disk.store.write_all(&batch)
        };
        // Written: clean, unless changed since (then back on the dirty list).
        // Failed: all back on the dirty list, for the next flush.
        for (hash, key, record) in &records {
            let mut shard = self.shard(*hash).lock();
            let shard = &mut *shard;
            if let Some(e) = shard.map.find_mut(*hash, |e| e.hash == *hash && e.key == *key) {
                if written.is_ok() && e.version == record.version {
                    e.dirty = false;
                } else if e.dirty {
                    shard.dirty.push((*hash, key.clone()));
                }
            }
        }
        match written {
            Ok(()) => {
                disk.writes.fetch_add(records.len() as u64, Ordering::Relaxed);
                *disk.failed.lock().expect("failed lock") = None;
                disk.committed.send_if_modified(|c| {
                    let moved = upto > *c;
                    *c = (*c).max(upto);
                    moved
                });
                Ok(())
            }
            Err(e) => {
                *disk.failed.lock().expect("failed lock") = Some(e.clone());
                disk.committed.send_modify(|_| {});
                Err(e)
            }
        }
    }

    /// Drops expired keys that are not waiting to be written; returns how
    /// many. A background task calls it every few seconds.
    pub fn collect_expired(&self) -> usize {
        let now = self.inner.clock.now_ms();
        let mut n = 0;
        for shard in self.inner.shards.iter() {
            let mut shard = shard.lock();
            let before = shard.map.len();
            shard.map.retain(|e| e.dirty || e.expires_at_ms > now);
            n += before - shard.map.len();
            if shard.map.capacity() > 4 * shard.map.len().max(64) {
                shard.map.shrink_to_fit(|e| e.hash);
            }
        }
        n
    }

    /// Stops the flusher after a last flush, and waits for it (blocking:
    /// from async code use [`Self::close`]). Changes after this are not
    /// written.
    pub fn stop(&self) {
        self.inner.stop.store(true, Ordering::Release);
        if let Some(disk) = &self.inner.disk {
            let (lock, cv) = &disk.wake;
            *lock.lock().expect("wake lock") = true;
            cv.notify_one();
        }
        let handle = self.inner.flusher.lock().expect("flusher lock").take();
        if let Some(handle) = handle {
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }

    /// [`Self::stop`], off the async runtime's threads.
    pub async fn close(&self) {
        let this = self.clone();
        let _ = tokio::task::spawn_blocking(move || this.stop()).await;
    }
}

/// Makes room for one more key in a full shard: drops a tenth of its keys
/// that are in the file already (any of them: they read back in
/// microseconds). Keys not yet written (or being written) are never dropped.
fn make_room(shard: &mut Shard, shard_keys: usize) {
    if shard.map.len() < shard_keys {
        return;
    }
    let mut drop = shard_keys / 10 + 1;
    shard.map.retain(|e| {
        let keep = e.dirty || drop == 0;
        drop -= usize::from(!keep);
        keep
    });
}

/// Whether `stored` is the storage key `prefix:<space>:limit:key` (compared
/// piece by piece: no key is built to look one up).
fn key_is(stored: &str, prefix: &str, scope: Scope<'_>, limit: &str, key: &str) -> bool {
    let space = |rest: &str| -> Option<usize> {
        match scope {
            Scope::Host => rest.starts_with("l:").then_some(2),
            Scope::Adhoc => rest.starts_with("cl:").then_some(3),
            Scope::Tenant(t) => {
                (rest.starts_with("t.") && rest[2..].starts_with(t) && rest[2 + t.len()..].starts_with(':'))
                    .then_some(3 + t.len())
            }
        }
    };
    let Some(rest) = stored.strip_prefix(prefix).and_then(|r| r.strip_prefix(':')) else { return false };
    let Some(skip) = space(rest) else { return false };
    let rest = &rest[skip..];
    rest.len() == limit.len() + 1 + key.len()
        && rest.starts_with(limit)
        && rest.as_bytes()[limit.len()] == b':'
        && &rest[limit.len() + 1..] == key
}

/// The flusher thread: flushes on every wake (`always`) or every interval,
/// until the table is stopped (a last flush) or dropped.
fn flusher(table: &std::sync::Weak<Inner>) {
    loop {
        let Some(inner) = table.upgrade() else { return };
        let this = LocalCounters { inner };
        let Some(disk) = &this.inner.disk else { return };
        let (lock, cv) = &disk.wake;
        let wait = match disk.sync {
            Sync::Always => Duration::from_millis(50),
            Sync::Every(d) => d,
        };
        {
            let woken = lock.lock().expect("wake lock");
            let (mut woken, _) = cv.wait_timeout_while(woken, wait, |w| !*w).expect("wake lock");
            *woken = false;
        }
        let stopping = this.inner.stop.load(Ordering::Acquire);
        let flushed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| this.flush_now()));
        let panicked = match flushed {
            Ok(Ok(())) => false,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "writing counters to the file failed; retrying");
                if !stopping {
                    std::thread::sleep(Duration::from_millis(100));
                }
                false
            }
            Err(_) => {
                tracing::error!("the file writer panicked; decisions that wait for it fail from now on");
                true
            }
        };
        if stopping || panicked {
            // Whoever still waits (a change after the last flush) is told.
            disk.stopped.store(true, Ordering::Release);
            disk.committed.send_modify(|_| {});
            return;
        }
    }
}

/// Collects expired keys from `table` every [`crate::store::COLLECT_EVERY`],
/// until the table is dropped.
pub(super) fn spawn_collector(table: &LocalCounters) {
    let weak = Arc::downgrade(&table.inner);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(crate::store::COLLECT_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(inner) = weak.upgrade() else { return };
            let n = LocalCounters { inner }.collect_expired();
            if n > 0 {
                tracing::debug!(dropped = n, "expired keys dropped from memory");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_core::ManualClock;

    #[test]
    fn a_stored_key_matches_only_its_own_pieces() {
        let k = |scope, limit, key| super::super::counter::storage_key("p", scope, limit, key);
        let cases = [
            (Scope::Host, "api", "a:b"),
            (Scope::Adhoc, "api", "a"),
            (Scope::Tenant("t1"), "api", "a"),
            (Scope::Tenant("t"), "api", "1:api:a"),
            (Scope::Host, "a", "pi:k"),
            (Scope::Host, "api", ""),
        ];
        for (i, &(s1, l1, k1)) in cases.iter().enumerate() {
            for (j, &(s2, l2, k2)) in cases.iter().enumerate() {
                assert_eq!(key_is(&k(s1, l1, k1), "p", s2, l2, k2), i == j, "{i} against {j}");
            }
        }
        assert!(!key_is("q:l:api:a", "p", Scope::Host, "api", "a"), "another prefix");
    }

    const T0: f64 = 1_800_000_000_000.0;

    fn alg(json: &str) -> Algorithm {
        Algorithm::from_json(json).unwrap()
    }

    /// A table over the file at `path` with the test clock (`"p"` prefix).
    fn over(path: &std::path::Path, clock: &Arc<ManualClock>, sync: Sync, max_keys: u64) -> LocalCounters {
        LocalCounters::over_file("p", clock.clone(), EmbeddedStore::open(path).unwrap(), sync, max_keys).unwrap()
    }

    /// Written only when a test flushes.
    const LATER: Sync = Sync::Every(Duration::from_secs(10));

    async fn decide(t: &LocalCounters, alg: &Algorithm, key: &str, cost: u64) -> Applied {
        t.apply(Scope::Host, "api", key, alg, Op::Decide { cost }).await.unwrap()
    }

    #[tokio::test]
    async fn decisions_are_the_algorithms_own_exactly() {
        let clock = Arc::new(ManualClock::new(T0));
        let t = LocalCounters::in_memory("p", clock.clone());
        let a = alg(r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":5}"#);
        let mut state = None;
        for i in 0..40 {
            clock.advance(37.0);
            let got = decide(&t, &a, "k", 1 + i % 3).await;
            let (want, next) = apply_op(&a, state.as_ref(), clock.now_ms(), Op::Decide { cost: 1 + i % 3 });
            if let Some(next) = next {
                state = Some(next);
            }
            assert_eq!(got.decision, want.decision, "decision {i}");
        }
        assert!(t.inner.shards.iter().all(|s| s.lock().dirty.is_empty()), "memory only: nothing to write");
    }

    #[tokio::test]
    async fn a_restart_reads_the_counters_back_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.redb");
        let clock = Arc::new(ManualClock::new(T0));
        let a = alg(r#"{"algorithm":"fixed_window","limit":10,"window":"1h"}"#);
        {
            let t = over(&path, &clock, LATER, 1 << 20);
            for _ in 0..7 {
                assert!(decide(&t, &a, "k", 1).await.decision.allowed);
            }
            t.flush().await.unwrap();
            t.stop();
        }
        let t = over(&path, &clock, Sync::Always, 1 << 20);
        let d = decide(&t, &a, "k", 1).await.decision;
        assert_eq!(d.remaining, 2, "7 + 1 of 10 spent across the restart");
        assert!(!decide(&t, &a, "k", 3).await.decision.allowed);
        // A limit whose algorithm changed reads the old record as absent.
        let other = alg(r#"{"algorithm":"token_bucket","capacity":5,"refill_per_sec":1}"#);
        assert_eq!(decide(&t, &other, "k", 1).await.decision.remaining, 4);
        t.stop();
    }

    #[tokio::test]
    async fn memory_is_bounded_by_max_keys_and_dropped_keys_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let t = over(&dir.path().join("c.redb"), &clock, LATER, 64 * 16);
        let a = alg(r#"{"algorithm":"fixed_window","limit":10,"window":"1h"}"#);
        for k in 0..5_000 {
            assert_eq!(decide(&t, &a, &format!("k{k}"), 1).await.decision.remaining, 9);
            if k % 100 == 99 {
                t.flush().await.unwrap();
            }
        }
        // At most the bound, plus keys not yet written (never dropped).
        assert!(t.len() <= 64 * 16 + 100, "bounded: {} keys in memory", t.len());
        // Every key's count survived being dropped from memory, and reading
        // them all back keeps memory bounded too.
        for k in 0..5_000 {
            assert_eq!(decide(&t, &a, &format!("k{k}"), 1).await.decision.remaining, 8, "k{k}");
            if k % 100 == 99 {
                t.flush().await.unwrap();
            }
        }
        assert!(t.len() <= 64 * 16 + 100, "bounded after reading back: {} keys in memory", t.len());
        t.stop();
    }

    #[tokio::test]
    async fn a_decision_after_the_writer_stopped_fails_instead_of_waiting_forever() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let t = over(&dir.path().join("c.redb"), &clock, Sync::Always, 1 << 20);
        let a = alg(r#"{"algorithm":"fixed_window","limit":10,"window":"1h"}"#);
        assert!(decide(&t, &a, "k", 1).await.decision.allowed);
        t.stop();
        let late = t.apply(Scope::Host, "api", "k", &a, Op::Decide { cost: 1 });
        let late = tokio::time::timeout(Duration::from_secs(10), late).await.expect("answered, not left waiting");
        assert!(late.is_err(), "{late:?}");
    }

    #[tokio::test]
    async fn expired_keys_leave_memory_once_written() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(T0));
        let t = over(&dir.path().join("c.redb"), &clock, LATER, 1 << 20);
        let a = alg(r#"{"algorithm":"fixed_window","limit":10,"window":"1s"}"#);
        for k in 0..100 {
            decide(&t, &a, &format!("k{k}"), 1).await;
        }
        clock.advance(5_000.0);
        assert_eq!(t.collect_expired(), 0, "not written yet: kept");
        t.flush().await.unwrap();
        assert_eq!(t.collect_expired(), 100);
        assert!(t.is_empty());
        // Read through again: expired in the file too, so a fresh window.
        assert_eq!(decide(&t, &a, "k1", 1).await.decision.remaining, 9);
        t.stop();
    }
}
