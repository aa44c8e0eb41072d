//! `[lease]` and `[limits.*]`: lease defaults and each named limit, parsed
//! into the lease cache's settings. Every error names its field.

use std::time::Duration;

use leasehold_core::{Algorithm, AlgorithmKind, DurationMs, LimitSpec};
use serde::Deserialize;

use super::{invalid, ConfigError};
use crate::lease::settings::{CacheSettings, FailPolicy, LeaseSettings, LimitSettings, Mode};

/// A lease cap: a number of units, or a fraction of the limit's ceiling (`"10%"` or `0.1`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LeaseMax {
    /// At most this many units.
    Units(u64),
    /// At most this fraction of the ceiling (at least 1 unit).
    Fraction(f64),
}

impl LeaseMax {
    fn parse(field: &str, v: &toml::Value) -> Result<Self, ConfigError> {
        match v {
            toml::Value::Integer(n) if *n >= 1 => Ok(Self::Units(*n as u64)),
            toml::Value::Float(f) if *f > 0.0 && *f <= 1.0 => Ok(Self::Fraction(*f)),
            toml::Value::String(s) if s.ends_with('%') => match s.trim_end_matches('%').trim().parse::<f64>() {
                Ok(p) if p > 0.0 && p <= 100.0 => Ok(Self::Fraction(p / 100.0)),
                _ => Err(invalid(field, format!("{s:?} is not a percentage from 0% to 100%"))),
            },
            other => Err(invalid(
                field,
                format!("expected a unit count (>= 1), a fraction (0, 1] or a percentage like \"10%\", got {other}"),
            )),
        }
    }

    fn units(self, ceiling: u64) -> u64 {
        match self {
            Self::Units(n) => n,
            Self::Fraction(f) => ((ceiling as f64 * f).floor() as u64).max(1),
        }
    }
}

/// `[lease]`: daemon-wide lease-cache settings and the defaults of every limit.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseConfig {
    /// Longest lease life.
    pub ttl: Duration,
    /// Demand horizon a lease provisions for.
    pub horizon: Duration,
    /// Lease cap.
    pub max: LeaseMax,
    /// Default mode of limits.
    pub mode: Mode,
    /// Default fail policy of limits.
    pub fail: FailPolicy,
    /// The lease cache's own settings.
    pub cache: CacheSettings,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(2),
            horizon: Duration::from_millis(250),
            max: LeaseMax::Fraction(0.1),
            mode: Mode::Leased,
            fail: FailPolicy::Closed,
            cache: CacheSettings::default(),
        }
    }
}

fn duration(field: &str, v: &toml::Value) -> Result<Duration, ConfigError> {
    match v {
        toml::Value::String(s) => {
            s.parse::<DurationMs>().map(|d| Duration::from_millis(d.0)).map_err(|e| invalid(field, e.to_string()))
        }
        other => Err(invalid(field, format!("expected a duration string such as \"2s\", got {other}"))),
    }
}

/// The longest lease life or demand horizon: a day. Longer leases only
/// strand units (under-issue) and hold records' lease entries longer.
const MAX_LEASE_SPAN: Duration = Duration::from_secs(24 * 3600);
/// The longest idle time before a slot is evicted: 30 days (the cache
/// cannot represent much longer spans, and no slot needs them).
const MAX_IDLE: Duration = Duration::from_secs(30 * 24 * 3600);
/// The longest per-call store timeout: a minute; a caller waits this long.
const MAX_STORE_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest breaker rest: an hour.
const MAX_BREAKER_REST: Duration = Duration::from_secs(3600);

fn bounded(field: &str, d: Duration, max: Duration) -> Result<Duration, ConfigError> {
    if d.is_zero() {
        Err(invalid(field, "must be longer than zero"))
    } else if d > max {
        Err(invalid(field, format!("must be at most {} s", max.as_secs())))
    } else {
        Ok(d)
    }
}

fn count(field: &str, v: &toml::Value) -> Result<u64, ConfigError> {
    match v {
        toml::Value::Integer(n) if *n >= 1 => Ok(*n as u64),
        other => Err(invalid(field, format!("expected a whole number >= 1, got {other}"))),
    }
}

fn enum_value<T: for<'de> Deserialize<'de>>(field: &str, v: &toml::Value, choices: &str) -> Result<T, ConfigError> {
    T::deserialize(v.clone()).map_err(|_| invalid(field, format!("expected one of {choices}, got {v}")))
}

