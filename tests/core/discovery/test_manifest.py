"""The manifest cache: a warm host imports no tool module, and changes invalidate it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from expediter.core.config import BUILTIN_DIR, PluginSettings
from expediter.core.discovery import manifest
from expediter.core.host import Host

TOOL = """
import pathlib
pathlib.Path({marker!r}).open("a").write("imported\\n")
import expediter

@expediter.tool
def {name}(text: str) -> str:
    \"\"\"Echo text.

    Args:
        text: What to echo.
    \"\"\"
    return text
"""


def add_tool(directory: Path, name: str, marker: Path) -> Path:
    path = directory / f"{name}.py"
    path.write_text(TOOL.format(name=name, marker=str(marker)))
    return path


@pytest.fixture
def tools(tmp_path: Path) -> tuple[Path, Path]:
    directory = tmp_path / "tools"
    directory.mkdir()
    marker = tmp_path / "imports.log"
    add_tool(directory, "echo", marker)
    return directory, marker


def imports(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def forget_modules() -> None:
    for name in [name for name in sys.modules if name.startswith("_expediter_tools_")]:
        del sys.modules[name]


def test_a_warm_host_lists_tools_without_importing_them(
    tools: tuple[Path, Path], expediter_home: Path
) -> None:
    directory, marker = tools
    cold = Host(tools_path=[directory], autoload=False)
    assert imports(marker) == 1
    assert list((expediter_home / "cache").glob("manifest-*.json"))
    forget_modules()
    warm = Host(tools_path=[directory], autoload=False)
    assert imports(marker) == 1, "the warm host imported the tool"
    assert [info.to_dict() for info in warm.catalogue()] == [
        info.to_dict() for info in cold.catalogue()
    ]
    assert warm.call("echo", "echo", {"text": "hi"}).result == "hi"
    assert imports(marker) == 2


def test_adding_or_editing_a_tools_module_invalidates_the_cache(tools: tuple[Path, Path]) -> None:
    directory, marker = tools
    Host(tools_path=[directory], autoload=False)
    add_tool(directory, "second", marker)
    assert "second" in {i.name for i in Host(tools_path=[directory], autoload=False).catalogue()}
    path = directory / "echo.py"
    path.write_text(path.read_text().replace("Echo text.", "Echo text back."))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    forget_modules()
    info = Host(tools_path=[directory], autoload=False).tool_info("echo")
    assert info.actions[0].description == "Echo text back."


def test_refresh_rebuilds_the_cache(tools: tuple[Path, Path]) -> None:
    directory, marker = tools
    Host(tools_path=[directory], autoload=False)
    forget_modules()
    Host(tools_path=[directory], autoload=False, refresh=True)
    assert imports(marker) == 2


def test_a_catalogue_with_load_errors_is_not_cached(tmp_path: Path, expediter_home: Path) -> None:
    directory = tmp_path / "tools"
    directory.mkdir()
    (directory / "broken.py").write_text("raise RuntimeError('not yet')\n")
    Host(tools_path=[directory], autoload=False)
    assert not list((expediter_home / "cache").glob("manifest-*.json"))


def test_a_corrupt_cache_is_rebuilt(tools: tuple[Path, Path], expediter_home: Path) -> None:
    directory, _ = tools
    Host(tools_path=[directory], autoload=False)
    (path,) = (expediter_home / "cache").glob("manifest-*.json")
    path.write_text("{not json")
    assert [info.name for info in Host(tools_path=[directory], autoload=False).catalogue()] == [
        "clock",
        "echo",
        "memory",
        "notes",
        "think",
        "todo_list",
    ]
    assert json.loads(path.read_text())["catalogue"]["tools"]


SCHEDULER = """
import pathlib
pathlib.Path({marker!r}).open("a").write("imported\\n")
import expediter

@expediter.tool(headless_excluded=True)
def later(when: str) -> str:
    \"\"\"Schedule a run.\"\"\"
    return when
