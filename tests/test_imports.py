"""Import cost: `import expediter` and `expediter --help` stay light (checked in subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


PACK_COMMAND = '''
import expediter

@expediter.hookimpl
def register_commands(cli):
    @cli.command()
    def stocktake():
        """Count what is on the shelves."""
'''

HELP_PROBE = """
import json, sys
from expediter.cli import main
sys.argv = ['expediter', '--help']
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def test_warm_help_lists_pack_commands_importing_no_pack_and_no_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "shelves.py").write_text(PACK_COMMAND, encoding="utf-8")
    monkeypatch.setenv("EXPEDITER_TOOLS_PATH", str(tools))
    # The first run discovers the pack (imports it once) and writes the manifest.
    cold = subprocess.run(
        [sys.executable, "-c", HELP_PROBE], check=True, capture_output=True, text=True
    )
    assert "stocktake  Count what is on the shelves." in cold.stdout
    warm = subprocess.run(
        [sys.executable, "-c", HELP_PROBE], check=True, capture_output=True, text=True
    )
    *help_lines, modules_line = warm.stdout.splitlines()
    assert "  stocktake  Count what is on the shelves." in help_lines
    modules = set(json.loads(modules_line))
    assert not [name for name in modules if name.startswith("_expediter_tools_")], "a pack"
    roots = {name.split(".")[0] for name in modules}
    assert not roots & set(HEAVY)
    # The --help budget (benchmarks/README.md) has no room for these (~30 ms together).
    assert not roots & {"attr", "attrs", "cattrs", "pluggy", "asyncio"}
    assert "expediter.core.config" not in modules


@pytest.mark.parametrize(
    "name", ["tool", "Toolbox", "action", "Host", "Action", "ToolError", "Secret"]
)
def test_public_names_resolve_lazily(name: str) -> None:
    import expediter

    assert getattr(expediter, name) is not None
    assert name in dir(expediter)


def test_unknown_public_name_raises_attribute_error() -> None:
    import expediter

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = expediter.nope  # type: ignore[attr-defined]
