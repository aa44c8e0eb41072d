//! The HTTP surface (axum): `POST /v1/check`, `GET /v1/status/{limit}/{key}`,
//! `/health`, `/ready`, `/metrics`.
//!
//! With API keys configured (`[auth]`), `/v1/*` and `/metrics` need a key
//! (`Authorization: Bearer <key>` or `X-Api-Key: <key>`): missing or unknown
//! → 401, lacking the route's permission → 403. Each key is a tenant, and its
//! rate-limit keys are stored as `<tenant>:<key>`, so two tenants never share
//! a counter. `/health` and `/ready` stay open for orchestrators.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::time::Instant;

use crate::app::App;
use crate::config::ApiKey;
use crate::lease::{Check, CheckError, Served, Verdict};
use crate::store::StoreUnavailable;

/// Every route, over `app`.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/v1/check", post(check))
        .route("/v1/status/{limit}/{key}", get(status))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .merge(crate::dashboard::routes())
        .with_state(app)
}

/// An error answer: a status and a JSON body `{"error": ...}`. Server-side
/// failures say what kind of failure it was, not the backend's internals.
#[derive(Debug)]
pub enum ApiError {
    /// 400: the body is not JSON.
    Malformed(String),
    /// 415: the body is not declared as JSON.
    NotJson,
    /// 422: JSON of the wrong shape.
    Unprocessable(String),
    /// 401: no key, or an unknown one.
    Unauthorized,
    /// 403: the key lacks a permission.
    Forbidden(&'static str),
    /// 404: no such limit.
    UnknownLimit(String),
    /// 503: the store is unavailable and the limit fails closed.
    Unavailable(&'static str),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            Self::Malformed(m) => (StatusCode::BAD_REQUEST, format!("malformed JSON: {m}")),
            Self::NotJson => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "send the body as Content-Type: application/json".into())
            }
            Self::Unprocessable(m) => (StatusCode::UNPROCESSABLE_ENTITY, m),
            Self::Unauthorized => (StatusCode::UNAUTHORIZED, "missing or unknown API key".into()),
            Self::Forbidden(p) => (StatusCode::FORBIDDEN, format!("this API key lacks the `{p}` permission")),
            Self::UnknownLimit(l) => (StatusCode::NOT_FOUND, format!("unknown limit {l:?}")),
            Self::Unavailable(why) => {
                let mut r = (
                    StatusCode::SERVICE_UNAVAILABLE,
                    Json(ErrorBody { error: "store unavailable".into(), reason: Some(why) }),
                )
                    .into_response();
                r.headers_mut().insert("retry-after", HeaderValue::from_static("1"));
                return r;
            }
        };
        (status, Json(ErrorBody { error: message, reason: None })).into_response()
    }
}

#[derive(Serialize)]
struct ErrorBody {
    error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
}

/// The API key presented, if keys are configured; `Ok(None)` when they are not.
///
/// # Errors
/// 401 or 403 as above.
pub fn authorize<'a>(
    app: &'a App,
    headers: &HeaderMap,
    permission: &'static str,
) -> Result<Option<&'a ApiKey>, ApiError> {
    let keys = &app.config.auth.keys;
    if keys.is_empty() {
        return Ok(None);
    }
    let presented = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .ok_or(ApiError::Unauthorized)?;
    let key = keys.iter().find(|k| k.key == presented).ok_or(ApiError::Unauthorized)?;
    if key.may(permission) {
        Ok(Some(key))
    } else {
        Err(ApiError::Forbidden(permission))
    }
}

fn scoped(tenant: Option<&ApiKey>, key: &str) -> String {
    match tenant {
        Some(t) => format!("{}:{key}", t.tenant),
        None => key.to_string(),
    }
}

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

async fn check(
    State(app): State<App>,
    headers: HeaderMap,
    body: Result<Json<CheckBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let tenant = authorize(&app, &headers, "check")?;
    let Json(body) = body.map_err(|e| match e {
        JsonRejection::JsonSyntaxError(e) => ApiError::Malformed(e.body_text()),
        JsonRejection::MissingJsonContentType(_) => ApiError::NotJson,
        JsonRejection::JsonDataError(e) => ApiError::Unprocessable(e.body_text()),
        other => ApiError::Malformed(other.body_text()),
    })?;
    let key = scoped(tenant, &body.key);
    let start = Instant::now();
    let v = app.limiter.check(Check { limit: &body.limit, key: &key, cost: body.cost }).await;
    app.metrics.http_latency.record(start.elapsed());
    let v = v.map_err(|CheckError::UnknownLimit(l)| ApiError::UnknownLimit(l))?;
    app.observe(&body.limit, &key, &v);
    answer(v)
}

async fn status(
    State(app): State<App>,
    headers: HeaderMap,
    Path((limit, key)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let tenant = authorize(&app, &headers, "status")?;
    let key = scoped(tenant, &key);
    let v = app.limiter.status(&limit, &key).await.map_err(|CheckError::UnknownLimit(l)| ApiError::UnknownLimit(l))?;
    answer(v)
}

async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn ready(State(app): State<App>) -> Response {
    match app.store_ready().await {
        Ok(()) => {
            Json(serde_json::json!({ "status": "ready", "store": app.limiter.cas().store().name() })).into_response()
        }
        Err(e) => {
            tracing::warn!(error = %e, "not ready");
            (StatusCode::SERVICE_UNAVAILABLE, Json(serde_json::json!({ "status": "store unreachable" })))
                .into_response()
        }
    }
}

async fn metrics(State(app): State<App>, headers: HeaderMap) -> Result<Response, ApiError> {
    authorize(&app, &headers, "metrics")?;
    let mut r = crate::metrics::render(&app).into_response();
    r.headers_mut().insert("content-type", HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    Ok(r)
}
