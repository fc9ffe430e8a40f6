"""Two reads of one function's body that the sink checks share (`layoutcheck.model.sinkchecks`).

* `through` (`layoutcheck.model.partners.through`, the statement-level checks' own): an expression,
  or the one value a local is ever assigned in the function, followed a few names deep (``k = -n``
  then ``x[k:]`` reads as ``x[-n:]``); a name assigned twice or never stays itself.
* `expressions`: every expression node of the function's own statements, comprehensions
  included, nested functions and classes left out, each with its statement.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from layoutcheck.model.partners import Body, through
from layoutcheck.model.syntax import CHILD_FIELDS, nodes

__all__ = ["expressions", "through"]

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def expressions(body: Body) -> Iterator[tuple[ast.stmt, ast.AST]]:
    """Each expression node of ``body``'s statements with its statement (a compound statement's own
    parts only: the test of an ``if``, the target and iterable of a ``for``; its body's statements
    come as statements of their own block). Listed once per function, on ``body``: most of the sink
    checks read them all."""
    found = body.memo.get("expressions")
    if found is None:
        found = body.memo["expressions"] = list(_expressions(body))
    return iter(found)


def _expressions(body: Body) -> Iterator[tuple[ast.stmt, ast.AST]]:
    for block in body.blocks:
        for stmt in block:
            if isinstance(stmt, _NESTED):
                continue
            # The statement's fields that may hold a node (`syntax.CHILD_FIELDS`), in `ast.iter_fields`'
            # order: the others hold no expression.
            for field in CHILD_FIELDS[type(stmt)]:
                value = getattr(stmt, field, None)
                for item in value if isinstance(value, list) else [value]:
                    if isinstance(item, ast.expr):
                        for node in nodes(item):
                            yield stmt, node
