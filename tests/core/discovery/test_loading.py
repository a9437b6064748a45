"""The registry: per-tool relays, host-wide wrappers around every tool, per-user instances."""

from __future__ import annotations

import itertools
from typing import Any

import pluggy
import pytest

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
    loaded = host.loaded_tools.load("t7")
    plugins = loaded.relay.get_plugins()
    assert len(plugins) == 2  # the tool and the host's one wrapper
    assert loaded.instance is tools[7]
    assert host.loaded_tools.load("t7") is loaded


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
    assert host.loaded_tools.load("notes", "ann") is not host.loaded_tools.load("notes", "bob")


def test_shared_tools_get_one_instance_for_everyone(make_host) -> None:
    host = make_host(upper)
    assert host.loaded_tools.load("upper", "ann") is host.loaded_tools.load("upper", "bob")


def test_registry_execute_dispatches_to_a_loaded_instance(make_host) -> None:
    host = make_host(upper, lower)
    loaded = host.loaded_tools.load("lower")
    context = CallContext(tool="lower", instance_id=loaded.instance_id)
    assert host.loaded_tools.execute("lower", "lower", {"text": "ABC"}, context) == "abc"


def test_make_relay_keeps_firstresult_semantics() -> None:
    relay = make_relay(upper, "upper")
    assert isinstance(relay, pluggy.PluginManager)
    result = relay.hook.execute_action(action="upper", arguments={"text": "q"}, context=None)
    assert result == "Q"
    assert relay.hook.preview_decision(action="upper", arguments={}, context=None) is None


class Greeter(expediter.Toolbox):
    """Greets on behalf of whoever configured it."""

    name = "greeter"

    @expediter.action
    def greet(self) -> str:
        """Say who this instance speaks for."""
        return f"hello from {self.config.get('who')}"


def test_an_instance_id_with_another_configuration_is_another_instance(make_host) -> None:
    host = make_host(Greeter)
    alice = host.loaded_tools.load("greeter", instance_id="g1", config={"who": "alice"})
    bob = host.loaded_tools.load("greeter", instance_id="g1", config={"who": "bob"})
    assert alice is not bob
    assert host.loaded_tools.load("greeter", instance_id="g1", config={"who": "alice"}) is alice
    for who in ("alice", "bob", "alice"):
        toolset = host.toolset(
            instances=[{"tool": "greeter", "instance_id": "g1", "config": {"who": who}}]
        )
        name = toolset.name_map.name_for("g1", "greet")
        assert name is not None
        call = expediter.ToolCall("c1", name, {}, "g1", "greeter", "greet")
        (event,) = toolset.run([call])
        assert event.result == f"hello from {who}"


def test_instances_are_kept_apart_by_owner(make_host) -> None:
    host = make_host(Greeter)
    mine = host.loaded_tools.load("greeter", instance_id="g1", owner_id="ann")
    theirs = host.loaded_tools.load("greeter", instance_id="g1", owner_id="bob")
    assert mine is not theirs
    assert (mine.user_id, theirs.user_id) == ("ann", "bob")


# -- wrappers around async actions: they see the awaited result ---------------------------------

PATHS = ["call", "acall", "run", "arun"]


def run_one(host, path: str, tool: str, action: str, arguments: dict[str, Any]):
    """One call through ``host.call``/``acall`` or a turn's ``toolset.run``/``arun``."""
    import asyncio

    if path == "call":
        return host.call(tool, action, arguments)
    if path == "acall":
        return asyncio.run(host.acall(tool, action, arguments))
    toolset = host.toolset()
    name = toolset.name_map.name_for(tool, action)
    call = expediter.ToolCall("c1", name, arguments, tool, tool, action)
    if path == "run":
        events = list(toolset.run([call], message_id=f"m-{tool}-{path}"))
    else:

        async def collect():
            return [event async for event in toolset.arun([call], message_id=f"m-{path}")]

        events = asyncio.run(collect())
    return events[-1]


