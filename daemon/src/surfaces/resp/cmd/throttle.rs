//! `THROTTLE limit key [cost]`: spend `cost` (default 1) units of a configured limit.

use std::time::Instant;

use bytes::Bytes;
use redis_protocol::resp2::types::BytesFrame;

use super::{arity, integer, name, verdict};
use crate::app::App;
use crate::lease::Check;

/// Runs `THROTTLE`.
pub(super) async fn throttle(app: &App, args: &[Bytes]) -> BytesFrame {
    let (limit, key, cost) = match args {
        [l, k] => (l, k, None),
        [l, k, c] => (l, k, Some(c)),
        _ => return arity("THROTTLE"),
    };
    let parsed = (|| {
        Ok((
            name(app, limit, "limit name")?,
            name(app, key, "key")?,
            cost.map(|c| integer(c, "cost")).transpose()?.unwrap_or(1),
        ))
    })();
    let (limit, key, cost) = match parsed {
        Ok(p) => p,
        Err(e) => return e,
    };
    let start = crate::observe::metrics::sample_socket_latency().then(Instant::now);
    let reply = match app.leases.check(Check { limit, key, cost }).await {
        Ok(v) => {
            app.observe(limit, key, &v);
            verdict(&v)
        }
        Err(e) => super::unknown(e),
    };
    if let Some(start) = start {
        app.metrics.resp_latency.record(start.elapsed());
    }
    reply
}
