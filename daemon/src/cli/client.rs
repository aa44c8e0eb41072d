//! A minimal client for the daemon's socket, for `leasehold check`.

use std::path::Path;

use bytes::{Bytes, BytesMut};
use leasehold_core::Decision;
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::encode::extend_encode;
use redis_protocol::resp2::types::BytesFrame;
use thiserror::Error;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Why the daemon could not answer.
#[derive(Debug, Error)]
pub enum ClientError {
    /// No daemon listens on the socket.
    #[error("cannot connect to the leasehold socket {path}: {source} (is `leasehold serve` running?)")]
    Connect {
        /// The socket.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The connection failed mid-request.
    #[error("talking to the daemon: {0}")]
    Io(#[from] std::io::Error),
    /// The reply was not RESP, or not the reply `THROTTLE` gives.
    #[error("unexpected reply from the daemon: {0}")]
    Protocol(String),
    /// The daemon answered with an error (unknown limit, store unavailable).
    #[error("{0}")]
    Daemon(String),
}

/// Sends `THROTTLE limit key cost` and reads the decision.
///
/// # Errors
/// A message saying what failed: no daemon at `socket`, a RESP error from the
/// daemon (unknown limit, store unavailable), or an unexpected reply.
pub async fn throttle(socket: &Path, limit: &str, key: &str, cost: u64) -> Result<Decision, ClientError> {
    let mut stream = UnixStream::connect(socket)
        .await
        .map_err(|source| ClientError::Connect { path: socket.to_path_buf(), source })?;
    let request = BytesFrame::Array(
        ["THROTTLE", limit, key, &cost.to_string()]
            .iter()
            .map(|a| BytesFrame::BulkString(Bytes::copy_from_slice(a.as_bytes())))
            .collect(),
    );
    let mut out = BytesMut::new();
    extend_encode(&mut out, &request, false).map_err(|e| ClientError::Protocol(e.to_string()))?;
    stream.write_all(&out).await?;
    let mut buf = BytesMut::with_capacity(256);
    let frame = loop {
        if stream.read_buf(&mut buf).await? == 0 {
            return Err(ClientError::Protocol("the daemon closed the connection".into()));
        }
        if let Some((frame, _, _)) = decode_bytes_mut(&mut buf).map_err(|e| ClientError::Protocol(e.to_string()))? {
            break frame;
        }
    };
    match frame {
        BytesFrame::Array(items) if items.len() == 5 => {
            let n: Vec<i64> = items.iter().map(|f| if let BytesFrame::Integer(i) = f { *i } else { 0 }).collect();
            Ok(Decision {
                allowed: n[0] == 1,
                limit: n[1] as u64,
                remaining: n[2] as u64,
                retry_after_ms: n[3].max(0) as u64,
                reset_after_ms: n[4] as u64,
            })
        }
        BytesFrame::Error(e) => Err(ClientError::Daemon(e.to_string())),
        other => Err(ClientError::Protocol(format!("{other:?}"))),
    }
}
