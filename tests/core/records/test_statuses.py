"""One vocabulary of statuses: the event and ledger enums, their string forms, and the ledger's
transition table, importable without attrs (the CLI's ``--help`` reads them)."""

from __future__ import annotations

import json
import subprocess
import sys
import typing

from click.testing import CliRunner

from expediter.core.ledger import STATUSES, repository, tables
from expediter.core.records import calls, statuses
from expediter.core.records.statuses import (
    ALLOWED,
    EVENT_STATUSES,
    FINAL_EVENT_STATUSES,
    LEDGER_STATUSES,
    PAUSED_EVENT_STATUSES,
    CallStatus,
    EventStatus,
    LedgerStatus,
)


def imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    output = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    return {name.split(".")[0] for name in json.loads(output.splitlines()[-1])}


def test_statuses_are_strings_that_json_encodes_as_their_value() -> None:
    assert CallStatus.COMPLETED == "completed"
    assert LedgerStatus.AWAITING_APPROVAL == "awaiting_approval"
    assert json.dumps([CallStatus.ERROR, LedgerStatus.ABANDONED]) == '["error", "abandoned"]'
    assert f"{CallStatus.DENIED}" == "denied"


def test_the_event_status_literal_and_the_enum_list_the_same_statuses() -> None:
    assert typing.get_args(EventStatus) == EVENT_STATUSES == tuple(CallStatus)
    assert calls.EventStatus is EventStatus


def test_the_documented_event_statuses() -> None:
    assert EVENT_STATUSES == (
        "pending",
        "awaiting_approval",
        "requires_client_execution",
        "denied",
        "completed",
        "error",
    )
    assert set(EVENT_STATUSES) == PAUSED_EVENT_STATUSES | FINAL_EVENT_STATUSES
    assert not PAUSED_EVENT_STATUSES & FINAL_EVENT_STATUSES
    assert {"denied", "completed", "error"} == FINAL_EVENT_STATUSES


def test_ledger_statuses_are_plain_strings_shared_by_every_user() -> None:
    assert tuple(status.value for status in LedgerStatus) == LEDGER_STATUSES
    assert all(type(status) is str for status in LEDGER_STATUSES)
    assert STATUSES is tables.STATUSES is calls.LEDGER_STATUSES is LEDGER_STATUSES


def test_the_transition_table_lives_with_the_statuses_and_uses_plain_strings() -> None:
    assert repository.ALLOWED is ALLOWED
    assert set(ALLOWED) == set(LEDGER_STATUSES)
    assert all(type(source) is str for source in ALLOWED)
    assert all(type(target) is str for targets in ALLOWED.values() for target in targets)
    assert ALLOWED["abandoned"] == {"executed", "failed"}  # a late result is still recorded
    assert ALLOWED["failed"] == {"executed"}  # a result after a reported failure
    assert {source for source, targets in ALLOWED.items() if not targets} == {
        "denied",
        "confirmed",
    }


def test_the_statuses_module_imports_only_the_standard_library() -> None:
    modules = imported_after("import expediter.core.records.statuses")
    assert not modules & {"attrs", "attr", "cattrs", "click", "sqlalchemy"}
    assert statuses.__name__ in {"expediter.core.records.statuses"}


def test_importing_the_cli_imports_neither_attrs_nor_cattrs() -> None:
    # ``ledger ls --status`` lists the ledger statuses; they come from here, not from the
    # attrs records in ``core.records.calls``.
    assert not imported_after("import expediter.cli") & {"attrs", "attr", "cattrs"}


def test_help_with_a_warm_cache_imports_no_cattrs() -> None:
    code = (
        "import sys\nfrom expediter.cli import main\nsys.argv = ['expediter', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    imported_after(code)  # the first run may build the caches
    assert "cattrs" not in imported_after(code)


def test_ledger_ls_offers_every_ledger_status() -> None:
    from expediter.cli import cli

    result = CliRunner().invoke(cli, ["ledger", "ls", "--help"], prog_name="expediter")
    assert result.exit_code == 0, result.output
    for status in LEDGER_STATUSES:
        assert status in result.output
