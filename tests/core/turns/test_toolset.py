"""Toolsets through a real host: schemas for every provider, a full round trip from schemas to
parsed calls to executed calls to result messages, strict mode and its nulls."""

from __future__ import annotations

import copy
import enum
import json
from collections.abc import Callable, Iterator
from typing import Any, Literal

import attrs
import pytest
from support.responses import provider_response

import expediter
from expediter.core.host import Host
from expediter.core.instances.defaults import default_instance_id
from expediter.core.records.calls import CallEvent, ToolCall
from expediter.core.turns.toolset import CLIENT_TOOL, Toolset
from expediter.errors import UnknownProvider
from expediter.hookspecs.tool import Action, CallContext

PROVIDERS = ("openai", "openai-responses", "anthropic", "gemini", "mistral", "ollama")
STRICT_PROVIDERS = ("openai", "openai-responses", "anthropic")


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


@attrs.frozen
class Address:
    """A postal address."""

    street: str
    city: str
    title: str | None = None


@attrs.frozen
class Contact:
    """The person who reported a problem."""

    name: str
    address: Address
    tags: list[str] = attrs.Factory(list)
    nickname: str | None = None


@expediter.tool
def file_ticket(
    contact: Contact,
    kind: Literal["bug", "feature"],
    labels: list[str],
    priority: Priority = Priority.LOW,
    note: str | None = None,
    due: str = "soon",
    title: str = "untitled",
) -> dict[str, Any]:
    """File a ticket in the tracker.

    Args:
        contact: Who reported it.
        kind: What sort of ticket.
        labels: Labels to add.
        priority: How urgent it is.
        note: A free-form note; null for none.
        due: When it is due.
        title: The ticket's title.
    """
    return {
        "contact": attrs.asdict(contact),
        "kind": kind,
        "labels": labels,
        "priority": priority.value,
        "note": note,
        "due": due,
        "title": title,
    }


@expediter.tool
def tally(counts: dict[str, int]) -> int:
    """Add up named counts."""
    return sum(counts.values())


@expediter.tool
def tag(**labels: str) -> dict[str, str]:
    """Attach free-form labels."""
    return labels


SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to look for."},
        "account": {"type": "string", "description": "The mailbox to search."},
    },
    "required": ["query", "account"],
}


class Mailbox:
    """A raw-hook tool: the operator fixes the account, and one action is switched off."""

    name = "mailbox"

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []

    @expediter.hookimpl
    def get_actions_metadata(self, context: CallContext) -> list[Action]:
        return [
            Action("search", "Search the mailbox.", SEARCH, fixed={"account": "ops@example.com"}),
            Action("purge", "Delete every message.", {"type": "object"}, active=False),
        ]

    @expediter.hookimpl
    def execute_action(self, action: str, arguments: dict[str, Any], context: CallContext) -> Any:
        self.received.append((action, arguments))
        return [{"subject": f"re: {arguments['query']}", "unread": True}]


LOOKUP_ORDER = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Find an order in the shop (run by the application).",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string"}},
            "required": ["order_id"],
        },
    },
}
INSTANCES = [
    {"tool": "mailbox", "instance_id": "mb-work", "name": "Work Mail"},
    {"tool": "mailbox", "instance_id": "mb-home", "name": "home/mail"},
]
TICKET = {
    "contact": {"name": "Ann", "address": {"street": "1 Main St", "city": "Oslo"}},
    "kind": "bug",
    "labels": ["ui", "urgent"],
    "priority": "high",
}


@pytest.fixture
def mailbox() -> Mailbox:
    return Mailbox()


@pytest.fixture
def host(make_host: Callable[..., Host], mailbox: Mailbox, monkeypatch: pytest.MonkeyPatch) -> Host:
    # The built-ins the plan calls (notes, todo_list and memory have their own tests).
    monkeypatch.setenv("EXPEDITER_DEFAULT_TOOLS", "clock,think,mailbox,file_ticket")
    return make_host(mailbox, file_ticket, builtins=True)


