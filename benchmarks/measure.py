"""Shared benchmark machinery: alternating timings, medians, ratio verdicts and JSON reports."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: Figures are compared to baselines measured in the same run, never to absolute times.
Status = Literal["PASS", "FAIL", "INFO", "SKIP"]


@attrs.frozen
class Figure:
    """One measured quantity: the time of each round (seconds per call or per process)."""

    name: str
    description: str
    runs: tuple[float, ...] = ()
    skipped: str | None = None

    @property
    def median(self) -> float | None:
        """The median over rounds, or None when the figure was skipped."""
        return statistics.median(self.runs) if self.runs else None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "name": self.name,
            "description": self.description,
            "unit": "s",
            "median": self.median,
            "min": min(self.runs) if self.runs else None,
            "max": max(self.runs) if self.runs else None,
            "runs": list(self.runs),
            "skipped": self.skipped,
        }


@attrs.frozen
class Budget:
    """A figure divided by a baseline from the same run, against a goal (None: informational)."""

    name: str
    figure: str
    baseline: str
    ratio: float | None
    goal: float | None
    status: Status
    note: str = ""


@attrs.frozen
class Check:
    """A yes/no condition a budget includes (e.g. "the warm run imports no pack")."""

    name: str
    ok: bool
    detail: str = ""

    @property
    def status(self) -> Status:
        """PASS or FAIL."""
        return "PASS" if self.ok else "FAIL"


def _ratio(figure: Figure, baseline: Figure) -> float:
    """The median of round-by-round ratios when paired by round, else the ratio of medians."""
    if len(figure.runs) != len(baseline.runs):
        return statistics.median(figure.runs) / statistics.median(baseline.runs)
    pairs = zip(figure.runs, baseline.runs, strict=True)
    return statistics.median(value / base for value, base in pairs)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


@attrs.define
class Report:
    """Everything one benchmark measured; printed as a table and written as JSON."""

    benchmark: str
    quick: bool
    settings: dict[str, Any] = attrs.Factory(dict)
    figures: dict[str, Figure] = attrs.Factory(dict)
    budgets: list[Budget] = attrs.Factory(list)
    checks: list[Check] = attrs.Factory(list)

    def add(self, figure: Figure) -> Figure:
        """Record a figure."""
        self.figures[figure.name] = figure
        return figure

    def ratio(self, name: str, figure: str, baseline: str, goal: float | None = None) -> Budget:
        """Record ``figure / baseline``; PASS when it is at most ``goal`` (None: informational)."""
        value, base = self.figures[figure], self.figures[baseline]
        skipped = value.skipped or base.skipped
        if skipped:
            budget = Budget(name, figure, baseline, None, goal, "SKIP", skipped)
        else:
            ratio = _ratio(value, base)
            status: Status = "INFO" if goal is None else "PASS" if ratio <= goal else "FAIL"
            budget = Budget(name, figure, baseline, ratio, goal, status)
        self.budgets.append(budget)
        return budget

    def check(self, name: str, ok: bool, detail: str = "") -> Check:
        """Record a yes/no condition."""
        found = Check(name, ok, detail)
        self.checks.append(found)
        return found

    @property
    def passed(self) -> bool:
        """Whether every budget with a goal and every check passed."""
        return not any(b.status == "FAIL" for b in self.budgets) and all(c.ok for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {
            "benchmark": self.benchmark,
            "quick": self.quick,
            "passed": self.passed,
            "enforced": not self.quick,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "settings": self.settings,
            "figures": [figure.to_dict() for figure in self.figures.values()],
            "budgets": [attrs.asdict(budget) for budget in self.budgets],
            "checks": [{**attrs.asdict(check), "status": check.status} for check in self.checks],
        }

    def write(self, results_dir: Path) -> Path:
        """Write ``<results_dir>/<benchmark>.json`` and return its path."""
        results_dir.mkdir(parents=True, exist_ok=True)
        path = results_dir / f"{self.benchmark}.json"
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
        return path

    def render(self) -> str:
        """The figures, budgets and checks as plain-text tables."""
        lines = [
            f"== {self.benchmark}" + (" (--quick: budgets not enforced)" if self.quick else "")
        ]
        width = max(len(name) for name in self.figures) if self.figures else 10
        for figure in self.figures.values():
            shown = f"skipped: {figure.skipped}" if figure.skipped else _duration(figure.median)
            lines.append(f"  {figure.name:<{width}}  {shown:>12}  {figure.description}")
        rows = [("budget / check", "figure / detail", "baseline", "ratio", "goal", "status")]
        for b in self.budgets:
            rows.append((b.name, b.figure, b.baseline, *verdict(b.ratio, b.goal), b.status))
        rows += [(c.name, c.detail, "", "", "", c.status) for c in self.checks]
        return "\n".join([*lines, "", table(rows)])

    def finish(self, results_dir: Path) -> int:
        """Print, write the JSON report, and return the exit status (0 unless a budget failed)."""
        print(self.render())
        print(f"\nreport: {self.write(results_dir)}")
        return 0 if self.quick or self.passed else 1


def verdict(ratio: float | None, goal: float | None) -> tuple[str, str]:
    """A ratio and its goal as table cells."""
    shown = "-" if ratio is None else f"{ratio:.3f}x"
    return shown, "-" if goal is None else f"<= {goal:g}x"


def table(rows: Sequence[Sequence[str]]) -> str:
    """Rows of text as left-aligned columns, indented by two spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)
    return "\n".join(line.rstrip() for line in lines)


