//! The HTTP security model: who may reach the dashboard and the API, with and
//! without `[auth]` keys; sessions instead of keys in URLs; tenants seeing
//! only their own traffic; refusing to serve an open API beyond loopback.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{Request, Response};
use common::Daemon;
use http_body_util::BodyExt;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tower::ServiceExt;

const LIMITS: &str = r#"
[limits.api]
algorithm = "token_bucket"
capacity = 1000000
refill_per_sec = 1000000
"#;

const KEYS: &str = r#"
[[auth.keys]]
key = "tenant-a-dashboard"
tenant = "a"
permissions = ["check", "dashboard"]

[[auth.keys]]
key = "tenant-b-dashboard"
tenant = "b"
permissions = ["check", "dashboard"]

[[auth.keys]]
key = "tenant-c-check-only"
tenant = "c"
permissions = ["check", "metrics"]
"#;

fn app(toml: &str) -> leasehold::app::App {
    let config = leasehold::config::Config::from_table(toml.parse().unwrap()).unwrap();
    leasehold::app::App::with_store(
        config,
        std::sync::Arc::new(leasehold::store::memory::MemoryStore::new()),
        std::sync::Arc::new(leasehold_core::SystemClock),
    )
}

/// A request as it reaches the router from a connection with peer `peer`.
async fn send(router: &axum::Router, peer: Option<&str>, req: Request<Body>) -> Response<Body> {
    match peer {
        Some(p) => router.clone().layer(MockConnectInfo(p.parse::<SocketAddr>().unwrap())).oneshot(req).await,
        None => router.clone().oneshot(req).await,
    }
    .unwrap()
}

fn get(uri: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut r = Request::get(uri);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(Body::empty()).unwrap()
}

