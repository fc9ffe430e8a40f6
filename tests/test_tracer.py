"""The tracer on real tensors: tags carried through the data path's ops, layouts broken at the op.

Lengths (A = 128): sample 0 has T=300, R=200, P=384; sample 1 has T=1000,
R=500, P=1024. Zigzag with cp=2 on P=384: c = 96, rank 1 keeps [96, 192)
and [192, 288), local length 192. All-gather with cp=2 on P=1024: rank 1
keeps [512, 1024).
"""

from __future__ import annotations

import inspect
import threading
import warnings

import pytest
import torch
import torch.nn.functional as F
import trainer_cp

from layoutcheck import ConfigError, LayoutError, LayoutSpecError, LayoutWarning, geometry
from layoutcheck.runtime.tracing.tagging import tag_batch, tag_rollout, wrap_slice_log_prob_with_cp, wrap_slice_with_cp
from layoutcheck.runtime.tracing.tags import Tag, clear_tags, geometry_of, tag, tagged_count
from layoutcheck.runtime.tracing.trace_switch import tracer_enabled
from layoutcheck.runtime.tracing.tracer import Tracer, active_tracer


@pytest.fixture(autouse=True)
def _fresh():
    clear_tags()
    trainer_cp.set_parallel_state(1, 0)
    yield
    clear_tags()


def rollout(cp: int = 2, r: int = 1, **options) -> dict:
    data = {
        "tokens": [torch.arange(300), torch.arange(1000)],
        "total_lengths": [300, 1000],
        "response_lengths": [200, 500],
        "max_seq_lens": [384, 1024],
        "loss_masks": [torch.ones(200, dtype=torch.int), torch.ones(500, dtype=torch.int)],
        "rollout_log_probs": [torch.zeros(geometry.response_count(t, resp, cp, r, padded=p))
                              for t, resp, p in ((300, 200, 384), (1000, 500, 1024))],
        "rollout_routed_experts": [torch.zeros(299, 4, 2), torch.zeros(999, 4, 2)],
    }
    tag_rollout(data, cp_size=cp, cp_rank=r, unit=128, **options)
    return data


def next_line() -> int:
    """The line after the caller's: where the op under test is."""
    return inspect.currentframe().f_back.f_lineno + 1  # type: ignore[union-attr]


# --- tags from the producer and the batch builder ---------------------------------------


def test_tag_rollout_tags_each_per_sample_tensor_with_its_geometry():
    data = rollout()
    t = geometry_of(data["tokens"][1])
    assert (t.sample, t.field, t.space, t.total, t.response, t.padded, t.unit, t.cp_size, t.cp_rank) == (
        1, "tokens", "tokens", 1000, 500, 1024, 128, 2, None)
    assert geometry_of(data["loss_masks"][0]).evolve(field="tokens", space="tokens") == geometry_of(data["tokens"][0])
    lp = geometry_of(data["rollout_log_probs"][0])  # sliced by the producer for rank 1
    assert (lp.space, lp.cp_rank, lp.local) == ("response", 1, geometry.response_count(300, 200, 2, 1, padded=384))
    assert geometry_of(data["rollout_routed_experts"][1]).space == "replay"


def test_tag_rollout_under_thd_and_with_buckets():
    data = rollout(cp=2, r=0, qkv_format="thd")
    assert geometry_of(data["tokens"][0]).padded == geometry.packed_sample_length(300, 2) == 300
    data = rollout(buckets=[512, 1024, 2048])
    assert [geometry_of(t).bucket for t in data["tokens"]] == [512, 1024]


def test_tag_batch_reads_p_from_the_local_length():
    batch = {"tokens": torch.zeros(2, 192), "max_seq_lens": [384, 384], "position_ids": torch.zeros(2, 192)}
    assert tag_batch(batch, micro_batch=3, samples=[0, 5], cp_size=2, cp_rank=1) == 2
    t = geometry_of(batch["tokens"])
    assert (t.padded, t.local, t.cp_rank, t.samples, t.micro_batch, t.seq_dim) == (384, 192, 1, (0, 5), 3, 1)


# --- propagation ---------------------------------------------------------------------------


def test_zigzag_slice_written_with_plain_ops_is_recognised():
    data = rollout()
    tracer = Tracer("raise", enabled=True)
    with tracer:
        full = F.pad(data["tokens"][0], (0, 84))  # to P = 384 = 2 cp c
        local = torch.cat([full[96:192], full[192:288]])
    t = geometry_of(local)
    assert (t.sample, t.cp_rank, t.local, t.scheme, t.window) == (0, 1, 192, "zigzag", None)
    assert tracer.violations == []


