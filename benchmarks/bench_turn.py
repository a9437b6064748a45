"""Host overhead per call through a model turn: parse, decide, ledger, dispatch, normalize.

One turn is ``toolset.parse_calls("openai", response)`` on a Chat Completions response holding one
call of a trivial tool, then ``toolset.run(calls)`` consumed to the end (its ``completed`` event;
a ``pending`` one is tolerated). Every turn gets a fresh call id (and ``run`` a fresh run id), so
each ledger key is new and every ledger insert is real. The turn runs with no ledger, the SQLite
WAL ledger (the default file, synchronous NORMAL) and the PostgreSQL ledger, side by side with a
plain pluggy hook, llm's ``Response.execute_tool_calls`` and LangChain's ``StructuredTool.invoke``
of the same function.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench_dispatch import ARGUMENTS, add, llm_case, pluggy_case
from bench_ledger import postgres_counts, sqlite_counts, sqlite_pragmas
from measure import (
    Figure,
    Report,
    bench_env,
    console_script,
    parse_args,
    run_command,
    time_statements,
)

import expediter
from expediter.core.host import Host
from expediter.core.turns.toolset import Toolset
from expediter.hookspecs.tool import CallContext
from expediter.testing.postgres import PostgresCluster, PostgresUnavailable

PROVIDER = "openai"
RESULT = 3
#: The PostgreSQL database the turn's ledger writes to.
PG_DATABASE = "turn"

Case = tuple[str, Mapping[str, Any]]

#: The cases whose turns run through a toolset (``Turns``), by ledger.
TURNS = ("turn_no_ledger", "turn_sqlite", "turn_postgres")
BASELINES = ("pluggy", "llm", "llm_turn", "langchain")
FIGURES = {
    "turn_no_ledger": "parse_calls + run, one call, no ledger (record_calls=False)",
    "turn_sqlite": "parse_calls + run, one call, SQLite WAL ledger (default file, NORMAL)",
    "turn_postgres": "parse_calls + run, one call, PostgreSQL ledger (one held connection)",
    "parse": "toolset.parse_calls('openai', response) alone, one call",
    "run": "toolset.run(calls) alone, consumed, one call, no ledger",
    "pluggy": "a plain firstresult pluggy hook, one plugin, same function",
    "llm": "llm Response.execute_tool_calls, one call, same function",
    "llm_turn": "llm's OpenAI plugin reading the call from the response, then execute_tool_calls",
    "langchain": "LangChain StructuredTool.invoke, same function, no ledger",
}


def chat_response(name: str) -> dict[str, Any]:
    """A Chat Completions response whose message holds one call of ``name``."""
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(ARGUMENTS)},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": "bench",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }


class Turns:
    """One model turn per call for ``timeit``: a fresh call id, parse, run, count the events."""

    def __init__(self, toolset: Toolset) -> None:
        self.parse, self.run = toolset.parse_calls, toolset.run
        self.response = chat_response(toolset.actions[0].name)
        self.item = self.response["choices"][0]["message"]["tool_calls"][0]
        self.count = self.completed = self.other = 0

    def __call__(self) -> None:
        self.count += 1
        self.item["id"] = f"call_{self.count}"
        for event in self.run(self.parse(PROVIDER, self.response)):
            if event.status == "completed" and event.result == RESULT:
                self.completed += 1
            elif event.status != "pending":  # only observers see ``pending``; tolerate it here
                self.other += 1

    def case(self) -> Case:
        """The ``timeit`` statement and namespace."""
        return "turn()", {"turn": self}

    def check(self, report: Report, name: str) -> None:
        """Every turn yielded one ``completed`` event with the right result, and nothing else."""
        ok = self.count > 0 and self.completed == self.count and self.other == 0
        detail = f"{self.count} turns, {self.completed} completed = {RESULT}, {self.other} other"
        report.check(f"{name}: every turn produced one completed event with the result", ok, detail)


def build_host(stack: ExitStack, home: Path, *, record: bool, url: str | None = None) -> Host:
    """A host offering only the trivial tool (loaded); its ledger is ``url`` or the default."""
    host = Host(
        database_url=url,
        autoload=False,
        builtins=False,
        plugins=[expediter.tool(name="add")(add)],
        home=home,
        record_calls=record,
    )
    stack.enter_context(host)
    host.loaded_tools.load("add")
    return host


def split_cases(toolset: Toolset) -> dict[str, Case]:
    """Parse alone and run alone (no ledger), to show where a turn's time goes."""
    response = chat_response(toolset.actions[0].name)
    calls = toolset.parse_calls(PROVIDER, response)
    namespace = {"parse": toolset.parse_calls, "run": toolset.run, "response": response}
    return {
        "parse": ("parse('openai', response)", namespace),
        "run": ("list(run(calls))", {**namespace, "calls": calls}),
    }


