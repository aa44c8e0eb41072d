"""Clients for the leasehold daemon's Unix socket: :class:`Client` (blocking)
and :class:`AsyncClient` (asyncio).

The daemon speaks RESP2: ``THROTTLE <limit> <key> [<cost>]`` and
``STATUS <limit> <key>`` answer ``[allowed 1|0, limit, remaining,
retry_after_ms (-1 if allowed), reset_after_ms]``, returned here as a
:class:`leasehold.Decision` (``retry_after_ms`` 0 when allowed, as in-process).
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any, List, Optional, Sequence, Union

from ._native import Decision
from .errors import DaemonError, DaemonUnavailableError, LeaseholdError

__all__ = ["Client", "AsyncClient", "default_socket_path"]


def default_socket_path() -> str:
    """``$XDG_RUNTIME_DIR/leasehold.sock``, else ``/tmp/leasehold-<uid>/leasehold.sock``"""
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/leasehold-{os.getuid()}"
    return os.path.join(runtime, "leasehold.sock")


def _encode(args: Sequence[Union[str, int]]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


RespValue = Union[str, int, None, "DaemonError", List[Any]]


class _Reader:
    """Reads RESP2 values through a ``readline`` / ``readexactly`` pair."""

    @staticmethod
    def parse_line(line: bytes) -> tuple:
        if not line.endswith(b"\r\n"):
            raise EOFError("connection closed before a full reply")
        return chr(line[0]), line[1:-2]


def _to_decision(reply: RespValue) -> Decision:
    if isinstance(reply, DaemonError):
        raise reply
    if not (isinstance(reply, list) and len(reply) == 5 and all(isinstance(x, int) for x in reply)):
        raise LeaseholdError(f"unexpected reply from the daemon: {reply!r}")
    allowed, limit, remaining, retry, reset = reply
    return Decision(
        allowed=allowed == 1, limit=limit, remaining=remaining, retry_after_ms=max(0, retry), reset_after_ms=reset
    )


def _unavailable(path: str, err: BaseException) -> DaemonUnavailableError:
    hint = ""
    if isinstance(err, (FileNotFoundError, ConnectionRefusedError)):
        hint = " (is the leasehold daemon running?)"
    why = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
    return DaemonUnavailableError(f"leasehold daemon not reachable at {path}: {why}{hint}", path)


class Client:
    """A blocking client for the daemon's Unix socket. One connection, opened
    on first use and reopened after a failure; not shared between threads.

    >>> with Client() as daemon:                        # doctest: +SKIP
    ...     daemon.throttle("api", "user:1").allowed
    """

    def __init__(self, path: Optional[str] = None, *, timeout: float = 5.0) -> None:
        self.path = path or default_socket_path()
        self.timeout = timeout
        self._sock: Optional[socket.socket] = None
        self._file: Any = None

    def throttle(self, limit: str, key: str, cost: int = 1) -> Decision:
        """``THROTTLE limit key cost``: admits ``cost`` units or none."""
        return _to_decision(self._command("THROTTLE", limit, key, cost))

    def status(self, limit: str, key: str) -> Decision:
        """``STATUS limit key``: the key's standing, consuming nothing."""
        return _to_decision(self._command("STATUS", limit, key))

    def close(self) -> None:
        """Closes the connection."""
        if self._file is not None:
            self._file.close()
        if self._sock is not None:
            self._sock.close()
        self._sock = self._file = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError as e:
            sock.close()
            raise _unavailable(self.path, e) from e
        self._sock, self._file = sock, sock.makefile("rb")

    def _command(self, *args: Union[str, int]) -> RespValue:
        if self._sock is None:
            self._connect()
        assert self._sock is not None
        try:
            self._sock.sendall(_encode(args))
            return self._read()
        except (OSError, EOFError) as e:
            self.close()
            raise _unavailable(self.path, e) from e

    def _read(self) -> RespValue:
        kind, body = _Reader.parse_line(self._file.readline())
        if kind == "+":
            return body.decode()
        if kind == "-":
            return DaemonError(body.decode())
        if kind == ":":
            return int(body)
        if kind == "$":
            n = int(body)
            if n < 0:
                return None
            data = self._file.read(n + 2)
            if len(data) != n + 2:
                raise EOFError("connection closed before a full reply")
            return data[:-2].decode()
        if kind == "*":
            n = int(body)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise LeaseholdError(f"unexpected RESP reply type {kind!r} from the daemon")


