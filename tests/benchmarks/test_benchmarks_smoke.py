"""The benchmarks run in ``--quick`` mode and report every figure (timings are never asserted)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

#: script -> (report name, figures, budgets as (figure, baseline, goal)); ``{n}`` is the N used.
EXPECTED: dict[str, tuple[str, tuple[str, ...], tuple[tuple[str, str, float | None], ...]]] = {
    "bench_dispatch.py": (
        "dispatch",
        ("plain", "pluggy", "dispatch_1", "dispatch_{n}", "call_1", "call_{n}", "llm"),
        (("dispatch_{n}", "dispatch_1", 1.1), ("call_1", "llm", 1.0)),
    ),
    "bench_tools_list.py": ("tools_list", ("python", "warm", "cold"), (("warm", "python", 10.0),)),
    "bench_schemas.py": (
        "schemas",
        (
            "openai_toolset",
            "openai_plain",
            "anthropic_toolset",
            "anthropic_plain",
            "gemini_toolset",
            "gemini_plain",
        ),
        (
            ("openai_toolset", "openai_plain", 5.0),
            ("anthropic_toolset", "anthropic_plain", 5.0),
            ("gemini_toolset", "gemini_plain", 5.0),
        ),
    ),
    "bench_help.py": (
        "help",
        ("python", "expediter_help", "llm_help"),
        (("expediter_help", "llm_help", 0.1),),
    ),
    "bench_ledger.py": (
        "ledger",
        (
            "sqlite_physical",
            "sqlite_normal_raw",
            "sqlite_normal_repository",
            "sqlite_normal_ledger",
            "sqlite_normal_batch",
            "sqlite_full_raw",
            "sqlite_full_ledger",
            "host_call_ledger",
            "host_call",
            "langchain",
            "pg_raw",
            "pg_libpq",
            "pg_repository",
            "pg_ledger",
            "pg4_ledger",
            "pg4_pgbench",
            "pg4_ledger_cpu",
            "pg4_pgbench_cpu",
        ),
        (
            ("sqlite_normal_ledger", "sqlite_normal_raw", 2.2),
            ("host_call_ledger", "sqlite_physical", 2.0),
            ("host_call_ledger", "langchain", None),  # orientation only (benchmarks/README.md)
            ("pg_ledger", "pg_raw", 1.3),
            # 4 workers' calls/s >= 0.8x pgbench's, as time per call <= 1 / 0.8x pgbench's.
            ("pg4_ledger", "pg4_pgbench", 1 / 0.8),
        ),
    ),
    "bench_stream.py": (
        "stream",
        (
            "openai_dicts",
            "openai_objects",
            "openai_sdk",
            "mistral_dicts",
            "mistral_objects",
            "openai_responses_dicts",
            "openai_responses_objects",
            "anthropic_dicts",
            "anthropic_objects",
            "anthropic_sdk",
            "gemini_dicts",
            "gemini_objects",
            "ollama_dicts",
            "ollama_objects",
        ),
        (
            ("openai_objects", "openai_sdk", 1.0),
            ("anthropic_objects", "anthropic_sdk", 1.0),
            ("openai_dicts", "openai_sdk", None),
            ("anthropic_dicts", "anthropic_sdk", None),
        ),
    ),
    "bench_turn.py": (
        "turn",
        (
            "turn_no_ledger",
            "turn_sqlite",
            "turn_postgres",
            "parse",
            "run",
            "pluggy",
            "llm",
            "llm_turn",
            "langchain",
        ),
        (
            ("turn_no_ledger", "llm_turn", 1.0),
            ("run", "llm", 1.0),
            ("turn_sqlite", "langchain", None),  # orientation only (benchmarks/README.md)
        ),
    ),
    "bench_credentials.py": (
        "credentials",
        ("decrypt", "raw", "raw_prebuilt", "raw_base64"),
        (
            ("decrypt", "raw_base64", 1.5),
            ("decrypt", "raw", None),
            ("decrypt", "raw_prebuilt", None),
        ),
    ),
    "bench_instances.py": (
        "instances",
        ("stored", "in_memory"),
        (("stored", "in_memory", 2.0),),
    ),
    "bench_http.py": (
        "http",
        ("host", "host_ledger", "httpx"),
        (("host", "httpx", 1.3), ("host_ledger", "httpx", None)),
    ),
}
STATUSES = {"PASS", "FAIL", "INFO", "SKIP"}


def run_quick(script: str, results: Path, *names: str) -> subprocess.CompletedProcess[str]:
    """Run a benchmark script with ``--quick``, writing its report under ``results``."""
    argv = [sys.executable, str(BENCHMARKS / script), "--quick", "--results-dir", str(results)]
    return subprocess.run([*argv, *names], capture_output=True, text=True, timeout=600, check=False)


def check_figure(figure: dict[str, Any]) -> None:
    """A figure has positive finite timings, or says why it was skipped."""
    if figure["skipped"] is not None:
        assert figure["skipped"]
        assert figure["median"] is None
        return
    assert figure["unit"] == "s"
    assert figure["runs"]
    assert all(math.isfinite(run) and run > 0 for run in figure["runs"])
    assert figure["min"] <= figure["median"] <= figure["max"]


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_quick_run_reports_every_figure_and_budget(script: str, tmp_path: Path) -> None:
    name, figures, budgets = EXPECTED[script]
    done = run_quick(script, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))

    assert report["benchmark"] == name
    assert report["quick"] is True
    assert report["enforced"] is False
    assert isinstance(report["passed"], bool)
    n = str(report["settings"].get("tools", ""))
    by_name = {figure["name"]: figure for figure in report["figures"]}
    assert set(by_name) == {figure.format(n=n) for figure in figures}
    for figure in by_name.values():
        check_figure(figure)

    for budget in report["budgets"]:
        assert budget["figure"] in by_name
        assert budget["baseline"] in by_name
        assert budget["status"] in STATUSES
        assert (budget["ratio"] is None) == (budget["status"] == "SKIP")
    goals = {(b["figure"], b["baseline"]): b["goal"] for b in report["budgets"]}
    for figure, baseline, goal in budgets:
        assert goals[(figure.format(n=n), baseline.format(n=n))] == goal
    assert report["checks"]
    for check in report["checks"]:
        assert check["status"] == ("PASS" if check["ok"] else "FAIL")
    assert name in done.stdout


@pytest.mark.slow
def test_run_py_runs_the_named_benchmarks_and_prints_a_summary(tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = run_quick("run.py", results, "dispatch")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "== summary" in done.stdout
    assert sorted(path.name for path in results.iterdir()) == ["dispatch.json"]


def test_run_py_rejects_an_unknown_benchmark(tmp_path: Path) -> None:
    done = run_quick("run.py", tmp_path, "no_such_benchmark")
    assert done.returncode == 2
    assert "unknown benchmark 'no_such_benchmark'" in done.stderr
