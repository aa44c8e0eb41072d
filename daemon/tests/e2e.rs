//! The `leasehold` binary end to end: a config file, both surfaces, SIGTERM,
//! and leases given back to the store on the way out.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use leasehold::store::embedded::EmbeddedStore;
use leasehold::store::Store;
use leasehold_core::{Algorithm, Clock, SystemClock};

const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_drive_both_surfaces_sigterm_and_leases_are_refunded() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.redb");
    let socket = dir.path().join("run/leasehold.sock");
    let config = dir.path().join("leasehold.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[store]
kind = "embedded"
path = "{}"

[server]
socket = "{}"
http = "127.0.0.1:0"

[limits.bucket]
algorithm = "token_bucket"
capacity = 100
refill_per_sec = 0.001
lease_max = 50
lease_ttl = "1h"
"#,
            data.display(),
            socket.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(BIN).args(["serve", "--config"]).arg(&config).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let http = loop {
        let line = lines.next().expect("daemon printed its addresses").unwrap();
        if let Some(rest) = line.trim().strip_prefix("http:") {
            let url = rest.split_whitespace().next().unwrap();
            break url.trim_start_matches("http://").parse::<std::net::SocketAddr>().unwrap();
        }
    };

    let mut c = redis::Client::open(format!("redis+unix://{}", socket.display()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for _ in 0..10 {
        let r: Vec<i64> = redis::cmd("THROTTLE").arg("bucket").arg("k").query_async(&mut c).await.unwrap();
        assert_eq!(r[0], 1);
    }
    for _ in 0..5 {
        let (status, _, body) = common::http(
            http,
            "POST",
            "/v1/check",
            &[("content-type", "application/json")],
            r#"{"limit":"bucket","key":"k"}"#,
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    let out = Command::new(BIN).args(["check", "bucket", "k", "--socket"]).arg(&socket).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("allowed"));
    drop(c);

    // On SIGTERM the counters are written to the file before exit.
    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let status = child.wait().unwrap();
    assert!(status.success(), "exit 0 on SIGTERM: {status}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l.contains("leased units given back")), "{rest:?}");
    assert!(!socket.exists(), "the socket file is removed");

    let store = EmbeddedStore::open(&data).unwrap();
    let record = store.get("leasehold:l:bucket:k").await.unwrap().unwrap();
    let alg = Algorithm::from_json(r#"{"algorithm":"token_bucket","capacity":100,"refill_per_sec":0.001}"#).unwrap();
    let state = alg.parse_state(&record.state).unwrap();
    assert_eq!(alg.available(Some(&state), SystemClock.now_ms()), 84, "16 spent, every unheld unit back");
}

/// Starts `leasehold serve` on an embedded file with `[store] sync = sync`,
/// admits `n` units of a 1-hour fixed window (each answered), waits `settle`,
/// SIGKILLs it, and returns how many units the file remembers as consumed.
async fn consumed_after_sigkill(sync: &str, n: u64, settle: std::time::Duration) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data.redb");
    let socket = dir.path().join("leasehold.sock");
    let config = dir.path().join("leasehold.toml");
    let spec = r#"{"algorithm":"fixed_window","limit":1000000,"window":"1h"}"#;
    std::fs::write(
        &config,
        format!(
            "[store]\nkind = \"embedded\"\npath = \"{}\"\nsync = \"{sync}\"\n\n[server]\nsocket = \"{}\"\nhttp = \"127.0.0.1:0\"\n\n\
             [limits.w]\nalgorithm = \"fixed_window\"\nlimit = 1000000\nwindow = \"1h\"\n",
            data.display(),
            socket.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(BIN).args(["serve", "--config"]).arg(&config).stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    while !lines.next().expect("daemon printed its addresses").unwrap().trim().starts_with("http:") {}
    let mut c = redis::Client::open(format!("redis+unix://{}", socket.display()))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    for _ in 0..n {
        let r: Vec<i64> = redis::cmd("THROTTLE").arg("w").arg("k").query_async(&mut c).await.unwrap();
        assert_eq!(r[0], 1);
    }
    tokio::time::sleep(settle).await;
    child.kill().unwrap(); // SIGKILL: no shutdown, no last flush
    child.wait().unwrap();
    let store = EmbeddedStore::open(&data).unwrap();
    let Some(record) = store.get("leasehold:l:w:k").await.unwrap() else { return 0 };
    let alg = Algorithm::from_json(spec).unwrap();
    let state = alg.parse_state(&record.state).unwrap();
    1_000_000 - alg.available(Some(&state), SystemClock.now_ms())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_always_loses_no_answered_decision_to_a_sigkill() {
    // Killed right after the last answer: every answered decision is in the file.
    assert_eq!(consumed_after_sigkill("always", 300, std::time::Duration::ZERO).await, 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_every_interval_loses_at_most_the_last_interval_to_a_sigkill() {
    // Killed well after an interval and a commit: everything is in the file.
    let settled = consumed_after_sigkill("50ms", 300, std::time::Duration::from_millis(1_000)).await;
    assert_eq!(settled, 300);
    // Killed within the interval of the last answers: the file may be behind,
    // but only by recent decisions, never ahead of what was answered.
    let fresh = consumed_after_sigkill("10s", 300, std::time::Duration::ZERO).await;
    assert!(fresh < 300, "a 10 s interval has not written the last decisions yet: {fresh}");
}

#[test]
fn an_invalid_config_stops_start_up_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("[limits.api]\nalgorithm = \"gcra\"\nlimit = 10\nperiod = \"0s\"\n", "limits.api.period"),
        ("[limits.api]\nalgorithm = \"nope\"\n", "limits.api.algorithm"),
        ("[store]\npaht = \"x\"\n", "paht"),
        ("[store]\nsync = \"sometimes\"\n", "store.sync"),
        ("[store]\nsync = \"1h\"\n", "store.sync"),
    ];
    for (toml, needle) in cases {
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, toml).unwrap();
        let out = Command::new(BIN).args(["serve", "--config"]).arg(&file).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(stderr.contains(needle), "{toml}: {stderr}");
    }
    let out = Command::new(BIN).args(["serve", "--config", "/nonexistent/x.toml"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/x.toml"));
    let out = Command::new(BIN).args(["check", "api", "k", "--socket", "/nonexistent/l.sock"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is `leasehold serve` running?"));
}
