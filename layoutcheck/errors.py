"""Error classes and the structured layout violation.

Two kinds of failure, kept apart (as jaxtyping does): `LayoutError` means the
*data* breaks a layout invariant; `LayoutSpecError` means the *specification*
is wrong (bad arguments, bad configuration). Neither is an `AssertionError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "ConfigError",
    "LayoutError",
    "LayoutSpecError",
    "LayoutcheckError",
    "Violation",
]


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


def _fmt(value: object, limit: int = 120) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class Violation:
    """One broken invariant, with everything a user needs to act on it.

    Holds only ints and strings (never a tensor), so keeping violations never
    keeps tensors alive.
    """

    invariant: str
    """The invariant id from DESIGN.md section 3 (``O1``..``O5``, ``G1``..``G6``, ``X1``)."""
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

    def location(self) -> str:
        parts = [self.where]
        if self.micro_batch is not None:
            parts.append(f"micro-batch {self.micro_batch}")
        if isinstance(self.sample, tuple):
            parts.append("samples " + ", ".join(str(s) for s in self.sample))
        elif self.sample is not None:
            parts.append(f"sample {self.sample}")
        parts.append(f"field `{self.field}`")
        return ", ".join(parts)

    def format(self) -> str:
        """Render in the fixed order: where, seen, expected, sizes, what to do."""
        lines = [f"[{self.invariant}] {self.location()}: {self.problem}"]
        lines.append(f"    seen:     {_fmt(self.actual)}")
        lines.append(f"    expected: {_fmt(self.expected)}")
        if self.sizes:
            sizes = ", ".join(f"{k}={_fmt(v, 40)}" for k, v in self.sizes.items())
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
            "actual": _fmt(self.actual, 400),
            "expected": _fmt(self.expected, 400),
            "hint": self.hint,
            "sample": sample,
            "micro_batch": self.micro_batch,
            "sizes": {k: _fmt(v, 80) for k, v in self.sizes.items()},
        }


class LayoutError(LayoutcheckError):
    """The data breaks one or more layout invariants."""

    def __init__(self, violations: Iterable[Violation]):
        self.violations: Sequence[Violation] = tuple(violations)
        if not self.violations:
            raise LayoutSpecError("LayoutError needs at least one violation")
        super().__init__(self._message())

    def _message(self) -> str:
        n = len(self.violations)
        head = f"{n} layout violation{'s' if n != 1 else ''}"
        return head + "\n" + "\n".join(v.format() for v in self.violations)
