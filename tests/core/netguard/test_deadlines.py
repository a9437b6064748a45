"""``netguard.within``: a total time limit on the guarded clients' connects, reads and writes,
however a server paces its bytes."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from expediter.core.netguard import EgressPolicy, within
from expediter.core.netguard.deadlines import clamp

pytestmark = pytest.mark.usefixtures("loopback_only")
LOOPBACK = EgressPolicy(allow_networks=["127.0.0.0/8"])


@pytest.fixture
def dribbler() -> Iterator[str]:
    """A server that sends a response head, then one body byte every 0.2 s (each read is
    quick; the body of 50 bytes would take 10 s)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n")
                for _ in range(50):
                    if stop.wait(0.2):
                        return
                    try:
                        connection.sendall(b"z")
                    except OSError:
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    stop.set()
    listener.close()


def test_clamp_is_the_time_left_inside_and_the_timeout_outside() -> None:
    assert clamp(5.0) == 5.0
    assert clamp(None) is None
    with within(0.5):
        assert 0.4 < clamp(5.0) <= 0.5
        assert 0.4 < clamp(None) <= 0.5
        assert clamp(0.1) == 0.1
        with within(10):  # an inner limit never extends the outer one
            assert clamp(None) <= 0.5
    with within(0):
        assert clamp(5.0) == 0.001  # a timeout, never a non-blocking socket


def test_a_dribbling_body_ends_at_the_deadline(stack: Any, dribbler: str) -> None:
    client = stack.guard.client(LOOPBACK, timeout=5.0)
    started = time.monotonic()
    with within(0.5), pytest.raises(stack.http.TimeoutException):
        client.get(dribbler).read()
    assert time.monotonic() - started < 1.5
    client.close()


def test_without_a_limit_the_client_keeps_reading(stack: Any, dribbler: str) -> None:
    """The control: each read is within the client's timeout, so only ``within`` stops it."""
    client = stack.guard.client(LOOPBACK, timeout=5.0)
    with client.stream("GET", dribbler) as response:
        started = time.monotonic()
        received = b""
        for chunk in response.iter_bytes():
            received += chunk
            if time.monotonic() - started > 1.0:
                break
    assert len(received) >= 3
    client.close()


def test_the_async_client_ends_at_the_deadline(stack: Any, dribbler: str) -> None:
    async def fetch() -> None:
        async with stack.guard.async_client(LOOPBACK, timeout=5.0) as client:
            with within(0.5):
                response = await client.get(dribbler)
                await response.aread()

    started = time.monotonic()
    with pytest.raises(stack.http.TimeoutException):
        asyncio.run(fetch())
    assert time.monotonic() - started < 1.5
