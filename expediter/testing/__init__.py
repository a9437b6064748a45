"""pytest plugin for tool-pack authors (loaded through the ``pytest11`` entry point).

Fixtures: ``expediter_home`` (an isolated data directory and a clean ``EXPEDITER_*``
environment), ``make_host`` (a host offering just the objects you pass) and ``call_tool``
(call one tool through a real host), ``loopback_only`` (a network that refuses anything but
loopback, for packs that make outbound requests; ``expediter.testing.network``). ``from
expediter.testing import ToolContract`` gives the contract test class every pack should pass.
``config=`` and ``secrets=`` (``ToolContract.config``/``secrets``) run the tool as a stored
instance with that configuration (``expediter.testing.instances``).
"""

from __future__ import annotations

import logging
import os
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


def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: Any) -> None:
    """Before ``pytester`` is first set up (it runs pytest in-process), import what a
    configured host imports: pytester forgets the modules first imported during its runs, and
    compiled ones (cryptography's Rust bindings, SQLAlchemy's extensions) and registries
    (SQLAlchemy's dialects) break when imported a second time in one process."""
    if fixturedef.argname == "pytester" and not _WARMED:
        _warm_up()


#: Whether this process ran ``_warm_up`` already.
_WARMED: list[bool] = []


def _warm_up() -> None:
    """One recorded call of a configured tool in a throwaway home."""
    import tempfile

    import expediter
    from expediter.core.instances.keys import generate_key

    _WARMED.append(True)

    class Warm(expediter.Toolbox):
        """Warms the imports."""

        config_fields = (expediter.ConfigField("key", secret=True, required=True),)

        @expediter.action
        def run(self) -> bool:
            """Run."""
            return True

    with tempfile.TemporaryDirectory() as home:
        environ = {"EXPEDITER_HOME": home, "EXPEDITER_SECRET_KEYS": generate_key()}
        try:
            host = expediter.Host(autoload=False, builtins=False, plugins=[Warm], environ=environ)
            with host:
                stored = host.instances.add("warm", config={"key": "warm-up"}, operator=True)
                host.call(stored.id, "run", {})
        except Exception:  # the test itself then meets whatever this met
            logging.getLogger(__name__).debug("warming a host's imports failed", exc_info=True)


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
    no ledger unless ``record_calls=True``); ``config=``/``secrets=`` store the one tool's
    instance with that configuration, as ``expediter instances add`` would."""
    from expediter.core.host import Host

    hosts: list[Host] = []
    throwaway = _Throwaway(expediter_home)

    def make(
        *plugins: object,
        tools_path: tuple[str | Path, ...] = (),
        autoload: bool = False,
        builtins: bool = False,
        record_calls: bool | None = None,
        config: Mapping[str, Any] | None = None,
        secrets: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Host:
        configured = config is not None or secrets is not None
        if configured:
            record_calls = throwaway.prepare(config, record_calls, options)
        host = Host(
            tools_path=tools_path,
            autoload=autoload,
            plugins=plugins,
            home=expediter_home,
            builtins=builtins,
            record_calls=bool(record_calls),
            **options,
        )
        hosts.append(host)
        if configured:
            from expediter.testing.instances import add_instance

            add_instance(host, plugins[0] if len(plugins) == 1 else plugins, config, secrets)
        return host

    yield make
    for host in hosts:
        host.close()


class _Throwaway:
    """What the configured hosts of one test get: a master key made for the test, and each a
    database of its own, so a host holds only the instance it was made with."""

    __slots__ = ("databases", "home", "key")

    def __init__(self, home: Path) -> None:
        self.home = home
        self.key: str | None = None
        self.databases = 0

    def prepare(self, config: object, record_calls: bool | None, options: dict[str, Any]) -> bool:
        """Check a configured host's options and complete them (the key unless its environment
        names keys, the database unless one is given); returns its ``record_calls``."""
        from expediter.core.config import HostConfig

        if isinstance(config, HostConfig):
            raise TypeError(
                "make_host(config=...) is the tool's configuration; build a host from a whole "
                "HostConfig with expediter.Host(config=...)"
            )
        if record_calls is False:
            raise ValueError(
                "a configured tool is a stored instance, kept in the host's database: "
                "leave out record_calls=False"
            )
        from expediter.testing.instances import KEY_VARIABLES

        environ = dict(os.environ if options.get("environ") is None else options["environ"])
        if not any(environ.get(name) for name in KEY_VARIABLES):
            if self.key is None:
                from expediter.core.instances.keys import generate_key

                self.key = generate_key()
            environ["EXPEDITER_SECRET_KEYS"] = self.key
            options["environ"] = environ
        if options.get("database_url") is None and not environ.get("EXPEDITER_DATABASE_URL"):
            self.databases += 1
            options["database_url"] = f"sqlite:///{self.home / f'configured-{self.databases}.db'}"
        return True


@pytest.fixture
def call_tool(make_host: Callable[..., Host]) -> Callable[..., CallEvent]:
    """Call a tool object through a real host: ``call_tool(tool, "action", {"x": 1})``;
    ``config=``/``secrets=`` run it as a stored instance with that configuration."""

    def call(
        tool: object,
        action: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        config: Mapping[str, Any] | None = None,
        secrets: Mapping[str, Any] | None = None,
    ) -> CallEvent:
        from expediter.testing.instances import check_unconfigured, offered_as, only_tool

        configured = config is not None or secrets is not None
        host = make_host(tool, config=config, secrets=secrets)
        info = only_tool(host, tool)
        if configured:
            instance = [item for item in host.instances.list() if item.tool == info.name][-1]
            info = offered_as(host, instance, info)
            target = instance.id
        else:
            check_unconfigured(info, "Give call_tool config= (secret fields in secrets=).")
            target = info.name
        if action is None:
            if len(info.actions) != 1:
                raise AssertionError(f"tool {info.name!r} has several actions; name one")
            action = info.actions[0].name
        return host.call(target, action, arguments or {}, user_id=user_id)

    return call
