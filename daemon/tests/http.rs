//! The HTTP surface: through `router().oneshot(...)` and a real server.

mod common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use leasehold::app::App;
use leasehold::config::Config;
use leasehold::store::fault::FaultStore;
use leasehold::store::memory::MemoryStore;
use leasehold_core::SystemClock;
use tower::ServiceExt;

const CONFIG: &str = r#"
[limits.api]
algorithm = "fixed_window"
limit = 3
window = "1h"

[limits.open]
algorithm = "gcra"
limit = 10
period = "1s"
fail = "open"

[lease]
breaker_failures = 1000
"#;

fn app_over(toml: &str, store: Arc<FaultStore>) -> App {
    let config = Config::from_table(toml.parse().unwrap()).unwrap();
    App::with_store(config, store, Arc::new(SystemClock))
}

fn app(toml: &str) -> (App, Arc<FaultStore>) {
    let fault = Arc::new(FaultStore::new(Arc::new(MemoryStore::new())));
    (app_over(toml, fault.clone()), fault)
}

async fn call(app: &App, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, serde_json::Value) {
    let resp = leasehold::surfaces::http::router(app.clone()).oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    let json =
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::String(String::from_utf8_lossy(&bytes).into()));
    (parts.status, parts.headers, json)
}

fn post(body: &str) -> Request<Body> {
    Request::post("/v1/check").header("content-type", "application/json").body(Body::from(body.to_string())).unwrap()
}

