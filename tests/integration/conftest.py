"""Run the real ``expediter`` command in subprocesses against generated tool packs.

``site_dir`` is a directory of ``*.dist-info`` folders (METADATA + entry_points.txt) and the
packs' modules, put on the subprocess's ``PYTHONPATH`` exactly as an installed distribution
would be seen by ``importlib.metadata``. ``tools_dir`` makes local tools directories.
``expediter`` runs the CLI with an isolated ``EXPEDITER_HOME`` and every ``EXPEDITER_*``
variable unset unless the test passes it. Every generated module appends its label to the file
``PACK_IMPORT_LOG`` names when it is imported, so a test can tell which packs a command imported.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: The variable naming the file every generated pack module appends its label to on import.
_IMPORT_LOG_VARIABLE = "PACK_IMPORT_LOG"

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Variables of the test process that must not reach the command (they change what it loads).
_DROPPED = (
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONPROFILEIMPORTTIME",
    "PYTHONSAFEPATH",
)


def expediter_command(bin_dir: Path | None = None) -> list[str]:
    """The ``expediter`` console script of an environment (default: the one running pytest)."""
    directory = bin_dir if bin_dir is not None else Path(sys.executable).parent
    script = directory / ("expediter.exe" if os.name == "nt" else "expediter")
    if script.exists():
        return [str(script)]
    python = directory / Path(sys.executable).name
    return [str(python if bin_dir is not None else sys.executable), "-m", "expediter"]


def module_source(label: str, body: str) -> str:
    """A pack module that records its import under ``label``, followed by ``body``."""
    header = textwrap.dedent(
        f"""\
        import os as _os

        if _os.environ.get({_IMPORT_LOG_VARIABLE!r}):
            with open(_os.environ[{_IMPORT_LOG_VARIABLE!r}], "a", encoding="utf-8") as _log:
                _log.write({label!r} + "\\n")
        """
    )
    return header + textwrap.dedent(body)


def tool_function_source(label: str, function: str, *, internal: bool = False) -> str:
    """A module with one ``@expediter.tool`` function that echoes its ``text`` argument."""
    decorator = "@expediter.tool(internal=True)" if internal else "@expediter.tool"
    return module_source(
        label,
        f'''
        import expediter


        {decorator}
        def {function}(text: str, times: int = 1) -> str:
            """Repeat a text.

            Args:
                text: What to repeat.
                times: How many times.
            """
            return text * times
        ''',
    )


def _dist_folder(name: str, version: str) -> str:
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}.dist-info"


@dataclass
class SiteDir:
    """A directory of generated distributions, visible to the command through ``PYTHONPATH``."""

    path: Path

    def add_dist(
        self,
        name: str,
        version: str = "1.0",
        *,
        entry_points: Mapping[str, str],
        files: Mapping[str, str] | None = None,
    ) -> Path:
        """Write ``NAME-VERSION.dist-info`` with the entry points, and the pack's files."""
        info = self.path / _dist_folder(name, version)
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
        )
        lines = "".join(f"{ep} = {value}\n" for ep, value in entry_points.items())
        (info / "entry_points.txt").write_text(f"[expediter]\n{lines}", encoding="utf-8")
        for relative, text in (files or {}).items():
            target = self.path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        return info

    def add_tool_pack(
        self,
        name: str,
        entry_point: str,
        *,
        version: str = "1.0",
        function: str = "repeat",
        internal: bool = False,
    ) -> Path:
        """A distribution whose entry point names a module with one ``@tool`` function."""
        package = re.sub(r"[-.]+", "_", name).lower()
        return self.add_dist(
            name,
            version,
            entry_points={entry_point: package},
            files={
                f"{package}/__init__.py": tool_function_source(name, function, internal=internal)
            },
        )

    def write(self, relative: str, text: str) -> Path:
        """Rewrite a file of an installed pack in place (its directories keep their mtimes)."""
        return rewrite(self.path / relative, text)


