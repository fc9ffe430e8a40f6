"""Every layout bug of the reference pipeline is caught, and a correct pipeline is silent.

The pipeline (``fixtures/minitrainer``) runs in-process for every CP rank
(``parallel_state`` context manager) with `LayoutChecker` wrappers bound
wherever the pipeline looks the functions up (its callers import them by
name, and ``cp_utils`` calls the offset helper itself, from inside the
producer too). Expected samples are computed from the data through
`layoutcheck.geometry` (the oracle), never hard-coded.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable

import minitrainer.actor as actor
import pytest
import torch  # noqa: F401 - the [test] extra requires it; fail here, not skip, without it
from bugcases import GRID
from minitrainer.args import make_args
from minitrainer.bugs import BUG_NAMES
from minitrainer.parallel import get_parallel_state, parallel_state
from minitrainer.rollout import make_rollout_ref

from layoutcheck import LayoutChecker, LayoutError, Violation, geometry
from layoutcheck.demo import pipeline_bindings

# Padded lengths (A = 128): 384, 256, 768, 1024, 256, 1024, 2048, 256. Samples
# 1, 4, 7 and 3, 5 share a P, so BSHD micro-batches of 2 and 4 hold several
# samples; 0 and 1 differ, so plain-order micro-batches mix P (G1).
LENGTHS = [300, 130, 700, 1000, 250, 900, 2000, 129]
A = 128


# The module's module-scoped fixture runs once: its tests all go to one xdist worker
# (`--dist loadgroup` in pyproject.toml) instead of each worker paying for it.
pytestmark = pytest.mark.xdist_group("test_bug_flags")


@pytest.fixture(scope="module")
def ref():
    return make_rollout_ref(LENGTHS, seed=3)


@pytest.fixture
def install(monkeypatch) -> Callable[..., LayoutChecker]:
    """Bind checked wrappers wherever minitrainer looks the functions up (one wrapper per function)."""

    def install(mode: str = "record", **options: object) -> LayoutChecker:
        checker = LayoutChecker(mode, parallel_state=get_parallel_state, **options)
        for module, name, wrapper in pipeline_bindings(checker.wrap):
            monkeypatch.setattr(module, name, wrapper)
        return checker

    return install


def run_ranks(args, ref, *, cp: int = 1, tp: int = 1, ranks: Iterable[int] | None = None) -> list:
    """One training step per CP rank, in-process."""
    results = []
    for r in range(cp) if ranks is None else ranks:
        with parallel_state(tp_size=tp, cp_size=cp, cp_rank=r):
            results.append(actor.train_step(args, ref))
    return results


def named(violations: list[Violation], invariant: str, field: str | None = None) -> list[Violation]:
    return [v for v in violations if v.invariant == invariant and (field is None or v.field == field)]


def samples_of(violations: list[Violation]) -> set[int]:
    out: set[int] = set()
    for v in violations:
        out.update(v.sample if isinstance(v.sample, tuple) else [v.sample])
    return out


# --- no false positive on a correct pipeline (every configuration of bugcases.GRID) ----------


def test_correct_pipeline_is_silent_on_every_configuration(install, ref):
    checker = install("raise")
    for fmt, scheme, cp, b in GRID:
        args = make_args(qkv_format=fmt, allgather_cp=scheme == "allgather", micro_batch_size=b)
        results = run_ranks(args, ref, cp=cp)
        assert checker.violations == [] and checker.notes == [], (fmt, scheme, cp, b, checker.summary())
        # the hooks did run: one rollout per rank, every micro-batch, both replay keys, the loss side's offsets
        micro_batches = sum(len(r.micro_batches) for r in results)
        assert checker.checked["rollouts"] == cp and checker.checked["micro-batches"] == micro_batches
        assert checker.checked["replay tensors"] == 2 * micro_batches
        assert (checker.checked["offset calls"] > 0) == (cp > 1)
        checker.reset()


@pytest.mark.parametrize(
    "options",
    [
        {"tp": 2, "sequence_parallel": True, "qkv_format": "bshd"},
        {"tp": 2, "sequence_parallel": True, "qkv_format": "thd"},
        {"tp": 2, "sequence_parallel": False, "qkv_format": "thd", "data_pad_size_multiplier": 64},
        {"compress_ratios": [1, 3], "qkv_format": "bshd"},  # A = lcm(128, 12) = 384
        {"compress_ratios": [3], "qkv_format": "bshd", "allgather_cp": True, "micro_batch_size": 2},
        {"compress_ratios": [128], "qkv_format": "bshd"},  # A = 2 * 128 * cp = 512: a read of the largest ratio
        {"compress_ratios": [], "qkv_format": "bshd"},
    ],
    ids=["bshd-tp2-sp", "thd-tp2-sp", "thd-tp2-mult64", "bshd-compressed", "bshd-compressed-allgather",
         "bshd-compressed-512", "bshd-compress-ratios-empty"],
)
def test_correct_pipeline_is_silent_with_tp_and_compression(install, ref, options):
    options = dict(options)
    tp = options.pop("tp", 1)
    checker = install("raise")
    run_ranks(make_args(**options), ref, cp=2, tp=tp)
    assert checker.violations == [] and checker.notes == [], checker.summary()
    assert checker.summary().startswith("no layout violations (checked 2 rollouts")


def test_every_bug_flag_has_a_test():
    assert set(BUG_CASES) == set(BUG_NAMES)


# --- each bug flag is caught ------------------------------------------------


def case_rollout_global_padding(install, ref):
    checker = install()
    run_ranks(make_args(bugs={"rollout_global_padding"}), ref, cp=2)
    found = named(checker.violations, "O3", "max_seq_lens")
    global_p = geometry.padded_length(max(LENGTHS), A)
    expected = {i for i, t in enumerate(LENGTHS) if global_p >= t + A}
    assert samples_of(found) == expected
    worst = max(expected, key=lambda i: global_p / LENGTHS[i])
    v = next(v for v in found if v.sample == worst)
    assert (v.actual, v.where) == (global_p, "get_rollout_data")
    assert str(geometry.padded_length(LENGTHS[worst], A)) in str(v.expected)
    text = v.format()
    assert f"{global_p / LENGTHS[worst]:.1f}x" in text and "rollout-global padding" in text
    assert {v.invariant for v in checker.violations} == {"O3"}


def case_mixed_padded_lengths(install, ref):
    checker = install()
    run_ranks(make_args(bugs={"mixed_padded_lengths"}, micro_batch_size=2), ref, cp=2)
    padded = [geometry.padded_length(t, A) for t in LENGTHS]
    mixed = {k: (2 * k, 2 * k + 1) for k in range(len(LENGTHS) // 2) if padded[2 * k] != padded[2 * k + 1]}
    found = named(checker.violations, "G1", "max_seq_lens")
    assert {v.micro_batch: v.sample for v in found} == mixed
    v = found[0]
    assert v.actual == {i: padded[i] for i in v.sample}
    assert "one sample per micro-batch" in v.hint and "bucket samples by padded length" in v.hint


def case_logprobs_sliced_with_other_p(install, ref):
    for scheme in ("zigzag", "allgather"):
        checker = install()
        args = make_args(bugs={"logprobs_sliced_with_other_p"}, allgather_cp=scheme == "allgather")
        run_ranks(args, ref, cp=2, ranks=[0])
        expected = set()
        for i, t in enumerate(LENGTHS):
            r = t - max(1, t // 4)
            # response fields follow the zigzag rule under both schemes (as Miles slices them)
            own = geometry.response_count(t, r, 2, 0, layout="bshd", padded=geometry.padded_length(t, A), scheme="zigzag")
            packed = geometry.response_count(t, r, 2, 0, layout="thd", scheme="zigzag")
            if own != packed:
                expected.add(i)
        assert expected, "the data must make the bug visible"
        for invariant in ("O4", "G4"):
            for field in ("rollout_log_probs", "teacher_log_probs"):
                assert samples_of(named(checker.violations, invariant, field)) == expected, (scheme, invariant, field)


def case_replay_thd_pad_multiplier(install, ref):
    checker = install()
    results = run_ranks(make_args(bugs={"replay_thd_pad_multiplier"}, qkv_format="thd", micro_batch_size=2), ref, cp=2)
    found = named(checker.violations, "G5")
    assert {v.field for v in found} == {"rollout_routed_experts", "rollout_indexer_topk"}
    expected = set()
    for k, samples in enumerate(results[0].micro_batches):
        stream = geometry.packed_stream_length([LENGTHS[i] for i in samples], 2)
        if geometry.round_up(stream, A) != geometry.round_up(stream, 2 * A):
            expected.add(k)
    assert {v.micro_batch for v in found} == expected
    v = found[0]
    samples = tuple(results[0].micro_batches[v.micro_batch])
    stream = geometry.packed_stream_length([LENGTHS[i] for i in samples], 2)
    assert (v.sample, v.actual, v.expected) == (samples, geometry.round_up(stream, 2 * A), geometry.round_up(stream, A))


MEDIA = {0: 193}  # sample 0's media placeholder grows to 193 tokens: T_0 = 300 - 1 + 193 = 492


def case_stale_lengths_after_expansion(install, ref):
    checker = install()
    run_ranks(make_args(bugs={"stale_lengths_after_expansion"}), make_rollout_ref(LENGTHS, seed=3, media=MEDIA), cp=2)
    found = named(checker.violations, "G2", "max_seq_lens")
    assert samples_of(found) == {0}
    p0 = geometry.padded_length(LENGTHS[0], A)
    v = found[0]
    assert v.actual == LENGTHS[0] - 1 + MEDIA[0] > p0 and f"P = {p0}" in str(v.expected)
    assert v.micro_batch == 0
    assert {v.invariant for v in checker.violations} == {"G2"} and checker.notes == []


def case_offsets_without_layout(install, ref):
    # zigzag: the loss side calls the offset helper without the layout; all-gather: the redistribution
    # into the zigzag layout calls slice_log_prob_with_cp without it, which calls the helper.
    for scheme in ("zigzag", "allgather"):
        checker = install()
        run_ranks(make_args(bugs={"offsets_without_layout"}, allgather_cp=scheme == "allgather"), ref, cp=2, ranks=[1])
        expected = set()
        for i, t in enumerate(LENGTHS):
            r = t - max(1, t // 4)
            p = geometry.padded_length(t, A)
            bshd = geometry.response_logit_ranges(t, r, 2, 1, layout="bshd", padded=p, scheme="zigzag")
            thd = geometry.response_logit_ranges(t, r, 2, 1, layout="thd", scheme="zigzag")
            if bshd != thd:
                expected.add(i)
        found = named(checker.violations, "G4", "max_seq_len")
        assert expected and samples_of(found) == expected, scheme
        assert {v.where for v in found} == {"get_logits_and_tokens_offset_with_cp"}
        assert "qkv_format='thd', max_seq_len=None" in found[0].format()
        assert {v.invariant for v in checker.violations} == {"G4"}  # the producer's own calls are fine (no O4)


def case_alignment_max_not_lcm(install, ref):
    checker = install()
    run_ranks(make_args(bugs={"alignment_max_not_lcm"}, compress_ratios=[3]), ref, cp=2)
    unit = geometry.alignment_unit(1, 128, cp_size=2, compression_ratio=3)
    assert unit.max_is_wrong and unit.value == 384
    found = named(checker.violations, "O2", "max_seq_lens")
    expected = {i for i, t in enumerate(LENGTHS) if geometry.padded_length(t, unit.max_value) % unit.value}
    assert expected and samples_of(found) == expected
    assert "lcm" in found[0].format() and "max()" in found[0].format()


# Static shape buckets: padded lengths 384, 256, 768, 1024, 256, 1024, 2048, 256 resolve to buckets
# 512, 512, 1024, 1024, 512, 1024, 2048, 512; micro-batches whose longest P *is* a bucket (1024 with
# samples 3 or 5, 2048 with sample 6) are where `>` and `>=` differ (the last bucket excepted).
BUCKETS = (512, 1024, 2048)


def bucket_of(lengths: Iterable[int]) -> int:
    return geometry.resolve_bucket(max(lengths), BUCKETS)


def case_wrong_bucket(install, ref):
    for cp, b in ((1, 1), (2, 2), (4, 2)):
        checker = install(buckets=BUCKETS)
        results = run_ranks(make_args(bugs={"wrong_bucket"}, buckets=BUCKETS, micro_batch_size=b), ref, cp=cp)
        micro_batches = results[0].micro_batches
        padded = [geometry.padded_length(t, A) for t in LENGTHS]
        expected = {}
        for k, samples in enumerate(micro_batches):
            right = bucket_of(LENGTHS[i] for i in samples)
            longest = max(padded[i] for i in samples)
            if longest == right and right != BUCKETS[-1]:  # the off-by-one picks the next bucket up
                expected[k] = (right, BUCKETS[BUCKETS.index(right) + 1])
        assert expected, "the data must make the bug visible"
        found = named(checker.violations, "G6", "max_seq_lens")
        assert {v.micro_batch for v in found} == set(expected), (cp, b)
        for v in found:
            right, wrong = expected[v.micro_batch]
            assert (v.actual, v.where, v.sample) == (wrong, "get_batch", tuple(micro_batches[v.micro_batch]))
            assert v.problem == "P is a bucket but not the smallest that fits"
            assert str(v.expected).startswith(f"{right} (smallest bucket")
        assert f"[G6] get_batch, micro-batch {found[0].micro_batch}, sample" in found[0].format()
        # the replay filler resolves the bucket right: its rows disagree with the batch (G5) there only
        assert {v.micro_batch for v in named(checker.violations, "G5")} == set(expected)
        assert {v.invariant for v in checker.violations} <= {"G4", "G5", "G6"}


# The two flags only the tracer can see: the bug is inside the loss function, which no boundary hook looks
# into. Here the checks stay silent on them (on the run that shows the symptom); the tracer reports each at the
# op, with its source line, in tests/test_traced_pipeline.py.


def case_loss_repad_to_rollout_max(install, ref):
    checker = install("raise")
    results = run_ranks(make_args(bugs={"loss_repad_to_rollout_max"}, rollout_max_context_len=4096), ref, cp=2)
    clean = run_ranks(make_args(rollout_max_context_len=4096), ref, cp=2)
    assert any(int(b.loss[1]) != int(c.loss[1]) for r, s in zip(results, clean) for b, c in zip(r.forwards, s.forwards))
    assert checker.violations == [] and checker.notes == []


def case_loss_cat_mixed_padded_lengths(install, ref):
    checker = install("raise")
    args = {"qkv_format": "thd", "micro_batch_size": 2}
    results = run_ranks(make_args(bugs={"loss_cat_mixed_padded_lengths"}, **args), ref, cp=2)
    clean = run_ranks(make_args(**args), ref, cp=2)
    assert any(int(b.loss[1]) < int(c.loss[1]) for r, s in zip(results, clean) for b, c in zip(r.forwards, s.forwards))
    assert checker.violations == [] and checker.notes == []


BUG_CASES: dict[str, Callable[..., None]] = {
    name.removeprefix("case_"): fn for name, fn in dict(globals()).items() if name.startswith("case_")
}


@pytest.mark.parametrize("bug", BUG_NAMES)
def test_bug_flag_is_caught(install, ref, bug):
    BUG_CASES[bug](install, ref)


# --- static shape buckets: P is read from the batch ---------------------------


@pytest.mark.parametrize("scheme", ["zigzag", "allgather"])
@pytest.mark.parametrize("cp", [1, 2, 4])
@pytest.mark.parametrize("b", [1, 2, 4])
def test_bucketed_pipeline_is_silent(install, ref, scheme, cp, b):
    # max_seq_lens stay tight per sample and micro-batches mix them: with the checker told about the
    # buckets, the P it reads from each batch is the bucket, and nothing is reported.
    checker = install("raise", buckets=BUCKETS)
    args = make_args(buckets=BUCKETS, micro_batch_size=b, allgather_cp=scheme == "allgather")
    results = run_ranks(args, ref, cp=cp)
    assert checker.violations == [] and checker.notes == [], checker.summary()
    widths = {tuple(batch["tokens"].shape) for batch in results[0].batches}
    locals_ = {geometry.local_length(bucket, cp, scheme) for bucket in BUCKETS}
    assert {w for _, w in widths} <= locals_  # every micro-batch was laid out with a bucket
    if b > 1:
        lens = results[0].rollout_data["max_seq_lens"]
        assert any(len({lens[i] for i in mb}) > 1 for mb in results[0].micro_batches)  # G1 would have fired
    assert checker.checked["micro-batches"] == sum(len(r.micro_batches) for r in results)


def test_a_checker_without_the_buckets_reports_the_bucketed_layout(install, ref):
    # The same bucketed run, with the checker not told: every padded micro-batch is a G3 (P = max_seq_lens[0]).
    checker = install()
    run_ranks(make_args(buckets=BUCKETS, micro_batch_size=2), ref)
    assert {v.invariant for v in checker.violations} >= {"G3"}


# --- raise mode fails at the first consumer, naming sample and field -----------


def test_raise_mode_stops_before_the_replay_filler_pads(install, ref):
    # The filler is checked on the micro-batches as it will read them, before it pads or slices.
    install("raise")
    ref = make_rollout_ref(LENGTHS, seed=3, media=MEDIA)
    with parallel_state(cp_size=2, cp_rank=0), pytest.raises(LayoutError) as info:
        actor.train_step(make_args(bugs={"stale_lengths_after_expansion"}), ref)
    frames = traceback.extract_tb(info.tb)
    assert not any(f.filename.endswith("replay_data.py") for f in frames)  # the filler's body never started
    text = str(info.value)
    assert "[G2] fill_replay_data, micro-batch 0, sample 0, field `max_seq_lens`" in text
    assert "recompute `max_seq_lens`" in text


def test_raise_mode_rollout_global_padding_fails_in_the_producer(install, ref):
    install("raise")
    with parallel_state(cp_size=2, cp_rank=1), pytest.raises(LayoutError) as info:
        actor.train_step(make_args(bugs={"rollout_global_padding"}), ref)
    assert all(v.invariant == "O3" and v.where == "get_rollout_data" for v in info.value.violations)


def test_warn_mode_lets_the_step_finish(install, ref):
    from layoutcheck import LayoutWarning

    checker = install("warn")
    with pytest.warns(LayoutWarning, match=r"\[G1\]"):
        run_ranks(make_args(bugs={"mixed_padded_lengths"}, micro_batch_size=2), ref, cp=1)
    assert named(checker.violations, "G1")


def test_each_violation_is_reported_once_per_rollout(install, ref):
    # Both replay fillers and the batch builder see the stale P of micro-batch 0.
    checker = install()
    run_ranks(make_args(bugs={"stale_lengths_after_expansion"}), make_rollout_ref(LENGTHS, seed=3, media=MEDIA), cp=1)
    assert len(named(checker.violations, "G2")) == 1
