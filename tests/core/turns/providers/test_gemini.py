"""Gemini: declarations with ``parameters_json_schema`` (minus the keys Gemini rejects), id-less
calls given stable ids, thought signatures carried back, and ``functionResponse`` objects."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from support.responses import RESPONSES, load

import expediter
from expediter.core.host import Host
from expediter.core.records.calls import CallEvent, ToolCall
from expediter.core.turns.toolset import Toolset
from expediter.hookspecs.tool import Action, CallContext

NINE_ALPHANUMERICS = re.compile(r"^[A-Za-z0-9]{9}$")
SIGNATURE = "m3pY7AiGLpvC3QKfrr8mBvIFRWwUrWT3cxfJ5IaIPsmbYWy75UCC+9YAg7BhZZdv"


MAP_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "RenderMap",
    "type": "object",
    "properties": {
        "title": {"type": "string", "title": "Title", "description": "The map's title."},
        "style": {"const": "satellite", "description": "The only style there is."},
        "layer": {
            "title": "Layer",
            "anyOf": [{"const": "roads"}, {"const": "rivers"}, {"type": "null"}],
        },
        "pins": {"type": "array", "items": {"$ref": "#/$defs/Pin"}},
    },
    "required": ["title", "style"],
    "additionalProperties": False,
    "$defs": {
        "Pin": {
            "title": "Pin",
            "type": "object",
            "properties": {"kind": {"const": "poi"}, "title": {"type": "string"}},
            "required": ["kind", "title"],
        }
    },
}


class Maps:
    """A raw-hook tool with a hand-written schema full of keys Gemini rejects."""

    name = "maps"

    @expediter.hookimpl
    def get_actions_metadata(self, context: CallContext) -> list[Action]:
        return [
            Action("render", "Render a map.", MAP_SCHEMA),
            Action("2fa_code", "Send a sign-in code.", {"type": "object", "properties": {}}),
        ]

    @expediter.hookimpl
    def execute_action(self, action: str, arguments: dict[str, Any], context: CallContext) -> Any:
        return None if action == "2fa_code" else len(arguments.get("pins", []))


def gemini(*parts: dict[str, Any]) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": list(parts)}, "finishReason": "STOP", "index": 0}
        ],
        "modelVersion": "gemini-2.5-flash",
    }


def run_all(toolset: Toolset, calls: list[ToolCall]) -> list[CallEvent]:
    """Run a turn's calls the way a host application does (``toolset.run``)."""
    return list(toolset.run(calls))


def keys_anywhere(schema: Any, key: str) -> list[Any]:
    """Values of a keyword in every schema node (skipping the names under ``properties``)."""
    found = []
    if isinstance(schema, dict):
        for name, value in schema.items():
            if name == key:
                found.append(value)
            if name in ("properties", "$defs"):
                for child in value.values():
                    found.extend(keys_anywhere(child, key))
            else:
                found.extend(keys_anywhere(value, key))
    elif isinstance(schema, list):
        for item in schema:
            found.extend(keys_anywhere(item, key))
    return found


# -- declarations -------------------------------------------------------------------------------


def test_declarations_come_as_one_tool_with_parameters_json_schema(toolset: Toolset) -> None:
    (tool,) = toolset.schemas("gemini")
    assert list(tool) == ["function_declarations"]
    declarations = tool["function_declarations"]
    assert [d["name"] for d in declarations] == ["now", "convert", "think"]
    for declaration in declarations:
        assert set(declaration) == {"name", "description", "parameters_json_schema"}
        assert declaration["parameters_json_schema"]["type"] == "object"


def test_strict_mode_changes_nothing_for_gemini(toolset: Toolset) -> None:
    assert toolset.schemas("gemini", strict=True) == toolset.schemas("gemini")


def test_an_empty_toolset_offers_no_gemini_tool(make_host: Callable[..., Host]) -> None:
    assert make_host().toolset().schemas("gemini") == []


def test_schema_keys_gemini_rejects_are_removed_or_rewritten(
    make_host: Callable[..., Host],
) -> None:
    toolset = make_host(Maps()).toolset()
    (tool,) = toolset.schemas("gemini")
    render = next(d for d in tool["function_declarations"] if d["name"] == "render")
    schema = render["parameters_json_schema"]
    assert keys_anywhere(schema, "$schema") == []
    assert keys_anywhere(schema, "title") == []
    assert keys_anywhere(schema, "const") == []
    # A property *named* title is a parameter, not the keyword.
    assert schema["properties"]["title"] == {"type": "string", "description": "The map's title."}
    assert schema["$defs"]["Pin"]["properties"]["title"] == {"type": "string"}
    assert schema["required"] == ["title", "style"]
    assert schema["$defs"]["Pin"]["required"] == ["kind", "title"]
    assert schema["properties"]["style"] == {
        "enum": ["satellite"],
        "description": "The only style there is.",
    }
    assert schema["properties"]["layer"]["anyOf"] == [
        {"enum": ["roads"]},
        {"enum": ["rivers"]},
        {"type": "null"},
    ]
    assert schema["$defs"]["Pin"]["properties"]["kind"] == {"enum": ["poi"]}
    assert schema["properties"]["pins"]["items"] == {"$ref": "#/$defs/Pin"}


