"""Where tags come from: the producer's rollout, the batch builder's output, the trainer's CP helpers.

What the hooks call (plain functions, no state):

* `tag_rollout` after the producer (``get_rollout_data``) returned: every
  per-sample tensor of the rollout gets its sample's geometry (``T``,
  ``R``, ``P``, ``A``, the CP size and rank, the layout);
* `tag_batch` after the batch builder (``get_batch``): its laid-out tensors
  get the micro-batch's geometry (``P``, the local length, the rank);
* `wrap_slice_with_cp` / `wrap_slice_log_prob_with_cp`: the trainer's CP
  helpers, wrapped so that a call on a tagged tensor is checked against its
  tag (a ``P``, a layout or another sample's lengths that differ) and its
  result records the rank and the local length. Outside an active tracer
  the wrappers only call the helper.

Every length comes from `layoutcheck.geometry`; tensors are read by shape only.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from layoutcheck import geometry
from layoutcheck.errors import LayoutSpecError, Violation
from layoutcheck.runtime.tracing import propagation, space_rules
from layoutcheck.runtime.tracing.findings import violation
from layoutcheck.runtime.contract.adapters import MilesAdapter
from layoutcheck.runtime.contract.common import REPLAY_FIELDS, RESPONSE_FIELDS, SHAPE_FIELDS, UNSLICED_RESPONSE_FIELDS
from layoutcheck.runtime.contract.common import bucket_tuple, parallel
from layoutcheck.runtime.contract.meta import compiling, metadata_only, shape_of
from layoutcheck.runtime.tracing.tags import Tag, geometry_of, set_tag, tag

__all__ = [
    "tag_batch",
    "tag_rollout",
    "wrap_cp_offsets",
    "wrap_slice_log_prob_with_cp",
    "wrap_slice_with_cp",
]

F = TypeVar("F", bound=Callable[..., Any])

ROLLOUT_RESPONSE_FIELDS: tuple[str, ...] = (*RESPONSE_FIELDS, "opd_reverse_kl")
"""Response fields the producer CP-slices (``R_i`` entries before slicing)."""

BATCH_SPACES: dict[str, dict[str, object]] = {
    "tokens": {},
    "full_loss_masks": {"shift": 1},
    "position_ids": {"positions": "global"},
}
"""What the batch builder's laid-out fields hold beyond their geometry (`Tag.shift`, `Tag.positions`).

