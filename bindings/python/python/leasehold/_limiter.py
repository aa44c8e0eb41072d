"""The in-process limiter and the pure transition, over the uniffi module."""

from __future__ import annotations

import json
from typing import Any, Mapping, NamedTuple, Optional, Union

from . import _native
from ._native import Decision, ManualClock
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

    __slots__ = ("_native",)

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

    def check(self, key: str, cost: int = 1) -> Decision:
        """Admits ``cost`` units for ``key`` (all or nothing)."""
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
