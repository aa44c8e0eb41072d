//! Error answers: a status and a JSON body `{"error": ...}`. Server-side
//! failures say what kind of failure it was, not the backend's internals.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;

use crate::config::Permission;

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
    Forbidden(Permission),
    /// 404: no such limit.
    UnknownLimit(String),
    /// 403: the caller is not on this machine (or its page is from another
    /// origin), and without API keys that is required; the message says why.
    NotLocal(String),
    /// 400: a session was asked for, but no API keys are configured.
    NoKeys,
    /// 503: the store is unavailable and the limit fails closed.
    Unavailable(&'static str),
    /// 500: the daemon failed; the message says at what, not how.
    Internal(&'static str),
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
            Self::Forbidden(p) => (StatusCode::FORBIDDEN, format!("this API key lacks the `{}` permission", p.name())),
            Self::UnknownLimit(l) => (StatusCode::NOT_FOUND, format!("unknown limit {l:?}")),
            Self::NotLocal(m) => (StatusCode::FORBIDDEN, m),
            Self::NoKeys => {
                (StatusCode::BAD_REQUEST, "no API keys are configured: the dashboard needs no session".into())
            }
            Self::Internal(m) => (StatusCode::INTERNAL_SERVER_ERROR, m.into()),
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
