"""Authoring sugar (``core/authoring.py``): ``@expediter.tool`` and ``Toolbox`` with actions."""

import asyncio
import contextvars
import datetime
import enum
import threading
from collections.abc import Callable
from typing import Any

import attrs
import pluggy
import pytest

import expediter
from expediter.core.authoring.tools import FunctionGroup, FunctionTool, Toolbox, action, snake_case
from expediter.core.instances.defaults import default_instance_id
from expediter.errors import ActionNotFound, SchemaError
from expediter.hookspecs import PROJECT_NAME
from expediter.hookspecs import tool as tool_spec
from expediter.hookspecs.tool import Action, CallContext, ConfigField, Decision

CTX = CallContext()
MakeHost = Callable[..., expediter.Host]
CallTool = Callable[..., expediter.CallEvent]


def _manager(*plugins: object) -> pluggy.PluginManager:
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(tool_spec)
    for plugin in plugins:
        manager.register(plugin)
    return manager


# -- @expediter.tool ------------------------------------------------------------------------------


@expediter.tool
def add(a: int, b: int = 1) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


ADD_PARAMETERS = {
    "type": "object",
    "properties": {
        "a": {"type": "integer", "description": "The first number."},
        "b": {"type": "integer", "description": "The second number.", "default": 1},
    },
    "required": ["a"],
    "additionalProperties": False,
}


def test_bare_tool_is_named_after_the_function_with_default_flags() -> None:
    assert isinstance(add, FunctionTool)
    assert add.name == "add"
    assert add.description == "Add two numbers."
    assert add.internal is False
    assert add.user_scoped is False
    assert add.headless_excluded is False
    assert add.get_actions_metadata() == [
        Action(name="add", description="Add two numbers.", parameters=ADD_PARAMETERS)
    ]


def test_decorated_function_is_still_callable_directly() -> None:
    assert add(2, 3) == 5
    assert add(a=4) == 5
    assert add.__name__ == "add"
    assert add.__doc__ is not None
    assert add.__doc__.startswith("Add two numbers.")
    assert "'add'" in repr(add)


def test_called_tool_without_options_is_like_bare() -> None:
    @expediter.tool()
    def echo(text: str) -> str:
        """Echo the text."""
        return text

    assert isinstance(echo, FunctionTool)
    assert echo.name == "echo"
    assert echo.get_actions_metadata() == [
        Action(
            name="echo",
            description="Echo the text.",
            parameters={
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
                "additionalProperties": False,
            },
        )
    ]
    assert echo("hi") == "hi"


@expediter.tool(
    name="secret_sum",
    description="Sum for insiders.",
    internal=True,
    user_scoped=True,
    require_approval=True,
)
def private_sum(a: int, b: int) -> int:
    """This summary is replaced by description=."""
    return a + b


def test_tool_options_are_reflected_on_the_tool_and_its_action() -> None:
    assert private_sum.name == "secret_sum"
    assert private_sum.description == "Sum for insiders."
    assert private_sum.internal is True
    assert private_sum.user_scoped is True
    [only] = private_sum.get_actions_metadata()
    assert only.name == "secret_sum"
    assert only.description == "Sum for insiders."
    assert only.require_approval is True
    assert only.active is True
    assert private_sum(1, 2) == 3


def test_tool_options_are_reflected_in_the_host_catalogue(make_host: MakeHost) -> None:
    host = make_host(add, private_sum)
    assert [info.name for info in host.catalogue()] == ["add"]
    infos = {info.name: info for info in host.catalogue(include_internal=True)}
    assert set(infos) == {"add", "secret_sum"}
    secret = infos["secret_sum"]
    assert secret.internal is True
    assert secret.user_scoped is True
    assert secret.description == "Sum for insiders."
    assert [item.name for item in secret.actions] == ["secret_sum"]
    assert secret.actions[0].require_approval is True
    assert infos["add"].internal is False
    assert infos["add"].user_scoped is False
    assert infos["add"].actions[0].require_approval is False


@expediter.tool(headless_excluded=True)
def schedule_run(when: str) -> str:
    """Schedule another run."""
    return when


