"""``layoutcheck model``: what the linter believes about a project, as text or JSON.

How a user checks the linter before trusting it, and how a maintainer debugs
it. Everything is inferred from what the code does, and each belief says the
line that decided it:

* fields: what each record field holds (each sample's padded length `P`, true
  lengths `T`, per-sample tensors, a packed batch's cumulative lengths), the
  side its rows are padded on and read as, and the store or use that showed it;
* owners of each layout and why (stores each sample's padded length, builds
  the cumulative lengths, or listed in `owners`), with the units they pad to;
  the functions inferred to own their own padding (the only padding decision
  on their path);
* layout helpers: functions that take the layout kind and a padded length,
  with the parameters that play each part and where the linter saw it;
* rewrites of the owner's inputs that run after the owner;
* per function, the spaces its code shows for its names, parameters and
  fields (`Function.spaces`), plus what the project adds for its parameters
  (what every caller passes; which parameters take a padded or a true length).

Everything is read from `layoutcheck.model.project`; nothing here decides.
"""

from __future__ import annotations

import json
from typing import Any

from layoutcheck.model.project import FunctionRef, Project
from layoutcheck.model.queries import FileQueries
from layoutcheck.model.vocabulary import Tag

__all__ = ["describe", "render_model"]

_FIELD_SPACES = (
    (int(Tag.PAD), "each sample's padded length P"),
    (int(Tag.PACKED), "cumulative lengths of a packed batch"),
    (int(Tag.TOK), "per-sample tensors"),
    (int(Tag.SEQ), "true lengths T"),
)
_PARAM_SPACES = (
    (int(Tag.SRC), "the owner's padded length P"),
    (int(Tag.PAD), "a padded length P"),
    (int(Tag.PACKED), "cumulative lengths"),
    (int(Tag.TOK), "per-sample tensors"),
    (int(Tag.STREAM), "a packed stream"),
    (int(Tag.SEQ), "a true length T"),
)


def _where(project: Project, ref: FunctionRef) -> dict[str, Any]:
    function = project.function(ref)
    return {"function": function.qualname, "path": project.files[ref[0]].display, "line": function.span[0]}


def _units(pads: Any) -> list[str]:
    return sorted({p.unit for p in pads if p.unit})


def _pad_sides(project: Project) -> dict[str, list[dict[str, Any]]]:
    """Per field: the sides its rows are placed on and read as, each with the line that showed it."""
    out: dict[str, list[dict[str, Any]]] = {}
    for key, (placed, read) in project.sides.fields.items():
        for label, by_side in (("padded on the {}", placed), ("read as padded on the {}", read)):
            for side, found in sorted(by_side.items()):
                ref, fact = found[0]
                out.setdefault(key, []).append({
                    "space": label.format(side), "why": f"`{fact.text}`",
                    "function": project.files[ref[0]].facts.functions[fact.function].qualname,
                    "path": project.files[ref[0]].display, "line": fact.span[0],
                })
    return out


def _fields(project: Project) -> list[dict[str, Any]]:
    spaces = project.spaces
    sides = _pad_sides(project)
    out = []
    for key in sorted(set(spaces.fields) | set(sides)):
        tags = spaces.fields.get(key, 0)
        found = []
        for tag, word in _FIELD_SPACES:
            if not tags & tag:
                continue
            ref, line, what = spaces.why.get((key, tag), (None, 0, ""))
            entry: dict[str, Any] = {"space": word, "why": what}
            if ref is not None:
                entry.update({"function": project.function(ref).qualname, "path": project.files[ref[0]].display,
                              "line": line})
            found.append(entry)
            if tag in (int(Tag.PAD), int(Tag.PACKED)):
                break  # the most specific space; a padded list also holds lengths, of another kind
        found += sides.get(key, [])
        if found:
            out.append({"name": key, "spaces": found})
    return out


