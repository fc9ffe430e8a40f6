"""Facts read back from the cache have exactly the types they had when extracted.

The cache stores facts as JSON, which has arrays, not tuples: a span read back
as a list once made LC113 crash (``unhashable type: 'list'``) on every file of
a tree, on the second run only. So every fixture file's facts go through both
forms (the cache's, `cache_data` through `marshal` with its lazily decoded
calls, and JSON's, `to_data`) and are compared with the fresh ones value by
value and type by type.
"""

from __future__ import annotations

import dataclasses
import json
import marshal
from pathlib import Path
from typing import Any

import pytest

from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.extract import extract
from layoutcheck.model.facts import (
    Arg, Call, FileFacts, Function, Span, cache_data, calls_may_spell, ensure_calls, ensure_function_calls,
    from_cache_data, from_data, to_data,
)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted((ROOT / "fixtures").rglob("*.py"))


def assert_same(fresh: Any, back: Any, where: str) -> None:
    """``back`` equals ``fresh`` and every value in it has the same type, recursively."""
    assert type(back) is type(fresh), f"{where}: {type(fresh).__name__} when fresh, {type(back).__name__} cached"
    if dataclasses.is_dataclass(fresh):
        for f in dataclasses.fields(fresh):
            assert_same(getattr(fresh, f.name), getattr(back, f.name), f"{where}.{f.name}")
    elif isinstance(fresh, (tuple, list)):
        assert len(back) == len(fresh), f"{where}: {len(fresh)} items when fresh, {len(back)} cached"
        names = getattr(fresh, "_fields", None)  # a NamedTuple: name its fields
        for i, (a, b) in enumerate(zip(fresh, back)):
            assert_same(a, b, f"{where}.{names[i]}" if names else f"{where}[{i}]")
    else:
        assert back == fresh, f"{where}: {fresh!r} when fresh, {back!r} cached"


def through_cache(facts: FileFacts) -> FileFacts:
    """What a later run reads: the file entry as `layoutcheck.lint.cache` writes it, its calls decoded."""
    blob = marshal.dumps({"facts": cache_data(facts)})
    back = from_cache_data(marshal.loads(blob)["facts"])
    ensure_calls(back)
    return back


# The module's module-scoped fixture runs once: its tests all go to one xdist worker
# (`--dist loadgroup` in pyproject.toml) instead of each worker paying for it.
pytestmark = pytest.mark.xdist_group("test_cache_types")


@pytest.fixture(scope="module")
def fixture_facts() -> list[tuple[str, FileFacts]]:
    out = []
    for path in FIXTURES:
        facts = extract(path.read_text(encoding="utf-8"), LintSettings())
        out.append((str(path.relative_to(ROOT)), facts))
    return out


def test_every_fixture_file_reads_back_from_the_cache_with_its_types(fixture_facts) -> None:
    assert len(fixture_facts) > 100
    walked = [facts for _, facts in fixture_facts if facts.extracted]
    # The fixtures exercise the typed fields (spans, pad sides, full arguments) that broke.
    assert any(facts.sides for facts in walked)
    assert any(arg.span is not None for facts in walked for f in facts.functions for c in f.calls for arg in c.args)
    for name, facts in fixture_facts:
        assert_same(facts, through_cache(facts), name)
        assert_same(facts, from_data(json.loads(json.dumps(to_data(facts)))), name)


def test_facts_read_back_with_their_calls_pending_are_written_back_whole(fixture_facts) -> None:
    """A worker's facts reach the run's process in the cache form, their calls undecoded; written
    to the cache again (`cache_data`) they keep their calls, not the empty ones they hold so far."""
    with_calls = [(name, facts) for name, facts in fixture_facts if any(f.calls for f in facts.functions)]
    assert with_calls
    for name, facts in with_calls:
        pending = from_cache_data(marshal.loads(marshal.dumps(cache_data(facts))))
        assert not any(f.calls for f in pending.functions)  # still pending
        again = from_cache_data(marshal.loads(marshal.dumps(cache_data(pending))))
        ensure_calls(again)
        assert_same(facts, again, name)


def test_one_def_decoded_alone_has_its_calls_and_leaves_the_others_pending(fixture_facts) -> None:
    """`ensure_function_calls` (what `ProjectGraph.function` asks) decodes one ``def`` 's calls, typed as
    fresh, and only its: the file stays pending (its call names still answer), written back it keeps
    every call, and decoding the rest later gives each ``def`` its own calls, the first one's unchanged."""
    with_calls = [(name, facts) for name, facts in fixture_facts
                  if sum(bool(f.calls) for f in facts.functions) >= 2]
    assert with_calls
    for name, facts in with_calls:
        first, second = [i for i, f in enumerate(facts.functions) if f.calls][:2]
        pending = from_cache_data(marshal.loads(marshal.dumps(cache_data(facts))))
        function = ensure_function_calls(pending, second)
        assert function is pending.functions[second]
        assert_same(facts.functions[second].calls, function.calls, f"{name}: def {second}")
        assert not pending.functions[first].calls, f"{name}: another def's calls were decoded too"
        assert "pending_calls" in pending.__dict__
        decoded = function.calls
        assert ensure_function_calls(pending, second).calls is decoded  # asked again: not decoded again
        again = from_cache_data(marshal.loads(marshal.dumps(cache_data(pending))))
        ensure_calls(again)
        assert_same(facts, again, f"{name}, written back")
        ensure_calls(pending)
        assert pending.functions[second].calls is decoded
        assert_same(facts, pending, name)


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, (tuple, list)):
        return set().union(*map(_strings, value)) if value else set()
    return set()


