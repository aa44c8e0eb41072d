//! # leasehold
//!
//! The daemon: a lease cache (L1) in front of a shared counter store (L2),
//! served over a Unix socket (RESP) and HTTP. This crate is the library the
//! `leasehold` binary is a thin shell around.
//!
//! - [`store`]: the stores (DynamoDB, embedded redb, memory) and the one
//!   compare-and-set loop above them.

pub mod app;
pub mod bench;
pub mod breaker;
pub mod client;
pub mod config;
pub mod dashboard;
pub mod events;
pub mod http;
pub mod lease;
pub mod limits;
pub mod metrics;
pub mod resp;
pub mod server;
pub mod store;
