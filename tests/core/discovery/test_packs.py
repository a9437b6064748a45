"""Discovery: the tools-directory scan, what a module or object counts as, and load errors."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import expediter
from expediter.__about__ import __version__
from expediter.core.discovery.packs import load_objects, scan_directory


def write(directory: Path, name: str, source: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "tools"
    directory.mkdir()
    return directory


def test_scan_finds_modules_and_packages_and_skips_private_names(tools_dir: Path) -> None:
    write(tools_dir, "weather.py", "")
    write(tools_dir, "notes/__init__.py", "")
    write(tools_dir, "_helpers.py", "")
    write(tools_dir, "not-an-identifier.py", "")
    write(tools_dir, "empty_dir/README", "")
    (tools_dir / "__pycache__").mkdir()
    refs = scan_directory(tools_dir)
    assert [(ref.name, ref.source) for ref in refs] == [
        ("notes", "directory"),
        ("weather", "directory"),
    ]
    assert refs[0].location.path == str(tools_dir / "notes" / "__init__.py")


def test_module_name_is_the_tool_name_for_a_single_function(make_host, tools_dir: Path) -> None:
    write(
        tools_dir,
        "greeter.py",
        '''
        import expediter

        @expediter.tool
        def hello(name: str) -> str:
            """Greet someone.

            Args:
                name: Who to greet.
            """
            return f"hello {name}"
        ''',
    )
    host = make_host(tools_path=[tools_dir])
    (info,) = host.catalogue()
    assert (info.name, info.pack, info.source) == ("greeter", "greeter", "directory")
    assert [action.name for action in info.actions] == ["hello"]
    assert host.call("greeter", "hello", {"name": "Ada"}).result == "hello Ada"


def test_several_tool_functions_in_a_module_become_actions_of_one_tool(
    make_host, tools_dir: Path
) -> None:
    write(
        tools_dir,
        "maths.py",
        '''
        """Small arithmetic."""
        import expediter

        @expediter.tool
        def add(a: int, b: int) -> int:
            """Add two numbers."""
            return a + b

        @expediter.tool
        def neg(a: int) -> int:
            """Negate a number."""
            return -a
        ''',
    )
    (info,) = make_host(tools_path=[tools_dir]).catalogue()
    assert info.name == "maths"
    assert info.description == "Small arithmetic."
    assert sorted(action.name for action in info.actions) == ["add", "neg"]


def test_a_toolbox_in_a_module_takes_the_module_name(make_host, tools_dir: Path) -> None:
    write(
        tools_dir,
        "inventory.py",
        '''
        import expediter

        class StockKeeper(expediter.Toolbox):
            """Track stock."""

            @expediter.action
            def count(self, item: str) -> int:
                """Count an item."""
                return len(item)
        ''',
    )
    host = make_host(tools_path=[tools_dir])
    (info,) = host.catalogue()
    assert info.name == "inventory"
    assert host.call("inventory", "count", {"item": "bolts"}).result == 5


def test_a_toolbox_base_class_in_the_same_module_is_not_a_second_tool(
    make_host, tools_dir: Path
) -> None:
    write(
        tools_dir,
        "layered.py",
        '''
        import expediter

        class Base(expediter.Toolbox):
            def helper(self) -> int:
                return 41

        class Concrete(Base):
            @expediter.action
            def answer(self) -> int:
                """Answer."""
                return self.helper() + 1
        ''',
    )
    host = make_host(tools_path=[tools_dir])
    assert host.call("layered", "answer").result == 42


def test_functions_imported_from_elsewhere_do_not_count(make_host, tools_dir: Path) -> None:
    write(tools_dir, "reexport.py", "from expediter.plugins.think import think\n")
    host = make_host(tools_path=[tools_dir])
    assert host.catalogue() == []
    (pack,) = host.packs
    assert "defines no tool" in (pack.error or "")


def test_a_module_with_raw_hooks_is_the_tool(make_host, tools_dir: Path) -> None:
    write(
        tools_dir,
        "echo.py",
        """
        import expediter

        @expediter.hookimpl
        def get_actions_metadata():
            return [expediter.Action("say", "Say it back.", {"type": "object",
                    "properties": {"text": {"type": "string"}}, "required": ["text"]})]

        @expediter.hookimpl
        def execute_action(action, arguments):
            return arguments["text"]
        """,
    )
    host = make_host(tools_path=[tools_dir])
    assert host.call("echo", "say", {"text": "hi"}).result == "hi"


def test_a_module_mixing_a_toolbox_and_functions_is_a_load_error(
    make_host, tools_dir: Path
) -> None:
    write(
        tools_dir,
        "mixed.py",
        """
        import expediter

        class Box(expediter.Toolbox):
            @expediter.action
            def a(self) -> int:
                return 1

        @expediter.tool
        def b() -> int:
            return 2
        """,
    )
    host = make_host(tools_path=[tools_dir])
    assert host.catalogue() == []
    (pack,) = host.packs
    assert "several tools" in (pack.error or "")


def test_tool_functions_of_a_module_that_agree_carry_headless_excluded(
    make_host, tools_dir: Path
) -> None:
    write(
        tools_dir,
        "scheduler.py",
        '''
        """Schedule runs."""
        import expediter

        @expediter.tool(headless_excluded=True)
        def later(when: str) -> str:
            return when

        @expediter.tool(headless_excluded=True)
        def cancel(key: str) -> str:
            return key
        ''',
    )
    write(
        tools_dir,
        "plain.py",
        "import expediter\n\n@expediter.tool\ndef hi() -> str:\n    return 'hi'\n",
    )
    infos = {info.name: info for info in make_host(tools_path=[tools_dir]).catalogue()}
    assert infos["scheduler"].headless_excluded is True
    assert infos["plain"].headless_excluded is False


def test_tool_functions_of_a_module_that_disagree_on_headless_excluded_are_a_load_error(
    make_host, tools_dir: Path
) -> None:
    path = write(
        tools_dir,
        "halfway.py",
        """
        import expediter

        @expediter.tool(headless_excluded=True)
        def later(when: str) -> str:
            return when

        @expediter.tool
        def now() -> str:
            return "now"
        """,
    )
    host = make_host(tools_path=[tools_dir])
    assert host.catalogue() == []
    (pack,) = host.packs
    assert pack.error == (
        f"TypeError: {path}: its @tool functions disagree on "
        "internal/user_scoped/headless_excluded; give them all the same values"
    )


def test_a_raw_hooks_module_declares_headless_excluded_as_a_module_attribute(
    make_host, tools_dir: Path
) -> None:
    write(
        tools_dir,
        "cron.py",
        """
        import expediter

        headless_excluded = True

        @expediter.hookimpl
        def get_actions_metadata():
            return [expediter.Action("later", "Schedule a run.", {"type": "object"})]

        @expediter.hookimpl
        def execute_action(action, arguments):
            return None
        """,
    )
    (info,) = make_host(tools_path=[tools_dir]).catalogue()
    assert (info.name, info.headless_excluded) == ("cron", True)
    assert info.summary()["headless_excluded"] is True


class _RawScheduler:
    name = "raw_scheduler"
    headless_excluded = True

    @expediter.hookimpl
    def get_actions_metadata(self):
        return [expediter.Action("later", "Schedule a run.", {"type": "object"})]

    @expediter.hookimpl
    def execute_action(self, action, arguments):
        return None


class _RawPlain:
    name = "raw_plain"

    @expediter.hookimpl
    def get_actions_metadata(self):
        return [expediter.Action("now", "Run now.", {"type": "object"})]

    @expediter.hookimpl
    def execute_action(self, action, arguments):
        return None


def test_headless_excluded_reaches_tool_type_and_tool_info_from_every_kind_of_tool() -> None:
    @expediter.tool(headless_excluded=True)
    def later(when: str) -> str:
        return when

    @expediter.tool
    def now() -> str:
        return "now"

    class Box(expediter.Toolbox):
        headless_excluded = True

        @expediter.action
        def soon(self) -> str:
            return "soon"

    class PlainBox(expediter.Toolbox):
        @expediter.action
        def today(self) -> str:
            return "today"

    objects = [later, now, Box, PlainBox, _RawScheduler, _RawPlain()]
    expected = {
        "later": True,
        "now": False,
        "box": True,
        "plain_box": False,
        "raw_scheduler": True,
        "raw_plain": False,
    }
    pack = load_objects("host", objects)
    assert pack.info.error is None
    assert {tool.name: tool.headless_excluded for tool in pack.types} == expected
    assert {info.name: info.headless_excluded for info in pack.infos} == expected
    undescribed = load_objects("host", objects, describe=False)
    assert {tool.name: tool.headless_excluded for tool in undescribed.types} == expected


def test_a_module_with_a_syntax_error_is_recorded_and_others_still_load(
    make_host, tools_dir: Path
) -> None:
    write(tools_dir, "broken.py", "def oops(:\n")
    write(
        tools_dir,
        "fine.py",
        """
        import expediter

        @expediter.tool
        def ok() -> str:
            return "ok"
        """,
    )
    host = make_host(tools_path=[tools_dir])
    assert [info.name for info in host.catalogue()] == ["fine"]
    errors = {pack.name: pack.error for pack in host.packs}
    assert errors["fine"] is None
    assert (errors["broken"] or "").startswith("SyntaxError")


def test_a_module_that_raises_or_exits_on_import_does_not_break_the_host(
    make_host, tools_dir: Path
) -> None:
    write(tools_dir, "raises.py", "raise RuntimeError('no API key configured')\n")
    write(tools_dir, "exits.py", "import sys\nsys.exit(3)\n")
    host = make_host(tools_path=[tools_dir], builtins=True)
    assert {info.name for info in host.catalogue()} == {
        "clock",
        "memory",
        "notes",
        "think",
        "todo_list",
    }
    errors = {pack.name: pack.error for pack in host.packs}
    assert errors["raises"] == "RuntimeError: no API key configured"
    assert errors["exits"] == "SystemExit: 3"


def test_tools_dir_modules_do_not_shadow_standard_library_modules(
    make_host, tools_dir: Path
) -> None:
    write(
        tools_dir,
        "json.py",
        """
        import expediter

        @expediter.tool
        def dumps(value: str) -> str:
            return value
        """,
    )
    host = make_host(tools_path=[tools_dir])
    assert [info.name for info in host.catalogue()] == ["json"]
    import json

    assert sys.modules["json"] is json
    assert json.dumps([1]) == "[1]"


def test_same_module_name_in_two_directories_is_a_conflict(make_host, tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for directory in (first, second):
        write(
            directory,
            "lookup.py",
            """
            import expediter

            @expediter.tool
            def find(q: str) -> str:
                return q
            """,
        )
    host = make_host(tools_path=[first, second])
    assert host.catalogue() == []
    (conflict,) = host.conflicts
    assert conflict.tool == "lookup"
    assert "neither is offered" in conflict.message


def test_a_tool_that_cannot_describe_itself_is_not_offered(make_host) -> None:
    class Broken:
        name = "broken"

        @expediter.hookimpl
        def get_actions_metadata(self):
            raise ValueError("backend unreachable")

        @expediter.hookimpl
        def execute_action(self, action, arguments):
            return None

    host = make_host(Broken())
    assert host.catalogue() == []
    (pack,) = host.packs
    assert pack.error == "tool 'broken': ValueError: backend unreachable"


def test_misspelled_hook_is_reported_instead_of_silently_ignored(make_host) -> None:
    class Typo:
        name = "typo"

        @expediter.hookimpl
        def get_actions_metadata(self):
            return []

        @expediter.hookimpl
        def execute_acton(self, action, arguments):
            return None

    host = make_host(Typo())
    assert host.catalogue() == []
    assert "execute_acton" in (host.packs[0].error or "")


def test_invalid_tool_names_are_rejected(make_host) -> None:
    @expediter.tool(name="has space")
    def spaced() -> str:
        return ""

    host = make_host(spaced)
    assert host.catalogue() == []
    assert "not valid" in (host.packs[0].error or "")


def test_register_tools_registers_objects_with_optional_names(make_host) -> None:
    @expediter.tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    class Counter(expediter.Toolbox):
        @expediter.action
        def total(self, values: list[int]) -> int:
            """Sum values."""
            return sum(values)

    class Pack:
        @expediter.hookimpl
        def register_tools(self, register):
            register(ping)
            register(Counter)
            register(ping, name="ping_again")

    host = make_host(Pack())
    assert [info.name for info in host.catalogue()] == ["counter", "ping", "ping_again"]
    assert {info.pack for info in host.catalogue()} == {"host"}
    assert host.call("counter", "total", {"values": [1, 2, 3]}).result == 6
    assert "register_tools" in host.packs[0].hooks


def test_registering_something_that_is_not_a_tool_is_a_load_error(make_host) -> None:
    class Pack:
        @expediter.hookimpl
        def register_tools(self, register):
            register(42)

    host = make_host(Pack())
    assert "not a tool" in (host.packs[0].error or "")


def test_builtins_are_found_by_the_directory_scan() -> None:
    from expediter.core.config import BUILTIN_DIR

    refs = {ref.name: ref for ref in scan_directory(BUILTIN_DIR, source="built-in")}
    assert {"think", "clock"} <= set(refs)
    assert refs["clock"].version == __version__
    assert refs["clock"].location.module == "expediter.plugins.clock"


def test_load_objects_records_each_bad_object_and_keeps_the_good_ones() -> None:
    @expediter.tool
    def good() -> str:
        """Good."""
        return "good"

    pack = load_objects("host", [good, object()])
    assert pack.info.tools == ("good",)
    assert "not a tool or plugin" in (pack.info.error or "")


def test_a_tools_module_that_registers_its_tools_is_not_also_a_tool(
    make_host, tools_dir: Path
) -> None:
    write(
        tools_dir,
        "bundle.py",
        '''
        import expediter

        @expediter.tool
        def greet(name: str) -> str:
            """Greet."""
            return "hi " + name

        class Sums(expediter.Toolbox):
            @expediter.action
            def total(self, values: list[int]) -> int:
                """Sum."""
                return sum(values)

        @expediter.hookimpl
        def register_tools(register):
            register(greet)
            register(Sums)
        ''',
    )
    host = make_host(tools_path=[tools_dir])
    assert [info.name for info in host.catalogue()] == ["greet", "sums"]
    assert host.packs[0].error is None


def test_a_tool_package_may_define_its_tool_in_a_submodule(make_host, tools_dir: Path) -> None:
    write(tools_dir, "weather/__init__.py", "from .impl import forecast\n")
    write(
        tools_dir,
        "weather/impl.py",
        '''
        import expediter

        @expediter.tool
        def forecast(city: str) -> str:
            """Forecast."""
            return f"sunny in {city}"
        ''',
    )
    host = make_host(tools_path=[tools_dir])
    assert host.call("weather", "forecast", {"city": "Oslo"}).result == "sunny in Oslo"


def test_relative_tools_paths_mean_the_directory_they_named(
    make_host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for project, answer in (("a", "A"), ("b", "B")):
        write(
            tmp_path / project / "tools",
            "ver.py",
            f"""
            import expediter

            @expediter.tool
            def v() -> str:
                return {answer!r}
            """,
        )
    monkeypatch.chdir(tmp_path / "a")
    assert make_host(tools_path=["tools"]).call("ver", "v").result == "A"
    monkeypatch.chdir(tmp_path / "b")
    assert make_host(tools_path=["tools"]).call("ver", "v").result == "B"


def test_load_errors_name_the_file_of_a_tools_module(make_host, tools_dir: Path) -> None:
    path = write(tools_dir, "empty.py", "VALUE = 1\n")
    host = make_host(tools_path=[tools_dir])
    assert host.packs[0].error == (
        f"TypeError: {path} defines no tool: add an @expediter.tool function, an "
        "expediter.Toolbox subclass, or @expediter.hookimpl tool hooks"
    )


# -- which hooks an object implements: pluggy's own answer ------------------------------------


class _Policy:
    @expediter.hookimpl
    def tool_call_policy(self, call, action, context):
        return None

    @expediter.hookimpl(wrapper=True)
    def execute_action(self):
        return (yield)

    evaluated = 0

    @property
    def register_tools(self):  # a property named like a hook is not a hook, and never runs
        _Policy.evaluated += 1
        return lambda register: None

    def resolve_secret(self, name, context):  # not marked: not a hook
        return None


def test_hooks_found_are_the_hooks_pluggy_registers() -> None:
    import pluggy

    from expediter.core.discovery.packs import _host_hooks
    from expediter.hookspecs import host as host_spec
    from expediter.hookspecs import tool as tool_spec

    manager = pluggy.PluginManager("expediter")
    manager.add_hookspecs(tool_spec)
    manager.add_hookspecs(host_spec)
    plugin = _Policy()
    manager.register(plugin)
    registered = {caller.name for caller in manager.get_hookcallers(plugin) or []}
    assert set(_host_hooks(plugin)) == registered == {"tool_call_policy", "execute_action"}
    assert _Policy.evaluated == 0


# -- register_commands: found at discovery, kept in the manifest -------------------------------

COMMANDS_MODULE = '''
import expediter

@expediter.hookimpl
def register_commands(cli):
    import click

    @cli.command()
    @click.argument("name")
    def greet(name):
        """Greet someone by name.

        A longer description that is not the one-line help.
        """
        click.echo(f"hello {name}")

    @cli.command(name="wave")
    def wave_hand():
        """Wave\x07 at\x1b[31m everyone."""
'''


def _load_module_pack(tools_dir: Path, name: str):
    from expediter.core.discovery.packs import load_pack

    (ref,) = [ref for ref in scan_directory(tools_dir) if ref.name == name]
    return load_pack(ref)


def test_commands_are_described_at_discovery_with_their_one_line_help(tools_dir: Path) -> None:
    from expediter.core.discovery.catalogue import CommandInfo

    write(tools_dir, "greeting.py", COMMANDS_MODULE)
    pack = _load_module_pack(tools_dir, "greeting")
    assert pack.info.error is None
    assert pack.info.commands == (
        CommandInfo("greet", "Greet someone by name."),
        CommandInfo("wave", "Wave at[31m everyone."),
    )
    assert "register_commands" in pack.info.hooks
    # The command line's hook, not the call pipeline's: building the host's plugin manager
    # (which imports every pack with host hooks) must not import a pack for its commands.
    assert pack.info.host_hooks == ()
    assert pack.types == []


def test_pack_commands_returns_the_real_click_commands(tools_dir: Path) -> None:
    from click.testing import CliRunner

    from expediter.core.discovery.packs import pack_commands

    write(tools_dir, "greeting.py", COMMANDS_MODULE)
    commands = pack_commands(_load_module_pack(tools_dir, "greeting"))
    assert sorted(commands) == ["greet", "wave"]
    assert CliRunner().invoke(commands["greet"], ["Ann"]).output == "hello Ann\n"


def test_a_register_commands_hook_that_raises_is_a_load_error(tools_dir: Path) -> None:
    write(
        tools_dir,
        "broken.py",
        """
        import expediter

        @expediter.hookimpl
        def register_commands(cli):
            raise RuntimeError("no commands today")
        """,
    )
    pack = _load_module_pack(tools_dir, "broken")
    assert pack.info.error == "register_commands: RuntimeError: no commands today"
    assert pack.info.commands == ()


def test_an_invalid_command_name_is_a_load_error(tools_dir: Path) -> None:
    write(
        tools_dir,
        "odd.py",
        """
        import expediter

        @expediter.hookimpl
        def register_commands(cli):
            cli.command(name="two words")(lambda: None)
        """,
    )
    pack = _load_module_pack(tools_dir, "odd")
    assert pack.info.error is not None
    assert "command name 'two words' is not valid" in pack.info.error


def test_tools_and_commands_in_one_pack(make_host, tools_dir: Path) -> None:
    write(
        tools_dir,
        "kit.py",
        '''
        import expediter

        @expediter.tool
        def shout(text: str) -> str:
            """Shout."""
            return text.upper()

        @expediter.hookimpl
        def register_tools(register):
            register(shout)

        @expediter.hookimpl
        def register_commands(cli):
            @cli.command()
            def kit():
                """Show the kit."""
        ''',
    )
    pack = _load_module_pack(tools_dir, "kit")
    assert (pack.info.tools, [c.name for c in pack.info.commands]) == (("shout",), ["kit"])
    assert make_host(tools_path=[tools_dir]).call("shout", "shout", {"text": "a"}).result == "A"


def test_in_process_plugins_add_no_commands() -> None:
    class Commands:
        @expediter.hookimpl
        def register_commands(self, cli):
            raise AssertionError("Host(plugins=...) objects are not asked for commands")

    pack = load_objects("host", [Commands()])
    assert (pack.info.error, pack.info.commands) == (None, ())


def _one_tool_dir(directory: Path) -> Path:
    write(
        directory,
        "lookup.py",
        """
        import expediter

        @expediter.tool
        def find(q: str) -> str:
            return q
        """,
    )
    return directory


@pytest.mark.parametrize("spelling", ["same", "relative", "trailing-slash", "symlink", "dotted"])
def test_one_tools_directory_named_twice_counts_once(
    make_host, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    directory = _one_tool_dir(tmp_path / "t")
    monkeypatch.chdir(tmp_path)
    other: str | Path = {
        "same": directory,
        "relative": "t",
        "trailing-slash": f"{directory}/",
        "symlink": tmp_path / "link",
        "dotted": f"{tmp_path}/t/../t/.",
    }[spelling]
    if spelling == "symlink":
        (tmp_path / "link").symlink_to(directory, target_is_directory=True)
    monkeypatch.setenv("EXPEDITER_TOOLS_PATH", str(directory))
    host = make_host(tools_path=[other])
    assert host.conflicts == []
    assert [info.name for info in host.catalogue()] == ["lookup"]
    assert [pack.name for pack in host.packs] == ["lookup"]
    assert host.call("lookup", "find", {"q": "x"}).result == "x"


def test_the_builtin_directory_named_as_a_tools_directory_is_not_loaded_twice(make_host) -> None:
    from expediter.core.config import BUILTIN_DIR

    host = make_host(tools_path=[BUILTIN_DIR], builtins=True)
    assert host.conflicts == []
    names = [pack.name for pack in host.packs]
    assert len(names) == len(set(names)), names
    assert "clock" in [info.name for info in host.catalogue()]
