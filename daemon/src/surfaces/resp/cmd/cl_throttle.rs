//! `CL.THROTTLE key max_burst count period_s [quantity]`: redis-cell's
//! command, with its reply shape, so its users can switch.

use std::time::Instant;

use leasehold_core::{Algorithm, DurationMs};

use bytes::Bytes;
use redis_protocol::resp2::types::BytesFrame;

use super::{arity, error, integer, name, verdict};
use crate::app::App;
use crate::lease::settings::LimitSettings;
use crate::lease::{Check, Served};

/// The GCRA limit redis-cell's `CL.THROTTLE` arguments describe: `count` per
/// `period_s` seconds with bursts of `max_burst + 1`, and the limit's name in
/// the store (`cl:<max_burst>:<count>:<period_s>`).
///
/// Fails with a message naming the bad argument.
fn cl_throttle_settings(max_burst: u64, count: u64, period_s: u64) -> Result<(String, LimitSettings), String> {
    if count == 0 {
        return Err("count must be at least 1".into());
    }
    if period_s == 0 {
        return Err("period must be at least 1 second".into());
    }
    let alg = Algorithm::Gcra(
        leasehold_core::algorithms::Gcra::new(
            count,
            DurationMs(period_s.saturating_mul(1000)),
            Some(max_burst.saturating_add(1)),
        )
        .map_err(|e| e.to_string())?,
    );
    Ok((format!("cl:{max_burst}:{count}:{period_s}"), LimitSettings::new(alg)))
}

/// Runs `CL.THROTTLE`.
pub(super) async fn cl_throttle(app: &App, args: &[Bytes]) -> BytesFrame {
    let (key, burst, count, period, quantity) = match args {
        [k, b, c, p] => (k, b, c, p, None),
        [k, b, c, p, q] => (k, b, c, p, Some(q)),
        _ => return arity("CL.THROTTLE"),
    };
    let parsed = (|| {
        Ok((
            name(app, key, "key")?,
            integer(burst, "max_burst")?,
            integer(count, "count")?,
            integer(period, "period")?,
            quantity.map(|q| integer(q, "quantity")).transpose()?.unwrap_or(1),
        ))
    })();
    let (key, burst, count, period, quantity) = match parsed {
        Ok(p) => p,
        Err(e) => return e,
    };
    let (name, settings) = match cl_throttle_settings(burst, count, period) {
        Ok(s) => s,
        Err(e) => return error(format!("ERR {e}")),
    };
    let start = Instant::now();
    let v = app.leases.check_with(&settings, Check { limit: &name, key, cost: quantity }).await;
    app.metrics.resp_latency.record(start.elapsed());
    app.observe(&name, key, &v);
    if v.served == Served::Unavailable {
        return verdict(&v);
    }
    let d = v.decision;
    let secs = |ms: u64| if ms == leasehold_core::RETRY_NEVER { -1 } else { ms.div_ceil(1000) as i64 };
    BytesFrame::Array(vec![
        BytesFrame::Integer(i64::from(!d.allowed)),
        BytesFrame::Integer(d.limit as i64),
        BytesFrame::Integer(d.remaining as i64),
        BytesFrame::Integer(if d.allowed { -1 } else { secs(d.retry_after_ms) }),
        BytesFrame::Integer(secs(d.reset_after_ms)),
    ])
}
