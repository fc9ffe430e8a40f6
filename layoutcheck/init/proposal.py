"""Findings as configuration: the debug mode's table and the linter's owners, each entry with why.

* a finding with a role (producer, batch builder, replay filler, offset
  helper, the CP slicers) becomes ``[runtime.hooks]``; the parallel-state
  function becomes ``parallel-state``;
* a function a preset describes with a boundary contract (matched by its
  ``module:function`` *and* its own parameters, which must be every one the
  contract reads) becomes that ``[runtime.boundaries]`` table, with the
  preset's coordinates: the model does not read the spaces of a function's
  fields yet, and the presets are the contracts written against the real
  signatures;
* a packer no preset describes is proposed as a commented skeleton, for the
  user to fill in;
* the owners of each layout become the linter's ``owners``.

Hooks are written with the dotted path the program imports (`Finding.hook`),
owners with the linter's module names. Before anything is written, each
entry is checked with the project imported (`layoutcheck.init.verify`): its
`Verdict` decides whether `render` writes it as configuration or as a
commented-out line saying why (a role whose signature does not fit, a
target that does not exist, a module that does not import by that path; or
an entry this Python environment could not check).

`render` writes it as TOML with a comment on every entry (why the model
thinks so, and where); nothing here reads or writes files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from layoutcheck.init.findings import Finding
from layoutcheck.runtime.contract.boundary import parse_boundary
from layoutcheck.runtime.hooks.presets import PRESETS

__all__ = ["DOCS", "Proposal", "Verdict", "propose", "render"]

_ROLE_KINDS = ("producer", "batch-builder", "replay-filler", "offset-helper", "cp-slicer", "response-slicer")
_BARE = re.compile(r"[A-Za-z0-9_-]+\Z")
_TARGET = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\Z")

DOCS = {
    "contracts": "docs/boundaries.md#fields",
    "roles": "docs/boundaries.md#roles-and-presets",
    "refused": "docs/boundaries.md#refused-at-install",
    "init": "docs/boundaries.md#layoutcheck-init",
}
"""The pages of layoutcheck's documentation the written comments point to (a test resolves each)."""


@dataclass(frozen=True)
class Verdict:
    """Whether one entry installs: ``ok`` (imported and judged), ``source`` (it could not be imported here; its
    source was judged: path, definition, signature), ``refused`` (it would not install) or ``unchecked``."""

    status: str
    why: str = ""


@dataclass
class Proposal:
    """What `render` writes: roles, boundaries, coordinates and owners, with why for each."""

    hooks: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Role -> [(target, why)]."""
    parallel_state: tuple[str, str] | None = None
    boundaries: dict[str, tuple[Mapping[str, Any], str]] = field(default_factory=dict)
    """Target -> (its table, why)."""
    coordinates: dict[str, tuple[str, str]] = field(default_factory=dict)
    """``tp-size``/``cp-size``/``cp-rank``/``cp-group`` -> (source, why)."""
    owners: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    skeletons: list[Finding] = field(default_factory=list)
    """Packers no preset describes: written as commented tables."""
    verdicts: dict[tuple[str, str], Verdict] = field(default_factory=dict)
    """``(kind, target)`` -> whether it installs (`layoutcheck.init.verify`); an entry without one is written."""
    params: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Target -> its parameters as the source defines them (what is judged when it cannot be imported)."""

    def empty(self) -> bool:
        """Whether nothing at all is proposed (no hook, contract, coordinate, owner or skeleton)."""
        return not (self.hooks or self.parallel_state or self.boundaries or self.coordinates or self.owners
                    or self.skeletons)

    def entries(self) -> list[tuple[str, str, Mapping[str, Any] | None]]:
        """Every ``(kind, target, boundary table or None)`` the probe must judge: roles (kind: the role),
        ``boundary``, ``parallel-state``, and ``exists`` for coordinate functions and skeletons."""
        out: list[tuple[str, str, Mapping[str, Any] | None]] = []
        out += [(role, target, None) for role, targets in self.hooks.items() for target, _ in targets]
        if self.parallel_state is not None:
            out.append(("parallel-state", self.parallel_state[0], None))
        out += [("exists", source, None) for source, _ in self.coordinates.values()
                if isinstance(source, str) and _TARGET.match(source)]
        out += [("boundary", target, table) for target, (table, _) in self.boundaries.items()]
        out += [("exists", f.hook, None) for f in self.skeletons if f.hook is not None]
        return [e for e in out if (e[0], e[1]) not in self.verdicts]  # judged already: no dotted path

    def installs(self, kind: str, target: str) -> bool:
        verdict = self.verdicts.get((kind, target))
        return verdict is None or verdict.status in ("ok", "source")

    def caveat(self, kind: str, target: str) -> list[str]:
        """The comment above an entry judged from its source only (empty for the others)."""
        verdict = self.verdicts.get((kind, target))
        if verdict is None or verdict.status != "source":
            return []
        return _why(f"not imported here, judged from the source (module path, definition, signature) and the "
                    f"presets only: {verdict.why}. LAYOUTCHECK=raise refuses it at import if it does not fit")

    def why_not(self, kind: str, target: str) -> str:
        """The comment above an entry written commented out."""
        verdict = self.verdicts[(kind, target)]
        if verdict.status == "unchecked":
            return (f"not checked: {verdict.why}. Run `layoutcheck init` in the trainer's Python environment to "
                    "check it, or review it and uncomment")
        fix = ""
        if kind in ("producer", "batch-builder", "replay-filler", "offset-helper") and "no parameter" in verdict.why:
            fix = (f". Describe it with a boundary contract with `role = \"{kind}\"` and `inputs` saying where "
                   f"it finds what it lacks ({DOCS['roles']})")
        elif kind in ("cp-slicer", "response-slicer"):
            fix = f". Describe it with a boundary contract instead ({DOCS['contracts']})"
        return f"not written, it would not install ({DOCS['refused']}): {verdict.why}{fix}"