def test_allgather_window_is_recognised():
    data = rollout()
    with Tracer("raise", enabled=True):
        window = F.pad(data["tokens"][1], (0, 24))[512:1024]
    t = geometry_of(window)
    assert (t.cp_rank, t.local, t.scheme) == (1, 512, "allgather")


def test_loss_mask_aligned_to_token_positions_becomes_token_space():
    data = rollout()
    with Tracer("raise", enabled=True):
        mask = F.pad(data["loss_masks"][0], (300 - 200 - 1, 1))  # R entries -> T positions
        padded = F.pad(mask, (0, 84))
    assert geometry_of(mask).space == "tokens" and geometry_of(padded).sample == 0


@pytest.mark.parametrize("op", [
    lambda x: x.to(torch.float32), lambda x: x.contiguous(), lambda x: x.clone(), lambda x: x.detach(),
    lambda x: torch.clone(x), lambda x: x.long(), lambda x: x.view(-1), lambda x: x.reshape(300),
])
def test_shape_preserving_ops_keep_the_tag(op):
    data = rollout()
    with Tracer("raise", enabled=True):
        out = op(data["tokens"][0])
    assert geometry_of(out) == geometry_of(data["tokens"][0])


def test_views_move_the_sequence_dimension():
    data = rollout()
    x = data["tokens"][0]
    with Tracer("raise", enabled=True):
        row = x.unsqueeze(0)
        col = x.view(300, 1)
        back = row.squeeze(0)
        flat = torch.stack([x, x]).flatten()  # [2, 300] -> [600]: positions merged with the batch
    assert (geometry_of(row).seq_dim, geometry_of(col).seq_dim, geometry_of(back).seq_dim) == (1, 0, 0)
    assert geometry_of(flat) is None


def test_stack_makes_a_micro_batch_and_indexing_gets_a_sample_back():
    data = rollout()
    with Tracer("raise", enabled=True):
        a = F.pad(data["tokens"][0], (0, 84))
        b = F.pad(torch.arange(350), (0, 34))  # an untagged sample of the same length
        batch = torch.stack([a, a.clone()])
        mixed = torch.stack([a, b])
        row = batch[1]
        pieces = batch.unbind(0)
        halves = batch.split(1, dim=0)
    assert geometry_of(batch).samples == (0, 0) and geometry_of(batch).seq_dim == 1
    assert geometry_of(mixed).samples == ()  # one member unknown
    assert geometry_of(row).sample == 0 and geometry_of(row).seq_dim == 0
    assert [geometry_of(p).sample for p in pieces] == [0, 0]
    assert [geometry_of(h).samples for h in halves] == [(0,), (0,)]


def test_a_packed_stream_splits_back_into_its_samples():
    data = rollout()
    lp = data["rollout_log_probs"]
    with Tracer("raise", enabled=True):
        stream = torch.cat(lp)
        back = stream.split([p.numel() for p in lp])
    assert geometry_of(stream).segments == tuple(p.numel() for p in lp)
    assert [geometry_of(b) for b in back] == [geometry_of(p) for p in lp]


def test_narrow_and_chunk_slice_the_sequence():
    data = rollout()
    full = F.pad(data["tokens"][1], (0, 24))
    with Tracer("raise", enabled=True):
        tag(full, geometry_of(data["tokens"][1]))
        narrowed = full.narrow(0, 512, 512)
        halves = full.chunk(2)
    assert (geometry_of(narrowed).cp_rank, geometry_of(narrowed).scheme) == (1, "allgather")
    assert [geometry_of(h).cp_rank for h in halves] == [0, 1]


def test_untraced_ops_and_ops_outside_the_tracer_are_not_tagged():
    data = rollout()
    with Tracer("raise", enabled=True):
        plus = data["tokens"][0].cumsum(0)  # not a layout op
    outside = F.pad(data["tokens"][0], (0, 84))
    assert geometry_of(plus) is None and geometry_of(outside) is None


def test_traced_outputs_do_not_outlive_their_tensors():
    data = rollout()
    before = tagged_count()
    with Tracer("raise", enabled=True):
        for _ in range(50):
            torch.cat([F.pad(data["tokens"][0], (0, 84))[96:192], F.pad(data["tokens"][0], (0, 84))[192:288]])
    assert tagged_count() == before


