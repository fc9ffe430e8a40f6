"""The tracer in a debug session: one `Tracer` per session, fed by the hooks, entered around the data path only.

When the tracer is on (``tracer`` in ``[tool.layoutcheck.runtime]``,
``LAYOUTCHECK_TRACE``, or the pytest plugin's default), the session builds
every hook with `SessionTracer.wrap`. The tracer shares the checker's
recorder and mode (a violation is one of the session's), and each role adds:

* ``producer``: the run's layout is read from ``args`` before the call (its
  own CP-helper calls are judged against it); after the checker's checks,
  `tag_rollout` tags what it returned with the geometry those checks used
  (layout, ``A``, cp size and rank, scheme, buckets), and the rollout's THD
  stream multiple is ``tp_size * args.data_pad_size_multiplier`` until the
  batch builder is called in it;
* ``batch-builder``: before the call, the micro-batch's samples get a tag
  again where a step between the hooks replaced their tensors (the
  multimodal expansion), and the micro-batch's bucket; the stream multiple
  is the call's ``tp_size * pad_multiplier``; the builder itself (not the
  checks around it) runs inside the tracer, once per micro-batch and
  rollout (later passes lay it out with the same ops: they run untraced);
  `tag_batch` tags what every call returned;
* ``replay-filler``: the same re-tagging for every micro-batch it walks;
  the filler runs inside the tracer;
* ``offset-helper``: the checker's wrapper around `wrap_cp_offsets`;
* ``cp-slicer``, ``response-slicer``: `wrap_slice_with_cp`,
  `wrap_slice_log_prob_with_cp`. They judge calls wherever they are made,
  inside the traced region or not (the model's loss side calls them too):
  a call is a function call, not a torch op, so judging it needs no mode;
* ``loss-function``: runs inside the tracer (a consumer of the batch: a
  re-pad or a batch of mixed ``P`` there is caught at the op);
* a boundary contract (``[runtime.boundaries."pkg.mod:func"]``): after its
  checks, each call's data fields get the tags of their spaces
  (`boundary_tags`), for the traced regions that read them.

Never around a model's forward: the mode is entered by the wrappers of the
batch builder, the replay filler and the loss function only. torch is
imported when the first hook is built, never at activation.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from layoutcheck import geometry
from layoutcheck.errors import LayoutError, LayoutSpecError
from layoutcheck.runtime.contract.meta import compiling
from layoutcheck.runtime.hooks.settings import HookSpec
from layoutcheck.runtime.tracing import tagging

if TYPE_CHECKING:
    from layoutcheck.runtime.checker.layout_checker import LayoutChecker
    from layoutcheck.runtime.tracing.tracer import Tracer

__all__ = ["SessionTracer"]


class SessionTracer:
    """The tracer side of one debug session: its `Tracer` and the wrappers of each role."""

    def __init__(self, checker: LayoutChecker) -> None:
        self.checker = checker
        self._tracer: Tracer | None = None
        self._unit: int | None = None
        """``A`` of the current rollout (from the producer's ``args``)."""
        self._layout: str | None = checker.layout
        self._stream_multiple: int | None = None
        self._stream: tuple[object, int | None] = (None, None)
        """The rollout (the checker's) the THD stream multiple was learnt in, and the multiple."""
        self._laid_out: tuple[object, set[tuple[object, ...]]] = (None, set())
        """Micro-batches the batch builder laid out, traced, in the current rollout (and that rollout)."""
        self._local = threading.local()

    @property
    def tracer(self) -> Tracer:
        """The session's tracer (made on first use: this imports torch, so a torch-free producer never does)."""
        if self._tracer is None:
            from layoutcheck.runtime.tracing.tracer import Tracer

            checker = self.checker
            self._tracer = Tracer(
                checker.mode, enabled=True, checker=checker, layout=self._layout, per_sample=checker.per_sample,
                stream_multiple=self._stream_multiple, scope=self._scope, attribute=self._attribute,
            )
        return self._tracer

    def _attribute(self, total: int, response: int) -> tuple[int | None, int | None]:
        # The sample a helper call's (T, R) belong to, as the checker attributes offset calls: the current
        # micro-batch's first; inside the producer the rollout is not known yet.
        if self.checker._in_producer():
            return None, None
        targets = self.checker._run.offset_targets(total, response)
        return (targets[0].sample, targets[0].micro_batch) if len(targets) == 1 else (None, None)

    @property
    def enabled(self) -> bool:
        """Whether the hooks trace (the tracer is made on demand: until then, on)."""
        return self._tracer is None or self._tracer.enabled

    def _learn(self, *, layout: str | None = None, stream: tuple[object, int | None] | None = None) -> None:
        # What the hooks learn about the run, kept here until the tracer exists. The stream multiple is
        # a rollout's: a replay filler is judged only against one learnt in its own rollout.
        if layout is not None:
            self._layout = layout
        if stream is not None:
            self._stream = stream
        run, multiple = self._stream
        self._stream_multiple = multiple if run is self.checker._run else None
        if self._tracer is not None:
            self._tracer.layout, self._tracer.stream_multiple = self._layout, self._stream_multiple

    def _scope(self) -> tuple[object, int | None]:
        run = self.checker._run  # a new Rollout object per rollout (and per test under the pytest plugin)
        return run, run.index if run.index >= 0 else None

    # --- wrappers -------------------------------------------------------------------------

    def wrap(self, spec: HookSpec, original: Callable[..., Any],
             inputs: Mapping[str, object] | None = None) -> Callable[..., Any]:
        """The hook of ``original`` in ``spec.role``, with the checker's checks where the role has them.

        ``inputs``: where the role finds what ``original`` does not take under
        Miles's names (a boundary's ``inputs``), for the checker and the tags alike.
        """
        checker, role = self.checker, spec.role
        if role == "producer":
            return self._producer(original, checker.wrap(role, original, inputs), inputs)
        tracer = self.tracer
        if role == "batch-builder":
            traced = tracer.wrap(original)

            @functools.wraps(original)
            def layoutcheck_builder(*args: Any, **kwargs: Any) -> Any:
                # a micro-batch laid out again (the next pass over the rollout) runs untraced: see _batch_builder
                if getattr(self._local, "again", False):
                    return tracer.quiet(original, args, kwargs)
                return traced(*args, **kwargs)

            return self._batch_builder(original, checker.wrap(role, layoutcheck_builder, inputs), inputs)
        if role == "replay-filler":
            return self._replay_filler(original, checker.wrap(role, tracer.wrap(original), inputs), inputs)
        if role == "offset-helper":
            return checker.wrap(role, tagging.wrap_cp_offsets(original, tracer=tracer), inputs)
        if role == "cp-slicer":
            return _checked_helper(spec, lambda: tagging.wrap_slice_with_cp(
                original, parallel_state=checker.parallel_state, tracer=tracer))
        if role == "response-slicer":
            return _checked_helper(spec, lambda: tagging.wrap_slice_log_prob_with_cp(
                original, parallel_state=checker.parallel_state, tracer=tracer))
        if role == "loss-function":
            return tracer.wrap(original)
        raise LayoutSpecError(f"unknown role {role!r}")

    def boundary(self, spec: Any, checked: Callable[..., Any], original: Callable[..., Any],
                 coordinates: Any) -> Callable[..., Any]:
        """The checked wrapper of a boundary contract's function, its data fields tagged after each call.

        The tags are `boundary_tags.tag_boundary_call`'s: each field's space,
        the call's CP coordinates and scheme, the samples' lengths as the
        contract binds them.
        """
        from layoutcheck.runtime.tracing.boundary_tags import tag_boundary_call

        binder = _binder(original)
        own = coordinates.over(spec)

        def tag(call: dict[str, Any], result: Any) -> None:
            coords = own.read(call)
            scheme = "zigzag" if spec.scheme is None else geometry.check_scheme(spec.scheme.evaluate(call, coords))
            tag_boundary_call(spec, call, result, coords, scheme)

        @functools.wraps(checked)
        def layoutcheck_traced_boundary(*args: Any, **kwargs: Any) -> Any:
            if not self.enabled or compiling():
                return checked(*args, **kwargs)
            call = binder.arguments(args, kwargs)
            result = checked(*args, **kwargs)
            if call is not None:
                self._glue(spec.target, lambda: tag(call, result))
            return result

        return layoutcheck_traced_boundary

    def _glue(self, where: str, work: Callable[[], Any]) -> Any:
        # The tags the hooks attach are the tracer's business: an error there is one note, never the step's.
        try:
            return work()
        except (LayoutError, Warning):
            raise
        except Exception as err:  # noqa: BLE001
            self.checker._note(f"{where} (the tracer's tags)", err)
            return None

    def _producer(self, original: Callable[..., Any], checked: Callable[..., Any],
                 inputs: Mapping[str, object] | None = None) -> Callable[..., Any]:
        binder = _binder(original, inputs)
        where = getattr(original, "__name__", "producer")

        @functools.wraps(checked)
        def layoutcheck_traced_producer(*args: Any, **kwargs: Any) -> Any:
            if not self.enabled or compiling():
                return checked(*args, **kwargs)
            call = binder.arguments(args, kwargs)
            lay = None if call is None else self._glue(where, lambda: self._before_producer(call))
            result = checked(*args, **kwargs)
            if lay is not None:
                self._glue(where, lambda: self._tag_rollout(result, *lay))
            return result

        return layoutcheck_traced_producer

    def _before_producer(self, call: dict[str, Any]) -> tuple[Any, Any]:
        checker = self.checker
        args = checker.adapter.producer_args(call)
        par = checker._parallel()
        lay = checker.adapter.layout(args, par, layout=checker.layout)
        self._learn(layout=lay.qkv_format)
        self._unit = lay.unit.value
        return par, lay, getattr(args, "data_pad_size_multiplier", None)

    def _tag_rollout(self, result: Any, par: Any, lay: Any, multiplier: object) -> None:
        # The checks made the new rollout: what the batch builder is called with (Miles passes
        # args.data_pad_size_multiplier) is the THD stream multiple until it is called in this rollout
        # (the replay fillers run first)
        self._learn(stream=(self.checker._run, par.tp_size * multiplier if type(multiplier) is int else None))
        if lay.qkv_format is None:
            return  # the checker has said so in a note
        rollout = self.checker.adapter.producer_rollout(result)
        tagging.tag_rollout(rollout, qkv_format=lay.qkv_format, cp_size=par.cp_size, cp_rank=par.cp_rank,
                            scheme=lay.scheme, unit=lay.unit, buckets=self.checker.buckets)

    def _batch_builder(self, original: Callable[..., Any], checked: Callable[..., Any],
                 inputs: Mapping[str, object] | None = None) -> Callable[..., Any]:
        binder = _binder(original, inputs)
        where = getattr(original, "__name__", "batch builder")

        @functools.wraps(checked)
        def layoutcheck_traced_batch(*args: Any, **kwargs: Any) -> Any:
            if not self.enabled or compiling():
                return checked(*args, **kwargs)
            call = binder.arguments(args, kwargs)
            state = None if call is None else self._glue(where, lambda: self._before_batch(call))
            # Each pass over the rollout (log-probs, training, each virtual pipeline stage) lays micro-batch k
            # out with the same ops: traced once per rollout, as the checker judges it once; every pass's
            # output is tagged all the same (the loss function reads it).
            self._local.again = state is not None and not self._first_layout(state, call)
            try:
                batch = checked(*args, **kwargs)
            finally:
                self._local.again = False
            if state is not None:
                self._glue(where, lambda: self._tag_batch(batch, *state))
            return batch

        return layoutcheck_traced_batch

    def _first_layout(self, state: tuple[Any, ...], call: dict[str, Any]) -> bool:
        k, samples, layout, par, scheme = state
        if k is None or samples is None:
            return True
        run = self.checker._run
        if self._laid_out[0] is not run:
            self._laid_out = (run, set())
        key = (k, tuple(samples), layout, scheme, par, call.get("pad_multiplier"), call.get("get_position_ids"))
        seen = self._laid_out[1]
        if key in seen:
            return False
        seen.add(key)
        return True

    def _before_batch(self, call: dict[str, Any]) -> tuple[Any, ...]:
        checker = self.checker
        view = checker.adapter.batch_call(call)
        par = checker._parallel()
        layout = checker.layout or checker._run.layout or view.qkv_format
        self._learn(layout=None if self._layout is not None else layout,
                    stream=(checker._run, par.tp_size * view.pad_multiplier))
        k = checker.adapter.next_micro_batch(view.iterator)
        samples = checker.adapter.micro_batch_samples(view.iterator, k)
        rollout = checker.adapter.rollout_of(view.iterator)
        self._retag(rollout, samples, layout, par, view.scheme, self._bucket(rollout, samples or [], layout))
        return k, samples, layout, par, view.scheme

    def _tag_batch(self, batch: Any, k: int | None, samples: list[int] | None, layout: str, par: Any,
                   scheme: str) -> None:
        if isinstance(batch, dict):
            tagging.tag_batch(batch, micro_batch=k, samples=samples, qkv_format=layout, cp_size=par.cp_size,
                              cp_rank=par.cp_rank, scheme=scheme, buckets=self.checker.buckets)

    def _replay_filler(self, original: Callable[..., Any], checked: Callable[..., Any],
                 inputs: Mapping[str, object] | None = None) -> Callable[..., Any]:
        binder = _binder(original, inputs)
        where = getattr(original, "__name__", "replay filler")

        @functools.wraps(checked)
        def layoutcheck_traced_filler(*args: Any, **kwargs: Any) -> Any:
            if self.enabled and not compiling():
                call = binder.arguments(args, kwargs)
                if call is not None:
                    self._glue(where, lambda: self._before_filler(call))
            return checked(*args, **kwargs)

        return layoutcheck_traced_filler

    def _before_filler(self, call: dict[str, Any]) -> None:
        checker = self.checker
        self._learn()  # the stream multiple of this rollout, if one was learnt in it
        view = checker.adapter.replay_call(call)
        par = checker._parallel()
        lay = checker.adapter.layout(view.args, par, layout=checker.layout)
        layout = lay.qkv_format or checker._run.layout
        if layout is None:
            return
        groups: dict[int | None, list[int]] = {}  # the filler walks the schedule from its start: by bucket
        for k in range(view.micro_batches):
            samples = checker.adapter.micro_batch_samples(view.iterator, k) or []
            groups.setdefault(self._bucket(view.rollout_data, samples, layout), []).extend(samples)
        for bucket, samples in groups.items():
            self._retag(view.rollout_data, samples, layout, par, lay.scheme, bucket)

    def _bucket(self, rollout: Any, samples: list[int], layout: str) -> int | None:
        # With buckets, a BSHD micro-batch is laid out with the smallest bucket that holds its longest P (G6).
        buckets = self.checker.buckets
        if buckets is None or layout != "bshd" or not samples:
            return None
        lens = rollout.get("max_seq_lens")
        padded = [lens[i] for i in samples if i < len(lens)] if isinstance(lens, (list, tuple)) else []
        if not padded or not all(type(p) is int for p in padded) or max(padded) > buckets[-1]:
            return None
        return geometry.resolve_bucket(max(padded), buckets)

    def _retag(self, rollout: Any, samples: list[int] | None, layout: str, par: Any, scheme: str,
               bucket: int | None) -> None:
        # Tensors a step between the hooks replaced get a tag again (current lengths, the owner's P);
        # with buckets, every sample of the micro-batch gets the micro-batch's bucket.
        if samples and rollout:
            tagging.tag_rollout(rollout, qkv_format=layout, cp_size=par.cp_size, cp_rank=par.cp_rank, scheme=scheme,
                                unit=self._unit, buckets=self.checker.buckets, indices=samples, missing_only=True,
                                bucket=bucket)


def _binder(fn: Callable[..., Any], inputs: Mapping[str, object] | None = None) -> Any:
    from layoutcheck.runtime.checker.wrappers import Binder

    return Binder(inspect.signature(fn), inputs)


def _checked_helper(spec: HookSpec, make: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
    # A helper the wrapper cannot read (no parameters) is a bad hook, named as the checker names one.
    try:
        return make()
    except (TypeError, ValueError) as err:
        raise LayoutSpecError(f"cannot hook `{spec.target}` ({spec.role}): {err}") from None


