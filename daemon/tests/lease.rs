//! The lease cache, driven by a ManualClock over the memory store (and the
//! fault-injecting wrapper for outages).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use leasehold::lease::counter::{Counters, Op};
use leasehold::lease::settings::CacheSettings;
use leasehold::lease::settings::{FailPolicy, LimitSettings, Mode};
use leasehold::lease::{Check, LeaseCache, Served};
use leasehold::store::fault::FaultStore;
use leasehold::store::guard::{BreakerSettings, BreakerState};
use leasehold::store::memory::MemoryStore;
use leasehold::store::{Cas, CasSettings, StoreUnavailable};
use leasehold_core::{Algorithm, Clock, ManualClock};

const T0: f64 = 1_800_000_000_000.0;

struct Rig {
    limiter: LeaseCache,
    clock: Arc<ManualClock>,
    fault: Arc<FaultStore>,
    settings: LimitSettings,
}

fn rig(spec: &str, tune: impl FnOnce(&mut LimitSettings, &mut CacheSettings)) -> Rig {
    let clock = Arc::new(ManualClock::new(T0));
    let fault = Arc::new(FaultStore::new(Arc::new(MemoryStore::new())));
    let cas = Cas::new(fault.clone(), clock.clone(), CasSettings::default());
    let mut settings = LimitSettings::new(Algorithm::from_json(spec).unwrap());
    let mut config = CacheSettings::default();
    tune(&mut settings, &mut config);
    let limiter = LeaseCache::new(HashMap::from([("api".to_string(), settings)]), cas, config);
    Rig { limiter, clock, fault, settings }
}

impl Rig {
    async fn check(&self, key: &str, cost: u64) -> leasehold::lease::Verdict {
        self.limiter.check(Check { limit: "api", key, cost }).await.unwrap()
    }

    fn writes(&self) -> u64 {
        self.limiter.counters().cas().stats().snapshot().writes
    }

    /// What the shared counter has left for `key`, read straight from the store.
    async fn store_available(&self, key: &str) -> u64 {
        let alg = self.settings.algorithm;
        let cas = Counters::new(Cas::new(self.fault.clone(), self.clock.clone(), CasSettings::default()));
        cas.apply("api", key, &alg, Op::Status).await.unwrap().decision.remaining
    }

    /// Processes pending evictions and waits until every background refund has landed.
    async fn settle(&self) {
        self.limiter.run_pending_tasks();
        self.limiter.refunds_settled().await;
    }
}

