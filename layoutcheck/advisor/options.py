"""Option values and helpers of ``layoutcheck buckets`` and ``report``, without numpy.

The parsers read these at start-up (``layoutcheck --help`` builds them), so
nothing here imports more than the standard library.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from layoutcheck.argtypes import whole_number

__all__ = ["EMIT_FORMATS", "INPUT_FORMATS", "SAMPLERS", "error", "missing_extra", "parallel_degrees", "positive_int"]

INPUT_FORMATS = ("auto", "lines", "jsonl", "npy", "report")
"""How a lengths file is read; ``auto`` picks by suffix (`layoutcheck.advisor.inputs.format_for`)."""

SAMPLERS = ("random", "grouped")
"""Random pairing, or length-grouped like Hugging Face's ``group_by_length`` (`layoutcheck.advisor.sampler`)."""

EMIT_FORMATS = ("toml", "yaml", "json")
"""``--emit``: a ``[tool.layoutcheck.runtime]`` entry, a YAML line, a JSON list."""


positive_int = whole_number(1)
"""An argparse type: a whole number of at least 1."""


def parallel_degrees(sp_degree: int, cp_degree: int) -> str:
    """``", SP degree 2, CP degree 4"``: the degrees above 1, for a summary line (empty when none)."""
    return "".join(f", {name} degree {n}" for name, n in (("SP", sp_degree), ("CP", cp_degree)) if n > 1)


def missing_extra(command: str, modules: Sequence[str], extra: str) -> str | None:
    """The message for a missing optional dependency, or ``None`` when all of ``modules`` import.

    The command imports them next anyway, so trying costs nothing extra.
    """
    import importlib

    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if not missing:
        return None
    return f"layoutcheck {command} needs {' and '.join(missing)}: pip install 'layoutcheck[{extra}]'"


def error(message: str) -> int:
    """Print ``layoutcheck: error: MESSAGE`` to stderr (as `layoutcheck.cli` does) and return exit status 2."""
    print(f"layoutcheck: error: {message}", file=sys.stderr)
    return 2
