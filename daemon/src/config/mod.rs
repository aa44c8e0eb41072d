//! The daemon's configuration: one TOML file (or none), `LEASEHOLD_*`
//! environment overrides, and validation that names the field at fault.
//!
//! ```toml
//! [store]            # kind = "embedded" | "memory" | "dynamodb"; path; table, endpoint, region, prefix, hash_key, max_retries
//! [server]           # socket, http, max_connections
//! [lease]            # ttl, horizon, max, max_keys, idle, store_timeout, breaker_failures, breaker_open_for
//! [limits.api]       # algorithm = "gcra", limit = 1000, period = "60s", burst = 100, mode = "leased", fail = "closed"
//! [[auth.keys]]      # key = "...", tenant = "acme", permissions = ["check", "status", "metrics", "dashboard"]
//! ```
//!
//! Environment: `LEASEHOLD_<SECTION>_<FIELD>` overrides `[section] field`
//! (e.g. `LEASEHOLD_STORE_KIND=memory`, `LEASEHOLD_SERVER_HTTP=0.0.0.0:7070`,
//! `LEASEHOLD_LEASE_MAX=5%`), for the `store`, `server` and `lease` sections.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use leasehold_core::{Algorithm, DurationMs, LimitSpec};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::lease::LimiterConfig;
use crate::limits::{FailPolicy, LeaseSettings, LimitSettings, Mode};
use crate::store::StoreConfig;

/// A configuration that cannot be honoured; the message names the field.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is malformed or has an unknown or mistyped key.
    #[error("config{}: {message}", .path.as_ref().map(|p| format!(" file {}", p.display())).unwrap_or_default())]
    Parse {
        /// The file, if any.
        path: Option<PathBuf>,
        /// The parser's message (it names the key and line).
        message: String,
    },
    /// A value is out of range or inconsistent.
    #[error("invalid `{field}`: {reason}")]
    Invalid {
        /// Dotted path of the field, e.g. `limits.api.period`.
        field: String,
        /// What is wrong.
        reason: String,
    },
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid { field: field.into(), reason: reason.into() }
}

/// `[server]`: where the daemon listens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The Unix socket (RESP). Default `${XDG_RUNTIME_DIR:-/tmp}/leasehold.sock`.
    pub socket: PathBuf,
    /// The HTTP address. Default `127.0.0.1:7070`.
    pub http: String,
    /// Most simultaneous socket connections; more are refused with an error.
    pub max_connections: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        let dir = std::env::var_os("XDG_RUNTIME_DIR")
            .filter(|d| !d.is_empty())
            .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
        Self { socket: dir.join("leasehold.sock"), http: "127.0.0.1:7070".into(), max_connections: 1024 }
    }
}

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

/// `[lease]` as resolved: daemon-wide lease-cache settings and per-limit defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaseDefaults {
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
    pub limiter: LimiterConfig,
}

impl Default for LeaseDefaults {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(2),
            horizon: Duration::from_millis(250),
            max: LeaseMax::Fraction(0.1),
            mode: Mode::Leased,
            fail: FailPolicy::Closed,
            limiter: LimiterConfig::default(),
        }
    }
}

/// One API key: who it is (the tenant its keys are scoped to) and what it may do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKey {
    /// The secret presented as `Authorization: Bearer <key>` or `X-Api-Key`.
    pub key: String,
    /// The tenant; its rate-limit keys never share a counter with another tenant's.
    pub tenant: String,
    /// Any of `check`, `status`, `metrics`, `dashboard`.
    #[serde(default = "ApiKey::default_permissions")]
    pub permissions: Vec<String>,
}

impl ApiKey {
    fn default_permissions() -> Vec<String> {
        vec!["check".into(), "status".into()]
    }

    /// Whether the key holds `permission`.
    pub fn may(&self, permission: &str) -> bool {
        self.permissions.iter().any(|p| p == permission)
    }
}

/// Permissions an API key can hold.
pub const PERMISSIONS: [&str; 4] = ["check", "status", "metrics", "dashboard"];

