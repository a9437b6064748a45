"""What a call brings in: its ledger key, and whether its arguments are JSON the host can
carry through every later step (the ledger, events, the model's messages)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from expediter.core.records.calls import ToolCall
from expediter.core.records.limits import PLAIN as FLAT
from expediter.core.records.limits import json_problem

__all__ = ["FLAT", "KEY_ID_CHARS", "argument_problem", "call_key", "key_prefix"]

#: Call ids longer than this are shortened (with a digest) in the ledger key.
KEY_ID_CHARS = 128


def call_key(call: ToolCall, prefix: str, seen: dict[str, int] | None) -> str:
    """The ledger key of a call: ``prefix`` (``message_id:`` or ``run_id:``) and its call id.
    A call id used again in the same turn (``seen`` counts them) gets ``#2``, ``#3``...: each
    call keeps its own row and event. An overlong id is shortened, with a digest of the
    whole."""
    call_id = call.call_id
    if type(call_id) is not str or len(call_id) > KEY_ID_CHARS:
        whole = str(call_id)
        digest = hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        call_id = f"{whole[:64]}~{digest}"
    if seen is not None:
        count = seen.get(call_id, 0) + 1
        seen[call_id] = count
        if count > 1:
            return f"{prefix}{call_id}#{count}"
    return prefix + call_id


def key_prefix(message_id: str | None, run_id: str) -> str:
    """What the keys of a turn's calls begin with."""
    return f"{message_id}:" if message_id else f"{run_id}:"


def argument_problem(arguments: Mapping[str, Any]) -> str | None:
    """Why a call's arguments are not JSON the host can carry (see ``records.limits``), or
    None. Calls built in Python may hold values JSON does not (a ``datetime`` for a tool
    that takes one): only depth and numbers are checked here."""
    return json_problem(arguments, strict=False)