class Timing:
    """Records what each wrapped call ended with, and how long it took."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, Any, float]] = []

    @expediter.hookimpl(wrapper=True)
    def execute_action(self, action: str):
        import time

        start = time.perf_counter()
        try:
            result = yield
        except Exception as exc:
            self.seen.append((action, "raised", f"{type(exc).__name__}: {exc}", 0.0))
            raise
        self.seen.append((action, "returned", result, time.perf_counter() - start))
        return {"wrapped": result}


class Clock(expediter.Toolbox):
    """Sync and async actions side by side."""

    name = "clocked"

    @expediter.action
    def now(self) -> str:
        """A sync action."""
        return "now"

    @expediter.action
    async def later(self, seconds: float = 0.0) -> str:
        """An async action."""
        import asyncio

        await asyncio.sleep(seconds)
        return "later"

    @expediter.action
    async def broken(self) -> str:
        """Fails while awaited."""
        import asyncio

        await asyncio.sleep(0)
        raise LookupError("no such time")


@pytest.mark.parametrize("path", PATHS)
def test_a_wrapper_sees_the_awaited_result_of_an_async_action(make_host, path: str) -> None:
    timing = Timing()
    host = make_host(Clock, timing)
    event = run_one(host, path, "clocked", "later", {"seconds": 0.05})
    assert (event.status, event.result) == ("completed", {"wrapped": "later"})
    ((action, how, result, took),) = timing.seen
    assert (action, how, result) == ("later", "returned", "later")
    assert took >= 0.05, "the wrapper timed the awaited call, not the coroutine's creation"


@pytest.mark.parametrize("path", PATHS)
def test_a_wrapper_sees_the_exception_an_async_action_raises_while_awaited(
    make_host, path: str
) -> None:
    timing = Timing()
    event = run_one(make_host(Clock, timing), path, "clocked", "broken", {})
    assert (event.status, event.error) == ("error", "LookupError: no such time")
    assert timing.seen == [("broken", "raised", "LookupError: no such time", 0.0)]


@pytest.mark.parametrize("path", PATHS)
def test_sync_and_async_actions_are_wrapped_alike(make_host, path: str) -> None:
    timing = Timing()
    host = make_host(Clock, timing)
    assert run_one(host, path, "clocked", "now", {}).result == {"wrapped": "now"}
    assert run_one(host, path, "clocked", "later", {}).result == {"wrapped": "later"}
    assert [(action, result) for action, _, result, _ in timing.seen] == [
        ("now", "now"),
        ("later", "later"),
    ]


def test_a_sync_tool_is_called_through_pluggy_as_before(make_host) -> None:
    host = make_host(upper, Recorder())
    loaded = host.loaded_tools.load("upper")
    assert loaded.call == loaded.relay.hook.execute_action


def test_an_unwrapped_tool_is_called_directly(make_host) -> None:
    host = make_host(Clock, upper)
    for name in ("clocked", "upper"):
        loaded = host.loaded_tools.load(name)
        assert loaded.call.__func__ is type(loaded.instance).execute_action


class Layers:
    """Two wrappers, the outer one tryfirst: each logs when it enters and leaves."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def around(self):
        self.log.append(f"{self.name} in")
        try:
            result = yield
        except LookupError:
            self.log.append(f"{self.name} caught")
            return "recovered"
        self.log.append(f"{self.name} out {result}")
        return f"{self.name}({result})"


class Inner(Layers):
    @expediter.hookimpl(wrapper=True)
    def execute_action(self):
        return (yield from self.around())


class Outer(Layers):
    @expediter.hookimpl(wrapper=True, tryfirst=True)
    def execute_action(self):
        return (yield from self.around())


