"""A prefix's length measured by one encoding and used as a bound in another.

Part of the per-file walk (`layoutcheck.model.extract`, through `layoutcheck.model.sinkchecks`):
one function's statements as written, no names, no project.

* `prefix_length_apart` (class 7): one encoder (the same callee) encodes a joined text
  ``prefix + rest`` with its special tokens (``add_special_tokens`` left at its default or true),
  and encodes ``prefix`` alone with ``add_special_tokens=False``; the length of the second,
  ``len(...)``, then bounds a slice (``labels[0, :n] = IGNORE``). The joined encoding's tokens
  are moved by the special tokens it adds, and cut by its own truncation (``truncation=True``,
  ``max_length=``) where the prefix's is not: the bound falls off the prefix/rest boundary, and a
  long prefix masks the whole row.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from layoutcheck.model.bodyreads import expressions, through
from layoutcheck.model.partners import Body
from layoutcheck.model.syntax import keyword, nodes, positional

__all__ = ["SPELLINGS", "prefix_length_apart"]

SPELLINGS: dict[str, tuple[str, ...]] = {"prefix_length_apart": ("add_special_tokens", "len(")}
"""What a function's text must spell for each check here to find anything (words, never names)."""

def _special(call: ast.Call) -> bool | None:
    """Whether ``call`` adds special tokens: False for ``add_special_tokens=False``, True when the
    keyword is absent or true, None when it is not a literal."""
    flag = keyword(call, "add_special_tokens")
    if flag is None:
        return True
    return flag.value if isinstance(flag, ast.Constant) and isinstance(flag.value, bool) else None


def _joined_left(node: ast.expr) -> list[str]:
    """``ast.dump`` of each leading operand of a text join ``a + b`` (``a``, and ``a + b`` of ``a + b + c``)."""
    found = []
    while isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        node = node.left
        found.append(ast.dump(node))
    return found


def prefix_length_apart(body: Body) -> Iterator[tuple[ast.AST, str]]:
    """``len(enc(prefix, add_special_tokens=False)...)`` bounding a slice where the same ``enc``
    encodes ``prefix + rest`` with its special tokens."""
    bound = body.bindings()
    calls = [n for _, n in expressions(body) if isinstance(n, ast.Call) and positional(n)]
    prefixes = [c for c in calls if _special(c) is False]
    if not prefixes:
        return
    joined = [c for c in calls if _special(c) is True and _joined_left(through(positional(c)[0], bound))]
    if not joined:
        return
    # The slice bounds the function uses: a name or a `len(...)` call, as written.
    bounds: set[str] = set()
    for _, node in expressions(body):
        if isinstance(node, ast.Slice):
            for part in (node.lower, node.upper):
                if part is not None:
                    bounds.add(ast.dump(part))
    for prefix in prefixes:
        text = ast.dump(positional(prefix)[0])
        func = ast.dump(prefix.func)
        partner = next((j for j in joined if ast.dump(j.func) == func
                        and text in _joined_left(through(positional(j)[0], bound))), None)
        if partner is None:
            continue
        # The prefix's length: `len(<prefix call>...)`, inline or bound to a local.
        lengths = [n for n in calls if isinstance(n.func, ast.Name) and n.func.id == "len" and len(n.args) == 1
                   and any(m is prefix for m in nodes(n.args[0]))]
        for length in lengths:
            used = ast.dump(length) in bounds or any(
                ast.dump(ast.Name(id=name, ctx=ast.Load())) in bounds
                for name, values in bound.items() if len(values) == 1 and values[0] is length)
            if used:
                cut = keyword(partner, "truncation") is not None or keyword(partner, "max_length") is not None
                yield prefix, "truncated" if cut else ""
                break