# --- flagged at the op ----------------------------------------------------------------------


def flagged(fn, mode="record"):
    tracer = Tracer(mode, enabled=True)
    with tracer:
        fn()
    return tracer.violations


def test_a_pad_to_the_rollout_maximum_is_g3_at_the_users_line():
    data = rollout()
    line = 0

    def loss_function():
        nonlocal line
        line = next_line()
        return F.pad(data["tokens"][0], (0, 14080 - 300))  # re-padded to the rollout's max

    (v,) = flagged(loss_function)
    assert (v.invariant, v.sample, v.field, v.actual) == ("G3", 0, "tokens", 14080)
    assert v.where == f"F.pad at tests/test_tracer.py:{line} in loss_function"
    assert "384" in str(v.expected) and "P=384" in v.format()


def test_a_pad_below_the_current_length_is_g2_and_a_wrong_bucket_is_g6():
    data = rollout(buckets=[512, 1024, 2048])
    violations = flagged(lambda: (F.pad(data["tokens"][1], (0, 384 - 1000)), F.pad(data["tokens"][0], (0, 84))))
    assert [(v.invariant, v.sample, v.actual) for v in violations] == [("G2", 1, 384), ("G6", 0, 384)]
    assert "its bucket is 512" in violations[1].problem


def test_stack_and_batch_cat_of_different_p_are_g1_naming_both_tags():
    data = rollout()
    a = F.pad(data["tokens"][0], (0, 84))
    b = tag(torch.zeros(384, dtype=torch.long), geometry_of(data["tokens"][1]))  # laid out with another P
    line = 0

    def build():
        nonlocal line
        line = next_line()
        torch.stack([a, b])
        torch.cat([a.unsqueeze(0), b.unsqueeze(0)], dim=0)

    with Tracer("record", enabled=True) as tracer:
        tag(a, geometry_of(data["tokens"][0]))
        build()
    stack, cat = tracer.violations
    assert (stack.invariant, stack.sample, cat.invariant, cat.sample) == ("G1", (0, 1), "G1", (0, 1))
    assert stack.where == f"torch.stack at tests/test_tracer.py:{line} in build"
    assert cat.where.startswith(f"torch.cat at tests/test_tracer.py:{line + 1} ")
    assert "sample 0 `tokens` (T=300" in stack.problem and "sample 1 `tokens` (T=1000" in stack.problem
    assert stack.actual == "P = 384, 1024"


def test_packing_samples_of_different_p_along_the_sequence_is_not_a_batch():
    data = rollout()
    assert flagged(lambda: torch.cat([data["tokens"][0], data["tokens"][1]])) == []


def test_a_re_pad_of_a_laid_out_micro_batch_is_g3():
    batch = {"tokens": torch.zeros(2, 192), "max_seq_lens": [384, 384]}
    tag_batch(batch, micro_batch=0, samples=[0, 4], cp_size=2, cp_rank=1)
    (v,) = flagged(lambda: F.pad(batch["tokens"], (0, 7040 - 192)))
    assert (v.invariant, v.micro_batch, v.sample, v.actual) == ("G3", 0, (0, 4), 7040)
    assert "CP-sliced" in v.problem
    # the shift-by-one idiom on a CP-local batch crosses the rank's chunk boundaries (S2); at cp=1 it is fine
    assert [v.invariant for v in flagged(lambda: F.pad(batch["tokens"][:, 1:], (0, 1)))] == ["S2"]
    whole = {"tokens": torch.zeros(2, 384), "max_seq_lens": [384, 384]}
    tag_batch(whole, micro_batch=0, samples=[0, 4])
    assert flagged(lambda: F.pad(whole["tokens"][:, 1:], (0, 1))) == []


def test_a_split_with_other_samples_lengths_and_a_slice_past_the_end_are_g4():
    data = rollout()
    lp = data["rollout_log_probs"]
    wrong = [lp[1].numel(), lp[0].numel()]  # each sample split with the other's count
    assert wrong[0] != wrong[1]
    violations = flagged(lambda: (torch.cat(lp).split(wrong), lp[0][40:400]))
    assert [v.invariant for v in violations] == ["G4", "G4"]
    assert violations[0].actual == wrong and violations[0].expected == [p.numel() for p in lp]
    assert "[40:400)" in violations[1].problem


# --- the trainer's CP helpers -----------------------------------------------------------------


