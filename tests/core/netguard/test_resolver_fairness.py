"""One owner's names that never answer cannot stop another owner's lookups (issue 22, item 3).

Each tool instance's policy names the owner its lookups count against
(``EgressPolicy.owner_of(context)``: the instance's owner, or a shared instance itself). An owner
has a few lookups running at once and keeps each until its thread really ends, not until its
caller's deadline; total lookup threads are capped well above one owner's share.

A name that never answers cannot be made on a loopback-only machine, so ``Gate`` stands in for
``getaddrinfo`` (the resolver's ``lookup`` hook): every name under ``stuck.test`` blocks until the
test releases it (then fails as the system resolver does when it gives up), ``localhost`` goes to
the real system resolver, and names under ``ok.test`` answer 127.0.0.1. Only loopback is dialed.
No test measures speed: progress is awaited on conditions, with deadlines far from the waits.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from core.netguard.conftest import Stack
from core.netguard.servers import EchoServer
from expediter import CallContext
from expediter.core.netguard import EgressBlocked, EgressPolicy, Resolver, system_lookup
from expediter.core.netguard.resolver import LOOKUP_THREADS, OWNER_LOOKUP_THREADS

pytestmark = pytest.mark.usefixtures("loopback_only")

#: What the test servers and ``localhost`` resolve to (``localhost`` may give ::1 too).
LOOPBACK = ("127.0.0.0/8", "::1/128")
#: How long any wait of a test for progress may take before the test fails.
PATIENCE = 20.0


class Gate:
    """A ``getaddrinfo`` stand-in: names under ``stuck.test`` never answer until released."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._freed: set[str] = set()
        self._all_free = False
        #: Lookups of stuck names inside the stand-in now, and the most there ever were.
        self.inside = 0
        self.peak = 0
        #: Every name asked for, in order.
        self.asked: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        with self._changed:
            self.asked.append(host)
        if host == "localhost":
            return system_lookup(host, port)
        if not host.endswith(".stuck.test"):
            return ["127.0.0.1"]
        with self._changed:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
            self._changed.notify_all()
            try:
                self._changed.wait_for(lambda: self._all_free or host in self._freed)
            finally:
                self.inside -= 1
                self._changed.notify_all()
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    def release(self, host: str | None = None) -> None:
        """Let ``host``'s lookups give up (every name's, and every later one's, when None)."""
        with self._changed:
            if host is None:
                self._all_free = True
            else:
                self._freed.add(host)
            self._changed.notify_all()

    def wait_until(self, condition: Callable[[], bool]) -> None:
        """Wait until ``condition`` holds (checked whenever a lookup enters or leaves, and
        every 50 ms for conditions on the resolver); fail the test after ``PATIENCE``."""
        with self._changed:
            for _ in range(int(PATIENCE / 0.05)):
                if condition():
                    return
                self._changed.wait(0.05)
        pytest.fail("the condition did not come about")


@pytest.fixture
def gate() -> Iterator[Gate]:
    """The stand-in; at teardown every lookup is let go and its thread waited for."""
    found = Gate()
    yield found
    found.release()
    found.wait_until(lambda: found.inside == 0)


def policy(resolver: Resolver, owner: str | None, instance: str, timeout: float) -> EgressPolicy:
    """The policy of one tool instance, owned by ``owner`` (None: a shared instance), as the
    HTTP and MCP packs build it from the call's context."""
    context = CallContext(user_id="someone", owner_id=owner, instance_id=instance, tool="http")
    return EgressPolicy(
        allow_networks=LOOPBACK,
        resolve_timeout=timeout,
        resolver=resolver,
        owner=EgressPolicy.owner_of(context),
    )


def test_the_owner_is_the_instances_owner_and_a_shared_instance_is_its_own() -> None:
    def owner(**fields: Any) -> str | None:
        return EgressPolicy.owner_of(CallContext(**fields))

    # Two of alice's instances, whoever invokes them, are one owner.
    alice = owner(user_id="bob", owner_id="alice", instance_id="i1")
    assert alice == owner(user_id="carol", owner_id="alice", instance_id="i2")
    assert alice != owner(user_id="alice", owner_id="bob", instance_id="i1")
    # A shared instance (no owner) is its own owner, whoever invokes it.
    shared = owner(user_id="alice", owner_id=None, instance_id="shared-1")
    assert shared == owner(user_id="bob", owner_id=None, instance_id="shared-1")
    assert shared not in (alice, owner(user_id="alice", instance_id="shared-2"))
    # A user whose id looks like an instance is still that user.
    assert owner(owner_id="instance:shared-1", instance_id="x") != shared
    assert owner() is None
    # A policy built without an owner is its own.
    assert EgressPolicy().owner is None


