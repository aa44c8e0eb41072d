//! Exact leases: units taken from a shared record and spent later.
//!
//! A leaseholder (the daemon) takes `n` units from a key's record with
//! [`Algorithm::take_lease`](crate::Algorithm::take_lease) and may then spend
//! them locally, at any moments it likes, while `now < until_ms`. Unspent units
//! may be given back with [`Algorithm::refund_lease`](crate::Algorithm::refund_lease)
//! before the lease ends.
//!
//! ## The guarantee
//!
//! For the refill algorithms (GCRA, token bucket, leaky bucket), with any
//! number of leaseholders sharing one record, over **every** interval
//! `[a, b]`:
//!
//! > units admitted in `[a, b]` (leased units spent in it, plus direct
//! > `decide`s and plain `take`s) ≤ `ceiling + rate × (b − a)`
//!
//! where `ceiling` is the capacity (token and leaky bucket) or the burst
//! (GCRA) and `rate` the refill rate (GCRA: one unit per emission interval,
//! `limit / period`) — the same bound the algorithm gives to direct requests.
//! This holds provided leaseholders spend a leased unit only while
//! `now < until_ms`, give back only units they have not spent (and will not
//! spend), and share one clock (a leaseholder whose clock is `s` ms late
//! can overshoot by at most `rate × s`).
//!
//! ## Why a plain `take` is not enough
//!
//! Charging leased units when they are taken and letting the bucket refill at
//! once lets a lease's units be spent late while others spend what refilled
//! meanwhile: a full bucket of `C` units leased at `t₀` for a second and spent
//! at `t₀ + 999 ms`, plus the `≈ rate × 999 ms` that refilled and were admitted
//! directly at the same instant, is well over `C` admissions in one
//! millisecond.
//!
//! ## Design
//!
//! The record remembers the units out on lease, each entry
//! `(units, until_ms, taken_at_ms)` (see [`LeaseOut`]); `U(t)` is the sum of
//! the units of entries with `until_ms > t`.
//!
//! - **Refill is capped at `ceiling − U(t)`.** The cap rises as leases end, so
//!   the level is evaluated piecewise over the sorted lease ends: on each
//!   segment it is `min(cap, level + rate × Δt)`. For GCRA the same is done on
//!   the theoretical arrival time: where the cap binds at a lease end `e`
//!   with `u` units still out just before it, `tat` becomes at least
//!   `e + u × interval` (`= e + tolerance − (burst − u) × interval`).
//! - **Taking** `n` units lowers the level by `n` now and adds an entry.
//! - **Units not given back are consumed at the lease's end:** the entry
//!   simply disappears at `until_ms`; the level stays where the cap held it
//!   and refills from there.
//! - **A refund** of `m` units for the lease `(taken_at_ms, until_ms)` is
//!   accepted only while that entry exists and `now < until_ms`, for at most
//!   the entry's remaining units; it raises the level by `m` and lowers the
//!   entry by `m` (an entry that reaches zero is dropped). After the end the
//!   units have been consumed: accepting them then could mint units that
//!   refilled into the space the lease had reserved.
//! - Entries with `until_ms <= now` are pruned whenever a new state is
//!   written; `available`, `decide`, `status`, `retry_after_ms` and
//!   `expires_at_ms` all see the cap (a record is never "absent/full" while
//!   units are out, and a denial's retry time waits for the lease end when
//!   the cap binds until then).
//!
//! Why it holds: at every instant `level + U ≤ ceiling` (taking moves units
//! from the level to `U`, a refund moves them back, refill stops at the cap,
//! and an ending lease lowers `U` without raising the level). Units spent in
//! `[a, b]` come either from leases out at `a` (at most `U(a)`, less what is
//! given back) or from what the level supplies during `[a, b]` (at most
//! `level(a)`, plus refill `≤ rate × (b − a)`, plus what is given back).
//! Their sum is at most `level(a) + U(a) + rate × (b − a) ≤ ceiling + rate ×
//! (b − a)`.
//!
//! The price is under-issue, never over-issue: units of a lease that were
//! spent early keep the cap lowered until the lease ends. Short leases keep
//! that small.
//!
//! ## Ending a lease early
//!
//! [`Algorithm::end_lease`](crate::Algorithm::end_lease) is a refund that
//! also closes the entry: the holder declares it has stopped spending the
//! lease, so the units it spent count as consumed *now* instead of at the
//! lease's end, and the cap rises at once. The invariant `level + U ≤
//! ceiling` still holds (closing lowers `U` and leaves the level), and no
//! unit of the lease is spent after it. A holder that renews a hot key's
//! lease ends the old one in the same write, so steady demand at any rate up
//! to the limit's own is never held back by the cap.
//!
//! ## Bound on the out list
//!
//! Two leases with the same `(taken_at_ms, until_ms)` share one entry. A
//! record keeps at most [`MAX_LEASES_OUT`] entries: a lease that would make
//! one more merges the two entries that end first into one (their units, the
//! later end and that later entry's identity). Merging only holds units out
//! longer, so the guarantee stands; the earlier lease can no longer be given
//! back (its refunds are refused: under-issue).
//!
//! ## Window algorithms
//!
//! Fixed window, quota and sliding window keep no out list: a lease there
//! must end with its window ([`Algorithm::window_end_ms`](crate::Algorithm::window_end_ms)),
//! units are counted in the window they were taken in, and `take_lease` /
//! `refund_lease` are `take` / `refund` dated at the lease's `taken_at_ms`
//! (units go back only into the window they came from). The sliding log
//! counts units at the instant they are taken, so it is exact only for
//! direct decisions; leasing from it delegates the same way.
//!
//! ## State JSON
//!
//! The entries are stored in the state's `out` field as
//! `[units, until_ms, taken_at_ms]` triples, sorted by end, e.g.
//! `{"tokens":2.0,"ts":1700000000000.0,"out":[[3,1700000002000.0,1700000000000.0]]}`;
//! the field is omitted when nothing is out, so states without leases read
//! and write exactly as before.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// A lease's identity within a record: when it was taken and when it ends
/// (epoch ms). `taken_at_ms` is the `now_ms` passed to
/// [`Algorithm::take_lease`](crate::Algorithm::take_lease), `until_ms` its `until_ms`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeaseTerm {
    /// When the lease was taken (the `now_ms` of the take).
    pub taken_at_ms: f64,
    /// When the lease ends: its units may be spent while `now < until_ms`.
    pub until_ms: f64,
}

