"""Commands that packs add with ``register_commands``, through the real ``expediter`` command.

The first test pip-installs a real distribution into a throwaway virtualenv, as a third party
would ship it; the others use generated ``*.dist-info`` site directories (the same metadata,
much faster). Every generated pack module logs its import (``Expediter.imported``), so a test
can tell that ``expediter --help`` imported no pack.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Expediter, SiteDir, module_source, pip_installed_venv

INVENTORY_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "acme-inventory"
version = "2.0.1"
description = "Stock-taking commands and tools for expediter"
dependencies = ["expediter"]

[project.entry-points.expediter]
inventory = "acme_inventory"

[tool.hatch.build.targets.wheel]
packages = ["acme_inventory"]
"""

INVENTORY_MODULE = '''
"""Stock-taking for the shop."""

import expediter


@expediter.tool
def stock(item: str) -> dict:
    """Count an item on the shelves.

    Args:
        item: What to count.
    """
    return {"item": item, "count": len(item)}


@expediter.hookimpl
def register_tools(register):
    register(stock)


@expediter.hookimpl
def register_commands(cli):
    import click

    from expediter.cli import pass_host

    @cli.command()
    @click.argument("item")
    @pass_host
    def stocktake(host, item):
        """Count an item through the configured host."""
        event = host.call("stock", "stock", {"item": item})
        click.echo(f"{event.result['item']}: {event.result['count']} ({host.database_url})")
'''


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Expediter:
    """expediter and the acme-inventory pack, pip-installed into a throwaway virtualenv."""
    root = tmp_path_factory.mktemp("pack-commands")
    project = root / "acme-inventory"
    (project / "acme_inventory").mkdir(parents=True)
    (project / "pyproject.toml").write_text(INVENTORY_PYPROJECT, encoding="utf-8")
    (project / "acme_inventory" / "__init__.py").write_text(
        module_source("acme-inventory", INVENTORY_MODULE), encoding="utf-8"
    )
    return pip_installed_venv(root, project)


@pytest.mark.slow
def test_an_installed_pack_command_is_listed_unimported_runs_with_the_host_and_can_be_disabled(
    inventory: Expediter, tmp_path: Path
) -> None:
    inventory.ok("tools", "list")  # discovery imports the pack once and writes the manifest
    inventory.forget_imports()

    listing = inventory.ok("--help")
    assert "  stocktake  Count an item through the configured host." in listing.stdout
    assert inventory.imported() == [], "expediter --help imported the pack"
    assert inventory.plugins()["acme-inventory"]["commands"] == [
        {"name": "stocktake", "help": "Count an item through the configured host."}
    ]
    assert inventory.imported() == []

    database = f"sqlite:///{tmp_path / 'ledger.db'}"
    ran = inventory.ok("--database", database, "stocktake", "bolts")
    assert ran.stdout == f"bolts: 5 ({database})\n"
    assert inventory.imported() == ["acme-inventory"]
    own_help = inventory.ok("stocktake", "--help").stdout
    assert "Usage: expediter stocktake [OPTIONS] ITEM" in own_help

    disabled = {"EXPEDITER_DISABLE_PLUGINS": "acme-inventory"}
    assert "stocktake" not in inventory.ok("--help", env=disabled).stdout
    gone = inventory.run("stocktake", "bolts", env=disabled)
    assert gone.returncode == 2
    assert "No such command 'stocktake'" in gone.stderr


# -- generated site directories -------------------------------------------------------------------


def command_pack(name: str, *commands: str, fail: bool = False) -> str:
    """A pack module adding commands that print ``<pack>:<command>``."""
    if fail:
        body = "    raise RuntimeError('no commands today')\n"
    else:
        body = "".join(
            f"    @cli.command(name={command!r})\n"
            f"    def _{index}():\n"
            f'        """{command.capitalize()} from {name}."""\n'
            f"        print({f'{name}:{command}'!r})\n"
            for index, command in enumerate(commands)
        )
    return module_source(
        name,
        f"""
import expediter


@expediter.hookimpl
def register_commands(cli):
{body}""",
    )


