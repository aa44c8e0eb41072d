//! `[store]`: which backend holds the records, and how to open it.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::cas::CasSettings;
use super::{dynamodb, embedded, memory, Store, StoreError};

/// Which backend holds the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoreKind {
    /// A redb file on this host (the default).
    #[default]
    Embedded,
    /// In memory, gone on exit (tests, benchmarks).
    Memory,
    /// A DynamoDB table shared by every host.
    Dynamodb,
}

/// The `[store]` section of the config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// The backend.
    pub kind: StoreKind,
    /// Embedded: the redb file (default `./leasehold.redb`).
    pub path: std::path::PathBuf,
    /// DynamoDB: the table.
    pub table: String,
    /// DynamoDB: endpoint URL (DynamoDB Local or any DynamoDB-API server).
    pub endpoint: Option<String>,
    /// DynamoDB: region.
    pub region: Option<String>,
    /// DynamoDB: the partition-key attribute.
    pub hash_key: String,
    /// Key namespace: records are stored under `prefix:limit:key`.
    pub prefix: String,
    /// Conflicting writes retried per apply before the store counts as unavailable.
    pub max_retries: u32,
    /// DynamoDB: write first and read only on conflict (default true); see
    /// [`CasSettings::write_first`].
    pub write_first: bool,
    /// Embedded: when the file copy of the counters is written: `"always"`
    /// (before each decision is answered, group-committed) or an interval
    /// such as `"100ms"` (the default; a crash forgets at most about that
    /// much). See [`crate::lease::local`].
    pub sync: String,
}

impl Default for StoreConfig {
    fn default() -> Self {
        let dynamo = dynamodb::DynamoConfig::default();
        Self {
            kind: StoreKind::Embedded,
            path: "leasehold.redb".into(),
            table: dynamo.table,
            endpoint: None,
            region: None,
            hash_key: dynamo.hash_key,
            prefix: CasSettings::default().prefix,
            max_retries: CasSettings::default().max_retries,
            write_first: true,
            sync: "100ms".into(),
        }
    }
}

/// A `--store` argument that is not one of the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("store {0:?} not understood: use memory, embedded[:PATH] or dynamodb:TABLE[@ENDPOINT]")]
pub struct StoreSpecError(pub String);

impl std::str::FromStr for StoreConfig {
    type Err = StoreSpecError;

    /// `memory`, `embedded`, `embedded:PATH`, `dynamodb:TABLE` or
    /// `dynamodb:TABLE@ENDPOINT` (e.g. `dynamodb:limits@http://127.0.0.1:8000`).
    fn from_str(s: &str) -> Result<Self, StoreSpecError> {
        let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
        let mut c = Self::default();
        match kind {
            "memory" if rest.is_empty() => c.kind = StoreKind::Memory,
            "embedded" => {
                c.kind = StoreKind::Embedded;
                if !rest.is_empty() {
                    c.path = rest.into();
                }
            }
            "dynamodb" if !rest.is_empty() => {
                c.kind = StoreKind::Dynamodb;
                let (table, endpoint) = rest.split_once('@').map_or((rest, None), |(t, e)| (t, Some(e)));
                c.table = table.into();
                c.endpoint = endpoint.map(str::to_owned);
            }
            _ => return Err(StoreSpecError(s.into())),
        }
        Ok(c)
    }
}

impl StoreConfig {
    /// Opens the configured backend.
    ///
    /// # Errors
    /// A permanent [`StoreError`] naming what is wrong (unopenable file,
    /// missing region or credentials).
    pub fn open(&self) -> Result<std::sync::Arc<dyn Store>, StoreError> {
        Ok(match self.kind {
            StoreKind::Memory => std::sync::Arc::new(memory::MemoryStore::new()),
            StoreKind::Embedded => std::sync::Arc::new(embedded::EmbeddedStore::open(&self.path)?),
            StoreKind::Dynamodb => std::sync::Arc::new(dynamodb::DynamoStore::connect(self.dynamo())?),
        })
    }

    /// The `sync` setting, parsed: `"always"`, or an interval from 1 ms to 10 s.
    ///
    /// # Errors
    /// Why the value is not accepted.
    pub fn sync_policy(&self) -> Result<crate::lease::local::Sync, String> {
        if self.sync == "always" {
            return Ok(crate::lease::local::Sync::Always);
        }
        let d = self
            .sync
            .parse::<leasehold_core::DurationMs>()
            .map_err(|e| format!("expected \"always\" or an interval like \"100ms\": {e}"))?;
        if !(1..=10_000).contains(&d.0) {
            return Err(format!("{:?} is out of range: an interval from 1ms to 10s", self.sync));
        }
        Ok(crate::lease::local::Sync::Every(std::time::Duration::from_millis(d.0)))
    }

    /// The DynamoDB part of the config.
    pub fn dynamo(&self) -> dynamodb::DynamoConfig {
        dynamodb::DynamoConfig {
            table: self.table.clone(),
            hash_key: self.hash_key.clone(),
            region: self.region.clone(),
            endpoint: self.endpoint.clone(),
            ..dynamodb::DynamoConfig::default()
        }
    }

    /// The CAS loop's settings from the config.
    pub fn cas_settings(&self) -> CasSettings {
        CasSettings {
            prefix: self.prefix.clone(),
            max_retries: self.max_retries,
            // A remote store: a right guess saves a round trip per write.
            write_first: self.write_first && self.kind == StoreKind::Dynamodb,
            ..CasSettings::default()
        }
    }
}
