//! Core errors as Python exceptions. uniffi raises `LeaseholdNativeError.Spec`
//! / `.State` (subclasses of `LeaseholdNativeError`); the `leasehold` package
//! re-raises them as `leasehold.SpecError` / `leasehold.StateError`, both
//! `leasehold.LeaseholdError`s, with `field` set.

use leasehold_core::{SpecError, StateError};

/// An error raised by the native module.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum LeaseholdNativeError {
    /// An invalid limit spec or argument; `field` names what is wrong.
    #[error("invalid `{field}`: {reason}")]
    Spec {
        /// The spec field or argument, e.g. `limit`, `period`, `max_keys`.
        field: String,
        /// What is wrong with it.
        reason: String,
        /// The full message, as core words it.
        message: String,
    },
    /// Stored state that is not state of the spec's algorithm.
    #[error("{message}")]
    State {
        /// The algorithm the state was read for.
        algorithm: String,
        /// The full message.
        message: String,
    },
}

impl From<SpecError> for LeaseholdNativeError {
    fn from(e: SpecError) -> Self {
        Self::Spec { message: e.to_string(), field: e.field.to_owned(), reason: e.reason }
    }
}

impl From<StateError> for LeaseholdNativeError {
    fn from(e: StateError) -> Self {
        Self::State { message: e.to_string(), algorithm: e.algorithm.to_owned() }
    }
}
