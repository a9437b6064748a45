"""The records converter: one cattrs converter behind every ``to_dict``/``from_dict``, built
lazily, and the JSON form of every record class."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from typing import Any, Literal

import attrs
import pytest
from support.events import LEDGER_FIELDS

from expediter.core.discovery.catalogue import Conflict, PackInfo, PackLocation, ToolInfo
from expediter.core.ledger.records import LedgerRow, ToolStats
from expediter.core.records.convert import json_form, json_value, structure, unstructure
from expediter.core.turns.naming import NameEntry, NameMap, assign_names
from expediter.hookspecs.tool import Action, ConfigField


@json_form(
    keys=("title", "size", "label"),
    computed={"label": lambda box: f"{box.name}:{box.size}"},
    rename={"name": "title"},
    dump={"size": lambda size: size * 10},
    load={"size": lambda size: size // 10},
)
@attrs.frozen
class Box:
    name: str
    size: int = 1
    secret: str = "hidden"


@attrs.frozen
class Plain:
    name: str
    note: str | None
    kind: Literal["a", "b"] = "a"
    flag: bool = False
    tags: tuple[str, ...] = ()
    pairs: tuple[tuple[str, int], ...] = ()
    boxes: tuple[Box, ...] = ()
    extra: Any = None
    data: Mapping[str, Any] = attrs.field(factory=dict)


def test_a_form_orders_renames_computes_and_omits_keys() -> None:
    assert list(unstructure(Box("b", 2)).items()) == [
        ("title", "b"),
        ("size", 20),
        ("label", "b:2"),
    ]


def test_a_form_reads_renamed_keys_through_its_load_hooks_and_ignores_computed_ones() -> None:
    assert structure({"title": "b", "size": 20, "label": "ignored"}, Box) == Box("b", 2)


def test_a_record_without_a_form_is_written_field_by_field_with_collections_as_lists() -> None:
    record = Plain("p", None, tags=("x",), pairs=(("a", 1),), boxes=(Box("b"),), data={"k": 1})
    assert unstructure(record) == {
        "name": "p",
        "note": None,
        "kind": "a",
        "flag": False,
        "tags": ["x"],
        "pairs": [["a", 1]],
        "boxes": [{"title": "b", "size": 10, "label": "b:1"}],
        "extra": None,
        "data": {"k": 1},
    }
    assert structure(json.loads(json.dumps(unstructure(record))), Plain) == record


def test_any_fields_are_written_as_they_are() -> None:
    value = {"nested": (1, 2)}
    assert unstructure(Plain("p", None, extra=value))["extra"] is value


def test_reading_is_lenient_like_a_reader_of_json_should_be() -> None:
    read = structure({"name": 5, "kind": "zzz", "flag": 1, "tags": ["t"]}, Plain)
    # Values are taken as JSON gave them (no str()), booleans by truth; a missing optional
    # field without a default is None, other missing fields take their defaults.
    assert read == Plain(5, None, kind="zzz", flag=True, tags=("t",))  # type: ignore[arg-type]


def test_a_missing_required_key_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        structure({"note": "n"}, Plain)


def test_json_value_turns_bytes_tuples_and_sets_into_json_data() -> None:
    assert json_value({"b": b"\xff", "t": (1, 2), "s": frozenset({3})}) == {
        "b": "/w==",
        "t": [1, 2],
        "s": [3],
    }


def test_importing_records_does_not_import_cattrs_until_the_first_conversion() -> None:
    modules = [
        "expediter.hookspecs.tool",
        "expediter.core.records.calls",
        "expediter.core.discovery.catalogue",
        "expediter.core.turns.naming",
        "expediter.core.ledger.records",
    ]
    probe = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in modules)
        + "before = 'cattrs' in sys.modules\n"
        + "from expediter.hookspecs.tool import Action\n"
        + "Action('a').to_dict()\n"
        + "print(before, 'cattrs' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert done.stdout.split() == ["False", "True"]


# -- every record's JSON form -----------------------------------------------------------------

SEARCH = Action(
    "search",
    "Find pages",
    {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    {"lang": "en"},
    require_approval=True,
    active=False,
)
KEY = ConfigField("api_key", "string", "Key", "The key", True, True, None, ("a", "b"), {"x": 1})
LOCATION = PackLocation((("expediter", "web:tool"),), "web-pack", None, "web")
PACK = PackInfo("web", "1.0", "entry-point", LOCATION, ("execute_action",), (), ("web",), None)
TOOL = ToolInfo("web", "web", "1.0", "entry-point", False, True, "Web", (SEARCH,), (KEY,), PACK.id)
CONFLICT = Conflict("dice", (("a", "1", "entry-point", "entry-point:a"), ("b", None, "host", "")))


def test_action_and_config_field_forms() -> None:
    assert list(SEARCH.to_dict()) == [
        "name",
        "description",
        "parameters",
        "fixed",
        "require_approval",
        "active",
    ]
    assert SEARCH.to_dict()["fixed"] == {"lang": "en"}
    assert KEY.to_dict() == {
        "name": "api_key",
        "type": "string",
        "label": "Key",
        "description": "The key",
        "required": True,
        "secret": True,
        "default": None,
        "enum": ["a", "b"],
        "depends_on": {"x": 1},
        "operator_only": False,
        "refused_keys": [],
        "credential_keys_to": None,
    }
    assert Action.from_dict(SEARCH.to_dict()) == SEARCH
    assert ConfigField.from_dict(KEY.to_dict()) == KEY


def test_catalogue_record_forms() -> None:
    assert LOCATION.to_dict() == {
        "entry_points": [["expediter", "web:tool"]],
        "distribution": "web-pack",
        "path": None,
        "module": "web",
    }
    assert list(PACK.to_dict().items()) == [
        ("name", "web"),
        ("id", "entry-point:web-pack"),
        ("version", "1.0"),
        ("source", "entry-point"),
        ("tools", ["web"]),
        ("hooks", ["execute_action"]),
        ("host_hooks", []),
        ("error", None),
        ("location", LOCATION.to_dict()),
        ("commands", []),
        ("providers", []),
        ("streaming_providers", []),
    ]
    assert list(TOOL.to_dict()) == [
        "name",
        "pack",
        "version",
        "source",
        "internal",
        "user_scoped",
        "description",
        "actions",
        "config",
        "pack_id",
        "headless_excluded",
    ]
    assert TOOL.to_dict()["actions"] == [SEARCH.to_dict()]
    assert CONFLICT.to_dict() == {
        "tool": "dice",
        "packs": [
            {"name": "a", "version": "1", "source": "entry-point", "id": "entry-point:a"},
            {"name": "b", "version": None, "source": "host", "id": ""},
        ],
        "message": CONFLICT.message,
        "kind": "tool",
    }
    for record in (LOCATION, PACK, TOOL, CONFLICT):
        assert type(record).from_dict(json.loads(json.dumps(record.to_dict()))) == record


def test_ledger_record_forms() -> None:
    row = LedgerRow(
        key="m:c",
        call_id="c",
        status="executed",
        attempted_at=0.0,
        updated_at=1.5,
        result={"r": 1},
        attempt_id="hidden",
        request={"hidden": True},
    )
    data = row.to_dict()
    assert list(data)[: len(LEDGER_FIELDS)] == list(LEDGER_FIELDS)
    assert "attempt_id" not in data
    assert "request" not in data
    assert data["attempted_at"] == "1970-01-01T00:00:00.000+00:00"
    assert data["finished_at"] is None
    assert ToolStats("t", 3, 1, 1.5, 2.5, 1).to_dict() == {
        "tool": "t",
        "calls": 3,
        "failures": 1,
        "p50_ms": 1.5,
        "p95_ms": 2.5,
        "abandoned": 1,
    }


def test_name_map_forms() -> None:
    name_map = assign_names([("i1", "one", "t", "go"), ("i2", "two", "u", "run", True)])
    assert name_map.to_dict() == {
        "version": 1,
        "names": {
            "go": {"instance_id": "i1", "tool": "t", "action": "go", "client": False},
            "run": {"instance_id": "i2", "tool": "u", "action": "run", "client": True},
        },
    }
    assert list(name_map.to_dict()) == ["version", "names"]
    assert NameMap.from_dict(json.loads(json.dumps(name_map.to_dict()))) == name_map
    assert NameEntry("n", "i", "t", "a").to_dict() == {
        "instance_id": "i",
        "tool": "t",
        "action": "a",
        "client": False,
    }
    assert NameMap.from_dict({}) == NameMap()
