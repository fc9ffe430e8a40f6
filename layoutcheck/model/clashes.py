"""Two spaces meeting in one function: the section-10 mismatches a file alone shows.

Part of the per-file walk (`layoutcheck.model.extract`): at each slice and
each elementwise combination, what the values are (`layoutcheck.model.flow`)
says whether two spaces meet without a conversion, and a `Clash` records it:

* ``double_shift``: a next-token shift on a value already shifted that way;
* ``shift_mismatch``: two of the batch's own tensors shifted opposite ways,
  combined elementwise (recorded at the shift like the inputs', ``[:, :-1]``);
* ``zero_slice`` (``zero_slice?`` when the project must say what ``n`` is):
  ``x[-n:]`` / ``x[:-n]`` with a per-sample length or a pad amount ``n`` that
  no enclosing test shows positive;
* ``padded_offset``: mask-selected data (a sample's ``T`` true tokens) sliced
  up to an end computed from a padded length, not clamped to its size;
* ``moved_origin``: ``x[a - q : b - q]`` with ``q`` a length less another (a
  prompt's): whole-sequence positions moved to the response's origin with no
  clamp at 0;
* ``stream_width``: a pad amount ``w - n`` with ``w`` a cumulative offset (the
  packed stream's length) and ``n`` one sample's length;
* ``mixed_window``: ``x[:, n:-1]`` with ``n`` a length: a window that starts in
  token space and ends in the logits' (one position off in either);
* ``shifted_prefix``: ``y[:n]`` or ``y[n:]`` of next-token targets ``y = x[1:]``
  (whose ``x`` is also cut ``x[:-1]`` for the inputs) with ``n`` a length
  counted in tokens (a prompt's): the targets' position ``n - 1`` is token
  ``n``, so the cut is one position late;
* ``wide_max``: a maximum over a whole collection, computed before a loop over
  chunks of it (micro-batches), sizing a pad or a tensor inside the loop: one
  length for the samples of every chunk.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from layoutcheck.model.facts import Clash
from layoutcheck.model.flow import ENTRY, MASKED, NOTHING, PACKED, PAD, SEQ, STREAM, Value
from layoutcheck.model.idioms import match_max_over
from layoutcheck.model.imports import Imports
from layoutcheck.model.shifts import shift_kind, shift_root
from layoutcheck.model.syntax import int_value, last_name, names_in, nodes, positional, root_name, walk

__all__ = ["ClashesMixin"]

_SHIFT_TEXT = {"first": "[..., 1:]", "last": "[..., :-1]"}


def _difference(node: ast.expr | None) -> bool:
    """``t - r`` of two values that are not literals: a length less another (a prompt's length)."""
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and int_value(node.left) is None
            and int_value(node.right) is None and not isinstance(node.left, ast.Call))


def _minus_one(node: ast.expr) -> bool:
    """``n - 1``: a start already moved to the logits' space."""
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and int_value(node.right) == 1


