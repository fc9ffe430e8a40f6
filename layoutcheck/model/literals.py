"""Bucket lists, pad multipliers and alignment units combined with ``max()`` or picked by a branch.

Part of the per-file walk (`layoutcheck.model.extract`). Literals are kept
with the name they are bound to (`BucketLiteral`), and the names the file
searches for the smallest entry that fits a length (bucket lists, found by
use); ``max(...)`` calls that may combine alignment units are kept with the
factors of what they combine (`MaxCall`). A list is a bucket list when the
entry searched for must hold a sequence length (what the compared value is
computed from, never its name): the smallest LoRA rank that holds a
configured rank is searched the same way, and holds no lengths. The project says which names are
buckets and which factors belong to an owner's unit (`bucket-spec`,
`max-of-alignment-units`). A round-up's unit bound in an ``if``/``elif``
chain whose arms test independent conditions and pick different factors is
a `Clash` (``unit_picked``, `alignment-unit-picked-by-branch`): when both
conditions hold, only one factor divides the padded length.
"""

from __future__ import annotations

import ast

from layoutcheck.model.facts import BucketLiteral, Clash, MaxCall
from layoutcheck.model.syntax import dotted, doubled, int_value, keyword, last_name, string_value, walk
from layoutcheck.model.units import atoms, canonical
from layoutcheck.model.uses import field_of
from layoutcheck.model.vocabulary import Tag

__all__ = ["LiteralsMixin"]

UNIT = int(Tag.UNIT)
_SEQ, _PAD, _MAX, _STREAM = int(Tag.SEQ), int(Tag.PAD), int(Tag.MAX), int(Tag.STREAM)
_SRC, _CP = int(Tag.SRC), int(Tag.CP)
_LENGTH = int(Tag.SEQ | Tag.MAX | Tag.PAD | Tag.SRC | Tag.STREAM)
"""What a value a bucket must hold is computed from, for the list searched to be sequence-length buckets."""
_MAX_LENGTH_KEYWORDS = ("max_length", "max_len", "max_seq_len", "max_seq_length", "max_tokens")
"""Keywords a call passes the bound of its bucket list with (the last bucket must be it)."""
_MAX_LENGTH_NAMES = frozenset(_MAX_LENGTH_KEYWORDS)
_INT_LITERAL_LIMIT = 1 << 22
"""Int literals bound to names are kept (for the pad-multiplier check) up to this size."""


