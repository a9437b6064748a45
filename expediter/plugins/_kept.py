"""What the built-ins that keep a user's texts share (``notes``, ``todo_list``, ``memory``): what
a kept text may be, where it is kept, and the error for an id not found. Not a tool: the
tools-directory scan skips modules whose names begin with ``_``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import expediter
from expediter.core.records.text import clean_text, echo

if TYPE_CHECKING:
    from expediter.core.instances.storage import Collection

__all__ = ["TEXT_LIMIT", "collection", "kept_text", "known_id", "unknown_id"]


#: The most characters one kept text (a note, a to-do, a memory) may have.
TEXT_LIMIT = 4_000
#: Longer than any id the storage makes: a longer one is unknown without a look-up.
_ID_CHARS = 64


def collection(context: expediter.CallContext, tool: str, name: str) -> Collection:
    """The invoker's collection ``name`` of this tool instance, or a ``ToolError`` when the host
    keeps no database."""
    if context.storage is None:
        raise expediter.ToolError(
            f"the {tool} tool needs the host's database to keep its data, and this host has "
            "none (it was built with record_calls=False); it cannot be used here"
        )
    found: Collection = context.storage.collection(name)
    return found


def kept_text(value: str, name: str = "text") -> str:
    """``value`` without control characters or surrounding blanks; a ``ToolError`` when that
    leaves nothing or more than ``TEXT_LIMIT`` characters."""
    text = clean_text(value).strip()
    if not text:
        raise expediter.ToolError(f"'{name}' is empty; give the text to use")
    if len(text) > TEXT_LIMIT:
        raise expediter.ToolError(
            f"'{name}' has {len(text):,} characters; the limit is {TEXT_LIMIT:,}: "
            "shorten it or split it into several"
        )
    return text


def known_id(value: str, noun: str, hint: str) -> str:
    """The id as given, or a ``ToolError`` ("no ``noun`` with id ...; ``hint``") when it cannot
    be one the storage made."""
    key = value.strip()
    # An id holding control characters or lone surrogates is none the storage made, and the
    # databases refuse some of them (PostgreSQL any NUL): unknown, without asking them.
    if not key or len(key) > _ID_CHARS or clean_text(key) != key:
        raise unknown_id(value, noun, hint)
    return key


def unknown_id(value: str, noun: str, hint: str) -> expediter.ToolError:
    """The error for an id this user's collection does not hold."""
    return expediter.ToolError(f"no {noun} with id {echo(value, _ID_CHARS)}; {hint}")
