//! Operations endpoints: `/health` (liveness), `/ready` (the store answers)
//! and `/metrics` (Prometheus).

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::auth::authorize;
use super::error::ApiError;
use crate::app::App;
use crate::config::Permission;

pub(super) async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

pub(super) async fn ready(State(app): State<App>) -> Response {
    match app.store_ready().await {
        Ok(()) => Json(serde_json::json!({ "status": "ready", "store": app.leases.counters().cas().store().name() }))
            .into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "not ready");
            (StatusCode::SERVICE_UNAVAILABLE, Json(serde_json::json!({ "status": "store unreachable" })))
                .into_response()
        }
    }
}

pub(super) async fn metrics(State(app): State<App>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&app, &headers, Permission::Metrics)?;
    let mut r = crate::observe::metrics::render(&app.metrics, &app.snapshot()).into_response();
    r.headers_mut().insert("content-type", HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    Ok(r)
}
