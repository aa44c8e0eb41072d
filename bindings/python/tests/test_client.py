"""The socket clients against a small fake daemon speaking RESP2 on a Unix socket."""

import asyncio
import os
import socket
import socketserver
import threading

import pytest

from leasehold import AsyncClient, Client, DaemonError, DaemonUnavailableError, Decision, LeaseholdError
from leasehold.client import default_socket_path

ALLOWED = b"*5\r\n:1\r\n:100\r\n:99\r\n:-1\r\n:600\r\n"
DENIED = b"*5\r\n:0\r\n:100\r\n:0\r\n:250\r\n:60000\r\n"
STATUS = b"*5\r\n:1\r\n:100\r\n:42\r\n:-1\r\n:3500\r\n"


def read_command(rfile):
    """Reads one RESP array of bulk strings, or None at EOF."""
    head = rfile.readline()
    if not head:
        return None
    assert head.startswith(b"*"), head
    args = []
    for _ in range(int(head[1:])):
        n = int(rfile.readline()[1:])
        args.append(rfile.read(n + 2)[:-2].decode())
    return args


def reply_for(args):
    if args[0] == "THROTTLE" and args[1] == "api":
        return DENIED if args[3] == "5" else ALLOWED
    if args[0] == "STATUS" and args[1] == "api":
        return STATUS
    return b"-ERR unknown limit '" + args[1].encode() + b"'\r\n"


class FakeDaemon(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path, chunked=False):
        self.received = []
        self.chunked = chunked
        super().__init__(path, Handler)


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        while (args := read_command(self.rfile)) is not None:
            self.server.received.append(args)
            if args[0] == "HANGUP":
                return
            reply = reply_for(args)
            if self.server.chunked:
                for i in range(len(reply)):
                    self.wfile.write(reply[i : i + 1])
                    self.wfile.flush()
            else:
                self.wfile.write(reply)


@pytest.fixture(params=[False, True], ids=["whole", "byte-by-byte"])
def daemon(request, tmp_path):
    server = FakeDaemon(str(tmp_path / "leasehold.sock"), chunked=request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_sync_client_sends_resp_and_maps_replies(daemon):
    with Client(daemon.server_address) as client:
        assert client.throttle("api", "user:1", 2) == Decision(
            allowed=True, limit=100, remaining=99, retry_after_ms=0, reset_after_ms=600
        )
        d = client.throttle("api", "user:1", 5)
        assert (d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms) == (False, 0, 250, 60000)
        assert client.status("api", "user:1").remaining == 42
        assert client.throttle("api", "ключ ✓").allowed
        with pytest.raises(DaemonError, match=r"^ERR unknown limit 'nope'$") as info:
            client.throttle("nope", "k")
        assert isinstance(info.value, LeaseholdError)
        assert client.status("api", "k").remaining == 42, "the connection survives an error reply"
    assert daemon.received == [
        ["THROTTLE", "api", "user:1", "2"],
        ["THROTTLE", "api", "user:1", "5"],
        ["STATUS", "api", "user:1"],
        ["THROTTLE", "api", "ключ ✓", "1"],
        ["THROTTLE", "nope", "k", "1"],
        ["STATUS", "api", "k"],
    ]


def test_sync_client_reconnects_after_the_daemon_hangs_up(daemon):
    client = Client(daemon.server_address)
    with pytest.raises(DaemonUnavailableError) as info:
        client._command("HANGUP")
    assert daemon.server_address in str(info.value)
    assert client.throttle("api", "k").allowed
    client.close()


def test_async_client_pipelines_concurrent_requests(daemon):
    async def main():
        async with AsyncClient(daemon.server_address) as client:
            calls = [
                client.status("api", f"k{i}") if i % 3 == 0 else client.throttle("api", f"k{i}", 5 if i % 2 else 1)
                for i in range(20)
            ]
            replies = await asyncio.gather(*calls)
            with pytest.raises(DaemonError):
                await client.throttle("nope", "k")
            return replies

    replies = asyncio.run(main())
    for i, d in enumerate(replies):
        assert d.remaining == (42 if i % 3 == 0 else 0 if i % 2 else 99), i
    assert len(daemon.received) == 21


def test_no_daemon_running_raises_a_clear_connection_error(tmp_path):
    missing = str(tmp_path / "absent.sock")
    with pytest.raises(DaemonUnavailableError) as info:
        Client(missing).throttle("api", "k")
    e = info.value
    assert isinstance(e, ConnectionError) and isinstance(e, LeaseholdError)
    assert e.path == missing
    assert missing in str(e) and "daemon" in str(e)
    assert "FileNotFoundError" in str(e)

    async def main():
        with pytest.raises(DaemonUnavailableError) as info:
            await AsyncClient(missing).status("api", "k")
        assert missing in str(info.value)

    asyncio.run(main())

    # A socket file nobody listens on any more: refused, same error.
    stale = str(tmp_path / "stale.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(stale)
    s.close()
    assert os.path.exists(stale)
    with pytest.raises(DaemonUnavailableError, match="ConnectionRefusedError"):
        Client(stale).status("api", "k")


def test_default_socket_path_follows_xdg_runtime_dir(monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1234")
    assert default_socket_path() == "/run/user/1234/leasehold.sock"
    assert Client().path == "/run/user/1234/leasehold.sock"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert AsyncClient().path == f"/tmp/leasehold-{os.getuid()}/leasehold.sock"
