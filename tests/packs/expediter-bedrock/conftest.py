"""The Bedrock test pack's own tests import ``expediter_bedrock`` from this folder, as they
would from its installed distribution."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
