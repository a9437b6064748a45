"""OAuth tokens of stored tool instances (``host.instances.tokens``, ``CallContext.tokens``):
sealed per slot with the owner's key and bound to their row, kept per user, removed with their
instance, resealed by ``keys rotate``. Every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

import expediter
from expediter.core.host import Host
from expediter.core.instances.keys import Keyring, generate_key
from expediter.core.instances.tokens import TOKEN_LIMIT, InstanceTokens
from expediter.core.ledger import schema
from expediter.core.ledger.database import Database
from expediter.errors import ArgumentError, CredentialError, InstanceNotFound

ACCESS = "at-7f3a9c1d2e5b8a0f4c6e"
REFRESH = "rt-0b8e4d6a5f1c3e7a9d2b"
CLIENT_SECRET = "cs-9d2c7e1b3a6f0e8d4c5a"

#: What the ``Remote`` tool saw as ``context.tokens``, call after call.
SEEN: list[Any] = []


class Remote(expediter.Toolbox):
    """A remote service signed in with OAuth (stands in for the MCP pack)."""

    name = "remote"

    @expediter.action
    def sign_in(self, access: str, context: expediter.CallContext) -> dict[str, Any]:
        """Keep the invoker's access token.

        Args:
            access: The access token.
        """
        SEEN.append(context.tokens)
        context.tokens.put(
            context.user_id,
            {"access_token": access, "refresh_token": REFRESH},
            expires_at=time.time() + 3600,
        )
        return {"signed_in": True}

    @expediter.action
    def whoami(self, context: expediter.CallContext) -> dict[str, Any]:
        """Who the service thinks the invoker is."""
        SEEN.append(context.tokens)
        if context.tokens is None:
            return {"tokens": "none"}
        found = context.tokens.get(context.user_id)
        return {"tail": None if found is None else found["access_token"][-4:]}


@pytest.fixture(autouse=True)
def _forget_seen() -> Iterator[None]:
    SEEN.clear()
    yield
    SEEN.clear()


@pytest.fixture
def make_host(database_url: str, tmp_path: Path, secret_key: str) -> Iterator[Callable[..., Host]]:
    """Hosts on the shared database with the Remote tool (and any ``plugins``)."""
    made: list[Host] = []

    def make(**options: Any) -> Host:
        options.setdefault("home", tmp_path / f"home{len(made)}")
        options.setdefault("plugins", [Remote])
        host = Host(database_url=database_url, autoload=False, **options)
        made.append(host)
        return host

    yield make
    for host in made:
        host.close()


def _rows(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on a connection of the test's own (``?`` placeholders)."""
    database = Database.parse(url)
    if database.dialect == "postgresql":
        sql = sql.replace("?", "%s")
    connection = database.connect()
    try:
        cursor = connection.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []
    finally:
        connection.close()


def _blob(url: str, instance_id: str, user: str, name: str = "tokens") -> str:
    [(data,)] = _rows(
        url,
        "SELECT data FROM oauth_tokens WHERE instance_id = ? AND user_id = ? AND name = ?",
        (instance_id, user, name),
    )
    return str(data)


def _count(url: str, instance_id: str) -> int:
    [(count,)] = _rows(
        url, "SELECT COUNT(*) FROM oauth_tokens WHERE instance_id = ?", (instance_id,)
    )
    return int(count)


