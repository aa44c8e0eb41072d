//! Exact allow/deny sequences for every algorithm, driven by a ManualClock.

use leasehold_core::{Algorithm, Clock, Decision, ManualClock, State, RETRY_NEVER};

const T0: f64 = 1_700_000_000_000.0;

fn alg(json: &str) -> Algorithm {
    Algorithm::from_json(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

/// One key's state and a clock, as a store would keep them.
struct Key {
    alg: Algorithm,
    state: Option<State>,
    clock: ManualClock,
}

impl Key {
    fn new(json: &str) -> Self {
        Self { alg: alg(json), state: None, clock: ManualClock::new(T0) }
    }

    fn check(&mut self, cost: u64) -> Decision {
        let (d, next) = self.alg.decide(self.state.as_ref(), self.clock.now_ms(), cost);
        assert_eq!(d.allowed && cost > 0, next.is_some(), "a new state exactly when units are consumed");
        if let Some(next) = next {
            self.state = Some(next);
        }
        d
    }

    /// Admits `cost` units repeatedly at the current time until denied; returns how many passed.
    fn drain(&mut self, cost: u64) -> u64 {
        let mut n = 0;
        while self.check(cost).allowed {
            n += 1;
            assert!(n < 1_000_000, "never denied");
        }
        n
    }
}

fn allowed(d: Decision, remaining: u64, reset_after_ms: u64) {
    assert!(d.allowed, "{d:?}");
    assert_eq!((d.remaining, d.retry_after_ms, d.reset_after_ms), (remaining, 0, reset_after_ms), "{d:?}");
}

fn denied(d: Decision, retry_after_ms: u64) {
    assert!(!d.allowed, "{d:?}");
    assert_eq!((d.remaining, d.retry_after_ms), (0, retry_after_ms), "{d:?}");
}

#[test]
fn gcra_admits_a_burst_then_one_per_interval() {
    // 10 per second: one unit every 100 ms, bursts of 3.
    let mut k = Key::new(r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":3}"#);
    allowed(k.check(1), 2, 100);
    allowed(k.check(1), 1, 200);
    allowed(k.check(1), 0, 300);
    denied(k.check(1), 100);
    k.clock.advance(99.0);
    denied(k.check(1), 1);
    k.clock.advance(1.0);
    allowed(k.check(1), 0, 300);
    // Cost > 1: two units need two intervals.
    denied(k.check(2), 200);
    k.clock.advance(200.0);
    allowed(k.check(2), 0, 300);
    assert_eq!(k.check(1).limit, 3, "limit reports the burst");
}

#[test]
fn gcra_burst_defaults_to_limit_and_recovers_fully_after_a_huge_gap() {
    let mut k = Key::new(r#"{"algorithm":"gcra","limit":5,"period":"1m"}"#);
    assert_eq!(k.drain(1), 5);
    k.clock.advance(1e12); // ~30 years
    assert_eq!(k.drain(1), 5, "a huge gap refills to the burst, never beyond");
}

#[test]
fn token_bucket_refills_continuously_up_to_capacity() {
    let mut k = Key::new(r#"{"algorithm":"token_bucket","capacity":4,"refill_per_sec":2}"#);
    allowed(k.check(3), 1, 1_500);
    allowed(k.check(1), 0, 2_000);
    denied(k.check(1), 500);
    k.clock.advance(250.0);
    denied(k.check(1), 250);
    k.clock.advance(250.0);
    allowed(k.check(1), 0, 2_000);
    k.clock.advance(0.0);
    denied(k.check(2), 1_000);
    k.clock.advance(60_000.0);
    allowed(k.check(4), 0, 2_000);
}

#[test]
fn leaky_bucket_meters_like_a_token_bucket_of_the_same_shape() {
    let mut leaky = Key::new(r#"{"algorithm":"leaky_bucket","capacity":4,"leak_per_sec":2}"#);
    let mut token = Key::new(r#"{"algorithm":"token_bucket","capacity":4,"refill_per_sec":2}"#);
    for (step, cost) in
        [(0.0, 3), (0.0, 1), (0.0, 1), (250.0, 1), (250.0, 1), (700.0, 2), (10.0, 1), (5_000.0, 5), (0.0, 4)]
    {
        leaky.clock.advance(step);
        token.clock.advance(step);
        assert_eq!(leaky.check(cost), token.check(cost), "after {step} ms, cost {cost}");
    }
    match &leaky.state {
        Some(State::LeakyBucket(s)) => assert_eq!(s.level, 4.0, "level is what is in the bucket"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn fixed_window_counts_per_aligned_window() {
    let mut k = Key::new(r#"{"algorithm":"fixed_window","limit":3,"window":"10s"}"#);
    k.clock.set(20_000.0 + 7_500.0); // 2.5 s before the window at 30 s ends
    allowed(k.check(2), 1, 2_500);
    allowed(k.check(1), 0, 2_500);
    denied(k.check(1), 2_500);
    k.clock.advance(2_499.0);
    denied(k.check(1), 1);
    k.clock.advance(1.0);
    allowed(k.check(3), 0, 10_000);
}

#[test]
fn quota_counts_per_window_like_a_fixed_window() {
    let mut k = Key::new(r#"{"algorithm":"quota","limit":1000,"window":"1h"}"#);
    k.clock.set(0.0);
    allowed(k.check(600), 400, 3_600_000);
    let d = k.check(401);
    assert!(!d.allowed && d.remaining == 400 && d.retry_after_ms == 3_600_000, "{d:?}");
    allowed(k.check(400), 0, 3_600_000);
}

#[test]
fn sliding_window_weights_the_previous_window() {
    let mut k = Key::new(r#"{"algorithm":"sliding_window","limit":10,"window":"10s"}"#);
    k.clock.set(0.0);
    assert_eq!(k.drain(1), 10);
    // A quarter into the next window the previous 10 weigh 7.5: 2 more fit.
    k.clock.set(12_500.0);
    allowed(k.check(2), 0, 17_500);
    // 3 more need the estimate at 7 + 2 = 9... the weight must drop to 0.1:
    // 9 tenths into the window, at 19 s.
    denied(k.check(1), 500);
    k.clock.set(13_000.0);
    allowed(k.check(1), 0, 17_000);
    // Over the current window's own budget: wait for the next window.
    // Just before the window turns the previous window weighs 0.001: 6 more fit.
    k.clock.set(19_999.0);
    assert_eq!(k.drain(1), 6);
    let d = k.check(1);
    assert!(!d.allowed);
    k.clock.advance(d.retry_after_ms as f64);
    assert!(k.check(1).allowed, "retry_after is enough");
}

#[test]
fn sliding_log_is_exact_over_any_interval() {
    let mut k = Key::new(r#"{"algorithm":"sliding_log","limit":3,"window":"1s"}"#);
    allowed(k.check(1), 2, 1_000);
    k.clock.advance(400.0);
    allowed(k.check(2), 0, 1_000);
    denied(k.check(1), 600);
    k.clock.advance(600.0); // the first unit leaves
    allowed(k.check(1), 0, 1_000);
    denied(k.check(2), 400);
    k.clock.advance(400.0);
    allowed(k.check(2), 0, 1_000);
    match &k.state {
        Some(State::SlidingLog(s)) => assert!(s.log.len() <= 3, "{s:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn sliding_log_never_holds_more_entries_than_its_limit() {
    let mut k = Key::new(r#"{"algorithm":"sliding_log","limit":5,"window":"1s"}"#);
    for _ in 0..1_000 {
        k.check(1);
        k.clock.advance(37.0);
        if let Some(State::SlidingLog(s)) = &k.state {
            assert!(s.log.len() <= 5, "{}", s.log.len());
        }
    }
}

#[test]
fn cost_above_the_ceiling_is_always_denied_with_retry_never() {
    for json in [
        r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":3}"#,
        r#"{"algorithm":"token_bucket","capacity":3,"refill_per_sec":1}"#,
        r#"{"algorithm":"leaky_bucket","capacity":3,"leak_per_sec":1}"#,
        r#"{"algorithm":"fixed_window","limit":3,"window":"1s"}"#,
        r#"{"algorithm":"sliding_window","limit":3,"window":"1s"}"#,
        r#"{"algorithm":"sliding_log","limit":3,"window":"1s"}"#,
        r#"{"algorithm":"quota","limit":3,"window":"1s"}"#,
    ] {
        let mut k = Key::new(json);
        let d = k.check(4);
        assert!(d.is_impossible() && d.retry_after_ms == RETRY_NEVER && d.remaining == 3, "{json}: {d:?}");
        assert!(k.state.is_none(), "{json}: consumed nothing");
        k.clock.advance(1e9);
        assert!(k.check(4).is_impossible(), "{json}: still impossible later");
        assert!(k.check(3).allowed, "{json}: the ceiling itself passes");
        assert!(k.check(0).allowed, "{json}: a zero cost always passes");
    }
}

#[test]
fn zero_time_gap_mints_nothing() {
    let mut k = Key::new(r#"{"algorithm":"token_bucket","capacity":2,"refill_per_sec":1000}"#);
    assert_eq!(k.drain(1), 2);
    for _ in 0..100 {
        assert!(!k.check(1).allowed);
    }
}

#[test]
fn a_clock_stepping_back_deducts_nothing_and_does_not_move_state_back() {
    let mut k = Key::new(r#"{"algorithm":"token_bucket","capacity":10,"refill_per_sec":1}"#);
    allowed(k.check(5), 5, 5_000);
    k.clock.advance(-60_000.0);
    let d = k.check(1);
    assert_eq!(d.remaining, 4, "the step back neither refilled nor drained: {d:?}");
    match &k.state {
        Some(State::TokenBucket(s)) => assert_eq!(s.ts, T0, "stored time stays at the latest seen"),
        other => panic!("{other:?}"),
    }
    k.clock.set(T0 + 1_000.0);
    assert_eq!(k.check(0).remaining, 5, "one second after the latest seen time refills one");
}

#[test]
fn status_consumes_nothing() {
    let k = Key::new(r#"{"algorithm":"gcra","limit":10,"period":"1s"}"#);
    let d = k.alg.status(None, T0);
    assert!(d.allowed && d.remaining == 10 && d.limit == 10, "{d:?}");
}

#[test]
fn take_grants_partially_and_refund_restores() {
    let a = alg(r#"{"algorithm":"fixed_window","limit":10,"window":"1m"}"#);
    let (g, s) = a.take(None, T0, 7, 1);
    assert_eq!(g, 7);
    let (g2, s2) = a.take(s.as_ref(), T0, 7, 1);
    assert_eq!(g2, 3, "partial grant of what is left");
    let (g3, s3) = a.take(s2.as_ref(), T0, 7, 1);
    assert_eq!((g3, s3), (0, None));
    let (g4, _) = a.take(s.as_ref(), T0, 7, 4);
    assert_eq!(g4, 0, "fewer than min available: nothing");
    let back = a.refund(s2.as_ref(), T0, 5);
    assert_eq!(a.available(back.as_ref(), T0), 5);
    // A refund into the next window changes nothing: leased units cannot cross windows.
    let end = a.window_end_ms(T0).unwrap();
    assert_eq!(a.refund(s2.as_ref(), end, 5), None);
}

#[test]
fn invalid_specs_name_the_field() {
    let cases = [
        (r#"{"algorithm":"gcra","limit":0,"period":"1s"}"#, "limit"),
        (r#"{"algorithm":"gcra","limit":-5,"period":"1s"}"#, "limit"),
        (r#"{"algorithm":"gcra","limit":1.5,"period":"1s"}"#, "limit"),
        (r#"{"algorithm":"gcra","limit":10,"period":"0s"}"#, "period"),
        (r#"{"algorithm":"gcra","limit":10,"period":60}"#, "period"),
        (r#"{"algorithm":"gcra","limit":10}"#, "period"),
        (r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":0}"#, "burst"),
        (r#"{"algorithm":"token_bucket","capacity":10,"refill_per_sec":0}"#, "refill_per_sec"),
        (r#"{"algorithm":"token_bucket","capacity":10,"refill_per_sec":"fast"}"#, "refill_per_sec"),
        (r#"{"algorithm":"leaky_bucket","capacity":10,"leak_per_sec":-1}"#, "leak_per_sec"),
        (r#"{"algorithm":"fixed_window","limit":10,"window":"10 parsecs"}"#, "window"),
        (r#"{"algorithm":"sliding_log","limit":10,"window":"1s","period":"1s"}"#, "algorithm"),
        (r#"{"algorithm":"gcrb","limit":10,"period":"1s"}"#, "algorithm"),
        (r#"{"limit":10,"period":"1s"}"#, "algorithm"),
        (r#"[1,2]"#, "spec"),
    ];
    for (json, field) in cases {
        let err = Algorithm::from_json(json).unwrap_err();
        assert_eq!(err.field, field, "{json}: {err}");
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn specs_parse_from_toml_and_serialize_back_to_the_same_form() {
    let a: Algorithm = toml::from_str(
        r#"algorithm = "gcra"
limit = 1000
period = "60s"
burst = 100"#,
    )
    .unwrap();
    assert_eq!(serde_json::to_string(&a).unwrap(), r#"{"algorithm":"gcra","limit":1000,"period":"1m","burst":100}"#);
    let b: Algorithm = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
    assert_eq!(a, b);
}

#[test]
fn state_of_another_algorithm_is_rejected_when_parsed() {
    let gcra = alg(r#"{"algorithm":"gcra","limit":10,"period":"1s"}"#);
    let window = alg(r#"{"algorithm":"fixed_window","limit":10,"window":"1s"}"#);
    let (_, s) = window.decide(None, T0, 1);
    let json = s.unwrap().to_json();
    let err = gcra.parse_state(&json).unwrap_err();
    assert!(err.to_string().contains("gcra"), "{err}");
    assert!(window.parse_state(&json).is_ok());
}

#[test]
fn expiry_is_when_the_state_reads_as_fresh() {
    for json in [
        r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":3}"#,
        r#"{"algorithm":"token_bucket","capacity":3,"refill_per_sec":1.5}"#,
        r#"{"algorithm":"leaky_bucket","capacity":3,"leak_per_sec":1.5}"#,
        r#"{"algorithm":"fixed_window","limit":3,"window":"1s"}"#,
        r#"{"algorithm":"sliding_window","limit":3,"window":"1s"}"#,
        r#"{"algorithm":"sliding_log","limit":3,"window":"1s"}"#,
        r#"{"algorithm":"quota","limit":3,"window":"1s"}"#,
    ] {
        let a = alg(json);
        let (_, s) = a.decide(None, T0 + 123.0, 2);
        let s = s.unwrap();
        let exp = a.expires_at_ms(&s);
        assert!(exp > T0 + 123.0, "{json}");
        assert_eq!(a.available(Some(&s), exp), a.ceiling(), "{json}: full at expiry");
        assert!(a.available(Some(&s), exp - 1.0) < a.ceiling() || json.contains("window"), "{json}: not full before");
    }
}
