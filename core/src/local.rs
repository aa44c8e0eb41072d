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
//! Recency is an intrusive doubly linked list threaded through a dense slab of
//! entries, so a check hashes its key once (to find the slot) and marking it
//! used, inserting and dropping the least recently used key are O(1) apart
//! from those sweeps.

use std::collections::HashMap;
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

/// "No slot": the end of the recency list.
const NIL: usize = usize::MAX;

/// One key's state and its place in the recency list.
struct Slot {
    /// The key, shared with the map (to find the map entry when the slot moves or goes).
    key: Arc<str>,
    state: State,
    /// `Algorithm::expires_at_ms(&state)`, cached.
    expires_at_ms: f64,
    /// The next more recently used slot (`NIL` for the most recent).
    newer: usize,
    /// The next less recently used slot (`NIL` for the least recent).
    older: usize,
}

/// The keys' states: a map of key → slot index over a dense slab of slots,
/// linked from the most to the least recently used.
struct Store {
    map: HashMap<Arc<str>, usize>,
    /// Dense: removing a slot moves the last one into its place.
    slots: Vec<Slot>,
    /// The most recently used slot (`NIL` when empty).
    newest: usize,
    /// The least recently used slot, the first to drop (`NIL` when empty).
    oldest: usize,
    /// No entry expires before this (a lower bound; `INFINITY` when empty).
    earliest_expiry: f64,
}

impl Store {
    fn new() -> Self {
        Store { map: HashMap::new(), slots: Vec::new(), newest: NIL, oldest: NIL, earliest_expiry: f64::INFINITY }
    }

    /// The slot holding `key`'s state.
    fn find(&self, key: &str) -> Option<usize> {
        self.map.get(key).copied()
    }

    /// Takes slot `i` out of the recency list (its links are left stale).
    fn unlink(&mut self, i: usize) {
        let (newer, older) = (self.slots[i].newer, self.slots[i].older);
        match newer {
            NIL => self.newest = older,
            n => self.slots[n].older = older,
        }
        match older {
            NIL => self.oldest = newer,
            o => self.slots[o].newer = newer,
        }
    }

    /// Puts slot `i` (not in the list) at the most recently used end.
    fn link_newest(&mut self, i: usize) {
        let old_newest = self.newest;
        self.slots[i].newer = NIL;
        self.slots[i].older = old_newest;
        match old_newest {
            NIL => self.oldest = i,
            n => self.slots[n].newer = i,
        }
        self.newest = i;
    }

    /// Marks slot `i` as the most recently used.
    fn touch(&mut self, i: usize) {
        if self.newest != i {
            self.unlink(i);
            self.link_newest(i);
        }
    }

    /// Adds a key that holds no state yet, as the most recently used.
    fn insert(&mut self, key: &str, state: State, expires_at_ms: f64) {
        let key: Arc<str> = Arc::from(key);
        let i = self.slots.len();
        self.slots.push(Slot { key: Arc::clone(&key), state, expires_at_ms, newer: NIL, older: NIL });
        self.map.insert(key, i);
        self.link_newest(i);
    }

    /// Drops slot `i`, moving the last slot into its place.
    fn remove_slot(&mut self, i: usize) {
        self.unlink(i);
        let gone = self.slots.swap_remove(i);
        self.map.remove(&gone.key);
        if i == self.slots.len() {
            return; // it was the last slot: nothing moved
        }
        // The slot that was last (index `len`) is now at `i`: repoint its
        // neighbours, the list's ends and the map at `i`.
        let (newer, older) = (self.slots[i].newer, self.slots[i].older);
        match newer {
            NIL => self.newest = i,
            n => self.slots[n].older = i,
        }
        match older {
            NIL => self.oldest = i,
            o => self.slots[o].newer = i,
        }
        if let Some(at) = self.map.get_mut(&*self.slots[i].key) {
            *at = i;
        }
    }

    /// Drops `key`'s state; true when it had one.
    fn remove(&mut self, key: &str) -> bool {
        match self.find(key) {
            Some(i) => {
                self.remove_slot(i);
                true
            }
            None => false,
        }
    }

    /// Drops every state that has expired at `now_ms` (only when one may have).
    fn sweep_expired(&mut self, now_ms: f64) {
        if now_ms < self.earliest_expiry {
            return;
        }
        let mut i = 0;
        while i < self.slots.len() {
            if self.slots[i].expires_at_ms > now_ms {
                i += 1;
            } else {
                self.remove_slot(i); // another slot moves into `i`: look at it next
            }
        }
        self.earliest_expiry = self.slots.iter().map(|s| s.expires_at_ms).fold(f64::INFINITY, f64::min);
    }

    /// Drops the least recently used key (none when the map is empty).
    fn evict_lru(&mut self) {
        if self.oldest != NIL {
            self.remove_slot(self.oldest);
        }
    }
}

