"""The tool contract's records: decisions say one thing, and actions and configuration fields
read the dicts tool authors write."""

from __future__ import annotations

import pytest

from expediter.hookspecs.tool import Action, ConfigField, Decision

# -- Decision ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"deny": True, "require_approval": True},
        {"deny": True, "forced": True},
        {"deny": True, "require_approval": True, "forced": True},
    ],
    ids=["deny+ask", "deny+forced", "deny+forced-ask"],
)
def test_a_decision_that_denies_and_asks_is_refused(options: dict[str, bool]) -> None:
    with pytest.raises(ValueError, match="cannot both deny a call and ask"):
        Decision(**options)


def test_forced_implies_an_ask() -> None:
    decision = Decision(forced=True, reason="wipes data")
    assert decision.require_approval is True
    assert decision == Decision(require_approval=True, forced=True, reason="wipes data")
    assert decision.verdict == "ask"


@pytest.mark.parametrize(
    ("decision", "verdict"),
    [
        (Decision(), "allow"),
        (Decision.allow("fine"), "allow"),
        (Decision.ask(), "ask"),
        (Decision.ask("sure?", forced=True), "ask"),
        (Decision.denied("no"), "deny"),
        (Decision(deny=True), "deny"),
    ],
)
def test_the_constructors_and_verdicts_are_unchanged(decision: Decision, verdict: str) -> None:
    assert decision.verdict == verdict


def test_the_constructors_build_the_same_records_as_before() -> None:
    assert Decision.ask("why", forced=True) == Decision(True, True, False, "why")
    assert Decision.denied("no") == Decision(False, False, True, "no")
    assert Decision.allow() == Decision()


# -- Action and ConfigField from authors' dicts ------------------------------------------------


def test_an_action_from_a_minimal_dict_takes_the_defaults() -> None:
    assert Action.from_dict({"name": "go"}) == Action("go")
    assert Action("go").parameters == {"type": "object", "properties": {}}


@pytest.mark.parametrize("schema", [None, {}])
def test_a_null_or_empty_schema_means_no_parameters(schema: dict[str, object] | None) -> None:
    action = Action.from_dict({"name": "go", "parameters": schema, "fixed": None})
    assert action.parameters == {"type": "object", "properties": {}}
    assert action.fixed == {}


def test_action_flags_are_read_by_truth() -> None:
    action = Action.from_dict({"name": "go", "require_approval": 1, "active": 0})
    assert (action.require_approval, action.active) == (True, False)


def test_an_action_without_a_name_is_refused() -> None:
    with pytest.raises(KeyError):
        Action.from_dict({"description": "nameless"})


def test_a_config_field_reads_lists_as_tuples_and_keeps_unknown_types() -> None:
    field = ConfigField.from_dict({"name": "mode", "type": "choice", "enum": ["a", "b"]})
    assert field.enum == ("a", "b")
    assert field.type == "choice"  # not validated here, as before
    assert field.to_dict()["enum"] == ["a", "b"]
    assert ConfigField.from_dict({"name": "n"}) == ConfigField("n")
