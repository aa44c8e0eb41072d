//! The invariant, multi-process, on DynamoDB Local: several `leasehold`
//! processes, each with its own lease cache, hammer one key. In **every
//! interval** between two admissions, admissions never exceed the
//! algorithm's own bound (buckets and GCRA: burst + rate × interval; windows:
//! the limit per window; sliding window: its weighted count), with no epsilon
//! — also through a SIGKILL, a store outage, writes whose replies are lost,
//! and a slow store. Leases under-issue by little. Each test prints the worst
//! excess it found (always 0). Run by tests/run.sh against DynamoDB Local.

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

fn spawn(endpoint: &str, prefix: &str, spec: &str, mode: &str, seconds: f64, faults: &[&str]) -> Child {
    let store = format!("dynamodb:{}@{endpoint}", common::TABLE);
    Command::new(BIN)
        .args(["bench", "load", "--store", &store, "--prefix", prefix, "--spec", spec, "--mode", mode])
        .args(["--callers", "16", "--seconds", &seconds.to_string()])
        .args(faults)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Runs `procs` processes for `seconds`; with `kill_after`, SIGKILLs the first
/// one that many seconds in.
fn fleet(endpoint: &str, spec: &str, mode: &str, procs: usize, seconds: f64, kill_after: Option<f64>) -> Fleet {
    fleet_with(endpoint, spec, mode, procs, seconds, kill_after, &[])
}

/// [`fleet`], with `faults` (flags of `bench load`) injected into every process's store.
fn fleet_with(
    endpoint: &str,
    spec: &str,
    mode: &str,
    procs: usize,
    seconds: f64,
    kill_after: Option<f64>,
    faults: &[&str],
) -> Fleet {
    let prefix = common::unique_prefix("fleet");
    let mut children: Vec<Child> = (0..procs).map(|_| spawn(endpoint, &prefix, spec, mode, seconds, faults)).collect();
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

/// The largest excess, in units, of admissions in any interval `[a, b]`
/// between two admissions over `burst + rate × (b − a)` (`times` in epoch ms).
/// Linear: for each `b`, the worst `a` is the best prefix of `rate·tᵢ − i`.
fn worst_excess(times: &[f64], burst: f64, rate_per_ms: f64) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let (mut best_start, mut worst) = (f64::NEG_INFINITY, 0.0f64);
    for (j, &t) in sorted.iter().enumerate() {
        best_start = best_start.max(rate_per_ms * t - j as f64);
        worst = worst.max((j as f64 + 1.0) - rate_per_ms * t + best_start - burst);
    }
    // Float noise of a whole unit's arithmetic, not a unit.
    (worst - 1e-6).max(0.0).ceil()
}

/// A refill limit (token or leaky bucket, GCRA): no interval over its bound,
/// and over the whole run at least `floor` of it admitted.
fn assert_refill(f: &Fleet, burst: f64, per_sec: f64, floor: f64, what: &str) {
    let first = f.admissions.iter().copied().fold(f64::INFINITY, f64::min);
    let last = f.admissions.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let bound = burst + per_sec * (last - first) / 1000.0;
    let admitted = f.admissions.len() as f64;
    let excess = worst_excess(&f.admissions, burst, per_sec / 1000.0);
    eprintln!(
        "{what}: admitted {admitted} of a ceiling of {bound:.2} ({:.1}%), worst interval excess {excess}, {} store writes",
        100.0 * admitted / bound,
        f.writes
    );
    assert_eq!(excess, 0.0, "{what}: OVER-ISSUE in some interval, by {excess} units");
    assert!(admitted >= floor * bound, "{what}: UNDER-ISSUE: {admitted} < {floor} x {bound}");
}

fn assert_token_bucket(f: &Fleet, capacity: f64, per_sec: f64, floor: f64, what: &str) {
    assert_refill(f, capacity, per_sec, floor, what);
}

#[test]
fn worst_excess_sees_a_burst_inside_a_long_run() {
    let mut times: Vec<f64> = (0..100).map(|i| f64::from(i) * 20.0).collect(); // 50/s for 2 s
    assert_eq!(worst_excess(&times, 1.0, 0.05), 0.0);
    times.extend([1_000.0, 1_000.0, 1_000.0]);
    assert_eq!(worst_excess(&times, 1.0, 0.05), 3.0, "three extra at one instant");
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

const GCRA: &str = r#"{"algorithm":"gcra","limit":50,"period":"1s","burst":20}"#;

#[test]
fn leased_gcra_and_leaky_bucket_hold_every_interval() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ensure_table(&endpoint);
    let f = fleet(&endpoint, GCRA, "leased", 4, 6.0, None);
    assert_refill(&f, 20.0, 50.0, 0.85, "gcra 50/s burst 20, leased, 4 processes");
    let leaky = r#"{"algorithm":"leaky_bucket","capacity":30,"leak_per_sec":40}"#;
    let f = fleet(&endpoint, leaky, "leased", 4, 6.0, None);
    assert_refill(&f, 30.0, 40.0, 0.85, "leaky bucket 30 at 40/s, leased, 4 processes");
}

#[test]
fn lost_replies_and_a_slow_store_never_over_issue() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ensure_table(&endpoint);
    let faults = ["--lost-replies", "0.1", "--slow-ms", "15"];
    let f = fleet_with(&endpoint, GCRA, "leased", 4, 6.0, None, &faults);
    assert_refill(&f, 20.0, 50.0, 0.5, "gcra, 10% of writes lose their reply, +15 ms per call");
    let f = fleet_with(&endpoint, TOKEN_BUCKET, "leased", 4, 6.0, None, &faults);
    assert_refill(&f, 100.0, 50.0, 0.5, "token bucket, 10% of writes lose their reply, +15 ms per call");
}

