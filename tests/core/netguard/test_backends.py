"""The pinning backends and guarded clients of both HTTP stacks (httpx over httpcore, httpx2
over httpcore2), against real servers on 127.0.0.1 and 127.0.0.2.

Every test runs in the loopback-only test net and resolves names only through a
``StaticLookup``: a wrong guard reaches at worst another loopback server, never the world.
"""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from core.netguard.conftest import Stack
from core.netguard.servers import (
    AsyncRecordingBackend,
    EchoServer,
    RecordingBackend,
    pair_on_one_port,
)
from expediter.core.netguard import EgressBlocked, EgressPolicy, Resolver, address_problem
from expediter.testing.network import StaticLookup

pytestmark = pytest.mark.usefixtures("loopback_only")

GENERIC = "blocked by egress policy"


def policy_for(
    answers: dict[str, Any] | StaticLookup | None = None,
    allow: tuple[str, ...] = (),
    **options: Any,
) -> EgressPolicy:
    """A policy allowing ``allow`` whose names resolve only through ``answers``."""
    lookup = answers if isinstance(answers, StaticLookup) else StaticLookup(answers or {})
    ttl = options.pop("ttl", 30.0)
    return EgressPolicy(allow_networks=allow, resolver=Resolver(lookup=lookup, ttl=ttl), **options)


def auto_backend(core: Any) -> Any:
    """The engine's own async backend (httpcore2 does not export ``AutoBackend``)."""
    found = getattr(core, "AutoBackend", None)
    if found is None:
        found = importlib.import_module(f"{core.__name__}._backends.auto").AutoBackend
    return found()


def recording(stack: Stack) -> RecordingBackend:
    return RecordingBackend(stack.core.SyncBackend())


def async_recording(stack: Stack) -> AsyncRecordingBackend:
    return AsyncRecordingBackend(auto_backend(stack.core))


def get_async(stack: Stack, policy: EgressPolicy, url: str, **options: Any) -> Any:
    """GET ``url`` with the stack's guarded async client (``options`` to the client)."""
    headers = options.pop("headers", None)

    async def main() -> Any:
        async with stack.guard.async_client(policy, **options) as client:
            return await client.get(url, headers=headers)

    return asyncio.run(main())


# --- the backend is used --------------------------------------------------------------------


def test_the_sync_client_dials_the_checked_address_not_the_name(
    stack: Stack, server: EchoServer
) -> None:
    policy = policy_for({"api.test": ["127.0.0.1"]}, allow=("127.0.0.0/8",))
    inner = recording(stack)
    with stack.guard.client(policy, inner=inner) as client:
        assert client.trust_env is False
        response = client.get(f"http://api.test:{server.port}/path")
    assert response.status_code == 200
    assert response.json() == {
        "host": f"api.test:{server.port}",
        "local": ["127.0.0.1", server.port],
        "sni": None,
    }
    assert inner.dialed == [("127.0.0.1", server.port)]
    assert [seen.target for seen in server.seen] == ["/path"]


def test_the_async_client_dials_the_checked_address_not_the_name(
    stack: Stack, server: EchoServer
) -> None:
    policy = policy_for({"api.test": ["127.0.0.1"]}, allow=("127.0.0.0/8",))
    inner = async_recording(stack)
    response = get_async(stack, policy, f"http://api.test:{server.port}/", inner=inner)
    assert response.status_code == 200
    assert response.json()["host"] == f"api.test:{server.port}"
    assert inner.dialed == [("127.0.0.1", server.port)]


def test_keep_alive_reuses_the_checked_connection(stack: Stack, server: EchoServer) -> None:
    lookup = StaticLookup({"api.test": ["127.0.0.1"]})
    policy = policy_for(lookup, allow=("127.0.0.0/8",))
    inner = recording(stack)
    with stack.guard.client(policy, inner=inner) as client:
        for _ in range(3):
            assert client.get(f"http://api.test:{server.port}/").status_code == 200
    assert inner.dialed == [("127.0.0.1", server.port)]
    assert server.connections == 1
    assert lookup.calls == {"api.test": 1}


