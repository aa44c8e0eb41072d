//! Leases (see `leasehold_core::lease`): the bound over every interval with
//! several leaseholders on one record, refunds after other writers for every
//! algorithm, and the lease operations' edge cases.

use leasehold_core::lease::{LeaseOut, MAX_LEASES_OUT};
use leasehold_core::{Algorithm, AlgorithmKind, LeaseTerm, State};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};

const T0: f64 = 1_700_000_000_000.0;

/// Float tolerance of the bound, in units. GCRA may admit a unit up to a
/// thousandth of an interval early (its `slack`); everything else is exact
/// up to rounding far below this.
const EPS: f64 = 0.01;

fn alg(json: &str) -> Algorithm {
    Algorithm::from_json(json).unwrap_or_else(|e| panic!("{json}: {e}"))
}

/// `(ceiling, rate in units per ms)` of a refill algorithm.
fn bound_of(alg: &Algorithm) -> (f64, f64) {
    match alg {
        Algorithm::Gcra(g) => (g.burst() as f64, g.limit() as f64 / g.period().as_f64()),
        Algorithm::TokenBucket(t) => (t.capacity() as f64, t.refill_per_sec() / 1000.0),
        Algorithm::LeakyBucket(l) => (l.capacity() as f64, l.leak_per_sec() / 1000.0),
        other => panic!("{other:?} is not a refill algorithm"),
    }
}

fn is_refill(alg: &Algorithm) -> bool {
    matches!(alg.kind(), AlgorithmKind::Gcra | AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket)
}

/// The units out on lease in a state of a refill algorithm.
fn out_of(state: Option<&State>) -> &[LeaseOut] {
    match state {
        Some(State::Gcra(s)) => &s.out,
        Some(State::TokenBucket(s)) => &s.out,
        Some(State::LeakyBucket(s)) => &s.out,
        _ => &[],
    }
}

/// Checks that for every pair of admission times `a <= b`, the units admitted
/// in `[a, b]` are at most `ceiling + rate × (b − a)`.
fn check_bound(admitted: &[(f64, u64)], ceiling: f64, rate: f64) -> Result<(), String> {
    let mut sorted = admitted.to_vec();
    sorted.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut at: Vec<(f64, u64)> = Vec::new();
    for (t, n) in sorted {
        match at.last_mut() {
            Some(last) if last.0 == t => last.1 += n,
            _ => at.push((t, n)),
        }
    }
    for i in 0..at.len() {
        let mut sum = 0;
        for j in i..at.len() {
            sum += at[j].1;
            let span = at[j].0 - at[i].0;
            let bound = ceiling + rate * span;
            if sum as f64 > bound + EPS {
                return Err(format!(
                    "{sum} admitted in [{}, {}] ({span} ms) > ceiling {ceiling} + rate {rate}/ms × {span} = {bound}",
                    at[i].0 - T0,
                    at[j].0 - T0
                ));
            }
        }
    }
    Ok(())
}

