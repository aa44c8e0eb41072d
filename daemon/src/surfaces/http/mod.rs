//! The HTTP surface (axum): `POST /v1/check`, `GET /v1/status/{limit}/{key}`,
//! `/health`, `/ready`, `/metrics`, and the dashboard with its event stream.
//!
//! With API keys configured (`[auth]`), `/v1/*` and `/metrics` need a key
//! (`Authorization: Bearer <key>` or `X-Api-Key: <key>`): missing or unknown
//! → 401, lacking the route's permission → 403. Each key is a tenant, and its
//! rate-limit keys are stored as `<tenant>:<key>`, so two tenants never share
//! a counter. `/health` and `/ready` stay open for orchestrators.
//!
//! - `api`: the decision routes; `ops`: health, readiness, metrics;
//!   `dashboard`: the page and `/v1/events`.
//! - [`auth`] and [`error`]: shared by every route.

mod api;
pub mod auth;
mod dashboard;
pub mod error;
mod ops;

use axum::routing::{get, post};
use axum::Router;

use crate::app::App;

pub use api::{CheckBody, DecisionBody};
pub use error::ApiError;

/// Every route, over `app`.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/v1/check", post(api::check))
        .route("/v1/status/{limit}/{key}", get(api::status))
        .route("/health", get(ops::health))
        .route("/ready", get(ops::ready))
        .route("/metrics", get(ops::metrics))
        .merge(dashboard::routes())
        .with_state(app)
}
