"""The catalogue's JSON form: ``Catalogue.from_dict`` (the manifest cache's reader, written
without cattrs for the warm ``tools list`` budget) builds what the records converter builds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from expediter.core.discovery.catalogue import (
    Catalogue,
    CommandInfo,
    Conflict,
    PackInfo,
    PackLocation,
    ToolInfo,
)
from expediter.core.records.convert import structure
from expediter.hookspecs.tool import Action, ConfigField

ACTION = Action(
    "search",
    "Find",
    {"type": "object", "properties": {"q": {"type": "string"}}},
    {"lang": "en"},
    require_approval=True,
    active=False,
)
FIELD = ConfigField("mode", "string", "Mode", "How", True, False, "a", ("a", "b"), {"x": 1})
# Every field away from its default: the manifest reader must keep each (it once dropped
# operator_only, so a warm cache let anyone set an operator-only field).
HEADERS = ConfigField(
    "headers",
    "object",
    operator_only=True,
    refused_keys=("host", "cookie"),
    credential_keys_to="secret_headers",
)
LOCATION = PackLocation((("expediter", "web:tool"), ("expediter", "web:other")), "web", None, "w")
PACK = PackInfo(
    "web",
    "1.0",
    "entry-point",
    LOCATION,
    ("execute_action",),
    ("x",),
    ("web",),
    commands=(CommandInfo("crawl", "Crawl a site."),),
)
BROKEN = PackInfo("bad", None, "directory", PackLocation(path="/tools/bad.py"), error="boom")
TOOL = ToolInfo(
    "web", "web", "1.0", "entry-point", True, True, "Web", (ACTION,), (FIELD, HEADERS), "p"
)
CONFLICT = Conflict("dice", (("a", "1", "entry-point", "entry-point:a"), ("b", None, "host", "")))
FULL = Catalogue((PACK, BROKEN), (TOOL, ToolInfo("bare", "p", None, "host")), (CONFLICT,))


def roundtrip(catalogue: Catalogue) -> dict[str, Any]:
    return json.loads(json.dumps(catalogue.to_dict()))  # type: ignore[no-any-return]


PARTIAL: list[dict[str, Any]] = [
    {},
    {"packs": [{"name": "p", "source": "host"}]},
    {"packs": [{"name": "p", "source": "host", "location": None, "version": "2"}]},
    {"tools": [{"name": "t", "pack": "p", "source": "host"}]},
    {"tools": [{"name": "t", "pack": "p", "source": "host", "headless_excluded": True}]},
    {
        "tools": [
            {
                "name": "t",
                "pack": "p",
                "source": "host",
                "actions": [
                    {"name": "a"},
                    {"name": "b", "parameters": None, "fixed": None, "require_approval": 1},
                    {"name": "c", "parameters": {}, "active": 0},
                ],
                "config": [
                    {"name": "f"},
                    {"name": "g", "enum": ["x"], "depends_on": {"y": 1}},
                    {"name": "h", "operator_only": True, "refused_keys": ["k"]},
                    {"name": "i", "type": "object", "credential_keys_to": "j"},
                ],
            }
        ]
    },
    {"conflicts": [{"tool": "t", "packs": [{"name": "a", "source": "host"}]}]},
]


def test_the_manifest_reader_builds_what_the_converter_builds_from_a_full_catalogue() -> None:
    data = roundtrip(FULL)
    assert Catalogue.from_dict(data) == structure(data, Catalogue) == FULL


@pytest.mark.parametrize("data", PARTIAL, ids=range(len(PARTIAL)))
def test_the_manifest_reader_builds_what_the_converter_builds_from_partial_data(
    data: dict[str, Any],
) -> None:
    assert Catalogue.from_dict(data) == structure(data, Catalogue)


def test_the_record_readers_agree_with_the_catalogue_reader() -> None:
    data = roundtrip(FULL)
    assert tuple(PackInfo.from_dict(item) for item in data["packs"]) == FULL.packs
    assert tuple(ToolInfo.from_dict(item) for item in data["tools"]) == FULL.tools
    assert tuple(Conflict.from_dict(item) for item in data["conflicts"]) == FULL.conflicts


def test_headless_excluded_round_trips_through_the_json_form_and_the_manifest_reader() -> None:
    tool = attrs.evolve(TOOL, headless_excluded=True)
    data = json.loads(json.dumps(tool.to_dict()))
    assert data["headless_excluded"] is True
    assert ToolInfo.from_dict(data) == tool
    catalogue = Catalogue(tools=(tool,))
    assert Catalogue.from_dict(roundtrip(catalogue)) == catalogue
    assert TOOL.to_dict()["headless_excluded"] is False


def test_a_tool_info_without_headless_excluded_reads_as_false() -> None:
    data = json.loads(json.dumps(TOOL.to_dict()))
    del data["headless_excluded"]
    assert ToolInfo.from_dict(data).headless_excluded is False
    assert Catalogue.from_dict({"tools": [data]}).tools[0].headless_excluded is False


def test_tools_list_summary_shows_headless_excluded() -> None:
    assert attrs.evolve(TOOL, headless_excluded=True).summary()["headless_excluded"] is True
    assert TOOL.summary()["headless_excluded"] is False


def test_a_malformed_manifest_is_a_key_error(tmp_path: Path) -> None:
    with pytest.raises(KeyError):
        Catalogue.from_dict({"tools": [{"name": "t"}]})


def test_reading_the_manifest_does_not_import_cattrs(tmp_path: Path) -> None:
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps(FULL.to_dict()), encoding="utf-8")
    probe = (
        "import json, sys\n"
        "from expediter.core.discovery.catalogue import Catalogue\n"
        f"catalogue = Catalogue.from_dict(json.load(open({str(path)!r})))\n"
        "print(len(catalogue.tools), 'cattrs' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert done.stdout.split() == ["2", "False"]