"""


def test_a_warm_cache_keeps_headless_excluded(tools: tuple[Path, Path]) -> None:
    directory, marker = tools
    (directory / "later.py").write_text(SCHEDULER.format(marker=str(marker)))
    Host(tools_path=[directory], autoload=False)
    assert imports(marker) == 2
    forget_modules()
    warm = Host(tools_path=[directory], autoload=False)
    assert imports(marker) == 2, "the warm host imported a tool"
    assert warm.tool_info("later").headless_excluded is True
    assert warm.tool_info("echo").headless_excluded is False


def test_a_cache_written_before_headless_excluded_existed_is_rebuilt(
    tools: tuple[Path, Path], expediter_home: Path
) -> None:
    directory, marker = tools
    (directory / "later.py").write_text(SCHEDULER.format(marker=str(marker)))
    Host(tools_path=[directory], autoload=False)
    (path,) = (expediter_home / "cache").glob("manifest-*.json")
    old = json.loads(path.read_text())
    old["key"]["format"] = manifest.FORMAT - 1
    for tool in old["catalogue"]["tools"]:
        del tool["headless_excluded"]
    path.write_text(json.dumps(old))
    forget_modules()
    host = Host(tools_path=[directory], autoload=False)
    assert imports(marker) == 4, "the old cache was read instead of rebuilt"
    assert host.tool_info("later").headless_excluded is True
    rebuilt = json.loads(path.read_text())
    assert rebuilt["key"]["format"] == manifest.FORMAT
    assert {tool["name"]: tool["headless_excluded"] for tool in rebuilt["catalogue"]["tools"]}[
        "later"
    ] is True


def test_the_key_follows_switches_and_installed_distributions(tmp_path: Path, monkeypatch) -> None:
    settings = PluginSettings()
    key = manifest.cache_key(settings, BUILTIN_DIR)
    assert manifest.cache_key(PluginSettings(disabled=frozenset({"x"})), BUILTIN_DIR) != key
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "script.py").write_text("")
    assert manifest.cache_key(settings, BUILTIN_DIR) == key, "plain folders do not count"
    (tmp_path / "acme-1.0.dist-info").mkdir()
    assert manifest.cache_key(settings, BUILTIN_DIR) != key


def test_bytecode_written_by_an_import_does_not_invalidate_the_key(
    tools: tuple[Path, Path],
) -> None:
    directory, _ = tools
    settings = PluginSettings(tools_path=(directory,))
    key = manifest.cache_key(settings, BUILTIN_DIR)
    (directory / "__pycache__").mkdir()
    (directory / "__pycache__" / "echo.cpython-311.pyc").write_bytes(b"")
    assert manifest.cache_key(settings, BUILTIN_DIR) == key


def test_editing_a_module_inside_a_tool_package_invalidates_the_key(tmp_path: Path) -> None:
    package = tmp_path / "tools" / "multi"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    helper = package / "helper.py"
    helper.write_text("")
    settings = PluginSettings(tools_path=(tmp_path / "tools",))
    key = manifest.cache_key(settings, BUILTIN_DIR)
    stat = helper.stat()
    os.utime(helper, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert manifest.cache_key(settings, BUILTIN_DIR) != key


def test_read_ignores_a_cache_for_another_key(tmp_path: Path) -> None:
    from expediter.core.discovery.catalogue import Catalogue

    path = tmp_path / "m.json"
    manifest.write(path, {"a": 1}, Catalogue())
    assert manifest.read(path, {"a": 1}) == Catalogue()
    assert manifest.read(path, {"a": 2}) is None
    assert manifest.read(tmp_path / "missing.json", {"a": 1}) is None


# -- the commands index (`expediter --help`) --------------------------------------------------

COMMANDS = '''
import pathlib
pathlib.Path({marker!r}).open("a").write("imported\\n")
import expediter

@expediter.hookimpl
def register_commands(cli):
    @cli.command()
    def greet():
        """Greet everyone."""
'''


@pytest.fixture
def commands_env(
    tmp_path: Path, expediter_home: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """A tools directory (named by EXPEDITER_TOOLS_PATH) whose module adds a command."""
    directory = tmp_path / "tools"
    directory.mkdir()
    marker = tmp_path / "imports.log"
    (directory / "greeting.py").write_text(COMMANDS.format(marker=str(marker)))
    monkeypatch.setenv("EXPEDITER_TOOLS_PATH", str(directory))
    # The environment's own configuration is what the index is kept for: no installed packs.
    monkeypatch.setenv("EXPEDITER_DISABLE_PLUGIN_AUTOLOAD", "1")
    return directory, marker


def test_pack_commands_survive_the_manifest(tmp_path: Path) -> None:
    from expediter.core.discovery.catalogue import Catalogue, CommandInfo, PackInfo

    pack = PackInfo("kit", "1.0", "entry-point", commands=(CommandInfo("greet", "Greet."),))
    path = tmp_path / "cache" / "m.json"
    manifest.write(path, {"a": 1}, Catalogue(packs=(pack,)))
    cached = manifest.read(path, {"a": 1})
    assert cached is not None
    assert cached.packs[0].commands == (CommandInfo("greet", "Greet."),)


def test_the_commands_index_lists_the_commands_discovery_found(
    commands_env: tuple[Path, Path],
) -> None:
    assert manifest.read_commands() is None, "nothing discovered yet"
    Host()
    ((pack, pack_id, commands),) = manifest.read_commands() or [()]
    assert (pack, commands) == ("greeting", (("greet", "Greet everyone."),))
    assert pack_id.startswith("directory:")


def test_the_commands_index_goes_stale_with_the_manifest(
    commands_env: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, _ = commands_env
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    Host()
    module = directory / "greeting.py"
    stat = module.stat()
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert manifest.read_commands() is None, "an edited tools module"
    Host()
    assert manifest.read_commands()
    (site / "acme-1.0.dist-info").mkdir()
    assert manifest.read_commands() is None, "a new distribution"


def test_the_commands_index_is_kept_per_plugin_switches(
    commands_env: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    Host()
    monkeypatch.setenv("EXPEDITER_DISABLE_PLUGINS", "greeting")
    assert manifest.read_commands() is None
    Host()
    assert manifest.read_commands() == []
    monkeypatch.delenv("EXPEDITER_DISABLE_PLUGINS")
    assert manifest.read_commands(), "the first environment's entry is still there"


def test_a_host_configured_beyond_the_environment_writes_no_commands(
    commands_env: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, _ = commands_env
    monkeypatch.delenv("EXPEDITER_TOOLS_PATH")
    Host(tools_path=[directory])  # --tools-dir: not what --help would list
    assert manifest.read_commands() is None


def test_the_commands_index_needs_no_configuration_module() -> None:
    import subprocess

    code = (
        "import sys\nfrom expediter.core.discovery.manifest import read_commands\n"
        "read_commands()\nprint(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('attr', 'attrs', 'pluggy', 'cattrs') or m.startswith('expediter.core.config')))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert output.strip() == "[]"


def test_every_variable_that_changes_discovery_names_an_index_entry() -> None:
    import re

    from expediter.core import config
    from expediter.core.config import HostConfig

    source = Path(config.__file__).read_text(encoding="utf-8")
    variables = set(re.findall(r"EXPEDITER_[A-Z_]+", source))
    default = HostConfig.from_env({}).plugin_settings.cache_key()
    for variable in sorted(variables):
        for value in ("1", "x,y", "tools"):
            try:
                changed = HostConfig.from_env({variable: value}).plugin_settings.cache_key()
            except ValueError:
                continue
            if changed != default:
                assert variable in manifest.SWITCHES, f"{variable} changes what discovery finds"
                assert manifest._identity({variable: value}) != manifest._identity({})


def test_an_index_entry_missing_beside_a_warm_manifest_is_written_again(
    commands_env: tuple[Path, Path], expediter_home: Path
) -> None:
    from expediter.core.config import HostConfig

    Host()
    (expediter_home / "cache" / "commands.json").unlink()
    host = Host()  # the manifest is warm: nothing is written
    assert manifest.read_commands() is None
    config = HostConfig.from_env()
    manifest.write_commands(config.home, config.plugin_settings, host.packs)
    (greeting,) = [pack for pack in host.packs if pack.name == "greeting"]
    expected = (greeting.name, greeting.id, (("greet", "Greet everyone."),))
    assert manifest.read_commands() == [expected]


# -- a cache that names what discovery does not find ------------------------------------------

EVIL = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")
import expediter

@expediter.tool
def {name}(text: str = "") -> str:
    \"\"\"Looks harmless.\"\"\"
    return "evil"
"""


