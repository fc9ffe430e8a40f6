"""Error classes and the structured layout violation.

Two kinds of failure, kept apart (as jaxtyping does): `LayoutError` means the
*data* breaks a layout invariant; `LayoutSpecError` means the *specification*
is wrong (bad arguments, bad configuration). Neither is an `AssertionError`.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import field
from layoutcheck.records import dataclass

__all__ = [
    "MESSAGE_LIMIT",
    "ConfigError",
    "LayoutError",
    "LayoutSpecError",
    "LayoutcheckError",
    "Violation",
    "describe_value",
    "format_violations",
    "invariant_counts",
    "metadata_only",
]

MESSAGE_LIMIT = 20
"""Violations a `LayoutError` (or a warning) shows in full; the rest are counted per invariant."""


class LayoutcheckError(Exception):
    """Base class of every error layoutcheck raises on purpose."""


class LayoutSpecError(LayoutcheckError, ValueError):
    """A bad specification: arguments, sizes or names that make no sense.

    Raised before any layout is judged, so it never hides as a violation.
    """


class ConfigError(LayoutSpecError):
    """A bad configuration value; the message names the key and its source."""

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None):
        self.key = key
        self.source = source
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_config_error, (type(self), str(self), self.key, self.source))


def _rebuild_config_error(cls: type[ConfigError], message: str, key: str | None, source: str | None) -> ConfigError:
    return cls(message, key=key, source=source)


def metadata_only() -> AbstractContextManager[object]:
    """A context in which tensor metadata bypasses ``__torch_function__``.

    ``torch._C.DisableTorchFunction`` turns off both modes and subclass
    overrides (``DisableTorchFunctionSubclass`` would leave modes on): an
    active ``TorchFunctionMode`` (a tracer's, a profiler's) or a tensor
    subclass would otherwise see ``.shape`` and ``.size()`` (docs/development.md#what-the-runtime-is-built-on). When torch was never imported there are no tensors and
    nothing to disable. It lives here, not in `layoutcheck.runtime.contract.meta`
    (which re-exports it), so that formatting a value never loads the runtime.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return nullcontext()
    return torch._C.DisableTorchFunction()


def _is_array(value: object) -> bool:
    # A tensor or an array: has a shape and a dtype. Never call repr() on one:
    # printing a CUDA tensor copies it to the host (a GPU sync). A numpy
    # scalar (0-d, module numpy) is a plain value and keeps its repr.
    if isinstance(value, type) or not (hasattr(value, "shape") and hasattr(value, "dtype")):
        return False
    return not (type(value).__module__ == "numpy" and value.shape == ())  # type: ignore[attr-defined]


def _item(value: object) -> str:
    return repr(value) if isinstance(value, str) else _describe(value)


def _describe(value: object) -> str:
    if _is_array(value):
        shape = tuple(int(d) for d in value.shape)  # type: ignore[attr-defined]
        device = getattr(value, "device", None)
        where = f", device={device}" if device is not None else ""
        return f"{type(value).__name__}(dtype={value.dtype}, shape={shape}{where})"  # type: ignore[attr-defined]
    if isinstance(value, (list, tuple)):
        items = ", ".join(_item(v) for v in value[:16]) + (", ..." if len(value) > 16 else "")
        if isinstance(value, list):
            return f"[{items}]"
        return f"({items},)" if len(value) == 1 else f"({items})"
    if isinstance(value, dict):
        items = ", ".join(f"{_item(k)}: {_item(v)}" for k, v in list(value.items())[:16])
        return "{" + items + (", ..." if len(value) > 16 else "") + "}"
    return repr(value)


def describe_value(value: object, limit: int = 120, *, quote: bool = False) -> str:
    """A value as messages show it, at most ``limit`` characters; strings as they are (``quote``: as repr).

    Tensors and arrays (anything with a ``shape`` and a ``dtype``) are
    described by type, dtype, shape and device only, with torch-function
    handling off: their ``repr`` would read the values, which synchronises a
    GPU. Lists, tuples and dicts are described item by item (the first 16).
    Every message that shows a user's value goes through here.
    """
    if isinstance(value, str):
        text = repr(value) if quote else value
    else:
        with metadata_only():
            text = _describe(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def invariant_counts(violations: Iterable[Violation]) -> str:
    """``"G1 x2, O3 x5"``: how many violations per invariant id, sorted by id."""
    counts = Counter(v.invariant for v in violations)
    return ", ".join(f"{inv} x{k}" for inv, k in sorted(counts.items()))


def format_violations(violations: Sequence[Violation], *, limit: int | None = None) -> str:
    """``N layout violations``, the first ``limit`` in full, then a one-line count of the rest by invariant.

    ``limit=None`` shows every violation. `LayoutError` and warnings use
    `MESSAGE_LIMIT`; the full list stays in ``.violations``.
    """
    n = len(violations)
    shown = violations if limit is None else violations[:limit]
    lines = [f"{n} layout violation{'s' if n != 1 else ''}", *(v.format() for v in shown)]
    rest = violations[len(shown) :]
    if rest:
        lines.append(f"... and {len(rest)} more ({invariant_counts(rest)})")
    return "\n".join(lines)


@dataclass(frozen=True)
class Violation:
    """One broken invariant, with everything a user needs to act on it.

    Holds only ints and strings (never a tensor), so keeping violations never
    keeps tensors alive.
    """

    invariant: str
    """The invariant id from docs/design.md#the-invariants (``O1``..``O5``, ``G1``..``G6``, ``X1``; ``B1``..``B6`` for a boundary contract;
    ``S1``..``S5`` for the tracer's space rules)."""
    where: str
    """The function (owner, hook or check) that saw it, e.g. ``get_batch``."""
    field: str
    """The rollout or batch field concerned, e.g. ``max_seq_lens``."""
    problem: str
    """One sentence: what is wrong."""
    actual: object
    expected: object
    hint: str
    """What to do about it, as an imperative sentence."""
    sample: int | tuple[int, ...] | None = None
    micro_batch: int | None = None
    sizes: Mapping[str, object] = field(default_factory=dict)
    """Bound sizes that explain the expected value, e.g. ``{"P": 2048, "cp": 2, "r": 1}``."""
    space: str | None = None
    """The layout space the field is in (`layoutcheck.spaces.Space.describe`), when a contract says it."""

    def location(self) -> str:
        parts = [self.where]
        if self.micro_batch is not None:
            parts.append(f"micro-batch {self.micro_batch}")
        if isinstance(self.sample, tuple):
            parts.append("samples " + ", ".join(str(s) for s in self.sample))
        elif self.sample is not None:
            parts.append(f"sample {self.sample}")
        parts.append(f"field `{self.field}`" + (f" (space {self.space})" if self.space else ""))
        return ", ".join(parts)

    def format(self) -> str:
        """Render in the fixed order: where, seen, expected, sizes, what to do."""
        lines = [f"[{self.invariant}] {self.location()}: {self.problem}"]
        lines.append(f"    seen:     {describe_value(self.actual)}")
        lines.append(f"    expected: {describe_value(self.expected)}")
        if self.sizes:
            sizes = ", ".join(f"{k}={describe_value(v, 40)}" for k, v in self.sizes.items())
            lines.append(f"    sizes:    {sizes}")
        lines.append(f"    fix:      {self.hint}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view (for reports and cross-rank exchange)."""
        sample = list(self.sample) if isinstance(self.sample, tuple) else self.sample
        return {
            "invariant": self.invariant,
            "where": self.where,
            "field": self.field,
            "problem": self.problem,
            "actual": describe_value(self.actual, 400),
            "expected": describe_value(self.expected, 400),
            "hint": self.hint,
            "sample": sample,
            "micro_batch": self.micro_batch,
            "sizes": {k: describe_value(v, 80) for k, v in self.sizes.items()},
            "space": self.space,
        }


class LayoutError(LayoutcheckError):
    """The data breaks one or more layout invariants.

    The message shows the first `MESSAGE_LIMIT` violations in full and counts
    the rest per invariant; ``.violations`` holds all of them.
    """

    def __init__(self, violations: Iterable[Violation]):
        self.violations: Sequence[Violation] = tuple(violations)
        if not self.violations:
            raise LayoutSpecError("LayoutError needs at least one violation")
        super().__init__(format_violations(self.violations, limit=MESSAGE_LIMIT))

    def __reduce__(self) -> tuple[object, ...]:
        # Picklable with its violations (ints and strings only): Ray and
        # multiprocessing send a rank's error to the driver this way.
        return (type(self), (self.violations,))
