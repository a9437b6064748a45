"""Installed tool packs seen and called through the real ``expediter`` command.

The first tests pip-install a real distribution into a throwaway virtualenv; the others use
generated ``*.dist-info`` site directories on ``PYTHONPATH`` (the same metadata, much faster).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from support.events import EVENT_FIELDS

from .conftest import (
    Expediter,
    SiteDir,
    module_source,
    pip_installed_venv,
    tool_function_source,
)

TOOLS_LIST_FIELDS = {"name", "pack", "source", "internal", "actions"}
PLUGINS_FIELDS = {"name", "version", "source", "tools", "error"}

# -- a real distribution, pip-installed into a throwaway virtualenv -------------------------------

WEATHER_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "acme-weather"
version = "1.2.3"
description = "Weather tools for expediter"
dependencies = ["expediter"]

[project.entry-points.expediter]
weather = "acme_weather"
temperature = "acme_weather.units:Units"

[tool.hatch.build.targets.wheel]
packages = ["acme_weather"]
"""

WEATHER_MODULE = '''\
"""Weather forecasts for the model."""

import expediter


@expediter.tool
def forecast(city: str, days: int = 1) -> dict:
    """Forecast the weather of a city.

    Args:
        city: The city.
        days: How many days ahead.
    """
    if city == "Atlantis":
        raise LookupError("Atlantis is under water")
    return {"city": city, "days": days, "sky": "clear"}
'''

UNITS_MODULE = '''\
"""Unit conversions."""

import expediter


class Units(expediter.Toolbox):
    """Convert temperatures."""

    name = "units"

    @expediter.action
    def celsius_to_fahrenheit(self, celsius: float) -> float:
        """Convert Celsius to Fahrenheit.

        Args:
            celsius: Degrees Celsius.
        """
        return celsius * 9 / 5 + 32
'''


@pytest.fixture(scope="module")
def pip_installed(tmp_path_factory: pytest.TempPathFactory) -> Expediter:
    """A virtualenv holding expediter (from this checkout) and acme-weather, both pip-installed
    (see ``pip_installed_venv``)."""
    root = tmp_path_factory.mktemp("pip-installed")
    pack = root / "acme-weather"
    (pack / "acme_weather").mkdir(parents=True)
    (pack / "pyproject.toml").write_text(WEATHER_PYPROJECT, encoding="utf-8")
    (pack / "acme_weather" / "__init__.py").write_text(WEATHER_MODULE, encoding="utf-8")
    (pack / "acme_weather" / "units.py").write_text(UNITS_MODULE, encoding="utf-8")

    runner = pip_installed_venv(root, pack)
    assert runner.command[0].startswith(str(root / "venv")), runner.command
    version = runner.ok("--version").stdout
    assert "expediter" in version
    return runner


@pytest.mark.slow
def test_pip_installed_pack_is_listed_under_its_distribution_name(
    pip_installed: Expediter,
) -> None:
    tools = pip_installed.tools()

    weather = tools["weather"]
    assert weather["pack"] == "acme-weather"
    assert weather["source"] == "entry-point"
    assert weather["version"] == "1.2.3"
    assert weather["internal"] is False
    assert weather["actions"] == ["forecast"]
    # An entry point naming a Toolbox class gives a tool named by the class, not the entry point.
    assert "temperature" not in tools
    assert tools["units"]["pack"] == "acme-weather"
    assert tools["units"]["actions"] == ["celsius_to_fahrenheit"]
    assert {"think", "clock"} <= tools.keys()

    packs = pip_installed.plugins()
    assert packs["acme-weather"]["version"] == "1.2.3"
    assert sorted(packs["acme-weather"]["tools"]) == ["units", "weather"]
    assert packs["acme-weather"]["error"] is None


