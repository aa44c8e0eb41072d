//! One conformance suite, generated for every backend: memory, embedded (redb)
//! and DynamoDB (a real DynamoDB-API server on loopback, started by tests/run.sh).

mod common;

use std::sync::Arc;

use async_trait::async_trait;
use leasehold::lease::counter::{Counters, Op, Scope};
use leasehold::store::fault::FaultStore;
use leasehold::store::{Cas, CasSettings, PutOutcome, Record, Store, StoreError, StoreUnavailable};
use leasehold_core::{Algorithm, Clock, ManualClock, State};

fn now_ms() -> f64 {
    leasehold_core::SystemClock.now_ms().floor()
}

fn record(state: &str, version: u64) -> Record {
    Record { state: state.into(), version, expires_at_ms: now_ms() as u64 + 3_600_000, write_id: 0 }
}

fn cas(store: Arc<dyn Store>, clock: Arc<ManualClock>, prefix: &str) -> Counters {
    Counters::new(Cas::new(store, clock, CasSettings { prefix: prefix.into(), ..CasSettings::default() }))
}

fn alg(json: &str) -> Algorithm {
    Algorithm::from_json(json).unwrap()
}

/// A store where another writer always gets in between a read and a write: it
/// rewrites the current state (or a fresh GCRA state) with the next version.
struct AlwaysRaced(Arc<dyn Store>);

#[async_trait]
impl Store for AlwaysRaced {
    fn name(&self) -> &'static str {
        "raced"
    }

    async fn get(&self, key: &str) -> Result<Option<Record>, StoreError> {
        self.0.get(key).await
    }

    async fn put_if(&self, key: &str, record: &Record, expected: Option<u64>) -> Result<PutOutcome, StoreError> {
        let current = self.0.get(key).await?;
        let state = current.map_or_else(|| r#"{"tat":0.0}"#.to_string(), |c| c.state);
        let rival =
            Record { state, version: expected.map_or(1, |v| v + 1), expires_at_ms: record.expires_at_ms, write_id: 0 };
        assert_eq!(self.0.put_if(key, &rival, expected).await?, PutOutcome::Written);
        self.0.put_if(key, record, expected).await
    }
}

