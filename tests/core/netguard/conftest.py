"""Fixtures of the egress guard's tests: the two HTTP stacks, loopback echo servers and a
test certificate authority. Every test module here runs in the loopback-only test net."""

from __future__ import annotations

import importlib
import ssl
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest

from core.netguard.servers import EchoServer


@attrs.frozen
class Stack:
    """One HTTP stack: the guard's module for it, the client library and its engine."""

    guard: ModuleType
    http: ModuleType
    core: ModuleType

    @property
    def name(self) -> str:
        return self.http.__name__


STACKS = [
    ("expediter.core.netguard.for_httpx", "httpx", "httpcore"),
    ("expediter.core.netguard.for_httpx2", "httpx2", "httpcore2"),
]


@pytest.fixture(params=STACKS, ids=[http for _, http, _ in STACKS])
def stack(request: pytest.FixtureRequest) -> Stack:
    """Each stack in turn (skipped when its client library is not installed)."""
    guard, http, core = request.param
    pytest.importorskip(http)
    return Stack(
        guard=importlib.import_module(guard),
        http=importlib.import_module(http),
        core=importlib.import_module(core),
    )


@pytest.fixture
def server() -> Iterator[EchoServer]:
    """An echo server on 127.0.0.1."""
    running = EchoServer("127.0.0.1")
    yield running
    running.close()


@pytest.fixture
def other_server() -> Iterator[EchoServer]:
    """An echo server on 127.0.0.2 (another loopback address, same machine)."""
    running = EchoServer("127.0.0.2")
    yield running
    running.close()


@pytest.fixture(scope="session")
def test_ca() -> Any:
    trustme = pytest.importorskip("trustme")
    return trustme.CA()


@pytest.fixture
def ca_file(test_ca: Any, tmp_path: Path) -> Path:
    """The test CA's certificate as a PEM file."""
    path = tmp_path / "ca.pem"
    test_ca.cert_pem.write_to_path(str(path))
    return path


def tls_context(test_ca: Any, *names: str) -> ssl.SSLContext:
    """A server context with a certificate from ``test_ca`` for ``names``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    test_ca.issue_cert(*names).configure_cert(context)
    return context


@pytest.fixture
def tls_server(test_ca: Any) -> Iterator[EchoServer]:
    """An HTTPS echo server on 127.0.0.1 with a certificate for ``api.test`` only."""
    running = EchoServer("127.0.0.1", tls=tls_context(test_ca, "api.test"))
    yield running
    running.close()


@pytest.fixture
def wrong_tls_server(test_ca: Any) -> Iterator[EchoServer]:
    """An HTTPS echo server on 127.0.0.1 with a certificate for ``other.test`` only."""
    running = EchoServer("127.0.0.1", tls=tls_context(test_ca, "other.test"))
    yield running
    running.close()
