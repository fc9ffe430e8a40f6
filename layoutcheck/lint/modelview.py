"""``layoutcheck model``: what the linter believes about a project, as text or JSON.

How a user checks the linter before trusting it, and how a maintainer debugs
it: the sources and who writes them, the owners of each layout and why
(configured, writes ``max_seq_lens``, builds ``cu_seqlens``) with the
alignment units they pad to, the functions inferred to own their own
padding (the only padding decision on their path), the CP helpers with
their layout parameters and where each was found (the ``def`` in the tree,
or the configured positions), and the rewrites of the owner's inputs that
run after the owner. Everything is read from `layoutcheck.model.project`;
nothing here decides.
"""

from __future__ import annotations

import json
from typing import Any

from layoutcheck.model.project import FunctionRef, Project
from layoutcheck.model.queries import FileQueries

__all__ = ["describe", "render_model"]


def _where(project: Project, ref: FunctionRef) -> dict[str, Any]:
    function = project.function(ref)
    return {"function": function.qualname, "path": project.files[ref[0]].display, "line": function.span[0]}


def _units(pads: Any) -> list[str]:
    return sorted({p.unit for p in pads if p.unit})


def describe(project: Project) -> dict[str, Any]:
    """The model as JSON-able data (the ``--output-format json`` document)."""
    vocab = project.vocab
    model_files = [f for f in project.files if not f.is_test]
    sources = []
    for name in vocab.source_order:
        writers = [_where(project, r) for r in project.source_writers()]
        readers = sum(1 for ref, f in project.functions() if f.reads_source and ref[1])
        sources.append({"name": name, "kind": "per-sample padded lengths (BSHD)", "written_by": writers,
                        "read_in": readers})
    for name in vocab.packed_order:
        builders = [_where(project, r) for r in project.packed_writers()]
        readers = sum(1 for ref, f in project.functions() if f.reads_packed and ref[1])
        sources.append({"name": name, "kind": "packed batch description (THD)", "written_by": builders,
                        "read_in": readers})
    owners: dict[str, list[dict[str, Any]]] = {"bshd": [], "thd": []}
    for ref, owner in sorted(project.owners.items(), key=lambda item: project.where(item[0])):
        if owner.why.startswith("inside "):
            continue
        entry = {**_where(project, ref), "why": owner.why, "units": _units(project.owner_units.get(ref, ()))}
        for layout in owner.layouts:
            owners.setdefault(layout, []).append(entry)
    inferred = [
        {**_where(project, ref), "why": "pads, and its callers read the result; nothing else owns it",
         "units": _units(pads), "pads": [f"{project.files[ref[0]].display}:{p.span[0]}" for p in pads]}
        for ref, pads in sorted(project.inferred_owners.items(), key=lambda item: project.where(item[0]))
    ]
    helpers = []
    callers = project.callers  # decodes every file's calls
    for name in project.helper_names():
        signature = project.helper(name)
        calls = 0
        for ref, function in project.functions():
            calls += sum(1 for c in function.calls if c.callee.rsplit(".", 1)[-1] == name)
        entry: dict[str, Any] = {
            "name": name,
            "found": "def" if signature.ref is not None else "configuration",
            "defined_at": None,
            "signature": signature.text(),
            "layout_param": None,
            "padded_param": None,
            "calls": calls,
        }
        if signature.ref is not None:
            where = _where(project, signature.ref)
            entry["defined_at"] = {"path": where["path"], "line": where["line"]}
            entry["calls"] = max(calls, len(callers.get(signature.ref, ())))
        if signature.layout is not None:
            entry["layout_param"] = {"name": signature.layout[0], "position": signature.layout[1],
                                     "default": signature.layout_default}
        if signature.padded is not None:
            entry["padded_param"] = {"name": signature.padded[0], "position": signature.padded[1]}
        helpers.append(entry)
    rewrites = []
    for i, file in enumerate(project.files):
        if file.is_test or not file.facts.rewrites:
            continue
        for found in FileQueries(project, i).stale_rewrites():
            item = {**_where(project, found.function), "rewrites": found.rewrite.text,
                    "line": found.rewrite.span[0], "after_owner_via": None}
            if found.via is not None:
                caller, call = found.via
                item["after_owner_via"] = {**_where(project, caller), "line": call.span[0]}
            rewrites.append(item)
    return {
        "files": len(model_files),
        "tests_and_benchmarks_left_out": len(project.files) - len(model_files),
        "kernel_modules": sum(1 for f in model_files if f.facts.kernel),
        "sources": sources,
        "owners": owners,
        "inferred_owners": inferred,
        "cp_helpers": helpers,
        "stale_rewrites": rewrites,
    }


def _at(item: dict[str, Any]) -> str:
    return f"{item['function']} ({item['path']}:{item['line']})"


def render_model(project: Project, output_format: str = "text") -> str:
    """The model as ``layoutcheck model`` prints it: ``text`` (for people) or ``json``."""
    data = describe(project)
    if output_format == "json":
        return json.dumps(data, indent=2)
    lines = [f"Project: {data['files']} files ({data['tests_and_benchmarks_left_out']} tests and benchmarks "
             f"left out, {data['kernel_modules']} kernel modules)", "", "Sources:"]
    for source in data["sources"]:
        writers = ", ".join(_at(w) for w in source["written_by"]) or "nothing in this project"
        lines.append(f"  {source['name']} ({source['kind']}): written by {writers}; read in "
                     f"{source['read_in']} functions")
    lines += ["", "Owners:"]
    for layout in ("bshd", "thd"):
        found = data["owners"].get(layout, [])
        if not found:
            lines.append(f"  {layout}: none")
        for owner in found:
            units = f"; pads to {', '.join(owner['units'])}" if owner["units"] else ""
            lines.append(f"  {layout}: {_at(owner)}: {owner['why']}{units}")
    if data["inferred_owners"]:
        lines += ["", "Inferred owners (the only padding decision on their path):"]
        for owner in data["inferred_owners"]:
            units = f" to {', '.join(owner['units'])}" if owner["units"] else ""
            lines.append(f"  {_at(owner)}: pads{units}, and its callers read the result")
    lines += ["", "CP helpers:"]
    for helper in data["cp_helpers"]:
        if helper["found"] == "def":
            where = helper["defined_at"]
            head = f"  {helper['signature']}\n      defined at {where['path']}:{where['line']}"
        else:
            head = f"  {helper['name']}: not in the tree; the configured positions apply"
        params = []
        for key, label in (("layout_param", "layout kind"), ("padded_param", "padded length")):
            param = helper[key]
            if param is not None:
                position = "keyword-only" if param["position"] is None else f"position {param['position']}"
                params.append(f"{label} `{param['name']}` ({position})")
        detail = "; ".join(params) if params else "no layout arguments (its calls cannot omit any)"
        lines.append(f"{head}; {detail}; {helper['calls']} calls")
    if data["stale_rewrites"]:
        lines += ["", "Rewrites of the owner's inputs after the owner:"]
        for item in data["stale_rewrites"]:
            via = item["after_owner_via"]
            how = f", called by {_at(via)}" if via else ""
            lines.append(f"  {item['rewrites']} in {_at(item)}{how}")
    return "\n".join(lines)