macro_rules! conformance {
    ($backend:ident, $make:expr) => {
        mod $backend {
            use super::*;

            async fn store() -> Option<Arc<dyn Store>> {
                $make
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn first_write_requires_absence() {
                let Some(s) = store().await else { return };
                let key = common::unique_prefix("first");
                assert_eq!(s.get(&key).await.unwrap(), None);
                let first = record("{}", 1);
                assert_eq!(s.put_if(&key, &first, None).await.unwrap(), PutOutcome::Written);
                assert_eq!(s.get(&key).await.unwrap(), Some(first.clone()));
                assert_eq!(s.put_if(&key, &first, None).await.unwrap(), PutOutcome::Conflict);
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_stale_version_conflicts_and_writes_nothing() {
                let Some(s) = store().await else { return };
                let key = common::unique_prefix("stale");
                s.put_if(&key, &record("a", 1), None).await.unwrap();
                assert_eq!(s.put_if(&key, &record("b", 2), Some(1)).await.unwrap(), PutOutcome::Written);
                assert_eq!(s.put_if(&key, &record("c", 2), Some(1)).await.unwrap(), PutOutcome::Conflict);
                assert_eq!(s.put_if(&key, &record("c", 2), Some(7)).await.unwrap(), PutOutcome::Conflict);
                assert_eq!(s.get(&key).await.unwrap().unwrap().state, "b");
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_expired_record_reads_as_absent_and_the_version_goes_on() {
                let Some(s) = store().await else { return };
                let clock = Arc::new(ManualClock::new(now_ms()));
                let cas = cas(s.clone(), clock.clone(), &common::unique_prefix("expiry"));
                let a = alg(r#"{"algorithm":"fixed_window","limit":2,"window":"1h"}"#);
                for expected in [true, true, false] {
                    let r = cas.apply("l", "k", &a, Op::Decide { cost: 1 }).await.unwrap();
                    assert_eq!(r.decision.allowed, expected);
                }
                let before = s.get(&cas.storage_key(Scope::Host, "l", "k")).await.unwrap().unwrap();
                clock.set(before.expires_at_ms as f64);
                let r = cas.apply("l", "k", &a, Op::Decide { cost: 2 }).await.unwrap();
                assert!(r.decision.allowed, "the expired record read as absent");
                let after = s.get(&cas.storage_key(Scope::Host, "l", "k")).await.unwrap().unwrap();
                assert!(after.version > before.version, "versions never repeat: {before:?} -> {after:?}");
                assert!(after.expires_at_ms > before.expires_at_ms);
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ttl_fields_are_written_together_and_agree() {
                let Some(s) = store().await else { return };
                let clock = Arc::new(ManualClock::new(now_ms() + 0.5));
                let cas = cas(s.clone(), clock.clone(), &common::unique_prefix("ttl"));
                let a = alg(r#"{"algorithm":"token_bucket","capacity":10,"refill_per_sec":3}"#);
                cas.apply("l", "k", &a, Op::Decide { cost: 4 }).await.unwrap();
                let rec = s.get(&cas.storage_key(Scope::Host, "l", "k")).await.unwrap().unwrap();
                let state = a.parse_state(&rec.state).unwrap();
                assert_eq!(rec.expires_at_ms as f64, a.expires_at_ms(&state));
                assert_eq!(rec.expires_at_secs(), rec.expires_at_ms.div_ceil(1000));
                assert!(rec.expires_at_ms as f64 > clock.now_ms() + 1_000.0, "4 of 10 tokens at 3/s: ~1.3 s");
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn prefixes_isolate_keys() {
                let Some(s) = store().await else { return };
                let clock = Arc::new(ManualClock::new(now_ms()));
                let a_side = cas(s.clone(), clock.clone(), &common::unique_prefix("tenant-a"));
                let b_side = cas(s.clone(), clock.clone(), &common::unique_prefix("tenant-b"));
                let limit = alg(r#"{"algorithm":"gcra","limit":3,"period":"1h"}"#);
                let r = a_side.apply("api", "user", &limit, Op::Decide { cost: 3 }).await.unwrap();
                assert!(r.decision.allowed);
                assert!(!a_side.apply("api", "user", &limit, Op::Decide { cost: 1 }).await.unwrap().decision.allowed);
                let b = b_side.apply("api", "user", &limit, Op::Decide { cost: 3 }).await.unwrap();
                assert!(b.decision.allowed, "another prefix has its own counter");
            }

            #[tokio::test]
            async fn a_write_whose_reply_was_lost_is_applied_once() {
                let Some(s) = store().await else { return };
                let fault = Arc::new(FaultStore::new(s.clone()));
                let clock = Arc::new(ManualClock::new(now_ms()));
                let cas = cas(fault.clone(), clock, &common::unique_prefix("lost-reply"));
                let a = alg(r#"{"algorithm":"fixed_window","limit":10,"window":"1h"}"#);
                fault.lose_replies(1);
                let r = cas.apply("l", "k", &a, Op::Decide { cost: 3 }).await.unwrap();
                assert!(r.decision.allowed);
                let record = s.get(&cas.storage_key(Scope::Host, "l", "k")).await.unwrap().unwrap();
                match a.parse_state(&record.state).unwrap() {
                    State::FixedWindow(w) => assert_eq!(w.n, 3, "the write landed once, not again on retry"),
                    other => panic!("{other:?}"),
                }
            }

            #[tokio::test]
            async fn a_new_record_starts_above_every_version_an_older_one_reached() {
                let Some(s) = store().await else { return };
                let t = now_ms();
                let cas = cas(s.clone(), Arc::new(ManualClock::new(t)), &common::unique_prefix("fresh"));
                let a = alg(r#"{"algorithm":"fixed_window","limit":10,"window":"1h"}"#);
                cas.apply("l", "k", &a, Op::Decide { cost: 1 }).await.unwrap();
                let record = s.get(&cas.storage_key(Scope::Host, "l", "k")).await.unwrap().unwrap();
                assert_eq!(record.version, leasehold::store::cas::fresh_version(t));
                assert!(record.write_id > 0);
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn exhausted_retries_are_store_unavailable() {
                let Some(s) = store().await else { return };
                let raced: Arc<dyn Store> = Arc::new(AlwaysRaced(s));
                let clock = Arc::new(ManualClock::new(now_ms()));
                let opts =
                    CasSettings { prefix: common::unique_prefix("raced"), max_retries: 3, ..CasSettings::default() };
                let cas = Counters::new(Cas::new(raced, clock, opts));
                let a = alg(r#"{"algorithm":"gcra","limit":3,"period":"1h"}"#);
                let err = cas.apply("l", "k", &a, Op::Decide { cost: 1 }).await.unwrap_err();
                assert_eq!(err, StoreUnavailable::Contention { attempts: 4 });
                let stats = cas.cas().stats().snapshot();
                assert_eq!((stats.writes, stats.conflicts, stats.retries), (4, 4, 3));
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn decisions_match_the_pure_algorithm() {
                let Some(s) = store().await else { return };
                let t0 = now_ms();
                for json in [
                    r#"{"algorithm":"gcra","limit":5,"period":"1s","burst":3}"#,
                    r#"{"algorithm":"token_bucket","capacity":4,"refill_per_sec":2.5}"#,
                    r#"{"algorithm":"leaky_bucket","capacity":4,"leak_per_sec":2.5}"#,
                    r#"{"algorithm":"fixed_window","limit":4,"window":"1s"}"#,
                    r#"{"algorithm":"sliding_window","limit":4,"window":"1s"}"#,
                    r#"{"algorithm":"sliding_log","limit":4,"window":"1s"}"#,
                    r#"{"algorithm":"quota","limit":4,"window":"1s"}"#,
                ] {
                    let a = alg(json);
                    let clock = Arc::new(ManualClock::new(t0));
                    let cas = cas(s.clone(), clock.clone(), &common::unique_prefix("same"));
                    let mut pure: Option<State> = None;
                    for (i, (dt, cost)) in [
                        (0.0, 1),
                        (0.0, 2),
                        (0.0, 2),
                        (130.0, 1),
                        (400.0, 3),
                        (0.0, 1),
                        (1_700.0, 4),
                        (-500.0, 1),
                        (20.0, 0),
                    ]
                    .into_iter()
                    .enumerate()
                    {
                        clock.advance(dt);
                        let got = cas.apply("l", "k", &a, Op::Decide { cost }).await.unwrap();
                        let (want, next) = a.decide(pure.as_ref(), clock.now_ms(), cost);
                        pure = next.or(pure);
                        assert_eq!(got.decision, want, "{json} step {i}");
                    }
                }
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn concurrent_applies_are_combined_and_each_gets_its_own_decision() {
                let Some(s) = store().await else { return };
                let clock = Arc::new(ManualClock::new(now_ms()));
                let cas = cas(s, clock, &common::unique_prefix("combine"));
                let a = alg(r#"{"algorithm":"fixed_window","limit":500,"window":"1h"}"#);
                let tasks: Vec<_> = (0..1_000)
                    .map(|_| {
                        let cas = cas.clone();
                        tokio::spawn(async move { cas.apply("l", "hot", &a, Op::Decide { cost: 1 }).await.unwrap() })
                    })
                    .collect();
                let mut remaining = Vec::new();
                for t in tasks {
                    let r = t.await.unwrap();
                    if r.decision.allowed {
                        remaining.push(r.decision.remaining);
                    }
                }
                remaining.sort_unstable();
                assert_eq!(remaining, (0..500).collect::<Vec<_>>(), "500 admitted, each with its own remaining");
                let stats = cas.cas().stats().snapshot();
                assert_eq!(stats.applies, 1_000);
                assert!(stats.writes * 4 <= stats.applies, "combined: {stats:?}");
                assert_eq!(stats.conflicts, 0, "no self-contention: {stats:?}");
            }
        }
    };
}

conformance!(memory, Some(Arc::new(leasehold::store::memory::MemoryStore::new()) as Arc<dyn Store>));
conformance!(embedded, {
    let dir = tempfile::tempdir().unwrap().keep();
    Some(Arc::new(leasehold::store::embedded::EmbeddedStore::open(dir.join("t.redb")).unwrap()) as Arc<dyn Store>)
});
conformance!(
    dynamodb,
    match common::dynamodb_endpoint() {
        Some(e) => Some(common::dynamodb_store(&e).await),
        None => None,
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_store_loses_no_update_across_tasks_and_reopens_with_its_counters() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("counters.redb");
    let a = alg(r#"{"algorithm":"fixed_window","limit":1000000,"window":"1d"}"#);
    let clock = Arc::new(ManualClock::new(now_ms()));
    {
        let store: Arc<dyn Store> = Arc::new(leasehold::store::embedded::EmbeddedStore::open(&path).unwrap());
        // Separate Cas instances do not combine with each other: they race through the CAS.
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let cas = cas(store.clone(), clock.clone(), "lost");
                tokio::spawn(async move {
                    for _ in 0..50 {
                        assert!(cas.apply("l", "k", &a, Op::Decide { cost: 1 }).await.unwrap().decision.allowed);
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    }
    // The file closes when the last handle goes, including the CAS loop's
    // driver tasks, which end just after their last reply.
    let mut reopened = None;
    for _ in 0..100 {
        match leasehold::store::embedded::EmbeddedStore::open(&path) {
            Ok(s) => {
                reopened = Some(s);
                break;
            }
            Err(e) if e.message.contains("already open") => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await
            }
            Err(e) => panic!("{e}"),
        }
    }
    let store: Arc<dyn Store> = Arc::new(reopened.expect("the file was released"));
    let rec = store.get("lost:l:l:k").await.unwrap().unwrap();
    match a.parse_state(&rec.state).unwrap() {
        State::FixedWindow(w) => assert_eq!(w.n, 400, "8 tasks x 50 applies, none lost"),
        other => panic!("{other:?}"),
    }
}

/// Many short-lived keys: with expired records collected, the embedded file
/// stops growing (redb reuses the freed pages); without, it grows each round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collecting_expired_records_keeps_the_embedded_file_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gc.redb");
    let store = Arc::new(leasehold::store::embedded::EmbeddedStore::open(&path).unwrap());
    let mut t = now_ms();
    let mut sizes = Vec::new();
    for round in 0..6 {
        let record = Record {
            state: format!("{{\"n\":{round},\"pad\":\"{}\"}}", "x".repeat(200)),
            version: 1,
            expires_at_ms: t as u64 + 1,
            write_id: 1,
        };
        let puts = (0..3_000).map(|i| {
            let (store, record) = (store.clone(), record.clone());
            async move { store.put_if(&format!("r{round}-k{i}"), &record, None).await.unwrap() }
        });
        futures_util::future::join_all(puts).await;
        t += 10.0;
        let mut deleted = 0;
        for _ in 0..4 {
            deleted += store.collect_expired(t, leasehold::store::COLLECT_SCAN).await.unwrap();
        }
        assert_eq!(deleted, 3_000, "round {round}: every expired record collected");
        sizes.push(std::fs::metadata(&path).unwrap().len());
    }
    assert!(sizes[5] <= sizes[1] + sizes[1] / 2, "the file keeps growing: {sizes:?}");
}
