"""`LayoutChecker`: the layout checks around a trainer's data path.

    checker = LayoutChecker(mode="raise", parallel_state=get_parallel_state)
    get_rollout_data = checker.wrap("producer", get_rollout_data)            # O1-O5
    get_batch = checker.wrap("batch_builder", get_batch)                     # G1-G4, G6
    fill_replay_data = checker.wrap("replay_filler", fill_replay_data)       # G1, G2, G5
    offsets = checker.wrap("offset_helper", get_logits_and_tokens_offset_with_cp)  # G4

`wrap` (in `layoutcheck.runtime.checker.wrappers`) checks the function's
signature against what its role needs and patches nothing: the caller, or the
hooks that install wrappers by dotted path, put the wrapper where the program
looks the function up. The wrappers share the checker's state per rollout
(`layoutcheck.runtime.checker.state`, with the producer's checks); what each
consumer call checks is `layoutcheck.runtime.checker.consumer_calls`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from layoutcheck.errors import Violation
from layoutcheck.runtime.checker import wrappers
from layoutcheck.runtime.checker.state import CheckerState, CrossRankOptions

__all__ = ["CrossRankOptions", "LayoutChecker", "check_rollout_data"]


class LayoutChecker(CheckerState):
    """Runs the layout checks around a producer, a batch builder, a replay filler and an offset helper.

    ``mode``: ``"raise"`` (a `LayoutError` with every violation of the call),
    ``"warn"`` (a `LayoutWarning`) or ``"record"``; every mode records, so
    `violations`, `summary` and `observations` always tell what was found.
    Each distinct violation is reported once per rollout.

    ``parallel_state``: a callable like ``get_parallel_state`` (``.tp`` and
    ``.cp`` with ``.size`` and ``.rank``); ``None`` means one rank.

    ``layout``: ``"bshd"`` or ``"thd"``, when the configuration says. The
    layout is never guessed: this, else the trainer's ``args.qkv_format``,
    else (at the batch builder) its own ``qkv_format`` argument; where none
    is known the layout-dependent checks become one note, never a violation.

    ``buckets``: static shape buckets (G6). The batch builder then pads each
    BSHD micro-batch to a bucket, so ``max_seq_lens`` may stay the samples'
    own tight lengths: the micro-batch's ``P`` is read from the shape of the
    batch the builder returned (G1 does not apply; G2, G3, G4 and G6 judge
    that ``P``), and O3, the per-sample tightness check, is off unless
    ``per_sample=True``.

    ``adapter``: how the trainer is read (`MilesAdapter` by default).
    ``limits``: how much detail `observations` keep.

    ``cross_rank``: under torch.distributed, also check that every CP rank
    of a micro-batch agrees on its layout (X1, `layoutcheck.runtime.crossrank.distributed`),
    at the batch builder and the replay filler; the exchange starts with the
    first call made after ``init_process_group``. Needs ``parallel_state``.
    """

    ROLES: tuple[str, ...] = wrappers.ROLES

    # --- wrapping ----------------------------------------------------

    def wrap(self, role: str, fn: Callable[..., Any], inputs: Mapping[str, object] | None = None) -> Callable[..., Any]:
        """The checked wrapper of ``fn`` in ``role`` (``producer``, ``batch_builder``, ``replay_filler``, ``offset_helper``).

        Hyphens are accepted for underscores (``batch-builder``). Raises
        `LayoutSpecError` when ``fn``'s signature does not fit the role,
        naming the function, the parameter, what was expected and what was
        found. ``inputs`` says where the role finds what ``fn`` does not
        take under Miles's name (a boundary's ``inputs`` table: a path into
        the call, or a value). Wrapping a wrapper of this checker in the
        same role returns it unchanged. See `layoutcheck.runtime.checker.wrappers`.
        """
        return wrappers.wrap(self, role, fn, inputs)

    def wrap_boundary(self, spec: Any, fn: Callable[..., Any], coordinates: Any = None) -> Callable[..., Any]:
        """The checked wrapper of ``fn`` under a boundary contract (`layoutcheck.runtime.contract.boundary.BoundarySpec`).

        ``coordinates``: where ``tp``, ``cp`` and the CP rank come from
        (`layoutcheck.runtime.checker.boundaries.Coordinates`; default: this
        checker's parallel state, else one rank). Raises `LayoutSpecError`
        when ``fn`` lacks a parameter the contract reads. See
        `layoutcheck.runtime.checker.boundaries`.
        """
        from layoutcheck.runtime.checker.boundaries import Coordinates, wrap_boundary

        return wrap_boundary(self, spec, fn, coordinates or Coordinates(parallel_state=self.parallel_state))

    def wrap_producer(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``wrap("producer", fn)``: O1-O5 on what ``get_rollout_data`` returns."""
        return self.wrap("producer", fn)

    def wrap_batch_builder(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``wrap("batch_builder", fn)``: G1, G2, G6 before ``get_batch`` (fail closed), G3, G4 after."""
        return self.wrap("batch_builder", fn)

    def wrap_replay_filler(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``wrap("replay_filler", fn)``: G1, G2 on each micro-batch before the filler runs, G5 on each tensor."""
        return self.wrap("replay_filler", fn)

    def wrap_offset_helper(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``wrap("offset_helper", fn)``: G4 on the logit ranges it returns."""
        return self.wrap("offset_helper", fn)


def check_rollout_data(
    rollout_data: Mapping[str, Any],
    args: Any,
    *,
    parallel_state: Callable[[], Any] | None = None,
    mode: str = "raise",
    per_sample: bool = True,
    layout: str | None = None,
) -> list[Violation]:
    """One-off O1-O5 on a producer's ``rollout_data``, the layout and ``A`` read from ``args`` (or ``layout``).

    Applies ``mode`` (raise, warn or record) and returns the violations.
    """
    checker = LayoutChecker(mode, parallel_state=parallel_state, per_sample=per_sample, layout=layout)
    return checker.check_rollout_data(rollout_data, args)
