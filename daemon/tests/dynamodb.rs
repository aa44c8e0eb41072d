//! DynamoDB-only behaviour, against a real DynamoDB-API server (DynamoDB Local,
//! started by tests/run.sh): the raw item attributes, `table create`, and no
//! lost update when several OS processes race through the CAS loop.

mod common;

use std::process::Command;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use leasehold::lease::counter::{Counters, Op};
use leasehold::store::{Cas, CasSettings};
use leasehold_core::{Algorithm, Clock, State, SystemClock};

const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

async fn raw_client(endpoint: &str) -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
        .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new("local", "local", None, None, "test"))
        .endpoint_url(endpoint)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}

#[tokio::test]
async fn items_carry_throttlekit_compatible_attributes() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let store = common::dynamodb_store(&endpoint).await;
    let prefix = common::unique_prefix("attrs");
    let cas = Counters::new(Cas::new(
        store,
        Arc::new(SystemClock),
        CasSettings { prefix: prefix.clone(), ..CasSettings::default() },
    ));
    let alg = Algorithm::from_json(r#"{"algorithm":"gcra","limit":10,"period":"10s"}"#).unwrap();
    let pk = format!("{prefix}:l:api:user-1");
    let read = || async {
        raw_client(&endpoint)
            .await
            .get_item()
            .table_name(common::TABLE)
            .key("pk", AttributeValue::S(pk.clone()))
            .consistent_read(true)
            .send()
            .await
            .unwrap()
            .item
            .expect("item written")
    };
    let version = |item: &std::collections::HashMap<String, AttributeValue>| {
        item["version"].as_n().unwrap().parse::<u64>().unwrap()
    };
    let before = SystemClock.now_ms();
    cas.apply("api", "user-1", &alg, Op::Decide { cost: 3 }).await.unwrap();
    let first = version(&read().await);
    assert!(first >= leasehold::store::cas::fresh_version(before), "a new record's version is not reused: {first}");
    cas.apply("api", "user-1", &alg, Op::Decide { cost: 1 }).await.unwrap();
    let item = read().await;
    let n = |k: &str| item[k].as_n().unwrap().parse::<u64>().unwrap();
    assert_eq!(item["pk"].as_s().unwrap(), &pk);
    assert_eq!(n("version"), first + 1, "one version bump per write");
    assert!(n("wid") > 0, "each write carries its write id");
    assert_eq!(n("expires_at"), n("expires_at_ms").div_ceil(1000), "TTL seconds derive from the ms deadline");
    let state = alg.parse_state(item["state"].as_s().unwrap()).unwrap();
    assert!(matches!(state, State::Gcra(_)));
    assert_eq!(n("expires_at_ms") as f64, alg.expires_at_ms(&state));
    assert!(n("expires_at_ms") as f64 > SystemClock.now_ms());
}

#[test]
fn table_create_is_idempotent_and_explains_an_unreachable_endpoint() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let table = common::unique_prefix("created");
    for expected in ["created table", "already exists"] {
        let out =
            Command::new(BIN).args(["table", "create", "--table", &table, "--endpoint", &endpoint]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(expected), "{stdout}");
        assert!(stdout.contains("TTL on expires_at"), "{stdout}");
    }
    let out = Command::new(BIN)
        .args(["table", "create", "--table", "t", "--endpoint", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("cannot reach DynamoDB at http://127.0.0.1:9"), "{stderr}");
}

