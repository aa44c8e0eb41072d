"""leasehold rate limits in Python.

In-process, with leasehold's core algorithms (bit-identical to the daemon,
Node and the browser)::

    from leasehold import Limiter
    limiter = Limiter({"algorithm": "gcra", "limit": 1000, "period": "60s", "burst": 100})
    if not limiter.check("user:42").allowed:
        ...

Through the leasehold daemon's Unix socket: :class:`Client` and
:class:`AsyncClient`. The pure transition over state you store yourself:
:func:`decide`.
"""

from ._limiter import DEFAULT_MAX_KEYS, RETRY_NEVER, Decision, Limiter, ManualClock, Transition, decide
from .client import AsyncClient, Client, default_socket_path
from .errors import DaemonError, DaemonUnavailableError, LeaseholdError, SpecError, StateError

__all__ = [
    "Limiter",
    "ManualClock",
    "Decision",
    "Transition",
    "decide",
    "Client",
    "AsyncClient",
    "default_socket_path",
    "LeaseholdError",
    "SpecError",
    "StateError",
    "DaemonUnavailableError",
    "DaemonError",
    "RETRY_NEVER",
    "DEFAULT_MAX_KEYS",
]
