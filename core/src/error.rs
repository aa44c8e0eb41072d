//! Errors: for impossible requests and invalid input, never for denials.

use thiserror::Error;

/// A limit specification that cannot be honoured. Names the offending field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid `{field}`: {reason}")]
pub struct SpecError {
    /// The field of the spec that is wrong (`limit`, `period`, `burst`, ...).
    pub field: &'static str,
    /// What is wrong with it, in words a user can act on.
    pub reason: String,
}

impl SpecError {
    pub(crate) fn new(field: &'static str, reason: impl Into<String>) -> Self {
        Self { field, reason: reason.into() }
    }
}

/// Stored state that cannot be read back for the algorithm it is used with.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("state is not valid {algorithm} state: {reason}")]
pub struct StateError {
    /// The algorithm the state was read for.
    pub algorithm: &'static str,
    /// Why it could not be read (the JSON parser's message, or a bad value).
    pub reason: String,
}
