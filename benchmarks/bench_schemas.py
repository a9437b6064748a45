"""Provider schemas for 1,000 actions read from the manifest cache, beside a plain loop."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from measure import Figure, Report, parse_args, time_statements

from expediter.core.host import Host

PREFIX = "schema_bench_tool_"
PROVIDERS = ("openai", "anthropic", "gemini")

MODULE = '''
import pathlib
pathlib.Path({marker!r}).open("a").write("{name}\\n")
import expediter


class Box(expediter.Toolbox):
    """Tool {name}."""
{actions}
'''
ACTION = '''
    @expediter.action
    def act_{index}(self, city: str, days: int = 1, units: str = "metric") -> dict:
        """Action {index} of this tool.

        Args:
            city: The city.
            days: How many days.
            units: metric or imperial.
        """
        return {{}}
'''


def write_tools(directory: Path, tools: int, actions: int, marker: Path) -> None:
    """A tools directory of ``tools`` modules with ``actions`` actions each."""
    body = "".join(ACTION.format(index=index) for index in range(actions))
    for number in range(tools):
        name = f"{PREFIX}{number}"
        text = MODULE.format(name=name, marker=str(marker), actions=body)
        (directory / f"{name}.py").write_text(text)


def plain_dicts(provider: str, actions: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """The same tool definitions, built by a plain loop over the cached actions."""
    if provider == "openai":
        return [
            {
                "type": "function",
                "function": {"name": n, "description": a.description, "parameters": a.parameters},
            }
            for n, a in actions
        ]
    if provider == "anthropic":
        return [
            {"name": n, "description": a.description, "input_schema": a.parameters}
            for n, a in actions
        ]
    declarations = [
        {"name": n, "description": a.description, "parameters_json_schema": a.parameters}
        for n, a in actions
    ]
    return [{"function_declarations": declarations}]


def main() -> int:
    """Measure and report."""
    args = parse_args(__doc__)
    tools, per_tool, rounds, batch = (10, 10, 3, 0.005) if args.quick else (100, 10, 15, 0.05)
    report = Report("schemas", args.quick)
    report.settings.update(tools=tools, actions_per_tool=per_tool, rounds=rounds)
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        directory, home, marker = root / "tools", root / "home", root / "imports.log"
        directory.mkdir()
        write_tools(directory, tools, per_tool, marker)
        Host(tools_path=[directory], autoload=False, builtins=False, home=home)
        marker.write_text("")
        host = Host(tools_path=[directory], autoload=False, builtins=False, home=home)
        toolset = host.toolset()
        imported = marker.read_text().split()
        report.check("the warm host imports no tool module", not imported, ", ".join(imported))
        count = len(toolset.actions)
        report.check(f"{tools * per_tool} actions offered", count == tools * per_tool, str(count))
        actions = [(offered.name, offered.action) for offered in toolset.actions]
        cases = {}
        for provider in PROVIDERS:
            ours = host.toolset().schemas(provider)
            same = ours == plain_dicts(provider, actions)
            report.check(f"{provider}: the same dicts as the plain loop", same)
            namespace = {"host": host, "plain": plain_dicts, "actions": actions, "p": provider}
            cases[f"{provider}_toolset"] = ("host.toolset().schemas(p)", namespace)
            cases[f"{provider}_plain"] = ("plain(p, actions)", namespace)
        runs = time_statements(cases, rounds=rounds, batch_seconds=batch)
    for provider in PROVIDERS:
        report.add(
            Figure(
                f"{provider}_toolset",
                f"host.toolset().schemas({provider!r}), {count} actions",
                runs[f"{provider}_toolset"],
            )
        )
        report.add(
            Figure(
                f"{provider}_plain", f"a plain loop, {provider} shape", runs[f"{provider}_plain"]
            )
        )
        report.ratio(
            f"schemas for {count} actions from the cache ({provider})",
            f"{provider}_toolset",
            f"{provider}_plain",
            5.0,
        )
    return report.finish(args.results_dir)


if __name__ == "__main__":
    sys.exit(main())
