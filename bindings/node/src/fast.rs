//! The hot path of `Limiter.check`, written against raw Node-API.
//!
//! A `#[napi]` method pays for napi-rs's per-call machinery (a native-borrow
//! scope with heap-allocated guards, a class-identity check, `napi_unwrap`,
//! an owned `String` for the key): on the bench machine that was ~450 ns for
//! an empty getter, against a limiter check of ~200 ns. This module makes one
//! plain function per limiter whose callback data is the limiter itself, so a
//! call costs `napi_get_cb_info`, the key copied into a stack buffer, the
//! cost, the output array, and the check.
//!
//! The fast function only handles the well-formed call (a string key, a whole
//! number cost, a `Float64Array` of at least 5); for anything else it returns
//! `undefined` and `index.js` makes the same call through
//! [`crate::NativeLimiter::check_into`], which throws the usual errors. So
//! errors are worded in one place.

// Raw Node-API calls are `unsafe`; each block says why it is sound.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::ptr;
use std::sync::Arc;

use leasehold_core::local::LocalLimiter;
use napi::sys;

/// Keys up to this many UTF-8 bytes are copied to the stack; longer ones to
/// the heap. Covers the usual `user:…`, IP and API-key keys.
const STACK_KEY_BYTES: usize = 256;

/// The longest UTF-8 encoding of one UTF-16 code unit pair: Node writes whole
/// characters only, so a write that ends within this many bytes of the
/// buffer's end may have stopped early.
const MAX_CHAR_BYTES: usize = 4;

/// A JavaScript function `(key, cost, out) => allowed | undefined` deciding
/// with `limiter`; see the [module docs](self). The function holds one
/// reference on `limiter`, dropped when the function is garbage-collected.
pub fn check_function(env: sys::napi_env, limiter: &Arc<LocalLimiter>) -> napi::Result<sys::napi_value> {
    let data = Arc::into_raw(Arc::clone(limiter)).cast_mut().cast::<c_void>();
    let name = "check";
    let mut func = ptr::null_mut();
    // SAFETY: `env` is the live env of the calling `#[napi]` method; `name` is
    // valid for `len` bytes; `data` stays valid until `release` below runs.
    let status = unsafe {
        sys::napi_create_function(env, name.as_ptr().cast(), name.len() as isize, Some(check), data, &mut func)
    };
    if status != sys::Status::napi_ok {
        // SAFETY: `data` came from `Arc::into_raw` above and nothing else has it.
        unsafe { drop(Arc::from_raw(data.cast::<LocalLimiter>().cast_const())) };
        return Err(napi::Error::from_status(napi::Status::from(status)));
    }
    // Ties the reference's lifetime to the function's: `release` runs when
    // the function is collected (or the env torn down).
    // SAFETY: `func` is a fresh function object, not wrapped yet.
    let status = unsafe { sys::napi_wrap(env, func, data, Some(release), ptr::null_mut(), ptr::null_mut()) };
    if status != sys::Status::napi_ok {
        // SAFETY: as above; the function cannot be called before we return it.
        unsafe { drop(Arc::from_raw(data.cast::<LocalLimiter>().cast_const())) };
        return Err(napi::Error::from_status(napi::Status::from(status)));
    }
    Ok(func)
}

/// Drops the function's reference on its limiter.
unsafe extern "C" fn release(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the `Arc::into_raw` of `check_function`, released once.
    unsafe { drop(Arc::from_raw(data.cast::<LocalLimiter>().cast_const())) };
}

