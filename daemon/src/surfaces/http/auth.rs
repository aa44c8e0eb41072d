//! API keys: who is calling, what they may do, and the tenant their
//! rate-limit keys are scoped to.

use axum::http::HeaderMap;

use super::error::ApiError;
use crate::app::App;
use crate::config::{ApiKey, Permission};

/// The API key presented, if keys are configured; `Ok(None)` when they are not.
///
/// # Errors
/// 401 or 403 as above.
pub fn authorize<'a>(
    app: &'a App,
    headers: &HeaderMap,
    permission: Permission,
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

pub(super) fn scoped(tenant: Option<&ApiKey>, key: &str) -> String {
    match tenant {
        Some(t) => format!("{}:{key}", t.tenant),
        None => key.to_string(),
    }
}
