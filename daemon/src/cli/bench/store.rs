//! `leasehold bench store`: CAS applies per second for each backend, on
//! distinct keys and on one hot key, with 1 and 16 concurrent callers.
//! `leasehold bench hammer`: one process's share of a multi-process
//! lost-update test.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_core::{Algorithm, SystemClock};

use super::BenchError;
use crate::lease::counter::{Counters, Op};
use crate::store::{Cas, StoreConfig};

/// A limit no benchmark reaches: every apply is a write.
fn unlimited() -> Algorithm {
    Algorithm::from_json(r#"{"algorithm":"fixed_window","limit":9007199254740991,"window":"1d"}"#).expect("valid limit")
}

/// One measured scenario.
#[derive(Debug, Clone)]
pub struct StoreFigures {
    /// Backend name.
    pub backend: String,
    /// `distinct` or `hot`.
    pub keys: &'static str,
    /// Concurrent callers.
    pub callers: usize,
    /// Applies per second.
    pub applies_per_sec: f64,
    /// Store writes per apply (below 1 when combining merges applies).
    pub writes_per_apply: f64,
    /// Conflicts per apply.
    pub conflicts_per_apply: f64,
}

/// Runs `callers` tasks applying `cost = 1` for `duration`, on one hot key or
/// on a fresh key per apply.
///
/// # Errors
/// The store's error if it cannot be opened or an apply fails.
pub async fn store_scenario(
    config: &StoreConfig,
    hot: bool,
    callers: usize,
    duration: Duration,
) -> Result<StoreFigures, BenchError> {
    let store = config.open()?;
    let mut options = config.cas_settings();
    options.prefix = format!("{}-bench-{}", options.prefix, fastrand::u64(..));
    let cas = Counters::new(Cas::new(store.clone(), Arc::new(SystemClock), options));
    let alg = unlimited();
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|t| {
            let (cas, done) = (cas.clone(), done.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                while start.elapsed() < duration {
                    let key = if hot { "hot".to_string() } else { format!("k{t}-{i}") };
                    cas.apply("bench", &key, &alg, Op::Decide { cost: 1 }).await?;
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
                Ok::<_, BenchError>(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    let secs = start.elapsed().as_secs_f64();
    let n = done.load(Ordering::Relaxed).max(1) as f64;
    let s = cas.cas().stats().snapshot();
    Ok(StoreFigures {
        backend: store.name().into(),
        keys: if hot { "hot" } else { "distinct" },
        callers,
        applies_per_sec: n / secs,
        writes_per_apply: s.writes as f64 / n,
        conflicts_per_apply: s.conflicts as f64 / n,
    })
}

/// Runs every scenario against each store and prints one table.
///
/// # Errors
/// As [`store_scenario`].
pub async fn store_table(configs: &[StoreConfig], duration: Duration) -> Result<Vec<StoreFigures>, BenchError> {
    let mut rows = Vec::new();
    println!(
        "{:<10} {:<9} {:>7} {:>12} {:>13} {:>16}",
        "backend", "keys", "callers", "applies/s", "writes/apply", "conflicts/apply"
    );
    for config in configs {
        for hot in [false, true] {
            for callers in [1, 16] {
                let f = store_scenario(config, hot, callers, duration).await?;
                println!(
                    "{:<10} {:<9} {:>7} {:>12.0} {:>13.3} {:>16.4}",
                    f.backend, f.keys, f.callers, f.applies_per_sec, f.writes_per_apply, f.conflicts_per_apply
                );
                rows.push(f);
            }
        }
    }
    Ok(rows)
}

/// Applies `cost = 1` to one key `ops` times from each of `tasks` tasks, all
/// through the CAS loop, and prints `applied=N failed=M`.
///
/// # Errors
/// If the store cannot be opened.
pub async fn hammer(config: &StoreConfig, key: &str, tasks: usize, ops: usize) -> Result<(u64, u64), BenchError> {
    let cas = Counters::new(Cas::new(config.open()?, Arc::new(SystemClock), config.cas_settings()));
    let alg = unlimited();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (cas, key) = (cas.clone(), key.to_string());
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0u64, 0u64);
                for _ in 0..ops {
                    match cas.apply("hammer", &key, &alg, Op::Decide { cost: 1 }).await {
                        Ok(a) if a.decision.allowed => ok += 1,
                        _ => failed += 1,
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    let (mut ok, mut failed) = (0, 0);
    for h in handles {
        let (o, f) = h.await?;
        ok += o;
        failed += f;
    }
    let s = cas.cas().stats().snapshot();
    println!("applied={ok} failed={failed} writes={} conflicts={}", s.writes, s.conflicts);
    Ok((ok, failed))
}
