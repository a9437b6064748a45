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


class PerUser(expediter.Toolbox):
    """Lists an action ``x`` whose argument depends on who asks."""

    name = "per_user"
    dynamic_actions = True
    lists: ClassVar[dict[str | None, list[expediter.Action]]] = {
        "ann": [_action("x", "q")],
        "bob": [_action("x", "r")],
    }

    def get_actions_metadata(self, context: expediter.CallContext) -> list[expediter.Action]:
        return self.lists.get(context.user_id, [])

    def execute_action(
        self, action: str, arguments: dict[str, Any], context: expediter.CallContext
    ) -> Any:
        return sorted(arguments)


def test_each_users_arguments_are_checked_against_that_users_listing(tmp_path: Any) -> None:
    host = expediter.Host(
        home=tmp_path, plugins=[PerUser], builtins=False, autoload=False, record_calls=False
    )
    for _ in range(2):
        ann = host.call("per_user", "x", {"q": "1"}, user_id="ann")
        assert ann.status == "completed", ann.error
        bob = host.call("per_user", "x", {"r": "1"}, user_id="bob")
        assert bob.status == "completed", bob.error
    assert host.call("per_user", "x", {"q": "1"}, user_id="bob").error_type == "ArgumentError"
    # Offered in each user's toolset (one shared instance), called in turn.
    instance = {"tool": "per_user", "instance_id": "shared", "config": {"x": 1}}
    ann_set = host.toolset(user_id="ann", instances=[instance])
    bob_set = host.toolset(user_id="bob", instances=[instance])
    for toolset, argument in ((ann_set, "q"), (bob_set, "r"), (ann_set, "q")):
        offered = next(o for o in toolset.actions if o.instance_id == "shared")
        call = expediter.ToolCall(
            "c1", offered.name, {argument: "1"}, instance_id="shared", tool="per_user", action="x"
        )
        (event,) = toolset.run([call])
        assert event.status == "completed", event.error
    host.close()


def test_a_malformed_schema_is_offered_without_strict_mode(tmp_path: Any) -> None:
    host = _host(tmp_path)
    bad = expediter.Action(
        name="odd",
        description="odd",
        parameters={"type": "object", "properties": {"a": {"enum": 5}, "b": {"anyOf": 5}}},
    )
    Remote.listing = [bad, _action("fine", "a")]
    instance = {"tool": "remote", "instance_id": "r1", "config": {"x": 1}}
    for provider in ("openai", "openai-responses"):
        specs = host.toolset(instances=[instance]).schemas(provider, strict=True)
        assert len(specs) >= 2  # one malformed schema does not take the others down
    host.close()
