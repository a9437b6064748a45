"""Every ```python block in docs/*.md and README.md runs as written.

Each block runs in a fresh module, in a temporary working directory, with an isolated
``EXPEDITER_HOME`` (the ``expediter_home`` fixture). A block preceded by ``<!-- not-run -->``
is skipped (pack files that need packaging). A block that defines pytest tests (``def test_``
or ``class Test``) is also run as a test module with pytester, and its tests must pass.
"""

from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
NOT_RUN = "<!-- not-run -->"
_DEFINES_TESTS = re.compile(r"^(def test_|class Test)", re.MULTILINE)


def _python_blocks() -> list[tuple[str, int, str]]:
    """Return ``(file name, fence line number, source)`` for every runnable python block."""
    blocks = []
    for path in [*sorted(DOCS.glob("*.md")), DOCS.parent / "README.md"]:
        lines = path.read_text(encoding="utf-8").splitlines()
        index = 0
        while index < len(lines):
            if lines[index].strip() != "```python":
                index += 1
                continue
            start = index
            end = start + 1
            while end < len(lines) and lines[end].strip() != "```":
                end += 1
            assert end < len(lines), f"{path.name}:{start + 1}: unclosed code block"
            skipped = start > 0 and lines[start - 1].strip() == NOT_RUN
            if not skipped:
                blocks.append((path.name, start + 1, "\n".join(lines[start + 1 : end]) + "\n"))
            index = end + 1
    return blocks


BLOCKS = _python_blocks()


def test_the_docs_have_python_examples() -> None:
    assert len(BLOCKS) >= 10, [f"{name}:{line}" for name, line, _ in BLOCKS]


@pytest.mark.parametrize(
    ("name", "line", "source"), BLOCKS, ids=[f"{name}:{line}" for name, line, _ in BLOCKS]
)
def test_python_example_runs(
    name: str,
    line: int,
    source: str,
    expediter_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    saved_environ = dict(os.environ)
    module_name = f"_docs_example_{Path(name).stem.replace('-', '_')}_{line}"
    module = types.ModuleType(module_name)
    module.__file__ = str(workdir / f"{module_name}.py")
    modules_before = set(sys.modules)
    sys.modules[module_name] = module
    try:
        exec(compile(source, f"{name}:{line}", "exec"), module.__dict__)
    finally:
        # Tools-directory modules are cached in sys.modules under their directory as given
        # ("tools"), so a later example's "tools" directory must not find this one's.
        for added in set(sys.modules) - modules_before:
            if added == module_name or added.startswith("_expediter_tools_"):
                del sys.modules[added]
        os.environ.clear()
        os.environ.update(saved_environ)
    if _DEFINES_TESTS.search(source):
        pytester: pytest.Pytester = request.getfixturevalue("pytester")
        pytester.makepyfile(**{f"test_{module_name}": source})
        result = pytester.runpytest("-q", "-p", "no:cacheprovider")
        outcomes = result.parseoutcomes()
        assert outcomes.get("passed", 0) > 0, result.stdout.str()
        assert not outcomes.get("failed"), result.stdout.str()
        assert not outcomes.get("errors"), result.stdout.str()
