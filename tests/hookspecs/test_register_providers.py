"""The ``register_providers(register)`` hook: its specification, the built-ins registering
through it, and an implementation pluggy refuses becoming a load error of its pack."""

from __future__ import annotations

from typing import Any

import pluggy

import expediter
from expediter.core.discovery.packs import load_objects
from expediter.core.turns.providers import BUILTIN_PACK, PROVIDERS, check_pack_provider
from expediter.hookspecs import PROJECT_NAME
from expediter.hookspecs import host as host_spec


def test_the_hook_takes_one_register_callback_and_every_answer_counts() -> None:
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(host_spec)
    caller = manager.hook.register_providers
    assert caller.spec is not None
    assert caller.spec.argnames == ("register",)
    assert caller.spec.opts["firstresult"] is False


def test_the_built_ins_register_through_the_hook_as_the_pack_expediter() -> None:
    from expediter.core.turns.providers import _BuiltIns

    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(host_spec)
    manager.register(_BuiltIns(), name=BUILTIN_PACK)
    registered: list[Any] = []
    manager.hook.register_providers(register=registered.append)
    assert sorted(adapter.name for adapter in registered) == list(PROVIDERS)
    assert BUILTIN_PACK == "expediter"


class WrongArgument:
    @expediter.hookimpl
    def register_providers(self, add: Any) -> None:
        add(object())


def test_an_implementation_with_the_wrong_argument_is_a_load_error() -> None:
    pack = load_objects("host", [WrongArgument()], provider_check=check_pack_provider)
    assert (pack.info.error or "").startswith("register_providers: PluginValidationError")
    assert pack.providers == []
