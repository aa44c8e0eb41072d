//! The HTTP API with arbitrary bodies, through the real axum router in
//! process (`router(app).oneshot(request)`, as `daemon/tests/http.rs` does).
//!
//! Input: two selector bytes, then the request body. The first picks the
//! daemon (open, with API keys, or open over a store that is down) and the
//! route; the second the `Content-Type`, the API key presented, and whether
//! the request carries a browser's `Origin`. For `GET /v1/status/{limit}/{key}`
//! the body, split at its first `/`, gives the two path segments
//! (percent-encoded).
//!
//! Checks: no panic, never a 500, only the statuses the API documents; every
//! `/v1/check` answer is JSON (a decision on 200/429, `{"error": ...}`
//! otherwise); and on the open daemon with a JSON content type, the status
//! agrees with what `serde_json` makes of the body as a `CheckBody` and with
//! the handler's validation: syntax errors 400, wrong shapes 422, unknown
//! limits 404, oversized keys 422, decisions 200/429.
#![no_main]

use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use leasehold::app::App;
use leasehold::config::Config;
use leasehold::store::fault::FaultStore;
use leasehold::store::memory::MemoryStore;
use leasehold::surfaces::http::{router, CheckBody, DecisionBody};
use leasehold_core::SystemClock;
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

/// One limit per algorithm, both fail policies, both modes.
const LIMITS: &str = r#"
[limits.api]
algorithm = "gcra"
limit = 1000
period = "60s"
burst = 100

[limits.login]
algorithm = "sliding_window"
limit = 5
window = "1m"
mode = "direct"

[limits.tokens]
algorithm = "quota"
limit = 100000
window = "1d"

[limits.tb]
algorithm = "token_bucket"
capacity = 10
refill_per_sec = 2.5

[limits.leaky]
algorithm = "leaky_bucket"
capacity = 3
leak_per_sec = 1
fail = "open"

[limits.fw]
algorithm = "fixed_window"
limit = 3
window = "1h"

[limits.log]
algorithm = "sliding_log"
limit = 4
window = "10s"
mode = "direct"
"#;

/// A healthy store always answers in time, even on a busy machine: a store
/// timeout would turn a decision into a 503.
const PATIENT: &str = "[lease]\nstore_timeout = \"30s\"\n";

const KEYS: &str = r#"
[[auth.keys]]
key = "check-key-1"
tenant = "acme"
permissions = ["check", "status"]

[[auth.keys]]
key = "metrics-key-1"
tenant = "ops"
permissions = ["metrics", "dashboard"]
"#;

struct Daemons {
    rt: tokio::runtime::Runtime,
    /// Open (no keys), with keys, open over a store that is down.
    routers: [Router; 3],
    max_key_bytes: usize,
    limits: Vec<String>,
}

fn daemons() -> &'static Daemons {
    static D: OnceLock<Daemons> = OnceLock::new();
    D.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let config = |text: &str| Config::from_table(text.parse().unwrap()).unwrap();
        let open = config(&format!("{LIMITS}{PATIENT}"));
        let max_key_bytes = open.server.max_key_bytes;
        let limits = open.limits.keys().cloned().collect();
        let routers = rt.block_on(async {
            let app = |config: Config, down: bool| {
                let store = Arc::new(FaultStore::new(Arc::new(MemoryStore::new())));
                store.set_down(down);
                router(App::with_store(config, store, Arc::new(SystemClock)))
            };
            [app(open, false), app(config(&format!("{LIMITS}{PATIENT}{KEYS}")), false), app(config(LIMITS), true)]
        });
        Daemons { rt, routers, max_key_bytes, limits }
    })
}

fn percent_encode(s: &[u8]) -> String {
    let mut out = String::new();
    for &b in s {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What the handler must answer the open, healthy daemon for this JSON body.
fn expected_check(d: &Daemons, body: &[u8]) -> &'static [StatusCode] {
    match serde_json::from_slice::<CheckBody>(body) {
        Err(e) if e.classify() == serde_json::error::Category::Data => &[StatusCode::UNPROCESSABLE_ENTITY],
        Err(_) => &[StatusCode::BAD_REQUEST],
        Ok(b) if b.limit.len() > d.max_key_bytes || b.key.len() > d.max_key_bytes => {
            &[StatusCode::UNPROCESSABLE_ENTITY]
        }
        Ok(b) if !d.limits.contains(&b.limit) => &[StatusCode::NOT_FOUND],
        Ok(_) => &[StatusCode::OK, StatusCode::TOO_MANY_REQUESTS],
    }
}

const ALLOWED: [u16; 12] = [200, 201, 204, 400, 401, 403, 404, 405, 415, 422, 429, 503];

fuzz_target!(|data: &[u8]| {
    let [which, flags, body @ ..] = data else { return };
    let d = daemons();
    let daemon = usize::from(which % 3);
    let route = which / 3 % 8;
    let content_type = match flags & 3 {
        0 | 1 => Some("application/json"),
        2 => None,
        _ => Some(if flags & 4 == 0 { "text/plain" } else { "application/json; charset=utf-8" }),
    };
    let api_key = match flags >> 3 & 3 {
        0 => None,
        1 => Some(("authorization", "Bearer check-key-1")),
        2 => Some(("x-api-key", "check-key-1")),
        _ => Some(("authorization", if flags & 4 == 0 { "Bearer metrics-key-1" } else { "Bearer not-a-key" })),
    };
    let origin = flags & 32 != 0;

    let mut req = match route {
        0..=4 => Request::post("/v1/check"),
        5 | 6 => {
            let (limit, key) = match body.iter().position(|&b| b == b'/') {
                Some(i) => (&body[..i], &body[i + 1..]),
                None => (body, &b""[..]),
            };
            Request::get(format!("/v1/status/{}/{}", percent_encode(limit), percent_encode(key)))
        }
        _ => Request::post("/v1/session"),
    };
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    if let Some((name, value)) = api_key {
        req = req.header(name, value);
    }
    if origin {
        req = req.header("host", "localhost:7070").header("origin", "http://localhost:7070");
    }
    let req = req.body(Body::from(body.to_vec())).unwrap();

    let (status, bytes) = d.rt.block_on(async {
        let resp = d.routers[daemon].clone().oneshot(req).await.unwrap();
        let status = resp.status();
        (status, resp.into_body().collect().await.unwrap().to_bytes())
    });
    let shown = String::from_utf8_lossy(&bytes);
    assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR, "500: {shown}");
    assert!(ALLOWED.contains(&status.as_u16()), "status {status}: {shown}");
    if route > 4 {
        return;
    }
    // `/v1/check`: always JSON.
    if status == StatusCode::OK || status == StatusCode::TOO_MANY_REQUESTS {
        let decision: DecisionBody = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}: {shown}"));
        assert_eq!(decision.allowed, status == StatusCode::OK, "{shown}");
        assert!(decision.remaining <= decision.limit, "{shown}");
    } else {
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}: {shown}"));
        assert!(v["error"].is_string(), "{status}: {shown}");
    }
    let json = matches!(content_type, Some(ct) if ct.starts_with("application/json"));
    if daemon == 0 && json {
        let expected = expected_check(d, body);
        assert!(expected.contains(&status), "{status}, expected {expected:?}: {shown}");
    }
});
