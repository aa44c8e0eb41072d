//! The surfaces: how requests reach the daemon and answers leave it.
//!
//! - [`resp`]: the Unix socket, RESP2 (every Redis client speaks it).
//! - [`http`]: the HTTP API (axum), `/metrics`, and the dashboard.
//! - [`server`]: runs both over one [`crate::app::App`] and stops them gracefully.
//!
//! May use: [`crate::app`] (the shared state) and the layers below it.
//! Nothing below calls up into a surface.

pub mod http;
pub mod resp;
pub mod server;

/// Refuses a client's rate-limit key or limit name longer than
/// `server.max_key_bytes`, with a message every surface shows as is:
/// `key is 600 bytes; the limit is 512 (server.max_key_bytes)`.
///
/// # Errors
/// The message, when `value` is longer than `max` bytes.
pub fn check_length(what: &str, value: &[u8], max: usize) -> Result<(), String> {
    if value.len() > max {
        return Err(format!("{what} is {} bytes; the limit is {max} (server.max_key_bytes)", value.len()));
    }
    Ok(())
}
