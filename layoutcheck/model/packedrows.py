"""A row that packs several samples, shifted by one position as a whole (class 5).

A *packer* fills one row with several samples: in a loop over the samples it
concatenates each one's sequence onto a record's field that its function starts
as an empty list (``pack = {"labels": [], ...}``; ``pack["labels"] += labels``,
``pack["labels"].extend(labels)``, the value read from the sample the loop
walks) and records where each sample ends in another field of the same record
(``pack["lengths"] += [len(tokens)]``, ``.append(n)``: one entry per sample). The concatenated fields are *packed fields*: each row of them holds
several samples back to back.

A next-token shift belongs to each sample. A field read from a record
(``batch["labels"]``, ``batch.pop("labels")``, through one local and
conversions) and shifted by one position along each row of a batch (``labels[..., 1:]``,
``[:, :-1]``, ``torch.roll(x, -1, dims=-1)``; a bare ``x[1:]`` is one sample's shift) where that field is a packed one moves each sample's
last position onto the next sample's first token, with no error (pytorch/torchtune
b18312c7d: the recipes shifted the labels of rows that `PackedDataset` had
packed). The module gives its packed fields and its shifted reads
(`packed_rows`); the project joins them (`packed_shifts`): a shifted read of a
field that a module the reader imports (directly or through others), or the
reader's own module, packs.

Names play no part: the packer is a loop's shape (a sequence concatenated per
sample beside one entry per sample), the reader a field read then shifted.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING

from layoutcheck.model.packedlocals import LOCAL_CONCATENATIONS, local_packs
from layoutcheck.model.shifts import rolled_left, shift_kind
from layoutcheck.model.syntax import int_value, line_numbers, names_in

if TYPE_CHECKING:
    from layoutcheck.model.graph import ProjectGraph

__all__ = ["CONCATENATIONS", "ROW_SHIFTS", "PackedRows", "ShiftedRead", "packed_rows", "packed_shifts"]

ShiftedRead = tuple[str, str, int, int, int, int, str, str]
"""A field read and shifted by one position: (field, kind ``first``/``last``, line, column, end line, end
column, the shift as written, the function's name)."""
PackedField = tuple[str, int, str, str]
"""A field a loop packs samples into: (field, line of the concatenation, the concatenation as written, the
function's name)."""
PackedRows = tuple[tuple[PackedField, ...], tuple[ShiftedRead, ...]]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_PASS = frozenset({
    "to", "cuda", "cpu", "contiguous", "clone", "detach", "long", "int", "view", "reshape", "copy",
})
_READS = frozenset({"pop", "get"})


def _key(node: ast.AST) -> tuple[str, str] | None:
    """``acc["k"]`` -> (acc, k)."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        return node.value.id, node.slice.value
    return None


def _own(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of ``node``, not those of functions or classes defined inside it."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        current = stack.pop()
        if isinstance(current, (*_FUNCTIONS, ast.ClassDef, ast.Lambda)):
            continue
        yield current
        stack.extend(ast.iter_child_nodes(current))


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``body`` and of the blocks inside them, not of functions or classes defined there
    (expressions are not walked)."""
    for stmt in body:
        if isinstance(stmt, (*_FUNCTIONS, ast.ClassDef)):
            continue
        yield stmt
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if inner and isinstance(inner[0], ast.stmt):
                yield from _statements(inner)
        for handler in getattr(stmt, "handlers", ()):
            yield from _statements(handler.body)
        for case in getattr(stmt, "cases", ()):
            yield from _statements(case.body)


def _one_entry(value: ast.AST) -> bool:
    """``[n]``: one entry per sample (a boundary), not a sequence."""
    return isinstance(value, ast.List) and len(value.elts) == 1 and not isinstance(value.elts[0], ast.Starred)


def _list_fields(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[tuple[str, str]]:
    """(record, field) for each field the function starts as an empty list (``acc = {"k": [], ...}``,
    ``acc["k"] = []``): a row to be filled, not a counter."""
    out: set[tuple[str, str]] = set()
    for stmt in _statements(function.body):
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict):
            out |= {(target.id, k.value) for k, v in zip(value.keys, value.values)
                    if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.List) and not v.elts}
        elif isinstance(value, ast.List) and not value.elts:
            key = _key(target)
            if key is not None:
                out.add(key)
    return out


