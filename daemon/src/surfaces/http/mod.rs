//! The HTTP surface (axum): `POST /v1/check`, `GET /v1/status/{limit}/{key}`,
//! `/health`, `/ready`, `/metrics`, and the dashboard with its event stream.
//!
//! ## Who may call what
//!
//! Without API keys (`[auth]` has none):
//! - `/v1/check`, `/v1/status` and `/metrics` are open to whoever can reach
//!   the port. The daemon starts that way only on a loopback address, unless
//!   `auth.allow_open = true`.
//! - The dashboard (`/`, `/v1/events`, `/v1/limits`) is served only to a
//!   caller on this machine: loopback peer address, loopback `Host` (against
//!   DNS rebinding), and a matching `Origin` if any ([`access`]).
//! - A browser page may call only from the daemon's own origin.
//!
//! With API keys (`Authorization: Bearer <key>` or `X-Api-Key: <key>`; never
//! in the URL): `/v1/*` and `/metrics` need a key holding the route's
//! permission, from anywhere, loopback included: missing or unknown → 401,
//! lacking the permission → 403. Each key is a tenant, and its rate-limit
//! keys are stored as `<tenant>:<key>`, so two tenants never share a counter.
//! The dashboard's data needs a `dashboard` key, as a header or as the
//! session cookie `POST /v1/session` sets ([`session`]); the page itself is
//! a static shell that asks for the key. A tenant's dashboard shows only its
//! own keys and decisions; socket traffic has no tenant and shows only
//! without keys. `/health` and `/ready` stay open for orchestrators.
//!
//! - `api`: the decision routes; `ops`: health, readiness, metrics;
//!   `dashboard`: the page, `/v1/events` and `/v1/limits`.
//! - [`auth`], [`access`], [`session`] and [`error`]: shared by every route.

pub mod access;
mod api;
pub mod auth;
mod dashboard;
pub mod error;
mod ops;
pub mod session;

use std::sync::Arc;

use axum::extract::FromRef;
use axum::routing::{get, post};
use axum::Router;

use crate::app::App;

pub use api::{CheckBody, DecisionBody};
pub use error::ApiError;
pub use session::Sessions;

/// What the routes share: the app, and the dashboard's sessions (state of
/// this surface alone, so it lives here rather than in [`App`]).
#[derive(Clone, Debug)]
pub struct HttpState {
    /// The daemon's shared state.
    pub app: App,
    /// Live dashboard sessions.
    pub sessions: Arc<Sessions>,
}

impl FromRef<HttpState> for App {
    fn from_ref(state: &HttpState) -> Self {
        state.app.clone()
    }
}

/// Every route, over `app`, with a session store of its own. Serve it with
/// `into_make_service_with_connect_info::<SocketAddr>()`: without the peer
/// address, callers are never taken for local ones.
pub fn router(app: App) -> Router {
    let state = HttpState { app, sessions: Arc::default() };
    Router::new()
        .route("/v1/check", post(api::check))
        .route("/v1/status/{limit}/{key}", get(api::status))
        .route("/v1/session", post(session::start).delete(session::end))
        .route("/health", get(ops::health))
        .route("/ready", get(ops::ready))
        .route("/metrics", get(ops::metrics))
        .merge(dashboard::routes())
        .layer(axum::middleware::from_fn_with_state(state.clone(), access::browser_guard))
        .with_state(state)
}
