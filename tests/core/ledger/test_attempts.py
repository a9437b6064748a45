"""Attempt ids tell one attempt of a key from another: unique per call, in forked children too,
whatever the application does with ``random``; and each process has its own lease keeper."""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path

import pytest

from expediter.core.ledger import Attempt, Ledger
from expediter.core.ledger.columns import new_attempt_id


def test_attempt_ids_are_64_bit_hex_and_do_not_repeat() -> None:
    ids = [new_attempt_id() for _ in range(10_000)]
    assert all(re.fullmatch(r"[0-9a-f]{16}", value) for value in ids)
    assert len(set(ids)) == len(ids)


def test_seeding_the_random_module_does_not_repeat_attempt_ids() -> None:
    random.seed(1234)
    first = new_attempt_id()
    random.seed(1234)
    assert new_attempt_id() != first


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_draws_other_attempt_ids_than_its_parent() -> None:
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(reader)
        os.write(writer, ",".join(new_attempt_id() for _ in range(5)).encode())
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        theirs = set(pipe.read().split(","))
    os.waitpid(child, 0)
    mine = {new_attempt_id() for _ in range(5)}
    assert len(theirs) == 5
    assert not mine & theirs


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_lease_thread(tmp_path: Path) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'fork.db'}", home=tmp_path / "home")
    try:
        ledger.leases.hold(Attempt("k:parent", None, new_attempt_id(), time.monotonic(), True))
        keeper = ledger.leases.thread
        assert keeper is not None
        assert keeper.is_alive()
        ledger.leases.hold(Attempt("k:again", None, new_attempt_id(), time.monotonic(), True))
        assert ledger.leases.thread is keeper  # one keeper per process
        reader, writer = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child
            os.close(reader)
            ledger.leases.hold(Attempt("k:child", None, new_attempt_id(), time.monotonic(), True))
            mine = ledger.leases.thread
            alive = mine is not None and mine is not keeper and mine.is_alive()
            os.write(writer, b"yes" if alive else b"no")
            os._exit(0)
        os.close(writer)
        with os.fdopen(reader) as pipe:
            answer = pipe.read()
        os.waitpid(child, 0)
        assert answer == "yes"
        assert ledger.leases.thread is keeper
    finally:
        ledger.close()
