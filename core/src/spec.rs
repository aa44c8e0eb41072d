//! Limit specifications: the config form (`LimitSpec`) and the validated,
//! ready-to-run form (`Algorithm`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::algorithms::{FixedWindow, Gcra, LeakyBucket, Quota, SlidingLog, SlidingWindow, TokenBucket};
use crate::decision::Decision;
use crate::error::{SpecError, StateError};
use crate::lease::LeaseTerm;
use crate::rule::Rule;
use crate::state::State;
use crate::DurationMs;

/// Which algorithm a limit uses, by its config name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlgorithmKind {
    /// `"gcra"`
    Gcra,
    /// `"token_bucket"`
    TokenBucket,
    /// `"leaky_bucket"`
    LeakyBucket,
    /// `"fixed_window"`
    FixedWindow,
    /// `"sliding_window"`
    SlidingWindow,
    /// `"sliding_log"`
    SlidingLog,
    /// `"quota"`
    Quota,
}

impl AlgorithmKind {
    /// Every algorithm, in the order the docs list them.
    pub const ALL: [AlgorithmKind; 7] = [
        Self::Gcra,
        Self::TokenBucket,
        Self::LeakyBucket,
        Self::FixedWindow,
        Self::SlidingWindow,
        Self::SlidingLog,
        Self::Quota,
    ];

    /// The config name, e.g. `"token_bucket"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gcra => "gcra",
            Self::TokenBucket => "token_bucket",
            Self::LeakyBucket => "leaky_bucket",
            Self::FixedWindow => "fixed_window",
            Self::SlidingWindow => "sliding_window",
            Self::SlidingLog => "sliding_log",
            Self::Quota => "quota",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The fields a spec of this algorithm takes: `(required, optional)`.
    fn fields(self) -> (&'static [&'static str], &'static [&'static str]) {
        match self {
            Self::Gcra => (&["limit", "period"], &["burst"]),
            Self::TokenBucket => (&["capacity", "refill_per_sec"], &[]),
            Self::LeakyBucket => (&["capacity", "leak_per_sec"], &[]),
            Self::FixedWindow | Self::SlidingWindow | Self::SlidingLog | Self::Quota => (&["limit", "window"], &[]),
        }
    }
}

/// A limit as written in config: `{ algorithm = "gcra", limit = 1000, period = "60s", burst = 100 }`.
///
/// Deserializing checks the shape (known algorithm, its fields and no others,
/// numbers where numbers belong) and names the field that is wrong; turning it
/// into an [`Algorithm`] checks the values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "algorithm", rename_all = "snake_case", try_from = "serde_json::Map<String, Value>")]
pub enum LimitSpec {
    /// `limit` units per `period`, bursts of up to `burst` (default `limit`).
    Gcra {
        /// Units per period.
        limit: u64,
        /// The period, e.g. `"60s"`.
        period: DurationMs,
        /// The most units admitted at once.
        #[serde(skip_serializing_if = "Option::is_none")]
        burst: Option<u64>,
    },
    /// A bucket of `capacity` tokens refilled at `refill_per_sec`.
    TokenBucket {
        /// Tokens when full.
        capacity: u64,
        /// Tokens added per second (may be fractional).
        refill_per_sec: f64,
    },
    /// A meter that holds `capacity` units and leaks `leak_per_sec`.
    LeakyBucket {
        /// Units before it overflows.
        capacity: u64,
        /// Units leaked per second (may be fractional).
        leak_per_sec: f64,
    },
    /// `limit` units per epoch-aligned `window`.
    FixedWindow {
        /// Units per window.
        limit: u64,
        /// The window, e.g. `"1m"`.
        window: DurationMs,
    },
    /// `limit` units per sliding `window` (weighted two-window estimate).
    SlidingWindow {
        /// Units per window.
        limit: u64,
        /// The window.
        window: DurationMs,
    },
    /// `limit` units in any `window`-long interval, exactly.
    SlidingLog {
        /// Units per window.
        limit: u64,
        /// The window.
        window: DurationMs,
    },
    /// A quota of `limit` units (e.g. tokens) per epoch-aligned `window`.
    Quota {
        /// Units per window.
        limit: u64,
        /// The window, e.g. `"1d"`.
        window: DurationMs,
    },
}

