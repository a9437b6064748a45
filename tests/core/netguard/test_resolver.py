"""The resolver: answers kept for a fixed time, per host whatever its case, lookups with a
deadline, failures refused and never cached; and the policy checks a cached answer again on
every call. Names resolve only through injected lookups."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from expediter.core.netguard import DEFAULT_TTL, EgressBlocked, EgressPolicy, Resolver
from expediter.testing.network import StaticLookup

pytestmark = pytest.mark.usefixtures("loopback_only")

PUBLIC = "93.184.216.34"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_default_ttl_is_thirty_seconds() -> None:
    assert DEFAULT_TTL == 30.0
    assert Resolver(lookup=StaticLookup({})).ttl == 30.0


def test_an_answer_is_reused_within_its_ttl_and_resolved_again_after() -> None:
    lookup = StaticLookup({"api.test": [["93.184.216.34"], ["93.184.216.35"]]})
    clock = Clock()
    resolver = Resolver(lookup=lookup, clock=clock)
    assert resolver.resolve("api.test", 443) == ("93.184.216.34",)
    clock.now += 29.9
    assert resolver.resolve("api.test", 443) == ("93.184.216.34",)
    assert resolver.cached("api.test") == ("93.184.216.34",)
    assert lookup.calls == {"api.test": 1}
    clock.now += 0.2
    assert resolver.cached("api.test") is None
    assert resolver.resolve("api.test", 443) == ("93.184.216.35",)
    assert lookup.calls == {"api.test": 2}


def test_a_zero_ttl_resolves_every_time() -> None:
    lookup = StaticLookup({"api.test": [PUBLIC]})
    resolver = Resolver(lookup=lookup, ttl=0)
    for _ in range(3):
        assert resolver.resolve("api.test", 80) == (PUBLIC,)
    assert lookup.calls == {"api.test": 3}


def test_the_cache_is_per_host_whatever_its_case() -> None:
    lookup = StaticLookup({"api.test": [PUBLIC], "other.test": ["1.1.1.1"]})
    resolver = Resolver(lookup=lookup, clock=Clock())
    assert resolver.resolve("API.test", 80) == (PUBLIC,)
    assert resolver.resolve("api.TEST", 443) == (PUBLIC,)
    assert resolver.cached("Api.Test") == (PUBLIC,)
    assert resolver.resolve("other.test", 80) == ("1.1.1.1",)
    assert lookup.calls == {"api.test": 1, "other.test": 1}


def test_repeated_addresses_are_given_once_in_order() -> None:
    resolver = Resolver(lookup=StaticLookup({"a.test": ["1.1.1.1", "8.8.8.8", "1.1.1.1"]}))
    assert resolver.resolve("a.test", 80) == ("1.1.1.1", "8.8.8.8")


def test_clear_forgets_answers() -> None:
    lookup = StaticLookup({"a.test": [PUBLIC]})
    resolver = Resolver(lookup=lookup, clock=Clock())
    resolver.resolve("a.test", 80)
    resolver.clear()
    assert resolver.cached("a.test") is None
    resolver.resolve("a.test", 80)
    assert lookup.calls == {"a.test": 2}


@pytest.fixture
def stuck() -> Iterator[threading.Event]:
    """An event a slow lookup waits on; set at teardown so the lookup's thread finishes."""
    release = threading.Event()
    yield release
    release.set()


def test_a_lookup_past_its_deadline_is_blocked_quickly(stuck: threading.Event) -> None:
    def slow(host: str, port: int) -> list[str]:
        stuck.wait(30)
        return [PUBLIC]

    policy = EgressPolicy(resolve_timeout=0.2, resolver=Resolver(lookup=slow))
    started = time.monotonic()
    with pytest.raises(EgressBlocked) as caught:
        policy.addresses("slow.test", 80)
    assert time.monotonic() - started < 2.0
    assert "took longer than 0.2 s" in caught.value.reason
    assert "'slow.test'" in caught.value.reason
    assert str(caught.value) == "blocked by egress policy"
    # a caller's shorter timeout wins over the policy's
    policy = EgressPolicy(resolve_timeout=10.0, resolver=Resolver(lookup=slow))
    started = time.monotonic()
    with pytest.raises(EgressBlocked, match="policy"):
        policy.addresses("slow.test", 80, timeout=0.1)
    assert time.monotonic() - started < 2.0


def test_a_failing_lookup_is_blocked_with_its_reason() -> None:
    policy = EgressPolicy(resolver=Resolver(lookup=StaticLookup({})))
    with pytest.raises(EgressBlocked) as caught:
        policy.addresses("missing.test", 443)
    assert "resolving 'missing.test' failed" in caught.value.reason
    assert "no answer for 'missing.test'" in caught.value.reason
    assert str(caught.value) == "blocked by egress policy"


@pytest.mark.parametrize(
    "error",
    [
        socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution"),
        UnicodeError("label too long"),
        OSError("resolver exploded"),
    ],
)
def test_any_lookup_error_is_blocked(error: Exception) -> None:
    def failing(host: str, port: int) -> list[str]:
        raise error

    with pytest.raises(EgressBlocked) as caught:
        Resolver(lookup=failing).resolve("bad.test", 80, timeout=5)
    assert str(error) in caught.value.reason