#[tokio::test]
async fn unknown_limits_are_an_error() {
    let r = rig(r#"{"algorithm":"gcra","limit":10,"period":"1s"}"#, |_, _| {});
    let err = r.limiter.check(Check { limit: "nope", key: "k", cost: 1 }).await.unwrap_err();
    assert_eq!(err.to_string(), "unknown limit \"nope\"");
}

#[tokio::test]
async fn a_cold_key_is_exact_one_write_per_decision() {
    let r = rig(r#"{"algorithm":"gcra","limit":10,"period":"1s"}"#, |_, _| {});
    for i in 1..=5 {
        r.clock.advance(10_000.0);
        let v = r.check("cold", 1).await;
        assert!(v.decision.allowed && v.served == Served::Store);
        assert_eq!(r.writes(), i, "one CAS per decision");
        assert_eq!(r.limiter.stats().snapshot().units_leased, i, "leases exactly the cost");
    }
}

#[tokio::test]
async fn a_hot_key_leases_batches_that_grow_and_shrink_with_demand() {
    let r = rig(r#"{"algorithm":"token_bucket","capacity":1000,"refill_per_sec":1000}"#, |s, _| {
        s.lease.max = 100;
    });
    // 2,000 checks at 500/s (2 ms apart): leases grow to the max.
    for i in 0..2_000 {
        r.clock.advance(2.0);
        let v = r.check("hot", 1).await;
        assert!(v.decision.allowed, "{i}: {v:?} {:?}", r.limiter.stats().snapshot());
    }
    let hot = r.limiter.stats().snapshot();
    assert!(r.writes() * 20 <= 2_000, "{} writes for 2,000 decisions", r.writes());
    assert!(hot.allowed_local > 1_900, "{hot:?}");
    // Then one check every 3 s: each lease shrinks, back to one unit.
    let mut sizes = Vec::new();
    for _ in 0..12 {
        r.clock.advance(3_000.0);
        r.limiter.end_due_leases();
        let before = r.limiter.stats().snapshot().units_leased;
        assert!(r.check("hot", 1).await.decision.allowed);
        sizes.push(r.limiter.stats().snapshot().units_leased - before);
    }
    assert!(sizes.windows(2).all(|w| w[1] <= w[0]), "shrinking: {sizes:?}");
    assert_eq!(sizes.last(), Some(&1), "back to exact: {sizes:?}");
}

#[tokio::test]
async fn a_hot_key_renews_ahead_so_its_callers_never_wait_for_the_store() {
    let r = rig(r#"{"algorithm":"token_bucket","capacity":100000,"refill_per_sec":1000}"#, |s, _| {
        s.lease.max = 200;
        s.lease.ttl = Duration::from_secs(10);
    });
    // Warm up: demand of 1 unit/ms. Background work lands between checks
    // (a store that answers before the current lease runs out).
    for _ in 0..500 {
        r.clock.advance(1.0);
        assert!(r.check("hot", 1).await.decision.allowed);
        r.settle().await;
    }
    let (before, writes) = (r.limiter.stats().snapshot(), r.writes());
    for i in 0..5_000 {
        r.clock.advance(1.0);
        let v = r.check("hot", 1).await;
        assert!(v.decision.allowed && v.served == Served::Local, "check {i} waited for the store: {v:?}");
        r.settle().await;
    }
    let after = r.limiter.stats().snapshot();
    let renewals = after.leases - before.leases;
    assert!(renewals >= 20, "the key kept renewing: {renewals} leases, {after:?}");
    assert_eq!(after.leases_ahead - before.leases_ahead, renewals, "every renewal was taken ahead: {after:?}");
    assert!(after.leases_switched - before.leases_switched >= renewals - 1, "{after:?}");
    assert_eq!(r.writes() - writes, renewals, "one write per lease: the retired lease ends in the next one");
    // The lease held ahead is out in the store, and counted in the key's standing.
    let held = after.units_held;
    assert!(held > 0);
    let status = r.limiter.status("api", "hot").await.unwrap();
    assert_eq!(status.decision.remaining, r.store_available("hot").await + held, "{after:?}");
    // Everything held (current and ahead) goes back on shutdown.
    assert_eq!(r.limiter.shutdown().await, held);
    assert_eq!(r.limiter.stats().snapshot().units_held, 0);
}

#[tokio::test]
async fn a_lease_taken_ahead_is_never_spent_outside_its_window() {
    let r = rig(r#"{"algorithm":"fixed_window","limit":100000,"window":"1s"}"#, |s, _| {
        s.lease.max = 100;
        s.lease.ttl = Duration::from_secs(60);
    });
    let edge = T0 - T0 % 1_000.0 + 1_000.0;
    r.clock.set(edge - 900.0);
    for _ in 0..899 {
        r.clock.advance(1.0);
        r.check("k", 1).await;
        r.settle().await;
    }
    let s = r.limiter.stats().snapshot();
    assert!(s.leases_ahead > 0 && s.units_held > 0, "{s:?}");
    // Past the edge, both the current lease and the one staged ahead are the
    // old window's: neither is spent; the check takes a new lease.
    r.clock.set(edge + 1.0);
    let v = r.check("k", 1).await;
    assert!(v.decision.allowed && v.served == Served::Store, "{v:?}");
    r.settle().await;
    let s = r.limiter.stats().snapshot();
    // The new window's count is only what its own leases took.
    let in_window = 100_000 - r.store_available("k").await;
    assert!(in_window <= s.units_held + 1, "{in_window} counted in the new window, {s:?}");
}

