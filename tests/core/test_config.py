"""Plugin switches and paths read from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from expediter.core.config import (
    HostConfig,
    PluginSettings,
    expediter_home,
    normalize_name,
    split_paths,
)


def test_names_compare_like_distribution_names() -> None:
    assert normalize_name(" Expediter-Dice.Pack ") == "expediter_dice_pack"


def test_switches_are_parsed_from_the_environment(tmp_path: Path) -> None:
    settings = HostConfig.from_env(
        {
            "EXPEDITER_DISABLE_PLUGINS": "a, B-c,",
            "EXPEDITER_LOAD_PLUGINS": "d",
            "EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "true",
            "EXPEDITER_STRICT_PLUGINS": "1",
        },
        tools_path=[tmp_path],
    ).plugin_settings
    assert settings.disabled == {"a", "b_c"}
    assert settings.load_only == {"d"}
    assert (settings.autoload, settings.strict) == (False, True)
    assert settings.tools_path == (tmp_path,)


@pytest.mark.parametrize("value", ["", "0", "false", "no"])
def test_false_values_leave_switches_off(value: str) -> None:
    settings = HostConfig.from_env(
        {"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": value, "EXPEDITER_STRICT_PLUGINS": value}
    ).plugin_settings
    assert (settings.autoload, settings.strict) == (True, False)


def test_disabled_names_are_blocked_everywhere() -> None:
    settings = PluginSettings(disabled=frozenset({"weather"}))
    assert not settings.allows(["expediter-weather", "weather"], entry_point=True)
    assert not settings.allows(["weather"], entry_point=False, built_in=True)
    assert settings.allows(["other"], entry_point=True)


def test_load_only_limits_entry_points_and_directories_but_not_builtins() -> None:
    settings = PluginSettings(load_only=frozenset({"dice"}))
    assert settings.allows(["dice"], entry_point=True)
    assert not settings.allows(["cards"], entry_point=True)
    assert not settings.allows(["cards"], entry_point=False)
    assert settings.allows(["clock"], entry_point=False, built_in=True)


def test_without_autoload_only_named_entry_points_load() -> None:
    settings = PluginSettings(autoload=False)
    assert not settings.allows(["dice"], entry_point=True)
    assert settings.allows(["local_tool"], entry_point=False)
    named = PluginSettings(autoload=False, load_only=frozenset({"dice"}))
    assert named.allows(["dice"], entry_point=True)
    assert not named.allows(["cards"], entry_point=True)


def test_builtins_can_be_switched_off_by_the_host() -> None:
    assert not PluginSettings(builtins=False).allows(["think"], entry_point=False, built_in=True)


def test_paths_split_on_the_platform_separator(tmp_path: Path) -> None:
    import os

    assert split_paths(os.pathsep.join([str(tmp_path), "", "~/tools"])) == (
        tmp_path,
        Path("~/tools").expanduser(),
    )


def test_home_defaults_to_the_user_data_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    assert expediter_home({"EXPEDITER_HOME": "/srv/exp"}) == Path("/srv/exp")
    monkeypatch.setattr("sys.platform", "linux")
    assert expediter_home({"XDG_DATA_HOME": "/data"}) == Path("/data/expediter")
    assert expediter_home({}) == Path.home() / ".local" / "share" / "expediter"


def test_host_config_reads_every_setting_from_the_environment(tmp_path: Path) -> None:
    config = HostConfig.from_env(
        {
            "EXPEDITER_DATABASE_URL": "sqlite:///x.db",
            "EXPEDITER_HOME": str(tmp_path / "home"),
            "EXPEDITER_TOOLS_PATH": str(tmp_path / "a"),
            "EXPEDITER_LEASE_SECONDS": "7",
            "EXPEDITER_APPROVAL_SECONDS": "90",
            "EXPEDITER_CALL_TIMEOUT": "0",
            "EXPEDITER_STRICT_PLUGINS": "yes",
        },
        tools_path=[tmp_path / "b"],
    )
    assert config.database_url == "sqlite:///x.db"
    assert config.home == tmp_path / "home"
    assert config.tools_path == (tmp_path / "a", tmp_path / "b")  # the argument adds
    assert (config.lease_seconds, config.approval_seconds) == (7.0, 90.0)
    assert config.call_timeout is None  # 0: no deadline
    assert config.strict_plugins


def test_explicit_values_replace_the_environments(tmp_path: Path) -> None:
    environ = {"EXPEDITER_DATABASE_URL": "sqlite:///env.db", "EXPEDITER_LEASE_SECONDS": "7"}
    config = HostConfig.from_env(environ, database_url="sqlite:///mine.db", lease_seconds=None)
    assert config.database_url == "sqlite:///mine.db"
    assert config.lease_seconds == 7.0  # None leaves the environment's value


@pytest.mark.parametrize("value", ["soon", "-1"])
def test_a_bad_number_names_its_variable(value: str) -> None:
    with pytest.raises(ValueError, match="EXPEDITER_LEASE_SECONDS"):
        HostConfig.from_env({"EXPEDITER_LEASE_SECONDS": value})


def test_an_unknown_override_is_refused() -> None:
    with pytest.raises(TypeError, match="database"):
        HostConfig.from_env({}, database="sqlite:///x.db")
