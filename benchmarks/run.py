"""Run every benchmark in its own process, print a summary, exit non-zero if a budget fails."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from measure import argument_parser, table, verdict

HERE = Path(__file__).resolve().parent
#: Report name -> script, in the order they run.
BENCHMARKS = {
    "dispatch": "bench_dispatch.py",
    "tools_list": "bench_tools_list.py",
    "help": "bench_help.py",
    "schemas": "bench_schemas.py",
    "ledger": "bench_ledger.py",
    "turn": "bench_turn.py",
    "stream": "bench_stream.py",
    "instances": "bench_instances.py",
    "credentials": "bench_credentials.py",
    "http": "bench_http.py",
    "mcp": "bench_mcp.py",
}
#: Benchmarks that need a pack's dependencies run with that pack's tox env interpreter
#: (`make bench` creates it with `tox run -e mcp --notest`).
INTERPRETERS = {"mcp": HERE.parent / ".tox" / "mcp" / "bin" / "python"}


def _arguments() -> argparse.Namespace:
    parser = argument_parser(__doc__)
    parser.add_argument(
        "names", nargs="*", metavar="name", help=f"run only these: {', '.join(BENCHMARKS)}"
    )
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(BENCHMARKS))
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r} (choose from {', '.join(BENCHMARKS)})")
    return args


def _rows(report: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for budget in report["budgets"]:
        ratio, goal = verdict(budget["ratio"], budget["goal"])
        rows.append((report["benchmark"], budget["name"], ratio, goal, budget["status"]))
    for check in report["checks"]:
        rows.append((report["benchmark"], check["name"], "", "", check["status"]))
    return rows


def run(name: str, quick: bool, results_dir: Path) -> tuple[int, dict[str, Any] | None]:
    """Run one benchmark script; return its exit status and its report (None if it wrote none)."""
    path = results_dir / f"{name}.json"
    path.unlink(missing_ok=True)
    python = INTERPRETERS.get(name, Path(sys.executable))
    if not python.is_file():
        print(f"{name}: {python} is missing: run `tox run -e {name} --notest` first")
        return 1, None
    argv = [str(python), str(HERE / BENCHMARKS[name]), "--results-dir", str(results_dir)]
    status = subprocess.run([*argv, *(["--quick"] if quick else [])], check=False).returncode
    if not path.is_file():
        return status, None
    return status, json.loads(path.read_text(encoding="utf-8"))


def main() -> int:
    """Run the benchmarks and print the summary table."""
    args = _arguments()
    rows = [("benchmark", "budget / check", "ratio", "goal", "status")]
    failed = []
    for name in args.names or list(BENCHMARKS):
        status, report = run(name, args.quick, args.results_dir)
        print()
        if report is None:
            rows.append((name, f"crashed (exit {status}), no report", "", "", "ERROR"))
            failed.append(name)
            continue
        rows += _rows(report)
        if status != 0 or not (args.quick or report["passed"]):
            failed.append(name)
    print("== summary" + (" (--quick: budgets not enforced)" if args.quick else ""))
    print(table(rows))
    print(f"\nreports in {args.results_dir}")
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    print("all budgets met" if not args.quick else "all benchmarks ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
