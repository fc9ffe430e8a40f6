"""The whole-call comparisons of a boundary's clean path decide exactly what the per-sample checks decide.

A clean call of a boundary contract is judged by whole columns of ints
(`invariants.lengths_in`) and, for B6 on a packed stream, by one comparison
of the stream with its samples laid out (`content._clean_stream`); only a
call with something to name goes sample by sample. Each test draws calls,
right and broken, and holds the shortcut to the per-sample answer (and the
return value bound on top of the arguments to binding them all at once).
"""

from __future__ import annotations

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