def test_headless_excluded_tool_declares_it_and_the_catalogue_carries_it(
    make_host: MakeHost,
) -> None:
    assert schedule_run.headless_excluded is True
    assert schedule_run.internal is False
    infos = {info.name: info for info in make_host(add, schedule_run).catalogue()}
    assert infos["schedule_run"].headless_excluded is True
    assert infos["add"].headless_excluded is False
    assert infos["schedule_run"].summary()["headless_excluded"] is True
    assert infos["add"].summary()["headless_excluded"] is False


def test_internal_tool_can_still_be_called(make_host: MakeHost) -> None:
    event = make_host(private_sum).call("secret_sum", "secret_sum", {"a": 1, "b": 2}, "ann")
    assert event.status == "completed"
    assert event.result == 3


def test_tool_runs_through_a_host(call_tool: CallTool) -> None:
    event = call_tool(add, "add", {"a": 2})
    assert event.status == "completed"
    assert event.result == 3
    assert event.tool == "add"
    assert event.action == "add"
    assert event.error is None


def test_function_tool_refuses_an_action_it_does_not_have() -> None:
    with pytest.raises(ActionNotFound, match="tool 'add' has no action 'subtract'"):
        add.execute_action("subtract", {"a": 1}, CTX)


def test_unknown_action_through_a_host_is_an_error_event(make_host: MakeHost) -> None:
    event = make_host(add).call("add", "subtract", {"a": 1})
    assert event.status == "error"
    assert event.error_type == "ActionNotFound"
    assert "no action 'subtract'" in (event.error or "")
    assert "available: add" in (event.error or "")


def test_async_tool_called_directly_returns_a_coroutine() -> None:
    @expediter.tool
    async def later(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    assert later.spec.is_async
    assert asyncio.run(later(x=4)) == 8


# -- Toolbox naming -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("class_name", "tool_name"),
    [
        ("MyHTTPTool", "my_http_tool"),
        ("WeatherTool", "weather_tool"),
        ("Weather", "weather"),
        ("HTTPServer", "http_server"),
        ("GitHub", "git_hub"),
        ("S3Bucket", "s3_bucket"),
        ("Version2Tool", "version2_tool"),
        ("already_snake", "already_snake"),
        ("URL", "url"),
    ],
)
def test_snake_case(class_name: str, tool_name: str) -> None:
    assert snake_case(class_name) == tool_name


class MyHTTPTool(Toolbox):
    """Fetch pages over HTTP.

    With retries.
    """

    @action
    def fetch(self, url: str) -> str:
        """Fetch one page."""
        return f"<html>{url}</html>"


def test_toolbox_default_name_is_the_class_name_in_snake_case() -> None:
    assert MyHTTPTool.name == "my_http_tool"
    assert MyHTTPTool.description == "Fetch pages over HTTP."
    assert MyHTTPTool.internal is False
    assert MyHTTPTool.user_scoped is False
    assert MyHTTPTool.headless_excluded is False


def test_toolbox_class_attributes_win() -> None:
    class Anything(Toolbox):
        """Not this."""

        name = "custom"
        description = "Given explicitly."
        internal = True
        user_scoped = True
        headless_excluded = True

    assert Anything.name == "custom"
    assert Anything.description == "Given explicitly."
    assert Anything.internal is True
    assert Anything.user_scoped is True
    assert Anything.headless_excluded is True


def test_toolbox_subclass_gets_its_own_default_name() -> None:
    class Base(Toolbox):
        name = "base"

    class FancyChild(Base):
        pass

    assert Base.name == "base"
    assert FancyChild.name == "fancy_child"


def test_toolbox_headless_excluded_class_attribute_reaches_the_catalogue(
    make_host: MakeHost,
) -> None:
    class Scheduler(Toolbox):
        """Schedule runs."""

        headless_excluded = True

        @action
        def later(self, when: str) -> str:
            """Schedule a run."""
            return when

    infos = {info.name: info for info in make_host(Scheduler, MyHTTPTool).catalogue()}
    assert infos["scheduler"].headless_excluded is True
    assert infos["my_http_tool"].headless_excluded is False


def test_toolbox_is_offered_by_a_host_under_its_name(make_host: MakeHost) -> None:
    host = make_host(MyHTTPTool)
    [info] = host.catalogue()
    assert info.name == "my_http_tool"
    assert info.description == "Fetch pages over HTTP."
    assert [item.name for item in info.actions] == ["fetch"]
    event = host.call("my_http_tool", "fetch", {"url": "x"})
    assert event.status == "completed"
    assert event.result == "<html>x</html>"


