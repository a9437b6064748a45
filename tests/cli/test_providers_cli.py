"""``expediter providers`` and the ``--provider`` choices: the built-ins and the providers packs
register, refused and conflicting names reported, a pack's provider used by ``tools schema``
and ``parse``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from expediter.cli import cli
from expediter.cli.tools import PROVIDER_NAMES, provider_names
from expediter.core.turns.providers import PROVIDERS

BUILT_IN = [
    {"name": name, "pack": "expediter", "streaming": True}
    for name in ["anthropic", "gemini", "mistral", "ollama", "openai", "openai-responses"]
]

PACK = '''
"""Echo provider."""
import expediter
from expediter.providers import RawCall


class Echo(expediter.Provider):
    name = {name!r}

    def tool(self, spec):
        return {{"echo": spec.name}}

    def read_calls(self, response):
        return [RawCall(c["id"], c["name"], c.get("args")) for c in response.get("calls", [])]

    def result_messages(self, calls, results):
        return [{{"id": call.call_id}} for call in calls]


@expediter.hookimpl
def register_providers(register):
    register(Echo())
'''

TOOL = '''
import expediter

@expediter.tool
def shout(text: str) -> str:
    """Shout text."""
    return text.upper()
'''


def run(*args: str, tools: Path | None = None) -> tuple[int, str, str]:
    prefix = ["--tools-dir", str(tools)] if tools else []
    env = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = CliRunner().invoke(cli, [*prefix, *args], prog_name="expediter", env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def make_tools(tmp_path: Path, **packs: str) -> Path:
    """A tools directory with the ``shout`` tool and one provider pack per ``stem=name``."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "loud.py").write_text(TOOL)
    for stem, name in packs.items():
        (tools / f"{stem}.py").write_text(PACK.format(name=name))
    return tools


def test_the_built_in_names_kept_for_the_help_are_the_registry_s() -> None:
    assert tuple(PROVIDERS) == PROVIDER_NAMES
    assert provider_names() == PROVIDER_NAMES  # outside the command line: the built-ins


def test_providers_lists_the_built_ins_with_pack_expediter() -> None:
    code, out, _ = run("providers", "--json")
    assert code == 0
    assert json.loads(out) == BUILT_IN
    code, out, _ = run("providers")
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "PACK", "STREAMING"]
    assert lines[1].split() == ["anthropic", "expediter", "yes"]
    assert len(lines) == 7


def test_a_pack_provider_is_listed_offered_and_parsed(tmp_path: Path) -> None:
    tools = make_tools(tmp_path, echo_pack="echo")
    code, out, _ = run("providers", "--json", tools=tools)
    assert code == 0
    rows = json.loads(out)
    assert [row["name"] for row in rows] == sorted([*PROVIDER_NAMES, "echo"])
    assert {"name": "echo", "pack": "echo_pack", "streaming": False} in rows
    assert "echo  " in run("providers", tools=tools)[1]

    code, out, err = run("tools", "schema", "--provider", "echo", tools=tools)
    assert code == 0, err
    assert {"echo": "shout"} in json.loads(out)  # beside the built-in tools

    response = tmp_path / "response.json"
    response.write_text(
        json.dumps({"calls": [{"id": "c1", "name": "shout", "args": {"text": "a"}}]})
    )
    code, out, err = run(
        "parse", "--provider", "echo", "--response", str(response), "--json", tools=tools
    )
    assert code == 0, err
    ((call),) = json.loads(out)
    assert (call["call_id"], call["tool"], call["arguments"]) == ("c1", "loud", {"text": "a"})


@pytest.mark.parametrize("command", [["tools", "schema"], ["parse"], ["run"]])
def test_the_provider_choices_in_help_include_the_packs(tmp_path: Path, command: list[str]) -> None:
    tools = make_tools(tmp_path, echo_pack="echo")
    code, out, _ = run(*command, "--help", tools=tools)
    assert code == 0
    assert "[anthropic|echo|gemini|mistral|ollama|openai|openai-responses]" in " ".join(out.split())


def test_an_unknown_provider_is_a_usage_error_listing_every_choice(tmp_path: Path) -> None:
    tools = make_tools(tmp_path, echo_pack="echo")
    code, _, err = run("tools", "schema", "--provider", "nope", tools=tools)
    assert code == 2
    assert "'nope' is not one of" in err
    assert "'echo'" in err
    assert "'openai'" in err


def test_a_pack_taking_a_built_in_name_is_refused_and_the_built_in_stays(tmp_path: Path) -> None:
    tools = make_tools(tmp_path, impostor="openai")
    code, out, _ = run("plugins", "--json", tools=tools)
    (row,) = [row for row in json.loads(out) if row["name"] == "impostor"]
    assert "provider 'openai' is a built-in provider's name" in row["error"]
    code, out, err = run("providers", "--json", tools=tools)
    assert (code, json.loads(out)) == (0, BUILT_IN)
    assert "pack 'impostor' failed to load" in err
    code, out, _ = run("tools", "schema", "--provider", "openai", tools=tools)
    assert json.loads(out)[0]["type"] == "function"


def test_two_packs_registering_one_name_are_reported_and_neither_is_offered(
    tmp_path: Path,
) -> None:
    tools = make_tools(tmp_path, left="twin", right="twin")
    code, out, err = run("providers", "--json", tools=tools)
    assert (code, json.loads(out)) == (0, BUILT_IN)
    assert "provider 'twin' is registered by pack 'left'" in err
    assert "and pack 'right'" in err
    code, _, err = run("tools", "schema", "--provider", "twin", tools=tools)
    assert code == 2
    assert "provider 'twin' is registered by pack 'left'" in err
    code, out, _ = run("plugins", "--json", tools=tools)
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["left"]["conflicts"] == rows["right"]["conflicts"] != []
    assert rows["left"]["providers"] == ["twin"]
