"""One call through the HTTP pack (``http`` tool, egress guard included) to a loopback server,
beside a bare pooled ``httpx.Client`` making the same request in the same run.

The server is a minimal keep-alive HTTP/1.1 responder in its own process (so it shares no GIL
with the client and adds little time of its own); both clients keep one connection open. The
host's figure is a whole call: model arguments to request, the guard's policy, send, the
envelope, and the event (``record_calls=False``); the ledger figure adds the SQLite ledger.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import Figure, Report, parse_args, time_statements

HERE = Path(__file__).resolve().parent
PACK_SOURCE = HERE.parent / "contrib" / "expediter-http" / "src"
SERVER = r"""
import socket, sys, threading
BODY = b'{"id": 7, "name": "rex", "tag": "dog"}'
REPLY = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
         + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
def serve(conn):
    buffer = b""
    with conn:
        while True:
            while b"\r\n\r\n" not in buffer:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
            _, _, buffer = buffer.partition(b"\r\n\r\n")
            conn.sendall(REPLY)
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print(listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""
ACTION = {
    "name": "get_pet",
    "method": "GET",
    "path": "/pets/{petId}",
    "parameters": [
        {"name": "petId", "in": "path", "required": True, "schema": {"type": "integer"}},
        {"name": "fields", "in": "query", "schema": {"type": "string"}},
    ],
}


def _pack() -> None:
    """Import the pack from the checkout when it is not installed in this environment."""
    try:
        import expediter_http  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(PACK_SOURCE))


def _openai_call(name: str, arguments: dict[str, object]) -> dict[str, object]:
    call = {"id": "c1", "type": "function", "function": {"name": name}}
    call["function"]["arguments"] = json.dumps(arguments)  # type: ignore[index]
    return {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}


def main() -> int:
    """Measure and report."""
    args = parse_args(__doc__)
    rounds, batch = (3, 0.02) if args.quick else (15, 0.2)
    _pack()
    import httpx
    from expediter_http.tool import HttpTool

    import expediter
    from expediter.core.host import Host

    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        base = f"http://127.0.0.1:{port}"
        os.environ["EXPEDITER_EGRESS_ALLOW"] = "127.0.0.0/8"
        with tempfile.TemporaryDirectory() as folder:
            options = {"autoload": False, "builtins": False, "plugins": [HttpTool]}
            bare_host = Host(home=Path(folder) / "bare", record_calls=False, **options)
            ledger_host = Host(home=Path(folder) / "ledger", record_calls=True, **options)
            instance = expediter.ToolInstance(
                tool="http", name="pets", config={"base_url": base, "actions": [ACTION]}
            )
            arguments = {"petId": 7, "fields": "name,tag"}
            bare_set = bare_host.toolset(instances=[instance])
            ledger_set = ledger_host.toolset(instances=[instance])
            name = bare_set.name_map.name_for("http", "get_pet")
            assert name is not None
            response = _openai_call(name, arguments)
            bare_calls = bare_set.parse_calls("openai", response)
            ledger_calls = ledger_set.parse_calls("openai", response)
            client = httpx.Client()
            url = f"{base}/pets/7"
            params = {"fields": "name,tag"}

            report = Report("http", args.quick)
            report.settings.update(rounds=rounds, httpx=httpx.__version__)
            (event,) = list(bare_set.run(bare_calls))
            report.check(
                "the host's call completes with the server's JSON",
                event.status == "completed"
                and isinstance(event.result, dict)
                and event.result.get("body") == {"id": 7, "name": "rex", "tag": "dog"},
                f"{event.status}: {event.error}",
            )
            (recorded,) = list(ledger_set.run(ledger_calls))
            report.check("the ledger host's call completes", recorded.status == "completed")
            report.check(
                "the bare client gets the same body",
                client.get(url, params=params).json() == {"id": 7, "name": "rex", "tag": "dog"},
            )
            namespace = {
                "bare_set": bare_set,
                "ledger_set": ledger_set,
                "bare_calls": bare_calls,
                "ledger_calls": ledger_calls,
                "client": client,
                "url": url,
                "params": params,
                "drain": list,
            }
            runs = time_statements(
                {
                    "host": ("drain(bare_set.run(bare_calls))", namespace),
                    "host_ledger": ("drain(ledger_set.run(ledger_calls))", namespace),
                    "httpx": ("client.get(url, params=params).json()", namespace),
                },
                rounds=rounds,
                batch_seconds=batch,
            )
            report.add(
                Figure(
                    "host",
                    "one model call through the http tool (guard, request, envelope), no ledger",
                    runs["host"],
                )
            )
            report.add(
                Figure("host_ledger", "the same call with the SQLite ledger", runs["host_ledger"])
            )
            report.add(
                Figure("httpx", "a bare pooled httpx.Client GET of the same URL", runs["httpx"])
            )
            report.ratio("per call through the HTTP pack", "host", "httpx", 1.3)
            report.ratio("per call through the HTTP pack, SQLite ledger", "host_ledger", "httpx")
            client.close()
            bare_host.close()
            ledger_host.close()
    finally:
        server.kill()
        server.wait()
    return report.finish(args.results_dir)


if __name__ == "__main__":
    sys.exit(main())