def call_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    from click.testing import CliRunner

    from expediter.cli import cli

    result = CliRunner().invoke(cli, list(args), prog_name="expediter", env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def cached(home: Path) -> tuple[Path, dict]:
    (path,) = (home / "cache").glob("manifest-*.json")
    return path, json.loads(path.read_text())


def evil_module(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A module outside every discovery source that leaves a marker file when imported."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    marker = tmp_path / f"{name}-was-imported"
    module = elsewhere / f"{name}.py"
    module.write_text(EVIL.format(marker=str(marker), name=name))
    return module, marker


NO_AUTOLOAD = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}


def test_call_never_imports_a_file_a_tampered_cache_points_a_tool_at(
    tools: tuple[Path, Path], tmp_path: Path, expediter_home: Path, caplog
) -> None:
    directory, _ = tools
    code, _, _ = call_cli("--tools-dir", str(directory), "tools", "list", env=NO_AUTOLOAD)
    assert code == 0
    path, data = cached(expediter_home)
    evil, marker = evil_module(tmp_path, "echo")
    (pack,) = [pack for pack in data["catalogue"]["packs"] if pack["name"] == "echo"]
    pack["location"]["path"] = str(evil)
    path.write_text(json.dumps(data))
    forget_modules()

    code, out, err = call_cli(
        "--tools-dir", str(directory), "call", "echo", "echo", "--args", '{"text": "hi"}',
        env=NO_AUTOLOAD,
    )  # fmt: skip

    assert not marker.exists(), "the file the cache named was imported"
    assert (code, out.strip()) == (0, "hi"), err  # the cache was rebuilt: the real echo ran
    assert "which no discovery source finds" in caplog.text
    assert str(evil) not in path.read_text(), "the rebuilt cache names the real module"


def test_call_never_imports_a_tool_added_to_the_cache(
    tools: tuple[Path, Path], tmp_path: Path, expediter_home: Path, caplog
) -> None:
    directory, _ = tools
    call_cli("--tools-dir", str(directory), "tools", "list", env=NO_AUTOLOAD)
    path, data = cached(expediter_home)
    evil, marker = evil_module(tmp_path, "backdoor")
    catalogue = data["catalogue"]
    catalogue["packs"].append(
        {
            "name": "backdoor",
            "version": None,
            "source": "directory",
            "tools": ["backdoor"],
            "location": {"path": str(evil)},
        }
    )
    catalogue["tools"].append(
        {
            "name": "backdoor",
            "pack": "backdoor",
            "version": None,
            "source": "directory",
            "pack_id": f"directory:{evil}",
            "actions": [{"name": "backdoor", "description": "Looks harmless."}],
        }
    )
    path.write_text(json.dumps(data))

    code, _, err = call_cli(
        "--tools-dir", str(directory), "call", "backdoor", "backdoor", env=NO_AUTOLOAD
    )

    assert not marker.exists(), "the tool only the cache names was imported"
    assert code == 2, err  # no such tool
    assert "which no discovery source finds" in caplog.text


def test_a_cached_tool_moved_to_another_pack_is_not_trusted(
    tools: tuple[Path, Path], expediter_home: Path, caplog
) -> None:
    directory, _ = tools
    Host(tools_path=[directory], autoload=False)
    path, data = cached(expediter_home)
    (tool,) = [tool for tool in data["catalogue"]["tools"] if tool["name"] == "echo"]
    tool["name"] = "impostor"
    path.write_text(json.dumps(data))
    host = Host(tools_path=[directory], autoload=False)
    assert "impostor" not in {info.name for info in host.catalogue()}
    assert "no pack registers" in caplog.text


def test_a_cache_may_not_turn_a_switched_off_pack_back_on(
    tools: tuple[Path, Path], expediter_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, marker = tools
    Host(tools_path=[directory], autoload=False)
    _, enabled = cached(expediter_home)
    monkeypatch.setenv("EXPEDITER_DISABLE_PLUGINS", "echo")
    Host(tools_path=[directory], autoload=False)  # a second cache file, for these switches
    for path in (expediter_home / "cache").glob("manifest-*.json"):
        data = json.loads(path.read_text())
        if "echo" not in json.dumps(data["catalogue"]):
            data["catalogue"] = enabled["catalogue"]
            path.write_text(json.dumps(data))
    forget_modules()
    before = imports(marker)
    host = Host(tools_path=[directory], autoload=False)
    assert "echo" not in {info.name for info in host.catalogue()}
    assert imports(marker) == before


def test_an_entry_point_a_tampered_cache_adds_is_never_loaded(
    tools: tuple[Path, Path],
    tmp_path: Path,
    expediter_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    directory, _ = tools
    evil, marker = evil_module(tmp_path, "evil_entry")
    monkeypatch.syspath_prepend(str(evil.parent))  # importable, yet no distribution names it
    call_cli("--tools-dir", str(directory), "tools", "list")
    path, data = cached(expediter_home)
    catalogue = data["catalogue"]
    for distribution in ("expediter", "no-such-distribution"):  # installed, and not at all
        catalogue["packs"].append(
            {
                "name": f"{distribution}-tools",
                "version": "1.0",
                "source": "entry-point",
                "tools": ["evil_entry"],
                "location": {
                    "entry_points": [["evil_entry", "evil_entry"]],
                    "distribution": distribution,
                },
            }
        )
        catalogue["tools"] = [t for t in catalogue["tools"] if t["name"] != "evil_entry"]
        catalogue["tools"].append(
            {
                "name": "evil_entry",
                "pack": f"{distribution}-tools",
                "version": "1.0",
                "source": "entry-point",
                "pack_id": f"entry-point:{distribution}",
                "actions": [{"name": "evil_entry"}],
            }
        )
        path.write_text(json.dumps(data))

        code, _, err = call_cli("--tools-dir", str(directory), "call", "evil_entry", "evil_entry")

        assert not marker.exists(), f"an entry point {distribution!r} does not list was loaded"
        assert code != 0
        assert "not installed" in err or "no longer provides" in err, err


def test_load_pack_checks_a_cached_entry_point_against_its_distribution(tmp_path: Path) -> None:
    from expediter.core.discovery.catalogue import PackLocation
    from expediter.core.discovery.packs import PackRef, load_pack

    evil, marker = evil_module(tmp_path, "evil_direct")
    sys.path.insert(0, str(evil.parent))
    try:
        location = PackLocation(
            entry_points=(("evil_direct", "evil_direct"),), distribution="expediter"
        )
        loaded = load_pack(PackRef("expediter", "1.0", "entry-point", location))
    finally:
        sys.path.remove(str(evil.parent))
    assert not marker.exists()
    assert loaded.types == []
    assert "not installed" in (loaded.info.error or "")


def test_cache_files_are_private_whatever_the_umask(commands_env: tuple[Path, Path]) -> None:
    import stat

    home = Path(os.environ["EXPEDITER_HOME"])
    previous = os.umask(0o022)
    try:
        Host()
    finally:
        os.umask(previous)
    folder = home / "cache"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    files = [*folder.glob("manifest-*.json"), folder / "commands.json"]
    assert len(files) == 2
    assert all(path.exists() for path in files)
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