def test_other_providers_keep_the_keys_gemini_rejects(make_host: Callable[..., Host]) -> None:
    tools = make_host(Maps()).toolset().schemas("openai")
    render = next(t for t in tools if t["function"]["name"] == "render")
    assert render["function"]["parameters"] == MAP_SCHEMA


def test_function_names_start_with_a_letter_or_underscore(make_host: Callable[..., Host]) -> None:
    toolset = make_host(Maps()).toolset()
    (tool,) = toolset.schemas("gemini")
    names = [d["name"] for d in tool["function_declarations"]]
    assert "2fa_code" not in names
    assert all(re.match(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$", name) for name in names)
    (code_name,) = (name for name in names if "2fa_code" in name)
    entry = toolset.name_map.resolve(code_name)
    assert entry is not None
    assert (entry.tool, entry.action) == ("maps", "2fa_code")


# -- calls without ids ------------------------------------------------------------------------


def test_function_calls_without_ids_get_stable_nine_character_ids(toolset: Toolset) -> None:
    calls = toolset.parse_calls("gemini", load("gemini.json"))
    assert [(c.name, c.tool, c.action, c.error) for c in calls] == [
        ("now", "clock", "now", None),
        ("convert", "clock", "convert", None),
        ("think", "think", "think", None),
    ]
    assert calls[1].arguments == {
        "time": "09:00",
        "from_timezone": "Europe/Paris",
        "to_timezone": "Asia/Tokyo",
    }
    assert all(NINE_ALPHANUMERICS.match(c.call_id) for c in calls)
    assert len({c.call_id for c in calls}) == 3
    again = toolset.parse_calls("gemini", load("gemini.json"))
    assert [c.call_id for c in again] == [c.call_id for c in calls]


def test_identical_calls_in_one_response_get_different_ids(toolset: Toolset) -> None:
    part = {"functionCall": {"name": "now", "args": {"timezone": "UTC"}}}
    first, second = toolset.parse_calls("gemini", gemini(part, dict(part)))
    assert first.arguments == second.arguments
    assert first.call_id != second.call_id


def test_different_calls_in_different_responses_get_different_ids(toolset: Toolset) -> None:
    (tokyo,) = toolset.parse_calls(
        "gemini", gemini({"functionCall": {"name": "now", "args": {"timezone": "Asia/Tokyo"}}})
    )
    (paris,) = toolset.parse_calls(
        "gemini", gemini({"functionCall": {"name": "now", "args": {"timezone": "Europe/Paris"}}})
    )
    assert tokyo.call_id != paris.call_id


def test_the_thought_signature_is_kept_with_its_call(toolset: Toolset) -> None:
    calls = toolset.parse_calls("gemini", load("gemini.json"))
    assert calls[0].extras["thought_signature"] == SIGNATURE
    assert "thought_signature" not in calls[1].extras
    assert calls[0].to_dict()["extras"]["thought_signature"] == SIGNATURE


@pytest.mark.parametrize(
    ("call", "arguments"),
    [
        ({"name": "now"}, {}),
        ({"name": "now", "args": None}, {}),
        ({"name": "now", "args": {}}, {}),
        ({"name": "now", "args": {"timezone": "UTC"}}, {"timezone": "UTC"}),
    ],
    ids=["missing", "null", "empty", "object"],
)
def test_function_call_args_of_every_kind(
    toolset: Toolset, call: dict[str, Any], arguments: dict[str, Any]
) -> None:
    (parsed,) = toolset.parse_calls("gemini", gemini({"functionCall": call}))
    assert (parsed.action, parsed.arguments, parsed.error) == ("now", arguments, None)


def test_an_unknown_function_name_is_unresolved(toolset: Toolset) -> None:
    (call,) = toolset.parse_calls(
        "gemini", gemini({"functionCall": {"name": "clock_now", "args": {}}})
    )
    assert (call.resolved, call.action) == (False, None)
    assert "'clock_now'" in (call.error or "")


# -- the SDK's snake_case model_dump() --------------------------------------------------------


def sdk_dump(name: str, mode: str = "python") -> dict[str, Any]:
    from google.genai import types

    text = (RESPONSES / name).read_text(encoding="utf-8")
    return types.GenerateContentResponse.model_validate_json(text).model_dump(mode=mode)


def test_the_sdk_model_dump_reads_like_the_rest_response(toolset: Toolset) -> None:
    dumped = sdk_dump("gemini.json")
    assert "function_call" in dumped["candidates"][0]["content"]["parts"][1]
    calls = toolset.parse_calls("gemini", dumped)
    rest = toolset.parse_calls("gemini", load("gemini.json"))
    assert [(c.name, c.action, c.arguments) for c in calls] == [
        (c.name, c.action, c.arguments) for c in rest
    ]
    assert all(NINE_ALPHANUMERICS.match(c.call_id) for c in calls)
    assert len({c.call_id for c in calls}) == 3
    assert [c.call_id for c in toolset.parse_calls("gemini", sdk_dump("gemini.json"))] == [
        c.call_id for c in calls
    ]
    # The SDK decodes the signature to bytes; it is kept as bytes and shown as base64.
    assert calls[0].extras["thought_signature"] == base64.b64decode(SIGNATURE)
    assert calls[0].to_dict()["extras"]["thought_signature"] == SIGNATURE


def test_the_sdk_json_dump_keeps_the_signature_text_verbatim(toolset: Toolset) -> None:
    dumped = sdk_dump("gemini.json", mode="json")
    signature = dumped["candidates"][0]["content"]["parts"][1]["thought_signature"]
    assert isinstance(signature, str)
    calls = toolset.parse_calls("gemini", dumped)
    assert calls[0].extras["thought_signature"] == signature


def test_ids_gemini_gives_are_used_in_both_spellings(toolset: Toolset) -> None:
    for response in (load("gemini_with_ids.json"), sdk_dump("gemini_with_ids.json")):
        calls = toolset.parse_calls("gemini", response)
        assert [(c.call_id, c.name, c.arguments) for c in calls] == [
            ("q7v2m9xk", "now", {"timezone": "Europe/Berlin"}),
            ("h3n8w1pz", "think", {"thought": "Berlin is on CET."}),
        ]


# -- results ----------------------------------------------------------------------------------


def test_results_are_function_responses_whose_response_is_always_an_object(
    make_host: Callable[..., Host],
) -> None:
    host = make_host(Maps(), builtins=True)
    toolset = host.toolset()
    names = {entry.action: entry.name for entry in toolset.name_map.entries}
    response = gemini(
        {"functionCall": {"name": "now", "args": {"timezone": "Asia/Tokyo"}}},
        {"functionCall": {"name": "think", "args": {"thought": "plain text"}}},
        {"functionCall": {"name": "render", "args": {"title": "t", "style": "satellite"}}},
        {"functionCall": {"name": names["2fa_code"], "args": {}}},
        {"functionCall": {"name": "now", "args": {"timezone": "Atlantis/Capital"}}},
        {"functionCall": {"name": "clock_now", "args": {}}},
    )
    calls = toolset.parse_calls("gemini", response)
    (message,) = toolset.result_messages("gemini", calls, run_all(toolset, calls))
    assert message["role"] == "user"
    parts = [part["functionResponse"] for part in message["parts"]]
    assert [part["name"] for part in parts] == [call.name for call in calls]
    assert all(isinstance(part["response"], dict) for part in parts)
    now, thought, render, code, bad_zone, unknown = (part["response"] for part in parts)
    assert now["timezone"] == "Asia/Tokyo"
    assert "plain text" in thought.values()
    assert 0 in render.values()
    assert None in code.values()
    assert "Atlantis/Capital" in json.dumps(bad_zone)
    assert "error" in bad_zone
    assert "clock_now" in json.dumps(unknown)
    assert "error" in unknown
    for part, call in zip(parts, calls, strict=True):
        assert part.get("id", call.call_id) == call.call_id


def test_results_echo_the_ids_gemini_gave_and_the_thought_signature(
    host: Host, toolset: Toolset
) -> None:
    calls = toolset.parse_calls("gemini", load("gemini_with_ids.json"))
    (message,) = toolset.result_messages("gemini", calls, run_all(toolset, calls))
    first, second = message["parts"]
    assert first["functionResponse"]["id"] == "q7v2m9xk"
    assert second["functionResponse"]["id"] == "h3n8w1pz"
    assert first["thoughtSignature"] == "CiQB0e2Kb3Jp1y8vS7uQ4wZ6xN2aT5cF9hL0kD3mR8sV1bY4eA=="
    assert "thoughtSignature" not in second


def test_a_signature_from_an_id_less_call_is_echoed_on_its_response(
    host: Host, toolset: Toolset
) -> None:
    calls = toolset.parse_calls("gemini", load("gemini.json"))
    (message,) = toolset.result_messages("gemini", calls, run_all(toolset, calls))
    assert message["parts"][0]["thoughtSignature"] == SIGNATURE
    assert ["thoughtSignature" in part for part in message["parts"]] == [True, False, False]
