//! Properties of every algorithm over random parameters and random (monotone
//! and non-monotone) time sequences. Failing cases are kept in
//! `tests/properties.proptest-regressions` and replayed first.

use leasehold_core::{Algorithm, AlgorithmKind, State};
use proptest::prelude::*;

const T0: f64 = 1_700_000_000_000.0;

/// Any algorithm with small parameters, so limits are actually reached.
fn algorithm() -> impl Strategy<Value = Algorithm> {
    let kind = prop::sample::select(AlgorithmKind::ALL.to_vec());
    (kind, 1u64..40, 1u64..40, 1u64..8_000, 1u32..400).prop_map(|(kind, limit, burst, span, rate_halves)| {
        let rate = f64::from(rate_halves) / 2.0;
        let json = match kind {
            AlgorithmKind::Gcra => {
                format!(r#"{{"algorithm":"gcra","limit":{limit},"period":"{span}ms","burst":{burst}}}"#)
            }
            AlgorithmKind::TokenBucket => {
                format!(r#"{{"algorithm":"token_bucket","capacity":{limit},"refill_per_sec":{rate}}}"#)
            }
            AlgorithmKind::LeakyBucket => {
                format!(r#"{{"algorithm":"leaky_bucket","capacity":{limit},"leak_per_sec":{rate}}}"#)
            }
            k => format!(r#"{{"algorithm":"{}","limit":{limit},"window":"{span}ms"}}"#, k.name()),
        };
        Algorithm::from_json(&json).unwrap()
    })
}

/// One step of traffic: move the clock by `dt` ms (possibly back), then ask.
#[derive(Debug, Clone)]
enum Op {
    Decide { dt: i64, cost: u64 },
    Take { dt: i64, want: u64, min: u64 },
}

fn ops(backwards: bool) -> impl Strategy<Value = Vec<Op>> {
    let dt = if backwards { -3_000i64..6_000 } else { 0i64..6_000 };
    let dt = prop_oneof![3 => Just(0i64), 3 => 0i64..50, 2 => dt];
    let op = prop_oneof![
        (dt.clone(), 0u64..6).prop_map(|(dt, cost)| Op::Decide { dt, cost }),
        (dt, 0u64..30, 0u64..6).prop_map(|(dt, want, min)| Op::Take { dt, want, min }),
    ];
    prop::collection::vec(op, 1..120)
}

/// The time a state was last moved to, where the algorithm keeps one: a clock
/// behind it runs at that time instead.
fn state_time(state: Option<&State>) -> f64 {
    match state {
        Some(State::TokenBucket(s)) => s.ts,
        Some(State::LeakyBucket(s)) => s.ts,
        Some(State::FixedWindow(s) | State::Quota(s)) => s.w,
        Some(State::SlidingWindow(s)) => s.w,
        Some(State::SlidingLog(s)) => s.log.last().map_or(f64::MIN, |e| e.0),
        Some(State::Gcra(_)) | None => f64::MIN,
    }
}

/// What a run produced.
struct Run {
    /// Every admission as `(effective time, units)`.
    admitted: Vec<(f64, u64)>,
    /// When the key's state was first created (`T0` if never).
    start: f64,
    /// The largest time seen since then.
    latest: f64,
    state: Option<State>,
}

/// Runs `ops` from `T0`.
fn run(alg: &Algorithm, ops: &[Op]) -> Run {
    let mut now = T0;
    let mut latest = T0;
    let mut start = None;
    let mut state: Option<State> = None;
    let mut admitted = Vec::new();
    for op in ops {
        let (units, next) = match *op {
            Op::Decide { dt, cost } => {
                now += dt as f64;
                let (d, next) = alg.decide(state.as_ref(), now, cost);
                if !d.allowed {
                    assert!(next.is_none(), "a denial leaves the state unchanged");
                }
                (if d.allowed { cost } else { 0 }, next)
            }
            Op::Take { dt, want, min } => {
                now += dt as f64;
                let (granted, next) = alg.take(state.as_ref(), now, want, min);
                assert!(granted <= want && (granted == 0 || granted >= min), "take({want}, {min}) granted {granted}");
                (granted, next)
            }
        };
        latest = latest.max(now);
        if next.is_some() && start.is_none() {
            start = Some(now);
            latest = now;
        }
        if units > 0 {
            admitted.push((now.max(state_time(state.as_ref())), units));
        }
        if let Some(next) = next {
            state = Some(next);
        }
    }
    Run { admitted, start: start.unwrap_or(T0), latest, state }
}

fn rate_ceiling(alg: &Algorithm) -> Option<(f64, f64)> {
    let spec = serde_json::to_value(alg).unwrap();
    let n = |k: &str| spec[k].as_f64();
    match alg.kind() {
        AlgorithmKind::Gcra => {
            let period: leasehold_core::DurationMs = serde_json::from_value(spec["period"].clone()).unwrap();
            Some((n("burst")?, n("limit")? / period.as_f64()))
        }
        AlgorithmKind::TokenBucket => Some((n("capacity")?, n("refill_per_sec")? / 1000.0)),
        AlgorithmKind::LeakyBucket => Some((n("capacity")?, n("leak_per_sec")? / 1000.0)),
        _ => None,
    }
}

fn window_ms(alg: &Algorithm) -> f64 {
    let spec = serde_json::to_value(alg).unwrap();
    let w: leasehold_core::DurationMs = serde_json::from_value(spec["window"].clone()).unwrap();
    w.as_f64()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// (1) No algorithm admits more than its ceiling, whatever the clock does.
    #[test]
    fn never_admits_more_than_the_ceiling(alg in algorithm(), ops in ops(true)) {
        let Run { admitted, start, latest, .. } = run(&alg, &ops);
        let total: u64 = admitted.iter().map(|a| a.1).sum();
        if let Some((burst, per_ms)) = rate_ceiling(&alg) {
            let bound = burst + per_ms * (latest - start);
            prop_assert!(total as f64 <= bound, "admitted {total} > {bound}");
            return Ok(());
        }
        let limit = alg.ceiling();
        let w = window_ms(&alg);
        for &(t, _) in &admitted {
            let in_window: u64 = match alg.kind() {
                // A true sliding window ending at each admission.
                AlgorithmKind::SlidingLog => admitted.iter().filter(|a| a.0 > t - w && a.0 <= t).map(|a| a.1).sum(),
                // The epoch-aligned window containing it.
                _ => {
                    let start = (t / w).floor() * w;
                    admitted.iter().filter(|a| a.0 >= start && a.0 < start + w).map(|a| a.1).sum()
                }
            };
            prop_assert!(in_window <= limit, "{in_window} admitted in the window at {t}, limit {limit}");
        }
    }

    /// (2) `take(g)` then `refund(g)` at the same instant restores `available`.
    #[test]
    fn take_then_refund_restores_available(alg in algorithm(), ops in ops(false), want in 1u64..50, dt in 0u64..2_000) {
        let Run { latest, state, .. } = run(&alg, &ops);
        let now = latest + dt as f64;
        let before = alg.available(state.as_ref(), now);
        let (g, taken) = alg.take(state.as_ref(), now, want, 1);
        prop_assert_eq!(g, want.min(before));
        if g > 0 {
            prop_assert_eq!(alg.available(taken.as_ref(), now), before - g);
            let back = alg.refund(taken.as_ref(), now, g).or(taken);
            prop_assert_eq!(alg.available(back.as_ref(), now), before);
        }
    }

    /// (3) A denial returns no new state (checked in `run`), and
    /// (4) state JSON round-trips bit-identically and decides the same.
    #[test]
    fn json_round_trip_is_bit_identical(alg in algorithm(), ops in ops(true), dt in 0u64..10_000, cost in 0u64..10) {
        let Run { latest, state, .. } = run(&alg, &ops);
        if let Some(state) = state {
            let json = state.to_json();
            let back = alg.parse_state(&json).unwrap();
            prop_assert_eq!(back.to_json(), json.clone());
            prop_assert_eq!(&back, &state);
            let now = latest + dt as f64;
            prop_assert_eq!(alg.decide(Some(&back), now, cost), alg.decide(Some(&state), now, cost));
        }
    }

    /// (5) A backward clock step admits nothing extra: seen from an earlier
    /// time, a state never has more available than at the latest time seen.
    #[test]
    fn a_backward_step_admits_nothing_extra(alg in algorithm(), ops in ops(false), back in 1u64..100_000) {
        let Run { latest, state, .. } = run(&alg, &ops);
        let then = alg.available(state.as_ref(), latest - back as f64);
        let now = alg.available(state.as_ref(), latest);
        prop_assert!(then <= now, "{then} available {back} ms back, {now} now");
    }
}