# -- @expediter.action ----------------------------------------------------------------------------


class Files(Toolbox):
    """Work with files."""

    @expediter.action
    def read(self, path: str) -> str:
        """Read a file."""
        return f"read {path}"

    @expediter.action(name="remove", require_approval=True)
    def delete(self, path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    @expediter.action(description="List a directory.")
    def ls(self, path: str = ".") -> list[str]:
        """Overridden summary."""
        return [path]

    @expediter.action()
    def stat(self, path: str) -> dict[str, Any]:
        return {"path": path}

    def helper(self, path: str) -> str:
        """Not an action: not decorated."""
        return path


def test_action_options_are_reflected_on_the_actions() -> None:
    actions = Files().get_actions_metadata(CTX)
    assert [(item.name, item.description, item.require_approval) for item in actions] == [
        ("read", "Read a file.", False),
        ("remove", "Delete a file.", True),
        ("ls", "List a directory.", False),
        ("stat", "", False),
    ]
    assert actions[1].parameters == {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    }


def test_action_decorator_returns_the_method_unchanged() -> None:
    assert Files().read("a") == "read a"
    assert Files().delete("a") == "deleted a"


def test_renamed_action_is_called_by_its_new_name(make_host: MakeHost) -> None:
    host = make_host(Files)
    assert host.call("files", "remove", {"path": "x"}).result == "deleted x"
    missing = host.call("files", "delete", {"path": "x"})
    assert missing.status == "error"
    assert missing.error_type == "ActionNotFound"
    helper = host.call("files", "helper", {"path": "x"})
    assert helper.error_type == "ActionNotFound"


def test_toolbox_execute_action_refuses_unknown_actions() -> None:
    with pytest.raises(ActionNotFound, match="tool 'files' has no action 'helper'"):
        Files().execute_action("helper", {"path": "x"}, CTX)


class Base(Toolbox):
    @action
    def greet(self, who: str) -> str:
        return f"hi {who}"

    @action
    def version(self) -> int:
        return 1


class Child(Base):
    @action
    def wave(self) -> str:
        return "o/"

    @action
    def version(self) -> int:
        return 2


class QuietChild(Base):
    def greet(self, who: str) -> str:
        return f"psst {who}"


def test_inherited_actions_are_offered(make_host: MakeHost) -> None:
    names = [item.name for item in Child().get_actions_metadata(CTX)]
    assert sorted(names) == ["greet", "version", "wave"]
    host = make_host(Child)
    assert host.call("child", "greet", {"who": "ann"}).result == "hi ann"
    assert host.call("child", "wave", {}).result == "o/"


def test_redecorated_override_replaces_the_inherited_action(make_host: MakeHost) -> None:
    assert make_host(Child).call("child", "version", {}).result == 2
    assert make_host(Base).call("base", "version", {}).result == 1


def test_override_of_an_action_method_runs_the_override(make_host: MakeHost) -> None:
    assert make_host(QuietChild).call("quiet_child", "greet", {"who": "ann"}).result == "psst ann"


def test_action_specs_are_cached_per_class() -> None:
    assert Child.action_specs() is Child.action_specs()
    assert set(Base.action_specs()) == {"greet", "version"}
    assert set(Child.action_specs()) == {"greet", "version", "wave"}


# -- hooks overridden without @hookimpl -----------------------------------------------------------


class Guarded(Toolbox):
    @action
    def read(self, path: str) -> str:
        return path

    @action
    def wipe(self, path: str) -> str:
        return f"wiped {path}"

    def preview_decision(
        self, action: str, arguments: dict[str, Any], context: CallContext
    ) -> Decision | None:
        if action == "wipe":
            return Decision.ask(f"wipe {arguments.get('path')}?", forced=True)
        return None


def test_overridden_preview_decision_is_a_hook_in_a_plugin_manager() -> None:
    manager = _manager(Guarded())
    decision = manager.hook.preview_decision(action="wipe", arguments={"path": "/"}, context=CTX)
    assert decision == Decision(require_approval=True, forced=True, reason="wipe /?")
    assert manager.hook.preview_decision(action="read", arguments={}, context=CTX) is None


def test_overridden_preview_decision_is_a_hook_in_a_real_host(make_host: MakeHost) -> None:
    host = make_host(Guarded)
    relay = host.loaded_tools.load("guarded").relay
    decision = relay.hook.preview_decision(action="wipe", arguments={"path": "/tmp"}, context=CTX)
    assert decision is not None
    assert decision.verdict == "ask"
    assert decision.forced is True


def test_base_preview_decision_answers_none() -> None:
    assert _manager(Files()).hook.preview_decision(action="read", arguments={}, context=CTX) is None


class Switchable(Toolbox):
    """Offers only the actions switched on."""

    enabled: tuple[str, ...] = ("read",)

    @action
    def read(self) -> str:
        return "data"

    @action
    def write(self, text: str) -> str:
        return text

    def get_actions_metadata(self, context: CallContext) -> list[Action]:
        return [item for item in super().get_actions_metadata(context) if item.name in self.enabled]


def test_overridden_get_actions_metadata_is_used_by_a_host(make_host: MakeHost) -> None:
    host = make_host(Switchable)
    [info] = host.catalogue()
    assert [item.name for item in info.actions] == ["read"]
    assert host.call("switchable", "read", {}).result == "data"
    event = host.call("switchable", "write", {"text": "x"})
    assert event.status == "error"
    assert event.error_type == "ActionNotFound"


def test_overridden_get_actions_metadata_is_a_hook_in_a_plugin_manager() -> None:
    manager = _manager(Switchable())
    assert [item.name for item in manager.hook.get_actions_metadata(context=CTX)] == ["read"]


class Mixin:
    def preview_decision(
        self, action: str, arguments: dict[str, Any], context: CallContext
    ) -> Decision | None:
        return Decision.denied("mixin says no")


class MixedIn(Mixin, Toolbox):
    @action
    def go(self) -> str:
        return "went"


def test_preview_decision_from_a_mixin_is_a_hook() -> None:
    decision = _manager(MixedIn()).hook.preview_decision(action="go", arguments={}, context=CTX)
    assert decision == Decision.denied("mixin says no")


# -- configuration --------------------------------------------------------------------------------


class Mailer(Toolbox):
    """Send mail."""

    config_fields = (
        ConfigField("host", label="SMTP host", required=True),
        ConfigField("port", type="integer", default=587),
        ConfigField("password", secret=True),
    )

    @action
    def settings(self) -> dict[str, Any]:
        return dict(self.config)


def test_config_requirements_returns_config_fields() -> None:
    assert Mailer().config_requirements() == list(Mailer.config_fields)
    assert _manager(Mailer()).hook.config_requirements() == list(Mailer.config_fields)
    assert Files().config_requirements() == []


def test_config_fields_appear_in_the_host_catalogue(make_host: MakeHost) -> None:
    [info] = make_host(Mailer).catalogue()
    assert info.config == Mailer.config_fields


def test_overridden_config_requirements_is_a_hook() -> None:
    class Dynamic(Toolbox):
        def config_requirements(self) -> list[ConfigField]:
            return [ConfigField("token", secret=True)]

    assert _manager(Dynamic()).hook.config_requirements() == [ConfigField("token", secret=True)]


def test_config_is_passed_to_init_and_read_only() -> None:
    mailer = Mailer({"host": "smtp.example.org"})
    assert mailer.config == {"host": "smtp.example.org"}
    with pytest.raises(TypeError):
        mailer.config["host"] = "other"  # type: ignore[index]
    assert Mailer().config == {}
    assert Mailer(config=None).config == {}


def test_config_given_to_the_registry_reaches_the_instance(make_host: MakeHost) -> None:
    host = make_host(Mailer)
    loaded = host.loaded_tools.load("mailer", instance_id="work", config={"host": "smtp.work"})
    assert loaded.instance.config == {"host": "smtp.work"}  # type: ignore[attr-defined]
    event = host.call("mailer", "settings", {})
    assert event.status == "completed"
    assert event.result == {}


def test_config_given_to_init_is_copied() -> None:
    given = {"host": "a"}
    mailer = Mailer(given)
    given["host"] = "b"
    assert mailer.config == {"host": "a"}


# -- sync and async -------------------------------------------------------------------------------


class Clocky(Toolbox):
    @action
    def now(self, offset: int = 0) -> int:
        return 100 + offset

    @action
    async def later(self, offset: int = 0) -> int:
        await asyncio.sleep(0)
        return 200 + offset


@expediter.tool
def sync_double(x: int) -> int:
    return 2 * x


@expediter.tool
async def async_double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


def _call(host: expediter.Host, mode: str, *args: Any) -> expediter.CallEvent:
    if mode == "call":
        return host.call(*args)

    async def run() -> expediter.CallEvent:
        return await host.acall(*args)

    return asyncio.run(run())


@pytest.mark.parametrize("mode", ["call", "acall"])
@pytest.mark.parametrize(("action_name", "expected"), [("now", 105), ("later", 205)])
def test_sync_and_async_actions_work_through_call_and_acall(
    make_host: MakeHost, mode: str, action_name: str, expected: int
) -> None:
    event = _call(make_host(Clocky), mode, "clocky", action_name, {"offset": 5})
    assert event.status == "completed"
    assert event.result == expected


@pytest.mark.parametrize("mode", ["call", "acall"])
@pytest.mark.parametrize("tool", [sync_double, async_double], ids=["sync", "async"])
def test_sync_and_async_tools_work_through_call_and_acall(
    make_host: MakeHost, mode: str, tool: FunctionTool
) -> None:
    event = _call(make_host(tool), mode, tool.name, tool.name, {"x": 21})
    assert event.status == "completed"
    assert event.result == 42


def test_async_tool_via_sync_call_inside_a_running_event_loop(make_host: MakeHost) -> None:
    host = make_host(async_double, Clocky)

    async def inside_a_loop() -> list[expediter.CallEvent]:
        asyncio.get_running_loop()  # a loop is running here
        return [
            host.call("async_double", "async_double", {"x": 4}),
            host.call("clocky", "later", {}),
        ]

    events = asyncio.run(inside_a_loop())
    assert [(event.status, event.result) for event in events] == [
        ("completed", 8),
        ("completed", 200),
    ]


def test_acall_awaits_async_tools_on_the_hosts_loop_as_call_does(make_host: MakeHost) -> None:
    """Never on the caller's loop: a tool that ignores its cancellation or blocks its loop
    would hold the caller's loop (and its ``asyncio.run`` at shutdown)."""
    seen: list[int] = []
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")

    @expediter.tool
    async def where() -> str:
        seen.append(threading.get_ident())
        return marker.get()

    host = make_host(where)

    async def run() -> expediter.CallEvent:
        marker.set("the caller's")
        return await host.acall("where", "where", {})

    assert asyncio.run(run()).result == "the caller's"  # context variables still reach it
    assert host.call("where", "where", {}).result == "unset"
    assert seen[0] != threading.get_ident()
    assert seen[0] == seen[1]  # the same loop as call's


def test_acall_runs_sync_tools_in_the_hosts_threads_with_the_callers_context(
    make_host: MakeHost,
) -> None:
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    seen: list[str] = []

    @expediter.tool
    def where() -> str:
        seen.append(threading.current_thread().name)
        return marker.get()

    host = make_host(where)

    async def run() -> expediter.CallEvent:
        marker.set("the caller's")
        return await host.acall("where", "where", {})

    assert asyncio.run(run()).result == "the caller's"  # as an async tool sees them
    assert seen[0].startswith("expediter-tool")


# -- CallContext injection ------------------------------------------------------------------------


@expediter.tool
def whoami(ctx: CallContext, shout: bool = False) -> dict[str, Any]:
    name = ctx.user_id or "nobody"
    return {
        "user": name.upper() if shout else name,
        "tool": ctx.tool,
        "call_id": ctx.call_id,
        "instance": ctx.instance_id,
    }


@expediter.tool
def maybe_context(ctx: CallContext | None = None) -> str | None:
    return None if ctx is None else ctx.user_id


def test_call_context_is_injected(make_host: MakeHost) -> None:
    host = make_host(whoami)
    event = host.call("whoami", "whoami", {"shout": True}, user_id="ann", call_id="call_1")
    assert event.status == "completed"
    assert event.result == {
        "user": "ANN",
        "tool": "whoami",
        "call_id": "call_1",
        "instance": default_instance_id("whoami"),
    }


def test_optional_call_context_is_injected_too(make_host: MakeHost) -> None:
    event = make_host(maybe_context).call("maybe_context", "maybe_context", {}, user_id="bob")
    assert event.result == "bob"


def test_call_context_is_injected_into_toolbox_actions(make_host: MakeHost) -> None:
    class Who(Toolbox):
        @action
        def me(self, context: CallContext) -> str | None:
            return context.user_id

    assert make_host(Who).call("who", "me", {}, user_id="cy").result == "cy"


class Counter(Toolbox):
    user_scoped = True

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        self.count = 0

    @action
    def bump(self) -> int:
        self.count += 1
        return self.count


def test_user_scoped_toolbox_gets_one_instance_per_user(make_host: MakeHost) -> None:
    host = make_host(Counter)
    results = [
        host.call("counter", "bump", {}, user_id=user).result for user in ["a", "a", "b", "a"]
    ]
    assert results == [1, 2, 1, 3]
    assert host.loaded_tools.load("counter", "a").instance is not host.loaded_tools.load(
        "counter", "b"
    )


# -- results --------------------------------------------------------------------------------------


class Weekday(enum.Enum):
    MON = "monday"
    TUE = "tuesday"


@attrs.frozen
class Booking:
    room: str
    day: Weekday
    at: datetime.datetime
    guests: tuple[str, ...] = ()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            Booking("12", Weekday.TUE, datetime.datetime(2024, 1, 2, 9, 30), ("ann",)),
            {"room": "12", "day": "tuesday", "at": "2024-01-02T09:30:00", "guests": ["ann"]},
            id="attrs",
        ),
        pytest.param(Weekday.MON, "monday", id="enum"),
        pytest.param(datetime.datetime(2024, 1, 2, 9, 30), "2024-01-02T09:30:00", id="datetime"),
        pytest.param(datetime.date(2024, 1, 2), "2024-01-02", id="date"),
        pytest.param([Weekday.MON, (1, 2)], ["monday", [1, 2]], id="nested"),
        pytest.param(None, None, id="none"),
    ],
)
def test_tool_result_becomes_json(call_tool: CallTool, value: Any, expected: Any) -> None:
    @expediter.tool
    def produce() -> Any:
        return value

    event = call_tool(produce, "produce", {})
    assert event.status == "completed"
    assert event.result == expected


