"""Where fastmcp's OAuth providers keep tokens and client registrations: the instance's
token slots in the core (``InstanceTokens``, sealed with the owner's key), for one subject.

fastmcp addresses entries by (collection, key); a collection becomes a slot name (its
``mcp-oauth-`` prefix dropped, other characters folded to ``_``) and the key, which holds the
server URL, is kept inside the value: an entry read under another key or collection reads as
missing, so two URLs never see each other's tokens. fastmcp's TTLs (a year for tokens) are
kept with the value too, and an expired entry reads as missing.

The slot's plain ``expires_at`` (``oauth_tokens.expires_at``, for operators) is when the
access token expires: set on the slot of the tokens (from the token response's
``expires_in``, as fastmcp computes it) and on the slot of their expiry; None on the others.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, SupportsFloat, final

__all__ = [
    "EXPIRY_COLLECTION",
    "TOKEN_COLLECTION",
    "MemorySlots",
    "Slots",
    "TokenStore",
    "access_expiry",
    "memory_slots",
    "slot_name",
]

_PREFIX = "mcp-oauth-"
_FOLD = re.compile(r"[^a-z0-9]+")
#: Slot names are at most this long (``InstanceTokens``: ``[a-z][a-z0-9_]{0,63}``).
_SLOT_LENGTH = 64
#: The collection of entries put without one.
DEFAULT_COLLECTION = "default"
#: fastmcp's collection of the access and refresh tokens (an ``OAuthToken``).
TOKEN_COLLECTION = "mcp-oauth-token"
#: fastmcp's collection of the access token's expiry (``{"expires_at": seconds}``).
EXPIRY_COLLECTION = "mcp-oauth-token-expiry"
#: In-memory slot sets kept for instances without a database (the oldest are dropped).
_MEMORY_LIMIT = 256


class Slots(Protocol):
    """A subject's token slots: what ``InstanceTokens`` offers for any user."""

    def get(self, user_id: str | None, name: str = ...) -> dict[str, Any] | None: ...

    def put(
        self,
        user_id: str | None,
        data: Mapping[str, Any],
        *,
        name: str = ...,
        expires_at: float | None = ...,
    ) -> None: ...

    def delete(self, user_id: str | None, name: str | None = ...) -> None: ...


def slot_name(collection: str) -> str:
    """The slot a fastmcp collection is kept in (``mcp-oauth-token`` -> ``token``)."""
    text = collection.lower()
    if text.startswith(_PREFIX):
        text = text[len(_PREFIX) :]
    text = _FOLD.sub("_", text).strip("_") or DEFAULT_COLLECTION
    if not text[0].isalpha():
        text = "c_" + text
    return text[:_SLOT_LENGTH]


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def access_expiry(collection: str, value: Mapping[str, Any], now: float) -> float | None:
    """When the access token an entry put at ``now`` is about expires (seconds since the
    epoch), or None: the entry is not fastmcp's tokens or their expiry, or the token
    response gave no ``expires_in``."""
    if collection == TOKEN_COLLECTION:
        # Put as the token response arrives: its relative expiry is still current.
        seconds = _seconds(value.get("expires_in"))
        return None if seconds is None else now + seconds
    if collection == EXPIRY_COLLECTION:
        return _seconds(value.get("expires_at"))
    return None


@final
class MemorySlots:
    """Token slots in this process's memory (an instance that is not stored keeps its
    client-credentials tokens here)."""

    def __init__(self) -> None:
        self._values: dict[tuple[str | None, str], dict[str, Any]] = {}

    def get(self, user_id: str | None, name: str = "tokens") -> dict[str, Any] | None:
        found = self._values.get((user_id, name))
        return None if found is None else dict(found)

    def put(
        self,
        user_id: str | None,
        data: Mapping[str, Any],
        *,
        name: str = "tokens",
        expires_at: float | None = None,
    ) -> None:
        self._values[(user_id, name)] = dict(data)

    def delete(self, user_id: str | None, name: str | None = None) -> None:
        for user, slot in list(self._values):
            if user == user_id and (name is None or slot == name):
                del self._values[(user, slot)]


_MEMORY: OrderedDict[tuple[Any, ...], MemorySlots] = OrderedDict()


def memory_slots(key: tuple[Any, ...]) -> MemorySlots:
    """The in-memory slots of a pool key (kept across sessions, at most ``_MEMORY_LIMIT``)."""
    found = _MEMORY.get(key)
    if found is None:
        found = _MEMORY[key] = MemorySlots()
        while len(_MEMORY) > _MEMORY_LIMIT:
            _MEMORY.popitem(last=False)
    _MEMORY.move_to_end(key)
    return found


