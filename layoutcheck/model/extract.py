"""The per-file phase: one traversal of one file's `ast` into its `FileFacts`.

`extract` parses with the standard library's `ast` (positions included) and
walks the tree once, statement by statement, keeping the flow state of
`layoutcheck.model.flow` (locals, branch joins, what each value derives
from, which layout a branch serves). On the way it records what the file
says about padded layouts (`layoutcheck.model.facts`): definitions and
their signatures, calls with what each argument derives from, reads and
writes of the sources and of the packed batch's description, pads and
round-ups with their units and where their values go, broadcasts, per-sample
entries read as batch lengths, rewrites of the owner's inputs, and the
literals the bucket rule judges. It decides nothing about the project: that
is `layoutcheck.model.project`'s work, on these facts.

Why `ast` and not libcst: the facts need no concrete syntax, and CPython's
parser builds its tree about 8x faster than libcst's (measured in the README's
development section), which is what the cold-run targets need.
"""

from __future__ import annotations

import ast
import builtins
import re
import warnings
from collections.abc import Iterable, Sequence

from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.facts import (
    Arg,
    Broadcast,
    BucketLiteral,
    Call,
    EntryRead,
    FileFacts,
    Function,
    MaxCall,
    Pad,
    Param,
    Record,
    Rewrite,
)
from layoutcheck.model.flow import (
    BCAST,
    CP,
    FOREIGN,
    MAX,
    NOTHING,
    PACKED,
    PAD,
    SEQ,
    SRC,
    SRCLIST,
    TOK,
    UNIT,
    Flow,
    Frame,
    Value,
)
from layoutcheck.model.idioms import (
    Idiom,
    broadcast_count,
    is_init_value,
    match_agreement,
    match_chunk_pad,
)
from layoutcheck.model.sinks import Sinks
from layoutcheck.model.syntax import (
    Source,
    argument,
    expects_error,
    index_of,
    int_value,
    keyword,
    last_name,
    positional,
    root_name,
    same,
    string_key,
    string_value,
    target_name,
    walk,
)
from layoutcheck.model.units import canonical
from layoutcheck.model.vocabulary import LAYOUT_KINDS, is_check_name, vocabulary

__all__ = ["extract", "extract_tree"]

_PAD = frozenset({"torch.nn.functional.pad", "numpy.pad"})
_FILLED = frozenset({"torch.full", "numpy.full"})
_SIZED = frozenset({"torch.zeros", "torch.ones", "torch.empty", "numpy.zeros", "numpy.ones", "numpy.empty"})
_NEW = frozenset({"new_zeros", "new_ones", "new_empty"})
_MAXES = frozenset({"max", "numpy.max", "torch.max"})
_FRESH_CALLS = frozenset({
    "dict", "list", "set", "defaultdict", "collections.defaultdict", "OrderedDict", "copy.copy",
    "copy.deepcopy", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.tensor",
    "numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full", "numpy.array",
})
_FRESH_METHODS = frozenset({"copy", "clone", "new_zeros", "new_ones", "new_empty", "new_full", "zeros_like"})
_CONVERSIONS = frozenset({
    "list", "tuple", "torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.IntTensor",
    "numpy.array", "numpy.asarray", "torch.from_numpy",
})
_CONVERSION_METHODS = frozenset({"tolist", "to", "cuda", "cpu", "long", "int", "clone", "detach", "numpy"})
_MAX_LENGTH_KEYWORDS = ("max_length", "max_len", "max_seq_len", "max_seq_length", "max_tokens")
_BUILTINS = frozenset(dir(builtins))
_EXTERNAL = frozenset({
    "torch", "numpy", "math", "os", "sys", "logging", "re", "json", "itertools", "functools", "collections",
    "typing", "dataclasses", "time", "random", "copy", "pathlib", "shutil", "subprocess", "asyncio",
    "threading", "datetime", "warnings", "inspect", "operator", "contextlib", "abc", "enum", "string",
    "struct", "hashlib", "pickle", "argparse", "traceback", "tempfile", "glob", "io", "socket", "uuid",
    "statistics", "pytest", "unittest", "wandb", "tqdm", "numpy.random",
})
_COMMON_METHODS = frozenset({
    "append", "extend", "insert", "pop", "remove", "clear", "items", "keys", "values", "get", "setdefault",
    "update", "copy", "size", "numel", "dim", "view", "reshape", "to", "cuda", "cpu", "item", "tolist",
    "float", "long", "int", "bool", "half", "bfloat16", "contiguous", "clone", "detach", "unsqueeze",
    "squeeze", "flatten", "sum", "mean", "max", "min", "format", "join", "split", "strip", "startswith",
    "endswith", "replace", "lower", "upper", "add", "discard", "index", "count", "sort", "fill_", "zero_",
    "copy_", "chunk", "narrow", "expand", "permute", "transpose", "masked_fill", "masked_fill_", "new_zeros",
    "new_full", "new_ones", "new_empty", "info", "debug", "warning", "error", "exception", "isoformat",
    "encode", "decode", "read", "write", "close", "cumsum", "diff", "nonzero", "any", "all", "argmax",
    "softmax", "log_softmax", "exp", "log", "gather", "scatter_", "index_select", "repeat", "type_as",
    "numpy", "tolist", "record", "wait", "synchronize", "register_buffer", "parameters", "named_parameters",
})
_BATCH_COUNT = re.compile(
    r"_*(micro_|global_|local_|mini_)?(batch_size|bsz|bs|mbs|num_samples|n_samples|num_seqs|num_sequences|"
    r"n_seqs|batch|num_prompts)",
    re.IGNORECASE,
)
_STATEMENT_LIMIT = 400
"""Deeper statement nesting than this is left unwalked (generated code): the file is still parsed."""