def test_wrappers_nest_in_pluggy_order_around_an_async_action(make_host) -> None:
    logs: dict[str, list[str]] = {}
    for action in ("now", "later", "broken"):
        log: list[str] = []
        # Outer is registered first: tryfirst still makes it the outermost.
        host = make_host(Clock, Outer(log, "outer"), Inner(log, "inner"))
        event = host.call("clocked", action, {})
        logs[action] = [*log, event.result]
    assert logs["now"] == [
        "outer in",
        "inner in",
        "inner out now",
        "outer out inner(now)",
        "outer(inner(now))",
    ]
    assert logs["later"] == [entry.replace("now", "later") for entry in logs["now"]]
    assert logs["broken"] == [
        "outer in",
        "inner in",
        "inner caught",
        "outer out recovered",
        "outer(recovered)",
    ]


@pytest.mark.parametrize("path", ["call", "arun"])
def test_an_old_style_hookwrapper_changes_an_async_result(make_host, path: str) -> None:
    class Suffix:
        @expediter.hookimpl(hookwrapper=True)
        def execute_action(self):
            outcome = yield
            if outcome.exception is None:
                outcome.force_result(outcome.get_result() + "!")

    assert run_one(make_host(Clock, Suffix()), path, "clocked", "later", {}).result == "later!"


@pytest.mark.parametrize("path", ["call", "arun"])
def test_a_wrapper_keeps_its_context_variables_around_an_async_action(make_host, path: str) -> None:
    import contextvars

    current: contextvars.ContextVar[str] = contextvars.ContextVar("span", default="none")
    seen: list[str] = []

    class Span:
        @expediter.hookimpl(wrapper=True)
        def execute_action(self, action):
            token = current.set(f"span:{action}")
            try:
                return (yield)
            finally:
                seen.append(current.get())
                current.reset(token)  # raises ValueError in another context

    @expediter.tool
    async def traced() -> str:
        """Reads the wrapper's context variable."""
        return current.get()

    event = run_one(make_host(traced, Span()), path, "traced", "traced", {})
    assert (event.status, event.result) == ("completed", "span:traced")
    assert seen == ["span:traced"]


def test_a_wrapper_on_a_raw_async_hook_sees_the_awaited_result(make_host) -> None:
    class RawAsync:
        name = "raw_async"

        @expediter.hookimpl
        def get_actions_metadata(self, context):
            return [expediter.Action("ping")]

        @expediter.hookimpl
        async def execute_action(self, action, arguments, context):
            return "pong"

    timing = Timing()
    assert make_host(RawAsync(), timing).call("raw_async", "ping", {}).result == {"wrapped": "pong"}
    assert [result for _, _, result, _ in timing.seen] == ["pong"]


def test_hook_calls_are_traced_at_debug_without_arguments(make_host, caplog) -> None:
    import logging

    caplog.set_level(logging.DEBUG, logger="expediter.core.discovery.loading")
    host = make_host(upper)
    assert host.call("upper", "upper", {"text": "s3cret"}).result == "S3CRET"
    traced = [r.getMessage() for r in caplog.records if r.name.endswith("loading")]
    assert "tool upper: execute_action -> tool:upper" in traced
    assert "tool upper: execute_action returned str" in traced
    assert not any("s3cret" in message.lower() for message in traced)


@pytest.mark.parametrize("path", ["acall", "arun"])
def test_a_wrapper_sees_an_async_action_cancelled_at_its_deadline(make_host, path: str) -> None:
    import asyncio

    ended: list[str] = []

    class Watch:
        @expediter.hookimpl(wrapper=True)
        def execute_action(self):
            try:
                return (yield)
            except BaseException as exc:
                ended.append(type(exc).__name__)
                raise

    @expediter.tool
    async def stuck() -> str:
        """Never finishes in time."""
        await asyncio.sleep(5)
        return "late"

    event = run_one(make_host(stuck, Watch(), call_timeout=0.05), path, "stuck", "stuck", {})
    assert (event.status, event.error_type) == ("error", "TimeoutError")
    assert ended == ["CancelledError"]
