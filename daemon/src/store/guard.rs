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

use super::StoreUnavailable;

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
    /// caller (the probe) gets `true` until it reports back.
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
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(a)) => {
                self.breaker.success();
                Ok(a)
            }
            Ok(Err(e @ StoreUnavailable::Contention { .. })) => Err(e),
            Ok(Err(e)) => {
                self.breaker.failure();
                Err(e)
            }
            Err(_) => {
                self.breaker.failure();
                Err(StoreUnavailable::Timeout(self.timeout.as_millis() as u64))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leasehold_core::ManualClock;

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