def _negated(node: ast.expr | None) -> ast.expr | None:
    """``n`` of ``-n`` when ``n`` is not a literal (``x[-n:]``), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and not isinstance(node.operand, ast.Constant):
        return node.operand
    return None


def _position(node: Any) -> tuple[int, int]:
    """Where ``node`` starts: the order of nodes in the text."""
    return node.lineno, node.col_offset


class ClashesMixin:
    """The clash checks of the per-file walk (mixed into its extractor)."""

    def clashes_at(self, node: ast.Subscript) -> None:
        """A shift on what is already shifted, ``x[-n:]`` with an ``n`` that can be 0, true-length
        data sliced up to a padded length's offset (`Clash`)."""
        index = node.slice
        kind = shift_kind(index)
        if kind is not None:
            before = self.classify(node.value)
            tensor = isinstance(index, ast.Tuple)
            # Only a tensor's shift is judged: one of the two cuts an axis of several (`x[:, :-1]`),
            # as a list or a path (`loc[:-1]`, trimmed twice on purpose) never is.
            if any(k.rstrip("+") == kind and (tensor or k.endswith("+")) for k, _, _, _ in before.shifts):
                self.add_clash("double_shift", node, kind)
            return
        if isinstance(index, ast.Tuple) and index.elts and isinstance(index.elts[-1], ast.Slice) and all(
            isinstance(e, ast.Slice) and e.lower is None and e.upper is None for e in index.elts[:-1]
        ):
            index = index.elts[-1]  # `x[:, -n:]`: the last axis's slice
            self.mixed_window(node, index)
        if isinstance(index, ast.Slice):
            self.shifted_prefix(node, index)
        if isinstance(index, ast.Slice) and index.step is None:
            self.moved_origin(node, index)
            # A bound hoisted into a local (`k = -n` then `x[k:]`) is read as written inline.
            lower, upper = self.resolved(index.lower), self.resolved(index.upper)
            n = _negated(lower) if upper is None else _negated(upper) if lower is None else None
            if n is not None and not self.nonzero(n):
                found = self.classify(n)
                if found.tags & (SEQ | PAD) and found.tags & (ENTRY | PAD):
                    form = f"[-{self.source.snippet(n, 30)}:]" if index.upper is None else f"[:-{self.source.snippet(n, 30)}]"
                    self.add_clash("zero_slice", node, form, found)
                elif found.params or found.fields:
                    form = f"[-{self.source.snippet(n, 30)}:]" if index.upper is None else f"[:-{self.source.snippet(n, 30)}]"
                    self.add_clash("zero_slice?", node, form, found)
            base = self.classify(node.value)
            if base.tags & MASKED and index.upper is not None and index.lower is not None and (
                int_value(lower) != 0
            ):
                end = self.classify(index.upper)
                if end.tags & PAD and not self.clamped(index.upper, node.value):
                    self.add_clash("padded_offset", node, self.source.snippet(index.upper, 40))

    def moved_origin(self, node: ast.Subscript, window: ast.Slice) -> None:
        """``x[a - q : b - q]`` with ``q = t - r`` (a prompt's length: a sample's total less its
        response): whole-sequence positions moved to the response's origin, not clamped at 0. A
        position before the response goes negative, and a negative bound counts from the end."""
        lowers, uppers = self.paths(window.lower), self.paths(window.upper)
        if len(lowers) == len(uppers):
            pairs = list(zip(lowers, uppers))  # `s, e = ...` on each path: the bounds of one path together
        else:
            pairs = [(lo, hi) for lo in lowers for hi in uppers]
        for lower, upper in pairs:
            if self._moved_origin(node, lower, upper):
                return

    def _moved_origin(self, node: ast.Subscript, lower: ast.expr | None, upper: ast.expr | None) -> bool:
        """`moved_origin` for one path's bounds; True when it is flagged."""
        if not (isinstance(lower, ast.BinOp) and isinstance(upper, ast.BinOp) and isinstance(lower.op, ast.Sub)
                and isinstance(upper.op, ast.Sub)):
            return False
        origin = lower.right
        if int_value(origin) is not None or ast.dump(origin) != ast.dump(upper.right):
            return False
        if not _difference(self.bound_expr(origin.id) if isinstance(origin, ast.Name) else origin):
            return False
        text = self.source.segment(origin)
        for bound in (lower.left, upper.left):
            # `s = max(start, q)`: the position is at or after the origin already.
            expr = self.bound_expr(bound.id) if isinstance(bound, ast.Name) else None
            if isinstance(expr, ast.Call) and last_name(expr.func) == "max" and any(
                    self.source.segment(a) == text for a in expr.args):
                return False
        if any(re.search(r"(?<![\w.])" + re.escape(self.source.segment(lower.left)) + r"\s*>=?\s*" + re.escape(text), g)
               for g in self.positive):
            return False
        calls = frozenset(c for b in (lower.left, upper.left) for c in [self.computed_by(b)] if c)
        self.add_clash("moved_origin", node, text, Value(0, None, calls=calls))
        self.facts.clashes[-1].one_pair = self._ends_of_one_pair(lower.left, upper.left)
        return True

    def _ends_of_one_pair(self, lower: ast.expr, upper: ast.expr) -> bool:
        """Are ``lower`` and ``upper`` elements 0 and 1 of one pair (``p[0]``, ``p[1]``), read through the
        locals they were bound to?"""
        ends = []
        for bound in (lower, upper):
            if isinstance(bound, ast.Name):
                bound = self.bound_expr(bound.id) or bound
            if not (isinstance(bound, ast.Subscript) and int_value(bound.slice) is not None):
                return False
            ends.append(bound)
        return (int_value(ends[0].slice), int_value(ends[1].slice)) == (0, 1) \
            and ast.dump(ends[0].value) == ast.dump(ends[1].value)

    def computed_by(self, node: ast.expr) -> str | None:
        """The function whose result ``node`` is read from (``offsets[0][1]`` with ``_, offsets = f(...)``)."""
        for _ in range(4):
            root = root_name(node)
            if root is None:
                return None
            bound = self.bound_expr(root)
            source = bound or self.frame.data.get("unpacked", {}).get(root)
            if isinstance(source, ast.Call):
                name = self.imports.qualify(source.func) or last_name(source.func)
                at = None if bound is not None else self.frame.data.get("unpacked_at", {}).get(root)
                # element `at` of what the callee returns: its summary there (`*i:f`, `Function.zero_elements`)
                return name if name is None or at is None else f"*{at}:{name}"
            if source is None:
                return None
            node = source
        return None

    def stream_width(self, node: ast.BinOp) -> None:
        """A pad amount ``w - n`` with ``w`` a cumulative offset (``cu.max()``: the packed stream's
        length) and ``n`` one sample's length: the stream taken as one sample's width."""
        if not isinstance(node.op, ast.Sub):
            return
        width, size = self.classify(node.left), self.classify(node.right)
        # `w` may be the stream's length on one path only (a branch for nested tensors): still flagged.
        if width.tags & PACKED and not width.tags & STREAM and size.tags & SEQ and size.tags & ENTRY \
                and not size.tags & (PACKED | STREAM):
            # Flagged where the stream's length was taken for a width (`cu.max()`), when it is known.
            origin = width.origin if isinstance(width.origin, ast.Call) else node
            self.add_clash("stream_width", origin, self.source.snippet(node, 40))

    def mixed_window(self, node: ast.Subscript, window: ast.Slice) -> None:
        """``x[:, n:-1]`` with ``n`` a length (a prompt's): the start counts tokens, the end drops the
        last position as the logits do; the window is one position off in either space."""
        if window.step is not None or int_value(self.resolved(window.upper)) != -1 or window.lower is None:
            return
        start = self.resolved(window.lower)
        if int_value(start) is not None or _minus_one(start):
            return
        found = self.classify(start)
        if found.tags & SEQ and not found.tags & (PAD | PACKED):
            self.add_clash("mixed_window", node, self.source.snippet(start, 30))

    def shifted_store(self, target: ast.Subscript) -> None:
        """`shifted_prefix` at a store (``labels[:n] = ignore``): the window written, read as one read."""
        index = target.slice
        if isinstance(index, ast.Tuple) and index.elts and all(
            isinstance(e, ast.Slice) and e.lower is None and e.upper is None for e in index.elts[:-1]
        ):
            index = index.elts[-1]
        if isinstance(index, ast.Slice):
            self.shifted_prefix(target, index)

    def shifted_prefix(self, node: ast.Subscript, window: ast.Slice) -> None:
        """``y[:n]`` / ``y[n:]`` with ``y = x[1:]`` the next-token targets and ``n`` a length counted in
        tokens (``len(prompt_ids)``): target ``i`` is token ``i + 1``, so the first ``n`` tokens are the
        first ``n - 1`` targets, and the cut is one position late (the first answer token masked, or
        kept one position too far). Only targets whose source is also cut for the inputs (``x[:-1]``,
        in the same function) are read: that pair is what makes ``[1:]`` a next-token shift."""
        if window.step is not None or (window.lower is None) == (window.upper is None):
            return
        bound = window.upper if window.lower is None else window.lower
        terms = self._bound_terms(bound)
        if not terms or any(int_value(t) is not None or _minus_one(t) for t in terms):
            return
        shifted = [(root, n) for kind, _, root, n in self.classify(node.value).shifts if kind.rstrip("+") == "first"]
        if not shifted or not any(root in self._input_cut_roots() for root, _ in shifted):
            return
        own = {root_name(node.value), *(root for root, _ in shifted)}
        for term in terms:
            found = self.classify(term)
            if not found.tags & SEQ or found.tags & (PAD | PACKED | STREAM) or found.shifts:
                continue
            if own & set(names_in(term)):
                continue  # the targets' own length (`len(labels)`): their space already
            self.add_clash("shifted_prefix", node, self.source.snippet(term, 30))
            return

    def _bound_terms(self, bound: ast.expr) -> list[ast.expr]:
        """The values a slice bound is made of: itself, or the arguments of the ``min``/``max`` it is (read
        through locals, two levels): ``min(p, len(y))`` is ``p`` and ``len(y)``."""
        out: list[ast.expr] = []
        todo = [self.resolved(bound)]
        for _ in range(3):
            following: list[ast.expr] = []
            for part in todo:
                if isinstance(part, ast.Call) and last_name(part.func) in ("min", "max") and part.args:
                    following.extend(self.resolved(a) for a in part.args)
                elif part is not None:
                    out.append(part)
            todo = following
        return out + [p for p in todo if p is not None]

    def _input_cut_roots(self) -> set[str]:
        """The values this function cuts like next-token inputs (``x[:-1]``, ``x[:, :-1]``), by `shift_root`."""
        found = self.frame.data.get("input_cut_roots")
        if found is None:
            found = self.frame.data["input_cut_roots"] = {
                shift_root(part.value, self.bound_expr) for part in nodes(self.frame.node)
                if isinstance(part, ast.Subscript) and shift_kind(part.slice) == "last"
            }
        return found

    def wide_max(self, origin: ast.AST) -> None:
        """``m = max(...)`` over ``samples`` before ``for batch in split(samples, k):``, sizing a pad in it."""
        collection = match_max_over(origin, self.imports)
        if collection is None or not self.loops:
            return
        roots = self._collection_roots(collection)
        line = getattr(origin, "lineno", 0)
        for loop in self.loops:
            if loop.lineno <= line <= (loop.end_lineno or loop.lineno):
                continue  # computed inside the loop: one maximum per chunk
            if _chunks(loop, roots, self.imports):
                done = self.frame.data.setdefault("wide_max", set())
                if id(origin) not in done:
                    done.add(id(origin))
                    self.add_clash("wide_max", origin, self.source.snippet(loop.iter, 40))
                return

    def _collection_roots(self, collection: ast.expr) -> set[str]:
        """The names a maximum's collection is read through (``lengths = [len(s) for s in samples]``:
        ``lengths`` and ``samples``)."""
        roots: set[str] = set()
        todo = [collection]
        for _ in range(3):
            following: list[ast.expr] = []
            for node in todo:
                if isinstance(node, (ast.GeneratorExp, ast.ListComp)):
                    node = node.generators[0].iter
                if isinstance(node, ast.Call) and last_name(node.func) == "map" and len(node.args) == 2:
                    node = node.args[1]
                root = root_name(node)
                if root is None or root in roots:
                    continue
                roots.add(root)
                bound = self.bound_expr(root)
                if bound is not None:
                    following.append(bound)
            todo = following
        return roots

    def add_clash(self, kind: str, node: ast.AST, detail: str, value: Value = NOTHING) -> None:
        self.facts.clashes.append(Clash(
            self.frame.index, kind, self.source.span(node), self.source.snippet(node, 60), detail,
            tuple(sorted(value.params)), tuple(sorted(value.fields)), tuple(sorted(value.calls)),
        ))

    def nonzero(self, n: ast.expr) -> bool:
        """Is ``n`` known to be positive here (``if n > 0:``, ``assert n``, ``max(n, 1)``)?"""
        text = self.source.segment(n)
        word = re.compile(r"(?<![\w.])" + re.escape(text) + r"(?![\w(])")
        if any(word.search(guard) for guard in self.positive):
            return True
        if isinstance(n, ast.Name):
            bound = self.bound_expr(n.id)
            if isinstance(bound, ast.Call) and last_name(bound.func) == "max" and any(
                (int_value(a) or 0) >= 1 for a in bound.args
            ):
                return True
        return False

    def clamped(self, end: ast.expr, data: ast.expr) -> bool:
        """Is a slice's end bounded by the sliced data's own size (``min(e, d.shape[0])``)?"""
        root = root_name(data)
        for _ in range(4):
            if isinstance(end, ast.Call) and last_name(end.func) == "min":
                return any(root is not None and root in {n.id for n in walk(a) if isinstance(n, ast.Name)}
                           for a in end.args)
            if isinstance(end, ast.Name):
                bound = self.bound_expr(end.id)
                if bound is None:
                    return False
                end = bound
                continue
            return False
        return False

    def shift_mismatch(self, node: ast.BinOp) -> None:
        """Two values shifted opposite ways (the targets' ``[:, 1:]`` against ``[:, :-1]``) combined:
        recorded at the shift like the inputs', the one to change (the targets' shift is the norm)."""
        if not isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.Div)):
            return
        left, right = self.classify(node.left), self.classify(node.right)
        if (left.tags | right.tags) & PACKED:
            return  # `cu[1:] - cu[:-1]`: lengths from cumulative offsets
        if not any(k.endswith("+") for k, _, _, _ in (*left.shifts, *right.shifts)):
            return  # no tensor axis shifted (`bins[:-1] + bins[1:]` of a list)
        mine = {k.rstrip("+") for k, side, _, _ in left.shifts if side == "data"}
        theirs = {k.rstrip("+") for k, side, _, _ in right.shifts if side == "data"}
        roots = {r for _, side, r, _ in left.shifts if side == "data"} & {
            r for _, side, r, _ in right.shifts if side == "data"}
        if len(mine) != 1 or len(theirs) != 1 or mine == theirs or roots:
            return
        odd, other, other_node = (left, right, node.right) if mine == {"last"} else (right, left, node.left)
        shift = min((n for k, side, _, n in odd.shifts if side == "data" and k.rstrip("+") == "last"),
                    key=_position)
        done = self.frame.data.setdefault("shift_mismatch", set())
        if id(shift) in done:
            return  # one finding per wrong shift, however often its value is combined
        done.add(id(shift))
        self.add_clash("shift_mismatch", shift,
                       f"it is combined at line {node.lineno} (`{self.source.snippet(node, 40)}`) with "
                       f"`{self.source.snippet(other_node, 30)}`, whose data is shifted `{_SHIFT_TEXT['first']}`")


