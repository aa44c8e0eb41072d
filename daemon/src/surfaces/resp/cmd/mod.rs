//! The commands: parse a frame's arguments, apply, turn the result into a frame.
//!
//! | command | reply |
//! |---|---|
//! | `THROTTLE limit key [cost]` | `[allowed 1/0, limit, remaining, retry_after_ms (-1 if allowed), reset_after_ms]` |
//! | `STATUS limit key` | the same shape; consumes nothing |
//! | `CL.THROTTLE key max_burst count period_s [quantity]` | redis-cell's reply: `[limited 0/1, max_burst+1, remaining, retry_after_s (-1 if allowed), reset_after_s]` |
//! | `PING [msg]`, `ECHO msg`, `INFO`, `HELLO [2]`, `QUIT`, `COMMAND`, `CLIENT ...`, `SELECT 0` | as Redis |
//!
//! A store that is unavailable for a limit that fails closed answers
//! `-UNAVAILABLE ...`, never a plain denial, so callers can tell them apart.

use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;
use leasehold_core::{Algorithm, DurationMs};
use redis_protocol::resp2::types::BytesFrame;

use crate::app::App;
use crate::lease::{CheckError, Served, Verdict};
use crate::limits::LimitSettings;

fn error(msg: impl Into<String>) -> BytesFrame {
    BytesFrame::Error(msg.into().into())
}

fn ok() -> BytesFrame {
    BytesFrame::SimpleString(Bytes::from_static(b"OK"))
}

fn bulk(s: impl Into<Bytes>) -> BytesFrame {
    BytesFrame::BulkString(s.into())
}

fn arity(name: &str) -> BytesFrame {
    error(format!("ERR wrong number of arguments for '{}' command", name.to_ascii_lowercase()))
}

fn text<'a>(arg: &'a Bytes, what: &str) -> Result<&'a str, BytesFrame> {
    std::str::from_utf8(arg).map_err(|_| error(format!("ERR {what} must be UTF-8 text")))
}

fn integer(arg: &Bytes, what: &str) -> Result<u64, BytesFrame> {
    std::str::from_utf8(arg).ok().and_then(|s| s.parse::<u64>().ok()).ok_or_else(|| {
        error(format!("ERR {what} must be a non-negative integer, got '{}'", String::from_utf8_lossy(arg)))
    })
}

/// Applies one request frame; returns the reply and whether to close after it.
pub(super) async fn dispatch(app: &App, frame: BytesFrame) -> (BytesFrame, bool) {
    app.metrics.commands.fetch_add(1, Ordering::Relaxed);
    let args: Vec<Bytes> = match frame {
        BytesFrame::Array(items) if !items.is_empty() => {
            let mut args = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    BytesFrame::BulkString(b) | BytesFrame::SimpleString(b) => args.push(b),
                    BytesFrame::Integer(i) => args.push(Bytes::from(i.to_string())),
                    _ => return (error("ERR command arguments must be strings"), false),
                }
            }
            args
        }
        _ => return (error("ERR expected a command as an array of strings"), false),
    };
    // Upper-case the command name on the stack: no allocation per command.
    let mut upper = [0u8; 16];
    let name = match args[0].len() {
        n @ 1..=16 => {
            upper[..n].copy_from_slice(&args[0]);
            upper[..n].make_ascii_uppercase();
            std::str::from_utf8(&upper[..n]).unwrap_or("")
        }
        _ => "",
    };
    let rest = &args[1..];
    let reply = match name {
        "THROTTLE" => throttle(app, rest).await,
        "STATUS" => status(app, rest).await,
        "CL.THROTTLE" => cl_throttle(app, rest).await,
        "PING" => match rest {
            [] => BytesFrame::SimpleString(Bytes::from_static(b"PONG")),
            [msg] => bulk(msg.clone()),
            _ => arity(name),
        },
        "ECHO" => match rest {
            [msg] => bulk(msg.clone()),
            _ => arity(name),
        },
        "INFO" => bulk(info(app)),
        "HELLO" => hello(rest),
        "QUIT" => return (ok(), true),
        "COMMAND" => match rest.first().map(|a| String::from_utf8_lossy(a).to_ascii_uppercase()) {
            Some(sub) if sub == "COUNT" => BytesFrame::Integer(COMMANDS.len() as i64),
            _ => BytesFrame::Array(Vec::new()),
        },
        "CLIENT" => ok(),
        "SELECT" => match rest {
            [db] if &db[..] == b"0" => ok(),
            [_] => error("ERR leasehold has one database: SELECT 0"),
            _ => arity(name),
        },
        _ => error(format!(
            "ERR unknown command '{}', leasehold speaks {}",
            String::from_utf8_lossy(&args[0]),
            COMMANDS.join(", ")
        )),
    };
    (reply, false)
}

const COMMANDS: [&str; 12] = [
    "THROTTLE",
    "STATUS",
    "CL.THROTTLE",
    "PING",
    "ECHO",
    "INFO",
    "HELLO",
    "QUIT",
    "COMMAND",
    "CLIENT",
    "SELECT",
    "HELP",
];