def test_the_async_client_works_with_its_default_backend(stack: Stack, server: EchoServer) -> None:
    """Regression: httpcore2 exports no ``AutoBackend``; the default must exist in both."""
    policy = policy_for(allow=("127.0.0.0/8",))
    response = get_async(stack, policy, f"{server.url}/")
    assert response.status_code == 200
    assert server.seen


def test_the_sync_client_works_with_its_default_backend(stack: Stack, server: EchoServer) -> None:
    with stack.guard.client(policy_for(allow=("127.0.0.0/8",))) as client:
        assert client.get(f"{server.url}/").json()["local"] == ["127.0.0.1", server.port]


# --- environment proxies --------------------------------------------------------------------


@pytest.fixture
def proxy_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[EchoServer]:
    """A recording server on 127.0.0.2 named by every proxy variable."""
    proxy = EchoServer("127.0.0.2")
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, proxy.url)
        monkeypatch.setenv(name.lower(), proxy.url)
    yield proxy
    proxy.close()


def test_proxy_variables_would_redirect_a_plain_client(
    stack: Stack, server: EchoServer, proxy_environment: EchoServer
) -> None:
    """The control: the variables do send an ordinary client to the recording proxy."""
    with stack.http.Client() as plain:
        plain.get(f"{server.url}/")
    assert [seen.target for seen in proxy_environment.seen] == [f"{server.url}/"]
    assert not server.seen


def test_the_guarded_clients_ignore_proxy_variables(
    stack: Stack, server: EchoServer, proxy_environment: EchoServer
) -> None:
    policy = policy_for(allow=("127.0.0.0/8",))
    with stack.guard.client(policy, inner=recording(stack)) as client:
        assert client.get(f"{server.url}/").status_code == 200
    assert get_async(stack, policy, f"{server.url}/", inner=async_recording(stack)).is_success
    assert len(server.seen) == 2
    assert proxy_environment.seen == []
    assert proxy_environment.connections == 0


# --- DNS rebinding --------------------------------------------------------------------------


@pytest.fixture
def rebinding_pair() -> Iterator[tuple[EchoServer, EchoServer]]:
    """``(allowed, forbidden)``: servers on 127.0.0.2 and 127.0.0.1, same port."""
    allowed, forbidden = pair_on_one_port("127.0.0.2", "127.0.0.1")
    yield allowed, forbidden
    allowed.close()
    forbidden.close()


def rebinding_lookup() -> StaticLookup:
    return StaticLookup({"rebind.test": [["127.0.0.2"], ["127.0.0.1"]]})


def test_rebinding_never_reaches_the_forbidden_address(
    stack: Stack, rebinding_pair: tuple[EchoServer, EchoServer]
) -> None:
    allowed, forbidden = rebinding_pair
    lookup = rebinding_lookup()
    policy = policy_for(lookup, allow=("127.0.0.2/32",), ttl=0)
    url = f"http://rebind.test:{allowed.port}/"
    outcomes = []
    reasons: list[str] = []
    with stack.guard.client(policy, inner=recording(stack)) as client:
        for _ in range(4):
            try:
                response = client.get(url, headers={"Connection": "close"})
            except EgressBlocked as exc:
                reasons.append(exc.reason)
                outcomes.append("blocked")
            else:
                assert response.json()["local"] == ["127.0.0.2", allowed.port]
                outcomes.append("allowed")
    # fresh clients too
    for _ in range(2):
        with stack.guard.client(policy) as client, pytest.raises(EgressBlocked):
            client.get(url)
    assert outcomes == ["allowed", "blocked", "blocked", "blocked"]
    assert all("'rebind.test' -> 127.0.0.1" in reason for reason in reasons), reasons
    assert lookup.calls["rebind.test"] >= 6
    assert forbidden.seen == []
    assert forbidden.connections == 0


