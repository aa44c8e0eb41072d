//! `[auth]`: API keys for the HTTP surface, each scoped to a tenant, and
//! whether HTTP may be served open beyond loopback.

use serde::{Deserialize, Serialize};

use super::{invalid, ConfigError};

/// What an API key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// `POST /v1/check`.
    Check,
    /// `GET /v1/status/...`.
    Status,
    /// `GET /metrics`.
    Metrics,
    /// The dashboard and its event stream.
    Dashboard,
}

impl Permission {
    /// Every permission.
    pub const ALL: [Self; 4] = [Self::Check, Self::Status, Self::Metrics, Self::Dashboard];

    /// The name used in the config and in error messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Check => "check",
            Self::Status => "status",
            Self::Metrics => "metrics",
            Self::Dashboard => "dashboard",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// One API key: who it is (the tenant its keys are scoped to) and what it may do.
///
/// Only the key's SHA-256 digest is kept: a presented key is hashed and the
/// digests compared in constant time (see [`AuthConfig::find`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// SHA-256 of the secret presented as `Authorization: Bearer <key>` or
    /// `X-Api-Key`: `key_sha256` from the file, or the digest of `key`.
    pub key_sha256: [u8; 32],
    /// The tenant; its rate-limit keys never share a counter with another tenant's.
    pub tenant: String,
    /// What the key may do (default: check and status).
    pub permissions: Vec<Permission>,
}

impl ApiKey {
    /// Whether the key holds `permission`.
    pub fn may(&self, permission: Permission) -> bool {
        self.permissions.contains(&permission)
    }
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// `[auth]`: API keys for the HTTP surface. With none configured, HTTP is
/// open, which the daemon accepts only on a loopback address unless
/// `allow_open` says it is meant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthConfig {
    /// The keys.
    pub keys: Vec<ApiKey>,
    /// Replace rate-limit keys by a hash in the event stream and dashboard.
    pub hash_keys_in_events: bool,
    /// Serve `/v1/check`, `/v1/status` and `/metrics` without keys on an
    /// address beyond loopback (the dashboard stays loopback-only without keys).
    pub allow_open: bool,
}

impl AuthConfig {
    /// The configured key whose secret is `presented`, if any. Every
    /// configured digest is compared with the presented key's, in constant
    /// time and without stopping at a match: the time taken says nothing about
    /// how much of a guess was right.
    pub fn find(&self, presented: &[u8]) -> Option<&ApiKey> {
        self.find_digest(&sha256(presented))
    }

    /// The configured key with digest `key_sha256` (compared in constant time).
    pub fn find_digest(&self, key_sha256: &[u8; 32]) -> Option<&ApiKey> {
        use subtle::ConstantTimeEq;
        let mut found = None;
        for key in &self.keys {
            let same = bool::from(key.key_sha256.ct_eq(key_sha256));
            found = if same && found.is_none() { Some(key) } else { found };
        }
        found
    }
}

/// `[[auth.keys]]` as written in the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    key_sha256: Option<String>,
    tenant: String,
    #[serde(default)]
    permissions: Option<Vec<String>>,
}

/// `[auth]` as written in the file.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct RawAuth {
    keys: Vec<RawKey>,
    hash_keys_in_events: bool,
    allow_open: bool,
}

/// Parses 64 hex digits (either case) into 32 bytes.
fn parse_sha256_hex(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.as_bytes();
    if hex.len() != 64 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let nibble = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

impl AuthConfig {
    /// Parses and validates `[auth]`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the key at fault.
    pub(super) fn parse(t: toml::Table) -> Result<Self, ConfigError> {
        let raw = RawAuth::deserialize(t)
            .map_err(|e| ConfigError::Parse { path: None, message: format!("[auth]: {}", e.message()) })?;
        let mut keys: Vec<ApiKey> = Vec::with_capacity(raw.keys.len());
        for (i, k) in raw.keys.into_iter().enumerate() {
            let (field, key_sha256) =
                match (k.key, k.key_sha256) {
                    (Some(key), None) => {
                        if key.len() < 8 {
                            return Err(invalid(format!("auth.keys[{i}].key"), "must be at least 8 characters"));
                        }
                        ("key", sha256(key.as_bytes()))
                    }
                    (None, Some(hex)) => {
                        let digest = parse_sha256_hex(hex.trim()).ok_or_else(|| {
                            invalid(
                                format!("auth.keys[{i}].key_sha256"),
                                "must be 64 hex digits: the key's SHA-256, e.g. from `printf %s \"$KEY\" | sha256sum`",
                            )
                        })?;
                        ("key_sha256", digest)
                    }
                    (Some(_), Some(_)) => {
                        return Err(invalid(
                            format!("auth.keys[{i}].key_sha256"),
                            "give the key either as `key` or as `key_sha256`, not both",
                        ))
                    }
                    (None, None) => return Err(invalid(
                        format!("auth.keys[{i}].key"),
                        "is required, as `key` or as `key_sha256` (its SHA-256 in hex, so the file holds no secret)",
                    )),
                };
            if let Some(j) = keys.iter().position(|earlier| earlier.key_sha256 == key_sha256) {
                return Err(invalid(
                    format!("auth.keys[{i}].{field}"),
                    format!("is the same key as auth.keys[{j}]; each key must be unique"),
                ));
            }
            if k.tenant.is_empty() || k.tenant.contains(':') || k.tenant.contains(char::is_control) {
                return Err(invalid(
                    format!("auth.keys[{i}].tenant"),
                    "must be non-empty and contain no ':' or control characters",
                ));
            }
            let permissions = match k.permissions {
                None => vec![Permission::Check, Permission::Status],
                Some(names) => names
                    .iter()
                    .map(|p| {
                        Permission::parse(p).ok_or_else(|| {
                            let all: Vec<_> = Permission::ALL.iter().map(|p| p.name()).collect();
                            invalid(
                                format!("auth.keys[{i}].permissions"),
                                format!("unknown permission {p:?}; expected any of {}", all.join(", ")),
                            )
                        })
                    })
                    .collect::<Result<_, _>>()?,
            };
            keys.push(ApiKey { key_sha256, tenant: k.tenant, permissions });
        }
        Ok(Self { keys, hash_keys_in_events: raw.hash_keys_in_events, allow_open: raw.allow_open })
    }
}
