"""One call through the MCP pack (``mcp`` tool: pooled session, egress guard) to a fastmcp
server on loopback, beside fastmcp's own client calling the same tool directly in the same run;
and ``expediter tools list`` with the pack installed, which must not import fastmcp.

Needs fastmcp and the pack: ``run.py`` runs this script with the ``mcp`` tox env's interpreter
(``tox run -e mcp --notest`` makes it; ``make bench`` does). The server runs in its own process
(no shared GIL). Both clients keep one session open; the host's figures are whole calls (``run``
from a sync caller, which hops to the host's background loop, and ``arun`` on the caller's
loop, like the bare client), without and with the SQLite ledger.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import (
    Figure,
    Report,
    bench_env,
    cli_code,
    console_script,
    parse_args,
    probe_modules,
    time_commands,
    time_statements,
)

SERVER = r"""
import socket, sys
from fastmcp import FastMCP
server = FastMCP("bench")
@server.tool
def add(a: int, b: int) -> int:
    "Add two numbers."
    return a + b
probe = socket.socket(); probe.bind(("127.0.0.1", 0)); port = probe.getsockname()[1]; probe.close()
print(port, flush=True)
server.run(transport="http", host="127.0.0.1", port=port, show_banner=False, log_level="error")
"""


def _wait_for(port: int) -> None:
    import socket
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError("the benchmark's MCP server did not start")


def main() -> int:
    """Measure and report."""
    args = parse_args(__doc__)
    rounds, batch = (3, 0.05) if args.quick else (15, 0.3)
    import fastmcp
    from expediter_mcp.tool import McpTool
    from fastmcp import Client

    import expediter
    from expediter.core.host import Host

    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    report = Report("mcp", args.quick)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        _wait_for(port)
        url = f"http://127.0.0.1:{port}/mcp"
        os.environ["EXPEDITER_EGRESS_ALLOW"] = "127.0.0.0/8"
        loop = asyncio.new_event_loop()
        with tempfile.TemporaryDirectory() as folder:
            options = {"autoload": False, "builtins": False, "plugins": [McpTool]}
            bare_host = Host(home=Path(folder) / "bare", record_calls=False, **options)
            ledger_host = Host(home=Path(folder) / "ledger", record_calls=True, **options)
            instance = expediter.ToolInstance(
                tool="mcp", instance_id="bench", name="bench", config={"url": url}
            )
            bare_set = bare_host.toolset(instances=[instance])
            ledger_set = ledger_host.toolset(instances=[instance])
            name = bare_set.name_map.name_for("bench", "add")
            assert name is not None
            call = expediter.ToolCall(
                "c1", name, {"a": 2, "b": 3}, instance_id="bench", tool="mcp", action="add"
            )
            client = Client(url)
            loop.run_until_complete(client.__aenter__())

            async def adrain(toolset: expediter.Toolset) -> list[expediter.CallEvent]:
                return [event async for event in toolset.arun([call])]

            report.settings.update(rounds=rounds, fastmcp=fastmcp.__version__)
            (event,) = list(bare_set.run([call]))
            report.check(
                "the host's call completes with the server's result",
                event.status == "completed"
                and isinstance(event.result, dict)
                and event.result.get("structured_content") == {"result": 5},
                f"{event.status}: {event.error}",
            )
            (recorded,) = list(ledger_set.run([call]))
            report.check("the ledger host's call completes", recorded.status == "completed")
            (awaited,) = loop.run_until_complete(adrain(bare_set))
            report.check("the host's arun call completes", awaited.status == "completed")
            direct = loop.run_until_complete(client.call_tool_mcp("add", {"a": 2, "b": 3}))
            report.check(
                "fastmcp's client gets the same result",
                direct.structured_content == {"result": 5},
            )
            namespace = {
                "bare_set": bare_set,
                "ledger_set": ledger_set,
                "calls": [call],
                "drain": list,
                "adrain": adrain,
                "loop": loop,
                "client": client,
            }
            runs = time_statements(
                {
                    "host": ("drain(bare_set.run(calls))", namespace),
                    "host_arun": ("loop.run_until_complete(adrain(bare_set))", namespace),
                    "host_ledger": ("drain(ledger_set.run(calls))", namespace),
                    "fastmcp": (
                        "loop.run_until_complete(client.call_tool_mcp('add', {'a': 2, 'b': 3}))",
                        namespace,
                    ),
                },
                rounds=rounds,
                batch_seconds=batch,
            )
            report.add(Figure("host", "one call via toolset.run (no ledger)", runs["host"]))
            report.add(
                Figure(
                    "host_arun", "one call via toolset.arun on the caller's loop", runs["host_arun"]
                )
            )
            report.add(
                Figure("host_ledger", "toolset.run with the SQLite ledger", runs["host_ledger"])
            )
            report.add(
                Figure("fastmcp", "fastmcp's Client.call_tool_mcp, one session", runs["fastmcp"])
            )
            report.ratio("per call through the MCP pack (run)", "host", "fastmcp", 1.2)
            report.ratio("per call through the MCP pack (arun)", "host_arun", "fastmcp", 1.2)
            report.ratio("per call through the MCP pack, SQLite ledger", "host_ledger", "fastmcp")
            loop.run_until_complete(client.__aexit__(None, None, None))
            bare_host.close()
            ledger_host.close()
    finally:
        server.kill()
        server.wait()

    _tools_list(report, 2 if args.quick else 10)
    return report.finish(args.results_dir)


def _tools_list(report: Report, rounds: int) -> None:
    """``expediter tools list`` with the pack installed: fastmcp never imported."""
    with tempfile.TemporaryDirectory() as home:
        env = bench_env(EXPEDITER_HOME=home)
        listing = [str(console_script("expediter")), "tools", "list", "--json"]
        cold, cold_modules = probe_modules(cli_code("tools", "list", "--json"), env)
        heavy = {"fastmcp", "mcp", "httpx2"}
        report.check(
            "a cold tools list imports no fastmcp, mcp or httpx2",
            not heavy & cold_modules,
            ", ".join(sorted(heavy & cold_modules)),
        )
        report.check(
            "the pack's tool is listed",
            any(item["name"] == "mcp" for item in json.loads(cold.stdout)),
        )
        _, warm_modules = probe_modules(cli_code("tools", "list", "--json"), env)
        report.check(
            "a warm tools list imports no pack module", "expediter_mcp" not in warm_modules
        )
        runs = time_commands(
            {"tools_list": listing, "python": [sys.executable, "-c", "pass"]}, env, rounds=rounds
        )
    report.add(
        Figure("tools_list", "expediter tools list, the pack installed, warm", runs["tools_list"])
    )
    report.add(Figure("python", "python -c pass", runs["python"]))
    report.ratio("expediter tools list with the MCP pack", "tools_list", "python", 10.0)


if __name__ == "__main__":
    sys.exit(main())