fn units(map: &serde_json::Map<String, Value>, field: &'static str) -> Result<u64, SpecError> {
    match map.get(field) {
        Some(v) => match v.as_f64() {
            Some(n) if n.fract() == 0.0 && n >= 0.0 && n <= crate::MAX_UNITS as f64 => Ok(n as u64),
            Some(n) if n < 0.0 => Err(SpecError::new(field, format!("must not be negative (got {v})"))),
            Some(_) => {
                Err(SpecError::new(field, format!("must be a whole number from 1 to {} (got {v})", crate::MAX_UNITS)))
            }
            None => Err(SpecError::new(field, format!("must be a number (got {v})"))),
        },
        None => Err(SpecError::new(field, "is required")),
    }
}

fn opt_units(map: &serde_json::Map<String, Value>, field: &'static str) -> Result<Option<u64>, SpecError> {
    map.contains_key(field).then(|| units(map, field)).transpose()
}

fn rate(map: &serde_json::Map<String, Value>, field: &'static str) -> Result<f64, SpecError> {
    match map.get(field) {
        Some(v) => {
            v.as_f64().ok_or_else(|| SpecError::new(field, format!("must be a number of units per second (got {v})")))
        }
        None => Err(SpecError::new(field, "is required")),
    }
}

fn span(map: &serde_json::Map<String, Value>, field: &'static str) -> Result<DurationMs, SpecError> {
    match map.get(field) {
        Some(Value::String(s)) => {
            s.parse().map_err(|e: crate::duration::ParseDurationError| SpecError::new(field, e.to_string()))
        }
        Some(v) => Err(SpecError::new(field, format!("must be a duration string such as \"60s\" (got {v})"))),
        None => Err(SpecError::new(field, "is required")),
    }
}

impl TryFrom<serde_json::Map<String, Value>> for LimitSpec {
    type Error = SpecError;

    fn try_from(map: serde_json::Map<String, Value>) -> Result<Self, SpecError> {
        let names = AlgorithmKind::ALL.map(AlgorithmKind::name).join(", ");
        let kind = match map.get("algorithm") {
            Some(Value::String(name)) => AlgorithmKind::from_name(name).ok_or_else(|| {
                SpecError::new("algorithm", format!("unknown algorithm {name:?}; expected one of {names}"))
            })?,
            Some(v) => return Err(SpecError::new("algorithm", format!("must be a string, one of {names} (got {v})"))),
            None => return Err(SpecError::new("algorithm", format!("is required; one of {names}"))),
        };
        let (required, optional) = kind.fields();
        if let Some(extra) =
            map.keys().find(|k| *k != "algorithm" && !required.contains(&k.as_str()) && !optional.contains(&k.as_str()))
        {
            let known = required.iter().chain(optional).copied().collect::<Vec<_>>().join(", ");
            return Err(SpecError {
                field: "algorithm",
                reason: format!("unknown field `{extra}` for {}; it takes {known}", kind.name()),
            });
        }
        Ok(match kind {
            AlgorithmKind::Gcra => Self::Gcra {
                limit: units(&map, "limit")?,
                period: span(&map, "period")?,
                burst: opt_units(&map, "burst")?,
            },
            AlgorithmKind::TokenBucket => {
                Self::TokenBucket { capacity: units(&map, "capacity")?, refill_per_sec: rate(&map, "refill_per_sec")? }
            }
            AlgorithmKind::LeakyBucket => {
                Self::LeakyBucket { capacity: units(&map, "capacity")?, leak_per_sec: rate(&map, "leak_per_sec")? }
            }
            AlgorithmKind::FixedWindow => {
                Self::FixedWindow { limit: units(&map, "limit")?, window: span(&map, "window")? }
            }
            AlgorithmKind::SlidingWindow => {
                Self::SlidingWindow { limit: units(&map, "limit")?, window: span(&map, "window")? }
            }
            AlgorithmKind::SlidingLog => {
                Self::SlidingLog { limit: units(&map, "limit")?, window: span(&map, "window")? }
            }
            AlgorithmKind::Quota => Self::Quota { limit: units(&map, "limit")?, window: span(&map, "window")? },
        })
    }
}