def test_cp_helper_wrappers_tag_rank_and_local_length():
    trainer_cp.set_parallel_state(2, 1)
    data = rollout()
    slice_with_cp = wrap_slice_with_cp(trainer_cp.slice_with_cp, parallel_state=trainer_cp.get_parallel_state)
    slice_log_prob = wrap_slice_log_prob_with_cp(trainer_cp.slice_log_prob_with_cp,
                                                 parallel_state=trainer_cp.get_parallel_state)
    assert slice_with_cp.__name__ == "slice_with_cp"
    unwired = wrap_slice_with_cp(trainer_cp.slice_with_cp)  # rank from the call's parallel_state, or unknown
    whole = torch.zeros(200)
    tag(whole, geometry_of(data["loss_masks"][0]).evolve(field="rollout_log_probs"))
    with Tracer("raise", enabled=True):
        local = slice_with_cp(data["tokens"][0], 0, "bshd", 384)
        experts = slice_with_cp(data["rollout_routed_experts"][0], lambda t, n: F.pad(t, (0, 0, 0, 0, 0, n)),
                                "bshd", 384)
        lp = slice_log_prob(whole, 300, 200, "bshd", 384)
        explicit = unwired(data["tokens"][1], 0, "bshd", 1024, trainer_cp.get_parallel_state())
        unknown = unwired(data["tokens"][1], 0, "bshd", 1024)
    assert (geometry_of(local).cp_rank, geometry_of(local).local) == (1, 192) and local.shape == (192,)
    assert (geometry_of(explicit).cp_rank, geometry_of(unknown).cp_rank, geometry_of(unknown).local) == (1, None, 512)
    assert geometry_of(experts).local == 192
    assert geometry_of(lp).local == geometry.response_count(300, 200, 2, 1, padded=384) == lp.numel()


def test_cp_helper_called_with_another_p_or_layout_is_flagged_at_the_call():
    trainer_cp.set_parallel_state(2, 1)
    data = rollout()
    slice_with_cp = wrap_slice_with_cp(trainer_cp.slice_with_cp)
    slice_log_prob = wrap_slice_log_prob_with_cp(trainer_cp.slice_log_prob_with_cp)
    whole = tag(torch.zeros(500), geometry_of(data["loss_masks"][1]).evolve(field="rollout_log_probs"))
    line = next_line()
    calls = [lambda: slice_with_cp(data["tokens"][0], 0, "bshd", 1024),  # the batch's P, not sample 0's
             lambda: slice_with_cp(data["tokens"][0], 0),  # the packed rule under BSHD
             lambda: slice_with_cp(data["loss_masks"][0], 0, "bshd", 384),  # response entries, token rule
             lambda: slice_log_prob(whole, 300, 200, "bshd", 384),  # sample 0's geometry on sample 1
             lambda: slice_log_prob(whole, 1000, 500, "thd")]
    found = [flagged(call) for call in calls]
    assert [[v.invariant for v in f] for f in found] == [["G3"], ["G3"], ["G4"], ["G4"], ["G4"]]
    assert found[0][0].where == f"slice_with_cp at tests/test_tracer.py:{line} in <lambda>"
    assert "another sample (T=300, R=200, P=384)" in found[3][0].problem
    assert found[3][0].expected == "T=1000, R=500, P=1024"
    # outside a tracer the wrappers only call the helper
    assert geometry_of(slice_with_cp(data["tokens"][0], 0, "bshd", 1024)) is None


# --- modes, switches, scope ---------------------------------------------------------------------


def test_raise_mode_stops_before_the_op_and_warn_points_at_the_users_line():
    data = rollout()
    with pytest.raises(LayoutError, match=r"\[G3\] F.pad at tests/test_tracer.py"), Tracer("raise", enabled=True):
        F.pad(data["tokens"][0], (0, 700))
    with warnings.catch_warnings(record=True) as caught, Tracer("warn", enabled=True) as tracer:
        warnings.simplefilter("always")
        line = next_line()
        F.pad(data["tokens"][0], (0, 700))
    (w,) = [w for w in caught if w.category is LayoutWarning]
    assert (w.filename, w.lineno) == (__file__, line)
    assert len(tracer.violations) == 1


