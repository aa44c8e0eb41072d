//! Quota counter: `limit` units (tokens, credits) per `window`, for token
//! quotas. Today it counts like a fixed window (and derefs to one for its
//! parameters); it is its own algorithm because reservations (reserve an
//! estimate, reconcile with actual usage) will extend its state, and quota
//! records must not be confused with request-rate records.

use std::ops::Deref;

use super::window::WindowState;
use super::FixedWindow;
use crate::error::SpecError;
use crate::rule::Rule;
use crate::DurationMs;

/// Quota parameters, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quota(FixedWindow);

impl Quota {
    /// `limit` units per `window`.
    ///
    /// # Errors
    /// A [`SpecError`] naming `limit` or `window`.
    pub fn new(limit: u64, window: DurationMs) -> Result<Self, SpecError> {
        FixedWindow::new(limit, window).map(Self)
    }
}

impl Deref for Quota {
    type Target = FixedWindow;

    fn deref(&self) -> &FixedWindow {
        &self.0
    }
}

crate::rule::delegate_rule!(Quota, WindowState);
