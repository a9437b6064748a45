"""The plugin switches and tools directories, through the real ``expediter`` command."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from .conftest import Expediter, SiteDir, module_source, tool_function_source

ToolsDir = Callable[[str, Mapping[str, str]], Path]


@pytest.fixture
def three_packs(site_dir: SiteDir) -> SiteDir:
    """acme-hello (entry point ``hello``), acme-weather (``weather``), acme-jotter (``jotter``)."""
    site_dir.add_tool_pack("acme-hello", "hello", function="greet")
    site_dir.add_tool_pack("acme-weather", "weather", version="2.0", function="forecast")
    site_dir.add_tool_pack("acme-jotter", "jotter", version="0.1", function="jot")
    return site_dir


def _entry_point_packs(expediter: Expediter, env: Mapping[str, str]) -> set[str]:
    return {
        name for name, row in expediter.plugins(env=env).items() if row["source"] == "entry-point"
    }


# -- EXPEDITER_DISABLE_PLUGINS --------------------------------------------------------------------


@pytest.mark.usefixtures("three_packs")
def test_disable_plugins_by_distribution_name_blocks_the_pack_before_import(
    expediter: Expediter,
) -> None:
    env = {"EXPEDITER_DISABLE_PLUGINS": "acme-weather"}

    tools = expediter.tools(env=env)

    assert "weather" not in tools
    assert {"hello", "jotter", "think", "clock"} <= tools.keys()
    assert "acme-weather" not in expediter.imported()
    assert "acme-weather" not in expediter.plugins(env=env)


@pytest.mark.usefixtures("three_packs")
def test_disable_plugins_by_entry_point_name_blocks_the_pack(expediter: Expediter) -> None:
    tools = expediter.tools(env={"EXPEDITER_DISABLE_PLUGINS": "weather"})

    assert "weather" not in tools
    assert {"hello", "jotter"} <= tools.keys()
    assert "acme-weather" not in expediter.imported()


@pytest.mark.usefixtures("three_packs")
@pytest.mark.parametrize(
    "spelling",
    [
        "ACME.Weather",
        "Acme_Weather",
        "acme--weather",
    ],
)
def test_disable_plugins_matches_names_case_insensitively_with_separators_alike(
    expediter: Expediter, spelling: str
) -> None:
    tools = expediter.tools(env={"EXPEDITER_DISABLE_PLUGINS": spelling})

    assert "weather" not in tools
    assert "hello" in tools


@pytest.mark.usefixtures("three_packs")
def test_disable_plugins_takes_a_comma_separated_list(expediter: Expediter) -> None:
    tools = expediter.tools(env={"EXPEDITER_DISABLE_PLUGINS": " acme-weather , jotter,"})

    assert "weather" not in tools
    assert "jotter" not in tools
    assert "hello" in tools


@pytest.mark.usefixtures("three_packs")
def test_disable_plugins_can_disable_the_builtin_think(expediter: Expediter) -> None:
    env = {"EXPEDITER_DISABLE_PLUGINS": "think"}

    tools = expediter.tools(env=env)

    assert "think" not in tools
    assert {"clock", "hello", "weather", "jotter"} <= tools.keys()
    assert "think" not in expediter.plugins(env=env)
    called = expediter.run("call", "think", "think", "--args", '{"thought": "x"}', env=env)
    assert called.returncode == 2, str(called)
    assert "think" in called.stderr


def test_disable_plugins_blocks_a_tools_dir_module(
    expediter: Expediter, tools_dir: ToolsDir
) -> None:
    directory = tools_dir(
        "tools",
        {
            "echo.py": tool_function_source("echo", "echo"),
            "other.py": tool_function_source("other", "other"),
        },
    )

    tools = expediter.tools(
        "--tools-dir", str(directory), env={"EXPEDITER_DISABLE_PLUGINS": "echo"}
    )

    assert "echo" not in tools
    assert "other" in tools
    assert "echo" not in expediter.imported()


# -- EXPEDITER_LOAD_PLUGINS -----------------------------------------------------------------------


@pytest.mark.usefixtures("three_packs")
def test_load_plugins_loads_only_the_named_entry_point_packs_and_keeps_builtins(
    expediter: Expediter,
) -> None:
    env = {"EXPEDITER_LOAD_PLUGINS": "acme-hello,jotter"}

    tools = expediter.tools(env=env)

    assert {"hello", "jotter", "think", "clock", "notes", "todo_list", "memory"} <= tools.keys()
    assert "weather" not in tools
    assert _entry_point_packs(expediter, env) == {"acme-hello", "acme-jotter"}
    assert "acme-weather" not in expediter.imported()


@pytest.mark.usefixtures("three_packs")
def test_disable_plugins_wins_over_load_plugins(expediter: Expediter) -> None:
    env = {"EXPEDITER_LOAD_PLUGINS": "acme-hello,acme-jotter", "EXPEDITER_DISABLE_PLUGINS": "hello"}

    tools = expediter.tools(env=env)

    assert "jotter" in tools
    assert "hello" not in tools
    assert "weather" not in tools


# -- EXPEDITER_DISABLE_PLUGIN_AUTOLOAD ------------------------------------------------------------


@pytest.mark.usefixtures("three_packs")
def test_disable_plugin_autoload_loads_no_entry_point_pack(
    expediter: Expediter, tools_dir: ToolsDir
) -> None:
    directory = tools_dir("tools", {"echo.py": tool_function_source("echo", "echo")})
    env = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}

    tools = expediter.tools("--tools-dir", str(directory), env=env)

    assert {"think", "clock", "echo"} <= tools.keys()
    assert not {"hello", "weather", "jotter"} & tools.keys()
    assert _entry_point_packs(expediter, env) == set()
    assert expediter.imported() == ["echo"]


@pytest.mark.usefixtures("three_packs")
@pytest.mark.parametrize("named", ["acme-weather", "weather"])
def test_disable_plugin_autoload_with_load_plugins_loads_only_the_named_pack(
    expediter: Expediter, named: str
) -> None:
    env = {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "true", "EXPEDITER_LOAD_PLUGINS": named}

    tools = expediter.tools(env=env)

    assert {"weather", "think", "clock"} <= tools.keys()
    assert not {"hello", "jotter"} & tools.keys()
    assert _entry_point_packs(expediter, env) == {"acme-weather"}
    assert set(expediter.imported()) == {"acme-weather"}
    event = expediter.json("call", "weather", "forecast", "--args", '{"text": "sun"}', env=env)
    assert event["result"] == "sun"


@pytest.mark.usefixtures("three_packs")
def test_disable_plugin_autoload_set_to_zero_keeps_autoloading(expediter: Expediter) -> None:
    tools = expediter.tools(env={"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "0"})

    assert {"hello", "weather", "jotter"} <= tools.keys()


@pytest.mark.usefixtures("three_packs")
def test_switches_apply_even_when_the_manifest_cache_is_warm(expediter: Expediter) -> None:
    assert "weather" in expediter.tools()
    assert "weather" in expediter.tools()

    assert "weather" not in expediter.tools(env={"EXPEDITER_DISABLE_PLUGINS": "acme-weather"})
    assert "hello" not in expediter.tools(env={"EXPEDITER_LOAD_PLUGINS": "acme-weather"})
    assert {"hello", "weather"} <= expediter.tools().keys()


# -- tools directories ----------------------------------------------------------------------------


def test_tools_path_with_two_directories_and_tools_dir_offers_all_three(
    expediter: Expediter, tools_dir: ToolsDir
) -> None:
    first = tools_dir("first", {"alpha.py": tool_function_source("alpha", "alpha")})
    second = tools_dir("second", {"beta.py": tool_function_source("beta", "beta")})
    third = tools_dir("third", {"gamma.py": tool_function_source("gamma", "gamma")})
    env = {"EXPEDITER_TOOLS_PATH": os.pathsep.join([str(first), str(second)])}

    tools = expediter.tools("--tools-dir", str(third), env=env)

    for name in ("alpha", "beta", "gamma"):
        assert tools[name]["source"] == "directory"
        assert tools[name]["pack"] == name
        assert tools[name]["actions"] == [name]
    assert {"think", "clock"} <= tools.keys()
    assert "gamma" not in expediter.tools(env=env)
    assert "alpha" not in expediter.tools("--tools-dir", str(third))
    for name in ("alpha", "beta", "gamma"):
        event = expediter.json(
            "--tools-dir", str(third), "call", name, name, "--args", '{"text": "x"}', env=env
        )
        assert event["result"] == "x"


def test_tools_dir_package_is_one_tool_and_private_modules_are_skipped(
    expediter: Expediter, tools_dir: ToolsDir
) -> None:
    directory = tools_dir(
        "tools",
        {
            "_shared.py": module_source("_shared", "raise RuntimeError('never imported')\n"),
            "notes.txt": "not a module",
            "mailer/__init__.py": module_source(
                "mailer",
                '''
                import expediter

                from .formatting import signature


                @expediter.tool
                def send(to: str) -> str:
                    """Send a mail."""
                    return f"sent to {to}{signature()}"
                ''',
            ),
            "mailer/formatting.py": "def signature():\n    return ' -- the bot'\n",
        },
    )

    tools = expediter.tools("--tools-dir", str(directory))

    assert tools["mailer"]["source"] == "directory"
    assert tools["mailer"]["actions"] == ["send"]
    assert "_shared" not in tools
    assert "_shared" not in expediter.plugins("--tools-dir", str(directory))
    event = expediter.json(
        "--tools-dir", str(directory), "call", "mailer", "send", "--args", '{"to": "ann"}'
    )
    assert event["result"] == "sent to ann -- the bot"


def test_missing_tools_dir_is_skipped_with_a_warning(expediter: Expediter, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"

    result = expediter.run("--tools-dir", str(missing), "tools", "list", "--json")

    assert result.returncode == 0, str(result)
    assert {"think", "clock"} <= {row["name"] for row in result.json()}
    assert str(missing) in result.stderr


def test_same_module_in_two_tools_dirs_is_a_conflict_naming_both_directories(
    expediter: Expediter, tools_dir: ToolsDir
) -> None:
    first = tools_dir("first", {"echo.py": tool_function_source("echo", "echo")})
    second = tools_dir("second", {"echo.py": tool_function_source("echo", "echo")})

    result = expediter.run(
        "--tools-dir", str(first), "--tools-dir", str(second), "call", "echo", "echo"
    )

    assert result.returncode == 2, str(result)
    assert str(first) in result.stderr, str(result)
    assert str(second) in result.stderr, str(result)
