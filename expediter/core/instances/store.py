"""The SQL of stored tool instances, users' switches, tools' records and OAuth tokens, on one
DBAPI connection.

Every statement is a single autocommit statement written once in the SQL both databases take
(``?`` placeholders, turned into ``%s`` for psycopg), so this module imports no SQLAlchemy: a
turn's toolset reads a user's instances on a warm host in two small queries (benchmarks/README.md,
"a turn's toolset with 50 stored instances"). The tables are created by the ledger's
migrations (``tables.py``, ``0005_tool_instances``, ``0006_oauth_tokens``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, final

import attrs

from expediter.core.ledger.database import Database, attempt, is_outage
from expediter.core.records.convert import json_form, unstructure
from expediter.errors import IdentifierError, LedgerError

__all__ = ["InstanceRow", "InstanceStore", "RecordRow", "Summary"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_INSTANCE_COLUMNS = (
    "id, owner_id, tool, name, kind, config, credentials, secret_fields, key_id, actions, "
    "enabled, revision, created_at, updated_at"
)
_RECORD_COLUMNS = "id, instance_id, user_id, tool, collection, data, text, created_at, updated_at"


def _json(text: Any, default: Any) -> Any:
    if text is None:
        return default
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError:
            return default
    return text


def _dumps(value: Any) -> str:
    # ASCII JSON: lone surrogates and NUL are escapes, which every column takes.
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _exact(params: Sequence[Any]) -> Sequence[Any]:
    """The parameters as they are, never changed: ids are compared as stored (a NUL dropped
    made ``"alice\\x00"`` alice). Each id is checked where it enters (the manager, tokens,
    storage); text neither database keeps byte for byte is still refused here, rather than
    handed to a driver that keeps, drops or refuses it depending on the database."""
    for value in params:
        if type(value) is str and not (value.isascii() and "\x00" not in value):
            IdentifierError.check(value, "value", limit=None)
    return params


def _changeable(row: InstanceRow) -> tuple[Any, ...]:
    """The columns ``replace`` writes, in its order (``insert`` writes them too)."""
    return (
        row.name,
        _dumps(dict(row.config)),
        row.credentials,
        _dumps(list(row.secret_fields)),
        row.key_id,
        _dumps(dict(row.actions)),
        row.enabled,
        row.kind,
        row.updated_at,
    )


@attrs.frozen
class Summary:
    """What a toolset needs to know of an instance before deciding whether its cache holds it."""

    id: str
    owner_id: str | None
    tool: str
    kind: str
    enabled: bool
    revision: int


@json_form()
@attrs.frozen(kw_only=True)
class InstanceRow:
    """One ``tool_instances`` row as stored (credentials still sealed)."""

    id: str
    owner_id: str | None
    tool: str
    name: str
    kind: str = "configured"
    config: Mapping[str, Any] = attrs.field(factory=dict)
    credentials: str | None = attrs.field(default=None, repr=False)
    secret_fields: tuple[str, ...] = ()
    key_id: str | None = None
    actions: Mapping[str, Any] = attrs.field(factory=dict)
    enabled: bool = True
    revision: int = 1
    created_at: float = 0.0
    updated_at: float = 0.0

    @classmethod
    def from_db(cls, row: Sequence[Any]) -> InstanceRow:
        """Build from a row selected with ``_INSTANCE_COLUMNS``."""
        (
            id_, owner_id, tool, name, kind, config, credentials, secret_fields, key_id,
            actions, enabled, revision, created_at, updated_at,
        ) = row  # fmt: skip
        return cls(
            id=id_,
            owner_id=owner_id,
            tool=tool,
            name=name,
            kind=kind,
            config=_json(config, {}),
            credentials=credentials,
            secret_fields=tuple(_json(secret_fields, [])),
            key_id=key_id,
            actions=_json(actions, {}),
            enabled=bool(enabled),
            revision=int(revision),
            created_at=float(created_at),
            updated_at=float(updated_at),
        )


@attrs.frozen(kw_only=True)
class RecordRow:
    """One ``tool_records`` row: a record a tool kept."""

    id: str
    instance_id: str
    user_id: str
    tool: str
    collection: str
    data: Mapping[str, Any]
    text: str | None
    created_at: float
    updated_at: float

    @classmethod
    def from_db(cls, row: Sequence[Any]) -> RecordRow:
        """Build from a row selected with ``_RECORD_COLUMNS``."""
        id_, instance_id, user_id, tool, collection, data, text, created_at, updated_at = row
        return cls(
            id=id_,
            instance_id=instance_id,
            user_id=user_id,
            tool=tool,
            collection=collection,
            data=_json(data, {}),
            text=text,
            created_at=float(created_at),
            updated_at=float(updated_at),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return unstructure(self)


@final
class InstanceStore:
    """Reads and writes stored instances, switches and records (thread-safe, one connection).

    An unreachable database is a ``LedgerError`` naming it; nothing is spooled: a change to an
    instance or a record either happens now or is refused.
    """

    def __init__(self, database: Database, prepare: Callable[[], object] = lambda: None) -> None:
        self.database = database
        #: Brings the schema to head before the first connection (the ledger's open).
        self._prepare = prepare
        self._connection: Any = None
        self._lock = threading.RLock()
        self._marker = "?" if database.dialect == "sqlite" else "%s"
        self._sql: dict[str, str] = {}

    # -- connection ---------------------------------------------------------------------------

    def _text(self, sql: str) -> str:
        found = self._sql.get(sql)
        if found is None:
            found = sql if self._marker == "?" else sql.replace("?", "%s")
            self._sql[sql] = found
        return found

    def _connect(self) -> Any:
        if self._connection is None:
            self._prepare()
            self._connection = self.database.connect()
        return self._connection

    def _run(self, work: Callable[[Any], T]) -> T:
        with self._lock:
            try:
                return attempt(work, self._connect, self._close, held=self._connection is not None)
            except LedgerError:
                raise
            except Exception as exc:
                if not is_outage(exc):
                    raise
                self._close()
                raise LedgerError(
                    f"the database at {self.database.display} is unreachable: "
                    f"{self.database.scrub(str(exc))}"
                ) from None

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        values = _exact(params)

        def work(connection: Any) -> int:
            cursor = connection.execute(self._text(sql), values)
            return int(cursor.rowcount or 0)

        return self._run(work)

    def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        values = _exact(params)

        def work(connection: Any) -> list[tuple[Any, ...]]:
            return list(connection.execute(self._text(sql), values).fetchall())

        return self._run(work)

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:
                logger.debug("closing a broken instance store connection failed", exc_info=True)

    def close(self) -> None:
        """Close the connection (the next use opens a new one)."""
        with self._lock:
            self._close()

    # -- instances ----------------------------------------------------------------------------

    def insert(self, row: InstanceRow) -> bool:
        """Add an instance; False when its id exists already."""
        return (
            self._execute(
                "INSERT INTO tool_instances (name, config, credentials, secret_fields, key_id, "
                "actions, enabled, kind, updated_at, id, owner_id, tool, revision, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (*_changeable(row), row.id, row.owner_id, row.tool, row.revision, row.created_at),
            )
            == 1
        )

    def replace(self, row: InstanceRow, *, revision: int) -> bool:
        """Write every changeable column of an instance if it is still at ``revision`` (its
        revision goes up by one); False when it changed or went meanwhile."""
        return (
            self._execute(
                "UPDATE tool_instances SET name = ?, config = ?, credentials = ?, "
                "secret_fields = ?, key_id = ?, actions = ?, enabled = ?, kind = ?, "
                "updated_at = ?, revision = revision + 1 WHERE id = ? AND revision = ?",
                (*_changeable(row), row.id, revision),
            )
            == 1
        )

    def reseal(self, instance_id: str, old: str, new: str, key_id: str) -> bool:
        """Swap an instance's sealed credentials if they are still ``old`` (``keys rotate``);
        the revision is kept: the values did not change."""
        return (
            self._execute(
                "UPDATE tool_instances SET credentials = ?, key_id = ? "
                "WHERE id = ? AND credentials = ?",
                (new, key_id, instance_id, old),
            )
            == 1
        )

    def delete(self, instance_id: str) -> bool:
        """Remove an instance, its records, its OAuth tokens and every user's switch for it."""
        # SQLite enforces no foreign keys here, so the cascade is spelled out.
        self._execute("DELETE FROM tool_records WHERE instance_id = ?", (instance_id,))
        self._execute("DELETE FROM oauth_tokens WHERE instance_id = ?", (instance_id,))
        self._execute("DELETE FROM instance_settings WHERE instance_id = ?", (instance_id,))
        return self._execute("DELETE FROM tool_instances WHERE id = ?", (instance_id,)) == 1

    def get(self, instance_id: str) -> InstanceRow | None:
        """One instance, or None."""
        rows = self._fetch(
            f"SELECT {_INSTANCE_COLUMNS} FROM tool_instances WHERE id = ?", (instance_id,)
        )
        return InstanceRow.from_db(rows[0]) if rows else None

    def get_many(self, ids: Iterable[str]) -> dict[str, InstanceRow]:
        """The instances with these ids that exist."""
        wanted = list(dict.fromkeys(ids))
        found: dict[str, InstanceRow] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ", ".join("?" * len(chunk))
            for row in self._fetch(
                f"SELECT {_INSTANCE_COLUMNS} FROM tool_instances WHERE id IN ({marks})", chunk
            ):
                instance = InstanceRow.from_db(row)
                found[instance.id] = instance
        return found

    def rows(self, *, owner: str | None = None, every: bool = False) -> list[InstanceRow]:
        """Configured instances: every one (``every``), or those ``owner`` owns plus the shared
        ones; oldest first."""
        base = f"SELECT {_INSTANCE_COLUMNS} FROM tool_instances WHERE kind = 'configured'"
        if every:
            found = self._fetch(base + " ORDER BY created_at, id")
        elif owner is None:
            found = self._fetch(base + " AND owner_id IS NULL ORDER BY created_at, id")
        else:
            found = self._fetch(
                base + " AND (owner_id = ? OR owner_id IS NULL) ORDER BY created_at, id", (owner,)
            )
        return [InstanceRow.from_db(row) for row in found]

    def summaries(self, owner: str | None) -> list[Summary]:
        """The instances a user's toolset may hold (theirs, the shared ones, default tools'
        rows), without their configuration: a turn's first read."""
        if owner is None:
            found = self._fetch(
                "SELECT id, owner_id, tool, kind, enabled, revision FROM tool_instances "
                "WHERE owner_id IS NULL AND kind <> 'inline' ORDER BY created_at, id"
            )
        else:
            found = self._fetch(
                "SELECT id, owner_id, tool, kind, enabled, revision FROM tool_instances "
                "WHERE (owner_id = ? OR owner_id IS NULL) AND kind <> 'inline' "
                "ORDER BY created_at, id",
                (owner,),
            )
        return [Summary(r[0], r[1], r[2], r[3], bool(r[4]), int(r[5])) for r in found]

    def sealed(self) -> list[tuple[str, str | None, str, str | None]]:
        """``(id, owner, credentials, key id)`` of every instance holding credentials."""
        return [
            (row[0], row[1], row[2], row[3])
            for row in self._fetch(
                "SELECT id, owner_id, credentials, key_id FROM tool_instances "
                "WHERE credentials IS NOT NULL ORDER BY id"
            )
        ]

    def any_sealed(self) -> bool:
        """Whether any instance holds credentials."""
        return bool(
            self._fetch("SELECT 1 FROM tool_instances WHERE credentials IS NOT NULL LIMIT 1")
        )

    # -- users' switches -------------------------------------------------------------------------

    def settings(self, user_id: str) -> dict[str, bool]:
        """A user's switches: instance id -> enabled."""
        return {
            row[0]: bool(row[1])
            for row in self._fetch(
                "SELECT instance_id, enabled FROM instance_settings WHERE user_id = ?", (user_id,)
            )
        }

    def set_setting(self, user_id: str, instance_id: str, enabled: bool) -> None:
        """Switch an instance on or off for one user."""
        self._execute(
            "INSERT INTO instance_settings (user_id, instance_id, enabled, updated_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (user_id, instance_id) "
            "DO UPDATE SET enabled = excluded.enabled, updated_at = excluded.updated_at",
            (user_id, instance_id, enabled, time.time()),
        )

    # -- records ------------------------------------------------------------------------------

    def add_record(self, row: RecordRow) -> None:
        """Keep a record."""
        self._execute(
            f"INSERT INTO tool_records ({_RECORD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.id,
                row.instance_id,
                row.user_id,
                row.tool,
                row.collection,
                _dumps(dict(row.data)),
                row.text,
                row.created_at,
                row.updated_at,
            ),
        )

    _SCOPE = "instance_id = ? AND user_id = ? AND collection = ?"

    def records(
        self,
        scope: tuple[str, str, str],
        *,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[RecordRow]:
        """A scope's records, oldest first unless ``newest_first``."""
        order = "DESC" if newest_first else "ASC"
        sql = (
            f"SELECT {_RECORD_COLUMNS} FROM tool_records WHERE {self._SCOPE} "
            f"ORDER BY created_at {order}, id {order}"
        )
        params: list[Any] = list(scope)
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [RecordRow.from_db(row) for row in self._fetch(sql, params)]

    def matching(self, scope: tuple[str, str, str], words: Sequence[str]) -> list[RecordRow]:
        """A scope's records whose text holds any of ``words`` (lower case, no wildcards)."""
        if not words:
            return []
        clauses = " OR ".join("text LIKE ? ESCAPE '!'" for _ in words)
        patterns = [
            "%" + word.replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"
            for word in words
        ]
        sql = (
            f"SELECT {_RECORD_COLUMNS} FROM tool_records WHERE {self._SCOPE} AND ({clauses}) "
            "ORDER BY created_at, id"
        )
        # The patterns are parameters: the SQL text holds no '%' for psycopg to read.
        return [RecordRow.from_db(row) for row in self._fetch(sql, [*scope, *patterns])]

    def get_record(self, scope: tuple[str, str, str], record_id: str) -> RecordRow | None:
        """One record of a scope, or None."""
        rows = self._fetch(
            f"SELECT {_RECORD_COLUMNS} FROM tool_records WHERE {self._SCOPE} AND id = ?",
            (*scope, record_id),
        )
        return RecordRow.from_db(rows[0]) if rows else None

    def update_record(
        self, scope: tuple[str, str, str], record_id: str, data: Mapping[str, Any], text: str | None
    ) -> bool:
        """Replace a record's data and text; False when the scope has no such record."""
        return (
            self._execute(
                "UPDATE tool_records SET data = ?, text = ?, updated_at = ? "
                f"WHERE {self._SCOPE} AND id = ?",
                (_dumps(dict(data)), text, time.time(), *scope, record_id),
            )
            == 1
        )

    def delete_record(self, scope: tuple[str, str, str], record_id: str) -> bool:
        """Remove a record; False when the scope has no such record."""
        return (
            self._execute(
                f"DELETE FROM tool_records WHERE {self._SCOPE} AND id = ?", (*scope, record_id)
            )
            == 1
        )

    # -- OAuth tokens ---------------------------------------------------------------------------

    def token(self, instance_id: str, user_id: str, name: str) -> str | None:
        """The sealed blob of one token slot, or None."""
        rows = self._fetch(
            "SELECT data FROM oauth_tokens WHERE instance_id = ? AND user_id = ? AND name = ?",
            (instance_id, user_id, name),
        )
        return str(rows[0][0]) if rows else None

    def put_token(
        self, instance_id: str, user_id: str, name: str, data: str, expires_at: float | None
    ) -> bool:
        """Write one token slot (insert or replace); False when the instance is gone."""
        now = time.time()
        # INSERT ... SELECT ... WHERE EXISTS: a removed instance gets no orphan row on SQLite
        # (no foreign keys enforced) and no IntegrityError on PostgreSQL. The CAST gives the
        # select list's parameter its column's type on PostgreSQL.
        return (
            self._execute(
                "INSERT INTO oauth_tokens (instance_id, user_id, name, data, expires_at, "
                "created_at, updated_at) SELECT ?, ?, ?, ?, CAST(? AS DOUBLE PRECISION), ?, ? "
                "WHERE EXISTS (SELECT 1 FROM tool_instances WHERE id = ?) "
                "ON CONFLICT (instance_id, user_id, name) DO UPDATE SET data = excluded.data, "
                "expires_at = excluded.expires_at, updated_at = excluded.updated_at",
                (instance_id, user_id, name, data, expires_at, now, now, instance_id),
            )
            == 1
        )

    def delete_tokens(self, instance_id: str, user_id: str, name: str | None = None) -> int:
        """Remove one token slot of a user, or every one (``name`` None); how many went."""
        if name is None:
            return self._execute(
                "DELETE FROM oauth_tokens WHERE instance_id = ? AND user_id = ?",
                (instance_id, user_id),
            )
        return self._execute(
            "DELETE FROM oauth_tokens WHERE instance_id = ? AND user_id = ? AND name = ?",
            (instance_id, user_id, name),
        )

    def sealed_tokens(
        self, after: tuple[str, str, str] | None = None, limit: int = 500
    ) -> list[tuple[str, str | None, str, str, str]]:
        """``(instance id, owner, user, slot, blob)`` of the token slots after ``after`` (an
        ``(instance id, user, slot)``), in that order, ``limit`` at a time (``keys rotate``)."""
        sql = (
            "SELECT t.instance_id, i.owner_id, t.user_id, t.name, t.data FROM oauth_tokens t "
            "JOIN tool_instances i ON i.id = t.instance_id"
        )
        params: list[Any] = []
        if after is not None:
            sql += " WHERE (t.instance_id, t.user_id, t.name) > (?, ?, ?)"
            params += after
        sql += " ORDER BY t.instance_id, t.user_id, t.name LIMIT ?"
        params.append(int(limit))
        return [(r[0], r[1], r[2], r[3], r[4]) for r in self._fetch(sql, params)]

    def reseal_token(self, slot: tuple[str, str, str], old: str, new: str) -> bool:
        """Swap a token slot's blob if it is still ``old`` (``keys rotate``); its times are
        kept: the tokens did not change."""
        return (
            self._execute(
                "UPDATE oauth_tokens SET data = ? "
                "WHERE instance_id = ? AND user_id = ? AND name = ? AND data = ?",
                (new, *slot, old),
            )
            == 1
        )
