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


SPECS = [
    GCRA,
    {"algorithm": "sliding_log", "limit": 3, "window": "1s"},
    {"algorithm": "token_bucket", "capacity": 4, "refill_per_sec": 2},
]


def _steps():
    for i in range(60):
        yield f"k{i % 4}", 2 if i % 5 == 0 else 0 if i % 7 == 0 else 1


@pytest.mark.parametrize("spec", SPECS)
def test_check_agrees_with_the_uniffi_path_and_allowed_with_check(spec):
    clocks = [ManualClock(5000.0) for _ in range(3)]
    fast, slow, only = (Limiter(spec, clock=c, max_keys=3) for c in clocks)
    for i, (key, cost) in enumerate(_steps()):
        want = slow._check_slow(key, cost)  # uniffi's own check
        got = fast.check(key, cost)
        assert type(got) is leasehold.Decision, i
        assert got == want and repr(got) == repr(want), i
        assert only.allowed(key, cost) is want.allowed, i
        assert fast.status(key) == slow.status(key) == only.status(key), i
        assert len(fast) == len(slow) == len(only)
        for c in clocks:
            c.advance(90.0)


def test_keys_of_every_script_are_distinct_and_a_bool_cost_still_counts_as_one():
    limiter = Limiter({"algorithm": "fixed_window", "limit": 1, "window": "1h"}, clock=ManualClock(0.0), max_keys=100)
    keys = ["", "a", "a\x00b", "a\x00c", "é", "€", "😀", "x" * 5000, "x" * 5000 + "!"]
    for key in keys:
        assert limiter.check(key).allowed, key
    for key in keys:
        assert not limiter.allowed(key), key
    assert len(limiter) == len(keys)
    assert limiter.check("b", True).remaining == 0  # a bool is an int to uniffi: cost 1
    with pytest.raises(UnicodeEncodeError):
        limiter.check("\ud800")
    with pytest.raises(TypeError):
        limiter.allowed(42)
    with pytest.raises(SpecError):
        limiter.allowed("a", -1)