def langchain_case() -> Case | str:
    """LangChain's ``StructuredTool.invoke`` of the same function (no ledger); or why not."""
    try:
        from langchain_core.tools import StructuredTool
    except ImportError as exc:
        return f"langchain-core is not importable ({exc}); install the bench extra"
    return "invoke(arguments)", {
        "invoke": StructuredTool.from_function(add).invoke,
        "arguments": ARGUMENTS,
    }


class LlmTurn:
    """What llm does per call in a turn: its OpenAI plugin reads each call of the message
    (``json.loads`` of the arguments, an ``llm.ToolCall`` added to the response), then
    ``Response.execute_tool_calls`` runs them; the same response object is reused."""

    def __init__(self, response: Any, tool_call: type) -> None:
        self.response, self.tool_call = response, tool_call
        self.message = chat_response("add")["choices"][0]["message"]

    def __call__(self) -> Any:
        self.response._tool_calls.clear()  # the calls of the previous turn
        for item in self.message["tool_calls"]:
            function = item["function"]
            self.response.add_tool_call(
                self.tool_call(
                    tool_call_id=item["id"],
                    name=function["name"],
                    arguments=json.loads(function["arguments"] or "{}"),
                )
            )
        return self.response.execute_tool_calls()


def llm_turn_case() -> Case | str:
    """llm parsing and running one call (see ``LlmTurn``); or why not."""
    found = llm_case()
    if isinstance(found, str):
        return found
    from llm.models import ToolCall

    return "turn()", {"turn": LlmTurn(found[1]["response"], ToolCall)}


def postgres_url(cluster: Any, home: Path) -> str:
    """A fresh database in the cluster, brought to the newest schema by `expediter db upgrade`."""
    cluster.createdb(PG_DATABASE)
    url = str(cluster.url(PG_DATABASE))
    argv = [str(console_script("expediter")), "--database", url, "db", "upgrade"]
    run_command(argv, bench_env(EXPEDITER_HOME=str(home)))
    return url


def _value(case: Case) -> str:
    """What a baseline computes, as text (llm's tool output, LangChain's and pluggy's value)."""
    statement, namespace = case
    value = eval(statement, dict(namespace))
    if isinstance(value, list):
        value = value[0].output
    return str(value)


def budgets(report: Report) -> None:
    """The goals of benchmarks/README.md, and informational ratios that show where time goes.

    One model turn is measured against llm doing the same work (reading the call from the
    same response, then running it); the per-call overhead on parsed calls against llm's
    ``execute_tool_calls``. LangChain is reported for orientation only (its figure moves a
    lot between runs on this machine)."""
    report.ratio(
        "one model turn (parse + run one call), no ledger", "turn_no_ledger", "llm_turn", 1.0
    )
    report.ratio("host overhead per call, trivial tool, no ledger", "run", "llm", 1.0)
    report.ratio("turn, SQLite WAL ledger vs LangChain (orientation)", "turn_sqlite", "langchain")
    for name, baseline in (
        ("no ledger", "turn_no_ledger"),
        ("SQLite ledger", "turn_sqlite"),
        ("llm", "llm"),
        ("LangChain", "langchain"),
        ("pluggy", "pluggy"),
    ):
        report.ratio(f"turn, PostgreSQL ledger vs {name}", "turn_postgres", baseline)
    report.ratio("turn, no ledger vs llm's execute_tool_calls alone", "turn_no_ledger", "llm")
    report.ratio("turn, SQLite ledger vs no ledger", "turn_sqlite", "turn_no_ledger")
    report.ratio("turn, SQLite ledger vs llm", "turn_sqlite", "llm")
    report.ratio("turn, no ledger vs LangChain", "turn_no_ledger", "langchain")
    report.ratio("turn, no ledger vs plain pluggy hook", "turn_no_ledger", "pluggy")
    report.ratio("parse alone vs turn (no ledger)", "parse", "turn_no_ledger")
    report.ratio("run alone vs turn (no ledger)", "run", "turn_no_ledger")
    report.ratio("parse alone vs llm", "parse", "llm")