def test_tracer_switch_environment_config_and_defaults(monkeypatch):
    monkeypatch.delenv("LAYOUTCHECK_TRACE", raising=False)
    assert (tracer_enabled("raise"), tracer_enabled("record"), tracer_enabled("warn")) == (True, True, False)
    assert tracer_enabled("warn", True) is True and tracer_enabled("raise", False) is False
    monkeypatch.setenv("LAYOUTCHECK_TRACE", "1")
    assert tracer_enabled("warn", False) is True and Tracer("warn").enabled
    monkeypatch.setenv("LAYOUTCHECK_TRACE", "0")
    assert Tracer("raise").enabled is False
    monkeypatch.setenv("LAYOUTCHECK_TRACE", "maybe")
    with pytest.raises(ConfigError, match="LAYOUTCHECK_TRACE='maybe'") as info:
        Tracer("raise")
    assert info.value.key == "LAYOUTCHECK_TRACE"


def test_a_disabled_tracer_enters_no_mode_and_sees_nothing():
    data = rollout()
    with Tracer("raise", enabled=False) as tracer:
        assert torch._C._len_torch_function_stack() == 0 and active_tracer() is None
        F.pad(data["tokens"][0], (0, 700))
    assert tracer.violations == []


def test_re_entry_pushes_one_mode_and_state_is_per_thread():
    tracer = Tracer("record", enabled=True)
    data = rollout()
    seen: list[object] = []
    with tracer, tracer:
        assert torch._C._len_torch_function_stack() == 1 and active_tracer() is tracer
        worker = threading.Thread(target=lambda: seen.append((active_tracer(), F.pad(data["tokens"][0], (0, 700)))))
        worker.start()
        worker.join()
    assert seen[0][0] is None and tracer.violations == []  # the other thread was not traced
    assert torch._C._len_torch_function_stack() == 0


def test_wrap_runs_a_function_inside_the_tracer_and_paused_lets_ops_through():
    data = rollout()
    tracer = Tracer("record", enabled=True)

    @tracer.wrap
    def lay_out(t):
        with tracer.paused():
            F.pad(t, (0, 700))  # not traced
        return F.pad(t, (0, 700))

    lay_out(data["tokens"][0])
    assert len(tracer.violations) == 1 and active_tracer() is None


# --- torch.compile -----------------------------------------------------------------------------


def test_no_graph_break_under_torch_compile_fullgraph():
    tracer = Tracer("raise", enabled=True)

    @tracer.wrap
    def lay_out(x):
        y = F.pad(x, (0, 84))
        tag(y, Tag(field="tokens", padded=384))  # a no-op while compiling
        return torch.cat([y[96:192], y[192:288]])

    @torch.compile(fullgraph=True, backend="eager")
    def step(x):
        return lay_out(x) * 2

    x = torch.ones(300)
    assert step(x).shape == (192,)
    data = rollout()
    with tracer:  # a compiled region called while the tracer is active
        assert step(data["tokens"][0]).shape == (192,)
        assert tracer.violations == []