def _openai(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    call = {"id": call_id, "type": "function", "function": function}
    return {"choices": [{"message": {"tool_calls": [call]}}]}


# -- the API --------------------------------------------------------------------------------------


def test_a_slot_is_put_read_replaced_and_deleted(make_host: Callable[..., Host]) -> None:
    host = make_host()
    instance = host.instances.add("remote", "crm", user_id="alice")
    tokens = host.instances.tokens(instance.id)
    assert isinstance(tokens, InstanceTokens)
    assert tokens.instance_id == instance.id
    assert tokens.get("alice") is None
    tokens.put("alice", {"access_token": ACCESS, "refresh_token": REFRESH}, expires_at=1e10)
    tokens.put("alice", {"client_id": "c1", "client_secret": CLIENT_SECRET}, name="client")
    assert tokens.get("alice") == {"access_token": ACCESS, "refresh_token": REFRESH}
    assert tokens.get("alice", "client") == {"client_id": "c1", "client_secret": CLIENT_SECRET}
    # Another host (another process) reads what this one wrote.
    assert make_host().instances.tokens(instance.id).get("alice", name="tokens") is not None
    tokens.delete("alice", "tokens")
    assert tokens.get("alice") is None
    assert tokens.get("alice", "client") is not None
    tokens.put("alice", {"access_token": ACCESS})
    tokens.delete("alice")
    assert (tokens.get("alice"), tokens.get("alice", "client")) == (None, None)
    tokens.delete("alice")  # nothing left: no error


def test_a_put_replaces_the_slot_keeping_when_it_was_made(
    make_host: Callable[..., Host], database_url: str
) -> None:
    host = make_host()
    instance = host.instances.add("remote", "crm", user_id="alice")
    tokens = host.instances.tokens(instance.id)
    tokens.put("alice", {"access_token": "first"}, expires_at=100.0)
    select = (
        "SELECT created_at, updated_at, expires_at FROM oauth_tokens "
        "WHERE instance_id = ? AND user_id = ? AND name = ?"
    )
    [(created, updated, expires)] = _rows(database_url, select, (instance.id, "alice", "tokens"))
    assert expires == 100.0
    time.sleep(0.01)
    tokens.put("alice", {"access_token": ACCESS})
    [(created2, updated2, expires2)] = _rows(database_url, select, (instance.id, "alice", "tokens"))
    assert tokens.get("alice") == {"access_token": ACCESS}
    assert (created2, expires2) == (created, None)
    assert updated2 > updated
    assert _count(database_url, instance.id) == 1


def test_each_user_has_their_own_slots_on_one_instance(
    make_host: Callable[..., Host], database_url: str
) -> None:
    host = make_host()
    shared = host.instances.add("remote", "office")
    tokens = host.instances.tokens(shared.id)
    users = {"owner": None, "bob": "bob", "carol": "carol"}
    for label, user in users.items():
        tokens.put(user, {"access_token": f"{ACCESS}-{label}"})
    for label, user in users.items():
        assert tokens.get(user) == {"access_token": f"{ACCESS}-{label}"}
    assert tokens.get("dave") is None
    tokens.delete("bob")
    assert tokens.get("bob") is None
    assert tokens.get("carol") == {"access_token": f"{ACCESS}-carol"}
    assert tokens.get(None) == {"access_token": f"{ACCESS}-owner"}
    # A call without a user keeps its tokens under '' (tool_records' convention).
    stored = _rows(
        database_url, "SELECT user_id FROM oauth_tokens WHERE instance_id = ?", (shared.id,)
    )
    assert sorted(user for (user,) in stored) == ["", "carol"]


def test_slot_names_values_and_expiry_are_checked_without_echoing_a_token(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    tokens = host.instances.tokens(host.instances.add("remote", "crm", user_id="al").id)
    for name in ("", "Tokens", "1st", "a-b", "x" * 65, 5):
        with pytest.raises(ArgumentError, match="slot name"):
            tokens.put("al", {"a": 1}, name=name)  # type: ignore[arg-type]
        with pytest.raises(ArgumentError, match="slot name"):
            tokens.get("al", name)  # type: ignore[arg-type]
    tokens.put("al", {"a": 1}, name="x" * 64)
    bad_values: list[Any] = [
        [ACCESS],
        {"access_token": ACCESS, "when": object()},
        {"access_token": ACCESS, "n": float("nan")},
        {"access_token": ACCESS, "pad": "x" * TOKEN_LIMIT},
    ]
    for value in bad_values:
        with pytest.raises(ArgumentError) as raised:
            tokens.put("al", value)
        assert ACCESS not in str(raised.value)
    for expiry in ("soon", True, float("inf")):
        with pytest.raises(ArgumentError, match="expires_at"):
            tokens.put("al", {"access_token": ACCESS}, expires_at=expiry)  # type: ignore[arg-type]
    assert tokens.get("al") is None


def test_tokens_of_an_unknown_or_anothers_instance_are_refused_like_get(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    mine = host.instances.add("remote", "crm", user_id="alice")
    with pytest.raises(InstanceNotFound):
        host.instances.get("no-such-id")
    with pytest.raises(InstanceNotFound):
        host.instances.tokens("no-such-id")
    with pytest.raises(InstanceNotFound):
        host.instances.tokens(mine.id, user_id="mallory")
    assert host.instances.tokens(mine.id, user_id="alice").get("alice") is None


def test_tokens_need_a_key_like_secret_fields(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EXPEDITER_SECRET_KEYS", raising=False)
    host = Host(database_url=database_url, home=tmp_path, autoload=False, plugins=[Remote])
    try:
        instance = host.instances.add("remote", "crm", user_id="alice")
        with pytest.raises(CredentialError, match="EXPEDITER_SECRET_KEYS"):
            host.instances.tokens(instance.id)
        # A call still runs: its context has no tokens.
        event = host.call(instance.id, "whoami", {}, user_id="alice")
        assert (event.status, event.result) == ("completed", {"tokens": "none"})
    finally:
        host.close()


# -- removal --------------------------------------------------------------------------------------


def test_removing_the_instance_removes_its_tokens(
    make_host: Callable[..., Host], database_url: str
) -> None:
    host = make_host()
    instance = host.instances.add("remote", "crm", user_id="alice")
    kept = host.instances.add("remote", "other", user_id="alice")
    tokens = host.instances.tokens(instance.id)
    tokens.put("alice", {"access_token": ACCESS})
    tokens.put("bob", {"access_token": ACCESS})
    host.instances.tokens(kept.id).put("alice", {"access_token": ACCESS})
    host.instances.remove(instance.id)
    assert _count(database_url, instance.id) == 0
    assert _count(database_url, kept.id) == 1
    with pytest.raises(InstanceNotFound):
        host.instances.tokens(instance.id)
    # An InstanceTokens made before the removal writes no orphan row.
    with pytest.raises(InstanceNotFound):
        tokens.put("alice", {"access_token": ACCESS})
    assert _count(database_url, instance.id) == 0


def test_the_foreign_key_cascades_when_the_instance_row_is_deleted(
    make_host: Callable[..., Host], database_url: str
) -> None:
    host = make_host()
    instance = host.instances.add("remote", "crm", user_id="alice")
    host.instances.tokens(instance.id).put("alice", {"access_token": ACCESS})
    database = Database.parse(database_url)
    if database.dialect == "sqlite":
        with sqlite3.connect(database.target) as connection:
            connection.execute("PRAGMA foreign_keys = ON")
            connection.execute("DELETE FROM tool_instances WHERE id = ?", (instance.id,))
    else:
        _rows(database_url, "DELETE FROM tool_instances WHERE id = ?", (instance.id,))
    assert _count(database_url, instance.id) == 0


# -- sealing --------------------------------------------------------------------------------------


def test_the_database_holds_no_token_text(
    make_host: Callable[..., Host], database_url: str, secret_key: str
) -> None:
    host = make_host()
    instance = host.instances.add("remote", "crm", user_id="alice")
    tokens = host.instances.tokens(instance.id)
    tokens.put("alice", {"access_token": ACCESS, "refresh_token": REFRESH})
    tokens.put("alice", {"client_secret": CLIENT_SECRET}, name="client")
    for name in ("tokens", "client"):
        blob = _blob(database_url, instance.id, "alice", name)
        assert blob.startswith(f"ex1.{Keyring.parse(secret_key).newest.id}.")
        for secret in (ACCESS, REFRESH, CLIENT_SECRET):
            assert secret not in blob
    host.close()
    database = Database.parse(database_url)
    if database.dialect == "sqlite":
        stored = b"".join(
            Path(database.target + suffix).read_bytes()
            for suffix in ("", "-wal")
            if Path(database.target + suffix).exists()
        )
        for secret in (ACCESS, REFRESH, CLIENT_SECRET):
            assert secret.encode() not in stored


@pytest.mark.parametrize("target", ["another user", "another slot", "another instance", "shared"])
def test_a_blob_moved_to_another_row_does_not_open_and_says_no_token(
    make_host: Callable[..., Host], database_url: str, target: str
) -> None:
    host = make_host()
    source = host.instances.add("remote", "crm", user_id="alice")
    other = host.instances.add("remote", "crm2", user_id="alice")
    shared = host.instances.add("remote", "office")
    host.instances.tokens(source.id).put("alice", {"access_token": ACCESS})
    blob = _blob(database_url, source.id, "alice")
    instance_id, user, name = {
        "another user": (source.id, "bob", "tokens"),
        "another slot": (source.id, "alice", "client"),
        "another instance": (other.id, "alice", "tokens"),
        "shared": (shared.id, "alice", "tokens"),
    }[target]
    tokens = host.instances.tokens(instance_id)
    tokens.put(user, {"access_token": "placeholder"}, name=name)
    _rows(
        database_url,
        "UPDATE oauth_tokens SET data = ? WHERE instance_id = ? AND user_id = ? AND name = ?",
        (blob, instance_id, user, name),
    )
    with pytest.raises(CredentialError) as raised:
        tokens.get(user, name)
    message = str(raised.value)
    assert instance_id in message
    assert name in message
    for secret in (ACCESS, REFRESH):
        assert secret not in message
    # Where it belongs it still opens.
    assert host.instances.tokens(source.id).get("alice") == {"access_token": ACCESS}


def test_a_changed_blob_does_not_open(make_host: Callable[..., Host], database_url: str) -> None:
    host = make_host()
    instance = host.instances.add("remote", "crm", user_id="alice")
    tokens = host.instances.tokens(instance.id)
    tokens.put("alice", {"access_token": ACCESS})
    blob = _blob(database_url, instance.id, "alice")
    flipped = blob[:-2] + ("A" if blob[-2] != "A" else "B") + blob[-1]
    _rows(database_url, "UPDATE oauth_tokens SET data = ?", (flipped,))
    with pytest.raises(CredentialError, match="cannot be decrypted"):
        tokens.get("alice")


def test_rotation_reseals_tokens_which_the_old_key_opened_until_then(
    make_host: Callable[..., Host],
    secret_key: str,
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
) -> None:
    host = make_host()
    ids = [host.instances.add("remote", f"r{n}", user_id="quinn").id for n in range(3)]
    for n, instance_id in enumerate(ids):
        tokens = host.instances.tokens(instance_id)
        tokens.put("quinn", {"access_token": f"{ACCESS}{n}"})
        tokens.put("ray", {"client_secret": f"{CLIENT_SECRET}{n}"}, name="client")
    old_id = Keyring.parse(secret_key).newest.id
    newer = generate_key()
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", f"{newer},{secret_key}")
    rotating = make_host()
    # Before rotation the old key still opens every slot.
    assert rotating.instances.tokens(ids[0]).get("quinn") == {"access_token": f"{ACCESS}0"}
    assert Keyring.blob_key_id(_blob(database_url, ids[0], "quinn")) == old_id
    report = rotating.instances.rotate()
    assert (report.resealed, report.current, report.failed, report.tokens) == (6, 0, (), 6)
    again = rotating.instances.rotate()
    assert (again.resealed, again.current, again.tokens) == (0, 6, 0)
    new_id = Keyring.parse(newer).newest.id
    assert Keyring.blob_key_id(_blob(database_url, ids[2], "ray", "client")) == new_id
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", newer)
    only_new = make_host()
    for n, instance_id in enumerate(ids):
        tokens = only_new.instances.tokens(instance_id)
        assert tokens.get("quinn") == {"access_token": f"{ACCESS}{n}"}
        assert tokens.get("ray", "client") == {"client_secret": f"{CLIENT_SECRET}{n}"}


def test_rotation_reports_a_token_slot_it_cannot_open_without_its_text(
    make_host: Callable[..., Host], monkeypatch: pytest.MonkeyPatch
) -> None:
    host = make_host()
    instance = host.instances.add("remote", "crm", user_id="alice")
    host.instances.tokens(instance.id).put("alice", {"access_token": ACCESS})
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    report = make_host().instances.rotate()
    assert (report.resealed, report.current) == (0, 0)
    [(failed_id, reason)] = report.failed
    assert failed_id == instance.id
    assert "not configured" in reason
    assert ACCESS not in reason


# -- calls ----------------------------------------------------------------------------------------


def test_a_tool_keeps_each_invokers_tokens_through_its_context(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    shared = host.instances.add("remote", "office")
    for user, access in (("bob", f"{ACCESS}-bob"), ("carol", f"{ACCESS}-carol")):
        toolset = host.toolset(user_id=user)
        name = toolset.name_map.name_for(shared.id, "sign_in")
        assert name is not None
        [event] = toolset.run(
            toolset.parse_calls("openai", _openai("c1", name, {"access": access})),
            message_id=f"m-{user}",
        )
        assert event.status == "completed", event.error
    for user in ("bob", "carol"):
        event = host.call(shared.id, "whoami", {}, user_id=user)
        assert event.result == {"tail": f"{ACCESS}-{user}"[-4:]}, event.error
    assert host.call(shared.id, "whoami", {}, user_id="dave").result == {"tail": None}
    tokens = host.instances.tokens(shared.id)
    assert tokens.get("bob") == {"access_token": f"{ACCESS}-bob", "refresh_token": REFRESH}
    # Every call of the instance got the same object: no database read to make it.
    assert len(SEEN) == 5
    assert all(seen is SEEN[0] for seen in SEEN)
    assert isinstance(SEEN[0], InstanceTokens)
    assert SEEN[0] is tokens


def test_a_call_by_the_owner_keeps_the_owners_tokens(
    make_host: Callable[..., Host], database_url: str
) -> None:
    host = make_host()
    instance = host.instances.add("remote", "crm", user_id="alice")
    event = host.call(instance.id, "sign_in", {"access": ACCESS}, user_id="alice")
    assert event.status == "completed", event.error
    assert host.instances.tokens(instance.id).get("alice") == {
        "access_token": ACCESS,
        "refresh_token": REFRESH,
    }
    assert ACCESS not in _blob(database_url, instance.id, "alice")


def test_a_tool_not_bound_to_a_stored_instance_gets_no_tokens(
    make_host: Callable[..., Host],
) -> None:
    host = make_host()
    event = host.call("remote", "whoami", {}, user_id="alice")
    assert (event.status, event.result) == ("completed", {"tokens": "none"})
    toolset = host.toolset(user_id="alice", instances=[{"tool": "remote", "instance_id": "mem"}])
    name = toolset.name_map.name_for("mem", "whoami")
    assert name is not None
    [event] = toolset.run(
        toolset.parse_calls("openai", _openai("c1", name, {})), message_id="m-inline"
    )
    assert event.result == {"tokens": "none"}, event.error


# -- the migration --------------------------------------------------------------------------------


def _alembic(url: str, step: Callable[..., None], revision: str) -> None:
    engine = sa.create_engine(Database.parse(url).sqlalchemy_url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as connection:
            step(schema._config(connection), revision)
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(Database.parse(url).sqlalchemy_url, poolclass=sa.pool.NullPool)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migration_0006_adds_the_table_to_a_0005_database_and_drops_it_again(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    _alembic(url, command.upgrade, "0005_tool_instances")
    assert "oauth_tokens" not in _tables(url)
    _rows(
        url,
        "INSERT INTO tool_instances (id, tool, name, created_at, updated_at) "
        "VALUES ('i1', 'remote', 'crm', 1, 1)",
    )
    assert schema.upgrade(Database.parse(url)) == "0006_oauth_tokens" == schema.HEAD
    assert "oauth_tokens" in _tables(url)
    _rows(
        url,
        "INSERT INTO oauth_tokens (instance_id, user_id, name, data, created_at, updated_at) "
        "VALUES ('i1', '', 'tokens', 'ex1.x', 1, 1)",
    )
    _alembic(url, command.downgrade, "0005_tool_instances")
    assert "oauth_tokens" not in _tables(url)
    assert _rows(url, "SELECT id FROM tool_instances") == [("i1",)]
    assert _rows(url, "SELECT version_num FROM alembic_version") == [("0005_tool_instances",)]
    assert schema.upgrade(Database.parse(url)) == schema.HEAD
    assert _rows(url, "SELECT COUNT(*) FROM oauth_tokens") == [(0,)]
