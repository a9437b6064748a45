"""The hot path's SQL is kept as text (``statements.py``): it must be what SQLAlchemy compiles
from ``tables.py``, and opening a ledger and recording calls must not import SQLAlchemy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from expediter.core.ledger import compile as rendering
from expediter.core.ledger import schema, statements


def test_kept_statements_are_what_sqlalchemy_compiles_from_the_tables() -> None:
    assert rendering.differences() == []


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_each_kept_statement_equals_its_compiled_text(dialect: str) -> None:
    kept = statements.SQLITE if dialect == "sqlite" else statements.POSTGRESQL
    assert kept == rendering.render(dialect)  # type: ignore[arg-type]


def test_the_kept_revision_is_the_newest_migration_and_the_checked_head() -> None:
    assert statements.REVISION == schema.script_head() == schema.HEAD


def test_the_generator_reproduces_the_kept_module_exactly() -> None:
    assert Path(statements.__file__).read_text(encoding="utf-8") == rendering.source()


def test_a_stale_statement_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    stale = {**statements.SQLITE, "finish": ("UPDATE tool_call_attempts SET 1", ())}
    monkeypatch.setattr(statements, "SQLITE", stale)
    found = rendering.differences()
    assert any(line.startswith("sqlite finish:") for line in found)
    assert "run python -m expediter.core.ledger.compile" in found[-1]


def test_only_postgresql_announces_and_only_in_the_notify_variants() -> None:
    for name, (text, _) in statements.POSTGRESQL.items():
        assert ("pg_notify" in text) == (name.endswith("_notify") or name in _SWEEPS), name
    assert not any("pg_notify" in text for text, _ in statements.SQLITE.values())
    # The notify variants bind the same values in the same order as the plain statements.
    for name in ("finish", "decide"):
        assert statements.POSTGRESQL[f"{name}_notify"][1] == statements.POSTGRESQL[name][1]
        assert statements.SQLITE[f"{name}_notify"] == statements.SQLITE[name]


_SWEEPS = {"sweep", "expire_approvals"}

#: Opens a ledger on an up-to-date database, records calls every way the hot path does, then
#: prints the SQLAlchemy and alembic modules loaded.
_PROBE = """
import json, sys
from pathlib import Path
from expediter.core.ledger import Ledger, Proposal
ledger = Ledger(sys.argv[1], home=Path(sys.argv[2]))
ledger.open()
attempt = ledger.begin(key="probe:1", call_id="1", user_id="u", tool="t", arguments={"a": 1})
ledger.finish(attempt, ok=True, result=3, duration_ms=0.1)
many = ledger.begin_many([Proposal(key=f"probe:{n}", call_id=str(n), user_id=None)
                          for n in (2, 3)])
ledger.finish(many[0], ok=False, error="boom")
paused = ledger.begin(key="probe:4", call_id="4", user_id="u", lease=False)
ledger.decide("probe:4", "u", expected="proposed", status="awaiting_approval", decision="ask")
claim = ledger.decide("probe:4", "u", expected="awaiting_approval", status="approved",
                      decision="allow", decided_by="ops")
ledger.finish(claim, ok=True, result="done")
ledger.confirm("m")
ledger.get("probe:1")
ledger.wait(["probe:1", "probe:3"], timeout=0.05)
ledger.sweep()
ledger.close()
print(json.dumps(sorted(n for n in sys.modules if n.split(".")[0] in ("sqlalchemy", "alembic"))))
"""


def test_opening_an_up_to_date_ledger_and_recording_calls_imports_no_sqlalchemy(
    migrated_url: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, migrated_url, str(tmp_path / "home")],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_operators_reads_still_compile_with_sqlalchemy(
    migrated_url: str, tmp_path: Path
) -> None:
    from expediter.core.ledger import Ledger

    ledger = Ledger(migrated_url, home=tmp_path / "home")
    try:
        attempt = ledger.begin(key="r:1", call_id="1", user_id="u", tool="t")
        ledger.finish(attempt, ok=True, result=1, duration_ms=2.0)
        assert [row.key for row in ledger.rows(user_id="u")] == ["r:1"]
        assert [(s.tool, s.calls) for s in ledger.stats()] == [("t", 1)]
        assert ledger.pending_approvals() == []
    finally:
        ledger.close()
    assert "sqlalchemy" in sys.modules
