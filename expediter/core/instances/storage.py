"""What tools keep between calls (``CallContext.storage``): records per tool instance and invoker.

Any tool, built in or from a third-party pack, keeps its data the same way: named collections
of JSON records in the host's database (the ``tool_records`` table the host migrates), each
record scoped to the instance it was made with and to the user who made the call. So an agent
using someone else's instance keeps its user's notes apart from the owner's.
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import re
import secrets
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, final

import attrs

from expediter.core.instances.store import RecordRow
from expediter.core.instances.tokens import user_key
from expediter.core.records.text import clean_text
from expediter.errors import ArgumentError, IdentifierError

if TYPE_CHECKING:
    from expediter.core.instances.store import InstanceStore

__all__ = ["Collection", "Record", "ToolStorage"]

#: The largest record (its JSON) a tool may keep.
RECORD_LIMIT = 64 * 1024
#: A search looks for at most this many words of the query.
SEARCH_WORDS = 12
_COLLECTION = re.compile(r"[a-z][a-z0-9_]{0,63}")
_WORD = re.compile(r"\w+")


def _iso(moment: float) -> str:
    return dt.datetime.fromtimestamp(moment, dt.UTC).isoformat(timespec="seconds")


@attrs.frozen
class Record:
    """One kept record: its id, the data the tool gave, and when it was made and changed."""

    id: str
    data: Mapping[str, Any]
    created_at: float
    updated_at: float

    def to_dict(self) -> dict[str, Any]:
        """The record as a tool returns it to the model: ``{"id", ...data, "created_at"}``."""
        return {
            "id": self.id,
            **self.data,
            "created_at": _iso(self.created_at),
            "updated_at": _iso(self.updated_at),
        }

    @classmethod
    def _of(cls, row: RecordRow) -> Record:
        return cls(row.id, row.data, row.created_at, row.updated_at)


def _checked(data: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    if not isinstance(data, Mapping):
        raise ArgumentError(f"a record is a JSON object, not {type(data).__name__}")
    try:
        text = json.dumps(dict(data), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ArgumentError(f"a record must be JSON: {exc}") from None
    if len(text) > RECORD_LIMIT:
        raise ArgumentError(
            f"a record is at most {RECORD_LIMIT // 1024} KB of JSON; this one is "
            f"{len(text) // 1024} KB"
        )
    return json.loads(text), text


def _search_text(text: str | None, data_text: str) -> str:
    return clean_text(text if text is not None else data_text).lower()


def _record_key(record_id: object) -> str | None:
    """A record id as it is looked up, or None for one no record has: the storage makes its
    ids of hex digits, and an id that cannot be kept exactly is never changed into another
    (a tool passes on ids a model wrote, so this is "no such record", not an error)."""
    try:
        return IdentifierError.check(str(record_id), "record id")
    except IdentifierError:
        return None


@final
class Collection:
    """One named collection of records in one scope (instance, invoker)."""

    def __init__(self, storage: ToolStorage, name: str) -> None:
        self._storage = storage
        self.name = name
        self._scope = (storage.instance_id, storage.user_key, name)

    @property
    def _store(self) -> InstanceStore:
        return self._storage.store

    def add(self, data: Mapping[str, Any], *, text: str | None = None) -> Record:
        """Keep a new record; ``text`` is what ``search`` matches (default: the data's JSON)."""
        value, data_text = _checked(data)
        self._storage.anchor()
        now = time.time()
        row = RecordRow(
            id=secrets.token_hex(6),
            instance_id=self._storage.instance_id,
            user_id=self._storage.user_key,
            tool=self._storage.tool,
            collection=self.name,
            data=value,
            text=_search_text(text, data_text),
            created_at=now,
            updated_at=now,
        )
        self._store.add_record(row)
        return Record._of(row)

    def get(self, record_id: str) -> Record | None:
        """One record by id, or None."""
        key = _record_key(record_id)
        row = None if key is None else self._store.get_record(self._scope, key)
        return None if row is None else Record._of(row)

    def list(
        self, *, limit: int | None = None, newest_first: bool = False
    ) -> builtins.list[Record]:
        """The collection's records, oldest first unless ``newest_first``."""
        rows = self._store.records(self._scope, limit=limit, newest_first=newest_first)
        return [Record._of(row) for row in rows]

    def search(self, query: str, *, limit: int = 20) -> builtins.list[Record]:
        """Records whose text holds the query's words (case-insensitive), those holding the
        most words first, then the newest."""
        words = list(dict.fromkeys(word.lower() for word in _WORD.findall(str(query))))
        words = [word[:64] for word in words[:SEARCH_WORDS]]
        rows = self._store.matching(self._scope, words)
        ranked = sorted(
            rows,
            key=lambda row: (-sum(word in (row.text or "") for word in words), -row.created_at),
        )
        return [Record._of(row) for row in ranked[: max(0, int(limit))]]

    def update(
        self, record_id: str, data: Mapping[str, Any], *, text: str | None = None
    ) -> Record | None:
        """Replace a record's data (and search text); None when there is no such record."""
        value, data_text = _checked(data)
        key = _record_key(record_id)
        if key is None or not self._store.update_record(
            self._scope, key, value, _search_text(text, data_text)
        ):
            return None
        return self.get(key)

    def delete(self, record_id: str) -> bool:
        """Remove a record; False when there is no such record."""
        key = _record_key(record_id)
        return key is not None and self._store.delete_record(self._scope, key)


@final
class ToolStorage:
    """A tool's storage for one call: collections scoped to its instance and its invoker."""

    def __init__(
        self,
        store: InstanceStore,
        *,
        instance_id: str,
        user_id: str | None,
        tool: str,
        anchor: Callable[[], None],
    ) -> None:
        self.store = store
        self.instance_id = IdentifierError.check(instance_id, "instance id")
        self.user_id = user_id
        #: The invoker as stored: exactly as given, '' for calls made without a user (an id
        #: that cannot be kept exactly is refused, never taken for another user's).
        self.user_key = user_key(user_id)
        self.tool = tool
        self._anchor = anchor
        self._anchored = False

    def anchor(self) -> None:
        """Make sure the instance has a row for the records to point to (a default tool's row
        is made on its first use)."""
        if not self._anchored:
            self._anchor()
            self._anchored = True

    def collection(self, name: str) -> Collection:
        """A named collection (lower case letters, digits and ``_``, e.g. ``notes``)."""
        if not isinstance(name, str) or not _COLLECTION.fullmatch(name):
            raise ValueError(
                f"a collection name is lower case letters, digits and _ (at most 64), not {name!r}"
            )
        return Collection(self, name)
