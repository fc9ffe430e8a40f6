"""Shared test set-up: the reference pipeline in fixtures/ is importable."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"

if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))