def test_pending_calls_may_spell_every_string_they_hold_and_no_other(fixture_facts) -> None:
    """`calls_may_spell` (what `ProjectGraph.readers_of` skips files by) finds every string the calls
    hold, short, long (256 bytes or more) and non-ASCII, in the bytes `marshal` wrote, and says
    no to a string they do not hold, even one that is part of a longer one they hold."""
    long_text = "batch['input_ids'][:, :max_seq_len] " * 10
    made = FileFacts(functions=[Function("<module>", (1, 1, 1, 1)), Function("f", (2, 5, 2, 6), calls=(
        Call("g", (3, 1, 3, 9), 1, None, (Arg("längen", 0, text=long_text, fields=("längen", "input_ids")),)),
    ))])
    cases = [("made", made), *((name, facts) for name, facts in fixture_facts
                               if any(f.calls for f in facts.functions))]
    for name, facts in cases:
        pending = from_cache_data(marshal.loads(marshal.dumps(cache_data(facts))))
        # An empty text is a default, dropped with the others from an argument that has only its tags.
        held = set().union(*(_strings(f.calls) for f in facts.functions)) - {""}
        assert held
        for text in held:
            assert calls_may_spell(pending, text), f"{name}: {text!r} held but not found"
        assert not calls_may_spell(pending, "no call of this file holds this string")
        assert "pending_calls" in pending.__dict__  # nothing was decoded to answer
    pending = from_cache_data(marshal.loads(marshal.dumps(cache_data(made))))
    assert calls_may_spell(pending, long_text) and calls_may_spell(pending, "längen")
    assert not calls_may_spell(pending, "input")  # a part of a held string is not one


def test_a_cached_span_is_hashable_as_the_rules_use_it(fixture_facts) -> None:
    facts = next(facts for _, facts in fixture_facts if facts.sides)
    back = through_cache(facts)
    spans: set[Span] = {side.span for side in back.sides}  # what LC113 does (model/sides.py)
    assert spans == {side.span for side in facts.sides}


def test_a_syntax_error_reads_back_as_a_tuple() -> None:
    facts = extract("def f(:\n", LintSettings())
    assert facts.syntax_error is not None
    assert_same(facts, through_cache(facts), "syntax error")


def test_a_broken_entry_is_an_error_not_facts_of_another_shape() -> None:
    facts = extract("def f(x):\n    return x\n", LintSettings())
    data = json.loads(json.dumps(to_data(facts)))
    data["v"][0][0]["v"][1] = [1, 1, 1]  # the module function's span, one value short
    with pytest.raises(ValueError):
        from_data(data)


def test_a_cache_entry_of_another_shape_is_a_miss(tmp_path) -> None:
    """File entries are `marshal` data: one that loads but is not facts (a dataclass written as a
    dict, a function with more values than fields, text that is not marshal) is a miss, not a crash."""
    from layoutcheck.lint.cache import CACHE_VERSION, ResultCache

    facts = extract("def f(x):\n    return x\n", LintSettings())
    cache = ResultCache(tmp_path, "fingerprint")
    good = {"facts": cache_data(facts), "findings": [], "errors": [], "parsed": True}
    cache.put_file("ab" * 32, good)
    back = cache.get_file("ab" * 32)
    assert back is not None and back["facts"].functions[1].qualname == "f"
    entry = next((tmp_path / "files").glob("*/*.marshal"))
    core = good["facts"]["core"]
    for broken in ({**good, "facts": {**good["facts"], "core": {"functions": core[0]}}},
                   {**good, "facts": {**good["facts"], "core": [[[*core[0][1], *range(40)]], *core[1:]]}},
                   b"{not marshal"):
        entry.write_bytes(broken if isinstance(broken, bytes) else marshal.dumps({"v": CACHE_VERSION, **broken}))
        misses = cache.misses
        assert cache.get_file("ab" * 32) is None and cache.misses == misses + 1


def test_the_decoders_read_the_annotations_as_get_type_hints_does() -> None:
    """The decoders are built from the facts classes' annotations, read in one evaluation at import
    (cheaper than `typing.get_type_hints` class by class); they must be what it gives, so a field
    added with a new type is decoded by the rule `_converter` applies to it."""
    import typing

    from layoutcheck.model import facts

    assert set(facts._HINTS) == {*facts._FIELDS, facts.Arg, facts.Call, facts.Param}
    for cls, hints in facts._HINTS.items():
        expected = typing.get_type_hints(cls)
        assert hints == expected, cls.__name__
        assert list(hints) == list(expected), cls.__name__
