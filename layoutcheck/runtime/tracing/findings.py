"""What the tracer reports: a `Violation` about the tensor a `Tag` describes, its ``where`` left for the op.

Shared by the length rules (`layoutcheck.runtime.tracing.propagation`), the
space rules (`layoutcheck.runtime.tracing.space_rules`) and the CP-helper
wrappers (`layoutcheck.runtime.tracing.tagging`).
"""

from __future__ import annotations

from layoutcheck.errors import Violation
from layoutcheck.runtime.tracing.tags import Tag

__all__ = ["violation"]


def violation(invariant: str, tag: Tag, problem: str, actual: object, expected: object, hint: str,
              *, samples: tuple[int, ...] | None = None, extra: dict[str, object] | None = None) -> Violation:
    """A violation about the tensor ``tag`` describes (``where`` left for the tracer to fill)."""
    sample: int | tuple[int, ...] | None = tag.sample
    if samples is not None:
        sample = samples
    elif sample is None and tag.samples:
        sample = tag.samples
    sizes = tag.sizes()
    if extra:
        sizes.update(extra)
    return Violation(
        invariant=invariant, where="", field=tag.field, problem=problem, actual=actual, expected=expected,
        hint=hint, sample=sample, micro_batch=tag.micro_batch, sizes=sizes,
    )
