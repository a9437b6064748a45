"""Pack providers through a real host: listed beside the built-ins, found by name (the pack
imported when first used), used by toolsets, held to their name rules; refused, conflicting
and vanished providers are errors that say what to do."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

import expediter
from expediter.core.host import Host
from expediter.core.turns.providers import PROVIDERS
from expediter.errors import PluginLoadError, UnknownProvider
from expediter.providers import RawCall, ToolSpec

BUILT_IN = ["anthropic", "gemini", "mistral", "ollama", "openai", "openai-responses"]


class Echo(expediter.Provider):
    """Responses list their calls as ``{"calls": [{"id", "name", "args"}]}``."""

    name = "echo"

    def tool(self, spec: ToolSpec) -> dict[str, Any]:
        return {"fn": spec.name, "params": spec.parameters}

    def read_calls(self, response: Mapping[str, Any]) -> list[RawCall]:
        return [RawCall(c["id"], c["name"], c.get("args")) for c in response.get("calls", ())]

    def result_messages(self, calls: Sequence[Any], results: Sequence[Any]) -> list[dict[str, Any]]:
        return [
            {"id": call.call_id, "status": getattr(result, "status", None)}
            for call, result in zip(calls, results, strict=True)
        ]


class Registers:
    def __init__(self, *objects: object) -> None:
        self.objects = objects

    @expediter.hookimpl
    def register_providers(self, register: Any) -> None:
        for obj in self.objects:
            register(obj)


@expediter.tool
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


@expediter.tool
def a_rather_long_function_name(text: str) -> str:
    """Whisper."""
    return text.lower()


def test_the_host_lists_the_built_ins_and_the_pack_providers(
    make_host: Callable[..., Host],
) -> None:
    host = make_host(shout, Registers(Echo()))
    listed = {info.name: info for info in host.providers()}
    assert list(listed) == sorted([*BUILT_IN, "echo"])
    assert {listed[name].pack for name in BUILT_IN} == {"expediter"}
    assert all(listed[name].streaming for name in BUILT_IN)
    assert (listed["echo"].pack, listed["echo"].streaming, listed["echo"].source) == (
        "host",
        False,
        "host",
    )


def test_a_toolset_speaks_a_pack_provider(make_host: Callable[..., Host]) -> None:
    host = make_host(shout, Registers(Echo()))
    toolset = host.toolset()
    parameters = toolset.schemas("openai")[0]["function"]["parameters"]
    assert toolset.schemas("echo") == [{"fn": "shout", "params": parameters}]
    calls = toolset.parse_calls(
        "echo", {"calls": [{"id": "1", "name": "shout", "args": '{"text": "hi"}'}]}
    )
    assert [(call.tool, call.error) for call in calls] == [("shout", None)]
    events = list(toolset.run(calls))
    assert toolset.result_messages("echo", calls, events) == [{"id": "1", "status": "completed"}]
    assert toolset.result_messages("echo", calls, []) == [{"id": "1", "status": None}]
    with pytest.raises(UnknownProvider, match="the echo provider has no stream accumulator"):
        toolset.stream("echo")


def test_a_provider_name_is_found_whatever_its_case_and_spaces(
    make_host: Callable[..., Host],
) -> None:
    host = make_host(Registers(Echo()))
    assert host.provider(" ECHO ") is host.provider("echo")
    assert host.provider("OpenAI") is PROVIDERS["openai"]


@pytest.mark.parametrize("name", ["bedrock", "", 7, None])
def test_an_unknown_provider_lists_every_known_name(
    make_host: Callable[..., Host], name: Any
) -> None:
    host = make_host(Registers(Echo()))
    with pytest.raises(UnknownProvider) as caught:
        host.toolset().schemas(name)
    assert f"use one of: {', '.join(sorted([*BUILT_IN, 'echo']))}" in str(caught.value)


def test_a_pack_cannot_take_a_built_in_name(make_host: Callable[..., Host]) -> None:
    impostor = type("Impostor", (Echo,), {"name": "openai"})()
    host = make_host(shout, Registers(impostor))
    assert any("'openai' is a built-in provider's name" in error for error in host.errors)
    assert host.provider("openai") is PROVIDERS["openai"]
    assert host.toolset().schemas("openai")[0]["type"] == "function"
    assert [info.pack for info in host.providers() if info.name == "openai"] == ["expediter"]


PACK_MODULE = """
import pathlib