/// A validated algorithm with its parameters: the thing decisions are made by.
/// It cannot hold an invalid parameter. Deserializes from the config form (see
/// [`LimitSpec`]) and serializes back to it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "LimitSpec", into = "LimitSpec")]
pub enum Algorithm {
    /// See [`Gcra`].
    Gcra(Gcra),
    /// See [`TokenBucket`].
    TokenBucket(TokenBucket),
    /// See [`LeakyBucket`].
    LeakyBucket(LeakyBucket),
    /// See [`FixedWindow`].
    FixedWindow(FixedWindow),
    /// See [`SlidingWindow`].
    SlidingWindow(SlidingWindow),
    /// See [`SlidingLog`].
    SlidingLog(SlidingLog),
    /// See [`Quota`].
    Quota(Quota),
}

impl TryFrom<LimitSpec> for Algorithm {
    type Error = SpecError;

    fn try_from(spec: LimitSpec) -> Result<Self, SpecError> {
        Ok(match spec {
            LimitSpec::Gcra { limit, period, burst } => Self::Gcra(Gcra::new(limit, period, burst)?),
            LimitSpec::TokenBucket { capacity, refill_per_sec } => {
                Self::TokenBucket(TokenBucket::new(capacity, refill_per_sec)?)
            }
            LimitSpec::LeakyBucket { capacity, leak_per_sec } => {
                Self::LeakyBucket(LeakyBucket::new(capacity, leak_per_sec)?)
            }
            LimitSpec::FixedWindow { limit, window } => Self::FixedWindow(FixedWindow::new(limit, window)?),
            LimitSpec::SlidingWindow { limit, window } => Self::SlidingWindow(SlidingWindow::new(limit, window)?),
            LimitSpec::SlidingLog { limit, window } => Self::SlidingLog(SlidingLog::new(limit, window)?),
            LimitSpec::Quota { limit, window } => Self::Quota(Quota::new(limit, window)?),
        })
    }
}

impl From<Algorithm> for LimitSpec {
    fn from(a: Algorithm) -> Self {
        match a {
            Algorithm::Gcra(g) => Self::Gcra { limit: g.limit(), period: g.period(), burst: Some(g.burst()) },
            Algorithm::TokenBucket(t) => {
                Self::TokenBucket { capacity: t.capacity(), refill_per_sec: t.refill_per_sec() }
            }
            Algorithm::LeakyBucket(l) => Self::LeakyBucket { capacity: l.capacity(), leak_per_sec: l.leak_per_sec() },
            Algorithm::FixedWindow(f) => Self::FixedWindow { limit: f.limit(), window: f.window() },
            Algorithm::SlidingWindow(s) => Self::SlidingWindow { limit: s.limit(), window: s.window() },
            Algorithm::SlidingLog(s) => Self::SlidingLog { limit: s.limit(), window: s.window() },
            Algorithm::Quota(q) => Self::Quota { limit: q.limit(), window: q.window() },
        }
    }
}

/// Runs `$body` with `$a` bound to the algorithm, `$s` to the state narrowed to
/// its type (a state of another algorithm reads as absent) and `$wrap` to the
/// constructor that turns that type back into a [`State`].
macro_rules! each {
    ($self:expr, $state:expr, |$a:ident, $s:ident, $wrap:ident| $body:expr) => {
        match $self {
            Algorithm::Gcra($a) => each!(@arm $state, Gcra, $s, $wrap, $body),
            Algorithm::TokenBucket($a) => each!(@arm $state, TokenBucket, $s, $wrap, $body),
            Algorithm::LeakyBucket($a) => each!(@arm $state, LeakyBucket, $s, $wrap, $body),
            Algorithm::FixedWindow($a) => each!(@arm $state, FixedWindow, $s, $wrap, $body),
            Algorithm::SlidingWindow($a) => each!(@arm $state, SlidingWindow, $s, $wrap, $body),
            Algorithm::SlidingLog($a) => each!(@arm $state, SlidingLog, $s, $wrap, $body),
            Algorithm::Quota($a) => each!(@arm $state, Quota, $s, $wrap, $body),
        }
    };
    (@arm $state:expr, $variant:ident, $s:ident, $wrap:ident, $body:expr) => {{
        let $s = match $state {
            Some(State::$variant(inner)) => Some(inner),
            _ => None,
        };
        let $wrap = State::$variant;
        $body
    }};
}