/// GCRA, token bucket or leaky bucket with small parameters, so the cap binds.
fn refill_alg() -> impl Strategy<Value = Algorithm> {
    (0..3usize, 1u64..20, 1u64..20, 50u64..3_000, 1u32..80).prop_map(|(kind, cap, burst, span, halves)| {
        let rate = f64::from(halves) / 2.0;
        alg(&match kind {
            0 => format!(r#"{{"algorithm":"gcra","limit":{cap},"period":"{span}ms","burst":{burst}}}"#),
            1 => format!(r#"{{"algorithm":"token_bucket","capacity":{cap},"refill_per_sec":{rate}}}"#),
            _ => format!(r#"{{"algorithm":"leaky_bucket","capacity":{cap},"leak_per_sec":{rate}}}"#),
        })
    })
}

/// Any algorithm with small parameters.
fn any_alg() -> impl Strategy<Value = Algorithm> {
    let kind = prop::sample::select(AlgorithmKind::ALL.to_vec());
    (kind, refill_alg(), 1u64..15, 100u64..3_000).prop_map(|(kind, refill, limit, span)| match kind {
        AlgorithmKind::Gcra | AlgorithmKind::TokenBucket | AlgorithmKind::LeakyBucket => refill,
        k => alg(&format!(r#"{{"algorithm":"{}","limit":{limit},"window":"{span}ms"}}"#, k.name())),
    })
}

/// A clock step in ms: often none, often small, sometimes past a lease's end.
fn dt() -> impl Strategy<Value = u32> {
    prop_oneof![3 => Just(0u32), 3 => 0u32..40, 2 => 0u32..1_500]
}

/// One step of a leaseholder or of direct traffic.
#[derive(Debug, Clone)]
enum Act {
    /// Holder takes a lease of up to `want` units (at least `min`) for `len`
    /// ms. Its units will be spent at `spend` (thousandths of the lease,
    /// cycled over the units).
    Lease { holder: usize, dt: u32, want: u64, min: u64, len: u32, spend: Vec<u16> },
    /// Holder gives back up to `units` unspent units of one of its leases
    /// (`pick`), before or after that lease ended.
    Refund { holder: usize, dt: u32, pick: usize, units: u64 },
    /// A direct, all-or-nothing decision.
    Decide { dt: u32, cost: u64 },
}

fn acts() -> impl Strategy<Value = Vec<Act>> {
    let spend = prop::collection::vec(prop_oneof![Just(0u16), Just(999u16), 0u16..1_000], 1..4);
    let act = prop_oneof![
        3 => (0..4usize, dt(), 1u64..12, 0u64..3, 1u32..3_000, spend)
            .prop_map(|(holder, dt, want, min, len, spend)| Act::Lease { holder, dt, want, min, len, spend }),
        2 => (0..4usize, dt(), any::<usize>(), 0u64..12)
            .prop_map(|(holder, dt, pick, units)| Act::Refund { holder, dt, pick, units }),
        3 => (dt(), 0u64..4).prop_map(|(dt, cost)| Act::Decide { dt, cost }),
    ];
    prop::collection::vec(act, 1..60)
}

/// How leaseholders use the record.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// `take_lease` / `refund_lease`.
    Lease,
    /// `take_lease` / `end_lease`: a give-back also ends the lease (the
    /// holder spends none of it afterwards).
    Close,
    /// The design before leases: a plain `take`, and `refund` dated when the
    /// units were taken (what the daemon did).
    Naive,
}

struct Held {
    term: LeaseTerm,
    /// When the holder stops spending: the lease's end, or when it was ended early.
    ends: f64,
    granted: u64,
    returned: u64,
    spend: Vec<u16>,
}

/// Runs `acts` with `holders` leaseholders on one record; returns every
/// admission `(time, units)`: direct decisions when made, and every leased
/// unit not given back at its spend time within its lease.
fn simulate(alg: &Algorithm, holders: usize, acts: &[Act], mode: Mode) -> Result<Run, TestCaseError> {
    let mut now = T0;
    let mut state: Option<State> = None;
    let mut held: Vec<Vec<Held>> = (0..holders).map(|_| Vec::new()).collect();
    let mut admitted = Vec::new();
    for act in acts {
        match act {
            Act::Lease { holder, dt, want, min, len, spend } => {
                now += f64::from(*dt);
                let until = now + f64::from(*len);
                let before = alg.available(state.as_ref(), now);
                let (granted, next) = match mode {
                    Mode::Lease | Mode::Close => alg.take_lease(state.as_ref(), now, *want, *min, until),
                    Mode::Naive => alg.take(state.as_ref(), now, *want, *min),
                };
                prop_assert!(granted <= before.min(*want), "granted {granted} of {want}, {before} available");
                prop_assert!(granted == 0 || granted >= *min);
                prop_assert_eq!(granted > 0, next.is_some());
                if granted > 0 {
                    let term = LeaseTerm { taken_at_ms: now, until_ms: until };
                    held[holder % holders].push(Held { term, ends: until, granted, returned: 0, spend: spend.clone() });
                }
                state = next.or(state);
            }
            Act::Refund { holder, dt, pick, units } => {
                now += f64::from(*dt);
                let leases = &mut held[holder % holders];
                if leases.is_empty() {
                    continue;
                }
                let n = leases.len();
                let lease = &mut leases[pick % n];
                let units = (*units).min(lease.granted - lease.returned);
                let before = alg.available(state.as_ref(), now);
                if mode == Mode::Close && lease.ends < lease.term.until_ms {
                    continue; // ended early already: nothing more to give back
                }
                let (accepted, next) = match mode {
                    Mode::Lease => alg.refund_lease(state.as_ref(), now, lease.term, units),
                    Mode::Close => {
                        let r = alg.end_lease(state.as_ref(), now, lease.term, units);
                        // The holder stops here whatever the store said.
                        lease.ends = lease.ends.min(now);
                        r
                    }
                    Mode::Naive => match alg.refund(state.as_ref(), lease.term.taken_at_ms, units) {
                        Some(next) => (units, Some(next)),
                        None => (0, None),
                    },
                };
                if mode != Mode::Naive {
                    prop_assert!(accepted <= units);
                    if mode == Mode::Lease {
                        prop_assert_eq!(accepted > 0, next.is_some());
                    }
                    if now >= lease.term.until_ms {
                        prop_assert_eq!(accepted, 0, "a refund after the lease's end was accepted");
                    }
                    let after = alg.available(next.as_ref().or(state.as_ref()), now);
                    prop_assert!(after <= before + accepted, "{before} + {accepted} accepted -> {after}");
                }
                lease.returned += accepted;
                state = next.or(state);
            }
            Act::Decide { dt, cost } => {
                now += f64::from(*dt);
                let (d, next) = alg.decide(state.as_ref(), now, *cost);
                if d.allowed && *cost > 0 {
                    admitted.push((now, *cost));
                }
                state = next.or(state);
            }
        }
        if let Some(s) = &state {
            let json = s.to_json();
            let back = alg.parse_state(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&back, s, "{}", json);
            prop_assert_eq!(back.to_json(), json);
            prop_assert!(out_of(Some(s)).len() <= MAX_LEASES_OUT);
        }
    }
    for lease in held.iter().flatten() {
        let len = lease.ends - lease.term.taken_at_ms;
        for i in 0..(lease.granted - lease.returned) as usize {
            let at = f64::from(lease.spend[i % lease.spend.len()]) / 1000.0;
            admitted.push((lease.term.taken_at_ms + len * at, 1));
        }
    }
    Ok(Run { admitted, state, now })
}

/// What [`simulate`] leaves: every admission, the record and the clock.
struct Run {
    admitted: Vec<(f64, u64)>,
    state: Option<State>,
    now: f64,
}

fn bound_property(alg: &Algorithm, holders: usize, acts: &[Act], mode: Mode) -> Result<(), TestCaseError> {
    let admitted = simulate(alg, holders, acts, mode)?.admitted;
    let (ceiling, rate) = bound_of(alg);
    check_bound(&admitted, ceiling, rate).map_err(TestCaseError::fail)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_500, ..ProptestConfig::default() })]

    /// With 1–4 leaseholders taking, spending (anywhere in their leases),
    /// giving back (before and after the end) and direct decisions in
    /// between, admissions over every interval `[a, b]` between two
    /// admissions stay within `ceiling + rate × (b − a)`.
    #[test]
    fn leased_admissions_stay_within_the_bound_over_every_interval(
        alg in refill_alg(),
        holders in 1usize..5,
        acts in acts(),
    ) {
        bound_property(&alg, holders, &acts, Mode::Lease)?;
    }

    /// The same with every give-back ending its lease early (`end_lease`):
    /// spent units count as consumed when the lease ends, not at its term.
    #[test]
    fn ended_leases_stay_within_the_bound_over_every_interval(
        alg in refill_alg(),
        holders in 1usize..5,
        acts in acts(),
    ) {
        bound_property(&alg, holders, &acts, Mode::Close)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, ..ProptestConfig::default() })]

    /// With units out, a denial's `retry_after_ms` is when the request passes
    /// (no earlier: a millisecond before it is still denied), and the record
    /// is full at its expiry, which is after every lease end.
    #[test]
    fn retry_after_and_expiry_are_honest_with_units_out(
        alg in refill_alg(),
        holders in 1usize..5,
        acts in acts(),
        dt in 0u32..2_000,
    ) {
        let Run { state, now, .. } = simulate(&alg, holders, &acts, Mode::Lease)?;
        let Some(state) = state else { return Ok(()) };
        let now = now + f64::from(dt);
        for cost in 1..=alg.ceiling() {
            let d = alg.decide(Some(&state), now, cost).0;
            if d.allowed {
                continue;
            }
            let retry = d.retry_after_ms as f64;
            prop_assert!(alg.decide(Some(&state), now + retry, cost).0.allowed, "cost {}: not allowed after {:?}", cost, d);
            if retry > 1.0 {
                prop_assert!(!alg.decide(Some(&state), now + retry - 1.0, cost).0.allowed, "cost {}: allowed before {:?}", cost, d);
            }
        }
        let exp = alg.expires_at_ms(&state);
        let last_end = out_of(Some(&state)).iter().map(|o| o.until_ms).fold(f64::MIN, f64::max);
        prop_assert!(exp >= last_end, "expires at +{} before a lease ends at +{}", exp - T0, last_end - T0);
        // Full at its expiry. (The expiry may be a little late — the record
        // is then kept longer than needed, which costs storage, not accuracy.)
        prop_assert_eq!(alg.available(Some(&state), exp), alg.ceiling());
    }
}

