//! `CL.THROTTLE key max_burst count period_s [quantity]`: redis-cell's
//! command, with its reply shape, so its users can switch.

use std::time::Instant;

use leasehold_core::{Algorithm, DurationMs};

use bytes::Bytes;
use redis_protocol::resp2::types::BytesFrame;

use leasehold_core::algorithms::GcraState;
use leasehold_core::State;

use super::{arity, error, integer, name, verdict};
use crate::app::App;
use crate::lease::counter::Scope;
use crate::lease::settings::LimitSettings;
use crate::lease::stats::add;
use crate::lease::{Served, Verdict};

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

/// One `CL.THROTTLE` answer, in redis-cell's terms (durations in ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cell {
    limited: bool,
    limit: i64,
    remaining: i64,
    /// -1 s when not limited (or never allowed).
    retry_after_ns: i64,
    reset_after_ns: i64,
}

const SECOND_NS: i128 = 1_000_000_000;

/// redis-cell's GCRA, in its own integer nanoseconds: the emission interval
/// is `period / count` (truncated to a nanosecond), the tolerance that times
/// `max_burst + 1`; a request of `quantity` passes when the theoretical
/// arrival time moved by `quantity` intervals is at most the tolerance ahead
/// of `now`. Returns the answer and the new arrival time (`None`: unchanged).
/// Arithmetic saturates instead of overflowing on extreme arguments.
fn cell(
    tat_ns: Option<i128>,
    now_ns: i128,
    max_burst: u64,
    count: u64,
    period_s: u64,
    quantity: u64,
) -> (Cell, Option<i128>) {
    let clamp = |v: i128| v.clamp(i128::from(i64::MIN), i128::from(i64::MAX));
    let interval = ((i128::from(period_s) * SECOND_NS) as f64 / count as f64) as i128;
    let limit = i128::from(max_burst) + 1;
    let tolerance = interval.saturating_mul(limit);
    let increment = interval.saturating_mul(i128::from(quantity));
    let tat = tat_ns.unwrap_or(now_ns);
    let new_tat = if now_ns > tat { now_ns } else { tat }.saturating_add(increment);
    let diff = now_ns.saturating_sub(new_tat.saturating_sub(tolerance));
    let (limited, retry, ttl, next) = if diff < 0 {
        let retry = if increment <= tolerance { diff.saturating_neg() } else { -SECOND_NS };
        (true, retry, tat.saturating_sub(now_ns), None)
    } else {
        (false, -SECOND_NS, new_tat.saturating_sub(now_ns), Some(new_tat))
    };
    let spare = tolerance.saturating_sub(ttl);
    // Microseconds, truncated, as redis-cell divides them.
    let remaining = if spare > interval.saturating_neg() && interval / 1000 != 0 {
        ((spare / 1000) as f64 / (interval / 1000) as f64) as i128
    } else {
        0
    };
    let answer = Cell {
        limited,
        limit: clamp(limit) as i64,
        remaining: clamp(remaining) as i64,
        retry_after_ns: clamp(retry) as i64,
        reset_after_ns: clamp(ttl) as i64,
    };
    (answer, next)
}

/// Whole seconds as redis-cell replies them: truncated, plus one when a
/// millisecond part is left (so a caller never retries too early).
fn reply_seconds(ns: i64) -> i64 {
    let (secs, ms) = (ns / 1_000_000_000, (ns % 1_000_000_000) / 1_000_000);
    secs + i64::from(ms > 0)
}

