"""Import cost: `import expediter` and `expediter --help` stay light (checked in subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("sqlalchemy", "alembic", "httpx", "fastmcp")


def imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    output = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True
    ).stdout
    return {name.split(".")[0] for name in json.loads(output.splitlines()[-1])}


def test_import_expediter_imports_no_heavy_library() -> None:
    modules = imported_after("import expediter")
    assert not modules & set(HEAVY)
    assert not modules & {"pluggy", "cattrs", "click", "asyncio"}, "the public API is lazy"


def test_help_imports_no_heavy_library() -> None:
    code = (
        "import sys\nfrom expediter.cli import main\nsys.argv = ['expediter', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert not imported_after(code) & set(HEAVY)


@pytest.mark.parametrize("name", ["tool", "Toolbox", "action", "Host", "Action", "ToolError"])
def test_public_names_resolve_lazily(name: str) -> None:
    import expediter

    assert getattr(expediter, name) is not None
    assert name in dir(expediter)


def test_unknown_public_name_raises_attribute_error() -> None:
    import expediter

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = expediter.nope  # type: ignore[attr-defined]
