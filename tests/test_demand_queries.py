"""A one-file run computes the project's whole-project answers only where its file asks, and the
answers are the ones an eager computation gives.

Two kinds of shortcut, both exact:

* *candidates from the facts alone*: `Spaces.is_padded_field` answers False for a field no store
  can make padded (`Spaces.may_be_padded`), and `ProjectOwners.is_owner_input` for a field no store
  or pad can make an owner's input, without computing every field's space or the owners. Each
  candidate set must hold every field the full computation finds, on every fixture project;
* *calls decoded by function*: `ProjectGraph.functions_with_calls` and the calls by name behind
  `ProjectGraph.callers_of` decode only the functions of a cached file that call one of the names
  asked (`layoutcheck.model.facts.functions_calling_names`, `functions_by_call_name`); they must
  give what the same project with every call decoded gives.

Whole runs (the staged file with the cache against ``--no-cache``) are tests/test_staged_run.py's.
"""

from __future__ import annotations

import contextlib
import marshal
from pathlib import Path

import pytest

from layoutcheck.lint.runner import run
from layoutcheck.model.facts import cache_data, ensure_calls, from_cache_data
from layoutcheck.model.project import FileModel, Project
from layoutcheck.model.vocabulary import Tag

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
PROJECTS = [
    FIXTURES / "minitrainer", FIXTURES / "lint" / "flagged", FIXTURES / "lint" / "lookalikes",
    FIXTURES / "packthd", FIXTURES / "rowpad", FIXTURES / "spacebugs",
    *sorted(p for p in (FIXTURES / "lint" / "corpus").iterdir() if p.is_dir()),
]
PAD = int(Tag.PAD)


@pytest.fixture(scope="module")
def projects() -> list[tuple[str, Project]]:
    out = []
    for root in PROJECTS:
        with contextlib.chdir(root):
            project = run(["."], use_cache=False, keep_project=True).project
        assert project is not None
        out.append((root.name, project))
    return out


def _again(project: Project, cached: bool = False) -> Project:
    """The same files' facts as a new project, nothing computed yet; with ``cached``, as a one-file run
    reads them from the cache (calls still `marshal` bytes)."""
    def facts(f):
        return from_cache_data(marshal.loads(marshal.dumps(cache_data(f)))) if cached else f

    return Project([FileModel(f.display, f.relpath, f.module, facts(f.facts), f.checked, is_package=f.is_package)
                    for f in project.files], project.settings)


def _keys(project: Project) -> set[str]:
    """Every field name the project's facts mention."""
    keys: set[str] = set()
    for file in project.files:
        facts = file.facts
        keys.update(w.key for w in facts.field_writes)
        keys.update(f for w in facts.field_writes for f in w.fields)
        keys.update(f for r in facts.entry_reads for f in r.fields)
        keys.update(r.field for r in facts.rewrites)
        keys.update(k for k, _ in facts.field_uses)
        keys.update(f for p in facts.pads for f in p.fields)
    return keys


def test_padded_field_candidates_hold_every_padded_field(projects) -> None:
    padded_anywhere = 0
    for name, project in projects:
        padded = {key for key, tags in project.spaces.fields.items() if tags & PAD}
        padded_anywhere += len(padded)
        fresh = _again(project)
        missing = padded - fresh.spaces._pad_candidates
        assert not missing, f"{name}: padded fields the facts-only candidates leave out: {sorted(missing)}"
        # A field outside the candidates is answered without computing the fields; every answer is the
        # eager one.
        outside = sorted(_keys(project) - fresh.spaces._pad_candidates)
        for key in outside:
            assert fresh.spaces.is_padded_field(key) is False
        assert "fields" not in fresh.spaces.__dict__, f"{name}: a non-candidate field computed every field"
        for key in sorted(_keys(project) | padded):
            assert fresh.spaces.is_padded_field(key) == (key in padded), f"{name}: {key}"
    assert padded_anywhere >= 4, "the fixtures hold no padded field: the test checks nothing"


def test_owner_input_candidates_hold_every_owner_input(projects) -> None:
    inputs_anywhere = 0
    for name, project in projects:
        inputs = project.owner_inputs
        inputs_anywhere += len(inputs)
        fresh = _again(project)
        missing = inputs - fresh._owner_input_candidates
        assert not missing, f"{name}: owner inputs the facts-only candidates leave out: {sorted(missing)}"
        outside = sorted(_keys(project) - fresh._owner_input_candidates)
        for key in outside:
            assert fresh.is_owner_input(key) is False
        assert "owners" not in fresh.__dict__, f"{name}: a non-candidate field found the owners"
        for key in sorted(_keys(project) | inputs):
            assert fresh.is_owner_input(key) == (key in inputs), f"{name}: {key}"
    assert inputs_anywhere >= 5, "the fixtures hold no owner input: the test checks nothing"


def _last(call) -> str:
    return call.callee.rsplit(".", 1)[-1]


