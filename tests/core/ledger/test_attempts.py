"""Attempt ids tell one attempt of a key from another: unique per call, in forked children too,
whatever the application does with ``random``."""

from __future__ import annotations

import os
import random
import re

import pytest

from expediter.core.ledger.ledger import _attempt_id


def test_attempt_ids_are_64_bit_hex_and_do_not_repeat() -> None:
    ids = [_attempt_id() for _ in range(10_000)]
    assert all(re.fullmatch(r"[0-9a-f]{16}", value) for value in ids)
    assert len(set(ids)) == len(ids)


def test_seeding_the_random_module_does_not_repeat_attempt_ids() -> None:
    random.seed(1234)
    first = _attempt_id()
    random.seed(1234)
    assert _attempt_id() != first


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_draws_other_attempt_ids_than_its_parent() -> None:
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(reader)
        os.write(writer, ",".join(_attempt_id() for _ in range(5)).encode())
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        theirs = set(pipe.read().split(","))
    os.waitpid(child, 0)
    mine = {_attempt_id() for _ in range(5)}
    assert len(theirs) == 5
    assert not mine & theirs
