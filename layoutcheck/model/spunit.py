"""A packed stream cut to its real length without the TP unit (class 8), read once per module.

Megatron-core's packed (THD) forward, ``model(..., packed_seq_params=...)``,
scatters the sequence dimension over the tensor-parallel ranks when sequence
parallelism is on: the stream it gets must be a multiple of the TP world size.
A trainer that trims the padding off a packed input before the forward cuts it
to the last cumulative boundary, the real token count, which no unit divides.
What the code does decides, and the library's facts (its keyword, its
boundary fields, its parallel-state call), never the project's names:

* a *packed forward* is a call that passes ``packed_seq_params=`` (not
  ``None``) in a module that imports from ``megatron.core``;
* a *boundary read* is a local assigned ``b[-1]`` (``.item()``, ``int(...)``)
  of cumulative boundaries: the library's ``cu_seqlens_q`` / ``cu_seqlens_kv``
  fields (not their ``_padded`` twins, which already end at the padded
  length), a ``cumsum`` result, or a tensor the function hands to
  ``PackedSeqParams(cu_seqlens_q=...)``;
* `unaligned_packed_cuts` flags the first cut ``t[:, :n]`` (or ``t[:n]``) by
  such a length of a tensor then handed to the packed forward, unless ``n`` is
  assigned again between the read and the cut from the TP world size
  (``get_tensor_model_parallel_world_size()`` or a local derived from it).
"""

from __future__ import annotations

import ast

from layoutcheck.model.syntax import int_value, keyword, last_name, nodes, own_nodes

__all__ = ["unaligned_packed_cuts"]

_BOUNDARY_FIELDS = frozenset({"cu_seqlens_q", "cu_seqlens_kv"})
_TP_SIZE = "get_tensor_model_parallel_world_size"
_FORWARD_KEYWORD = "packed_seq_params"


def _imports_megatron_core(tree: ast.Module) -> bool:
    for node in nodes(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("megatron.core"):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith("megatron.core") for a in node.names):
            return True
    return False


def _stores(function: ast.AST) -> list[tuple[str, ast.expr, int]]:
    """``(name, value, line)`` for each plain-name assignment (``x = v``, ``x += v``) of the function."""
    out = []
    for node in own_nodes(function):
        if isinstance(node, ast.Assign):
            out += [(t.id, node.value, node.lineno) for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name) \
                and node.value is not None:
            out.append((node.target.id, node.value, node.lineno))
    return out


def _boundary_tensors(function: ast.AST, stores: list[tuple[str, ast.expr, int]]) -> set[str]:
    """Locals that hold cumulative boundaries: a ``cumsum`` result, or what ``PackedSeqParams`` gets as them."""
    out = {name for name, value, _ in stores
           if any(isinstance(n, ast.Call) and last_name(n.func) == "cumsum" for n in ast.walk(value))}
    for node in own_nodes(function):
        if isinstance(node, ast.Call) and last_name(node.func) == "PackedSeqParams":
            for field in _BOUNDARY_FIELDS:
                given = keyword(node, field)
                if isinstance(given, ast.Name):
                    out.add(given.id)
    return out


def _last_boundary(value: ast.expr, tensors: set[str]) -> bool:
    """Does ``value`` read the last cumulative boundary (``cu.cu_seqlens_q[-1].item()``)?"""
    for node in ast.walk(value):
        if not (isinstance(node, ast.Subscript) and int_value(node.slice) == -1):
            continue
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr in _BOUNDARY_FIELDS:
            return True
        if isinstance(base, ast.Name) and base.id in tensors:
            return True
    return False


def _tp_derived(stores: list[tuple[str, ast.expr, int]]) -> set[str]:
    """Locals whose value comes from the TP world size, directly or through other locals."""
    derived: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, value, _ in stores:
            if name not in derived and _mentions_tp(value, derived):
                derived.add(name)
                changed = True
    return derived


def _mentions_tp(value: ast.expr, derived: set[str]) -> bool:
    return any(
        (isinstance(n, ast.Call) and last_name(n.func) == _TP_SIZE) or (isinstance(n, ast.Name) and n.id in derived)
        for n in ast.walk(value)
    )


def _cut_length(value: ast.expr) -> tuple[str, ast.Subscript] | None:
    """``(n, the cut)`` for ``t[:n]`` or ``t[:, :n]``: a tensor cut to its first ``n`` positions."""
    if not isinstance(value, ast.Subscript):
        return None
    parts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
    for part in parts:
        if isinstance(part, ast.Slice) and part.lower is None and part.step is None \
                and isinstance(part.upper, ast.Name):
            return part.upper.id, value
    return None


def _forward_inputs(function: ast.AST) -> list[tuple[set[str], int]]:
    """For each packed forward of the function: the names it is given, and its line."""
    out = []
    for node in own_nodes(function):
        if not isinstance(node, ast.Call):
            continue
        given = keyword(node, _FORWARD_KEYWORD)
        if given is None or (isinstance(given, ast.Constant) and given.value is None):
            continue
        args = [*node.args, *(k.value for k in node.keywords if k.arg != _FORWARD_KEYWORD)]
        out.append(({a.id for a in args if isinstance(a, ast.Name)}, node.lineno))
    return out


def _check(function: ast.AST) -> list[tuple[ast.AST, str]]:
    forwards = _forward_inputs(function)
    if not forwards:
        return []
    stores = _stores(function)
    tensors = _boundary_tensors(function, stores)
    reads = {}
    for name, value, line in stores:
        if _last_boundary(value, tensors):
            reads.setdefault(name, line)
    if not reads:
        return []
    derived = _tp_derived(stores)
    out: list[tuple[ast.AST, str]] = []
    flagged: set[str] = set()  # one finding per length: its partners' cuts are the same bug
    for name, value, line in stores:
        found = _cut_length(value)
        if found is None or found[0] not in reads or found[0] in flagged or reads[found[0]] >= line:
            continue
        length, cut = found
        rounded = any(n == length and reads[length] <= at < line and _mentions_tp(v, derived)
                      for n, v, at in stores)
        if rounded or not any(name in given and line < at for given, at in forwards):
            continue
        flagged.add(length)
        out.append((cut, f"{length}|{reads[length]}"))
    return out


def unaligned_packed_cuts(tree: ast.Module) -> dict[ast.AST, list[tuple[ast.AST, str]]]:
    """Function node -> (the cut, ``"n|line of its boundary read"``) for each packed stream cut to its last
    cumulative boundary, not rounded to the TP unit, and handed to a Megatron-core packed forward (see the
    module docs)."""
    if not _imports_megatron_core(tree):
        return {}
    out: dict[ast.AST, list[tuple[ast.AST, str]]] = {}
    for function in nodes(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and (found := _check(function)):
            out[function] = found
    return out
