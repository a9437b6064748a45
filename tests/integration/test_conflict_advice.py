"""The switch a tool-name conflict advises disables exactly one pack, for real distributions
(one named like the other's entry point) and a tools-directory module."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from .conftest import Expediter, SiteDir, tool_function_source


def conflict_message(expediter: Expediter, *args: str) -> str:
    listed = expediter.run(*args, "tools", "list")
    assert listed.returncode == 0, str(listed)
    (line,) = [line for line in listed.stderr.splitlines() if "neither is offered" in line]
    return line


def switches(message: str) -> list[str]:
    return re.findall(r"EXPEDITER_DISABLE_PLUGINS=([\w-]+(?:\.[\w-]+)*)", message)


def test_a_distribution_named_like_the_others_entry_point_is_not_advised_by_name(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    site_dir.add_tool_pack("expediter-dice", "dice", version="1.0", function="roll")
    site_dir.add_tool_pack("dice", "dice", version="2.0", function="throw")

    message = conflict_message(expediter)

    assert switches(message) == ["expediter-dice"]
    assert message.endswith(", or uninstall dice.")
    # The advised switch leaves the other pack's tool offered; "dice" would offer neither.
    advised = expediter.tools(env={"EXPEDITER_DISABLE_PLUGINS": "expediter-dice"})
    assert (advised["dice"]["pack"], advised["dice"]["actions"]) == ("dice", ["throw"])
    assert "dice" not in expediter.tools(env={"EXPEDITER_DISABLE_PLUGINS": "dice"})


def test_a_tools_directory_module_named_like_the_entry_point_is_advised_by_path(
    expediter: Expediter, site_dir: SiteDir, tools_dir: Any
) -> None:
    site_dir.add_tool_pack("expediter-dice", "dice", version="1.0", function="roll")
    directory: Path = tools_dir("mine", {"dice.py": tool_function_source("mine", "shake")})
    args = ("--tools-dir", str(directory))

    message = conflict_message(expediter, *args)

    assert switches(message) == ["expediter-dice"]
    assert message.endswith(f", or rename or move {directory / 'dice.py'}.")
    advised = expediter.tools(*args, env={"EXPEDITER_DISABLE_PLUGINS": "expediter-dice"})
    assert (advised["dice"]["source"], advised["dice"]["actions"]) == ("directory", ["shake"])


@pytest.mark.parametrize("disabled", ["acme-one", "acme-two"])
def test_each_advised_switch_disables_exactly_one_pack(
    expediter: Expediter, site_dir: SiteDir, disabled: str
) -> None:
    site_dir.add_tool_pack("acme-one", "dup", version="1.0", function="first")
    site_dir.add_tool_pack("acme-two", "dup", version="2.0", function="second")

    assert switches(conflict_message(expediter)) == ["acme-one", "acme-two"]
    offered = expediter.tools(env={"EXPEDITER_DISABLE_PLUGINS": disabled})
    assert offered["dup"]["pack"] == ({"acme-one", "acme-two"} - {disabled}).pop()