def test_rebinding_never_reaches_the_forbidden_address_async(
    stack: Stack, rebinding_pair: tuple[EchoServer, EchoServer]
) -> None:
    allowed, forbidden = rebinding_pair
    policy = policy_for(rebinding_lookup(), allow=("127.0.0.2/32",), ttl=0)
    url = f"http://rebind.test:{allowed.port}/"

    async def main() -> list[str]:
        outcomes = []
        async with stack.guard.async_client(policy, inner=async_recording(stack)) as client:
            for _ in range(3):
                try:
                    await client.get(url, headers={"Connection": "close"})
                except EgressBlocked:
                    outcomes.append("blocked")
                else:
                    outcomes.append("allowed")
        return outcomes

    assert asyncio.run(main()) == ["allowed", "blocked", "blocked"]
    assert len(allowed.seen) == 1
    assert forbidden.connections == 0


def test_naive_check_then_fetch_is_rebound_to_the_forbidden_address(
    stack: Stack, rebinding_pair: tuple[EchoServer, EchoServer]
) -> None:
    """The baseline the guard exists for: validate the name's address, then let the client
    resolve it again. The second answer is the forbidden one, and the fetch reaches it."""
    allowed, forbidden = rebinding_pair
    lookup = rebinding_lookup()
    allow = (ipaddress.ip_network("127.0.0.2/32"),)
    url = f"http://rebind.test:{allowed.port}/"
    current = socket.getaddrinfo  # the test net's

    def rebinding_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "rebind.test":
            return [
                (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, int(port)))
                for address in lookup(host, int(port))
            ]
        return current(host, port, *args, **kwargs)

    def naive_fetch() -> Any:
        parts = urllib.parse.urlsplit(url)
        for address in lookup(parts.hostname or "", parts.port or 80):
            problem = address_problem(ipaddress.ip_address(address), allow)
            if problem is not None:
                raise EgressBlocked(problem)
        with stack.http.Client(trust_env=False) as plain:
            return plain.get(url, headers={"Connection": "close"})

    with mock.patch.object(socket, "getaddrinfo", rebinding_getaddrinfo):
        response = naive_fetch()
    assert response.json()["local"] == ["127.0.0.1", forbidden.port]
    assert len(forbidden.seen) == 1, "the baseline keeps the property; the test proves nothing"
    assert allowed.seen == []


# --- mixed records --------------------------------------------------------------------------


def test_mixed_records_are_blocked_before_any_connection(
    stack: Stack, rebinding_pair: tuple[EchoServer, EchoServer]
) -> None:
    allowed, forbidden = rebinding_pair
    policy = policy_for({"mixed.test": ["127.0.0.2", "127.0.0.1"]}, allow=("127.0.0.2/32",))
    inner = recording(stack)
    with stack.guard.client(policy, inner=inner) as client, pytest.raises(EgressBlocked) as caught:
        client.get(f"http://mixed.test:{allowed.port}/")
    assert "127.0.0.1 is in 127.0.0.0/8" in caught.value.reason
    async_inner = async_recording(stack)
    with pytest.raises(EgressBlocked):
        get_async(stack, policy, f"http://mixed.test:{allowed.port}/", inner=async_inner)
    assert inner.dialed == async_inner.dialed == []
    assert allowed.connections == forbidden.connections == 0


# --- TLS: the name is verified and sent, the checked address is dialed ----------------------


def test_sni_host_and_certificate_keep_the_name(
    stack: Stack, tls_server: EchoServer, ca_file: Path
) -> None:
    policy = policy_for({"api.test": ["127.0.0.1"]}, allow=("127.0.0.0/8",))
    inner = recording(stack)
    verify = ssl.create_default_context(cafile=str(ca_file))
    with stack.guard.client(policy, verify=verify, inner=inner) as client:
        response = client.get(f"https://api.test:{tls_server.port}/")
    assert response.json() == {
        "host": f"api.test:{tls_server.port}",
        "local": ["127.0.0.1", tls_server.port],
        "sni": "api.test",
    }
    assert inner.dialed == [("127.0.0.1", tls_server.port)]
    assert [(seen.sni, seen.host) for seen in tls_server.seen] == [
        ("api.test", f"api.test:{tls_server.port}")
    ]