def _loop_packs(loop: ast.For | ast.AsyncFor, function: str, text: str,
                lists: set[tuple[str, str]]) -> Iterator[PackedField]:
    """The fields of a record this loop packs samples into (see the module docs); ``lists``: the fields
    its function starts as empty lists (`_list_fields`)."""
    sample = names_in(loop.target)
    derived = set(sample)
    body = [n for stmt in loop.body for n in (stmt, *_own(stmt))]
    for _ in range(2):  # names bound in the body from the sample, through one another
        for node in body:
            if isinstance(node, ast.Assign) and names_in(node.value) & derived:
                for target in node.targets:
                    derived |= names_in(target)
    streams: dict[str, list[tuple[str, ast.AST]]] = {}
    entries: set[str] = set()
    for node in body:
        key, value = None, None
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
            key, value = _key(node.target), node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) == 1 \
                and not node.keywords and node.func.attr in ("extend", "append"):
            key, value = _key(node.func.value), node.args[0]
            if key is not None and node.func.attr == "append":
                entries.add(key[0])
                continue
        if key is None or value is None:
            continue
        if _one_entry(value):
            entries.add(key[0])
        elif isinstance(value, (ast.Name, ast.Subscript, ast.Attribute)) and names_in(value) & derived \
                and key in lists:
            streams.setdefault(key[0], []).append((key[1], node))
    for record, found in streams.items():
        if record in entries:  # one row of several samples: each one's end is recorded beside it
            for field, node in found:
                yield field, node.lineno, _segment(text, node), function


def _read_field(node: ast.AST, bound: dict[str, str]) -> str | None:
    """The field ``node`` reads (``x["k"]``, ``x.pop("k")``, ``x.get("k")``, through conversions and the
    locals of ``bound``), else None."""
    for _ in range(6):
        if isinstance(node, ast.Name):
            return bound.get(node.id)
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                return node.slice.value
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _READS and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                return node.args[0].value
            if node.func.attr not in _PASS:
                return None
            node = node.func.value
            continue
        return None
    return None


def _along_rows(node: ast.Call) -> bool:
    """``torch.roll(x, -1, dims=-1)`` (or ``dims=1``): rolled along each row of a batch."""
    dims = next((k.value for k in node.keywords if k.arg in ("dims", "dim")), None)
    if dims is None:
        args = node.args[1:] if isinstance(node.func, ast.Attribute) and not (
            isinstance(node.func.value, ast.Name) and node.func.value.id == "torch") else node.args[2:]
        dims = args[0] if args else None
    return int_value(dims) in (-1, 1)


def _shifted(node: ast.AST, bound: dict[str, str]) -> tuple[str, str] | None:
    """(field, kind) when ``node`` shifts a field read by one position along each row of a batch
    (``x[:, 1:]``, ``x[..., :-1]``; a bare ``x[1:]`` is one sample's shift, or one row's)."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Tuple):
        kind = shift_kind(node.slice)
        if kind is not None:
            field = _read_field(node.value, bound)
            if field is not None:
                return field, kind
    rolled = rolled_left(node)
    if rolled is not None and isinstance(node, ast.Call) and _along_rows(node):
        field = _read_field(rolled, bound)
        if field is not None:
            return field, "first"
    return None


def _function_reads(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str, text: str,
                    shifts: list[int]) -> Iterator[ShiftedRead]:
    """The shifted field reads of ``function`` on the lines ``shifts``, its statements read in source order
    (a local keeps the field it was last bound to)."""
    stmts = sorted(_statements(function.body), key=lambda s: (s.lineno, s.col_offset))
    bound: dict[str, str] = {}
    for stmt in stmts:
        if _spans(stmt, shifts):
            if isinstance(stmt, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
                parts = [getattr(stmt, "test", None), getattr(stmt, "iter", None)]
                inner = [n for p in parts if p is not None for n in (p, *_own(p))]
            else:
                inner = [stmt, *_own(stmt)]
            for node in inner:
                found = _shifted(node, bound)
                if found is not None:
                    yield (*found, node.lineno, node.col_offset, node.end_lineno or node.lineno,
                           node.end_col_offset or node.col_offset, _segment(text, node), name)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            field = _read_field(stmt.value, bound)
            if field is not None:
                bound[stmt.targets[0].id] = field
            else:
                bound.pop(stmt.targets[0].id, None)


CONCATENATIONS = ("] +=", "]+=", "].extend(")
"""A concatenation onto a record's field (``pack["k"] += v``, ``pack["k"].extend(v)``)."""
ROW_SHIFTS = (", 1:]", ", 1:,", ", :-1]", ", :-1,", ",1:]", ",:-1]", "1:, ", ":-1, ", "roll(")
"""A shift along one axis of several (``x[:, 1:]``, ``x[..., :-1]``, ``x[1:, :]``) or a roll, as formatters
write them (plain searches: a regular expression over every colon of a module costs more)."""


