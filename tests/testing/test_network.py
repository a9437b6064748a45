"""The loopback-only test net (``expediter.testing.network``): it refuses, before any packet
leaves, every connection to a non-loopback address and every real DNS lookup; loopback works;
leaving it undoes its patches. Each test checks the net is in place before it dials anything
non-loopback, so a broken net fails the test instead of reaching the world."""

from __future__ import annotations

import socket
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest

from expediter.testing.network import LoopbackNet, NonLoopbackDial, StaticLookup, loopback_only

pytestmark = pytest.mark.usefixtures("loopback_only")

OUTSIDE = ("93.184.216.34", 80)


def patches() -> tuple[Any, Any, Any]:
    return (socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo)


@pytest.fixture
def net() -> Iterator[LoopbackNet]:
    """A fresh inner test net, checked to be in place."""
    before = patches()
    with loopback_only() as inner:
        now = patches()
        assert all(a is not b for a, b in zip(before, now, strict=True)), "the net is not in place"
        yield inner


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    yield sock
    sock.close()


def test_a_non_loopback_connection_is_refused_at_once_and_recorded(net: LoopbackNet) -> None:
    started = time.monotonic()
    with pytest.raises(NonLoopbackDial, match="test net: refused"):
        socket.create_connection(OUTSIDE, timeout=1)
    assert time.monotonic() - started < 0.5
    assert net.refused == [f"a connection to {OUTSIDE!r}"]
    assert issubclass(NonLoopbackDial, ConnectionRefusedError)


@pytest.mark.parametrize(
    ("family", "address"),
    [
        (socket.AF_INET, ("10.0.0.1", 80)),
        (socket.AF_INET, ("169.254.169.254", 80)),
        (socket.AF_INET, ("0.0.0.0", 80)),
        (socket.AF_INET6, ("2606:2800:220:1:248:1893:25c8:1946", 80, 0, 0)),
        (socket.AF_INET6, ("fe80::1", 80, 0, 0)),
    ],
)
def test_connect_and_connect_ex_are_both_refused(
    net: LoopbackNet, family: int, address: tuple[Any, ...]
) -> None:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        with pytest.raises(NonLoopbackDial):
            sock.connect(address)
        with pytest.raises(NonLoopbackDial):
            sock.connect_ex(address)
    assert len(net.refused) == 2


def test_a_real_dns_lookup_is_refused_and_recorded(net: LoopbackNet) -> None:
    with pytest.raises(NonLoopbackDial, match=r"DNS lookup of 'example\.com'"):
        socket.getaddrinfo("example.com", 80)
    with pytest.raises(NonLoopbackDial):
        socket.getaddrinfo(b"api.test", 443)
    with pytest.raises(NonLoopbackDial):
        socket.create_connection(("localhost.example.com", 80), timeout=1)
    assert net.refused == [
        "a DNS lookup of 'example.com'",
        "a DNS lookup of 'api.test'",
        "a DNS lookup of 'localhost.example.com'",
    ]


def test_loopback_connections_and_localhost_lookups_work(
    net: LoopbackNet, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    with socket.create_connection(("localhost", port), timeout=1):
        pass
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) == 0
    found = socket.getaddrinfo("localhost", port, type=socket.SOCK_STREAM)
    assert {item[4][0] for item in found} <= {"127.0.0.1", "::1"}
    assert socket.getaddrinfo("127.0.0.1", port)[0][4][0] == "127.0.0.1"
    assert net.refused == []


def test_every_loopback_address_counts(net: LoopbackNet) -> None:
    server = socket.socket()
    server.bind(("127.0.0.2", 0))
    server.listen(1)
    try:
        with socket.create_connection(server.getsockname(), timeout=1):
            pass
    finally:
        server.close()
    assert net.refused == []


def test_leaving_the_net_removes_its_patches() -> None:
    before = patches()
    with loopback_only() as inner:
        assert patches() != before
    assert all(a is b for a, b in zip(before, patches(), strict=True))
    assert inner.refused == []


def test_the_patches_are_removed_when_the_body_raises() -> None:
    before = patches()
    with pytest.raises(RuntimeError), loopback_only():
        raise RuntimeError("boom")
    assert all(a is b for a, b in zip(before, patches(), strict=True))


def test_the_fixture_fails_a_test_that_tried_to_leave(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        textwrap.dedent(
            """
            import socket

            import pytest


            def test_dials_out(loopback_only):
                with pytest.raises(ConnectionRefusedError):
                    socket.create_connection(("93.184.216.34", 80), timeout=1)


            def test_stays_home(loopback_only):
                socket.getaddrinfo("localhost", 80)
            """
        )
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*the test tried to leave the machine*93.184.216.34*"])


def test_static_lookup_answers_only_its_names_in_turn() -> None:
    lookup = StaticLookup({"Rebind.test": [["127.0.0.2"], ["127.0.0.1"]], "one.test": ["::1"]})
    assert list(lookup("rebind.test", 80)) == ["127.0.0.2"]
    assert list(lookup("REBIND.TEST", 80)) == ["127.0.0.1"]
    assert list(lookup("rebind.test", 80)) == ["127.0.0.1"]
    assert list(lookup("one.test", 80)) == ["::1"]
    assert lookup.calls == {"rebind.test": 3, "one.test": 1}
    with pytest.raises(socket.gaierror, match=r"no answer for 'other\.test'"):
        lookup("other.test", 80)
    assert list(StaticLookup({"empty.test": []})("empty.test", 80)) == []