#[tokio::test]
async fn denied_until_spares_the_store() {
    let r = rig(r#"{"algorithm":"fixed_window","limit":5,"window":"10s"}"#, |_, _| {});
    r.clock.set(T0 - T0 % 10_000.0);
    let mut allowed = 0;
    for _ in 0..5 {
        allowed += u64::from(r.check("k", 1).await.decision.allowed);
    }
    assert_eq!(allowed, 5);
    let denied = r.check("k", 1).await;
    assert!(!denied.decision.allowed && denied.served == Served::Store);
    assert_eq!(denied.decision.retry_after_ms, 10_000);
    let reads = r.limiter.counters().cas().stats().snapshot().reads;
    for _ in 0..100 {
        r.clock.advance(10.0);
        let v = r.check("k", 1).await;
        assert!(!v.decision.allowed && v.served == Served::Local, "{v:?}");
    }
    assert_eq!(r.limiter.counters().cas().stats().snapshot().reads, reads, "no store call while denied");
    r.clock.set(T0 - T0 % 10_000.0 + 10_000.0);
    assert!(r.check("k", 1).await.decision.allowed, "the next window passes");
}

#[tokio::test]
async fn an_ended_lease_gives_its_units_back() {
    let r = rig(r#"{"algorithm":"token_bucket","capacity":100,"refill_per_sec":1}"#, |s, _| {
        s.lease.max = 20;
        s.lease.ttl = Duration::from_secs(1);
    });
    for _ in 0..10 {
        r.clock.advance(1.0);
        r.check("k", 1).await;
    }
    // Leases taken ahead in the background have landed.
    r.settle().await;
    let s = r.limiter.stats().snapshot();
    assert!(s.units_held > 0, "holding leased units: {s:?}");
    let held = s.units_held;
    assert_eq!(r.store_available("k").await, 100 - 10 - held);
    r.clock.advance(1_000.0);
    r.limiter.end_due_leases();
    r.settle().await;
    let after = r.limiter.stats().snapshot();
    assert_eq!(after.units_held, 0, "{after:?}");
    assert_eq!(after.units_refunded, held);
    // 10 spent, the rest back; the bucket also refilled one per second.
    assert_eq!(r.store_available("k").await, 100 - 10 + 1);
}

#[tokio::test]
async fn a_window_lease_ends_with_its_window() {
    let r = rig(r#"{"algorithm":"fixed_window","limit":100,"window":"1s"}"#, |s, _| {
        s.lease.max = 50;
        s.lease.ttl = Duration::from_secs(60);
    });
    let edge = T0 - T0 % 1_000.0 + 1_000.0;
    r.clock.set(edge - 20.0);
    let mut in_first = 0;
    for _ in 0..19 {
        in_first += u64::from(r.check("k", 1).await.decision.allowed);
        r.clock.advance(1.0);
    }
    assert!(r.limiter.stats().snapshot().units_held > 0);
    // Past the edge the old lease's units are not spent: the next check takes a new lease.
    r.clock.set(edge);
    r.settle().await;
    let leases = r.limiter.stats().snapshot().leases;
    let v = r.check("k", 1).await;
    assert!(v.decision.allowed && v.served == Served::Store, "{v:?}");
    assert_eq!(r.limiter.stats().snapshot().leases, leases + 1);
    assert_eq!(in_first, 19);
    // The old window's leftover could not be refunded into the new window.
    let s = r.limiter.stats().snapshot();
    assert_eq!(s.units_refunded, 0, "{s:?}");
    assert_eq!(r.store_available("k").await + s.units_held, 99);
}

#[tokio::test]
async fn eviction_gives_units_back() {
    let r = rig(r#"{"algorithm":"gcra","limit":1000,"period":"1s","burst":100}"#, |s, c| {
        s.lease.max = 10;
        c.max_keys = 4;
    });
    for k in 0..40 {
        for _ in 0..5 {
            r.clock.advance(0.5);
            r.check(&format!("k{k}"), 1).await;
        }
    }
    r.limiter.run_pending_tasks();
    assert!(r.limiter.keys_cached() <= 8, "bounded: {}", r.limiter.keys_cached());
    r.settle().await;
    let s = r.limiter.stats().snapshot();
    assert!(s.units_refunded > 0, "evicted slots refunded: {s:?}");
    assert_eq!(s.units_leased, s.units_held + 200 + s.units_refunded + s.units_lost, "{s:?}");
}

