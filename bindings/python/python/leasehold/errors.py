"""The exceptions leasehold raises. All are :class:`LeaseholdError`."""

from __future__ import annotations

import builtins
from typing import Optional

__all__ = ["LeaseholdError", "SpecError", "StateError", "DaemonUnavailableError", "DaemonError"]


class LeaseholdError(Exception):
    """Base class of every exception this package raises."""


class SpecError(LeaseholdError, ValueError):
    """An invalid limit spec or argument. ``field`` names what is wrong
    (``limit``, ``period``, ``burst``, ``cost``, ``max_keys``...)."""

    def __init__(self, message: str, field: str, reason: Optional[str] = None) -> None:
        super().__init__(message)
        self.field = field
        self.reason = reason if reason is not None else message


class StateError(LeaseholdError, ValueError):
    """Stored state that is not valid state for the spec's algorithm."""

    def __init__(self, message: str, algorithm: Optional[str] = None) -> None:
        super().__init__(message)
        self.algorithm = algorithm


class DaemonUnavailableError(LeaseholdError, builtins.ConnectionError):
    """The daemon's socket could not be reached, or the connection broke.
    ``path`` is the socket path."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class DaemonError(LeaseholdError):
    """The daemon answered with an error reply (``-ERR ...``)."""


def spec_error(message: str, field: str) -> SpecError:
    """A :class:`SpecError` worded like core's: ``invalid `field`: reason``."""
    return SpecError(f"invalid `{field}`: {message}", field, message)
