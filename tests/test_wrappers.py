"""The role wrappers fit the real trainer: signatures checked when wrapping, calls never broken.

Each false alarm measured on Miles's data path (issue 7) has a test here: the
register function without a micro-batch index (a), offset-helper callers that
omit ``cp_rank``/``cp_size`` (b), offset calls from inside the next rollout's
producer (c), ``compress_ratios`` (d), zigzag response fields under all-gather
CP (e), the layout never guessed (g); (f), the filler checked before it works,
is in ``test_bug_flags``. The pipeline is ``fixtures/minitrainer``, which has
Miles's signatures; hand-built functions stand in where a test needs a shape
the pipeline does not have.
"""

from __future__ import annotations

import gc
import inspect
import weakref
from argparse import Namespace
from types import SimpleNamespace

import minitrainer.cp_utils as cp_utils
import minitrainer.data as data
import minitrainer.model as model
import pytest
import torch
from minitrainer.actor import train_loop, train_step
from minitrainer.args import make_args
from minitrainer.global_vars import set_args
from minitrainer.parallel import get_parallel_state, parallel_state
from minitrainer.replay_data import fill_replay_data
from minitrainer.rollout import make_rollout_ref

from layoutcheck import LayoutChecker, LayoutError, LayoutSpecError, LayoutWarning, check_rollout, geometry
from layoutcheck.demo import pipeline_bindings
from layoutcheck.runtime.contract.adapters import MilesAdapter

LENGTHS = [300, 130, 700, 1000, 250, 900, 2000, 129]
MODES = ("raise", "warn", "record")


@pytest.fixture
def install(monkeypatch):
    def install(mode: str = "record", **options: object) -> LayoutChecker:
        options.setdefault("parallel_state", get_parallel_state)
        checker = LayoutChecker(mode, **options)
        for module, name, wrapper in pipeline_bindings(checker.wrap):
            monkeypatch.setattr(module, name, wrapper)
        return checker

    return install


def ranks(args, ref, cp=2):
    return [train_step(args, ref) for _ in _each_rank(cp)]


def _each_rank(cp):
    for r in range(cp):
        with parallel_state(cp_size=cp, cp_rank=r):
            yield r


# --- the signature is checked when wrapping ------------------------------------------------


def test_the_pipeline_functions_fit_their_roles():
    checker = LayoutChecker()
    for role, fn in (("producer", data.get_rollout_data), ("batch-builder", data.get_batch),
                     ("replay_filler", fill_replay_data), ("offset-helper", cp_utils.get_logits_and_tokens_offset_with_cp)):
        wrapper = checker.wrap(role, fn)
        assert wrapper.__wrapped__ is fn and wrapper.__name__ == fn.__name__
        assert inspect.signature(wrapper) == inspect.signature(fn)
        assert checker.wrap(role, wrapper) is wrapper  # wrapping a wrapper of this checker again: no change
    assert checker.wrap_batch_builder(data.get_batch).__layoutcheck_role__ == "batch_builder"


def get_batch_without_layout(data_iterator, keys, pad_multiplier=128):
    return {}


def positional_only_offsets(total_length, response_length, /, qkv_format="thd", max_seq_len=None):
    return 0, ((0, 0), (0, 0)), ((0, 0), (0, 0)), ((0, 0), (0, 0))


def anything(*values, **options):
    return None


@pytest.mark.parametrize(
    ("role", "fn", "fragments"),
    [
        ("batch_builder", get_batch_without_layout,
         ["`test_wrappers:get_batch_without_layout` as the batch builder", "no parameter `qkv_format`",
          "expected `qkv_format` (the layout, 'bshd' or 'thd')",
          "found (data_iterator, keys, pad_multiplier=128)"]),
        ("offset_helper", positional_only_offsets,
         ["as the response-offset helper", "parameter `total_length` is positional-only", "found (total_length"]),
        ("replay_filler", anything, ["as the replay filler", "no parameter `args`", "found (*values, **options)"]),
        ("producer", lambda rollout_data_ref: None, ["as the producer", "no parameter `args`", "found (rollout_data_ref)"]),
    ],
    ids=["missing-parameter", "positional-only", "variadic", "producer"],
)
def test_a_signature_that_does_not_fit_fails_when_wrapping(role, fn, fragments):
    with pytest.raises(LayoutSpecError) as info:
        LayoutChecker().wrap(role, fn)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_unknown_roles_and_non_functions_fail_when_wrapping():
    with pytest.raises(LayoutSpecError, match="unknown role 'collator'.*producer, batch_builder"):
        LayoutChecker().wrap("collator", data.get_batch)
    with pytest.raises(LayoutSpecError, match="not a function"):
        LayoutChecker().wrap("producer", 42)


