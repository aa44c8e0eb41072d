//! `[auth]`: API keys for the HTTP surface, each scoped to a tenant.

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The secret presented as `Authorization: Bearer <key>` or `X-Api-Key`.
    pub key: String,
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

/// `[auth]`: API keys for the HTTP surface. None configured: HTTP is open
/// (bind it to loopback, the default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthConfig {
    /// The keys.
    pub keys: Vec<ApiKey>,
    /// Replace rate-limit keys by a hash in the event stream and dashboard.
    pub hash_keys_in_events: bool,
}

/// `[[auth.keys]]` as written in the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKey {
    key: String,
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
}

impl AuthConfig {
    /// Parses and validates `[auth]`.
    ///
    /// # Errors
    /// A [`ConfigError`] naming the key at fault.
    pub(super) fn parse(t: toml::Table) -> Result<Self, ConfigError> {
        let raw = RawAuth::deserialize(t)
            .map_err(|e| ConfigError::Parse { path: None, message: format!("[auth]: {}", e.message()) })?;
        let mut keys = Vec::with_capacity(raw.keys.len());
        for (i, k) in raw.keys.into_iter().enumerate() {
            if k.key.len() < 8 {
                return Err(invalid(format!("auth.keys[{i}].key"), "must be at least 8 characters"));
            }
            if k.tenant.is_empty() || k.tenant.contains(':') {
                return Err(invalid(format!("auth.keys[{i}].tenant"), "must be non-empty and contain no ':'"));
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
            keys.push(ApiKey { key: k.key, tenant: k.tenant, permissions });
        }
        Ok(Self { keys, hash_keys_in_events: raw.hash_keys_in_events })
    }
}
