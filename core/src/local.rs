//! An in-process limiter: one [`Algorithm`], a bounded map of key → [`State`]
//! and a [`Clock`]. This is what the Node, Python and browser bindings wrap,
//! so all three decide bit-identically.
//!
//! ```
//! use std::sync::Arc;
//! use leasehold_core::{Algorithm, ManualClock};
//! use leasehold_core::local::LocalLimiter;
//!
//! let alg = Algorithm::from_json(r#"{"algorithm":"fixed_window","limit":2,"window":"1s"}"#).unwrap();
//! let clock = Arc::new(ManualClock::new(0.0));
//! let limiter = LocalLimiter::new(alg, 100, clock.clone());
//! assert!(limiter.check("k", 1).allowed);
//! assert!(limiter.check("k", 1).allowed);
//! assert!(!limiter.check("k", 1).allowed);
//! clock.advance(1000.0);
//! assert!(limiter.check("k", 1).allowed);
//! ```
//!
//! ## Bounded size
//!
//! At most `max_keys` states are kept. A key that has to be added to a full
//! map first makes room by dropping the expired states (those
//! [`Algorithm::expires_at_ms`] says are indistinguishable from absent), and
//! if none has expired, the least recently used key. Dropping a state that has
//! not expired forgets what that key spent: an evicted key starts afresh.
//! Denials and zero-cost checks of an unknown key store nothing.
//!
//! The expired sweep is a scan of the map, so it runs only when some state may
//! have expired (the earliest expiry recorded since the last sweep has passed).
//! Recency is kept in a queue of touches, compacted when it grows to twice
//! the map; every operation is amortised O(1) apart from those sweeps.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::{Algorithm, Clock, Decision, State};

/// The default bound on the number of keys a [`LocalLimiter`] keeps.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// An in-process rate limiter over one [`Algorithm`]; see the [module docs](self).
/// Shared between threads: every operation takes an internal lock.
pub struct LocalLimiter {
    algorithm: Algorithm,
    clock: Arc<dyn Clock>,
    max_keys: usize,
    store: Mutex<Store>,
}

impl fmt::Debug for LocalLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalLimiter")
            .field("algorithm", &self.algorithm)
            .field("max_keys", &self.max_keys)
            .field("keys", &self.len())
            .finish_non_exhaustive()
    }
}

struct Entry {
    state: State,
    /// `Algorithm::expires_at_ms(&state)`, cached.
    expires_at_ms: f64,
    /// The stamp of this key's latest touch; older touches in the queue are stale.
    stamp: u64,
}

#[derive(Default)]
struct Store {
    map: HashMap<Arc<str>, Entry>,
    /// Touches in order, oldest first: `(key, stamp)`. A touch is current when
    /// the key's entry still carries that stamp.
    touches: VecDeque<(Arc<str>, u64)>,
    next_stamp: u64,
    /// No entry expires before this (a lower bound; `INFINITY` when empty).
    earliest_expiry: f64,
}

impl Store {
    fn touch(&mut self, key: &Arc<str>) -> u64 {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        self.touches.push_back((Arc::clone(key), stamp));
        if self.touches.len() > 2 * self.map.len() + 32 {
            let map = &self.map;
            self.touches.retain(|(k, s)| map.get(k).is_some_and(|e| e.stamp == *s));
        }
        stamp
    }

    /// Drops every state that has expired at `now_ms` (only when one may have).
    fn sweep_expired(&mut self, now_ms: f64) {
        if now_ms < self.earliest_expiry {
            return;
        }
        self.map.retain(|_, e| e.expires_at_ms > now_ms);
        self.earliest_expiry = self.map.values().map(|e| e.expires_at_ms).fold(f64::INFINITY, f64::min);
    }

    /// Drops the least recently used key.
    fn evict_lru(&mut self) {
        while let Some((key, stamp)) = self.touches.pop_front() {
            if self.map.get(&key).is_some_and(|e| e.stamp == stamp) {
                self.map.remove(&key);
                return;
            }
        }
    }
}