impl LocalLimiter {
    /// A limiter deciding with `algorithm`, keeping at most `max_keys` keys
    /// (at least one), reading the time from `clock`.
    pub fn new(algorithm: Algorithm, max_keys: usize, clock: Arc<dyn Clock>) -> Self {
        Self { algorithm, clock, max_keys: max_keys.max(1), store: Mutex::new(Store::new()) }
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
        self.lock().slots.len()
    }

    /// True when no key holds state.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The state stored for `key`, if any.
    pub fn state(&self, key: &str) -> Option<State> {
        let store = self.lock();
        store.find(key).map(|i| store.slots[i].state.clone())
    }

    /// Forgets `key`'s state; true when it had one.
    pub fn remove(&self, key: &str) -> bool {
        self.lock().remove(key)
    }

    /// All-or-nothing admission of `cost` units for `key` at the clock's time.
    pub fn check(&self, key: &str, cost: u64) -> Decision {
        self.check_at(key, cost, self.clock.now_ms())
    }

    /// [`Self::check`] at an explicit time instead of the clock's.
    pub fn check_at(&self, key: &str, cost: u64, now_ms: f64) -> Decision {
        let mut store = self.lock();
        let store = &mut *store;
        let slot = store.find(key);
        let (decision, next) = self.algorithm.decide(slot.map(|i| &store.slots[i].state), now_ms, cost);
        let Some(state) = next else {
            // A denied or zero-cost check of a known key still counts as a use.
            if let Some(i) = slot {
                store.touch(i);
            }
            return decision;
        };
        let expires_at_ms = self.algorithm.expires_at_ms(&state);
        if let Some(i) = slot {
            let s = &mut store.slots[i];
            s.state = state;
            s.expires_at_ms = expires_at_ms;
            store.touch(i);
        } else {
            if store.slots.len() >= self.max_keys {
                store.sweep_expired(now_ms);
            }
            while store.slots.len() >= self.max_keys {
                store.evict_lru();
            }
            store.insert(key, state, expires_at_ms);
        }
        // After the sweep, which recomputes the bound from the map as it was.
        store.earliest_expiry = store.earliest_expiry.min(expires_at_ms);
        decision
    }

    /// The key's standing at the clock's time, consuming nothing.
    pub fn status(&self, key: &str) -> Decision {
        self.status_at(key, self.clock.now_ms())
    }

