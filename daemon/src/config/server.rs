//! `[server]`: where the daemon listens, and the bounds on what it accepts.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `[server]`: where the daemon listens, and the bounds on what it accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The Unix socket (RESP). Default: `$XDG_RUNTIME_DIR/leasehold.sock`, or
    /// without `XDG_RUNTIME_DIR`, `/tmp/leasehold-<uid>/leasehold.sock` (a
    /// private directory, never the world-writable temporary directory itself).
    pub socket: PathBuf,
    /// The HTTP address. Default `127.0.0.1:7070`.
    pub http: String,
    /// Most simultaneous socket connections; more are refused with an error.
    pub max_connections: usize,
    /// Longest rate-limit key or limit name a client may send, in bytes
    /// (default 512). Store keys are `<prefix>:<space>:<limit>:<key>`, and
    /// DynamoDB's partition keys hold at most 2048 bytes.
    pub max_key_bytes: usize,
}

/// The default [`ServerConfig::max_key_bytes`].
pub const DEFAULT_MAX_KEY_BYTES: usize = 512;

impl Default for ServerConfig {
    fn default() -> Self {
        let uid = rustix::process::geteuid().as_raw();
        Self {
            socket: default_socket(std::env::var_os("XDG_RUNTIME_DIR").as_deref().map(Path::new), uid),
            http: "127.0.0.1:7070".into(),
            max_connections: 1024,
            max_key_bytes: DEFAULT_MAX_KEY_BYTES,
        }
    }
}

/// The default socket path for user `uid`, given `$XDG_RUNTIME_DIR`: that
/// directory if set, else `/tmp/leasehold-<uid>/`, a directory of the user's
/// own that the daemon creates 0700 and refuses to use if another user owns
/// it. Fixed rather than `$TMPDIR`, so clients started with another
/// environment find the same path.
pub fn default_socket(runtime_dir: Option<&Path>, uid: u32) -> PathBuf {
    match runtime_dir.filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir.join("leasehold.sock"),
        None => PathBuf::from(format!("/tmp/leasehold-{uid}/leasehold.sock")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_socket_is_never_directly_in_the_temporary_directory() {
        assert_eq!(default_socket(Some(Path::new("/run/user/1000")), 1000), Path::new("/run/user/1000/leasehold.sock"));
        assert_eq!(default_socket(None, 1000), Path::new("/tmp/leasehold-1000/leasehold.sock"));
        assert_eq!(default_socket(Some(Path::new("")), 7), Path::new("/tmp/leasehold-7/leasehold.sock"));
    }
}
