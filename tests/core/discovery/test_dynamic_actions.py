"""Tools that declare ``dynamic_actions``: the host asks for their actions each time and
rebuilds what it derived (names, schemas, argument checks) only when the list changes."""

from __future__ import annotations

from typing import Any, ClassVar

import expediter


class Remote(expediter.Toolbox):
    """Actions that a test changes, as a remote server's tools change."""

    name = "remote"
    dynamic_actions = True
    listing: ClassVar[list[expediter.Action]] = []
    asked: ClassVar[int] = 0

    def get_actions_metadata(self, context: expediter.CallContext) -> list[expediter.Action]:
        type(self).asked += 1
        return type(self).listing

    def execute_action(
        self, action: str, arguments: dict[str, Any], context: expediter.CallContext
    ) -> Any:
        return {"action": action, "arguments": arguments}


def _action(name: str, *properties: str) -> expediter.Action:
    return expediter.Action(
        name=name,
        description=name,
        parameters={
            "type": "object",
            "properties": {item: {"type": "string"} for item in properties},
        },
    )


def _host(tmp_path: Any) -> expediter.Host:
    Remote.listing = [_action("first", "a")]
    Remote.asked = 0
    return expediter.Host(
        database_url=f"sqlite:///{tmp_path / 'ledger.db'}",
        plugins=[Remote],
        builtins=False,
        autoload=False,
    )


def test_a_changed_listing_shows_in_the_next_toolset(tmp_path: Any) -> None:
    host = _host(tmp_path)
    instance = {"tool": "remote", "instance_id": "r1", "config": {"x": 1}}

    def listed(toolset: Any) -> list[str]:
        return [item.action.name for item in toolset.actions if item.instance_id == "r1"]

    assert listed(host.toolset(instances=[instance])) == ["first"]
    Remote.listing = [_action("first", "a"), _action("second")]
    assert listed(host.toolset(instances=[instance])) == ["first", "second"]
    host.close()


def test_the_same_listing_reuses_the_schemas_built_from_it(tmp_path: Any) -> None:
    host = _host(tmp_path)
    instance = {"tool": "remote", "instance_id": "r1", "config": {"x": 1}}
    one = host.toolset(instances=[instance]).schemas("openai")
    two = host.toolset(instances=[instance]).schemas("openai")
    assert one == two
    assert Remote.asked >= 2  # asked each time, not once
    host.close()


def test_a_call_is_checked_against_the_current_listing(tmp_path: Any) -> None:
    host = _host(tmp_path)
    assert host.call("remote", "first", {"a": "x"}).status == "completed"
    # The action now takes another argument: the old one is undeclared.
    Remote.listing = [_action("first", "b")]
    event = host.call("remote", "first", {"a": "x"})
    assert event.status == "error"
    assert event.error_type == "ArgumentError"
    assert host.call("remote", "first", {"b": "y"}).status == "completed"
    Remote.listing = []
    assert host.call("remote", "first", {"b": "y"}).error_type == "ActionNotFound"
    host.close()


def test_a_stored_instance_lists_anew_and_keeps_its_source_while_unchanged(
    tmp_path: Any,
) -> None:
    host = _host(tmp_path)
    record = host.instances.add("remote", name="far")

    def offered(toolset: Any) -> list[Any]:
        return [item for item in toolset.actions if item.instance_id == record.id]

    first = offered(host.toolset())
    again = offered(host.toolset())
    assert [item.action.name for item in first] == ["first"]
    assert first[0].action is again[0].action  # the same source: schemas are reused
    Remote.listing = [_action("third")]
    assert [item.action.name for item in offered(host.toolset())] == ["third"]
    host.close()
