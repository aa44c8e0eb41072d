//! What every surface shares: the lease cache, the config and the metrics.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use leasehold_core::{Clock, SystemClock};

use crate::config::Config;
use crate::lease::Limiter;
use crate::metrics::Metrics;
use crate::store::{Cas, Store, StoreError};

/// The daemon's shared state. Cheap to clone (`Arc`s inside).
#[derive(Clone, Debug)]
pub struct App {
    /// Decisions.
    pub limiter: Limiter,
    /// The configuration it runs with.
    pub config: Arc<Config>,
    /// Surface metrics.
    pub metrics: Arc<Metrics>,
    /// When the daemon started.
    pub started: Instant,
    /// Live stats for the dashboard.
    pub events: Arc<crate::events::Events>,
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
        let store = config.store.open()?;
        Ok(Self::with_store(config, store, clock))
    }

    /// As [`App::new`], over a store of the caller's (tests, fault injection).
    pub fn with_store(config: Config, store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        let cas = Cas::new(store, clock, config.store.cas_options());
        let limits: HashMap<_, _> = config.limits.iter().map(|(k, v)| (k.clone(), *v)).collect();
        let limiter = Limiter::new(limits, cas, config.lease.limiter);
        let events = Arc::new(crate::events::Events::new(config.auth.hash_keys_in_events));
        let stopping = Arc::new(tokio::sync::watch::channel(false).0);
        let app = Self {
            limiter,
            config: Arc::new(config),
            metrics: Arc::default(),
            started: Instant::now(),
            events,
            stopping,
        };
        crate::events::spawn_aggregator(&app);
        app
    }

    /// Offers a decision to the dashboard's sketch and sample (cheap; never blocks).
    pub fn observe(&self, limit: &str, key: &str, v: &crate::lease::Verdict) {
        self.events.observer.observe(limit, key, v);
    }

    /// Whether the store answers now (for `/ready`).
    pub async fn store_ready(&self) -> Result<(), String> {
        let timeout = self.config.lease.limiter.store_timeout;
        match tokio::time::timeout(timeout, self.limiter.cas().store().ping()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("store did not answer within {} ms", timeout.as_millis())),
        }
    }
}