@pytest.fixture
def toolset(host: Host) -> Toolset:
    return host.toolset(instances=INSTANCES, client_tools=[LOOKUP_ORDER])


def declarations(provider: str, tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each emitted function by name, as ``{"parameters": ..., "strict": ..., "raw": ...}``."""
    if provider == "gemini":
        (tool,) = tools
        return {
            d["name"]: {"parameters": d["parameters_json_schema"], "strict": None, "raw": d}
            for d in tool["function_declarations"]
        }
    if provider == "anthropic":
        return {
            t["name"]: {"parameters": t["input_schema"], "strict": t.get("strict"), "raw": t}
            for t in tools
        }
    if provider == "openai-responses":
        return {
            t["name"]: {"parameters": t["parameters"], "strict": t["strict"], "raw": t}
            for t in tools
        }
    return {
        t["function"]["name"]: {
            "parameters": t["function"]["parameters"],
            "strict": t["function"].get("strict"),
            "raw": t,
        }
        for t in tools
    }


def object_nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema node that describes an object, anywhere in a schema."""
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            yield schema
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                for child in value.values():
                    yield from object_nodes(child)
            elif key in ("items", "additionalProperties"):
                yield from object_nodes(value)
            elif key in ("anyOf", "oneOf", "allOf"):
                for child in value:
                    yield from object_nodes(child)


def allows_null(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(allows_null(variant) for variant in schema.get("anyOf", ()))


# -- a round trip, per provider ----------------------------------------------------------------

#: What the model asks of every offered function, by ``(instance id, action)``.
PLAN: dict[tuple[str, str], dict[str, Any]] = {
    ("clock", "now"): {"timezone": "Asia/Tokyo"},
    ("clock", "convert"): {
        "time": "09:00",
        "from_timezone": "Europe/Paris",
        "to_timezone": "Mars/Olympus_Mons",
    },
    ("think", "think"): {"thought": "Check both mailboxes, then file the ticket."},
    ("file_ticket", "file_ticket"): TICKET,
    ("mailbox", "search"): {"query": "invoice"},
    ("mb-work", "search"): {"query": "standup"},
    ("mb-home", "search"): {"query": "school trip"},
    ("client:lookup_order", "lookup_order"): {"order_id": "A-1042"},
}
#: A name the model made up from a tool and an action; it must never be split or guessed.
HALLUCINATED = ("clock_now", {"timezone": "UTC"})


def read_results(
    provider: str, calls: list[ToolCall], messages: list[dict[str, Any]]
) -> list[tuple[Any, bool | None]]:
    """Each call's result payload from the result messages, in call order, with its error flag
    (None where the provider has no flag)."""
    if provider in ("openai", "mistral", "openai-responses"):
        key, text = (
            ("call_id", "output") if provider == "openai-responses" else ("tool_call_id", "content")
        )
        by_id = {message[key]: message for message in messages}
        assert len(by_id) == len(messages) == len(calls)
        if provider == "mistral":
            assert [by_id[c.call_id]["name"] for c in calls] == [c.name for c in calls]
        return [(by_id[call.call_id][text], None) for call in calls]
    if provider == "ollama":
        assert [m["tool_name"] for m in messages] == [c.name for c in calls]
        assert all(m["role"] == "tool" for m in messages)
        return [(m["content"], None) for m in messages]
    (message,) = messages
    assert message["role"] == "user"
    if provider == "anthropic":
        blocks = message["content"]
        assert {block["type"] for block in blocks} == {"tool_result"}
        assert [block["tool_use_id"] for block in blocks] == [call.call_id for call in calls]
        return [(block["content"], block["is_error"]) for block in blocks]
    parts = [part["functionResponse"] for part in message["parts"]]
    assert [part["name"] for part in parts] == [call.name for call in calls]
    return [(part["response"], "error" in part["response"]) for part in parts]


def run(toolset: Toolset, calls: list[ToolCall]) -> dict[str, CallEvent]:
    """Run the turn as a host application does (``toolset.run``), the application answering
    its client-side tool itself."""
    events = {}
    for call, event in zip(calls, toolset.run(calls), strict=True):
        if event.status == "requires_client_execution":
            assert call.tool == CLIENT_TOOL
            event = CallEvent(
                status="completed",
                key=event.key,
                call_id=call.call_id,
                name=call.name,
                tool=call.tool,
                action=call.action,
                arguments=call.arguments,
                result={"order_id": call.arguments["order_id"], "status": "shipped"},
            )
        events[call.call_id] = event
    return events


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_offered_function_round_trips_from_schema_to_result_message(
    provider: str, host: Host, toolset: Toolset, mailbox: Mailbox
) -> None:
    offered = declarations(provider, toolset.schemas(provider))
    targets = {}
    for name in offered:
        entry = toolset.name_map.resolve(name)
        assert entry is not None, name
        # A default tool's instance id is derived from its name.
        instance = entry.tool if entry.instance_id == default_instance_id(entry.tool) else None
        targets[(instance or entry.instance_id, entry.action)] = name
    assert set(targets) == set(PLAN)
    assert {targets[("mb-work", "search")], targets[("mb-home", "search")]} == {
        "Work_Mail_search",
        "home_mail_search",
    }

    planned = [(key, targets[key], arguments) for key, arguments in PLAN.items()]
    planned.append((("?", "?"), *HALLUCINATED))
    response = provider_response(
        provider, [(f"call_{i:02d}", name, args) for i, (_, name, args) in enumerate(planned)]
    )
    calls = toolset.parse_calls(provider, response)

    assert [call.name for call in calls] == [name for _, name, _ in planned]
    assert len({call.call_id for call in calls}) == len(calls)
    for call, (key, _, arguments) in zip(calls[:-1], planned[:-1], strict=True):
        instance = call.tool if call.instance_id == default_instance_id(call.tool or "") else None
        assert (instance or call.instance_id, call.action, call.error) == (*key, None)
        assert call.arguments == arguments
    unknown = calls[-1]
    assert (unknown.resolved, unknown.instance_id, unknown.action) == (False, None, None)
    assert "clock_now" in (unknown.error or "")

    events = run(toolset, calls)
    messages = toolset.result_messages(provider, calls, events.values())
    for call, (payload, flag) in zip(calls, read_results(provider, calls, messages), strict=True):
        event = events.get(call.call_id)
        failed = event is None or not event.ok
        assert flag in (None, failed), call.name
        if provider == "gemini":
            assert isinstance(payload, dict)
            if not failed:
                assert event is not None
                expected = event.result
                assert payload == expected or expected in payload.values()
            continue
        assert isinstance(payload, str)
        if call is unknown:
            assert "clock_now" in payload
        elif call.action == "convert":
            assert "Mars/Olympus_Mons" in payload
        else:
            assert event is not None
            assert event.ok
            value = event.result
            assert payload == value if isinstance(value, str) else json.loads(payload) == value

    # The hidden account never reached the model, but every instance's call carried it.
    assert [arguments for _, arguments in mailbox.received] == [
        {"query": query, "account": "ops@example.com"}
        for query in ("invoice", "standup", "school trip")
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_call_without_a_result_is_answered_as_an_error_not_with_another_calls_result(
    provider: str, host: Host
) -> None:
    toolset = host.toolset()
    thoughts = ["first", "second", "third"]
    response = provider_response(
        provider, [(f"call_{i}", "think", {"thought": t}) for i, t in enumerate(thoughts)]
    )
    calls = toolset.parse_calls(provider, response)
    first, _, third = toolset.run(calls)
    messages = toolset.result_messages(provider, calls, [first, third])
    results = read_results(provider, calls, messages)
    payloads = [
        payload.get("result", payload) if isinstance(payload, dict) else payload
        for payload, _ in results
    ]
    assert payloads[0] == "first"
    assert payloads[2] == "third"
    assert "second" not in json.dumps(payloads[1])
    assert "third" not in json.dumps(payloads[1])
    assert [flag for _, flag in results] in ([None] * 3, [False, True, False])


# -- schemas --------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_json_schema_passes_through_faithfully(provider: str, host: Host) -> None:
    original = host.tool_info("file_ticket").actions[0].parameters
    schema = declarations(provider, host.toolset().schemas(provider))["file_ticket"]["parameters"]
    assert schema == original
    assert schema["required"] == ["contact", "kind", "labels"]
    assert schema["additionalProperties"] is False
    properties = schema["properties"]
    assert properties["contact"]["$ref"] == "#/$defs/Contact"
    assert properties["contact"]["description"] == "Who reported it."
    assert properties["kind"]["enum"] == ["bug", "feature"]
    assert properties["labels"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "Labels to add.",
    }
    assert properties["priority"]["enum"] == ["low", "high"]
    assert allows_null(properties["note"])
    contact = schema["$defs"]["Contact"]
    assert contact["required"] == ["name", "address"]
    assert contact["description"] == "The person who reported a problem."
    assert contact["properties"]["address"] == {"$ref": "#/$defs/Address"}
    assert schema["$defs"]["Address"]["required"] == ["street", "city"]
    assert "title" in schema["$defs"]["Address"]["properties"]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("strict", [False, True])
def test_fixed_parameters_are_hidden_from_the_model(
    provider: str, strict: bool, toolset: Toolset
) -> None:
    offered = declarations(provider, toolset.schemas(provider, strict=strict))
    for name in ("mailbox_search", "Work_Mail_search", "home_mail_search"):
        schema = offered[name]["parameters"]
        assert list(schema["properties"]) == ["query"]
        assert schema["required"] == ["query"]
        assert "ops@example.com" not in json.dumps(offered[name]["raw"])


@pytest.mark.parametrize("provider", PROVIDERS)
def test_inactive_actions_are_left_out(provider: str, toolset: Toolset) -> None:
    names = set(declarations(provider, toolset.schemas(provider)))
    assert names == set(toolset.name_map.names)
    assert not any("purge" in name for name in names)


@pytest.mark.parametrize("provider", STRICT_PROVIDERS)
def test_strict_schemas_close_objects_and_require_every_property(provider: str, host: Host) -> None:
    offered = declarations(provider, host.toolset().schemas(provider, strict=True))
    ticket = offered["file_ticket"]
    assert ticket["strict"] is True
    nodes = list(object_nodes(ticket["parameters"]))
    # The parameters, Contact and Address, plus copies inlined where a $ref had a description.
    assert len(nodes) >= 3
    for node in nodes:
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])
    properties = ticket["parameters"]["properties"]
    for optional in ("priority", "note", "due", "title"):
        assert allows_null(properties[optional]), optional
    for required in ("kind", "labels"):
        assert not allows_null(properties[required]), required
    contact = ticket["parameters"]["$defs"]["Contact"]["properties"]
    assert allows_null(contact["tags"])
    assert allows_null(contact["nickname"])
    assert not allows_null(contact["name"])


@pytest.mark.parametrize("provider", STRICT_PROVIDERS)
def test_maps_and_kwargs_fall_back_to_non_strict_for_that_function_only(
    provider: str, make_host: Callable[..., Host]
) -> None:
    host = make_host(file_ticket, tally, tag, builtins=True)
    offered = declarations(provider, host.toolset().schemas(provider, strict=True))
    for loose in ("tally", "tag"):
        assert offered[loose]["strict"] in (None, False), loose
        parameters = offered[loose]["parameters"]
        assert parameters == host.tool_info(loose).actions[0].parameters
    for name in ("file_ticket", "now", "convert", "think"):
        assert offered[name]["strict"] is True, name


@pytest.mark.parametrize("provider", STRICT_PROVIDERS)
def test_non_strict_schemas_carry_no_strict_flag(provider: str, host: Host) -> None:
    offered = declarations(provider, host.toolset().schemas(provider))
    assert {entry["strict"] for entry in offered.values()} <= {None, False}


@pytest.mark.parametrize("provider", ["gemini", "mistral", "ollama"])
def test_strict_is_ignored_by_providers_without_strict_mode(provider: str, host: Host) -> None:
    toolset = host.toolset()
    assert toolset.schemas(provider, strict=True) == toolset.schemas(provider)
    assert '"strict"' not in json.dumps(toolset.schemas(provider, strict=True))


def test_unknown_providers_are_refused_with_the_list_of_names(host: Host) -> None:
    toolset = host.toolset()
    with pytest.raises(UnknownProvider) as caught:
        toolset.schemas("cohere")
    assert all(name in str(caught.value) for name in PROVIDERS)
    with pytest.raises(UnknownProvider):
        toolset.parse_calls("cohere", {"choices": []})


def test_extending_the_returned_schema_list_does_not_change_the_next_call(host: Host) -> None:
    toolset = host.toolset()
    tools = toolset.schemas("openai")
    count = len(tools)
    tools.append({"type": "web_search"})
    assert len(toolset.schemas("openai")) == count


def test_returned_parameter_schemas_are_read_only_so_later_toolsets_stay_intact(
    host: Host,
) -> None:
    tools = host.toolset().schemas("openai")
    parameters = tools[0]["function"]["parameters"]
    with pytest.raises(TypeError, match=r"copy\.deepcopy\(\) it before changing it"):
        parameters["properties"]["injected"] = {"type": "string"}
    with pytest.raises(TypeError):
        parameters["properties"].pop(next(iter(parameters["properties"])))
    mine = copy.deepcopy(parameters)
    mine["properties"]["injected"] = {"type": "string"}
    assert type(mine) is dict
    again = host.toolset().schemas("openai")[0]["function"]["parameters"]
    assert "injected" not in again["properties"]
    assert json.loads(json.dumps(again)) == again


# -- strict-mode nulls ------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_nulls_for_optional_parameters_are_dropped_before_the_tool_sees_them(
    provider: str, host: Host
) -> None:
    toolset = host.toolset()
    toolset.schemas(provider, strict=True)
    arguments = {
        "contact": {
            "name": "Ann",
            "address": {"street": "1 Main St", "city": "Oslo", "title": None},
            "tags": None,
            "nickname": None,
        },
        "kind": "feature",
        "labels": [],
        "priority": None,
        "note": None,
        "due": None,
        "title": None,
    }
    (call,) = toolset.parse_calls(
        provider, provider_response(provider, [("call_1", "file_ticket", arguments)])
    )
    assert call.error is None
    assert call.arguments == {
        "contact": {
            "name": "Ann",
            "address": {"street": "1 Main St", "city": "Oslo", "title": None},
            "nickname": None,
        },
        "kind": "feature",
        "labels": [],
        "note": None,
    }
    (event,) = toolset.run([call])
    assert event.ok, event.error
    assert event.result["priority"] == "low"
    assert (event.result["due"], event.result["title"], event.result["note"]) == (
        "soon",
        "untitled",
        None,
    )
    assert event.result["contact"]["tags"] == []


def test_a_malformed_call_is_answered_with_what_was_wrong_and_what_is_offered(
    host: Host,
) -> None:
    toolset = host.toolset()
    response = {
        "choices": [
            {"message": {"tool_calls": [{"id": "c1", "type": "function", "function": "now"}]}}
        ]
    }
    (call,) = toolset.parse_calls("openai", response)
    (event,) = toolset.run([call])
    assert event.status == "error"
    assert event.error is not None
    assert event.error.startswith("the call could not be read:")
    assert '"function" must be an object' in event.error
    assert "Available: " in event.error
