"""Dispatch cost with 1 and with 500 registered tools, beside a plain call, pluggy and llm."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from typing import Any

import pluggy
from measure import Figure, Report, parse_args, time_statements

import expediter
from expediter.core.host import Host
from expediter.hookspecs.tool import Action, CallContext

TARGET = "target"
ARGUMENTS: dict[str, Any] = {"a": 1, "b": 2}
EXPECTED = "3"

Case = tuple[str, Mapping[str, Any]]


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


# -- the pluggy baseline: one plugin implementing one firstresult hook -------------------------

_baseline_spec = pluggy.HookspecMarker("benchbaseline")
_baseline_impl = pluggy.HookimplMarker("benchbaseline")


class _BaselineSpec:
    @_baseline_spec(firstresult=True)
    def execute_action(self, action: str, arguments: dict[str, Any], context: object) -> Any:
        """Run one action."""


class _BaselinePlugin:
    @_baseline_impl
    def execute_action(self, action: str, arguments: dict[str, Any], context: object) -> Any:
        return add(**arguments)


def pluggy_case(context: CallContext) -> Case:
    """A plain pluggy hook call doing what the tool does."""
    manager = pluggy.PluginManager("benchbaseline")
    manager.add_hookspecs(_BaselineSpec)
    manager.register(_BaselinePlugin())
    namespace = {"hook": manager.hook.execute_action, "arguments": ARGUMENTS, "context": context}
    return "hook(action='target', arguments=arguments, context=context)", namespace


# -- the installed tools: @tool functions, raw hook objects and Toolbox classes -----------------


class _RawTool:
    """A tool written against the hooks directly, without the authoring sugar."""

    def __init__(self, name: str) -> None:
        self.name = name

    @expediter.hookimpl
    def get_actions_metadata(self, context: CallContext) -> list[Action]:
        schema: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "integer"}}}
        return [Action(name="run", description="Return x.", parameters=schema)]

    @expediter.hookimpl
    def execute_action(self, action: str, arguments: dict[str, Any], context: CallContext) -> Any:
        return arguments.get("x")


def _function(index: int) -> Callable[..., Any]:
    def scale(x: int, factor: int = 2) -> int:
        """Multiply x by a factor."""
        return x * factor + index

    scale.__name__ = scale.__qualname__ = f"scale_{index}"
    return scale


def _ping(self: expediter.Toolbox, text: str) -> str:
    """Echo the text back."""
    return text


def filler_tools(count: int) -> Iterator[object]:
    """``count`` distinct tools, a third of each kind."""
    for index in range(count):
        kind = index % 3
        if kind == 0:
            yield expediter.tool(name=f"t{index}")(_function(index))
        elif kind == 1:
            yield _RawTool(f"raw{index}")
        else:
            members = {
                "name": f"box{index}",
                "__doc__": "A toolbox.",
                "ping": expediter.action(_ping),
            }
            yield type(f"Box{index}", (expediter.Toolbox,), members)


def build_host(tools: int, home: str) -> Host:
    """A host offering ``target`` plus ``tools - 1`` other tools, every one of them loaded."""
    target = expediter.tool(name=TARGET)(add)
    # No ledger: these budgets are the host's own overhead (bench_ledger.py measures the ledger).
    host = Host(
        autoload=False,
        builtins=False,
        plugins=[target, *filler_tools(tools - 1)],
        home=home,
        record_calls=False,
    )
    for info in host.catalogue(include_internal=True):
        host.loaded_tools.load(info.name)
    return host


def dispatch_case(host: Host) -> Case:
    """``Registry.execute`` on the loaded ``target`` instance."""
    loaded = host.loaded_tools.load(TARGET)
    context = CallContext(tool=TARGET, instance_id=loaded.instance_id)
    namespace = {
        "execute": host.loaded_tools.execute,
        "instance_id": loaded.instance_id,
        "arguments": ARGUMENTS,
        "context": context,
    }
    return "execute(instance_id, 'target', arguments, context)", namespace


def call_case(host: Host) -> Case:
    """The full ``Host.call`` path (checks, context, result normalization, event)."""
    return "call('target', 'target', arguments)", {"call": host.call, "arguments": ARGUMENTS}


def llm_case() -> Case | str:
    """llm's ``execute_tool_calls`` on a finished response holding one call; or why not."""
    try:
        import llm
        from llm.models import ToolCall
    except ImportError as exc:
        return f"llm is not importable ({exc}); install the bench extra"

    class OfflineModel(llm.Model):
        """A model that answers every prompt with one tool call and never touches the network."""

        model_id = "expediter-bench-offline"
        supports_tools = True

        def execute(self, prompt: Any, stream: Any, response: Any, conversation: Any) -> Any:
            call = ToolCall(name="add", arguments=dict(ARGUMENTS), tool_call_id="call_1")
            response.add_tool_call(call)
            return iter(())

    try:
        response = OfflineModel().prompt("add", tools=[add], stream=False)
        response.tool_calls()
    except Exception as exc:
        return f"cannot build an offline llm response ({type(exc).__name__}: {exc})"
    return "response.execute_tool_calls()", {"response": response}


