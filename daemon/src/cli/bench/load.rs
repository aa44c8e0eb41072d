//! `leasehold bench lease` and `leasehold bench load`: the lease cache
//! against direct mode under load, and one process of the multi-process
//! invariant tests (with faults injected on request).

use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_core::{Algorithm, Clock, SystemClock};

use super::BenchError;
use crate::store::{Cas, StoreConfig};

/// Options of one lease-cache load run.
#[derive(Debug, Clone)]
pub struct LoadRun {
    /// The limit, in its JSON form.
    pub spec: String,
    /// Leased or direct.
    pub mode: crate::lease::settings::Mode,
    /// Lease cap (units); `None` keeps the default (a tenth of the ceiling).
    pub lease_max: Option<u64>,
    /// Independent limiters (each with its own L1), as if on separate hosts.
    pub limiters: usize,
    /// Concurrent callers per limiter.
    pub callers: usize,
    /// How long to run.
    pub duration: Duration,
    /// Keys: `None` = one hot key; `Some((n, s))` = Zipf(s) over `n` keys
    /// (`s = 0`: uniform).
    pub zipf_keys: Option<(usize, f64)>,
    /// Print `A <epoch ms>` for every admission (the invariant tests read them).
    pub print_admissions: bool,
    /// Denied callers wait (up to 20 ms of the retry time) instead of asking again at once.
    pub pace_denials: bool,
    /// Faults injected into this run's store (the invariant tests' scenarios).
    pub faults: LoadFaults,
    /// Answers the store could not back are counted (`LoadFigures::unavailable`)
    /// instead of ending the run, even with no fault injected.
    pub tolerate_unavailable: bool,
    /// Open loop: checks per second per limiter, spread over its callers
    /// (traffic that arrives at its own pace, as from users, rather than
    /// callers asking again as soon as they are answered). `None`: closed loop.
    pub rate: Option<f64>,
}

/// Faults a load run injects into its store. With any of them on, answers
/// the store could not back (fail closed) are counted, not fatal.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LoadFaults {
    /// Chance that a write lands but its reply is lost.
    pub lost_replies: f64,
    /// Latency added to every store call.
    pub delay: Duration,
    /// The store is down from `.0` to `.0 + .1` into the run.
    pub outage: Option<(Duration, Duration)>,
}

impl LoadFaults {
    fn any(&self) -> bool {
        *self != Self::default()
    }
}

/// What a load run measured.
#[derive(Debug, Clone, Default)]
pub struct LoadFigures {
    /// Decisions made.
    pub decisions: u64,
    /// Of which allowed.
    pub allowed: u64,
    /// Store conditional writes.
    pub writes: u64,
    /// Store reads.
    pub reads: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Decision latency percentiles, microseconds (p50, p99), from a sample.
    pub p50_us: f64,
    /// See `p50_us`.
    pub p99_us: f64,
    /// Epoch ms of the first and last decision.
    pub span_ms: (f64, f64),
    /// Decisions whose caller waited for a store call (answered by the store
    /// or by the fail policy), not served from a lease.
    pub waited: u64,
    /// Of which the store could not back the decision (timeout, outage).
    pub unavailable: u64,
    /// The slowest decision, microseconds.
    pub max_us: f64,
}

