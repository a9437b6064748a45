"""Provider fixtures: a host offering the built-in tools (``clock`` and ``think``) and its
toolset, which the saved responses in tests/data/responses call."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from expediter.core.host import Host
from expediter.core.turns.toolset import Toolset


@pytest.fixture
def host(make_host: Callable[..., Host], monkeypatch: pytest.MonkeyPatch) -> Host:
    """A host offering the built-in tools the saved responses call, ``clock`` and ``think``,
    as its default tools."""
    monkeypatch.setenv("EXPEDITER_DEFAULT_TOOLS", "clock,think")
    return make_host(builtins=True)


@pytest.fixture
def toolset(host: Host) -> Toolset:
    """The toolset of every tool ``host`` offers (no instances, no client tools)."""
    return host.toolset()