def test_a_rule_that_fails_never_breaks_the_op_in_warn_or_record_mode(monkeypatch):
    from layoutcheck.runtime.tracing import propagation

    def broken(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(propagation, "pad", broken)
    data = rollout()
    with Tracer("record", enabled=True) as tracer:
        out = F.pad(data["tokens"][0], (0, 84))
    assert out.shape == (384,) and tracer.recorder.notes == ["the tracer could not follow F.pad: ValueError: boom"]
    with pytest.warns(LayoutWarning, match="could not follow F.pad"), Tracer("warn", enabled=True):
        F.pad(data["tokens"][0], (0, 84))
    with pytest.raises(LayoutSpecError, match="could not follow F.pad"), Tracer("raise", enabled=True):
        F.pad(data["tokens"][0], (0, 84))
    with Tracer("record", enabled=True):  # errors of the op itself are the user's, unchanged
        with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
            torch.stack([data["tokens"][0], data["tokens"][1]])


def test_cp_helpers_called_with_another_layout_than_the_runs_are_flagged_on_untagged_values():
    from layoutcheck.runtime.tracing.tagging import wrap_cp_offsets

    trainer_cp.set_parallel_state(2, 1)
    slice_log_prob = wrap_slice_log_prob_with_cp(trainer_cp.slice_log_prob_with_cp)
    values = [0.0] * 200  # the real producer slices lists of floats
    with Tracer("record", enabled=True, layout="bshd") as tracer:
        slice_log_prob(values, 300, 200, "thd")  # the packed rule in a BSHD run
        with pytest.raises(LayoutSpecError):  # no max_token_len: flagged, then the helper itself refuses
            slice_log_prob(values, 300, 200, "bshd")
        slice_log_prob(values, 300, 200, "bshd", 384)
    assert [(v.invariant, v.actual) for v in tracer.violations] == [
        ("G4", "qkv_format='thd'"), ("G4", "max_token_len=None")]
    assert tracer.violations[0].where.startswith("slice_log_prob_with_cp at tests/test_tracer.py:")

    def offsets_helper(total_length, response_length, qkv_format="thd", max_seq_len=None, cp_rank=None, cp_size=None):
        return geometry.response_logit_ranges(total_length, response_length, cp_size or 1, cp_rank or 0,
                                              layout=qkv_format, padded=max_seq_len)

    wrapped = wrap_cp_offsets(offsets_helper)
    with Tracer("record", enabled=True, layout="bshd") as tracer:
        assert wrapped(300, 200) == offsets_helper(300, 200)  # passes through, flagged
        wrapped(300, 200, "bshd", 384)
    assert [v.problem for v in tracer.violations] == [
        "offsets_helper is called with the thd rule in a bshd run"]
    with Tracer("record", enabled=True) as tracer:  # the run's layout unknown: nothing to judge
        wrapped(300, 200)
    assert tracer.violations == []


def test_a_sample_grown_past_its_p_is_g2_at_the_pad_and_prompt_pieces_are_free():
    data = rollout()
    tokens = data["tokens"][0]  # T=300, P=384
    with Tracer("record", enabled=True) as tracer:
        prompt = tokens[:100]
        F.pad(prompt, (28, 0))  # left-padding a prompt for generation: not the training layout
        # multimodal expansion after the producer: 120 patch tokens after the first one
        expanded = torch.cat([tokens[:1], torch.ones(120, dtype=tokens.dtype), tokens[1:]])
        line = next_line()
        F.pad(expanded, (0, 384 - expanded.shape[0]))  # padded to the stale P: 36 tokens dropped
    assert geometry_of(expanded).sample == 0
    (v,) = tracer.violations
    assert (v.invariant, v.actual) == ("G2", 384)
    assert v.where == f"F.pad at tests/test_tracer.py:{line} in {inspect.currentframe().f_code.co_name}"
    assert "below the 420 positions it holds" in v.problem


# --- cp=1: slicing again changes nothing ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["bshd", "thd"])
def test_at_cp_1_a_second_slice_of_a_sliced_sample_is_a_no_op_and_not_a_violation(fmt):
    # At cp=1 the CP helpers only pad (BSHD, to P) or return their input (THD): a trainer that calls them again on
    # their own output (a model-side slice after the batch builder's) holds right data, and nothing may be reported.
    trainer_cp.set_parallel_state(1, 0)
    data = rollout(cp=1, r=0, qkv_format=fmt)
    slice_with_cp = wrap_slice_with_cp(trainer_cp.slice_with_cp, parallel_state=trainer_cp.get_parallel_state)
    slice_log_prob = wrap_slice_log_prob_with_cp(trainer_cp.slice_log_prob_with_cp,
                                                 parallel_state=trainer_cp.get_parallel_state)
    padded = 384 if fmt == "bshd" else None
    whole = tag(torch.zeros(200), geometry_of(data["loss_masks"][0]).evolve(field="rollout_log_probs"))
    for mode in ("raise", "warn", "record"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning in warn mode fails the test too
            tracer = Tracer(mode, enabled=True, layout=fmt)
            with tracer:
                once = slice_with_cp(data["tokens"][0], 0, fmt, padded)
                twice = slice_with_cp(once, 0, fmt, padded)
                lp = slice_log_prob(slice_log_prob(whole, 300, 200, fmt, padded), 300, 200, fmt, padded)
        assert tracer.violations == [], [v.problem for v in tracer.violations]
        assert torch.equal(once, twice) and twice.shape == ((384,) if fmt == "bshd" else (300,))
        assert lp.numel() == 200


def test_at_cp_1_a_second_slice_to_another_length_is_still_flagged():
    # what the data hold decides: a repeated BSHD slice to another P pads a laid-out sample again (G3)
    trainer_cp.set_parallel_state(1, 0)
    data = rollout(cp=1, r=0)
    slice_with_cp = wrap_slice_with_cp(trainer_cp.slice_with_cp, parallel_state=trainer_cp.get_parallel_state)

    def twice():
        slice_with_cp(slice_with_cp(data["tokens"][0], 0, "bshd", 384), 0, "bshd", 1024)

    (v,) = flagged(twice)
    assert v.invariant == "G3" and v.actual == 1024, v
