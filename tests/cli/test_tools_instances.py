"""`expediter tools list` and `tools show INSTANCE_ID` show a stored instance's own actions and
parameters (a tool whose actions its configuration or its server decides lists none of its
own), each instance as its owner's toolset offers it; an instance that cannot list them is an
error on its row, never the command's."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from expediter.cli import cli
from expediter.core.instances.keys import generate_key

#: A tool whose actions are the items its instance configures (as http and mcp instances').
MENU = '''
import expediter


class Menu(expediter.Toolbox):
    """Order from a menu."""

    name = "menu"
    dynamic_actions = True
    config_fields = [expediter.ConfigField("items", type="array", required=True)]

    def get_actions_metadata(self, context):
        if not self.config:
            return []
        if "broken" in self.config["items"]:
            raise RuntimeError("the menu cannot be read")
        size = {"type": "string", "enum": ["S", "L"], "description": "The size."}
        return [
            expediter.Action(
                name=item,
                description=f"Order {item}.",
                parameters={
                    "type": "object",
                    "properties": {"size": size, "note": True},
                    "required": ["size"],
                },
            )
            for item in self.config["items"]
        ]

    def execute_action(self, action, arguments, context):
        return {"ordered": action, **arguments}
'''
#: The fields of `tools list --json` (docs/operations.md, "JSON shapes").
DOCUMENTED = {"name", "pack", "source", "internal", "actions"}
Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def expediter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    """`expediter --tools-dir TOOLS ARGS`: exit code, standard output, standard error."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "menu.py").write_text(textwrap.dedent(MENU))
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    monkeypatch.setenv("EXPEDITER_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run(*args: str) -> tuple[int, str, str]:
        result = CliRunner().invoke(cli, ["--tools-dir", str(tools), *args])
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.stdout, result.stderr

    return run


def add(expediter: Run, name: str, items: list[str], *options: str) -> str:
    config = json.dumps({"items": items})
    code, out, err = expediter(
        "instances", "add", "menu", "--name", name, "--config", config, *options
    )
    assert code == 0, err
    return out.strip()


def test_tools_list_gives_each_instance_a_row_with_its_actions(expediter: Run) -> None:
    cafe = add(expediter, "cafe", ["coffee", "tea"])
    bar = add(expediter, "bar", ["juice"], "--user", "ann")
    code, out, err = expediter("tools", "list", "--json")
    assert code == 0, err
    rows = json.loads(out)
    (tool,) = [row for row in rows if row["name"] == "menu"]
    assert tool["actions"] == []  # the tool itself offers none
    instances = {row["instance_id"]: row for row in rows if row["source"] == "instance"}
    assert set(instances) == {cafe, bar}
    for row in instances.values():
        assert set(row) >= DOCUMENTED
        assert (row["tool"], row["pack"], row["error"]) == ("menu", "menu", None)
    assert (instances[cafe]["name"], instances[cafe]["actions"]) == ("cafe", ["coffee", "tea"])
    assert (instances[bar]["owner_id"], instances[bar]["actions"]) == ("ann", ["juice"])
    code, table, _ = expediter("tools", "list")
    assert code == 0
    assert "INSTANCE" in table
    (line,) = [line for line in table.splitlines() if cafe in line]
    assert line.split()[:4] == ["cafe", "menu", "coffee,", "tea"]


def test_tools_show_of_an_instance_shows_its_actions_and_parameters(expediter: Run) -> None:
    cafe = add(expediter, "cafe", ["coffee", "tea"])
    code, text, err = expediter("tools", "show", cafe)
    assert code == 0, err
    assert "coffee: Order coffee." in text
    assert 'size: "S" | "L" (required)  The size.' in text
    assert "note: any (optional)" in text  # a boolean schema is shown, not a crash
    code, out, _ = expediter("tools", "show", cafe, "--json")
    data = json.loads(out)
    assert [action["name"] for action in data["actions"]] == ["coffee", "tea"]
    assert data["actions"][0]["parameters"]["required"] == ["size"]
    assert (data["instance"]["id"], data["instance_error"]) == (cafe, None)


def test_an_instance_that_cannot_list_its_actions_is_an_error_on_its_row(expediter: Run) -> None:
    broken = add(expediter, "broken", ["broken"])
    fine = add(expediter, "fine", ["tea"])
    code, out, _ = expediter("tools", "list", "--json")
    assert code == 0
    rows = {row.get("instance_id"): row for row in json.loads(out)}
    assert rows[broken]["actions"] == []
    assert rows[broken]["error"] == "RuntimeError: the menu cannot be read"
    assert rows[fine]["actions"] == ["tea"]
    code, text, _ = expediter("tools", "show", broken)
    assert code == 0
    assert "its actions cannot be listed: RuntimeError: the menu cannot be read" in text
    code, out, _ = expediter("tools", "show", broken, "--json")
    assert json.loads(out)["instance_error"] == "RuntimeError: the menu cannot be read"


def test_a_disabled_instance_is_listed_without_being_loaded(expediter: Run) -> None:
    broken = add(expediter, "off", ["broken"])
    assert expediter("instances", "disable", broken)[0] == 0
    code, out, _ = expediter("tools", "list", "--json")
    assert code == 0
    (row,) = [row for row in json.loads(out) if row.get("instance_id") == broken]
    assert (row["enabled"], row["actions"], row["error"]) == (False, [], "disabled")


def test_tools_list_in_a_fresh_home_opens_no_database(expediter: Run, tmp_path: Path) -> None:
    import os

    home = Path(os.environ["EXPEDITER_HOME"])
    code, out, _ = expediter("tools", "list", "--json")
    assert code == 0
    assert all(row["source"] != "instance" for row in json.loads(out))
    assert not (home / "expediter.db").exists()