/// The most lease entries one record keeps; see the [module docs](self).
pub const MAX_LEASES_OUT: usize = 64;

/// Units out on lease: stored as the JSON triple `[units, until_ms, taken_at_ms]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(from = "(u64, f64, f64)", into = "(u64, f64, f64)")]
pub struct LeaseOut {
    /// Units of the lease not given back.
    pub units: u64,
    /// When the lease ends (epoch ms); the entry is gone from then on.
    pub until_ms: f64,
    /// When the lease was taken (epoch ms).
    pub taken_at_ms: f64,
}

impl From<(u64, f64, f64)> for LeaseOut {
    fn from((units, until_ms, taken_at_ms): (u64, f64, f64)) -> Self {
        Self { units, until_ms, taken_at_ms }
    }
}

impl From<LeaseOut> for (u64, f64, f64) {
    fn from(o: LeaseOut) -> Self {
        (o.units, o.until_ms, o.taken_at_ms)
    }
}

impl LeaseOut {
    fn term(&self) -> LeaseTerm {
        LeaseTerm { taken_at_ms: self.taken_at_ms, until_ms: self.until_ms }
    }
}

/// Entries in the order the arithmetic needs them: by end, then by start.
/// Stored lists are kept sorted; one that is not (written by hand) is sorted
/// here rather than misread.
pub(crate) fn sorted(out: &[LeaseOut]) -> Cow<'_, [LeaseOut]> {
    let key = |o: &LeaseOut| (o.until_ms, o.taken_at_ms);
    if out.windows(2).all(|w| key(&w[0]).partial_cmp(&key(&w[1])).is_some_and(|o| o.is_le())) {
        Cow::Borrowed(out)
    } else {
        let mut v = out.to_vec();
        v.sort_by(|a, b| key(a).partial_cmp(&key(b)).unwrap_or(std::cmp::Ordering::Equal));
        Cow::Owned(v)
    }
}

/// Units of the entries still out at `t` (`until_ms > t`).
pub(crate) fn units_out(out: &[LeaseOut], t: f64) -> u64 {
    out.iter().filter(|o| o.until_ms > t).fold(0u64, |sum, o| sum.saturating_add(o.units))
}

/// The entries still out at `now`, sorted: what a state written at `now` keeps.
pub(crate) fn pruned(out: &[LeaseOut], now: f64) -> Vec<LeaseOut> {
    sorted(out).iter().filter(|o| o.until_ms > now && o.units > 0).copied().collect()
}

/// `out` (already pruned and sorted) with a new lease added: merged into an
/// entry of the same term, else inserted in order; past [`MAX_LEASES_OUT`]
/// the two entries that end first are merged.
pub(crate) fn with_lease(mut out: Vec<LeaseOut>, lease: LeaseOut) -> Vec<LeaseOut> {
    if let Some(same) = out.iter_mut().find(|o| o.term() == lease.term()) {
        same.units = same.units.saturating_add(lease.units);
        return out;
    }
    let at = out.partition_point(|o| (o.until_ms, o.taken_at_ms) <= (lease.until_ms, lease.taken_at_ms));
    out.insert(at, lease);
    while out.len() > MAX_LEASES_OUT {
        let first = out.remove(0);
        out[0].units = out[0].units.saturating_add(first.units);
    }
    out
}

/// The units of `lease` that may be given back at `now`: at most `n` and the
/// entry's remaining units, none once the lease has ended or when no entry
/// has its term. Returns them with `out` lowered accordingly (already pruned
/// and sorted; an entry lowered to zero is dropped). With `close`, the
/// entry is removed as well: the holder has stopped spending, so its spent
/// units count as consumed at `now` rather than at the lease's end. Returns
/// the units given back, whether the list changed, and the list.
pub(crate) fn settle(
    mut out: Vec<LeaseOut>,
    now: f64,
    lease: LeaseTerm,
    n: u64,
    close: bool,
) -> (u64, bool, Vec<LeaseOut>) {
    if now.is_nan() || now >= lease.until_ms {
        return (0, false, out);
    }
    let Some(i) = out.iter().position(|o| o.term() == lease) else { return (0, false, out) };
    let m = n.min(out[i].units);
    out[i].units -= m;
    if out[i].units == 0 || close {
        out.remove(i);
        return (m, true, out);
    }
    (m, m > 0, out)
}

/// Whether a lease may be taken at the effective time `now` for `until_ms`:
/// both finite and the lease not over before it starts.
pub(crate) fn valid_term(now_ms: f64, effective_now: f64, until_ms: f64) -> bool {
    now_ms.is_finite() && until_ms.is_finite() && until_ms > effective_now
}
