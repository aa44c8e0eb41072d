"""ns per in-process check from Python: leasehold-python (uniffi) and the
`limits` package (MemoryStorage, fixed and moving window), same run. Prints
one JSON line per implementation. Used by ../bench.sh."""

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


def report(impl, ns):
    print(json.dumps({"lang": LANG, "impl": impl, "ns": round(ns)}), flush=True)


def main():
    limiter = leasehold.Limiter({"algorithm": "gcra", "limit": 1_000_000_000, "period": "1s"})
    check = limiter.check

    def ours():
        for i in range(N):
            if not check(KEYS[i % 1000]).allowed:
                raise AssertionError("denied")

    report("leasehold-python Limiter.check (uniffi)", best_of(5, ours))

    item = parse("1000000000/second")
    for name, strategy in [("FixedWindowRateLimiter", FixedWindowRateLimiter), ("MovingWindowRateLimiter", MovingWindowRateLimiter)]:
        peer = strategy(MemoryStorage())

        def theirs():
            for i in range(N):
                if not peer.hit(item, KEYS[i % 1000]):
                    raise AssertionError("denied")

        report(f"limits {name}.hit (MemoryStorage)", best_of(5, theirs))


if __name__ == "__main__":
    main()
