"""Database URLs never show their passwords: in messages (``Database.display``), in reprs
(``Database``, ``HostConfig``), in errors for URLs that cannot be used, and in the driver's own
errors (libpq quotes a malformed URL in them)."""

from __future__ import annotations

import pytest

from expediter.core.config import HostConfig
from expediter.core.ledger.database import Database
from expediter.errors import LedgerError

SECRET = "S3CRET-pw"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"postgresql://ann:{SECRET}@db.example:5432/ledger", "ann:***@db.example:5432/ledger"),
        (f"postgresql://ann:{SECRET}#x@db.example/ledger", "ann:***@db.example/ledger"),
        (f"postgresql://ann:{SECRET}?x@db.example/ledger", "ann:***@db.example/ledger"),
        (
            f"postgresql://ann@db.example/ledger?password={SECRET}",
            "ann@db.example/ledger?password=***",
        ),
        (
            f"postgres://db.example/ledger?sslmode=require&password={SECRET}&connect_timeout=3",
            "db.example/ledger?sslmode=require&password=***&connect_timeout=3",
        ),
        (f"postgresql://ann:{SECRET}@[::1]:5432/ledger", "ann:***@[::1]:5432/ledger"),
    ],
)
def test_display_and_repr_hide_the_password(url: str, shown: str) -> None:
    database = Database.parse(url)
    assert database.display == f"postgresql+psycopg://{shown}"
    assert SECRET not in repr(database)
    assert SECRET not in str(database)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (f"postgresql://ann:{SECRET}@[::1/ledger", "needs a closing ']'"),
        (f"postgresql://ann:{SECRET}@[db.example]/ledger", "not an IPv6 address"),
        (f"postgresql://ann:{SECRET}@db]example/ledger", "only an IPv6 address goes in brackets"),
        (f"postgresql://ann:pa/{SECRET}@db.example/ledger", "as %2F"),
        (f"postgresql://ann:%zz{SECRET}@db.example/ledger", "as %25"),
        (f"postgresql://ann@db.example/ledger?password=%{SECRET}", "as %25"),
    ],
)
def test_a_url_libpq_would_quote_in_its_error_is_refused_up_front(url: str, problem: str) -> None:
    with pytest.raises(LedgerError, match="invalid database URL") as caught:
        Database.parse(url)
    assert problem in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        f"mysql://ann:{SECRET}@db.example/ledger",
        f"host=db.example user=ann password={SECRET} dbname=ledger",
        f"host=db.example password='{SECRET} with spaces' dbname=ledger",
    ],
)
def test_an_unsupported_url_is_named_without_its_password(url: str) -> None:
    with pytest.raises(LedgerError, match="unsupported database URL") as caught:
        Database.parse(url)
    assert SECRET not in str(caught.value)


def test_urls_that_are_fine_still_parse() -> None:
    for url in (
        "postgresql://db.example:5432/ledger?application_name=me@laptop",
        "postgresql://h1:5432,h2:5433/ledger",
        "postgresql://ann@[fe80::1%25eth0]:5432/ledger",
        "postgresql://ann:p%40ss@db.example/ledger",
        "postgresql:///ledger?host=/var/run/postgresql",
    ):
        assert Database.parse(url).dialect == "postgresql"
    assert Database.parse("sqlite:///ledger.db?synchronous=full").synchronous == "full"


def test_a_drivers_error_quoting_the_password_is_scrubbed() -> None:
    database = Database.parse(f"postgresql://ann:{SECRET}@db.example/ledger")
    message = f'invalid URI: "{database.target}" (password "{SECRET}")'
    scrubbed = database.scrub(message)
    assert SECRET not in scrubbed
    assert "postgresql://ann:***@db.example/ledger" in scrubbed


def test_an_unreachable_server_names_the_database_without_its_password() -> None:
    pytest.importorskip("psycopg")
    database = Database.parse(f"postgresql://ann:{SECRET}@127.0.0.1:1/ledger?password={SECRET}")
    with pytest.raises(Exception) as caught:  # noqa: PT011 (psycopg's own error type)
        database.connect(timeout=1)
    assert SECRET not in str(caught.value)
    assert SECRET not in database.display


def test_host_config_repr_hides_the_database_password() -> None:
    config = HostConfig(database_url=f"postgresql://ann:{SECRET}@db.example/ledger")
    assert SECRET not in repr(config)
    assert "database_url='postgresql://ann:***@db.example/ledger'" in repr(config)
    assert config.database_url == f"postgresql://ann:{SECRET}@db.example/ledger"
    assert "database_url=None" in repr(HostConfig())
