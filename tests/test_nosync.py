"""The runtime checks never synchronise a GPU: they read shapes, never values.

On CPU there is no sync to observe (``torch.cuda.set_sync_debug_mode`` exists
on CUDA builds only), so a `syncguard.SyncGuard` makes would-be syncs fail
loudly (a dispatch-level deny list, the value-reading methods, and any
call through ``__torch_function__``), and the same checks run on
``FakeTensorMode`` CUDA tensors, where reading a value raises by itself.

The guard enforces only inside the checker's own code: the wrappers are
wrapped in ``guard.on`` and the pipeline functions they call in ``guard.off``
(for a debug session, `syncguard.debug_mode_windows`), so the pipeline
(which may read values) runs unguarded.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import minitrainer.actor as actor
import pytest
import torch
from minitrainer.args import make_args
from bugcases import CASES as BUG_CASES
from minitrainer.bugs import BUG_NAMES
from minitrainer.parallel import get_parallel_state, parallel_state
from minitrainer.rollout import make_rollout_ref
from syncguard import SyncError, SyncGuard, Windows, debug_mode_windows, denying

from layoutcheck import (
    LayoutChecker,
    LayoutSpecError,
    LayoutWarning,
    Violation,
    check_batch,
    check_micro_batch,
    check_replay,
    check_response_offsets,
    check_rollout,
    geometry,
)
from layoutcheck.demo import pipeline_bindings
from layoutcheck.runtime.contract import meta, owner

@pytest.fixture
def guard() -> Iterator[SyncGuard]:
    with denying() as guard:
        yield guard


# --- the guard catches a syncing check ------------------------------------------

SYNCING_CHECKS = {
    "item": lambda t: t.sum().item(),
    "item on a 1-element tensor": lambda t: t[:1].item(),
    "tolist": lambda t: t.tolist(),
    "numpy": lambda t: t.numpy(),
    "cpu": lambda t: t.cpu(),
    "bool of a comparison": lambda t: bool((t > 0).all()),
    "if on a tensor": lambda t: 1 if t.any() else 0,
    "int of a tensor": lambda t: int(t.max()),
    "nonzero": lambda t: t.nonzero(),
    "boolean mask": lambda t: t[t > 0],
    "masked_select": lambda t: torch.masked_select(t, t > 0),
    "unique": lambda t: torch.unique(t),
}


@pytest.mark.parametrize("name", SYNCING_CHECKS)
def test_guard_catches_a_syncing_check(guard, name):
    t = torch.arange(6)
    with guard.enforce(), pytest.raises(SyncError):
        SYNCING_CHECKS[name](t)
    with guard.enforce(), pytest.raises(SyncError), meta.metadata_only():  # also with torch-function handling off
        SYNCING_CHECKS[name](t)


def test_guard_allows_metadata(guard):
    t = torch.arange(6).reshape(2, 3)
    with guard.enforce(), meta.metadata_only():
        assert (meta.shape_of(t), meta.numel(t), meta.count(t), t.dim(), t.numel()) == ((2, 3), 6, 2, 2, 6)


def test_guard_fails_a_real_check_that_calls_item(guard, monkeypatch):
    # The same guard around check_rollout, with one helper sabotaged to read a value.
    data = {"tokens": [torch.ones(300, dtype=torch.long)], "total_lengths": [300], "max_seq_lens": [384]}
    with guard.enforce():
        assert check_rollout(data, unit=128) == []
    numel = owner.numel
    monkeypatch.setattr(owner, "numel", lambda value: numel(value) + 0 * value.item())
    with guard.enforce(), pytest.raises(SyncError, match="Tensor.item"):
        check_rollout(data, unit=128)


# --- every check on the pipeline, correct and buggy ---------------------------------

LENGTHS = [300, 130, 700, 1000, 250, 900, 2000, 129]
BUG_ARGS = {
    "mixed_padded_lengths": {"micro_batch_size": 2},
    "replay_thd_pad_multiplier": {"qkv_format": "thd"},
    "alignment_max_not_lcm": {"compress_ratios": [3]},
    "wrong_bucket": {"buckets": (512, 1024, 2048), "micro_batch_size": 2},  # samples 4 and 1: P = 256, 1024
}
CASES = [
    ("correct", {"qkv_format": "bshd", "micro_batch_size": 2}),
    ("correct", {"qkv_format": "thd", "micro_batch_size": 2, "allgather_cp": True}),
    ("correct", {"qkv_format": "bshd", "sequence_parallel": True}),
    ("correct", {"qkv_format": "bshd", "micro_batch_size": 2, "buckets": (512, 1024, 2048)}),
    *((bug, {"bugs": {bug}, **BUG_ARGS.get(bug, {})}) for bug in BUG_NAMES if not BUG_CASES[bug].tracer),
]


def guarded_checker(guard: SyncGuard, monkeypatch, buckets=None) -> LayoutChecker:
    """Bind checked wrappers into minitrainer: checker code enforced, pipeline code not."""
    checker = LayoutChecker("record", parallel_state=get_parallel_state, buckets=buckets)
    on, off = guard.on, guard.off

    def make(role, original):
        inner = original
        if role == "replay_filler":
            @functools.wraps(original)
            def filler(**kwargs):
                # the checker's register wrapper is checker code: enforce inside it
                kwargs["register_replay_list_func"] = on(kwargs["register_replay_list_func"])
                return original(**kwargs)

            inner = filler
        return on(checker.wrap(role, off(inner)))

    for module, name, wrapper in pipeline_bindings(make):
        monkeypatch.setattr(module, name, wrapper)
    monkeypatch.setattr(actor, "record_replay", off(actor.record_replay))
    return checker


@pytest.mark.parametrize(("name", "options"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_checks_on_the_pipeline_issue_no_sync(guard, monkeypatch, name, options):
    checker = guarded_checker(guard, monkeypatch, buckets=options.get("buckets"))
    ref = make_rollout_ref(LENGTHS, seed=1, media={0: 193} if name == "stale_lengths_after_expansion" else None)
    options = dict(options)
    tp = 2 if options.get("sequence_parallel") else 1
    for r in range(2):
        with parallel_state(tp_size=tp, cp_size=2, cp_rank=r):
            result = actor.train_step(make_args(**options), ref)
    assert guard.entered > 0 and checker.checked["micro-batches"] > 0
    assert bool(checker.violations) == (name != "correct"), checker.summary()
    assert checker.notes == [] and checker.checked["offset calls"] > 0
    # and every public check, called directly on the same (last rank's) data
    run_every_check(guard, result, make_args(**options), tp)


def run_every_check(guard: SyncGuard, result, args, tp: int) -> None:
    """Call each public check under enforcement (the test's own set-up runs unguarded)."""
    fmt, scheme = args.qkv_format, "allgather" if args.allgather_cp else "zigzag"
    ratio = max(args.compress_ratios) if args.compress_ratios else None
    unit = geometry.alignment_unit(tp, 128, cp_size=2, compression_ratio=ratio, scheme=scheme)
    layout = {"cp_size": 2, "cp_rank": 1, "scheme": scheme}
    guard.on(check_rollout)(result.rollout_data, unit=unit, layout=fmt, **layout)
    for k, (forward, samples) in enumerate(zip(result.forwards, result.micro_batches)):
        batch = forward.batch
        guard.on(check_batch)(batch, micro_batch=k, samples=samples, qkv_format=fmt, stream_multiple=tp * 128,
                              buckets=[1024, 2048, 4096], **layout)
        rows = batch["tokens"].numel()
        for replay in result.replays["rollout_routed_experts"][k:k + 1]:
            guard.on(check_replay)(replay, micro_batch=k, samples=samples, batch_rows=rows, tp_size=tp,
                                   sequence_parallel=args.sequence_parallel)
        padded = batch["max_seq_lens"][0] if fmt == "bshd" else None  # layoutcheck: ignore[unguarded-rectangular-batch]
        for total, response, ranges in zip(batch["total_lengths"], batch["response_lengths"], forward.logit_ranges):
            guard.on(check_response_offsets)(ranges, total_length=total, response_length=response, qkv_format=fmt,
                                             padded=padded, **layout)


# --- a bad specification with a tensor in it: the message never reads the tensor ------------


def test_spec_errors_with_a_tensor_argument_issue_no_sync(guard):
    t = torch.tensor(300)
    with pytest.raises(LayoutSpecError, match="Tensor"):  # a SyncError here means repr() read the value
        guard.on(check_micro_batch)(max_seq_lens=[384], total_lengths=[t])
    with pytest.raises(LayoutSpecError, match="Tensor"):
        guard.on(check_micro_batch)(max_seq_lens=[384], total_lengths=[300], cp_size=torch.tensor(2))
    with pytest.raises(LayoutSpecError, match="Tensor"):
        guard.on(check_micro_batch)(max_seq_lens=[128], total_lengths=[1], buckets=[torch.tensor(512)])
    with pytest.raises(LayoutSpecError, match="Tensor"):
        guard.on(check_replay)(torch.tensor(384), batch_rows=384)
    with pytest.raises(LayoutSpecError, match="Tensor"):
        guard.on(geometry.padded_length)(t, 128)
    v = Violation("G3", "get_batch", "tokens", "p", actual=torch.zeros(2, 3), expected=(2, 4), hint="h")
    assert "Tensor(dtype=torch.float32, shape=(2, 3)" in guard.on(v.format)()


def test_a_check_that_cannot_run_in_warn_mode_issues_no_sync(guard):
    # The producer returns `total_lengths` as a tensor: one warning, described by metadata only.
    def producer(args, ref):
        return {"tokens": [torch.ones(300, dtype=torch.long)], "total_lengths": torch.tensor([300]),
                "max_seq_lens": [384]}, None

    checker = LayoutChecker("warn")
    wrapped = guard.on(checker.wrap_producer(guard.off(producer)))
    with pytest.warns(LayoutWarning, match="got Tensor"):
        wrapped(make_args(), None)
    assert guard.entered > 0 and len(checker.notes) == 1


def test_spec_errors_on_fake_cuda_tensors_do_not_read_them():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        length = torch.empty((), dtype=torch.long, device="cuda")
    with pytest.raises(LayoutSpecError) as info:  # repr() of a fake tensor would raise another error
        check_micro_batch(max_seq_lens=[384], total_lengths=[length])
    assert "device=cuda" in str(info.value)


# --- checks bypass __torch_function__ ---------------------------------------------


class Loud(torch.Tensor):
    """A tensor subclass whose every torch-function call raises (as a tracer might intercept)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise AssertionError(f"{getattr(func, '__name__', func)} went through __torch_function__")


def test_checks_do_not_go_through_torch_function():
    tokens = [torch.ones(300, dtype=torch.long).as_subclass(Loud)]
    data = {"tokens": tokens, "total_lengths": [300], "max_seq_lens": [384],
            "rollout_log_probs": [torch.zeros(225).as_subclass(Loud)], "response_lengths": [225]}
    assert check_rollout(data, unit=128) == []
    batch = {"tokens": torch.zeros(1, 384).as_subclass(Loud), "max_seq_lens": [384], "total_lengths": [300],
             "unconcat_tokens": tokens}
    assert check_batch(batch) == []
    assert check_replay(torch.zeros(384, 2).as_subclass(Loud), batch_rows=384) == []


# --- on fake CUDA tensors, reading a value raises by itself ---------------------------


def test_checks_on_fake_cuda_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        tokens = [torch.empty(300, dtype=torch.long, device="cuda"), torch.empty(130, dtype=torch.long, device="cuda")]
        log_probs = [torch.empty(225, device="cuda"), torch.empty(50, device="cuda")]
        batch_tokens = torch.empty(1, 384, device="cuda")
        replay = torch.empty(256, 2, 2, device="cuda")
    with pytest.raises(Exception):  # noqa: B017 - any error: the value is not there to read
        tokens[0][0].item()
    with pytest.raises(Exception):  # noqa: B017
        tokens[0].tolist()

    data = {"tokens": tokens, "total_lengths": [300, 130], "response_lengths": [225, 97],
            "max_seq_lens": [14080, 256], "rollout_log_probs": log_probs}
    found = check_rollout(data, unit=128)
    assert [(v.invariant, v.sample, v.field) for v in found] == [
        ("O3", 0, "max_seq_lens"), ("O4", 1, "rollout_log_probs")]
    batch = {"tokens": batch_tokens, "max_seq_lens": [384], "total_lengths": [300], "response_lengths": [225],
             "unconcat_tokens": tokens[:1], "rollout_log_probs": log_probs[:1]}
    assert check_batch(batch) == []
    assert [v.invariant for v in check_replay(replay, batch_rows=384)] == ["G5"]


# --- the tracer and its annotations issue no sync either ------------------------------------------


def traced_data_path(slice_with_cp, slice_log_prob_with_cp) -> None:
    """A Miles-shaped batch builder over a tagged rollout, with one layout bug (sample 1 laid out with P=384)."""
    import torch.nn.functional as F

    from layoutcheck.runtime.tracing.tagging import tag_batch, tag_rollout

    rollout = {"tokens": [torch.arange(300), torch.arange(350)], "total_lengths": [300, 350],
               "response_lengths": [200, 250], "max_seq_lens": [384, 512],
               "loss_masks": [torch.ones(200, dtype=torch.int), torch.ones(250, dtype=torch.int)],
               "rollout_log_probs": [torch.zeros(200), torch.zeros(250)]}
    tag_rollout(rollout, cp_size=2, cp_rank=1, unit=128, response_fields=(),
                unsliced_response_fields=("loss_masks", "rollout_log_probs"))
    padded = rollout["max_seq_lens"][0]  # layoutcheck: ignore[unguarded-rectangular-batch] -- the bug under test
    tokens = [slice_with_cp(t, 0, "bshd", padded) for t in rollout["tokens"]]
    masks = [slice_with_cp(F.pad(m, (t - r - 1, 1)), 0, "bshd", padded) for m, t, r in
             zip(rollout["loss_masks"], rollout["total_lengths"], rollout["response_lengths"])]
    batch = {"tokens": torch.stack(tokens), "full_loss_masks": torch.stack(masks),
             "max_seq_lens": rollout["max_seq_lens"]}
    tag_batch(batch, micro_batch=0, samples=[0, 1], cp_size=2, cp_rank=1)
    log_probs = [slice_log_prob_with_cp(lp, t, r, "bshd", p) for lp, t, r, p in zip(
        rollout["rollout_log_probs"], rollout["total_lengths"], rollout["response_lengths"], rollout["max_seq_lens"])]
    torch.cat(log_probs).split([lp.shape[0] for lp in log_probs])
    window = F.pad(rollout["tokens"][1], (0, 162))[256:512]  # an all-gather window, written inline
    torch.cat([window, window.clone()]).view(1, -1).reshape(-1).narrow(0, 0, 256)
    batch["tokens"].chunk(2, dim=1)
    batch["tokens"][:, 1:].contiguous().to(torch.float32).unbind(0)
    F.pad(batch["tokens"], (0, 64))  # a re-pad of the laid-out micro-batch
    # the space rules: partners in elementwise ops, a roll and an index of the CP-local batch
    torch.where(batch["full_loss_masks"] > 0, batch["tokens"] * batch["full_loss_masks"], 0)
    torch.roll(batch["tokens"], -1, dims=1)
    batch["tokens"][:, -1]
    torch.ones_like(batch["tokens"]).gather(1, torch.zeros(2, 3, dtype=torch.long))


def test_the_tracer_issues_no_sync(guard, monkeypatch):
    import trainer_cp

    from layoutcheck.runtime.tracing import op_rules, tagging, tracer
    from layoutcheck.runtime.tracing.tags import clear_tags

    # Enforce inside the tracer's own work (its rules before and after each op, the wrappers,
    # tagging), not in the ops it runs.
    def enforced(rule):
        def before(*args):
            after = guard.on(rule)(*args)
            return None if after is None else guard.on(after)
        return before

    for func, rule in list(op_rules.RULES.items()):
        monkeypatch.setitem(op_rules.RULES, func, enforced(rule))
    monkeypatch.setattr(tagging, "tag_rollout", guard.on(tagging.tag_rollout))
    monkeypatch.setattr(tagging, "tag_batch", guard.on(tagging.tag_batch))
    trainer_cp.set_parallel_state(2, 1)
    ps = trainer_cp.get_parallel_state
    slice_with_cp = guard.on(tagging.wrap_slice_with_cp(guard.off(trainer_cp.slice_with_cp), parallel_state=ps))
    slice_log_prob = guard.on(tagging.wrap_slice_log_prob_with_cp(guard.off(trainer_cp.slice_log_prob_with_cp),
                                                                  parallel_state=ps))
    tracing = tracer.Tracer("record", enabled=True)
    try:
        with tracing:
            traced_data_path(slice_with_cp, slice_log_prob)
    finally:
        trainer_cp.set_parallel_state(1, 0)
        clear_tags()
    assert guard.entered > 20
    assert tracing.recorder.notes == []  # a SyncError inside a rule would be caught and noted
    assert sorted({v.invariant for v in tracing.violations}) == ["G1", "G3", "S2", "S3", "S4"], \
        tracing.recorder.summary()
    with guard.enforce():
        assert all(v.format() for v in tracing.violations)


def test_padded_annotations_issue_no_sync(guard):
    from typing import Annotated

    from typeguard import TypeCheckError, check_type

    from layoutcheck.runtime.tracing.tags import Tag, clear_tags, tag
    from layoutcheck.typing import Padded

    annotation = Annotated[torch.Tensor, Padded("B", "P")]
    good, bad = torch.zeros(2, 384), tag(torch.zeros(2, 256), Tag(field="tokens", padded=384, seq_dim=1))
    try:
        with guard.enforce():
            check_type(good, annotation)
            with pytest.raises(TypeCheckError, match="P is 384"):
                check_type(bad, annotation)
    finally:
        clear_tags()
    assert guard.entered == 1


def test_the_tracer_on_fake_cuda_tensors():
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode

    from layoutcheck.runtime.tracing.tagging import tag_rollout
    from layoutcheck.runtime.tracing.tags import clear_tags
    from layoutcheck.runtime.tracing.tracer import Tracer

    tracing = Tracer("record", enabled=True)
    try:
        with FakeTensorMode():
            tokens = [torch.empty(n, dtype=torch.long, device="cuda") for n in (300, 350)]
            tag_rollout({"tokens": tokens, "total_lengths": [300, 350], "max_seq_lens": [384, 384]}, unit=128)
            with tracing:  # reading a value would raise here
                batch = torch.stack([F.pad(t, (0, 384 - t.shape[0])) for t in tokens])
                F.pad(batch, (0, 14080 - 384))
    finally:
        clear_tags()
    assert [(v.invariant, v.actual) for v in tracing.violations] == [("G3", 14080)]


# --- the same, with the hooks installed by the debug mode's activation --------------


@pytest.mark.parametrize(("name", "options"), [CASES[0], *CASES[4:]], ids=lambda v: v if isinstance(v, str) else "")
def test_hooks_installed_by_activation_issue_no_sync(guard, monkeypatch, tmp_path, name, options):
    # The path LAYOUTCHECK takes (configuration -> session -> hooks in every module that holds the
    # functions), with the checker's code enforced and the pipeline's not, as above.
    from pathlib import Path

    from layoutcheck.runtime import activation

    windows = Windows(guard.enforce)
    monkeypatch.delenv("LAYOUTCHECK", raising=False)
    text = (Path(__file__).resolve().parent.parent / "fixtures" / "debug-run.toml").read_text()
    if options.get("buckets"):
        text = text.replace("[runtime]\n", f"[runtime]\nbuckets = {list(options['buckets'])}\n", 1)
    (tmp_path / "layoutcheck.toml").write_text(text.replace('mode = "raise"', 'mode = "record"'))
    with debug_mode_windows(windows):
        session = activation.activate(config=tmp_path / "layoutcheck.toml")
    try:
        ref = make_rollout_ref(LENGTHS, seed=1, media={0: 193} if name == "stale_lengths_after_expansion" else None)
        for r in range(2):
            with parallel_state(cp_size=2, cp_rank=r):
                actor.train_step(make_args(**options), ref)
        checker = session.checker
        assert len(session.hooks) == 4 and guard.entered > 0 and checker.checked["micro-batches"] > 0
        assert bool(checker.violations) == (name != "correct"), checker.summary()
        assert checker.notes == []
    finally:
        activation.deactivate()


# --- the tracer the debug mode runs, switched on by the environment ----------------------


@pytest.mark.parametrize(("name", "options"), [
    ("correct", {"qkv_format": "bshd", "micro_batch_size": 2, "rollout_max_context_len": 4096}),
    ("correct", {"qkv_format": "thd", "micro_batch_size": 2, "allgather_cp": True}),
    ("mixed_padded_lengths", {"bugs": {"mixed_padded_lengths"}, "micro_batch_size": 2}),
    ("replay_thd_pad_multiplier", {"bugs": {"replay_thd_pad_multiplier"}, "qkv_format": "thd", "micro_batch_size": 2}),
    ("stale_lengths_after_expansion", {"bugs": {"stale_lengths_after_expansion"}}),
    ("loss_repad_to_rollout_max", {"bugs": {"loss_repad_to_rollout_max"}, "rollout_max_context_len": 4096}),
    ("loss_cat_mixed_padded_lengths", {"bugs": {"loss_cat_mixed_padded_lengths"}, "qkv_format": "thd",
                                       "micro_batch_size": 2}),
], ids=lambda v: v if isinstance(v, str) else "")
def test_the_tracer_activated_by_the_environment_issues_no_sync(guard, monkeypatch, name, options):
    # LAYOUTCHECK / LAYOUTCHECK_TRACE / LAYOUTCHECK_CONFIG -> session -> the tracer's hooks, with the tracer's
    # own work enforced (its rules before and after each op, the CP-helper checks, the tags the hooks attach)
    # and the pipeline's ops not.
    from pathlib import Path

    from layoutcheck.runtime import activation
    from layoutcheck.runtime.tracing.tags import clear_tags

    config = Path(__file__).resolve().parent.parent / "fixtures" / "debug-run.toml"
    with debug_mode_windows(Windows(guard.enforce)):
        session = activation.activate_from_environment(
            {"LAYOUTCHECK": "record", "LAYOUTCHECK_TRACE": "1", "LAYOUTCHECK_CONFIG": str(config)})
        try:
            assert session is not None and session.tracing and len(session.hooks) == 7
            ref = make_rollout_ref(LENGTHS, seed=1, media={0: 193} if name == "stale_lengths_after_expansion" else None)
            for r in range(2):
                with parallel_state(cp_size=2, cp_rank=r):
                    actor.train_step(make_args(**options), ref)
            found = [v for v in session.violations if " at " in v.where]  # the tracer's: at an op, with its line
            assert guard.entered > 50
            assert bool(found) == (name != "correct"), session.summary()
            assert session.notes == []  # a SyncError in the tracer's work would be a note
        finally:
            activation.deactivate()
            clear_tags()