# --- a wrapper returns what the original returned, raises what it raised, keeps nothing ----------


@pytest.mark.parametrize("mode", MODES)
def test_a_call_the_checker_does_not_understand_goes_through_with_a_note(mode):
    checker = LayoutChecker(mode)
    odd = ["not", "a", "rollout"]
    producer = checker.wrap("producer", lambda args, rollout_data_ref: odd)
    builder = checker.wrap("batch_builder", lambda data_iterator, keys, pad_multiplier=128, qkv_format="thd",
                           allgather_cp=False: odd)
    offsets = checker.wrap("offset_helper", lambda total_length, response_length, qkv_format="thd", max_seq_len=None,
                           cp_rank=None, cp_size=None: odd)
    with pytest.warns(LayoutWarning) if mode != "record" else _nothing():
        assert producer(Namespace(qkv_format="bshd"), None) is odd
        assert builder(SimpleNamespace(), ["tokens"]) is odd
        assert offsets(300, 225, "bshd", 384, 0, 2) is odd
    assert checker.violations == [] and len(checker.notes) == 3
    assert "the producer returned list" in checker.notes[0]
    assert "the offset helper returned" in checker.notes[2]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_call_that_does_not_bind_goes_through_with_a_note():
    def get_batch(data_iterator, keys, pad_multiplier=128, qkv_format="thd", allgather_cp=False, **more):
        return more

    # a signature that claims less than the function accepts (as some decorators leave behind)
    get_batch.__signature__ = inspect.Signature([
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in
        ("data_iterator", "keys", "pad_multiplier", "qkv_format", "allgather_cp")])
    checker = LayoutChecker("raise")
    with pytest.warns(LayoutWarning, match="did not bind"):
        assert checker.wrap("batch_builder", get_batch)(None, [], 128, "thd", False, extra=1) == {"extra": 1}
    assert len(checker.notes) == 1


def test_the_original_result_and_error_come_back_unchanged():
    result, error = object(), KeyError("the producer's own error")
    checker = LayoutChecker("raise")
    with pytest.warns(LayoutWarning, match="the producer returned object"):  # not understood: a note, no error
        assert checker.wrap("producer", lambda args, rollout_data_ref: result)(None, None) is result

    def failing(args, rollout_data_ref):
        raise error

    with pytest.raises(KeyError) as info:
        checker.wrap("producer", failing)(None, None)
    assert info.value is error
    with pytest.raises(TypeError):  # a call the original cannot take fails as the original fails
        checker.wrap("producer", failing)(None, None, None, None)


def test_no_tensor_is_kept_alive(install):
    checker = install("record")
    with parallel_state(cp_size=2, cp_rank=1):
        result = train_step(make_args(micro_batch_size=2), make_rollout_ref(LENGTHS, seed=3))
    refs = [weakref.ref(result.rollout_data["tokens"][0]), weakref.ref(result.forwards[0].batch["tokens"]),
            weakref.ref(result.replays["rollout_routed_experts"][0])]
    del result
    gc.collect()
    assert [r() for r in refs] == [None, None, None]
    assert checker.checked["micro-batches"] > 0


def test_one_wrapper_serves_every_copy_of_a_function(install):
    checker = install()
    assert model.get_batch is data.get_batch and model.get_batch.__wrapped__.__module__ == "minitrainer.data"
    assert data.slice_log_prob_with_cp.__globals__["get_logits_and_tokens_offset_with_cp"].__layoutcheck_checker__ is checker


# --- (a) the register function: no micro-batch index, counted per filler call ------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_register_function_is_called_as_the_filler_calls_it(monkeypatch, install, mode):
    import minitrainer.actor as actor

    seen = []

    def register(replay_list, replay_data, *, models):  # exactly Miles's protocol, nothing more
        seen.append((replay_list, replay_data.size(0), models))
        replay_list.append(replay_data)

    monkeypatch.setattr(actor, "record_replay", register)
    checker = install(mode)
    (result,) = ranks(make_args(micro_batch_size=2), make_rollout_ref(LENGTHS, seed=3), cp=1)
    assert len(seen) == 2 * len(result.micro_batches) and all(models is not None for _, _, models in seen)
    assert checker.violations == [] and checker.notes == []
    assert checker.checked["replay tensors"] == len(seen)


