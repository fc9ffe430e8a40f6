"""The whole-call comparisons of a boundary's clean path decide exactly what the per-sample checks decide.

A clean call of a boundary contract is judged by whole columns of ints
(`invariants.lengths_in`) and, for B6 on a packed stream, by one comparison
of the stream with its samples laid out (`content._clean_stream`); only a
call with something to name goes sample by sample. Each test draws calls,
right and broken, and holds the shortcut to the per-sample answer (and the
return value bound on top of the arguments to binding them all at once). A
call whose ints passed B1-B5 before skips them: a boundary that keeps those
verdicts reports word for word what one that checks every call reports.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from layoutcheck.runtime.checker import content  # noqa: E402
from layoutcheck.runtime.contract import invariants  # noqa: E402
from layoutcheck.runtime.contract.boundary import parse_field  # noqa: E402
from layoutcheck.spaces import CPPart, SampleLengths, Space  # noqa: E402

FAST = settings(max_examples=200, deadline=None)


@st.composite
def streams(draw):
    """A packed stream of a call's samples on one CP rank: laid out right by the per-sample helpers, or broken."""
    n = draw(st.integers(1, 6))
    totals = draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))
    unit = draw(st.sampled_from([1, 4, 8]))
    padded = [-(-t // unit) * unit for t in totals]
    cp = draw(st.sampled_from([1, 2, 3]))
    rank = draw(st.integers(0, cp - 1))
    shift = draw(st.sampled_from([-1, 0, 1]))
    side = draw(st.sampled_from([None, "left"]))
    rows = draw(st.sampled_from([(), (2,)]))
    dtype = draw(st.sampled_from([torch.int64, torch.float32]))
    space = Space("P", packed=True, cp=CPPart("zigzag") if cp > 1 else None, shift=shift, pad_side=side)
    layout = content.Layout(space=space, source_space=Space("T"), cp=cp, rank=rank, pad_value=-1,
                            stream_unit=draw(st.sampled_from([1, 4])), axis=1)
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    sources = [torch.randint(0, 50, (t, *rows), generator=gen).to(dtype) for t in totals]
    samples = [SampleLengths(total=t, padded=p) for t, p in zip(totals, padded)]
    parts = [content._rank_part(content._expected_part(d, s, layout)[0], layout) for d, s in zip(sources, samples)]
    stream = torch.cat(parts)
    total = -(-stream.shape[0] // layout.stream_unit) * layout.stream_unit
    stream = torch.cat([stream, torch.full((total - stream.shape[0], *rows), -1, dtype=dtype)])
    broken = draw(st.sampled_from(["none", "value", "short", "swap"]))
    if broken == "value" and stream.shape[0]:
        stream[draw(st.integers(0, stream.shape[0] - 1))] += 7
    elif broken == "short":
        stream = stream[: max(stream.shape[0] - draw(st.integers(1, 5)), 0)]
    elif broken == "swap" and n > 1:
        sources = sources[1:] + sources[:1]  # the stream holds the samples in another order than its source
        samples = samples[1:] + samples[:1]
    return stream.unsqueeze(0), sources, samples, layout, broken


def _check(stream, sources, samples, layout):
    return content.check_content(stream, sources, samples, layout, key="returns.ids", source_key="args.ids",
                                 where="f (call 1)", space_text="P packed cp", packed=True, sizes={})


@FAST
@given(streams())
def test_the_stream_shortcut_accepts_only_what_the_per_sample_check_passes(drawn):
    stream, sources, samples, layout, broken = drawn
    content._LOOKUPS[1] = 0  # the pieces looked up by geometry (after many new geometries in a row, rarely)
    clean = content._clean_stream(stream, sources, samples, layout)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(content, "_clean_stream", lambda *a, **k: False)  # the per-sample check alone
        slow = _check(stream, sources, samples, layout)
    if clean:
        assert slow == []
    if broken == "none":
        assert clean and slow == []  # the right stream takes the shortcut
    fast = _check(stream, sources, samples, layout)
    assert fast == slow  # the same violations, word for word
    # the pieces are kept by the stream's geometry: asked again (the kept pieces), the same answer
    content._LOOKUPS[1] = 0
    assert content._clean_stream(stream, sources, samples, layout) == clean


@FAST
@given(st.sampled_from([torch.int64, torch.int32, torch.float32, torch.float64, torch.bool, torch.bfloat16]),
       st.integers(0, 40), st.sampled_from(["same", "one", "nan", "zero", "grad", "dtype", "shorter", "view"]))
def test_the_comparison_of_host_tensors_is_torch_equal(dtype, n, change):
    gen = torch.Generator().manual_seed(n)
    seen = torch.randint(0, 5, (n, 2), generator=gen).to(dtype)
    want = seen.clone()
    if change == "one" and n:
        want[n // 2, 1] = 7 if dtype != torch.bool else not bool(want[n // 2, 1])
    elif change == "nan" and n and dtype.is_floating_point:
        seen[0, 0] = want[0, 0] = float("nan")  # NaN equals nothing, itself included
    elif change == "zero" and dtype.is_floating_point:
        seen, want = torch.zeros(n, 2, dtype=dtype), -torch.zeros(n, 2, dtype=dtype)  # -0.0 == 0.0
    elif change == "grad" and dtype.is_floating_point:
        want = want.requires_grad_()  # numpy cannot view it: torch compares
    elif change == "dtype":
        want = want.to(torch.float64 if dtype != torch.float64 else torch.float32)
    elif change == "shorter":
        want = want[: max(n - 1, 0)]
    elif change == "view":
        seen = torch.stack([seen, seen], dim=1)[:, 0]  # a strided view
    assert content.equal(seen, want) == torch.equal(seen, want)


def test_the_stream_shortcut_leaves_sources_of_another_shape_to_the_per_sample_check():
    # Sample 1 (T=1 of P=8) has no true position on rank 1 of cp=2, so no piece of the expected stream is cut
    # from it; its source is 2-D where the stream is 1-D. Concatenating every source would fail, and the shortcut
    # must answer "not known" (the per-sample check judges it), never "clean".
    space = Space("P", packed=True, cp=CPPart("zigzag"))
    layout = content.Layout(space=space, source_space=Space("T"), cp=2, rank=1, pad_value=0, axis=1)
    sources = [torch.arange(1, 9), torch.ones(1, 2, dtype=torch.int64)]
    stream = torch.cat([torch.arange(3, 7), torch.zeros(4, dtype=torch.int64)]).unsqueeze(0)
    assert content.clean_stream(stream, sources, [8, 1], [8, 8], layout) is False
    assert content.clean_stream(torch.arange(3, 7).unsqueeze(0), sources[:1], [8], [8], layout) is True  # sample 0


@st.composite
def bounds(draw):
    n = draw(st.integers(0, 8))
    column = st.lists(st.one_of(st.none(), st.integers(-2, 60)), min_size=n, max_size=n)
    bound = invariants.Bound(n=n)
    for quantity in draw(st.sets(st.sampled_from(["T", "R", "P"]))):
        bound.columns[quantity] = draw(column)
    space = Space(draw(st.sampled_from(["T", "R", "T-1", "P"])), shift=draw(st.sampled_from([-1, 0, 1])),
                  cp=draw(st.sampled_from([None, CPPart("zigzag"), CPPart("zigzag", size=1)])))
    cp = draw(st.sampled_from([1, 2]))
    return bound, space, cp, draw(st.integers(0, cp - 1))


@FAST
@given(bounds())
def test_lengths_in_a_space_are_each_samples_length(drawn):
    bound, space, cp, rank = drawn
    if space.cp is not None and space.basis == "T" and cp > 1:
        space = Space("P", cp=space.cp)  # a T axis has no CP-local length: the space cannot be written
    want = [None if s is None else invariants._cached_length(space, s, cp, rank) for s in bound.samples()]
    assert invariants.lengths_in(space, bound, cp, rank) == want


_BINDING = [("args.a", "T", "args"), ("args.b", "T-1", "args"), ("args.c", "len P", "args"),
            ("returns.d", "len T", "returns"), ("returns.e", "len P", "returns"), ("returns.f", "T-1", "returns")]


@st.composite
def readings(draw):
    """Fields of both sides that bind T and P, each sample's length drawn to agree or not with the others."""
    n = draw(st.integers(1, 6))
    truth = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    out = []
    for key, text, root in draw(st.lists(st.sampled_from(_BINDING), min_size=1, max_size=6, unique=True)):
        f = parse_field(key, text, root=root)
        base = [t - 1 if text == "T-1" else t for t in truth]
        lengths = [draw(st.sampled_from([b, b + 1, -1])) for b in base]  # the sample's, another, a shapeless entry
        out.append(invariants.Reading(spec=f, space=f.space, shape="ints" if text.startswith("len") else "list",
                                      lengths=lengths[:draw(st.integers(0, n))] if draw(st.booleans()) else lengths))
    return out, n


@FAST
@given(readings())
def test_binding_the_returns_on_top_of_the_arguments_is_binding_them_all(drawn):
    rs, n = drawn
    args = [r for r in rs if r.spec.path.root == "args"]
    rets = [r for r in rs if r.spec.path.root == "returns"]
    together, found = invariants.bind(args + rets, n, "f (call 1)", {})
    first, before = invariants.bind(args, n, "f (call 1)", {})
    columns = {q: list(c) for q, c in first.columns.items()}
    after, more = invariants.bind(rets, n, "f (call 1)", {}, start=first)
    assert first.columns == columns  # the start is not changed
    assert (after.columns, after.by, after.spaces) == (together.columns, together.by, together.spaces)
    assert before + more == found


# --- a call whose ints passed B1-B5 before ----------------------------------------------------------------


class _Ranks:
    cp, rank, tp = 2, 1, 2


RANKS = _Ranks()

_PACK = {
    "args": {"seqs": "T", "lengths": "len P"},
    "returns": {"0": {"space": "P packed cp", "from": "args.seqs", "pad-value": 0}, "1": "cu P packed"},
    "unit": ["2 * cp", "tp * 4"],
}


def _zigzag(t, length, pad=0):
    cp, r = RANKS.cp, RANKS.rank
    c = -(-length // (2 * cp))
    t = torch.cat([t, t.new_full((2 * cp * c - t.shape[0],), pad)])
    return torch.cat([t[r * c:(r + 1) * c], t[(2 * cp - 1 - r) * c:(2 * cp - r) * c]])


def _pack(seqs, lengths, broken="none"):
    """Each sequence padded to its length, this rank's zigzag part, one stream; ``broken``: one planted fault."""
    order = list(range(len(seqs)))
    if broken == "order":
        order.reverse()
    parts = [_zigzag(seqs[i], lengths[i]) for i in order]
    if broken == "value":
        parts[-1] = parts[-1].clone()
        parts[-1][0] += 100
    if broken == "unsliced":
        parts[0] = torch.cat([seqs[order[0]], seqs[order[0]].new_zeros(lengths[order[0]] - seqs[order[0]].shape[0])])
    cu = [0]
    for i in order:
        cu.append(cu[-1] + lengths[i])
    if broken == "cu":
        cu[-1] += 4
    out = [torch.cat(parts).unsqueeze(0), cu]
    return out if broken != "drop" else [torch.cat(parts[:-1] or [parts[0][:0]]).unsqueeze(0), cu[:-1]]


@st.composite
def pack_calls(draw):
    """A run of calls over a few batches (so that their ints repeat), each call right or with one fault."""
    batches = []
    for _ in range(draw(st.integers(1, 3))):
        totals = draw(st.lists(st.integers(1, 30), min_size=1, max_size=5))
        unit = draw(st.sampled_from([8, 4, 16]))  # 8 = lcm(2 * cp, tp * 4); 4 leaves B3 to catch, 16 B2
        seqs = [torch.arange(1, t + 1) * 10 + k for k, t in enumerate(totals)]
        batches.append((seqs, [-(-t // unit) * unit for t in totals]))
    kinds = st.sampled_from(["none", "none", "value", "order", "unsliced", "cu", "drop"])
    return [(batches[draw(st.integers(0, len(batches) - 1))], draw(kinds)) for _ in range(draw(st.integers(1, 8)))]


@FAST
@given(pack_calls())
def test_a_boundary_that_keeps_clean_verdicts_reports_what_checking_every_call_reports(calls):
    from layoutcheck import LayoutChecker
    from layoutcheck.runtime.checker.boundaries import Coordinates
    from layoutcheck.runtime.contract.boundary import parse_boundary, parse_source

    coords = Coordinates(tp_size=parse_source(f"{__name__}:RANKS.tp", what="tp"),
                         cp_size=parse_source(f"{__name__}:RANKS.cp", what="cp"),
                         cp_rank=parse_source(f"{__name__}:RANKS.rank", what="rank"))

    def pack(seqs, lengths, broken):
        return _pack(seqs, lengths, broken)

    spec = parse_boundary(f"{__name__}:pack", _PACK, source_file="t.toml")
    kept, every = LayoutChecker("record"), LayoutChecker("record")
    fast, slow = kept.wrap_boundary(spec, pack, coords), every.wrap_boundary(spec, pack, coords)
    slow.__layoutcheck_boundary__._clean = None  # every call checked in full
    for (seqs, lengths), broken in calls:
        fast(seqs, lengths, broken)
        slow(seqs, lengths, broken)
        assert [str(v) for v in kept.violations] == [str(v) for v in every.violations]  # word for word
        assert kept.notes == every.notes == []
        if broken == "none" and lengths == [-(-s.shape[0] // 8) * 8 for s in seqs]:
            assert fast.__layoutcheck_boundary__._clean  # a right call's ints are kept
            assert fast.__layoutcheck_boundary__._fast_kept  # and its readings, for calls read by the fast reading
    if any(b == "value" for _, b in calls):
        assert any(v.invariant == "B6" for v in kept.violations)  # values are compared on every call


def test_a_wrong_value_after_a_clean_call_with_the_same_ints_is_still_named():
    from layoutcheck import LayoutChecker
    from layoutcheck.runtime.checker.boundaries import Coordinates
    from layoutcheck.runtime.contract.boundary import parse_boundary, parse_source

    coords = Coordinates(tp_size=parse_source(f"{__name__}:RANKS.tp", what="tp"),
                         cp_size=parse_source(f"{__name__}:RANKS.cp", what="cp"),
                         cp_rank=parse_source(f"{__name__}:RANKS.rank", what="rank"))
    checker = LayoutChecker("record")
    pack = checker.wrap_boundary(parse_boundary(f"{__name__}:_pack", _PACK, source_file="t.toml"), _pack, coords)
    seqs = [torch.arange(1, t + 1) for t in (5, 13, 2)]
    lengths = [8, 16, 8]
    pack(seqs, lengths)
    assert checker.violations == [] and len(pack.__layoutcheck_boundary__._clean) == 1
    pack(seqs, lengths, "value")  # the same ints: B1-B5 skipped, the values compared
    assert [(v.invariant, v.sample) for v in checker.violations] == [("B6", 2)]
    pack(seqs, lengths, "cu")  # other ints: checked in full
    assert {v.invariant for v in checker.violations[1:]} == {"B1", "B4"}


def test_a_boundary_whose_lengths_never_repeat_stops_looking_them_up_until_they_do():
    from layoutcheck import LayoutChecker
    from layoutcheck.runtime.checker import boundaries
    from layoutcheck.runtime.contract.boundary import parse_boundary

    def plan(seqs):
        return [-(-s.shape[0] // 8) * 8 for s in seqs]

    checker = LayoutChecker("record")
    hooked = checker.wrap_boundary(parse_boundary(f"{__name__}:plan", {"args": {"seqs": "T"}, "returns": "len P",
                                                                        "unit": [8]}, source_file="t.toml"), plan)
    calls = hooked.__layoutcheck_boundary__
    for n in range(1, boundaries._MISSES + 9):  # new lengths at every call
        hooked([torch.ones(n), torch.ones(n + 3)])
    assert calls._missed == boundaries._MISSES  # no key made since: one call in _MISSES looks its ints up
    kept = len(calls._clean)
    for _ in range(boundaries._MISSES):  # lengths met before, again and again: a lookup finds them
        hooked([torch.ones(5), torch.ones(8)])
    assert calls._missed == 0 and len(calls._clean) <= kept + 1
    hooked([torch.ones(5), torch.ones(8)])  # from now on every call is looked up, and found
    assert calls._missed == 0 and checker.violations == [] and checker.notes == []


@FAST
@given(streams(), st.sampled_from(["as drawn", "as drawn", "bfloat16", "grad", "another dtype"]))
def test_the_stream_built_in_numpy_answers_as_the_stream_built_in_torch(drawn, change):
    # CPU sources numpy can view are cut, padded and joined as numpy slices of views of them; anything else
    # (bfloat16, a tensor that requires grad, sources of another dtype than the stream's) goes the torch way. Either way the answer is the torch build's (numpy absent), and a
    # planted wrong value is never taken for a clean stream.
    stream, sources, samples, layout, broken = drawn
    if change == "bfloat16":
        stream, sources = stream.bfloat16(), [s.bfloat16() for s in sources]
    elif change == "grad":
        stream, sources = stream.float(), [s.float().requires_grad_() for s in sources]
    elif change == "another dtype" and len(sources) > 1:
        other = torch.float64 if stream.dtype.is_floating_point else torch.int32
        sources = sources[:1] + [s.to(other) for s in sources[1:]]
    content._LOOKUPS[1] = 0
    with pytest.MonkeyPatch.context() as m:
        m.setattr(content, "_NUMPY", [None])  # torch without numpy
        by_torch = content._clean_stream(stream, sources, samples, layout)
    by_numpy = content._clean_stream(stream, sources, samples, layout)
    assert by_numpy == by_torch
    if broken == "value":
        assert by_numpy is False  # the planted value is found (the per-sample check then names it)
    elif broken == "none":
        assert by_numpy is True
    # the numpy build itself, on the stream's pieces: the torch answer where numpy can view every tensor and every
    # source has the stream's dtype, and a refusal (the torch build then answers) where it cannot
    seen = stream[0]
    counts = [s.shape[0] for s in sources]
    plan = content._stream_plan(counts, [s.padded for s in samples], layout, seen.shape[0])
    if plan is None or not plan[4]:
        return  # nothing cut from a source: the torch build (one `cat` of the sources) is the cheaper
    args = (__import__("numpy"), torch, seen, sources, counts, *plan[:4], layout, sources[0].dtype,
            tuple(sources[0].shape[1:]))
    if change in ("bfloat16", "grad") or any(sources[i].dtype != stream.dtype for i, _, _ in plan[0]):
        with pytest.raises((TypeError, RuntimeError)):
            content._numpy_stream_equal(*args)
    else:
        assert content._numpy_stream_equal(*args) == by_torch


def _padded(seqs, lengths, pad=0, fill=0):
    """Each sequence padded to its length with ``fill`` (the contract says ``pad``), one stream (no CP)."""
    seqs = [torch.as_tensor(s) for s in seqs]
    return torch.cat([torch.cat([s, s.new_full((n - s.shape[0],), fill)]) for s, n in zip(seqs, lengths)])


_PADDED = {"args": {"seqs": "T", "lengths": "len P"},
           "returns": {"space": "P packed", "from": "args.seqs", "pad-value": "pad"}, "unit": [4]}


def test_a_call_read_by_the_fast_reading_is_judged_on_its_own_values_and_its_own_pad_value():
    from layoutcheck import LayoutChecker
    from layoutcheck.runtime.contract.boundary import parse_boundary

    kept, every = LayoutChecker("record"), LayoutChecker("record")
    spec = parse_boundary(f"{__name__}:_padded", _PADDED, source_file="t.toml")
    fast, slow = kept.wrap_boundary(spec, _padded), every.wrap_boundary(spec, _padded)
    slow.__layoutcheck_boundary__._clean = None  # every call read and checked in full
    seqs, lengths = [torch.arange(1, 6), torch.arange(1, 4)], [8, 4]
    calls = [((seqs, lengths), {}),  # clean: kept
             ((seqs, lengths), {"pad": 1}),  # the same ints, another pad value: the pads are wrong now
             ((seqs, lengths), {"pad": 7, "fill": 7}),  # right again
             ((tuple(seqs), lengths), {"fill": 3}),  # a tuple where the plan saw a list: read in full, wrong pads
             (([seqs[0], seqs[1].numpy()], lengths), {"fill": 0})]  # a numpy entry: read in full
    for args, kwargs in calls:
        fast(*args, **kwargs)
        slow(*args, **kwargs)
        assert [str(v) for v in kept.violations] == [str(v) for v in every.violations]  # word for word
        assert kept.notes == every.notes
    assert fast.__layoutcheck_boundary__._fast_kept  # the first call's readings were kept
    assert [v.invariant for v in kept.violations] == ["B6", "B6"] and "should hold a pad" in str(kept.violations[0])


class _Episode:
    """A trainer's sample: plain attributes, read by `args.episodes.*.name`."""

    def __init__(self, ids, logp):
        self.ids, self.logp = ids, logp


class _OtherEpisode(_Episode):
    """Another class of sample in the same list: the fast reading's one look at the entries' class must see it."""


class _Packed:
    def __init__(self, ids, logp):
        self.ids, self.logp = ids, logp


_RUN = {"cp": 1, "rank": 0}


def _tp_size():
    return 1


def _cp_size():
    return _RUN["cp"]


def _cp_rank():
    return _RUN["rank"]


def _pack_episodes(episodes, lengths, fill=0):
    return _Packed(_padded([e.ids for e in episodes], lengths, fill=fill),
                   _padded([e.logp for e in episodes], lengths, fill=fill))


_EPISODES = {"args": {"episodes.*.ids": "T", "episodes.*.logp": "T", "lengths": "len P"},
             "returns": {"ids": {"space": "P packed", "from": "args.episodes.*.ids", "pad-value": 0},
                         "logp": {"space": "P packed", "from": "args.episodes.*.logp", "pad-value": 0}},
             "unit": [4], "tp-size": f"{__name__}:_tp_size", "cp-size": f"{__name__}:_cp_size", "cp-rank": f"{__name__}:_cp_rank"}


def test_the_fast_reading_of_two_fields_of_one_list_is_judged_as_the_full_reading():
    # `episodes.*.ids` and `episodes.*.logp` are read with one look at the entries' class, and the coordinates by
    # their functions directly: a call with another class of entry, a numpy entry, a wrong value, other coordinates
    # and a coordinate that is not valid is judged word for word as a boundary that reads every call in full
    from layoutcheck import LayoutChecker
    from layoutcheck.runtime.contract.boundary import parse_boundary

    kept, every = LayoutChecker("record"), LayoutChecker("record")
    spec = parse_boundary(f"{__name__}:_pack_episodes", _EPISODES, source_file="t.toml")
    fast, slow = kept.wrap_boundary(spec, _pack_episodes), every.wrap_boundary(spec, _pack_episodes)
    slow.__layoutcheck_boundary__._clean = None  # every call read and checked in full
    one = [_Episode(torch.arange(1, 6), torch.arange(5) * 0.5), _Episode(torch.arange(1, 4), torch.arange(3) * 0.25)]
    other = [one[0], _OtherEpisode(one[1].ids, one[1].logp)]
    short = [one[0], _Episode(one[1].ids, one[1].logp[:2])]  # logp shorter than ids: T differs between fields
    arrays = [one[0], _Episode(one[1].ids.numpy(), one[1].logp)]
    calls = [(one, {}, {"cp": 1, "rank": 0}),  # clean: kept
             (one, {}, {"cp": 1, "rank": 0}),  # the same: the last kept call
             (one, {"fill": 9}, {"cp": 1, "rank": 0}),  # the same ints, wrong pads: B6 on its own values
             (other, {}, {"cp": 1, "rank": 0}),  # another class among the entries
             (short, {}, {"cp": 1, "rank": 0}),  # a field's lengths differ: B1 (the key differs)
             (arrays, {}, {"cp": 1, "rank": 0}),  # a numpy entry: read in full
             (one, {}, {"cp": 2, "rank": 1}),  # other coordinates: another key (the stream is not this rank's)
             (one, {}, {"cp": 2, "rank": 2}),  # a rank not below the CP size: the configuration error, named
             (one, {}, {"cp": 1, "rank": 0})]  # back: the kept call
    for episodes, kwargs, run in calls:
        _RUN.update(run)
        for wrapped in (fast, slow):
            wrapped(episodes, [8, 4], **kwargs)
        assert [str(v) for v in kept.violations] == [str(v) for v in every.violations]  # word for word
        assert kept.notes == every.notes
    _RUN.update(cp=1, rank=0)
    hook = fast.__layoutcheck_boundary__
    assert hook._fast_last is not None and hook._plan_groups  # the calls went through the fast reading
    assert hook.coordinates._getters is not None  # and the coordinates by their three functions
    assert {v.invariant for v in kept.violations} >= {"B6", "B1"}
    assert any("not below the CP size" in str(n) for n in kept.notes)


# --- the pieces kept with a clean call's ints (`content.stream_pieces`, `content.pieces_equal`) ----------------


@FAST
@given(streams())
def test_the_kept_pieces_answer_as_the_stream_shortcut(drawn):
    # A stream compared by the pieces worked out for its geometry says "clean" exactly where `clean_stream` does
    stream, sources, samples, layout, broken = drawn
    totals, padded = [s.total for s in samples], [s.padded for s in samples]
    plan = content.stream_pieces(stream, totals, padded, layout, [d.shape[0] for d in sources])
    content._LOOKUPS[1] = 0
    clean = content._clean_stream(stream, sources, samples, layout)
    if stream.dim() == 2 and broken != "short":  # one axis, long enough: the pieces fit every such stream
        assert plan is not None
    if plan is not None:
        assert content.pieces_equal(stream, sources, plan, layout.pad_value) == clean
        if broken == "none":
            assert clean


def test_the_kept_pieces_refuse_what_the_stream_shortcut_refuses():
    # What `clean_stream` leaves to the per-sample check, the pieces do too: a source with another axis that no
    # piece is cut from, a first source of another dtype, a tensor numpy cannot view, a pad value that is not a number
    space = Space("P", packed=True, cp=CPPart("zigzag"))
    layout = content.Layout(space=space, source_space=Space("T"), cp=2, rank=1, pad_value=0, axis=1)
    right = [torch.arange(1, 9), torch.ones(1, dtype=torch.int64)]
    stream = torch.cat([torch.arange(3, 7), torch.zeros(4, dtype=torch.int64)]).unsqueeze(0)
    plan = content.stream_pieces(stream, [8, 1], [8, 8], layout, [8, 1])
    assert plan is not None and content.pieces_equal(stream, right, plan, 0) is True
    for sources in ([right[0], torch.ones(1, 2, dtype=torch.int64)],  # sample 1: T=1, no true position on rank 1
                    [right[0].to(torch.int32), right[1]]):  # the first source of another dtype than the stream's
        assert content.clean_stream(stream, sources, [8, 1], [8, 8], layout) is False
        assert content.pieces_equal(stream, sources, plan, 0) is False
    grads = [right[0].double().requires_grad_(), right[1].double()]  # numpy cannot view it: torch's build answers
    assert content.pieces_equal(stream.double(), grads, plan, 0) is False
    assert content.clean_stream(stream.double(), grads, [8, 1], [8, 8], layout) is True
    assert content.pieces_equal(stream, right, plan, "pad") is False
    floats = [d.to(torch.bfloat16) for d in right]
    assert content.pieces_equal(stream.to(torch.bfloat16), floats, plan, 0) is False  # numpy has no bfloat16
    assert content.clean_stream(stream.to(torch.bfloat16), floats, [8, 1], [8, 8], layout) is True  # torch's answer


def _pack_zigzag(episodes, lengths, pad=0, broken="none", at=(0, 0)):
    """packthd's `pack` on `_RUN`'s rank: ids padded with ``pad``, log-probs (T-1) with 0, this rank's zigzag
    chunks, one stream each; ``broken``: one planted fault at (sample, position) ``at``."""
    cp, rank = _RUN["cp"], _RUN["rank"]

    def zigzag(t, length, fill):
        c = -(-length // (2 * cp))
        t = torch.cat([t, t.new_full((2 * cp * c - t.shape[0],), fill)])
        return torch.cat([t[rank * c:(rank + 1) * c], t[(2 * cp - 1 - rank) * c:(2 * cp - rank) * c]])

    ids = [zigzag(e.ids, n, pad) for e, n in zip(episodes, lengths)]
    logp = [zigzag(e.logp, n, 0.0) for e, n in zip(episodes, lengths)]
    j, k = at
    if broken in ("true", "pad"):  # a true position, or a pad, of sample j changed (where it has one on this rank)
        where = torch.nonzero((ids[j] != pad) if broken == "true" else (ids[j] == pad)).flatten()
        if where.numel():
            ids[j] = ids[j].clone()
            ids[j][where[k % where.numel()]] += 1000
    elif broken == "logp" and logp[j].numel():
        logp[j] = logp[j].clone()
        logp[j][k % logp[j].numel()] += 0.5
    elif broken == "swap" and len(ids) > 1:  # two samples' parts exchanged
        ids[0], ids[-1] = ids[-1], ids[0]
    return _Packed(torch.cat(ids).unsqueeze(0), torch.cat(logp).unsqueeze(0))


_ZIGZAG = {"args": {"episodes.*.ids": "T", "episodes.*.logp": "T-1", "lengths": "len P"},
           "returns": {"ids": {"space": "P packed cp", "from": "args.episodes.*.ids", "pad-value": "pad"},
                       "logp": {"space": "P packed cp", "from": "args.episodes.*.logp", "pad-value": 0}},
           "unit": ["2 * cp", 4], "tp-size": f"{__name__}:_tp_size", "cp-size": f"{__name__}:_cp_size",
           "cp-rank": f"{__name__}:_cp_rank"}


@st.composite
def zigzag_runs(draw):
    """A CP rank and a run of calls over one or two batches (their ints repeat): each right or with one fault."""
    cp = draw(st.sampled_from([1, 2, 3]))
    rank = draw(st.integers(0, cp - 1))
    batches = []
    for b in range(draw(st.integers(1, 2))):
        totals = draw(st.lists(st.integers(2, 30), min_size=1, max_size=6))
        episodes = [_Episode(torch.arange(1, t + 1) * 7 + 1000 * k + b, torch.arange(1, t) * 0.25 + k) for k, t in enumerate(totals)]
        unit = math.lcm(2 * cp, 4)
        batches.append((episodes, [-(-t // unit) * unit for t in totals]))  # right lengths: the faults are values
    call = st.tuples(st.integers(0, len(batches) - 1),
                     st.sampled_from(["none", "true", "pad", "logp", "swap"]),
                     st.tuples(st.integers(0, 5), st.integers(0, 60)), st.sampled_from([0, -1]))
    calls = [(0, "none", (0, 0), 0), (0, "none", (0, 0), 0)] + draw(st.lists(call, min_size=1, max_size=6))
    return cp, rank, batches, calls


@settings(max_examples=60, deadline=None)
@given(zigzag_runs())
def test_a_call_whose_streams_are_compared_by_kept_pieces_is_judged_as_the_full_check(run):
    # A boundary whose fast reading compares packed streams by the pieces kept with a clean call's ints reports,
    # word for word, what a boundary that reads and checks every call in full reports: over CP ranks, shifted
    # sources, pads, and a true position, a pad or a log-prob changed in any one sample, or two samples exchanged
    from layoutcheck import LayoutChecker
    from layoutcheck.runtime.contract.boundary import parse_boundary

    cp, rank, batches, calls = run
    _RUN.update(cp=cp, rank=rank)
    try:
        kept, every = LayoutChecker("record"), LayoutChecker("record")
        spec = parse_boundary(f"{__name__}:_pack_zigzag", _ZIGZAG, source_file="t.toml")
        fast, slow = kept.wrap_boundary(spec, _pack_zigzag), every.wrap_boundary(spec, _pack_zigzag)
        slow.__layoutcheck_boundary__._clean = None  # every call read and checked in full
        for b, broken, at, pad in calls:
            episodes, lengths = batches[b]
            at = (at[0] % len(episodes), at[1])
            for wrapped in (fast, slow):
                wrapped(episodes, lengths, pad=pad, broken=broken, at=at)
            # word for word, after every call: a fault the kept pieces missed would be missing here at its call
            assert [str(v) for v in kept.violations] == [str(v) for v in every.violations]
            assert kept.notes == every.notes == []
        if any(broken == "logp" for _, broken, _, _ in calls):  # a log-prob changed: named, whichever its sample
            assert any(v.field == "returns.logp" for v in kept.violations)
        hook = fast.__layoutcheck_boundary__
        pieces = [p for entry in hook._fast_kept.values() for p in entry[5].values()]
        assert len(pieces) >= 2 and all(isinstance(p, content.StreamPieces) for p in pieces)  # the kept pieces ran
    finally:
        _RUN.update(cp=1, rank=0)
