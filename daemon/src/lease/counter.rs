//! Rate-limit counters: the ops a lease cache (or direct mode) applies to a
//! key's counter, as one client of the store layer's compare-and-set loop.
//!
//! A counter record holds one algorithm's state as JSON. The pure part —
//! what an op does to a state — is `leasehold_core::ops`; this module only
//! names the record (its [`Scope`]) and runs the op inside a CAS round.

use leasehold_core::{Algorithm, State};

pub use leasehold_core::ops::{apply as apply_op, Applied, Op};

use crate::store::cas::{Content, Draft, Update};
use crate::store::{Cas, StoreUnavailable};

/// Which key space a counter lives in. Spaces never share a record: the
/// storage key is `prefix:<space>:<limit>:<key>`, with `l` for limits asked
/// without a tenant (the socket), `t.<tenant>` for a tenant's (HTTP with API
/// keys; tenants contain no `:`), and `cl` for limits defined by the request
/// (`CL.THROTTLE`), so no key a client sends can reach another space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope<'a> {
    /// A configured limit, asked without a tenant.
    Host,
    /// A configured limit, asked by a tenant.
    Tenant(&'a str),
    /// A limit defined by the request itself (redis-cell's `CL.THROTTLE`).
    Adhoc,
}

impl Scope<'_> {
    fn write_space(self, out: &mut String) {
        match self {
            Self::Host => out.push('l'),
            Self::Tenant(t) => {
                out.push_str("t.");
                out.push_str(t);
            }
            Self::Adhoc => out.push_str("cl"),
        }
    }

    /// An owned copy, for a lease slot.
    pub fn to_owned_scope(self) -> OwnedScope {
        match self {
            Self::Host => OwnedScope::Host,
            Self::Tenant(t) => OwnedScope::Tenant(t.into()),
            Self::Adhoc => OwnedScope::Adhoc,
        }
    }
}

/// [`Scope`], owned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OwnedScope {
    /// See [`Scope::Host`].
    Host,
    /// See [`Scope::Tenant`].
    Tenant(Box<str>),
    /// See [`Scope::Adhoc`].
    Adhoc,
}

impl OwnedScope {
    /// Borrowed.
    pub fn as_scope(&self) -> Scope<'_> {
        match self {
            Self::Host => Scope::Host,
            Self::Tenant(t) => Scope::Tenant(t),
            Self::Adhoc => Scope::Adhoc,
        }
    }
}

/// The storage key of `key` under `limit` in `scope`: `prefix:<space>:limit:key`.
pub fn storage_key(prefix: &str, scope: Scope<'_>, limit: &str, key: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + limit.len() + key.len() + 8);
    out.push_str(prefix);
    out.push(':');
    scope.write_space(&mut out);
    out.push(':');
    out.push_str(limit);
    out.push(':');
    out.push_str(key);
    out
}

/// A counter record's content: an algorithm's state.
struct Counter {
    alg: Algorithm,
    state: State,
}

impl Content for Counter {
    fn encode(&self) -> String {
        self.state.to_json()
    }
    fn expires_at_ms(&self) -> u64 {
        self.alg.expires_at_ms(&self.state).max(0.0) as u64
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A caller's own change to a counter's state (for commands whose answer is
/// not the algorithm's [`Applied`], like `CL.THROTTLE`'s): given the state
/// (`None`: absent, expired, or of another algorithm) and the time, its
/// output and the state to write (`None`: no change). Called again on a
/// retried round, so it must be a pure function of its inputs.
pub trait StateChange: Fn(Option<&State>, f64) -> (Self::Out, Option<State>) + Send + Sync + 'static {
    /// What the change answers.
    type Out: Send + 'static;
}

impl<F, R> StateChange for F
where
    F: Fn(Option<&State>, f64) -> (R, Option<State>) + Send + Sync + 'static,
    R: Send + 'static,
{
    type Out = R;
}

struct ChangeOp<F> {
    alg: Algorithm,
    change: F,
}

impl<F: StateChange> Update for ChangeOp<F> {
    type Output = F::Out;

    fn apply(&self, draft: &mut Draft) -> F::Out {
        let (alg, now) = (self.alg, draft.now_ms());
        let state = draft.value(|r| alg.parse_state(&r.state).ok().map(|state| Counter { alg, state }));
        // Every op on one record uses the same algorithm (a key space per
        // limit); a record written under another algorithm reads as absent.
        let state = state.filter(|c| c.alg == alg).map(|c| &c.state);
        let (out, next) = (self.change)(state, now);
        if let Some(state) = next {
            draft.set(Counter { alg, state });
        }
        out
    }
}

/// Rate-limit counters over the CAS loop. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Counters {
    cas: Cas,
}

impl Counters {
    /// Counters stored through `cas`.
    pub fn new(cas: Cas) -> Self {
        Self { cas }
    }

    /// The CAS loop underneath (its store, clock and traffic counters).
    pub fn cas(&self) -> &Cas {
        &self.cas
    }

    /// The storage key of `key` under `limit` in `scope`: `prefix:<space>:limit:key`.
    pub fn storage_key(&self, scope: Scope<'_>, limit: &str, key: &str) -> String {
        storage_key(self.cas.prefix(), scope, limit, key)
    }

    /// Applies `op` to the counter of `key` under `limit`, asked without a
    /// tenant ([`Scope::Host`]), using `alg`. See [`Self::apply_in`].
    ///
    /// # Errors
    /// As [`Self::apply_in`].
    pub async fn apply(&self, limit: &str, key: &str, alg: &Algorithm, op: Op) -> Result<Applied, StoreUnavailable> {
        self.apply_in(Scope::Host, limit, key, alg, op).await
    }

    /// Applies `op` to the counter of `key` under `limit` in `scope` (using `alg`).
    ///
    /// # Errors
    /// [`StoreUnavailable`] when the store failed or every retry conflicted;
    /// the op then had no effect, unless the store failed after accepting the
    /// write, in which case units may have been consumed but are never granted
    /// (under-issue, never over-issue).
    pub async fn apply_in(
        &self,
        scope: Scope<'_>,
        limit: &str,
        key: &str,
        alg: &Algorithm,
        op: Op,
    ) -> Result<Applied, StoreUnavailable> {
        let alg_ = *alg;
        self.change_in(scope, limit, key, alg, move |state: Option<&State>, now| apply_op(&alg_, state, now, op)).await
    }

    /// Applies a caller's own `change` to the counter of `key` under `limit`
    /// in `scope`, whose records `alg` reads.
    ///
    /// # Errors
    /// As [`Self::apply_in`].
    pub async fn change_in<F: StateChange>(
        &self,
        scope: Scope<'_>,
        limit: &str,
        key: &str,
        alg: &Algorithm,
        change: F,
    ) -> Result<F::Out, StoreUnavailable> {
        self.cas.update(self.storage_key(scope, limit, key), ChangeOp { alg: *alg, change }).await
    }
}
