"""Every connection of the ``mcp`` tool goes through the egress guard: a server name that
resolves to a private or loopback address is refused before any connection, unless the
operator allows the range; the allowed name is dialed at the checked address."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from expediter_mcp.tool import McpTool
from servers import ADD

import expediter
from expediter.core.netguard import Resolver
from expediter.testing.network import StaticLookup


@pytest.fixture
def lookup_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A host whose ``mcp`` tool resolves names only through a static table."""
    from expediter.core.instances.keys import generate_key

    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    table = {
        "private.test": ["10.1.2.3"],
        "local.test": ["127.0.0.1"],
        "mixed.test": ["127.0.0.1", "192.168.0.9"],
    }
    tool = type(
        "LookupMcpTool",
        (McpTool,),
        {"__module__": __name__, "name": "mcp", "resolver": Resolver(StaticLookup(table))},
    )
    made = expediter.Host(
        database_url=f"sqlite:///{tmp_path / 'ledger.db'}", plugins=[tool], autoload=False
    )
    yield made
    made.close()


def _add(host: Any, url: str, **config: Any) -> Any:
    return host.instances.add("mcp", name=url, config={"url": url, **config}, operator=True)


@pytest.mark.parametrize("name", ["private.test", "local.test", "mixed.test"])
def test_a_name_resolving_to_a_private_address_is_refused(
    lookup_host: Any, http_server: Any, name: str
) -> None:
    record = _add(lookup_host, f"http://{name}:{http_server.port}/mcp")
    event = lookup_host.call(record.id, "whoami", {})
    assert event.status == "error"
    assert event.error_type == "EgressBlocked"
    row = lookup_host.ledger.get(event.key)
    assert name in (row.error or "")  # the ledger says why; the model does not
    assert name not in (event.error or "")


def test_a_literal_loopback_url_is_refused_without_an_allowed_range(
    lookup_host: Any, http_server: Any
) -> None:
    record = _add(lookup_host, http_server.url)
    event = lookup_host.call(record.id, "whoami", {})
    assert event.error_type == "EgressBlocked"


def test_an_allowed_range_dials_the_checked_address_keeping_the_name(
    lookup_host: Any, http_server: Any
) -> None:
    record = _add(
        lookup_host,
        f"http://local.test:{http_server.port}/mcp",
        allow_networks=["127.0.0.0/8"],
    )
    event = lookup_host.call(record.id, ADD, {"a": 1, "b": 2})
    assert event.status == "completed", event.error
    assert event.result["structured_content"] == {"result": 3}


def test_only_the_operator_may_allow_a_range(lookup_host: Any, http_server: Any) -> None:
    with pytest.raises(expediter.errors.ArgumentError, match="allow_networks"):
        lookup_host.instances.add(
            "mcp",
            name="sneaky",
            config={"url": http_server.url, "allow_networks": ["127.0.0.0/8"]},
        )
