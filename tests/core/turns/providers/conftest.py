"""Provider fixtures: a host offering the built-in tools (``clock`` and ``think``) and its
toolset, which the saved responses in tests/data/responses call."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from expediter.core.host import Host
from expediter.core.turns.toolset import Toolset


@pytest.fixture
def host(make_host: Callable[..., Host]) -> Host:
    """A host offering only the built-in tools."""
    return make_host(builtins=True)


@pytest.fixture
def toolset(host: Host) -> Toolset:
    """The toolset of every tool ``host`` offers (no instances, no client tools)."""
    return host.toolset()
