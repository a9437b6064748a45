"""The registry: per-tool relays, host-wide wrappers around every tool, per-user instances."""

from __future__ import annotations

import itertools
from typing import Any

import pluggy

import expediter
from expediter.core.discovery.loading import make_relay
from expediter.hookspecs.tool import CallContext


@expediter.tool
def upper(text: str) -> str:
    """Upper-case text."""
    return text.upper()


@expediter.tool
def lower(text: str) -> str:
    """Lower-case text."""
    return text.lower()


class Recorder:
    """A host plugin wrapping every tool's execute_action."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, str]] = []

    @expediter.hookimpl(wrapper=True)
    def execute_action(self, action: str, arguments: dict[str, Any], context: CallContext):
        self.seen.append((context.tool, action))
        result = yield
        return f"<{result}>"


def test_a_host_wide_wrapper_wraps_every_tool(make_host) -> None:
    recorder = Recorder()
    host = make_host(upper, lower, recorder)
    assert host.call("upper", "upper", {"text": "a"}).result == "<A>"
    assert host.call("lower", "lower", {"text": "B"}).result == "<b>"
    assert recorder.seen == [("upper", "upper"), ("lower", "lower")]


def test_old_style_hookwrappers_also_wrap(make_host) -> None:
    class Timer:
        calls = 0

        @expediter.hookimpl(hookwrapper=True)
        def execute_action(self, action: str):
            Timer.calls += 1
            outcome = yield
            outcome.force_result(outcome.get_result() + "!")

    host = make_host(upper, Timer())
    assert host.call("upper", "upper", {"text": "x"}).result == "X!"
    assert Timer.calls == 1


def test_a_wrapper_sees_tool_exceptions_and_the_host_still_returns_an_event(make_host) -> None:
    seen: list[str] = []

    class Observer:
        @expediter.hookimpl(wrapper=True)
        def execute_action(self):
            try:
                return (yield)
            except ValueError as exc:
                seen.append(str(exc))
                raise

    @expediter.tool
    def fails() -> str:
        """Always fails."""
        raise ValueError("bad input")

    event = make_host(fails, Observer()).call("fails", "fails", {})
    assert seen == ["bad input"]
    assert (event.status, event.error) == ("error", "ValueError: bad input")


def test_each_relay_holds_one_tool_whatever_the_number_installed(make_host) -> None:
    tools = [expediter.tool(name=f"t{index}")(lambda: "ok") for index in range(200)]
    host = make_host(*tools, Recorder())
    loaded = host.registry.load("t7")
    plugins = loaded.relay.get_plugins()
    assert len(plugins) == 2  # the tool and the host's one wrapper
    assert loaded.instance is tools[7]
    assert host.registry.get("t7") is loaded


def test_user_scoped_tools_get_one_instance_per_user(make_host) -> None:
    class Notes(expediter.Toolbox):
        user_scoped = True
        counter = itertools.count()

        def __init__(self, config=None) -> None:
            super().__init__(config)
            self.serial = next(self.counter)
            self.items: list[str] = []

        @expediter.action
        def add(self, text: str, context: CallContext) -> dict[str, Any]:
            """Add a note."""
            self.items.append(text)
            return {"owner": context.owner_id, "count": len(self.items)}

    host = make_host(Notes)
    assert host.call("notes", "add", {"text": "a"}, user_id="ann").result == {
        "owner": "ann",
        "count": 1,
    }
    assert host.call("notes", "add", {"text": "b"}, user_id="ann").result["count"] == 2
    assert host.call("notes", "add", {"text": "c"}, user_id="bob").result == {
        "owner": "bob",
        "count": 1,
    }
    assert host.registry.load("notes", "ann") is not host.registry.load("notes", "bob")


def test_shared_tools_get_one_instance_for_everyone(make_host) -> None:
    host = make_host(upper)
    assert host.registry.load("upper", "ann") is host.registry.load("upper", "bob")


def test_registry_execute_dispatches_to_a_loaded_instance(make_host) -> None:
    host = make_host(upper, lower)
    loaded = host.registry.load("lower")
    context = CallContext(tool="lower", instance_id=loaded.instance_id)
    assert host.registry.execute("lower", "lower", {"text": "ABC"}, context) == "abc"


def test_make_relay_keeps_firstresult_semantics() -> None:
    relay = make_relay(upper, "upper")
    assert isinstance(relay, pluggy.PluginManager)
    result = relay.hook.execute_action(action="upper", arguments={"text": "q"}, context=None)
    assert result == "Q"
    assert relay.hook.preview_decision(action="upper", arguments={}, context=None) is None
