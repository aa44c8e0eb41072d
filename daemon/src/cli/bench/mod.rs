//! The benchmarks behind `leasehold bench`: the stores (`store`) and the
//! lease cache under load ([`load`]), and the HTTP surface's baseline. Each prints its figures beside a
//! baseline measured in the same run.

mod http;
mod load;
mod store;

use thiserror::Error;

use crate::lease::CheckError;
use crate::store::{StoreError, StoreUnavailable};

pub use http::http_baseline;
pub use load::{lease_table, load, LoadFaults, LoadFigures, LoadRun, Prices};
pub use store::{hammer, store_scenario, store_table, StoreFigures};

/// Why a benchmark could not run to the end.
#[derive(Debug, Error)]
pub enum BenchError {
    /// The store could not be opened or set up.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store failed during the run.
    #[error("store unavailable during the run: {0}")]
    Unavailable(#[from] StoreUnavailable),
    /// The limit spec is not valid.
    #[error("invalid limit spec: {0}")]
    Spec(String),
    /// The limit is not known.
    #[error(transparent)]
    Check(#[from] CheckError),
    /// A benchmark task panicked.
    #[error("a benchmark task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}
