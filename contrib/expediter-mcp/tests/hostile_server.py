"""A hostile stdio MCP server, speaking JSON-RPC by hand (no SDK would misbehave like this).

``python hostile_server.py MODE [ARGS...]``:

- ``huge MEGABYTES``: its tool ``huge`` answers with one line of that many megabytes,
  written a megabyte at a time (the answer is never held whole, here or in the test).
- ``pages PER_PAGE PAD COUNTER``: its tool list never ends: every page has ``PER_PAGE``
  tools, each with a ``PAD``-character description, and a next cursor; each page served adds
  a line to the file ``COUNTER``.
- ``schemas``: tools ``good`` and ``other`` are fine; ``flat``'s input schema is a string,
  ``empty``'s is null, ``deep``'s nests 190 levels and ``deeper``'s 600 (too deep for the
  SDK's JSON parser, so the whole answer is).
- ``garbage``: its tool ``garbage`` answers with a line that is not a JSON-RPC message, and
  nothing after it; ``noise`` writes a line that is not JSON at all.
"""

from __future__ import annotations

import json
import sys
from typing import Any

MODE = sys.argv[1]
ARGS = sys.argv[2:]
OBJECT = {"type": "object", "properties": {}}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(ident: Any, result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": ident, "result": result})


def nested(levels: int) -> str:
    """An input schema as JSON text, ``levels`` arrays deep (built as text: no recursion)."""
    inner = '{"type": "array", "items": ' * levels + '{"type": "string"}' + "}" * levels
    return '{"type": "object", "properties": {"a": ' + inner + "}}"


def list_tools(ident: Any, params: dict[str, Any]) -> None:
    if MODE == "huge":
        answer(ident, {"tools": [{"name": "huge", "inputSchema": OBJECT}]})
    elif MODE == "pages":
        per_page, pad, counter = int(ARGS[0]), int(ARGS[1]), ARGS[2]
        page = int(params.get("cursor") or 0)
        with open(counter, "a") as out:
            out.write(f"{page}\n")
        tools = [
            {"name": f"t{page}_{n}", "description": "d" * pad, "inputSchema": OBJECT}
            for n in range(per_page)
        ]
        answer(ident, {"tools": tools, "nextCursor": str(page + 1)})
    elif MODE == "schemas":
        tools = [
            '{"name": "good", "inputSchema": {"type": "object"}}',
            '{"name": "flat", "inputSchema": "a string"}',
            '{"name": "empty", "inputSchema": null}',
            f'{{"name": "deep", "inputSchema": {nested(190)}}}',
            f'{{"name": "deeper", "inputSchema": {nested(600)}}}',
            '{"name": "other", "inputSchema": {"type": "object"}}',
        ]
        result = '{"tools": [' + ", ".join(tools) + "]}"
        sys.stdout.write(f'{{"jsonrpc": "2.0", "id": {json.dumps(ident)}, "result": {result}}}\n')
        sys.stdout.flush()
    else:
        names = ["garbage", "noise", "fine"]
        answer(ident, {"tools": [{"name": name, "inputSchema": OBJECT} for name in names]})


def call_tool(ident: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    if name == "huge":
        chunk = "x" * 1_000_000
        head = {"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text"}]}}
        text = json.dumps(head)
        sys.stdout.write(text[: -len("}]}}")] + ', "text": "')
        for _ in range(int(ARGS[0])):
            sys.stdout.write(chunk)
        sys.stdout.write('"}]}}\n')
        sys.stdout.flush()
    elif name == "garbage":
        send({"jsonrpc": "2.0", "id": ident, "result": "not an object"})
    elif name == "noise":
        sys.stdout.write("Traceback (most recent call last): this is not JSON\n")
        sys.stdout.flush()
    else:
        answer(ident, {"content": [{"type": "text", "text": f"{name} answered"}]})


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        ident, method = message.get("id"), message.get("method")
        if ident is None:
            continue  # a notification
        params = message.get("params") or {}
        if method == "initialize":
            answer(
                ident,
                {
                    "protocolVersion": params.get("protocolVersion"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"},
                },
            )
        elif method == "tools/list":
            list_tools(ident, params)
        elif method == "tools/call":
            call_tool(ident, params)
        elif method == "ping":
            answer(ident, {})
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": method}})


main()
