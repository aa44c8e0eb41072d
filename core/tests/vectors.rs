//! The cross-language test vectors in `bindings/vectors.json`: for every
//! algorithm, sequences of (spec, state JSON in, time, cost) → (decision, state
//! JSON out), generated here from core and replayed exactly by the Node, Python
//! and wasm bindings' tests.
//!
//! `LEASEHOLD_WRITE_VECTORS=1 cargo test -p leasehold-core --test vectors`
//! rewrites the file; otherwise this test fails when the committed file is not
//! what core generates now (so a change in core's behaviour shows up as a diff).

use std::sync::Arc;

use leasehold_core::{Algorithm, Decision, LocalLimiter, ManualClock, State, MAX_UNITS};
use serde_json::{json, Value};

const T0: f64 = 1_700_000_000_123.0;

/// The limits the vectors exercise: two or three per algorithm, with
/// fractional rates and intervals that are not whole milliseconds.
const SPECS: &[&str] = &[
    r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":3}"#,
    r#"{"algorithm":"gcra","limit":1000,"period":"60s","burst":100}"#,
    r#"{"algorithm":"gcra","limit":7,"period":"1.5s"}"#,
    r#"{"algorithm":"token_bucket","capacity":5,"refill_per_sec":2}"#,
    r#"{"algorithm":"token_bucket","capacity":100,"refill_per_sec":0.3}"#,
    r#"{"algorithm":"leaky_bucket","capacity":5,"leak_per_sec":2.5}"#,
    r#"{"algorithm":"leaky_bucket","capacity":50,"leak_per_sec":0.7}"#,
    r#"{"algorithm":"fixed_window","limit":3,"window":"1s"}"#,
    r#"{"algorithm":"fixed_window","limit":100,"window":"1m"}"#,
    r#"{"algorithm":"sliding_window","limit":5,"window":"1s"}"#,
    r#"{"algorithm":"sliding_window","limit":60,"window":"1m"}"#,
    r#"{"algorithm":"sliding_log","limit":4,"window":"1s"}"#,
    r#"{"algorithm":"sliding_log","limit":10,"window":"10s"}"#,
    r#"{"algorithm":"quota","limit":1000,"window":"1d"}"#,
    r#"{"algorithm":"quota","limit":3,"window":"500ms"}"#,
];

/// Specs each binding must refuse, with the field its error must name.
const BAD_SPECS: &[&str] = &[
    r#"{"algorithm":"gcra","limit":0,"period":"1s"}"#,
    r#"{"algorithm":"gcra","limit":10,"period":"60"}"#,
    r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":-1}"#,
    r#"{"algorithm":"gcra","limit":10}"#,
    r#"{"algorithm":"token_bucket","capacity":5,"refill_per_sec":0}"#,
    r#"{"algorithm":"leaky_bucket","capacity":1.5,"leak_per_sec":1}"#,
    r#"{"algorithm":"fixed_window","limit":3,"window":"0s"}"#,
    r#"{"algorithm":"sliding_log","limit":3,"window":"1s","burst":2}"#,
    r#"{"algorithm":"fastest","limit":3}"#,
    r#"{"limit":3,"window":"1s"}"#,
    r#"[1,2]"#,
];