/// Runs `CL.THROTTLE`: always exact, never from a lease (its users expect
/// redis-cell's numbers). On a single host (embedded or memory store) the
/// answers equal redis-cell's for the same sequence (to the microsecond the
/// state is kept in); over DynamoDB each is one compare-and-set.
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
    let start = crate::observe::metrics::sample_socket_latency().then(Instant::now);
    let change = move |state: Option<&State>, now_ms: f64| {
        let tat = match state {
            Some(State::Gcra(g)) => Some((g.tat * 1e6).round() as i128),
            _ => None,
        };
        let (answer, next) = cell(tat, (now_ms * 1e6).round() as i128, burst, count, period, quantity);
        let next = next.map(|tat| State::Gcra(GcraState { tat: tat as f64 / 1e6, out: Vec::new() }));
        ((answer, now_ms), next)
    };
    let result = app.leases.change(Scope::Adhoc, &name, key, &settings.algorithm, change).await;
    if let Some(start) = start {
        app.metrics.resp_latency.record(start.elapsed());
    }
    let (answer, at_ms) = match result {
        Ok(r) => r,
        Err(e) => {
            let v = Verdict {
                decision: leasehold_core::Decision {
                    allowed: false,
                    limit: burst.saturating_add(1),
                    remaining: 0,
                    retry_after_ms: crate::lease::UNAVAILABLE_RETRY_MS,
                    reset_after_ms: 0,
                },
                served: Served::Unavailable,
                unavailable: Some(e),
                at_ms: 0.0,
            };
            add(&app.leases.stats().unavailable, 1);
            return verdict(&v);
        }
    };
    let (stats, local) = (app.leases.stats(), app.leases.local_counters().is_some());
    let counter = match (answer.limited, local) {
        (false, true) => &stats.allowed_local,
        (true, true) => &stats.denied_local,
        (false, false) => &stats.allowed_store,
        (true, false) => &stats.denied_store,
    };
    add(counter, 1);
    let served = if local { Served::Local } else { Served::Store };
    let ms = |ns: i64| u64::try_from(ns.max(0)).unwrap_or(0).div_ceil(1_000_000);
    let v = Verdict {
        decision: leasehold_core::Decision {
            allowed: !answer.limited,
            limit: answer.limit as u64,
            remaining: answer.remaining.max(0) as u64,
            retry_after_ms: if answer.limited && answer.retry_after_ns >= 0 { ms(answer.retry_after_ns) } else { 0 },
            reset_after_ms: ms(answer.reset_after_ns),
        },
        served,
        unavailable: None,
        at_ms,
    };
    app.observe(&name, key, &v);
    BytesFrame::Array(vec![
        BytesFrame::Integer(i64::from(answer.limited)),
        BytesFrame::Integer(answer.limit),
        BytesFrame::Integer(answer.remaining),
        BytesFrame::Integer(reply_seconds(answer.retry_after_ns)),
        BytesFrame::Integer(reply_seconds(answer.reset_after_ns)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i128 = SECOND_NS;

    /// A sequence of `(ms after start, quantity)` against one key, with
    /// redis-cell's arguments; returns each reply as it is sent.
    fn replies(max_burst: u64, count: u64, period: u64, steps: &[(i128, u64)]) -> Vec<[i64; 5]> {
        let start = 1_700_000_000 * S;
        let mut tat = None;
        steps
            .iter()
            .map(|&(ms, q)| {
                let (c, next) = cell(tat, start + ms * 1_000_000, max_burst, count, period, q);
                if next.is_some() {
                    tat = next;
                }
                [
                    i64::from(c.limited),
                    c.limit,
                    c.remaining,
                    reply_seconds(c.retry_after_ns),
                    reply_seconds(c.reset_after_ns),
                ]
            })
            .collect()
    }

    #[test]
    fn the_readme_example() {
        // CL.THROTTLE user123 15 30 60 1, as redis-cell's README shows it.
        assert_eq!(replies(15, 30, 60, &[(0, 1)]), vec![[0, 16, 15, -1, 2]]);
    }

    #[test]
    fn a_denial_reports_what_remains_and_when_to_retry() {
        // CL.THROTTLE k 100 1000 10 7, thirty times at once: 14 pass
        // (14 × 70 ms ≤ 1010 ms of tolerance), then the denials say 3 units
        // remain and to retry and reset in 1 s (40 ms and 980 ms, rounded up).
        let got = replies(100, 1000, 10, &[(0, 7); 30]);
        for (i, r) in got.iter().enumerate().take(14) {
            assert_eq!(r[..4], [0, 101, 101 - 7 * (i as i64 + 1), -1], "{i}");
        }
        for r in &got[14..] {
            assert_eq!(*r, [1, 101, 3, 1, 1]);
        }
    }

    #[test]
    fn a_sequence_over_time() {
        // 5 per second, bursts of 5 (max_burst 4).
        let steps = [
            (0, 6), // larger than the burst: never allowed, no retry time
            (0, 1), // then five pass at once
            (0, 1),
            (0, 1),
            (0, 1),
            (0, 1),
            (0, 1),    // the sixth waits a second
            (3000, 1), // three seconds later, three have come back
            (3100, 1),
            (9500, 0), // quantity 0 peeks
            (9500, 2),
            (9500, 5), // more than remains: retry once enough has come back
        ];
        let got = replies(4, 1, 1, &steps);
        assert_eq!(
            got,
            vec![
                [1, 5, 5, -1, 0],
                [0, 5, 4, -1, 1],
                [0, 5, 3, -1, 2],
                [0, 5, 2, -1, 3],
                [0, 5, 1, -1, 4],
                [0, 5, 0, -1, 5],
                [1, 5, 0, 1, 5],
                [0, 5, 2, -1, 3],
                [0, 5, 1, -1, 4],
                [0, 5, 5, -1, 0],
                [0, 5, 3, -1, 2],
                [1, 5, 3, 2, 2],
            ]
        );
    }

    #[test]
    fn extreme_arguments_saturate_instead_of_overflowing() {
        let (c, _) = cell(None, 1_700_000_000 * S, u64::MAX, 1, u64::MAX / 1_000_000_000, u64::MAX);
        assert_eq!(c.limit, i64::MAX, "answered, saturated: {c:?}");
        assert_eq!(reply_seconds(-1_000_000_000), -1);
        assert_eq!(reply_seconds(40_000_000), 1);
        assert_eq!(reply_seconds(2_000_000_000), 2);
        assert_eq!(reply_seconds(2_000_400_000), 2, "a sub-millisecond part is not rounded up");
    }
}
