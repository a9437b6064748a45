"""A ToolInstance's configuration is taken when it is made: changing the dict afterwards
changes nothing that runs, and never lets another instance run with it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import expediter
from expediter.core.host import Host


class Whoami(expediter.Toolbox):
    """Say which account the instance acts as."""

    config_fields = (expediter.ConfigField("account", required=True),)

    @expediter.action
    def whoami(self) -> str:
        """The account."""
        return f"acting as {self.config['account']}"


def run(host: Host, instance: expediter.ToolInstance) -> Any:
    toolset = host.toolset(instances=[instance])
    name = toolset.name_map.name_for(instance.instance_id or "whoami", "whoami")
    assert name is not None
    response = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": name, "arguments": "{}"},
                        }
                    ],
                }
            }
        ]
    }
    (event,) = toolset.run(toolset.parse_calls("openai", response))
    return event.result


def test_changing_the_config_after_making_the_instance_changes_nothing(
    make_host: Callable[..., Host],
) -> None:
    host = make_host(Whoami)
    given = {"account": "alice"}
    alice = expediter.ToolInstance(tool="whoami", instance_id="acme", config=given)
    given["account"] = "mallory"  # the caller's dict
    alice.config["account"] = "bob"  # the instance's own copy
    assert run(host, alice) == "acting as alice"
    fresh = expediter.ToolInstance(tool="whoami", instance_id="acme", config={"account": "alice"})
    assert run(host, fresh) == "acting as alice"
    bob = expediter.ToolInstance(tool="whoami", instance_id="acme", config={"account": "bob"})
    assert run(host, bob) == "acting as bob"
    assert run(host, alice) == "acting as alice"


def test_a_config_that_cannot_be_copied_is_digested_at_each_load(
    make_host: Callable[..., Host],
) -> None:
    host = make_host(Whoami)
    config = {"account": "alice", "lock": threading.Lock()}  # a lock has no copy
    instance = expediter.ToolInstance(tool="whoami", instance_id="acme", config=config)
    assert instance.snapshot is instance.config
    assert run(host, instance) == "acting as alice"
    instance.config["account"] = "bob"  # no snapshot: the change is seen, under its own key
    assert run(host, instance) == "acting as bob"
    fresh = expediter.ToolInstance(tool="whoami", instance_id="acme", config={"account": "alice"})
    assert run(host, fresh) == "acting as alice"
