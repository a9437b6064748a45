"""The contract test class every tool pack should pass.

Subclass it in your pack's tests, name the tool, and give example arguments::

    from expediter.testing import ToolContract
    from my_pack import Weather

    class TestWeather(ToolContract):
        tool = Weather
        examples = {"forecast": {"city": "Paris"}}
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import pytest

from expediter.core.discovery.catalogue import ToolInfo
from expediter.core.host import Host

__all__ = ["ToolContract"]

_PROVIDER_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$")
_UNKNOWN = "__expediter_contract_unknown__"


class ToolContract:
    """Checks one tool against the tool contract through a real host."""

    #: The tool under test: a Toolbox subclass, a ``@tool`` function, a module or hook object.
    tool: ClassVar[Any] = None
    #: Arguments that make each action complete: ``{"action": {"arg": value}}``.
    examples: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    #: Fail when an active action has no example.
    require_examples: ClassVar[bool] = False
    #: Fail when a parameter has no description (models choose better with one).
    require_parameter_descriptions: ClassVar[bool] = True

    @pytest.fixture
    def contract_host(self, make_host: Callable[..., Host]) -> Host:
        """A host offering only the tool under test."""
        if self.tool is None:
            pytest.fail(f"{type(self).__name__}.tool is not set")
        return make_host(self.tool)

    @pytest.fixture
    def tool_info(self, contract_host: Host) -> ToolInfo:
        """The tool as the host's catalogue describes it."""
        errors = [pack.error for pack in contract_host.packs if pack.error]
        assert not errors, f"the tool failed to load: {errors}"
        offered = contract_host.catalogue(include_internal=True)
        assert len(offered) == 1, f"expected exactly one tool, got {[t.name for t in offered]}"
        return offered[0]

    def test_tool_loads_and_has_a_name(self, tool_info: ToolInfo) -> None:
        assert tool_info.name
        assert tool_info.actions, f"tool {tool_info.name!r} offers no actions"

    def test_actions_have_provider_safe_names_and_descriptions(self, tool_info: ToolInfo) -> None:
        names = [action.name for action in tool_info.actions]
        assert len(names) == len(set(names)), f"duplicate action names: {names}"
        for action in tool_info.actions:
            assert _PROVIDER_NAME.match(action.name), (
                f"action name {action.name!r} must match {_PROVIDER_NAME.pattern}"
            )
            assert action.description.strip(), f"action {action.name!r} has no description"

    def test_parameter_schemas_are_json_object_schemas(self, tool_info: ToolInfo) -> None:
        for action in tool_info.actions:
            schema = action.parameters
            json.dumps(schema)
            assert schema.get("type") == "object", f"{action.name}: schema type must be object"
            properties = schema.get("properties", {})
            assert isinstance(properties, dict), f"{action.name}: properties must be an object"
            missing = set(schema.get("required", [])) - set(properties)
            assert not missing, f"{action.name}: required names undeclared parameters {missing}"
            if self.require_parameter_descriptions:
                bare = [name for name, prop in properties.items() if not prop.get("description")]
                assert not bare, f"{action.name}: parameters without a description: {bare}"

    def test_config_fields_are_well_formed(self, tool_info: ToolInfo) -> None:
        names = [field.name for field in tool_info.config]
        assert len(names) == len(set(names)), f"duplicate config fields: {names}"
        for field in tool_info.config:
            if field.secret:
                assert field.default is None, f"secret field {field.name!r} must not have a default"
            if field.enum is not None and field.default is not None:
                assert field.default in field.enum, f"{field.name}: default not in its enum"
            for other in field.depends_on or {}:
                assert other in names, f"{field.name}: depends on unknown field {other!r}"

    def test_metadata_is_deterministic(self, contract_host: Host, tool_info: ToolInfo) -> None:
        again = Host(
            autoload=False, plugins=[self.tool], home=contract_host.home, builtins=False
        ).catalogue(include_internal=True)
        assert [info.to_dict() for info in again] == [tool_info.to_dict()]

    def test_undeclared_arguments_are_rejected(
        self, contract_host: Host, tool_info: ToolInfo
    ) -> None:
        for action in tool_info.actions:
            if action.parameters.get("additionalProperties") or not action.active:
                continue
            arguments = {**self.examples.get(action.name, {}), _UNKNOWN: 1}
            event = contract_host.call(tool_info.name, action.name, arguments)
            assert event.status == "error", f"{action.name} accepted an undeclared argument"
            assert event.error_type == "ArgumentError", event.error

    def test_examples_complete(self, contract_host: Host, tool_info: ToolInfo) -> None:
        active = {action.name for action in tool_info.actions if action.active}
        unknown = set(self.examples) - active
        assert not unknown, f"examples name actions the tool does not offer: {unknown}"
        if self.require_examples:
            assert not active - set(self.examples), f"no example for {active - set(self.examples)}"
        for name, arguments in self.examples.items():
            event = contract_host.call(tool_info.name, name, dict(arguments))
            assert event.status == "completed", f"{name} failed: {event.error}"
            json.dumps(event.result)