impl LeaseConfig {
    /// Parses `[lease]`.
    pub(super) fn parse(mut t: toml::Table) -> Result<Self, ConfigError> {
        let mut d = LeaseConfig::default();
        let keys: Vec<String> = t.keys().cloned().collect();
        for key in keys {
            let v = t.remove(&key).expect("present");
            let field = format!("lease.{key}");
            match key.as_str() {
            "ttl" => d.ttl = bounded(&field, duration(&field, &v)?, MAX_LEASE_SPAN)?,
            "horizon" => d.horizon = bounded(&field, duration(&field, &v)?, MAX_LEASE_SPAN)?,
            "max" => d.max = LeaseMax::parse(&field, &v)?,
            "mode" => d.mode = enum_value(&field, &v, "\"leased\", \"direct\"")?,
            "fail" => d.fail = enum_value(&field, &v, "\"closed\", \"open\"")?,
            "max_keys" => d.cache.max_keys = count(&field, &v)?,
            "max_bytes" => d.cache.max_bytes = count(&field, &v)?,
            "idle" => d.cache.idle = bounded(&field, duration(&field, &v)?, MAX_IDLE)?,
            "store_timeout" => d.cache.store_timeout = bounded(&field, duration(&field, &v)?, MAX_STORE_TIMEOUT)?,
            "breaker_failures" => d.cache.breaker.failures = count(&field, &v)?.min(u64::from(u32::MAX)) as u32,
            "breaker_open_for" => d.cache.breaker.open_for = bounded(&field, duration(&field, &v)?, MAX_BREAKER_REST)?,
            _ => return Err(invalid(field, "unknown key; expected one of ttl, horizon, max, mode, fail, max_keys, max_bytes, idle, store_timeout, breaker_failures, breaker_open_for")),
        }
        }
        Ok(d)
    }

    /// Parses `[limits.NAME]`, filling what it leaves out from `self`.
    pub(super) fn limit(&self, name: &str, mut t: toml::Table) -> Result<LimitSettings, ConfigError> {
        let d = self;
        let at = |k: &str| format!("limits.{name}.{k}");
        let explicit_mode =
            t.remove("mode").map(|v| enum_value(&at("mode"), &v, "\"leased\", \"direct\"")).transpose()?;
        let fail = t
            .remove("fail")
            .map(|v| enum_value(&at("fail"), &v, "\"closed\", \"open\""))
            .transpose()?
            .unwrap_or(d.fail);
        let ttl = t
            .remove("lease_ttl")
            .map(|v| duration(&at("lease_ttl"), &v).and_then(|x| bounded(&at("lease_ttl"), x, MAX_LEASE_SPAN)))
            .transpose()?
            .unwrap_or(d.ttl);
        let horizon = t
            .remove("lease_horizon")
            .map(|v| duration(&at("lease_horizon"), &v).and_then(|x| bounded(&at("lease_horizon"), x, MAX_LEASE_SPAN)))
            .transpose()?
            .unwrap_or(d.horizon);
        let explicit_max = t.remove("lease_max").map(|v| LeaseMax::parse(&at("lease_max"), &v)).transpose()?;
        let json = serde_json::to_value(&t).map_err(|e| invalid(format!("limits.{name}"), e.to_string()))?;
        let serde_json::Value::Object(map) = json else { unreachable!("a TOML table is an object") };
        let spec = LimitSpec::try_from(map).map_err(|e| invalid(at(e.field), e.reason))?;
        let algorithm = Algorithm::try_from(spec).map_err(|e| invalid(at(e.field), e.reason))?;
        // The sliding log counts a unit at the instant it is taken; a leased
        // unit is spent later, so leasing it cannot be exact. It is direct-only.
        let mode = match (algorithm.kind(), explicit_mode) {
        (AlgorithmKind::SlidingLog, Some(Mode::Leased)) => {
            return Err(invalid(at("mode"), "sliding_log is direct-only: it counts each unit at the instant it is admitted, which a lease (units spent later) cannot honour; use mode = \"direct\", or sliding_window/gcra for leased limits"))
        }
        (AlgorithmKind::SlidingLog, None) => Mode::Direct,
        (_, m) => m.unwrap_or(d.mode),
    };
        let ceiling = algorithm.ceiling();
        let max = explicit_max.unwrap_or(d.max).units(ceiling);
        if max > ceiling {
            return Err(invalid(at("lease_max"), format!("{max} is above the limit's ceiling ({ceiling}): a lease can never be larger than what the limit grants at once")));
        }
        Ok(LimitSettings { algorithm, mode, fail, lease: LeaseSettings { ttl, horizon, max } })
    }
}