fn verdict(v: &Verdict) -> BytesFrame {
    if v.served == Served::Unavailable {
        let why = v.unavailable.as_ref().map(ToString::to_string).unwrap_or_default();
        return error(format!("UNAVAILABLE store unavailable and the limit fails closed: {why}"));
    }
    let d = &v.decision;
    BytesFrame::Array(vec![
        BytesFrame::Integer(i64::from(d.allowed)),
        BytesFrame::Integer(d.limit as i64),
        BytesFrame::Integer(d.remaining as i64),
        BytesFrame::Integer(if d.allowed { -1 } else { d.retry_after_ms as i64 }),
        BytesFrame::Integer(d.reset_after_ms as i64),
    ])
}

fn unknown(e: CheckError) -> BytesFrame {
    match e {
        CheckError::UnknownLimit(l) => error(format!("ERR unknown limit '{l}'")),
    }
}

async fn throttle(app: &App, args: &[Bytes]) -> BytesFrame {
    let (limit, key, cost) = match args {
        [l, k] => (l, k, None),
        [l, k, c] => (l, k, Some(c)),
        _ => return arity("THROTTLE"),
    };
    let parsed = (|| {
        Ok((text(limit, "limit")?, text(key, "key")?, cost.map(|c| integer(c, "cost")).transpose()?.unwrap_or(1)))
    })();
    let (limit, key, cost) = match parsed {
        Ok(p) => p,
        Err(e) => return e,
    };
    let start = Instant::now();
    let reply = match app.limiter.check(crate::lease::Check { limit, key, cost }).await {
        Ok(v) => {
            app.observe(limit, key, &v);
            verdict(&v)
        }
        Err(e) => unknown(e),
    };
    app.metrics.resp_latency.record(start.elapsed());
    reply
}

async fn status(app: &App, args: &[Bytes]) -> BytesFrame {
    let [limit, key] = args else { return arity("STATUS") };
    let (limit, key) = match (text(limit, "limit"), text(key, "key")) {
        (Ok(l), Ok(k)) => (l, k),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    match app.limiter.status(limit, key).await {
        Ok(v) => verdict(&v),
        Err(e) => unknown(e),
    }
}

/// The GCRA limit redis-cell's `CL.THROTTLE` arguments describe: `count` per
/// `period_s` seconds with bursts of `max_burst + 1`, and the limit's name in
/// the store (`cl:<max_burst>:<count>:<period_s>`).
///
/// # Errors
/// A message naming the bad argument.
pub fn cl_throttle_settings(max_burst: u64, count: u64, period_s: u64) -> Result<(String, LimitSettings), String> {
    if count == 0 {
        return Err("count must be at least 1".into());
    }
    if period_s == 0 {
        return Err("period must be at least 1 second".into());
    }
    let alg = Algorithm::Gcra(
        leasehold_core::algorithms::Gcra::new(count, DurationMs(period_s.saturating_mul(1000)), Some(max_burst + 1))
            .map_err(|e| e.to_string())?,
    );
    Ok((format!("cl:{max_burst}:{count}:{period_s}"), LimitSettings::new(alg)))
}

async fn cl_throttle(app: &App, args: &[Bytes]) -> BytesFrame {
    let (key, burst, count, period, quantity) = match args {
        [k, b, c, p] => (k, b, c, p, None),
        [k, b, c, p, q] => (k, b, c, p, Some(q)),
        _ => return arity("CL.THROTTLE"),
    };
    let parsed = (|| {
        Ok((
            text(key, "key")?,
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
    let v = app.limiter.check_with(&settings, crate::lease::Check { limit: &name, key, cost: quantity }).await;
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

fn hello(args: &[Bytes]) -> BytesFrame {
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

fn info(app: &App) -> String {
    let l = app.limiter.stats().snapshot();
    let c = app.limiter.cas().stats().snapshot();
    let m = &app.metrics;
    let mut lines = vec![
        "# Server".to_string(),
        format!("leasehold_version:{}", env!("CARGO_PKG_VERSION")),
        format!("uptime_in_seconds:{}", app.started.elapsed().as_secs()),
        format!("store:{}", app.limiter.cas().store().name()),
        format!("limits:{}", app.config.limits.keys().cloned().collect::<Vec<_>>().join(",")),
        String::new(),
        "# Stats".into(),
        format!("connections_received:{}", m.connections.load(Ordering::Relaxed)),
        format!("commands_processed:{}", m.commands.load(Ordering::Relaxed)),
        format!("allowed_local:{}", l.allowed_local),
        format!("allowed_store:{}", l.allowed_store),
        format!("denied_local:{}", l.denied_local),
        format!("denied_store:{}", l.denied_store),
        format!("degraded:{}", l.degraded),
        format!("unavailable:{}", l.unavailable),
        String::new(),
        "# Leases".into(),
        format!("leases:{}", l.leases),
        format!("units_leased:{}", l.units_leased),
        format!("units_held:{}", l.units_held),
        format!("units_refunded:{}", l.units_refunded),
        format!("units_lost:{}", l.units_lost),
        format!("l1_keys:{}", app.limiter.keys_cached()),
        String::new(),
        "# Store".into(),
        format!("store_reads:{}", c.reads),
        format!("store_writes:{}", c.writes),
        format!("store_conflicts:{}", c.conflicts),
        format!("store_errors:{}", c.errors),
        format!("breaker:{}", app.limiter.breaker_state().name()),
    ];
    lines.push(String::new());
    lines.join("\r\n")
}