/// A Zipf(s) sampler over `n` ranks (rank 0 most popular), by inverse CDF.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, s: f64) -> Self {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n)
            .map(|k| {
                acc += 1.0 / (k as f64).powf(s);
                acc
            })
            .collect();
        for c in &mut cdf {
            *c /= acc;
        }
        Self { cdf }
    }

    fn sample(&self, rng: &mut fastrand::Rng) -> usize {
        let u = rng.f64();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// Runs `run` against `config`'s store and returns the figures.
///
/// # Errors
/// If the store cannot be opened.
pub async fn load(config: &StoreConfig, run: &LoadRun) -> Result<LoadFigures, BenchError> {
    use crate::lease::settings::{CacheSettings, LimitSettings};
    use crate::lease::{Check, LeaseCache, Served};

    let mut store = config.open()?;
    let faulty = run.faults.any();
    if faulty {
        let fault = Arc::new(crate::store::fault::FaultStore::new(store));
        fault.set_lost_reply_chance(run.faults.lost_replies);
        fault.set_delay(run.faults.delay);
        if let Some((after, lasting)) = run.faults.outage {
            let f = fault.clone();
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                f.set_down(true);
                tokio::time::sleep(lasting).await;
                f.set_down(false);
            });
        }
        store = fault;
    }
    let alg = Algorithm::from_json(&run.spec).map_err(|e| BenchError::Spec(e.to_string()))?;
    let mut settings = LimitSettings::new(alg);
    settings.mode = run.mode;
    if let Some(max) = run.lease_max {
        settings.lease.max = max;
    }
    let limits = std::collections::HashMap::from([("load".to_string(), settings)]);
    let limiters: Vec<LeaseCache> = (0..run.limiters)
        .map(|_| {
            let cas = Cas::new(store.clone(), Arc::new(SystemClock), config.cas_settings());
            // Measure throughput, not fault handling: a saturated store is
            // slow, not down, so neither the timeout nor the breaker may cut in.
            // (With faults injected, the defaults: the faults are the point.)
            let lc = if faulty {
                CacheSettings::default()
            } else {
                CacheSettings {
                    store_timeout: Duration::from_secs(30),
                    breaker: crate::store::guard::BreakerSettings { failures: u32::MAX, ..Default::default() },
                    ..CacheSettings::default()
                }
            };
            LeaseCache::new(limits.clone(), cas, lc)
        })
        .collect();
    let zipf = run.zipf_keys.map(|(n, s)| Arc::new(Zipf::new(n, s)));
    let start = Instant::now();
    let first = SystemClock.now_ms();
    let mut tasks = Vec::new();
    for (l, limiter) in limiters.iter().enumerate() {
        for c in 0..run.callers {
            let (limiter, zipf, run) = (limiter.clone(), zipf.clone(), run.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = fastrand::Rng::with_seed((l * 1000 + c) as u64);
                let (mut decisions, mut allowed, mut samples) = (0u64, 0u64, Vec::new());
                let (mut waited, mut unavailable, mut max_ns) = (0u64, 0u64, 0u64);
                let mut key = String::from("hot");
                let every = run.rate.map(|r| Duration::from_secs_f64(run.callers as f64 / r.max(1e-9)));
                let mut next = tokio::time::Instant::now() + every.map_or(Duration::ZERO, |e| e.mul_f64(rng.f64()));
                while start.elapsed() < run.duration {
                    if let Some(every) = every {
                        tokio::time::sleep_until(next).await;
                        next += every;
                    }
                    if let Some(z) = &zipf {
                        key.clear();
                        use std::fmt::Write;
                        let _ = write!(key, "k{}", z.sample(&mut rng));
                    }
                    let t = Instant::now();
                    let v = limiter.check(Check { limit: "load", key: &key, cost: 1 }).await?;
                    let ns = t.elapsed().as_nanos() as u64;
                    max_ns = max_ns.max(ns);
                    if decisions % 16 == 0 {
                        samples.push(ns);
                    }
                    decisions += 1;
                    waited += u64::from(v.served != Served::Local);
                    unavailable += u64::from(v.unavailable.is_some());
                    if let Some(e) = v.unavailable {
                        if !run.faults.any() && !run.tolerate_unavailable {
                            return Err(BenchError::Unavailable(e));
                        }
                        if !v.decision.allowed {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            continue;
                        }
                    }
                    if v.decision.allowed {
                        allowed += 1;
                        if run.print_admissions {
                            println!("A {}", v.at_ms);
                        }
                        tokio::task::yield_now().await;
                    } else if every.is_some() {
                        // Open loop: the next request comes at its own time.
                    } else if run.pace_denials {
                        let wait = v.decision.retry_after_ms.clamp(1, 20);
                        tokio::time::sleep(Duration::from_millis(wait)).await;
                    } else {
                        tokio::task::yield_now().await;
                    }
                }
                Ok::<_, BenchError>((decisions, allowed, samples, waited, unavailable, max_ns))
            }));
        }
    }
    let mut figures = LoadFigures::default();
    let mut samples = Vec::new();
    for t in tasks {
        let (d, a, s, w, u, max_ns) = t.await??;
        figures.decisions += d;
        figures.allowed += a;
        figures.waited += w;
        figures.unavailable += u;
        figures.max_us = figures.max_us.max(max_ns as f64 / 1e3);
        samples.extend(s);
    }
    figures.seconds = start.elapsed().as_secs_f64();
    figures.span_ms = (first, SystemClock.now_ms());
    for l in &limiters {
        l.shutdown().await;
        let s = l.counters().cas().stats().snapshot();
        figures.writes += s.writes;
        figures.reads += s.reads;
    }
    samples.sort_unstable();
    let pct = |p: f64| samples.get(((samples.len() as f64 - 1.0) * p) as usize).map_or(0.0, |&ns| ns as f64 / 1e3);
    figures.p50_us = pct(0.50);
    figures.p99_us = pct(0.99);
    Ok(figures)
}

