//! The guard every caller of a store goes through: a per-call timeout and a
//! circuit breaker. After `failures` consecutive failures the breaker opens
//! and rejects calls for `open_for`; then it lets one probe through
//! (half-open) — success closes it, failure opens it again.
//!
//! The breaker reads the injected [`Clock`], so tests drive it with a
//! `ManualClock` and no real sleeps.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_core::Clock;

use super::{StoreError, StoreUnavailable};

/// Counts a guarded call that was dropped before it ended as a failure.
struct Report<'a> {
    breaker: &'a Breaker,
    done: bool,
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.breaker.failure();
        }
    }
}

/// Breaker tuning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Consecutive failures that open the breaker.
    pub failures: u32,
    /// How long it stays open before a probe.
    pub open_for: Duration,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        Self { failures: 5, open_for: Duration::from_secs(2) }
    }
}

/// The breaker's state, as shown on `/metrics` and the dashboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls flow.
    Closed,
    /// Calls are rejected until the rest is over.
    Open,
    /// One probe is in flight.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half_open`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }
}

#[derive(Debug)]
struct BreakerInner {
    consecutive: u32,
    /// Epoch ms the breaker stays open until; `None` while closed.
    open_until: Option<f64>,
    probing: bool,
}

/// A circuit breaker. A `std::sync::Mutex`: held for a few comparisons, never
/// across an `.await`, and only on the store path (never on local decisions).
pub struct Breaker {
    settings: BreakerSettings,
    clock: Arc<dyn Clock>,
    inner: Mutex<BreakerInner>,
}

impl std::fmt::Debug for Breaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker").field("settings", &self.settings).field("state", &self.state()).finish()
    }
}

impl Breaker {
    /// A closed breaker reading time from `clock`.
    pub fn new(settings: BreakerSettings, clock: Arc<dyn Clock>) -> Self {
        Self { settings, clock, inner: Mutex::new(BreakerInner { consecutive: 0, open_until: None, probing: false }) }
    }

    /// Whether a call may go to the store now. In half-open state only one
    /// caller (the probe) gets `true` until it reports back; a probe that
    /// never reports (see [`Guard::call`]) counts as failed.
    pub fn allow(&self) -> bool {
        let now = self.clock.now_ms();
        let mut i = self.inner.lock().expect("breaker lock");
        match i.open_until {
            None => true,
            Some(until) if now < until => false,
            Some(_) if i.probing => false,
            Some(_) => {
                i.probing = true;
                true
            }
        }
    }

    /// Reports a successful store call.
    pub fn success(&self) {
        let mut i = self.inner.lock().expect("breaker lock");
        *i = BreakerInner { consecutive: 0, open_until: None, probing: false };
    }

    /// Reports a failed store call.
    pub fn failure(&self) {
        let now = self.clock.now_ms();
        let mut i = self.inner.lock().expect("breaker lock");
        i.consecutive += 1;
        if i.probing || i.consecutive >= self.settings.failures {
            i.open_until = Some(now + self.settings.open_for.as_millis() as f64);
            i.probing = false;
        }
    }

    /// The state now.
    pub fn state(&self) -> BreakerState {
        let now = self.clock.now_ms();
        let i = self.inner.lock().expect("breaker lock");
        match i.open_until {
            None => BreakerState::Closed,
            Some(_) if i.probing => BreakerState::HalfOpen,
            Some(until) if now < until => BreakerState::Open,
            Some(_) => BreakerState::HalfOpen,
        }
    }
}

/// The breaker and the timeout, in front of any store call.
#[derive(Debug)]
pub struct Guard {
    breaker: Breaker,
    timeout: Duration,
}

impl Guard {
    /// A guard with a closed breaker; calls taking longer than `timeout` fail.
    pub fn new(breaker: BreakerSettings, timeout: Duration, clock: Arc<dyn Clock>) -> Self {
        Self { breaker: Breaker::new(breaker, clock), timeout }
    }

    /// The breaker's state.
    pub fn breaker_state(&self) -> BreakerState {
        self.breaker.state()
    }