/// The bound property is able to fail: run against the design without leases
/// (plain `take`, `refund`), it finds a violation.
#[test]
fn the_bound_property_catches_plain_take_and_refund() {
    let config = Config { cases: 1_500, failure_persistence: None, ..Config::default() };
    let rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut runner = TestRunner::new_with_rng(config, rng);
    let result = runner.run(&(refill_alg(), 1usize..5, acts()), |(alg, holders, acts)| {
        bound_property(&alg, holders, &acts, Mode::Naive)
    });
    match result {
        Err(TestError::Fail(why, (alg, holders, acts))) => {
            eprintln!("plain take/refund: {why}\n{alg:?}, {holders} holders, {acts:?}");
        }
        other => panic!("the naive design passed the bound check: {other:?}"),
    }
}

#[test]
fn a_plain_take_overshoots_where_a_lease_does_not() {
    // 10 tokens, 10 per second. A holder takes the whole bucket at T0 and
    // spends it at T0 + 999 ms; meanwhile direct requests come at T0 + 999 ms.
    let a = alg(r#"{"algorithm":"token_bucket","capacity":10,"refill_per_sec":10}"#);
    let at = T0 + 999.0;
    let drain = |mut state: Option<State>| {
        let mut n = 0;
        loop {
            let (d, next) = a.decide(state.as_ref(), at, 1);
            if !d.allowed {
                return n;
            }
            n += 1;
            state = next;
        }
    };
    let (g, plain) = a.take(None, T0, 10, 1);
    assert_eq!((g, drain(plain)), (10, 9), "9.99 tokens refilled: 19 admissions at one instant");
    let (g, leased) = a.take_lease(None, T0, 10, 1, T0 + 1_000.0);
    assert_eq!((g, drain(leased)), (10, 0), "the cap holds the level at 0 while 10 are out");
}

#[test]
fn token_bucket_lease_holds_the_cap_until_its_end() {
    let a = alg(r#"{"algorithm":"token_bucket","capacity":10,"refill_per_sec":10}"#);
    let until = T0 + 1_000.0;
    let (g, s) = a.take_lease(None, T0, 4, 1, until);
    assert_eq!(g, 4);
    assert_eq!(
        s.as_ref().unwrap().to_json(),
        r#"{"tokens":6.0,"ts":1700000000000.0,"out":[[4,1700000001000.0,1700000000000.0]]}"#
    );
    let (d, s2) = a.decide(s.as_ref(), T0, 6);
    assert!(d.allowed && d.remaining == 0);
    // 0.5 s later 5 tokens refilled, but 4 are out of 10: the cap is 6.
    let s2 = s2.unwrap();
    assert_eq!(a.available(Some(&s2), T0 + 500.0), 5);
    assert_eq!(a.available(Some(&s2), T0 + 900.0), 6, "capped at 10 − 4");
    assert_eq!(a.available(Some(&s2), T0 + 999.0), 6);
    // The lease ends: its units count as consumed there; refill resumes from 6.
    assert_eq!(a.available(Some(&s2), until), 6);
    assert_eq!(a.available(Some(&s2), until + 200.0), 8);
    // An honest retry: 10 units need the lease to end, then 4 more tokens.
    let d = a.decide(Some(&s2), T0 + 700.0, 10).0;
    assert_eq!(d.retry_after_ms, 300 + 400, "{d:?}");
    assert!(a.decide(Some(&s2), T0 + 1_399.0, 10).1.is_none());
    assert!(a.decide(Some(&s2), T0 + 1_400.0, 10).1.is_some());
    // Not fresh while units are out, full at expiry.
    let exp = a.expires_at_ms(&s2);
    assert_eq!(exp, T0 + 1_400.0);
    assert_eq!(a.decide(Some(&s2), T0 + 700.0, 0).0.reset_after_ms, 700);
    assert_eq!(a.available(Some(&s2), exp), 10);
    // Giving back before the end restores the units; after it, nothing.
    let term = LeaseTerm { taken_at_ms: T0, until_ms: until };
    let (m, s3) = a.refund_lease(Some(&s2), T0 + 100.0, term, 3);
    assert_eq!(m, 3);
    assert_eq!(a.available(s3.as_ref(), T0 + 100.0), 1 + 3);
    assert_eq!(a.refund_lease(s3.as_ref(), T0 + 100.0, term, 5).0, 1, "at most the units still out");
    assert_eq!(a.refund_lease(Some(&s2), until, term, 3), (0, None), "the lease has ended");
    assert_eq!(a.refund_lease(Some(&s2), T0, LeaseTerm { taken_at_ms: T0 + 1.0, ..term }, 3), (0, None));
    // A refund from a clock behind a later write is judged at the record's time.
    let (_, later) = a.decide(Some(&s2), until + 10.0, 1);
    assert_eq!(a.refund_lease(later.as_ref(), T0 + 500.0, term, 3), (0, None));
}

#[test]
fn gcra_lease_holds_the_cap_until_its_end() {
    // 10 per second (an interval of 100 ms), bursts of 5.
    let a = alg(r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":5}"#);
    let until = T0 + 1_000.0;
    let term = LeaseTerm { taken_at_ms: T0, until_ms: until };
    let (g, s) = a.take_lease(None, T0, 5, 1, until);
    assert_eq!(g, 5);
    let s = s.unwrap();
    assert_eq!(s.to_json(), r#"{"tat":1700000000500.0,"out":[[5,1700000001000.0,1700000000000.0]]}"#);
    for t in [0.0, 100.0, 500.0, 999.0, 1_000.0] {
        assert_eq!(a.available(Some(&s), T0 + t), 0, "at +{t}");
    }
    assert_eq!(a.available(Some(&s), until + 100.0), 1, "refill resumes at the end");
    let d = a.decide(Some(&s), T0 + 300.0, 2).0;
    assert_eq!(d.retry_after_ms, 700 + 200, "{d:?}");
    assert_eq!(a.expires_at_ms(&s), until + 500.0);
    assert_eq!(a.available(Some(&s), until + 500.0), 5);
    let (m, back) = a.refund_lease(Some(&s), T0 + 200.0, term, 2);
    assert_eq!(m, 2);
    assert_eq!(a.available(back.as_ref(), T0 + 200.0), 2);
    assert_eq!(a.refund_lease(Some(&s), until, term, 2), (0, None));
    // A plain decision writes the record: it keeps the 3 units still out.
    let (_, s2) = a.decide(back.as_ref(), T0 + 200.0, 1);
    assert_eq!(a.available(s2.as_ref(), T0 + 200.0), 1);
    assert_eq!(a.available(s2.as_ref(), T0 + 999.0), 2, "capped at 5 − 3");
    assert_eq!(a.available(s2.as_ref(), until), 2);
}

#[test]
fn leaky_bucket_leases_like_a_token_bucket_of_the_same_shape() {
    let leaky = alg(r#"{"algorithm":"leaky_bucket","capacity":6,"leak_per_sec":4}"#);
    let token = alg(r#"{"algorithm":"token_bucket","capacity":6,"refill_per_sec":4}"#);
    let (mut ls, mut ts) = (None, None);
    for (i, t) in [0.0, 10.0, 250.0, 600.0, 1_300.0].into_iter().enumerate() {
        let now = T0 + t;
        let until = now + 500.0;
        let (a, ln) = leaky.take_lease(ls.as_ref(), now, 3, 1, until);
        let (b, tn) = token.take_lease(ts.as_ref(), now, 3, 1, until);
        assert_eq!(a, b, "step {i}");
        ls = ln.or(ls);
        ts = tn.or(ts);
        assert_eq!(leaky.status(ls.as_ref(), now + 100.0), token.status(ts.as_ref(), now + 100.0));
        let term = LeaseTerm { taken_at_ms: now, until_ms: until };
        let (a, ln) = leaky.refund_lease(ls.as_ref(), now + 50.0, term, 1);
        let (b, tn) = token.refund_lease(ts.as_ref(), now + 50.0, term, 1);
        assert_eq!(a, b);
        ls = ln.or(ls);
        ts = tn.or(ts);
        assert_eq!(leaky.decide(ls.as_ref(), now + 60.0, 2).0, token.decide(ts.as_ref(), now + 60.0, 2).0);
    }
    match &ls {
        Some(State::LeakyBucket(s)) => assert!(!s.out.is_empty() && s.level >= 1.0, "{s:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn lease_terms_must_be_finite_and_end_after_the_record_time() {
    for json in [
        r#"{"algorithm":"gcra","limit":10,"period":"1s"}"#,
        r#"{"algorithm":"token_bucket","capacity":10,"refill_per_sec":1}"#,
        r#"{"algorithm":"leaky_bucket","capacity":10,"leak_per_sec":1}"#,
    ] {
        let a = alg(json);
        assert_eq!(a.take_lease(None, T0, 3, 1, T0), (0, None), "{json}: ends as it starts");
        assert_eq!(a.take_lease(None, T0, 3, 1, T0 - 1.0), (0, None), "{json}");
        assert_eq!(a.take_lease(None, T0, 3, 1, f64::INFINITY), (0, None), "{json}");
        assert_eq!(a.take_lease(None, f64::NAN, 3, 1, T0), (0, None), "{json}");
        assert_eq!(a.take_lease(None, T0, 0, 0, T0 + 1.0), (0, None), "{json}: nothing wanted");
        assert_eq!(a.take_lease(None, T0, 3, 11, T0 + 1.0), (0, None), "{json}: min above what is available");
        assert_eq!(a.take_lease(None, T0, 30, 1, T0 + 1.0).0, 10, "{json}: partial grant");
        assert_eq!(a.refund_lease(None, T0, LeaseTerm { taken_at_ms: T0, until_ms: T0 + 1.0 }, 3), (0, None));
    }
}

#[test]
fn leases_with_the_same_term_share_an_entry_and_the_list_is_bounded() {
    let a = alg(r#"{"algorithm":"token_bucket","capacity":200,"refill_per_sec":1}"#);
    let (_, s) = a.take_lease(None, T0, 2, 1, T0 + 5_000.0);
    let (_, s) = a.take_lease(s.as_ref(), T0, 3, 1, T0 + 5_000.0);
    assert_eq!(out_of(s.as_ref()), &[LeaseOut { units: 5, until_ms: T0 + 5_000.0, taken_at_ms: T0 }]);

    let mut state = None;
    let mut admitted = Vec::new();
    let term = |i: u32| {
        let now = T0 + f64::from(i);
        LeaseTerm { taken_at_ms: now, until_ms: now + 10_000.0 - f64::from(i % 7) * 1_000.0 }
    };
    for i in 0..200u32 {
        let LeaseTerm { taken_at_ms: now, until_ms: until } = term(i);
        let (g, next) = a.take_lease(state.as_ref(), now, 1, 1, until);
        assert_eq!(g, 1, "lease {i}");
        state = next;
        assert!(out_of(state.as_ref()).len() <= MAX_LEASES_OUT);
        admitted.push((until - 1.0, 1)); // spent as late as possible
    }
    let out = out_of(state.as_ref());
    assert_eq!(out.len(), MAX_LEASES_OUT);
    assert_eq!(out.iter().map(|o| o.units).sum::<u64>(), 200, "merged, never dropped");
    assert!(out.windows(2).all(|w| (w[0].until_ms, w[0].taken_at_ms) <= (w[1].until_ms, w[1].taken_at_ms)));
    // The lease ending last kept its identity; one ending early was merged
    // into a later entry and can no longer be given back.
    assert_eq!(a.refund_lease(state.as_ref(), T0 + 300.0, term(196), 1).0, 1);
    assert_eq!(a.refund_lease(state.as_ref(), T0 + 300.0, term(6), 1), (0, None));
    // Direct traffic as late as it can: still within the bound.
    let mut now = T0 + 200.0;
    while now < T0 + 12_000.0 {
        let (d, next) = a.decide(state.as_ref(), now, 1);
        if d.allowed {
            admitted.push((now, 1));
            state = next;
        }
        now += 37.0;
    }
    check_bound(&admitted, 200.0, 0.001).unwrap();
}

#[test]
fn window_leases_are_takes_and_refunds_into_their_own_window() {
    for json in [
        r#"{"algorithm":"fixed_window","limit":10,"window":"1s"}"#,
        r#"{"algorithm":"quota","limit":10,"window":"1s"}"#,
        r#"{"algorithm":"sliding_window","limit":10,"window":"1s"}"#,
    ] {
        let a = alg(json);
        let now = T0 + 250.0;
        let until = a.window_end_ms(now).unwrap();
        assert_eq!(until, T0 + 1_000.0);
        let (g, s) = a.take_lease(None, now, 7, 1, until);
        assert_eq!((g, &s), (7, &a.take(None, now, 7, 1).1), "{json}");
        let term = LeaseTerm { taken_at_ms: now, until_ms: until };
        let (m, back) = a.refund_lease(s.as_ref(), now + 10.0, term, 20);
        assert_eq!(m, 7, "{json}: at most what the window counted");
        assert_eq!(a.available(back.as_ref(), now + 10.0), 10);
        // In the next window the fixed windows have nothing to give back into.
        let (_, next) = a.decide(s.as_ref(), until + 1.0, 1);
        let (m, _) = a.refund_lease(next.as_ref(), until + 1.0, term, 7);
        if a.kind() == AlgorithmKind::SlidingWindow {
            assert_eq!(m, 7, "back into the previous window's count");
        } else {
            assert_eq!(m, 0, "{json}");
        }
    }
}

#[test]
fn sliding_log_refund_removes_only_its_own_entry() {
    // Take 5 at T0; another writer takes 10 at T0 + 1.5 s (a 1 s window, limit
    // 10); a refund of 4 dated T0 must not free the other writer's units.
    let a = alg(r#"{"algorithm":"sliding_log","limit":10,"window":"1s"}"#);
    let (g, s) = a.take(None, T0, 5, 1);
    assert_eq!(g, 5);
    let (g, s) = a.take(s.as_ref(), T0 + 1_500.0, 10, 1);
    assert_eq!(g, 10);
    let term = LeaseTerm { taken_at_ms: T0, until_ms: T0 + 1_000.0 };
    assert_eq!(a.refund_lease(s.as_ref(), T0 + 1_500.0, term, 4), (0, None));
    let mut state = a.refund(s.as_ref(), T0, 4).or(s);
    let mut admitted = 10;
    for dt in 0..100 {
        let (d, next) = a.decide(state.as_ref(), T0 + 1_500.0 + f64::from(dt), 1);
        admitted += u64::from(d.allowed);
        state = next.or(state);
    }
    assert_eq!(admitted, 10, "{admitted} admitted within 100 ms");
    // While its own entry is live, a refund takes units from it alone.
    let (_, s) = a.take(None, T0, 5, 1);
    let (_, s) = a.take(s.as_ref(), T0 + 100.0, 5, 1);
    let back = a.refund(s.as_ref(), T0, 9);
    match back {
        Some(State::SlidingLog(l)) => assert_eq!(l.log, vec![(T0 + 100.0, 5)]),
        other => panic!("{other:?}"),
    }
}

/// Traffic of other writers between a take and its refund.
#[derive(Debug, Clone)]
enum Other {
    Decide { dt: u32, cost: u64 },
    Take { dt: u32, want: u64 },
}

fn others() -> impl Strategy<Value = Vec<Other>> {
    let other = prop_oneof![
        (dt(), 0u64..5).prop_map(|(dt, cost)| Other::Decide { dt, cost }),
        (dt(), 1u64..8).prop_map(|(dt, want)| Other::Take { dt, want }),
    ];
    prop::collection::vec(other, 0..30)
}

/// Units admitted in `[from, to)`.
fn units_in(admitted: &[(f64, u64)], from: f64, to: f64) -> u64 {
    admitted.iter().filter(|a| a.0 >= from && a.0 < to).map(|a| a.1).sum()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, ..ProptestConfig::default() })]

    /// A holder takes a lease, other writers come and go, then the holder
    /// gives back some units, before or after its lease ended, and what is
    /// available is drained at once. For every algorithm the result is what
    /// its model allows: the refund frees at most the units accepted, and
    /// all admissions (the holder's unrefunded units included) still meet the
    /// algorithm's guarantee.
    #[test]
    fn a_refund_after_other_writers_frees_only_what_the_model_allows(
        alg in any_alg(),
        offset in 0u32..3_000,
        want in 1u64..10,
        len in 1u32..3_000,
        others in others(),
        refund_dt in dt(),
        give_back in 0u64..10,
        spend_at in 0u16..1_000,
    ) {
        let t0 = T0 + f64::from(offset);
        let until = alg.window_end_ms(t0).unwrap_or(t0 + f64::from(len));
        let (g, state) = alg.take_lease(None, t0, want, 1, until);
        prop_assert!(g > 0);
        let mut state = state;
        let mut admitted: Vec<(f64, u64)> = Vec::new();
        let mut now = t0;
        for other in &others {
            match *other {
                Other::Decide { dt, cost } => {
                    now += f64::from(dt);
                    let (d, next) = alg.decide(state.as_ref(), now, cost);
                    if d.allowed && cost > 0 {
                        admitted.push((now, cost));
                    }
                    state = next.or(state);
                }
                Other::Take { dt, want } => {
                    now += f64::from(dt);
                    // Spent at once: a lease of one millisecond (or to the window's end).
                    let end = alg.window_end_ms(now).unwrap_or(now + 1.0);
                    let (n, next) = alg.take_lease(state.as_ref(), now, want, 1, end);
                    if n > 0 {
                        admitted.push((now, n));
                    }
                    state = next.or(state);
                }
            }
        }
        now += f64::from(refund_dt);
        let m = give_back.min(g);
        let before = alg.available(state.as_ref(), now);
        let term = LeaseTerm { taken_at_ms: t0, until_ms: until };
        let (accepted, next) = alg.refund_lease(state.as_ref(), now, term, m);
        prop_assert!(accepted <= m);
        if is_refill(&alg) && now >= until {
            prop_assert_eq!(accepted, 0, "accepted after the lease ended");
        }
        let state = next.or(state);
        let after = alg.available(state.as_ref(), now);
        prop_assert!(after <= before + accepted, "{} + {} accepted -> {}", before, accepted, after);
        // Everything available is admitted at once.
        let mut state = state;
        for _ in 0..=alg.ceiling() {
            let (d, next) = alg.decide(state.as_ref(), now, 1);
            if !d.allowed {
                break;
            }
            admitted.push((now, 1));
            state = next;
        }
        prop_assert!(!alg.decide(state.as_ref(), now, 1).0.allowed);
        // The holder spends what it kept: anywhere in the lease where the
        // record counts leases; at the take for the window algorithms (the
        // same window) and the sliding log (which counts units when taken).
        let spent = g - accepted;
        let spend_time = if is_refill(&alg) { t0 + (until - t0) * f64::from(spend_at) / 1000.0 } else { t0 };
        admitted.push((spend_time, spent));

        let limit = alg.ceiling();
        match &alg {
            a if is_refill(a) => {
                let (ceiling, rate) = bound_of(a);
                check_bound(&admitted, ceiling, rate).map_err(TestCaseError::fail)?;
            }
            Algorithm::SlidingLog(log) => {
                let w = log.window().as_f64();
                for &(t, _) in &admitted {
                    // A true sliding window ending at each admission: (t − w, t].
                    let n: u64 = admitted.iter().filter(|a| a.0 > t - w && a.0 <= t).map(|a| a.1).sum();
                    prop_assert!(n <= limit, "{} admitted in the window ending at +{}, limit {}", n, t - T0, limit);
                }
            }
            a => {
                let span = match a {
                    Algorithm::FixedWindow(f) => f.window().as_f64(),
                    Algorithm::Quota(q) => q.window().as_f64(),
                    Algorithm::SlidingWindow(s) => s.window().as_f64(),
                    _ => unreachable!(),
                };
                for &(t, _) in &admitted {
                    let start = (t / span).floor() * span;
                    let n = units_in(&admitted, start, start + span);
                    prop_assert!(n <= limit, "{} admitted in the window at +{}, limit {}", n, start - T0, limit);
                }
                if let Algorithm::SlidingWindow(_) = a {
                    // The weighted estimate over the true counts stays within the limit.
                    let start = (now / span).floor() * span;
                    let cur = units_in(&admitted, start, start + span) as f64;
                    let prev = units_in(&admitted, start - span, start) as f64;
                    let estimate = prev * (1.0 - (now - start) / span) + cur;
                    prop_assert!(estimate <= limit as f64 + 1e-6, "estimate {} > limit {}", estimate, limit);
                }
            }
        }
    }
}