#[tokio::test]
async fn shutdown_gives_everything_back() {
    let r = rig(r#"{"algorithm":"token_bucket","capacity":1000,"refill_per_sec":10}"#, |s, _| {
        s.lease.max = 100;
    });
    for key in ["a", "b", "c"] {
        for _ in 0..20 {
            r.clock.advance(1.0);
            assert!(r.check(key, 1).await.decision.allowed);
        }
    }
    r.settle().await;
    let held = r.limiter.stats().snapshot().units_held;
    assert!(held > 0);
    assert_eq!(r.limiter.shutdown().await, held);
    assert_eq!(r.limiter.stats().snapshot().units_held, 0);
    for key in ["a", "b", "c"] {
        assert!(r.store_available(key).await >= 980, "only the 20 spent are gone");
    }
}

#[tokio::test]
async fn direct_mode_is_one_write_per_decision() {
    let r = rig(r#"{"algorithm":"gcra","limit":1000,"period":"1s"}"#, |s, _| s.mode = Mode::Direct);
    for _ in 0..50 {
        r.clock.advance(0.1);
        assert_eq!(r.check("k", 1).await.served, Served::Store);
    }
    assert_eq!(r.writes(), 50);
}

#[tokio::test]
async fn an_outage_spends_held_units_then_applies_the_fail_policy() {
    for fail in [FailPolicy::Closed, FailPolicy::Open] {
        let r = rig(r#"{"algorithm":"token_bucket","capacity":1000,"refill_per_sec":1000}"#, |s, _| {
            s.lease.max = 50;
            s.fail = fail;
        });
        for _ in 0..180 {
            r.clock.advance(1.0);
            r.check("k", 1).await;
        }
        let held = r.limiter.stats().snapshot().units_held;
        assert!(held > 1, "{held}");
        r.fault.set_down(true);
        for _ in 0..held {
            let v = r.check("k", 1).await;
            assert!(v.decision.allowed && v.served == Served::Local, "held units keep flowing: {v:?}");
        }
        let v = r.check("k", 1).await;
        match fail {
            FailPolicy::Closed => {
                assert!(!v.decision.allowed && v.served == Served::Unavailable, "{v:?}");
                assert_eq!(r.limiter.stats().snapshot().unavailable, 1);
            }
            FailPolicy::Open => {
                assert!(v.decision.allowed && v.served == Served::Degraded, "{v:?}");
                assert_eq!(r.limiter.stats().snapshot().degraded, 1);
            }
        }
        assert!(v.unavailable.is_some());
    }
}

#[tokio::test]
async fn a_slow_store_times_out_instead_of_stalling() {
    let r = rig(r#"{"algorithm":"gcra","limit":10,"period":"1s"}"#, |_, c| {
        c.store_timeout = Duration::from_millis(50);
    });
    r.fault.set_delay(Duration::from_secs(5));
    let start = std::time::Instant::now();
    let v = r.check("k", 1).await;
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
    assert_eq!(v.served, Served::Unavailable);
    assert_eq!(v.unavailable, Some(StoreUnavailable::Timeout(50)));
}

#[tokio::test]
async fn the_breaker_opens_rests_the_store_and_recovers() {
    let r = rig(r#"{"algorithm":"gcra","limit":10,"period":"1s"}"#, |_, c| {
        c.breaker = BreakerSettings { failures: 3, open_for: Duration::from_millis(200) };
    });
    r.fault.set_down(true);
    for _ in 0..3 {
        assert_eq!(r.check("k", 1).await.served, Served::Unavailable);
    }
    assert_eq!(r.limiter.breaker_state(), BreakerState::Open);
    let calls = r.fault.calls();
    for _ in 0..20 {
        let v = r.check("k", 1).await;
        assert_eq!(v.unavailable, Some(StoreUnavailable::CircuitOpen));
    }
    assert_eq!(r.fault.calls(), calls, "an open breaker makes no store calls");
    r.fault.heal();
    r.clock.advance(250.0);
    let v = r.check("k", 1).await;
    assert!(v.decision.allowed && v.served == Served::Store, "the probe succeeds: {v:?}");
    assert_eq!(r.limiter.breaker_state(), BreakerState::Closed);
}

