//! Dashboard sessions: how a browser, which cannot put a header on an
//! `EventSource`, proves it holds a `dashboard` key without the key ever
//! being in a URL.
//!
//! `POST /v1/session` with the key in a header answers with a cookie,
//! `leasehold_session`: a random 256-bit token, `HttpOnly` (page scripts
//! cannot read it), `SameSite=Strict` (other sites' pages cannot send it),
//! valid for [`SESSION_TTL`]. The server keeps, per session, only the
//! token's SHA-256 (a leaked memory dump does not yield usable tokens), the
//! API key's digest and the expiry, in a map of at most [`MAX_SESSIONS`].
//! Each use looks the API key up again, so a key removed from the config
//! ends its sessions. `DELETE /v1/session` ends one. Sessions are only
//! accepted by the dashboard's read-only routes, never by `/v1/check`.
//!
//! A random token in a server-side map, rather than a signed (HMAC) cookie,
//! keeps sessions revocable and needs no key management; the price, that
//! sessions end when the daemon restarts, is one sign-in.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::auth::presented_key;
use super::error::ApiError;
use super::HttpState;
use crate::config::{sha256, ApiKey, Permission};

/// How long a session lasts: a working session at the dashboard, short
/// enough that a forgotten browser does not stay signed in for days.
pub const SESSION_TTL: Duration = Duration::from_secs(3600);

/// Most live sessions kept. Only holders of a `dashboard` key can create
/// them; past this, the session closest to expiry is dropped.
pub const MAX_SESSIONS: usize = 1024;

/// The cookie's name.
pub const COOKIE: &str = "leasehold_session";

#[derive(Debug, Clone, Copy)]
struct Session {
    key_sha256: [u8; 32],
    expires: Instant,
}

/// The live sessions, by SHA-256 of their token.
#[derive(Debug, Default)]
pub struct Sessions {
    live: Mutex<HashMap<[u8; 32], Session>>,
}

impl Sessions {
    /// Starts a session for the API key with digest `key_sha256`; returns its token.
    ///
    /// # Errors
    /// The operating system's random source failed.
    pub fn create(&self, key_sha256: [u8; 32], now: Instant) -> Result<String, getrandom::Error> {
        let mut raw = [0u8; 32];
        getrandom::fill(&mut raw)?;
        let token: String = raw.iter().map(|b| format!("{b:02x}")).collect();
        let mut live = self.live.lock().expect("sessions lock");
        if live.len() >= MAX_SESSIONS {
            live.retain(|_, s| s.expires > now);
        }
        if live.len() >= MAX_SESSIONS {
            if let Some(oldest) = live.iter().min_by_key(|(_, s)| s.expires).map(|(id, _)| *id) {
                live.remove(&oldest);
            }
        }
        live.insert(sha256(token.as_bytes()), Session { key_sha256, expires: now + SESSION_TTL });
        Ok(token)
    }

    /// The API key digest of the live session with `token`, if any.
    pub fn key_of(&self, token: &str, now: Instant) -> Option<[u8; 32]> {
        let id = sha256(token.as_bytes());
        let mut live = self.live.lock().expect("sessions lock");
        match live.get(&id) {
            Some(s) if s.expires > now => Some(s.key_sha256),
            Some(_) => {
                live.remove(&id);
                None
            }
            None => None,
        }
    }

    /// Ends the session with `token`, if it is live.
    pub fn end(&self, token: &str) {
        self.live.lock().expect("sessions lock").remove(&sha256(token.as_bytes()));
    }

    /// Live sessions (expired ones not yet dropped included).
    pub fn len(&self) -> usize {
        self.live.lock().expect("sessions lock").len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The session token in the request's cookies, if any.
pub(super) fn token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// The configured key behind the request's session cookie, if it is live
/// and the key still exists.
pub(super) fn session_key<'a>(state: &'a HttpState, headers: &HeaderMap) -> Option<&'a ApiKey> {
    let digest = state.sessions.key_of(token(headers)?, Instant::now())?;
    state.app.config.auth.find_digest(&digest)
}

/// `POST /v1/session`: the body of the answer.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Started {
    tenant: String,
    expires_in_s: u64,
}

fn cookie(value: &str, max_age: u64) -> HeaderValue {
    HeaderValue::try_from(format!("{COOKIE}={value}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Strict"))
        .expect("a cookie of hex digits is a valid header")
}

/// `POST /v1/session`: a `dashboard` key in a header buys a session cookie.
pub(super) async fn start(State(state): State<HttpState>, headers: HeaderMap) -> Result<Response, ApiError> {
    let auth = &state.app.config.auth;
    if auth.keys.is_empty() {
        return Err(ApiError::NoKeys);
    }
    let presented = presented_key(&headers).ok_or(ApiError::Unauthorized)?;
    let key = auth.find(presented.as_bytes()).ok_or(ApiError::Unauthorized)?;
    if !key.may(Permission::Dashboard) {
        return Err(ApiError::Forbidden(Permission::Dashboard));
    }
    let token = state.sessions.create(key.key_sha256, Instant::now()).map_err(|e| {
        tracing::error!(error = %e, "no randomness for a session token");
        ApiError::Internal("cannot create a session")
    })?;
    let body = Started { tenant: key.tenant.clone(), expires_in_s: SESSION_TTL.as_secs() };
    let mut r = (StatusCode::CREATED, Json(body)).into_response();
    r.headers_mut().insert(header::SET_COOKIE, cookie(&token, SESSION_TTL.as_secs()));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}

/// `DELETE /v1/session`: ends the session in the cookie and clears it.
pub(super) async fn end(State(state): State<HttpState>, headers: HeaderMap) -> Response {
    if let Some(t) = token(&headers) {
        state.sessions.end(t);
    }
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert(header::SET_COOKIE, cookie("", 0));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_expire_are_bounded_and_end() {
        let sessions = Sessions::default();
        let t0 = Instant::now();
        let token = sessions.create([7; 32], t0).unwrap();
        assert_eq!(token.len(), 64);
        assert_eq!(sessions.key_of(&token, t0), Some([7; 32]));
        assert_eq!(sessions.key_of("0".repeat(64).as_str(), t0), None);
        assert_eq!(sessions.key_of(&token, t0 + SESSION_TTL), None, "expired");
        assert!(sessions.is_empty(), "an expired session is dropped when seen");
        let token = sessions.create([7; 32], t0).unwrap();
        sessions.end(&token);
        assert_eq!(sessions.key_of(&token, t0), None);
        let first = sessions.create([1; 32], t0).unwrap();
        for i in 1..MAX_SESSIONS + 10 {
            sessions.create([2; 32], t0 + Duration::from_millis(i as u64)).unwrap();
        }
        assert_eq!(sessions.len(), MAX_SESSIONS);
        assert_eq!(sessions.key_of(&first, t0), None, "the oldest gave way");
    }

    #[test]
    fn the_token_is_read_from_the_cookie_header() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("a=b; leasehold_session=abc123; c=d"));
        assert_eq!(token(&h), Some("abc123"));
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, HeaderValue::from_static("leasehold_sessionx=1"));
        assert_eq!(token(&h), None);
    }
}