def test_one_owner_flooding_names_that_never_answer_leaves_other_owners_resolving(
    stack: Stack, gate: Gate, server: EchoServer
) -> None:
    resolver = Resolver(gate, ttl=0)  # every call really resolves: no cached answer helps
    # Alice's twelve instances, three callers each, ask for new names that never answer for
    # longer than several deadlines (36 callers: more than the 32 shared threads there were).
    alice = [policy(resolver, "alice", f"alice-{n}", 0.3) for n in range(12)]
    calls = [0] * (3 * len(alice))
    refused: list[EgressBlocked] = []
    unexpected: list[BaseException] = []
    stop = threading.Event()

    def flood(mine: EgressPolicy, caller: int) -> None:
        with stack.guard.client(mine) as client:
            while not stop.is_set():
                try:
                    client.get(f"http://n{caller}-{calls[caller]}.stuck.test/")
                except EgressBlocked as exc:
                    refused.append(exc)
                except BaseException as exc:
                    unexpected.append(exc)
                calls[caller] += 1

    callers = [
        threading.Thread(target=flood, args=(alice[caller // 3], caller))
        for caller in range(len(calls))
    ]
    for thread in callers:
        thread.start()
    try:
        gate.wait_until(lambda: min(calls) >= 2)  # every caller is past two deadlines
        assert gate.inside == OWNER_LOOKUP_THREADS  # her stuck lookups still hold their slots
        assert resolver.running(alice[0].owner) == OWNER_LOOKUP_THREADS
        # Bob's instance reaches localhost, and 127.0.0.1 by another name, every time (a new
        # client each time: each connection resolves).
        bob = policy(resolver, "bob", "bob-1", 5.0)
        for n in range(3):
            with stack.guard.client(bob) as client:
                reached = client.get(f"http://localhost:{server.port}/")
                assert reached.json()["local"] == ["127.0.0.1", server.port]
                reached = client.get(f"http://b{n}.ok.test:{server.port}/")
                assert reached.json()["host"] == f"b{n}.ok.test:{server.port}"
        assert gate.asked.count("localhost") == 3
        # So does a shared instance, alice invoking it or not: it is its own owner.
        assert policy(resolver, None, "shared-1", 5.0).addresses("s.ok.test", 80) == ("127.0.0.1",)
        assert gate.inside == OWNER_LOOKUP_THREADS
    finally:
        stop.set()
        for thread in callers:
            thread.join(PATIENCE)
    assert not unexpected
    # Alice's calls each failed alone, with the guard's refusal; she never held more than
    # her share of lookups, and the threads stayed far under the cap.
    assert len(refused) == sum(calls)
    assert {str(exc) for exc in refused} == {"blocked by egress policy"}
    assert all(".stuck.test' " in exc.reason for exc in refused)
    assert all("took longer than 0.3 s" in exc.reason for exc in refused)
    assert gate.peak == OWNER_LOOKUP_THREADS
    assert resolver.threads <= OWNER_LOOKUP_THREADS < LOOKUP_THREADS


def test_stuck_lookups_count_against_their_owner_until_their_threads_end(
    gate: Gate, caplog: pytest.LogCaptureFixture
) -> None:
    resolver = Resolver(gate, ttl=0)
    alice = policy(resolver, "alice", "alice-1", 0.2)
    for n in range(OWNER_LOOKUP_THREADS):
        with pytest.raises(EgressBlocked) as caught:
            alice.addresses(f"n{n}.stuck.test", 443)
        assert str(caught.value) == "blocked by egress policy"
        assert f"resolving 'n{n}.stuck.test' took longer than 0.2 s" in caught.value.reason
    # Past their deadlines, her four lookups still run, and still count against her: a name
    # that would answer waits for one of them, from any of her instances, and is not asked.
    assert gate.inside == OWNER_LOOKUP_THREADS
    assert resolver.running(alice.owner) == OWNER_LOOKUP_THREADS
    other_instance = policy(resolver, "alice", "alice-2", 0.2)
    with (
        caplog.at_level(logging.WARNING, logger="expediter.netguard"),
        pytest.raises(EgressBlocked) as caught,
    ):
        other_instance.addresses("localhost", 80)
    assert str(caught.value) == "blocked by egress policy"
    assert caught.value.reason.startswith("resolving 'localhost' took longer than 0.2 s")
    assert f"{OWNER_LOOKUP_THREADS} lookups" in caught.value.reason
    # The operator's log says why.
    assert f"egress blocked: {caught.value.reason}" in caplog.messages
    assert "localhost" not in gate.asked
    # Bob is not waiting for anything of hers.
    bob = policy(resolver, "bob", "bob-1", 5.0)
    assert set(bob.addresses("localhost", 80)) <= {"127.0.0.1", "::1"}
    assert resolver.running(bob.owner) == 0
    # When one of her lookups really ends, its slot is hers again.
    gate.release("n0.stuck.test")
    patient = policy(resolver, "alice", "alice-3", 5.0)
    assert set(patient.addresses("localhost", 80)) <= {"127.0.0.1", "::1"}
    assert resolver.running(alice.owner) == OWNER_LOOKUP_THREADS - 1
    assert gate.inside == OWNER_LOOKUP_THREADS - 1


def test_lookup_threads_are_capped_and_a_freed_one_goes_to_the_owner_running_fewest(
    gate: Gate,
) -> None:
    # Small caps for the test: three owners' stuck lookups fill the process's threads.
    resolver = Resolver(gate, ttl=0, threads=6, threads_per_owner=2)
    owners = [policy(resolver, f"user{n}", f"instance-{n}", 30.0) for n in range(3)]
    outcomes: list[BaseException | tuple[str, ...]] = []

    def resolve(mine: EgressPolicy, host: str) -> None:
        try:
            outcomes.append(mine.addresses(host, 80))
        except BaseException as exc:
            outcomes.append(exc)

    # Each owner asks for three names: two run, the third waits for one of its own slots.
    callers = [
        threading.Thread(target=resolve, args=(mine, f"n{n}-{k}.stuck.test"))
        for n, mine in enumerate(owners)
        for k in range(3)
    ]
    for thread in callers:
        thread.start()
    try:
        gate.wait_until(
            lambda: gate.inside == 6 and sum(resolver.waiting(mine.owner) for mine in owners) == 3
        )
        assert resolver.threads == 6
        # Bob's lookup waits for a thread (every one is taken) ...
        bob = policy(resolver, "bob", "bob-1", 30.0)
        answered = threading.Thread(target=resolve, args=(bob, "b.ok.test"))
        answered.start()
        callers.append(answered)
        gate.wait_until(lambda: resolver.waiting(bob.owner) == 1)
        # ... and gets the first one freed: the owner whose lookup ended still has one running,
        # bob none.
        stuck = next(host for host in gate.asked if host.startswith("n0-"))
        gate.release(stuck)
        answered.join(PATIENCE)
        assert ("127.0.0.1",) in outcomes
        # Then user0's waiting name has the thread bob's lookup gave up.
        gate.wait_until(lambda: gate.inside == 6 and resolver.waiting(owners[0].owner) == 0)
        last = next(host for host in reversed(gate.asked) if host.startswith("n0-"))
        assert gate.asked.index("b.ok.test") < gate.asked.index(last)
        assert resolver.threads == 6
    finally:
        gate.release()
        for thread in callers:
            thread.join(PATIENCE)
    # Every name that never answered failed its own call, with the guard's refusal.
    failed = [item for item in outcomes if not isinstance(item, tuple)]
    assert len(failed) == 9
    refused = [item for item in failed if isinstance(item, EgressBlocked)]
    assert refused == failed
    assert all("Temporary failure" in item.reason for item in refused)
    assert gate.peak == 6


def test_an_owners_async_lookups_that_never_answer_hold_no_worker_threads(
    stack: Stack, gate: Gate, server: EchoServer
) -> None:
    """On one event loop (the host's, shared by every user), sixty connections of alice's to
    names that never answer (more than AnyIO's 40 worker threads) leave bob's connection
    through: an async lookup waits for its answer without a worker thread."""
    resolver = Resolver(gate, ttl=0)
    alice = [policy(resolver, "alice", f"alice-{n}", 30.0) for n in range(15)]
    bob = policy(resolver, "bob", "bob-1", 30.0)

    async def get(client: Any, url: str) -> Any:
        try:
            return await client.get(url)
        except BaseException as exc:
            return exc

    async def main() -> tuple[list[Any], Any, bool]:
        clients = [stack.guard.async_client(mine) for mine in alice]
        bobs = stack.guard.async_client(bob)
        try:
            flood = [
                asyncio.create_task(get(clients[n % 15], f"http://n{n}.stuck.test/"))
                for n in range(60)
            ]
            while gate.inside < OWNER_LOOKUP_THREADS or resolver.waiting(alice[0].owner) < 56:
                await asyncio.sleep(0.01)
            reached = await get(bobs, f"http://localhost:{server.port}/")
            flooding = not any(task.done() for task in flood)
            gate.release()
            return list(await asyncio.gather(*flood)), reached, flooding
        finally:
            gate.release()
            for client in (*clients, bobs):
                await client.aclose()

    refused, reached, flooding = asyncio.run(asyncio.wait_for(main(), PATIENCE))
    assert not isinstance(reached, BaseException), reached
    assert reached.json()["local"] == ["127.0.0.1", server.port]
    assert flooding  # bob got through while every one of alice's connections was waiting
    assert all(isinstance(exc, EgressBlocked) for exc in refused), refused
    assert all("Temporary failure" in exc.reason for exc in refused)
    assert gate.peak == OWNER_LOOKUP_THREADS