#[tokio::test]
async fn a_cost_above_the_ceiling_never_reaches_the_store() {
    let r = rig(r#"{"algorithm":"gcra","limit":10,"period":"1s"}"#, |_, _| {});
    let v = r.check("k", 11).await;
    assert!(v.decision.is_impossible() && v.served == Served::Local);
    assert_eq!(r.limiter.counters().cas().stats().snapshot().reads, 0);
}

/// The scenario from the exact-lease issue, on one daemon: token bucket of
/// 20 at 20/s, leases up to half of it provisioned for a second of demand.
/// 24 requests at 16/s, a 1.2 s pause, then 60 at once: a token bucket
/// admits at most 20 in one instant. (Before exact leases: 25.)
#[tokio::test]
async fn a_refill_limit_never_admits_more_than_its_bound_within_an_interval() {
    let r = rig(r#"{"algorithm":"token_bucket","capacity":20,"refill_per_sec":20}"#, |s, _| {
        s.lease.max = 10;
        s.lease.horizon = Duration::from_secs(1);
    });
    let mut admitted = Vec::new();
    for _ in 0..24 {
        r.clock.advance(62.5);
        if r.check("k", 1).await.decision.allowed {
            admitted.push(r.clock.now_ms());
        }
    }
    r.clock.advance(1_200.0);
    r.limiter.end_due_leases();
    let burst_at = r.clock.now_ms();
    let mut burst = 0;
    for _ in 0..60 {
        if r.check("k", 1).await.decision.allowed {
            burst += 1;
            admitted.push(burst_at);
        }
    }
    assert!(burst <= 20, "{burst} admitted in one instant; the bucket holds 20");
    let status = r.limiter.status("api", "k").await.unwrap();
    assert!(status.decision.remaining <= 20, "remaining {} above the limit", status.decision.remaining);
    // Every interval, not only the burst: admissions in [a, b] <= 20 + 20/s × (b − a).
    assert_eq!(worst_excess(&admitted, 20.0, 20.0 / 1000.0), 0.0);
}

/// The largest excess over `burst + rate × (b − a)` of any interval `[a, b]`
/// between two admissions (times sorted ascending), in units.
fn worst_excess(times: &[f64], burst: f64, rate_per_ms: f64) -> f64 {
    let mut best_start = f64::NEG_INFINITY; // max over i of (rate·t_i − i)
    let mut worst: f64 = 0.0;
    for (j, &t) in times.iter().enumerate() {
        best_start = best_start.max(rate_per_ms * t - j as f64);
        let admitted_minus_refill = (j as f64 + 1.0) - rate_per_ms * t + best_start;
        worst = worst.max(admitted_minus_refill - burst);
    }
    (worst - 1e-6).max(0.0).ceil()
}

#[test]
fn worst_excess_finds_a_burst_above_the_bound() {
    assert_eq!(worst_excess(&[0.0; 21], 20.0, 0.02), 1.0);
    assert_eq!(worst_excess(&[0.0, 50.0, 100.0], 1.0, 0.02), 0.0);
}

#[tokio::test]
async fn fail_open_never_admits_on_contention() {
    let r = rig(r#"{"algorithm":"gcra","limit":10,"period":"1s"}"#, |s, c| {
        s.fail = FailPolicy::Open;
        c.store_timeout = Duration::from_secs(30);
    });
    // A store where every write loses to another writer: healthy, contended.
    r.fault.set_conflicts(true);
    let v = r.check("k", 1).await;
    assert!(matches!(v.unavailable, Some(StoreUnavailable::Contention { .. })), "{v:?}");
    assert!(!v.decision.allowed, "contention is not an outage: {v:?}");
    assert_eq!(v.served, Served::Unavailable);
}

