//! Decisions that go to the store: direct mode, status, and the one guarded
//! store call every path uses, with the fail policy's answer when the store
//! cannot back a decision.

use leasehold_core::Decision;

use super::counter::{Applied, Op, Scope};
use super::settings::{FailPolicy, LimitSettings};
use super::slot::Slot;
use super::stats::add;
use super::{Check, CheckError, LeaseCache, Served, Verdict, UNAVAILABLE_RETRY_MS};
use crate::store::{StoreError, StoreUnavailable};

impl LeaseCache {
    /// Direct mode: one compare-and-set per decision.
    pub(super) async fn direct(
        &self,
        scope: Scope<'_>,
        settings: &LimitSettings,
        check: Check<'_>,
        now: f64,
    ) -> Verdict {
        let stats = &self.inner.stats;
        match self.call(scope, check.limit, check.key, settings, Op::Decide { cost: check.cost }).await {
            Ok(a) => {
                add(if a.decision.allowed { &stats.allowed_store } else { &stats.denied_store }, 1);
                Verdict { decision: a.decision, served: Served::Store, unavailable: None, at_ms: a.at_ms }
            }
            Err(e) => self.fail(settings, check, now, e),
        }
    }

    /// The answer when the store could not back a decision. `fail = "open"`
    /// admits only while the store is down ([`StoreUnavailable::is_outage`]):
    /// contention with other daemons, a single slow call or a record the
    /// store refuses never admit a unit the counter did not grant.
    pub(super) fn fail(&self, settings: &LimitSettings, check: Check<'_>, now: f64, e: StoreUnavailable) -> Verdict {
        tracing::debug!(limit = check.limit, error = %e, "store unavailable");
        let limit = settings.algorithm.ceiling();
        let (allowed, served) = match settings.fail {
            FailPolicy::Open if e.is_outage() => (true, Served::Degraded),
            _ => (false, Served::Unavailable),
        };
        add(if allowed { &self.inner.stats.degraded } else { &self.inner.stats.unavailable }, 1);
        let retry_after_ms = if allowed { 0 } else { UNAVAILABLE_RETRY_MS };
        let decision = Decision { allowed, limit, remaining: 0, retry_after_ms, reset_after_ms: 0 };
        Verdict { decision, served, unavailable: Some(e), at_ms: now }
    }

    /// One counter op behind the guard (breaker and timeout). The op runs on
    /// a task of its own: a lease granted after the caller gave up waiting
    /// (a timeout) is given back when it lands, never stranded.
    pub(super) async fn call(
        &self,
        scope: Scope<'_>,
        limit: &str,
        key: &str,
        s: &LimitSettings,
        op: Op,
    ) -> Result<Applied, StoreUnavailable> {
        let (counters, alg, refunder) = (self.inner.counters.clone(), s.algorithm, self.inner.refunder.clone());
        let slot = Slot::new(scope, limit, key, alg);
        // Lazy: the task starts only if the guard lets the call through.
        let call = async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let r = counters.apply_in(slot.scope.as_scope(), &slot.limit, &slot.key, &alg, op).await;
                if let Err(Ok(late)) = tx.send(r) {
                    if let (Some(term), true) = (late.lease, late.granted > 0) {
                        add(&refunder.stats.units_leased, late.granted);
                        add(&refunder.stats.units_drained, late.granted);
                        refunder.spawn(&slot, late.granted, term);
                    }
                }
            });
            rx.await.unwrap_or_else(|_| Err(StoreError::transient("lease", "the store task ended").into()))
        };
        let started = std::time::Instant::now();
        let r = self.inner.guard.call(call).await;
        if r.is_ok() {
            let ms = started.elapsed().as_secs_f64() * 1e3;
            let avg = &self.inner.latency_ms;
            avg.store(avg.load() * (1.0 - super::LATENCY_EWMA_WEIGHT) + ms * super::LATENCY_EWMA_WEIGHT);
        }
        r
    }

    /// The key's standing without consuming: the store's view plus the units
    /// this daemon holds for it.
    ///
    /// # Errors
    /// [`CheckError::UnknownLimit`].
    pub async fn status(&self, limit: &str, key: &str) -> Result<Verdict, CheckError> {
        self.status_in(Scope::Host, limit, key).await
    }

    /// [`Self::status`] in `scope`.
    ///
    /// # Errors
    /// [`CheckError::UnknownLimit`].
    pub async fn status_in(&self, scope: Scope<'_>, limit: &str, key: &str) -> Result<Verdict, CheckError> {
        let settings = self.inner.limits.get(limit).ok_or_else(|| CheckError::UnknownLimit(limit.into()))?;
        Ok(self.standing(scope, settings, limit, key).await)
    }

    pub(super) async fn standing(&self, scope: Scope<'_>, settings: &LimitSettings, limit: &str, key: &str) -> Verdict {
        let check = Check { limit, key, cost: 0 };
        if let Some(local) = &self.inner.local {
            return self.local(local, scope, settings, check, Op::Status).await;
        }
        let now = self.now();
        match self.call(scope, limit, key, settings, Op::Status).await {
            Ok(a) => {
                let held = self.inner.slots.get(&self.slot_id(scope, limit, key)).map_or(0, |s| s.held_at(now));
                let decision = Decision { remaining: a.decision.remaining + held, ..a.decision };
                Verdict { decision, served: Served::Store, unavailable: None, at_ms: a.at_ms }
            }
            Err(e) => self.fail(settings, check, now, e),
        }
    }
}