/// The callback: `(key, cost, out)`; writes the decision into `out` and
/// returns `allowed`, or returns `undefined` without deciding when the
/// arguments are not the well-formed kind (see the module docs).
unsafe extern "C" fn check(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let mut argc = 3;
    let mut argv = [ptr::null_mut(); 3];
    let mut data = ptr::null_mut();
    // SAFETY: `info` is this call's; `argv` has room for `argc` values.
    let status = unsafe { sys::napi_get_cb_info(env, info, &mut argc, argv.as_mut_ptr(), ptr::null_mut(), &mut data) };
    if status != sys::Status::napi_ok || argc < 3 {
        return undefined(env);
    }
    // SAFETY: `data` is the limiter `check_function` attached to this
    // function; the function is alive (it is running), so its reference is.
    let limiter = unsafe { &*data.cast::<LocalLimiter>().cast_const() };

    let mut cost = 0.0;
    // SAFETY: a value of this call; fails (not a number) without side effects.
    if unsafe { sys::napi_get_value_double(env, argv[1], &mut cost) } != sys::Status::napi_ok
        || !(cost.is_finite() && cost >= 0.0 && cost.fract() == 0.0)
    {
        return undefined(env);
    }

    let (mut kind, mut len, mut out) = (0, 0, ptr::null_mut());
    // SAFETY: fails (not a typed array) without side effects; `out` then
    // points at the array's first element, `len` elements long.
    let status = unsafe {
        sys::napi_get_typedarray_info(env, argv[2], &mut kind, &mut len, &mut out, ptr::null_mut(), ptr::null_mut())
    };
    if status != sys::Status::napi_ok || kind != sys::TypedarrayType::float64_array || len < 5 || out.is_null() {
        return undefined(env);
    }

    let mut stack = [0u8; STACK_KEY_BYTES];
    let mut heap = Vec::new();
    let Some(key) = key_utf8(env, argv[0], &mut stack, &mut heap) else {
        return undefined(env);
    };
    // Node replaces unpaired surrogates, so this is UTF-8; checked anyway.
    let Ok(key) = std::str::from_utf8(key) else {
        return undefined(env);
    };

    let d = limiter.check(key, cost as u64);
    // SAFETY: `out` points at `len >= 5` f64s of a live Float64Array (an
    // argument of this call); nothing else touches it while we run.
    let out = unsafe { std::slice::from_raw_parts_mut(out.cast::<f64>(), 5) };
    out.copy_from_slice(&[
        f64::from(u8::from(d.allowed)),
        d.limit as f64,
        d.remaining as f64,
        d.retry_after_ms as f64,
        d.reset_after_ms as f64,
    ]);
    let mut result = ptr::null_mut();
    // SAFETY: plain value creation in a live env.
    unsafe { sys::napi_get_boolean(env, d.allowed, &mut result) };
    result
}

/// `value` as UTF-8 bytes (in `stack` when it fits, else in `heap`), or
/// `None` when it is not a string.
fn key_utf8<'a>(
    env: sys::napi_env,
    value: sys::napi_value,
    stack: &'a mut [u8; STACK_KEY_BYTES],
    heap: &'a mut Vec<u8>,
) -> Option<&'a [u8]> {
    let mut len = 0;
    // SAFETY: `stack` has room for `STACK_KEY_BYTES` bytes including the
    // terminating NUL Node writes; fails (not a string) without side effects.
    let status =
        unsafe { sys::napi_get_value_string_utf8(env, value, stack.as_mut_ptr().cast(), STACK_KEY_BYTES, &mut len) };
    if status != sys::Status::napi_ok {
        return None;
    }
    if len + MAX_CHAR_BYTES < STACK_KEY_BYTES - 1 {
        return Some(&stack[..len]);
    }
    // Possibly cut short: ask for the length, then copy it all.
    // SAFETY: a null buffer asks for the length only.
    if unsafe { sys::napi_get_value_string_utf8(env, value, ptr::null_mut(), 0, &mut len) } != sys::Status::napi_ok {
        return None;
    }
    heap.resize(len + 1, 0);
    let mut written = 0;
    // SAFETY: `heap` has room for `len + 1` bytes.
    let status =
        unsafe { sys::napi_get_value_string_utf8(env, value, heap.as_mut_ptr().cast(), len + 1, &mut written) };
    (status == sys::Status::napi_ok).then(|| &heap[..written])
}

fn undefined(env: sys::napi_env) -> sys::napi_value {
    let mut result = ptr::null_mut();
    // SAFETY: plain value lookup in a live env.
    unsafe { sys::napi_get_undefined(env, &mut result) };
    result
}