/// `[auth]`: API keys for the HTTP surface. None configured: HTTP is open
/// (bind it to loopback, the default).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The keys.
    pub keys: Vec<ApiKey>,
    /// Replace rate-limit keys by a hash in the event stream and dashboard.
    pub hash_keys_in_events: bool,
}

/// The whole configuration, resolved and validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// `[store]`.
    pub store: StoreConfig,
    /// `[server]`.
    pub server: ServerConfig,
    /// `[lease]`.
    pub lease: LeaseDefaults,
    /// `[limits.*]`, by name.
    pub limits: BTreeMap<String, LimitSettings>,
    /// `[auth]`.
    pub auth: AuthConfig,
}

/// The limits a daemon started without a config file serves.
pub const EXAMPLE_LIMITS: &str = r#"
[limits.api]
algorithm = "gcra"
limit = 1000
period = "60s"
burst = 100

[limits.login]
algorithm = "sliding_window"
limit = 5
window = "1m"
mode = "direct"

[limits.tokens]
algorithm = "quota"
limit = 100000
window = "1d"
"#;

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

impl Config {
    /// Loads `path` (or, with `None`, the built-in example limits on the
    /// embedded store), applies `LEASEHOLD_*` overrides from `env`, validates.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the file, field or value at fault.
    pub fn load(path: Option<&Path>, env: impl IntoIterator<Item = (String, String)>) -> Result<Self, ConfigError> {
        let text = match path {
            Some(p) => std::fs::read_to_string(p).map_err(|source| ConfigError::Read { path: p.into(), source })?,
            None => EXAMPLE_LIMITS.to_string(),
        };
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Parse { path: path.map(Into::into), message: e.to_string() })?;
        apply_env(&mut table, env)?;
        Self::from_table(table).map_err(|e| match e {
            ConfigError::Parse { message, .. } => ConfigError::Parse { path: path.map(Into::into), message },
            e => e,
        })
    }

    /// Builds a config from parsed TOML.
    ///
    /// # Errors
    /// As [`Config::load`].
    pub fn from_table(mut table: toml::Table) -> Result<Self, ConfigError> {
        const SECTIONS: [&str; 5] = ["store", "server", "lease", "limits", "auth"];
        if let Some(unknown) = table.keys().find(|k| !SECTIONS.contains(&k.as_str())) {
            return Err(invalid(unknown.clone(), format!("unknown section; expected one of {}", SECTIONS.join(", "))));
        }
        let section = |table: &mut toml::Table, name: &str| -> Result<toml::Table, ConfigError> {
            match table.remove(name) {
                None => Ok(toml::Table::new()),
                Some(toml::Value::Table(t)) => Ok(t),
                Some(other) => Err(invalid(name, format!("expected a table, got {other}"))),
            }
        };
        let store_t = section(&mut table, "store")?;
        let store: StoreConfig = StoreConfig::deserialize(store_t.clone())
            .map_err(|e| ConfigError::Parse { path: None, message: format!("[store]: {}", e.message()) })?;
        if store.max_retries > 1000 {
            return Err(invalid("store.max_retries", "must be at most 1000"));
        }
        if store.kind == crate::store::StoreKind::Dynamodb && store.table.is_empty() {
            return Err(invalid("store.table", "is required for the dynamodb store"));
        }
        if store.prefix.is_empty() || store.prefix.contains(':') {
            return Err(invalid("store.prefix", "must be non-empty and contain no ':'"));
        }
        let server: ServerConfig = ServerConfig::deserialize(section(&mut table, "server")?)
            .map_err(|e| ConfigError::Parse { path: None, message: format!("[server]: {}", e.message()) })?;
        if server.max_connections == 0 {
            return Err(invalid("server.max_connections", "must be at least 1"));
        }
        if server.http.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid("server.http", format!("{:?} is not an address like 127.0.0.1:7070", server.http)));
        }
        let lease = lease_defaults(section(&mut table, "lease")?)?;
        let auth: AuthConfig = AuthConfig::deserialize(section(&mut table, "auth")?)
            .map_err(|e| ConfigError::Parse { path: None, message: format!("[auth]: {}", e.message()) })?;
        for (i, k) in auth.keys.iter().enumerate() {
            if k.key.len() < 8 {
                return Err(invalid(format!("auth.keys[{i}].key"), "must be at least 8 characters"));
            }
            if k.tenant.is_empty() || k.tenant.contains(':') {
                return Err(invalid(format!("auth.keys[{i}].tenant"), "must be non-empty and contain no ':'"));
            }
            if let Some(p) = k.permissions.iter().find(|p| !PERMISSIONS.contains(&p.as_str())) {
                return Err(invalid(
                    format!("auth.keys[{i}].permissions"),
                    format!("unknown permission {p:?}; expected any of {}", PERMISSIONS.join(", ")),
                ));
            }
        }
        let mut limits = BTreeMap::new();
        for (name, v) in section(&mut table, "limits")? {
            let toml::Value::Table(t) = v else {
                return Err(invalid(
                    format!("limits.{name}"),
                    "expected a table like { algorithm = \"gcra\", limit = 10, period = \"1s\" }",
                ));
            };
            if name.is_empty() || name.contains(char::is_whitespace) || name.contains(':') {
                return Err(invalid(format!("limits.{name}"), "a limit name must be non-empty, without spaces or ':'"));
            }
            limits.insert(name.clone(), limit(&name, t, &lease)?);
        }
        Ok(Self { store, server, lease, limits, auth })
    }
}