def _lines(spellings: tuple[str, ...], text: str) -> list[int]:
    """The lines that spell one of ``spellings`` (sorted)."""
    found: list[int] = []
    for spelling in spellings:
        at = text.find(spelling)
        while at >= 0:
            found.append(at)
            at = text.find(spelling, at + 1)
    return line_numbers(text, found)


def _segment(text: str, node: ast.AST) -> str:
    """``node`` as written when it is on one line, else as `ast.unparse` writes it."""
    line = node.lineno  # type: ignore[attr-defined]
    if node.end_lineno != line:  # type: ignore[attr-defined]
        return ast.unparse(node)
    row = text.split("\n", line)[line - 1].encode()
    return row[node.col_offset:node.end_col_offset].decode(errors="replace")  # type: ignore[attr-defined]


def _spans(node: ast.AST, lines: list[int]) -> bool:
    """Does ``node`` span one of ``lines``?"""
    start, end = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
    at = bisect_left(lines, start)
    return at < len(lines) and lines[at] <= end


def packed_rows(tree: ast.Module, text: str) -> PackedRows:
    """The module's packed fields and its shifted field reads (see the module docs); each read only in the
    functions (and loops) that span a line spelling a concatenation onto a field, or a row shift."""
    concatenations = _lines(CONCATENATIONS, text) if "+=" in text or ".extend(" in text else []
    shifts = _lines(ROW_SHIFTS, text) if "1:" in text or ":-1" in text or "roll(" in text else []
    joins = _lines(LOCAL_CONCATENATIONS, text) if "cat" in text or ".extend(" in text else []
    if not (concatenations or shifts or joins):
        return (), ()
    packed: list[PackedField] = []
    reads: list[ShiftedRead] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                if _spans(stmt, concatenations) or _spans(stmt, shifts) or _spans(stmt, joins):
                    visit(stmt.body, f"{prefix}{stmt.name}.")
            elif isinstance(stmt, _FUNCTIONS):
                name = prefix + stmt.name
                if _spans(stmt, concatenations):
                    lists = _list_fields(stmt)
                    for node in _statements(stmt.body):
                        if lists and isinstance(node, (ast.For, ast.AsyncFor)) and _spans(node, concatenations):
                            packed.extend(_loop_packs(node, name, text, lists))
                if _spans(stmt, joins):  # pieces collected in locals or a comprehension, then joined
                    packed.extend((field, line, _segment(text, node), name) for field, line, node in local_packs(stmt))
                if _spans(stmt, shifts):
                    reads.extend(_function_reads(stmt, name, text, shifts))
                visit([s for s in stmt.body if isinstance(s, (*_FUNCTIONS, ast.ClassDef))], f"{name}.")

    visit(tree.body, "")
    return tuple(packed), tuple(reads)


def packed_shifts(graph: ProjectGraph, index: int) -> Iterator[tuple[ShiftedRead, int, PackedField]]:
    """File ``index``'s shifted reads of a field that its own module or a module it imports (directly or
    through others) packs: (the read, the packer's file, the packed field)."""
    reads = graph.files[index].facts.packed_rows[1]
    if not reads:
        return
    fields = {read[0] for read in reads}
    seen = {index}
    todo = [index]
    packers: dict[str, tuple[int, PackedField]] = {}
    while todo:
        i = todo.pop()
        file = graph.files[i]
        if not file.is_test:
            for packed in file.facts.packed_rows[0]:
                if packed[0] in fields:
                    packers.setdefault(packed[0], (i, packed))
        for j in sorted(graph.imported_files(i)):
            if j not in seen:
                seen.add(j)
                todo.append(j)
    for read in reads:
        found = packers.get(read[0])
        if found is not None and not (found[0] == index and found[1][3] == read[7]):
            yield read, found[0], found[1]
