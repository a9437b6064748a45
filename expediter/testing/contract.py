"""The contract test class every tool pack should pass.

Subclass it in your pack's tests, name the tool, and give example arguments::

    from expediter.testing import ToolContract
    from my_pack import Weather

    class TestWeather(ToolContract):
        tool = Weather
        config = {"units": "metric"}
        secrets = {"api_key": "test-key"}
        examples = {"forecast": {"city": "Paris"}}

With ``config`` or ``secrets`` set, every test runs against the tool's stored instance, made as
``expediter instances add`` makes one (``expediter.testing.instances``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from expediter.core.discovery.catalogue import ToolInfo
from expediter.core.host import Host
from expediter.errors import ConfigError
from expediter.testing.instances import check_unconfigured, offered_as, only_tool, with_hint

if TYPE_CHECKING:
    from expediter.core.instances.records import StoredInstance

__all__ = ["ToolContract"]

_PROVIDER_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$")
_UNKNOWN = "__expediter_contract_unknown__"


class ToolContract:
    """Checks one tool against the tool contract through a real host."""

    #: The tool under test: a Toolbox subclass, a ``@tool`` function, a module or hook object.
    tool: ClassVar[Any] = None
    #: The configuration of the tool's instance (secret fields may be keys of it too), as
    #: ``host.instances.add`` takes it; None with ``secrets`` None: the bare tool.
    config: ClassVar[Mapping[str, Any] | None] = None
    #: The instance's secret fields (``ConfigField(secret=True)``), as ``instances add
    #: --secret`` takes them: sealed, and hidden in events, the ledger and logs.
    secrets: ClassVar[Mapping[str, Any] | None] = None
    #: Arguments that make each action complete: ``{"action": {"arg": value}}``.
    examples: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    #: Fail when an active action has no example.
    require_examples: ClassVar[bool] = False
    #: Fail when a parameter has no description (models choose better with one).
    require_parameter_descriptions: ClassVar[bool] = True

    @pytest.fixture
    def contract_config(self) -> Mapping[str, Any] | None:
        """The instance's configuration: ``config`` (override it for values a fixture makes,
        such as a test server's URL)."""
        return self.config

    @pytest.fixture
    def contract_secrets(self) -> Mapping[str, Any] | None:
        """The instance's secret fields: ``secrets`` (override it like ``contract_config``)."""
        return self.secrets

    @pytest.fixture
    def contract_host(
        self,
        make_host: Callable[..., Host],
        contract_config: Mapping[str, Any] | None,
        contract_secrets: Mapping[str, Any] | None,
    ) -> Host:
        """A host offering only the tool under test (as a stored instance when configured)."""
        if self.tool is None:
            pytest.fail(f"{type(self).__name__}.tool is not set")
        name = type(self).__name__
        hint = (
            f"Set {name}.config (secret fields in {name}.secrets) as an instance of the tool "
            "would have them."
        )
        refused: ConfigError | None = None
        try:
            if contract_config is not None or contract_secrets is not None:
                return make_host(self.tool, config=contract_config, secrets=contract_secrets)
            host = make_host(self.tool)
            if len(host.catalogue(include_internal=True)) == 1:
                check_unconfigured(only_tool(host, self.tool), hint)
            return host
        except ConfigError as exc:
            refused = exc if hint in str(exc) else with_hint(exc, hint)
        pytest.fail(str(refused), pytrace=False)

    @pytest.fixture
    def contract_instance(
        self,
        contract_host: Host,
        contract_config: Mapping[str, Any] | None,
        contract_secrets: Mapping[str, Any] | None,
    ) -> StoredInstance | None:
        """The stored instance the tests call (None: they call the bare tool by its name)."""
        configured = contract_config is not None or contract_secrets is not None
        found = contract_host.instances.list() if contract_host.record_calls else []
        if len(found) > 1:
            pytest.fail(f"the contract host holds {len(found)} instances; it may hold one")
        if configured and not found:
            pytest.fail(
                f"{type(self).__name__}.config is set but contract_host stored no instance: "
                "build it with make_host(self.tool, config=contract_config, "
                "secrets=contract_secrets)"
            )
        return found[0] if found else None

    @pytest.fixture
    def tool_info(self, contract_host: Host, contract_instance: StoredInstance | None) -> ToolInfo:
        """The tool as the host's catalogue describes it, with the actions its instance
        offers when it is configured."""
        errors = [pack.error for pack in contract_host.packs if pack.error]
        assert not errors, f"the tool failed to load: {errors}"
        offered = contract_host.catalogue(include_internal=True)
        assert len(offered) == 1, f"expected exactly one tool, got {[t.name for t in offered]}"
        if contract_instance is None:
            return offered[0]
        return offered_as(contract_host, contract_instance, offered[0])

    @pytest.fixture
    def contract_target(self, tool_info: ToolInfo, contract_instance: StoredInstance | None) -> str:
        """What the tests' calls name: the stored instance's id, or the bare tool's name."""
        return tool_info.name if contract_instance is None else contract_instance.id

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

    def test_metadata_is_deterministic(
        self, contract_host: Host, tool_info: ToolInfo, contract_instance: StoredInstance | None
    ) -> None:
        # A second host on the same configuration (home, database, keys) describes it alike:
        # another process offering the same installed tool, or the same stored instance.
        with Host(
            config=contract_host.config,
            plugins=[self.tool],
            record_calls=contract_host.record_calls,
        ) as again:
            offered = again.catalogue(include_internal=True)
            if contract_instance is not None and len(offered) == 1:
                offered = [offered_as(again, contract_instance, offered[0])]
            described = [info.to_dict() for info in offered]
        assert described == [tool_info.to_dict()]

    def test_undeclared_arguments_are_rejected(
        self, contract_host: Host, tool_info: ToolInfo, contract_target: str
    ) -> None:
        for action in tool_info.actions:
            if action.parameters.get("additionalProperties") or not action.active:
                continue
            arguments = {**self.examples.get(action.name, {}), _UNKNOWN: 1}
            event = contract_host.call(contract_target, action.name, arguments)
            assert event.status == "error", f"{action.name} accepted an undeclared argument"
            assert event.error_type == "ArgumentError", event.error

    def test_examples_complete(
        self, contract_host: Host, tool_info: ToolInfo, contract_target: str
    ) -> None:
        active = {action.name for action in tool_info.actions if action.active}
        unknown = set(self.examples) - active
        assert not unknown, f"examples name actions the tool does not offer: {unknown}"
        if self.require_examples:
            assert not active - set(self.examples), f"no example for {active - set(self.examples)}"
        for name, arguments in self.examples.items():
            event = contract_host.call(contract_target, name, dict(arguments))
            assert event.status == "completed", f"{name} failed: {event.error}"
            json.dumps(event.result)
