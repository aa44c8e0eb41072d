//! Helpers shared by the daemon's integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use leasehold::store::dynamodb::{DynamoConfig, DynamoStore};
use leasehold::store::Store;

/// The DynamoDB-API endpoint tests use (`tests/run.sh` starts DynamoDB Local
/// and sets it). `None` means "not available here": the test says so and
/// returns, unless `LEASEHOLD_REQUIRE_DYNAMODB=1`, where it fails.
pub fn dynamodb_endpoint() -> Option<String> {
    match std::env::var("LEASEHOLD_DYNAMODB_ENDPOINT").ok().filter(|e| !e.is_empty()) {
        Some(e) => Some(e),
        None if std::env::var("LEASEHOLD_REQUIRE_DYNAMODB").as_deref() == Ok("1") => {
            panic!("LEASEHOLD_REQUIRE_DYNAMODB=1 but LEASEHOLD_DYNAMODB_ENDPOINT is not set")
        }
        None => {
            eprintln!("skipped: set LEASEHOLD_DYNAMODB_ENDPOINT (tests/run.sh starts DynamoDB Local)");
            None
        }
    }
}

/// The table every DynamoDB test shares; tests isolate themselves by prefix.
pub const TABLE: &str = "leasehold-tests";

/// A store on the test table, created if needed.
pub async fn dynamodb_store(endpoint: &str) -> Arc<dyn Store> {
    let store = DynamoStore::connect(DynamoConfig {
        table: TABLE.into(),
        endpoint: Some(endpoint.into()),
        ..DynamoConfig::default()
    })
    .expect("client");
    store.create_table().await.expect("create test table");
    Arc::new(store)
}

/// A prefix no other test (or earlier run against the same server) uses.
pub fn unique_prefix(name: &str) -> String {
    format!("{name}-{}-{}", std::process::id(), fastrand::u64(..))
}