def test_sni_host_and_certificate_keep_the_name_async(
    stack: Stack, tls_server: EchoServer, ca_file: Path
) -> None:
    policy = policy_for({"api.test": ["127.0.0.1"]}, allow=("127.0.0.0/8",))
    verify = ssl.create_default_context(cafile=str(ca_file))
    response = get_async(
        stack,
        policy,
        f"https://api.test:{tls_server.port}/",
        verify=verify,
        inner=async_recording(stack),
    )
    assert response.json()["sni"] == "api.test"
    assert response.json()["host"] == f"api.test:{tls_server.port}"


def test_a_certificate_for_another_name_fails_verification(
    stack: Stack, wrong_tls_server: EchoServer, ca_file: Path
) -> None:
    policy = policy_for({"api.test": ["127.0.0.1"]}, allow=("127.0.0.0/8",))
    verify = ssl.create_default_context(cafile=str(ca_file))
    with (
        stack.guard.client(policy, verify=verify) as client,
        pytest.raises(stack.http.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        client.get(f"https://api.test:{wrong_tls_server.port}/")
    assert wrong_tls_server.seen == []


def test_the_address_is_not_what_is_verified(
    stack: Stack, tls_server: EchoServer, ca_file: Path
) -> None:
    """The server's certificate names api.test only: asking for its address fails, though the
    same socket address served api.test above."""
    policy = policy_for(allow=("127.0.0.0/8",))
    verify = ssl.create_default_context(cafile=str(ca_file))
    with (
        stack.guard.client(policy, verify=verify) as client,
        pytest.raises(stack.http.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        client.get(f"https://127.0.0.1:{tls_server.port}/")
    assert tls_server.seen == []


# --- refusals -------------------------------------------------------------------------------

BLOCKED = [
    ("http://127.0.0.1:{port}/", "127.0.0.1 is in 127.0.0.0/8"),
    ("http://2130706433:{port}/", "127.0.0.1 is in 127.0.0.0/8"),
    ("http://0x7f.1:{port}/", "127.0.0.1 is in 127.0.0.0/8"),
    ("http://127.1:{port}/", "127.0.0.1 is in 127.0.0.0/8"),
    ("http://[::ffff:127.0.0.1]:{port}/", "::ffff:0:0/96"),
    ("http://[::1]:{port}/", "::1/128"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.0.0/16"),
    ("http://[fd00:ec2::254]/", "fc00::/7"),
    ("http://local.test:{port}/", "'local.test' -> 127.0.0.1"),
    ("http://LOCAL.test:{port}/", "127.0.0.1"),
    ("http://nowhere.test:{port}/", "no answer for 'nowhere.test'"),
    # what a client dials for a confusing URL is checked, whatever it made of the URL
    ("http://evil.test@127.0.0.1:{port}/", "127.0.0.1 is in 127.0.0.0/8"),
    ("http://127.0.0.1:{port}#@good.test/", "127.0.0.1 is in 127.0.0.0/8"),
    ("http://good.test\\@127.0.0.1:{port}/", "127.0.0.1 is in 127.0.0.0/8"),
    ("http://127.0.0.1:{port}@good.test/", "'good.test' -> 127.0.0.1"),
]


@pytest.mark.parametrize(("template", "mention"), BLOCKED)
def test_a_blocked_target_raises_egress_blocked_and_dials_nothing(
    stack: Stack, server: EchoServer, template: str, mention: str
) -> None:
    url = template.format(port=server.port)
    policy = policy_for({"local.test": ["127.0.0.1"], "good.test": ["127.0.0.1"]})
    inner = recording(stack)
    with (
        stack.guard.client(policy, inner=inner, timeout=5) as client,
        pytest.raises(EgressBlocked) as caught,
    ):
        client.get(url)
    assert str(caught.value) == GENERIC
    assert mention in caught.value.reason
    async_inner = async_recording(stack)
    with pytest.raises(EgressBlocked):
        get_async(stack, policy, url, inner=async_inner, timeout=5)
    assert inner.dialed == async_inner.dialed == []
    assert server.connections == 0


def test_a_public_address_goes_through_to_the_network(stack: Stack, loopback_only: Any) -> None:
    """The guard lets a public address through: the refusal comes from the test net, which
    refuses before any packet leaves."""
    policy = policy_for({"public.test": ["93.184.216.34"]})
    inner = recording(stack)
    with (
        stack.guard.client(policy, inner=inner, timeout=2) as client,
        pytest.raises(stack.http.ConnectError, match="test net"),
    ):
        client.get("http://public.test/")
    assert inner.dialed == [("93.184.216.34", 80)]
    assert len(loopback_only.refused) == 1
    assert "93.184.216.34" in loopback_only.refused[0]
    loopback_only.refused.clear()


# --- slow names, cached names, unix sockets -------------------------------------------------


@pytest.fixture
def stuck() -> Iterator[threading.Event]:
    release = threading.Event()
    yield release
    release.set()


def test_a_slow_lookup_is_blocked_quickly(stack: Stack, stuck: threading.Event) -> None:
    def slow(host: str, port: int) -> list[str]:
        stuck.wait(30)
        return ["127.0.0.1"]

    policy = EgressPolicy(
        allow_networks=["127.0.0.0/8"], resolve_timeout=0.2, resolver=Resolver(lookup=slow)
    )
    started = time.monotonic()
    with (
        stack.guard.client(policy, inner=recording(stack)) as client,
        pytest.raises(EgressBlocked, match="policy") as caught,
    ):
        client.get("http://slow.test/")
    assert "took longer than" in caught.value.reason
    with pytest.raises(EgressBlocked):
        get_async(stack, policy, "http://slow.test/", inner=async_recording(stack))
    assert time.monotonic() - started < 5.0


def test_a_cached_answer_is_checked_again_for_each_policy(stack: Stack, server: EchoServer) -> None:
    lookup = StaticLookup({"api.test": ["127.0.0.1"]})
    shared = Resolver(lookup=lookup)
    allowing = EgressPolicy(allow_networks=["127.0.0.0/8"], resolver=shared)
    default = EgressPolicy(resolver=shared)
    url = f"http://api.test:{server.port}/"
    assert get_async(stack, allowing, url, inner=async_recording(stack)).is_success
    assert shared.cached("api.test") == ("127.0.0.1",)
    with pytest.raises(EgressBlocked):
        get_async(stack, default, url, inner=async_recording(stack))
    with (
        stack.guard.client(default, inner=recording(stack)) as client,
        pytest.raises(EgressBlocked),
    ):
        client.get(url)
    assert lookup.calls == {"api.test": 1}
    assert len(server.seen) == 1


def test_unix_sockets_are_refused(stack: Stack, tmp_path: Path) -> None:
    policy = policy_for(allow=("127.0.0.0/8",))
    with pytest.raises(stack.core.ConnectError, match="no unix sockets"):
        stack.guard.PinningBackend(policy).connect_unix_socket(str(tmp_path / "s"))
    backend = stack.guard.AsyncPinningBackend(policy, inner=auto_backend(stack.core))
    with pytest.raises(stack.core.ConnectError, match="no unix sockets"):
        asyncio.run(backend.connect_unix_socket(str(tmp_path / "s")))


# --- options that would route around the guard ---------------------------------------------


@pytest.mark.parametrize("option", ["proxy", "mounts"])
def test_client_options_cannot_route_around_the_guard(
    stack: Stack, server: EchoServer, other_server: EchoServer, option: str
) -> None:
    """The policy allows nothing private; a 'proxy' on 127.0.0.2 (a recorder, it forwards
    nothing) must not be dialed either."""
    if option == "proxy":
        options: dict[str, Any] = {"proxy": other_server.url}
    else:
        options = {"mounts": {"all://": stack.http.HTTPTransport(proxy=other_server.url)}}
    try:
        with stack.guard.client(policy_for(), **options) as client:
            client.get(f"{server.url}/")
    except (EgressBlocked, TypeError, ValueError):
        pass
    assert other_server.connections == 0
    assert server.connections == 0
