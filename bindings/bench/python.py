"""ns per in-process check from Python: leasehold-python (uniffi) and the
`limits` package (MemoryStorage, fixed and moving window), same run. Prints
one JSON line per implementation. Used by ../bench.sh.

The leasehold rows split the cost: `Limiter.check` (the package's API),
`Limiter.allowed` (no Decision built), the bare ctypes call the wrapper
makes (no wrapper), and uniffi's generated `NativeLimiter.check` (the
uniffi-only path the wrapper bypasses for well-formed calls)."""

import json
import os
import platform
import time

import leasehold
from limits import parse
from limits.storage import MemoryStorage
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

N = int(os.environ.get("BENCH_N", "100000"))
KEYS = [f"user:{i}" for i in range(1000)]
LANG = f"Python {platform.python_version()}"


def best_of(runs, fn):
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        best = min(best, (time.perf_counter_ns() - t0) / N)
    return best


def report(impl, ns, role="ours", goal=None):
    row = {"lang": LANG, "impl": impl, "ns": round(ns), "role": role}
    if goal is not None:
        row["goal"] = goal
    print(json.dumps(row), flush=True)


def main():
    limiter = leasehold.Limiter({"algorithm": "gcra", "limit": 1_000_000_000, "period": "1s"})
    check = limiter.check

    def ours():
        for i in range(N):
            if not check(KEYS[i % 1000]).allowed:
                raise AssertionError("denied")

    report("leasehold-python Limiter.check", best_of(5, ours), goal=1.0)

    allowed = limiter.allowed

    def ours_allowed():
        for i in range(N):
            if not allowed(KEYS[i % 1000]):
                raise AssertionError("denied")

    report("leasehold-python Limiter.allowed", best_of(5, ours_allowed), "split")

    from leasehold import _limiter

    c_check, out_type, address = _limiter._check_c, _limiter._Out, limiter._address
    utf8_keys = [k.encode() for k in KEYS]

    def bare_call():
        for i in range(N):
            key = utf8_keys[i % 1000]
            if c_check(address, key, len(key), 1, out_type()) != 1:
                raise AssertionError("denied")

    report("  of which: the ctypes call alone (no wrapper, key pre-encoded)", best_of(5, bare_call), "split")

    native_check = limiter._native.check

    def uniffi_only():
        for i in range(N):
            if not native_check(KEYS[i % 1000], 1).allowed:
                raise AssertionError("denied")

    report("uniffi-generated NativeLimiter.check (no wrapper; the old path)", best_of(5, uniffi_only), "split")

    item = parse("1000000000/second")
    for name, strategy, role in [
        ("FixedWindowRateLimiter", FixedWindowRateLimiter, "peer"),
        ("MovingWindowRateLimiter", MovingWindowRateLimiter, "other"),
    ]:
        peer = strategy(MemoryStorage())

        def theirs():
            for i in range(N):
                if not peer.hit(item, KEYS[i % 1000]):
                    raise AssertionError("denied")

        report(f"limits {name}.hit (MemoryStorage)", best_of(5, theirs), role)


if __name__ == "__main__":
    main()
