import time

import pytest

import leasehold
from leasehold import DEFAULT_MAX_KEYS, RETRY_NEVER, Limiter, ManualClock, SpecError, decide

GCRA = {"algorithm": "gcra", "limit": 10, "period": "1s", "burst": 3}


def test_check_defaults_to_cost_one():
    limiter = Limiter(GCRA, clock=ManualClock(1000.0))
    d = limiter.check("a")
    assert (d.allowed, d.limit, d.remaining, d.retry_after_ms, d.reset_after_ms) == (True, 3, 2, 0, 100)
    assert d == leasehold.Decision(allowed=True, limit=3, remaining=2, retry_after_ms=0, reset_after_ms=100)
    assert repr(d) == "Decision(allowed=True, limit=3, remaining=2, retry_after_ms=0, reset_after_ms=100)"


def test_manual_clock_drives_refills_and_steps_back():
    clock = ManualClock(1000.0)
    limiter = Limiter(GCRA, clock=clock)
    assert limiter.check("a", 3).allowed
    denied = limiter.check("a")
    assert not denied.allowed and denied.retry_after_ms == 100
    clock.advance(100.0)
    assert clock.now() == 1100.0
    assert limiter.check("a").allowed
    clock.set(0.0)  # a step back admits nothing new
    assert not limiter.check("a").allowed
    assert limiter.status("a").remaining == 0
    clock.set(10_000.0)
    assert limiter.status("a").remaining == 3


def test_cost_over_the_ceiling_can_never_pass():
    limiter = Limiter(GCRA, clock=ManualClock(0.0))
    d = limiter.check("a", 4)
    assert not d.allowed and d.retry_after_ms == RETRY_NEVER
    assert limiter.check("a", 0).remaining == 3
    assert not limiter.check("a", 2**64 - 1).allowed


def test_keys_are_bounded_least_recently_used_first():
    limiter = Limiter({"algorithm": "fixed_window", "limit": 5, "window": "1h"}, clock=ManualClock(0.0), max_keys=2)
    limiter.check("a")
    limiter.check("b")
    limiter.check("a")
    limiter.check("c")  # evicts b
    assert len(limiter) == 2
    assert limiter.check("a").remaining == 2
    assert limiter.check("b").remaining == 4
    assert limiter.reset("b") and not limiter.reset("b")
    assert DEFAULT_MAX_KEYS == 10_000


def test_default_clock_is_the_system_clock():
    spec = {"algorithm": "fixed_window", "limit": 2, "window": "1h"}
    expected = decide(spec, None, time.time() * 1000, 1).decision
    d = Limiter(spec).check("k")
    assert d.allowed and abs(d.reset_after_ms - expected.reset_after_ms) < 1000


def test_decide_round_trips_state_json():
    spec = {"algorithm": "token_bucket", "capacity": 2, "refill_per_sec": 1}
    t = decide(spec, None, 1000, 2)
    assert t.changed and isinstance(t.state_json, str)
    denied = decide(spec, t.state_json, 1000, 1)
    assert not denied.decision.allowed and not denied.changed and denied.state_json == t.state_json
    assert decide(spec, t.state_json, 2000).decision.allowed
    decision, state_json, changed = decide('{"algorithm":"quota","limit":5,"window":"1d"}', None, 0.5)
    assert (decision.remaining, changed) == (4, True)


@pytest.mark.parametrize("cost", [-1, 1.5, "2", None])
def test_bad_cost_names_the_argument(cost):
    with pytest.raises(SpecError) as info:
        Limiter(GCRA).check("a", cost)
    assert info.value.field == "cost"


def test_bad_options_name_the_argument():
    with pytest.raises(SpecError) as info:
        Limiter(GCRA, max_keys=0)
    assert info.value.field == "max_keys"
    with pytest.raises(SpecError) as info:
        Limiter(GCRA, clock=time)
    assert info.value.field == "clock"
    with pytest.raises(SpecError) as info:
        Limiter(42)
    assert info.value.field == "spec"
    with pytest.raises(ValueError, match=r"invalid `period`"):
        Limiter({"algorithm": "gcra", "limit": 10, "period": 60})


def test_limiter_is_usable_from_threads():
    import threading

    limiter = Limiter({"algorithm": "fixed_window", "limit": 1000, "window": "1h"}, clock=ManualClock(0.0))
    allowed = []

    def worker():
        allowed.append(sum(limiter.check("shared").allowed for _ in range(300)))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(allowed) == 1000, "exactly the limit passes across threads"