class LiteralsMixin:
    """The literal and unit checks of the per-file walk (mixed into its extractor)."""

    def holds_length(self, subject: ast.expr | None) -> bool:
        """Is ``subject``, what the entry searched for must hold, a sequence length (by what it is computed
        from: ``len(tokens)``, a maximum of lengths, a padded length)? A list searched for the smallest
        entry that holds something else (a LoRA rank, a batch size) holds no sequence-length buckets."""
        return subject is not None and bool(self.classify(subject).tags & _LENGTH)  # type: ignore[attr-defined]

    def bucket_search(self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp) -> None:
        """``min(b for b in xs if b >= n)``, ``next(b for b in xs if n <= b)`` with ``n`` a length: ``xs`` holds buckets."""
        if len(node.generators) != 1 or not isinstance(node.generators[0].target, ast.Name):
            return
        gen = node.generators[0]
        var = gen.target.id  # type: ignore[union-attr]
        if any(self.holds_length(_threshold(test, var)) for test in gen.ifs):
            self.note_bucket_list(gen.iter)

    def bucket_loop(self, node: ast.For | ast.AsyncFor) -> None:
        """``for b in xs: if b >= n: return b`` with ``n`` a length: ``xs`` holds buckets."""
        if not isinstance(node.target, ast.Name):
            return
        for statement in node.body:
            if isinstance(statement, ast.If) and self.holds_length(_threshold(statement.test, node.target.id)) and any(
                isinstance(s, (ast.Return, ast.Break)) for s in statement.body
            ):
                self.note_bucket_list(node.iter)
                return

    def bisect_search(self, args: list[ast.expr]) -> None:
        """``bisect(xs, n)`` with ``n`` a length: ``xs`` holds buckets."""
        if len(args) > 1 and self.holds_length(args[1]):
            self.note_bucket_list(args[0])

    def note_bucket_list(self, iterable: ast.expr) -> None:
        if isinstance(iterable, ast.Name):
            bound = self.bound_expr(iterable.id)
            self.bucket_names.add(iterable.id)
            if bound is not None:
                self.note_bucket_list(bound)
        elif isinstance(iterable, (ast.Attribute, ast.Subscript)):
            found = field_of(iterable)
            if found is not None:
                self.bucket_names.add(found)
        elif isinstance(iterable, ast.Call) and last_name(iterable.func) in ("sorted", "list", "tuple") and iterable.args:
            self.note_bucket_list(iterable.args[0])

    # -- alignment units combined with max() (LC106) --

    def max_of_units(self, node: ast.Call, args: list[ast.expr]) -> None:
        collection = self.idiom("max_over", node)
        if collection is not None:
            parts = [collection]
            if isinstance(collection, ast.Name):
                bound = self.bound_expr(collection.id)
                parts = [bound] if bound is not None else []
                parts += self.frame.data.get("grown", {}).get(collection.id, [])
            values = parts
        else:
            # `max(a, 1)` clamps; two or more values are being combined.
            values = [a for a in args if (n := int_value(a)) is None or n > 1]
            if len(values) < 2:
                return
        # A length (a padded length, a maximum, a stream) is a multiple of its unit, not a unit: the
        # max of multiples of one unit is one too. Powers of two divide each other: their max is their lcm.
        units = [v for v in values if not self._length_not_unit(v)]
        if not units or (collection is None and len(units) < 2) or all(
            _power_of_two(v, self.bound_expr) for v in units
        ):
            return  # `max(longest, unit)` is a bound on a length, not a combination of units
        values = units
        found: set[str] = set()
        for value in values:
            # A comprehension's own variables hold elements of what it walks (`size for _, size in
            # blocks.items()`): their names are no factor of a unit.
            walked = {n.id for g in getattr(value, "generators", ()) for n in walk(g.target) if isinstance(n, ast.Name)}
            for part in walk(value):
                if isinstance(part, ast.Name) and part.id in walked:
                    continue
                if isinstance(part, ast.Name):
                    bound = self.bound_expr(part.id)
                    text = canonical(bound, self.unit_of, self.vocab.is_pad_multiplier) if bound is not None else part.id
                    found |= atoms(text) - (set() if bound is not None else {part.id} & self._params())
                elif isinstance(part, ast.Attribute):
                    found |= atoms(canonical(part, self.unit_of, self.vocab.is_pad_multiplier))
        # The result is an alignment unit when it is what a round-up rounds to (`pad_size = max(...)`).
        target = self.frame.data.get("assigning")
        unit = bool(target and self.frame.uses.names.get(target, 0) & UNIT) or bool(
            self.vocab.is_pad_multiplier(target or "")
        )
        if not found and not unit:
            return
        self.facts.max_calls.append(MaxCall(
            self.frame.index, self.source.span(node), self.source.snippet(node), tuple(sorted(found)), unit,
        ))

    def _length_not_unit(self, value: ast.expr) -> bool:
        """Is ``value`` a length (rounded up to a unit, a maximum, a stream's, a sum of sizes) rather
        than a unit? What it is computed from decides, never its name."""
        tags = self.classify(value).tags  # type: ignore[attr-defined]
        if tags & (UNIT | _CP):
            return False
        # A maximum alone is no length: `max(args.compress_ratios)` is the largest of some units.
        return bool(tags & (_PAD | _STREAM | _SRC)) or bool(tags & _SEQ and not _products(value))

    def unit_picked(self, unit: ast.expr, pad: ast.AST) -> None:
        """A round-up's unit ``unit`` (a local) bound by an ``if``/``elif`` chain whose arms test different
        things and bind different factors (``2 * cp`` when CP is on, else ``tp`` when SP is on)."""
        if not isinstance(unit, ast.Name):
            return
        line = getattr(pad, "lineno", 0)
        for chain in _chains(self.frame.node, line):  # type: ignore[attr-defined]
            bound = _arm_bindings(chain, unit.id)
            tested = [_subjects(test) for test, _ in bound]
            arms = [(k, test, value) for k, (test, value) in enumerate(bound) if not _literal_choice(value)]
            for i, (k, test, value) in enumerate(arms):
                for j, other_test, other in arms[:i]:
                    if tested[k] & tested[j] or not tested[k] or not tested[j]:
                        continue  # `layout == "thd"` / `layout == "bshd"`: exclusive cases of one thing
                    if any(tested[c] >= tested[k] | tested[j] for c in range(j)):
                        continue  # an earlier arm takes both (`if sp and cp > 1: unit = tp * 2 * cp`)
                    mine, theirs = _subjects(value), _subjects(other)
                    if mine <= theirs or theirs <= mine:
                        continue  # one unit a multiple of the other (`m`, `m * cp`): nested, not unrelated
                    snippet = self.source.snippet  # type: ignore[attr-defined]
                    self.facts.clashes.append(Clash(  # type: ignore[attr-defined]
                        self.frame.index, "unit_picked", self.source.span(chain.test),  # type: ignore[attr-defined]
                        snippet(chain.test, 40),
                        f"`{unit.id}` is `{snippet(other, 30)}` when `{snippet(other_test, 30)}` and "
                        f"`{snippet(value, 30)}` when `{snippet(test, 30)}`",
                    ))
                    return

    def unit_lcm_of_nested_splits(self, unit: ast.expr, pad: ast.AST) -> None:
        """A round-up's unit ``lcm(t, 2 * c)`` (read through locals and the arms of a conditional
        expression) with ``c`` and ``t`` both sizes read at run time (a call's or an attribute's value,
        not a literal or a parameter) and ``t`` not a product with ``c``: the factor of a zigzag split
        into ``2 * c`` chunks joined by ``lcm`` with another split's size. A second split that divides
        each of the ``c`` parts needs ``c * t`` (sequence parallelism inside context parallelism), and
        ``lcm(t, 2 * c)`` is smaller whenever ``t`` and ``2 * c`` share a factor."""
        for arm in self._unit_arms(unit):
            if not (isinstance(arm, ast.Call) and last_name(arm.func) == "lcm" and len(arm.args) == 2):
                continue
            for twice, other in (arm.args, arm.args[::-1]):
                size = doubled(twice)
                if size is None or isinstance(other, ast.Starred):
                    continue
                mine, theirs = self._runtime_size(size), self._runtime_size(other)
                if mine is None or theirs is None or mine & theirs:
                    continue
                snippet = self.source.snippet  # type: ignore[attr-defined]
                self.facts.clashes.append(Clash(  # type: ignore[attr-defined]
                    self.frame.index, "unit_lcm_nested", self.source.span(arm),  # type: ignore[attr-defined]
                    snippet(arm, 40), f"{snippet(size, 20)}|{snippet(other, 20)}",
                ))
                return

    def _unit_arms(self, unit: ast.expr) -> list[ast.expr]:
        """The expressions a unit may be: itself, through locals, each arm of ``a if c else b``."""
        out: list[ast.expr] = []
        todo: list[ast.expr | None] = [unit]
        for _ in range(4):
            following: list[ast.expr | None] = []
            for part in todo:
                if isinstance(part, ast.Name):
                    bound = self.bound_expr(part.id)
                    if bound is not None:
                        following.append(bound)
                elif isinstance(part, ast.IfExp):
                    following.extend((part.body, part.orelse))
                elif part is not None:
                    out.append(part)
            todo = following
        return out

    def _runtime_size(self, node: ast.expr) -> frozenset[str] | None:
        """What tells a size read at run time apart (``tp = group.size()``: the local and what it was read
        from), or None when ``node`` is a literal, a parameter or a product (not one group's size)."""
        if int_value(node) is not None:
            return None
        if isinstance(node, ast.Name):
            bound = self.bound_expr(node.id)
            if bound is None or not isinstance(self._unwrapped(bound), (ast.Call, ast.Attribute)):
                return None  # a parameter, a loop's name, or a local computed some other way
            return frozenset({node.id, ast.dump(self._unwrapped(bound))})
        if isinstance(node, (ast.Call, ast.Attribute)):
            return frozenset({ast.dump(node)})
        return None

    def _unwrapped(self, node: ast.expr) -> ast.expr:
        """``a`` of ``a if c else 1`` (a size switched off by a condition stays that size)."""
        if isinstance(node, ast.IfExp):
            return node.body if int_value(node.orelse) is not None else node.orelse if int_value(node.body) is not None else node
        return node

    def _params(self) -> set[str]:
        """The parameters of the function being walked."""
        frame = self.frame
        return {name for name, value in frame.env.items() if name in value.params and name not in frame.exprs}

    # -- bucket and pad-multiplier literals (LC201) --

    @staticmethod
    def _literal(value: ast.expr | None) -> ast.expr | None:
        """The literal a dataclass field defaults to: ``field(default_factory=lambda: [...])``."""
        if isinstance(value, ast.Call) and last_name(value.func) == "field":
            value = keyword(value, "default") or keyword(value, "default_factory")
            if isinstance(value, ast.Lambda):
                value = value.body
        return value

    def judge_literal(self, name: str | None, value: ast.expr | None, max_length: int | None = None, *,
                      binding: bool = True) -> None:
        """Keep int literals and int lists bound to a name (at module or class level, as a default,
        a keyword or a field): the project judges those whose name it finds used as buckets or as
        a factor of the alignment unit."""
        if name is None or value is None or self.expecting_error or not binding:
            return  # (asked before `_literal`, which has no effect: most bindings are locals)
        value = self._literal(value)
        if value is None:
            return
        vocab = self.vocab
        if isinstance(value, (ast.List, ast.Tuple)) and len(value.elts) >= 2:
            numbers = [int_value(e) for e in value.elts]
            if all(n is not None for n in numbers):
                self.facts.buckets.append(BucketLiteral(
                    self.source.span(value), name, "buckets", tuple(numbers), max_length,  # type: ignore[arg-type]
                    vocab.is_bucket(name),
                ))
            return
        number = int_value(value)
        if number is not None and 0 <= number <= _INT_LITERAL_LIMIT:
            self.facts.buckets.append(BucketLiteral(
                self.source.span(value), name, "multiplier", (number,), None, vocab.is_pad_multiplier(name),
            ))

    def bucket_call(self, node: ast.Call, tail: str, args: list[ast.expr]) -> None:
        named = [k for k in node.keywords if k.arg is not None]
        if not named and tail != "add_argument":
            return  # most calls: nothing to judge
        # A sibling keyword that bounds the buckets (`BucketSampler(buckets=..., max_length=4096)`).
        max_length = None
        if any(k.arg in _MAX_LENGTH_NAMES for k in named):  # most calls pass none of them
            max_length = next((v for k in _MAX_LENGTH_KEYWORDS if (v := int_value(keyword(node, k))) is not None), None)
        for kw in named:
            self.judge_literal(kw.arg, kw.value, max_length)
        if tail == "add_argument":
            # `parser.add_argument("--seq-len-buckets", nargs="+", default=[...])`
            flags = [string_value(a) for a in args]
            names = [f.lstrip("-").replace("-", "_") for f in flags if f and f.startswith("-")]
            dest = string_value(keyword(node, "dest"))
            for name in ([dest] if dest else names[-1:]):
                self.judge_literal(name, keyword(node, "default"))