#[tokio::test]
async fn check_answers_200_then_429_with_rate_limit_headers() {
    let (app, _) = app(CONFIG);
    for remaining in [2, 1, 0] {
        let (status, h, body) = call(&app, post(r#"{"limit":"api","key":"u"}"#)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["remaining"], remaining);
        assert_eq!(h["x-ratelimit-limit"], "3");
        assert_eq!(h["x-ratelimit-remaining"], remaining.to_string().as_str());
        assert!(h.get("retry-after").is_none());
    }
    let (status, h, body) = call(&app, post(r#"{"limit":"api","key":"u","cost":1}"#)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["allowed"], false);
    assert!(body["retryAfterMs"].as_u64().unwrap() > 0);
    let retry: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=3600).contains(&retry), "{retry}");
    let (status, _, body) = call(&app, Request::get("/v1/status/api/u").body(Body::empty()).unwrap()).await;
    assert_eq!((status, body["remaining"].as_u64()), (StatusCode::OK, Some(0)), "a status query is not itself limited");
}

#[tokio::test]
async fn bad_requests_get_400_422_404_with_a_json_error() {
    let (app, _) = app(CONFIG);
    let cases = [
        (post(r#"{"limit":"api","#), StatusCode::BAD_REQUEST, "malformed JSON"),
        (post(r#"{"limit":"api"}"#), StatusCode::UNPROCESSABLE_ENTITY, "missing field `key`"),
        (post(r#"{"limit":"api","key":"u","cost":-1}"#), StatusCode::UNPROCESSABLE_ENTITY, "cost"),
        (post(r#"{"limit":"api","key":"u","colour":"red"}"#), StatusCode::UNPROCESSABLE_ENTITY, "colour"),
        (post(r#"{"limit":"nope","key":"u"}"#), StatusCode::NOT_FOUND, "unknown limit"),
        (
            Request::post("/v1/check").body(Body::from("{}")).unwrap(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "application/json",
        ),
    ];
    for (req, status, needle) in cases {
        let (got, _, body) = call(&app, req).await;
        assert_eq!(got, status, "{body}");
        assert!(body["error"].as_str().unwrap().contains(needle), "{body}");
    }
}

#[tokio::test]
async fn a_store_outage_is_503_when_failing_closed_and_degraded_when_open() {
    let (app, fault) = app(CONFIG);
    fault.set_down(true);
    let (status, h, body) = call(&app, post(r#"{"limit":"api","key":"u"}"#)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"], "store unavailable");
    assert_eq!(body["reason"], "store error", "no backend internals");
    assert_eq!(h["retry-after"], "1");
    let (status, h, _) = call(&app, post(r#"{"limit":"open","key":"u"}"#)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(h["x-ratelimit-degraded"], "true");
    let (status, _, _) = call(&app, Request::get("/ready").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let (status, _, _) = call(&app, Request::get("/health").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "liveness does not depend on the store");
    fault.heal();
    let (status, _, _) = call(&app, Request::get("/ready").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn metrics_are_prometheus_text_that_moves_with_traffic() {
    let (app, _) = app(CONFIG);
    for _ in 0..5 {
        call(&app, post(r#"{"limit":"api","key":"m"}"#)).await;
    }
    let (status, h, body) = call(&app, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(h["content-type"].to_str().unwrap().starts_with("text/plain"));
    let text = body.as_str().unwrap();
    for line in [
        "leasehold_decisions_total{outcome=\"allowed\",served=\"store\"} 3",
        "leasehold_decisions_total{outcome=\"denied\",served=\"store\"} 1",
        "leasehold_decisions_total{outcome=\"denied\",served=\"local\"} 1",
        "leasehold_store_operations_total{op=\"write\"} 3",
        "leasehold_breaker_state{state=\"closed\"} 1",
        "leasehold_decision_seconds_count{surface=\"http\"} 5",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

const AUTH: &str = r#"
[limits.api]
algorithm = "fixed_window"
limit = 2
window = "1h"

[[auth.keys]]
key = "key-of-tenant-a"
tenant = "a"

[[auth.keys]]
key = "key-of-tenant-b"
tenant = "b"
permissions = ["check"]
"#;

#[tokio::test]
async fn api_keys_gate_routes_and_tenants_never_share_a_counter() {
    let (app, _) = app(AUTH);
    let with = |key: &str, header: &str| {
        let mut r = post(r#"{"limit":"api","key":"same-user"}"#);
        let value = if header == "authorization" { format!("Bearer {key}") } else { key.to_string() };
        r.headers_mut().insert(axum::http::HeaderName::from_bytes(header.as_bytes()).unwrap(), value.parse().unwrap());
        r
    };
    assert_eq!(call(&app, post(r#"{"limit":"api","key":"x"}"#)).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(call(&app, with("not-a-key-at-all", "authorization")).await.0, StatusCode::UNAUTHORIZED);
    for _ in 0..2 {
        assert_eq!(call(&app, with("key-of-tenant-a", "authorization")).await.0, StatusCode::OK);
    }
    assert_eq!(call(&app, with("key-of-tenant-a", "x-api-key")).await.0, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(call(&app, with("key-of-tenant-b", "x-api-key")).await.0, StatusCode::OK, "tenant b has its own bucket");
    let mut status = Request::get("/v1/status/api/same-user").body(Body::empty()).unwrap();
    status.headers_mut().insert("x-api-key", "key-of-tenant-b".parse().unwrap());
    let (code, _, body) = call(&app, status).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert!(body["error"].as_str().unwrap().contains("`status`"), "{body}");
    assert_eq!(call(&app, Request::get("/health").body(Body::empty()).unwrap()).await.0, StatusCode::OK);
}

/// A socket client (no tenant) sending `a:same-user` must not spend tenant
/// a's counter for `same-user` (before key spaces, both were `a:same-user`).
#[tokio::test]
async fn a_socket_key_cannot_spend_a_tenants_counter() {
    let (app, _) = app(AUTH);
    for _ in 0..2 {
        let v = app.leases.check(leasehold::lease::Check { limit: "api", key: "a:same-user", cost: 1 }).await.unwrap();
        assert!(v.decision.allowed);
    }
    let mut r = post(r#"{"limit":"api","key":"same-user"}"#);
    r.headers_mut().insert("x-api-key", "key-of-tenant-a".parse().unwrap());
    assert_eq!(call(&app, r).await.0, StatusCode::OK, "tenant a's counter is untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_server_on_port_zero_speaks_http() {
    let d = common::Daemon::start(CONFIG).await;
    let json = [("content-type", "application/json")];
    let (status, head, body) = common::http(d.http, "POST", "/v1/check", &json, r#"{"limit":"api","key":"r"}"#).await;
    assert_eq!(status, 200, "{body}");
    assert!(head.contains("x-ratelimit-remaining: 2"), "{head}");
    let (status, _, body) = common::http(d.http, "GET", "/v1/status/api/r", &[], "").await;
    assert_eq!(status, 200);
    assert!(body.contains("\"remaining\":2"), "{body}");
    d.stop().await;
}

#[tokio::test]
async fn keys_and_limit_names_longer_than_max_key_bytes_are_422() {
    let (app, _) = app(CONFIG);
    let (longest, too_long) = ("k".repeat(512), "k".repeat(513));
    let key_err = "key is 513 bytes; the limit is 512 (server.max_key_bytes)";
    let name_err = "limit name is 513 bytes; the limit is 512 (server.max_key_bytes)";
    let cases = [
        (post(&format!(r#"{{"limit":"api","key":"{too_long}"}}"#)), key_err),
        (post(&format!(r#"{{"limit":"{too_long}","key":"k"}}"#)), name_err),
        (Request::get(format!("/v1/status/api/{too_long}")).body(Body::empty()).unwrap(), key_err),
        (Request::get(format!("/v1/status/{too_long}/k")).body(Body::empty()).unwrap(), name_err),
    ];
    for (req, needle) in cases {
        let (status, _, body) = call(&app, req).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["error"], needle);
    }
    let (status, _, body) = call(&app, post(&format!(r#"{{"limit":"api","key":"{longest}"}}"#))).await;
    assert_eq!(status, StatusCode::OK, "512 bytes is fine: {body}");
}