class AsyncClient:
    """An asyncio client for the daemon's Unix socket. Requests are pipelined
    on one connection and answered in order; safe to share between tasks.

    >>> async with AsyncClient() as daemon:             # doctest: +SKIP
    ...     (await daemon.throttle("api", "user:1")).allowed
    """

    def __init__(self, path: Optional[str] = None, *, timeout: float = 5.0) -> None:
        self.path = path or default_socket_path()
        self.timeout = timeout
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._connecting: Optional[asyncio.Lock] = None
        self._order: Optional[asyncio.Lock] = None
        self._pending: List["asyncio.Future[RespValue]"] = []

    async def throttle(self, limit: str, key: str, cost: int = 1) -> Decision:
        """``THROTTLE limit key cost``: admits ``cost`` units or none."""
        return _to_decision(await self._command("THROTTLE", limit, key, cost))

    async def status(self, limit: str, key: str) -> Decision:
        """``STATUS limit key``: the key's standing, consuming nothing."""
        return _to_decision(await self._command("STATUS", limit, key))

    async def close(self) -> None:
        """Closes the connection."""
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _ensure_connected(self) -> None:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
            self._order = asyncio.Lock()
        async with self._connecting:
            if self._writer is not None:
                return
            try:
                self._reader, self._writer = await asyncio.wait_for(
                    asyncio.open_unix_connection(self.path), self.timeout
                )
            except (OSError, asyncio.TimeoutError) as e:
                raise _unavailable(self.path, e) from e

    async def _command(self, *args: Union[str, int]) -> RespValue:
        await self._ensure_connected()
        assert self._writer is not None and self._reader is not None and self._order is not None
        reader, writer = self._reader, self._writer
        # Requests are written in the order their futures are queued; whoever
        # holds the read lock reads replies and hands each to the oldest
        # future until its own is answered (pipelining).
        loop = asyncio.get_running_loop()
        fut: "asyncio.Future[RespValue]" = loop.create_future()
        self._pending.append(fut)
        writer.write(_encode(args))
        try:
            await writer.drain()
            async with self._order:
                while not fut.done():
                    first = self._pending[0]
                    try:
                        value = await asyncio.wait_for(self._read(reader), self.timeout)
                    except BaseException as e:
                        self._fail(e)
                        raise
                    self._pending.pop(0)
                    if not first.done():
                        first.set_result(value)
            return fut.result()
        except DaemonUnavailableError:
            await self.close()
            raise
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.TimeoutError) as e:
            await self.close()
            raise _unavailable(self.path, e) from e

    def _fail(self, err: BaseException) -> None:
        pending, self._pending = self._pending, []
        for f in pending:
            if not f.done():
                f.set_exception(_unavailable(self.path, err))
                f.exception()  # mark retrieved: the owner sees it through its own read

    async def _read(self, reader: asyncio.StreamReader) -> RespValue:
        kind, body = _Reader.parse_line(await reader.readline())
        if kind == "+":
            return body.decode()
        if kind == "-":
            return DaemonError(body.decode())
        if kind == ":":
            return int(body)
        if kind == "$":
            n = int(body)
            return None if n < 0 else (await reader.readexactly(n + 2))[:-2].decode()
        if kind == "*":
            n = int(body)
            return None if n < 0 else [await self._read(reader) for _ in range(n)]
        raise LeaseholdError(f"unexpected RESP reply type {kind!r} from the daemon")
