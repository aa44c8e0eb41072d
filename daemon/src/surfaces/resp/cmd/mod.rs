//! The commands: parse a command's arguments, apply, turn the result into a frame.
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

mod cl_throttle;
mod info;
mod session;
mod status;
mod throttle;

use std::sync::atomic::Ordering;

use bytes::Bytes;
use redis_protocol::resp2::types::BytesFrame;

use crate::app::App;
use crate::lease::{CheckError, Served, Verdict};

/// Most characters of a client's argument quoted back in an error reply: enough
/// to recognise it, not enough to make the reply a way to reflect bulk data.
const QUOTED_MAX: usize = 64;

/// Escapes control characters (`\r` as `\\r`, ESC as `\\u{1b}`, ...), so the
/// text stays on one line and cannot smuggle a reply or a terminal sequence.
fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A client's argument as error replies quote it: lossy UTF-8, control
/// characters escaped, cut after [`QUOTED_MAX`] characters (marked with `...`).
pub(super) fn quoted(arg: &[u8]) -> String {
    let text = String::from_utf8_lossy(arg);
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(QUOTED_MAX).collect();
    let mut out = escape_controls(&head);
    if chars.next().is_some() {
        out.push_str("...");
    }
    out
}

/// An error reply. Any control character left in `msg` is escaped: an error is
/// one line on the wire, whatever a client's argument held.
pub(super) fn error(msg: impl Into<String>) -> BytesFrame {
    let msg = msg.into();
    let msg = if msg.contains(char::is_control) { escape_controls(&msg) } else { msg };
    BytesFrame::Error(msg.into())
}

fn ok() -> BytesFrame {
    BytesFrame::SimpleString(Bytes::from_static(b"OK"))
}

pub(super) fn bulk(s: impl Into<Bytes>) -> BytesFrame {
    BytesFrame::BulkString(s.into())
}

pub(super) fn arity(name: &str) -> BytesFrame {
    error(format!("ERR wrong number of arguments for '{}' command", name.to_ascii_lowercase()))
}

/// A limit name or key from the client: at most `server.max_key_bytes` bytes
/// (checked first: a long argument is refused before it is looked at), UTF-8.
pub(super) fn name<'a>(app: &App, arg: &'a Bytes, what: &str) -> Result<&'a str, BytesFrame> {
    crate::surfaces::check_length(what, arg, app.config.server.max_key_bytes).map_err(|e| error(format!("ERR {e}")))?;
    text(arg, what)
}

pub(super) fn text<'a>(arg: &'a Bytes, what: &str) -> Result<&'a str, BytesFrame> {
    std::str::from_utf8(arg).map_err(|_| error(format!("ERR {what} must be UTF-8 text")))
}

pub(super) fn integer(arg: &Bytes, what: &str) -> Result<u64, BytesFrame> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| error(format!("ERR {what} must be a non-negative integer, got '{}'", quoted(arg))))
}

/// Applies one command (its name and arguments, as the decoder split them);
/// returns the reply and whether to close after it.
pub(super) async fn dispatch(app: &App, args: Vec<Bytes>) -> (BytesFrame, bool) {
    app.metrics.commands.fetch_add(1, Ordering::Relaxed);
    let Some(command) = args.first() else {
        return (error("ERR expected a command as an array of strings"), false);
    };
    // Upper-case the command name on the stack: no allocation per command.
    let mut upper = [0u8; 16];
    let name = match command.len() {
        n @ 1..=16 => {
            upper[..n].copy_from_slice(command);
            upper[..n].make_ascii_uppercase();
            std::str::from_utf8(&upper[..n]).unwrap_or("")
        }
        _ => "",
    };
    let rest = &args[1..];
    let reply = match name {
        "THROTTLE" => throttle::throttle(app, rest).await,
        "STATUS" => status::status(app, rest).await,
        "CL.THROTTLE" => cl_throttle::cl_throttle(app, rest).await,
        "PING" => match rest {
            [] => BytesFrame::SimpleString(Bytes::from_static(b"PONG")),
            [msg] => bulk(msg.clone()),
            _ => arity(name),
        },
        "ECHO" => match rest {
            [msg] => bulk(msg.clone()),
            _ => arity(name),
        },
        "INFO" => bulk(info::info(app)),
        "HELLO" => session::hello(rest),
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
        _ => error(format!("ERR unknown command '{}', leasehold speaks {}", quoted(command), COMMANDS.join(", "))),
    };
    (reply, false)
}

/// The commands leasehold answers (listed in the unknown-command error).
const COMMANDS: [&str; 11] =
    ["THROTTLE", "STATUS", "CL.THROTTLE", "PING", "ECHO", "INFO", "HELLO", "QUIT", "COMMAND", "CLIENT", "SELECT"];

/// The reply to a decision: `[allowed, limit, remaining, retry_after_ms, reset_after_ms]`.
pub(super) fn verdict(v: &Verdict) -> BytesFrame {
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

/// The reply to a check that cannot be answered.
pub(super) fn unknown(e: CheckError) -> BytesFrame {
    match e {
        CheckError::UnknownLimit(l) => error(format!("ERR unknown limit '{}'", quoted(l.as_bytes()))),
    }
}