def test_the_micro_batch_index_counts_from_each_filler_call():
    # A filler whose second micro-batch is one row short, twice: G5 names micro-batch 1 for both keys.
    def get_batch(data_iterator, keys, pad_multiplier=128, qkv_format="thd", allgather_cp=False):
        mb = data_iterator.get_next(["tokens", "total_lengths", "response_lengths", "max_seq_lens"])
        return {**mb, "tokens": torch.zeros(1, mb["max_seq_lens"][0], dtype=torch.long)}  # layoutcheck: ignore[unguarded-rectangular-batch]

    def fill(*, args, data_iterator, num_microbatches, rollout_data, data_key, register_replay_list_func, short):
        data_iterator[0].reset()
        for k in range(sum(num_microbatches)):
            mb = data_iterator[0].get_next(["max_seq_lens"])
            rows = mb["max_seq_lens"][0] - (k == short)  # layoutcheck: ignore[unguarded-rectangular-batch]
            register_replay_list_func([], torch.zeros(rows, 2), models=None)

    args = Namespace(qkv_format="bshd", allgather_cp=False, data_pad_size_multiplier=128)
    rollout = {"tokens": [torch.ones(t, dtype=torch.long) for t in (300, 130, 700)], "total_lengths": [300, 130, 700],
               "response_lengths": [200, 100, 600], "max_seq_lens": [384, 256, 768]}
    checker = LayoutChecker("record")
    checker.check_rollout_data(rollout, args)
    iterators = [data.DataIterator(rollout, 1)]
    filler, builder = checker.wrap("replay_filler", fill), checker.wrap("batch_builder", get_batch)
    for key in ("rollout_routed_experts", "rollout_indexer_topk"):
        filler(args=args, data_iterator=iterators, num_microbatches=[3], rollout_data=rollout, data_key=key,
               register_replay_list_func=lambda *a, **kw: None, short=1)
    iterators[0].reset()
    for _ in range(3):
        builder(iterators[0], ["tokens"], qkv_format="bshd")
    found = [(v.invariant, v.field, v.micro_batch, v.actual, v.expected) for v in checker.violations]
    assert found == [("G5", "rollout_routed_experts", 1, 255, 256), ("G5", "rollout_indexer_topk", 1, 255, 256)]


# --- (b) offset helpers read CP coordinates from the parallel state ------------------------------


def test_offset_calls_without_cp_coordinates_are_judged_with_the_parallel_state(install, monkeypatch):
    calls = []
    original = cp_utils.get_logits_and_tokens_offset_with_cp
    checker = install("raise")
    wrapped = cp_utils.get_logits_and_tokens_offset_with_cp

    def counting(*args, **kwargs):
        calls.append(len(args) + len(kwargs))
        return wrapped(*args, **kwargs)

    for module in (cp_utils, model):
        monkeypatch.setattr(module, "get_logits_and_tokens_offset_with_cp", counting)
    ranks(make_args(), make_rollout_ref(LENGTHS, seed=3), cp=2)
    assert calls and max(calls) == 4  # nobody passes cp_rank / cp_size
    # the loss side's calls are judged (two passes, one call per sample); the producer's are left to O4
    assert checker.checked["offset calls"] == 2 * 2 * len(LENGTHS) and checker.violations == []
    assert original is wrapped.__wrapped__


def test_an_offset_call_without_any_source_of_cp_is_a_note_not_a_check():
    checker = LayoutChecker("record")  # no parallel_state configured
    helper = checker.wrap("offset_helper", cp_utils.get_logits_and_tokens_offset_with_cp)
    with parallel_state(cp_size=2, cp_rank=0):
        helper(300, 225, "thd", None)
    assert checker.violations == [] and checker.checked["offset calls"] == 0
    assert len(checker.notes) == 1 and "parallel-state function" in checker.notes[0]


def test_a_wrong_offset_call_from_the_loss_side_is_g4(install):
    checker = install("record")
    for _ in _each_rank(2):
        set_args(make_args())
        train_step(make_args(bugs={"offsets_without_layout"}), make_rollout_ref(LENGTHS, seed=3))
    assert {v.invariant for v in checker.violations} == {"G4"} and checker.notes == []


# --- (c) several rollouts: offset calls inside the producer belong to the producer ---------------


def test_several_rollouts_in_one_run_are_silent(install):
    checker = install("raise")
    refs = [make_rollout_ref(lengths, seed=s) for s, lengths in
            enumerate([LENGTHS, [1100, 260, 512, 140, 3000, 390, 75, 640], [129, 4000, 256, 257, 90, 1500, 700, 60]])]
    for fmt in ("bshd", "thd"):
        for _ in _each_rank(2):
            train_loop(make_args(qkv_format=fmt, micro_batch_size=2), refs)
    assert checker.violations == [] and checker.notes == [], checker.summary()
    assert checker.checked["rollouts"] == 2 * 2 * len(refs)
    assert [o.rollout for o in checker.observations.samples][:: len(LENGTHS)] == [0, 1, 2, 3]  # detail: 4 rollouts


# --- (d) compress_ratios -------------------------------------------------------------------------------


