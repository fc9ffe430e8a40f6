"""The seam with the project model: which function plays which part in the data path, and why.

Everything ``layoutcheck init`` knows about a project comes through `find`,
which asks the linter's model (`layoutcheck.model.project.Project`) public
questions only: the owners of each layout (who writes the per-sample padded
lengths, who builds the packed description), the CP helpers and their
signatures, who calls whom, and who reads the per-sample padded lengths (a
field an owner writes, whatever it is called). A `Finding` is
a function and the part the model's answers give it:

==================  =====================================================================
``producer``        the BSHD owner: it writes the per-sample padded lengths
``batch-builder``   a THD owner that also reads the per-sample padded lengths (both layouts)
``packer``          a THD owner that does not (a packed stream and its cumulative lengths)
``replay-filler``   not an owner, reads the padded lengths and calls the CP slicer
``offset-helper``   the CP helper that other CP helpers call and that calls none (offsets)
``cp-slicer``       the CP helper the batch builder calls
``response-slicer`` the CP helper the producer calls
``parallel-state``  the function most CP helpers call with no argument
==================  =====================================================================

Names are never what decides a part: the owners come from what functions
compute, the rest from the call graph and the spaces of fields (by use).
When the model learns more, it comes in here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from layoutcheck.model.project import FunctionRef, Project

__all__ = ["KINDS", "Finding", "find"]

KINDS: tuple[str, ...] = (
    "producer", "batch-builder", "packer", "replay-filler", "offset-helper", "cp-slicer", "response-slicer",
    "parallel-state",
)


@dataclass(frozen=True)
class Finding:
    """One function and its part in the data path."""

    target: str
    """``package.module:qualname``, the module named as the linter names it (what ``owners`` match)."""
    kind: str
    why: str
    where: str
    """``path:line`` of its ``def``."""
    params: tuple[str, ...]
    hook: str | None = None
    """``package.module:qualname`` as the program imports it (`layoutcheck.init.importable`): what a hook
    is written with; ``None`` when no dotted path imports its file."""
    receiver: str | None = None
    """Its receiver parameter, when it is a method that takes one (`Function.receiver`: by place, whatever
    it is called; none for a ``@staticmethod``): no argument a contract describes."""


def _target(project: Project, ref: FunctionRef) -> str | None:
    module = project.files[ref[0]].module
    function = project.function(ref)
    if module is None or "<" in function.qualname:
        return None
    return f"{module}:{function.qualname}"


def _top(project: Project, ref: FunctionRef) -> bool:
    # A module-level function or a method, whose dotted path a hook can name (not a function nested in another).
    return project.function(ref).parent <= 0


def _callee(project: Project, caller: FunctionRef, call: object) -> str | None:
    """The ``module:qualname`` a call reaches: the call graph's answer, else the caller's own import of a
    module of the project (whose facts may hold no ``def`` s: a file with nothing to lint is not parsed)."""
    found = project.resolve(caller, call)  # type: ignore[arg-type]
    if found is not None:
        return _target(project, found)
    name: str = getattr(call, "callee", "")
    file = project.files[caller[0]]
    head, dot, rest = name.partition(".")
    imported = dict(file.facts.imports).get(head)
    if imported is not None:
        name = imported + dot + rest
    if name.startswith("."):
        base = (file.module or "").split(".")
        if not file.is_package:
            base = base[:-1]
        level = len(name) - len(name.lstrip("."))
        name = ".".join([*base[: len(base) - (level - 1)], name.lstrip(".")])
    module, _, function = name.rpartition(".")
    return f"{module}:{function}" if module in project.modules else None


def find(project: Project, module_name: Callable[[int], str | None] | None = None) -> list[Finding]:
    """Every function whose part the model's answers give (see the module docs), in `KINDS` order.

    ``module_name(file index)``: the dotted path the program imports that file
    by (`Finding.hook`); default: the linter's module name.
    """
    out: dict[str, Finding] = {}

    def hook(index: int, qualname: str) -> str | None:
        name = module_name(index) if module_name is not None else project.files[index].module
        return f"{name}:{qualname}" if name else None

    def add(ref: FunctionRef, kind: str, why: str) -> None:
        target = _target(project, ref)
        if target is not None and target not in out:
            function = project.function(ref)
            params = tuple(p.name for p in function.params)
            out[target] = Finding(target, kind, why, project.where(ref), params, hook(ref[0], function.qualname),
                                  function.receiver)

    bshd = [r for r in project.owners_of_layout("bshd") if _top(project, r)]
    thd = [r for r in project.owners_of_layout("thd") if _top(project, r)]
    for ref in bshd:
        add(ref, "producer", f"writes the per-sample padded lengths: {project.owners[ref].why}")
    builders = [r for r in thd if project.reads_padded(r) and r not in bshd]
    for ref in builders:
        add(ref, "batch-builder", f"{project.owners[ref].why}, and reads the per-sample padded lengths")
    for ref in thd:
        if ref not in builders and ref not in bshd:
            add(ref, "packer", f"{project.owners[ref].why} (a packed stream and its cumulative lengths)")
    helpers = [r for r in project.cp_helper_defs if _top(project, r)]
    called_by = {r: {c for c, _ in project.callers_of(r)} for r in helpers}
    slicers: list[FunctionRef] = []
    calls_a_helper = {c for r in helpers for c in called_by[r]}
    for ref in helpers:
        helpers_calling = called_by[ref] & set(helpers)
        if helpers_calling and ref not in calls_a_helper:
            names = ", ".join(sorted(project.function(c).qualname for c in helpers_calling))
            add(ref, "offset-helper", f"a CP helper the other CP helpers call ({names})")
        elif called_by[ref] & set(builders):
            slicers.append(ref)
            add(ref, "cp-slicer", "the CP helper the batch builder calls")
        elif called_by[ref] & set(bshd):
            add(ref, "response-slicer", "the CP helper the producer calls (it slices the response fields)")
    slicer_targets = {_target(project, r) for r in slicers}
    for ref, function in project.functions():
        if not ref[1] or not _top(project, ref) or ref in bshd or ref in thd or not project.reads_padded(ref):
            continue
        if any(_callee(project, ref, call) in slicer_targets for call in function.calls):
            add(ref, "replay-filler", "reads the per-sample padded lengths and lays data out with the CP slicer, "
                                      "outside the owners")
    state = _parallel_state(project, helpers)
    if state is not None and state[0] not in out:
        target, count = state
        module, _, qualname = target.partition(":")
        index = project.modules[module]
        share = (f"every CP helper ({count}) calls" if count == len(helpers)
                 else f"most CP helpers ({count} of {len(helpers)}) call")
        out[target] = Finding(target, "parallel-state", f"{share} it with no argument (the CP rank and size)",
                              project.files[index].display, (), hook(index, qualname))
    order = {kind: i for i, kind in enumerate(KINDS)}
    return sorted(out.values(), key=lambda f: (order[f.kind], f.target))


def _parallel_state(project: Project, helpers: Iterable[FunctionRef]) -> tuple[str, int] | None:
    """The function most CP helpers call with no argument (more than half of them, and no other as
    many), with how many call it: a helper that takes the CP rank as an argument calls none."""
    helpers = list(helpers)
    if not helpers:
        return None
    seen: dict[str, int] = {}
    for ref in helpers:
        for target in {_callee(project, ref, call) for call in project.function(ref).calls if not call.args} - {None}:
            seen[target] = seen.get(target, 0) + 1  # type: ignore[index]
    most = max(seen.values(), default=0)
    common = [target for target, n in seen.items() if n == most]
    return (common[0], most) if len(common) == 1 and 2 * most > len(helpers) else None
