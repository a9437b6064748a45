"""The ledger's writes on PostgreSQL run as prepared statements through libpq: values keep
their meaning, the server's errors arrive as psycopg's exceptions, and a lost connection is an
outage (so writes go to the spool)."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from expediter.core.ledger.database import Database, is_outage
from expediter.core.ledger.prepared import PreparedWriter

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


class Shade(enum.StrEnum):
    DARK = "dark"


@pytest.fixture
def connection(migrated_url: str) -> Iterator[Any]:
    connection = Database.parse(migrated_url).connect()
    connection.execute("CREATE TABLE probe (t text, f float8, b boolean, i bigint, j jsonb)")
    yield connection
    connection.close()


def test_values_are_written_as_the_driver_would_write_them(connection: Any) -> None:
    writer = PreparedWriter(connection)
    insert = "INSERT INTO probe (t, f, b, i, j) VALUES (%s::VARCHAR, %s, %s, %s, %s::JSONB)"
    rows = [
        ("héllo", 1733055555.123456, True, 7, '{"a": [1, "é"]}'),
        (Shade.DARK, 3, False, 2**40, "null"),
        (None, None, None, None, None),
        ("", float("inf"), True, -1, '"x"'),
    ]
    for row in rows:
        assert writer.execute(insert, row).rowcount == 1
    found = connection.execute("SELECT t, f, b, i, j::text FROM probe ORDER BY ctid").fetchall()
    assert found == [
        ("héllo", 1733055555.123456, True, 7, '{"a": [1, "é"]}'),
        ("dark", 3.0, False, 2**40, "null"),
        (None, None, None, None, None),
        ("", float("inf"), True, -1, '"x"'),
    ]


def test_each_text_is_prepared_once(connection: Any) -> None:
    writer = PreparedWriter(connection)
    update = "UPDATE probe SET f = %s WHERE t = %s::VARCHAR"
    for n in range(3):
        writer.execute(update, (float(n), "none"))
    prepared = connection.execute(
        "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'expediter_%'"
    ).fetchone()
    assert prepared == (1,)


def test_a_value_the_ledger_never_writes_is_refused(connection: Any) -> None:
    writer = PreparedWriter(connection)
    with pytest.raises(TypeError, match="cannot write a list"):
        writer.execute("INSERT INTO probe (t) VALUES (%s::VARCHAR)", ([1],))


def test_the_servers_errors_are_psycopgs_exceptions(connection: Any) -> None:
    writer = PreparedWriter(connection)
    with pytest.raises(psycopg.errors.InvalidTextRepresentation):
        writer.execute("INSERT INTO probe (j) VALUES (%s::JSONB)", ("{not json",))
    # The connection is still usable afterwards.
    assert writer.execute("INSERT INTO probe (t) VALUES (%s::VARCHAR)", ("ok",)).rowcount == 1


def test_a_lost_connection_is_an_outage(connection: Any, migrated_url: str) -> None:
    writer = PreparedWriter(connection)
    writer.execute("INSERT INTO probe (t) VALUES (%s::VARCHAR)", ("before",))
    pid = connection.info.backend_pid
    with Database.parse(migrated_url).connect() as other:
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(psycopg.OperationalError) as raised:
        writer.execute("INSERT INTO probe (t) VALUES (%s::VARCHAR)", ("after",))
    assert is_outage(raised.value)


def test_remembered_texts_are_written_exactly_also_after_the_memory_is_emptied(
    connection: Any,
) -> None:
    writer = PreparedWriter(connection)
    insert = "INSERT INTO probe (t, i) VALUES (%s::VARCHAR, %s)"
    long_text = "é" * 100  # too long to remember
    texts = [f"t{n % 700}" for n in range(1500)] + ["", long_text, long_text, "t1"]
    for index, text in enumerate(texts):
        writer.execute(insert, (text, index))
    found = connection.execute("SELECT t FROM probe ORDER BY i").fetchall()
    assert [row[0] for row in found] == texts
