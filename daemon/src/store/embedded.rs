//! The embedded store: records in a redb file. The default store — a single
//! host needs nothing else, and counters survive a restart.
//!
//! Writes are **group-committed**: one writer thread takes every `put_if`
//! waiting at that moment, applies them in order inside one redb write
//! transaction (each compares its key's version, then inserts, so each is
//! atomic against every other writer), and commits once with
//! `Durability::Immediate`. Each caller gets its own outcome after the fsync;
//! many concurrent writers cost one fsync, not one each. redb allows one
//! process per file. Reads run on tokio's blocking pool.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{PutOutcome, Record, Store, StoreError};

const RECORDS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("records");
const NAME: &str = "embedded";

/// Most writes committed in one transaction.
const MAX_GROUP: usize = 1024;

/// A write waiting for the writer thread.
struct PendingPut {
    key: String,
    bytes: Vec<u8>,
    expected: Option<u64>,
    reply: tokio::sync::oneshot::Sender<Result<PutOutcome, StoreError>>,
}

/// The writer thread; dropping the last store handle stops and joins it, so
/// the file is closed when the store is gone.
struct Writer {
    queue: Mutex<Option<mpsc::Sender<PendingPut>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.queue.lock().map(|mut q| q.take()).ok();
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = t.join();
        }
    }
}

/// A redb-backed store.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    path: PathBuf,
    writer: Arc<Writer>,
    /// Where the next pass of expired-record collection starts.
    cursor: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for EmbeddedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedStore").field("path", &self.path).finish()
    }
}

fn permanent(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::permanent(NAME, format!("{what}: {e}"))
}

impl EmbeddedStore {
    /// Opens (or creates) the store file at `path`, creating parent directories.
    ///
    /// # Errors
    /// A permanent [`StoreError`] naming the path when the file cannot be
    /// created, is locked by another process, or is not a redb file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| permanent(&format!("cannot create {}", dir.display()), e))?;
        }
        let db = Database::create(&path).map_err(|e| permanent(&format!("cannot open {}", path.display()), e))?;
        let txn = db.begin_write().map_err(|e| permanent("begin", e))?;
        txn.open_table(RECORDS).map_err(|e| permanent("create table", e))?;
        txn.commit().map_err(|e| permanent("commit", e))?;
        let db = Arc::new(db);
        let (queue, pending) = mpsc::channel();
        let thread = {
            let db = db.clone();
            std::thread::Builder::new()
                .name("leasehold-redb-writer".into())
                .spawn(move || write_groups(&db, &pending))
                .map_err(|e| permanent("cannot start the writer thread", e))?
        };
        let writer = Arc::new(Writer { queue: Mutex::new(Some(queue)), thread: Mutex::new(Some(thread)) });
        Ok(Self { db, path, writer, cursor: Arc::default() })
    }

    /// The file the store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads `key`'s record now, on the caller's thread (a memory-mapped
    /// B-tree lookup: microseconds). A record expired at `now_ms` reads as
    /// absent, and so does a corrupt one (logged): like every store's
    /// unreadable state, it is treated as fresh and the next write replaces it.
    ///
    /// # Errors
    /// When the file cannot be read.
    pub fn read_now(&self, key: &str, now_ms: f64) -> Result<Option<Record>, StoreError> {
        let txn = self.db.begin_read().map_err(|e| permanent("begin read", e))?;
        let table = txn.open_table(RECORDS).map_err(|e| permanent("open table", e))?;
        let Some(value) = table.get(key).map_err(|e| permanent("read", e))? else { return Ok(None) };
        match decode(key, value.value()) {
            Ok(r) => Ok(Some(r).filter(|r| !r.is_expired(now_ms))),
            Err(e) => {
                tracing::warn!(error = %e, "unreadable record; treating the key as fresh");
                Ok(None)
            }
        }
    }

    /// Writes `records` unconditionally in one durable transaction, on the
    /// caller's thread: for a writer that owns the file's contents (the
    /// single-host table, which writes its changes behind).
    ///
    /// # Errors
    /// When the transaction cannot be committed; nothing is written then.
    pub fn write_all(&self, records: &[(&str, &Record)]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let txn = self.db.begin_write().map_err(|e| permanent("begin write", e))?;
        {
            let mut table = txn.open_table(RECORDS).map_err(|e| permanent("open table", e))?;
            let mut bytes = Vec::new();
            for (key, record) in records {
                bytes.clear();
                serde_json::to_writer(&mut bytes, record).map_err(|e| permanent("encode", e))?;
                table.insert(*key, bytes.as_slice()).map_err(|e| permanent("write", e))?;
            }
        }
        txn.commit().map_err(|e| permanent("commit", e))
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db))
            .await
            .map_err(|e| StoreError::transient(NAME, format!("blocking task failed: {e}")))?
    }
}

fn decode(key: &str, bytes: &[u8]) -> Result<Record, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| permanent(&format!("record {key:?} is corrupt"), e))
}

