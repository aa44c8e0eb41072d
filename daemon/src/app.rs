//! The composition root: builds every layer from the config and holds what
//! the surfaces share — the lease cache, the config, metrics and events.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use leasehold_core::{Clock, SystemClock};

use crate::config::Config;
use crate::lease::local::LocalCounters;
use crate::lease::LeaseCache;
use crate::observe::events::{spawn_aggregator, Events};
use crate::observe::metrics::Metrics;
use crate::observe::Snapshot;
use crate::store::embedded::EmbeddedStore;
use crate::store::{Cas, Store, StoreError, StoreKind, StoreUnavailable};

/// The daemon's shared state. Cheap to clone (`Arc`s inside).
#[derive(Clone, Debug)]
pub struct App {
    /// Decisions.
    pub leases: LeaseCache,
    /// The configuration it runs with.
    pub config: Arc<Config>,
    /// Surface metrics.
    pub metrics: Arc<Metrics>,
    /// When the daemon started.
    pub started: Instant,
    /// Live stats for the dashboard.
    pub events: Arc<Events>,
    /// Turns true when the daemon is stopping: long-lived streams end then.
    pub stopping: Arc<tokio::sync::watch::Sender<bool>>,
}

impl App {
    /// Opens the store and builds the lease cache. Must run inside a tokio runtime.
    ///
    /// # Errors
    /// A [`StoreError`] when the store cannot be opened.
    pub fn new(config: Config) -> Result<Self, StoreError> {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    /// As [`App::new`], with a clock of the caller's (tests).
    ///
    /// # Errors
    /// As [`App::new`].
    pub fn with_clock(config: Config, clock: Arc<dyn Clock>) -> Result<Self, StoreError> {
        // A store only this process writes (the embedded file, memory) is
        // served from the single-host table; a shared one through leases.
        let prefix = &config.store.prefix;
        let (store, local): (Arc<dyn Store>, _) = match config.store.kind {
            StoreKind::Embedded => {
                let file = EmbeddedStore::open(&config.store.path)?;
                let sync = config.store.sync_policy().map_err(|e| StoreError::permanent("embedded", e))?;
                let max_keys = config.lease.cache.max_keys;
                let local = LocalCounters::over_file(prefix, clock.clone(), file.clone(), sync, max_keys)?;
                (Arc::new(file), Some(local))
            }
            StoreKind::Memory => (config.store.open()?, Some(LocalCounters::in_memory(prefix, clock.clone()))),
            StoreKind::Dynamodb => (config.store.open()?, None),
        };
        Ok(Self::build(config, store, clock, local))
    }

    /// As [`App::new`], over a store of the caller's (tests, fault injection),
    /// always through leases.
    pub fn with_store(config: Config, store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        Self::build(config, store, clock, None)
    }

    fn build(config: Config, store: Arc<dyn Store>, clock: Arc<dyn Clock>, local: Option<LocalCounters>) -> Self {
        crate::store::spawn_collector(&store, clock.clone());
        let cas = Cas::new(store, clock, config.store.cas_settings());
        let limits: HashMap<_, _> = config.limits.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let leases = LeaseCache::build(limits, cas, config.lease.cache, local);
        let events = Arc::new(Events::new(config.auth.hash_keys_in_events));
        let stopping = Arc::new(tokio::sync::watch::channel(false).0);
        let app = Self {
            leases,
            config: Arc::new(config),
            metrics: Arc::default(),
            started: Instant::now(),
            events,
            stopping,
        };
        let leases = app.leases.clone();
        spawn_aggregator(&app.events, app.started, move || snapshot(&leases));
        app
    }

    /// The lower layers' counters now, for `/metrics` and the dashboard.
    pub fn snapshot(&self) -> Snapshot {
        snapshot(&self.leases)
    }

    /// Offers a decision to the dashboard's sketch and sample (cheap; never
    /// blocks), for a caller without a tenant (the socket, HTTP without keys).
    pub fn observe(&self, limit: &str, key: &str, v: &crate::lease::Verdict) {
        self.events.observer.observe(None, limit, key, v);
    }

    /// As [`App::observe`], for a caller of `tenant` (`key` as the caller
    /// sent it, not yet scoped): the dashboard shows it to that tenant only.
    pub fn observe_for(&self, tenant: Option<&str>, limit: &str, key: &str, v: &crate::lease::Verdict) {
        self.events.observer.observe(tenant, limit, key, v);
    }

    /// Whether the store answers now (for `/ready`).
    ///
    /// # Errors
    /// Why it does not: the store's error, or a timeout.
    pub async fn store_ready(&self) -> Result<(), StoreUnavailable> {
        let timeout = self.leases.guard().timeout();
        match tokio::time::timeout(timeout, self.leases.counters().cas().store().ping()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(StoreUnavailable::Timeout(timeout.as_millis() as u64)),
        }
    }
}

/// Reads the counters; first lets the cache finish pending evictions, so
/// the key count is exact.
fn snapshot(leases: &LeaseCache) -> Snapshot {
    leases.run_pending_tasks();
    let mut store = leases.counters().cas().stats().snapshot();
    if let Some(table) = leases.local_counters() {
        // On one host the store's traffic is the table's: records read
        // through and written behind.
        let (reads, writes) = table.file_traffic();
        store.reads += reads;
        store.writes += writes;
    }
    Snapshot { lease: leases.stats().snapshot(), store, breaker: leases.breaker_state(), l1_keys: leases.keys_cached() }
}