def test_the_compression_ratio_is_the_largest_of_compress_ratios():
    adapter = MilesAdapter()
    for ratios, expected in ((None, None), ([], None), ([0], None), ([1, 4, 2], 4), ((3,), 3)):
        assert adapter.compression_ratio(Namespace(compress_ratios=ratios)) == expected
    with pytest.raises(LayoutSpecError, match="compress_ratios"):
        adapter.compression_ratio(Namespace(compress_ratios="4"))
    unit = adapter.layout(Namespace(compress_ratios=[128]), adapter.parallel(lambda: _state(cp=2))).unit
    assert unit.value == 512  # 2 * 128 * cp: the real producer's pad for this rollout


def _state(cp=1, r=0):
    return SimpleNamespace(tp=SimpleNamespace(size=1, rank=0), cp=SimpleNamespace(size=cp, rank=r))


# --- (e) all-gather CP: response fields stay zigzag ------------------------------------------------


def test_allgather_response_fields_are_judged_by_the_zigzag_rule(install):
    checker = install("raise")
    args = make_args(allgather_cp=True)
    results = [train_step(args, make_rollout_ref(LENGTHS, seed=3)) for _ in _each_rank(2)]
    assert checker.violations == []
    data_r1 = results[1].rollout_data
    unit = geometry.alignment_unit(1, 128, cp_size=2, scheme="allgather")
    judged = {"cp_size": 2, "cp_rank": 1, "scheme": "allgather", "unit": unit}
    assert check_rollout(data_r1, **judged, response_scheme="zigzag") == []
    assert check_rollout(data_r1, **judged)  # judged by the windows' counts instead: a false O4


# --- (g) the layout is never guessed --------------------------------------------------------------


def _bshd_rollout(cp_rank: int, *, global_padding: bool = False) -> dict:
    with parallel_state(cp_size=2, cp_rank=cp_rank):
        args = make_args(bugs={"rollout_global_padding"} if global_padding else ())
        set_args(args)
        rollout, _ = data.get_rollout_data(args, make_rollout_ref(LENGTHS, seed=3))
    return rollout


def test_without_a_known_layout_the_layout_checks_are_one_note():
    args = Namespace(allgather_cp=False, data_pad_size_multiplier=128)  # no qkv_format
    rollout = _bshd_rollout(1)
    checker = LayoutChecker("raise", parallel_state=lambda: _state(cp=2, r=1))
    producer = checker.wrap("producer", lambda args, rollout_data_ref: (rollout, None))
    with pytest.warns(LayoutWarning, match="layout is not known"):
        producer(args, None)
        producer(args, None)  # a second rollout: the same note is not repeated
    assert checker.violations == [] and len(checker.notes) == 1
    configured = LayoutChecker("raise", parallel_state=lambda: _state(cp=2, r=1), layout="bshd")
    configured.wrap("producer", lambda args, rollout_data_ref: (rollout, None))(args, None)
    assert configured.notes == []
    buggy = _bshd_rollout(1, global_padding=True)
    with pytest.raises(LayoutError, match=r"\[O3\]"):
        configured.wrap("producer", lambda args, rollout_data_ref: (buggy, None))(args, None)


def test_the_configured_layout_comes_before_args():
    rollout = _bshd_rollout(0)
    checker = LayoutChecker("record", parallel_state=lambda: _state(cp=2), layout="thd")
    checker.check_rollout_data(rollout, make_args(qkv_format="bshd"))
    assert {v.invariant for v in checker.violations} == {"O4"}  # judged as THD, as configured
    with pytest.raises(LayoutSpecError, match="unknown layout"):
        LayoutChecker(layout="sbhd")


def test_a_filler_called_positionally_gets_its_register_function_counted():
    registered = []

    def fill(args, data_iterator, num_microbatches, rollout_data, data_key, register_replay_list_func, scale=1):
        for rows in (384 * scale, 256 * scale):
            register_replay_list_func([], torch.zeros(rows, 2))

    rollout = {"tokens": [torch.ones(300, dtype=torch.long), torch.ones(130, dtype=torch.long)],
               "total_lengths": [300, 130], "response_lengths": [200, 100], "max_seq_lens": [384, 256]}
    args = Namespace(qkv_format="bshd", allgather_cp=False, data_pad_size_multiplier=128)
    checker = LayoutChecker("record")
    checker.check_rollout_data(rollout, args)
    filler = checker.wrap("replay_filler", fill)
    filler(args, [data.DataIterator(rollout, 1)], [2], rollout, "rollout_routed_experts",
           lambda lst, rows: registered.append(rows.size(0)), 2)
    assert registered == [768, 512] and checker.checked["replay tensors"] == 2 and checker.notes == []