impl LocalLimiter {
    /// A limiter deciding with `algorithm`, keeping at most `max_keys` keys
    /// (at least one), reading the time from `clock`.
    pub fn new(algorithm: Algorithm, max_keys: usize, clock: Arc<dyn Clock>) -> Self {
        let store = Store { earliest_expiry: f64::INFINITY, ..Store::default() };
        Self { algorithm, clock, max_keys: max_keys.max(1), store: Mutex::new(store) }
    }

    /// The algorithm decisions are made by.
    pub fn algorithm(&self) -> &Algorithm {
        &self.algorithm
    }

    /// The most keys this limiter keeps.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// How many keys currently hold state (expired ones included until swept).
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    /// True when no key holds state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The state stored for `key`, if any.
    pub fn state(&self, key: &str) -> Option<State> {
        self.lock().map.get(key).map(|e| e.state.clone())
    }

    /// Forgets `key`'s state; true when it had one.
    pub fn remove(&self, key: &str) -> bool {
        self.lock().map.remove(key).is_some()
    }

    /// All-or-nothing admission of `cost` units for `key` at the clock's time.
    pub fn check(&self, key: &str, cost: u64) -> Decision {
        self.check_at(key, cost, self.clock.now_ms())
    }

    /// [`Self::check`] at an explicit time instead of the clock's.
    pub fn check_at(&self, key: &str, cost: u64, now_ms: f64) -> Decision {
        let mut store = self.lock();
        let store = &mut *store;
        let (decision, next) = self.algorithm.decide(store.map.get(key).map(|e| &e.state), now_ms, cost);
        let Some(state) = next else {
            if let Some((k, _)) = store.map.get_key_value(key) {
                let k = Arc::clone(k);
                let stamp = store.touch(&k);
                if let Some(e) = store.map.get_mut(key) {
                    e.stamp = stamp;
                }
            }
            return decision;
        };
        let expires_at_ms = self.algorithm.expires_at_ms(&state);
        store.earliest_expiry = store.earliest_expiry.min(expires_at_ms);
        if let Some((k, _)) = store.map.get_key_value(key) {
            let k = Arc::clone(k);
            let stamp = store.touch(&k);
            store.map.insert(k, Entry { state, expires_at_ms, stamp });
        } else {
            if store.map.len() >= self.max_keys {
                store.sweep_expired(now_ms);
            }
            while store.map.len() >= self.max_keys {
                store.evict_lru();
            }
            let k: Arc<str> = Arc::from(key);
            store.map.insert(Arc::clone(&k), Entry { state, expires_at_ms, stamp: 0 });
            let stamp = store.touch(&k);
            if let Some(e) = store.map.get_mut(key) {
                e.stamp = stamp;
            }
        }
        decision
    }

    /// The key's standing at the clock's time, consuming nothing.
    pub fn status(&self, key: &str) -> Decision {
        self.status_at(key, self.clock.now_ms())
    }

    /// [`Self::status`] at an explicit time instead of the clock's.
    pub fn status_at(&self, key: &str, now_ms: f64) -> Decision {
        let store = self.lock();
        self.algorithm.status(store.map.get(key).map(|e| &e.state), now_ms)
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock cannot leave the map inconsistent in a
        // way that matters (each state is replaced whole), so keep going.
        self.store.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    const T0: f64 = 1_700_000_000_000.0;

    fn limiter(spec: &str, max_keys: usize) -> (LocalLimiter, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(T0));
        (LocalLimiter::new(Algorithm::from_json(spec).unwrap(), max_keys, clock.clone()), clock)
    }

    const GCRA: &str = r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":3}"#;