    /// The per-call timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs one store call behind the breaker and the timeout. Contention
    /// (a busy, healthy store) does not count against the breaker.
    ///
    /// # Errors
    /// [`StoreUnavailable::CircuitOpen`] without calling when the breaker is
    /// open, [`StoreUnavailable::Timeout`] when the call took too long, or
    /// the call's own error.
    pub async fn call<T>(
        &self,
        call: impl Future<Output = Result<T, StoreUnavailable>>,
    ) -> Result<T, StoreUnavailable> {
        if !self.breaker.allow() {
            return Err(StoreUnavailable::CircuitOpen);
        }
        // Reports a failure if this future is dropped before the call ends
        // (the client went away): a half-open breaker never waits forever on
        // a probe nobody will finish.
        let mut report = Report { breaker: &self.breaker, done: false };
        let result = match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(a)) => {
                self.breaker.success();
                Ok(a)
            }
            // The store answered: contention means healthy and busy, and a
            // record it refuses says nothing about the other records.
            Ok(Err(e @ StoreUnavailable::Contention { .. })) => {
                self.breaker.success();
                Err(e)
            }
            Ok(Err(e @ StoreUnavailable::Backend(StoreError { record: true, .. }))) => {
                self.breaker.success();
                Err(e)
            }
            Ok(Err(e)) => {
                self.breaker.failure();
                Err(e)
            }
            Err(_) => {
                self.breaker.failure();
                Err(StoreUnavailable::Timeout(self.timeout.as_millis() as u64))
            }
        };
        report.done = true;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_core::ManualClock;

    fn guard(clock: &Arc<ManualClock>) -> Guard {
        Guard::new(
            BreakerSettings { failures: 1, open_for: Duration::from_millis(30) },
            Duration::from_secs(5),
            clock.clone(),
        )
    }

    async fn fail() -> Result<(), StoreUnavailable> {
        Err(StoreError::transient("test", "down").into())
    }

    #[tokio::test]
    async fn a_probe_dropped_before_it_ends_reopens_the_breaker_instead_of_wedging_it() {
        let clock = Arc::new(ManualClock::new(0.0));
        let g = guard(&clock);
        assert!(g.call(fail()).await.is_err());
        assert_eq!(g.breaker_state(), BreakerState::Open);
        clock.advance(40.0);
        // The probe's caller goes away mid-call.
        let probe = g.call(std::future::pending::<Result<(), StoreUnavailable>>());
        assert!(tokio::time::timeout(Duration::from_millis(10), probe).await.is_err());
        assert_eq!(g.breaker_state(), BreakerState::Open, "an abandoned probe counts as failed");
        clock.advance(40.0);
        assert_eq!(g.call(async { Ok(()) }).await, Ok(()), "a new probe is let through");
        assert_eq!(g.breaker_state(), BreakerState::Closed);
    }

    #[tokio::test]
    async fn contention_and_per_record_errors_do_not_open_the_breaker() {
        let clock = Arc::new(ManualClock::new(0.0));
        let g = guard(&clock);
        let contention = g.call(async { Err::<(), _>(StoreUnavailable::Contention { attempts: 17 }) }).await;
        assert!(contention.is_err());
        let refused = g.call(async { Err::<(), _>(StoreError::record("test", "key too long").into()) }).await;
        assert!(refused.is_err());
        assert_eq!(g.breaker_state(), BreakerState::Closed);
        assert!(g.call(fail()).await.is_err());
        assert_eq!(g.breaker_state(), BreakerState::Open, "a store failure still opens it");
    }

    #[test]
    fn opens_after_consecutive_failures_then_probes_once_and_closes() {
        let clock = Arc::new(ManualClock::new(0.0));
        let b = Breaker::new(BreakerSettings { failures: 3, open_for: Duration::from_millis(30) }, clock.clone());
        for _ in 0..2 {
            assert!(b.allow());
            b.failure();
        }
        b.success();
        for _ in 0..3 {
            assert!(b.allow());
            b.failure();
        }
        assert_eq!(b.state(), BreakerState::Open);
        assert!(!b.allow());
        clock.advance(40.0);
        assert!(b.allow(), "the probe");
        assert!(!b.allow(), "only one probe at a time");
        assert_eq!(b.state(), BreakerState::HalfOpen);
        b.failure();
        assert_eq!(b.state(), BreakerState::Open, "a failed probe opens it again");
        clock.advance(40.0);
        assert!(b.allow());
        b.success();
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.allow() && b.allow());
    }
}