@pytest.mark.slow
def test_pip_installed_pack_calls_complete_reject_bad_arguments_and_report_exceptions(
    pip_installed: Expediter,
) -> None:
    done = pip_installed.run(
        "call", "weather", "forecast", "--args", '{"city": "Oslo", "days": 3}', "--json"
    )
    assert done.returncode == 0, str(done)
    event = done.json()
    assert event["status"] == "completed"
    assert event["result"] == {"city": "Oslo", "days": 3, "sky": "clear"}
    assert event["error"] is None

    converted = pip_installed.run(
        "call", "units", "celsius_to_fahrenheit", "--args", '{"celsius": 100}', "--json"
    )
    assert converted.returncode == 0, str(converted)
    assert converted.json()["result"] == 212

    bad = pip_installed.run(
        "call", "weather", "forecast", "--args", '{"city": "Oslo", "days": "soon"}', "--json"
    )
    assert bad.returncode == 2, str(bad)
    assert bad.json()["status"] == "error"
    assert "days" in bad.json()["error"]

    raised = pip_installed.run(
        "call", "weather", "forecast", "--args", '{"city": "Atlantis"}', "--json"
    )
    assert raised.returncode == 1, str(raised)
    failure = raised.json()
    assert failure["status"] == "error"
    assert "LookupError" in failure["error"]
    assert "Atlantis is under water" in failure["error"]


# -- how entry points become tools ----------------------------------------------------------------

TOOLBOX_MODULE = '''
import expediter


class Calculator(expediter.Toolbox):
    """Add and multiply."""

    @expediter.action
    def add(self, a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @expediter.action
    def multiply(self, a: int, b: int) -> int:
        """Multiply two numbers."""
        return a * b
'''

REGISTERING_MODULE = '''
import expediter


class Jotter(expediter.Toolbox):
    """Keep jottings."""

    @expediter.action
    def add(self, text: str) -> str:
        """Add a jotting."""
        return f"jotted: {text}"


@expediter.tool
def shout(text: str) -> str:
    """Shout a text."""
    return text.upper()


@expediter.hookimpl
def register_tools(register):
    register(Jotter)
    register(shout, name="megaphone")
'''