class Opaque:
    pass


@pytest.mark.parametrize(
    "value",
    [Opaque(), {"when": Opaque()}, {1: "one"}, b"bytes", 10**5000],
    ids=["object", "nested-object", "int-key", "bytes", "huge-int"],
)
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_unserializable_result_is_an_error_event_not_a_crash(
    call_tool: CallTool, value: Any, is_async: bool
) -> None:
    if is_async:

        @expediter.tool
        async def produce() -> Any:
            return value

    else:

        @expediter.tool
        def produce() -> Any:
            return value

    event = call_tool(produce, "produce", {})
    assert event.status == "error"
    assert event.error_type == "ResultError"
    assert (event.error or "").startswith("the tool's result cannot be sent to the model: ")
    assert event.result is None


# -- tools-directory modules: several functions, one tool -----------------------------------------


def test_function_group_offers_each_function_as_an_action() -> None:
    group = FunctionGroup("maths", [add, sync_double], description="Maths.")
    assert [item.name for item in group.get_actions_metadata()] == ["add", "sync_double"]
    assert group.execute_action("sync_double", {"x": 3}, CTX) == 6
    with pytest.raises(ActionNotFound):
        group.execute_action("nope", {}, CTX)


def test_function_group_with_duplicate_action_names_is_a_schema_error() -> None:
    @expediter.tool(name="add")
    def another_add(a: int) -> int:
        return a

    with pytest.raises(SchemaError, match="two functions share an action name"):
        FunctionGroup("maths", [add, another_add])


def test_function_group_description_falls_back_to_its_only_function() -> None:
    assert FunctionGroup("one", [add]).description == "Add two numbers."
    assert FunctionGroup("two", [add, sync_double]).description == ""


def test_function_group_carries_headless_excluded() -> None:
    assert FunctionGroup("maths", [add]).headless_excluded is False
    assert FunctionGroup("later", [schedule_run], headless_excluded=True).headless_excluded is True
