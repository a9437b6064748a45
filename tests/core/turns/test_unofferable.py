"""A stored instance the toolset cannot offer is one error among the toolset's, logged once
per instance and problem (not once per toolset), with an egress refusal's reason and what
allows it; a stored instance whose tool is gone does not stop the toolset."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import expediter
from expediter.core.instances.keys import generate_key
from expediter.errors import EgressBlocked

CLOSED = '''
import expediter
from expediter.errors import EgressBlocked


class Door(expediter.Toolbox):
    """A door whose listing the egress guard refuses."""

    name = "door"
    dynamic_actions = True
    config_fields = [expediter.ConfigField("where")]

    def get_actions_metadata(self, context):
        if not self.config:
            return []
        raise EgressBlocked("10.1.2.3 is in 10.0.0.0/8 (private network)", address="10.1.2.3")
'''
POKE = '''
import expediter


@expediter.tool
def poke() -> str:
    """Poke."""
    return "ok"
'''


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EXPEDITER_SECRET_KEYS", generate_key())
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "door.py").write_text(CLOSED)
    (directory / "poke.py").write_text(POKE)
    return directory


def test_an_unofferable_instance_is_logged_once_with_the_hint(
    tools: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with expediter.Host(tools_path=[tools], autoload=False) as host:
        record = host.instances.add("door", name="front", config={"where": "x"}, operator=True)
        with caplog.at_level(logging.WARNING, logger="expediter.core.turns.toolset"):
            toolsets = [host.toolset() for _ in range(3)]
    (error,) = toolsets[-1].errors
    assert error.startswith(f"instance {record.id!r}: EgressBlocked: blocked by egress policy: ")
    assert "`--allow-network 10.1.2.3/32`" in error
    lines = [r for r in caplog.records if record.id in r.getMessage()]
    assert len(lines) == 1
    assert lines[0].levelno == logging.WARNING
    assert "10.1.2.3 is in 10.0.0.0/8 (private network)" in lines[0].getMessage()
    assert lines[0].exc_info is not None  # the traceback goes along, for -v


def test_a_stored_instance_whose_tool_is_gone_does_not_stop_the_toolset(tools: Path) -> None:
    with expediter.Host(tools_path=[tools], autoload=False) as host:
        record = host.instances.add("poke", name="poker", operator=True)
    (tools / "poke.py").unlink()  # uninstalled (``test_serve_command``: one that breaks)
    with expediter.Host(tools_path=[tools], autoload=False) as host:
        toolset = host.toolset()
        (error,) = [e for e in toolset.errors if record.id in e]
        assert "ToolNotFound: no tool named 'poke'" in error
        assert toolset.offered("poke") is None
        # An instance the application names still raises.
        with pytest.raises(expediter.errors.ToolNotFound):
            host.toolset(instances=[expediter.ToolInstance(tool="poke", name="p")])


@pytest.mark.parametrize(
    ("address", "allowed"),
    [("127.0.0.1", "127.0.0.1/32"), ("::1", "::1/128"), ("::ffff:10.0.0.1", "10.0.0.1/32")],
)
def test_an_egress_refusal_says_what_allows_it(address: str, allowed: str) -> None:
    import pickle

    refusal = EgressBlocked(f"{address} is refused", address=address)
    assert str(refusal) == "blocked by egress policy"  # what the model reads
    assert refusal.detail.startswith(f"blocked by egress policy: {address} is refused; ")
    assert f"`--allow-network {allowed}`" in refusal.detail
    assert f"EXPEDITER_EGRESS_ALLOW={allowed}" in refusal.detail
    again: Any = pickle.loads(pickle.dumps(refusal))
    assert (again.reason, again.address, again.detail) == (
        refusal.reason,
        address,
        refusal.detail,
    )
    assert EgressBlocked("scheme 'ftp' is not http or https").hint is None