def rewrite(path: Path, text: str) -> Path:
    """Rewrite a file, making sure its mtime moves on even on a coarse file-system clock."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    stat = path.stat()
    if stat.st_mtime_ns <= before:
        os.utime(path, ns=(stat.st_atime_ns, before + 1_000_000_000))
    return path


@dataclass
class Result:
    """A finished ``expediter`` command."""

    args: Sequence[str]
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """The command's standard output as one JSON document."""
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"not JSON ({exc}):\n{self}") from exc

    def __str__(self) -> str:
        return (
            f"$ expediter {' '.join(self.args)}\nexit status {self.returncode}\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


@dataclass
class Expediter:
    """Runs the ``expediter`` command with an isolated home and a clean environment."""

    home: Path
    workdir: Path
    import_log: Path
    pythonpath: list[Path] = field(default_factory=list)
    command: list[str] = field(default_factory=expediter_command)
    write_bytecode: bool = False

    def environment(self, env: Mapping[str, str | None] | None = None) -> dict[str, str]:
        """The subprocess environment: no ``EXPEDITER_*`` but the home and what ``env`` sets."""
        clean = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("EXPEDITER_") and key not in _DROPPED
        }
        clean["EXPEDITER_HOME"] = str(self.home)
        clean[_IMPORT_LOG_VARIABLE] = str(self.import_log)
        clean["PYTHONNOUSERSITE"] = "1"
        if self.write_bytecode:
            clean.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
            # Bytecode written on a pack's first import changes its directory's mtime;
            # pip precompiles installed packs, so these tests keep directories unchanged too.
            clean["PYTHONDONTWRITEBYTECODE"] = "1"
        if self.pythonpath:
            clean["PYTHONPATH"] = os.pathsep.join(str(path) for path in self.pythonpath)
        for key, value in (env or {}).items():
            if value is None:
                clean.pop(key, None)
            else:
                clean[key] = value
        return clean

    def run(self, *args: str, env: Mapping[str, str | None] | None = None) -> Result:
        """Run ``expediter ARGS`` and return its exit status and output."""
        completed = subprocess.run(
            [*self.command, *args],
            cwd=self.workdir,
            env=self.environment(env),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return Result(args, completed.returncode, completed.stdout, completed.stderr)

    def ok(self, *args: str, env: Mapping[str, str | None] | None = None) -> Result:
        """Run and require exit status 0."""
        result = self.run(*args, env=env)
        assert result.returncode == 0, str(result)
        return result

    def json(self, *args: str, env: Mapping[str, str | None] | None = None) -> Any:
        """Run with ``--json`` appended, require exit status 0, and parse the output."""
        return self.ok(*args, "--json", env=env).json()

    def tools(self, *args: str, env: Mapping[str, str | None] | None = None) -> dict[str, Any]:
        """``tools list --json`` rows by tool name (``args`` go before ``tools``)."""
        return {row["name"]: row for row in self.json(*args, "tools", "list", env=env)}

    def plugins(self, *args: str, env: Mapping[str, str | None] | None = None) -> dict[str, Any]:
        """``plugins --json`` rows by pack name (``args`` go before ``plugins``)."""
        return {row["name"]: row for row in self.json(*args, "plugins", env=env)}

    def imported(self) -> list[str]:
        """Labels of the generated modules imported since the last ``forget_imports``."""
        if not self.import_log.exists():
            return []
        return self.import_log.read_text(encoding="utf-8").split()

    def forget_imports(self) -> None:
        """Start a fresh import log."""
        self.import_log.unlink(missing_ok=True)


@pytest.fixture
def site_dir(tmp_path: Path) -> SiteDir:
    """An empty directory of generated distributions."""
    path = tmp_path / "site"
    path.mkdir()
    return SiteDir(path)


@pytest.fixture
def tools_dir(tmp_path: Path) -> Callable[[str, Mapping[str, str]], Path]:
    """Make a tools directory: ``tools_dir("name", {"module.py": source})``."""

    def make(name: str, modules: Mapping[str, str]) -> Path:
        directory = tmp_path / name
        directory.mkdir()
        for relative, text in modules.items():
            target = directory / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        return directory

    return make


@pytest.fixture
def expediter(tmp_path: Path, site_dir: SiteDir) -> Expediter:
    """The ``expediter`` command, seeing ``site_dir``'s distributions, with its own home."""
    home = tmp_path / "home"
    workdir = tmp_path / "work"
    workdir.mkdir()
    return Expediter(
        home=home, workdir=workdir, import_log=tmp_path / "imports.log", pythonpath=[site_dir.path]
    )


def pip_installed_venv(root: Path, *projects: Path) -> Expediter:
    """A virtualenv under ``root`` holding expediter (from this checkout) and ``projects``, all
    pip-installed as a user would install them; the ``expediter`` command of that venv.

    The venv has no pip of its own: this interpreter's pip installs into it (``--python``),
    without dependencies; a ``.pth`` file then makes the test environment's site-packages
    (pluggy, attrs, cattrs, click, tzdata) importable there, after the venv's own.
    """
    import importlib.util
    import sysconfig

    def run(command: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=600, check=False, **options
        )
        assert completed.returncode == 0, (
            f"$ {' '.join(command)}\n{completed.stdout}\n{completed.stderr}"
        )
        return completed

    venv = root / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    bin_dir = venv / ("Scripts" if sys.platform == "win32" else "bin")
    python = bin_dir / Path(sys.executable).name
    if not python.exists():
        python = bin_dir / ("python.exe" if sys.platform == "win32" else "python")
    # Without hatchling here, pip builds the projects in isolated build environments.
    no_isolation = ["--no-build-isolation"] if importlib.util.find_spec("hatchling") else []
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-input",
            "--disable-pip-version-check",
            *no_isolation,
            str(REPO_ROOT),
            *[str(project) for project in projects],
        ]
    )
    # Only now (so pip never saw the outer environment) borrow the dependencies.
    target = run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]
    ).stdout.strip()
    outer = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    Path(target, "_outer_dependencies.pth").write_text("\n".join(sorted(outer)) + "\n")
    installed = run(
        [str(python), "-c", "import expediter; print(expediter.__file__)"], cwd=root
    ).stdout.strip()
    assert Path(installed).resolve().is_relative_to(venv.resolve()), (
        f"the venv imports expediter from {installed}, not from its own site-packages"
    )
    return Expediter(
        home=root / "home",
        workdir=root,
        import_log=root / "imports.log",
        command=expediter_command(bin_dir),
        write_bytecode=True,
    )