/// DynamoDB on-demand list prices, dollars per million request units.
#[derive(Debug, Clone, Copy)]
pub struct Prices {
    /// Per million read request units.
    pub read: f64,
    /// Per million write request units.
    pub write: f64,
}

impl Default for Prices {
    /// us-east-1 on-demand list prices (since November 2024).
    fn default() -> Self {
        Self { read: 0.125, write: 0.625 }
    }
}

/// The cost report: leased against direct, side by side, for four
/// workloads (a hot key under its limit shared by 4 limiters, a hot key far
/// over its limit, Zipf(1.1) over 100k keys, uniform over 1M keys), each
/// beside the naive design of one consistent read and one conditional write
/// per decision: decisions/s, read and write request units and round trips
/// per decision (counted from the store calls made: every record is under
/// 1 KB, so a call is one unit), latency, and dollars per million decisions
/// at `prices`.
///
/// # Errors
/// If the store cannot be opened.
pub async fn lease_table(config: &StoreConfig, duration: Duration, prices: Prices) -> Result<(), BenchError> {
    use crate::lease::settings::Mode;
    type Scenario = (&'static str, &'static str, Option<(usize, f64)>, Option<u64>);
    let scenarios: [Scenario; 4] = [
        (
            "hot key under its limit",
            r#"{"algorithm":"token_bucket","capacity":100000000,"refill_per_sec":10000000}"#,
            None,
            Some(2_000),
        ),
        ("hot key over its limit", r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":10}"#, None, None),
        (
            "zipf 1.1, 100k keys",
            r#"{"algorithm":"gcra","limit":1000,"period":"1s","burst":100}"#,
            Some((100_000, 1.1)),
            None,
        ),
        (
            "uniform, 1M keys",
            r#"{"algorithm":"gcra","limit":1000,"period":"1s","burst":100}"#,
            Some((1_000_000, 0.0)),
            None,
        ),
    ];
    let dollars = |reads: f64, writes: f64| reads * prices.read + writes * prices.write;
    println!(
        "| workload | design | decisions/s | RRU/decision | WRU/decision | round trips/decision | p50 µs | p99 µs | $ per million decisions | unavailable |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, spec, keys, lease_max) in scenarios {
        println!("| {name} | naive (read + conditional write) | | 1 | 1 | 2 | | | {:.4} | |", dollars(1.0, 1.0));
        for mode in [Mode::Direct, Mode::Leased] {
            let run = LoadRun {
                spec: spec.into(),
                mode,
                lease_max,
                limiters: 4,
                callers: 8,
                duration,
                zipf_keys: keys,
                print_admissions: false,
                faults: LoadFaults::default(),
                pace_denials: false,
                rate: None,
                // Contention can exhaust a round's retries on the hot key in
                // direct mode: a figure of the run, not a reason to stop it.
                tolerate_unavailable: true,
            };
            let mut c = config.clone();
            c.prefix = format!("{}-lease-bench-{}", c.prefix, fastrand::u64(..));
            let f = load(&c, &run).await?;
            let per = |n: u64| n as f64 / f.decisions.max(1) as f64;
            let (r, w) = (per(f.reads), per(f.writes));
            println!(
                "| {name} | {} | {:.0} | {r:.4} | {w:.4} | {:.4} | {:.1} | {:.1} | {:.4} | {} |",
                if mode == Mode::Direct { "direct" } else { "leased" },
                f.decisions as f64 / f.seconds,
                r + w,
                f.p50_us,
                f.p99_us,
                dollars(r, w),
                f.unavailable,
            );
        }
    }
    println!(
        "\n(4 limiters with their own caches, 8 callers each; prices ${} per million reads, ${} per million writes)",
        prices.read, prices.write
    );
    Ok(())
}