/// The writer thread: commits every waiting write in one transaction.
fn write_groups(db: &Database, pending: &mpsc::Receiver<PendingPut>) {
    while let Ok(first) = pending.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match pending.try_recv() {
                Ok(p) => group.push(p),
                Err(_) => break,
            }
        }
        match commit_group(db, &group) {
            Ok(outcomes) => {
                for (p, o) in group.into_iter().zip(outcomes) {
                    let _ = p.reply.send(Ok(o));
                }
            }
            Err(e) => {
                for p in group {
                    let _ = p.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Applies each conditional write in order in one transaction; commits if any wrote.
fn commit_group(db: &Database, group: &[PendingPut]) -> Result<Vec<PutOutcome>, StoreError> {
    let txn = db.begin_write().map_err(|e| permanent("begin write", e))?;
    let mut outcomes = Vec::with_capacity(group.len());
    {
        let mut table = txn.open_table(RECORDS).map_err(|e| permanent("open table", e))?;
        for p in group {
            let current = table.get(p.key.as_str()).map_err(|e| permanent("read", e))?;
            let version = current.map(|v| decode(&p.key, v.value()).map(|r| r.version)).transpose()?;
            if version == p.expected {
                table.insert(p.key.as_str(), p.bytes.as_slice()).map_err(|e| permanent("write", e))?;
                outcomes.push(PutOutcome::Written);
            } else {
                outcomes.push(PutOutcome::Conflict);
            }
        }
    }
    if outcomes.contains(&PutOutcome::Written) {
        txn.commit().map_err(|e| permanent("commit", e))?;
    } else {
        txn.abort().map_err(|e| permanent("abort", e))?;
    }
    Ok(outcomes)
}

/// Deletes the expired records among at most `scan` records from `cursor`
/// on (wrapping to the start), in one transaction; returns how many it
/// deleted and where the next pass starts. A record is checked and deleted
/// inside the same transaction, so a concurrent write is never lost.
fn collect(
    db: &Database,
    now_ms: f64,
    cursor: Option<String>,
    scan: usize,
) -> Result<(usize, Option<String>), StoreError> {
    let txn = db.begin_write().map_err(|e| permanent("begin write", e))?;
    let (expired, next) = {
        let table = txn.open_table(RECORDS).map_err(|e| permanent("open table", e))?;
        let mut expired = Vec::new();
        let mut next = None;
        let range = match &cursor {
            Some(c) => table.range(c.as_str()..),
            None => table.range::<&str>(..),
        }
        .map_err(|e| permanent("scan", e))?;
        for (i, entry) in range.enumerate() {
            let (k, v) = entry.map_err(|e| permanent("scan", e))?;
            if i == scan {
                next = Some(k.value().to_string());
                break;
            }
            // An unreadable record is left for an operator, never deleted here.
            if decode(k.value(), v.value()).is_ok_and(|r| r.is_expired(now_ms)) {
                expired.push(k.value().to_string());
            }
        }
        (expired, next)
    };
    {
        let mut table = txn.open_table(RECORDS).map_err(|e| permanent("open table", e))?;
        for k in &expired {
            table.remove(k.as_str()).map_err(|e| permanent("delete", e))?;
        }
    }
    if expired.is_empty() {
        txn.abort().map_err(|e| permanent("abort", e))?;
    } else {
        txn.commit().map_err(|e| permanent("commit", e))?;
    }
    Ok((expired.len(), next))
}

fn read(db: &Database, key: &str) -> Result<Option<Record>, StoreError> {
    let txn = db.begin_read().map_err(|e| permanent("begin read", e))?;
    let table = txn.open_table(RECORDS).map_err(|e| permanent("open table", e))?;
    let value = table.get(key).map_err(|e| permanent("read", e))?;
    value.map(|v| decode(key, v.value())).transpose()
}

#[async_trait]
impl Store for EmbeddedStore {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |db| read(db, &key)).await
    }

    async fn put_if(
        &self,
        key: &str,
        record: &Record,
        expected_version: Option<u64>,
    ) -> Result<PutOutcome, StoreError> {
        let bytes = serde_json::to_vec(record).map_err(|e| permanent("encode", e))?;
        let (reply, outcome) = tokio::sync::oneshot::channel();
        let put = PendingPut { key: key.to_owned(), bytes, expected: expected_version, reply };
        let sent = self.writer.queue.lock().ok().and_then(|q| q.as_ref().map(|q| q.send(put).is_ok()));
        if sent != Some(true) {
            return Err(permanent("write", "the store is closed"));
        }
        outcome.await.map_err(|_| StoreError::transient(NAME, "the writer thread stopped"))?
    }

    async fn collect_expired(&self, now_ms: f64, scan: usize) -> Result<usize, StoreError> {
        let cursor = self.cursor.lock().ok().and_then(|c| c.clone());
        let (n, next) = self.blocking(move |db| collect(db, now_ms, cursor, scan)).await?;
        if let Ok(mut c) = self.cursor.lock() {
            *c = next;
        }
        Ok(n)
    }
}
