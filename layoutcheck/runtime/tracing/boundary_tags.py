"""A boundary contract's data fields, tagged with their spaces after each call: where the contract's tags come from.

When the tracer is on, each call of a function with a boundary contract
(``[runtime.boundaries."pkg.mod:func"]``) tags what the contract says its
arguments and return value hold (the ``data`` fields: per-sample lists,
``(B, L)`` rows, packed streams, one sample), through `tag_space`: the
field's space (``cp`` resolved to the call's scheme), the call's CP size and
rank, and each sample's ``T``, ``R``, ``P`` as the contract binds them from
the fields that measure them (shapes and Python ints only: a length the
contract reads from a device tensor is not waited for, and the tag goes
without it). Samples are numbered ``0..n-1`` within the call. The ops that
follow, in a traced region, are then judged against those spaces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from layoutcheck.errors import LayoutSpecError
from layoutcheck.runtime.checker.boundaries import read_field, sample_count
from layoutcheck.runtime.contract import invariants
from layoutcheck.runtime.contract.boundary import BoundarySpec, FieldSpec
from layoutcheck.runtime.contract.expressions import MISSING
from layoutcheck.runtime.contract.meta import metadata_only, shape_of
from layoutcheck.runtime.tracing.space_tags import tag_space
from layoutcheck.spaces import SampleLengths

__all__ = ["tag_boundary_call"]


def tag_boundary_call(spec: BoundarySpec, call: Mapping[str, Any], result: Any, coords: Mapping[str, int],
                      scheme: str) -> int:
    """Tag the data fields of one call of ``spec``'s function (``coords``: its ``tp``, ``cp``, ``rank``); how many tags."""
    one = spec.samples == 1
    readings: list[tuple[FieldSpec, Any, invariants.Reading]] = []
    for f in spec.fields:
        if f.space is None or (f.when is not None and not f.when.evaluate(call, coords)):
            continue
        value = f.path.read(call, result)
        if value is MISSING or value is None:
            continue
        try:
            reading, _ = read_field(f, value, scheme, one=one)
        except LayoutSpecError:
            continue  # the boundary's own check says so
        readings.append((f, value, reading))
    n = sample_count(spec, [r for _, _, r in readings])
    bound, _ = invariants.bind([r for _, _, r in readings], n, spec.target, {})
    known = [bound.sample(i) for i in range(n)]
    lengths: list[SampleLengths] | None = None if any(s is None for s in known) else known  # type: ignore[assignment]
    count = 0
    for f, value, reading in readings:
        if f.holds != "data" or reading.shape not in ("list", "rows", "stream", "one"):
            continue
        samples: int | list[int] = 0 if one else list(range(n))
        seq_dim = f.axis if f.axis is not None else (1 if reading.shape in ("rows", "stream") and _ndim(value) >= 2
                                                      else 0)
        if reading.shape == "stream" and lengths is None:
            continue  # a stream's segments come from its samples' lengths
        if reading.shape == "list" and len(value) != n:
            continue
        count += tag_space(value, f.resolved(scheme), field=f.key, samples=samples,
                           lengths=(lengths[0] if one else lengths) if lengths else None, seq_dim=seq_dim,
                           cp_size=coords.get("cp", 1), cp_rank=coords.get("rank", 0))
    return count


def _ndim(value: Any) -> int:
    with metadata_only():
        shape = shape_of(value)
    return len(shape) if shape is not None else 0