def test_functions_with_calls_of_cached_facts_are_the_decoded_ones(projects) -> None:
    pending_left = 0
    for name, project in projects:
        names_all = sorted({_last(c) for _, f in project.functions() for c in f.calls})
        # One name at a time, a few together, and all of them.
        asks = [{n} for n in names_all] + [set(names_all[i::3]) for i in range(3)] + [set(names_all)]
        for ask in asks:
            for tests in (False, True):
                expected = [(ref, f.calls) for ref, f in project.functions_calling(ask, tests=tests)
                            if any(_last(c) in ask for c in f.calls)]
                cached = _again(project, cached=True)
                got = [(ref, f.calls) for ref, f in cached.functions_with_calls(ask, tests=tests)]
                assert got == expected, f"{name}: {sorted(ask)[:3]}"
                decoded = [(ref, f.calls) for ref, f in _again(project).functions_with_calls(ask, tests=tests)]
                assert decoded == expected, f"{name}: {sorted(ask)[:3]}, calls decoded"
                pending_left += sum("pending_calls" in f.facts.__dict__ for f in cached.files)
    assert pending_left, "every cached file's calls were decoded: the per-function decoding was not exercised"


def test_callers_of_cached_facts_are_the_decoded_callers(projects) -> None:
    reached = 0
    for name, project in projects:
        refs = [ref for ref, _ in project.defs() if ref[1]]
        decoded = _again(project)  # every call decoded, as a fresh run reads them
        expected = {ref: decoded.callers_of(ref) for ref in refs}
        reached += sum(map(bool, expected.values()))
        cached = _again(project, cached=True)
        for ref in refs:
            got = cached.callers_of(ref)
            assert [(c, call) for c, call in got] == [(c, call) for c, call in expected[ref]], f"{name}: {ref}"
        # Asked in another order, with some files decoded whole in between (as other questions do).
        cached = _again(project, cached=True)
        for k, ref in enumerate(reversed(refs)):
            if k == len(refs) // 2:
                for file in cached.files[::2]:
                    ensure_calls(file.facts)
            assert cached.callers_of(ref) == expected[ref], f"{name}: {ref}, reversed"
    assert reached > 50, "few calls reach a def of the fixtures: the test checks little"


def test_callers_of_by_name_are_the_callers_every_call_resolved_finds(projects) -> None:
    """`ProjectGraph.callers_of` resolves only the calls spelt with a name that can reach a ``def``
    (`target_names`); `ProjectGraph.callers` resolves every call. They give the same calls in the same
    order (tests/test_summaries.py holds the spellings that once differed: `Base.__init__(self, ...)`, a
    package's alias of a ``def``)."""
    for name, project in projects:
        refs = [ref for ref, _ in project.defs() if ref[1]]
        by_name = _again(project)
        every = _again(project)
        every.callers  # noqa: B018 - every call resolved first: `callers_of` then reads it
        assert {ref: by_name.callers_of(ref) for ref in refs} == {ref: every.callers_of(ref) for ref in refs}, name


def test_list_slots_resolving_only_calls_that_can_answer_are_those_of_every_call(projects) -> None:
    """`Spaces.list_slot` resolves only the calls that pass a list's entries and are spelt with the name
    of a ``def`` with slots; the answer is the one every call of the function resolved gives (the
    loop below, as it was)."""
    answered = 0
    for name, project in projects:
        spaces = _again(project).spaces
        for ref, function in project.defs():
            for param in function.params:
                expected = None
                for _, target, bound in project.bound_calls(ref):
                    hit = next((kind for p, arg in bound.items() if param.name in arg.params and not arg.bare
                                for kind, slots in (("padded", project.spaces.padded_slots(target)),
                                                    ("true", project.spaces.true_slots(target))) if p in slots),
                               None)
                    if hit is not None:
                        expected = hit
                        break
                assert spaces.list_slot(ref, param.name) == expected, f"{name}: {ref} {param.name}"
                answered += expected is not None
    assert answered, "no list parameter of the fixtures reaches a slot: the test checks nothing"


def test_pads_of_one_file_are_those_of_the_whole_project(projects) -> None:
    """`ProjectValues.pads_of` reads the round-up helpers' calls of the file asked alone; in any order
    of files, each file's pads are those the whole project's calls give (the loop below, as it was)."""
    from layoutcheck.model.facts import Pad

    calls_found = 0
    for name, project in projects:
        names = project.target_names((i, j) for i, file in enumerate(project.files)
                                     for j, function in enumerate(file.facts.functions) if function.rounds is not None)
        expected: dict[int, list[Pad]] = {}
        for ref, function in project.functions_calling(names):  # the whole project, as before
            expected.setdefault(ref[0], []).extend(project.round_up_call_pads(ref, function, names))
        calls_found += sum(map(len, expected.values()))
        for order in (range(len(project.files)), reversed(range(len(project.files)))):
            again = _again(project, cached=True)
            for index in order:
                file = project.files[index]
                own = [p for p in file.facts.pads if file.facts.functions[p.function].rounds is None]
                assert again.pads_of(index) == [*own, *expected.get(index, ())], f"{name}: {file.display}"
    assert calls_found, "no call of a round-up helper in the fixtures: the test checks nothing"
