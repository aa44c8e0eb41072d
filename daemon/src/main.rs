//! The `leasehold` binary: parses the command line and calls the library.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use leasehold::store::dynamodb::DynamoStore;
use leasehold::store::{StoreConfig, StoreKind};

/// leasehold — a per-host rate-limit daemon that leases units from a shared counter.
#[derive(Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon. With no config file: the embedded store in
    /// ./leasehold.redb and the example limits `api`, `login`, `tokens`.
    Serve {
        /// TOML config file (also LEASEHOLD_CONFIG).
        #[arg(long, env = "LEASEHOLD_CONFIG")]
        config: Option<PathBuf>,
        /// Unix socket for RESP clients (default $XDG_RUNTIME_DIR/leasehold.sock, else /tmp/leasehold-<uid>/leasehold.sock).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// HTTP address (default 127.0.0.1:7070).
        #[arg(long)]
        http: Option<String>,
        /// The store: memory, embedded[:PATH], dynamodb:TABLE[@ENDPOINT].
        #[arg(long)]
        store: Option<StoreConfig>,
    },
    /// Ask a running daemon for a decision over its socket (consumes `cost`).
    /// Exit status: 0 allowed, 1 denied, 2 error.
    Check {
        /// The limit's name.
        limit: String,
        /// The key.
        key: String,
        /// Units to spend.
        #[arg(long, default_value_t = 1)]
        cost: u64,
        /// The daemon's socket (default $XDG_RUNTIME_DIR/leasehold.sock, else /tmp/leasehold-<uid>/leasehold.sock).
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Manage the DynamoDB table.
    Table {
        #[command(subcommand)]
        action: TableAction,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: BenchWhat,
    },
}

#[derive(Subcommand)]
enum TableAction {
    /// Create the table (string partition key, on-demand) and enable TTL on
    /// `expires_at`. Safe to run again on an existing table.
    Create {
        /// Table name.
        #[arg(long)]
        table: String,
        /// Endpoint URL, e.g. http://127.0.0.1:8000 for DynamoDB Local.
        #[arg(long)]
        endpoint: Option<String>,
        /// AWS region (default: AWS_REGION, AWS_DEFAULT_REGION).
        #[arg(long)]
        region: Option<String>,
        /// Partition-key attribute name.
        #[arg(long, default_value = "pk")]
        hash_key: String,
    },
}

