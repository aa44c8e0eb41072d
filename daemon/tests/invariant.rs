//! The invariant, multi-process, on DynamoDB Local: several `leasehold`
//! processes, each with its own lease cache, hammer one key. Admissions never
//! exceed what the shared counter can have granted (exactly, no epsilon), and
//! leases under-issue by little. Run by tests/run.sh against DynamoDB Local.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

/// The scenarios share two cores with DynamoDB Local: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

struct Fleet {
    /// Every admission's decision time (epoch ms), from every process.
    admissions: Vec<f64>,
    /// Store writes reported by the processes that finished.
    writes: u64,
}

fn spawn(endpoint: &str, prefix: &str, spec: &str, mode: &str, seconds: f64) -> Child {
    let store = format!("dynamodb:{}@{endpoint}", common::TABLE);
    Command::new(BIN)
        .args(["bench", "load", "--store", &store, "--prefix", prefix, "--spec", spec, "--mode", mode])
        .args(["--callers", "16", "--seconds", &seconds.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Runs `procs` processes for `seconds`; with `kill_after`, SIGKILLs the first
/// one that many seconds in.
fn fleet(endpoint: &str, spec: &str, mode: &str, procs: usize, seconds: f64, kill_after: Option<f64>) -> Fleet {
    let prefix = common::unique_prefix("fleet");
    let mut children: Vec<Child> = (0..procs).map(|_| spawn(endpoint, &prefix, spec, mode, seconds)).collect();
    let readers: Vec<_> = children
        .iter_mut()
        .map(|c| {
            let out = c.stdout.take().unwrap();
            std::thread::spawn(move || {
                let (mut admissions, mut writes, mut done) = (Vec::new(), 0, false);
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if let Some(t) = line.strip_prefix("A ") {
                        admissions.push(t.parse::<f64>().unwrap());
                    } else if let Some(summary) = line.strip_prefix("DONE ") {
                        done = true;
                        writes = summary.split("writes=").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
                    }
                }
                (admissions, writes, done)
            })
        })
        .collect();
    if let Some(after) = kill_after {
        std::thread::sleep(Duration::from_secs_f64(after));
        children[0].kill().unwrap(); // SIGKILL: no refunds, no goodbye
    }
    for (i, c) in children.iter_mut().enumerate() {
        let status = c.wait().unwrap();
        assert!(status.success() || (i == 0 && kill_after.is_some()), "process {i}: {status}");
    }
    let mut f = Fleet { admissions: Vec::new(), writes: 0 };
    for (i, r) in readers.into_iter().enumerate() {
        let (a, w, done) = r.join().unwrap();
        assert!(done || (i == 0 && kill_after.is_some()), "process {i} did not finish");
        f.admissions.extend(a);
        f.writes += w;
    }
    f
}

/// Token bucket: admitted ≤ capacity + refill × (last − first admission), and
/// at least `floor` of that.
fn assert_token_bucket(f: &Fleet, capacity: f64, per_sec: f64, floor: f64, what: &str) {
    let first = f.admissions.iter().copied().fold(f64::INFINITY, f64::min);
    let last = f.admissions.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let bound = capacity + per_sec * (last - first) / 1000.0;
    let admitted = f.admissions.len() as f64;
    eprintln!(
        "{what}: admitted {admitted} of a ceiling of {bound:.2} ({:.1}%), {} store writes",
        100.0 * admitted / bound,
        f.writes
    );
    assert!(admitted <= bound.floor(), "{what}: OVER-ISSUE: {admitted} > {bound}");
    assert!(admitted >= floor * bound, "{what}: UNDER-ISSUE: {admitted} < {floor} x {bound}");
}

const TOKEN_BUCKET: &str = r#"{"algorithm":"token_bucket","capacity":100,"refill_per_sec":50}"#;

#[test]
fn leased_fleet_never_over_issues_and_barely_under_issues() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ensure_table(&endpoint);
    let f = fleet(&endpoint, TOKEN_BUCKET, "leased", 4, 20.0, None);
    assert_token_bucket(&f, 100.0, 50.0, 0.9, "leased, 4 processes, 20 s");
}

#[test]
fn direct_fleet_is_the_exact_baseline() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ensure_table(&endpoint);
    let f = fleet(&endpoint, TOKEN_BUCKET, "direct", 4, 10.0, None);
    assert_token_bucket(&f, 100.0, 50.0, 0.9, "direct, 4 processes, 10 s");
}

#[test]
fn a_killed_process_loses_its_leases_but_nothing_is_over_issued() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ensure_table(&endpoint);
    let f = fleet(&endpoint, TOKEN_BUCKET, "leased", 4, 10.0, Some(4.0));
    assert_token_bucket(&f, 100.0, 50.0, 0.8, "leased, 4 processes, one SIGKILLed at 4 s");
}

#[test]
fn no_fixed_window_admits_more_than_its_limit_across_processes() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ensure_table(&endpoint);
    let spec = r#"{"algorithm":"fixed_window","limit":40,"window":"1s"}"#;
    let f = fleet(&endpoint, spec, "leased", 4, 10.0, None);
    let mut per_window = std::collections::BTreeMap::<i64, u64>::new();
    for t in &f.admissions {
        *per_window.entry((t / 1000.0).floor() as i64).or_default() += 1;
    }
    eprintln!("fixed window 40/s, 4 processes: admissions per window {:?}", per_window.values().collect::<Vec<_>>());
    assert!(per_window.len() >= 8, "ran across windows: {per_window:?}");
    for (w, n) in &per_window {
        assert!(*n <= 40, "window {w} admitted {n} > 40");
    }
    let full = per_window.values().filter(|n| **n >= 36).count();
    assert!(full + 2 >= per_window.len(), "all but the partial first/last windows nearly full: {per_window:?}");
}

fn ensure_table(endpoint: &str) {
    let out =
        Command::new(BIN).args(["table", "create", "--table", common::TABLE, "--endpoint", endpoint]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
