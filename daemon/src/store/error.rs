//! How the store layer fails: a backend's own error ([`StoreError`]) and the
//! reason a caller could not be served ([`StoreUnavailable`]), which the
//! caller's fail policy turns into an answer.

use thiserror::Error;

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
    /// The failure concerns this one record (a key the store refuses, an
    /// unreadable item), not the store: it answered, so the breaker does not
    /// count it and fail-open does not apply.
    pub record: bool,
}

impl StoreError {
    /// A failure that may go away on retry.
    pub fn transient(backend: &'static str, message: impl Into<String>) -> Self {
        Self { backend, transient: true, message: message.into(), record: false }
    }

    /// A failure that needs an operator.
    pub fn permanent(backend: &'static str, message: impl Into<String>) -> Self {
        Self { backend, transient: false, message: message.into(), record: false }
    }

    /// A failure of one record that retrying will not fix (the store is healthy).
    pub fn record(backend: &'static str, message: impl Into<String>) -> Self {
        Self { backend, transient: false, message: message.into(), record: true }
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

    /// Whether the store itself is down: it failed (not just for one
    /// record), or the breaker is open after repeated failures or timeouts.
    /// Contention and a single slow call are not outages. Only an outage lets
    /// a `fail = "open"` limit admit without a grant.
    pub fn is_outage(&self) -> bool {
        matches!(self, Self::Backend(StoreError { record: false, .. }) | Self::CircuitOpen)
    }
}