def test_entry_point_module_with_tool_functions_is_one_tool_named_after_the_entry_point(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    site_dir.add_dist(
        "acme-text",
        "0.3",
        entry_points={"text": "acme_text"},
        files={
            "acme_text.py": module_source(
                "acme-text",
                '''
                import expediter


                @expediter.tool
                def upper(text: str) -> str:
                    """Upper-case a text."""
                    return text.upper()


                @expediter.tool
                def lower(text: str) -> str:
                    """Lower-case a text."""
                    return text.lower()
                ''',
            )
        },
    )

    row = expediter.tools()["text"]

    assert row["pack"] == "acme-text"
    assert row["version"] == "0.3"
    assert row["source"] == "entry-point"
    assert sorted(row["actions"]) == ["lower", "upper"]
    event = expediter.json("call", "text", "upper", "--args", '{"text": "abc"}')
    assert event["result"] == "ABC"


def test_entry_point_module_with_one_toolbox_is_a_tool_named_after_the_entry_point(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    site_dir.add_dist(
        "acme-calc",
        entry_points={"calc": "acme_calc"},
        files={"acme_calc.py": module_source("acme-calc", TOOLBOX_MODULE)},
    )

    tools = expediter.tools()

    assert "calculator" not in tools
    assert sorted(tools["calc"]["actions"]) == ["add", "multiply"]
    event = expediter.json("call", "calc", "multiply", "--args", '{"a": 6, "b": 7}')
    assert event["result"] == 42


def test_entry_point_naming_a_tool_function_gives_a_tool_named_by_the_function(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    site_dir.add_dist(
        "acme-echo",
        entry_points={"whatever": "acme_echo:repeat"},
        files={"acme_echo.py": tool_function_source("acme-echo", "repeat")},
    )

    tools = expediter.tools()

    assert "whatever" not in tools
    assert tools["repeat"]["pack"] == "acme-echo"
    assert tools["repeat"]["actions"] == ["repeat"]


def test_register_tools_hook_registers_every_tool_it_names(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    site_dir.add_dist(
        "acme-multi",
        "2.1",
        entry_points={"multi": "acme_multi"},
        files={"acme_multi.py": module_source("acme-multi", REGISTERING_MODULE)},
    )

    tools = expediter.tools()

    assert "multi" not in tools
    assert tools["jotter"]["pack"] == "acme-multi"
    assert tools["jotter"]["actions"] == ["add"]
    assert tools["megaphone"]["pack"] == "acme-multi"
    assert tools["megaphone"]["source"] == "entry-point"
    assert sorted(expediter.plugins()["acme-multi"]["tools"]) == ["jotter", "megaphone"]
    event = expediter.json(
        "call", "megaphone", tools["megaphone"]["actions"][0], "--args", '{"text": "hey"}'
    )
    assert event["result"] == "HEY"


# -- broken packs ---------------------------------------------------------------------------------


def _install_good_pack(site_dir: SiteDir) -> None:
    site_dir.add_tool_pack("acme-hello", "hello", version="1.0", function="greet")


def _assert_good_pack_still_works(expediter: Expediter) -> None:
    tools = expediter.tools()
    assert {"hello", "think", "clock"} <= tools.keys()
    event = expediter.json("call", "hello", "greet", "--args", '{"text": "hi", "times": 2}')
    assert event["status"] == "completed"
    assert event["result"] == "hihi"


def test_pack_whose_import_raises_is_reported_and_the_host_survives(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    _install_good_pack(site_dir)
    site_dir.add_dist(
        "acme-broken",
        "0.9",
        entry_points={"broken": "acme_broken"},
        files={
            "acme_broken.py": module_source(
                "acme-broken", 'raise RuntimeError("the pack cannot find its config file")\n'
            )
        },
    )

    listed = expediter.run("tools", "list", "--json")
    assert listed.returncode == 0, str(listed)
    assert "acme-broken" in listed.stderr
    _assert_good_pack_still_works(expediter)

    row = expediter.plugins()["acme-broken"]
    assert row["version"] == "0.9"
    assert row["source"] == "entry-point"
    assert row["tools"] == []
    assert "RuntimeError" in row["error"]
    assert "the pack cannot find its config file" in row["error"]
    assert expediter.plugins()["acme-hello"]["error"] is None


def test_pack_whose_register_tools_raises_is_reported_and_the_host_survives(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    _install_good_pack(site_dir)
    site_dir.add_dist(
        "acme-refusing",
        entry_points={"refusing": "acme_refusing"},
        files={
            "acme_refusing.py": module_source(
                "acme-refusing",
                """
                import expediter


                @expediter.hookimpl
                def register_tools(register):
                    raise ValueError("registration refused: no licence key")
                """,
            )
        },
    )

    _assert_good_pack_still_works(expediter)

    row = expediter.plugins()["acme-refusing"]
    assert "ValueError" in row["error"]
    assert "registration refused: no licence key" in row["error"]


def test_pack_calling_sys_exit_at_import_is_reported_and_the_host_survives(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    _install_good_pack(site_dir)
    site_dir.add_dist(
        "acme-quitter",
        entry_points={"quitter": "acme_quitter"},
        files={"acme_quitter.py": "import sys\n\nsys.exit('no display available')\n"},
    )

    _assert_good_pack_still_works(expediter)

    assert "SystemExit: no display available" in expediter.plugins()["acme-quitter"]["error"]


def test_tools_dir_module_with_a_syntax_error_is_reported_and_the_other_modules_load(
    expediter: Expediter, tools_dir: Callable[[str, Mapping[str, str]], Path]
) -> None:
    directory = tools_dir(
        "my-tools",
        {
            "mangled.py": "import expediter\n\n@expediter.tool\ndef mangled(:\n    pass\n",
            "echo.py": tool_function_source("echo", "echo"),
        },
    )

    listed = expediter.run("--tools-dir", str(directory), "tools", "list", "--json")
    assert listed.returncode == 0, str(listed)
    tools = {row["name"]: row for row in listed.json()}
    assert "mangled" not in tools
    assert tools["echo"]["source"] == "directory"
    assert tools["echo"]["pack"] == "echo"

    row = expediter.plugins("--tools-dir", str(directory))["mangled"]
    assert row["source"] == "directory"
    assert "SyntaxError" in row["error"]
    event = expediter.json(
        "--tools-dir", str(directory), "call", "echo", "echo", "--args", '{"text": "ok"}'
    )
    assert event["result"] == "ok"


# -- conflicts and strict mode --------------------------------------------------------------------


def _install_conflicting_packs(site_dir: SiteDir) -> None:
    site_dir.add_tool_pack("acme-one", "dup", version="1.0", function="first")
    site_dir.add_tool_pack("acme-two", "dup", version="2.0", function="second")


def _names_both_packs(message: str) -> bool:
    return all(part in message for part in ("acme-one", "1.0", "acme-two", "2.0"))


def test_conflicting_tool_names_offer_neither_and_name_both_packs(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    _install_conflicting_packs(site_dir)

    listed = expediter.run("tools", "list", "--json")
    assert listed.returncode == 0, str(listed)
    assert "dup" not in {row["name"] for row in listed.json()}
    assert _names_both_packs(listed.stderr), listed.stderr

    shown = expediter.run("tools", "show", "dup")
    assert shown.returncode == 2, str(shown)
    assert _names_both_packs(shown.stderr), str(shown)

    for action in ("first", "second"):
        called = expediter.run("call", "dup", action, "--args", '{"text": "x"}', "--json")
        assert called.returncode == 2, str(called)
        assert called.json()["status"] == "error"
        assert _names_both_packs(called.json()["error"]), str(called)
    plain = expediter.run("call", "dup", "first", "--args", '{"text": "x"}')
    assert plain.returncode == 2, str(plain)
    assert _names_both_packs(plain.stderr), str(plain)

    packs = expediter.plugins()
    for name in ("acme-one", "acme-two"):
        assert packs[name]["error"] is None
        assert len(packs[name]["conflicts"]) == 1, packs[name]
        assert _names_both_packs(packs[name]["conflicts"][0])


@pytest.mark.parametrize("disabled", ["acme-one", "ACME_ONE"])
def test_disabling_one_of_two_conflicting_packs_offers_the_other(
    expediter: Expediter, site_dir: SiteDir, disabled: str
) -> None:
    _install_conflicting_packs(site_dir)
    env = {"EXPEDITER_DISABLE_PLUGINS": disabled}

    listed = expediter.run("tools", "list", "--json", env=env)

    assert listed.returncode == 0, str(listed)
    tools = {row["name"]: row for row in listed.json()}
    assert tools["dup"]["pack"] == "acme-two"
    assert tools["dup"]["actions"] == ["second"]
    assert "acme-one" not in listed.stderr
    assert "acme-one" not in expediter.plugins(env=env)
    assert expediter.plugins(env=env)["acme-two"]["conflicts"] == []
    event = expediter.json("call", "dup", "second", "--args", '{"text": "y"}', env=env)
    assert event["result"] == "y"


def test_strict_plugins_makes_a_broken_pack_fatal(expediter: Expediter, site_dir: SiteDir) -> None:
    _install_good_pack(site_dir)
    site_dir.add_dist(
        "acme-broken",
        entry_points={"broken": "acme_broken"},
        files={"acme_broken.py": 'raise ImportError("needs libfoo 2")\n'},
    )
    strict = {"EXPEDITER_STRICT_PLUGINS": "1"}

    for args in (["tools", "list", "--json"], ["plugins"], ["call", "think", "think"]):
        result = expediter.run(*args, env=strict)
        assert result.returncode != 0, str(result)
        assert "acme-broken" in result.stderr, str(result)
        assert "needs libfoo 2" in result.stderr, str(result)
        assert "Traceback" not in result.stderr, str(result)

    relaxed = expediter.run("tools", "list", "--json", env={"EXPEDITER_STRICT_PLUGINS": "0"})
    assert relaxed.returncode == 0, str(relaxed)
    disabled = {**strict, "EXPEDITER_DISABLE_PLUGINS": "acme-broken"}
    assert "hello" in expediter.tools(env=disabled)


def test_strict_plugins_makes_a_tool_name_conflict_fatal(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    _install_conflicting_packs(site_dir)

    result = expediter.run("tools", "list", env={"EXPEDITER_STRICT_PLUGINS": "1"})

    assert result.returncode != 0, str(result)
    assert _names_both_packs(result.stderr), str(result)


def test_strict_plugins_accepts_healthy_packs(expediter: Expediter, site_dir: SiteDir) -> None:
    _install_good_pack(site_dir)

    tools = expediter.tools(env={"EXPEDITER_STRICT_PLUGINS": "1"})

    assert {"hello", "think", "clock"} <= tools.keys()


# -- internal tools -------------------------------------------------------------------------------


def test_internal_tool_is_hidden_from_tools_list_and_shown_with_all(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    _install_good_pack(site_dir)
    site_dir.add_tool_pack("acme-secret", "backstage", function="whisper", internal=True)

    listed = expediter.tools()
    everything = {row["name"]: row for row in expediter.json("tools", "list", "--all")}

    assert "backstage" not in listed
    assert listed["hello"]["internal"] is False
    assert everything["backstage"]["internal"] is True
    assert everything["backstage"]["pack"] == "acme-secret"
    assert everything["hello"]["internal"] is False
    assert "backstage" in expediter.plugins()["acme-secret"]["tools"]
    # Hidden from the catalogue, still callable by name (docs/pack-authors.md, `internal=True`).
    event = expediter.json("call", "backstage", "whisper", "--args", '{"text": "psst"}')
    assert event["result"] == "psst"


# -- output shapes (docs/operations.md, "JSON shapes") ---------------------------------------------


def test_tools_list_json_rows_have_the_documented_fields(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    _install_good_pack(site_dir)

    rows = expediter.json("tools", "list", "--all")

    assert isinstance(rows, list)
    assert [row["name"] for row in rows] == sorted(row["name"] for row in rows)
    for row in rows:
        assert row.keys() >= TOOLS_LIST_FIELDS, row
        assert isinstance(row["name"], str)
        assert isinstance(row["pack"], str)
        assert row["source"] in {"entry-point", "directory", "built-in", "host"}
        assert isinstance(row["internal"], bool)
        assert row["actions"], row
        assert all(isinstance(action, str) for action in row["actions"])
    by_name = {row["name"]: row for row in rows}
    assert by_name["hello"]["pack"] == "acme-hello"
    assert by_name["think"] == {**by_name["think"], "pack": "think", "source": "built-in"}


def test_plugins_json_rows_have_the_documented_fields(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    _install_good_pack(site_dir)
    site_dir.add_dist(
        "acme-broken",
        entry_points={"broken": "acme_broken"},
        files={"acme_broken.py": 'raise RuntimeError("boom")\n'},
    )

    rows = expediter.json("plugins")

    assert isinstance(rows, list)
    for row in rows:
        assert row.keys() >= PLUGINS_FIELDS, row
        assert isinstance(row["name"], str)
        assert row["version"] is None or isinstance(row["version"], str)
        assert row["source"] in {"entry-point", "directory", "built-in", "host"}
        assert all(isinstance(tool, str) for tool in row["tools"])
        assert row["error"] is None or isinstance(row["error"], str)
    by_name = {row["name"]: row for row in rows}
    assert by_name["acme-hello"] == {
        **by_name["acme-hello"],
        "version": "1.0",
        "source": "entry-point",
        "tools": ["hello"],
        "error": None,
    }
    assert by_name["think"]["source"] == "built-in"
    assert by_name["think"]["tools"] == ["think"]
    assert "RuntimeError: boom" in by_name["acme-broken"]["error"]


def test_call_json_event_has_the_documented_fields(expediter: Expediter, site_dir: SiteDir) -> None:
    _install_good_pack(site_dir)
    arguments = {"text": "ab", "times": 3}

    event = expediter.json("call", "hello", "greet", "--args", json.dumps(arguments))

    assert event.keys() >= EVENT_FIELDS, event
    assert event["status"] == "completed"
    assert event["tool"] == "hello"
    assert event["action"] == "greet"
    assert event["name"] == "greet"
    assert event["arguments"] == arguments
    assert event["result"] == "ababab"
    assert event["error"] is None
    assert isinstance(event["call_id"], str)
    assert event["call_id"]
    assert isinstance(event["key"], str)
    assert event["key"].endswith(event["call_id"])
    assert isinstance(event["duration_ms"], int | float)
    assert event["duration_ms"] >= 0


def test_call_json_error_event_has_the_documented_fields(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    _install_good_pack(site_dir)

    result = expediter.run("call", "hello", "greet", "--args", '{"times": 2}', "--json")

    assert result.returncode == 2, str(result)
    event = result.json()
    assert event.keys() >= EVENT_FIELDS, event
    assert event["status"] == "error"
    assert event["result"] is None
    assert "text" in event["error"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["call", "nosuchtool", "run"], "nosuchtool"),
        (["call", "hello", "nosuchaction"], "nosuchaction"),
        (["call", "hello", "greet", "--args", "[1, 2]"], "JSON object"),
        (["call", "hello", "greet", "--args", "{not json"], "not valid JSON"),
        (["call", "hello", "greet", "--args", '{"text": "a", "volume": 11}'], "volume"),
        (["tools", "show", "nosuchtool"], "nosuchtool"),
    ],
)
def test_bad_usage_exits_2_with_a_message_naming_the_problem(
    expediter: Expediter, site_dir: SiteDir, args: list[str], message: str
) -> None:
    _install_good_pack(site_dir)

    result = expediter.run(*args)

    assert result.returncode == 2, str(result)
    assert message in result.stderr, str(result)
    assert "Traceback" not in result.stderr


def test_tool_that_raises_exits_1_with_the_exception_type_and_message(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    site_dir.add_dist(
        "acme-fragile",
        entry_points={"fragile": "acme_fragile"},
        files={
            "acme_fragile.py": module_source(
                "acme-fragile",
                '''
                import expediter


                @expediter.tool
                def divide(a: int, b: int) -> float:
                    """Divide a by b."""
                    return a / b
                ''',
            )
        },
    )

    result = expediter.run("call", "fragile", "divide", "--args", '{"a": 1, "b": 0}', "--json")

    assert result.returncode == 1, str(result)
    event = result.json()
    assert event["status"] == "error"
    assert event["error"].startswith("ZeroDivisionError:")
    assert "division by zero" in event["error"]
    plain = expediter.run("call", "fragile", "divide", "--args", '{"a": 1, "b": 0}')
    assert plain.returncode == 1, str(plain)
    assert "ZeroDivisionError" in plain.stderr


def test_async_tool_is_awaited_and_its_exception_reported(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    site_dir.add_dist(
        "acme-sleepy",
        entry_points={"sleepy": "acme_sleepy"},
        files={
            "acme_sleepy.py": module_source(
                "acme-sleepy",
                '''
                import asyncio

                import expediter


                @expediter.tool
                async def nap(seconds: float = 0.0) -> str:
                    """Sleep a little."""
                    await asyncio.sleep(seconds)
                    if seconds > 0.5:
                        raise TimeoutError("overslept")
                    return "rested"
                ''',
            )
        },
    )

    rested = expediter.json("call", "sleepy", "nap", "--args", '{"seconds": 0.01}')
    overslept = expediter.run("call", "sleepy", "nap", "--args", '{"seconds": 0.6}', "--json")

    assert rested["result"] == "rested"
    assert overslept.returncode == 1, str(overslept)
    assert overslept.json()["error"] == "TimeoutError: overslept"


def test_generated_site_dir_is_seen_only_through_pythonpath(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    _install_good_pack(site_dir)

    without = expediter.tools(env={"PYTHONPATH": None})

    assert "hello" not in without
    assert "hello" in expediter.tools()


# -- pack names shared by packs of different sources --------------------------------------------


def test_distribution_named_like_a_builtin_keeps_both_packs_callable(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    site_dir.add_dist(
        "think",
        "9.0",
        entry_points={"deep": "deep_thought"},
        files={"deep_thought.py": tool_function_source("think-dist", "ponder")},
    )
    tools = expediter.tools()
    assert (tools["deep"]["pack"], tools["deep"]["source"]) == ("think", "entry-point")
    assert (tools["think"]["pack"], tools["think"]["source"]) == ("think", "built-in")

    for cache in (["--refresh"], []):
        thought = expediter.run(*cache, "call", "think", "think", "--args", '{"thought": "a"}')
        assert thought.returncode == 0, str(thought)
        pondered = expediter.run(*cache, "call", "deep", "ponder", "--args", '{"text": "b"}')
        assert pondered.returncode == 0, str(pondered)


def test_distribution_named_like_a_tools_dir_module_keeps_both_packs_callable(
    expediter: Expediter, site_dir: SiteDir, tools_dir: Callable[[str, Mapping[str, str]], Path]
) -> None:
    site_dir.add_tool_pack("jotter", "notebook", function="jot")
    directory = tools_dir("tools", {"jotter.py": tool_function_source("jotter-module", "scribble")})
    tools = expediter.tools("--tools-dir", str(directory))
    assert tools["notebook"]["pack"] == "jotter"
    assert tools["jotter"]["source"] == "directory"

    for cache in (["--refresh"], []):
        for tool, action in (("notebook", "jot"), ("jotter", "scribble")):
            args = [*cache, "--tools-dir", str(directory), "call", tool, action]
            called = expediter.run(*args, "--args", '{"text": "c"}')
            assert called.returncode == 0, str(called)
