//! `STATUS limit key`: the key's standing; consumes nothing.

use bytes::Bytes;
use redis_protocol::resp2::types::BytesFrame;

use super::{arity, name, verdict};
use crate::app::App;

/// Runs `STATUS`.
pub(super) async fn status(app: &App, args: &[Bytes]) -> BytesFrame {
    let [limit, key] = args else { return arity("STATUS") };
    let (limit, key) = match (name(app, limit, "limit name"), name(app, key, "key")) {
        (Ok(l), Ok(k)) => (l, k),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    match app.leases.status(limit, key).await {
        Ok(v) => verdict(&v),
        Err(e) => super::unknown(e),
    }
}