    /// [`Self::status`] at an explicit time instead of the clock's.
    pub fn status_at(&self, key: &str, now_ms: f64) -> Decision {
        let store = self.lock();
        self.algorithm.status(store.find(key).map(|i| &store.slots[i].state), now_ms)
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
    fn many_keys_stay_bounded_and_the_recency_list_stays_whole() {
        let (l, clock) = limiter(r#"{"algorithm":"token_bucket","capacity":10,"refill_per_sec":1}"#, 100);
        for i in 0..10_000u32 {
            clock.advance(1.0);
            let key = format!("k{}", i % 250);
            l.check(&key, 1);
            l.check("hot", 1);
            assert!(l.len() <= 100);
        }
        let store = l.lock();
        assert_eq!(store.map.len(), store.slots.len());
        // Walking the list from the newest reaches every slot once, each
        // pointing back at the one before, and the map points at each.
        let (mut i, mut newer, mut seen) = (store.newest, NIL, 0);
        while i != NIL {
            assert_eq!(store.slots[i].newer, newer);
            assert_eq!(store.map.get(&*store.slots[i].key), Some(&i));
            seen += 1;
            (newer, i) = (i, store.slots[i].older);
        }
        assert_eq!(newer, store.oldest);
        assert_eq!(seen, store.slots.len());
        assert_eq!(&*store.slots[store.newest].key, "hot");
    }

    #[test]
    fn a_max_of_zero_keeps_one_key() {
        let (l, _clock) = limiter(GCRA, 0);
        assert_eq!(l.max_keys(), 1);
        assert!(l.check("a", 1).allowed);
        assert!(l.check("b", 1).allowed);
        assert_eq!(l.len(), 1);
    }

    /// Runs `f` on its own thread and fails, instead of hanging, when it has
    /// not returned within `secs` seconds (a hung thread is left behind).
    fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
        let worker = std::thread::spawn(f);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while !worker.is_finished() {
            assert!(std::time::Instant::now() < deadline, "did not return within {secs} s: hung");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }

    #[test]
    fn eviction_returns_after_many_touches_of_one_key() {
        // Regression: compacting the recency queue dropped the touch it had
        // just pushed, so "a" became un-evictable and adding "b" spun forever.
        let (l, _clock) = limiter(GCRA, 1);
        within(5, move || {
            for _ in 0..35 {
                l.check("a", 1);
            }
            assert!(l.check("b", 1).allowed);
            assert_eq!(l.len(), 1);
            assert!(l.state("a").is_none() && l.state("b").is_some());
        });
    }

    #[test]
    fn a_new_keys_expiry_survives_the_sweep_that_made_room_for_it() {
        // Regression: the sweep recomputed the earliest expiry from the map
        // before the new key was in it, so that key's expiry was forgotten and
        // a later sweep was skipped, evicting a live key instead of it.
        let (l, clock) = limiter(r#"{"algorithm":"gcra","limit":1,"period":"1s","burst":1}"#, 2);
        assert!(l.check("a", 1).allowed);
        assert!(l.check("b", 1).allowed);
        clock.advance(1_000.0); // a and b expire
        assert!(l.check("c", 1).allowed); // sweeps a and b; c expires at +2000
        clock.advance(500.0);
        assert!(l.check("live", 1).allowed); // expires at +2500
        clock.advance(100.0);
        assert!(l.check("c", 0).allowed); // c is now the most recently used
        clock.advance(500.0); // +2100: c has expired, live has not
        assert!(l.check("new", 1).allowed);
        assert!(l.state("c").is_none(), "the expired key is dropped");
        assert!(l.state("live").is_some() && l.state("new").is_some(), "not the least recently used live one");
    }

    /// A reference model: a plain map and a recency list, oldest first.
    struct Model {
        alg: Algorithm,
        max_keys: usize,
        states: HashMap<String, State>,
        lru: Vec<String>,
    }

    impl Model {
        fn touch(&mut self, key: &str) {
            self.lru.retain(|k| k != key);
            self.lru.push(key.to_owned());
        }

        fn check(&mut self, key: &str, cost: u64, now: f64) -> Decision {
            let (d, next) = self.alg.decide(self.states.get(key), now, cost);
            if self.states.contains_key(key) {
                self.touch(key);
            }
            let Some(next) = next else { return d };
            if !self.states.contains_key(key) && self.states.len() >= self.max_keys {
                let alg = self.alg;
                self.states.retain(|_, s| alg.expires_at_ms(s) > now);
                let states = &self.states;
                self.lru.retain(|k| states.contains_key(k));
                if self.states.len() >= self.max_keys {
                    let oldest = self.lru.remove(0);
                    self.states.remove(&oldest);
                }
            }
            self.states.insert(key.to_owned(), next);
            self.touch(key);
            d
        }

        fn remove(&mut self, key: &str) -> bool {
            self.lru.retain(|k| k != key);
            self.states.remove(key).is_some()
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Check { key: u8, cost: u64, dt: u32 },
        Remove { key: u8 },
    }

    fn spec() -> impl proptest::strategy::Strategy<Value = &'static str> {
        proptest::sample::select(vec![
            GCRA,
            r#"{"algorithm":"token_bucket","capacity":3,"refill_per_sec":5}"#,
            r#"{"algorithm":"fixed_window","limit":2,"window":"300ms"}"#,
            r#"{"algorithm":"sliding_log","limit":2,"window":"250ms"}"#,
        ])
    }

    fn ops() -> impl proptest::strategy::Strategy<Value = Vec<Op>> {
        use proptest::prelude::*;
        let dt = prop_oneof![4 => Just(0u32), 3 => 0u32..20, 1 => 0u32..1_500];
        let op = prop_oneof![
            12 => (0u8..5, 0u64..3, dt).prop_map(|(key, cost, dt)| Op::Check { key, cost, dt }),
            1 => (0u8..5).prop_map(|key| Op::Remove { key }),
        ];
        proptest::collection::vec(op, 1..300)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, ..Default::default() })]

        /// Every call returns, the map never holds more than `max_keys`, and
        /// every decision and stored state is the reference model's.
        #[test]
        fn agrees_with_a_reference_lru(spec in spec(), max_keys in 1usize..4, ops in ops()) {
            within(20, move || {
                let (l, clock) = limiter(spec, max_keys);
                let mut model =
                    Model { alg: *l.algorithm(), max_keys, states: HashMap::new(), lru: Vec::new() };
                for op in ops {
                    match op {
                        Op::Check { key, cost, dt } => {
                            clock.advance(f64::from(dt));
                            let key = format!("k{key}");
                            let want = model.check(&key, cost, clock.now_ms());
                            assert_eq!(l.check(&key, cost), want, "check {key} {cost}");
                        }
                        Op::Remove { key } => {
                            let key = format!("k{key}");
                            assert_eq!(l.remove(&key), model.remove(&key));
                        }
                    }
                    assert!(l.len() <= max_keys, "{} keys, max {max_keys}", l.len());
                    assert_eq!(l.len(), model.states.len());
                    for (key, state) in &model.states {
                        assert_eq!(l.state(key).as_ref(), Some(state), "{key}");
                    }
                }
            });
        }
    }
}
