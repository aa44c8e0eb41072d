//! Core errors as JavaScript errors. The addon throws plain `Error`s whose
//! `code` says which kind and whose message names the field
//! (``invalid `limit`: must be at least 1``); `index.js` turns them into the
//! package's `SpecError` / `StateError` classes with `field` set.

use leasehold_core::{SpecError, StateError};

/// The `code` of a JavaScript error thrown by the addon.
#[derive(Debug, Clone, Copy)]
pub enum Code {
    /// An invalid limit spec (or argument); the message names the field.
    Spec,
    /// Stored state that is not state of the spec's algorithm.
    State,
}

impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        match self {
            Code::Spec => "ERR_LEASEHOLD_SPEC",
            Code::State => "ERR_LEASEHOLD_STATE",
        }
    }
}

/// The addon's error type.
pub type Error = napi::Error<Code>;

/// The addon's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// An invalid spec, naming its field.
pub fn spec(e: SpecError) -> Error {
    Error::new(Code::Spec, e.to_string())
}

/// Unreadable state.
pub fn state(e: StateError) -> Error {
    Error::new(Code::State, e.to_string())
}

/// An invalid argument named `field`, phrased like a spec error.
pub fn argument(field: &'static str, reason: impl Into<String>) -> Error {
    spec(SpecError { field, reason: reason.into() })
}
