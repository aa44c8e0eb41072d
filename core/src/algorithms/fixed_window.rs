//! Fixed window: at most `limit` units in each `window`, windows aligned to
//! the epoch (so every host agrees where a window starts).

use super::window::{WindowCounter, WindowState};
use crate::error::SpecError;
use crate::rule::Rule;
use crate::DurationMs;

/// Fixed-window parameters, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FixedWindow(pub(crate) WindowCounter);

impl FixedWindow {
    /// `limit` units per `window`.
    ///
    /// # Errors
    /// A [`SpecError`] naming `limit` or `window`.
    pub fn new(limit: u64, window: DurationMs) -> Result<Self, SpecError> {
        WindowCounter::new(limit, window).map(Self)
    }

    /// Units per window.
    pub fn limit(&self) -> u64 {
        self.0.limit
    }

    /// The window length.
    pub fn window(&self) -> DurationMs {
        self.0.window
    }

    /// Start of the window containing `t`, epoch milliseconds.
    pub fn window_start(&self, t: f64) -> f64 {
        self.0.start(t)
    }
}

crate::rule::delegate_rule!(FixedWindow, WindowState);