impl Algorithm {
    /// Parses a limit from its JSON config form.
    ///
    /// # Errors
    /// A [`SpecError`] naming the field that is missing, unknown or invalid.
    pub fn from_json(json: &str) -> Result<Self, SpecError> {
        let map: serde_json::Map<String, Value> =
            serde_json::from_str(json).map_err(|e| SpecError::new("spec", format!("is not a JSON object: {e}")))?;
        Self::try_from(LimitSpec::try_from(map)?)
    }

    /// Which algorithm this is.
    pub fn kind(&self) -> AlgorithmKind {
        match self {
            Self::Gcra(_) => AlgorithmKind::Gcra,
            Self::TokenBucket(_) => AlgorithmKind::TokenBucket,
            Self::LeakyBucket(_) => AlgorithmKind::LeakyBucket,
            Self::FixedWindow(_) => AlgorithmKind::FixedWindow,
            Self::SlidingWindow(_) => AlgorithmKind::SlidingWindow,
            Self::SlidingLog(_) => AlgorithmKind::SlidingLog,
            Self::Quota(_) => AlgorithmKind::Quota,
        }
    }

    /// The most units this limit can ever grant at once (`Decision::limit`).
    pub fn ceiling(&self) -> u64 {
        each!(self, None::<&State>, |a, _s, _w| a.ceiling())
    }

    /// All-or-nothing: admit `cost` units at `now_ms` or none. Returns the
    /// decision and the state to store, or `None` when nothing changed (a
    /// denial, or `cost == 0`). A cost above [`Self::ceiling`] is always
    /// denied with `retry_after_ms == RETRY_NEVER`.
    pub fn decide(&self, state: Option<&State>, now_ms: f64, cost: u64) -> (Decision, Option<State>) {
        each!(self, state, |a, s, wrap| {
            let (d, next) = a.decide(s, now_ms, cost);
            (d, next.map(wrap))
        })
    }

    /// How many units could be granted at `now_ms`.
    pub fn available(&self, state: Option<&State>, now_ms: f64) -> u64 {
        each!(self, state, |a, s, _w| a.available(s, now_ms))
    }

    /// Grants as many units as possible up to `want`, or 0 when fewer than
    /// `min` are available; returns the grant and the new state (`None` when 0).
    pub fn take(&self, state: Option<&State>, now_ms: f64, want: u64, min: u64) -> (u64, Option<State>) {
        each!(self, state, |a, s, wrap| {
            let (granted, next) = a.take(s, now_ms, want, min);
            (granted, next.map(wrap))
        })
    }

    /// Gives back `n` unused units, never beyond the ceiling (for GCRA and
    /// the buckets, never beyond the ceiling less the units out on lease);
    /// `None` when nothing changes. Pass the time the units were *taken* as
    /// `now_ms`: window algorithms only accept units back into the window
    /// they came from, so a refund can never add capacity to a later window,
    /// and the sliding log only from its own entry of that instant. Units
    /// taken with [`Self::take_lease`] go back with [`Self::refund_lease`].
    pub fn refund(&self, state: Option<&State>, now_ms: f64, n: u64) -> Option<State> {
        each!(self, state, |a, s, wrap| a.refund(s, now_ms, n).map(|(_, next)| wrap(next)))
    }

    /// Grant up to `want` units (none if fewer than `min` are available) as a
    /// lease spendable until `until_ms`. Returns the grant and the new state
    /// (`None` when 0).
    ///
    /// The lease's identity is `LeaseTerm { taken_at_ms: now_ms, until_ms }`;
    /// its units may be spent while `now < until_ms` and given back with
    /// [`Self::refund_lease`] before then. For GCRA and the buckets the record
    /// keeps the units out until `until_ms` so that admissions over every
    /// interval stay within the algorithm's bound (see [`crate::lease`]); a
    /// non-finite time or an `until_ms` not after the record's time grants 0.
    /// For the window algorithms this is [`Self::take`]: the lease must end
    /// with its window ([`Self::window_end_ms`]).
    pub fn take_lease(
        &self,
        state: Option<&State>,
        now_ms: f64,
        want: u64,
        min: u64,
        until_ms: f64,
    ) -> (u64, Option<State>) {
        each!(self, state, |a, s, wrap| {
            let (granted, next) = a.take_lease(s, now_ms, want, min, until_ms);
            (granted, next.map(wrap))
        })
    }

