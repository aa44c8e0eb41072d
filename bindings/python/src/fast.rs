//! A C entry point for the hot path of `Limiter.check`, beside the uniffi
//! scaffolding, called from `leasehold/_limiter.py` through `ctypes`.
//!
//! uniffi's generated Python makes a method call cost, per check: a `ctypes`
//! call to clone the object's handle, a `RustBuffer` allocated through
//! another and filled one byte at a time for the key, the call itself, and a
//! `RustBuffer` for the `Decision` record read field by field and freed by a
//! fourth call — ~40 µs on the bench machine for a ~0.2 µs check. This is one
//! `ctypes` call with plain arguments: the limiter's address, the key's UTF-8
//! bytes (borrowed from the Python `bytes`), the cost and four `u64`s to
//! write. Everything else (construction, errors, status, reset) stays uniffi.

// The C ABI takes raw pointers; each dereference says why it is sound.
#![allow(unsafe_code)]

use crate::NativeLimiter;

/// Decides `cost` units for `key` with `limiter` and writes the decision's
/// `limit`, `remaining`, `retry_after_ms` and `reset_after_ms` to `out`.
/// Returns 1 when allowed, 0 when denied, -1 (writing nothing, deciding
/// nothing) when the key is not UTF-8 or a pointer is null.
///
/// # Safety
///
/// `limiter` is the address [`NativeLimiter::fast_address`] returned for a
/// `NativeLimiter` the caller keeps alive for the call; `key` points at
/// `key_len` readable bytes; `out` at four writable `u64`s. Any thread may
/// call (the limiter locks internally).
#[no_mangle]
pub unsafe extern "C" fn leasehold_native_check(
    limiter: *const NativeLimiter,
    key: *const u8,
    key_len: usize,
    cost: u64,
    out: *mut u64,
) -> i32 {
    if limiter.is_null() || out.is_null() || (key.is_null() && key_len > 0) {
        return -1;
    }
    let key = if key_len == 0 {
        &[][..]
    } else {
        // SAFETY: the caller guarantees `key_len` readable bytes at `key`.
        unsafe { std::slice::from_raw_parts(key, key_len) }
    };
    let Ok(key) = std::str::from_utf8(key) else { return -1 };
    // SAFETY: the caller keeps the `NativeLimiter` at this address alive.
    let limiter = unsafe { &*limiter };
    let d = limiter.inner.check(key, cost);
    // SAFETY: the caller guarantees four writable `u64`s at `out`.
    let out = unsafe { std::slice::from_raw_parts_mut(out, 4) };
    out.copy_from_slice(&[d.limit, d.remaining, d.retry_after_ms, d.reset_after_ms]);
    i32::from(d.allowed)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use leasehold_core::ManualClock as CoreClock;

    use super::*;
    use crate::ManualClock;

    #[test]
    fn the_c_entry_point_decides_as_check_does() {
        let spec = r#"{"algorithm":"gcra","limit":10,"period":"1s","burst":3}"#;
        let clock = || Arc::new(ManualClock { inner: Arc::new(CoreClock::new(1_000.0)) });
        let (a, b) = (
            NativeLimiter::new(spec.into(), 10, Some(clock())).unwrap(),
            NativeLimiter::new(spec.into(), 10, Some(clock())).unwrap(),
        );
        for (key, cost) in [("k", 1), ("k", 2), ("k", 1), ("é", 0), ("", 1), ("k", 9)] {
            let want = a.check(key, cost);
            let mut out = [0u64; 4];
            // SAFETY: a live limiter, a live key, four u64s.
            let allowed = unsafe {
                leasehold_native_check(
                    b.fast_address() as *const NativeLimiter,
                    key.as_ptr(),
                    key.len(),
                    cost,
                    out.as_mut_ptr(),
                )
            };
            assert_eq!(allowed, i32::from(want.allowed), "{key} {cost}");
            assert_eq!(out, [want.limit, want.remaining, want.retry_after_ms, want.reset_after_ms], "{key} {cost}");
        }
        let mut out = [0u64; 4];
        // SAFETY: as above; the key is not UTF-8.
        let r = unsafe {
            leasehold_native_check(b.fast_address() as *const NativeLimiter, [0xff].as_ptr(), 1, 1, out.as_mut_ptr())
        };
        assert_eq!((r, out), (-1, [0; 4]));
        assert_eq!(b.size(), a.size());
    }
}
