//! Runs the daemon: both surfaces over one [`App`], until told to stop; then
//! stops accepting, finishes in-flight requests and gives leases back.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::path::PathBuf;

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::watch;

use crate::app::App;

/// What a graceful stop did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped {
    /// Leased units given back to the store.
    pub refunded: u64,
}

/// Serves RESP on `unix` and HTTP on `http` until `shutdown` resolves.
///
/// HTTP is served with each connection's peer address, which decides who is
/// local (see [`super::http::access`]).
///
/// # Errors
/// Before serving: `http` is bound beyond loopback with no API keys and no
/// `auth.allow_open` (a command-line address bypasses the config file's
/// check, so it is made again on the address actually bound). Later: an I/O
/// error from the HTTP server.
pub async fn serve(
    app: App,
    unix: UnixListener,
    socket_path: Option<PathBuf>,
    http: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<Stopped> {
    if let Err(e) = app.config.check_http_exposure(http.local_addr()?) {
        if let Some(path) = &socket_path {
            super::resp::remove_socket(path);
        }
        return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, e.to_string()));
    }
    let (stop, stopping) = watch::channel(false);
    let resp = tokio::spawn(super::resp::serve(unix, app.clone(), stopping.clone()));
    let mut http_stopping = stopping.clone();
    let service = super::http::router(app.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let http = tokio::spawn(
        axum::serve(http, service)
            .with_graceful_shutdown(async move {
                let _ = http_stopping.wait_for(|s| *s).await;
            })
            .into_future(),
    );
    shutdown.await;
    tracing::info!("stopping: no new connections; finishing in-flight requests");
    let _ = stop.send(true);
    app.stopping.send_replace(true);
    let _ = resp.await;
    let served = http.await.map_err(std::io::Error::other)?;
    if let Some(path) = socket_path {
        super::resp::remove_socket(&path);
    }
    let refunded = app.leases.shutdown().await;
    tracing::info!(refunded, "leases given back");
    served.map(|()| Stopped { refunded })
}

/// Resolves on SIGTERM or SIGINT.
pub async fn signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
