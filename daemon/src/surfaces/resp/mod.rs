//! The Unix-socket surface: RESP2, so any Redis client (and `redis-cli`,
//! `redis-benchmark`) speaks to leasehold. One task per connection,
//! pipelining, a connection limit, and a graceful stop. The socket is created
//! with its final mode from the start; see [`bind`].

mod cmd;
mod connection;
pub mod decode;
pub mod encode;
mod socket;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::app::App;

pub use socket::{bind, remove as remove_socket, SOCKET_MODE};

/// How long to pause after a failed `accept` before trying again. Accept fails
/// mostly when the process or the system is out of file descriptors (EMFILE,
/// ENFILE) or memory: the pending connection stays queued and the socket stays
/// readable, so retrying at once spins a core at 100% with no chance of
/// success. 50 ms gives running connections time to finish and free
/// descriptors, and delays the next client by at most that much.
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// At most one log line about failed accepts per this interval: with the
/// pause above, a descriptor shortage would otherwise log 20 lines a second.
const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(10);

/// Failed accepts: when to log one, and how long to pause after each.
#[derive(Debug, Default)]
struct AcceptErrors {
    /// When the last line was logged.
    logged_at: Option<Instant>,
    /// Failures since then that were not logged.
    unlogged: u64,
}

impl AcceptErrors {
    /// Records a failure at `now`. Returns the pause before the next accept
    /// and, when this failure should be logged, how many earlier ones were not.
    fn failed(&mut self, now: Instant) -> (Duration, Option<u64>) {
        let due = self.logged_at.is_none_or(|at| now.saturating_duration_since(at) >= ACCEPT_LOG_EVERY);
        if due {
            self.logged_at = Some(now);
            (ACCEPT_RETRY_PAUSE, Some(std::mem::take(&mut self.unlogged)))
        } else {
            self.unlogged += 1;
            (ACCEPT_RETRY_PAUSE, None)
        }
    }
}

/// Serves connections until `shutdown` turns true, then waits for every
/// connection to finish the command it is on.
pub async fn serve(listener: UnixListener, app: App, mut shutdown: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(app.config.server.max_connections));
    let mut connections = JoinSet::new();
    let mut accept_errors = AcceptErrors::default();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        let (pause, log) = accept_errors.failed(Instant::now());
                        if let Some(unlogged) = log {
                            tracing::warn!(
                                error = %e,
                                unlogged,
                                "cannot accept a socket connection; retrying every {} ms",
                                pause.as_millis()
                            );
                        }
                        tokio::select! {
                            _ = tokio::time::sleep(pause) => continue,
                            _ = shutdown.changed() => break,
                        }
                    }
                };
                match permits.clone().try_acquire_owned() {
                    Ok(permit) => {
                        app.metrics.connections.fetch_add(1, Ordering::Relaxed);
                        let (app, shutdown) = (app.clone(), shutdown.clone());
                        connections.spawn(async move {
                            connection::run(stream, app, shutdown).await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        app.metrics.connections_refused.fetch_add(1, Ordering::Relaxed);
                        connections.spawn(connection::refuse(stream));
                    }
                }
            }
            _ = shutdown.changed() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    while connections.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_accepts_pause_every_time_and_log_once_per_interval() {
        let mut errors = AcceptErrors::default();
        let t0 = Instant::now();
        assert_eq!(errors.failed(t0), (ACCEPT_RETRY_PAUSE, Some(0)), "the first failure is logged");
        // A descriptor shortage: a failure per pause, for most of the interval.
        let mut at = t0;
        for _ in 0..150 {
            at += ACCEPT_RETRY_PAUSE;
            assert_eq!(errors.failed(at), (ACCEPT_RETRY_PAUSE, None));
        }
        let later = t0 + ACCEPT_LOG_EVERY;
        assert_eq!(errors.failed(later), (ACCEPT_RETRY_PAUSE, Some(150)), "logged again, with the count it skipped");
        assert_eq!(errors.failed(later + ACCEPT_RETRY_PAUSE), (ACCEPT_RETRY_PAUSE, None));
        assert!(ACCEPT_RETRY_PAUSE >= Duration::from_millis(10), "long enough not to spin");
    }
}