_PER_ITEM = frozenset({"zip", "len", "sorted", "reversed", "list", "iter", "tuple", "set", "filter", "map"})
_SPLITS = frozenset({"split", "chunk", "tensor_split", "array_split"})


def _chunks(loop: ast.For | ast.AsyncFor, roots: set[str], imports: Imports) -> bool:
    """Does ``loop`` walk chunks of a collection read through ``roots`` (``split(samples, k)``,
    ``samples.split(k)``, ``range(0, len(samples), k)``), each chunk walked in its body?"""
    node = loop.iter
    target = loop.target
    if isinstance(node, ast.Call) and imports.qualify(node.func) == "enumerate" and node.args:
        node = node.args[0]
        if isinstance(target, ast.Tuple) and len(target.elts) == 2:
            target = target.elts[1]
    if not isinstance(node, ast.Call):
        return False
    tail = last_name(node.func) or ""
    args = positional(node)
    if tail == "range":
        # `for i in range(0, len(samples), k)`: chunk starts; the chunk is sliced in the body.
        return len(args) == 3 and bool(names_in(args[1]) & roots)
    if tail in _PER_ITEM:
        return False
    if isinstance(node.func, ast.Attribute) and tail in _SPLITS and root_name(node.func.value) in roots:
        pass
    elif not any(root_name(a) in roots for a in args):
        return False
    if not isinstance(target, ast.Name):
        return False
    name = target.id
    # A chunk is a collection: the body walks it (`for s in batch`, `[... for s in batch]`, `stack(batch)`).
    for part in nodes(loop):
        if isinstance(part, (ast.For, ast.comprehension)) and part is not loop and _walks(part.iter, name):
            return True
    return False


def _walks(iterable: ast.expr, name: str) -> bool:
    """``name``, ``enumerate(name)``, ``zip(name, ...)``: a loop over the collection ``name``."""
    if isinstance(iterable, ast.Call) and last_name(iterable.func) in ("enumerate", "zip", "sorted", "reversed"):
        return any(_walks(a, name) for a in iterable.args)
    return isinstance(iterable, ast.Name) and iterable.id == name
