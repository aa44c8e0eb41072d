//! Clocks for the edges. Core's operations take the time as an argument; the
//! daemon and the bindings read it from a [`Clock`], and tests drive a
//! [`ManualClock`].

use std::sync::atomic::{AtomicU64, Ordering};

/// A source of epoch milliseconds.
pub trait Clock: Send + Sync {
    /// The current time in epoch milliseconds.
    fn now_ms(&self) -> f64;
}

/// The system's wall clock. On `wasm32-unknown-unknown` there is no system
/// clock: pass `Date.now()` from JavaScript instead.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> f64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    }
}

/// A clock that moves only when told: forwards with [`ManualClock::advance`],
/// anywhere (backwards too, to test clock steps) with [`ManualClock::set`].
/// Shared between threads; reads and writes are atomic.
#[derive(Debug, Default)]
pub struct ManualClock {
    bits: AtomicU64,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: f64) -> Self {
        Self { bits: AtomicU64::new(now_ms.to_bits()) }
    }

    /// Moves the clock by `ms` (negative moves it back).
    pub fn advance(&self, ms: f64) {
        let _ =
            self.bits.fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| Some((f64::from_bits(b) + ms).to_bits()));
    }

    /// Sets the clock to `now_ms`.
    pub fn set(&self, now_ms: f64) {
        self.bits.store(now_ms.to_bits(), Ordering::Release);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told_and_can_step_back() {
        let c = ManualClock::new(1_000.0);
        assert_eq!(c.now_ms(), 1_000.0);
        c.advance(250.5);
        assert_eq!(c.now_ms(), 1_250.5);
        c.set(10.0);
        assert_eq!(c.now_ms(), 10.0);
        c.advance(-5.0);
        assert_eq!(c.now_ms(), 5.0);
    }

    #[test]
    fn system_clock_reads_epoch_milliseconds() {
        let t = SystemClock.now_ms();
        assert!(t > 1.6e12 && t < 1e14, "{t}");
    }
}
