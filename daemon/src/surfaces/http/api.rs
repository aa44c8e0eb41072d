//! The decision API: `POST /v1/check` and `GET /v1/status/{limit}/{key}`.
//! Answers carry `X-RateLimit-*` headers; a denial is 429 with `Retry-After`.

use std::time::Instant;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use super::auth::{authorize, scope};
use super::error::ApiError;
use crate::app::App;
use crate::config::Permission;
use crate::lease::{Check, CheckError, Served, Verdict};
use crate::store::StoreUnavailable;
use crate::surfaces::check_length;

/// The body of `POST /v1/check`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckBody {
    /// The limit's name.
    pub limit: String,
    /// The caller's key.
    pub key: String,
    /// Units to spend (default 1).
    #[serde(default = "one")]
    pub cost: u64,
}

fn one() -> u64 {
    1
}

/// A decision as JSON.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DecisionBody {
    /// Whether the units were admitted.
    pub allowed: bool,
    /// The most the key can spend at once.
    pub limit: u64,
    /// What it could still spend now.
    pub remaining: u64,
    /// Milliseconds until a denied request could pass (0 when allowed).
    pub retry_after_ms: u64,
    /// Milliseconds until the key is back to its full limit.
    pub reset_after_ms: u64,
}

fn unavailable_reason(e: Option<&StoreUnavailable>) -> &'static str {
    match e {
        Some(StoreUnavailable::Timeout(_)) => "timeout",
        Some(StoreUnavailable::CircuitOpen) => "circuit breaker open",
        Some(StoreUnavailable::Contention { .. }) => "contention",
        _ => "store error",
    }
}

fn answer(v: Verdict) -> Result<Response, ApiError> {
    if v.served == Served::Unavailable {
        return Err(ApiError::Unavailable(unavailable_reason(v.unavailable.as_ref())));
    }
    let d = v.decision;
    let body = DecisionBody {
        allowed: d.allowed,
        limit: d.limit,
        remaining: d.remaining,
        retry_after_ms: d.retry_after_ms,
        reset_after_ms: d.reset_after_ms,
    };
    let status = if d.allowed { StatusCode::OK } else { StatusCode::TOO_MANY_REQUESTS };
    let mut r = (status, Json(body)).into_response();
    let h = r.headers_mut();
    h.insert("x-ratelimit-limit", d.limit.into());
    h.insert("x-ratelimit-remaining", d.remaining.into());
    h.insert("x-ratelimit-reset", d.reset_after_ms.div_ceil(1000).into());
    if !d.allowed {
        h.insert("retry-after", d.retry_after_ms.div_ceil(1000).max(1).into());
    }
    if v.served == Served::Degraded {
        h.insert("x-ratelimit-degraded", HeaderValue::from_static("true"));
    }
    Ok(r)
}

/// 422 for a limit name or key longer than `server.max_key_bytes`.
fn bounded(app: &App, limit: &str, key: &str) -> Result<(), ApiError> {
    let max = app.config.server.max_key_bytes;
    check_length("limit name", limit.as_bytes(), max)
        .and_then(|()| check_length("key", key.as_bytes(), max))
        .map_err(ApiError::Unprocessable)
}

pub(super) async fn check(
    State(app): State<App>,
    headers: HeaderMap,
    body: Result<Json<CheckBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let tenant = authorize(&app, &headers, Permission::Check)?;
    let Json(body) = body.map_err(|e| match e {
        JsonRejection::JsonSyntaxError(e) => ApiError::Malformed(e.body_text()),
        JsonRejection::MissingJsonContentType(_) => ApiError::NotJson,
        JsonRejection::JsonDataError(e) => ApiError::Unprocessable(e.body_text()),
        other => ApiError::Malformed(other.body_text()),
    })?;
    bounded(&app, &body.limit, &body.key)?;
    let start = Instant::now();
    let check = Check { limit: &body.limit, key: &body.key, cost: body.cost };
    let v = app.leases.check_in(scope(tenant), check).await;
    app.metrics.http_latency.record(start.elapsed());
    let v = v.map_err(|CheckError::UnknownLimit(l)| ApiError::UnknownLimit(l))?;
    app.observe_for(tenant.map(|t| t.tenant.as_str()), &body.limit, &body.key, &v);
    answer(v)
}

pub(super) async fn status(
    State(app): State<App>,
    headers: HeaderMap,
    Path((limit, key)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let tenant = authorize(&app, &headers, Permission::Status)?;
    bounded(&app, &limit, &key)?;
    let v = app
        .leases
        .status_in(scope(tenant), &limit, &key)
        .await
        .map_err(|CheckError::UnknownLimit(l)| ApiError::UnknownLimit(l))?;
    answer(v)
}
