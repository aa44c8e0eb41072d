//! `[lease]` and `[limits.*]`: lease defaults and each named limit, parsed
//! into the lease cache's settings. Every error names its field.

use std::time::Duration;

use leasehold_core::{Algorithm, DurationMs, LimitSpec};
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

fn positive(field: &str, d: Duration) -> Result<Duration, ConfigError> {
    if d.is_zero() {
        Err(invalid(field, "must be longer than zero"))
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
            "ttl" => d.ttl = positive(&field, duration(&field, &v)?)?,
            "horizon" => d.horizon = positive(&field, duration(&field, &v)?)?,
            "max" => d.max = LeaseMax::parse(&field, &v)?,
            "mode" => d.mode = enum_value(&field, &v, "\"leased\", \"direct\"")?,
            "fail" => d.fail = enum_value(&field, &v, "\"closed\", \"open\"")?,
            "max_keys" => d.cache.max_keys = count(&field, &v)?,
            "idle" => d.cache.idle = positive(&field, duration(&field, &v)?)?,
            "store_timeout" => d.cache.store_timeout = positive(&field, duration(&field, &v)?)?,
            "breaker_failures" => d.cache.breaker.failures = count(&field, &v)?.min(u64::from(u32::MAX)) as u32,
            "breaker_open_for" => d.cache.breaker.open_for = positive(&field, duration(&field, &v)?)?,
            _ => return Err(invalid(field, "unknown key; expected one of ttl, horizon, max, mode, fail, max_keys, idle, store_timeout, breaker_failures, breaker_open_for")),
        }
        }
        Ok(d)
    }

    /// Parses `[limits.NAME]`, filling what it leaves out from `self`.
    pub(super) fn limit(&self, name: &str, mut t: toml::Table) -> Result<LimitSettings, ConfigError> {
        let d = self;
        let at = |k: &str| format!("limits.{name}.{k}");
        let mode = t
            .remove("mode")
            .map(|v| enum_value(&at("mode"), &v, "\"leased\", \"direct\""))
            .transpose()?
            .unwrap_or(d.mode);
        let fail = t
            .remove("fail")
            .map(|v| enum_value(&at("fail"), &v, "\"closed\", \"open\""))
            .transpose()?
            .unwrap_or(d.fail);
        let ttl = t
            .remove("lease_ttl")
            .map(|v| duration(&at("lease_ttl"), &v).and_then(|x| positive(&at("lease_ttl"), x)))
            .transpose()?
            .unwrap_or(d.ttl);
        let horizon = t
            .remove("lease_horizon")
            .map(|v| duration(&at("lease_horizon"), &v).and_then(|x| positive(&at("lease_horizon"), x)))
            .transpose()?
            .unwrap_or(d.horizon);
        let explicit_max = t.remove("lease_max").map(|v| LeaseMax::parse(&at("lease_max"), &v)).transpose()?;
        let json = serde_json::to_value(&t).map_err(|e| invalid(format!("limits.{name}"), e.to_string()))?;
        let serde_json::Value::Object(map) = json else { unreachable!("a TOML table is an object") };
        let spec = LimitSpec::try_from(map).map_err(|e| invalid(at(e.field), e.reason))?;
        let algorithm = Algorithm::try_from(spec).map_err(|e| invalid(at(e.field), e.reason))?;
        let ceiling = algorithm.ceiling();
        let max = explicit_max.unwrap_or(d.max).units(ceiling);
        if max > ceiling {
            return Err(invalid(at("lease_max"), format!("{max} is above the limit's ceiling ({ceiling}): a lease can never be larger than what the limit grants at once")));
        }
        Ok(LimitSettings { algorithm, mode, fail, lease: LeaseSettings { ttl, horizon, max } })
    }
}
