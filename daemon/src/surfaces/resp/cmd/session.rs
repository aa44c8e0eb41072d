//! Connection-level commands every Redis client sends: `HELLO`, and the
//! trivial ones answered inline by the dispatcher (`PING`, `ECHO`, `QUIT`,
//! `COMMAND`, `CLIENT`, `SELECT`).

use bytes::Bytes;
use redis_protocol::resp2::types::BytesFrame;

use super::{bulk, error};

/// Runs `HELLO [protover]`: RESP2 only.
pub(super) fn hello(args: &[Bytes]) -> BytesFrame {
    if let Some(v) = args.first() {
        if &v[..] != b"2" {
            return error("NOPROTO leasehold speaks RESP2 only (HELLO 2)");
        }
    }
    let s = |x: &'static str| bulk(Bytes::from_static(x.as_bytes()));
    BytesFrame::Array(vec![
        s("server"),
        s("leasehold"),
        s("version"),
        s(env!("CARGO_PKG_VERSION")),
        s("proto"),
        BytesFrame::Integer(2),
        s("mode"),
        s("standalone"),
        s("role"),
        s("master"),
        s("modules"),
        BytesFrame::Array(Vec::new()),
    ])
}
