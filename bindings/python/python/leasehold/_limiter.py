"""The in-process limiter and the pure transition, over the uniffi module."""

from __future__ import annotations

import ctypes
import json
from typing import Any, Mapping, NamedTuple, Optional, Union

from . import _native
from ._native import Decision, ManualClock
from ._native import leasehold_native as _generated
from .errors import SpecError, StateError, spec_error

__all__ = ["Decision", "ManualClock", "Limiter", "Transition", "decide", "RETRY_NEVER", "DEFAULT_MAX_KEYS"]

#: ``retry_after_ms`` of a request that can never pass: 2**53 - 1.
RETRY_NEVER = (1 << 53) - 1
#: Keys a :class:`Limiter` keeps by default.
DEFAULT_MAX_KEYS = 10_000



def _decision_repr(d: Decision) -> str:
    return (
        f"Decision(allowed={d.allowed!r}, limit={d.limit!r}, remaining={d.remaining!r}, "
        f"retry_after_ms={d.retry_after_ms!r}, reset_after_ms={d.reset_after_ms!r})"
    )


Decision.__repr__ = _decision_repr  # type: ignore[method-assign]

Spec = Union[Mapping[str, Any], str]
_NativeError = _native.LeaseholdNativeError
_U64_MAX = (1 << 64) - 1

# The hot path of `Limiter.check`: one ctypes call into the same library
# uniffi loaded (`leasehold_native_check`, bindings/python/src/fast.rs),
# instead of uniffi's four calls and byte-by-byte buffers. `PyDLL` keeps the
# GIL for the call (it is shorter than releasing and taking it back; the
# limiter locks internally anyway).
_check_c = ctypes.PyDLL(_generated._UniffiLib._name).leasehold_native_check
_check_c.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64, ctypes.c_void_p]
_check_c.restype = ctypes.c_int
# limit, remaining, retry_after_ms, reset_after_ms; one per call, so threads
# sharing a limiter never read each other's decision.
_Out = ctypes.c_uint64 * 4
_new = object.__new__


def _spec_text(spec: Spec) -> str:
    if isinstance(spec, str):
        return spec
    if isinstance(spec, Mapping):
        return json.dumps(dict(spec))
    raise spec_error(f"must be a mapping or JSON text (got {type(spec).__name__})", "spec")


def _translate(e: Exception) -> Exception:
    if isinstance(e, _NativeError.Spec):
        return SpecError(e.message, e.field, e.reason)
    if isinstance(e, _NativeError.State):
        return StateError(e.message, e.algorithm)
    return e


def _cost(cost: int) -> int:
    if isinstance(cost, bool) or not isinstance(cost, int) or cost < 0:
        raise spec_error(f"must be a whole number of units, 0 or more (got {cost!r})", "cost")
    return min(cost, (1 << 64) - 1)


class Limiter:
    """An in-process limiter: one limit spec, a bounded map of keys, a clock.

    >>> limiter = Limiter({"algorithm": "gcra", "limit": 10, "period": "1s", "burst": 3})
    >>> limiter.check("user:1").allowed
    True
    """

    __slots__ = ("_native", "_address")

    def __init__(self, spec: Spec, *, clock: Optional[ManualClock] = None, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        """Raises :class:`SpecError` naming the field when the spec is invalid.
        ``max_keys`` bounds the keys kept (when full, expired states go first,
        then the least recently used); ``clock`` defaults to the system clock."""
        if clock is not None and not isinstance(clock, ManualClock):
            raise spec_error("must be a leasehold.ManualClock", "clock")
        if isinstance(max_keys, bool) or not isinstance(max_keys, int) or max_keys < 1:
            raise spec_error(f"must be a whole number, 1 or more (got {max_keys!r})", "max_keys")
        try:
            self._native = _native.NativeLimiter(_spec_text(spec), min(max_keys, (1 << 64) - 1), clock)
        except _NativeError as e:
            raise _translate(e) from None
        # Valid while `self._native` lives, which is as long as `self`.
        self._address = self._native.fast_address()

    def check(self, key: str, cost: int = 1) -> Decision:
        """Admits ``cost`` units for ``key`` (all or nothing)."""
        if type(key) is str and type(cost) is int and 0 <= cost <= _U64_MAX:
            try:
                utf8 = key.encode()
            except UnicodeEncodeError:
                pass  # a lone surrogate: the uniffi path raises as it always did
            else:
                out = _Out()
                allowed = _check_c(self._address, utf8, len(utf8), cost, out)
                if allowed >= 0:
                    d = _new(Decision)
                    d.__dict__ = {
                        "allowed": allowed == 1,
                        "limit": out[0],
                        "remaining": out[1],
                        "retry_after_ms": out[2],
                        "reset_after_ms": out[3],
                    }
                    return d
        return self._check_slow(key, cost)

    def allowed(self, key: str, cost: int = 1) -> bool:
        """``check(key, cost).allowed``, without building the decision."""
        if type(key) is str and type(cost) is int and 0 <= cost <= _U64_MAX:
            try:
                utf8 = key.encode()
            except UnicodeEncodeError:
                pass
            else:
                allowed = _check_c(self._address, utf8, len(utf8), cost, _Out())
                if allowed >= 0:
                    return allowed == 1
        return self._check_slow(key, cost).allowed

    def _check_slow(self, key: str, cost: int) -> Decision:
        """``check`` through uniffi: any argument the fast path declined (a
        ``bool`` cost, a non-``str`` key...), with uniffi's conversions and
        errors."""
        try:
            return self._native.check(key, cost)
        except (TypeError, ValueError, OverflowError):
            _cost(cost)
            raise

    def status(self, key: str) -> Decision:
        """The key's standing, consuming nothing."""
        return self._native.status(key)

    def reset(self, key: str) -> bool:
        """Forgets ``key``'s state; True when it had any."""
        return self._native.reset(key)

    def __len__(self) -> int:
        """How many keys hold state."""
        return self._native.size()


class Transition(NamedTuple):
    """What :func:`decide` returns."""

    decision: Decision
    #: The state to store: the new state if ``changed``, else the state passed in.
    state_json: Optional[str]
    #: Whether the state changed (a store can skip the write when not).
    changed: bool


def decide(spec: Spec, state_json: Optional[str], now_ms: float, cost: int = 1) -> Transition:
    """The pure transition: a key's stored state JSON (or None), the time in
    epoch milliseconds and the cost -> the decision and the state to store.

    Raises :class:`SpecError` for an invalid spec, :class:`StateError` for
    state that is not this algorithm's."""
    _cost(cost)
    try:
        t = _native.decide(_spec_text(spec), state_json, float(now_ms), cost)
    except _NativeError as e:
        raise _translate(e) from None
    return Transition(t.decision, t.state_json, t.changed)