#[test]
fn a_store_outage_never_over_issues() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ensure_table(&endpoint);
    let faults = ["--down-after", "2", "--down-for", "2"];
    let f = fleet_with(&endpoint, TOKEN_BUCKET, "leased", 4, 7.0, None, &faults);
    // Fail closed while down: the floor is what the up time allows.
    assert_refill(&f, 100.0, 50.0, 0.4, "token bucket, store down 2 s of 7");
}

#[test]
fn leased_windows_hold_their_limit_in_every_window() {
    let Some(endpoint) = common::dynamodb_endpoint() else { return };
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    ensure_table(&endpoint);
    let quota = r#"{"algorithm":"quota","limit":30,"window":"1s"}"#;
    let f = fleet(&endpoint, quota, "leased", 4, 5.0, None);
    let mut per_window = std::collections::BTreeMap::<i64, u64>::new();
    for t in &f.admissions {
        *per_window.entry((t / 1000.0).floor() as i64).or_default() += 1;
    }
    let worst = per_window.values().map(|n| n.saturating_sub(30)).max().unwrap_or(0);
    eprintln!(
        "quota 30/s, 4 processes: per window {:?}, worst excess {worst}",
        per_window.values().collect::<Vec<_>>()
    );
    assert_eq!(worst, 0);
    // Sliding window: at every admission, the previous window's admissions
    // weighted by how much of it still overlaps, plus this window's so far,
    // stay within the limit (its own definition).
    let sliding = r#"{"algorithm":"sliding_window","limit":30,"window":"1s"}"#;
    let f = fleet(&endpoint, sliding, "leased", 4, 5.0, None);
    let mut times = f.admissions.clone();
    times.sort_by(f64::total_cmp);
    let mut per_window = std::collections::BTreeMap::<i64, f64>::new();
    let mut worst = 0.0f64;
    for t in &times {
        let w = (t / 1000.0).floor() as i64;
        *per_window.entry(w).or_default() += 1.0;
        let prev = per_window.get(&(w - 1)).copied().unwrap_or(0.0);
        let frac = (t - w as f64 * 1000.0) / 1000.0;
        worst = worst.max(prev * (1.0 - frac) + per_window[&w] - 30.0);
    }
    let worst = (worst - 1e-6).max(0.0).ceil();
    eprintln!("sliding window 30/s, 4 processes: {} admitted, worst weighted excess {worst}", times.len());
    assert_eq!(worst, 0.0);
}