/// State JSON each binding must refuse for the given spec.
const BAD_STATES: &[(&str, &str)] = &[
    (r#"{"algorithm":"gcra","limit":10,"period":"1s"}"#, r#"{"tokens":1}"#),
    (r#"{"algorithm":"token_bucket","capacity":5,"refill_per_sec":2}"#, r#"not json"#),
    (r#"{"algorithm":"fixed_window","limit":3,"window":"1s"}"#, r#"{"w":1,"n":-2}"#),
];

/// A deterministic pseudo-random sequence (a 64-bit LCG), so the file is stable.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

fn decision_json(d: &Decision) -> Value {
    serde_json::to_value(d).expect("decision serializes")
}

/// One transition from `state_in` at `now_ms` for `cost`, as a vector step.
fn step(alg: &Algorithm, state_in: Option<&str>, now_ms: f64, cost: u64) -> (Value, Option<String>) {
    let state = state_in.map(|s| alg.parse_state(s).expect("generated state parses"));
    let (decision, next) = alg.decide(state.as_ref(), now_ms, cost);
    let changed = next.is_some();
    let state_out = match &next {
        Some(s) => Some(s.to_json()),
        None => state_in.map(str::to_owned),
    };
    let after: Option<State> = next.or(state);
    let status = alg.status(after.as_ref(), now_ms);
    let v = json!({
        "stateIn": state_in,
        "nowMs": now_ms,
        "cost": cost,
        "decision": decision_json(&decision),
        "changed": changed,
        "stateOut": state_out,
        "status": decision_json(&status),
    });
    (v, state_out)
}

/// A chained sequence from no state: each step's state in is the previous
/// step's state out. `moves` are (time delta in ms, cost).
fn chain(alg: &Algorithm, moves: &[(f64, u64)]) -> Vec<Value> {
    let mut now = T0;
    let mut state: Option<String> = None;
    moves
        .iter()
        .map(|&(dt, cost)| {
            now += dt;
            let (v, out) = step(alg, state.as_deref(), now, cost);
            state = out;
            v
        })
        .collect()
}

fn cases() -> Vec<Value> {
    let mut cases = Vec::new();
    for (i, spec) in SPECS.iter().enumerate() {
        let alg = Algorithm::from_json(spec).expect("vector specs are valid");
        let spec_value: Value = serde_json::from_str(spec).expect("spec is JSON");
        let name = alg.kind().name();
        let ceiling = alg.ceiling();
        let mut scripted = Vec::new();
        // Drain the ceiling one unit at a time, then the edge costs.
        scripted.extend((0..ceiling.min(6) + 1).map(|_| (0.0, 1)));
        scripted.extend([(0.0, 0), (0.0, ceiling), (0.0, ceiling + 1), (0.0, MAX_UNITS)]);
        // Small and fractional forward steps.
        scripted.extend([(0.1, 1), (99.9, 1), (150.25, 2), (333.333, 1), (1.0, 0)]);
        // The clock steps back, then forward again past where it was.
        scripted.extend([(-5_000.0, 1), (-0.5, 1), (0.0, 0), (5_600.0, 1), (-250.0, 1)]);
        // A full recovery, then the whole ceiling at once, then one more.
        scripted.extend([(3_600_000.0, ceiling), (0.0, 1), (0.0, 0)]);
        // Huge gaps: a year, then ~31,000 years; then a step back of a day.
        scripted.extend([(31_536_000_000.0, 1), (1e15, 1), (-86_400_000.0, 1), (1.0, ceiling + 1)]);
        cases.push(json!({
            "name": format!("{name} #{i} scripted"),
            "spec": spec_value,
            "chained": true,
            "steps": chain(&alg, &scripted),
        }));

        let mut rng = Lcg(0x1ea5e401d + i as u64);
        let deltas = [0.0, 0.0, 1.0, 7.5, 40.0, 99.999, 250.0, 1_000.0, 30_000.0, -3.0, -1_200.0, 86_400_000.0];
        let costs = [0, 1, 1, 1, 2, 3, ceiling / 2, ceiling, ceiling + 1];
        let moves: Vec<(f64, u64)> = (0..40).map(|_| (rng.pick(&deltas), rng.pick(&costs))).collect();
        cases.push(json!({
            "name": format!("{name} #{i} random"),
            "spec": spec_value,
            "chained": true,
            "steps": chain(&alg, &moves),
        }));

        // One stored state, read back at earlier, equal and later times.
        let seeded = chain(&alg, &[(0.0, 1), (10.0, 1), (25.5, ceiling.min(2))]);
        let state = seeded.last().and_then(|s| s["stateOut"].as_str()).map(str::to_owned);
        let base = T0 + 35.5;
        let probes: Vec<Value> = [
            (-60_000.0, 1),
            (-1.0, 0),
            (0.0, 1),
            (0.0, ceiling),
            (0.5, 1),
            (1_000.0, 2),
            (1e12, ceiling),
            (f64::from(u32::MAX), MAX_UNITS),
        ]
        .iter()
        .map(|&(dt, cost)| step(&alg, state.as_deref(), base + dt, cost).0)
        .collect();
        cases.push(json!({
            "name": format!("{name} #{i} from stored state"),
            "spec": spec_value,
            "chained": false,
            "steps": probes,
        }));
    }
    cases
}

fn spec_errors() -> Vec<Value> {
    BAD_SPECS
        .iter()
        .map(|spec| {
            let e = Algorithm::from_json(spec).expect_err("bad spec is refused");
            json!({ "spec": spec, "field": e.field, "message": e.to_string() })
        })
        .collect()
}

fn state_errors() -> Vec<Value> {
    BAD_STATES
        .iter()
        .map(|(spec, state)| {
            let alg = Algorithm::from_json(spec).expect("spec is valid");
            let e = alg.parse_state(state).expect_err("bad state is refused");
            json!({ "spec": serde_json::from_str::<Value>(spec).unwrap(), "stateJson": state, "message": e.to_string() })
        })
        .collect()
}

/// The file's text: readable JSON with one step per line.
fn render() -> String {
    let mut out = String::new();
    out.push_str("{\n");
    out.push_str("  \"about\": \"Generated by core/tests/vectors.rs (LEASEHOLD_WRITE_VECTORS=1 cargo test -p leasehold-core --test vectors). Every binding replays these exactly.\",\n");
    out.push_str(&format!("  \"maxUnits\": {MAX_UNITS},\n"));
    out.push_str("  \"cases\": [\n");
    let cases = cases();
    for (ci, case) in cases.iter().enumerate() {
        out.push_str(&format!(
            "    {{\"name\": {}, \"spec\": {}, \"chained\": {}, \"steps\": [\n",
            case["name"], case["spec"], case["chained"]
        ));
        let steps = case["steps"].as_array().expect("steps");
        for (si, s) in steps.iter().enumerate() {
            out.push_str(&format!("      {}{}\n", s, if si + 1 < steps.len() { "," } else { "" }));
        }
        out.push_str(&format!("    ]}}{}\n", if ci + 1 < cases.len() { "," } else { "" }));
    }
    out.push_str("  ],\n");
    for (key, list, last) in [("specErrors", spec_errors(), false), ("stateErrors", state_errors(), true)] {
        out.push_str(&format!("  \"{key}\": [\n"));
        for (i, e) in list.iter().enumerate() {
            out.push_str(&format!("    {}{}\n", e, if i + 1 < list.len() { "," } else { "" }));
        }
        out.push_str(if last { "  ]\n" } else { "  ],\n" });
    }
    out.push_str("}\n");
    out
}

fn path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bindings/vectors.json")
}

#[test]
fn vectors_file_is_up_to_date() {
    let text = render();
    let _: Value = serde_json::from_str(&text).expect("rendered vectors are JSON");
    if std::env::var_os("LEASEHOLD_WRITE_VECTORS").is_some_and(|v| v == "1") {
        std::fs::write(path(), &text).expect("write bindings/vectors.json");
        return;
    }
    let committed = std::fs::read_to_string(path()).expect("bindings/vectors.json exists");
    assert!(
        committed == text,
        "bindings/vectors.json is stale: rerun with LEASEHOLD_WRITE_VECTORS=1 cargo test -p leasehold-core --test vectors"
    );
}

/// The chained cases replayed through the in-process limiter, as the bindings do.
#[test]
fn local_limiter_replays_the_chained_cases() {
    let mut replayed = 0;
    for case in cases().iter().filter(|c| c["chained"] == true) {
        let alg: Algorithm = serde_json::from_value(case["spec"].clone()).expect("spec");
        let clock = Arc::new(ManualClock::new(0.0));
        let limiter = LocalLimiter::new(alg, 4, clock.clone());
        for s in case["steps"].as_array().expect("steps") {
            clock.set(s["nowMs"].as_f64().expect("nowMs"));
            let d = limiter.check("key", s["cost"].as_u64().expect("cost"));
            assert_eq!(decision_json(&d), s["decision"], "{}", case["name"]);
            assert_eq!(limiter.state("key").map(|s| s.to_json()).as_deref(), s["stateOut"].as_str());
            assert_eq!(decision_json(&limiter.status("key")), s["status"]);
            replayed += 1;
        }
    }
    assert!(replayed > 500, "{replayed}");
}

/// The error vectors name the field the host-language errors must name.
#[test]
fn error_vectors_name_fields() {
    let fields: Vec<String> = spec_errors().iter().map(|e| e["field"].as_str().expect("field").to_owned()).collect();
    for f in ["limit", "period", "burst", "refill_per_sec", "capacity", "window", "algorithm", "spec"] {
        assert!(fields.iter().any(|x| x == f), "no vector names `{f}`: {fields:?}");
    }
}