#[derive(Subcommand)]
enum BenchWhat {
    /// CAS applies/s per backend: distinct keys and one hot key, 1 and 16 callers.
    Store {
        /// Also run against this DynamoDB endpoint (the table is created if missing).
        #[arg(long)]
        dynamodb_endpoint: Option<String>,
        /// DynamoDB table for the run.
        #[arg(long, default_value = "leasehold-bench")]
        table: String,
        /// Seconds per scenario.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
    },
    /// The cost report: leased and direct against the naive design, per
    /// workload: decisions/s, request units and round trips per decision,
    /// latency, dollars per million decisions.
    Lease {
        /// The store: memory, embedded[:PATH], dynamodb:TABLE[@ENDPOINT].
        #[arg(long, default_value = "memory")]
        store: StoreConfig,
        /// Seconds per run.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Dollars per million read request units (DynamoDB on-demand).
        #[arg(long, default_value_t = 0.125)]
        read_price: f64,
        /// Dollars per million write request units (DynamoDB on-demand).
        #[arg(long, default_value_t = 0.625)]
        write_price: f64,
    },
    /// One process of a multi-process load: limiters with their own L1 hammer
    /// one limit; prints `A <ms>` per admission, then a summary line.
    Load {
        /// The store: memory, embedded[:PATH], dynamodb:TABLE[@ENDPOINT].
        #[arg(long)]
        store: StoreConfig,
        /// Key prefix.
        #[arg(long, default_value = "leasehold")]
        prefix: String,
        /// The limit as JSON, e.g. {"algorithm":"token_bucket","capacity":100,"refill_per_sec":50}.
        #[arg(long)]
        spec: String,
        /// leased or direct.
        #[arg(long, default_value = "leased")]
        mode: String,
        /// Lease cap in units.
        #[arg(long)]
        lease_max: Option<u64>,
        /// Concurrent callers.
        #[arg(long, default_value_t = 16)]
        callers: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Fault: chance that a write lands but its reply is lost.
        #[arg(long, default_value_t = 0.0)]
        lost_replies: f64,
        /// Open loop: checks per second in all, spread over the callers
        /// (default: closed loop, each caller asks again once answered).
        #[arg(long)]
        rate: Option<f64>,
        /// Fault: milliseconds added to every store call.
        #[arg(long, default_value_t = 0)]
        slow_ms: u64,
        /// Fault: the store goes down this many seconds in...
        #[arg(long)]
        down_after: Option<f64>,
        /// ...for this many seconds.
        #[arg(long, default_value_t = 1.0)]
        down_for: f64,
    },
    /// The HTTP baseline for `tests/bench/socket.sh`: a bare axum server whose
    /// `POST /v1/check` parses the same body and answers the same JSON and
    /// headers with no limiter behind it.
    HttpBaseline {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:17079")]
        listen: String,
    },
    /// One process's share of a lost-update test: TASKS tasks each apply cost 1
    /// to KEY OPS times through the CAS loop.
    Hammer {
        /// The store: memory, embedded[:PATH], dynamodb:TABLE[@ENDPOINT].
        #[arg(long)]
        store: StoreConfig,
        /// Key prefix.
        #[arg(long, default_value = "leasehold")]
        prefix: String,
        /// The key every task applies to.
        #[arg(long, default_value = "hot")]
        key: String,
        /// Concurrent tasks.
        #[arg(long, default_value_t = 8)]
        tasks: usize,
        /// Applies per task.
        #[arg(long, default_value_t = 10)]
        ops: usize,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("LEASEHOLD_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Serve { config, socket, http, store } => {
            let mut config = leasehold::config::Config::load(config.as_deref(), std::env::vars())?;
            if let Some(socket) = socket {
                config.server.socket = socket;
            }
            if let Some(http) = http {
                config.server.http = http;
            }
            if let Some(mut store) = store {
                store.prefix = config.store.prefix.clone();
                store.max_retries = config.store.max_retries;
                config.store = store;
            }
            serve(config).await?;
        }
        Command::Check { limit, key, cost, socket } => {
            let socket = socket.unwrap_or_else(|| leasehold::config::ServerConfig::default().socket);
            match leasehold::cli::client::throttle(&socket, &limit, &key, cost).await {
                Ok(d) => {
                    if d.allowed {
                        println!(
                            "allowed: {} of {} remaining, full again in {} ms",
                            d.remaining, d.limit, d.reset_after_ms
                        );
                    } else {
                        println!("denied: retry in {} ms ({} of {} remaining)", d.retry_after_ms, d.remaining, d.limit);
                        std::process::exit(1);
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    std::process::exit(2);
                }
            }
        }
        Command::Table { action: TableAction::Create { table, endpoint, region, hash_key } } => {
            let config =
                StoreConfig { kind: StoreKind::Dynamodb, table, endpoint, region, hash_key, ..StoreConfig::default() };
            let store = DynamoStore::connect(config.dynamo())?;
            for step in store.create_table().await.context("table create failed")? {
                println!("{step}");
            }
        }
        Command::Bench { what: BenchWhat::Store { dynamodb_endpoint, table, seconds } } => {
            let dir = std::env::temp_dir().join(format!("leasehold-bench-{}", std::process::id()));
            let mut configs = vec![
                "memory".parse::<StoreConfig>()?,
                format!("embedded:{}", dir.join("bench.redb").display()).parse()?,
            ];
            if let Some(endpoint) = dynamodb_endpoint {
                let c: StoreConfig = format!("dynamodb:{table}@{endpoint}").parse()?;
                DynamoStore::connect(c.dynamo())?.create_table().await?;
                configs.push(c);
            }
            leasehold::cli::bench::store_table(&configs, Duration::from_secs_f64(seconds)).await?;
            let _ = std::fs::remove_dir_all(dir);
        }
        Command::Bench { what: BenchWhat::Lease { mut store, seconds, read_price, write_price } } => {
            if store.kind == StoreKind::Dynamodb {
                DynamoStore::connect(store.dynamo())?.create_table().await?;
            }
            if store.kind == StoreKind::Embedded && store.path == StoreConfig::default().path {
                store.path = std::env::temp_dir().join(format!("leasehold-bench-{}.redb", std::process::id()));
            }
            let prices = leasehold::cli::bench::Prices { read: read_price, write: write_price };
            leasehold::cli::bench::lease_table(&store, Duration::from_secs_f64(seconds), prices).await?;
        }
        Command::Bench {
            what:
                BenchWhat::Load {
                    mut store,
                    prefix,
                    spec,
                    mode,
                    lease_max,
                    callers,
                    seconds,
                    rate,
                    lost_replies,
                    slow_ms,
                    down_after,
                    down_for,
                },
        } => {
            store.prefix = prefix;
            let mode = match mode.as_str() {
                "leased" => leasehold::lease::settings::Mode::Leased,
                "direct" => leasehold::lease::settings::Mode::Direct,
                other => anyhow::bail!("--mode {other:?}: expected leased or direct"),
            };
            let run = leasehold::cli::bench::LoadRun {
                spec,
                mode,
                lease_max,
                limiters: 1,
                callers,
                duration: Duration::from_secs_f64(seconds),
                zipf_keys: None,
                print_admissions: true,
                pace_denials: true,
                tolerate_unavailable: false,
                rate,
                faults: leasehold::cli::bench::LoadFaults {
                    lost_replies,
                    delay: Duration::from_millis(slow_ms),
                    outage: down_after.map(|a| (Duration::from_secs_f64(a), Duration::from_secs_f64(down_for))),
                },
            };
            let f = leasehold::cli::bench::load(&store, &run).await?;
            println!(
                "DONE decisions={} allowed={} writes={} waited={} unavailable={} p99_us={:.0} max_us={:.0} start={} end={}",
                f.decisions, f.allowed, f.writes, f.waited, f.unavailable, f.p99_us, f.max_us, f.span_ms.0, f.span_ms.1
            );
        }
        Command::Bench { what: BenchWhat::HttpBaseline { listen } } => {
            let listener = tokio::net::TcpListener::bind(&listen).await?;
            println!("http: http://{}", listener.local_addr()?);
            axum::serve(listener, leasehold::cli::bench::http_baseline()).await?;
        }
        Command::Bench { what: BenchWhat::Hammer { mut store, prefix, key, tasks, ops } } => {
            store.prefix = prefix;
            let (_, failed) = leasehold::cli::bench::hammer(&store, &key, tasks, ops).await?;
            anyhow::ensure!(failed == 0, "{failed} applies failed");
        }
    }
    Ok(())
}

async fn serve(config: leasehold::config::Config) -> anyhow::Result<()> {
    let socket = config.server.socket.clone();
    let http_addr = config.server.http.clone();
    let store = match config.store.kind {
        StoreKind::Embedded => format!("embedded ({})", config.store.path.display()),
        StoreKind::Memory => "memory".into(),
        StoreKind::Dynamodb => format!(
            "dynamodb (table {}{})",
            config.store.table,
            config.store.endpoint.as_deref().map(|e| format!(" at {e}")).unwrap_or_default()
        ),
    };
    let limits = config.limits.keys().cloned().collect::<Vec<_>>().join(", ");
    let app = leasehold::app::App::new(config).context("cannot open the store")?;
    let unix = leasehold::surfaces::resp::bind(&socket)?;
    let http =
        tokio::net::TcpListener::bind(&http_addr).await.with_context(|| format!("cannot listen on {http_addr}"))?;
    let bound = http.local_addr()?;
    println!("leasehold {} serving limits [{limits}] from the {store} store", env!("CARGO_PKG_VERSION"));
    println!("  socket (RESP): {}   try: redis-cli -s {} THROTTLE api user-42", socket.display(), socket.display());
    println!("  http:          http://{bound}   dashboard: http://{bound}/   metrics: http://{bound}/metrics");
    let stopped =
        leasehold::surfaces::server::serve(app, unix, Some(socket), http, leasehold::surfaces::server::signal())
            .await?;
    println!("stopped; {} leased units given back to the store", stopped.refunded);
    Ok(())
}