def extract(source: str, settings: LintSettings) -> FileFacts:
    """The facts of one file's text; a file that does not parse gives only its syntax error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes etc. are not ours to report
            tree = ast.parse(source)
    except SyntaxError as exc:
        return FileFacts(syntax_error=(exc.lineno, exc.offset, exc.msg))
    except (ValueError, MemoryError) as exc:  # a null byte, and the like
        return FileFacts(syntax_error=(None, None, str(exc)))
    except RecursionError:
        return FileFacts(syntax_error=(None, None, "code is nested too deeply to parse"))
    return extract_tree(tree, source, settings)


def extract_tree(tree: ast.Module, source: str, settings: LintSettings) -> FileFacts:
    """The facts of an already parsed file."""
    extractor = _Extractor(source, settings)
    try:
        extractor.run(tree)
    except RecursionError:
        return FileFacts(syntax_error=(None, None, "code is nested too deeply to walk"))
    extractor.facts.extracted = True
    return extractor.facts


class _FunctionState:
    """What one function collects while it is walked (becomes its `Function`)."""

    __slots__ = (
        "calls", "source_ticks", "none_checked", "returns", "guarded", "samples", "iterates", "aliases",
        "pads", "writes_source", "writes_packed", "reads_source", "reads_packed",
    )

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.source_ticks: list[int] = []
        self.none_checked: set[str] = set()
        self.returns = 0
        self.guarded: set[str | None] = set()
        self.samples: set[int] = set()
        self.iterates = False
        self.aliases: dict[str, str | None] = {}
        self.pads: list[tuple[Pad, ast.AST]] = []
        """Pads waiting for the function's end, with the node whose fate decides (`Sinks`)."""
        self.writes_source = False
        self.writes_packed = False
        self.reads_source = False
        self.reads_packed = False


