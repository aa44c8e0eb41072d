//! The daemon's configuration: one TOML file (or none), `LEASEHOLD_*`
//! environment overrides, and validation that names the field at fault.
//!
//! ```toml
//! [store]            # kind = "embedded" | "memory" | "dynamodb"; path; sync; table, endpoint, region, prefix, hash_key, max_retries
//! [server]           # socket, http, max_connections, max_key_bytes
//! [lease]            # ttl, horizon, max, max_keys, idle, store_timeout, breaker_failures, breaker_open_for
//! [limits.api]       # algorithm = "gcra", limit = 1000, period = "60s", burst = 100, mode = "leased", fail = "closed"
//! [auth]             # hash_keys_in_events, allow_open
//! [[auth.keys]]      # key = "..." (or key_sha256 = "<hex>"), tenant = "acme", permissions = ["check", "status", "metrics", "dashboard"]
//! ```
//!
//! HTTP on an address beyond loopback needs `[[auth.keys]]`, or
//! `auth.allow_open = true` to say an open API is meant.
//!
//! Environment: `LEASEHOLD_<SECTION>_<FIELD>` overrides `[section] field`
//! (e.g. `LEASEHOLD_STORE_KIND=memory`, `LEASEHOLD_SERVER_HTTP=0.0.0.0:7070`,
//! `LEASEHOLD_LEASE_MAX=5%`), for the `store`, `server` and `lease` sections.

mod auth;
mod lease;
mod server;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

pub use auth::{sha256, ApiKey, AuthConfig, Permission};
pub use lease::{LeaseConfig, LeaseMax};
pub use server::{default_socket, ServerConfig, DEFAULT_MAX_KEY_BYTES};

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
        store.sync_policy().map_err(|e| invalid("store.sync", e))?;
        let server: ServerConfig = ServerConfig::deserialize(section(&mut table, "server")?)
            .map_err(|e| ConfigError::Parse { path: None, message: format!("[server]: {}", e.message()) })?;
        if server.max_connections == 0 {
            return Err(invalid("server.max_connections", "must be at least 1"));
        }
        if server.http.parse::<std::net::SocketAddr>().is_err() {
            return Err(invalid("server.http", format!("{:?} is not an address like 127.0.0.1:7070", server.http)));
        }
        if !(1..=MAX_KEY_BYTES_CEILING).contains(&server.max_key_bytes) {
            return Err(invalid(
                "server.max_key_bytes",
                format!("must be from 1 to {MAX_KEY_BYTES_CEILING} bytes, got {}", server.max_key_bytes),
            ));
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
        check_store_key_size(&store, &server, &limits, &auth)?;
        if let Ok(addr) = server.http.parse() {
            check_http_exposure(addr, &auth)?;
        }
        Ok(Self { store, server, lease, limits, auth })
    }

    /// Checks that serving HTTP on `addr` (the address actually bound, which
    /// a command-line flag may have changed) does not open the API to the
    /// network by accident; see [`check_http_exposure`].
    ///
    /// # Errors
    /// As [`check_http_exposure`].
    pub fn check_http_exposure(&self, addr: SocketAddr) -> Result<(), ConfigError> {
        check_http_exposure(addr, &self.auth)
    }
}

/// Whether `ip` is a loopback address (IPv4-mapped IPv6 ones included).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// HTTP beyond loopback with no API keys would let anyone who can reach the
/// port spend every key's budget and read `/metrics`: refused unless
/// `auth.allow_open = true` says it is meant.
///
/// # Errors
/// A [`ConfigError`] on `server.http` saying why and what to do.
pub fn check_http_exposure(addr: SocketAddr, auth: &AuthConfig) -> Result<(), ConfigError> {
    if is_loopback(addr.ip()) || !auth.keys.is_empty() || auth.allow_open {
        return Ok(());
    }
    Err(invalid(
        "server.http",
        format!(
            "{addr} is reachable from other hosts, and with no [[auth.keys]] anyone who can reach it could call \
             /v1/check, /v1/status and /metrics; add API keys, listen on 127.0.0.1, or set auth.allow_open = true \
             to serve an open API on purpose"
        ),
    ))
}

/// The largest `server.max_key_bytes` accepted: half of DynamoDB's 2048-byte
/// partition-key limit, leaving the other half for the prefix, the key space
/// (tenant) and the limit name.
pub const MAX_KEY_BYTES_CEILING: usize = 1024;

/// DynamoDB's largest partition key, in bytes.
const STORE_KEY_MAX: usize = 2048;

/// The longest limit name `CL.THROTTLE` makes: `cl:<u64>:<u64>:<u64>`.
const CL_THROTTLE_NAME_MAX: usize = "cl:".len() + 3 * 20 + 2;