def propose(findings: Sequence[Finding], defined: Mapping[str, Sequence[str]]) -> Proposal:
    """The proposal for ``findings``; ``defined``: every ``module:qualname`` of the tree with its parameters."""
    out = Proposal()
    described = _library(defined, out)
    for f in findings:
        hook = f.hook or f.target
        out.params[hook] = f.params
        if f.hook is None:
            # Hooked by name, a function no dotted path imports would never be: written commented out.
            kind = "exists" if f.kind == "packer" else f.kind
            out.verdicts[(kind, hook)] = Verdict("refused", f"no dotted path imports {f.where.split(':', 1)[0]} "
                                                            "from the project's folder (a folder on the way is no "
                                                            "Python name, or it lies outside the project)")
        if f.kind in _ROLE_KINDS and hook not in described:
            out.hooks.setdefault(f.kind, []).append((hook, f"{f.why} ({f.where})"))
        elif f.kind == "parallel-state":
            out.parallel_state = (hook, f"{f.why} ({f.where})")
        elif f.kind == "packer" and hook not in described:
            out.skeletons.append(f)
        if f.kind == "producer":
            out.owners.setdefault("bshd", []).append((f.target, f.why))
        elif f.kind in ("batch-builder", "packer"):
            out.owners.setdefault("thd", []).append((f.target, f.why))
    return out


def _library(defined: Mapping[str, Sequence[str]], out: Proposal) -> set[str]:
    # Boundary contracts of the presets whose function the tree defines with every parameter the contract reads.
    described: set[str] = set()
    for name, preset in PRESETS.items():
        matched = False
        for target, table in preset.boundaries.items():
            params = defined.get(target)
            if params is None:
                continue
            spec = parse_boundary(target, table)
            reads = spec.parameters()
            missing = sorted(set(reads) - set(params))
            if missing:
                continue  # another function under that name: never proposed under a wrong reading
            out.params[target] = tuple(params)
            out.boundaries[target] = (table, f"the `{name}` preset's contract for this function: its parameters "
                                             f"({', '.join(params)}) are the ones it reads")
            described.add(target)
            # The preset's coordinate functions only for a contract that reads them: a fork that keeps one of
            # its functions (verl's balancer in an FSDP-only tree) need not have their module (Megatron).
            matched = matched or spec.reads_coordinates()
        if matched:
            for key, source in preset.coordinates.items():
                out.coordinates.setdefault(key, (source, f"the `{name}` preset's {key}"))
    return described


# --- TOML -----------------------------------------------------------------------------------------------


def _key(name: str) -> str:
    return name if _BARE.match(name) else json.dumps(name)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(str(k))} = {_value(v)}" for k, v in value.items()) + " }"
    return "[" + ", ".join(_value(v) for v in value) + "]"


