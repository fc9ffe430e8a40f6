"""Are the one-file run's shortcuts of the project phase exact on real trees?

A one-file run answers some project-wide questions from the facts alone, and computes others only
for the file it checks (`docs/development.md`, "The project-wide answers are computed when the checked
file asks"). tests/test_demand_queries.py holds them to the full computation on the fixture projects;
this holds them to it on whole trees (no configuration, every file's facts extracted afresh):

* the candidate sets hold every field the full computation finds padded (`Spaces.may_be_padded`) and
  every owner input (`ProjectOwners.is_owner_input`);
* each file's rolled pieces found for that file alone (`piecereach._Join.run`'s ``only``) are the whole
  project's;
* each file's pads (`ProjectValues.pads_of`, the round-up helpers' calls read per file) are those of
  the loop over the whole project it replaced;
* each list parameter's slot (`Spaces.list_slot`, resolving only the calls that can answer) is the one
  every call resolved gives;
* with every file's facts as a one-file run reads them from the cache (calls pending), the functions
  calling given names (`ProjectGraph.functions_with_calls`) and every ``def``'s callers
  (`ProjectGraph.callers_of`) are those of the project with every call decoded, and those every call
  resolved gives (`ProjectGraph.callers`).

    PYTHONPATH=$PWD python benchmarks/demand_identity.py /tmp/pc/verl /tmp/pc/megatron /tmp/pc/slime

Prints, per tree, what was compared and every difference; exits 1 on any difference.
"""

from __future__ import annotations

import argparse
import contextlib
import marshal
import sys
import time
from collections.abc import Sequence
from typing import Any

from layoutcheck.lint.runner import run
from layoutcheck.model.facts import Pad, cache_data, from_cache_data
from layoutcheck.model.piecereach import _Join
from layoutcheck.model.project import FileModel, Project
from layoutcheck.model.vocabulary import Tag

PAD = int(Tag.PAD)


def _again(project: Project, cached: bool = False) -> Project:
    def facts(f: Any) -> Any:
        return from_cache_data(marshal.loads(marshal.dumps(cache_data(f)))) if cached else f

    return Project([FileModel(f.display, f.relpath, f.module, facts(f.facts), f.checked, is_package=f.is_package)
                    for f in project.files], project.settings)


def _old_call_pads(project: Project) -> dict[int, list[Pad]]:
    """The round-up helpers' calls of the whole project, as `ProjectValues._call_pads` read them before."""
    names = project.target_names((i, j) for i, file in enumerate(project.files)
                                 for j, function in enumerate(file.facts.functions) if function.rounds is not None)
    out: dict[int, list[Pad]] = {}
    for ref, function in project.functions_calling(names):
        out.setdefault(ref[0], []).extend(project.round_up_call_pads(ref, function, names))
    return out


def _old_list_slot(project: Project, ref: Any, name: str) -> str | None:
    for _, target, bound in project.bound_calls(ref):
        for param, arg in bound.items():
            if name in arg.params and not arg.bare:
                if param in project.spaces.padded_slots(target):
                    return "padded"
                if param in project.spaces.true_slots(target):
                    return "true"
    return None


def check_tree(root: str) -> list[str]:
    diffs: list[str] = []
    start = time.perf_counter()
    with contextlib.chdir(root):
        project = run(["."], use_cache=False, keep_project=True, jobs=2).project
    assert project is not None
    files = len(project.files)
    padded = {key for key, tags in project.spaces.fields.items() if tags & PAD}
    fresh = _again(project)
    diffs += [f"padded field {k} not a candidate" for k in sorted(padded - fresh.spaces._pad_candidates)]
    inputs = project.owner_inputs
    diffs += [f"owner input {k} not a candidate" for k in sorted(inputs - fresh._owner_input_candidates)]

    every = _Join(project).run()
    join = _Join(_again(project))
    placed = 0
    for index in range(files):
        alone = join.run(index).get(index, [])
        placed += len(alone)
        if alone != every.get(index, []):
            diffs.append(f"rolled pieces of {project.files[index].display} alone differ")

    old_pads = _old_call_pads(project)
    again = _again(project, cached=True)
    pads = 0
    for index in reversed(range(files)):
        file = project.files[index]
        own = [p for p in file.facts.pads if file.facts.functions[p.function].rounds is None]
        expected = [*own, *old_pads.get(index, ())]
        pads += len(expected)
        if again.pads_of(index) != expected:
            diffs.append(f"pads of {file.display} differ")

    slots = _again(project).spaces
    asked = answered = 0
    for ref, function in project.defs():
        for param in function.params:
            expected_slot = _old_list_slot(project, ref, param.name)
            asked += 1
            answered += expected_slot is not None
            if slots.list_slot(ref, param.name) != expected_slot:
                diffs.append(f"list slot of {param.name} in {project.label(ref)} differs")

    names = sorted({c.callee.rsplit(".", 1)[-1] for _, f in project.functions() for c in f.calls})
    cached = _again(project, cached=True)
    for ask in (set(names[i::50]) for i in range(50)):
        expected_calls = [(ref, f.calls) for ref, f in project.functions_calling(ask)
                          if any(c.callee.rsplit(".", 1)[-1] in ask for c in f.calls)]
        if [(ref, f.calls) for ref, f in cached.functions_with_calls(ask)] != expected_calls:
            diffs.append(f"functions calling {sorted(ask)[:3]}... differ")
    refs = [ref for ref, _ in project.defs() if ref[1]]
    reached = 0
    decoded = _again(project)  # every call decoded: `callers_of` reads them as a fresh run does
    every = _again(project)
    every.callers  # noqa: B018 - every call resolved first: `callers_of` then reads it
    for ref in refs:
        expected_callers = decoded.callers_of(ref)
        reached += bool(expected_callers)
        if cached.callers_of(ref) != expected_callers:
            diffs.append(f"callers of {project.label(ref)} differ")
        if every.callers_of(ref) != expected_callers:
            diffs.append(f"callers of {project.label(ref)} by name differ from every call resolved")
    print(f"{root}: {files} files, {len(padded)} padded fields, {len(inputs)} owner inputs, {placed} rolled pieces, "
          f"{pads} pads, {asked} parameters ({answered} list slots), {len(names)} call names, {len(refs)} defs "
          f"({reached} called): {len(diffs)} differences ({time.perf_counter() - start:.0f} s)", flush=True)
    for diff in diffs[:20]:
        print("  " + diff)
    return diffs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trees", nargs="+")
    args = parser.parse_args(argv)
    bad = sum(len(check_tree(tree)) for tree in args.trees)
    print(f"{'no' if not bad else bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