def argument_parser(description: str | None) -> argparse.ArgumentParser:
    """A parser with the options every benchmark takes: ``--quick`` and ``--results-dir``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick", action="store_true", help="few iterations and small N; never fails on budget"
    )
    parser.add_argument(
        "--results-dir", type=Path, default=RESULTS_DIR, help=f"default: {RESULTS_DIR}"
    )
    return parser


def parse_args(description: str | None) -> argparse.Namespace:
    """Parse the command line of one benchmark script."""
    return argument_parser(description).parse_args()


def _rotation(names: Sequence[str], round_index: int) -> list[str]:
    """Each round starts at a different case and flips direction, so drift cancels out."""
    shift = round_index % len(names)
    order = list(names[shift:]) + list(names[:shift])
    return order[::-1] if round_index % 2 else order


def time_statements(
    cases: Mapping[str, tuple[str, Mapping[str, Any]]], *, rounds: int, batch_seconds: float
) -> dict[str, tuple[float, ...]]:
    """Seconds per execution of each ``(statement, namespace)``, one batch per case per round."""
    timers = {name: timeit.Timer(stmt, globals=dict(ns)) for name, (stmt, ns) in cases.items()}
    numbers = {}
    for name, timer in timers.items():
        number = 1
        while (elapsed := timer.timeit(number)) < batch_seconds / 4:
            number *= 4 if elapsed < batch_seconds / 40 else 2
        numbers[name] = max(1, math.ceil(number * batch_seconds / max(elapsed, 1e-9)))
    runs: dict[str, list[float]] = {name: [] for name in cases}
    for index in range(rounds):
        for name in _rotation(list(cases), index):
            runs[name].append(timers[name].timeit(numbers[name]) / numbers[name])
    return {name: tuple(values) for name, values in runs.items()}


def run_command(
    argv: Sequence[str], env: Mapping[str, str], *, capture: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion; raise with its stderr when it fails."""
    stream = subprocess.PIPE if capture else subprocess.DEVNULL
    done = subprocess.run(
        list(argv), env=dict(env), stdout=stream, stderr=subprocess.PIPE, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}:\n{done.stderr}")
    return done


def time_commands(
    commands: Mapping[str, Sequence[str]], env: Mapping[str, str], *, rounds: int
) -> dict[str, tuple[float, ...]]:
    """Wall-clock seconds of each command per round, after one untimed warm-up run each."""
    for argv in commands.values():
        run_command(argv, env)
    runs: dict[str, list[float]] = {name: [] for name in commands}
    for index in range(rounds):
        for name in _rotation(list(commands), index):
            started = time.perf_counter()
            run_command(commands[name], env)
            runs[name].append(time.perf_counter() - started)
    return {name: tuple(values) for name, values in runs.items()}


def console_script(name: str) -> Path:
    """A console script installed next to this interpreter (``.venv/bin/<name>``)."""
    script = Path(sys.executable).with_name(name)
    windows = script.with_suffix(".exe")
    return windows if windows.is_file() else script


#: Environment variables (prefixes) that would change what the measured processes do.
_BLOCKED = (
    "EXPEDITER_",
    "PYTHONPATH",
    "PYTHONPROFILEIMPORTTIME",
    "PYTHONPYCACHEPREFIX",
    "PYTHONDONTWRITEBYTECODE",
)


def bench_env(**overrides: str) -> dict[str, str]:
    """The environment for measured subprocesses: no stray expediter or Python settings.

    Bytecode writing stays on, as for a user: the warm-up run caches what the timed runs import.
    """
    env = {key: value for key, value in os.environ.items() if not key.startswith(_BLOCKED)}
    env.update(overrides)
    return env


_MODULES_MARK = "--- sys.modules at exit ---"
_AT_EXIT = (
    "import atexit, sys\n"
    f"atexit.register(lambda: print({_MODULES_MARK!r}, *sorted(sys.modules),"
    " sep='\\n', file=sys.stderr))\n"
)


def cli_code(*args: str) -> str:
    """Python code doing what the ``expediter`` console script does with these arguments.

    ``sys.path[0]`` is set to the script's folder, as when the script runs: the manifest cache
    key includes ``sys.path``, so ``python -c`` would otherwise miss the script's cache.
    """
    script = console_script("expediter")
    return (
        f"import sys\nsys.path[0] = {str(script.parent)!r}\n"
        f"sys.argv = {[str(script), *args]!r}\nfrom expediter.cli import main\nmain()\n"
    )


def probe_modules(
    code: str, env: Mapping[str, str]
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``code`` in a fresh interpreter; return the process and every module it imported.

    ``-X importtime`` does not see modules imported with ``importlib.import_module`` (entry
    points, lazy attributes), so ``sys.modules`` is listed at exit as well.
    """
    argv = [sys.executable, "-X", "importtime", "-c", _AT_EXIT + code]
    done = run_command(argv, env, capture=True)
    timed, _, at_exit = done.stderr.partition(_MODULES_MARK)
    return done, _importtime_modules(timed) | set(at_exit.split())


def _importtime_modules(importtime_stderr: str) -> set[str]:
    """The module names listed by ``-X importtime`` (one ``import time:`` line each)."""
    found = set()
    for line in importtime_stderr.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if line.startswith("import time:") and len(fields) == 3 and fields[0].strip().isdigit():
            found.add(fields[2].strip())
    return found
