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

mod auth;
mod lease;
mod server;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

pub use auth::{ApiKey, AuthConfig, Permission};
pub use lease::{LeaseConfig, LeaseMax};
pub use server::ServerConfig;

use crate::lease::settings::LimitSettings;
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

/// The whole configuration, resolved and validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// `[store]`.
    pub store: StoreConfig,
    /// `[server]`.
    pub server: ServerConfig,
    /// `[lease]`.
    pub lease: LeaseConfig,
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
        let lease = LeaseConfig::parse(section(&mut table, "lease")?)?;
        let auth = AuthConfig::parse(section(&mut table, "auth")?)?;
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
            limits.insert(name.clone(), lease.limit(&name, t)?);
        }
        Ok(Self { store, server, lease, limits, auth })
    }
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
    use crate::lease::settings::Mode;

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
