"""Provider responses for the tests: the saved ones in tests/data/responses, and builders of the
small ones a test makes up, each calling ``(call id, name, arguments)`` triples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The folder of saved provider responses.
RESPONSES = Path(__file__).resolve().parents[1] / "data" / "responses"

#: Each provider's saved response, a file in ``RESPONSES``.
SAVED = {
    "openai": "openai_chat.json",
    "openai-responses": "openai_responses.json",
    "anthropic": "anthropic_messages.json",
    "gemini": "gemini.json",
    "mistral": "mistral_chat.json",
    "ollama": "ollama_chat.json",
}


def load(name: str) -> dict[str, Any]:
    """The saved response ``name`` (a file in ``RESPONSES``), parsed."""
    data: dict[str, Any] = json.loads((RESPONSES / name).read_text(encoding="utf-8"))
    return data


def openai_response(*calls: tuple[str, str, Any]) -> dict[str, Any]:
    """A minimal OpenAI chat completion whose assistant message makes these calls; arguments
    given as a string are sent as written, anything else as its JSON."""
    tool_calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
            },
        }
        for call_id, name, args in calls
    ]
    return {"choices": [{"message": {"role": "assistant", "tool_calls": tool_calls}}]}


def provider_response(
    provider: str, calls: list[tuple[str, str, dict[str, Any]]]
) -> dict[str, Any]:
    """A response in the provider's documented shape making these calls (Gemini's carry no id)."""
    if provider in ("openai", "mistral"):
        return {
            "id": "chatcmpl-roundtrip",
            "object": "chat.completion",
            "model": "gpt-4.1" if provider == "openai" else "mistral-large-latest",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": call_id,
                                "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)},
                            }
                            for call_id, name, args in calls
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
        }
    if provider == "openai-responses":
        return {
            "id": "resp_roundtrip",
            "object": "response",
            "output": [
                {"id": "rs_1", "type": "reasoning", "summary": []},
                *(
                    {
                        "id": f"fc_{call_id}",
                        "type": "function_call",
                        "status": "completed",
                        "call_id": call_id,
                        "name": name,
                        "arguments": json.dumps(args),
                    }
                    for call_id, name, args in calls
                ),
            ],
        }
    if provider == "anthropic":
        return {
            "id": "msg_roundtrip",
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Doing all of it at once."},
                *(
                    {"type": "tool_use", "id": call_id, "name": name, "input": args}
                    for call_id, name, args in calls
                ),
            ],
            "stop_reason": "tool_use",
        }
    if provider == "gemini":
        return {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {"functionCall": {"name": name, "args": args}}
                            for _, name, args in calls
                        ],
                    },
                    "finishReason": "STOP",
                }
            ]
        }
    assert provider == "ollama"
    return {
        "model": "qwen3:8b",
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": name, "arguments": args}} for _, name, args in calls
            ],
        },
        "done": True,
    }
