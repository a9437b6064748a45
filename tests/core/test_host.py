"""The host: calling one action end to end, and what the caller gets back in every case."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from support.events import EVENT_FIELDS

import expediter
from expediter.core.host import Host
from expediter.core.instances.defaults import default_instance_id
from expediter.errors import PluginLoadError
from expediter.hookspecs.tool import Action, CallContext

OBJECT = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


class Raw:
    """A tool written against the raw hooks, recording what it receives."""

    name = "raw"

    def __init__(self, parameters: dict[str, Any] | None = None, **action: Any) -> None:
        self.parameters = parameters or OBJECT
        self.action = action
        self.received: list[tuple[dict[str, Any], CallContext]] = []

    @expediter.hookimpl
    def get_actions_metadata(self) -> list[Action]:
        return [
            Action("act", "Do it.", self.parameters, **self.action),
            Action("off", "Switched off.", OBJECT, active=False),
        ]

    @expediter.hookimpl
    def execute_action(self, action: str, arguments: dict[str, Any], context: CallContext) -> Any:
        self.received.append((arguments, context))
        return {"got": arguments}


def test_a_completed_call_returns_an_event_with_the_documented_shape(make_host) -> None:
    event = make_host(Raw()).call("raw", "act", {"x": 1}, user_id="u1")
    assert event.ok
    data = event.to_dict()
    assert set(data) >= EVENT_FIELDS
    assert data["status"] == "completed"
    assert data["result"] == {"got": {"x": 1}}
    assert data["key"] == f"{event.key.split(':')[0]}:{event.call_id}"
    assert (data["tool"], data["action"], data["user_id"]) == ("raw", "act", "u1")
    assert data["duration_ms"] >= 0


def test_the_tool_receives_an_immutable_context_naming_the_call(make_host) -> None:
    raw = Raw()
    event = make_host(raw).call("raw", "act", {"x": 1}, user_id="ann", run_id="r1", call_id="c1")
    ((_, context),) = raw.received
    assert (context.user_id, context.tool) == ("ann", "raw")
    assert context.instance_id == default_instance_id("raw")
    assert (context.run_id, context.call_id, event.key) == ("r1", "c1", "r1:c1")
    with pytest.raises(AttributeError):
        context.user_id = "mallory"  # type: ignore[misc]


def test_unknown_tool_names_suggest_close_matches(make_host) -> None:
    event = make_host(Raw()).call("rwa", "act", {"x": 1})
    assert (event.status, event.error_type) == ("error", "ToolNotFound")
    assert "no tool named 'rwa'" in (event.error or "")
    assert "did you mean raw" in (event.error or "")


def test_unknown_or_inactive_actions_list_the_available_ones(make_host) -> None:
    host = make_host(Raw())
    for action in ("nope", "off"):
        event = host.call("raw", action, {"x": 1})
        assert event.error_type == "ActionNotFound"
        assert "(available: act)" in (event.error or "")


def test_operator_fixed_values_win_over_the_model(make_host) -> None:
    raw = Raw(fixed={"x": 7})
    make_host(raw).call("raw", "act", {"x": 1})
    assert raw.received[0][0] == {"x": 7}


def test_undeclared_arguments_are_rejected_for_raw_tools(make_host) -> None:
    raw = Raw()
    event = make_host(raw).call("raw", "act", {"x": 1, "sudo": True})
    assert (event.error_type, raw.received) == ("ArgumentError", [])
    assert "unknown argument 'sudo'" in (event.error or "")


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object", "properties": {"x": {}}, "additionalProperties": True},
        {"type": "object"},
    ],
    ids=["additional-properties", "no-declared-properties"],
)
def test_extra_arguments_pass_where_the_schema_allows_them(make_host, parameters) -> None:
    raw = Raw(parameters)
    assert make_host(raw).call("raw", "act", {"x": 1, "extra": 2}).ok
    assert raw.received[0][0] == {"x": 1, "extra": 2}


def test_arguments_must_be_an_object(make_host) -> None:
    event = make_host(Raw()).call("raw", "act", [1, 2])  # type: ignore[arg-type]
    assert (event.status, event.error_type) == ("error", "ArgumentError")
    assert event.arguments == {}


def test_a_crashing_tool_becomes_an_error_event_and_is_logged_with_traceback(
    make_host, caplog
) -> None:
    @expediter.tool
    def explode(depth: int = 1) -> str:
        """Fail loudly."""
        raise KeyError("missing")

    with caplog.at_level(logging.ERROR, logger="expediter"):
        event = make_host(explode).call("explode", "explode", {})
    assert (event.status, event.error_type) == ("error", "KeyError")
    assert event.error == "KeyError: 'missing'"
    (record,) = [r for r in caplog.records if r.name == "expediter.core.calls.executor"]
    assert record.exc_info is not None
    assert record.exc_info[0] is KeyError


def test_async_raw_tools_run_from_call_and_acall(make_host) -> None:
    class Slow:
        name = "slow"

        @expediter.hookimpl
        def get_actions_metadata(self):
            return [Action("wait", "Wait a moment.", {"type": "object", "properties": {}})]

        @expediter.hookimpl
        def execute_action(self, action):
            async def run() -> str:
                await asyncio.sleep(0.001)
                return "done"

            return run()

    host = make_host(Slow())
    assert host.call("slow", "wait").result == "done"
    assert asyncio.run(host.acall("slow", "wait")).result == "done"


def test_secrets_come_from_resolve_secret_plugins(make_host) -> None:
    class Vault:
        @expediter.hookimpl
        def resolve_secret(self, name: str, context: CallContext) -> str | None:
            return f"{name}-for-{context.tool}" if name == "API_KEY" else None

    @expediter.tool
    def show_key(context: CallContext) -> list[str | None]:
        """Show which secrets resolve."""
        return [context.get_secret("API_KEY"), context.get_secret("OTHER")]

    event = make_host(show_key, Vault()).call("show_key", "show_key", {})
    assert event.result == ["API_KEY-for-show_key", None]


def test_a_tool_registered_twice_offers_neither(make_host) -> None:
    @expediter.tool(name="think")
    def my_think(thought: str) -> str:
        """Shadow the built-in."""
        return thought

    host = make_host(my_think, builtins=True)
    assert "think" not in [info.name for info in host.catalogue()]
    event = host.call("think", "think", {"thought": "x"})
    assert event.error_type == "ToolConflict"
    assert "pack 'think'" in (event.error or "")
    assert "pack 'host'" in (event.error or "")


def test_strict_plugins_make_load_errors_fatal(
    make_host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bad.py").write_text("raise ImportError('missing dependency foo')\n")
    assert make_host(tools_path=[tmp_path]).packs[0].error
    monkeypatch.setenv("EXPEDITER_STRICT_PLUGINS", "1")
    with pytest.raises(PluginLoadError, match="missing dependency foo"):
        make_host(tools_path=[tmp_path])


def test_from_env_reads_the_tools_path_and_database_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    for directory, name in ((first, "alpha"), (second, "beta")):
        directory.mkdir()
        (directory / f"{name}.py").write_text(
            "import expediter\n\n@expediter.tool\ndef run() -> str:\n    return 'x'\n"
        )
    monkeypatch.setenv("EXPEDITER_TOOLS_PATH", os.pathsep.join([str(first), str(second)]))
    monkeypatch.setenv("EXPEDITER_DATABASE_URL", "sqlite:///x.db")
    host = Host.from_env()
    names = {info.name for info in host.catalogue()}
    assert {"alpha", "beta", "clock", "think"} <= names
    assert host.database_url == "sqlite:///x.db"


def test_the_event_carries_a_display_copy_of_long_results(make_host) -> None:
    @expediter.tool
    def big() -> str:
        """A long result."""
        return "x" * 10_000

    event = make_host(big).call("big", "big")
    assert len(event.result) == 10_000
    shown = event.to_dict()["result"]
    assert len(shown) == 2000
    assert shown.endswith("more characters]")


def test_internal_tools_are_listed_only_when_asked(make_host) -> None:
    @expediter.tool(internal=True)
    def plumbing() -> str:
        """Internal."""
        return "ok"

    host = make_host(plumbing)
    assert host.catalogue() == []
    assert [info.name for info in host.catalogue(include_internal=True)] == ["plumbing"]
    assert host.call("plumbing", "plumbing").ok


def test_an_explicit_environment_is_used_for_switches_and_home(tmp_path: Path) -> None:
    environ = {
        "EXPEDITER_HOME": str(tmp_path / "home"),
        "EXPEDITER_DISABLE_PLUGINS": "think",
    }
    host = Host.from_env(environ=environ)
    assert host.home == tmp_path / "home"
    assert [info.name for info in host.catalogue()] == ["clock", "memory", "notes", "todo_list"]


def test_strict_can_be_overridden_by_the_caller(
    make_host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "bad.py").write_text("raise ImportError('nope')\n")
    monkeypatch.setenv("EXPEDITER_STRICT_PLUGINS", "1")
    host = make_host(tools_path=[tmp_path], strict=False)
    assert host.errors == ["pack 'bad': ImportError: nope"]
    with pytest.raises(PluginLoadError):
        make_host(tools_path=[tmp_path])


def test_conflict_advice_names_the_packs_that_can_be_disabled(make_host) -> None:
    @expediter.tool(name="clock")
    def my_clock() -> str:
        """Another clock."""
        return "noon"

    (conflict,) = make_host(my_clock, builtins=True).conflicts
    assert conflict.message.endswith("Disable one with EXPEDITER_DISABLE_PLUGINS=clock.")


def test_a_host_plugin_with_a_bad_hook_signature_does_not_break_calls(make_host) -> None:
    class BadVault:
        @expediter.hookimpl
        def resolve_secret(self, name: str, nonsense: int) -> str:
            return "never"

    @expediter.tool
    def ping() -> str:
        """Ping."""
        return "pong"

    host = make_host(ping, BadVault())
    assert host.call("ping", "ping").result == "pong"
    (error,) = host.errors
    assert "resolve_secret" in error
    assert "nonsense" in error


def test_host_and_the_cli_agree_on_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from expediter.cli import cli

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    monkeypatch.setenv("EXPEDITER_DATABASE_URL", url)
    with Host() as host:
        event = host.call("clock", "now")
        assert host.ledger.database.url == url
    result = CliRunner().invoke(cli, ["ledger", "show", event.key, "--json"])
    assert result.exit_code == 0, result.output
    assert event.key in result.output


def test_explicit_host_arguments_win_and_tools_path_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    for directory, name in ((first, "alpha"), (second, "beta")):
        directory.mkdir()
        (directory / f"{name}.py").write_text(
            "import expediter\n\n@expediter.tool\ndef run() -> str:\n    return 'x'\n"
        )
    monkeypatch.setenv("EXPEDITER_TOOLS_PATH", str(first))
    monkeypatch.setenv("EXPEDITER_DATABASE_URL", "sqlite:///from-env.db")
    monkeypatch.setenv("EXPEDITER_CALL_TIMEOUT", "5")
    host = Host(tools_path=[second], database_url="sqlite:///explicit.db", call_timeout=None)
    assert {"alpha", "beta"} <= {info.name for info in host.catalogue()}
    assert host.config.database_url == "sqlite:///explicit.db"
    assert host.config.call_timeout is None
    assert Host().config.call_timeout == 5.0


def test_discovery_changed_when_a_tools_directory_gains_a_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "first.py").write_text(
        "import expediter\n\n@expediter.tool\ndef first() -> str:\n    return 'one'\n"
    )
    monkeypatch.setenv("EXPEDITER_HOME", str(tmp_path / "home"))
    host = Host(tools_path=[tools], autoload=False, record_calls=False)
    assert host.discovery_changed() is False
    time.sleep(0.01)
    (tools / "second.py").write_text(
        "import expediter\n\n@expediter.tool\ndef second() -> str:\n    return 'two'\n"
    )
    assert host.discovery_changed() is True
    again = Host(config=host.config, record_calls=False)
    assert again.discovery_changed() is False
    assert {"first", "second"} <= {info.name for info in again.catalogue()}


def test_closing_the_host_closes_its_loaded_tools(tmp_path: Path) -> None:
    closed: list[str] = []

    class Pooled(expediter.Toolbox):
        """Keeps a client open."""

        name = "pooled"
        close_on_shutdown = True

        @expediter.action
        def ping(self) -> str:
            """Answer."""
            return "pong"

        def close(self) -> None:
            closed.append("pooled")

    class Closing(expediter.Toolbox):
        """Has an action called close: it is never called by the host."""

        name = "closing"

        @expediter.action
        def close(self) -> str:
            """An action, not a lifecycle method."""
            closed.append("closing action")
            return "closed"

    class Garage:
        """A hook class whose action close is its close method."""

        name = "garage"

        @expediter.hookimpl
        def get_actions_metadata(self, context: CallContext) -> list[Action]:
            return [Action(name="close", description="Close the garage door.")]

        @expediter.hookimpl
        def execute_action(self, action: str, arguments: dict[str, Any], context: Any) -> Any:
            return getattr(self, action)()

        def close(self) -> str:
            closed.append("garage door")
            return "closed"

    host = Host(
        home=tmp_path, plugins=[Pooled, Closing, Garage], autoload=False, record_calls=False
    )
    assert host.call("pooled", "ping", {}).result == "pong"
    assert host.call("closing", "close", {}).status == "completed"
    assert host.call("garage", "close", {}).status == "completed"
    closed.clear()
    host.close()
    assert closed == ["pooled"]
