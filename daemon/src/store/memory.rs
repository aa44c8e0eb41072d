//! An in-process store: for tests, benchmarks and the bindings. Not shared
//! between processes and gone on exit.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{PutOutcome, Record, Store, StoreError};

/// Records in a `HashMap` behind a `std::sync::Mutex` (never held across an
/// `.await`: every operation is a few map operations).
#[derive(Debug, Default)]
pub struct MemoryStore {
    records: Mutex<HashMap<String, Record>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many records are held (expired ones included until overwritten).
    pub fn len(&self) -> usize {
        self.records.lock().expect("memory store lock").len()
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl Store for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        Ok(self.records.lock().expect("memory store lock").get(key).cloned())
    }

    async fn put_if(
        &self,
        key: &str,
        record: &Record,
        expected_version: Option<u64>,
    ) -> Result<PutOutcome, StoreError> {
        let mut records = self.records.lock().expect("memory store lock");
        if records.get(key).map(|r| r.version) != expected_version {
            return Ok(PutOutcome::Conflict);
        }
        records.insert(key.to_owned(), record.clone());
        Ok(PutOutcome::Written)
    }

    async fn put_if_or_current(
        &self,
        key: &str,
        record: &Record,
        expected_version: Option<u64>,
    ) -> Result<(PutOutcome, Option<Option<Record>>), StoreError> {
        let mut records = self.records.lock().expect("memory store lock");
        let current = records.get(key);
        if current.map(|r| r.version) != expected_version {
            return Ok((PutOutcome::Conflict, Some(current.cloned())));
        }
        records.insert(key.to_owned(), record.clone());
        Ok((PutOutcome::Written, None))
    }

    async fn collect_expired(&self, now_ms: f64, scan: usize) -> Result<usize, StoreError> {
        let mut records = self.records.lock().expect("memory store lock");
        let expired: Vec<String> =
            records.iter().filter(|(_, r)| r.is_expired(now_ms)).take(scan).map(|(k, _)| k.clone()).collect();
        for k in &expired {
            records.remove(k);
        }
        Ok(expired.len())
    }
}
