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