@final
class TokenStore:
    """fastmcp's ``AsyncKeyValue`` over one subject's token slots. Each read and write is one
    short database statement, run in a worker thread so the event loop never waits on it."""

    def __init__(self, slots: Slots, subject: str | None) -> None:
        self.slots = slots
        #: Whose tokens these are: the invoker (per-user tokens) or the instance's owner.
        self.subject = subject

    def _read(self, key: str, collection: str | None) -> tuple[dict[str, Any] | None, float | None]:
        name = slot_name(collection or DEFAULT_COLLECTION)
        entry = self.slots.get(self.subject, name)
        if (
            entry is None
            or entry.get("key") != key
            or entry.get("collection") != (collection or DEFAULT_COLLECTION)
            or not isinstance(entry.get("value"), dict)
        ):
            return None, None
        expires_at = entry.get("expires_at")
        if isinstance(expires_at, int | float) and not isinstance(expires_at, bool):
            left = float(expires_at) - time.time()
            if left <= 0:
                return None, None
            return dict(entry["value"]), left
        return dict(entry["value"]), None

    def _write(
        self, key: str, value: Mapping[str, Any], collection: str | None, ttl: SupportsFloat | None
    ) -> None:
        now = time.time()
        collection = collection or DEFAULT_COLLECTION
        # fastmcp's TTL: when the entry reads as missing (kept sealed, with the value).
        stored_until = None
        if ttl is not None:
            seconds = float(ttl)
            if not math.isfinite(seconds):
                raise ValueError("a TTL is a finite number of seconds")
            stored_until = now + seconds
        entry = {
            "collection": collection,
            "key": key,
            "value": dict(value),
            "expires_at": stored_until,
        }
        self.slots.put(
            self.subject,
            entry,
            name=slot_name(collection),
            expires_at=access_expiry(collection, value, now),
        )

    def _remove(self, key: str, collection: str | None) -> bool:
        value, _ = self._read(key, collection)
        if value is None:
            return False
        self.slots.delete(self.subject, slot_name(collection or DEFAULT_COLLECTION))
        return True

    # -- AsyncKeyValue ------------------------------------------------------------------------

    async def get(self, key: str, *, collection: str | None = None) -> dict[str, Any] | None:
        """The value kept under (collection, key), or None (missing, another key, expired)."""
        value, _ = await asyncio.to_thread(self._read, key, collection)
        return value

    async def ttl(
        self, key: str, *, collection: str | None = None
    ) -> tuple[dict[str, Any] | None, float | None]:
        """The value and the seconds it has left (None: no expiry)."""
        return await asyncio.to_thread(self._read, key, collection)

    async def put(
        self,
        key: str,
        value: Mapping[str, Any],
        *,
        collection: str | None = None,
        ttl: SupportsFloat | None = None,
    ) -> None:
        """Keep ``value`` under (collection, key), replacing the collection's entry."""
        await asyncio.to_thread(self._write, key, value, collection, ttl)

    async def delete(self, key: str, *, collection: str | None = None) -> bool:
        """Forget the entry of (collection, key); whether there was one."""
        return await asyncio.to_thread(self._remove, key, collection)

    async def get_many(
        self, keys: Sequence[str], *, collection: str | None = None
    ) -> list[dict[str, Any] | None]:
        """``get`` of each key."""
        return [await self.get(key, collection=collection) for key in keys]

    async def ttl_many(
        self, keys: Sequence[str], *, collection: str | None = None
    ) -> list[tuple[dict[str, Any] | None, float | None]]:
        """``ttl`` of each key."""
        return [await self.ttl(key, collection=collection) for key in keys]

    async def put_many(
        self,
        keys: Sequence[str],
        values: Sequence[Mapping[str, Any]],
        *,
        collection: str | None = None,
        ttl: SupportsFloat | None = None,
    ) -> None:
        """``put`` of each pair."""
        if len(keys) != len(values):
            raise ValueError("put_many needs as many values as keys")
        for key, value in zip(keys, values, strict=True):
            await self.put(key, value, collection=collection, ttl=ttl)

    async def delete_many(self, keys: Sequence[str], *, collection: str | None = None) -> int:
        """``delete`` of each key; how many there were."""
        return sum([await self.delete(key, collection=collection) for key in keys])