    /// Give back `n` unused units of `lease`; returns the units accepted and
    /// the new state (0 and `None` when nothing changes).
    ///
    /// For GCRA and the buckets, units are accepted only while the lease's
    /// entry exists and `now_ms < until_ms`, at most the units still out on
    /// it: after its end a lease's units count as consumed. For the window
    /// algorithms this is [`Self::refund`] dated `lease.taken_at_ms`: units go
    /// back only into the window they were taken in.
    pub fn refund_lease(&self, state: Option<&State>, now_ms: f64, lease: LeaseTerm, n: u64) -> (u64, Option<State>) {
        each!(self, state, |a, s, wrap| {
            let (accepted, next) = a.refund_lease(s, now_ms, lease, n);
            (accepted, next.map(wrap))
        })
    }

    /// Ends `lease` at `now_ms`: gives back `n` unused units (as
    /// [`Self::refund_lease`]) and, for GCRA and the buckets, closes its
    /// entry, so the units spent from it count as consumed now rather than at
    /// its end (see [`crate::lease`]). The holder must not spend the lease
    /// afterwards. Returns the units accepted and the new state.
    pub fn end_lease(&self, state: Option<&State>, now_ms: f64, lease: LeaseTerm, n: u64) -> (u64, Option<State>) {
        each!(self, state, |a, s, wrap| {
            let (accepted, next) = a.end_lease(s, now_ms, lease, n);
            (accepted, next.map(wrap))
        })
    }

    /// The key's standing at `now_ms` without consuming anything: a decision
    /// for zero units, whose `remaining` is what could be admitted now.
    pub fn status(&self, state: Option<&State>, now_ms: f64) -> Decision {
        // A zero-cost decision consumes nothing and reports what is available.
        self.decide(state, now_ms, 0).0
    }

    /// Epoch milliseconds (a whole number, rounded up so it is never early) at
    /// which the state is indistinguishable from absent; a store may forget it
    /// then. A state of another algorithm expires at once.
    pub fn expires_at_ms(&self, state: &State) -> f64 {
        each!(self, Some(state), |a, s, _w| s.map_or(0.0, |s| a.expires_at(s).ceil()))
    }

    /// For window algorithms, when the window containing `now_ms` ends: a
    /// lease taken in it must not outlive it. `None` for the others.
    pub fn window_end_ms(&self, now_ms: f64) -> Option<f64> {
        let span = match self {
            Self::FixedWindow(f) => f.window(),
            Self::Quota(q) => q.window(),
            Self::SlidingWindow(s) => s.window(),
            _ => return None,
        };
        Some((now_ms / span.as_f64()).floor() * span.as_f64() + span.as_f64())
    }

    /// Reads state stored for this algorithm.
    ///
    /// # Errors
    /// A [`StateError`] when the JSON is not state of this algorithm (for
    /// example after a limit's algorithm was changed in config).
    pub fn parse_state(&self, json: &str) -> Result<State, StateError> {
        let bad = |e: serde_json::Error| StateError { algorithm: self.kind().name(), reason: e.to_string() };
        let state = match self.kind() {
            AlgorithmKind::Gcra => State::Gcra(serde_json::from_str(json).map_err(bad)?),
            AlgorithmKind::TokenBucket => State::TokenBucket(serde_json::from_str(json).map_err(bad)?),
            AlgorithmKind::LeakyBucket => State::LeakyBucket(serde_json::from_str(json).map_err(bad)?),
            AlgorithmKind::FixedWindow => State::FixedWindow(serde_json::from_str(json).map_err(bad)?),
            AlgorithmKind::SlidingWindow => State::SlidingWindow(serde_json::from_str(json).map_err(bad)?),
            AlgorithmKind::SlidingLog => State::SlidingLog(serde_json::from_str(json).map_err(bad)?),
            AlgorithmKind::Quota => State::Quota(serde_json::from_str(json).map_err(bad)?),
        };
        Ok(state)
    }
}
