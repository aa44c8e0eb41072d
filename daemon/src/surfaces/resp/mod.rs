//! The Unix-socket surface: RESP2, so any Redis client (and `redis-cli`,
//! `redis-benchmark`) speaks to leasehold. One task per connection,
//! pipelining, a connection limit, and a graceful stop.

mod cmd;
mod connection;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::UnixListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::app::App;

/// Binds the socket at `path`: creates its directory, replaces a stale socket
/// file (one no daemon answers on), refuses to steal a live one, and makes it
/// readable and writable by its owner and group only (0660).
///
/// # Errors
/// An I/O error saying what failed, naming the path.
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let named =
        |what: &str, e: std::io::Error| std::io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()));
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| named("cannot create the directory of", e))?;
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("another process is listening on {}; stop it or choose another --socket", path.display()),
            ));
        }
        std::fs::remove_file(path).map_err(|e| named("cannot remove the stale socket", e))?;
    }
    let listener = UnixListener::bind(path).map_err(|e| named("cannot bind", e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
        .map_err(|e| named("cannot set permissions on", e))?;
    Ok(listener)
}

/// Serves connections until `shutdown` turns true, then waits for every
/// connection to finish the command it is on.
pub async fn serve(listener: UnixListener, app: App, mut shutdown: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(app.config.server.max_connections));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
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
