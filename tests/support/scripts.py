"""Running a module of ``support`` as a script in a new Python process:
``python -P -m support.MODULE ARGS...`` with the tests folder on ``PYTHONPATH``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The tests folder, the one that holds ``support``.
TESTS = Path(__file__).resolve().parents[1]


def script_command(module: str, *args: str) -> list[str]:
    """The command line running ``module`` (a ``support`` module) with this interpreter."""
    # -P: the working directory is not put on sys.path, so it cannot shadow what is imported.
    return [sys.executable, "-P", "-m", module, *args]


def script_environment(**extra: str) -> dict[str, str]:
    """This process's environment plus ``extra``, with the tests folder first on PYTHONPATH."""
    paths = [str(TESTS), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, **extra, "PYTHONPATH": os.pathsep.join(paths)}