#[tokio::test]
async fn a_lease_granted_after_its_caller_timed_out_is_given_back() {
    let r = rig(r#"{"algorithm":"fixed_window","limit":1000,"window":"1h"}"#, |s, c| {
        s.lease.max = 10;
        c.store_timeout = Duration::from_millis(30);
    });
    // Warm the key so its leases are larger than one request.
    let mut allowed = 0u64;
    for _ in 0..200 {
        r.clock.advance(1.0);
        allowed += u64::from(r.check("k", 1).await.decision.allowed);
    }
    let leased = r.limiter.stats().snapshot().units_leased;
    r.fault.set_delay(Duration::from_millis(100));
    // Spend what is held; the renewal after it times out.
    loop {
        let v = r.check("k", 1).await;
        if v.unavailable.is_some() {
            assert!(matches!(v.unavailable, Some(StoreUnavailable::Timeout(_))), "{v:?}");
            break;
        }
        allowed += 1;
    }
    // The grant lands about 100 ms later, on its own task; its refund is tracked.
    let mut waited = 0;
    while r.limiter.stats().snapshot().units_leased == leased && waited < 5_000 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 20;
    }
    assert!(r.limiter.stats().snapshot().units_leased > leased + 1, "a lease of more than the cost landed late");
    r.limiter.refunds_settled().await;
    r.fault.heal();
    // Spent: exactly what was allowed; the whole late grant went back (a
    // window takes back the timed-out caller's unit too, into its window).
    assert_eq!(r.store_available("k").await, 1000 - allowed, "the late grant went back to the counter");
}

#[tokio::test]
async fn key_spaces_never_share_a_counter() {
    use leasehold::lease::counter::Scope;
    let r = rig(r#"{"algorithm":"fixed_window","limit":1,"window":"1h"}"#, |s, _| s.mode = Mode::Direct);
    let host = r.limiter.check(Check { limit: "api", key: "acme:u1", cost: 1 }).await.unwrap();
    let tenant = r.limiter.check_in(Scope::Tenant("acme"), Check { limit: "api", key: "u1", cost: 1 }).await.unwrap();
    assert!(host.decision.allowed && tenant.decision.allowed, "a socket key cannot spend a tenant's counter");
    let adhoc = r.limiter.check_in(Scope::Adhoc, Check { limit: "api", key: "acme:u1", cost: 1 }).await.unwrap();
    assert!(adhoc.decision.allowed, "request-defined limits have their own space");
}

#[tokio::test]
async fn shutdown_has_a_deadline_when_the_store_hangs() {
    let r = rig(r#"{"algorithm":"token_bucket","capacity":1000,"refill_per_sec":1000}"#, |s, _| s.lease.max = 50);
    for _ in 0..100 {
        r.clock.advance(1.0);
        r.check("k", 1).await;
    }
    assert!(r.limiter.stats().snapshot().units_held > 0);
    r.fault.set_delay(Duration::from_secs(3_600));
    let start = std::time::Instant::now();
    let back = r.limiter.shutdown_within(Duration::from_millis(200)).await;
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    assert_eq!(back, 0);
}

#[tokio::test]
async fn the_cache_is_bounded_by_bytes_as_well_as_keys() {
    let r = rig(r#"{"algorithm":"gcra","limit":10,"period":"1s"}"#, |_, c| {
        c.max_keys = 1_000_000;
        c.max_bytes = 64 * 1024;
    });
    // 1,000 keys of 1 KiB each would be about 1 MiB of slots.
    for k in 0..1_000 {
        r.clock.advance(0.5);
        r.check(&format!("{k:01024}"), 1).await;
    }
    r.limiter.run_pending_tasks();
    let keys = r.limiter.keys_cached();
    assert!(keys <= 64, "{keys} slots of over 1 KiB in a 64 KiB cache");
}
