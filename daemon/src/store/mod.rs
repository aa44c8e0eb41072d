//! L2: the stores that hold the authoritative counters, and the one
//! compare-and-set loop ([`Cas`]) that turns any of them into a rate limiter.
//!
//! A [`Store`] knows only records: a strongly consistent `get` and a
//! conditional `put_if`. Everything else — lazy expiry, applying a core
//! transition, retrying on conflict, combining concurrent applies to one key —
//! is written once, in [`cas`], above every backend.

pub mod cas;
pub mod dynamodb;
pub mod embedded;
pub mod fault;
pub mod memory;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use cas::{Applied, Cas, CasOptions, CasStats, Op};

/// One counter as stored: the same attributes as ThrottleKit's DynamoStore,
/// so a table can be shared with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The algorithm's state as compact JSON.
    pub state: String,
    /// Compare-and-set token: 1 on first write, +1 on every write.
    pub version: u64,
    /// Epoch milliseconds after which the record reads as absent
    /// (authoritative; `expires_at`, in seconds, is derived for native TTLs).
    pub expires_at_ms: u64,
}

impl Record {
    /// `expires_at` in epoch seconds, rounded up: DynamoDB's TTL attribute.
    pub fn expires_at_secs(&self) -> u64 {
        self.expires_at_ms.div_ceil(1000)
    }

    /// Whether the record reads as absent at `now_ms` (lazy expiry).
    pub fn is_expired(&self, now_ms: f64) -> bool {
        (self.expires_at_ms as f64) <= now_ms
    }
}

/// What a conditional write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The record was written.
    Written,
    /// The condition failed: the record changed (or appeared, or vanished)
    /// since it was read. Nothing was written.
    Conflict,
}

/// A backend failure, classified where it crosses the store boundary.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("{backend} store error ({}): {message}", if *.transient { "transient" } else { "permanent" })]
pub struct StoreError {
    /// Which backend failed (`dynamodb`, `embedded`, `memory`, `fault`).
    pub backend: &'static str,
    /// Whether retrying later may succeed (throttling, timeouts, network)
    /// rather than needing an operator (missing table, bad credentials, corrupt file).
    pub transient: bool,
    /// What the backend said.
    pub message: String,
}

impl StoreError {
    /// A failure that may go away on retry.
    pub fn transient(backend: &'static str, message: impl Into<String>) -> Self {
        Self { backend, transient: true, message: message.into() }
    }

    /// A failure that needs an operator.
    pub fn permanent(backend: &'static str, message: impl Into<String>) -> Self {
        Self { backend, transient: false, message: message.into() }
    }
}

/// Why a decision could not be backed by the store. The limit's fail policy
/// decides what the caller answers; it is never "allowed" by itself.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum StoreUnavailable {
    /// The backend failed.
    #[error(transparent)]
    Backend(#[from] StoreError),
    /// Every retry hit a conflicting write from another process.
    #[error("gave up after {attempts} conflicting writes to one key")]
    Contention {
        /// Conditional writes attempted.
        attempts: u32,
    },
    /// The store did not answer within the per-call timeout.
    #[error("store did not answer within {0} ms")]
    Timeout(u64),
    /// The circuit breaker is open: the store failed repeatedly and is being rested.
    #[error("circuit breaker open after repeated store failures")]
    CircuitOpen,
}

impl StoreUnavailable {
    /// Whether waiting and retrying may help (everything but a permanent backend error).
    pub fn is_transient(&self) -> bool {
        !matches!(self, Self::Backend(StoreError { transient: false, .. }))
    }
}

/// A record store with a conditional write: the only thing a backend implements.
///
/// # Concurrency
/// `put_if` must be atomic with respect to every other writer of the same key,
/// in this process and in any other: it writes only if the stored version is
/// still `expected_version` (or, for `None`, if no record exists at all).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The backend's name, for errors and metrics.
    fn name(&self) -> &'static str;

    /// Reads a record, strongly consistent with every completed `put_if`.
    /// Expired records are returned as they are; the caller applies lazy expiry.
    async fn get(&self, key: &str) -> Result<Option<Record>, StoreError>;

    /// Writes `record` if the stored version equals `expected_version`
    /// (`None`: only if no record exists).
    async fn put_if(&self, key: &str, record: &Record, expected_version: Option<u64>)
        -> Result<PutOutcome, StoreError>;

    /// Whether the store can be reached now (for readiness checks).
    async fn ping(&self) -> Result<(), StoreError> {
        self.get("leasehold:ping").await.map(|_| ())
    }
}

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
            prefix: CasOptions::default().prefix,
            max_retries: CasOptions::default().max_retries,
        }
    }
}

impl std::str::FromStr for StoreConfig {
    type Err = String;

    /// `memory`, `embedded`, `embedded:PATH`, `dynamodb:TABLE` or
    /// `dynamodb:TABLE@ENDPOINT` (e.g. `dynamodb:limits@http://127.0.0.1:8000`).
    fn from_str(s: &str) -> Result<Self, String> {
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
            _ => {
                return Err(format!(
                    "store {s:?} not understood: use memory, embedded[:PATH] or dynamodb:TABLE[@ENDPOINT]"
                ))
            }
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

    /// CAS-loop options from the config.
    pub fn cas_options(&self) -> CasOptions {
        CasOptions { prefix: self.prefix.clone(), max_retries: self.max_retries, ..CasOptions::default() }
    }
}