def _result(case: Case) -> str:
    """What a case computes, as text (a Host.call event's result, llm's tool output)."""
    statement, namespace = case
    value = eval(statement, dict(namespace))
    if isinstance(value, list):
        value = value[0].output
    return str(getattr(value, "result", value))


def main() -> int:
    """Measure and report."""
    args = parse_args(__doc__)
    tools, rounds, batch = (20, 3, 0.005) if args.quick else (500, 21, 0.05)
    report = Report("dispatch", args.quick)
    report.settings.update(tools=tools, rounds=rounds, batch_seconds=batch, arguments=ARGUMENTS)
    with ExitStack() as stack:
        homes = [stack.enter_context(tempfile.TemporaryDirectory()) for _ in range(2)]
        one = stack.enter_context(build_host(1, homes[0]))
        many = stack.enter_context(build_host(tools, homes[1]))
        offered = len(many.catalogue(include_internal=True))
        report.check(
            f"{tools} tools offered and loaded", offered == len(many.loaded_tools) == tools
        )
        context = CallContext(tool=TARGET, instance_id=TARGET)
        cases: dict[str, Case] = {
            "plain": ("add(**arguments)", {"add": add, "arguments": ARGUMENTS}),
            "pluggy": pluggy_case(context),
            "dispatch_1": dispatch_case(one),
            f"dispatch_{tools}": dispatch_case(many),
            "call_1": call_case(one),
            f"call_{tools}": call_case(many),
        }
        llm = llm_case()
        if isinstance(llm, str):
            if not args.quick:
                report.check("llm is installed (bench extra)", False, llm)
        else:
            cases["llm"] = llm
        wrong = {name: got for name, case in cases.items() if (got := _result(case)) != EXPECTED}
        report.check("every case computes add(1, 2)", not wrong, repr(wrong) if wrong else "")
        runs = time_statements(cases, rounds=rounds, batch_seconds=batch)

    report.add(Figure("plain", "add(**arguments) called directly", runs["plain"]))
    report.add(Figure("pluggy", "a firstresult hook, one plugin", runs["pluggy"]))
    for count in (1, tools):
        report.add(
            Figure(
                f"dispatch_{count}",
                f"Registry.execute, {count} tool(s) loaded",
                runs[f"dispatch_{count}"],
            )
        )
    for count in (1, tools):
        report.add(
            Figure(f"call_{count}", f"Host.call, {count} tool(s), no ledger", runs[f"call_{count}"])
        )
    skipped = llm if isinstance(llm, str) else None
    report.add(
        Figure("llm", "llm Response.execute_tool_calls, one call", runs.get("llm", ()), skipped)
    )

    report.ratio(f"dispatch with {tools} tools", f"dispatch_{tools}", "dispatch_1", 1.1)
    report.ratio("host overhead per call, trivial tool, no ledger", "call_1", "llm", 1.0)
    report.ratio("dispatch vs plain function", "dispatch_1", "plain")
    report.ratio("dispatch vs plain pluggy hook", "dispatch_1", "pluggy")
    report.ratio(f"Host.call with {tools} tools", f"call_{tools}", "call_1")
    report.ratio("Host.call vs dispatch", "call_1", "dispatch_1")
    return report.finish(args.results_dir)


if __name__ == "__main__":
    sys.exit(main())
