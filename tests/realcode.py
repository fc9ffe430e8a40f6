"""Real trainers' code for the presets' tests: pinned verl wheels from PyPI, pinned Miles and slime checkouts.

* verl is on PyPI: `verl_tree` downloads the wheel of a pinned version (once,
  into ``$LAYOUTCHECK_TEST_CACHE`` or ``~/.cache/layoutcheck-tests``), and
  lays out a folder with the modules under test copied unchanged from it
  (``verl/models/mcore/util.py``, ``verl/utils/seqlen_balancing.py``) beside
  the stubs of ``tests/stubs/verl`` (Megatron's parallel state, and the
  parts of verl's package that pull the GPU stack). Nothing of verl is kept
  in this repository. Without network access the tests skip.
* Miles and slime are not on PyPI: a test runs when ``LAYOUTCHECK_MILES_CHECKOUT`` /
  ``LAYOUTCHECK_SLIME_CHECKOUT`` names a checkout at the pinned commit (`checkout`),
  and skips otherwise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STUBS = ROOT / "tests" / "stubs"

VERL_MODULES = ("verl/models/mcore/util.py", "verl/utils/seqlen_balancing.py")
PINS = {"miles": "31f1ca961", "slime": "624b824a8"}
"""The commits the Miles and slime presets are written against."""


def cache_dir() -> Path:
    path = Path(os.environ.get("LAYOUTCHECK_TEST_CACHE") or Path.home() / ".cache" / "layoutcheck-tests")
    path.mkdir(parents=True, exist_ok=True)
    return path


def verl_wheel(version: str) -> Path:
    """The verl wheel of ``version`` (downloaded once with pip, no dependencies); skips the test when it cannot be had."""
    folder = cache_dir() / f"verl-{version}"
    wheels = sorted(folder.glob(f"verl-{version}-*.whl"))
    if not wheels:
        folder.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", f"verl=={version}", "--no-deps", "--only-binary=:all:",
             "-d", str(folder), "-q"], capture_output=True, text=True, timeout=600,
        )
        wheels = sorted(folder.glob(f"verl-{version}-*.whl"))
        if proc.returncode != 0 or not wheels:
            pytest.skip(f"verl=={version} could not be downloaded from PyPI: {proc.stderr.strip()[-300:]}")
    return wheels[0]


def verl_tree(version: str, dest: Path) -> Path:
    """A folder to put on ``PYTHONPATH``: verl's data-path modules of ``version``, unchanged, beside the stubs."""
    tree = dest / f"verl-{version}"
    shutil.copytree(STUBS / "verl", tree, ignore=shutil.ignore_patterns("README.md", "__pycache__"))
    with zipfile.ZipFile(verl_wheel(version)) as wheel:
        for name in VERL_MODULES:
            (tree / name).write_bytes(wheel.read(name))
    return tree


def checkout(trainer: str) -> Path:
    """The pinned checkout named by ``LAYOUTCHECK_<TRAINER>``; skips the test when unset or at another commit."""
    variable = f"LAYOUTCHECK_{trainer.upper()}_CHECKOUT"
    path = os.environ.get(variable)
    if not path:
        pytest.skip(f"{variable} is not set: point it at a {trainer} checkout at {PINS[trainer]}")
    folder = Path(path)
    head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0 and not head.stdout.startswith(PINS[trainer]):
        pytest.skip(f"{variable}={folder} is at {head.stdout[:9]}, not the pinned {PINS[trainer]}")
    return folder