    #[test]
    fn matches_the_pure_transition_step_by_step() {
        let (l, clock) = limiter(GCRA, 10);
        let alg = *l.algorithm();
        let mut state: Option<State> = None;
        for (dt, cost) in
            [(0.0, 1), (0.0, 2), (0.0, 1), (50.0, 1), (-500.0, 1), (100.5, 1), (1e9, 3), (0.0, 4), (0.0, 0)]
        {
            clock.advance(dt);
            let (want, next) = alg.decide(state.as_ref(), clock.now_ms(), cost);
            state = next.or(state);
            assert_eq!(l.check("k", cost), want);
            assert_eq!(l.state("k"), state);
            assert_eq!(l.status("k"), alg.status(state.as_ref(), clock.now_ms()));
        }
    }

    #[test]
    fn keys_are_independent_and_denials_store_nothing() {
        let (l, _clock) = limiter(GCRA, 10);
        for _ in 0..3 {
            assert!(l.check("a", 1).allowed);
        }
        assert!(!l.check("a", 1).allowed);
        assert!(l.check("b", 1).allowed);
        assert_eq!(l.len(), 2);
        assert!(!l.check("c", 4).allowed, "over the burst");
        assert_eq!(l.check("c", 0).remaining, 3);
        assert_eq!(l.status("d").remaining, 3);
        assert_eq!(l.len(), 2, "denials, zero costs and status add no key");
        assert!(l.remove("a"));
        assert!(!l.remove("a"));
        assert!(l.check("a", 1).allowed);
    }

    #[test]
    fn full_map_drops_expired_states_before_live_ones() {
        // Each key's state expires 1 s after its last use.
        let (l, clock) = limiter(r#"{"algorithm":"gcra","limit":1,"period":"1s","burst":1}"#, 3);
        assert!(l.check("old1", 1).allowed);
        assert!(l.check("old2", 1).allowed);
        clock.advance(900.0);
        assert!(l.check("live", 1).allowed);
        clock.advance(200.0); // old1, old2 expired; live has not
        assert!(l.check("new", 1).allowed);
        assert_eq!(l.len(), 2);
        assert!(l.state("live").is_some() && l.state("new").is_some());
        assert!(l.state("old1").is_none() && l.state("old2").is_none());
    }

    #[test]
    fn full_map_with_nothing_expired_drops_the_least_recently_used() {
        let (l, _clock) = limiter(r#"{"algorithm":"fixed_window","limit":5,"window":"1h"}"#, 3);
        assert!(l.check("a", 1).allowed);
        assert!(l.check("b", 1).allowed);
        assert!(l.check("c", 1).allowed);
        // A denied or zero-cost check still counts as a use.
        assert!(!l.check("a", 9).allowed);
        assert!(l.check("d", 1).allowed); // evicts b
        assert_eq!(l.len(), 3);
        assert!(l.state("b").is_none());
        assert!(l.check("e", 1).allowed); // evicts c
        assert!(l.state("c").is_none());
        assert_eq!(l.check("a", 1).remaining, 3, "a kept what it spent");
        assert_eq!(l.check("b", 1).remaining, 4, "b starts afresh");
    }

    #[test]
    fn many_keys_stay_bounded_and_touch_queue_stays_small() {
        let (l, clock) = limiter(r#"{"algorithm":"token_bucket","capacity":10,"refill_per_sec":1}"#, 100);
        for i in 0..10_000u32 {
            clock.advance(1.0);
            let key = format!("k{}", i % 250);
            l.check(&key, 1);
            l.check("hot", 1);
            assert!(l.len() <= 100);
        }
        let store = l.lock();
        assert!(store.touches.len() <= 2 * store.map.len() + 33, "{}", store.touches.len());
    }

    #[test]
    fn a_max_of_zero_keeps_one_key() {
        let (l, _clock) = limiter(GCRA, 0);
        assert_eq!(l.max_keys(), 1);
        assert!(l.check("a", 1).allowed);
        assert!(l.check("b", 1).allowed);
        assert_eq!(l.len(), 1);
    }
}