def _table_lines(table: Mapping[str, Any], prefix: str) -> list[str]:
    # Plain keys inline; sub-tables (args, returns) as dotted keys, so one table header holds the whole contract.
    lines = []
    for key, value in table.items():
        if isinstance(value, Mapping) and key in ("args", "returns", "inputs") and "space" not in value:
            for sub, v in value.items():
                lines.append(f"{prefix}{_key(key)}.{_key(str(sub))} = {_value(v)}")
        else:
            lines.append(f"{prefix}{_key(key)} = {_value(value)}")
    return lines


def _commented(lines: Sequence[str]) -> list[str]:
    return [f"# {line}" if line else "#" for line in lines]


def _why(text: str) -> list[str]:
    """A long comment as lines of at most about 110 characters (never breaking a path or a name)."""
    import textwrap

    return textwrap.wrap(text, 108, initial_indent="# ", subsequent_indent="#   ", break_long_words=False,
                         break_on_hyphens=False)


def render(proposal: Proposal, prefix: str = "") -> str:
    """The proposal as TOML: ``prefix`` is ``"tool.layoutcheck."`` in a ``pyproject.toml``, ``""`` in a ``layoutcheck.toml``.

    An entry whose verdict is not ``ok`` is written commented out, under a line saying why.
    """
    p = proposal
    lines = [
        "# Written by `layoutcheck init` from what the project model found: review every entry before a run.",
        "# Each comment says why. Run with LAYOUTCHECK=raise (warn, record) to check these functions.",
        f"# What each table means: layoutcheck's {DOCS['contracts']} and {DOCS['init']}.",
    ]
    if any(v.status in ("unchecked", "source") for v in p.verdicts.values()):
        lines += ["#", "# This Python environment could not import some of the functions below (each says why): those",
                  "# were checked against their source only, or are commented out when not even that could be done.",
                  "# Run `layoutcheck init` where the trainer runs (its Python environment) to check them for real."]
    if p.owners:
        lines += ["", f"[{prefix}owners]"]
        for layout, owners in p.owners.items():
            for target, why in owners:
                lines.append(f"# {layout}: {target}: {why}")
            lines.append(f"{layout} = {_value([t for t, _ in owners])}")
    lines += ["", f"[{prefix}runtime]"]
    if p.parallel_state is not None:
        target, why = p.parallel_state
        entry = f"parallel-state = {_value(target)}"
        lines.append(f"# {why}")
        if p.installs("parallel-state", target):
            lines += [*p.caveat("parallel-state", target), entry]
        else:
            lines += [*_why(p.why_not("parallel-state", target)), f"# {entry}"]
    for key, (source, why) in p.coordinates.items():
        entry = f"{key} = {_value(source)}"
        if isinstance(source, str) and not p.installs("exists", source):
            lines += [f"# {why}", *_why(p.why_not("exists", source)), f"# {entry}"]
        else:
            lines += [f"# {why}", *(p.caveat("exists", source) if isinstance(source, str) else []), entry]
    if p.hooks:
        lines += ["", f"[{prefix}runtime.hooks]"]
        for role, targets in p.hooks.items():
            good = [(t, why) for t, why in targets if p.installs(role, t)]
            for target, why in good:
                lines += [f"# {target}: {why}", *p.caveat(role, target)]
            if good:
                lines.append(f"{role} = {_value([t for t, _ in good])}")
            for target, why in targets:
                if not p.installs(role, target):
                    lines += [f"# {target}: {why}", *_why(p.why_not(role, target)),
                              f"# {role} = {_value([target])}"]
    for target, (table, why) in p.boundaries.items():
        body = [f"[{prefix}runtime.boundaries.{_key(target)}]", *_table_lines(table, "")]
        lines += ["", f"# {why}"]
        lines += [*p.caveat("boundary", target), *body] if p.installs("boundary", target) else [*_why(p.why_not("boundary", target)),
                                                               *_commented(body)]
    for f in p.skeletons:
        target = f.hook or f.target
        lines += [
            "", f"# {target} ({f.where}): {f.why}. No preset describes it: say what its arguments and its",
            f"# return value hold ({DOCS['contracts']}), then uncomment.",
        ]
        if not p.installs("exists", target):
            lines += _why(p.why_not("exists", target))
        lines += [
            f"# [{prefix}runtime.boundaries.{_key(target)}]",
            *(f"# args.{p_} = \"?\"" for p_ in f.params if p_ != f.receiver),
            "# returns.0 = \"? (a packed stream: P packed cp)\"",
            "# returns.1 = \"? (its cumulative lengths: cu P packed)\"",
        ]
    return "\n".join(lines) + "\n"
