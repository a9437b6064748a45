"""A throwaway PostgreSQL cluster for a fixture, or a skip (a failure when CI requires one)."""

from __future__ import annotations

import os
import warnings

import pytest

from expediter.testing.postgres import PostgresCluster, PostgresUnavailable


def cluster_or_skip() -> PostgresCluster:
    """Start a cluster; without PostgreSQL installed, skip loudly (fail under
    ``EXPEDITER_REQUIRE_POSTGRES=1``, as ``.ci/run`` sets it)."""
    try:
        return PostgresCluster.create()
    except PostgresUnavailable as exc:
        if os.environ.get("EXPEDITER_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"EXPEDITER_REQUIRE_POSTGRES=1 but {exc}")
        warnings.warn(f"PostgreSQL ledger tests skipped: {exc}", stacklevel=2)
        pytest.skip(f"PostgreSQL is not installed: {exc}")