def _helpers(project: Project) -> list[dict[str, Any]]:
    helpers = []
    callers = project.callers  # decodes every file's calls
    found = {signature.name: (ref, signature) for ref, signature in project.layout_helpers.items()}
    for name in project.helper_names():
        ref, signature = found.get(name, (None, project.helper(name)))
        entry: dict[str, Any] = {
            "name": name,
            "found": "def" if signature.ref is not None else "configuration",
            "defined_at": None,
            "signature": signature.text(),
            "layout_param": None,
            "padded_param": None,
            "calls": 0,
            "why": [],
        }
        if signature.ref is not None:
            where = _where(project, signature.ref)
            entry["defined_at"] = {"path": where["path"], "line": where["line"]}
            entry["calls"] = len(callers.get(signature.ref, ()))
            function = project.function(signature.ref)
            for subject, space, line, why in function.spaces:
                if space in ("layout kind", "padded length P (parameter)", "true length T (parameter)"):
                    entry["why"].append({"parameter": subject, "space": space, "line": line, "why": why})
        else:
            entry["calls"] = sum(1 for _, f in project.functions() for c in f.calls
                                 if c.callee.rsplit(".", 1)[-1] == name)
        if signature.layout is not None:
            entry["layout_param"] = {"name": signature.layout[0], "position": signature.layout[1],
                                     "default": signature.layout_default}
        if signature.padded is not None:
            entry["padded_param"] = {"name": signature.padded[0], "position": signature.padded[1]}
        helpers.append(entry)
    return helpers


def _function_spaces(project: Project) -> list[dict[str, Any]]:
    """Per function of the checked files: what its code shows, and what the project adds for its parameters."""
    spaces = project.spaces
    out = []
    for ref, function in project.functions():
        if not project.files[ref[0]].checked:
            continue
        found = [{"subject": s, "space": space, "line": line, "why": why} for s, space, line, why in function.spaces]
        seen = {(e["subject"], e["space"]) for e in found}
        for name in sorted(spaces.padded_slots(ref) - set(function.padded_params)):
            entry = {"subject": name, "space": "padded length P (parameter)", "line": function.span[0],
                     "why": "passed on where another function takes a padded length"}
            found.append(entry)
        for param in function.params:
            if not project.callers_of(ref):
                break
            tags = spaces.param(ref, param.name)
            word = next((w for tag, w in _PARAM_SPACES if tags & tag), None)
            if word is not None and (param.name, word) not in seen:
                found.append({"subject": param.name, "space": word, "line": function.span[0],
                              "why": "what its callers pass"})
        if found:
            out.append({**_where(project, ref), "spaces": sorted(found, key=lambda e: (e["line"], e["subject"]))})
    return out


def describe(project: Project) -> dict[str, Any]:
    """The model as JSON-able data (the ``--output-format json`` document)."""
    model_files = [f for f in project.files if not f.is_test]
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
        "fields": _fields(project),
        "owners": owners,
        "inferred_owners": inferred,
        "cp_helpers": _helpers(project),
        "stale_rewrites": rewrites,
        "functions": _function_spaces(project),
    }


def _at(item: dict[str, Any]) -> str:
    return f"{item['function']} ({item['path']}:{item['line']})"


def render_model(project: Project, output_format: str = "text") -> str:
    """The model as ``layoutcheck model`` prints it: ``text`` (for people) or ``json``."""
    data = describe(project)
    if output_format == "json":
        return json.dumps(data, indent=2)
    lines = [f"Project: {data['files']} files ({data['tests_and_benchmarks_left_out']} tests and benchmarks "
             f"left out, {data['kernel_modules']} kernel modules)", "", "Fields:"]
    for field in data["fields"]:
        for space in field["spaces"]:
            where = f" ({space['path']}:{space['line']}, {space['function']})" if "path" in space else ""
            lines.append(f"  {field['name']}: {space['space']}: {space['why']}{where}")
    if not data["fields"]:
        lines.append("  none seen")
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
    lines += ["", "Layout helpers (they take the layout kind and a padded length):"]
    if not data["cp_helpers"]:
        lines.append("  none seen")
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
        for why in helper["why"]:
            lines.append(f"      `{why['parameter']}`: {why['space']} (line {why['line']}: {why['why']})")
    if data["stale_rewrites"]:
        lines += ["", "Rewrites of the owner's inputs after the owner:"]
        for item in data["stale_rewrites"]:
            via = item["after_owner_via"]
            how = f", called by {_at(via)}" if via else ""
            lines.append(f"  {item['rewrites']} in {_at(item)}{how}")
    if data["functions"]:
        lines += ["", "Spaces by function (what the code shows, and the line that decided it):"]
        for function in data["functions"]:
            lines.append(f"  {_at(function)}")
            for entry in function["spaces"]:
                lines.append(f"    {entry['subject']}: {entry['space']} (line {entry['line']}: {entry['why']})")
    return "\n".join(lines)
