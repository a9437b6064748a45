"""``expediter mcp add --secret secret_headers=@FILE``: the object-valued secret field read
from a file or standard input as JSON, with the parsing ``instances add`` uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import expediter
from expediter.cli import cli
from expediter.core.instances.keys import generate_key

HEADERS = {"X-Api-Key": "key-SECRET-5150", "X-Tenant-Token": "tenant-SECRET-0042"}


@pytest.fixture(autouse=True)
def _environment(expediter_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    monkeypatch.setenv("EXPEDITER_LOAD_PLUGINS", "mcp")


def _add(name: str, *options: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli, ["mcp", "add", "https://mcp.example.com/mcp", "--name", name, *options], input=stdin
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def _secrets(instance_id: str) -> dict[str, object]:
    with expediter.Host() as host:
        return dict(host.instances.get(instance_id, decrypt=True).secrets or {})


def test_secret_headers_are_read_as_json_from_a_file_and_from_stdin(tmp_path: Path) -> None:
    path = tmp_path / "headers.json"
    path.write_text(json.dumps(HEADERS, indent=2) + "\n")
    code, out, err = _add("docs", "--secret", f"secret_headers=@{path}")
    assert code == 0, err
    assert _secrets(out.strip()) == {"secret_headers": HEADERS}
    code, out, err = _add("docs-2", "--secret", "secret_headers=-", stdin=json.dumps(HEADERS))
    assert code == 0, err
    assert _secrets(out.strip()) == {"secret_headers": HEADERS}


def test_secret_headers_that_are_not_a_json_object_are_refused_unseen(tmp_path: Path) -> None:
    path = tmp_path / "headers.txt"
    path.write_text("X-Api-Key: key-SECRET-5150\n")
    code, out, err = _add("docs", "--secret", f"secret_headers=@{path}")
    assert (code, out) == (2, "")
    assert str(path) in err
    assert "not valid JSON" in err
    assert "key-SECRET-5150" not in err