def test_an_empty_answer_is_no_address() -> None:
    lookup = StaticLookup({"empty.test": []})
    policy = EgressPolicy(resolver=Resolver(lookup=lookup, clock=Clock()))
    assert policy.resolver.resolve("empty.test", 80) == ()
    with pytest.raises(EgressBlocked) as caught:
        policy.addresses("empty.test", 80)
    assert "'empty.test' resolves to no address" in caught.value.reason


def test_failures_and_empty_answers_are_not_cached() -> None:
    turns = iter([socket.gaierror(socket.EAI_AGAIN, "try again"), [], [PUBLIC]])
    calls = []

    def flaky(host: str, port: int) -> list[str]:
        calls.append(host)
        answer = next(turns)
        if isinstance(answer, Exception):
            raise answer
        return answer

    policy = EgressPolicy(resolver=Resolver(lookup=flaky, clock=Clock()))
    with pytest.raises(EgressBlocked, match="policy"):
        policy.addresses("flaky.test", 80)
    with pytest.raises(EgressBlocked, match="policy"):
        policy.addresses("flaky.test", 80)
    assert policy.addresses("flaky.test", 80) == (PUBLIC,)
    assert policy.addresses("flaky.test", 80) == (PUBLIC,)
    assert len(calls) == 3


def test_a_cached_answer_is_checked_again_by_every_policy_on_every_call() -> None:
    lookup = StaticLookup({"internal.test": ["10.1.2.3"]})
    shared = Resolver(lookup=lookup, clock=Clock())
    operator = EgressPolicy(allow_networks=["10.0.0.0/8"], resolver=shared)
    default = EgressPolicy(resolver=shared)
    assert operator.addresses("internal.test", 80) == ("10.1.2.3",)
    assert shared.cached("internal.test") == ("10.1.2.3",)
    with pytest.raises(EgressBlocked) as caught:
        default.addresses("internal.test", 80)
    assert "10.0.0.0/8" in caught.value.reason
    assert operator.addresses("internal.test", 80) == ("10.1.2.3",)
    with pytest.raises(EgressBlocked):
        default.addresses("internal.test", 80)
    assert lookup.calls == {"internal.test": 1}


def test_a_cached_answer_is_checked_against_a_changed_policy() -> None:
    lookup = StaticLookup({"internal.test": ["10.1.2.3"]})
    shared = Resolver(lookup=lookup, clock=Clock())
    policy = EgressPolicy(resolver=shared).with_networks(["10.0.0.0/8"])
    assert policy.addresses("internal.test", 80) == ("10.1.2.3",)
    narrower = EgressPolicy(allow_networks=["10.9.0.0/16"], resolver=shared)
    with pytest.raises(EgressBlocked):
        narrower.addresses("internal.test", 80)
    assert lookup.calls == {"internal.test": 1}


def test_the_lookup_gets_the_lowercased_name_and_port() -> None:
    seen: list[tuple[str, int]] = []

    def recording(host: str, port: int) -> list[str]:
        seen.append((host, port))
        return [PUBLIC]

    Resolver(lookup=recording).resolve("API.Example.TEST", 8443)
    assert seen == [("api.example.test", 8443)]


def test_callers_asking_for_one_name_share_one_lookup() -> None:
    release = threading.Event()
    calls: list[str] = []

    def slow(host: str, port: int) -> list[str]:
        calls.append(host)
        release.wait(5)
        return ["93.184.216.34"]

    resolver = Resolver(slow)
    results: list[tuple[str, ...]] = []
    threads = [
        threading.Thread(target=lambda: results.append(resolver.resolve("a.test", 80, 5)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    release.set()
    for thread in threads:
        thread.join(5)
    assert calls == ["a.test"]
    assert results == [("93.184.216.34",)] * 4


def test_a_client_given_no_owner_is_its_own_owner() -> None:
    """A policy built without an owner counts its lookups against itself alone (the owner
    rules are in test_resolver_fairness.py)."""
    from expediter.core.netguard.resolver import OWNER_LOOKUP_THREADS

    release = threading.Event()

    def hang(host: str, port: int) -> list[str]:
        if host.startswith("hang"):
            release.wait(10)
        return ["93.184.216.34"]

    resolver = Resolver(hang)
    greedy = EgressPolicy(resolver=resolver, resolve_timeout=5)

    def resolve(name: str) -> None:
        with contextlib.suppress(EgressBlocked):  # answered at release
            greedy.addresses(name, 80)

    stuck = [
        threading.Thread(target=resolve, args=(f"hang{n}.test",))
        for n in range(OWNER_LOOKUP_THREADS)
    ]
    try:
        for thread in stuck:
            thread.start()
        impatient = EgressPolicy(resolver=resolver, resolve_timeout=0.2)
        assert impatient.owner is None
        for _ in range(500):
            if resolver.threads == OWNER_LOOKUP_THREADS:
                break
            time.sleep(0.01)
        # The greedy client's next name waits for one of its own lookups, in vain ...
        with pytest.raises(EgressBlocked) as refused:
            greedy.addresses("hang-more.test", 80, timeout=0.2)
        assert f"already has {OWNER_LOOKUP_THREADS} lookups" in refused.value.reason
        # ... while another client (another policy) still resolves.
        assert impatient.addresses("fine.test", 80) == ("93.184.216.34",)
    finally:
        release.set()
        for thread in stuck:
            thread.join(10)
