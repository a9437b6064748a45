"""The docs' examples run as written: every ```python block in docs/*.md and README.md, and every
terminal transcript (a ```text block of ``$ expediter ...`` lines and what they print).

Each python block runs in a fresh module, in a temporary working directory, with an isolated
``EXPEDITER_HOME`` (the ``expediter_home`` fixture); it runs twice in that home, as a reader who
runs it again would, once without any pack installed and once with the README's dice pack
installed as an entry-point distribution. A block preceded by ``<!-- not-run -->`` is skipped
(pack files that need packaging). A block that defines pytest tests (``def test_`` or
``class Test``) is also run as a test module with pytester, and its tests must pass.

A transcript's commands run in a shell with a fresh home and no entry-point pack, and must print
what it shows; one preceded by ``<!-- demo -->`` quotes ``expediter demo`` and must match the
demo's sections; ``<!-- not-run -->`` skips one that needs packs or files it does not create.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.transcripts import sections

from expediter.cli import cli

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NOT_RUN = "<!-- not-run -->"
DEMO = "<!-- demo -->"
_DEFINES_TESTS = re.compile(r"^(def test_|class Test)", re.MULTILINE)
#: The README's pack ("Your own tool pack in 15 lines"), installed for the second run.
DICE_MODULE = '''
import random
import expediter


@expediter.tool
def roll(sides: int = 6, count: int = 1) -> list[int]:
    """Roll dice.

    Args:
        sides: Faces on each die.
        count: How many dice to roll.
    """
    return [random.randint(1, sides) for _ in range(count)]
'''


def _blocks(language: str) -> list[tuple[str, int, str, str]]:
    """``(file name, fence line number, marker line before it, source)`` for every block."""
    blocks = []
    for path in [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]:
        lines = path.read_text(encoding="utf-8").splitlines()
        index = 0
        while index < len(lines):
            if lines[index].strip() != f"```{language}":
                index += 1
                continue
            start = index
            end = start + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            assert end < len(lines), f"{path.name}:{start + 1}: unclosed code block"
            marker = lines[start - 1].strip() if start > 0 else ""
            blocks.append((path.name, start + 1, marker, "\n".join(lines[start + 1 : end]) + "\n"))
            index = end + 1
    return blocks


BLOCKS = [
    (name, line, source) for name, line, marker, source in _blocks("python") if marker != NOT_RUN
]
TRANSCRIPTS = [
    (name, line, marker, source)
    for name, line, marker, source in _blocks("text")
    if source.startswith("$ ") and marker != NOT_RUN
]


def test_the_docs_have_python_examples() -> None:
    assert len(BLOCKS) >= 10, [f"{name}:{line}" for name, line, _ in BLOCKS]


@pytest.fixture(params=["no-pack", "dice-installed"])
def installed_pack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Nothing, or the README's ``expediter-dice`` pack as an installed distribution (its
    ``.dist-info`` on ``sys.path``, as ``pip install`` leaves it)."""
    if request.param == "no-pack":
        yield request.param
        return
    site = tmp_path / "site"
    info = site / "expediter_dice-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: expediter-dice\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[expediter]\ndice = expediter_dice\n")
    (site / "expediter_dice.py").write_text(textwrap.dedent(DICE_MODULE))
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        try:
            yield request.param
        finally:
            sys.modules.pop("expediter_dice", None)


def _run_block(name: str, line: int, source: str, workdir: Path) -> None:
    workdir.mkdir()
    saved_cwd = os.getcwd()
    saved_environ = dict(os.environ)
    module_name = f"_docs_example_{Path(name).stem.replace('-', '_')}_{line}"
    module = types.ModuleType(module_name)
    module.__file__ = str(workdir / f"{module_name}.py")
    modules_before = set(sys.modules)
    sys.modules[module_name] = module
    os.chdir(workdir)
    try:
        exec(compile(source, f"{name}:{line}", "exec"), module.__dict__)
    finally:
        # Tools-directory modules are cached in sys.modules under their directory as given
        # ("tools"), so a later example's "tools" directory must not find this one's.
        for added in set(sys.modules) - modules_before:
            if added == module_name or added.startswith("_expediter_tools_"):
                del sys.modules[added]
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)


@pytest.mark.parametrize(
    ("name", "line", "source"), BLOCKS, ids=[f"{name}:{line}" for name, line, _ in BLOCKS]
)
def test_python_example_runs_and_runs_again(
    name: str,
    line: int,
    source: str,
    installed_pack: str,
    expediter_home: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    for run in ("first", "again"):  # the same home: the ledger keeps the first run's calls
        _run_block(name, line, source, tmp_path / f"work-{run}")
    if _DEFINES_TESTS.search(source) and installed_pack == "no-pack":
        pytester: pytest.Pytester = request.getfixturevalue("pytester")
        module_name = f"_docs_example_{Path(name).stem.replace('-', '_')}_{line}"
        pytester.makepyfile(**{f"test_{module_name}": source})
        result = pytester.runpytest("-q", "-p", "no:cacheprovider")
        outcomes = result.parseoutcomes()
        assert outcomes.get("passed", 0) > 0, result.stdout.str()
        assert not outcomes.get("failed"), result.stdout.str()
        assert not outcomes.get("errors"), result.stdout.str()


# -- transcripts ----------------------------------------------------------------------------------


def test_the_docs_have_transcripts_and_the_readme_quotes_the_demo() -> None:
    assert len(TRANSCRIPTS) >= 3, TRANSCRIPTS
    assert any(name == "README.md" and marker == DEMO for name, _, marker, _ in TRANSCRIPTS)


@pytest.fixture(scope="module")
def demo_output(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The sections of ``expediter demo``, run once with a fresh home and no entry-point pack."""
    home = tmp_path_factory.mktemp("demo-home")
    env = {"EXPEDITER_HOME": str(home), "EXPEDITER_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = CliRunner().invoke(cli, ["demo"], prog_name="expediter", env=env)
    assert result.exit_code == 0, result.output
    return sections(result.stdout)


def _shell(command: str, home: Path, workdir: Path) -> str:
    """What a terminal shows for a command line: standard output and error, interleaved."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("EXPEDITER_")}
    env.update(
        EXPEDITER_HOME=str(home),
        EXPEDITER_DISABLE_PLUGIN_AUTOLOAD="1",
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    )
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        check=False,
    )
    return done.stdout


@pytest.mark.parametrize(
    ("name", "line", "marker", "source"),
    TRANSCRIPTS,
    ids=[f"{name}:{line}" for name, line, _, _ in TRANSCRIPTS],
)
def test_a_transcript_shows_what_its_commands_print(
    name: str,
    line: int,
    marker: str,
    source: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    shown = sections(source, until_blank=False)
    assert shown, f"{name}:{line}: no `$ ` line"
    if marker == DEMO:
        demo: dict[str, list[str]] = request.getfixturevalue("demo_output")
        for command, lines in shown.items():
            assert command in demo, f"{name}:{line}: the demo shows no `$ {command}`"
            assert lines == demo[command], f"{name}:{line}: `$ {command}`"
        return
    for command, lines in shown.items():
        printed = _shell(command, tmp_path / "home", tmp_path)
        assert printed.splitlines() == lines, f"{name}:{line}: `$ {command}`"
