//! A circuit breaker in front of the store: after `failures` consecutive
//! failures it opens and rejects calls for `open_for`; then it lets one probe
//! through (half-open) — success closes it, failure opens it again.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Breaker tuning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Consecutive failures that open the breaker.
    pub failures: u32,
    /// How long it stays open before a probe.
    pub open_for: Duration,
}

impl Default for BreakerConfig {
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
struct Inner {
    consecutive: u32,
    open_until: Option<Instant>,
    probing: bool,
}

/// A circuit breaker. A `std::sync::Mutex`: held for a few comparisons, never
/// across an `.await`, and only on the store path (never on local decisions).
#[derive(Debug)]
pub struct Breaker {
    config: BreakerConfig,
    inner: Mutex<Inner>,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(config: BreakerConfig) -> Self {
        Self { config, inner: Mutex::new(Inner { consecutive: 0, open_until: None, probing: false }) }
    }

    /// Whether a call may go to the store now. In half-open state only one
    /// caller (the probe) gets `true` until it reports back.
    pub fn allow(&self) -> bool {
        let mut i = self.inner.lock().expect("breaker lock");
        match i.open_until {
            None => true,
            Some(until) if Instant::now() < until => false,
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
        *i = Inner { consecutive: 0, open_until: None, probing: false };
    }

    /// Reports a failed store call.
    pub fn failure(&self) {
        let mut i = self.inner.lock().expect("breaker lock");
        i.consecutive += 1;
        if i.probing || i.consecutive >= self.config.failures {
            i.open_until = Some(Instant::now() + self.config.open_for);
            i.probing = false;
        }
    }

    /// The state now.
    pub fn state(&self) -> BreakerState {
        let i = self.inner.lock().expect("breaker lock");
        match i.open_until {
            None => BreakerState::Closed,
            Some(_) if i.probing => BreakerState::HalfOpen,
            Some(until) if Instant::now() < until => BreakerState::Open,
            Some(_) => BreakerState::HalfOpen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_consecutive_failures_then_probes_once_and_closes() {
        let b = Breaker::new(BreakerConfig { failures: 3, open_for: Duration::from_millis(30) });
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
        std::thread::sleep(Duration::from_millis(40));
        assert!(b.allow(), "the probe");
        assert!(!b.allow(), "only one probe at a time");
        assert_eq!(b.state(), BreakerState::HalfOpen);
        b.failure();
        assert_eq!(b.state(), BreakerState::Open, "a failed probe opens it again");
        std::thread::sleep(Duration::from_millis(40));
        assert!(b.allow());
        b.success();
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.allow() && b.allow());
    }
}
