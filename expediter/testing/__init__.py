"""pytest plugin for tool-pack authors (loaded through the ``pytest11`` entry point).

Fixtures: ``expediter_home`` (an isolated data directory and a clean ``EXPEDITER_*``
environment), ``make_host`` (a host offering just the objects you pass) and ``call_tool``
(call one tool through a real host), ``loopback_only`` (a network that refuses anything but
loopback, for packs that make outbound requests; ``expediter.testing.network``). ``from
expediter.testing import ToolContract`` gives the contract test class every pack should pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from expediter.core.host import Host
    from expediter.core.records.calls import CallEvent
    from expediter.testing.contract import ToolContract

__all__ = [
    "ENVIRONMENT",
    "ToolContract",
    "call_tool",
    "expediter_home",
    "loopback_only",
    "make_host",
]

#: Variables that change what a host loads; the fixtures clear them.
ENVIRONMENT = (
    "EXPEDITER_HOME",
    "EXPEDITER_TOOLS_PATH",
    "EXPEDITER_DATABASE_URL",
    "EXPEDITER_DISABLE_PLUGINS",
    "EXPEDITER_LOAD_PLUGINS",
    "EXPEDITER_DISABLE_PLUGIN_AUTOLOAD",
    "EXPEDITER_STRICT_PLUGINS",
    "EXPEDITER_LEASE_SECONDS",
    "EXPEDITER_APPROVAL_SECONDS",
    "EXPEDITER_CALL_TIMEOUT",
    "EXPEDITER_EGRESS_ALLOW",
)


def __getattr__(name: str) -> Any:
    if name == "ToolContract":
        from expediter.testing.contract import ToolContract

        return ToolContract
    raise AttributeError(f"module 'expediter.testing' has no attribute {name!r}")


@pytest.fixture
def loopback_only() -> Iterator[Any]:
    """Refuse every non-loopback connection and real DNS lookup during the test, and fail it
    at teardown when anything tried (``expediter.testing.network.loopback_only``)."""
    from expediter.testing.network import loopback_only as net

    with net() as guard:
        yield guard
    assert not guard.refused, f"the test tried to leave the machine: {guard.refused}"


@pytest.fixture
def expediter_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty ``EXPEDITER_HOME`` for this test, with the other ``EXPEDITER_*`` variables unset."""
    for variable in ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)
    home = tmp_path / "expediter-home"
    home.mkdir()
    monkeypatch.setenv("EXPEDITER_HOME", str(home))
    return home


@pytest.fixture
def make_host(expediter_home: Path) -> Iterator[Callable[..., Host]]:
    """Build hosts offering only the given tools/plugins (no installed packs, no built-ins, and
    no ledger unless ``record_calls=True``)."""
    from expediter.core.host import Host

    hosts: list[Host] = []

    def make(
        *plugins: object,
        tools_path: tuple[str | Path, ...] = (),
        autoload: bool = False,
        builtins: bool = False,
        record_calls: bool = False,
        **options: Any,
    ) -> Host:
        host = Host(
            tools_path=tools_path,
            autoload=autoload,
            plugins=plugins,
            home=expediter_home,
            builtins=builtins,
            record_calls=record_calls,
            **options,
        )
        hosts.append(host)
        return host

    yield make
    for host in hosts:
        host.close()


@pytest.fixture
def call_tool(make_host: Callable[..., Host]) -> Callable[..., CallEvent]:
    """Call a tool object through a real host: ``call_tool(tool, "action", {"x": 1})``."""

    def call(
        tool: object,
        action: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
    ) -> CallEvent:
        host = make_host(tool)
        offered = host.catalogue(include_internal=True)
        if len(offered) != 1:
            problems = "; ".join(
                [conflict.message for conflict in host.conflicts]
                + [pack.error for pack in host.packs if pack.error]
            )
            raise AssertionError(f"expected one tool from {tool!r}, got {len(offered)}: {problems}")
        info = offered[0]
        if action is None:
            if len(info.actions) != 1:
                raise AssertionError(f"tool {info.name!r} has several actions; name one")
            action = info.actions[0].name
        return host.call(info.name, action, arguments or {}, user_id=user_id)

    return call
