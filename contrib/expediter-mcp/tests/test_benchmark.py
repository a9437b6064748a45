"""The MCP benchmark (``benchmarks/bench_mcp.py``) runs in this pack's environment: a quick run
reports every figure and budget, and its checks (the calls complete, ``tools list`` imports no
fastmcp) pass. Timings are never checked here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_mcp.py"


@pytest.mark.slow
def test_a_quick_run_reports_every_figure_and_passes_its_checks(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("EXPEDITER_")}
    done = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--results-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "mcp.json").read_text(encoding="utf-8"))
    figures = {figure["name"] for figure in report["figures"]}
    assert figures == {"host", "host_arun", "host_ledger", "fastmcp", "tools_list", "python"}
    goals = {(b["figure"], b["baseline"]): b["goal"] for b in report["budgets"]}
    assert goals[("host", "fastmcp")] == 1.2
    assert goals[("host_arun", "fastmcp")] == 1.2
    assert goals[("tools_list", "python")] == 10.0
    failed = [check["name"] for check in report["checks"] if not check["ok"]]
    assert not failed, done.stdout