import expediter
from expediter.providers import RawCall

pathlib.Path({log!r}).open("a").write("imported\\n")


class Plain(expediter.Provider):
    name = {name!r}

    def tool(self, spec):
        return {{"plain": spec.name}}

    def read_calls(self, response):
        return [RawCall("1", "shout", "{{}}")]

    def result_messages(self, calls, results):
        return []


@expediter.hookimpl
def register_providers(register):
    if pathlib.Path({switch!r}).exists():
        register(Plain())
"""


def provider_module(directory: Path, stem: str, name: str, tmp_path: Path) -> tuple[Path, Path]:
    """A tools-directory module registering provider ``name`` while its switch file exists;
    returns (switch, import log)."""
    directory.mkdir(exist_ok=True)
    switch, log = tmp_path / f"{stem}.on", tmp_path / f"{stem}.log"
    switch.touch()
    source = PACK_MODULE.format(log=str(log), name=name, switch=str(switch))
    (directory / f"{stem}.py").write_text(source)
    return switch, log


def forget_tool_modules() -> None:
    for name in [name for name in sys.modules if name.startswith("_expediter_tools_")]:
        del sys.modules[name]


def test_a_warm_host_imports_a_provider_pack_only_when_its_provider_is_used(
    tmp_path: Path, make_host: Callable[..., Host]
) -> None:
    tools = tmp_path / "tools"
    _, log = provider_module(tools, "plain_pack", "plain", tmp_path)
    make_host(shout, tools_path=(tools,))  # cold: discovery imports the pack once
    forget_tool_modules()
    host = make_host(shout, tools_path=(tools,))
    assert [info.pack for info in host.providers() if info.name == "plain"] == ["plain_pack"]
    assert log.read_text().count("imported") == 1, "listing providers imported the pack"
    toolset = host.toolset()
    toolset.schemas("openai")
    assert log.read_text().count("imported") == 1, "a built-in provider imported the pack"
    assert toolset.schemas("plain") == [{"plain": "shout"}]
    assert log.read_text().count("imported") == 2
    assert host.provider("plain") is host.provider("plain")


def test_a_provider_its_pack_no_longer_registers_says_to_refresh(
    tmp_path: Path, make_host: Callable[..., Host]
) -> None:
    tools = tmp_path / "tools"
    switch, _ = provider_module(tools, "fickle", "fickle", tmp_path)
    make_host(tools_path=(tools,))
    forget_tool_modules()
    switch.unlink()
    host = make_host(tools_path=(tools,))
    with pytest.raises(
        PluginLoadError, match=r"no longer provides the provider 'fickle'.*--refresh"
    ):
        host.provider("fickle")


def test_two_packs_registering_one_name_offer_neither(
    tmp_path: Path, make_host: Callable[..., Host]
) -> None:
    tools = tmp_path / "tools"
    provider_module(tools, "left", "twin", tmp_path)
    provider_module(tools, "right", "twin", tmp_path)
    host = make_host(
        shout, Registers(type("Twin", (Echo,), {"name": "twin"})()), tools_path=(tools,)
    )
    assert "twin" not in {info.name for info in host.providers()}
    (conflict,) = host.provider_conflicts
    assert [pack[0] for pack in conflict.packs] == ["left", "right", "host"]
    with pytest.raises(UnknownProvider) as caught:
        host.toolset().schemas("twin")
    assert str(caught.value) == conflict.message
    assert "provider 'twin' is registered by pack 'left'" in str(caught.value)
    assert conflict.message in host.errors


class Short(Echo):
    """Takes names of at most 10 characters, letters and underscores."""

    name = "short"
    max_name_length = 10
    name_pattern = r"[a-z_]+"


def test_functions_a_provider_cannot_name_are_left_out_with_a_warning(
    make_host: Callable[..., Host], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "expediter")
    host = make_host(shout, a_rather_long_function_name, Registers(Short()))
    toolset = host.toolset()
    assert [tool["fn"] for tool in toolset.schemas("short")] == ["shout"]
    assert "function 'a_rather_long_function_name' is not offered to short" in caplog.text
    assert "at most 10 characters matching [a-z_]+" in caplog.text
    assert len(toolset.schemas("openai")) == 2, "the built-ins' lists keep every function"
    caplog.clear()
    toolset.schemas("short")
    assert not caplog.text, "the list is built once per toolset composition"


def _raise(self: object, *args: object) -> Any:
    raise RuntimeError


@pytest.mark.parametrize(
    ("method", "use"),
    [
        ("tool", lambda toolset: toolset.schemas("faulty")),
        ("tools", lambda toolset: toolset.schemas("faulty")),
        ("parameters", lambda toolset: toolset.schemas("faulty")),
        ("read_calls", lambda toolset: toolset.parse_calls("faulty", {})),
        ("stream", lambda toolset: toolset.stream("faulty")),
        ("result_messages", lambda toolset: toolset.result_messages("faulty", [], [])),
    ],
)
def test_a_pack_adapter_that_raises_is_an_expediter_error_naming_its_class(
    make_host: Callable[..., Host], method: str, use: Callable[[expediter.Toolset], Any]
) -> None:
    faulty = type("Faulty", (Echo,), {"name": "faulty", method: _raise})
    toolset = make_host(shout, Registers(faulty())).toolset()
    with pytest.raises(expediter.errors.ArgumentError) as caught:
        use(toolset)
    message = str(caught.value)
    assert "the faulty adapter failed" in message
    assert f"({__name__}.Faulty)" in message, "the error names the pack's adapter class"
    assert "report it to the adapter's authors" in message
    assert type(caught.value.__cause__) is RuntimeError


def test_a_stream_accumulator_that_is_not_one_is_an_expediter_error(
    make_host: Callable[..., Host],
) -> None:
    odd = type("Odd", (Echo,), {"name": "odd", "stream": lambda self: None})
    toolset = make_host(shout, Registers(odd())).toolset()
    with pytest.raises(expediter.errors.ArgumentError, match="the odd adapter failed"):
        toolset.stream("odd")


class _Fragile(expediter.providers.StreamAccumulator):
    """A pack's accumulator that trips over a chunk it did not expect (and a broken
    ``message``)."""

    def __init__(self) -> None:
        self.calls: list[RawCall] = []

    def feed(self, chunk: Any) -> None:
        self.calls.append(RawCall(chunk["id"], chunk["name"], chunk.get("args")))

    def raw_calls(self) -> list[RawCall]:
        return self.calls

    def message(self) -> dict[str, Any]:
        raise RuntimeError


class Fragile(Echo):
    name = "fragile"

    def stream(self) -> _Fragile:
        return _Fragile()


def test_a_pack_accumulator_that_raises_in_parse_stream_is_an_expediter_error(
    make_host: Callable[..., Host],
) -> None:
    toolset = make_host(shout, Registers(Fragile())).toolset()
    chunks = [{"id": "1", "name": "shout", "args": {"text": "a"}}, {"model_said": "anything"}]
    with pytest.raises(expediter.errors.ArgumentError) as caught:
        toolset.parse_stream("fragile", chunks)
    message = str(caught.value)
    assert "the fragile stream accumulator failed" in message
    assert "report it to the adapter's authors" in message
    assert "model_said" not in message, "the pack's exception text is not copied"
    assert type(caught.value.__cause__) is KeyError
    stream = toolset.stream("fragile").feed_all(chunks[:1])
    with pytest.raises(expediter.errors.ArgumentError, match="fragile stream accumulator failed"):
        stream.message()


def test_an_error_from_the_chunks_iterator_is_not_blamed_on_the_adapter(
    make_host: Callable[..., Host],
) -> None:
    def chunks() -> Any:
        yield {"id": "1", "name": "shout", "args": {"text": "a"}}
        raise ConnectionError("the network went away")

    toolset = make_host(shout, Registers(Fragile())).toolset()
    with pytest.raises(ConnectionError):
        toolset.parse_stream("fragile", chunks())
    with pytest.raises(expediter.errors.ArgumentError, match="a stream is a sequence of chunks"):
        toolset.parse_stream("fragile", "not chunks")
