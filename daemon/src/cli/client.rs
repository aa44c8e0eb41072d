//! A minimal client for the daemon's socket, for `leasehold check`.

use std::path::Path;

use bytes::{Bytes, BytesMut};
use leasehold_core::Decision;
use redis_protocol::resp2::decode::decode_bytes_mut;
use redis_protocol::resp2::encode::extend_encode;
use redis_protocol::resp2::types::BytesFrame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Sends `THROTTLE limit key cost` and reads the decision.
///
/// # Errors
/// A message saying what failed: no daemon at `socket`, a RESP error from the
/// daemon (unknown limit, store unavailable), or an unexpected reply.
pub async fn throttle(socket: &Path, limit: &str, key: &str, cost: u64) -> Result<Decision, String> {
    let mut stream = UnixStream::connect(socket).await.map_err(|e| {
        format!("cannot connect to the leasehold socket {}: {e} (is `leasehold serve` running?)", socket.display())
    })?;
    let request = BytesFrame::Array(
        ["THROTTLE", limit, key, &cost.to_string()]
            .iter()
            .map(|a| BytesFrame::BulkString(Bytes::copy_from_slice(a.as_bytes())))
            .collect(),
    );
    let mut out = BytesMut::new();
    extend_encode(&mut out, &request, false).map_err(|e| e.to_string())?;
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    let mut buf = BytesMut::with_capacity(256);
    let frame = loop {
        if stream.read_buf(&mut buf).await.map_err(|e| e.to_string())? == 0 {
            return Err("the daemon closed the connection".into());
        }
        if let Some((frame, _, _)) = decode_bytes_mut(&mut buf).map_err(|e| e.to_string())? {
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
        BytesFrame::Error(e) => Err(e.to_string()),
        other => Err(format!("unexpected reply {other:?}")),
    }
}
