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

__all__ = ["Proposal", "propose", "render"]

_ROLE_KINDS = ("producer", "batch-builder", "replay-filler", "offset-helper", "cp-slicer", "response-slicer")
_BARE = re.compile(r"[A-Za-z0-9_-]+\Z")


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

    def runtime_table(self) -> dict[str, Any]:
        """The ``runtime`` table as data (what `render` writes, without the comments)."""
        table: dict[str, Any] = {}
        if self.parallel_state is not None:
            table["parallel-state"] = self.parallel_state[0]
        table.update({key: source for key, (source, _) in self.coordinates.items()})
        if self.hooks:
            table["hooks"] = {role: [t for t, _ in targets] for role, targets in self.hooks.items()}
        if self.boundaries:
            table["boundaries"] = {target: dict(t) for target, (t, _) in self.boundaries.items()}
        return table


def propose(findings: Sequence[Finding], defined: Mapping[str, Sequence[str]]) -> Proposal:
    """The proposal for ``findings``; ``defined``: every ``module:qualname`` of the tree with its parameters."""
    out = Proposal()
    described = _library(defined, out)
    for f in findings:
        if f.kind in _ROLE_KINDS and f.target not in described:
            out.hooks.setdefault(f.kind, []).append((f.target, f"{f.why} ({f.where})"))
        elif f.kind == "parallel-state":
            out.parallel_state = (f.target, f"{f.why} ({f.where})")
        elif f.kind == "packer" and f.target not in described:
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
            reads = parse_boundary(target, table).parameters()
            missing = sorted(set(reads) - set(params))
            if missing:
                continue  # another function under that name: never proposed under a wrong reading
            out.boundaries[target] = (table, f"the `{name}` preset's contract for this function: its parameters "
                                             f"({', '.join(params)}) are the ones it reads")
            described.add(target)
            matched = True
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


def render(proposal: Proposal, prefix: str = "") -> str:
    """The proposal as TOML: ``prefix`` is ``"tool.layoutcheck."`` in a ``pyproject.toml``, ``""`` in a ``layoutcheck.toml``."""
    lines = [
        "# Written by `layoutcheck init` from what the project model found: review every entry before a run.",
        "# Each comment says why. Run with LAYOUTCHECK=raise (warn, record) to check these functions.",
    ]
    if proposal.owners:
        lines += ["", f"[{prefix}owners]"]
        for layout, owners in proposal.owners.items():
            for target, why in owners:
                lines.append(f"# {layout}: {target}: {why}")
            lines.append(f"{layout} = {_value([t for t, _ in owners])}")
    lines += ["", f"[{prefix}runtime]"]
    if proposal.parallel_state is not None:
        lines += [f"# {proposal.parallel_state[1]}", f"parallel-state = {_value(proposal.parallel_state[0])}"]
    for key, (source, why) in proposal.coordinates.items():
        lines += [f"# {why}", f"{key} = {_value(source)}"]
    if proposal.hooks:
        lines += ["", f"[{prefix}runtime.hooks]"]
        for role, targets in proposal.hooks.items():
            for target, why in targets:
                lines.append(f"# {target}: {why}")
            lines.append(f"{role} = {_value([t for t, _ in targets])}")
    for target, (table, why) in proposal.boundaries.items():
        lines += ["", f"# {why}", f"[{prefix}runtime.boundaries.{_key(target)}]", *_table_lines(table, "")]
    for f in proposal.skeletons:
        lines += [
            "", f"# {f.target} ({f.where}): {f.why}. No preset describes it: say what its arguments and its",
            "# return value hold (README \"Boundary contracts\"), then uncomment.",
            f"# [{prefix}runtime.boundaries.{_key(f.target)}]",
            *(f"# args.{p} = \"?\"" for p in f.params if p not in ("self", "cls")),
            "# returns.0 = \"? (a packed stream: P packed cp)\"",
            "# returns.1 = \"? (its cumulative lengths: cu P packed)\"",
        ]
    return "\n".join(lines) + "\n"
