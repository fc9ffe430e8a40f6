"""An earlier layoutcheck beside this one, in the same process: what "before" means in a paired benchmark.

Two processes of one variant differ by up to 1.8x on a shared machine, so a
change is measured against the code before it in one process, alternating
runs. `load` extracts the ``layoutcheck`` package of a git commit of this
repository into a scratch folder under another name (``layoutcheck_base``:
every ``layoutcheck.`` module path in its source renamed), puts that folder
first on ``sys.path`` and imports it: the two packages share nothing (their
own tag tables, tracers and hooks), and each can be activated in turn on
the same trainer.

``BEFORE`` is the commit this branch's tracer change started from.
"""

from __future__ import annotations

import importlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from types import ModuleType

__all__ = ["BEFORE", "NAME", "load"]

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "3edcd00"
"""The tracer before tags carried spaces (layout spaces in `layoutcheck.spaces`, no rule S1-S5 yet)."""
NAME = "layoutcheck_base"

_MODULE_PATH = re.compile(r"\blayoutcheck(?=\.[a-z_]|\s+import\b)")


def load(commit: str = BEFORE, *, folder: Path | None = None) -> ModuleType:
    """Import the ``layoutcheck`` of ``commit`` as `NAME` (extracted under ``folder``, default a new temporary one)."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "layoutcheck"], capture_output=True,
                             check=True).stdout
    target = Path(folder or tempfile.mkdtemp(prefix="layoutcheck-before-"))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            if not member.isfile() or not member.name.startswith("layoutcheck/"):
                continue
            data = tar.extractfile(member).read()  # type: ignore[union-attr]
            path = target / NAME / member.name.removeprefix("layoutcheck/")
            path.parent.mkdir(parents=True, exist_ok=True)
            if member.name.endswith(".py"):
                data = _MODULE_PATH.sub(NAME, data.decode()).encode()
            path.write_bytes(data)
    sys.path.insert(0, str(target))
    return importlib.import_module(NAME)
