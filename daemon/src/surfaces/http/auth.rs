//! API keys: who is calling, what they may do, and the tenant their
//! rate-limit keys are scoped to.
//!
//! A key is read from `Authorization: Bearer <key>` or `X-Api-Key: <key>`,
//! never from the URL (URLs end up in logs, histories and `Referer` headers).
//! It is found by comparing its SHA-256 digest with every configured one in
//! constant time ([`crate::config::AuthConfig::find`]).

use axum::http::HeaderMap;

use super::error::ApiError;
use crate::app::App;
use crate::config::{ApiKey, Permission};
use crate::lease::counter::Scope;

/// The API key in the request's headers, if any.
pub fn presented_key(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
}

/// The API key presented, if keys are configured; `Ok(None)` when they are not.
///
/// # Errors
/// 401 when no key or an unknown one is presented; 403 when it lacks `permission`.
pub fn authorize<'a>(
    app: &'a App,
    headers: &HeaderMap,
    permission: Permission,
) -> Result<Option<&'a ApiKey>, ApiError> {
    let auth = &app.config.auth;
    if auth.keys.is_empty() {
        return Ok(None);
    }
    let presented = presented_key(headers).ok_or(ApiError::Unauthorized)?;
    let key = auth.find(presented.as_bytes()).ok_or(ApiError::Unauthorized)?;
    if key.may(permission) {
        Ok(Some(key))
    } else {
        Err(ApiError::Forbidden(permission))
    }
}

/// The key space of a caller: its tenant's own, or the host's when no API
/// keys are configured (the socket's space too).
pub(super) fn scope(tenant: Option<&ApiKey>) -> Scope<'_> {
    match tenant {
        Some(t) => Scope::Tenant(&t.tenant),
        None => Scope::Host,
    }
}
