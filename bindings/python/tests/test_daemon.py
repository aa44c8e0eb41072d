"""The socket clients against the real daemon (the `leasehold` binary named by
LEASEHOLD_BIN; tests/run.sh sets it to the binary its test stage built)."""

import asyncio
import os
import subprocess
import time

import pytest

from leasehold import AsyncClient, Client, DaemonError, Limiter, ManualClock

BIN = os.environ.get("LEASEHOLD_BIN")


@pytest.fixture
def daemon(tmp_path):
    socket = str(tmp_path / "leasehold.sock")
    proc = subprocess.Popen(
        [BIN, "serve", "--store", "memory", "--socket", socket, "--http", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        if os.path.exists(socket):
            break
        time.sleep(0.05)
    yield socket
    proc.terminate()
    assert proc.wait(timeout=10) == 0, "the daemon exits 0 on SIGTERM"


@pytest.mark.skipif(not BIN, reason="set LEASEHOLD_BIN to the leasehold binary")
def test_sync_client_against_the_daemon(daemon):
    with Client(daemon) as c:
        first = c.throttle("api", "py-user", 1)
        assert (first.allowed, first.limit, first.remaining, first.retry_after_ms) == (True, 100, 99, 0)
        assert c.throttle("api", "py-user", 99).remaining == 0
        denied = c.throttle("api", "py-user", 1)
        assert not denied.allowed and 0 < denied.retry_after_ms <= 60
        assert c.status("api", "someone-else").remaining == 100
        with pytest.raises(DaemonError, match="unknown limit"):
            c.throttle("no-such-limit", "k", 1)
    local = Limiter({"algorithm": "gcra", "limit": 1000, "period": "60s", "burst": 100}, clock=ManualClock(0))
    assert local.check("x").remaining == first.remaining


@pytest.mark.skipif(not BIN, reason="set LEASEHOLD_BIN to the leasehold binary")
def test_async_client_against_the_daemon(daemon):
    async def run():
        c = AsyncClient(daemon)
        try:
            results = await asyncio.gather(*(c.throttle("api", "async-user", 1) for _ in range(5)))
        finally:
            await c.close()
        return sorted(r.remaining for r in results)

    assert asyncio.run(run()) == [95, 96, 97, 98, 99]
