"""Hosts built outside the ``make_host`` fixture, on a ledger and a home the caller chooses: the
worker processes and the ledger tests that share a database with them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from expediter.core.host import Host


def ledger_host(url: str, home: str | Path, *tools: object, **options: Any) -> Host:
    """A host recording into the ledger at ``url`` and offering only ``tools`` (no installed
    packs, no built-ins); ``options`` go to ``Host`` as they are."""
    from expediter.core.host import Host

    return Host(
        database_url=url,
        home=home,
        autoload=False,
        builtins=False,
        plugins=list(tools),
        **options,
    )
