//! The dashboard: a page served from the binary (the files under
//! `dashboard/`, embedded at compile time) and the Server-Sent Events stream
//! it reads, `GET /v1/events`.
//!
//! Keys can be personal data. On a loopback address both are open; when the
//! HTTP server is bound elsewhere they need an API key with the `dashboard`
//! permission, as a header or as `?key=` (browsers cannot set headers on an
//! `EventSource`).

use std::convert::Infallible;

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::stream::{self, Stream, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;

use super::auth::authorize;
use super::error::ApiError;
use crate::app::App;
use crate::config::Permission;
use crate::lease::settings::{FailPolicy, Mode};
use crate::observe::events::Stats;

const INDEX: &str = include_str!("../../../../dashboard/index.html");
const SCRIPT: &str = include_str!("../../../../dashboard/app.js");
const STYLE: &str = include_str!("../../../../dashboard/style.css");

/// The dashboard's routes.
pub(super) fn routes() -> Router<App> {
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

/// `?key=` for clients that cannot send headers.
#[derive(Debug, Deserialize)]
pub struct KeyParam {
    key: Option<String>,
}

fn guard(app: &App, headers: &HeaderMap, param: &KeyParam) -> Result<(), ApiError> {
    let loopback = app.config.server.http.parse::<std::net::SocketAddr>().is_ok_and(|a| a.ip().is_loopback());
    if loopback {
        return Ok(());
    }
    let mut headers = headers.clone();
    if let Some(k) = param.key.as_deref().and_then(|k| k.parse().ok()) {
        headers.insert("x-api-key", k);
    }
    match authorize(app, &headers, Permission::Dashboard)? {
        Some(_) => Ok(()),
        // Bound beyond loopback with no keys configured: never serve keys openly.
        None => Err(ApiError::Unauthorized),
    }
}

async fn page(State(app): State<App>, headers: HeaderMap, Query(param): Query<KeyParam>) -> Result<Response, ApiError> {
    guard(&app, &headers, &param)?;
    Ok(([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response())
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

async fn limits(
    State(app): State<App>,
    headers: HeaderMap,
    Query(param): Query<KeyParam>,
) -> Result<Response, ApiError> {
    guard(&app, &headers, &param)?;
    Ok(Json(limit_rows(&app)).into_response())
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
    headers: HeaderMap,
    Query(param): Query<KeyParam>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    guard(&app, &headers, &param)?;
    let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    // Subscribe before reading the backlog so nothing falls in between.
    let rx = app.events.sender.subscribe();
    let mut first = vec![Event::default().event("limits").json_data(limit_rows(&app)).unwrap_or_default()];
    if let Some(after) = resume {
        let backlog = app.events.backlog.lock().expect("backlog lock");
        first.extend(backlog.iter().filter(|s| s.seq > after).map(|s| stats_event(s)));
    }
    let last_sent = resume.unwrap_or(0);
    let live = stream::unfold((rx, last_sent), |(mut rx, last)| async move {
        loop {
            match rx.recv().await {
                Ok(s) if s.seq <= last => continue,
                Ok(s) => {
                    let seq = s.seq;
                    return Some((Ok(stats_event(&s)), (rx, seq)));
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
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