The loss mask is aligned to the logits (Miles pads each sample's response
mask by ``(p - 1, 1)``: index ``t`` holds the mask of token ``t + 1``);
position ids hold positions in the whole sequence on every CP rank. Every
field is padded on the right.
"""


def _int(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _entry(values: object, i: int) -> object:
    if isinstance(values, (list, tuple)) and i < len(values):
        return values[i]
    return None


def _is_tensor(value: object) -> bool:
    # torch tensors (and arrays) have a shape; lists of floats are not tagged.
    with metadata_only():
        return not isinstance(value, (list, tuple)) and shape_of(value) is not None


def tag_rollout(
    rollout_data: Mapping[str, Any],
    *,
    qkv_format: str = "bshd",
    cp_size: int = 1,
    cp_rank: int = 0,
    scheme: str = "zigzag",
    unit: int | geometry.AlignmentUnit | None = None,
    buckets: Sequence[int] | None = None,
    samples: Sequence[int] | None = None,
    response_fields: Iterable[str] = ROLLOUT_RESPONSE_FIELDS,
    unsliced_response_fields: Iterable[str] = UNSLICED_RESPONSE_FIELDS,
    replay_fields: Iterable[str] = REPLAY_FIELDS,
    indices: Iterable[int] | None = None,
    missing_only: bool = False,
    bucket: int | None = None,
) -> int:
    """Tag every per-sample tensor of a producer's ``rollout_data`` with its sample's geometry; return how many.

    Per sample ``i``: ``T`` from ``total_lengths[i]`` (else the token count),
    ``R`` from ``response_lengths[i]``, ``P`` from ``max_seq_lens[i]`` under
    BSHD (the packed length ``round_up(T, 2 cp)`` under THD), its bucket
    when ``buckets`` are given. ``tokens`` are token-space (``T``
    positions), ``loss_masks`` response-space (``R`` entries), the
    ``response_fields`` response-space and already CP-sliced for
    ``cp_rank`` when ``cp_size > 1`` (the producer slices them with the
    zigzag rule), the ``replay_fields`` replay rows (``T - 1``). ``samples``
    are the ids the tags carry (default ``0..n-1``). Entries that are not
    tensors, or whose lengths are not Python ints, are skipped: the checks
    report those.

    Between the hooks a step may replace a sample's tensors (the multimodal
    expansion rewrites ``tokens``, ``total_lengths`` and replay rows after the
    producer): a consumer hook calls this again with ``indices`` (the
    samples of its micro-batch) and ``missing_only``, so that only tensors
    without a tag get one, from the rollout's *current* lengths and the
    owner's ``P``. ``bucket`` is the micro-batch's bucket (the smallest one
    that holds its longest ``P``): every tag of those samples gets it.
    """
    cp, r = parallel(cp_size, cp_rank, qkv_format, scheme)
    bucket_list = bucket_tuple(buckets)
    a = unit.value if isinstance(unit, geometry.AlignmentUnit) else _int(unit)
    tokens = rollout_data.get("tokens")
    if not isinstance(tokens, (list, tuple)):
        return 0
    ids = None if samples is None else list(samples)  # None: sample i is id i
    if ids is not None and len(ids) != len(tokens):
        raise LayoutSpecError(f"`samples` has {len(ids)} ids for {len(tokens)} samples")
    # each field looked up once: a consumer hook calls this for one micro-batch of a long rollout
    fields = [(rollout_data.get(k), k, "response", cp > 1) for k in response_fields]
    fields += [(rollout_data.get(k), k, "response", False) for k in unsliced_response_fields]
    fields += [(rollout_data.get(k), k, "replay", False) for k in replay_fields]
    count = 0
    for i in range(len(tokens)) if indices is None else indices:
        if not 0 <= i < len(tokens):
            continue
        token_tensor = tokens[i]
        values = [(token_tensor, "tokens", "tokens", False)]
        values += [(_entry(column, i), k, space, sliced) for column, k, space, sliced in fields]
        if missing_only:
            values = [v for v in values if v[0] is not None and not _retagged(v[0], bucket)]
            if not values:
                continue
        base = _sample_tag(rollout_data, i, token_tensor, i if ids is None else ids[i], qkv_format, cp, scheme, a,
                           bucket_list)
        if base is None:
            continue
        if bucket is not None:
            base = base.evolve(bucket=bucket)
        for value, key, space, sliced in values:
            if value is None or not _is_tensor(value):
                continue
            t = base if key == "tokens" else base.evolve(field=key, space=space)
            if sliced:
                with metadata_only():
                    entries = shape_of(value)[0] if shape_of(value) else 0  # type: ignore[index]
                t = t.evolve(cp_rank=r, local=entries, scheme="zigzag")
            tag(value, t)
            count += 1
    return count


def _retagged(value: object, bucket: int | None) -> bool:
    # True when the tensor keeps its tag (it has one with this bucket, or no bucket is asked for).
    g = geometry_of(value)
    if g is None:
        return False
    if bucket is None or g.bucket == bucket:
        return True
    tag(value, g.evolve(bucket=bucket))
    return True


def _sample_tag(rollout_data: Mapping[str, Any], i: int, tokens: object, sample: int, qkv_format: str, cp: int,
                scheme: str, unit: int | None, buckets: tuple[int, ...] | None) -> Tag | None:
    total = _int(_entry(rollout_data.get("total_lengths"), i))
    if total is None and _is_tensor(tokens):
        with metadata_only():
            shape = shape_of(tokens)
        total = shape[0] if shape else None
    if total is None:
        return None
    response = _int(_entry(rollout_data.get("response_lengths"), i))
    if response is not None and response > total:
        response = None
    if qkv_format == "bshd":
        padded = _int(_entry(rollout_data.get("max_seq_lens"), i))
        if padded is None:
            return None
        bucket = None
        if buckets is not None and padded <= buckets[-1]:
            bucket = geometry.resolve_bucket(padded, buckets)
    else:
        padded, bucket = geometry.packed_sample_length(total, cp), None
    return Tag(field="tokens", padded=padded, sample=sample, total=total, response=response, unit=unit,
               bucket=bucket, layout=qkv_format, cp_size=cp, scheme=scheme)


def tag_batch(
    batch: Mapping[str, Any],
    *,
    micro_batch: int | None = None,
    samples: Sequence[int] | None = None,
    qkv_format: str = "bshd",
    cp_size: int = 1,
    cp_rank: int = 0,
    scheme: str = "zigzag",
    padded: int | None = None,
    buckets: Sequence[int] | None = None,
    fields: Iterable[str] = SHAPE_FIELDS,
) -> int:
    """Tag a batch builder's laid-out tensors with the micro-batch geometry; return how many.

    The tensors are ``fields`` (default ``tokens``, ``full_loss_masks``, ``position_ids``).

    BSHD tensors are ``[B, L]``: ``P`` is ``padded`` when given, else the
    padded length the local length ``L`` comes from (`geometry.padded_for_local_length`,
    preferring the batch's ``max_seq_lens`` and the ``buckets``). THD tensors
    are ``[1, N]`` streams. Either way the tag records the rank and ``L``
    (the local length) on the sequence dimension (dim 1), so a later re-pad
    or a batch of another ``P`` is flagged.
    """
    cp, r = parallel(cp_size, cp_rank, qkv_format, scheme)
    bucket_list = bucket_tuple(buckets)
    ids = tuple(samples) if samples is not None else ()
    count = 0
    for key in fields:
        value = batch.get(key)
        if value is None or not _is_tensor(value):
            continue
        with metadata_only():
            shape = shape_of(value)
        if shape is None or len(shape) < 2:
            continue
        local = int(shape[1])
        p: int | None = None
        bucket = None
        if qkv_format == "bshd":
            p = padded
            if p is None:
                candidates = set(bucket_list or ())
                candidates.update(v for v in batch.get("max_seq_lens") or () if _int(v) is not None)
                p = geometry.padded_for_local_length(local, cp, scheme, candidates=candidates)
            bucket = p if bucket_list is not None and p in bucket_list else None
        tag(value, Tag(field=key, padded=p, bucket=bucket, layout=qkv_format, cp_size=cp, scheme=scheme,
                       cp_rank=r, local=local, micro_batch=micro_batch, samples=ids, seq_dim=1, pad_side="right",
                       **BATCH_SPACES.get(key, {})))  # type: ignore[arg-type]
        count += 1
    return count


# --- the trainer's CP helpers -------------------------------------------------------------------

Check = Callable[[Any, dict[str, Any], Any], "Callable[[Any], None] | None"]
"""``(tracer, bound arguments, tensor) -> after(out)``: flags a call, then tags the helper's result."""


_INSIDE = threading.local()
"""Per thread: a wrapped CP helper is running (the helpers call each other: the outer call is judged)."""
_TRACER = "layoutcheck.runtime.tracing.tracer"


def _tracer_module() -> Any:
    # it imports torch: loaded on the first wrapped call (the helper takes tensors, so torch is there)
    return importlib.import_module(_TRACER)


def _rank(state: Any, getter: Callable[[], Any] | None, g: Tag | None) -> tuple[int, int | None]:
    if state is None and getter is not None:
        state = getter()
    if state is None:
        return (g.cp_size if g is not None else 1), None
    cp = getattr(state, "cp", None)
    size, rank = getattr(cp, "size", None), getattr(cp, "rank", None)
    if type(size) is int and type(rank) is int and 0 <= rank < size:  # the common case, read as the adapter reads it
        return size, rank
    p = MilesAdapter().parallel(lambda: state)
    return p.cp_size, p.cp_rank


def _helper(fn: F, op: str, check: Check, judge: Any = None) -> F:
    # The shared shape of the CP-helper wrappers: outside an active tracer
    # (and without a `judge`, the tracer of a debug session that judges
    # helper calls wherever they are made), only the call; inside, `check`
    # (torch-function handling off) flags the call and says how to tag the
    # result, the helper runs untraced (it tags its own result), and an error
    # of the checking itself never breaks the call (a note, as in the
    # tracer's mode). A helper called by another wrapped helper is the
    # outer call's business; while torch.compile traces, only the call.
    from layoutcheck.runtime.checker.wrappers import Binder

    signature = inspect.signature(fn)
    if not signature.parameters:
        raise LayoutSpecError(f"{getattr(fn, '__qualname__', fn)} takes no tensor argument")
    first = next(iter(signature.parameters))
    binder = Binder(signature)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if compiling() or getattr(_INSIDE, "on", False):
            return fn(*args, **kwargs)
        module = sys.modules.get(_TRACER) or _tracer_module()  # torch is loaded: the helper takes tensors
        tracer = module.active_tracer()
        if tracer is None and judge is not None and judge.judging:
            tracer = judge
        if tracer is None or (tracer.layout is None and geometry_of(args[0] if args else kwargs.get(first)) is None):
            return fn(*args, **kwargs)  # nothing to judge the call against
        call = binder.arguments(args, kwargs)
        if call is None:
            return fn(*args, **kwargs)  # the helper raises its own error
        _INSIDE.on = True
        try:
            return module.checked(tracer, op, check, (tracer, call, call.get(first)), tracer.run_untraced,
                                  (fn, args, kwargs), {})
        finally:
            _INSIDE.on = False

    return wrapper  # type: ignore[return-value]


def _run_layout_problem(tracer: Any, op: str, field: str, qkv_format: object, padded: object, padded_name: str,
                        invariant: str, call: dict[str, Any]) -> list[Violation]:
    # A call on an untagged value: judged against the run's layout (`Tracer(layout=...)`), if known. The
    # sample is the one the call's (T, R) belong to, when the tracer can tell (`Tracer.attribute`).
    layout = tracer.layout
    if layout is None:
        return []
    hint = f"pass the run's qkv_format={layout!r}" + (f" and {padded_name}=P (the sample's `max_seq_lens` entry)"
                                                      if layout == "bshd" else "") + " to every CP helper call"
    if qkv_format != layout:
        problem = f"{op} is called with the {qkv_format} rule in a {layout} run"
        actual, expected = f"qkv_format={qkv_format!r}", f"qkv_format={layout!r}"
    elif layout == "bshd" and padded is None:
        problem = f"{op} is called without {padded_name} in a bshd run: it falls back to the packed rule"
        actual, expected = f"{padded_name}=None", f"{padded_name}=P"
    else:
        return []
    total, response = _int(call.get("total_length")), _int(call.get("response_length"))
    sizes: dict[str, object] = {"T": total, "R": response} if total is not None and response is not None else {}
    sizes["layout"] = layout
    sample, micro_batch = None, None
    if tracer.attribute is not None and "T" in sizes:
        sample, micro_batch = tracer.attribute(total, response)
        if sample is None:  # the sample is not known yet (the producer is slicing): its lengths say which
            problem += f" (for the sample with T={total}, R={response})"
    return [Violation(invariant, "", field, problem, actual=actual, expected=expected, hint=hint, sample=sample,
                      micro_batch=micro_batch, sizes=sizes)]


def wrap_slice_with_cp(fn: F, *, parallel_state: Callable[[], Any] | None = None, tracer: Any = None) -> F:
    """Wrap the trainer's ``slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None, parallel_state=None)``.

    Inside an active tracer, on a tagged tensor: flags a layout other than
    the sample's (``qkv_format``), a ``max_seq_len`` that is not the
    sample's ``P`` (or bucket; G3, G6, G2 when it truncates), a tensor
    already CP-sliced, or response entries given to the token rule (G4);
    then runs the helper untraced and tags its result with the rank and the
    local length. On an untagged tensor, a ``qkv_format`` other than the
    tracer's ``layout`` is flagged (G3). The rank comes from the call's
    ``parallel_state``, else from ``parallel_state()`` given here (the
    trainer's ``get_parallel_state``). Arguments are read by name from the
    helper's own signature; the call passes through unchanged. ``tracer``
    (a session's): judges calls made outside any active tracer too.
    """

    def check(tracer: Any, call: dict[str, Any], tensor: Any) -> Callable[[Any], None] | None:
        qkv_format = call.get("qkv_format", "thd")
        g = geometry_of(tensor)
        if g is None:
            problems = _run_layout_problem(tracer, "slice_with_cp", "tokens", qkv_format, call.get("max_seq_len"),
                                           "max_seq_len", "G3", call)
            if problems:
                tracer.report(problems, "slice_with_cp")
            return None
        shape = shape_of(tensor)
        size = shape[g.seq_dim] if shape and g.seq_dim < len(shape) else 0
        problems = _slice_problems(g, size, qkv_format, call.get("max_seq_len"), tracer.per_sample)
        if problems:
            tracer.report(problems, "slice_with_cp")
        if g.space == "response":
            return None
        cp, r = _rank(call.get("parallel_state"), parallel_state, g)
        scheme = "allgather" if call.get("allgather_cp") else "zigzag"

        def after(out: Any) -> None:
            if out is tensor:  # nothing sliced (cp == 1): the input keeps its own tag
                return
            out_shape = shape_of(out)
            if out_shape is not None and g.seq_dim < len(out_shape):
                rank = r if r is not None else g.cp_rank
                side = g.pad_side if g.pad_side is not None or size >= (g.length or 0) else "right"  # it pads right
                set_tag(out, g.evolve(cp_size=cp, cp_rank=rank, local=int(out_shape[g.seq_dim]),
                                      scheme=scheme if cp > 1 else g.scheme, window=None, pad_side=side))

        return after

    return _helper(fn, "slice_with_cp", check, tracer)


def _slice_problems(g: Tag, size: int, qkv_format: object, max_seq_len: object,
                    per_sample: bool | None = None) -> list[Violation]:
    if g.space == "response":
        return [violation(
            "G4", g, f"lays out response entries of {g.describe()} with the token rule",
            actual="slice_with_cp", expected="slice_log_prob_with_cp (response offsets)",
            hint="slice response fields with slice_log_prob_with_cp, or align them to token positions first",
        )]
    if g.cp_local:
        return [space_rules.cp_again(g, size, action="CP-slices", given="with slice_with_cp")]
    # A tensor a CP helper laid out at cp=1 holds the whole sample (padded to P under BSHD): the helper only pads,
    # so slicing it again with the same layout changes nothing. What the data hold is judged below, as for any
    # unsliced sample: another layout, or another max_seq_len than the positions it holds.
    if qkv_format != g.layout:
        return [violation(
            "G3", g, f"slices {g.describe()} with the {qkv_format} rule, but the sample is laid out {g.layout}",
            actual=f"qkv_format={qkv_format!r}", expected=f"qkv_format={g.layout!r}",
            hint="pass the trainer's qkv_format (and max_seq_len=P under bshd) to every CP helper call",
        )]
    if qkv_format != "bshd" or type(max_seq_len) is not int:
        return []
    problem = propagation.length_problem(g, size, max_seq_len, action="CP-slices", allowed=[g.length or 0],
                                         given=f"with max_seq_len={max_seq_len}", per_sample=per_sample)
    return [problem] if problem else []


def wrap_slice_log_prob_with_cp(fn: F, *, parallel_state: Callable[[], Any] | None = None, tracer: Any = None) -> F:
    """Wrap the trainer's response-field CP slice.

    Its signature: ``slice_log_prob_with_cp(log_prob, total_length, response_length,
    qkv_format="thd", max_token_len=None)``.

    Inside an active tracer, on a tagged response field: flags lengths of
    another sample (``total_length``/``response_length`` not the tag's ``T``
    and ``R``), another layout, a ``max_token_len`` (or ``max_seq_len``) that
    is not the sample's ``P``, or a field already CP-sliced (all G4); then
    runs the helper untraced and tags its result with the rank and the count
    it holds. On an untagged value (the real producer slices lists of
    floats), a ``qkv_format`` other than the tracer's ``layout``, or a BSHD
    call without the padded length, is flagged (G4). ``tracer``: as for
    `wrap_slice_with_cp`.
    """

    def check(tracer: Any, call: dict[str, Any], log_prob: Any) -> Callable[[Any], None] | None:
        padded_name = "max_token_len" if "max_token_len" in call else "max_seq_len"
        padded = call.get(padded_name)
        qkv_format = call.get("qkv_format", "thd")
        g = None if isinstance(log_prob, (list, tuple)) else geometry_of(log_prob)
        if g is None:
            problems = _run_layout_problem(tracer, "slice_log_prob_with_cp", "response field", qkv_format, padded,
                                           padded_name, "G4", call)
            if problems:
                tracer.report(problems, "slice_log_prob_with_cp")
            return None
        problems = _log_prob_problems(g, call.get("total_length"), call.get("response_length"), qkv_format, padded)
        if problems:
            tracer.report(problems, "slice_log_prob_with_cp")
        cp, r = _rank(None, parallel_state, g)

        def after(out: Any) -> None:
            out_shape = shape_of(out)
            if out is not log_prob and out_shape and not isinstance(out, (list, tuple)):
                set_tag(out, g.evolve(cp_size=cp, cp_rank=r if r is not None else g.cp_rank, local=int(out_shape[0]),
                                  scheme="zigzag", window=None))

        return after

    return _helper(fn, "slice_log_prob_with_cp", check, tracer)


def wrap_cp_offsets(fn: F, *, tracer: Any = None) -> F:
    """Wrap the trainer's CP offset helper.

    ``get_logits_and_tokens_offset_with_cp(total_length, response_length,
    qkv_format="thd", max_seq_len=None, cp_rank=None, cp_size=None)``, or
    any CP helper with ``qkv_format`` and ``max_seq_len`` parameters
    (``all_gather_with_cp``). Inside an active tracer that knows the run's
    layout, a call with another ``qkv_format``, or a BSHD call without
    ``max_seq_len`` (the packed rule, silently), is flagged (G4) at the call.
    ``tracer``: as for `wrap_slice_with_cp`.
    """
    op = getattr(fn, "__name__", "the CP offset helper")

    def check(tracer: Any, call: dict[str, Any], first: Any) -> None:
        problems = _run_layout_problem(tracer, op, "logit offsets", call.get("qkv_format", "thd"),
                                       call.get("max_seq_len"), "max_seq_len", "G4", call)
        if problems:
            tracer.report(problems, op)

    return _helper(fn, op, check, tracer)


def _log_prob_problems(g: Tag, total: object, response: object, qkv_format: object, padded: object) -> list[Violation]:
    if g.space != "response":
        return []
    hint = "slice each response field with its own sample's total_length, response_length and max_seq_lens entry"
    if g.cp_local:
        return [space_rules.cp_again(g, g.local or 0, action="CP-slices", given="with slice_log_prob_with_cp")]
    # sliced at cp=1 (`g.sliced`, not CP-local): every entry is still there, and a second slice keeps them all;
    # the lengths and the layout it is called with are judged as for an unsliced field
    seen = {"T": total, "R": response}
    want = {"T": g.total, "R": g.response}
    if qkv_format == "bshd":
        seen["P"], want["P"] = padded, g.length
    if qkv_format != g.layout:
        return [violation(
            "G4", g, f"slices {g.describe()} with the {qkv_format} rule, but the sample is laid out {g.layout}",
            actual=f"qkv_format={qkv_format!r}", expected=f"qkv_format={g.layout!r}, max_token_len=P", hint=hint,
        )]
    wrong = {k: v for k, v in seen.items() if want[k] is not None and v != want[k]}
    if not wrong:
        return []
    text = ", ".join(f"{k}={v}" for k, v in seen.items())
    return [violation(
        "G4", g, f"slices {g.describe()} with the geometry of another sample ({text})",
        actual=text, expected=", ".join(f"{k}={v}" for k, v in want.items()), hint=hint,
    )]