fn check(headers: &[(&str, &str)]) -> Request<Body> {
    let mut r = Request::post("/v1/check").header("content-type", "application/json");
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(Body::from(r#"{"limit":"api","key":"k"}"#)).unwrap()
}

/// Request headers, as name and value.
type Headers<'a> = &'a [(&'a str, &'a str)];

const DASHBOARD: [&str; 4] = ["/", "/dashboard", "/v1/limits", "/v1/events"];

#[tokio::test]
async fn without_keys_the_dashboard_is_served_only_to_callers_on_this_machine() {
    let router = leasehold::surfaces::http::router(app(LIMITS));
    let local = Some("127.0.0.1:50000");
    for path in DASHBOARD {
        for (peer, host) in [(local, "127.0.0.1:7070"), (local, "localhost:7070"), (Some("[::1]:5"), "[::1]:7070")] {
            let status = send(&router, peer, get(path, &[("host", host)])).await.status();
            assert_eq!(status, 200, "{path} from {peer:?} as {host}");
        }
        let cases: [(Option<&str>, Headers<'_>, &str); 5] = [
            (Some("10.1.2.3:50000"), &[("host", "127.0.0.1:7070")], "not to 10.1.2.3"),
            // DNS rebinding: a page on evil.example resolved to 127.0.0.1.
            (local, &[("host", "evil.example:7070")], "\\\"evil.example:7070\\\""),
            (local, &[], "loopback Host"),
            (local, &[("host", "127.0.0.1:7070"), ("origin", "http://evil.example")], "own pages"),
            // Served without connect info: never taken for a local caller.
            (None, &[("host", "127.0.0.1:7070")], "an unknown address"),
        ];
        for (peer, headers, needle) in cases {
            let r = send(&router, peer, get(path, headers)).await;
            assert_eq!(r.status(), 403, "{path} {peer:?} {headers:?}");
            let body = String::from_utf8(r.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
            assert!(body.contains(needle), "{path} {peer:?} {headers:?}: {body}");
        }
    }
    // The open API: any caller without a browser's Origin; a browser page only
    // from the daemon's own origin on a loopback name.
    let from_afar = Some("10.1.2.3:50000");
    assert_eq!(send(&router, from_afar, check(&[("host", "leasehold.example")])).await.status(), 200);
    let rebinding = [("host", "evil.example:7070"), ("origin", "http://evil.example:7070")];
    assert_eq!(send(&router, local, check(&rebinding)).await.status(), 403);
    let cross_site = [("host", "127.0.0.1:7070"), ("origin", "http://evil.example")];
    assert_eq!(send(&router, local, check(&cross_site)).await.status(), 403);
    let own_page = [("host", "127.0.0.1:7070"), ("origin", "http://127.0.0.1:7070")];
    assert_eq!(send(&router, local, check(&own_page)).await.status(), 200);
}

#[tokio::test]
async fn with_keys_the_dashboard_needs_a_dashboard_key_even_from_loopback() {
    let router = leasehold::surfaces::http::router(app(&format!("{LIMITS}{KEYS}")));
    let local = Some("127.0.0.1:50000");
    let host = ("host", "127.0.0.1:7070");
    assert_eq!(send(&router, local, get("/", &[host])).await.status(), 200, "the page: a shell asking for a key");
    for path in ["/v1/limits", "/v1/events"] {
        assert_eq!(send(&router, local, get(path, &[host])).await.status(), 401, "{path}");
        let key = format!("{path}?key=tenant-a-dashboard");
        assert_eq!(send(&router, local, get(&key, &[host])).await.status(), 401, "{path}: no keys in URLs");
        let check_only = [host, ("x-api-key", "tenant-c-check-only")];
        assert_eq!(send(&router, local, get(path, &check_only)).await.status(), 403, "{path}");
        let dashboard = [host, ("authorization", "Bearer tenant-a-dashboard")];
        assert_eq!(send(&router, local, get(path, &dashboard)).await.status(), 200, "{path}");
        // From anywhere, by any name, once the key is right.
        let afar = [("host", "leasehold.example"), ("x-api-key", "tenant-b-dashboard")];
        assert_eq!(send(&router, Some("10.1.2.3:1"), get(path, &afar)).await.status(), 200, "{path}");
    }
    assert_eq!(send(&router, local, check(&[host])).await.status(), 401, "the API needs a key from loopback too");
}

fn cookie_of(r: &Response<Body>) -> String {
    let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
    set.split(';').next().unwrap().to_string()
}

#[tokio::test]
async fn a_session_cookie_opens_the_dashboard_and_nothing_else() {
    let router = leasehold::surfaces::http::router(app(&format!("{LIMITS}{KEYS}")));
    let peer = Some("192.0.2.1:4000");
    let session = |headers: &[(&str, &str)]| {
        let mut r = Request::post("/v1/session");
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        r.body(Body::empty()).unwrap()
    };
    assert_eq!(send(&router, peer, session(&[])).await.status(), 401);
    assert_eq!(send(&router, peer, session(&[("x-api-key", "not-a-key-at-all")])).await.status(), 401);
    assert_eq!(send(&router, peer, session(&[("x-api-key", "tenant-c-check-only")])).await.status(), 403);
    let r = send(&router, peer, session(&[("authorization", "Bearer tenant-a-dashboard")])).await;
    assert_eq!(r.status(), 201);
    let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=3600"] {
        assert!(set.contains(attribute), "{set}");
    }
    assert!(!set.contains("tenant-a-dashboard"), "the cookie is not the key: {set}");
    let cookie = cookie_of(&r);
    let body: serde_json::Value = serde_json::from_slice(&r.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(body["tenant"], "a");
    let with_cookie = [("cookie", cookie.as_str())];
    assert_eq!(send(&router, peer, get("/v1/limits", &with_cookie)).await.status(), 200);
    assert_eq!(send(&router, peer, get("/v1/events", &with_cookie)).await.status(), 200);
    assert_eq!(send(&router, peer, check(&with_cookie)).await.status(), 401, "a session never spends budgets");
    assert_eq!(send(&router, peer, get("/metrics", &with_cookie)).await.status(), 401);
    let forged = [("cookie", "leasehold_session=00000000000000000000000000000000")];
    assert_eq!(send(&router, peer, get("/v1/limits", &forged)).await.status(), 401);
    let end = Request::delete("/v1/session").header("cookie", &cookie).body(Body::empty()).unwrap();
    let r = send(&router, peer, end).await;
    assert_eq!(r.status(), 204);
    assert!(r.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
    assert_eq!(send(&router, peer, get("/v1/limits", &with_cookie)).await.status(), 401, "ended");
}

#[tokio::test]
async fn keys_given_as_sha256_digests_authenticate() {
    // `printf %s tenant-d-secret | sha256sum`
    let digest = "5ec4442e82b25573d772e4fb77d179d6d9706e4466cbfa966b3875de4f289a67";
    let toml = format!("{LIMITS}\n[[auth.keys]]\nkey_sha256 = \"{digest}\"\ntenant = \"d\"\n");
    assert!(!toml.contains("tenant-d-secret"), "the file holds no secret");
    let router = leasehold::surfaces::http::router(app(&toml));
    let peer = Some("192.0.2.1:4000");
    assert_eq!(send(&router, peer, check(&[("x-api-key", "tenant-d-secret")])).await.status(), 200);
    assert_eq!(send(&router, peer, check(&[("x-api-key", "tenant-d-secreT")])).await.status(), 401);
    assert_eq!(send(&router, peer, check(&[("x-api-key", digest)])).await.status(), 401, "the digest is no key");
}

/// Reads `stats` events from `/v1/events` with `key` until one has hot keys.
async fn hot_stats(d: &Daemon, key: &str) -> serde_json::Value {
    let mut s = tokio::net::TcpStream::connect(d.http).await.unwrap();
    let req = format!("GET /v1/events HTTP/1.1\r\nhost: {}\r\nx-api-key: {key}\r\n\r\n", d.http);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut lines = BufReader::new(s).lines();
    let status = lines.next_line().await.unwrap().unwrap();
    assert!(status.contains("200"), "{status}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (mut event, mut recent) = (String::new(), Vec::new());
    loop {
        let line = tokio::time::timeout_at(deadline, lines.next_line()).await.expect("hot keys within 10 s");
        let line = line.unwrap().unwrap();
        if let Some(e) = line.strip_prefix("event:") {
            event = e.trim().to_string();
        } else if let Some(data) = line.strip_prefix("data:").filter(|_| event == "stats") {
            let stats: serde_json::Value = serde_json::from_str(data.trim()).unwrap();
            recent.extend(stats["recent"].as_array().unwrap().iter().cloned());
            if !stats["hotKeys"].as_array().unwrap().is_empty() {
                let mut stats = stats;
                stats["recent"] = serde_json::Value::Array(recent);
                return stats;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_sees_only_its_own_keys_and_decisions() {
    let d = Daemon::start(&format!("{LIMITS}{KEYS}")).await;
    let json = ("content-type", "application/json");
    for (key, user) in [("tenant-a-dashboard", "alice"), ("tenant-b-dashboard", "bob")] {
        for _ in 0..40 {
            let body = format!(r#"{{"limit":"api","key":"{user}"}}"#);
            let (status, _, _) = common::http(d.http, "POST", "/v1/check", &[json, ("x-api-key", key)], &body).await;
            assert_eq!(status, 200);
        }
    }
    let mut socket = tokio::net::UnixStream::connect(&d.socket).await.unwrap();
    let throttle = "*3\r\n$8\r\nTHROTTLE\r\n$3\r\napi\r\n$11\r\nsocket-user\r\n".repeat(40);
    socket.write_all(throttle.as_bytes()).await.unwrap();
    for (key, own, others) in
        [("tenant-a-dashboard", "a:", ["b:", "socket-user"]), ("tenant-b-dashboard", "b:", ["a:", "socket-user"])]
    {
        let stats = hot_stats(&d, key).await;
        let shown = stats.to_string();
        for other in others {
            assert!(!shown.contains(other), "{key} sees {other}: {shown}");
        }
        let hot = stats["hotKeys"].as_array().unwrap();
        assert!(hot.iter().all(|k| k["key"].as_str().unwrap().starts_with(&format!("api/{own}"))), "{shown}");
        let recent = stats["recent"].as_array().unwrap();
        assert!(recent.iter().all(|r| r["key"].as_str().unwrap().starts_with(own)), "{shown}");
    }
    d.stop().await;
}

#[test]
fn an_open_api_beyond_loopback_refuses_to_start() {
    let bin = env!("CARGO_BIN_EXE_leasehold");
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("leasehold.sock");
    let serve = |config: Option<&std::path::Path>| {
        let mut c = std::process::Command::new(bin);
        c.args(["serve", "--store", "memory", "--http", "0.0.0.0:0", "--socket"]).arg(&socket);
        if let Some(config) = config {
            c.arg("--config").arg(config);
        }
        c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap()
    };
    // The address comes from the command line: checked where it is bound.
    let mut child = serve(None);
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if child.try_wait().unwrap().is_none() {
        child.kill().unwrap();
        child.wait().unwrap();
        panic!("serving an open API on 0.0.0.0 without [auth] keys: the daemon started");
    }
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("server.http") && stderr.contains("auth.allow_open = true"), "{stderr}");
    assert!(!socket.exists(), "no socket left behind");
    // Said on purpose: it serves.
    let config = dir.path().join("open.toml");
    std::fs::write(&config, "[auth]\nallow_open = true\n").unwrap();
    let mut child = serve(Some(&config));
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let serving = loop {
        line.clear();
        if std::io::BufRead::read_line(&mut stdout, &mut line).unwrap() == 0 {
            break false;
        }
        if line.trim_start().starts_with("http:") {
            break true;
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(serving, "with auth.allow_open = true it serves");
}
