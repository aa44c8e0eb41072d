//! Who may call without an API key, decided by the caller, never by the
//! address the server listens on.
//!
//! - `local_caller`: without `[auth]` keys, the dashboard and its data are
//!   served only to a caller on this machine: the peer address is loopback,
//!   the `Host` header names loopback (`localhost`, `127.0.0.0/8`, `[::1]`,
//!   any port), and an `Origin`, if present, is that same host. The `Host`
//!   check defeats DNS rebinding: a page on `evil.example` whose name is made
//!   to resolve to 127.0.0.1 reaches the port from the victim's browser, but
//!   its requests say `Host: evil.example`.
//! - `browser_guard`: without keys, a request from a browser page (it
//!   carries `Origin`) is served only if the page is the daemon's own origin
//!   on a loopback name (any name, with `auth.allow_open`), so no other site
//!   can spend budgets through a visitor's browser.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::extract::connect_info::MockConnectInfo;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::HttpState;
use crate::config::is_loopback;

/// The host a request is addressed to: its `Host` header, or for HTTP/2 the
/// URI's authority.
fn host<'a>(headers: &'a HeaderMap, uri: &'a Uri) -> Option<&'a str> {
    headers.get(header::HOST).and_then(|h| h.to_str().ok()).or_else(|| uri.authority().map(|a| a.as_str()))
}

/// Whether a `Host` value (a name or address, with an optional port) names
/// this machine's loopback interface: `localhost`, an address in
/// `127.0.0.0/8`, or `[::1]`.
pub fn is_loopback_host(host: &str) -> bool {
    let port_ok = |port: &str| !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
    if let Some(bracketed) = host.strip_prefix('[') {
        let Some((ip, rest)) = bracketed.split_once(']') else { return false };
        let port_ok = rest.is_empty() || rest.strip_prefix(':').is_some_and(port_ok);
        return port_ok && ip.parse::<Ipv6Addr>().is_ok_and(|ip| is_loopback(IpAddr::V6(ip)));
    }
    let (name, port_ok) = match host.rsplit_once(':') {
        Some((name, port)) => (name, port_ok(port)),
        None => (host, true),
    };
    port_ok
        && (name.eq_ignore_ascii_case("localhost")
            || name.eq_ignore_ascii_case("localhost.")
            || name.parse::<IpAddr>().is_ok_and(is_loopback))
}

/// Whether an `Origin` value is `http(s)://<host>`, exactly the host the
/// request is addressed to.
fn origin_matches(origin: &str, host: &str) -> bool {
    let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    authority.is_some_and(|a| a.eq_ignore_ascii_case(host))
}

/// Checks a request comes from this machine: loopback peer, loopback `Host`,
/// and a matching `Origin` if any. A request without a known peer address
/// (a router served without connect info) is refused. The peer comes from
/// axum's `ConnectInfo` (or, in tests, `MockConnectInfo`).
///
/// # Errors
/// 403 saying which check failed.
pub(super) fn local_caller(parts: &Parts) -> Result<(), ApiError> {
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0)
        .or_else(|| parts.extensions.get::<MockConnectInfo<SocketAddr>>().map(|c| c.0));
    if !peer.is_some_and(|p| is_loopback(p.ip())) {
        let from = peer.map_or_else(|| "an unknown address".to_string(), |p| p.ip().to_string());
        return Err(ApiError::NotLocal(format!(
            "without API keys the dashboard is served only to this machine, not to {from}; configure [[auth.keys]] \
             with the dashboard permission"
        )));
    }
    let host = host(&parts.headers, &parts.uri).unwrap_or("");
    if !is_loopback_host(host) {
        return Err(ApiError::NotLocal(format!(
            "without API keys the dashboard answers only to a loopback Host (localhost, 127.0.0.1, [::1]), not {host:?}"
        )));
    }
    if let Some(origin) = parts.headers.get(header::ORIGIN) {
        if !origin_matches(origin.to_str().unwrap_or(""), host) {
            return Err(ApiError::NotLocal("a page from another origin may not read the dashboard".into()));
        }
    }
    Ok(())
}

/// Middleware over every route: without API keys, a request from a browser
/// page must come from the daemon's own origin, on a loopback name unless
/// `auth.allow_open`. Requests without `Origin` (curl, client libraries, page
/// loads) pass; with keys configured, every route checks its key instead.
pub(super) async fn browser_guard(State(state): State<HttpState>, request: Request, next: Next) -> Response {
    let auth = &state.app.config.auth;
    if auth.keys.is_empty() {
        if let Some(origin) = request.headers().get(header::ORIGIN) {
            let host = host(request.headers(), request.uri()).unwrap_or("");
            let own_origin = origin_matches(origin.to_str().unwrap_or(""), host);
            if !own_origin || !(auth.allow_open || is_loopback_host(host)) {
                return ApiError::NotLocal(
                    "without API keys only the daemon's own pages on a loopback address may call it from a browser"
                        .into(),
                )
                .into_response();
            }
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_recognised_and_others_are_not() {
        for host in [
            "localhost",
            "LOCALHOST:7070",
            "localhost.:80",
            "127.0.0.1",
            "127.0.0.1:7070",
            "127.1.2.3:1",
            "[::1]",
            "[::1]:7070",
            "[::ffff:127.0.0.1]:9",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "",
            "evil.example",
            "evil.example:7070",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:7070",
            "0.0.0.0:7070",
            "[::]:7070",
            "[::1",
            "[::1]x",
            "localhost:",
            "localhost:70a",
            "localhost:123456",
            "::1",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn an_origin_must_name_the_same_host() {
        assert!(origin_matches("http://127.0.0.1:7070", "127.0.0.1:7070"));
        assert!(origin_matches("https://LocalHost:7070", "localhost:7070"));
        assert!(!origin_matches("http://127.0.0.1:7071", "127.0.0.1:7070"));
        assert!(!origin_matches("null", "127.0.0.1:7070"));
        assert!(!origin_matches("http://evil.example", "127.0.0.1:7070"));
        assert!(!origin_matches("127.0.0.1:7070", "127.0.0.1:7070"));
    }
}
