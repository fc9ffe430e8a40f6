"""`layoutcheck.digests.sha256_hex`: the cache's keys are the same SHA-256 digests whichever module computes them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_digests_are_hashlibs_before_and_after_the_switch() -> None:
    """The interpreter's own SHA-256 for the first megabyte a process hashes, `hashlib` after: the same
    digests on both sides (a cache written by a cold run is read by a one-file run)."""
    code = (
        "import hashlib, os, sys\n"
        "from layoutcheck import digests\n"
        "for size in (0, 1, 55, 56, 64, 1000, 300_000, 900_000, 2_000_000, 10):\n"
        "    data = os.urandom(size)\n"
        "    assert digests.sha256_hex(data) == hashlib.sha256(data).hexdigest(), size\n"
        "print(digests._hashed)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert int(out.stdout) > (1 << 20)  # both sides of the switch were hashed


def test_a_few_small_digests_do_not_import_hashlib() -> None:
    code = (
        "import sys\n"
        "before = 'hashlib' in sys.modules  # a site hook may have imported it: then nothing to see\n"
        "from layoutcheck.digests import sha256_hex\n"
        "assert sha256_hex(b'abc') == 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad'\n"
        "print(('hashlib' in sys.modules) and not before)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
