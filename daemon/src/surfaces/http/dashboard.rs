//! The dashboard: a page served from the binary (the files under
//! `dashboard/`, embedded at compile time), its data (`GET /v1/limits`) and
//! the Server-Sent Events stream it reads (`GET /v1/events`).
//!
//! Keys can be personal data, so who sees what is decided per request by the
//! [`Viewer`] extractor: without API keys, only a caller on this machine
//! ([`super::access::local_caller`]) sees everything; with keys, the holder
//! of a `dashboard` key (header or session cookie) sees only its tenant's
//! keys and decisions. With keys the page itself is served to anyone: it is
//! a static shell holding no data, which asks for a key and signs in with
//! `POST /v1/session`.

use std::convert::Infallible;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::stream::{self, Stream, StreamExt};
use serde::Serialize;
use tokio::sync::broadcast::error::RecvError;

use super::access::local_caller;
use super::auth::presented_key;
use super::error::ApiError;
use super::session::session_key;
use super::HttpState;
use crate::app::App;
use crate::config::Permission;
use crate::lease::settings::{FailPolicy, Mode};
use crate::observe::events::{Stats, HOT_SHOWN};

const INDEX: &str = include_str!("../../../../dashboard/index.html");
const SCRIPT: &str = include_str!("../../../../dashboard/app.js");
const STYLE: &str = include_str!("../../../../dashboard/style.css");

/// The page's Content-Security-Policy: its own scripts, styles and streams
/// only, no framing (against clickjacking), no plugins, no foreign forms.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; \
                   base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The dashboard's routes.
pub(super) fn routes() -> Router<HttpState> {
    Router::new()
        .route("/", get(page))
        .route("/dashboard", get(page))
        .route(
            "/dashboard/app.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT) }),
        )
        .route("/dashboard/style.css", get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE) }))
        .route("/v1/events", get(events))
        .route("/v1/limits", get(limits))
}

/// Who is looking at the dashboard, and so what it may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Viewer {
    /// No API keys are configured and the caller is on this machine: all
    /// traffic, the socket's included.
    Everyone,
    /// The holder of a `dashboard` key: its tenant's keys and decisions only.
    Tenant(String),
}

impl FromRequestParts<HttpState> for Viewer {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &HttpState) -> Result<Self, ApiError> {
        let auth = &state.app.config.auth;
        if auth.keys.is_empty() {
            local_caller(parts)?;
            return Ok(Self::Everyone);
        }
        let key = match presented_key(&parts.headers) {
            Some(presented) => auth.find(presented.as_bytes()),
            None => session_key(state, &parts.headers),
        }
        .ok_or(ApiError::Unauthorized)?;
        if !key.may(Permission::Dashboard) {
            return Err(ApiError::Forbidden(Permission::Dashboard));
        }
        Ok(Self::Tenant(key.tenant.clone()))
    }
}

impl Viewer {
    /// Whether traffic of `tenant` (`None`: no tenant) is shown to this viewer.
    pub fn sees(&self, tenant: Option<&str>) -> bool {
        match self {
            Self::Everyone => true,
            Self::Tenant(t) => tenant == Some(t.as_str()),
        }
    }

    /// `stats` as this viewer may see it: its top hot keys and its decisions.
    pub fn view(&self, stats: &Stats) -> Stats {
        let mut s = stats.clone();
        s.hot_keys.retain(|k| self.sees(k.tenant.as_deref()));
        s.hot_keys.truncate(HOT_SHOWN);
        s.recent.retain(|r| self.sees(r.tenant.as_deref()));
        s
    }
}

async fn page(State(state): State<HttpState>, request: Request) -> Result<Response, ApiError> {
    if state.app.config.auth.keys.is_empty() {
        local_caller(&request.into_parts().0)?;
    }
    let mut r = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    Ok(r)
}

/// A configured limit, for the dashboard's table.
#[derive(Debug, Serialize)]
struct LimitRow {
    name: String,
    spec: leasehold_core::Algorithm,
    mode: Mode,
    fail: FailPolicy,
    lease_max: u64,
    lease_ttl_ms: u64,
}

fn limit_rows(app: &App) -> Vec<LimitRow> {
    app.config
        .limits
        .iter()
        .map(|(name, s)| LimitRow {
            name: name.clone(),
            spec: s.algorithm,
            mode: s.mode,
            fail: s.fail,
            lease_max: s.lease.max,
            lease_ttl_ms: s.lease.ttl.as_millis() as u64,
        })
        .collect()
}

async fn limits(State(app): State<App>, _viewer: Viewer) -> Json<Vec<LimitRow>> {
    Json(limit_rows(&app))
}

fn stats_event(s: &Stats) -> Event {
    Event::default()
        .event("stats")
        .id(s.seq.to_string())
        .json_data(s)
        .unwrap_or_else(|_| Event::default().comment("unserializable"))
}

async fn events(
    State(app): State<App>,
    viewer: Viewer,
    headers: HeaderMap,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    // Subscribe before reading the backlog so nothing falls in between.
    let rx = app.events.sender.subscribe();
    let mut first = vec![Event::default().event("limits").json_data(limit_rows(&app)).unwrap_or_default()];
    if let Some(after) = resume {
        let backlog = app.events.backlog.lock().expect("backlog lock");
        first.extend(backlog.iter().filter(|s| s.seq > after).map(|s| stats_event(&viewer.view(s))));
    }
    let last_sent = resume.unwrap_or(0);
    let live = stream::unfold((rx, last_sent, viewer), |(mut rx, last, viewer)| async move {
        loop {
            match rx.recv().await {
                Ok(s) if s.seq <= last => continue,
                Ok(s) => {
                    let seq = s.seq;
                    return Some((Ok(stats_event(&viewer.view(&s))), (rx, seq, viewer)));
                }
                // A slow reader skips ahead to the newest events.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return None,
            }
        }
    });
    let mut stopping = app.stopping.subscribe();
    let stream = stream::iter(first.into_iter().map(Ok)).chain(live).take_until(async move {
        let _ = stopping.wait_for(|s| *s).await;
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