/// Checks that the longest store key a client can cause,
/// `<prefix>:<space>:<limit>:<key>` (the space: `l`, `cl` or `t.<tenant>`),
/// fits DynamoDB's 2048-byte partition key.
fn check_store_key_size(
    store: &StoreConfig,
    server: &ServerConfig,
    limits: &BTreeMap<String, LimitSettings>,
    auth: &AuthConfig,
) -> Result<(), ConfigError> {
    let limit = limits.keys().map(String::len).max().unwrap_or(0).max(CL_THROTTLE_NAME_MAX);
    let tenant = auth.keys.iter().map(|k| k.tenant.len()).max().unwrap_or(0);
    let space = "t.".len() + tenant;
    let worst = store.prefix.len() + 1 + space + 1 + limit + 1 + server.max_key_bytes;
    if worst > STORE_KEY_MAX {
        return Err(invalid(
            "server.max_key_bytes",
            format!(
                "{} bytes of key after store.prefix ({} bytes), the longest tenant ({tenant}) and limit name \
                 ({limit}) make store keys of up to {worst} bytes; DynamoDB allows {STORE_KEY_MAX}",
                server.max_key_bytes,
                store.prefix.len(),
            ),
        ));
    }
    Ok(())
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
            ("[server]\nmax_key_bytes = 0", "server.max_key_bytes"),
            ("[server]\nmax_key_bytes = 1025", "server.max_key_bytes"),
            ("[store]\nprefix = \"a:b\"", "store.prefix"),
            ("[limitz.a]\nx = 1", "limitz"),
            ("[[auth.keys]]\nkey = \"short\"\ntenant = \"t\"", "auth.keys[0].key"),
            ("[[auth.keys]]\ntenant = \"t\"", "auth.keys[0].key"),
            ("[[auth.keys]]\nkey_sha256 = \"abc\"\ntenant = \"t\"", "auth.keys[0].key_sha256"),
            ("[[auth.keys]]\nkey = \"long-enough\"\nkey_sha256 = \"00\"\ntenant = \"t\"", "auth.keys[0].key_sha256"),
            (
                "[[auth.keys]]\nkey = \"same-key-1\"\ntenant = \"a\"\n[[auth.keys]]\nkey = \"same-key-1\"\ntenant = \"b\"",
                "auth.keys[1].key",
            ),
            ("[server]\nhttp = \"0.0.0.0:7070\"", "server.http"),
            ("[server]\nhttp = \"[::]:7070\"", "server.http"),
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

    #[test]
    fn api_keys_may_be_given_as_digests_and_are_found_by_digest() {
        // `printf %s secret-key-1 | sha256sum`
        let hex = "a6c1eaef9d5f23f4e13d9b574cbbe07ae877227d92be87d077005dc6776bcdcc";
        let c = load(&format!(
            "[[auth.keys]]\nkey_sha256 = \"{}\"\ntenant = \"a\"\n[[auth.keys]]\nkey = \"other-key-2\"\ntenant = \"b\"",
            hex.to_uppercase()
        ))
        .unwrap();
        assert_eq!(c.auth.find(b"secret-key-1").map(|k| k.tenant.as_str()), Some("a"));
        assert_eq!(c.auth.find(b"other-key-2").map(|k| k.tenant.as_str()), Some("b"));
        assert!(c.auth.find(b"secret-key-").is_none() && c.auth.find(b"").is_none());
        let dup = format!("[[auth.keys]]\nkey = \"secret-key-1\"\ntenant = \"a\"\n[[auth.keys]]\nkey_sha256 = \"{hex}\"\ntenant = \"b\"");
        match load(&dup) {
            Err(ConfigError::Invalid { field, reason }) => {
                assert_eq!(field, "auth.keys[1].key_sha256");
                assert!(reason.contains("auth.keys[0]"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn http_beyond_loopback_needs_keys_or_allow_open() {
        let err = load("[server]\nhttp = \"0.0.0.0:7070\"").unwrap_err().to_string();
        assert!(err.contains("server.http") && err.contains("auth.allow_open = true"), "{err}");
        assert!(load("[server]\nhttp = \"0.0.0.0:7070\"\n[auth]\nallow_open = true").is_ok());
        assert!(load("[server]\nhttp = \"0.0.0.0:7070\"\n[[auth.keys]]\nkey = \"long-enough\"\ntenant = \"t\"").is_ok());
        for loopback in ["127.0.0.1:7070", "127.8.9.10:0", "[::1]:7070", "[::ffff:127.0.0.1]:7070"] {
            assert!(load(&format!("[server]\nhttp = \"{loopback}\"")).is_ok(), "{loopback}");
        }
    }

    #[test]
    fn the_longest_key_a_client_can_send_fits_a_dynamodb_key() {
        assert_eq!(load("").unwrap().server.max_key_bytes, 512);
        assert!(load("[server]\nmax_key_bytes = 1024").is_ok());
        let long_prefix = format!("[server]\nmax_key_bytes = 1024\n[store]\nprefix = \"{}\"", "p".repeat(1000));
        match load(&long_prefix) {
            Err(ConfigError::Invalid { field, reason }) => {
                assert_eq!(field, "server.max_key_bytes");
                assert!(reason.contains("DynamoDB allows 2048"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }
}