fn lease_defaults(mut t: toml::Table) -> Result<LeaseDefaults, ConfigError> {
    let mut d = LeaseDefaults::default();
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
            "max_keys" => d.limiter.max_keys = count(&field, &v)?,
            "idle" => d.limiter.idle = positive(&field, duration(&field, &v)?)?,
            "store_timeout" => d.limiter.store_timeout = positive(&field, duration(&field, &v)?)?,
            "breaker_failures" => d.limiter.breaker.failures = count(&field, &v)?.min(u64::from(u32::MAX)) as u32,
            "breaker_open_for" => d.limiter.breaker.open_for = positive(&field, duration(&field, &v)?)?,
            _ => return Err(invalid(field, "unknown key; expected one of ttl, horizon, max, mode, fail, max_keys, idle, store_timeout, breaker_failures, breaker_open_for")),
        }
    }
    Ok(d)
}

fn limit(name: &str, mut t: toml::Table, d: &LeaseDefaults) -> Result<LimitSettings, ConfigError> {
    let at = |k: &str| format!("limits.{name}.{k}");
    let mode =
        t.remove("mode").map(|v| enum_value(&at("mode"), &v, "\"leased\", \"direct\"")).transpose()?.unwrap_or(d.mode);
    let fail =
        t.remove("fail").map(|v| enum_value(&at("fail"), &v, "\"closed\", \"open\"")).transpose()?.unwrap_or(d.fail);
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

/// Applies `LEASEHOLD_<SECTION>_<FIELD>` overrides.
fn apply_env(table: &mut toml::Table, env: impl IntoIterator<Item = (String, String)>) -> Result<(), ConfigError> {
    for (name, value) in env {
        let Some(rest) = name.strip_prefix("LEASEHOLD_") else { continue };
        let Some((section, field)) = rest.split_once('_') else { continue };
        let section = section.to_ascii_lowercase();
        if !["store", "server", "lease"].contains(&section.as_str()) {
            continue;
        }
        let field = field.to_ascii_lowercase();
        let parsed = if let Ok(i) = value.parse::<i64>() {
            toml::Value::Integer(i)
        } else if let Ok(f) = value.parse::<f64>() {
            toml::Value::Float(f)
        } else if let Ok(b) = value.parse::<bool>() {
            toml::Value::Boolean(b)
        } else {
            toml::Value::String(value.clone())
        };
        // Paths and addresses stay strings even when they look like numbers.
        let parsed = match (section.as_str(), field.as_str()) {
            ("store", "path" | "table" | "endpoint" | "region" | "prefix" | "hash_key" | "kind")
            | ("server", "socket" | "http") => toml::Value::String(value),
            _ => parsed,
        };
        match table.entry(section.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new())) {
            toml::Value::Table(t) => {
                t.insert(field, parsed);
            }
            _ => return Err(invalid(section, "expected a table")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml: &str) -> Result<Config, ConfigError> {
        Config::from_table(toml.parse().unwrap())
    }

    #[test]
    fn no_file_gives_the_example_limits_on_the_embedded_store() {
        let c = Config::load(None, []).unwrap();
        assert_eq!(c.store.kind, crate::store::StoreKind::Embedded);
        assert_eq!(c.limits.keys().collect::<Vec<_>>(), ["api", "login", "tokens"]);
        assert_eq!(c.limits["api"].lease.max, 10, "a tenth of the burst of 100");
        assert_eq!(c.limits["login"].mode, Mode::Direct);
        assert_eq!(c.server.http, "127.0.0.1:7070");
    }

    #[test]
    fn environment_overrides_the_file() {
        let env = [
            ("LEASEHOLD_STORE_KIND", "memory"),
            ("LEASEHOLD_SERVER_HTTP", "127.0.0.1:0"),
            ("LEASEHOLD_LEASE_MAX", "50%"),
            ("OTHER", "x"),
        ];
        let c = Config::load(None, env.map(|(k, v)| (k.to_string(), v.to_string()))).unwrap();
        assert_eq!(c.store.kind, crate::store::StoreKind::Memory);
        assert_eq!(c.server.http, "127.0.0.1:0");
        assert_eq!(c.limits["api"].lease.max, 50);
    }

    #[test]
    fn invalid_configs_name_the_field() {
        let cases = [
            ("[limits.a]\nalgorithm = \"gcrx\"\nlimit = 1\nperiod = \"1s\"", "limits.a.algorithm"),
            ("[limits.a]\nalgorithm = \"gcra\"\nlimit = 10\nperiod = \"0s\"", "limits.a.period"),
            ("[limits.a]\nalgorithm = \"gcra\"\nlimit = -3\nperiod = \"1s\"", "limits.a.limit"),
            ("[limits.a]\nalgorithm = \"gcra\"\nlimit = 10\nperiod = \"1s\"\nlease_max = 11", "limits.a.lease_max"),
            ("[limits.a]\nalgorithm = \"gcra\"\nlimit = 10\nperiod = \"1s\"\nmode = \"fast\"", "limits.a.mode"),
            ("[limits.a]\nalgorithm = \"gcra\"\nlimit = 10\nperiod = \"1s\"\ncolour = 1", "limits.a.algorithm"),
            ("[lease]\nttl = \"0s\"", "lease.ttl"),
            ("[lease]\nmax = \"200%\"", "lease.max"),
            ("[lease]\nspeed = 3", "lease.speed"),
            ("[server]\nhttp = \"localhost\"", "server.http"),
            ("[server]\nmax_connections = 0", "server.max_connections"),
            ("[store]\nprefix = \"a:b\"", "store.prefix"),
            ("[limitz.a]\nx = 1", "limitz"),
            ("[[auth.keys]]\nkey = \"short\"\ntenant = \"t\"", "auth.keys[0].key"),
            (
                "[[auth.keys]]\nkey = \"long-enough\"\ntenant = \"t\"\npermissions = [\"root\"]",
                "auth.keys[0].permissions",
            ),
        ];
        for (toml, field) in cases {
            match load(toml) {
                Err(ConfigError::Invalid { field: f, reason }) => assert_eq!(f, field, "{toml}: {reason}"),
                other => panic!("{toml}: expected an error on {field}, got {other:?}"),
            }
        }
        for (toml, needle) in [("[store]\nkind = \"postgres\"", "postgres"), ("[server]\nsokket = \"/x\"", "sokket")] {
            let err = load(toml).unwrap_err().to_string();
            assert!(err.contains(needle), "{toml}: {err}");
        }
        let err = Config::load(Some(Path::new("/nonexistent/leasehold.toml")), []).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/leasehold.toml"), "{err}");
    }
}
