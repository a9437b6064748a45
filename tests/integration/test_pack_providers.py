"""A seventh provider from a pack, through the real ``expediter`` command: the Bedrock test pack
(tests/packs/expediter-bedrock) installed as a distribution, listed by ``expediter providers``
and in the ``--provider`` choices without being imported, and imported when
``tools schema --provider bedrock`` or ``parse --provider bedrock`` uses it. Packs that take a
built-in's name, share a name, or raise in their hook are reported, never fatal."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from .conftest import REPO_ROOT, Expediter, SiteDir, module_source

BEDROCK = REPO_ROOT / "tests" / "packs" / "expediter-bedrock"


def install_bedrock(site_dir: SiteDir) -> str:
    """The pack as its pyproject.toml declares it (name, version, entry points), its module
    logging its import; returns the distribution's name."""
    project = tomllib.loads((BEDROCK / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    name = project["name"]
    source = (BEDROCK / "expediter_bedrock" / "__init__.py").read_text(encoding="utf-8")
    site_dir.add_dist(
        name,
        project["version"],
        entry_points=project["entry-points"]["expediter"],
        files={"expediter_bedrock/__init__.py": module_source(name, source)},
    )
    return str(name)


RESPONSE = {
    "output": {
        "message": {
            "role": "assistant",
            "content": [
                {"text": "Checking the time."},
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "now",
                        "input": {"timezone": "UTC"},
                    }
                },
            ],
        }
    },
    "stopReason": "tool_use",
}

