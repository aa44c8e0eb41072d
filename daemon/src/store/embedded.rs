//! The embedded store: records in a redb file. The default store — a single
//! host needs nothing else, and counters survive a restart.
//!
//! Every `put_if` is one redb write transaction (read the version, compare,
//! insert, commit with `Durability::Immediate`), so it is atomic against every
//! other writer; redb allows one write transaction at a time and one process
//! per file. Calls run on tokio's blocking pool.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use super::{PutOutcome, Record, Store, StoreError};

const RECORDS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("records");
const NAME: &str = "embedded";

/// A redb-backed store.
#[derive(Clone)]
pub struct EmbeddedStore {
    db: Arc<Database>,
    path: PathBuf,
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
        Ok(Self { db: Arc::new(db), path })
    }

    /// The file the store lives in.
    pub fn path(&self) -> &Path {
        &self.path
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
        let key = key.to_owned();
        let bytes = serde_json::to_vec(record).map_err(|e| permanent("encode", e))?;
        self.blocking(move |db| {
            let txn = db.begin_write().map_err(|e| permanent("begin write", e))?;
            let outcome = {
                let mut table = txn.open_table(RECORDS).map_err(|e| permanent("open table", e))?;
                let current = table.get(key.as_str()).map_err(|e| permanent("read", e))?;
                let version = current.map(|v| decode(&key, v.value()).map(|r| r.version)).transpose()?;
                if version == expected_version {
                    table.insert(key.as_str(), bytes.as_slice()).map_err(|e| permanent("write", e))?;
                    PutOutcome::Written
                } else {
                    PutOutcome::Conflict
                }
            };
            match outcome {
                PutOutcome::Written => txn.commit().map_err(|e| permanent("commit", e))?,
                PutOutcome::Conflict => txn.abort().map_err(|e| permanent("abort", e))?,
            }
            Ok(outcome)
        })
        .await
    }
}