class _Extractor(Flow):
    def __init__(self, source: str, settings: LintSettings) -> None:
        super().__init__(vocabulary(settings))
        self.settings = settings
        self.source = Source(source)
        self.facts = FileFacts()
        self.tick = 0
        self.states: list[_FunctionState] = []
        self.qual: list[str] = []
        self.classes: list[tuple[str, bool]] = []
        self.class_facts: list[tuple[str, tuple[str, ...]]] = []
        self.in_test = 0
        """Inside an ``assert`` or an ``if`` test: reading an entry there is a check, not a use."""
        self.expecting_error = 0
        self.claimed: set[int] = set()
        """Nodes inside an idiom already recorded: their parts are not judged again."""
        self.seen_broadcasts: set[int] = set()
        self.mentions_source = False
        self.depth = 0

    # ------------------------------------------------------------ driving

    def run(self, tree: ast.Module) -> None:
        module = Function("<module>", (1, 1, 1, 1))
        self.facts.functions.append(module)
        frame = Frame(0, None, tree, model=False, cls=None)
        self.frames.append(frame)
        self.states.append(_FunctionState())
        self.block(tree.body)
        self._finish(frame, tree.body)
        self.frames.pop()
        facts = self.facts
        facts.imports = tuple(sorted(self.imports.aliases.items()))
        facts.imported = tuple(sorted(self.imports.modules))
        facts.classes = tuple(self.class_facts)
        kernel = self.vocab.kernel_modules
        facts.kernel = any(m.lstrip(".").split(".")[0] in kernel for m in self.imports.modules)
        facts.mentions_source = self.mentions_source or any(
            f.reads_source or f.writes_source or f.source_ticks for f in facts.functions
        )

    def next_tick(self) -> int:
        self.tick += 1
        return self.tick

    @property
    def state(self) -> _FunctionState:
        return self.states[-1]

    # ------------------------------------------------------------ statements

    def block(self, body: Sequence[ast.stmt]) -> bool:
        """Walk ``body``; True when it always ends in ``return`` or ``raise``."""
        self.depth += 1
        try:
            if self.depth > _STATEMENT_LIMIT:
                return False
            for stmt in body:
                if self.statement(stmt):
                    return True
            return False
        finally:
            self.depth -= 1

    def statement(self, node: ast.stmt) -> bool:
        kind = type(node)
        if kind is ast.Assign:
            self.scan(node.value)
            for target in node.targets:
                self.scan_target(target)
            self.assign(node.targets, node.value)
        elif kind is ast.Expr:
            self.scan(node.value)
        elif kind is ast.If:
            return self.if_(node)
        elif kind in (ast.For, ast.AsyncFor):
            self.for_(node)
        elif kind is ast.Return:
            if node.value is not None:
                self.scan(node.value)
                value = self.classify(node.value)
                self.state.returns |= value.tags
                self.returned_broadcast(node.value)
            return True
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef):
            self.function(node)
        elif kind is ast.AnnAssign:
            if node.value is not None:
                self.scan(node.value)
                self.scan_target(node.target)
                self.assign([node.target], node.value)
        elif kind is ast.AugAssign:
            self.scan(node.value)
            self.scan_target(node.target)
            self.augment(node)
        elif kind in (ast.Import, ast.ImportFrom):
            self.imports.add(node)
        elif kind is ast.ClassDef:
            self.class_(node)
        elif kind in (ast.With, ast.AsyncWith):
            for item in node.items:
                self.scan(item.context_expr)
                if item.optional_vars is not None:
                    self.bind_target(item.optional_vars, NOTHING, None)
            raises = expects_error(node)
            self.expecting_error += raises
            try:
                return self.block(node.body)
            finally:
                self.expecting_error -= raises
        elif kind is ast.While:
            self.in_test += 1
            self.scan(node.test)
            self.in_test -= 1
            self.loop_body(node.body, node.orelse)
        elif kind is ast.Assert:
            self.assert_(node)
        elif kind is ast.Raise:
            if node.exc is not None:
                self.scan(node.exc)
            return True
        elif kind is ast.Try or kind.__name__ == "TryStar":
            self.try_(node)
        elif kind is ast.Match:
            self.scan(node.subject)
            self.branches([case.body for case in node.cases], [None] * len(node.cases), exhaustive=False)
        elif kind is ast.Delete:
            for target in node.targets:
                self.scan(target)
        return False

    # -- branches --

    def branches(self, bodies: list[list[ast.stmt]], layouts: list[str | None], *, exhaustive: bool) -> bool:
        """Walk alternative ``bodies`` from the same state and join what they leave."""
        frame = self.frame
        before, fresh_before, layout_before = frame.env, set(frame.fresh), frame.layout
        results: list[tuple[dict[str, Value], bool]] = []
        for body, layout in zip(bodies, layouts):
            frame.env = dict(before)
            frame.layout = layout or layout_before
            self.forget()
            ended = self.block(body)
            results.append((frame.env, ended))
        frame.layout = layout_before
        live = [env for env, ended in results if not ended]
        if not exhaustive:
            live.append(before)
        frame.env = _join(live, before) if live else _join([env for env, _ in results], before)
        frame.fresh = fresh_before | frame.fresh
        self.forget()
        return exhaustive and not live

    def if_(self, node: ast.If) -> bool:
        raises = any(isinstance(n, ast.Raise) for n in node.body)
        self.in_test += 1
        self.scan(node.test)
        self.in_test -= 1
        if raises:
            self.guard(node.test, negated=True)
            self.note_none_check(node.test, negated=True)
        body_layout, else_layout = self.layout_of(node.test)
        ended = self.branches([node.body, node.orelse], [body_layout, else_layout], exhaustive=True)
        if not ended:
            # An early `return`/`raise` narrows the layout of what follows.
            body_ends = _ends(node.body)
            else_ends = bool(node.orelse) and _ends(node.orelse)
            if body_ends and not else_ends and else_layout:
                self.frame.layout = else_layout
            elif else_ends and not body_ends and body_layout:
                self.frame.layout = body_layout
        return ended

    def loop_body(self, body: list[ast.stmt], orelse: list[ast.stmt]) -> None:
        self.branches([body], [None], exhaustive=False)
        if orelse:
            self.block(orelse)

    def for_(self, node: ast.For | ast.AsyncFor) -> None:
        self.scan(node.iter)
        self.walks(node.iter)
        self.bind_target(node.target, self.element(node.iter), None)
        self.loop_body(node.body, node.orelse)

    def try_(self, node: ast.stmt) -> None:
        self.block(node.body)  # type: ignore[attr-defined]
        handlers = [h.body for h in node.handlers]  # type: ignore[attr-defined]
        if handlers:
            self.branches(handlers, [None] * len(handlers), exhaustive=False)
        self.block(node.orelse)  # type: ignore[attr-defined]
        self.block(node.finalbody)  # type: ignore[attr-defined]

    def layout_of(self, test: ast.expr) -> tuple[str | None, str | None]:
        """The layout ``test`` proves in its body and in its ``else``: ``qkv_format == "thd"``."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            body, other = self.layout_of(test.operand)
            return other, body
        if isinstance(test, ast.BoolOp):
            found = [self.layout_of(v) for v in test.values]
            if isinstance(test.op, ast.And):
                body = next((b for b, _ in found if b), None)
                others = {o for _, o in found}
                return body, (others.pop() if len(found) == 1 and others else None)
            elses = [o for _, o in found]
            return None, (elses[0] if elses and all(o == elses[0] for o in elses) else None)
        if not isinstance(test, ast.Compare) or len(test.ops) != 1:
            return None, None
        op = test.ops[0]
        sides = (test.left, test.comparators[0])
        for side in sides:
            kind = LAYOUT_KINDS.get(string_value(side) or "")
            if kind is not None:
                other = "bshd" if kind == "thd" else "thd"
                if isinstance(op, ast.Eq):
                    return kind, other
                if isinstance(op, ast.NotEq):
                    return other, kind
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(test.comparators[0], (ast.Tuple, ast.List, ast.Set)):
            kinds = {LAYOUT_KINDS.get(string_value(e) or "") for e in test.comparators[0].elts}
            if len(kinds) == 1 and None not in kinds:
                kind = kinds.pop()
                other = "bshd" if kind == "thd" else "thd"
                return (kind, other) if isinstance(op, ast.In) else (other, kind)
        return None, None

    def assert_(self, node: ast.Assert) -> None:
        self.in_test += 1
        self.scan(node.test)
        if node.msg is not None:
            self.scan(node.msg)
        self.in_test -= 1
        self.guard(node.test, negated=False)
        self.note_none_check(node.test, negated=False)
        body, _ = self.layout_of(node.test)
        if body:
            self.frame.layout = body

    def note_none_check(self, test: ast.expr, *, negated: bool) -> None:
        """``assert p is not None`` / ``if p is None: raise``: omitting ``p`` fails loudly."""
        for part in (test.values if isinstance(test, ast.BoolOp) else [test]):
            if isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.left, ast.Name):
                none = isinstance(part.comparators[0], ast.Constant) and part.comparators[0].value is None
                wanted = ast.Is if negated else ast.IsNot
                if none and isinstance(part.ops[0], wanted) and self.is_parameter(part.left.id):
                    self.state.none_checked.add(part.left.id)

    # -- definitions --

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.scan(decorator)
        args = node.args
        defaults = [*([None] * (len(args.posonlyargs) + len(args.args) - len(args.defaults))), *args.defaults]
        params: list[Param] = []
        positional_params = [*args.posonlyargs, *args.args]
        for i, (param, default) in enumerate(zip(positional_params, defaults)):
            kind = "posonly" if i < len(args.posonlyargs) else "pos"
            params.append(Param(param.arg, kind, None if default is None else self.source.snippet(default, 40)))
            if default is not None:
                self.scan(default)
                self.judge_literal(param.arg, default)
        if args.vararg is not None:
            params.append(Param(args.vararg.arg, "star", None))
        for param, default in zip(args.kwonlyargs, args.kw_defaults):
            params.append(Param(param.arg, "kwonly", None if default is None else self.source.snippet(default, 40)))
            if default is not None:
                self.scan(default)
                self.judge_literal(param.arg, default)
        if args.kwarg is not None:
            params.append(Param(args.kwarg.arg, "dstar", None))
        name = node.name
        self.qual.append(name)
        qualname = ".".join(self.qual)
        parent = self.frame
        cls = self.classes[-1][0] if self.classes and parent.cls != "<inside>" else None
        model = parent.model or bool(self.classes and self.classes[-1][1])
        index = len(self.facts.functions)
        line, col, _, _ = self.source.span(node)
        name_col = col + (6 if isinstance(node, ast.AsyncFunctionDef) else 0) + 4
        facts = Function(
            qualname, (line, name_col, line, name_col + len(name)), tuple(params), parent.index, cls, model,
            named_for_source=self.vocab.mentions_source(name) and not is_check_name(name),
        )
        self.facts.functions.append(facts)
        frame = Frame(index, parent, node, model=model, cls="<inside>")
        self.frames.append(frame)
        self.states.append(_FunctionState())
        for param in params:
            frame.env[param.name] = Value(self.vocab.tags(param.name), None, frozenset((param.name,)))
        self.forget()
        saved_classes, self.classes = self.classes, []
        self.block(node.body)
        self.classes = saved_classes
        self._finish(frame, node.body)
        self.frames.pop()
        self.qual.pop()
        self.bind(name, NOTHING)

    def class_(self, node: ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            self.scan(decorator)
        bases = tuple(last_name(b) or "" for b in node.bases)
        for base in node.bases:
            self.scan(base)
        model = any(self.vocab.is_model_base(b) for b in bases)
        self.class_facts.append((".".join([*self.qual, node.name]), bases))
        self.qual.append(node.name)
        self.classes.append((node.name, model))
        frame = self.frame
        saved_env, saved_cls = frame.env, frame.cls
        frame.env = dict(saved_env)  # class attributes are not the enclosing scope's locals
        frame.cls = None
        self.forget()
        self.block(node.body)
        frame.env, frame.cls = saved_env, saved_cls
        self.forget()
        self.classes.pop()
        self.qual.pop()
        self.bind(node.name, NOTHING)

    def _finish(self, frame: Frame, body: Sequence[ast.stmt]) -> None:
        """The function has been walked: fix the fates of its pads and write its facts."""
        state = self.states.pop()
        facts = self.facts.functions[frame.index]
        if state.pads:
            vocab = self.vocab
            helper = facts.qualname.rsplit(".", 1)[-1] in vocab.helpers or any(
                vocab.is_padded_length_param(p.name) for p in facts.params
            )
            # A CP helper's or model code's pads are never judged: their fate is not worth a walk.
            sinks = None if helper or frame.model else Sinks(body, self.imports, lambda n: self.classify(n).has(TOK))
            for pad, carrier in state.pads:
                pad.fate = sinks.fate(carrier) if sinks is not None else "local"
                self.facts.pads.append(pad)
        facts.writes_source = state.writes_source or facts.named_for_source
        facts.writes_packed = state.writes_packed
        facts.reads_source = state.reads_source
        facts.reads_packed = state.reads_packed
        facts.source_ticks = tuple(state.source_ticks)
        facts.none_checked = tuple(sorted(state.none_checked))
        facts.returns_tags = state.returns
        facts.calls = tuple(state.calls)
        facts.guarded = tuple(sorted(g for g in state.guarded if g is not None)) + (
            ("",) if None in state.guarded else ()
        )
        facts.sample_indices = tuple(sorted(state.samples))
        facts.iterates = state.iterates
        facts.end_tick = self.next_tick()

    # -- stores --

    def scan_target(self, target: ast.expr) -> None:
        """The index and key expressions of a store target (``x[f(i)] = ...``)."""
        if isinstance(target, ast.Subscript):
            self.scan(target.slice)
            self.scan_target(target.value) if isinstance(target.value, ast.Subscript) else self.scan(target.value)
        elif isinstance(target, ast.Attribute):
            self.scan(target.value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.scan_target(element)

    def is_fresh(self, value: ast.expr) -> bool:
        """Is ``value`` a container built here (``{}``, ``[0] * n``, ``torch.zeros(n)``, a copy)?"""
        if isinstance(value, (ast.Dict, ast.List, ast.DictComp, ast.ListComp, ast.Tuple)):
            return True
        if isinstance(value, ast.BinOp):
            return self.is_fresh(value.left) or self.is_fresh(value.right)
        if isinstance(value, ast.Call):
            return self.imports.qualify(value.func) in _FRESH_CALLS or last_name(value.func) in _FRESH_METHODS
        return False

    def note_write(self, name: str | None, value: ast.expr | None = None) -> None:
        """A store of ``value`` to ``name`` (a variable, attribute or string key) here.

        Storing what was read from the source (``max_seq_lens = batch["max_seq_lens"]``,
        ``cu_seqlens = batch["cu_seqlens"]``) is a read under another name, not a write.
        """
        vocab = self.vocab
        if name is None or (name not in vocab.sources and name not in vocab.packed):
            return
        if value is not None:
            if target_name(value) == (name, False) and not isinstance(value, ast.Name):
                return
            if isinstance(value, ast.Call) and last_name(value.func) == "get":
                first = positional(value)[:1]
                if first and string_value(first[0]) == name:
                    return
            if self.classify(value).has(SRC):
                return
        if name in vocab.sources:
            self.state.writes_source = True
            self.state.source_ticks.append(self.next_tick())
        else:
            self.state.writes_packed = True

    def assign(self, targets: Sequence[ast.expr], value: ast.expr) -> None:
        found = self.classify(value)
        for target in targets:
            name, entry = target_name(target)
            self.note_write(name, value)
            self.rewrite(target, value)
            if not entry:
                self.check_broadcast(value, name)
            self.record(target, found)
            if not isinstance(target, (ast.Tuple, ast.List)):
                field_name = name if not isinstance(target, ast.Name) else (last_name(target))
                self.judge_literal(field_name if not isinstance(target, ast.Subscript) or string_key(target)
                                   else None, value)
            if isinstance(target, ast.Name):
                if found.tags & (SRCLIST | TOK):
                    self.state.aliases[target.id] = self.container(value)
                unit = None
                if found.tags & (UNIT | CP) or int_value(value) is not None:
                    unit = canonical(value, self.unit_of, self.vocab.is_pad_multiplier)
                self.bind(target.id, found, value)
                if unit is not None:
                    self.frame.units[target.id] = unit
                else:
                    self.frame.units.pop(target.id, None)
                if self.is_fresh(value):
                    self.frame.fresh.add(target.id)
                else:
                    self.frame.fresh.discard(target.id)
            elif isinstance(target, (ast.Tuple, ast.List)):
                elements = target.elts
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elements):
                    for element, part in zip(elements, value.elts):
                        self.assign([element], part)
                else:
                    for element in elements:
                        self.note_write(target_name(element)[0])
                        if isinstance(element, ast.Name):
                            self.bind(element.id, NOTHING)
                        elif isinstance(element, ast.Starred) and isinstance(element.value, ast.Name):
                            self.bind(element.value.id, NOTHING)

    def augment(self, node: ast.AugAssign) -> None:
        target = node.target
        self.note_write(target_name(target)[0])
        self.rewrite(target, None)
        if isinstance(target, ast.Name):
            self.bind(target.id, self.lookup(target.id) | self.classify(node.value), None)

    def record(self, target: ast.expr, value: Value) -> None:
        """A padded length stored into a field: later padding leaves it stale (LC105)."""
        if isinstance(target, ast.Name) or not value.tags & PAD or value.tags & SRC:
            return
        name, entry = target_name(target)
        if name is None or entry or name in self.vocab.owner_inputs:
            return
        self.facts.records.append(Record(self.frame.index, self.source.span(target), name, self.next_tick()))

    # -- rewrites of the owner's inputs (LC105) --

    def fresh_root(self, container: ast.expr) -> bool:
        root = root_name(container)
        return root is not None and root in self.frame.fresh

    def converted(self, value: ast.expr | None, target: ast.expr) -> bool:
        """Is ``value`` the field ``target`` itself, converted (``torch.tensor(d["total_lengths"])``)?"""
        while isinstance(value, ast.Call):
            func = value.func
            if isinstance(func, ast.Attribute) and func.attr in _CONVERSION_METHODS:
                value = func.value
            elif self.imports.qualify(func) in _CONVERSIONS and value.args:
                value = value.args[0]
            else:
                return False
        return value is not None and same(value, target)

    def rewrite(self, target: ast.expr, value: ast.expr | None) -> None:
        if not isinstance(target, ast.Subscript):
            return
        vocab = self.vocab
        inputs = vocab.owner_inputs
        key = string_key(target)
        if key is not None:
            # A whole token list is replaced by conversions too (`.cuda()` per
            # sample); only a whole *length* field says the lengths changed, and
            # not when it is the same field converted.
            if (key in inputs and not vocab.is_token(key) and not self.fresh_root(target.value)
                    and not self.converted(value, target)):
                self.add_rewrite(target, key)
            return
        base = target.value
        if isinstance(base, ast.Attribute) and root_name(base) == "self":
            return  # an object's own cache (`self.total_lengths[i] = n`), not the rollout's
        name, _ = target_name(base)
        if name not in inputs or self.fresh_root(base):
            return
        # A bare `tokens[i] = ...` is as often a lexer's or tokenizer's list of strings;
        # a rollout's token list is reached through its container (`rollout_data["tokens"]`).
        if isinstance(base, ast.Name) and vocab.is_token(name):
            return
        self.add_rewrite(target, name)

    def add_rewrite(self, node: ast.AST, name: str) -> None:
        self.facts.rewrites.append(Rewrite(
            self.frame.index, self.source.span(node), self.source.snippet(node), name, self.next_tick(),
        ))

    # -- broadcasts (LC101) --

    def check_broadcast(self, value: ast.expr, target: str | None) -> None:
        if target is None:
            return
        vocab = self.vocab
        is_source = target in vocab.sources
        if not is_source and not vocab.tags(target) & SEQ:
            return
        found = self.classify(value)
        origin = found.origin
        if not found.tags & BCAST or origin is None or id(origin) in self.seen_broadcasts:
            return
        if not is_source and not found.tags & MAX:
            return  # other length lists may legitimately repeat a configured length
        self.seen_broadcasts.add(id(origin))
        repeated = self.idiom("broadcast", origin)
        self.facts.broadcasts.append(Broadcast(
            self.frame.index, self.source.span(origin), self.source.snippet(origin), target, found.tags,
            self.per_sample(broadcast_count(origin, self.imports)), is_init_value(repeated),
        ))

    def per_sample(self, count: ast.expr | None) -> bool:
        """Does ``count`` (a broadcast's entry count) count samples?"""
        if count is None:
            return True  # unknown: give the broadcast the benefit of being per sample
        if isinstance(count, ast.Call) and last_name(count.func) == "len" and count.args:
            count = count.args[0]
        if isinstance(count, (ast.Tuple, ast.List)) and count.elts:
            count = count.elts[0]
        tags = self.classify(count).tags
        if tags & (TOK | SEQ | SRCLIST | PACKED):
            return True
        name = last_name(count) or ""
        if _BATCH_COUNT.fullmatch(name) or name in self.vocab.owner_inputs:
            return True
        root = root_name(count)
        return root is not None and any(s in root for s in ("rollout", "batch", "sample"))

    def returned_broadcast(self, value: ast.expr) -> None:
        frame = self.frame
        if frame.parent is None:
            return
        name = self.facts.functions[frame.index].qualname.rsplit(".", 1)[-1]
        if self.vocab.mentions_source(name):
            # `def uniform_max_seq_lens(...): return [P] * n` produces the source.
            self.check_broadcast(value, self.vocab.source_in(name))

    # -- per-sample entries as batch lengths (LC103) --

    def container(self, node: ast.expr) -> str | None:
        """The container a per-sample list was read from, through local aliases."""
        root = root_name(node)
        if root is None:
            return None
        return self.state.aliases.get(root, root)

    def guard(self, test: ast.expr, *, negated: bool) -> None:
        state = self.state
        for kind, collection in match_agreement(test, self.imports, negated=negated):
            found = self.classify(collection)
            if found.tags & SRCLIST or (kind == "single" and found.tags & TOK):
                state.guarded.add(self.container(collection))

    def walks(self, iterable: ast.expr) -> None:
        state = self.state
        if not state.iterates:
            per_sample = SEQ | TOK | SRCLIST
            state.iterates = any(self.classify(n).tags & per_sample for n in walk(iterable))

    # ------------------------------------------------------------ expressions

    def scan(self, node: ast.AST) -> None:
        """Record what ``node`` and its parts do (calls, pads, reads), in source order."""
        kind = type(node)
        if kind is ast.Name:
            if node.id in self.vocab.sources:  # type: ignore[attr-defined]
                self.state.reads_source = True
                self.mentions_source = True
            elif node.id in self.vocab.packed:  # type: ignore[attr-defined]
                self.state.reads_packed = True
            return
        if kind is ast.Constant:
            value = node.value  # type: ignore[attr-defined]
            if type(value) is str and value in self.vocab.sources:
                self.mentions_source = True
            return
        if kind is ast.Call:
            self.call(node)  # type: ignore[arg-type]
            return
        if kind is ast.BinOp:
            if id(node) not in self.claimed:
                idiom = self.idiom("round_up", node)
                label = "round_up"
                if idiom is None:
                    idiom, label = self.idiom("pad_amount", node), "pad_amount"
                if idiom is None and isinstance(node.op, ast.Sub):  # type: ignore[attr-defined]
                    idiom, label = match_chunk_pad(node, self.chunk_of), "chunk_pad"
                if idiom is not None:
                    self.pad(idiom, label)
            self.scan(node.left)  # type: ignore[attr-defined]
            self.scan(node.right)  # type: ignore[attr-defined]
            return
        if kind is ast.Subscript:
            self.subscript(node)  # type: ignore[arg-type]
            return
        if kind is ast.Attribute:
            attr = node.attr  # type: ignore[attr-defined]
            if attr in self.vocab.sources:
                self.state.reads_source = True
                self.mentions_source = True
            elif attr in self.vocab.packed:
                self.state.reads_packed = True
            self.scan(node.value)  # type: ignore[attr-defined]
            return
        if kind in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            for gen in node.generators:  # type: ignore[attr-defined]
                self.scan(gen.iter)
                self.walks(gen.iter)
            self.push_comprehension(node)  # type: ignore[arg-type]
            try:
                for gen in node.generators:  # type: ignore[attr-defined]
                    for test in gen.ifs:
                        self.scan(test)
                if kind is ast.DictComp:
                    self.scan(node.key)  # type: ignore[attr-defined]
                    self.scan(node.value)  # type: ignore[attr-defined]
                else:
                    self.scan(node.elt)  # type: ignore[attr-defined]
            finally:
                self.pop_scope()
            return
        if kind is ast.Dict:
            for key, value in zip(node.keys, node.values):  # type: ignore[attr-defined]
                if key is not None:
                    self.scan(key)
                self.scan(value)
                name = string_value(key)
                self.note_write(name, value)
                self.check_broadcast(value, name)
                self.judge_literal(name, value)
            return
        if kind is ast.Lambda:
            args = node.args  # type: ignore[attr-defined]
            self.push_scope([a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)])
            try:
                self.scan(node.body)  # type: ignore[attr-defined]
            finally:
                self.pop_scope()
            return
        if kind is ast.NamedExpr:
            self.scan(node.value)  # type: ignore[attr-defined]
            if isinstance(node.target, ast.Name):  # type: ignore[attr-defined]
                self.bind(node.target.id, self.classify(node.value), node.value)  # type: ignore[attr-defined]
            return
        if kind is ast.IfExp:
            self.in_test += 1
            self.scan(node.test)  # type: ignore[attr-defined]
            self.in_test -= 1
            body, other = self.layout_of(node.test)  # type: ignore[attr-defined]
            frame = self.frame
            saved = frame.layout
            frame.layout = body or saved
            self.scan(node.body)  # type: ignore[attr-defined]
            frame.layout = other or saved
            self.scan(node.orelse)  # type: ignore[attr-defined]
            frame.layout = saved
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.scan(child)
            elif isinstance(child, ast.keyword):
                self.scan(child.value)
            elif isinstance(child, ast.comprehension):
                self.scan(child.iter)

    def subscript(self, node: ast.Subscript) -> None:
        key = string_key(node)
        if key is not None:
            if key in self.vocab.sources:
                self.state.reads_source = True
                self.mentions_source = True
            elif key in self.vocab.packed:
                self.state.reads_packed = True
        self.scan(node.value)
        self.scan(node.slice)
        index = int_value(index_of(node))
        if self.in_test or index is None:
            return
        found = self.classify(node.value)
        if not found.tags & SRCLIST:
            if found.tags & SEQ:
                self.state.samples.add(index)
            return
        self.facts.entry_reads.append(EntryRead(
            self.frame.index, self.source.span(node), self.source.snippet(node), self.container(node.value), index,
        ))

    # -- pads (LC102, LC107) --

    def pad(self, idiom: Idiom, kind: str) -> None:
        node = idiom.node
        for part in walk(node):
            self.claimed.add(id(part))
        value = NOTHING
        for part in idiom.values:
            value = value | self.classify(part)
        unit = self.classify(idiom.unit)
        unit_foreign = unit.tags & FOREIGN and not unit.tags & (CP | UNIT)
        if value.tags & SRC or unit_foreign or (value.tags & FOREIGN and not value.tags & (SEQ | TOK)):
            return  # a consumer of the owner's P, or a kernel/quantisation multiple
        if not (value.tags & (SEQ | TOK | PACKED) or unit.tags & (UNIT | CP)):
            return  # a multiple of the CP size is a CP layout's, whatever it pads
        self.add_pad(kind, node, value, unit, node, unit_node=idiom.unit,
                     rounding="next" if kind == "pad_amount" and isinstance(node.op, ast.Sub) else "ceil")  # type: ignore[attr-defined]

    def add_pad(self, kind: str, node: ast.AST, value: Value, unit: Value, carrier: ast.AST, *,
                unit_node: ast.expr | None = None, rounding: str = "ceil") -> None:
        text = canonical(unit_node, self.unit_of, self.vocab.is_pad_multiplier) if unit_node is not None else ""
        pad = Pad(
            self.frame.index, kind, self.source.span(node), self.source.snippet(node), value.tags, unit.tags,
            text, rounding, self.frame.layout, "local", self.next_tick(), tuple(sorted(value.params)),
        )
        self.state.pads.append((pad, carrier))

    def pad_target(self, expr: ast.expr, carrier: ast.AST) -> None:
        """``expr`` sizes a pad or a new tensor (``carrier``, whose fate decides)."""
        found = self.classify(expr)
        if found.tags & MAX and not found.tags & (PAD | SRC | BCAST | FOREIGN):
            origin = found.origin or expr
            self.add_pad("pad_target", origin, found, NOTHING, carrier)

    # -- calls --

    def call(self, node: ast.Call) -> None:
        func = node.func
        imports = self.imports
        claimed = id(node) in self.claimed
        if not claimed:
            idiom = self.idiom("round_up", node)
            if idiom is not None:
                self.pad(idiom, "round_up")
        if isinstance(func, ast.Attribute):
            self.scan(func.value)
        for arg in node.args:
            self.scan(arg)
        for kw in node.keywords:
            self.scan(kw.value)
        name = imports.qualify(func) or ""
        tail = last_name(func) or ""
        args = positional(node)
        state = self.state
        vocab = self.vocab
        if not claimed:
            if name in _PAD:
                amount = argument(node, "pad", 1)
                if amount is not None:
                    self.pad_target(amount, node)
            elif name in _FILLED or tail == "new_full":
                size = argument(node, "size", 0)
                if size is not None:
                    self.pad_target(size, node)
            elif name in _SIZED or (tail in _NEW and isinstance(func, ast.Attribute)):
                for size in (*args, keyword(node, "size")):
                    if size is not None:
                        self.pad_target(size, node)
            elif tail == "pad_sequence":
                sequences = argument(node, "sequences", 0)
                if sequences is not None and self.classify(sequences).has(TOK):
                    self.add_pad("pad_sequence", node, self.classify(sequences), NOTHING, node)
        if name in _MAXES:
            self.max_of_units(node, args)
        # Writes through calls: `d.update(max_seq_lens=...)`, `dict(...)`, `.append`.
        if tail == "update" or name == "dict":
            for kw in node.keywords:
                if kw.arg is not None:
                    self.note_write(kw.arg, kw.value)
            if tail == "update" and isinstance(func, ast.Attribute) and not self.fresh_root(func.value):
                self.update_rewrite(node)
        elif tail in ("append", "extend", "insert") and isinstance(func, ast.Attribute):
            self.note_write(target_name(func.value)[0])
        elif tail == "get" and args and string_value(args[0]) in vocab.sources:
            state.reads_source = True
            self.mentions_source = True
        for kw in node.keywords:  # `Batch(max_seq_lens=...)`
            if kw.arg is not None:
                self.check_broadcast(kw.value, kw.arg)
        if tail and tail != "update" and not is_check_name(tail) and (
            vocab.mentions_source(tail) or tail in vocab.owner_names
        ):
            # Calling the owner (or a `recompute_max_seq_lens`) rewrites the source.
            state.source_ticks.append(self.next_tick())
            self.mentions_source = True
        if is_check_name(tail):
            for value in (*node.args, *(k.value for k in node.keywords)):
                if self.classify(value).has(SRCLIST) or root_name(value) is not None:
                    state.guarded.add(self.container(value))
        self.bucket_call(node, tail, args)
        self.record_call(node, name, tail)

    def record_call(self, node: ast.Call, name: str, tail: str) -> None:
        func = node.func
        if not tail:
            return
        if isinstance(func, ast.Name):
            if tail in _BUILTINS and tail not in self.imports.aliases:
                return
        else:
            root = name.split(".", 1)[0]
            if root in _EXTERNAL or name.startswith("torch.") or (
                tail in _COMMON_METHODS and tail not in self.vocab.helpers and root not in ("self", "cls")
                and root not in self.imports.aliases
            ):
                return
        if name.split(".", 1)[0] in _EXTERNAL:
            return
        arguments: list[Arg] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                arguments.append(self.arg("*", arg.value))
            else:
                arguments.append(self.arg(None, arg))
        for kw in node.keywords:
            arguments.append(self.arg(kw.arg or "**", kw.value))
            if kw.arg is None:
                # `f(t, **layout)` with `layout = dict(qkv_format="bshd", max_seq_len=n)`:
                # each key is passed as if by keyword.
                arguments.extend(self.arg(key, value) for key, value in self.splat_items(kw.value))
        callee = name if name else tail
        self.state.calls.append(Call(
            callee, self.source.span(node), self.next_tick(), self.frame.layout, tuple(arguments),
            bool(self.expecting_error), self.source.snippet(node, 60) if tail in self.vocab.helpers else "",
        ))

    def arg(self, keyword_name: str | None, value: ast.expr) -> Arg:
        found = self.classify(value)
        tags = found.tags
        text = ""
        span = None
        keys = None
        if tags & (SEQ | MAX | TOK | SRC | PAD | PACKED) or (
            isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value in LAYOUT_KINDS
        ):
            text = self.source.snippet(value, 40)
            span = self.source.span(value)
        if keyword_name == "**":
            keys = self.splat_keys(value)
        params = tuple(sorted(found.params)) if found.params else ()
        if isinstance(value, ast.Name) and self.is_parameter(value.id):
            params = (value.id,)
        return Arg(keyword_name, tags, params, text, span, keys)

    def splat_items(self, value: ast.expr) -> list[tuple[str, ast.expr]]:
        """The keys and values of ``**kw`` when ``kw`` is a dict literal or ``dict(...)`` here."""
        if isinstance(value, ast.Name):
            bound = self.bound_expr(value.id)
            if bound is None:
                return []
            value = bound
        if isinstance(value, ast.Dict) and all(string_value(k) is not None for k in value.keys):
            return [(string_value(k), v) for k, v in zip(value.keys, value.values)]  # type: ignore[misc]
        if isinstance(value, ast.Call) and self.imports.qualify(value.func) == "dict" and not value.args:
            if all(k.arg is not None for k in value.keywords):
                return [(k.arg, k.value) for k in value.keywords]  # type: ignore[misc]
        return []

    def splat_keys(self, value: ast.expr) -> tuple[str, ...] | None:
        """The keys of ``**kw`` when known (see `splat_items`); None when they are not."""
        items = self.splat_items(value)
        if items:
            return tuple(key for key, _ in items)
        if isinstance(value, (ast.Dict, ast.Call)) or (isinstance(value, ast.Name) and self.bound_expr(value.id)):
            bound = value if not isinstance(value, ast.Name) else self.bound_expr(value.id)
            if isinstance(bound, ast.Dict) and not bound.keys:
                return ()
        return None

    def update_rewrite(self, node: ast.Call) -> None:
        inputs = self.vocab.owner_inputs
        for kw in node.keywords:
            if kw.arg in inputs and not self.vocab.is_token(kw.arg):
                self.add_rewrite(node, kw.arg)
                return
        for arg in node.args:
            if isinstance(arg, ast.Dict):
                for key in arg.keys:
                    name = string_value(key)
                    if name in inputs and not self.vocab.is_token(name):
                        self.add_rewrite(node, name)
                        return

    # -- alignment units combined with max() (LC106) --

    def max_of_units(self, node: ast.Call, args: list[ast.expr]) -> None:
        collection = self.idiom("max_over", node)
        if collection is not None:
            combined = self.classify(collection).has(UNIT)
        else:
            # `max(a, 1)` clamps; two or more units are being combined.
            values = [a for a in args if (n := int_value(a)) is None or n > 1]
            combined = len(values) >= 2 and any(self.classify(a).has(UNIT) for a in values)
        if combined:
            self.facts.max_calls.append(MaxCall(self.frame.index, self.source.span(node), self.source.snippet(node)))

    # -- bucket and pad-multiplier literals (LC201) --

    @staticmethod
    def _literal(value: ast.expr | None) -> ast.expr | None:
        """The literal a dataclass field defaults to: ``field(default_factory=lambda: [...])``."""
        if isinstance(value, ast.Call) and last_name(value.func) == "field":
            value = keyword(value, "default") or keyword(value, "default_factory")
            if isinstance(value, ast.Lambda):
                value = value.body
        return value

    def judge_literal(self, name: str | None, value: ast.expr | None, max_length: int | None = None) -> None:
        value = self._literal(value)
        if name is None or value is None or self.expecting_error:
            return
        vocab = self.vocab
        if vocab.is_bucket(name) and isinstance(value, (ast.List, ast.Tuple)) and value.elts:
            numbers = [int_value(e) for e in value.elts]
            if all(n is not None for n in numbers):
                self.facts.buckets.append(BucketLiteral(
                    self.source.span(value), name, "buckets", tuple(numbers), max_length,  # type: ignore[arg-type]
                ))
        if vocab.is_pad_multiplier(name):
            number = int_value(value)
            if number is not None:
                self.facts.buckets.append(BucketLiteral(self.source.span(value), name, "multiplier", (number,)))

    def bucket_call(self, node: ast.Call, tail: str, args: list[ast.expr]) -> None:
        named = [k for k in node.keywords if k.arg is not None]
        vocab = self.vocab
        if any(vocab.is_bucket(k.arg) for k in named):  # type: ignore[arg-type]
            max_length = next(
                (v for k in _MAX_LENGTH_KEYWORDS if (v := int_value(keyword(node, k))) is not None), None
            )
        else:
            max_length = None
        for kw in named:
            self.judge_literal(kw.arg, kw.value, max_length)
        if tail == "add_argument":
            # `parser.add_argument("--seq-len-buckets", nargs="+", default=[...])`
            flags = [string_value(a) for a in args]
            names = [f.lstrip("-").replace("-", "_") for f in flags if f and f.startswith("-")]
            for name in names[-1:]:
                self.judge_literal(name, keyword(node, "default"))


def _ends(body: Iterable[ast.stmt]) -> bool:
    """Does ``body`` always end in ``return`` or ``raise`` (its last statement)?"""
    last = None
    for last in body:
        pass
    if last is None:
        return False
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _ends(last.body) and _ends(last.orelse)
    return False


def _join(envs: list[dict[str, Value]], before: dict[str, Value]) -> dict[str, Value]:
    """The locals after alternative branches: each name carries what any branch gave it."""
    if len(envs) == 1:
        return envs[0]
    out = dict(envs[0])
    for env in envs[1:]:
        for name, value in env.items():
            mine = out.get(name)
            if mine is None:
                previous = before.get(name)
                out[name] = value if previous is None else previous | value
            elif mine is not value:
                out[name] = mine | value
        for name in out.keys() - env.keys():
            previous = before.get(name)
            if previous is not None and out[name] is not previous:
                out[name] = out[name] | previous
    return out
