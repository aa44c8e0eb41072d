//! ns per `decide` for every algorithm, and governor's GCRA on the same quota
//! in the same run: `cargo bench -p leasehold-core`.
//!
//! Every case admits: the clock moves one emission interval (60 ms for
//! 1000/min) per decision, so the allow path is what is measured.

#![allow(missing_docs)] // criterion_group! generates undocumented functions

use std::collections::HashMap;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use governor::clock::FakeRelativeClock;
use governor::{Quota, RateLimiter};
use leasehold_core::{Algorithm, State};

const T0: f64 = 1_700_000_000_000.0;
const STEP_MS: u64 = 60;
const KEYS: u32 = 1_000;

fn specs() -> Vec<(&'static str, Algorithm)> {
    [
        ("gcra", r#"{"algorithm":"gcra","limit":1000,"period":"60s","burst":100}"#),
        ("token_bucket", r#"{"algorithm":"token_bucket","capacity":100,"refill_per_sec":16.67}"#),
        ("leaky_bucket", r#"{"algorithm":"leaky_bucket","capacity":100,"leak_per_sec":16.67}"#),
        ("fixed_window", r#"{"algorithm":"fixed_window","limit":1000,"window":"60s"}"#),
        ("sliding_window", r#"{"algorithm":"sliding_window","limit":1000,"window":"60s"}"#),
        ("sliding_log", r#"{"algorithm":"sliding_log","limit":1000,"window":"60s"}"#),
        ("quota", r#"{"algorithm":"quota","limit":1000,"window":"60s"}"#),
    ]
    .into_iter()
    .map(|(name, json)| (name, Algorithm::from_json(json).unwrap()))
    .collect()
}

fn one_key(c: &mut Criterion) {
    let mut g = c.benchmark_group("decide/one_key");
    for (name, alg) in specs() {
        g.bench_function(BenchmarkId::new("leasehold", name), |b| {
            let mut state: Option<State> = None;
            let mut now = T0;
            b.iter(|| {
                now += STEP_MS as f64;
                let (d, next) = alg.decide(state.as_ref(), black_box(now), 1);
                if let Some(next) = next {
                    state = Some(next);
                }
                d.allowed
            });
        });
    }
    g.bench_function(BenchmarkId::new("governor", "gcra direct"), |b| {
        let clock = FakeRelativeClock::default();
        let quota = Quota::per_minute(NonZeroU32::new(1000).unwrap()).allow_burst(NonZeroU32::new(100).unwrap());
        let limiter = RateLimiter::direct_with_clock(quota, clock.clone());
        b.iter(|| {
            clock.advance(Duration::from_millis(STEP_MS));
            limiter.check().is_ok()
        });
    });
    g.finish();
}

fn keyed(c: &mut Criterion) {
    let mut g = c.benchmark_group("decide/1000_keys");
    let (_, gcra) = specs().remove(0);
    g.bench_function(BenchmarkId::new("leasehold", "gcra in a HashMap"), |b| {
        let mut states: HashMap<u32, State> = HashMap::new();
        let mut now = T0;
        let mut k = 0u32;
        b.iter(|| {
            k = (k + 1) % KEYS;
            now += (STEP_MS as f64) / f64::from(KEYS);
            let slot = states
                .entry(k)
                .or_insert(State::Gcra(leasehold_core::algorithms::GcraState { tat: 0.0, out: Vec::new() }));
            let (d, next) = gcra.decide(Some(slot), black_box(now), 1);
            if let Some(next) = next {
                *slot = next;
            }
            d.allowed
        });
    });
    g.bench_function(BenchmarkId::new("governor", "gcra keyed (hashmap)"), |b| {
        let clock = FakeRelativeClock::default();
        let quota = Quota::per_minute(NonZeroU32::new(1000).unwrap()).allow_burst(NonZeroU32::new(100).unwrap());
        let limiter = RateLimiter::hashmap_with_clock(quota, clock.clone());
        let mut k = 0u32;
        b.iter(|| {
            k = (k + 1) % KEYS;
            clock.advance(Duration::from_micros(STEP_MS * 1000 / u64::from(KEYS)));
            limiter.check_key(&k).is_ok()
        });
    });
    g.finish();
}

criterion_group!(benches, one_key, keyed);
criterion_main!(benches);