def _threshold(test: ast.expr, var: str) -> ast.expr | None:
    """The ``n`` of ``var >= n`` / ``n <= var`` (or strict) when it is no literal; else None."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, right, op = test.left, test.comparators[0], test.ops[0]
    if isinstance(left, ast.Name) and left.id == var and isinstance(op, (ast.GtE, ast.Gt)):
        return None if isinstance(right, ast.Constant) else right
    if isinstance(right, ast.Name) and right.id == var and isinstance(op, (ast.LtE, ast.Lt)):
        return None if isinstance(left, ast.Constant) else left
    return None


def _chains(function: ast.AST, before: int) -> list[ast.If]:
    """The ``if`` chains (an ``if`` with ``elif`` arms) of ``function``'s own body that start before line
    ``before``, outermost first; nested functions are their own."""
    out: list[ast.If] = []
    inner: set[int] = set()
    body = getattr(function, "body", [])
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.If) and id(node) not in inner and node.lineno < before and _is_chain(node):
            out.append(node)
            arm = node
            while len(arm.orelse) == 1 and isinstance(arm.orelse[0], ast.If):
                arm = arm.orelse[0]
                inner.add(id(arm))
        stack.extend(reversed([c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]))
    return out


def _is_chain(node: ast.If) -> bool:
    return len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If)


def _arm_bindings(chain: ast.If, name: str) -> list[tuple[ast.expr, ast.expr]]:
    """``(test, value)`` per arm of ``chain`` that binds ``name`` at its top level."""
    out: list[tuple[ast.expr, ast.expr]] = []
    arm: ast.If | None = chain
    while arm is not None:
        for statement in arm.body:
            if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in statement.targets
            ):
                out.append((arm.test, statement.value))
                break
        arm = arm.orelse[0] if _is_chain(arm) else None  # type: ignore[assignment]
    return out


def _literal_choice(value: ast.expr) -> bool:
    """``16``, ``32 if recipe == "mx" else 16``: a constant, whatever the condition picks."""
    if isinstance(value, ast.IfExp):
        return _literal_choice(value.body) and _literal_choice(value.orelse)
    return int_value(value) is not None


def _subjects(test: ast.expr) -> set[str]:
    """What a condition tests: its names and attribute paths (``args.sequence_parallel``, ``cp_size``)."""
    out: set[str] = set()
    for node in walk(test):
        if isinstance(node, (ast.Attribute, ast.Name)):
            path = dotted(node)
            if path is not None:
                out.add(path)
    # An attribute path's own prefix (`args` of `args.cp`) is no subject of its own.
    return {p for p in out if not any(o.startswith(p + ".") for o in out)}


def _products(value: ast.expr) -> bool:
    """``a * b``: a product, as units are built (a length's product with a unit is a padded length,
    already caught by its tags)."""
    return isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult)


def _power_of_two(value: ast.expr, bound_expr: object, depth: int = 0) -> bool:
    """Is ``value`` a power of two by construction: a literal one, ``2 ** k``, ``1 << k``,
    ``next_power_of_2(n)`` (Triton's tile sizes), a product of such, or a local bound to one?"""
    n = int_value(value)
    if n is not None:
        return n > 0 and n & (n - 1) == 0
    if isinstance(value, ast.BinOp):
        if isinstance(value.op, ast.Pow):
            return int_value(value.left) == 2
        if isinstance(value.op, ast.LShift):
            return int_value(value.left) == 1
        if isinstance(value.op, ast.Mult):
            return _power_of_two(value.left, bound_expr, depth) and _power_of_two(value.right, bound_expr, depth)
        return False
    if isinstance(value, ast.Call):
        tail = last_name(value.func) or ""
        return tail in _POWER_OF_TWO_CALLS
    if isinstance(value, ast.IfExp):
        return _power_of_two(value.body, bound_expr, depth) and _power_of_two(value.orelse, bound_expr, depth)
    if isinstance(value, ast.Name) and depth < 3 and callable(bound_expr):
        bound = bound_expr(value.id)
        return bound is not None and _power_of_two(bound, bound_expr, depth + 1)
    return False


_POWER_OF_TWO_CALLS = frozenset({"next_power_of_2", "next_power_of_two", "next_pow2", "prev_power_of_2"})
"""Calls whose result is a power of two by definition (Triton's ``triton.next_power_of_2``)."""
