//! Helpers shared by the daemon's integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use leasehold::store::dynamodb::{DynamoConfig, DynamoStore};
use leasehold::store::Store;

/// The DynamoDB-API endpoint tests use (`tests/run.sh` starts DynamoDB Local
/// and sets it). `None` means "not available here": the test says so and
/// returns, unless `LEASEHOLD_REQUIRE_DYNAMODB=1`, where it fails.
pub fn dynamodb_endpoint() -> Option<String> {
    match std::env::var("LEASEHOLD_DYNAMODB_ENDPOINT").ok().filter(|e| !e.is_empty()) {
        Some(e) => Some(e),
        None if std::env::var("LEASEHOLD_REQUIRE_DYNAMODB").as_deref() == Ok("1") => {
            panic!("LEASEHOLD_REQUIRE_DYNAMODB=1 but LEASEHOLD_DYNAMODB_ENDPOINT is not set")
        }
        None => {
            eprintln!("skipped: set LEASEHOLD_DYNAMODB_ENDPOINT (tests/run.sh starts DynamoDB Local)");
            None
        }
    }
}

/// The table every DynamoDB test shares; tests isolate themselves by prefix.
pub const TABLE: &str = "leasehold-tests";

/// A store on the test table, created if needed.
pub async fn dynamodb_store(endpoint: &str) -> Arc<dyn Store> {
    let store = DynamoStore::connect(DynamoConfig {
        table: TABLE.into(),
        endpoint: Some(endpoint.into()),
        ..DynamoConfig::default()
    })
    .expect("client");
    store.create_table().await.expect("create test table");
    Arc::new(store)
}

/// A prefix no other test (or earlier run against the same server) uses.
pub fn unique_prefix(name: &str) -> String {
    format!("{name}-{}-{}", std::process::id(), fastrand::u64(..))
}

/// A daemon served in-process on a temporary socket and an ephemeral port.
pub struct Daemon {
    /// The app behind both surfaces.
    pub app: leasehold::app::App,
    /// The RESP socket.
    pub socket: std::path::PathBuf,
    /// The HTTP address.
    pub http: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<leasehold::surfaces::server::Stopped>>>,
    _dir: tempfile::TempDir,
}

impl Daemon {
    /// Starts a daemon with `toml` as its config, on the memory store.
    pub async fn start(toml: &str) -> Self {
        let mut config = leasehold::config::Config::from_table(toml.parse().unwrap()).unwrap();
        config.store.kind = leasehold::store::StoreKind::Memory;
        Self::start_with(config)
    }

    /// Starts a daemon with `config`.
    pub async fn start_config(config: leasehold::config::Config) -> Self {
        Self::start_with(config)
    }

    /// Starts a daemon with `toml` as its config that decides through leases,
    /// as over a shared store (a memory store behind the CAS loop).
    #[allow(dead_code)]
    pub async fn start_leased(toml: &str) -> Self {
        let config = leasehold::config::Config::from_table(toml.parse().unwrap()).unwrap();
        let store = std::sync::Arc::new(leasehold::store::memory::MemoryStore::new());
        let app = leasehold::app::App::with_store(config, store, std::sync::Arc::new(leasehold_core::SystemClock));
        Self::serve(app)
    }

    fn start_with(config: leasehold::config::Config) -> Self {
        Self::serve(leasehold::app::App::new(config).unwrap())
    }

    fn serve(app: leasehold::app::App) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("leasehold.sock");
        let unix = leasehold::surfaces::resp::bind(&socket).unwrap();
        let std_http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_http.set_nonblocking(true).unwrap();
        let http_addr = std_http.local_addr().unwrap();
        let http = tokio::net::TcpListener::from_std(std_http).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task =
            tokio::spawn(leasehold::surfaces::server::serve(app.clone(), unix, Some(socket.clone()), http, async {
                let _ = stopped.await;
            }));
        Self { app, socket, http: http_addr, stop: Some(stop), task: Some(task), _dir: dir }
    }

    /// Stops it gracefully and returns what the stop did.
    pub async fn stop(mut self) -> leasehold::surfaces::server::Stopped {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap()
    }

    /// The URL of `path` on the HTTP surface.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }
}

/// A minimal HTTP/1.1 exchange over a real TCP connection: returns the status,
/// the header block (lower-cased) and the body.
pub async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_string())
}