#[test]
fn table_create_without_credentials_says_which_are_missing() {
    let out = Command::new(BIN)
        .args(["table", "create", "--table", "t", "--region", "eu-west-1"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("no AWS credentials") && stderr.contains("AWS_ACCESS_KEY_ID"), "{stderr}");
}

/// M processes x N tasks x K applies of cost 1 on one key: the counter ends at
/// exactly M x N x K. Each process combines its own tasks, so the writes race
/// across processes through DynamoDB's conditional writes.
#[tokio::test]
async fn no_update_is_lost_or_doubled_across_processes() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let store = common::dynamodb_store(&endpoint).await;
    let prefix = common::unique_prefix("lost");
    let (m, n, k) = (4, 8, 10);
    let spec = format!("dynamodb:{}@{endpoint}", common::TABLE);
    let children: Vec<_> = (0..m)
        .map(|_| {
            Command::new(BIN)
                .args(["bench", "hammer", "--store", &spec, "--prefix", &prefix, "--key", "hot"])
                .args(["--tasks", &n.to_string(), "--ops", &k.to_string()])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut conflicts = 0u64;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        assert!(stdout.contains(&format!("applied={} failed=0", n * k)), "{stdout}");
        conflicts += stdout.split("conflicts=").nth(1).unwrap().trim().parse::<u64>().unwrap();
    }
    let record = store.get(&format!("{prefix}:l:hammer:hot")).await.unwrap().unwrap();
    let alg = Algorithm::from_json(r#"{"algorithm":"fixed_window","limit":9007199254740991,"window":"1d"}"#).unwrap();
    match alg.parse_state(&record.state).unwrap() {
        State::FixedWindow(w) => assert_eq!(w.n, (m * n * k) as u64, "exactly M x N x K applied"),
        other => panic!("{other:?}"),
    }
    eprintln!("{} applies, {} writes (version), {conflicts} cross-process conflicts", m * n * k, record.version);
}

/// Write first, read only on conflict (issue #14), against `store`: a cold
/// key and a key this process wrote last cost one write and no read; a key
/// another process changed costs one failed write (which returns the item)
/// and one write, still no read; an answer that writes nothing (a denial)
/// is read, never trusted to a guess.
pub async fn write_first_costs_one_round_trip_when_the_guess_is_right(
    store: Arc<dyn leasehold::store::Store>,
    prefix: &str,
) {
    let settings = CasSettings { prefix: prefix.to_owned(), write_first: true, ..CasSettings::default() };
    let ours = Counters::new(Cas::new(store.clone(), Arc::new(SystemClock), settings.clone()));
    let theirs = Counters::new(Cas::new(store, Arc::new(SystemClock), settings));
    let alg = Algorithm::from_json(r#"{"algorithm":"fixed_window","limit":5,"window":"1h"}"#).unwrap();
    let decide = |c: &Counters| {
        let c = c.clone();
        async move { c.apply("api", "k", &alg, Op::Decide { cost: 1 }).await.unwrap().decision }
    };
    let traffic = |c: &Counters| {
        let s = c.cas().stats().snapshot();
        (s.reads, s.writes)
    };
    assert_eq!(decide(&ours).await.remaining, 4);
    assert_eq!(traffic(&ours), (0, 1), "a cold key: one write, no read");
    assert_eq!(decide(&ours).await.remaining, 3);
    assert_eq!(traffic(&ours), (0, 2), "our own last write is the right guess");
    assert_eq!(decide(&theirs).await.remaining, 2, "the other process's guess (absent) was wrong");
    assert_eq!(traffic(&theirs), (0, 2), "a failed write that returned the item, then the write");
    assert_eq!(decide(&ours).await.remaining, 1);
    assert_eq!(traffic(&ours), (0, 4), "our guess was stale: a failed write, then the write");
    assert_eq!(ours.cas().stats().snapshot().guessed_wrong, 1);
    // Another process writes this key: for a while it is read first.
    assert_eq!(decide(&ours).await.remaining, 0);
    assert_eq!(traffic(&ours), (1, 5), "a contended key is read, then written");
    // Denied: nothing to write.
    let fresh = Counters::new(Cas::new(
        ours.cas().store().clone(),
        Arc::new(SystemClock),
        CasSettings { prefix: prefix.to_owned(), write_first: true, ..CasSettings::default() },
    ));
    let denied = decide(&fresh).await;
    assert!(!denied.allowed && denied.remaining == 0, "{denied:?}");
    assert_eq!(traffic(&fresh), (0, 1), "guessed absent and allowed; the write failed and returned the item: denied");
    let again = decide(&fresh).await;
    assert!(!again.allowed && again.remaining == 0, "{again:?}");
    assert_eq!(traffic(&fresh), (1, 1), "a denial on a guessed record writes nothing, so it is read, not trusted");
}

#[tokio::test]
async fn write_first_on_dynamodb() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let store = common::dynamodb_store(&endpoint).await;
    write_first_costs_one_round_trip_when_the_guess_is_right(store, &common::unique_prefix("write-first")).await;
}

#[tokio::test]
async fn write_first_on_the_memory_store() {
    let store = Arc::new(leasehold::store::memory::MemoryStore::new());
    write_first_costs_one_round_trip_when_the_guess_is_right(store, "leasehold").await;
}

#[test]
fn the_cost_report_runs_and_leases_save_store_calls() {
    // A check that the report works (tests/run.sh runs it on a short
    // setting; `leasehold bench lease` runs it in full by hand), not a timing.
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let out = Command::new(BIN)
        .args(["bench", "lease", "--seconds", "0.3", "--store"])
        .arg(format!("dynamodb:leasehold-bench@{endpoint}"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| workload"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 12, "4 workloads × naive, direct, leased: {stdout}");
    let trips = |workload: &str, design: &str| -> f64 {
        let row = rows.iter().find(|r| r[0] == workload && r[1] == design).unwrap_or_else(|| panic!("{stdout}"));
        row[5].parse().unwrap()
    };
    assert!(trips("hot key under its limit", "leased") < 0.1, "{stdout}");
    assert!(trips("hot key under its limit", "leased") < trips("hot key under its limit", "direct"), "{stdout}");
    assert!(stdout.contains("$ per million decisions"), "{stdout}");
}
