"""The manifest cache, seen from outside: which ``expediter`` runs import which packs."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from .conftest import Expediter, SiteDir, module_source, rewrite, tool_function_source

ToolsDir = Callable[[str, Mapping[str, str]], Path]


def _manifests(expediter: Expediter) -> list[Path]:
    return sorted((expediter.home / "cache").glob("*"))


@pytest.fixture
def installed(site_dir: SiteDir, tools_dir: ToolsDir) -> Path:
    """Two entry-point packs and a tools directory with one module; returns the directory."""
    site_dir.add_tool_pack("acme-hello", "hello", function="greet")
    site_dir.add_tool_pack("acme-weather", "weather", version="2.0", function="forecast")
    return tools_dir("tools", {"echo.py": tool_function_source("echo", "echo")})


def test_first_tools_list_writes_a_manifest_under_expediter_home_cache(
    expediter: Expediter, installed: Path
) -> None:
    assert _manifests(expediter) == []

    expediter.ok("--tools-dir", str(installed), "tools", "list")

    files = _manifests(expediter)
    assert len(files) == 1, files
    assert files[0].name.endswith(".json")
    cached = json.loads(files[0].read_text(encoding="utf-8"))
    assert {"hello", "weather", "echo", "think"} <= {
        tool["name"] for tool in cached["catalogue"]["tools"]
    }
    assert sorted(expediter.imported()) == ["acme-hello", "acme-weather", "echo"]


def test_warm_tools_list_imports_no_pack_module(expediter: Expediter, installed: Path) -> None:
    cold = expediter.json("--tools-dir", str(installed), "tools", "list", "--all")
    expediter.forget_imports()

    warm = expediter.json("--tools-dir", str(installed), "tools", "list", "--all")
    expediter.ok("--tools-dir", str(installed), "plugins", "--json")
    expediter.ok("--tools-dir", str(installed), "tools", "show", "weather")

    assert warm == cold
    assert expediter.imported() == []


def test_warm_tools_list_imports_no_module_of_any_pack_per_importtime(
    expediter: Expediter, installed: Path
) -> None:
    expediter.ok("--tools-dir", str(installed), "tools", "list")

    warm = expediter.run(
        "--tools-dir", str(installed), "tools", "list", env={"PYTHONPROFILEIMPORTTIME": "1"}
    )

    assert warm.returncode == 0, str(warm)
    imported = {line.rpartition("|")[2].strip() for line in warm.stderr.splitlines()}
    assert "expediter" in imported
    assert not {"acme_hello", "acme_weather", "expediter.plugins.think"} & imported
    assert not [name for name in imported if name.startswith("_expediter_tools_")]


def test_new_distribution_in_site_dir_invalidates_the_cache(
    expediter: Expediter, site_dir: SiteDir, installed: Path
) -> None:
    expediter.ok("--tools-dir", str(installed), "tools", "list")

    site_dir.add_tool_pack("acme-jotter", "jotter", function="jot")
    tools = expediter.tools("--tools-dir", str(installed))

    assert tools["jotter"]["pack"] == "acme-jotter"
    assert tools["jotter"]["actions"] == ["jot"]
    assert "acme-jotter" in expediter.imported()


def test_removed_distribution_disappears_from_the_cache(
    expediter: Expediter, site_dir: SiteDir, installed: Path
) -> None:
    expediter.ok("--tools-dir", str(installed), "tools", "list")

    shutil.rmtree(site_dir.path / "acme_weather-2.0.dist-info")
    shutil.rmtree(site_dir.path / "acme_weather")
    tools = expediter.tools("--tools-dir", str(installed))

    assert "weather" not in tools
    assert "hello" in tools


def test_new_module_in_tools_dir_invalidates_the_cache(
    expediter: Expediter, installed: Path
) -> None:
    expediter.ok("--tools-dir", str(installed), "tools", "list")
    expediter.forget_imports()

    (installed / "stamp.py").write_text(tool_function_source("stamp", "stamp"), encoding="utf-8")
    tools = expediter.tools("--tools-dir", str(installed))

    assert tools["stamp"]["source"] == "directory"
    assert "stamp" in expediter.imported()


def test_new_package_in_tools_dir_invalidates_the_cache(
    expediter: Expediter, installed: Path
) -> None:
    expediter.ok("--tools-dir", str(installed), "tools", "list")

    (installed / "bundle").mkdir()
    (installed / "bundle" / "__init__.py").write_text(
        tool_function_source("bundle", "pack_up"), encoding="utf-8"
    )
    tools = expediter.tools("--tools-dir", str(installed))

    assert tools["bundle"]["actions"] == ["pack_up"]


def test_edited_tools_dir_module_invalidates_the_cache(
    expediter: Expediter, installed: Path
) -> None:
    assert expediter.tools("--tools-dir", str(installed))["echo"]["actions"] == ["echo"]

    rewrite(installed / "echo.py", tool_function_source("echo", "shout"))
    tools = expediter.tools("--tools-dir", str(installed))

    assert tools["echo"]["actions"] == ["shout"]
    event = expediter.json(
        "--tools-dir", str(installed), "call", "echo", "shout", "--args", '{"text": "a"}'
    )
    assert event["result"] == "a"


def test_refresh_rebuilds_the_cache_after_an_in_place_edit(
    expediter: Expediter, site_dir: SiteDir, installed: Path
) -> None:
    expediter.ok("--tools-dir", str(installed), "tools", "list")
    site_dir.write("acme_hello/__init__.py", tool_function_source("acme-hello", "welcome"))
    expediter.forget_imports()

    # Editing an installed pack's code in place keeps the cache (documented in manifest.py) ...
    stale = expediter.tools("--tools-dir", str(installed))
    assert stale["hello"]["actions"] == ["greet"]
    assert expediter.imported() == []

    # ... until --refresh rebuilds it, importing every pack again.
    fresh = expediter.tools("--tools-dir", str(installed), "--refresh")
    assert fresh["hello"]["actions"] == ["welcome"]
    assert sorted(expediter.imported()) == ["acme-hello", "acme-weather", "echo"]

    expediter.forget_imports()
    assert expediter.tools("--tools-dir", str(installed))["hello"]["actions"] == ["welcome"]
    assert expediter.imported() == []


def test_broken_pack_is_not_cached_and_appears_once_fixed(
    expediter: Expediter, site_dir: SiteDir, installed: Path
) -> None:
    site_dir.add_dist(
        "acme-flaky",
        entry_points={"flaky": "acme_flaky"},
        files={
            "acme_flaky/__init__.py": module_source(
                "acme-flaky", "raise ImportError('libflaky is missing')\n"
            )
        },
    )

    for _ in range(2):
        result = expediter.run("--tools-dir", str(installed), "tools", "list", "--json")
        assert result.returncode == 0, str(result)
        assert "flaky" not in {row["name"] for row in result.json()}
        assert "libflaky is missing" in result.stderr
    assert expediter.imported().count("acme-flaky") == 2
    assert _manifests(expediter) == []

    site_dir.write("acme_flaky/__init__.py", tool_function_source("acme-flaky", "wobble"))
    fixed = expediter.run("--tools-dir", str(installed), "tools", "list", "--json")

    assert fixed.returncode == 0, str(fixed)
    assert fixed.stderr == ""
    tools = {row["name"]: row for row in fixed.json()}
    assert tools["flaky"]["actions"] == ["wobble"]
    assert len(_manifests(expediter)) == 1
    expediter.forget_imports()
    assert "flaky" in expediter.tools("--tools-dir", str(installed))
    assert expediter.imported() == []


def test_call_on_a_warm_cache_imports_only_the_called_pack(
    expediter: Expediter, installed: Path
) -> None:
    expediter.ok("--tools-dir", str(installed), "tools", "list")
    expediter.forget_imports()

    event = expediter.json(
        "--tools-dir", str(installed), "call", "weather", "forecast", "--args", '{"text": "rain"}'
    )
    assert event["result"] == "rain"
    assert expediter.imported() == ["acme-weather"]

    expediter.forget_imports()
    event = expediter.json(
        "--tools-dir", str(installed), "call", "echo", "echo", "--args", '{"text": "hi"}'
    )
    assert event["result"] == "hi"
    assert expediter.imported() == ["echo"]


def test_call_on_a_warm_cache_reaches_a_tool_registered_by_register_tools(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    site_dir.add_dist(
        "acme-registrar",
        entry_points={"registrar": "acme_registrar"},
        files={
            "acme_registrar.py": module_source(
                "acme-registrar",
                """
                import expediter


                @expediter.tool
                def stamp(text: str) -> str:
                    return f"[{text}]"


                @expediter.hookimpl
                def register_tools(register):
                    register(stamp, name="stamper")
                """,
            )
        },
    )
    expediter.ok("tools", "list")
    expediter.forget_imports()

    event = expediter.json("call", "stamper", "stamp", "--args", '{"text": "ok"}')

    assert event["result"] == "[ok]"
    assert expediter.imported() == ["acme-registrar"]


def test_unreadable_manifest_is_rebuilt(expediter: Expediter, installed: Path) -> None:
    expediter.ok("--tools-dir", str(installed), "tools", "list")
    [manifest] = _manifests(expediter)
    manifest.write_text("{not json", encoding="utf-8")

    tools = expediter.tools("--tools-dir", str(installed))

    assert {"hello", "weather", "echo"} <= tools.keys()
    assert json.loads(manifest.read_text(encoding="utf-8"))["catalogue"]["tools"]


# -- with bytecode written on import (Python's default, unlike the tests above) -------------------


def test_second_tools_list_is_warm_for_a_single_module_pack_when_bytecode_is_written(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    expediter.write_bytecode = True
    site_dir.add_dist(
        "acme-single",
        entry_points={"single": "acme_single"},
        files={"acme_single.py": tool_function_source("acme-single", "solo")},
    )
    expediter.ok("tools", "list")
    assert expediter.imported() == ["acme-single"]
    expediter.forget_imports()

    expediter.ok("tools", "list")

    assert expediter.imported() == []


def test_second_tools_list_is_warm_for_a_tools_dir_module_when_bytecode_is_written(
    expediter: Expediter, tools_dir: ToolsDir
) -> None:
    expediter.write_bytecode = True
    directory = tools_dir("tools", {"echo.py": tool_function_source("echo", "echo")})
    expediter.ok("--tools-dir", str(directory), "tools", "list")
    assert expediter.imported() == ["echo"]
    expediter.forget_imports()

    expediter.ok("--tools-dir", str(directory), "tools", "list")

    assert expediter.imported() == []
