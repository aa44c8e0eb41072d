//! Core errors as JavaScript exceptions: an `Error` whose `name` is
//! `SpecError` or `StateError`, whose message names the field
//! (``invalid `limit`: must be at least 1``), with `field` / `code` properties.

use js_sys::{Error, Reflect};
use leasehold_core::{SpecError, StateError};
use wasm_bindgen::JsValue;

fn with_props(err: Error, props: &[(&str, &str)]) -> JsValue {
    for (k, v) in props {
        // Setting a property on a fresh Error object cannot fail.
        let _ = Reflect::set(&err, &JsValue::from_str(k), &JsValue::from_str(v));
    }
    err.into()
}

/// An invalid spec or argument, naming its field.
pub fn spec(e: SpecError) -> JsValue {
    let err = Error::new(&e.to_string());
    err.set_name("SpecError");
    with_props(err, &[("code", "ERR_LEASEHOLD_SPEC"), ("field", e.field)])
}

/// An invalid argument named `field`, phrased like a spec error.
pub fn argument(field: &'static str, reason: impl Into<String>) -> JsValue {
    spec(SpecError { field, reason: reason.into() })
}

/// Unreadable state.
pub fn state(e: StateError) -> JsValue {
    let err = Error::new(&e.to_string());
    err.set_name("StateError");
    with_props(err, &[("code", "ERR_LEASEHOLD_STATE")])
}
