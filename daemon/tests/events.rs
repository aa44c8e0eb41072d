//! The event stream: a real client reading `/v1/events` from a real server.

mod common;

use std::time::Duration;

use common::Daemon;
use leasehold::lease::Check;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const CONFIG: &str = r#"
[limits.api]
algorithm = "token_bucket"
capacity = 1000000
refill_per_sec = 1000000
lease_max = 1000
"#;

/// An SSE reader over a raw connection: yields `(event, id, data)`.
struct Sse {
    lines: tokio::io::Lines<BufReader<TcpStream>>,
}

impl Sse {
    async fn open(d: &Daemon, headers: &str) -> Self {
        let mut s = TcpStream::connect(d.http).await.unwrap();
        s.write_all(
            format!("GET /v1/events HTTP/1.1\r\nhost: {}\r\naccept: text/event-stream\r\n{headers}\r\n", d.http)
                .as_bytes(),
        )
        .await
        .unwrap();
        let mut lines = BufReader::new(s).lines();
        let status = lines.next_line().await.unwrap().unwrap();
        assert!(status.contains("200"), "{status}");
        Self { lines }
    }

    async fn next(&mut self) -> (String, Option<u64>, serde_json::Value) {
        let (mut event, mut id, mut data) = (String::new(), None, String::new());
        loop {
            let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
                .await
                .expect("an event within 10 s")
                .unwrap()
                .unwrap();
            // Chunked transfer encoding: skip chunk-size lines.
            if let Some(v) = line.strip_prefix("event: ").or_else(|| line.strip_prefix("event:")) {
                event = v.to_string();
            } else if let Some(v) = line.strip_prefix("id: ").or_else(|| line.strip_prefix("id:")) {
                id = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("data: ").or_else(|| line.strip_prefix("data:")) {
                data.push_str(v);
            } else if line.is_empty() && !data.is_empty() {
                return (event, id, serde_json::from_str(&data).unwrap());
            }
        }
    }

    async fn next_stats(&mut self) -> (u64, serde_json::Value) {
        loop {
            let (event, id, data) = self.next().await;
            if event == "stats" {
                return (id.unwrap(), data);
            }
        }
    }
}

async fn traffic(d: &Daemon, key: &str, n: usize) {
    for _ in 0..n {
        let v = d.app.leases.check(Check { limit: "api", key, cost: 1 }).await.unwrap();
        d.app.observe("api", key, &v);
    }
}

fn decisions(s: &serde_json::Value) -> u64 {
    ["allowed_local", "allowed_store", "denied_local", "denied_store"]
        .iter()
        .map(|k| s["totals"][k].as_u64().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_arrive_and_move_with_traffic() {
    // Over a shared store's leases: the lease counters move too.
    let d = Daemon::start_leased(CONFIG).await;
    let mut sse = Sse::open(&d, "").await;
    let (event, _, limits) = sse.next().await;
    assert_eq!(event, "limits");
    assert_eq!(limits[0]["name"], "api");
    let (_, before) = sse.next_stats().await;
    traffic(&d, "hot-user", 20_000).await;
    traffic(&d, "cold-user", 10).await;
    let (_, after) = loop {
        let (id, s) = sse.next_stats().await;
        if decisions(&s) >= 20_010 {
            break (id, s);
        }
    };
    assert!(decisions(&after) > decisions(&before));
    assert!(after["totals"]["allowed_local"].as_u64().unwrap() > 19_000, "{after}");
    assert!(after["writesPerDecision"].as_f64().unwrap() < 0.01, "{after}");
    assert_eq!(after["hotKeys"][0]["key"], "api/hot-user", "{after}");
    assert!(after["hotKeys"].as_array().unwrap().len() <= 10);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_does_not_block_decisions() {
    let d = Daemon::start(CONFIG).await;
    // A client that subscribes and never reads.
    let mut stalled = TcpStream::connect(d.http).await.unwrap();
    stalled.write_all(format!("GET /v1/events HTTP/1.1\r\nhost: {}\r\n\r\n", d.http).as_bytes()).await.unwrap();
    // Decisions keep flowing across many ticks while it sits there.
    let done = tokio::time::timeout(Duration::from_secs(60), async {
        for _ in 0..30 {
            traffic(&d, "k", 2_000).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(done.is_ok(), "decisions stalled behind a stuck reader");
    let mut fresh = Sse::open(&d, "").await;
    let (_, s) = fresh.next_stats().await;
    assert!(decisions(&s) >= 60_000, "{s}");
    drop(stalled);
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_resuming_with_last_event_id_gets_what_it_missed() {
    let d = Daemon::start(CONFIG).await;
    let mut first = Sse::open(&d, "").await;
    let (seen, _) = first.next_stats().await;
    drop(first);
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    let mut again = Sse::open(&d, &format!("last-event-id: {seen}\r\n")).await;
    let (next, _) = again.next_stats().await;
    assert_eq!(next, seen + 1, "the first event after the one it saw, from the backlog");
    d.stop().await;
}

#[tokio::test]
async fn with_keys_the_dashboard_needs_a_dashboard_key_and_keys_can_be_hashed() {
    use axum::body::Body;
    use axum::extract::connect_info::MockConnectInfo;
    use axum::http::Request;
    use tower::ServiceExt;
    let toml = r#"
[limits.login]
algorithm = "fixed_window"
limit = 100
window = "1m"
[server]
http = "0.0.0.0:7070"
[auth]
hash_keys_in_events = true
[[auth.keys]]
key = "watcher-key-1"
tenant = "ops"
permissions = ["dashboard"]
[[auth.keys]]
key = "checker-key-1"
tenant = "app"
"#;
    let config = leasehold::config::Config::from_table(toml.parse().unwrap()).unwrap();
    let app = leasehold::app::App::with_store(
        config,
        std::sync::Arc::new(leasehold::store::memory::MemoryStore::new()),
        std::sync::Arc::new(leasehold_core::SystemClock),
    );
    let router = leasehold::surfaces::http::router(app.clone())
        .layer(MockConnectInfo(std::net::SocketAddr::from(([203, 0, 113, 9], 40000))));
    let get = |uri: &str, key: Option<&str>| {
        let mut r = Request::get(uri).header("host", "leasehold.example:7070").body(Body::empty()).unwrap();
        if let Some(k) = key {
            r.headers_mut().insert("x-api-key", k.parse().unwrap());
        }
        r
    };
    let status = |r: Request<Body>| {
        let router = router.clone();
        async move { router.oneshot(r).await.unwrap().status().as_u16() }
    };
    assert_eq!(status(get("/", None)).await, 200, "the page is a shell that asks for a key");
    assert_eq!(status(get("/v1/events", None)).await, 401);
    assert_eq!(status(get("/v1/limits", None)).await, 401);
    assert_eq!(status(get("/v1/limits", Some("checker-key-1"))).await, 403);
    assert_eq!(status(get("/v1/limits", Some("watcher-key-1"))).await, 200);
    assert_eq!(status(get("/v1/limits?key=watcher-key-1", None)).await, 401, "no keys in URLs");
    // Hashed keys in events.
    let v = app.leases.check(Check { limit: "login", key: "alice@example.com", cost: 1 }).await.unwrap();
    for _ in 0..8 {
        app.observe("login", "alice@example.com", &v);
    }
    let mut rx = app.events.sender.subscribe();
    let s = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().unwrap();
    let shown = serde_json::to_string(&*s).unwrap();
    assert!(!shown.contains("alice"), "{shown}");
    assert!(s.hot_keys[0].key.starts_with("login/#"), "{shown}");
}
