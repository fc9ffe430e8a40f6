"""Facts replayed from a file's function records (moved or not) against a fresh extraction, over edited real files.

``python benchmarks/reuse_identity.py TREE...`` takes each ``.py`` file of the trees, extracts it with a
`FunctionMemo` (the records a one-file run leaves), edits it eight ways, and extracts each edited text with
those records and without: the facts must be equal (`layoutcheck.model.reuse`). It prints, per edit, the
texts compared, the functions reused, moved (replayed at another place) and walked, and the differences; the
exit status is 1 when any differ. Reads the trees only. CPU-heavy: about five minutes for verl, Megatron-LM
and slime on one core. ``--limit N`` takes N files, shuffled (seed 0).
"""

from __future__ import annotations

import argparse
import ast
import marshal
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.extract import extract
from layoutcheck.model.facts import cache_data, ensure_calls
from layoutcheck.model.reuse import FunctionMemo, units

SETTINGS = LintSettings()


def facts(source: str, memo: FunctionMemo | None = None) -> tuple:
    """The facts of ``source`` as the cache writes them, every call decoded."""
    found = extract(source, SETTINGS, memo)
    ensure_calls(found)
    data = cache_data(found)
    return data["core"], marshal.loads(data["calls"]), data["names"]


def edits(source: str) -> Iterator[tuple[str, str]]:
    """``source`` edited in its middle function (a line, three, its last statement removed, a line at its end,
    a line edited in place), a function added before the middle module-level statement, that statement
    removed, and a comment at the top."""
    tree = ast.parse(source)
    found = units(tree)
    if len(found) < 2:
        return
    lines = source.split("\n")
    middle = found[len(found) // 2]
    first = middle.body[1] if isinstance(middle.body[0], ast.Expr) and len(middle.body) > 1 else middle.body[0]
    indent = " " * first.col_offset
    yield "insert", "\n".join([*lines[:first.lineno - 1], indent + "_added = len([])", *lines[first.lineno - 1:]])
    three = [indent + "_a = 1", indent + "_b = [_a] * 3", indent + "_c = _b"]
    yield "insert3", "\n".join([*lines[:first.lineno - 1], *three, *lines[first.lineno - 1:]])
    if len(middle.body) >= 2:
        last = middle.body[-1]
        yield "remove-stmt", "\n".join([*lines[:last.lineno - 1], *lines[last.end_lineno:]])
    last = middle.body[-1]
    grown = " " * last.col_offset + "_tail = 0"
    yield "grow", "\n".join([*lines[:last.end_lineno], grown, *lines[last.end_lineno:]])
    same = list(lines)
    same[first.lineno - 1] += "; _x = 2"
    yield "same-lines", "\n".join(same)
    top = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    if len(top) >= 2:
        chosen = top[len(top) // 2]
        at = min([chosen.lineno, *(d.lineno for d in chosen.decorator_list)])
        added = ["def _added_function(x):", "    return x + 1", "", ""]
        yield "add-def", "\n".join([*lines[:at - 1], *added, *lines[at - 1:]])
        yield "remove-def", "\n".join([*lines[:at - 1], *lines[chosen.end_lineno:]])
    yield "top-comment", "\n".join(["# a comment", *lines])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args(argv)
    files = sorted(p for tree in args.trees for p in tree.rglob("*.py"))
    random.Random(0).shuffle(files)
    if args.limit:
        files = files[:args.limit]
    stats: dict[str, list[int]] = {}
    differ: list[tuple[str, str]] = []
    start = time.perf_counter()
    for path in files:
        try:
            source = path.read_text()
            ast.parse(source)
            first = FunctionMemo()
            extract(source, SETTINGS, first)
        except (SyntaxError, UnicodeDecodeError, RecursionError, ValueError):
            continue
        entry = first.entry()
        if entry is None:
            continue  # its calls are rewritten: no records
        blob = marshal.dumps(entry)
        for kind, edited in edits(source):
            try:
                ast.parse(edited)
            except SyntaxError:
                continue
            memo = FunctionMemo(marshal.loads(blob))
            try:
                same = facts(edited, memo) == facts(edited)
            except RecursionError:
                continue
            row = stats.setdefault(kind, [0, 0, 0, 0, 0])
            row[0] += 1
            row[1] += memo.reused
            row[2] += memo.moved
            row[3] += memo.walked
            if not same:
                row[4] += 1
                differ.append((str(path), kind))
    print(f"{len(files)} files, {sum(r[0] for r in stats.values())} edited texts, {time.perf_counter() - start:.0f} s")
    print(f"{'edit':<12} {'texts':>6} {'reused':>7} {'moved':>7} {'walked':>7} {'differ':>7}")
    for kind, row in stats.items():
        print(f"{kind:<12} {row[0]:>6} {row[1]:>7} {row[2]:>7} {row[3]:>7} {row[4]:>7}")
    for path, kind in differ[:30]:
        print(f"differs: {path} ({kind})")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