def main() -> int:
    """Measure and report."""
    args = parse_args(__doc__)
    rounds, batch = (3, 0.005) if args.quick else (21, 0.05)
    report = Report("turn", args.quick)
    report.settings.update(
        rounds=rounds,
        batch_seconds=batch,
        provider=PROVIDER,
        arguments=ARGUMENTS,
        tempdir=tempfile.gettempdir(),
    )
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="expediter-bench-turn-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        homes = {name: directory / f"home-{name}" for name in TURNS}
        hosts = {
            "turn_no_ledger": build_host(stack, homes["turn_no_ledger"], record=False),
            "turn_sqlite": build_host(stack, homes["turn_sqlite"], record=True),
        }
        try:
            cluster = stack.enter_context(PostgresCluster.start())
        except PostgresUnavailable as exc:
            skipped["turn_postgres"] = f"no PostgreSQL server: {exc}"
        else:
            report.settings["postgres"] = str(cluster.binaries)
            url = postgres_url(cluster, homes["turn_postgres"])
            hosts["turn_postgres"] = build_host(stack, homes["turn_postgres"], record=True, url=url)
        toolsets = {name: host.toolset() for name, host in hosts.items()}
        turns = {name: Turns(toolset) for name, toolset in toolsets.items()}
        cases: dict[str, Case] = {name: turn.case() for name, turn in turns.items()}
        cases |= split_cases(toolsets["turn_no_ledger"])
        cases["pluggy"] = pluggy_case(CallContext(tool="add", instance_id="add"))
        for name, found in (
            ("llm", llm_case()),
            ("llm_turn", llm_turn_case()),
            ("langchain", langchain_case()),
        ):
            if isinstance(found, str):
                skipped[name] = found
                if not args.quick:
                    report.check(f"{name} is installed (bench extra)", False, found)
            else:
                cases[name] = found
        baselines = {name: _value(cases[name]) for name in BASELINES if name in cases}
        wrong = {name: got for name, got in baselines.items() if got != str(RESULT)}
        report.check("the baselines compute add(1, 2)", not wrong, repr(wrong) if wrong else "")

        # One untimed turn each: opens the ledger, starts its lease thread, warms the caches.
        for turn in turns.values():
            turn()
        sqlite_file = homes["turn_sqlite"] / "expediter.db"
        probe = hosts["turn_sqlite"].ledger.database.connect()
        mode, level = sqlite_pragmas(probe)
        probe.close()
        report.check(
            "turn_sqlite: the default file, WAL, synchronous NORMAL",
            sqlite_file.is_file() and (mode, level) == ("wal", 1),
            f"{sqlite_file.name}: {mode}/synchronous={level}",
        )
        runs = time_statements(cases, rounds=rounds, batch_seconds=batch)

        for name, turn in turns.items():
            turn.check(report, name)
        no_file = homes["turn_no_ledger"] / "expediter.db"
        report.check(
            "turn_no_ledger (record_calls=False) wrote no ledger",
            not no_file.exists(),
            f"{no_file.name} exists" if no_file.exists() else "",
        )
        counts = {"turn_sqlite": sqlite_counts(sqlite_file)}
        if "turn_postgres" in turns:
            counts["turn_postgres"] = postgres_counts(cluster, PG_DATABASE)
        for name, by_status in counts.items():
            calls, rows = turns[name].count, sum(by_status.values())
            report.check(
                f"{name}: ledger rows = timed calls, all executed",
                0 < rows == calls == by_status.get("executed", 0),
                f"{calls} calls, {rows} rows, by status {dict(sorted(by_status.items()))}",
            )
    if not args.quick and "turn_postgres" in skipped:
        report.check("PostgreSQL server is installed", False, skipped["turn_postgres"])
    for name, description in FIGURES.items():
        report.add(Figure(name, description, runs.get(name, ()), skipped.get(name)))
    budgets(report)
    return report.finish(args.results_dir)


if __name__ == "__main__":
    sys.exit(main())