EVENTS = [
    {"messageStart": {"role": "assistant"}},
    {
        "contentBlockStart": {
            "start": {"toolUse": {"toolUseId": "tooluse_2", "name": "now"}},
            "contentBlockIndex": 0,
        }
    },
    {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"timez'}}, "contentBlockIndex": 0}},
    {
        "contentBlockDelta": {
            "delta": {"toolUse": {"input": 'one": "UTC"}'}},
            "contentBlockIndex": 0,
        }
    },
    {"contentBlockStop": {"contentBlockIndex": 0}},
    {"messageStop": {"stopReason": "tool_use"}},
]


def test_the_bedrock_pack_is_listed_unimported_and_used_by_schema_and_parse(
    expediter: Expediter, site_dir: SiteDir, tmp_path: Path
) -> None:
    pack = install_bedrock(site_dir)
    expediter.ok("tools", "list")  # discovery imports the pack once and writes the manifest
    expediter.forget_imports()

    table = expediter.ok("providers").stdout.splitlines()
    assert table[0].split() == ["NAME", "PACK", "STREAMING"]
    assert ["bedrock", pack, "yes"] in [line.split() for line in table]
    rows = expediter.json("providers")
    assert {"name": "bedrock", "pack": pack, "streaming": True} in rows
    assert [row["name"] for row in rows] == sorted(row["name"] for row in rows)
    assert len(rows) == 7
    assert "providers" in expediter.ok("--help").stdout
    for command in (["parse"], ["run"], ["tools", "schema"]):
        shown = " ".join(expediter.ok(*command, "--help").stdout.split())
        assert "bedrock|gemini" in shown, command
    assert expediter.imported() == [], "listing providers or their choices imported the pack"

    tools = expediter.json("tools", "schema", "--provider", "bedrock")
    (now,) = [tool["toolSpec"] for tool in tools if tool["toolSpec"]["name"] == "now"]
    assert now["inputSchema"]["json"]["properties"]["timezone"]["type"] == "string"
    assert expediter.imported() == [pack]

    saved = tmp_path / "response.json"
    saved.write_text(json.dumps(RESPONSE), encoding="utf-8")
    (call,) = expediter.json("parse", "--provider", "bedrock", "--response", str(saved))
    assert (call["call_id"], call["tool"], call["action"], call["error"]) == (
        "tooluse_1",
        "clock",
        "now",
        None,
    )
    (message,) = expediter.ok(
        "run", "--provider", "bedrock", "--response", str(saved), "--messages"
    ).json()
    (block,) = message["content"]
    assert block["toolResult"]["toolUseId"] == "tooluse_1"
    assert block["toolResult"]["status"] == "success"
    assert block["toolResult"]["content"][0]["json"]["timezone"] == "UTC"

    stream = tmp_path / "stream.ndjson"
    stream.write_text("".join(json.dumps(event) + "\n" for event in EVENTS), encoding="utf-8")
    (streamed,) = expediter.json("parse", "--provider", "bedrock", "--stream", str(stream))
    assert (streamed["call_id"], streamed["arguments"]) == ("tooluse_2", {"timezone": "UTC"})


def test_a_disabled_bedrock_pack_offers_no_provider(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    pack = install_bedrock(site_dir)
    disabled = {"EXPEDITER_DISABLE_PLUGINS": pack}
    assert "bedrock" not in {row["name"] for row in expediter.json("providers", env=disabled)}
    refused = expediter.run("tools", "schema", "--provider", "bedrock", env=disabled)
    assert refused.returncode == 2
    assert "'bedrock' is not one of" in refused.stderr


def provider_pack(label: str, name: str, *, fail: bool = False) -> str:
    """A pack module registering one provider called ``name`` (or raising in its hook)."""
    body = "raise RuntimeError('no providers today')" if fail else "register(Plain())"
    return module_source(
        label,
        f"""
import expediter
from expediter.providers import RawCall


class Plain(expediter.Provider):
    name = {name!r}

    def tool(self, spec):
        return {{"plain": spec.name}}

    def read_calls(self, response):
        return []

    def result_messages(self, calls, results):
        return []


@expediter.hookimpl
def register_providers(register):
    {body}
""",
    )


def add_provider_pack(site_dir: SiteDir, pack: str, name: str, *, fail: bool = False) -> None:
    package = pack.replace("-", "_")
    site_dir.add_dist(
        pack,
        entry_points={package: package},
        files={f"{package}/__init__.py": provider_pack(pack, name, fail=fail)},
    )


def test_a_pack_taking_a_built_in_name_is_refused_and_the_built_in_stays(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    add_provider_pack(site_dir, "impostor", "anthropic")
    row = expediter.plugins()["impostor"]
    assert "register_providers: provider 'anthropic' is a built-in provider's name" in row["error"]
    listed = expediter.ok("providers", "--json")
    assert {"name": "anthropic", "pack": "expediter", "streaming": True} in listed.json()
    assert "pack 'impostor' failed to load" in listed.stderr
    tools = expediter.json("tools", "schema", "--provider", "anthropic")
    assert all("input_schema" in tool for tool in tools)


def test_two_packs_registering_one_new_name_are_both_withheld(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    add_provider_pack(site_dir, "left", "twin")
    add_provider_pack(site_dir, "right", "twin")
    listed = expediter.ok("providers", "--json")
    assert "twin" not in {row["name"] for row in listed.json()}
    assert "provider 'twin' is registered by pack 'left' 1.0 (entry-point) and pack 'right'" in (
        listed.stderr
    )
    refused = expediter.run("tools", "schema", "--provider", "twin")
    assert refused.returncode == 2
    assert "EXPEDITER_DISABLE_PLUGINS=left or EXPEDITER_DISABLE_PLUGINS=right" in refused.stderr
    kept = expediter.ok(
        "tools", "schema", "--provider", "twin", env={"EXPEDITER_DISABLE_PLUGINS": "left"}
    )
    assert {"plain": "now"} in kept.json()


def test_a_register_providers_hook_that_raises_is_a_load_error_not_a_crash(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    add_provider_pack(site_dir, "broken", "shaky", fail=True)
    row = expediter.plugins()["broken"]
    assert row["error"] == "register_providers: RuntimeError: no providers today"
    listed = expediter.ok("providers")
    assert "shaky" not in listed.stdout
    assert "Traceback" not in listed.stderr
    strict = expediter.run("providers", env={"EXPEDITER_STRICT_PLUGINS": "1"})
    assert strict.returncode == 1
    assert "broken" in strict.stderr
