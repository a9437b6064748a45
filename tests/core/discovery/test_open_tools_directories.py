"""A tools directory (or module) every user may write is loaded with a warning that
`expediter plugins` shows; under EXPEDITER_STRICT_PLUGINS it is not imported at all."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from expediter.cli import cli
from expediter.core.host import Host
from expediter.errors import PluginLoadError

TOOL = """
import pathlib
pathlib.Path({marker!r}).open("a").write("imported\\n")
import expediter

@expediter.tool
def greet(name: str) -> str:
    \"\"\"Greet someone.\"\"\"
    return "hello " + name
"""


@pytest.fixture
def tools(tmp_path: Path) -> tuple[Path, Path]:
    """A tools directory with one module; the marker counts its imports."""
    directory = tmp_path / "tools"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    marker = tmp_path / "imports.log"
    module = directory / "greet.py"
    module.write_text(TOOL.format(marker=str(marker)))
    os.chmod(module, 0o644)
    return directory, marker


def imports(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


@pytest.fixture(autouse=True)
def _forget_modules() -> None:
    for name in [name for name in sys.modules if name.startswith("_expediter_tools_")]:
        del sys.modules[name]


def plugins(directory: Path, *args: str, **env: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli,
        ["--tools-dir", str(directory), "plugins", *args],
        prog_name="expediter",
        env={"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1", **env},
    )
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("open_to_all", ["directory", "module", "sticky directory"])
def test_a_tools_module_anyone_may_change_loads_with_a_warning(
    tools: tuple[Path, Path], open_to_all: str, caplog: pytest.LogCaptureFixture
) -> None:
    directory, _ = tools
    target = directory / "greet.py" if open_to_all == "module" else directory
    os.chmod(
        target, 0o1777 if open_to_all == "sticky directory" else 0o777 if target.is_dir() else 0o666
    )

    host = Host(tools_path=[directory], autoload=False)

    assert f"{target} is writable by every user" in caplog.text
    assert host.errors == []
    assert host.call("greet", "greet", {"name": "ann"}).result == "hello ann"
    code, out, err = plugins(directory)
    assert code == 0, err
    (row,) = [line for line in out.splitlines() if line.startswith("greet")]
    assert "warning: " in row
    assert f"pack 'greet': {target} is writable by every user" in err
    code, out, _ = plugins(directory, "--json")
    (greet,) = [pack for pack in json.loads(out) if pack["name"] == "greet"]
    assert greet["error"] is None
    assert greet["warning"].startswith(f"{target} is writable by every user")
    assert f"chmod o-w {target}" in greet["warning"]


def test_strict_mode_refuses_to_import_from_a_directory_anyone_may_change(
    tools: tuple[Path, Path],
) -> None:
    directory, marker = tools
    os.chmod(directory, 0o777)

    with pytest.raises(PluginLoadError, match="writable by every user"):
        Host(tools_path=[directory], autoload=False, strict=True)
    assert imports(marker) == 0, "the module was imported"

    code, _, err = plugins(directory, EXPEDITER_STRICT_PLUGINS="1")
    assert code == 1
    assert "writable by every user" in err


def test_strict_mode_is_not_fooled_by_a_warm_cache(tools: tuple[Path, Path]) -> None:
    directory, marker = tools
    os.chmod(directory, 0o777)
    Host(tools_path=[directory], autoload=False)  # caches the catalogue, with the warning
    assert imports(marker) == 1
    with pytest.raises(PluginLoadError, match="writable by every user"):
        Host(tools_path=[directory], autoload=False, strict=True)
    assert imports(marker) == 1


def test_opening_a_directory_after_it_was_cached_is_noticed(
    tools: tuple[Path, Path],
) -> None:
    directory, _ = tools
    Host(tools_path=[directory], autoload=False)
    os.chmod(directory, 0o777)  # changes no modification time
    with pytest.raises(PluginLoadError):
        Host(tools_path=[directory], autoload=False, strict=True)


def test_a_directory_only_its_owner_may_write_gives_no_warning(
    tools: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    directory, _ = tools
    assert Host(tools_path=[directory], autoload=False, strict=True).errors == []
    assert "writable by every user" not in caplog.text
    code, out, err = plugins(directory, "--json", EXPEDITER_STRICT_PLUGINS="1")
    assert code == 0, err
    assert all(pack["warning"] is None for pack in json.loads(out))
