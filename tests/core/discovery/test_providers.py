"""Providers packs register (``register_providers``), as discovery describes them: what is kept
for the manifest, what is refused (a built-in's name, a non-provider, a bad name, a hook that
raises) and names several packs register, withheld from all of them."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import pytest

import expediter
from expediter.core.discovery.catalogue import Catalogue, Conflict, PackInfo, PackLocation
from expediter.core.discovery.packs import build_catalogue, load_objects
from expediter.core.discovery.providers import (
    ProviderInfo,
    offered_providers,
    registered_providers,
    resolve_provider_conflicts,
)
from expediter.core.records.convert import structure
from expediter.core.turns.providers import PROVIDERS, check_pack_provider
from expediter.providers import RawCall, StreamAccumulator, ToolSpec


class Echo(expediter.Provider):
    """A provider whose responses list their calls as ``{"calls": [{"id", "name", "args"}]}``."""

    name = "echo"

    def tool(self, spec: ToolSpec) -> dict[str, Any]:
        return {"name": spec.name}

    def read_calls(self, response: Mapping[str, Any]) -> list[RawCall]:
        return [RawCall(c["id"], c["name"], c.get("args")) for c in response.get("calls", ())]

    def result_messages(self, calls: Sequence[Any], results: Sequence[Any]) -> list[dict[str, Any]]:
        return [{"id": call.call_id} for call in calls]


class Streams(StreamAccumulator):
    def feed(self, chunk: Any) -> None:
        pass


class StreamingEcho(Echo):
    name = "streaming-echo"

    def stream(self) -> StreamAccumulator:
        return Streams()


def named(name: Any, base: type[Echo] = Echo, **rules: Any) -> Echo:
    """An Echo provider under another name (and other name rules)."""
    return type("Named", (base,), {"name": name, **rules})()  # type: ignore[no-any-return]


class Registers:
    """A plugin registering the given objects (or raising ``fail``)."""

    def __init__(self, *objects: object, fail: BaseException | None = None) -> None:
        self.objects = objects
        self.fail = fail
        self.calls = 0

    @expediter.hookimpl
    def register_providers(self, register: Any) -> None:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        for obj in self.objects:
            register(obj)


def load(*plugins: object, check: Any = check_pack_provider) -> Any:
    return load_objects("host", plugins, provider_check=check)


# -- calling the hook -----------------------------------------------------------------------------


def test_the_hook_is_called_through_pluggy_for_each_plugin_implementing_it() -> None:
    first, second = Echo(), StreamingEcho()
    one, two = Registers(first), Registers(second)
    found = registered_providers([("one", one), ("two", two), ("none", object()), ("again", one)])
    assert sorted(found, key=id) == sorted([first, second], key=id)
    assert (one.calls, two.calls) == (1, 1)


def test_a_hook_that_raises_propagates_to_the_caller() -> None:
    with pytest.raises(RuntimeError, match="boom"):
        registered_providers([("bad", Registers(fail=RuntimeError("boom")))])


# -- describing a pack's providers ----------------------------------------------------------------


def test_a_pack_provider_is_described_with_its_pack_and_whether_it_streams() -> None:
    pack = load(Registers(Echo(), StreamingEcho()))
    assert pack.info.error is None
    assert pack.info.providers == ("echo", "streaming-echo")
    assert pack.info.streaming_providers == ("streaming-echo",)
    assert pack.providers == [
        ProviderInfo("echo", "host", False, None, "host", pack.info.id),
        ProviderInfo("streaming-echo", "host", True, None, "host", pack.info.id),
    ]
    assert "register_providers" in pack.info.hooks
    # Not a call-pipeline hook: a pack with only providers is never imported to build the
    # host's plugin manager.
    assert "register_providers" not in pack.info.host_hooks


def test_without_a_check_the_providers_are_not_described() -> None:
    plugin = Registers(Echo())
    pack = load(plugin, check=None)
    assert (pack.providers, pack.info.providers, pack.info.error) == ([], (), None)
    assert plugin.calls == 0


REFUSED = [
    pytest.param(named("openai"), "'openai' is a built-in provider's name", id="built-in name"),
    pytest.param(named("gemini"), "the built-in stays", id="another built-in name"),
    pytest.param(Echo, "got the class Echo, not an instance: call register(Echo())", id="class"),
    pytest.param(object(), "not an expediter.Provider", id="not a provider"),
    pytest.param({"name": "dict"}, "not an expediter.Provider", id="a dict"),
    pytest.param(named("Bad Name"), "provider name 'Bad Name' is not valid", id="spaces"),
    pytest.param(named(""), "is not valid", id="empty"),
    pytest.param(named("x" * 65), "is not valid", id="too long"),
    pytest.param(named("ok\x1b[31m"), "is not valid", id="escape sequence"),
    pytest.param(named(7), "provider name 7 is not valid", id="not text"),
    pytest.param(named("short", max_name_length=0), "max_name_length", id="no length"),
    pytest.param(named("short", max_name_length="9"), "max_name_length", id="text length"),
    pytest.param(named("rx", name_pattern="(["), "not a regular expression", id="bad pattern"),
]


@pytest.mark.parametrize(("obj", "problem"), REFUSED)
def test_a_refused_provider_is_a_load_error_of_its_pack_with_a_warning(
    obj: object, problem: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "expediter")
    pack = load(Registers(obj, StreamingEcho()))
    assert problem in (pack.info.error or "")
    assert (pack.info.error or "").startswith("register_providers: ")
    assert "\x1b" not in (pack.info.error or "")
    assert pack.info.providers == ("streaming-echo",), "the pack's other providers stay"
    assert problem in caplog.text


def test_a_built_in_name_is_refused_and_the_built_in_stays() -> None:
    pack = load(Registers(named("anthropic")))
    assert pack.providers == []
    assert type(PROVIDERS["anthropic"]).__module__ == "expediter.core.turns.providers.anthropic"


@pytest.mark.parametrize("error", [RuntimeError("no providers today"), SystemExit(3)])
def test_a_hook_that_raises_is_a_load_error_never_a_crash(error: BaseException) -> None:
    pack = load(Registers(fail=error))
    assert pack.info.error == f"register_providers: {type(error).__name__}: {error}"
    assert pack.providers == []


def test_a_provider_whose_streaming_property_raises_is_refused() -> None:
    class Broken(Echo):
        name = "broken"

        @property
        def streaming(self) -> bool:
            raise RuntimeError("nope")

    pack = load(Registers(Broken()))
    assert "its streaming property raised RuntimeError" in (pack.info.error or "")


def _missing(self: object) -> Any:
    raise NotImplementedError  # no message: the error must still say what raised


@pytest.mark.parametrize(
    ("obj", "problem"),
    [
        (named(property(_missing)), "Named object: reading its name raised NotImplementedError"),
        (
            named("lim", max_name_length=property(lambda self: {}["limit"])),
            "provider 'lim': reading its max_name_length raised KeyError: 'limit'",
        ),
        (
            named("pat", name_pattern=property(_missing)),
            "provider 'pat': reading its name_pattern raised NotImplementedError",
        ),
    ],
)
def test_a_provider_attribute_that_raises_is_a_load_error_saying_which(
    obj: object, problem: str
) -> None:
    pack = load(Registers(obj, StreamingEcho()))
    assert problem in (pack.info.error or "")
    assert pack.info.providers == ("streaming-echo",)


def test_one_pack_registering_a_name_twice_keeps_the_first() -> None:
    first = Echo()
    pack = load(Registers(first, Echo()))
    assert "provider 'echo' is registered twice" in (pack.info.error or "")
    assert pack.provider_objects == {"echo": first}


# -- several packs ------------------------------------------------------------------------------


def info(name: str, pack: str) -> ProviderInfo:
    return ProviderInfo(name, pack, False, "1.0", "entry-point", f"entry-point:{pack}")


def test_a_name_two_packs_register_is_withheld_from_both_naming_both() -> None:
    offered, conflicts = resolve_provider_conflicts(
        [info("bedrock", "left"), info("solo", "left"), info("bedrock", "right")]
    )
    assert [item.name for item in offered] == ["solo"]
    (conflict,) = conflicts
    assert (conflict.kind, conflict.tool) == ("provider", "bedrock")
    assert conflict.message.startswith(
        "provider 'bedrock' is registered by pack 'left' 1.0 (entry-point) and pack 'right' "
        "1.0 (entry-point); neither is offered."
    )
    assert "EXPEDITER_DISABLE_PLUGINS=left or EXPEDITER_DISABLE_PLUGINS=right" in conflict.message


def test_a_third_registration_of_a_withheld_name_stays_withheld() -> None:
    _, conflicts = resolve_provider_conflicts([info("x", "a"), info("x", "b")])
    offered, again = resolve_provider_conflicts([info("x", "c")], conflicts)
    assert offered == []
    assert [pack[0] for pack in again[0].packs] == ["a", "b", "c"]


def test_the_catalogue_withholds_conflicting_pack_providers() -> None:
    left = load_objects("host", [Registers(Echo())], provider_check=check_pack_provider)
    right = attrs.evolve(
        left,
        info=attrs.evolve(left.info, name="other", location=PackLocation(path="/other.py")),
        providers=[attrs.evolve(left.providers[0], pack="other", pack_id="host:/other.py")],
    )
    catalogue = build_catalogue([left, right])
    assert offered_providers(catalogue) == {}
    conflict = catalogue.provider_conflict("echo")
    assert conflict is not None
    assert [pack[0] for pack in conflict.packs] == ["host", "other"]
    assert conflict.message in catalogue.errors
    assert catalogue.conflicts == (), "a provider conflict is not a tool conflict"


# -- the manifest -------------------------------------------------------------------------------

PACK = PackInfo(
    "expediter-bedrock",
    "0.1.0",
    "entry-point",
    PackLocation((("bedrock", "expediter_bedrock"),), "expediter-bedrock"),
    ("register_providers",),
    (),
    providers=("bedrock", "plain"),
    streaming_providers=("bedrock",),
)
BEDROCK = ProviderInfo(
    "bedrock", "expediter-bedrock", True, "0.1.0", "entry-point", "entry-point:expediter-bedrock"
)
CONFLICT = Conflict("dup", (("a", "1", "entry-point", "entry-point:a"),), kind="provider")
FULL = Catalogue((PACK,), provider_conflicts=(CONFLICT,))


def test_pack_providers_round_trip_through_the_manifest_reader() -> None:
    data = json.loads(json.dumps(FULL.to_dict()))
    assert data["packs"][0]["providers"] == ["bedrock", "plain"]
    assert data["packs"][0]["streaming_providers"] == ["bedrock"]
    assert Catalogue.from_dict(data) == structure(data, Catalogue) == FULL
    assert PackInfo.from_dict(data["packs"][0]) == PACK
    assert Conflict.from_dict(data["provider_conflicts"][0]) == CONFLICT
    assert ProviderInfo.from_dict(json.loads(json.dumps(BEDROCK.to_dict()))) == BEDROCK


def test_the_offered_providers_come_from_the_packs_minus_the_withheld_names() -> None:
    offered = offered_providers(Catalogue.from_dict(json.loads(json.dumps(FULL.to_dict()))))
    assert offered == {
        "bedrock": BEDROCK,
        "plain": attrs.evolve(BEDROCK, name="plain", streaming=False),
    }
    withheld = attrs.evolve(CONFLICT, tool="plain")
    assert list(offered_providers(Catalogue((PACK,), provider_conflicts=(withheld,)))) == [
        "bedrock"
    ]


@pytest.mark.parametrize(
    "data",
    [
        {"packs": [{"name": "p", "source": "host"}]},
        {"packs": [{"name": "p", "source": "host", "providers": ["x"]}]},
        {"provider_conflicts": [{"tool": "t", "packs": [{"name": "a", "source": "host"}]}]},
        {"conflicts": [{"tool": "t", "packs": [{"name": "a", "source": "host"}]}]},
    ],
)
def test_the_manifest_reader_builds_what_the_converter_builds_from_partial_data(
    data: dict[str, Any],
) -> None:
    assert Catalogue.from_dict(data) == structure(data, Catalogue)


def test_a_provider_summary_is_name_pack_and_streaming() -> None:
    assert BEDROCK.summary() == {"name": "bedrock", "pack": "expediter-bedrock", "streaming": True}
