//! Command-line tools beside `serve`: the socket client behind
//! `leasehold check`, and the benchmarks behind `leasehold bench`.
//! (`leasehold table create` is [`crate::store::dynamodb::DynamoStore::create_table`].)
//!
//! May use every layer below the surfaces.

pub mod bench;
pub mod client;
