//! `[server]`: where the daemon listens.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

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
