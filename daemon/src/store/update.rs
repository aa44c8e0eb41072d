//! What the CAS loop applies to a record: an [`Update`] of a [`Draft`] (the
//! record as read, and a typed value decoded from it once per round) whose
//! value is a [`Content`] that knows how to encode itself back.

use std::any::Any;

use super::Record;

/// A value decoded from a record's `state`, which knows how to encode itself back.
pub trait Content: Any + Send {
    /// The record's `state` string for this value.
    fn encode(&self) -> String;
    /// Epoch milliseconds after which the value is indistinguishable from absent.
    fn expires_at_ms(&self) -> u64;
    /// `self` as `Any`, to get the concrete type back.
    fn as_any(&self) -> &dyn Any;
}

/// One key's record while a round applies updates to it.
pub struct Draft {
    now_ms: f64,
    /// The record as read; `None` when absent or expired.
    stored: Option<Record>,
    /// The decoded value, once an update asked for it.
    pub(super) value: Option<Box<dyn Content>>,
    decoded: bool,
    pub(super) changed: bool,
    pub(super) corrupt: bool,
}

impl Draft {
    pub(super) fn new(stored: Option<Record>, now_ms: f64) -> Self {
        Self { now_ms, stored, value: None, decoded: false, changed: false, corrupt: false }
    }

    /// The time (epoch ms) the round runs at.
    pub fn now_ms(&self) -> f64 {
        self.now_ms
    }

    /// The record as read, `None` when absent or expired.
    pub fn stored(&self) -> Option<&Record> {
        self.stored.as_ref()
    }

    /// The value as it stands after the updates before this one. The stored
    /// record is decoded with `decode` on first use; a record it cannot read
    /// (or a value of another type) counts as corrupt and reads as absent.
    pub fn value<T: Content>(&mut self, decode: impl FnOnce(&Record) -> Option<T>) -> Option<&T> {
        if !self.decoded {
            self.decoded = true;
            if let Some(r) = &self.stored {
                match decode(r) {
                    Some(v) => self.value = Some(Box::new(v)),
                    None => self.corrupt = true,
                }
            }
        }
        match self.value.as_deref().map(|v| v.as_any().downcast_ref::<T>()) {
            Some(Some(v)) => Some(v),
            Some(None) => {
                self.corrupt = true;
                None
            }
            None => None,
        }
    }

    /// Replaces the value; the round writes it.
    pub fn set<T: Content>(&mut self, value: T) {
        self.decoded = true;
        self.value = Some(Box::new(value));
        self.changed = true;
    }
}

/// What to do to one key's record. Runs inside a round, in queue order, and
/// may run more than once (a round is retried on conflict), so it must be a
/// pure function of the draft.
pub trait Update: Send + 'static {
    /// What the caller gets back.
    type Output: Send + 'static;
    /// Applies the update to `draft` and says what happened.
    fn apply(&self, draft: &mut Draft) -> Self::Output;
}