def add_command_pack(site_dir: SiteDir, name: str, *commands: str, fail: bool = False) -> None:
    package = name.replace("-", "_")
    site_dir.add_dist(
        name,
        entry_points={package: package},
        files={f"{package}/__init__.py": command_pack(name, *commands, fail=fail)},
    )


def test_a_command_named_like_a_builtin_is_reported_and_not_added(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    add_command_pack(site_dir, "shadow", "plugins", "count")
    listing = expediter.ok("--help")
    assert "pack 'shadow' adds a command 'plugins', the name of a built-in command" in (
        listing.stderr
    )
    assert "  count      Count from shadow." in listing.stdout
    assert expediter.ok("count").stdout == "shadow:count\n"
    assert "shadow:plugins" not in expediter.ok("plugins").stdout


def test_two_packs_adding_one_command_name_add_neither(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    add_command_pack(site_dir, "left", "sync")
    add_command_pack(site_dir, "right", "sync")
    listing = expediter.ok("--help")
    assert "packs 'left' and 'right' both add a command 'sync'; neither is added" in (
        listing.stderr
    )
    assert "EXPEDITER_DISABLE_PLUGINS=left or EXPEDITER_DISABLE_PLUGINS=right" in listing.stderr
    assert expediter.run("sync").returncode == 2
    kept = expediter.ok("sync", env={"EXPEDITER_DISABLE_PLUGINS": "left"})
    assert kept.stdout == "right:sync\n"


def test_a_register_commands_hook_that_raises_is_a_load_error_and_help_still_works(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    add_command_pack(site_dir, "broken", fail=True)
    add_command_pack(site_dir, "fine", "hello")
    row = expediter.plugins()["broken"]
    assert row["error"] == "register_commands: RuntimeError: no commands today"
    listing = expediter.ok("--help")
    assert "  hello  " in listing.stdout
    assert expediter.ok("hello").stdout == "fine:hello\n"
    strict = expediter.run("hello", env={"EXPEDITER_STRICT_PLUGINS": "1"})
    assert strict.returncode == 1
    assert "broken" in strict.stderr
    assert "Traceback" not in strict.stderr


def test_the_plugin_switches_apply_to_commands(expediter: Expediter, site_dir: SiteDir) -> None:
    add_command_pack(site_dir, "alpha", "first")
    add_command_pack(site_dir, "beta", "second")
    assert {"first", "second"} <= set(expediter.ok("--help").stdout.split())
    only = expediter.ok("--help", env={"EXPEDITER_LOAD_PLUGINS": "beta"}).stdout.split()
    assert "second" in only
    assert "first" not in only
    none = expediter.ok("--help", env={"EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}).stdout.split()
    assert "first" not in none
    assert "second" not in none


def test_a_tools_dir_module_adds_commands_listed_with_tools_dir_help(
    expediter: Expediter, tools_dir
) -> None:
    directory = tools_dir("extra", {"extras.py": command_pack("extras", "polish")})
    listing = expediter.ok("--tools-dir", str(directory), "--help")
    assert "  polish  " in listing.stdout
    assert "polish" not in expediter.ok("--help").stdout
    assert expediter.ok("--tools-dir", str(directory), "polish").stdout == "extras:polish\n"


def test_a_command_gone_from_an_edited_pack_says_how_to_refresh(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    add_command_pack(site_dir, "editable", "old")
    expediter.ok("--help")
    site_dir.write("editable/__init__.py", command_pack("editable", "new"))  # in place
    stale = expediter.run("old")
    assert stale.returncode == 1
    assert "no longer adds the command 'old'" in stale.stderr
    assert "expediter --refresh" in stale.stderr
    assert "  new  " in expediter.ok("--refresh", "--help").stdout
    assert expediter.ok("new").stdout == "editable:new\n"


def test_help_writes_the_commands_index_again_beside_a_warm_manifest(
    expediter: Expediter, site_dir: SiteDir
) -> None:
    add_command_pack(site_dir, "kept", "keep")
    expediter.ok("tools", "list")
    index = expediter.home / "cache" / "commands.json"
    index.unlink()
    expediter.forget_imports()
    assert "  keep  " in expediter.ok("--help").stdout
    assert index.is_file()
    assert expediter.imported() == [], "the manifest was warm: no pack imported"
